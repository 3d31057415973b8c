#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "core/alloc.h"
#include "core/ctx.h"
#include "core/error.h"
#include "core/log.h"
#include "cudnn/bindings_cudnn.h"
#include "cudnn/cudnn_ctx.h"
#include "cudnn/plan_build_cudnn.h"
#include "cudnn/plan_cache.h"
#include "cudnn/plan_get_cudnn.h"

struct nn__cudnn_state {
    cudnnHandle_t cudnn;
    cublasHandle_t cublas;
    struct nn__plan_cache *plans;
    struct nn__plan_builder *builder;
    uint64_t cudnn_version; /* cudnnGetVersion(): what plan files are written with and read for */
    struct nn__gpu_id gpu;
};

static nn_status describe_gpu(struct nn_ctx *ctx, struct nn__gpu_id *gpu)
{
    nn_device_info info;
    nn_status st = nn_device_get_info(ctx->device, &info);
    if (st != NN_OK) return nn__error_rethrow(ctx, "nn_ctx_create: describing the GPU");
    memset(gpu, 0, sizeof *gpu);
    snprintf(gpu->name, sizeof gpu->name, "%s", info.name);
    gpu->cc_major = info.cc_major;
    gpu->cc_minor = info.cc_minor;
    gpu->sm_count = info.sm_count;
    return NN_OK;
}

/* A missing file is the normal first run; anything else wrong with it is said once on stderr and
 * the context carries on with an empty cache. */
static void load_settings_file(struct nn_ctx *ctx)
{
    const char *path = ctx->settings.plan_cache_file;
    struct stat sb;
    if (!path || (stat(path, &sb) != 0 && errno == ENOENT)) return;
    nn_error_info keep = ctx->last_error;
    if (nn__cudnn_plan_cache_load(ctx, path) != NN_OK)
        nn__log("plan cache file not used, starting with an empty cache: %s",
                ctx->last_error.message);
    ctx->last_error = keep;
    nn_plan_cache_stats st;
    nn__plan_cache_get_stats(ctx->cudnn->plans, &st);
    if (st.records_skipped)
        nn__log("plan cache file %s: %llu records of another cuDNN version or GPU skipped", path,
                (unsigned long long)st.records_skipped);
}

nn_status nn__cudnn_ctx_init(struct nn_ctx *ctx)
{
    struct nn__cudnn_state *s = nn__host_calloc(1, sizeof *s);
    if (!s) return NN__FAIL(ctx, NN_E_OOM_HOST, "nn_ctx_create: out of host memory");
    ctx->cudnn = s;
    s->cudnn_version = cudnnGetVersion();
    NN__TRY(describe_gpu(ctx, &s->gpu));
    NN__TRY(nn__plan_cache_create(ctx, ctx->settings.plan_cache_capacity, &s->plans));
    load_settings_file(ctx);
    return NN_OK;
}

void nn__cudnn_ctx_fini(struct nn_ctx *ctx)
{
    struct nn__cudnn_state *s = ctx->cudnn;
    if (!s) return;
    const char *path = ctx->settings.plan_cache_file;
    if (s->plans && path && nn__cudnn_plan_cache_save(ctx, path) != NN_OK)
        nn__log("saving the plan cache failed: %s", ctx->last_error.message);
    /* Plans are cuDNN objects: they go before the handles, the background builder's included. */
    if (s->builder) nn__plan_builder_stop(s->builder);
    nn__plan_cache_destroy(s->plans);
    nn__plan_builder_free(s->builder);
    if (s->cudnn) cudnnDestroy(s->cudnn);
    if (s->cublas) cublasDestroy(s->cublas);
    nn__host_free(s);
    ctx->cudnn = NULL;
}

struct nn__plan_cache *nn__cudnn_plan_cache(struct nn_ctx *ctx)
{
    return ctx->cudnn->plans;
}

struct nn__plan_builder **nn__cudnn_builder_slot(struct nn_ctx *ctx)
{
    return &ctx->cudnn->builder;
}

nn_status nn__cudnn_worker_ctx_create(struct nn_ctx *parent, struct nn_ctx **out)
{
    *out = NULL;
    struct nn_ctx *w = nn__host_calloc(1, sizeof *w);
    struct nn__cudnn_state *s = nn__host_calloc(1, sizeof *s);
    if (!w || !s) {
        nn__host_free(w);
        nn__host_free(s);
        return NN__FAIL(parent, NN_E_OOM_HOST, "plan builder: out of host memory");
    }
    w->settings = parent->settings;
    w->settings.plan_cache_file = NULL;
    w->device = parent->device;
    w->stream = parent->stream; /* the worker replaces it with its own (plan_build_cudnn.c) */
    w->stream_id = parent->stream_id;
    w->mem_pool = parent->mem_pool; /* borrowed: the worker stops before the context lets it go */
    s->cudnn_version = parent->cudnn->cudnn_version;
    s->gpu = parent->cudnn->gpu;
    w->cudnn = s;
    *out = w;
    return NN_OK;
}

void nn__cudnn_worker_ctx_destroy(struct nn_ctx *w)
{
    if (!w) return;
    if (w->cudnn->cudnn) cudnnDestroy(w->cudnn->cudnn);
    nn__host_free(w->cudnn);
    nn__host_free(w);
}

nn_status nn__cudnn_plan_cache_save(struct nn_ctx *ctx, const char *path)
{
    struct nn__cudnn_state *s = ctx->cudnn;
    return nn__plan_file_save(ctx, s->plans, path, s->cudnn_version, &s->gpu);
}

nn_status nn__cudnn_plan_cache_load(struct nn_ctx *ctx, const char *path)
{
    struct nn__cudnn_state *s = ctx->cudnn;
    NN__TRY(nn__plan_file_load(ctx, s->plans, path, s->cudnn_version, &s->gpu));
    nn__cudnn_plan_prebuild(ctx);
    return NN_OK;
}

nn_status nn__cudnn_handle(struct nn_ctx *ctx, cudnnHandle_t *out)
{
    struct nn__cudnn_state *s = ctx->cudnn;
    if (!s->cudnn) {
        cudnnHandle_t h;
        cudnnStatus_t st = cudnnCreate(&h);
        if (st != CUDNN_STATUS_SUCCESS)
            return nn__cudnn_fail(ctx, st, "cudnnCreate", __FILE__, __LINE__);
        st = cudnnSetStream(h, (cudaStream_t)ctx->stream);
        if (st != CUDNN_STATUS_SUCCESS) {
            nn_status failed = nn__cudnn_fail(ctx, st, "cudnnSetStream", __FILE__, __LINE__);
            cudnnDestroy(h);
            return failed;
        }
        s->cudnn = h;
    }
    *out = s->cudnn;
    return NN_OK;
}

nn_status nn__cublas_handle(struct nn_ctx *ctx, cublasHandle_t *out)
{
    struct nn__cudnn_state *s = ctx->cudnn;
    if (!s->cublas) {
        cublasHandle_t h;
        cublasStatus_t st = cublasCreate(&h);
        if (st == CUBLAS_STATUS_SUCCESS) {
            st = cublasSetStream(h, (cudaStream_t)ctx->stream);
            if (st != CUBLAS_STATUS_SUCCESS) cublasDestroy(h);
        }
        if (st != CUBLAS_STATUS_SUCCESS)
            return nn__record_error(
                ctx, NN_E_CUBLAS, "cublasCreate", (int)st, cublasGetStatusName(st), __FILE__,
                __LINE__, "creating the cuBLAS handle failed: %s", cublasGetStatusString(st));
        s->cublas = h;
    }
    *out = s->cublas;
    return NN_OK;
}

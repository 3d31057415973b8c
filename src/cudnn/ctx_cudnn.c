/* The cuDNN layer's per-context state over its life (cudnn_ctx.h): created with the plan file
 * loaded and its plans queued for prebuilding, saved and released at the end. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "core/cuda_load.h"

#include "core/alloc.h"
#include "core/ctx.h"
#include "core/cuda_util.h"
#include "core/error.h"
#include "core/log.h"
#include "cudnn/bindings_cudnn.h"
#include "cudnn/cache.h"
#include "cudnn/cudnn_ctx.h"
#include "cudnn/plan_build_cudnn.h"
#include "cudnn/plan_file.h"
#include "cudnn/plan_get_cudnn.h"
#include "mem/mem.h"
#include "nnprim/context.h"

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
    struct nn__error_kept keep = nn__error_keep(ctx);
    if (nn__cudnn_plan_cache_load(ctx, path) != NN_OK)
        nn__warn(ctx->settings.verbose,
                 "plan cache file not used, starting with an empty cache: %s",
                 ctx->last_error.message);
    nn__error_restore(ctx, &keep);
    nn_plan_cache_stats st;
    nn__cache_get_stats(ctx->cudnn->plans, &st);
    if (st.records_skipped)
        nn__warn(ctx->settings.verbose,
                 "plan cache file %s: %llu records of another cuDNN version or GPU skipped", path,
                 (unsigned long long)st.records_skipped);
}

nn_status nn__cudnn_ctx_init(struct nn_ctx *ctx, const struct nn__cache_kind *const *table, int n,
                             const struct nn__graph_kind *const *graphs, int ng)
{
    struct nn__cudnn_state *s = nn__host_calloc(1, sizeof *s);
    if (!s) return NN__FAIL(ctx, NN_E_OOM_HOST, "nn_ctx_create: out of host memory");
    ctx->cudnn = s;
    s->graph_kinds = graphs;
    s->n_graph_kinds = ng;
    s->cudnn_version = cudnnGetVersion();
    s->fork_gen = nn__cudnn_fork_generation();
    NN__TRY(describe_gpu(ctx, &s->gpu));
    NN__TRY(nn__cache_create(ctx, table, n, ctx->settings.plan_cache_capacity, &s->plans));
    NN__TRY(nn__cache_share_device(ctx, s->plans, ctx->device));
    load_settings_file(ctx);
    return NN_OK;
}

void nn__cudnn_ctx_fini(struct nn_ctx *ctx)
{
    struct nn__cudnn_state *s = ctx->cudnn;
    if (!s) return;
    const char *path = ctx->settings.plan_cache_file;
    if (s->plans && path && nn__cudnn_plan_cache_save(ctx, path) != NN_OK)
        nn__warn(ctx->settings.verbose, "saving the plan cache failed: %s",
                 ctx->last_error.message);
    /* Plans are cuDNN objects: they go before the handles, the background builder's included. */
    if (s->builder) nn__plan_builder_stop(s->builder);
    nn__cache_destroy(s->plans);
    nn__plan_builder_free(s->builder);
    nn__cudnn_handle_destroy(ctx, s->cudnn);
    if (s->cublaslt) cublasLtDestroy(s->cublaslt);
    if (s->lt_ws) {
        nn__cudnn_shared_release(ctx); /* the free waits for the last product that used it */
        (void)nn__dev_free(ctx, s->lt_ws);
    }
    if (s->shared_ev) cudaEventDestroy(s->shared_ev);
    if (s->capture_stream) cudaStreamDestroy((cudaStream_t)s->capture_stream);
    nn__host_free(s);
    ctx->cudnn = NULL;
}

static int shared_event(struct nn__cudnn_state *s)
{
    if (s->shared_ev) return 1;
    if (cudaEventCreateWithFlags(&s->shared_ev, cudaEventDisableTiming) == cudaSuccess) return 1;
    (void)cudaGetLastError();
    s->shared_ev = NULL;
    return 0;
}

/* ctx's stream waits for the last call that used shared buffers. An unrecorded last call ran
 * before the context first switched streams, so on the stream that lives as long as it. */
static void shared_wait(struct nn_ctx *ctx, struct nn__cudnn_state *s)
{
    if (!s->shared_used || s->shared_sid == ctx->stream_id) return;
    int ok = shared_event(s);
    if (ok && !s->shared_recorded) {
        ok = cudaEventRecord(s->shared_ev, (cudaStream_t)s->shared_stream) == cudaSuccess;
        s->shared_recorded = ok;
    }
    if (ok) ok = cudaStreamWaitEvent((cudaStream_t)ctx->stream, s->shared_ev, 0) == cudaSuccess;
    if (ok) return;
    (void)cudaGetLastError();
    if (!s->shared_recorded || cudaEventSynchronize(s->shared_ev) != cudaSuccess)
        (void)cudaStreamSynchronize((cudaStream_t)s->shared_stream);
    (void)cudaGetLastError();
    s->shared_used = 0; /* the host waited: nothing shared is in use */
}

void nn__cudnn_shared_enter(struct nn_ctx *ctx)
{
    struct nn__cudnn_state *s = ctx->cudnn;
    if (!s) return;
    shared_wait(ctx, s);
    s->shared_used = 1;
    s->shared_recorded = 0;
    s->shared_stream = ctx->stream;
    s->shared_sid = ctx->stream_id;
}

void nn__cudnn_shared_release(struct nn_ctx *ctx)
{
    if (ctx->cudnn) shared_wait(ctx, ctx->cudnn);
}

void nn__cudnn_shared_leave(struct nn_ctx *ctx)
{
    struct nn__cudnn_state *s = ctx->cudnn;
    /* Inside a graph capture the event would be recorded into the graph, and no wait outside it
     * may use it: the launch records the graph's end instead (src/graph). */
    if (!s || !ctx->stream_switched || ctx->capture) return;
    if (shared_event(s) &&
        cudaEventRecord(s->shared_ev, (cudaStream_t)ctx->stream) == cudaSuccess) {
        s->shared_recorded = 1;
        return;
    }
    /* No event: wait here, so that the next call on any stream finds the buffers idle. */
    (void)cudaGetLastError();
    (void)cudaStreamSynchronize((cudaStream_t)ctx->stream);
    (void)cudaGetLastError();
    s->shared_used = 0;
}

nn_status nn__cudnn_capture(struct nn_ctx *ctx, nn_status (*fn)(void *arg), void *arg,
                            cudaGraph_t *out)
{
    *out = NULL;
    if (ctx->stream_capturable) return nn__stream_capture(ctx, fn, arg, out);
    struct nn__cudnn_state *s = ctx->cudnn;
    if (!s->capture_stream) {
        cudaStream_t cs;
        NN__TRY(NN__CUDA(ctx, cudaStreamCreateWithFlags(&cs, cudaStreamNonBlocking)));
        nn_status st = NN__CUDA(ctx, cudaStreamGetId(cs, &s->capture_sid));
        if (st != NN_OK) {
            cudaStreamDestroy(cs);
            return st;
        }
        s->capture_stream = cs;
    }
    void *stream = ctx->stream;
    unsigned long long sid = ctx->stream_id;
    NN__TRY(nn__cudnn_ctx_set_stream(ctx, s->capture_stream));
    ctx->stream = s->capture_stream;
    ctx->stream_id = s->capture_sid;
    nn_status st = nn__stream_capture(ctx, fn, arg, out);
    ctx->stream = stream;
    ctx->stream_id = sid;
    nn_status back = nn__cudnn_ctx_set_stream(ctx, stream);
    if (back != NN_OK && st == NN_OK) {
        if (*out) cudaGraphDestroy(*out);
        *out = NULL;
        st = back;
    }
    return st;
}

nn_status nn__cudnn_ctx_set_stream(struct nn_ctx *ctx, void *stream)
{
    struct nn__cudnn_state *s = ctx->cudnn;
    if (!s || !s->cudnn) return NN_OK; /* a handle made later takes ctx->stream then */
    return nn__cudnn_SetStream(ctx, s->cudnn, (cudaStream_t)stream);
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
    /* Families that prepare their loaded records' objects here (cache.h: loaded). */
    for (uint32_t id = 1; ctx->settings.prebuild_plans && id <= NN__CACHE_KIND_ID_MAX; id++) {
        const struct nn__cache_kind *k = nn__cache_kind_of(s->plans, id);
        if (k && k->loaded) k->loaded(ctx);
    }
    return NN_OK;
}

/* Context creation and destruction: the one place that assembles every layer's per-context
 * state (core settings and stream, the device's memory pool, the cuDNN layer). */
#include <string.h>

#include "nn_config.h"

#include "core/alloc.h"
#include "core/ctx.h"
#include "core/cuda_util.h"
#include "core/error.h"
#include "core/log.h"
#include "core/settings.h"
#include "cudnn/cudnn_ctx.h"
#if NN_HAVE_CUDNN
#include "conv/conv_graph_cudnn.h"
#include "linear/linear_internal.h"
#endif
#include "mem/mem.h"
#include "rnn/rnn_internal.h"

size_t nn_cudnn_runtime_version(void)
{
#if NN_HAVE_CUDNN
    return cudnnGetVersion();
#else
    return 0;
#endif
}

/* AUTO becomes CUDNN only where everything it needs is there; say once why it did not. */
static nn_status resolve_backend(nn_settings *s)
{
    int devices = nn__cuda_device_count();
    if (s->backend == NN_BACKEND_CUDNN) {
        if (!NN_HAVE_CUDNN)
            return NN__FAIL(NULL, NN_E_NOT_BUILT,
                            "nn_ctx_create: backend cudnn requested, but this build of nnprim has "
                            "no cuDNN (rebuild with -Dcudnn=enabled)");
        if (s->device >= devices)
            return NN__FAIL(NULL, NN_E_NO_DEVICE,
                            "nn_ctx_create: backend cudnn on device %d, but %d CUDA device(s) are "
                            "usable",
                            s->device, devices);
        return NN_OK;
    }
    if (s->backend == NN_BACKEND_AUTO) {
        if (NN_HAVE_CUDNN && s->device < devices) {
            s->backend = NN_BACKEND_CUDNN;
        } else {
            static int said;
            if (!__atomic_exchange_n(&said, 1, __ATOMIC_RELAXED))
                nn__warn(s->verbose, "backend auto: %s; using the reference backend",
                         !NN_HAVE_CUDNN ? "this build has no cuDNN"
                         : devices == 0 ? "no usable CUDA device (no driver or no GPU)"
                                        : "the requested device ordinal is out of range");
            s->backend = NN_BACKEND_REF;
        }
    }
    return NN_OK;
}

#if NN_HAVE_CUDNN
static nn_status open_stream(nn_ctx *ctx, void *given)
{
    NN__TRY(NN__CUDA(ctx, cudaSetDevice(ctx->device)));
    cudaStream_t s = (cudaStream_t)given;
    if (!s) {
        NN__TRY(NN__CUDA(ctx, cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking)));
        ctx->owns_stream = 1;
    }
    ctx->stream = s;
    return NN__CUDA(ctx, cudaStreamGetId(s, &ctx->stream_id));
}
#endif

#if NN_HAVE_CUDNN
/* Every entry kind of the context's cache, one per family's kind (register a new kind here). */
static const struct nn__cache_kind *const cache_kinds[] = {
    &nn__conv_plan_kind,
    &nn__rnn_cudnn_kind,
    &nn__rnn_cudnn_dropout_kind,
    &nn__linear_matmul_kind,
};

/* Every graph kind (a family's graphs built from its cache kind's keys), so that the plans of a
 * loaded plan file can be prebuilt (register a new graph kind here). */
static const struct nn__graph_kind *const graph_kinds[] = {
    &nn__conv_graph_kind,
};
#endif

static nn_status open_gpu(nn_ctx *ctx)
{
#if NN_HAVE_CUDNN
    NN__TRY(open_stream(ctx, ctx->settings.stream));
    NN__TRY(nn__mem_ctx_init(ctx));
    return nn__cudnn_ctx_init(ctx, cache_kinds, (int)(sizeof cache_kinds / sizeof *cache_kinds),
                              graph_kinds, (int)(sizeof graph_kinds / sizeof *graph_kinds));
#else
    return NN__FAIL(ctx, NN_E_NOT_BUILT, "nn_ctx_create: this build of nnprim has no cuDNN");
#endif
}

static void close_gpu(nn_ctx *ctx)
{
#if NN_HAVE_CUDNN
    if (ctx->stream) (void)cudaStreamSynchronize((cudaStream_t)ctx->stream);
    nn__cudnn_ctx_fini(ctx);
    nn__mem_ctx_fini(ctx);
    if (ctx->owns_stream && ctx->stream) cudaStreamDestroy((cudaStream_t)ctx->stream);
    ctx->stream = NULL;
#else
    (void)ctx;
#endif
}

nn_status nn_ctx_create(nn_ctx **out, const nn_settings *settings)
{
    if (!out) return NN__FAIL(NULL, NN_E_INVALID_ARG, "nn_ctx_create: out must not be NULL");
    *out = NULL;
    nn_settings s;
    if (settings)
        s = *settings;
    else if (nn_default_settings(&s) != NN_OK)
        return nn__error_rethrow(NULL, "nn_ctx_create");
    NN__TRY(nn__settings_check(&s));
    NN__TRY(resolve_backend(&s));

    nn_ctx *ctx = nn__host_calloc(1, sizeof *ctx);
    if (!ctx) return NN__FAIL(NULL, NN_E_OOM_HOST, "nn_ctx_create: out of host memory");
    ctx->settings = s;
    ctx->settings.plan_cache_file = NULL;
    ctx->device = s.backend == NN_BACKEND_CUDNN ? s.device : -1;
    nn_status st = NN_OK;
    if (s.plan_cache_file && s.plan_cache_file[0]) {
        ctx->settings.plan_cache_file = nn__host_strdup(s.plan_cache_file);
        if (!ctx->settings.plan_cache_file)
            st = NN__FAIL(NULL, NN_E_OOM_HOST, "nn_ctx_create: out of host memory");
    }
    if (st == NN_OK && s.backend == NN_BACKEND_CUDNN) st = open_gpu(ctx);
    if (st != NN_OK) {
        nn__error_rethrow(NULL, NULL);
        nn_ctx_destroy(ctx);
        return st;
    }
    nn__verbose_header(ctx);
    *out = ctx;
    return NN_OK;
}

void nn_ctx_destroy(nn_ctx *ctx)
{
    if (!ctx) return;
    if (nn__ctx_on_gpu(ctx)) close_gpu(ctx);
    nn__host_free((void *)ctx->settings.plan_cache_file);
    nn__host_free(ctx);
}

nn_status nn_ctx_get_settings(const nn_ctx *ctx, nn_settings *out)
{
    if (!ctx || !out)
        return NN__FAIL(NULL, NN_E_INVALID_ARG,
                        "nn_ctx_get_settings: ctx and out must not be NULL");
    *out = ctx->settings;
    if (!nn__ctx_on_gpu(ctx))
        out->stream = NULL;
    else
        out->stream = ctx->stream;
    return NN_OK;
}

nn_backend nn_ctx_backend(const nn_ctx *ctx)
{
    return ctx->settings.backend;
}

void *nn_ctx_stream(const nn_ctx *ctx)
{
    return ctx->stream;
}

nn_status nn_ctx_synchronize(nn_ctx *ctx)
{
    if (!ctx) return NN__FAIL(NULL, NN_E_INVALID_ARG, "nn_ctx_synchronize: ctx must not be NULL");
#if NN_HAVE_CUDA
    if (ctx->stream) return NN__CUDA(ctx, cudaStreamSynchronize((cudaStream_t)ctx->stream));
#endif
    return NN_OK;
}

nn_status nn_ctx_last_error(const nn_ctx *ctx, nn_error_info *out)
{
    if (!ctx || !out)
        return NN__FAIL(NULL, NN_E_INVALID_ARG, "nn_ctx_last_error: ctx and out must not be NULL");
    *out = ctx->last_error;
    return NN_OK;
}

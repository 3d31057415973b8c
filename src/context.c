/* Context creation and destruction: the one place that assembles every layer's per-context
 * state (core settings and stream, the device's memory pool, the cuDNN layer). */
#include <string.h>

#include "nn_config.h"

#include "core/alloc.h"
#include "core/capture.h"
#include "core/ctx.h"
#include "core/cuda_util.h"
#include "core/error.h"
#include "core/log.h"
#include "core/settings.h"
#include "cudnn/cudnn_ctx.h"
#include "graph/graph_internal.h"
#if NN_HAVE_CUDNN
#include "conv/conv_graph_cudnn.h"
#include "cudnn/plan_build_cudnn.h"
#include "linear/linear_internal.h"
#include "softmax/softmax_internal.h"
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

/* AUTO becomes CUDNN only where everything it needs is there; say once why it did not. The
 * CUDA runtime is loaded first, cuDNN and cuBLASLt only where there is a device to use. */
static nn_status resolve_backend(nn_settings *s)
{
    const char *no_cudart = NN_HAVE_CUDNN ? nn__dl_problem(NN__DL_CUDART) : NULL;
    int devices = nn__cuda_device_count();
    const char *no_lib = no_cudart;
    if (NN_HAVE_CUDNN && !no_lib && s->device < devices) no_lib = nn__dl_backend_problem();
    if (s->backend == NN_BACKEND_CUDNN) {
        if (!NN_HAVE_CUDNN)
            return NN__FAIL(NULL, NN_E_NOT_BUILT,
                            "nn_ctx_create: backend cudnn requested, but this build of nnprim has "
                            "no cuDNN (rebuild with -Dcudnn=enabled)");
        if (no_lib)
            return NN__FAIL(NULL, NN_E_NO_DEVICE, "nn_ctx_create: backend cudnn requested, but %s",
                            no_lib);
        if (s->device >= devices)
            return NN__FAIL(NULL, NN_E_NO_DEVICE,
                            "nn_ctx_create: backend cudnn on device %d, but %d CUDA device(s) are "
                            "usable",
                            s->device, devices);
        return NN_OK;
    }
    if (s->backend == NN_BACKEND_AUTO) {
        if (NN_HAVE_CUDNN && !no_lib && s->device < devices) {
            s->backend = NN_BACKEND_CUDNN;
        } else {
            static int said;
            if (!__atomic_exchange_n(&said, 1, __ATOMIC_RELAXED))
                nn__warn(s->verbose, "backend auto: %s; using the reference backend",
                         !NN_HAVE_CUDNN ? "this build has no cuDNN"
                         : no_lib       ? no_lib
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
    ctx->stream = ctx->home_stream = s;
    ctx->stream_capturable = nn__stream_can_capture(s);
    NN__TRY(NN__CUDA(ctx, cudaStreamGetId(s, &ctx->stream_id)));
    ctx->home_stream_id = ctx->stream_id;
    return NN_OK;
}
#endif

#if NN_HAVE_CUDNN
/* Every entry kind of the context's cache, one per family's kind (register a new kind here). */
static const struct nn__cache_kind *const cache_kinds[] = {
    &nn__conv_plan_kind,     &nn__rnn_cudnn_kind,    &nn__rnn_cudnn_dropout_kind,
    &nn__linear_matmul_kind, &nn__softmax_xent_kind, &nn__conv_ones_kind,
};

/* Every graph kind (a family's graphs built from its cache kind's keys), so that the plans of a
 * loaded plan file can be prebuilt (register a new graph kind here). */
static const struct nn__graph_kind *const graph_kinds[] = {
    &nn__conv_graph_kind,
};
#endif

const struct nn__cache_kind *const *nn__ctx_cache_kinds(int *n)
{
#if NN_HAVE_CUDNN
    *n = (int)(sizeof cache_kinds / sizeof *cache_kinds);
    return cache_kinds;
#else
    *n = 0;
    return NULL;
#endif
}

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
    if (nn__cudnn_ctx_inherited(ctx)) { /* a fork()'s child: host memory only, no CUDA call */
        nn__cudnn_ctx_abandon(ctx);
        return;
    }
    /* The pool holds a reference on the current stream only (set in nn__mem_ctx_init, moved by
     * nn_ctx_set_stream); NULL is a stream here (the legacy default one). */
    if (ctx->mem_pool) {
        (void)cudaStreamSynchronize((cudaStream_t)ctx->stream);
        if (ctx->home_stream != ctx->stream)
            (void)cudaStreamSynchronize((cudaStream_t)ctx->home_stream);
    }
    nn__graph_ctx_fini(ctx);
    nn__cudnn_ctx_fini(ctx);
    if (ctx->order_event) (void)cudaEventDestroy((cudaEvent_t)ctx->order_event);
    ctx->order_event = NULL;
    nn__mem_ctx_fini(ctx);
    if (ctx->owns_stream && ctx->home_stream) cudaStreamDestroy((cudaStream_t)ctx->home_stream);
    (void)cudaGetLastError();
    ctx->stream = ctx->home_stream = NULL;
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
    else if (nn_settings_from_env(&s) != NN_OK)
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
    nn__verbose_header(ctx, nn_cudnn_runtime_version());
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
    if (!ctx) return NN__FAIL(NULL, NN_E_INVALID_ARG, "nn_ctx_get_settings: ctx must not be NULL");
    if (!out) return NN__FAIL(ctx, NN_E_INVALID_ARG, "nn_ctx_get_settings: out must not be NULL");
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

#if NN_HAVE_CUDNN
/* cudaStreamGetDevice cannot place these: they name a stream of the calling thread's device. */
static int special_stream(cudaStream_t s)
{
    return !s || s == cudaStreamLegacy || s == cudaStreamPerThread;
}

/* A CUDA failure while looking at the caller's handle: the handle is what is wrong. */
static nn_status not_a_stream(nn_ctx *ctx, void *stream, const char *call, cudaError_t err)
{
    (void)cudaGetLastError();
    return NN__FAIL(ctx, NN_E_INVALID_ARG,
                    "nn_ctx_set_stream: stream %p is not a usable CUDA stream (%s: %s)", stream,
                    call, cudaGetErrorString(err));
}

/* What can be checked of a framework's stream without touching its work: that it is not being
 * captured (asked first: a capture may refuse other calls), its device, and its id. */
static nn_status check_stream(nn_ctx *ctx, cudaStream_t s, unsigned long long *id)
{
    const char *fn = "nn_ctx_set_stream";
    enum cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
    cudaError_t err = cudaStreamIsCapturing(s, &cs);
    if (err != cudaSuccess) return not_a_stream(ctx, s, "cudaStreamIsCapturing", err);
    if (cs != cudaStreamCaptureStatusNone)
        return NN__FAIL(ctx, NN_E_UNSUPPORTED,
                        "%s: stream %p is being captured into a CUDA graph; nnprim captures its "
                        "calls itself (nn_graph_begin, graph.h), on the context's stream",
                        fn, (void *)s);
#if CUDART_VERSION >= 12080
    if (!special_stream(s)) {
        int dev = -1;
        if ((err = cudaStreamGetDevice(s, &dev)) != cudaSuccess)
            return not_a_stream(ctx, s, "cudaStreamGetDevice", err);
        if (dev != ctx->device)
            return NN__FAIL(ctx, NN_E_INVALID_ARG,
                            "%s: stream %p belongs to device %d, but the context computes on "
                            "device %d",
                            fn, (void *)s, dev, ctx->device);
    }
#else
    (void)special_stream;
#endif
    if ((err = cudaStreamGetId(s, id)) != cudaSuccess)
        return not_a_stream(ctx, s, "cudaStreamGetId", err);
    return NN_OK;
}

/* Everything that holds the stream follows: the pool's reference (the stream left behind is
 * retired with an event, no host wait), the cuDNN handle. Other layers read ctx->stream at each
 * call. */
static nn_status switch_stream(nn_ctx *ctx, cudaStream_t s)
{
    unsigned long long id;
    NN__TRY(check_stream(ctx, s, &id));
    int other = id != ctx->stream_id;
    if (other) NN__TRY(nn__mem_ctx_enter(ctx, s, id, "nn_ctx_set_stream"));
    nn_status st = nn__cudnn_ctx_set_stream(ctx, s);
    if (st != NN_OK) {
        if (other) nn__mem_ctx_leave(ctx, s, id);
        return nn__error_in(ctx, "nn_ctx_set_stream");
    }
    if (other) {
        nn__mem_ctx_leave(ctx, ctx->stream, ctx->stream_id);
        ctx->stream_switched = 1;
    }
    ctx->stream = s;
    ctx->stream_id = id;
    ctx->stream_capturable = nn__stream_can_capture(s);
    return NN_OK;
}
#endif

nn_status nn_ctx_set_stream(nn_ctx *ctx, void *stream)
{
    if (!ctx) return NN__FAIL(NULL, NN_E_INVALID_ARG, "nn_ctx_set_stream: ctx must not be NULL");
    /* The reference backend computes on the calling thread: it has no stream to follow. */
    if (!nn__ctx_on_gpu(ctx) || stream == ctx->stream) return NN_OK;
    if (ctx->capture)
        return NN__FAIL(ctx, NN_E_GRAPH,
                        "nn_ctx_set_stream: a graph capture is open on the context (it records "
                        "the stream it began on): end it with nn_graph_end() first");
#if NN_HAVE_CUDNN
    return switch_stream(ctx, (cudaStream_t)stream);
#else
    return NN_OK;
#endif
}

nn_status nn_ctx_get_stream(const nn_ctx *ctx, void **out)
{
    if (!ctx) return NN__FAIL(NULL, NN_E_INVALID_ARG, "nn_ctx_get_stream: ctx must not be NULL");
    if (!out) return NN__FAIL(ctx, NN_E_INVALID_ARG, "nn_ctx_get_stream: out must not be NULL");
    *out = ctx->stream;
    return NN_OK;
}

nn_status nn_ctx_synchronize(nn_ctx *ctx)
{
    if (!ctx) return NN__FAIL(NULL, NN_E_INVALID_ARG, "nn_ctx_synchronize: ctx must not be NULL");
    if (ctx->capture)
        return NN__FAIL(ctx, NN_E_GRAPH,
                        "nn_ctx_synchronize: a graph capture is open on the context: its calls are "
                        "recorded, not run, and the host cannot wait for them; end it with "
                        "nn_graph_end() first");
#if NN_HAVE_CUDA
    if (nn__ctx_on_gpu(ctx)) return NN__CUDA(ctx, cudaStreamSynchronize((cudaStream_t)ctx->stream));
#endif
    return NN_OK;
}

nn_status nn_ctx_last_error(const nn_ctx *ctx, nn_error_info *out)
{
    if (!ctx) return NN__FAIL(NULL, NN_E_INVALID_ARG, "nn_ctx_last_error: ctx must not be NULL");
    if (!out) return NN__FAIL(ctx, NN_E_INVALID_ARG, "nn_ctx_last_error: out must not be NULL");
    *out = ctx->last_error;
    return NN_OK;
}

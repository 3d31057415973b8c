#include <pthread.h>
#include <stdio.h>

#include "core/ctx.h"
#include "core/cuda_util.h"
#include "core/error.h"

#if NN_HAVE_CUDA
nn_status nn__cuda_fail(struct nn_ctx *ctx, cudaError_t err, const char *call, const char *file,
                        int line)
{
    nn_status st = NN_E_CUDA;
    if (err == cudaErrorMemoryAllocation)
        st = NN_E_OOM_DEVICE;
    else if (err == cudaErrorNoDevice || err == cudaErrorInsufficientDriver ||
             err == cudaErrorInvalidDevice)
        st = NN_E_NO_DEVICE;
    /* Clear the non-sticky error so the next call does not report it again. */
    (void)cudaGetLastError();
    char fn[NN_ERROR_NAME_MAX];
    size_t n = 0;
    while (call[n] && call[n] != '(' && n + 1 < sizeof fn) {
        fn[n] = call[n];
        n++;
    }
    fn[n] = 0;
    return nn__record_error(ctx, st, fn, (int)err, cudaGetErrorName(err), file, line, "%s: %s", fn,
                            cudaGetErrorString(err));
}

_Thread_local uint64_t nn__cuda_t0;

nn_status nn__cuda_traced(struct nn_ctx *ctx, cudaError_t err, const char *call, const char *file,
                          int line)
{
    double us = (double)(nn__now_ns() - nn__cuda_t0) / 1e3;
    char text[512];
    snprintf(text, sizeof text, "nnprim_trace,cuda,%s,%s,%.2f us", call, cudaGetErrorName(err), us);
    nn__log_line(NN_LOG_TRACE, text);
    return nn__cuda_check(ctx, err, call, file, line);
}

int nn__stream_can_capture(void *stream)
{
    cudaStream_t s = (cudaStream_t)stream;
    unsigned flags = 0;
    if (!s || s == cudaStreamLegacy || s == cudaStreamPerThread) return 0;
    if (cudaStreamGetFlags(s, &flags) != cudaSuccess) {
        (void)cudaGetLastError();
        return 0;
    }
    return (flags & cudaStreamNonBlocking) != 0;
}

nn_status nn__stream_capture_begin(struct nn_ctx *ctx)
{
    return NN__CUDA(
        ctx, cudaStreamBeginCapture((cudaStream_t)ctx->stream, cudaStreamCaptureModeRelaxed));
}

nn_status nn__stream_capture_end(struct nn_ctx *ctx, nn_status st, cudaGraph_t *out)
{
    *out = NULL;
    cudaError_t end = cudaStreamEndCapture((cudaStream_t)ctx->stream, out);
    if (st == NN_OK) st = NN__CUDA(ctx, end);
    if (st != NN_OK) {
        (void)cudaGetLastError();
        if (*out) cudaGraphDestroy(*out);
        *out = NULL;
    }
    return st;
}

nn_status nn__stream_capture(struct nn_ctx *ctx, nn_status (*fn)(void *arg), void *arg,
                             cudaGraph_t *out)
{
    *out = NULL;
    NN__TRY(nn__stream_capture_begin(ctx));
    return nn__stream_capture_end(ctx, fn(arg), out);
}

nn_status nn__stream_follow(struct nn_ctx *ctx, const char *fn, void **stream,
                            unsigned long long *stream_id)
{
    if (!nn__ctx_on_gpu(ctx) || *stream_id == ctx->stream_id) return NN_OK;
    cudaEvent_t ev = (cudaEvent_t)ctx->order_event;
    if (!ev) {
        if (NN__CUDA(ctx, cudaEventCreateWithFlags(&ev, cudaEventDisableTiming)) != NN_OK)
            return nn__error_in(ctx, fn);
        ctx->order_event = ev;
    }
    if (NN__CUDA(ctx, cudaEventRecord(ev, (cudaStream_t)*stream)) != NN_OK ||
        NN__CUDA(ctx, cudaStreamWaitEvent((cudaStream_t)ctx->stream, ev, 0)) != NN_OK)
        return nn__error_in(ctx, fn);
    *stream = ctx->stream;
    *stream_id = ctx->stream_id;
    return NN_OK;
}

static int nn__devices;
static pthread_once_t nn__devices_once = PTHREAD_ONCE_INIT;

static void count_devices(void)
{
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        (void)cudaGetLastError();
        n = 0;
    }
    nn__devices = n;
}

int nn__cuda_device_count(void)
{
    pthread_once(&nn__devices_once, count_devices);
    return nn__devices;
}
#else
int nn__cuda_device_count(void)
{
    return 0;
}

nn_status nn__stream_follow(struct nn_ctx *ctx, const char *fn, void **stream,
                            unsigned long long *stream_id)
{
    (void)ctx, (void)fn, (void)stream, (void)stream_id; /* no GPU context in this build */
    return NN_OK;
}
#endif

/* Checked CUDA runtime calls: a failure is recorded with the function name, the raw error and
 * CUDA's own message, and becomes an nn_status. Only for files compiled with NN_HAVE_CUDA, but for
 * nn__stream_follow() and nn__cuda_device_count(), which every build has. */
#ifndef NN_CORE_CUDA_UTIL_H
#define NN_CORE_CUDA_UTIL_H

#include "nn_config.h"

#include "core/cuda_load.h"
#include "nnprim/status.h"

struct nn_ctx;

#if NN_HAVE_CUDA

#include "error.h"
#include "log.h"

nn_status nn__cuda_fail(struct nn_ctx *ctx, cudaError_t err, const char *call, const char *file,
                        int line);

/* Evaluates to NN_OK or the recorded status. cudaErrorMemoryAllocation maps to NN_E_OOM_DEVICE.
 * At verbose level 2 the call is traced with its duration (the comma operator takes the start
 * time before the call is evaluated). */
#define NN__CUDA(ctx, call)                                                                        \
    (nn__verbose(ctx) >= 2                                                                         \
         ? (nn__cuda_t0 = nn__now_ns(), nn__cuda_traced((ctx), (call), #call, __FILE__, __LINE__)) \
         : nn__cuda_check((ctx), (call), #call, __FILE__, __LINE__))

extern _Thread_local uint64_t nn__cuda_t0;
nn_status nn__cuda_traced(struct nn_ctx *ctx, cudaError_t err, const char *call, const char *file,
                          int line);

static inline nn_status nn__cuda_check(struct nn_ctx *ctx, cudaError_t err, const char *call,
                                       const char *file, int line)
{
    return err == cudaSuccess ? NN_OK : nn__cuda_fail(ctx, err, call, file, line);
}

/* Whether nnprim may capture on stream s itself: not the legacy default stream (it cannot be
 * captured) nor the per-thread one (it would serialise with unrelated work), and only a
 * non-blocking stream: while a blocking stream is being captured, another thread's work on the
 * legacy default stream fails (cudaErrorStreamCaptureImplicit), and that thread may be the
 * framework's. Asked when a context's stream is set. A whole-step capture needs such a stream;
 * a per-call replay captures elsewhere when the stream is not one (nn__cudnn_capture). */
int nn__stream_can_capture(void *s);

/* The one way nnprim captures its work: a per-call replay (recurrent layers, linear products)
 * and a whole-step graph (include/nnprim/graph.h) alike. begin starts capturing ctx's stream in
 * relaxed mode (another thread's context may call cudaMalloc meanwhile); end stops it and gives
 * the graph in *out, or, when st (the status of what was captured) or the capture failed, destroys
 * it, sets *out NULL and returns the failure (recorded), leaving no CUDA error pending.
 * nn__stream_capture() captures the work fn(arg) queues between the two. */
nn_status nn__stream_capture_begin(struct nn_ctx *ctx);
nn_status nn__stream_capture_end(struct nn_ctx *ctx, nn_status st, cudaGraph_t *out);

nn_status nn__stream_capture(struct nn_ctx *ctx, nn_status (*fn)(void *arg), void *arg,
                             cudaGraph_t *out);
#endif

/* Order what ctx queues from now after the work queued so far on *stream, the stream (of id
 * *stream_id) that an object of ctx's last used: when ctx has switched to another stream since,
 * ctx's stream waits for an event recorded on *stream now (no host wait; the event is the
 * context's order_event, made on first use), and *stream, *stream_id become ctx's. Nothing to do
 * on the same stream or a reference context. NN_OK; NN_E_CUDA (the message naming fn). */
nn_status nn__stream_follow(struct nn_ctx *ctx, const char *fn, void **stream,
                            unsigned long long *stream_id);

/* Number of usable devices, 0 when there is no CUDA, driver or device (no error recorded).
 * Safe to call often: the answer is computed once per process. */
int nn__cuda_device_count(void);

#endif

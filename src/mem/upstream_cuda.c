/* The CUDA upstream: segments from cudaMalloc, or from cudaMallocAsync on the device's default
 * memory pool with its release threshold raised (so the driver keeps freed memory instead of
 * returning it at every synchronisation). Events are created without timing. Calls that change
 * the current device restore it. */
#include "nn_config.h"

#if NN_HAVE_CUDA
#include <stdint.h>

#include "core/alloc.h"
#include "core/cuda_util.h"
#include "core/error.h"
#include "mem/mem_pool.h"

struct cuda_up {
    int device;
    int async;
};

/* Make dev current; *prev receives the previous device (or -1 if it could not be read). */
static nn_status enter(int dev, int *prev, struct nn_ctx *ectx)
{
    *prev = -1;
    if (cudaGetDevice(prev) != cudaSuccess) {
        (void)cudaGetLastError();
        *prev = -1;
    }
    if (*prev == dev) return NN_OK;
    return NN__CUDA(ectx, cudaSetDevice(dev));
}

static void leave(int dev, int prev)
{
    if (prev >= 0 && prev != dev) (void)cudaSetDevice(prev);
}

static nn_status cuda_seg_alloc(void *st, size_t bytes, void *stream, void **out,
                                struct nn_ctx *ectx)
{
    struct cuda_up *u = st;
    int prev;
    *out = NULL;
    nn_status s = enter(u->device, &prev, ectx);
    if (s == NN_OK) {
        if (u->async)
            s = NN__CUDA(ectx, cudaMallocAsync(out, bytes, (cudaStream_t)stream));
        else
            s = NN__CUDA(ectx, cudaMalloc(out, bytes));
    }
    leave(u->device, prev);
    return s;
}

static void cuda_seg_free(void *st, void *p)
{
    struct cuda_up *u = st;
    int prev;
    if (enter(u->device, &prev, NULL) != NN_OK) return;
    if (u->async) {
        /* The pool quiesced the device before releasing: nothing still uses p. */
        cudaMemPool_t mp;
        if (cudaFreeAsync(p, 0) == cudaSuccess && cudaStreamSynchronize(0) == cudaSuccess &&
            cudaDeviceGetDefaultMemPool(&mp, u->device) == cudaSuccess)
            (void)cudaMemPoolTrimTo(mp, 0);
    } else {
        (void)cudaFree(p);
    }
    (void)cudaGetLastError();
    leave(u->device, prev);
}

static int cuda_quiesce(void *st)
{
    struct cuda_up *u = st;
    int prev, idle = 0;
    if (enter(u->device, &prev, NULL) != NN_OK) return 0;
    if (cudaDeviceSynchronize() == cudaSuccess)
        idle = 1;
    else
        (void)cudaGetLastError();
    leave(u->device, prev);
    return idle;
}

static nn_status cuda_raw_alloc(void *st, size_t bytes, void **out, struct nn_ctx *ectx)
{
    struct cuda_up *u = st;
    int prev;
    *out = NULL;
    nn_status s = enter(u->device, &prev, ectx);
    if (s == NN_OK) s = NN__CUDA(ectx, cudaMalloc(out, bytes));
    leave(u->device, prev);
    return s;
}

static void cuda_raw_free(void *st, void *p)
{
    struct cuda_up *u = st;
    int prev;
    if (enter(u->device, &prev, NULL) != NN_OK) return;
    if (cudaFree(p) != cudaSuccess) (void)cudaGetLastError();
    leave(u->device, prev);
}

static nn_status cuda_event_create(void *st, void **ev, struct nn_ctx *ectx)
{
    struct cuda_up *u = st;
    int prev;
    cudaEvent_t e = NULL;
    nn_status s = enter(u->device, &prev, ectx);
    if (s == NN_OK) s = NN__CUDA(ectx, cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    leave(u->device, prev);
    *ev = e;
    return s;
}

static void cuda_event_destroy(void *st, void *ev)
{
    (void)st;
    if (cudaEventDestroy((cudaEvent_t)ev) != cudaSuccess) (void)cudaGetLastError();
}

static nn_status cuda_event_record(void *st, void *ev, void *stream, struct nn_ctx *ectx)
{
    (void)st;
    return NN__CUDA(ectx, cudaEventRecord((cudaEvent_t)ev, (cudaStream_t)stream));
}

static int cuda_event_query(void *st, void *ev)
{
    (void)st;
    cudaError_t e = cudaEventQuery((cudaEvent_t)ev);
    if (e == cudaSuccess) return 1;
    /* Not ready is an answer, not a failure; clear it so that no later check reports it. */
    if (e == cudaErrorNotReady)
        (void)cudaGetLastError();
    else
        (void)NN__CUDA(NULL, e);
    return 0;
}

/* Apply s's upstream choice; fn names the public function called (a pool is also configured
 * when first used, by whatever call that is). */
static nn_status configure_for(struct cuda_up *u, const nn_mem_settings *s, const char *fn,
                               struct nn_ctx *ectx)
{
    if (s->upstream != NN_MEM_UPSTREAM_MALLOC && s->upstream != NN_MEM_UPSTREAM_MALLOC_ASYNC)
        return NN__FAIL(ectx, NN_E_INVALID_ARG,
                        "%s: upstream must be NN_MEM_UPSTREAM_MALLOC or "
                        "NN_MEM_UPSTREAM_MALLOC_ASYNC, got %d",
                        fn, (int)s->upstream);
    if (s->upstream == NN_MEM_UPSTREAM_MALLOC_ASYNC) {
        int ok = 0;
        NN__TRY(NN__CUDA(ectx,
                         cudaDeviceGetAttribute(&ok, cudaDevAttrMemoryPoolsSupported, u->device)));
        if (!ok)
            return NN__FAIL(ectx, NN_E_UNSUPPORTED,
                            "%s: device %d does not support cudaMallocAsync", fn, u->device);
        cudaMemPool_t mp;
        uint64_t keep = UINT64_MAX;
        NN__TRY(NN__CUDA(ectx, cudaDeviceGetDefaultMemPool(&mp, u->device)));
        NN__TRY(
            NN__CUDA(ectx, cudaMemPoolSetAttribute(mp, cudaMemPoolAttrReleaseThreshold, &keep)));
    }
    u->async = s->upstream == NN_MEM_UPSTREAM_MALLOC_ASYNC;
    return NN_OK;
}

static nn_status cuda_configure(void *st, const nn_mem_settings *s, struct nn_ctx *ectx)
{
    return configure_for(st, s, "nn_mem_configure", ectx);
}

static void cuda_destroy(void *st)
{
    nn__host_free(st);
}

static const struct nn__upstream_ops cuda_ops = {
    cuda_seg_alloc,   cuda_seg_free,     cuda_quiesce,       cuda_raw_alloc,
    cuda_raw_free,    cuda_event_create, cuda_event_destroy, cuda_event_record,
    cuda_event_query, cuda_configure,    cuda_destroy,
};

nn_status nn__upstream_cuda(int device, const nn_mem_settings *s, const char *fn,
                            struct nn__upstream *out, struct nn_ctx *ectx)
{
    struct cuda_up *u = nn__host_calloc(1, sizeof *u);
    if (!u) return NN__FAIL(ectx, NN_E_OOM_HOST, "%s: out of host memory for an upstream", fn);
    u->device = device;
    nn_status st = configure_for(u, s, fn, ectx);
    if (st != NN_OK) {
        nn__host_free(u);
        return st;
    }
    *out = (struct nn__upstream){&cuda_ops, u, "CUDA upstream"};
    return NN_OK;
}
#endif

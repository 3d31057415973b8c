#include <stdatomic.h>

#include "mem_test.h"
#include "nn_config.h"
#include "mem/mem_pool.h"

#if NN_HAVE_CUDA
#include <cuda_runtime_api.h>

static atomic_int release_flag;

/* Runs on the stream as a host function: keeps the stream busy until ts_sync(). */
static void CUDART_CB spin(void *arg)
{
    (void)arg;
    while (!atomic_load(&release_flag)) {}
}
#endif

void ts_open(struct tstream *t, int device)
{
    t->device = device;
    t->cuda = NULL;
#if NN_HAVE_CUDA
    if (device != NN_MEM_HOST) {
        cudaStream_t s;
        cr_assert_eq(cudaSetDevice(device), cudaSuccess);
        cr_assert_eq(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
        t->cuda = s;
    }
#endif
    nn_status st = nn_mem_stream_open(device, t->cuda, &t->h);
    cr_assert_eq(st, NN_OK, "nn_mem_stream_open: %s", nn_last_error()->message);
}

void ts_close(struct tstream *t)
{
    nn_mem_stream_close(t->h);
#if NN_HAVE_CUDA
    if (t->cuda) cudaStreamDestroy((cudaStream_t)t->cuda);
#endif
}

void *ts_alloc(struct tstream *t, size_t bytes)
{
    void *p = NULL;
    nn_status st = nn_mem_stream_alloc(t->h, bytes, &p);
    cr_assert_eq(st, NN_OK, "alloc %zu: %s", bytes, nn_last_error()->message);
    cr_assert_not_null(p);
    return p;
}

void ts_free(struct tstream *t, void *p)
{
    nn_status st = nn_mem_stream_free(t->h, p);
    cr_assert_eq(st, NN_OK, "free %p: %s", p, nn_last_error()->message);
}

void ts_busy(struct tstream *t)
{
#if NN_HAVE_CUDA
    if (t->cuda) {
        atomic_store(&release_flag, 0);
        cr_assert_eq(cudaLaunchHostFunc((cudaStream_t)t->cuda, spin, NULL), cudaSuccess);
        return;
    }
#endif
    nn__hstream_busy(nn__mem_stream_host(t->h));
}

void ts_sync(struct tstream *t)
{
#if NN_HAVE_CUDA
    if (t->cuda) {
        atomic_store(&release_flag, 1);
        cr_assert_eq(cudaStreamSynchronize((cudaStream_t)t->cuda), cudaSuccess);
        return;
    }
#endif
    nn__hstream_sync(nn__mem_stream_host(t->h));
}

nn_mem_stats ts_stats(int device)
{
    nn_mem_stats s;
    cr_assert_eq(nn_mem_get_stats(device, &s), NN_OK);
    return s;
}

#include "peak_alloc.h"

#include <criterion/criterion.h>
#include <string.h>

#include "nn_config.h"

#if NN_HAVE_CUDA
#include <cuda_runtime_api.h>

static void *peak_alloc(void *user, size_t bytes, int device, void *stream)
{
    (void)device, (void)stream;
    struct nn_test_peak *c = user;
    void *d = NULL;
    if (cudaMalloc(&d, bytes ? bytes : 1) != cudaSuccess) return NULL;
    long now = atomic_fetch_add(&c->live, (long)bytes) + (long)bytes;
    for (long old = atomic_load(&c->peak); now > old;)
        if (atomic_compare_exchange_weak(&c->peak, &old, now)) break;
    return d;
}

static void peak_free(void *user, void *p, size_t bytes, int device, void *stream)
{
    (void)device, (void)stream;
    struct nn_test_peak *c = user;
    cudaFree(p);
    atomic_fetch_sub(&c->live, (long)bytes);
}
#endif

void nn_test_peak_install(struct nn_test_peak *k)
{
    atomic_store(&k->live, 0);
    atomic_store(&k->peak, 0);
    nn_mem_allocator a;
    memset(&a, 0, sizeof a);
#if NN_HAVE_CUDA
    a.alloc = peak_alloc;
    a.free = peak_free;
#endif
    a.user = k;
    cr_assert_eq(nn_mem_set_allocator(0, &a), NN_OK, "%s", nn_last_error()->message);
}

void nn_test_peak_remove(void)
{
    cr_assert_eq(nn_mem_set_allocator(0, NULL), NN_OK, "%s", nn_last_error()->message);
}

long nn_test_peak_mark(struct nn_test_peak *k)
{
    long base = atomic_load(&k->live);
    atomic_store(&k->peak, base);
    return base;
}

long nn_test_peak_since(struct nn_test_peak *k, long base)
{
    return atomic_load(&k->peak) - base;
}

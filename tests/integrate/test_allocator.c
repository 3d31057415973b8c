/* A framework's allocator: nn_mem_set_allocator() on the host pool, which runs
 * the code of a device's, with a counting allocator; the context path (nn__dev_alloc_for, used by
 * workspaces and pullbacks, and nn_tensor_empty) through a context over the host pool; and, on a
 * GPU, a cuDNN context's tensors from cudaMalloc through the callbacks. Each test runs in its own
 * process (Criterion forks), so each starts with fresh pools and no allocator. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "nn_config.h"

#include "core/alloc.h"
#include "core/ctx.h"
#include "gpu.h"
#include "mem/mem.h"
#include "mem/mem_pool.h"
#include "nnprim/nnprim.h"

#if NN_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif
#if NN_HAVE_DLPACK
#include <dlpack/dlpack.h>
#endif

static void expect_message(const char *fragment)
{
    const char *m = nn_last_error()->message;
    cr_expect(strstr(m, fragment), "message \"%s\" lacks \"%s\"", m, fragment);
}

/* Counts every call and the bytes live; fails the n-th allocation when fail_at is n; misaligns
 * its pointers when told. Memory comes from aligned_alloc (or cudaMalloc for a device). */
struct counter {
    atomic_long allocs, frees, live, live_bytes, fail_at;
    int misalign;
    int device;
    atomic_int wrong_device, size_mismatch;
};

struct hdr {
    size_t bytes;
    char pad[56];
};

static void *count_alloc(void *user, size_t bytes, int device, void *stream)
{
    (void)stream;
    struct counter *c = user;
    long n = atomic_fetch_add(&c->allocs, 1) + 1;
    if (device != c->device) atomic_fetch_add(&c->wrong_device, 1);
    if (atomic_load(&c->fail_at) == n) return NULL;
    char *p;
#if NN_HAVE_CUDA
    if (device >= 0) {
        void *d = NULL;
        if (cudaMalloc(&d, bytes) != cudaSuccess) return NULL;
        atomic_fetch_add(&c->live, 1);
        atomic_fetch_add(&c->live_bytes, (long)bytes);
        return d;
    }
#endif
    /* A header before the block keeps the size, to check the size free is given. */
    void *m;
    if (posix_memalign(&m, 64, sizeof(struct hdr) + bytes + 64)) return NULL;
    p = m;
    ((struct hdr *)p)->bytes = bytes;
    atomic_fetch_add(&c->live, 1);
    atomic_fetch_add(&c->live_bytes, (long)bytes);
    return p + sizeof(struct hdr) + (c->misalign ? 4 : 0);
}

static void count_free(void *user, void *p, size_t bytes, int device, void *stream)
{
    (void)stream;
    struct counter *c = user;
    atomic_fetch_add(&c->frees, 1);
    atomic_fetch_sub(&c->live, 1);
    atomic_fetch_sub(&c->live_bytes, (long)bytes);
    if (device != c->device) atomic_fetch_add(&c->wrong_device, 1);
#if NN_HAVE_CUDA
    if (device >= 0) {
        cudaFree(p);
        return;
    }
#endif
    char *b = (char *)p - sizeof(struct hdr);
    if ((uintptr_t)b % 64) b -= 4;
    if (((struct hdr *)b)->bytes != bytes) atomic_fetch_add(&c->size_mismatch, 1);
    free(b);
}

static nn_mem_allocator allocator_of(struct counter *c)
{
    nn_mem_allocator a = {0};
    a.alloc = count_alloc;
    a.free = count_free;
    a.user = c;
    return a;
}

static nn_mem_stats stats(int device)
{
    nn_mem_stats s;
    cr_assert_eq(nn_mem_get_stats(device, &s), NN_OK);
    return s;
}

Test(allocator, every_allocation_and_free_goes_through_it)
{
    struct counter c = {.device = NN_MEM_HOST};
    nn_mem_allocator a = allocator_of(&c);
    nn_mem_stream *h;
    cr_assert_eq(nn_mem_stream_open(NN_MEM_HOST, NULL, &h), NN_OK);
    long host_live = nn__host_alloc_live();
    cr_assert_eq(nn_mem_set_allocator(NN_MEM_HOST, &a), NN_OK);
    void *p[100];
    size_t total = 0;
    for (int i = 0; i < 100; i++) {
        size_t bytes = 1 + (size_t)i * 4099;
        cr_assert_eq(nn_mem_stream_alloc(h, bytes, &p[i]), NN_OK, "%s", nn_last_error()->message);
        cr_assert_eq((uintptr_t)p[i] % 16, 0);
        memset(p[i], 0xab, bytes);
        total += bytes;
    }
    cr_expect_eq(atomic_load(&c.allocs), 100);
    cr_expect_eq(atomic_load(&c.live_bytes), (long)total);
    nn_mem_stats s = stats(NN_MEM_HOST);
    cr_expect_eq(s.user_allocator, 1);
    cr_expect_eq(s.user_alloc_count, 100);
    cr_expect_eq(s.user_allocated_bytes, total);
    cr_expect_eq(s.user_alloc_total, 100);
    cr_expect_eq(s.alloc_count_total, 0, "the pool made nothing");
    cr_expect_eq(s.reserved_bytes, 0, "the pool reserved nothing");
    char text[1024];
    cr_assert_eq(nn_mem_stats_format(&s, text, sizeof text), NN_OK);
    cr_expect(strstr(text, "allocator: the user's (nn_mem_set_allocator); 100 user blocks"), "%s",
              text);
    for (int i = 0; i < 100; i++)
        cr_assert_eq(nn_mem_stream_free(h, p[i]), NN_OK, "%s", nn_last_error()->message);
    cr_expect_eq(atomic_load(&c.frees), 100);
    cr_expect_eq(atomic_load(&c.live), 0);
    cr_expect_eq(atomic_load(&c.live_bytes), 0);
    cr_expect_eq(atomic_load(&c.size_mismatch), 0, "free gets the size asked for");
    cr_expect_eq(atomic_load(&c.wrong_device), 0);
    s = stats(NN_MEM_HOST);
    cr_expect_eq(s.user_alloc_count, 0);
    cr_expect_eq(s.user_free_total, 100);
    /* A second free of a block given back is not the allocator's any more. */
    cr_expect_eq(nn_mem_stream_free(h, p[7]), NN_E_BAD_POINTER);
    cr_expect_eq(atomic_load(&c.frees), 100);
    cr_expect_eq(nn_mem_set_allocator(NN_MEM_HOST, NULL), NN_OK);
    s = stats(NN_MEM_HOST);
    cr_expect_eq(s.user_allocator, 0);
    cr_assert_eq(nn_mem_stats_format(&s, text, sizeof text), NN_OK);
    cr_expect(strstr(text, "allocator: nnprim's pool"), "%s", text);
    /* Nothing of nnprim's stays allocated for the allocator (its table, its record). */
    cr_expect_eq(nn__host_alloc_live(), host_live, "host blocks before %ld, after %ld", host_live,
                 nn__host_alloc_live());
    nn_mem_stream_close(h);
}

Test(allocator, blocks_go_back_to_their_maker)
{
    struct counter c1 = {.device = NN_MEM_HOST}, c2 = {.device = NN_MEM_HOST};
    nn_mem_allocator a1 = allocator_of(&c1), a2 = allocator_of(&c2);
    nn_mem_stream *h;
    cr_assert_eq(nn_mem_stream_open(NN_MEM_HOST, NULL, &h), NN_OK);
    void *from_pool, *from_1, *from_2, *again_pool;
    cr_assert_eq(nn_mem_stream_alloc(h, 1000, &from_pool), NN_OK);
    cr_assert_eq(nn_mem_set_allocator(NN_MEM_HOST, &a1), NN_OK);
    cr_assert_eq(nn_mem_stream_alloc(h, 2000, &from_1), NN_OK);
    cr_assert_eq(nn_mem_set_allocator(NN_MEM_HOST, &a2), NN_OK);
    cr_assert_eq(nn_mem_stream_alloc(h, 3000, &from_2), NN_OK);
    cr_assert_eq(nn_mem_set_allocator(NN_MEM_HOST, NULL), NN_OK);
    cr_assert_eq(nn_mem_stream_alloc(h, 4000, &again_pool), NN_OK);
    cr_expect_eq(atomic_load(&c1.allocs), 1);
    cr_expect_eq(atomic_load(&c2.allocs), 1);
    nn_mem_stats s = stats(NN_MEM_HOST);
    cr_expect_eq(s.user_allocator, 0);
    cr_expect_eq(s.user_alloc_count, 2, "blocks of replaced allocators still count");
    cr_expect_eq(s.alloc_count, 2, "two blocks from the pool");

    cr_expect_eq(nn_mem_set_allocator(NN_MEM_HOST, &a1), NN_OK);
    cr_expect_eq(nn_mem_stream_free(h, from_2), NN_OK);
    cr_expect_eq(atomic_load(&c2.frees), 1, "from_2 went back to the second allocator");
    cr_expect_eq(atomic_load(&c1.frees), 0);
    cr_expect_eq(nn_mem_stream_free(h, from_pool), NN_OK);
    cr_expect_eq(nn_mem_stream_free(h, again_pool), NN_OK);
    cr_expect_eq(atomic_load(&c1.frees), 0, "pool blocks went to the pool");
    s = stats(NN_MEM_HOST);
    cr_expect_eq(s.alloc_count, 0);
    cr_expect_eq(s.free_count_total, 2);
    cr_expect_eq(nn_mem_stream_free(h, from_1), NN_OK);
    cr_expect_eq(atomic_load(&c1.frees), 1);
    cr_expect_eq(atomic_load(&c1.live) + atomic_load(&c2.live), 0);
    cr_expect_eq(atomic_load(&c1.size_mismatch) + atomic_load(&c2.size_mismatch), 0);
    nn_mem_stream_close(h);
    cr_expect_eq(nn_mem_set_allocator(NN_MEM_HOST, NULL), NN_OK);
}

Test(allocator, failures_are_reported)
{
    struct counter c = {.device = NN_MEM_HOST};
    nn_mem_allocator a = allocator_of(&c);
    atomic_store(&c.fail_at, 2);
    cr_assert_eq(nn_mem_set_allocator(NN_MEM_HOST, &a), NN_OK);
    nn_mem_stream *h;
    cr_assert_eq(nn_mem_stream_open(NN_MEM_HOST, NULL, &h), NN_OK);
    void *p, *q = (void *)1;
    cr_assert_eq(nn_mem_stream_alloc(h, 100, &p), NN_OK);
    cr_expect_eq(nn_mem_stream_alloc(h, 1000, &q), NN_E_OOM_DEVICE);
    cr_expect_null(q);
    expect_message("nn_mem_stream_alloc: the allocator set with nn_mem_set_allocator() for device "
                   "-1 returned NULL for 1000 bytes");
    q = (void *)1;
    cr_expect_eq(nn_mem_stream_alloc(h, 0, &q), NN_E_INVALID_ARG);
    cr_expect_null(q);
    expect_message("nn_mem_stream_alloc: bytes must be > 0, got 0");
    /* A pointer the allocator misaligned is given back to it and refused. */
    c.misalign = 1;
    cr_expect_eq(nn_mem_stream_alloc(h, 64, &q), NN_E_BAD_POINTER);
    cr_expect_null(q);
    expect_message("not aligned to 16 bytes");
    cr_expect_eq(atomic_load(&c.live), 1, "only p is live");
    c.misalign = 0;
    cr_expect_eq(nn_mem_stream_free(h, p), NN_OK);
    cr_expect_eq(atomic_load(&c.live), 0);
    /* Out of host memory to track the block (the table, given back when p was freed, must be
     * made again): the block is given back too. */
    nn__host_alloc_fail_at(1);
    nn_status st = nn_mem_stream_alloc(h, 64, &q);
    nn__host_alloc_fail_at(0);
    cr_expect_eq(st, NN_E_OOM_HOST, "%s", nn_status_name(st));
    cr_expect_null(q);
    expect_message("nn_mem_stream_alloc: out of host memory to track a block");
    cr_expect_eq(atomic_load(&c.live), 0);
    nn_mem_stats s = stats(NN_MEM_HOST);
    cr_expect_eq(s.user_alloc_count, 0);
    cr_expect_eq(s.oom_failures, 0, "the pool's figures are its own");
    nn_mem_stream_close(h);
    nn_mem_set_allocator(NN_MEM_HOST, NULL);
}

Test(allocator, bad_arguments)
{
    struct counter c = {.device = NN_MEM_HOST};
    nn_mem_allocator a = allocator_of(&c);
    cr_expect_eq(nn_mem_set_allocator(-5, &a), NN_E_INVALID_ARG);
    expect_message("nn_mem_set_allocator: device must be a CUDA ordinal >= 0 or NN_MEM_HOST (-1), "
                   "got -5");
    nn_mem_allocator b = a;
    b.alloc = NULL;
    cr_expect_eq(nn_mem_set_allocator(NN_MEM_HOST, &b), NN_E_INVALID_ARG);
    expect_message("nn_mem_set_allocator: a.alloc must not be NULL");
    b = a;
    b.free = NULL;
    cr_expect_eq(nn_mem_set_allocator(NN_MEM_HOST, &b), NN_E_INVALID_ARG);
    expect_message("nn_mem_set_allocator: a.free must not be NULL");
    b = a;
    b.reserved[2] = 7;
    cr_expect_eq(nn_mem_set_allocator(NN_MEM_HOST, &b), NN_E_INVALID_ARG);
    expect_message("nn_mem_set_allocator: a.reserved[2] must be 0, got 7");
    if (!(nn_build_features() & NN_FEATURE_CUDA)) {
        cr_expect_eq(nn_mem_set_allocator(0, &a), NN_E_NOT_BUILT);
        expect_message("nn_mem_set_allocator: device 0 needs a build with CUDA");
    }
    nn_mem_stats s = stats(NN_MEM_HOST);
    cr_expect_eq(s.user_allocator, 0, "refused allocators are not set");
}

/* The path of workspaces, pullback buffers and nn_tensor_empty: a context over the host pool,
 * made by hand because real contexts over host memory run the reference backend, which has no
 * pool. */
struct host_ctx {
    struct nn_ctx ctx;
    struct nn__hstream *stream;
};

static void host_ctx_open(struct host_ctx *h)
{
    memset(h, 0, sizeof *h);
    struct nn__upstream up;
    cr_assert_eq(nn__upstream_host(&up), NN_OK);
    nn_mem_settings s;
    cr_assert_eq(nn_mem_settings_defaults(&s), NN_OK);
    cr_assert_eq(nn__mem_pool_create(up, &s, "test", &h->ctx.mem_pool), NN_OK);
    cr_assert_eq(nn__hstream_create(&h->stream), NN_OK);
    h->ctx.settings.backend = NN_BACKEND_CUDNN;
    h->ctx.device = NN_MEM_HOST;
    h->ctx.stream = h->stream;
    h->ctx.stream_id = nn__hstream_id(h->stream);
    cr_assert_eq(
        nn__mem_pool_stream_ref(h->ctx.mem_pool, h->ctx.stream, h->ctx.stream_id, "test", NULL),
        NN_OK);
}

static void host_ctx_close(struct host_ctx *h)
{
    nn__mem_pool_stream_unref(h->ctx.mem_pool, h->ctx.stream_id);
    nn__mem_pool_destroy(h->ctx.mem_pool);
    nn__hstream_destroy(h->stream);
}

Test(allocator, workspaces_and_tensors_of_a_context)
{
    struct host_ctx h;
    host_ctx_open(&h);
    struct counter c = {.device = NN_MEM_HOST};
    nn_mem_allocator a = allocator_of(&c);
    cr_assert_eq(nn_mem_set_allocator(NN_MEM_HOST, &a), NN_OK);
    void *ws;
    cr_assert_eq(nn__dev_alloc_for(&h.ctx, "nn_conv_forward", 12345, &ws), NN_OK);
    cr_expect_eq(atomic_load(&c.allocs), 1);
    int64_t dims[] = {2, 3, 5};
    nn_tensor t;
    cr_assert_eq(nn_tensor_empty(&h.ctx, NN_DTYPE_F32, 3, dims, &t), NN_OK, "%s",
                 nn_last_error()->message);
    cr_expect_eq(atomic_load(&c.allocs), 2);
    cr_expect_eq(atomic_load(&c.live_bytes), 12345 + 30 * 4);
    nn_mem_stats s = stats(NN_MEM_HOST);
    cr_expect_eq(s.user_alloc_count, 2);
    cr_expect_eq(nn_tensor_free(&h.ctx, &t), NN_OK, "%s", nn_last_error()->message);
    cr_expect_eq(nn__dev_free_for(&h.ctx, "nn_conv_forward", ws), NN_OK);
    cr_expect_eq(atomic_load(&c.frees), 2);
    cr_expect_eq(atomic_load(&c.live_bytes), 0);
    /* Failure through a context: the message names the op. */
    atomic_store(&c.fail_at, 3);
    void *q;
    cr_expect_eq(nn__dev_alloc_for(&h.ctx, "nn_conv_forward", 100, &q), NN_E_OOM_DEVICE);
    expect_message("nn_conv_forward: the allocator set with nn_mem_set_allocator()");
    cr_expect_eq(h.ctx.last_error.status, NN_E_OOM_DEVICE, "recorded on the context too");
    cr_expect_eq(nn_tensor_empty(&h.ctx, NN_DTYPE_F32, 3, dims, &t), NN_OK);
    cr_expect_eq(nn_tensor_free(&h.ctx, &t), NN_OK);
    cr_expect_eq(atomic_load(&c.live), 0);
    nn_mem_set_allocator(NN_MEM_HOST, NULL);
    host_ctx_close(&h);
}

/* Threads allocate and free through their own handles while the main thread swaps the
 * allocator between two and the pool: every block returns to its maker. */
struct worker {
    pthread_t th;
    int failures;
};

static void *work(void *arg)
{
    struct worker *w = arg;
    nn_mem_stream *h;
    if (nn_mem_stream_open(NN_MEM_HOST, NULL, &h) != NN_OK) {
        w->failures++;
        return NULL;
    }
    void *p[16] = {0};
    for (int i = 0; i < 4000; i++) {
        int k = i % 16;
        if (p[k] && nn_mem_stream_free(h, p[k]) != NN_OK) w->failures++;
        p[k] = NULL;
        if (nn_mem_stream_alloc(h, 64 + (size_t)(i % 7) * 1000, &p[k]) != NN_OK) w->failures++;
    }
    for (int k = 0; k < 16; k++)
        if (p[k] && nn_mem_stream_free(h, p[k]) != NN_OK) w->failures++;
    nn_mem_stream_close(h);
    return NULL;
}

Test(allocator, swapped_while_threads_allocate)
{
    struct counter c1 = {.device = NN_MEM_HOST}, c2 = {.device = NN_MEM_HOST};
    nn_mem_allocator a1 = allocator_of(&c1), a2 = allocator_of(&c2);
    struct worker w[4] = {0};
    for (int i = 0; i < 4; i++)
        cr_assert_eq(pthread_create(&w[i].th, NULL, work, &w[i]), 0);
    for (int i = 0; i < 300; i++)
        nn_mem_set_allocator(NN_MEM_HOST, i % 3 == 0 ? &a1 : i % 3 == 1 ? &a2 : NULL);
    for (int i = 0; i < 4; i++) {
        pthread_join(w[i].th, NULL);
        cr_expect_eq(w[i].failures, 0);
    }
    cr_expect_eq(atomic_load(&c1.live) + atomic_load(&c2.live), 0);
    cr_expect_eq(atomic_load(&c1.allocs), atomic_load(&c1.frees));
    cr_expect_eq(atomic_load(&c2.allocs), atomic_load(&c2.frees));
    cr_expect_eq(atomic_load(&c1.size_mismatch) + atomic_load(&c2.size_mismatch), 0);
    nn_mem_stats s = stats(NN_MEM_HOST);
    cr_expect_eq(s.user_alloc_count, 0);
    cr_expect_eq(s.alloc_count, 0);
    nn_mem_set_allocator(NN_MEM_HOST, NULL);
}

/* On a GPU: a cuDNN context's tensors and nn_mem_alloc blocks come from cudaMalloc through the
 * callbacks, and go back there. */
Test(allocator_gpu, tensors_of_a_cudnn_context)
{
    NN_REQUIRE_GPU();
    struct counter c = {.device = 0};
    nn_mem_allocator a = allocator_of(&c);
    cr_assert_eq(nn_mem_set_allocator(0, &a), NN_OK);
    nn_settings st;
    cr_assert_eq(nn_settings_defaults(&st), NN_OK);
    st.backend = NN_BACKEND_CUDNN;
    nn_ctx *ctx;
    cr_assert_eq(nn_ctx_create(&ctx, &st), NN_OK, "%s", nn_last_error()->message);
    int64_t dims[] = {4, 8, 16, 16};
    nn_tensor x, y;
    cr_assert_eq(nn_tensor_empty(ctx, NN_DTYPE_F32, 4, dims, &x), NN_OK);
    cr_assert_eq(nn_tensor_empty(ctx, NN_DTYPE_F32, 4, dims, &y), NN_OK);
    cr_assert_eq(nn_tensor_fill_ints(ctx, &x, -3, 3, 1), NN_OK);
    cr_assert_eq(nn_tensor_copy(ctx, &y, &x), NN_OK);
    void *p;
    cr_assert_eq(nn_mem_alloc(ctx, 1 << 20, &p), NN_OK);
    /* x, y and p at least (a cuDNN context may make more of its own). */
    cr_expect_geq(atomic_load(&c.allocs), 3);
    nn_mem_stats s = stats(0);
    cr_expect_eq(s.user_allocator, 1);
    cr_expect_eq(s.user_alloc_count, (uint64_t)atomic_load(&c.live));
    cr_expect_eq(s.alloc_count, 0, "the pool handed out nothing");
    cr_expect_eq(nn_mem_free(ctx, p), NN_OK);
#if NN_HAVE_DLPACK
    /* An exported tensor's deleter gives the block back to the allocator that made it, even
     * after the device went back to the pool. */
    long frees = atomic_load(&c.frees);
    struct DLManagedTensor *m;
    cr_assert_eq(nn_tensor_to_dlpack(ctx, &y, &m), NN_OK, "%s", nn_last_error()->message);
    cr_expect_eq(nn_mem_set_allocator(0, NULL), NN_OK);
    m->deleter(m);
    cr_expect_eq(atomic_load(&c.frees), frees + 1);
#else
    cr_expect_eq(nn_tensor_free(ctx, &y), NN_OK);
#endif
    cr_expect_eq(nn_tensor_free(ctx, &x), NN_OK);
    cr_expect_eq(nn_ctx_synchronize(ctx), NN_OK);
    nn_ctx_destroy(ctx);
    cr_expect_eq(atomic_load(&c.live), 0);
    cr_expect_eq(atomic_load(&c.wrong_device), 0);
    nn_mem_set_allocator(0, NULL);
}

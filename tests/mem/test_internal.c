/* Size classes, failure injection on host allocations, and the pool under many threads. */
#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include "core/alloc.h"
#include "mem/mem_pool.h"
#include "mem_test.h"
#include "stress.h"

#define MiB ((size_t)1 << 20)

Test(mem_classes, monotonic_and_bounded)
{
    int last = 0;
    for (size_t s = 1; s < ((size_t)1 << 42); s += s / 61 + 1) {
        int c = nn__class_of(s);
        cr_assert_geq(c, last, "class of %zu went down", s);
        cr_assert_lt(c, NN__MEM_CLASSES);
        if (s >= 512) {
            cr_assert_leq(nn__class_lo(c), s, "size %zu below its class %d", s, c);
            cr_assert_lt(s, nn__class_lo(c + 1), "size %zu above its class %d", s, c);
        }
        last = c;
        size_t r = nn__mem_round(s);
        cr_assert_eq(r % 512, 0);
        cr_assert_geq(r, s);
        cr_assert_lt(r - s, 512, "rounding wastes less than the alignment");
    }
    for (int c = 0; c + 1 < NN__MEM_CLASSES; c++) {
        cr_assert_gt(nn__class_lo(c + 1), nn__class_lo(c));
        double width = (double)nn__class_lo(c + 1) / (double)nn__class_lo(c);
        cr_assert_leq(width, 1.25 + 1e-12, "class %d spans more than a quarter", c);
        cr_assert_eq(nn__class_of(nn__class_lo(c)), c);
        cr_assert_eq(nn__class_of(nn__class_lo(c + 1) - 1), c);
    }
    cr_expect_eq(nn__class_of(SIZE_MAX), NN__MEM_CLASSES - 1);
    cr_expect_eq(nn__mem_round(0), 512);
    cr_expect_eq(nn__mem_round(SIZE_MAX), 0, "overflow is reported as 0");
}

/* A run that exercises every kind of host allocation of the pool: segments, split blocks, table
 * growth, events of cross-stream frees, the stream table. Returns how many steps failed. */
static int scripted_run(struct nn__mem_pool *pool, struct nn__hstream *s1, struct nn__hstream *s2)
{
    void *p[200] = {0};
    int failed = 0;
    nn_status st;
    uint64_t id1 = nn__hstream_id(s1), id2 = nn__hstream_id(s2);
#define STEP(expr)                                                                                 \
    do {                                                                                           \
        st = (expr);                                                                               \
        if (st != NN_OK) {                                                                         \
            cr_assert(st == NN_E_OOM_HOST || st == NN_E_OOM_DEVICE, "status %s: %s",               \
                      nn_status_name(st), nn_last_error()->message);                               \
            failed++;                                                                              \
        }                                                                                          \
    } while (0)
/* A failed free changes nothing: the block is still the caller's, so free it again. */
#define FREE_STEP(expr)                                                                            \
    do {                                                                                           \
        STEP(expr);                                                                                \
        if (st != NN_OK) cr_assert_eq((expr), NN_OK, "%s", nn_last_error()->message);              \
    } while (0)
    STEP(nn__mem_pool_stream_ref(pool, s1, id1, "test", NULL));
    int ref2 = 0;
    STEP((ref2 = 1, nn__mem_pool_stream_ref(pool, s2, id2, "test", NULL)));
    if (st != NN_OK) ref2 = 0;
    for (int i = 0; i < 200; i++) {
        size_t bytes = (size_t)(i % 7 + 1) * (i % 3 == 0 ? 300 * 1024 : 4000);
        if (i % 50 == 49) bytes = 12 * MiB;
        STEP(nn__mem_pool_alloc(pool, s1, id1, bytes, &p[i], "test", NULL));
        if (st != NN_OK) cr_assert_null(p[i]);
    }
    for (int i = 0; i < 200; i += 2)
        if (p[i])
            FREE_STEP(
                nn__mem_pool_free(pool, i % 4 ? s2 : s1, i % 4 ? id2 : id1, p[i], "test", NULL));
    void *q[50] = {0};
    for (int i = 0; i < 50; i++)
        STEP(nn__mem_pool_alloc(pool, s2, id2, 5000 * (size_t)(i + 1), &q[i], "test", NULL));
    for (int i = 1; i < 200; i += 2)
        if (p[i]) FREE_STEP(nn__mem_pool_free(pool, s1, id1, p[i], "test", NULL));
    for (int i = 0; i < 50; i++)
        if (q[i]) FREE_STEP(nn__mem_pool_free(pool, s2, id2, q[i], "test", NULL));
    nn__mem_pool_trim(pool);
#undef FREE_STEP
#undef STEP
    nn__mem_pool_stream_unref(pool, id1);
    if (ref2) nn__mem_pool_stream_unref(pool, id2);
    return failed;
}

Test(mem_inject, every_host_allocation_failure_is_an_oom_status_and_leaks_nothing)
{
    nn_mem_settings set;
    cr_assert_eq(nn_mem_settings_from_env(&set), NN_OK);
    struct nn__hstream *s1, *s2;
    cr_assert_eq(nn__hstream_create(&s1), NN_OK);
    cr_assert_eq(nn__hstream_create(&s2), NN_OK);
    long base = nn__mem_pool_meta_live();

    /* How many host allocations does a clean run make? */
    struct nn__upstream up;
    struct nn__mem_pool *pool;
    nn__upstream_host(&up);
    cr_assert_eq(nn__mem_pool_create(up, &set, "test", &pool), NN_OK);
    nn__host_alloc_fail_at(0);
    cr_assert_eq(scripted_run(pool, s1, s2), 0);
    long made = nn__host_alloc_fail_at(0);
    nn_mem_stats s;
    nn__mem_pool_get_stats(pool, &s);
    cr_assert_eq(s.allocated_bytes, 0);
    cr_assert_eq(s.reserved_bytes, 0, "trim released every segment: %zu left in %llu",
                 s.reserved_bytes, (unsigned long long)s.segment_count);
    nn__mem_pool_destroy(pool);
    cr_assert_eq(nn__mem_pool_meta_live(), base);
    cr_assert_gt(made, 20, "the run exercises many allocations (%ld)", made);

    for (long n = 1; n <= made; n++) {
        nn__upstream_host(&up);
        cr_assert_eq(nn__mem_pool_create(up, &set, "test", &pool), NN_OK);
        nn__host_alloc_fail_at(n);
        int failed = scripted_run(pool, s1, s2);
        nn__host_alloc_fail_at(0);
        /* The run's own trim is best effort when its host allocation is the one that fails. */
        nn__mem_pool_trim(pool);
        nn__mem_pool_get_stats(pool, &s);
        cr_assert_eq(s.allocated_bytes, 0, "run %ld: every successful allocation was freed", n);
        cr_assert_eq(s.alloc_count, 0, "run %ld", n);
        cr_assert_eq(s.reserved_bytes, 0, "run %ld: nothing reserved after trim", n);
        cr_assert_leq(failed, 1, "run %ld: one injected failure fails at most one step", n);
        nn__mem_pool_destroy(pool);
        cr_assert_eq(nn__mem_pool_meta_live(), base, "run %ld leaked pool structures", n);
    }
    nn__hstream_destroy(s1);
    nn__hstream_destroy(s2);
}

/* ---- growth in place (a graph's memory) ---- */

static struct nn__mem_pool *host_pool(int bypass)
{
    nn_mem_settings set;
    cr_assert_eq(nn_mem_settings_from_env(&set), NN_OK);
    set.bypass = bypass;
    set.limit = 0;
    struct nn__upstream up;
    struct nn__mem_pool *pool;
    nn__upstream_host(&up);
    cr_assert_eq(nn__mem_pool_create(up, &set, "test", &pool), NN_OK);
    return pool;
}

static void *pool_alloc(struct nn__mem_pool *pool, struct nn__hstream *s, size_t bytes)
{
    void *p = NULL;
    cr_assert_eq(nn__mem_pool_alloc(pool, s, nn__hstream_id(s), bytes, &p, "test", NULL), NN_OK,
                 "%s", nn_last_error()->message);
    return p;
}

static size_t allocated(struct nn__mem_pool *pool)
{
    nn_mem_stats st;
    nn__mem_pool_get_stats(pool, &st);
    return st.allocated_bytes;
}

/* A live block takes the free memory after it in its segment, only its own stream's and only
 * while that is free; the bytes count as allocated, the log shows the old block's free and the
 * longer block's allocation, and everything goes back with the block. A block's size includes a
 * remainder handed out with it. */
Test(mem_grow, takes_the_free_memory_after_a_block)
{
    struct nn__hstream *s1, *s2;
    cr_assert_eq(nn__hstream_create(&s1), NN_OK);
    cr_assert_eq(nn__hstream_create(&s2), NN_OK);
    uint64_t id1 = nn__hstream_id(s1), id2 = nn__hstream_id(s2);
    struct nn__mem_pool *pool = host_pool(0);
    char *a = pool_alloc(pool, s1, 100 * 1024);
    size_t size = 0;
    nn__mem_pool_log_enable(pool, 1);
    cr_assert_eq(nn__mem_pool_grow(pool, id1, a, 50 * 1024 - 100, &size), 1);
    cr_expect_eq(size, 150 * 1024, "the bytes added are rounded to 512");
    cr_expect_eq(allocated(pool), 150 * 1024);
    nn_mem_event ev[4];
    cr_assert_eq(nn__mem_pool_log_read(pool, ev, 4), 2);
    cr_expect_eq(ev[0].kind, NN_MEM_EVENT_FREE);
    cr_expect_eq(ev[0].ptr, (uintptr_t)a);
    cr_expect_eq(ev[0].bytes, 100 * 1024);
    cr_expect_eq(ev[1].kind, NN_MEM_EVENT_ALLOC);
    cr_expect_eq(ev[1].bytes, 150 * 1024);
    nn__mem_pool_log_enable(pool, 0);

    char *b = pool_alloc(pool, s1, 100 * 1024);
    cr_assert_eq(b, a + 150 * 1024, "the next block starts where the grown one ends");
    cr_expect_eq(nn__mem_pool_grow(pool, id1, a, 512, &size), 0, "the next block is live");
    cr_assert_eq(nn__mem_pool_free(pool, s1, id1, b, "test", NULL), NN_OK);
    cr_expect_eq(nn__mem_pool_grow(pool, id2, a, 512, &size), 0, "a is another stream's block");
    cr_expect_eq(nn__mem_pool_grow(pool, id1, a + 512, 512, &size), 0, "not a block's start");
    cr_expect_eq(nn__mem_pool_grow(pool, id1, a, (size_t)4 << 20, &size), 0,
                 "more than its segment holds");
    cr_expect_eq(size, 150 * 1024, "a refusal changes nothing");
    cr_assert_eq(nn__mem_pool_grow(pool, id1, a, 100 * 1024, &size), 1,
                 "the freed block and the rest after it, merged");
    cr_expect_eq(size, 250 * 1024);

    /* What is left of the segment is less than asked plus a split's minimum: all of it. */
    nn_mem_stats st;
    nn__mem_pool_get_stats(pool, &st);
    size_t left = st.reserved_bytes - size;
    cr_assert_eq(nn__mem_pool_grow(pool, id1, a, left - 256, &size), 1);
    cr_expect_eq(size, st.reserved_bytes, "the block is its whole segment");
    cr_expect_eq(nn__mem_pool_grow(pool, id1, a, 512, &size), 0, "nothing follows it");
    cr_expect_eq(allocated(pool), size);

    cr_assert_eq(nn__mem_pool_free(pool, s1, id1, a, "test", NULL), NN_OK);
    cr_expect_eq(allocated(pool), 0);
    nn__mem_pool_trim(pool);
    nn__mem_pool_get_stats(pool, &st);
    cr_expect_eq(st.reserved_bytes, 0, "the segment is whole again and released");
    cr_expect_eq(st.alloc_count_total, st.free_count_total);
    nn__mem_pool_destroy(pool);

    /* A remainder too short to keep apart goes out with the block, and its size says so. */
    pool = host_pool(0);
    a = pool_alloc(pool, s1, 2 * MiB);
    cr_expect_eq(nn__mem_pool_block_size(pool, id1, a), 2 * MiB);
    nn__mem_pool_get_stats(pool, &st);
    char *b2 = pool_alloc(pool, s1, st.reserved_bytes - 2 * MiB);
    cr_assert_eq(nn__mem_pool_free(pool, s1, id1, a, "test", NULL), NN_OK);
    cr_expect_eq(nn__mem_pool_block_size(pool, id1, a), 0, "a freed block");
    char *c = pool_alloc(pool, s1, 3 * MiB / 2);
    cr_assert_eq(c, a, "the freed block is the best fit");
    cr_expect_eq(nn__mem_pool_block_size(pool, id1, c), 2 * MiB);
    cr_assert_eq(nn__mem_pool_free(pool, s1, id1, c, "test", NULL), NN_OK);
    cr_assert_eq(nn__mem_pool_free(pool, s1, id1, b2, "test", NULL), NN_OK);
    nn__mem_pool_destroy(pool);

    pool = host_pool(1);
    a = pool_alloc(pool, s1, 4096);
    cr_expect_eq(nn__mem_pool_grow(pool, id1, a, 512, &size), 0, "a bypass block has no segment");
    cr_assert_eq(nn__mem_pool_free(pool, s1, id1, a, "test", NULL), NN_OK);
    nn__mem_pool_destroy(pool);
    nn__hstream_destroy(s1);
    nn__hstream_destroy(s2);
}

/* A block for a capture is cut from the largest free block, not the best fit, so that it can grow
 * in place: with a 16 KiB hole before a live block and a 256 KiB one, it takes the 256 KiB one
 * and then grows in it, while an ordinary request of the same size takes the hole. */
Test(mem_grow, a_capture_takes_the_roomiest_block)
{
    struct nn__hstream *s;
    cr_assert_eq(nn__hstream_create(&s), NN_OK);
    uint64_t id = nn__hstream_id(s);
    struct nn__mem_pool *pool = host_pool(0);
    char *hole = pool_alloc(pool, s, 16 * 1024);
    char *live = pool_alloc(pool, s, 16 * 1024);
    char *room = pool_alloc(pool, s, 256 * 1024);
    char *fill1 = pool_alloc(pool, s, MiB);
    nn_mem_stats st;
    nn__mem_pool_get_stats(pool, &st);
    char *fill2 = pool_alloc(pool, s, st.reserved_bytes - allocated(pool));
    nn__mem_pool_get_stats(pool, &st);
    cr_assert_eq(st.segment_count, 1, "everything in one segment, nothing of it free");
    cr_assert_eq(nn__mem_pool_free(pool, s, id, hole, "test", NULL), NN_OK);
    cr_assert_eq(nn__mem_pool_free(pool, s, id, room, "test", NULL), NN_OK);

    void *c = NULL;
    cr_assert_eq(nn__mem_pool_alloc_capturing(pool, s, id, 16 * 1024, &c, "test", NULL), NN_OK);
    cr_expect_eq(c, room, "the capture's block starts the 256 KiB free block");
    size_t size = 0;
    cr_expect_eq(nn__mem_pool_grow(pool, id, c, 200 * 1024, &size), 1);
    cr_expect_eq(size, 216 * 1024);
    char *d = pool_alloc(pool, s, 16 * 1024);
    cr_expect_eq(d, hole, "an ordinary request takes the best fit");

    void *blocks[] = {c, d, live, fill1, fill2};
    for (size_t i = 0; i < sizeof blocks / sizeof blocks[0]; i++)
        cr_assert_eq(nn__mem_pool_free(pool, s, id, blocks[i], "test", NULL), NN_OK);
    cr_expect_eq(allocated(pool), 0);
    nn__mem_pool_destroy(pool);
    nn__hstream_destroy(s);
}

/* The pool-wide peak is summed from the shards in 1 MiB steps; a stream's frees not yet summed
 * must not count after a reset. s1 leaves 600 KiB freed but unsummed; after the reset s2 takes
 * 100 KiB: the peak since the reset is the 700 KiB then allocated, not the 1200 KiB summed. */
Test(mem_stats, peak_after_reset_counts_every_streams_frees)
{
    struct nn__hstream *s1, *s2;
    cr_assert_eq(nn__hstream_create(&s1), NN_OK);
    cr_assert_eq(nn__hstream_create(&s2), NN_OK);
    uint64_t id1 = nn__hstream_id(s1);
    struct nn__mem_pool *pool = host_pool(0);
    char *a = pool_alloc(pool, s1, 600 * 1024);
    char *b = pool_alloc(pool, s1, 600 * 1024);
    cr_assert_eq(nn__mem_pool_free(pool, s1, id1, a, "test", NULL), NN_OK);
    nn__mem_pool_reset_peak(pool);
    char *c = pool_alloc(pool, s2, 100 * 1024);
    nn_mem_stats st;
    nn__mem_pool_get_stats(pool, &st);
    cr_expect_eq(st.allocated_bytes, 700 * 1024);
    cr_expect_eq(st.allocated_bytes_peak, 700 * 1024);
    cr_assert_eq(nn__mem_pool_free(pool, s1, id1, b, "test", NULL), NN_OK);
    cr_assert_eq(nn__mem_pool_free(pool, s2, nn__hstream_id(s2), c, "test", NULL), NN_OK);
    nn__mem_pool_get_stats(pool, &st);
    cr_expect_eq(st.allocated_bytes_peak, 700 * 1024, "frees leave the peak");
    nn__mem_pool_destroy(pool);
    nn__hstream_destroy(s1);
    nn__hstream_destroy(s2);
}

/* ---- many threads ---- */

MEM_TEST(threads_on_their_own_streams)
{
    enum { THREADS = 8 };
    struct tstream st[THREADS];
    nn_mem_stream *h[THREADS];
    for (int i = 0; i < THREADS; i++) {
        ts_open(&st[i], device);
        h[i] = st[i].h;
    }
    cr_expect_eq(mem_stress_run(device, h, THREADS, 4000), 0);
    nn_mem_stats s = ts_stats(device);
    cr_expect_eq(s.allocated_bytes, 0);
    cr_expect_eq(s.alloc_count, 0);
    cr_expect_eq(s.alloc_count_total, s.free_count_total);
    cr_expect_gt(s.cache_hits, s.cache_misses, "most requests are served from the cache");
    for (int i = 0; i < THREADS; i++)
        ts_close(&st[i]);
    size_t released;
    cr_assert_eq(nn_mem_trim(device, &released), NN_OK);
    cr_expect_eq(ts_stats(device).reserved_bytes, 0);
}

/* Pending work, cross-stream frees, trims and readers at once (tools/tsan.sh runs the same
 * workload under ThreadSanitizer through mem_stress). */
Test(mem_host, contention_with_readers_and_trims)
{
    cr_expect_eq(mem_contention_run(6, 3000), 0);
    nn_mem_stats s = ts_stats(NN_MEM_HOST);
    cr_expect_eq(s.allocated_bytes, 0);
    cr_expect_eq(s.alloc_count, 0);
    cr_expect_eq(s.alloc_count_total, s.free_count_total);
    size_t released;
    cr_assert_eq(nn_mem_trim(NN_MEM_HOST, &released), NN_OK);
    cr_expect_eq(released, s.reserved_bytes, "every segment is idle and released");
    cr_expect_eq(ts_stats(NN_MEM_HOST).reserved_bytes, 0);
}

Test(mem_cuda, tensors_come_from_the_pool)
{
    NN_REQUIRE_GPU();
    nn_settings set;
    cr_assert_eq(nn_settings_from_env(&set), NN_OK);
    set.backend = NN_BACKEND_CUDNN;
    nn_ctx *ctx;
    cr_assert_eq(nn_ctx_create(&ctx, &set), NN_OK, "%s", nn_last_error()->message);
    nn_mem_stats before = ts_stats(set.device);
    nn_tensor t;
    int64_t dims[4] = {2, 3, 32, 32};
    cr_assert_eq(nn_tensor_empty(ctx, NN_DTYPE_F32, 4, dims, &t), NN_OK);
    nn_mem_stats during = ts_stats(set.device);
    cr_expect_eq(during.alloc_count, before.alloc_count + 1);
    cr_expect_eq(during.requested_bytes, before.requested_bytes + 2 * 3 * 32 * 32 * 4);
    void *data = t.data;
    cr_assert_eq(nn_tensor_free(ctx, &t), NN_OK);
    nn_mem_stats after = ts_stats(set.device);
    cr_expect_eq(after.alloc_count, before.alloc_count);
    cr_expect_eq(after.free_count_total, before.free_count_total + 1);
    t.data = data;
    cr_expect_eq(nn_tensor_free(ctx, &t), NN_E_BAD_POINTER, "a second free is caught");
    void *raw;
    cr_assert_eq(nn_mem_alloc(ctx, 1000, &raw), NN_OK);
    cr_expect_eq(raw, data, "same-stream reuse");
    cr_assert_eq(nn_mem_free(ctx, raw), NN_OK);
    nn_ctx_destroy(ctx);
}

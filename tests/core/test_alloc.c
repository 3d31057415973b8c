#include <criterion/criterion.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include "nn_config.h"

#include "core/alloc.h"
#include "nnprim/nnprim.h"
#include "oom.h"

Test(alloc, host_allocator_basics)
{
    long live = nn__host_alloc_live();
    char *p = nn__host_alloc(100);
    cr_assert_not_null(p);
    memset(p, 7, 100);
    p = nn__host_realloc(p, 100000);
    cr_assert_not_null(p);
    cr_expect_eq(p[99], 7, "realloc keeps contents");
    cr_expect_eq(nn__host_alloc_live(), live + 1);
    nn__host_free(p);
    nn__host_free(NULL);
    cr_expect_eq(nn__host_alloc_live(), live);
    cr_expect_null(nn__host_calloc(SIZE_MAX / 2, 4), "count * size overflow");
    cr_expect_null(nn__host_alloc(SIZE_MAX), "no object exceeds PTRDIFF_MAX");
    char *q = nn__host_alloc(8);
    cr_expect_null(nn__host_realloc(q, SIZE_MAX - 7));
    nn__host_free(q);
    char *z = nn__host_calloc(10, 10);
    for (int i = 0; i < 100; i++)
        cr_expect_eq(z[i], 0);
    nn__host_free(z);
    char *d = nn__host_strdup("nnprim");
    cr_expect_str_eq(d, "nnprim");
    nn__host_free(d);
}

Test(alloc, injected_failure_hits_exactly_the_nth_allocation)
{
    nn__host_alloc_fail_at(3);
    void *a = nn__host_alloc(8), *b = nn__host_alloc(8), *c = nn__host_alloc(8),
         *d = nn__host_alloc(8);
    cr_expect_eq(nn__host_alloc_fail_at(0), 4);
    cr_expect_not_null(a);
    cr_expect_not_null(b);
    cr_expect_null(c);
    cr_expect_not_null(d);
    nn__host_free(a), nn__host_free(b), nn__host_free(d);
}

static nn_status make_ref_context(void *arg)
{
    (void)arg;
    nn_settings s;
    nn_settings_from_env(&s);
    s.backend = NN_BACKEND_REF;
    s.plan_cache_file = "/tmp/nnprim-test-plans.bin";
    nn_ctx *ctx;
    nn_status st = nn_ctx_create(&ctx, &s);
    if (st == NN_OK) nn_ctx_destroy(ctx);
    return st;
}

Test(alloc, context_creation_survives_every_host_allocation_failure)
{
    cr_expect_geq(nn_test_every_host_alloc_failure(make_ref_context, NULL, "nn_ctx_create"), 2);
}

static nn_status tensor_round_trip(void *arg)
{
    nn_ctx *ctx = arg;
    int64_t dims[3] = {2, 3, 4};
    nn_tensor t, h;
    nn_status st = nn_tensor_empty(ctx, NN_DTYPE_F16, 3, dims, &t);
    if (st != NN_OK) return st;
    st = nn_tensor_fill_uniform(ctx, &t, -1, 1, 5);
    if (st == NN_OK) st = nn_tensor_empty(ctx, NN_DTYPE_F16, 3, dims, &h);
    if (st == NN_OK) {
        st = nn_tensor_copy(ctx, &h, &t);
        nn_tensor_free(ctx, &h);
    }
    nn_tensor_free(ctx, &t);
    return st;
}

Test(alloc, tensors_survive_every_host_allocation_failure)
{
    nn_settings s;
    nn_settings_from_env(&s);
    s.backend = NN_BACKEND_REF;
    nn_ctx *ctx;
    cr_assert_eq(nn_ctx_create(&ctx, &s), NN_OK);
    cr_expect_geq(nn_test_every_host_alloc_failure(tensor_round_trip, ctx, "tensor round trip"), 2);
    nn_ctx_destroy(ctx);
}

/* 2^62 bytes: the extent fits, no host has it. Under AddressSanitizer this used to abort the
 * process (its allocator refuses such sizes fatally); it must be NN_E_OOM_HOST everywhere. */
Test(alloc, huge_reference_tensor_is_out_of_host_memory)
{
    nn_settings s;
    nn_settings_from_env(&s);
    s.backend = NN_BACKEND_REF;
    nn_ctx *ctx;
    cr_assert_eq(nn_ctx_create(&ctx, &s), NN_OK);
    int64_t dims[2] = {(int64_t)1 << 31, (int64_t)1 << 29};
    nn_tensor t;
    cr_expect_eq(nn_tensor_empty(ctx, NN_DTYPE_F32, 2, dims, &t), NN_E_OOM_HOST);
    cr_expect(strstr(nn_last_error()->message, "nn_tensor_empty: out of host memory for "
                                               "4611686018427387904 bytes"),
              "%s", nn_last_error()->message);
    cr_expect_null(t.data);
    nn_ctx_destroy(ctx);
}

#if NN_HAVE_JEMALLOC
static void *alloc_on_thread(void *arg)
{
    void **out = arg;
    void *p = nn__host_alloc(64);
    if (p) memset(p, 1, 64);
    if (out) {
        *out = p; /* freed by the joining thread */
    } else {
        nn__host_free(p);
    }
    return (void *)(intptr_t)nn__host_alloc_cached();
}

/* A destructor of the application's that runs after nnprim's (its key is newer) and still
 * allocates: it must get no cache, since the thread's own was given back. */
static pthread_key_t late_key;
static int late_cached = -1, late_ok;

static void late_destructor(void *v)
{
    (void)v;
    void *p = nn__host_alloc(48);
    late_cached = nn__host_alloc_cached();
    late_ok = p != NULL;
    nn__host_free(p);
}

static void *alloc_then_set_late_key(void *arg)
{
    (void)arg;
    nn__host_free(nn__host_alloc(16)); /* the thread's cache, and nnprim's key, made first */
    pthread_setspecific(late_key, (void *)1);
    return NULL;
}
#endif

/* Each thread allocates through a thread cache of its own, given back when the thread exits:
 * jemalloc has about 4k explicit caches, so without that a process whose threads come and go
 * would run out (and fall back to the arena's lock). A block freed on another thread than the
 * one that allocated it is fine. */
Test(alloc, every_thread_gets_a_thread_cache_and_gives_it_back_at_exit, .timeout = 120)
{
#if NN_HAVE_JEMALLOC
    long live = nn__host_alloc_live();
    void *p = nn__host_alloc(32);
    cr_assert_not_null(p);
    cr_expect(nn__host_alloc_cached());
    nn__host_free(p);
    for (int i = 0; i < 5000; i++) {
        pthread_t t;
        void *cached = NULL;
        cr_assert_eq(pthread_create(&t, NULL, alloc_on_thread, NULL), 0);
        cr_assert_eq(pthread_join(t, &cached), 0);
        if (!cached) cr_assert_fail("thread %d allocated without a thread cache", i);
    }
    void *block = NULL;
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, alloc_on_thread, &block), 0);
    cr_assert_eq(pthread_join(t, NULL), 0);
    cr_assert_not_null(block);
    cr_expect_eq(((unsigned char *)block)[63], 1);
    nn__host_free(block);
    cr_expect_eq(nn__host_alloc_live(), live);
#else
    cr_skip("built without jemalloc (-Djemalloc=disabled): plain malloc has its own caches");
#endif
}

/* After the thread's cache went back at its exit, a later thread-exit destructor that allocates
 * through nnprim gets no cache (jemalloc may already have handed the id to another thread). */
Test(alloc, a_thread_exit_destructor_after_nnprims_allocates_without_a_cache)
{
#if NN_HAVE_JEMALLOC
    nn__host_free(nn__host_alloc(8)); /* nnprim's key exists before late_key */
    cr_assert_eq(pthread_key_create(&late_key, late_destructor), 0);
    for (int i = 0; i < 3; i++) {
        late_cached = -1, late_ok = 0;
        pthread_t t;
        cr_assert_eq(pthread_create(&t, NULL, alloc_then_set_late_key, NULL), 0);
        cr_assert_eq(pthread_join(t, NULL), 0);
        cr_expect(late_ok, "round %d: the late allocation failed", i);
        cr_expect_eq(late_cached, 0, "round %d: the late allocation used a destroyed cache", i);
    }
    pthread_key_delete(late_key);
#else
    cr_skip("built without jemalloc (-Djemalloc=disabled): no thread caches of nnprim's");
#endif
}

/* Bad input to the memory pool: impossible sizes, small and lowered limits, messages
 * that name the function called, negative ordinals, the environment and reserved fields. Each
 * test runs in its own process, so each starts with fresh pools and environment. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mem_test.h"

#define KiB ((size_t)1 << 10)
#define MiB ((size_t)1 << 20)

static void expect_message(const char *fragment)
{
    const char *m = nn_last_error()->message;
    cr_expect(strstr(m, fragment), "message \"%s\" lacks \"%s\"", m, fragment);
}

/* MEDIUM_MAX + size used to wrap in reserve_bytes() and hand out a pointer into a 20 MiB
 * segment. Every size near SIZE_MAX, and any beyond what a device can hold, must fail. */
MEM_TEST(impossible_sizes_fail_with_the_figures)
{
    struct tstream a;
    ts_open(&a, device);
    static const size_t sizes[] = {SIZE_MAX,       SIZE_MAX - 511,
                                   SIZE_MAX - 512, SIZE_MAX - (2 << 20) + 1,
                                   SIZE_MAX / 2,   ((size_t)1 << 48) + 1};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        void *p = (void *)1;
        cr_expect_eq(nn_mem_stream_alloc(a.h, sizes[i], &p), NN_E_OOM_DEVICE, "%zu", sizes[i]);
        cr_expect_null(p);
        expect_message("nn_mem_stream_alloc: out of device memory");
        char want[64];
        snprintf(want, sizeof want, "requested %zu bytes, in use 0, reserved 0", sizes[i]);
        expect_message(want);
    }
    nn_mem_stats s = ts_stats(device);
    cr_expect_eq(s.reserved_bytes, 0);
    cr_expect_eq(s.alloc_count, 0);
    cr_expect_eq(s.oom_failures, sizeof sizes / sizeof sizes[0]);
    /* The pool still works. */
    ts_free(&a, ts_alloc(&a, 4096));
    ts_close(&a);
}

MEM_TEST(impossible_sizes_fail_in_bypass_mode)
{
    nn_mem_settings set;
    cr_assert_eq(nn_mem_settings_from_env(&set), NN_OK);
    set.bypass = 1;
    set.limit = 64 * MiB;
    cr_assert_eq(nn_mem_configure(device, &set), NN_OK);
    struct tstream a;
    ts_open(&a, device);
    void *p = (void *)1;
    /* reserved + size used to wrap past the limit check. */
    cr_expect_eq(nn_mem_stream_alloc(a.h, SIZE_MAX - 511, &p), NN_E_OOM_DEVICE);
    cr_expect_null(p);
    cr_expect_eq(nn_mem_stream_alloc(a.h, 65 * MiB, &p), NN_E_OOM_DEVICE);
    expect_message("the limit leaves room for 67108864 more bytes");
    ts_free(&a, ts_alloc(&a, 4096));
    cr_expect_eq(ts_stats(device).reserved_bytes, 0);
    ts_close(&a);
}

/* Under a limit below the 2 MiB small segment, a small request gets a segment of what fits. */
MEM_TEST(small_limit_serves_small_requests)
{
    cr_assert_eq(nn_mem_set_limit(device, 1 * MiB), NN_OK);
    struct tstream a;
    ts_open(&a, device);
    void *p = ts_alloc(&a, 4096);
    void *q = ts_alloc(&a, 4096);
    nn_mem_stats s = ts_stats(device);
    cr_expect_eq(s.reserved_bytes, 1 * MiB);
    cr_expect_eq(s.segment_count, 1);
    void *r = (void *)1;
    cr_expect_eq(nn_mem_stream_alloc(a.h, 1 * MiB, &r), NN_E_OOM_DEVICE);
    cr_expect_null(r);
    expect_message("limit 1048576: the limit leaves room for 0 more bytes");
    ts_free(&a, p);
    ts_free(&a, q);
    cr_expect_eq(nn_mem_trim(device, NULL), NN_OK);
    cr_assert_eq(nn_mem_set_limit(device, 64 * KiB + 100), NN_OK);
    p = ts_alloc(&a, 60 * KiB);
    cr_expect_eq(ts_stats(device).reserved_bytes, 64 * KiB);
    cr_expect_eq(nn_mem_stream_alloc(a.h, 8 * KiB, &r), NN_E_OOM_DEVICE);
    expect_message("the limit leaves room for 100 more bytes");
    ts_free(&a, p);
    ts_close(&a);
}

/* mem.h: a limit below what is reserved releases nothing, and later allocations fail until
 * memory is freed (the pool then releases its cached segments itself, as its OOM retry does). */
MEM_TEST(lowered_limit_fails_until_memory_is_freed)
{
    struct tstream a;
    ts_open(&a, device);
    void *p = ts_alloc(&a, 4096);
    cr_expect_eq(ts_stats(device).reserved_bytes, 2 * MiB);
    cr_assert_eq(nn_mem_set_limit(device, 64 * KiB), NN_OK);
    cr_expect_eq(ts_stats(device).reserved_bytes, 2 * MiB, "lowering the limit releases nothing");
    void *q = (void *)1;
    cr_expect_eq(nn_mem_stream_alloc(a.h, 1 * MiB, &q), NN_E_OOM_DEVICE);
    cr_expect_null(q);
    expect_message("the limit is below what is reserved");
    expect_message("reserved 2097152, limit 65536");
    /* Even a request the cached segment could serve. */
    cr_expect_eq(nn_mem_stream_alloc(a.h, 4096, &q), NN_E_OOM_DEVICE);
    ts_free(&a, p);
    q = ts_alloc(&a, 4096);
    nn_mem_stats s = ts_stats(device);
    cr_expect_eq(s.reserved_bytes, 64 * KiB);
    cr_expect_eq(s.segment_free_total, 1);
    ts_free(&a, q);
    ts_close(&a);
}

MEM_TEST(messages_name_the_function_called)
{
    struct tstream a;
    ts_open(&a, device);
    void *p = ts_alloc(&a, 4096);
    ts_free(&a, p);
    cr_expect_eq(nn_mem_stream_free(a.h, p), NN_E_BAD_POINTER);
    expect_message("nn_mem_stream_free: ");
    expect_message("was already freed");
    int x;
    cr_expect_eq(nn_mem_stream_free(a.h, &x), NN_E_BAD_POINTER);
    expect_message("nn_mem_stream_free: ");
    cr_expect_eq(nn_mem_stream_alloc(a.h, 0, &p), NN_E_INVALID_ARG);
    expect_message("nn_mem_stream_alloc: bytes must be > 0, got 0");
    cr_expect_eq(nn_mem_stream_alloc(a.h, 8, NULL), NN_E_INVALID_ARG);
    expect_message("nn_mem_stream_alloc: out must not be NULL");
    cr_expect_eq(nn_mem_stream_alloc(NULL, 8, &p), NN_E_INVALID_ARG);
    expect_message("nn_mem_stream_alloc: s must not be NULL");
    ts_close(&a);
}

Test(mem_host, negative_ordinals_are_invalid)
{
    size_t r;
    nn_mem_stats s;
    nn_mem_event e;
    size_t n;
    cr_expect_eq(nn_mem_set_limit(-2, 0), NN_E_INVALID_ARG);
    expect_message(
        "nn_mem_set_limit: device must be a CUDA ordinal >= 0 or NN_MEM_HOST (-1), got -2");
    cr_expect_eq(nn_mem_trim(-2, &r), NN_E_INVALID_ARG);
    expect_message("nn_mem_trim: device");
    cr_expect_eq(nn_mem_reset_peak_stats(-2), NN_E_INVALID_ARG);
    expect_message("nn_mem_reset_peak_stats: device");
    cr_expect_eq(nn_mem_log_enable(-2, 1), NN_E_INVALID_ARG);
    expect_message("nn_mem_log_enable: device");
    cr_expect_eq(nn_mem_get_stats(-2, &s), NN_E_INVALID_ARG);
    cr_expect_eq(nn_mem_log_read(-2, &e, 1, &n), NN_E_INVALID_ARG);
}

static const char *const bad_limits[] = {
    " -1",          "-1", "+5", " 5", "5 ", "1K5", "0x10", "5KB", "", "18446744073709551616",
    "17179869184G", "1e3"};

Test(mem_host, malformed_limit_is_refused_by_every_call)
{
    for (size_t i = 0; i < sizeof bad_limits / sizeof bad_limits[0]; i++) {
        setenv("NNPRIM_MEM_LIMIT", bad_limits[i], 1);
        nn_mem_settings set;
        cr_expect_eq(nn_mem_settings_from_env(&set), NN_E_ENV, "\"%s\"", bad_limits[i]);
        expect_message("nn_mem_settings_from_env: NNPRIM_MEM_LIMIT must be a byte count");
        cr_expect_eq(set.limit, 0, "\"%s\" left its default", bad_limits[i]);
        /* The pool is not made with a limit the user did not ask for. */
        nn_mem_stats s;
        cr_expect_eq(nn_mem_get_stats(NN_MEM_HOST, &s), NN_E_ENV, "\"%s\"", bad_limits[i]);
        expect_message("nn_mem_get_stats: NNPRIM_MEM_LIMIT");
        nn_mem_stream *h = NULL;
        cr_expect_eq(nn_mem_stream_open(NN_MEM_HOST, NULL, &h), NN_E_ENV);
        cr_expect_null(h);
        cr_expect_eq(nn_mem_set_limit(NN_MEM_HOST, 0), NN_E_ENV);
        cr_expect_eq(nn_mem_trim(NN_MEM_HOST, NULL), NN_E_ENV);
    }
    setenv("NNPRIM_MEM_LIMIT", "64K", 1);
    nn_mem_stats s;
    cr_expect_eq(nn_mem_get_stats(NN_MEM_HOST, &s), NN_OK);
    cr_expect_eq(s.limit, 64 * KiB);
}

Test(mem_host, malformed_growth_slack_is_refused)
{
    static const char *const bad[] = {" 1.5", "+1.5", "0.5", "inf", "nan", "1.5x", ""};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        setenv("NNPRIM_MEM_GROWTH_SLACK", bad[i], 1);
        nn_mem_settings set;
        cr_expect_eq(nn_mem_settings_from_env(&set), NN_E_ENV, "\"%s\"", bad[i]);
        expect_message("NNPRIM_MEM_GROWTH_SLACK must be 0 or a finite number >= 1.0");
    }
    setenv("NNPRIM_MEM_GROWTH_SLACK", "1.5", 1);
    nn_mem_settings set;
    cr_expect_eq(nn_mem_settings_from_env(&set), NN_OK);
    cr_expect_eq(set.growth_slack, 1.5);
}

Test(mem_host, reserved_settings_must_be_zero)
{
    nn_mem_settings set;
    cr_assert_eq(nn_mem_settings_from_env(&set), NN_OK);
    set.reserved[3] = 7;
    cr_expect_eq(nn_mem_configure(NN_MEM_HOST, &set), NN_E_INVALID_ARG);
    expect_message("nn_mem_configure: s.reserved[3] must be 0, got 7");
    set.reserved[3] = 0;
    cr_expect_eq(nn_mem_configure(NN_MEM_HOST, &set), NN_OK);
}

Test(mem_cuda, context_allocations_fail_cleanly)
{
    NN_REQUIRE_GPU();
    nn_settings s;
    cr_assert_eq(nn_settings_from_env(&s), NN_OK);
    s.backend = NN_BACKEND_CUDNN;
    nn_ctx *ctx;
    cr_assert_eq(nn_ctx_create(&ctx, &s), NN_OK, "%s", nn_last_error()->message);
    void *p = (void *)1;
    cr_expect_eq(nn_mem_alloc(ctx, SIZE_MAX - 511, &p), NN_E_OOM_DEVICE);
    cr_expect_null(p);
    expect_message("nn_mem_alloc: out of device memory");
    /* 4 TiB: below the pool's size cap, so cudaMalloc is asked and refuses. */
    int64_t dims[2] = {(int64_t)1 << 20, (int64_t)1 << 20};
    nn_tensor t;
    cr_expect_eq(nn_tensor_empty(ctx, NN_DTYPE_F32, 2, dims, &t), NN_E_OOM_DEVICE);
    expect_message("nn_tensor_empty: out of device memory (CUDA upstream): requested "
                   "4398046511104 bytes");
    expect_message("the CUDA upstream refused a segment of 4398046511104 bytes");
    /* 2^64 bytes: refused before the pool. */
    dims[0] = dims[1] = (int64_t)1 << 31;
    cr_expect_eq(nn_tensor_empty(ctx, NN_DTYPE_F32, 2, dims, &t), NN_E_OVERFLOW);
    cr_assert_eq(nn_mem_alloc(ctx, 4096, &p), NN_OK);
    cr_expect_eq(nn_mem_free(ctx, p), NN_OK);
    cr_expect_eq(nn_mem_free(ctx, p), NN_E_BAD_POINTER);
    expect_message("nn_mem_free: ");
    nn_ctx_destroy(ctx);
}

/* When the upstream refuses a segment, the message says so instead of blaming a limit. 192 TiB
 * passes the pool's size cap but exceeds the 128 TiB user address space of x86-64 and any device,
 * so malloc and cudaMalloc always refuse it. */
MEM_TEST(upstream_refusal_is_named)
{
    struct tstream a;
    ts_open(&a, device);
    size_t huge = (size_t)3 << 46;
    void *p = (void *)1;
    cr_expect_eq(nn_mem_stream_alloc(a.h, huge, &p), NN_E_OOM_DEVICE);
    cr_expect_null(p);
    expect_message("nn_mem_stream_alloc: out of device memory (");
    expect_message("limit none: the ");
    expect_message(" upstream refused a segment of 211106232532992 bytes");
    nn_mem_stats s = ts_stats(device);
    cr_expect_eq(s.reserved_bytes, 0);
    cr_expect_eq(s.oom_retries, 1);
    ts_free(&a, ts_alloc(&a, 4096));
    ts_close(&a);
}

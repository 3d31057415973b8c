/* The pool's behaviour through the public API, over the host pool and (with a GPU) the CUDA
 * pool of device 0. Each Criterion test runs in its own process, so each starts with a fresh
 * pool. */
#include <string.h>

#include "mem_test.h"

#define KiB ((size_t)1 << 10)
#define MiB ((size_t)1 << 20)

MEM_TEST(split_then_same_stream_reuse)
{
    struct tstream a;
    ts_open(&a, device);
    char *p = ts_alloc(&a, 1000);
    char *q = ts_alloc(&a, 1000);
    cr_expect_eq(q, p + 1024, "the second block is split off the same segment");
    nn_mem_stats s = ts_stats(device);
    cr_expect_eq(s.segment_count, 1);
    cr_expect_eq(s.reserved_bytes, 2 * MiB);
    cr_expect_eq(s.allocated_bytes, 2048);
    cr_expect_eq(s.requested_bytes, 2000);
    ts_free(&a, p);
    char *r = ts_alloc(&a, 700);
    cr_expect_eq(r, p, "a block freed on a stream is reused on it at once");
    s = ts_stats(device);
    cr_expect_eq(s.cache_hits, 2);
    cr_expect_eq(s.cache_misses, 1);
    cr_expect_eq(s.alloc_count_total, 3);
    cr_expect_eq(s.free_count_total, 1);
    ts_free(&a, q);
    ts_free(&a, r);
    cr_expect_eq(ts_stats(device).allocated_bytes, 0);
    ts_close(&a);
}

MEM_TEST(merge_and_coalesce)
{
    struct tstream a;
    ts_open(&a, device);
    char *p[8];
    for (int i = 0; i < 8; i++)
        p[i] = ts_alloc(&a, 256 * KiB);
    for (int i = 1; i < 8; i++)
        cr_assert_eq(p[i], p[0] + i * 256 * KiB);
    cr_expect_eq(ts_stats(device).segment_count, 1, "eight quarter-MiB blocks fill one segment");
    ts_free(&a, p[2]);
    ts_free(&a, p[3]);
    ts_free(&a, p[4]);
    char *m = ts_alloc(&a, 768 * KiB);
    cr_expect_eq(m, p[2], "three adjacent free blocks merge into one");
    cr_expect_eq(ts_stats(device).segment_count, 1);
    ts_free(&a, p[0]);
    ts_free(&a, p[6]);
    nn_mem_stats s = ts_stats(device);
    cr_expect_eq(s.largest_free_bytes, 256 * KiB);
    cr_expect_float_eq(s.fragmentation, 0.5, 1e-12, "two separate free quarters");
    ts_free(&a, p[5]);
    s = ts_stats(device);
    cr_expect_eq(s.largest_free_bytes, 512 * KiB, "p[5] and p[6] are one free run");
    ts_free(&a, m);
    ts_free(&a, p[1]);
    ts_free(&a, p[7]);
    s = ts_stats(device);
    cr_expect_eq(s.largest_free_bytes, 2 * MiB);
    cr_expect_float_eq(s.fragmentation, 0.0, 1e-12);
    char *whole = ts_alloc(&a, MiB);
    cr_expect_eq(whole, p[0], "after coalescing the segment serves a 1 MiB request from its start");
    cr_expect_eq(ts_stats(device).segment_count, 1);
    ts_free(&a, whole);
    ts_close(&a);
}

MEM_TEST(large_requests_get_their_own_segment)
{
    struct tstream a;
    ts_open(&a, device);
    void *big = ts_alloc(&a, 64 * MiB);
    nn_mem_stats s = ts_stats(device);
    cr_expect_eq(s.reserved_bytes, 64 * MiB);
    void *odd = ts_alloc(&a, 30 * MiB + 1);
    s = ts_stats(device);
    cr_expect_eq(s.reserved_bytes, 64 * MiB + 32 * MiB, "rounded up to 2 MiB");
    void *mid = ts_alloc(&a, 3 * MiB);
    s = ts_stats(device);
    cr_expect_eq(s.reserved_bytes, 96 * MiB + 20 * MiB, "medium requests share 20 MiB segments");
    cr_expect_eq(s.segment_count, 3);
    void *mid2 = ts_alloc(&a, 3 * MiB);
    cr_expect_eq(ts_stats(device).segment_count, 3);
    cr_expect_eq((char *)mid2, (char *)mid + 3 * MiB);
    ts_free(&a, big);
    ts_free(&a, odd);
    ts_free(&a, mid);
    ts_free(&a, mid2);
    size_t released = 0;
    cr_assert_eq(nn_mem_trim(device, &released), NN_OK);
    cr_expect_eq(released, 116 * MiB);
    s = ts_stats(device);
    cr_expect_eq(s.reserved_bytes, 0);
    cr_expect_eq(s.segment_count, 0);
    cr_expect_eq(s.segment_free_total, 3);
    cr_expect_eq(s.reserved_bytes_peak, 116 * MiB);
    ts_close(&a);
}

MEM_TEST(double_and_foreign_free_change_nothing)
{
    struct tstream a;
    ts_open(&a, device);
    char *p = ts_alloc(&a, 4096);
    char *q = ts_alloc(&a, 4096);
    ts_free(&a, p);
    nn_mem_stats before = ts_stats(device);
    cr_expect_eq(nn_mem_stream_free(a.h, p), NN_E_BAD_POINTER);
    cr_expect(strstr(nn_last_error()->message, "already freed"), "%s", nn_last_error()->message);
    int local;
    cr_expect_eq(nn_mem_stream_free(a.h, &local), NN_E_BAD_POINTER);
    cr_expect(strstr(nn_last_error()->message, "not allocated by nnprim"), "%s",
              nn_last_error()->message);
    cr_expect_eq(nn_mem_stream_free(a.h, q + 512), NN_E_BAD_POINTER, "an interior pointer");
    nn_mem_stats after = ts_stats(device);
    cr_expect_eq(memcmp(&before, &after, sizeof before), 0, "bad frees leave the statistics alone");
    cr_expect_eq(nn_mem_stream_free(a.h, NULL), NN_OK);
    char *again = ts_alloc(&a, 4096);
    cr_expect_eq(again, p, "the pool still hands out the freed block once");
    char *third = ts_alloc(&a, 4096);
    cr_expect_neq(third, p);
    cr_expect_neq(third, q);
    ts_free(&a, again);
    ts_free(&a, q);
    ts_free(&a, third);
    ts_close(&a);
}

MEM_TEST(cached_segments_go_before_growth)
{
    nn_mem_settings set;
    cr_assert_eq(nn_mem_settings_from_env(&set), NN_OK);
    set.growth_slack = 1.10;
    cr_assert_eq(nn_mem_configure(device, &set), NN_OK);
    struct tstream a;
    ts_open(&a, device);
    void *p = ts_alloc(&a, 100 * MiB);
    ts_free(&a, p);
    void *small = ts_alloc(&a, 512 * KiB);
    nn_mem_stats s = ts_stats(device);
    cr_expect_eq(s.segment_free_total, 0, "a small segment more is within the slack");
    cr_expect_eq(s.reserved_bytes, 102 * MiB);
    void *big = ts_alloc(&a, 200 * MiB);
    s = ts_stats(device);
    cr_expect_eq(s.segment_free_total, 1, "the idle 100 MiB went before taking 200 MiB more");
    cr_expect_eq(s.reserved_bytes, 202 * MiB);
    cr_expect_eq(s.oom_retries, 0);
    ts_free(&a, big);
    p = ts_alloc(&a, 190 * MiB);
    cr_expect_eq(p, big, "a request within 1/8 of a cached block is cut from it");
    cr_expect_eq(ts_stats(device).segment_alloc_total, 3);
    ts_free(&a, p);
    p = ts_alloc(&a, 100 * MiB);
    cr_expect_eq(ts_stats(device).segment_alloc_total, 4,
                 "but a much smaller one does not pin the 200 MiB segment");
    ts_free(&a, p);
    ts_free(&a, small);
    ts_close(&a);
}

MEM_TEST(growth_slack_zero_never_releases)
{
    nn_mem_settings set;
    cr_assert_eq(nn_mem_settings_from_env(&set), NN_OK);
    cr_expect_float_eq(set.growth_slack, 0.0, 1e-12, "the default");
    cr_assert_eq(nn_mem_configure(device, &set), NN_OK);
    struct tstream a;
    ts_open(&a, device);
    void *p = ts_alloc(&a, 100 * MiB);
    ts_free(&a, p);
    void *big = ts_alloc(&a, 200 * MiB);
    nn_mem_stats s = ts_stats(device);
    cr_expect_eq(s.segment_free_total, 0);
    cr_expect_eq(s.reserved_bytes, 300 * MiB);
    ts_free(&a, big);
    ts_close(&a);
}

MEM_TEST(limit_and_oom_ladder)
{
    struct tstream a;
    ts_open(&a, device);
    cr_assert_eq(nn_mem_set_limit(device, 7 * MiB), NN_OK);
    void *four = ts_alloc(&a, 4 * MiB);
    void *small = ts_alloc(&a, 512 * KiB);
    ts_free(&a, small);
    cr_expect_eq(ts_stats(device).reserved_bytes, 6 * MiB);
    /* 1.5 MiB needs a segment of its own (2 MiB): 6 + 2 passes the limit, so the cached small
     * segment must go first. */
    void *mid = ts_alloc(&a, 1536 * KiB);
    nn_mem_stats s = ts_stats(device);
    cr_expect_eq(s.oom_retries, 1);
    cr_expect_eq(s.segment_free_total, 1);
    cr_expect_eq(s.reserved_bytes, 6 * MiB);
    cr_expect_eq(s.oom_failures, 0);

    void *p = (void *)1;
    nn_status st = nn_mem_stream_alloc(a.h, 6 * MiB, &p);
    cr_expect_eq(st, NN_E_OOM_DEVICE);
    cr_expect_null(p);
    const char *m = nn_last_error()->message;
    cr_expect(strstr(m, "requested 6291456 bytes"), "%s", m);
    cr_expect(strstr(m, "in use 6291456"), "%s", m);
    cr_expect(strstr(m, "reserved 6291456"), "%s", m);
    cr_expect(strstr(m, "limit 7340032"), "%s", m);
    s = ts_stats(device);
    cr_expect_eq(s.oom_retries, 2);
    cr_expect_eq(s.oom_failures, 1);
    cr_expect_eq(s.allocated_bytes, 6 * MiB);
    cr_expect_eq(s.limit, 7 * MiB);

    cr_assert_eq(nn_mem_set_limit(device, 0), NN_OK);
    void *ok = ts_alloc(&a, 6 * MiB);
    ts_free(&a, ok);
    ts_free(&a, mid);
    ts_free(&a, four);
    ts_close(&a);
}

/* While a test keeps a stream busy, the pool must not release segments: on a GPU that
 * synchronises the device, which would wait for the spinning host function for ever. */
static void no_release_on_growth(int device)
{
    nn_mem_settings set;
    cr_assert_eq(nn_mem_settings_from_env(&set), NN_OK);
    set.growth_slack = 0;
    cr_assert_eq(nn_mem_configure(device, &set), NN_OK);
}

MEM_TEST(stream_hazard_two_sided)
{
    no_release_on_growth(device);
    struct tstream a, b;
    ts_open(&a, device);
    ts_open(&b, device);
    void *pa = ts_alloc(&a, 64 * MiB);
    ts_busy(&a);
    ts_free(&a, pa);
    void *again = ts_alloc(&a, 64 * MiB);
    cr_expect_eq(again, pa, "same-stream reuse does not wait for the stream");
    ts_free(&a, again);

    void *pb = ts_alloc(&b, 64 * MiB);
    cr_expect_neq(pb, pa, "a block freed on a busy stream is not handed to another stream");
    cr_expect_eq(ts_stats(device).segment_count, 2);

    ts_sync(&a);
    void *pb2 = ts_alloc(&b, 64 * MiB);
    cr_expect_eq(pb2, pa, "once the owner stream's work is done the block moves over");
    cr_expect_eq(ts_stats(device).segment_count, 2);
    ts_free(&b, pb);
    ts_free(&b, pb2);
    ts_close(&a);
    ts_close(&b);
}

MEM_TEST(free_from_another_stream_waits_for_it)
{
    no_release_on_growth(device);
    struct tstream a, b;
    ts_open(&a, device);
    ts_open(&b, device);
    void *p = ts_alloc(&a, 64 * MiB);
    ts_busy(&b);
    ts_free(&b, p);
    void *q = ts_alloc(&a, 64 * MiB);
    cr_expect_neq(q, p, "not reused before the freeing stream's work is done");
    void *r = ts_alloc(&b, 64 * MiB);
    cr_expect_neq(r, p, "not even on the freeing stream: the block waits for its event");
    ts_sync(&b);
    void *s = ts_alloc(&a, 64 * MiB);
    cr_expect_eq(s, p);
    ts_free(&a, q);
    ts_free(&b, r);
    ts_free(&a, s);
    ts_close(&a);
    ts_close(&b);
}

MEM_TEST(closed_stream_cache_is_shared)
{
    struct tstream a, b;
    ts_open(&a, device);
    ts_open(&b, device);
    void *p = ts_alloc(&a, 64 * MiB);
    ts_free(&a, p);
    ts_close(&a);
    void *q = ts_alloc(&b, 64 * MiB);
    cr_expect_eq(q, p);
    cr_expect_eq(ts_stats(device).segment_count, 1);
    ts_free(&b, q);
    ts_close(&b);
}

MEM_TEST(statistics_peak_reset_and_text)
{
    struct tstream a;
    ts_open(&a, device);
    void *p = ts_alloc(&a, 100 * KiB);
    void *q = ts_alloc(&a, 200 * KiB);
    ts_free(&a, p);
    nn_mem_stats s = ts_stats(device);
    cr_expect_eq(s.allocated_bytes, 200 * KiB);
    cr_expect_eq(s.allocated_bytes_peak, 300 * KiB);
    cr_expect_eq(s.allocated_bytes_total, 300 * KiB);
    cr_expect_eq(s.alloc_count, 1);
    cr_expect_eq(s.cached_bytes, 2 * MiB - 200 * KiB);
    cr_assert_eq(nn_mem_reset_peak_stats(device), NN_OK);
    s = ts_stats(device);
    cr_expect_eq(s.allocated_bytes_peak, 200 * KiB);
    cr_expect_eq(s.reserved_bytes_peak, 2 * MiB);
    char text[1024];
    cr_assert_eq(nn_mem_stats_format(&s, text, sizeof text), NN_OK);
    cr_expect(strstr(text, "allocated: 0.2 MiB now (1 blocks"), "%s", text);
    cr_expect(strstr(text, "reserved:  2.0 MiB now in 1 segments"), "%s", text);
    char tiny[8];
    cr_assert_eq(nn_mem_stats_format(&s, tiny, sizeof tiny), NN_OK);
    cr_expect_eq(strlen(tiny), 7);
    cr_expect_eq(nn_mem_stats_format(&s, tiny, 0), NN_E_INVALID_ARG);
    ts_free(&a, q);
    ts_close(&a);
}

MEM_TEST(event_log_records_in_order)
{
    struct tstream a;
    ts_open(&a, device);
    cr_assert_eq(nn_mem_log_enable(device, 1), NN_OK);
    void *p = ts_alloc(&a, 3000);
    ts_free(&a, p);
    nn_mem_event ev[8];
    size_t n = 0;
    cr_assert_eq(nn_mem_log_read(device, ev, 8, &n), NN_OK);
    cr_assert_eq(n, 3);
    cr_expect_eq(ev[0].kind, NN_MEM_EVENT_SEGMENT_ALLOC);
    cr_expect_eq(ev[0].bytes, 2 * MiB);
    cr_expect_eq(ev[1].kind, NN_MEM_EVENT_ALLOC);
    cr_expect_eq(ev[1].ptr, (uintptr_t)p);
    cr_expect_eq(ev[1].bytes, 3000);
    cr_expect_eq(ev[2].kind, NN_MEM_EVENT_FREE);
    cr_expect_eq(ev[2].ptr, (uintptr_t)p);
    cr_expect_eq(ev[1].stream_id, ev[2].stream_id);
    cr_expect_leq(ev[1].time_ns, ev[2].time_ns);
    cr_assert_eq(nn_mem_log_read(device, ev, 8, &n), NN_OK);
    cr_expect_eq(n, 0, "reading takes the entries out");
    cr_assert_eq(nn_mem_log_enable(device, 0), NN_OK);
    p = ts_alloc(&a, 3000);
    ts_free(&a, p);
    cr_assert_eq(nn_mem_log_read(device, ev, 8, &n), NN_OK);
    cr_expect_eq(n, 0, "nothing is logged once stopped");
    ts_close(&a);
}

MEM_TEST(bypass_sends_each_call_through)
{
    nn_mem_settings set;
    cr_assert_eq(nn_mem_settings_from_env(&set), NN_OK);
    set.bypass = 1;
    cr_assert_eq(nn_mem_configure(device, &set), NN_OK);
    struct tstream a;
    ts_open(&a, device);
    void *p = ts_alloc(&a, 256);
    void *q = ts_alloc(&a, 256);
    nn_mem_stats s = ts_stats(device);
    cr_expect_eq(s.segment_count, 0);
    cr_expect_eq(s.reserved_bytes, 1024);
    cr_expect_eq(s.cache_hits, 0);
    ts_free(&a, p);
    cr_expect_eq(nn_mem_stream_free(a.h, p), NN_E_BAD_POINTER);
    cr_expect_eq(ts_stats(device).reserved_bytes, 512, "a bypass free goes straight back");
    set.bypass = 0;
    cr_expect_eq(nn_mem_configure(device, &set), NN_E_INVALID_ARG, "memory is still held");
    ts_free(&a, q);
    cr_expect_eq(nn_mem_configure(device, &set), NN_OK);
    p = ts_alloc(&a, 256);
    cr_expect_eq(ts_stats(device).segment_count, 1);
    ts_free(&a, p);
    ts_close(&a);
}

Test(mem_host, environment_settings)
{
    nn_mem_settings s;
    setenv("NNPRIM_MEM_BYPASS", "1", 1);
    setenv("NNPRIM_MEM_LIMIT", "3M", 1);
    setenv("NNPRIM_MEM_UPSTREAM", "async", 1);
    cr_assert_eq(nn_mem_settings_from_env(&s), NN_OK);
    cr_expect_eq(s.bypass, 1);
    cr_expect_eq(s.limit, 3 * MiB);
    cr_expect_eq(s.upstream, NN_MEM_UPSTREAM_MALLOC_ASYNC);
    setenv("NNPRIM_MEM_BYPASS", "yes", 1);
    cr_expect_eq(nn_mem_settings_from_env(&s), NN_E_ENV);
    cr_expect(strstr(nn_last_error()->message, "NNPRIM_MEM_BYPASS must be 0 or 1, got \"yes\""),
              "%s", nn_last_error()->message);
    cr_expect_eq(s.bypass, 0, "a malformed variable leaves the default");
    unsetenv("NNPRIM_MEM_BYPASS");
    setenv("NNPRIM_MEM_LIMIT", "-5", 1);
    cr_expect_eq(nn_mem_settings_from_env(&s), NN_E_ENV);
    unsetenv("NNPRIM_MEM_LIMIT");
    setenv("NNPRIM_MEM_UPSTREAM", "cuda", 1);
    cr_expect_eq(nn_mem_settings_from_env(&s), NN_E_ENV);
    unsetenv("NNPRIM_MEM_UPSTREAM");
    cr_expect_float_eq(s.growth_slack, 0.0, 1e-12);
    setenv("NNPRIM_MEM_GROWTH_SLACK", "1.25", 1);
    cr_assert_eq(nn_mem_settings_from_env(&s), NN_OK);
    cr_expect_float_eq(s.growth_slack, 1.25, 1e-12);
    setenv("NNPRIM_MEM_GROWTH_SLACK", "0.5", 1);
    cr_expect_eq(nn_mem_settings_from_env(&s), NN_E_ENV);
    unsetenv("NNPRIM_MEM_GROWTH_SLACK");
    s.growth_slack = 0.9;
    cr_expect_eq(nn_mem_configure(NN_MEM_HOST, &s), NN_E_INVALID_ARG);
    cr_expect(strstr(nn_last_error()->message, "growth_slack must be 0 or >= 1.0, got 0.9"), "%s",
              nn_last_error()->message);
}

Test(mem_host, bypass_from_environment)
{
    setenv("NNPRIM_MEM_BYPASS", "1", 1);
    struct tstream a;
    ts_open(&a, NN_MEM_HOST);
    void *p = ts_alloc(&a, 100);
    cr_expect_eq(ts_stats(NN_MEM_HOST).segment_count, 0);
    cr_expect_eq(ts_stats(NN_MEM_HOST).reserved_bytes, 512);
    ts_free(&a, p);
    ts_close(&a);
    unsetenv("NNPRIM_MEM_BYPASS");
}

Test(mem_host, bad_arguments)
{
    nn_mem_stream *h = (nn_mem_stream *)1;
    int x;
    cr_expect_eq(nn_mem_stream_open(NN_MEM_HOST, &x, &h), NN_E_INVALID_ARG);
    cr_expect_null(h);
    cr_expect_eq(nn_mem_stream_open(-7, NULL, &h), NN_E_INVALID_ARG);
    cr_expect(strstr(nn_last_error()->message, "got -7"), "%s", nn_last_error()->message);
    nn_mem_stats s;
    cr_expect_eq(nn_mem_get_stats(NN_MEM_HOST, NULL), NN_E_INVALID_ARG);
    cr_expect_neq(nn_mem_get_stats(4096, &s), NN_OK);
    struct tstream a;
    ts_open(&a, NN_MEM_HOST);
    void *p = (void *)1;
    cr_expect_eq(nn_mem_stream_alloc(a.h, 0, &p), NN_E_INVALID_ARG);
    cr_expect_null(p);
    cr_expect_eq(nn_mem_stream_alloc(a.h, SIZE_MAX, &p), NN_E_OOM_DEVICE);
    nn_mem_settings set;
    cr_assert_eq(nn_mem_settings_from_env(&set), NN_OK);
    set.upstream = (nn_mem_upstream)9;
    cr_expect_eq(nn_mem_configure(NN_MEM_HOST, &set), NN_E_INVALID_ARG);
    cr_expect_eq(nn_mem_alloc(NULL, 4, &p), NN_E_INVALID_ARG);
    ts_close(&a);
}

/* Catalogue rows: the memory pool (mem.h). The host pool (NN_MEM_HOST) runs the pool's code on
 * every machine; nn_mem_alloc / nn_mem_free take a cuDNN context. */
#include <stdint.h>
#include <string.h>

#include "catalogue.h"
#include "gpu.h"

#define CALL(fname) static nn_status fname(struct cat *c)

#define H NN_MEM_HOST

static nn_mem_settings msettings(void)
{
    nn_mem_settings s;
    cr_assert_eq(nn_mem_settings_from_env(&s), NN_OK, "fixture: %s", nn_last_error()->message);
    return s;
}

CALL(default_null)
{
    (void)c;
    return nn_mem_settings_from_env(NULL);
}
CALL(settings_defaults_null)
{
    (void)c;
    return nn_mem_settings_defaults(NULL);
}
CALL(configure_null)
{
    (void)c;
    return nn_mem_configure(H, NULL);
}
CALL(configure_device)
{
    (void)c;
    nn_mem_settings s = msettings();
    return nn_mem_configure(-5, &s);
}
CALL(configure_upstream)
{
    (void)c;
    nn_mem_settings s = msettings();
    s.upstream = (nn_mem_upstream)9;
    return nn_mem_configure(H, &s);
}
CALL(configure_slack)
{
    (void)c;
    nn_mem_settings s = msettings();
    s.growth_slack = 0.5;
    return nn_mem_configure(H, &s);
}
CALL(configure_slack_nan)
{
    (void)c;
    nn_mem_settings s = msettings();
    s.growth_slack = __builtin_nan("");
    return nn_mem_configure(H, &s);
}
CALL(configure_reserved)
{
    (void)c;
    nn_mem_settings s = msettings();
    s.reserved[3] = 7;
    return nn_mem_configure(H, &s);
}
CALL(configure_no_device)
{
    (void)c;
    nn_mem_settings s = msettings();
    int n = 0;
    nn_device_count(&n);
    return nn_mem_configure(n + 3, &s);
}
CALL(set_limit_device)
{
    (void)c;
    return nn_mem_set_limit(-2, 0);
}
CALL(stats_null)
{
    (void)c;
    return nn_mem_get_stats(H, NULL);
}
CALL(stats_device)
{
    nn_mem_stats s;
    (void)c;
    return nn_mem_get_stats(-9, &s);
}
CALL(reset_peak_device)
{
    (void)c;
    return nn_mem_reset_peak_stats(-7);
}
CALL(format_null_s)
{
    char b[8];
    (void)c;
    return nn_mem_stats_format(NULL, b, sizeof b);
}
CALL(format_null_buf)
{
    nn_mem_stats s;
    memset(&s, 0, sizeof s);
    (void)c;
    return nn_mem_stats_format(&s, NULL, 8);
}
CALL(format_cap0)
{
    nn_mem_stats s;
    char b[1] = {'x'};
    memset(&s, 0, sizeof s);
    (void)c;
    return nn_mem_stats_format(&s, b, 0);
}
/* Edge: a one-byte buffer gets the terminating NUL. */
CALL(format_cap1)
{
    nn_mem_stats s;
    char b[1] = {'x'};
    memset(&s, 0, sizeof s);
    (void)c;
    nn_status st = nn_mem_stats_format(&s, b, 1);
    cr_assert_eq(b[0], 0);
    return st;
}
CALL(trim_device)
{
    (void)c;
    return nn_mem_trim(-3, NULL);
}
CALL(log_enable_device)
{
    (void)c;
    return nn_mem_log_enable(-9, 1);
}
CALL(log_read_null_out)
{
    size_t n;
    (void)c;
    return nn_mem_log_read(H, NULL, 4, &n);
}
CALL(log_read_null_count)
{
    nn_mem_event e[2];
    (void)c;
    return nn_mem_log_read(H, e, 2, NULL);
}
CALL(log_read_device)
{
    nn_mem_event e[2];
    size_t n;
    (void)c;
    return nn_mem_log_read(-4, e, 2, &n);
}

static nn_status env_then(const char *value, nn_status (*call)(void))
{
    cat_setenv("NNPRIM_MEM_LIMIT", value);
    return call();
}
static nn_status get_host_stats(void)
{
    nn_mem_stats s;
    return nn_mem_get_stats(H, &s);
}
static nn_status host_trim(void)
{
    return nn_mem_trim(H, NULL);
}
static nn_status host_defaults(void)
{
    nn_mem_settings s;
    return nn_mem_settings_from_env(&s);
}
CALL(env_limit_stats)
{
    (void)c;
    return env_then(" -1", get_host_stats);
}
CALL(env_limit_trim)
{
    (void)c;
    return env_then("12X", host_trim);
}
CALL(env_limit_default)
{
    (void)c;
    return env_then("-1", host_defaults);
}
CALL(env_upstream)
{
    (void)c;
    cat_setenv("NNPRIM_MEM_UPSTREAM", "mmap");
    return host_defaults();
}
CALL(env_slack)
{
    (void)c;
    cat_setenv("NNPRIM_MEM_GROWTH_SLACK", "0.5");
    return host_defaults();
}
CALL(env_bypass)
{
    (void)c;
    cat_setenv("NNPRIM_MEM_BYPASS", "on");
    return host_defaults();
}

/* ---- nn_mem_alloc / nn_mem_free (a cuDNN context) ---- */

CALL(alloc_null_ctx)
{
    void *p;
    (void)c;
    return nn_mem_alloc(NULL, 16, &p);
}
CALL(alloc_null_out)
{
    return nn_mem_alloc(c->ctx, 16, NULL);
}
CALL(alloc_zero)
{
    void *p = c;
    nn_status st = nn_mem_alloc(c->ctx, 0, &p);
    cr_assert_null(p, "out is NULL on failure");
    return st;
}
CALL(alloc_ref_ctx)
{
    void *p;
    nn_status st = nn_mem_alloc(c->ctx, 16, &p);
    if (st == NN_OK) cr_assert_eq(nn_mem_free(c->ctx, p), NN_OK, "%s", nn_last_error()->message);
    return st;
}
/* SIZE_MAX - 511 is out of memory, not rounded up into a small (wrapped) segment. */
CALL(alloc_wrap)
{
    void *p;
    return nn_mem_alloc(c->ctx, SIZE_MAX - 511, &p);
}
CALL(alloc_2p49)
{
    void *p;
    return nn_mem_alloc(c->ctx, (size_t)1 << 49, &p);
}
CALL(free_null_ctx)
{
    (void)c;
    return nn_mem_free(NULL, c);
}
CALL(free_foreign)
{
    return nn_mem_free(c->ctx, cat_host_block(c, 64));
}
CALL(free_twice)
{
    void *p;
    nn_status st = nn_mem_alloc(c->ctx, 64, &p);
    if (st != NN_OK) return st;
    cr_assert_eq(nn_mem_free(c->ctx, p), NN_OK, "first free");
    return nn_mem_free(c->ctx, p);
}

/* ---- streams of the host pool ---- */

static nn_mem_stream *host_stream(void)
{
    nn_mem_stream *s = NULL;
    cr_assert_eq(nn_mem_stream_open(H, NULL, &s), NN_OK, "fixture: %s", nn_last_error()->message);
    return s;
}
CALL(stream_open_null)
{
    (void)c;
    return nn_mem_stream_open(H, NULL, NULL);
}
CALL(stream_open_host_stream)
{
    nn_mem_stream *s = NULL;
    (void)c;
    return nn_mem_stream_open(H, (void *)c, &s);
}
CALL(stream_open_device)
{
    nn_mem_stream *s;
    (void)c;
    return nn_mem_stream_open(-6, NULL, &s);
}
CALL(stream_alloc_null)
{
    void *p;
    (void)c;
    return nn_mem_stream_alloc(NULL, 16, &p);
}
CALL(stream_alloc_out_null)
{
    nn_mem_stream *s = host_stream();
    nn_status st = nn_mem_stream_alloc(s, 16, NULL);
    nn_mem_stream_close(s);
    return st;
}
CALL(stream_alloc_zero)
{
    nn_mem_stream *s = host_stream();
    void *p;
    nn_status st = nn_mem_stream_alloc(s, 0, &p);
    nn_mem_stream_close(s);
    return st;
}
CALL(stream_alloc_wrap)
{
    nn_mem_stream *s = host_stream();
    void *p = c;
    nn_status st = nn_mem_stream_alloc(s, SIZE_MAX - 511, &p);
    cr_assert_null(p, "out is NULL on failure");
    nn_mem_stream_close(s);
    return st;
}
CALL(stream_alloc_limit)
{
    cr_assert_eq(nn_mem_set_limit(H, 1 << 20), NN_OK, "%s", nn_last_error()->message);
    nn_mem_stream *s = host_stream();
    void *p = NULL, *q = NULL;
    /* a small request fits under a small limit; a larger one does not */
    cr_assert_eq(nn_mem_stream_alloc(s, 4096, &p), NN_OK, "%s", nn_last_error()->message);
    nn_status st = nn_mem_stream_alloc(s, 2 << 20, &q);
    cr_assert_eq(nn_mem_stream_free(s, p), NN_OK);
    nn_mem_stream_close(s);
    (void)c;
    return st;
}
CALL(stream_free_null)
{
    (void)c;
    return nn_mem_stream_free(NULL, c);
}
CALL(stream_free_twice)
{
    nn_mem_stream *s = host_stream();
    void *p;
    cr_assert_eq(nn_mem_stream_alloc(s, 64, &p), NN_OK, "%s", nn_last_error()->message);
    cr_assert_eq(nn_mem_stream_free(s, p), NN_OK, "first free");
    nn_status st = nn_mem_stream_free(s, p);
    nn_mem_stream_close(s);
    (void)c;
    return st;
}
CALL(stream_free_foreign)
{
    nn_mem_stream *s = host_stream();
    nn_status st = nn_mem_stream_free(s, cat_host_block(c, 64));
    nn_mem_stream_close(s);
    return st;
}
CALL(stream_close_null)
{
    (void)c;
    nn_mem_stream_close(NULL);
    return NN_OK;
}

#define E NN_E_INVALID_ARG
#define V NN_E_ENV
#define B NN_E_BAD_POINTER

static const struct cat_row rows[] = {
    ROW("mem_settings_from_env NULL", "nn_mem_settings_from_env", "s", E, default_null),
    ROW("mem_settings_defaults NULL", "nn_mem_settings_defaults", "s", E, settings_defaults_null),
    ROW("mem_configure s NULL", "nn_mem_configure", "s", E, configure_null),
    ROW("mem_configure device -5", "nn_mem_configure", "device", E, configure_device),
    ROW("mem_configure upstream 9", "nn_mem_configure", "s.upstream", E, configure_upstream),
    ROW("mem_configure growth_slack 0.5", "nn_mem_configure", "s.growth_slack", E, configure_slack),
    ROW("mem_configure growth_slack NaN", "nn_mem_configure", "s.growth_slack", E,
        configure_slack_nan),
    ROW("mem_configure reserved[3]", "nn_mem_configure", "s.reserved[3]", E, configure_reserved),
    ROW2("mem_configure ordinal without a device", "nn_mem_configure", NULL, NN_E_NO_DEVICE,
         NN_E_NO_DEVICE, configure_no_device),
    ROW("mem_set_limit device -2", "nn_mem_set_limit", "device", E, set_limit_device),
    ROW("mem_get_stats out NULL", "nn_mem_get_stats", "out", E, stats_null),
    ROW("mem_get_stats device -9", "nn_mem_get_stats", "device", E, stats_device),
    ROW("mem_reset_peak_stats device -7", "nn_mem_reset_peak_stats", "device", E,
        reset_peak_device),
    ROW("mem_stats_format s NULL", "nn_mem_stats_format", "s", E, format_null_s),
    ROW("mem_stats_format buf NULL", "nn_mem_stats_format", "buf", E, format_null_buf),
    ROW("mem_stats_format cap 0", "nn_mem_stats_format", "cap", E, format_cap0),
    ROW("mem_stats_format cap 1 (edge)", "nn_mem_stats_format", NULL, NN_OK, format_cap1),
    ROW("mem_trim device -3", "nn_mem_trim", "device", E, trim_device),
    ROW("mem_log_enable device -9", "nn_mem_log_enable", "device", E, log_enable_device),
    ROW("mem_log_read out NULL", "nn_mem_log_read", "out", E, log_read_null_out),
    ROW("mem_log_read count NULL", "nn_mem_log_read", "count", E, log_read_null_count),
    ROW("mem_log_read device -4", "nn_mem_log_read", "device", E, log_read_device),
    ROW("NNPRIM_MEM_LIMIT=' -1' then get_stats", "nn_mem_get_stats", "NNPRIM_MEM_LIMIT", V,
        env_limit_stats),
    ROW("NNPRIM_MEM_LIMIT=12X then trim", "nn_mem_trim", "NNPRIM_MEM_LIMIT", V, env_limit_trim),
    ROW("NNPRIM_MEM_LIMIT=-1", "nn_mem_settings_from_env", "NNPRIM_MEM_LIMIT", V,
        env_limit_default),
    ROW("NNPRIM_MEM_UPSTREAM=mmap", "nn_mem_settings_from_env", "NNPRIM_MEM_UPSTREAM", V,
        env_upstream),
    ROW("NNPRIM_MEM_GROWTH_SLACK=0.5", "nn_mem_settings_from_env", "NNPRIM_MEM_GROWTH_SLACK", V,
        env_slack),
    ROW("NNPRIM_MEM_BYPASS=on", "nn_mem_settings_from_env", "NNPRIM_MEM_BYPASS", V, env_bypass),
    ROW("mem_alloc ctx NULL", "nn_mem_alloc", "ctx", E, alloc_null_ctx),
    ROW_ON(CAT_GPU_ONLY, "mem_alloc out NULL", "nn_mem_alloc", "out", E, alloc_null_out),
    ROW("mem_alloc 0 bytes", "nn_mem_alloc", NULL, E, alloc_zero),
    ROW2("mem_alloc on a reference context", "nn_mem_alloc", "ctx", E, NN_OK, alloc_ref_ctx),
    ROW2("mem_alloc SIZE_MAX - 511", "nn_mem_alloc", NULL, E, NN_E_OOM_DEVICE, alloc_wrap),
    ROW2("mem_alloc 2^49 bytes", "nn_mem_alloc", NULL, E, NN_E_OOM_DEVICE, alloc_2p49),
    ROW("mem_free ctx NULL", "nn_mem_free", "ctx", E, free_null_ctx),
    ROW2("mem_free foreign pointer", "nn_mem_free", NULL, E, B, free_foreign),
    ROW_ON(CAT_GPU_ONLY, "mem_free twice", "nn_mem_free", NULL, B, free_twice),
    ROW("mem_stream_open out NULL", "nn_mem_stream_open", "out", E, stream_open_null),
    ROW("mem_stream_open a stream for the host pool", "nn_mem_stream_open", "stream", E,
        stream_open_host_stream),
    ROW("mem_stream_open device -6", "nn_mem_stream_open", "device", E, stream_open_device),
    ROW("mem_stream_alloc s NULL", "nn_mem_stream_alloc", "s", E, stream_alloc_null),
    ROW("mem_stream_alloc out NULL", "nn_mem_stream_alloc", "out", E, stream_alloc_out_null),
    ROW("mem_stream_alloc 0 bytes", "nn_mem_stream_alloc", "bytes", E, stream_alloc_zero),
    ROW("mem_stream_alloc SIZE_MAX - 511", "nn_mem_stream_alloc", NULL, NN_E_OOM_DEVICE,
        stream_alloc_wrap),
    ROW("mem_stream_alloc above a 1 MiB limit", "nn_mem_stream_alloc", NULL, NN_E_OOM_DEVICE,
        stream_alloc_limit),
    ROW("mem_stream_free s NULL", "nn_mem_stream_free", "s", E, stream_free_null),
    ROW("mem_stream_free twice", "nn_mem_stream_free", NULL, B, stream_free_twice),
    ROW("mem_stream_free foreign pointer", "nn_mem_stream_free", NULL, B, stream_free_foreign),
    ROW("mem_stream_close NULL (edge)", "nn_mem_stream_close", NULL, NN_OK, stream_close_null),
};

CAT_SUBJECT(mem, rows)

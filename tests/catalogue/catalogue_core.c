/* Catalogue rows: status, version, devices, settings and the context (status.h, context.h). */
#include <limits.h>
#include <string.h>

#include "catalogue.h"
#include "gpu.h"

#define CALL(fname) static nn_status fname(struct cat *c)

/* ---- status and version (edge rows: values, no failure) ---- */

CALL(strerror_unknown)
{
    (void)c;
    cr_assert_str_eq(nn_status_string((nn_status)-999), "unknown status");
    cr_assert_str_eq(nn_status_string((nn_status)INT_MAX), "unknown status");
    return NN_OK;
}
CALL(strerror_every)
{
    (void)c;
    for (int s = 0; s >= NN_E_GRAPH; s--) {
        cr_assert_neq(strcmp(nn_status_string((nn_status)s), "unknown status"), 0, "status %d", s);
        cr_assert_eq(strncmp(nn_status_name((nn_status)s), "NN_", 3), 0, "status %d", s);
    }
    return NN_OK;
}
CALL(status_name_unknown)
{
    (void)c;
    cr_assert_str_eq(nn_status_name((nn_status)1), "NN_UNKNOWN");
    cr_assert_str_eq(nn_status_name((nn_status)INT_MIN), "NN_UNKNOWN");
    return NN_OK;
}
CALL(version)
{
    (void)c;
    cr_assert_not_null(nn_version());
    cr_assert_gt(nn_version_number(), 0);
    return NN_OK;
}
/* A failure is recorded per thread and per context; clearing forgets the thread's. */
CALL(last_error_records)
{
    nn_status st = nn_tensor_fill_ints(c->ctx, &c->x, 3, 1, 0);
    nn_error_info e;
    cr_assert_eq(nn_ctx_last_error(c->ctx, &e), NN_OK);
    cr_assert_eq(e.status, st, "the context's record");
    cr_assert_str_eq(e.message, nn_last_error()->message);
    return st;
}
CALL(clear_last_error)
{
    nn_status st = nn_conv_forward(c->ctx, NULL, &c->x, &c->w, NULL, &c->y, NULL);
    cr_assert_neq(st, NN_OK);
    nn_clear_last_error();
    cr_assert_eq(nn_last_error()->status, NN_OK);
    cr_assert_str_eq(nn_last_error()->message, "");
    return NN_OK;
}

/* ---- devices ---- */

CALL(device_count_null)
{
    (void)c;
    return nn_device_count(NULL);
}
CALL(device_info_null)
{
    (void)c;
    return nn_device_get_info(0, NULL);
}
CALL(device_info_neg)
{
    (void)c;
    nn_device_info i;
    const char *why;
    if (!nn_test_have_gpu(&why)) cr_skip_test("ordinals are checked against a device: %s", why);
    return nn_device_get_info(-1, &i);
}
CALL(device_info_big)
{
    (void)c;
    nn_device_info i;
    const char *why;
    if (!nn_test_have_gpu(&why)) cr_skip_test("ordinals are checked against a device: %s", why);
    return nn_device_get_info(INT_MAX, &i);
}
CALL(runtime_library_null)
{
    (void)c;
    return nn_runtime_library_info(NN_RUNTIME_CUDNN, NULL);
}
CALL(runtime_library_neg)
{
    (void)c;
    nn_runtime_library l;
    memset(&l, 0x5a, sizeof l);
    nn_status st = nn_runtime_library_info(-1, &l);
    cr_assert_eq(((unsigned char *)&l)[0], 0x5a, "out untouched on failure");
    return st;
}
CALL(runtime_library_big)
{
    (void)c;
    nn_runtime_library l;
    return nn_runtime_library_info(NN_RUNTIME_LIBRARY_COUNT, &l);
}
CALL(device_info_none)
{
    (void)c;
    nn_device_info i;
    const char *why;
    if (nn_test_have_gpu(&why)) cr_skip_test("a row for a machine without a GPU");
    memset(&i, 0x5a, sizeof i);
    nn_status st = nn_device_get_info(0, &i);
    cr_assert_eq(((unsigned char *)&i)[0], 0x5a, "info untouched on failure");
    return st;
}

/* ---- settings and the environment ---- */

CALL(settings_from_env_null)
{
    (void)c;
    return nn_settings_from_env(NULL);
}

static nn_status env_row(const char *name, const char *value)
{
    cat_setenv(name, value);
    nn_settings s;
    nn_status st = nn_settings_from_env(&s);
    /* always filled completely: the malformed variable keeps its default */
    cr_assert_eq(s.plan_cache_capacity >= 1 && s.autotune_candidates >= 1, 1, "defaults");
    return st;
}
CALL(env_backend)
{
    (void)c;
    return env_row("NNPRIM_BACKEND", "gpu");
}
CALL(env_backend_case)
{
    (void)c;
    return env_row("NNPRIM_BACKEND", "REF ");
}
CALL(env_device_neg)
{
    (void)c;
    return env_row("NNPRIM_DEVICE", "-1");
}
CALL(env_device_blank)
{
    (void)c;
    return env_row("NNPRIM_DEVICE", " 1");
}
CALL(env_device_junk)
{
    (void)c;
    return env_row("NNPRIM_DEVICE", "1x");
}
CALL(env_device_huge)
{
    (void)c;
    return env_row("NNPRIM_DEVICE", "99999999999999999999");
}
CALL(env_math)
{
    (void)c;
    return env_row("NNPRIM_MATH", "fast");
}
CALL(env_det)
{
    (void)c;
    return env_row("NNPRIM_DETERMINISTIC", "2");
}
CALL(env_cap_neg)
{
    (void)c;
    return env_row("NNPRIM_WORKSPACE_CAP", " -5");
}
CALL(env_cap_sign)
{
    (void)c;
    return env_row("NNPRIM_WORKSPACE_CAP", "+5");
}
CALL(env_cap_suffix)
{
    (void)c;
    return env_row("NNPRIM_WORKSPACE_CAP", "1Q");
}
CALL(env_cap_overflow)
{
    (void)c;
    return env_row("NNPRIM_WORKSPACE_CAP", "17179869184G");
}
CALL(env_tuning)
{
    (void)c;
    return env_row("NNPRIM_TUNING", "best");
}
CALL(env_candidates)
{
    (void)c;
    return env_row("NNPRIM_AUTOTUNE_CANDIDATES", "0");
}
CALL(env_capacity)
{
    (void)c;
    return env_row("NNPRIM_PLAN_CACHE_CAPACITY", "-3");
}
CALL(env_background)
{
    (void)c;
    return env_row("NNPRIM_BACKGROUND_BUILDS", "yes");
}
CALL(env_prebuild)
{
    (void)c;
    return env_row("NNPRIM_PREBUILD_PLANS", "2");
}
CALL(env_linear_graphs)
{
    (void)c;
    return env_row("NNPRIM_LINEAR_GRAPHS", "2");
}
CALL(env_xent_targets)
{
    (void)c;
    return env_row("NNPRIM_XENT_TARGETS", "host");
}
CALL(env_verbose)
{
    (void)c;
    return env_row("NNPRIM_VERBOSE", "3");
}
CALL(env_verbose_empty)
{
    (void)c;
    return env_row("NNPRIM_VERBOSE", "");
}
CALL(env_ctx_create)
{
    (void)c;
    cat_setenv("NNPRIM_VERBOSE", "loud");
    nn_ctx *x = (nn_ctx *)c;
    nn_status st = nn_ctx_create(&x, NULL);
    cr_assert_null(x, "out is NULL on failure");
    return st;
}

/* ---- nn_ctx_create ---- */

static nn_status create_with(nn_settings *s)
{
    nn_ctx *x = NULL;
    nn_status st = nn_ctx_create(&x, s);
    if (st == NN_OK)
        nn_ctx_destroy(x);
    else
        cr_assert_null(x, "out is NULL on failure");
    return st;
}
static nn_settings defaults(void)
{
    nn_settings s;
    cr_assert_eq(nn_settings_from_env(&s), NN_OK, "fixture");
    s.plan_cache_file = NULL;
    return s;
}
CALL(create_null_out)
{
    (void)c;
    return nn_ctx_create(NULL, NULL);
}
CALL(create_backend)
{
    (void)c;
    nn_settings s = defaults();
    s.backend = (nn_backend)7;
    return create_with(&s);
}
CALL(create_backend_neg)
{
    (void)c;
    nn_settings s = defaults();
    s.backend = (nn_backend)-1;
    return create_with(&s);
}
CALL(create_device_neg)
{
    (void)c;
    nn_settings s = defaults();
    s.device = -1;
    return create_with(&s);
}
CALL(create_math)
{
    (void)c;
    nn_settings s = defaults();
    s.math_mode = (nn_math_mode)9;
    return create_with(&s);
}
CALL(create_tuning)
{
    (void)c;
    nn_settings s = defaults();
    s.tuning = (nn_tuning_mode)5;
    return create_with(&s);
}
CALL(create_linear_graphs)
{
    (void)c;
    nn_settings s = defaults();
    s.linear_graphs = (nn_graphs_mode)3;
    return create_with(&s);
}
CALL(create_xent_targets)
{
    (void)c;
    nn_settings s = defaults();
    s.xent_targets = (nn_targets_mode)2;
    return create_with(&s);
}
CALL(create_candidates)
{
    (void)c;
    nn_settings s = defaults();
    s.autotune_candidates = 0;
    return create_with(&s);
}
CALL(create_capacity)
{
    (void)c;
    nn_settings s = defaults();
    s.plan_cache_capacity = 0;
    return create_with(&s);
}
CALL(create_verbose)
{
    (void)c;
    nn_settings s = defaults();
    s.verbose = 3;
    return create_with(&s);
}
CALL(create_verbose_neg)
{
    (void)c;
    nn_settings s = defaults();
    s.verbose = -1;
    return create_with(&s);
}
CALL(create_res0)
{
    (void)c;
    nn_settings s = defaults();
    s.reserved[0] = 1;
    return create_with(&s);
}
CALL(create_res5)
{
    (void)c;
    nn_settings s = defaults();
    s.reserved[5] = UINT64_MAX;
    return create_with(&s);
}
CALL(create_cudnn_no_gpu)
{
    (void)c;
    const char *why;
    if (nn_test_have_gpu(&why)) cr_skip_test("a row for a machine without a GPU");
    nn_settings s = defaults();
    s.backend = NN_BACKEND_CUDNN;
    return create_with(&s);
}
/* Edge: the largest workspace cap and an ordinal beyond the devices fall back or run. */
CALL(create_cap_max)
{
    (void)c;
    nn_settings s = defaults();
    s.workspace_cap = SIZE_MAX;
    return create_with(&s);
}
CALL(create_plan_file_missing)
{
    nn_settings s = defaults();
    char path[128];
    cat_path(c, "no-such-plan-file", path, sizeof path);
    s.plan_cache_file = path; /* a missing file is not an error */
    return create_with(&s);
}

CALL(get_settings_null_ctx)
{
    nn_settings s;
    (void)c;
    return nn_ctx_get_settings(NULL, &s);
}
CALL(get_settings_null_out)
{
    return nn_ctx_get_settings(c->ctx, NULL);
}
CALL(get_settings_resolved)
{
    nn_settings s;
    cr_assert_eq(nn_ctx_get_settings(c->ctx, &s), NN_OK);
    cr_assert(s.backend == NN_BACKEND_REF || s.backend == NN_BACKEND_CUDNN, "resolved backend");
    cr_assert_eq(s.backend, nn_ctx_backend(c->ctx));
    return NN_OK;
}
CALL(sync_null)
{
    (void)c;
    return nn_ctx_synchronize(NULL);
}
CALL(sync_ok)
{
    return nn_ctx_synchronize(c->ctx);
}
CALL(last_error_null_ctx)
{
    nn_error_info e;
    (void)c;
    return nn_ctx_last_error(NULL, &e);
}
CALL(last_error_null_out)
{
    return nn_ctx_last_error(c->ctx, NULL);
}
CALL(destroy_null)
{
    (void)c;
    nn_ctx_destroy(NULL);
    return NN_OK;
}
CALL(stream_of_ctx)
{
    if (c->gpu)
        cr_assert_not_null(nn_ctx_stream(c->ctx));
    else
        cr_assert_null(nn_ctx_stream(c->ctx));
    return NN_OK;
}

#define E NN_E_INVALID_ARG
#define V NN_E_ENV

static const struct cat_row rows[] = {
    ROW("strerror of unknown codes (edge)", "nn_status_string", NULL, NN_OK, strerror_unknown),
    ROW("strerror and name of every code (edge)", "nn_status_string", NULL, NN_OK, strerror_every),
    ROW("status_name of unknown codes (edge)", "nn_status_name", NULL, NN_OK, status_name_unknown),
    ROW("version (edge)", "nn_version", NULL, NN_OK, version),
    ROW("last error per thread and context", "nn_tensor_fill_ints", "lo", E, last_error_records),
    ROW("clear_last_error (edge)", "nn_clear_last_error", NULL, NN_OK, clear_last_error),
    ROW("device_count NULL", "nn_device_count", "count", E, device_count_null),
    ROW("device_get_info info NULL", "nn_device_get_info", "info", E, device_info_null),
    ROW("device_get_info ordinal -1", "nn_device_get_info", "ordinal", E, device_info_neg),
    ROW("device_get_info ordinal INT_MAX", "nn_device_get_info", "ordinal", E, device_info_big),
    ROW("device_get_info without a GPU", "nn_device_get_info", NULL, NN_E_NO_DEVICE,
        device_info_none),
    ROW("runtime_library_info out NULL", "nn_runtime_library_info", "out", E, runtime_library_null),
    ROW("runtime_library_info which -1", "nn_runtime_library_info", "which", E,
        runtime_library_neg),
    ROW("runtime_library_info which COUNT", "nn_runtime_library_info", "which", E,
        runtime_library_big),
    ROW("settings_from_env NULL", "nn_settings_from_env", "s", E, settings_from_env_null),
    ROW("NNPRIM_BACKEND=gpu", "nn_settings_from_env", "NNPRIM_BACKEND", V, env_backend),
    ROW("NNPRIM_BACKEND='REF '", "nn_settings_from_env", "NNPRIM_BACKEND", V, env_backend_case),
    ROW("NNPRIM_DEVICE=-1", "nn_settings_from_env", "NNPRIM_DEVICE", V, env_device_neg),
    ROW("NNPRIM_DEVICE=' 1'", "nn_settings_from_env", "NNPRIM_DEVICE", V, env_device_blank),
    ROW("NNPRIM_DEVICE=1x", "nn_settings_from_env", "NNPRIM_DEVICE", V, env_device_junk),
    ROW("NNPRIM_DEVICE overflows", "nn_settings_from_env", "NNPRIM_DEVICE", V, env_device_huge),
    ROW("NNPRIM_MATH=fast", "nn_settings_from_env", "NNPRIM_MATH", V, env_math),
    ROW("NNPRIM_DETERMINISTIC=2", "nn_settings_from_env", "NNPRIM_DETERMINISTIC", V, env_det),
    ROW("NNPRIM_WORKSPACE_CAP=' -5'", "nn_settings_from_env", "NNPRIM_WORKSPACE_CAP", V,
        env_cap_neg),
    ROW("NNPRIM_WORKSPACE_CAP=+5", "nn_settings_from_env", "NNPRIM_WORKSPACE_CAP", V, env_cap_sign),
    ROW("NNPRIM_WORKSPACE_CAP=1Q", "nn_settings_from_env", "NNPRIM_WORKSPACE_CAP", V,
        env_cap_suffix),
    ROW("NNPRIM_WORKSPACE_CAP overflows", "nn_settings_from_env", "NNPRIM_WORKSPACE_CAP", V,
        env_cap_overflow),
    ROW("NNPRIM_TUNING=best", "nn_settings_from_env", "NNPRIM_TUNING", V, env_tuning),
    ROW("NNPRIM_AUTOTUNE_CANDIDATES=0", "nn_settings_from_env", "NNPRIM_AUTOTUNE_CANDIDATES", V,
        env_candidates),
    ROW("NNPRIM_PLAN_CACHE_CAPACITY=-3", "nn_settings_from_env", "NNPRIM_PLAN_CACHE_CAPACITY", V,
        env_capacity),
    ROW("NNPRIM_BACKGROUND_BUILDS=yes", "nn_settings_from_env", "NNPRIM_BACKGROUND_BUILDS", V,
        env_background),
    ROW("NNPRIM_PREBUILD_PLANS=2", "nn_settings_from_env", "NNPRIM_PREBUILD_PLANS", V,
        env_prebuild),
    ROW("NNPRIM_LINEAR_GRAPHS=2", "nn_settings_from_env", "NNPRIM_LINEAR_GRAPHS", V,
        env_linear_graphs),
    ROW("NNPRIM_XENT_TARGETS=host", "nn_settings_from_env", "NNPRIM_XENT_TARGETS", V,
        env_xent_targets),
    ROW("NNPRIM_VERBOSE=3", "nn_settings_from_env", "NNPRIM_VERBOSE", V, env_verbose),
    ROW("NNPRIM_VERBOSE=''", "nn_settings_from_env", "NNPRIM_VERBOSE", V, env_verbose_empty),
    ROW("ctx_create with a malformed environment", "nn_ctx_create", "NNPRIM_VERBOSE", V,
        env_ctx_create),
    ROW("ctx_create out NULL", "nn_ctx_create", "out", E, create_null_out),
    ROW("ctx_create backend 7", "nn_ctx_create", "settings.backend", E, create_backend),
    ROW("ctx_create backend -1", "nn_ctx_create", "settings.backend", E, create_backend_neg),
    ROW("ctx_create device -1", "nn_ctx_create", "settings.device", E, create_device_neg),
    ROW("ctx_create math_mode 9", "nn_ctx_create", "settings.math_mode", E, create_math),
    ROW("ctx_create tuning 5", "nn_ctx_create", "settings.tuning", E, create_tuning),
    ROW("ctx_create linear_graphs 3", "nn_ctx_create", "settings.linear_graphs", E,
        create_linear_graphs),
    ROW("ctx_create xent_targets 2", "nn_ctx_create", "settings.xent_targets", E,
        create_xent_targets),
    ROW("ctx_create autotune_candidates 0", "nn_ctx_create", "settings.autotune_candidates", E,
        create_candidates),
    ROW("ctx_create plan_cache_capacity 0", "nn_ctx_create", "settings.plan_cache_capacity", E,
        create_capacity),
    ROW("ctx_create verbose 3", "nn_ctx_create", "settings.verbose", E, create_verbose),
    ROW("ctx_create verbose -1", "nn_ctx_create", "settings.verbose", E, create_verbose_neg),
    ROW("ctx_create reserved[0]", "nn_ctx_create", "settings.reserved[0]", E, create_res0),
    ROW("ctx_create reserved[5]", "nn_ctx_create", "settings.reserved[5]", E, create_res5),
    ROW("ctx_create cuDNN without a GPU", "nn_ctx_create", NULL, NN_E_NO_DEVICE,
        create_cudnn_no_gpu),
    ROW("ctx_create workspace_cap SIZE_MAX (edge)", "nn_ctx_create", NULL, NN_OK, create_cap_max),
    ROW("ctx_create plan file missing (edge)", "nn_ctx_create", NULL, NN_OK,
        create_plan_file_missing),
    ROW("ctx_get_settings ctx NULL", "nn_ctx_get_settings", "ctx", E, get_settings_null_ctx),
    ROW("ctx_get_settings out NULL", "nn_ctx_get_settings", "out", E, get_settings_null_out),
    ROW("ctx_get_settings resolved (edge)", "nn_ctx_get_settings", NULL, NN_OK,
        get_settings_resolved),
    ROW("ctx_synchronize NULL", "nn_ctx_synchronize", "ctx", E, sync_null),
    ROW("ctx_synchronize (edge)", "nn_ctx_synchronize", NULL, NN_OK, sync_ok),
    ROW("ctx_last_error ctx NULL", "nn_ctx_last_error", "ctx", E, last_error_null_ctx),
    ROW("ctx_last_error out NULL", "nn_ctx_last_error", "out", E, last_error_null_out),
    ROW("ctx_destroy NULL (edge)", "nn_ctx_destroy", NULL, NN_OK, destroy_null),
    ROW("ctx_stream (edge)", "nn_ctx_stream", NULL, NN_OK, stream_of_ctx),
};

CAT_SUBJECT(core, rows)

#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "gpu.h"
#include "nnprim/nnprim.h"

/* Criterion runs each test in its own process, so setenv() here cannot leak into other tests. */

Test(settings, defaults_without_environment)
{
    nn_settings s;
    cr_assert_eq(nn_settings_from_env(&s), NN_OK);
    cr_expect_eq(s.backend, NN_BACKEND_AUTO);
    cr_expect_eq(s.device, 0);
    cr_expect_null(s.stream);
    cr_expect_eq(s.math_mode, NN_MATH_STRICT_FP32);
    cr_expect_eq(s.deterministic, 0);
    cr_expect_eq(s.workspace_cap, 0);
    cr_expect_eq(s.tuning, NN_TUNING_HEURISTIC);
    cr_expect_eq(s.autotune_candidates, 16);
    cr_expect_null(s.plan_cache_file);
    cr_expect_eq(s.plan_cache_capacity, 256);
    cr_expect_eq(s.verbose, 0);
    cr_expect_eq(s.background_builds, 1);
    cr_expect_eq(s.prebuild_plans, 1);
    cr_expect_eq(s.rnn_graphs, NN_GRAPHS_AUTO);
    cr_expect_eq(s.linear_graphs, NN_GRAPHS_AUTO);
    cr_expect_eq(s.xent_targets, NN_TARGETS_CHECKED);
}

Test(settings, environment_overrides_every_field)
{
    setenv("NNPRIM_BACKEND", "REF", 1);
    setenv("NNPRIM_DEVICE", "3", 1);
    setenv("NNPRIM_MATH", "tf32", 1);
    setenv("NNPRIM_DETERMINISTIC", "1", 1);
    setenv("NNPRIM_WORKSPACE_CAP", "64M", 1);
    setenv("NNPRIM_TUNING", "autotune", 1);
    setenv("NNPRIM_AUTOTUNE_CANDIDATES", "5", 1);
    setenv("NNPRIM_PLAN_CACHE", "/tmp/plans.nnp", 1);
    setenv("NNPRIM_PLAN_CACHE_CAPACITY", "17", 1);
    setenv("NNPRIM_VERBOSE", "2", 1);
    setenv("NNPRIM_BACKGROUND_BUILDS", "0", 1);
    setenv("NNPRIM_PREBUILD_PLANS", "0", 1);
    setenv("NNPRIM_LINEAR_GRAPHS", "0", 1);
    setenv("NNPRIM_XENT_TARGETS", "device", 1);
    nn_settings s;
    cr_assert_eq(nn_settings_from_env(&s), NN_OK);
    cr_expect_eq(s.backend, NN_BACKEND_REF);
    cr_expect_eq(s.device, 3);
    cr_expect_eq(s.math_mode, NN_MATH_TF32);
    cr_expect_eq(s.deterministic, 1);
    cr_expect_eq(s.workspace_cap, (size_t)64 << 20);
    cr_expect_eq(s.tuning, NN_TUNING_AUTOTUNE);
    cr_expect_eq(s.autotune_candidates, 5);
    cr_expect_str_eq(s.plan_cache_file, "/tmp/plans.nnp");
    cr_expect_eq(s.plan_cache_capacity, 17);
    cr_expect_eq(s.verbose, 2);
    cr_expect_eq(s.background_builds, 0);
    cr_expect_eq(s.prebuild_plans, 0);
    cr_expect_eq(s.linear_graphs, NN_GRAPHS_OFF);
    cr_expect_eq(s.xent_targets, NN_TARGETS_ON_DEVICE);
    setenv("NNPRIM_XENT_TARGETS", "checked", 1);
    cr_assert_eq(nn_settings_from_env(&s), NN_OK);
    cr_expect_eq(s.xent_targets, NN_TARGETS_CHECKED);
}

/* Both replay settings read one grammar into one enum: auto, 0 and 1 are AUTO, OFF and ON. */
Test(settings, graphs_variables_share_one_grammar)
{
    static const struct {
        const char *value;
        nn_graphs_mode want;
    } words[] = {{"auto", NN_GRAPHS_AUTO},
                 {"AUTO", NN_GRAPHS_AUTO},
                 {"0", NN_GRAPHS_OFF},
                 {"1", NN_GRAPHS_ON}};
    for (size_t i = 0; i < sizeof words / sizeof words[0]; i++) {
        setenv("NNPRIM_RNN_GRAPHS", words[i].value, 1);
        setenv("NNPRIM_LINEAR_GRAPHS", words[i].value, 1);
        nn_settings s;
        cr_assert_eq(nn_settings_from_env(&s), NN_OK, "%s", nn_last_error()->message);
        cr_expect_eq(s.rnn_graphs, words[i].want, "NNPRIM_RNN_GRAPHS=%s", words[i].value);
        cr_expect_eq(s.linear_graphs, words[i].want, "NNPRIM_LINEAR_GRAPHS=%s", words[i].value);
    }
    unsetenv("NNPRIM_RNN_GRAPHS");
    unsetenv("NNPRIM_LINEAR_GRAPHS");
}

struct bad_env {
    const char *var, *value, *expect_in_message;
};

static const struct bad_env bad_envs[] = {
    {"NNPRIM_BACKEND", "gpu", "auto, ref or cudnn"},
    {"NNPRIM_DEVICE", "-1", "an integer in [0,"},
    {"NNPRIM_DEVICE", "1x", "an integer"},
    {"NNPRIM_MATH", "fp16", "strict or tf32"},
    {"NNPRIM_DETERMINISTIC", "yes", "0 or 1"},
    {"NNPRIM_BACKGROUND_BUILDS", "on", "0 or 1"},
    {"NNPRIM_PREBUILD_PLANS", "2", "0 or 1"},
    {"NNPRIM_LINEAR_GRAPHS", "on", "auto, 0 or 1"},
    {"NNPRIM_LINEAR_GRAPHS", "2", "auto, 0 or 1"},
    {"NNPRIM_RNN_GRAPHS", "on", "auto, 0 or 1"},
    {"NNPRIM_XENT_TARGETS", "host", "checked or device"},
    {"NNPRIM_XENT_TARGETS", "1", "checked or device"},
    {"NNPRIM_WORKSPACE_CAP", "12T", "byte count"},
    {"NNPRIM_WORKSPACE_CAP", "-5", "byte count"},
    {"NNPRIM_WORKSPACE_CAP", "99999999999999999999", "byte count"},
    {"NNPRIM_TUNING", "fast", "heuristic or autotune"},
    {"NNPRIM_AUTOTUNE_CANDIDATES", "0", "an integer in [1,"},
    {"NNPRIM_PLAN_CACHE_CAPACITY", "", "an integer"},
    {"NNPRIM_VERBOSE", "3", "an integer in [0, 2]"},
    /* strtoul and strtol take leading blanks and signs: " -5" was a huge workspace cap. */
    {"NNPRIM_WORKSPACE_CAP", " -5", "byte count"},
    {"NNPRIM_WORKSPACE_CAP", "+5", "byte count"},
    {"NNPRIM_WORKSPACE_CAP", " 5", "byte count"},
    {"NNPRIM_WORKSPACE_CAP", "5 ", "byte count"},
    {"NNPRIM_WORKSPACE_CAP", "5 M", "byte count"},
    {"NNPRIM_WORKSPACE_CAP", "17179869184G", "byte count"},
    {"NNPRIM_DEVICE", " 1", "an integer in [0,"},
    {"NNPRIM_DEVICE", "+1", "an integer in [0,"},
    {"NNPRIM_DEVICE", "-0x1", "an integer in [0,"},
    {"NNPRIM_VERBOSE", "1 ", "an integer in [0, 2]"},
    {"NNPRIM_AUTOTUNE_CANDIDATES", "99999999999999999999999", "an integer in [1,"},
    {"NNPRIM_AUTOTUNE_CANDIDATES", "-", "an integer in [1,"},
};

Test(settings, malformed_environment_is_named_and_defaulted)
{
    for (size_t i = 0; i < sizeof bad_envs / sizeof bad_envs[0]; i++) {
        const struct bad_env *b = &bad_envs[i];
        setenv(b->var, b->value, 1);
        nn_settings s;
        cr_expect_eq(nn_settings_from_env(&s), NN_E_ENV, "%s=%s", b->var, b->value);
        const char *m = nn_last_error()->message;
        cr_expect(strstr(m, "nn_settings_from_env: ") && strstr(m, b->var) &&
                      strstr(m, b->expect_in_message) && strstr(m, b->value),
                  "message for %s=%s: %s", b->var, b->value, m);
        /* The field kept its default. */
        nn_settings d;
        unsetenv(b->var);
        nn_settings_from_env(&d);
        cr_expect_eq(memcmp(&s, &d, sizeof s), 0, "%s=%s changed the settings", b->var, b->value);
    }
}

Test(settings, one_bad_variable_does_not_hide_the_others)
{
    setenv("NNPRIM_MATH", "nope", 1);
    setenv("NNPRIM_VERBOSE", "1", 1);
    nn_settings s;
    cr_expect_eq(nn_settings_from_env(&s), NN_E_ENV);
    cr_expect_eq(s.verbose, 1);
}

/* Two bad variables: the status and the message are the first one's (the order of context.h). */
Test(settings, the_first_bad_variable_is_the_one_reported)
{
    setenv("NNPRIM_MATH", "nope", 1);
    setenv("NNPRIM_VERBOSE", "9", 1);
    nn_settings s;
    cr_expect_eq(nn_settings_from_env(&s), NN_E_ENV);
    const char *m = nn_last_error()->message;
    cr_expect(strstr(m, "NNPRIM_MATH") && !strstr(m, "NNPRIM_VERBOSE"), "%s", m);
}

Test(context, create_rejects_settings_out_of_range)
{
    nn_settings s;
    nn_settings_from_env(&s);
    nn_ctx *ctx = (nn_ctx *)0x1;
    s.verbose = 7;
    cr_expect_eq(nn_ctx_create(&ctx, &s), NN_E_INVALID_ARG);
    cr_expect_null(ctx);
    cr_expect(strstr(nn_last_error()->message, "settings.verbose must be 0, 1 or 2, got 7"), "%s",
              nn_last_error()->message);
    nn_settings_from_env(&s);
    s.backend = (nn_backend)9;
    cr_expect_eq(nn_ctx_create(&ctx, &s), NN_E_INVALID_ARG);
    nn_settings_from_env(&s);
    s.plan_cache_capacity = 0;
    cr_expect_eq(nn_ctx_create(&ctx, &s), NN_E_INVALID_ARG);
    nn_settings_from_env(&s);
    s.linear_graphs = (nn_graphs_mode)3;
    cr_expect_eq(nn_ctx_create(&ctx, &s), NN_E_INVALID_ARG);
    cr_expect_str_eq(nn_last_error()->message,
                     "nn_ctx_create: settings.linear_graphs must be NN_GRAPHS_AUTO, _OFF or _ON, "
                     "got 3");
    nn_settings_from_env(&s);
    s.xent_targets = (nn_targets_mode)2;
    cr_expect_eq(nn_ctx_create(&ctx, &s), NN_E_INVALID_ARG);
    cr_expect_str_eq(nn_last_error()->message,
                     "nn_ctx_create: settings.xent_targets must be NN_TARGETS_CHECKED or "
                     "NN_TARGETS_ON_DEVICE, got 2");
    cr_expect_eq(nn_ctx_create(NULL, &s), NN_E_INVALID_ARG);
}

Test(context, reference_context_reports_its_settings)
{
    nn_settings s;
    nn_settings_from_env(&s);
    s.backend = NN_BACKEND_REF;
    s.verbose = 1;
    char path[] = "/tmp/some-plans.nnp";
    s.plan_cache_file = path;
    nn_ctx *ctx;
    cr_assert_eq(nn_ctx_create(&ctx, &s), NN_OK);
    path[0] = 'X'; /* the context keeps its own copy */
    nn_settings r;
    cr_assert_eq(nn_ctx_get_settings(ctx, &r), NN_OK);
    cr_expect_eq(r.backend, NN_BACKEND_REF);
    cr_expect_eq(r.verbose, 1);
    cr_expect_str_eq(r.plan_cache_file, "/tmp/some-plans.nnp");
    cr_expect_eq(nn_ctx_backend(ctx), NN_BACKEND_REF);
    cr_expect_null(nn_ctx_stream(ctx));
    cr_expect_eq(nn_ctx_synchronize(ctx), NN_OK);
    nn_ctx_destroy(ctx);
    nn_ctx_destroy(NULL);
}

Test(context, auto_falls_back_to_reference_without_gpu)
{
    const char *why;
    int gpu = nn_test_have_gpu(&why);
    nn_ctx *ctx;
    cr_assert_eq(nn_ctx_create(&ctx, NULL), NN_OK);
    cr_expect_eq(nn_ctx_backend(ctx), gpu ? NN_BACKEND_CUDNN : NN_BACKEND_REF);
    nn_ctx_destroy(ctx);
}

Test(context, cudnn_backend_without_gpu_fails_clearly)
{
    const char *why;
    if (nn_test_have_gpu(&why)) cr_skip_test("a GPU is present: the failure path needs none");
    nn_settings s;
    nn_settings_from_env(&s);
    s.backend = NN_BACKEND_CUDNN;
    nn_ctx *ctx;
    nn_status st = nn_ctx_create(&ctx, &s);
    cr_expect(st == NN_E_NO_DEVICE || st == NN_E_NOT_BUILT, "got %s", nn_status_name(st));
    cr_expect_null(ctx);
    cr_expect(strstr(nn_last_error()->message, "backend cudnn"), "%s", nn_last_error()->message);
}

Test(context, failures_are_recorded_on_the_context_too)
{
    nn_settings s;
    nn_settings_from_env(&s);
    s.backend = NN_BACKEND_REF;
    nn_ctx *ctx;
    cr_assert_eq(nn_ctx_create(&ctx, &s), NN_OK);
    nn_error_info e;
    cr_assert_eq(nn_ctx_last_error(ctx, &e), NN_OK);
    cr_expect_eq(e.status, NN_OK);
    int64_t dims[2] = {4, 0};
    nn_tensor t;
    cr_expect_eq(nn_tensor_empty(ctx, NN_DTYPE_F32, 2, dims, &t), NN_E_INVALID_ARG);
    cr_assert_eq(nn_ctx_last_error(ctx, &e), NN_OK);
    cr_expect_eq(e.status, NN_E_INVALID_ARG);
    cr_expect(strstr(e.message, "dims[1] must be >= 1, got 0"), "%s", e.message);
    cr_expect_eq(nn_ctx_last_error(NULL, &e), NN_E_INVALID_ARG);
    nn_ctx_destroy(ctx);
}

Test(version, version_and_features)
{
    cr_expect_str_eq(nn_version(), "0.1.0");
    cr_expect_eq(nn_version_number(), 100);
    unsigned f = nn_build_features();
    cr_expect((f & ~(unsigned)(NN_FEATURE_CUDA | NN_FEATURE_CUDNN | NN_FEATURE_JEMALLOC |
                               NN_FEATURE_DLPACK)) == 0);
    if (f & NN_FEATURE_CUDNN) cr_expect(f & NN_FEATURE_CUDA);
    size_t v = nn_cudnn_runtime_version();
    if (f & NN_FEATURE_CUDNN)
        cr_expect_geq(v, 90000, "cuDNN %zu", v);
    else
        cr_expect_eq(v, 0);
}

Test(device, query_without_gpu_is_not_an_error)
{
    int n = -1;
    cr_assert_eq(nn_device_count(&n), NN_OK);
    cr_expect_geq(n, 0);
    cr_expect_eq(nn_device_count(NULL), NN_E_INVALID_ARG);
    nn_device_info info;
    cr_expect_eq(nn_device_get_info(0, NULL), NN_E_INVALID_ARG);
    if (n == 0) {
        nn_status st = nn_device_get_info(0, &info);
        cr_expect(st == NN_E_NO_DEVICE || st == NN_E_NOT_BUILT, "got %s", nn_status_name(st));
    } else {
        cr_expect_eq(nn_device_get_info(n, &info), NN_E_INVALID_ARG);
    }
}

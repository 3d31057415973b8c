/* Defaults without the environment and fork(). Each test runs in its own
 * process (Criterion forks), so the variables set here do not reach the other tests. */
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "gpu.h"
#include "nnprim/nnprim.h"

/* Malformed values for every variable nnprim reads. */
static void spoil_environment(void)
{
    static const char *const vars[][2] = {
        {"NNPRIM_BACKEND", "bogus"},
        {"NNPRIM_DEVICE", "-5"},
        {"NNPRIM_MATH", "fast"},
        {"NNPRIM_DETERMINISTIC", "yes"},
        {"NNPRIM_WORKSPACE_CAP", "12Q"},
        {"NNPRIM_TUNING", "guess"},
        {"NNPRIM_AUTOTUNE_CANDIDATES", "0"},
        {"NNPRIM_PLAN_CACHE", "/nonexistent/dir/plans"},
        {"NNPRIM_PLAN_CACHE_CAPACITY", "x"},
        {"NNPRIM_BACKGROUND_BUILDS", "2"},
        {"NNPRIM_PREBUILD_PLANS", "2"},
        {"NNPRIM_VERBOSE", "9"},
        {"NNPRIM_MEM_BYPASS", "2"},
        {"NNPRIM_MEM_LIMIT", " 5"},
        {"NNPRIM_MEM_UPSTREAM", "mmap"},
        {"NNPRIM_MEM_GROWTH_SLACK", "0.5"},
    };
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++)
        cr_assert_eq(setenv(vars[i][0], vars[i][1], 1), 0);
}

Test(noenv, settings_defaults_ignore_the_environment)
{
    spoil_environment();
    nn_settings env, s;
    cr_expect_eq(nn_settings_from_env(&env), NN_E_ENV, "the environment is malformed");
    cr_assert_eq(nn_settings_defaults(&s), NN_OK, "%s", nn_last_error()->message);
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
    for (size_t i = 0; i < sizeof s.reserved / sizeof s.reserved[0]; i++)
        cr_expect_eq(s.reserved[i], 0);
    cr_expect_eq(nn_settings_defaults(NULL), NN_E_INVALID_ARG);
    cr_expect(strstr(nn_last_error()->message, "nn_settings_defaults: s must not be NULL"));

    /* A context made from them works while the environment stays malformed. */
    s.backend = NN_BACKEND_REF;
    nn_ctx *ctx;
    cr_assert_eq(nn_ctx_create(&ctx, &s), NN_OK, "%s", nn_last_error()->message);
    nn_settings got;
    cr_assert_eq(nn_ctx_get_settings(ctx, &got), NN_OK);
    cr_expect_eq(got.verbose, 0);
    cr_expect_null(got.plan_cache_file);
    int64_t dims[] = {4};
    nn_tensor t;
    cr_assert_eq(nn_tensor_empty(ctx, NN_DTYPE_F32, 1, dims, &t), NN_OK);
    cr_expect_eq(nn_tensor_fill_constant(ctx, &t, 1.0), NN_OK);
    cr_expect_eq(nn_tensor_free(ctx, &t), NN_OK);
    nn_ctx_destroy(ctx);
}

Test(noenv, mem_settings_defaults_ignore_the_environment)
{
    spoil_environment();
    nn_mem_settings env, s;
    cr_expect_eq(nn_mem_settings_from_env(&env), NN_E_ENV);
    cr_assert_eq(nn_mem_settings_defaults(&s), NN_OK);
    cr_expect_eq(s.upstream, NN_MEM_UPSTREAM_MALLOC);
    cr_expect_eq(s.limit, 0);
    cr_expect_eq(s.bypass, 0);
    cr_expect_eq(s.log_events, 0);
    cr_expect_eq(s.growth_slack, 0.0);
    for (int i = 0; i < 8; i++)
        cr_expect_eq(s.reserved[i], 0);
    cr_expect_eq(nn_mem_settings_defaults(NULL), NN_E_INVALID_ARG);
    cr_expect(strstr(nn_last_error()->message, "nn_mem_settings_defaults: s must not be NULL"));
    /* A pool made implicitly would read the malformed variables; configured first, it does not. */
    nn_mem_stats st;
    cr_expect_eq(nn_mem_get_stats(NN_MEM_HOST, &st), NN_E_ENV);
    s.limit = 1 << 20;
    cr_assert_eq(nn_mem_configure(NN_MEM_HOST, &s), NN_OK, "%s", nn_last_error()->message);
    cr_assert_eq(nn_mem_get_stats(NN_MEM_HOST, &st), NN_OK);
    cr_expect_eq(st.limit, 1 << 20);
    nn_mem_stream *h;
    cr_assert_eq(nn_mem_stream_open(NN_MEM_HOST, NULL, &h), NN_OK);
    void *p;
    cr_expect_eq(nn_mem_stream_alloc(h, 1000, &p), NN_OK);
    cr_expect_eq(nn_mem_stream_free(h, p), NN_OK);
    nn_mem_stream_close(h);
}

/* Runs body in a child with a deadline; returns its exit status, or -signal if it died (a hang
 * ends by SIGALRM). */
static int in_child(int (*body)(void *), void *arg)
{
    pid_t pid = fork();
    cr_assert_neq(pid, -1);
    if (pid == 0) {
        alarm(20);
        _exit(body(arg));
    }
    int status;
    cr_assert_eq(waitpid(pid, &status, 0), pid);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
}

/* The child's own reference context works, and it may use and destroy a reference context it
 * inherited (reference contexts have no thread and no CUDA state). */
static int child_work(void *arg)
{
    nn_ctx *inherited = arg;
    nn_settings s;
    if (nn_settings_defaults(&s) != NN_OK) return 10;
    s.backend = NN_BACKEND_REF;
    nn_ctx *ctx;
    if (nn_ctx_create(&ctx, &s) != NN_OK) return 11;
    int64_t dims[] = {3, 4};
    nn_tensor a, b;
    if (nn_tensor_empty(ctx, NN_DTYPE_F32, 2, dims, &a) != NN_OK) return 12;
    if (nn_tensor_empty(inherited, NN_DTYPE_F32, 2, dims, &b) != NN_OK) return 13;
    if (nn_tensor_fill_ints(ctx, &a, -4, 4, 3) != NN_OK) return 14;
    if (nn_tensor_copy(inherited, &b, &a) != NN_OK) return 15;
    if (memcmp(a.data, b.data, 12 * sizeof(float))) return 16;
    if (nn_tensor_free(ctx, &a) != NN_OK || nn_tensor_free(inherited, &b) != NN_OK) return 17;
    nn_ctx_destroy(ctx);
    nn_ctx_destroy(inherited);
    return 0;
}

Test(fork, reference_contexts_work_in_a_child)
{
    nn_settings s;
    cr_assert_eq(nn_settings_defaults(&s), NN_OK);
    s.backend = NN_BACKEND_REF;
    nn_ctx *ctx;
    cr_assert_eq(nn_ctx_create(&ctx, &s), NN_OK);
    /* Host memory the parent holds stays the parent's to free. */
    int64_t dims[] = {16};
    nn_tensor t;
    cr_assert_eq(nn_tensor_empty(ctx, NN_DTYPE_F32, 1, dims, &t), NN_OK);
    cr_expect_eq(in_child(child_work, ctx), 0, "the child failed (exit code) or hung (-signal)");
    cr_expect_eq(nn_tensor_free(ctx, &t), NN_OK);
    nn_ctx_destroy(ctx);
}

/* The safe pattern with a cuDNN context in the parent (context.h): the child leaves it alone,
 * neither using nor destroying it, works with a reference context of its own and leaves with
 * _exit; the parent's context keeps working. */
static int child_leaves_gpu_context_alone(void *arg)
{
    (void)arg;
    nn_settings s;
    nn_settings_defaults(&s);
    s.backend = NN_BACKEND_REF;
    nn_ctx *ctx;
    if (nn_ctx_create(&ctx, &s) != NN_OK) return 20;
    int64_t dims[] = {8};
    nn_tensor a;
    if (nn_tensor_empty(ctx, NN_DTYPE_F32, 1, dims, &a) != NN_OK) return 21;
    if (nn_tensor_fill_constant(ctx, &a, 3.0) != NN_OK) return 22;
    if (nn_tensor_free(ctx, &a) != NN_OK) return 23;
    nn_ctx_destroy(ctx);
    return 0;
}

Test(fork_gpu, child_leaves_a_cudnn_context_alone)
{
    NN_REQUIRE_GPU();
    nn_settings s;
    cr_assert_eq(nn_settings_defaults(&s), NN_OK);
    s.backend = NN_BACKEND_CUDNN;
    nn_ctx *ctx;
    cr_assert_eq(nn_ctx_create(&ctx, &s), NN_OK, "%s", nn_last_error()->message);
    int64_t dims[] = {64};
    nn_tensor t;
    cr_assert_eq(nn_tensor_empty(ctx, NN_DTYPE_F32, 1, dims, &t), NN_OK);
    cr_expect_eq(in_child(child_leaves_gpu_context_alone, NULL), 0);
    cr_expect_eq(nn_tensor_fill_constant(ctx, &t, 2.0), NN_OK);
    cr_expect_eq(nn_tensor_free(ctx, &t), NN_OK);
    cr_expect_eq(nn_ctx_synchronize(ctx), NN_OK);
    nn_ctx_destroy(ctx);
}

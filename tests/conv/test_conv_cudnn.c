/* The cuDNN convolution path and its plan cache, on a GPU (skipped elsewhere):
 * - a second call of the same convolution hits the cache: no heuristics query, no plan built;
 * - a plan file written by one process is loaded by a second one, which then runs the same
 *   convolutions with zero heuristics queries and zero autotune runs, bit-identically;
 * - the verbose line names the engine and the cache outcome.
 * The cuDNN-against-reference comparison of the standard cases is in test_conv_harness.c. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/ctx.h"
#include "cudnn/cache.h"
#include "gpu.h"
#include "nn_config.h"
#include "tests/harness/conv_case.h"
#if NN_HAVE_CUDNN
#include "conv/conv_graph_cudnn.h"
#endif

static nn_ctx *gpu_ctx(nn_tuning_mode tuning, const char *plan_file)
{
    nn_settings s;
    nn_settings_from_env(&s);
    s.backend = NN_BACKEND_CUDNN;
    s.tuning = tuning;
    s.autotune_candidates = 4;
    s.deterministic = 1;
    s.plan_cache_file = plan_file;
    nn_ctx *ctx = NULL;
    if (nn_ctx_create(&ctx, &s) != NN_OK) {
        fprintf(stderr, "nn_ctx_create: %s\n", nn_last_error()->message);
        return NULL;
    }
    return ctx;
}

static nn_ctx *ref_ctx(void)
{
    nn_settings s;
    nn_settings_from_env(&s);
    s.backend = NN_BACKEND_REF;
    nn_ctx *ctx = NULL;
    return nn_ctx_create(&ctx, &s) == NN_OK ? ctx : NULL;
}

/* One convolution's tensors on the device, inputs filled from fixed seeds. */
struct conv_io {
    struct nn_conv_case c;
    nn_tensor x, w, b, y, dy, dx, dw, db;
};

#define IO_TENSORS(io)                                                                             \
    {                                                                                              \
        &io->x, &io->w, &io->b, &io->y, &io->dy, &io->dx, &io->dw, &io->db                         \
    }

static void io_free(nn_ctx *ctx, struct conv_io *io)
{
    nn_tensor *all[] = IO_TENSORS(io);
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        if (all[i]->data) nn_tensor_free(ctx, all[i]);
}

static int io_alloc(nn_ctx *ctx, const char *text, struct conv_io *io)
{
    memset(io, 0, sizeof *io);
    char err[256];
    if (nn_conv_case_parse_line(text, &io->c, err, sizeof err) != 1) {
        fprintf(stderr, "%s: %s\n", text, err);
        return -1;
    }
    int rank = io->c.p.spatial_rank + 2;
    int64_t yd[NN_CONV_MAX_SPATIAL + 2], kd[1] = {io->c.w_dims[0]};
    if (nn_conv_output_shape(&io->c.p, rank, io->c.x_dims, io->c.w_dims, yd) != NN_OK) return -1;
    struct {
        nn_tensor *t;
        int rank;
        const int64_t *dims;
        int fill;
    } all[] = {{&io->x, rank, io->c.x_dims, 1},
               {&io->w, rank, io->c.w_dims, 1},
               {&io->b, 1, kd, 1},
               {&io->y, rank, yd, 0},
               {&io->dy, rank, yd, 1},
               {&io->dx, rank, io->c.x_dims, 0},
               {&io->dw, rank, io->c.w_dims, 0},
               {&io->db, 1, kd, 0}};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
        nn_status st = nn_tensor_empty(ctx, io->c.dtype, all[i].rank, all[i].dims, all[i].t);
        if (st == NN_OK && all[i].fill) st = nn_tensor_fill_uniform(ctx, all[i].t, -1, 1, 1000 + i);
        if (st != NN_OK) {
            fprintf(stderr, "%s: %s\n", text, nn_last_error()->message);
            return -1;
        }
    }
    return 0;
}

/* Forward in training mode, then every gradient through the pullback. */
static int io_run(nn_ctx *ctx, struct conv_io *io)
{
    nn_conv_pullback *pb = NULL;
    nn_status st =
        nn_conv_forward(ctx, &io->c.p, &io->x, &io->w, io->c.bias ? &io->b : NULL, &io->y, &pb);
    if (st == NN_OK)
        st = nn_conv_backward(ctx, &pb, &io->dy, &io->dx, &io->dw, io->c.bias ? &io->db : NULL);
    if (st != NN_OK) {
        fprintf(stderr, "conv: %s\n", nn_last_error()->message);
        nn_conv_pullback_free(&pb);
        return -1;
    }
    return 0;
}

/* The outputs' bytes, appended to f. */
static int io_dump(nn_ctx *ctx, nn_ctx *host, struct conv_io *io, FILE *f)
{
    nn_tensor *outs[] = {&io->y, &io->dx, &io->dw, &io->db};
    for (size_t i = 0; i < 4; i++) {
        if (i == 3 && !io->c.bias) continue;
        nn_tensor h;
        if (nn_h_to_host(ctx, host, outs[i], &h) != NN_OK) return -1;
        size_t bytes = (size_t)nn_tensor_numel(&h) * nn_dtype_size(h.dtype);
        size_t put = fwrite(h.data, 1, bytes, f);
        nn_tensor_free(host, &h);
        if (put != bytes) return -1;
    }
    return 0;
}

/* Shapes of the plan-file test: plain 2-D, 1-D with bias and relu, grouped strided with
 * asymmetric padding, true convolution, f16 with f32 compute. */
static const char *const file_shapes[] = {
    "n2c8h12w12k16r3s3 pad1",
    "n2c4w20k6s5 stride2 bias relu",
    "n1c8h9w11k8r3s2 g4 stride2x1 padlo1x0 padhi2x1",
    "n1c3h7w7k5r3s3 dil2x2 conv bias",
    "n2c8h10w10k8r3s3 pad1 f16",
};
#define N_FILE_SHAPES (sizeof file_shapes / sizeof file_shapes[0])

/* Run every shape of file_shapes on a fresh context with plan_file, and write the outputs to
 * dump. Returns 0, or 1 with a line on stderr; *stats gets the context's counters. */
static int run_workload(nn_tuning_mode tuning, const char *plan_file, const char *dump,
                        nn_plan_cache_stats *stats)
{
    nn_ctx *ctx = gpu_ctx(tuning, plan_file), *host = ref_ctx();
    FILE *f = fopen(dump, "wb");
    int bad = !ctx || !host || !f;
    for (size_t i = 0; i < N_FILE_SHAPES && !bad; i++) {
        struct conv_io io;
        bad = io_alloc(ctx, file_shapes[i], &io) || io_run(ctx, &io) || io_dump(ctx, host, &io, f);
        io_free(ctx, &io);
    }
    if (ctx) nn_plan_cache_get_stats(ctx, stats);
    if (f && fclose(f) != 0) bad = 1;
    if (ctx) nn_ctx_destroy(ctx); /* saves plan_file */
    if (host) nn_ctx_destroy(host);
    return bad;
}

static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc(n > 0 ? (size_t)n : 1);
    *len = buf ? fread(buf, 1, (size_t)n, f) : 0;
    fclose(f);
    return buf;
}

/* The first process of the plan-file test: this test binary started again with CHILD_ENV set
 * to "PLANFILE|DUMPFILE". It runs before Criterion's main (a fork of a process that has already
 * initialised CUDA could not use the GPU), autotunes every plan and saves the file when its
 * context goes. */
#define CHILD_ENV "NNPRIM_TEST_PLAN_FILE_CHILD"

__attribute__((constructor)) static void plan_file_child(void)
{
    const char *arg = getenv(CHILD_ENV);
    if (!arg) return;
    char plans[300], dump[300];
    const char *bar = strchr(arg, '|');
    if (!bar || (size_t)(bar - arg) >= sizeof plans) _exit(3);
    snprintf(plans, sizeof plans, "%.*s", (int)(bar - arg), arg);
    snprintf(dump, sizeof dump, "%s", bar + 1);
    nn_plan_cache_stats s;
    int bad = run_workload(NN_TUNING_AUTOTUNE, plans, dump, &s);
    if (!bad && (s.autotune_runs == 0 || s.heuristic_queries == 0)) {
        fprintf(stderr, "first process: expected autotuning, got %llu runs, %llu queries\n",
                (unsigned long long)s.autotune_runs, (unsigned long long)s.heuristic_queries);
        bad = 1;
    }
    _exit(bad);
}

extern char **environ;

Test(conv_cudnn, plan_file_from_another_process_needs_no_heuristics)
{
    NN_REQUIRE_GPU();
    char dir[] = "/tmp/nnprim_plan_test_XXXXXX";
    cr_assert_not_null(mkdtemp(dir));
    char plans[300], first[300], second[300], env[700];
    snprintf(plans, sizeof plans, "%s/plans.nnp", dir);
    snprintf(first, sizeof first, "%s/first.bin", dir);
    snprintf(second, sizeof second, "%s/second.bin", dir);
    snprintf(env, sizeof env, "%s|%s", plans, first);

    cr_assert_eq(setenv(CHILD_ENV, env, 1), 0);
    char *argv[] = {"plan_file_child", NULL};
    pid_t pid;
    int rc = posix_spawn(&pid, "/proc/self/exe", NULL, NULL, argv, environ);
    unsetenv(CHILD_ENV);
    cr_assert_eq(rc, 0, "posix_spawn: %s", strerror(rc));
    int status = 0;
    cr_assert_eq(waitpid(pid, &status, 0), pid);
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0,
              "the first process failed (status 0x%x, its lines above)", status);

    /* This process loads it at context creation, still in autotune mode: every plan must come
     * from a file record. */
    nn_plan_cache_stats s;
    cr_assert_eq(run_workload(NN_TUNING_AUTOTUNE, plans, second, &s), 0, "see the lines above");
    cr_expect_gt(s.records_loaded, 0);
    cr_expect_eq(s.records_skipped, 0);
    cr_expect_eq(s.heuristic_queries, 0, "heuristics were queried %llu times",
                 (unsigned long long)s.heuristic_queries);
    cr_expect_eq(s.autotune_runs, 0, "%llu autotune runs", (unsigned long long)s.autotune_runs);
    cr_expect_eq(s.plans_built, 0, "%llu plans built by search", (unsigned long long)s.plans_built);
    cr_expect_gt(s.plans_rebuilt + s.plans_prebuilt, 0, "plans come from the file's records");
    cr_expect_eq(s.records_dropped, 0);

    size_t n1 = 0, n2 = 0;
    char *a = slurp(first, &n1), *b = slurp(second, &n2);
    cr_assert(a && b);
    cr_expect_gt(n1, 0);
    cr_expect_eq(n1, n2);
    cr_expect(n1 == n2 && memcmp(a, b, n1) == 0, "the two processes' results differ");
    free(a);
    free(b);
    unlink(plans);
    unlink(first);
    unlink(second);
    rmdir(dir);
}

Test(conv_cudnn, second_call_hits_the_cache_without_heuristics)
{
    NN_REQUIRE_GPU();
    nn_ctx *ctx = gpu_ctx(NN_TUNING_HEURISTIC, NULL);
    cr_assert_not_null(ctx);
    struct conv_io io;
    cr_assert_eq(io_alloc(ctx, "n1c4h8w8k4r3s3", &io), 0);
    nn_plan_cache_stats s0, s1, s2;
    nn_plan_cache_get_stats(ctx, &s0);
    cr_assert_eq(io_run(ctx, &io), 0);
    nn_plan_cache_get_stats(ctx, &s1);
    cr_expect_gt(s1.heuristic_queries, s0.heuristic_queries);
    cr_expect_gt(s1.plans_built, s0.plans_built);
    cr_expect_geq(s1.misses - s0.misses, 3, "forward, data and filter gradient: 3 misses");
    cr_expect_eq(s1.entries, 3);
    cr_assert_eq(io_run(ctx, &io), 0);
    nn_plan_cache_get_stats(ctx, &s2);
    cr_expect_eq(s2.heuristic_queries, s1.heuristic_queries);
    cr_expect_eq(s2.plans_built, s1.plans_built);
    cr_expect_eq(s2.plans_rebuilt, s1.plans_rebuilt);
    cr_expect_eq(s2.misses, s1.misses);
    cr_expect_eq(s2.hits - s1.hits, 3);
    cr_expect_eq(s2.entries, 3);
    io_free(ctx, &io);
    nn_ctx_destroy(ctx);
}

/* The tensors of ones that bf16 bias gradients sum through are kept in every cuDNN context's
 * cache (conv_cudnn.c) as device memory of this process: their kind is in the context's table and
 * never written to a plan file. Without cuDNN the table is empty and there is nothing to check. */
Test(conv_cudnn, the_kept_ones_are_a_kind_not_persisted)
{
    int n = 0;
    const struct nn__cache_kind *const *table = nn__ctx_cache_kinds(&n);
    int seen = 0;
#if NN_HAVE_CUDNN
    for (int i = 0; i < n; i++) {
        if (table[i] != &nn__conv_ones_kind) continue;
        seen++;
        cr_expect_eq(table[i]->id, NN__CONV_ONES_KIND_ID);
        cr_expect(table[i]->flags & NN__CACHE_KIND_NOT_PERSISTED, "%s", table[i]->name);
    }
#else
    (void)table;
#endif
    cr_expect_eq(seen, n ? 1 : 0);
}

/* Clearing the cache forgets the plans: the next call searches again. */
Test(conv_cudnn, cleared_cache_searches_again)
{
    NN_REQUIRE_GPU();
    nn_ctx *ctx = gpu_ctx(NN_TUNING_HEURISTIC, NULL);
    cr_assert_not_null(ctx);
    struct conv_io io;
    cr_assert_eq(io_alloc(ctx, "n2c4w16k4s3 pad1", &io), 0);
    cr_assert_eq(io_run(ctx, &io), 0);
    nn_plan_cache_stats s1, s2;
    nn_plan_cache_get_stats(ctx, &s1);
    cr_assert_eq(nn_plan_cache_clear(ctx), NN_OK);
    cr_assert_eq(io_run(ctx, &io), 0);
    nn_plan_cache_get_stats(ctx, &s2);
    cr_expect_gt(s2.heuristic_queries, s1.heuristic_queries);
    cr_expect_eq(s2.hits, s1.hits);
    io_free(ctx, &io);
    nn_ctx_destroy(ctx);
}

/* f64 either runs on a cuDNN engine (test_conv_harness compares it with the reference) or is
 * refused with NN_E_UNSUPPORTED and a message that says so and what to use instead. */
Test(conv_cudnn, f64_runs_or_is_refused_clearly)
{
    NN_REQUIRE_GPU();
    nn_ctx *ctx = gpu_ctx(NN_TUNING_HEURISTIC, NULL);
    cr_assert_not_null(ctx);
    struct conv_io io;
    cr_assert_eq(io_alloc(ctx, "n1c2h6w6k2r3s3 f64", &io), 0);
    nn_status st = nn_conv_forward(ctx, &io.c.p, &io.x, &io.w, NULL, &io.y, NULL);
    if (st != NN_OK) {
        cr_expect_eq(st, NN_E_UNSUPPORTED, "%s", nn_last_error()->message);
        cr_expect(strstr(nn_last_error()->message, "f64"), "%s", nn_last_error()->message);
        cr_log_info("f64 refused: %s", nn_last_error()->message);
    }
    io_free(ctx, &io);
    nn_ctx_destroy(ctx);
}

/* Autotune runs its candidates on scratch copies of the output: the results, accumulating ones
 * included, must still match the reference. The standard cases in strict f32 through an
 * autotuning context (every dtype takes the same autotune path; test_conv_harness covers the
 * dtypes with heuristic plans). */
Test(conv_cudnn, autotuned_plans_match_the_reference)
{
    NN_REQUIRE_GPU();
    nn_ctx *dev = gpu_ctx(NN_TUNING_AUTOTUNE, NULL), *ref = ref_ctx();
    cr_assert(dev && ref);
    int fails = 0, cases = 0;
    for (size_t i = 0; i < nn_conv_standard_case_count(); i++) {
        struct nn_conv_case c;
        cr_assert_eq(nn_conv_standard_case(i, &c), 0);
        if (c.math != NN_MATH_STRICT_FP32 || c.dtype != NN_DTYPE_F32) continue;
        fails += nn_conv_check_backend(dev, ref, &c, stderr);
        cases++;
    }
    nn_plan_cache_stats s;
    nn_plan_cache_get_stats(dev, &s);
    cr_expect_gt(cases, 0);
    cr_expect_gt(s.autotune_runs, 0);
    cr_expect_eq(fails, 0, "%d failures (lines above, each with its reproducer)", fails);
    nn_ctx_destroy(ref);
    nn_ctx_destroy(dev);
}

/* y of a forward (inference) call, copied to the host as floats; NULL on failure. */
static float *forward_to_host(nn_ctx *ctx, nn_ctx *host, struct conv_io *io, size_t *n)
{
    if (nn_conv_forward(ctx, &io->c.p, &io->x, &io->w, NULL, &io->y, NULL) != NN_OK) {
        fprintf(stderr, "conv: %s\n", nn_last_error()->message);
        return NULL;
    }
    nn_tensor h;
    if (nn_h_to_host(ctx, host, &io->y, &h) != NN_OK) return NULL;
    *n = (size_t)nn_tensor_numel(&h);
    float *out = malloc(*n * sizeof *out);
    if (out) memcpy(out, h.data, *n * sizeof *out);
    nn_tensor_free(host, &h);
    return out;
}

static nn_ctx *tuning_ctx(const char *plan_file, int prebuild)
{
    nn_settings s;
    nn_settings_from_env(&s);
    s.backend = NN_BACKEND_CUDNN;
    s.tuning = NN_TUNING_AUTOTUNE;
    s.deterministic = 0;
    s.background_builds = 1;
    s.prebuild_plans = prebuild;
    s.plan_cache_file = plan_file;
    nn_ctx *ctx = NULL;
    return nn_ctx_create(&ctx, &s) == NN_OK ? ctx : NULL;
}

/* A tuning context autotunes the forward of shape and saves its plan file to plans at
 * destroy: returns the forward's result on the host (n floats, the caller's to free). */
static float *tune_forward(const char *plans, nn_ctx *host, const char *shape, size_t *n)
{
    nn_ctx *a = tuning_ctx(plans, 0);
    cr_assert_not_null(a);
    struct conv_io io;
    cr_assert_eq(io_alloc(a, shape, &io), 0);
    float *tuned = forward_to_host(a, host, &io, n);
    cr_assert_not_null(tuned);
    io_free(a, &io);
    nn_ctx_destroy(a);
    return tuned;
}

/* A loaded record whose tuned plan cuDNN compiles at finalization starts on its quick alternate
 * (prebuilding is off here: with it, the tuned plan could be ready before the first call)
 * (close to the tuned result, from another engine) and the tuned plan, built in the background,
 * takes over: after nn_plan_cache_wait() the result is bit-identical to the tuning context's.
 * The shape is the one whose tuned forward took 46-76 ms to build on the H200 (cuDNN 9.14);
 * where autotune picks a precompiled plan, there is no alternate and the test says so and
 * skips. */
Test(conv_cudnn, slow_tuned_plan_starts_on_its_quick_alternate)
{
    NN_REQUIRE_GPU();
    const char *shape = "n32c64h56w56k64r3s3 pad1";
    char dir[] = "/tmp/nnprim_quick_test_XXXXXX";
    cr_assert_not_null(mkdtemp(dir));
    char plans[300];
    snprintf(plans, sizeof plans, "%s/plans.nnp", dir);
    nn_ctx *host = ref_ctx();
    cr_assert_not_null(host);

    size_t n = 0, n2 = 0;
    float *tuned = tune_forward(plans, host, shape, &n);
    struct conv_io io;
    /* A copy as the tuning process left it (b's context saves the rebuild time it measures). */
    char fresh[320];
    snprintf(fresh, sizeof fresh, "%s/fresh.nnp", dir);
    size_t flen = 0;
    char *bytes = slurp(plans, &flen);
    cr_assert_not_null(bytes);
    FILE *ff = fopen(fresh, "wb");
    cr_assert_not_null(ff);
    cr_assert_eq(fwrite(bytes, 1, flen, ff), flen);
    cr_assert_eq(fclose(ff), 0);
    free(bytes);

    nn_ctx *b = tuning_ctx(plans, 0);
    cr_assert_not_null(b);
    cr_assert_eq(io_alloc(b, shape, &io), 0);
    float *quick = forward_to_host(b, host, &io, &n2);
    cr_assert_not_null(quick);
    cr_assert_eq(n, n2);
    nn_plan_cache_stats s;
    nn_plan_cache_get_stats(b, &s);
    cr_expect_eq(s.heuristic_queries, 0);
    cr_expect_eq(s.autotune_runs, 0);
    int skip = s.quick_plans == 0;
    if (!skip) {
        cr_expect_eq(s.quick_plans, 1);
        /* Another engine: equal within strict fp32 rounding (576 products per element). */
        size_t off = 0;
        for (size_t i = 0; i < n; i++)
            if (fabsf(quick[i] - tuned[i]) > 1e-5f * (fabsf(tuned[i]) + 24.0f)) off++;
        cr_expect_eq(off, 0, "%zu of %zu elements of the quick result are off", off, n);
        cr_assert_eq(nn_plan_cache_wait(b), NN_OK);
        nn_plan_cache_get_stats(b, &s);
        cr_expect_eq(s.background_builds, 1);
        cr_expect_eq(s.background_failures, 0);
        free(quick);
        quick = forward_to_host(b, host, &io, &n2);
        cr_assert_not_null(quick);
        nn_plan_cache_get_stats(b, &s);
        cr_expect_eq(s.plans_built, 0, "the swap builds nothing in the foreground");
        cr_expect(memcmp(quick, tuned, n * sizeof *tuned) == 0,
                  "after the swap the result must be the tuned plan's, bit for bit");
    }
    io_free(b, &io);
    nn_ctx_destroy(b);

    /* A context destroyed while its background build is still queued or running stops the
     * worker cleanly (the sanitizer build would report a leak or a race). */
    if (!skip) {
        nn_ctx *d = tuning_ctx(fresh, 0);
        cr_assert_not_null(d);
        cr_assert_eq(io_alloc(d, shape, &io), 0);
        cr_assert_eq(nn_conv_forward(d, &io.c.p, &io.x, &io.w, NULL, &io.y, NULL), NN_OK);
        nn_plan_cache_stats sd;
        nn_plan_cache_get_stats(d, &sd);
        cr_expect_eq(sd.quick_plans, 1);
        io_free(d, &io);
        nn_ctx_destroy(d);
    }
    unlink(fresh);
    nn_ctx_destroy(host);
    free(tuned);
    free(quick);
    unlink(plans);
    rmdir(dir);
    if (skip) cr_skip_test("autotune picked a precompiled plan here: no quick alternate needed");
}

/* Without prebuilding, the three passes of a loaded shape start on their quick alternates
 * one after the other, so a call's build is queued while others are queued or running (the
 * builder's queue then holds several jobs); each tuned plan replaces its alternate. Where
 * autotune recorded fewer than two alternates the test says so and skips. */
Test(conv_cudnn, quick_starts_queue_behind_each_other)
{
    NN_REQUIRE_GPU();
    const char *shape = "n8c16h20w20k32r3s3 pad1";
    char dir[] = "/tmp/nnprim_queue_test_XXXXXX";
    cr_assert_not_null(mkdtemp(dir));
    char plans[300];
    snprintf(plans, sizeof plans, "%s/plans.nnp", dir);
    struct conv_io io;
    nn_ctx *a = tuning_ctx(plans, 0);
    cr_assert_not_null(a);
    cr_assert_eq(io_alloc(a, shape, &io), 0);
    cr_assert_eq(io_run(a, &io), 0);
    io_free(a, &io);
    nn_ctx_destroy(a); /* saves three records */

    nn_ctx *b = tuning_ctx(plans, 0);
    cr_assert_not_null(b);
    cr_assert_eq(io_alloc(b, shape, &io), 0);
    cr_assert_eq(io_run(b, &io), 0);
    cr_assert_eq(nn_plan_cache_wait(b), NN_OK);
    nn_plan_cache_stats s;
    nn_plan_cache_get_stats(b, &s);
    int skip = s.quick_plans < 2;
    if (!skip) {
        cr_expect_eq(s.background_builds, s.quick_plans, "every alternate replaced");
        cr_expect_eq(s.background_failures, 0);
        cr_expect_eq(s.plans_prebuilt, 0);
        cr_assert_eq(io_run(b, &io), 0);
    }
    io_free(b, &io);
    nn_ctx_destroy(b);
    unlink(plans);
    rmdir(dir);
    if (skip) cr_skip_test("autotune recorded fewer than two quick alternates here");
}

/* With prebuild_plans on, a context that loads a plan file builds the file's plans in the
 * background at once: after nn_plan_cache_wait() the first call is a cache hit (no rebuild, no
 * quick alternate) and gives the tuning context's result bit for bit. Without it nothing is
 * built until a call needs it. A context destroyed while prebuilds are queued stops cleanly. */
Test(conv_cudnn, loaded_plans_are_prebuilt_in_the_background)
{
    NN_REQUIRE_GPU();
    const char *shape = "n8c16h20w20k32r3s3 pad1";
    char dir[] = "/tmp/nnprim_prebuild_test_XXXXXX";
    cr_assert_not_null(mkdtemp(dir));
    char plans[300];
    snprintf(plans, sizeof plans, "%s/plans.nnp", dir);
    nn_ctx *host = ref_ctx();
    cr_assert_not_null(host);

    size_t n = 0, n2 = 0;
    float *tuned = tune_forward(plans, host, shape, &n); /* the file holds one record */
    struct conv_io io;

    nn_ctx *b = tuning_ctx(plans, 1);
    cr_assert_not_null(b);
    cr_assert_eq(nn_plan_cache_wait(b), NN_OK);
    nn_plan_cache_stats s;
    nn_plan_cache_get_stats(b, &s);
    cr_expect_eq(s.records_loaded, 1);
    cr_expect_eq(s.plans_prebuilt, 1);
    cr_expect_eq(s.entries, 1, "the prebuilt plan is live");
    cr_expect_eq(s.known_records, 0);
    cr_assert_eq(io_alloc(b, shape, &io), 0);
    float *first = forward_to_host(b, host, &io, &n2);
    cr_assert_not_null(first);
    cr_assert_eq(n, n2);
    nn_plan_cache_get_stats(b, &s);
    cr_expect_eq(s.hits, 1, "the first call finds its plan");
    cr_expect_eq(s.misses, 0);
    cr_expect_eq(s.plans_rebuilt, 0);
    cr_expect_eq(s.quick_plans, 0);
    cr_expect_eq(s.heuristic_queries, 0);
    cr_expect_eq(s.autotune_runs, 0);
    cr_expect(memcmp(first, tuned, n * sizeof *tuned) == 0,
              "a prebuilt plan is the tuned plan: the same bits");
    io_free(b, &io);
    nn_ctx_destroy(b);

    nn_ctx *c = tuning_ctx(plans, 0);
    cr_assert_not_null(c);
    cr_assert_eq(nn_plan_cache_wait(c), NN_OK);
    nn_plan_cache_get_stats(c, &s);
    cr_expect_eq(s.plans_prebuilt, 0);
    cr_expect_eq(s.entries, 0);
    cr_expect_eq(s.known_records, 1);
    nn_ctx_destroy(c);

    nn_ctx *d = tuning_ctx(plans, 1);
    cr_assert_not_null(d);
    nn_ctx_destroy(d);

    nn_ctx_destroy(host);
    free(tuned);
    free(first);
    unlink(plans);
    rmdir(dir);
}

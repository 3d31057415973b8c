/* The shared correctness harness on the softmax family's standard cases: the reference against
 * finite differences and with guarded outputs (runs everywhere), cuDNN against the reference
 * (GPU only). Also the case syntax and the verbose line. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "gpu.h"
#include "nn_config.h"
#include "tests/harness/softmax_case.h"

static nn_ctx *make_ctx(nn_backend backend, int verbose)
{
    nn_settings s;
    nn_settings_from_env(&s);
    s.backend = backend;
    s.verbose = verbose;
    nn_ctx *ctx = NULL;
    cr_assert_eq(nn_ctx_create(&ctx, &s), NN_OK, "%s", nn_last_error()->message);
    return ctx;
}

static void parse(const char *text, struct nn_softmax_case *c)
{
    char err[256];
    cr_assert_eq(nn_softmax_case_parse_line(text, c, err, sizeof err), 1, "%s: %s", text, err);
}

Test(softmax_harness, case_syntax_round_trips)
{
    size_t n = nn_softmax_standard_case_count();
    cr_assert_eq(n, 120, "5 geometries x 6 variants x 4 dtypes");
    for (size_t i = 0; i < n; i++) {
        struct nn_softmax_case c, back;
        char text[256];
        cr_assert_eq(nn_softmax_standard_case(i, &c), 0, "case %zu", i);
        nn_softmax_case_format(&c, text, sizeof text);
        parse(text, &back);
        cr_expect_eq(memcmp(&c, &back, sizeof c), 0, "'%s' does not parse back", text);
    }
    struct nn_softmax_case c;
    parse("n2c5s3x4 log accdx bf16 # comment", &c);
    cr_expect_eq(c.rank, 4);
    cr_expect_eq(c.dims[3], 4);
    cr_expect_eq(c.p.mode, NN_SOFTMAX_MODE_LOG);
    cr_expect_eq(c.accumulate, NN_ACCUMULATE_DX);
    cr_expect_eq(c.dtype, NN_DTYPE_BF16);
    parse("n64c10000 xent i32", &c);
    cr_expect(c.xent);
    cr_expect_eq(c.index, NN_INDEX_I32);
}

Test(softmax_harness, case_parse_errors_name_the_token)
{
    struct nn_softmax_case c;
    char err[256];
    cr_expect_eq(nn_softmax_case_parse_line("# nothing", &c, err, sizeof err), 0);
    cr_expect_eq(nn_softmax_case_parse_line("n4", &c, err, sizeof err), -1);
    cr_expect(strstr(err, "'n4'"), "%s", err);
    cr_expect_eq(nn_softmax_case_parse_line("n4c3s0", &c, err, sizeof err), -1);
    cr_expect(strstr(err, "'n4c3s0'"), "%s", err);
    cr_expect_eq(nn_softmax_case_parse_line("n4c3 wobble", &c, err, sizeof err), -1);
    cr_expect(strstr(err, "unknown token 'wobble'"), "%s", err);
    cr_expect_eq(nn_softmax_case_parse_line("n4c3 xent log", &c, err, sizeof err), -1);
    cr_expect(strstr(err, "xent takes no"), "%s", err);
    /* found by fuzz/fuzz_case_line.c: a softmax case's text has no index type */
    cr_expect_eq(nn_softmax_case_parse_line("n4c3 i32", &c, err, sizeof err), -1);
    cr_expect(strstr(err, "they need xent"), "%s", err);
    cr_expect_eq(nn_softmax_case_parse_line("n4c3 xent i32", &c, err, sizeof err), 1, "%s", err);
}

/* Each call's verbose line carries it in the case syntax and parses back to the same case. */
Test(softmax_harness, verbose_lines_are_cases)
{
    nn_ctx *ctx = make_ctx(NN_BACKEND_REF, 1);
    struct {
        const char *text, *op;
    } calls[] = {{"n2c3s4 log f32", "softmax_forward"},
                 {"n2c3s4 xent i32 f32", "softmax_cross_entropy_forward"}};
    nn_tensor x, y, loss;
    cr_assert_eq(nn_tensor_empty(ctx, NN_DTYPE_F32, 3, (int64_t[]){2, 3, 4}, &x), NN_OK);
    cr_assert_eq(nn_tensor_empty(ctx, NN_DTYPE_F32, 3, (int64_t[]){2, 3, 4}, &y), NN_OK);
    cr_assert_eq(nn_tensor_empty(ctx, NN_DTYPE_F32, 2, (int64_t[]){2, 4}, &loss), NN_OK);
    cr_assert_eq(nn_tensor_fill_ints(ctx, &x, -2, 2, 3), NN_OK);
    int32_t t[8] = {0, 1, 2, 0, 1, 2, 0, 1};
    nn_class_targets tg = {t, NN_INDEX_I32, {0}};
    for (int i = 0; i < 2; i++) {
        struct nn_softmax_case c;
        parse(calls[i].text, &c);
        FILE *tmp = tmpfile();
        cr_assert_not_null(tmp);
        fflush(stderr);
        int saved = dup(2);
        dup2(fileno(tmp), 2);
        nn_status st = i ? nn_softmax_cross_entropy_forward(ctx, &x, &tg, &loss, NULL)
                         : nn_softmax_forward(ctx, &c.p, &x, &y, NULL);
        fflush(stderr);
        dup2(saved, 2);
        close(saved);
        cr_assert_eq(st, NN_OK, "%s", nn_last_error()->message);
        char line[512] = "", want[256], err[256];
        rewind(tmp);
        cr_assert_not_null(fgets(line, sizeof line, tmp));
        fclose(tmp);
        snprintf(want, sizeof want, "nnprim_verbose,%s,ref,ref,-,%s,", calls[i].op, calls[i].text);
        cr_expect(strncmp(line, want, strlen(want)) == 0, "line: %s want: %s", line, want);
        struct nn_softmax_case back;
        cr_expect_eq(nn_softmax_case_parse_line(line, &back, err, sizeof err), 1, "%s", err);
        cr_expect_eq(memcmp(&c, &back, sizeof c), 0, "the verbose line parses to another case");
    }
    nn_tensor_free(ctx, &x);
    nn_tensor_free(ctx, &y);
    nn_tensor_free(ctx, &loss);
    nn_ctx_destroy(ctx);
}

Test(softmax_harness, reference_matches_finite_differences_and_respects_guards, .timeout = 300)
{
    nn_ctx *ref = make_ctx(NN_BACKEND_REF, 0);
    int fails = 0;
    for (size_t i = 0; i < nn_softmax_standard_case_count(); i++) {
        struct nn_softmax_case c;
        cr_assert_eq(nn_softmax_standard_case(i, &c), 0);
        fails += nn_softmax_check_reference(ref, &c, stderr);
    }
    cr_expect_eq(fails, 0, "%d failures (lines above, each with its reproducer)", fails);
    nn_ctx_destroy(ref);
}

/* Known values: softmax of (0, log 3) is (1/4, 3/4); the cross-entropy of class 1 is log(4/3). */
Test(softmax_harness, known_values)
{
    nn_ctx *ref = make_ctx(NN_BACKEND_REF, 0);
    double xv[2] = {0, log(3.0)}, yv[2], lv[1];
    nn_tensor x, y, loss;
    cr_assert_eq(nn_tensor_wrap(ref, xv, NN_DTYPE_F64, 2, (int64_t[]){1, 2}, NULL, &x), NN_OK);
    cr_assert_eq(nn_tensor_wrap(ref, yv, NN_DTYPE_F64, 2, (int64_t[]){1, 2}, NULL, &y), NN_OK);
    cr_assert_eq(nn_tensor_wrap(ref, lv, NN_DTYPE_F64, 1, (int64_t[]){1}, NULL, &loss), NN_OK);
    nn_softmax_params p;
    nn_softmax_params_default(&p);
    cr_assert_eq(nn_softmax_forward(ref, &p, &x, &y, NULL), NN_OK);
    cr_expect_float_eq(yv[0], 0.25, 1e-15);
    cr_expect_float_eq(yv[1], 0.75, 1e-15);
    int64_t t = 1;
    nn_class_targets tg = {&t, NN_INDEX_I64, {0}};
    cr_assert_eq(nn_softmax_cross_entropy_forward(ref, &x, &tg, &loss, NULL), NN_OK);
    cr_expect_float_eq(lv[0], log(4.0 / 3.0), 1e-15);
    nn_ctx_destroy(ref);
}

/* cuDNN against the reference on every standard case and two model shapes. */
Test(softmax_harness_gpu, cudnn_matches_reference, .timeout = 600)
{
    NN_REQUIRE_GPU();
#if !NN_HAVE_CUDNN
    cr_skip_test("this build of nnprim has no cuDNN");
#endif
    static const char *const extra[] = {"n64c10000 xent i64 f32", "n64c10000 log f16",
                                        "n35c20s50 xent i32 bf16", "n64c10 softmax accdx f32"};
    nn_ctx *ref = make_ctx(NN_BACKEND_REF, 0);
    nn_ctx *dev = make_ctx(NN_BACKEND_CUDNN, 0);
    int fails = 0;
    size_t n = nn_softmax_standard_case_count(), ne = sizeof extra / sizeof extra[0];
    for (size_t i = 0; i < n + ne; i++) {
        struct nn_softmax_case c;
        if (i < n)
            cr_assert_eq(nn_softmax_standard_case(i, &c), 0);
        else
            parse(extra[i - n], &c);
        fails += nn_softmax_check_backend(dev, ref, &c, stderr);
    }
    cr_expect_eq(fails, 0, "%d failures (lines above, each with its reproducer)", fails);
    nn_ctx_destroy(dev);
    nn_ctx_destroy(ref);
}

/* On the GPU the targets may be host memory too, and a target out of range is refused there as
 * on the reference, before anything is written. */
Test(softmax_harness_gpu, host_targets_and_range_check)
{
    NN_REQUIRE_GPU();
#if !NN_HAVE_CUDNN
    cr_skip_test("this build of nnprim has no cuDNN");
#endif
    nn_ctx *dev = make_ctx(NN_BACKEND_CUDNN, 0);
    nn_tensor x, loss;
    cr_assert_eq(nn_tensor_empty(dev, NN_DTYPE_F32, 2, (int64_t[]){3, 4}, &x), NN_OK);
    cr_assert_eq(nn_tensor_empty(dev, NN_DTYPE_F32, 1, (int64_t[]){3}, &loss), NN_OK);
    cr_assert_eq(nn_tensor_fill_ints(dev, &x, -2, 2, 1), NN_OK);
    int32_t t[3] = {0, 3, 1};
    nn_class_targets tg = {t, NN_INDEX_I32, {0}};
    cr_expect_eq(nn_softmax_cross_entropy_forward(dev, &x, &tg, &loss, NULL), NN_OK, "%s",
                 nn_last_error()->message);
    t[1] = 4;
    cr_expect_eq(nn_softmax_cross_entropy_forward(dev, &x, &tg, &loss, NULL), NN_E_INVALID_ARG);
    cr_expect(strstr(nn_last_error()->message, "targets[1] (sample 1, position 0)"), "%s",
              nn_last_error()->message);
    nn_tensor_free(dev, &x);
    nn_tensor_free(dev, &loss);
    nn_ctx_destroy(dev);
}

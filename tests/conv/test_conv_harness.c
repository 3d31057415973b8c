/* The correctness harness on the standard cases: the reference against finite differences and
 * with guarded outputs (runs everywhere), and the cuDNN path against the reference (GPU only).
 * Also the case syntax: it parses back, and it is the syntax of the verbose line. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "conv/conv_internal.h"
#include "nn_config.h"
#include "gpu.h"
#include "tests/harness/conv_case.h"

static nn_ctx *make_ctx(nn_backend backend, nn_math_mode math)
{
    nn_settings s;
    nn_settings_from_env(&s);
    s.backend = backend;
    s.math_mode = math;
    nn_ctx *ctx = NULL;
    cr_assert_eq(nn_ctx_create(&ctx, &s), NN_OK, "%s", nn_last_error()->message);
    return ctx;
}

Test(conv_harness, case_syntax_round_trips)
{
    size_t n = nn_conv_standard_case_count();
    cr_assert_eq(n, 70);
    for (size_t i = 0; i < n; i++) {
        struct nn_conv_case c, back;
        char text[256], err[256];
        cr_assert_eq(nn_conv_standard_case(i, &c), 0, "case %zu", i);
        nn_conv_case_format(&c, text, sizeof text);
        cr_assert_eq(nn_conv_case_parse_line(text, &back, err, sizeof err), 1, "%s: %s", text, err);
        cr_expect_eq(memcmp(&c, &back, sizeof c), 0, "'%s' does not parse back", text);
    }
}

Test(conv_harness, case_parse_errors_name_the_token)
{
    struct nn_conv_case c;
    char err[256];
    cr_expect_eq(nn_conv_case_parse_line("  # only a comment", &c, err, sizeof err), 0);
    cr_expect_eq(nn_conv_case_parse_line("n1c4h8w8k4r3", &c, err, sizeof err), -1);
    cr_expect(strstr(err, "need n, c, w, k, s"), "%s", err);
    cr_expect_eq(nn_conv_case_parse_line("n1c4h8w8k4r3s3 stride2x2x2", &c, err, sizeof err), -1);
    cr_expect(strstr(err, "stride2x2x2"), "%s", err);
    cr_expect_eq(nn_conv_case_parse_line("n1c4h8w8k4r3s3 wobble", &c, err, sizeof err), -1);
    cr_expect(strstr(err, "unknown token 'wobble'"), "%s", err);
    cr_expect_eq(nn_conv_case_parse_line("n1c4h8w8k4r3s3 g3", &c, err, sizeof err), -1);
    cr_expect(strstr(err, "divisible"), "%s", err);
    /* found by fuzz/fuzz_case_line.c: the text of an f16 case has no tf32, so it would not
     * reproduce the context the case asked for */
    cr_expect_eq(nn_conv_case_parse_line("n1c4h8w8k4r3s3 f16 tf32", &c, err, sizeof err), -1);
    cr_expect(strstr(err, "tf32 applies to f32"), "%s", err);
    cr_expect_eq(
        nn_conv_case_parse_line("n1c4h8w8k4r3s3 padlo1x0 padhi0x2 g2 # x", &c, err, sizeof err), 1);
    cr_expect_eq(c.p.pad_lo[0], 1);
    cr_expect_eq(c.p.pad_hi[1], 2);
    cr_expect_eq(c.w_dims[1], 2);
}

/* The verbose line's shape (nn__conv_problem_text) is the case syntax: a forward call's text
 * parses to the same case and formats to the same string. */
Test(conv_harness, verbose_text_is_the_case_syntax)
{
    nn_ctx *ref = make_ctx(NN_BACKEND_REF, NN_MATH_STRICT_FP32);
    for (size_t i = 0; i < nn_conv_standard_case_count(); i++) {
        struct nn_conv_case c;
        cr_assert_eq(nn_conv_standard_case(i, &c), 0);
        c.accumulate = 0; /* the problem's text has no accumulation: a backward's line adds it */
        struct nn__conv_problem prob;
        memset(&prob, 0, sizeof prob);
        int nsp = c.p.spatial_rank;
        int64_t yd[5];
        cr_assert_eq(nn_conv_output_shape(&c.p, nsp + 2, c.x_dims, c.w_dims, yd), NN_OK);
        prob.nsp = nsp;
        prob.n = c.x_dims[0];
        prob.c = c.x_dims[1];
        prob.k = c.w_dims[0];
        prob.groups = c.p.groups;
        for (int d = 0; d < nsp; d++) {
            prob.in[d] = c.x_dims[2 + d];
            prob.filt[d] = c.w_dims[2 + d];
            prob.out[d] = yd[2 + d];
            prob.stride[d] = c.p.stride[d];
            prob.dilation[d] = c.p.dilation[d];
            prob.pad_lo[d] = c.p.pad_lo[d];
            prob.pad_hi[d] = c.p.pad_hi[d];
        }
        prob.mode = c.p.mode;
        prob.activation = c.p.activation;
        prob.has_bias = c.bias;
        prob.dtype = c.dtype;
        prob.math = c.math;
        char lib[256], harness[256];
        nn__conv_problem_text(&prob, lib, sizeof lib);
        nn_conv_case_format(&c, harness, sizeof harness);
        cr_expect_str_eq(lib, harness);
    }
    nn_ctx_destroy(ref);
}

/* The benchmark shape lists are valid cases. */
Test(conv_harness, bench_shape_files_parse)
{
    const char *files[] = {NN_SOURCE_ROOT "/bench/shapes_conv_resnet50.txt",
                           NN_SOURCE_ROOT "/bench/shapes_conv_deepbench.txt"};
    for (int i = 0; i < 2; i++) {
        FILE *f = fopen(files[i], "r");
        cr_assert_not_null(f, "%s", files[i]);
        char line[512], err[256];
        int cases = 0, lineno = 0;
        while (fgets(line, sizeof line, f)) {
            struct nn_conv_case c;
            lineno++;
            int got = nn_conv_case_parse_line(line, &c, err, sizeof err);
            cr_expect_geq(got, 0, "%s:%d: %s", files[i], lineno, err);
            int64_t yd[5];
            if (got == 1)
                cr_expect_eq(
                    nn_conv_output_shape(&c.p, c.p.spatial_rank + 2, c.x_dims, c.w_dims, yd), NN_OK,
                    "%s:%d", files[i], lineno);
            cases += got == 1;
        }
        fclose(f);
        cr_expect_gt(cases, 20, "%s", files[i]);
    }
}

/* NNPRIM_VERBOSE=1 prints one line per call with the problem in the case syntax. */
Test(conv_harness, verbose_line_carries_the_case)
{
    nn_settings s;
    nn_settings_from_env(&s);
    s.backend = NN_BACKEND_REF;
    s.verbose = 1;
    nn_ctx *ctx;
    cr_assert_eq(nn_ctx_create(&ctx, &s), NN_OK);
    const char *text = "n1c4h5w5k2r3s3 g1 stride1x1 dil1x1 padlo1x0 padhi0x1 conv relu bias f32";
    struct nn_conv_case c;
    char err[256];
    cr_assert_eq(nn_conv_case_parse_line(text, &c, err, sizeof err), 1, "%s", err);
    int64_t yd[4], bd[1] = {2};
    cr_assert_eq(nn_conv_output_shape(&c.p, 4, c.x_dims, c.w_dims, yd), NN_OK);
    nn_tensor x, w, b, y;
    cr_assert_eq(nn_tensor_empty(ctx, NN_DTYPE_F32, 4, c.x_dims, &x), NN_OK);
    cr_assert_eq(nn_tensor_empty(ctx, NN_DTYPE_F32, 4, c.w_dims, &w), NN_OK);
    cr_assert_eq(nn_tensor_empty(ctx, NN_DTYPE_F32, 1, bd, &b), NN_OK);
    cr_assert_eq(nn_tensor_empty(ctx, NN_DTYPE_F32, 4, yd, &y), NN_OK);
    nn_tensor *in[] = {&x, &w, &b};
    for (int i = 0; i < 3; i++)
        cr_assert_eq(nn_tensor_fill_ints(ctx, in[i], -2, 2, 1), NN_OK);

    FILE *tmp = tmpfile();
    cr_assert_not_null(tmp);
    fflush(stderr);
    int saved = dup(2);
    dup2(fileno(tmp), 2);
    nn_status st = nn_conv_forward(ctx, &c.p, &x, &w, &b, &y, NULL);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    cr_assert_eq(st, NN_OK);
    char line[512] = "";
    rewind(tmp);
    cr_assert_not_null(fgets(line, sizeof line, tmp));
    fclose(tmp);
    char want[256];
    snprintf(want, sizeof want, "nnprim_verbose,conv_forward,ref,ref,-,%s,", text);
    cr_expect(strncmp(line, want, strlen(want)) == 0, "line: %s", line);
    /* The whole line, pasted, is the same case. */
    struct nn_conv_case back;
    cr_expect_eq(nn_conv_case_parse_line(line, &back, err, sizeof err), 1, "%s: %s", line, err);
    cr_expect_eq(memcmp(&c, &back, sizeof c), 0, "the verbose line parses to another case");
    cr_expect_eq(nn_conv_case_parse_line("nnprim_verbose,conv_forward,ref", &back, err, sizeof err),
                 -1);
    cr_expect(strstr(err, "without its shape field"), "%s", err);
    nn_tensor *all[] = {&x, &w, &b, &y};
    for (int i = 0; i < 4; i++)
        nn_tensor_free(ctx, all[i]);
    nn_ctx_destroy(ctx);
}

Test(conv_harness, reference_matches_finite_differences_and_respects_guards)
{
    nn_ctx *ref = make_ctx(NN_BACKEND_REF, NN_MATH_STRICT_FP32);
    int fails = 0;
    for (size_t i = 0; i < nn_conv_standard_case_count(); i++) {
        struct nn_conv_case c;
        cr_assert_eq(nn_conv_standard_case(i, &c), 0);
        fails += nn_conv_check_reference(ref, &c, stderr);
    }
    cr_expect_eq(fails, 0, "%d failures (lines above, each with its reproducer)", fails);
    nn_ctx_destroy(ref);
}

/* Large batches with relu: dw sums over the batch and a finite-difference step crosses relu's
 * kinks; correct gradients pass (the first is example_cnn_classifier's first convolution). */
static const char *const large_relu[] = {
    "n256c1h8w8k8r3s3 pad1 relu bias f32",
    "n512c8h4w4k8r3s3 pad1 relu bias f32",
    "n512c8h4w4k8r1s1 relu bias accdw f32",
};

Test(conv_harness, large_batch_relu_cases_pass)
{
    nn_ctx *ref = make_ctx(NN_BACKEND_REF, NN_MATH_STRICT_FP32);
    for (size_t i = 0; i < sizeof large_relu / sizeof large_relu[0]; i++) {
        struct nn_conv_case c;
        char err[256];
        cr_assert_eq(nn_conv_case_parse_line(large_relu[i], &c, err, sizeof err), 1, "%s", err);
        cr_expect_eq(nn_conv_check_reference(ref, &c, stderr), 0, "%s", large_relu[i]);
    }
    nn_ctx_destroy(ref);
}

/* ... and the same check still fails a gradient wrong by one part in 1e5 (dw, dx, db in turn),
 * on those cases and on a small one, through the harness's deliberate-error hook. */
Test(conv_harness, finite_differences_catch_a_wrong_gradient)
{
    nn_ctx *ref = make_ctx(NN_BACKEND_REF, NN_MATH_STRICT_FP32);
    static const char *const grads[] = {"dx", "dw", "db"};
    const char *cases[] = {large_relu[0], large_relu[1], "n2c4h7w6k6r3s3 g2 pad1 bias relu f64"};
    FILE *sink = fopen("/dev/null", "w");
    cr_assert_not_null(sink);
    for (size_t i = 0; i < 3; i++)
        for (size_t g = 0; g < 3; g++) {
            struct nn_conv_case c;
            char err[256];
            cr_assert_eq(nn_conv_case_parse_line(cases[i], &c, err, sizeof err), 1);
            if (!c.bias && g == 2) continue;
            nn_h_fd_tamper = (struct nn_h_fd_tamper){grads[g], 1e-5};
            int fails = nn_conv_check_reference(ref, &c, sink);
            nn_h_fd_tamper = (struct nn_h_fd_tamper){NULL, 0};
            cr_expect_eq(fails, 1, "%s with %s off by 1e-5: %d failures", cases[i], grads[g],
                         fails);
        }
    fclose(sink);
    nn_ctx_destroy(ref);
}

/* The backend comparison itself, run with a second reference context as the "backend": every
 * case must compare equal (the reference is deterministic), with guards intact. */
Test(conv_harness, backend_comparison_runs_on_two_reference_contexts)
{
    nn_ctx *ref = make_ctx(NN_BACKEND_REF, NN_MATH_STRICT_FP32);
    nn_ctx *other = make_ctx(NN_BACKEND_REF, NN_MATH_STRICT_FP32);
    int fails = 0;
    for (size_t i = 0; i < nn_conv_standard_case_count(); i++) {
        struct nn_conv_case c;
        cr_assert_eq(nn_conv_standard_case(i, &c), 0);
        fails += nn_conv_check_backend(other, ref, &c, stderr);
    }
    cr_expect_eq(fails, 0, "%d failures", fails);
    nn_ctx_destroy(other);
    nn_ctx_destroy(ref);
}

/* The harness must catch what it claims to: an output view shifted past its end trips the
 * guard, and an unwritten element stays NaN. */
Test(conv_harness, guards_catch_overruns_and_unwritten_elements)
{
    nn_ctx *ref = make_ctx(NN_BACKEND_REF, NN_MATH_STRICT_FP32);
    int64_t dims[1] = {10};
    struct nn_h_guarded g;
    cr_assert_eq(nn_h_guarded_alloc(ref, ref, NN_DTYPE_F32, 1, dims, 5, &g), NN_OK);
    FILE *sink = fopen("/dev/null", "w");
    cr_assert_not_null(sink);
    nn_tensor h;
    cr_assert_eq(nn_h_to_host(ref, ref, &g.view, &h), NN_OK);
    cr_expect_eq(nn_h_check_written("v", &h, sink, "r"), 1);
    nn_tensor_free(ref, &h);
    cr_expect_eq(nn_h_guarded_check(ref, ref, &g, "v", sink, "r"), 0);
    ((float *)g.view.data)[10] = 1.0f; /* one past the end */
    cr_expect_eq(nn_h_guarded_check(ref, ref, &g, "v", sink, "r"), 1);
    ((float *)g.view.data)[10] = ((float *)g.pattern.data)[NN_H_GUARD + 10];
    ((float *)g.view.data)[-1] = 2.0f; /* one before the start */
    cr_expect_eq(nn_h_guarded_check(ref, ref, &g, "v", sink, "r"), 1);
    fclose(sink);
    nn_h_guarded_free(ref, ref, &g);
    nn_ctx_destroy(ref);
}

Test(conv_harness, comparison_tolerances)
{
    nn_ctx *ref = make_ctx(NN_BACKEND_REF, NN_MATH_STRICT_FP32);
    double a[3] = {1, 2, 3}, b[3] = {1, 2, 3.001};
    int64_t dims[1] = {3};
    nn_tensor ta, tb;
    cr_assert_eq(nn_tensor_wrap(ref, a, NN_DTYPE_F64, 1, dims, NULL, &ta), NN_OK);
    cr_assert_eq(nn_tensor_wrap(ref, b, NN_DTYPE_F64, 1, dims, NULL, &tb), NN_OK);
    FILE *sink = fopen("/dev/null", "w");
    cr_expect_eq(nn_h_compare("t", &ta, &ta, 0, 1, sink, "r"), 0);
    cr_expect_eq(nn_h_compare("t", &tb, &ta, 0, 1, sink, "r"), 1);
    cr_expect_eq(nn_h_compare("t", &tb, &ta, nn_h_tolerance(NN_DTYPE_F32, NN_MATH_STRICT_FP32), 1,
                              sink, "r"),
                 1);
    cr_expect_eq(nn_h_compare("t", &tb, &ta, nn_h_tolerance(NN_DTYPE_BF16, NN_MATH_STRICT_FP32), 1,
                              sink, "r"),
                 0);
    cr_expect(nn_h_exact(NN_DTYPE_F16, 511));
    cr_expect(!nn_h_exact(NN_DTYPE_F16, 512));
    cr_expect(nn_h_exact(NN_DTYPE_F32, 1 << 20));
    fclose(sink);
    nn_ctx_destroy(ref);
}

/* The cuDNN path against the reference on every standard case, in the case's math mode. */
Test(conv_harness_gpu, cudnn_matches_reference)
{
    NN_REQUIRE_GPU();
#if !NN_HAVE_CUDNN
    cr_skip_test("this build of nnprim has no cuDNN");
#endif
    nn_ctx *ref = make_ctx(NN_BACKEND_REF, NN_MATH_STRICT_FP32);
    nn_ctx *strict = make_ctx(NN_BACKEND_CUDNN, NN_MATH_STRICT_FP32);
    nn_ctx *tf32 = make_ctx(NN_BACKEND_CUDNN, NN_MATH_TF32);
    int fails = 0;
    for (size_t i = 0; i < nn_conv_standard_case_count(); i++) {
        struct nn_conv_case c;
        cr_assert_eq(nn_conv_standard_case(i, &c), 0);
        fails += nn_conv_check_backend(c.math == NN_MATH_TF32 ? tf32 : strict, ref, &c, stderr);
    }
    cr_expect_eq(fails, 0, "%d failures (lines above, each with its reproducer)", fails);
    nn_ctx_destroy(tf32);
    nn_ctx_destroy(strict);
    nn_ctx_destroy(ref);
}

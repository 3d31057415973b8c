/* The shared correctness harness on the linear layer's standard cases: the reference against
 * finite differences and with guarded outputs (runs everywhere), cuBLASLt against the reference
 * (GPU only). Also the case syntax: it parses back, and it is the verbose line's shape field,
 * which pastes whole into `nnprim check linear`. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "gpu.h"
#include "nn_config.h"
#include "tests/harness/linear_case.h"

static nn_ctx *make_ctx(nn_backend backend, nn_math_mode math, int verbose)
{
    nn_settings s;
    nn_settings_from_env(&s);
    s.backend = backend;
    s.math_mode = math;
    s.verbose = verbose;
    nn_ctx *ctx = NULL;
    cr_assert_eq(nn_ctx_create(&ctx, &s), NN_OK, "%s", nn_last_error()->message);
    return ctx;
}

static void parse(const char *text, struct nn_linear_case *c)
{
    char err[256];
    cr_assert_eq(nn_linear_case_parse_line(text, c, err, sizeof err), 1, "%s: %s", text, err);
}

Test(linear_harness, case_syntax_round_trips)
{
    size_t n = nn_linear_standard_case_count();
    cr_assert_eq(n, 240, "6 geometries x 8 variants x 5 dtypes");
    for (size_t i = 0; i < n; i++) {
        struct nn_linear_case c, back;
        char text[256];
        cr_assert_eq(nn_linear_standard_case(i, &c), 0, "case %zu", i);
        nn_linear_case_format(&c, text, sizeof text);
        parse(text, &back);
        cr_expect_eq(memcmp(&c, &back, sizeof c), 0, "'%s' does not parse back", text);
    }
    struct nn_linear_case c;
    parse("m4x5in8out3 relu bias accdw bf16 # comment", &c);
    cr_expect_eq(c.x_rank, 3);
    cr_expect_eq(c.lead[0], 4);
    cr_expect_eq(c.lead[1], 5);
    cr_expect_eq(c.in, 8);
    cr_expect_eq(c.out, 3);
    cr_expect_eq(c.p.activation, NN_ACTIVATION_RELU);
    cr_expect_eq(c.accumulate, NN_ACCUMULATE_DW);
    cr_expect(c.bias);
    cr_expect_eq(c.dtype, NN_DTYPE_BF16);
    parse("in8out3", &c);
    cr_expect_eq(c.x_rank, 1);
}

Test(linear_harness, case_parse_errors_name_the_token)
{
    struct nn_linear_case c;
    char err[256];
    cr_expect_eq(nn_linear_case_parse_line("  # only a comment", &c, err, sizeof err), 0);
    cr_expect_eq(nn_linear_case_parse_line("m4in8", &c, err, sizeof err), -1);
    cr_expect(strstr(err, "'m4in8'"), "%s", err);
    cr_expect_eq(nn_linear_case_parse_line("m0in8out2", &c, err, sizeof err), -1);
    cr_expect(strstr(err, "'m0in8out2'"), "%s", err);
    cr_expect_eq(nn_linear_case_parse_line("m4in8out2 wobble", &c, err, sizeof err), -1);
    cr_expect(strstr(err, "unknown token 'wobble'"), "%s", err);
    cr_expect_eq(nn_linear_case_parse_line("m4in8out2 f16 tf32", &c, err, sizeof err), -1);
    cr_expect(strstr(err, "tf32 applies to f32"), "%s", err);
}

/* NNPRIM_VERBOSE=1: the line of each call carries it in the case syntax; pasted whole, it parses
 * back to the same case. */
Test(linear_harness, verbose_line_is_a_case)
{
    nn_ctx *ctx = make_ctx(NN_BACKEND_REF, NN_MATH_STRICT_FP32, 1);
    const char *text = "m2x3in4out5 relu bias accdx f32";
    struct nn_linear_case c;
    parse(text, &c);
    nn_tensor x, w, b, y, dy, dx;
    cr_assert_eq(nn_tensor_empty(ctx, NN_DTYPE_F32, 3, (int64_t[]){2, 3, 4}, &x), NN_OK);
    cr_assert_eq(nn_tensor_empty(ctx, NN_DTYPE_F32, 2, (int64_t[]){5, 4}, &w), NN_OK);
    cr_assert_eq(nn_tensor_empty(ctx, NN_DTYPE_F32, 1, (int64_t[]){5}, &b), NN_OK);
    cr_assert_eq(nn_tensor_empty(ctx, NN_DTYPE_F32, 3, (int64_t[]){2, 3, 5}, &y), NN_OK);
    cr_assert_eq(nn_tensor_empty(ctx, NN_DTYPE_F32, 3, (int64_t[]){2, 3, 5}, &dy), NN_OK);
    cr_assert_eq(nn_tensor_empty(ctx, NN_DTYPE_F32, 3, (int64_t[]){2, 3, 4}, &dx), NN_OK);
    nn_tensor *fill[] = {&x, &w, &b, &dy, &dx};
    for (int i = 0; i < 5; i++)
        cr_assert_eq(nn_tensor_fill_ints(ctx, fill[i], -2, 2, (uint64_t)i), NN_OK);
    FILE *tmp = tmpfile();
    cr_assert_not_null(tmp);
    fflush(stderr);
    int saved = dup(2);
    dup2(fileno(tmp), 2);
    nn_linear_pullback *pb = NULL;
    nn_status st = nn_linear_forward(ctx, &c.p, &x, &w, &b, &y, &pb);
    nn_backward_options o = {.accumulate = c.accumulate};
    if (st == NN_OK) st = nn_linear_backward_ex(ctx, &pb, &o, &dy, &dx, NULL, NULL);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    cr_assert_eq(st, NN_OK, "%s", nn_last_error()->message);
    rewind(tmp);
    /* the backward asked for dx only, and its line says so; the accumulation is the backward's,
     * so the forward's line has none */
    const char *ops[] = {"linear_forward", "linear_backward_ex"}, *asked[] = {"", " grads=dx"};
    const char *texts[] = {"m2x3in4out5 relu bias f32", text};
    unsigned acc = c.accumulate;
    for (int i = 0; i < 2; i++) {
        char line[512] = "", want[256], err[256];
        cr_assert_not_null(fgets(line, sizeof line, tmp));
        snprintf(want, sizeof want, "nnprim_verbose,%s,ref,ref,-,%s%s,", ops[i], texts[i],
                 asked[i]);
        cr_expect(strncmp(line, want, strlen(want)) == 0, "line: %s want: %s", line, want);
        struct nn_linear_case back;
        cr_expect_eq(nn_linear_case_parse_line(line, &back, err, sizeof err), 1, "%s: %s", line,
                     err);
        c.skip = i ? NN_H_SKIP_DW | NN_H_SKIP_DB : 0;
        c.accumulate = i ? acc : 0;
        cr_expect_eq(memcmp(&c, &back, sizeof c), 0, "the verbose line parses to another case");
    }
    fclose(tmp);
    for (int i = 0; i < 5; i++)
        nn_tensor_free(ctx, fill[i]);
    nn_tensor_free(ctx, &y);
    nn_ctx_destroy(ctx);
}

Test(linear_harness, reference_matches_finite_differences_and_respects_guards, .timeout = 300)
{
    nn_ctx *ref = make_ctx(NN_BACKEND_REF, NN_MATH_STRICT_FP32, 0);
    int fails = 0;
    for (size_t i = 0; i < nn_linear_standard_case_count(); i++) {
        struct nn_linear_case c;
        cr_assert_eq(nn_linear_standard_case(i, &c), 0);
        fails += nn_linear_check_reference(ref, &c, stderr);
    }
    cr_expect_eq(fails, 0, "%d failures (lines above, each with its reproducer)", fails);
    nn_ctx_destroy(ref);
}

/* A large batch with relu: dw and db sum over it, and a finite-difference step crosses relu's
 * kinks; correct gradients pass, and a gradient wrong by one part in 1e5 (dx, dw, db in turn,
 * through the harness's deliberate-error hook) fails. */
Test(linear_harness, large_batch_relu_passes_and_a_wrong_gradient_fails, .timeout = 300)
{
    nn_ctx *ref = make_ctx(NN_BACKEND_REF, NN_MATH_STRICT_FP32, 0);
    struct nn_linear_case c;
    parse("m4096in64out32 relu bias accdw f32", &c);
    cr_expect_eq(nn_linear_check_reference(ref, &c, stderr), 0);
    static const char *const grads[] = {"dx", "dw", "db"};
    FILE *sink = fopen("/dev/null", "w");
    cr_assert_not_null(sink);
    for (int g = 0; g < 3; g++) {
        nn_h_fd_tamper = (struct nn_h_fd_tamper){grads[g], 1e-5};
        int fails = nn_linear_check_reference(ref, &c, sink);
        nn_h_fd_tamper = (struct nn_h_fd_tamper){NULL, 0};
        cr_expect_eq(fails, 1, "%s off by 1e-5: %d failures", grads[g], fails);
    }
    fclose(sink);
    nn_ctx_destroy(ref);
}

/* A passing case prints nothing but its own absence of failures. */
Test(linear_harness, a_passing_case_prints_no_failure)
{
    nn_ctx *ref = make_ctx(NN_BACKEND_REF, NN_MATH_STRICT_FP32, 0);
    char buf[4096] = "";
    FILE *out = fmemopen(buf, sizeof buf, "w");
    cr_assert_not_null(out);
    struct nn_linear_case c;
    parse("m3x2in5out4 relu bias accdx accdw accdb f16", &c);
    cr_expect_eq(nn_linear_check_reference(ref, &c, out), 0);
    fclose(out);
    cr_expect_null(strstr(buf, "FAIL"), "%s", buf);
    nn_ctx_destroy(ref);
}

/* Shapes of the models (an LSTM LM head, a classifier) at a size where cuBLASLt picks real
 * kernels, beyond the standard cases. */
static const char *const gpu_extra[] = {
    "m64in512out1000 bias f32",
    "m64in512out1000 bias f32 tf32",
    "m35x20in200out96 bias f16",
    "m64in256out10 relu bias bf16",
    "m128in64out64 relu bias accdx accdw accdb f32",
    "m100in300out50 relu bias f64",
    "m7in4099out3 bias accdb f32",
    /* db through the product with ones, accumulated or not, at model sizes */
    "m35x20in650out1000 bias accdb bf16",
    "m35x20in650out1000 bias accdw accdb bf16",
    "m64in512out10 bias bf16",
    "m64in512out10 bias accdb f16",
    "m64in512out10 relu bias accdb f32 tf32",
};

/* cuBLASLt against the reference on every standard case and the model shapes. */
Test(linear_harness_gpu, cublaslt_matches_reference, .timeout = 600)
{
    NN_REQUIRE_GPU();
#if !NN_HAVE_CUDNN
    cr_skip_test("this build of nnprim has no cuDNN and cuBLASLt");
#endif
    nn_ctx *ref = make_ctx(NN_BACKEND_REF, NN_MATH_STRICT_FP32, 0);
    nn_ctx *dev[2] = {make_ctx(NN_BACKEND_CUDNN, NN_MATH_STRICT_FP32, 0),
                      make_ctx(NN_BACKEND_CUDNN, NN_MATH_TF32, 0)};
    int fails = 0;
    size_t n = nn_linear_standard_case_count(), extra = sizeof gpu_extra / sizeof gpu_extra[0];
    for (size_t i = 0; i < n + extra; i++) {
        struct nn_linear_case c;
        if (i < n)
            cr_assert_eq(nn_linear_standard_case(i, &c), 0);
        else
            parse(gpu_extra[i - n], &c);
        fails += nn_linear_check_backend(dev[c.math == NN_MATH_TF32], ref, &c, stderr);
    }
    cr_expect_eq(fails, 0, "%d failures (lines above, each with its reproducer)", fails);
    nn_ctx_destroy(dev[0]);
    nn_ctx_destroy(dev[1]);
    nn_ctx_destroy(ref);
}

/* The second call of a shape finds its matmul plan in the cache: no heuristic query, no build. */
Test(linear_harness_gpu, second_call_hits_the_cache)
{
    NN_REQUIRE_GPU();
#if !NN_HAVE_CUDNN
    cr_skip_test("this build of nnprim has no cuDNN and cuBLASLt");
#endif
    nn_ctx *dev = make_ctx(NN_BACKEND_CUDNN, NN_MATH_STRICT_FP32, 0);
    nn_tensor x, w, b, y;
    cr_assert_eq(nn_tensor_empty(dev, NN_DTYPE_F32, 2, (int64_t[]){64, 128}, &x), NN_OK);
    cr_assert_eq(nn_tensor_empty(dev, NN_DTYPE_F32, 2, (int64_t[]){32, 128}, &w), NN_OK);
    cr_assert_eq(nn_tensor_empty(dev, NN_DTYPE_F32, 1, (int64_t[]){32}, &b), NN_OK);
    cr_assert_eq(nn_tensor_empty(dev, NN_DTYPE_F32, 2, (int64_t[]){64, 32}, &y), NN_OK);
    nn_linear_params p;
    nn_linear_params_default(&p);
    cr_assert_eq(nn_linear_forward(dev, &p, &x, &w, &b, &y, NULL), NN_OK, "%s",
                 nn_last_error()->message);
    nn_plan_cache_stats s0, s1;
    cr_assert_eq(nn_plan_cache_get_stats(dev, &s0), NN_OK);
    cr_assert_eq(nn_linear_forward(dev, &p, &x, &w, &b, &y, NULL), NN_OK);
    cr_assert_eq(nn_plan_cache_get_stats(dev, &s1), NN_OK);
    cr_expect_eq(s1.hits, s0.hits + 1);
    cr_expect_eq(s1.heuristic_queries, s0.heuristic_queries);
    nn_tensor *all[] = {&x, &w, &b, &y};
    for (int i = 0; i < 4; i++)
        nn_tensor_free(dev, all[i]);
    nn_ctx_destroy(dev);
}

/* The shared correctness harness on pooling's standard cases: the reference against finite
 * differences and with guarded outputs (runs everywhere), the cuDNN path against the reference
 * (GPU only). Also the case syntax: it parses back, and it is the syntax of the verbose line,
 * which pastes whole into `nnprim check pool`. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "gpu.h"
#include "nn_config.h"
#include "tests/harness/pool_case.h"

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

Test(pool_harness, case_syntax_round_trips)
{
    size_t n = nn_pool_standard_case_count();
    cr_assert_eq(n, 96, "8 geometries x 3 modes x 4 dtypes");
    for (size_t i = 0; i < n; i++) {
        struct nn_pool_case c, back;
        char text[256], err[256];
        cr_assert_eq(nn_pool_standard_case(i, &c), 0, "case %zu", i);
        nn_pool_case_format(&c, text, sizeof text);
        cr_assert_eq(nn_pool_case_parse_line(text, &back, err, sizeof err), 1, "%s: %s", text, err);
        cr_expect_eq(memcmp(&c, &back, sizeof c), 0, "'%s' does not parse back", text);
        int64_t yd[5];
        cr_expect_eq(nn_pool_output_shape(&c.p, c.p.spatial_rank + 2, c.x_dims, yd), NN_OK, "%s",
                     text);
    }
}

Test(pool_harness, case_parse_errors_name_the_token)
{
    struct nn_pool_case c;
    char err[256];
    cr_expect_eq(nn_pool_case_parse_line("  # only a comment", &c, err, sizeof err), 0);
    cr_expect_eq(nn_pool_case_parse_line("n1c4h8", &c, err, sizeof err), -1);
    cr_expect(strstr(err, "need n, c and w"), "%s", err);
    cr_expect_eq(nn_pool_case_parse_line("n1c4h8w8 win2x2x2", &c, err, sizeof err), -1);
    cr_expect(strstr(err, "win2x2x2"), "%s", err);
    cr_expect_eq(nn_pool_case_parse_line("n1c4h8w8 wobble", &c, err, sizeof err), -1);
    cr_expect(strstr(err, "unknown token 'wobble'"), "%s", err);
    cr_expect_eq(nn_pool_case_parse_line("n1c4h8w8 mean_include_pad win3 padlo1x0 padhi0x2 f16 # x",
                                         &c, err, sizeof err),
                 1, "%s", err);
    cr_expect_eq(c.p.mode, NN_POOL_MEAN_INCLUDE_PAD);
    cr_expect_eq(c.p.window[1], 3);
    cr_expect_eq(c.p.stride[0], 1, "default stride");
    cr_expect_eq(c.p.pad_lo[0], 1);
    cr_expect_eq(c.p.pad_hi[1], 2);
    cr_expect_eq(c.dtype, NN_DTYPE_F16);
}

/* "accdx": the backward adds to dx (nn_pool_backward_ex's opts.accumulate), written last. */
Test(pool_harness, accdx_in_the_case_syntax)
{
    struct nn_pool_case c;
    char err[256], text[256];
    cr_assert_eq(nn_pool_case_parse_line("n1c2h6w5 accdx max win2 f16", &c, err, sizeof err), 1,
                 "%s", err);
    cr_expect_eq(c.accumulate, NN_ACCUMULATE_DX);
    nn_pool_case_format(&c, text, sizeof text);
    cr_expect_str_eq(text, "n1c2h6w5 max win2x2 stride1x1 pad0x0 f16 accdx");
    cr_assert_eq(nn_pool_case_parse_line("n1c2h6w5 max win2", &c, err, sizeof err), 1, "%s", err);
    cr_expect_eq(c.accumulate, 0u, "dx overwritten by default");
    cr_expect_eq(nn_pool_case_parse_line("n1c2h6w5 accdw", &c, err, sizeof err), -1);
    cr_expect(strstr(err, "unknown token 'accdw'"), "%s", err);
}

/* NNPRIM_VERBOSE=1: pooling's line carries the call in the case syntax, and the whole line parses
 * back to the same case. */
Test(pool_harness, verbose_line_is_a_case)
{
    nn_ctx *ctx = make_ctx(NN_BACKEND_REF, 1);
    const char *text = "n1c2h6w5 mean_exclude_pad win3x2 stride2x1 padlo1x0 padhi0x1 f32";
    struct nn_pool_case c;
    char err[256];
    cr_assert_eq(nn_pool_case_parse_line(text, &c, err, sizeof err), 1, "%s", err);
    int64_t yd[4];
    cr_assert_eq(nn_pool_output_shape(&c.p, 4, c.x_dims, yd), NN_OK);
    nn_tensor x, y;
    cr_assert_eq(nn_tensor_empty(ctx, NN_DTYPE_F32, 4, c.x_dims, &x), NN_OK);
    cr_assert_eq(nn_tensor_empty(ctx, NN_DTYPE_F32, 4, yd, &y), NN_OK);
    cr_assert_eq(nn_tensor_fill_ints(ctx, &x, -2, 2, 1), NN_OK);
    FILE *tmp = tmpfile();
    cr_assert_not_null(tmp);
    fflush(stderr);
    int saved = dup(2);
    dup2(fileno(tmp), 2);
    nn_status st = nn_pool_forward(ctx, &c.p, &x, &y, NULL);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    cr_assert_eq(st, NN_OK);
    char line[512] = "";
    rewind(tmp);
    cr_assert_not_null(fgets(line, sizeof line, tmp));
    fclose(tmp);
    char want[256];
    snprintf(want, sizeof want, "nnprim_verbose,pool_forward,ref,ref,-,%s,", text);
    cr_expect(strncmp(line, want, strlen(want)) == 0, "line: %s", line);
    struct nn_pool_case back;
    cr_expect_eq(nn_pool_case_parse_line(line, &back, err, sizeof err), 1, "%s: %s", line, err);
    cr_expect_eq(memcmp(&c, &back, sizeof c), 0, "the verbose line parses to another case");
    nn_tensor_free(ctx, &x);
    nn_tensor_free(ctx, &y);
    nn_ctx_destroy(ctx);
}

Test(pool_harness, reference_matches_finite_differences_and_respects_guards)
{
    nn_ctx *ref = make_ctx(NN_BACKEND_REF, 0);
    int fails = 0;
    for (size_t i = 0; i < nn_pool_standard_case_count(); i++) {
        struct nn_pool_case c;
        cr_assert_eq(nn_pool_standard_case(i, &c), 0);
        fails += nn_pool_check_reference(ref, &c, stderr);
    }
    cr_expect_eq(fails, 0, "%d failures (lines above, each with its reproducer)", fails);
    nn_ctx_destroy(ref);
}

/* The harness catches what it is for: a case whose finite differences disagree is impossible to
 * build through the public API, but guards and never-written outputs are checked on the
 * reference's own runs, so an in-bounds, complete run must report none. One case per mode on a
 * 3-D geometry, printed to a buffer: nothing but notes. */
Test(pool_harness, a_passing_case_prints_no_failure)
{
    nn_ctx *ref = make_ctx(NN_BACKEND_REF, 0);
    char buf[4096] = "";
    FILE *out = fmemopen(buf, sizeof buf, "w");
    cr_assert_not_null(out);
    struct nn_pool_case c;
    char err[256];
    cr_assert_eq(nn_pool_case_parse_line("n1c1d3h4w5 max win2x3x2 stride1x2x1 pad1 bf16", &c, err,
                                         sizeof err),
                 1, "%s", err);
    cr_expect_eq(nn_pool_check_reference(ref, &c, out), 0);
    fclose(out);
    cr_expect_null(strstr(buf, "FAIL"), "%s", buf);
    nn_ctx_destroy(ref);
}

/* The cuDNN path against the reference on every standard case. */
Test(pool_harness_gpu, cudnn_matches_reference)
{
    NN_REQUIRE_GPU();
#if !NN_HAVE_CUDNN
    cr_skip_test("this build of nnprim has no cuDNN");
#endif
    nn_ctx *ref = make_ctx(NN_BACKEND_REF, 0);
    nn_ctx *dev = make_ctx(NN_BACKEND_CUDNN, 0);
    int fails = 0;
    for (size_t i = 0; i < nn_pool_standard_case_count(); i++) {
        struct nn_pool_case c;
        cr_assert_eq(nn_pool_standard_case(i, &c), 0);
        fails += nn_pool_check_backend(dev, ref, &c, stderr);
    }
    cr_expect_eq(fails, 0, "%d failures (lines above, each with its reproducer)", fails);
    nn_ctx_destroy(dev);
    nn_ctx_destroy(ref);
}

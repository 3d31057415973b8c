/* The shared correctness harness on the layer-norm family's standard cases: the reference
 * against finite differences and with guarded outputs (runs everywhere), the GPU kernels against
 * the reference (GPU only). Also the case syntax and the verbose line. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "gpu.h"
#include "nn_config.h"
#include "tests/harness/layernorm_case.h"

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

static void parse(const char *text, struct nn_layernorm_case *c)
{
    char err[256];
    cr_assert_eq(nn_layernorm_case_parse_line(text, c, err, sizeof err), 1, "%s: %s", text, err);
}

Test(layernorm_harness, case_syntax_round_trips)
{
    size_t n = nn_layernorm_standard_case_count();
    cr_assert_eq(n, 144, "6 geometries x 6 variants x 4 dtypes");
    for (size_t i = 0; i < n; i++) {
        struct nn_layernorm_case c, back;
        char text[256];
        cr_assert_eq(nn_layernorm_standard_case(i, &c), 0, "case %zu", i);
        nn_layernorm_case_format(&c, text, sizeof text);
        parse(text, &back);
        cr_expect_eq(memcmp(&c, &back, sizeof c), 0, "'%s' does not parse back", text);
    }
    struct nn_layernorm_case c;
    parse("d2x3x4 k2 gamma eps0.001 accdx accdw bf16 grads=dw keep # comment", &c);
    cr_expect_eq(c.rank, 3);
    cr_expect_eq(c.dims[2], 4);
    cr_expect_eq(c.p.normalized_rank, 2);
    cr_expect_eq(c.p.eps, 0.001);
    cr_expect(c.gamma && !c.beta);
    cr_expect_eq(c.accumulate, NN_ACCUMULATE_DX | NN_ACCUMULATE_DW);
    cr_expect_eq(c.skip, NN_H_SKIP_DX, "dbeta is not possible without beta: not skipped");
    cr_expect_eq(c.dtype, NN_DTYPE_BF16);
    cr_expect(c.keep);
    char text[256];
    nn_layernorm_case_format(&c, text, sizeof text);
    cr_expect_str_eq(text, "d2x3x4 k2 gamma eps0.001 accdx accdw bf16 grads=dw keep");
    parse("d7", &c);
    cr_expect_eq(c.p.normalized_rank, 1);
    cr_expect_eq(c.p.eps, 1e-5);
    cr_expect_eq(c.dtype, NN_DTYPE_F32);
}

Test(layernorm_harness, case_parse_errors_name_the_token)
{
    struct nn_layernorm_case c;
    char err[256];
    cr_expect_eq(nn_layernorm_case_parse_line("# nothing", &c, err, sizeof err), 0);
    cr_expect_eq(nn_layernorm_case_parse_line("n4", &c, err, sizeof err), -1);
    cr_expect(strstr(err, "'n4'"), "%s", err);
    cr_expect_eq(nn_layernorm_case_parse_line("d4x0", &c, err, sizeof err), -1);
    cr_expect(strstr(err, "'d4x0'"), "%s", err);
    cr_expect_eq(nn_layernorm_case_parse_line("d4x3 wobble", &c, err, sizeof err), -1);
    cr_expect(strstr(err, "unknown token 'wobble'"), "%s", err);
    cr_expect_eq(nn_layernorm_case_parse_line("d4x3 k3", &c, err, sizeof err), -1);
    cr_expect(strstr(err, "k3"), "%s", err);
    cr_expect_eq(nn_layernorm_case_parse_line("d4x3 eps-1", &c, err, sizeof err), -1);
    cr_expect(strstr(err, "'eps-1'"), "%s", err);
    cr_expect_eq(nn_layernorm_case_parse_line("d4x3 grads=dq", &c, err, sizeof err), -1);
    cr_expect(strstr(err, "grads=dq"), "%s", err);
}

/* Run one call with stderr captured; the first line it printed. */
static void captured(nn_status (*call)(void *), void *arg, char *line, size_t cap)
{
    FILE *tmp = tmpfile();
    cr_assert_not_null(tmp);
    fflush(stderr);
    int saved = dup(2);
    dup2(fileno(tmp), 2);
    nn_status st = call(arg);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    cr_assert_eq(st, NN_OK, "%s", nn_last_error()->message);
    rewind(tmp);
    line[0] = 0;
    cr_assert_not_null(fgets(line, (int)cap, tmp));
    fclose(tmp);
}

struct call {
    nn_ctx *ctx;
    struct nn_layernorm_case c;
    nn_tensor x, y, g, dy, dx, dg;
    nn_layernorm_pullback *pb;
};

static nn_status fwd(void *arg)
{
    struct call *k = arg;
    return nn_layernorm_forward(k->ctx, &k->c.p, &k->x, &k->g, NULL, &k->y, &k->pb);
}

static nn_status bwd(void *arg)
{
    struct call *k = arg;
    nn_backward_options o = {.accumulate = NN_ACCUMULATE_DW};
    return nn_layernorm_backward_ex(k->ctx, &k->pb, &o, &k->dy, NULL, &k->dg, NULL);
}

/* Each call's verbose line carries it in the case syntax and parses back to the same case. */
Test(layernorm_harness, verbose_lines_are_cases)
{
    struct call k = {0};
    k.ctx = make_ctx(NN_BACKEND_REF, 1);
    int64_t xd[3] = {2, 3, 4};
    nn_tensor *t[] = {&k.x, &k.y, &k.dy, &k.dx};
    for (int i = 0; i < 4; i++) {
        cr_assert_eq(nn_tensor_empty(k.ctx, NN_DTYPE_F32, 3, xd, t[i]), NN_OK);
        cr_assert_eq(nn_tensor_fill_ints(k.ctx, t[i], -2, 2, 3 + (uint64_t)i), NN_OK);
    }
    cr_assert_eq(nn_tensor_empty(k.ctx, NN_DTYPE_F32, 2, xd + 1, &k.g), NN_OK);
    cr_assert_eq(nn_tensor_empty(k.ctx, NN_DTYPE_F32, 2, xd + 1, &k.dg), NN_OK);
    cr_assert_eq(nn_tensor_fill_ints(k.ctx, &k.g, 1, 2, 9), NN_OK);
    cr_assert_eq(nn_tensor_fill_ints(k.ctx, &k.dg, 1, 2, 9), NN_OK);
    struct {
        const char *text, *op;
        nn_status (*call)(void *);
    } calls[] = {{"d2x3x4 k2 gamma eps0.25 f32", "layernorm_forward", fwd},
                 {"d2x3x4 k2 gamma eps0.25 accdw f32 grads=dw", "layernorm_backward_ex", bwd}};
    for (int i = 0; i < 2; i++) {
        parse(calls[i].text, &k.c);
        char line[512], want[256], err[256];
        captured(calls[i].call, &k, line, sizeof line);
        snprintf(want, sizeof want, "nnprim_verbose,%s,ref,ref,-,%s,", calls[i].op, calls[i].text);
        cr_expect(strncmp(line, want, strlen(want)) == 0, "line: %s want: %s", line, want);
        struct nn_layernorm_case back;
        cr_expect_eq(nn_layernorm_case_parse_line(line, &back, err, sizeof err), 1, "%s", err);
        cr_expect_eq(memcmp(&k.c, &back, sizeof back), 0,
                     "the verbose line parses to another case");
    }
    nn_tensor *all[] = {&k.x, &k.y, &k.dy, &k.dx, &k.g, &k.dg};
    for (int i = 0; i < 6; i++)
        nn_tensor_free(k.ctx, all[i]);
    nn_ctx_destroy(k.ctx);
}

Test(layernorm_harness, reference_matches_finite_differences_and_respects_guards, .timeout = 300)
{
    nn_ctx *ref = make_ctx(NN_BACKEND_REF, 0);
    int fails = 0;
    for (size_t i = 0; i < nn_layernorm_standard_case_count(); i++) {
        struct nn_layernorm_case c;
        cr_assert_eq(nn_layernorm_standard_case(i, &c), 0);
        fails += nn_layernorm_check_reference(ref, &c, stderr);
    }
    cr_expect_eq(fails, 0, "%d failures (lines above, each with its reproducer)", fails);
    nn_ctx_destroy(ref);
}

/* The GPU kernels against the reference on every standard case and model-sized shapes
 * (a transformer's rows of 768 and 4096, many short rows for the dgamma partials). */
Test(layernorm_harness_gpu, kernels_match_reference, .timeout = 600)
{
    NN_REQUIRE_GPU();
#if !NN_HAVE_CUDNN
    cr_skip_test("this build of nnprim has no cuDNN");
#endif
    static const char *const extra[] = {
        "d8x128x768 k1 gamma beta f32", "d4x4096 k1 gamma beta bf16 accdx accdw accdb",
        "d20000x7 k1 gamma beta f64", "d3x5x9x11 k3 gamma f16", "d1x70000 k1 beta f32 grads=dx+db"};
    nn_ctx *ref = make_ctx(NN_BACKEND_REF, 0);
    nn_ctx *dev = make_ctx(NN_BACKEND_CUDNN, 0);
    int fails = 0;
    size_t n = nn_layernorm_standard_case_count(), ne = sizeof extra / sizeof extra[0];
    for (size_t i = 0; i < n + ne; i++) {
        struct nn_layernorm_case c;
        if (i < n)
            cr_assert_eq(nn_layernorm_standard_case(i, &c), 0);
        else
            parse(extra[i - n], &c);
        fails += nn_layernorm_check_backend(dev, ref, &c, stderr);
    }
    cr_expect_eq(fails, 0, "%d failures (lines above, each with its reproducer)", fails);
    nn_ctx_destroy(dev);
    nn_ctx_destroy(ref);
}

/* Two runs of one call on the GPU give the same bits (no atomics; fixed summation orders). */
Test(layernorm_harness_gpu, kernels_are_deterministic)
{
    NN_REQUIRE_GPU();
#if !NN_HAVE_CUDNN
    cr_skip_test("this build of nnprim has no cuDNN");
#endif
    nn_ctx *dev = make_ctx(NN_BACKEND_CUDNN, 0);
    nn_ctx *host = make_ctx(NN_BACKEND_REF, 0);
    int64_t xd[2] = {5000, 96};
    nn_tensor x, y, g, b, dy, dx[2], dg[2], db[2];
    cr_assert_eq(nn_tensor_empty(dev, NN_DTYPE_F32, 2, xd, &x), NN_OK);
    cr_assert_eq(nn_tensor_empty(dev, NN_DTYPE_F32, 2, xd, &y), NN_OK);
    cr_assert_eq(nn_tensor_empty(dev, NN_DTYPE_F32, 2, xd, &dy), NN_OK);
    cr_assert_eq(nn_tensor_empty(dev, NN_DTYPE_F32, 1, xd + 1, &g), NN_OK);
    cr_assert_eq(nn_tensor_empty(dev, NN_DTYPE_F32, 1, xd + 1, &b), NN_OK);
    cr_assert_eq(nn_tensor_fill_uniform(dev, &x, -2, 2, 1), NN_OK);
    cr_assert_eq(nn_tensor_fill_uniform(dev, &dy, -1, 1, 2), NN_OK);
    cr_assert_eq(nn_tensor_fill_uniform(dev, &g, 0.5, 1.5, 3), NN_OK);
    cr_assert_eq(nn_tensor_fill_uniform(dev, &b, -1, 1, 4), NN_OK);
    nn_layernorm_params p;
    nn_layernorm_params_default(&p);
    for (int r = 0; r < 2; r++) {
        cr_assert_eq(nn_tensor_empty(dev, NN_DTYPE_F32, 2, xd, &dx[r]), NN_OK);
        cr_assert_eq(nn_tensor_empty(dev, NN_DTYPE_F32, 1, xd + 1, &dg[r]), NN_OK);
        cr_assert_eq(nn_tensor_empty(dev, NN_DTYPE_F32, 1, xd + 1, &db[r]), NN_OK);
        nn_layernorm_pullback *pb = NULL;
        cr_assert_eq(nn_layernorm_forward(dev, &p, &x, &g, &b, &y, &pb), NN_OK, "%s",
                     nn_last_error()->message);
        cr_assert_eq(nn_layernorm_backward(dev, &pb, &dy, &dx[r], &dg[r], &db[r]), NN_OK, "%s",
                     nn_last_error()->message);
    }
    nn_tensor *pairs[3][2] = {{&dx[0], &dx[1]}, {&dg[0], &dg[1]}, {&db[0], &db[1]}};
    for (int i = 0; i < 3; i++) {
        nn_tensor h[2];
        for (int r = 0; r < 2; r++)
            cr_assert_eq(nn_h_to_host(dev, host, pairs[i][r], &h[r]), NN_OK);
        size_t bytes = (size_t)nn_tensor_numel(&h[0]) * sizeof(float);
        cr_expect_eq(memcmp(h[0].data, h[1].data, bytes), 0, "gradient %d differs between runs", i);
        for (int r = 0; r < 2; r++)
            nn_tensor_free(host, &h[r]);
    }
    nn_tensor *all[] = {&x, &y, &g, &b, &dy, &dx[0], &dx[1], &dg[0], &dg[1], &db[0], &db[1]};
    for (int i = 0; i < 11; i++)
        nn_tensor_free(dev, all[i]);
    nn_ctx_destroy(host);
    nn_ctx_destroy(dev);
}

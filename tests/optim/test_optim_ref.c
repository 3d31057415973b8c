/* The reference optimizer: steps of each kind against values worked out by hand (dyadic numbers,
 * so most are exact), 20 f64 steps against the plain implementation of optim_test.c, the step
 * count, set_lr, reset, the defaults and the verbose line. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "optim_test.h"

static const int64_t D2[] = {2};

static nn_optim_params params_of(nn_optim_kind kind, double lr)
{
    nn_optim_params p;
    cr_assert_eq(nn_optim_params_default(&p, kind), NN_OK);
    p.lr = lr;
    return p;
}

static nn_optim *make(nn_ctx *ctx, const nn_optim_params *p, int n, const nn_tensor *params)
{
    nn_optim *opt = NULL;
    cr_assert_eq(nn_optim_create(ctx, p, n, params, &opt), NN_OK, "%s", nn_last_error()->message);
    return opt;
}

static void step1(nn_ctx *ctx, nn_optim *opt, nn_tensor *g, const double *vals)
{
    ot_write(ctx, g, vals);
    cr_assert_eq(nn_optim_step(ctx, opt, 1, g), NN_OK, "%s", nn_last_error()->message);
}

static void expect_exact(nn_ctx *ctx, const nn_tensor *t, const double *want, const char *what)
{
    double got[16];
    ot_read(ctx, t, got);
    for (int64_t i = 0; i < nn_tensor_numel(t); i++)
        cr_expect_eq(got[i], want[i], "%s [%lld]: %.17g, expected %.17g", what, (long long)i,
                     got[i], want[i]);
}

static void expect_near(nn_ctx *ctx, const nn_tensor *t, const double *want, double tol,
                        const char *what)
{
    double got[16];
    ot_read(ctx, t, got);
    int64_t n = nn_tensor_numel(t);
    cr_expect_leq(ot_rel_err(got, want, n), tol, "%s: relative error %g (first %.17g, want %.17g)",
                  what, ot_rel_err(got, want, n), got[0], want[0]);
}

/* Runs the hand-worked SGD cases: p0 = [1, -2], g1 = [1, 2], g2 = [2, -4], g3 = 0. */
static void sgd_case(nn_dtype dt, double momentum, double dampening, int nesterov, double wd,
                     const double want[3][2])
{
    nn_ctx *ctx = ot_ctx(NN_BACKEND_REF, 0);
    nn_tensor p = ot_tensor(ctx, dt, 1, D2, (double[]){1, -2});
    nn_tensor g = ot_tensor(ctx, dt, 1, D2, (double[]){0, 0});
    nn_optim_params op = params_of(NN_OPTIM_SGD, 0.5);
    op.momentum = momentum;
    op.dampening = dampening;
    op.nesterov = nesterov;
    op.weight_decay = wd;
    nn_optim *opt = make(ctx, &op, 1, &p);
    const double g_vals[3][2] = {{1, 2}, {2, -4}, {0, 0}};
    for (int s = 0; s < 3; s++) {
        step1(ctx, opt, &g, g_vals[s]);
        char what[32];
        snprintf(what, sizeof what, "after step %d", s + 1);
        expect_exact(ctx, &p, want[s], what);
    }
    cr_assert_eq(nn_optim_free(ctx, opt), NN_OK);
    nn_tensor_free(ctx, &p);
    nn_tensor_free(ctx, &g);
    nn_ctx_destroy(ctx);
}

Test(optim_ref, sgd_plain)
{
    /* p -= 0.5 g */
    const double want[3][2] = {{0.5, -3}, {-0.5, -1}, {-0.5, -1}};
    sgd_case(NN_DTYPE_F64, 0, 0, 0, 0, want);
    sgd_case(NN_DTYPE_F32, 0, 0, 0, 0, want);
}

Test(optim_ref, sgd_momentum)
{
    /* buf = g; then 0.5 buf + g: [2.5, -3], then [1.25, -1.5]; p -= 0.5 buf */
    const double want[3][2] = {{0.5, -3}, {-0.75, -1.5}, {-1.375, -0.75}};
    sgd_case(NN_DTYPE_F64, 0.5, 0, 0, 0, want);
    sgd_case(NN_DTYPE_F32, 0.5, 0, 0, 0, want);
}

Test(optim_ref, sgd_nesterov)
{
    /* g + 0.5 buf: [1.5, 3], then [3.25, -5.5], then [0.625, -0.75] */
    const double want[3][2] = {{0.25, -3.5}, {-1.375, -0.75}, {-1.6875, -0.375}};
    sgd_case(NN_DTYPE_F64, 0.5, 0, 1, 0, want);
}

Test(optim_ref, sgd_dampening_and_weight_decay)
{
    /* g + 0.25 p: [1.25, 1.5], buf = that (no dampening at the first step), p = [0.375, -2.75];
     * g + 0.25 p = [2.09375, -4.6875], buf = 0.5 buf + 0.5 g = [1.671875, -1.59375],
     * p = [-0.4609375, -1.953125]; g = 0.25 p = [-0.115234375, -0.48828125],
     * buf = [0.7783203125, -1.041015625], p = [-0.85009765625, -1.4326171875] */
    const double want[3][2] = {
        {0.375, -2.75}, {-0.4609375, -1.953125}, {-0.85009765625, -1.4326171875}};
    sgd_case(NN_DTYPE_F64, 0.5, 0.5, 0, 0.25, want);
}

/* Adam / AdamW with beta1 0.5, beta2 0.75 (bias corrections 0.5 and 0.25 at step 1: the update
 * is lr * sign(g) when eps is 0), then a second step checked against its formula. */
static void adam_case(nn_optim_kind kind, double wd, double eps, const double *p1, const double *p2)
{
    nn_ctx *ctx = ot_ctx(NN_BACKEND_REF, 0);
    nn_tensor p = ot_tensor(ctx, NN_DTYPE_F64, 1, D2, (double[]){1, -2});
    nn_tensor g = ot_tensor(ctx, NN_DTYPE_F64, 1, D2, (double[]){1, -2});
    nn_optim_params op = params_of(kind, 0.25);
    op.beta1 = 0.5;
    op.beta2 = 0.75;
    op.eps = eps;
    op.weight_decay = wd;
    nn_optim *opt = make(ctx, &op, 1, &p);
    cr_assert_eq(nn_optim_step(ctx, opt, 1, &g), NN_OK, "%s", nn_last_error()->message);
    expect_exact(ctx, &p, p1, "after step 1");
    step1(ctx, opt, &g, (double[]){3, 0});
    expect_near(ctx, &p, p2, 1e-15, "after step 2");
    cr_assert_eq(nn_optim_free(ctx, opt), NN_OK);
    nn_tensor_free(ctx, &p);
    nn_tensor_free(ctx, &g);
    nn_ctx_destroy(ctx);
}

/* The second step by hand: g, m1, v1 the first step's gradient and moments. */
static void adam_step2(double p, double g, double m1, double v1, double *out)
{
    double m = g - (g - m1) * 0.5; /* lerp with weight 0.5: ATen's second form */
    double v = v1 * 0.75 + 0.25 * g * g;
    *out = p - (0.25 / 0.75) * m / (sqrt(v) / sqrt(1 - 0.5625));
}

Test(optim_ref, adam_first_steps)
{
    /* m = 0.5 g = [0.5, -1], v = 0.25 g^2 = [0.25, 1]; p - 0.25 sign(g) */
    double p1[2] = {0.75, -1.75}, p2[2];
    adam_step2(p1[0], 3, 0.5, 0.25, &p2[0]);
    adam_step2(p1[1], 0, -1, 1, &p2[1]);
    adam_case(NN_OPTIM_ADAM, 0, 0, p1, p2);
}

Test(optim_ref, adam_l2_weight_decay)
{
    /* g + 0.5 p = [1.5, -3]: same signs, same first update; the second gradient is
     * [3 + 0.375, 0 - 0.875] and the moments are those of [1.5, -3] */
    double p1[2] = {0.75, -1.75}, p2[2];
    adam_step2(p1[0], 3 + 0.5 * p1[0], 0.75, 0.5625, &p2[0]);
    adam_step2(p1[1], 0 + 0.5 * p1[1], -1.5, 2.25, &p2[1]);
    adam_case(NN_OPTIM_ADAM, 0.5, 0, p1, p2);
}

Test(optim_ref, adamw_decoupled_weight_decay)
{
    /* p * (1 - 0.25 * 0.5) = [0.875, -1.75] first, then - 0.25 sign(g) */
    double p1[2] = {0.625, -1.5}, p2[2];
    adam_step2(p1[0] * 0.875, 3, 0.5, 0.25, &p2[0]);
    adam_step2(p1[1] * 0.875, 0, -1, 1, &p2[1]);
    adam_case(NN_OPTIM_ADAMW, 0.5, 0, p1, p2);
}

Test(optim_ref, adam_eps)
{
    /* eps 1: denominators [2, 3] at step 1: p - 0.5 m / denom = [1 - 0.125, -2 + 1/6] */
    nn_ctx *ctx = ot_ctx(NN_BACKEND_REF, 0);
    nn_tensor p = ot_tensor(ctx, NN_DTYPE_F64, 1, D2, (double[]){1, -2});
    nn_tensor g = ot_tensor(ctx, NN_DTYPE_F64, 1, D2, (double[]){1, -2});
    nn_optim_params op = params_of(NN_OPTIM_ADAM, 0.25);
    op.beta1 = 0.5;
    op.beta2 = 0.75;
    op.eps = 1;
    nn_optim *opt = make(ctx, &op, 1, &p);
    cr_assert_eq(nn_optim_step(ctx, opt, 1, &g), NN_OK, "%s", nn_last_error()->message);
    expect_near(ctx, &p, (double[]){0.875, -2 + 1.0 / 6}, 1e-16, "after step 1");
    nn_optim_free(ctx, opt);
    nn_tensor_free(ctx, &p);
    nn_tensor_free(ctx, &g);
    nn_ctx_destroy(ctx);
}

/* Two tensors whose gradients [3] and [4] have norm 5; SGD with lr 1. */
static void clip_case(double max_norm, int expect_clipped)
{
    nn_ctx *ctx = ot_ctx(NN_BACKEND_REF, 0);
    static const int64_t D1[] = {1};
    nn_tensor p[2] = {ot_tensor(ctx, NN_DTYPE_F64, 1, D1, (double[]){10}),
                      ot_tensor(ctx, NN_DTYPE_F64, 1, D1, (double[]){20})};
    nn_tensor g[2] = {ot_tensor(ctx, NN_DTYPE_F64, 1, D1, (double[]){3}),
                      ot_tensor(ctx, NN_DTYPE_F64, 1, D1, (double[]){-4})};
    nn_optim_params op = params_of(NN_OPTIM_SGD, 1);
    op.max_grad_norm = max_norm;
    nn_optim *opt = make(ctx, &op, 2, p);
    cr_assert_eq(nn_optim_step(ctx, opt, 2, g), NN_OK, "%s", nn_last_error()->message);
    double c = expect_clipped ? max_norm / (5 + 1e-6) : 1;
    expect_near(ctx, &p[0], (double[]){10 - 3 * c}, 1e-16, "p[0]");
    expect_near(ctx, &p[1], (double[]){20 + 4 * c}, 1e-16, "p[1]");
    expect_exact(ctx, &g[0], (double[]){3}, "the caller's g[0] (not scaled)");
    expect_exact(ctx, &g[1], (double[]){-4}, "the caller's g[1] (not scaled)");
    nn_optim_free(ctx, opt);
    for (int i = 0; i < 2; i++) {
        nn_tensor_free(ctx, &p[i]);
        nn_tensor_free(ctx, &g[i]);
    }
    nn_ctx_destroy(ctx);
}

Test(optim_ref, clipping_by_global_norm)
{
    clip_case(1, 1);
    clip_case(4.5, 1);
    clip_case(5, 1); /* 5 / (5 + 1e-6) < 1: clipped, by a hair */
}

Test(optim_ref, clipping_not_needed)
{
    clip_case(10, 0);
    clip_case(5.00001, 0);
}

Test(optim_ref, several_tensors_of_several_ranks)
{
    nn_ctx *ctx = ot_ctx(NN_BACKEND_REF, 0);
    static const int64_t da[] = {2, 3}, db[] = {1}, dc[] = {2, 1, 2};
    double pa[6] = {1, 2, 3, 4, 5, 6}, pb[1] = {-1}, pc[4] = {0.5, 0.25, -0.5, 8};
    double ga[6] = {1, -1, 2, -2, 4, -4}, gb[1] = {8}, gc[4] = {-0.5, 0.5, 1, 0};
    nn_tensor p[3] = {ot_tensor(ctx, NN_DTYPE_F32, 2, da, pa),
                      ot_tensor(ctx, NN_DTYPE_F32, 1, db, pb),
                      ot_tensor(ctx, NN_DTYPE_F32, 3, dc, pc)};
    nn_tensor g[3] = {ot_tensor(ctx, NN_DTYPE_F32, 2, da, ga),
                      ot_tensor(ctx, NN_DTYPE_F32, 1, db, gb),
                      ot_tensor(ctx, NN_DTYPE_F32, 3, dc, gc)};
    nn_optim_params op = params_of(NN_OPTIM_SGD, 0.25);
    nn_optim *opt = make(ctx, &op, 3, p);
    cr_assert_eq(nn_optim_step(ctx, opt, 3, g), NN_OK, "%s", nn_last_error()->message);
    double wa[6], wb[1], wc[4];
    for (int i = 0; i < 6; i++)
        wa[i] = pa[i] - 0.25 * ga[i];
    wb[0] = pb[0] - 0.25 * gb[0];
    for (int i = 0; i < 4; i++)
        wc[i] = pc[i] - 0.25 * gc[i];
    expect_exact(ctx, &p[0], wa, "p[0]");
    expect_exact(ctx, &p[1], wb, "p[1]");
    expect_exact(ctx, &p[2], wc, "p[2]");
    nn_optim_free(ctx, opt);
    for (int i = 0; i < 3; i++) {
        nn_tensor_free(ctx, &p[i]);
        nn_tensor_free(ctx, &g[i]);
    }
    nn_ctx_destroy(ctx);
}

/* f32 parameters are computed in double and rounded once to f32 when stored. */
Test(optim_ref, f32_is_rounded_once)
{
    nn_ctx *ctx = ot_ctx(NN_BACKEND_REF, 0);
    nn_tensor p = ot_tensor(ctx, NN_DTYPE_F32, 1, D2, (double[]){1, 3});
    nn_tensor g = ot_tensor(ctx, NN_DTYPE_F32, 1, D2, (double[]){ldexp(1, -20), 1.0 / 3});
    nn_optim_params op = params_of(NN_OPTIM_SGD, 1e-3);
    nn_optim *opt = make(ctx, &op, 1, &p);
    cr_assert_eq(nn_optim_step(ctx, opt, 1, &g), NN_OK, "%s", nn_last_error()->message);
    double gf = (float)(1.0 / 3);
    expect_exact(ctx, &p, (double[]){(float)(1 - 1e-3 * ldexp(1, -20)), (float)(3 - 1e-3 * gf)},
                 "p");
    nn_optim_free(ctx, opt);
    nn_tensor_free(ctx, &p);
    nn_tensor_free(ctx, &g);
    nn_ctx_destroy(ctx);
}

/* ---------------------------------------------------------------------------------------------
 * 20 steps against the plain implementation
 */

static void against_plain(const nn_optim_params *op, const char *what)
{
    enum { N = 3, STEPS = 20 };
    static const int64_t dims[N][2] = {{7, 5}, {1, 1}, {3, 17}}, count[N] = {35, 1, 51};
    nn_ctx *ctx = ot_ctx(NN_BACKEND_REF, 0);
    double *mine[N], *grads[N];
    nn_tensor p[N], g[N];
    for (int i = 0; i < N; i++) {
        mine[i] = malloc((size_t)count[i] * sizeof(double));
        grads[i] = malloc((size_t)count[i] * sizeof(double));
        ot_uniform(100 + (uint64_t)i, mine[i], count[i]);
        p[i] = ot_tensor(ctx, NN_DTYPE_F64, 2, dims[i], mine[i]);
        g[i] = ot_tensor(ctx, NN_DTYPE_F64, 2, dims[i], mine[i]);
    }
    struct ot_plain plain;
    ot_plain_init(&plain, op, N, count, mine);
    nn_optim *opt = make(ctx, op, N, p);
    for (int s = 0; s < STEPS; s++) {
        for (int i = 0; i < N; i++) {
            ot_uniform(1000 * (uint64_t)s + (uint64_t)i, grads[i], count[i]);
            for (int64_t k = 0; k < count[i]; k++)
                grads[i][k] *= 3; /* large enough that clipping at 2 acts */
            ot_write(ctx, &g[i], grads[i]);
        }
        cr_assert_eq(nn_optim_step(ctx, opt, N, g), NN_OK, "%s", nn_last_error()->message);
        ot_plain_step(&plain, grads);
        for (int i = 0; i < N; i++) {
            double got[51];
            ot_read(ctx, &p[i], got);
            double e = ot_rel_err(got, mine[i], count[i]);
            cr_assert_leq(e, 1e-15, "%s: step %d, tensor %d: relative error %g", what, s + 1, i, e);
        }
    }
    int64_t steps = -1;
    cr_assert_eq(nn_optim_get_step(ctx, opt, &steps), NN_OK);
    cr_expect_eq(steps, STEPS);
    ot_plain_free(&plain);
    nn_optim_free(ctx, opt);
    for (int i = 0; i < N; i++) {
        nn_tensor_free(ctx, &p[i]);
        nn_tensor_free(ctx, &g[i]);
        free(mine[i]);
        free(grads[i]);
    }
    nn_ctx_destroy(ctx);
}

Test(optim_ref, twenty_steps_sgd)
{
    nn_optim_params op = params_of(NN_OPTIM_SGD, 0.05);
    against_plain(&op, "sgd");
    op.momentum = 0.9;
    op.weight_decay = 1e-2;
    op.nesterov = 1;
    against_plain(&op, "sgd nesterov wd");
    op.nesterov = 0;
    op.dampening = 0.3;
    op.max_grad_norm = 2;
    against_plain(&op, "sgd dampening clip");
}

Test(optim_ref, twenty_steps_adam)
{
    nn_optim_params op = params_of(NN_OPTIM_ADAM, 0.01);
    against_plain(&op, "adam");
    op.weight_decay = 0.1;
    op.max_grad_norm = 2;
    against_plain(&op, "adam wd clip");
    op.beta1 = 0.3; /* lerp's other form */
    op.beta2 = 0.5;
    op.eps = 1e-3;
    against_plain(&op, "adam beta1 0.3");
}

Test(optim_ref, twenty_steps_adamw)
{
    nn_optim_params op = params_of(NN_OPTIM_ADAMW, 0.01);
    against_plain(&op, "adamw");
    op.max_grad_norm = 2;
    op.weight_decay = 0.5;
    against_plain(&op, "adamw wd clip");
}

/* ---------------------------------------------------------------------------------------------
 * Step count, lr, reset, defaults
 */

Test(optim_ref, step_count_set_lr_and_reset)
{
    nn_ctx *ctx = ot_ctx(NN_BACKEND_REF, 0);
    nn_tensor p = ot_tensor(ctx, NN_DTYPE_F64, 1, D2, (double[]){1, -2});
    nn_tensor g = ot_tensor(ctx, NN_DTYPE_F64, 1, D2, (double[]){1, 2});
    nn_optim_params op = params_of(NN_OPTIM_SGD, 0.5);
    op.momentum = 0.5;
    nn_optim *opt = make(ctx, &op, 1, &p);
    int64_t steps = -1;
    cr_assert_eq(nn_optim_get_step(ctx, opt, &steps), NN_OK);
    cr_expect_eq(steps, 0);
    cr_assert_eq(nn_optim_step(ctx, opt, 1, &g), NN_OK);
    cr_assert_eq(nn_optim_get_step(ctx, opt, &steps), NN_OK);
    cr_expect_eq(steps, 1);
    expect_exact(ctx, &p, (double[]){0.5, -3}, "step 1");
    cr_assert_eq(nn_optim_set_lr(ctx, opt, 0.25), NN_OK, "%s", nn_last_error()->message);
    /* buf = 0.5 [1, 2] + [1, 2] = [1.5, 3]; p -= 0.25 buf */
    cr_assert_eq(nn_optim_step(ctx, opt, 1, &g), NN_OK);
    expect_exact(ctx, &p, (double[]){0.125, -3.75}, "step 2 at the new lr");
    cr_assert_eq(nn_optim_reset(ctx, opt), NN_OK);
    cr_assert_eq(nn_optim_get_step(ctx, opt, &steps), NN_OK);
    cr_expect_eq(steps, 0);
    /* a first step again: buf = g, at the lr last set */
    cr_assert_eq(nn_optim_step(ctx, opt, 1, &g), NN_OK);
    expect_exact(ctx, &p, (double[]){-0.125, -4.25}, "after reset");
    cr_assert_eq(nn_optim_free(ctx, opt), NN_OK);
    nn_tensor_free(ctx, &p);
    nn_tensor_free(ctx, &g);
    nn_ctx_destroy(ctx);
}

Test(optim_ref, pytorch_defaults)
{
    nn_optim_params p;
    memset(&p, 0x5a, sizeof p);
    cr_assert_eq(nn_optim_params_default(&p, NN_OPTIM_ADAMW), NN_OK);
    cr_expect_eq(p.kind, NN_OPTIM_ADAMW);
    cr_expect_eq(p.lr, 1e-3);
    cr_expect_eq(p.beta1, 0.9);
    cr_expect_eq(p.beta2, 0.999);
    cr_expect_eq(p.eps, 1e-8);
    cr_expect_eq(p.weight_decay, 1e-2);
    cr_expect_eq(p.max_grad_norm, 0);
    for (int i = 0; i < 4; i++)
        cr_expect_eq(p.reserved[i], 0);
    cr_assert_eq(nn_optim_params_default(&p, NN_OPTIM_ADAM), NN_OK);
    cr_expect_eq(p.weight_decay, 0);
    cr_assert_eq(nn_optim_params_default(&p, NN_OPTIM_SGD), NN_OK);
    cr_expect_eq(p.lr, 1e-3);
    cr_expect_eq(p.momentum, 0);
    cr_expect_eq(p.dampening, 0);
    cr_expect_eq(p.nesterov, 0);
}

static char lines[8][512];
static int nlines;

static void capture(nn_log_kind kind, const char *line, void *user)
{
    (void)kind;
    (void)user;
    if (nlines < 8) snprintf(lines[nlines++], sizeof lines[0], "%s", line);
}

Test(optim_ref, verbose_line)
{
    nn_set_log_callback(capture, NULL);
    nn_ctx *ctx = ot_ctx(NN_BACKEND_REF, 1);
    static const int64_t d[] = {3, 4};
    double z[12] = {0};
    nn_tensor p[2] = {ot_tensor(ctx, NN_DTYPE_F32, 2, d, z),
                      ot_tensor(ctx, NN_DTYPE_F32, 1, D2, z)};
    nn_tensor g[2] = {ot_tensor(ctx, NN_DTYPE_F32, 2, d, z),
                      ot_tensor(ctx, NN_DTYPE_F32, 1, D2, z)};
    nn_optim_params op = params_of(NN_OPTIM_ADAMW, 0.001);
    op.max_grad_norm = 1;
    nn_optim *opt = make(ctx, &op, 2, p);
    nlines = 0;
    cr_assert_eq(nn_optim_step(ctx, opt, 2, g), NN_OK);
    cr_assert_eq(nn_optim_step(ctx, opt, 1, g), NN_E_INVALID_ARG);
    nn_set_log_callback(NULL, NULL);
    cr_assert_eq(nlines, 2, "one line per call");
    const char *want = "nnprim_verbose,optim_step,ref,ref,-,adamw t2n14 f32 lr=0.001 beta1=0.9 "
                       "beta2=0.999 eps=1e-08 wd=0.01 clip=1,host_ms=";
    cr_expect(strncmp(lines[0], want, strlen(want)) == 0, "got '%s', want '%s...'", lines[0], want);
    const char *failed = "nnprim_verbose,optim_step,ref,-,-,-,status=NN_E_INVALID_ARG";
    cr_expect(strncmp(lines[1], failed, strlen(failed)) == 0, "got '%s'", lines[1]);
    nn_optim_free(ctx, opt);
    for (int i = 0; i < 2; i++) {
        nn_tensor_free(ctx, &p[i]);
        nn_tensor_free(ctx, &g[i]);
    }
    nn_ctx_destroy(ctx);
}

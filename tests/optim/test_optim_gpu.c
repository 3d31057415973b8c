/* The GPU optimizer against the reference on the same numbers (f64 within 1e-13 of the largest
 * value, f32 within 4 ulps), over one launch and over several (more than 64 tensors), with and
 * without clipping; guard elements around every parameter and gradient; the step count; set_lr;
 * reset; and steps captured into a CUDA graph and replayed, which must advance the count and read
 * the lr at every replay. Every test skips without a GPU. */
#include <criterion/criterion.h>
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gpu.h"
#include "nn_config.h"
#include "optim_test.h"

#if NN_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

/* One side of a comparison: a context, its optimizer, n parameters and gradients. */
struct side {
    nn_ctx *ctx;
    nn_optim *opt;
    int n;
    nn_tensor p[160], g[160];
};

struct problem {
    nn_dtype dt;
    int n;
    int64_t count[160];
};

/* n tensors: sizes 1..61 and, as the first, a large one (several blocks, several strides). */
static void problem_of(struct problem *pr, nn_dtype dt, int n, int64_t large)
{
    pr->dt = dt;
    pr->n = n;
    for (int i = 0; i < n; i++)
        pr->count[i] = i == 0 ? large : 1 + (i * 7) % 61;
}

static void side_init(struct side *s, nn_ctx *ctx, const struct problem *pr,
                      const nn_optim_params *op)
{
    memset(s, 0, sizeof *s);
    s->ctx = ctx;
    s->n = pr->n;
    for (int i = 0; i < pr->n; i++) {
        double *v = malloc((size_t)pr->count[i] * sizeof *v);
        ot_uniform(7 + (uint64_t)i, v, pr->count[i]);
        s->p[i] = ot_tensor(ctx, pr->dt, 1, &pr->count[i], v);
        s->g[i] = ot_tensor(ctx, pr->dt, 1, &pr->count[i], v);
        free(v);
    }
    cr_assert_eq(nn_optim_create(ctx, op, pr->n, s->p, &s->opt), NN_OK, "%s",
                 nn_last_error()->message);
}

static void side_free(struct side *s)
{
    cr_expect_eq(nn_optim_free(s->ctx, s->opt), NN_OK, "%s", nn_last_error()->message);
    for (int i = 0; i < s->n; i++) {
        nn_tensor_free(s->ctx, &s->p[i]);
        nn_tensor_free(s->ctx, &s->g[i]);
    }
}

/* The gradients of step k, written to both sides (scaled so that clipping at 1 acts). */
static void set_grads(struct side *const *sides, int nsides, const struct problem *pr, int k)
{
    for (int i = 0; i < pr->n; i++) {
        double *v = malloc((size_t)pr->count[i] * sizeof *v);
        ot_uniform(1000 * (uint64_t)k + (uint64_t)i, v, pr->count[i]);
        for (int64_t e = 0; e < pr->count[i]; e++)
            v[e] *= 0.5;
        for (int s = 0; s < nsides; s++)
            ot_write(sides[s]->ctx, &sides[s]->g[i], v);
        free(v);
    }
}

static double f32_ulp(double x)
{
    float a = fabsf((float)x);
    return (double)(nextafterf(a, INFINITY) - a);
}

/* The GPU side's parameters against the reference side's. */
static void expect_same(const struct side *gpu, const struct side *ref, const struct problem *pr,
                        const char *what, int step)
{
    for (int i = 0; i < pr->n; i++) {
        int64_t c = pr->count[i];
        double *a = malloc((size_t)c * sizeof *a), *b = malloc((size_t)c * sizeof *b);
        ot_read(gpu->ctx, &gpu->p[i], a);
        ot_read(ref->ctx, &ref->p[i], b);
        if (pr->dt == NN_DTYPE_F64) {
            /* CUDA's pow() and the host's differ in the last bit (the bias corrections), and
             * Adam divides by sqrt(v) + eps, which carries that further where v is small:
             * 1.4e-14 was seen for beta1 0.3 */
            double e = ot_rel_err(a, b, c);
            cr_assert_leq(e, 1e-13, "%s, step %d, params[%d]: relative error %g", what, step, i, e);
        } else {
            for (int64_t k = 0; k < c; k++)
                cr_assert_leq(fabs(a[k] - b[k]), 4 * f32_ulp(fmax(fabs(a[k]), fabs(b[k]))),
                              "%s, step %d, params[%d][%lld]: %.9g, the reference %.9g", what, step,
                              i, (long long)k, a[k], b[k]);
        }
        free(a);
        free(b);
    }
}

static void expect_steps(nn_ctx *ctx, nn_optim *opt, int64_t want, const char *what)
{
    int64_t got = -1;
    cr_assert_eq(nn_optim_get_step(ctx, opt, &got), NN_OK, "%s", nn_last_error()->message);
    cr_expect_eq(got, want, "%s: step count %lld, expected %lld", what, (long long)got,
                 (long long)want);
}

static void against_reference(const nn_optim_params *op, nn_dtype dt, int n, int64_t large,
                              const char *what)
{
    struct problem pr;
    problem_of(&pr, dt, n, large);
    nn_ctx *cg = ot_ctx(NN_BACKEND_CUDNN, 0), *cref = ot_ctx(NN_BACKEND_REF, 0);
    static struct side gpu, ref;
    side_init(&gpu, cg, &pr, op);
    side_init(&ref, cref, &pr, op);
    struct side *both[] = {&gpu, &ref};
    for (int k = 0; k < 6; k++) {
        set_grads(both, 2, &pr, k);
        cr_assert_eq(nn_optim_step(cg, gpu.opt, n, gpu.g), NN_OK, "%s", nn_last_error()->message);
        cr_assert_eq(nn_optim_step(cref, ref.opt, n, ref.g), NN_OK, "%s", nn_last_error()->message);
        expect_same(&gpu, &ref, &pr, what, k + 1);
    }
    expect_steps(cg, gpu.opt, 6, what);
    side_free(&gpu);
    side_free(&ref);
    nn_ctx_destroy(cg);
    nn_ctx_destroy(cref);
}

static nn_optim_params kind_params(nn_optim_kind kind, double lr)
{
    nn_optim_params p;
    cr_assert_eq(nn_optim_params_default(&p, kind), NN_OK);
    p.lr = lr;
    return p;
}

/* Each configuration in f64 and f32, in one launch (3 tensors) and in three (130 tensors). */
static void all_shapes(const nn_optim_params *op, const char *what)
{
    nn_dtype dts[] = {NN_DTYPE_F64, NN_DTYPE_F32};
    for (int d = 0; d < 2; d++) {
        against_reference(op, dts[d], 3, 300001, what);
        against_reference(op, dts[d], 130, 5000, what);
    }
}

Test(optim_gpu, sgd_matches_reference, .timeout = 300)
{
    NN_REQUIRE_GPU();
    nn_optim_params op = kind_params(NN_OPTIM_SGD, 0.1);
    all_shapes(&op, "sgd");
    op.momentum = 0.9;
    op.nesterov = 1;
    op.weight_decay = 1e-2;
    all_shapes(&op, "sgd nesterov wd");
    op.nesterov = 0;
    op.dampening = 0.25;
    op.max_grad_norm = 1;
    all_shapes(&op, "sgd dampening clip");
}

Test(optim_gpu, adam_matches_reference, .timeout = 300)
{
    NN_REQUIRE_GPU();
    nn_optim_params op = kind_params(NN_OPTIM_ADAM, 0.01);
    all_shapes(&op, "adam");
    op.weight_decay = 0.1;
    op.max_grad_norm = 1;
    all_shapes(&op, "adam wd clip");
    op.beta1 = 0.3;
    all_shapes(&op, "adam beta1 0.3");
}

Test(optim_gpu, adamw_matches_reference, .timeout = 300)
{
    NN_REQUIRE_GPU();
    nn_optim_params op = kind_params(NN_OPTIM_ADAMW, 0.01);
    all_shapes(&op, "adamw");
    op.max_grad_norm = 1;
    all_shapes(&op, "adamw clip");
}

#if NN_HAVE_CUDA

#define GUARD  37
#define SENTRY 12345.0

/* Every parameter and gradient a view into a buffer with GUARD elements on each side, which hold
 * SENTRY; after the steps the guards still do, the gradients are unchanged, and the parameters
 * are the reference's. */
Test(optim_gpu, steps_touch_nothing_outside_the_parameters)
{
    NN_REQUIRE_GPU();
    struct problem pr;
    problem_of(&pr, NN_DTYPE_F32, 70, 4099);
    nn_ctx *cg = ot_ctx(NN_BACKEND_CUDNN, 0), *cref = ot_ctx(NN_BACKEND_REF, 0);
    nn_optim_params op = kind_params(NN_OPTIM_ADAMW, 0.01);
    op.max_grad_norm = 1;
    static struct side ref;
    side_init(&ref, cref, &pr, &op);
    static nn_tensor pbuf[70], gbuf[70], p[70], g[70];
    for (int i = 0; i < pr.n; i++) {
        int64_t whole = pr.count[i] + 2 * GUARD;
        double *v = malloc((size_t)pr.count[i] * sizeof *v);
        nn_tensor *bufs[2] = {&pbuf[i], &gbuf[i]}, *views[2] = {&p[i], &g[i]};
        for (int j = 0; j < 2; j++) {
            cr_assert_eq(nn_tensor_empty(cg, pr.dt, 1, &whole, bufs[j]), NN_OK);
            cr_assert_eq(nn_tensor_fill_constant(cg, bufs[j], SENTRY), NN_OK);
            *views[j] = *bufs[j];
            views[j]->dims[0] = pr.count[i];
            views[j]->data = (float *)bufs[j]->data + GUARD;
            ot_read(cref, &(j ? ref.g : ref.p)[i], v);
            ot_write(cg, views[j], v);
        }
        free(v);
    }
    nn_optim *opt = NULL;
    cr_assert_eq(nn_optim_create(cg, &op, pr.n, p, &opt), NN_OK, "%s", nn_last_error()->message);
    for (int k = 0; k < 3; k++) {
        cr_assert_eq(nn_optim_step(cg, opt, pr.n, g), NN_OK, "%s", nn_last_error()->message);
        cr_assert_eq(nn_optim_step(cref, ref.opt, pr.n, ref.g), NN_OK);
    }
    for (int i = 0; i < pr.n; i++) {
        int64_t whole = pr.count[i] + 2 * GUARD;
        double *pv = malloc((size_t)whole * sizeof *pv), *gv = malloc((size_t)whole * sizeof *gv);
        double *want = malloc((size_t)pr.count[i] * sizeof *want);
        ot_read(cg, &pbuf[i], pv);
        ot_read(cg, &gbuf[i], gv);
        for (int64_t k = 0; k < whole; k++) {
            if (k >= GUARD && k < GUARD + pr.count[i]) continue;
            cr_assert_eq(pv[k], SENTRY, "params[%d]'s guard [%lld] written: %g", i, (long long)k,
                         pv[k]);
            cr_assert_eq(gv[k], SENTRY, "grads[%d]'s guard [%lld] written: %g", i, (long long)k,
                         gv[k]);
        }
        ot_read(cref, &ref.g[i], want);
        for (int64_t k = 0; k < pr.count[i]; k++)
            cr_assert_eq(gv[GUARD + k], want[k], "grads[%d][%lld] changed", i, (long long)k);
        ot_read(cref, &ref.p[i], want);
        for (int64_t k = 0; k < pr.count[i]; k++)
            cr_assert_leq(fabs(pv[GUARD + k] - want[k]), 4 * f32_ulp(want[k]),
                          "params[%d][%lld]: %.9g, the reference %.9g", i, (long long)k,
                          pv[GUARD + k], want[k]);
        free(pv);
        free(gv);
        free(want);
    }
    cr_expect_eq(nn_optim_free(cg, opt), NN_OK);
    side_free(&ref);
    for (int i = 0; i < pr.n; i++) {
        nn_tensor_free(cg, &pbuf[i]);
        nn_tensor_free(cg, &gbuf[i]);
    }
    nn_ctx_destroy(cg);
    nn_ctx_destroy(cref);
}

Test(optim_gpu, step_count_advances_once_per_call)
{
    NN_REQUIRE_GPU();
    struct problem pr;
    problem_of(&pr, NN_DTYPE_F32, 150, 100000); /* three launches of each kernel */
    nn_ctx *cg = ot_ctx(NN_BACKEND_CUDNN, 0);
    nn_optim_params op = kind_params(NN_OPTIM_ADAM, 0.01);
    op.max_grad_norm = 0.5;
    static struct side gpu;
    side_init(&gpu, cg, &pr, &op);
    expect_steps(cg, gpu.opt, 0, "new");
    for (int k = 1; k <= 25; k++)
        cr_assert_eq(nn_optim_step(cg, gpu.opt, pr.n, gpu.g), NN_OK, "%s",
                     nn_last_error()->message);
    expect_steps(cg, gpu.opt, 25, "after 25 steps");
    cr_assert_eq(nn_optim_reset(cg, gpu.opt), NN_OK);
    expect_steps(cg, gpu.opt, 0, "after reset");
    cr_assert_eq(nn_optim_step(cg, gpu.opt, pr.n, gpu.g), NN_OK);
    expect_steps(cg, gpu.opt, 1, "one more");
    side_free(&gpu);
    nn_ctx_destroy(cg);
}

/* set_lr between steps, and reset, as on the reference. */
Test(optim_gpu, set_lr_and_reset_take_effect_on_the_next_step)
{
    NN_REQUIRE_GPU();
    struct problem pr;
    problem_of(&pr, NN_DTYPE_F64, 4, 1000);
    nn_ctx *cg = ot_ctx(NN_BACKEND_CUDNN, 0), *cref = ot_ctx(NN_BACKEND_REF, 0);
    nn_optim_params op = kind_params(NN_OPTIM_SGD, 0.1);
    op.momentum = 0.9;
    static struct side gpu, ref;
    side_init(&gpu, cg, &pr, &op);
    side_init(&ref, cref, &pr, &op);
    struct side *both[] = {&gpu, &ref};
    const double lrs[] = {0.1, 0.5, 0.5, 0.01, 0};
    for (int k = 0; k < 5; k++) {
        if (k == 3) {
            cr_assert_eq(nn_optim_reset(cg, gpu.opt), NN_OK);
            cr_assert_eq(nn_optim_reset(cref, ref.opt), NN_OK);
        }
        cr_assert_eq(nn_optim_set_lr(cg, gpu.opt, lrs[k]), NN_OK, "%s", nn_last_error()->message);
        cr_assert_eq(nn_optim_set_lr(cref, ref.opt, lrs[k]), NN_OK);
        set_grads(both, 2, &pr, k);
        cr_assert_eq(nn_optim_step(cg, gpu.opt, pr.n, gpu.g), NN_OK);
        cr_assert_eq(nn_optim_step(cref, ref.opt, pr.n, ref.g), NN_OK);
        expect_same(&gpu, &ref, &pr, "set_lr", k + 1);
    }
    side_free(&gpu);
    side_free(&ref);
    nn_ctx_destroy(cg);
    nn_ctx_destroy(cref);
}

static cudaStream_t new_stream(void)
{
    cudaStream_t s;
    cr_assert_eq(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
    return s;
}

static nn_ctx *ctx_on(cudaStream_t s)
{
    nn_settings st;
    cr_assert_eq(nn_settings_from_env(&st), NN_OK);
    st.backend = NN_BACKEND_CUDNN;
    st.stream = s;
    st.plan_cache_file = NULL;
    nn_ctx *ctx = NULL;
    cr_assert_eq(nn_ctx_create(&ctx, &st), NN_OK, "%s", nn_last_error()->message);
    return ctx;
}

/* The first step captured into a graph and replayed: every replay is a step of its own (SGD's
 * first-step buffer once, Adam's bias corrections at each count), with the gradients the buffers
 * hold then and the lr last set, as the reference's eager steps. */
static void replayed(const nn_optim_params *op, int n, const char *what)
{
    struct problem pr;
    problem_of(&pr, NN_DTYPE_F64, n, 20000);
    cudaStream_t s = new_stream();
    nn_ctx *cg = ctx_on(s), *cref = ot_ctx(NN_BACKEND_REF, 0);
    static struct side gpu, ref;
    side_init(&gpu, cg, &pr, op);
    side_init(&ref, cref, &pr, op);
    struct side *both[] = {&gpu, &ref};
    cr_assert_eq(nn_ctx_synchronize(cg), NN_OK);
    cudaGraph_t graph = NULL;
    cr_assert_eq(cudaStreamBeginCapture(s, cudaStreamCaptureModeRelaxed), cudaSuccess);
    nn_status st = nn_optim_step(cg, gpu.opt, n, gpu.g);
    nn_status lr_st = nn_optim_set_lr(cg, gpu.opt, 1);
    int64_t count = -1;
    nn_status count_st = nn_optim_get_step(cg, gpu.opt, &count);
    cr_assert_eq(cudaStreamEndCapture(s, &graph), cudaSuccess);
    cr_assert_eq(st, NN_OK, "the captured step: %s", nn_last_error()->message);
    cr_expect_eq(lr_st, NN_E_UNSUPPORTED, "set_lr during a capture is refused");
    cr_expect_eq(count_st, NN_E_UNSUPPORTED, "get_step during a capture is refused");
    cr_expect_eq(count, -1);
    cudaGraphExec_t exec = NULL;
    cr_assert_eq(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
    expect_steps(cg, gpu.opt, 0, "captured, not run");
    for (int k = 0; k < 8; k++) {
        if (k == 5) {
            cr_assert_eq(nn_optim_set_lr(cg, gpu.opt, op->lr * 0.25), NN_OK, "%s",
                         nn_last_error()->message);
            cr_assert_eq(nn_optim_set_lr(cref, ref.opt, op->lr * 0.25), NN_OK);
        }
        set_grads(both, 2, &pr, k);
        cr_assert_eq(cudaGraphLaunch(exec, s), cudaSuccess);
        cr_assert_eq(nn_optim_step(cref, ref.opt, n, ref.g), NN_OK);
        expect_same(&gpu, &ref, &pr, what, k + 1);
    }
    expect_steps(cg, gpu.opt, 8, what);
    cudaGraphExecDestroy(exec);
    cudaGraphDestroy(graph);
    side_free(&gpu);
    side_free(&ref);
    nn_ctx_destroy(cg);
    nn_ctx_destroy(cref);
    cudaStreamDestroy(s);
}

Test(optim_gpu, captured_steps_advance_at_every_replay, .timeout = 300)
{
    NN_REQUIRE_GPU();
    nn_optim_params op = kind_params(NN_OPTIM_SGD, 0.1);
    op.momentum = 0.9;
    replayed(&op, 3, "sgd momentum replayed");
    op = kind_params(NN_OPTIM_ADAM, 0.01);
    op.max_grad_norm = 1;
    replayed(&op, 3, "adam clip replayed");
    op = kind_params(NN_OPTIM_ADAMW, 0.01);
    op.max_grad_norm = 1;
    replayed(&op, 140, "adamw clip replayed, three launches each");
}

/* A context that moves to another stream: the optimizer's work follows. */
Test(optim_gpu, steps_follow_a_stream_switch)
{
    NN_REQUIRE_GPU();
    struct problem pr;
    problem_of(&pr, NN_DTYPE_F64, 2, 100000);
    cudaStream_t s1 = new_stream(), s2 = new_stream();
    nn_ctx *cg = ctx_on(s1), *cref = ot_ctx(NN_BACKEND_REF, 0);
    nn_optim_params op = kind_params(NN_OPTIM_ADAM, 0.01);
    static struct side gpu, ref;
    side_init(&gpu, cg, &pr, &op);
    side_init(&ref, cref, &pr, &op);
    struct side *both[] = {&gpu, &ref};
    for (int k = 0; k < 4; k++) {
        set_grads(both, 2, &pr, k);
        cr_assert_eq(nn_ctx_set_stream(cg, k % 2 ? s1 : s2), NN_OK, "%s", nn_last_error()->message);
        cr_assert_eq(nn_optim_step(cg, gpu.opt, pr.n, gpu.g), NN_OK);
        cr_assert_eq(nn_optim_step(cref, ref.opt, pr.n, ref.g), NN_OK);
        expect_same(&gpu, &ref, &pr, "stream switch", k + 1);
    }
    side_free(&gpu);
    side_free(&ref);
    nn_ctx_destroy(cg);
    nn_ctx_destroy(cref);
    cudaStreamDestroy(s1);
    cudaStreamDestroy(s2);
}

#endif

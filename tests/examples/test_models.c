/* The examples' models (examples/models.c): the SGD update through nn_linear is v -= lr m with
 * m = mu m + g exactly as written, the language model learns, and on the GPU both models follow
 * the reference backend step by step from the same start. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "../../examples/models.h"
#include "fixture.h"
#include "gpu.h"

static nn_ctx *make_ctx(nn_backend backend, nn_math_mode math)
{
    nn_settings s;
    cr_assert_eq(nn_settings_from_env(&s), NN_OK);
    s.backend = backend;
    s.math_mode = math;
    nn_ctx *ctx = NULL;
    cr_assert_eq(nn_ctx_create(&ctx, &s), NN_OK, "%s", nn_last_error()->message);
    return ctx;
}

#define OK(call) cr_assert_eq((call), NN_OK, "%s: %s", #call, nn_last_error()->message)

/* A host copy of t (packed f32), to be freed. */
static float *read_back(nn_ctx *ctx, nn_ctx *host, const nn_tensor *t)
{
    float *h = malloc((size_t)nn_tensor_numel(t) * sizeof *h);
    cr_assert_not_null(h);
    nn_tensor v;
    OK(nn_tensor_wrap(host, h, NN_DTYPE_F32, t->rank, t->dims, NULL, &v));
    OK(nn_tensor_copy(ctx, &v, t));
    return h;
}

static const struct cnn_config small_cnn = {.batch = 16, .size = 8, .c1 = 4, .c2 = 4, .classes = 4};
static const struct lstm_lm_config small_lm = {
    .batch = 4, .seq = 8, .hidden = 16, .vocab = 5, .layers = 2};

static void cnn_data(nn_ctx *ctx, const struct cnn_config *c, nn_tensor *x, int32_t *cls)
{
    int64_t dims[4] = {c->batch, 1, c->size, c->size};
    OK(nn_tensor_empty(ctx, NN_DTYPE_F32, 4, dims, x));
    OK(nn_tensor_fill_uniform(ctx, x, 0, 1, 11));
    for (int64_t i = 0; i < c->batch; i++)
        cls[i] = (int32_t)((i * 7 + 3) % c->classes);
}

/* Sequences of the cycle 0, 1, .., V-1 from different starts: the next symbol is a function of
 * the current one, so a model that learns drives the loss towards zero. */
static void lm_data(const struct lstm_lm_config *c, uint8_t *seqs)
{
    for (int64_t n = 0; n < c->batch; n++)
        for (int64_t j = 0; j <= c->seq; j++)
            seqs[n * (c->seq + 1) + j] = (uint8_t)((n + j) % c->vocab);
}

static void expect_update(const float *v_new, const float *v_old, const float *m, int64_t n,
                          double lr, const char *what)
{
    for (int64_t i = 0; i < n; i++) {
        double want = (double)v_old[i] - lr * (double)m[i];
        cr_assert(fabs(v_new[i] - want) <= 1e-6 * (1 + fabs(want)),
                  "%s: value %lld is %.9g, want %.9g (old %.9g, step direction %.9g)", what,
                  (long long)i, v_new[i], want, v_old[i], m[i]);
    }
}

Test(models, sgd_with_momentum_is_exact_on_the_reference)
{
    nn_ctx *ctx = make_ctx(NN_BACKEND_REF, NN_MATH_STRICT_FP32);
    struct cnn m;
    OK(cnn_init(ctx, &m, &small_cnn, 1));
    nn_tensor x;
    int32_t cls[16];
    cnn_data(ctx, &small_cnn, &x, cls);
    int64_t n = m.arena.total;
    float *v0 = read_back(ctx, m.host, &m.arena.value);
    OK(cnn_step(ctx, &m, &x, cls, 0.1, 0.9));
    float *g1 = read_back(ctx, m.host, &m.arena.grad), *v1 = read_back(ctx, m.host, &m.arena.value);
    expect_update(v1, v0, g1, n, 0.1, "step 1 (momentum = g)");
    OK(cnn_step(ctx, &m, &x, cls, 0.1, 0.9));
    float *g2 = read_back(ctx, m.host, &m.arena.grad), *v2 = read_back(ctx, m.host, &m.arena.value);
    float *m2 = malloc((size_t)n * sizeof *m2);
    cr_assert_not_null(m2);
    for (int64_t i = 0; i < n; i++)
        m2[i] = (float)(0.9 * g1[i] + g2[i]);
    expect_update(v2, v1, m2, n, 0.1, "step 2 (momentum = 0.9 g1 + g2)");
    OK(cnn_step(ctx, &m, &x, cls, 0.05, 0));
    float *g3 = read_back(ctx, m.host, &m.arena.grad), *v3 = read_back(ctx, m.host, &m.arena.value);
    expect_update(v3, v2, g3, n, 0.05, "step 3 (no momentum)");
    /* Not vacuous: most parameters had a gradient (the rest is padding and dead relu units). */
    int moved = 0;
    for (int64_t i = 0; i < n; i++)
        moved += g1[i] != 0 && v1[i] != v0[i];
    cr_assert_gt(moved, n / 3, "only %d of %lld values changed", moved, (long long)n);
    free(v0), free(g1), free(v1), free(g2), free(v2), free(m2), free(g3), free(v3);
    nn_tensor_free(ctx, &x);
    cnn_free(ctx, &m);
    nn_ctx_destroy(ctx);
}

Test(models, language_model_learns_a_cycle_on_the_reference)
{
    nn_ctx *ctx = make_ctx(NN_BACKEND_REF, NN_MATH_STRICT_FP32);
    struct lstm_lm m;
    OK(lstm_lm_init(ctx, &m, &small_lm, 1));
    uint8_t seqs[4 * 9];
    lm_data(&small_lm, seqs);
    OK(lstm_lm_set_batch(ctx, &m, seqs));
    double first = 0, last = 0;
    for (int s = 0; s < 60; s++) {
        OK(lstm_lm_step(ctx, &m, 1.0, 0.9));
        OK(lstm_lm_loss(ctx, &m, s ? &last : &first));
    }
    cr_assert(fabs(first - log(5.0)) < 0.2, "the first loss %.4f is not near log 5", first);
    cr_assert_lt(last, 0.2 * first, "loss %.4f after 60 steps, from %.4f", last, first);
    lstm_lm_free(ctx, &m);
    nn_ctx_destroy(ctx);
}

Test(models, a_symbol_outside_the_vocabulary_is_refused)
{
    nn_ctx *ctx = make_ctx(NN_BACKEND_REF, NN_MATH_STRICT_FP32);
    struct lstm_lm m;
    OK(lstm_lm_init(ctx, &m, &small_lm, 1));
    uint8_t seqs[4 * 9];
    lm_data(&small_lm, seqs);
    seqs[17] = 5;
    cr_assert_eq(lstm_lm_set_batch(ctx, &m, seqs), NN_E_INVALID_ARG);
    lstm_lm_free(ctx, &m);
    nn_ctx_destroy(ctx);
}

static void close_to(double got, double want, double rel, const char *what, int at)
{
    cr_assert(fabs(got - want) <= rel * (1e-3 + fabs(want)), "%s %d: GPU %.9g, reference %.9g",
              what, at, got, want);
}

/* Three steps from the same start on the reference backend and on cuDNN (strict fp32): the
 * losses agree at each step and the parameters at the end. */
Test(models, gpu_classifier_follows_the_reference)
{
    NN_REQUIRE_GPU();
    nn_ctx *ref = make_ctx(NN_BACKEND_REF, NN_MATH_STRICT_FP32);
    nn_ctx *gpu = make_ctx(NN_BACKEND_CUDNN, NN_MATH_STRICT_FP32);
    struct cnn mr, mg;
    OK(cnn_init(ref, &mr, &small_cnn, 1));
    OK(cnn_init(gpu, &mg, &small_cnn, 1));
    nn_tensor xr, xg;
    int32_t cls[16];
    cnn_data(ref, &small_cnn, &xr, cls);
    cnn_data(gpu, &small_cnn, &xg, cls);
    for (int s = 0; s < 3; s++) {
        double lr_loss, lg_loss;
        OK(cnn_step(ref, &mr, &xr, cls, 0.1, 0.9));
        OK(cnn_step(gpu, &mg, &xg, cls, 0.1, 0.9));
        OK(cnn_loss(ref, &mr, &lr_loss));
        OK(cnn_loss(gpu, &mg, &lg_loss));
        close_to(lg_loss, lr_loss, 1e-4, "classifier loss at step", s);
    }
    float *vr = read_back(ref, mr.host, &mr.arena.value);
    float *vg = read_back(gpu, mg.host, &mg.arena.value);
    for (int64_t i = 0; i < mr.arena.total; i++)
        close_to(vg[i], vr[i], 1e-3, "classifier parameter", (int)i);
    free(vr), free(vg);
    nn_tensor_free(ref, &xr);
    nn_tensor_free(gpu, &xg);
    cnn_free(ref, &mr);
    cnn_free(gpu, &mg);
    nn_ctx_destroy(gpu);
    nn_ctx_destroy(ref);
}

Test(models, gpu_language_model_follows_the_reference)
{
    NN_REQUIRE_GPU();
    nn_ctx *ref = make_ctx(NN_BACKEND_REF, NN_MATH_STRICT_FP32);
    nn_ctx *gpu = make_ctx(NN_BACKEND_CUDNN, NN_MATH_STRICT_FP32);
    struct lstm_lm mr, mg;
    OK(lstm_lm_init(ref, &mr, &small_lm, 1));
    OK(lstm_lm_init(gpu, &mg, &small_lm, 1));
    uint8_t seqs[4 * 9];
    lm_data(&small_lm, seqs);
    OK(lstm_lm_set_batch(ref, &mr, seqs));
    OK(lstm_lm_set_batch(gpu, &mg, seqs));
    /* Enough steps that the RNN's graph replay (after a shape's first eager calls) is in them. */
    for (int s = 0; s < 8; s++) {
        double lr_loss, lg_loss;
        OK(lstm_lm_step(ref, &mr, 0.1, 0.9));
        OK(lstm_lm_step(gpu, &mg, 0.1, 0.9));
        OK(lstm_lm_loss(ref, &mr, &lr_loss));
        OK(lstm_lm_loss(gpu, &mg, &lg_loss));
        close_to(lg_loss, lr_loss, 1e-3, "language model loss at step", s);
    }
    float *hr = read_back(ref, mr.host, &mr.hw), *hg = read_back(gpu, mg.host, &mg.hw);
    for (int64_t i = 0; i < nn_tensor_numel(&mr.hw); i++)
        close_to(hg[i], hr[i], 1e-3, "head weight", (int)i);
    free(hr), free(hg);
    lstm_lm_free(ref, &mr);
    lstm_lm_free(gpu, &mg);
    nn_ctx_destroy(gpu);
    nn_ctx_destroy(ref);
}

/* The bench's larger sizes on the GPU: from the same start, three TF32 steps of each model give
 * losses near the strict ones (finite, within 1%). */
Test(models, gpu_large_models_train_in_tf32)
{
    NN_REQUIRE_GPU();
    nn_ctx *ctx[2] = {make_ctx(NN_BACKEND_CUDNN, NN_MATH_STRICT_FP32),
                      make_ctx(NN_BACKEND_CUDNN, NN_MATH_TF32)};
    const struct lstm_lm_config lc = {
        .batch = 64, .seq = 32, .hidden = 512, .vocab = 35, .layers = 2};
    uint8_t *seqs = malloc((size_t)(lc.batch * (lc.seq + 1)));
    cr_assert_not_null(seqs);
    lm_data(&lc, seqs);
    double lm_loss[2][3];
    for (int k = 0; k < 2; k++) {
        struct lstm_lm lm;
        OK(lstm_lm_init(ctx[k], &lm, &lc, 1));
        OK(lstm_lm_set_batch(ctx[k], &lm, seqs));
        for (int s = 0; s < 3; s++) {
            OK(lstm_lm_step(ctx[k], &lm, 0.1, 0.9));
            OK(lstm_lm_loss(ctx[k], &lm, &lm_loss[k][s]));
        }
        lstm_lm_free(ctx[k], &lm);
    }
    free(seqs);
    for (int s = 0; s < 3; s++) {
        cr_assert(isfinite(lm_loss[1][s]), "TF32 LSTM loss at step %d is %g", s, lm_loss[1][s]);
        close_to(lm_loss[1][s], lm_loss[0][s], 1e-2, "TF32 against strict LSTM loss at step", s);
    }

    const struct cnn_config cc = {.batch = 64, .size = 32, .c1 = 8, .c2 = 8, .classes = 4};
    double loss[2][3];
    for (int k = 0; k < 2; k++) {
        struct cnn m;
        OK(cnn_init(ctx[k], &m, &cc, 1));
        nn_tensor x;
        int32_t cls[64];
        cnn_data(ctx[k], &cc, &x, cls);
        for (int s = 0; s < 3; s++) {
            OK(cnn_step(ctx[k], &m, &x, cls, 0.05, 0.9));
            OK(cnn_loss(ctx[k], &m, &loss[k][s]));
        }
        nn_tensor_free(ctx[k], &x);
        cnn_free(ctx[k], &m);
    }
    for (int s = 0; s < 3; s++)
        close_to(loss[1][s], loss[0][s], 1e-2, "TF32 against strict classifier loss at step", s);
    nn_ctx_destroy(ctx[0]);
    nn_ctx_destroy(ctx[1]);
}

static int same_bits(nn_ctx *a, nn_ctx *ha, const nn_tensor *ta, nn_ctx *b, nn_ctx *hb,
                     const nn_tensor *tb)
{
    float *x = read_back(a, ha, ta), *y = read_back(b, hb, tb);
    int same = memcmp(x, y, (size_t)nn_tensor_numel(ta) * sizeof *x) == 0;
    free(x), free(y);
    return same;
}

/* 100 steps of each model issued call by call and as 100 launches of one captured step (the first
 * step eager in both): the losses and the parameters bitwise equal after every 10 steps. */
Test(models, gpu_graph_steps_equal_eager_steps)
{
    NN_REQUIRE_GPU();
    nn_ctx *e = nn_test_deterministic_gpu(), *g = nn_test_deterministic_gpu();
    struct cnn me, mg;
    OK(cnn_init(e, &me, &small_cnn, 1));
    OK(cnn_init(g, &mg, &small_cnn, 1));
    nn_tensor xe, xg;
    int32_t cls[16];
    cnn_data(e, &small_cnn, &xe, cls);
    cnn_data(g, &small_cnn, &xg, cls);
    for (int s = 0; s < 100; s++) {
        OK(cnn_step(e, &me, &xe, cls, 0.1, 0.9));
        OK(cnn_step_graph(g, &mg, &xg, cls, 0.1, 0.9));
        if (s % 10 == 9) {
            cr_assert(same_bits(e, me.host, &me.loss, g, mg.host, &mg.loss), "cnn loss, step %d",
                      s);
            cr_assert(same_bits(e, me.host, &me.arena.value, g, mg.host, &mg.arena.value),
                      "cnn parameters, step %d", s);
        }
    }
    cr_assert_not_null(mg.graph.g, "the steps ran from a graph");
    nn_tensor_free(e, &xe);
    nn_tensor_free(g, &xg);
    cnn_free(e, &me);
    cnn_free(g, &mg);

    struct lstm_lm le, lg;
    OK(lstm_lm_init(e, &le, &small_lm, 1));
    OK(lstm_lm_init(g, &lg, &small_lm, 1));
    uint8_t seqs[4 * 9];
    for (int s = 0; s < 100; s++) {
        for (int i = 0; i < 4 * 9; i++)
            seqs[i] = (uint8_t)((i * 3 + s) % small_lm.vocab);
        OK(lstm_lm_set_batch(e, &le, seqs));
        OK(lstm_lm_set_batch(g, &lg, seqs));
        OK(lstm_lm_step(e, &le, 0.5, 0.9));
        OK(lstm_lm_step_graph(g, &lg, 0.5, 0.9));
        if (s % 10 == 9) {
            cr_assert(same_bits(e, le.host, &le.loss, g, lg.host, &lg.loss), "lm loss, step %d", s);
            cr_assert(same_bits(e, le.host, &le.arena.value, g, lg.host, &lg.arena.value),
                      "lm parameters, step %d", s);
        }
    }
    cr_assert_not_null(lg.graph.g, "the steps ran from a graph");
    lstm_lm_free(e, &le);
    lstm_lm_free(g, &lg);
    nn_ctx_destroy(e);
    nn_ctx_destroy(g);
}

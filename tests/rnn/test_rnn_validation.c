/* Bad input to the recurrent calls: a clear status and a message naming the called function, the
 * argument, the expected and the actual value; nothing written, nothing crashed. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "nnprim/nnprim.h"
#include "rnn/rnn_internal.h"

static nn_ctx *ref_ctx(void)
{
    nn_settings s;
    nn_settings_from_env(&s);
    s.backend = NN_BACKEND_REF;
    nn_ctx *ctx = NULL;
    cr_assert_eq(nn_ctx_create(&ctx, &s), NN_OK);
    return ctx;
}

/* A valid LSTM call (T 3, N 2, I 2, H 3, 2 layers, bidirectional) to break one piece at a time. */
struct call {
    nn_ctx *ctx;
    nn_rnn_params p;
    double xv[12], hxv[24], cxv[24], wv[1000], yv[36], hyv[24], cyv[24];
    double dyv[36], dxv[12], dhxv[24], dcxv[24], dwv[1000];
    nn_tensor x, hx, cx, w, y, hy, cy, dy, dx, dhx, dcx, dw;
    int32_t lengths[2];
};

static nn_tensor wrap(nn_ctx *ctx, double *v, int rank, const int64_t *dims)
{
    nn_tensor t;
    cr_assert_eq(nn_tensor_wrap(ctx, v, NN_DTYPE_F64, rank, dims, NULL, &t), NN_OK);
    return t;
}

static void setup(struct call *c)
{
    memset(c, 0, sizeof *c);
    c->ctx = ref_ctx();
    cr_assert_eq(nn_rnn_params_default(&c->p, NN_RNN_LSTM, 2, 3), NN_OK);
    c->p.num_layers = 2;
    c->p.bidirectional = 1;
    int64_t xd[3] = {3, 2, 2}, yd[3] = {3, 2, 6}, hd[3] = {4, 2, 3}, nw;
    cr_assert_eq(nn_rnn_weights_size(c->ctx, &c->p, NN_DTYPE_F64, &nw), NN_OK);
    cr_assert_leq(nw, 1000);
    c->x = wrap(c->ctx, c->xv, 3, xd), c->dx = wrap(c->ctx, c->dxv, 3, xd);
    c->y = wrap(c->ctx, c->yv, 3, yd), c->dy = wrap(c->ctx, c->dyv, 3, yd);
    c->hx = wrap(c->ctx, c->hxv, 3, hd), c->hy = wrap(c->ctx, c->hyv, 3, hd);
    c->cx = wrap(c->ctx, c->cxv, 3, hd), c->cy = wrap(c->ctx, c->cyv, 3, hd);
    c->dhx = wrap(c->ctx, c->dhxv, 3, hd), c->dcx = wrap(c->ctx, c->dcxv, 3, hd);
    c->w = wrap(c->ctx, c->wv, 1, &nw), c->dw = wrap(c->ctx, c->dwv, 1, &nw);
    c->lengths[0] = 3, c->lengths[1] = 1;
}

static nn_status forward(struct call *c, nn_rnn_pullback **pb)
{
    return nn_rnn_forward(c->ctx, &c->p,
                          &(nn_rnn_forward_tensors){.x = &c->x,
                                                    .lengths = c->lengths,
                                                    .hx = &c->hx,
                                                    .cx = &c->cx,
                                                    .w = &c->w,
                                                    .y = &c->y,
                                                    .hy = &c->hy,
                                                    .cy = &c->cy},
                          pb);
}

static void expect_fail(nn_status got, nn_status want, const char *msg)
{
    cr_expect_eq(got, want, "status %s, want %s (%s)", nn_status_name(got), nn_status_name(want),
                 nn_last_error()->message);
    cr_expect(strstr(nn_last_error()->message, msg), "message \"%s\" lacks \"%s\"",
              nn_last_error()->message, msg);
}

Test(rnn_validation, the_valid_call_passes)
{
    struct call c;
    setup(&c);
    nn_rnn_pullback *pb;
    cr_assert_eq(forward(&c, &pb), NN_OK, "%s", nn_last_error()->message);
    cr_assert_eq(
        nn_rnn_backward(c.ctx, &pb,
                        &(nn_rnn_backward_tensors){
                            .dy = &c.dy, .dx = &c.dx, .dhx = &c.dhx, .dcx = &c.dcx, .dw = &c.dw}),
        NN_OK, "%s", nn_last_error()->message);
    nn_ctx_destroy(c.ctx);
}

Test(rnn_validation, parameters)
{
    struct call c;
    setup(&c);
    nn_rnn_params good = c.p;
    struct {
        nn_rnn_params p;
        const char *msg;
    } cases[24];
    int n = 0;
#define CASE(stmt, text)                                                                           \
    do {                                                                                           \
        cases[n].p = good;                                                                         \
        nn_rnn_params *p = &cases[n].p;                                                            \
        stmt;                                                                                      \
        cases[n++].msg = text;                                                                     \
    } while (0)
    CASE(p->cell = (nn_rnn_cell)7, "nn_rnn_forward: p.cell must be NN_RNN_RELU");
    CASE(p->input_size = 0, "nn_rnn_forward: p.input_size must be >= 1, got 0");
    CASE(p->hidden_size = -1, "nn_rnn_forward: p.hidden_size must be >= 1, got -1");
    CASE(p->proj_size = -2, "p.proj_size must be >= 0 (0 = none), got -2");
    CASE(p->proj_size = 3, "p.proj_size must be < p.hidden_size = 3, got 3");
    CASE((p->cell = NN_RNN_GRU, p->proj_size = 1), "p.proj_size must be 0 for a gru cell");
    CASE(p->num_layers = 0, "p.num_layers must be >= 1, got 0");
    CASE(p->bidirectional = 2, "p.bidirectional must be 0 or 1, got 2");
    CASE(p->bias_mode = (nn_rnn_bias_mode)9, "p.bias_mode must be");
    CASE(p->input_mode = (nn_rnn_input_mode)5, "p.input_mode must be");
    CASE(p->input_mode = NN_RNN_INPUT_SKIP,
         "p.input_size must equal p.hidden_size = 3 with NN_RNN_INPUT_SKIP, got 2");
    CASE(p->layout = (nn_rnn_layout)3, "p.layout must be");
    CASE(p->dropout = 1.0, "p.dropout must be in [0, 1), got 1");
    CASE(p->dropout = -0.1, "p.dropout must be in [0, 1), got -0.1");
    CASE(p->dropout = NAN, "p.dropout must be in [0, 1), got nan");
    CASE(p->clip_enabled = 3, "p.clip_enabled must be 0 or 1, got 3");
    CASE((p->clip_enabled = 1, p->clip_lo = 2, p->clip_hi = 1), "clip_lo <= clip_hi, got 2 and 1");
    CASE((p->clip_enabled = 1, p->clip_hi = INFINITY), "must be finite");
    CASE((p->cell = NN_RNN_TANH, p->clip_enabled = 1), "p.clip_enabled must be 0 for a tanh cell");
    CASE(p->reserved[2] = 5, "p.reserved[2] must be 0, got 5");
    for (int i = 0; i < n; i++) {
        nn_rnn_pullback *pb = (nn_rnn_pullback *)&c; /* must be reset to NULL */
        expect_fail(nn_rnn_forward(c.ctx, &cases[i].p,
                                   &(nn_rnn_forward_tensors){.x = &c.x, .w = &c.w, .y = &c.y}, &pb),
                    NN_E_INVALID_ARG, cases[i].msg);
        cr_expect_null(pb);
        int64_t nw;
        expect_fail(nn_rnn_weights_size(c.ctx, &cases[i].p, NN_DTYPE_F64, &nw), NN_E_INVALID_ARG,
                    strchr(cases[i].msg, ':') ? strchr(cases[i].msg, ':') + 2 : cases[i].msg);
    }
    expect_fail(nn_rnn_params_default(NULL, NN_RNN_LSTM, 1, 1), NN_E_INVALID_ARG,
                "nn_rnn_params_default: p must not be NULL");
    expect_fail(nn_rnn_params_default(&c.p, NN_RNN_LSTM, 0, 1), NN_E_INVALID_ARG,
                "input_size and hidden_size must be >= 1, got 0 and 1");
    nn_ctx_destroy(c.ctx);
}

Test(rnn_validation, forward_tensors)
{
    struct call c;
    setup(&c);
    int64_t bad3[3] = {4, 2, 3}, hx_n[3] = {4, 3, 3}, cx_h[3] = {4, 2, 2}, w_bad = 7;
    expect_fail(nn_rnn_forward(c.ctx, &c.p, &(nn_rnn_forward_tensors){.w = &c.w, .y = &c.y}, NULL),
                NN_E_INVALID_ARG, "nn_rnn_forward: t.x must not be NULL");
    nn_tensor t = wrap(c.ctx, c.xv, 2, bad3);
    expect_fail(
        nn_rnn_forward(c.ctx, &c.p, &(nn_rnn_forward_tensors){.x = &t, .w = &c.w, .y = &c.y}, NULL),
        NN_E_SHAPE, "nn_rnn_forward: t.x.rank must be 3 (T x N x I), got 2");
    int64_t xi[3] = {3, 2, 1};
    t = wrap(c.ctx, c.xv, 3, xi);
    expect_fail(
        nn_rnn_forward(c.ctx, &c.p, &(nn_rnn_forward_tensors){.x = &t, .w = &c.w, .y = &c.y}, NULL),
        NN_E_SHAPE, "nn_rnn_forward: t.x.dims[2] must be I = 2, got 1");
    t = wrap(c.ctx, c.hxv, 3, hx_n);
    expect_fail(nn_rnn_forward(c.ctx, &c.p,
                               &(nn_rnn_forward_tensors){.x = &c.x, .hx = &t, .w = &c.w, .y = &c.y},
                               NULL),
                NN_E_SHAPE, "nn_rnn_forward: t.hx.dims[1] must be N = 2, got 3");
    t = wrap(c.ctx, c.cxv, 3, cx_h);
    expect_fail(nn_rnn_forward(c.ctx, &c.p,
                               &(nn_rnn_forward_tensors){.x = &c.x, .cx = &t, .w = &c.w, .y = &c.y},
                               NULL),
                NN_E_SHAPE, "nn_rnn_forward: t.cx.dims[2] must be H = 3, got 2");
    int64_t hl[3] = {2, 2, 3};
    t = wrap(c.ctx, c.hyv, 3, hl);
    expect_fail(nn_rnn_forward(c.ctx, &c.p,
                               &(nn_rnn_forward_tensors){.x = &c.x, .w = &c.w, .y = &c.y, .hy = &t},
                               NULL),
                NN_E_SHAPE, "nn_rnn_forward: t.hy.dims[0] must be L*D = 4, got 2");
    t = wrap(c.ctx, c.yv, 3, (int64_t[]){3, 2, 3});
    expect_fail(
        nn_rnn_forward(c.ctx, &c.p, &(nn_rnn_forward_tensors){.x = &c.x, .w = &c.w, .y = &t}, NULL),
        NN_E_SHAPE, "nn_rnn_forward: t.y.dims[2] must be D*O = 6, got 3");
    t = wrap(c.ctx, c.wv, 1, &w_bad);
    expect_fail(
        nn_rnn_forward(c.ctx, &c.p, &(nn_rnn_forward_tensors){.x = &c.x, .w = &t, .y = &c.y}, NULL),
        NN_E_SHAPE, "nn_rnn_forward: t.w.dims[0] must be nn_rnn_weights_size() =");
    c.p.layout = NN_RNN_BATCH_MAJOR; /* x is read as N = 3, T = 2: hx's N no longer fits */
    expect_fail(nn_rnn_forward(
                    c.ctx, &c.p,
                    &(nn_rnn_forward_tensors){.x = &c.x, .hx = &c.hx, .w = &c.w, .y = &c.y}, NULL),
                NN_E_SHAPE, "nn_rnn_forward: t.hx.dims[1] must be N = 3, got 2");
    c.p.layout = NN_RNN_SEQ_MAJOR;
    /* a GRU has no cell state */
    nn_rnn_params gru = c.p;
    gru.cell = NN_RNN_GRU;
    expect_fail(nn_rnn_forward(
                    c.ctx, &gru,
                    &(nn_rnn_forward_tensors){.x = &c.x, .cx = &c.cx, .w = &c.w, .y = &c.y}, NULL),
                NN_E_INVALID_ARG, "nn_rnn_forward: t.cx must be NULL for a gru cell");
    expect_fail(nn_rnn_forward(
                    c.ctx, &gru,
                    &(nn_rnn_forward_tensors){.x = &c.x, .w = &c.w, .y = &c.y, .cy = &c.cy}, NULL),
                NN_E_INVALID_ARG, "nn_rnn_forward: t.cy must be NULL for a gru cell");
    /* dtypes */
    float f[36];
    nn_tensor yf;
    cr_assert_eq(nn_tensor_wrap(c.ctx, f, NN_DTYPE_F32, 3, c.y.dims, NULL, &yf), NN_OK);
    expect_fail(nn_rnn_forward(c.ctx, &c.p,
                               &(nn_rnn_forward_tensors){.x = &c.x, .w = &c.w, .y = &yf}, NULL),
                NN_E_DTYPE,
                "nn_rnn_forward: t.y.dtype must equal the call's dtype, x's (f64), got f32");
    /* strides */
    t = c.y;
    t.strides[0] = 13;
    expect_fail(
        nn_rnn_forward(c.ctx, &c.p, &(nn_rnn_forward_tensors){.x = &c.x, .w = &c.w, .y = &t}, NULL),
        NN_E_UNSUPPORTED, "nn_rnn_forward: t.y must be fully packed row-major");
    /* memory space: a device view on a reference context */
    t = c.hx;
    t.space = NN_SPACE_DEVICE;
    t.device = 0;
    expect_fail(nn_rnn_forward(c.ctx, &c.p,
                               &(nn_rnn_forward_tensors){.x = &c.x, .hx = &t, .w = &c.w, .y = &c.y},
                               NULL),
                NN_E_MEMSPACE, "nn_rnn_forward: t.hx must be in host memory");
    nn_ctx_destroy(c.ctx);
}

Test(rnn_validation, lengths)
{
    struct call c;
    setup(&c);
    c.lengths[1] = 4;
    expect_fail(forward(&c, NULL), NN_E_SHAPE,
                "nn_rnn_forward: t.lengths[1] must be in [0, T] = [0, 3], got 4");
    c.lengths[1] = -1;
    expect_fail(forward(&c, NULL), NN_E_SHAPE,
                "nn_rnn_forward: t.lengths[1] must be in [0, T] = [0, 3], got -1");
    c.lengths[0] = 0, c.lengths[1] = 0; /* every sequence empty is fine */
    cr_expect_eq(forward(&c, NULL), NN_OK);
    nn_ctx_destroy(c.ctx);
}

Test(rnn_validation, overlaps)
{
    struct call c;
    setup(&c);
    nn_tensor t = c.hy;
    t.data = c.hxv;
    expect_fail(nn_rnn_forward(c.ctx, &c.p,
                               &(nn_rnn_forward_tensors){
                                   .x = &c.x, .hx = &c.hx, .w = &c.w, .y = &c.y, .hy = &t},
                               NULL),
                NN_E_INVALID_ARG, "nn_rnn_forward: t.hy must not overlap t.hx in memory");
    t = c.cy;
    t.data = c.hyv;
    expect_fail(nn_rnn_forward(c.ctx, &c.p,
                               &(nn_rnn_forward_tensors){
                                   .x = &c.x, .w = &c.w, .y = &c.y, .hy = &c.hy, .cy = &t},
                               NULL),
                NN_E_INVALID_ARG, "nn_rnn_forward: t.cy must not overlap t.hy in memory");
    nn_rnn_pullback *pb;
    cr_assert_eq(forward(&c, &pb), NN_OK);
    t = c.dw;
    t.data = c.wv;
    expect_fail(nn_rnn_backward(c.ctx, &pb, &(nn_rnn_backward_tensors){.dy = &c.dy, .dw = &t}),
                NN_E_INVALID_ARG,
                "nn_rnn_backward: t.dw must not overlap the pullback's w in memory");
    t = c.dx;
    t.data = c.dyv;
    expect_fail(nn_rnn_backward(c.ctx, &pb, &(nn_rnn_backward_tensors){.dy = &c.dy, .dx = &t}),
                NN_E_INVALID_ARG, "nn_rnn_backward: t.dx must not overlap t.dy in memory");
    t = c.dhx;
    t.data = c.yv;
    expect_fail(nn_rnn_backward(c.ctx, &pb, &(nn_rnn_backward_tensors){.dhx = &t}),
                NN_E_INVALID_ARG,
                "nn_rnn_backward: t.dhx must not overlap the pullback's y in memory");
    t = c.dcx;
    t.data = c.dhxv;
    expect_fail(nn_rnn_backward(c.ctx, &pb, &(nn_rnn_backward_tensors){.dhx = &c.dhx, .dcx = &t}),
                NN_E_INVALID_ARG, "nn_rnn_backward: t.dcx must not overlap t.dhx in memory");
    /* the failures left the pullback with the caller */
    cr_expect_eq(nn_rnn_backward(c.ctx, &pb, &(nn_rnn_backward_tensors){.dx = &c.dx}), NN_OK);
    nn_ctx_destroy(c.ctx);
}

Test(rnn_validation, backward_tensors)
{
    struct call c;
    setup(&c);
    nn_rnn_pullback *pb;
    cr_assert_eq(forward(&c, &pb), NN_OK);
    nn_tensor t = wrap(c.ctx, c.dyv, 3, (int64_t[]){3, 1, 6});
    expect_fail(nn_rnn_backward(c.ctx, &pb, &(nn_rnn_backward_tensors){.dy = &t}), NN_E_SHAPE,
                "nn_rnn_backward: t.dy.dims[1] must be N = 2, got 1");
    t = wrap(c.ctx, c.dxv, 3, (int64_t[]){2, 2, 2});
    expect_fail(nn_rnn_backward(c.ctx, &pb, &(nn_rnn_backward_tensors){.dx = &t}), NN_E_SHAPE,
                "nn_rnn_backward: t.dx.dims[0] must be T = 3, got 2");
    t = wrap(c.ctx, c.dhxv, 3, (int64_t[]){4, 2, 2});
    expect_fail(nn_rnn_backward(c.ctx, &pb, &(nn_rnn_backward_tensors){.dhy = &t}), NN_E_SHAPE,
                "nn_rnn_backward: t.dhy.dims[2] must be O = 3, got 2");
    t = wrap(c.ctx, c.dwv, 1, (int64_t[]){5});
    expect_fail(nn_rnn_backward(c.ctx, &pb, &(nn_rnn_backward_tensors){.dw = &t}), NN_E_SHAPE,
                "nn_rnn_backward: t.dw.dims[0] must be nn_rnn_weights_size()");
    expect_fail(nn_rnn_backward(c.ctx, NULL, &(nn_rnn_backward_tensors){}), NN_E_PULLBACK,
                "nn_rnn_backward: pullback must not be NULL");
    expect_fail(nn_rnn_backward(NULL, &pb, &(nn_rnn_backward_tensors){}), NN_E_INVALID_ARG,
                "nn_rnn_backward: ctx must not be NULL");
    nn_rnn_pullback *fake = (nn_rnn_pullback *)&c;
    expect_fail(nn_rnn_backward(c.ctx, &fake, &(nn_rnn_backward_tensors){}), NN_E_PULLBACK,
                "is not a live pullback");
    cr_expect_eq(nn_rnn_pullback_free(&pb), NN_OK);
    nn_ctx_destroy(c.ctx);
}

Test(rnn_validation, weight_view_arguments)
{
    struct call c;
    setup(&c);
    nn_tensor v;
    expect_fail(nn_rnn_weight_view(c.ctx, &c.p, &c.w, -1, 0, NN_RNN_WEIGHT_HH, &v),
                NN_E_INVALID_ARG, "nn_rnn_weight_view: layer must be in [0, 1], got -1");
    expect_fail(nn_rnn_weight_view(c.ctx, &c.p, &c.w, 0, 2, NN_RNN_WEIGHT_HH, &v), NN_E_INVALID_ARG,
                "nn_rnn_weight_view: direction must be 0 or 1, got 2");
    expect_fail(nn_rnn_weight_view(c.ctx, &c.p, &c.w, 0, 0, (nn_rnn_weight_name)8, &v),
                NN_E_INVALID_ARG, "nn_rnn_weight_view: name must be");
    expect_fail(nn_rnn_weight_view(c.ctx, &c.p, &c.w, 0, 0, NN_RNN_WEIGHT_HR, &v), NN_E_INVALID_ARG,
                "weight_hr does not exist for these parameters (p.proj_size is 0)");
    nn_tensor t = wrap(c.ctx, c.wv, 1, (int64_t[]){9});
    expect_fail(nn_rnn_weight_view(c.ctx, &c.p, &t, 0, 0, NN_RNN_WEIGHT_HH, &v), NN_E_SHAPE,
                "nn_rnn_weight_view: w.dims[0] must be nn_rnn_weights_size()");
    int64_t nw;
    expect_fail(nn_rnn_weights_size(c.ctx, &c.p, (nn_dtype)77, &nw), NN_E_DTYPE,
                "nn_rnn_weights_size: dtype must be an nn_dtype, got 77");
    expect_fail(nn_rnn_weights_size(NULL, &c.p, NN_DTYPE_F32, &nw), NN_E_INVALID_ARG,
                "nn_rnn_weights_size: ctx must not be NULL");
    nn_ctx_destroy(c.ctx);
}

Test(rnn_validation, rnn_graphs_setting_from_the_environment_and_checked)
{
    static const struct {
        const char *value;
        nn_graphs_mode want;
    } ok[] = {{"auto", NN_GRAPHS_AUTO}, {"0", NN_GRAPHS_OFF}, {"1", NN_GRAPHS_ON}};
    nn_settings s;
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        cr_assert_eq(setenv("NNPRIM_RNN_GRAPHS", ok[i].value, 1), 0);
        cr_assert_eq(nn_settings_from_env(&s), NN_OK, "%s", nn_last_error()->message);
        cr_expect_eq(s.rnn_graphs, ok[i].want, "NNPRIM_RNN_GRAPHS=%s", ok[i].value);
    }
    cr_assert_eq(setenv("NNPRIM_RNN_GRAPHS", "2", 1), 0);
    cr_expect_eq(nn_settings_from_env(&s), NN_E_ENV);
    cr_expect(strstr(nn_last_error()->message, "NNPRIM_RNN_GRAPHS") &&
                  strstr(nn_last_error()->message, "auto, 0 or 1"),
              "%s", nn_last_error()->message);
    cr_assert_eq(unsetenv("NNPRIM_RNN_GRAPHS"), 0);
    cr_assert_eq(nn_settings_from_env(&s), NN_OK);
    cr_expect_eq(s.rnn_graphs, NN_GRAPHS_AUTO, "the default");
    s.rnn_graphs = (nn_graphs_mode)7;
    nn_ctx *ctx = NULL;
    cr_expect_eq(nn_ctx_create(&ctx, &s), NN_E_INVALID_ARG);
    cr_expect_str_eq(nn_last_error()->message,
                     "nn_ctx_create: settings.rnn_graphs must be NN_GRAPHS_AUTO, _OFF or _ON, "
                     "got 7");
    cr_expect_null(ctx);
}

/* Autotune's (algorithm, mode) pair from injected timings (the GPU measures them; the decision is
 * this plain function): the cheapest measured pair, never the eager winner when it loses replayed.
 */
Test(rnn_validation, autotune_keeps_the_cheapest_algorithm_and_mode_pair)
{
    /* gru t1n32i512h512 on the H200: the persistent kernel wins eager (100 against 120 us) but
     * loses replayed (105 against 45): standard, replayed */
    double eager[4] = {120, 100, -1, 110}, replay[4] = {45, 105, -1, 60};
    int replay_mode = -1;
    cr_expect_eq(nn__rnn_tune_pick(4, eager, replay, &replay_mode), 0);
    cr_expect_eq(replay_mode, 1);
    /* the tiny LSTM: the persistent kernel wins both ways, replayed cheaper */
    double e2[4] = {135, 60, 70, -1}, r2[4] = {35, 27, 30, -1};
    cr_expect_eq(nn__rnn_tune_pick(4, e2, r2, &replay_mode), 1);
    cr_expect_eq(replay_mode, 1);
    /* a large shape where the staging-free replay still loses: eager */
    double e3[2] = {3763, 3900}, r3[2] = {3905, 4100};
    cr_expect_eq(nn__rnn_tune_pick(2, e3, r3, &replay_mode), 0);
    cr_expect_eq(replay_mode, 0);
    /* NNPRIM_RNN_GRAPHS=0: nothing replayed is measured */
    double r4[3] = {-1, -1, -1}, e4[3] = {50, 40, 45};
    cr_expect_eq(nn__rnn_tune_pick(3, e4, r4, &replay_mode), 1);
    cr_expect_eq(replay_mode, 0);
    /* =1: only replayed figures; a NaN (a failed measurement) is never chosen */
    double e5[3] = {-1, -1, -1}, r5[3] = {30, NAN, 31};
    cr_expect_eq(nn__rnn_tune_pick(3, e5, r5, &replay_mode), 0);
    cr_expect_eq(replay_mode, 1);
    /* ties: the earlier candidate (standard first), and eager within one */
    double e6[2] = {40, 40}, r6[2] = {40, 40};
    cr_expect_eq(nn__rnn_tune_pick(2, e6, r6, &replay_mode), 0);
    cr_expect_eq(replay_mode, 0);
    /* a replayed win within the margin is not one: eager (gru t375n32i1536h1536's trial, ms) */
    double e7[2] = {48.94, 49.5}, r7[2] = {48.03, 47.6};
    cr_expect_eq(nn__rnn_tune_pick(2, e7, r7, &replay_mode), 0);
    cr_expect_eq(replay_mode, 0);
    /* beyond it, the cheapest replayed candidate, though another won eager */
    double e8[2] = {40, 38}, r8[2] = {36.5, 37};
    cr_expect_eq(nn__rnn_tune_pick(2, e8, r8, &replay_mode), 0);
    cr_expect_eq(replay_mode, 1);
    /* nothing measured: -1, the mode untouched */
    replay_mode = 7;
    cr_expect_eq(nn__rnn_tune_pick(2, e5, e5, &replay_mode), -1);
    cr_expect_eq(replay_mode, 7);
    /* whatever the figures, the pair is never slower than any measured eager pair, and slower
     * than a replayed one by the margin at most */
    for (unsigned seed = 1; seed < 200; seed++) {
        double e[4], r[4];
        srand(seed);
        for (int i = 0; i < 4; i++) {
            e[i] = rand() % 7 ? 10 + rand() % 200 : -1;
            r[i] = rand() % 7 ? 10 + rand() % 200 : -1;
        }
        e[0] = 10 + rand() % 200; /* the standard algorithm always runs eager */
        int m, b = nn__rnn_tune_pick(4, e, r, &m);
        cr_assert_geq(b, 0);
        double got = m ? r[b] : e[b];
        for (int i = 0; i < 4; i++) {
            if (e[i] >= 0) cr_expect_leq(got, e[i], "seed %u: candidate %d eager", seed, i);
            if (r[i] >= 0)
                cr_expect_leq(got * (1 - NN__RNN_REPLAY_MARGIN), r[i],
                              "seed %u: candidate %d replayed", seed, i);
        }
    }
}

/* auto's trials and autotune share one rule: replay only where it is measured and pays by more
 * than the margin. */
Test(rnn_validation, replay_is_kept_only_where_it_pays_beyond_the_margin)
{
    cr_expect(nn__rnn_replay_pays(4046.9, 3700.5));       /* gru t50n32i1024h1024's trial, us */
    cr_expect_not(nn__rnn_replay_pays(48941.8, 48032.8)); /* gru t375n32i1536h1536's */
    cr_expect_not(nn__rnn_replay_pays(100, 100 * (1 - NN__RNN_REPLAY_MARGIN)));
    cr_expect(nn__rnn_replay_pays(100, 100 * (1 - NN__RNN_REPLAY_MARGIN) - 1e-9));
    cr_expect(nn__rnn_replay_pays(-1, 50)); /* eager not measured (NNPRIM_RNN_GRAPHS=1) */
    cr_expect(nn__rnn_replay_pays(NAN, 50));
    cr_expect_not(nn__rnn_replay_pays(50, -1)); /* replay not measured */
    cr_expect_not(nn__rnn_replay_pays(50, NAN));
    cr_expect_not(nn__rnn_replay_pays(0, 0)); /* a trial that timed nothing stays eager */
}

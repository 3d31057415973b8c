/* The reference recurrent layers: equations by hand, gradients against finite differences, the
 * semantics of include/nnprim/rnn.h (padding, zero lengths, dropout, layouts, weights, dw modes,
 * single-use pullbacks) and every host-allocation failure. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "nnprim/nnprim.h"
#include "oom.h"
#include "tests/harness/rnn_case.h"

static nn_ctx *ref_ctx(int verbose)
{
    nn_settings s;
    nn_settings_from_env(&s);
    s.backend = NN_BACKEND_REF;
    s.verbose = verbose;
    nn_ctx *ctx = NULL;
    cr_assert_eq(nn_ctx_create(&ctx, &s), NN_OK);
    return ctx;
}

static nn_tensor empty(nn_ctx *ctx, int rank, const int64_t *dims)
{
    nn_tensor t;
    cr_assert_eq(nn_tensor_empty(ctx, NN_DTYPE_F64, rank, dims, &t), NN_OK, "%s",
                 nn_last_error()->message);
    return t;
}

static nn_tensor uniform(nn_ctx *ctx, int rank, const int64_t *dims, uint64_t seed)
{
    nn_tensor t = empty(ctx, rank, dims);
    cr_assert_eq(nn_tensor_fill_uniform(ctx, &t, -1, 1, seed), NN_OK);
    return t;
}

static double *d(const nn_tensor *t)
{
    return t->data;
}

static nn_tensor weights(nn_ctx *ctx, const nn_rnn_params *p, uint64_t seed)
{
    int64_t nw;
    cr_assert_eq(nn_rnn_weights_size(ctx, p, NN_DTYPE_F64, &nw), NN_OK, "%s",
                 nn_last_error()->message);
    nn_tensor w = uniform(ctx, 1, &nw, seed);
    return w;
}

static void set_view(nn_ctx *ctx, const nn_rnn_params *p, nn_tensor *w, int64_t layer, int dir,
                     nn_rnn_weight_name name, const double *v)
{
    nn_tensor view;
    cr_assert_eq(nn_rnn_weight_view(ctx, p, w, layer, dir, name, &view), NN_OK, "%s",
                 nn_last_error()->message);
    memcpy(view.data, v, (size_t)nn_tensor_numel(&view) * sizeof(double));
}

static double sigm(double a)
{
    return 1 / (1 + exp(-a));
}

/* ---------------------------------------------------------------------------------------------
 * Equations by hand, with distinct weights per gate (PyTorch's gate order)
 */

Test(rnn_ref, tanh_two_steps_by_hand)
{
    nn_ctx *ctx = ref_ctx(0);
    nn_rnn_params p;
    cr_assert_eq(nn_rnn_params_default(&p, NN_RNN_TANH, 1, 1), NN_OK);
    nn_tensor w = weights(ctx, &p, 1);
    set_view(ctx, &p, &w, 0, 0, NN_RNN_WEIGHT_IH, (double[]){0.5});
    set_view(ctx, &p, &w, 0, 0, NN_RNN_WEIGHT_HH, (double[]){-0.7});
    set_view(ctx, &p, &w, 0, 0, NN_RNN_BIAS_IH, (double[]){0.1});
    set_view(ctx, &p, &w, 0, 0, NN_RNN_BIAS_HH, (double[]){0.2});
    int64_t xd[3] = {2, 1, 1}, hd[3] = {1, 1, 1};
    nn_tensor x = empty(ctx, 3, xd), hx = empty(ctx, 3, hd), y = empty(ctx, 3, xd),
              hy = empty(ctx, 3, hd);
    d(&x)[0] = 0.3, d(&x)[1] = -0.9, d(&hx)[0] = 0.4;
    cr_assert_eq(
        nn_rnn_forward(ctx, &p,
                       &(nn_rnn_forward_tensors){.x = &x, .hx = &hx, .w = &w, .y = &y, .hy = &hy},
                       NULL),
        NN_OK);
    double h1 = tanh(0.5 * 0.3 + 0.1 - 0.7 * 0.4 + 0.2),
           h2 = tanh(0.5 * -0.9 + 0.1 - 0.7 * h1 + 0.2);
    cr_expect_float_eq(d(&y)[0], h1, 1e-15);
    cr_expect_float_eq(d(&y)[1], h2, 1e-15);
    cr_expect_eq(d(&hy)[0], d(&y)[1]);
    nn_ctx_destroy(ctx);
}

Test(rnn_ref, lstm_gate_order_and_projection_by_hand)
{
    nn_ctx *ctx = ref_ctx(0);
    nn_rnn_params p;
    cr_assert_eq(nn_rnn_params_default(&p, NN_RNN_LSTM, 1, 2), NN_OK);
    p.proj_size = 1;
    nn_tensor w = weights(ctx, &p, 1);
    /* rows: i (2), f (2), g (2), o (2) of H = 2 units */
    double wi[8] = {0.1, 0.2, -0.3, 0.4, 0.5, -0.6, 0.7, 0.8}, wh[8], bi[8], bh[8],
           wr[2] = {0.9, -1.1};
    for (int k = 0; k < 8; k++)
        wh[k] = 0.05 * (k - 3), bi[k] = 0.01 * k, bh[k] = -0.02 * k;
    set_view(ctx, &p, &w, 0, 0, NN_RNN_WEIGHT_IH, wi);
    set_view(ctx, &p, &w, 0, 0, NN_RNN_WEIGHT_HH, wh);
    set_view(ctx, &p, &w, 0, 0, NN_RNN_BIAS_IH, bi);
    set_view(ctx, &p, &w, 0, 0, NN_RNN_BIAS_HH, bh);
    set_view(ctx, &p, &w, 0, 0, NN_RNN_WEIGHT_HR, wr);
    int64_t xd[3] = {1, 1, 1}, hd[3] = {1, 1, 1}, cd[3] = {1, 1, 2};
    nn_tensor x = empty(ctx, 3, xd), hx = empty(ctx, 3, hd), cx = empty(ctx, 3, cd),
              y = empty(ctx, 3, xd), cy = empty(ctx, 3, cd);
    d(&x)[0] = 0.6, d(&hx)[0] = -0.5, d(&cx)[0] = 0.3, d(&cx)[1] = -0.2;
    cr_assert_eq(nn_rnn_forward(ctx, &p,
                                &(nn_rnn_forward_tensors){
                                    .x = &x, .hx = &hx, .cx = &cx, .w = &w, .y = &y, .cy = &cy},
                                NULL),
                 NN_OK);
    double a[8], m[2], c[2];
    for (int k = 0; k < 8; k++)
        a[k] = wi[k] * 0.6 + bi[k] + wh[k] * -0.5 + bh[k];
    for (int k = 0; k < 2; k++) {
        c[k] = sigm(a[2 + k]) * d(&cx)[k] + sigm(a[k]) * tanh(a[4 + k]);
        m[k] = sigm(a[6 + k]) * tanh(c[k]);
        cr_expect_float_eq(d(&cy)[k], c[k], 1e-15);
    }
    cr_expect_float_eq(d(&y)[0], wr[0] * m[0] + wr[1] * m[1], 1e-15);
    nn_ctx_destroy(ctx);
}

Test(rnn_ref, gru_reset_after_recurrent_product_by_hand)
{
    nn_ctx *ctx = ref_ctx(0);
    nn_rnn_params p;
    cr_assert_eq(nn_rnn_params_default(&p, NN_RNN_GRU, 1, 1), NN_OK);
    nn_tensor w = weights(ctx, &p, 1);
    double wi[3] = {0.3, -0.4, 0.5}, wh[3] = {0.6, 0.7, -0.8}, bi[3] = {0.1, 0.2, 0.3},
           bh[3] = {-0.1, 0.05, 0.4};
    set_view(ctx, &p, &w, 0, 0, NN_RNN_WEIGHT_IH, wi);
    set_view(ctx, &p, &w, 0, 0, NN_RNN_WEIGHT_HH, wh);
    set_view(ctx, &p, &w, 0, 0, NN_RNN_BIAS_IH, bi);
    set_view(ctx, &p, &w, 0, 0, NN_RNN_BIAS_HH, bh);
    int64_t dd[3] = {1, 1, 1};
    nn_tensor x = empty(ctx, 3, dd), hx = empty(ctx, 3, dd), y = empty(ctx, 3, dd);
    double xv = 0.9, h = -0.6;
    d(&x)[0] = xv, d(&hx)[0] = h;
    cr_assert_eq(nn_rnn_forward(ctx, &p,
                                &(nn_rnn_forward_tensors){.x = &x, .hx = &hx, .w = &w, .y = &y},
                                NULL),
                 NN_OK);
    double r = sigm(wi[0] * xv + bi[0] + wh[0] * h + bh[0]);
    double z = sigm(wi[1] * xv + bi[1] + wh[1] * h + bh[1]);
    double n = tanh(wi[2] * xv + bi[2] + r * (wh[2] * h + bh[2]));
    cr_expect_float_eq(d(&y)[0], (1 - z) * n + z * h, 1e-15);
    nn_ctx_destroy(ctx);
}

Test(rnn_ref, lstm_clip_reads_clamped_state_reports_unclamped)
{
    nn_ctx *ctx = ref_ctx(0);
    nn_rnn_params p;
    cr_assert_eq(nn_rnn_params_default(&p, NN_RNN_LSTM, 1, 1), NN_OK);
    p.bias_mode = NN_RNN_BIAS_NONE;
    p.clip_enabled = 1;
    p.clip_lo = -0.5;
    p.clip_hi = 0.5;
    nn_tensor w = weights(ctx, &p, 1);
    double wi[4] = {1, 2, 3, 4}, wh[4] = {0, 0, 0, 0};
    set_view(ctx, &p, &w, 0, 0, NN_RNN_WEIGHT_IH, wi);
    set_view(ctx, &p, &w, 0, 0, NN_RNN_WEIGHT_HH, wh);
    int64_t dd[3] = {1, 1, 1};
    nn_tensor x = empty(ctx, 3, dd), cx = empty(ctx, 3, dd), y = empty(ctx, 3, dd),
              cy = empty(ctx, 3, dd);
    d(&x)[0] = 1, d(&cx)[0] = 3; /* read as 0.5 */
    cr_assert_eq(
        nn_rnn_forward(ctx, &p,
                       &(nn_rnn_forward_tensors){.x = &x, .cx = &cx, .w = &w, .y = &y, .cy = &cy},
                       NULL),
        NN_OK);
    double c = sigm(2) * 0.5 + sigm(1) * tanh(3); /* > 0.5: reported as it is */
    cr_expect_float_eq(d(&cy)[0], c, 1e-15);
    cr_expect_float_eq(d(&y)[0], sigm(4) * tanh(0.5), 1e-15);
    nn_ctx_destroy(ctx);
}

/* ---------------------------------------------------------------------------------------------
 * Gradients against finite differences (f64), through the shared harness
 */

static void expect_case(nn_ctx *ctx, const char *text, int full)
{
    struct nn_rnn_case c;
    char err[256], buf[4096];
    cr_assert_eq(nn_rnn_case_parse_line(text, &c, err, sizeof err), 1, "%s: %s", text, err);
    FILE *out = fmemopen(buf, sizeof buf, "w");
    int fails = full ? nn_rnn_check_reference(ctx, &c, out) : nn_rnn_check_gradients(ctx, &c, out);
    fclose(out);
    cr_expect_eq(fails, 0, "%s", buf);
}

Test(rnn_ref, gradients_every_cell_layers_directions_lengths, .timeout = 300)
{
    nn_ctx *ctx = ref_ctx(0);
    static const char *const cells[] = {"relu", "tanh", "lstm", "gru"};
    static const char *const lens[] = {"", "lens3x0x1"};
    for (int c = 0; c < 4; c++)
        for (int l = 1; l <= 2; l++)
            for (int dir = 0; dir < 2; dir++)
                for (int k = 0; k < 2; k++) {
                    char text[256];
                    snprintf(text, sizeof text, "%s t3n3i2h3 l%d %s %s f64", cells[c], l,
                             dir ? "bidir" : "uni", lens[k]);
                    expect_case(ctx, text, 0);
                }
    nn_ctx_destroy(ctx);
}

Test(rnn_ref, gradients_options, .timeout = 300)
{
    nn_ctx *ctx = ref_ctx(0);
    static const char *const cases[] = {
        "lstm t3n2i2h3 l2 bidir proj2 lens3x2 f64",
        "lstm t3n2i2h3 l1 uni proj1 batch f64",
        "lstm t4n2i2h2 l1 bidir clip-0.3:0.4 lens4x2 f64",
        "lstm t3n2i2h2 l2 uni clip-0.2:0.2 proj1 f64",
        "relu t3n2i2h3 l2 uni bias_none f64",
        "tanh t3n2i2h3 l1 bidir bias_input f64",
        "lstm t3n2i2h3 l2 bidir bias_recurrent f64",
        "gru t3n2i2h3 l2 bidir bias_none lens1x3 f64",
        "gru t3n2i2h3 l1 uni bias_recurrent f64",
        "gru t3n2i3h3 l2 bidir skip f64",
        "lstm t3n2i3h3 l2 uni skip batch lens2x3 f64",
        "relu t3n2i3h3 l1 bidir skip f64",
        "gru t3n3i2h2 l2 bidir batch lens0x3x1 f64",
        "lstm t3n2i2h2 l3 bidir drop0.4:11 f64",
        "relu t1n1i1h1 l1 uni lens0 f64",
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        expect_case(ctx, cases[i], 0);
    nn_ctx_destroy(ctx);
}

Test(rnn_ref, standard_cases_in_every_dtype_guarded, .timeout = 300)
{
    nn_ctx *ctx = ref_ctx(0);
    for (size_t i = 0; i < nn_rnn_standard_case_count(); i++) {
        struct nn_rnn_case c;
        cr_assert_eq(nn_rnn_standard_case(i, &c), 0);
        char text[1024];
        nn_rnn_case_format(&c, text, sizeof text);
        expect_case(ctx, text, 1);
    }
    static const char *const small[] = {"lstm t3n2i2h3 l2 bidir lens3x1 f16",
                                        "gru t3n2i2h3 l1 uni bf16 batch"};
    for (int i = 0; i < 2; i++)
        expect_case(ctx, small[i], 1);
    nn_ctx_destroy(ctx);
}

/* ---------------------------------------------------------------------------------------------
 * Semantics
 */

struct lstm_run {
    nn_rnn_params p;
    nn_tensor x, hx, cx, w, y, hy, cy, dy, dhy, dcy, dx, dhx, dcx, dw;
    unsigned accumulate; /* the backward's nn_backward_options.accumulate */
};

static void lstm_setup(nn_ctx *ctx, struct lstm_run *r, int64_t T, int64_t N, int bidir)
{
    cr_assert_eq(nn_rnn_params_default(&r->p, NN_RNN_LSTM, 2, 3), NN_OK);
    r->accumulate = 0;
    r->p.num_layers = 2;
    r->p.bidirectional = bidir;
    int64_t D = bidir ? 2 : 1, xd[3] = {T, N, 2}, yd[3] = {T, N, D * 3}, hd[3] = {2 * D, N, 3};
    r->x = uniform(ctx, 3, xd, 1), r->dx = empty(ctx, 3, xd);
    r->y = empty(ctx, 3, yd), r->dy = uniform(ctx, 3, yd, 2);
    r->hx = uniform(ctx, 3, hd, 3), r->cx = uniform(ctx, 3, hd, 4);
    r->hy = empty(ctx, 3, hd), r->cy = empty(ctx, 3, hd);
    r->dhy = uniform(ctx, 3, hd, 5), r->dcy = uniform(ctx, 3, hd, 6);
    r->dhx = empty(ctx, 3, hd), r->dcx = empty(ctx, 3, hd);
    r->w = weights(ctx, &r->p, 7);
    r->dw = empty(ctx, 1, r->w.dims);
}

static nn_status lstm_step(nn_ctx *ctx, struct lstm_run *r, const int32_t *lengths)
{
    nn_rnn_pullback *pb;
    nn_status st = nn_rnn_forward(ctx, &r->p,
                                  &(nn_rnn_forward_tensors){.x = &r->x,
                                                            .lengths = lengths,
                                                            .hx = &r->hx,
                                                            .cx = &r->cx,
                                                            .w = &r->w,
                                                            .y = &r->y,
                                                            .hy = &r->hy,
                                                            .cy = &r->cy},
                                  &pb);
    if (st != NN_OK) return st;
    nn_backward_options o = {.accumulate = r->accumulate};
    st = nn_rnn_backward_ex(ctx, &pb, &o,
                            &(nn_rnn_backward_tensors){.dy = &r->dy,
                                                       .dhy = &r->dhy,
                                                       .dcy = &r->dcy,
                                                       .dx = &r->dx,
                                                       .dhx = &r->dhx,
                                                       .dcx = &r->dcx,
                                                       .dw = &r->dw});
    if (st != NN_OK) nn_rnn_pullback_free(&pb);
    return st;
}

Test(rnn_ref, zero_length_passes_states_through)
{
    nn_ctx *ctx = ref_ctx(0);
    struct lstm_run r;
    lstm_setup(ctx, &r, 4, 3, 1);
    int32_t lengths[3] = {4, 0, 2};
    cr_assert_eq(lstm_step(ctx, &r, lengths), NN_OK, "%s", nn_last_error()->message);
    for (int64_t pl = 0; pl < 4; pl++)
        for (int64_t j = 0; j < 3; j++) {
            int64_t i = (pl * 3 + 1) * 3 + j; /* sequence 1 */
            cr_expect_eq(d(&r.hy)[i], d(&r.hx)[i]);
            cr_expect_eq(d(&r.cy)[i], d(&r.cx)[i]);
            cr_expect_eq(d(&r.dhx)[i], d(&r.dhy)[i]);
            cr_expect_eq(d(&r.dcx)[i], d(&r.dcy)[i]);
        }
    for (int64_t t = 0; t < 4; t++)
        for (int64_t n = 0; n < 3; n++) {
            int pad = t >= lengths[n];
            for (int64_t j = 0; j < 6; j++)
                if (pad)
                    cr_expect_eq(d(&r.y)[(t * 3 + n) * 6 + j], 0.0, "y t=%lld n=%lld", (long long)t,
                                 (long long)n);
            for (int64_t j = 0; j < 2; j++)
                if (pad) cr_expect_eq(d(&r.dx)[(t * 3 + n) * 2 + j], 0.0);
        }
    nn_ctx_destroy(ctx);
}

Test(rnn_ref, padded_dy_is_ignored_and_sequences_are_independent)
{
    nn_ctx *ctx = ref_ctx(0);
    struct lstm_run r;
    lstm_setup(ctx, &r, 4, 2, 1);
    int32_t lengths[2] = {2, 4};
    cr_assert_eq(lstm_step(ctx, &r, lengths), NN_OK);
    double dw0[1000], dx0[16];
    int64_t nw = nn_tensor_numel(&r.w);
    cr_assert_lt(nw, 1000);
    memcpy(dw0, r.dw.data, (size_t)nw * sizeof(double));
    memcpy(dx0, r.dx.data, sizeof dx0);
    for (int64_t t = 2; t < 4; t++) /* sequence 0's padded positions */
        for (int64_t j = 0; j < 6; j++)
            d(&r.dy)[(t * 2 + 0) * 6 + j] = 1e6;
    cr_assert_eq(lstm_step(ctx, &r, lengths), NN_OK);
    cr_expect_eq(memcmp(dw0, r.dw.data, (size_t)nw * sizeof(double)), 0);
    cr_expect_eq(memcmp(dx0, r.dx.data, sizeof dx0), 0);
    nn_ctx_destroy(ctx);
}

Test(rnn_ref, batch_major_is_seq_major_transposed)
{
    nn_ctx *ctx = ref_ctx(0);
    struct lstm_run s, b;
    lstm_setup(ctx, &s, 3, 2, 1);
    lstm_setup(ctx, &b, 3, 2, 1);
    b.p.layout = NN_RNN_BATCH_MAJOR;
    int64_t xd[3] = {2, 3, 2}, yd[3] = {2, 3, 6};
    b.x = empty(ctx, 3, xd), b.dx = empty(ctx, 3, xd), b.y = empty(ctx, 3, yd),
    b.dy = empty(ctx, 3, yd);
    for (int64_t t = 0; t < 3; t++)
        for (int64_t n = 0; n < 2; n++) {
            memcpy(d(&b.x) + (n * 3 + t) * 2, d(&s.x) + (t * 2 + n) * 2, 2 * sizeof(double));
            memcpy(d(&b.dy) + (n * 3 + t) * 6, d(&s.dy) + (t * 2 + n) * 6, 6 * sizeof(double));
        }
    int32_t lengths[2] = {3, 1};
    cr_assert_eq(lstm_step(ctx, &s, lengths), NN_OK);
    cr_assert_eq(lstm_step(ctx, &b, lengths), NN_OK, "%s", nn_last_error()->message);
    for (int64_t t = 0; t < 3; t++)
        for (int64_t n = 0; n < 2; n++) {
            cr_expect_eq(memcmp(d(&b.y) + (n * 3 + t) * 6, d(&s.y) + (t * 2 + n) * 6, 48), 0);
            cr_expect_eq(memcmp(d(&b.dx) + (n * 3 + t) * 2, d(&s.dx) + (t * 2 + n) * 2, 16), 0);
        }
    cr_expect_eq(memcmp(b.dw.data, s.dw.data, (size_t)nn_tensor_numel(&s.w) * 8), 0);
    cr_expect_eq(memcmp(b.hy.data, s.hy.data, (size_t)nn_tensor_numel(&s.hy) * 8), 0);
    nn_ctx_destroy(ctx);
}

Test(rnn_ref, dw_overwrite_ignores_old_contents_accumulate_adds_exactly)
{
    nn_ctx *ctx = ref_ctx(0);
    struct lstm_run r;
    lstm_setup(ctx, &r, 3, 2, 1);
    int64_t nw = nn_tensor_numel(&r.w);
    cr_assert_eq(nn_tensor_fill_constant(ctx, &r.dw, NAN), NN_OK);
    cr_assert_eq(lstm_step(ctx, &r, NULL), NN_OK);
    double g[1000], old[1000];
    cr_assert_lt(nw, 1000);
    memcpy(g, r.dw.data, (size_t)nw * sizeof(double));
    for (int64_t i = 0; i < nw; i++)
        cr_assert(isfinite(g[i]), "dw[%lld] not written", (long long)i);
    cr_assert_eq(nn_tensor_fill_uniform(ctx, &r.dw, -3, 3, 99), NN_OK);
    memcpy(old, r.dw.data, (size_t)nw * sizeof(double));
    r.accumulate = NN_ACCUMULATE_DW;
    cr_assert_eq(lstm_step(ctx, &r, NULL), NN_OK);
    for (int64_t i = 0; i < nw; i++)
        cr_expect_eq(d(&r.dw)[i], old[i] + g[i], "dw[%lld]", (long long)i);
    nn_ctx_destroy(ctx);
}

Test(rnn_ref, backward_twice_is_refused)
{
    nn_ctx *ctx = ref_ctx(0);
    struct lstm_run r;
    lstm_setup(ctx, &r, 2, 2, 0);
    nn_rnn_pullback *pb, *copy;
    cr_assert_eq(nn_rnn_forward(ctx, &r.p,
                                &(nn_rnn_forward_tensors){
                                    .x = &r.x, .hx = &r.hx, .cx = &r.cx, .w = &r.w, .y = &r.y},
                                &pb),
                 NN_OK);
    copy = pb;
    cr_assert_eq(nn_rnn_backward(ctx, &pb,
                                 &(nn_rnn_backward_tensors){.dy = &r.dy, .dx = &r.dx, .dw = &r.dw}),
                 NN_OK);
    cr_expect_null(pb);
    cr_expect_eq(nn_rnn_backward(ctx, &pb,
                                 &(nn_rnn_backward_tensors){.dy = &r.dy, .dx = &r.dx, .dw = &r.dw}),
                 NN_E_PULLBACK);
    cr_expect(strstr(nn_last_error()->message, "nn_rnn_backward: *pullback is NULL"));
    cr_expect_eq(nn_rnn_backward(ctx, &copy,
                                 &(nn_rnn_backward_tensors){.dy = &r.dy, .dx = &r.dx, .dw = &r.dw}),
                 NN_E_PULLBACK);
    cr_expect_eq(nn_rnn_pullback_free(&copy), NN_E_PULLBACK);
    nn_rnn_pullback *none = NULL;
    cr_expect_eq(nn_rnn_pullback_free(&none), NN_OK);
    cr_expect_eq(nn_rnn_pullback_free(NULL), NN_OK);
    /* another context's pullback */
    nn_ctx *other = ref_ctx(0);
    cr_assert_eq(
        nn_rnn_forward(ctx, &r.p, &(nn_rnn_forward_tensors){.x = &r.x, .w = &r.w, .y = &r.y}, &pb),
        NN_OK);
    cr_expect_eq(nn_rnn_backward(other, &pb, &(nn_rnn_backward_tensors){}), NN_E_PULLBACK);
    cr_expect_eq(nn_rnn_pullback_free(&pb), NN_OK);
    nn_ctx_destroy(other);
    nn_ctx_destroy(ctx);
}

Test(rnn_ref, dropout_training_only_reproducible_from_seed)
{
    nn_ctx *ctx = ref_ctx(0);
    struct lstm_run r;
    lstm_setup(ctx, &r, 4, 3, 1);
    int64_t ny = nn_tensor_numel(&r.y);
    double plain[72], a[72], b[72];
    cr_assert_eq(ny, 72);
    cr_assert_eq(nn_rnn_forward(ctx, &r.p,
                                &(nn_rnn_forward_tensors){
                                    .x = &r.x, .hx = &r.hx, .cx = &r.cx, .w = &r.w, .y = &r.y},
                                NULL),
                 NN_OK);
    memcpy(plain, r.y.data, sizeof plain);
    r.p.dropout = 0.5;
    r.p.dropout_seed = 42;
    /* inference: no dropout */
    cr_assert_eq(nn_rnn_forward(ctx, &r.p,
                                &(nn_rnn_forward_tensors){
                                    .x = &r.x, .hx = &r.hx, .cx = &r.cx, .w = &r.w, .y = &r.y},
                                NULL),
                 NN_OK);
    cr_expect_eq(memcmp(plain, r.y.data, sizeof plain), 0);
    nn_rnn_pullback *pb;
    for (int k = 0; k < 2; k++) {
        cr_assert_eq(nn_rnn_forward(ctx, &r.p,
                                    &(nn_rnn_forward_tensors){
                                        .x = &r.x, .hx = &r.hx, .cx = &r.cx, .w = &r.w, .y = &r.y},
                                    &pb),
                     NN_OK);
        cr_assert_eq(nn_rnn_pullback_free(&pb), NN_OK);
        memcpy(k ? b : a, r.y.data, sizeof a);
    }
    cr_expect_eq(memcmp(a, b, sizeof a), 0, "same seed, same mask");
    cr_expect_neq(memcmp(a, plain, sizeof a), 0, "training drops out");
    r.p.dropout_seed = 43;
    cr_assert_eq(nn_rnn_forward(ctx, &r.p,
                                &(nn_rnn_forward_tensors){
                                    .x = &r.x, .hx = &r.hx, .cx = &r.cx, .w = &r.w, .y = &r.y},
                                &pb),
                 NN_OK);
    cr_assert_eq(nn_rnn_pullback_free(&pb), NN_OK);
    cr_expect_neq(memcmp(a, r.y.data, sizeof a), 0, "another seed, another mask");
    nn_ctx_destroy(ctx);
}

/* ---------------------------------------------------------------------------------------------
 * Weights
 */

Test(rnn_ref, weight_views_have_pytorch_shapes_and_tile_the_buffer)
{
    nn_ctx *ctx = ref_ctx(0);
    nn_rnn_params p;
    cr_assert_eq(nn_rnn_params_default(&p, NN_RNN_LSTM, 5, 4), NN_OK);
    p.num_layers = 2;
    p.bidirectional = 1;
    p.proj_size = 3;
    int64_t nw;
    cr_assert_eq(nn_rnn_weights_size(ctx, &p, NN_DTYPE_F64, &nw), NN_OK);
    /* PyTorch's numbers: per direction, layer 0: 16x5 + 16x3 + 16 + 16 + 3x4; layer 1: 16x6 ... */
    cr_expect_eq(nw, 2 * (80 + 48 + 32 + 12) + 2 * (96 + 48 + 32 + 12));
    nn_tensor w = empty(ctx, 1, &nw);
    cr_assert_eq(nn_tensor_fill_constant(ctx, &w, NAN), NN_OK);
    static const struct {
        nn_rnn_weight_name name;
        int rank;
        int64_t d0, d1[2];
    } want[] = {{NN_RNN_WEIGHT_IH, 2, 16, {5, 6}},
                {NN_RNN_WEIGHT_HH, 2, 16, {3, 3}},
                {NN_RNN_BIAS_IH, 1, 16, {0, 0}},
                {NN_RNN_BIAS_HH, 1, 16, {0, 0}},
                {NN_RNN_WEIGHT_HR, 2, 3, {4, 4}}};
    /* Write each view as a PyTorch tensor would be copied in: element k of view v gets v*1000+k. */
    int v = 0;
    for (int64_t l = 0; l < 2; l++)
        for (int dir = 0; dir < 2; dir++)
            for (int k = 0; k < 5; k++, v++) {
                nn_tensor view;
                cr_assert_eq(nn_rnn_weight_view(ctx, &p, &w, l, dir, want[k].name, &view), NN_OK,
                             "%s", nn_last_error()->message);
                cr_expect_eq(view.rank, want[k].rank);
                cr_expect_eq(view.dims[0], want[k].d0);
                if (want[k].rank == 2) cr_expect_eq(view.dims[1], want[k].d1[l]);
                cr_expect(nn_tensor_is_contiguous(&view));
                for (int64_t i = 0; i < nn_tensor_numel(&view); i++) {
                    cr_assert(isnan(d(&view)[i]), "views overlap at layer %lld dir %d name %d",
                              (long long)l, dir, k);
                    d(&view)[i] = v * 1000.0 + (double)i;
                }
            }
    for (int64_t i = 0; i < nw; i++)
        cr_expect(!isnan(d(&w)[i]), "element %lld of the buffer is in no view", (long long)i);
    v = 0; /* read back unchanged */
    for (int64_t l = 0; l < 2; l++)
        for (int dir = 0; dir < 2; dir++)
            for (int k = 0; k < 5; k++, v++) {
                nn_tensor view;
                cr_assert_eq(nn_rnn_weight_view(ctx, &p, &w, l, dir, want[k].name, &view), NN_OK);
                for (int64_t i = 0; i < nn_tensor_numel(&view); i++)
                    cr_expect_eq(d(&view)[i], v * 1000.0 + (double)i);
            }
    nn_ctx_destroy(ctx);
}

Test(rnn_ref, weight_views_that_do_not_exist)
{
    nn_ctx *ctx = ref_ctx(0);
    nn_rnn_params p;
    cr_assert_eq(nn_rnn_params_default(&p, NN_RNN_GRU, 4, 4), NN_OK);
    p.input_mode = NN_RNN_INPUT_SKIP;
    p.bias_mode = NN_RNN_BIAS_INPUT;
    p.num_layers = 2;
    nn_tensor w = weights(ctx, &p, 1), view;
    cr_expect_eq(nn_rnn_weight_view(ctx, &p, &w, 0, 0, NN_RNN_WEIGHT_IH, &view), NN_E_INVALID_ARG);
    cr_expect(strstr(nn_last_error()->message, "nn_rnn_weight_view: weight_ih does not exist"));
    cr_expect_eq(nn_rnn_weight_view(ctx, &p, &w, 1, 0, NN_RNN_WEIGHT_IH, &view), NN_OK);
    cr_expect_eq(nn_rnn_weight_view(ctx, &p, &w, 0, 0, NN_RNN_BIAS_HH, &view), NN_E_INVALID_ARG);
    cr_expect_eq(nn_rnn_weight_view(ctx, &p, &w, 0, 0, NN_RNN_WEIGHT_HR, &view), NN_E_INVALID_ARG);
    cr_expect_eq(nn_rnn_weight_view(ctx, &p, &w, 0, 1, NN_RNN_WEIGHT_HH, &view), NN_E_INVALID_ARG);
    cr_expect_eq(nn_rnn_weight_view(ctx, &p, &w, 2, 0, NN_RNN_WEIGHT_HH, &view), NN_E_INVALID_ARG);
    nn_ctx_destroy(ctx);
}

/* ---------------------------------------------------------------------------------------------
 * The verbose line is a case the harness takes whole
 */

Test(rnn_ref, verbose_line_parses_back_to_the_call)
{
    char path[] = "/tmp/nnprim_rnn_verbose_XXXXXX";
    int fd = mkstemp(path);
    cr_assert_geq(fd, 0);
    cr_assert(freopen(path, "w", stderr));
    nn_ctx *ctx = ref_ctx(1);
    struct nn_rnn_case c;
    char err[256];
    cr_assert_eq(nn_rnn_case_parse_line("lstm t3n3i2h3 l2 bidir proj2 bias_recurrent batch "
                                        "clip-1.5:2.25 drop0.125:9 lens3x0x2 f64 acc",
                                        &c, err, sizeof err),
                 1, "%s", err);
    struct lstm_run r = {.p = c.p};
    int64_t xd[3] = {3, 3, 2}, yd[3] = {3, 3, 4}, hd[3] = {4, 3, 2}, cd[3] = {4, 3, 3};
    r.x = uniform(ctx, 3, xd, 1), r.y = empty(ctx, 3, yd), r.dy = uniform(ctx, 3, yd, 2);
    r.cx = uniform(ctx, 3, cd, 3), r.hx = uniform(ctx, 3, hd, 4);
    r.w = weights(ctx, &r.p, 5), r.dw = empty(ctx, 1, r.w.dims);
    nn_rnn_pullback *pb;
    cr_assert_eq(
        nn_rnn_forward(
            ctx, &r.p,
            &(nn_rnn_forward_tensors){
                .x = &r.x, .lengths = c.lengths, .hx = &r.hx, .cx = &r.cx, .w = &r.w, .y = &r.y},
            &pb),
        NN_OK, "%s", nn_last_error()->message);
    nn_backward_options o = {.accumulate = c.accumulate}; /* the case's "acc" */
    cr_assert_eq(
        nn_rnn_backward_ex(ctx, &pb, &o, &(nn_rnn_backward_tensors){.dy = &r.dy, .dw = &r.dw}),
        NN_OK);
    fflush(stderr);
    FILE *f = fopen(path, "r");
    char line[2][2048], want[1024], got[1024];
    /* the context's header line is a '#' comment */
    cr_assert(fgets(line[0], sizeof line[0], f) && line[0][0] == '#', "%s", line[0]);
    cr_assert(fgets(line[0], sizeof line[0], f) && fgets(line[1], sizeof line[1], f));
    fclose(f);
    unlink(path);
    cr_expect(!strncmp(line[0], "nnprim_verbose,rnn_forward,ref,", 31), "%s", line[0]);
    cr_expect(!strncmp(line[1], "nnprim_verbose,rnn_backward_ex,ref,", 35), "%s", line[1]);
    /* the backward asked for dw only, and its line says so */
    c.skip = NN_RNN_CASE_SKIP_DX | NN_RNN_CASE_SKIP_DHX | NN_RNN_CASE_SKIP_DCX;
    nn_rnn_case_format(&c, want, sizeof want);
    cr_expect(strstr(want, " acc grads=dw"), "%s", want);
    struct nn_rnn_case back;
    cr_assert_eq(nn_rnn_case_parse_line(line[1], &back, err, sizeof err), 1, "%s: %s", line[1],
                 err);
    nn_rnn_case_format(&back, got, sizeof got);
    cr_expect_str_eq(got, want);
    cr_assert_eq(nn_rnn_case_parse_line(line[0], &back, err, sizeof err), 1, "%s", err);
    cr_expect_eq(back.accumulate, 0);
    nn_ctx_destroy(ctx);
}

/* ---------------------------------------------------------------------------------------------
 * Host allocation failures
 */

struct oom_arg {
    nn_ctx *ctx;
    struct lstm_run *r;
    const int32_t *lengths;
};

static nn_status oom_step(void *arg)
{
    struct oom_arg *a = arg;
    return lstm_step(a->ctx, a->r, a->lengths);
}

static nn_status oom_views(void *arg)
{
    struct oom_arg *a = arg;
    int64_t nw;
    nn_tensor v;
    nn_status st = nn_rnn_weights_size(a->ctx, &a->r->p, NN_DTYPE_F64, &nw);
    if (st == NN_OK) st = nn_rnn_weight_view(a->ctx, &a->r->p, &a->r->w, 1, 1, NN_RNN_BIAS_HH, &v);
    return st;
}

static nn_status oom_inference(void *arg)
{
    struct oom_arg *a = arg;
    struct lstm_run *r = a->r;
    return nn_rnn_forward(a->ctx, &r->p,
                          &(nn_rnn_forward_tensors){.x = &r->x,
                                                    .lengths = a->lengths,
                                                    .hx = &r->hx,
                                                    .cx = &r->cx,
                                                    .w = &r->w,
                                                    .y = &r->y,
                                                    .hy = &r->hy,
                                                    .cy = &r->cy},
                          NULL);
}

Test(rnn_ref, every_host_allocation_failure)
{
    nn_ctx *ctx = ref_ctx(0);
    struct lstm_run r;
    lstm_setup(ctx, &r, 3, 2, 1);
    int32_t lengths[2] = {3, 1};
    struct oom_arg a = {ctx, &r, lengths};
    cr_expect_gt(nn_test_every_host_alloc_failure(oom_step, &a, "forward + backward"), 3);
    cr_expect_gt(nn_test_every_host_alloc_failure(oom_inference, &a, "inference"), 1);
    nn_test_every_host_alloc_failure(oom_views, &a, "weights size + view");
    a.lengths = NULL;
    cr_expect_gt(nn_test_every_host_alloc_failure(oom_step, &a, "forward + backward, all T"), 3);
    nn_ctx_destroy(ctx);
}

Test(rnn_ref, case_text_round_trips)
{
    char a[2048], b[2048], err[256];
    for (size_t i = 0; i < nn_rnn_gpu_case_count() + nn_rnn_standard_case_count(); i++) {
        struct nn_rnn_case c, back;
        size_t g = nn_rnn_gpu_case_count();
        cr_assert_eq(i < g ? nn_rnn_gpu_case(i, &c) : nn_rnn_standard_case(i - g, &c), 0);
        nn_rnn_case_format(&c, a, sizeof a);
        cr_assert_eq(nn_rnn_case_parse_line(a, &back, err, sizeof err), 1, "%s: %s", a, err);
        nn_rnn_case_format(&back, b, sizeof b);
        cr_expect_str_eq(a, b);
        cr_expect_eq(memcmp(&c.p, &back.p, sizeof c.p), 0, "%s", a);
    }
    static const char *const bad[] = {"lstm", "lstn t1n1i1h1", "lstm t1n1i1", "lstm t1n2i1h1 lens1",
                                      "lstm t1n1i1h1 clip1", "lstm t1n1i1h1 wobble",
                                      "gru t1n1i1h1 drop0.5",
                                      /* found by fuzz/fuzz_case_line.c: the text of a bf16
                                       * case has no tf32 */
                                      "lstm t1n1i1h1 bf16 tf32"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        struct nn_rnn_case c;
        cr_expect_eq(nn_rnn_case_parse_line(bad[i], &c, err, sizeof err), -1, "%s", bad[i]);
    }
}

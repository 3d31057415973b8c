/* The family checks of backward_check.h. Inputs are small integers where the op allows it, so
 * sums are exact and "prior + gradient" is compared exactly on the reference (conv and linear
 * keep a small margin for the GPU's engines); softmax, layernorm, mean pooling and the RNN to a
 * tolerance. */
#include "backward_check.h"

#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define OK(call) cr_assert_eq((call), NN_OK, "%s: %s", #call, nn_last_error()->message)

nn_ctx *bc_ctx(nn_backend b)
{
    nn_settings s;
    nn_settings_from_env(&s);
    s.backend = b;
    s.math_mode = NN_MATH_STRICT_FP32;
    nn_ctx *ctx = NULL;
    OK(nn_ctx_create(&ctx, &s));
    return ctx;
}

void bc_out_free(struct bc_out *o)
{
    free(o->v);
    o->v = NULL;
    o->n = 0;
}

double bc_err(const double *a, const double *b, int64_t n, double atol, double rtol, int64_t *at)
{
    double worst = 0;
    *at = 0;
    for (int64_t i = 0; i < n; i++) {
        double e = fabs(a[i] - b[i]) / (atol + rtol * fabs(b[i]));
        if (isnan(a[i]) != isnan(b[i]) || (atol == 0 && rtol == 0 && a[i] != b[i])) e = INFINITY;
        if (atol == 0 && rtol == 0 && a[i] == b[i]) e = 0;
        if (e > worst) {
            worst = e;
            *at = i;
        }
    }
    return worst;
}

static nn_tensor mk(nn_ctx *c, int rank, const int64_t *dims)
{
    nn_tensor t;
    OK(nn_tensor_empty(c, NN_DTYPE_F32, rank, dims, &t));
    return t;
}

static nn_tensor ints(nn_ctx *c, int rank, const int64_t *dims, int lo, int hi, uint64_t seed)
{
    nn_tensor t = mk(c, rank, dims);
    OK(nn_tensor_fill_ints(c, &t, lo, hi, seed));
    return t;
}

/* Never read by an overwriting backward: NaN shows any read. */
static nn_tensor nans(nn_ctx *c, int rank, const int64_t *dims)
{
    nn_tensor t = mk(c, rank, dims);
    OK(nn_tensor_fill_constant(c, &t, NAN));
    return t;
}

/* t's values as host doubles (malloc'd). */
static double *vals(nn_ctx *c, nn_ctx *h, const nn_tensor *t)
{
    int64_t n = nn_tensor_numel(t);
    nn_tensor ht;
    OK(nn_tensor_empty(h, NN_DTYPE_F32, t->rank, t->dims, &ht));
    OK(nn_tensor_copy(c, &ht, t));
    double *v = malloc((size_t)n * sizeof *v);
    cr_assert(v);
    for (int64_t i = 0; i < n; i++)
        v[i] = ((const float *)ht.data)[i];
    OK(nn_tensor_free(h, &ht));
    return v;
}

/* got == want (tol 0: exactly), n values. */
static void same(const double *got, const double *want, int64_t n, double tol, const char *what)
{
    int64_t at;
    double e = bc_err(got, want, n, tol, tol, &at);
    cr_expect(e <= 1, "%s: [%lld] is %.9g, expected %.9g", what, (long long)at, got[at], want[at]);
}

/* t (on c) == prior + grad. */
static void expect_sum(nn_ctx *c, nn_ctx *h, const nn_tensor *t, const double *prior,
                       const double *grad, double tol, const char *what)
{
    int64_t n = nn_tensor_numel(t);
    double *got = vals(c, h, t), *want = malloc((size_t)n * sizeof *want);
    cr_assert(want);
    for (int64_t i = 0; i < n; i++)
        want[i] = (double)(float)(prior[i] + grad[i]);
    same(got, want, n, tol, what);
    free(got);
    free(want);
}

static void expect_vals(nn_ctx *c, nn_ctx *h, const nn_tensor *t, const double *want, double tol,
                        const char *what)
{
    double *got = vals(c, h, t);
    same(got, want, nn_tensor_numel(t), tol, what);
    free(got);
}

static void keep_out(struct bc_out *o, const double *v, int64_t n)
{
    o->v = realloc(o->v, (size_t)(o->n + n) * sizeof *o->v);
    cr_assert(o->v);
    memcpy(o->v + o->n, v, (size_t)n * sizeof *v);
    o->n += n;
}

static void drop(nn_ctx *c, nn_tensor *const *t, int n)
{
    for (int i = 0; i < n; i++)
        OK(nn_tensor_free(c, t[i]));
}

static const nn_backward_options KEEP = {0, 1, {0}};
static const nn_backward_options ACC_ALL_KEEP = {
    NN_ACCUMULATE_DX | NN_ACCUMULATE_DW | NN_ACCUMULATE_DB, 1, {0}};
static const nn_backward_options ACC_DX_KEEP = {NN_ACCUMULATE_DX, 1, {0}};

/* ---------------------------------------------------------------------------------------------
 * Convolution (fused relu and bias: the masked path) and linear: the same pattern
 */

void bc_conv(nn_ctx *c, nn_ctx *h, struct bc_out *o)
{
    nn_conv_params p;
    OK(nn_conv_params_default(&p, 2));
    p.pad_lo[0] = p.pad_lo[1] = p.pad_hi[0] = p.pad_hi[1] = 1;
    p.activation = NN_ACTIVATION_RELU;
    /* exact on the reference; cuDNN may pick a Winograd or FFT engine, whose f32 sums round */
    const double tol = 1e-5;
    const int64_t xd[] = {2, 3, 6, 6}, wd[] = {4, 3, 3, 3}, bd[] = {4}, yd[] = {2, 4, 6, 6};
    nn_tensor x = ints(c, 4, xd, -3, 3, 1), w = ints(c, 4, wd, -2, 2, 2),
              b = ints(c, 1, bd, -1, 1, 3);
    nn_tensor y = mk(c, 4, yd), dy = ints(c, 4, yd, -3, 3, 4);
    nn_conv_pullback *pb;
    OK(nn_conv_forward(c, &p, &x, &w, &b, &y, &pb));

    /* fresh gradients, kept */
    nn_tensor dx = nans(c, 4, xd), dw = nans(c, 4, wd), db = nans(c, 1, bd);
    OK(nn_conv_backward_ex(c, &pb, &KEEP, &dy, &dx, &dw, &db));
    cr_assert_not_null(pb, "keep = 1 leaves the pullback");
    double *gx = vals(c, h, &dx), *gw = vals(c, h, &dw), *gb = vals(c, h, &db);

    /* accumulate all three, still kept */
    nn_tensor ax = ints(c, 4, xd, -5, 5, 5), aw = ints(c, 4, wd, -5, 5, 6),
              ab = ints(c, 1, bd, -5, 5, 7);
    double *px = vals(c, h, &ax), *pw = vals(c, h, &aw), *pbv = vals(c, h, &ab);
    OK(nn_conv_backward_ex(c, &pb, &ACC_ALL_KEEP, &dy, &ax, &aw, &ab));
    expect_sum(c, h, &ax, px, gx, tol, "conv dx accumulated");
    expect_sum(c, h, &aw, pw, gw, tol, "conv dw accumulated");
    expect_sum(c, h, &ab, pbv, gb, tol, "conv db accumulated");

    /* only dw accumulates, consumed: dx overwritten */
    nn_backward_options dw_only = {NN_ACCUMULATE_DW, 0, {0}};
    nn_tensor dx2 = nans(c, 4, xd), aw2 = ints(c, 4, wd, -5, 5, 8);
    double *pw2 = vals(c, h, &aw2);
    OK(nn_conv_backward_ex(c, &pb, &dw_only, &dy, &dx2, &aw2, NULL));
    cr_expect_null(pb, "keep = 0 consumes the pullback");
    expect_vals(c, h, &dx2, gx, tol, "conv dx overwritten by options without NN_ACCUMULATE_DX");
    expect_sum(c, h, &aw2, pw2, gw, tol, "conv dw accumulated (dw only)");

    /* the plain call overwrites; and a kept pullback freed unused */
    OK(nn_conv_forward(c, &p, &x, &w, &b, &y, &pb));
    nn_tensor ax3 = ints(c, 4, xd, -5, 5, 9);
    double *px3 = vals(c, h, &ax3);
    OK(nn_conv_backward(c, &pb, &dy, &ax3, NULL, NULL));
    cr_expect_null(pb);
    expect_vals(c, h, &ax3, gx, tol, "conv dx of nn_conv_backward overwritten");
    OK(nn_conv_forward(c, &p, &x, &w, &b, &y, &pb));
    OK(nn_conv_backward_ex(c, &pb, &KEEP, &dy, NULL, NULL, &db));
    expect_vals(c, h, &db, gb, tol, "conv db of a kept pullback");
    OK(nn_conv_pullback_free(&pb));
    cr_expect_null(pb);

    keep_out(o, gx, nn_tensor_numel(&dx));
    keep_out(o, gw, nn_tensor_numel(&dw));
    keep_out(o, gb, nn_tensor_numel(&db));
    double *all[] = {gx, gw, gb, px, pw, pbv, pw2, px3};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        free(all[i]);
    nn_tensor *ts[] = {&x, &w, &b, &y, &dy, &dx, &dw, &db, &ax, &aw, &ab, &dx2, &aw2, &ax3};
    drop(c, ts, (int)(sizeof ts / sizeof ts[0]));
}

void bc_linear(nn_ctx *c, nn_ctx *h, struct bc_out *o)
{
    nn_linear_params p;
    OK(nn_linear_params_default(&p));
    p.activation = NN_ACTIVATION_RELU;
    const double tol = 1e-6; /* integer sums: exact on both backends; a margin for the GPU */
    const int64_t xd[] = {3, 4, 5}, wd[] = {6, 5}, bd[] = {6}, yd[] = {3, 4, 6};
    nn_tensor x = ints(c, 3, xd, -3, 3, 11), w = ints(c, 2, wd, -2, 2, 12),
              b = ints(c, 1, bd, -1, 1, 13);
    nn_tensor y = mk(c, 3, yd), dy = ints(c, 3, yd, -3, 3, 14);
    nn_linear_pullback *pb;
    OK(nn_linear_forward(c, &p, &x, &w, &b, &y, &pb));
    nn_tensor dx = nans(c, 3, xd), dw = nans(c, 2, wd), db = nans(c, 1, bd);
    OK(nn_linear_backward_ex(c, &pb, &KEEP, &dy, &dx, &dw, &db));
    cr_assert_not_null(pb);
    double *gx = vals(c, h, &dx), *gw = vals(c, h, &dw), *gb = vals(c, h, &db);

    nn_tensor ax = ints(c, 3, xd, -5, 5, 15), aw = ints(c, 2, wd, -5, 5, 16),
              ab = ints(c, 1, bd, -5, 5, 17);
    double *px = vals(c, h, &ax), *pw = vals(c, h, &aw), *pbv = vals(c, h, &ab);
    OK(nn_linear_backward_ex(c, &pb, &ACC_ALL_KEEP, &dy, &ax, &aw, &ab));
    expect_sum(c, h, &ax, px, gx, tol, "linear dx accumulated");
    expect_sum(c, h, &aw, pw, gw, tol, "linear dw accumulated");
    expect_sum(c, h, &ab, pbv, gb, tol, "linear db accumulated");

    /* the plain call overwrites */
    nn_tensor dx2 = nans(c, 3, xd), ab2 = ints(c, 1, bd, -5, 5, 18);
    double *pb2 = vals(c, h, &ab2);
    OK(nn_linear_backward(c, &pb, &dy, &dx2, NULL, &ab2));
    cr_expect_null(pb);
    expect_vals(c, h, &dx2, gx, tol, "linear dx of nn_linear_backward");
    expect_vals(c, h, &ab2, gb, tol, "linear db of nn_linear_backward overwritten");

    keep_out(o, gx, nn_tensor_numel(&dx));
    keep_out(o, gw, nn_tensor_numel(&dw));
    keep_out(o, gb, nn_tensor_numel(&db));
    double *all[] = {gx, gw, gb, px, pw, pbv, pb2};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        free(all[i]);
    nn_tensor *ts[] = {&x, &w, &b, &y, &dy, &dx, &dw, &db, &ax, &aw, &ab, &dx2, &ab2};
    drop(c, ts, (int)(sizeof ts / sizeof ts[0]));
}

/* ---------------------------------------------------------------------------------------------
 * Pooling: pullback forms and the stateless one
 */

/* Distinct values (no ties in a window, so cuDNN and the reference pick the same maximum). */
static nn_tensor distinct(nn_ctx *c, nn_ctx *h, int rank, const int64_t *dims)
{
    nn_tensor ht = mk(h, rank, dims), t = mk(c, rank, dims);
    int64_t n = nn_tensor_numel(&ht);
    for (int64_t i = 0; i < n; i++) /* 37 is prime to n: a permutation of 0 .. n-1 */
        ((float *)ht.data)[i] = (float)((i * 37) % n - n / 2);
    OK(nn_tensor_copy(c, &t, &ht));
    OK(nn_tensor_free(h, &ht));
    return t;
}

void bc_pool(nn_ctx *c, nn_ctx *h, nn_pool_mode mode, struct bc_out *o)
{
    nn_pool_params p;
    memset(&p, 0, sizeof p);
    p.spatial_rank = 2;
    p.mode = mode;
    for (int i = 0; i < 2; i++) {
        p.window[i] = 3;
        p.stride[i] = 2;
        p.pad_lo[i] = p.pad_hi[i] = 1;
    }
    /* overlapping windows: an input gets gradient from several outputs */
    const int64_t xd[] = {2, 3, 7, 7}, yd[] = {2, 3, 4, 4};
    double tol = mode == NN_POOL_MAX ? 0 : 1e-6;
    nn_tensor x = distinct(c, h, 4, xd), y = mk(c, 4, yd), dy = ints(c, 4, yd, -3, 3, 21);
    nn_pool_pullback *pb;
    OK(nn_pool_forward(c, &p, &x, &y, &pb));
    nn_tensor dx = nans(c, 4, xd);
    OK(nn_pool_backward_ex(c, &pb, &KEEP, &dy, &dx));
    cr_assert_not_null(pb);
    double *g = vals(c, h, &dx);
    int64_t n = nn_tensor_numel(&dx);

    nn_tensor ax = ints(c, 4, xd, -5, 5, 22);
    double *prior = vals(c, h, &ax);
    OK(nn_pool_backward_ex(c, &pb, &ACC_DX_KEEP, &dy, &ax));
    expect_sum(c, h, &ax, prior, g, tol, "pool dx accumulated");

    /* stateless: the same gradient, overwritten and accumulated */
    nn_tensor sx = nans(c, 4, xd), sax = ints(c, 4, xd, -5, 5, 22);
    OK(nn_pool_backward_stateless(c, &p, &x, &y, &dy, &sx, 0));
    expect_vals(c, h, &sx, g, tol, "pool dx of nn_pool_backward_stateless");
    OK(nn_pool_backward_stateless(c, &p, &x, &y, &dy, &sax, NN_ACCUMULATE_DX));
    expect_sum(c, h, &sax, prior, g, tol, "pool dx of nn_pool_backward_stateless, accumulated");

    /* the old call: overwrite and consume */
    nn_tensor dx2 = nans(c, 4, xd);
    OK(nn_pool_backward(c, &pb, &dy, &dx2));
    cr_expect_null(pb);
    expect_vals(c, h, &dx2, g, tol, "pool dx of nn_pool_backward after kept calls");

    keep_out(o, g, n);
    free(g);
    free(prior);
    nn_tensor *ts[] = {&x, &y, &dy, &dx, &ax, &sx, &sax, &dx2};
    drop(c, ts, (int)(sizeof ts / sizeof ts[0]));
}

/* ---------------------------------------------------------------------------------------------
 * Softmax and cross-entropy
 */

void bc_softmax(nn_ctx *c, nn_ctx *h, nn_softmax_mode mode, struct bc_out *o)
{
    nn_softmax_params p;
    OK(nn_softmax_params_default(&p));
    p.mode = mode;
    const int64_t xd[] = {2, 5, 3};
    nn_tensor x = ints(c, 3, xd, -3, 3, 31), y = mk(c, 3, xd), dy = ints(c, 3, xd, -3, 3, 32);
    nn_softmax_pullback *pb;
    OK(nn_softmax_forward(c, &p, &x, &y, &pb));
    nn_tensor dx = nans(c, 3, xd);
    OK(nn_softmax_backward_ex(c, &pb, &KEEP, &dy, &dx));
    cr_assert_not_null(pb);
    double *g = vals(c, h, &dx);
    nn_tensor ax = ints(c, 3, xd, -5, 5, 33);
    double *prior = vals(c, h, &ax);
    OK(nn_softmax_backward_ex(c, &pb, &ACC_DX_KEEP, &dy, &ax));
    expect_sum(c, h, &ax, prior, g, 1e-6, "softmax dx accumulated");
    nn_tensor ax2 = ints(c, 3, xd, -5, 5, 33);
    OK(nn_softmax_backward(c, &pb, &dy, &ax2)); /* the plain call overwrites */
    cr_expect_null(pb);
    expect_vals(c, h, &ax2, g, 1e-6, "softmax dx of nn_softmax_backward overwritten");
    keep_out(o, g, nn_tensor_numel(&dx));
    free(g);
    free(prior);
    nn_tensor *ts[] = {&x, &y, &dy, &dx, &ax, &ax2};
    drop(c, ts, (int)(sizeof ts / sizeof ts[0]));
}

void bc_xent(nn_ctx *c, nn_ctx *h, struct bc_out *o)
{
    const int64_t xd[] = {4, 5}, ld[] = {4};
    int64_t t[4] = {0, 4, 2, 2};
    nn_class_targets tg = {t, NN_INDEX_I64, {0}};
    nn_tensor x = ints(c, 2, xd, -3, 3, 41), loss = mk(c, 1, ld), dl = ints(c, 1, ld, 1, 3, 42);
    nn_softmax_cross_entropy_pullback *pb;
    OK(nn_softmax_cross_entropy_forward(c, &x, &tg, &loss, &pb));
    nn_tensor dx = nans(c, 2, xd);
    OK(nn_softmax_cross_entropy_backward_ex(c, &pb, &KEEP, &dl, &dx));
    cr_assert_not_null(pb);
    double *g = vals(c, h, &dx);
    nn_tensor ax = ints(c, 2, xd, -5, 5, 43);
    double *prior = vals(c, h, &ax);
    OK(nn_softmax_cross_entropy_backward_ex(c, &pb, &ACC_DX_KEEP, &dl, &ax));
    expect_sum(c, h, &ax, prior, g, 1e-6, "cross-entropy dx accumulated");
    nn_tensor dx2 = nans(c, 2, xd);
    OK(nn_softmax_cross_entropy_backward(c, &pb, &dl, &dx2));
    cr_expect_null(pb);
    expect_vals(c, h, &dx2, g, 1e-6, "cross-entropy dx of the old call after kept calls");
    keep_out(o, g, nn_tensor_numel(&dx));
    free(g);
    free(prior);
    nn_tensor *ts[] = {&x, &loss, &dl, &dx, &ax, &dx2};
    drop(c, ts, (int)(sizeof ts / sizeof ts[0]));
}

/* ---------------------------------------------------------------------------------------------
 * Layer norm: dx, dgamma (DW) and dbeta (DB), each accumulated by its own bit
 */

void bc_layernorm(nn_ctx *c, nn_ctx *h, struct bc_out *o)
{
    nn_layernorm_params p;
    OK(nn_layernorm_params_default(&p));
    const int64_t xd[] = {6, 5}, gd[] = {5};
    nn_tensor x = ints(c, 2, xd, -3, 3, 51), y = mk(c, 2, xd), dy = ints(c, 2, xd, -3, 3, 52);
    nn_tensor gm = ints(c, 1, gd, 1, 3, 53), bt = ints(c, 1, gd, -2, 2, 54);
    nn_layernorm_pullback *pb;
    OK(nn_layernorm_forward(c, &p, &x, &gm, &bt, &y, &pb));
    nn_tensor dx = nans(c, 2, xd), dg = nans(c, 1, gd), db = nans(c, 1, gd);
    OK(nn_layernorm_backward_ex(c, &pb, &KEEP, &dy, &dx, &dg, &db));
    cr_assert_not_null(pb);
    nn_tensor *fresh[] = {&dx, &dg, &db};
    double *g[3];
    for (int i = 0; i < 3; i++)
        g[i] = vals(c, h, fresh[i]);
    nn_tensor ax = ints(c, 2, xd, -5, 5, 55), ag = ints(c, 1, gd, -5, 5, 56),
              ab = ints(c, 1, gd, -5, 5, 57);
    nn_tensor *acc[] = {&ax, &ag, &ab};
    double *prior[3];
    for (int i = 0; i < 3; i++)
        prior[i] = vals(c, h, acc[i]);
    OK(nn_layernorm_backward_ex(c, &pb, &ACC_ALL_KEEP, &dy, &ax, &ag, &ab));
    static const char *const what[] = {"layernorm dx accumulated", "layernorm dgamma accumulated",
                                       "layernorm dbeta accumulated"};
    for (int i = 0; i < 3; i++)
        expect_sum(c, h, acc[i], prior[i], g[i], 1e-6, what[i]);
    nn_tensor dx2 = ints(c, 2, xd, -5, 5, 58);
    OK(nn_layernorm_backward(c, &pb, &dy, &dx2, NULL, NULL)); /* the plain call overwrites */
    cr_expect_null(pb);
    expect_vals(c, h, &dx2, g[0], 1e-6, "layernorm dx of nn_layernorm_backward overwritten");
    for (int i = 0; i < 3; i++) {
        keep_out(o, g[i], nn_tensor_numel(fresh[i]));
        free(g[i]);
        free(prior[i]);
    }
    nn_tensor *ts[] = {&x, &y, &dy, &gm, &bt, &dx, &dg, &db, &ax, &ag, &ab, &dx2};
    drop(c, ts, (int)(sizeof ts / sizeof ts[0]));
}

/* ---------------------------------------------------------------------------------------------
 * RNN: dw accumulated at backward time; keep and dx accumulation refused
 */

struct rnn_io {
    nn_rnn_params p;
    nn_tensor x, w, y, dy;
};

static nn_rnn_pullback *rnn_forward(nn_ctx *c, struct rnn_io *r)
{
    nn_rnn_pullback *pb;
    OK(nn_rnn_forward(c, &r->p, &(nn_rnn_forward_tensors){.x = &r->x, .w = &r->w, .y = &r->y},
                      &pb));
    return pb;
}

void bc_rnn(nn_ctx *c, nn_ctx *h)
{
    struct rnn_io r;
    OK(nn_rnn_params_default(&r.p, NN_RNN_LSTM, 3, 4));
    int64_t nw;
    OK(nn_rnn_weights_size(c, &r.p, NN_DTYPE_F32, &nw));
    const int64_t xd[] = {3, 2, 3}, yd[] = {3, 2, 4};
    r.x = mk(c, 3, xd);
    OK(nn_tensor_fill_uniform(c, &r.x, -1, 1, 51));
    r.w = mk(c, 1, &nw);
    OK(nn_tensor_fill_uniform(c, &r.w, -0.5, 0.5, 52));
    r.y = mk(c, 3, yd);
    r.dy = mk(c, 3, yd);
    OK(nn_tensor_fill_uniform(c, &r.dy, -1, 1, 53));

    /* a fresh dw over a nonzero one: accumulate 0 overwrites */
    nn_rnn_pullback *pb = rnn_forward(c, &r);
    nn_tensor dw = ints(c, 1, &nw, -3, 3, 55), dx = mk(c, 3, xd);
    nn_backward_options fresh = {0, 0, {0}};
    OK(nn_rnn_backward_ex(c, &pb, &fresh,
                          &(nn_rnn_backward_tensors){.dy = &r.dy, .dx = &dx, .dw = &dw}));
    cr_expect_null(pb);
    double *g = vals(c, h, &dw);

    /* keep and dx accumulation are refused, the pullback stays usable */
    pb = rnn_forward(c, &r);
    nn_backward_options keep = {NN_ACCUMULATE_DW, 1, {0}}, accdx = {NN_ACCUMULATE_DX, 0, {0}};
    nn_tensor aw = ints(c, 1, &nw, -3, 3, 54);
    double *prior = vals(c, h, &aw);
    cr_expect_eq(
        nn_rnn_backward_ex(c, &pb, &keep, &(nn_rnn_backward_tensors){.dy = &r.dy, .dw = &aw}),
        NN_E_UNSUPPORTED);
    cr_expect(strstr(nn_last_error()->message, "nn_rnn_backward_ex: opts.keep = 1") &&
                  strstr(nn_last_error()->message, "single-use"),
              "%s", nn_last_error()->message);
    cr_expect_eq(
        nn_rnn_backward_ex(c, &pb, &accdx, &(nn_rnn_backward_tensors){.dy = &r.dy, .dx = &dx}),
        NN_E_UNSUPPORTED);
    cr_expect(strstr(nn_last_error()->message, "NN_ACCUMULATE_DX"), "%s", nn_last_error()->message);
    cr_assert_not_null(pb, "a refused call leaves the pullback with the caller");
    nn_backward_options acc = {NN_ACCUMULATE_DW, 0, {0}};
    OK(nn_rnn_backward_ex(c, &pb, &acc, &(nn_rnn_backward_tensors){.dy = &r.dy, .dw = &aw}));
    cr_expect_null(pb);
    expect_sum(c, h, &aw, prior, g, 1e-5, "rnn dw accumulated at backward time");

    /* the plain call overwrites: accumulating is asked of nn_rnn_backward_ex() alone */
    pb = rnn_forward(c, &r);
    nn_tensor aw2 = ints(c, 1, &nw, -3, 3, 54);
    OK(nn_rnn_backward(c, &pb, &(nn_rnn_backward_tensors){.dy = &r.dy, .dw = &aw2}));
    expect_vals(c, h, &aw2, g, 1e-5, "rnn dw of nn_rnn_backward, overwritten");
    free(g);
    free(prior);
    nn_tensor *ts[] = {&r.x, &r.w, &r.y, &r.dy, &dw, &dx, &aw, &aw2};
    drop(c, ts, (int)(sizeof ts / sizeof ts[0]));
}

/* Catalogue rows: the backward calls with options (include/nnprim/backward.h) of every family,
 * and the stateless pooling backward (include/nnprim/pool.h). The tensor checks of a
 * *_backward_ex() call are its plain call's (one code path), so its rows here are the options,
 * the pullback checks and a few tensors; nn_pool_backward_stateless gets every argument. */
#include <string.h>

#include "catalogue.h"

#define CALL(fname) static nn_status fname(struct cat *c)

static const nn_backward_options KEEP = {0, 1, {0}};

/* ---- nn_conv_backward_ex ---- */

static nn_conv_pullback *conv_pb(struct cat *c)
{
    nn_conv_pullback *pb = NULL;
    cr_assert_eq(nn_conv_forward(c->ctx, &c->cp, &c->x, &c->w, &c->b, &c->y, &pb), NN_OK,
                 "fixture: %s", nn_last_error()->message);
    return pb;
}

/* A refused call leaves the pullback with the caller: a valid retry works. */
static nn_status conv_retry(struct cat *c, nn_status st, nn_conv_pullback **pb)
{
    if (st == NN_OK) {
        cr_assert_eq(nn_conv_pullback_free(pb), NN_OK, "free a kept pullback");
        return st;
    }
    nn_error_info e = *nn_last_error();
    cr_assert_not_null(*pb, "a refused call leaves the pullback with the caller");
    cr_assert_eq(nn_conv_backward_ex(c->ctx, pb, NULL, &c->dy, &c->dx, &c->dw, &c->db), NN_OK,
                 "a valid retry with the same pullback: %s", nn_last_error()->message);
    cr_assert_null(*pb);
    cr_assert_str_eq(nn_last_error()->message, e.message, "the record changed");
    return st;
}

static nn_status conv_opts(struct cat *c, const nn_backward_options *o)
{
    nn_conv_pullback *pb = conv_pb(c);
    return conv_retry(c, nn_conv_backward_ex(c->ctx, &pb, o, &c->dy, &c->dx, &c->dw, &c->db), &pb);
}

CALL(cb_null_ctx)
{
    nn_conv_pullback *pb = conv_pb(c);
    return conv_retry(c, nn_conv_backward_ex(NULL, &pb, &KEEP, &c->dy, &c->dx, NULL, NULL), &pb);
}
CALL(cb_null_pullback)
{
    return nn_conv_backward_ex(c->ctx, NULL, &KEEP, &c->dy, &c->dx, NULL, NULL);
}
CALL(cb_star_null)
{
    nn_conv_pullback *pb = NULL;
    return nn_conv_backward_ex(c->ctx, &pb, &KEEP, &c->dy, &c->dx, NULL, NULL);
}
CALL(cb_twice)
{
    nn_conv_pullback *pb = conv_pb(c), *copy = pb;
    cr_assert_eq(nn_conv_backward_ex(c->ctx, &pb, NULL, &c->dy, &c->dx, NULL, NULL), NN_OK);
    return nn_conv_backward_ex(c->ctx, &copy, &KEEP, &c->dy, &c->dx, NULL, NULL);
}
CALL(cb_kept_then_freed)
{
    nn_conv_pullback *pb = conv_pb(c), *copy;
    cr_assert_eq(nn_conv_backward_ex(c->ctx, &pb, &KEEP, &c->dy, &c->dx, NULL, NULL), NN_OK);
    copy = pb;
    cr_assert_eq(nn_conv_pullback_free(&pb), NN_OK);
    return nn_conv_backward_ex(c->ctx, &copy, &KEEP, &c->dy, &c->dx, NULL, NULL);
}
CALL(cb_other_ctx)
{
    nn_conv_pullback *pb = conv_pb(c);
    return conv_retry(
        c, nn_conv_backward_ex(cat_other_ctx(c), &pb, &KEEP, &c->dy, &c->dx, NULL, NULL), &pb);
}
CALL(cb_pool_pullback)
{
    nn_pool_pullback *pp = NULL;
    cr_assert_eq(nn_pool_forward(c->ctx, &c->pp, &c->px, &c->py, &pp), NN_OK);
    nn_conv_pullback *pb = (nn_conv_pullback *)pp;
    nn_status st = nn_conv_backward_ex(c->ctx, &pb, &KEEP, &c->dy, &c->dx, NULL, NULL);
    cr_assert_eq(nn_pool_pullback_free(&pp), NN_OK, "the pooling pullback is intact");
    return st;
}
CALL(cb_reserved)
{
    nn_backward_options o = KEEP;
    o.reserved[3] = 1;
    return conv_opts(c, &o);
}
CALL(cb_keep_2)
{
    nn_backward_options o = {0, 2, {0}};
    return conv_opts(c, &o);
}
CALL(cb_keep_negative)
{
    nn_backward_options o = {0, -1, {0}};
    return conv_opts(c, &o);
}
CALL(cb_acc_unknown)
{
    nn_backward_options o = {NN_ACCUMULATE_DB << 1, 0, {0}};
    return conv_opts(c, &o);
}
CALL(cb_acc_high)
{
    nn_backward_options o = {0x80000000u | NN_ACCUMULATE_DX, 0, {0}};
    return conv_opts(c, &o);
}
/* Edge: every accumulate bit and keep are valid for conv. */
CALL(cb_all_ok)
{
    nn_backward_options o = {NN_ACCUMULATE_DX | NN_ACCUMULATE_DW | NN_ACCUMULATE_DB, 1, {0}};
    return conv_opts(c, &o);
}
CALL(cb_dy_dims)
{
    nn_tensor dy = c->dy;
    dy.dims[3] = 2;
    cat_packed(&dy);
    nn_conv_pullback *pb = conv_pb(c);
    return conv_retry(c, nn_conv_backward_ex(c->ctx, &pb, &KEEP, &dy, &c->dx, NULL, NULL), &pb);
}
CALL(cb_dx_on_x)
{
    nn_conv_pullback *pb = conv_pb(c);
    nn_tensor dx = c->x;
    return conv_retry(c, nn_conv_backward_ex(c->ctx, &pb, &KEEP, &c->dy, &dx, NULL, NULL), &pb);
}
CALL(cb_dx_space)
{
    nn_conv_pullback *pb = conv_pb(c);
    nn_tensor dx = cat_wrong_space(c, &c->dx);
    return conv_retry(c, nn_conv_backward_ex(c->ctx, &pb, &KEEP, &c->dy, &dx, NULL, NULL), &pb);
}

/* ---- nn_pool_backward_ex ---- */

static nn_pool_pullback *pool_pb(struct cat *c)
{
    nn_pool_pullback *pb = NULL;
    cr_assert_eq(nn_pool_forward(c->ctx, &c->pp, &c->px, &c->py, &pb), NN_OK, "fixture: %s",
                 nn_last_error()->message);
    return pb;
}

static nn_status pool_retry(struct cat *c, nn_status st, nn_pool_pullback **pb)
{
    if (st == NN_OK) {
        cr_assert_eq(nn_pool_pullback_free(pb), NN_OK, "free a kept pullback");
        return st;
    }
    nn_error_info e = *nn_last_error();
    cr_assert_not_null(*pb, "a refused call leaves the pullback with the caller");
    cr_assert_eq(nn_pool_backward_ex(c->ctx, pb, NULL, &c->pdy, &c->pdx), NN_OK,
                 "a valid retry with the same pullback: %s", nn_last_error()->message);
    cr_assert_null(*pb);
    cr_assert_str_eq(nn_last_error()->message, e.message, "the record changed");
    return st;
}

static nn_status pool_opts(struct cat *c, const nn_backward_options *o)
{
    nn_pool_pullback *pb = pool_pb(c);
    return pool_retry(c, nn_pool_backward_ex(c->ctx, &pb, o, &c->pdy, &c->pdx), &pb);
}

CALL(pb_null_ctx)
{
    nn_pool_pullback *pb = pool_pb(c);
    return pool_retry(c, nn_pool_backward_ex(NULL, &pb, &KEEP, &c->pdy, &c->pdx), &pb);
}
CALL(pb_null_pullback)
{
    return nn_pool_backward_ex(c->ctx, NULL, &KEEP, &c->pdy, &c->pdx);
}
CALL(pb_star_null)
{
    nn_pool_pullback *pb = NULL;
    return nn_pool_backward_ex(c->ctx, &pb, &KEEP, &c->pdy, &c->pdx);
}
CALL(pb_kept_then_freed)
{
    nn_pool_pullback *pb = pool_pb(c), *copy;
    cr_assert_eq(nn_pool_backward_ex(c->ctx, &pb, &KEEP, &c->pdy, &c->pdx), NN_OK);
    copy = pb;
    cr_assert_eq(nn_pool_pullback_free(&pb), NN_OK);
    return nn_pool_backward_ex(c->ctx, &copy, &KEEP, &c->pdy, &c->pdx);
}
CALL(pb_other_ctx)
{
    nn_pool_pullback *pb = pool_pb(c);
    return pool_retry(c, nn_pool_backward_ex(cat_other_ctx(c), &pb, &KEEP, &c->pdy, &c->pdx), &pb);
}
CALL(pb_conv_pullback)
{
    nn_conv_pullback *cp = conv_pb(c);
    nn_pool_pullback *pb = (nn_pool_pullback *)cp;
    nn_status st = nn_pool_backward_ex(c->ctx, &pb, &KEEP, &c->pdy, &c->pdx);
    cr_assert_eq(nn_conv_pullback_free(&cp), NN_OK, "the conv pullback is intact");
    return st;
}
CALL(pb_reserved)
{
    nn_backward_options o = KEEP;
    o.reserved[0] = 7;
    return pool_opts(c, &o);
}
CALL(pb_keep_2)
{
    nn_backward_options o = {0, 2, {0}};
    return pool_opts(c, &o);
}
CALL(pb_acc_unknown)
{
    nn_backward_options o = {0x10, 0, {0}};
    return pool_opts(c, &o);
}
CALL(pb_acc_dw)
{
    nn_backward_options o = {NN_ACCUMULATE_DW, 0, {0}};
    return pool_opts(c, &o);
}
CALL(pb_acc_db)
{
    nn_backward_options o = {NN_ACCUMULATE_DX | NN_ACCUMULATE_DB, 1, {0}};
    return pool_opts(c, &o);
}
CALL(pb_acc_dx_ok)
{
    nn_backward_options o = {NN_ACCUMULATE_DX, 1, {0}};
    return pool_opts(c, &o);
}
CALL(pb_dx_dims)
{
    nn_tensor dx = c->pdx;
    dx.dims[1] = 1;
    cat_packed(&dx);
    nn_pool_pullback *pb = pool_pb(c);
    return pool_retry(c, nn_pool_backward_ex(c->ctx, &pb, &KEEP, &c->pdy, &dx), &pb);
}
CALL(pb_dx_on_x)
{
    nn_pool_pullback *pb = pool_pb(c);
    nn_tensor dx = c->px;
    return pool_retry(c, nn_pool_backward_ex(c->ctx, &pb, &KEEP, &c->pdy, &dx), &pb);
}

/* ---- nn_pool_backward_stateless ---- */

static nn_status sl(struct cat *c, const nn_pool_params *p, const nn_tensor *x, const nn_tensor *y,
                    const nn_tensor *dy, nn_tensor *dx, unsigned acc)
{
    return nn_pool_backward_stateless(c->ctx, p, x, y, dy, dx, acc);
}
/* The fixture's call with one tensor replaced (which: 0 x, 1 y, 2 dy, 3 dx). */
static nn_status sl_with(struct cat *c, int which, nn_tensor *t)
{
    const nn_tensor *x = which == 0 ? t : &c->px, *y = which == 1 ? t : &c->py;
    const nn_tensor *dy = which == 2 ? t : &c->pdy;
    nn_tensor *dx = which == 3 ? t : &c->pdx;
    return sl(c, &c->pp, x, y, dy, dx, 0);
}

CALL(s_null_ctx)
{
    return nn_pool_backward_stateless(NULL, &c->pp, &c->px, &c->py, &c->pdy, &c->pdx, 0);
}
CALL(s_null_params)
{
    return sl(c, NULL, &c->px, &c->py, &c->pdy, &c->pdx, 0);
}
CALL(s_null_x)
{
    return sl(c, &c->pp, NULL, &c->py, &c->pdy, &c->pdx, 0);
}
CALL(s_null_y)
{
    return sl(c, &c->pp, &c->px, NULL, &c->pdy, &c->pdx, 0);
}
CALL(s_null_dy)
{
    return sl(c, &c->pp, &c->px, &c->py, NULL, &c->pdx, 0);
}
CALL(s_null_dx)
{
    return sl(c, &c->pp, &c->px, &c->py, &c->pdy, NULL, 0);
}
CALL(s_rank)
{
    c->pp.spatial_rank = 4;
    return sl(c, &c->pp, &c->px, &c->py, &c->pdy, &c->pdx, 0);
}
CALL(s_mode)
{
    c->pp.mode = (nn_pool_mode)7;
    return sl(c, &c->pp, &c->px, &c->py, &c->pdy, &c->pdx, 0);
}
CALL(s_window)
{
    c->pp.window[1] = 0;
    return sl(c, &c->pp, &c->px, &c->py, &c->pdy, &c->pdx, 0);
}
CALL(s_stride)
{
    c->pp.stride[0] = -1;
    return sl(c, &c->pp, &c->px, &c->py, &c->pdy, &c->pdx, 0);
}
CALL(s_pad)
{
    c->pp.pad_hi[1] = 2;
    return sl(c, &c->pp, &c->px, &c->py, &c->pdy, &c->pdx, 0);
}
CALL(s_reserved)
{
    c->pp.reserved[2] = 1;
    return sl(c, &c->pp, &c->px, &c->py, &c->pdy, &c->pdx, 0);
}
CALL(s_acc_unknown)
{
    return sl(c, &c->pp, &c->px, &c->py, &c->pdy, &c->pdx, 0x100);
}
CALL(s_acc_dw)
{
    return sl(c, &c->pp, &c->px, &c->py, &c->pdy, &c->pdx, NN_ACCUMULATE_DW);
}
CALL(s_x_rank)
{
    nn_tensor x = c->px;
    x.rank = 3;
    cat_packed(&x);
    return sl_with(c, 0, &x);
}
CALL(s_y_dims)
{
    nn_tensor y = c->py;
    y.dims[3] = 1;
    cat_packed(&y);
    return sl_with(c, 1, &y);
}
CALL(s_dy_dims)
{
    nn_tensor dy = c->pdy;
    dy.dims[2] = 1;
    cat_packed(&dy);
    return sl_with(c, 2, &dy);
}
CALL(s_dx_dims)
{
    nn_tensor dx = c->pdx;
    dx.dims[0] = 2;
    dx.dims[1] = 1;
    cat_packed(&dx);
    return sl_with(c, 3, &dx);
}
CALL(s_y_dtype)
{
    nn_tensor y = c->py;
    y.dtype = NN_DTYPE_F16;
    cat_packed(&y);
    return sl_with(c, 1, &y);
}
CALL(s_dx_dtype)
{
    nn_tensor dx = c->pdx;
    dx.dtype = NN_DTYPE_BF16;
    cat_packed(&dx);
    return sl_with(c, 3, &dx);
}
CALL(s_x_space)
{
    nn_tensor t = cat_wrong_space(c, &c->px);
    return sl_with(c, 0, &t);
}
CALL(s_y_space)
{
    nn_tensor t = cat_wrong_space(c, &c->py);
    return sl_with(c, 1, &t);
}
CALL(s_dy_space)
{
    nn_tensor t = cat_wrong_space(c, &c->pdy);
    return sl_with(c, 2, &t);
}
CALL(s_dx_space)
{
    nn_tensor t = cat_wrong_space(c, &c->pdx);
    return sl_with(c, 3, &t);
}
CALL(s_dx_claim)
{
    nn_tensor t = cat_claim_other_space(c, &c->pdx);
    return sl_with(c, 3, &t);
}
CALL(s_dx_on_x)
{
    nn_tensor dx = c->px;
    return sl_with(c, 3, &dx);
}
CALL(s_dx_on_y)
{
    nn_tensor y = c->pdx;
    y.dims[2] = y.dims[3] = 2;
    cat_packed(&y);
    return sl_with(c, 1, &y);
}
CALL(s_dx_on_dy)
{
    nn_tensor dy = c->pdx;
    dy.dims[2] = dy.dims[3] = 2;
    cat_packed(&dy);
    return sl_with(c, 2, &dy);
}
CALL(s_dx_self)
{
    nn_tensor dx = c->pdx;
    dx.strides[1] = 0;
    return sl_with(c, 3, &dx);
}
CALL(s_dx_misaligned)
{
    nn_tensor dx = c->pdx;
    dx.data = (char *)dx.data + 2;
    return sl_with(c, 3, &dx);
}
CALL(s_x_data_null)
{
    nn_tensor x = c->px;
    x.data = NULL;
    return sl_with(c, 0, &x);
}
/* cuDNN's legacy pooling pads both sides alike. */
CALL(s_asym_pad)
{
    nn_pool_params p = c->pp;
    p.window[0] = p.window[1] = 3;
    p.stride[0] = p.stride[1] = 1;
    p.pad_hi[0] = 1; /* y: 1 x 2 x 3 x 2 */
    int64_t yd[] = {1, 2, 3, 2};
    nn_tensor y = cat_tensor(c, c->py.dtype, 4, yd, 1), dy = cat_tensor(c, c->py.dtype, 4, yd, 2);
    return sl(c, &p, &c->px, &y, &dy, &c->pdx, 0);
}
/* Edge: accumulating is valid and adds. */
CALL(s_acc_ok)
{
    return sl(c, &c->pp, &c->px, &c->py, &c->pdy, &c->pdx, NN_ACCUMULATE_DX);
}
CALL(s_x_count_overflow)
{
    nn_tensor x = cat_count_overflow(&c->px);
    return sl_with(c, 0, &x);
}
CALL(s_y_extent_overflow)
{
    nn_tensor y = cat_extent_overflow(&c->py);
    return sl_with(c, 1, &y);
}
CALL(s_dy_count_overflow)
{
    nn_tensor dy = cat_count_overflow(&c->pdy);
    return sl_with(c, 2, &dy);
}
CALL(s_dx_extent_overflow)
{
    nn_tensor dx = cat_extent_overflow(&c->pdx);
    return sl_with(c, 3, &dx);
}

/* ---- nn_linear_backward_ex ---- */

struct lin {
    nn_linear_params p;
    nn_tensor x, w, y, dy, dx;
    nn_linear_pullback *pb;
};

static void lin_setup(struct cat *c, struct lin *l)
{
    cr_assert_eq(nn_linear_params_default(&l->p), NN_OK);
    const int64_t xd[] = {2, 3}, wd[] = {4, 3}, yd[] = {2, 4};
    l->x = cat_tensor(c, NN_DTYPE_F32, 2, xd, 1);
    l->w = cat_tensor(c, NN_DTYPE_F32, 2, wd, 2);
    l->y = cat_tensor(c, NN_DTYPE_F32, 2, yd, 3);
    l->dy = cat_tensor(c, NN_DTYPE_F32, 2, yd, 4);
    l->dx = cat_tensor(c, NN_DTYPE_F32, 2, xd, 5);
    cr_assert_eq(nn_linear_forward(c->ctx, &l->p, &l->x, &l->w, NULL, &l->y, &l->pb), NN_OK,
                 "fixture: %s", nn_last_error()->message);
}

static nn_status lin_opts(struct cat *c, const nn_backward_options *o)
{
    struct lin l;
    lin_setup(c, &l);
    nn_status st = nn_linear_backward_ex(c->ctx, &l.pb, o, &l.dy, &l.dx, NULL, NULL);
    if (st != NN_OK) cr_assert_not_null(l.pb, "a refused call leaves the pullback");
    cr_assert_eq(nn_linear_pullback_free(&l.pb), NN_OK);
    return st;
}

CALL(lb_null_ctx)
{
    struct lin l;
    lin_setup(c, &l);
    nn_status st = nn_linear_backward_ex(NULL, &l.pb, &KEEP, &l.dy, &l.dx, NULL, NULL);
    cr_assert_eq(nn_linear_pullback_free(&l.pb), NN_OK);
    return st;
}
CALL(lb_null_pullback)
{
    struct lin l;
    lin_setup(c, &l);
    nn_status st = nn_linear_backward_ex(c->ctx, NULL, &KEEP, &l.dy, &l.dx, NULL, NULL);
    cr_assert_eq(nn_linear_pullback_free(&l.pb), NN_OK);
    return st;
}
CALL(lb_conv_pullback)
{
    struct lin l;
    lin_setup(c, &l);
    nn_conv_pullback *cp = conv_pb(c);
    nn_linear_pullback *pb = (nn_linear_pullback *)cp;
    nn_status st = nn_linear_backward_ex(c->ctx, &pb, &KEEP, &l.dy, &l.dx, NULL, NULL);
    cr_assert_eq(nn_conv_pullback_free(&cp), NN_OK);
    cr_assert_eq(nn_linear_pullback_free(&l.pb), NN_OK);
    return st;
}
CALL(lb_reserved)
{
    nn_backward_options o = KEEP;
    o.reserved[1] = 1;
    return lin_opts(c, &o);
}
CALL(lb_keep_3)
{
    nn_backward_options o = {0, 3, {0}};
    return lin_opts(c, &o);
}
CALL(lb_acc_unknown)
{
    nn_backward_options o = {0x8, 0, {0}};
    return lin_opts(c, &o);
}
CALL(lb_all_ok)
{
    nn_backward_options o = {NN_ACCUMULATE_DX | NN_ACCUMULATE_DW | NN_ACCUMULATE_DB, 1, {0}};
    return lin_opts(c, &o);
}
CALL(lb_dx_dims)
{
    struct lin l;
    lin_setup(c, &l);
    nn_tensor dx = l.dx;
    dx.dims[1] = 2;
    cat_packed(&dx);
    nn_status st = nn_linear_backward_ex(c->ctx, &l.pb, &KEEP, &l.dy, &dx, NULL, NULL);
    cr_assert_eq(nn_linear_pullback_free(&l.pb), NN_OK);
    return st;
}

/* ---- nn_softmax_backward_ex, nn_softmax_cross_entropy_backward_ex ---- */

struct smx {
    nn_tensor x, y, dy, dx, loss, dloss;
    int64_t t[2];
    nn_softmax_pullback *pb;
    nn_softmax_cross_entropy_pullback *xpb;
};

static void smx_setup(struct cat *c, struct smx *s)
{
    nn_softmax_params p;
    cr_assert_eq(nn_softmax_params_default(&p), NN_OK);
    const int64_t xd[] = {2, 3}, ld[] = {2};
    s->x = cat_tensor(c, NN_DTYPE_F32, 2, xd, 1);
    s->y = cat_tensor(c, NN_DTYPE_F32, 2, xd, 2);
    s->dy = cat_tensor(c, NN_DTYPE_F32, 2, xd, 3);
    s->dx = cat_tensor(c, NN_DTYPE_F32, 2, xd, 4);
    s->loss = cat_tensor(c, NN_DTYPE_F32, 1, ld, 5);
    s->dloss = cat_tensor(c, NN_DTYPE_F32, 1, ld, 6);
    s->t[0] = 1;
    s->t[1] = 2;
    nn_class_targets tg = {s->t, NN_INDEX_I64, {0}};
    cr_assert_eq(nn_softmax_forward(c->ctx, &p, &s->x, &s->y, &s->pb), NN_OK, "fixture: %s",
                 nn_last_error()->message);
    cr_assert_eq(nn_softmax_cross_entropy_forward(c->ctx, &s->x, &tg, &s->loss, &s->xpb), NN_OK,
                 "fixture: %s", nn_last_error()->message);
}

static void smx_free(struct smx *s)
{
    cr_assert_eq(nn_softmax_pullback_free(&s->pb), NN_OK);
    cr_assert_eq(nn_softmax_cross_entropy_pullback_free(&s->xpb), NN_OK);
}

static nn_status smx_opts(struct cat *c, const nn_backward_options *o)
{
    struct smx s;
    smx_setup(c, &s);
    nn_status st = nn_softmax_backward_ex(c->ctx, &s.pb, o, &s.dy, &s.dx);
    if (st != NN_OK) cr_assert_not_null(s.pb, "a refused call leaves the pullback");
    smx_free(&s);
    return st;
}

static nn_status xent_opts(struct cat *c, const nn_backward_options *o)
{
    struct smx s;
    smx_setup(c, &s);
    nn_status st = nn_softmax_cross_entropy_backward_ex(c->ctx, &s.xpb, o, &s.dloss, &s.dx);
    if (st != NN_OK) cr_assert_not_null(s.xpb, "a refused call leaves the pullback");
    smx_free(&s);
    return st;
}

CALL(sb_null_ctx)
{
    struct smx s;
    smx_setup(c, &s);
    nn_status st = nn_softmax_backward_ex(NULL, &s.pb, &KEEP, &s.dy, &s.dx);
    smx_free(&s);
    return st;
}
CALL(sb_xent_pullback)
{
    struct smx s;
    smx_setup(c, &s);
    nn_softmax_pullback *pb = (nn_softmax_pullback *)s.xpb;
    nn_status st = nn_softmax_backward_ex(c->ctx, &pb, &KEEP, &s.dy, &s.dx);
    smx_free(&s);
    return st;
}
CALL(sb_reserved)
{
    nn_backward_options o = KEEP;
    o.reserved[2] = 1;
    return smx_opts(c, &o);
}
CALL(sb_keep_2)
{
    nn_backward_options o = {0, 2, {0}};
    return smx_opts(c, &o);
}
CALL(sb_acc_dw)
{
    nn_backward_options o = {NN_ACCUMULATE_DW, 0, {0}};
    return smx_opts(c, &o);
}
CALL(sb_acc_unknown)
{
    nn_backward_options o = {0x40, 0, {0}};
    return smx_opts(c, &o);
}
CALL(sb_acc_ok)
{
    nn_backward_options o = {NN_ACCUMULATE_DX, 1, {0}};
    return smx_opts(c, &o);
}
CALL(sb_dx_on_y)
{
    struct smx s;
    smx_setup(c, &s);
    nn_status st = nn_softmax_backward_ex(c->ctx, &s.pb, &KEEP, &s.dy, &s.y);
    smx_free(&s);
    return st;
}
CALL(xb_null_pullback)
{
    struct smx s;
    smx_setup(c, &s);
    nn_status st = nn_softmax_cross_entropy_backward_ex(c->ctx, NULL, &KEEP, &s.dloss, &s.dx);
    smx_free(&s);
    return st;
}
CALL(xb_softmax_pullback)
{
    struct smx s;
    smx_setup(c, &s);
    nn_softmax_cross_entropy_pullback *pb = (nn_softmax_cross_entropy_pullback *)s.pb;
    nn_status st = nn_softmax_cross_entropy_backward_ex(c->ctx, &pb, &KEEP, &s.dloss, &s.dx);
    smx_free(&s);
    return st;
}
CALL(xb_reserved)
{
    nn_backward_options o = KEEP;
    o.reserved[0] = 9;
    return xent_opts(c, &o);
}
CALL(xb_keep_2)
{
    nn_backward_options o = {0, 2, {0}};
    return xent_opts(c, &o);
}
CALL(xb_acc_db)
{
    nn_backward_options o = {NN_ACCUMULATE_DB, 1, {0}};
    return xent_opts(c, &o);
}
CALL(xb_acc_ok)
{
    nn_backward_options o = {NN_ACCUMULATE_DX, 1, {0}};
    return xent_opts(c, &o);
}
CALL(xb_dloss_dims)
{
    struct smx s;
    smx_setup(c, &s);
    nn_tensor dl = s.dloss;
    dl.dims[0] = 1;
    cat_packed(&dl);
    nn_status st = nn_softmax_cross_entropy_backward_ex(c->ctx, &s.xpb, &KEEP, &dl, &s.dx);
    smx_free(&s);
    return st;
}

/* ---- nn_layernorm_backward_ex ---- */

struct lnx {
    nn_tensor x, g, b, y, dy, dx, dg, db;
    nn_layernorm_pullback *pb;
};

static void lnx_setup(struct cat *c, struct lnx *s)
{
    nn_layernorm_params p;
    cr_assert_eq(nn_layernorm_params_default(&p), NN_OK);
    const int64_t xd[] = {2, 3};
    s->x = cat_tensor(c, NN_DTYPE_F32, 2, xd, 1);
    s->y = cat_tensor(c, NN_DTYPE_F32, 2, xd, 2);
    s->dy = cat_tensor(c, NN_DTYPE_F32, 2, xd, 3);
    s->dx = cat_tensor(c, NN_DTYPE_F32, 2, xd, 4);
    s->g = cat_tensor(c, NN_DTYPE_F32, 1, xd + 1, 5);
    s->b = cat_tensor(c, NN_DTYPE_F32, 1, xd + 1, 6);
    s->dg = cat_tensor(c, NN_DTYPE_F32, 1, xd + 1, 7);
    s->db = cat_tensor(c, NN_DTYPE_F32, 1, xd + 1, 8);
    cr_assert_eq(nn_layernorm_forward(c->ctx, &p, &s->x, &s->g, &s->b, &s->y, &s->pb), NN_OK,
                 "fixture: %s", nn_last_error()->message);
}

static void lnx_free(struct lnx *s)
{
    cr_assert_eq(nn_layernorm_pullback_free(&s->pb), NN_OK);
}

static nn_status lnx_opts(struct cat *c, const nn_backward_options *o)
{
    struct lnx s;
    lnx_setup(c, &s);
    nn_status st = nn_layernorm_backward_ex(c->ctx, &s.pb, o, &s.dy, &s.dx, &s.dg, &s.db);
    if (st != NN_OK) cr_assert_not_null(s.pb, "a refused call leaves the pullback");
    lnx_free(&s);
    return st;
}

CALL(nb_null_ctx)
{
    struct lnx s;
    lnx_setup(c, &s);
    nn_status st = nn_layernorm_backward_ex(NULL, &s.pb, &KEEP, &s.dy, &s.dx, NULL, NULL);
    lnx_free(&s);
    return st;
}
CALL(nb_null_pullback)
{
    struct lnx s;
    lnx_setup(c, &s);
    nn_status st = nn_layernorm_backward_ex(c->ctx, NULL, &KEEP, &s.dy, &s.dx, NULL, NULL);
    lnx_free(&s);
    return st;
}
CALL(nb_star_null)
{
    struct lnx s;
    lnx_setup(c, &s);
    nn_layernorm_pullback *none = NULL;
    nn_status st = nn_layernorm_backward_ex(c->ctx, &none, &KEEP, &s.dy, &s.dx, NULL, NULL);
    lnx_free(&s);
    return st;
}
CALL(nb_softmax_pullback)
{
    struct smx m;
    smx_setup(c, &m);
    struct lnx s;
    lnx_setup(c, &s);
    nn_layernorm_pullback *pb = (nn_layernorm_pullback *)m.pb;
    nn_status st = nn_layernorm_backward_ex(c->ctx, &pb, &KEEP, &s.dy, &s.dx, NULL, NULL);
    lnx_free(&s);
    smx_free(&m);
    return st;
}
CALL(nb_reserved)
{
    nn_backward_options o = KEEP;
    o.reserved[1] = 3;
    return lnx_opts(c, &o);
}
CALL(nb_keep_2)
{
    nn_backward_options o = {0, 2, {0}};
    return lnx_opts(c, &o);
}
CALL(nb_acc_unknown)
{
    nn_backward_options o = {0x10, 0, {0}};
    return lnx_opts(c, &o);
}
CALL(nb_acc_all_keep)
{
    nn_backward_options o = {NN_ACCUMULATE_DX | NN_ACCUMULATE_DW | NN_ACCUMULATE_DB, 1, {0}};
    return lnx_opts(c, &o);
}
CALL(nb_kept_then_freed)
{
    struct lnx s;
    lnx_setup(c, &s);
    cr_assert_eq(nn_layernorm_backward_ex(c->ctx, &s.pb, &KEEP, &s.dy, &s.dx, &s.dg, &s.db), NN_OK,
                 "kept: %s", nn_last_error()->message);
    nn_layernorm_pullback *copy = s.pb;
    lnx_free(&s);
    return nn_layernorm_backward_ex(c->ctx, &copy, &KEEP, &s.dy, &s.dx, NULL, NULL);
}
CALL(nb_other_ctx)
{
    struct lnx s;
    lnx_setup(c, &s);
    nn_status st =
        nn_layernorm_backward_ex(cat_other_ctx(c), &s.pb, &KEEP, &s.dy, &s.dx, NULL, NULL);
    lnx_free(&s);
    return st;
}
CALL(nb_dx_on_x)
{
    struct lnx s;
    lnx_setup(c, &s);
    nn_status st = nn_layernorm_backward_ex(c->ctx, &s.pb, &KEEP, &s.dy, &s.x, NULL, NULL);
    lnx_free(&s);
    return st;
}
CALL(nb_dgamma_on_gamma)
{
    struct lnx s;
    lnx_setup(c, &s);
    nn_status st = nn_layernorm_backward_ex(c->ctx, &s.pb, &KEEP, &s.dy, NULL, &s.g, NULL);
    lnx_free(&s);
    return st;
}

/* ---- nn_rnn_backward_ex ---- */

struct rnn {
    nn_rnn_params p;
    nn_tensor x, w, y, dy, dw;
    nn_rnn_pullback *pb;
};

static void rnn_setup(struct cat *c, struct rnn *r)
{
    cr_assert_eq(nn_rnn_params_default(&r->p, NN_RNN_GRU, 2, 3), NN_OK);
    int64_t nw;
    cr_assert_eq(nn_rnn_weights_size(c->ctx, &r->p, NN_DTYPE_F32, &nw), NN_OK, "fixture: %s",
                 nn_last_error()->message);
    const int64_t xd[] = {2, 1, 2}, yd[] = {2, 1, 3};
    r->x = cat_tensor(c, NN_DTYPE_F32, 3, xd, 1);
    r->w = cat_tensor(c, NN_DTYPE_F32, 1, &nw, 2);
    r->y = cat_tensor(c, NN_DTYPE_F32, 3, yd, 3);
    r->dy = cat_tensor(c, NN_DTYPE_F32, 3, yd, 4);
    r->dw = cat_tensor(c, NN_DTYPE_F32, 1, &nw, 5);
    cr_assert_eq(nn_rnn_forward(c->ctx, &r->p,
                                &(nn_rnn_forward_tensors){.x = &r->x, .w = &r->w, .y = &r->y},
                                &r->pb),
                 NN_OK, "fixture: %s", nn_last_error()->message);
}

static nn_status rnn_opts(struct cat *c, const nn_backward_options *o)
{
    struct rnn r;
    rnn_setup(c, &r);
    nn_status st =
        nn_rnn_backward_ex(c->ctx, &r.pb, o, &(nn_rnn_backward_tensors){.dy = &r.dy, .dw = &r.dw});
    if (st != NN_OK) {
        cr_assert_not_null(r.pb, "a refused call leaves the pullback");
        cr_assert_eq(nn_rnn_backward_ex(c->ctx, &r.pb, NULL,
                                        &(nn_rnn_backward_tensors){.dy = &r.dy, .dw = &r.dw}),
                     NN_OK, "a valid retry: %s", nn_last_error()->message);
    }
    cr_assert_null(r.pb, "an rnn pullback is consumed");
    return st;
}

CALL(rb_null_ctx)
{
    struct rnn r;
    rnn_setup(c, &r);
    nn_status st =
        nn_rnn_backward_ex(NULL, &r.pb, NULL, &(nn_rnn_backward_tensors){.dy = &r.dy, .dw = &r.dw});
    cr_assert_eq(nn_rnn_pullback_free(&r.pb), NN_OK);
    return st;
}
CALL(rb_star_null)
{
    struct rnn r;
    rnn_setup(c, &r);
    nn_rnn_pullback *none = NULL;
    nn_status st = nn_rnn_backward_ex(c->ctx, &none, NULL,
                                      &(nn_rnn_backward_tensors){.dy = &r.dy, .dw = &r.dw});
    cr_assert_eq(nn_rnn_pullback_free(&r.pb), NN_OK);
    return st;
}
CALL(rb_keep)
{
    return rnn_opts(c, &KEEP);
}
CALL(rb_acc_dx)
{
    nn_backward_options o = {NN_ACCUMULATE_DX, 0, {0}};
    return rnn_opts(c, &o);
}
CALL(rb_acc_db)
{
    nn_backward_options o = {NN_ACCUMULATE_DB | NN_ACCUMULATE_DW, 0, {0}};
    return rnn_opts(c, &o);
}
CALL(rb_acc_unknown)
{
    nn_backward_options o = {0x20, 0, {0}};
    return rnn_opts(c, &o);
}
CALL(rb_reserved)
{
    nn_backward_options o = {0, 0, {0}};
    o.reserved[3] = 4;
    return rnn_opts(c, &o);
}
CALL(rb_keep_2)
{
    nn_backward_options o = {0, 2, {0}};
    return rnn_opts(c, &o);
}
CALL(rb_acc_dw_ok)
{
    nn_backward_options o = {NN_ACCUMULATE_DW, 0, {0}};
    return rnn_opts(c, &o);
}

/* ---- pullback states of the linear, softmax, cross-entropy and rnn calls ---- */
CALL(lb_star_null)
{
    struct lin l;
    lin_setup(c, &l);
    nn_linear_pullback *none = NULL;
    nn_status st = nn_linear_backward_ex(c->ctx, &none, &KEEP, &l.dy, &l.dx, NULL, NULL);
    cr_assert_eq(nn_linear_pullback_free(&l.pb), NN_OK);
    return st;
}
CALL(lb_kept_then_freed)
{
    struct lin l;
    lin_setup(c, &l);
    cr_assert_eq(nn_linear_backward_ex(c->ctx, &l.pb, &KEEP, &l.dy, &l.dx, NULL, NULL), NN_OK);
    nn_linear_pullback *copy = l.pb;
    cr_assert_eq(nn_linear_pullback_free(&l.pb), NN_OK);
    return nn_linear_backward_ex(c->ctx, &copy, &KEEP, &l.dy, &l.dx, NULL, NULL);
}
CALL(lb_other_ctx)
{
    struct lin l;
    lin_setup(c, &l);
    nn_status st = nn_linear_backward_ex(cat_other_ctx(c), &l.pb, &KEEP, &l.dy, &l.dx, NULL, NULL);
    cr_assert_not_null(l.pb, "a refused call leaves the pullback");
    cr_assert_eq(nn_linear_pullback_free(&l.pb), NN_OK);
    return st;
}
CALL(sb_null_pullback)
{
    struct smx s;
    smx_setup(c, &s);
    nn_status st = nn_softmax_backward_ex(c->ctx, NULL, &KEEP, &s.dy, &s.dx);
    smx_free(&s);
    return st;
}
CALL(sb_star_null)
{
    struct smx s;
    smx_setup(c, &s);
    nn_softmax_pullback *none = NULL;
    nn_status st = nn_softmax_backward_ex(c->ctx, &none, &KEEP, &s.dy, &s.dx);
    smx_free(&s);
    return st;
}
CALL(sb_kept_then_freed)
{
    struct smx s;
    smx_setup(c, &s);
    cr_assert_eq(nn_softmax_backward_ex(c->ctx, &s.pb, &KEEP, &s.dy, &s.dx), NN_OK);
    nn_softmax_pullback *copy = s.pb;
    smx_free(&s);
    return nn_softmax_backward_ex(c->ctx, &copy, &KEEP, &s.dy, &s.dx);
}
CALL(sb_other_ctx)
{
    struct smx s;
    smx_setup(c, &s);
    nn_status st = nn_softmax_backward_ex(cat_other_ctx(c), &s.pb, &KEEP, &s.dy, &s.dx);
    cr_assert_not_null(s.pb, "a refused call leaves the pullback");
    smx_free(&s);
    return st;
}
CALL(xb_null_ctx)
{
    struct smx s;
    smx_setup(c, &s);
    nn_status st = nn_softmax_cross_entropy_backward_ex(NULL, &s.xpb, &KEEP, &s.dloss, &s.dx);
    smx_free(&s);
    return st;
}
CALL(xb_star_null)
{
    struct smx s;
    smx_setup(c, &s);
    nn_softmax_cross_entropy_pullback *none = NULL;
    nn_status st = nn_softmax_cross_entropy_backward_ex(c->ctx, &none, &KEEP, &s.dloss, &s.dx);
    smx_free(&s);
    return st;
}
CALL(xb_kept_then_freed)
{
    struct smx s;
    smx_setup(c, &s);
    cr_assert_eq(nn_softmax_cross_entropy_backward_ex(c->ctx, &s.xpb, &KEEP, &s.dloss, &s.dx),
                 NN_OK);
    nn_softmax_cross_entropy_pullback *copy = s.xpb;
    smx_free(&s);
    return nn_softmax_cross_entropy_backward_ex(c->ctx, &copy, &KEEP, &s.dloss, &s.dx);
}
CALL(xb_acc_unknown)
{
    nn_backward_options o = {0x8, 0, {0}};
    return xent_opts(c, &o);
}
CALL(xb_acc_dw)
{
    nn_backward_options o = {NN_ACCUMULATE_DW, 0, {0}};
    return xent_opts(c, &o);
}
CALL(rb_null_pullback)
{
    struct rnn r;
    rnn_setup(c, &r);
    nn_status st = nn_rnn_backward_ex(c->ctx, NULL, NULL,
                                      &(nn_rnn_backward_tensors){.dy = &r.dy, .dw = &r.dw});
    cr_assert_eq(nn_rnn_pullback_free(&r.pb), NN_OK);
    return st;
}
CALL(rb_conv_pullback)
{
    struct rnn r;
    rnn_setup(c, &r);
    nn_conv_pullback *cp = conv_pb(c);
    nn_rnn_pullback *pb = (nn_rnn_pullback *)cp;
    nn_status st =
        nn_rnn_backward_ex(c->ctx, &pb, NULL, &(nn_rnn_backward_tensors){.dy = &r.dy, .dw = &r.dw});
    cr_assert_eq(nn_conv_pullback_free(&cp), NN_OK, "the conv pullback is intact");
    cr_assert_eq(nn_rnn_pullback_free(&r.pb), NN_OK);
    return st;
}
CALL(rb_other_ctx)
{
    struct rnn r;
    rnn_setup(c, &r);
    nn_status st = nn_rnn_backward_ex(cat_other_ctx(c), &r.pb, NULL,
                                      &(nn_rnn_backward_tensors){.dy = &r.dy, .dw = &r.dw});
    cr_assert_not_null(r.pb, "a refused call leaves the pullback");
    cr_assert_eq(nn_rnn_pullback_free(&r.pb), NN_OK);
    return st;
}

#define E NN_E_INVALID_ARG
#define S NN_E_SHAPE
#define D NN_E_DTYPE
#define M NN_E_MEMSPACE
#define U NN_E_UNSUPPORTED
#define P NN_E_PULLBACK
#define O NN_E_OVERFLOW

#define LNB "nn_layernorm_backward_ex"

static const struct cat_row rows[] = {
    ROW("conv_ex ctx NULL", "nn_conv_backward_ex", "ctx", E, cb_null_ctx),
    ROW("conv_ex pullback NULL", "nn_conv_backward_ex", "pullback", P, cb_null_pullback),
    ROW("conv_ex *pullback NULL", "nn_conv_backward_ex", "pullback", P, cb_star_null),
    ROW("conv_ex pullback used twice", "nn_conv_backward_ex", "pullback", P, cb_twice),
    ROW("conv_ex kept pullback freed", "nn_conv_backward_ex", "pullback", P, cb_kept_then_freed),
    ROW("conv_ex pullback of another context", "nn_conv_backward_ex", "pullback", P, cb_other_ctx),
    ROW("conv_ex pooling pullback", "nn_conv_backward_ex", "pullback", P, cb_pool_pullback),
    ROW("conv_ex opts.reserved", "nn_conv_backward_ex", "opts.reserved[3]", E, cb_reserved),
    ROW("conv_ex opts.keep 2", "nn_conv_backward_ex", "opts.keep", E, cb_keep_2),
    ROW("conv_ex opts.keep -1", "nn_conv_backward_ex", "opts.keep", E, cb_keep_negative),
    ROW("conv_ex accumulate unknown bit", "nn_conv_backward_ex", "opts.accumulate", E,
        cb_acc_unknown),
    ROW("conv_ex accumulate high bit", "nn_conv_backward_ex", "opts.accumulate", E, cb_acc_high),
    ROW("conv_ex every bit and keep", "nn_conv_backward_ex", NULL, NN_OK, cb_all_ok),
    ROW("conv_ex dy dims", "nn_conv_backward_ex", "dy.dims[3]", S, cb_dy_dims),
    ROW("conv_ex dx on x", "nn_conv_backward_ex", "dx", E, cb_dx_on_x),
    ROW("conv_ex dx wrong space", "nn_conv_backward_ex", "dx", M, cb_dx_space),

    ROW("pool_ex ctx NULL", "nn_pool_backward_ex", "ctx", E, pb_null_ctx),
    ROW("pool_ex pullback NULL", "nn_pool_backward_ex", "pullback", E, pb_null_pullback),
    ROW("pool_ex *pullback NULL", "nn_pool_backward_ex", "pullback", P, pb_star_null),
    ROW("pool_ex kept pullback freed", "nn_pool_backward_ex", "pullback", P, pb_kept_then_freed),
    ROW("pool_ex pullback of another context", "nn_pool_backward_ex", "pullback", P, pb_other_ctx),
    ROW("pool_ex conv pullback", "nn_pool_backward_ex", "pullback", P, pb_conv_pullback),
    ROW("pool_ex opts.reserved", "nn_pool_backward_ex", "opts.reserved[0]", E, pb_reserved),
    ROW("pool_ex opts.keep 2", "nn_pool_backward_ex", "opts.keep", E, pb_keep_2),
    ROW("pool_ex accumulate unknown bit", "nn_pool_backward_ex", "opts.accumulate", E,
        pb_acc_unknown),
    ROW("pool_ex accumulate dw", "nn_pool_backward_ex", "NN_ACCUMULATE_DW", U, pb_acc_dw),
    ROW("pool_ex accumulate db", "nn_pool_backward_ex", "NN_ACCUMULATE_DB", U, pb_acc_db),
    ROW("pool_ex accumulate dx and keep", "nn_pool_backward_ex", NULL, NN_OK, pb_acc_dx_ok),
    ROW("pool_ex dx dims", "nn_pool_backward_ex", "dx", S, pb_dx_dims),
    ROW("pool_ex dx on x", "nn_pool_backward_ex", "dx", E, pb_dx_on_x),

    ROW("stateless ctx NULL", "nn_pool_backward_stateless", "ctx", E, s_null_ctx),
    ROW("stateless params NULL", "nn_pool_backward_stateless", "params", E, s_null_params),
    ROW("stateless x NULL", "nn_pool_backward_stateless", "x", E, s_null_x),
    ROW("stateless y NULL", "nn_pool_backward_stateless", "y", E, s_null_y),
    ROW("stateless dy NULL", "nn_pool_backward_stateless", "dy", E, s_null_dy),
    ROW("stateless dx NULL", "nn_pool_backward_stateless", "dx", E, s_null_dx),
    ROW("stateless spatial rank", "nn_pool_backward_stateless", "params.spatial_rank", E, s_rank),
    ROW("stateless mode", "nn_pool_backward_stateless", "params.mode", E, s_mode),
    ROW("stateless window", "nn_pool_backward_stateless", "params.window[1]", E, s_window),
    ROW("stateless stride", "nn_pool_backward_stateless", "params.stride[0]", E, s_stride),
    ROW("stateless pad", "nn_pool_backward_stateless", "params.pad_hi[1]", E, s_pad),
    ROW("stateless reserved", "nn_pool_backward_stateless", "params.reserved[2]", E, s_reserved),
    ROW("stateless accumulate unknown", "nn_pool_backward_stateless", "accumulate", E,
        s_acc_unknown),
    ROW("stateless accumulate dw", "nn_pool_backward_stateless", "NN_ACCUMULATE_DW", U, s_acc_dw),
    ROW("stateless x rank", "nn_pool_backward_stateless", "x.rank", S, s_x_rank),
    ROW("stateless y dims", "nn_pool_backward_stateless", "y", S, s_y_dims),
    ROW("stateless dy dims", "nn_pool_backward_stateless", "dy", S, s_dy_dims),
    ROW("stateless dx dims", "nn_pool_backward_stateless", "dx", S, s_dx_dims),
    ROW("stateless y dtype", "nn_pool_backward_stateless", "y.dtype", D, s_y_dtype),
    ROW("stateless dx dtype", "nn_pool_backward_stateless", "dx.dtype", D, s_dx_dtype),
    ROW("stateless x wrong space", "nn_pool_backward_stateless", "x", M, s_x_space),
    ROW("stateless y wrong space", "nn_pool_backward_stateless", "y", M, s_y_space),
    ROW("stateless dy wrong space", "nn_pool_backward_stateless", "dy", M, s_dy_space),
    ROW("stateless dx wrong space", "nn_pool_backward_stateless", "dx", M, s_dx_space),
    ROW("stateless dx space label", "nn_pool_backward_stateless", "dx", M, s_dx_claim),
    ROW("stateless dx on x", "nn_pool_backward_stateless", "dx", E, s_dx_on_x),
    ROW("stateless dx on y", "nn_pool_backward_stateless", "dx", E, s_dx_on_y),
    ROW("stateless dx on dy", "nn_pool_backward_stateless", "dx", E, s_dx_on_dy),
    ROW("stateless dx self-overlap", "nn_pool_backward_stateless", "dx", E, s_dx_self),
    ROW("stateless dx misaligned", "nn_pool_backward_stateless", "dx", E, s_dx_misaligned),
    ROW("stateless x data NULL", "nn_pool_backward_stateless", "x", E, s_x_data_null),
    ROW("stateless x element count overflows", "nn_pool_backward_stateless", "x", O,
        s_x_count_overflow),
    ROW("stateless y byte extent overflows", "nn_pool_backward_stateless", "y", O,
        s_y_extent_overflow),
    ROW("stateless dy element count overflows", "nn_pool_backward_stateless", "dy", O,
        s_dy_count_overflow),
    ROW("stateless dx byte extent overflows", "nn_pool_backward_stateless", "dx", O,
        s_dx_extent_overflow),
    ROW2("stateless asymmetric padding", "nn_pool_backward_stateless", "pad_lo[0]", NN_OK, U,
         s_asym_pad),
    ROW("stateless accumulate dx", "nn_pool_backward_stateless", NULL, NN_OK, s_acc_ok),

    ROW("linear_ex ctx NULL", "nn_linear_backward_ex", "ctx", E, lb_null_ctx),
    ROW("linear_ex pullback NULL", "nn_linear_backward_ex", "pullback", P, lb_null_pullback),
    ROW("linear_ex conv pullback", "nn_linear_backward_ex", "pullback", P, lb_conv_pullback),
    ROW("linear_ex opts.reserved", "nn_linear_backward_ex", "opts.reserved[1]", E, lb_reserved),
    ROW("linear_ex opts.keep 3", "nn_linear_backward_ex", "opts.keep", E, lb_keep_3),
    ROW("linear_ex accumulate unknown bit", "nn_linear_backward_ex", "opts.accumulate", E,
        lb_acc_unknown),
    ROW("linear_ex every bit and keep", "nn_linear_backward_ex", NULL, NN_OK, lb_all_ok),
    ROW("linear_ex dx dims", "nn_linear_backward_ex", "dx.dims[1]", S, lb_dx_dims),
    ROW("linear_ex *pullback NULL", "nn_linear_backward_ex", "pullback", P, lb_star_null),
    ROW("linear_ex kept pullback freed", "nn_linear_backward_ex", "pullback", P,
        lb_kept_then_freed),
    ROW("linear_ex pullback of another context", "nn_linear_backward_ex", "pullback", P,
        lb_other_ctx),

    ROW("softmax_ex ctx NULL", "nn_softmax_backward_ex", "ctx", E, sb_null_ctx),
    ROW("softmax_ex cross-entropy pullback", "nn_softmax_backward_ex", "pullback", P,
        sb_xent_pullback),
    ROW("softmax_ex opts.reserved", "nn_softmax_backward_ex", "opts.reserved[2]", E, sb_reserved),
    ROW("softmax_ex opts.keep 2", "nn_softmax_backward_ex", "opts.keep", E, sb_keep_2),
    ROW("softmax_ex accumulate dw", "nn_softmax_backward_ex", "NN_ACCUMULATE_DW", U, sb_acc_dw),
    ROW("softmax_ex accumulate unknown bit", "nn_softmax_backward_ex", "opts.accumulate", E,
        sb_acc_unknown),
    ROW("softmax_ex accumulate dx and keep", "nn_softmax_backward_ex", NULL, NN_OK, sb_acc_ok),
    ROW("softmax_ex dx on the saved y", "nn_softmax_backward_ex", "dx", E, sb_dx_on_y),
    ROW("softmax_ex pullback NULL", "nn_softmax_backward_ex", "pullback", P, sb_null_pullback),
    ROW("softmax_ex *pullback NULL", "nn_softmax_backward_ex", "pullback", P, sb_star_null),
    ROW("softmax_ex kept pullback freed", "nn_softmax_backward_ex", "pullback", P,
        sb_kept_then_freed),
    ROW("softmax_ex pullback of another context", "nn_softmax_backward_ex", "pullback", P,
        sb_other_ctx),
    ROW("xent_ex pullback NULL", "nn_softmax_cross_entropy_backward_ex", "pullback", P,
        xb_null_pullback),
    ROW("xent_ex softmax pullback", "nn_softmax_cross_entropy_backward_ex", "pullback", P,
        xb_softmax_pullback),
    ROW("xent_ex opts.reserved", "nn_softmax_cross_entropy_backward_ex", "opts.reserved[0]", E,
        xb_reserved),
    ROW("xent_ex opts.keep 2", "nn_softmax_cross_entropy_backward_ex", "opts.keep", E, xb_keep_2),
    ROW("xent_ex accumulate db", "nn_softmax_cross_entropy_backward_ex", "NN_ACCUMULATE_DB", U,
        xb_acc_db),
    ROW("xent_ex accumulate dx and keep", "nn_softmax_cross_entropy_backward_ex", NULL, NN_OK,
        xb_acc_ok),
    ROW("xent_ex dloss dims", "nn_softmax_cross_entropy_backward_ex", "dloss", S, xb_dloss_dims),
    ROW("xent_ex ctx NULL", "nn_softmax_cross_entropy_backward_ex", "ctx", E, xb_null_ctx),
    ROW("xent_ex *pullback NULL", "nn_softmax_cross_entropy_backward_ex", "pullback", P,
        xb_star_null),
    ROW("xent_ex kept pullback freed", "nn_softmax_cross_entropy_backward_ex", "pullback", P,
        xb_kept_then_freed),
    ROW("xent_ex accumulate unknown bit", "nn_softmax_cross_entropy_backward_ex", "opts.accumulate",
        E, xb_acc_unknown),
    ROW("xent_ex accumulate dw", "nn_softmax_cross_entropy_backward_ex", "NN_ACCUMULATE_DW", U,
        xb_acc_dw),

    ROW("layernorm_ex ctx NULL", LNB, "ctx", E, nb_null_ctx),
    ROW("layernorm_ex pullback NULL", LNB, "pullback", P, nb_null_pullback),
    ROW("layernorm_ex *pullback NULL", LNB, "pullback", P, nb_star_null),
    ROW("layernorm_ex softmax pullback", LNB, "pullback", P, nb_softmax_pullback),
    ROW("layernorm_ex opts.reserved", LNB, "opts.reserved[1]", E, nb_reserved),
    ROW("layernorm_ex opts.keep 2", LNB, "opts.keep", E, nb_keep_2),
    ROW("layernorm_ex accumulate unknown bit", LNB, "opts.accumulate", E, nb_acc_unknown),
    ROW("layernorm_ex accumulate dx, dw, db and keep", LNB, NULL, NN_OK, nb_acc_all_keep),
    ROW("layernorm_ex kept pullback freed", LNB, "pullback", P, nb_kept_then_freed),
    ROW("layernorm_ex pullback of another context", LNB, "pullback", P, nb_other_ctx),
    ROW("layernorm_ex dx on the saved x", LNB, "dx", E, nb_dx_on_x),
    ROW("layernorm_ex dgamma on the saved gamma", LNB, "dgamma", E, nb_dgamma_on_gamma),

    ROW("rnn_ex ctx NULL", "nn_rnn_backward_ex", "ctx", E, rb_null_ctx),
    ROW("rnn_ex *pullback NULL", "nn_rnn_backward_ex", "pullback", P, rb_star_null),
    ROW("rnn_ex keep", "nn_rnn_backward_ex", "opts.keep", U, rb_keep),
    ROW("rnn_ex accumulate dx", "nn_rnn_backward_ex", "NN_ACCUMULATE_DX", U, rb_acc_dx),
    ROW("rnn_ex accumulate db", "nn_rnn_backward_ex", "NN_ACCUMULATE_DB", U, rb_acc_db),
    ROW("rnn_ex accumulate unknown bit", "nn_rnn_backward_ex", "opts.accumulate", E,
        rb_acc_unknown),
    ROW("rnn_ex opts.reserved", "nn_rnn_backward_ex", "opts.reserved[3]", E, rb_reserved),
    ROW("rnn_ex opts.keep 2", "nn_rnn_backward_ex", "opts.keep", E, rb_keep_2),
    ROW("rnn_ex accumulate dw", "nn_rnn_backward_ex", NULL, NN_OK, rb_acc_dw_ok),
    ROW("rnn_ex pullback NULL", "nn_rnn_backward_ex", "pullback", P, rb_null_pullback),
    ROW("rnn_ex conv pullback", "nn_rnn_backward_ex", "pullback", P, rb_conv_pullback),
    ROW("rnn_ex pullback of another context", "nn_rnn_backward_ex", "pullback", P, rb_other_ctx),
};

CAT_SUBJECT(backward, rows)

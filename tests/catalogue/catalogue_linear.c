/* Catalogue rows: the linear layer (include/nnprim/linear.h). Each row makes its operands (x 4x3,
 * w 2x3, b 2, y dy 4x2, dx 4x3, dw 2x3, db 2) in the context's memory and frees them after. */
#include <string.h>

#include "catalogue.h"
#include "catalogue_family.h"

struct lin {
    nn_linear_params p;
    nn_tensor x, w, b, y, dy, dx, dw, db;
};

static const int64_t X[] = {4, 3}, W[] = {2, 3}, B[] = {2}, Y[] = {4, 2};

static void lin_setup(struct cat *c, struct lin *l)
{
    cr_assert_eq(nn_linear_params_default(&l->p), NN_OK, "fixture");
    l->x = cat_tensor(c, NN_DTYPE_F32, 2, X, 101);
    l->w = cat_tensor(c, NN_DTYPE_F32, 2, W, 102);
    l->b = cat_tensor(c, NN_DTYPE_F32, 1, B, 103);
    l->y = cat_tensor(c, NN_DTYPE_F32, 2, Y, 104);
    l->dy = cat_tensor(c, NN_DTYPE_F32, 2, Y, 105);
    l->dx = cat_tensor(c, NN_DTYPE_F32, 2, X, 106);
    l->dw = cat_tensor(c, NN_DTYPE_F32, 2, W, 107);
    l->db = cat_tensor(c, NN_DTYPE_F32, 1, B, 108);
}

static void lin_free(struct cat *c, struct lin *l)
{
    CAT_FREE_TENSORS(c, &l->x, &l->w, &l->b, &l->y, &l->dy, &l->dx, &l->dw, &l->db);
}

/* A row body gets the operands; rows change copies of the views, never l's own. */
#define CALL(fname) CAT_FAMILY_CALL(fname, struct lin, l, lin_setup, lin_free)

static nn_status fwd(struct cat *c, struct lin *l, const nn_tensor *x, const nn_tensor *w,
                     const nn_tensor *b, nn_tensor *y)
{
    return nn_linear_forward(c->ctx, &l->p, x, w, b, y, NULL);
}

/* ---- nn_linear_params_default ---- */

static nn_status pd_null(struct cat *c)
{
    (void)c;
    return nn_linear_params_default(NULL);
}

/* ---- nn_linear_forward: NULLs and parameters ---- */

CALL(f_null_ctx)
{
    (void)c;
    return nn_linear_forward(NULL, &l->p, &l->x, &l->w, &l->b, &l->y, NULL);
}
CALL(f_null_p)
{
    return nn_linear_forward(c->ctx, NULL, &l->x, &l->w, &l->b, &l->y, NULL);
}
CALL(f_null_x)
{
    return fwd(c, l, NULL, &l->w, &l->b, &l->y);
}
CALL(f_null_w)
{
    return fwd(c, l, &l->x, NULL, &l->b, &l->y);
}
CALL(f_null_y)
{
    return fwd(c, l, &l->x, &l->w, &l->b, NULL);
}
CALL(f_null_xdata)
{
    nn_tensor x = l->x;
    x.data = NULL;
    return fwd(c, l, &x, &l->w, &l->b, &l->y);
}
CALL(f_null_bdata)
{
    nn_tensor b = l->b;
    b.data = NULL;
    return fwd(c, l, &l->x, &l->w, &b, &l->y);
}
CALL(f_pullback_null_on_failure)
{
    nn_linear_pullback *pb = (nn_linear_pullback *)c;
    nn_status st = nn_linear_forward(c->ctx, &l->p, &l->x, &l->w, &l->b, NULL, &pb);
    cr_assert_null(pb, "*pullback_out must be NULL after a failure");
    return st;
}
CALL(f_act2)
{
    l->p.activation = (nn_activation)2;
    return fwd(c, l, &l->x, &l->w, &l->b, &l->y);
}
CALL(f_act_neg)
{
    l->p.activation = (nn_activation)-1;
    return fwd(c, l, &l->x, &l->w, &l->b, &l->y);
}
CALL(f_res0)
{
    l->p.reserved[0] = 1;
    return fwd(c, l, &l->x, &l->w, &l->b, &l->y);
}
CALL(f_res3)
{
    l->p.reserved[3] = UINT64_MAX;
    return fwd(c, l, &l->x, &l->w, &l->b, &l->y);
}

/* ---- nn_linear_forward: shapes and dtypes ---- */

CALL(f_x_rank0)
{
    nn_tensor x = l->x;
    x.rank = 0;
    return fwd(c, l, &x, &l->w, &l->b, &l->y);
}
CALL(f_x_rank9)
{
    nn_tensor x = l->x;
    x.rank = 9;
    return fwd(c, l, &x, &l->w, &l->b, &l->y);
}
CALL(f_x_dim0)
{
    nn_tensor x = l->x;
    x.dims[0] = 0;
    return fwd(c, l, &x, &l->w, &l->b, &l->y);
}
CALL(f_x_dim_neg)
{
    nn_tensor x = l->x;
    x.dims[1] = -3;
    return fwd(c, l, &x, &l->w, &l->b, &l->y);
}
CALL(f_w_rank1)
{
    int64_t d[] = {6};
    nn_tensor w = cat_view_on(&l->w, 1, d, 0);
    return fwd(c, l, &l->x, &w, &l->b, &l->y);
}
CALL(f_w_rank3)
{
    int64_t d[] = {1, 2, 3};
    nn_tensor w = cat_view_on(&l->w, 3, d, 0);
    return fwd(c, l, &l->x, &w, &l->b, &l->y);
}
CALL(f_w_in)
{
    int64_t d[] = {3, 2};
    nn_tensor w = cat_view_on(&l->w, 2, d, 0);
    return fwd(c, l, &l->x, &w, &l->b, &l->y);
}
CALL(f_b_dims)
{
    int64_t d[] = {1};
    nn_tensor b = cat_view_on(&l->b, 1, d, 0);
    return fwd(c, l, &l->x, &l->w, &b, &l->y);
}
CALL(f_b_rank)
{
    int64_t d[] = {1, 2};
    nn_tensor b = cat_view_on(&l->b, 2, d, 0);
    return fwd(c, l, &l->x, &l->w, &b, &l->y);
}
CALL(f_y_out)
{
    int64_t d[] = {4, 1};
    nn_tensor y = cat_view_on(&l->y, 2, d, 0);
    return fwd(c, l, &l->x, &l->w, &l->b, &y);
}
CALL(f_y_rows)
{
    int64_t d[] = {2, 2};
    nn_tensor y = cat_view_on(&l->y, 2, d, 0);
    return fwd(c, l, &l->x, &l->w, &l->b, &y);
}
CALL(f_y_rank)
{
    int64_t d[] = {8};
    nn_tensor y = cat_view_on(&l->y, 1, d, 0);
    return fwd(c, l, &l->x, &l->w, &l->b, &y);
}
CALL(f_y_lead)
{
    /* x 2x2x3 needs y 2x2x2; y 4x2 has the right count, the wrong dims */
    int64_t d[] = {2, 2, 3};
    nn_tensor x = cat_view_on(&l->x, 3, d, 0);
    return fwd(c, l, &x, &l->w, &l->b, &l->y);
}
CALL(f_w_dtype)
{
    nn_tensor w = l->w;
    w.dtype = NN_DTYPE_F16;
    cat_packed(&w);
    return fwd(c, l, &l->x, &w, &l->b, &l->y);
}
CALL(f_b_dtype)
{
    nn_tensor b = l->b;
    b.dtype = NN_DTYPE_BF16;
    return fwd(c, l, &l->x, &l->w, &b, &l->y);
}
CALL(f_y_dtype)
{
    nn_tensor y = l->y;
    y.dtype = NN_DTYPE_F16;
    return fwd(c, l, &l->x, &l->w, &l->b, &y);
}
CALL(f_x_dtype_bad)
{
    nn_tensor x = l->x;
    x.dtype = (nn_dtype)9;
    return fwd(c, l, &x, &l->w, &l->b, &l->y);
}
CALL(f_x_reserved)
{
    nn_tensor x = l->x;
    x.reserved[0] = 2;
    return fwd(c, l, &x, &l->w, &l->b, &l->y);
}
CALL(f_y_space_bad)
{
    nn_tensor y = l->y;
    y.space = (nn_space)7;
    return fwd(c, l, &l->x, &l->w, &l->b, &y);
}
CALL(f_x_misaligned)
{
    nn_tensor x = l->x;
    x.data = (char *)x.data + 2;
    return fwd(c, l, &x, &l->w, &l->b, &l->y);
}
CALL(f_w_stride_neg)
{
    nn_tensor w = l->w;
    w.strides[0] = -3;
    return fwd(c, l, &l->x, &w, &l->b, &l->y);
}
CALL(f_x_overflow)
{
    nn_tensor x = l->x;
    x.dims[0] = INT64_MAX / 2;
    return fwd(c, l, &x, &l->w, &l->b, &l->y);
}
CALL(f_w_overflow)
{
    nn_tensor w = l->w;
    w.dims[0] = INT64_MAX / 3 + 1;
    return fwd(c, l, &l->x, &w, &l->b, &l->y);
}
CALL(f_x_strided)
{
    nn_tensor x = cat_transposed(&l->x);
    return fwd(c, l, &x, &l->w, &l->b, &l->y);
}
CALL(f_w_strided)
{
    nn_tensor w = cat_transposed(&l->w);
    return fwd(c, l, &l->x, &w, &l->b, &l->y);
}
CALL(f_y_strided)
{
    nn_tensor y = cat_transposed(&l->y);
    return fwd(c, l, &l->x, &l->w, &l->b, &y);
}
CALL(f_x_broadcast)
{
    nn_tensor x = l->x;
    x.strides[0] = 0;
    return fwd(c, l, &x, &l->w, &l->b, &l->y);
}

/* ---- nn_linear_forward: spaces and overlaps ---- */

CALL(f_claim_x)
{
    nn_tensor t = cat_claim_other_space(c, &l->x);
    return fwd(c, l, &t, &l->w, &l->b, &l->y);
}
CALL(f_claim_w)
{
    nn_tensor t = cat_claim_other_space(c, &l->w);
    return fwd(c, l, &l->x, &t, &l->b, &l->y);
}
CALL(f_claim_b)
{
    nn_tensor t = cat_claim_other_space(c, &l->b);
    return fwd(c, l, &l->x, &l->w, &t, &l->y);
}
CALL(f_claim_y)
{
    nn_tensor t = cat_claim_other_space(c, &l->y);
    return fwd(c, l, &l->x, &l->w, &l->b, &t);
}
CALL(f_space_x)
{
    nn_tensor t = cat_wrong_space(c, &l->x);
    return fwd(c, l, &t, &l->w, &l->b, &l->y);
}
CALL(f_space_b)
{
    nn_tensor t = cat_wrong_space(c, &l->b);
    return fwd(c, l, &l->x, &l->w, &t, &l->y);
}
CALL(f_space_y)
{
    nn_tensor t = cat_wrong_space(c, &l->y);
    return fwd(c, l, &l->x, &l->w, &l->b, &t);
}
CALL(f_y_on_x)
{
    nn_tensor y = cat_view_on(&l->x, 2, Y, 0);
    return fwd(c, l, &l->x, &l->w, &l->b, &y);
}
CALL(f_y_on_w)
{
    int64_t d[] = {1, 2};
    nn_tensor x = cat_view_on(&l->x, 2, (int64_t[]){1, 3}, 0);
    nn_tensor y = cat_view_on(&l->w, 2, d, 4);
    return fwd(c, l, &x, &l->w, &l->b, &y);
}
CALL(f_y_on_b)
{
    int64_t d[] = {1, 2};
    nn_tensor x = cat_view_on(&l->x, 2, (int64_t[]){1, 3}, 0);
    nn_tensor y = cat_view_on(&l->b, 2, d, 0);
    return fwd(c, l, &x, &l->w, &l->b, &y);
}
CALL(f_y_zero_strides)
{
    nn_tensor y = l->y;
    memset(y.strides, 0, sizeof y.strides);
    return fwd(c, l, &l->x, &l->w, &l->b, &y);
}
CALL(f_y_interleaved)
{
    nn_tensor y = l->y;
    y.strides[0] = 1;
    y.strides[1] = 1;
    return fwd(c, l, &l->x, &l->w, &l->b, &y);
}

/* ---- nn_linear_forward: edges that run ---- */

/* y = x w^T + b, checked against a sum in the row. */
CALL(f_values)
{
    nn_status st = fwd(c, l, &l->x, &l->w, &l->b, &l->y);
    if (st != NN_OK) return st;
    double x[12], w[6], b[2], y[8];
    cat_read(c, &l->x, x);
    cat_read(c, &l->w, w);
    cat_read(c, &l->b, b);
    cat_read(c, &l->y, y);
    for (int i = 0; i < 4; i++)
        for (int o = 0; o < 2; o++) {
            double s = b[o];
            for (int k = 0; k < 3; k++)
                s += x[i * 3 + k] * w[o * 3 + k];
            cr_assert_eq(y[i * 2 + o], s, "y[%d][%d] = %g, expected %g", i, o, y[i * 2 + o], s);
        }
    return NN_OK;
}
CALL(f_rank1)
{
    nn_tensor x = cat_view_on(&l->x, 1, (int64_t[]){3}, 0);
    nn_tensor y = cat_view_on(&l->y, 1, (int64_t[]){2}, 0);
    return fwd(c, l, &x, &l->w, NULL, &y);
}
CALL(f_rank8)
{
    int64_t xd[] = {1, 1, 1, 2, 1, 1, 2, 3}, yd[] = {1, 1, 1, 2, 1, 1, 2, 2};
    nn_tensor x = cat_view_on(&l->x, 8, xd, 0);
    nn_tensor y = cat_view_on(&l->y, 8, yd, 0);
    l->p.activation = NN_ACTIVATION_RELU;
    return fwd(c, l, &x, &l->w, &l->b, &y);
}
CALL(f_f64)
{
    nn_tensor x = cat_tensor(c, NN_DTYPE_F64, 2, X, 110),
              w = cat_tensor(c, NN_DTYPE_F64, 2, W, 111),
              y = cat_tensor(c, NN_DTYPE_F64, 2, Y, 112);
    nn_status st = fwd(c, l, &x, &w, NULL, &y);
    nn_tensor_free(c->ctx, &x);
    nn_tensor_free(c->ctx, &w);
    nn_tensor_free(c->ctx, &y);
    return st;
}
CALL(f_inputs_overlap)
{
    /* inputs may share memory: x is w's storage */
    nn_tensor x = cat_view_on(&l->w, 2, (int64_t[]){2, 3}, 0);
    nn_tensor y = cat_view_on(&l->y, 2, (int64_t[]){2, 2}, 0);
    return fwd(c, l, &x, &l->w, &l->b, &y);
}

/* ---- nn_linear_backward ---- */

static nn_linear_pullback *pullback(struct cat *c, struct lin *l)
{
    nn_linear_pullback *pb = NULL;
    cr_assert_eq(nn_linear_forward(c->ctx, &l->p, &l->x, &l->w, &l->b, &l->y, &pb), NN_OK,
                 "fixture: %s", nn_last_error()->message);
    return pb;
}
/* After a refused call the pullback is still the caller's: a valid retry works and leaves the
 * thread's record (the refused call's) alone. */
static nn_status then_retry(struct cat *c, struct lin *l, nn_status st, nn_linear_pullback **pb)
{
    if (st == NN_OK) return st;
    nn_error_info e = *nn_last_error();
    cr_assert_not_null(*pb, "a refused call leaves the pullback with the caller");
    cr_assert_eq(nn_linear_backward(c->ctx, pb, &l->dy, &l->dx, &l->dw, &l->db), NN_OK,
                 "a valid retry with the same pullback: %s", nn_last_error()->message);
    cr_assert_null(*pb);
    cr_assert_str_eq(nn_last_error()->message, e.message, "the record changed");
    return st;
}
static nn_status bwd(struct cat *c, struct lin *l, const nn_tensor *dy, nn_tensor *dx,
                     nn_tensor *dw, nn_tensor *db)
{
    nn_linear_pullback *pb = pullback(c, l);
    return then_retry(c, l, nn_linear_backward(c->ctx, &pb, dy, dx, dw, db), &pb);
}

CALL(b_null_ctx)
{
    nn_linear_pullback *pb = pullback(c, l);
    return then_retry(c, l, nn_linear_backward(NULL, &pb, &l->dy, &l->dx, &l->dw, &l->db), &pb);
}
CALL(b_null_pullback)
{
    return nn_linear_backward(c->ctx, NULL, &l->dy, &l->dx, &l->dw, &l->db);
}
CALL(b_null_star)
{
    nn_linear_pullback *pb = NULL;
    return nn_linear_backward(c->ctx, &pb, &l->dy, &l->dx, &l->dw, &l->db);
}
CALL(b_twice)
{
    nn_linear_pullback *pb = pullback(c, l), *copy = pb;
    cr_assert_eq(nn_linear_backward(c->ctx, &pb, &l->dy, &l->dx, &l->dw, &l->db), NN_OK, "first");
    return nn_linear_backward(c->ctx, &copy, &l->dy, &l->dx, &l->dw, &l->db);
}
CALL(b_freed)
{
    nn_linear_pullback *pb = pullback(c, l), *copy = pb;
    cr_assert_eq(nn_linear_pullback_free(&pb), NN_OK, "free");
    return nn_linear_backward(c->ctx, &copy, &l->dy, &l->dx, &l->dw, &l->db);
}
CALL(b_other_ctx)
{
    nn_linear_pullback *pb = pullback(c, l);
    return then_retry(
        c, l, nn_linear_backward(cat_other_ctx(c), &pb, &l->dy, &l->dx, &l->dw, &l->db), &pb);
}
CALL(b_conv_pullback)
{
    nn_conv_pullback *cp = NULL;
    cr_assert_eq(nn_conv_forward(c->ctx, &c->cp, &c->x, &c->w, &c->b, &c->y, &cp), NN_OK,
                 "fixture");
    nn_linear_pullback *pb = (nn_linear_pullback *)cp;
    nn_status st = nn_linear_backward(c->ctx, &pb, &l->dy, &l->dx, &l->dw, &l->db);
    cr_assert_eq(nn_conv_pullback_free(&cp), NN_OK, "the conv pullback is intact");
    return st;
}
CALL(b_pool_pullback)
{
    nn_pool_pullback *pp = NULL;
    cr_assert_eq(nn_pool_forward(c->ctx, &c->pp, &c->px, &c->py, &pp), NN_OK, "fixture");
    nn_linear_pullback *pb = (nn_linear_pullback *)pp;
    nn_status st = nn_linear_backward(c->ctx, &pb, &l->dy, &l->dx, &l->dw, &l->db);
    cr_assert_eq(nn_pool_pullback_free(&pp), NN_OK, "the pool pullback is intact");
    return st;
}
CALL(b_garbage_pullback)
{
    /* not a pullback at all: recognised without reading it */
    nn_linear_pullback *pb = (nn_linear_pullback *)&l->x;
    return nn_linear_backward(c->ctx, &pb, &l->dy, &l->dx, &l->dw, &l->db);
}
CALL(b_null_dy)
{
    return bwd(c, l, NULL, &l->dx, &l->dw, &l->db);
}
CALL(b_dy_dims)
{
    nn_tensor dy = cat_view_on(&l->dy, 2, (int64_t[]){4, 1}, 0);
    return bwd(c, l, &dy, &l->dx, &l->dw, &l->db);
}
CALL(b_dy_rank)
{
    nn_tensor dy = cat_view_on(&l->dy, 1, (int64_t[]){8}, 0);
    return bwd(c, l, &dy, &l->dx, &l->dw, &l->db);
}
CALL(b_dy_dtype)
{
    nn_tensor dy = l->dy;
    dy.dtype = NN_DTYPE_F64;
    dy.dims[0] = 2;
    return bwd(c, l, &dy, &l->dx, &l->dw, &l->db);
}
CALL(b_dx_dims)
{
    nn_tensor dx = cat_view_on(&l->dx, 2, (int64_t[]){4, 2}, 0);
    return bwd(c, l, &l->dy, &dx, &l->dw, &l->db);
}
CALL(b_dw_dims)
{
    nn_tensor dw = cat_view_on(&l->dw, 2, (int64_t[]){3, 2}, 0);
    return bwd(c, l, &l->dy, &l->dx, &dw, &l->db);
}
CALL(b_db_dims)
{
    nn_tensor db = cat_view_on(&l->db, 1, (int64_t[]){1}, 0);
    return bwd(c, l, &l->dy, &l->dx, &l->dw, &db);
}
CALL(b_db_rank)
{
    nn_tensor db = cat_view_on(&l->db, 2, (int64_t[]){2, 1}, 0);
    return bwd(c, l, &l->dy, &l->dx, &l->dw, &db);
}
CALL(b_dx_dtype)
{
    nn_tensor dx = l->dx;
    dx.dtype = NN_DTYPE_F16;
    cat_packed(&dx);
    return bwd(c, l, &l->dy, &dx, &l->dw, &l->db);
}
CALL(b_dw_dtype)
{
    nn_tensor dw = l->dw;
    dw.dtype = NN_DTYPE_BF16;
    return bwd(c, l, &l->dy, &l->dx, &dw, &l->db);
}
CALL(b_db_dtype_bad)
{
    nn_tensor db = l->db;
    db.dtype = (nn_dtype)-1;
    return bwd(c, l, &l->dy, &l->dx, &l->dw, &db);
}
CALL(b_dw_reserved)
{
    nn_tensor dw = l->dw;
    dw.reserved[0] = 1;
    return bwd(c, l, &l->dy, &l->dx, &dw, &l->db);
}
CALL(b_dy_misaligned)
{
    nn_tensor dy = l->dy;
    dy.data = (char *)dy.data + 1;
    return bwd(c, l, &dy, &l->dx, &l->dw, &l->db);
}
CALL(b_claim_dy)
{
    nn_tensor t = cat_claim_other_space(c, &l->dy);
    return bwd(c, l, &t, &l->dx, &l->dw, &l->db);
}
CALL(b_claim_dx)
{
    nn_tensor t = cat_claim_other_space(c, &l->dx);
    return bwd(c, l, &l->dy, &t, &l->dw, &l->db);
}
CALL(b_claim_dw)
{
    nn_tensor t = cat_claim_other_space(c, &l->dw);
    return bwd(c, l, &l->dy, &l->dx, &t, &l->db);
}
CALL(b_claim_db)
{
    nn_tensor t = cat_claim_other_space(c, &l->db);
    return bwd(c, l, &l->dy, &l->dx, &l->dw, &t);
}
CALL(b_space_dy)
{
    nn_tensor t = cat_wrong_space(c, &l->dy);
    return bwd(c, l, &t, &l->dx, &l->dw, &l->db);
}
CALL(b_space_dw)
{
    nn_tensor t = cat_wrong_space(c, &l->dw);
    return bwd(c, l, &l->dy, &l->dx, &t, &l->db);
}
CALL(b_dx_on_dy)
{
    /* a problem of 2 rows, so that dx (2x3) fits in dy's storage */
    nn_linear_pullback *pb = NULL;
    nn_tensor dx = cat_view_on(&l->dy, 2, (int64_t[]){2, 3}, 0);
    nn_tensor x = cat_view_on(&l->x, 2, (int64_t[]){2, 3}, 0);
    nn_tensor y = cat_view_on(&l->y, 2, (int64_t[]){2, 2}, 0);
    nn_tensor dy = cat_view_on(&l->dy, 2, (int64_t[]){2, 2}, 0);
    cr_assert_eq(nn_linear_forward(c->ctx, &l->p, &x, &l->w, &l->b, &y, &pb), NN_OK, "fixture");
    nn_status st = nn_linear_backward(c->ctx, &pb, &dy, &dx, NULL, NULL);
    cr_assert_eq(nn_linear_pullback_free(&pb), NN_OK, "the pullback stays the caller's");
    return st;
}
CALL(b_dx_on_x)
{
    nn_tensor dx = l->x;
    return bwd(c, l, &l->dy, &dx, &l->dw, &l->db);
}
CALL(b_dw_on_w)
{
    nn_tensor dw = l->w;
    return bwd(c, l, &l->dy, &l->dx, &dw, &l->db);
}
CALL(b_dw_on_dx)
{
    nn_tensor dw = cat_view_on(&l->dx, 2, W, 4);
    return bwd(c, l, &l->dy, &l->dx, &dw, &l->db);
}
CALL(b_db_on_dw)
{
    nn_tensor db = cat_view_on(&l->dw, 1, B, 3);
    return bwd(c, l, &l->dy, &l->dx, &l->dw, &db);
}
CALL(b_db_on_dy)
{
    nn_tensor db = cat_view_on(&l->dy, 1, B, 6);
    return bwd(c, l, &l->dy, &l->dx, &l->dw, &db);
}
CALL(b_db_on_x)
{
    nn_tensor db = cat_view_on(&l->x, 1, B, 10);
    return bwd(c, l, &l->dy, &l->dx, &l->dw, &db);
}
CALL(b_dx_on_saved_y)
{
    /* with relu the pullback keeps y: forward wrote y into dx's storage */
    l->p.activation = NN_ACTIVATION_RELU;
    nn_tensor y = cat_view_on(&l->dx, 2, Y, 0);
    nn_linear_pullback *pb = NULL;
    cr_assert_eq(nn_linear_forward(c->ctx, &l->p, &l->x, &l->w, &l->b, &y, &pb), NN_OK,
                 "fixture: %s", nn_last_error()->message);
    nn_status st = nn_linear_backward(c->ctx, &pb, &l->dy, &l->dx, NULL, NULL);
    cr_assert_eq(nn_linear_pullback_free(&pb), NN_OK, "the pullback stays the caller's");
    return st;
}
CALL(b_dx_self)
{
    nn_tensor dx = l->dx;
    dx.strides[0] = 0;
    return bwd(c, l, &l->dy, &dx, &l->dw, &l->db);
}
CALL(b_dw_strided)
{
    nn_tensor dw = cat_view_on(&l->dx, 2, W, 0); /* on spare storage (dx is not asked for) */
    dw.strides[0] = 4;                           /* padded rows: distinct elements, not packed */
    return bwd(c, l, &l->dy, NULL, &dw, &l->db);
}
CALL(b_dy_strided)
{
    nn_tensor dy = cat_transposed(&l->dy);
    return bwd(c, l, &dy, &l->dx, &l->dw, &l->db);
}
/* Edge: no output at all consumes the pullback. */
CALL(b_no_outputs)
{
    nn_linear_pullback *pb = pullback(c, l);
    nn_status st = nn_linear_backward(c->ctx, &pb, &l->dy, NULL, NULL, NULL);
    if (st == NN_OK) cr_assert_null(pb, "consumed");
    return st;
}
/* Edge: db of a forward without bias is the sum of dy's rows; accumulated here (the options'
 * NN_ACCUMULATE_DB). */
CALL(b_db_without_bias)
{
    nn_linear_pullback *pb = NULL;
    nn_backward_options acc = {.accumulate = NN_ACCUMULATE_DB};
    cr_assert_eq(nn_linear_forward(c->ctx, &l->p, &l->x, &l->w, NULL, &l->y, &pb), NN_OK,
                 "fixture: %s", nn_last_error()->message);
    double dy[8], db0[2], db[2];
    cat_read(c, &l->dy, dy);
    cat_read(c, &l->db, db0);
    nn_status st = nn_linear_backward_ex(c->ctx, &pb, &acc, &l->dy, NULL, NULL, &l->db);
    if (st != NN_OK) return st;
    cat_read(c, &l->db, db);
    for (int o = 0; o < 2; o++) {
        double s = db0[o];
        for (int i = 0; i < 4; i++)
            s += dy[i * 2 + o];
        cr_assert_eq(db[o], s, "db[%d] = %g, expected %g", o, db[o], s);
    }
    return st;
}

/* ---- nn_linear_pullback_free ---- */

static nn_status pf_null(struct cat *c)
{
    (void)c;
    return nn_linear_pullback_free(NULL);
}
static nn_status pf_star_null(struct cat *c)
{
    (void)c;
    nn_linear_pullback *pb = NULL;
    return nn_linear_pullback_free(&pb);
}
CALL(pf_twice)
{
    nn_linear_pullback *pb = pullback(c, l), *copy = pb;
    cr_assert_eq(nn_linear_pullback_free(&pb), NN_OK, "first free");
    cr_assert_null(pb, "set to NULL");
    return nn_linear_pullback_free(&copy);
}
CALL(pf_consumed)
{
    nn_linear_pullback *pb = pullback(c, l), *copy = pb;
    cr_assert_eq(nn_linear_backward(c->ctx, &pb, &l->dy, &l->dx, &l->dw, &l->db), NN_OK,
                 "backward");
    return nn_linear_pullback_free(&copy);
}
static nn_status pf_conv(struct cat *c)
{
    nn_conv_pullback *cp = NULL;
    cr_assert_eq(nn_conv_forward(c->ctx, &c->cp, &c->x, &c->w, &c->b, &c->y, &cp), NN_OK,
                 "fixture");
    nn_linear_pullback *pb = (nn_linear_pullback *)cp;
    nn_status st = nn_linear_pullback_free(&pb);
    cr_assert_eq(nn_conv_pullback_free(&cp), NN_OK, "the conv pullback is intact");
    return st;
}

/* nn_linear_workspace_size() with the backward's accumulate bits. */
static nn_status wsq_acc(struct cat *c, const nn_linear_params *p, const nn_tensor *x,
                         const nn_tensor *w, const nn_tensor *b, unsigned pass, unsigned accumulate)
{
    size_t n = CAT_WS_UNSET;
    nn_status st = nn_linear_workspace_size(c->ctx, p, x, w, b, pass, accumulate, &n);
    return cat_ws_answer(c, st, n, 0);
}

/* nn_linear_workspace_size() of a call that accumulates nothing: bytes stay untouched on
 * failure; the reference takes no pool memory. */
static nn_status wsq(struct cat *c, const nn_linear_params *p, const nn_tensor *x,
                     const nn_tensor *w, const nn_tensor *b, unsigned pass)
{
    return wsq_acc(c, p, x, w, b, pass, 0);
}
CALL(ws_null_ctx)
{
    size_t n;
    return nn_linear_workspace_size(NULL, &l->p, &l->x, &l->w, &l->b, 0, 0, &n);
}
CALL(ws_null_bytes)
{
    return nn_linear_workspace_size(c->ctx, &l->p, &l->x, &l->w, &l->b, 0, 0, NULL);
}
CALL(ws_null_p)
{
    return wsq(c, NULL, &l->x, &l->w, &l->b, 0);
}
CALL(ws_null_x)
{
    return wsq(c, &l->p, NULL, &l->w, &l->b, NN_LINEAR_PASS_DX);
}
CALL(ws_null_w)
{
    return wsq(c, &l->p, &l->x, NULL, NULL, 0);
}
CALL(ws_pass_8)
{
    return wsq(c, &l->p, &l->x, &l->w, &l->b, 8);
}
CALL(ws_pass_high)
{
    return wsq(c, &l->p, &l->x, &l->w, &l->b, 0x80000001u);
}
CALL(ws_activation)
{
    l->p.activation = (nn_activation)7;
    return wsq(c, &l->p, &l->x, &l->w, &l->b, 0);
}
CALL(ws_flags)
{
    return wsq_acc(c, &l->p, &l->x, &l->w, &l->b, NN_LINEAR_PASS_DB, 0x10);
}
CALL(ws_reserved)
{
    l->p.reserved[2] = 1;
    return wsq(c, &l->p, &l->x, &l->w, &l->b, 0);
}
CALL(ws_x_rank0)
{
    nn_tensor x = l->x;
    x.rank = 0;
    return wsq(c, &l->p, &x, &l->w, &l->b, 0);
}
CALL(ws_null_xdata)
{
    nn_tensor x = l->x;
    x.data = NULL;
    return wsq(c, &l->p, &x, &l->w, &l->b, NN_LINEAR_PASS_DW);
}
CALL(ws_w_in)
{
    return wsq(c, &l->p, &l->x, &l->dy, NULL, NN_LINEAR_PASS_DX | NN_LINEAR_PASS_DW);
}
CALL(ws_b_dims)
{
    int64_t d[] = {1};
    nn_tensor b = cat_view_on(&l->b, 1, d, 0);
    return wsq(c, &l->p, &l->x, &l->w, &b, 0);
}
CALL(ws_w_dtype)
{
    nn_tensor w = l->w;
    w.dtype = NN_DTYPE_F64;
    return wsq(c, &l->p, &l->x, &w, &l->b, 0);
}
CALL(ws_x_strided)
{
    nn_tensor x = cat_transposed(&l->x);
    return wsq(c, &l->p, &x, &l->w, &l->b, 0);
}
CALL(ws_space_x)
{
    nn_tensor t = cat_wrong_space(c, &l->x);
    return wsq(c, &l->p, &t, &l->w, &l->b, NN_LINEAR_PASS_DX);
}
CALL(ws_forward_relu)
{
    l->p.activation = NN_ACTIVATION_RELU;
    return wsq(c, &l->p, &l->x, &l->w, &l->b, 0);
}
CALL(ws_x_count_overflow)
{
    nn_tensor x = cat_count_overflow(&l->x);
    return wsq(c, &l->p, &x, &l->w, &l->b, NN_LINEAR_PASS_FORWARD);
}
CALL(ws_w_extent_overflow)
{
    nn_tensor w = cat_extent_overflow(&l->w);
    return wsq(c, &l->p, &l->x, &w, NULL, NN_LINEAR_PASS_DX | NN_LINEAR_PASS_DW);
}
CALL(ws_backward_all)
{
    l->p.activation = NN_ACTIVATION_RELU;
    return wsq_acc(c, &l->p, &l->x, &l->w, NULL,
                   NN_LINEAR_PASS_DX | NN_LINEAR_PASS_DW | NN_LINEAR_PASS_DB, NN_ACCUMULATE_DB);
}

/* cuDNN's int-sized tensor calls (relu's mask in backward) with y beyond INT_MAX elements: the
 * query refuses as the backward call would (x [32769, 1] and w [65536, 1] are small; the y they
 * make, 32769 x 65536, is not). The reference takes any size. */
CALL(ws_relu_y_beyond_int)
{
    (void)l;
    const int64_t xd[] = {32769, 1}, wd[] = {65536, 1};
    nn_tensor x = cat_tensor(c, NN_DTYPE_F32, 2, xd, 121),
              w = cat_tensor(c, NN_DTYPE_F32, 2, wd, 122);
    nn_linear_params p;
    cr_assert_eq(nn_linear_params_default(&p), NN_OK, "fixture");
    p.activation = NN_ACTIVATION_RELU;
    nn_status st = wsq(c, &p, &x, &w, NULL, NN_LINEAR_PASS_DX);
    cr_assert_eq(nn_tensor_free(c->ctx, &x), NN_OK, "row cleanup");
    cr_assert_eq(nn_tensor_free(c->ctx, &w), NN_OK, "row cleanup");
    return st;
}

/* Under a pool limit no allocation meets (cat_pool_starve): a stand-alone db product's query
 * makes its plan's column of ones, pool memory, so it is refused as the call would be; the
 * queries of the forward and of the dx and dw products take no pool memory and answer. Below:
 * the query of passes under the starved pool; took_none: it must take no pool memory. */
static nn_status starved_query(struct cat *c, struct lin *l, const nn_tensor *b, unsigned passes,
                               unsigned accumulate, int took_none)
{
    struct cat_pool_mark m;
    cat_pool_starve(c, &m);
    nn_status st = wsq_acc(c, &l->p, &l->x, &l->w, b, passes, accumulate);
    cat_pool_restore(&m, took_none);
    return st;
}
CALL(ws_starved_db)
{
    /* BGRADB does not accumulate: db is a product of ones */
    return starved_query(c, l, NULL, NN_LINEAR_PASS_DW | NN_LINEAR_PASS_DB, NN_ACCUMULATE_DB, 0);
}
CALL(ws_starved_forward)
{
    l->p.activation = NN_ACTIVATION_RELU;
    return starved_query(c, l, &l->b, NN_LINEAR_PASS_FORWARD, 0, 1);
}
CALL(ws_starved_dx_dw)
{
    l->p.activation = NN_ACTIVATION_RELU;
    return starved_query(c, l, NULL, NN_LINEAR_PASS_DX | NN_LINEAR_PASS_DW, 0, 1);
}

#define E  NN_E_INVALID_ARG
#define S  NN_E_SHAPE
#define D  NN_E_DTYPE
#define M  NN_E_MEMSPACE
#define U  NN_E_UNSUPPORTED
#define P  NN_E_PULLBACK
#define O  NN_E_OVERFLOW
#define F  "nn_linear_forward"
#define BW "nn_linear_backward"
#define PF "nn_linear_pullback_free"
#define WS "nn_linear_workspace_size"

static const struct cat_row rows[] = {
    ROW("params_default p NULL", "nn_linear_params_default", "p", E, pd_null),

    ROW("forward ctx NULL", F, "ctx", E, f_null_ctx),
    ROW("forward p NULL", F, "p", E, f_null_p),
    ROW("forward x NULL", F, "x", E, f_null_x),
    ROW("forward w NULL", F, "w", E, f_null_w),
    ROW("forward y NULL", F, "y", E, f_null_y),
    ROW("forward x.data NULL", F, "x.data", E, f_null_xdata),
    ROW("forward b.data NULL", F, "b.data", E, f_null_bdata),
    ROW("forward failure sets *pullback_out NULL", F, "y", E, f_pullback_null_on_failure),
    ROW("forward activation 2", F, "p.activation", E, f_act2),
    ROW("forward activation -1", F, "p.activation", E, f_act_neg),
    ROW("forward reserved[0]", F, "p.reserved[0]", E, f_res0),
    ROW("forward reserved[3]", F, "p.reserved[3]", E, f_res3),
    ROW("forward x rank 0", F, "x.rank", E, f_x_rank0),
    ROW("forward x rank 9", F, "x.rank", E, f_x_rank9),
    ROW("forward x dim 0", F, "x.dims[0]", E, f_x_dim0),
    ROW("forward x dim < 0", F, "x.dims[1]", E, f_x_dim_neg),
    ROW("forward w rank 1", F, "w.rank", S, f_w_rank1),
    ROW("forward w rank 3", F, "w.rank", S, f_w_rank3),
    ROW("forward w in != x in", F, "w.dims[1]", S, f_w_in),
    ROW("forward b dims", F, "b.dims[0]", S, f_b_dims),
    ROW("forward b rank", F, "b.rank", S, f_b_rank),
    ROW("forward y out", F, "y.dims[1]", S, f_y_out),
    ROW("forward y rows", F, "y.dims[0]", S, f_y_rows),
    ROW("forward y rank", F, "y.rank", S, f_y_rank),
    ROW("forward y leading dims", F, "y.rank", S, f_y_lead),
    ROW("forward w dtype", F, "w.dtype", D, f_w_dtype),
    ROW("forward b dtype", F, "b.dtype", D, f_b_dtype),
    ROW("forward y dtype", F, "y.dtype", D, f_y_dtype),
    ROW("forward x dtype 9", F, "x.dtype", D, f_x_dtype_bad),
    ROW("forward x reserved", F, "x.reserved[0]", E, f_x_reserved),
    ROW("forward y space 7", F, "y.space", E, f_y_space_bad),
    ROW("forward x misaligned", F, "x.data", E, f_x_misaligned),
    ROW("forward w stride < 0", F, "w.strides[0]", E, f_w_stride_neg),
    ROW("forward x element count overflows", F, "x", O, f_x_overflow),
    ROW("forward w extent overflows", F, "w", O, f_w_overflow),
    ROW("forward x strided", F, "x", U, f_x_strided),
    ROW("forward w strided", F, "w", U, f_w_strided),
    ROW("forward y strided", F, "y", U, f_y_strided),
    ROW("forward x broadcast", F, "x", U, f_x_broadcast),
    ROW("forward x space label", F, "x", M, f_claim_x),
    ROW("forward w space label", F, "w", M, f_claim_w),
    ROW("forward b space label", F, "b", M, f_claim_b),
    ROW("forward y space label", F, "y", M, f_claim_y),
    ROW("forward x wrong space", F, "x", M, f_space_x),
    ROW("forward b wrong space", F, "b", M, f_space_b),
    ROW("forward y wrong space", F, "y", M, f_space_y),
    ROW("forward y on x", F, "y", E, f_y_on_x),
    ROW("forward y on w", F, "y", E, f_y_on_w),
    ROW("forward y on b", F, "y", E, f_y_on_b),
    ROW("forward y zero strides", F, "y", E, f_y_zero_strides),
    ROW("forward y interleaved strides", F, "y", E, f_y_interleaved),
    ROW("forward values (edge)", F, NULL, NN_OK, f_values),
    ROW("forward rank-1 x without bias (edge)", F, NULL, NN_OK, f_rank1),
    ROW("forward rank-8 x with relu (edge)", F, NULL, NN_OK, f_rank8),
    ROW("forward f64 (edge)", F, NULL, NN_OK, f_f64),
    ROW("forward inputs sharing memory (edge)", F, NULL, NN_OK, f_inputs_overlap),

    ROW("backward ctx NULL", BW, "ctx", E, b_null_ctx),
    ROW("backward pullback NULL", BW, "pullback", P, b_null_pullback),
    ROW("backward *pullback NULL", BW, "pullback", P, b_null_star),
    ROW("backward pullback used twice", BW, "pullback", P, b_twice),
    ROW("backward pullback freed", BW, "pullback", P, b_freed),
    ROW("backward pullback of another context", BW, "pullback", P, b_other_ctx),
    ROW("backward conv pullback", BW, "pullback", P, b_conv_pullback),
    ROW("backward pool pullback", BW, "pullback", P, b_pool_pullback),
    ROW("backward not a pullback", BW, "pullback", P, b_garbage_pullback),
    ROW("backward dy NULL", BW, "dy", E, b_null_dy),
    ROW("backward dy dims", BW, "dy.dims[1]", S, b_dy_dims),
    ROW("backward dy rank", BW, "dy.rank", S, b_dy_rank),
    ROW("backward dy dtype", BW, "dy.dtype", D, b_dy_dtype),
    ROW("backward dx dims", BW, "dx.dims[1]", S, b_dx_dims),
    ROW("backward dw dims", BW, "dw.dims[0]", S, b_dw_dims),
    ROW("backward db dims", BW, "db.dims[0]", S, b_db_dims),
    ROW("backward db rank", BW, "db.rank", S, b_db_rank),
    ROW("backward dx dtype", BW, "dx.dtype", D, b_dx_dtype),
    ROW("backward dw dtype", BW, "dw.dtype", D, b_dw_dtype),
    ROW("backward db dtype -1", BW, "db.dtype", D, b_db_dtype_bad),
    ROW("backward dw reserved", BW, "dw.reserved[0]", E, b_dw_reserved),
    ROW("backward dy misaligned", BW, "dy.data", E, b_dy_misaligned),
    ROW("backward dy space label", BW, "dy", M, b_claim_dy),
    ROW("backward dx space label", BW, "dx", M, b_claim_dx),
    ROW("backward dw space label", BW, "dw", M, b_claim_dw),
    ROW("backward db space label", BW, "db", M, b_claim_db),
    ROW("backward dy wrong space", BW, "dy", M, b_space_dy),
    ROW("backward dw wrong space", BW, "dw", M, b_space_dw),
    ROW("backward dx on dy", BW, "dx", E, b_dx_on_dy),
    ROW("backward dx on the saved x", BW, "dx", E, b_dx_on_x),
    ROW("backward dw on the saved w", BW, "dw", E, b_dw_on_w),
    ROW("backward dw on dx", BW, "dw", E, b_dw_on_dx),
    ROW("backward db on dw", BW, "db", E, b_db_on_dw),
    ROW("backward db on dy", BW, "db", E, b_db_on_dy),
    ROW("backward db on the saved x", BW, "db", E, b_db_on_x),
    ROW("backward dx on the saved y (relu)", BW, "dx", E, b_dx_on_saved_y),
    ROW("backward dx zero stride", BW, "dx", E, b_dx_self),
    ROW("backward dw padded rows", BW, "dw", U, b_dw_strided),
    ROW("backward dy strided", BW, "dy", U, b_dy_strided),
    ROW("backward no outputs (edge)", BW, NULL, NN_OK, b_no_outputs),
    ROW("backward db without a forward bias, accumulated (edge)", "nn_linear_backward_ex", NULL,
        NN_OK, b_db_without_bias),

    ROW("pullback_free NULL (edge)", PF, NULL, NN_OK, pf_null),
    ROW("pullback_free *NULL (edge)", PF, NULL, NN_OK, pf_star_null),
    ROW("pullback_free twice", PF, "pullback", P, pf_twice),
    ROW("pullback_free consumed", PF, "pullback", P, pf_consumed),
    ROW("pullback_free conv pullback", PF, "pullback", P, pf_conv),

    ROW("workspace_size ctx NULL", WS, "ctx", E, ws_null_ctx),
    ROW("workspace_size bytes NULL", WS, "bytes", E, ws_null_bytes),
    ROW("workspace_size p NULL", WS, "p", E, ws_null_p),
    ROW("workspace_size x NULL", WS, "x", E, ws_null_x),
    ROW("workspace_size w NULL", WS, "w", E, ws_null_w),
    ROW("workspace_size pass 8", WS, "pass", E, ws_pass_8),
    ROW("workspace_size pass bit 31", WS, "pass", E, ws_pass_high),
    ROW("workspace_size activation 7", WS, "p.activation", E, ws_activation),
    ROW("workspace_size unknown accumulate bit", WS, "accumulate", E, ws_flags),
    ROW("workspace_size reserved[2]", WS, "p.reserved[2]", E, ws_reserved),
    ROW("workspace_size x rank 0", WS, "x.rank", E, ws_x_rank0),
    ROW("workspace_size x.data NULL", WS, "x.data", E, ws_null_xdata),
    ROW("workspace_size w in != x in", WS, "w.dims[1]", S, ws_w_in),
    ROW("workspace_size b dims", WS, "b.dims[0]", S, ws_b_dims),
    ROW("workspace_size w dtype", WS, "w.dtype", D, ws_w_dtype),
    ROW("workspace_size x strided", WS, "x", U, ws_x_strided),
    ROW("workspace_size x wrong space", WS, "x", M, ws_space_x),
    ROW("workspace_size x element count overflows", WS, "x", O, ws_x_count_overflow),
    ROW("workspace_size w byte extent overflows", WS, "w", O, ws_w_extent_overflow),
    ROW("workspace_size forward relu bias (edge)", WS, NULL, NN_OK, ws_forward_relu),
    ROW("workspace_size backward dx dw db relu accdb (edge)", WS, NULL, NN_OK, ws_backward_all),
    ROW2("workspace_size relu backward, y beyond int (cuDNN's mask)", WS, "y", NN_OK, U,
         ws_relu_y_beyond_int),
    ROW_ON(CAT_GPU_ONLY, "workspace_size dw db accdb under a 1-byte pool limit (the ones)", WS,
           "limit", NN_E_OOM_DEVICE, ws_starved_db),
    ROW_ON(CAT_GPU_ONLY, "workspace_size forward under a 1-byte pool limit (edge: no pool use)", WS,
           NULL, NN_OK, ws_starved_forward),
    ROW_ON(CAT_GPU_ONLY, "workspace_size dx dw relu under a 1-byte pool limit (edge: no pool use)",
           WS, NULL, NN_OK, ws_starved_dx_dw),
};

CAT_SUBJECT(linear, rows)

/* Catalogue rows: pooling (include/nnprim/pool.h). */
#include <string.h>

#include "catalogue.h"
#include "catalogue_family.h"

#define CALL(fname) static nn_status fname(struct cat *c)

static nn_status fwd(struct cat *c, const nn_tensor *x, nn_tensor *y)
{
    return nn_pool_forward(c->ctx, &c->pp, x, y, NULL);
}

static const int64_t PX[] = {1, 2, 4, 4}, PY[] = {1, 2, 2, 2};

/* ---- nn_pool_output_shape ---- */

CALL(os_null_p)
{
    int64_t y[4];
    (void)c;
    return nn_pool_output_shape(NULL, 4, PX, y);
}
CALL(os_null_x)
{
    int64_t y[4];
    return nn_pool_output_shape(&c->pp, 4, NULL, y);
}
CALL(os_null_y)
{
    return nn_pool_output_shape(&c->pp, 4, PX, NULL);
}
CALL(os_rank)
{
    int64_t y[4];
    return nn_pool_output_shape(&c->pp, 5, PX, y);
}
CALL(os_dim0)
{
    int64_t y[4], x[] = {1, 0, 4, 4};
    return nn_pool_output_shape(&c->pp, 4, x, y);
}
CALL(os_window_big)
{
    int64_t y[4];
    c->pp.window[1] = 5;
    return nn_pool_output_shape(&c->pp, 4, PX, y);
}
CALL(os_pad_overflow)
{
    int64_t y[4], x[] = {1, 2, INT64_MAX, 4};
    c->pp.pad_lo[0] = 1;
    return nn_pool_output_shape(&c->pp, 4, x, y);
}
CALL(os_reserved)
{
    int64_t y[4];
    c->pp.reserved[3] = 1;
    return nn_pool_output_shape(&c->pp, 4, PX, y);
}
CALL(os_stride_max)
{
    int64_t y[4];
    c->pp.stride[0] = c->pp.stride[1] = INT64_MAX;
    nn_status st = nn_pool_output_shape(&c->pp, 4, PX, y);
    if (st == NN_OK) cr_assert(y[2] == 1 && y[3] == 1, "y dims");
    return st;
}

/* ---- nn_pool_forward: NULLs, parameters, shapes ---- */

CALL(f_null_ctx)
{
    return nn_pool_forward(NULL, &c->pp, &c->px, &c->py, NULL);
}
CALL(f_null_p)
{
    return nn_pool_forward(c->ctx, NULL, &c->px, &c->py, NULL);
}
CALL(f_null_x)
{
    return fwd(c, NULL, &c->py);
}
CALL(f_null_y)
{
    return fwd(c, &c->px, NULL);
}
CALL(f_null_xdata)
{
    nn_tensor x = c->px;
    x.data = NULL;
    return fwd(c, &x, &c->py);
}
CALL(f_null_y_pullback)
{
    nn_pool_pullback *pb = (nn_pool_pullback *)c;
    nn_status st = nn_pool_forward(c->ctx, &c->pp, &c->px, NULL, &pb);
    cr_assert_null(pb, "*pullback_out must be NULL after a failure");
    return st;
}
CALL(f_rank0)
{
    c->pp.spatial_rank = 0;
    return fwd(c, &c->px, &c->py);
}
CALL(f_rank4)
{
    c->pp.spatial_rank = 4;
    return fwd(c, &c->px, &c->py);
}
CALL(f_mode)
{
    c->pp.mode = (nn_pool_mode)3;
    return fwd(c, &c->px, &c->py);
}
CALL(f_mode_neg)
{
    c->pp.mode = (nn_pool_mode)-1;
    return fwd(c, &c->px, &c->py);
}
CALL(f_window0)
{
    c->pp.window[0] = 0;
    return fwd(c, &c->px, &c->py);
}
CALL(f_window_neg)
{
    c->pp.window[1] = -1;
    return fwd(c, &c->px, &c->py);
}
CALL(f_stride0)
{
    c->pp.stride[0] = 0;
    return fwd(c, &c->px, &c->py);
}
CALL(f_stride_neg)
{
    c->pp.stride[1] = INT64_MIN;
    return fwd(c, &c->px, &c->py);
}
CALL(f_padlo_neg)
{
    c->pp.pad_lo[0] = -1;
    return fwd(c, &c->px, &c->py);
}
CALL(f_padlo_window)
{
    c->pp.pad_lo[1] = 2;
    return fwd(c, &c->px, &c->py);
}
CALL(f_padhi_window)
{
    c->pp.pad_hi[0] = 5;
    return fwd(c, &c->px, &c->py);
}
CALL(f_res0)
{
    c->pp.reserved[0] = 1;
    return fwd(c, &c->px, &c->py);
}
CALL(f_res1)
{
    c->pp.reserved[1] = UINT64_MAX;
    return fwd(c, &c->px, &c->py);
}
CALL(f_res2)
{
    c->pp.reserved[2] = 4;
    return fwd(c, &c->px, &c->py);
}
CALL(f_res3)
{
    c->pp.reserved[3] = 1u << 31;
    return fwd(c, &c->px, &c->py);
}
CALL(f_xrank)
{
    int64_t d[] = {2, 4, 4};
    nn_tensor x = cat_view_on(&c->px, 3, d, 0);
    return fwd(c, &x, &c->py);
}
CALL(f_window_big)
{
    c->pp.window[0] = 5;
    return fwd(c, &c->px, &c->py);
}
CALL(f_ydims)
{
    int64_t d[] = {1, 2, 2, 1};
    nn_tensor y = cat_view_on(&c->py, 4, d, 0);
    return fwd(c, &c->px, &y);
}
CALL(f_yrank)
{
    int64_t d[] = {2, 2, 2};
    nn_tensor y = cat_view_on(&c->py, 3, d, 0);
    return fwd(c, &c->px, &y);
}
CALL(f_ydtype)
{
    nn_tensor y = c->py;
    y.dtype = NN_DTYPE_F64;
    return fwd(c, &c->px, &y);
}
CALL(f_xdtype_bad)
{
    nn_tensor x = c->px;
    x.dtype = (nn_dtype)5;
    return fwd(c, &x, &c->py);
}
CALL(f_xstride_neg)
{
    nn_tensor x = c->px;
    x.strides[1] = -16;
    return fwd(c, &x, &c->py);
}
CALL(f_x_overflow)
{
    nn_tensor x = c->px;
    x.strides[0] = INT64_MAX;
    x.dims[0] = 3;
    return fwd(c, &x, &c->py);
}
/* Edge: f64 runs on both backends (cuDNN's legacy pooling with double scaling factors). */
CALL(f_f64)
{
    nn_tensor x = cat_tensor(c, NN_DTYPE_F64, 4, PX, 50),
              y = cat_tensor(c, NN_DTYPE_F64, 4, PY, 51);
    nn_status st = fwd(c, &x, &y);
    nn_tensor_free(c->ctx, &x);
    nn_tensor_free(c->ctx, &y);
    return st;
}
/* Edge: a strided (transposed) x and y are fine. */
CALL(f_strided_ok)
{
    nn_tensor x = c->px, y = c->py;
    x.strides[2] = 1;
    x.strides[3] = 4;
    y.strides[2] = 1;
    y.strides[3] = 2;
    return fwd(c, &x, &y);
}
/* Edge: padding on one side only runs on the reference; cuDNN pads both sides equally. */
CALL(f_pad_asym)
{
    c->pp.pad_lo[0] = 1;
    int64_t d[] = {1, 2, 2, 2};
    nn_tensor y = cat_view_on(&c->py, 4, d, 0);
    return fwd(c, &c->px, &y);
}

/* ---- nn_pool_forward: spaces, overlaps, limits ---- */

CALL(f_claim_x)
{
    nn_tensor t = cat_claim_other_space(c, &c->px);
    return fwd(c, &t, &c->py);
}
CALL(f_claim_y)
{
    nn_tensor t = cat_claim_other_space(c, &c->py);
    return fwd(c, &c->px, &t);
}
CALL(f_space_x)
{
    nn_tensor t = cat_wrong_space(c, &c->px);
    return fwd(c, &t, &c->py);
}
CALL(f_space_y)
{
    nn_tensor t = cat_wrong_space(c, &c->py);
    return fwd(c, &c->px, &t);
}
/* y on x's storage is refused (the values would be wrong). */
CALL(f_y_on_x)
{
    nn_tensor y = cat_view_on(&c->px, 4, PY, 0);
    return fwd(c, &c->px, &y);
}
CALL(f_y_in_x)
{
    nn_tensor y = cat_view_on(&c->px, 4, PY, 20);
    return fwd(c, &c->px, &y);
}
CALL(f_y_is_x)
{
    /* window 1, stride 1: y has x's dims, and here x's storage */
    c->pp.window[0] = c->pp.window[1] = c->pp.stride[0] = c->pp.stride[1] = 1;
    return fwd(c, &c->px, &c->px);
}
CALL(f_x_in_y)
{
    int64_t d[] = {1, 2, 2, 2};
    nn_tensor x = c->px;
    nn_tensor y = cat_view_on(&c->px, 4, d, 31); /* shares only x's last element */
    return fwd(c, &x, &y);
}
/* A y with all-zero strides is refused before cuDNN (which answers BAD_PARAM). */
CALL(f_y_zero_strides)
{
    nn_tensor y = c->py;
    memset(y.strides, 0, sizeof y.strides);
    return fwd(c, &c->px, &y);
}
CALL(f_y_stride0)
{
    nn_tensor y = c->py;
    y.strides[3] = 0;
    return fwd(c, &c->px, &y);
}
CALL(f_y_interleaved)
{
    nn_tensor y = c->py; /* H and W steps collide: y[0,0,0,1] and y[0,0,1,0] share memory */
    y.strides[2] = 1;
    y.strides[3] = 1;
    return fwd(c, &c->px, &y);
}
/* Edge: a broadcast x (stride 0) is an input, fine on the reference; cuDNN takes strides >= 1. */
CALL(f_x_broadcast)
{
    nn_tensor x = c->px;
    x.strides[0] = x.strides[1] = 0;
    return fwd(c, &x, &c->py);
}
/* The window volume of a broadcast 3-D input must not overflow int64 in the reference. */
CALL(f_window_volume)
{
    int64_t big = INT64_C(1) << 21;
    nn_tensor x = c->px;
    x.rank = 5;
    x.dims[0] = x.dims[1] = 1;
    x.dims[2] = x.dims[3] = x.dims[4] = big;
    memset(x.strides, 0, sizeof x.strides);
    int64_t d[] = {1, 1, 1, 1, 1};
    nn_tensor y = cat_view_on(&c->py, 5, d, 0);
    nn_pool_params p = c->pp;
    p.spatial_rank = 3;
    p.mode = NN_POOL_MEAN_INCLUDE_PAD;
    for (int i = 0; i < 3; i++)
        p.window[i] = p.stride[i] = big;
    return nn_pool_forward(c->ctx, &p, &x, &y, NULL);
}
CALL(f_stride_max)
{
    int64_t d[] = {1, 2, 1, 1};
    nn_tensor y = cat_view_on(&c->py, 4, d, 0);
    c->pp.stride[0] = c->pp.stride[1] = INT64_MAX;
    nn_status st = fwd(c, &c->px, &y);
    if (st != NN_OK) return st;
    double hx[32], hy[2];
    cat_read(c, &c->px, hx);
    cat_read(c, &y, hy);
    for (int ch = 0; ch < 2; ch++) {
        double m = hx[ch * 16];
        for (int i = 0; i < 2; i++)
            for (int j = 0; j < 2; j++)
                m = hx[ch * 16 + i * 4 + j] > m ? hx[ch * 16 + i * 4 + j] : m;
        cr_assert_eq(hy[ch], m, "y[%d] = %g, expected %g", ch, hy[ch], m);
    }
    return NN_OK;
}
/* ---- nn_pool_backward ---- */

static nn_pool_pullback *pullback(struct cat *c)
{
    nn_pool_pullback *pb = NULL;
    cr_assert_eq(nn_pool_forward(c->ctx, &c->pp, &c->px, &c->py, &pb), NN_OK, "fixture: %s",
                 nn_last_error()->message);
    return pb;
}
/* After a refused call the pullback is still the caller's: a valid retry works, and leaves the
 * thread's record (the refused call's) alone. */
static nn_status then_retry(struct cat *c, nn_status st, nn_pool_pullback **pb)
{
    if (st == NN_OK) return st;
    nn_error_info e = *nn_last_error();
    cr_assert_not_null(*pb, "a refused call leaves the pullback with the caller");
    cr_assert_eq(nn_pool_backward(c->ctx, pb, &c->pdy, &c->pdx), NN_OK,
                 "a valid retry with the same pullback: %s", nn_last_error()->message);
    cr_assert_null(*pb);
    cr_assert_str_eq(nn_last_error()->message, e.message, "the record changed");
    return st;
}
static nn_status bwd(struct cat *c, const nn_tensor *dy, nn_tensor *dx)
{
    nn_pool_pullback *pb = pullback(c);
    return then_retry(c, nn_pool_backward(c->ctx, &pb, dy, dx), &pb);
}
CALL(b_null_ctx)
{
    nn_pool_pullback *pb = pullback(c);
    return then_retry(c, nn_pool_backward(NULL, &pb, &c->pdy, &c->pdx), &pb);
}
CALL(b_null_pullback)
{
    return nn_pool_backward(c->ctx, NULL, &c->pdy, &c->pdx);
}
CALL(b_null_star)
{
    nn_pool_pullback *pb = NULL;
    return nn_pool_backward(c->ctx, &pb, &c->pdy, &c->pdx);
}
CALL(b_twice)
{
    nn_pool_pullback *pb = pullback(c), *copy = pb;
    cr_assert_eq(nn_pool_backward(c->ctx, &pb, &c->pdy, &c->pdx), NN_OK, "first");
    return nn_pool_backward(c->ctx, &copy, &c->pdy, &c->pdx);
}
CALL(b_freed)
{
    nn_pool_pullback *pb = pullback(c), *copy = pb;
    cr_assert_eq(nn_pool_pullback_free(&pb), NN_OK, "free");
    return nn_pool_backward(c->ctx, &copy, &c->pdy, &c->pdx);
}
CALL(b_other_ctx)
{
    nn_pool_pullback *pb = pullback(c);
    return then_retry(c, nn_pool_backward(cat_other_ctx(c), &pb, &c->pdy, &c->pdx), &pb);
}
CALL(b_conv_pullback)
{
    nn_conv_pullback *cp = NULL;
    cr_assert_eq(nn_conv_forward(c->ctx, &c->cp, &c->x, &c->w, &c->b, &c->y, &cp), NN_OK,
                 "fixture");
    nn_pool_pullback *pb = (nn_pool_pullback *)cp;
    nn_status st = nn_pool_backward(c->ctx, &pb, &c->pdy, &c->pdx);
    cr_assert_eq(nn_conv_pullback_free(&cp), NN_OK, "the conv pullback is intact");
    return st;
}
CALL(b_null_dy)
{
    return bwd(c, NULL, &c->pdx);
}
CALL(b_null_dx)
{
    return bwd(c, &c->pdy, NULL);
}
CALL(b_dy_dims)
{
    int64_t d[] = {1, 2, 2, 1};
    nn_tensor dy = cat_view_on(&c->pdy, 4, d, 0);
    return bwd(c, &dy, &c->pdx);
}
CALL(b_dx_dims)
{
    int64_t d[] = {1, 1, 4, 4};
    nn_tensor dx = cat_view_on(&c->pdx, 4, d, 0);
    return bwd(c, &c->pdy, &dx);
}
CALL(b_dx_dtype)
{
    nn_tensor dx = c->pdx;
    dx.dtype = NN_DTYPE_F16;
    cat_packed(&dx);
    return bwd(c, &c->pdy, &dx);
}
CALL(b_dy_dtype)
{
    nn_tensor dy = c->pdy;
    dy.dtype = NN_DTYPE_BF16;
    cat_packed(&dy);
    return bwd(c, &dy, &c->pdx);
}
CALL(b_claim_dy)
{
    nn_tensor t = cat_claim_other_space(c, &c->pdy);
    return bwd(c, &t, &c->pdx);
}
CALL(b_claim_dx)
{
    nn_tensor t = cat_claim_other_space(c, &c->pdx);
    return bwd(c, &c->pdy, &t);
}
CALL(b_space_dy)
{
    nn_tensor t = cat_wrong_space(c, &c->pdy);
    return bwd(c, &t, &c->pdx);
}
CALL(b_space_dx)
{
    nn_tensor t = cat_wrong_space(c, &c->pdx);
    return bwd(c, &c->pdy, &t);
}
/* dx overlapping dy is refused (the values would be wrong). */
CALL(b_dy_in_dx)
{
    nn_tensor dy = cat_view_on(&c->pdx, 4, PY, 8);
    return bwd(c, &dy, &c->pdx);
}
CALL(b_dx_on_x)
{
    nn_tensor dx = c->px;
    return bwd(c, &c->pdy, &dx);
}
CALL(b_dx_on_y)
{
    /* forward wrote y into the first elements of dx's storage */
    nn_tensor y = cat_view_on(&c->pdx, 4, PY, 0);
    nn_pool_pullback *pb = NULL;
    cr_assert_eq(nn_pool_forward(c->ctx, &c->pp, &c->px, &y, &pb), NN_OK, "fixture: %s",
                 nn_last_error()->message);
    nn_status st = nn_pool_backward(c->ctx, &pb, &c->pdy, &c->pdx);
    cr_assert_eq(nn_pool_pullback_free(&pb), NN_OK, "the pullback stays the caller's");
    return st;
}
CALL(b_dx_self)
{
    nn_tensor dx = c->pdx;
    dx.strides[1] = 0;
    return bwd(c, &c->pdy, &dx);
}
CALL(b_dx_zero)
{
    nn_tensor dx = c->pdx;
    memset(dx.strides, 0, sizeof dx.strides);
    return bwd(c, &c->pdy, &dx);
}
CALL(b_dx_data_null)
{
    nn_tensor dx = c->pdx;
    dx.data = NULL;
    return bwd(c, &c->pdy, &dx);
}
/* Edge: strided dx and dy are fine. */
CALL(b_strided_ok)
{
    nn_tensor dx = c->pdx, dy = c->pdy;
    dx.strides[2] = 1;
    dx.strides[3] = 4;
    dy.strides[2] = 1;
    dy.strides[3] = 2;
    nn_pool_pullback *pb = pullback(c);
    nn_status st = nn_pool_backward(c->ctx, &pb, &dy, &dx);
    if (st == NN_OK) cr_assert_null(pb);
    return st;
}

CALL(pf_null)
{
    (void)c;
    return nn_pool_pullback_free(NULL);
}
CALL(pf_star_null)
{
    (void)c;
    nn_pool_pullback *pb = NULL;
    return nn_pool_pullback_free(&pb);
}
CALL(pf_twice)
{
    nn_pool_pullback *pb = pullback(c), *copy = pb;
    cr_assert_eq(nn_pool_pullback_free(&pb), NN_OK, "first free");
    return nn_pool_pullback_free(&copy);
}
CALL(pf_consumed)
{
    nn_pool_pullback *pb = pullback(c), *copy = pb;
    cr_assert_eq(nn_pool_backward(c->ctx, &pb, &c->pdy, &c->pdx), NN_OK, "backward");
    return nn_pool_pullback_free(&copy);
}
CALL(pf_conv)
{
    nn_conv_pullback *cp = NULL;
    cr_assert_eq(nn_conv_forward(c->ctx, &c->cp, &c->x, &c->w, &c->b, &c->y, &cp), NN_OK,
                 "fixture");
    nn_pool_pullback *pb = (nn_pool_pullback *)cp;
    nn_status st = nn_pool_pullback_free(&pb);
    cr_assert_eq(nn_conv_pullback_free(&cp), NN_OK, "the conv pullback is intact");
    return st;
}

/* ---- nn_pool_workspace_size ---- */

static nn_status ws(struct cat *c, const nn_pool_params *p, const nn_tensor *x, const nn_tensor *y,
                    const nn_tensor *dy, const nn_tensor *dx, nn_pool_pass pass)
{
    size_t n = CAT_WS_UNSET; /* a forward takes no pool memory on either backend */
    nn_status st = nn_pool_workspace_size(c->ctx, p, x, y, dy, dx, pass, &n);
    return cat_ws_answer(c, st, n, pass == NN_POOL_PASS_FORWARD);
}
static nn_status ws_bwd(struct cat *c, const nn_tensor *dy, const nn_tensor *dx)
{
    return ws(c, &c->pp, &c->px, &c->py, dy, dx, NN_POOL_PASS_BACKWARD);
}
CALL(ws_null_ctx)
{
    size_t n;
    return nn_pool_workspace_size(NULL, &c->pp, &c->px, &c->py, &c->pdy, &c->pdx,
                                  NN_POOL_PASS_BACKWARD, &n);
}
CALL(ws_null_bytes)
{
    return nn_pool_workspace_size(c->ctx, &c->pp, &c->px, &c->py, &c->pdy, &c->pdx,
                                  NN_POOL_PASS_BACKWARD, NULL);
}
CALL(ws_null_p)
{
    return ws(c, NULL, &c->px, &c->py, &c->pdy, &c->pdx, NN_POOL_PASS_BACKWARD);
}
CALL(ws_null_x)
{
    return ws(c, &c->pp, NULL, &c->py, NULL, NULL, NN_POOL_PASS_FORWARD);
}
CALL(ws_null_y)
{
    return ws(c, &c->pp, &c->px, NULL, NULL, NULL, NN_POOL_PASS_FORWARD);
}
CALL(ws_null_dy)
{
    return ws_bwd(c, NULL, &c->pdx);
}
CALL(ws_null_dx)
{
    return ws_bwd(c, &c->pdy, NULL);
}
CALL(ws_pass_2)
{
    return ws(c, &c->pp, &c->px, &c->py, &c->pdy, &c->pdx, (nn_pool_pass)2);
}
CALL(ws_pass_negative)
{
    return ws(c, &c->pp, &c->px, &c->py, &c->pdy, &c->pdx, (nn_pool_pass)-1);
}
CALL(ws_mode)
{
    c->pp.mode = (nn_pool_mode)3;
    return ws_bwd(c, &c->pdy, &c->pdx);
}
CALL(ws_reserved)
{
    c->pp.reserved[2] = 1;
    return ws_bwd(c, &c->pdy, &c->pdx);
}
CALL(ws_ydims)
{
    int64_t d[] = {1, 2, 2, 1};
    nn_tensor y = cat_view_on(&c->py, 4, d, 0);
    return ws(c, &c->pp, &c->px, &y, NULL, NULL, NN_POOL_PASS_FORWARD);
}
CALL(ws_dy_dims)
{
    int64_t d[] = {1, 2, 2, 1};
    nn_tensor dy = cat_view_on(&c->pdy, 4, d, 0);
    return ws_bwd(c, &dy, &c->pdx);
}
CALL(ws_dx_dtype)
{
    nn_tensor dx = c->pdx;
    dx.dtype = NN_DTYPE_F16;
    cat_packed(&dx);
    return ws_bwd(c, &c->pdy, &dx);
}
CALL(ws_dx_space)
{
    nn_tensor dx = cat_wrong_space(c, &c->pdx);
    return ws_bwd(c, &c->pdy, &dx);
}
CALL(ws_dx_on_x)
{
    return ws_bwd(c, &c->pdy, &c->px);
}
CALL(ws_f64)
{
    nn_tensor x = cat_tensor(c, NN_DTYPE_F64, 4, PX, 52),
              y = cat_tensor(c, NN_DTYPE_F64, 4, PY, 53);
    nn_status st = ws(c, &c->pp, &x, &y, NULL, NULL, NN_POOL_PASS_FORWARD);
    nn_tensor_free(c->ctx, &x);
    nn_tensor_free(c->ctx, &y);
    return st;
}
CALL(ws_pad_asym)
{
    c->pp.pad_lo[0] = 1;
    return ws(c, &c->pp, &c->px, &c->py, NULL, NULL, NN_POOL_PASS_FORWARD);
}
/* Edge: the forward ignores dy and dx; the fixture's packed backward needs no copies. */
CALL(ws_forward_ok)
{
    return ws(c, &c->pp, &c->px, &c->py, NULL, NULL, NN_POOL_PASS_FORWARD);
}
CALL(ws_x_count_overflow)
{
    nn_tensor x = cat_count_overflow(&c->px);
    return ws(c, &c->pp, &x, &c->py, NULL, NULL, NN_POOL_PASS_FORWARD);
}
CALL(ws_y_extent_overflow)
{
    nn_tensor y = cat_extent_overflow(&c->py);
    return ws(c, &c->pp, &c->px, &y, NULL, NULL, NN_POOL_PASS_FORWARD);
}
CALL(ws_dy_count_overflow)
{
    nn_tensor dy = cat_count_overflow(&c->pdy);
    return ws_bwd(c, &dy, &c->pdx);
}
CALL(ws_dx_extent_overflow)
{
    nn_tensor dx = cat_extent_overflow(&c->pdx);
    return ws_bwd(c, &c->pdy, &dx);
}
CALL(ws_backward_ok)
{
    size_t n = 1;
    nn_status st = nn_pool_workspace_size(c->ctx, &c->pp, &c->px, &c->py, &c->pdy, &c->pdx,
                                          NN_POOL_PASS_BACKWARD, &n);
    if (st == NN_OK) cr_assert_eq(n, 0, "packed tensors: no copies");
    return st;
}

#define E NN_E_INVALID_ARG
#define S NN_E_SHAPE
#define D NN_E_DTYPE
#define M NN_E_MEMSPACE
#define U NN_E_UNSUPPORTED
#define P NN_E_PULLBACK
#define O NN_E_OVERFLOW

static const struct cat_row rows[] = {
    ROW("output_shape params NULL", "nn_pool_output_shape", "params", E, os_null_p),
    ROW("output_shape x_dims NULL", "nn_pool_output_shape", "x_dims", E, os_null_x),
    ROW("output_shape y_dims NULL", "nn_pool_output_shape", "y_dims", E, os_null_y),
    ROW("output_shape rank", "nn_pool_output_shape", "x.rank", S, os_rank),
    ROW("output_shape dim 0", "nn_pool_output_shape", "x.dims[1]", E, os_dim0),
    ROW("output_shape window > input", "nn_pool_output_shape", "params.window[1]", S,
        os_window_big),
    ROW("output_shape padded size overflows", "nn_pool_output_shape", "x.dims[2]", O,
        os_pad_overflow),
    ROW("output_shape reserved", "nn_pool_output_shape", "params.reserved[3]", E, os_reserved),
    ROW("output_shape stride INT64_MAX (edge)", "nn_pool_output_shape", NULL, NN_OK, os_stride_max),

    ROW("forward ctx NULL", "nn_pool_forward", "ctx", E, f_null_ctx),
    ROW("forward params NULL", "nn_pool_forward", "params", E, f_null_p),
    ROW("forward x NULL", "nn_pool_forward", "x", E, f_null_x),
    ROW("forward y NULL", "nn_pool_forward", "y", E, f_null_y),
    ROW("forward x.data NULL", "nn_pool_forward", "x.data", E, f_null_xdata),
    ROW("forward failure sets *pullback_out NULL", "nn_pool_forward", "y", E, f_null_y_pullback),
    ROW("forward spatial_rank 0", "nn_pool_forward", "params.spatial_rank", E, f_rank0),
    ROW("forward spatial_rank 4", "nn_pool_forward", "params.spatial_rank", E, f_rank4),
    ROW("forward mode 3", "nn_pool_forward", "params.mode", E, f_mode),
    ROW("forward mode -1", "nn_pool_forward", "params.mode", E, f_mode_neg),
    ROW("forward window 0", "nn_pool_forward", "params.window[0]", E, f_window0),
    ROW("forward window < 0", "nn_pool_forward", "params.window[1]", E, f_window_neg),
    ROW("forward stride 0", "nn_pool_forward", "params.stride[0]", E, f_stride0),
    ROW("forward stride INT64_MIN", "nn_pool_forward", "params.stride[1]", E, f_stride_neg),
    ROW("forward pad_lo < 0", "nn_pool_forward", "params.pad_lo[0]", E, f_padlo_neg),
    ROW("forward pad_lo = window", "nn_pool_forward", "params.pad_lo[1]", E, f_padlo_window),
    ROW("forward pad_hi > window", "nn_pool_forward", "params.pad_hi[0]", E, f_padhi_window),
    ROW("forward reserved[0]", "nn_pool_forward", "params.reserved[0]", E, f_res0),
    ROW("forward reserved[1]", "nn_pool_forward", "params.reserved[1]", E, f_res1),
    ROW("forward reserved[2]", "nn_pool_forward", "params.reserved[2]", E, f_res2),
    ROW("forward reserved[3]", "nn_pool_forward", "params.reserved[3]", E, f_res3),
    ROW("forward x rank", "nn_pool_forward", "x.rank", S, f_xrank),
    ROW("forward window > input", "nn_pool_forward", "params.window[0]", S, f_window_big),
    ROW("forward y dims", "nn_pool_forward", "y", S, f_ydims),
    ROW("forward y rank", "nn_pool_forward", "y", S, f_yrank),
    ROW("forward y dtype", "nn_pool_forward", "y.dtype", D, f_ydtype),
    ROW("forward x dtype 5", "nn_pool_forward", "x.dtype", D, f_xdtype_bad),
    ROW("forward x stride < 0", "nn_pool_forward", "x.strides[1]", E, f_xstride_neg),
    ROW("forward x extent overflows", "nn_pool_forward", "x", O, f_x_overflow),
    ROW("forward f64", "nn_pool_forward", "x.dtype", NN_OK, f_f64),
    ROW("forward strided x and y (edge)", "nn_pool_forward", NULL, NN_OK, f_strided_ok),
    ROW2("forward pad_lo != pad_hi", "nn_pool_forward", "params.pad_lo[0]", NN_OK, U, f_pad_asym),
    ROW("forward x space label", "nn_pool_forward", "x", M, f_claim_x),
    ROW("forward y space label", "nn_pool_forward", "y", M, f_claim_y),
    ROW("forward x wrong space", "nn_pool_forward", "x", M, f_space_x),
    ROW("forward y wrong space", "nn_pool_forward", "y", M, f_space_y),
    ROW("forward y on x", "nn_pool_forward", "y", E, f_y_on_x),
    ROW("forward y inside x", "nn_pool_forward", "y", E, f_y_in_x),
    ROW("forward y is x", "nn_pool_forward", "y", E, f_y_is_x),
    ROW("forward y shares one element of x", "nn_pool_forward", "y", E, f_x_in_y),
    ROW("forward y zero strides", "nn_pool_forward", "y", E, f_y_zero_strides),
    ROW("forward y one zero stride", "nn_pool_forward", "y", E, f_y_stride0),
    ROW("forward y interleaved strides", "nn_pool_forward", "y", E, f_y_interleaved),
    ROW2("forward broadcast x", "nn_pool_forward", "x.strides[0]", NN_OK, U, f_x_broadcast),
    ROW("forward window volume overflows", "nn_pool_forward", NULL, O, f_window_volume),
    ROW2("forward stride INT64_MAX", "nn_pool_forward", "params.stride[0]", NN_OK, U, f_stride_max),

    ROW("backward ctx NULL", "nn_pool_backward", "ctx", E, b_null_ctx),
    ROW("backward pullback NULL", "nn_pool_backward", "pullback", E, b_null_pullback),
    ROW("backward *pullback NULL", "nn_pool_backward", "pullback", P, b_null_star),
    ROW("backward pullback used twice", "nn_pool_backward", "pullback", P, b_twice),
    ROW("backward pullback freed", "nn_pool_backward", "pullback", P, b_freed),
    ROW("backward pullback of another context", "nn_pool_backward", "pullback", P, b_other_ctx),
    ROW("backward conv pullback", "nn_pool_backward", "pullback", P, b_conv_pullback),
    ROW("backward dy NULL", "nn_pool_backward", "dy", E, b_null_dy),
    ROW("backward dx NULL", "nn_pool_backward", "dx", E, b_null_dx),
    ROW("backward dy dims", "nn_pool_backward", "dy", S, b_dy_dims),
    ROW("backward dx dims", "nn_pool_backward", "dx", S, b_dx_dims),
    ROW("backward dx dtype", "nn_pool_backward", "dx.dtype", D, b_dx_dtype),
    ROW("backward dy dtype", "nn_pool_backward", "dy.dtype", D, b_dy_dtype),
    ROW("backward dy space label", "nn_pool_backward", "dy", M, b_claim_dy),
    ROW("backward dx space label", "nn_pool_backward", "dx", M, b_claim_dx),
    ROW("backward dy wrong space", "nn_pool_backward", "dy", M, b_space_dy),
    ROW("backward dx wrong space", "nn_pool_backward", "dx", M, b_space_dx),
    ROW("backward dy inside dx", "nn_pool_backward", "dx", E, b_dy_in_dx),
    ROW("backward dx on the forward's x", "nn_pool_backward", "dx", E, b_dx_on_x),
    ROW("backward dx on the forward's y", "nn_pool_backward", "dx", E, b_dx_on_y),
    ROW("backward dx one zero stride", "nn_pool_backward", "dx", E, b_dx_self),
    ROW("backward dx zero strides", "nn_pool_backward", "dx", E, b_dx_zero),
    ROW("backward dx.data NULL", "nn_pool_backward", "dx.data", E, b_dx_data_null),
    ROW("backward strided dx and dy (edge)", "nn_pool_backward", NULL, NN_OK, b_strided_ok),
    ROW("pullback_free NULL (edge)", "nn_pool_pullback_free", NULL, NN_OK, pf_null),
    ROW("pullback_free *NULL (edge)", "nn_pool_pullback_free", NULL, NN_OK, pf_star_null),
    ROW("pullback_free twice", "nn_pool_pullback_free", "pullback", P, pf_twice),
    ROW("pullback_free consumed", "nn_pool_pullback_free", "pullback", P, pf_consumed),
    ROW("pullback_free conv pullback", "nn_pool_pullback_free", "pullback", P, pf_conv),

    ROW("workspace_size ctx NULL", "nn_pool_workspace_size", "ctx", E, ws_null_ctx),
    ROW("workspace_size bytes NULL", "nn_pool_workspace_size", "bytes", E, ws_null_bytes),
    ROW("workspace_size params NULL", "nn_pool_workspace_size", "params", E, ws_null_p),
    ROW("workspace_size x NULL", "nn_pool_workspace_size", "x", E, ws_null_x),
    ROW("workspace_size y NULL", "nn_pool_workspace_size", "y", E, ws_null_y),
    ROW("workspace_size backward dy NULL", "nn_pool_workspace_size", "dy", E, ws_null_dy),
    ROW("workspace_size backward dx NULL", "nn_pool_workspace_size", "dx", E, ws_null_dx),
    ROW("workspace_size pass 2", "nn_pool_workspace_size", "pass", E, ws_pass_2),
    ROW("workspace_size pass -1", "nn_pool_workspace_size", "pass", E, ws_pass_negative),
    ROW("workspace_size mode 3", "nn_pool_workspace_size", "params.mode", E, ws_mode),
    ROW("workspace_size reserved[2]", "nn_pool_workspace_size", "params.reserved[2]", E,
        ws_reserved),
    ROW("workspace_size y dims", "nn_pool_workspace_size", "y", S, ws_ydims),
    ROW("workspace_size dy dims", "nn_pool_workspace_size", "dy", S, ws_dy_dims),
    ROW("workspace_size dx dtype", "nn_pool_workspace_size", "dx.dtype", D, ws_dx_dtype),
    ROW("workspace_size dx wrong space", "nn_pool_workspace_size", "dx", M, ws_dx_space),
    ROW("workspace_size dx on x", "nn_pool_workspace_size", "dx", E, ws_dx_on_x),
    ROW("workspace_size x element count overflows", "nn_pool_workspace_size", "x", O,
        ws_x_count_overflow),
    ROW("workspace_size y byte extent overflows", "nn_pool_workspace_size", "y", O,
        ws_y_extent_overflow),
    ROW("workspace_size dy element count overflows", "nn_pool_workspace_size", "dy", O,
        ws_dy_count_overflow),
    ROW("workspace_size dx byte extent overflows", "nn_pool_workspace_size", "dx", O,
        ws_dx_extent_overflow),
    ROW("workspace_size f64", "nn_pool_workspace_size", "x.dtype", NN_OK, ws_f64),
    ROW2("workspace_size pad_lo != pad_hi", "nn_pool_workspace_size", "params.pad_lo[0]", NN_OK, U,
         ws_pad_asym),
    ROW("workspace_size forward (edge)", "nn_pool_workspace_size", NULL, NN_OK, ws_forward_ok),
    ROW("workspace_size packed backward (edge)", "nn_pool_workspace_size", NULL, NN_OK,
        ws_backward_ok),
};

CAT_SUBJECT(pool, rows)

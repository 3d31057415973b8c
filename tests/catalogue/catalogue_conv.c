/* Catalogue rows: convolution (include/nnprim/conv.h). */
#include <string.h>

#include "catalogue.h"
#include "catalogue_family.h"

#define CALL(fname) static nn_status fname(struct cat *c)

static nn_status fwd(struct cat *c, const nn_tensor *x, const nn_tensor *w, const nn_tensor *b,
                     nn_tensor *y)
{
    return nn_conv_forward(c->ctx, &c->cp, x, w, b, y, NULL);
}

static const int64_t Y[] = {1, 3, 3, 3}, X[] = {1, 2, 5, 5}, W[] = {3, 2, 3, 3};

/* ---- nn_conv_params_default, nn_conv_output_shape ---- */

CALL(pd_null)
{
    return nn_conv_params_default(NULL, 2);
}
CALL(pd_rank0)
{
    (void)c;
    nn_conv_params p;
    return nn_conv_params_default(&p, 0);
}
CALL(pd_rank4)
{
    (void)c;
    nn_conv_params p;
    return nn_conv_params_default(&p, 4);
}

static nn_status oshape(struct cat *c, int rank, const int64_t *xd, const int64_t *wd, int64_t *yd)
{
    return nn_conv_output_shape(&c->cp, rank, xd, wd, yd);
}
CALL(os_null_p)
{
    int64_t y[4];
    (void)c;
    return nn_conv_output_shape(NULL, 4, X, W, y);
}
CALL(os_null_x)
{
    int64_t y[4];
    return oshape(c, 4, NULL, W, y);
}
CALL(os_null_w)
{
    int64_t y[4];
    return oshape(c, 4, X, NULL, y);
}
CALL(os_null_y)
{
    return oshape(c, 4, X, W, NULL);
}
CALL(os_rank)
{
    int64_t y[4];
    return oshape(c, 3, X, W, y);
}
CALL(os_xdim0)
{
    int64_t y[4], x[] = {0, 2, 5, 5};
    return oshape(c, 4, x, W, y);
}
CALL(os_wdim_neg)
{
    int64_t y[4], w[] = {3, 2, -3, 3};
    return oshape(c, 4, X, w, y);
}
CALL(os_stride0)
{
    int64_t y[4];
    c->cp.stride[1] = 0;
    return oshape(c, 4, X, W, y);
}
/* w_dims[1] * groups is compared without overflowing int64 (UB). */
CALL(os_groups_overflow)
{
    int64_t g = INT64_C(1) << 62, y[4], x[] = {1, g, 5, 5}, w[] = {g, 4, 3, 3};
    c->cp.groups = g;
    return oshape(c, 4, x, w, y);
}
CALL(os_pad_overflow)
{
    int64_t y[4];
    c->cp.pad_lo[0] = INT64_MAX;
    return oshape(c, 4, X, W, y);
}
CALL(os_dilation_overflow)
{
    int64_t y[4];
    c->cp.dilation[1] = INT64_MAX / 2 + 1;
    return oshape(c, 4, X, W, y);
}
CALL(os_too_small)
{
    int64_t y[4], x[] = {1, 2, 2, 5};
    return oshape(c, 4, x, W, y);
}
CALL(os_reserved)
{
    int64_t y[4];
    c->cp.reserved[2] = 1;
    return oshape(c, 4, X, W, y);
}
/* Edge: the largest stride gives one output per dim, computed without overflow. */
CALL(os_stride_max)
{
    int64_t y[4];
    c->cp.stride[0] = c->cp.stride[1] = INT64_MAX;
    nn_status st = oshape(c, 4, X, W, y);
    if (st == NN_OK) cr_assert(y[0] == 1 && y[1] == 3 && y[2] == 1 && y[3] == 1, "y dims");
    return st;
}
/* Edge: sizes near the int64 limit that do not overflow. */
CALL(os_huge_ok)
{
    int64_t big = INT64_C(1) << 61, y[4], x[] = {1, 2, big, 5};
    c->cp.pad_hi[0] = big;
    nn_status st = oshape(c, 4, x, W, y);
    if (st == NN_OK) cr_assert_eq(y[2], 2 * big - 2, "y dims");
    return st;
}

/* ---- nn_conv_forward: NULLs and parameters ---- */

CALL(f_null_ctx)
{
    return nn_conv_forward(NULL, &c->cp, &c->x, &c->w, &c->b, &c->y, NULL);
}
CALL(f_null_p)
{
    return nn_conv_forward(c->ctx, NULL, &c->x, &c->w, &c->b, &c->y, NULL);
}
CALL(f_null_x)
{
    return fwd(c, NULL, &c->w, &c->b, &c->y);
}
CALL(f_null_w)
{
    return fwd(c, &c->x, NULL, &c->b, &c->y);
}
CALL(f_null_y)
{
    return fwd(c, &c->x, &c->w, &c->b, NULL);
}
CALL(f_null_xdata)
{
    nn_tensor x = c->x;
    x.data = NULL;
    return fwd(c, &x, &c->w, &c->b, &c->y);
}
CALL(f_null_ydata)
{
    nn_tensor y = c->y;
    y.data = NULL;
    return fwd(c, &c->x, &c->w, &c->b, &y);
}
/* The pullback out pointer is set to NULL on failure. */
CALL(f_null_w_pullback)
{
    nn_conv_pullback *pb = (nn_conv_pullback *)c;
    nn_status st = nn_conv_forward(c->ctx, &c->cp, &c->x, NULL, &c->b, &c->y, &pb);
    cr_assert_null(pb, "*pullback_out must be NULL after a failure");
    return st;
}
CALL(f_rank0)
{
    c->cp.spatial_rank = 0;
    return fwd(c, &c->x, &c->w, &c->b, &c->y);
}
CALL(f_rank4)
{
    c->cp.spatial_rank = 4;
    return fwd(c, &c->x, &c->w, &c->b, &c->y);
}
CALL(f_stride0)
{
    c->cp.stride[0] = 0;
    return fwd(c, &c->x, &c->w, &c->b, &c->y);
}
CALL(f_stride_neg)
{
    c->cp.stride[1] = -1;
    return fwd(c, &c->x, &c->w, &c->b, &c->y);
}
CALL(f_dil0)
{
    c->cp.dilation[0] = 0;
    return fwd(c, &c->x, &c->w, &c->b, &c->y);
}
CALL(f_dil_neg)
{
    c->cp.dilation[1] = INT64_MIN;
    return fwd(c, &c->x, &c->w, &c->b, &c->y);
}
CALL(f_padlo_neg)
{
    c->cp.pad_lo[1] = -1;
    return fwd(c, &c->x, &c->w, &c->b, &c->y);
}
CALL(f_padhi_neg)
{
    c->cp.pad_hi[0] = -2;
    return fwd(c, &c->x, &c->w, &c->b, &c->y);
}
CALL(f_groups0)
{
    c->cp.groups = 0;
    return fwd(c, &c->x, &c->w, &c->b, &c->y);
}
CALL(f_groups_neg)
{
    c->cp.groups = -4;
    return fwd(c, &c->x, &c->w, &c->b, &c->y);
}
CALL(f_mode)
{
    c->cp.mode = (nn_conv_mode)2;
    return fwd(c, &c->x, &c->w, &c->b, &c->y);
}
CALL(f_act)
{
    c->cp.activation = (nn_activation)5;
    return fwd(c, &c->x, &c->w, &c->b, &c->y);
}
CALL(f_res0)
{
    c->cp.reserved[0] = 1;
    return fwd(c, &c->x, &c->w, &c->b, &c->y);
}
CALL(f_res1)
{
    c->cp.reserved[1] = UINT64_MAX;
    return fwd(c, &c->x, &c->w, &c->b, &c->y);
}
CALL(f_res2)
{
    c->cp.reserved[2] = 0x80;
    return fwd(c, &c->x, &c->w, &c->b, &c->y);
}
CALL(f_res3)
{
    c->cp.reserved[3] = 2;
    return fwd(c, &c->x, &c->w, &c->b, &c->y);
}

/* ---- nn_conv_forward: shapes and dtypes ---- */

CALL(f_xrank)
{
    int64_t d[] = {2, 5, 5};
    nn_tensor x = cat_view_on(&c->x, 3, d, 0);
    return fwd(c, &x, &c->w, &c->b, &c->y);
}
CALL(f_wrank)
{
    int64_t d[] = {3, 2, 9};
    nn_tensor w = cat_view_on(&c->w, 3, d, 0);
    return fwd(c, &c->x, &w, &c->b, &c->y);
}
CALL(f_channels)
{
    int64_t d[] = {3, 1, 3, 3};
    nn_tensor w = cat_view_on(&c->w, 4, d, 0);
    return fwd(c, &c->x, &w, &c->b, &c->y);
}
CALL(f_k_groups)
{
    int64_t d[] = {3, 1, 3, 3};
    nn_tensor w = cat_view_on(&c->w, 4, d, 0);
    c->cp.groups = 2;
    return fwd(c, &c->x, &w, &c->b, &c->y);
}
CALL(f_c_groups)
{
    c->cp.groups = 3;
    return fwd(c, &c->x, &c->w, &c->b, &c->y);
}
CALL(f_too_small)
{
    int64_t d[] = {1, 2, 2, 5};
    nn_tensor x = cat_view_on(&c->x, 4, d, 0);
    return fwd(c, &x, &c->w, &c->b, &c->y);
}
CALL(f_ydims)
{
    int64_t d[] = {1, 3, 3, 2};
    nn_tensor y = cat_view_on(&c->y, 4, d, 0);
    return fwd(c, &c->x, &c->w, &c->b, &y);
}
CALL(f_yrank)
{
    int64_t d[] = {3, 3, 3};
    nn_tensor y = cat_view_on(&c->y, 3, d, 0);
    return fwd(c, &c->x, &c->w, &c->b, &y);
}
CALL(f_ydims_k)
{
    int64_t d[] = {1, 2, 3, 3};
    nn_tensor y = cat_view_on(&c->y, 4, d, 0);
    return fwd(c, &c->x, &c->w, &c->b, &y);
}
CALL(f_bdims)
{
    int64_t d[] = {2};
    nn_tensor b = cat_view_on(&c->b, 1, d, 0);
    return fwd(c, &c->x, &c->w, &b, &c->y);
}
CALL(f_brank)
{
    int64_t d[] = {1, 3};
    nn_tensor b = cat_view_on(&c->b, 2, d, 0);
    return fwd(c, &c->x, &c->w, &b, &c->y);
}
CALL(f_bdims4)
{
    int64_t d[] = {1, 3, 1, 2};
    nn_tensor b = cat_tensor(c, NN_DTYPE_F32, 4, d, 40);
    nn_status st = fwd(c, &c->x, &c->w, &b, &c->y);
    nn_tensor_free(c->ctx, &b);
    return st;
}
/* Edge: the bias as 1 x K x 1 x 1 is accepted. */
CALL(f_b4_ok)
{
    int64_t d[] = {1, 3, 1, 1};
    nn_tensor b = cat_view_on(&c->b, 4, d, 0);
    return fwd(c, &c->x, &c->w, &b, &c->y);
}
static nn_status with_dtype(struct cat *c, nn_tensor *t, nn_dtype dt)
{
    nn_tensor v = *t, *args[4] = {&c->x, &c->w, &c->b, &c->y};
    v.dtype = dt;
    cat_packed(&v);
    for (int i = 0; i < 4; i++)
        if (args[i] == t) args[i] = &v;
    return fwd(c, args[0], args[1], args[2], args[3]);
}
CALL(f_wdtype)
{
    return with_dtype(c, &c->w, NN_DTYPE_F64);
}
CALL(f_ydtype)
{
    return with_dtype(c, &c->y, NN_DTYPE_F16);
}
CALL(f_bdtype)
{
    return with_dtype(c, &c->b, NN_DTYPE_BF16);
}
CALL(f_xdtype_bad)
{
    return with_dtype(c, &c->x, (nn_dtype)0);
}
CALL(f_xdtype_bad2)
{
    return with_dtype(c, &c->x, (nn_dtype)99);
}
CALL(f_xspace_bad)
{
    nn_tensor x = c->x;
    x.space = (nn_space)7;
    return fwd(c, &x, &c->w, &c->b, &c->y);
}
CALL(f_xrank9)
{
    nn_tensor x = c->x;
    x.rank = 9;
    return fwd(c, &x, &c->w, &c->b, &c->y);
}
CALL(f_xstride_neg)
{
    nn_tensor x = c->x;
    x.strides[3] = -1;
    return fwd(c, &x, &c->w, &c->b, &c->y);
}
CALL(f_xstrided)
{
    nn_tensor x = c->x; /* W and H swapped in memory: distinct elements, not packed */
    x.strides[2] = 1;
    x.strides[3] = 5;
    return fwd(c, &x, &c->w, &c->b, &c->y);
}
CALL(f_ystrided)
{
    nn_tensor y = c->y;
    y.strides[2] = 1;
    y.strides[3] = 3;
    return fwd(c, &c->x, &c->w, &c->b, &y);
}
/* Channels-last (NHWC) views are accepted, other orders refused. */
static nn_tensor strided(const nn_tensor *t, int64_t sn, int64_t sc, int64_t sh, int64_t sw)
{
    nn_tensor v = *t;
    v.strides[0] = sn;
    v.strides[1] = sc;
    v.strides[2] = sh;
    v.strides[3] = sw;
    return v;
}
CALL(f_nhwc_ok)
{
    nn_tensor x = strided(&c->x, 50, 1, 10, 2), w = strided(&c->w, 18, 1, 6, 2),
              y = strided(&c->y, 27, 1, 9, 3);
    return fwd(c, &x, &w, &c->b, &y);
}
CALL(f_x_nwhc)
{
    nn_tensor x = strided(&c->x, 50, 1, 2, 10); /* channels fastest, then H, then W */
    return fwd(c, &x, &c->w, &c->b, &c->y);
}
CALL(f_w_cl_gap)
{
    nn_tensor w = strided(&c->w, 18, 1, 6, 2);
    w.strides[0] = 19; /* a gap between filters: not packed */
    return fwd(c, &c->x, &w, &c->b, &c->y);
}
CALL(bd_dx_nwhc)
{
    nn_tensor dx = strided(&c->dx, 50, 1, 2, 10);
    return nn_conv_backward_data(c->ctx, &c->cp, &c->dy, &c->w, &dx, 0);
}
CALL(bf_dw_cknhw)
{
    nn_tensor dw = strided(&c->dw, 9, 27, 3, 1); /* C outermost */
    return nn_conv_backward_filter(c->ctx, &c->cp, &c->x, &c->dy, &dw, 0);
}
CALL(bb_dy_nwhc)
{
    nn_tensor dy = strided(&c->dy, 27, 1, 3, 9);
    return nn_conv_backward_bias(c->ctx, &c->cp, &dy, &c->db, 0);
}
CALL(f_wextent_overflow)
{
    nn_tensor w = c->w;
    w.strides[0] = INT64_MAX / 2;
    return fwd(c, &c->x, &w, &c->b, &c->y);
}
/* An output with zero strides is self-overlapping. */
CALL(f_y_zero_strides)
{
    nn_tensor y = c->y;
    memset(y.strides, 0, sizeof y.strides);
    return fwd(c, &c->x, &c->w, &c->b, &y);
}
CALL(f_y_stride0_dim)
{
    nn_tensor y = c->y;
    y.strides[3] = 0;
    return fwd(c, &c->x, &c->w, &c->b, &y);
}
CALL(f_x_misaligned)
{
    nn_tensor x = c->x;
    x.data = (char *)x.data + 2;
    return fwd(c, &x, &c->w, &c->b, &c->y);
}
CALL(f_y_misaligned)
{
    nn_tensor y = c->y;
    y.data = (char *)y.data + 1;
    return fwd(c, &c->x, &c->w, &c->b, &y);
}

/* ---- nn_conv_forward: memory spaces and overlaps ---- */

CALL(f_claim_x)
{
    nn_tensor t = cat_claim_other_space(c, &c->x);
    return fwd(c, &t, &c->w, &c->b, &c->y);
}
CALL(f_claim_w)
{
    nn_tensor t = cat_claim_other_space(c, &c->w);
    return fwd(c, &c->x, &t, &c->b, &c->y);
}
CALL(f_claim_b)
{
    nn_tensor t = cat_claim_other_space(c, &c->b);
    return fwd(c, &c->x, &c->w, &t, &c->y);
}
CALL(f_claim_y)
{
    nn_tensor t = cat_claim_other_space(c, &c->y);
    return fwd(c, &c->x, &c->w, &c->b, &t);
}
CALL(f_space_x)
{
    nn_tensor t = cat_wrong_space(c, &c->x);
    return fwd(c, &t, &c->w, &c->b, &c->y);
}
CALL(f_space_w)
{
    nn_tensor t = cat_wrong_space(c, &c->w);
    return fwd(c, &c->x, &t, &c->b, &c->y);
}
CALL(f_space_b)
{
    nn_tensor t = cat_wrong_space(c, &c->b);
    return fwd(c, &c->x, &c->w, &t, &c->y);
}
CALL(f_space_y)
{
    nn_tensor t = cat_wrong_space(c, &c->y);
    return fwd(c, &c->x, &c->w, &c->b, &t);
}
CALL(f_device_other)
{
    nn_tensor t = c->y;
    t.device = c->gpu ? 7 : 0;
    t.space = NN_SPACE_DEVICE;
    return fwd(c, &c->x, &c->w, &c->b, &t);
}
CALL(f_y_on_x)
{
    nn_tensor y = cat_view_on(&c->x, 4, Y, 0);
    return fwd(c, &c->x, &c->w, &c->b, &y);
}
CALL(f_y_in_x)
{
    nn_tensor y = cat_view_on(&c->x, 4, Y, 20);
    return fwd(c, &c->x, &c->w, &c->b, &y);
}
CALL(f_y_on_w)
{
    nn_tensor y = cat_view_on(&c->w, 4, Y, 27);
    return fwd(c, &c->x, &c->w, &c->b, &y);
}
CALL(f_b_in_y)
{
    int64_t d[] = {3};
    nn_tensor b = cat_view_on(&c->y, 1, d, 24);
    return fwd(c, &c->x, &c->w, &b, &c->y);
}
/* Edge: inputs may overlap each other (only the output must be distinct). */
CALL(f_inputs_share)
{
    int64_t d[] = {3};
    nn_tensor b = cat_view_on(&c->w, 1, d, 0);
    return fwd(c, &c->x, &c->w, &b, &c->y);
}

/* ---- cuDNN limits: refused before cuDNN sees them ---- */

/* A valid convolution with one output per dim; the reference computes it. */
static nn_status one_output(struct cat *c)
{
    int64_t d[] = {1, 3, 1, 1};
    nn_tensor y = cat_view_on(&c->y, 4, d, 0);
    nn_status st = fwd(c, &c->x, &c->w, &c->b, &y);
    if (st != NN_OK) return st;
    double hx[50], hw[54], hb[3], hy[3];
    cat_read(c, &c->x, hx);
    cat_read(c, &c->w, hw);
    cat_read(c, &c->b, hb);
    cat_read(c, &y, hy);
    for (int k = 0; k < 3; k++) {
        double s = hb[k];
        for (int ch = 0; ch < 2; ch++)
            for (int r = 0; r < 3; r++)
                for (int q = 0; q < 3; q++)
                    s += hx[(ch * 5 + r) * 5 + q] * hw[((k * 2 + ch) * 3 + r) * 3 + q];
        cr_assert_eq(hy[k], s, "y[%d] = %g, expected %g", k, hy[k], s);
    }
    return NN_OK;
}
CALL(f_stride_max)
{
    c->cp.stride[0] = c->cp.stride[1] = INT64_MAX;
    return one_output(c);
}
CALL(f_stride_2p31)
{
    c->cp.stride[0] = c->cp.stride[1] = INT64_C(1) << 31;
    return one_output(c);
}
CALL(f_stride_i32max_ok)
{
    c->cp.stride[0] = c->cp.stride[1] = INT32_MAX;
    return one_output(c);
}
CALL(f_dil_2p31)
{
    int64_t d[] = {3, 2, 1, 1};
    nn_tensor w = cat_view_on(&c->w, 4, d, 0);
    int64_t yd[] = {1, 3, 5, 5};
    nn_tensor y = cat_tensor(c, NN_DTYPE_F32, 4, yd, 42);
    c->cp.dilation[1] = INT64_C(1) << 31;
    nn_status st = fwd(c, &c->x, &w, &c->b, &y);
    nn_tensor_free(c->ctx, &y);
    return st;
}
CALL(f_pad_2p31)
{
    /* x 1x2x5x5 padded by 2^31 + 2^31: the output would be huge, so y's dims cannot match; the
     * shape check comes first on both backends. */
    c->cp.pad_lo[0] = c->cp.pad_hi[0] = INT64_C(1) << 31;
    return fwd(c, &c->x, &c->w, &c->b, &c->y);
}

/* ---- nn_conv_backward ---- */

static nn_conv_pullback *pullback(struct cat *c)
{
    nn_conv_pullback *pb = NULL;
    cr_assert_eq(nn_conv_forward(c->ctx, &c->cp, &c->x, &c->w, &c->b, &c->y, &pb), NN_OK,
                 "fixture: %s", nn_last_error()->message);
    return pb;
}
/* After a refused backward call the pullback is still the caller's: a valid retry works, and
 * leaves the thread's record (the refused call's) alone. */
static nn_status then_retry(struct cat *c, nn_status st, nn_conv_pullback **pb)
{
    if (st == NN_OK) return st;
    nn_error_info e = *nn_last_error();
    cr_assert_not_null(*pb, "a refused call leaves the pullback with the caller");
    cr_assert_eq(nn_conv_backward(c->ctx, pb, &c->dy, &c->dx, &c->dw, &c->db), NN_OK,
                 "a valid retry with the same pullback: %s", nn_last_error()->message);
    cr_assert_null(*pb);
    cr_assert_str_eq(nn_last_error()->message, e.message, "the record changed");
    return st;
}
static nn_status bwd(struct cat *c, const nn_tensor *dy, nn_tensor *dx, nn_tensor *dw,
                     nn_tensor *db)
{
    nn_conv_pullback *pb = pullback(c);
    return then_retry(c, nn_conv_backward(c->ctx, &pb, dy, dx, dw, db), &pb);
}
CALL(b_null_ctx)
{
    nn_conv_pullback *pb = pullback(c);
    nn_status st = nn_conv_backward(NULL, &pb, &c->dy, &c->dx, &c->dw, &c->db);
    return then_retry(c, st, &pb);
}
CALL(b_null_pullback)
{
    return nn_conv_backward(c->ctx, NULL, &c->dy, &c->dx, &c->dw, &c->db);
}
CALL(b_null_star)
{
    nn_conv_pullback *pb = NULL;
    return nn_conv_backward(c->ctx, &pb, &c->dy, &c->dx, &c->dw, &c->db);
}
CALL(b_twice)
{
    nn_conv_pullback *pb = pullback(c), *copy = pb;
    cr_assert_eq(nn_conv_backward(c->ctx, &pb, &c->dy, &c->dx, &c->dw, &c->db), NN_OK, "first");
    return nn_conv_backward(c->ctx, &copy, &c->dy, &c->dx, &c->dw, &c->db);
}
CALL(b_freed)
{
    nn_conv_pullback *pb = pullback(c), *copy = pb;
    cr_assert_eq(nn_conv_pullback_free(&pb), NN_OK, "free");
    return nn_conv_backward(c->ctx, &copy, &c->dy, &c->dx, &c->dw, &c->db);
}
CALL(b_other_ctx)
{
    nn_conv_pullback *pb = pullback(c);
    nn_status st = nn_conv_backward(cat_other_ctx(c), &pb, &c->dy, &c->dx, &c->dw, &c->db);
    return then_retry(c, st, &pb);
}
CALL(b_pool_pullback)
{
    nn_pool_pullback *pp = NULL;
    cr_assert_eq(nn_pool_forward(c->ctx, &c->pp, &c->px, &c->py, &pp), NN_OK, "fixture");
    nn_conv_pullback *pb = (nn_conv_pullback *)pp;
    nn_status st = nn_conv_backward(c->ctx, &pb, &c->dy, &c->dx, &c->dw, &c->db);
    cr_assert_eq(nn_pool_pullback_free(&pp), NN_OK, "the pooling pullback is intact");
    return st;
}
CALL(b_not_pullback)
{
    nn_conv_pullback *pb = (nn_conv_pullback *)c;
    return nn_conv_backward(c->ctx, &pb, &c->dy, &c->dx, &c->dw, &c->db);
}
CALL(b_null_dy)
{
    return bwd(c, NULL, &c->dx, &c->dw, &c->db);
}
CALL(b_dy_dims)
{
    int64_t d[] = {1, 3, 3, 2};
    nn_tensor dy = cat_view_on(&c->dy, 4, d, 0);
    return bwd(c, &dy, &c->dx, &c->dw, &c->db);
}
CALL(b_dx_dims)
{
    int64_t d[] = {1, 1, 5, 5};
    nn_tensor dx = cat_view_on(&c->dx, 4, d, 0);
    return bwd(c, &c->dy, &dx, &c->dw, &c->db);
}
CALL(b_dw_dims)
{
    int64_t d[] = {2, 2, 3, 3};
    nn_tensor dw = cat_view_on(&c->dw, 4, d, 0);
    return bwd(c, &c->dy, &c->dx, &dw, &c->db);
}
CALL(b_db_dims)
{
    int64_t d[] = {4};
    nn_tensor db = cat_tensor(c, NN_DTYPE_F32, 1, d, 41);
    nn_status st = bwd(c, &c->dy, &c->dx, &c->dw, &db);
    nn_tensor_free(c->ctx, &db);
    return st;
}
CALL(b_dx_dtype)
{
    nn_tensor dx = c->dx;
    dx.dtype = NN_DTYPE_F16;
    cat_packed(&dx);
    return bwd(c, &c->dy, &dx, &c->dw, &c->db);
}
CALL(b_dy_dtype)
{
    nn_tensor dy = c->dy;
    dy.dtype = NN_DTYPE_F64;
    return bwd(c, &dy, &c->dx, &c->dw, &c->db);
}
CALL(b_claim_dy)
{
    nn_tensor t = cat_claim_other_space(c, &c->dy);
    return bwd(c, &t, &c->dx, &c->dw, &c->db);
}
CALL(b_claim_dx)
{
    nn_tensor t = cat_claim_other_space(c, &c->dx);
    return bwd(c, &c->dy, &t, &c->dw, &c->db);
}
CALL(b_claim_dw)
{
    nn_tensor t = cat_claim_other_space(c, &c->dw);
    return bwd(c, &c->dy, &c->dx, &t, &c->db);
}
CALL(b_claim_db)
{
    nn_tensor t = cat_claim_other_space(c, &c->db);
    return bwd(c, &c->dy, &c->dx, &c->dw, &t);
}
/* dx in host memory on the cuDNN backend is refused before cuDNN can touch it. */
CALL(b_space_dx)
{
    nn_tensor t = cat_wrong_space(c, &c->dx);
    return bwd(c, &c->dy, &t, &c->dw, &c->db);
}
CALL(b_space_dx_only)
{
    nn_tensor t = cat_wrong_space(c, &c->dx);
    return bwd(c, &c->dy, &t, NULL, NULL);
}
CALL(b_space_dy)
{
    nn_tensor t = cat_wrong_space(c, &c->dy);
    return bwd(c, &t, &c->dx, &c->dw, &c->db);
}
CALL(b_space_dw)
{
    nn_tensor t = cat_wrong_space(c, &c->dw);
    return bwd(c, &c->dy, &c->dx, &t, &c->db);
}
CALL(b_space_db)
{
    nn_tensor t = cat_wrong_space(c, &c->db);
    return bwd(c, &c->dy, &c->dx, &c->dw, &t);
}
/* dx on x's storage is refused: it would be written before dw reads x. */
CALL(b_dx_on_x)
{
    nn_tensor dx = c->x;
    return bwd(c, &c->dy, &dx, &c->dw, &c->db);
}
/* The forward's x lies inside dw's storage: dw must not overwrite what it reads. */
CALL(b_dw_on_x)
{
    nn_tensor x = cat_view_on(&c->dw, 4, X, 0);
    nn_conv_pullback *pb = NULL;
    cr_assert_eq(nn_conv_forward(c->ctx, &c->cp, &x, &c->w, &c->b, &c->y, &pb), NN_OK, "fixture");
    nn_status st = nn_conv_backward(c->ctx, &pb, &c->dy, NULL, &c->dw, NULL);
    cr_assert_eq(nn_conv_pullback_free(&pb), NN_OK, "the pullback stays the caller's");
    return st;
}
CALL(b_dw_on_w)
{
    nn_tensor dw = c->w;
    return bwd(c, &c->dy, &c->dx, &dw, &c->db);
}
CALL(b_dx_on_dy)
{
    nn_tensor dx = cat_view_on(&c->dx, 4, X, 0);
    nn_tensor dy = cat_view_on(&c->dx, 4, Y, 10);
    return bwd(c, &dy, &dx, NULL, NULL);
}
CALL(b_dx_on_w)
{
    nn_tensor dx = cat_view_on(&c->w, 4, X, 0);
    return bwd(c, &c->dy, &dx, NULL, NULL);
}
CALL(b_dw_on_dx)
{
    int64_t d[] = {1, 2, 5, 5};
    nn_tensor dx = cat_view_on(&c->dw, 4, d, 2);
    return bwd(c, &c->dy, &dx, &c->dw, NULL);
}
CALL(b_db_on_dy)
{
    int64_t d[] = {3};
    nn_tensor db = cat_view_on(&c->dy, 1, d, 5);
    return bwd(c, &c->dy, &c->dx, &c->dw, &db);
}
CALL(b_db_on_dw)
{
    int64_t d[] = {3};
    nn_tensor db = cat_view_on(&c->dw, 1, d, 5);
    return bwd(c, &c->dy, &c->dx, &c->dw, &db);
}
CALL(b_dx_self)
{
    nn_tensor dx = c->dx;
    dx.strides[2] = 0;
    return bwd(c, &c->dy, &dx, &c->dw, &c->db);
}
CALL(b_dw_strided)
{
    nn_tensor dw = c->dw;
    dw.strides[2] = 1;
    dw.strides[3] = 3;
    return bwd(c, &c->dy, &c->dx, &dw, &c->db);
}
/* Edge: nothing asked for; the pullback is consumed. */
CALL(b_nothing)
{
    nn_conv_pullback *pb = pullback(c);
    nn_status st = nn_conv_backward(c->ctx, &pb, &c->dy, NULL, NULL, NULL);
    if (st == NN_OK) cr_assert_null(pb);
    return st;
}

/* ---- stand-alone gradients ---- */

CALL(bd_null_ctx)
{
    return nn_conv_backward_data(NULL, &c->cp, &c->dy, &c->w, &c->dx, 0);
}
CALL(bd_null_p)
{
    return nn_conv_backward_data(c->ctx, NULL, &c->dy, &c->w, &c->dx, 0);
}
CALL(bd_null_dy)
{
    return nn_conv_backward_data(c->ctx, &c->cp, NULL, &c->w, &c->dx, 0);
}
CALL(bd_null_w)
{
    return nn_conv_backward_data(c->ctx, &c->cp, &c->dy, NULL, &c->dx, 0);
}
CALL(bd_null_dx)
{
    return nn_conv_backward_data(c->ctx, &c->cp, &c->dy, &c->w, NULL, 0);
}
CALL(bd_relu)
{
    c->cp.activation = NN_ACTIVATION_RELU;
    return nn_conv_backward_data(c->ctx, &c->cp, &c->dy, &c->w, &c->dx, 0);
}
CALL(bd_acc)
{
    return nn_conv_backward_data(c->ctx, &c->cp, &c->dy, &c->w, &c->dx, 0x8);
}
CALL(bd_res)
{
    c->cp.reserved[1] = 1;
    return nn_conv_backward_data(c->ctx, &c->cp, &c->dy, &c->w, &c->dx, 0);
}
CALL(bd_dx_on_dy)
{
    nn_tensor dy = cat_view_on(&c->dx, 4, Y, 0);
    return nn_conv_backward_data(c->ctx, &c->cp, &dy, &c->w, &c->dx, 0);
}
CALL(bd_dx_on_w)
{
    nn_tensor dx = cat_view_on(&c->w, 4, X, 0);
    return nn_conv_backward_data(c->ctx, &c->cp, &c->dy, &c->w, &dx, 0);
}
CALL(bd_space_dx)
{
    nn_tensor t = cat_wrong_space(c, &c->dx);
    return nn_conv_backward_data(c->ctx, &c->cp, &c->dy, &c->w, &t, 0);
}
CALL(bd_space_w)
{
    nn_tensor t = cat_wrong_space(c, &c->w);
    return nn_conv_backward_data(c->ctx, &c->cp, &c->dy, &t, &c->dx, 0);
}
CALL(bd_claim_dy)
{
    nn_tensor t = cat_claim_other_space(c, &c->dy);
    return nn_conv_backward_data(c->ctx, &c->cp, &t, &c->w, &c->dx, 0);
}
CALL(bd_dx_self)
{
    nn_tensor dx = c->dx;
    memset(dx.strides, 0, sizeof dx.strides);
    return nn_conv_backward_data(c->ctx, &c->cp, &c->dy, &c->w, &dx, 0);
}
CALL(bd_dy_dims)
{
    int64_t d[] = {1, 3, 2, 3};
    nn_tensor dy = cat_view_on(&c->dy, 4, d, 0);
    return nn_conv_backward_data(c->ctx, &c->cp, &dy, &c->w, &c->dx, 0);
}
CALL(bd_stride_max)
{
    c->cp.stride[0] = INT64_MAX;
    int64_t d[] = {1, 3, 1, 3};
    nn_tensor dy = cat_view_on(&c->dy, 4, d, 0);
    return nn_conv_backward_data(c->ctx, &c->cp, &dy, &c->w, &c->dx, 0);
}

CALL(bf_null_ctx)
{
    return nn_conv_backward_filter(NULL, &c->cp, &c->x, &c->dy, &c->dw, 0);
}
CALL(bf_null_x)
{
    return nn_conv_backward_filter(c->ctx, &c->cp, NULL, &c->dy, &c->dw, 0);
}
CALL(bf_null_dy)
{
    return nn_conv_backward_filter(c->ctx, &c->cp, &c->x, NULL, &c->dw, 0);
}
CALL(bf_null_dw)
{
    return nn_conv_backward_filter(c->ctx, &c->cp, &c->x, &c->dy, NULL, 0);
}
CALL(bf_stride0)
{
    c->cp.stride[0] = 0;
    return nn_conv_backward_filter(c->ctx, &c->cp, &c->x, &c->dy, &c->dw, 0);
}
CALL(bf_acc)
{
    return nn_conv_backward_filter(c->ctx, &c->cp, &c->x, &c->dy, &c->dw, 0x10);
}
CALL(bf_res)
{
    c->cp.reserved[3] = 9;
    return nn_conv_backward_filter(c->ctx, &c->cp, &c->x, &c->dy, &c->dw, 0);
}
CALL(bf_dw_on_x)
{
    nn_tensor x = cat_view_on(&c->dw, 4, X, 0);
    return nn_conv_backward_filter(c->ctx, &c->cp, &x, &c->dy, &c->dw, 0);
}
CALL(bf_dw_on_dy)
{
    nn_tensor dy = cat_view_on(&c->dw, 4, Y, 1);
    return nn_conv_backward_filter(c->ctx, &c->cp, &c->x, &dy, &c->dw, 0);
}
CALL(bf_dw_dims)
{
    int64_t d[] = {3, 1, 3, 3};
    nn_tensor dw = cat_view_on(&c->dw, 4, d, 0);
    return nn_conv_backward_filter(c->ctx, &c->cp, &c->x, &c->dy, &dw, 0);
}
CALL(bf_space_x)
{
    nn_tensor t = cat_wrong_space(c, &c->x);
    return nn_conv_backward_filter(c->ctx, &c->cp, &t, &c->dy, &c->dw, 0);
}
CALL(bf_space_dw)
{
    nn_tensor t = cat_wrong_space(c, &c->dw);
    return nn_conv_backward_filter(c->ctx, &c->cp, &c->x, &c->dy, &t, 0);
}
CALL(bf_dtype)
{
    nn_tensor dw = c->dw;
    dw.dtype = NN_DTYPE_BF16;
    cat_packed(&dw);
    return nn_conv_backward_filter(c->ctx, &c->cp, &c->x, &c->dy, &dw, 0);
}

CALL(bb_null_ctx)
{
    return nn_conv_backward_bias(NULL, &c->cp, &c->dy, &c->db, 0);
}
CALL(bb_null_p)
{
    return nn_conv_backward_bias(c->ctx, NULL, &c->dy, &c->db, 0);
}
CALL(bb_null_dy)
{
    return nn_conv_backward_bias(c->ctx, &c->cp, NULL, &c->db, 0);
}
CALL(bb_null_db)
{
    return nn_conv_backward_bias(c->ctx, &c->cp, &c->dy, NULL, 0);
}
CALL(bb_relu)
{
    c->cp.activation = NN_ACTIVATION_RELU;
    return nn_conv_backward_bias(c->ctx, &c->cp, &c->dy, &c->db, 0);
}
CALL(bb_res)
{
    c->cp.reserved[0] = 3;
    return nn_conv_backward_bias(c->ctx, &c->cp, &c->dy, &c->db, 0);
}
CALL(bb_dy_rank)
{
    int64_t d[] = {3, 3, 3};
    nn_tensor dy = cat_view_on(&c->dy, 3, d, 0);
    return nn_conv_backward_bias(c->ctx, &c->cp, &dy, &c->db, 0);
}
CALL(bb_db_dims)
{
    int64_t d[] = {2};
    nn_tensor db = cat_view_on(&c->db, 1, d, 0);
    return nn_conv_backward_bias(c->ctx, &c->cp, &c->dy, &db, 0);
}
CALL(bb_db_on_dy)
{
    int64_t d[] = {3};
    nn_tensor db = cat_view_on(&c->dy, 1, d, 24);
    return nn_conv_backward_bias(c->ctx, &c->cp, &c->dy, &db, 0);
}
CALL(bb_claim_db)
{
    nn_tensor t = cat_claim_other_space(c, &c->db);
    return nn_conv_backward_bias(c->ctx, &c->cp, &c->dy, &t, 0);
}
CALL(bb_space_dy)
{
    nn_tensor t = cat_wrong_space(c, &c->dy);
    return nn_conv_backward_bias(c->ctx, &c->cp, &t, &c->db, 0);
}
CALL(bb_db_self)
{
    nn_tensor db = c->db;
    db.strides[0] = 0;
    return nn_conv_backward_bias(c->ctx, &c->cp, &c->dy, &db, 0);
}
CALL(bb_acc)
{
    return nn_conv_backward_bias(c->ctx, &c->cp, &c->dy, &c->db, 1u << 31);
}

CALL(pf_null)
{
    (void)c;
    return nn_conv_pullback_free(NULL);
}
CALL(pf_star_null)
{
    (void)c;
    nn_conv_pullback *pb = NULL;
    return nn_conv_pullback_free(&pb);
}
CALL(pf_twice)
{
    nn_conv_pullback *pb = pullback(c), *copy = pb;
    cr_assert_eq(nn_conv_pullback_free(&pb), NN_OK, "first free");
    cr_assert_null(pb);
    return nn_conv_pullback_free(&copy);
}
CALL(pf_consumed)
{
    nn_conv_pullback *pb = pullback(c), *copy = pb;
    cr_assert_eq(nn_conv_backward(c->ctx, &pb, &c->dy, &c->dx, NULL, NULL), NN_OK, "backward");
    return nn_conv_pullback_free(&copy);
}
CALL(pf_pool)
{
    nn_pool_pullback *pp = NULL;
    cr_assert_eq(nn_pool_forward(c->ctx, &c->pp, &c->px, &c->py, &pp), NN_OK, "fixture");
    nn_conv_pullback *pb = (nn_conv_pullback *)pp;
    nn_status st = nn_conv_pullback_free(&pb);
    cr_assert_eq(nn_pool_pullback_free(&pp), NN_OK, "the pooling pullback is intact");
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
    ROW("params_default NULL", "nn_conv_params_default", "p", E, pd_null),
    ROW("params_default rank 0", "nn_conv_params_default", "spatial_rank", E, pd_rank0),
    ROW("params_default rank 4", "nn_conv_params_default", "spatial_rank", E, pd_rank4),
    ROW("output_shape p NULL", "nn_conv_output_shape", "p", E, os_null_p),
    ROW("output_shape x_dims NULL", "nn_conv_output_shape", "x_dims", E, os_null_x),
    ROW("output_shape w_dims NULL", "nn_conv_output_shape", "w_dims", E, os_null_w),
    ROW("output_shape y_dims NULL", "nn_conv_output_shape", "y_dims", E, os_null_y),
    ROW("output_shape rank", "nn_conv_output_shape", "x.rank", S, os_rank),
    ROW("output_shape x dim 0", "nn_conv_output_shape", "x.dims[0]", S, os_xdim0),
    ROW("output_shape w dim < 0", "nn_conv_output_shape", "w.dims[2]", S, os_wdim_neg),
    ROW("output_shape stride 0", "nn_conv_output_shape", "p.stride[1]", E, os_stride0),
    ROW("output_shape w_dims[1] * groups overflows", "nn_conv_output_shape", "w.dims[1]", S,
        os_groups_overflow),
    ROW("output_shape pad overflows", "nn_conv_output_shape", "p.pad_lo[0]", O, os_pad_overflow),
    ROW("output_shape dilation overflows", "nn_conv_output_shape", "p.dilation[1]", O,
        os_dilation_overflow),
    ROW("output_shape output < 1", "nn_conv_output_shape", "x.dims[2]", S, os_too_small),
    ROW("output_shape reserved", "nn_conv_output_shape", "p.reserved[2]", E, os_reserved),
    ROW("output_shape stride INT64_MAX (edge)", "nn_conv_output_shape", NULL, NN_OK, os_stride_max),
    ROW("output_shape near int64 (edge)", "nn_conv_output_shape", NULL, NN_OK, os_huge_ok),

    ROW("forward ctx NULL", "nn_conv_forward", "ctx", E, f_null_ctx),
    ROW("forward p NULL", "nn_conv_forward", "p", E, f_null_p),
    ROW("forward x NULL", "nn_conv_forward", "x", E, f_null_x),
    ROW("forward w NULL", "nn_conv_forward", "w", E, f_null_w),
    ROW("forward y NULL", "nn_conv_forward", "y", E, f_null_y),
    ROW("forward x.data NULL", "nn_conv_forward", "x.data", E, f_null_xdata),
    ROW("forward y.data NULL", "nn_conv_forward", "y.data", E, f_null_ydata),
    ROW("forward failure sets *pullback_out NULL", "nn_conv_forward", "w", E, f_null_w_pullback),
    ROW("forward spatial_rank 0", "nn_conv_forward", "p.spatial_rank", E, f_rank0),
    ROW("forward spatial_rank 4", "nn_conv_forward", "p.spatial_rank", E, f_rank4),
    ROW("forward stride 0", "nn_conv_forward", "p.stride[0]", E, f_stride0),
    ROW("forward stride < 0", "nn_conv_forward", "p.stride[1]", E, f_stride_neg),
    ROW("forward dilation 0", "nn_conv_forward", "p.dilation[0]", E, f_dil0),
    ROW("forward dilation INT64_MIN", "nn_conv_forward", "p.dilation[1]", E, f_dil_neg),
    ROW("forward pad_lo < 0", "nn_conv_forward", "p.pad_lo[1]", E, f_padlo_neg),
    ROW("forward pad_hi < 0", "nn_conv_forward", "p.pad_hi[0]", E, f_padhi_neg),
    ROW("forward groups 0", "nn_conv_forward", "p.groups", E, f_groups0),
    ROW("forward groups < 0", "nn_conv_forward", "p.groups", E, f_groups_neg),
    ROW("forward mode", "nn_conv_forward", "p.mode", E, f_mode),
    ROW("forward activation", "nn_conv_forward", "p.activation", E, f_act),
    ROW("forward reserved[0]", "nn_conv_forward", "p.reserved[0]", E, f_res0),
    ROW("forward reserved[1]", "nn_conv_forward", "p.reserved[1]", E, f_res1),
    ROW("forward reserved[2]", "nn_conv_forward", "p.reserved[2]", E, f_res2),
    ROW("forward reserved[3]", "nn_conv_forward", "p.reserved[3]", E, f_res3),
    ROW("forward x rank", "nn_conv_forward", "x.rank", S, f_xrank),
    ROW("forward w rank", "nn_conv_forward", "w.rank", S, f_wrank),
    ROW("forward channels", "nn_conv_forward", "w.dims[1]", S, f_channels),
    ROW("forward K not divisible by groups", "nn_conv_forward", "w.dims[0]", S, f_k_groups),
    ROW("forward C not divisible by groups", "nn_conv_forward", "x.dims[1]", S, f_c_groups),
    ROW("forward output < 1", "nn_conv_forward", "x.dims[2]", S, f_too_small),
    ROW("forward y dims", "nn_conv_forward", "y.dims[3]", S, f_ydims),
    ROW("forward y rank", "nn_conv_forward", "y.rank", S, f_yrank),
    ROW("forward y channels", "nn_conv_forward", "y.dims[1]", S, f_ydims_k),
    ROW("forward b dims", "nn_conv_forward", "b.dims[0]", S, f_bdims),
    ROW("forward b rank", "nn_conv_forward", "b.rank", S, f_brank),
    ROW("forward b 1xKx1x2", "nn_conv_forward", "b.dims[3]", S, f_bdims4),
    ROW("forward b 1xKx1x1 (edge)", "nn_conv_forward", NULL, NN_OK, f_b4_ok),
    ROW("forward w dtype", "nn_conv_forward", "w.dtype", D, f_wdtype),
    ROW("forward y dtype", "nn_conv_forward", "y.dtype", D, f_ydtype),
    ROW("forward b dtype", "nn_conv_forward", "b.dtype", D, f_bdtype),
    ROW("forward x dtype 0", "nn_conv_forward", "x.dtype", D, f_xdtype_bad),
    ROW("forward x dtype 99", "nn_conv_forward", "x.dtype", D, f_xdtype_bad2),
    ROW("forward x space 7", "nn_conv_forward", "x.space", E, f_xspace_bad),
    ROW("forward x rank 9", "nn_conv_forward", "x.rank", E, f_xrank9),
    ROW("forward x stride < 0", "nn_conv_forward", "x.strides[3]", E, f_xstride_neg),
    ROW("forward x strided", "nn_conv_forward", "x", U, f_xstrided),
    ROW("forward y strided", "nn_conv_forward", "y", U, f_ystrided),
    ROW("forward x w y channels-last (edge)", "nn_conv_forward", NULL, NN_OK, f_nhwc_ok),
    ROW("forward x channels fastest, W outer", "nn_conv_forward", "x", U, f_x_nwhc),
    ROW("forward w channels-last with a gap", "nn_conv_forward", "w", U, f_w_cl_gap),
    ROW("backward_data dx channels fastest, W outer", "nn_conv_backward_data", "dx", U, bd_dx_nwhc),
    ROW("backward_filter dw C outermost", "nn_conv_backward_filter", "dw", U, bf_dw_cknhw),
    ROW("backward_bias dy channels fastest, W outer", "nn_conv_backward_bias", "dy", U, bb_dy_nwhc),
    ROW("forward w extent overflows", "nn_conv_forward", "w", O, f_wextent_overflow),
    ROW("forward y zero strides", "nn_conv_forward", "y", E, f_y_zero_strides),
    ROW("forward y one zero stride", "nn_conv_forward", "y", E, f_y_stride0_dim),
    ROW("forward x misaligned", "nn_conv_forward", "x.data", E, f_x_misaligned),
    ROW("forward y misaligned", "nn_conv_forward", "y.data", E, f_y_misaligned),
    ROW("forward x space label", "nn_conv_forward", "x", M, f_claim_x),
    ROW("forward w space label", "nn_conv_forward", "w", M, f_claim_w),
    ROW("forward b space label", "nn_conv_forward", "b", M, f_claim_b),
    ROW("forward y space label", "nn_conv_forward", "y", M, f_claim_y),
    ROW("forward x wrong space", "nn_conv_forward", "x", M, f_space_x),
    ROW("forward w wrong space", "nn_conv_forward", "w", M, f_space_w),
    ROW("forward b wrong space", "nn_conv_forward", "b", M, f_space_b),
    ROW("forward y wrong space", "nn_conv_forward", "y", M, f_space_y),
    ROW("forward y on another device", "nn_conv_forward", "y", M, f_device_other),
    ROW("forward y on x", "nn_conv_forward", "y", E, f_y_on_x),
    ROW("forward y inside x", "nn_conv_forward", "y", E, f_y_in_x),
    ROW("forward y on w", "nn_conv_forward", "y", E, f_y_on_w),
    ROW("forward b inside y", "nn_conv_forward", "b", E, f_b_in_y),
    ROW("forward inputs share storage (edge)", "nn_conv_forward", NULL, NN_OK, f_inputs_share),
    ROW2("forward stride INT64_MAX", "nn_conv_forward", "p.stride[0]", NN_OK, U, f_stride_max),
    ROW2("forward stride 2^31", "nn_conv_forward", "p.stride[0]", NN_OK, U, f_stride_2p31),
    ROW("forward stride INT32_MAX (edge)", "nn_conv_forward", NULL, NN_OK, f_stride_i32max_ok),
    ROW2("forward dilation 2^31, 1x1 filter", "nn_conv_forward", "p.dilation[1]", NN_OK, U,
         f_dil_2p31),
    ROW("forward pad 2^31", "nn_conv_forward", "y.dims[2]", S, f_pad_2p31),

    ROW("backward ctx NULL", "nn_conv_backward", "ctx", E, b_null_ctx),
    ROW("backward pullback NULL", "nn_conv_backward", "pullback", P, b_null_pullback),
    ROW("backward *pullback NULL", "nn_conv_backward", "pullback", P, b_null_star),
    ROW("backward pullback used twice", "nn_conv_backward", "pullback", P, b_twice),
    ROW("backward pullback freed", "nn_conv_backward", "pullback", P, b_freed),
    ROW("backward pullback of another context", "nn_conv_backward", "pullback", P, b_other_ctx),
    ROW("backward pooling pullback", "nn_conv_backward", "pullback", P, b_pool_pullback),
    ROW("backward not a pullback", "nn_conv_backward", "pullback", P, b_not_pullback),
    ROW("backward dy NULL", "nn_conv_backward", "dy", E, b_null_dy),
    ROW("backward dy dims", "nn_conv_backward", "dy.dims[3]", S, b_dy_dims),
    ROW("backward dx dims", "nn_conv_backward", "dx.dims[1]", S, b_dx_dims),
    ROW("backward dw dims", "nn_conv_backward", "dw.dims[0]", S, b_dw_dims),
    ROW("backward db dims", "nn_conv_backward", "db.dims[0]", S, b_db_dims),
    ROW("backward dx dtype", "nn_conv_backward", "dx.dtype", D, b_dx_dtype),
    ROW("backward dy dtype", "nn_conv_backward", "dy.dtype", D, b_dy_dtype),
    ROW("backward dy space label", "nn_conv_backward", "dy", M, b_claim_dy),
    ROW("backward dx space label", "nn_conv_backward", "dx", M, b_claim_dx),
    ROW("backward dw space label", "nn_conv_backward", "dw", M, b_claim_dw),
    ROW("backward db space label", "nn_conv_backward", "db", M, b_claim_db),
    ROW("backward dx wrong space", "nn_conv_backward", "dx", M, b_space_dx),
    ROW("backward dx only, wrong space", "nn_conv_backward", "dx", M, b_space_dx_only),
    ROW("backward dy wrong space", "nn_conv_backward", "dy", M, b_space_dy),
    ROW("backward dw wrong space", "nn_conv_backward", "dw", M, b_space_dw),
    ROW("backward db wrong space", "nn_conv_backward", "db", M, b_space_db),
    ROW("backward dx on x", "nn_conv_backward", "dx", E, b_dx_on_x),
    ROW("backward dw on w", "nn_conv_backward", "dw", E, b_dw_on_w),
    ROW("backward dw on the forward's x", "nn_conv_backward", "dw", E, b_dw_on_x),
    ROW("backward dx inside dw", "nn_conv_backward", "dw", E, b_dw_on_dx),
    ROW("backward dx on dy", "nn_conv_backward", "dx", E, b_dx_on_dy),
    ROW("backward dx on w", "nn_conv_backward", "dx", E, b_dx_on_w),
    ROW("backward db on dy", "nn_conv_backward", "db", E, b_db_on_dy),
    ROW("backward db on dw", "nn_conv_backward", "db", E, b_db_on_dw),
    ROW("backward dx self-overlapping", "nn_conv_backward", "dx", E, b_dx_self),
    ROW("backward dw strided", "nn_conv_backward", "dw", U, b_dw_strided),
    ROW("backward no gradient asked (edge)", "nn_conv_backward", NULL, NN_OK, b_nothing),

    ROW("backward_data ctx NULL", "nn_conv_backward_data", "ctx", E, bd_null_ctx),
    ROW("backward_data p NULL", "nn_conv_backward_data", "p", E, bd_null_p),
    ROW("backward_data dy NULL", "nn_conv_backward_data", "dy", E, bd_null_dy),
    ROW("backward_data w NULL", "nn_conv_backward_data", "w", E, bd_null_w),
    ROW("backward_data dx NULL", "nn_conv_backward_data", "dx", E, bd_null_dx),
    ROW("backward_data relu", "nn_conv_backward_data", "p.activation", E, bd_relu),
    ROW("backward_data unknown accumulate bit", "nn_conv_backward_data", "accumulate", E, bd_acc),
    ROW("backward_data reserved", "nn_conv_backward_data", "p.reserved[1]", E, bd_res),
    ROW("backward_data dx on dy", "nn_conv_backward_data", "dx", E, bd_dx_on_dy),
    ROW("backward_data dx on w", "nn_conv_backward_data", "dx", E, bd_dx_on_w),
    ROW("backward_data dx wrong space", "nn_conv_backward_data", "dx", M, bd_space_dx),
    ROW("backward_data w wrong space", "nn_conv_backward_data", "w", M, bd_space_w),
    ROW("backward_data dy space label", "nn_conv_backward_data", "dy", M, bd_claim_dy),
    ROW("backward_data dx zero strides", "nn_conv_backward_data", "dx", E, bd_dx_self),
    ROW("backward_data dy dims", "nn_conv_backward_data", "dy.dims[2]", S, bd_dy_dims),
    ROW2("backward_data stride INT64_MAX", "nn_conv_backward_data", "p.stride[0]", NN_OK, U,
         bd_stride_max),
    ROW("backward_filter ctx NULL", "nn_conv_backward_filter", "ctx", E, bf_null_ctx),
    ROW("backward_filter x NULL", "nn_conv_backward_filter", "x", E, bf_null_x),
    ROW("backward_filter dy NULL", "nn_conv_backward_filter", "dy", E, bf_null_dy),
    ROW("backward_filter dw NULL", "nn_conv_backward_filter", "dw", E, bf_null_dw),
    ROW("backward_filter stride 0", "nn_conv_backward_filter", "p.stride[0]", E, bf_stride0),
    ROW("backward_filter unknown accumulate bit", "nn_conv_backward_filter", "accumulate", E,
        bf_acc),
    ROW("backward_filter reserved", "nn_conv_backward_filter", "p.reserved[3]", E, bf_res),
    ROW("backward_filter x on dw", "nn_conv_backward_filter", "dw", E, bf_dw_on_x),
    ROW("backward_filter dy on dw", "nn_conv_backward_filter", "dw", E, bf_dw_on_dy),
    ROW("backward_filter dw dims", "nn_conv_backward_filter", "dw.dims[1]", S, bf_dw_dims),
    ROW("backward_filter x wrong space", "nn_conv_backward_filter", "x", M, bf_space_x),
    ROW("backward_filter dw wrong space", "nn_conv_backward_filter", "dw", M, bf_space_dw),
    ROW("backward_filter dw dtype", "nn_conv_backward_filter", "dw.dtype", D, bf_dtype),
    ROW("backward_bias ctx NULL", "nn_conv_backward_bias", "ctx", E, bb_null_ctx),
    ROW("backward_bias p NULL", "nn_conv_backward_bias", "p", E, bb_null_p),
    ROW("backward_bias dy NULL", "nn_conv_backward_bias", "dy", E, bb_null_dy),
    ROW("backward_bias db NULL", "nn_conv_backward_bias", "db", E, bb_null_db),
    ROW("backward_bias relu", "nn_conv_backward_bias", "p.activation", E, bb_relu),
    ROW("backward_bias reserved", "nn_conv_backward_bias", "p.reserved[0]", E, bb_res),
    ROW("backward_bias dy rank", "nn_conv_backward_bias", "dy.rank", S, bb_dy_rank),
    ROW("backward_bias db dims", "nn_conv_backward_bias", "db.dims[0]", S, bb_db_dims),
    ROW("backward_bias db on dy", "nn_conv_backward_bias", "db", E, bb_db_on_dy),
    ROW("backward_bias db space label", "nn_conv_backward_bias", "db", M, bb_claim_db),
    ROW("backward_bias dy wrong space", "nn_conv_backward_bias", "dy", M, bb_space_dy),
    ROW("backward_bias db zero stride", "nn_conv_backward_bias", "db", E, bb_db_self),
    ROW("backward_bias unknown accumulate bit", "nn_conv_backward_bias", "accumulate", E, bb_acc),
    ROW("pullback_free NULL (edge)", "nn_conv_pullback_free", NULL, NN_OK, pf_null),
    ROW("pullback_free *NULL (edge)", "nn_conv_pullback_free", NULL, NN_OK, pf_star_null),
    ROW("pullback_free twice", "nn_conv_pullback_free", "pullback", P, pf_twice),
    ROW("pullback_free consumed", "nn_conv_pullback_free", "pullback", P, pf_consumed),
    ROW("pullback_free pooling pullback", "nn_conv_pullback_free", "pullback", P, pf_pool),
};

CAT_SUBJECT(conv, rows)

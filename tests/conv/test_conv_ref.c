/* The reference convolution against results computed by hand. */
#include <criterion/criterion.h>
#include <string.h>

#include "nnprim/nnprim.h"

static nn_ctx *ref_ctx(void)
{
    nn_settings s;
    nn_settings_from_env(&s);
    s.backend = NN_BACKEND_REF;
    nn_ctx *ctx = NULL;
    cr_assert_eq(nn_ctx_create(&ctx, &s), NN_OK);
    return ctx;
}

/* A host f64 tensor over a caller's array. */
static nn_tensor wrap(nn_ctx *ctx, double *data, int rank, const int64_t *dims)
{
    nn_tensor t;
    cr_assert_eq(nn_tensor_wrap(ctx, data, NN_DTYPE_F64, rank, dims, NULL, &t), NN_OK, "%s",
                 nn_last_error()->message);
    return t;
}

static void expect_values(const double *got, const double *want, int n, const char *what)
{
    for (int i = 0; i < n; i++)
        cr_expect_eq(got[i], want[i], "%s[%d]: got %g, want %g", what, i, got[i], want[i]);
}

static nn_conv_params params(int nsp)
{
    nn_conv_params p;
    cr_assert_eq(nn_conv_params_default(&p, nsp), NN_OK);
    return p;
}

Test(conv_ref, one_d_cross_correlation_and_true_convolution)
{
    nn_ctx *ctx = ref_ctx();
    double xv[5] = {1, 2, 3, 4, 5}, wv[3] = {1, 0, -1}, yv[3];
    int64_t xd[3] = {1, 1, 5}, wd[3] = {1, 1, 3}, yd[3] = {1, 1, 3};
    nn_tensor x = wrap(ctx, xv, 3, xd), w = wrap(ctx, wv, 3, wd), y = wrap(ctx, yv, 3, yd);
    nn_conv_params p = params(1);
    cr_assert_eq(nn_conv_forward(ctx, &p, &x, &w, NULL, &y, NULL), NN_OK);
    expect_values(yv, (double[]){-2, -2, -2}, 3, "xcorr y");
    p.mode = NN_CONV_CONVOLUTION; /* the filter flipped: {-1, 0, 1} */
    cr_assert_eq(nn_conv_forward(ctx, &p, &x, &w, NULL, &y, NULL), NN_OK);
    expect_values(yv, (double[]){2, 2, 2}, 3, "conv y");
    nn_ctx_destroy(ctx);
}

Test(conv_ref, one_d_stride_dilation_asymmetric_padding)
{
    nn_ctx *ctx = ref_ctx();
    double xv[6] = {1, 2, 3, 4, 5, 6}, wv[2] = {1, 10}, yv[3];
    int64_t xd[3] = {1, 1, 6}, wd[3] = {1, 1, 2}, yd[3];
    nn_conv_params p = params(1);
    p.stride[0] = 2;
    p.dilation[0] = 2;
    p.pad_lo[0] = 1;
    /* padded length 7, dilated filter 3: (7 - 3) / 2 + 1 = 3 outputs; y[o] = x[2o-1] + 10 x[2o+1]
     */
    cr_assert_eq(nn_conv_output_shape(&p, 3, xd, wd, yd), NN_OK);
    cr_assert_eq(yd[2], 3);
    nn_tensor x = wrap(ctx, xv, 3, xd), w = wrap(ctx, wv, 3, wd), y = wrap(ctx, yv, 3, yd);
    cr_assert_eq(nn_conv_forward(ctx, &p, &x, &w, NULL, &y, NULL), NN_OK);
    expect_values(yv, (double[]){20, 42, 64}, 3, "y");
    p.pad_hi[0] = 2; /* the padding after adds one more output: x[5] + 10 * 0 */
    cr_assert_eq(nn_conv_output_shape(&p, 3, xd, wd, yd), NN_OK);
    cr_assert_eq(yd[2], 4);
    double y4[4];
    nn_tensor y4t = wrap(ctx, y4, 3, yd);
    cr_assert_eq(nn_conv_forward(ctx, &p, &x, &w, NULL, &y4t, NULL), NN_OK);
    expect_values(y4, (double[]){20, 42, 64, 6}, 4, "y with pad_hi");
    nn_ctx_destroy(ctx);
}

Test(conv_ref, one_d_gradients_by_hand)
{
    nn_ctx *ctx = ref_ctx();
    double xv[5] = {1, 2, 3, 4, 5}, wv[3] = {1, 0, -1}, bv[1] = {0.5}, yv[3], dyv[3] = {1, 1, 1};
    double dxv[5], dwv[3], dbv[1];
    int64_t xd[3] = {1, 1, 5}, wd[3] = {1, 1, 3}, yd[3] = {1, 1, 3}, bd[1] = {1};
    nn_tensor x = wrap(ctx, xv, 3, xd), w = wrap(ctx, wv, 3, wd), y = wrap(ctx, yv, 3, yd);
    nn_tensor b = wrap(ctx, bv, 1, bd), dy = wrap(ctx, dyv, 3, yd), dx = wrap(ctx, dxv, 3, xd);
    nn_tensor dw = wrap(ctx, dwv, 3, wd), db = wrap(ctx, dbv, 1, bd);
    nn_conv_params p = params(1);
    nn_conv_pullback *pb;
    cr_assert_eq(nn_conv_forward(ctx, &p, &x, &w, &b, &y, &pb), NN_OK);
    expect_values(yv, (double[]){-1.5, -1.5, -1.5}, 3, "y");
    cr_assert_eq(nn_conv_backward(ctx, &pb, &dy, &dx, &dw, &db), NN_OK);
    cr_expect_null(pb);
    /* dx[i] = sum_o dy[o] w[i - o]; dw[f] = sum_o x[o + f] dy[o]; db = sum dy */
    expect_values(dxv, (double[]){1, 1, 0, -1, -1}, 5, "dx");
    expect_values(dwv, (double[]){6, 9, 12}, 3, "dw");
    expect_values(dbv, (double[]){3}, 1, "db");

    /* the stand-alone calls give the same */
    memset(dxv, 0, sizeof dxv);
    memset(dwv, 0, sizeof dwv);
    dbv[0] = 0;
    cr_assert_eq(nn_conv_backward_data(ctx, &p, &dy, &w, &dx, 0), NN_OK);
    cr_assert_eq(nn_conv_backward_filter(ctx, &p, &x, &dy, &dw, 0), NN_OK);
    cr_assert_eq(nn_conv_backward_bias(ctx, &p, &dy, &db, 0), NN_OK);
    expect_values(dxv, (double[]){1, 1, 0, -1, -1}, 5, "stand-alone dx");
    expect_values(dwv, (double[]){6, 9, 12}, 3, "stand-alone dw");
    expect_values(dbv, (double[]){3}, 1, "stand-alone db");
    nn_ctx_destroy(ctx);
}

Test(conv_ref, true_convolution_gradients_flip_too)
{
    nn_ctx *ctx = ref_ctx();
    double xv[5] = {1, 2, 3, 4, 5}, wv[3] = {1, 0, -1}, dyv[3] = {1, 1, 1}, dxv[5], dwv[3];
    int64_t xd[3] = {1, 1, 5}, wd[3] = {1, 1, 3}, yd[3] = {1, 1, 3};
    nn_tensor x = wrap(ctx, xv, 3, xd), w = wrap(ctx, wv, 3, wd), dy = wrap(ctx, dyv, 3, yd);
    nn_tensor dx = wrap(ctx, dxv, 3, xd), dw = wrap(ctx, dwv, 3, wd);
    nn_conv_params p = params(1);
    p.mode = NN_CONV_CONVOLUTION;
    cr_assert_eq(nn_conv_backward_data(ctx, &p, &dy, &w, &dx, 0), NN_OK);
    cr_assert_eq(nn_conv_backward_filter(ctx, &p, &x, &dy, &dw, 0), NN_OK);
    expect_values(dxv, (double[]){-1, -1, 0, 1, 1}, 5, "dx");
    expect_values(dwv, (double[]){12, 9, 6}, 3, "dw");
    nn_ctx_destroy(ctx);
}

Test(conv_ref, fused_relu_masks_the_gradient)
{
    nn_ctx *ctx = ref_ctx();
    double xv[5] = {1, 5, 2, 0, 3}, wv[3] = {1, 0, -1}, yv[3], dyv[3] = {1, 1, 1};
    double dxv[5], dwv[3], dbv[1];
    int64_t xd[3] = {1, 1, 5}, wd[3] = {1, 1, 3}, yd[3] = {1, 1, 3}, bd[1] = {1};
    nn_tensor x = wrap(ctx, xv, 3, xd), w = wrap(ctx, wv, 3, wd), y = wrap(ctx, yv, 3, yd);
    nn_tensor dy = wrap(ctx, dyv, 3, yd), dx = wrap(ctx, dxv, 3, xd), dw = wrap(ctx, dwv, 3, wd);
    nn_tensor db = wrap(ctx, dbv, 1, bd);
    nn_conv_params p = params(1);
    p.activation = NN_ACTIVATION_RELU;
    nn_conv_pullback *pb;
    cr_assert_eq(nn_conv_forward(ctx, &p, &x, &w, NULL, &y, &pb), NN_OK);
    expect_values(yv, (double[]){0, 5, 0}, 3, "y"); /* before relu: -1, 5, -1 */
    cr_assert_eq(nn_conv_backward(ctx, &pb, &dy, &dx, &dw, &db), NN_OK);
    expect_values(dxv, (double[]){0, 1, 0, -1, 0}, 5, "dx"); /* dy masked to 0, 1, 0 */
    expect_values(dwv, (double[]){5, 2, 0}, 3, "dw");
    expect_values(dbv, (double[]){1}, 1, "db");
    nn_ctx_destroy(ctx);
}

Test(conv_ref, accumulate_bits_add_to_the_outputs)
{
    nn_ctx *ctx = ref_ctx();
    double xv[5] = {1, 2, 3, 4, 5}, wv[3] = {1, 0, -1}, yv[3], dyv[3] = {1, 1, 1};
    double dxv[5] = {10, 10, 10, 10, 10}, dwv[3] = {100, 100, 100}, dbv[1] = {7};
    int64_t xd[3] = {1, 1, 5}, wd[3] = {1, 1, 3}, yd[3] = {1, 1, 3}, bd[1] = {1};
    nn_tensor x = wrap(ctx, xv, 3, xd), w = wrap(ctx, wv, 3, wd), y = wrap(ctx, yv, 3, yd);
    nn_tensor dy = wrap(ctx, dyv, 3, yd), dx = wrap(ctx, dxv, 3, xd), dw = wrap(ctx, dwv, 3, wd);
    nn_tensor db = wrap(ctx, dbv, 1, bd);
    nn_conv_params p = params(1);
    nn_conv_pullback *pb;
    nn_backward_options o = {.accumulate = NN_ACCUMULATE_DW | NN_ACCUMULATE_DB};
    cr_assert_eq(nn_conv_forward(ctx, &p, &x, &w, NULL, &y, &pb), NN_OK);
    cr_assert_eq(nn_conv_backward_ex(ctx, &pb, &o, &dy, &dx, &dw, &db), NN_OK);
    expect_values(dxv, (double[]){1, 1, 0, -1, -1}, 5, "dx (overwritten)");
    expect_values(dwv, (double[]){106, 109, 112}, 3, "dw (accumulated)");
    expect_values(dbv, (double[]){10}, 1, "db (accumulated)");
    cr_assert_eq(nn_conv_backward_data(ctx, &p, &dy, &w, &dx, NN_ACCUMULATE_DX), NN_OK);
    expect_values(dxv, (double[]){2, 2, 0, -2, -2}, 5, "dx (accumulated)");
    nn_ctx_destroy(ctx);
}

Test(conv_ref, depthwise_groups_keep_channels_apart)
{
    nn_ctx *ctx = ref_ctx();
    double xv[6] = {1, 2, 3, 10, 20, 30}, wv[4] = {1, 1, 1, -1}, yv[4];
    int64_t xd[3] = {1, 2, 3}, wd[3] = {2, 1, 2}, yd[3] = {1, 2, 2};
    nn_tensor x = wrap(ctx, xv, 3, xd), w = wrap(ctx, wv, 3, wd), y = wrap(ctx, yv, 3, yd);
    nn_conv_params p = params(1);
    p.groups = 2;
    cr_assert_eq(nn_conv_forward(ctx, &p, &x, &w, NULL, &y, NULL), NN_OK);
    expect_values(yv, (double[]){3, 5, -10, -10}, 4, "y");
    nn_ctx_destroy(ctx);
}

Test(conv_ref, two_d_asymmetric_padding_shape_and_values)
{
    nn_ctx *ctx = ref_ctx();
    double xv[25], wv[9], yv[12];
    for (int i = 0; i < 25; i++)
        xv[i] = 1;
    for (int i = 0; i < 9; i++)
        wv[i] = 1;
    int64_t xd[4] = {1, 1, 5, 5}, wd[4] = {1, 1, 3, 3}, yd[4];
    nn_conv_params p = params(2);
    p.stride[0] = 2;
    p.pad_lo[1] = 1;
    p.pad_hi[0] = 1;
    p.pad_hi[1] = 2;
    cr_assert_eq(nn_conv_output_shape(&p, 4, xd, wd, yd), NN_OK);
    cr_assert_eq(yd[2], 2); /* (5 + 0 + 1 - 3) / 2 + 1 */
    cr_assert_eq(yd[3], 6); /* (5 + 1 + 2 - 3) / 1 + 1 */
    nn_tensor x = wrap(ctx, xv, 4, xd), w = wrap(ctx, wv, 4, wd), y = wrap(ctx, yv, 4, yd);
    cr_assert_eq(nn_conv_forward(ctx, &p, &x, &w, NULL, &y, NULL), NN_OK);
    /* rows 0-2 then 2-4 (3 rows each); columns: the window covers 2, 3, 3, 3, 2, 1 real columns */
    expect_values(yv, (double[]){6, 9, 9, 9, 6, 3, 6, 9, 9, 9, 6, 3}, 12, "y");
    nn_ctx_destroy(ctx);
}

Test(conv_ref, three_d_counts_the_window)
{
    nn_ctx *ctx = ref_ctx();
    double xv[27], wv[8], yv[64];
    for (int i = 0; i < 27; i++)
        xv[i] = 1;
    for (int i = 0; i < 8; i++)
        wv[i] = 1;
    int64_t xd[5] = {1, 1, 3, 3, 3}, wd[5] = {1, 1, 2, 2, 2}, yd[5];
    nn_conv_params p = params(3);
    for (int i = 0; i < 3; i++)
        p.pad_lo[i] = p.pad_hi[i] = 1;
    cr_assert_eq(nn_conv_output_shape(&p, 5, xd, wd, yd), NN_OK);
    cr_assert_eq(yd[2] * yd[3] * yd[4], 64);
    nn_tensor x = wrap(ctx, xv, 5, xd), w = wrap(ctx, wv, 5, wd), y = wrap(ctx, yv, 5, yd);
    cr_assert_eq(nn_conv_forward(ctx, &p, &x, &w, NULL, &y, NULL), NN_OK);
    cr_expect_eq(yv[0], 1);                   /* a corner sees one element */
    cr_expect_eq(yv[(1 * 4 + 1) * 4 + 1], 8); /* an inner position sees the whole 2x2x2 */
    cr_expect_eq(yv[(0 * 4 + 1) * 4 + 1], 4); /* a face position sees half of it */
    nn_ctx_destroy(ctx);
}

Test(conv_ref, convolution_equals_cross_correlation_with_flipped_filter)
{
    nn_ctx *ctx = ref_ctx();
    int64_t xd[4] = {2, 2, 6, 5}, wd[4] = {3, 2, 3, 2}, yd[4];
    nn_conv_params p = params(2);
    p.pad_lo[0] = 1;
    p.pad_hi[1] = 1;
    p.stride[1] = 2;
    cr_assert_eq(nn_conv_output_shape(&p, 4, xd, wd, yd), NN_OK);
    nn_tensor x, w, wf, y1, y2;
    cr_assert_eq(nn_tensor_empty(ctx, NN_DTYPE_F64, 4, xd, &x), NN_OK);
    cr_assert_eq(nn_tensor_empty(ctx, NN_DTYPE_F64, 4, wd, &w), NN_OK);
    cr_assert_eq(nn_tensor_empty(ctx, NN_DTYPE_F64, 4, wd, &wf), NN_OK);
    cr_assert_eq(nn_tensor_empty(ctx, NN_DTYPE_F64, 4, yd, &y1), NN_OK);
    cr_assert_eq(nn_tensor_empty(ctx, NN_DTYPE_F64, 4, yd, &y2), NN_OK);
    cr_assert_eq(nn_tensor_fill_ints(ctx, &x, -3, 3, 1), NN_OK);
    cr_assert_eq(nn_tensor_fill_ints(ctx, &w, -3, 3, 2), NN_OK);
    double *wv = w.data, *fv = wf.data;
    for (int kc = 0; kc < 6; kc++)
        for (int r = 0; r < 3; r++)
            for (int s = 0; s < 2; s++)
                fv[kc * 6 + (2 - r) * 2 + (1 - s)] = wv[kc * 6 + r * 2 + s];
    p.mode = NN_CONV_CONVOLUTION;
    cr_assert_eq(nn_conv_forward(ctx, &p, &x, &w, NULL, &y1, NULL), NN_OK);
    p.mode = NN_CONV_CROSS_CORRELATION;
    cr_assert_eq(nn_conv_forward(ctx, &p, &x, &wf, NULL, &y2, NULL), NN_OK);
    int64_t n = nn_tensor_numel(&y1);
    cr_assert_gt(n, 0);
    cr_expect_eq(memcmp(y1.data, y2.data, (size_t)n * sizeof(double)), 0);
    nn_tensor *all[] = {&x, &w, &wf, &y1, &y2};
    for (int i = 0; i < 5; i++)
        nn_tensor_free(ctx, all[i]);
    nn_ctx_destroy(ctx);
}

Test(conv_ref, half_precision_and_rank_four_bias)
{
    nn_ctx *ctx = ref_ctx();
    int64_t xd[4] = {1, 1, 1, 5}, wd[4] = {2, 1, 1, 3}, yd[4] = {1, 2, 1, 3}, bd[4] = {1, 2, 1, 1};
    nn_dtype types[] = {NN_DTYPE_F16, NN_DTYPE_BF16, NN_DTYPE_F32};
    for (int t = 0; t < 3; t++) {
        nn_tensor x, w, b, y, want;
        cr_assert_eq(nn_tensor_empty(ctx, types[t], 4, xd, &x), NN_OK);
        cr_assert_eq(nn_tensor_empty(ctx, types[t], 4, wd, &w), NN_OK);
        cr_assert_eq(nn_tensor_empty(ctx, types[t], 4, bd, &b), NN_OK);
        cr_assert_eq(nn_tensor_empty(ctx, types[t], 4, yd, &y), NN_OK);
        cr_assert_eq(nn_tensor_empty(ctx, types[t], 4, yd, &want), NN_OK);
        cr_assert_eq(nn_tensor_fill_constant(ctx, &x, 3), NN_OK);
        cr_assert_eq(nn_tensor_fill_constant(ctx, &w, 2), NN_OK);
        cr_assert_eq(nn_tensor_fill_constant(ctx, &b, -1), NN_OK);
        cr_assert_eq(nn_tensor_fill_constant(ctx, &want, 17), NN_OK); /* 3 * 2 * 3 - 1 */
        nn_conv_params p = params(2);
        cr_assert_eq(nn_conv_forward(ctx, &p, &x, &w, &b, &y, NULL), NN_OK, "%s",
                     nn_last_error()->message);
        cr_expect_eq(memcmp(y.data, want.data, 6 * nn_dtype_size(types[t])), 0, "dtype %s",
                     nn_dtype_name(types[t]));
        nn_tensor *all[] = {&x, &w, &b, &y, &want};
        for (int i = 0; i < 5; i++)
            nn_tensor_free(ctx, all[i]);
    }
    nn_ctx_destroy(ctx);
}

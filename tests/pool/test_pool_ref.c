/* The reference backend: hand-computed cases, every mode x rank x window/stride/padding against
 * an independent naive formulation, gradients against central finite differences, ties. */
#include <criterion/criterion.h>
#include <criterion/redirect.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nnprim/nnprim.h"
#include "pool_check.h"

static nn_ctx *ctx;

static void setup(void)
{
    ctx = pc_ctx(NN_BACKEND_REF);
}
static void teardown(void)
{
    nn_ctx_destroy(ctx);
}

TestSuite(pool_ref, .init = setup, .fini = teardown);

static nn_tensor from_values(nn_dtype dtype, int rank, const int64_t *dims, const double *v)
{
    nn_tensor t = pc_empty(ctx, dtype, rank, dims);
    for (int64_t i = 0; i < nn_tensor_numel(&t); i++)
        pc_set(&t, i, v[i]);
    return t;
}

static void expect_values(const nn_tensor *t, const double *want, double tol, const char *what)
{
    for (int64_t i = 0; i < nn_tensor_numel(t); i++)
        cr_expect(isnan(want[i]) ? isnan(pc_get(t, i)) : fabs(pc_get(t, i) - want[i]) <= tol,
                  "%s[%lld] = %.17g, want %.17g", what, (long long)i, pc_get(t, i), want[i]);
}

/* Forward (and backward with dy) of a hand-computed case; y and dx compared exactly or to tol. */
static void run_case(const nn_pool_params *p, int rank, const int64_t *xd, const double *x,
                     const double *y_want, const double *dy, const double *dx_want, double tol)
{
    int64_t yd[5];
    cr_assert_eq(nn_pool_output_shape(p, rank, xd, yd), NN_OK, "%s", nn_last_error()->message);
    nn_tensor xt = from_values(NN_DTYPE_F64, rank, xd, x);
    nn_tensor yt = pc_empty(ctx, NN_DTYPE_F64, rank, yd);
    nn_pool_pullback *pb = NULL;
    cr_assert_eq(nn_pool_forward(ctx, p, &xt, &yt, &pb), NN_OK, "%s", nn_last_error()->message);
    cr_assert_not_null(pb);
    expect_values(&yt, y_want, tol, "y");
    nn_tensor dyt = from_values(NN_DTYPE_F64, rank, yd, dy);
    nn_tensor dxt = pc_empty(ctx, NN_DTYPE_F64, rank, xd);
    cr_assert_eq(nn_pool_backward(ctx, &pb, &dyt, &dxt), NN_OK, "%s", nn_last_error()->message);
    cr_expect_null(pb);
    expect_values(&dxt, dx_want, tol, "dx");
    nn_tensor_free(ctx, &xt);
    nn_tensor_free(ctx, &yt);
    nn_tensor_free(ctx, &dyt);
    nn_tensor_free(ctx, &dxt);
}

Test(pool_ref, hand_2d_2x2_stride2)
{
    int64_t xd[4] = {1, 1, 4, 4};
    double x[16], dy[4] = {1, 2, 3, 4};
    for (int i = 0; i < 16; i++)
        x[i] = i;
    nn_pool_params p = pc_params(2, NN_POOL_MAX, 2, 2, 0, 0);
    double ymax[4] = {5, 7, 13, 15};
    double dxmax[16] = {0, 0, 0, 0, 0, 1, 0, 2, 0, 0, 0, 0, 0, 3, 0, 4};
    run_case(&p, 4, xd, x, ymax, dy, dxmax, 0);
    p.mode = NN_POOL_MEAN_INCLUDE_PAD;
    double ymean[4] = {2.5, 4.5, 10.5, 12.5};
    double dxmean[16] = {.25, .25, .5, .5, .25, .25, .5, .5, .75, .75, 1, 1, .75, .75, 1, 1};
    run_case(&p, 4, xd, x, ymean, dy, dxmean, 0);
}

Test(pool_ref, hand_1d_window3_stride2_pad1)
{
    int64_t xd[3] = {1, 1, 5};
    double x[5] = {1, 2, 3, 4, 5}, dy[3] = {1, 1, 1};
    /* windows cover inputs {0,1}, {1,2,3}, {3,4} (one padded position at each end) */
    nn_pool_params p = pc_params(1, NN_POOL_MAX, 3, 2, 1, 1);
    run_case(&p, 3, xd, x, (double[]){2, 4, 5}, dy, (double[]){0, 1, 0, 1, 1}, 0);
    p.mode = NN_POOL_MEAN_INCLUDE_PAD;
    run_case(&p, 3, xd, x, (double[]){1, 3, 3}, dy,
             (double[]){1. / 3, 2. / 3, 1. / 3, 2. / 3, 1. / 3}, 1e-15);
    p.mode = NN_POOL_MEAN_EXCLUDE_PAD;
    run_case(&p, 3, xd, x, (double[]){1.5, 3, 4.5}, dy,
             (double[]){.5, .5 + 1. / 3, 1. / 3, 1. / 3 + .5, .5}, 1e-15);
}

Test(pool_ref, hand_1d_asymmetric_padding)
{
    int64_t xd[3] = {1, 1, 4};
    double x[4] = {1, 2, 3, 4}, dy[2] = {10, 20};
    nn_pool_params p = pc_params(1, NN_POOL_MAX, 2, 2, 0, 1); /* windows {0,1}, {2,3} */
    run_case(&p, 3, xd, x, (double[]){2, 4}, dy, (double[]){0, 10, 0, 20}, 0);
    p.pad_lo[0] = 1; /* padded size 6: windows {-1,0}, {1,2}, {3,4} */
    p.pad_hi[0] = 1;
    run_case(&p, 3, xd, x, (double[]){1, 3, 4}, (double[]){10, 20, 30}, (double[]){10, 0, 20, 30},
             0);
    p.pad_hi[0] = 0; /* padded size 5: windows {-1,0}, {1,2} */
    p.mode = NN_POOL_MEAN_INCLUDE_PAD;
    run_case(&p, 3, xd, x, (double[]){.5, 2.5}, dy, (double[]){5, 10, 10, 0}, 0);
    p.mode = NN_POOL_MEAN_EXCLUDE_PAD;
    run_case(&p, 3, xd, x, (double[]){1, 2.5}, dy, (double[]){10, 10, 10, 0}, 0);
}

Test(pool_ref, hand_3d_whole_volume)
{
    int64_t xd[5] = {1, 1, 2, 2, 2};
    double x[8] = {3, 1, 4, 1.5, 9, 2, 6, 5}, dy[1] = {8};
    nn_pool_params p = pc_params(3, NN_POOL_MAX, 2, 1, 0, 0);
    run_case(&p, 5, xd, x, (double[]){9}, dy, (double[]){0, 0, 0, 0, 8, 0, 0, 0}, 0);
    p.mode = NN_POOL_MEAN_EXCLUDE_PAD;
    run_case(&p, 5, xd, x, (double[]){31.5 / 8}, dy, (double[]){1, 1, 1, 1, 1, 1, 1, 1}, 0);
}

Test(pool_ref, max_ignores_padding_for_negative_inputs)
{
    int64_t xd[3] = {1, 1, 3};
    nn_pool_params p = pc_params(1, NN_POOL_MAX, 2, 1, 1, 1);
    run_case(&p, 3, xd, (double[]){-5, -7, -3}, (double[]){-5, -5, -3, -3}, (double[]){1, 2, 3, 4},
             (double[]){3, 0, 7}, 0);
}

Test(pool_ref, output_shape_floor_rounding)
{
    int64_t yd[5];
    nn_pool_params p = pc_params(2, NN_POOL_MAX, 3, 2, 0, 0);
    cr_assert_eq(nn_pool_output_shape(&p, 4, (int64_t[]){32, 64, 112, 112}, yd), NN_OK);
    cr_expect_eq(yd[0], 32);
    cr_expect_eq(yd[1], 64);
    cr_expect_eq(yd[2], 55); /* (112 - 3) / 2 + 1, rounded down */
    cr_expect_eq(yd[3], 55);
    p = pc_params(2, NN_POOL_MAX, 3, 2, 1, 1);
    cr_assert_eq(nn_pool_output_shape(&p, 4, (int64_t[]){32, 64, 112, 112}, yd), NN_OK);
    cr_expect_eq(yd[2], 56);
    p = pc_params(3, NN_POOL_MEAN_INCLUDE_PAD, 2, 2, 0, 1);
    p.window[2] = 4;
    p.stride[2] = 3;
    cr_assert_eq(nn_pool_output_shape(&p, 5, (int64_t[]){1, 2, 5, 6, 10}, yd), NN_OK);
    cr_expect_eq(yd[2], 3); /* (5 + 1 - 2) / 2 + 1 */
    cr_expect_eq(yd[3], 3); /* (6 + 1 - 2) / 2 + 1 = 3.5 -> 3 */
    cr_expect_eq(yd[4], 3); /* (10 + 1 - 4) / 3 + 1 = 3.33 -> 3 */
}

/* ---- the same problem by another formulation: materialise the padded input (padding = -inf
 * for max, 0 and a mask for means), then reduce each window in padded coordinates. ---- */

struct naive {
    int r;
    int64_t n, c, in[3], pin[3], out[3];
};

static int64_t pidx(const struct naive *g, int64_t plane, const int64_t *i)
{
    int64_t k = plane;
    for (int d = 0; d < g->r; d++)
        k = k * g->pin[d] + i[d];
    return k;
}

static void naive_forward(const nn_pool_params *p, const nn_tensor *x, const nn_tensor *y,
                          double *yv)
{
    struct naive g = {.r = p->spatial_rank, .n = x->dims[0], .c = x->dims[1]};
    int64_t psize = 1, isize = 1, osize = 1;
    for (int d = 0; d < g.r; d++) {
        g.in[d] = x->dims[2 + d];
        g.pin[d] = g.in[d] + p->pad_lo[d] + p->pad_hi[d];
        g.out[d] = y->dims[2 + d];
        psize *= g.pin[d];
        isize *= g.in[d];
        osize *= g.out[d];
    }
    double *pad = malloc((size_t)(g.n * g.c * psize) * sizeof *pad);
    char *real = calloc((size_t)(g.n * g.c * psize), 1);
    for (int64_t k = 0; k < g.n * g.c * psize; k++)
        pad[k] = p->mode == NN_POOL_MAX ? -INFINITY : 0;
    for (int64_t lin = 0; lin < g.n * g.c * isize; lin++) {
        int64_t i[3], rest = lin;
        for (int d = g.r - 1; d >= 0; d--) {
            i[d] = rest % g.in[d] + p->pad_lo[d];
            rest /= g.in[d];
        }
        int64_t k = pidx(&g, rest, i);
        pad[k] = pc_get(x, lin);
        real[k] = 1;
    }
    for (int64_t lin = 0; lin < g.n * g.c * osize; lin++) {
        int64_t o[3], rest = lin;
        for (int d = g.r - 1; d >= 0; d--) {
            o[d] = rest % g.out[d];
            rest /= g.out[d];
        }
        int64_t wsize = 1;
        for (int d = 0; d < g.r; d++)
            wsize *= p->window[d];
        double acc = p->mode == NN_POOL_MAX ? -INFINITY : 0;
        int64_t count = 0;
        for (int64_t w = 0; w < wsize; w++) {
            int64_t i[3], wr = w;
            for (int d = g.r - 1; d >= 0; d--) {
                i[d] = o[d] * p->stride[d] + wr % p->window[d];
                wr /= p->window[d];
            }
            int64_t k = pidx(&g, rest, i);
            if (p->mode == NN_POOL_MAX)
                acc = fmax(acc, pad[k]);
            else
                acc += pad[k];
            count += real[k];
        }
        if (p->mode == NN_POOL_MEAN_INCLUDE_PAD) acc /= (double)wsize;
        if (p->mode == NN_POOL_MEAN_EXCLUDE_PAD) acc /= (double)count;
        yv[lin] = acc;
    }
    free(pad);
    free(real);
}

static const int64_t sizes[3][3] = {{7, 0, 0}, {6, 7, 0}, {5, 4, 6}};

/* Every mode x rank x window x stride x padding on small inputs, values without ties. */
Test(pool_ref, all_configurations_match_naive_formulation)
{
    const int64_t pads[][2] = {{0, 0}, {1, 1}, {0, 1}, {1, 0}, {2, 1}, {2, 2}};
    int cases = 0;
    for (int mode = 0; mode < 3; mode++)
        for (int r = 1; r <= 3; r++)
            for (int64_t w = 1; w <= 3; w++)
                for (int64_t s = 1; s <= 3; s++)
                    for (size_t pi = 0; pi < sizeof pads / sizeof pads[0]; pi++) {
                        if (pads[pi][0] >= w || pads[pi][1] >= w) continue;
                        nn_pool_params p =
                            pc_params(r, (nn_pool_mode)mode, w, s, pads[pi][0], pads[pi][1]);
                        if (r >= 2) { /* vary the last dim so dims are not all alike */
                            p.window[r - 1] = w == 3 ? 2 : w + 1;
                            p.stride[r - 1] = s == 1 ? 2 : 1;
                            p.pad_lo[r - 1] = 0;
                            p.pad_hi[r - 1] = p.window[r - 1] - 1;
                        }
                        int64_t xd[5] = {2, 3};
                        for (int d = 0; d < r; d++)
                            xd[2 + d] = sizes[r - 1][d];
                        int64_t yd[5];
                        cr_assert_eq(nn_pool_output_shape(&p, r + 2, xd, yd), NN_OK, "%s",
                                     nn_last_error()->message);
                        nn_tensor x = pc_empty(ctx, NN_DTYPE_F64, r + 2, xd);
                        nn_tensor y = pc_empty(ctx, NN_DTYPE_F64, r + 2, yd);
                        pc_fill_distinct(&x, (uint64_t)cases, 0.5, -20);
                        cr_assert_eq(nn_pool_forward(ctx, &p, &x, &y, NULL), NN_OK, "%s",
                                     nn_last_error()->message);
                        double *want = malloc((size_t)nn_tensor_numel(&y) * sizeof *want);
                        naive_forward(&p, &x, &y, want);
                        for (int64_t i = 0; i < nn_tensor_numel(&y); i++)
                            cr_assert(fabs(pc_get(&y, i) - want[i]) <= 1e-12 * fabs(want[i]),
                                      "%s: y[%lld] = %.17g, naive %.17g", pc_describe(&p, &x),
                                      (long long)i, pc_get(&y, i), want[i]);
                        free(want);
                        nn_tensor_free(ctx, &x);
                        nn_tensor_free(ctx, &y);
                        cases++;
                    }
    cr_expect_gt(cases, 200, "only %d cases ran", cases);
}

/* L(x) = sum(y(x) * r); dL/dx from backward with dy = r against central differences. Max inputs
 * are distinct with gaps of 0.5, far above the step, so no argmax changes within a step. */
Test(pool_ref, gradients_match_central_differences)
{
    const int64_t cfg[][4] = {{2, 2, 0, 0}, {3, 2, 1, 1}, {3, 1, 0, 2}, {2, 3, 1, 0}, {3, 3, 2, 1}};
    const double h = 1e-4;
    for (int mode = 0; mode < 3; mode++)
        for (int r = 1; r <= 3; r++)
            for (size_t ci = 0; ci < sizeof cfg / sizeof cfg[0]; ci++) {
                nn_pool_params p = pc_params(r, (nn_pool_mode)mode, cfg[ci][0], cfg[ci][1],
                                             cfg[ci][2], cfg[ci][3]);
                int64_t xd[5] = {1, 2}, yd[5];
                for (int d = 0; d < r; d++)
                    xd[2 + d] = sizes[r - 1][d] - (r == 3);
                cr_assert_eq(nn_pool_output_shape(&p, r + 2, xd, yd), NN_OK);
                nn_tensor x = pc_empty(ctx, NN_DTYPE_F64, r + 2, xd);
                nn_tensor y = pc_empty(ctx, NN_DTYPE_F64, r + 2, yd);
                nn_tensor dy = pc_empty(ctx, NN_DTYPE_F64, r + 2, yd);
                nn_tensor dx = pc_empty(ctx, NN_DTYPE_F64, r + 2, xd);
                pc_fill_distinct(&x, 100 + ci, 0.5, -3);
                cr_assert_eq(nn_tensor_fill_uniform(ctx, &dy, -1, 1, 7 + ci), NN_OK);
                nn_pool_pullback *pb;
                cr_assert_eq(nn_pool_forward(ctx, &p, &x, &y, &pb), NN_OK);
                cr_assert_eq(nn_pool_backward(ctx, &pb, &dy, &dx), NN_OK);
                for (int64_t i = 0; i < nn_tensor_numel(&x); i++) {
                    double x0 = pc_get(&x, i), lp = 0, lm = 0;
                    pc_set(&x, i, x0 + h);
                    cr_assert_eq(nn_pool_forward(ctx, &p, &x, &y, NULL), NN_OK);
                    for (int64_t k = 0; k < nn_tensor_numel(&y); k++)
                        lp += pc_get(&y, k) * pc_get(&dy, k);
                    pc_set(&x, i, x0 - h);
                    cr_assert_eq(nn_pool_forward(ctx, &p, &x, &y, NULL), NN_OK);
                    for (int64_t k = 0; k < nn_tensor_numel(&y); k++)
                        lm += pc_get(&y, k) * pc_get(&dy, k);
                    pc_set(&x, i, x0);
                    double fd = (lp - lm) / (2 * h);
                    cr_assert(fabs(fd - pc_get(&dx, i)) <= 1e-8,
                              "%s: dx[%lld] = %.12g, central difference %.12g", pc_describe(&p, &x),
                              (long long)i, pc_get(&dx, i), fd);
                }
                nn_tensor_free(ctx, &x);
                nn_tensor_free(ctx, &y);
                nn_tensor_free(ctx, &dy);
                nn_tensor_free(ctx, &dx);
            }
}

/* Ties: the gradient goes to the first maximum in window order (row-major over the window). */
Test(pool_ref, max_ties_go_to_first_in_window_order)
{
    int64_t xd1[3] = {1, 1, 4};
    nn_pool_params p = pc_params(1, NN_POOL_MAX, 3, 1, 0, 0); /* windows {0,1,2}, {1,2,3} */
    run_case(&p, 3, xd1, (double[]){5, 5, 5, 1}, (double[]){5, 5}, (double[]){1, 10},
             (double[]){1, 10, 0, 0}, 0);
    /* 2-D: in the window [[1, 7], [7, 2]] the 7 at (0, 1) comes before the 7 at (1, 0) */
    int64_t xd2[4] = {1, 1, 2, 2};
    p = pc_params(2, NN_POOL_MAX, 2, 1, 0, 0);
    run_case(&p, 4, xd2, (double[]){1, 7, 7, 2}, (double[]){7}, (double[]){3},
             (double[]){0, 3, 0, 0}, 0);
    /* a window of equal values: its first real input (padding never counts) */
    p = pc_params(2, NN_POOL_MAX, 2, 1, 1, 0);
    run_case(&p, 4, xd2, (double[]){4, 4, 4, 4}, (double[]){4, 4, 4, 4}, (double[]){1, 2, 3, 4},
             (double[]){10, 0, 0, 0}, 0);
}

Test(pool_ref, max_propagates_nan)
{
    int64_t xd[3] = {1, 1, 4};
    nn_pool_params p = pc_params(1, NN_POOL_MAX, 2, 2, 0, 0);
    run_case(&p, 3, xd, (double[]){1, NAN, 3, 2}, (double[]){NAN, 3}, (double[]){1, 2},
             (double[]){0, 1, 2, 0}, 0);
}

/* Strided views (a channel slice of a wider tensor) give the same results as contiguous ones. */
Test(pool_ref, strided_views_match_contiguous)
{
    nn_pool_params p = pc_params(2, NN_POOL_MAX, 3, 2, 1, 1);
    for (int mode = 0; mode < 3; mode++) {
        p.mode = (nn_pool_mode)mode;
        int64_t wide[4] = {2, 6, 5, 7}, xd[4] = {2, 3, 5, 7}, yd[4];
        cr_assert_eq(nn_pool_output_shape(&p, 4, xd, yd), NN_OK);
        nn_tensor big = pc_empty(ctx, NN_DTYPE_F32, 4, wide);
        pc_fill_distinct(&big, 3, 1, -100);
        nn_tensor xs = big; /* every other channel */
        xs.dims[1] = 3;
        xs.strides[1] *= 2;
        nn_tensor xc = pc_empty(ctx, NN_DTYPE_F32, 4, xd);
        cr_assert_eq(nn_tensor_copy(ctx, &xc, &xs), NN_OK);
        nn_tensor ys = pc_empty(ctx, NN_DTYPE_F32, 4, (int64_t[]){yd[0], yd[1] * 2, yd[2], yd[3]});
        ys.dims[1] = yd[1];
        ys.strides[1] *= 2;
        nn_tensor yc = pc_empty(ctx, NN_DTYPE_F32, 4, yd);
        nn_pool_pullback *pbs, *pbc;
        cr_assert_eq(nn_pool_forward(ctx, &p, &xs, &ys, &pbs), NN_OK, "%s",
                     nn_last_error()->message);
        cr_assert_eq(nn_pool_forward(ctx, &p, &xc, &yc, &pbc), NN_OK);
        int64_t worst;
        cr_expect_eq(pc_compare(&ys, &yc, 0, 0, &worst), 0, "y differs at %lld", (long long)worst);
        nn_tensor dxs = pc_empty(ctx, NN_DTYPE_F32, 4, wide),
                  dxc = pc_empty(ctx, NN_DTYPE_F32, 4, xd);
        nn_tensor dxsv = dxs;
        dxsv.dims[1] = 3;
        dxsv.strides[1] *= 2;
        cr_assert_eq(nn_pool_backward(ctx, &pbs, &ys, &dxsv), NN_OK, "%s",
                     nn_last_error()->message);
        cr_assert_eq(nn_pool_backward(ctx, &pbc, &yc, &dxc), NN_OK);
        cr_expect_eq(pc_compare(&dxsv, &dxc, 0, 0, &worst), 0, "dx differs at %lld",
                     (long long)worst);
        ys.dims[1] = yd[1] * 2;
        ys.strides[1] /= 2;
        nn_tensor_free(ctx, &big);
        nn_tensor_free(ctx, &xc);
        nn_tensor_free(ctx, &ys);
        nn_tensor_free(ctx, &yc);
        nn_tensor_free(ctx, &dxs);
        nn_tensor_free(ctx, &dxc);
    }
}

/* f16 / bf16 / f32 results are the f64 results rounded once to the dtype. */
Test(pool_ref, narrow_dtypes_round_once)
{
    const nn_dtype types[] = {NN_DTYPE_F32, NN_DTYPE_F16, NN_DTYPE_BF16};
    nn_pool_params p = pc_params(2, NN_POOL_MEAN_EXCLUDE_PAD, 3, 2, 1, 1);
    int64_t xd[4] = {1, 2, 6, 5}, yd[4];
    cr_assert_eq(nn_pool_output_shape(&p, 4, xd, yd), NN_OK);
    nn_tensor x64 = pc_empty(ctx, NN_DTYPE_F64, 4, xd), y64 = pc_empty(ctx, NN_DTYPE_F64, 4, yd);
    pc_fill_distinct(&x64, 9, 1, 0); /* integers < 60: exact in every dtype */
    cr_assert_eq(nn_pool_forward(ctx, &p, &x64, &y64, NULL), NN_OK);
    for (size_t t = 0; t < 3; t++) {
        nn_tensor x = pc_empty(ctx, types[t], 4, xd), y = pc_empty(ctx, types[t], 4, yd);
        nn_tensor want = pc_empty(ctx, types[t], 4, yd);
        for (int64_t i = 0; i < nn_tensor_numel(&x); i++)
            pc_set(&x, i, pc_get(&x64, i));
        for (int64_t i = 0; i < nn_tensor_numel(&y); i++)
            pc_set(&want, i, pc_get(&y64, i));
        cr_assert_eq(nn_pool_forward(ctx, &p, &x, &y, NULL), NN_OK);
        int64_t worst;
        cr_expect_eq(pc_compare(&y, &want, 0, 0, &worst), 0, "%s: y differs at %lld",
                     nn_dtype_name(types[t]), (long long)worst);
        nn_tensor_free(ctx, &x);
        nn_tensor_free(ctx, &y);
        nn_tensor_free(ctx, &want);
    }
    nn_tensor_free(ctx, &x64);
    nn_tensor_free(ctx, &y64);
}

/* NNPRIM_VERBOSE=1: one line per call naming the op and the path that ran. */
/* The reference takes host memory only: nn_pool_workspace_size is 0 for every pass and layout. */
Test(pool_ref, workspace_size_is_zero)
{
    nn_pool_params p = pc_params(2, NN_POOL_MAX, 3, 2, 1, 1);
    int64_t xd[4] = {2, 3, 9, 8}, yd[4], wide[4] = {2, 6, 9, 8};
    cr_assert_eq(nn_pool_output_shape(&p, 4, xd, yd), NN_OK);
    nn_tensor x = pc_empty(ctx, NN_DTYPE_F32, 4, xd), y = pc_empty(ctx, NN_DTYPE_F32, 4, yd);
    nn_tensor dy = pc_empty(ctx, NN_DTYPE_F32, 4, yd), w = pc_empty(ctx, NN_DTYPE_F32, 4, wide);
    nn_tensor dx = w; /* every other channel of a wider tensor: strides unlike x's */
    dx.dims[1] = 3;
    dx.strides[1] *= 2;
    for (int pass = NN_POOL_PASS_FORWARD; pass <= NN_POOL_PASS_BACKWARD; pass++) {
        size_t n = 1;
        cr_expect_eq(nn_pool_workspace_size(ctx, &p, &x, &y, &dy, &dx, (nn_pool_pass)pass, &n),
                     NN_OK, "%s", nn_last_error()->message);
        cr_expect_eq(n, 0, "pass %d", pass);
    }
    nn_tensor *all[] = {&x, &y, &dy, &w};
    for (size_t i = 0; i < 4; i++)
        nn_tensor_free(ctx, all[i]);
}

Test(pool_verbose, line_names_op_and_path, .init = cr_redirect_stderr)
{
    nn_settings s;
    nn_settings_from_env(&s);
    s.backend = NN_BACKEND_REF;
    s.verbose = 1;
    nn_ctx *v;
    cr_assert_eq(nn_ctx_create(&v, &s), NN_OK);
    nn_pool_params p = pc_params(2, NN_POOL_MEAN_EXCLUDE_PAD, 3, 2, 1, 0);
    nn_tensor x = pc_empty(v, NN_DTYPE_F32, 4, (int64_t[]){1, 2, 6, 6});
    nn_tensor y = pc_empty(v, NN_DTYPE_F32, 4, (int64_t[]){1, 2, 3, 3});
    cr_assert_eq(nn_tensor_fill_constant(v, &x, 1), NN_OK);
    cr_assert_eq(nn_pool_forward(v, &p, &x, &y, NULL), NN_OK);
    fflush(stderr);
    char line[512] = "";
    FILE *f = cr_get_redirected_stderr();
    /* the context's header line is a '#' comment */
    cr_assert(fgets(line, sizeof line, f) && line[0] == '#', "%s", line);
    cr_assert(fgets(line, sizeof line, f));
    cr_expect(strstr(line, "nnprim_verbose,pool_forward,ref,ref,-,n1c2h6w6 mean_exclude_pad "
                           "win3x3 stride2x2 padlo1x1 padhi0x0 f32,"),
              "line: %s", line);
    nn_tensor_free(v, &x);
    nn_tensor_free(v, &y);
    nn_ctx_destroy(v);
}

/* The reference backend of layer normalisation against values checked by hand and against a
 * direct float64 computation written here from the definition (docs/LAYERNORM.md). */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "nnprim/nnprim.h"

static nn_ctx *ctx;

static void setup(void)
{
    nn_settings s;
    nn_settings_from_env(&s);
    s.backend = NN_BACKEND_REF;
    cr_assert_eq(nn_ctx_create(&ctx, &s), NN_OK);
}

static void teardown(void)
{
    nn_ctx_destroy(ctx);
}

TestSuite(layernorm_ref, .init = setup, .fini = teardown);

static nn_tensor wrap(double *v, int rank, const int64_t *dims)
{
    nn_tensor t;
    cr_assert_eq(nn_tensor_wrap(ctx, v, NN_DTYPE_F64, rank, dims, NULL, &t), NN_OK, "%s",
                 nn_last_error()->message);
    return t;
}

/* x = (1, 2, 3, 4): mean 2.5, biased variance 1.25, so with eps 0 xhat = (-3, -1, 1, 3) / sqrt 5;
 * gamma (1, 2, 1, 2) and beta (0, 0, 1, 1). */
Test(layernorm_ref, hand_checked_row)
{
    double xv[4] = {1, 2, 3, 4}, gv[4] = {1, 2, 1, 2}, bv[4] = {0, 0, 1, 1}, yv[4];
    int64_t d = 4;
    nn_tensor x = wrap(xv, 1, &d), g = wrap(gv, 1, &d), b = wrap(bv, 1, &d), y = wrap(yv, 1, &d);
    nn_layernorm_params p;
    cr_assert_eq(nn_layernorm_params_default(&p), NN_OK);
    cr_expect_eq(p.normalized_rank, 1);
    cr_expect_eq(p.eps, 1e-5);
    p.eps = 0;
    cr_assert_eq(nn_layernorm_forward(ctx, &p, &x, &g, &b, &y, NULL), NN_OK, "%s",
                 nn_last_error()->message);
    double r5 = 1 / sqrt(5.0);
    double want[4] = {-3 * r5, -2 * r5, 1 + r5, 1 + 6 * r5};
    for (int i = 0; i < 4; i++)
        cr_expect_float_eq(yv[i], want[i], 1e-15, "y[%d] = %.17g, want %.17g", i, yv[i], want[i]);
    /* with the default eps: rstd = 1 / sqrt(1.25 + 1e-5) */
    p.eps = 1e-5;
    cr_assert_eq(nn_layernorm_forward(ctx, &p, &x, NULL, NULL, &y, NULL), NN_OK);
    cr_expect_float_eq(yv[0], -1.5 / sqrt(1.25 + 1e-5), 1e-15);
}

/* A row of equal values normalises to 0 (y = beta): the variance is 0, and eps keeps rstd finite,
 * 1 / sqrt(1e-5). xhat is 0, so dgamma is 0, dbeta is dy, and dx = rstd * (g - mean g) with
 * g = dy * gamma = (2, 6, 12), mean 20 / 3. */
Test(layernorm_ref, constant_row)
{
    double xv[3] = {7, 7, 7}, gv[3] = {2, 3, 4}, bv[3] = {0.5, -0.5, 0}, yv[3], dyv[3] = {1, 2, 3};
    double dxv[3], dgv[3], dbv[3];
    int64_t d = 3;
    nn_tensor x = wrap(xv, 1, &d), g = wrap(gv, 1, &d), b = wrap(bv, 1, &d), y = wrap(yv, 1, &d);
    nn_tensor dy = wrap(dyv, 1, &d), dx = wrap(dxv, 1, &d), dg = wrap(dgv, 1, &d),
              db = wrap(dbv, 1, &d);
    nn_layernorm_params p;
    nn_layernorm_params_default(&p);
    nn_layernorm_pullback *pb = NULL;
    cr_assert_eq(nn_layernorm_forward(ctx, &p, &x, &g, &b, &y, &pb), NN_OK);
    for (int i = 0; i < 3; i++)
        cr_expect_eq(yv[i], bv[i]);
    cr_assert_eq(nn_layernorm_backward(ctx, &pb, &dy, &dx, &dg, &db), NN_OK, "%s",
                 nn_last_error()->message);
    cr_expect_null(pb);
    for (int i = 0; i < 3; i++) {
        double want = (dyv[i] * gv[i] - 20.0 / 3) / sqrt(1e-5);
        cr_expect_float_eq(dxv[i], want, 1e-12, "dx[%d] = %.17g, want %.17g", i, dxv[i], want);
        cr_expect_eq(dgv[i], 0);
        cr_expect_eq(dbv[i], dyv[i]);
    }
}

/* The definition in float64, for x of m rows of d. */
static void direct(const double *x, const double *g, const double *b, const double *dy, int64_t m,
                   int64_t d, double eps, double *y, double *dx, double *dg, double *db)
{
    memset(dg, 0, (size_t)d * sizeof *dg);
    memset(db, 0, (size_t)d * sizeof *db);
    for (int64_t r = 0; r < m; r++) {
        const double *xr = x + r * d, *dyr = dy + r * d;
        double mean = 0, var = 0;
        for (int64_t i = 0; i < d; i++)
            mean += xr[i] / (double)d;
        for (int64_t i = 0; i < d; i++)
            var += (xr[i] - mean) * (xr[i] - mean) / (double)d;
        double rstd = 1 / sqrt(var + eps), a = 0, c = 0;
        for (int64_t i = 0; i < d; i++) {
            double xh = (xr[i] - mean) * rstd;
            y[r * d + i] = xh * g[i] + b[i];
            a += dyr[i] * g[i];
            c += dyr[i] * g[i] * xh;
            dg[i] += dyr[i] * xh;
            db[i] += dyr[i];
        }
        for (int64_t i = 0; i < d; i++) {
            double xh = (xr[i] - mean) * rstd;
            dx[r * d + i] = rstd * (dyr[i] * g[i] - a / (double)d - xh * c / (double)d);
        }
    }
}

/* x 3 x 2 x 5 normalised over its last two dims (k = 2): m = 3 rows of d = 10. */
Test(layernorm_ref, matches_direct_float64)
{
    enum { M = 3, D = 10 };
    double xv[M * D], gv[D], bv[D], dyv[M * D], yv[M * D], dxv[M * D], dgv[D], dbv[D];
    double wy[M * D], wdx[M * D], wdg[D], wdb[D];
    for (int i = 0; i < M * D; i++) {
        xv[i] = sin(0.7 * i) * 3 + 0.25 * i;
        dyv[i] = cos(1.3 * i);
    }
    for (int i = 0; i < D; i++) {
        gv[i] = 1 + 0.1 * i;
        bv[i] = 0.05 * i - 0.2;
    }
    int64_t xd[3] = {3, 2, 5};
    nn_tensor x = wrap(xv, 3, xd), y = wrap(yv, 3, xd), dy = wrap(dyv, 3, xd),
              dx = wrap(dxv, 3, xd);
    nn_tensor g = wrap(gv, 2, xd + 1), b = wrap(bv, 2, xd + 1), dg = wrap(dgv, 2, xd + 1),
              db = wrap(dbv, 2, xd + 1);
    nn_layernorm_params p;
    nn_layernorm_params_default(&p);
    p.normalized_rank = 2;
    p.eps = 1e-3;
    nn_layernorm_pullback *pb = NULL;
    cr_assert_eq(nn_layernorm_forward(ctx, &p, &x, &g, &b, &y, &pb), NN_OK, "%s",
                 nn_last_error()->message);
    cr_assert_eq(nn_layernorm_backward(ctx, &pb, &dy, &dx, &dg, &db), NN_OK, "%s",
                 nn_last_error()->message);
    direct(xv, gv, bv, dyv, M, D, 1e-3, wy, wdx, wdg, wdb);
    for (int i = 0; i < M * D; i++) {
        cr_expect_float_eq(yv[i], wy[i], 1e-13, "y[%d]", i);
        cr_expect_float_eq(dxv[i], wdx[i], 1e-13, "dx[%d]", i);
    }
    for (int i = 0; i < D; i++) {
        cr_expect_float_eq(dgv[i], wdg[i], 1e-13, "dgamma[%d]", i);
        cr_expect_float_eq(dbv[i], wdb[i], 1e-13, "dbeta[%d]", i);
    }
}

/* Accumulation adds to each gradient its bit names; a kept pullback serves a second call. */
Test(layernorm_ref, accumulate_and_keep)
{
    double xv[6] = {1, -2, 0.5, 3, 3.5, -1}, gv[3] = {1, 2, 3}, bv[3] = {0, 1, 0}, yv[6];
    double dyv[6] = {0.5, -1, 2, 1, 0, -0.5}, dx1[6], dg1[3], db1[3];
    double dx2[6] = {1, 1, 1, 1, 1, 1}, dg2[3] = {2, 2, 2}, db2[3] = {-1, -1, -1};
    int64_t xd[2] = {2, 3};
    nn_tensor x = wrap(xv, 2, xd), y = wrap(yv, 2, xd), dy = wrap(dyv, 2, xd);
    nn_tensor g = wrap(gv, 1, xd + 1), b = wrap(bv, 1, xd + 1);
    nn_tensor tdx1 = wrap(dx1, 2, xd), tdg1 = wrap(dg1, 1, xd + 1), tdb1 = wrap(db1, 1, xd + 1);
    nn_tensor tdx2 = wrap(dx2, 2, xd), tdg2 = wrap(dg2, 1, xd + 1), tdb2 = wrap(db2, 1, xd + 1);
    nn_layernorm_params p;
    nn_layernorm_params_default(&p);
    nn_layernorm_pullback *pb = NULL;
    cr_assert_eq(nn_layernorm_forward(ctx, &p, &x, &g, &b, &y, &pb), NN_OK);
    nn_backward_options keep = {.keep = 1};
    cr_assert_eq(nn_layernorm_backward_ex(ctx, &pb, &keep, &dy, &tdx1, &tdg1, &tdb1), NN_OK);
    cr_assert_not_null(pb);
    nn_backward_options acc = {.accumulate =
                                   NN_ACCUMULATE_DX | NN_ACCUMULATE_DW | NN_ACCUMULATE_DB};
    cr_assert_eq(nn_layernorm_backward_ex(ctx, &pb, &acc, &dy, &tdx2, &tdg2, &tdb2), NN_OK, "%s",
                 nn_last_error()->message);
    cr_expect_null(pb);
    for (int i = 0; i < 6; i++)
        cr_expect_float_eq(dx2[i], dx1[i] + 1, 1e-14, "dx[%d]", i);
    for (int i = 0; i < 3; i++) {
        cr_expect_float_eq(dg2[i], dg1[i] + 2, 1e-14, "dgamma[%d]", i);
        cr_expect_float_eq(db2[i], db1[i] - 1, 1e-14, "dbeta[%d]", i);
    }
    /* dbeta is the column sum of dy */
    for (int i = 0; i < 3; i++)
        cr_expect_eq(db1[i], dyv[i] + dyv[3 + i]);
}

/* Each gradient is optional: dgamma alone equals dgamma of the full call; f32 and f16 run. */
Test(layernorm_ref, optional_gradients_and_dtypes)
{
    nn_dtype dts[] = {NN_DTYPE_F32, NN_DTYPE_F16, NN_DTYPE_BF16, NN_DTYPE_F64};
    for (int k = 0; k < 4; k++) {
        int64_t xd[2] = {4, 8};
        nn_tensor x, y, dy, dg, g;
        cr_assert_eq(nn_tensor_empty(ctx, dts[k], 2, xd, &x), NN_OK);
        cr_assert_eq(nn_tensor_empty(ctx, dts[k], 2, xd, &y), NN_OK);
        cr_assert_eq(nn_tensor_empty(ctx, dts[k], 2, xd, &dy), NN_OK);
        cr_assert_eq(nn_tensor_empty(ctx, dts[k], 1, xd + 1, &g), NN_OK);
        cr_assert_eq(nn_tensor_empty(ctx, dts[k], 1, xd + 1, &dg), NN_OK);
        cr_assert_eq(nn_tensor_fill_ints(ctx, &x, -2, 2, 1), NN_OK);
        cr_assert_eq(nn_tensor_fill_ints(ctx, &dy, -2, 2, 2), NN_OK);
        cr_assert_eq(nn_tensor_fill_ints(ctx, &g, 1, 2, 3), NN_OK);
        nn_layernorm_params p;
        nn_layernorm_params_default(&p);
        nn_layernorm_pullback *pb = NULL;
        cr_assert_eq(nn_layernorm_forward(ctx, &p, &x, &g, NULL, &y, &pb), NN_OK, "%s",
                     nn_last_error()->message);
        cr_assert_eq(nn_layernorm_backward(ctx, &pb, &dy, NULL, &dg, NULL), NN_OK, "%s",
                     nn_last_error()->message);
        nn_tensor *all[] = {&x, &y, &dy, &dg, &g};
        for (int i = 0; i < 5; i++)
            nn_tensor_free(ctx, all[i]);
    }
}

/* Backward options on the reference backend (include/nnprim/backward.h): accumulate chosen at
 * backward time, kept pullbacks, the old calls as the forward's flags, the stateless pooling
 * backward (against the pullback one and against central finite differences), and the checks
 * of the options. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backward_check.h"

#define OK(call) cr_assert_eq((call), NN_OK, "%s: %s", #call, nn_last_error()->message)

#define EXPECT_FAIL(call, status, text)                                                            \
    do {                                                                                           \
        cr_expect_eq((call), (status), "%s", #call);                                               \
        cr_expect(strstr(nn_last_error()->message, (text)), "%s\n  wanted: %s",                    \
                  nn_last_error()->message, (text));                                               \
    } while (0)

static void run(void (*family)(nn_ctx *, nn_ctx *, struct bc_out *))
{
    nn_ctx *r = bc_ctx(NN_BACKEND_REF);
    struct bc_out o = {0};
    family(r, r, &o);
    cr_expect_gt(o.n, 0);
    bc_out_free(&o);
    nn_ctx_destroy(r);
}

static void pool_max(nn_ctx *c, nn_ctx *h, struct bc_out *o)
{
    bc_pool(c, h, NN_POOL_MAX, o);
}
static void pool_mean(nn_ctx *c, nn_ctx *h, struct bc_out *o)
{
    bc_pool(c, h, NN_POOL_MEAN_INCLUDE_PAD, o);
}
static void pool_mean_ex(nn_ctx *c, nn_ctx *h, struct bc_out *o)
{
    bc_pool(c, h, NN_POOL_MEAN_EXCLUDE_PAD, o);
}
static void softmax_plain(nn_ctx *c, nn_ctx *h, struct bc_out *o)
{
    bc_softmax(c, h, NN_SOFTMAX_MODE_SOFTMAX, o);
}
static void softmax_log(nn_ctx *c, nn_ctx *h, struct bc_out *o)
{
    bc_softmax(c, h, NN_SOFTMAX_MODE_LOG, o);
}

Test(backward, conv_accumulate_keep_and_the_old_call)
{
    run(bc_conv);
}
Test(backward, linear_accumulate_keep_and_the_old_call)
{
    run(bc_linear);
}
Test(backward, pool_accumulate_keep_and_stateless)
{
    run(pool_max);
    run(pool_mean);
    run(pool_mean_ex);
}
Test(backward, softmax_accumulate_and_keep)
{
    run(softmax_plain);
    run(softmax_log);
}
Test(backward, cross_entropy_accumulate_and_keep)
{
    run(bc_xent);
}
Test(backward, layernorm_accumulate_and_keep)
{
    run(bc_layernorm);
}
Test(backward, rnn_accumulates_dw_and_refuses_keep)
{
    nn_ctx *r = bc_ctx(NN_BACKEND_REF);
    bc_rnn(r, r);
    nn_ctx_destroy(r);
}

/* ---------------------------------------------------------------------------------------------
 * The stateless pooling backward against central differences of L(x) = sum dy * pool(x), in f64
 */

static nn_tensor f64(nn_ctx *r, int rank, const int64_t *dims)
{
    nn_tensor t;
    OK(nn_tensor_empty(r, NN_DTYPE_F64, rank, dims, &t));
    return t;
}

static double loss(nn_ctx *r, const nn_pool_params *p, const nn_tensor *x, nn_tensor *y,
                   const nn_tensor *dy)
{
    OK(nn_pool_forward(r, p, x, y, NULL));
    double s = 0;
    for (int64_t i = 0; i < nn_tensor_numel(y); i++)
        s += ((double *)y->data)[i] * ((const double *)dy->data)[i];
    return s;
}

Test(backward, pool_stateless_matches_finite_differences)
{
    nn_ctx *r = bc_ctx(NN_BACKEND_REF);
    for (int mode = 0; mode < 3; mode++) {
        nn_pool_params p;
        memset(&p, 0, sizeof p);
        p.spatial_rank = 2;
        p.mode = (nn_pool_mode)mode;
        p.window[0] = 3, p.window[1] = 2;
        p.stride[0] = 2, p.stride[1] = 1;
        p.pad_lo[0] = 1, p.pad_hi[0] = 2;
        const int64_t xd[] = {1, 2, 5, 5};
        int64_t yd[4];
        OK(nn_pool_output_shape(&p, 4, xd, yd));
        nn_tensor x = f64(r, 4, xd), y = f64(r, 4, yd), dy = f64(r, 4, yd), dx = f64(r, 4, xd);
        int64_t n = nn_tensor_numel(&x);
        double *xv = x.data;
        for (int64_t i = 0; i < n; i++) /* distinct, 1 apart: no tie moves under h */
            xv[i] = (double)((i * 37) % n) - 20;
        OK(nn_tensor_fill_uniform(r, &dy, -1, 1, 7));
        OK(nn_pool_forward(r, &p, &x, &y, NULL));
        OK(nn_pool_backward_stateless(r, &p, &x, &y, &dy, &dx, 0));
        const double h = 1e-3;
        for (int64_t i = 0; i < n; i++) {
            double keep = xv[i];
            xv[i] = keep + h;
            double lp = loss(r, &p, &x, &y, &dy);
            xv[i] = keep - h;
            double lm = loss(r, &p, &x, &y, &dy);
            xv[i] = keep;
            double fd = (lp - lm) / (2 * h), got = ((double *)dx.data)[i];
            cr_expect(fabs(got - fd) <= 1e-8 * (1 + fabs(fd)), "mode %d: dx[%lld] %.12g, fd %.12g",
                      mode, (long long)i, got, fd);
        }
        nn_tensor *ts[] = {&x, &y, &dy, &dx};
        for (int i = 0; i < 4; i++)
            OK(nn_tensor_free(r, ts[i]));
    }
    nn_ctx_destroy(r);
}

/* ---------------------------------------------------------------------------------------------
 * The options are checked after the pullback, and a refused call leaves it usable
 */

Test(backward, bad_options_leave_the_pullback_usable)
{
    nn_ctx *r = bc_ctx(NN_BACKEND_REF);
    nn_pool_params p;
    memset(&p, 0, sizeof p);
    p.spatial_rank = 1;
    p.window[0] = p.stride[0] = 2;
    nn_tensor x, y, dy, dx;
    OK(nn_tensor_empty(r, NN_DTYPE_F32, 3, (int64_t[]){1, 1, 4}, &x));
    OK(nn_tensor_empty(r, NN_DTYPE_F32, 3, (int64_t[]){1, 1, 2}, &y));
    OK(nn_tensor_empty(r, NN_DTYPE_F32, 3, (int64_t[]){1, 1, 2}, &dy));
    OK(nn_tensor_empty(r, NN_DTYPE_F32, 3, (int64_t[]){1, 1, 4}, &dx));
    OK(nn_tensor_fill_ints(r, &x, -3, 3, 1));
    OK(nn_tensor_fill_ints(r, &dy, -3, 3, 2));
    nn_pool_pullback *pb;
    OK(nn_pool_forward(r, &p, &x, &y, &pb));

    nn_backward_options o = {0, 0, {0}};
    o.reserved[2] = 5;
    EXPECT_FAIL(nn_pool_backward_ex(r, &pb, &o, &dy, &dx), NN_E_INVALID_ARG,
                "nn_pool_backward_ex: opts.reserved[2] must be 0, got 5");
    o.reserved[2] = 0;
    o.keep = 2;
    EXPECT_FAIL(nn_pool_backward_ex(r, &pb, &o, &dy, &dx), NN_E_INVALID_ARG,
                "nn_pool_backward_ex: opts.keep must be 0 or 1, got 2");
    o.keep = 0;
    o.accumulate = 0x9;
    EXPECT_FAIL(nn_pool_backward_ex(r, &pb, &o, &dy, &dx), NN_E_INVALID_ARG,
                "opts.accumulate must hold only NN_ACCUMULATE_* bits (0x7), got 0x9");
    o.accumulate = NN_ACCUMULATE_DX | NN_ACCUMULATE_DW;
    EXPECT_FAIL(nn_pool_backward_ex(r, &pb, &o, &dy, &dx), NN_E_UNSUPPORTED,
                "asks for NN_ACCUMULATE_DW, but a pool backward accumulates only the bits 0x1");
    EXPECT_FAIL(nn_pool_backward_stateless(r, &p, &x, &y, &dy, &dx, NN_ACCUMULATE_DB),
                NN_E_UNSUPPORTED, "nn_pool_backward_stateless: accumulate = 0x4 asks for");
    cr_assert_not_null(pb);
    OK(nn_pool_backward_ex(r, &pb, NULL, &dy, &dx));
    cr_expect_null(pb);
    /* a consumed pullback is refused before its options are read */
    EXPECT_FAIL(nn_pool_backward_ex(r, &pb, &o, &dy, &dx), NN_E_PULLBACK,
                "nn_pool_backward_ex: *pullback is NULL");
    nn_tensor *ts[] = {&x, &y, &dy, &dx};
    for (int i = 0; i < 4; i++)
        OK(nn_tensor_free(r, ts[i]));
    nn_ctx_destroy(r);
}

Test(backward, stateless_pool_checks_every_argument)
{
    nn_ctx *r = bc_ctx(NN_BACKEND_REF);
    nn_pool_params p;
    memset(&p, 0, sizeof p);
    p.spatial_rank = 2;
    p.window[0] = p.window[1] = p.stride[0] = p.stride[1] = 2;
    nn_tensor x, y, dy, dx, y3;
    OK(nn_tensor_empty(r, NN_DTYPE_F32, 4, (int64_t[]){1, 2, 4, 4}, &x));
    OK(nn_tensor_empty(r, NN_DTYPE_F32, 4, (int64_t[]){1, 2, 2, 2}, &y));
    OK(nn_tensor_empty(r, NN_DTYPE_F32, 4, (int64_t[]){1, 2, 2, 2}, &dy));
    OK(nn_tensor_empty(r, NN_DTYPE_F32, 4, (int64_t[]){1, 2, 4, 4}, &dx));
    OK(nn_tensor_empty(r, NN_DTYPE_F32, 4, (int64_t[]){1, 2, 3, 2}, &y3));
    EXPECT_FAIL(nn_pool_backward_stateless(NULL, &p, &x, &y, &dy, &dx, 0), NN_E_INVALID_ARG,
                "nn_pool_backward_stateless: ctx must not be NULL");
    EXPECT_FAIL(nn_pool_backward_stateless(r, NULL, &x, &y, &dy, &dx, 0), NN_E_INVALID_ARG,
                "nn_pool_backward_stateless: params must not be NULL");
    EXPECT_FAIL(nn_pool_backward_stateless(r, &p, NULL, &y, &dy, &dx, 0), NN_E_INVALID_ARG,
                "nn_pool_backward_stateless: x");
    EXPECT_FAIL(nn_pool_backward_stateless(r, &p, &x, NULL, &dy, &dx, 0), NN_E_INVALID_ARG,
                "nn_pool_backward_stateless: y");
    EXPECT_FAIL(nn_pool_backward_stateless(r, &p, &x, &y, NULL, &dx, 0), NN_E_INVALID_ARG,
                "nn_pool_backward_stateless: dy");
    EXPECT_FAIL(nn_pool_backward_stateless(r, &p, &x, &y, &dy, NULL, 0), NN_E_INVALID_ARG,
                "nn_pool_backward_stateless: dx");
    EXPECT_FAIL(nn_pool_backward_stateless(r, &p, &x, &y3, &dy, &dx, 0), NN_E_SHAPE,
                "nn_pool_backward_stateless: y dims must be 1x2x2x2, got 1x2x3x2");
    EXPECT_FAIL(nn_pool_backward_stateless(r, &p, &x, &y, &y3, &dx, 0), NN_E_SHAPE,
                "nn_pool_backward_stateless: dy dims");
    EXPECT_FAIL(nn_pool_backward_stateless(r, &p, &x, &y, &dy, &x, 0), NN_E_INVALID_ARG,
                "nn_pool_backward_stateless: dx");
    nn_pool_params bad = p;
    bad.window[1] = 0;
    EXPECT_FAIL(nn_pool_backward_stateless(r, &bad, &x, &y, &dy, &dx, 0), NN_E_INVALID_ARG,
                "params.window[1] must be >= 1");
    bad = p;
    bad.reserved[1] = 3;
    EXPECT_FAIL(nn_pool_backward_stateless(r, &bad, &x, &y, &dy, &dx, 0), NN_E_INVALID_ARG,
                "params.reserved[1]");
    EXPECT_FAIL(nn_pool_backward_stateless(r, &p, &x, &y, &dy, &dx, 16), NN_E_INVALID_ARG,
                "accumulate must hold only NN_ACCUMULATE_* bits");
    nn_tensor *ts[] = {&x, &y, &dy, &dx, &y3};
    for (int i = 0; i < 5; i++)
        OK(nn_tensor_free(r, ts[i]));
    nn_ctx_destroy(r);
}

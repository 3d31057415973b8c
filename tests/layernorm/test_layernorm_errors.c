/* The layer-norm family refuses bad input with a status and a message naming the called
 * function, the argument, the expected and the actual value; pullbacks are consumed once. */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "nnprim/nnprim.h"

static nn_ctx *ctx;
static nn_tensor x, y, dy, dx, g, b, dg, db, small;
static nn_layernorm_params p;

static nn_tensor make(nn_dtype dt, int rank, const int64_t *dims)
{
    nn_tensor t;
    cr_assert_eq(nn_tensor_empty(ctx, dt, rank, dims, &t), NN_OK);
    cr_assert_eq(nn_tensor_fill_ints(ctx, &t, -2, 2, 9), NN_OK);
    return t;
}

static void setup(void)
{
    nn_settings s;
    nn_settings_from_env(&s);
    s.backend = NN_BACKEND_REF;
    cr_assert_eq(nn_ctx_create(&ctx, &s), NN_OK);
    nn_layernorm_params_default(&p);
    int64_t xd[2] = {4, 3};
    x = make(NN_DTYPE_F32, 2, xd);
    y = make(NN_DTYPE_F32, 2, xd);
    dy = make(NN_DTYPE_F32, 2, xd);
    dx = make(NN_DTYPE_F32, 2, xd);
    g = make(NN_DTYPE_F32, 1, xd + 1);
    b = make(NN_DTYPE_F32, 1, xd + 1);
    dg = make(NN_DTYPE_F32, 1, xd + 1);
    db = make(NN_DTYPE_F32, 1, xd + 1);
    small = make(NN_DTYPE_F32, 1, (int64_t[]){2});
}

static void teardown(void)
{
    nn_tensor *all[] = {&x, &y, &dy, &dx, &g, &b, &dg, &db, &small};
    for (int i = 0; i < 9; i++)
        nn_tensor_free(ctx, all[i]);
    nn_ctx_destroy(ctx);
}

TestSuite(layernorm_errors, .init = setup, .fini = teardown);

#define EXPECT_FAIL(call, want, ...)                                                               \
    do {                                                                                           \
        nn_status st_ = (call);                                                                    \
        cr_expect_eq(st_, want, "%s: got %s", #call, nn_status_name(st_));                         \
        const char *frags_[] = {__VA_ARGS__};                                                      \
        for (size_t k_ = 0; k_ < sizeof frags_ / sizeof frags_[0]; k_++)                           \
            cr_expect(strstr(nn_last_error()->message, frags_[k_]), "message '%s' lacks '%s'",     \
                      nn_last_error()->message, frags_[k_]);                                       \
    } while (0)

Test(layernorm_errors, params_and_nulls)
{
    const char *fw = "nn_layernorm_forward";
    EXPECT_FAIL(nn_layernorm_params_default(NULL), NN_E_INVALID_ARG, "nn_layernorm_params_default");
    EXPECT_FAIL(nn_layernorm_forward(NULL, &p, &x, &g, &b, &y, NULL), NN_E_INVALID_ARG, fw, "ctx");
    EXPECT_FAIL(nn_layernorm_forward(ctx, NULL, &x, &g, &b, &y, NULL), NN_E_INVALID_ARG, fw, "p ");
    EXPECT_FAIL(nn_layernorm_forward(ctx, &p, NULL, &g, &b, &y, NULL), NN_E_INVALID_ARG, fw, "x ");
    EXPECT_FAIL(nn_layernorm_forward(ctx, &p, &x, &g, &b, NULL, NULL), NN_E_INVALID_ARG, fw, "y ");
    nn_layernorm_params q = p;
    q.normalized_rank = 0;
    EXPECT_FAIL(nn_layernorm_forward(ctx, &q, &x, &g, &b, &y, NULL), NN_E_INVALID_ARG, fw,
                "p.normalized_rank must be >= 1", "got 0");
    q = p;
    q.normalized_rank = 3;
    EXPECT_FAIL(nn_layernorm_forward(ctx, &q, &x, &g, &b, &y, NULL), NN_E_SHAPE, fw,
                "p.normalized_rank must be <= x.rank (2), got 3");
    q = p;
    q.eps = -1;
    EXPECT_FAIL(nn_layernorm_forward(ctx, &q, &x, &g, &b, &y, NULL), NN_E_INVALID_ARG, fw, "p.eps",
                "got -1");
    q.eps = NAN;
    EXPECT_FAIL(nn_layernorm_forward(ctx, &q, &x, &g, &b, &y, NULL), NN_E_INVALID_ARG, fw, "p.eps");
    q = p;
    q.reserved[2] = 1;
    EXPECT_FAIL(nn_layernorm_forward(ctx, &q, &x, &g, &b, &y, NULL), NN_E_INVALID_ARG, fw,
                "p.reserved[2]");
}

Test(layernorm_errors, shapes_dtypes_overlaps)
{
    const char *fw = "nn_layernorm_forward";
    EXPECT_FAIL(nn_layernorm_forward(ctx, &p, &x, &small, &b, &y, NULL), NN_E_SHAPE, fw,
                "gamma.dims[0] must be 3", "got 2");
    EXPECT_FAIL(nn_layernorm_forward(ctx, &p, &x, &g, &small, &y, NULL), NN_E_SHAPE, fw,
                "beta.dims[0] must be 3");
    EXPECT_FAIL(nn_layernorm_forward(ctx, &p, &x, &g, &b, &g, NULL), NN_E_SHAPE, fw,
                "y.rank must be 2", "got 1");
    EXPECT_FAIL(nn_layernorm_forward(ctx, &p, &x, &x, &b, &y, NULL), NN_E_SHAPE, fw, "gamma.rank");
    nn_tensor g64 = make(NN_DTYPE_F64, 1, (int64_t[]){3});
    EXPECT_FAIL(nn_layernorm_forward(ctx, &p, &x, &g64, &b, &y, NULL), NN_E_DTYPE, fw,
                "gamma.dtype must equal x.dtype (f32), got f64");
    nn_tensor_free(ctx, &g64);
    EXPECT_FAIL(nn_layernorm_forward(ctx, &p, &x, &g, &b, &x, NULL), NN_E_INVALID_ARG, fw, "y",
                "x");
    /* a transposed view is not packed */
    nn_tensor t = y;
    t.dims[0] = 3;
    t.dims[1] = 4;
    t.strides[0] = 1;
    t.strides[1] = 3;
    nn_tensor xt = x;
    xt.dims[0] = 3;
    xt.dims[1] = 4;
    xt.strides[0] = 4;
    nn_layernorm_params q = p;
    q.normalized_rank = 2;
    EXPECT_FAIL(nn_layernorm_forward(ctx, &q, &xt, NULL, NULL, &t, NULL), NN_E_UNSUPPORTED, fw,
                "y must be fully packed");
}

Test(layernorm_errors, backward_and_pullbacks)
{
    const char *bw = "nn_layernorm_backward";
    nn_layernorm_pullback *pb = NULL;
    EXPECT_FAIL(nn_layernorm_backward(ctx, &pb, &dy, &dx, NULL, NULL), NN_E_PULLBACK, bw);
    EXPECT_FAIL(nn_layernorm_backward(ctx, NULL, &dy, &dx, NULL, NULL), NN_E_PULLBACK, bw);
    cr_assert_eq(nn_layernorm_forward(ctx, &p, &x, &g, NULL, &y, &pb), NN_OK, "%s",
                 nn_last_error()->message);
    EXPECT_FAIL(nn_layernorm_backward(ctx, &pb, NULL, &dx, NULL, NULL), NN_E_INVALID_ARG, bw,
                "dy must not be NULL");
    EXPECT_FAIL(nn_layernorm_backward(ctx, &pb, &dy, &dx, &dg, &db), NN_E_INVALID_ARG, bw,
                "dbeta must be NULL: the forward call had no beta");
    EXPECT_FAIL(nn_layernorm_backward(ctx, &pb, &dy, &dx, &small, NULL), NN_E_SHAPE, bw,
                "dgamma.dims[0] must be 3");
    EXPECT_FAIL(nn_layernorm_backward(ctx, &pb, &dy, &dy, NULL, NULL), NN_E_INVALID_ARG, bw, "dx",
                "dy");
    EXPECT_FAIL(nn_layernorm_backward(ctx, &pb, &dy, &x, NULL, NULL), NN_E_INVALID_ARG, bw,
                "x (saved by forward)");
    EXPECT_FAIL(nn_layernorm_backward(ctx, &pb, &dy, &dx, &g, NULL), NN_E_INVALID_ARG, bw,
                "gamma (saved by forward)");
    nn_backward_options o = {.accumulate = 8};
    EXPECT_FAIL(nn_layernorm_backward_ex(ctx, &pb, &o, &dy, &dx, NULL, NULL), NN_E_INVALID_ARG,
                "nn_layernorm_backward_ex", "opts.accumulate");
    cr_assert_not_null(pb, "failures leave the pullback with the caller");
    cr_assert_eq(nn_layernorm_backward(ctx, &pb, &dy, &dx, &dg, NULL), NN_OK, "%s",
                 nn_last_error()->message);
    cr_expect_null(pb);
    EXPECT_FAIL(nn_layernorm_backward(ctx, &pb, &dy, &dx, NULL, NULL), NN_E_PULLBACK, bw);
    cr_expect_eq(nn_layernorm_pullback_free(&pb), NN_OK);
    cr_expect_eq(nn_layernorm_pullback_free(NULL), NN_OK);
    /* another family's pullback */
    nn_softmax_params sp;
    nn_softmax_params_default(&sp);
    nn_softmax_pullback *spb = NULL;
    cr_assert_eq(nn_softmax_forward(ctx, &sp, &x, &y, &spb), NN_OK);
    nn_layernorm_pullback *other = (nn_layernorm_pullback *)spb;
    EXPECT_FAIL(nn_layernorm_backward(ctx, &other, &dy, &dx, NULL, NULL), NN_E_PULLBACK, bw);
    EXPECT_FAIL(nn_layernorm_pullback_free(&other), NN_E_PULLBACK, "nn_layernorm_pullback_free");
    cr_expect_eq(nn_softmax_pullback_free(&spb), NN_OK);
}

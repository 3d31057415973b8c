/* The softmax family refuses bad input with a status and a message naming the called function,
 * the argument, the expected and the actual value; pullbacks are consumed once. */
#include <criterion/criterion.h>
#include <string.h>

#include "nnprim/nnprim.h"

static nn_ctx *ctx;
static nn_tensor x, y, dy, dx, loss, dloss;
static nn_softmax_params p;
static int64_t t64[4] = {0, 1, 2, 0};
static nn_class_targets tg;

static nn_tensor make(int rank, const int64_t *dims)
{
    nn_tensor t;
    cr_assert_eq(nn_tensor_empty(ctx, NN_DTYPE_F32, rank, dims, &t), NN_OK);
    cr_assert_eq(nn_tensor_fill_ints(ctx, &t, -2, 2, 9), NN_OK);
    return t;
}

static void setup(void)
{
    nn_settings s;
    nn_settings_from_env(&s);
    s.backend = NN_BACKEND_REF;
    cr_assert_eq(nn_ctx_create(&ctx, &s), NN_OK);
    nn_softmax_params_default(&p);
    x = make(2, (int64_t[]){4, 3});
    y = make(2, (int64_t[]){4, 3});
    dy = make(2, (int64_t[]){4, 3});
    dx = make(2, (int64_t[]){4, 3});
    loss = make(1, (int64_t[]){4});
    dloss = make(1, (int64_t[]){4});
    tg = (nn_class_targets){t64, NN_INDEX_I64, {0}};
}

static void teardown(void)
{
    nn_tensor *all[] = {&x, &y, &dy, &dx, &loss, &dloss};
    for (int i = 0; i < 6; i++)
        nn_tensor_free(ctx, all[i]);
    nn_ctx_destroy(ctx);
}

TestSuite(softmax_errors, .init = setup, .fini = teardown);

#define EXPECT_FAIL(call, want, ...)                                                               \
    do {                                                                                           \
        nn_status st_ = (call);                                                                    \
        cr_expect_eq(st_, want, "%s: got %s", #call, nn_status_name(st_));                         \
        const char *frags_[] = {__VA_ARGS__};                                                      \
        for (size_t k_ = 0; k_ < sizeof frags_ / sizeof frags_[0]; k_++)                           \
            cr_expect(strstr(nn_last_error()->message, frags_[k_]), "message '%s' lacks '%s'",     \
                      nn_last_error()->message, frags_[k_]);                                       \
    } while (0)

Test(softmax_errors, params_and_nulls)
{
    EXPECT_FAIL(nn_softmax_params_default(NULL), NN_E_INVALID_ARG, "nn_softmax_params_default");
    EXPECT_FAIL(nn_softmax_forward(NULL, &p, &x, &y, NULL), NN_E_INVALID_ARG,
                "nn_softmax_forward: ctx must not be NULL");
    EXPECT_FAIL(nn_softmax_forward(ctx, NULL, &x, &y, NULL), NN_E_INVALID_ARG,
                "nn_softmax_forward: p (the parameters)");
    nn_softmax_params q = p;
    q.mode = (nn_softmax_mode)5;
    EXPECT_FAIL(nn_softmax_forward(ctx, &q, &x, &y, NULL), NN_E_INVALID_ARG, "p.mode", "got 5");
    q = p;
    q.reserved[0] = 1;
    EXPECT_FAIL(nn_softmax_forward(ctx, &q, &x, &y, NULL), NN_E_INVALID_ARG,
                "p.reserved[0] must be 0, got 1");
    EXPECT_FAIL(nn_softmax_forward(ctx, &p, NULL, &y, NULL), NN_E_INVALID_ARG, "x must not be");
    EXPECT_FAIL(nn_softmax_forward(ctx, &p, &x, NULL, NULL), NN_E_INVALID_ARG, "y must not be");
}

Test(softmax_errors, shapes_dtypes_layout_overlap)
{
    nn_tensor v = x;
    v.rank = 1;
    v.dims[0] = 12;
    v.strides[0] = 1;
    EXPECT_FAIL(nn_softmax_forward(ctx, &p, &v, &y, NULL), NN_E_SHAPE,
                "nn_softmax_forward: x.rank must be >= 2", "got 1");
    v = y;
    v.dims[1] = 2;
    EXPECT_FAIL(nn_softmax_forward(ctx, &p, &x, &v, NULL), NN_E_SHAPE, "y.dims[1] must be 3",
                "got 2");
    nn_tensor d;
    cr_assert_eq(nn_tensor_empty(ctx, NN_DTYPE_F16, 2, (int64_t[]){4, 3}, &d), NN_OK);
    EXPECT_FAIL(nn_softmax_forward(ctx, &p, &x, &d, NULL), NN_E_DTYPE,
                "y.dtype must equal x.dtype (f32), got f16");
    nn_tensor_free(ctx, &d);
    v = y; /* transposed */
    v.strides[0] = 1;
    v.strides[1] = 4;
    EXPECT_FAIL(nn_softmax_forward(ctx, &p, &x, &v, NULL), NN_E_UNSUPPORTED,
                "y must be fully packed");
    EXPECT_FAIL(nn_softmax_forward(ctx, &p, &x, &x, NULL), NN_E_INVALID_ARG, "nn_softmax_forward",
                "y", "x");
}

Test(softmax_errors, backward_and_pullbacks)
{
    nn_softmax_pullback *pb = NULL;
    EXPECT_FAIL(nn_softmax_backward(ctx, NULL, &dy, &dx), NN_E_PULLBACK,
                "nn_softmax_backward: pullback must not be NULL");
    EXPECT_FAIL(nn_softmax_backward(ctx, &pb, &dy, &dx), NN_E_PULLBACK, "nn_softmax_backward");
    cr_assert_eq(nn_softmax_forward(ctx, &p, &x, &y, &pb), NN_OK);
    nn_tensor v = dx;
    v.dims[0] = 3;
    EXPECT_FAIL(nn_softmax_backward(ctx, &pb, &dy, &v), NN_E_SHAPE, "dx.dims[0] must be 4");
    EXPECT_FAIL(nn_softmax_backward(ctx, &pb, &dy, &y), NN_E_INVALID_ARG, "nn_softmax_backward",
                "dx", "y (saved by forward)");
    EXPECT_FAIL(nn_softmax_backward(ctx, &pb, &dy, &dy), NN_E_INVALID_ARG, "dx", "dy");
    nn_softmax_pullback *copy = pb;
    cr_assert_eq(nn_softmax_backward(ctx, &pb, &dy, &dx), NN_OK);
    cr_expect_null(pb);
    EXPECT_FAIL(nn_softmax_backward(ctx, &copy, &dy, &dx), NN_E_PULLBACK, "nn_softmax_backward");
    EXPECT_FAIL(nn_softmax_pullback_free(&copy), NN_E_PULLBACK, "nn_softmax_pullback_free");

    /* A cross-entropy pullback is another family's. */
    nn_softmax_cross_entropy_pullback *xp = NULL;
    cr_assert_eq(nn_softmax_cross_entropy_forward(ctx, &x, &tg, &loss, &xp), NN_OK);
    nn_softmax_pullback *foreign = (nn_softmax_pullback *)xp;
    EXPECT_FAIL(nn_softmax_backward(ctx, &foreign, &dy, &dx), NN_E_PULLBACK, "nn_softmax_backward",
                "softmax_cross_entropy");
    cr_expect_eq(nn_softmax_cross_entropy_pullback_free(&xp), NN_OK);
}

Test(softmax_errors, cross_entropy_targets)
{
    EXPECT_FAIL(nn_softmax_cross_entropy_forward(ctx, &x, NULL, &loss, NULL), NN_E_INVALID_ARG,
                "nn_softmax_cross_entropy_forward: targets must not be NULL");
    nn_class_targets t = tg;
    t.data = NULL;
    EXPECT_FAIL(nn_softmax_cross_entropy_forward(ctx, &x, &t, &loss, NULL), NN_E_INVALID_ARG,
                "targets.data must not be NULL");
    t = tg;
    t.type = (nn_index_type)3;
    EXPECT_FAIL(nn_softmax_cross_entropy_forward(ctx, &x, &t, &loss, NULL), NN_E_INVALID_ARG,
                "targets.type must be", "got 3");
    t = tg;
    t.reserved[1] = 2;
    EXPECT_FAIL(nn_softmax_cross_entropy_forward(ctx, &x, &t, &loss, NULL), NN_E_INVALID_ARG,
                "targets.reserved[1] must be 0, got 2");
    t = tg;
    t.data = (const char *)t64 + 4;
    EXPECT_FAIL(nn_softmax_cross_entropy_forward(ctx, &x, &t, &loss, NULL), NN_E_INVALID_ARG,
                "must be aligned to 8 bytes for int64");
    int64_t bad[4] = {0, 1, 3, 0};
    t = tg;
    t.data = bad;
    float before = ((float *)loss.data)[0];
    nn_softmax_cross_entropy_pullback *xp = (nn_softmax_cross_entropy_pullback *)&t;
    EXPECT_FAIL(nn_softmax_cross_entropy_forward(ctx, &x, &t, &loss, &xp), NN_E_INVALID_ARG,
                "targets[2] (sample 2, position 0) must be a class in [0, C - 1] = [0, 2], got 3");
    cr_expect_null(xp);
    cr_expect_eq(((float *)loss.data)[0], before, "nothing written");
    int32_t neg[4] = {0, -1, 0, 0};
    t.data = neg;
    t.type = NN_INDEX_I32;
    EXPECT_FAIL(nn_softmax_cross_entropy_forward(ctx, &x, &t, &loss, NULL), NN_E_INVALID_ARG,
                "targets[1]", "got -1");
}

Test(softmax_errors, cross_entropy_shapes_and_pullbacks)
{
    nn_tensor v = loss;
    v.dims[0] = 3;
    EXPECT_FAIL(nn_softmax_cross_entropy_forward(ctx, &x, &tg, &v, NULL), NN_E_SHAPE,
                "loss.dims[0] must be 4 (x's dims without C), got 3");
    EXPECT_FAIL(nn_softmax_cross_entropy_forward(ctx, &x, &tg, &x, NULL), NN_E_SHAPE,
                "loss.rank must be 1");
    nn_softmax_cross_entropy_pullback *pb = NULL;
    cr_assert_eq(nn_softmax_cross_entropy_forward(ctx, &x, &tg, &loss, &pb), NN_OK);
    EXPECT_FAIL(nn_softmax_cross_entropy_backward(ctx, &pb, &dy, &dx), NN_E_SHAPE,
                "nn_softmax_cross_entropy_backward: dloss.rank must be 1");
    EXPECT_FAIL(nn_softmax_cross_entropy_backward(ctx, &pb, &dloss, &x), NN_E_INVALID_ARG, "dx",
                "x (saved by forward)");
    cr_assert_eq(nn_softmax_cross_entropy_backward(ctx, &pb, &dloss, &dx), NN_OK);
    cr_expect_null(pb);
    EXPECT_FAIL(nn_softmax_cross_entropy_backward(ctx, &pb, &dloss, &dx), NN_E_PULLBACK,
                "nn_softmax_cross_entropy_backward");
}

/* The linear layer refuses bad input with a status and a message naming the called function,
 * the argument, the expected and the actual value; pullbacks are consumed once, by their own
 * context and family. */
#include <criterion/criterion.h>
#include <string.h>

#include "nnprim/nnprim.h"

static nn_ctx *ctx;
static nn_tensor x, w, b, y, dy, dx, dw, db;
static nn_linear_params p;

static nn_tensor make(int rank, const int64_t *dims)
{
    nn_tensor t;
    cr_assert_eq(nn_tensor_empty(ctx, NN_DTYPE_F32, rank, dims, &t), NN_OK, "%s",
                 nn_last_error()->message);
    cr_assert_eq(nn_tensor_fill_ints(ctx, &t, -2, 2, 7), NN_OK);
    return t;
}

static void setup(void)
{
    nn_settings s;
    nn_settings_from_env(&s);
    s.backend = NN_BACKEND_REF;
    cr_assert_eq(nn_ctx_create(&ctx, &s), NN_OK);
    nn_linear_params_default(&p);
    x = make(2, (int64_t[]){4, 3});
    w = make(2, (int64_t[]){5, 3});
    b = make(1, (int64_t[]){5});
    y = make(2, (int64_t[]){4, 5});
    dy = make(2, (int64_t[]){4, 5});
    dx = make(2, (int64_t[]){4, 3});
    dw = make(2, (int64_t[]){5, 3});
    db = make(1, (int64_t[]){5});
}

static void teardown(void)
{
    nn_tensor *all[] = {&x, &w, &b, &y, &dy, &dx, &dw, &db};
    for (int i = 0; i < 8; i++)
        nn_tensor_free(ctx, all[i]);
    nn_ctx_destroy(ctx);
}

TestSuite(linear_errors, .init = setup, .fini = teardown);

/* The call failed with want, its message holds each of the fragments. */
#define EXPECT_FAIL(call, want, ...)                                                               \
    do {                                                                                           \
        nn_status st_ = (call);                                                                    \
        cr_expect_eq(st_, want, "%s: got %s", #call, nn_status_name(st_));                         \
        const char *frags_[] = {__VA_ARGS__};                                                      \
        for (size_t k_ = 0; k_ < sizeof frags_ / sizeof frags_[0]; k_++)                           \
            cr_expect(strstr(nn_last_error()->message, frags_[k_]), "message '%s' lacks '%s'",     \
                      nn_last_error()->message, frags_[k_]);                                       \
    } while (0)

static nn_status fwd(const nn_linear_params *q)
{
    return nn_linear_forward(ctx, q, &x, &w, &b, &y, NULL);
}

Test(linear_errors, params)
{
    EXPECT_FAIL(nn_linear_params_default(NULL), NN_E_INVALID_ARG,
                "nn_linear_params_default: p must not be NULL");
    EXPECT_FAIL(fwd(NULL), NN_E_INVALID_ARG, "nn_linear_forward: p (the parameters) must not be");
    nn_linear_params q = p;
    q.activation = (nn_activation)7;
    EXPECT_FAIL(fwd(&q), NN_E_INVALID_ARG, "nn_linear_forward: p.activation must be", "got 7");
    q = p;
    q.reserved[2] = 3;
    EXPECT_FAIL(fwd(&q), NN_E_INVALID_ARG, "p.reserved[2] must be 0, got 3");
}

Test(linear_errors, null_arguments)
{
    EXPECT_FAIL(nn_linear_forward(NULL, &p, &x, &w, &b, &y, NULL), NN_E_INVALID_ARG,
                "nn_linear_forward: ctx must not be NULL");
    EXPECT_FAIL(nn_linear_forward(ctx, &p, NULL, &w, &b, &y, NULL), NN_E_INVALID_ARG,
                "nn_linear_forward: x must not be NULL");
    EXPECT_FAIL(nn_linear_forward(ctx, &p, &x, NULL, &b, &y, NULL), NN_E_INVALID_ARG,
                "w must not be NULL");
    EXPECT_FAIL(nn_linear_forward(ctx, &p, &x, &w, &b, NULL, NULL), NN_E_INVALID_ARG,
                "y must not be NULL");
    cr_expect_eq(nn_linear_forward(ctx, &p, &x, &w, NULL, &y, NULL), NN_OK, "no bias is fine");
}

Test(linear_errors, shapes)
{
    nn_tensor t = w;
    t.dims[1] = 2;
    EXPECT_FAIL(nn_linear_forward(ctx, &p, &x, &t, &b, &y, NULL), NN_E_SHAPE,
                "nn_linear_forward: w.dims[1] must be x.dims[1] = 3", "got 2");
    t = w;
    t.rank = 1;
    EXPECT_FAIL(nn_linear_forward(ctx, &p, &x, &t, &b, &y, NULL), NN_E_SHAPE,
                "w.rank must be 2 ([out, in]), got 1");
    t = b;
    t.dims[0] = 4;
    EXPECT_FAIL(nn_linear_forward(ctx, &p, &x, &w, &t, &y, NULL), NN_E_SHAPE, "b.dims[0] must be 5",
                "got 4");
    t = y;
    t.dims[0] = 3;
    EXPECT_FAIL(nn_linear_forward(ctx, &p, &x, &w, &b, &t, NULL), NN_E_SHAPE, "y.dims[0] must be 4",
                "got 3");
    nn_tensor y3 = y; /* the same 20 elements as 2 x 2 x 5 */
    y3.rank = 3;
    y3.dims[0] = y3.dims[1] = 2;
    y3.dims[2] = 5;
    y3.strides[0] = 10;
    y3.strides[1] = 5;
    y3.strides[2] = 1;
    EXPECT_FAIL(nn_linear_forward(ctx, &p, &x, &w, &b, &y3, NULL), NN_E_SHAPE, "y.rank must be 2",
                "got 3");
}

Test(linear_errors, dtypes_and_layout)
{
    nn_tensor t;
    cr_assert_eq(nn_tensor_empty(ctx, NN_DTYPE_F64, 2, (int64_t[]){5, 3}, &t), NN_OK);
    EXPECT_FAIL(nn_linear_forward(ctx, &p, &x, &t, &b, &y, NULL), NN_E_DTYPE,
                "nn_linear_forward: w.dtype must equal x.dtype (f32), got f64");
    nn_tensor_free(ctx, &t);
    t = w; /* a transposed view of a 3 x 5 buffer */
    t.dims[0] = 3;
    t.dims[1] = 5;
    t.strides[0] = 1;
    t.strides[1] = 3;
    nn_tensor x5 = x;
    x5.dims[1] = 5;
    x5.strides[0] = 5;
    x5.data = y.data;
    nn_tensor y3 = y;
    y3.dims[1] = 3;
    y3.strides[0] = 3;
    y3.data = dx.data;
    nn_tensor b3 = b;
    b3.dims[0] = 3;
    EXPECT_FAIL(nn_linear_forward(ctx, &p, &x5, &t, &b3, &y3, NULL), NN_E_UNSUPPORTED,
                "w must be fully packed row-major");
}

Test(linear_errors, overlapping_outputs)
{
    nn_tensor big; /* x and y as overlapping views of one buffer */
    cr_assert_eq(nn_tensor_empty(ctx, NN_DTYPE_F32, 1, (int64_t[]){64}, &big), NN_OK);
    nn_tensor xv = x, yv = y;
    xv.data = big.data;
    yv.data = (float *)big.data + 4;
    EXPECT_FAIL(nn_linear_forward(ctx, &p, &xv, &w, &b, &yv, NULL), NN_E_INVALID_ARG,
                "nn_linear_forward", "y", "x");
    nn_tensor ys = y; /* broadcast rows: two elements at one address */
    ys.strides[0] = 0;
    EXPECT_FAIL(nn_linear_forward(ctx, &p, &x, &w, &b, &ys, NULL), NN_E_INVALID_ARG,
                "nn_linear_forward: y is written");
    nn_tensor_free(ctx, &big);

    nn_linear_pullback *pb = NULL;
    cr_assert_eq(nn_linear_forward(ctx, &p, &x, &w, &b, &y, &pb), NN_OK);
    nn_tensor dwv = dw;
    dwv.data = dy.data; /* dw over dy */
    EXPECT_FAIL(nn_linear_backward(ctx, &pb, &dy, NULL, &dwv, NULL), NN_E_INVALID_ARG,
                "nn_linear_backward", "dw", "dy");
    nn_tensor dbv = db;
    dbv.data = dx.data; /* db inside dx */
    EXPECT_FAIL(nn_linear_backward(ctx, &pb, &dy, &dx, NULL, &dbv), NN_E_INVALID_ARG,
                "nn_linear_backward", "db", "dx");
    nn_tensor dxv = dx;
    dxv.data = x.data; /* dx over the saved x */
    EXPECT_FAIL(nn_linear_backward(ctx, &pb, &dy, &dxv, &dw, NULL), NN_E_INVALID_ARG,
                "nn_linear_backward", "dx", "x (saved by forward)");
    cr_expect_not_null(pb, "a refused backward leaves the pullback with the caller");
    cr_expect_eq(nn_linear_backward(ctx, &pb, &dy, &dx, &dw, &db), NN_OK, "%s",
                 nn_last_error()->message);
    cr_expect_null(pb);
}

Test(linear_errors, backward_shapes)
{
    nn_linear_pullback *pb = NULL;
    cr_assert_eq(nn_linear_forward(ctx, &p, &x, &w, &b, &y, &pb), NN_OK);
    nn_tensor t = dy;
    t.dims[1] = 4;
    EXPECT_FAIL(nn_linear_backward(ctx, &pb, &t, &dx, NULL, NULL), NN_E_SHAPE,
                "nn_linear_backward: dy.dims[1] must be 5", "got 4");
    t = dw;
    t.dims[0] = 4;
    EXPECT_FAIL(nn_linear_backward(ctx, &pb, &dy, NULL, &t, NULL), NN_E_SHAPE,
                "dw.dims[0] must be 5", "got 4");
    t = dx;
    t.dims[1] = 2;
    EXPECT_FAIL(nn_linear_backward(ctx, &pb, &dy, &t, NULL, NULL), NN_E_SHAPE,
                "dx.dims[1] must be 3", "got 2");
    t = db;
    t.dims[0] = 6;
    EXPECT_FAIL(nn_linear_backward(ctx, &pb, &dy, NULL, NULL, &t), NN_E_SHAPE,
                "db.dims[0] must be 5", "got 6");
    EXPECT_FAIL(nn_linear_backward(ctx, &pb, NULL, &dx, NULL, NULL), NN_E_INVALID_ARG,
                "dy must not be NULL");
    cr_expect_eq(nn_linear_pullback_free(&pb), NN_OK);
}

Test(linear_errors, pullbacks)
{
    EXPECT_FAIL(nn_linear_backward(ctx, NULL, &dy, &dx, NULL, NULL), NN_E_PULLBACK,
                "nn_linear_backward: pullback must not be NULL");
    nn_linear_pullback *pb = NULL;
    EXPECT_FAIL(nn_linear_backward(ctx, &pb, &dy, &dx, NULL, NULL), NN_E_PULLBACK,
                "nn_linear_backward");
    cr_assert_eq(nn_linear_forward(ctx, &p, &x, &w, &b, &y, &pb), NN_OK);
    nn_linear_pullback *copy = pb;
    cr_assert_eq(nn_linear_backward(ctx, &pb, &dy, &dx, &dw, &db), NN_OK);
    cr_expect_null(pb);
    EXPECT_FAIL(nn_linear_backward(ctx, &copy, &dy, &dx, NULL, NULL), NN_E_PULLBACK,
                "nn_linear_backward");
    EXPECT_FAIL(nn_linear_pullback_free(&copy), NN_E_PULLBACK, "nn_linear_pullback_free");

    /* Another context's pullback, and another family's. */
    nn_ctx *other;
    nn_settings s;
    nn_settings_from_env(&s);
    s.backend = NN_BACKEND_REF;
    cr_assert_eq(nn_ctx_create(&other, &s), NN_OK);
    cr_assert_eq(nn_linear_forward(ctx, &p, &x, &w, &b, &y, &pb), NN_OK);
    EXPECT_FAIL(nn_linear_backward(other, &pb, &dy, &dx, NULL, NULL), NN_E_PULLBACK,
                "nn_linear_backward");
    cr_expect_eq(nn_linear_pullback_free(&pb), NN_OK);
    nn_ctx_destroy(other);

    nn_pool_params pp = {.spatial_rank = 1, .mode = NN_POOL_MAX, .window = {1}, .stride = {1}};
    nn_tensor px, py;
    cr_assert_eq(nn_tensor_empty(ctx, NN_DTYPE_F32, 3, (int64_t[]){1, 1, 4}, &px), NN_OK);
    cr_assert_eq(nn_tensor_empty(ctx, NN_DTYPE_F32, 3, (int64_t[]){1, 1, 4}, &py), NN_OK);
    cr_assert_eq(nn_tensor_fill_ints(ctx, &px, -2, 2, 1), NN_OK);
    nn_pool_pullback *ppb = NULL;
    cr_assert_eq(nn_pool_forward(ctx, &pp, &px, &py, &ppb), NN_OK);
    nn_linear_pullback *foreign = (nn_linear_pullback *)ppb;
    EXPECT_FAIL(nn_linear_backward(ctx, &foreign, &dy, &dx, NULL, NULL), NN_E_PULLBACK,
                "nn_linear_backward", "pool");
    cr_expect_eq(nn_pool_pullback_free(&ppb), NN_OK);
    nn_tensor_free(ctx, &px);
    nn_tensor_free(ctx, &py);
}

/* A failed forward gives no pullback and a NULL *pullback_out. */
Test(linear_errors, failed_forward_gives_no_pullback)
{
    nn_linear_pullback *pb = (nn_linear_pullback *)&p;
    nn_tensor t = y;
    t.dims[1] = 9;
    EXPECT_FAIL(nn_linear_forward(ctx, &p, &x, &w, &b, &t, &pb), NN_E_SHAPE, "y.dims[1]");
    cr_expect_null(pb);
}

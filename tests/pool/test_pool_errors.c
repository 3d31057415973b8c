/* Pooling refuses bad input with a status and a message naming the argument, the expected and
 * the actual value; pullbacks are consumed once, by their own context. */
#include <criterion/criterion.h>
#include <string.h>

#include "core/alloc.h"
#include "nnprim/nnprim.h"
#include "pool_check.h"

static nn_ctx *ctx;
static nn_tensor x, y, dy, dx;
static nn_pool_params p;

static void setup(void)
{
    ctx = pc_ctx(NN_BACKEND_REF);
    p = pc_params(2, NN_POOL_MAX, 3, 2, 1, 1);
    x = pc_empty(ctx, NN_DTYPE_F32, 4, (int64_t[]){2, 3, 8, 8});
    y = pc_empty(ctx, NN_DTYPE_F32, 4, (int64_t[]){2, 3, 4, 4});
    dy = pc_empty(ctx, NN_DTYPE_F32, 4, (int64_t[]){2, 3, 4, 4});
    dx = pc_empty(ctx, NN_DTYPE_F32, 4, (int64_t[]){2, 3, 8, 8});
    pc_fill_distinct(&x, 1, 1, 0);
    pc_fill_distinct(&dy, 2, 1, 0);
}

static void teardown(void)
{
    nn_tensor_free(ctx, &x);
    nn_tensor_free(ctx, &y);
    nn_tensor_free(ctx, &dy);
    nn_tensor_free(ctx, &dx);
    nn_ctx_destroy(ctx);
}

TestSuite(pool_errors, .init = setup, .fini = teardown);

/* The call failed with want, its message holds each of the fragments, and the context has it. */
#define EXPECT_FAIL(call, want, ...)                                                               \
    do {                                                                                           \
        nn_status st_ = (call);                                                                    \
        cr_expect_eq(st_, want, "%s: got %s", #call, nn_status_name(st_));                         \
        const char *frags_[] = {__VA_ARGS__};                                                      \
        for (size_t k_ = 0; k_ < sizeof frags_ / sizeof frags_[0]; k_++)                           \
            cr_expect(strstr(nn_last_error()->message, frags_[k_]), "message '%s' lacks '%s'",     \
                      nn_last_error()->message, frags_[k_]);                                       \
    } while (0)

static nn_status fwd(const nn_pool_params *q)
{
    return nn_pool_forward(ctx, q, &x, &y, NULL);
}

Test(pool_errors, bad_parameters)
{
    nn_pool_params q = p;
    q.spatial_rank = 0;
    EXPECT_FAIL(fwd(&q), NN_E_INVALID_ARG, "params.spatial_rank must be 1, 2 or 3, got 0");
    q.spatial_rank = 4;
    EXPECT_FAIL(fwd(&q), NN_E_INVALID_ARG, "spatial_rank", "got 4");
    q = p;
    q.mode = (nn_pool_mode)7;
    EXPECT_FAIL(fwd(&q), NN_E_INVALID_ARG, "params.mode", "got 7");
    q = p;
    q.window[1] = 0;
    EXPECT_FAIL(fwd(&q), NN_E_INVALID_ARG, "params.window[1] must be >= 1, got 0");
    q = p;
    q.stride[0] = 0;
    EXPECT_FAIL(fwd(&q), NN_E_INVALID_ARG, "params.stride[0] must be >= 1, got 0");
    q = p;
    q.pad_lo[1] = 3;
    EXPECT_FAIL(fwd(&q), NN_E_INVALID_ARG,
                "params.pad_lo[1] must be in [0, window[1] - 1] = [0, 2]", "got 3");
    q = p;
    q.pad_hi[0] = -1;
    EXPECT_FAIL(fwd(&q), NN_E_INVALID_ARG, "params.pad_hi[0]", "got -1");
    EXPECT_FAIL(fwd(NULL), NN_E_INVALID_ARG, "params must not be NULL");
}

Test(pool_errors, shapes_that_do_not_fit)
{
    nn_pool_params q = p;
    q.spatial_rank = 1;
    EXPECT_FAIL(fwd(&q), NN_E_SHAPE, "x.rank must be params.spatial_rank + 2 = 3", "got 4");
    q = p;
    q.window[1] = 11;
    q.pad_lo[1] = q.pad_hi[1] = 1;
    EXPECT_FAIL(fwd(&q), NN_E_SHAPE, "params.window[1] = 11 is larger than the padded input",
                "= 10");
    int64_t yd[4];
    EXPECT_FAIL(nn_pool_output_shape(&q, 4, x.dims, yd), NN_E_SHAPE, "window[1] = 11");
    EXPECT_FAIL(nn_pool_output_shape(&p, 4, NULL, yd), NN_E_INVALID_ARG, "must not be NULL");
    EXPECT_FAIL(nn_pool_output_shape(&p, 4, (int64_t[]){2, 0, 8, 8}, yd), NN_E_INVALID_ARG,
                "x.dims[1] must be >= 1, got 0");
    nn_tensor ybad = y;
    ybad.dims[3] = 5;
    EXPECT_FAIL(nn_pool_forward(ctx, &p, &x, &ybad, NULL), NN_E_SHAPE,
                "y dims must be 2x3x4x4, got 2x3x4x5");
}

Test(pool_errors, null_tensors_dtypes_and_memory_spaces)
{
    EXPECT_FAIL(nn_pool_forward(NULL, &p, &x, &y, NULL), NN_E_INVALID_ARG, "ctx must not be NULL");
    EXPECT_FAIL(nn_pool_forward(ctx, &p, NULL, &y, NULL), NN_E_INVALID_ARG, "x");
    EXPECT_FAIL(nn_pool_forward(ctx, &p, &x, NULL, NULL), NN_E_INVALID_ARG, "y");
    nn_tensor y64 = pc_empty(ctx, NN_DTYPE_F64, 4, y.dims);
    EXPECT_FAIL(nn_pool_forward(ctx, &p, &x, &y64, NULL), NN_E_DTYPE,
                "y.dtype must equal x.dtype (f32), got f64");
    nn_tensor_free(ctx, &y64);
    nn_tensor ydev = y; /* a view that claims device memory: never dereferenced */
    ydev.space = NN_SPACE_DEVICE;
    ydev.device = 0;
    EXPECT_FAIL(nn_pool_forward(ctx, &p, &x, &ydev, NULL), NN_E_MEMSPACE,
                "y must be in host memory");
    nn_pool_pullback *pb = (nn_pool_pullback *)&p; /* must be overwritten with NULL */
    EXPECT_FAIL(nn_pool_forward(ctx, &p, &x, &ydev, &pb), NN_E_MEMSPACE, "pool_forward");
    cr_expect_null(pb);
}

Test(pool_errors, backward_checks_dy_and_dx)
{
    nn_pool_pullback *pb;
    cr_assert_eq(nn_pool_forward(ctx, &p, &x, &y, &pb), NN_OK);
    nn_tensor bad = dy;
    bad.dims[2] = 3;
    EXPECT_FAIL(nn_pool_backward(ctx, &pb, &bad, &dx), NN_E_SHAPE, "dy dims must be 2x3x4x4",
                "got 2x3x3x4");
    bad = dx;
    bad.rank = 3;
    EXPECT_FAIL(nn_pool_backward(ctx, &pb, &dy, &bad), NN_E_SHAPE, "dx dims must be 2x3x8x8",
                "rank 3");
    nn_tensor dx16 = pc_empty(ctx, NN_DTYPE_F16, 4, dx.dims);
    EXPECT_FAIL(nn_pool_backward(ctx, &pb, &dy, &dx16), NN_E_DTYPE,
                "dx.dtype must equal x.dtype (f32), got f16");
    nn_tensor_free(ctx, &dx16);
    bad = dx;
    bad.space = NN_SPACE_DEVICE;
    bad.device = 0;
    EXPECT_FAIL(nn_pool_backward(ctx, &pb, &dy, &bad), NN_E_MEMSPACE, "dx must be in host memory");
    /* every failure left the pullback with the caller; it still works */
    cr_assert_not_null(pb);
    cr_assert_eq(nn_pool_backward(ctx, &pb, &dy, &dx), NN_OK, "%s", nn_last_error()->message);
    cr_expect_null(pb);
}

Test(pool_errors, pullback_used_twice_or_with_another_context)
{
    nn_pool_pullback *pb;
    cr_assert_eq(nn_pool_forward(ctx, &p, &x, &y, &pb), NN_OK);
    nn_ctx *other = pc_ctx(NN_BACKEND_REF);
    nn_pool_pullback *keep = pb;
    EXPECT_FAIL(nn_pool_backward(other, &pb, &dy, &dx), NN_E_PULLBACK,
                "the pullback was created with context");
    cr_expect_eq(pb, keep, "a failed backward must leave the pullback with the caller");
    nn_error_info e;
    cr_assert_eq(nn_ctx_last_error(other, &e), NN_OK);
    cr_expect_eq(e.status, NN_E_PULLBACK);
    nn_ctx_destroy(other);
    cr_assert_eq(nn_pool_backward(ctx, &pb, &dy, &dx), NN_OK);
    cr_assert_null(pb);
    EXPECT_FAIL(nn_pool_backward(ctx, &pb, &dy, &dx), NN_E_PULLBACK, "already consumed");
    EXPECT_FAIL(nn_pool_backward(ctx, NULL, &dy, &dx), NN_E_INVALID_ARG,
                "pullback must not be NULL");
    /* forward without a pullback, then backward with a NULL one */
    nn_pool_pullback *none = NULL;
    cr_assert_eq(nn_pool_forward(ctx, &p, &x, &y, NULL), NN_OK);
    EXPECT_FAIL(nn_pool_backward(ctx, &none, &dy, &dx), NN_E_PULLBACK, "already consumed");
    cr_expect_eq(nn_pool_pullback_free(NULL), NN_OK);
    cr_expect_eq(nn_pool_pullback_free(&none), NN_OK);
}

Test(pool_errors, pullback_free_without_backward)
{
    nn_pool_pullback *pb;
    cr_assert_eq(nn_pool_forward(ctx, &p, &x, &y, &pb), NN_OK);
    cr_assert_not_null(pb);
    nn_pool_pullback *stale = pb;
    cr_expect_eq(nn_pool_pullback_free(&pb), NN_OK);
    cr_expect_null(pb);
    /* A stale copy is recognised without touching the freed memory. */
    EXPECT_FAIL(nn_pool_pullback_free(&stale), NN_E_PULLBACK, "not a live pullback");
    EXPECT_FAIL(nn_pool_backward(ctx, &stale, &dy, &dx), NN_E_PULLBACK, "pool_backward",
                "not a live pullback");
}

/* One registry holds every family's pullbacks (src/core/pullback.h): another family's live
 * pullback is refused by name, and stays live for its own family. */
Test(pool_errors, another_familys_pullback_is_refused)
{
    nn_conv_params cp;
    cr_assert_eq(nn_conv_params_default(&cp, 2), NN_OK);
    nn_tensor w = pc_empty(ctx, NN_DTYPE_F32, 4, (int64_t[]){3, 3, 1, 1});
    nn_tensor cy = pc_empty(ctx, NN_DTYPE_F32, 4, (int64_t[]){2, 3, 8, 8});
    pc_fill_distinct(&w, 3, 1, 0);
    nn_conv_pullback *cpb = NULL;
    cr_assert_eq(nn_conv_forward(ctx, &cp, &x, &w, NULL, &cy, &cpb), NN_OK, "%s",
                 nn_last_error()->message);
    nn_pool_pullback *as_pool = (nn_pool_pullback *)cpb;
    EXPECT_FAIL(nn_pool_backward(ctx, &as_pool, &dy, &dx), NN_E_PULLBACK, "pool_backward",
                "is a conv pullback, not a pool one");
    EXPECT_FAIL(nn_pool_pullback_free(&as_pool), NN_E_PULLBACK, "nn_pool_pullback_free",
                "is a conv pullback, not a pool one");
    cr_expect_eq(as_pool, (nn_pool_pullback *)cpb, "left with the caller");
    cr_expect_eq(nn_conv_pullback_free(&cpb), NN_OK, "still live for conv");
    nn_tensor_free(ctx, &cy);
    nn_tensor_free(ctx, &w);
}

/* Every host allocation failure comes back as NN_E_OOM_HOST with nothing changed or leaked. */
Test(pool_errors, host_allocation_failures)
{
    nn_pool_pullback *pb = NULL;
    nn__host_alloc_fail_at(1);
    EXPECT_FAIL(nn_pool_forward(ctx, &p, &x, &y, &pb), NN_E_OOM_HOST, "pullback");
    cr_expect_null(pb);
    nn__host_alloc_fail_at(0);
    cr_assert_eq(nn_pool_forward(ctx, &p, &x, &y, &pb), NN_OK);
    nn__host_alloc_fail_at(1);
    EXPECT_FAIL(nn_pool_backward(ctx, &pb, &dy, &dx), NN_E_OOM_HOST, "pool_backward");
    cr_expect_not_null(pb);
    nn__host_alloc_fail_at(0);
    cr_assert_eq(nn_pool_backward(ctx, &pb, &dy, &dx), NN_OK);
    cr_expect_null(pb);
}

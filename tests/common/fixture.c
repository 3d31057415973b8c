#include <criterion/criterion.h>

#include "fixture.h"

static nn_ctx *create(const nn_settings *s)
{
    nn_ctx *ctx = NULL;
    cr_assert_eq(nn_ctx_create(&ctx, s), NN_OK, "nn_ctx_create: %s", nn_last_error()->message);
    return ctx;
}

nn_ctx *nn_test_ctx(nn_backend b)
{
    nn_settings s;
    cr_assert_eq(nn_default_settings(&s), NN_OK);
    s.backend = b;
    return create(&s);
}

nn_ctx *nn_test_ctx_math(nn_backend b, nn_math_mode math)
{
    nn_settings s;
    cr_assert_eq(nn_default_settings(&s), NN_OK);
    s.backend = b;
    s.math_mode = math;
    return create(&s);
}

nn_tensor nn_test_ints(nn_ctx *ctx, nn_dtype dt, int rank, const int64_t *dims)
{
    nn_tensor t;
    cr_assert_eq(nn_tensor_empty(ctx, dt, rank, dims, &t), NN_OK, "nn_tensor_empty: %s",
                 nn_last_error()->message);
    cr_assert_eq(nn_tensor_fill_ints(ctx, &t, -2, 2, (uint64_t)rank + (uint64_t)dims[0]), NN_OK,
                 "nn_tensor_fill_ints: %s", nn_last_error()->message);
    return t;
}

#include <criterion/criterion.h>
#include <string.h>

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
    cr_assert_eq(nn_settings_from_env(&s), NN_OK);
    s.backend = b;
    return create(&s);
}

nn_ctx *nn_test_ctx_math(nn_backend b, nn_math_mode math)
{
    nn_settings s;
    cr_assert_eq(nn_settings_from_env(&s), NN_OK);
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

int nn_test_f32_differ(nn_ctx *ca, const nn_tensor *a, nn_ctx *cb, const nn_tensor *b)
{
    nn_settings hs;
    cr_assert_eq(nn_settings_defaults(&hs), NN_OK);
    hs.backend = NN_BACKEND_REF;
    nn_ctx *h = create(&hs);
    nn_tensor ha, hb;
    cr_assert_eq(nn_tensor_empty(h, NN_DTYPE_F32, a->rank, a->dims, &ha), NN_OK);
    cr_assert_eq(nn_tensor_empty(h, NN_DTYPE_F32, b->rank, b->dims, &hb), NN_OK);
    cr_assert_eq(nn_tensor_copy(ca, &ha, a), NN_OK, "%s", nn_last_error()->message);
    cr_assert_eq(nn_tensor_copy(cb, &hb, b), NN_OK, "%s", nn_last_error()->message);
    int r = memcmp(ha.data, hb.data, (size_t)nn_tensor_numel(a) * 4) != 0;
    nn_tensor_free(h, &ha);
    nn_tensor_free(h, &hb);
    nn_ctx_destroy(h);
    return r;
}

nn_ctx *nn_test_deterministic_gpu(void)
{
    nn_settings s;
    cr_assert_eq(nn_settings_defaults(&s), NN_OK);
    s.backend = NN_BACKEND_CUDNN;
    s.deterministic = 1;
    return create(&s);
}

#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "core/elem.h"
#include "nnprim/nnprim.h"

static nn_ctx *ref_ctx(void)
{
    nn_settings s;
    nn_settings_from_env(&s);
    s.backend = NN_BACKEND_REF;
    nn_ctx *ctx;
    cr_assert_eq(nn_ctx_create(&ctx, &s), NN_OK);
    return ctx;
}

static nn_tensor view(void *data, nn_dtype dt, int rank, const int64_t *dims)
{
    nn_tensor t;
    memset(&t, 0, sizeof t);
    t.data = data;
    t.dtype = dt;
    t.rank = rank;
    memcpy(t.dims, dims, (size_t)rank * sizeof *dims);
    nn_contiguous_strides(rank, dims, t.strides);
    t.space = NN_SPACE_HOST;
    t.device = -1;
    return t;
}

static void expect_invalid(const nn_tensor *t, nn_status want, const char *fragment)
{
    cr_expect_eq(nn_tensor_validate(t, "x"), want, "want %s", nn_status_name(want));
    cr_expect(strstr(nn_last_error()->message, fragment), "message \"%s\" lacks \"%s\"",
              nn_last_error()->message, fragment);
}

Test(tensor, validation_names_the_bad_field)
{
    float buf[64];
    int64_t dims[3] = {2, 3, 4};
    nn_tensor t = view(buf, NN_DTYPE_F32, 3, dims);
    cr_expect_eq(nn_tensor_validate(&t, "x"), NN_OK);

    nn_tensor z = t;
    z.dims[1] = 0;
    expect_invalid(&z, NN_E_INVALID_ARG, "x.dims[1] must be >= 1, got 0");
    z = t;
    z.dims[2] = -5;
    expect_invalid(&z, NN_E_INVALID_ARG, "x.dims[2] must be >= 1, got -5");
    z = t;
    z.strides[0] = -1;
    expect_invalid(&z, NN_E_INVALID_ARG, "x.strides[0] must be >= 0, got -1");
    z = t;
    z.data = NULL;
    expect_invalid(&z, NN_E_INVALID_ARG, "x.data must not be NULL");
    z = t;
    z.rank = 0;
    expect_invalid(&z, NN_E_INVALID_ARG, "x.rank must be in [1, 8], got 0");
    z.rank = 9;
    expect_invalid(&z, NN_E_INVALID_ARG, "got 9");
    z = t;
    z.dtype = (nn_dtype)77;
    expect_invalid(&z, NN_E_DTYPE, "x.dtype must be f32, f64, f16 or bf16, got 77");
    z = t;
    z.space = (nn_space)5;
    expect_invalid(&z, NN_E_INVALID_ARG, "x.space");
    cr_expect_eq(nn_tensor_validate(NULL, "x"), NN_E_INVALID_ARG);
}

Test(tensor, byte_sizes_that_overflow_are_refused)
{
    float buf[1];
    int64_t dims[2] = {INT64_MAX / 2, 4};
    nn_tensor t = view(buf, NN_DTYPE_F32, 2, dims);
    t.strides[0] = 4;
    t.strides[1] = 1;
    expect_invalid(&t, NN_E_OVERFLOW, "does not fit");
    int64_t big[2] = {1 << 20, 1 << 20};
    int64_t strides[3];
    cr_expect_eq(nn_contiguous_strides(2, big, strides), NN_OK);
    nn_tensor u = view(buf, NN_DTYPE_F64, 2, big);
    size_t bytes;
    cr_expect_eq(nn_tensor_extent_bytes(&u, &bytes), NN_OK);
    cr_expect_eq(bytes, (size_t)1 << 43);
    int64_t edge[2] = {(int64_t)1 << 30, (int64_t)1 << 30}; /* 2^60 elements, 2^63 bytes */
    u = view(buf, NN_DTYPE_F64, 2, edge);
    cr_expect_eq(nn_tensor_extent_bytes(&u, &bytes), NN_E_OVERFLOW);
    int64_t huge[3] = {1 << 30, 1 << 30, 1 << 30};
    cr_expect_eq(nn_contiguous_strides(3, huge, strides), NN_E_OVERFLOW);

    nn_ctx *ctx = ref_ctx();
    nn_tensor e;
    cr_expect_eq(nn_tensor_empty(ctx, NN_DTYPE_F32, 3, huge, &e), NN_E_OVERFLOW);
    nn_ctx_destroy(ctx);
}

Test(tensor, strides_extent_and_contiguity)
{
    double buf[32];
    int64_t dims[2] = {3, 4};
    nn_tensor t = view(buf, NN_DTYPE_F64, 2, dims);
    cr_expect_eq(t.strides[0], 4);
    cr_expect_eq(t.strides[1], 1);
    cr_expect(nn_tensor_is_contiguous(&t));
    cr_expect_eq(nn_tensor_numel(&t), 12);
    size_t bytes;
    cr_assert_eq(nn_tensor_extent_bytes(&t, &bytes), NN_OK);
    cr_expect_eq(bytes, 12 * sizeof(double));
    t.strides[0] = 8; /* padded rows */
    cr_expect(!nn_tensor_is_contiguous(&t));
    cr_assert_eq(nn_tensor_extent_bytes(&t, &bytes), NN_OK);
    cr_expect_eq(bytes, (2 * 8 + 3 + 1) * sizeof(double));
    t.strides[0] = 0; /* broadcast rows */
    cr_assert_eq(nn_tensor_extent_bytes(&t, &bytes), NN_OK);
    cr_expect_eq(bytes, 4 * sizeof(double));
    cr_expect_eq(nn_dtype_size(NN_DTYPE_BF16), 2);
    cr_expect_eq(nn_dtype_size((nn_dtype)0), 0);
    cr_expect_str_eq(nn_dtype_name(NN_DTYPE_F16), "f16");
    cr_expect_str_eq(nn_dtype_name((nn_dtype)99), "invalid");
}

Test(tensor, empty_and_free_on_reference_context)
{
    nn_ctx *ctx = ref_ctx();
    int64_t dims[4] = {2, 3, 5, 7};
    nn_tensor t;
    cr_assert_eq(nn_tensor_empty(ctx, NN_DTYPE_BF16, 4, dims, &t), NN_OK);
    cr_expect_not_null(t.data);
    cr_expect_eq(t.space, NN_SPACE_HOST);
    cr_expect_eq(t.device, -1);
    cr_expect(nn_tensor_is_contiguous(&t));
    cr_expect_eq(nn_tensor_fill_constant(ctx, &t, 1.5), NN_OK);
    cr_expect_eq(((uint16_t *)t.data)[209], nn__f32_to_bf16(1.5f));
    nn_tensor copy = t;
    cr_assert_eq(nn_tensor_free(ctx, &t), NN_OK);
    cr_expect_null(t.data);
    cr_expect_eq(nn_tensor_free(ctx, &t), NN_OK, "NULL data is a no-op");
    /* The same block again: already freed. */
    cr_expect_eq(nn_tensor_free(ctx, &copy), NN_E_BAD_POINTER);
    cr_expect(strstr(nn_last_error()->message, "already freed"), "%s", nn_last_error()->message);
    /* Memory nnprim never handed out. */
    float mine[4];
    int64_t d1[1] = {4};
    nn_tensor foreign;
    cr_assert_eq(nn_tensor_wrap(ctx, mine, NN_DTYPE_F32, 1, d1, NULL, &foreign), NN_OK);
    cr_expect_eq(nn_tensor_free(ctx, &foreign), NN_E_BAD_POINTER);
    cr_expect_eq(foreign.data, mine, "a refused free changes nothing");
    cr_expect_eq(nn_tensor_empty(NULL, NN_DTYPE_F32, 1, d1, &t), NN_E_INVALID_ARG);
    cr_expect_eq(nn_tensor_empty(ctx, NN_DTYPE_F32, 1, d1, NULL), NN_E_INVALID_ARG);
    cr_expect_eq(nn_tensor_empty(ctx, (nn_dtype)0, 1, d1, &t), NN_E_DTYPE);
    cr_expect_eq(nn_tensor_empty(ctx, NN_DTYPE_F32, 0, d1, &t), NN_E_INVALID_ARG);
    nn_ctx_destroy(ctx);
}

Test(tensor, wrap_checks_arguments)
{
    nn_ctx *ctx = ref_ctx();
    float buf[24];
    int64_t dims[2] = {4, 6};
    int64_t strides[2] = {6, 1};
    nn_tensor t;
    cr_assert_eq(nn_tensor_wrap(ctx, buf, NN_DTYPE_F32, 2, dims, strides, &t), NN_OK);
    cr_expect_eq(t.space, NN_SPACE_HOST);
    cr_expect_eq(t.data, buf);
    cr_expect_eq(nn_tensor_wrap(ctx, NULL, NN_DTYPE_F32, 2, dims, NULL, &t), NN_E_INVALID_ARG);
    cr_expect_null(t.data, "out is zeroed on failure");
    int64_t bad_strides[2] = {6, -1};
    cr_expect_eq(nn_tensor_wrap(ctx, buf, NN_DTYPE_F32, 2, dims, bad_strides, &t),
                 NN_E_INVALID_ARG);
    int64_t zero[2] = {4, 0};
    cr_expect_eq(nn_tensor_wrap(ctx, buf, NN_DTYPE_F32, 2, zero, NULL, &t), NN_E_INVALID_ARG);
    cr_expect_eq(nn_tensor_wrap(ctx, buf, NN_DTYPE_F32, 2, NULL, NULL, &t), NN_E_INVALID_ARG);
    nn_ctx_destroy(ctx);
}

Test(tensor, host_copy_with_strides_and_mismatches)
{
    nn_ctx *ctx = ref_ctx();
    float src[12], dst[24];
    for (int i = 0; i < 12; i++)
        src[i] = (float)i;
    memset(dst, 0, sizeof dst);
    int64_t dims[2] = {3, 4};
    int64_t padded[2] = {8, 2}; /* every other column of 8-wide rows */
    nn_tensor s, d;
    cr_assert_eq(nn_tensor_wrap(ctx, src, NN_DTYPE_F32, 2, dims, NULL, &s), NN_OK);
    cr_assert_eq(nn_tensor_wrap(ctx, dst, NN_DTYPE_F32, 2, dims, padded, &d), NN_OK);
    cr_assert_eq(nn_tensor_copy(ctx, &d, &s), NN_OK);
    for (int r = 0; r < 3; r++)
        for (int c = 0; c < 4; c++) {
            cr_expect_eq(dst[r * 8 + c * 2], (float)(r * 4 + c));
            cr_expect_eq(dst[r * 8 + c * 2 + 1], 0.0f, "gaps untouched");
        }
    int64_t other[2] = {4, 3};
    nn_tensor o;
    cr_assert_eq(nn_tensor_wrap(ctx, dst, NN_DTYPE_F32, 2, other, NULL, &o), NN_OK);
    cr_expect_eq(nn_tensor_copy(ctx, &o, &s), NN_E_SHAPE);
    cr_expect(strstr(nn_last_error()->message, "dst dims (4x3) must equal src dims (3x4)"), "%s",
              nn_last_error()->message);
    nn_tensor h;
    cr_assert_eq(nn_tensor_wrap(ctx, dst, NN_DTYPE_F16, 2, dims, NULL, &h), NN_OK);
    cr_expect_eq(nn_tensor_copy(ctx, &h, &s), NN_E_DTYPE);
    nn_ctx_destroy(ctx);
}

Test(tensor, fills_are_reproducible_and_in_range)
{
    nn_ctx *ctx = ref_ctx();
    int64_t dims[1] = {1000};
    nn_tensor a, b;
    cr_assert_eq(nn_tensor_empty(ctx, NN_DTYPE_F64, 1, dims, &a), NN_OK);
    cr_assert_eq(nn_tensor_empty(ctx, NN_DTYPE_F64, 1, dims, &b), NN_OK);
    cr_assert_eq(nn_tensor_fill_uniform(ctx, &a, -2, 3, 42), NN_OK);
    cr_assert_eq(nn_tensor_fill_uniform(ctx, &b, -2, 3, 42), NN_OK);
    cr_expect_eq(memcmp(a.data, b.data, 1000 * sizeof(double)), 0);
    double lo = 1e9, hi = -1e9, sum = 0;
    for (int i = 0; i < 1000; i++) {
        double v = ((double *)a.data)[i];
        lo = fmin(lo, v), hi = fmax(hi, v), sum += v;
    }
    cr_expect(lo >= -2 && hi < 3 && lo < -1.9 && hi > 2.9, "range [%g, %g]", lo, hi);
    cr_expect(fabs(sum / 1000 - 0.5) < 0.2, "mean %g", sum / 1000);
    cr_assert_eq(nn_tensor_fill_uniform(ctx, &b, -2, 3, 43), NN_OK);
    cr_expect_neq(memcmp(a.data, b.data, 1000 * sizeof(double)), 0);

    cr_assert_eq(nn_tensor_fill_ints(ctx, &a, -3, 3, 7), NN_OK);
    int seen[7] = {0};
    for (int i = 0; i < 1000; i++) {
        double v = ((double *)a.data)[i];
        cr_assert(v == floor(v) && v >= -3 && v <= 3, "value %g", v);
        seen[(int)v + 3]++;
    }
    for (int k = 0; k < 7; k++)
        cr_expect_gt(seen[k], 50, "value %d drawn %d times", k - 3, seen[k]);
    cr_expect_eq(nn_tensor_fill_ints(ctx, &a, 3, 2, 1), NN_E_INVALID_ARG);
    cr_expect_eq(nn_tensor_fill_uniform(ctx, &a, 1, 0, 1), NN_E_INVALID_ARG);
    cr_expect_eq(nn_tensor_fill_uniform(ctx, &a, 0, INFINITY, 1), NN_E_INVALID_ARG);
    nn_tensor_free(ctx, &a);
    nn_tensor_free(ctx, &b);
    nn_ctx_destroy(ctx);
}

Test(elem, half_and_bfloat16_conversions)
{
    cr_expect_eq(nn__f32_to_f16(1.0f), 0x3c00);
    cr_expect_eq(nn__f32_to_f16(-2.0f), 0xc000);
    cr_expect_eq(nn__f32_to_f16(65504.0f), 0x7bff);
    cr_expect_eq(nn__f32_to_f16(65520.0f), 0x7c00, "rounds up to infinity");
    cr_expect_eq(nn__f32_to_f16(0x1p-24f), 0x0001, "smallest subnormal");
    cr_expect_eq(nn__f32_to_f16(0x1p-26f), 0x0000, "below half the smallest: zero");
    cr_expect_eq(nn__f32_to_f16(1.0f + 0x1p-11f), 0x3c00, "tie rounds to even");
    cr_expect_eq(nn__f32_to_f16(1.0f + 3 * 0x1p-11f), 0x3c02, "tie rounds to even (up)");
    cr_expect(isnan(nn__f16_to_f32(nn__f32_to_f16(NAN))));
    cr_expect_eq(nn__f16_to_f32(0x0001), 0x1p-24f);
    cr_expect_eq(nn__f16_to_f32(0x3555), 0.333251953125f);
    cr_expect_eq(nn__f32_to_bf16(1.0f), 0x3f80);
    cr_expect_eq(nn__f32_to_bf16(1.0f + 0x1p-8f), 0x3f80, "tie rounds to even");
    cr_expect_eq(nn__f32_to_bf16(1.0f + 3 * 0x1p-8f), 0x3f82);
    cr_expect(isnan(nn__bf16_to_f32(nn__f32_to_bf16(NAN))));
    for (int i = -2048; i <= 2048; i++) {
        cr_expect_eq(nn__f16_to_f32(nn__f32_to_f16((float)i)), (float)i, "f16 holds %d", i);
        if (i >= -256 && i <= 256)
            cr_expect_eq(nn__bf16_to_f32(nn__f32_to_bf16((float)i)), (float)i, "bf16 holds %d", i);
    }
}

Test(elem, one_of_every_dtype)
{
    const nn_dtype types[] = {NN_DTYPE_F32, NN_DTYPE_F64, NN_DTYPE_F16, NN_DTYPE_BF16};
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
        unsigned char one[8];
        memset(one, 0xa5, sizeof one);
        size_t n = nn__elem_one(types[i], one);
        cr_expect_eq(n, nn_dtype_size(types[i]), "%s: size %zu", nn_dtype_name(types[i]), n);
        cr_expect_eq(nn__load(one, types[i], 0), 1.0, "%s: reads back as 1",
                     nn_dtype_name(types[i]));
        for (size_t b = n; b < sizeof one; b++)
            cr_expect_eq(one[b], 0xa5, "%s: byte %zu past the element written",
                         nn_dtype_name(types[i]), b);
        unsigned char stored[8] = {0};
        nn__store(stored, types[i], 0, 1.0);
        cr_expect(!memcmp(one, stored, n), "%s: the bits nn__store writes for 1",
                  nn_dtype_name(types[i]));
    }
}

/* Bad input to the tensor functions: sizes that overflow, misaligned data, reserved
 * fields, overlapping and self-overlapping outputs, fill bounds, device views on a reference
 * context, and messages that name the function called and the argument. */
#include <criterion/criterion.h>
#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdint.h>
#include <string.h>

#include "core/tensor_util.h"
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
    cr_assert_eq(nn_contiguous_strides(rank, dims, t.strides), NN_OK);
    t.space = NN_SPACE_HOST;
    t.device = -1;
    return t;
}

static void expect_message(const char *fragment)
{
    const char *m = nn_last_error()->message;
    cr_expect(strstr(m, fragment), "message \"%s\" lacks \"%s\"", m, fragment);
}

#define G ((int64_t)1 << 32)

Test(tensor_bad_input, counts_that_overflow_are_not_undefined)
{
    static char byte;
    int64_t dims[2] = {G, G};
    nn_tensor t = view(&byte, NN_DTYPE_F32, 1, dims);
    t.rank = 2;
    t.dims[1] = G;
    t.strides[0] = t.strides[1] = 0; /* a broadcast view: its extent is one element */
    cr_expect_eq(nn_tensor_numel(&t), -1);
    cr_expect_eq(nn_tensor_validate(&t, "x"), NN_E_OVERFLOW);
    expect_message("nn_tensor_validate: the element count of x.dims 4294967296x4294967296 "
                   "overflows int64");
    /* The running product of is_contiguous overflows before the outer dims are reached. */
    t.rank = 3;
    t.dims[0] = 2;
    t.dims[1] = (int64_t)1 << 62;
    t.dims[2] = 4;
    t.strides[2] = 1;
    t.strides[1] = 4;
    t.strides[0] = 0;
    cr_expect_eq(nn_tensor_is_contiguous(&t), 0);
    t.dims[0] = G;
    t.dims[1] = G / 2;
    t.dims[2] = 2;
    t.strides[2] = 1;
    t.strides[1] = 2;
    t.strides[0] = G;
    cr_expect_eq(nn_tensor_is_contiguous(&t), 1, "the outermost dim needs no product");
    cr_expect_eq(nn_tensor_numel(&t), -1);

    int64_t strides[2];
    cr_expect_eq(nn_contiguous_strides(2, dims, strides), NN_E_OVERFLOW);
    expect_message("nn_contiguous_strides: the element count of dims 4294967296x4294967296 "
                   "overflows int64");
    nn_ctx *ctx = ref_ctx();
    nn_tensor e;
    cr_expect_eq(nn_tensor_empty(ctx, NN_DTYPE_F32, 2, dims, &e), NN_E_OVERFLOW);
    expect_message("nn_tensor_empty: the element count of dims 4294967296x4294967296 overflows");
    int64_t big[2] = {G, G / 4};
    cr_expect_eq(nn_tensor_empty(ctx, NN_DTYPE_F64, 2, big, &e), NN_E_OVERFLOW);
    expect_message("nn_tensor_empty: the byte extent of dims 4294967296x1073741824 (f64)");
    nn_ctx_destroy(ctx);
}

Test(tensor_bad_input, misaligned_data_is_refused)
{
    static double buf[16];
    int64_t dims[1] = {4};
    static const struct {
        nn_dtype dtype;
        size_t offset, aligned_to;
    } cases[] = {{NN_DTYPE_F32, 1, 1},
                 {NN_DTYPE_F32, 2, 2},
                 {NN_DTYPE_F64, 4, 4},
                 {NN_DTYPE_F16, 1, 1},
                 {NN_DTYPE_BF16, 3, 1}};
    nn_ctx *ctx = ref_ctx();
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        void *p = (char *)buf + 8 + cases[i].offset;
        nn_tensor t = view(p, cases[i].dtype, 1, dims);
        cr_expect_eq(nn_tensor_validate(&t, "x"), NN_E_INVALID_ARG);
        char want[96];
        snprintf(want, sizeof want, "is aligned to %zu byte(s), but %s elements need %zu",
                 cases[i].aligned_to, nn_dtype_name(cases[i].dtype), nn_dtype_size(cases[i].dtype));
        expect_message(want);
        expect_message("nn_tensor_validate: x.data");
        /* Nothing dereferences it (UBSan would say so). */
        cr_expect_eq(nn_tensor_fill_constant(ctx, &t, 1.0), NN_E_INVALID_ARG);
        expect_message("nn_tensor_fill_constant: t.data");
        nn_tensor ok = view(buf, cases[i].dtype, 1, dims);
        cr_expect_eq(nn_tensor_copy(ctx, &ok, &t), NN_E_INVALID_ARG);
        expect_message("nn_tensor_copy: src.data");
        nn_tensor w;
        cr_expect_eq(nn_tensor_wrap(ctx, p, cases[i].dtype, 1, dims, NULL, &w), NN_E_INVALID_ARG);
        expect_message("nn_tensor_wrap: data (");
        cr_expect_null(w.data);
        cr_expect_eq(nn__check_tensor(ctx, "nn_conv_forward", &t, "dx"), NN_E_INVALID_ARG);
        expect_message("nn_conv_forward: dx.data");
    }
    nn_ctx_destroy(ctx);
}

Test(tensor_bad_input, reserved_fields_must_be_zero)
{
    float buf[4];
    int64_t dims[1] = {4};
    nn_tensor t = view(buf, NN_DTYPE_F32, 1, dims);
    t.reserved[0] = 7;
    cr_expect_eq(nn_tensor_validate(&t, "x"), NN_E_INVALID_ARG);
    expect_message("nn_tensor_validate: x.reserved[0] must be 0, got 7");
    t.reserved[0] = 0;
    t.flags = 6;
    cr_expect_eq(nn_tensor_validate(&t, "x"), NN_E_INVALID_ARG);
    expect_message("nn_tensor_validate: x.flags must be 0 or NN_TENSOR_BORROWED (1), got 6");
    t.flags = NN_TENSOR_BORROWED;
    cr_expect_eq(nn_tensor_validate(&t, "x"), NN_OK, "an imported view is a valid view");

    nn_settings s;
    cr_assert_eq(nn_settings_from_env(&s), NN_OK);
    s.backend = NN_BACKEND_REF;
    s.reserved[3] = 7;
    nn_ctx *ctx = (nn_ctx *)1;
    cr_expect_eq(nn_ctx_create(&ctx, &s), NN_E_INVALID_ARG);
    expect_message("nn_ctx_create: settings.reserved[3] must be 0, got 7");
    cr_expect_null(ctx);
}

Test(tensor_bad_input, self_overlap_helper)
{
    static float buf[64];
    int64_t dims[3] = {2, 3, 4};
    nn_tensor t = view(buf, NN_DTYPE_F32, 3, dims);
    cr_expect_not(nn__tensor_self_overlaps(&t));
    /* A permutation of a packed layout (NHWC-like) and a padded layout are distinct. */
    t.strides[0] = 1, t.strides[1] = 8, t.strides[2] = 2;
    cr_expect_not(nn__tensor_self_overlaps(&t));
    t.strides[0] = 16, t.strides[1] = 5, t.strides[2] = 1;
    cr_expect_not(nn__tensor_self_overlaps(&t));
    /* Stride 0 on a dim > 1; strides that reach the same element twice. */
    t.strides[0] = 0, t.strides[1] = 4, t.strides[2] = 1;
    cr_expect(nn__tensor_self_overlaps(&t));
    t.strides[0] = 12, t.strides[1] = 3, t.strides[2] = 1;
    cr_expect(nn__tensor_self_overlaps(&t));
    t.strides[0] = 1, t.strides[1] = 1, t.strides[2] = 1;
    cr_expect(nn__tensor_self_overlaps(&t));
    /* Conservative: 2x3 with strides 3 and 2 has distinct offsets (0 2 4 3 5 7) but the sorted
     * test cannot prove it. */
    int64_t d23[2] = {2, 3};
    nn_tensor v = view(buf, NN_DTYPE_F32, 2, d23);
    v.strides[0] = 3, v.strides[1] = 2;
    cr_expect(nn__tensor_self_overlaps(&v));
    /* A stride 0 on a dim of 1 is harmless. */
    int64_t one[2] = {1, 4};
    nn_tensor u = view(buf, NN_DTYPE_F32, 2, one);
    u.strides[0] = 0;
    cr_expect_not(nn__tensor_self_overlaps(&u));
}

Test(tensor_bad_input, copy_refuses_overlap_and_self_overlapping_dst)
{
    nn_ctx *ctx = ref_ctx();
    float buf[16];
    for (int i = 0; i < 16; i++)
        buf[i] = (float)i;
    int64_t dims[1] = {8};
    nn_tensor a = view(buf, NN_DTYPE_F32, 1, dims);
    nn_tensor b = view(buf + 4, NN_DTYPE_F32, 1, dims);
    cr_expect_eq(nn_tensor_copy(ctx, &b, &a), NN_E_INVALID_ARG);
    expect_message("nn_tensor_copy: dst and src must not overlap in memory");
    cr_expect_eq(nn_tensor_copy(ctx, &a, &a), NN_E_INVALID_ARG);
    cr_expect_eq(buf[5], 5.0f, "nothing was written");
    /* Disjoint halves of one buffer are fine. */
    nn_tensor c = view(buf + 8, NN_DTYPE_F32, 1, dims);
    cr_expect_eq(nn_tensor_copy(ctx, &c, &a), NN_OK);
    cr_expect_eq(buf[15], 7.0f);

    int64_t d2[2] = {2, 4};
    float out[8], in[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    nn_tensor dst = view(out, NN_DTYPE_F32, 2, d2);
    nn_tensor src = view(in, NN_DTYPE_F32, 2, d2);
    dst.strides[0] = 0;
    cr_expect_eq(nn_tensor_copy(ctx, &dst, &src), NN_E_INVALID_ARG);
    expect_message("nn_tensor_copy: dst is written, so its elements must not share memory, but "
                   "dims 2x4 with strides 0x1");
    /* A broadcast source is fine. */
    dst.strides[0] = 4;
    src.strides[0] = 0;
    cr_expect_eq(nn_tensor_copy(ctx, &dst, &src), NN_OK);
    cr_expect_eq(out[4], 1.0f);
    nn_ctx_destroy(ctx);
}

Test(tensor_bad_input, fill_bounds)
{
    nn_ctx *ctx = ref_ctx();
    double d[4];
    float f[4];
    uint16_t h[4];
    int64_t dims[1] = {4};
    nn_tensor td = view(d, NN_DTYPE_F64, 1, dims);
    nn_tensor tf = view(f, NN_DTYPE_F32, 1, dims);
    nn_tensor th = view(h, NN_DTYPE_F16, 1, dims);
    nn_tensor tb = view(h, NN_DTYPE_BF16, 1, dims);

    cr_expect_eq(nn_tensor_fill_uniform(ctx, &td, -DBL_MAX, DBL_MAX, 1), NN_E_INVALID_ARG);
    expect_message("nn_tensor_fill_uniform: the width hi - lo must be finite");
    cr_expect_eq(nn_tensor_fill_uniform(ctx, &td, -DBL_MAX / 2, DBL_MAX / 2, 1), NN_OK);
    for (int i = 0; i < 4; i++)
        cr_expect(isfinite(d[i]));
    cr_expect_eq(nn_tensor_fill_uniform(ctx, &td, NAN, 1, 1), NN_E_INVALID_ARG);
    cr_expect_eq(nn_tensor_fill_uniform(ctx, &td, 0, INFINITY, 1), NN_E_INVALID_ARG);
    cr_expect_eq(nn_tensor_fill_uniform(ctx, &tf, 0, 1e39, 1), NN_E_INVALID_ARG);
    expect_message("nn_tensor_fill_uniform: hi=1e+39 does not fit in f32");
    cr_expect_eq(nn_tensor_fill_uniform(ctx, &th, -70000, 0, 1), NN_E_INVALID_ARG);
    expect_message("lo=-70000 does not fit in f16 (largest finite 65504)");
    cr_expect_eq(nn_tensor_fill_uniform(ctx, &th, -65504, 65504, 1), NN_OK);

    cr_expect_eq(nn_tensor_fill_constant(ctx, &tf, 1e300), NN_E_INVALID_ARG);
    expect_message("nn_tensor_fill_constant: value=1e+300 does not fit in f32");
    cr_expect_eq(nn_tensor_fill_constant(ctx, &tf, NAN), NN_OK, "NaN is filled as asked");
    cr_expect(isnan(f[3]));
    cr_expect_eq(nn_tensor_fill_constant(ctx, &tf, -INFINITY), NN_OK);
    cr_expect(isinf(f[0]));

    cr_expect_eq(nn_tensor_fill_ints(ctx, &th, 0, 4096, 1), NN_E_INVALID_ARG);
    expect_message("nn_tensor_fill_ints: lo=0 and hi=4096 must lie in [-2048, 2048]");
    cr_expect_eq(nn_tensor_fill_ints(ctx, &tb, -300, 0, 1), NN_E_INVALID_ARG);
    cr_expect_eq(nn_tensor_fill_ints(ctx, &tf, INT_MIN, 0, 1), NN_E_INVALID_ARG);
    cr_expect_eq(nn_tensor_fill_ints(ctx, &td, INT_MIN, INT_MAX, 1), NN_OK);
    cr_expect_eq(nn_tensor_fill_ints(ctx, &th, -2048, 2048, 1), NN_OK);
    cr_expect_eq(nn_tensor_fill_ints(ctx, &tf, 3, 2, 1), NN_E_INVALID_ARG);
    expect_message("nn_tensor_fill_ints: need lo <= hi, got lo=3 hi=2");

    /* A broadcast output would keep only the last value drawn. */
    tf.strides[0] = 0;
    cr_expect_eq(nn_tensor_fill_uniform(ctx, &tf, 0, 1, 1), NN_E_INVALID_ARG);
    expect_message("nn_tensor_fill_uniform: t is written");
    nn_ctx_destroy(ctx);
}

Test(tensor_bad_input, device_views_on_a_reference_context)
{
    nn_ctx *ctx = ref_ctx();
    float buf[4];
    int64_t dims[1] = {4};
    nn_tensor host = view(buf, NN_DTYPE_F32, 1, dims);
    float other[4];
    nn_tensor dev = view(other, NN_DTYPE_F32, 1, dims);
    dev.space = NN_SPACE_DEVICE;
    dev.device = 0;
    cr_expect_eq(nn_tensor_copy(ctx, &host, &dev), NN_E_MEMSPACE);
    expect_message("nn_tensor_copy: src is in device memory of device 0, which needs a cuDNN "
                   "context");
    cr_expect_eq(nn_tensor_copy(ctx, &dev, &host), NN_E_MEMSPACE);
    expect_message("nn_tensor_copy: dst is in device memory");
    cr_expect_eq(nn_tensor_fill_ints(ctx, &dev, 0, 3, 1), NN_E_MEMSPACE);
    expect_message("nn_tensor_fill_ints: t is in device memory of device 0");
    cr_expect_eq(nn_tensor_fill_uniform(ctx, &dev, 0, 1, 1), NN_E_MEMSPACE);
    cr_expect_eq(nn_tensor_fill_constant(ctx, &dev, 0), NN_E_MEMSPACE);
    cr_expect_eq(nn_tensor_free(ctx, &dev), NN_E_MEMSPACE);
    expect_message("nn_tensor_free: t is device memory of device 0");
    dev.device = -3;
    cr_expect_eq(nn_tensor_validate(&dev, "x"), NN_E_INVALID_ARG);
    expect_message("x.device must be a CUDA ordinal >= 0 for device memory, got -3");
    nn_ctx_destroy(ctx);
}

Test(tensor_bad_input, messages_name_the_function_and_the_argument)
{
    float buf[4];
    int64_t dims[2] = {2, 2};
    nn_tensor t = view(buf, NN_DTYPE_F32, 2, dims);
    size_t n;
    cr_expect_eq(nn_tensor_extent_bytes(NULL, &n), NN_E_INVALID_ARG);
    expect_message("nn_tensor_extent_bytes: t must not be NULL");
    cr_expect_eq(nn_tensor_extent_bytes(&t, NULL), NN_E_INVALID_ARG);
    expect_message("nn_tensor_extent_bytes: out must not be NULL");
    t.strides[1] = -1;
    cr_expect_eq(nn_tensor_extent_bytes(&t, &n), NN_E_INVALID_ARG);
    expect_message("nn_tensor_extent_bytes: t.strides[1] must be >= 0, got -1");
    int64_t s[2];
    cr_expect_eq(nn_contiguous_strides(2, dims, NULL), NN_E_INVALID_ARG);
    expect_message("nn_contiguous_strides: strides must not be NULL");
    cr_expect_eq(nn_contiguous_strides(9, dims, s), NN_E_INVALID_ARG);
    expect_message("nn_contiguous_strides: rank must be in [1, 8], got 9");

    nn_ctx *ctx = ref_ctx();
    nn_tensor e;
    int64_t bad[2] = {2, 0};
    cr_expect_eq(nn_tensor_empty(ctx, NN_DTYPE_F32, 2, bad, &e), NN_E_INVALID_ARG);
    expect_message("nn_tensor_empty: dims[1] must be >= 1, got 0");
    cr_expect_eq(nn_tensor_empty(ctx, (nn_dtype)42, 2, dims, &e), NN_E_DTYPE);
    expect_message("nn_tensor_empty: dtype must be f32, f64, f16 or bf16, got 42");
    cr_expect_eq(nn_tensor_empty(ctx, NN_DTYPE_F32, 2, NULL, &e), NN_E_INVALID_ARG);
    expect_message("nn_tensor_empty: dims must not be NULL");
    int64_t str[2] = {1, -2};
    cr_expect_eq(nn_tensor_wrap(ctx, buf, NN_DTYPE_F32, 2, dims, str, &e), NN_E_INVALID_ARG);
    expect_message("nn_tensor_wrap: strides[1] must be >= 0, got -2");
    nn_error_info info;
    cr_expect_eq(nn_ctx_last_error(ctx, &info), NN_OK);
    cr_expect(strstr(info.message, "nn_tensor_wrap: strides[1]"), "the context has it too: %s",
              info.message);
    cr_expect_eq(nn_tensor_free(ctx, &t), NN_E_BAD_POINTER);
    expect_message("nn_tensor_free: t.data");
    nn_tensor a = view(buf, NN_DTYPE_F32, 2, dims), b = view(buf, NN_DTYPE_F64, 2, dims);
    cr_expect_eq(nn_tensor_copy(ctx, &a, &b), NN_E_DTYPE);
    expect_message("nn_tensor_copy: dst.dtype (f32) must equal src.dtype (f64)");
    nn_ctx_destroy(ctx);
}

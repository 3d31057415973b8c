/* The one-pass checks of core/tensor.c against the checks they stand for, on edge cases and on
 * seeded sweeps of mutated views: the fast accepts of nn__tensor_validate and nn__check_tensor
 * must accept exactly the views the step-by-step checks accept. Views are never dereferenced:
 * their data are addresses only. */
#include <criterion/criterion.h>
#include <stdint.h>
#include <string.h>

#include "core/ctx.h"
#include "core/tensor_util.h"
#include "nnprim/nnprim.h"

static uint64_t next(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static int64_t pick(uint64_t *s, const int64_t *v, size_t n)
{
    return v[next(s) % n];
}

#define PICK(s, arr) pick((s), (arr), sizeof(arr) / sizeof((arr)[0]))

static _Alignas(256) unsigned char arena[1 << 16];

/* A packed view of small random dims at an aligned place of the arena. */
static nn_tensor packed(uint64_t *s, nn_space space, int device)
{
    static const nn_dtype dts[] = {NN_DTYPE_F32, NN_DTYPE_F64, NN_DTYPE_F16, NN_DTYPE_BF16};
    nn_tensor t;
    memset(&t, 0, sizeof t);
    t.dtype = dts[next(s) % 4];
    t.rank = 1 + (int)(next(s) % 4);
    for (int i = 0; i < t.rank; i++)
        t.dims[i] = 1 + (int64_t)(next(s) % 4);
    cr_assert_eq(nn_contiguous_strides(t.rank, t.dims, t.strides), NN_OK);
    t.data = arena + 8 * (next(s) % 1024);
    t.space = space;
    t.device = device;
    return t;
}

/* One or two of t's fields replaced by an edge value. */
static void mutate(uint64_t *s, nn_tensor *t)
{
    static const int64_t dims[] = {0,
                                   -1,
                                   1,
                                   2,
                                   5,
                                   INT64_MAX,
                                   INT64_MIN,
                                   (int64_t)1 << 31,
                                   (int64_t)1 << 32,
                                   (int64_t)1 << 62,
                                   ((int64_t)1 << 61) + 1};
    static const int64_t strides[] = {0,
                                      -1,
                                      1,
                                      2,
                                      7,
                                      INT64_MAX,
                                      INT64_MIN,
                                      (int64_t)1 << 31,
                                      (int64_t)1 << 60,
                                      ((int64_t)1 << 62) + 3};
    static const int64_t ranks[] = {0, 1, 2, 3, 8, 9, -1};
    static const int64_t dtypes[] = {
        NN_DTYPE_F32, NN_DTYPE_F64, NN_DTYPE_F16, NN_DTYPE_BF16, 4, -1};
    int n = 1 + (int)(next(s) % 2);
    for (int k = 0; k < n; k++) {
        int i = (int)(next(s) % NN_MAX_RANK);
        switch (next(s) % 10) {
        case 0: t->dims[i] = PICK(s, dims); break;
        case 1: t->strides[i] = PICK(s, strides); break;
        case 2: t->strides[i] += (next(s) % 2) ? 1 : -1; break;
        case 3: t->rank = (int)PICK(s, ranks); break;
        case 4: t->dtype = (nn_dtype)PICK(s, dtypes); break;
        case 5: t->data = (unsigned char *)t->data + (next(s) % 3); break;
        case 6: t->data = (next(s) % 2) ? NULL : (void *)(UINTPTR_MAX - 7); break;
        case 7: t->space = (nn_space)(next(s) % 3); break;
        case 8: t->device = (int)(next(s) % 3) - 1; break;
        case 9: t->reserved[next(s) % 2] = 1; break;
        }
    }
}

/* What nn__tensor_validate accepts, from the step-by-step pieces: nn_tensor_extent_bytes (dtype,
 * rank, dims, strides, extent and count) and the fields it does not read. */
static int valid_by_parts(const nn_tensor *t)
{
    size_t bytes;
    if (nn_tensor_extent_bytes(t, &bytes) != NN_OK || !t->data) return 0;
    if ((uintptr_t)t->data % nn_dtype_size(t->dtype)) return 0;
    if (t->space != NN_SPACE_HOST && t->space != NN_SPACE_DEVICE) return 0;
    if (t->space == NN_SPACE_DEVICE && t->device < 0) return 0;
    return !t->reserved[0] && !t->reserved[1];
}

/* A context that only its fields make: the reference backend, or a cuDNN one of device 0 (no
 * check here calls CUDA for it). */
static struct nn_ctx fake_ctx(nn_backend backend)
{
    struct nn_ctx c;
    memset(&c, 0, sizeof c);
    c.settings.backend = backend;
    c.device = backend == NN_BACKEND_CUDNN ? 0 : -1;
    return c;
}

Test(tensor_fast, validate_accepts_what_the_checks_accept)
{
    uint64_t s = 11;
    int accepted = 0;
    for (int trial = 0; trial < 20000; trial++) {
        nn_tensor t = packed(&s, (next(&s) % 2) ? NN_SPACE_HOST : NN_SPACE_DEVICE, 0);
        if (trial % 4) mutate(&s, &t);
        nn_status st = nn_tensor_validate(&t, "t");
        cr_assert_eq(st == NN_OK, valid_by_parts(&t), "trial %d: status %s (%s)", trial,
                     nn_status_name(st), st ? nn_last_error()->message : "");
        accepted += st == NN_OK;
    }
    cr_expect_gt(accepted, 5000);
}

Test(tensor_fast, validate_edge_cases)
{
    static _Alignas(8) double d[1];
    nn_tensor t;
    memset(&t, 0, sizeof t);
    t.data = d;
    t.dtype = NN_DTYPE_F64;
    t.space = NN_SPACE_HOST;
    t.rank = 2;
    /* a zero stride makes a one-element extent hold 2^63 elements: the count overflows */
    t.dims[0] = (int64_t)1 << 32, t.dims[1] = (int64_t)1 << 31;
    cr_expect_eq(nn_tensor_validate(&t, "t"), NN_E_OVERFLOW);
    cr_expect(strstr(nn_last_error()->message, "element count"));
    /* 2^60 elements of 8 bytes are 2^63 bytes, one past INT64_MAX; a row fewer fits */
    t.dims[0] = (int64_t)1 << 28, t.dims[1] = (int64_t)1 << 32;
    t.strides[0] = t.dims[1], t.strides[1] = 1;
    cr_expect_eq(nn_tensor_validate(&t, "t"), NN_E_OVERFLOW);
    cr_expect(strstr(nn_last_error()->message, "byte extent"));
    t.dims[0] = ((int64_t)1 << 28) - 1;
    cr_expect_eq(nn_tensor_validate(&t, "t"), NN_OK);
    /* the last offset itself wraps uint64 */
    t.dims[0] = 3, t.strides[0] = INT64_MAX;
    cr_expect_eq(nn_tensor_validate(&t, "t"), NN_E_OVERFLOW);
    /* a negative stride is refused even on a dim of 1, whose stride moves nothing */
    t.dims[0] = 1, t.strides[0] = -4;
    cr_expect_eq(nn_tensor_validate(&t, "t"), NN_E_INVALID_ARG);
    cr_expect(strstr(nn_last_error()->message, "t.strides[0] must be >= 0, got -4"));
    /* the first failure in the checks' order is the one reported: dims before strides */
    t.dims[1] = 0;
    cr_expect_eq(nn_tensor_validate(&t, "t"), NN_E_INVALID_ARG);
    cr_expect(strstr(nn_last_error()->message, "t.dims[1] must be >= 1, got 0"));
    /* rank 8 of ones, any non-negative strides */
    t.rank = 8;
    for (int i = 0; i < 8; i++)
        t.dims[i] = 1, t.strides[i] = i * 1000;
    cr_expect_eq(nn_tensor_validate(&t, "t"), NN_OK);
}

Test(tensor_fast, check_tensor_accepts_what_the_checks_accept)
{
    nn_backend backends[] = {NN_BACKEND_REF, NN_BACKEND_CUDNN};
    for (int k = 0; k < 2; k++) {
        struct nn_ctx c = fake_ctx(backends[k]);
        nn_space home = k ? NN_SPACE_DEVICE : NN_SPACE_HOST;
        uint64_t s = 23 + (uint64_t)k;
        for (int trial = 0; trial < 20000; trial++) {
            nn_tensor t = packed(&s, (next(&s) % 8) ? home : (nn_space)(1 - home), 0);
            if (trial % 3) mutate(&s, &t);
            int at_home =
                k ? t.space == NN_SPACE_DEVICE && t.device == c.device : t.space == NN_SPACE_HOST;
            int ok = nn__check_tensor(&c, "f", &t, "t") == NN_OK;
            cr_assert_eq(ok, valid_by_parts(&t) && at_home, "trial %d: nn__check_tensor %d (%s)",
                         trial, ok, ok ? "" : nn_last_error()->message);
        }
    }
}

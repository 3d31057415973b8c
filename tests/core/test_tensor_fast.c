/* The one-pass checks of core/tensor.c against the checks they stand for, on edge cases and on
 * seeded sweeps of mutated views: the fast accepts of nn__tensor_validate and nn__check_tensor
 * (each must accept exactly the views the step-by-step checks accept), nn__tensors_overlap (byte
 * ranges, reading one extent), nn__check_output (nn__check_no_overlap, one view against many),
 * nn__tensor_self_overlaps' in-order pass (the sorted test) and nn__tensor_plain
 * (nn__check_tensor plus natural strides). Views are never dereferenced: their data are
 * addresses only. */
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

/* v one up or down, held at int64's ends (a hostile value stays one). */
static int64_t nudged(int64_t v, int up)
{
    return up ? (v < INT64_MAX ? v + 1 : v) : (v > INT64_MIN ? v - 1 : v);
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
        case 2: t->strides[i] = nudged(t->strides[i], next(s) % 2); break;
        case 3: t->rank = (int)PICK(s, ranks); break;
        case 4: t->dtype = (nn_dtype)PICK(s, dtypes); break;
        case 5: t->data = (unsigned char *)t->data + (next(s) % 3); break;
        case 6: t->data = (next(s) % 2) ? NULL : (void *)(UINTPTR_MAX - 7); break;
        case 7: t->space = (nn_space)(next(s) % 3); break;
        case 8: t->device = (int)(next(s) % 3) - 1; break;
        case 9:
            if (next(s) % 2)
                t->reserved[0] = 1;
            else
                t->flags = next(s) % 3;
            break;
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
    return !t->reserved[0] && t->flags <= NN_TENSOR_BORROWED;
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

/* [data, data + extent) of valid views in the same memory intersect (in 128 bits: no wrap). */
static int overlap_oracle(const nn_tensor *a, const nn_tensor *b)
{
    if (a->space != b->space || (a->space == NN_SPACE_DEVICE && a->device != b->device)) return 0;
    size_t ea, eb;
    cr_assert_eq(nn_tensor_extent_bytes(a, &ea), NN_OK);
    cr_assert_eq(nn_tensor_extent_bytes(b, &eb), NN_OK);
    unsigned __int128 pa = (uintptr_t)a->data, pb = (uintptr_t)b->data;
    return pa < pb + eb && pb < pa + ea;
}

/* A valid view, maybe strided, at a random aligned address: in the arena, or near the top of
 * the address space (extents that wrap). */
static nn_tensor placed(uint64_t *s)
{
    nn_tensor t = packed(s, (next(s) % 6) ? NN_SPACE_HOST : NN_SPACE_DEVICE, (int)(next(s) % 2));
    for (int i = 0; i < t.rank; i++)
        if (next(s) % 3 == 0) t.strides[i] = (int64_t)(next(s) % 40);
    if (next(s) % 10 == 0) t.data = (void *)(UINTPTR_MAX - 255 - 8 * (next(s) % 16));
    cr_assert_eq(nn_tensor_validate(&t, "t"), NN_OK);
    return t;
}

Test(tensor_fast, overlap_agrees_with_byte_ranges)
{
    uint64_t s = 5;
    for (int trial = 0; trial < 20000; trial++) {
        nn_tensor t = placed(&s), o[6];
        const nn_tensor *others[6];
        const char *names[6] = {"a", "b", "c", "d", "e", "f"};
        int n = (int)(next(&s) % 7);
        for (int i = 0; i < n; i++) {
            o[i] = placed(&s);
            if (next(&s) % 4 == 0) o[i].data = (unsigned char *)t.data + 8 * (next(&s) % 8);
            others[i] = (next(&s) % 5) ? &o[i] : NULL;
            int want = overlap_oracle(&t, &o[i]);
            cr_assert_eq(nn__tensors_overlap(&t, &o[i]), want, "trial %d pair %d", trial, i);
            cr_assert_eq(nn__tensors_overlap(&o[i], &t), want, "trial %d pair %d", trial, i);
        }

        /* nn__check_output: the same status and message as its checks one by one */
        nn_status seq = nn__check_output_distinct(NULL, "f", &t, "t");
        for (int i = 0; seq == NN_OK && i < n; i++)
            if (others[i]) seq = nn__check_no_overlap(NULL, "f", &t, "t", others[i], names[i]);
        char want[sizeof nn_last_error()->message];
        strcpy(want, seq ? nn_last_error()->message : "");
        nn_status got = nn__check_output(NULL, "f", &t, "t", others, names, n);
        cr_assert_eq(got, seq, "trial %d", trial);
        if (got) cr_assert_str_eq(nn_last_error()->message, want, "trial %d", trial);
    }
}

/* nn__tensor_self_overlaps before its in-order pass: dims > 1 sorted by stride, each stepping
 * past the span of the smaller ones. */
static int self_overlaps_sorted(const nn_tensor *t)
{
    int64_t d[NN_MAX_RANK], st[NN_MAX_RANK];
    int n = 0;
    for (int i = 0; i < t->rank; i++) {
        if (t->dims[i] == 1) continue;
        if (t->strides[i] == 0) return 1;
        int k = n++;
        for (; k > 0 && st[k - 1] > t->strides[i]; k--)
            st[k] = st[k - 1], d[k] = d[k - 1];
        st[k] = t->strides[i], d[k] = t->dims[i];
    }
    int64_t span = 0;
    for (int k = 0; k < n; k++) {
        if (st[k] <= span) return 1;
        span += (d[k] - 1) * st[k];
    }
    return 0;
}

/* Some two elements share an offset (small views only). */
static int shares_offset(const nn_tensor *t)
{
    static unsigned char seen[1 << 14];
    memset(seen, 0, sizeof seen);
    int64_t n = nn_tensor_numel(t);
    for (int64_t lin = 0; lin < n; lin++) {
        int64_t off = 0, rest = lin;
        for (int i = t->rank - 1; i >= 0; i--) {
            off += (rest % t->dims[i]) * t->strides[i];
            rest /= t->dims[i];
        }
        cr_assert_lt(off, (int64_t)sizeof seen);
        if (seen[off]++) return 1;
    }
    return 0;
}

Test(tensor_fast, self_overlap_in_order_pass_is_the_sorted_test)
{
    uint64_t s = 17;
    int distinct = 0;
    for (int trial = 0; trial < 20000; trial++) {
        nn_tensor t = packed(&s, NN_SPACE_HOST, -1);
        int kind = (int)(next(&s) % 4);
        for (int i = 0; i < t.rank; i++) {
            if (kind == 1) t.strides[i] = (int64_t)(next(&s) % 24); /* anything */
            if (kind == 2) t.strides[i] += (int64_t)(next(&s) % 3); /* padded */
        }
        if (kind == 3 && t.rank > 1) { /* dims permuted, strides kept */
            int a = (int)(next(&s) % (uint64_t)t.rank), b = (int)(next(&s) % (uint64_t)t.rank);
            int64_t dd = t.dims[a], ss = t.strides[a];
            t.dims[a] = t.dims[b], t.strides[a] = t.strides[b];
            t.dims[b] = dd, t.strides[b] = ss;
        }
        int got = nn__tensor_self_overlaps(&t);
        cr_assert_eq(got, self_overlaps_sorted(&t), "trial %d", trial);
        if (!got) cr_assert(!shares_offset(&t), "trial %d: proven distinct, but two share", trial);
        distinct += !got;
    }
    cr_expect_gt(distinct, 5000);
}

static int natural_strides(const nn_tensor *t)
{
    int64_t s[NN_MAX_RANK];
    if (nn_contiguous_strides(t->rank, t->dims, s) != NN_OK) return 0;
    return memcmp(s, t->strides, (size_t)t->rank * sizeof s[0]) == 0;
}

Test(tensor_fast, plain_is_check_tensor_with_natural_strides)
{
    nn_backend backends[] = {NN_BACKEND_REF, NN_BACKEND_CUDNN};
    for (int k = 0; k < 2; k++) {
        struct nn_ctx c = fake_ctx(backends[k]);
        nn_space home = k ? NN_SPACE_DEVICE : NN_SPACE_HOST;
        uint64_t s = 29 + (uint64_t)k;
        for (int trial = 0; trial < 20000; trial++) {
            nn_tensor t = packed(&s, (next(&s) % 8) ? home : (nn_space)(1 - home), 0);
            if (trial % 3) mutate(&s, &t);
            size_t bytes = 12345, want = 0;
            int plain = nn__tensor_plain(&c, &t, &bytes);
            int ok = nn__check_tensor(&c, "f", &t, "t") == NN_OK && natural_strides(&t);
            cr_assert_eq(plain, ok, "trial %d: plain %d, checks %d (%s)", trial, plain, ok,
                         ok ? "" : nn_last_error()->message);
            if (plain) {
                cr_assert_eq(nn_tensor_extent_bytes(&t, &want), NN_OK);
                cr_assert_eq(bytes, want, "trial %d: extent %zu, want %zu", trial, bytes, want);
            } else {
                cr_assert_eq(bytes, 12345, "trial %d: *bytes written on 0", trial);
            }
        }
        /* a dim of 1 with another stride is packed (nn_tensor_is_contiguous) but not natural:
         * the caller's checks decide */
        nn_tensor t = packed(&s, home, 0);
        t.rank = 2, t.dims[0] = 1, t.dims[1] = 3, t.strides[0] = 7, t.strides[1] = 1;
        size_t bytes;
        cr_expect(nn_tensor_is_contiguous(&t));
        cr_expect(!nn__tensor_plain(&c, &t, &bytes));
        /* another device than a cuDNN context's is not plain */
        t.strides[0] = 3, t.device = 1;
        cr_expect_eq(nn__tensor_plain(&c, &t, &bytes), !k);
    }
}

/* Catalogue rows: tensor views, their storage, copies and fills (tensor.h). */
#include <float.h>
#include <limits.h>
#include <math.h>
#include <string.h>

#include "catalogue.h"

#define CALL(fname) static nn_status fname(struct cat *c)

static const int64_t D2[] = {2, 3};

/* ---- plain functions (edge rows) ---- */

CALL(dtype_size_bad)
{
    (void)c;
    cr_assert_eq(nn_dtype_size((nn_dtype)0), 0);
    cr_assert_eq(nn_dtype_size((nn_dtype)-3), 0);
    cr_assert_str_eq(nn_dtype_name((nn_dtype)77), "invalid");
    return NN_OK;
}
CALL(numel_overflow)
{
    (void)c;
    nn_tensor t = {0};
    t.rank = 3;
    t.dims[0] = t.dims[1] = t.dims[2] = INT64_C(1) << 32;
    cr_assert_eq(nn_tensor_numel(&t), -1, "an overflowing count is -1 (tensor.h)");
    cr_assert_eq(nn_tensor_numel(NULL), 0);
    t.rank = 0;
    cr_assert_eq(nn_tensor_numel(&t), 0);
    return NN_OK;
}
CALL(contiguous_overflow)
{
    (void)c;
    nn_tensor t = {0};
    t.rank = 3;
    t.dims[0] = t.dims[1] = t.dims[2] = INT64_C(1) << 32;
    t.strides[2] = 1;
    t.strides[1] = INT64_C(1) << 32;
    t.strides[0] = 0;
    cr_assert_eq(nn_tensor_is_contiguous(&t), 0);
    cr_assert_eq(nn_tensor_is_contiguous(NULL), 0);
    return NN_OK;
}

/* ---- nn_tensor_validate ---- */

static nn_status validate_with(struct cat *c, void (*edit)(nn_tensor *))
{
    nn_tensor t = c->x;
    edit(&t);
    return nn_tensor_validate(&t, "t");
}
static void e_rank0(nn_tensor *t)
{
    t->rank = 0;
}
static void e_rank9(nn_tensor *t)
{
    t->rank = 9;
}
static void e_dim0(nn_tensor *t)
{
    t->dims[2] = 0;
}
static void e_dimneg(nn_tensor *t)
{
    t->dims[0] = INT64_MIN;
}
static void e_strideneg(nn_tensor *t)
{
    t->strides[1] = -1;
}
static void e_datanull(nn_tensor *t)
{
    t->data = NULL;
}
static void e_space(nn_tensor *t)
{
    t->space = (nn_space)3;
}
static void e_dtype(nn_tensor *t)
{
    t->dtype = (nn_dtype)0;
}
static void e_extent(nn_tensor *t)
{
    t->strides[0] = INT64_MAX / 2;
    t->dims[0] = 4;
}
static void e_misaligned(nn_tensor *t)
{
    t->data = (char *)t->data + 1;
}
static void e_reserved(nn_tensor *t)
{
    t->reserved[0] = 1;
}
static void e_flags(nn_tensor *t)
{
    t->flags = 2;
}
CALL(v_null)
{
    (void)c;
    return nn_tensor_validate(NULL, "t");
}
CALL(v_rank0)
{
    return validate_with(c, e_rank0);
}
CALL(v_rank9)
{
    return validate_with(c, e_rank9);
}
CALL(v_dim0)
{
    return validate_with(c, e_dim0);
}
CALL(v_dimneg)
{
    return validate_with(c, e_dimneg);
}
CALL(v_strideneg)
{
    return validate_with(c, e_strideneg);
}
CALL(v_datanull)
{
    return validate_with(c, e_datanull);
}
CALL(v_space)
{
    return validate_with(c, e_space);
}
CALL(v_dtype)
{
    return validate_with(c, e_dtype);
}
CALL(v_extent)
{
    return validate_with(c, e_extent);
}
CALL(v_misaligned)
{
    return validate_with(c, e_misaligned);
}
CALL(v_flags)
{
    return validate_with(c, e_flags);
}
CALL(v_reserved)
{
    return validate_with(c, e_reserved);
}

/* ---- extent and strides ---- */

CALL(extent_null_t)
{
    size_t n;
    (void)c;
    return nn_tensor_extent_bytes(NULL, &n);
}
CALL(extent_null_out)
{
    return nn_tensor_extent_bytes(&c->x, NULL);
}
CALL(extent_overflow)
{
    nn_tensor t = c->x;
    t.dims[0] = 3;
    t.strides[0] = INT64_MAX;
    size_t n;
    return nn_tensor_extent_bytes(&t, &n);
}
CALL(strides_rank0)
{
    int64_t s[2];
    (void)c;
    return nn_contiguous_strides(0, D2, s);
}
CALL(strides_null_dims)
{
    int64_t s[2];
    (void)c;
    return nn_contiguous_strides(2, NULL, s);
}
CALL(strides_null_out)
{
    (void)c;
    return nn_contiguous_strides(2, D2, NULL);
}
CALL(strides_overflow)
{
    int64_t d[] = {INT64_C(1) << 40, INT64_C(1) << 40}, s[2];
    (void)c;
    return nn_contiguous_strides(2, d, s);
}

/* ---- nn_tensor_empty / nn_tensor_free ---- */

CALL(empty_null_ctx)
{
    nn_tensor t;
    (void)c;
    return nn_tensor_empty(NULL, NN_DTYPE_F32, 2, D2, &t);
}
CALL(empty_null_out)
{
    return nn_tensor_empty(c->ctx, NN_DTYPE_F32, 2, D2, NULL);
}
CALL(empty_dtype)
{
    nn_tensor t;
    return nn_tensor_empty(c->ctx, (nn_dtype)9, 2, D2, &t);
}
CALL(empty_rank0)
{
    nn_tensor t;
    return nn_tensor_empty(c->ctx, NN_DTYPE_F32, 0, D2, &t);
}
CALL(empty_rank9)
{
    nn_tensor t;
    return nn_tensor_empty(c->ctx, NN_DTYPE_F32, 9, D2, &t);
}
CALL(empty_null_dims)
{
    nn_tensor t;
    return nn_tensor_empty(c->ctx, NN_DTYPE_F32, 2, NULL, &t);
}
CALL(empty_dim0)
{
    int64_t d[] = {2, 0};
    nn_tensor t;
    memset(&t, 0x5a, sizeof t);
    nn_status st = nn_tensor_empty(c->ctx, NN_DTYPE_F32, 2, d, &t);
    cr_assert_null(t.data, "out is zeroed on failure");
    return st;
}
CALL(empty_count_overflow)
{
    int64_t d[] = {INT64_C(1) << 40, INT64_C(1) << 40};
    nn_tensor t;
    return nn_tensor_empty(c->ctx, NN_DTYPE_F32, 2, d, &t);
}
CALL(empty_bytes_overflow)
{
    int64_t d[] = {INT64_C(1) << 31, INT64_C(1) << 31};
    nn_tensor t;
    return nn_tensor_empty(c->ctx, NN_DTYPE_F64, 2, d, &t); /* 2^62 elements, 2^65 bytes */
}
CALL(empty_huge)
{
    int64_t d[] = {INT64_C(1) << 25, INT64_C(1) << 25}; /* 2^50 f32: 4 PiB */
    nn_tensor t;
    return nn_tensor_empty(c->ctx, NN_DTYPE_F32, 2, d, &t);
}
CALL(free_null_ctx)
{
    return nn_tensor_free(NULL, &c->x);
}
CALL(free_null_t)
{
    return nn_tensor_free(c->ctx, NULL);
}
CALL(free_twice)
{
    nn_tensor t = cat_tensor(c, NN_DTYPE_F32, 2, D2, 60), copy = t;
    cr_assert_eq(nn_tensor_free(c->ctx, &t), NN_OK, "first free");
    cr_assert_null(t.data);
    return nn_tensor_free(c->ctx, &copy);
}
CALL(free_foreign)
{
    nn_tensor t = c->x;
    t.data = (char *)t.data + 64; /* inside nnprim's block, not its start */
    return nn_tensor_free(c->ctx, &t);
}
CALL(free_caller_memory)
{
    nn_tensor t = cat_host_view(cat_host_block(c, 64), NN_DTYPE_F32, 2, D2);
    if (c->gpu) { /* a device label on caller memory */
        t.space = NN_SPACE_DEVICE;
        t.device = c->x.device;
    }
    return nn_tensor_free(c->ctx, &t);
}
CALL(free_null_data)
{
    nn_tensor t = c->x;
    t.data = NULL;
    return nn_tensor_free(c->ctx, &t);
}
CALL(free_space_label)
{
    nn_tensor t = cat_claim_other_space(c, &c->x);
    return nn_tensor_free(c->ctx, &t);
}

/* ---- nn_tensor_wrap ---- */

static nn_status wrap(struct cat *c, void *data, nn_dtype dt, int rank, const int64_t *dims,
                      const int64_t *strides)
{
    nn_tensor t;
    return nn_tensor_wrap(c->ctx, data, dt, rank, dims, strides, &t);
}
CALL(wrap_null_ctx)
{
    nn_tensor t;
    return nn_tensor_wrap(NULL, c->x.data, NN_DTYPE_F32, 2, D2, NULL, &t);
}
CALL(wrap_null_data)
{
    return wrap(c, NULL, NN_DTYPE_F32, 2, D2, NULL);
}
CALL(wrap_null_out)
{
    return nn_tensor_wrap(c->ctx, c->x.data, NN_DTYPE_F32, 2, D2, NULL, NULL);
}
CALL(wrap_dtype)
{
    return wrap(c, c->x.data, (nn_dtype)7, 2, D2, NULL);
}
CALL(wrap_rank)
{
    return wrap(c, c->x.data, NN_DTYPE_F32, 9, D2, NULL);
}
CALL(wrap_null_dims)
{
    return wrap(c, c->x.data, NN_DTYPE_F32, 2, NULL, NULL);
}
CALL(wrap_dim0)
{
    int64_t d[] = {0, 3};
    return wrap(c, c->x.data, NN_DTYPE_F32, 2, d, NULL);
}
CALL(wrap_stride_neg)
{
    int64_t s[] = {3, -1};
    return wrap(c, c->x.data, NN_DTYPE_F32, 2, D2, s);
}
CALL(wrap_misaligned)
{
    return wrap(c, (char *)c->x.data + 2, NN_DTYPE_F32, 2, D2, NULL);
}
CALL(wrap_extent)
{
    int64_t s[] = {INT64_MAX, 1};
    return wrap(c, c->x.data, NN_DTYPE_F32, 2, D2, s);
}
/* Host memory: accepted by a reference context, refused by a cuDNN one. */
CALL(wrap_host)
{
    return wrap(c, cat_host_block(c, 64), NN_DTYPE_F32, 2, D2, NULL);
}
/* nnprim's own storage of this context is accepted. */
CALL(wrap_own)
{
    return wrap(c, c->x.data, NN_DTYPE_F32, 2, D2, NULL);
}

/* ---- nn_tensor_copy ---- */

CALL(copy_null_ctx)
{
    return nn_tensor_copy(NULL, &c->dx, &c->x);
}
CALL(copy_null_dst)
{
    return nn_tensor_copy(c->ctx, NULL, &c->x);
}
CALL(copy_null_src)
{
    return nn_tensor_copy(c->ctx, &c->dx, NULL);
}
CALL(copy_dims)
{
    return nn_tensor_copy(c->ctx, &c->dx, &c->dy);
}
CALL(copy_dtype)
{
    nn_tensor d = c->dx;
    d.dtype = NN_DTYPE_F16;
    return nn_tensor_copy(c->ctx, &d, &c->x);
}
CALL(copy_overlap)
{
    nn_tensor d = c->x;
    d.data = (char *)d.data + 4;
    d.dims[3] = 4; /* 1x2x5x4 views one element apart */
    nn_tensor s = d;
    s.data = c->x.data;
    return nn_tensor_copy(c->ctx, &d, &s);
}
CALL(copy_same)
{
    return nn_tensor_copy(c->ctx, &c->x, &c->x);
}
CALL(copy_self_overlap)
{
    nn_tensor d = c->dx;
    d.strides[3] = 0;
    return nn_tensor_copy(c->ctx, &d, &c->x);
}
CALL(copy_dst_bad)
{
    nn_tensor d = c->dx;
    d.rank = 0;
    return nn_tensor_copy(c->ctx, &d, &c->x);
}
CALL(copy_src_bad)
{
    nn_tensor s = c->x;
    s.data = NULL;
    return nn_tensor_copy(c->ctx, &c->dx, &s);
}
/* Strided copies: any strides between host views; device copies must be packed. */
CALL(copy_strided)
{
    nn_tensor d = c->dx;
    d.strides[2] = 1;
    d.strides[3] = 5;
    return nn_tensor_copy(c->ctx, &d, &c->x);
}
CALL(copy_space_label)
{
    nn_tensor s = cat_claim_other_space(c, &c->x);
    return nn_tensor_copy(c->ctx, &c->dx, &s);
}

/* ---- fills ---- */

CALL(fillc_null_ctx)
{
    return nn_tensor_fill_constant(NULL, &c->x, 1.0);
}
CALL(fillc_null_t)
{
    return nn_tensor_fill_constant(c->ctx, NULL, 1.0);
}
CALL(fillc_space)
{
    nn_tensor t = cat_claim_other_space(c, &c->x);
    return nn_tensor_fill_constant(c->ctx, &t, 1.0);
}
CALL(fillc_self_overlap)
{
    nn_tensor t = c->x;
    t.strides[1] = 0;
    return nn_tensor_fill_constant(c->ctx, &t, 2.0);
}
CALL(fillc_bad)
{
    nn_tensor t = c->x;
    t.dtype = (nn_dtype)0;
    return nn_tensor_fill_constant(c->ctx, &t, 2.0);
}
CALL(fillu_null_t)
{
    return nn_tensor_fill_uniform(c->ctx, NULL, 0, 1, 1);
}
CALL(fillu_order)
{
    return nn_tensor_fill_uniform(c->ctx, &c->x, 1, 0, 1);
}
CALL(fillu_nan)
{
    return nn_tensor_fill_uniform(c->ctx, &c->x, NAN, 1, 1);
}
CALL(fillu_inf)
{
    return nn_tensor_fill_uniform(c->ctx, &c->x, 0, INFINITY, 1);
}
CALL(fillu_wide)
{
    return nn_tensor_fill_uniform(c->ctx, &c->x, -DBL_MAX, DBL_MAX, 1);
}
CALL(fillu_space)
{
    nn_tensor t = cat_claim_other_space(c, &c->x);
    return nn_tensor_fill_uniform(c->ctx, &t, 0, 1, 1);
}
/* Edge: lo == hi fills that value. */
CALL(fillu_point)
{
    nn_status st = nn_tensor_fill_uniform(c->ctx, &c->db, 2, 2, 1);
    if (st != NN_OK) return st;
    double v[3];
    cat_read(c, &c->db, v);
    for (int i = 0; i < 3; i++)
        cr_assert_eq(v[i], 2.0);
    return NN_OK;
}
CALL(filli_null_ctx)
{
    return nn_tensor_fill_ints(NULL, &c->x, 0, 1, 1);
}
CALL(filli_null_t)
{
    return nn_tensor_fill_ints(c->ctx, NULL, 0, 1, 1);
}
CALL(filli_order)
{
    return nn_tensor_fill_ints(c->ctx, &c->x, 3, -3, 1);
}
CALL(filli_space)
{
    nn_tensor t = cat_claim_other_space(c, &c->x);
    return nn_tensor_fill_ints(c->ctx, &t, 0, 1, 1);
}
CALL(filli_f16_range)
{
    nn_tensor t = cat_tensor(c, NN_DTYPE_F16, 2, D2, 61);
    nn_status st = nn_tensor_fill_ints(c->ctx, &t, -100000, 100000, 1); /* beyond f16's 65504 */
    nn_tensor_free(c->ctx, &t);
    return st;
}
/* Integers beyond what the dtype holds exactly are refused. */
CALL(filli_extremes)
{
    return nn_tensor_fill_ints(c->ctx, &c->db, INT_MIN, INT_MAX, 7);
}

#define E NN_E_INVALID_ARG
#define O NN_E_OVERFLOW
#define D NN_E_DTYPE
#define M NN_E_MEMSPACE

/* A wrapped view of a live tensor's storage: its free is refused (the tensor owns the storage),
 * and the tensor frees it once, as before. */
CALL(wrap_of_live_free)
{
    nn_tensor t = cat_tensor(c, NN_DTYPE_F32, 2, (int64_t[]){2, 3}, 61), v;
    cr_assert_eq(nn_tensor_wrap(c->ctx, t.data, NN_DTYPE_F32, 2, t.dims, NULL, &v), NN_OK, "%s",
                 nn_last_error()->message);
    cr_assert_eq(v.flags, NN_TENSOR_BORROWED, "a wrapped view is marked borrowed");
    nn_status st = nn_tensor_free(c->ctx, &v);
    cr_assert_eq(v.data, t.data, "a refused free changes the view");
    cr_assert_eq(nn_tensor_free(c->ctx, &t), NN_OK, "the tensor still owns its storage");
    return st;
}

static const struct cat_row rows[] = {
    ROW("free of a wrapped view of a live tensor", "nn_tensor_free", "t", NN_E_BAD_POINTER,
        wrap_of_live_free),
    ROW("dtype_size and dtype_name of bad values (edge)", "nn_dtype_size", NULL, NN_OK,
        dtype_size_bad),
    ROW("numel that overflows (edge)", "nn_tensor_numel", NULL, NN_OK, numel_overflow),
    ROW("is_contiguous near 2^64 (edge)", "nn_tensor_is_contiguous", NULL, NN_OK,
        contiguous_overflow),
    ROW("validate NULL", "nn_tensor_validate", "t", E, v_null),
    ROW("validate rank 0", "nn_tensor_validate", "t.rank", E, v_rank0),
    ROW("validate rank 9", "nn_tensor_validate", "t.rank", E, v_rank9),
    ROW("validate dim 0", "nn_tensor_validate", "t.dims[2]", E, v_dim0),
    ROW("validate dim INT64_MIN", "nn_tensor_validate", "t.dims[0]", E, v_dimneg),
    ROW("validate stride < 0", "nn_tensor_validate", "t.strides[1]", E, v_strideneg),
    ROW("validate data NULL", "nn_tensor_validate", "t.data", E, v_datanull),
    ROW("validate space 3", "nn_tensor_validate", "t.space", E, v_space),
    ROW("validate dtype 0", "nn_tensor_validate", "t.dtype", D, v_dtype),
    ROW("validate extent overflows", "nn_tensor_validate", "t", O, v_extent),
    ROW("validate misaligned", "nn_tensor_validate", "t.data", E, v_misaligned),
    ROW("validate reserved", "nn_tensor_validate", "t.reserved[0]", E, v_reserved),
    ROW("validate unknown flag", "nn_tensor_validate", "t.flags", E, v_flags),
    ROW("extent_bytes t NULL", "nn_tensor_extent_bytes", "t", E, extent_null_t),
    ROW("extent_bytes out NULL", "nn_tensor_extent_bytes", "out", E, extent_null_out),
    ROW("extent_bytes overflows", "nn_tensor_extent_bytes", "t", O, extent_overflow),
    ROW("contiguous_strides rank 0", "nn_contiguous_strides", "rank", E, strides_rank0),
    ROW("contiguous_strides dims NULL", "nn_contiguous_strides", "dims", E, strides_null_dims),
    ROW("contiguous_strides strides NULL", "nn_contiguous_strides", "strides", E, strides_null_out),
    ROW("contiguous_strides overflow", "nn_contiguous_strides", "dims", O, strides_overflow),
    ROW("empty ctx NULL", "nn_tensor_empty", "ctx", E, empty_null_ctx),
    ROW("empty out NULL", "nn_tensor_empty", "out", E, empty_null_out),
    ROW("empty dtype 9", "nn_tensor_empty", "dtype", D, empty_dtype),
    ROW("empty rank 0", "nn_tensor_empty", "rank", E, empty_rank0),
    ROW("empty rank 9", "nn_tensor_empty", "rank", E, empty_rank9),
    ROW("empty dims NULL", "nn_tensor_empty", "dims", E, empty_null_dims),
    ROW("empty dim 0", "nn_tensor_empty", "dims[1]", E, empty_dim0),
    ROW("empty count overflows", "nn_tensor_empty", "dims", O, empty_count_overflow),
    ROW("empty bytes overflow", "nn_tensor_empty", "dims", O, empty_bytes_overflow),
    ROW2("empty 4 PiB", "nn_tensor_empty", NULL, NN_E_OOM_HOST, NN_E_OOM_DEVICE, empty_huge),
    ROW("free ctx NULL", "nn_tensor_free", "ctx", E, free_null_ctx),
    ROW("free t NULL", "nn_tensor_free", "t", E, free_null_t),
    ROW("free twice", "nn_tensor_free", NULL, NN_E_BAD_POINTER, free_twice),
    ROW("free inside a block", "nn_tensor_free", NULL, NN_E_BAD_POINTER, free_foreign),
    ROW("free caller memory", "nn_tensor_free", NULL, NN_E_BAD_POINTER, free_caller_memory),
    ROW("free data NULL (edge)", "nn_tensor_free", NULL, NN_OK, free_null_data),
    ROW2("free space label", "nn_tensor_free", "t", M, NN_E_BAD_POINTER, free_space_label),
    ROW("wrap ctx NULL", "nn_tensor_wrap", "ctx", E, wrap_null_ctx),
    ROW("wrap data NULL", "nn_tensor_wrap", "data", E, wrap_null_data),
    ROW("wrap out NULL", "nn_tensor_wrap", "out", E, wrap_null_out),
    ROW("wrap dtype 7", "nn_tensor_wrap", "dtype", D, wrap_dtype),
    ROW("wrap rank 9", "nn_tensor_wrap", "rank", E, wrap_rank),
    ROW("wrap dims NULL", "nn_tensor_wrap", "dims", E, wrap_null_dims),
    ROW("wrap dim 0", "nn_tensor_wrap", "dims[0]", E, wrap_dim0),
    ROW("wrap stride < 0", "nn_tensor_wrap", "strides[1]", E, wrap_stride_neg),
    ROW("wrap misaligned", "nn_tensor_wrap", "data", E, wrap_misaligned),
    ROW("wrap extent overflows", "nn_tensor_wrap", NULL, O, wrap_extent),
    ROW2("wrap host memory", "nn_tensor_wrap", "data", NN_OK, M, wrap_host),
    ROW("wrap the context's own storage (edge)", "nn_tensor_wrap", NULL, NN_OK, wrap_own),
    ROW("copy ctx NULL", "nn_tensor_copy", "ctx", E, copy_null_ctx),
    ROW("copy dst NULL", "nn_tensor_copy", "dst", E, copy_null_dst),
    ROW("copy src NULL", "nn_tensor_copy", "src", E, copy_null_src),
    ROW("copy dims differ", "nn_tensor_copy", "dst", NN_E_SHAPE, copy_dims),
    ROW("copy dtypes differ", "nn_tensor_copy", "dst.dtype", D, copy_dtype),
    ROW("copy dst overlaps src", "nn_tensor_copy", "dst", E, copy_overlap),
    ROW("copy dst is src", "nn_tensor_copy", "dst", E, copy_same),
    ROW("copy dst self-overlapping", "nn_tensor_copy", "dst", E, copy_self_overlap),
    ROW("copy dst malformed", "nn_tensor_copy", "dst.rank", E, copy_dst_bad),
    ROW("copy src malformed", "nn_tensor_copy", "src.data", E, copy_src_bad),
    ROW2("copy strided", "nn_tensor_copy", "dst", NN_OK, NN_E_UNSUPPORTED, copy_strided),
    ROW2("copy src space label", "nn_tensor_copy", "src", M, NN_OK, copy_space_label),
    ROW("fill_constant ctx NULL", "nn_tensor_fill_constant", "ctx", E, fillc_null_ctx),
    ROW("fill_constant t NULL", "nn_tensor_fill_constant", "t", E, fillc_null_t),
    ROW("fill_constant space label", "nn_tensor_fill_constant", "t", M, fillc_space),
    ROW("fill_constant self-overlapping", "nn_tensor_fill_constant", "t", E, fillc_self_overlap),
    ROW("fill_constant dtype 0", "nn_tensor_fill_constant", "t.dtype", D, fillc_bad),
    ROW("fill_uniform t NULL", "nn_tensor_fill_uniform", "t", E, fillu_null_t),
    ROW("fill_uniform lo > hi", "nn_tensor_fill_uniform", "lo", E, fillu_order),
    ROW("fill_uniform lo NaN", "nn_tensor_fill_uniform", "lo", E, fillu_nan),
    ROW("fill_uniform hi infinite", "nn_tensor_fill_uniform", "hi", E, fillu_inf),
    ROW("fill_uniform -DBL_MAX..DBL_MAX", "nn_tensor_fill_uniform", "hi", E, fillu_wide),
    ROW("fill_uniform space label", "nn_tensor_fill_uniform", "t", M, fillu_space),
    ROW("fill_uniform lo == hi (edge)", "nn_tensor_fill_uniform", NULL, NN_OK, fillu_point),
    ROW("fill_ints ctx NULL", "nn_tensor_fill_ints", "ctx", E, filli_null_ctx),
    ROW("fill_ints t NULL", "nn_tensor_fill_ints", "t", E, filli_null_t),
    ROW("fill_ints lo > hi", "nn_tensor_fill_ints", "lo", E, filli_order),
    ROW("fill_ints space label", "nn_tensor_fill_ints", "t", M, filli_space),
    ROW("fill_ints beyond f16", "nn_tensor_fill_ints", "lo", E, filli_f16_range),
    ROW("fill_ints INT_MIN..INT_MAX in f32", "nn_tensor_fill_ints", "lo", E, filli_extremes),
};

CAT_SUBJECT(tensor, rows)

/* Catalogue rows: the integration calls, DLPack (include/nnprim/dlpack.h) and the allocator hook
 * (nn_mem_set_allocator, include/nnprim/mem.h). Capsules are the caller's, over the fixture's x
 * (1x2x5x5 f32 in the context's memory); exported tensors are made in the row. */
#include <limits.h>
#include <stdint.h>
#include <string.h>

#include "nn_config.h"

#include "catalogue.h"

#define E  NN_E_INVALID_ARG
#define D  NN_E_DTYPE
#define M  NN_E_MEMSPACE
#define O  NN_E_OVERFLOW
#define BP NN_E_BAD_POINTER

/* ---- nn_mem_set_allocator ---- */

static int allocs, frees;
static void *a_alloc(void *user, size_t bytes, int device, void *stream)
{
    (void)user, (void)device, (void)stream;
    allocs++;
    void *p = NULL;
    return posix_memalign(&p, 256, bytes) ? NULL : p;
}
static void a_free(void *user, void *p, size_t bytes, int device, void *stream)
{
    (void)user, (void)bytes, (void)device, (void)stream;
    frees++;
    free(p);
}
static void *a_null(void *user, size_t bytes, int device, void *stream)
{
    (void)user, (void)bytes, (void)device, (void)stream;
    return NULL;
}
static char odd_block[64] __attribute__((aligned(64)));
static void *a_odd(void *user, size_t bytes, int device, void *stream)
{
    (void)user, (void)bytes, (void)device, (void)stream;
    return odd_block + 8; /* aligned to 8 bytes only */
}
static void a_free_none(void *user, void *p, size_t bytes, int device, void *stream)
{
    (void)user, (void)p, (void)bytes, (void)device, (void)stream;
    frees++;
}

static nn_mem_allocator allocator(void)
{
    nn_mem_allocator a;
    memset(&a, 0, sizeof a);
    a.alloc = a_alloc;
    a.free = a_free;
    return a;
}

/* The devices a build without CUDA does not have at all. */
#define NODEV (NN_HAVE_CUDA ? NN_E_NO_DEVICE : NN_E_NOT_BUILT)

static nn_status sa_dev_neg(struct cat *c)
{
    (void)c;
    nn_mem_allocator a = allocator();
    return nn_mem_set_allocator(-2, &a);
}
static nn_status sa_dev_min(struct cat *c)
{
    (void)c;
    return nn_mem_set_allocator(INT_MIN, NULL);
}
static nn_status sa_dev_big(struct cat *c)
{
    (void)c;
    nn_mem_allocator a = allocator();
    return nn_mem_set_allocator(999, &a);
}
static nn_status sa_dev_max(struct cat *c)
{
    (void)c;
    return nn_mem_set_allocator(INT_MAX, NULL);
}
static nn_status sa_no_alloc(struct cat *c)
{
    (void)c;
    nn_mem_allocator a = allocator();
    a.alloc = NULL;
    return nn_mem_set_allocator(NN_MEM_HOST, &a);
}
static nn_status sa_no_free(struct cat *c)
{
    (void)c;
    nn_mem_allocator a = allocator();
    a.free = NULL;
    return nn_mem_set_allocator(NN_MEM_HOST, &a);
}
static nn_status sa_res0(struct cat *c)
{
    (void)c;
    nn_mem_allocator a = allocator();
    a.reserved[0] = 1;
    return nn_mem_set_allocator(NN_MEM_HOST, &a);
}
static nn_status sa_res3(struct cat *c)
{
    (void)c;
    nn_mem_allocator a = allocator();
    a.reserved[3] = UINT64_MAX;
    return nn_mem_set_allocator(NN_MEM_HOST, &a);
}
/* Edge: set, used, unset; a block made under the allocator returns to it after the unset. */
static nn_status sa_round_trip(struct cat *c)
{
    (void)c;
    allocs = frees = 0;
    nn_mem_allocator a = allocator();
    nn_status st = nn_mem_set_allocator(NN_MEM_HOST, &a);
    if (st != NN_OK) return st;
    nn_mem_stream *s;
    cr_assert_eq(nn_mem_stream_open(NN_MEM_HOST, NULL, &s), NN_OK, "%s", nn_last_error()->message);
    void *p = NULL;
    cr_assert_eq(nn_mem_stream_alloc(s, 1000, &p), NN_OK, "%s", nn_last_error()->message);
    cr_assert_eq(allocs, 1, "the allocator served the block");
    cr_assert_eq(nn_mem_set_allocator(NN_MEM_HOST, NULL), NN_OK, "unset");
    cr_assert_eq(nn_mem_stream_free(s, p), NN_OK, "%s", nn_last_error()->message);
    cr_assert_eq(frees, 1, "the block went back to the allocator that made it");
    nn_mem_stream_close(s);
    return NN_OK;
}
/* The allocator's NULL is the call's out-of-memory. */
static nn_status sa_returns_null(struct cat *c)
{
    (void)c;
    nn_mem_allocator a = allocator();
    a.alloc = a_null;
    cr_assert_eq(nn_mem_set_allocator(NN_MEM_HOST, &a), NN_OK, "set");
    nn_mem_stream *s;
    cr_assert_eq(nn_mem_stream_open(NN_MEM_HOST, NULL, &s), NN_OK, "%s", nn_last_error()->message);
    void *p = (void *)1;
    nn_status st = nn_mem_stream_alloc(s, 64, &p);
    cr_assert_null(p, "out is NULL on failure");
    nn_mem_stream_close(s);
    cr_assert_eq(nn_mem_set_allocator(NN_MEM_HOST, NULL), NN_OK, "unset");
    return st;
}
/* A block aligned to less than 16 bytes is given back and refused. */
static nn_status sa_misaligned(struct cat *c)
{
    (void)c;
    frees = 0;
    nn_mem_allocator a = allocator();
    a.alloc = a_odd;
    a.free = a_free_none;
    cr_assert_eq(nn_mem_set_allocator(NN_MEM_HOST, &a), NN_OK, "set");
    nn_mem_stream *s;
    cr_assert_eq(nn_mem_stream_open(NN_MEM_HOST, NULL, &s), NN_OK, "%s", nn_last_error()->message);
    void *p = (void *)1;
    nn_status st = nn_mem_stream_alloc(s, 64, &p);
    cr_assert_null(p, "out is NULL on failure");
    cr_assert_eq(frees, 1, "the block went back to the allocator");
    nn_mem_stream_close(s);
    cr_assert_eq(nn_mem_set_allocator(NN_MEM_HOST, NULL), NN_OK, "unset");
    return st;
}
/* On a GPU: the context's device allocations go to the allocator, and its NULL is
 * NN_E_OOM_DEVICE from the call that allocates. */
static nn_status sa_gpu_null(struct cat *c)
{
    nn_mem_allocator a = allocator();
    a.alloc = a_null;
    int dev = c->x.device;
    cr_assert_eq(nn_mem_set_allocator(dev, &a), NN_OK, "set: %s", nn_last_error()->message);
    nn_tensor t;
    nn_status st = nn_tensor_empty(c->ctx, NN_DTYPE_F32, 1, (int64_t[]){1000}, &t);
    cr_assert_eq(nn_mem_set_allocator(dev, NULL), NN_OK, "unset");
    return st;
}

#if NN_HAVE_DLPACK

#include <dlpack/dlpack.h>

/* ---- nn_tensor_from_dlpack ---- */

struct cap {
    DLManagedTensor m;
    int64_t shape[NN_MAX_RANK + 1], strides[NN_MAX_RANK + 1];
};

/* A capsule over c->x as the context would take it. */
static void cap_of(struct cat *c, struct cap *k)
{
    memset(k, 0, sizeof *k);
    DLTensor *t = &k->m.dl_tensor;
    t->data = c->x.data;
    t->device.device_type = c->gpu ? kDLCUDA : kDLCPU;
    t->device.device_id = c->gpu ? c->x.device : 0;
    t->ndim = 4;
    t->dtype.code = kDLFloat;
    t->dtype.bits = 32;
    t->dtype.lanes = 1;
    memcpy(k->shape, c->x.dims, 4 * sizeof k->shape[0]);
    memcpy(k->strides, c->x.strides, 4 * sizeof k->strides[0]);
    t->shape = k->shape;
    t->strides = NULL;
}

/* The import of k; on failure the out-view must be zeroed. */
static nn_status import(struct cat *c, struct cap *k)
{
    nn_tensor out;
    memset(&out, 0x5a, sizeof out);
    nn_status st = nn_tensor_from_dlpack(c->ctx, &k->m, &out);
    if (st != NN_OK) {
        nn_tensor zero;
        memset(&zero, 0, sizeof zero);
        cr_assert(memcmp(&out, &zero, sizeof out) == 0, "out must be zeroed on failure");
    }
    return st;
}

#define CAP_ROW(fname, stmt)                                                                       \
    static nn_status fname(struct cat *c)                                                          \
    {                                                                                              \
        struct cap k;                                                                              \
        cap_of(c, &k);                                                                             \
        DLTensor *t = &k.m.dl_tensor;                                                              \
        (void)t;                                                                                   \
        stmt;                                                                                      \
        return import(c, &k);                                                                      \
    }

static nn_status fd_null_ctx(struct cat *c)
{
    struct cap k;
    cap_of(c, &k);
    nn_tensor out;
    return nn_tensor_from_dlpack(NULL, &k.m, &out);
}
static nn_status fd_null_src(struct cat *c)
{
    nn_tensor out;
    return nn_tensor_from_dlpack(c->ctx, NULL, &out);
}
static nn_status fd_null_out(struct cat *c)
{
    struct cap k;
    cap_of(c, &k);
    return nn_tensor_from_dlpack(c->ctx, &k.m, NULL);
}
CAP_ROW(fd_null_data, t->data = NULL)
CAP_ROW(fd_ndim0, t->ndim = 0)
CAP_ROW(fd_ndim9, t->ndim = 9; k.shape[8] = 1)
CAP_ROW(fd_ndim_neg, t->ndim = -1)
CAP_ROW(fd_null_shape, t->shape = NULL)
CAP_ROW(fd_shape0, k.shape[1] = 0)
CAP_ROW(fd_shape_neg, k.shape[3] = INT64_MIN)
CAP_ROW(fd_stride_neg, t->strides = k.strides; k.strides[2] = -5)
CAP_ROW(fd_lanes, t->dtype.lanes = 4)
CAP_ROW(fd_lanes0, t->dtype.lanes = 0)
CAP_ROW(fd_int, t->dtype.code = kDLInt)
CAP_ROW(fd_uint8, t->dtype.code = kDLUInt; t->dtype.bits = 8)
CAP_ROW(fd_float8, t->dtype.bits = 8)
CAP_ROW(fd_bf32, t->dtype.code = kDLBfloat)
CAP_ROW(fd_complex, t->dtype.code = kDLComplex; t->dtype.bits = 64)
CAP_ROW(fd_code_bad, t->dtype.code = 200)
CAP_ROW(fd_opencl, t->device.device_type = kDLOpenCL)
CAP_ROW(fd_device_type_bad, t->device.device_type = (DLDeviceType)12345)
CAP_ROW(fd_cuda_on_ref, t->device.device_type = kDLCUDA)
CAP_ROW(fd_cpu_on_gpu, t->device.device_type = kDLCPU)
CAP_ROW(fd_pinned_on_gpu, t->device.device_type = kDLCUDAHost)
CAP_ROW(fd_device_id, t->device.device_id = 7)
CAP_ROW(fd_managed, t->device.device_type = kDLCUDAManaged)
CAP_ROW(fd_offset_misaligned, t->byte_offset = 2)
CAP_ROW(fd_offset_wraps, t->byte_offset = UINT64_MAX - 8)
CAP_ROW(fd_offset_2_63, t->byte_offset = 1ULL << 63)
CAP_ROW(fd_count_overflow, k.shape[0] = INT64_C(1) << 62)
CAP_ROW(fd_extent_overflow, t->strides = k.strides; k.shape[0] = 2; k.strides[0] = INT64_MAX / 2)
/* Edges that import. */
CAP_ROW(fd_compact, (void)0)
CAP_ROW(fd_strides_given, t->strides = k.strides)
CAP_ROW(fd_broadcast, t->strides = k.strides; memset(k.strides, 0, sizeof k.strides))
CAP_ROW(fd_pinned_on_ref, t->device.device_type = kDLCUDAHost)
/* byte_offset moves the data: the view starts 4 elements in and has the capsule's dims. */
static nn_status fd_offset(struct cat *c)
{
    struct cap k;
    cap_of(c, &k);
    k.m.dl_tensor.byte_offset = 16;
    k.shape[0] = 1, k.shape[1] = 1, k.shape[2] = 2, k.shape[3] = 5;
    nn_tensor v;
    nn_status st = nn_tensor_from_dlpack(c->ctx, &k.m, &v);
    if (st != NN_OK) return st;
    cr_assert_eq((char *)v.data, (char *)c->x.data + 16, "data + byte_offset");
    cr_assert_eq(v.dims[3], 5, "dims");
    cr_assert_eq(v.strides[2], 5, "compact strides");
    cr_assert_eq(v.space, c->x.space, "space");
    nn_tensor copy;
    memset(&copy, 0, sizeof copy);
    /* the view is a valid argument of an op */
    double a[50], b[10];
    cat_read(c, &c->x, a);
    cat_read(c, &v, b);
    for (int i = 0; i < 10; i++)
        cr_assert_eq(b[i], a[i + 4], "element %d", i);
    /* and not nnprim's to free */
    copy = v;
    cr_assert_eq(nn_tensor_free(c->ctx, &copy), BP, "nn_tensor_free refuses the view");
    return st;
}

/* ---- nn_tensor_from_dlpack_versioned ---- */

static char fake_versioned[256] __attribute__((aligned(64)));
static nn_status fv_null_ctx(struct cat *c)
{
    (void)c;
    nn_tensor out;
    return nn_tensor_from_dlpack_versioned(NULL, (void *)fake_versioned, &out);
}
static nn_status fv_null_src(struct cat *c)
{
    nn_tensor out;
    return nn_tensor_from_dlpack_versioned(c->ctx, NULL, &out);
}
static nn_status fv_null_out(struct cat *c)
{
    return nn_tensor_from_dlpack_versioned(c->ctx, (void *)fake_versioned, NULL);
}
#if DLPACK_VERSION < 100
/* Debian's DLPack 0.6 has no versioned capsule. */
static nn_status fv_not_built(struct cat *c)
{
    nn_tensor out;
    memset(&out, 0x5a, sizeof out);
    nn_status st = nn_tensor_from_dlpack_versioned(c->ctx, (void *)fake_versioned, &out);
    cr_assert_eq(out.data, NULL, "out zeroed");
    return st;
}
#endif

/* ---- nn_tensor_to_dlpack ---- */

static const int64_t T_DIMS[] = {2, 3};

static nn_status td_null_ctx(struct cat *c)
{
    DLManagedTensor *m;
    return nn_tensor_to_dlpack(NULL, &c->x, &m);
}
static nn_status td_null_t(struct cat *c)
{
    DLManagedTensor *m = (DLManagedTensor *)1;
    nn_status st = nn_tensor_to_dlpack(c->ctx, NULL, &m);
    cr_assert_null(m, "out is NULL on failure");
    return st;
}
static nn_status td_null_out(struct cat *c)
{
    return nn_tensor_to_dlpack(c->ctx, &c->x, NULL);
}
/* An export of a changed copy of a fresh tensor (freed after). */
#define EXPORT_ROW(fname, stmt)                                                                    \
    static nn_status fname(struct cat *c)                                                          \
    {                                                                                              \
        nn_tensor t = cat_tensor(c, NN_DTYPE_F32, 2, T_DIMS, 401), v = t;                          \
        stmt;                                                                                      \
        DLManagedTensor *m = (DLManagedTensor *)1;                                                 \
        nn_status st = nn_tensor_to_dlpack(c->ctx, &v, &m);                                        \
        if (st == NN_OK) {                                                                         \
            m->deleter(m);                                                                         \
        } else {                                                                                   \
            cr_assert_null(m, "out is NULL on failure");                                           \
            cr_assert_eq(nn_tensor_free(c->ctx, &t), NN_OK, "the tensor is still nnprim's: %s",    \
                         nn_last_error()->message);                                                \
        }                                                                                          \
        return st;                                                                                 \
    }
EXPORT_ROW(td_rank0, v.rank = 0)
EXPORT_ROW(td_dtype_bad, v.dtype = (nn_dtype)5)
EXPORT_ROW(td_reserved, v.reserved[0] = 1)
EXPORT_ROW(td_interior, v.data = (char *)v.data + 8; v.dims[0] = 1)
EXPORT_ROW(td_claim, v = cat_claim_other_space(c, &v))
EXPORT_ROW(td_data_null, v.data = NULL)
/* Edge: a view of fewer elements of the same storage exports it whole. */
EXPORT_ROW(td_smaller_view, v.rank = 1; v.dims[0] = 2; v.strides[0] = 1)
static nn_status td_caller_memory(struct cat *c)
{
    nn_tensor v = c->gpu ? cat_wrong_space(c, &c->x)
                         : cat_host_view(cat_host_block(c, 64), NN_DTYPE_F32, 1, (int64_t[]){16});
    DLManagedTensor *m = (DLManagedTensor *)1;
    nn_status st = nn_tensor_to_dlpack(c->ctx, &v, &m);
    cr_assert_null(m, "out is NULL on failure");
    return st;
}
/* Two copies of one view exported: the second would free the storage under the first capsule. */
static nn_status td_twice(struct cat *c)
{
    nn_tensor t = cat_tensor(c, NN_DTYPE_F32, 2, T_DIMS, 402), copy = t;
    DLManagedTensor *m1 = NULL, *m2 = (DLManagedTensor *)1;
    cr_assert_eq(nn_tensor_to_dlpack(c->ctx, &t, &m1), NN_OK, "%s", nn_last_error()->message);
    cr_assert_null(t.data, "the exported view's data is NULL");
    nn_status st = nn_tensor_to_dlpack(c->ctx, &copy, &m2);
    if (st == NN_OK)
        m2->deleter(m2);
    else
        cr_assert_null(m2, "out is NULL on failure");
    m1->deleter(m1);
    return st;
}
/* nn_tensor_free of a copy of an exported view. */
static nn_status td_free_copy(struct cat *c)
{
    nn_tensor t = cat_tensor(c, NN_DTYPE_F32, 2, T_DIMS, 403), copy = t;
    DLManagedTensor *m = NULL;
    cr_assert_eq(nn_tensor_to_dlpack(c->ctx, &t, &m), NN_OK, "%s", nn_last_error()->message);
    nn_status st = nn_tensor_free(c->ctx, &copy);
    m->deleter(m);
    return st;
}
static nn_status td_freed(struct cat *c)
{
    nn_tensor t = cat_tensor(c, NN_DTYPE_F32, 2, T_DIMS, 404), copy = t;
    cr_assert_eq(nn_tensor_free(c->ctx, &t), NN_OK, "free");
    DLManagedTensor *m = (DLManagedTensor *)1;
    nn_status st = nn_tensor_to_dlpack(c->ctx, &copy, &m);
    cr_assert_null(m, "out is NULL on failure");
    return st;
}
/* Edge: export, import the capsule back, read it, delete it. */
static nn_status td_round_trip(struct cat *c)
{
    nn_tensor t = cat_tensor(c, NN_DTYPE_F32, 2, T_DIMS, 405);
    double before[6], after[6];
    cat_read(c, &t, before);
    DLManagedTensor *m = NULL;
    nn_status st = nn_tensor_to_dlpack(c->ctx, &t, &m);
    if (st != NN_OK) return st;
    nn_tensor v;
    cr_assert_eq(nn_tensor_from_dlpack(c->ctx, m, &v), NN_OK, "%s", nn_last_error()->message);
    cat_read(c, &v, after);
    for (int i = 0; i < 6; i++)
        cr_assert_eq(after[i], before[i], "element %d", i);
    m->deleter(m);
    return st;
}

#endif /* NN_HAVE_DLPACK */

#define SA  "nn_mem_set_allocator"
#define MSA "nn_mem_stream_alloc"
#define FD  "nn_tensor_from_dlpack"
#define FV  "nn_tensor_from_dlpack_versioned"
#define TD  "nn_tensor_to_dlpack"

static const struct cat_row rows[] = {
    ROW("set_allocator device -2", SA, "device", E, sa_dev_neg),
    ROW("set_allocator device INT_MIN", SA, "device", E, sa_dev_min),
    ROW("set_allocator device 999", SA, "device", NODEV, sa_dev_big),
    ROW("set_allocator device INT_MAX", SA, "device", NODEV, sa_dev_max),
    ROW("set_allocator a.alloc NULL", SA, "a.alloc", E, sa_no_alloc),
    ROW("set_allocator a.free NULL", SA, "a.free", E, sa_no_free),
    ROW("set_allocator a.reserved[0]", SA, "a.reserved[0]", E, sa_res0),
    ROW("set_allocator a.reserved[3]", SA, "a.reserved[3]", E, sa_res3),
    ROW("set_allocator set, use, unset (edge)", SA, NULL, NN_OK, sa_round_trip),
    ROW("set_allocator allocator returns NULL", MSA, NULL, NN_E_OOM_DEVICE, sa_returns_null),
    ROW("set_allocator allocator misaligns", MSA, NULL, BP, sa_misaligned),
    ROW_ON(CAT_GPU_ONLY, "set_allocator device allocator returns NULL", "nn_tensor_empty", NULL,
           NN_E_OOM_DEVICE, sa_gpu_null),
#if NN_HAVE_DLPACK
    ROW("from_dlpack ctx NULL", FD, "ctx", E, fd_null_ctx),
    ROW("from_dlpack src NULL", FD, "src", E, fd_null_src),
    ROW("from_dlpack out NULL", FD, "out", E, fd_null_out),
    ROW("from_dlpack data NULL", FD, "src.dl_tensor.data", E, fd_null_data),
    ROW("from_dlpack ndim 0", FD, "src.dl_tensor.ndim", E, fd_ndim0),
    ROW("from_dlpack ndim 9", FD, "src.dl_tensor.ndim", E, fd_ndim9),
    ROW("from_dlpack ndim -1", FD, "src.dl_tensor.ndim", E, fd_ndim_neg),
    ROW("from_dlpack shape NULL", FD, "src.dl_tensor.shape", E, fd_null_shape),
    ROW("from_dlpack shape 0", FD, "src.dl_tensor.shape[1]", E, fd_shape0),
    ROW("from_dlpack shape INT64_MIN", FD, "src.dl_tensor.shape[3]", E, fd_shape_neg),
    ROW("from_dlpack stride < 0", FD, "src.dl_tensor.strides[2]", E, fd_stride_neg),
    ROW("from_dlpack lanes 4", FD, "src.dl_tensor.dtype.lanes", D, fd_lanes),
    ROW("from_dlpack lanes 0", FD, "src.dl_tensor.dtype.lanes", D, fd_lanes0),
    ROW("from_dlpack int32", FD, "src.dl_tensor.dtype", D, fd_int),
    ROW("from_dlpack uint8", FD, "src.dl_tensor.dtype", D, fd_uint8),
    ROW("from_dlpack float8", FD, "src.dl_tensor.dtype", D, fd_float8),
    ROW("from_dlpack bfloat32", FD, "src.dl_tensor.dtype", D, fd_bf32),
    ROW("from_dlpack complex64", FD, "src.dl_tensor.dtype", D, fd_complex),
    ROW("from_dlpack dtype code 200", FD, "src.dl_tensor.dtype", D, fd_code_bad),
    ROW("from_dlpack OpenCL device", FD, "src.dl_tensor.device", M, fd_opencl),
    ROW("from_dlpack unknown device type", FD, "src.dl_tensor.device", M, fd_device_type_bad),
    ROW_ON(CAT_REF_ONLY, "from_dlpack CUDA on the reference", FD, "src.dl_tensor.device", M,
           fd_cuda_on_ref),
    ROW_ON(CAT_GPU_ONLY, "from_dlpack CPU on cuDNN", FD, "src.dl_tensor.device", M, fd_cpu_on_gpu),
    ROW_ON(CAT_GPU_ONLY, "from_dlpack pinned host on cuDNN", FD, "src.dl_tensor.device", M,
           fd_pinned_on_gpu),
    ROW_ON(CAT_GPU_ONLY, "from_dlpack device_id 7 on cuDNN", FD, "device_id", M, fd_device_id),
    ROW("from_dlpack managed memory", FD, "src.dl_tensor.device", M, fd_managed),
    ROW("from_dlpack byte_offset misaligned", FD, "byte_offset", E, fd_offset_misaligned),
    ROW("from_dlpack byte_offset wraps the address space", FD, "byte_offset", O, fd_offset_wraps),
    ROW("from_dlpack byte_offset 2^63 (no object is that large)", FD, "byte_offset", O,
        fd_offset_2_63),
    ROW("from_dlpack element count overflows", FD, NULL, O, fd_count_overflow),
    ROW("from_dlpack extent overflows", FD, NULL, O, fd_extent_overflow),
    ROW("from_dlpack compact (edge)", FD, NULL, NN_OK, fd_compact),
    ROW("from_dlpack strides given (edge)", FD, NULL, NN_OK, fd_strides_given),
    ROW("from_dlpack broadcast strides (edge)", FD, NULL, NN_OK, fd_broadcast),
    ROW_ON(CAT_REF_ONLY, "from_dlpack pinned host on the reference (edge)", FD, NULL, NN_OK,
           fd_pinned_on_ref),
    ROW("from_dlpack byte_offset, values, not nnprim's to free (edge)", FD, NULL, NN_OK, fd_offset),
    ROW("from_dlpack_versioned ctx NULL", FV, "ctx", E, fv_null_ctx),
    ROW("from_dlpack_versioned src NULL", FV, "src", E, fv_null_src),
    ROW("from_dlpack_versioned out NULL", FV, "out", E, fv_null_out),
#if DLPACK_VERSION < 100
    ROW("from_dlpack_versioned with DLPack 0.x", FV, NULL, NN_E_NOT_BUILT, fv_not_built),
#endif
    ROW("to_dlpack ctx NULL", TD, "ctx", E, td_null_ctx),
    ROW("to_dlpack t NULL", TD, "t", E, td_null_t),
    ROW("to_dlpack out NULL", TD, "out", E, td_null_out),
    ROW("to_dlpack t rank 0", TD, "t.rank", E, td_rank0),
    ROW("to_dlpack t dtype 5", TD, "t.dtype", D, td_dtype_bad),
    ROW("to_dlpack t reserved", TD, "t.reserved[0]", E, td_reserved),
    ROW("to_dlpack t inside the storage", TD, "t.data", BP, td_interior),
    ROW("to_dlpack t space label", TD, "t", M, td_claim),
    ROW("to_dlpack t.data NULL", TD, "t.data", E, td_data_null),
    ROW2("to_dlpack caller memory", TD, "t", BP, M, td_caller_memory),
    ROW("to_dlpack two copies of one view", TD, "t.data", BP, td_twice),
    ROW("to_dlpack freed storage", TD, "t.data", BP, td_freed),
    ROW("tensor_free a copy of an exported view", "nn_tensor_free", "t.data", BP, td_free_copy),
    ROW("to_dlpack a smaller view of the storage (edge)", TD, NULL, NN_OK, td_smaller_view),
    ROW("to_dlpack round trip (edge)", TD, NULL, NN_OK, td_round_trip),
#endif
};

CAT_SUBJECT(integrate, rows)

/* DLPack import and export: round trips on the host, capsules nnprim must
 * refuse (each with its status and a message naming the function and the field), and the same on
 * a GPU (skipped without one). In a build without dlpack.h every function says NN_E_NOT_BUILT. */
#include <string.h>

#include "nn_config.h"

#include "core/alloc.h"
#include "gpu.h"
#include "nnprim/nnprim.h"

static void expect_message(const char *fragment)
{
    const char *m = nn_last_error()->message;
    cr_expect(strstr(m, fragment), "message \"%s\" lacks \"%s\"", m, fragment);
}

static nn_ctx *ref_ctx(void)
{
    nn_settings s;
    cr_assert_eq(nn_settings_defaults(&s), NN_OK);
    s.backend = NN_BACKEND_REF;
    nn_ctx *ctx;
    cr_assert_eq(nn_ctx_create(&ctx, &s), NN_OK);
    return ctx;
}

#if NN_HAVE_DLPACK

#include <dlpack/dlpack.h>

/* A caller's capsule over a caller's array (never deleted by nnprim). */
struct cap {
    DLManagedTensor m;
    int64_t shape[NN_MAX_RANK + 1], strides[NN_MAX_RANK + 1];
    float data[256];
};

static int deleted;

static void cap_delete(DLManagedTensor *self)
{
    (void)self;
    deleted++;
}

static void cap_init(struct cap *c, int ndim, const int64_t *shape)
{
    memset(c, 0, sizeof *c);
    c->m.dl_tensor.data = c->data;
    c->m.dl_tensor.device.device_type = kDLCPU;
    c->m.dl_tensor.ndim = ndim;
    c->m.dl_tensor.dtype.code = kDLFloat;
    c->m.dl_tensor.dtype.bits = 32;
    c->m.dl_tensor.dtype.lanes = 1;
    memcpy(c->shape, shape, (size_t)ndim * sizeof *shape);
    c->m.dl_tensor.shape = c->shape;
    c->m.deleter = cap_delete;
}

Test(dlpack, import_is_a_view_without_copy)
{
    nn_ctx *ctx = ref_ctx();
    struct cap c;
    int64_t shape[] = {2, 3, 4};
    cap_init(&c, 3, shape);
    nn_tensor t;
    cr_assert_eq(nn_tensor_from_dlpack(ctx, &c.m, &t), NN_OK, "%s", nn_last_error()->message);
    cr_expect_eq(t.data, c.data);
    cr_expect_eq(t.dtype, NN_DTYPE_F32);
    cr_expect_eq(t.rank, 3);
    cr_expect_eq(t.space, NN_SPACE_HOST);
    cr_expect_eq(t.device, -1);
    cr_expect(nn_tensor_is_contiguous(&t), "NULL strides are compact");
    cr_expect_eq(t.strides[0], 12);
    cr_expect_eq(t.strides[2], 1);
    cr_assert_eq(nn_tensor_fill_constant(ctx, &t, 2.5), NN_OK);
    cr_expect_eq(c.data[0], 2.5f, "the op wrote the caller's memory");
    cr_expect_eq(c.data[23], 2.5f);
    cr_expect_eq(c.data[24], 0.0f);
    /* The view is not nnprim's storage. */
    cr_expect_eq(nn_tensor_free(ctx, &t), NN_E_BAD_POINTER);

    /* Strides (a transposed view) and a byte offset. */
    int64_t shape2[] = {4, 3};
    cap_init(&c, 2, shape2);
    c.strides[0] = 1;
    c.strides[1] = 4;
    c.m.dl_tensor.strides = c.strides;
    c.m.dl_tensor.byte_offset = 8;
    for (int i = 0; i < 16; i++)
        c.data[i] = (float)i;
    cr_assert_eq(nn_tensor_from_dlpack(ctx, &c.m, &t), NN_OK, "%s", nn_last_error()->message);
    cr_expect_eq(t.data, (char *)c.data + 8);
    cr_expect_eq(t.strides[0], 1);
    cr_expect_eq(t.strides[1], 4);
    int64_t d2[] = {4, 3};
    nn_tensor u;
    cr_assert_eq(nn_tensor_empty(ctx, NN_DTYPE_F32, 2, d2, &u), NN_OK);
    cr_assert_eq(nn_tensor_copy(ctx, &u, &t), NN_OK);
    const float *uf = u.data;
    cr_expect_eq(uf[0 * 3 + 1], 2.0f + 4.0f, "element (0, 1) = data[2 + 0 * 1 + 1 * 4]");
    cr_expect_eq(uf[3 * 3 + 2], 2.0f + 3.0f + 8.0f);
    cr_expect_eq(nn_tensor_free(ctx, &u), NN_OK);

    /* Pinned host memory is host memory; f64, f16, bf16. */
    cap_init(&c, 1, shape);
    c.m.dl_tensor.device.device_type = kDLCUDAHost;
    c.m.dl_tensor.dtype.bits = 64;
    cr_expect_eq(nn_tensor_from_dlpack(ctx, &c.m, &t), NN_OK);
    cr_expect_eq(t.dtype, NN_DTYPE_F64);
    c.m.dl_tensor.dtype.bits = 16;
    cr_expect_eq(nn_tensor_from_dlpack(ctx, &c.m, &t), NN_OK);
    cr_expect_eq(t.dtype, NN_DTYPE_F16);
    c.m.dl_tensor.dtype.code = kDLBfloat;
    cr_expect_eq(nn_tensor_from_dlpack(ctx, &c.m, &t), NN_OK);
    cr_expect_eq(t.dtype, NN_DTYPE_BF16);
    cr_expect_eq(deleted, 0, "import never calls the deleter");
    nn_ctx_destroy(ctx);
}

/* One refused capsule: the status, the message, and a zeroed out. */
static void refused(nn_ctx *ctx, const struct cap *c, nn_status want, const char *fragment)
{
    nn_tensor t;
    memset(&t, 0x5a, sizeof t);
    nn_status st = nn_tensor_from_dlpack(ctx, &c->m, &t);
    cr_expect_eq(st, want, "%s instead of %s for \"%s\"", nn_status_name(st), nn_status_name(want),
                 fragment);
    expect_message(fragment);
    cr_expect_null(t.data);
    cr_expect_eq(t.rank, 0);
}

Test(dlpack, bad_capsules_are_refused)
{
    nn_ctx *ctx = ref_ctx();
    struct cap c;
    int64_t shape[] = {2, 3, 4};
    nn_tensor t;

    cr_expect_eq(nn_tensor_from_dlpack(ctx, NULL, &t), NN_E_INVALID_ARG);
    expect_message("nn_tensor_from_dlpack: src must not be NULL");
    cap_init(&c, 3, shape);
    cr_expect_eq(nn_tensor_from_dlpack(NULL, &c.m, &t), NN_E_INVALID_ARG);
    expect_message("nn_tensor_from_dlpack: ctx must not be NULL");
    cr_expect_eq(nn_tensor_from_dlpack(ctx, &c.m, NULL), NN_E_INVALID_ARG);
    expect_message("nn_tensor_from_dlpack: out must not be NULL");

    cap_init(&c, 3, shape);
    c.m.dl_tensor.device.device_type = kDLCUDA;
    refused(ctx, &c, NN_E_MEMSPACE,
            "nn_tensor_from_dlpack: src.dl_tensor.device is kDLCUDA (2), but ctx runs the "
            "reference backend, which takes kDLCPU or kDLCUDAHost");
    c.m.dl_tensor.device.device_type = kDLOpenCL;
    refused(ctx, &c, NN_E_MEMSPACE, "src.dl_tensor.device is kDLOpenCL (4)");
    c.m.dl_tensor.device.device_type = (DLDeviceType)99;
    refused(ctx, &c, NN_E_MEMSPACE, "src.dl_tensor.device is an unknown device type (99)");

    cap_init(&c, 3, shape);
    c.m.dl_tensor.dtype.code = kDLInt;
    refused(ctx, &c, NN_E_DTYPE,
            "nn_tensor_from_dlpack: src.dl_tensor.dtype (code 0, 32 bits) is not a type of nnprim");
    c.m.dl_tensor.dtype.code = kDLFloat;
    c.m.dl_tensor.dtype.bits = 8;
    refused(ctx, &c, NN_E_DTYPE, "src.dl_tensor.dtype (code 2, 8 bits)");
    c.m.dl_tensor.dtype.code = kDLBfloat;
    c.m.dl_tensor.dtype.bits = 32;
    refused(ctx, &c, NN_E_DTYPE, "src.dl_tensor.dtype (code 4, 32 bits)");
    c.m.dl_tensor.dtype.code = kDLFloat;
    c.m.dl_tensor.dtype.lanes = 4;
    refused(ctx, &c, NN_E_DTYPE,
            "nn_tensor_from_dlpack: src.dl_tensor.dtype.lanes must be 1, got 4");

    cap_init(&c, 3, shape);
    c.m.dl_tensor.ndim = 0;
    refused(ctx, &c, NN_E_INVALID_ARG,
            "nn_tensor_from_dlpack: src.dl_tensor.ndim must be in [1, 8], got 0");
    c.m.dl_tensor.ndim = 9;
    refused(ctx, &c, NN_E_INVALID_ARG, "src.dl_tensor.ndim must be in [1, 8], got 9");
    cap_init(&c, 3, shape);
    c.m.dl_tensor.data = NULL;
    refused(ctx, &c, NN_E_INVALID_ARG,
            "nn_tensor_from_dlpack: src.dl_tensor.data must not be NULL");
    cap_init(&c, 3, shape);
    c.m.dl_tensor.shape = NULL;
    refused(ctx, &c, NN_E_INVALID_ARG, "src.dl_tensor.shape must not be NULL");
    cap_init(&c, 3, shape);
    c.shape[1] = 0;
    refused(ctx, &c, NN_E_INVALID_ARG, "src.dl_tensor.shape[1] must be >= 1, got 0");
    cap_init(&c, 3, shape);
    c.m.dl_tensor.strides = c.strides;
    c.strides[0] = 12;
    c.strides[1] = -4;
    c.strides[2] = 1;
    refused(ctx, &c, NN_E_INVALID_ARG, "src.dl_tensor.strides[1] must be >= 0, got -4");

    cap_init(&c, 3, shape);
    c.m.dl_tensor.byte_offset = 2;
    refused(ctx, &c, NN_E_INVALID_ARG,
            "+ byte_offset 2 is not aligned to the 4 bytes of f32 elements");
    c.m.dl_tensor.byte_offset = 4;
    c.m.dl_tensor.dtype.bits = 64;
    refused(ctx, &c, NN_E_INVALID_ARG,
            "+ byte_offset 4 is not aligned to the 8 bytes of f64 elements");
    c.m.dl_tensor.byte_offset = UINT64_MAX - 2;
    refused(ctx, &c, NN_E_OVERFLOW, "+ byte_offset 18446744073709551613 passes the address space");

    cap_init(&c, 2, shape);
    c.shape[0] = INT64_MAX / 2;
    c.shape[1] = 4;
    refused(ctx, &c, NN_E_OVERFLOW, "nn_tensor_from_dlpack:");
    cr_expect_eq(deleted, 0);
    nn_ctx_destroy(ctx);
}

Test(dlpack, export_round_trip_and_deleter)
{
    nn_ctx *ctx = ref_ctx();
    int64_t dims[] = {3, 5, 2};
    nn_tensor t;
    /* Once first, so that the set of live host tensors has its table. */
    cr_assert_eq(nn_tensor_empty(ctx, NN_DTYPE_F64, 3, dims, &t), NN_OK);
    cr_assert_eq(nn_tensor_free(ctx, &t), NN_OK);
    long live = nn__host_alloc_live();
    cr_assert_eq(nn_tensor_empty(ctx, NN_DTYPE_F64, 3, dims, &t), NN_OK);
    cr_assert_eq(nn_tensor_fill_ints(ctx, &t, -9, 9, 42), NN_OK);
    void *data = t.data;
    double first = ((double *)data)[0], last = ((double *)data)[29];
    DLManagedTensor *m;
    cr_assert_eq(nn_tensor_to_dlpack(ctx, &t, &m), NN_OK, "%s", nn_last_error()->message);
    cr_expect_null(t.data, "the capsule owns the storage now");
    const DLTensor *dl = &m->dl_tensor;
    cr_expect_eq(dl->data, data);
    cr_expect_eq(dl->device.device_type, kDLCPU);
    cr_expect_eq(dl->device.device_id, 0);
    cr_expect_eq(dl->ndim, 3);
    cr_expect_eq(dl->dtype.code, kDLFloat);
    cr_expect_eq(dl->dtype.bits, 64);
    cr_expect_eq(dl->dtype.lanes, 1);
    cr_expect_eq(dl->shape[0], 3);
    cr_expect_eq(dl->shape[2], 2);
    cr_expect_eq(dl->strides[0], 10);
    cr_expect_eq(dl->strides[1], 2);
    cr_expect_eq(dl->strides[2], 1);
    cr_expect_eq(dl->byte_offset, 0);
    cr_assert_not_null(m->deleter);

    /* Back into nnprim: the same memory and values. */
    nn_tensor v;
    cr_assert_eq(nn_tensor_from_dlpack(ctx, m, &v), NN_OK, "%s", nn_last_error()->message);
    cr_expect_eq(v.data, data);
    cr_expect_eq(v.dtype, NN_DTYPE_F64);
    cr_expect_eq(memcmp(v.dims, dims, sizeof dims), 0);
    cr_expect_eq(((double *)v.data)[0], first);
    cr_expect_eq(((double *)v.data)[29], last);
    /* Exporting a view of the capsule (not nnprim's to give any more) is refused. */
    nn_tensor w = v;
    DLManagedTensor *m2 = (DLManagedTensor *)1;
    m->deleter(m);
    cr_expect_eq(nn_tensor_to_dlpack(ctx, &w, &m2), NN_E_BAD_POINTER);
    expect_message("nn_tensor_to_dlpack: t.data");
    expect_message("is not live storage from nn_tensor_empty()");
    cr_expect_null(m2);
    cr_expect_eq(nn__host_alloc_live(), live, "the deleter freed the storage and the capsule");
    nn_ctx_destroy(ctx);
}

Test(dlpack, export_refusals)
{
    nn_ctx *ctx = ref_ctx();
    DLManagedTensor *m;
    float buf[8];
    int64_t dims[] = {8};
    nn_tensor t;
    cr_assert_eq(nn_tensor_wrap(ctx, buf, NN_DTYPE_F32, 1, dims, NULL, &t), NN_OK);
    cr_expect_eq(nn_tensor_to_dlpack(ctx, &t, &m), NN_E_BAD_POINTER);
    expect_message("nn_tensor_to_dlpack: t.data");
    cr_expect_eq(t.data, buf, "a refused export changes nothing");
    cr_expect_eq(nn_tensor_to_dlpack(NULL, &t, &m), NN_E_INVALID_ARG);
    expect_message("nn_tensor_to_dlpack: ctx must not be NULL");
    cr_expect_eq(nn_tensor_to_dlpack(ctx, &t, NULL), NN_E_INVALID_ARG);
    expect_message("nn_tensor_to_dlpack: out must not be NULL");
    cr_expect_eq(nn_tensor_to_dlpack(ctx, NULL, &m), NN_E_INVALID_ARG);
    expect_message("nn_tensor_to_dlpack: t must not be NULL");
    t.space = NN_SPACE_DEVICE;
    t.device = 0;
    cr_expect_eq(nn_tensor_to_dlpack(ctx, &t, &m), NN_E_MEMSPACE);
    expect_message("nn_tensor_to_dlpack: t is device memory (device 0), but ctx computes on the "
                   "host");
    nn_tensor e;
    DLManagedTensor *m1;
    cr_assert_eq(nn_tensor_empty(ctx, NN_DTYPE_F32, 1, dims, &e), NN_OK);
    cr_assert_eq(nn_tensor_to_dlpack(ctx, &e, &m1), NN_OK);
    cr_expect_eq(nn_tensor_to_dlpack(ctx, &e, &m), NN_E_INVALID_ARG, "exported once already");
    expect_message("nn_tensor_to_dlpack: t.data must not be NULL");
    cr_expect_null(m);
    m1->deleter(m1);
    nn_ctx_destroy(ctx);
}

Test(dlpack, versioned)
{
    nn_ctx *ctx = ref_ctx();
    nn_tensor t;
#if defined(DLPACK_MAJOR_VERSION) && DLPACK_MAJOR_VERSION >= 1
    struct cap c;
    int64_t shape[] = {2, 3};
    cap_init(&c, 2, shape);
    DLManagedTensorVersioned v;
    memset(&v, 0, sizeof v);
    v.version.major = DLPACK_MAJOR_VERSION;
    v.version.minor = DLPACK_MINOR_VERSION;
    v.dl_tensor = c.m.dl_tensor;
    cr_expect_eq(nn_tensor_from_dlpack_versioned(ctx, &v, &t), NN_OK, "%s",
                 nn_last_error()->message);
    cr_expect_eq(t.data, c.data);
    v.version.major = DLPACK_MAJOR_VERSION + 1;
    cr_expect_eq(nn_tensor_from_dlpack_versioned(ctx, &v, &t), NN_E_UNSUPPORTED);
    expect_message("nn_tensor_from_dlpack_versioned: src.version.major is");
    v.version.major = DLPACK_MAJOR_VERSION;
    v.dl_tensor.dtype.lanes = 2;
    cr_expect_eq(nn_tensor_from_dlpack_versioned(ctx, &v, &t), NN_E_DTYPE);
    expect_message("nn_tensor_from_dlpack_versioned: src.dl_tensor.dtype.lanes must be 1, got 2");
#else
    /* Debian's dlpack.h 0.6 has no versioned capsule; any non-NULL pointer shows the answer. */
    char dummy[64] = {0};
    cr_expect_eq(nn_tensor_from_dlpack_versioned(
                     ctx, (const struct DLManagedTensorVersioned *)(void *)dummy, &t),
                 NN_E_NOT_BUILT);
    expect_message("nn_tensor_from_dlpack_versioned: nnprim was built with DLPack 0.6, which has "
                   "no versioned capsule");
#endif
    nn_ctx_destroy(ctx);
}

Test(dlpack_gpu, device_round_trip_and_refusals)
{
    NN_REQUIRE_GPU();
    nn_settings s;
    cr_assert_eq(nn_settings_defaults(&s), NN_OK);
    s.backend = NN_BACKEND_CUDNN;
    nn_ctx *ctx;
    cr_assert_eq(nn_ctx_create(&ctx, &s), NN_OK, "%s", nn_last_error()->message);
    nn_mem_stats before;
    cr_assert_eq(nn_mem_get_stats(0, &before), NN_OK);
    int64_t dims[] = {2, 4, 8, 8};
    nn_tensor t, h;
    cr_assert_eq(nn_tensor_empty(ctx, NN_DTYPE_F32, 4, dims, &t), NN_OK);
    cr_assert_eq(nn_tensor_fill_ints(ctx, &t, -5, 5, 7), NN_OK);
    void *data = t.data;
    DLManagedTensor *m;
    cr_assert_eq(nn_tensor_to_dlpack(ctx, &t, &m), NN_OK, "%s", nn_last_error()->message);
    cr_expect_eq(m->dl_tensor.device.device_type, kDLCUDA);
    cr_expect_eq(m->dl_tensor.device.device_id, 0);
    cr_expect_eq(m->dl_tensor.data, data);
    nn_tensor v;
    cr_assert_eq(nn_tensor_from_dlpack(ctx, m, &v), NN_OK, "%s", nn_last_error()->message);
    cr_expect_eq(v.space, NN_SPACE_DEVICE);
    cr_expect_eq(v.device, 0);
    /* The values made before export come back through the imported view. */
    nn_ctx *ref = ref_ctx();
    cr_assert_eq(nn_tensor_empty(ref, NN_DTYPE_F32, 4, dims, &h), NN_OK);
    cr_assert_eq(nn_tensor_copy(ctx, &h, &v), NN_OK, "%s", nn_last_error()->message);
    nn_tensor want;
    cr_assert_eq(nn_tensor_empty(ref, NN_DTYPE_F32, 4, dims, &want), NN_OK);
    cr_assert_eq(nn_tensor_fill_ints(ref, &want, -5, 5, 7), NN_OK);
    cr_expect_eq(memcmp(h.data, want.data, 2 * 4 * 8 * 8 * sizeof(float)), 0);
    /* A host capsule and another device's are refused by a cuDNN context. */
    DLManagedTensor bad = *m;
    bad.dl_tensor.device.device_type = kDLCPU;
    cr_expect_eq(nn_tensor_from_dlpack(ctx, &bad, &v), NN_E_MEMSPACE);
    expect_message("nn_tensor_from_dlpack: src.dl_tensor.device is kDLCPU (1), device_id 0, but "
                   "ctx computes on kDLCUDA device_id 0");
    bad.dl_tensor.device.device_type = kDLCUDA;
    bad.dl_tensor.device.device_id = 1;
    cr_expect_eq(nn_tensor_from_dlpack(ctx, &bad, &v), NN_E_MEMSPACE);
    expect_message("src.dl_tensor.device is kDLCUDA (2), device_id 1");
    /* The reference context refuses the device capsule. */
    cr_expect_eq(nn_tensor_from_dlpack(ref, m, &v), NN_E_MEMSPACE);
    m->deleter(m);
    cr_expect_eq(nn_ctx_synchronize(ctx), NN_OK);
    nn_mem_stats after;
    cr_assert_eq(nn_mem_get_stats(0, &after), NN_OK);
    cr_expect_eq(after.alloc_count, before.alloc_count, "the deleter gave the block back");
    nn_tensor_free(ref, &h);
    nn_tensor_free(ref, &want);
    nn_ctx_destroy(ref);
    nn_ctx_destroy(ctx);
}

#else /* !NN_HAVE_DLPACK */

Test(dlpack, not_built)
{
    nn_ctx *ctx = ref_ctx();
    nn_tensor t;
    cr_expect_eq(nn_tensor_from_dlpack(ctx, NULL, &t), NN_E_NOT_BUILT);
    expect_message("nn_tensor_from_dlpack: nnprim was built without dlpack/dlpack.h");
    cr_expect_eq(nn_tensor_from_dlpack_versioned(ctx, NULL, &t), NN_E_NOT_BUILT);
    struct DLManagedTensor *m;
    cr_expect_eq(nn_tensor_to_dlpack(ctx, &t, &m), NN_E_NOT_BUILT);
    cr_expect_null(m);
    cr_expect_eq(nn_build_features() & NN_FEATURE_DLPACK, 0);
    nn_ctx_destroy(ctx);
}

#endif

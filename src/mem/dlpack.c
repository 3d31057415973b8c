/* DLPack import and export (include/nnprim/dlpack.h). It lives beside the tensor storage because
 * an exported capsule's deleter frees into the pool (or the user allocator), as nn_tensor_free()
 * does. DLPack's structs come from Debian's libdlpack-dev header, found by meson. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "nn_config.h"

#include "core/ctx.h"
#include "core/error.h"
#include "core/log.h"
#include "nnprim/dlpack.h"

#if NN_HAVE_DLPACK

#include <dlpack/dlpack.h>

#include "core/alloc.h"
#include "core/tensor_util.h"
#include "mem/mem.h"
#include "mem/tensor_mem.h"

static const char *device_type_name(int t)
{
    switch (t) {
    case kDLCPU: return "kDLCPU";
    case kDLCUDA: return "kDLCUDA";
    case kDLCUDAHost: return "kDLCUDAHost";
    case kDLCUDAManaged: return "kDLCUDAManaged";
    case kDLROCM: return "kDLROCM";
    case kDLROCMHost: return "kDLROCMHost";
    case kDLOpenCL: return "kDLOpenCL";
    case kDLVulkan: return "kDLVulkan";
    case kDLMetal: return "kDLMetal";
    }
    return "an unknown device type";
}

static nn_status import_dtype(nn_ctx *ctx, const char *fn, DLDataType d, nn_dtype *out)
{
    if (d.lanes != 1)
        return NN__FAIL(ctx, NN_E_DTYPE, "%s: src.dl_tensor.dtype.lanes must be 1, got %u", fn,
                        (unsigned)d.lanes);
    if (d.code == kDLFloat && d.bits == 32)
        *out = NN_DTYPE_F32;
    else if (d.code == kDLFloat && d.bits == 64)
        *out = NN_DTYPE_F64;
    else if (d.code == kDLFloat && d.bits == 16)
        *out = NN_DTYPE_F16;
    else if (d.code == kDLBfloat && d.bits == 16)
        *out = NN_DTYPE_BF16;
    else
        return NN__FAIL(ctx, NN_E_DTYPE,
                        "%s: src.dl_tensor.dtype (code %u, %u bits) is not a type of nnprim: it "
                        "takes kDLFloat with 32, 64 or 16 bits and kDLBfloat with 16",
                        fn, (unsigned)d.code, (unsigned)d.bits);
    return NN_OK;
}

static nn_status import_tensor(nn_ctx *ctx, const char *fn, const DLTensor *dl, nn_tensor *out)
{
    if (!dl->data)
        return NN__FAIL(ctx, NN_E_INVALID_ARG, "%s: src.dl_tensor.data must not be NULL", fn);
    nn_space space = NN_SPACE_HOST;
    int device = -1;
    int dt = (int)dl->device.device_type;
    if (nn__ctx_on_gpu(ctx)) {
        if (dt != kDLCUDA || dl->device.device_id != ctx->device)
            return NN__FAIL(ctx, NN_E_MEMSPACE,
                            "%s: src.dl_tensor.device is %s (%d), device_id %d, but ctx computes "
                            "on kDLCUDA device_id %d",
                            fn, device_type_name(dt), dt, (int)dl->device.device_id, ctx->device);
        space = NN_SPACE_DEVICE;
        device = ctx->device;
    } else if (dt != kDLCPU && dt != kDLCUDAHost) {
        return NN__FAIL(ctx, NN_E_MEMSPACE,
                        "%s: src.dl_tensor.device is %s (%d), but ctx runs the reference backend, "
                        "which takes kDLCPU or kDLCUDAHost",
                        fn, device_type_name(dt), dt);
    }
    if (dl->ndim < 1 || dl->ndim > NN_MAX_RANK)
        return NN__FAIL(ctx, NN_E_INVALID_ARG, "%s: src.dl_tensor.ndim must be in [1, %d], got %d",
                        fn, NN_MAX_RANK, (int)dl->ndim);
    if (!dl->shape)
        return NN__FAIL(ctx, NN_E_INVALID_ARG, "%s: src.dl_tensor.shape must not be NULL", fn);
    int rank = (int)dl->ndim;
    for (int i = 0; i < rank; i++) {
        if (dl->shape[i] < 1)
            return NN__FAIL(ctx, NN_E_INVALID_ARG,
                            "%s: src.dl_tensor.shape[%d] must be >= 1, got %lld", fn, i,
                            (long long)dl->shape[i]);
        if (dl->strides && dl->strides[i] < 0)
            return NN__FAIL(ctx, NN_E_INVALID_ARG,
                            "%s: src.dl_tensor.strides[%d] must be >= 0, got %lld", fn, i,
                            (long long)dl->strides[i]);
    }
    nn_dtype dtype = NN_DTYPE_F32;
    NN__TRY(import_dtype(ctx, fn, dl->dtype, &dtype));
    uintptr_t base = (uintptr_t)dl->data;
    /* No object is larger than PTRDIFF_MAX bytes: a larger offset cannot point into the capsule's
     * memory (and pointer arithmetic with it is undefined). */
    if (dl->byte_offset > (uint64_t)PTRDIFF_MAX || dl->byte_offset > UINTPTR_MAX - base)
        return NN__FAIL(ctx, NN_E_OVERFLOW,
                        "%s: src.dl_tensor.data (%p) + byte_offset %llu passes the address space",
                        fn, dl->data, (unsigned long long)dl->byte_offset);
    char *data = (char *)(base + (uintptr_t)dl->byte_offset);
    size_t es = nn_dtype_size(dtype);
    if ((uintptr_t)data % es)
        return NN__FAIL(ctx, NN_E_INVALID_ARG,
                        "%s: src.dl_tensor.data (%p) + byte_offset %llu is not aligned to the %zu "
                        "bytes of %s elements",
                        fn, dl->data, (unsigned long long)dl->byte_offset, es,
                        nn_dtype_name(dtype));
    int64_t strides[NN_MAX_RANK];
    size_t bytes;
    NN__TRY(nn__tensor_layout(ctx, fn, dtype, rank, dl->shape, dl->strides, strides, &bytes));
    nn__tensor_set(out, data, dtype, rank, dl->shape, strides, space, device);
    /* The view's memory is the capsule's whatever data points to (nnprim's own storage too, from
     * an export or a capsule made by hand): the mark, not a pointer lookup, makes free refuse it.
     */
    out->flags = NN_TENSOR_BORROWED;
    return NN_OK;
}

static nn_status import_args(nn_ctx *ctx, const char *fn, const void *src, nn_tensor *out)
{
    if (!ctx) return NN__FAIL(NULL, NN_E_INVALID_ARG, "%s: ctx must not be NULL", fn);
    if (!out) return NN__FAIL(ctx, NN_E_INVALID_ARG, "%s: out must not be NULL", fn);
    memset(out, 0, sizeof *out);
    if (!src) return NN__FAIL(ctx, NN_E_INVALID_ARG, "%s: src must not be NULL", fn);
    return NN_OK;
}

nn_status nn_tensor_from_dlpack(nn_ctx *ctx, const struct DLManagedTensor *src, nn_tensor *out)
{
    const char *fn = "nn_tensor_from_dlpack";
    NN__TRY(import_args(ctx, fn, src, out));
    nn_status st = import_tensor(ctx, fn, &src->dl_tensor, out);
    if (st != NN_OK) memset(out, 0, sizeof *out);
    return st;
}

nn_status nn_tensor_from_dlpack_versioned(nn_ctx *ctx, const struct DLManagedTensorVersioned *src,
                                          nn_tensor *out)
{
    const char *fn = "nn_tensor_from_dlpack_versioned";
    NN__TRY(import_args(ctx, fn, src, out));
#if defined(DLPACK_MAJOR_VERSION) && DLPACK_MAJOR_VERSION >= 1
    if (src->version.major != DLPACK_MAJOR_VERSION)
        return NN__FAIL(ctx, NN_E_UNSUPPORTED,
                        "%s: src.version.major is %u, but nnprim was built with DLPack %d.x", fn,
                        (unsigned)src->version.major, DLPACK_MAJOR_VERSION);
    nn_status st = import_tensor(ctx, fn, &src->dl_tensor, out);
    if (st != NN_OK) memset(out, 0, sizeof *out);
    return st;
#else
    return NN__FAIL(ctx, NN_E_NOT_BUILT,
                    "%s: nnprim was built with DLPack %d.%d, which has no versioned capsule", fn,
                    DLPACK_VERSION / 100, DLPACK_VERSION % 100 / 10);
#endif
}

/* An exported capsule: DLPack's struct first, then the arrays it points to and what the
 * deleter needs. */
struct capsule {
    DLManagedTensor m;
    int64_t shape[NN_MAX_RANK], strides[NN_MAX_RANK];
    nn_ctx *ctx;
    nn_tensor t;
    /* Linked while the deleter has not run: the storage is the capsule's, so a second export of
     * it (from a copy of the view) or an nn_tensor_free() of it would free it under the capsule. */
    struct nn__storage_export live;
};

static void capsule_delete(DLManagedTensor *self)
{
    struct capsule *c = self->manager_ctx;
    nn__storage_export_unlink(&c->live);
    /* A deleter cannot return a status: a failure (a CUDA error of the stream) is said. */
    if (nn_tensor_free(c->ctx, &c->t) != NN_OK)
        nn__warn(nn__verbose(c->ctx), "the deleter of a DLPack capsule: %s",
                 nn_last_error()->message);
    nn__host_free(c);
}

nn_status nn_tensor_to_dlpack(nn_ctx *ctx, nn_tensor *t, struct DLManagedTensor **out)
{
    const char *fn = "nn_tensor_to_dlpack";
    if (!ctx) return NN__FAIL(NULL, NN_E_INVALID_ARG, "%s: ctx must not be NULL", fn);
    if (!out) return NN__FAIL(ctx, NN_E_INVALID_ARG, "%s: out must not be NULL", fn);
    *out = NULL;
    NN__TRY(nn__tensor_validate(ctx, fn, t, "t"));
    int gpu = nn__ctx_on_gpu(ctx);
    if (gpu ? t->space != NN_SPACE_DEVICE || t->device != ctx->device : t->space != NN_SPACE_HOST)
        return NN__FAIL(ctx, NN_E_MEMSPACE,
                        "%s: t is %s memory (device %d), but ctx computes on %s (device %d)", fn,
                        t->space == NN_SPACE_DEVICE ? "device" : "host", t->device,
                        gpu ? "a GPU" : "the host", ctx->device);
    if (!(gpu ? nn__dev_owns(ctx, t->data) : nn__host_tensor_owned(t->data)))
        return NN__FAIL(ctx, NN_E_BAD_POINTER,
                        "%s: t.data %p is not live storage from nn_tensor_empty() (a view of "
                        "caller memory, freed, or exported already)",
                        fn, t->data);
    if (nn__storage_exported(t->data))
        return NN__FAIL(ctx, NN_E_BAD_POINTER,
                        "%s: t.data %p is already owned by a DLPack capsule (exported from "
                        "another copy of the view); its deleter frees it",
                        fn, t->data);
    /* Decisive even when data is a live tensor's storage (a capsule made by hand over it). */
    if (t->flags & NN_TENSOR_BORROWED)
        return NN__FAIL(ctx, NN_E_BAD_POINTER,
                        "%s: t is a borrowed view (t.flags has NN_TENSOR_BORROWED: made by "
                        "nn_tensor_wrap(), nn_rnn_weight_view() or a DLPack import); its memory is "
                        "its owner's, not nnprim's to hand over",
                        fn);
    struct capsule *c = nn__host_calloc(1, sizeof *c);
    if (!c) return NN__FAIL(ctx, NN_E_OOM_HOST, "%s: out of host memory for the capsule", fn);
    c->ctx = ctx;
    c->t = *t;
    memcpy(c->shape, t->dims, (size_t)t->rank * sizeof t->dims[0]);
    memcpy(c->strides, t->strides, (size_t)t->rank * sizeof t->strides[0]);
    DLTensor *dl = &c->m.dl_tensor;
    dl->data = t->data;
    dl->device.device_type = gpu ? kDLCUDA : kDLCPU;
    dl->device.device_id = gpu ? ctx->device : 0;
    dl->ndim = t->rank;
    static const DLDataType types[] = {
        [NN_DTYPE_F32] = {kDLFloat, 32, 1},
        [NN_DTYPE_F64] = {kDLFloat, 64, 1},
        [NN_DTYPE_F16] = {kDLFloat, 16, 1},
        [NN_DTYPE_BF16] = {kDLBfloat, 16, 1},
    };
    dl->dtype = types[t->dtype];
    dl->shape = c->shape;
    dl->strides = c->strides;
    dl->byte_offset = 0;
    c->m.manager_ctx = c;
    c->m.deleter = capsule_delete;
    nn__storage_export_link(&c->live, t->data);
    t->data = NULL;
    *out = &c->m;
    return NN_OK;
}

#else /* !NN_HAVE_DLPACK */

static nn_status not_built(nn_ctx *ctx, const char *fn)
{
    return NN__FAIL(ctx, NN_E_NOT_BUILT,
                    "%s: nnprim was built without dlpack/dlpack.h (install libdlpack-dev and "
                    "rebuild)",
                    fn);
}

nn_status nn_tensor_from_dlpack(nn_ctx *ctx, const struct DLManagedTensor *src, nn_tensor *out)
{
    if (out) memset(out, 0, sizeof *out);
    return not_built(ctx, "nn_tensor_from_dlpack");
}

nn_status nn_tensor_from_dlpack_versioned(nn_ctx *ctx, const struct DLManagedTensorVersioned *src,
                                          nn_tensor *out)
{
    if (out) memset(out, 0, sizeof *out);
    return not_built(ctx, "nn_tensor_from_dlpack_versioned");
}

nn_status nn_tensor_to_dlpack(nn_ctx *ctx, nn_tensor *t, struct DLManagedTensor **out)
{
    if (out) *out = NULL;
    return not_built(ctx, "nn_tensor_to_dlpack");
}

#endif

/*
 * nnprim: DLPack interop, for frameworks that exchange tensors as DLManagedTensor capsules.
 *
 * The structs are DLPack's own: include <dlpack/dlpack.h> (Debian's libdlpack-dev, or the copy
 * your framework ships) to read or fill them; this header only names them, so it compiles
 * without DLPack. A build of nnprim made without dlpack.h still has these functions; they answer
 * NN_E_NOT_BUILT (nn_build_features() then lacks NN_FEATURE_DLPACK).
 *
 * Import wraps a capsule's memory as an nn_tensor without copying: the view points into the
 * capsule's data and is valid as long as the capsule is. Export hands a tensor's storage over to
 * a new capsule whose deleter gives it back to nnprim.
 *
 * Devices: a reference-backend context takes kDLCPU (and kDLCUDAHost, pinned host memory); a
 * cuDNN context takes kDLCUDA with device_id equal to its device. The device a capsule states is
 * trusted (not looked up as nn_tensor_wrap() does).
 * Dtypes: kDLFloat with 32, 64 or 16 bits and kDLBfloat with 16 bits, one lane each.
 * Shape: 1 <= ndim <= NN_MAX_RANK, every dim >= 1 (nnprim has no empty or rank-0 tensors).
 * Strides: NULL means compact row-major; given strides (in elements, as in nnprim) must be >= 0.
 * byte_offset is added to data; the result must be aligned to the element size.
 */
#ifndef NNPRIM_DLPACK_H
#define NNPRIM_DLPACK_H

#include "context.h"
#include "status.h"
#include "tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

struct DLManagedTensor;          /* <dlpack/dlpack.h>, any version */
struct DLManagedTensorVersioned; /* <dlpack/dlpack.h> of DLPack 1.0 and later */

/**
 * Wrap a DLPack tensor as an nn_tensor, with no copy.
 *
 * @param ctx the context the view will be used with (it decides which devices are accepted).
 * @param src the capsule; read, not kept. Its deleter is not called.
 * @param out out: the view; zeroed on failure.
 * @return NN_OK; NN_E_INVALID_ARG (NULL ctx, src, out, src.dl_tensor.data or .shape; ndim out of
 *         range; a dim < 1; a negative stride; data + byte_offset not aligned to the element
 *         size); NN_E_DTYPE (a dtype code, bits or lanes nnprim has no type for); NN_E_MEMSPACE
 *         (a device type or device_id the context does not compute on); NN_E_OVERFLOW (element
 *         count or extent); NN_E_NOT_BUILT (built without dlpack.h). Messages name the field
 *         ("nn_tensor_from_dlpack: src.dl_tensor.dtype.lanes must be 1, got 4").
 * Ownership: the capsule stays the caller's, who must keep it alive (not call its deleter)
 * while the view is used, including work queued on a stream. The view has NN_TENSOR_BORROWED in
 * its flags (tensor.h): nn_tensor_free() and nn_tensor_to_dlpack() refuse it (and its copies) with
 * NN_E_BAD_POINTER and change nothing, whatever memory the capsule's data is: caller memory,
 * nnprim's own storage of a live tensor (of this or another context), a capsule made by
 * nn_tensor_to_dlpack(), or freed memory. nnprim never calls the deleter; there is nothing of
 * nnprim's to release for the view. When data is a live tensor's storage, that tensor still owns
 * it: its nn_tensor_free() frees it (the view is then invalid, as after the deleter).
 */
NN_API nn_status nn_tensor_from_dlpack(nn_ctx *ctx, const struct DLManagedTensor *src,
                                       nn_tensor *out);

/**
 * nn_tensor_from_dlpack() for the versioned capsule of DLPack 1.x. The capsule's major version
 * must be the one nnprim was built with. nnprim does not track read-only views: a capsule with
 * DLPACK_FLAG_BITMASK_READ_ONLY may be imported, and must then be used as an input only.
 *
 * @return as nn_tensor_from_dlpack(), the messages naming nn_tensor_from_dlpack_versioned;
 *         also NN_E_UNSUPPORTED for another major version; NN_E_NOT_BUILT when nnprim was built
 *         with a dlpack.h older than 1.0 (Debian's 0.6 has no versioned struct) or without one.
 */
NN_API nn_status nn_tensor_from_dlpack_versioned(nn_ctx *ctx,
                                                 const struct DLManagedTensorVersioned *src,
                                                 nn_tensor *out);

/**
 * Hand a tensor from nn_tensor_empty() over to a new DLPack capsule (DLPack 0.6 layout, also
 * read by 1.x consumers of the unversioned protocol). The capsule has its own shape and strides
 * arrays, byte_offset 0, the device kDLCPU (reference context) or kDLCUDA with the context's
 * device, and a deleter that frees the storage as nn_tensor_free(ctx, ...) would: into the
 * device's pool, or to the user allocator that made it (mem.h), ordered on ctx's stream.
 *
 * @param ctx the context the tensor was made with (or one of the same device); it must outlive
 *            the capsule: call the deleter before nn_ctx_destroy(ctx).
 * @param t   the tensor; on success its data is set to NULL (the capsule owns the storage now).
 * @param out out: the capsule; NULL on failure.
 * @return NN_OK; NN_E_INVALID_ARG (NULL ctx, t or out, an invalid t); NN_E_BAD_POINTER (t.data
 *         is not storage from nn_tensor_empty() that is still live, or is a capsule's already,
 *         exported from another copy of the view, or t is an imported view, NN_TENSOR_BORROWED:
 *         nothing changes then);
 *         NN_E_MEMSPACE (t lives elsewhere than ctx computes); NN_E_OOM_HOST; NN_E_NOT_BUILT.
 * Ownership: the consumer calls out->deleter(out) once when done; that frees the storage and the
 * capsule.
 */
NN_API nn_status nn_tensor_to_dlpack(nn_ctx *ctx, nn_tensor *t, struct DLManagedTensor **out);

#ifdef __cplusplus
}
#endif

#endif /* NNPRIM_DLPACK_H */

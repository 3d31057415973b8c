/*
 * nnprim: tensor views.
 *
 * An nn_tensor is a small public struct that *describes* memory: data pointer, dtype, rank,
 * dims, strides (in elements, not bytes) and the memory space the data lives in. It never owns
 * the memory. Storage comes from nnprim (nn_tensor_empty(), released with nn_tensor_free()), from
 * the caller (nn_tensor_wrap(), which checks once where the pointer really lives, so a host
 * pointer never reaches cuDNN as device memory or the reverse), or from a DLPack capsule
 * (dlpack.h; such a view is marked NN_TENSOR_BORROWED and never freed by nnprim).
 *
 * Layout: dims[0] is the outermost dimension; NCHW / NCDHW order for activations and
 * KCRS / KCTRS for filters. The default strides are row-major contiguous. Strides must be >= 0
 * (a stride of 0 broadcasts); ops say which strided layouts they accept.
 *
 * A valid tensor has 1 <= rank <= NN_MAX_RANK, every dim >= 1, every stride >= 0, a non-NULL
 * data pointer aligned to its element size (4 bytes for f32, 8 for f64, 2 for f16 and bf16),
 * space NN_SPACE_HOST or NN_SPACE_DEVICE (then device >= 0), flags 0 or NN_TENSOR_BORROWED,
 * reserved fields zero, an element count that fits in int64_t and a byte extent that fits in
 * int64_t (and size_t).
 *
 * Overlap: a view that a function writes (an output) must not map two of its elements to one
 * address: a stride 0 on a dim > 1 is refused there, and so is any stride pattern that cannot be
 * proven distinct (sorted by stride, each dim > 1 must step past the whole extent of the
 * smaller ones; packed layouts in any dim order, and padded ones, pass). Inputs may broadcast.
 * Where a function forbids its output to overlap an input, the test is conservative: the byte
 * ranges [data, data + extent) of two views in the same memory space may not intersect, even
 * when the views interleave without sharing an element. Each op's header says which of its
 * arguments may overlap.
 *
 * Every failure message starts with the public function called and names the argument
 * ("nn_tensor_copy: dst.data (0x...) is aligned to 2 byte(s), but f32 elements need 4").
 */
#ifndef NNPRIM_TENSOR_H
#define NNPRIM_TENSOR_H

#include <stddef.h>
#include <stdint.h>

#include "context.h"
#include "status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define NN_MAX_RANK 8

/** Element types. f16 and bf16 are stored as their 16-bit IEEE / bfloat16 bit patterns. */
typedef enum nn_dtype {
    NN_DTYPE_F32 = 1,
    NN_DTYPE_F64 = 2,
    NN_DTYPE_F16 = 3,
    NN_DTYPE_BF16 = 4
} nn_dtype;

/** Where a tensor's data lives. */
typedef enum nn_space {
    NN_SPACE_HOST = 0,  /**< ordinary or pinned host memory */
    NN_SPACE_DEVICE = 1 /**< device memory of CUDA device nn_tensor.device */
} nn_space;

/** A view of memory; see the top of this header. Fill with the functions below. */
typedef struct nn_tensor {
    void *data;
    nn_dtype dtype;
    int rank;
    int64_t dims[NN_MAX_RANK];
    int64_t strides[NN_MAX_RANK]; /**< in elements */
    nn_space space;
    int device;           /**< CUDA ordinal when space is NN_SPACE_DEVICE, else -1 */
    uint64_t flags;       /**< 0, or NN_TENSOR_BORROWED where nnprim set it (keep it in copies) */
    uint64_t reserved[1]; /**< zero */
} nn_tensor;

/**
 * nn_tensor.flags: the view does not own its memory. nn_tensor_wrap(), nn_rnn_weight_view() and
 * nn_tensor_from_dlpack*() set it on the views they make (the memory is the caller's, the weight
 * buffer's, or the capsule deleter's, wherever it came from, nnprim's own storage included);
 * nn_tensor_free() and nn_tensor_to_dlpack() refuse such a view with NN_E_BAD_POINTER, whatever
 * its data points to. Ops take it like any view.
 */
#define NN_TENSOR_BORROWED 1u

/** @return bytes per element of dtype, or 0 for a value that is not an nn_dtype. */
NN_API size_t nn_dtype_size(nn_dtype dtype);

/** @return "f32", "f64", "f16", "bf16", or "invalid"; a static string. */
NN_API const char *nn_dtype_name(nn_dtype dtype);

/**
 * Check that a tensor view is well formed (see the top of this header).
 *
 * @param t    the view.
 * @param name how the message names it ("x", "dw"); NULL gives "tensor".
 * @return NN_OK; NN_E_INVALID_ARG (NULL t or data, misaligned data, rank, dims, strides, space,
 *         device, flags other than 0 or NN_TENSOR_BORROWED, a nonzero reserved field); NN_E_DTYPE;
 * NN_E_OVERFLOW (the element count or the extent does not fit); the message starts
 * "nn_tensor_validate: " and names the field.
 */
NN_API nn_status nn_tensor_validate(const nn_tensor *t, const char *name);

/**
 * @return the number of elements (the product of dims): exact for every tensor that passes
 *         nn_tensor_validate(); 0 for a NULL t or a rank outside [1, NN_MAX_RANK]; -1 when the
 *         product overflows int64_t (computed without undefined behaviour). Dims < 1 are not
 *         checked: validate first.
 */
NN_API int64_t nn_tensor_numel(const nn_tensor *t);

/**
 * Bytes spanned by the tensor's elements: (1 + sum of (dims[i] - 1) * strides[i]) * element size.
 *
 * @param t   a view with valid dtype, rank, dims and strides (data is not looked at).
 * @param out out: the byte extent.
 * @return NN_OK; NN_E_INVALID_ARG (NULL t or out, rank, dims, a negative stride); NN_E_DTYPE;
 *         NN_E_OVERFLOW if the element count or the extent does not fit in int64_t.
 */
NN_API nn_status nn_tensor_extent_bytes(const nn_tensor *t, size_t *out);

/** @return nonzero if t's strides are the row-major contiguous strides of its dims (dims of 1
 *          may have any stride); 0 for a NULL t or an invalid rank. */
NN_API int nn_tensor_is_contiguous(const nn_tensor *t);

/**
 * Compute row-major contiguous strides.
 *
 * @param rank    1..NN_MAX_RANK.
 * @param dims    rank dims, each >= 1.
 * @param strides out: rank strides.
 * @return NN_OK; NN_E_INVALID_ARG (NULL dims or strides, rank, a dim < 1); NN_E_OVERFLOW if the
 *         element count overflows int64_t (the message gives the dims).
 */
NN_API nn_status nn_contiguous_strides(int rank, const int64_t *dims, int64_t *strides);

/**
 * Allocate a contiguous tensor in the context's memory: device memory from the device's pool
 * for a cuDNN context, host memory for a reference context. The contents are undefined.
 *
 * @param ctx   the context whose memory and stream are used.
 * @param dtype element type.
 * @param rank  1..NN_MAX_RANK.
 * @param dims  rank dims, each >= 1.
 * @param out   out: the view; zeroed on failure.
 * @return NN_OK; NN_E_INVALID_ARG (NULL ctx, out or dims, rank, a dim < 1); NN_E_DTYPE;
 *         NN_E_OVERFLOW (element count or byte extent, with the dims); NN_E_OOM_HOST;
 *         NN_E_OOM_DEVICE (the message gives requested, in use, reserved, limit and why: the
 *         limit, the driver, or a size no device has); NN_E_CUDA.
 * Ownership: the storage belongs to nnprim until nn_tensor_free() is called with the same
 * context (or another context of the same device).
 */
NN_API nn_status nn_tensor_empty(nn_ctx *ctx, nn_dtype dtype, int rank, const int64_t *dims,
                                 nn_tensor *out);

/**
 * Release storage obtained from nn_tensor_empty(). On a device, stream order makes the release
 * safe without a host synchronisation: the memory is reused only after the work queued on the
 * context's stream so far.
 *
 * @param ctx a context of the same device (or the host, for host tensors).
 * @param t   the view; its data is set to NULL on success. A view with NULL data is a no-op.
 * @return NN_OK; NN_E_INVALID_ARG (NULL ctx or t, an invalid space); NN_E_MEMSPACE for device
 *         memory given to a reference context or to a context of another device;
 *         NN_E_BAD_POINTER if the data was not allocated by nn_tensor_empty(), was already
 *         freed, or was handed to a DLPack capsule by nn_tensor_to_dlpack() (its deleter frees
 *         it), or t is a view imported from a DLPack capsule (t.flags has NN_TENSOR_BORROWED:
 *         refused whatever memory it points to, nnprim's own storage included); nothing is
 *         changed then; NN_E_CUDA.
 */
NN_API nn_status nn_tensor_free(nn_ctx *ctx, nn_tensor *t);

/**
 * Describe caller-owned memory as a tensor. The pointer's memory space is looked up once
 * (cudaPointerGetAttributes): device memory gets NN_SPACE_DEVICE and its ordinal, anything else
 * NN_SPACE_HOST. A reference context refuses device memory and a cuDNN context refuses host
 * memory (and device memory of another device).
 *
 * @param ctx     the context the tensor will be used with.
 * @param data    the memory, not NULL; must hold the tensor's extent (see
 *                nn_tensor_extent_bytes()).
 * @param dtype   element type.
 * @param rank    1..NN_MAX_RANK.
 * @param dims    rank dims, each >= 1.
 * @param strides rank strides in elements, each >= 0; NULL = row-major contiguous.
 * @param out     out: the view; zeroed on failure.
 * @return NN_OK; NN_E_INVALID_ARG (NULL ctx, data, out or dims, rank, a dim < 1, a negative
 *         stride, data not aligned to the element size); NN_E_DTYPE; NN_E_OVERFLOW; NN_E_MEMSPACE
 *         (the message says where the pointer lives and where the context needs it).
 * Ownership: the memory stays the caller's; it must outlive every use of the view. The view is
 * marked NN_TENSOR_BORROWED: nn_tensor_free() and nn_tensor_to_dlpack() refuse it, also when
 * data is the storage of a tensor from nn_tensor_empty() (that tensor's free releases it).
 */
NN_API nn_status nn_tensor_wrap(nn_ctx *ctx, void *data, nn_dtype dtype, int rank,
                                const int64_t *dims, const int64_t *strides, nn_tensor *out);

/**
 * Copy elements between two tensors of the same dtype and dims, in any memory spaces.
 * Host-to-host copies take any strides. A device view must be packed: its elements fill
 * numel consecutive elements in some order of its dims (row-major, channels-last, or another
 * permutation). Between a device and a host view of different layouts the copy goes through a
 * host buffer in the device view's layout; two device views must have the same strides. Copies
 * that end in host memory, and copies from a host view of another layout than the device's, have
 * completed when the call returns; other copies to device memory are queued on the context's
 * stream.
 *
 * @param ctx a context (its stream orders device copies).
 * @param dst destination view; must not overlap src (byte ranges, see the top of this header)
 *            nor map two elements to one address.
 * @param src source view; may broadcast (stride 0).
 * @return NN_OK; NN_E_INVALID_ARG (NULL ctx, an invalid view, dst and src overlapping, a
 *         self-overlapping dst); NN_E_OVERFLOW (an invalid view); NN_E_SHAPE (dims differ);
 *         NN_E_DTYPE (dtypes differ or are invalid); NN_E_MEMSPACE (a device view with a
 *         reference context); NN_E_UNSUPPORTED (a device view with gaps or repeated
 *         elements, two device views of different layouts); NN_E_OOM_HOST (the staging buffer);
 *         NN_E_CUDA;
 *         NN_E_NOT_BUILT (device memory in a build without CUDA); NN_E_GRAPH (inside a graph
 *         capture, a copy to or from host memory: graph.h). A refused call writes nothing.
 */
NN_API nn_status nn_tensor_copy(nn_ctx *ctx, nn_tensor *dst, const nn_tensor *src);

/**
 * Set every element to value (rounded to the dtype). Device tensors are filled by a kernel on the
 * context's stream that computes the values the host would, bitwise (or, in a build without the
 * kernel, through a host staging copy), so fills can be captured in a graph (graph.h). Every fill
 * writes t, so t must not self-overlap (see the top of this header); t lives where the context
 * computes, or in host memory.
 *
 * @param value any double that is NaN, infinite or within the dtype's finite range (a finite
 *              value beyond it, which would become infinite, is refused).
 * @return NN_OK; NN_E_INVALID_ARG (NULL ctx, an invalid or self-overlapping t, value out of
 *         range); NN_E_DTYPE; NN_E_OVERFLOW; NN_E_MEMSPACE (a device t with a reference
 *         context); NN_E_UNSUPPORTED (strided device tensor); NN_E_CUDA; NN_E_NOT_BUILT;
 *         NN_E_OOM_HOST (the staging copy); NN_E_GRAPH (inside a graph capture, in a build
 *         without the fill kernel).
 */
NN_API nn_status nn_tensor_fill_constant(nn_ctx *ctx, nn_tensor *t, double value);

/**
 * Fill with independent uniform values in [lo, hi), reproducible from seed: the same seed, dims
 * and dtype give the same values on every backend and machine (elements are drawn in row-major
 * order of the dims).
 *
 * @return NN_OK; NN_E_INVALID_ARG (as nn_tensor_fill_constant(), and for lo > hi, a NaN or
 *         infinite bound, a width hi - lo that overflows a double, or a bound beyond the dtype's
 *         finite range); NN_E_DTYPE; NN_E_OVERFLOW; NN_E_MEMSPACE; NN_E_UNSUPPORTED; NN_E_CUDA;
 *         NN_E_NOT_BUILT; NN_E_OOM_HOST; NN_E_GRAPH.
 */
NN_API nn_status nn_tensor_fill_uniform(nn_ctx *ctx, nn_tensor *t, double lo, double hi,
                                        uint64_t seed);

/**
 * Fill with uniform integers in [lo, hi], reproducible from seed. Small integers make sums exact
 * in floating point, so results can be compared with zero tolerance.
 *
 * Every integer in [lo, hi] must be exact in the dtype: |lo| and |hi| at most 2048 for f16, 256
 * for bf16, 2^24 for f32 (any int for f64).
 *
 * @return NN_OK; NN_E_INVALID_ARG (as nn_tensor_fill_constant(), and for lo > hi or a bound
 *         outside the exact range); NN_E_DTYPE; NN_E_OVERFLOW; NN_E_MEMSPACE; NN_E_UNSUPPORTED;
 *         NN_E_CUDA; NN_E_NOT_BUILT; NN_E_OOM_HOST; NN_E_GRAPH.
 */
NN_API nn_status nn_tensor_fill_ints(nn_ctx *ctx, nn_tensor *t, int lo, int hi, uint64_t seed);

#ifdef __cplusplus
}
#endif

#endif /* NNPRIM_TENSOR_H */

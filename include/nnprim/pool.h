/*
 * nnprim: max and mean pooling, forward and backward, with pullbacks.
 *
 * Layout: x is N x C x S1 [x S2 [x S3]] (NCW, NCHW or NCDHW) with spatial rank 1, 2 or 3; y has
 * the same N and C and the spatial sizes of nn_pool_output_shape(). Any non-negative strides
 * are accepted (cuDNN takes strided tensor descriptors).
 *
 * Semantics (docs/POOL.md has the full text):
 *   - output size per spatial dim i: floor((in_i + pad_lo_i + pad_hi_i - window_i) / stride_i) + 1;
 *   - output position o covers inputs o * stride - pad_lo ... o * stride - pad_lo + window - 1;
 *     positions outside the input are padding;
 *   - MAX ignores padding; MEAN_INCLUDE_PAD divides by the window volume (padding counts as 0);
 *     MEAN_EXCLUDE_PAD divides by the number of real inputs in the window (always >= 1, because
 *     padding is smaller than the window);
 *   - max-pooling backward gives each output's gradient to one input of its window: the maximum
 *     that comes first in window order (row-major over the window's positions) on the reference
 *     backend. Which tied input cuDNN picks is not documented by NVIDIA, so compare backends on
 *     inputs without ties within a window.
 *
 * Backends: the reference runs f32, f64, f16 and bf16 in double precision. The cuDNN backend runs
 * f32, f16, bf16 and f64 through the legacy pooling calls (the verbose line says "cudnn-legacy");
 * 1-D pooling runs as 2-D. cuDNN's legacy pooling has one padding per dim, so the cuDNN backend
 * refuses pad_lo != pad_hi with NN_E_UNSUPPORTED.
 *
 * Memory (docs/INPUT.md): an output (y, dx) must not overlap what the call reads (for backward
 * also the forward's x and y, which the pullback keeps), and no two of its elements may share
 * memory (a zero stride on a dim > 1, or interleaved strides); x may broadcast (zero strides) on
 * the reference backend. Data pointers must be aligned to the element size. Both are refused with
 * NN_E_INVALID_ARG. The cuDNN backend takes dims, strides, window and stride as int, strides
 * >= 1 and at most INT_MAX elements per tensor: anything else is NN_E_UNSUPPORTED before cuDNN
 * sees it.
 */
#ifndef NNPRIM_POOL_H
#define NNPRIM_POOL_H

#include <stddef.h>
#include <stdint.h>

#include "backward.h"
#include "context.h"
#include "status.h"
#include "tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Largest spatial rank of pooling. */
#define NN_POOL_MAX_SPATIAL 3

/** What a pooling window computes. */
typedef enum nn_pool_mode {
    NN_POOL_MAX = 0,              /**< the largest input in the window; padding never wins */
    NN_POOL_MEAN_INCLUDE_PAD = 1, /**< sum of the inputs / window volume (padding counts as 0) */
    NN_POOL_MEAN_EXCLUDE_PAD = 2  /**< sum of the inputs / number of real inputs in the window */
} nn_pool_mode;

/**
 * Pooling parameters. Index i of each array is spatial dim i (H before W); entries at and above
 * spatial_rank are ignored. Fill every field: zero-initialise, then set what you need.
 */
typedef struct nn_pool_params {
    int spatial_rank; /**< 1, 2 or 3; x.rank must be spatial_rank + 2 */
    nn_pool_mode mode;
    int64_t window[NN_POOL_MAX_SPATIAL]; /**< >= 1 */
    int64_t stride[NN_POOL_MAX_SPATIAL]; /**< >= 1 */
    int64_t pad_lo[NN_POOL_MAX_SPATIAL]; /**< padding before the first input, 0 <= pad < window */
    int64_t pad_hi[NN_POOL_MAX_SPATIAL]; /**< padding after the last input, 0 <= pad < window */
    uint64_t reserved[4]; /**< zero (NN_E_INVALID_ARG otherwise); room for the ABI to grow */
} nn_pool_params;

/** Opaque: what backward needs from forward. Created by nn_pool_forward() in training mode. */
typedef struct nn_pool_pullback nn_pool_pullback;

/**
 * The dims of y for an input of dims x_dims.
 *
 * @param params pooling parameters (checked as by nn_pool_forward()).
 * @param x_rank rank of x; must be params->spatial_rank + 2.
 * @param x_dims x_rank dims of x, each >= 1.
 * @param y_dims out: x_rank dims of y (N and C copied, spatial sizes with floor rounding).
 * @return NN_OK; NN_E_INVALID_ARG for NULL pointers, a spatial rank outside 1..3, an unknown
 *         mode, a window or stride < 1, padding < 0 or >= window, a non-zero reserved field, or
 *         a dim < 1; NN_E_SHAPE for
 *         x_rank != spatial_rank + 2 or a window larger than the padded input; NN_E_OVERFLOW if
 *         a dim plus its padding overflows. Each message names the field, the expected and the
 *         actual value.
 */
NN_API nn_status nn_pool_output_shape(const nn_pool_params *params, int x_rank,
                                      const int64_t *x_dims, int64_t *y_dims);

/**
 * Pool x into y; in training mode also return the pullback that nn_pool_backward() consumes.
 *
 * @param ctx          the context; its backend runs the op, on its stream (cuDNN work is queued,
 *                     not waited for).
 * @param params       pooling parameters, read and copied (not kept).
 * @param x            input, rank params->spatial_rank + 2.
 * @param y            output, dims from nn_pool_output_shape(), same dtype and memory space as x;
 *                     overwritten. Must not overlap x or itself (see the top).
 * @param pullback_out NULL for inference; otherwise out: a new pullback on success, NULL on
 *                     failure. The pullback keeps *views* of x and y (not copies): the caller
 *                     must keep the storage of both alive and unchanged until nn_pool_backward()
 *                     or nn_pool_pullback_free() (cuDNN's max-pooling backward finds each window's
 *                     maximum by comparing x with y; frameworks keep both for autograd anyway).
 * @return NN_OK; NN_E_INVALID_ARG (NULL ctx, params, x or y, bad parameters as in
 *         nn_pool_output_shape(), a non-zero params.reserved, malformed or misaligned tensors, y
 *         overlapping x or itself); NN_E_SHAPE (x's rank or size does not fit params, as in
 *         nn_pool_output_shape(), or y's dims are not the output shape); NN_E_OVERFLOW (tensor
 *         extents; on the reference backend a window volume or spatial size beyond int64);
 *         NN_E_DTYPE (x and y differ); NN_E_MEMSPACE (a tensor is
 *         not where the context computes); NN_E_UNSUPPORTED (cuDNN backend: pad_lo != pad_hi, a
 *         size beyond int, a zero stride, more than INT_MAX elements, or a configuration cuDNN
 *         reports as not supported); NN_E_OOM_HOST; NN_E_OOM_DEVICE; NN_E_CUDA; NN_E_CUDNN;
 *         NN_E_GRAPH (inside a graph capture: a shape not seen before it, graph.h).
 * Ownership: a returned pullback is the caller's until passed to nn_pool_backward() (which
 * consumes it) or nn_pool_pullback_free(). On failure nothing is allocated and y's contents are
 * unspecified.
 */
NN_API nn_status nn_pool_forward(nn_ctx *ctx, const nn_pool_params *params, const nn_tensor *x,
                                 nn_tensor *y, nn_pool_pullback **pullback_out);

/**
 * The gradient of pooling: dx from dy, using what forward kept.
 *
 * @param ctx      the context the pullback was created with.
 * @param pullback in/out: *pullback from nn_pool_forward(). On success it is consumed (freed) and
 *                 *pullback is set to NULL; on failure it stays with the caller unchanged (free
 *                 it, or retry with correct arguments).
 * @param dy       gradient of y: y's dims and x's dtype, in the context's memory space.
 * @param dx       out: gradient of x, x's dims and dtype; overwritten (nn_pool_backward_ex()
 *                 accumulates). Must not overlap dy, itself, or the forward's x and y (which
 *                 backward reads).
 * @return NN_OK; NN_E_INVALID_ARG (NULL arguments, malformed or misaligned tensors, the
 *         overlaps above); NN_E_PULLBACK (*pullback is NULL, i.e. already consumed, not a live
 *         pooling pullback, or created with another context); NN_E_SHAPE (dy or dx has the wrong
 *         dims); NN_E_OVERFLOW; NN_E_DTYPE; NN_E_MEMSPACE; NN_E_UNSUPPORTED (cuDNN backend: as
 *         nn_pool_forward()); NN_E_OOM_HOST; NN_E_CUDA; NN_E_CUDNN;
 *         NN_E_GRAPH (a pullback from the other side of a graph capture's boundary, graph.h).
 * A second copy of a consumed pullback pointer is a dangling pointer; keep only the one that
 * nn_pool_backward() sets to NULL. The same as nn_pool_backward_ex() with opts NULL.
 */
NN_API nn_status nn_pool_backward(nn_ctx *ctx, nn_pool_pullback **pullback, const nn_tensor *dy,
                                  nn_tensor *dx);

/**
 * nn_pool_backward() with options chosen at backward time (include/nnprim/backward.h).
 *
 * @param ctx      the context the pullback was created with.
 * @param pullback in/out: as nn_pool_backward(), except that with opts->keep = 1 it stays live
 *                 and unchanged on success, for another backward call.
 * @param opts     NULL: as nn_pool_backward() (dx overwritten, the pullback consumed).
 *                 opts->accumulate: 0 or NN_ACCUMULATE_DX (dx += the gradient: cuDNN's beta = 1);
 *                 opts->keep: 0 or 1.
 * @param dy, dx   as nn_pool_backward().
 * @return the statuses of nn_pool_backward(); NN_E_INVALID_ARG (a bit outside NN_ACCUMULATE_*,
 *         keep not 0 or 1, a nonzero opts->reserved); NN_E_UNSUPPORTED (NN_ACCUMULATE_DW or
 *         NN_ACCUMULATE_DB: pooling has no weights). Options are checked after the pullback.
 * Ownership: as nn_pool_backward(); a kept pullback stays the caller's (nn_pool_pullback_free()),
 * and the forward's x and y must stay alive and unchanged while it is kept.
 */
NN_API nn_status nn_pool_backward_ex(nn_ctx *ctx, nn_pool_pullback **pullback,
                                     const nn_backward_options *opts, const nn_tensor *dy,
                                     nn_tensor *dx);

/**
 * The gradient of pooling without a pullback (NNlib's ∇maxpool(dy, y, x) / ∇meanpool): dx from
 * the forward's input x, its output y (max pooling finds each window's maximum by comparing x
 * with y on cuDNN; the reference backend recomputes it from x) and dy. The result equals
 * nn_pool_backward() of a pullback made by nn_pool_forward(ctx, params, x, y, &pb).
 *
 * @param ctx        the context; its backend runs the op on its stream.
 * @param params     the forward's pooling parameters, checked as by nn_pool_forward().
 * @param x          the forward's input.
 * @param y          the forward's output: the dims of nn_pool_output_shape() for x, x's dtype.
 *                   Read by max pooling on cuDNN only; pass the y that nn_pool_forward() wrote
 *                   for x, or the gradients are wrong without an error.
 * @param dy         gradient of y: y's dims, x's dtype.
 * @param dx         out: gradient of x, x's dims and dtype. Must not overlap dy, x, y or itself.
 * @param accumulate 0 (dx = the gradient) or NN_ACCUMULATE_DX (dx += the gradient).
 * @return NN_OK; NN_E_INVALID_ARG (NULL ctx, params or a tensor; bad parameters as in
 *         nn_pool_output_shape(); a bit of accumulate outside NN_ACCUMULATE_*; malformed or
 *         misaligned tensors; the overlaps above); NN_E_UNSUPPORTED (accumulate with
 *         NN_ACCUMULATE_DW or NN_ACCUMULATE_DB; cuDNN backend: as nn_pool_forward());
 *         NN_E_SHAPE (x does not fit params; y, dy or dx with the wrong dims); NN_E_OVERFLOW;
 *         NN_E_DTYPE; NN_E_MEMSPACE; NN_E_OOM_HOST; NN_E_OOM_DEVICE; NN_E_CUDA; NN_E_CUDNN.
 * Ownership: nothing is kept after the call.
 */
NN_API nn_status nn_pool_backward_stateless(nn_ctx *ctx, const nn_pool_params *params,
                                            const nn_tensor *x, const nn_tensor *y,
                                            const nn_tensor *dy, nn_tensor *dx,
                                            unsigned accumulate);

/** A pass of pooling, for nn_pool_workspace_size(). */
typedef enum nn_pool_pass {
    NN_POOL_PASS_FORWARD = 0, /**< nn_pool_forward() */
    NN_POOL_PASS_BACKWARD = 1 /**< nn_pool_backward(), _ex() and _stateless() */
} nn_pool_pass;

/**
 * The device-pool bytes one pass of pooling would hold at its peak, so that a framework can
 * pre-size its scratch (or its allocator, nn_mem_set_allocator()); the pooling counterpart of
 * nn_conv_workspace_size(). cuDNN's legacy pooling calls take no workspace, so this is only the
 * contiguous copies nnprim makes for layouts cuDNN's backward does not take (docs/POOL.md, "The
 * pullback"): a non-contiguous dy, a non-contiguous y (max pooling), and, when dx's strides differ
 * from x's, a non-contiguous x and a non-contiguous dx. The forward pass and the reference
 * backend take none (0); neither does a pullback (views only). Not included: the caller's
 * tensors and the pool's rounding of a request to its size classes (docs/MEMORY.md).
 *
 * @param ctx    the context that will run the call (its backend decides).
 * @param params the call's pooling parameters, checked as by nn_pool_forward().
 * @param x      the forward's input.
 * @param y      the forward's output (its dims checked as by nn_pool_forward(); not written).
 * @param dy     NN_POOL_PASS_BACKWARD: the gradient of y, as the backward call will get it (its
 *               strides decide). Ignored, and may be NULL, for NN_POOL_PASS_FORWARD.
 * @param dx     NN_POOL_PASS_BACKWARD: the gradient of x, as the backward call will get it.
 *               Ignored, and may be NULL, for NN_POOL_PASS_FORWARD.
 * @param pass   which pass.
 * @param bytes  out: the bytes; untouched on failure.
 * @return NN_OK; NN_E_INVALID_ARG (NULL ctx, params, x, y or bytes, dy or dx NULL for the
 *         backward pass, an unknown pass, and the parameter and tensor checks of the call:
 *         nn_pool_forward()'s for x and y, nn_pool_backward_stateless()'s for dy and dx);
 *         NN_E_SHAPE; NN_E_OVERFLOW; NN_E_DTYPE; NN_E_MEMSPACE; NN_E_UNSUPPORTED (cuDNN
 *         backend: as the call). Nothing is allocated and nothing runs on the stream.
 */
NN_API nn_status nn_pool_workspace_size(nn_ctx *ctx, const nn_pool_params *params,
                                        const nn_tensor *x, const nn_tensor *y, const nn_tensor *dy,
                                        const nn_tensor *dx, nn_pool_pass pass, size_t *bytes);

/**
 * Drop a pullback without running backward, releasing what it holds (device memory goes back to
 * the pool of the context it was created with, ordered on that context's stream).
 *
 * @param pullback in/out: NULL or *pullback NULL is a no-op; set to NULL. The context the
 *                 pullback was created with must still exist.
 * @return NN_OK; NN_E_PULLBACK if *pullback is not a live pullback (already consumed or freed).
 */
NN_API nn_status nn_pool_pullback_free(nn_pool_pullback **pullback);

#ifdef __cplusplus
}
#endif

#endif /* NNPRIM_POOL_H */

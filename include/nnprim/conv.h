/*
 * nnprim: convolution, forward and backward, in the style of NNlib's conv / ∇conv_data /
 * ∇conv_filter.
 *
 * Shapes (spatial rank S = 1, 2 or 3; tensor rank S + 2):
 *   x   input            N x C x [D x] [H x] W        (NCW, NCHW, NCDHW)
 *   w   filter           K x C/groups x [T x] [R x] S (KCS, KCRS, KCTRS)
 *   b   bias             K  (rank 1) or 1 x K x 1 ... x 1 (rank S + 2); optional
 *   y   output           N x K x [D' x] [H' x] W'     (see nn_conv_output_shape())
 *   dx, dw, db, dy       the shapes of x, w, b and y
 * Each output spatial size is floor((in + pad_lo + pad_hi - dilation * (filter - 1) - 1) / stride)
 * + 1 and must be >= 1.
 *
 * Math: y = act(x ⋆ w + b) where ⋆ is cross-correlation (the deep-learning default) or true
 * convolution (the filter flipped in every spatial dimension), with zero padding. Within a group
 * g, output channel k = g * K/groups + j reads input channels g * C/groups ... (g+1) * C/groups -
 * 1; groups == C == K/m is a depthwise convolution.
 *
 * Layout: x, w, y, dx, dw and dy must each be fully packed, in one of two layouts (a dim of size
 * 1 may have any stride):
 *   - NCHW order: row-major (nn_tensor_is_contiguous()): NCW / NCHW / NCDHW, KCS / KCRS / KCTRS;
 *   - channels-last: the channel stride 1, then the spatial dims from the innermost, the batch
 *     (or K) slowest: NWC / NHWC / NDHWC, KSC / KRSC / KTRSC, as PyTorch's channels_last and
 *     channels_last_3d tensors come through DLPack (strides N = H*W*C, H = W*C, W = C, C = 1).
 *     cuDNN's tensor-core engines prefer it for f16, bf16 and TF32.
 * Each tensor may take either layout; the results do not depend on it (the reference backend
 * gives bitwise the same values). On cuDNN a call whose tensors mix the layouts runs where an
 * engine takes it and is otherwise refused with NN_E_UNSUPPORTED, the message giving the problem
 * with its layout (" nhwc" when every tensor is channels-last, " nhwc=x+dy" naming the ones that
 * are). b and db are always K packed elements. Other strides are refused with NN_E_UNSUPPORTED
 * naming the tensor, its strides and the layouts accepted.
 *
 * dtypes: all tensors of one call share one dtype. f32 (strict or TF32 by the context's math
 * mode), f16 and bf16 (computed with f32 accumulation, rounded once at the end) on both backends;
 * f64 on the reference backend (the cuDNN backend refuses it with NN_E_UNSUPPORTED where cuDNN
 * has no engine). The reference backend accumulates in double in every case.
 *
 * The reference backend runs on host tensors, the cuDNN backend on device tensors of the
 * context's device; the backend is the context's (nn_ctx_backend()).
 *
 * Memory (docs/INPUT.md): an output must not overlap any tensor the call reads or writes (for
 * nn_conv_backward also the forward's x and w, which the pullback reads), and no two of its
 * elements may share memory; inputs may overlap each other. Data pointers must be aligned to the
 * element size. Both are refused with NN_E_INVALID_ARG naming the tensors. The cuDNN backend
 * takes every dim, stride, dilation and padding as int: larger values are refused with
 * NN_E_UNSUPPORTED before cuDNN sees them (the reference backend computes them).
 *
 * Text form of a problem (the verbose lines of NNPRIM_VERBOSE=1, `nnprim check` and
 * `nnprim bench conv` all use it; docs/CONV.md has the grammar):
 *   n2c4h9w9k6r3s3 g2 stride2x1 dil1x1 padlo1x0 padhi2x1 conv relu bias f32
 * (channels-last tensors add " nhwc" or " nhwc=x+dy", see Layout above).
 */
#ifndef NNPRIM_CONV_H
#define NNPRIM_CONV_H

#include <stddef.h>
#include <stdint.h>

#include "activation.h"
#include "backward.h"
#include "context.h"
#include "status.h"
#include "tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/** The largest spatial rank (3: D, H, W). */
#define NN_CONV_MAX_SPATIAL 3

/** Whether the filter is flipped. */
typedef enum nn_conv_mode {
    NN_CONV_CROSS_CORRELATION = 0, /**< y[o] = sum x[o * stride + i * dilation - pad] w[i] */
    NN_CONV_CONVOLUTION = 1        /**< the same with w flipped in every spatial dimension */
} nn_conv_mode;

/**
 * Convolution parameters. Fill with nn_conv_params_default(), then change what you need.
 * Only the first spatial_rank entries of the per-dimension arrays are read, in D, H, W order
 * (for spatial_rank 2: [0] = H, [1] = W).
 */
typedef struct nn_conv_params {
    int spatial_rank;                      /**< 1, 2 or 3 */
    int64_t stride[NN_CONV_MAX_SPATIAL];   /**< >= 1 */
    int64_t dilation[NN_CONV_MAX_SPATIAL]; /**< >= 1 (1 = dense filter) */
    int64_t pad_lo[NN_CONV_MAX_SPATIAL];   /**< zero padding before the first element, >= 0 */
    int64_t pad_hi[NN_CONV_MAX_SPATIAL];   /**< zero padding after the last element, >= 0 */
    int64_t groups;                        /**< >= 1; divides C and K */
    nn_conv_mode mode;
    nn_activation activation; /**< applied by nn_conv_forward() after the bias */
    uint64_t reserved[4];     /**< zero (NN_E_INVALID_ARG otherwise, naming the index) */
} nn_conv_params;

/**
 * Default parameters: stride 1, dilation 1, no padding, one group, cross-correlation, identity
 * activation.
 *
 * @param p            out: filled completely.
 * @param spatial_rank 1, 2 or 3.
 * @return NN_OK; NN_E_INVALID_ARG if p is NULL or spatial_rank is out of range.
 */
NN_API nn_status nn_conv_params_default(nn_conv_params *p, int spatial_rank);

/**
 * The dims of y for given x and w dims (all of rank p->spatial_rank + 2).
 *
 * @param p      parameters.
 * @param rank   p->spatial_rank + 2.
 * @param x_dims rank dims of x.
 * @param w_dims rank dims of w.
 * @param y_dims out: rank dims of y; untouched on failure.
 * @return NN_OK; NN_E_INVALID_ARG (NULL pointer, a parameter out of range or a non-zero reserved
 *         field: the message names it);
 *         NN_E_SHAPE (rank mismatch, channels not matching w.dims[1] * groups, K not divisible by
 *         groups, an output size < 1); NN_E_OVERFLOW (padded or dilated sizes overflow int64).
 */
NN_API nn_status nn_conv_output_shape(const nn_conv_params *p, int rank, const int64_t *x_dims,
                                      const int64_t *w_dims, int64_t *y_dims);

/** State kept from a training-mode forward call for the matching backward call. Opaque. */
typedef struct nn_conv_pullback nn_conv_pullback;

/**
 * Forward convolution: y = act(x ⋆ w + b).
 *
 * @param ctx          the context; its backend runs the op.
 * @param p            parameters.
 * @param x            input.
 * @param w            filter.
 * @param b            bias, or NULL for none.
 * @param y            output, overwritten; must not overlap x, w or b, nor itself (see the top).
 * @param pullback_out NULL for inference; otherwise out: a new pullback for nn_conv_backward()
 *                     (set to NULL on failure).
 * @return NN_OK; NN_E_INVALID_ARG (NULL ctx/p/x/w/y, a parameter out of range, a non-zero
 *         p.reserved, a malformed or misaligned tensor, y overlapping an input or itself);
 *         NN_E_SHAPE (dims that do not agree: the message names the tensor and dim, the expected
 *         and actual value); NN_E_OVERFLOW (padded or dilated sizes, tensor extents);
 *         NN_E_DTYPE (dtypes differ, or f64 where the backend cannot); NN_E_MEMSPACE (a tensor
 *         not where the context computes);
 *         NN_E_UNSUPPORTED (a layout other than NCHW packed or channels-last packed, a size
 *         beyond int on cuDNN, or a configuration the backend cannot run, such as mixed layouts
 *         no cuDNN engine takes);
 *         NN_E_NOT_BUILT; NN_E_OOM_HOST; NN_E_OOM_DEVICE; NN_E_CUDA; NN_E_CUDNN;
 *         NN_E_GRAPH (inside a graph capture: a shape not seen before it, graph.h).
 * Ownership: the pullback belongs to the caller until nn_conv_backward() consumes it or
 * nn_conv_pullback_free() drops it. It holds copies of the *views* of x and w (and of y when
 * p->activation is RELU: the gradient is masked where y == 0), not their data: the caller keeps
 * that storage alive and unchanged until the backward call.
 */
NN_API nn_status nn_conv_forward(nn_ctx *ctx, const nn_conv_params *p, const nn_tensor *x,
                                 const nn_tensor *w, const nn_tensor *b, nn_tensor *y,
                                 nn_conv_pullback **pullback_out);

/**
 * Backward through a training-mode forward call: any of the gradients.
 *
 * With a fused relu, the incoming gradient is first masked with y > 0 (y from the forward call).
 * Every gradient asked for is overwritten (nn_conv_backward_ex() accumulates). The same as
 * nn_conv_backward_ex() with opts NULL.
 *
 * @param ctx      the context the forward call used.
 * @param pullback in/out: the pullback from nn_conv_forward(); set to NULL on success.
 * @param dy       gradient with respect to y.
 * @param dx       out: gradient with respect to x, or NULL to skip. dx, dw and db must not
 *                 overlap each other, dy, or the forward's x and w (which the pullback reads:
 *                 dx on x's storage would change x before dw reads it).
 * @param dw       out: gradient with respect to w, or NULL to skip.
 * @param db       out: gradient with respect to b, or NULL to skip (the forward call needs no
 *                 bias for db to be computed; its dims are K or 1 x K x 1 ... x 1).
 * @return NN_OK; NN_E_PULLBACK (pullback or *pullback NULL, already consumed, not a pullback, a
 *         pullback of another op family, or from a call with another context); NN_E_INVALID_ARG
 *         for the overlaps above; the statuses of nn_conv_forward();
 *         NN_E_GRAPH (a pullback from the other side of a graph capture's boundary, graph.h).
 * Ownership: on success the pullback is freed and *pullback set to NULL; on failure it stays
 * with the caller (who may retry or free it). Outputs may be partly written on a failure after
 * validation (for example out of device memory half way).
 */
NN_API nn_status nn_conv_backward(nn_ctx *ctx, nn_conv_pullback **pullback, const nn_tensor *dy,
                                  nn_tensor *dx, nn_tensor *dw, nn_tensor *db);

/**
 * nn_conv_backward() with the options chosen at backward time (include/nnprim/backward.h).
 *
 * @param ctx      the context the forward call used.
 * @param pullback in/out: the pullback from nn_conv_forward(); set to NULL on success unless
 *                 opts->keep is 1 (then it stays live and unchanged, for another backward call).
 * @param opts     NULL: as nn_conv_backward() (overwrite; the pullback is consumed).
 *                 Otherwise opts->accumulate (NN_ACCUMULATE_DX, _DW, _DB) says which of dx, dw
 *                 and db are added to, and opts->keep whether the pullback survives.
 * @param dy, dx, dw, db  as nn_conv_backward().
 * @return the statuses of nn_conv_backward(); NN_E_INVALID_ARG for bad options (a bit outside
 *         NN_ACCUMULATE_*, keep not 0 or 1, a nonzero opts->reserved; the message names the
 *         field). Options are checked after the pullback.
 * Ownership: as nn_conv_backward(); a kept pullback stays the caller's (free it with
 * nn_conv_pullback_free()), and so do the forward's x and w (and y with relu), which must stay
 * alive and unchanged while it is kept.
 */
NN_API nn_status nn_conv_backward_ex(nn_ctx *ctx, nn_conv_pullback **pullback,
                                     const nn_backward_options *opts, const nn_tensor *dy,
                                     nn_tensor *dx, nn_tensor *dw, nn_tensor *db);

/**
 * Drop a pullback without using it.
 *
 * @param pullback in/out: NULL or *pullback NULL is a no-op; set to NULL.
 * @return NN_OK; NN_E_PULLBACK if *pullback is not a live pullback (already consumed or freed).
 */
NN_API nn_status nn_conv_pullback_free(nn_conv_pullback **pullback);

/**
 * Stand-alone data gradient: dx = dy ⋆ᵀ w (dx += ... with NN_ACCUMULATE_DX).
 * p->activation must be IDENTITY: pass dy already masked by the activation's derivative.
 *
 * @param ctx the context.
 * @param p   the forward call's parameters.
 * @param dy  gradient with respect to y.
 * @param w   the filter.
 * @param dx  out: gradient with respect to x; its dims define x's. Must not overlap dy or w.
 * @param accumulate nn_accumulate bits (include/nnprim/backward.h): NN_ACCUMULATE_DX adds to dx;
 *            0 overwrites it. NN_ACCUMULATE_DW and _DB are accepted and mean nothing here.
 * @return as nn_conv_forward(); NN_E_INVALID_ARG also for an activation other than IDENTITY and
 *         for a bit of accumulate outside NN_ACCUMULATE_* (the message names accumulate).
 */
NN_API nn_status nn_conv_backward_data(nn_ctx *ctx, const nn_conv_params *p, const nn_tensor *dy,
                                       const nn_tensor *w, nn_tensor *dx, unsigned accumulate);

/**
 * Stand-alone filter gradient: dw = x ⋆ᵀ dy (dw += ... with NN_ACCUMULATE_DW).
 * p->activation must be IDENTITY (see nn_conv_backward_data()).
 *
 * @param ctx the context.
 * @param p   the forward call's parameters.
 * @param x   the forward call's input.
 * @param dy  gradient with respect to y.
 * @param dw  out: gradient with respect to w; its dims define w's. Must not overlap x or dy.
 * @param accumulate nn_accumulate bits: NN_ACCUMULATE_DW adds to dw; 0 overwrites it.
 *            NN_ACCUMULATE_DX and _DB are accepted and mean nothing here.
 * @return as nn_conv_backward_data().
 */
NN_API nn_status nn_conv_backward_filter(nn_ctx *ctx, const nn_conv_params *p, const nn_tensor *x,
                                         const nn_tensor *dy, nn_tensor *dw, unsigned accumulate);

/**
 * Stand-alone bias gradient: db[k] = sum of dy over n and every spatial position (db += ... with
 * NN_ACCUMULATE_DB). p->activation must be IDENTITY.
 *
 * @param ctx the context.
 * @param p   the forward call's parameters (spatial_rank is read).
 * @param dy  gradient with respect to y.
 * @param db  out: K or 1 x K x 1 ... x 1. Must not overlap dy.
 * @param accumulate nn_accumulate bits: NN_ACCUMULATE_DB adds to db; 0 overwrites it.
 *            NN_ACCUMULATE_DX and _DW are accepted and mean nothing here.
 * @return as nn_conv_backward_data().
 */
NN_API nn_status nn_conv_backward_bias(nn_ctx *ctx, const nn_conv_params *p, const nn_tensor *dy,
                                       nn_tensor *db, unsigned accumulate);

/** A pass of a convolution, for nn_conv_workspace_size(). */
typedef enum nn_conv_pass {
    NN_CONV_PASS_FORWARD = 0,         /**< nn_conv_forward() */
    NN_CONV_PASS_BACKWARD_DATA = 1,   /**< dx: nn_conv_backward(_ex) or nn_conv_backward_data() */
    NN_CONV_PASS_BACKWARD_FILTER = 2, /**< dw: nn_conv_backward(_ex) or nn_conv_backward_filter() */
    NN_CONV_PASS_BACKWARD_BIAS = 3    /**< db: nn_conv_backward(_ex) or nn_conv_backward_bias() */
} nn_conv_pass;

/**
 * The device-pool bytes one pass of a convolution would hold at its peak, so that a framework
 * can pre-size its scratch (or its allocator, nn_mem_set_allocator()): the cuDNN plan's
 * workspace, plus the temporaries nnprim makes for the pass (the zero-padded copies of its cuDNN
 * workarounds and, for a backward pass with p.activation RELU, which only nn_conv_backward(_ex)
 * runs, the masked copy of dy that call holds throughout). Not included: the caller's tensors, a
 * pullback (it keeps views only, no device memory), bf16's tensor of ones for db (made once per
 * shape and kept in the context's plan cache: this query makes it), and the pool's rounding of a
 * request to its size classes (docs/MEMORY.md). 0 on the reference backend, which takes host
 * memory only.
 *
 * On cuDNN the query finds the plan the call would use, as the call would: from the context's
 * plan cache (then it takes no device memory), else from a plan-file record, heuristics or
 * autotune, and caches it, so the call that follows is a cache hit. The pass's tensors it is not
 * given (y, dy, dx, dw) are taken in the layout the call describes them in beside x and w:
 * channels-last when x or w is channels-last (and not also NCHW packed), else NCHW. While it
 * builds a plan it takes pool scratch for them (zeroed, except y, which is only written), of
 * their packed sizes; autotune runs its candidates on them and on x and w (read only). The answer
 * holds for tensors in that layout with the pool's alignment (nn_tensor_empty()); other layouts
 * or pointer alignments may select another plan.
 *
 * @param ctx   the context that will run the call (its backend, settings and plan cache).
 * @param p     the call's parameters.
 * @param x     the input of the forward call (read by autotune on a plan miss).
 * @param w     the filter (read by autotune on a plan miss).
 * @param b     the forward's bias, or NULL for none (the forward may fuse it); backward passes
 *              ignore whether it is given.
 * @param pass  which pass.
 * @param accumulate the call's nn_accumulate bits (nn_conv_backward_ex()'s opts->accumulate or
 *              the stand-alone call's accumulate), which decide the blend of a backward pass
 *              (NN_ACCUMULATE_DX for the data pass...); 0 for nn_conv_backward() and the forward.
 * @param bytes out: the bytes; untouched on failure.
 * @return NN_OK; NN_E_INVALID_ARG (NULL ctx, p, x, w or bytes, an unknown pass, a bit of
 *         accumulate outside NN_ACCUMULATE_*, and the parameter and tensor checks of
 *         nn_conv_forward()); NN_E_SHAPE; NN_E_OVERFLOW;
 *         NN_E_DTYPE; NN_E_MEMSPACE; NN_E_UNSUPPORTED (as the call: no engine for the pass);
 *         NN_E_OOM_HOST; NN_E_OOM_DEVICE (the scratch of a plan search, bf16's ones for db);
 *         NN_E_CUDA; NN_E_CUDNN.
 */
NN_API nn_status nn_conv_workspace_size(nn_ctx *ctx, const nn_conv_params *p, const nn_tensor *x,
                                        const nn_tensor *w, const nn_tensor *b, nn_conv_pass pass,
                                        unsigned accumulate, size_t *bytes);

#ifdef __cplusplus
}
#endif

#endif /* NNPRIM_CONV_H */

/*
 * nnprim: softmax and log-softmax over the channel dimension, forward and backward, and the fused
 * softmax cross-entropy loss with integer class targets.
 *
 * Shapes: x (logits) is N x C [x S1 ...] (rank 2 to NN_MAX_RANK); the softmax runs over C for
 * each n and each position of the trailing dims. y, dy and dx have x's dims. The cross-entropy's
 * targets and per-sample loss have x's dims without C: N [x S1 ...] (N elements for rank 2).
 *
 * Math:  softmax      y[n,c,s] = exp(x[n,c,s] - max_c x) / sum_c exp(x[n,c,s] - max_c x)
 *        log-softmax  y[n,c,s] = x[n,c,s] - max_c x - log sum_c exp(x[n,c,s] - max_c x)
 *        backward     dx = y * (dy - sum_c dy * y)   (softmax)
 *                     dx = dy - exp(y) * sum_c dy    (log-softmax)
 *        cross-entropy  loss[n,s] = -log-softmax(x)[n, t[n,s], s];
 *                       dx[n,c,s] = (softmax(x)[n,c,s] - (c == t[n,s])) * dloss[n,s]
 * Both backends subtract the maximum first (cuDNN's CUDNN_SOFTMAX_ACCURATE and CUDNN_SOFTMAX_LOG).
 *
 * Layout: every tensor fully packed row-major (nn_tensor_is_contiguous()). dtypes: one per call;
 * f32, f16 and bf16 on both backends (computed in f32 on cuDNN, in double on the reference), f64
 * on the reference (the cuDNN backend passes f64 to cuDNN, which may refuse it: NN_E_CUDNN).
 *
 * Text form of a call (verbose lines and `nnprim check softmax`; docs/SOFTMAX.md):
 * "n64c10 softmax f32", "n2c5h3w4 log accdx f16", "n64c10000 xent i64 f32".
 */
#ifndef NNPRIM_SOFTMAX_H
#define NNPRIM_SOFTMAX_H

#include <stddef.h>
#include <stdint.h>

#include "backward.h"
#include "context.h"
#include "status.h"
#include "tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Which function of the logits. */
typedef enum nn_softmax_mode {
    NN_SOFTMAX_MODE_SOFTMAX = 0, /**< probabilities */
    NN_SOFTMAX_MODE_LOG = 1      /**< log-probabilities */
} nn_softmax_mode;

/** Softmax parameters. Fill with nn_softmax_params_default(), then change what you need. */
typedef struct nn_softmax_params {
    nn_softmax_mode mode;
    uint64_t reserved[4]; /**< zero */
} nn_softmax_params;

/** State kept from a training-mode forward call. Opaque. */
typedef struct nn_softmax_pullback nn_softmax_pullback;

/**
 * Default parameters: softmax (not log), reserved zero.
 *
 * @param p out: filled completely.
 * @return NN_OK; NN_E_INVALID_ARG if p is NULL.
 */
NN_API nn_status nn_softmax_params_default(nn_softmax_params *p);

/**
 * Forward: y = softmax(x) or log-softmax(x) over dim 1.
 *
 * @param ctx          the context; its backend runs the op on its stream.
 * @param p            parameters, read and copied.
 * @param x            logits, N x C [x ...].
 * @param y            output, x's dims and dtype, overwritten; must not overlap x.
 * @param pullback_out NULL for inference; otherwise out: a pullback for nn_softmax_backward()
 *                     (NULL on failure). It keeps the *view* of y (both gradients are functions of
 *                     y): keep y's storage alive and unchanged until backward.
 * @return NN_OK; NN_E_INVALID_ARG (NULL ctx, p, x or y; an unknown mode; a nonzero
 *         reserved field; malformed or overlapping tensors); NN_E_SHAPE (rank < 2, y's dims);
 *         NN_E_DTYPE; NN_E_MEMSPACE; NN_E_UNSUPPORTED (strided tensors; cuDNN: N, C or the
 *         trailing size beyond int); NN_E_OOM_HOST; NN_E_CUDA; NN_E_CUDNN;
 *         NN_E_GRAPH (inside a graph capture: a shape not seen before it, graph.h).
 */
NN_API nn_status nn_softmax_forward(nn_ctx *ctx, const nn_softmax_params *p, const nn_tensor *x,
                                    nn_tensor *y, nn_softmax_pullback **pullback_out);

/**
 * Backward: dx from dy and the saved y.
 *
 * @param ctx      the context of the forward call.
 * @param pullback in/out: consumed and set to NULL on success; unchanged on failure.
 * @param dy       gradient of y (y's dims and dtype).
 * @param dx       out: gradient of x, overwritten (nn_softmax_backward_ex() accumulates); must
 *                 not overlap dy or the saved y.
 * @return NN_OK; NN_E_PULLBACK (NULL, consumed, freed, another family's or context's);
 *         the statuses of nn_softmax_forward();
 *         NN_E_GRAPH (a pullback from the other side of a graph capture's boundary, graph.h).
 * The same as nn_softmax_backward_ex() with opts NULL.
 */
NN_API nn_status nn_softmax_backward(nn_ctx *ctx, nn_softmax_pullback **pullback,
                                     const nn_tensor *dy, nn_tensor *dx);

/**
 * nn_softmax_backward() with options chosen at backward time (include/nnprim/backward.h).
 *
 * @param ctx      the context of the forward call.
 * @param pullback in/out: as nn_softmax_backward(), except that with opts->keep = 1 it stays
 *                 live and unchanged on success, for another backward call.
 * @param opts     NULL: as nn_softmax_backward(). Otherwise opts->accumulate (0 or
 *                 NN_ACCUMULATE_DX: dx += the gradient), and opts->keep says whether the
 *                 pullback survives.
 * @param dy, dx   as nn_softmax_backward().
 * @return the statuses of nn_softmax_backward(); NN_E_INVALID_ARG (a bit outside
 *         NN_ACCUMULATE_*, keep not 0 or 1, a nonzero opts->reserved); NN_E_UNSUPPORTED
 *         (NN_ACCUMULATE_DW or NN_ACCUMULATE_DB). Options are checked after the pullback.
 * Ownership: a kept pullback stays the caller's (nn_softmax_pullback_free()); y must stay alive
 * and unchanged while it is kept.
 */
NN_API nn_status nn_softmax_backward_ex(nn_ctx *ctx, nn_softmax_pullback **pullback,
                                        const nn_backward_options *opts, const nn_tensor *dy,
                                        nn_tensor *dx);

/**
 * Drop a pullback without using it.
 *
 * @param pullback in/out: NULL or *pullback NULL is a no-op; set to NULL.
 * @return NN_OK; NN_E_PULLBACK if *pullback is not a live softmax pullback.
 */
NN_API nn_status nn_softmax_pullback_free(nn_softmax_pullback **pullback);

/** A pass, for nn_softmax_workspace_size() and nn_softmax_cross_entropy_workspace_size(). */
typedef enum nn_softmax_pass {
    NN_SOFTMAX_PASS_FORWARD = 0, /**< nn_softmax_forward() / nn_softmax_cross_entropy_forward() */
    NN_SOFTMAX_PASS_BACKWARD = 1 /**< the matching backward call (either form) */
} nn_softmax_pass;

/**
 * The device-pool bytes one softmax call would hold at its peak, so that a framework can
 * pre-size its scratch (or its allocator, nn_mem_set_allocator()). Both passes run as single
 * cuDNN calls on the caller's tensors and take no pool memory: 0 on both backends. (Not
 * included: the caller's tensors; a pullback keeps a view only.)
 *
 * @param ctx   the context that will run the call.
 * @param p     the call's parameters (checked as by nn_softmax_forward()).
 * @param x     the forward's logits, N x C [x ...] (its dims; not read).
 * @param pass  NN_SOFTMAX_PASS_FORWARD or NN_SOFTMAX_PASS_BACKWARD.
 * @param bytes out: the bytes; untouched on failure.
 * @return NN_OK; NN_E_INVALID_ARG (NULL ctx, p, x or bytes; an unknown pass; the parameter and
 *         tensor checks of nn_softmax_forward()); NN_E_SHAPE (x.rank < 2); NN_E_DTYPE (an
 *         unknown dtype); NN_E_MEMSPACE; NN_E_OVERFLOW (x's element count or byte extent beyond
 *         int64); NN_E_UNSUPPORTED (a strided x; cuDNN: N, C or the trailing size beyond int, as
 *         the calls).
 */
NN_API nn_status nn_softmax_workspace_size(nn_ctx *ctx, const nn_softmax_params *p,
                                           const nn_tensor *x, nn_softmax_pass pass, size_t *bytes);

/** The integer type of class targets. */
typedef enum nn_index_type {
    NN_INDEX_I32 = 1, /**< int32_t */
    NN_INDEX_I64 = 2  /**< int64_t */
} nn_index_type;

/**
 * Class indices, one per sample (N [x S1 ...], packed row-major, x's dims without C), each in
 * [0, C). On the reference backend data is host memory; on the cuDNN backend host or device
 * memory (read back to the host, see nn_softmax_cross_entropy_forward()).
 */
typedef struct nn_class_targets {
    const void *data;
    nn_index_type type;
    uint64_t reserved[2]; /**< zero */
} nn_class_targets;

/** State kept from a training-mode cross-entropy forward call. Opaque. */
typedef struct nn_softmax_cross_entropy_pullback nn_softmax_cross_entropy_pullback;

/**
 * Per-sample softmax cross-entropy: loss[n,s] = -log softmax(x)[n, t[n,s], s].
 *
 * Every target is checked to lie in [0, C) before anything is written, on both backends. On the
 * cuDNN backend targets in device, managed or pinned host memory are copied to the host for that
 * check, so the call waits for the context's stream once; targets in
 * ordinary (pageable) host memory are read directly, without a wait. A cuDNN context made with
 * settings.xent_targets = NN_TARGETS_ON_DEVICE (context.h) reads targets in its device's memory
 * on the device only, as inside a graph capture: no wait and no host check (a target outside
 * [0, C) gives NaN in that sample's loss and gradient, and the call returns NN_OK). The loss itself
 * is computed on the GPU (cuDNN's log-softmax, then nnprim's kernel picks each target's entry; host
 * targets are uploaded asynchronously from a pinned buffer kept per shape, docs/SOFTMAX.md).
 *
 * Inside a graph capture (graph.h) the targets must be in device memory of the context's device:
 * each launch reads them on the device, with no host check, and a target outside
 * [0, C) there gives NaN in that sample's loss and gradient.
 *
 * @param ctx          the context.
 * @param x            logits, N x C [x ...].
 * @param targets      class indices (nn_class_targets), read during the call only.
 * @param loss         out: N [x ...], x's dtype, overwritten; must not overlap x.
 * @param pullback_out NULL for inference; otherwise out: a pullback for
 *                     nn_softmax_cross_entropy_backward() (NULL on failure). It keeps the view
 *                     of x (the reference recomputes the softmax) or the log-softmax in a pool
 *                     buffer (cuDNN), and a copy of the targets.
 * @return NN_OK; NN_E_INVALID_ARG (NULL arguments, an unknown index type, nonzero reserved
 *         fields, a target outside [0, C): the message gives its position and value, malformed or
 *         overlapping tensors); NN_E_SHAPE; NN_E_DTYPE; NN_E_MEMSPACE; NN_E_UNSUPPORTED;
 *         NN_E_OOM_HOST; NN_E_OOM_DEVICE; NN_E_CUDA; NN_E_CUDNN; NN_E_GRAPH (inside a capture:
 *         host targets, or a shape not seen before it).
 */
NN_API nn_status nn_softmax_cross_entropy_forward(nn_ctx *ctx, const nn_tensor *x,
                                                  const nn_class_targets *targets, nn_tensor *loss,
                                                  nn_softmax_cross_entropy_pullback **pullback_out);

/**
 * Gradient of sum(loss * dloss) with respect to the logits:
 * dx[n,c,s] = (softmax(x)[n,c,s] - (c == t[n,s])) * dloss[n,s] (for a mean loss pass dloss = 1/N).
 *
 * @param ctx      the context of the forward call.
 * @param pullback in/out: consumed and set to NULL on success; unchanged on failure.
 * @param dloss    gradient of the loss, the loss's dims and x's dtype.
 * @param dx       out: gradient of the logits, x's dims, overwritten; must not overlap dloss or
 *                 the saved x.
 * @return NN_OK; NN_E_PULLBACK; the statuses of nn_softmax_cross_entropy_forward();
 *         NN_E_GRAPH (a pullback from the other side of a graph capture's boundary, graph.h).
 * The same as nn_softmax_cross_entropy_backward_ex() with opts NULL.
 */
NN_API nn_status nn_softmax_cross_entropy_backward(nn_ctx *ctx,
                                                   nn_softmax_cross_entropy_pullback **pullback,
                                                   const nn_tensor *dloss, nn_tensor *dx);

/**
 * nn_softmax_cross_entropy_backward() with options chosen at backward time
 * (include/nnprim/backward.h).
 *
 * @param ctx      the context of the forward call.
 * @param pullback in/out: as nn_softmax_cross_entropy_backward(), except that with
 *                 opts->keep = 1 it stays live and unchanged on success (its targets and, on
 *                 cuDNN, its log-softmax buffer are kept), for another backward call.
 * @param opts     NULL: as nn_softmax_cross_entropy_backward() (dx overwritten, consumed).
 *                 opts->accumulate: 0 or NN_ACCUMULATE_DX (dx += the gradient); opts->keep.
 * @param dloss, dx  as nn_softmax_cross_entropy_backward().
 * @return the statuses of nn_softmax_cross_entropy_backward(); NN_E_INVALID_ARG and
 *         NN_E_UNSUPPORTED for options as nn_softmax_backward_ex().
 * Ownership: a kept pullback stays the caller's (nn_softmax_cross_entropy_pullback_free()); x
 * must stay alive and unchanged while it is kept.
 */
NN_API nn_status nn_softmax_cross_entropy_backward_ex(nn_ctx *ctx,
                                                      nn_softmax_cross_entropy_pullback **pullback,
                                                      const nn_backward_options *opts,
                                                      const nn_tensor *dloss, nn_tensor *dx);

/**
 * The device-pool bytes one cross-entropy call would hold at its peak, so that a framework can
 * pre-size its scratch (or its allocator, nn_mem_set_allocator()). On cuDNN, with B = N x C x S
 * elements of x's dtype and T = N x S: the forward holds B + 8 T bytes (the log-softmax and the
 * targets as int64, both of which a training-mode forward keeps in its pullback until backward);
 * the backward holds none (one kernel writes dx). The forward also uses a per-shape scratch kept
 * in the context's cache (8 T bytes of pinned host memory that stages the targets, and cuDNN's
 * descriptor): this query makes it, so the call that follows takes only the figure above. Not
 * included: the caller's tensors and the pool's rounding of a request to its size classes
 * (docs/MEMORY.md). 0 on the reference backend, which takes host memory only.
 *
 * @param ctx   the context that will run the call.
 * @param x     the forward's logits, N x C [x ...] (its dims and dtype; not read).
 * @param pass  NN_SOFTMAX_PASS_FORWARD or NN_SOFTMAX_PASS_BACKWARD.
 * @param bytes out: the bytes; untouched on failure.
 * @return NN_OK; NN_E_INVALID_ARG (NULL ctx, x or bytes; an unknown pass; the tensor checks of
 *         nn_softmax_cross_entropy_forward()); NN_E_SHAPE (x.rank < 2); NN_E_DTYPE (an
 *         unknown dtype); NN_E_MEMSPACE; NN_E_OVERFLOW (x's element count or byte extent beyond
 *         int64); NN_E_UNSUPPORTED (a strided x; cuDNN: N, C or the trailing size beyond
 *         int); NN_E_OOM_HOST (also: no pinned memory for the scratch); NN_E_OOM_DEVICE; NN_E_CUDA;
 *         NN_E_CUDNN (the scratch's descriptors).
 */
NN_API nn_status nn_softmax_cross_entropy_workspace_size(nn_ctx *ctx, const nn_tensor *x,
                                                         nn_softmax_pass pass, size_t *bytes);

/**
 * Drop a cross-entropy pullback without using it (its pool buffer goes back to the pool of the
 * context it was made with, which must still exist).
 *
 * @param pullback in/out: NULL or *pullback NULL is a no-op; set to NULL.
 * @return NN_OK; NN_E_PULLBACK if *pullback is not a live cross-entropy pullback.
 */
NN_API nn_status
nn_softmax_cross_entropy_pullback_free(nn_softmax_cross_entropy_pullback **pullback);

#ifdef __cplusplus
}
#endif

#endif /* NNPRIM_SOFTMAX_H */

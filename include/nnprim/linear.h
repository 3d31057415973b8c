/*
 * nnprim: the linear (fully connected) layer, forward and backward, with pullbacks.
 *
 * Shapes (PyTorch's nn.Linear layout):
 *   x   input    [..., in]   rank 1 to NN_MAX_RANK; the leading dims (M rows in all, 1 for rank 1)
 *                            are batch dims
 *   w   weight   [out, in]
 *   b   bias     [out]; optional
 *   y   output   [..., out]  x's leading dims
 *   dx, dw, db, dy           the shapes of x, w, b and y
 *
 * Math: y = act(x w^T + b), act the identity or relu (fused on the GPU in cuBLASLt's epilogue).
 * Backward: with relu, g = dy masked where y == 0, else g = dy; dx = g w, dw = g^T x,
 * db = the sum of g over the rows.
 *
 * Layout: every tensor fully packed row-major (nn_tensor_is_contiguous()); other strides are
 * refused with NN_E_UNSUPPORTED naming the tensor. dtypes: all tensors of one call share one
 * dtype. The reference backend takes f32, f64, f16 and bf16 and accumulates in double. The GPU
 * backend (cuBLASLt) takes f32 (strict: CUBLAS_COMPUTE_32F; TF32 when the context's math mode is
 * NN_MATH_TF32), f16 and bf16 (f32 accumulation, rounded once), and f64 (CUBLAS_COMPUTE_64F).
 *
 * Graph replay (cuDNN backend; settings.linear_graphs, NNPRIM_LINEAR_GRAPHS=auto|0|1, default
 * NN_GRAPHS_AUTO; ON is the same, OFF never replays): a product called on the same buffers (and
 * the same accumulate choice) as its shape's last call is captured once as a CUDA graph and from
 * then on launched from it while its buffers stay those, which costs the host less than the
 * cuBLASLt call; results are bitwise the eager call's. Other buffers run eagerly. Nothing changes
 * for the caller: buffers may move or be freed at any time.
 *
 * Text form of a call (the verbose line of NNPRIM_VERBOSE=1, `nnprim check linear` and
 * `nnprim bench linear`; docs/LINEAR.md has the grammar): "m64in512out10000 relu bias f32 tf32",
 * or with x's leading dims spelled out: "x35x20in650out10000 bias f32".
 */
#ifndef NNPRIM_LINEAR_H
#define NNPRIM_LINEAR_H

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

/** Linear-layer parameters. Fill with nn_linear_params_default(), then change what you need. */
typedef struct nn_linear_params {
    nn_activation activation; /**< NN_ACTIVATION_IDENTITY or NN_ACTIVATION_RELU, after the bias */
    uint64_t reserved[4];     /**< zero; room for the ABI to grow */
} nn_linear_params;

/** State kept from a training-mode forward call for the matching backward call. Opaque. */
typedef struct nn_linear_pullback nn_linear_pullback;

/**
 * Default parameters: identity activation, no flags, reserved zero.
 *
 * @param p out: filled completely.
 * @return NN_OK; NN_E_INVALID_ARG if p is NULL.
 */
NN_API nn_status nn_linear_params_default(nn_linear_params *p);

/**
 * Forward: y = act(x w^T + b).
 *
 * @param ctx          the context; its backend runs the op, on its stream (GPU work is queued,
 *                     not waited for).
 * @param p            parameters, read and copied (not kept); flags are kept for backward.
 * @param x            input [..., in].
 * @param w            weight [out, in].
 * @param b            bias [out], or NULL for none.
 * @param y            output [..., out] with x's leading dims, overwritten; must not overlap x, w
 *                     or b, and no two of its elements may share memory.
 * @param pullback_out NULL for inference; otherwise out: a new pullback for
 *                     nn_linear_backward() (NULL on failure).
 * @return NN_OK; NN_E_INVALID_ARG (NULL ctx, p, x, w or y; an unknown activation or flag bit;
 *         a nonzero reserved field; malformed tensors; overlapping outputs); NN_E_SHAPE (dims
 *         that do not agree: the message names the tensor and dim, the expected and the actual
 *         value); NN_E_DTYPE (dtypes differ); NN_E_MEMSPACE (a tensor is not where the context
 *         computes); NN_E_UNSUPPORTED (a strided tensor; GPU: a size beyond int64 rows cuBLASLt
 *         takes, or a configuration cuBLASLt has no algorithm for; y of more than INT_MAX
 *         elements where a step runs through cuDNN's int-sized tensor calls: a bias or relu that
 *         cuBLASLt could not fuse, and relu's mask in backward); NN_E_OOM_HOST;
 *         NN_E_OOM_DEVICE; NN_E_CUDA; NN_E_CUDNN; NN_E_CUBLAS;
 *         NN_E_GRAPH (inside a graph capture: a shape not seen before it, graph.h).
 * Ownership: the pullback belongs to the caller until nn_linear_backward() consumes it or
 * nn_linear_pullback_free() drops it. It holds copies of the *views* of x and w (and of y with
 * relu), not their data: the caller keeps that storage alive and unchanged until backward.
 */
NN_API nn_status nn_linear_forward(nn_ctx *ctx, const nn_linear_params *p, const nn_tensor *x,
                                   const nn_tensor *w, const nn_tensor *b, nn_tensor *y,
                                   nn_linear_pullback **pullback_out);

/**
 * Backward through a training-mode forward call: any of dx, dw, db.
 *
 * @param ctx      the context the forward call used.
 * @param pullback in/out: the pullback from nn_linear_forward(); consumed and set to NULL on
 *                 success, left with the caller unchanged on failure.
 * @param dy       gradient with respect to y (y's dims and dtype).
 * @param dx       out: gradient with respect to x, or NULL to skip.
 * @param dw       out: gradient with respect to w, or NULL to skip.
 * @param db       out: gradient with respect to b [out], or NULL to skip (forward needs no bias
 *                 for db to be computed).
 *                 Each is overwritten (nn_linear_backward_ex() accumulates). No output may
 *                 overlap dy, another output or the saved x, w (and y with relu).
 * @return NN_OK; NN_E_PULLBACK (pullback or *pullback NULL, consumed, freed, another family's
 *         or another context's); the statuses of nn_linear_forward();
 *         NN_E_GRAPH (a pullback from the other side of a graph capture's boundary, graph.h).
 * Outputs may be partly written on a failure after validation (for example out of device memory
 * half way). The same as nn_linear_backward_ex() with opts NULL.
 */
NN_API nn_status nn_linear_backward(nn_ctx *ctx, nn_linear_pullback **pullback, const nn_tensor *dy,
                                    nn_tensor *dx, nn_tensor *dw, nn_tensor *db);

/**
 * nn_linear_backward() with options chosen at backward time (include/nnprim/backward.h).
 *
 * @param ctx      the context the forward call used.
 * @param pullback in/out: as nn_linear_backward(), except that with opts->keep = 1 it stays
 *                 live and unchanged on success, for another backward call.
 * @param opts     NULL: as nn_linear_backward(). Otherwise opts->accumulate (NN_ACCUMULATE_DX,
 *                 _DW, _DB) says which of dx, dw, db are added to, and opts->keep whether the
 *                 pullback survives.
 * @param dy, dx, dw, db  as nn_linear_backward().
 * @return the statuses of nn_linear_backward(); NN_E_INVALID_ARG for bad options (a bit outside
 *         NN_ACCUMULATE_*, keep not 0 or 1, a nonzero opts->reserved). Options are checked
 *         after the pullback.
 * Ownership: as nn_linear_backward(); a kept pullback stays the caller's
 * (nn_linear_pullback_free()), and the forward's x and w (and y with relu) must stay alive and
 * unchanged while it is kept.
 */
NN_API nn_status nn_linear_backward_ex(nn_ctx *ctx, nn_linear_pullback **pullback,
                                       const nn_backward_options *opts, const nn_tensor *dy,
                                       nn_tensor *dx, nn_tensor *dw, nn_tensor *db);

/**
 * Drop a pullback without using it.
 *
 * @param pullback in/out: NULL or *pullback NULL is a no-op; set to NULL. The context it was made
 *                 with must still exist.
 * @return NN_OK; NN_E_PULLBACK if *pullback is not a live linear pullback (consumed or freed).
 */
NN_API nn_status nn_linear_pullback_free(nn_linear_pullback **pullback);

/** A pass of the linear layer, for nn_linear_workspace_size(): the forward, or a backward call
 *  computing the OR of the gradients it is given (non-NULL dx, dw, db). */
typedef enum nn_linear_pass {
    NN_LINEAR_PASS_FORWARD = 0, /**< nn_linear_forward() */
    NN_LINEAR_PASS_DX = 1 << 0, /**< a backward call with dx */
    NN_LINEAR_PASS_DW = 1 << 1, /**< a backward call with dw */
    NN_LINEAR_PASS_DB = 1 << 2  /**< a backward call with db */
} nn_linear_pass;

/**
 * The device-pool bytes one linear call would hold at its peak, so that a framework can pre-size
 * its scratch (or its allocator, nn_mem_set_allocator()): the largest cuBLASLt workspace above
 * 1 MiB among the matmuls the call runs one after another, plus, for a backward call with
 * p.activation RELU, the relu-masked copy of dy it holds throughout (M x out elements). Not
 * included: the caller's tensors, a pullback (it keeps views only), the column of ones of a
 * stand-alone db product (made once per shape with its cached plan: this query makes it), the
 * context's kept workspace (every matmul whose workspace is at most 1 MiB runs on one buffer the
 * context keeps until nn_ctx_destroy(), grown by the first call that needs more, so a call may
 * take up to 1 MiB more than this answer once), and the pool's rounding of a request to its size
 * classes (docs/MEMORY.md). 0 on the reference backend, which takes host memory only.
 *
 * On the GPU the query finds the matmul plans the call would use, as the call would (the
 * context's cache, else a plan-file record, else cuBLASLt's heuristic with the same epilogue and
 * fallback), and caches them, so the call that follows is a cache hit. The plans depend on the
 * pointers' alignment: the answer holds for the call's other tensors (y, dy, dx, dw, db) packed
 * and 256-byte aligned, as nn_tensor_empty() makes them.
 *
 * @param ctx   the context that will run the call (its backend, settings and plan cache).
 * @param p     the call's parameters (activation).
 * @param x     the forward's input [..., in] (its dims and alignment; not read).
 * @param w     the weight [out, in] (not read).
 * @param b     the forward's bias [out], or NULL for none (the forward fuses it); backward
 *              passes ignore it.
 * @param pass  NN_LINEAR_PASS_FORWARD, or a nonzero OR of NN_LINEAR_PASS_DX, _DW and _DB.
 * @param accumulate the backward call's opts->accumulate (nn_accumulate bits; NN_ACCUMULATE_DB
 *              decides whether db can be fused into the dw product); 0 for the forward pass
 *              and for nn_linear_backward().
 * @param bytes out: the bytes; untouched on failure.
 * @return NN_OK; NN_E_INVALID_ARG (NULL ctx, p, x, w or bytes; a pass outside 0..7; a bit of
 *         accumulate outside NN_ACCUMULATE_*; the parameter and tensor checks of
 *         nn_linear_forward()); NN_E_SHAPE; NN_E_DTYPE;
 *         NN_E_MEMSPACE; NN_E_OVERFLOW (a tensor's element count or byte extent beyond int64);
 *         NN_E_UNSUPPORTED (a strided tensor; cuBLASLt has no algorithm for a product; y of
 *         more than INT_MAX elements where the call would refuse it: relu in a backward pass,
 *         an unfused bias or relu in forward);
 *         NN_E_OOM_HOST; NN_E_OOM_DEVICE (the column of ones of a db product); NN_E_CUDA;
 *         NN_E_CUBLAS.
 */
NN_API nn_status nn_linear_workspace_size(nn_ctx *ctx, const nn_linear_params *p,
                                          const nn_tensor *x, const nn_tensor *w,
                                          const nn_tensor *b, unsigned pass, unsigned accumulate,
                                          size_t *bytes);

#ifdef __cplusplus
}
#endif

#endif /* NNPRIM_LINEAR_H */

/*
 * nnprim: recurrent layers (RNN with relu or tanh, LSTM, GRU), forward and backward through
 * pullbacks, in the style of PyTorch's nn.RNN / nn.LSTM / nn.GRU (docs/RNN.md has the full text).
 *
 * Sizes: T time steps, N sequences, I = input_size, H = hidden_size, P = proj_size (LSTM only;
 * 0 = none), O = P if P > 0 else H (the width of h), L = num_layers, D = 2 if bidirectional else 1.
 *   x   input          T x N x I   (NN_RNN_SEQ_MAJOR)  or  N x T x I   (NN_RNN_BATCH_MAJOR)
 *   y   output         T x N x D*O                     or  N x T x D*O; direction 0 first
 *   hx, hy  h state    L*D x N x O   entry l * D + d is layer l, direction d (0 forward)
 *   cx, cy  c state    L*D x N x H   (LSTM only)
 *   w   weights        one packed rank-1 buffer of nn_rnn_weights_size() elements
 *   dx, dy, dhx, dhy, dcx, dcy, dw   the dims of x, y, hx, hy, cx, cy, w
 * Every tensor of a call has one dtype and must be fully packed row-major.
 *
 * Equations (sigma = logistic function; W, R the input-side and recurrent matrices of a gate, bW,
 * bR their biases, 0 where the bias mode drops them):
 *   relu/tanh  h' = act(W x + bW + R h + bR)
 *   LSTM       i, f, o = sigma(a_i), sigma(a_f), sigma(a_o); g = tanh(a_g), a_k = W_k x + bW_k +
 * R_k h
 *              + bR_k; c' = f * clip(c) + i * g; m = o * tanh(clip(c')); h' = W_hr m with a
 *              projection, else m. clip is the identity unless clip_enabled: then clip(v) =
 *              min(max(v, clip_lo), clip_hi), applied where the cell state is read (so also to
 *              cx at the first step), while y, hy see h' and cy reports c' unclamped (cuDNN's
 *              rule, which is not TensorFlow's cell_clip).
 *   GRU        r = sigma(W_r x + bW_r + R_r h + bR_r), z = sigma(W_z x + bW_z + R_z h + bR_z),
 *              n = tanh(W_n x + bW_n + r * (R_n h + bR_n)), h' = (1 - z) * n + z * h.
 * Layer 0 reads x (with NN_RNN_INPUT_SKIP its W is the identity and there is no weight_ih for
 * layer 0); layer l > 0 reads the D*O wide output of layer l - 1, after inverted dropout when the
 * call trains (a pullback is asked for) and p.dropout > 0. Direction 0 runs t = 0 .. len - 1,
 * direction 1 runs t = len - 1 .. 0, both from hx, cx (zero when NULL).
 *
 * Variable lengths: lengths[n] (0 <= lengths[n] <= T, any order) is sequence n's length. Padded
 * positions (t >= lengths[n]) of y and dx are set to zero and dy there is ignored. A sequence of
 * length 0 gives hy = hx, cy = cx and, in backward, dhx = dhy, dcx = dcy.
 *
 * Weights: one buffer holds every matrix and bias. nn_rnn_weight_view() returns a view of one of
 * them by (layer, direction, name), with PyTorch's names, shapes and gate order, so a PyTorch
 * state_dict copies in and out without reordering:
 *   weight_ih  G*H x I (layer 0) or G*H x D*O (layer > 0)     rows: gates in the order below
 *   weight_hh  G*H x O
 *   bias_ih, bias_hh  G*H
 *   weight_hr  P x H   (projection)
 * G = 1 (relu, tanh), 4 (LSTM: i, f, g, o) or 3 (GRU: r, z, n). Where each view sits is the
 * backend's business (cuDNN is asked once per shape), so copy through the views, never by offset:
 * a buffer filled on one backend is not guaranteed to be laid out alike on the other.
 *
 * dtypes: f32 (strict, or TF32 by the context's math mode), f16 and bf16 (computed in f32 on
 * cuDNN, in double on the reference), f64. The reference backend accumulates in double.
 *
 * Graph replay (cuDNN backend; settings.rnn_graphs, NNPRIM_RNN_GRAPHS=auto|0|1, default auto): a
 * shape's calls after its first one of each kind (from the first one when loading a plan file
 * prepared the shape: nn_plan_cache_load()) may run from CUDA graphs captured once, with
 * results bitwise those of the eager calls, whatever tensors each call passes (they are copied
 * into and out of buffers the graphs own). auto times a few eager and replayed calls of each shape
 * once (the host waits for those calls) and replays where that is more than 3% cheaper; training
 * with dropout stays eager.
 * The graphs and their buffers (staging, workspace, up to 4 reserve spaces per shape) come from
 * the pool and belong to the context's cache: they go with nn_plan_cache_clear() and
 * nn_ctx_destroy(). The verbose line's impl field says "cudnn-standard" (eager) or
 * "cudnn-standard-replay", likewise for the persistent algorithms, which NNPRIM_TUNING=autotune
 * times against the standard one, eager and replayed, for equal lengths without projection,
 * keeping the cheaper (algorithm, mode) pair, replayed under the same 3% rule (docs/RNN.md).
 *
 * Text form of a problem (the verbose lines of NNPRIM_VERBOSE=1, `nnprim check rnn` and
 * `nnprim bench rnn` all take it whole; docs/RNN.md has the grammar), e.g.
 *   lstm t5n3i4h6 l2 bidir proj3 bias_double seq clip-2:2 drop0.25:7 lens5x2x0 f32
 */
#ifndef NNPRIM_RNN_H
#define NNPRIM_RNN_H

#include <stdint.h>

#include "backward.h"
#include "context.h"
#include "status.h"
#include "tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/** The recurrent cell. */
typedef enum nn_rnn_cell {
    NN_RNN_RELU = 0, /**< h' = max(a, 0) */
    NN_RNN_TANH = 1, /**< h' = tanh(a) */
    NN_RNN_LSTM = 2, /**< four gates i, f, g, o; cell state c */
    NN_RNN_GRU = 3   /**< three gates r, z, n (reset applied after the recurrent product) */
} nn_rnn_cell;

/** Which biases exist. PyTorch always has both (DOUBLE). */
typedef enum nn_rnn_bias_mode {
    NN_RNN_BIAS_NONE = 0,      /**< no bias */
    NN_RNN_BIAS_INPUT = 1,     /**< bias_ih only */
    NN_RNN_BIAS_RECURRENT = 2, /**< bias_hh only */
    NN_RNN_BIAS_DOUBLE = 3     /**< bias_ih and bias_hh (the default) */
} nn_rnn_bias_mode;

/** How layer 0 reads x. */
typedef enum nn_rnn_input_mode {
    NN_RNN_INPUT_LINEAR = 0, /**< through weight_ih (the default) */
    NN_RNN_INPUT_SKIP = 1 /**< x as it is (needs input_size == hidden_size); no layer-0 weight_ih */
} nn_rnn_input_mode;

/** Order of the dims of x, y, dx and dy. */
typedef enum nn_rnn_layout {
    NN_RNN_SEQ_MAJOR = 0,  /**< T x N x C (PyTorch's default, batch_first=False) */
    NN_RNN_BATCH_MAJOR = 1 /**< N x T x C (batch_first=True) */
} nn_rnn_layout;

/** Names of the weight views (PyTorch's, without the _l{k} / _reverse suffix). */
typedef enum nn_rnn_weight_name {
    NN_RNN_WEIGHT_IH = 0, /**< G*H x (I or D*O) */
    NN_RNN_WEIGHT_HH = 1, /**< G*H x O */
    NN_RNN_BIAS_IH = 2,   /**< G*H */
    NN_RNN_BIAS_HH = 3,   /**< G*H */
    NN_RNN_WEIGHT_HR = 4  /**< P x H (LSTM with a projection) */
} nn_rnn_weight_name;

/**
 * Recurrent-layer parameters. Fill with nn_rnn_params_default(), then change what you need.
 */
typedef struct nn_rnn_params {
    nn_rnn_cell cell;
    int64_t input_size;  /**< I >= 1 */
    int64_t hidden_size; /**< H >= 1 */
    int64_t proj_size;   /**< P: 0 = no projection; 1 <= P < H, LSTM only */
    int64_t num_layers;  /**< L >= 1 */
    int bidirectional;   /**< 0 or 1 */
    nn_rnn_bias_mode bias_mode;
    nn_rnn_input_mode input_mode;
    nn_rnn_layout layout;
    double dropout;        /**< in [0, 1): probability of zeroing a layer's input (layers > 0,
                                training calls only); kept values are scaled by 1 / (1 - dropout) */
    uint64_t dropout_seed; /**< the dropout mask's seed (see nn_rnn_forward()) */
    int clip_enabled;      /**< LSTM only: clamp the cell state where it is read */
    double clip_lo;        /**< finite, clip_lo <= clip_hi */
    double clip_hi;
    uint64_t reserved[4]; /**< zero (NN_E_INVALID_ARG otherwise, naming the index) */
} nn_rnn_params;

/**
 * Default parameters: one unidirectional layer, no projection, both biases, linear input,
 * sequence-major, no dropout, no clip.
 *
 * @param p           out: filled completely.
 * @param cell        the cell.
 * @param input_size  I.
 * @param hidden_size H.
 * @return NN_OK; NN_E_INVALID_ARG if p is NULL, the cell is unknown or a size is < 1 (p is
 *         untouched then).
 */
NN_API nn_status nn_rnn_params_default(nn_rnn_params *p, nn_rnn_cell cell, int64_t input_size,
                                       int64_t hidden_size);

/**
 * The number of elements of the packed weight buffer w (and of dw).
 *
 * @param ctx   the context whose backend lays the buffer out (cuDNN is asked, once per shape).
 * @param p     parameters, checked as by nn_rnn_forward().
 * @param dtype the weights' dtype.
 * @param numel out: the element count; untouched on failure.
 * @return NN_OK; NN_E_INVALID_ARG (NULL argument, a parameter out of range: the message names
 *         it); NN_E_DTYPE; NN_E_OVERFLOW; NN_E_NOT_BUILT (a cuDNN context in a build without the
 *         cuDNN RNN path); NN_E_UNSUPPORTED; NN_E_OOM_HOST; NN_E_CUDNN.
 */
NN_API nn_status nn_rnn_weights_size(nn_ctx *ctx, const nn_rnn_params *p, nn_dtype dtype,
                                     int64_t *numel);

/**
 * A view of one matrix or bias inside a packed weight buffer (w or dw).
 *
 * @param ctx       the context (the backend that lays w out).
 * @param p         parameters.
 * @param w         the packed buffer: rank 1, nn_rnn_weights_size() elements, in the context's
 *                  memory space.
 * @param layer     0 <= layer < p.num_layers.
 * @param direction 0 (forward) or 1 (reverse, bidirectional only).
 * @param name      which one; its dims are listed at the top of this header.
 * @param out       out: a packed view (rank 2 for matrices, rank 1 for biases) sharing w's data,
 *                  dtype and memory space; untouched on failure.
 * @return NN_OK; NN_E_INVALID_ARG (NULL argument, layer or direction out of range, a name that
 *         does not exist for these parameters: a bias the bias mode drops, weight_ih of layer 0
 *         with skip input, weight_hr without a projection); NN_E_SHAPE (w's dims); NN_E_DTYPE;
 *         NN_E_MEMSPACE; the statuses of nn_rnn_weights_size().
 * Ownership: the view borrows w's storage and is marked NN_TENSOR_BORROWED (nn_tensor_free()
 * refuses it; w's own free releases the storage).
 */
NN_API nn_status nn_rnn_weight_view(nn_ctx *ctx, const nn_rnn_params *p, const nn_tensor *w,
                                    int64_t layer, int direction, nn_rnn_weight_name name,
                                    nn_tensor *out);

/** State kept from a training-mode forward call for the matching backward call. Opaque. */
typedef struct nn_rnn_pullback nn_rnn_pullback;

/**
 * The tensors of nn_rnn_forward(), by role. Zero-initialise and set the roles the call has, e.g.
 *   nn_rnn_forward_tensors t = {.x = &x, .w = &w, .y = &y, .hy = &hy};
 * so that an unused optional role is simply left out (NULL). Read during the call only.
 */
typedef struct nn_rnn_forward_tensors {
    const nn_tensor *x;     /**< in: input, T x N x I or N x T x I; required */
    const int32_t *lengths; /**< in: NULL (every sequence has length T) or a host array of N
                                 lengths, each in [0, T], any order; read during the call and
                                 copied into the pullback */
    const nn_tensor *hx;    /**< in: initial h, L*D x N x O, or NULL for zeros */
    const nn_tensor *cx;    /**< in: initial c, L*D x N x H, or NULL for zeros; LSTM only */
    const nn_tensor *w;     /**< in: packed weights (nn_rnn_weight_view() fills them); required */
    nn_tensor *y;           /**< out: output, overwritten (zero at padded positions); required */
    nn_tensor *hy;          /**< out: final h, L*D x N x O, or NULL if not wanted */
    nn_tensor *cy;          /**< out: final c, L*D x N x H, or NULL if not wanted; LSTM only */
    uint64_t reserved[4];   /**< zero (NN_E_INVALID_ARG otherwise, naming the index); room for
                                 the ABI to grow */
} nn_rnn_forward_tensors;

/**
 * The tensors of nn_rnn_backward() and nn_rnn_backward_ex(), by role. Zero-initialise and set the
 * roles the call has, e.g.
 *   nn_rnn_backward_tensors t = {.dy = &dy, .dw = &dw};
 * An input left NULL counts as zero; an output left NULL is not computed. Read during the call
 * only. The forward's x, hx, cx, w and y come from the pullback.
 */
typedef struct nn_rnn_backward_tensors {
    const nn_tensor *dy;  /**< in: gradient with respect to y, or NULL for zero (ignored at padded
                               positions) */
    const nn_tensor *dhy; /**< in: gradient with respect to hy, or NULL for zero */
    const nn_tensor *dcy; /**< in: gradient with respect to cy, or NULL for zero; LSTM only */
    nn_tensor *dx;        /**< out: gradient with respect to x (zero at padded positions), or NULL
                               to skip */
    nn_tensor *dhx;       /**< out: gradient with respect to hx, or NULL to skip */
    nn_tensor *dcx;       /**< out: gradient with respect to cx, or NULL to skip; LSTM only */
    nn_tensor *dw;        /**< out: gradient with respect to w, or NULL to skip; overwritten, or
                               added to when nn_rnn_backward_ex() is asked NN_ACCUMULATE_DW. Its
                               elements that belong to no view are left zero (overwrite) or
                               unchanged (accumulate). */
    uint64_t reserved[4]; /**< zero (NN_E_INVALID_ARG otherwise, naming the index); room for the
                               ABI to grow */
} nn_rnn_backward_tensors;

/**
 * Forward through every layer and direction.
 *
 * @param ctx          the context; its backend runs the op on its stream.
 * @param p            parameters.
 * @param t            the call's tensors by role (nn_rnn_forward_tensors); messages name its
 *                     fields as t.x, t.hx, ...
 * @param pullback_out NULL for inference (no dropout); otherwise out: a new pullback for
 *                     nn_rnn_backward() (NULL on failure). With a pullback and p.dropout > 0 the
 *                     call drops out. On the reference backend the mask is a function of
 *                     p.dropout_seed and the position only (change the seed each step for fresh
 *                     masks); on cuDNN it comes from cuDNN's random state, one per context and
 *                     (p.dropout, p.dropout_seed), initialised from the seed once, so a fresh
 *                     context repeats a run. The two backends' masks differ.
 * @return NN_OK; NN_E_INVALID_ARG (NULL ctx, p, t, t.x, t.w or t.y, a parameter out of range,
 *         t.cx or t.cy with a cell other than LSTM, nonzero reserved fields of p or t, an
 *         output overlapping an input); NN_E_SHAPE (dims that do not agree with p: the message
 *         names the tensor and dim, the expected and actual value; a length outside [0, T]);
 *         NN_E_DTYPE (dtypes differ); NN_E_MEMSPACE; NN_E_UNSUPPORTED (strided tensors, a
 *         configuration the backend cannot run); NN_E_OVERFLOW; NN_E_NOT_BUILT; NN_E_OOM_HOST;
 *         NN_E_OOM_DEVICE; NN_E_CUDA; NN_E_CUDNN;
 *         NN_E_GRAPH (inside a graph capture: a shape not seen before it, graph.h).
 * Ownership: the pullback belongs to the caller until nn_rnn_backward() consumes it or
 * nn_rnn_pullback_free() drops it. It holds the views of x, hx, cx, w and y (not their data) and,
 * on cuDNN, the reserve space (from the pool): the caller keeps the storage of x, hx, cx, w and y
 * alive and unchanged until the backward call (cuDNN's backward reads them; changing one gives
 * wrong gradients without an error).
 */
NN_API nn_status nn_rnn_forward(nn_ctx *ctx, const nn_rnn_params *p,
                                const nn_rnn_forward_tensors *t, nn_rnn_pullback **pullback_out);

/**
 * Backward through a training-mode forward call: the data gradients, then the weight gradient
 * (in this order, the only one cuDNN gets right). dw is overwritten; nn_rnn_backward_ex() can add
 * to it instead.
 *
 * @param ctx      the context the forward call used.
 * @param pullback in/out: the pullback from nn_rnn_forward(); set to NULL on success.
 * @param t        the call's gradients by role (nn_rnn_backward_tensors); messages name its
 *                 fields as t.dy, t.dx, ...
 * @return NN_OK; NN_E_PULLBACK (pullback or *pullback NULL, already consumed, not a pullback, or
 *         made with another context); NN_E_INVALID_ARG (t NULL, a nonzero t.reserved); the
 *         statuses of nn_rnn_forward(); outputs must not overlap each other, the gradients in, or
 *         the views the pullback holds ("the pullback's x", ... in the message);
 *         NN_E_GRAPH (a pullback from the other side of a graph capture's boundary, graph.h).
 * Ownership: on success the pullback is freed and *pullback set to NULL: a pullback is single-use,
 * since cuDNN's backward-data changes the reserve space. On failure it stays with the caller.
 * Outputs may be partly written on a failure after validation. The same as nn_rnn_backward_ex()
 * with opts NULL.
 */
NN_API nn_status nn_rnn_backward(nn_ctx *ctx, nn_rnn_pullback **pullback,
                                 const nn_rnn_backward_tensors *t);

/**
 * nn_rnn_backward() with the accumulation chosen at backward time (include/nnprim/backward.h):
 * the one way to add to dw.
 *
 * @param ctx      the context the forward call used.
 * @param pullback in/out: as nn_rnn_backward(); always consumed on success.
 * @param opts     NULL: as nn_rnn_backward() (dw overwritten). Otherwise opts->accumulate, 0 or
 *                 NN_ACCUMULATE_DW (t.dw += the gradient). opts->keep must be 0: an RNN pullback
 *                 is single-use on both backends (cuDNN's backward-data overwrites the reserve
 *                 space forward filled; the reference keeps the same rule so code moves between
 *                 them).
 * @param t        as nn_rnn_backward().
 * @return the statuses of nn_rnn_backward(); NN_E_INVALID_ARG (a bit outside NN_ACCUMULATE_*,
 *         keep not 0 or 1, a nonzero opts->reserved); NN_E_UNSUPPORTED (NN_ACCUMULATE_DX or
 *         NN_ACCUMULATE_DB, or keep = 1). Options are checked after the pullback; a refused call
 *         leaves the pullback with the caller, usable.
 */
NN_API nn_status nn_rnn_backward_ex(nn_ctx *ctx, nn_rnn_pullback **pullback,
                                    const nn_backward_options *opts,
                                    const nn_rnn_backward_tensors *t);

/** A call of a recurrent layer, for nn_rnn_workspace_size(). */
typedef enum nn_rnn_pass {
    NN_RNN_PASS_INFERENCE = 0, /**< nn_rnn_forward() without a pullback */
    NN_RNN_PASS_TRAINING = 1,  /**< nn_rnn_forward() with a pullback */
    NN_RNN_PASS_BACKWARD = 2   /**< nn_rnn_backward() or nn_rnn_backward_ex() */
} nn_rnn_pass;

/**
 * The device-pool bytes one call of a recurrent layer would hold at its peak, so that a framework
 * can pre-size its scratch (or its allocator, nn_mem_set_allocator()). On cuDNN, from the shape's
 * cached descriptors (cudnnGetRNNTempSpaceSizes, for full-length sequences, which bound any
 * lengths): an inference forward holds the workspace; a training forward the workspace and the
 * reserve space (the reserve stays with the pullback until nn_rnn_backward() consumes it or
 * nn_rnn_pullback_free() drops it); a backward the workspace, for a call that passes dy and dx
 * (one without dy takes a zeroed y-sized buffer more, one without dx an x-sized one). That is
 * what an eager call takes; a replayed call (graph replay, see the top of this header) takes
 * nothing per call, while the shape's graphs hold their staging buffers and up to 4 reserve
 * spaces for as long as the shape stays in the context's cache. Not included: the caller's
 * tensors, the pool's rounding to its size classes (docs/MEMORY.md), and what the shape's
 * descriptors hold for the context's life (a dropout state of about 2 MB, made when the shape is
 * first built). 0 on the reference backend, which takes host memory only.
 *
 * The query builds the shape's descriptors as the call would (from the context's cache, else a
 * plan-file record, else the heuristic choice or, under autotune, timed candidates on zeroed
 * pool scratch) and keeps them, so the call that follows finds them.
 *
 * @param ctx     the context that will run the call (its backend, settings and cache).
 * @param p       the call's parameters, checked as by nn_rnn_forward().
 * @param x       the forward's input (its dims give T and N, its dtype the call's; its data is not
 *                read), checked as by nn_rnn_forward().
 * @param lengths as nn_rnn_forward(): NULL or N lengths in [0, T] (varied lengths are another
 *                shape to cuDNN).
 * @param pass    which call.
 * @param bytes   out: the bytes; untouched on failure.
 * @return NN_OK; NN_E_INVALID_ARG (NULL ctx, p, x or bytes, an unknown pass, the parameter checks
 *         of nn_rnn_forward()); NN_E_SHAPE (x's dims, a length outside [0, T]); NN_E_DTYPE;
 *         NN_E_MEMSPACE; NN_E_UNSUPPORTED (x strided, a size beyond cuDNN's int); NN_E_OVERFLOW;
 *         NN_E_NOT_BUILT; NN_E_OOM_HOST; NN_E_OOM_DEVICE (scratch while building); NN_E_CUDA;
 *         NN_E_CUDNN.
 */
NN_API nn_status nn_rnn_workspace_size(nn_ctx *ctx, const nn_rnn_params *p, const nn_tensor *x,
                                       const int32_t *lengths, nn_rnn_pass pass, size_t *bytes);

/**
 * Drop a pullback without using it (its reserve space goes back to the pool of the context it was
 * made with, ordered on that context's stream).
 *
 * @param pullback in/out: NULL or *pullback NULL is a no-op; set to NULL. The context the
 *                 pullback was made with must still exist.
 * @return NN_OK; NN_E_PULLBACK if *pullback is not a live pullback (already consumed or freed).
 */
NN_API nn_status nn_rnn_pullback_free(nn_rnn_pullback **pullback);

#ifdef __cplusplus
}
#endif

#endif /* NNPRIM_RNN_H */

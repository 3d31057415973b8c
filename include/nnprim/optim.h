/*
 * nnprim: fused optimizer updates (SGD with momentum, Adam, AdamW), with optional gradient
 * clipping by global norm, over a set of parameter tensors bound once.
 *
 * Semantics: PyTorch's torch.optim.SGD, torch.optim.Adam and torch.optim.AdamW (their
 * documentation, https://pytorch.org/docs/stable/optim.html, and the single-tensor code behind
 * it, foreach=False), and torch.nn.utils.clip_grad_norm_ (norm_type 2). Per element, with g the
 * gradient, p the parameter, t the step (1 for the first):
 *
 *   clipping (max_grad_norm > 0): total = sqrt(sum of g^2 over every element of every gradient),
 *       coef = max_grad_norm / (total + 1e-6); when coef < 1 the update uses g = g * coef. The
 *       caller's gradient tensors are not modified (PyTorch scales them in place).
 *   SGD:   g = g + weight_decay * p;
 *          if momentum != 0: buf = g at the first step, else buf = momentum * buf +
 *          (1 - dampening) * g; then g = nesterov ? g + momentum * buf : buf;
 *          p = p - lr * g.
 *   Adam:  g = g + weight_decay * p (L2, into the gradient);
 *   AdamW: p = p * (1 - lr * weight_decay) (decoupled, first);
 *   both:  m = beta1 * m + (1 - beta1) * g (computed as PyTorch's lerp: m + (1 - beta1)(g - m));
 *          v = beta2 * v + (1 - beta2) * g * g;
 *          bc1 = 1 - beta1^t, bc2 = 1 - beta2^t;
 *          p = p - (lr / bc1) * m / (sqrt(v) / sqrt(bc2) + eps).
 *
 * Every operation is PyTorch's, in its order; the arithmetic is double for every dtype and each
 * result is rounded once to the tensor's dtype when stored (PyTorch rounds f32 tensors after
 * every operation), so f64 results agree with PyTorch's to about 1e-15 relative. SGD's "first
 * step" (buf = g) is the first nn_optim_step() after nn_optim_create() or nn_optim_reset(), as
 * it is the first step() of a new torch.optim.SGD. Not provided: maximize, amsgrad, parameter
 * groups (one optimizer per group).
 *
 * Tensors: every parameter and its gradient fully packed row-major (nn_tensor_is_contiguous()),
 * where the context computes, all of one dtype: f32 or f64 (f16 and bf16 are refused with
 * NN_E_DTYPE). The state (SGD's momentum buffer; Adam's m and v) has each parameter's dtype and
 * shape and belongs to the optimizer: device memory from the pool on a cuDNN context, host memory
 * on a reference one.
 *
 * The GPU path (cuDNN contexts) and CUDA graphs: the optimizer keeps its step count and its
 * hyper-parameters in device memory, and nn_optim_step() only launches kernels on the context's
 * stream: no host synchronisation, no copy from host memory, no allocation. A step captured into
 * a CUDA graph (nn_graph_begin(), graph.h) therefore advances the step count and reads the
 * current lr at every launch. A step is one kernel launch for up to 64 tensors
 * (the tensors' pointers and sizes travel in the launch's by-value parameters, which hold 64),
 * one more per further 64; with clipping, the same number of norm-reduction launches first (two
 * launches for up to 64 tensors). The kernels are nnprim's own, built by nvcc into the library:
 * a build without nvcc, or a driver that refuses their image, cannot make an optimizer on a
 * cuDNN context (NN_E_UNSUPPORTED says why).
 *
 * Text form of a step (the verbose line of NNPRIM_VERBOSE=1): "adamw t3n4170 f32 lr=0.001
 * beta1=0.9 beta2=0.999 eps=1e-08 wd=0.01 clip=1" (t: tensors, n: elements in all), or
 * "sgd t2n12 f64 lr=0.1 momentum=0.9 dampening=0 nesterov wd=0".
 */
#ifndef NNPRIM_OPTIM_H
#define NNPRIM_OPTIM_H

#include <stdint.h>

#include "context.h"
#include "status.h"
#include "tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/** The update rule. */
typedef enum nn_optim_kind {
    NN_OPTIM_SGD = 1,  /**< torch.optim.SGD: momentum, dampening, Nesterov, L2 weight decay */
    NN_OPTIM_ADAM = 2, /**< torch.optim.Adam: weight decay as L2 into the gradient */
    NN_OPTIM_ADAMW = 3 /**< torch.optim.AdamW: decoupled weight decay */
} nn_optim_kind;

/**
 * Optimizer hyper-parameters. Fill with nn_optim_params_default(), then change what you need.
 * Every field is checked whichever the kind (a field the kind does not read must still be in its
 * range), and every double must be finite.
 */
typedef struct nn_optim_params {
    nn_optim_kind kind;
    int nesterov;         /**< SGD: 0 or 1; 1 needs momentum > 0 and dampening 0 (PyTorch's rule) */
    double lr;            /**< learning rate, >= 0 */
    double momentum;      /**< SGD: >= 0; 0 keeps no momentum buffer */
    double dampening;     /**< SGD: in [0, 1] */
    double weight_decay;  /**< >= 0: L2 for SGD and Adam, decoupled for AdamW */
    double beta1, beta2;  /**< Adam, AdamW: each in [0, 1) */
    double eps;           /**< Adam, AdamW: >= 0 */
    double max_grad_norm; /**< > 0: clip the gradients' global 2-norm to it; 0: no clipping */
    uint64_t reserved[4]; /**< zero; room for the ABI to grow */
} nn_optim_params;

/** An optimizer bound to a context and a set of parameter tensors. Opaque. */
typedef struct nn_optim nn_optim;

/**
 * PyTorch's defaults for kind: lr 1e-3, momentum 0, dampening 0, nesterov 0, beta1 0.9,
 * beta2 0.999, eps 1e-8, weight_decay 0 (0.01 for NN_OPTIM_ADAMW), no clipping; reserved zero.
 *
 * @param p    out: filled completely.
 * @param kind NN_OPTIM_SGD, NN_OPTIM_ADAM or NN_OPTIM_ADAMW.
 * @return NN_OK; NN_E_INVALID_ARG (NULL p, an unknown kind: p is untouched then).
 */
NN_API nn_status nn_optim_params_default(nn_optim_params *p, nn_optim_kind kind);

/**
 * Make an optimizer for n parameter tensors (one packed buffer of every parameter is n = 1).
 * Its state starts at zero and its step count at 0.
 *
 * @param ctx     the context every call of this optimizer uses; on a cuDNN context the state's
 *                zeroing and the device copy of the hyper-parameters are queued on its stream.
 * @param p       hyper-parameters, read and copied.
 * @param n       number of tensors, >= 1.
 * @param params  n parameter views: valid, where ctx computes, of one dtype (f32 or f64), fully
 *                packed row-major, no two sharing memory. The views are copied; the optimizer
 *                writes their data at every step.
 * @param out     out: the optimizer (NULL on failure).
 * @return NN_OK; NN_E_INVALID_ARG (NULL ctx, p, params or out; n < 1; an unknown kind; a
 *         hyper-parameter out of range or not finite, or nesterov with momentum 0 or dampening
 *         != 0: the message names the field, its range and its value; a nonzero reserved field;
 *         a malformed view; two parameters overlapping); NN_E_DTYPE (f16, bf16, or dtypes that
 *         differ); NN_E_MEMSPACE (a parameter not where ctx computes); NN_E_UNSUPPORTED (a
 *         strided parameter; on a cuDNN context, a build or driver without nnprim's optimizer
 *         kernels); NN_E_OOM_HOST; NN_E_OOM_DEVICE; NN_E_CUDA; NN_E_GRAPH (a graph capture is
 *         open on ctx: the state's zeroing would be repeated at every launch).
 * Ownership: the optimizer is the caller's until nn_optim_free(); it must be freed before ctx
 * is destroyed. The parameters' storage stays the caller's: it must stay alive and in place
 * while the optimizer lives.
 */
NN_API nn_status nn_optim_create(nn_ctx *ctx, const nn_optim_params *p, int n,
                                 const nn_tensor *params, nn_optim **out);

/**
 * One update of every parameter from its gradient, as the top of this header says, then the
 * step count advances by one. On a cuDNN context: kernel launches on ctx's stream only (1, or
 * 2 with clipping, for up to 64 tensors; see the top of this header), nothing waited for, so the
 * call can be captured into a CUDA graph and replayed.
 *
 * @param ctx   the optimizer's context.
 * @param opt   a live optimizer of ctx.
 * @param n     the optimizer's tensor count.
 * @param grads n gradients, grads[i] of params[i]'s dtype and dims, where ctx computes, fully
 *              packed row-major, sharing no memory with any parameter (gradients may share
 *              memory with each other). Read only.
 * @return NN_OK; NN_E_INVALID_ARG (NULL ctx, opt or grads; n not the optimizer's count; an
 *         optimizer of another context; a malformed view; a gradient overlapping a parameter);
 *         NN_E_BAD_POINTER (opt is not a live optimizer: freed, or never made); NN_E_DTYPE;
 *         NN_E_SHAPE (the message names the gradient and dim, the expected and the actual
 *         value); NN_E_MEMSPACE; NN_E_UNSUPPORTED (a strided gradient); NN_E_CUDA. A refused call
 *         changes nothing.
 */
NN_API nn_status nn_optim_step(nn_ctx *ctx, nn_optim *opt, int n, const nn_tensor *grads);

/**
 * Set the learning rate used by the steps that follow (an LR schedule). On a cuDNN context the
 * device copy is rewritten by a one-thread kernel that takes lr by value, queued on ctx's
 * stream: steps queued before it use the old lr, steps after it (and every later replay of a
 * graph of steps) the new one, with no host wait. Call it outside captures: it is refused while
 * one is open on ctx, where it would be baked into the graph.
 *
 * @param lr >= 0 and finite.
 * @return NN_OK; NN_E_INVALID_ARG (NULL ctx or opt, an optimizer of another context, lr out of
 *         range); NN_E_BAD_POINTER (not a live optimizer); NN_E_GRAPH (a graph capture is open on
 *         ctx); NN_E_UNSUPPORTED (someone else is capturing ctx's stream); NN_E_CUDA.
 */
NN_API nn_status nn_optim_set_lr(nn_ctx *ctx, nn_optim *opt, double lr);

/**
 * The number of steps taken since nn_optim_create() or nn_optim_reset(), replays of captured
 * steps included. On a cuDNN context it is read from device memory after the work queued on
 * ctx's stream so far: the call waits for that stream (so it is refused inside a capture).
 *
 * @param step out: the count; untouched on failure.
 * @return NN_OK; NN_E_INVALID_ARG (NULL ctx, opt or step, an optimizer of another context);
 *         NN_E_BAD_POINTER; NN_E_GRAPH (a graph capture is open on ctx); NN_E_UNSUPPORTED
 *         (someone else is capturing ctx's stream); NN_E_CUDA.
 */
NN_API nn_status nn_optim_get_step(nn_ctx *ctx, nn_optim *opt, int64_t *step);

/**
 * Start again: the state (momentum buffers, m, v) to zero and the step count to 0, so that the
 * next step is a first step; the parameters and the hyper-parameters (lr as last set) are kept.
 * On a cuDNN context: memsets queued on ctx's stream, no host wait.
 *
 * @return NN_OK; NN_E_INVALID_ARG (NULL ctx or opt, an optimizer of another context);
 *         NN_E_BAD_POINTER; NN_E_CUDA.
 */
NN_API nn_status nn_optim_reset(nn_ctx *ctx, nn_optim *opt);

/**
 * Free an optimizer and its state. On a cuDNN context the device memory goes back to the pool in
 * the stream order of ctx's stream (safe while queued steps are still running).
 *
 * @param ctx the optimizer's context.
 * @param opt the optimizer; NULL is a no-op.
 * @return NN_OK; NN_E_INVALID_ARG (NULL ctx, an optimizer of another context); NN_E_BAD_POINTER
 *         (not a live optimizer: already freed, or never made; nothing is changed).
 */
NN_API nn_status nn_optim_free(nn_ctx *ctx, nn_optim *opt);

#ifdef __cplusplus
}
#endif

#endif /* NNPRIM_OPTIM_H */

/* The optimizer's arithmetic and the layouts its kernels read, shared by the reference backend
 * (optim_ref.c, C) and the kernels (optim.cu, CUDA C++, compiled with --fmad=false), so that
 * both round every operation alike: results differ only where CUDA's pow() does from the host's.
 *
 * Every update is computed in double, whatever the tensors' dtype, and rounded once when stored.
 * The order of operations is PyTorch's single-tensor (foreach=False) code of torch.optim.SGD,
 * Adam and AdamW (torch/optim/sgd.py, adam.py): see each function. */
#ifndef NN_OPTIM_OPTIM_FORMULA_H
#define NN_OPTIM_OPTIM_FORMULA_H

#ifdef __CUDACC__
#define NN__OPTIM_FN static __device__ __forceinline__
#else
#include <math.h>
#define NN__OPTIM_FN static inline
#endif

/* nn_optim_kind's values (include/nnprim/optim.h checks them) */
#define NN__OPTIM_SGD   1
#define NN__OPTIM_ADAM  2
#define NN__OPTIM_ADAMW 3

/* The hyper-parameters as the update reads them (device memory on a cuDNN context). */
struct nn__optim_hyper {
    double lr, momentum, dampening, weight_decay, beta1, beta2, eps, max_grad_norm;
};

/* The gradient as the update uses it: scaled by clip_grad_norm_'s coefficient when it is < 1
 * (coef = max_norm / (total + 1e-6), total the 2-norm of every gradient element). */
NN__OPTIM_FN double nn__optim_clip_coef(double max_norm, double sum_squares)
{
    return max_norm / (sqrt(sum_squares) + 1e-6);
}

NN__OPTIM_FN double nn__optim_clipped(double g, double coef)
{
    return coef < 1 ? g * coef : g;
}

/* SGD: returns the new parameter; *buf is the momentum buffer (read unless first, written when
 * momentum != 0). sgd.py: grad.add(param, alpha=wd); buf = clone(grad) on the first step, else
 * buf.mul_(momentum).add_(grad, alpha=1 - dampening); grad.add(buf, alpha=momentum) for
 * Nesterov, else grad = buf; param.add_(grad, alpha=-lr). */
NN__OPTIM_FN double nn__optim_sgd(const struct nn__optim_hyper *h, int nesterov, int first,
                                  double p, double g, double *buf)
{
    if (h->weight_decay != 0) g = g + h->weight_decay * p;
    if (h->momentum != 0) {
        double b = first ? g : *buf * h->momentum + (1 - h->dampening) * g;
        *buf = b;
        g = nesterov ? g + h->momentum * b : b;
    }
    return p + -h->lr * g;
}

/* Adam's per-step scalars for step t (1 for the first): step_size = lr / (1 - beta1^t) and
 * sqrt(1 - beta2^t). adam.py takes bias_correction2 ** 0.5 (math.sqrt in older releases):
 * sqrt() is correctly rounded, and both backends get the same value from it. */
NN__OPTIM_FN void nn__optim_adam_scalars(const struct nn__optim_hyper *h, double t,
                                         double *step_size, double *bc2_sqrt)
{
    double bc1 = 1 - pow(h->beta1, t), bc2 = 1 - pow(h->beta2, t);
    *step_size = h->lr / bc1;
    *bc2_sqrt = sqrt(bc2);
}

/* Adam (decoupled 0) and AdamW (1): returns the new parameter; *m, *v are exp_avg and
 * exp_avg_sq. adam.py: param.mul_(1 - lr * wd) (AdamW) or grad.add(param, alpha=wd) (Adam);
 * exp_avg.lerp_(grad, 1 - beta1) (ATen's lerp: start + w (end - start) for |w| < 0.5, else
 * end - (end - start) (1 - w)); exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2);
 * denom = (exp_avg_sq.sqrt() / bc2_sqrt).add_(eps); param.addcdiv_(exp_avg, denom,
 * value=-step_size). */
NN__OPTIM_FN double nn__optim_adam(const struct nn__optim_hyper *h, int decoupled, double step_size,
                                   double bc2_sqrt, double p, double g, double *m, double *v)
{
    if (h->weight_decay != 0) {
        if (decoupled)
            p = p * (1 - h->lr * h->weight_decay);
        else
            g = g + h->weight_decay * p;
    }
    double w = 1 - h->beta1;
    double mm = fabs(w) < 0.5 ? *m + w * (g - *m) : g - (g - *m) * (1 - w);
    double vv = *v * h->beta2 + (1 - h->beta2) * g * g;
    *m = mm;
    *v = vv;
    double denom = sqrt(vv) / bc2_sqrt + h->eps;
    return p + -step_size * mm / denom;
}

/* ---------------------------------------------------------------------------------------------
 * What the kernels read (cuDNN contexts only)
 */

/* Tensors per launch: the launch parameter below stays inside the 4 KiB of kernel parameters
 * that every architecture and driver takes. */
#define NN__OPTIM_TENSORS_MAX 64
/* Partial sums of squares the clipping pass leaves for its last block, per step at most (a
 * larger count for optimizers of more than 64 * this many tensors: one per launch). */
#define NN__OPTIM_PARTIALS    1024
/* Threads per block of every optimizer kernel. */
#define NN__OPTIM_THREADS     256

/* The optimizer's device-side state header, at the start of its device block. */
struct nn__optim_dev {
    struct nn__optim_hyper h; /* lr rewritten by nn_optim_set_lr() */
    long long step;           /* steps taken: the update's last block adds one */
    double coef;              /* the clipping coefficient of the step being taken */
    unsigned done_norm;       /* blocks of the clipping pass finished (back to 0 after) */
    unsigned done_update;     /* blocks of the update finished (back to 0 after) */
};

/* One launch's parameter (by value): up to NN__OPTIM_TENSORS_MAX tensors of one dtype. */
struct nn__optim_launch {
    unsigned long long p[NN__OPTIM_TENSORS_MAX];  /* parameters, updated */
    unsigned long long g[NN__OPTIM_TENSORS_MAX];  /* gradients, read */
    unsigned long long s1[NN__OPTIM_TENSORS_MAX]; /* momentum buffer / exp_avg; 0 for none */
    unsigned long long s2[NN__OPTIM_TENSORS_MAX]; /* exp_avg_sq; 0 for none */
    unsigned long long n[NN__OPTIM_TENSORS_MAX];  /* elements */
    unsigned long long dev;                       /* struct nn__optim_dev * */
    unsigned long long partial;                   /* double[]: the clipping pass's partial sums */
    unsigned count;                               /* tensors of this launch */
    unsigned dtype;                               /* 1 f32, 2 f64 (nn_dtype's values) */
    unsigned kind;                                /* NN__OPTIM_* */
    unsigned nesterov;
    unsigned clip;          /* the update scales the gradients by dev->coef */
    unsigned last;          /* the step's last launch of this kernel: it finishes the step */
    unsigned partial_base;  /* clipping: this launch's blocks write partial[base + block] */
    unsigned partial_count; /* clipping, last launch: the partials of every launch */
};

#endif

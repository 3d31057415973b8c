/* The device side of src/optim/optim_cuda.c: the multi-tensor update of every parameter of an
 * optimizer, the clipping pass before it, and the two writes of the device-side header. Every
 * launch's parameter is struct nn__optim_launch (optim_formula.h, shared with the C side); each
 * block strides over every tensor of its launch in turn, so a launch of many small tensors and
 * one of a few large ones take the same path. Built by nvcc with --fmad=false into a fat binary
 * that the library embeds (nn_cuda_images, src/meson.build): no CUDA C++ runtime is linked.
 *
 * Why the step counter is advanced by the update's last block: every block of the step reads the
 * count (SGD's first step, Adam's bias corrections) and exactly one write must follow all the
 * reads, in the same launch, so that a step captured into a CUDA graph advances the count at
 * every replay. Each block's thread 0 reads the count before it fences and counts itself done
 * (done_update); the block that counts last has seen every other block's read, adds one to the
 * count and puts done_update back to 0 for the next step. The clipping pass finishes the same way
 * (done_norm): its last block sums the partials in a fixed order and writes the coefficient. */
#include "core/block_sum.cuh"
#include "optim/optim_formula.h"

static_assert(sizeof(nn__optim_launch) <= 4096, "a launch's parameter fits in 4 KiB");

/* 1 in every thread of the block that finishes last (counter back to 0 then), else 0. After the
 * block's own writes; __threadfence() makes them visible before the count. */
__device__ static int finished_last(unsigned *done)
{
    __shared__ int last;
    __syncthreads();
    if (threadIdx.x == 0) {
        __threadfence();
        last = atomicAdd(done, 1u) == gridDim.x - 1;
        if (last) *done = 0;
    }
    __syncthreads();
    if (last) __threadfence();
    return last;
}

template <typename T>
__device__ static double sum_squares(const nn__optim_launch &a, unsigned long long first,
                                     unsigned long long stride)
{
    double s = 0;
    for (unsigned i = 0; i < a.count; i++) {
        const T *g = (const T *)a.g[i];
        for (unsigned long long k = first; k < a.n[i]; k += stride) {
            double x = (double)g[k];
            s += x * x;
        }
    }
    return s;
}

extern "C" __global__ void nn__optim_norm(nn__optim_launch a)
{
    unsigned long long first = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
    unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
    double s =
        a.dtype == 1 ? sum_squares<float>(a, first, stride) : sum_squares<double>(a, first, stride);
    s = nn__block_sum<NN__OPTIM_THREADS>(s);
    volatile double *partial = (volatile double *)a.partial;
    if (threadIdx.x == 0) partial[a.partial_base + blockIdx.x] = s;
    if (!a.last) return;
    nn__optim_dev *d = (nn__optim_dev *)a.dev;
    if (!finished_last(&d->done_norm)) return;
    double t = 0;
    for (unsigned k = threadIdx.x; k < a.partial_count; k += blockDim.x)
        t += partial[k];
    t = nn__block_sum<NN__OPTIM_THREADS>(t);
    if (threadIdx.x == 0) d->coef = nn__optim_clip_coef(d->h.max_grad_norm, t);
}

/* What every thread of an update block reads once. */
struct step_scalars {
    nn__optim_hyper h;
    long long step;
    double coef, step_size, bc2_sqrt;
};

template <typename T>
__device__ static void update(const nn__optim_launch &a, const step_scalars &s,
                              unsigned long long first, unsigned long long stride)
{
    int sgd = a.kind == NN__OPTIM_SGD, decoupled = a.kind == NN__OPTIM_ADAMW;
    for (unsigned i = 0; i < a.count; i++) {
        T *p = (T *)a.p[i], *s1 = (T *)a.s1[i], *s2 = (T *)a.s2[i];
        const T *g = (const T *)a.g[i];
        for (unsigned long long k = first; k < a.n[i]; k += stride) {
            double gk = (double)g[k];
            if (a.clip) gk = nn__optim_clipped(gk, s.coef);
            if (sgd) {
                double b = s1 && s.step > 0 ? (double)s1[k] : 0;
                p[k] = (T)nn__optim_sgd(&s.h, a.nesterov, s.step == 0, (double)p[k], gk, &b);
                if (s1) s1[k] = (T)b;
            } else {
                double m = (double)s1[k], v = (double)s2[k];
                p[k] = (T)nn__optim_adam(&s.h, decoupled, s.step_size, s.bc2_sqrt, (double)p[k], gk,
                                         &m, &v);
                s1[k] = (T)m;
                s2[k] = (T)v;
            }
        }
    }
}

extern "C" __global__ void nn__optim_update(nn__optim_launch a)
{
    nn__optim_dev *d = (nn__optim_dev *)a.dev;
    __shared__ step_scalars s;
    if (threadIdx.x == 0) {
        volatile nn__optim_dev *vd = d;
        s.h.lr = vd->h.lr;
        s.h.momentum = vd->h.momentum;
        s.h.dampening = vd->h.dampening;
        s.h.weight_decay = vd->h.weight_decay;
        s.h.beta1 = vd->h.beta1;
        s.h.beta2 = vd->h.beta2;
        s.h.eps = vd->h.eps;
        s.h.max_grad_norm = vd->h.max_grad_norm;
        s.step = vd->step;
        s.coef = a.clip ? vd->coef : 1.0;
        s.step_size = 0;
        s.bc2_sqrt = 1;
        if (a.kind != NN__OPTIM_SGD)
            nn__optim_adam_scalars(&s.h, (double)(s.step + 1), &s.step_size, &s.bc2_sqrt);
    }
    __syncthreads();
    unsigned long long first = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
    unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
    if (a.dtype == 1)
        update<float>(a, s, first, stride);
    else
        update<double>(a, s, first, stride);
    if (!a.last) return;
    if (finished_last(&d->done_update) && threadIdx.x == 0) d->step = s.step + 1;
}

/* nn_optim_create() (h, step 0) and nn_optim_set_lr() (lr only): by-value parameters, so that no
 * host memory is read after the launch. One thread. */
extern "C" __global__ void nn__optim_init(unsigned long long dev, nn__optim_hyper h)
{
    nn__optim_dev *d = (nn__optim_dev *)dev;
    d->h = h;
    d->step = 0;
    d->coef = 1;
    d->done_norm = 0;
    d->done_update = 0;
}

extern "C" __global__ void nn__optim_set_lr(unsigned long long dev, double lr)
{
    ((nn__optim_dev *)dev)->h.lr = lr;
}

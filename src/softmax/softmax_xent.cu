/* The device side of the cross-entropy on cuDNN (softmax_cudnn.c), over the log-softmax L that
 * cuDNN computed, n x c x s in x's dtype:
 *   nn__xent_pick: the targets as int64 into the saved copy, and loss[i s + j] = -L[(i c + t) s + j]
 *   nn__xent_grad: dx[(i c + k) s + j] = (exp(L) - (k == t)) dloss[i s + j] (+ dx with acc)
 * with t = targets[i s + j]. A target outside [0, c) puts NaN in its loss and in every gradient
 * element of its (i, j) (neither a graph launch nor a call that leaves the targets on the device
 * has a status to report it with). Arithmetic in double for f64, in float otherwise. The
 * parameter is struct nn__xent_args of softmax_cudnn.c byte for byte. */
#include <cuda_bf16.h>
#include <cuda_fp16.h>

struct nn__xent_args {
    unsigned long long logp, targets, saved, loss, dloss, dx;
    long long n, c, s;
    int dtype; /* nn_dtype: 1 f32, 2 f64, 3 f16, 4 bf16 */
    int wide;  /* targets: 1 int64, 0 int32 (saved is always int64) */
    int acc;   /* nn__xent_grad: add to dx */
    int unused;
};
static_assert(sizeof(nn__xent_args) == 88, "the kernels' parameter is struct nn__xent_args");

__device__ static double load(unsigned long long p, int dtype, long long i)
{
    switch (dtype) {
    case 1: return (double)((const float *)p)[i];
    case 2: return ((const double *)p)[i];
    case 3: return (double)__half2float(((const __half *)p)[i]);
    default: return (double)__bfloat162float(((const __nv_bfloat16 *)p)[i]);
    }
}

__device__ static void store(unsigned long long p, int dtype, long long i, double v)
{
    switch (dtype) {
    case 1: ((float *)p)[i] = (float)v; break;
    case 2: ((double *)p)[i] = v; break;
    case 3: ((__half *)p)[i] = __float2half((float)v); break;
    default: ((__nv_bfloat16 *)p)[i] = __float2bfloat16((float)v); break;
    }
}

extern "C" __global__ void nn__xent_pick(nn__xent_args a)
{
    long long total = a.n * a.s, step = (long long)gridDim.x * blockDim.x;
    for (long long e = (long long)blockIdx.x * blockDim.x + threadIdx.x; e < total; e += step) {
        long long t = a.wide ? ((const long long *)a.targets)[e] : ((const int *)a.targets)[e];
        ((long long *)a.saved)[e] = t;
        long long i = e / a.s, j = e % a.s;
        double v = t < 0 || t >= a.c ? __longlong_as_double(0x7ff8000000000000ll)
                                     : -load(a.logp, a.dtype, (i * a.c + t) * a.s + j);
        store(a.loss, a.dtype, e, v);
    }
}

extern "C" __global__ void nn__xent_grad(nn__xent_args a)
{
    long long total = a.n * a.c * a.s, step = (long long)gridDim.x * blockDim.x;
    for (long long e = (long long)blockIdx.x * blockDim.x + threadIdx.x; e < total; e += step) {
        long long j = e % a.s, k = (e / a.s) % a.c, at = e / (a.s * a.c) * a.s + j;
        long long t = ((const long long *)a.saved)[at];
        double v;
        if (t < 0 || t >= a.c) {
            v = __longlong_as_double(0x7ff8000000000000ll);
        } else if (a.dtype == 2) {
            v = (exp(load(a.logp, 2, e)) - (double)(t == k)) * load(a.dloss, 2, at);
        } else {
            float p = expf((float)load(a.logp, a.dtype, e));
            v = (double)((p - (float)(t == k)) * (float)load(a.dloss, a.dtype, at));
        }
        if (a.acc) v += load(a.dx, a.dtype, e);
        store(a.dx, a.dtype, e, v);
    }
}

/* The device side of src/conv/conv_bias_cuda.c: the convolution's bias gradient. Channel k's sum
 * runs over the n * s positions of dy in fixed chunks: block (b, k) sums chunk b in double, in a
 * fixed order, so results do not depend on timing. With one chunk per channel that block writes
 * db[k]; with more, each writes its partial and nn__bias_grad_finish adds a channel's partials in
 * chunk order. */
#include "conv/conv_bias.h"
#include "core/block_sum.cuh"

template <typename T> __device__ static double chunk_sum(const nn__bias_grad &a, long long k)
{
    const T *dy = (const T *)a.dy + k * a.sk;
    long long first = (long long)blockIdx.x * a.chunk, end = first + a.chunk, m = a.n * a.s;
    if (end > m) end = m;
    double s = 0;
    for (long long i = first + threadIdx.x; i < end; i += NN__BIAS_THREADS) {
        long long n = i / a.s;
        s += (double)dy[n * a.sn + (i - n * a.s)];
    }
    return nn__block_sum<NN__BIAS_THREADS>(s);
}

template <typename T> __device__ static void store(const nn__bias_grad &a, long long k, double s)
{
    T *db = (T *)a.db;
    double v = a.alpha * s;
    if (a.beta != 0) v += a.beta * (double)db[k];
    db[k] = (T)v;
}

extern "C" __global__ void __launch_bounds__(NN__BIAS_THREADS) nn__bias_grad_sum(nn__bias_grad a)
{
    long long k = blockIdx.y;
    double s = a.dtype == 1 ? chunk_sum<float>(a, k) : chunk_sum<double>(a, k);
    if (threadIdx.x != 0) return;
    if (a.parts > 1)
        ((double *)a.partial)[k * a.parts + blockIdx.x] = s;
    else if (a.dtype == 1)
        store<float>(a, k, s);
    else
        store<double>(a, k, s);
}

extern "C" __global__ void __launch_bounds__(NN__BIAS_THREADS) nn__bias_grad_finish(nn__bias_grad a)
{
    long long k = (long long)blockIdx.x * NN__BIAS_THREADS + threadIdx.x;
    if (k >= a.k) return;
    const double *p = (const double *)a.partial + k * a.parts;
    double s = 0;
    for (int b = 0; b < a.parts; b++)
        s += p[b];
    if (a.dtype == 1)
        store<float>(a, k, s);
    else
        store<double>(a, k, s);
}

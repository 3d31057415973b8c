/* The device side of src/layernorm/layernorm_cuda.c. The forward and the data gradient give one
 * block to a row at a time: its sums are taken in double by nn__block_sum, a fixed-order tree.
 * The gamma and beta gradients are sums over rows: thread j of a block sums column j over a
 * fixed chunk of rows, in row order; with more than one chunk each writes a partial and
 * nn__layernorm_param_finish adds a column's partials in chunk order. No atomics: every result is
 * the same bits at every run. Built into a fat binary the library embeds (nn_cuda_images). */
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "core/block_sum.cuh"
#include "layernorm/layernorm_kernel.h"

__device__ static double load(unsigned long long p, int dtype, long long i)
{
    switch (dtype) {
    case 1: return (double)((const float *)p)[i];
    case 2: return ((const double *)p)[i];
    case 3: return (double)__half2float(((const __half *)p)[i]);
    default: return (double)__bfloat162float(((const __nv_bfloat16 *)p)[i]);
    }
}

__device__ static void store(unsigned long long p, int dtype, long long i, double v, int acc)
{
    if (acc) v += load(p, dtype, i);
    switch (dtype) {
    case 1: ((float *)p)[i] = (float)v; break;
    case 2: ((double *)p)[i] = v; break;
    case 3: ((__half *)p)[i] = __double2half(v); break;
    default: ((__nv_bfloat16 *)p)[i] = __double2bfloat16(v); break;
    }
}

/* Row r's mean and rstd: the mean first, then the biased variance from it (two passes). */
__device__ static void row_stats(const nn__layernorm_args &a, long long r, double *mean,
                                 double *rstd)
{
    double s = 0;
    for (long long i = threadIdx.x; i < a.d; i += NN__LAYERNORM_THREADS)
        s += load(a.x, a.dtype, r * a.d + i);
    double m = nn__block_sum<NN__LAYERNORM_THREADS>(s) / (double)a.d;
    double v = 0;
    for (long long i = threadIdx.x; i < a.d; i += NN__LAYERNORM_THREADS) {
        double c = load(a.x, a.dtype, r * a.d + i) - m;
        v += c * c;
    }
    v = nn__block_sum<NN__LAYERNORM_THREADS>(v) / (double)a.d;
    *mean = m;
    *rstd = 1 / sqrt(v + a.eps);
}

extern "C" __global__ void __launch_bounds__(NN__LAYERNORM_THREADS)
    nn__layernorm_forward(nn__layernorm_args a)
{
    for (long long r = blockIdx.x; r < a.m; r += gridDim.x) {
        double mean, rstd;
        row_stats(a, r, &mean, &rstd);
        for (long long i = threadIdx.x; i < a.d; i += NN__LAYERNORM_THREADS) {
            double v = (load(a.x, a.dtype, r * a.d + i) - mean) * rstd;
            if (a.gamma) v *= load(a.gamma, a.dtype, i);
            if (a.beta) v += load(a.beta, a.dtype, i);
            store(a.y, a.dtype, r * a.d + i, v, 0);
        }
        if (a.stats && threadIdx.x == 0) {
            ((double *)a.stats)[2 * r] = mean;
            ((double *)a.stats)[2 * r + 1] = rstd;
        }
    }
}

/* dx = rstd * (g - sum g / d - xhat * sum g xhat / d), g = dy * gamma. */
extern "C" __global__ void __launch_bounds__(NN__LAYERNORM_THREADS)
    nn__layernorm_backward_data(nn__layernorm_args a)
{
    const double *stats = (const double *)a.stats;
    for (long long r = blockIdx.x; r < a.m; r += gridDim.x) {
        double mean = stats[2 * r], rstd = stats[2 * r + 1], sg = 0, sgx = 0;
        for (long long i = threadIdx.x; i < a.d; i += NN__LAYERNORM_THREADS) {
            double g = load(a.dy, a.dtype, r * a.d + i);
            if (a.gamma) g *= load(a.gamma, a.dtype, i);
            sg += g;
            sgx += g * (load(a.x, a.dtype, r * a.d + i) - mean) * rstd;
        }
        sg = nn__block_sum<NN__LAYERNORM_THREADS>(sg) / (double)a.d;
        sgx = nn__block_sum<NN__LAYERNORM_THREADS>(sgx) / (double)a.d;
        for (long long i = threadIdx.x; i < a.d; i += NN__LAYERNORM_THREADS) {
            double g = load(a.dy, a.dtype, r * a.d + i);
            if (a.gamma) g *= load(a.gamma, a.dtype, i);
            double xhat = (load(a.x, a.dtype, r * a.d + i) - mean) * rstd;
            store(a.dx, a.dtype, r * a.d + i, rstd * (g - sg - xhat * sgx), a.acc_dx);
        }
    }
}

/* Block (column tile, part): thread j sums dy * xhat and dy of its column over the part's rows. */
extern "C" __global__ void __launch_bounds__(NN__LAYERNORM_THREADS)
    nn__layernorm_backward_param(nn__layernorm_args a)
{
    long long j = (long long)blockIdx.x * NN__LAYERNORM_THREADS + threadIdx.x;
    if (j >= a.d) return;
    const double *stats = (const double *)a.stats;
    long long first = (long long)blockIdx.y * a.chunk, end = first + a.chunk;
    if (end > a.m) end = a.m;
    double sg = 0, sb = 0;
    for (long long r = first; r < end; r++) {
        double dy = load(a.dy, a.dtype, r * a.d + j);
        sg += dy * (load(a.x, a.dtype, r * a.d + j) - stats[2 * r]) * stats[2 * r + 1];
        sb += dy;
    }
    if (a.parts > 1) {
        double *p = (double *)a.partial + 2 * ((long long)blockIdx.y * a.d + j);
        p[0] = sg;
        p[1] = sb;
        return;
    }
    if (a.dgamma) store(a.dgamma, a.dtype, j, sg, a.acc_dgamma);
    if (a.dbeta) store(a.dbeta, a.dtype, j, sb, a.acc_dbeta);
}

/* Column j's partials, added in part order. */
extern "C" __global__ void __launch_bounds__(NN__LAYERNORM_THREADS)
    nn__layernorm_param_finish(nn__layernorm_args a)
{
    long long j = (long long)blockIdx.x * NN__LAYERNORM_THREADS + threadIdx.x;
    if (j >= a.d) return;
    double sg = 0, sb = 0;
    for (int b = 0; b < a.parts; b++) {
        const double *p = (const double *)a.partial + 2 * ((long long)b * a.d + j);
        sg += p[0];
        sb += p[1];
    }
    if (a.dgamma) store(a.dgamma, a.dtype, j, sg, a.acc_dgamma);
    if (a.dbeta) store(a.dbeta, a.dtype, j, sb, a.acc_dbeta);
}

/* nnprim's kernels' block reduction (CUDA C++ only): the sum of v over the THREADS threads of a
 * block (blockDim.x == THREADS, a power of two), by a tree over shared memory in a fixed order,
 * so that a sum gives the same bits at every run. Every thread gets the sum; the shared array is
 * free again when it returns. */
#ifndef NN_CORE_BLOCK_SUM_CUH
#define NN_CORE_BLOCK_SUM_CUH

template <unsigned THREADS> __device__ static double nn__block_sum(double v)
{
    __shared__ double part[THREADS];
    part[threadIdx.x] = v;
    __syncthreads();
    for (unsigned half = THREADS / 2; half > 0; half /= 2) {
        if (threadIdx.x < half) part[threadIdx.x] += part[threadIdx.x + half];
        __syncthreads();
    }
    double s = part[0];
    __syncthreads();
    return s;
}

#endif

/* The bias gradient's launch parameter, shared by the kernels (conv_bias.cu, CUDA C++) and their
 * launcher (conv_bias_cuda.c): db[k] = alpha * sum over n and the spatial positions of dy[n][k][s]
 * (+ beta * db[k] unless beta is 0), for a dy whose spatial positions are one stride-1 run per
 * (n, k) (NCHW and its strided views). */
#ifndef NN_CONV_CONV_BIAS_H
#define NN_CONV_CONV_BIAS_H

/* Threads of a block, and the elements a block sums at least (one pass of 16 per thread). */
#define NN__BIAS_THREADS   256
#define NN__BIAS_PER_BLOCK (NN__BIAS_THREADS * 16)

struct nn__bias_grad {
    unsigned long long dy, db, partial; /* device addresses; partial: k * parts doubles */
    long long n, k, s;                  /* batch, channels, spatial positions per (n, k) */
    long long sn, sk;                   /* dy's strides of n and k, in elements */
    long long chunk;                    /* (n, s) positions per block of a channel */
    int dtype;                          /* nn_dtype: 1 f32, 2 f64 */
    int parts;                          /* blocks per channel; 1: no partials, db written */
    double alpha, beta;
};

#endif

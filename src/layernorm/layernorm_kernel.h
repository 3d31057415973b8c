/* The layer-norm kernels' launch parameter, shared by the kernels (layernorm.cu, CUDA C++) and
 * their launcher (layernorm_cuda.c), so that both read one definition. */
#ifndef NN_LAYERNORM_LAYERNORM_KERNEL_H
#define NN_LAYERNORM_LAYERNORM_KERNEL_H

/* Threads of a block: a row's sums are a block's (nn__block_sum), the sums over rows one thread's
 * per column. */
#define NN__LAYERNORM_THREADS       256
/* Rows a block of the gamma/beta gradient sums at least before the rows are split over blocks. */
#define NN__LAYERNORM_ROWS_PER_PART 64

struct nn__layernorm_args {
    /* device addresses, 0 for a tensor not given */
    unsigned long long x, gamma, beta, y, stats, dy, dx, dgamma, dbeta, partial;
    long long m, d;  /* rows, elements per row */
    long long chunk; /* rows per part of the gamma/beta gradient */
    double eps;
    int dtype; /* nn_dtype: 1 f32, 2 f64, 3 f16, 4 bf16 */
    int parts; /* blocks over the rows of one column; 1: no partials, written directly */
    int acc_dx, acc_dgamma, acc_dbeta;
    int pad;
};

#endif

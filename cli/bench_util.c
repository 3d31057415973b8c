#include <stdlib.h>
#include <time.h>

#include "nn_config.h"
#include "cli/bench_util.h"

#if NN_HAVE_CUDA
#include "core/cuda_load.h"
#endif

double nn_cli_now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec * 1e-3;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double nn_cli_median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

double nn_cli_host_median_us(int reps, int (*fn)(void *), void *arg, int (*sync)(void *),
                             void *sync_arg)
{
    int batches = reps > NN_CLI_HOST_BATCH ? reps / NN_CLI_HOST_BATCH : 1;
    double *t = malloc((size_t)batches * sizeof *t);
    if (!t) return -1;
    int ok = sync(sync_arg) == 0;
    for (int b = 0; b < batches && ok; b++) {
        double t0 = nn_cli_now_us();
        for (int i = 0; i < NN_CLI_HOST_BATCH && ok; i++)
            ok = fn(arg) == 0;
        t[b] = (nn_cli_now_us() - t0) / NN_CLI_HOST_BATCH;
        ok = ok && sync(sync_arg) == 0;
    }
    double m = ok ? nn_cli_median(t, batches) : -1;
    free(t);
    return m;
}

double nn_cli_gpu_median_us(void *stream, int reps, int (*fn)(void *), void *arg)
{
#if NN_HAVE_CUDA
    if (reps < 1) return -1;
    cudaEvent_t *ev = calloc((size_t)reps * 2, sizeof *ev);
    double *t = malloc((size_t)reps * sizeof *t);
    int made = 0, ok = ev && t;
    for (; ok && made < reps * 2; made++)
        ok = cudaEventCreate(&ev[made]) == cudaSuccess;
    if (!ok) made--; /* the failed one was not created */
    cudaStream_t s = (cudaStream_t)stream;
    for (int i = 0; i < reps && ok; i++)
        ok = cudaEventRecord(ev[2 * i], s) == cudaSuccess && fn(arg) == 0 &&
             cudaEventRecord(ev[2 * i + 1], s) == cudaSuccess;
    ok = ok && cudaStreamSynchronize(s) == cudaSuccess;
    for (int i = 0; i < reps && ok; i++) {
        float ms = 0;
        ok = cudaEventElapsedTime(&ms, ev[2 * i], ev[2 * i + 1]) == cudaSuccess;
        t[i] = (double)ms * 1e3;
    }
    double m = ok ? nn_cli_median(t, reps) : -1;
    for (int i = 0; i < made; i++)
        cudaEventDestroy(ev[i]);
    free(ev);
    free(t);
    return m;
#else
    (void)stream;
    (void)reps;
    (void)fn;
    (void)arg;
    return -1;
#endif
}

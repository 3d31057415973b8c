#include <stdatomic.h>
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

void nn_cli_take_turns(int nsides, int reps, int *ok,
                       int (*turn)(void *arg, int side, int round, int share), void *arg)
{
    int rounds = reps < NN_CLI_ROUNDS ? reps : NN_CLI_ROUNDS;
    for (int r = 0; r < rounds; r++) {
        int share = reps / rounds + (r < reps % rounds);
        for (int k = 0; k < nsides; k++) {
            int i = (r + k) % nsides;
            if (ok[i]) ok[i] = turn(arg, i, r, share) == 0;
        }
    }
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

#if NN_HAVE_CUDA
/* A hold on a stream: a host function that waits for its release (or its deadline). */
struct hold {
    atomic_int go, expired;
};

enum { HOLD_LIMIT_US = 2000000 };

static void CUDART_CB hold_fn(void *arg)
{
    struct hold *h = arg;
    double t0 = nn_cli_now_us();
    while (!atomic_load_explicit(&h->go, memory_order_acquire))
        if (nn_cli_now_us() - t0 > HOLD_LIMIT_US) {
            atomic_store(&h->expired, 1);
            return;
        }
}

int nn_cli_gpu_times_us(void *stream, int reps, int (*fn)(void *), void *arg, int hold, int *held,
                        double *out)
{
    cudaStream_t s = (cudaStream_t)stream;
    if (reps < 1) return -1;
    int chunk = NN_CLI_HELD_CHUNK, nhold = hold ? (reps + chunk - 1) / chunk : 0;
    cudaEvent_t *ev = calloc((size_t)reps * 2, sizeof *ev);
    struct hold *h = nhold ? calloc((size_t)nhold, sizeof *h) : NULL;
    int made = 0, queued = 0, ok = ev && (h || !nhold);
    for (; ok && made < reps * 2; made++)
        ok = cudaEventCreate(&ev[made]) == cudaSuccess;
    if (!ok && made) made--; /* the failed one was not created */
    for (int i = 0; i < reps && ok; i++) {
        if (nhold && i % chunk == 0) {
            ok = cudaLaunchHostFunc(s, hold_fn, &h[i / chunk]) == cudaSuccess;
            queued += ok;
        }
        ok = ok && cudaEventRecord(ev[2 * i], s) == cudaSuccess && fn(arg) == 0 &&
             cudaEventRecord(ev[2 * i + 1], s) == cudaSuccess;
        if (nhold && i % chunk == chunk - 1)
            atomic_store_explicit(&h[i / chunk].go, 1, memory_order_release);
    }
    for (int k = 0; k < queued; k++) /* the last chunk's, or every one after a failure */
        atomic_store_explicit(&h[k].go, 1, memory_order_release);
    int synced = cudaStreamSynchronize(s) == cudaSuccess;
    ok = ok && synced;
    for (int i = 0; i < reps && ok; i++) {
        float ms = 0;
        ok = cudaEventElapsedTime(&ms, ev[2 * i], ev[2 * i + 1]) == cudaSuccess;
        out[i] = (double)ms * 1e3;
    }
    for (int k = 0; held && k < queued; k++)
        if (atomic_load(&h[k].expired)) *held = 0;
    for (int i = 0; i < made; i++)
        cudaEventDestroy(ev[i]);
    free(ev);
    if (synced) free(h); /* else a hold may not have run yet: left to the process's end */
    return ok ? 0 : -1;
}
#else
int nn_cli_gpu_times_us(void *stream, int reps, int (*fn)(void *), void *arg, int hold, int *held,
                        double *out)
{
    (void)stream, (void)reps, (void)fn, (void)arg, (void)hold, (void)out;
    if (held) *held = 0;
    return -1;
}
#endif

double nn_cli_gpu_median_us(void *stream, int reps, int (*fn)(void *), void *arg)
{
    double *t = reps > 0 ? malloc((size_t)reps * sizeof *t) : NULL;
    double m = t && nn_cli_gpu_times_us(stream, reps, fn, arg, 0, NULL, t) == 0
                   ? nn_cli_median(t, reps)
                   : -1;
    free(t);
    return m;
}

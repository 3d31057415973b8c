/* Host-allocation patterns through nn__host_alloc/nn__host_free, for tools/bench-host-alloc.sh,
 * which builds this file and src/core/alloc.c into one shared library per allocator (as inside
 * libnnprim.so, where jemalloc's TLS model matters) and a driver calling nn__bench_host_alloc. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "core/alloc.h"

double nn__bench_host_alloc(int pattern, int threads);

/* The calling thread's CPU time: on a shared, loaded machine wall time mostly measures the
 * scheduler. */
static double now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return t.tv_sec * 1e9 + t.tv_nsec;
}

/* ns per allocate+free pair. Patterns: 0-2 a pair at a time of 64 B, 4 KiB, 256 KiB;
 * 3: 1000 live allocations of 16 B to 8 KiB (seeded), freed in another order. */
static double run(int pattern)
{
    static const size_t sizes[] = {64, 4096, 256 << 10};
    if (pattern < 3) {
        long n = pattern == 2 ? 100000 : 1000000;
        double t0 = now_ns();
        for (long i = 0; i < n; i++) {
            void *p = nn__host_alloc(sizes[pattern]);
            ((volatile char *)p)[0] = 1;
            nn__host_free(p);
        }
        return (now_ns() - t0) / n;
    }
    enum { LIVE = 1000, ROUNDS = 500 };
    static _Thread_local void *live[LIVE];
    uint64_t s = 42;
    double t0 = now_ns();
    for (int r = 0; r < ROUNDS; r++) {
        for (int i = 0; i < LIVE; i++) {
            s ^= s << 13, s ^= s >> 7, s ^= s << 17;
            live[i] = nn__host_alloc(16 + s % 8177);
            ((volatile char *)live[i])[0] = 1;
        }
        for (int i = 0; i < LIVE; i++)
            nn__host_free(live[(i * 7919) % LIVE]);
    }
    return (now_ns() - t0) / ((double)LIVE * ROUNDS);
}

struct job {
    int pattern;
    double ns;
};

static void *thread_main(void *arg)
{
    struct job *j = arg;
    j->ns = run(j->pattern);
    return NULL;
}

/* The mean over threads of each one's ns per pair, all running at once. */
double nn__bench_host_alloc(int pattern, int threads)
{
    pthread_t t[16];
    struct job jobs[16];
    if (threads > 16) threads = 16;
    for (int i = 0; i < threads; i++) {
        jobs[i].pattern = pattern;
        pthread_create(&t[i], NULL, thread_main, &jobs[i]);
    }
    double sum = 0;
    for (int i = 0; i < threads; i++) {
        pthread_join(t[i], NULL);
        sum += jobs[i].ns;
    }
    return sum / threads;
}

#ifdef NN_BENCH_DRIVER
static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    static const char *names[] = {"64 B pair", "4 KiB pair", "256 KiB pair", "1000 live, mixed"};
    const char *label = argc > 1 ? argv[1] : "";
    for (int threads = 1; threads <= 2; threads *= 2)
        for (int p = 0; p < 4; p++) {
            double r[5];
            for (int k = 0; k < 5; k++)
                r[k] = nn__bench_host_alloc(p, threads);
            qsort(r, 5, sizeof r[0], cmp);
            printf("%-28s %-18s %d thread%s  %7.1f ns\n", label, names[p], threads,
                   threads > 1 ? "s" : " ", r[2]);
        }
    return 0;
}
#endif

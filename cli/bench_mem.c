/* nnprim bench mem: the device memory pool against the CUDA allocators.
 *
 *   nnprim bench mem [--device N | --host] [--seed S] [--allocs N] [--max-usage BYTES]
 *                    [--replay FILE] [--save-trace FILE]
 *
 * 1. alloc+free pair latency at 256 B, 64 KiB, 1 MiB, 64 MiB: median microseconds per pair for
 *    nnprim, cudaMalloc/cudaFree and cudaMallocAsync/cudaFreeAsync, in the same run.
 * 2. 1, 4 and 16 threads, each on its own stream: aggregate pairs per second.
 * 3. An RMM-style random trace (N allocations, 73% allocate, sizes up to 64 MiB, seeded) and a
 *    replayed training-step pattern: peak reserved / peak in use.
 * Without a GPU (or with --host) the nnprim rows run on the host-memory pool and the CUDA rows
 * are marked as needing a GPU. Uses only the public nn_mem_* API and the CUDA runtime. */
#include <limits.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/args.h"
#include "cli/bench_util.h"
#include "cli/cli.h"
#include "nn_config.h"
#include "nnprim/nnprim.h"

#if NN_HAVE_CUDA
#include "core/cuda_load.h"
#endif

#define KiB ((size_t)1 << 10)
#define MiB ((size_t)1 << 20)
#define GiB ((size_t)1 << 30)

static uint64_t rng(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

static int fail(const char *what)
{
    fprintf(stderr, "nnprim bench mem: %s: %s (%s)\n", what, nn_last_error()->message,
            nn_status_name(nn_last_error()->status));
    return 1;
}

/* The allocators under test behind one interface. */
enum kind { K_NNPRIM, K_MALLOC, K_ASYNC };
static const char *kind_name[] = {"nnprim", "cudaMalloc", "cudaMallocAsync"};

struct alloc_ctx {
    enum kind kind;
    int device;
    nn_mem_stream *h;
    void *stream;
};

static int open_ctx(struct alloc_ctx *c, enum kind kind, int device)
{
    memset(c, 0, sizeof *c);
    c->kind = kind;
    c->device = device;
#if NN_HAVE_CUDA
    if (device != NN_MEM_HOST) {
        cudaStream_t s;
        if (cudaSetDevice(device) != cudaSuccess ||
            cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) != cudaSuccess) {
            fprintf(stderr, "nnprim bench mem: cannot create a stream on device %d\n", device);
            return 1;
        }
        c->stream = s;
    }
#endif
    if (kind == K_NNPRIM && nn_mem_stream_open(device, c->stream, &c->h) != NN_OK)
        return fail("nn_mem_stream_open");
    return 0;
}

static void close_ctx(struct alloc_ctx *c)
{
    if (c->h) nn_mem_stream_close(c->h);
#if NN_HAVE_CUDA
    if (c->stream) {
        cudaStreamSynchronize((cudaStream_t)c->stream);
        cudaStreamDestroy((cudaStream_t)c->stream);
    }
#endif
}

static int do_alloc(struct alloc_ctx *c, size_t bytes, void **p)
{
    switch (c->kind) {
    case K_NNPRIM: return nn_mem_stream_alloc(c->h, bytes, p) != NN_OK;
#if NN_HAVE_CUDA
    case K_MALLOC: return cudaMalloc(p, bytes) != cudaSuccess;
    case K_ASYNC: return cudaMallocAsync(p, bytes, (cudaStream_t)c->stream) != cudaSuccess;
#else
    default: break;
#endif
    }
    return 1;
}

static int do_free(struct alloc_ctx *c, void *p)
{
    switch (c->kind) {
    case K_NNPRIM: return nn_mem_stream_free(c->h, p) != NN_OK;
#if NN_HAVE_CUDA
    case K_MALLOC: return cudaFree(p) != cudaSuccess;
    case K_ASYNC: return cudaFreeAsync(p, (cudaStream_t)c->stream) != cudaSuccess;
#else
    default: break;
#endif
    }
    return 1;
}

/* Median microseconds per pair over batches of pairs (the first pair warms up). */
static int pair_latency(enum kind kind, int device, size_t bytes, double *us)
{
    struct alloc_ctx c;
    if (open_ctx(&c, kind, device)) return 1;
    int batch = kind == K_MALLOC ? 1 : 100;
    int batches = kind == K_MALLOC ? (bytes >= 64 * MiB ? 20 : 100) : 200;
    double *t = calloc((size_t)batches, sizeof *t);
    int err = !t;
    void *p;
    if (!err) err = do_alloc(&c, bytes, &p) || do_free(&c, p);
    for (int b = 0; b < batches && !err; b++) {
        double t0 = nn_cli_now_us();
        for (int i = 0; i < batch && !err; i++)
            err = do_alloc(&c, bytes, &p) || do_free(&c, p);
        t[b] = (nn_cli_now_us() - t0) / batch;
    }
    if (!err) *us = nn_cli_median(t, batches);
    free(t);
    close_ctx(&c);
    return err;
}

/* ---- threads ---- */

struct thread_arg {
    _Alignas(64) struct alloc_ctx c;
    pthread_barrier_t *start;
    long pairs;
    int err;
};

static void *thread_pairs(void *arg)
{
    struct thread_arg *a = arg;
#if NN_HAVE_CUDA
    if (a->c.device != NN_MEM_HOST) cudaSetDevice(a->c.device);
#endif
    static const size_t sizes[4] = {256, 4 * KiB, 64 * KiB, 512 * KiB};
    void *p[4];
    /* Work on a private copy: the thread_arg array is shared, and writing into it on every pair
     * bounced its cache lines between the threads (false sharing), which the first version of
     * this bench measured instead of the pool. */
    struct alloc_ctx c = a->c;
    int err = 0;
    pthread_barrier_wait(a->start);
    for (long i = 0; i < a->pairs && !err; i++) {
        size_t k = (size_t)i & 3;
        err = do_alloc(&c, sizes[k], &p[k]) || do_free(&c, p[k]);
    }
    a->err = err;
    return NULL;
}

/* Aggregate pairs per second of n threads, each on its own stream. */
static int thread_rate(enum kind kind, int device, int n, long pairs, double *rate)
{
    struct thread_arg a[16];
    pthread_t th[16];
    pthread_barrier_t start;
    pthread_barrier_init(&start, NULL, (unsigned)n + 1);
    int err = 0, opened = 0;
    for (; opened < n && !err; opened++) {
        a[opened] = (struct thread_arg){.start = &start, .pairs = pairs};
        err = open_ctx(&a[opened].c, kind, device);
    }
    if (err) opened--;
    if (err) {
        for (int i = 0; i < opened; i++)
            close_ctx(&a[i].c);
        pthread_barrier_destroy(&start);
        return 1;
    }
    for (int i = 0; i < n; i++)
        if (pthread_create(&th[i], NULL, thread_pairs, &a[i]) != 0) {
            /* Threads already started wait at the barrier for ever: give up on the run. */
            fprintf(stderr, "nnprim bench mem: cannot start %d threads\n", n);
            exit(1);
        }
    pthread_barrier_wait(&start);
    double t0 = nn_cli_now_us();
    for (int i = 0; i < n; i++)
        pthread_join(th[i], NULL);
    double dt = nn_cli_now_us() - t0;
    for (int i = 0; i < n; i++)
        err |= a[i].err;
    for (int i = 0; i < opened; i++)
        close_ctx(&a[i].c);
    pthread_barrier_destroy(&start);
    *rate = (double)n * (double)pairs / (dt * 1e-6);
    return err;
}

/* ---- traces ---- */

enum { OP_ALLOC = 1, OP_FREE = 2 };

struct op {
    int kind;
    uint64_t id; /* ties a free to its allocation */
    size_t bytes;
};

struct trace {
    struct op *ops;
    size_t n, cap;
};

static int trace_push(struct trace *t, int kind, uint64_t id, size_t bytes)
{
    if (t->n == t->cap) {
        size_t cap = t->cap ? t->cap * 2 : 1024;
        struct op *o = realloc(t->ops, cap * sizeof *o);
        if (!o) return 1;
        t->ops = o;
        t->cap = cap;
    }
    t->ops[t->n++] = (struct op){kind, id, bytes};
    return 0;
}

/* RMM's random-allocation pattern: each step allocates with probability 0.73 (uniform size in
 * [1, max_size]) or frees a random live allocation; an allocation that would pass max_usage
 * frees instead. Ends after allocs allocations, then frees what is left. */
static int random_trace(struct trace *t, uint64_t seed, size_t allocs, size_t max_size,
                        size_t max_usage)
{
    uint64_t *live = malloc(allocs * sizeof *live);
    size_t *live_bytes = malloc(allocs * sizeof *live_bytes);
    size_t n_live = 0, usage = 0, made = 0;
    int err = !live || !live_bytes;
    uint64_t s = seed ? seed : 1;
    while (!err && made < allocs) {
        int alloc = rng(&s) % 100 < 73;
        size_t bytes = (size_t)(rng(&s) % max_size) + 1;
        if (alloc && usage + bytes > max_usage) alloc = 0;
        if (alloc) {
            live[n_live] = made;
            live_bytes[n_live++] = bytes;
            usage += bytes;
            err = trace_push(t, OP_ALLOC, made++, bytes);
        } else if (n_live) {
            size_t k = (size_t)(rng(&s) % n_live);
            err = trace_push(t, OP_FREE, live[k], 0);
            usage -= live_bytes[k];
            live[k] = live[--n_live];
            live_bytes[k] = live_bytes[n_live];
        }
    }
    while (!err && n_live)
        err = trace_push(t, OP_FREE, live[--n_live], 0);
    free(live);
    free(live_bytes);
    return err;
}

/* One training step of a small CNN, as the ops would allocate: per layer the forward output and a
 * convolution workspace taken and given back, then backward in reverse, with the input gradient,
 * a workspace, and the saved activation and the output gradient released. */
static int step_pattern(int device, struct trace *from_log)
{
    /* Batch 32 in f32: input, then the outputs of the stages of a ResNet-like network. */
    static const size_t act[] = {32 * 3 * 224 * 224 * 4, 32 * 64 * 112 * 112 * 4,
                                 32 * 64 * 56 * 56 * 4,  32 * 128 * 28 * 28 * 4,
                                 32 * 256 * 14 * 14 * 4, 32 * 512 * 7 * 7 * 4,
                                 32 * 1000 * 4};
    enum { L = sizeof act / sizeof act[0] };
    struct alloc_ctx c;
    if (open_ctx(&c, K_NNPRIM, device)) return 1;
    if (nn_mem_log_enable(device, 1) != NN_OK) return fail("nn_mem_log_enable");
    void *a[L], *ws, *dy, *dx;
    int err = do_alloc(&c, act[0], &a[0]);
    for (int l = 1; l < L && !err; l++) {
        err = do_alloc(&c, act[l], &a[l]) || do_alloc(&c, act[l - 1] / 3 + 4096, &ws) ||
              do_free(&c, ws);
    }
    if (!err) err = do_alloc(&c, act[L - 1], &dy);
    for (int l = L - 1; l >= 1 && !err; l--) {
        err = do_alloc(&c, act[l - 1], &dx) || do_alloc(&c, act[l] / 2 + 8192, &ws) ||
              do_free(&c, ws) || do_free(&c, a[l]) || do_free(&c, dy);
        dy = dx;
    }
    if (!err) err = do_free(&c, dy) || do_free(&c, a[0]);
    nn_mem_log_enable(device, 0);
    close_ctx(&c);
    if (err) return fail("training step");
    /* The log, read back as a trace: allocations keyed by address while live. */
    nn_mem_event ev[256];
    size_t n;
    uintptr_t live_ptr[64];
    uint64_t live_id[64], next_id = 0;
    size_t n_live = 0;
    do {
        if (nn_mem_log_read(device, ev, 256, &n) != NN_OK) return fail("nn_mem_log_read");
        for (size_t i = 0; i < n && !err; i++) {
            if (ev[i].kind == NN_MEM_EVENT_ALLOC && n_live < 64) {
                live_ptr[n_live] = ev[i].ptr;
                live_id[n_live++] = next_id;
                err = trace_push(from_log, OP_ALLOC, next_id++, ev[i].bytes);
            } else if (ev[i].kind == NN_MEM_EVENT_FREE) {
                size_t k = 0;
                while (k < n_live && live_ptr[k] != ev[i].ptr)
                    k++;
                if (k == n_live) continue;
                err = trace_push(from_log, OP_FREE, live_id[k], 0);
                live_ptr[k] = live_ptr[--n_live];
                live_id[k] = live_id[n_live];
            }
        }
    } while (n == 256 && !err);
    return err;
}

static int load_trace(const char *path, struct trace *t)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "nnprim bench mem: cannot open %s\n", path);
        return 1;
    }
    char kind;
    unsigned long long id, bytes;
    int err = 0, line = 0;
    char buf[128];
    while (!err && fgets(buf, sizeof buf, f)) {
        line++;
        if (buf[0] == '#' || buf[0] == '\n') continue;
        if (sscanf(buf, "%c %llu %llu", &kind, &id, &bytes) >= 2 && (kind == 'a' || kind == 'f'))
            err = trace_push(t, kind == 'a' ? OP_ALLOC : OP_FREE, id, kind == 'a' ? bytes : 0);
        else {
            fprintf(stderr, "nnprim bench mem: %s:%d: expected 'a ID BYTES' or 'f ID'\n", path,
                    line);
            err = 1;
        }
    }
    fclose(f);
    return err;
}

static int save_trace(const char *path, const struct trace *t, const char *what)
{
    FILE *f = fopen(path, "w");
    if (!f) {
        fprintf(stderr, "nnprim bench mem: cannot write %s\n", path);
        return 1;
    }
    fprintf(f, "# nnprim memory trace: %s\n# a ID BYTES = allocate, f ID = free\n", what);
    for (size_t i = 0; i < t->n; i++)
        if (t->ops[i].kind == OP_ALLOC)
            fprintf(f, "a %llu %zu\n", (unsigned long long)t->ops[i].id, t->ops[i].bytes);
        else
            fprintf(f, "f %llu\n", (unsigned long long)t->ops[i].id);
    return fclose(f) != 0;
}

struct replay_result {
    size_t peak_reserved, peak_allocated, peak_requested;
    unsigned long long segments; /* taken from the driver during the replay */
    double seconds;
};

/* Replay a trace `times` times on one stream from a trimmed pool. */
static int replay(int device, const struct trace *t, int times, struct replay_result *r)
{
    uint64_t max_id = 0;
    for (size_t i = 0; i < t->n; i++)
        if (t->ops[i].id > max_id) max_id = t->ops[i].id;
    void **ptr = calloc(max_id + 1, sizeof *ptr);
    size_t *bytes = calloc(max_id + 1, sizeof *bytes);
    struct alloc_ctx c;
    if (!ptr || !bytes || open_ctx(&c, K_NNPRIM, device)) {
        free(ptr);
        free(bytes);
        return 1;
    }
    nn_mem_trim(device, NULL);
    nn_mem_reset_peak_stats(device);
    nn_mem_stats s0;
    if (nn_mem_get_stats(device, &s0) != NN_OK) memset(&s0, 0, sizeof s0);
    size_t live = 0, peak = 0;
    int err = 0;
    double t0 = nn_cli_now_us();
    for (int k = 0; k < times && !err; k++)
        for (size_t i = 0; i < t->n && !err; i++) {
            const struct op *o = &t->ops[i];
            if (o->kind == OP_ALLOC) {
                err = do_alloc(&c, o->bytes, &ptr[o->id]);
                bytes[o->id] = o->bytes;
                live += o->bytes;
                if (live > peak) peak = live;
            } else if (ptr[o->id]) {
                err = do_free(&c, ptr[o->id]);
                ptr[o->id] = NULL;
                live -= bytes[o->id];
            }
        }
    r->seconds = (nn_cli_now_us() - t0) * 1e-6;
    for (uint64_t i = 0; i <= max_id; i++)
        if (ptr[i]) do_free(&c, ptr[i]);
    nn_mem_stats s;
    if (!err) err = nn_mem_get_stats(device, &s) != NN_OK;
    if (!err) {
        r->peak_reserved = s.reserved_bytes_peak;
        r->peak_allocated = s.allocated_bytes_peak;
        r->peak_requested = peak;
        r->segments = (unsigned long long)(s.segment_alloc_total - s0.segment_alloc_total);
    } else {
        fail("trace replay");
    }
    close_ctx(&c);
    nn_mem_trim(device, NULL);
    free(ptr);
    free(bytes);
    return err;
}

static void print_replay(const char *name, const struct replay_result *r, size_t ops)
{
    printf("%-26s %9.2f %9.2f %9.2f %7.3f %7.3f %8.1f %7llu\n", name,
           (double)r->peak_reserved / GiB, (double)r->peak_allocated / GiB,
           (double)r->peak_requested / GiB,
           (double)r->peak_reserved / (double)(r->peak_allocated ? r->peak_allocated : 1),
           (double)r->peak_reserved / (double)(r->peak_requested ? r->peak_requested : 1),
           (double)ops / (r->seconds > 0 ? r->seconds : 1e-9) * 1e-6, r->segments);
}

int nn_cli_bench_mem(int argc, char **argv)
{
    int device = 0, force_host = 0;
    uint64_t seed = 42, allocs = 10000, max_usage = 0;
    const char *replay_file = NULL, *save_file = NULL;
    const struct nn_cli_opt opts[] = {
        {"--device", NN_CLI_INT, &device, "N", "the CUDA device (default 0)", 0, 1 << 20, NULL},
        {"--host", NN_CLI_FLAG, &force_host, NULL, "the host-memory pool, even with a GPU", 0, 0,
         NULL},
        {"--seed", NN_CLI_U64, &seed, "S", "the random trace's seed (default 42)", 0, LLONG_MAX,
         NULL},
        {"--allocs", NN_CLI_U64, &allocs, "N", "allocations of the random trace (default 10000)", 1,
         1000000000, NULL},
        {"--max-usage", NN_CLI_BYTES, &max_usage, "BYTES",
         "the random trace's live-bytes cap (default 16G, 4G on the host)", 1, LLONG_MAX, NULL},
        {"--replay", NN_CLI_STRING, &replay_file, "FILE", "replay this saved trace too", 0, 0,
         NULL},
        {"--save-trace", NN_CLI_STRING, &save_file, "FILE", "save the random trace to FILE", 0, 0,
         NULL},
    };
    const struct nn_cli_cmd cmd = {
        "nnprim bench mem", NULL,
        "The device memory pool against cudaMalloc and cudaMallocAsync: alloc+free latency,\n"
        "threads on their own streams, a random trace and a training-step pattern (peak\n"
        "reserved / peak in use). Without a GPU (or with --host): the host-memory pool.\n",
        opts, NN_CLI_NOPTS(opts)};
    int first, rc = nn_cli_parse(&cmd, argc, argv, &first);
    if (rc != NN_CLI_RUN) return rc;
    int ndev = 0;
    nn_device_count(&ndev);
    int gpu =
        !force_host && (nn_build_features() & NN_FEATURE_CUDA) && device >= 0 && device < ndev;
    int pool = gpu ? device : NN_MEM_HOST;
    if (!max_usage) max_usage = gpu ? 16 * GiB : 4 * GiB;
    if (gpu) {
        nn_device_info d;
        nn_device_get_info(device, &d);
        printf("nnprim bench mem: device %d (%s)\n", device, d.name);
    } else {
        printf("nnprim bench mem: host-memory pool (%s); the CUDA rows need a GPU\n",
               force_host ? "--host" : "no usable GPU");
    }

    static const size_t sizes[] = {256, 64 * KiB, MiB, 64 * MiB};
    static const char *size_names[] = {"256 B", "64 KiB", "1 MiB", "64 MiB"};
    printf("\nalloc+free pair, median us per pair\n%-8s %12s %12s %16s\n", "size", "nnprim",
           "cudaMalloc", "cudaMallocAsync");
    for (int i = 0; i < 4; i++) {
        printf("%-8s", size_names[i]);
        for (int k = K_NNPRIM; k <= K_ASYNC; k++) {
            double us;
            int w = k == K_ASYNC ? 16 : 12;
            if (k != K_NNPRIM && !gpu)
                printf(" %*s", w, "needs GPU");
            else if (pair_latency((enum kind)k, pool, sizes[i], &us))
                return fail(kind_name[k]);
            else
                printf(" %*.3f", w, us);
        }
        printf("\n");
    }

    printf("\nthreads, each on its own stream (256 B..512 KiB pairs): pairs/s (median of 5 runs), "
           "speedup over 1\n"
           "%-8s %14s %8s %16s %8s\n",
           "threads", "nnprim", "x1", "cudaMallocAsync", "x1");
    double base[3] = {0, 0, 0};
    static const int nthreads[] = {1, 4, 16};
    for (int i = 0; i < 3; i++) {
        printf("%-8d", nthreads[i]);
        for (int k = K_NNPRIM; k <= K_ASYNC; k += 2) {
            double rate;
            long pairs = k == K_NNPRIM ? 200000 : 20000;
            if (k != K_NNPRIM && !gpu) {
                printf(" %16s %8s", "needs GPU", "");
                continue;
            }
            /* One run's rate moved by 45% between runs on the GPU machine (the one-thread
             * figure most): the median of five runs. */
            double runs[5];
            for (int r = 0; r < 5; r++)
                if (thread_rate((enum kind)k, pool, nthreads[i], pairs, &runs[r]))
                    return fail(kind_name[k]);
            rate = nn_cli_median(runs, 5);
            if (i == 0) base[k] = rate;
            printf(" %*.3g %8.2f", k == K_NNPRIM ? 14 : 16, rate, rate / base[k]);
        }
        printf("\n");
    }

    struct trace rnd = {0}, step = {0}, file = {0};
    if (random_trace(&rnd, seed, (size_t)allocs, 64 * MiB, (size_t)max_usage))
        return fail("random trace");
    if (step_pattern(pool, &step)) return 1;
    if (replay_file && load_trace(replay_file, &file)) return 1;
    if (save_file && save_trace(save_file, &step, "one training step of a small CNN")) return 1;

    printf("\ntraces on one stream: peaks in GiB, ratio = peak reserved / peak in use\n"
           "%-26s %9s %9s %9s %7s %7s %8s %7s\n",
           "trace", "reserved", "alloc'd", "asked", "/alloc", "/asked", "Mops/s", "segs");
    struct replay_result r;
    char name[64];
    nn_mem_settings set;
    if (nn_mem_settings_from_env(&set) != NN_OK) return fail("nn_mem_settings_from_env");
    double slacks[2] = {1.10, 0.0};
    for (int k = 0; k < 2; k++) {
        set.growth_slack = slacks[k];
        if (nn_mem_configure(pool, &set) != NN_OK) return fail("nn_mem_configure");
        printf("growth_slack %.2f%s\n", slacks[k],
               k ? " (the default: never release while growing)" : " (release to follow the peak)");
        snprintf(name, sizeof name, "  random %llu (seed %llu)", (unsigned long long)allocs,
                 (unsigned long long)seed);
        if (replay(pool, &rnd, 1, &r)) return 1;
        print_replay(name, &r, rnd.n);
        if (replay(pool, &step, 10, &r)) return 1;
        print_replay("  training step x10", &r, step.n * 10);
        if (replay_file) {
            if (replay(pool, &file, 1, &r)) return 1;
            print_replay(replay_file, &r, file.n);
        }
    }
    printf("(random: %.0f%% allocate, sizes 1 B..64 MiB, live bytes capped at %.1f GiB; segs = "
           "segments taken from the driver during the replay)\n",
           73.0, (double)max_usage / GiB);

    nn_mem_stats s;
    char text[1024];
    if (nn_mem_get_stats(pool, &s) == NN_OK && nn_mem_stats_format(&s, text, sizeof text) == NN_OK)
        printf("\npool after the run:\n%s", text);
    free(rnd.ops);
    free(step.ops);
    free(file.ops);
    return 0;
}

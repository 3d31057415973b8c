/* The thread-safety scenarios (threads_scenarios.h): moved out of test_threads.c so that the
 * plain ThreadSanitizer driver runs the same code. */
#include "threads_scenarios.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Every output of one workload, one after another, as f32 on the host. */
#define MAX_OUT 4096
struct result {
    float v[MAX_OUT];
    int n;
};

struct worker {
    int tid;
    nn_backend backend;
    int device;
    const struct result *expect; /* [TS_CONTEXTS]: single-thread results, seeds tid*TS_CONTEXTS+k */
    double tol;                  /* 0: bitwise */
    char failure[1024];          /* "" when every check held */
};

#define FAILF(w, ...)                                                                              \
    do {                                                                                           \
        snprintf((w)->failure, sizeof(w)->failure, __VA_ARGS__);                                   \
        return 1;                                                                                  \
    } while (0)

#define OK(w, call)                                                                                \
    do {                                                                                           \
        nn_status st_ = (call);                                                                    \
        if (st_ != NN_OK)                                                                          \
            FAILF(w, "thread %d: %s: %s: %.300s", (w)->tid, #call, nn_status_name(st_),            \
                  nn_last_error()->message);                                                       \
    } while (0)

static int make_ctx(struct worker *w, nn_backend backend, int verbose, nn_ctx **out)
{
    nn_settings s;
    OK(w, nn_settings_defaults(&s));
    s.backend = backend;
    s.device = w->device;
    s.verbose = verbose;
    /* Contexts on one device must agree bit for bit with the single-thread run. */
    s.deterministic = 1;
    OK(w, nn_ctx_create(out, &s));
    return 0;
}

static int tensor(struct worker *w, nn_ctx *ctx, nn_tensor *t, int rank, int64_t d0, int64_t d1,
                  int64_t d2, int64_t d3, uint64_t seed)
{
    int64_t dims[4] = {d0, d1, d2, d3};
    OK(w, nn_tensor_empty(ctx, NN_DTYPE_F32, rank, dims, t));
    OK(w, nn_tensor_fill_uniform(ctx, t, -1, 1, seed));
    return 0;
}

/* Append t's values to r (through host memory of the host context). */
static int take(struct worker *w, nn_ctx *ctx, nn_ctx *host, const nn_tensor *t, struct result *r)
{
    int64_t n = nn_tensor_numel(t);
    if (r->n + n > MAX_OUT) FAILF(w, "thread %d: results overflow", w->tid);
    nn_tensor v;
    OK(w, nn_tensor_wrap(host, r->v + r->n, NN_DTYPE_F32, t->rank, t->dims, NULL, &v));
    OK(w, nn_tensor_copy(ctx, &v, t));
    OK(w, nn_ctx_synchronize(ctx));
    r->n += (int)n;
    return 0;
}

/* A failure provoked on purpose: its message, distinct per thread and call, must be the one
 * this thread and this context read back, whatever the other threads do meanwhile. */
static int provoke(struct worker *w, nn_ctx *ctx, int k)
{
    int rank = 100 + w->tid * 10 + k;
    int64_t dims[1] = {1};
    nn_tensor t;
    nn_status st = nn_tensor_empty(ctx, NN_DTYPE_F32, rank, dims, &t);
    char want[64];
    snprintf(want, sizeof want, "got %d", rank);
    const nn_error_info *e = nn_last_error();
    nn_error_info c;
    OK(w, nn_ctx_last_error(ctx, &c));
    if (st != NN_E_INVALID_ARG || e->status != NN_E_INVALID_ARG ||
        strncmp(e->message, "nn_tensor_empty: ", 17) != 0 || !strstr(e->message, want))
        FAILF(w, "thread %d: rank %d gave %s, last error \"%.300s\"", w->tid, rank,
              nn_status_name(st), e->message);
    if (strcmp(c.message, e->message) != 0)
        FAILF(w, "thread %d: context says \"%.300s\", thread says \"%.300s\"", w->tid, c.message,
              e->message);
    return 0;
}

/* conv 3x3 + relu -> max pool 2x2, both backward; linear -> softmax, both backward; an LSTM
 * forward and backward; every output taken into r. */
static int workload(struct worker *w, nn_ctx *ctx, nn_ctx *host, uint64_t seed, struct result *r)
{
    r->n = 0;
    nn_tensor x, cw, cb, cy, py, pdy, pdx, cdx, cdw, cdb;
    nn_conv_params cp;
    OK(w, nn_conv_params_default(&cp, 2));
    cp.pad_lo[0] = cp.pad_lo[1] = cp.pad_hi[0] = cp.pad_hi[1] = 1;
    cp.activation = NN_ACTIVATION_RELU;
    if (tensor(w, ctx, &x, 4, 2, 3, 8, 8, seed) || tensor(w, ctx, &cw, 4, 4, 3, 3, 3, seed + 1) ||
        tensor(w, ctx, &cb, 1, 4, 0, 0, 0, seed + 2) || tensor(w, ctx, &cy, 4, 2, 4, 8, 8, 0) ||
        tensor(w, ctx, &py, 4, 2, 4, 4, 4, 0) || tensor(w, ctx, &pdy, 4, 2, 4, 4, 4, seed + 3) ||
        tensor(w, ctx, &pdx, 4, 2, 4, 8, 8, 0) || tensor(w, ctx, &cdx, 4, 2, 3, 8, 8, 0) ||
        tensor(w, ctx, &cdw, 4, 4, 3, 3, 3, 0) || tensor(w, ctx, &cdb, 1, 4, 0, 0, 0, 0))
        return 1;
    nn_pool_params pp = {
        .spatial_rank = 2, .mode = NN_POOL_MAX, .window = {2, 2}, .stride = {2, 2}};
    nn_conv_pullback *cpb;
    nn_pool_pullback *ppb;
    OK(w, nn_conv_forward(ctx, &cp, &x, &cw, &cb, &cy, &cpb));
    OK(w, nn_pool_forward(ctx, &pp, &cy, &py, &ppb));
    OK(w, nn_pool_backward(ctx, &ppb, &pdy, &pdx));
    OK(w, nn_conv_backward(ctx, &cpb, &pdx, &cdx, &cdw, &cdb));
    const nn_tensor *conv_out[] = {&cy, &py, &pdx, &cdx, &cdw, &cdb};
    for (int i = 0; i < 6; i++)
        if (take(w, ctx, host, conv_out[i], r)) return 1;

    nn_tensor lx, lw, lb, ly, sy, sdy, ldy, ldx, ldw, ldb;
    if (tensor(w, ctx, &lx, 2, 8, 16, 0, 0, seed + 4) ||
        tensor(w, ctx, &lw, 2, 10, 16, 0, 0, seed + 5) ||
        tensor(w, ctx, &lb, 1, 10, 0, 0, 0, seed + 6) || tensor(w, ctx, &ly, 2, 8, 10, 0, 0, 0) ||
        tensor(w, ctx, &sy, 2, 8, 10, 0, 0, 0) || tensor(w, ctx, &sdy, 2, 8, 10, 0, 0, seed + 7) ||
        tensor(w, ctx, &ldy, 2, 8, 10, 0, 0, 0) || tensor(w, ctx, &ldx, 2, 8, 16, 0, 0, 0) ||
        tensor(w, ctx, &ldw, 2, 10, 16, 0, 0, 0) || tensor(w, ctx, &ldb, 1, 10, 0, 0, 0, 0))
        return 1;
    nn_linear_params lp;
    nn_softmax_params sp;
    nn_linear_pullback *lpb;
    nn_softmax_pullback *spb;
    OK(w, nn_linear_params_default(&lp));
    OK(w, nn_softmax_params_default(&sp));
    OK(w, nn_linear_forward(ctx, &lp, &lx, &lw, &lb, &ly, &lpb));
    OK(w, nn_softmax_forward(ctx, &sp, &ly, &sy, &spb));
    OK(w, nn_softmax_backward(ctx, &spb, &sdy, &ldy));
    OK(w, nn_linear_backward(ctx, &lpb, &ldy, &ldx, &ldw, &ldb));
    const nn_tensor *lin_out[] = {&ly, &sy, &ldy, &ldx, &ldw, &ldb};
    for (int i = 0; i < 6; i++)
        if (take(w, ctx, host, lin_out[i], r)) return 1;

    enum { T = 4, N = 3, I = 5, H = 6 };
    nn_rnn_params rp;
    int64_t wn;
    OK(w, nn_rnn_params_default(&rp, NN_RNN_LSTM, I, H));
    OK(w, nn_rnn_weights_size(ctx, &rp, NN_DTYPE_F32, &wn));
    nn_tensor rx, rw, ry, rdy, rdx, rdw;
    if (tensor(w, ctx, &rx, 3, T, N, I, 0, seed + 8) ||
        tensor(w, ctx, &rw, 1, wn, 0, 0, 0, seed + 9) || tensor(w, ctx, &ry, 3, T, N, H, 0, 0) ||
        tensor(w, ctx, &rdy, 3, T, N, H, 0, seed + 10) || tensor(w, ctx, &rdx, 3, T, N, I, 0, 0) ||
        tensor(w, ctx, &rdw, 1, wn, 0, 0, 0, 0))
        return 1;
    OK(w, nn_tensor_fill_uniform(ctx, &rw, -0.4, 0.4, seed + 9));
    nn_rnn_pullback *rpb;
    OK(w, nn_rnn_forward(ctx, &rp, &(nn_rnn_forward_tensors){.x = &rx, .w = &rw, .y = &ry}, &rpb));
    OK(w,
       nn_rnn_backward(ctx, &rpb, &(nn_rnn_backward_tensors){.dy = &rdy, .dx = &rdx, .dw = &rdw}));
    /* The packed buffer's layout is the backend's, so take the views PyTorch names. */
    if (take(w, ctx, host, &ry, r) || take(w, ctx, host, &rdx, r)) return 1;
    for (int name = NN_RNN_WEIGHT_IH; name <= NN_RNN_BIAS_HH; name++) {
        nn_tensor v;
        OK(w, nn_rnn_weight_view(ctx, &rp, &rdw, 0, 0, (nn_rnn_weight_name)name, &v));
        if (take(w, ctx, host, &v, r)) return 1;
    }

    nn_tensor *all[] = {&x,  &cw, &cb,  &cy,  &py,  &pdy, &pdx, &cdx, &cdw, &cdb, &lx,  &lw,  &lb,
                        &ly, &sy, &sdy, &ldy, &ldx, &ldw, &ldb, &rx,  &rw,  &ry,  &rdy, &rdx, &rdw};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        OK(w, nn_tensor_free(ctx, all[i]));
    return 0;
}

static int compare(struct worker *w, const struct result *want, const struct result *got,
                   uint64_t seed)
{
    if (want->n != got->n)
        FAILF(w, "thread %d seed %llu: %d values, single thread had %d", w->tid,
              (unsigned long long)seed, got->n, want->n);
    for (int i = 0; i < got->n; i++) {
        double a = want->v[i], b = got->v[i];
        int same = w->tol == 0 ? memcmp(&want->v[i], &got->v[i], sizeof(float)) == 0
                               : fabs(a - b) <= w->tol * (1 + fabs(a));
        if (!same)
            FAILF(w, "thread %d seed %llu: value %d is %.9g, single thread had %.9g", w->tid,
                  (unsigned long long)seed, i, b, a);
    }
    return 0;
}

/* Tensors made by one context of the device and freed by another, interleaved with the other
 * threads doing the same on the same pool. */
static int churn(struct worker *w, nn_ctx **ctx, int round)
{
    nn_tensor t[8];
    for (int i = 0; i < 8; i++) {
        int64_t dims[2] = {1 + i + round, 64 * (i + 1)};
        OK(w, nn_tensor_empty(ctx[i % TS_CONTEXTS], NN_DTYPE_F32, 2, dims, &t[i]));
    }
    for (int i = 7; i >= 0; i--)
        OK(w, nn_tensor_free(ctx[(i + 1) % TS_CONTEXTS], &t[i]));
    return 0;
}

static int run_worker(struct worker *w)
{
    nn_ctx *ctx[TS_CONTEXTS] = {0}, *host = NULL;
    int bad = make_ctx(w, NN_BACKEND_REF, 0, &host);
    /* context 1 is verbose: its lines go through the log callback's lock (stress()) */
    for (int k = 0; k < TS_CONTEXTS && !bad; k++)
        bad = make_ctx(w, w->backend, k == 1, &ctx[k]);
    static struct result got[TS_THREADS]; /* too large for a thread's stack; one slot per thread */
    for (int round = 0; round < TS_ROUNDS && !bad; round++) {
        for (int k = 0; k < TS_CONTEXTS && !bad; k++) {
            uint64_t seed = (uint64_t)(w->tid * TS_CONTEXTS + k) * 100;
            nn_plan_cache_stats before, after;
            bad = provoke(w, ctx[k], k);
            if (!bad && nn_plan_cache_get_stats(ctx[k], &before) != NN_OK)
                FAILF(w, "thread %d: nn_plan_cache_get_stats: %s", w->tid,
                      nn_last_error()->message);
            if (!bad) bad = workload(w, ctx[k], host, seed, &got[w->tid]);
            if (!bad) bad = compare(w, &w->expect[k], &got[w->tid], seed);
            if (!bad && nn_plan_cache_get_stats(ctx[k], &after) != NN_OK)
                FAILF(w, "thread %d: nn_plan_cache_get_stats: %s", w->tid,
                      nn_last_error()->message);
            /* A context's own counters move only with its own calls. */
            if (!bad && w->backend == NN_BACKEND_REF && (after.hits || after.misses))
                FAILF(w, "thread %d: a reference context counts plans", w->tid);
            if (!bad && after.hits + after.misses < before.hits + before.misses)
                FAILF(w, "thread %d: plan cache lookups went down", w->tid);
        }
        if (!bad) bad = churn(w, ctx, round);
    }
    for (int k = 0; k < TS_CONTEXTS; k++)
        nn_ctx_destroy(ctx[k]);
    nn_ctx_destroy(host);
    return bad;
}

static void *thread_main(void *arg)
{
    run_worker(arg);
    return NULL;
}

/* The log callback runs under nnprim's lock, never on two threads at once: a plain counter, so
 * that ThreadSanitizer sees any call outside the lock. */
struct lines {
    long ops, bad;
    char first_bad[256];
};

static void count_line(nn_log_kind kind, const char *line, void *user)
{
    struct lines *l = user;
    if (kind != NN_LOG_OP) return;
    if (!strncmp(line, "nnprim_verbose,", 15) && strstr(line, ",host_ms=")) {
        l->ops++;
    } else if (strncmp(line, "# nnprim_verbose header: ", 25) != 0 && !l->bad++) {
        snprintf(l->first_bad, sizeof l->first_bad, "%.200s", line);
    }
}

static int failed(char *fail, size_t cap, const char *msg)
{
    snprintf(fail, cap, "%s", msg);
    return 1;
}

int ts_stress(nn_backend backend, int devices, double tol, char *fail, size_t cap)
{
    /* The single-thread results, per device: the same seeds, one context at a time. */
    static struct result expect[TS_THREADS][TS_CONTEXTS];
    static struct worker w[TS_THREADS];
    for (int t = 0; t < TS_THREADS; t++) {
        w[t] = (struct worker){
            .tid = t, .backend = backend, .device = t % devices, .expect = expect[t], .tol = tol};
        nn_ctx *ctx = NULL, *host = NULL;
        int bad = make_ctx(&w[t], backend, 0, &ctx) || make_ctx(&w[t], NN_BACKEND_REF, 0, &host);
        for (int k = 0; k < TS_CONTEXTS && !bad; k++)
            bad = workload(&w[t], ctx, host, (uint64_t)(t * TS_CONTEXTS + k) * 100, &expect[t][k]);
        nn_ctx_destroy(ctx);
        nn_ctx_destroy(host);
        if (bad) return failed(fail, cap, w[t].failure);
    }
    static struct lines lines;
    memset(&lines, 0, sizeof lines);
    nn_set_log_callback(count_line, &lines);
    pthread_t th[TS_THREADS];
    int started = 0;
    while (started < TS_THREADS &&
           pthread_create(&th[started], NULL, thread_main, &w[started]) == 0)
        started++;
    for (int t = 0; t < started; t++)
        pthread_join(th[t], NULL);
    nn_set_log_callback(NULL, NULL);
    if (started < TS_THREADS) return failed(fail, cap, "pthread_create failed");
    for (int t = 0; t < TS_THREADS; t++)
        if (w[t].failure[0]) return failed(fail, cap, w[t].failure);
    if (lines.bad) {
        snprintf(fail, cap, "%ld log lines were neither op nor header lines, e.g. \"%s\"",
                 lines.bad, lines.first_bad);
        return 1;
    }
    /* Each verbose context logs every op of its TS_ROUNDS workloads (10 calls each). */
    if (lines.ops < (long)TS_THREADS * TS_ROUNDS * 10) {
        snprintf(fail, cap, "%ld verbose op lines from %d verbose contexts, want >= %d", lines.ops,
                 TS_THREADS, TS_THREADS * TS_ROUNDS * 10);
        return 1;
    }
    return 0;
}

int ts_two_devices_one_thread(char *fail, size_t cap)
{
    static struct result r0, r1, again;
    struct worker w0 = {.tid = 0, .backend = NN_BACKEND_CUDNN, .device = 0};
    struct worker w1 = {.tid = 1, .backend = NN_BACKEND_CUDNN, .device = 1};
    nn_ctx *c0 = NULL, *c1 = NULL, *host = NULL;
    int bad = make_ctx(&w0, NN_BACKEND_CUDNN, 0, &c0) || make_ctx(&w1, NN_BACKEND_CUDNN, 0, &c1) ||
              make_ctx(&w0, NN_BACKEND_REF, 0, &host);
    for (int round = 0; round < 2 && !bad; round++) {
        bad = workload(&w0, c0, host, 7, round ? &again : &r0) || workload(&w1, c1, host, 7, &r1);
        /* Same cuDNN, same GPU model: the two devices agree within f32 rounding. */
        w1.tol = 1e-5;
        if (!bad) bad = compare(&w1, &r0, &r1, 7);
        if (!bad && round) bad = compare(&w0, &r0, &again, 7);
    }
    nn_ctx_destroy(c0);
    nn_ctx_destroy(c1);
    nn_ctx_destroy(host);
    if (bad) return failed(fail, cap, w0.failure[0] ? w0.failure : w1.failure);
    return 0;
}

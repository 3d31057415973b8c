/* The cuDNN recurrent path: the algorithm choice under NNPRIM_TUNING=autotune. */
#include "rnn/rnn_cudnn_internal.h"

/* ---------------------------------------------------------------------------------------------
 * Algorithm choice under NNPRIM_TUNING=autotune
 */

/* Milliseconds per training step of REPS steps back to back, between events ev (the host waits
 * for them): eager launches, or the launches of the two graphs when gx is not NULL. */
enum { TUNE_REPS = 3 };
static nn_status time_reps(struct nn_ctx *ctx, cudnnHandle_t h, const struct nn__rnn_problem *p,
                           const struct rnn_live *e, const struct fwd_io *f, const struct bwd_io *g,
                           cudaGraphExec_t *gx, cudaEvent_t *ev, double *ms)
{
    cudaStream_t s = (cudaStream_t)ctx->stream;
    nn_status st = NN__CUDA(ctx, cudaEventRecord(ev[0], s));
    for (int r = 0; st == NN_OK && r < TUNE_REPS; r++) {
        if (gx) {
            st = NN__CUDA(ctx, cudaGraphLaunch(gx[0], s));
            if (st == NN_OK) st = NN__CUDA(ctx, cudaGraphLaunch(gx[1], s));
        } else {
            st = nn__rnn_cudnn_fwd_launch(ctx, h, p, e, f);
            if (st == NN_OK) st = nn__rnn_cudnn_bwd_launch(ctx, h, p, e, g);
        }
    }
    float t = 0;
    if (st == NN_OK) st = NN__CUDA(ctx, cudaEventRecord(ev[1], s));
    if (st == NN_OK) st = NN__CUDA(ctx, cudaEventSynchronize(ev[1]));
    if (st == NN_OK) st = NN__CUDA(ctx, cudaEventElapsedTime(&t, ev[0], ev[1]));
    if (st == NN_OK) *ms = (double)t / TUNE_REPS;
    return st;
}

/* A candidate's training step (forward, backward-data, backward-weights) on zeroed pool scratch,
 * timed the ways it may run: eager (*eager_ms) and replayed (*replay_ms: the forward and the
 * backward captured once each on the same buffers and launched as graphs, which is how a loop on
 * fixed buffers replays, "Fixed buffers pay no copies" in docs/RNN.md). Events around steps back
 * to back measure what bounds them, host or GPU. One untimed eager step goes first (cuDNN's first
 * call of a configuration does one-time work, and must not be captured). A mode not wanted, or a
 * capture the driver refuses, is left at -1; a failing eager step fails the candidate. */
static nn_status time_step(struct nn_ctx *ctx, cudnnHandle_t h, const struct nn__rnn_problem *p,
                           struct rnn_live *e, int want_eager, int want_replay, double *eager_ms,
                           double *replay_ms)
{
    enum { X, Y, W, DY, DX, DW, WS, RS, NBUF };
    size_t bytes[NBUF] = {e->xbytes, e->ybytes,       e->weight_bytes, e->ybytes,
                          e->xbytes, e->weight_bytes, e->work_bytes,   e->reserve_bytes};
    void *b[NBUF] = {0};
    cudaEvent_t ev[2] = {0, 0};
    cudaGraph_t g[2] = {0, 0};
    cudaGraphExec_t gx[2] = {0, 0};
    cudaStream_t s = (cudaStream_t)ctx->stream;
    *eager_ms = *replay_ms = -1;
    nn_status st = NN_OK;
    for (int i = 0; st == NN_OK && i < NBUF; i++)
        if (bytes[i]) {
            st = nn__dev_alloc(ctx, bytes[i], &b[i]);
            if (st == NN_OK) st = NN__CUDA(ctx, cudaMemsetAsync(b[i], 0, bytes[i], s));
        }
    for (int i = 0; st == NN_OK && i < 2; i++)
        st = NN__CUDA(ctx, cudaEventCreate(&ev[i]));
    struct fwd_io f = {b[X], NULL, NULL, b[W], b[Y], NULL, NULL, b[WS], b[RS], bytes[RS]};
    struct bwd_io bw = {b[X], NULL, NULL,  b[W],  b[Y],  NULL,      NULL, b[DY], b[DX],
                        NULL, NULL, b[DW], b[WS], b[RS], bytes[RS], 0,    1,     1};
    if (st == NN_OK) st = nn__rnn_cudnn_fwd_launch(ctx, h, p, e, &f);
    if (st == NN_OK) st = nn__rnn_cudnn_bwd_launch(ctx, h, p, e, &bw);
    if (st == NN_OK && want_eager) st = time_reps(ctx, h, p, e, &f, &bw, NULL, ev, eager_ms);
    if (st == NN_OK && want_replay) {
        nn_status cs = nn__rnn_cudnn_capture(ctx, h, p, e, nn__rnn_cudnn_fwd_launch, &f, &g[0]);
        if (cs == NN_OK)
            cs = nn__rnn_cudnn_capture(ctx, h, p, e, nn__rnn_cudnn_bwd_launch, &bw, &g[1]);
        for (int i = 0; cs == NN_OK && i < 2; i++)
            cs = NN__CUDA(ctx, cudaGraphInstantiate(&gx[i], g[i], 0));
        /* one untimed replay: a graph's first launch uploads it */
        for (int i = 0; cs == NN_OK && i < 2; i++)
            cs = NN__CUDA(ctx, cudaGraphLaunch(gx[i], s));
        if (cs == NN_OK) cs = time_reps(ctx, h, p, e, NULL, NULL, gx, ev, replay_ms);
        if (cs != NN_OK) {
            (void)cudaGetLastError();
            *replay_ms = -1;
        }
        e->captured = 0;
    }
    for (int i = 0; i < 2; i++) {
        if (gx[i]) cudaGraphExecDestroy(gx[i]);
        if (g[i]) cudaGraphDestroy(g[i]);
        if (ev[i]) cudaEventDestroy(ev[i]);
    }
    for (int i = 0; i < NBUF; i++)
        if (b[i]) nn__dev_free(ctx, b[i]);
    return st;
}

/* What the verbose line says of a tuned shape (its note's cache): the pair autotune kept. */
static const char *tuned_note(int algo, int replay)
{
    static const char *const names[4][2] = {
        {"autotuned:standard+eager", "autotuned:standard+replay"},
        {"autotuned:persist-static+eager", "autotuned:persist-static+replay"},
        {"autotuned:persist-dynamic+eager", "autotuned:persist-dynamic+replay"},
        {"autotuned:persist-small-h+eager", "autotuned:persist-small-h+replay"}};
    int i = algo == CUDNN_RNN_ALGO_PERSIST_STATIC           ? 1
            : algo == CUDNN_RNN_ALGO_PERSIST_DYNAMIC        ? 2
            : algo == CUDNN_RNN_ALGO_PERSIST_STATIC_SMALL_H ? 3
                                                            : 0;
    return names[i][!!replay];
}

/* Build every algorithm cuDNN allows the shape, time each training step the ways it may run
 * (eager unless NNPRIM_RNN_GRAPHS=1, replayed unless =0 or the build has no copy kernel), and
 * keep the cheapest (algorithm, mode) pair: an algorithm that wins eager may lose replayed, as the
 * persistent GRU kernels did on the H200 (105 us replayed against 45 for the standard one). Under
 * auto the mode goes into the record as its training decision (no trials then); under 0 or 1 the
 * setting fixes the mode and only the algorithm is recorded. A refused candidate (at descriptor
 * time or at its first call) is skipped and recorded in rec->flags. */
nn_status nn__rnn_cudnn_tune(struct nn_ctx *ctx, const struct rnn_key *k,
                             const struct nn__rnn_problem *p, struct rnn_record *rec,
                             struct nn__rnn_note *note, struct rnn_live **out)
{
    static const int algos[] = {CUDNN_RNN_ALGO_STANDARD, CUDNN_RNN_ALGO_PERSIST_STATIC,
                                CUDNN_RNN_ALGO_PERSIST_STATIC_SMALL_H,
                                CUDNN_RNN_ALGO_PERSIST_DYNAMIC};
    enum { NA = sizeof algos / sizeof algos[0] };
    cudnnHandle_t h;
    NN__TRY(nn__cudnn_handle(ctx, &h));
    nn_graphs_mode graphs = ctx->settings.rnn_graphs;
    uint64_t t0 = nn__now_ns();
    struct rnn_live *cand[NA] = {0};
    double eager_ms[NA], replay_ms[NA];
    nn_status st = NN_OK;
    for (int i = 0; i < NA; i++) {
        struct rnn_record r = {algos[i], rec->flags};
        eager_ms[i] = replay_ms[i] = -1;
        st = i == 0 ? nn__rnn_cudnn_build(ctx, k, p, &r, &cand[i])
                    : nn__rnn_cudnn_build_like(ctx, k, p, cand[0], &r, &cand[i]);
        int want_replay =
            st == NN_OK && graphs != NN_GRAPHS_OFF && nn__rnn_cudnn_can_replay(ctx, cand[i]);
        if (st == NN_OK)
            st = time_step(ctx, h, p, cand[i], graphs != NN_GRAPHS_ON || !want_replay, want_replay,
                           &eager_ms[i], &replay_ms[i]);
        if (st == NN_OK) continue;
        nn__rnn_cudnn_live_destroy(cand[i]);
        cand[i] = NULL;
        if (i == 0) return st; /* the standard algorithm runs every shape cuDNN runs */
        (void)cudaGetLastError();
        rec->flags |= NN__RNN_REC_PERSIST_REFUSED;
        st = NN_OK;
    }
    int replay = 0, best = nn__rnn_tune_pick(NA, eager_ms, replay_ms, &replay);
    if (best < 0) best = 0, replay = 0; /* nothing timed: the standard one, eagerly */
    for (int i = 0; i < NA; i++)
        if (i != best) nn__rnn_cudnn_live_destroy(cand[i]);
    nn__cache_count_autotune(nn__cudnn_plan_cache(ctx), nn__now_ns() - t0);
    rec->algo = algos[best];
    rec->flags |= NN__RNN_REC_TUNED;
    /* else the build decided, not the timing */
    if (graphs == NN_GRAPHS_AUTO && nn__rnn_cudnn_can_replay(ctx, cand[best])) {
        rec->flags &= ~(NN__RNN_REC_TRAIN_EAGER | NN__RNN_REC_TRAIN_REPLAY);
        rec->flags |= replay ? NN__RNN_REC_TRAIN_REPLAY : NN__RNN_REC_TRAIN_EAGER;
        nn__rnn_cudnn_trial_init(ctx, cand[best], U_TRAIN, rec->flags);
    }
    nn__rnn_note_cache(note, tuned_note(rec->algo, replay));
    *out = cand[best];
    return NN_OK;
}

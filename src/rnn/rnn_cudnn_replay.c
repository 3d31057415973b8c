/* The cuDNN recurrent path: graph replay of a shape's calls (staging, slots, copy nodes, captures)
 * and auto's trials that decide it. */
#include <string.h>

#include "rnn/rnn_cudnn_internal.h"

/* ---------------------------------------------------------------------------------------------
 * Replay state of a shape (docs/RNN.md, "Graph replay"). The graphs read and write nnprim-owned
 * staging buffers at fixed addresses; the caller's tensors enter and leave through two copy
 * nodes (src/core/dev_copy.h) that nnprim adds around the captured cuDNN calls, so a call with
 * other pointers only changes those nodes' parameters and never captures again.
 */

void nn__rnn_cudnn_reserve_unref(struct reserve *rs)
{
    if (!rs || --rs->refs > 0) return;
    if (rs->ptr) nn__dev_free(rs->ctx, rs->ptr);
    nn__host_free(rs);
}

static void exec_clear(struct exec *ex)
{
    if (ex->direct) cudaGraphExecDestroy(ex->direct);
    if (ex->exec) cudaGraphExecDestroy(ex->exec);
    if (ex->graph) cudaGraphDestroy(ex->graph);
    if (ex->body) cudaGraphDestroy(ex->body);
    memset(ex, 0, sizeof *ex);
}

/* Every graph of the shape (the slots' reserves stay). */
void nn__rnn_cudnn_drop_graphs(struct rnn_live *e, int unit)
{
    if (unit == U_INFER) exec_clear(&e->infer);
    for (int i = 0; unit == U_TRAIN && i < e->nslots; i++) {
        exec_clear(&e->slots[i].fwd);
        exec_clear(&e->slots[i].bwd);
    }
}

/* The unit's starting phase: from the record's decision when it has one (no timing), else auto's
 * trials; fixed by the setting when it is not auto. Runs on an entry that has not replayed yet
 * (build's, or tune's pick). */
void nn__rnn_cudnn_trial_init(struct nn_ctx *ctx, struct rnn_live *e, int unit, int32_t flags)
{
    struct trial *t = &e->trial[unit];
    cudaEvent_t ev[2] = {t->ev[0], t->ev[1]};
    memset(t, 0, sizeof *t);
    t->ev[0] = ev[0], t->ev[1] = ev[1];
    t->skip[0] = t->skip[1] = 1;
    int eager = unit == U_INFER ? NN__RNN_REC_INFER_EAGER : NN__RNN_REC_TRAIN_EAGER;
    int replay = unit == U_INFER ? NN__RNN_REC_INFER_REPLAY : NN__RNN_REC_TRAIN_REPLAY;
    switch (ctx->settings.rnn_graphs) {
    case NN_GRAPHS_OFF: t->phase = P_DECIDED; return;
    case NN_GRAPHS_ON: t->phase = P_DECIDED, t->replay = 1; return;
    default:
        if (flags & (eager | replay)) t->phase = P_DECIDED, t->replay = !!(flags & replay);
    }
}

/* Whether e's calls can replay now: the shape may (no_replay: no copy kernel in this build or
 * driver, or a replay that failed) and no whole-step capture is open (it records the eager calls,
 * include/nnprim/graph.h). Any stream may: a stream that cannot be captured has the graphs
 * captured on the context's capture stream (nn__cudnn_capture) and launched on it. */
int nn__rnn_cudnn_can_replay(const struct nn_ctx *ctx, const struct rnn_live *e)
{
    return !e->no_replay && !ctx->capture;
}

/* Buffers of every tensor of a call (and the workspace, with_ws) in one pool allocation. */
nn_status nn__rnn_cudnn_stage_alloc(struct nn_ctx *ctx, const struct rnn_live *e, int with_ws,
                                    struct stage *g)
{
    memset(g, 0, sizeof *g);
    void **at[] = {&g->x,   &g->hx,  &g->cx, &g->w,   &g->y,   &g->hy, &g->cy, &g->dy,
                   &g->dhy, &g->dcy, &g->dx, &g->dhx, &g->dcx, &g->dw, &g->ws};
    size_t sz[] = {e->xbytes, e->hbytes, e->cbytes, e->weight_bytes, e->ybytes,
                   e->hbytes, e->cbytes, e->ybytes, e->hbytes,       e->cbytes,
                   e->xbytes, e->hbytes, e->cbytes, e->weight_bytes, with_ws ? e->work_bytes : 0};
    size_t off[15], total = 0;
    for (int i = 0; i < 15; i++) {
        off[i] = total;
        total += (sz[i] + 255) & ~(size_t)255;
    }
    NN__TRY(nn__dev_alloc(ctx, total ? total : 256, &g->base));
    g->bytes = total;
    for (int i = 0; i < 15; i++)
        *at[i] = sz[i] ? (char *)g->base + off[i] : NULL;
    return NN_OK;
}

/* The staging buffers, allocated from the pool at the shape's first capture. */
static nn_status stage_get(struct nn_ctx *ctx, struct rnn_live *e)
{
    return e->st.base ? NN_OK : nn__rnn_cudnn_stage_alloc(ctx, e, 1, &e->st);
}

static void drop_slots(struct rnn_live *e)
{
    for (int i = 0; i < e->nslots; i++) {
        exec_clear(&e->slots[i].fwd);
        exec_clear(&e->slots[i].bwd);
        e->slots[i].rs->owner = NULL;
        nn__rnn_cudnn_reserve_unref(e->slots[i].rs);
        e->slots[i].rs = NULL;
    }
    e->nslots = 0;
}

/* A slot whose reserve no pullback holds, made when all are busy and there is room; NULL when
 * there is none (the call runs eagerly). */
static nn_status free_slot(struct nn_ctx *ctx, struct rnn_live *e, struct slot **out)
{
    *out = NULL;
    for (int i = 0; i < e->nslots; i++)
        if (e->slots[i].rs->refs == 1) {
            *out = &e->slots[i];
            return NN_OK;
        }
    if (e->nslots == RNN_SLOTS) return NN_OK;
    struct reserve *rs = nn__host_calloc(1, sizeof *rs);
    if (!rs) return NN__FAIL(ctx, NN_E_OOM_HOST, "nn_rnn_forward: out of host memory");
    rs->refs = 1, rs->ctx = ctx, rs->bytes = e->reserve_bytes, rs->owner = e;
    rs->slot = e->nslots;
    nn_status st = rs->bytes ? nn__dev_alloc(ctx, rs->bytes, &rs->ptr) : NN_OK;
    if (st != NN_OK) {
        nn__host_free(rs);
        return st;
    }
    struct slot *sl = &e->slots[e->nslots++];
    memset(sl, 0, sizeof *sl);
    sl->rs = rs;
    *out = sl;
    return NN_OK;
}

static void add_copy(struct copy *c, int *n, void *stage, const void *user, size_t bytes, int out)
{
    c[*n] = (struct copy){stage, user, bytes, out};
    (*n)++;
}

/* The ins (out = 0) or the outs of copies as one copy node's list. */
static void copies_of(const struct copy *copies, int ncopy, int out, struct nn__copies *k)
{
    memset(k, 0, sizeof *k);
    for (int i = 0; i < ncopy; i++) {
        if (copies[i].out != out) continue;
        const void *dst = out ? copies[i].user : copies[i].stage;
        const void *src = out ? copies[i].stage : copies[i].user;
        k->dst[k->n] = (uint64_t)(uintptr_t)dst, k->src[k->n] = (uint64_t)(uintptr_t)src;
        k->bytes[k->n++] = copies[i].bytes;
    }
}

/* The executable graph from ex->body and copies: one node doing the in-copies, the body after it,
 * one node doing the out-copies after that. copies lists ins before outs; ex keeps them. */
static nn_status exec_assemble(struct nn_ctx *ctx, struct exec *ex, const struct copy *copies,
                               int ncopy)
{
    cudaGraphNode_t child = NULL;
    struct nn__copies k;
    if (ex->exec) cudaGraphExecDestroy(ex->exec);
    if (ex->graph) cudaGraphDestroy(ex->graph);
    ex->exec = NULL, ex->graph = NULL, ex->in = ex->out = NULL, ex->ncopy = 0;
    nn_status st = NN__CUDA(ctx, cudaGraphCreate(&ex->graph, 0));
    copies_of(copies, ncopy, 0, &k);
    if (st == NN_OK && k.n) st = nn__graph_add_copies(ctx, ex->graph, NULL, 0, &k, &ex->in);
    if (st == NN_OK)
        st = NN__CUDA(ctx, cudaGraphAddChildGraphNode(&child, ex->graph, ex->in ? &ex->in : NULL,
                                                      ex->in ? 1 : 0, ex->body));
    copies_of(copies, ncopy, 1, &k);
    if (st == NN_OK && k.n) st = nn__graph_add_copies(ctx, ex->graph, &child, 1, &k, &ex->out);
    if (st == NN_OK) st = NN__CUDA(ctx, cudaGraphInstantiate(&ex->exec, ex->graph, 0));
    if (st == NN_OK) {
        memcpy(ex->copy, copies, (size_t)ncopy * sizeof *copies);
        ex->ncopy = ncopy;
    }
    return st;
}

/* One launch_fn call, as nn__stream_capture() takes it. */
struct launch {
    struct nn_ctx *ctx;
    cudnnHandle_t h;
    const struct nn__rnn_problem *p;
    struct rnn_live *e;
    launch_fn fn;
    const void *arg;
};

static nn_status run_launch(void *arg)
{
    struct launch *l = arg;
    return l->fn(l->ctx, l->h, l->p, l->e, l->arg);
}

/* Capture the launches of fn on the context's stream into a new graph. */
nn_status nn__rnn_cudnn_capture(struct nn_ctx *ctx, cudnnHandle_t h,
                                const struct nn__rnn_problem *p, struct rnn_live *e, launch_fn fn,
                                const void *arg, cudaGraph_t *out)
{
    e->captured = 1;
    struct launch l = {ctx, h, p, e, fn, arg};
    return nn__cudnn_capture(ctx, run_launch, &l, out);
}

/* Capture fn into ex->body and assemble the staging graph around it. */
static nn_status exec_build(struct nn_ctx *ctx, cudnnHandle_t h, const struct nn__rnn_problem *p,
                            struct rnn_live *e, struct exec *ex, unsigned sig,
                            const struct copy *copies, int ncopy, launch_fn fn, const void *arg)
{
    exec_clear(ex);
    nn_status st = nn__rnn_cudnn_capture(ctx, h, p, e, fn, arg, &ex->body);
    if (st == NN_OK) st = exec_assemble(ctx, ex, copies, ncopy);
    if (st != NN_OK) {
        (void)cudaGetLastError();
        exec_clear(ex);
        return st;
    }
    ex->sig = sig;
    return NN_OK;
}

/* Point the copy nodes at this call's tensors (a side whose tensors all stayed keeps its node),
 * then launch. Should the driver refuse to repoint a node, the graph is assembled again around
 * the same captured body (host work only, no capture). */
static nn_status exec_launch(struct nn_ctx *ctx, struct exec *ex, const struct copy *want)
{
    int moved[2] = {0, 0};
    for (int i = 0; i < ex->ncopy; i++)
        moved[ex->copy[i].out] |= ex->copy[i].user != want[i].user;
    for (int out = 0; out < 2; out++) {
        if (!moved[out]) continue;
        struct nn__copies k;
        copies_of(want, ex->ncopy, out, &k);
        if (nn__graph_exec_set_copies(ex->exec, out ? ex->out : ex->in, &k) != cudaSuccess) {
            (void)cudaGetLastError();
            NN__TRY(exec_assemble(ctx, ex, want, ex->ncopy));
            break;
        }
        for (int i = 0; i < ex->ncopy; i++)
            if (ex->copy[i].out == out) ex->copy[i].user = want[i].user;
    }
    return NN__CUDA(ctx, cudaGraphLaunch(ex->exec, (cudaStream_t)ctx->stream));
}

static void tuple_of(struct tuple *t, unsigned sig, const struct copy *c, int n)
{
    memset(t, 0, sizeof *t);
    t->sig = sig, t->n = n;
    for (int i = 0; i < n; i++)
        t->user[i] = c[i].user;
}

static int tuple_eq(const struct tuple *a, const struct tuple *b)
{
    return a->n > 0 && memcmp(a, b, sizeof *a) == 0;
}

/* Run one call whose caller-side copies are c: on the direct graph while the caller's pointers are
 * the ones it was captured on, capturing it when they are also the last call's (a training loop
 * on fixed buffers then pays no copies); otherwise through the staging graph, built on first use.
 * staged and direct are fn's arguments on the staging buffers and on the caller's tensors. */
static nn_status exec_run(struct nn_ctx *ctx, cudnnHandle_t h, const struct nn__rnn_problem *p,
                          struct rnn_live *e, struct exec *ex, unsigned sig, const struct copy *c,
                          int n, launch_fn fn, const void *staged, const void *direct)
{
    struct tuple now;
    tuple_of(&now, sig, c, n);
    if (!ex->exec || ex->sig != sig) {
        NN__TRY(exec_build(ctx, h, p, e, ex, sig, c, n, fn, staged));
    } else if (!(ex->direct && tuple_eq(&ex->direct_at, &now)) && tuple_eq(&ex->last, &now)) {
        cudaGraph_t g;
        NN__TRY(nn__rnn_cudnn_capture(ctx, h, p, e, fn, direct, &g));
        if (ex->direct) cudaGraphExecDestroy(ex->direct);
        ex->direct = NULL;
        nn_status st = NN__CUDA(ctx, cudaGraphInstantiate(&ex->direct, g, 0));
        cudaGraphDestroy(g);
        if (st != NN_OK) {
            ex->direct = NULL;
            return st;
        }
        ex->direct_at = now;
    }
    ex->last = now;
    if (ex->direct && tuple_eq(&ex->direct_at, &now))
        return NN__CUDA(ctx, cudaGraphLaunch(ex->direct, (cudaStream_t)ctx->stream));
    return exec_launch(ctx, ex, c);
}

int nn__rnn_cudnn_replay_wanted(const struct nn_ctx *ctx, const struct rnn_live *e, int unit)
{
    const struct trial *t = &e->trial[unit];
    return nn__rnn_cudnn_can_replay(ctx, e) &&
           (t->phase == P_REPLAY_TRIAL || (t->phase == P_DECIDED && t->replay));
}

/* A replay that failed (capture refused, an update refused): the shape runs eagerly from now on;
 * the failure stays readable in the context's last error. */
void nn__rnn_cudnn_disable_replay(struct rnn_live *e, const char *why)
{
    e->no_replay = why;
    nn__rnn_cudnn_drop_graphs(e, U_INFER);
    drop_slots(e);
    for (int u = 0; u < 2; u++)
        e->trial[u].phase = P_DECIDED, e->trial[u].replay = 0;
}

/* The live record of p's shape, if any: the flags in clear off, then those in set on. */
static void record_flags(struct nn_ctx *ctx, const struct nn__rnn_problem *p, int32_t clear,
                         int32_t set)
{
    struct rnn_key k;
    nn__rnn_cudnn_key_of(ctx, p, 1, &k);
    struct rnn_record *r =
        nn__cache_live_record(nn__cudnn_plan_cache(ctx), NN__RNN_CUDNN_KIND_ID, &k);
    if (r) r->flags = (r->flags & ~clear) | set;
}

/* The record keeps which optional tensors the training graphs were captured with (the
 * NN__RNN_REC_*_SIG bits), so that a plan file's load captures the same calls. */
static void record_sig(struct nn_ctx *ctx, const struct nn__rnn_problem *p, int bwd, unsigned sig)
{
    int shift = bwd ? NN__RNN_REC_BWD_SHIFT : NN__RNN_REC_FWD_SHIFT;
    int32_t mask = (int32_t)((bwd ? (unsigned)BS_ALL : (unsigned)FS_ALL) << shift);
    record_flags(ctx, p, mask,
                 (int32_t)(sig << shift) | (bwd ? NN__RNN_REC_BWD_SIG : NN__RNN_REC_FWD_SIG));
}

nn_status nn__rnn_cudnn_forward_replay(struct nn_ctx *ctx, cudnnHandle_t h,
                                       const struct nn__rnn_problem *p, struct rnn_live *e,
                                       const struct nn__rnn_io *io, int training,
                                       struct reserve **rs, int *done)
{
    NN__TRY(stage_get(ctx, e));
    struct stage *g = &e->st;
    struct copy c[RNN_COPIES];
    int n = 0;
    unsigned sig = 0;
    add_copy(c, &n, g->x, io->x->data, e->xbytes, 0);
    if (io->hx) add_copy(c, &n, g->hx, io->hx->data, e->hbytes, 0), sig |= FS_HX;
    if (io->cx) add_copy(c, &n, g->cx, io->cx->data, e->cbytes, 0), sig |= FS_CX;
    add_copy(c, &n, g->w, io->w->data, e->weight_bytes, 0);
    add_copy(c, &n, g->y, io->y_out->data, e->ybytes, 1);
    if (io->hy) add_copy(c, &n, g->hy, io->hy->data, e->hbytes, 1), sig |= FS_HY;
    if (io->cy) add_copy(c, &n, g->cy, io->cy->data, e->cbytes, 1), sig |= FS_CY;
    struct exec *ex = &e->infer;
    struct reserve *r = NULL;
    if (training) {
        struct slot *sl;
        NN__TRY(free_slot(ctx, e, &sl));
        if (!sl) return NN_OK;
        ex = &sl->fwd, r = sl->rs;
    }
    struct fwd_io a = {g->x,
                       io->hx ? g->hx : NULL,
                       io->cx ? g->cx : NULL,
                       g->w,
                       g->y,
                       io->hy ? g->hy : NULL,
                       io->cy ? g->cy : NULL,
                       g->ws,
                       r ? r->ptr : NULL,
                       r ? r->bytes : 0};
    struct fwd_io d = nn__rnn_cudnn_fwd_io_of(io, g->ws, r);
    int fresh = !ex->exec || ex->sig != sig;
    NN__TRY(exec_run(ctx, h, p, e, ex, sig, c, n, nn__rnn_cudnn_fwd_launch, &a, &d));
    if (fresh && training) record_sig(ctx, p, 0, sig);
    if (r) {
        r->refs++;
        *rs = r;
    }
    *done = 1;
    return NN_OK;
}

nn_status nn__rnn_cudnn_backward_replay(struct nn_ctx *ctx, cudnnHandle_t h,
                                        const struct nn__rnn_problem *p, struct rnn_live *e,
                                        const struct reserve *rs, const struct nn__rnn_io *io,
                                        int *done)
{
    NN__TRY(stage_get(ctx, e));
    struct stage *g = &e->st;
    struct copy c[RNN_COPIES];
    int n = 0;
    unsigned sig = 0;
    add_copy(c, &n, g->x, io->x->data, e->xbytes, 0);
    if (io->hx) add_copy(c, &n, g->hx, io->hx->data, e->hbytes, 0), sig |= BS_HX;
    if (io->cx) add_copy(c, &n, g->cx, io->cx->data, e->cbytes, 0), sig |= BS_CX;
    add_copy(c, &n, g->w, io->w->data, e->weight_bytes, 0);
    add_copy(c, &n, g->y, io->y->data, e->ybytes, 0);
    if (io->dy) add_copy(c, &n, g->dy, io->dy->data, e->ybytes, 0), sig |= BS_DY;
    if (io->dhy) add_copy(c, &n, g->dhy, io->dhy->data, e->hbytes, 0), sig |= BS_DHY;
    if (io->dcy) add_copy(c, &n, g->dcy, io->dcy->data, e->cbytes, 0), sig |= BS_DCY;
    if (io->dw && io->accumulate) add_copy(c, &n, g->dw, io->dw->data, e->weight_bytes, 0);
    if (io->dx) add_copy(c, &n, g->dx, io->dx->data, e->xbytes, 1), sig |= BS_DX;
    if (io->dhx) add_copy(c, &n, g->dhx, io->dhx->data, e->hbytes, 1), sig |= BS_DHX;
    if (io->dcx) add_copy(c, &n, g->dcx, io->dcx->data, e->cbytes, 1), sig |= BS_DCX;
    if (io->dw) add_copy(c, &n, g->dw, io->dw->data, e->weight_bytes, 1), sig |= BS_DW;
    if (io->dw && io->accumulate) sig |= BS_ACCUMULATE;
    struct exec *ex = &e->slots[rs->slot].bwd;
    struct bwd_io a = {g->x,
                       io->hx ? g->hx : NULL,
                       io->cx ? g->cx : NULL,
                       g->w,
                       g->y,
                       io->dhy ? g->dhy : NULL,
                       io->dcy ? g->dcy : NULL,
                       g->dy,
                       g->dx,
                       io->dhx ? g->dhx : NULL,
                       io->dcx ? g->dcx : NULL,
                       g->dw,
                       g->ws,
                       rs->ptr,
                       rs->bytes,
                       !io->dy,
                       io->dw != NULL,
                       !io->accumulate};
    /* Without the caller's dy or dx, cuDNN still needs the buffers: the staging ones serve. */
    struct bwd_io d = nn__rnn_cudnn_bwd_io_of(io, g->ws, rs, g->dy, g->dx);
    int fresh = !ex->exec || ex->sig != sig;
    NN__TRY(exec_run(ctx, h, p, e, ex, sig, c, n, nn__rnn_cudnn_bwd_launch, &a, &d));
    if (fresh) record_sig(ctx, p, 1, sig);
    *done = 1;
    return NN_OK;
}

/* auto's measurement: a call of a unit still deciding starts the unit's window if none is open
 * (returns 0 when not measuring). */
int nn__rnn_cudnn_trial_start(struct nn_ctx *ctx, struct rnn_live *e, int unit)
{
    /* Where this build or driver has no copy kernel (no_replay) nothing replays, so a trial could
     * only time eager calls: the shape stays undecided. */
    struct trial *t = &e->trial[unit];
    if (t->phase == P_DECIDED || !nn__rnn_cudnn_can_replay(ctx, e)) return 0;
    if (t->open) return 1;
    for (int i = 0; i < 2; i++)
        if (!t->ev[i] && cudaEventCreate(&t->ev[i]) != cudaSuccess) {
            (void)cudaGetLastError();
            t->ev[i] = NULL;
        }
    if (t->ev[0] && cudaEventRecord(t->ev[0], (cudaStream_t)ctx->stream) != cudaSuccess) {
        (void)cudaGetLastError();
        return 0;
    }
    t->open = t->ev[0] && t->ev[1];
    t->t0 = nn__now_ns();
    return t->open;
}

/* Ends a measured call. A window's cost per step is max(host time, GPU time) over its calls:
 * whichever bounds calls issued back to back, as the caller issues them (timing each call on its
 * own, synchronised, put eager 3-4% above its back-to-back cost on the H200 and mispicked replay
 * for gru t375n32i2048h2048). */
void nn__rnn_cudnn_trial_end(struct nn_ctx *ctx, const struct nn__rnn_problem *p,
                             struct rnn_live *e, int unit, int pass, int measuring)
{
    struct trial *t = &e->trial[unit];
    if (!measuring || t->phase == P_DECIDED) return;
    /* Warm-ups and captures start the window again. A replay phase's call that ran eagerly (every
     * slot busy, lengths that changed) counts: it is what the mode costs this caller. A training
     * window closes on as many backwards as forwards (forwards alone, 8, where pullbacks never
     * reach a backward); a phase whose calls never balance so ends eager after 32. */
    int stuck = ++t->calls > 32;
    if (t->skip[pass]) {
        t->skip[pass] = 0;
        t->open = 0, t->n[0] = t->n[1] = 0;
    } else {
        t->n[pass]++;
    }
    int ready = unit == U_INFER
                    ? t->n[0] >= 2
                    : (t->n[0] >= 2 && t->n[1] == t->n[0]) || (!t->n[1] && t->n[0] >= 8);
    if (!stuck && !ready) return;
    double cost = -1; /* not measured: a stuck phase decides eager */
    if (!stuck) {
        double ns = (double)(nn__now_ns() - t->t0);
        float ms = 0;
        if (cudaEventRecord(t->ev[1], (cudaStream_t)ctx->stream) == cudaSuccess &&
            cudaEventSynchronize(t->ev[1]) == cudaSuccess &&
            cudaEventElapsedTime(&ms, t->ev[0], t->ev[1]) == cudaSuccess) {
            if (ms * 1e6 > ns) ns = ms * 1e6;
        } else {
            (void)cudaGetLastError();
        }
        nn__cache_count_autotune(nn__cudnn_plan_cache(ctx), (uint64_t)ns);
        cost = ns / t->n[0];
    }
    t->open = 0, t->n[0] = t->n[1] = t->calls = 0, t->skip[0] = t->skip[1] = 1;
    if (t->phase == P_EAGER_TRIAL && !stuck) {
        t->eager_ns = cost;
        t->phase = P_REPLAY_TRIAL;
        return;
    }
    t->replay_ns = cost;
    t->replay = !stuck && nn__rnn_replay_pays(t->eager_ns, cost);
    t->phase = P_DECIDED;
    if (nn__verbose(ctx))
        nn__log("nn_rnn: auto: the %s calls of this call's shape %s (eager %.1f us, replayed "
                "%.1f us per %s)",
                unit == U_INFER ? "inference" : "training", t->replay ? "replay" : "run eagerly",
                t->eager_ns / 1e3, cost / 1e3, unit == U_INFER ? "call" : "forward and backward");
    if (unit == U_INFER)
        record_flags(ctx, p, 0, t->replay ? NN__RNN_REC_INFER_REPLAY : NN__RNN_REC_INFER_EAGER);
    else
        record_flags(ctx, p, 0, t->replay ? NN__RNN_REC_TRAIN_REPLAY : NN__RNN_REC_TRAIN_EAGER);
    if (!t->replay && unit == U_INFER) nn__rnn_cudnn_drop_graphs(e, U_INFER);
    if (!t->replay && unit == U_TRAIN) drop_slots(e);
}

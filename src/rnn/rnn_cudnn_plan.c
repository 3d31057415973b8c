/* The cuDNN recurrent path: a plan file's shapes, prepared at load. */
#include <string.h>

#include "rnn/rnn_cudnn_internal.h"

/* ---------------------------------------------------------------------------------------------
 * A plan file's shapes, prepared at load (docs/RNN.md, "The first step from a plan file")
 */

/* The problem a loaded key describes (nn__rnn_cudnn_key_of's inverse; the key's settings are the
 * context's). */
static void problem_of_key(const struct rnn_key *k, struct nn__rnn_problem *p)
{
    memset(p, 0, sizeof *p);
    p->cell = (nn_rnn_cell)k->cell;
    p->t = k->t, p->n = k->n;
    p->input = k->input, p->hidden = k->hidden, p->proj = k->proj;
    p->out = nn__rnn_out_size(k->hidden, k->proj);
    p->layers = k->layers;
    p->dirs = k->dirs;
    p->gates = nn__rnn_gates((nn_rnn_cell)k->cell);
    p->bias_mode = (nn_rnn_bias_mode)k->bias_mode;
    p->input_mode = (nn_rnn_input_mode)k->input_mode;
    p->layout = (nn_rnn_layout)k->layout;
    p->dropout = k->dropout, p->dropout_seed = k->dropout_seed;
    p->clip_enabled = k->clip_enabled, p->clip_lo = k->clip_lo, p->clip_hi = k->clip_hi;
    p->dtype = (nn_dtype)k->dtype;
    p->math = (nn_math_mode)k->s.math_mode;
    p->deterministic = k->s.deterministic;
    p->lengths_kind = k->lengths_kind;
}

/* Calls of one shape on zeroed scratch g, passing the optional tensors the record's signatures
 * name (every one when it has none). */
static void prepare_io(const struct nn__rnn_problem *p, int32_t flags, const struct stage *g,
                       nn_tensor *t, struct nn__rnn_io *fio, struct nn__rnn_io *bio)
{
    unsigned lstm = p->cell == NN_RNN_LSTM;
    unsigned fs = flags & NN__RNN_REC_FWD_SIG ? (unsigned)flags >> NN__RNN_REC_FWD_SHIFT & FS_ALL
                                              : FS_HX | FS_HY | (lstm ? FS_CX | FS_CY : 0u);
    unsigned bs = flags & NN__RNN_REC_BWD_SIG
                      ? (unsigned)flags >> NN__RNN_REC_BWD_SHIFT & BS_ALL
                      : BS_DY | BS_DHY | BS_DX | BS_DHX | BS_DW | (lstm ? BS_DCY | BS_DCX : 0u);
    void *const at[14] = {g->x,  g->hx,  g->cx,  g->w,  g->y,   g->hy,  g->cy,
                          g->dy, g->dhy, g->dcy, g->dx, g->dhx, g->dcx, g->dw};
    for (int i = 0; i < 14; i++) {
        memset(&t[i], 0, sizeof t[i]);
        t[i].data = at[i];
    }
    memset(fio, 0, sizeof *fio);
    fio->x = &t[0], fio->w = &t[3], fio->y = fio->y_out = &t[4];
    fio->hx = fs & FS_HX ? &t[1] : NULL, fio->cx = fs & FS_CX ? &t[2] : NULL;
    fio->hy = fs & FS_HY ? &t[5] : NULL, fio->cy = fs & FS_CY ? &t[6] : NULL;
    fio->training = 1;
    *bio = *fio;
    bio->y_out = bio->hy = bio->cy = NULL;
    bio->dy = bs & BS_DY ? &t[7] : NULL, bio->dhy = bs & BS_DHY ? &t[8] : NULL;
    bio->dcy = bs & BS_DCY ? &t[9] : NULL, bio->dx = bs & BS_DX ? &t[10] : NULL;
    bio->dhx = bs & BS_DHX ? &t[11] : NULL, bio->dcx = bs & BS_DCX ? &t[12] : NULL;
    bio->dw = bs & BS_DW ? &t[13] : NULL, bio->accumulate = (bs & BS_ACCUMULATE) != 0;
    bio->training = 0;
}

/* One loaded record made ready: its descriptors built (from the record, as a first call would),
 * cuDNN's first calls of the configuration done eagerly on zeroed scratch (a training forward and
 * its backward; an inference forward too where the record shows the shape ran inference), and,
 * where the shape replays, its staging graphs captured, so that the caller's first call of each
 * kind replays. Training with dropout is left to its first call: its first calls would draw from
 * cuDNN's random state, and a run must repeat under its seed. Varied lengths are not known
 * before the call (the lengths live in the data descriptors): such a shape gets its first calls
 * with full lengths and no graphs. *captured counts the shapes whose graphs were captured. */
static nn_status prepare_one(struct nn_ctx *ctx, const struct nn__rnn_problem *p, int32_t flags,
                             int *captured)
{
    struct rnn_live *e;
    cudnnHandle_t h;
    NN__TRY(nn__cudnn_handle(ctx, &h));
    NN__TRY(nn__rnn_cudnn_entry_get(ctx, p, p->n > 0, NULL, &e));
    nn__cache_count(nn__cudnn_plan_cache(ctx), NN__PC_PREBUILT);
    if (!p->n) return NN_OK;
    struct stage g;
    NN__TRY(nn__rnn_cudnn_stage_alloc(ctx, e, 0, &g));
    nn_status st = NN__CUDA(ctx, cudaMemsetAsync(g.base, 0, g.bytes, (cudaStream_t)ctx->stream));
    nn_tensor t[14];
    struct nn__rnn_io fio, bio, iio;
    prepare_io(p, flags, &g, t, &fio, &bio);
    iio = fio;
    iio.training = 0;
    int train = !(p->dropout > 0 && p->layers > 1);
    int infer = (flags & (NN__RNN_REC_INFER_EAGER | NN__RNN_REC_INFER_REPLAY)) != 0;
    int grads = bio.dx || bio.dhx || bio.dcx || bio.dw;
    if (st == NN_OK && train) {
        struct reserve *rs = NULL;
        st = nn__rnn_cudnn_reserve_new(ctx, e, &rs);
        if (st == NN_OK) st = nn__rnn_cudnn_forward_eager(ctx, h, p, e, &fio, rs);
        if (st == NN_OK && grads) st = nn__rnn_cudnn_backward_eager(ctx, h, p, e, rs, &bio);
        nn__rnn_cudnn_reserve_unref(rs);
        if (st == NN_OK) e->warm[W_TRAIN] = e->warm[W_BWD] = 1;
    }
    if (st == NN_OK && infer) {
        st = nn__rnn_cudnn_forward_eager(ctx, h, p, e, &iio, NULL);
        if (st == NN_OK) e->warm[W_INFER] = 1;
    }
    int got = 0;
    if (st == NN_OK && p->lengths_kind != NN__RNN_LENGTHS_VARIED && e->warm[W_TRAIN] && grads &&
        nn__rnn_cudnn_replay_wanted(ctx, e, U_TRAIN)) {
        struct reserve *rs = NULL;
        int done = 0;
        nn_status cs = nn__rnn_cudnn_forward_replay(ctx, h, p, e, &fio, 1, &rs, &done);
        if (cs == NN_OK && done) cs = nn__rnn_cudnn_backward_replay(ctx, h, p, e, rs, &bio, &done);
        nn__rnn_cudnn_reserve_unref(rs); /* the slot is free again, its graphs kept */
        if (cs != NN_OK)
            nn__rnn_cudnn_disable_replay(
                e, "a capture or graph update failed (the context's last error)");
        got |= cs == NN_OK && done;
    }
    if (st == NN_OK && p->lengths_kind != NN__RNN_LENGTHS_VARIED && e->warm[W_INFER] &&
        nn__rnn_cudnn_replay_wanted(ctx, e, U_INFER)) {
        struct reserve *none = NULL;
        int done = 0;
        if (nn__rnn_cudnn_forward_replay(ctx, h, p, e, &iio, 0, &none, &done) != NN_OK)
            nn__rnn_cudnn_disable_replay(
                e, "a capture or graph update failed (the context's last error)");
        got |= done;
    }
    *captured += got;
    e->captured = 0;
    e->prepared = st == NN_OK;
    nn__dev_free(ctx, g.base);
    return st;
}

struct loaded {
    struct nn__cache *c;
    struct nn__cache_settings now;
    struct rnn_key *keys;
    int32_t *flags;
    size_t n, cap;
};

static int collect_loaded(void *arg, const struct nn__cache_kind *kind, const void *key,
                          const struct nn__cache_view *v)
{
    struct loaded *l = arg;
    const struct rnn_key *k = key;
    if (kind->id != NN__RNN_CUDNN_KIND_ID || !nn__cache_settings_equal(&k->s, &l->now) ||
        nn__cache_is_live(l->c, kind->id, key))
        return 0;
    if (l->n == l->cap) return 1;
    l->keys[l->n] = *k;
    l->flags[l->n++] = ((const struct rnn_record *)v->record)->flags;
    return 0;
}

/* The cache kind's loaded hook (cache.h), on the loading thread and the context's stream:
 * synchronous, since the cuDNN handle, the stream (which a capture takes over) and the pool are
 * the context's, which the caller's thread uses. Each record of the context's settings, up to
 * the cache's free room, is prepared (prepare_one); one that fails is left to its first call.
 * The cost moves to the load: about a first call of each shape (0.8-171 ms measured for the
 * anchors' first steps) plus its captures. */
void nn__rnn_cudnn_prepare_loaded(struct nn_ctx *ctx)
{
    struct loaded l;
    memset(&l, 0, sizeof l);
    l.c = nn__cudnn_plan_cache(ctx);
    nn__cache_settings_fill(ctx, &l.now);
    size_t cap = (size_t)nn__cache_capacity(l.c), live = nn__cache_size(l.c);
    l.cap = cap > live ? cap - live : 0;
    size_t known = nn__cache_known_count(l.c);
    if (l.cap > known) l.cap = known;
    if (!l.cap) return;
    l.keys = nn__host_alloc(l.cap * sizeof *l.keys);
    l.flags = nn__host_alloc(l.cap * sizeof *l.flags);
    struct nn__error_kept keep = nn__error_keep(ctx);
    if (l.keys && l.flags) nn__cache_visit(l.c, collect_loaded, &l);
    uint64_t t0 = nn__now_ns();
    int ready = 0, captured = 0, failed = 0;
    for (size_t i = 0; i < l.n; i++) {
        struct nn__rnn_problem p;
        problem_of_key(&l.keys[i], &p);
        int64_t numel;
        if (nn__rnn_weights_numel(&p, &numel) != 0) continue; /* build would refuse it */
        nn__cudnn_shared_enter(ctx);
        nn_status st = prepare_one(ctx, &p, l.flags[i], &captured);
        nn__cudnn_shared_leave(ctx);
        if (st == NN_OK) {
            ready++;
        } else {
            (void)cudaGetLastError();
            if (!failed++ && nn__verbose(ctx))
                nn__log("plan cache: preparing a recurrent shape failed, its first call builds "
                        "it: %s",
                        ctx->last_error.message);
        }
    }
    /* The preparation's GPU work is part of the load: left queued, it would delay the caller's
     * first calls on the device (and land in the first step a benchmark times). */
    if (l.n && cudaStreamSynchronize((cudaStream_t)ctx->stream) != cudaSuccess)
        (void)cudaGetLastError();
    if (nn__verbose(ctx) && l.n)
        nn__log("plan cache: %d recurrent shapes prepared (first calls done, %d with their graphs "
                "captured) in %.1f ms",
                ready, captured, (double)(nn__now_ns() - t0) / 1e6);
    nn__error_restore(ctx, &keep);
    nn__host_free(l.keys);
    nn__host_free(l.flags);
}

/* The reference recurrent layers: plain loops in double, the equations of include/nnprim/rnn.h
 * (docs/RNN.md). They define the semantics the cuDNN path must match. Backward runs the forward
 * again from the pullback's views, recording every step, then back-propagates through time: the
 * reference keeps no state between the two calls. */
#include <math.h>
#include <string.h>

#include "core/alloc.h"
#include "core/elem.h"
#include "core/error.h"
#include "rnn/rnn_internal.h"

/* ---------------------------------------------------------------------------------------------
 * The packed buffer: per pseudo-layer (layer * D + direction) the W side's matrix, the R side's,
 * the projection, then the W side's bias and the R side's, each present or not by the parameters
 * (the order cuDNN reports its own views in; rnn.c never relies on it).
 */

static const nn_rnn_weight_name order[] = {NN_RNN_WEIGHT_IH, NN_RNN_WEIGHT_HH, NN_RNN_WEIGHT_HR,
                                           NN_RNN_BIAS_IH, NN_RNN_BIAS_HH};

static int64_t view_numel(const struct nn__rnn_problem *p, int64_t layer, nn_rnn_weight_name name)
{
    if (!nn__rnn_view_exists(p, layer, name)) return 0;
    int64_t d[2];
    int rank = nn__rnn_view_dims(p, layer, name, d);
    return rank == 2 ? d[0] * d[1] : d[0];
}

/* rnn.c has checked that the count fits int64 (so every partial sum below does too). */
nn_status nn__rnn_weights_size_ref(struct nn_ctx *ctx, const struct nn__rnn_problem *p,
                                   int64_t *numel, struct nn__rnn_note *note)
{
    (void)ctx, (void)note;
    (void)nn__rnn_weights_numel(p, numel);
    return NN_OK;
}

nn_status nn__rnn_weight_offset_ref(struct nn_ctx *ctx, const struct nn__rnn_problem *p,
                                    int64_t pseudo, nn_rnn_weight_name name, int64_t *offset)
{
    (void)ctx;
    /* Pseudo-layers of layer 0 come first, then those of the layers above, which are alike. */
    int64_t s0 = nn__rnn_layer_numel(p, 0), s1 = p->layers > 1 ? nn__rnn_layer_numel(p, 1) : 0;
    int64_t off = pseudo < p->dirs ? pseudo * s0 : p->dirs * s0 + (pseudo - p->dirs) * s1;
    for (int k = 0; order[k] != name; k++)
        off += view_numel(p, pseudo / p->dirs, order[k]);
    *offset = off;
    return NN_OK;
}

/* The views of one pseudo-layer inside a double copy of the buffer; NULL where absent. */
struct views {
    double *W, *R, *Wr, *bW, *bR;
};

static struct views views_of(const struct nn__rnn_problem *p, double *buf, int64_t pseudo)
{
    double **slot[5];
    struct views v = {0};
    slot[NN_RNN_WEIGHT_IH] = &v.W;
    slot[NN_RNN_WEIGHT_HH] = &v.R;
    slot[NN_RNN_WEIGHT_HR] = &v.Wr;
    slot[NN_RNN_BIAS_IH] = &v.bW;
    slot[NN_RNN_BIAS_HH] = &v.bR;
    for (int k = 0; k < 5; k++) {
        if (!nn__rnn_view_exists(p, pseudo / p->dirs, order[k])) continue;
        int64_t off;
        nn__rnn_weight_offset_ref(NULL, p, pseudo, order[k], &off);
        *slot[order[k]] = buf + off;
    }
    return v;
}

/* ---------------------------------------------------------------------------------------------
 * One run: the weights in double and every step's record, in one host block.
 */

struct layer_rec {
    int64_t in_w;     /* width of the layer's input */
    double *in;       /* T x N x in_w: the layer's input, after dropout */
    double *out;      /* T x N x D*O: h after each step (0 at padded positions) */
    double *gates[2]; /* per direction, T x N x G*H: after their nonlinearities */
    double *aux[2];   /* LSTM: c after the step (unclamped); GRU: R_n h + bR_n */
    double *m[2];     /* LSTM with a projection: o * tanh(clip(c)) before W_hr */
};

struct run {
    const struct nn__rnn_problem *p;
    const int32_t *lengths;
    int drop; /* inverted dropout between layers */
    int64_t nw;
    double *w, *dw;
    struct layer_rec *rec;
    double *v; /* step vectors, 16 of width vw */
    int64_t vw;
    void *block;
};

static int64_t len_of(const struct run *r, int64_t n)
{
    return r->lengths ? r->lengths[n] : r->p->t;
}

/* Sizes in doubles, with overflow checks; a NULL base only counts. */
struct carve {
    double *base;
    size_t used;
    int overflow;
};

static double *take(struct carve *c, int64_t a, int64_t b, int64_t d)
{
    size_t n;
    if (__builtin_mul_overflow((size_t)a, (size_t)b, &n) ||
        __builtin_mul_overflow(n, (size_t)d, &n) || __builtin_add_overflow(c->used, n, &c->used)) {
        c->overflow = 1;
        return NULL;
    }
    return c->base ? c->base + (c->used - n) : NULL;
}

static void layout_run(struct run *r, struct carve *c, int backward)
{
    const struct nn__rnn_problem *p = r->p;
    int64_t gh = p->gates * p->hidden, tn = p->t * p->n;
    r->w = take(c, r->nw, 1, 1);
    r->dw = backward ? take(c, r->nw, 1, 1) : NULL;
    r->vw = gh > p->out ? gh : p->out;
    r->v = take(c, 16, r->vw, 1);
    for (int64_t l = 0; l < p->layers; l++) {
        struct layer_rec *L = &r->rec[l];
        L->in_w = nn__rnn_layer_input(p, l);
        L->in = take(c, tn, L->in_w, 1);
        L->out = take(c, tn, p->dirs, p->out);
        for (int d = 0; d < p->dirs; d++) {
            L->gates[d] = take(c, tn, gh, 1);
            L->aux[d] =
                p->cell == NN_RNN_LSTM || p->cell == NN_RNN_GRU ? take(c, tn, p->hidden, 1) : NULL;
            L->m[d] = p->proj ? take(c, tn, p->hidden, 1) : NULL;
        }
    }
}

static nn_status run_open(struct nn_ctx *ctx, const char *op, const struct nn__rnn_problem *p,
                          const struct nn__rnn_io *io, int backward, struct run *r)
{
    memset(r, 0, sizeof *r);
    r->p = p;
    r->lengths = io->lengths;
    NN__TRY(nn__rnn_weights_size_ref(ctx, p, &r->nw, NULL));
    r->rec = nn__host_calloc((size_t)p->layers, sizeof *r->rec);
    if (!r->rec)
        return NN__FAIL(ctx, NN_E_OOM_HOST, "%s: out of host memory for the reference's records",
                        op);
    struct carve c = {0};
    layout_run(r, &c, backward);
    if (c.overflow) {
        nn__host_free(r->rec);
        return NN__FAIL(ctx, NN_E_OVERFLOW, "%s: the reference's records overflow size_t", op);
    }
    r->block = c.used ? nn__host_calloc(c.used, sizeof(double)) : NULL;
    if (c.used && !r->block) {
        nn__host_free(r->rec);
        return NN__FAIL(ctx, NN_E_OOM_HOST,
                        "%s: out of host memory for the reference's records (%zu bytes)", op,
                        c.used * sizeof(double));
    }
    c = (struct carve){r->block, 0, 0};
    layout_run(r, &c, backward);
    for (int64_t i = 0; i < r->nw; i++)
        r->w[i] = nn__load(io->w->data, io->w->dtype, i);
    return NN_OK;
}

static void run_close(struct run *r)
{
    nn__host_free(r->block);
    nn__host_free(r->rec);
}

/* ---------------------------------------------------------------------------------------------
 * Forward
 */

static double sigm(double a)
{
    return 1.0 / (1.0 + exp(-a));
}

static double clip(const struct nn__rnn_problem *p, double c)
{
    if (!p->clip_enabled) return c;
    return c < p->clip_lo ? p->clip_lo : c > p->clip_hi ? p->clip_hi : c;
}

/* d clip(c) / dc: 1 inside the bounds (or without a clip), else 0. */
static double clip_grad(const struct nn__rnn_problem *p, double c)
{
    return !p->clip_enabled || (c >= p->clip_lo && c <= p->clip_hi);
}

static uint64_t mix(uint64_t z)
{
    z += 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Inverted dropout of element j of layer l's input at (t, n): 0 or 1 / (1 - dropout), a function
 * of the seed and the position only. */
static double drop_factor(const struct nn__rnn_problem *p, int64_t l, int64_t t, int64_t n,
                          int64_t j)
{
    uint64_t h = mix(p->dropout_seed);
    h = mix(h ^ (uint64_t)l);
    h = mix(h ^ (uint64_t)t);
    h = mix(h ^ (uint64_t)n);
    h = mix(h ^ (uint64_t)j);
    double u = (double)(h >> 11) * 0x1p-53;
    return u < p->dropout ? 0.0 : 1.0 / (1.0 - p->dropout);
}

/* Offset in elements of (t, n, channel 0) in a T x N x C or N x T x C tensor. */
static int64_t seq_index(const struct nn__rnn_problem *p, int64_t t, int64_t n, int64_t c)
{
    return (p->layout == NN_RNN_SEQ_MAJOR ? t * p->n + n : n * p->t + t) * c;
}

/* acc[i] (+)= M[i, :] . v for an rows x cols row-major M; M NULL is the identity per gate block
 * (skip input: v has width H and feeds every gate). */
static void matvec(double *acc, const double *M, const double *v, int64_t rows, int64_t cols)
{
    for (int64_t i = 0; i < rows; i++) {
        double s = 0;
        if (M)
            for (int64_t j = 0; j < cols; j++)
                s += M[i * cols + j] * v[j];
        else
            s = v[i % cols];
        acc[i] += s;
    }
}

static void load_state(const nn_tensor *t, int64_t pseudo, int64_t n, int64_t nn, int64_t w,
                       double *out)
{
    for (int64_t j = 0; j < w; j++)
        out[j] = t ? nn__load(t->data, t->dtype, (pseudo * nn + n) * w + j) : 0.0;
}

static void store_state(nn_tensor *t, int64_t pseudo, int64_t n, int64_t nn, int64_t w,
                        const double *v)
{
    if (!t) return;
    for (int64_t j = 0; j < w; j++)
        nn__store(t->data, t->dtype, (pseudo * nn + n) * w + j, v[j]);
}

/* One step of one cell: h, c (the state before) to hn, cn; records gates, aux and m at rec. */
static void cell_step(const struct nn__rnn_problem *p, const struct views *v, const double *xin,
                      int64_t in_w, const double *h, const double *c, double *hn, double *cn,
                      double *g, double *aux, double *m, double *wx, double *rh)
{
    int64_t H = p->hidden, gh = p->gates * H;
    for (int64_t i = 0; i < gh; i++) {
        wx[i] = v->bW ? v->bW[i] : 0.0;
        rh[i] = v->bR ? v->bR[i] : 0.0;
    }
    matvec(wx, v->W, xin, gh, in_w);
    matvec(rh, v->R, h, gh, p->out);
    switch (p->cell) {
    case NN_RNN_RELU:
    case NN_RNN_TANH:
        for (int64_t k = 0; k < H; k++) {
            double a = wx[k] + rh[k];
            g[k] = hn[k] = p->cell == NN_RNN_RELU ? (a > 0 ? a : 0) : tanh(a);
        }
        break;
    case NN_RNN_LSTM:
        for (int64_t k = 0; k < H; k++) {
            double i = sigm(wx[k] + rh[k]), f = sigm(wx[H + k] + rh[H + k]);
            double gg = tanh(wx[2 * H + k] + rh[2 * H + k]),
                   o = sigm(wx[3 * H + k] + rh[3 * H + k]);
            g[k] = i, g[H + k] = f, g[2 * H + k] = gg, g[3 * H + k] = o;
            cn[k] = aux[k] = f * clip(p, c[k]) + i * gg;
            double mk = o * tanh(clip(p, cn[k]));
            if (m)
                m[k] = mk;
            else
                hn[k] = mk;
        }
        if (m) {
            for (int64_t j = 0; j < p->proj; j++)
                hn[j] = 0;
            matvec(hn, v->Wr, m, p->proj, H);
        }
        break;
    case NN_RNN_GRU:
        for (int64_t k = 0; k < H; k++) {
            double r = sigm(wx[k] + rh[k]), z = sigm(wx[H + k] + rh[H + k]);
            double nk = tanh(wx[2 * H + k] + r * rh[2 * H + k]);
            g[k] = r, g[H + k] = z, g[2 * H + k] = nk;
            aux[k] = rh[2 * H + k];
            hn[k] = (1 - z) * nk + z * h[k];
        }
        break;
    }
}

/* The whole forward, recording into r; writes y, hy, cy when they are not NULL. */
static void forward_all(struct run *r, const struct nn__rnn_io *io, nn_tensor *y, nn_tensor *hy,
                        nn_tensor *cy)
{
    const struct nn__rnn_problem *p = r->p;
    int64_t T = p->t, N = p->n, O = p->out, H = p->hidden, D = p->dirs, gh = p->gates * H;
    double *h = r->v, *c = h + r->vw, *hn = c + r->vw, *cn = hn + r->vw, *wx = cn + r->vw,
           *rh = wx + r->vw;
    for (int64_t t = 0; t < T; t++)
        for (int64_t n = 0; n < N; n++)
            for (int64_t j = 0; j < p->input; j++)
                r->rec[0].in[(t * N + n) * p->input + j] =
                    nn__load(io->x->data, io->x->dtype, seq_index(p, t, n, p->input) + j);
    for (int64_t l = 0; l < p->layers; l++) {
        struct layer_rec *L = &r->rec[l];
        if (l > 0) {
            const double *prev = r->rec[l - 1].out;
            for (int64_t t = 0; t < T; t++)
                for (int64_t n = 0; n < N; n++)
                    for (int64_t j = 0; j < L->in_w; j++) {
                        int64_t i = (t * N + n) * L->in_w + j;
                        L->in[i] = r->drop ? prev[i] * drop_factor(p, l, t, n, j) : prev[i];
                    }
        }
        for (int d = 0; d < D; d++) {
            int64_t pl = l * D + d;
            struct views v = views_of(p, r->w, pl);
            for (int64_t n = 0; n < N; n++) {
                int64_t len = len_of(r, n);
                load_state(io->hx, pl, n, N, O, h);
                load_state(p->cell == NN_RNN_LSTM ? io->cx : NULL, pl, n, N, H, c);
                for (int64_t s = 0; s < len; s++) {
                    int64_t t = d ? len - 1 - s : s, tn = t * N + n;
                    cell_step(p, &v, L->in + tn * L->in_w, L->in_w, h, c, hn, cn,
                              L->gates[d] + tn * gh, L->aux[d] ? L->aux[d] + tn * H : NULL,
                              L->m[d] ? L->m[d] + tn * H : NULL, wx, rh);
                    memcpy(L->out + tn * D * O + d * O, hn, (size_t)O * sizeof *hn);
                    memcpy(h, hn, (size_t)O * sizeof *h);
                    if (p->cell == NN_RNN_LSTM) memcpy(c, cn, (size_t)H * sizeof *c);
                }
                store_state(hy, pl, n, N, O, h);
                if (p->cell == NN_RNN_LSTM) store_state(cy, pl, n, N, H, c);
            }
        }
    }
    if (!y) return;
    const double *top = r->rec[p->layers - 1].out;
    for (int64_t t = 0; t < T; t++)
        for (int64_t n = 0; n < N; n++)
            for (int64_t j = 0; j < D * O; j++)
                nn__store(y->data, y->dtype, seq_index(p, t, n, D * O) + j,
                          t < len_of(r, n) ? top[(t * N + n) * D * O + j] : 0.0);
}

nn_status nn__rnn_forward_ref(struct nn_ctx *ctx, const struct nn__rnn_problem *p,
                              const struct nn__rnn_io *io, void **state, struct nn__rnn_note *note)
{
    (void)note; /* the line names the backend and no cache */
    struct run r;
    NN__TRY(run_open(ctx, "nn_rnn_forward", p, io, 0, &r));
    r.drop = io->training && p->dropout > 0;
    forward_all(&r, io, io->y_out, io->hy, io->cy);
    run_close(&r);
    if (state) *state = NULL; /* backward runs the forward again from the pullback's views */
    return NN_OK;
}

void nn__rnn_state_free_ref(struct nn_ctx *ctx, void *state)
{
    (void)ctx;
    (void)state;
}

/* The reference works in host memory: it takes nothing from the device pool. */
nn_status nn__rnn_workspace_ref(struct nn_ctx *ctx, const struct nn__rnn_problem *p,
                                nn_rnn_pass pass, size_t *bytes)
{
    (void)ctx, (void)p, (void)pass;
    *bytes = 0;
    return NN_OK;
}

/* ---------------------------------------------------------------------------------------------
 * Backward through time
 */

/* The gradients of one step: dh (width O) and dc (H) with respect to hn, cn come in; daW and daR
 * (G*H) with respect to the W- and R-side sums go out, and dhd, dc become the direct parts of the
 * gradients with respect to h (before R^T daR is added) and c. */
static void cell_step_back(const struct nn__rnn_problem *p, const struct views *v, struct views *dv,
                           const double *g, const double *aux, const double *m, const double *hprev,
                           const double *cprev, const double *hn, const double *dh, double *dc,
                           double *daW, double *daR, double *dhd, double *dm)
{
    int64_t H = p->hidden;
    switch (p->cell) {
    case NN_RNN_RELU:
    case NN_RNN_TANH:
        for (int64_t k = 0; k < H; k++) {
            daW[k] = daR[k] = dh[k] * (p->cell == NN_RNN_RELU ? (hn[k] > 0) : 1 - hn[k] * hn[k]);
            dhd[k] = 0;
        }
        break;
    case NN_RNN_LSTM:
        if (m) {
            for (int64_t k = 0; k < H; k++) {
                double s = 0;
                for (int64_t j = 0; j < p->proj; j++) {
                    s += v->Wr[j * H + k] * dh[j];
                    dv->Wr[j * H + k] += dh[j] * m[k];
                }
                dm[k] = s;
            }
        } else {
            memcpy(dm, dh, (size_t)H * sizeof *dm);
        }
        for (int64_t k = 0; k < H; k++) {
            double i = g[k], f = g[H + k], gg = g[2 * H + k], o = g[3 * H + k];
            double tc = tanh(clip(p, aux[k])), cp = clip(p, cprev[k]);
            double dct = dc[k] + dm[k] * o * (1 - tc * tc) * clip_grad(p, aux[k]);
            daW[3 * H + k] = dm[k] * tc * o * (1 - o);
            daW[H + k] = dct * cp * f * (1 - f);
            daW[k] = dct * gg * i * (1 - i);
            daW[2 * H + k] = dct * i * (1 - gg * gg);
            dc[k] = dct * f * clip_grad(p, cprev[k]);
        }
        memcpy(daR, daW, (size_t)(4 * H) * sizeof *daR);
        for (int64_t k = 0; k < p->out; k++)
            dhd[k] = 0;
        break;
    case NN_RNN_GRU:
        for (int64_t k = 0; k < H; k++) {
            double r = g[k], z = g[H + k], nk = g[2 * H + k];
            double dan = dh[k] * (1 - z) * (1 - nk * nk);
            daW[2 * H + k] = dan;
            daR[2 * H + k] = dan * r;
            daW[k] = daR[k] = dan * aux[k] * r * (1 - r);
            daW[H + k] = daR[H + k] = dh[k] * (hprev[k] - nk) * z * (1 - z);
            dhd[k] = dh[k] * z;
        }
        break;
    }
}

/* acc[j] += sum_i M[i, j] da[i] (M rows x cols; NULL is the per-gate identity of skip input),
 * and dM[i, j] += da[i] v[j]. */
static void back_affine(double *acc, const double *M, double *dM, const double *da, const double *v,
                        int64_t rows, int64_t cols)
{
    for (int64_t i = 0; i < rows; i++) {
        if (!M) {
            if (acc) acc[i % cols] += da[i];
            continue;
        }
        for (int64_t j = 0; j < cols; j++) {
            if (acc) acc[j] += M[i * cols + j] * da[i];
            dM[i * cols + j] += da[i] * v[j];
        }
    }
}

static void add_bias(double *db, const double *da, int64_t n)
{
    if (db)
        for (int64_t i = 0; i < n; i++)
            db[i] += da[i];
}

/* One layer and direction: dout is the gradient with respect to the layer's output (T x N x
 * D*O), din receives the gradient with respect to its input. */
static void layer_back(struct run *r, const struct nn__rnn_io *io, int64_t l, int d,
                       const double *dout, double *din)
{
    const struct nn__rnn_problem *p = r->p;
    const struct layer_rec *L = &r->rec[l];
    int64_t N = p->n, O = p->out, H = p->hidden, D = p->dirs, gh = p->gates * H, pl = l * D + d;
    int lstm = p->cell == NN_RNN_LSTM;
    struct views v = views_of(p, r->w, pl), dv = views_of(p, r->dw, pl);
    double *h0 = r->v + 6 * r->vw, *c0 = h0 + r->vw, *dh = c0 + r->vw, *dc = dh + r->vw,
           *daW = dc + r->vw, *daR = daW + r->vw, *dhd = daR + r->vw, *dm = dhd + r->vw;
    for (int64_t n = 0; n < N; n++) {
        int64_t len = len_of(r, n);
        load_state(io->hx, pl, n, N, O, h0);
        load_state(lstm ? io->cx : NULL, pl, n, N, H, c0);
        load_state(io->dhy, pl, n, N, O, dh);
        load_state(lstm ? io->dcy : NULL, pl, n, N, H, dc);
        for (int64_t s = len - 1; s >= 0; s--) {
            int64_t t = d ? len - 1 - s : s, tn = t * N + n, tp = d ? t + 1 : t - 1;
            const double *hprev = s ? L->out + (tp * N + n) * D * O + d * O : h0;
            const double *cprev = !lstm ? NULL : s ? L->aux[d] + (tp * N + n) * H : c0;
            for (int64_t j = 0; j < O; j++)
                dh[j] += dout[tn * D * O + d * O + j];
            cell_step_back(p, &v, &dv, L->gates[d] + tn * gh, L->aux[d] ? L->aux[d] + tn * H : NULL,
                           L->m[d] ? L->m[d] + tn * H : NULL, hprev, cprev,
                           L->out + tn * D * O + d * O, dh, dc, daW, daR, dhd, dm);
            back_affine(din + tn * L->in_w, v.W, dv.W, daW, L->in + tn * L->in_w, gh, L->in_w);
            add_bias(dv.bW, daW, gh);
            back_affine(dhd, v.R, dv.R, daR, hprev, gh, O);
            add_bias(dv.bR, daR, gh);
            memcpy(dh, dhd, (size_t)O * sizeof *dh);
        }
        store_state(io->dhx, pl, n, N, O, dh);
        if (lstm) store_state(io->dcx, pl, n, N, H, dc);
    }
}

nn_status nn__rnn_backward_ref(struct nn_ctx *ctx, const struct nn__rnn_problem *p, void *state,
                               const struct nn__rnn_io *io, struct nn__rnn_note *note)
{
    (void)state, (void)note;
    struct run r;
    NN__TRY(run_open(ctx, "nn_rnn_backward", p, io, 1, &r));
    r.drop = p->dropout > 0; /* a pullback exists only for a training call */
    forward_all(&r, io, NULL, NULL, NULL);
    int64_t T = p->t, N = p->n, DO = p->dirs * p->out, maxw = DO > p->input ? DO : p->input;
    double *dout = nn__host_calloc((size_t)(T * N), (size_t)maxw * sizeof(double));
    double *din = nn__host_calloc((size_t)(T * N), (size_t)maxw * sizeof(double));
    if (!dout || !din) {
        nn__host_free(dout);
        nn__host_free(din);
        run_close(&r);
        return NN__FAIL(ctx, NN_E_OOM_HOST, "nn_rnn_backward: out of host memory for gradients");
    }
    if (io->dy)
        for (int64_t t = 0; t < T; t++)
            for (int64_t n = 0; n < N; n++)
                for (int64_t j = 0; t < len_of(&r, n) && j < DO; j++)
                    dout[(t * N + n) * DO + j] =
                        nn__load(io->dy->data, io->dy->dtype, seq_index(p, t, n, DO) + j);
    for (int64_t l = p->layers - 1; l >= 0; l--) {
        int64_t in_w = r.rec[l].in_w;
        memset(din, 0, (size_t)(T * N * in_w) * sizeof *din);
        for (int d = 0; d < p->dirs; d++)
            layer_back(&r, io, l, d, dout, din);
        for (int64_t t = 0; l > 0 && t < T; t++)
            for (int64_t n = 0; n < N; n++)
                for (int64_t j = 0; j < in_w; j++) {
                    int64_t i = (t * N + n) * in_w + j;
                    dout[i] = r.drop ? din[i] * drop_factor(p, l, t, n, j) : din[i];
                }
    }
    if (io->dx)
        for (int64_t t = 0; t < T; t++)
            for (int64_t n = 0; n < N; n++)
                for (int64_t j = 0; j < p->input; j++)
                    nn__store(io->dx->data, io->dx->dtype, seq_index(p, t, n, p->input) + j,
                              t < len_of(&r, n) ? din[(t * N + n) * p->input + j] : 0.0);
    if (io->dw)
        for (int64_t i = 0; i < r.nw; i++) {
            double old = io->accumulate ? nn__load(io->dw->data, io->dw->dtype, i) : 0.0;
            nn__store(io->dw->data, io->dw->dtype, i, old + r.dw[i]);
        }
    nn__host_free(dout);
    nn__host_free(din);
    run_close(&r);
    return NN_OK;
}

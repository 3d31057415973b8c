/* `nnprim bench rnn`: time the recurrent passes per shape, nnprim against raw cuDNN.
 *
 * Passes: forward (training), backward-data, backward-weights and the whole training step
 * (forward, data, weights). nnprim's backward-data is nn_rnn_backward without dw; its
 * backward-weights is not a call of its own (nn_rnn_backward always runs the data pass first, the
 * only order cuDNN gets right), so its column is backward (data and weights) minus
 * backward-data, "n/a" where that difference is no measure of it (weights_part). The raw column
 * runs the same cuDNN calls with descriptors, workspace and reserve set up once, outside the
 * timing, so the difference is nnprim's own cost.
 *
 * Timing alike on both sides: every timed pass sits between a CUDA event pair on the context's
 * stream, passes issued back to back; what a pass needs first (a forward before a backward) is
 * queued before the first event, untimed; the figure is the median over the repetitions after
 * warm-up passes. The two sides take turns, a few repetitions at a time (time_pass). Host time per
 * call is the host clock around the timed call itself (the median too). On a reference context the
 * host clock times everything and the raw columns are "-".
 *
 * Wall time per training step (the figure a training loop sees): steps issued back to back, the
 * host clock from the first to the end of a final synchronisation, divided by the steps. nnprim
 * runs as chosen (the settings' NNPRIM_RNN_GRAPHS, auto by default: its decision, made during
 * untimed steps first, is the "mode" column) and forced eager on a second context; raw cuDNN runs
 * eager. first_step is the shape's first training step, synchronised, after the tensors' fills
 * have completed (with NNPRIM_PLAN_CACHE naming a file from `nnprim tune`: the step a prepared
 * record starts from, the shape's descriptors, cuDNN's first calls and, where it replays, its
 * graphs done when the context loaded the file; the bench prints what that load cost). sync_step is
 * the median of later steps timed the same way, one at a time, each waited for, and x_first is
 * first_step / sync_step: what the first step costs beyond any step's latency. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nn_config.h"
#include "cli/args.h"
#include "cli/bench_util.h"
#include "cli/cli.h"
#include "rnn/rnn_internal.h"
#include "tests/harness/rnn_case.h"

#if NN_HAVE_CUDNN
#include "core/cuda_load.h"
#endif

static const char *const small_shapes[] = {
    "lstm t2n1i8h8 l1 uni",
    "lstm t10n4i32h32 l2 bidir",
    "gru t10n4i32h32 l1 uni lens10x7x3x1",
    "tanh t10n4i32h32 l1 uni",
};

enum pass { FWD, DATA, WEIGHTS, STEP, N_PASS };
static const char *const pass_names[N_PASS] = {"fwd", "data", "weights", "step"};

struct shape {
    nn_ctx *ctx;
    struct nn_rnn_case c;
    nn_tensor x, hx, cx, w, y, hy, cy, dy, dx, dhx, dcx, dw;
    nn_rnn_pullback *pb;
#if NN_HAVE_CUDNN
    struct raw *raw[2]; /* raw cuDNN; the control (--control), NULL without */
#endif
};

/* One side's passes: prep (untimed, queued first), the timed call, post (untimed); k: which of
 * the shape's raw sides (raw cuDNN's functions only). */
struct side {
    int (*prep)(struct shape *, int k, enum pass);
    int (*run)(struct shape *, int k, enum pass);
    int (*post)(struct shape *, int k, enum pass);
    int k;
};

/* ---------------------------------------------------------------------------------------------
 * nnprim
 */

static const int32_t *lengths_of(const struct shape *s)
{
    return s->c.has_lengths ? s->c.lengths : NULL;
}

static int nn_fwd(struct shape *s)
{
    return nn_rnn_forward(
               s->ctx, &s->c.p,
               &(nn_rnn_forward_tensors){.x = &s->x,
                                         .lengths = lengths_of(s),
                                         .hx = &s->hx,
                                         .cx = s->c.p.cell == NN_RNN_LSTM ? &s->cx : NULL,
                                         .w = &s->w,
                                         .y = &s->y,
                                         .hy = &s->hy,
                                         .cy = s->c.p.cell == NN_RNN_LSTM ? &s->cy : NULL},
               &s->pb) != NN_OK;
}

static int nn_bwd(struct shape *s, int with_dw)
{
    int lstm = s->c.p.cell == NN_RNN_LSTM;
    return nn_rnn_backward(s->ctx, &s->pb,
                           &(nn_rnn_backward_tensors){.dy = &s->dy,
                                                      .dx = &s->dx,
                                                      .dhx = &s->dhx,
                                                      .dcx = lstm ? &s->dcx : NULL,
                                                      .dw = with_dw ? &s->dw : NULL}) != NN_OK;
}

static int nn_prep(struct shape *s, int k, enum pass p)
{
    (void)k;
    return p == DATA || p == WEIGHTS ? nn_fwd(s) : 0;
}

static int nn_run(struct shape *s, int k, enum pass p)
{
    (void)k;
    switch (p) {
    case FWD: return nn_fwd(s);
    case DATA: return nn_bwd(s, 0);
    case WEIGHTS: return nn_bwd(s, 1); /* data + weights; the weights part is derived */
    case STEP: return nn_fwd(s) || nn_bwd(s, 1);
    default: return 1;
    }
}

static int nn_post(struct shape *s, int k, enum pass p)
{
    (void)k;
    (void)p;
    return nn_rnn_pullback_free(&s->pb) != NN_OK;
}

static const struct side nnprim_side = {nn_prep, nn_run, nn_post, 0};

/* ---------------------------------------------------------------------------------------------
 * Raw cuDNN: the same calls with everything set up once
 */

#if NN_HAVE_CUDNN
struct raw {
    cudnnHandle_t h;
    cudnnRNNDescriptor_t rnn;
    cudnnDropoutDescriptor_t drop;
    cudnnRNNDataDescriptor_t xd, yd;
    cudnnTensorDescriptor_t hd, cd;
    size_t wbytes, ws_bytes, rs_bytes;
    void *ws, *rs;
    int lstm;
};

#define RAW_TRY(call)                                                                              \
    do {                                                                                           \
        cudnnStatus_t st_ = (call);                                                                \
        if (st_ != CUDNN_STATUS_SUCCESS) {                                                         \
            fprintf(stderr, "# raw cuDNN: %s: %s\n", #call, cudnnGetErrorString(st_));             \
            return -1;                                                                             \
        }                                                                                          \
    } while (0)

static cudnnDataType_t raw_dtype(nn_dtype d)
{
    return d == NN_DTYPE_F64    ? CUDNN_DATA_DOUBLE
           : d == NN_DTYPE_F16  ? CUDNN_DATA_HALF
           : d == NN_DTYPE_BF16 ? CUDNN_DATA_BFLOAT16
                                : CUDNN_DATA_FLOAT;
}

static void raw_free(struct raw *r)
{
    if (!r) return;
    if (r->xd) cudnnDestroyRNNDataDescriptor(r->xd);
    if (r->yd) cudnnDestroyRNNDataDescriptor(r->yd);
    if (r->hd) cudnnDestroyTensorDescriptor(r->hd);
    if (r->cd) cudnnDestroyTensorDescriptor(r->cd);
    if (r->rnn) cudnnDestroyRNNDescriptor(r->rnn);
    if (r->drop) cudnnDestroyDropoutDescriptor(r->drop);
    if (r->ws) cudaFree(r->ws);
    if (r->rs) cudaFree(r->rs);
    if (r->h) cudnnDestroy(r->h);
    free(r);
}

/* Descriptors as a careful cuDNN user would set them for this case (no dropout: the bench runs
 * without), with the algorithm nnprim ran it with (its record: the most recently used one, this
 * shape's), so that the control does the same work. */
static int raw_setup(struct shape *s, struct raw *r)
{
    int32_t algo = CUDNN_RNN_ALGO_STANDARD, flags;
    (void)nn__rnn_cudnn_records(s->ctx, &algo, &flags, 1);
    const nn_rnn_params *p = &s->c.p;
    nn_settings set;
    nn_ctx_get_settings(s->ctx, &set);
    cudnnDataType_t dt = raw_dtype(s->c.dtype), prec = CUDNN_DATA_FLOAT;
    cudnnMathType_t math = set.math_mode == NN_MATH_TF32 ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH;
    if (s->c.dtype == NN_DTYPE_F64) prec = CUDNN_DATA_DOUBLE, math = CUDNN_DEFAULT_MATH;
    if (s->c.dtype == NN_DTYPE_F16 || s->c.dtype == NN_DTYPE_BF16) math = CUDNN_TENSOR_OP_MATH;
    static const cudnnRNNMode_t modes[] = {CUDNN_RNN_RELU, CUDNN_RNN_TANH, CUDNN_LSTM, CUDNN_GRU};
    static const cudnnRNNBiasMode_t biases[] = {CUDNN_RNN_NO_BIAS, CUDNN_RNN_SINGLE_INP_BIAS,
                                                CUDNN_RNN_SINGLE_REC_BIAS, CUDNN_RNN_DOUBLE_BIAS};
    int D = p->bidirectional ? 2 : 1, O = (int)nn__rnn_out_size(p->hidden_size, p->proj_size);
    int T = (int)s->c.t, N = (int)s->c.n, L = (int)p->num_layers, H = (int)p->hidden_size;
    r->lstm = p->cell == NN_RNN_LSTM;
    RAW_TRY(cudnnCreate(&r->h));
    RAW_TRY(cudnnSetStream(r->h, (cudaStream_t)nn_ctx_stream(s->ctx)));
    RAW_TRY(cudnnCreateDropoutDescriptor(&r->drop));
    RAW_TRY(cudnnSetDropoutDescriptor(r->drop, r->h, 0, NULL, 0, 0));
    RAW_TRY(cudnnCreateRNNDescriptor(&r->rnn));
    RAW_TRY(cudnnSetRNNDescriptor_v8(
        r->rnn, (cudnnRNNAlgo_t)algo, modes[p->cell], biases[p->bias_mode],
        D == 2 ? CUDNN_BIDIRECTIONAL : CUDNN_UNIDIRECTIONAL,
        p->input_mode == NN_RNN_INPUT_SKIP ? CUDNN_SKIP_INPUT : CUDNN_LINEAR_INPUT, dt, prec, math,
        (int32_t)p->input_size, H, O, L, r->drop, CUDNN_RNN_PADDED_IO_ENABLED));
    if (p->clip_enabled)
        RAW_TRY(cudnnRNNSetClip_v9(r->rnn, CUDNN_RNN_CLIP_MINMAX, p->clip_lo, p->clip_hi));
    RAW_TRY(cudnnGetRNNWeightSpaceSize(r->h, r->rnn, &r->wbytes));
    int *lens = malloc((size_t)N * sizeof *lens);
    if (!lens) return -1;
    for (int i = 0; i < N; i++)
        lens[i] = s->c.has_lengths ? s->c.lengths[i] : T;
    double zero = 0;
    cudnnRNNDataLayout_t layout = p->layout == NN_RNN_BATCH_MAJOR
                                      ? CUDNN_RNN_DATA_LAYOUT_BATCH_MAJOR_UNPACKED
                                      : CUDNN_RNN_DATA_LAYOUT_SEQ_MAJOR_UNPACKED;
    cudnnStatus_t st = cudnnCreateRNNDataDescriptor(&r->xd);
    if (!st) st = cudnnCreateRNNDataDescriptor(&r->yd);
    if (!st)
        st = cudnnSetRNNDataDescriptor(r->xd, dt, layout, T, N, (int)p->input_size, lens, &zero);
    if (!st) st = cudnnSetRNNDataDescriptor(r->yd, dt, layout, T, N, D * O, lens, &zero);
    free(lens);
    RAW_TRY(st);
    int hdims[3] = {L * D, N, O}, hstr[3] = {N * O, O, 1}, cdims[3] = {L * D, N, H},
        cstr[3] = {N * H, H, 1};
    RAW_TRY(cudnnCreateTensorDescriptor(&r->hd));
    RAW_TRY(cudnnSetTensorNdDescriptor(r->hd, dt, 3, hdims, hstr));
    RAW_TRY(cudnnCreateTensorDescriptor(&r->cd));
    RAW_TRY(cudnnSetTensorNdDescriptor(r->cd, dt, 3, cdims, cstr));
    RAW_TRY(cudnnGetRNNTempSpaceSizes(r->h, r->rnn, CUDNN_FWD_MODE_TRAINING, r->xd, &r->ws_bytes,
                                      &r->rs_bytes));
    if ((r->ws_bytes && cudaMalloc(&r->ws, r->ws_bytes) != cudaSuccess) ||
        (r->rs_bytes && cudaMalloc(&r->rs, r->rs_bytes) != cudaSuccess))
        return -1;
    return 0;
}

static int raw_fwd(struct shape *s, struct raw *r)
{
    return cudnnRNNForward(r->h, r->rnn, CUDNN_FWD_MODE_TRAINING, NULL, r->xd, s->x.data, r->yd,
                           s->y.data, r->hd, s->hx.data, s->hy.data, r->cd,
                           r->lstm ? s->cx.data : NULL, r->lstm ? s->cy.data : NULL, r->wbytes,
                           s->w.data, r->ws_bytes, r->ws, r->rs_bytes, r->rs) != 0;
}

static int raw_data(struct shape *s, struct raw *r)
{
    return cudnnRNNBackwardData_v8(r->h, r->rnn, NULL, r->yd, s->y.data, s->dy.data, r->xd,
                                   s->dx.data, r->hd, s->hx.data, NULL, s->dhx.data, r->cd,
                                   r->lstm ? s->cx.data : NULL, NULL, r->lstm ? s->dcx.data : NULL,
                                   r->wbytes, s->w.data, r->ws_bytes, r->ws, r->rs_bytes,
                                   r->rs) != 0;
}

static int raw_weights(struct shape *s, struct raw *r)
{
    /* overwrite, as nnprim's: cuDNN only adds */
    return cudaMemsetAsync(s->dw.data, 0, r->wbytes, (cudaStream_t)nn_ctx_stream(s->ctx)) != 0 ||
           cudnnRNNBackwardWeights_v8(r->h, r->rnn, CUDNN_WGRAD_MODE_ADD, NULL, r->xd, s->x.data,
                                      r->hd, s->hx.data, r->yd, s->y.data, r->wbytes, s->dw.data,
                                      r->ws_bytes, r->ws, r->rs_bytes, r->rs) != 0;
}

static int raw_prep(struct shape *s, int k, enum pass p)
{
    struct raw *r = s->raw[k];
    if (p == DATA) return raw_fwd(s, r);
    if (p == WEIGHTS) return raw_fwd(s, r) || raw_data(s, r);
    return 0;
}

static int raw_run(struct shape *s, int k, enum pass p)
{
    struct raw *r = s->raw[k];
    switch (p) {
    case FWD: return raw_fwd(s, r);
    case DATA: return raw_data(s, r);
    case WEIGHTS: return raw_weights(s, r);
    case STEP: return raw_fwd(s, r) || raw_data(s, r) || raw_weights(s, r);
    default: return 1;
    }
}

static int raw_post(struct shape *s, int k, enum pass p)
{
    (void)s;
    (void)k;
    (void)p;
    return 0;
}

/* The control is raw cuDNN again, with a handle, workspace and reserve of its own: control / raw
 * is what the bench reads between two timings of identical work. */
static const struct side raw_side = {raw_prep, raw_run, raw_post, 0},
                         ctl_side = {raw_prep, raw_run, raw_post, 1};
#endif

/* ---------------------------------------------------------------------------------------------
 * Timing
 */

struct bench {
    nn_ctx *ctx, *eager; /* as chosen; forced eager (NULL on the reference backend) */
    int gpu, reps, warmup, control, graph;
    int case_no, cases; /* progress through a shape file (cases 0: no file) */
};

/* Microseconds of wall time per training step, steps back to back; NAN on failure. */
static double wall_step(struct bench *B, struct shape *s, const struct side *side)
{
    int ok = 1;
    for (int i = 0; ok && i < B->warmup; i++)
        ok = side->run(s, side->k, STEP) == 0 && side->post(s, side->k, STEP) == 0;
    ok = ok && nn_ctx_synchronize(s->ctx) == NN_OK;
    double t0 = nn_cli_now_us();
    for (int i = 0; ok && i < B->reps; i++)
        ok = side->run(s, side->k, STEP) == 0 && side->post(s, side->k, STEP) == 0;
    ok = ok && nn_ctx_synchronize(s->ctx) == NN_OK;
    if (!ok) nn_rnn_pullback_free(&s->pb);
    return ok ? (nn_cli_now_us() - t0) / B->reps : NAN;
}

/* The median of single training steps, each waited for (host clock): the latency a
 * synchronised first_step is a case of, after the shape's first calls. */
static double sync_step(struct bench *B, struct shape *s, const struct side *side)
{
    double *t = malloc((size_t)B->reps * sizeof *t);
    int ok = t != NULL;
    for (int i = 0; ok && i < B->reps; i++) {
        double t0 = nn_cli_now_us();
        ok = side->run(s, side->k, STEP) == 0 && side->post(s, side->k, STEP) == 0 &&
             nn_ctx_synchronize(s->ctx) == NN_OK;
        if (ok) t[i] = nn_cli_now_us() - t0;
    }
    if (!ok) nn_rnn_pullback_free(&s->pb);
    double m = ok ? nn_cli_median(t, B->reps) : NAN;
    free(t);
    return m;
}

/* What auto decided for the shape's training step (the record's flags), for the mode column. */
static const char *mode_of(nn_ctx *ctx)
{
#if NN_HAVE_CUDNN
    int32_t algo, flags;
    if (nn_ctx_backend(ctx) != NN_BACKEND_CUDNN || nn__rnn_cudnn_records(ctx, &algo, &flags, 1) < 1)
        return "-";
    nn_settings set;
    nn_ctx_get_settings(ctx, &set);
    if (set.rnn_graphs != NN_GRAPHS_AUTO)
        return set.rnn_graphs == NN_GRAPHS_ON ? "replay" : "eager";
    return flags & NN__RNN_REC_TRAIN_REPLAY  ? "replay"
           : flags & NN__RNN_REC_TRAIN_EAGER ? "eager"
                                             : "undecided";
#else
    (void)ctx;
    return "-";
#endif
}

/* Times reps calls of pass p on one side after warmup untimed ones: each call's GPU time (the host
 * clock's on a reference context) goes to t[*nt...], and its host time to ht[*nt...]. */
static int time_reps(struct bench *B, struct shape *s, const struct side *side, enum pass p,
                     int warmup, int reps, double *t, double *ht, int *nt)
{
    int n = warmup + reps, ok = 1;
#if NN_HAVE_CUDNN
    cudaEvent_t *ev = B->gpu ? calloc((size_t)n * 2, sizeof *ev) : NULL;
    cudaStream_t stream = (cudaStream_t)nn_ctx_stream(B->ctx);
    int made = 0;
    ok = !B->gpu || ev;
    for (; ok && B->gpu && made < 2 * n; made++)
        ok = cudaEventCreate(&ev[made]) == cudaSuccess;
    if (!ok && made) made--;
#endif
    double *dt = t + *nt, *dh = ht + *nt;
    for (int i = 0; i < n && ok; i++) {
        ok = side->prep(s, side->k, p) == 0;
#if NN_HAVE_CUDNN
        if (ok && B->gpu) ok = cudaEventRecord(ev[2 * i], stream) == cudaSuccess;
#endif
        double t0 = nn_cli_now_us();
        ok = ok && side->run(s, side->k, p) == 0;
        double d = nn_cli_now_us() - t0;
        if (i >= warmup) dh[i - warmup] = dt[i - warmup] = d;
#if NN_HAVE_CUDNN
        if (ok && B->gpu) ok = cudaEventRecord(ev[2 * i + 1], stream) == cudaSuccess;
#endif
        ok = ok && side->post(s, side->k, p) == 0;
    }
    ok = ok && nn_ctx_synchronize(B->ctx) == NN_OK;
#if NN_HAVE_CUDNN
    for (int i = warmup; ok && B->gpu && i < n; i++) {
        float ms;
        ok = cudaEventElapsedTime(&ms, ev[2 * i], ev[2 * i + 1]) == cudaSuccess;
        dt[i - warmup] = (double)ms * 1e3;
    }
    for (int i = 0; i < made; i++)
        cudaEventDestroy(ev[i]);
    free(ev);
#endif
    if (ok) *nt += reps;
    if (!ok) nn_rnn_pullback_free(&s->pb);
    return ok ? 0 : -1;
}

/* One pass's timing in turns (nn_cli_take_turns): each side's times gather in t and ht. */
enum { NSIDE = 3 };
struct pass_turns {
    struct bench *B;
    struct shape *s;
    const struct side *const *side;
    enum pass p;
    double *t[NSIDE], *ht[NSIDE];
    int nt[NSIDE];
};

static int pass_turn(void *arg, int i, int round, int share)
{
    struct pass_turns *pt = arg;
    return time_reps(pt->B, pt->s, pt->side[i], pt->p, round ? 1 : pt->B->warmup, share, pt->t[i],
                     pt->ht[i], &pt->nt[i]);
}

/* Pass p of each side (NULL: not measured; side[0] is nnprim's): the median GPU time and the
 * median host time per call over the repetitions (a mean over a few calls takes an outlier whole),
 * NAN where a side failed, INFINITY where it is NULL. The sides take turns: timed one side after
 * the other, identical cuDNN calls differed by up to 4%. */
static void time_pass(struct bench *B, struct shape *s, const struct side *const side[NSIDE],
                      enum pass p, double gpu_us[NSIDE], double host_us[NSIDE])
{
    struct pass_turns pt = {B, s, side, p, {NULL}, {NULL}, {0}};
    int ok[NSIDE];
    for (int i = 0; i < NSIDE; i++) {
        pt.t[i] = side[i] ? calloc((size_t)B->reps, sizeof(double)) : NULL;
        pt.ht[i] = side[i] ? calloc((size_t)B->reps, sizeof(double)) : NULL;
        ok[i] = pt.t[i] && pt.ht[i];
    }
    nn_cli_take_turns(NSIDE, B->reps, ok, pass_turn, &pt);
    for (int i = 0; i < NSIDE; i++) {
        gpu_us[i] = ok[i] ? nn_cli_median(pt.t[i], B->reps) : side[i] ? NAN : INFINITY;
        host_us[i] = ok[i] ? nn_cli_median(pt.ht[i], B->reps) : gpu_us[i];
        free(pt.t[i]);
        free(pt.ht[i]);
    }
}

static void free_shape(struct shape *s)
{
    nn_tensor *all[] = {&s->x,  &s->hx, &s->cx, &s->w,   &s->y,   &s->hy,
                        &s->cy, &s->dy, &s->dx, &s->dhx, &s->dcx, &s->dw};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        if (all[i]->data) nn_tensor_free(s->ctx, all[i]);
#if NN_HAVE_CUDNN
    raw_free(s->raw[0]);
    raw_free(s->raw[1]);
#endif
}

static nn_status alloc_shape(struct shape *s)
{
    const nn_rnn_params *p = &s->c.p;
    int64_t D = p->bidirectional ? 2 : 1, O = nn__rnn_out_size(p->hidden_size, p->proj_size), nw;
    int seq = p->layout == NN_RNN_SEQ_MAJOR;
    int64_t xd[3] = {seq ? s->c.t : s->c.n, seq ? s->c.n : s->c.t, p->input_size};
    int64_t yd[3] = {xd[0], xd[1], D * O}, hd[3] = {p->num_layers * D, s->c.n, O};
    int64_t cd[3] = {p->num_layers * D, s->c.n, p->hidden_size};
    nn_status st = nn_rnn_weights_size(s->ctx, p, s->c.dtype, &nw);
    struct {
        nn_tensor *t;
        int rank;
        const int64_t *dims;
    } all[] = {{&s->x, 3, xd},  {&s->hx, 3, hd},  {&s->cx, 3, cd},  {&s->w, 1, &nw},
               {&s->y, 3, yd},  {&s->hy, 3, hd},  {&s->cy, 3, cd},  {&s->dy, 3, yd},
               {&s->dx, 3, xd}, {&s->dhx, 3, hd}, {&s->dcx, 3, cd}, {&s->dw, 1, &nw}};
    for (size_t i = 0; i < sizeof all / sizeof all[0] && st == NN_OK; i++) {
        st = nn_tensor_empty(s->ctx, s->c.dtype, all[i].rank, all[i].dims, all[i].t);
        if (st == NN_OK)
            st = nn_tensor_fill_uniform(s->ctx, all[i].t, i == 3 ? -0.1 : -1, i == 3 ? 0.1 : 1,
                                        100 + i);
    }
    return st;
}

/* Microseconds of wall time per training step with an SGD update of the weights (nn_optim), the
 * whole step captured once as one graph (graph.h) and launched back to back; NAN on failure (the
 * message printed). The shape's plans exist already: its untimed steps ran. */
static double wall_graph(struct bench *B, struct shape *s, const char *text)
{
    nn_optim_params op;
    nn_optim *opt = NULL;
    nn_graph *g = NULL;
    nn_optim_params_default(&op, NN_OPTIM_SGD);
    op.lr = 1e-6; /* the weights stay as they are, near enough, over the timed steps */
    op.momentum = 0.9;
    nn_status st = nn_optim_create(s->ctx, &op, 1, &s->w, &opt);
    /* one eager step with the update: the optimizer's first step is host work, not recorded */
    if (st == NN_OK)
        st = nn_run(s, 0, STEP) || nn_post(s, 0, STEP) ? nn_last_error()->status : NN_OK;
    if (st == NN_OK) st = nn_optim_step(s->ctx, opt, 1, &s->dw);
    if (st == NN_OK) st = nn_graph_begin(s->ctx);
    if (st == NN_OK) {
        nn_status in = nn_run(s, 0, STEP) || nn_post(s, 0, STEP) ? nn_last_error()->status : NN_OK;
        if (in == NN_OK) in = nn_optim_step(s->ctx, opt, 1, &s->dw);
        st = nn_graph_end(s->ctx, &g);
        if (in != NN_OK && st == NN_OK) st = in;
    }
    for (int i = 0; st == NN_OK && i < B->warmup; i++)
        st = nn_graph_launch(s->ctx, g);
    if (st == NN_OK) st = nn_ctx_synchronize(s->ctx);
    double t0 = nn_cli_now_us();
    for (int i = 0; st == NN_OK && i < B->reps; i++)
        st = nn_graph_launch(s->ctx, g);
    if (st == NN_OK) st = nn_ctx_synchronize(s->ctx);
    double us = nn_cli_now_us() - t0;
    if (st != NN_OK)
        printf("# %s: the captured step: %s: %s\n", text, nn_status_name(st),
               nn_last_error()->message);
    nn_rnn_pullback_free(&s->pb);
    if (g) nn_graph_free(s->ctx, g);
    if (opt) nn_optim_free(s->ctx, opt);
    return st == NN_OK ? us / B->reps : NAN;
}

/* Not a figure of its own: a weights pass that timing cannot separate from the data pass. */
#define NOT_SEPARATED (-INFINITY)

/* nnprim's weights pass is backward (data and weights) minus backward-data, two medians of their
 * own. The reference backend computes the weight gradients in either call (only the copy to dw
 * differs), so the difference there is noise; and a difference that is not positive says only
 * that the weights pass is lost in the noise. Neither prints as a time. */
static double weights_part(const struct bench *B, double backward, double data)
{
    if (isnan(backward) || isnan(data)) return NAN;
    double d = backward - data;
    return B->gpu && d > 0 ? d : NOT_SEPARATED;
}

static void print_us(double us)
{
    if (isnan(us))
        printf(" %11s", "error");
    else if (us == NOT_SEPARATED)
        printf(" %11s", "n/a");
    else if (isinf(us))
        printf(" %11s", "-");
    else
        printf(" %11.1f", us);
}

static int bench_line(void *arg, const char *line, const char *where)
{
    struct bench *B = arg;
    static struct shape s;
    memset(&s, 0, sizeof s);
    s.ctx = B->ctx;
    char err[256];
    static char text[16384];
    int got = nn_rnn_case_parse_line(line, &s.c, err, sizeof err);
    if (got < 0) {
        fprintf(stderr, "nnprim bench rnn: %s: %s\n", where, err);
        return -1;
    }
    if (got == 0) return 0;
    s.c.p.dropout = 0; /* masks cost alike on both sides; the bench compares the rest */
    s.c.accumulate = 0;
    nn_rnn_case_format(&s.c, text, sizeof text);
    if (B->cases) nn_cli_progress("nnprim bench rnn", ++B->case_no, B->cases, text);
    /* a training step multiplies by about every weight three times per step and sequence; the
     * bench runs about 4 * (12 + warm-up + reps) of them (a shape whose weights cannot be sized
     * is reported by alloc_shape below) */
    int64_t numel;
    if (!B->gpu && nn_rnn_weights_size(B->ctx, &s.c.p, s.c.dtype, &numel) == NN_OK)
        nn_cli_warn_slow("nnprim bench rnn", text,
                         3.0 * (double)s.c.t * (double)s.c.n * (double)numel *
                             (4.0 * (12 + B->warmup + B->reps)));
    if (alloc_shape(&s) != NN_OK) {
        printf("# %s: %s\n", text, nn_last_error()->message);
        free_shape(&s);
        return 1;
    }
    /* NAN: the pass failed; INFINITY: not measured on this backend */
    double us[NSIDE][N_PASS], host[NSIDE][N_PASS], wall[3] = {INFINITY, INFINITY, INFINITY},
                                                   one_step;
    /* The tensors' fills are queued copies: waited for, so that the first step times only
     * itself. Untimed steps first, so that auto has decided before anything is timed (the mode
     * column reads the most recently used record: this shape's). */
    if (nn_ctx_synchronize(B->ctx) != NN_OK) {
        printf("# %s: %s\n", text, nn_last_error()->message);
        free_shape(&s);
        return 1;
    }
    double first = nn_cli_now_us();
    int bad = nn_fwd(&s) || nn_bwd(&s, 1) || nn_ctx_synchronize(B->ctx) != NN_OK;
    first = bad ? NAN : nn_cli_now_us() - first; /* with a plan file: its record's first step */
    for (int i = 1; !bad && i < 12; i++)
        if (nn_fwd(&s) || nn_bwd(&s, 1)) break;
    nn_rnn_pullback_free(&s.pb);
    const char *mode = mode_of(B->ctx);
    wall[0] = wall_step(B, &s, &nnprim_side);
    if (B->graph) {
        double g = wall_graph(B, &s, text);
        print_us(wall[0]);
        print_us(g);
        printf(" %7.2f %-9s  %s\n", g / wall[0], mode, text);
        fflush(stdout);
        free_shape(&s);
        return 0;
    }
    one_step = sync_step(B, &s, &nnprim_side);
    const struct side *sides[NSIDE] = {&nnprim_side, NULL, NULL};
    int raw_ok[2] = {0, 0};
#if NN_HAVE_CUDNN
    for (int k = 0; B->gpu && k < 1 + B->control; k++) {
        s.raw[k] = calloc(1, sizeof *s.raw[k]);
        raw_ok[k] = s.raw[k] && raw_setup(&s, s.raw[k]) == 0;
        if (raw_ok[k]) sides[1 + k] = k ? &ctl_side : &raw_side;
    }
#endif
    for (int p = 0; p < N_PASS; p++) {
        double g[NSIDE], h[NSIDE];
        time_pass(B, &s, sides, (enum pass)p, g, h);
        for (int side = 0; side < NSIDE; side++) {
            int failed = side && B->gpu && (side == 1 || B->control) && !raw_ok[side - 1];
            us[side][p] = failed ? NAN : g[side];
            host[side][p] = failed ? NAN : h[side];
        }
    }
    /* nnprim's backward minus its data pass: the weights pass only where the difference can
     * say so (weights_part) */
    us[0][WEIGHTS] = weights_part(B, us[0][WEIGHTS], us[0][DATA]);
    host[0][WEIGHTS] = weights_part(B, host[0][WEIGHTS], host[0][DATA]);
#if NN_HAVE_CUDNN
    if (B->gpu) wall[2] = raw_ok[0] ? wall_step(B, &s, &raw_side) : NAN;
#endif
    if (B->eager) {
        static struct shape e;
        memset(&e, 0, sizeof e);
        e.ctx = B->eager;
        e.c = s.c;
        wall[1] = alloc_shape(&e) == NN_OK ? wall_step(B, &e, &nnprim_side) : NAN;
        free_shape(&e);
    }
    for (int side = 0; side < 2; side++)
        for (int p = 0; p < N_PASS; p++)
            print_us(us[side][p]);
    print_us(host[0][STEP]);
    print_us(host[1][STEP]);
    for (int p = 0; B->gpu && p < N_PASS; p++)
        if (us[0][p] == NOT_SEPARATED)
            printf(" %5s", "n/a");
        else
            printf(" %5.2f", us[0][p] / us[1][p]);
    if (B->gpu) printf(" %6.2f", host[0][STEP] / host[1][STEP]);
    for (int p = 0; B->gpu && B->control && p < N_PASS; p++)
        printf(" %5.2f", us[2][p] / us[1][p]);
    for (int i = 0; i < 3; i++)
        print_us(wall[i]);
    print_us(first);
    print_us(one_step);
    printf(" %7.2f", first / one_step);
    if (B->gpu) printf(" %6.2f %6.2f", wall[0] / wall[2], wall[0] / wall[1]);
    printf(" %-9s  %s\n", mode, text);
    fflush(stdout);
    free_shape(&s);
    return 0;
}

/* The columns' titles (bench_line prints the rows). */
static void print_header(const struct bench *B)
{
    if (B->graph) {
        printf(" %11s %11s %7s %-9s  shape\n", "wall_step", "step_graph", "x_graph", "mode");
        return;
    }
    for (int side = 0; side < 2; side++)
        for (int p = 0; p < N_PASS; p++) {
            char title[32];
            snprintf(title, sizeof title, "%s%s", side ? "raw_" : "", pass_names[p]);
            printf(" %11s", title);
        }
    printf(" %11s %11s", "host_step", "raw_host");
    if (B->gpu)
        for (int p = 0; p < N_PASS; p++)
            printf(" %5s", p == 0 ? "x_fwd" : p == 1 ? "x_dat" : p == 2 ? "x_wgt" : "x_stp");
    if (B->gpu) printf(" %6s", "x_host");
    if (B->control) printf(" %5s %5s %5s %5s", "c_fwd", "c_dat", "c_wgt", "c_stp");
    printf(" %11s %11s %11s %11s %11s %7s", "wall_step", "wall_eager", "wall_raw", "first_step",
           "sync_step", "x_first");
    if (B->gpu) printf(" %6s %6s", "x_wraw", "x_weag");
    printf(" %-9s  shape\n", "mode");
}

int nn_cli_bench_rnn(int argc, char **argv)
{
    nn_settings set;
    if (nn_settings_from_env(&set) != NN_OK) return 1;
    const char *shapes = NULL, *one = NULL;
    int reps = 0, warmup = -1, backend = -1, math = -1, control = 0, graph = 0;
    const struct nn_cli_opt opts[] = {
        {"--shapes", NN_CLI_STRING, &shapes, "FILE",
         "the shapes of FILE (docs/RNN.md syntax or verbose lines)", 0, 0, NULL},
        {"--case", NN_CLI_STRING, &one, "TEXT", "one shape, or a whole verbose line (quote it)", 0,
         0, NULL},
        {"--reps", NN_CLI_INT, &reps, "N", "timed calls (default 30 GPU, 3 reference)", 1, 1000000,
         NULL},
        {"--warmup", NN_CLI_INT, &warmup, "N", "untimed calls first (default 5 GPU, 1 reference)",
         0, 1000000, NULL},
        {"--backend", NN_CLI_CHOICE, &backend, NULL, "default: NNPRIM_BACKEND, else auto", 0, 0,
         "ref|cudnn"},
        {"--math", NN_CLI_CHOICE, &math, NULL, "default: NNPRIM_MATH, else strict", 0, 0,
         "strict|tf32"},
        {"--control", NN_CLI_FLAG, &control, NULL, "raw cuDNN twice: c_* = control / raw per pass",
         0, 0, NULL},
        {"--graph", NN_CLI_FLAG, &graph, NULL,
         "only wall_step and step_graph: the step with an SGD update, one CUDA graph", 0, 0, NULL},
    };
    const struct nn_cli_cmd cmd = {
        "nnprim bench rnn", "[CASE...]",
        "Shapes use the docs/RNN.md syntax (or whole NNPRIM_VERBOSE=1 lines), one per line;\n"
        "without --shapes or --case a few tiny ones run (bench/shapes_rnn_tiny.txt).\n"
        "Columns: nnprim's GPU time per pass (fwd, bwd_data, bwd_weights = backward minus its\n"
        "data pass, n/a where that is not positive or on the reference backend, which\n"
        "computes the weight gradients in both; step), raw cuDNN's alike, host time per training "
        "step of both, and nnprim /\n"
        "raw per pass and for the step's host time; then wall time per training step (steps\n"
        "back to back) of nnprim as chosen (NNPRIM_RNN_GRAPHS, auto by default), nnprim forced\n"
        "eager and raw cuDNN eager, nnprim / raw, nnprim / nnprim eager, the wall time of the\n"
        "shape's first step (descriptors built, or prepared when the context loaded\n"
        "NNPRIM_PLAN_CACHE's file: docs/RNN.md, \"The first step from a plan file\"),\n"
        "and what auto chose for the step (mode). --control adds c_fwd, c_dat, c_wgt and c_stp\n"
        "after x_host: a second raw cuDNN side's time over raw's, per pass, what the bench\n"
        "reads between two timings of identical work. --graph (cuDNN): per shape only\n"
        "wall_step, step_graph (the training step and an SGD update of the weights captured\n"
        "once as one CUDA graph, include/nnprim/graph.h, launched back to back: the figure to\n"
        "set beside bench/torch_rnn.py's step_graph) and x_graph = step_graph / wall_step.\n",
        opts, NN_CLI_NOPTS(opts)};
    int operands, prc = nn_cli_parse(&cmd, argc, argv, &operands);
    if (prc == NN_CLI_RUN) prc = nn_cli_case_operands(&cmd, argc, argv, operands, &one);
    if (prc != NN_CLI_RUN) return prc;
    if (shapes && one) return nn_cli_usage_error(&cmd, "takes --shapes or --case, not both");
    if (backend >= 0) set.backend = backend ? NN_BACKEND_CUDNN : NN_BACKEND_REF;
    if (math >= 0) set.math_mode = math ? NN_MATH_TF32 : NN_MATH_STRICT_FP32;
    struct bench B = {0};
    double t_create = nn_cli_now_us();
    if (nn_ctx_create(&B.ctx, &set) != NN_OK) {
        fprintf(stderr, "nnprim bench rnn: cannot create a context: %s\n",
                nn_last_error()->message);
        return 1;
    }
    t_create = nn_cli_now_us() - t_create;
    nn_plan_cache_stats pcs;
    /* the cost a plan file's preparation moved from the first steps to the context's creation */
    if (nn_plan_cache_get_stats(B.ctx, &pcs) == NN_OK && pcs.records_loaded)
        printf("# plan file %s: %llu records loaded, %llu prepared; the context's creation took "
               "%.1f ms\n",
               set.plan_cache_file ? set.plan_cache_file : "-",
               (unsigned long long)pcs.records_loaded, (unsigned long long)pcs.plans_prebuilt,
               t_create / 1e3);
    B.gpu = nn_ctx_backend(B.ctx) == NN_BACKEND_CUDNN;
    if (B.gpu) {
        nn_settings eager = set;
        eager.rnn_graphs = NN_GRAPHS_OFF;
        if (nn_ctx_create(&B.eager, &eager) != NN_OK) B.eager = NULL;
    }
    B.reps = reps > 0 ? reps : B.gpu ? 30 : 3;
    B.warmup = warmup >= 0 ? warmup : B.gpu ? 5 : 1;
    B.control = control && B.gpu;
    if (graph && !B.gpu) {
        fprintf(stderr, "nnprim bench rnn: --graph needs the cuDNN backend (CUDA graphs)\n");
        nn_ctx_destroy(B.eager);
        nn_ctx_destroy(B.ctx);
        return 2;
    }
    B.graph = graph;
    printf("# nnprim bench rnn: backend %s, math %s, timing %s, median of %d after %d warm-up, "
           "microseconds\n",
           B.gpu ? "cudnn" : "ref", set.math_mode == NN_MATH_TF32 ? "tf32" : "strict",
           B.gpu ? "CUDA events" : "host clock", B.reps, B.warmup);
    print_header(&B);
    int rc = 0;
    if (one) {
        if (bench_line(&B, one, "--case") < 0) rc = 2;
    } else if (shapes) {
        rc = nn_cli_each_case("nnprim bench rnn", shapes, &B.cases, bench_line, &B);
    } else {
        for (size_t i = 0; i < sizeof small_shapes / sizeof small_shapes[0]; i++)
            bench_line(&B, small_shapes[i], "built-in shape");
    }
    nn_ctx_destroy(B.eager);
    nn_ctx_destroy(B.ctx);
    return rc;
}

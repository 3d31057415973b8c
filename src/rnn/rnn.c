/* Recurrent layers: validation, the problem description, the weight views, dispatch through one
 * backend table, pullbacks and the verbose line. Everything cuDNN would refuse with BAD_PARAM is
 * refused here first, with the argument named. */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "core/alloc.h"
#include "core/ctx.h"
#include "core/error.h"
#include "core/log.h"
#include "core/pullback.h"
#include "core/tensor_util.h"
#include "core/text.h"
#include "rnn/rnn_internal.h"

struct rnn_backend {
    const char *name;
    nn_status (*weights_size)(struct nn_ctx *, const struct nn__rnn_problem *, int64_t *,
                              struct nn__rnn_note *);
    nn_status (*weight_offset)(struct nn_ctx *, const struct nn__rnn_problem *, int64_t,
                               nn_rnn_weight_name, int64_t *);
    nn_status (*forward)(struct nn_ctx *, const struct nn__rnn_problem *, const struct nn__rnn_io *,
                         void **, struct nn__rnn_note *);
    nn_status (*backward)(struct nn_ctx *, const struct nn__rnn_problem *, void *,
                          const struct nn__rnn_io *, struct nn__rnn_note *);
    void (*state_free)(struct nn_ctx *, void *);
    nn_status (*workspace)(struct nn_ctx *, const struct nn__rnn_problem *, nn_rnn_pass, size_t *);
};

static const struct rnn_backend backend_ref = {
    "ref",
    nn__rnn_weights_size_ref,
    nn__rnn_weight_offset_ref,
    nn__rnn_forward_ref,
    nn__rnn_backward_ref,
    nn__rnn_state_free_ref,
    nn__rnn_workspace_ref,
};

#if NN_HAVE_CUDNN
static const struct rnn_backend backend_cudnn = {
    "cudnn",
    nn__rnn_weights_size_cudnn,
    nn__rnn_weight_offset_cudnn,
    nn__rnn_forward_cudnn,
    nn__rnn_backward_cudnn,
    nn__rnn_state_free_cudnn,
    nn__rnn_workspace_cudnn,
};
#endif

static nn_status pick_backend(struct nn_ctx *ctx, const char *op, const struct rnn_backend **out)
{
    (void)op;
#if NN_HAVE_CUDNN
    *out = nn__ctx_on_gpu(ctx) ? &backend_cudnn : &backend_ref;
    return NN_OK;
#else
    if (nn__ctx_on_gpu(ctx))
        return NN__FAIL(ctx, NN_E_NOT_BUILT, "%s: this build of nnprim has no cuDNN", op);
    *out = &backend_ref;
    return NN_OK;
#endif
}

int nn__rnn_replay_pays(double eager, double replay)
{
    if (!(replay >= 0)) return 0;
    return !(eager >= 0) || replay < eager * (1.0 - NN__RNN_REPLAY_MARGIN);
}

int nn__rnn_tune_pick(int n, const double *eager_ms, const double *replay_ms, int *replay)
{
    int be = -1, br = -1; /* the cheapest of each mode, the earlier on a tie */
    for (int i = 0; i < n; i++) {
        if (eager_ms[i] >= 0 && (be < 0 || eager_ms[i] < eager_ms[be])) be = i;
        if (replay_ms[i] >= 0 && (br < 0 || replay_ms[i] < replay_ms[br])) br = i;
    }
    if (br >= 0 && nn__rnn_replay_pays(be >= 0 ? eager_ms[be] : -1, replay_ms[br])) {
        *replay = 1;
        return br;
    }
    if (be >= 0) *replay = 0;
    return be;
}

struct nn_rnn_pullback {
    struct nn__pullback hdr; /* the shared registry's header (core/pullback.h) */
    const struct rnn_backend *be;
    struct nn__rnn_problem prob;
    nn_tensor x, hx, cx, w, y; /* the caller's views */
    int has_hx, has_cx;
    int32_t *lengths; /* a copy, or NULL for all T */
    void *state;      /* the backend's (cuDNN: the reserve space) */
};

static const struct nn__pullback_kind pullback_kind = {
    "rnn", NN_ACCUMULATE_DW, "cuDNN's backward data overwrites the reserve space forward filled"};

/* ---------------------------------------------------------------------------------------------
 * Names and text form (docs/RNN.md)
 */

static const char *cell_name(nn_rnn_cell c)
{
    switch (c) {
    case NN_RNN_RELU: return "relu";
    case NN_RNN_TANH: return "tanh";
    case NN_RNN_LSTM: return "lstm";
    case NN_RNN_GRU: return "gru";
    }
    return NULL;
}

static const char *bias_name(nn_rnn_bias_mode b)
{
    switch (b) {
    case NN_RNN_BIAS_NONE: return "bias_none";
    case NN_RNN_BIAS_INPUT: return "bias_input";
    case NN_RNN_BIAS_RECURRENT: return "bias_recurrent";
    case NN_RNN_BIAS_DOUBLE: return "bias_double";
    }
    return NULL;
}

static const char *view_name(nn_rnn_weight_name n)
{
    switch (n) {
    case NN_RNN_WEIGHT_IH: return "weight_ih";
    case NN_RNN_WEIGHT_HH: return "weight_hh";
    case NN_RNN_BIAS_IH: return "bias_ih";
    case NN_RNN_BIAS_HH: return "bias_hh";
    case NN_RNN_WEIGHT_HR: return "weight_hr";
    }
    return NULL;
}

void nn__rnn_problem_text(const struct nn__rnn_problem *p, const int32_t *lengths, char *buf,
                          size_t cap)
{
    size_t len = 0;
    if (cap) buf[0] = 0;
    len = nn__text_put(buf, cap, len, "%s t%lldn%lldi%lldh%lld l%lld %s", cell_name(p->cell),
                       (long long)p->t, (long long)p->n, (long long)p->input, (long long)p->hidden,
                       (long long)p->layers, p->dirs == 2 ? "bidir" : "uni");
    if (p->proj) len = nn__text_put(buf, cap, len, " proj%lld", (long long)p->proj);
    len = nn__text_put(buf, cap, len, " %s", bias_name(p->bias_mode));
    if (p->input_mode == NN_RNN_INPUT_SKIP) len = nn__text_put(buf, cap, len, " skip");
    len = nn__text_put(buf, cap, len, " %s", p->layout == NN_RNN_BATCH_MAJOR ? "batch" : "seq");
    if (p->clip_enabled)
        len = nn__text_put(buf, cap, len, " clip%.17g:%.17g", p->clip_lo, p->clip_hi);
    if (p->dropout > 0)
        len = nn__text_put(buf, cap, len, " drop%.17g:%llu", p->dropout,
                           (unsigned long long)p->dropout_seed);
    if (lengths)
        for (int64_t i = 0; i < p->n; i++)
            len = nn__text_put(buf, cap, len, i ? "x%d" : " lens%d", (int)lengths[i]);
    len = nn__text_put(buf, cap, len, " %s", nn_dtype_name(p->dtype));
    if (p->dtype == NN_DTYPE_F32 && p->math == NN_MATH_TF32)
        len = nn__text_put(buf, cap, len, " tf32");
}

/* The call's case: the problem and, on a backward call that adds to dw, "acc". */
/* What a backward call asked for (0 on a forward call's line): ASK_BACKWARD and the gradients
 * it was given. */
enum { ASK_DX = 1, ASK_DHX = 2, ASK_DCX = 4, ASK_DW = 8, ASK_BACKWARD = 16 };

static unsigned asked_of(const nn_tensor *dx, const nn_tensor *dhx, const nn_tensor *dcx,
                         const nn_tensor *dw)
{
    return ASK_BACKWARD | (dx ? ASK_DX : 0) | (dhx ? ASK_DHX : 0) | (dcx ? ASK_DCX : 0) |
           (dw ? ASK_DW : 0);
}

/* The call's case: the problem, "acc" on a backward that adds to dw, and "grads=" on one that
 * did not ask for every gradient its cell has (dx, dhx, dcx for an LSTM, dw). */
static void case_text(const struct nn__rnn_problem *p, const int32_t *lengths, int accumulate,
                      unsigned asked, char *shape, size_t cap)
{
    nn__rnn_problem_text(p, lengths, shape, cap);
    size_t n = strlen(shape);
    if (accumulate) n = nn__text_put(shape, cap, n, " acc");
    unsigned all = ASK_DX | ASK_DHX | ASK_DW | (p->cell == NN_RNN_LSTM ? ASK_DCX : 0);
    if (!(asked & ASK_BACKWARD) || (asked & all) == all) return;
    if (!(asked & all)) {
        nn__text_put(shape, cap, n, " grads=none");
        return;
    }
    static const char *const names[] = {"dx", "dhx", "dcx", "dw"};
    const char *sep = " grads=";
    for (int i = 0; i < 4; i++)
        if (asked & all & (1u << i)) {
            n = nn__text_put(shape, cap, n, "%s%s", sep, names[i]);
            sep = "+";
        }
}

static void verbose_line(struct nn_ctx *ctx, const char *op, const char *impl,
                         const struct nn__rnn_note *note, const struct nn__rnn_problem *p,
                         const int32_t *lengths, int accumulate, unsigned asked, uint64_t t0)
{
    char shape[8192];
    case_text(p, lengths, accumulate, asked, shape, sizeof shape);
    /* The verbose line names the op without the "nn_" of the public function, as every family
     * does (docs/VERBOSE.md). */
    nn__verbose_op(ctx, op + strlen("nn_"), note->impl ? note->impl : impl,
                   note->cache ? note->cache : "-", shape, t0);
}

/* The call's case, once its problem is known, for its failure line. */
static void failure_case(const struct nn__rnn_problem *p, const int32_t *lengths, int accumulate,
                         unsigned asked, uint64_t t0)
{
    if (!t0) return;
    char shape[8192];
    case_text(p, lengths, accumulate, asked, shape, sizeof shape);
    nn__verbose_case(shape);
}

/* ---------------------------------------------------------------------------------------------
 * Parameters
 */

int nn__rnn_gates(nn_rnn_cell c)
{
    return c == NN_RNN_LSTM ? 4 : c == NN_RNN_GRU ? 3 : 1;
}

int64_t nn__rnn_out_size(int64_t hidden, int64_t proj)
{
    return proj ? proj : hidden;
}

static nn_status check_params(struct nn_ctx *ctx, const char *op, const nn_rnn_params *p)
{
    if (!p) return NN__FAIL(ctx, NN_E_INVALID_ARG, "%s: p (the parameters) must not be NULL", op);
    if (!cell_name(p->cell))
        return NN__FAIL(ctx, NN_E_INVALID_ARG,
                        "%s: p.cell must be NN_RNN_RELU, NN_RNN_TANH, NN_RNN_LSTM or NN_RNN_GRU, "
                        "got %d",
                        op, (int)p->cell);
    if (p->input_size < 1)
        return NN__FAIL(ctx, NN_E_INVALID_ARG, "%s: p.input_size must be >= 1, got %lld", op,
                        (long long)p->input_size);
    if (p->hidden_size < 1)
        return NN__FAIL(ctx, NN_E_INVALID_ARG, "%s: p.hidden_size must be >= 1, got %lld", op,
                        (long long)p->hidden_size);
    if (p->proj_size < 0)
        return NN__FAIL(ctx, NN_E_INVALID_ARG, "%s: p.proj_size must be >= 0 (0 = none), got %lld",
                        op, (long long)p->proj_size);
    if (p->proj_size > 0 && p->cell != NN_RNN_LSTM)
        return NN__FAIL(ctx, NN_E_INVALID_ARG,
                        "%s: p.proj_size must be 0 for a %s cell (projections are LSTM only), got "
                        "%lld",
                        op, cell_name(p->cell), (long long)p->proj_size);
    if (p->proj_size >= p->hidden_size)
        return NN__FAIL(ctx, NN_E_INVALID_ARG,
                        "%s: p.proj_size must be < p.hidden_size = %lld, got %lld", op,
                        (long long)p->hidden_size, (long long)p->proj_size);
    if (p->num_layers < 1)
        return NN__FAIL(ctx, NN_E_INVALID_ARG, "%s: p.num_layers must be >= 1, got %lld", op,
                        (long long)p->num_layers);
    if (p->bidirectional != 0 && p->bidirectional != 1)
        return NN__FAIL(ctx, NN_E_INVALID_ARG, "%s: p.bidirectional must be 0 or 1, got %d", op,
                        p->bidirectional);
    if (!bias_name(p->bias_mode))
        return NN__FAIL(ctx, NN_E_INVALID_ARG,
                        "%s: p.bias_mode must be NN_RNN_BIAS_NONE, _INPUT, _RECURRENT or _DOUBLE, "
                        "got %d",
                        op, (int)p->bias_mode);
    if (p->input_mode != NN_RNN_INPUT_LINEAR && p->input_mode != NN_RNN_INPUT_SKIP)
        return NN__FAIL(ctx, NN_E_INVALID_ARG,
                        "%s: p.input_mode must be NN_RNN_INPUT_LINEAR or NN_RNN_INPUT_SKIP, got %d",
                        op, (int)p->input_mode);
    if (p->input_mode == NN_RNN_INPUT_SKIP && p->input_size != p->hidden_size)
        return NN__FAIL(ctx, NN_E_INVALID_ARG,
                        "%s: p.input_size must equal p.hidden_size = %lld with "
                        "NN_RNN_INPUT_SKIP, got %lld",
                        op, (long long)p->hidden_size, (long long)p->input_size);
    if (p->layout != NN_RNN_SEQ_MAJOR && p->layout != NN_RNN_BATCH_MAJOR)
        return NN__FAIL(ctx, NN_E_INVALID_ARG,
                        "%s: p.layout must be NN_RNN_SEQ_MAJOR or NN_RNN_BATCH_MAJOR, got %d", op,
                        (int)p->layout);
    if (!(p->dropout >= 0.0 && p->dropout < 1.0))
        return NN__FAIL(ctx, NN_E_INVALID_ARG, "%s: p.dropout must be in [0, 1), got %g", op,
                        p->dropout);
    if (p->clip_enabled != 0 && p->clip_enabled != 1)
        return NN__FAIL(ctx, NN_E_INVALID_ARG, "%s: p.clip_enabled must be 0 or 1, got %d", op,
                        p->clip_enabled);
    if (p->clip_enabled) {
        if (p->cell != NN_RNN_LSTM)
            return NN__FAIL(ctx, NN_E_INVALID_ARG,
                            "%s: p.clip_enabled must be 0 for a %s cell (the cell clip is LSTM "
                            "only), got 1",
                            op, cell_name(p->cell));
        if (!isfinite(p->clip_lo) || !isfinite(p->clip_hi) || p->clip_lo > p->clip_hi)
            return NN__FAIL(ctx, NN_E_INVALID_ARG,
                            "%s: p.clip_lo and p.clip_hi must be finite with clip_lo <= clip_hi, "
                            "got %g and %g",
                            op, p->clip_lo, p->clip_hi);
    }
    return NN__CHECK_RESERVED(ctx, op, "p.reserved", p->reserved);
}

/* The problem without the data dims (t, n); p is already checked. */
static void problem_of(struct nn_ctx *ctx, const nn_rnn_params *p, nn_dtype dtype,
                       struct nn__rnn_problem *out)
{
    memset(out, 0, sizeof *out);
    out->cell = p->cell;
    out->input = p->input_size;
    out->hidden = p->hidden_size;
    out->proj = p->proj_size;
    out->out = nn__rnn_out_size(p->hidden_size, p->proj_size);
    out->layers = p->num_layers;
    out->dirs = p->bidirectional ? 2 : 1;
    out->gates = nn__rnn_gates(p->cell);
    out->bias_mode = p->bias_mode;
    out->input_mode = p->input_mode;
    out->layout = p->layout;
    out->dropout = p->dropout;
    out->dropout_seed = p->dropout_seed;
    out->clip_enabled = p->clip_enabled;
    if (p->clip_enabled) {
        out->clip_lo = p->clip_lo;
        out->clip_hi = p->clip_hi;
    }
    out->dtype = dtype;
    out->math = ctx ? ctx->settings.math_mode : NN_MATH_STRICT_FP32;
    out->deterministic = ctx ? ctx->settings.deterministic : 0;
}

nn_status nn_rnn_params_default(nn_rnn_params *p, nn_rnn_cell cell, int64_t input_size,
                                int64_t hidden_size)
{
    const char *op = "nn_rnn_params_default";
    if (!p) return NN__FAIL(NULL, NN_E_INVALID_ARG, "%s: p must not be NULL", op);
    if (!cell_name(cell))
        return NN__FAIL(NULL, NN_E_INVALID_ARG,
                        "%s: cell must be NN_RNN_RELU, NN_RNN_TANH, NN_RNN_LSTM or NN_RNN_GRU, got "
                        "%d",
                        op, (int)cell);
    if (input_size < 1 || hidden_size < 1)
        return NN__FAIL(NULL, NN_E_INVALID_ARG,
                        "%s: input_size and hidden_size must be >= 1, got %lld and %lld", op,
                        (long long)input_size, (long long)hidden_size);
    memset(p, 0, sizeof *p);
    p->cell = cell;
    p->input_size = input_size;
    p->hidden_size = hidden_size;
    p->num_layers = 1;
    p->bias_mode = NN_RNN_BIAS_DOUBLE;
    return NN_OK;
}

/* ---------------------------------------------------------------------------------------------
 * Weights
 */

int nn__rnn_view_exists(const struct nn__rnn_problem *p, int64_t layer, nn_rnn_weight_name name)
{
    switch (name) {
    case NN_RNN_WEIGHT_IH: return !(layer == 0 && p->input_mode == NN_RNN_INPUT_SKIP);
    case NN_RNN_WEIGHT_HH: return 1;
    case NN_RNN_BIAS_IH:
        return p->bias_mode == NN_RNN_BIAS_INPUT || p->bias_mode == NN_RNN_BIAS_DOUBLE;
    case NN_RNN_BIAS_HH:
        return p->bias_mode == NN_RNN_BIAS_RECURRENT || p->bias_mode == NN_RNN_BIAS_DOUBLE;
    case NN_RNN_WEIGHT_HR: return p->proj > 0;
    }
    return 0;
}

int nn__rnn_view_dims(const struct nn__rnn_problem *p, int64_t layer, nn_rnn_weight_name name,
                      int64_t *dims)
{
    int64_t gh = p->gates * p->hidden;
    switch (name) {
    case NN_RNN_WEIGHT_IH: dims[0] = gh, dims[1] = nn__rnn_layer_input(p, layer); return 2;
    case NN_RNN_WEIGHT_HH: dims[0] = gh, dims[1] = p->out; return 2;
    case NN_RNN_BIAS_IH:
    case NN_RNN_BIAS_HH: dims[0] = gh; return 1;
    case NN_RNN_WEIGHT_HR: dims[0] = p->proj, dims[1] = p->hidden; return 2;
    }
    return 0;
}

int64_t nn__rnn_layer_numel(const struct nn__rnn_problem *p, int64_t layer)
{
    static const nn_rnn_weight_name names[] = {NN_RNN_WEIGHT_IH, NN_RNN_WEIGHT_HH, NN_RNN_BIAS_IH,
                                               NN_RNN_BIAS_HH, NN_RNN_WEIGHT_HR};
    int64_t total = 0;
    for (int k = 0; k < 5; k++) {
        if (!nn__rnn_view_exists(p, layer, names[k])) continue;
        int64_t d[2], n = 1;
        int rank = nn__rnn_view_dims(p, layer, names[k], d);
        for (int i = 0; i < rank; i++)
            if (__builtin_mul_overflow(n, d[i], &n)) return -1;
        if (__builtin_add_overflow(total, n, &total)) return -1;
    }
    return total;
}

int nn__rnn_weights_numel(const struct nn__rnn_problem *p, int64_t *out)
{
    /* Layers above 0 are alike, so this is O(1) in the number of layers. */
    int64_t s0 = nn__rnn_layer_numel(p, 0), s1 = p->layers > 1 ? nn__rnn_layer_numel(p, 1) : 0;
    int64_t total, upper;
    if (s0 < 0 || s1 < 0 || __builtin_mul_overflow(s0, (int64_t)p->dirs, &total) ||
        __builtin_mul_overflow(s1, (p->layers - 1) * p->dirs, &upper) ||
        __builtin_add_overflow(total, upper, &total))
        return -1;
    *out = total;
    return 0;
}

/* Sizes derived from p (checked) that must fit int64 before anything multiplies them: G*H, D*O,
 * L*D and the weight count. */
static nn_status check_sizes(struct nn_ctx *ctx, const char *op, const nn_rnn_params *p,
                             const struct nn__rnn_problem *prob)
{
    int64_t v;
    if (__builtin_mul_overflow((int64_t)prob->gates, prob->hidden, &v))
        return NN__FAIL(ctx, NN_E_OVERFLOW,
                        "%s: p.hidden_size = %lld times the %d gates of the cell overflows int64",
                        op, (long long)p->hidden_size, prob->gates);
    if (__builtin_mul_overflow((int64_t)prob->dirs, prob->out, &v))
        return NN__FAIL(ctx, NN_E_OVERFLOW,
                        "%s: p.hidden_size (or p.proj_size) = %lld times 2 directions overflows "
                        "int64",
                        op, (long long)prob->out);
    if (__builtin_mul_overflow(prob->layers, (int64_t)prob->dirs, &v))
        return NN__FAIL(ctx, NN_E_OVERFLOW,
                        "%s: p.num_layers = %lld times 2 directions overflows int64", op,
                        (long long)p->num_layers);
    if (nn__rnn_weights_numel(prob, &v) != 0)
        return NN__FAIL(ctx, NN_E_OVERFLOW,
                        "%s: the weights of p (p.input_size %lld, p.hidden_size %lld, "
                        "p.num_layers %lld) have more than INT64_MAX elements",
                        op, (long long)p->input_size, (long long)p->hidden_size,
                        (long long)p->num_layers);
    return NN_OK;
}

static int fits_int(int64_t v)
{
    return v >= 0 && v <= INT_MAX;
}

int nn__rnn_product_fits_int(int64_t a, int64_t b, int64_t c, int64_t d)
{
    int64_t v;
    return !__builtin_mul_overflow(a, b, &v) && !__builtin_mul_overflow(v, c, &v) &&
           !__builtin_mul_overflow(v, d, &v) && fits_int(v);
}

const char *nn__rnn_beyond_int(const struct nn__rnn_problem *p, int64_t *value)
{
    const char *what = NULL;
    int64_t v = 0;
    if (!fits_int(p->input))
        what = "p.input_size", v = p->input;
    else if (!nn__rnn_product_fits_int(p->gates, p->hidden, 1, 1))
        what = "p.hidden_size", v = p->hidden;
    else if (!nn__rnn_product_fits_int(p->dirs, p->out, 1, 1))
        what = "p.hidden_size (or p.proj_size) times the directions", v = p->out;
    else if (!nn__rnn_product_fits_int(p->layers, p->dirs, 1, 1))
        what = "p.num_layers", v = p->layers;
    else if (!fits_int(p->t))
        what = "x's T", v = p->t;
    else if (!nn__rnn_product_fits_int(p->n, p->dirs, p->out, 1) ||
             !nn__rnn_product_fits_int(p->n, p->input, 1, 1) ||
             !nn__rnn_product_fits_int(p->layers * p->dirs, p->n, p->hidden, 1))
        what = "x's N", v = p->n;
    *value = v;
    return what;
}

/* cuDNN's RNN calls take int sizes (and int products of them): refused here, naming the argument,
 * before cuDNN sees them. prob->t and prob->n are 0 outside a call with data. */
static nn_status check_cudnn_limits(struct nn_ctx *ctx, const char *op,
                                    const struct nn__rnn_problem *p)
{
    int64_t v;
    const char *what = nn__rnn_beyond_int(p, &v);
    if (!what) return NN_OK;
    return NN__FAIL(ctx, NN_E_UNSUPPORTED,
                    "%s: %s = %lld is beyond what cuDNN's RNN calls take (sizes, and the products "
                    "of N with the widths, must fit int: %d)",
                    op, what, (long long)v, INT_MAX);
}

/* check_cudnn_limits on a cuDNN context only. */
static nn_status check_backend_limits(struct nn_ctx *ctx, const char *op,
                                      const struct nn__rnn_problem *prob)
{
#if NN_HAVE_CUDNN
    if (nn__ctx_on_gpu(ctx)) return check_cudnn_limits(ctx, op, prob);
#else
    (void)ctx, (void)op, (void)prob, (void)check_cudnn_limits;
#endif
    return NN_OK;
}

/* Both checks above, for the calls without x (problem_of_call runs check_sizes itself). */
static nn_status check_problem(struct nn_ctx *ctx, const char *op, const nn_rnn_params *p,
                               const struct nn__rnn_problem *prob)
{
    NN__TRY(check_sizes(ctx, op, p, prob));
    return check_backend_limits(ctx, op, prob);
}

static nn_status check_dtype_arg(struct nn_ctx *ctx, const char *op, nn_dtype dtype)
{
    if (nn_dtype_size(dtype) == 0)
        return NN__FAIL(ctx, NN_E_DTYPE, "%s: dtype must be an nn_dtype, got %d", op, (int)dtype);
    return NN_OK;
}

nn_status nn_rnn_weights_size(nn_ctx *ctx, const nn_rnn_params *p, nn_dtype dtype, int64_t *numel)
{
    const char *op = "nn_rnn_weights_size";
    if (!ctx) return NN__FAIL(NULL, NN_E_INVALID_ARG, "%s: ctx must not be NULL", op);
    NN__TRY(check_params(ctx, op, p));
    if (!numel) return NN__FAIL(ctx, NN_E_INVALID_ARG, "%s: numel must not be NULL", op);
    NN__TRY(check_dtype_arg(ctx, op, dtype));
    const struct rnn_backend *be;
    NN__TRY(pick_backend(ctx, op, &be));
    struct nn__rnn_problem prob;
    problem_of(ctx, p, dtype, &prob);
    NN__TRY(check_problem(ctx, op, p, &prob));
    return be->weights_size(ctx, &prob, numel, NULL);
}

/* A tensor argument: well formed, in the context's memory, the call's dtype, fully packed. An
 * output whose elements share memory is refused as such (NN_E_INVALID_ARG, as every op does)
 * before its strides are found unsupported. */
static nn_status check_arg(struct nn_ctx *ctx, const char *op, const nn_tensor *t, const char *name,
                           nn_dtype dtype, int out)
{
    if (!t) return NN__FAIL(ctx, NN_E_INVALID_ARG, "%s: %s must not be NULL", op, name);
    NN__TRY(nn__check_tensor(ctx, op, t, name));
    if (out) NN__TRY(nn__check_output_distinct(ctx, op, t, name));
    if (t->dtype != dtype)
        return NN__FAIL(ctx, NN_E_DTYPE,
                        "%s: %s.dtype must equal the call's dtype, x's (%s), got %s", op, name,
                        nn_dtype_name(dtype), nn_dtype_name(t->dtype));
    if (!nn_tensor_is_contiguous(t))
        return NN__FAIL(ctx, NN_E_UNSUPPORTED,
                        "%s: %s must be fully packed row-major; other strides are not supported",
                        op, name);
    return NN_OK;
}

/* Dims against what p implies; labels[i] says what dim i is ("N", "L*D"). */
static nn_status check_dims(struct nn_ctx *ctx, const char *op, const nn_tensor *t,
                            const char *name, int rank, const int64_t *want,
                            const char *const *labels)
{
    if (t->rank != rank)
        return NN__FAIL(ctx, NN_E_SHAPE, "%s: %s.rank must be %d, got %d", op, name, rank, t->rank);
    for (int i = 0; i < rank; i++)
        if (t->dims[i] != want[i])
            return NN__FAIL(ctx, NN_E_SHAPE, "%s: %s.dims[%d] must be %s = %lld, got %lld", op,
                            name, i, labels[i], (long long)want[i], (long long)t->dims[i]);
    return NN_OK;
}

/* note: the call's; the size's lookup may be the call's first (its cache field). */
static nn_status check_weights(struct nn_ctx *ctx, const char *op, const struct rnn_backend *be,
                               const struct nn__rnn_problem *prob, const nn_tensor *w,
                               const char *name, int out, struct nn__rnn_note *note)
{
    NN__TRY(check_arg(ctx, op, w, name, prob->dtype, out));
    int64_t numel;
    NN__TRY(be->weights_size(ctx, prob, &numel, note));
    static const char *const labels[] = {"nn_rnn_weights_size()"};
    return check_dims(ctx, op, w, name, 1, &numel, labels);
}

nn_status nn_rnn_weight_view(nn_ctx *ctx, const nn_rnn_params *p, const nn_tensor *w, int64_t layer,
                             int direction, nn_rnn_weight_name name, nn_tensor *out)
{
    const char *op = "nn_rnn_weight_view";
    if (!ctx) return NN__FAIL(NULL, NN_E_INVALID_ARG, "%s: ctx must not be NULL", op);
    NN__TRY(check_params(ctx, op, p));
    if (!w) return NN__FAIL(ctx, NN_E_INVALID_ARG, "%s: w must not be NULL", op);
    if (!out) return NN__FAIL(ctx, NN_E_INVALID_ARG, "%s: out must not be NULL", op);
    if (layer < 0 || layer >= p->num_layers)
        return NN__FAIL(ctx, NN_E_INVALID_ARG, "%s: layer must be in [0, %lld], got %lld", op,
                        (long long)p->num_layers - 1, (long long)layer);
    int dirs = p->bidirectional ? 2 : 1;
    if (direction < 0 || direction >= dirs)
        return NN__FAIL(ctx, NN_E_INVALID_ARG, "%s: direction must be %s, got %d", op,
                        dirs == 2 ? "0 or 1" : "0 (p.bidirectional is 0)", direction);
    if (!view_name(name))
        return NN__FAIL(ctx, NN_E_INVALID_ARG,
                        "%s: name must be NN_RNN_WEIGHT_IH, _WEIGHT_HH, _BIAS_IH, _BIAS_HH or "
                        "_WEIGHT_HR, got %d",
                        op, (int)name);
    NN__TRY(nn__check_tensor(ctx, op, w, "w"));
    struct nn__rnn_problem prob;
    problem_of(ctx, p, w->dtype, &prob);
    NN__TRY(check_problem(ctx, op, p, &prob));
    if (!nn__rnn_view_exists(&prob, layer, name))
        return NN__FAIL(ctx, NN_E_INVALID_ARG, "%s: %s does not exist for these parameters (%s)",
                        op, view_name(name),
                        name == NN_RNN_WEIGHT_IH   ? "layer 0 with NN_RNN_INPUT_SKIP has none"
                        : name == NN_RNN_WEIGHT_HR ? "p.proj_size is 0"
                                                   : bias_name(p->bias_mode));
    const struct rnn_backend *be;
    NN__TRY(pick_backend(ctx, op, &be));
    NN__TRY(check_weights(ctx, op, be, &prob, w, "w", 0, NULL));
    int64_t off, dims[2];
    NN__TRY(be->weight_offset(ctx, &prob, layer * dirs + direction, name, &off));
    int rank = nn__rnn_view_dims(&prob, layer, name, dims);
    nn_tensor v = *w;
    v.data = (char *)w->data + (size_t)off * nn_dtype_size(w->dtype);
    v.rank = rank;
    memset(v.dims, 0, sizeof v.dims);
    memset(v.strides, 0, sizeof v.strides);
    memcpy(v.dims, dims, (size_t)rank * sizeof *dims);
    NN__TRY(nn_contiguous_strides(rank, dims, v.strides));
    /* w's storage stays w's: the first view starts where w does, and its free must not free w */
    v.flags |= NN_TENSOR_BORROWED;
    *out = v;
    return NN_OK;
}

/* ---------------------------------------------------------------------------------------------
 * Call arguments
 */

static void seq_dims(const struct nn__rnn_problem *p, int64_t c, int64_t *d)
{
    d[0] = p->layout == NN_RNN_SEQ_MAJOR ? p->t : p->n;
    d[1] = p->layout == NN_RNN_SEQ_MAJOR ? p->n : p->t;
    d[2] = c;
}

static const char *const *seq_labels(const struct nn__rnn_problem *p, int wide)
{
    static const char *const labels[2][2][3] = {{{"T", "N", "I"}, {"T", "N", "D*O"}},
                                                {{"N", "T", "I"}, {"N", "T", "D*O"}}};
    return labels[p->layout == NN_RNN_BATCH_MAJOR][wide];
}

static nn_status check_seq(struct nn_ctx *ctx, const char *op, const struct nn__rnn_problem *p,
                           const nn_tensor *t, const char *name, int wide, int out)
{
    NN__TRY(check_arg(ctx, op, t, name, p->dtype, out));
    int64_t d[3];
    seq_dims(p, wide ? p->dirs * p->out : p->input, d);
    return check_dims(ctx, op, t, name, 3, d, seq_labels(p, wide));
}

static nn_status check_state(struct nn_ctx *ctx, const char *op, const struct nn__rnn_problem *p,
                             const nn_tensor *t, const char *name, int is_c, int out)
{
    if (!t) return NN_OK;
    if (is_c && p->cell != NN_RNN_LSTM)
        return NN__FAIL(ctx, NN_E_INVALID_ARG,
                        "%s: %s must be NULL for a %s cell (only LSTM has a cell state)", op, name,
                        cell_name(p->cell));
    NN__TRY(check_arg(ctx, op, t, name, p->dtype, out));
    int64_t d[3] = {p->layers * p->dirs, p->n, is_c ? p->hidden : p->out};
    static const char *const h_labels[] = {"L*D", "N", "O"}, *const c_labels[] = {"L*D", "N", "H"};
    return check_dims(ctx, op, t, name, 3, d, is_c ? c_labels : h_labels);
}

static nn_status check_lengths(struct nn_ctx *ctx, const char *op, struct nn__rnn_problem *p,
                               const int32_t *lengths, const char *name)
{
    p->lengths_kind = NN__RNN_LENGTHS_FULL;
    if (!lengths) return NN_OK;
    for (int64_t i = 0; i < p->n; i++) {
        if (lengths[i] < 0 || lengths[i] > p->t)
            return NN__FAIL(ctx, NN_E_SHAPE, "%s: %s[%lld] must be in [0, T] = [0, %lld], got %d",
                            op, name, (long long)i, (long long)p->t, (int)lengths[i]);
        if (lengths[i] != lengths[0]) p->lengths_kind = NN__RNN_LENGTHS_VARIED;
    }
    if (p->lengths_kind == NN__RNN_LENGTHS_FULL && p->n > 0 && lengths[0] != p->t)
        p->lengths_kind = NN__RNN_LENGTHS_SHORT;
    return NN_OK;
}

/* Bytes [lo, hi) a packed tensor covers. */
static void span_of(const nn_tensor *t, const char **lo, const char **hi)
{
    *lo = t->data;
    *hi = *lo + (size_t)nn_tensor_numel(t) * nn_dtype_size(t->dtype);
}

struct named {
    const nn_tensor *t;
    const char *name;
};

/* Every output against every input and every other output; NULL entries are skipped. */
static nn_status check_overlaps(struct nn_ctx *ctx, const char *op, const struct named *outs,
                                int nout, const struct named *ins, int nin)
{
    for (int i = 0; i < nout; i++) {
        if (!outs[i].t) continue;
        const char *a0, *a1, *b0, *b1;
        span_of(outs[i].t, &a0, &a1);
        for (int j = 0; j < nin + i; j++) {
            const struct named *o = j < nin ? &ins[j] : &outs[j - nin];
            if (!o->t || o->t->space != outs[i].t->space) continue;
            span_of(o->t, &b0, &b1);
            if (a0 < b1 && b0 < a1)
                return NN__FAIL(ctx, NN_E_INVALID_ARG, "%s: %s must not overlap %s in memory", op,
                                outs[i].name, o->name);
        }
    }
    return NN_OK;
}

/* The problem of a call on x with lengths: p, x and the lengths checked. in: what the
 * messages put before "x" and "lengths" ("t." for a field of nn_rnn_forward_tensors, "" for an
 * argument). */
static nn_status problem_of_call(struct nn_ctx *ctx, const char *op, const char *in,
                                 const nn_rnn_params *p, const nn_tensor *x, const int32_t *lengths,
                                 struct nn__rnn_problem *prob)
{
    char xname[16], lname[16];
    snprintf(xname, sizeof xname, "%sx", in);
    snprintf(lname, sizeof lname, "%slengths", in);
    NN__TRY(check_params(ctx, op, p));
    if (!x) return NN__FAIL(ctx, NN_E_INVALID_ARG, "%s: %s must not be NULL", op, xname);
    NN__TRY(nn__check_tensor(ctx, op, x, xname));
    problem_of(ctx, p, x->dtype, prob);
    if (x->rank != 3)
        return NN__FAIL(ctx, NN_E_SHAPE, "%s: %s.rank must be 3 (%s x I), got %d", op, xname,
                        p->layout == NN_RNN_SEQ_MAJOR ? "T x N" : "N x T", x->rank);
    prob->t = x->dims[p->layout == NN_RNN_SEQ_MAJOR ? 0 : 1];
    prob->n = x->dims[p->layout == NN_RNN_SEQ_MAJOR ? 1 : 0];
    NN__TRY(check_sizes(ctx, op, p, prob));
    NN__TRY(check_seq(ctx, op, prob, x, xname, 0, 0));
    return check_lengths(ctx, op, prob, lengths, lname);
}

/* ---------------------------------------------------------------------------------------------
 * Forward
 */

static nn_status make_pullback(struct nn_ctx *ctx, const char *op, const struct rnn_backend *be,
                               const struct nn__rnn_problem *prob, const struct nn__rnn_io *io,
                               nn_rnn_pullback **out)
{
    nn_rnn_pullback *pb = nn__host_calloc(1, sizeof *pb);
    if (pb && io->lengths) {
        pb->lengths = nn__host_alloc((size_t)prob->n * sizeof *pb->lengths);
        if (pb->lengths) memcpy(pb->lengths, io->lengths, (size_t)prob->n * sizeof *pb->lengths);
    }
    if (!pb || (io->lengths && !pb->lengths)) {
        if (pb) nn__host_free(pb->lengths);
        nn__host_free(pb);
        return NN__FAIL(ctx, NN_E_OOM_HOST, "%s: out of host memory for the pullback", op);
    }
    pb->hdr.ctx = ctx; /* for free_pullback() before it is live */
    pb->be = be;
    pb->prob = *prob;
    pb->x = *io->x;
    pb->w = *io->w;
    pb->y = *io->y_out;
    if (io->hx) pb->hx = *io->hx, pb->has_hx = 1;
    if (io->cx) pb->cx = *io->cx, pb->has_cx = 1;
    *out = pb;
    return NN_OK;
}

static void free_pullback(void *v)
{
    nn_rnn_pullback *pb = v;
    if (pb->state) pb->be->state_free(pb->hdr.ctx, pb->state);
    nn__host_free(pb->lengths);
    nn__host_free(pb);
}

static nn_status rnn_forward(nn_ctx *ctx, const nn_rnn_params *p, const nn_rnn_forward_tensors *t,
                             nn_rnn_pullback **pullback_out)
{
    const char *op = "nn_rnn_forward";
    if (pullback_out) *pullback_out = NULL;
    if (!ctx) return NN__FAIL(NULL, NN_E_INVALID_ARG, "%s: ctx must not be NULL", op);
    struct nn__rnn_note note = {0};
    uint64_t t0 = nn__verbose(ctx) ? nn__now_ns() : 0;
    if (!t) return NN__FAIL(ctx, NN_E_INVALID_ARG, "%s: t (the tensors) must not be NULL", op);
    NN__TRY(NN__CHECK_RESERVED(ctx, op, "t.reserved", t->reserved));
    const nn_tensor *x = t->x, *hx = t->hx, *cx = t->cx, *w = t->w;
    nn_tensor *y = t->y, *hy = t->hy, *cy = t->cy;
    const int32_t *lengths = t->lengths;
    struct nn__rnn_problem prob;
    NN__TRY(problem_of_call(ctx, op, "t.", p, x, lengths, &prob));
    failure_case(&prob, lengths, 0, 0, t0);
    NN__TRY(check_state(ctx, op, &prob, hx, "t.hx", 0, 0));
    NN__TRY(check_state(ctx, op, &prob, cx, "t.cx", 1, 0));
    if (!y) return NN__FAIL(ctx, NN_E_INVALID_ARG, "%s: t.y must not be NULL", op);
    NN__TRY(check_seq(ctx, op, &prob, y, "t.y", 1, 1));
    NN__TRY(check_state(ctx, op, &prob, hy, "t.hy", 0, 1));
    NN__TRY(check_state(ctx, op, &prob, cy, "t.cy", 1, 1));
    const struct rnn_backend *be;
    NN__TRY(pick_backend(ctx, op, &be));
    NN__TRY(check_backend_limits(ctx, op, &prob));
    if (!w) return NN__FAIL(ctx, NN_E_INVALID_ARG, "%s: t.w must not be NULL", op);
    NN__TRY(check_weights(ctx, op, be, &prob, w, "t.w", 0, &note));
    const struct named ins[] = {{x, "t.x"}, {hx, "t.hx"}, {cx, "t.cx"}, {w, "t.w"}};
    const struct named outs[] = {{y, "t.y"}, {hy, "t.hy"}, {cy, "t.cy"}};
    NN__TRY(check_overlaps(ctx, op, outs, 3, ins, 4));

    struct nn__rnn_io io = {.x = x,
                            .hx = hx,
                            .cx = cx,
                            .w = w,
                            .y = y,
                            .y_out = y,
                            .hy = hy,
                            .cy = cy,
                            .lengths = lengths,
                            .training = pullback_out != NULL};
    nn_rnn_pullback *pb = NULL;
    if (pullback_out) NN__TRY(make_pullback(ctx, op, be, &prob, &io, &pb));
    note.impl = NULL;
    nn_status st = be->forward(ctx, &prob, &io, pb ? &pb->state : NULL, &note);
    if (st != NN_OK) {
        st = nn__error_in(ctx, op); /* the backend's message, seen from the public call */
        if (pb) free_pullback(pb);
        return st;
    }
    /* accumulation is asked of nn_rnn_backward_ex() alone: the pullback's default is overwrite */
    if (pb && (st = nn__pullback_add(ctx, op, &pullback_kind, &pb->hdr)) != NN_OK) {
        free_pullback(pb);
        return st;
    }
    if (t0) verbose_line(ctx, op, be->name, &note, &prob, lengths, 0, 0, t0);
    if (pullback_out) *pullback_out = pb;
    return NN_OK;
}

nn_status nn_rnn_forward(nn_ctx *ctx, const nn_rnn_params *p, const nn_rnn_forward_tensors *t,
                         nn_rnn_pullback **pullback_out)
{
    uint64_t t0 = nn__verbose(ctx) ? nn__now_ns() : 0;
    return nn__verbose_exit(ctx, "rnn_forward", t0, rnn_forward(ctx, p, t, pullback_out));
}

/* ---------------------------------------------------------------------------------------------
 * Backward
 */

static nn_status rnn_backward(nn_ctx *ctx, const char *op, nn_rnn_pullback **pullback,
                              const nn_backward_options *opts, const nn_rnn_backward_tensors *t)
{
    if (!ctx) return NN__FAIL(NULL, NN_E_INVALID_ARG, "%s: ctx must not be NULL", op);
    uint64_t t0 = nn__verbose(ctx) ? nn__now_ns() : 0;
    struct nn__rnn_note note = {0};
    struct nn__backward bw;
    NN__TRY(NN__BACKWARD_BEGIN(ctx, op, &pullback_kind, pullback, opts, &bw));
    if (!t) return NN__FAIL(ctx, NN_E_INVALID_ARG, "%s: t (the gradients) must not be NULL", op);
    NN__TRY(NN__CHECK_RESERVED(ctx, op, "t.reserved", t->reserved));
    const nn_tensor *dy = t->dy, *dhy = t->dhy, *dcy = t->dcy;
    nn_tensor *dx = t->dx, *dhx = t->dhx, *dcx = t->dcx, *dw = t->dw;
    nn_rnn_pullback *pb = *pullback;
    const struct nn__rnn_problem *prob = &pb->prob;
    unsigned asked = asked_of(dx, dhx, dcx, dw);
    int accumulate = (bw.accumulate & NN_ACCUMULATE_DW) != 0;
    failure_case(prob, pb->lengths, accumulate, asked, t0);
    if (dy) NN__TRY(check_seq(ctx, op, prob, dy, "t.dy", 1, 0));
    NN__TRY(check_state(ctx, op, prob, dhy, "t.dhy", 0, 0));
    NN__TRY(check_state(ctx, op, prob, dcy, "t.dcy", 1, 0));
    if (dx) NN__TRY(check_seq(ctx, op, prob, dx, "t.dx", 0, 1));
    NN__TRY(check_state(ctx, op, prob, dhx, "t.dhx", 0, 1));
    NN__TRY(check_state(ctx, op, prob, dcx, "t.dcx", 1, 1));
    if (dw) NN__TRY(check_weights(ctx, op, pb->be, prob, dw, "t.dw", 1, &note));
    const nn_tensor *hx = pb->has_hx ? &pb->hx : NULL, *cx = pb->has_cx ? &pb->cx : NULL;
    const struct named ins[] = {{dy, "t.dy"},
                                {dhy, "t.dhy"},
                                {dcy, "t.dcy"},
                                {&pb->x, "the pullback's x"},
                                {hx, "the pullback's hx"},
                                {cx, "the pullback's cx"},
                                {&pb->w, "the pullback's w"},
                                {&pb->y, "the pullback's y"}};
    const struct named outs[] = {{dx, "t.dx"}, {dhx, "t.dhx"}, {dcx, "t.dcx"}, {dw, "t.dw"}};
    NN__TRY(check_overlaps(ctx, op, outs, 4, ins, 8));

    struct nn__rnn_io io = {.x = &pb->x,
                            .hx = hx,
                            .cx = cx,
                            .w = &pb->w,
                            .y = &pb->y,
                            .lengths = pb->lengths,
                            .dy = dy,
                            .dhy = dhy,
                            .dcy = dcy,
                            .dx = dx,
                            .dhx = dhx,
                            .dcx = dcx,
                            .dw = dw,
                            .accumulate = accumulate};
    note.impl = NULL;
    NN__TRY_IN(ctx, op, pb->be->backward(ctx, prob, pb->state, &io, &note));
    if (t0) verbose_line(ctx, op, pb->be->name, &note, prob, pb->lengths, accumulate, asked, t0);
    return nn_rnn_pullback_free(pullback); /* never kept: the kind is single-use */
}

nn_status nn_rnn_backward(nn_ctx *ctx, nn_rnn_pullback **pullback, const nn_rnn_backward_tensors *t)
{
    uint64_t t0 = nn__verbose(ctx) ? nn__now_ns() : 0;
    return nn__verbose_exit(ctx, "rnn_backward", t0,
                            rnn_backward(ctx, "nn_rnn_backward", pullback, NULL, t));
}

nn_status nn_rnn_backward_ex(nn_ctx *ctx, nn_rnn_pullback **pullback,
                             const nn_backward_options *opts, const nn_rnn_backward_tensors *t)
{
    uint64_t t0 = nn__verbose(ctx) ? nn__now_ns() : 0;
    return nn__verbose_exit(ctx, "rnn_backward_ex", t0,
                            rnn_backward(ctx, "nn_rnn_backward_ex", pullback, opts, t));
}

nn_status nn_rnn_pullback_free(nn_rnn_pullback **pullback)
{
    return nn__pullback_free("nn_rnn_pullback_free", &pullback_kind, pullback, free_pullback);
}

/* ---------------------------------------------------------------------------------------------
 * Workspace query
 */

nn_status nn_rnn_workspace_size(nn_ctx *ctx, const nn_rnn_params *p, const nn_tensor *x,
                                const int32_t *lengths, nn_rnn_pass pass, size_t *bytes)
{
    const char *op = "nn_rnn_workspace_size";
    if (!ctx) return NN__FAIL(NULL, NN_E_INVALID_ARG, "%s: ctx must not be NULL", op);
    if (!bytes) return NN__FAIL(ctx, NN_E_INVALID_ARG, "%s: bytes must not be NULL", op);
    if (pass != NN_RNN_PASS_INFERENCE && pass != NN_RNN_PASS_TRAINING &&
        pass != NN_RNN_PASS_BACKWARD)
        return NN__FAIL(ctx, NN_E_INVALID_ARG,
                        "%s: pass must be NN_RNN_PASS_INFERENCE (0), NN_RNN_PASS_TRAINING (1) or "
                        "NN_RNN_PASS_BACKWARD (2), got %d",
                        op, (int)pass);
    struct nn__rnn_problem prob;
    NN__TRY(problem_of_call(ctx, op, "", p, x, lengths, &prob));
    const struct rnn_backend *be;
    NN__TRY(pick_backend(ctx, op, &be));
    NN__TRY(check_backend_limits(ctx, op, &prob));
    size_t n = 0;
    NN__TRY_IN(ctx, op, be->workspace(ctx, &prob, pass, &n));
    *bytes = n;
    return NN_OK;
}

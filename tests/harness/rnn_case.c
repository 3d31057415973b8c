/* The recurrent harness: case text, standard cases, finite differences, guarded runs. */
#include "rnn_case.h"

#include <ctype.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------------------------------------
 * Text form (docs/RNN.md)
 */

static const char *const cells[] = {"relu", "tanh", "lstm", "gru"};
static const char *const biases[] = {"bias_none", "bias_input", "bias_recurrent", "bias_double"};

static int lookup(const char *tok, const char *const *names, int n)
{
    for (int i = 0; i < n; i++)
        if (!strcmp(tok, names[i])) return i;
    return -1;
}

/* "<prefix><int>" with nothing after. */
static int int_after(const char *tok, const char *prefix, long long *v)
{
    size_t k = strlen(prefix);
    if (strncmp(tok, prefix, k) || !isdigit((unsigned char)tok[k])) return 0;
    char *end;
    *v = strtoll(tok + k, &end, 10);
    return *end == 0;
}

static const char *const grad_names[] = {"dx", "dhx", "dcx", "dw"};

/* The NN_RNN_CASE_SKIP_* bits of the gradients the case's cell has (dcx: LSTM only). */
static unsigned grads_of(const struct nn_rnn_case *c)
{
    return NN_RNN_CASE_SKIP_DX | NN_RNN_CASE_SKIP_DHX | NN_RNN_CASE_SKIP_DW |
           (c->p.cell == NN_RNN_LSTM ? NN_RNN_CASE_SKIP_DCX : 0);
}

/* "grads=dx+dw" or "grads=none": the gradients the backward asks for. */
static int parse_grads(const char *s, struct nn_rnn_case *c, char *err, size_t cap)
{
    c->skip =
        NN_RNN_CASE_SKIP_DX | NN_RNN_CASE_SKIP_DHX | NN_RNN_CASE_SKIP_DCX | NN_RNN_CASE_SKIP_DW;
    if (strcmp(s + 6, "none")) {
        char list[64];
        snprintf(list, sizeof list, "%s", s + 6);
        for (char *save = NULL, *g = strtok_r(list, "+", &save); g;
             g = strtok_r(NULL, "+", &save)) {
            int i = 0;
            while (i < 4 && strcmp(g, grad_names[i]))
                i++;
            if (i == 4)
                return nn_h_fail(err, cap,
                                 "token \"%s\": grads= takes none, or dx, dhx, dcx, dw joined by "
                                 "'+'",
                                 s);
            c->skip &= ~(1u << i);
        }
    }
    c->skip &= grads_of(c); /* dcx of a cell without one is never asked for */
    return 0;
}

static int parse_lengths(const char *s, struct nn_rnn_case *c, char *err, size_t cap)
{
    int64_t n = 0;
    while (*s) {
        char *end;
        long v = strtol(s, &end, 10);
        if (end == s || (*end && *end != 'x'))
            return nn_h_fail(err, cap, "bad lens token near \"%s\" (want lens<a>x<b>x...)", s);
        if (n >= NN_RNN_CASE_MAX_N)
            return nn_h_fail(err, cap, "lens: more than %d lengths", NN_RNN_CASE_MAX_N);
        c->lengths[n++] = (int32_t)v;
        s = *end ? end + 1 : end;
    }
    c->has_lengths = 1;
    c->n = c->n ? c->n : n;
    if (n != c->n)
        return nn_h_fail(err, cap, "lens: %lld lengths for n%lld", (long long)n, (long long)c->n);
    return 0;
}

int nn_rnn_case_parse(int ntok, char **tok, struct nn_rnn_case *c, char *err, size_t cap)
{
    memset(c, 0, sizeof *c);
    if (ntok < 2) return nn_h_fail(err, cap, "a case needs a cell and t<T>n<N>i<I>h<H>");
    int cell = lookup(tok[0], cells, 4);
    if (cell < 0) return nn_h_fail(err, cap, "unknown cell \"%s\" (relu, tanh, lstm, gru)", tok[0]);
    long long t, n, i, h;
    int used;
    if (sscanf(tok[1], "t%lldn%lldi%lldh%lld%n", &t, &n, &i, &h, &used) != 4 || tok[1][used])
        return nn_h_fail(err, cap, "bad size token \"%s\" (want t<T>n<N>i<I>h<H>)", tok[1]);
    if (n < 1 || n > NN_RNN_CASE_MAX_N || t < 1)
        return nn_h_fail(err, cap, "\"%s\": need t >= 1 and 1 <= n <= %d", tok[1],
                         NN_RNN_CASE_MAX_N);
    if (nn_rnn_params_default(&c->p, (nn_rnn_cell)cell, i, h) != NN_OK)
        return nn_h_fail(err, cap, "%s", nn_last_error()->message);
    c->t = t;
    c->n = n;
    c->dtype = NN_DTYPE_F32;
    c->math = NN_MATH_STRICT_FP32;
    for (int k = 2; k < ntok; k++) {
        const char *s = tok[k];
        long long v;
        int idx;
        if (int_after(s, "l", &v))
            c->p.num_layers = v;
        else if (!strcmp(s, "uni"))
            c->p.bidirectional = 0;
        else if (!strcmp(s, "bidir"))
            c->p.bidirectional = 1;
        else if (int_after(s, "proj", &v))
            c->p.proj_size = v;
        else if ((idx = lookup(s, biases, 4)) >= 0)
            c->p.bias_mode = (nn_rnn_bias_mode)idx;
        else if (!strcmp(s, "skip"))
            c->p.input_mode = NN_RNN_INPUT_SKIP;
        else if (!strcmp(s, "seq"))
            c->p.layout = NN_RNN_SEQ_MAJOR;
        else if (!strcmp(s, "batch"))
            c->p.layout = NN_RNN_BATCH_MAJOR;
        else if (!strncmp(s, "clip", 4)) {
            char *end, *mid;
            c->p.clip_lo = strtod(s + 4, &mid);
            if (mid == s + 4 || *mid != ':') return nn_h_fail(err, cap, "bad clip token \"%s\"", s);
            c->p.clip_hi = strtod(mid + 1, &end);
            if (end == mid + 1 || *end) return nn_h_fail(err, cap, "bad clip token \"%s\"", s);
            c->p.clip_enabled = 1;
        } else if (!strncmp(s, "drop", 4)) {
            char *end, *mid;
            c->p.dropout = strtod(s + 4, &mid);
            if (mid == s + 4 || *mid != ':') return nn_h_fail(err, cap, "bad drop token \"%s\"", s);
            c->p.dropout_seed = strtoull(mid + 1, &end, 10);
            if (end == mid + 1 || *end) return nn_h_fail(err, cap, "bad drop token \"%s\"", s);
        } else if (!strncmp(s, "lens", 4)) {
            if (parse_lengths(s + 4, c, err, cap)) return -1;
        } else if (nn_h_dtype_token(s, &c->dtype))
            continue;
        else if (!strcmp(s, "tf32"))
            c->math = NN_MATH_TF32;
        else if (!strcmp(s, "acc"))
            c->accumulate = NN_ACCUMULATE_DW;
        else if (!strncmp(s, "grads=", 6)) {
            if (parse_grads(s, c, err, cap)) return -1;
        } else
            return nn_h_fail(err, cap, "unknown token \"%s\"", s);
    }
    /* as linear cases: the text of another dtype has no tf32, so it would not reproduce one */
    if (c->math == NN_MATH_TF32 && c->dtype != NN_DTYPE_F32)
        return nn_h_fail(err, cap, "%s", "tf32 applies to f32 cases only");
    return 0;
}

int nn_rnn_case_parse_line(const char *line, struct nn_rnn_case *c, char *err, size_t cap)
{
    char buf[16384];
    snprintf(buf, sizeof buf, "%s", line);
    char *hash = strchr(buf, '#');
    if (hash) *hash = 0;
    char *text = buf;
    if (!strncmp(text, "nnprim_verbose,", 15)) {
        /* nnprim_verbose,<op>,<backend>,<impl>,<cache>,<case>,<ms> */
        for (int f = 0; f < 5 && text; f++)
            text = strchr(text, ',') ? strchr(text, ',') + 1 : NULL;
        char *end = text ? strrchr(text, ',') : NULL;
        if (!end) return nn_h_fail(err, cap, "a verbose line needs 7 comma-separated fields");
        *end = 0;
    }
    char *tok[64];
    int n = 0;
    for (char *s = strtok(text, " \t\r\n"); s; s = strtok(NULL, " \t\r\n")) {
        if (n == 64) return nn_h_fail(err, cap, "more than 64 tokens");
        tok[n++] = s;
    }
    if (!n) return 0;
    return nn_rnn_case_parse(n, tok, c, err, cap) ? -1 : 1;
}

static void put(char *buf, size_t cap, size_t *len, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void put(char *buf, size_t cap, size_t *len, const char *fmt, ...)
{
    if (*len >= cap) return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf + *len, cap - *len, fmt, ap);
    va_end(ap);
    if (n > 0) *len += (size_t)n;
}

void nn_rnn_case_format(const struct nn_rnn_case *c, char *buf, size_t cap)
{
    const nn_rnn_params *p = &c->p;
    size_t len = 0;
    if (cap) buf[0] = 0;
    put(buf, cap, &len, "%s t%lldn%lldi%lldh%lld l%lld %s", cells[p->cell], (long long)c->t,
        (long long)c->n, (long long)p->input_size, (long long)p->hidden_size,
        (long long)p->num_layers, p->bidirectional ? "bidir" : "uni");
    if (p->proj_size) put(buf, cap, &len, " proj%lld", (long long)p->proj_size);
    put(buf, cap, &len, " %s", biases[p->bias_mode]);
    if (p->input_mode == NN_RNN_INPUT_SKIP) put(buf, cap, &len, " skip");
    put(buf, cap, &len, " %s", p->layout == NN_RNN_BATCH_MAJOR ? "batch" : "seq");
    if (p->clip_enabled) put(buf, cap, &len, " clip%.17g:%.17g", p->clip_lo, p->clip_hi);
    if (p->dropout > 0)
        put(buf, cap, &len, " drop%.17g:%" PRIu64, p->dropout, (uint64_t)p->dropout_seed);
    for (int64_t i = 0; c->has_lengths && i < c->n; i++)
        put(buf, cap, &len, i ? "x%d" : " lens%d", (int)c->lengths[i]);
    put(buf, cap, &len, " %s", nn_dtype_name(c->dtype));
    if (c->dtype == NN_DTYPE_F32 && c->math == NN_MATH_TF32) put(buf, cap, &len, " tf32");
    if (c->accumulate & NN_ACCUMULATE_DW) put(buf, cap, &len, " acc");
    unsigned all = grads_of(c);
    if (!(c->skip & all)) return;
    if ((c->skip & all) == all) {
        put(buf, cap, &len, " grads=none");
        return;
    }
    const char *sep = " grads=";
    for (int i = 0; i < 4; i++)
        if (all & ~c->skip & (1u << i)) {
            put(buf, cap, &len, "%s%s", sep, grad_names[i]);
            sep = "+";
        }
}

/* ---------------------------------------------------------------------------------------------
 * Standard cases
 */

static const char *const standard[] = {
    "relu t4n3i3h3 l1 uni",
    "tanh t4n3i2h3 l2 bidir lens4x0x2",
    "lstm t4n3i3h3 l1 uni",
    "lstm t4n3i2h4 l2 bidir lens3x4x0",
    "lstm t3n2i3h4 l2 bidir proj2 lens3x1",
    "lstm t4n2i3h3 l1 bidir clip-0.5:0.6",
    "gru t4n3i3h3 l1 uni",
    "gru t4n3i2h3 l2 bidir lens2x4x0 batch",
    "lstm t3n2i3h3 l2 uni bias_none",
    "gru t3n2i3h3 l1 bidir bias_input",
    "tanh t3n2i3h3 l1 uni bias_recurrent",
    "gru t3n2i3h3 l2 uni skip",
    "lstm t3n2i3h3 l1 uni skip batch lens3x2",
    "lstm t3n2i2h3 l3 bidir drop0.4:11",
    "relu t1n1i1h1 l1 uni",
};

size_t nn_rnn_standard_case_count(void)
{
    return 2 * sizeof standard / sizeof standard[0];
}

int nn_rnn_standard_case(size_t i, struct nn_rnn_case *c)
{
    size_t n = sizeof standard / sizeof standard[0];
    if (i >= 2 * n) return -1;
    char err[256];
    if (nn_rnn_case_parse_line(standard[i % n], c, err, sizeof err) != 1) return -1;
    c->dtype = i < n ? NN_DTYPE_F64 : NN_DTYPE_F32;
    return 0;
}

/* ---------------------------------------------------------------------------------------------
 * The tensors of one case
 */

struct bufs {
    int lstm;
    nn_tensor x, hx, cx, w;     /* inputs */
    nn_tensor ry, rh, rc;       /* the loss's weights, also the incoming gradients */
    struct nn_h_guarded out[7]; /* y, hy, cy, dx, dhx, dcx, dw */
};
enum { Y, HY, CY, DX, DHX, DCX, DW };
static const char *const out_names[] = {"y", "hy", "cy", "dx", "dhx", "dcx", "dw"};

static void seq_dims(const struct nn_rnn_case *c, int64_t ch, int64_t *d)
{
    int seq = c->p.layout == NN_RNN_SEQ_MAJOR;
    d[0] = seq ? c->t : c->n;
    d[1] = seq ? c->n : c->t;
    d[2] = ch;
}

static int64_t out_width(const struct nn_rnn_case *c)
{
    return c->p.proj_size ? c->p.proj_size : c->p.hidden_size;
}

static void bufs_free2(nn_ctx *ctx, nn_ctx *host, struct bufs *b)
{
    nn_tensor *ts[] = {&b->x, &b->hx, &b->cx, &b->w, &b->ry, &b->rh, &b->rc};
    for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++)
        if (ts[i]->data) nn_tensor_free(ctx, ts[i]);
    for (int i = 0; i < 7; i++)
        if (b->out[i].whole.data) nn_h_guarded_free(ctx, host, &b->out[i]);
    memset(b, 0, sizeof *b);
}

static void bufs_free(nn_ctx *ctx, struct bufs *b)
{
    bufs_free2(ctx, ctx, b);
}

static nn_status filled(nn_ctx *ctx, nn_dtype dt, int rank, const int64_t *d, double lo, double hi,
                        uint64_t seed, nn_tensor *t)
{
    nn_status st = nn_tensor_empty(ctx, dt, rank, d, t);
    if (st == NN_OK) st = nn_tensor_fill_uniform(ctx, t, lo, hi, seed);
    return st;
}

#define TRYB(expr)                                                                                 \
    do {                                                                                           \
        nn_status st_ = (expr);                                                                    \
        if (st_ != NN_OK) {                                                                        \
            bufs_free(ctx, b);                                                                     \
            return st_;                                                                            \
        }                                                                                          \
    } while (0)

static nn_status bufs_alloc(nn_ctx *ctx, const struct nn_rnn_case *c, nn_dtype dt, struct bufs *b)
{
    memset(b, 0, sizeof *b);
    const nn_rnn_params *p = &c->p;
    b->lstm = p->cell == NN_RNN_LSTM;
    int64_t D = p->bidirectional ? 2 : 1, O = out_width(c), nw;
    int64_t xd[3], yd[3], hd[3] = {p->num_layers * D, c->n, O};
    int64_t cd[3] = {p->num_layers * D, c->n, p->hidden_size};
    seq_dims(c, p->input_size, xd);
    seq_dims(c, D * O, yd);
    TRYB(nn_rnn_weights_size(ctx, p, dt, &nw));
    TRYB(filled(ctx, dt, 3, xd, -1, 1, 1, &b->x));
    TRYB(filled(ctx, dt, 3, hd, -1, 1, 2, &b->hx));
    TRYB(filled(ctx, dt, 1, &nw, -0.6, 0.6, 3, &b->w));
    TRYB(filled(ctx, dt, 3, yd, -1, 1, 4, &b->ry));
    TRYB(filled(ctx, dt, 3, hd, -1, 1, 5, &b->rh));
    if (b->lstm) {
        TRYB(filled(ctx, dt, 3, cd, -1, 1, 6, &b->cx));
        TRYB(filled(ctx, dt, 3, cd, -1, 1, 7, &b->rc));
    }
    const int64_t *dims[7] = {yd, hd, cd, xd, hd, cd, &nw};
    for (int i = 0; i < 7; i++) {
        if (!b->lstm && (i == CY || i == DCX)) continue;
        /* a gradient the backward does not ask for is not given (NULL) */
        if (i >= DX && (c->skip & (1u << (i - DX)))) continue;
        TRYB(nn_h_guarded_alloc(ctx, ctx, dt, i == DW ? 1 : 3, dims[i], 100 + (uint64_t)i,
                                &b->out[i]));
    }
    return NN_OK;
}

static nn_tensor *opt(struct bufs *b, int i)
{
    return b->out[i].whole.data ? &b->out[i].view : NULL;
}

static const int32_t *lengths_of(const struct nn_rnn_case *c)
{
    return c->has_lengths ? c->lengths : NULL;
}

/* Forward in training mode (so dropout applies), then backward into the gradient outputs. */
static nn_status step(nn_ctx *ctx, const struct nn_rnn_case *c, struct bufs *b, int backward)
{
    nn_rnn_pullback *pb = NULL;
    nn_rnn_forward_tensors t = {.x = &b->x,
                                .lengths = lengths_of(c),
                                .hx = &b->hx,
                                .cx = b->lstm ? &b->cx : NULL,
                                .w = &b->w,
                                .y = opt(b, Y),
                                .hy = opt(b, HY),
                                .cy = opt(b, CY)};
    nn_status st = nn_rnn_forward(ctx, &c->p, &t, &pb);
    if (st != NN_OK) return st;
    if (!backward) return nn_rnn_pullback_free(&pb);
    nn_rnn_backward_tensors g = {.dy = &b->ry,
                                 .dhy = &b->rh,
                                 .dcy = b->lstm ? &b->rc : NULL,
                                 .dx = opt(b, DX),
                                 .dhx = opt(b, DHX),
                                 .dcx = opt(b, DCX),
                                 .dw = opt(b, DW)};
    /* "acc" is asked of the backward that takes options; the plain one overwrites */
    nn_backward_options o = {.accumulate = c->accumulate};
    st = c->accumulate ? nn_rnn_backward_ex(ctx, &pb, &o, &g) : nn_rnn_backward(ctx, &pb, &g);
    nn_rnn_pullback_free(&pb);
    return st;
}

static double dot(const nn_tensor *a, const nn_tensor *b)
{
    double s = 0;
    for (int64_t i = 0; i < nn_tensor_numel(a); i++)
        s += nn_h_get(a, i) * nn_h_get(b, i);
    return s;
}

static nn_status loss(nn_ctx *ctx, const struct nn_rnn_case *c, struct bufs *b, double *out)
{
    nn_status st = step(ctx, c, b, 0);
    if (st != NN_OK) return st;
    *out = dot(&b->out[Y].view, &b->ry) + dot(&b->out[HY].view, &b->rh);
    if (b->lstm) *out += dot(&b->out[CY].view, &b->rc);
    return NN_OK;
}

static int report_status(nn_status st, const char *what, FILE *out, const char *repro)
{
    fprintf(out, "FAIL %s: %s: %s | %s\n", what, nn_status_name(st), nn_last_error()->message,
            repro);
    return 1;
}

/* ---------------------------------------------------------------------------------------------
 * Checks
 */

static int64_t fwd_macs(const struct nn_rnn_case *c)
{
    const nn_rnn_params *p = &c->p;
    int64_t g = p->cell == NN_RNN_LSTM ? 4 : p->cell == NN_RNN_GRU ? 3 : 1;
    int64_t D = p->bidirectional ? 2 : 1, O = out_width(c),
            wide = p->input_size > D * O ? p->input_size : D * O;
    return c->t * c->n * p->num_layers * D * g * p->hidden_size * (wide + O);
}

int nn_rnn_check_gradients(nn_ctx *ref, const struct nn_rnn_case *c, FILE *out)
{
    char repro[1200], text[1024];
    nn_rnn_case_format(c, text, sizeof text);
    snprintf(repro, sizeof repro, "nnprim check rnn %s", text);
    struct nn_rnn_case c64 = *c;
    c64.dtype = NN_DTYPE_F64;
    c64.accumulate = 0;
    int64_t nw;
    nn_status st = nn_rnn_weights_size(ref, &c64.p, NN_DTYPE_F64, &nw);
    if (st != NN_OK) return report_status(st, "weights size", out, repro);
    if (nw > 20000 || fwd_macs(c) > 2000000) {
        fprintf(out, "note: finite differences skipped (too large) | %s\n", repro);
        return 0;
    }
    struct bufs bb, *b = &bb;
    nn_ctx *ctx = ref;
    st = bufs_alloc(ctx, &c64, NN_DTYPE_F64, b);
    if (st != NN_OK) return report_status(st, "allocation", out, repro);
    st = step(ctx, &c64, b, 1);
    if (st != NN_OK) {
        bufs_free(ctx, b);
        return report_status(st, "reference forward + backward", out, repro);
    }
    struct {
        const char *name;
        nn_tensor *t, *g;
    } wrt[] = {{"dx", &b->x, &b->out[DX].view},
               {"dhx", &b->hx, &b->out[DHX].view},
               {"dcx", &b->cx, &b->out[DCX].view},
               {"dw", &b->w, &b->out[DW].view}};
    const double eps = 1e-5;
    int fails = 0;
    for (int k = 0; k < 4; k++) {
        if (!wrt[k].t->data || !wrt[k].g->data) continue; /* no cx, or not asked for */
        double *v = wrt[k].t->data;
        int64_t bad = 0, first = -1;
        double fnum = 0, fana = 0;
        for (int64_t i = 0; i < nn_tensor_numel(wrt[k].t); i++) {
            double keep = v[i], lp = 0, lm = 0;
            v[i] = keep + eps;
            st = loss(ctx, &c64, b, &lp);
            v[i] = keep - eps;
            if (st == NN_OK) st = loss(ctx, &c64, b, &lm);
            v[i] = keep;
            if (st != NN_OK) {
                bufs_free(ctx, b);
                return report_status(st, "finite-difference forward", out, repro);
            }
            double num = (lp - lm) / (2 * eps), ana = ((double *)wrt[k].g->data)[i];
            if (!(fabs(num - ana) <= 1e-6 * (1 + fabs(ana)))) {
                if (!bad++) first = i, fnum = num, fana = ana;
            }
        }
        if (bad) {
            fprintf(out,
                    "FAIL %s: %lld of %lld elements differ from finite differences; first [%lld]: "
                    "backward %.10g, finite differences %.10g | %s\n",
                    wrt[k].name, (long long)bad, (long long)nn_tensor_numel(wrt[k].t),
                    (long long)first, fana, fnum, repro);
            fails++;
        }
    }
    bufs_free(ctx, b);
    return fails;
}

/* Padded positions (t >= length) of a sequence tensor must be zero. */
static int check_padding(const struct nn_rnn_case *c, const char *name, const nn_tensor *t,
                         FILE *out, const char *repro)
{
    if (!c->has_lengths) return 0;
    int seq = c->p.layout == NN_RNN_SEQ_MAJOR;
    int64_t ch = t->dims[2];
    for (int64_t n = 0; n < c->n; n++)
        for (int64_t s = c->lengths[n]; s < c->t; s++)
            for (int64_t j = 0; j < ch; j++) {
                double v = nn_h_get(t, ((seq ? s * c->n + n : n * c->t + s) * ch) + j);
                if (v != 0) {
                    fprintf(out, "FAIL %s: padded position t=%lld n=%lld holds %g, not 0 | %s\n",
                            name, (long long)s, (long long)n, v, repro);
                    return 1;
                }
            }
    return 0;
}

int nn_rnn_check_reference(nn_ctx *ref, const struct nn_rnn_case *c, FILE *out)
{
    char repro[1200], text[1024];
    nn_rnn_case_format(c, text, sizeof text);
    snprintf(repro, sizeof repro, "nnprim check rnn %s", text);
    int fails = nn_rnn_check_gradients(ref, c, out);
    struct nn_rnn_case cc = *c;
    cc.accumulate = 0; /* every dw element must be written */
    struct bufs b;
    nn_status st = bufs_alloc(ref, &cc, c->dtype, &b);
    if (st == NN_OK) st = step(ref, &cc, &b, 1);
    if (st != NN_OK) {
        fails += report_status(st, "reference run", out, repro);
    } else {
        for (int i = 0; i < 7; i++) {
            if (!b.out[i].whole.data) continue;
            fails += nn_h_guarded_check(ref, ref, &b.out[i], out_names[i], out, repro);
            fails += nn_h_check_written(out_names[i], &b.out[i].view, out, repro);
        }
        fails += check_padding(c, "y", &b.out[Y].view, out, repro);
        if (b.out[DX].whole.data) fails += check_padding(c, "dx", &b.out[DX].view, out, repro);
    }
    bufs_free(ref, &b);
    return fails;
}

/* ---------------------------------------------------------------------------------------------
 * A backend against the reference
 */

static int view_exists(const nn_rnn_params *p, int64_t l, int k)
{
    switch (k) {
    case NN_RNN_WEIGHT_IH: return !(l == 0 && p->input_mode == NN_RNN_INPUT_SKIP);
    case NN_RNN_BIAS_IH:
        return p->bias_mode == NN_RNN_BIAS_INPUT || p->bias_mode == NN_RNN_BIAS_DOUBLE;
    case NN_RNN_BIAS_HH:
        return p->bias_mode == NN_RNN_BIAS_RECURRENT || p->bias_mode == NN_RNN_BIAS_DOUBLE;
    case NN_RNN_WEIGHT_HR: return p->proj_size > 0;
    }
    return 1;
}

/* Copy every view of src (a buffer laid out by sctx) into dst (laid out by dctx): weights move
 * between backends through the views only, like a PyTorch state_dict. */
static nn_status copy_views(nn_ctx *dctx, nn_tensor *dst, nn_ctx *sctx, const nn_tensor *src,
                            const nn_rnn_params *p)
{
    int D = p->bidirectional ? 2 : 1;
    for (int64_t l = 0; l < p->num_layers; l++)
        for (int d = 0; d < D; d++)
            for (int k = 0; k < 5; k++) {
                if (!view_exists(p, l, k)) continue;
                nn_tensor a, b;
                nn_status st = nn_rnn_weight_view(dctx, p, dst, l, d, (nn_rnn_weight_name)k, &a);
                if (st == NN_OK)
                    st = nn_rnn_weight_view(sctx, p, src, l, d, (nn_rnn_weight_name)k, &b);
                if (st == NN_OK)
                    st = nn_tensor_copy(dst->space == NN_SPACE_DEVICE ? dctx : sctx, &a, &b);
                if (st != NN_OK) return st;
            }
    return NN_OK;
}

#define TRYD(expr)                                                                                 \
    do {                                                                                           \
        nn_status st_ = (expr);                                                                    \
        if (st_ != NN_OK) {                                                                        \
            bufs_free2(dev, ref, d);                                                               \
            return st_;                                                                            \
        }                                                                                          \
    } while (0)

static nn_status to_dev(nn_ctx *dev, const nn_tensor *h, nn_tensor *out)
{
    nn_status st = nn_tensor_empty(dev, h->dtype, h->rank, h->dims, out);
    if (st == NN_OK) st = nn_tensor_copy(dev, out, h);
    return st;
}

/* The host case h (inputs filled) again on dev, with guarded outputs there. */
static nn_status dev_bufs(nn_ctx *dev, nn_ctx *ref, const struct nn_rnn_case *c,
                          const struct bufs *h, struct bufs *d)
{
    memset(d, 0, sizeof *d);
    d->lstm = h->lstm;
    TRYD(to_dev(dev, &h->x, &d->x));
    TRYD(to_dev(dev, &h->hx, &d->hx));
    TRYD(to_dev(dev, &h->ry, &d->ry));
    TRYD(to_dev(dev, &h->rh, &d->rh));
    if (h->lstm) {
        TRYD(to_dev(dev, &h->cx, &d->cx));
        TRYD(to_dev(dev, &h->rc, &d->rc));
    }
    int64_t nw;
    TRYD(nn_rnn_weights_size(dev, &c->p, c->dtype, &nw));
    TRYD(nn_tensor_empty(dev, c->dtype, 1, &nw, &d->w));
    TRYD(nn_tensor_fill_constant(dev, &d->w, 0));
    TRYD(copy_views(dev, &d->w, ref, &h->w, &c->p));
    for (int i = 0; i < 7; i++) {
        if (!h->out[i].whole.data) continue;
        const nn_tensor *v = &h->out[i].view;
        TRYD(nn_h_guarded_alloc(dev, ref, c->dtype, i == DW ? 1 : v->rank, i == DW ? &nw : v->dims,
                                200 + (uint64_t)i, &d->out[i]));
    }
    return NN_OK;
}

/* The tolerance scale of a case: the dtype's, but the clipped LSTM agreed only to ~1e-9 in double
 * (RNN.md trap 8). */
static double tolerance_of(const struct nn_rnn_case *c)
{
    double a = nn_h_tolerance(c->dtype, c->math);
    if (c->p.clip_enabled && a < 1e-8) a = 1e-8;
    return a;
}

static int compare_dw(nn_ctx *dev, nn_ctx *ref, const struct nn_rnn_case *c, const nn_tensor *got,
                      const nn_tensor *want, double a, int64_t terms, FILE *out, const char *repro)
{
    static const char *const names[] = {"dw.weight_ih", "dw.weight_hh", "dw.bias_ih", "dw.bias_hh",
                                        "dw.weight_hr"};
    const nn_rnn_params *p = &c->p;
    int D = p->bidirectional ? 2 : 1, fails = 0;
    for (int64_t l = 0; l < p->num_layers; l++)
        for (int d = 0; d < D; d++)
            for (int k = 0; k < 5; k++) {
                if (!view_exists(p, l, k)) continue;
                nn_tensor gv, wv, gh;
                nn_status st = nn_rnn_weight_view(dev, p, got, l, d, (nn_rnn_weight_name)k, &gv);
                if (st == NN_OK)
                    st = nn_rnn_weight_view(ref, p, want, l, d, (nn_rnn_weight_name)k, &wv);
                if (st == NN_OK) st = nn_h_to_host(dev, ref, &gv, &gh);
                if (st != NN_OK) return fails + report_status(st, names[k], out, repro);
                char name[64];
                snprintf(name, sizeof name, "%s (layer %lld, direction %d)", names[k], (long long)l,
                         d);
                fails += nn_h_compare(name, &gh, &wv, a, terms, out, repro);
                nn_tensor_free(ref, &gh);
            }
    return fails;
}

int nn_rnn_check_backend(nn_ctx *dev, nn_ctx *ref, const struct nn_rnn_case *c, FILE *out)
{
    char repro[1200], text[1024];
    nn_rnn_case_format(c, text, sizeof text);
    snprintf(repro, sizeof repro, "nnprim check rnn %s", text);
    struct nn_rnn_case cc = *c;
    cc.accumulate = 0;
    struct bufs h, d;
    nn_status st = bufs_alloc(ref, &cc, c->dtype, &h);
    if (st != NN_OK) return report_status(st, "reference allocation", out, repro);
    st = dev_bufs(dev, ref, &cc, &h, &d);
    if (st != NN_OK) {
        bufs_free(ref, &h);
        return report_status(st, "backend allocation", out, repro);
    }
    int fails = 0;
    nn_status rst = step(ref, &cc, &h, 1), dst = step(dev, &cc, &d, 1);
    if (rst != NN_OK) fails += report_status(rst, "reference run", out, repro);
    if (dst != NN_OK) fails += report_status(dst, "backend run", out, repro);
    if (rst == NN_OK && dst == NN_OK) {
        const nn_rnn_params *p = &c->p;
        int64_t D = p->bidirectional ? 2 : 1;
        int64_t terms = c->t * (p->input_size + (D + 1) * out_width(c)) * p->num_layers;
        double a = tolerance_of(c);
        for (int i = 0; i < 7; i++) {
            if (!d.out[i].whole.data) continue;
            fails += nn_h_guarded_check(dev, ref, &d.out[i], out_names[i], out, repro);
            nn_tensor g;
            if (nn_h_to_host(dev, ref, &d.out[i].view, &g) != NN_OK) {
                fails += report_status(nn_last_error()->status, out_names[i], out, repro);
                continue;
            }
            fails += nn_h_check_written(out_names[i], &g, out, repro);
            /* Dropout masks come from different generators: only the plain runs compare. */
            if (p->dropout > 0 && p->num_layers > 1) {
                nn_tensor_free(ref, &g);
                continue;
            }
            if (i == DW)
                fails += compare_dw(dev, ref, c, &d.out[i].view, &h.out[i].view, a, terms * c->n,
                                    out, repro);
            else
                fails += nn_h_compare(out_names[i], &g, &h.out[i].view, a,
                                      i == DX || i == DHX || i == DCX ? terms : terms / c->t + 1,
                                      out, repro);
            nn_tensor_free(ref, &g);
        }
    }
    bufs_free2(dev, ref, &d);
    bufs_free(ref, &h);
    return fails;
}

/* The GPU case matrix: cells x layers x directions x lengths x dtypes, then projection, clip, the
 * bias modes, skip input and the batch-major layout in f32 and f64, and a TF32 pair. */
static const char *const gpu_extra[] = {
    "lstm t5n3i4h6 l2 bidir proj3 lens5x2x0",
    "lstm t5n3i4h6 l1 uni proj2 batch",
    "lstm t6n2i3h4 l2 bidir clip-0.4:0.5 lens6x3",
    "relu t4n3i3h5 l2 bidir bias_none",
    "tanh t4n3i3h5 l1 uni bias_input lens4x1x0",
    "gru t4n3i3h5 l2 bidir bias_recurrent",
    "lstm t4n3i3h5 l2 uni bias_none batch",
    "gru t4n3i5h5 l2 bidir skip lens4x0x2",
    "lstm t4n3i5h5 l1 uni skip",
    "tanh t4n3i5h5 l2 bidir skip batch",
    "gru t5n4i3h6 l2 bidir batch lens5x0x3x1",
    "lstm t3n2i3h4 l3 bidir drop0.3:5",
    /* equal lengths shorter than t, and hidden sizes at the persistent small-h bounds */
    "lstm t5n3i4h6 l2 uni lens3x3x3",
    "gru t4n3i3h5 l1 bidir batch lens2x2x2",
    "lstm t3n4i8h128 l1 uni",
    "relu t3n2i5h256 l1 bidir",
};

size_t nn_rnn_gpu_case_count(void)
{
    return 4 * 2 * 2 * 2 * 4 + 2 * sizeof gpu_extra / sizeof gpu_extra[0] + 2;
}

int nn_rnn_gpu_case(size_t i, struct nn_rnn_case *c)
{
    static const char *const cellv[] = {"relu", "tanh", "lstm", "gru"};
    static const char *const dtv[] = {"f32", "f64", "f16", "bf16"};
    size_t nx = sizeof gpu_extra / sizeof gpu_extra[0];
    char line[256], err[256];
    if (i < 128) {
        size_t dt = i % 4, lens = i / 4 % 2, dir = i / 8 % 2, l = i / 16 % 2, cell = i / 32;
        snprintf(line, sizeof line, "%s t5n4i3h6 l%zu %s %s %s", cellv[cell], l + 1,
                 dir ? "bidir" : "uni", lens ? "lens5x0x2x4" : "", dtv[dt]);
    } else if (i < 128 + 2 * nx) {
        snprintf(line, sizeof line, "%s %s", gpu_extra[(i - 128) % nx],
                 i - 128 < nx ? "f32" : "f64");
    } else if (i < nn_rnn_gpu_case_count()) {
        snprintf(line, sizeof line, "%s t8n4i16h32 l2 bidir lens8x3x0x5 f32 tf32",
                 i % 2 ? "lstm" : "gru");
    } else {
        return -1;
    }
    return nn_rnn_case_parse_line(line, c, err, sizeof err) == 1 ? 0 : -1;
}

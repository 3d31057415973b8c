#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "layernorm_case.h"

/* ---------------------------------------------------------------------------------------------
 * Text form
 */

/* "d<d0>{x<d>}" */
static int parse_dims(const char *tok, struct nn_layernorm_case *c, char *err, size_t cap)
{
    const char *s = tok;
    int bad = *s++ != 'd';
    c->rank = 0;
    while (!bad) {
        if (c->rank == NN_MAX_RANK || nn_h_number(&s, &c->dims[c->rank])) {
            bad = 1;
            break;
        }
        c->rank++;
        if (*s != 'x') break;
        s++;
    }
    if (bad || *s)
        return nn_h_fail(err, cap,
                         "dims token '%s': expected d<d0>{x<d>} (x's dims, at most %d, each >= 1), "
                         "e.g. d8x16 or d2x3x4",
                         tok, NN_MAX_RANK);
    return 0;
}

static int parse_token(const char *t, struct nn_layernorm_case *c, char *err, size_t cap)
{
    unsigned skip;
    int g = nn_h_grads_token(t, &skip, err, cap);
    if (g < 0) return -1;
    if (g) {
        c->skip = skip;
        return 0;
    }
    if (nn_h_dtype_token(t, &c->dtype)) return 0;
    if (t[0] == 'k' && t[1] >= '0' && t[1] <= '9') {
        const char *s = t + 1;
        int64_t k;
        if (nn_h_number(&s, &k) || *s || k > NN_MAX_RANK)
            return nn_h_fail(err, cap, "token '%s': k takes the normalized rank, 1 to %d", t,
                             NN_MAX_RANK);
        c->p.normalized_rank = (int)k;
    } else if (!strncmp(t, "eps", 3)) {
        char *end;
        double e = strtod(t + 3, &end);
        if (end == t + 3 || *end || !(e >= 0) || !isfinite(e))
            return nn_h_fail(err, cap, "token '%s': eps takes a finite number >= 0, e.g. eps1e-05",
                             t);
        c->p.eps = e;
    } else if (!strcmp(t, "gamma"))
        c->gamma = 1;
    else if (!strcmp(t, "beta"))
        c->beta = 1;
    else if (!strcmp(t, "accdx"))
        c->accumulate |= NN_ACCUMULATE_DX;
    else if (!strcmp(t, "accdw"))
        c->accumulate |= NN_ACCUMULATE_DW;
    else if (!strcmp(t, "accdb"))
        c->accumulate |= NN_ACCUMULATE_DB;
    else if (!strcmp(t, "keep"))
        c->keep = 1;
    else
        return nn_h_fail(err, cap, "unknown token '%s' (see docs/LAYERNORM.md for the syntax)", t);
    return 0;
}

int nn_layernorm_case_parse(int ntok, char **tok, struct nn_layernorm_case *c, char *err,
                            size_t cap)
{
    memset(c, 0, sizeof *c);
    nn_layernorm_params_default(&c->p);
    c->dtype = NN_DTYPE_F32;
    if (ntok < 1) return nn_h_fail(err, cap, "%s", "no case given (expected e.g. d8x16 k1 gamma)");
    if (parse_dims(tok[0], c, err, cap)) return -1;
    for (int i = 1; i < ntok; i++)
        if (parse_token(tok[i], c, err, cap)) return -1;
    if (c->p.normalized_rank > c->rank)
        return nn_h_fail(err, cap, "k%d: the normalized rank is at most x's rank, %d",
                         c->p.normalized_rank, c->rank);
    /* a gradient forward cannot make is never asked: the text has no place for it */
    if (!c->gamma) c->skip &= ~(unsigned)NN_H_SKIP_DW;
    if (!c->beta) c->skip &= ~(unsigned)NN_H_SKIP_DB;
    return 0;
}

int nn_layernorm_case_parse_line(const char *line, struct nn_layernorm_case *c, char *err,
                                 size_t cap)
{
    char buf[512], *tok[32];
    int n = nn_h_case_tokens(line, buf, sizeof buf, tok, 32, err, cap);
    if (n <= 0) return n;
    return nn_layernorm_case_parse(n, tok, c, err, cap) == 0 ? 1 : -1;
}

void nn_layernorm_case_format(const struct nn_layernorm_case *c, char *buf, size_t cap)
{
    size_t n = 0;
    buf[0] = 0;
#define PUT(...)                                                                                   \
    do {                                                                                           \
        if (n < cap) n += (size_t)snprintf(buf + n, cap - n, __VA_ARGS__);                         \
    } while (0)
    for (int i = 0; i < c->rank; i++)
        PUT(i ? "x%lld" : "d%lld", (long long)c->dims[i]);
    PUT(" k%d", c->p.normalized_rank);
    if (c->gamma) PUT(" gamma");
    if (c->beta) PUT(" beta");
    if (c->p.eps != 1e-5) {
        char e[40];
        snprintf(e, sizeof e, "%.15g", c->p.eps);
        if (strtod(e, NULL) != c->p.eps) snprintf(e, sizeof e, "%.17g", c->p.eps);
        PUT(" eps%s", e);
    }
    if (c->accumulate & NN_ACCUMULATE_DX) PUT(" accdx");
    if (c->accumulate & NN_ACCUMULATE_DW) PUT(" accdw");
    if (c->accumulate & NN_ACCUMULATE_DB) PUT(" accdb");
    PUT(" %s", nn_dtype_name(c->dtype));
    if (c->skip) {
        /* the gradients asked for, among those forward makes possible */
        int dx = !(c->skip & NN_H_SKIP_DX), dw = c->gamma && !(c->skip & NN_H_SKIP_DW),
            db = c->beta && !(c->skip & NN_H_SKIP_DB);
        if (!dx && !dw && !db)
            PUT(" grads=none");
        else {
            const char *sep = " grads=";
            if (dx) {
                PUT("%sdx", sep);
                sep = "+";
            }
            if (dw) {
                PUT("%sdw", sep);
                sep = "+";
            }
            if (db) PUT("%sdb", sep);
        }
    }
    if (c->keep) PUT(" keep");
#undef PUT
}

/* ---------------------------------------------------------------------------------------------
 * Standard cases
 */

static const char *const geometries[] = {"d3x5 k1", "d2x3x4 k2",  "d4x1 k1",
                                         "d6 k1",   "d2x3x16 k1", "d5x300 k1"};
static const char *const variants[] = {"gamma beta",
                                       "",
                                       "gamma",
                                       "gamma beta accdx accdw accdb",
                                       "gamma beta grads=dx",
                                       "gamma beta eps0.1 accdw grads=dw+db keep"};
static const char *const dtype_names[] = {"f32", "f16", "bf16", "f64"};

#define N_GEOM (sizeof geometries / sizeof geometries[0])
#define N_VARS (sizeof variants / sizeof variants[0])
#define N_DT   (sizeof dtype_names / sizeof dtype_names[0])

size_t nn_layernorm_standard_case_count(void)
{
    return N_GEOM * N_VARS * N_DT;
}

int nn_layernorm_standard_case(size_t i, struct nn_layernorm_case *c)
{
    if (i >= nn_layernorm_standard_case_count()) return -1;
    char line[200], err[160];
    snprintf(line, sizeof line, "%s %s %s", geometries[i / (N_VARS * N_DT)],
             variants[i / N_DT % N_VARS], dtype_names[i % N_DT]);
    return nn_layernorm_case_parse_line(line, c, err, sizeof err) == 1 ? 0 : -1;
}

/* ---------------------------------------------------------------------------------------------
 * Runs
 */

enum { G_DX, G_DGAMMA, G_DBETA };
static const char *const grad_names[] = {"dx", "dgamma", "dbeta"};

struct io {
    nn_tensor x, gamma, beta, dy; /* gamma, beta: data NULL when the case has none */
    struct nn_h_guarded y, g[3];  /* y, and dx, dgamma, dbeta (when asked) */
};

static int asked(const struct nn_layernorm_case *c, int g)
{
    if (g == G_DGAMMA && !c->gamma) return 0;
    if (g == G_DBETA && !c->beta) return 0;
    return !(c->skip & (1u << g));
}

static unsigned acc_bit(int g)
{
    return g == G_DX ? NN_ACCUMULATE_DX : g == G_DGAMMA ? NN_ACCUMULATE_DW : NN_ACCUMULATE_DB;
}

static int grad_dims(const struct nn_layernorm_case *c, int g, int64_t *d)
{
    int r = g == G_DX ? c->rank : c->p.normalized_rank;
    memcpy(d, c->dims + (c->rank - r), (size_t)r * sizeof *d);
    return r;
}

static void io_free(nn_ctx *ctx, nn_ctx *host, struct io *io)
{
    nn_tensor *t[] = {&io->x, &io->gamma, &io->beta, &io->dy};
    for (int i = 0; i < 4; i++)
        if (t[i]->data) nn_tensor_free(ctx, t[i]);
    nn_h_guarded_free(ctx, host, &io->y);
    for (int i = 0; i < 3; i++)
        nn_h_guarded_free(ctx, host, &io->g[i]);
}

/* x and dy uniform in [-2, 2) and [-1, 1), gamma in [0.5, 1.5), beta in [-1, 1); outputs
 * guarded, accumulated gradients started at integers. */
static nn_status setup(nn_ctx *ctx, nn_ctx *host, const struct nn_layernorm_case *c, nn_dtype dt,
                       struct io *io)
{
    memset(io, 0, sizeof *io);
    int k = c->p.normalized_rank;
    const int64_t *nd = c->dims + (c->rank - k);
    nn_status st = nn_tensor_empty(ctx, dt, c->rank, c->dims, &io->x);
    if (st == NN_OK) st = nn_tensor_fill_uniform(ctx, &io->x, -2, 2, 71);
    if (st == NN_OK) st = nn_tensor_empty(ctx, dt, c->rank, c->dims, &io->dy);
    if (st == NN_OK) st = nn_tensor_fill_uniform(ctx, &io->dy, -1, 1, 72);
    if (st == NN_OK && c->gamma) st = nn_tensor_empty(ctx, dt, k, nd, &io->gamma);
    if (st == NN_OK && c->gamma) st = nn_tensor_fill_uniform(ctx, &io->gamma, 0.5, 1.5, 73);
    if (st == NN_OK && c->beta) st = nn_tensor_empty(ctx, dt, k, nd, &io->beta);
    if (st == NN_OK && c->beta) st = nn_tensor_fill_uniform(ctx, &io->beta, -1, 1, 74);
    if (st == NN_OK) st = nn_h_guarded_alloc(ctx, host, dt, c->rank, c->dims, 75, &io->y);
    for (int g = 0; g < 3 && st == NN_OK; g++) {
        if (!asked(c, g)) continue;
        int64_t d[NN_MAX_RANK];
        int r = grad_dims(c, g, d);
        st = nn_h_guarded_alloc(ctx, host, dt, r, d, 76 + (uint64_t)g, &io->g[g]);
        if (st == NN_OK && (c->accumulate & acc_bit(g)))
            st = nn_tensor_fill_ints(ctx, &io->g[g].view, -2, 2, 80 + (uint64_t)g);
    }
    return st;
}

static const nn_tensor *opt(const nn_tensor *t)
{
    return t->data ? t : NULL;
}

static nn_tensor *grad(struct io *io, int g)
{
    return io->g[g].view.data ? &io->g[g].view : NULL;
}

static nn_status forward(nn_ctx *ctx, const struct nn_layernorm_case *c, struct io *io,
                         nn_layernorm_pullback **pb)
{
    return nn_layernorm_forward(ctx, &c->p, &io->x, opt(&io->gamma), opt(&io->beta), &io->y.view,
                                pb);
}

static nn_status run(nn_ctx *ctx, const struct nn_layernorm_case *c, struct io *io)
{
    nn_layernorm_pullback *pb = NULL;
    nn_status st = forward(ctx, c, io, &pb);
    nn_backward_options o = {.accumulate = c->accumulate, .keep = c->keep};
    if (st == NN_OK)
        st = o.accumulate || o.keep
                 ? nn_layernorm_backward_ex(ctx, &pb, &o, &io->dy, grad(io, G_DX),
                                            grad(io, G_DGAMMA), grad(io, G_DBETA))
                 : nn_layernorm_backward(ctx, &pb, &io->dy, grad(io, G_DX), grad(io, G_DGAMMA),
                                         grad(io, G_DBETA));
    nn_layernorm_pullback_free(&pb);
    return st;
}

static int report_status(nn_status st, const char *what, FILE *out, const char *repro)
{
    fprintf(out, "FAIL %s: %s: %s | repro: %s\n", what, nn_status_name(st),
            nn_last_error()->message, repro);
    return 1;
}

static void repro_of(const struct nn_layernorm_case *c, char *buf, size_t cap)
{
    char text[256];
    nn_layernorm_case_format(c, text, sizeof text);
    snprintf(buf, cap, "nnprim check layernorm %s", text);
}

/* ---------------------------------------------------------------------------------------------
 * Finite differences (f64, reference)
 */

static double loss(nn_ctx *ref, const struct nn_layernorm_case *c, struct io *io)
{
    if (forward(ref, c, io, NULL) != NN_OK) return NAN;
    double s = 0;
    int64_t n = nn_tensor_numel(&io->y.view);
    for (int64_t i = 0; i < n; i++)
        s += ((double *)io->y.view.data)[i] * ((const double *)io->dy.data)[i];
    return s;
}

/* The input each gradient is of. */
static nn_tensor *input_of(struct io *io, int g)
{
    return g == G_DX ? &io->x : g == G_DGAMMA ? &io->gamma : &io->beta;
}

static int check_fd(nn_ctx *ref, const struct nn_layernorm_case *c, FILE *out, const char *repro)
{
    struct nn_layernorm_case d = *c;
    d.dtype = NN_DTYPE_F64;
    struct io io;
    nn_tensor start[3] = {{0}};
    nn_status st = setup(ref, ref, &d, NN_DTYPE_F64, &io);
    for (int g = 0; g < 3 && st == NN_OK; g++)
        if (asked(&d, g) && (d.accumulate & acc_bit(g)))
            st = nn_h_to_host(ref, ref, &io.g[g].view, &start[g]);
    if (st == NN_OK) st = run(ref, &d, &io);
    int fails = 0;
    if (st != NN_OK) fails = report_status(st, "reference f64 run", out, repro);
    for (int g = 0; g < 3 && st == NN_OK; g++) {
        if (!asked(&d, g)) continue;
        const double eps = 1e-5;
        nn_tensor *in = input_of(&io, g);
        int64_t n = nn_tensor_numel(in), step = n > 32 ? n / 32 : 1;
        double *v = in->data;
        const double *an = io.g[g].view.data;
        for (int64_t i = 0; i < n; i += step) {
            double keep = v[i];
            v[i] = keep + eps;
            double up = loss(ref, &d, &io);
            v[i] = keep - eps;
            double down = loss(ref, &d, &io);
            v[i] = keep;
            double fd =
                (up - down) / (2 * eps) + (start[g].data ? ((double *)start[g].data)[i] : 0);
            if (!(fabs(fd - an[i]) <= 1e-6 * (1 + fabs(an[i])))) {
                fprintf(out,
                        "FAIL %s vs finite differences (f64): element %lld: analytic %.12g, "
                        "numeric %.12g | repro: %s\n",
                        grad_names[g], (long long)i, an[i], fd, repro);
                fails++;
                break;
            }
        }
    }
    for (int g = 0; g < 3; g++)
        if (start[g].data) nn_tensor_free(ref, &start[g]);
    io_free(ref, ref, &io);
    return fails;
}

/* ---------------------------------------------------------------------------------------------
 * Guards, written outputs, a backend against the reference
 */

/* The outputs of a run: y and the gradients asked for. */
static int outputs(const struct nn_layernorm_case *c, struct io *io, struct nn_h_guarded **g,
                   const char **names)
{
    int n = 0;
    g[n] = &io->y;
    names[n++] = "y";
    for (int i = 0; i < 3; i++)
        if (asked(c, i)) {
            g[n] = &io->g[i];
            names[n++] = grad_names[i];
        }
    return n;
}

static int check_outputs(nn_ctx *ctx, nn_ctx *host, const struct nn_layernorm_case *c,
                         struct io *io, const char *who, FILE *out, const char *repro)
{
    struct nn_h_guarded *outs[4];
    const char *names[4];
    int n = outputs(c, io, outs, names), fails = 0;
    for (int i = 0; i < n; i++) {
        char name[64];
        snprintf(name, sizeof name, "%s %s", who, names[i]);
        fails += nn_h_guarded_check(ctx, host, outs[i], name, out, repro);
        nn_tensor h;
        if (nn_h_to_host(ctx, host, &outs[i]->view, &h) != NN_OK) {
            fails += report_status(nn_last_error()->status, name, out, repro);
            continue;
        }
        fails += nn_h_check_written(name, &h, out, repro);
        nn_tensor_free(host, &h);
    }
    return fails;
}

int nn_layernorm_check_reference(nn_ctx *ref, const struct nn_layernorm_case *c, FILE *out)
{
    char repro[320];
    repro_of(c, repro, sizeof repro);
    int fails = check_fd(ref, c, out, repro);
    struct io io;
    nn_status st = setup(ref, ref, c, c->dtype, &io);
    if (st == NN_OK) st = run(ref, c, &io);
    if (st != NN_OK)
        fails += report_status(st, "reference run", out, repro);
    else
        fails += check_outputs(ref, ref, c, &io, "reference", out, repro);
    io_free(ref, ref, &io);
    return fails;
}

int nn_layernorm_check_backend(nn_ctx *dev, nn_ctx *ref, const struct nn_layernorm_case *c,
                               FILE *out)
{
    char repro[320];
    repro_of(c, repro, sizeof repro);
    struct io want, got;
    int fails = 0;
    nn_status st = setup(ref, ref, c, c->dtype, &want);
    if (st == NN_OK) st = run(ref, c, &want);
    if (st != NN_OK) fails += report_status(st, "reference run", out, repro);
    nn_status dst = setup(dev, ref, c, c->dtype, &got);
    if (dst == NN_OK) dst = run(dev, c, &got);
    if (dst != NN_OK) fails += report_status(dst, "backend run", out, repro);
    if (st == NN_OK && dst == NN_OK) {
        fails += check_outputs(dev, ref, c, &got, "backend", out, repro);
        struct nn_h_guarded *g[4], *w[4];
        const char *names[4];
        int n = outputs(c, &got, g, names);
        outputs(c, &want, w, names);
        /* Both backends sum in double from the same inputs, in other orders: the results differ
         * by the dtype's rounding of the output; the sums over rows (dgamma, dbeta) have m
         * terms, the others a row's d. */
        double a = nn_h_tolerance(c->dtype, NN_MATH_STRICT_FP32);
        int64_t d = 1, m = 1;
        for (int i = 0; i < c->rank; i++)
            *(i < c->rank - c->p.normalized_rank ? &m : &d) *= c->dims[i];
        for (int i = 0; i < n; i++) {
            nn_tensor h;
            if (nn_h_to_host(dev, ref, &g[i]->view, &h) != NN_OK) {
                fails += report_status(nn_last_error()->status, names[i], out, repro);
                continue;
            }
            int64_t terms = strcmp(names[i], "dgamma") && strcmp(names[i], "dbeta") ? d : m;
            fails += nn_h_compare(names[i], &h, &w[i]->view, a, terms, out, repro);
            nn_tensor_free(ref, &h);
        }
    }
    io_free(ref, ref, &want);
    io_free(dev, ref, &got);
    return fails;
}

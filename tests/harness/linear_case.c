#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "linear_case.h"

/* ---------------------------------------------------------------------------------------------
 * Text form
 */

/* "[m<d>{x<d>}]in<d>out<d>" */
static int parse_dims(const char *tok, struct nn_linear_case *c, char *err, size_t cap)
{
    const char *s = tok;
    c->x_rank = 1;
    if (*s == 'm') {
        s++;
        for (;;) {
            if (c->x_rank == NN_MAX_RANK || nn_h_number(&s, &c->lead[c->x_rank - 1]))
                return nn_h_fail(err, cap,
                                 "dims token '%s': m needs sizes >= 1 joined by x (at most %d)",
                                 tok, NN_MAX_RANK - 1);
            c->x_rank++;
            if (*s != 'x') break;
            s++;
        }
    }
    if (strncmp(s, "in", 2) || (s += 2, nn_h_number(&s, &c->in)) || strncmp(s, "out", 3) ||
        (s += 3, nn_h_number(&s, &c->out)) || *s)
        return nn_h_fail(
            err, cap, "dims token '%s': expected [m<d>{x<d>}]in<d>out<d>, e.g. m64in512out10", tok);
    return 0;
}

static int parse_token(const char *t, struct nn_linear_case *c, char *err, size_t cap)
{
    if (nn_h_dtype_token(t, &c->dtype)) return 0;
    if (!strcmp(t, "relu"))
        c->p.activation = NN_ACTIVATION_RELU;
    else if (!strcmp(t, "bias"))
        c->bias = 1;
    else if (!strcmp(t, "accdx"))
        c->accumulate |= NN_ACCUMULATE_DX;
    else if (!strcmp(t, "keep"))
        c->keep = 1;
    else if (!strncmp(t, "grads=", 6))
        return nn_h_grads_token(t, &c->skip, err, cap) < 0 ? -1 : 0;
    else if (!strcmp(t, "accdw"))
        c->accumulate |= NN_ACCUMULATE_DW;
    else if (!strcmp(t, "accdb"))
        c->accumulate |= NN_ACCUMULATE_DB;
    else if (!strcmp(t, "tf32"))
        c->math = NN_MATH_TF32;
    else
        return nn_h_fail(err, cap, "unknown token '%s' (see docs/LINEAR.md for the syntax)", t);
    return 0;
}

int nn_linear_case_parse(int ntok, char **tok, struct nn_linear_case *c, char *err, size_t cap)
{
    memset(c, 0, sizeof *c);
    nn_linear_params_default(&c->p);
    c->dtype = NN_DTYPE_F32;
    c->math = NN_MATH_STRICT_FP32;
    if (ntok < 1)
        return nn_h_fail(err, cap, "%s", "no case given (expected e.g. m64in512out10 bias)");
    if (parse_dims(tok[0], c, err, cap)) return -1;
    for (int i = 1; i < ntok; i++)
        if (parse_token(tok[i], c, err, cap)) return -1;
    if (c->math == NN_MATH_TF32 && c->dtype != NN_DTYPE_F32)
        return nn_h_fail(err, cap, "%s", "tf32 applies to f32 cases only");
    return 0;
}

int nn_linear_case_parse_line(const char *line, struct nn_linear_case *c, char *err, size_t cap)
{
    char buf[512], *tok[32];
    int n = nn_h_case_tokens(line, buf, sizeof buf, tok, 32, err, cap);
    if (n <= 0) return n;
    return nn_linear_case_parse(n, tok, c, err, cap) == 0 ? 1 : -1;
}

void nn_linear_case_format(const struct nn_linear_case *c, char *buf, size_t cap)
{
    size_t n = 0;
    buf[0] = 0;
#define PUT(...)                                                                                   \
    do {                                                                                           \
        if (n < cap) n += (size_t)snprintf(buf + n, cap - n, __VA_ARGS__);                         \
    } while (0)
    for (int i = 0; i + 1 < c->x_rank; i++)
        PUT(i ? "x%lld" : "m%lld", (long long)c->lead[i]);
    PUT("in%lldout%lld", (long long)c->in, (long long)c->out);
    if (c->p.activation == NN_ACTIVATION_RELU) PUT(" relu");
    if (c->bias) PUT(" bias");
    if (c->accumulate & NN_ACCUMULATE_DX) PUT(" accdx");
    if (c->accumulate & NN_ACCUMULATE_DW) PUT(" accdw");
    if (c->accumulate & NN_ACCUMULATE_DB) PUT(" accdb");
    PUT(" %s", nn_dtype_name(c->dtype));
    if (c->math == NN_MATH_TF32) PUT(" tf32");
    n = nn_h_put_grads(buf, cap, n, c->skip);
    if (c->keep) PUT(" keep");
#undef PUT
}

/* ---------------------------------------------------------------------------------------------
 * Standard cases
 */

static const char *const geometries[] = {
    "m1in1out1",   /* the smallest */
    "in9out4",     /* rank-1 x */
    "m5in7out3",   /* odd sizes */
    "m2x3in6out5", /* [..., in] */
    "m33in17out9", /* not a multiple of any tile */
    "m16in32out24",
};

/* "bias" may take BGRADB's fused db; "bias accdb" and "relu bias accdb" always compute db as a
 * product with ones, accumulated (cuDNN's legacy bias gradient has no bf16). */
static const char *const variants[] = {
    "",           "bias",       "relu",           "relu bias", "bias accdx accdw accdb",
    "relu accdw", "bias accdb", "relu bias accdb"};
static const char *const dtype_names[] = {"f32", "f32 tf32", "f16", "bf16", "f64"};

#define N_GEOM (sizeof geometries / sizeof geometries[0])
#define N_VARS (sizeof variants / sizeof variants[0])
#define N_DT   (sizeof dtype_names / sizeof dtype_names[0])

size_t nn_linear_standard_case_count(void)
{
    return N_GEOM * N_VARS * N_DT;
}

int nn_linear_standard_case(size_t i, struct nn_linear_case *c)
{
    if (i >= nn_linear_standard_case_count()) return -1;
    char line[160], err[128];
    snprintf(line, sizeof line, "%s %s %s", geometries[i / (N_VARS * N_DT)],
             variants[i / N_DT % N_VARS], dtype_names[i % N_DT]);
    return nn_linear_case_parse_line(line, c, err, sizeof err) == 1 ? 0 : -1;
}

/* ---------------------------------------------------------------------------------------------
 * Runs
 */

enum { T_X, T_W, T_B, T_DY, N_IN };
enum { T_Y, T_DX, T_DW, T_DB, N_OUT };
static const char *const out_names[N_OUT] = {"y", "dx", "dw", "db"};

struct io {
    nn_tensor in[N_IN]; /* on the run's context; in[T_B] only with bias */
    struct nn_h_guarded out[N_OUT];
};

struct dims {
    int rank[N_OUT + N_IN];
    int64_t d[N_OUT + N_IN][NN_MAX_RANK];
};

/* Dims of x, w, b, dy (inputs, by T_*) and of y, dx, dw, db (outputs, N_IN + T_*). */
static void dims_of(const struct nn_linear_case *c, struct dims *s)
{
    int r = c->x_rank;
    memset(s, 0, sizeof *s);
    for (int k = 0; k < 2; k++) {
        int xi = k ? N_IN + T_DX : T_X, yi = k ? N_IN + T_Y : T_DY;
        s->rank[xi] = s->rank[yi] = r;
        memcpy(s->d[xi], c->lead, sizeof c->lead);
        memcpy(s->d[yi], c->lead, sizeof c->lead);
        s->d[xi][r - 1] = c->in;
        s->d[yi][r - 1] = c->out;
    }
    for (int k = 0; k < 2; k++) {
        int wi = k ? N_IN + T_DW : T_W, bi = k ? N_IN + T_DB : T_B;
        s->rank[wi] = 2;
        s->d[wi][0] = c->out;
        s->d[wi][1] = c->in;
        s->rank[bi] = 1;
        s->d[bi][0] = c->out;
    }
}

static void io_free(nn_ctx *ctx, nn_ctx *host, struct io *io)
{
    for (int i = 0; i < N_IN; i++)
        if (io->in[i].data) nn_tensor_free(ctx, &io->in[i]);
    for (int i = 0; i < N_OUT; i++)
        nn_h_guarded_free(ctx, host, &io->out[i]);
}

/* Inputs filled (uniform in [-1, 1) for the finite differences, else integers in [-2, 2]),
 * outputs guarded, and the accumulated ones given integer starting values. */
static nn_status setup(nn_ctx *ctx, nn_ctx *host, const struct nn_linear_case *c, nn_dtype dt,
                       int uniform, struct io *io)
{
    memset(io, 0, sizeof *io);
    struct dims s;
    dims_of(c, &s);
    nn_status st = NN_OK;
    for (int i = 0; i < N_IN && st == NN_OK; i++) {
        if (i == T_B && !c->bias) continue;
        st = nn_tensor_empty(ctx, dt, s.rank[i], s.d[i], &io->in[i]);
        if (st == NN_OK)
            st = uniform ? nn_tensor_fill_uniform(ctx, &io->in[i], -1, 1, 31 + (uint64_t)i)
                         : nn_tensor_fill_ints(ctx, &io->in[i], -2, 2, 31 + (uint64_t)i);
    }
    static const unsigned acc_bit[N_OUT] = {0, NN_ACCUMULATE_DX, NN_ACCUMULATE_DW,
                                            NN_ACCUMULATE_DB};
    for (int i = 0; i < N_OUT && st == NN_OK; i++) {
        st = nn_h_guarded_alloc(ctx, host, dt, s.rank[N_IN + i], s.d[N_IN + i], 41 + (uint64_t)i,
                                &io->out[i]);
        /* a gradient not asked for stays NaN: the backward must leave it alone */
        if (st == NN_OK && (c->accumulate & acc_bit[i]) && !(c->skip & (1u << (i - 1))))
            st = nn_tensor_fill_ints(ctx, &io->out[i].view, -2, 2, 51 + (uint64_t)i);
    }
    return st;
}

static nn_status run(nn_ctx *ctx, const struct nn_linear_case *c, struct io *io)
{
    nn_linear_pullback *pb = NULL;
    /* the case's accumulation, and "keep": the pullback kept (and freed below) */
    nn_backward_options opts = {.accumulate = c->accumulate, .keep = c->keep};
    nn_status st = nn_linear_forward(ctx, &c->p, &io->in[T_X], &io->in[T_W],
                                     c->bias ? &io->in[T_B] : NULL, &io->out[T_Y].view, &pb);
    nn_tensor *g[N_OUT];
    for (int i = T_DX; i < N_OUT; i++)
        g[i] = c->skip & (1u << (i - 1)) ? NULL : &io->out[i].view;
    if (st == NN_OK)
        st = opts.accumulate || opts.keep
                 ? nn_linear_backward_ex(ctx, &pb, &opts, &io->in[T_DY], g[T_DX], g[T_DW], g[T_DB])
                 : nn_linear_backward(ctx, &pb, &io->in[T_DY], g[T_DX], g[T_DW], g[T_DB]);
    nn_linear_pullback_free(&pb);
    return st;
}

static int report_status(nn_status st, const char *what, FILE *out, const char *repro)
{
    fprintf(out, "FAIL %s: %s: %s | repro: %s\n", what, nn_status_name(st),
            nn_last_error()->message, repro);
    return 1;
}

static void repro_of(const struct nn_linear_case *c, char *buf, size_t cap)
{
    char text[256];
    nn_linear_case_format(c, text, sizeof text);
    snprintf(buf, cap, "nnprim check linear %s", text);
}

/* ---------------------------------------------------------------------------------------------
 * Finite differences (f64, reference)
 */

/* The product without its activation into z, for nn_h_fd. */
struct fd_arg {
    nn_ctx *ref;
    nn_linear_params p;
    struct io *io;
    int bias;
    nn_tensor z;
};

static int fd_forward(void *arg)
{
    struct fd_arg *a = arg;
    nn_tensor *in = a->io->in;
    return nn_linear_forward(a->ref, &a->p, &in[T_X], &in[T_W], a->bias ? &in[T_B] : NULL, &a->z,
                             NULL) == NN_OK
               ? 0
               : -1;
}

/* The f64 gradients against finite differences (nn_h_fd: the relu pattern held, so a large batch
 * or a step across a kink is no false failure); an accumulated gradient less its start. */
static int check_fd(nn_ctx *ref, const struct nn_linear_case *c, FILE *out, const char *repro)
{
    struct nn_linear_case d = *c;
    d.dtype = NN_DTYPE_F64;
    d.math = NN_MATH_STRICT_FP32;
    struct io io;
    nn_tensor start[N_OUT];
    memset(start, 0, sizeof start);
    struct fd_arg arg = {ref, d.p, &io, d.bias, {0}};
    arg.p.activation = NN_ACTIVATION_IDENTITY;
    nn_status st = setup(ref, ref, &d, NN_DTYPE_F64, 1, &io);
    /* The starting values of accumulated outputs, to take off the analytic gradient. */
    static const unsigned acc_bit[N_OUT] = {0, NN_ACCUMULATE_DX, NN_ACCUMULATE_DW,
                                            NN_ACCUMULATE_DB};
    for (int i = 1; i < N_OUT && st == NN_OK; i++)
        if (d.accumulate & acc_bit[i]) st = nn_h_to_host(ref, ref, &io.out[i].view, &start[i]);
    if (st == NN_OK) st = run(ref, &d, &io);
    const nn_tensor *y = &io.out[T_Y].view;
    if (st == NN_OK) st = nn_tensor_empty(ref, NN_DTYPE_F64, y->rank, y->dims, &arg.z);
    int fails = 0;
    nn_tensor *inputs[] = {&io.in[T_X], &io.in[T_W], &io.in[T_B]};
    struct nn_h_fd fd = {fd_forward,
                         &arg,
                         &arg.z,
                         &io.in[T_DY],
                         inputs,
                         d.bias ? 3 : 2,
                         d.p.activation == NN_ACTIVATION_RELU,
                         d.in + 1,
                         NULL,
                         0};
    if (st != NN_OK) {
        fails = report_status(st, "reference f64 run", out, repro);
    } else if (nn_h_fd_begin(&fd)) {
        fails = report_status(nn_last_error()->status, "reference f64 forward", out, repro);
    } else {
        static const int grads[] = {T_DX, T_DW, T_DB};
        fails += nn_h_fd_check_activation(&fd, y, out, repro);
        for (int k = 0; k < (d.bias ? 3 : 2); k++) {
            int g = grads[k];
            if (d.skip & (1u << (g - 1))) continue;
            fails += nn_h_fd_check(&fd, inputs[k], &io.out[g].view,
                                   start[g].data ? &start[g] : NULL, 24, out_names[g], out, repro);
        }
    }
    nn_h_fd_end(&fd);
    if (arg.z.data) nn_tensor_free(ref, &arg.z);
    for (int i = 0; i < N_OUT; i++)
        if (start[i].data) nn_tensor_free(ref, &start[i]);
    io_free(ref, ref, &io);
    return fails;
}

/* ---------------------------------------------------------------------------------------------
 * Guards, written outputs, a backend against the reference
 */

/* skip: the NN_H_SKIP_* gradients the backward was not asked for, which must stay NaN. */
static int check_outputs(nn_ctx *ctx, nn_ctx *host, struct io *io, unsigned skip, const char *who,
                         FILE *out, const char *repro)
{
    int fails = 0;
    for (int i = 0; i < N_OUT; i++) {
        char name[64];
        snprintf(name, sizeof name, "%s %s", who, out_names[i]);
        fails += nn_h_guarded_check(ctx, host, &io->out[i], name, out, repro);
        nn_tensor h;
        if (nn_h_to_host(ctx, host, &io->out[i].view, &h) != NN_OK) {
            fails += report_status(nn_last_error()->status, name, out, repro);
            continue;
        }
        fails += i && (skip & (1u << (i - 1))) ? nn_h_check_untouched(name, &h, out, repro)
                                               : nn_h_check_written(name, &h, out, repro);
        nn_tensor_free(host, &h);
    }
    return fails;
}

int nn_linear_check_reference(nn_ctx *ref, const struct nn_linear_case *c, FILE *out)
{
    char repro[320];
    repro_of(c, repro, sizeof repro);
    int fails = check_fd(ref, c, out, repro);
    struct io io;
    nn_status st = setup(ref, ref, c, c->dtype, 0, &io);
    if (st == NN_OK) st = run(ref, c, &io);
    if (st != NN_OK)
        fails += report_status(st, "reference run", out, repro);
    else
        fails += check_outputs(ref, ref, &io, c->skip, "reference", out, repro);
    io_free(ref, ref, &io);
    return fails;
}

int nn_linear_check_backend(nn_ctx *dev, nn_ctx *ref, const struct nn_linear_case *c, FILE *out)
{
    char repro[320];
    repro_of(c, repro, sizeof repro);
    int64_t m = 1;
    for (int i = 0; i + 1 < c->x_rank; i++)
        m *= c->lead[i];
    /* Products summed into each output, plus one for a bias or a starting value. */
    int64_t terms[N_OUT] = {c->in + 1, c->out + 1, m + 1, m + 1};
    struct io want, got;
    int fails = 0;
    nn_status st = setup(ref, ref, c, c->dtype, 0, &want);
    if (st == NN_OK) st = run(ref, c, &want);
    if (st != NN_OK) fails += report_status(st, "reference run", out, repro);
    nn_status dst = setup(dev, ref, c, c->dtype, 0, &got);
    if (dst == NN_OK) dst = run(dev, c, &got);
    if (dst != NN_OK) fails += report_status(dst, "backend run", out, repro);
    if (st == NN_OK && dst == NN_OK) {
        fails += check_outputs(dev, ref, &got, c->skip, "backend", out, repro);
        for (int i = 0; i < N_OUT; i++) {
            if (i && (c->skip & (1u << (i - 1)))) continue; /* not asked: check_outputs' */
            nn_tensor h;
            if (nn_h_to_host(dev, ref, &got.out[i].view, &h) != NN_OK) {
                fails += report_status(nn_last_error()->status, out_names[i], out, repro);
                continue;
            }
            double a = nn_h_exact(c->dtype, terms[i]) ? 0 : nn_h_tolerance(c->dtype, c->math);
            fails += nn_h_compare(out_names[i], &h, &want.out[i].view, a, terms[i], out, repro);
            nn_tensor_free(ref, &h);
        }
    }
    io_free(ref, ref, &want);
    io_free(dev, ref, &got);
    return fails;
}

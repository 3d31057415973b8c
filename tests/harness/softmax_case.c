#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "softmax_case.h"

/* ---------------------------------------------------------------------------------------------
 * Text form
 */

/* "n<N>c<C>[s<d>{x<d>}]" */
static int parse_dims(const char *tok, struct nn_softmax_case *c, char *err, size_t cap)
{
    const char *s = tok;
    int bad =
        *s++ != 'n' || nn_h_number(&s, &c->dims[0]) || *s++ != 'c' || nn_h_number(&s, &c->dims[1]);
    c->rank = 2;
    if (!bad && *s == 's') {
        s++;
        for (;;) {
            if (c->rank == NN_MAX_RANK || nn_h_number(&s, &c->dims[c->rank])) {
                bad = 1;
                break;
            }
            c->rank++;
            if (*s != 'x') break;
            s++;
        }
    }
    if (bad || *s)
        return nn_h_fail(
            err, cap,
            "dims token '%s': expected n<N>c<C>[s<d>{x<d>}] with sizes >= 1, e.g. n4c10 "
            "or n2c5s3x4",
            tok);
    return 0;
}

static int parse_token(const char *t, struct nn_softmax_case *c, char *err, size_t cap)
{
    if (nn_h_dtype_token(t, &c->dtype)) return 0;
    if (!strcmp(t, "softmax"))
        c->p.mode = NN_SOFTMAX_MODE_SOFTMAX;
    else if (!strcmp(t, "log"))
        c->p.mode = NN_SOFTMAX_MODE_LOG;
    else if (!strcmp(t, "xent"))
        c->xent = 1;
    else if (!strcmp(t, "i32"))
        c->index = NN_INDEX_I32;
    else if (!strcmp(t, "i64"))
        c->index = NN_INDEX_I64;
    else if (!strcmp(t, "accdx"))
        c->accumulate = NN_ACCUMULATE_DX;
    else if (!strcmp(t, "keep"))
        c->keep = 1;
    else
        return nn_h_fail(err, cap, "unknown token '%s' (see docs/SOFTMAX.md for the syntax)", t);
    return 0;
}

int nn_softmax_case_parse(int ntok, char **tok, struct nn_softmax_case *c, char *err, size_t cap)
{
    memset(c, 0, sizeof *c);
    nn_softmax_params_default(&c->p);
    c->dtype = NN_DTYPE_F32;
    c->index = NN_INDEX_I64;
    if (ntok < 1) return nn_h_fail(err, cap, "%s", "no case given (expected e.g. n4c10 log)");
    if (parse_dims(tok[0], c, err, cap)) return -1;
    for (int i = 1; i < ntok; i++)
        if (parse_token(tok[i], c, err, cap)) return -1;
    if (c->xent && c->p.mode != NN_SOFTMAX_MODE_SOFTMAX)
        return nn_h_fail(err, cap, "%s", "xent takes no log (its loss is of the softmax)");
    /* the text of a softmax case has no index type, so it would not reproduce one */
    if (!c->xent && c->index != NN_INDEX_I64)
        return nn_h_fail(err, cap, "%s",
                         "i32 and i64 are the targets' type of xent: they need xent");
    return 0;
}

int nn_softmax_case_parse_line(const char *line, struct nn_softmax_case *c, char *err, size_t cap)
{
    char buf[512], *tok[32];
    int n = nn_h_case_tokens(line, buf, sizeof buf, tok, 32, err, cap);
    if (n <= 0) return n;
    return nn_softmax_case_parse(n, tok, c, err, cap) == 0 ? 1 : -1;
}

void nn_softmax_case_format(const struct nn_softmax_case *c, char *buf, size_t cap)
{
    size_t n = 0;
    buf[0] = 0;
#define PUT(...)                                                                                   \
    do {                                                                                           \
        if (n < cap) n += (size_t)snprintf(buf + n, cap - n, __VA_ARGS__);                         \
    } while (0)
    PUT("n%lldc%lld", (long long)c->dims[0], (long long)c->dims[1]);
    for (int i = 2; i < c->rank; i++)
        PUT(i == 2 ? "s%lld" : "x%lld", (long long)c->dims[i]);
    if (c->xent)
        PUT(" xent %s", c->index == NN_INDEX_I32 ? "i32" : "i64");
    else
        PUT(" %s", c->p.mode == NN_SOFTMAX_MODE_LOG ? "log" : "softmax");
    if (c->accumulate & NN_ACCUMULATE_DX) PUT(" accdx");
    PUT(" %s", nn_dtype_name(c->dtype));
    if (c->keep) PUT(" keep");
#undef PUT
}

/* ---------------------------------------------------------------------------------------------
 * Standard cases
 */

static const char *const geometries[] = {"n1c1", "n4c10", "n3c7s5", "n2c5s3x4", "n16c300"};
static const char *const variants[] = {"softmax",   "log",      "softmax accdx",
                                       "log accdx", "xent i32", "xent i64"};
static const char *const dtype_names[] = {"f32", "f16", "bf16", "f64"};

#define N_GEOM (sizeof geometries / sizeof geometries[0])
#define N_VARS (sizeof variants / sizeof variants[0])
#define N_DT   (sizeof dtype_names / sizeof dtype_names[0])

size_t nn_softmax_standard_case_count(void)
{
    return N_GEOM * N_VARS * N_DT;
}

int nn_softmax_standard_case(size_t i, struct nn_softmax_case *c)
{
    if (i >= nn_softmax_standard_case_count()) return -1;
    char line[160], err[128];
    snprintf(line, sizeof line, "%s %s %s", geometries[i / (N_VARS * N_DT)],
             variants[i / N_DT % N_VARS], dtype_names[i % N_DT]);
    return nn_softmax_case_parse_line(line, c, err, sizeof err) == 1 ? 0 : -1;
}

/* ---------------------------------------------------------------------------------------------
 * Runs
 */

struct io {
    nn_tensor x, dy;           /* dy: the gradient of y, or of the loss */
    int64_t *t;                /* targets, host, n * s as int64 (also the source of t32) */
    int32_t *t32;              /* the same as int32 */
    nn_tensor t_dev;           /* the targets' bytes on a device context (else data NULL) */
    struct nn_h_guarded y, dx; /* y: the output, or the loss */
};

static int64_t samples(const struct nn_softmax_case *c)
{
    int64_t s = c->dims[0];
    for (int i = 2; i < c->rank; i++)
        s *= c->dims[i];
    return s;
}

/* Dims of the loss: x's without C. */
static int loss_dims(const struct nn_softmax_case *c, int64_t *d)
{
    d[0] = c->dims[0];
    for (int i = 2; i < c->rank; i++)
        d[i - 1] = c->dims[i];
    return c->rank - 1;
}

static void io_free(nn_ctx *ctx, nn_ctx *host, struct io *io)
{
    if (io->x.data) nn_tensor_free(ctx, &io->x);
    if (io->dy.data) nn_tensor_free(ctx, &io->dy);
    if (io->t_dev.data) nn_tensor_free(ctx, &io->t_dev);
    free(io->t);
    free(io->t32);
    nn_h_guarded_free(ctx, host, &io->y);
    nn_h_guarded_free(ctx, host, &io->dx);
}

/* The targets, and their bytes in ctx's memory when ctx is a GPU context (staged through a
 * float tensor of the same bytes: the tensor API has no integer dtypes). */
static nn_status make_targets(nn_ctx *ctx, nn_ctx *host, const struct nn_softmax_case *c,
                              struct io *io)
{
    int64_t n = samples(c);
    io->t = malloc((size_t)n * sizeof *io->t);
    io->t32 = malloc((size_t)n * sizeof *io->t32);
    if (!io->t || !io->t32) return NN_E_OOM_HOST;
    for (int64_t i = 0; i < n; i++) {
        io->t[i] = (i * 7 + 3) % c->dims[1];
        io->t32[i] = (int32_t)io->t[i];
    }
    if (ctx == host) return NN_OK;
    int i64 = c->index == NN_INDEX_I64;
    nn_dtype dt = i64 ? NN_DTYPE_F64 : NN_DTYPE_F32;
    nn_tensor h;
    nn_status st = nn_tensor_wrap(host, i64 ? (void *)io->t : (void *)io->t32, dt, 1, &n, NULL, &h);
    if (st == NN_OK) st = nn_tensor_empty(ctx, dt, 1, &n, &io->t_dev);
    if (st == NN_OK) st = nn_tensor_copy(ctx, &io->t_dev, &h);
    return st;
}

static nn_class_targets targets_of(const struct nn_softmax_case *c, const struct io *io)
{
    nn_class_targets t;
    memset(&t, 0, sizeof t);
    t.type = c->index;
    t.data = io->t_dev.data ? io->t_dev.data
                            : (c->index == NN_INDEX_I64 ? (const void *)io->t : (void *)io->t32);
    return t;
}

/* Inputs uniform in [-2, 2) (dy in [-1, 1)), outputs guarded, an accumulated dx started at
 * integers. */
static nn_status setup(nn_ctx *ctx, nn_ctx *host, const struct nn_softmax_case *c, nn_dtype dt,
                       struct io *io)
{
    memset(io, 0, sizeof *io);
    int64_t ld[NN_MAX_RANK];
    int lr = loss_dims(c, ld);
    const int64_t *yd = c->xent ? ld : c->dims;
    int yr = c->xent ? lr : c->rank;
    nn_status st = nn_tensor_empty(ctx, dt, c->rank, c->dims, &io->x);
    if (st == NN_OK) st = nn_tensor_fill_uniform(ctx, &io->x, -2, 2, 61);
    if (st == NN_OK) st = nn_tensor_empty(ctx, dt, yr, yd, &io->dy);
    if (st == NN_OK) st = nn_tensor_fill_uniform(ctx, &io->dy, -1, 1, 62);
    if (st == NN_OK) st = nn_h_guarded_alloc(ctx, host, dt, yr, yd, 63, &io->y);
    if (st == NN_OK) st = nn_h_guarded_alloc(ctx, host, dt, c->rank, c->dims, 64, &io->dx);
    if (st == NN_OK && c->accumulate) st = nn_tensor_fill_ints(ctx, &io->dx.view, -2, 2, 65);
    if (st == NN_OK && c->xent) st = make_targets(ctx, host, c, io);
    return st;
}

static nn_status forward(nn_ctx *ctx, const struct nn_softmax_case *c, struct io *io, void **pb)
{
    if (c->xent) {
        nn_class_targets t = targets_of(c, io);
        return nn_softmax_cross_entropy_forward(ctx, &io->x, &t, &io->y.view,
                                                (nn_softmax_cross_entropy_pullback **)pb);
    }
    return nn_softmax_forward(ctx, &c->p, &io->x, &io->y.view, (nn_softmax_pullback **)pb);
}

static nn_status run(nn_ctx *ctx, const struct nn_softmax_case *c, struct io *io)
{
    void *pb = NULL;
    nn_status st = forward(ctx, c, io, &pb);
    if (c->xent) {
        nn_softmax_cross_entropy_pullback *x = pb;
        /* "xent accdx": the accumulation of nn_softmax_cross_entropy_backward_ex's options */
        nn_backward_options o = {.accumulate = c->accumulate, .keep = c->keep};
        if (st == NN_OK)
            st = o.accumulate || o.keep
                     ? nn_softmax_cross_entropy_backward_ex(ctx, &x, &o, &io->dy, &io->dx.view)
                     : nn_softmax_cross_entropy_backward(ctx, &x, &io->dy, &io->dx.view);
        nn_softmax_cross_entropy_pullback_free(&x);
    } else {
        nn_softmax_pullback *s = pb;
        nn_backward_options o = {.accumulate = c->accumulate, .keep = c->keep};
        if (st == NN_OK)
            st = o.accumulate || o.keep ? nn_softmax_backward_ex(ctx, &s, &o, &io->dy, &io->dx.view)
                                        : nn_softmax_backward(ctx, &s, &io->dy, &io->dx.view);
        nn_softmax_pullback_free(&s);
    }
    return st;
}

static int report_status(nn_status st, const char *what, FILE *out, const char *repro)
{
    fprintf(out, "FAIL %s: %s: %s | repro: %s\n", what, nn_status_name(st),
            nn_last_error()->message, repro);
    return 1;
}

static void repro_of(const struct nn_softmax_case *c, char *buf, size_t cap)
{
    char text[256];
    nn_softmax_case_format(c, text, sizeof text);
    snprintf(buf, cap, "nnprim check softmax %s", text);
}

/* ---------------------------------------------------------------------------------------------
 * Finite differences (f64, reference)
 */

static double loss(nn_ctx *ref, const struct nn_softmax_case *c, struct io *io)
{
    if (forward(ref, c, io, NULL) != NN_OK) return NAN;
    double s = 0;
    int64_t n = nn_tensor_numel(&io->y.view);
    for (int64_t i = 0; i < n; i++)
        s += ((double *)io->y.view.data)[i] * ((const double *)io->dy.data)[i];
    return s;
}

static int check_fd(nn_ctx *ref, const struct nn_softmax_case *c, FILE *out, const char *repro)
{
    struct nn_softmax_case d = *c;
    d.dtype = NN_DTYPE_F64;
    struct io io;
    nn_tensor start = {0};
    nn_status st = setup(ref, ref, &d, NN_DTYPE_F64, &io);
    if (st == NN_OK && d.accumulate) st = nn_h_to_host(ref, ref, &io.dx.view, &start);
    if (st == NN_OK) st = run(ref, &d, &io);
    int fails = 0;
    if (st != NN_OK) {
        fails = report_status(st, "reference f64 run", out, repro);
    } else {
        const double eps = 1e-5;
        int64_t n = nn_tensor_numel(&io.x), step = n > 32 ? n / 32 : 1;
        double *v = io.x.data;
        const double *g = io.dx.view.data;
        for (int64_t i = 0; i < n && !fails; i += step) {
            double keep = v[i];
            v[i] = keep + eps;
            double up = loss(ref, &d, &io);
            v[i] = keep - eps;
            double down = loss(ref, &d, &io);
            v[i] = keep;
            double fd = (up - down) / (2 * eps) + (start.data ? ((double *)start.data)[i] : 0);
            if (!(fabs(fd - g[i]) <= 1e-6 * (1 + fabs(g[i])))) {
                fprintf(out,
                        "FAIL dx vs finite differences (f64): element %lld: analytic %.12g, "
                        "numeric %.12g | repro: %s\n",
                        (long long)i, g[i], fd, repro);
                fails++;
            }
        }
    }
    if (start.data) nn_tensor_free(ref, &start);
    io_free(ref, ref, &io);
    return fails;
}

/* ---------------------------------------------------------------------------------------------
 * Guards, written outputs, a backend against the reference
 */

static int check_outputs(nn_ctx *ctx, nn_ctx *host, struct io *io, const char *who, FILE *out,
                         const char *repro)
{
    struct nn_h_guarded *outs[] = {&io->y, &io->dx};
    const char *names[] = {"y", "dx"};
    int fails = 0;
    for (int i = 0; i < 2; i++) {
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

int nn_softmax_check_reference(nn_ctx *ref, const struct nn_softmax_case *c, FILE *out)
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
        fails += check_outputs(ref, ref, &io, "reference", out, repro);
    io_free(ref, ref, &io);
    return fails;
}

int nn_softmax_check_backend(nn_ctx *dev, nn_ctx *ref, const struct nn_softmax_case *c, FILE *out)
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
        fails += check_outputs(dev, ref, &got, "backend", out, repro);
        struct nn_h_guarded *g[] = {&got.y, &got.dx}, *w[] = {&want.y, &want.dx};
        const char *names[] = {"y", "dx"};
        /* exp and log round in every dtype: compare with its tolerance over C terms. */
        double a = nn_h_tolerance(c->dtype, NN_MATH_STRICT_FP32);
        for (int i = 0; i < 2; i++) {
            nn_tensor h;
            if (nn_h_to_host(dev, ref, &g[i]->view, &h) != NN_OK) {
                fails += report_status(nn_last_error()->status, names[i], out, repro);
                continue;
            }
            fails += nn_h_compare(names[i], &h, &w[i]->view, a, c->dims[1], out, repro);
            nn_tensor_free(ref, &h);
        }
    }
    io_free(ref, ref, &want);
    io_free(dev, ref, &got);
    return fails;
}

#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "pool_case.h"

/* ---------------------------------------------------------------------------------------------
 * Text form
 */

static const struct {
    const char *name;
    nn_pool_mode mode;
} modes[] = {{"max", NN_POOL_MAX},
             {"mean_include_pad", NN_POOL_MEAN_INCLUDE_PAD},
             {"mean_exclude_pad", NN_POOL_MEAN_EXCLUDE_PAD}};

/* "n2c3h8w8": letters n c [d [h]] w, each followed by a number >= 1. */
static int parse_dims(const char *tok, struct nn_pool_case *c, char *err, size_t cap)
{
    static const char letters[] = "ncdhw";
    int64_t v[5];
    int seen[5] = {0};
    for (const char *s = tok; *s;) {
        const char *l = strchr(letters, *s);
        if (!l || !isdigit((unsigned char)s[1]))
            return nn_h_fail(err, cap, "dims token '%s': expected letter+number pairs from ncdhw",
                             tok);
        char *end;
        long long n = strtoll(s + 1, &end, 10);
        int i = (int)(l - letters);
        if (seen[i]++ || n < 1)
            return nn_h_fail(err, cap, "dims token '%s': a letter repeats or a size is < 1", tok);
        v[i] = n;
        s = end;
    }
    if (!seen[0] || !seen[1] || !seen[4] || (seen[2] && !seen[3]))
        return nn_h_fail(err, cap, "dims token '%s': need n, c and w; d needs h", tok);
    int nsp = seen[2] ? 3 : seen[3] ? 2 : 1;
    c->p.spatial_rank = nsp;
    c->x_dims[0] = v[0];
    c->x_dims[1] = v[1];
    for (int i = 0; i < nsp; i++)
        c->x_dims[2 + i] = v[2 + 3 - nsp + i];
    for (int i = 0; i < NN_POOL_MAX_SPATIAL; i++)
        c->p.window[i] = c->p.stride[i] = 1;
    return 0;
}

static int parse_token(const char *t, struct nn_pool_case *c, char *err, size_t cap)
{
    nn_pool_params *p = &c->p;
    int nsp = p->spatial_rank;
    if (nn_h_dtype_token(t, &c->dtype)) return 0;
    if (!strcmp(t, "accdx")) {
        c->accumulate = NN_ACCUMULATE_DX;
        return 0;
    }
    if (!strcmp(t, "keep")) {
        c->keep = 1;
        return 0;
    }
    for (size_t i = 0; i < sizeof modes / sizeof modes[0]; i++)
        if (!strcmp(t, modes[i].name)) {
            p->mode = modes[i].mode;
            return 0;
        }
    if (!strncmp(t, "win", 3))
        return nn_h_parse_list(t, t + 3, nsp, NN_POOL_MAX_SPATIAL, p->window, 1, err, cap);
    if (!strncmp(t, "stride", 6))
        return nn_h_parse_list(t, t + 6, nsp, NN_POOL_MAX_SPATIAL, p->stride, 1, err, cap);
    if (!strncmp(t, "padlo", 5))
        return nn_h_parse_list(t, t + 5, nsp, NN_POOL_MAX_SPATIAL, p->pad_lo, 0, err, cap);
    if (!strncmp(t, "padhi", 5))
        return nn_h_parse_list(t, t + 5, nsp, NN_POOL_MAX_SPATIAL, p->pad_hi, 0, err, cap);
    if (!strncmp(t, "pad", 3)) {
        if (nn_h_parse_list(t, t + 3, nsp, NN_POOL_MAX_SPATIAL, p->pad_lo, 0, err, cap)) return -1;
        memcpy(p->pad_hi, p->pad_lo, sizeof p->pad_hi);
        return 0;
    }
    return nn_h_fail(err, cap, "unknown token '%s' (see docs/POOL.md for the syntax)", t);
}

int nn_pool_case_parse(int ntok, char **tok, struct nn_pool_case *c, char *err, size_t cap)
{
    memset(c, 0, sizeof *c);
    c->dtype = NN_DTYPE_F32;
    c->p.mode = NN_POOL_MAX;
    if (ntok < 1)
        return nn_h_fail(err, cap, "%s", "no case given (expected e.g. n1c2h8w8 max win2)");
    if (parse_dims(tok[0], c, err, cap)) return -1;
    for (int i = 1; i < ntok; i++)
        if (parse_token(tok[i], c, err, cap)) return -1;
    return 0;
}

int nn_pool_case_parse_line(const char *line, struct nn_pool_case *c, char *err, size_t cap)
{
    char buf[512], *tok[32];
    int n = nn_h_case_tokens(line, buf, sizeof buf, tok, 32, err, cap);
    if (n <= 0) return n;
    return nn_pool_case_parse(n, tok, c, err, cap) == 0 ? 1 : -1;
}

void nn_pool_case_format(const struct nn_pool_case *c, char *buf, size_t cap)
{
    static const char letters[] = "dhw";
    const nn_pool_params *p = &c->p;
    int nsp = p->spatial_rank, off = 3 - nsp;
    size_t n =
        (size_t)snprintf(buf, cap, "n%lldc%lld", (long long)c->x_dims[0], (long long)c->x_dims[1]);
    for (int i = 0; i < nsp && n < cap; i++)
        n += (size_t)snprintf(buf + n, cap - n, "%c%lld", letters[off + i],
                              (long long)c->x_dims[2 + i]);
    const char *mode = "?";
    for (size_t i = 0; i < sizeof modes / sizeof modes[0]; i++)
        if (modes[i].mode == p->mode) mode = modes[i].name;
    if (n < cap) n += (size_t)snprintf(buf + n, cap - n, " %s", mode);
    n = nn_h_put_list(buf, cap, n, "win", nsp, p->window);
    n = nn_h_put_list(buf, cap, n, "stride", nsp, p->stride);
    if (memcmp(p->pad_lo, p->pad_hi, (size_t)nsp * sizeof p->pad_lo[0]) == 0) {
        n = nn_h_put_list(buf, cap, n, "pad", nsp, p->pad_lo);
    } else {
        n = nn_h_put_list(buf, cap, n, "padlo", nsp, p->pad_lo);
        n = nn_h_put_list(buf, cap, n, "padhi", nsp, p->pad_hi);
    }
    if (n < cap) n += (size_t)snprintf(buf + n, cap - n, " %s", nn_dtype_name(c->dtype));
    if (n < cap && (c->accumulate & NN_ACCUMULATE_DX))
        n += (size_t)snprintf(buf + n, cap - n, " accdx");
    if (n < cap && c->keep) snprintf(buf + n, cap - n, " keep");
}

/* ---------------------------------------------------------------------------------------------
 * Standard cases: every geometry in every mode and dtype. Inputs stay within 256 elements, so
 * that max pooling has no ties even in bf16.
 */

static const char *const geometries[] = {
    "n2c2w9 win3 stride2",                    /* 1-D */
    "n1c2w8 win2 stride2 padlo1 padhi0",      /* 1-D, asymmetric padding */
    "n2c2h6w6 win2 stride2",                  /* 2-D, tiling windows */
    "n1c3h7w6 win3x2 stride1x2 pad1x0",       /* 2-D, overlapping, per-dim */
    "n1c1h5w5 win3 stride2 padlo2 padhi1",    /* 2-D, an edge window of mostly padding */
    "n1c2d4h4w4 win2 stride2",                /* 3-D */
    "n1c1d3h4w5 win2x3x2 stride1x2x1 pad1",   /* 3-D, overlapping, padded */
    "n2c2h5w7 win3x2 stride2x1 pad1x0 accdx", /* 2-D, overlapping, dx accumulated */
};

static const char *const mode_names[] = {"max", "mean_include_pad", "mean_exclude_pad"};
static const char *const variants[] = {"f32", "f16", "bf16", "f64"};

#define N_GEOM  (sizeof geometries / sizeof geometries[0])
#define N_MODES (sizeof mode_names / sizeof mode_names[0])
#define N_VARS  (sizeof variants / sizeof variants[0])

size_t nn_pool_standard_case_count(void)
{
    return N_GEOM * N_MODES * N_VARS;
}

int nn_pool_standard_case(size_t i, struct nn_pool_case *c)
{
    if (i >= nn_pool_standard_case_count()) return -1;
    char line[160], err[128];
    snprintf(line, sizeof line, "%s %s %s", geometries[i / (N_MODES * N_VARS)],
             mode_names[i / N_VARS % N_MODES], variants[i % N_VARS]);
    return nn_pool_case_parse_line(line, c, err, sizeof err) == 1 ? 0 : -1;
}

/* ---------------------------------------------------------------------------------------------
 * Runs
 */

static int64_t prod(const int64_t *v, int n)
{
    int64_t r = 1;
    for (int i = 0; i < n; i++)
        r *= v[i];
    return r;
}

/* The largest n such that the integers 0..n-1 are all exact in dtype. */
static int64_t exact_ints(nn_dtype dt)
{
    switch (dt) {
    case NN_DTYPE_F16: return 2048;
    case NN_DTYPE_BF16: return 256;
    default: return (int64_t)1 << 24;
    }
}

/* Store v (an integer exact in t's dtype) at element i of a host tensor. */
static void put_int(nn_tensor *t, int64_t i, int64_t v)
{
    float f = (float)v;
    uint32_t bits;
    memcpy(&bits, &f, sizeof bits);
    switch (t->dtype) {
    case NN_DTYPE_F32: ((float *)t->data)[i] = f; break;
    case NN_DTYPE_F64: ((double *)t->data)[i] = (double)v; break;
    case NN_DTYPE_BF16: ((uint16_t *)t->data)[i] = (uint16_t)(bits >> 16); break;
    case NN_DTYPE_F16: {
        /* Exact for |v| <= 2048: f32's exponent rebased, its mantissa's top 10 bits. */
        uint16_t h = (uint16_t)((bits >> 16) & 0x8000u);
        if (v != 0)
            h |= (uint16_t)((((bits >> 23) & 0xffu) - 127 + 15) << 10 | ((bits >> 13) & 0x3ffu));
        ((uint16_t *)t->data)[i] = h;
        break;
    }
    }
}

/* x on host: a shuffled 0..n-1, centred, so max pooling sees no ties (where the dtype has n
 * exact integers; *distinct says whether it did). */
static nn_status fill_distinct(nn_ctx *host, nn_tensor *t, uint64_t seed, int *distinct)
{
    int64_t n = nn_tensor_numel(t), m = exact_ints(t->dtype);
    int64_t *perm = malloc((size_t)n * sizeof *perm);
    if (!perm) return NN_E_OOM_HOST;
    for (int64_t i = 0; i < n; i++)
        perm[i] = i;
    uint64_t s = seed * 0x9e3779b97f4a7c15u + 1;
    for (int64_t i = n - 1; i > 0; i--) {
        s = s * 6364136223846793005u + 1442695040888963407u;
        int64_t j = (int64_t)((s >> 33) % (uint64_t)(i + 1)), k = perm[i];
        perm[i] = perm[j];
        perm[j] = k;
    }
    for (int64_t i = 0; i < n; i++)
        put_int(t, i, perm[i] % m - (n < m ? n : m) / 2);
    free(perm);
    *distinct = n <= m;
    (void)host;
    return NN_OK;
}

struct io {
    nn_tensor x, dy;                /* inputs, on the run's context */
    struct nn_h_guarded y, dx, sdx; /* outputs; sdx: dx of nn_pool_backward_stateless */
    int distinct;                   /* x has no two equal elements */
};

static void io_free(nn_ctx *ctx, nn_ctx *host, struct io *io)
{
    if (io->x.data) nn_tensor_free(ctx, &io->x);
    if (io->dy.data) nn_tensor_free(ctx, &io->dy);
    nn_h_guarded_free(ctx, host, &io->y);
    nn_h_guarded_free(ctx, host, &io->dx);
    nn_h_guarded_free(ctx, host, &io->sdx);
}

/* What an accumulated dx holds before backward: integers in [-2, 2], the same on every backend. */
#define START_SEED 23

static nn_status make_dx(nn_ctx *ctx, nn_ctx *host, const struct nn_pool_case *c, nn_dtype dt,
                         struct nn_h_guarded *g)
{
    nn_status st = nn_h_guarded_alloc(ctx, host, dt, c->p.spatial_rank + 2, c->x_dims, 22, g);
    if (st == NN_OK && c->accumulate) st = nn_tensor_fill_ints(ctx, &g->view, -2, 2, START_SEED);
    return st;
}

/* A host tensor filled by fill (distinct) or with integers in [-2, 2], copied to ctx. */
static nn_status make_input(nn_ctx *ctx, nn_ctx *host, nn_dtype dt, int rank, const int64_t *dims,
                            int distinct, uint64_t seed, nn_tensor *out, int *was_distinct)
{
    nn_tensor h;
    nn_status st = nn_tensor_empty(host, dt, rank, dims, &h);
    if (st != NN_OK) return st;
    st = distinct ? fill_distinct(host, &h, seed, was_distinct)
                  : nn_tensor_fill_ints(host, &h, -2, 2, seed);
    if (st == NN_OK) st = nn_tensor_empty(ctx, dt, rank, dims, out);
    if (st == NN_OK) {
        st = nn_tensor_copy(ctx, out, &h);
        if (st != NN_OK) nn_tensor_free(ctx, out);
    }
    nn_tensor_free(host, &h);
    return st;
}

/* Allocate, fill and run forward + backward of case c on ctx (dtype dt). */
static nn_status run_case(nn_ctx *ctx, nn_ctx *host, const struct nn_pool_case *c, nn_dtype dt,
                          struct io *io)
{
    memset(io, 0, sizeof *io);
    int rank = c->p.spatial_rank + 2, unused;
    int64_t yd[NN_POOL_MAX_SPATIAL + 2];
    nn_status st = nn_pool_output_shape(&c->p, rank, c->x_dims, yd);
    if (st != NN_OK) {
        /* a shape the library refuses: y of ones, so that the op's own call says why (the
         * message of a failed call's verbose line) */
        for (int i = 0; i < rank; i++)
            yd[i] = i < 2 ? c->x_dims[i] : 1;
        st = NN_OK;
    }
    if (st == NN_OK) st = make_input(ctx, host, dt, rank, c->x_dims, 1, 11, &io->x, &io->distinct);
    if (st == NN_OK) st = make_input(ctx, host, dt, rank, yd, 0, 14, &io->dy, &unused);
    if (st == NN_OK) st = nn_h_guarded_alloc(ctx, host, dt, rank, yd, 21, &io->y);
    if (st == NN_OK) st = make_dx(ctx, host, c, dt, &io->dx);
    if (st == NN_OK) st = make_dx(ctx, host, c, dt, &io->sdx);
    if (st != NN_OK) return st;
    nn_pool_pullback *pb = NULL;
    nn_backward_options opts = {.accumulate = c->accumulate, .keep = c->keep};
    st = nn_pool_forward(ctx, &c->p, &io->x, &io->y.view, &pb);
    /* the plain call where it can say the case, so that both are run */
    if (st == NN_OK)
        st = c->accumulate || c->keep ? nn_pool_backward_ex(ctx, &pb, &opts, &io->dy, &io->dx.view)
                                      : nn_pool_backward(ctx, &pb, &io->dy, &io->dx.view);
    nn_pool_pullback_free(&pb);
    if (st == NN_OK)
        st = nn_pool_backward_stateless(ctx, &c->p, &io->x, &io->y.view, &io->dy, &io->sdx.view,
                                        c->accumulate);
    return st;
}

static int report_status(nn_status st, const char *what, FILE *out, const char *repro)
{
    fprintf(out, "FAIL %s: %s: %s | repro: %s\n", what, nn_status_name(st),
            nn_last_error()->message, repro);
    return 1;
}

static void repro_of(const struct nn_pool_case *c, char *buf, size_t cap)
{
    char text[256];
    nn_pool_case_format(c, text, sizeof text);
    snprintf(buf, cap, "nnprim check pool %s", text);
}

/* ---------------------------------------------------------------------------------------------
 * Finite differences (f64, reference)
 */

static double loss(nn_ctx *ref, const struct nn_pool_case *c, const nn_tensor *x, nn_tensor *y,
                   const nn_tensor *r)
{
    if (nn_pool_forward(ref, &c->p, x, y, NULL) != NN_OK) return NAN;
    double s = 0;
    int64_t n = nn_tensor_numel(y);
    for (int64_t i = 0; i < n; i++)
        s += ((double *)y->data)[i] * ((const double *)r->data)[i];
    return s;
}

/* dx against (L(x + e) - L(x - e)) / 2e at up to 64 evenly spread elements. Inputs are integers
 * at least 1 apart and e is 1e-3, so no max-pooling window changes its winner. */
static int check_fd(nn_ctx *ref, const struct nn_pool_case *c, FILE *out, const char *repro)
{
    struct nn_pool_case d = *c;
    d.dtype = NN_DTYPE_F64;
    struct io io;
    nn_status st = run_case(ref, ref, &d, NN_DTYPE_F64, &io);
    int fails = 0;
    nn_tensor start = {0};
    if (st == NN_OK && d.accumulate) {
        st = nn_tensor_empty(ref, NN_DTYPE_F64, d.p.spatial_rank + 2, d.x_dims, &start);
        if (st == NN_OK) st = nn_tensor_fill_ints(ref, &start, -2, 2, START_SEED);
    }
    if (st != NN_OK) {
        fails = report_status(st, "reference f64 run", out, repro);
    } else {
        const double eps = 1e-3;
        int64_t n = nn_tensor_numel(&io.x), step = n > 64 ? n / 64 : 1;
        double *v = io.x.data;
        const double *g = io.dx.view.data;
        for (int64_t i = 0; i < n && !fails; i += step) {
            double keep = v[i];
            v[i] = keep + eps;
            double up = loss(ref, &d, &io.x, &io.y.view, &io.dy);
            v[i] = keep - eps;
            double down = loss(ref, &d, &io.x, &io.y.view, &io.dy);
            v[i] = keep;
            double fd = (up - down) / (2 * eps);
            double an = g[i] - (start.data ? ((const double *)start.data)[i] : 0);
            if (!(fabs(fd - an) <= 1e-6 * (1 + fabs(an)))) {
                fprintf(out,
                        "FAIL dx vs finite differences (f64): element %lld: analytic %.12g, "
                        "numeric %.12g | repro: %s\n",
                        (long long)i, an, fd, repro);
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

/* Guards and written elements of y, dx and the stateless dx; the two dx compared with scale a
 * (0: bitwise, as on the reference; a cuDNN mean may sum in another order). */
static int check_outputs(nn_ctx *ctx, nn_ctx *host, struct io *io, const char *who, double a,
                         int64_t terms, FILE *out, const char *repro)
{
    struct {
        const char *name;
        struct nn_h_guarded *g;
    } outs[] = {{"y", &io->y}, {"dx", &io->dx}, {"stateless dx", &io->sdx}};
    int fails = 0;
    nn_tensor dx = {0};
    for (size_t i = 0; i < 3; i++) {
        char name[64];
        snprintf(name, sizeof name, "%s %s", who, outs[i].name);
        fails += nn_h_guarded_check(ctx, host, outs[i].g, name, out, repro);
        nn_tensor h;
        if (nn_h_to_host(ctx, host, &outs[i].g->view, &h) != NN_OK) {
            fails += report_status(nn_last_error()->status, name, out, repro);
            continue;
        }
        fails += nn_h_check_written(name, &h, out, repro);
        if (i == 1) {
            dx = h;
            continue;
        }
        if (i == 2 && dx.data) {
            snprintf(name, sizeof name, "%s stateless dx vs the pullback's", who);
            fails += nn_h_compare(name, &h, &dx, a, terms, out, repro);
        }
        nn_tensor_free(host, &h);
    }
    if (dx.data) nn_tensor_free(host, &dx);
    return fails;
}

int nn_pool_check_reference(nn_ctx *ref, const struct nn_pool_case *c, FILE *out)
{
    char repro[320];
    repro_of(c, repro, sizeof repro);
    struct io io;
    int64_t yd[NN_POOL_MAX_SPATIAL + 2];
    if (nn_pool_output_shape(&c->p, c->p.spatial_rank + 2, c->x_dims, yd) != NN_OK) {
        /* a shape the library refuses: one run, for the op's own status and message */
        nn_status st = run_case(ref, ref, c, c->dtype, &io);
        io_free(ref, ref, &io);
        return st == NN_OK ? 0 : report_status(st, "reference run", out, repro);
    }
    int fails = check_fd(ref, c, out, repro);
    nn_status st = run_case(ref, ref, c, c->dtype, &io);
    if (st != NN_OK)
        fails += report_status(st, "reference run", out, repro);
    else
        fails += check_outputs(ref, ref, &io, "reference", 0, 0, out, repro);
    io_free(ref, ref, &io);
    return fails;
}

int nn_pool_check_backend(nn_ctx *dev, nn_ctx *ref, const struct nn_pool_case *c, FILE *out)
{
    char repro[320];
    repro_of(c, repro, sizeof repro);
    if (memcmp(c->p.pad_lo, c->p.pad_hi, sizeof c->p.pad_lo) != 0) {
        /* pool.h: cuDNN's pooling pads both sides equally, so the backend refuses the case with
         * NN_E_UNSUPPORTED; anything else (a result, or another status) is a failure. */
        struct io got;
        nn_status dst = run_case(dev, ref, c, c->dtype, &got);
        io_free(dev, ref, &got);
        if (dst != NN_E_UNSUPPORTED)
            return dst == NN_OK
                       ? (fprintf(out, "FAIL asymmetric padding accepted | %s\n", repro), 1)
                       : report_status(dst, "backend run", out, repro);
        fprintf(out, "note: asymmetric padding refused by the cuDNN backend, as documented | %s\n",
                repro);
        return 0;
    }
    int64_t window = prod(c->p.window, c->p.spatial_rank);
    struct io want, got;
    int fails = 0;
    nn_status st = run_case(ref, ref, c, c->dtype, &want);
    if (st != NN_OK) fails += report_status(st, "reference run", out, repro);
    nn_status dst = run_case(dev, ref, c, c->dtype, &got);
    if (dst != NN_OK) fails += report_status(dst, "backend run", out, repro);
    if (st == NN_OK && dst == NN_OK) {
        /* Max pooling picks and routes exact values: exact unless x has ties (then the
         * winner, and so dx, may differ legitimately). Means divide, so compare to the dtype's
         * tolerance (sums of small integers are exact; the division rounds once; an
         * accumulated dx adds one term). */
        int max = c->p.mode == NN_POOL_MAX;
        double a = max ? 0 : nn_h_tolerance(c->dtype, NN_MATH_STRICT_FP32);
        int64_t dterms = window + (c->accumulate ? 1 : 0);
        fails += check_outputs(dev, ref, &got, "backend", a, dterms, out, repro);
        struct {
            const char *name;
            struct nn_h_guarded *g, *w;
            int64_t terms;
        } outs[] = {{"y", &got.y, &want.y, window},
                    {"dx", &got.dx, &want.dx, dterms},
                    {"stateless dx", &got.sdx, &want.dx, dterms}};
        for (size_t i = 0; i < 3; i++) {
            if (max && i >= 1 && !want.distinct) {
                if (i == 1)
                    fprintf(out, "note: x has ties in %s; max-pooling dx not compared | %s\n",
                            nn_dtype_name(c->dtype), repro);
                continue;
            }
            nn_tensor h;
            if (nn_h_to_host(dev, ref, &outs[i].g->view, &h) != NN_OK) {
                fails += report_status(nn_last_error()->status, outs[i].name, out, repro);
                continue;
            }
            fails += nn_h_compare(outs[i].name, &h, &outs[i].w->view, a, outs[i].terms, out, repro);
            nn_tensor_free(ref, &h);
        }
    }
    io_free(ref, ref, &want);
    io_free(dev, ref, &got);
    return fails;
}

#include <ctype.h>
#include <float.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

static float f32_of_bits(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static double f16_value(uint16_t h)
{
    int exp = (h >> 10) & 0x1f;
    int man = h & 0x3ff;
    double v = exp == 0    ? ldexp(man, -24)
               : exp == 31 ? (man ? NAN : INFINITY)
                           : ldexp(man | 0x400, exp - 25);
    return (h & 0x8000) ? -v : v;
}

double nn_h_get(const nn_tensor *t, int64_t i)
{
    switch (t->dtype) {
    case NN_DTYPE_F32: return ((const float *)t->data)[i];
    case NN_DTYPE_F64: return ((const double *)t->data)[i];
    case NN_DTYPE_F16: return f16_value(((const uint16_t *)t->data)[i]);
    case NN_DTYPE_BF16: return f32_of_bits((uint32_t)((const uint16_t *)t->data)[i] << 16);
    }
    return NAN;
}

nn_status nn_h_to_host(nn_ctx *ctx, nn_ctx *host, const nn_tensor *t, nn_tensor *out)
{
    nn_status st = nn_tensor_empty(host, t->dtype, t->rank, t->dims, out);
    if (st != NN_OK) return st;
    st = nn_tensor_copy(ctx, out, t);
    if (st != NN_OK) nn_tensor_free(host, out);
    return st;
}

nn_status nn_h_guarded_alloc(nn_ctx *ctx, nn_ctx *host, nn_dtype dtype, int rank,
                             const int64_t *dims, uint64_t seed, struct nn_h_guarded *g)
{
    memset(g, 0, sizeof *g);
    int64_t numel = 1;
    for (int i = 0; i < rank; i++)
        numel *= dims[i];
    int64_t total = numel + 2 * NN_H_GUARD;
    nn_status st = nn_tensor_empty(ctx, dtype, 1, &total, &g->whole);
    if (st == NN_OK) st = nn_tensor_empty(host, dtype, 1, &total, &g->pattern);
    if (st == NN_OK) st = nn_tensor_fill_uniform(host, &g->pattern, -1e3, 1e3, seed);
    if (st == NN_OK) st = nn_tensor_copy(ctx, &g->whole, &g->pattern);
    if (st != NN_OK) {
        nn_h_guarded_free(ctx, host, g);
        return st;
    }
    g->view = g->whole;
    g->view.data = (char *)g->whole.data + NN_H_GUARD * nn_dtype_size(dtype);
    g->view.rank = rank;
    memcpy(g->view.dims, dims, (size_t)rank * sizeof *dims);
    nn_contiguous_strides(rank, dims, g->view.strides);
    st = nn_tensor_fill_constant(ctx, &g->view, NAN);
    if (st != NN_OK) nn_h_guarded_free(ctx, host, g);
    return st;
}

int nn_h_guarded_check(nn_ctx *ctx, nn_ctx *host, const struct nn_h_guarded *g, const char *name,
                       FILE *out, const char *repro)
{
    nn_tensor now;
    nn_status st = nn_h_to_host(ctx, host, &g->whole, &now);
    if (st != NN_OK) {
        fprintf(out, "FAIL %s: cannot read the guards back: %s | repro: %s\n", name,
                nn_last_error()->message, repro);
        return 1;
    }
    size_t es = nn_dtype_size(g->whole.dtype), guard = NN_H_GUARD * es;
    size_t tail = (size_t)(g->whole.dims[0] - NN_H_GUARD) * es;
    const char *a = now.data, *b = g->pattern.data;
    int below = memcmp(a, b, guard) != 0, above = memcmp(a + tail, b + tail, guard) != 0;
    nn_tensor_free(host, &now);
    if (!below && !above) return 0;
    fprintf(out, "FAIL %s: written out of bounds (%s%s%s) | repro: %s\n", name,
            below ? "before the first element" : "", below && above ? ", " : "",
            above ? "after the last element" : "", repro);
    return 1;
}

void nn_h_guarded_free(nn_ctx *ctx, nn_ctx *host, struct nn_h_guarded *g)
{
    if (g->whole.data) nn_tensor_free(ctx, &g->whole);
    if (g->pattern.data) nn_tensor_free(host, &g->pattern);
    memset(g, 0, sizeof *g);
}

double nn_h_tolerance(nn_dtype dtype, nn_math_mode math)
{
    switch (dtype) {
    case NN_DTYPE_F64: return 1e-12;
    case NN_DTYPE_F32: return math == NN_MATH_TF32 ? 2e-3 : 1e-5;
    case NN_DTYPE_F16: return 2e-3;
    case NN_DTYPE_BF16: return 1.6e-2;
    }
    return 0;
}

int nn_h_exact(nn_dtype dtype, int64_t terms)
{
    int bits = dtype == NN_DTYPE_F64   ? 53
               : dtype == NN_DTYPE_F32 ? 24
               : dtype == NN_DTYPE_F16 ? 11
                                       : 8;
    return (double)terms * 4 + 2 <= ldexp(1, bits);
}

int nn_h_compare(const char *name, const nn_tensor *got, const nn_tensor *want, double a,
                 int64_t terms, FILE *out, const char *repro)
{
    int64_t n = nn_tensor_numel(want), bad = 0, first = -1;
    double slack = sqrt((double)terms);
    for (int64_t i = 0; i < n; i++) {
        double g = nn_h_get(got, i), w = nn_h_get(want, i);
        int ok = a == 0 ? g == w : fabs(g - w) <= a * (fabs(w) + slack);
        if (!ok && bad++ == 0) first = i;
    }
    if (!bad) return 0;
    fprintf(out,
            "FAIL %s: %lld of %lld elements differ; first at %lld: got %.9g, want %.9g "
            "(tolerance %s) | repro: %s\n",
            name, (long long)bad, (long long)n, (long long)first, nn_h_get(got, first),
            nn_h_get(want, first), a == 0 ? "exact" : "scaled", repro);
    return 1;
}

int nn_h_check_written(const char *name, const nn_tensor *t, FILE *out, const char *repro)
{
    int64_t n = nn_tensor_numel(t);
    for (int64_t i = 0; i < n; i++)
        if (isnan(nn_h_get(t, i))) {
            fprintf(out, "FAIL %s: element %lld was never written (still NaN) | repro: %s\n", name,
                    (long long)i, repro);
            return 1;
        }
    return 0;
}

int nn_h_check_untouched(const char *name, const nn_tensor *t, FILE *out, const char *repro)
{
    int64_t n = nn_tensor_numel(t);
    for (int64_t i = 0; i < n; i++)
        if (!isnan(nn_h_get(t, i))) {
            fprintf(out,
                    "FAIL %s: element %lld was written (%.9g) though the call did not ask for it "
                    "| repro: %s\n",
                    name, (long long)i, nn_h_get(t, i), repro);
            return 1;
        }
    return 0;
}

static const char *const grad_names[] = {"dx", "dw", "db"};

int nn_h_grads_token(const char *t, unsigned *skip, char *err, size_t cap)
{
    if (strncmp(t, "grads=", 6)) return 0;
    *skip = NN_H_SKIP_DX | NN_H_SKIP_DW | NN_H_SKIP_DB;
    if (!strcmp(t + 6, "none")) return 1;
    char list[64];
    snprintf(list, sizeof list, "%s", t + 6);
    int named = 0;
    for (char *save = NULL, *g = strtok_r(list, "+", &save); g; g = strtok_r(NULL, "+", &save)) {
        int i = 0;
        while (i < 3 && strcmp(g, grad_names[i]))
            i++;
        if (i == 3)
            return nn_h_fail(err, cap, "token '%s': grads= takes none, or dx, dw, db joined by '+'",
                             t);
        *skip &= ~(1u << i);
        named++;
    }
    return named ? 1 : nn_h_fail(err, cap, "token '%s': grads= needs a gradient or none", t);
}

size_t nn_h_put_grads(char *buf, size_t cap, size_t len, unsigned skip)
{
    if (!skip) return len;
    const char *sep = " grads=";
    if (skip == (NN_H_SKIP_DX | NN_H_SKIP_DW | NN_H_SKIP_DB) && len < cap)
        return len + (size_t)snprintf(buf + len, cap - len, "%snone", sep);
    for (int i = 0; i < 3 && len < cap; i++)
        if (!(skip & (1u << i))) {
            len += (size_t)snprintf(buf + len, cap - len, "%s%s", sep, grad_names[i]);
            sep = "+";
        }
    return len;
}

int nn_h_verbose_shape(const char *line, char *buf, size_t cap)
{
    static const char prefix[] = "nnprim_verbose,";
    while (*line == ' ' || *line == '\t')
        line++;
    if (strncmp(line, prefix, sizeof prefix - 1) != 0) {
        snprintf(buf, cap, "%s", line);
        return 0;
    }
    /* Fields: op, backend, impl, cache, shape, ms: the shape is the fifth after the prefix. */
    const char *f = line + sizeof prefix - 1;
    for (int i = 0; i < 4 && f; i++) {
        f = strchr(f, ',');
        if (f) f++;
    }
    const char *end = f ? strchr(f, ',') : NULL;
    if (!f || !end) {
        snprintf(buf, cap, "%s", "");
        return -1;
    }
    snprintf(buf, cap, "%.*s", (int)(end - f), f);
    return 1;
}

int nn_h_fail(char *err, size_t cap, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, cap, fmt, ap);
    va_end(ap);
    return -1;
}

int nn_h_dtype_token(const char *name, nn_dtype *dtype)
{
    static const struct {
        const char *name;
        nn_dtype dtype;
    } dtypes[] = {{"f32", NN_DTYPE_F32},
                  {"f64", NN_DTYPE_F64},
                  {"f16", NN_DTYPE_F16},
                  {"bf16", NN_DTYPE_BF16}};
    for (size_t i = 0; i < sizeof dtypes / sizeof dtypes[0]; i++)
        if (!strcmp(name, dtypes[i].name)) {
            *dtype = dtypes[i].dtype;
            return 1;
        }
    return 0;
}

int nn_h_number(const char **s, int64_t *v)
{
    if (!isdigit((unsigned char)**s)) return -1;
    char *end;
    long long n = strtoll(*s, &end, 10);
    if (n < 1) return -1;
    *v = n;
    *s = end;
    return 0;
}

int nn_h_parse_list(const char *tok, const char *s, int nsp, int max, int64_t *out, int64_t min,
                    char *err, size_t cap)
{
    int64_t v[NN_MAX_RANK];
    int n = 0;
    if (max > NN_MAX_RANK) max = NN_MAX_RANK;
    for (;;) {
        char *end;
        if (!isdigit((unsigned char)*s) || n == max)
            return nn_h_fail(err, cap, "token '%s': expected a number or NxN... list", tok);
        long long x = strtoll(s, &end, 10);
        if (x < min) return nn_h_fail(err, cap, "token '%s': a value is out of range", tok);
        v[n++] = x;
        s = end;
        if (!*s) break;
        if (*s++ != 'x')
            return nn_h_fail(err, cap, "token '%s': expected a number or NxN... list", tok);
    }
    if (n != 1 && n != nsp)
        return nn_h_fail(err, cap, "token '%s': give one value or one per spatial dim", tok);
    for (int i = 0; i < nsp; i++)
        out[i] = v[n == 1 ? 0 : i];
    return 0;
}

int nn_h_case_tokens(const char *line, char *buf, size_t bufcap, char **tok, int maxtok, char *err,
                     size_t cap)
{
    if (nn_h_verbose_shape(line, buf, bufcap) < 0)
        return nn_h_fail(err, cap, "%s", "a verbose line without its shape field");
    char *hash = strchr(buf, '#');
    if (hash) *hash = 0;
    int n = 0;
    for (char *s = strtok(buf, " \t\r\n"); s && n < maxtok; s = strtok(NULL, " \t\r\n"))
        tok[n++] = s;
    return n;
}

size_t nn_h_put_list(char *buf, size_t cap, size_t len, const char *name, int nsp, const int64_t *v)
{
    if (len < cap) len += (size_t)snprintf(buf + len, cap - len, " %s", name);
    for (int i = 0; i < nsp && len < cap; i++)
        len += (size_t)snprintf(buf + len, cap - len, i ? "x%lld" : "%lld", (long long)v[i]);
    return len;
}

/* ---------------------------------------------------------------------------------------------
 * Finite differences of a piecewise-linear loss
 */

struct nn_h_fd_tamper nn_h_fd_tamper;

/* The step, relative to the element (at least 1): z is linear in it, so the step sets only the
 * rounding's share of the difference, which shrinks as the step grows. */
#define FD_STEP 0x1p-4

static double fd_loss(const struct nn_h_fd *fd)
{
    if (fd->forward(fd->arg)) return NAN;
    const double *z = fd->z->data, *r = fd->r->data;
    int64_t n = nn_tensor_numel(fd->z);
    double s = 0;
    for (int64_t j = 0; j < n; j++)
        if (!fd->active || fd->active[j]) s += r[j] * z[j];
    return s;
}

int nn_h_fd_begin(struct nn_h_fd *fd)
{
    fd->active = NULL;
    fd->mag = 0;
    int64_t nz = nn_tensor_numel(fd->z);
    /* z of the inputs' absolute values bounds the absolute products summed into each z_j, what
     * its rounding scales with; the inputs come back from copies */
    double *keep[8] = {NULL};
    int st = fd->ninputs <= 8 ? 0 : -1;
    for (int i = 0; st == 0 && i < fd->ninputs; i++) {
        double *v = fd->inputs[i]->data;
        int64_t n = nn_tensor_numel(fd->inputs[i]);
        keep[i] = malloc((size_t)n * sizeof *v);
        if (!keep[i]) {
            st = -1;
            break;
        }
        memcpy(keep[i], v, (size_t)n * sizeof *v);
        for (int64_t k = 0; k < n; k++)
            v[k] = fabs(v[k]);
    }
    if (st == 0) st = fd->forward(fd->arg);
    const double *z = fd->z->data, *r = fd->r->data;
    for (int64_t j = 0; st == 0 && j < nz; j++)
        fd->mag += fabs(r[j]) * z[j];
    for (int i = 0; i < fd->ninputs && i < 8; i++)
        if (keep[i]) {
            memcpy(fd->inputs[i]->data, keep[i],
                   (size_t)nn_tensor_numel(fd->inputs[i]) * sizeof(double));
            free(keep[i]);
        }
    if (st == 0) st = fd->forward(fd->arg);
    if (st == 0 && fd->relu) {
        fd->active = malloc((size_t)nz);
        if (!fd->active) return -1;
        for (int64_t j = 0; j < nz; j++)
            fd->active[j] = z[j] > 0;
    }
    return st;
}

void nn_h_fd_end(struct nn_h_fd *fd)
{
    free(fd->active);
    fd->active = NULL;
}

int nn_h_fd_check_activation(const struct nn_h_fd *fd, const nn_tensor *y, FILE *out,
                             const char *repro)
{
    const double *z = fd->z->data;
    for (int64_t j = 0, n = nn_tensor_numel(fd->z); j < n; j++) {
        double want = fd->relu && !(z[j] > 0) ? 0 : z[j], got = nn_h_get(y, j);
        if (got != want) {
            fprintf(out,
                    "FAIL y vs its activation of the output without it (f64): element %lld: got "
                    "%.12g, want %.12g | repro: %s\n",
                    (long long)j, got, want, repro);
            return 1;
        }
    }
    return 0;
}

int nn_h_fd_check(const struct nn_h_fd *fd, nn_tensor *t, const nn_tensor *grad,
                  const nn_tensor *start, int64_t samples, const char *name, FILE *out,
                  const char *repro)
{
    int64_t n = nn_tensor_numel(t), every = n > samples ? n / samples : 1;
    double *v = t->data;
    const double *g = grad->data, *g0 = start ? start->data : NULL;
    double tamper =
        nn_h_fd_tamper.grad && !strcmp(nn_h_fd_tamper.grad, name) ? nn_h_fd_tamper.rel : 0;
    /* rounding of L: about sqrt(terms) units of the last place of each product sum, sqrt(nz) of
     * the loss's own sum, both bounded by mag; 4x for the two evaluations and margin */
    double rounding = 4 * DBL_EPSILON *
                      (sqrt((double)fd->terms) + sqrt((double)nn_tensor_numel(fd->z))) * fd->mag;
    for (int64_t i = 0; i < n; i += every) {
        double keep = v[i], h = FD_STEP * fmax(1, fabs(keep));
        v[i] = keep + h;
        double up = fd_loss(fd), hi = v[i];
        v[i] = keep - h;
        double down = fd_loss(fd), lo = v[i];
        v[i] = keep;
        if (isnan(up) || isnan(down)) {
            fprintf(out, "FAIL %s: the finite-difference forward failed: %s: %s | repro: %s\n",
                    name, nn_status_name(nn_last_error()->status), nn_last_error()->message, repro);
            return 1;
        }
        double num = (up - down) / (hi - lo);
        double an = g[i] - (g0 ? g0[i] : 0);
        an = an * (1 + tamper) + tamper;
        double tol = 1e-9 * fabs(an) + 2 * rounding / (hi - lo);
        if (!(fabs(num - an) <= tol)) {
            fprintf(out,
                    "FAIL %s vs finite differences (f64): element %lld: analytic %.12g, numeric "
                    "%.12g (tolerance %.3g) | repro: %s\n",
                    name, (long long)i, an, num, tol, repro);
            return 1;
        }
    }
    return 0;
}

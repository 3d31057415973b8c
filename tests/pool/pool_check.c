#include "pool_check.h"

#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

nn_ctx *pc_ctx(nn_backend backend)
{
    nn_settings s;
    nn_settings_from_env(&s);
    s.backend = backend;
    s.verbose = 0;
    nn_ctx *ctx = NULL;
    nn_status st = nn_ctx_create(&ctx, &s);
    cr_assert_eq(st, NN_OK, "nn_ctx_create: %s", nn_last_error()->message);
    return ctx;
}

nn_tensor pc_empty(nn_ctx *ctx, nn_dtype dtype, int rank, const int64_t *dims)
{
    nn_tensor t;
    nn_status st = nn_tensor_empty(ctx, dtype, rank, dims, &t);
    cr_assert_eq(st, NN_OK, "nn_tensor_empty: %s", nn_last_error()->message);
    return t;
}

static uint64_t splitmix(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

void pc_fill_distinct(nn_tensor *t, uint64_t seed, double scale, double offset)
{
    int64_t n = nn_tensor_numel(t);
    int64_t *perm = malloc((size_t)n * sizeof *perm);
    cr_assert(perm);
    for (int64_t i = 0; i < n; i++)
        perm[i] = i;
    for (int64_t i = n - 1; i > 0; i--) {
        int64_t j = (int64_t)(splitmix(&seed) % (uint64_t)(i + 1));
        int64_t tmp = perm[i];
        perm[i] = perm[j];
        perm[j] = tmp;
    }
    for (int64_t i = 0; i < n; i++)
        pc_set(t, i, (double)perm[i] * scale + offset);
    free(perm);
}

static int64_t offset_of(const nn_tensor *t, int64_t lin)
{
    int64_t off = 0;
    for (int d = t->rank - 1; d >= 0; d--) {
        off += (lin % t->dims[d]) * t->strides[d];
        lin /= t->dims[d];
    }
    return off;
}

/* f16 / bf16 conversions of our own, so the tests do not lean on the library's. */
static double half_to_double(uint16_t h)
{
    int e = (h >> 10) & 31, m = h & 1023;
    double v = e == 0 ? ldexp(m, -24) : e == 31 ? (m ? NAN : INFINITY) : ldexp(m + 1024, e - 25);
    return h >> 15 ? -v : v;
}

static uint16_t double_to_half(double v)
{
    uint16_t sign = signbit(v) ? 0x8000 : 0;
    v = fabs(v);
    if (isnan(v)) return 0x7e00;
    if (v >= 65520.0) return sign | 0x7c00;
    if (v < ldexp(1, -14)) return sign | (uint16_t)nearbyint(ldexp(v, 24));
    int e;
    double f = frexp(v, &e);            /* v = f * 2^e, f in [0.5, 1) */
    double m = nearbyint(ldexp(f, 11)); /* 11 significant bits */
    if (m == 2048) {
        m = 1024;
        e++;
    }
    return sign | (uint16_t)(((e + 14) << 10) | ((int)m - 1024));
}

static double bf16_to_double(uint16_t b)
{
    union {
        uint32_t u;
        float f;
    } c = {.u = (uint32_t)b << 16};
    return c.f;
}

static uint16_t double_to_bf16(double v)
{
    union {
        float f;
        uint32_t u;
    } c = {.f = (float)v};
    if (isnan(c.f)) return 0x7fc0;
    uint32_t r = c.u + 0x7fff + ((c.u >> 16) & 1);
    return (uint16_t)(r >> 16);
}

double pc_get(const nn_tensor *t, int64_t i)
{
    int64_t o = offset_of(t, i);
    switch (t->dtype) {
    case NN_DTYPE_F32: return ((const float *)t->data)[o];
    case NN_DTYPE_F64: return ((const double *)t->data)[o];
    case NN_DTYPE_F16: return half_to_double(((const uint16_t *)t->data)[o]);
    case NN_DTYPE_BF16: return bf16_to_double(((const uint16_t *)t->data)[o]);
    }
    cr_assert_fail("bad dtype");
    return 0;
}

void pc_set(nn_tensor *t, int64_t i, double v)
{
    int64_t o = offset_of(t, i);
    switch (t->dtype) {
    case NN_DTYPE_F32: ((float *)t->data)[o] = (float)v; return;
    case NN_DTYPE_F64: ((double *)t->data)[o] = v; return;
    case NN_DTYPE_F16: ((uint16_t *)t->data)[o] = double_to_half(v); return;
    case NN_DTYPE_BF16: ((uint16_t *)t->data)[o] = double_to_bf16(v); return;
    }
    cr_assert_fail("bad dtype");
}

double pc_compare(const nn_tensor *a, const nn_tensor *b, double atol, double rtol, int64_t *worst)
{
    cr_assert_eq(a->rank, b->rank);
    for (int i = 0; i < a->rank; i++)
        cr_assert_eq(a->dims[i], b->dims[i]);
    double max = 0;
    *worst = -1;
    int64_t n = nn_tensor_numel(a);
    for (int64_t i = 0; i < n; i++) {
        double x = pc_get(a, i), y = pc_get(b, i);
        double e = (isnan(x) || isnan(y)) ? (isnan(x) && isnan(y) ? 0 : INFINITY)
                                          : fabs(x - y) / (atol + rtol * fabs(y));
        if (atol == 0 && rtol == 0) e = (x == y || (isnan(x) && isnan(y))) ? 0 : INFINITY;
        if (*worst < 0 || e > max) {
            max = e;
            *worst = i;
        }
    }
    return max;
}

nn_pool_params pc_params(int rank, nn_pool_mode mode, int64_t window, int64_t stride,
                         int64_t pad_lo, int64_t pad_hi)
{
    nn_pool_params p = {.spatial_rank = rank, .mode = mode};
    for (int i = 0; i < rank; i++) {
        p.window[i] = window;
        p.stride[i] = stride;
        p.pad_lo[i] = pad_lo;
        p.pad_hi[i] = pad_hi;
    }
    return p;
}

const char *pc_describe(const nn_pool_params *p, const nn_tensor *x)
{
    static char buf[512];
    int n = snprintf(buf, sizeof buf, "mode=%d rank=%d dtype=%s x=", (int)p->mode, p->spatial_rank,
                     nn_dtype_name(x->dtype));
    for (int i = 0; i < x->rank; i++)
        n += snprintf(buf + n, sizeof buf - (size_t)n, i ? "x%lld" : "%lld", (long long)x->dims[i]);
    for (int i = 0; i < p->spatial_rank; i++)
        n += snprintf(buf + n, sizeof buf - (size_t)n, " [w%lld s%lld p%lld/%lld]",
                      (long long)p->window[i], (long long)p->stride[i], (long long)p->pad_lo[i],
                      (long long)p->pad_hi[i]);
    return buf;
}

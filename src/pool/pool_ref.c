/* Plain-C reference pooling: loops over every output and its window, double accumulation.
 * It defines the semantics (docs/POOL.md); the cuDNN path is compared against it. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "core/alloc.h"
#include "core/elem.h"
#include "core/error.h"
#include "pool/pool_internal.h"

/* One pooling problem with the spatial dims right-aligned into three (missing leading dims have
 * size 1, window 1, stride 1, no padding), so one loop nest serves ranks 1 to 3. */
struct geom {
    int64_t n, c;
    int64_t in[3], out[3], win[3], str[3], plo[3];
    int64_t xs[4], ys[4]; /* strides of x / y: [0] for C, [1..3] spatial (N strides kept apart) */
    int64_t xsn, ysn;
};

static void make_geom(const nn_pool_params *p, const nn_tensor *x, const nn_tensor *y,
                      struct geom *g)
{
    int r = p->spatial_rank;
    g->n = x->dims[0];
    g->c = x->dims[1];
    g->xsn = x->strides[0];
    g->ysn = y->strides[0];
    g->xs[0] = x->strides[1];
    g->ys[0] = y->strides[1];
    for (int k = 0; k < 3; k++) {
        int i = k - (3 - r); /* spatial dim of params, < 0 for a padded leading dim */
        g->in[k] = i < 0 ? 1 : x->dims[2 + i];
        g->out[k] = i < 0 ? 1 : y->dims[2 + i];
        g->win[k] = i < 0 ? 1 : p->window[i];
        g->str[k] = i < 0 ? 1 : p->stride[i];
        g->plo[k] = i < 0 ? 0 : p->pad_lo[i];
        g->xs[1 + k] = i < 0 ? 0 : x->strides[2 + i];
        g->ys[1 + k] = i < 0 ? 0 : y->strides[2 + i];
    }
}

/* The products the loops use, checked once: the window volume (the mean's divisor) and the size
 * of one (n, c) plane (backward's accumulators). Offsets into x, y, dy and dx stay below their
 * validated extents, and o * stride below the padded input, so nothing else can overflow. */
static nn_status check_products(struct nn_ctx *ctx, const char *op, const struct geom *g,
                                int64_t *plane_size)
{
    int64_t vol = 1, plane = 1;
    for (int k = 0; k < 3; k++) {
        if (__builtin_mul_overflow(vol, g->win[k], &vol))
            return NN__FAIL(ctx, NN_E_OVERFLOW,
                            "%s: the window volume (the product of params.window) overflows int64",
                            op);
        if (__builtin_mul_overflow(plane, g->in[k], &plane) || (uint64_t)plane > SIZE_MAX / 8)
            return NN__FAIL(ctx, NN_E_OVERFLOW,
                            "%s: the spatial size of x (the product of its spatial dims) "
                            "overflows int64",
                            op);
    }
    if (plane_size) *plane_size = plane;
    return NN_OK;
}

/* The inputs one output window covers, clipped to the input. */
struct window {
    int64_t lo[3], hi[3]; /* input index range [lo, hi) per dim */
    int64_t count;        /* real inputs in the window */
};

static void window_of(const struct geom *g, const int64_t o[3], struct window *w)
{
    w->count = 1;
    for (int k = 0; k < 3; k++) {
        int64_t start = o[k] * g->str[k] - g->plo[k];
        int64_t end = start + g->win[k];
        w->lo[k] = start < 0 ? 0 : start;
        w->hi[k] = end > g->in[k] ? g->in[k] : end;
        w->count *= w->hi[k] - w->lo[k];
    }
}

static double divisor(const nn_pool_params *p, const struct geom *g, const struct window *w)
{
    if (p->mode == NN_POOL_MEAN_EXCLUDE_PAD) return (double)w->count;
    return (double)(g->win[0] * g->win[1] * g->win[2]);
}

/* The window's maximum and its position: the first maximum in window order (row-major over the
 * window), with NaN winning over numbers (the first NaN). */
static double argmax(const struct geom *g, const nn_tensor *x, int64_t plane,
                     const struct window *w, int64_t at[3])
{
    double best = -INFINITY;
    int found = 0;
    for (int64_t a = w->lo[0]; a < w->hi[0]; a++)
        for (int64_t b = w->lo[1]; b < w->hi[1]; b++)
            for (int64_t c = w->lo[2]; c < w->hi[2]; c++) {
                double v =
                    nn__load(x->data, x->dtype, plane + a * g->xs[1] + b * g->xs[2] + c * g->xs[3]);
                if (!found || v > best || (isnan(v) && !isnan(best))) {
                    best = v;
                    at[0] = a;
                    at[1] = b;
                    at[2] = c;
                    found = 1;
                }
            }
    return best;
}

static double window_sum(const struct geom *g, const nn_tensor *x, int64_t plane,
                         const struct window *w)
{
    double s = 0;
    for (int64_t a = w->lo[0]; a < w->hi[0]; a++)
        for (int64_t b = w->lo[1]; b < w->hi[1]; b++)
            for (int64_t c = w->lo[2]; c < w->hi[2]; c++)
                s +=
                    nn__load(x->data, x->dtype, plane + a * g->xs[1] + b * g->xs[2] + c * g->xs[3]);
    return s;
}

nn_status nn__pool_forward_ref(struct nn_ctx *ctx, const nn_pool_params *p, const nn_tensor *x,
                               nn_tensor *y)
{
    struct geom g;
    make_geom(p, x, y, &g);
    NN__TRY(check_products(ctx, "nn_pool_forward", &g, NULL));
    for (int64_t n = 0; n < g.n; n++)
        for (int64_t c = 0; c < g.c; c++) {
            int64_t xplane = n * g.xsn + c * g.xs[0], yplane = n * g.ysn + c * g.ys[0];
            int64_t o[3];
            for (o[0] = 0; o[0] < g.out[0]; o[0]++)
                for (o[1] = 0; o[1] < g.out[1]; o[1]++)
                    for (o[2] = 0; o[2] < g.out[2]; o[2]++) {
                        struct window w;
                        window_of(&g, o, &w);
                        int64_t at[3];
                        double v = p->mode == NN_POOL_MAX
                                       ? argmax(&g, x, xplane, &w, at)
                                       : window_sum(&g, x, xplane, &w) / divisor(p, &g, &w);
                        nn__store(y->data, y->dtype,
                                  yplane + o[0] * g.ys[1] + o[1] * g.ys[2] + o[2] * g.ys[3], v);
                    }
        }
    return NN_OK;
}

/* Gradients of one (n, c) plane are summed in doubles, indexed densely by spatial position, then
 * stored once: overlapping windows add up without rounding to the dtype in between. */
nn_status nn__pool_backward_ref(struct nn_ctx *ctx, const char *fn, const nn_pool_params *p,
                                const nn_tensor *x, const nn_tensor *dy, nn_tensor *dx,
                                int accumulate)
{
    struct geom g, gdx;
    make_geom(p, x, dy, &g);
    make_geom(p, dx, dy, &gdx);
    int64_t plane_size;
    NN__TRY(check_products(ctx, fn, &g, &plane_size));
    double *acc = nn__host_calloc((size_t)plane_size, sizeof *acc);
    if (!acc)
        return NN__FAIL(ctx, NN_E_OOM_HOST, "%s: out of host memory for %lld gradient accumulators",
                        fn, (long long)plane_size);
    for (int64_t n = 0; n < g.n; n++)
        for (int64_t c = 0; c < g.c; c++) {
            memset(acc, 0, (size_t)plane_size * sizeof *acc);
            int64_t xplane = n * g.xsn + c * g.xs[0], yplane = n * g.ysn + c * g.ys[0];
            int64_t o[3];
            for (o[0] = 0; o[0] < g.out[0]; o[0]++)
                for (o[1] = 0; o[1] < g.out[1]; o[1]++)
                    for (o[2] = 0; o[2] < g.out[2]; o[2]++) {
                        struct window w;
                        window_of(&g, o, &w);
                        double d =
                            nn__load(dy->data, dy->dtype,
                                     yplane + o[0] * g.ys[1] + o[1] * g.ys[2] + o[2] * g.ys[3]);
                        if (p->mode == NN_POOL_MAX) {
                            int64_t at[3];
                            argmax(&g, x, xplane, &w, at);
                            acc[(at[0] * g.in[1] + at[1]) * g.in[2] + at[2]] += d;
                        } else {
                            double share = d / divisor(p, &g, &w);
                            for (int64_t a = w.lo[0]; a < w.hi[0]; a++)
                                for (int64_t b = w.lo[1]; b < w.hi[1]; b++)
                                    for (int64_t e = w.lo[2]; e < w.hi[2]; e++)
                                        acc[(a * g.in[1] + b) * g.in[2] + e] += share;
                        }
                    }
            int64_t dxplane = n * gdx.xsn + c * gdx.xs[0];
            for (int64_t a = 0; a < g.in[0]; a++)
                for (int64_t b = 0; b < g.in[1]; b++)
                    for (int64_t e = 0; e < g.in[2]; e++) {
                        int64_t at = dxplane + a * gdx.xs[1] + b * gdx.xs[2] + e * gdx.xs[3];
                        double v = acc[(a * g.in[1] + b) * g.in[2] + e];
                        if (accumulate) v += nn__load(dx->data, dx->dtype, at);
                        nn__store(dx->data, dx->dtype, at, v);
                    }
        }
    nn__host_free(acc);
    return NN_OK;
}

/* The reference convolution: plain loops over the tensors' strides (NCHW order or
 * channels-last, both packed), double accumulation, one rounding to the dtype per output element;
 * the loops and so the sums' order do not depend on the layout. It defines the semantics the cuDNN
 * path must match. Every spatial rank is run as 3-D with leading unit dims. */
#include <string.h>

#include "conv/conv_internal.h"
#include "core/alloc.h"
#include "core/ctx.h"
#include "core/elem.h"
#include "core/error.h"

/* The problem's spatial geometry as 3-D: unused leading dims have size 1 and no padding. */
struct geom {
    int64_t in[3], filt[3], out[3], stride[3], dil[3], pad[3];
    int64_t in_sz, filt_sz, out_sz; /* products */
    int64_t cpg, kpg;               /* channels per group: input, output */
};

static void expand(const struct nn__conv_problem *p, struct geom *g)
{
    int off = 3 - p->nsp;
    for (int i = 0; i < 3; i++) {
        int j = i - off;
        g->in[i] = j < 0 ? 1 : p->in[j];
        g->filt[i] = j < 0 ? 1 : p->filt[j];
        g->out[i] = j < 0 ? 1 : p->out[j];
        g->stride[i] = j < 0 ? 1 : p->stride[j];
        g->dil[i] = j < 0 ? 1 : p->dilation[j];
        g->pad[i] = j < 0 ? 0 : p->pad_lo[j];
    }
    g->in_sz = g->in[0] * g->in[1] * g->in[2];
    g->filt_sz = g->filt[0] * g->filt[1] * g->filt[2];
    g->out_sz = g->out[0] * g->out[1] * g->out[2];
    g->cpg = p->c / p->groups;
    g->kpg = p->k / p->groups;
}

/* Where a tensor's elements are: the strides (in elements) of N, C and the 3-D spatial dims (0
 * for the leading dims a lower rank lacks), so one indexing serves NCHW and channels-last. */
struct view {
    int64_t n, c, sp[3];
};

static struct view view_of(const nn_tensor *t, int nsp)
{
    struct view v = {t->strides[0], t->strides[1], {0, 0, 0}};
    for (int i = 0; i < nsp; i++)
        v.sp[3 - nsp + i] = t->strides[2 + i];
    return v;
}

/* The packed NCDHW view of an accumulator of n x c x sizes. */
static struct view packed_view(int64_t c, const int64_t sz[3])
{
    struct view v = {c * sz[0] * sz[1] * sz[2], sz[0] * sz[1] * sz[2], {sz[1] * sz[2], sz[2], 1}};
    return v;
}

static int64_t sp_offset(const struct view *v, int64_t a, int64_t b, int64_t c)
{
    return a * v->sp[0] + b * v->sp[1] + c * v->sp[2];
}

/* Input position read by output position o through filter tap f along dim i, or -1 when it
 * falls into the padding. */
static int64_t in_pos(const struct geom *g, int i, int64_t o, int64_t f)
{
    int64_t pos = o * g->stride[i] - g->pad[i] + f * g->dil[i];
    return pos >= 0 && pos < g->in[i] ? pos : -1;
}

/* Offset within one filter (view wv) of tap (f0, f1, f2): flipped for true convolution. */
static int64_t tap_offset(const struct nn__conv_problem *p, const struct geom *g,
                          const struct view *wv, int64_t f0, int64_t f1, int64_t f2)
{
    if (p->mode == NN_CONV_CONVOLUTION) {
        f0 = g->filt[0] - 1 - f0;
        f1 = g->filt[1] - 1 - f1;
        f2 = g->filt[2] - 1 - f2;
    }
    return sp_offset(wv, f0, f1, f2);
}

/* Offset within one channel plane of x (view xv) for output position (o0, o1, o2) and tap (f0,
 * f1, f2), or -1 in the padding. */
static int64_t x_offset(const struct geom *g, const struct view *xv, const int64_t o[3], int64_t f0,
                        int64_t f1, int64_t f2)
{
    int64_t a = in_pos(g, 0, o[0], f0), b = in_pos(g, 1, o[1], f1), c = in_pos(g, 2, o[2], f2);
    if (a < 0 || b < 0 || c < 0) return -1;
    return sp_offset(xv, a, b, c);
}

/* The 3-D coordinates of row-major position lin within sizes sz. */
static void coords(const int64_t sz[3], int64_t lin, int64_t o[3])
{
    o[2] = lin % sz[2];
    o[1] = (lin / sz[2]) % sz[1];
    o[0] = lin / (sz[2] * sz[1]);
}

static void store_scaled(nn_tensor *t, int64_t i, double v, double beta)
{
    if (beta != 0) v += beta * nn__load(t->data, t->dtype, i);
    nn__store(t->data, t->dtype, i, v);
}

nn_status nn__conv_forward_ref(struct nn_ctx *ctx, const struct nn__conv_problem *p,
                               const nn_tensor *x, const nn_tensor *w, const nn_tensor *b,
                               nn_tensor *y, double alpha, double beta, struct nn__conv_note *note)
{
    (void)note;
    (void)ctx;
    struct geom g;
    expand(p, &g);
    nn_dtype dt = p->dtype;
    struct view xv = view_of(x, p->nsp), wv = view_of(w, p->nsp), yv = view_of(y, p->nsp);
    for (int64_t n = 0; n < p->n; n++)
        for (int64_t k = 0; k < p->k; k++) {
            int64_t grp = k / g.kpg;
            for (int64_t ol = 0; ol < g.out_sz; ol++) {
                int64_t o[3];
                coords(g.out, ol, o);
                double acc = 0;
                for (int64_t cg = 0; cg < g.cpg; cg++) {
                    int64_t xbase = n * xv.n + (grp * g.cpg + cg) * xv.c;
                    int64_t wbase = k * wv.n + cg * wv.c;
                    for (int64_t f0 = 0; f0 < g.filt[0]; f0++)
                        for (int64_t f1 = 0; f1 < g.filt[1]; f1++)
                            for (int64_t f2 = 0; f2 < g.filt[2]; f2++) {
                                int64_t xo = x_offset(&g, &xv, o, f0, f1, f2);
                                if (xo < 0) continue;
                                acc += nn__load(x->data, dt, xbase + xo) *
                                       nn__load(w->data, dt,
                                                wbase + tap_offset(p, &g, &wv, f0, f1, f2));
                            }
                }
                double v = alpha * acc + (b ? nn__load(b->data, dt, k) : 0);
                if (p->activation == NN_ACTIVATION_RELU && v < 0) v = 0;
                store_scaled(y, n * yv.n + k * yv.c + sp_offset(&yv, o[0], o[1], o[2]), v, beta);
            }
        }
    return NN_OK;
}

/* dx by scattering every dy element through the filter into a packed double buffer, then one
 * rounding: the transpose of the forward loop, so both share x_offset() and tap_offset(). */
nn_status nn__conv_backward_data_ref(struct nn_ctx *ctx, const struct nn__conv_problem *p,
                                     const nn_tensor *dy, const nn_tensor *w, nn_tensor *dx,
                                     double alpha, double beta, struct nn__conv_note *note)
{
    (void)note;
    struct geom g;
    expand(p, &g);
    nn_dtype dt = p->dtype;
    int64_t count = p->n * p->c * g.in_sz;
    double *acc = nn__host_calloc((size_t)count, sizeof *acc);
    if (!acc)
        return NN__FAIL(ctx, NN_E_OOM_HOST,
                        "conv_backward_data (ref): out of host memory for a %lld-element "
                        "accumulator",
                        (long long)count);
    struct view av = packed_view(p->c, g.in), wv = view_of(w, p->nsp), yv = view_of(dy, p->nsp),
                xv = view_of(dx, p->nsp);
    for (int64_t n = 0; n < p->n; n++)
        for (int64_t k = 0; k < p->k; k++) {
            int64_t grp = k / g.kpg;
            for (int64_t ol = 0; ol < g.out_sz; ol++) {
                int64_t o[3];
                coords(g.out, ol, o);
                double d =
                    nn__load(dy->data, dt, n * yv.n + k * yv.c + sp_offset(&yv, o[0], o[1], o[2]));
                if (d == 0) continue;
                for (int64_t cg = 0; cg < g.cpg; cg++) {
                    int64_t abase = n * av.n + (grp * g.cpg + cg) * av.c;
                    int64_t wbase = k * wv.n + cg * wv.c;
                    for (int64_t f0 = 0; f0 < g.filt[0]; f0++)
                        for (int64_t f1 = 0; f1 < g.filt[1]; f1++)
                            for (int64_t f2 = 0; f2 < g.filt[2]; f2++) {
                                int64_t ao = x_offset(&g, &av, o, f0, f1, f2);
                                if (ao < 0) continue;
                                acc[abase + ao] +=
                                    d * nn__load(w->data, dt,
                                                 wbase + tap_offset(p, &g, &wv, f0, f1, f2));
                            }
                }
            }
        }
    for (int64_t n = 0; n < p->n; n++)
        for (int64_t c = 0; c < p->c; c++)
            for (int64_t il = 0; il < g.in_sz; il++) {
                int64_t i[3];
                coords(g.in, il, i);
                store_scaled(dx, n * xv.n + c * xv.c + sp_offset(&xv, i[0], i[1], i[2]),
                             alpha * acc[(n * p->c + c) * g.in_sz + il], beta);
            }
    nn__host_free(acc);
    return NN_OK;
}

nn_status nn__conv_backward_filter_ref(struct nn_ctx *ctx, const struct nn__conv_problem *p,
                                       const nn_tensor *x, const nn_tensor *dy, nn_tensor *dw,
                                       double alpha, double beta, struct nn__conv_note *note)
{
    (void)note;
    (void)ctx;
    struct geom g;
    expand(p, &g);
    nn_dtype dt = p->dtype;
    struct view xv = view_of(x, p->nsp), yv = view_of(dy, p->nsp), wv = view_of(dw, p->nsp);
    for (int64_t k = 0; k < p->k; k++) {
        int64_t grp = k / g.kpg;
        for (int64_t cg = 0; cg < g.cpg; cg++)
            for (int64_t f0 = 0; f0 < g.filt[0]; f0++)
                for (int64_t f1 = 0; f1 < g.filt[1]; f1++)
                    for (int64_t f2 = 0; f2 < g.filt[2]; f2++) {
                        double acc = 0;
                        for (int64_t n = 0; n < p->n; n++) {
                            int64_t xbase = n * xv.n + (grp * g.cpg + cg) * xv.c;
                            int64_t ybase = n * yv.n + k * yv.c;
                            for (int64_t ol = 0; ol < g.out_sz; ol++) {
                                int64_t o[3];
                                coords(g.out, ol, o);
                                int64_t xo = x_offset(&g, &xv, o, f0, f1, f2);
                                if (xo < 0) continue;
                                acc += nn__load(x->data, dt, xbase + xo) *
                                       nn__load(dy->data, dt,
                                                ybase + sp_offset(&yv, o[0], o[1], o[2]));
                            }
                        }
                        int64_t wi = k * wv.n + cg * wv.c + tap_offset(p, &g, &wv, f0, f1, f2);
                        store_scaled(dw, wi, alpha * acc, beta);
                    }
    }
    return NN_OK;
}

nn_status nn__conv_backward_bias_ref(struct nn_ctx *ctx, const struct nn__conv_problem *p,
                                     const nn_tensor *dy, nn_tensor *db, double alpha, double beta,
                                     struct nn__conv_note *note)
{
    (void)note;
    (void)ctx;
    struct geom g;
    expand(p, &g);
    struct view yv = view_of(dy, p->nsp);
    for (int64_t k = 0; k < p->k; k++) {
        double acc = 0;
        for (int64_t n = 0; n < p->n; n++)
            for (int64_t ol = 0; ol < g.out_sz; ol++) {
                int64_t o[3];
                coords(g.out, ol, o);
                acc += nn__load(dy->data, p->dtype,
                                n * yv.n + k * yv.c + sp_offset(&yv, o[0], o[1], o[2]));
            }
        store_scaled(db, k, alpha * acc, beta);
    }
    return NN_OK;
}

/* The element offset of row-major position lin of t's dims, through its strides. */
static int64_t offset_of(const nn_tensor *t, int64_t lin)
{
    int64_t off = 0;
    for (int i = t->rank - 1; i >= 0; i--) {
        off += (lin % t->dims[i]) * t->strides[i];
        lin /= t->dims[i];
    }
    return off;
}

nn_status nn__conv_relu_backward_ref(struct nn_ctx *ctx, const nn_tensor *y, const nn_tensor *dy,
                                     nn_tensor *dyr, struct nn__conv_note *note)
{
    (void)note;
    (void)ctx;
    int64_t count = nn_tensor_numel(dy);
    for (int64_t i = 0; i < count; i++) {
        double v = nn__load(y->data, y->dtype, offset_of(y, i)) > 0
                       ? nn__load(dy->data, dy->dtype, offset_of(dy, i))
                       : 0;
        nn__store(dyr->data, dyr->dtype, offset_of(dyr, i), v);
    }
    return NN_OK;
}

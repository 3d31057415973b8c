/* The reference convolution: plain loops over fully packed tensors, double accumulation, one
 * rounding to the dtype per output element. It defines the semantics the cuDNN path must match.
 * Every spatial rank is run as 3-D with leading unit dims. */
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

/* Input position read by output position o through filter tap f along dim i, or -1 when it
 * falls into the padding. */
static int64_t in_pos(const struct geom *g, int i, int64_t o, int64_t f)
{
    int64_t pos = o * g->stride[i] - g->pad[i] + f * g->dil[i];
    return pos >= 0 && pos < g->in[i] ? pos : -1;
}

/* Offset within one filter of tap (f0, f1, f2): flipped for true convolution. */
static int64_t tap_offset(const struct nn__conv_problem *p, const struct geom *g, int64_t f0,
                          int64_t f1, int64_t f2)
{
    if (p->mode == NN_CONV_CONVOLUTION) {
        f0 = g->filt[0] - 1 - f0;
        f1 = g->filt[1] - 1 - f1;
        f2 = g->filt[2] - 1 - f2;
    }
    return (f0 * g->filt[1] + f1) * g->filt[2] + f2;
}

/* Offset within one channel plane of x for output position (o0, o1, o2) and tap (f0, f1, f2),
 * or -1 in the padding. */
static int64_t x_offset(const struct geom *g, const int64_t o[3], int64_t f0, int64_t f1,
                        int64_t f2)
{
    int64_t a = in_pos(g, 0, o[0], f0), b = in_pos(g, 1, o[1], f1), c = in_pos(g, 2, o[2], f2);
    if (a < 0 || b < 0 || c < 0) return -1;
    return (a * g->in[1] + b) * g->in[2] + c;
}

static void out_coords(const struct geom *g, int64_t lin, int64_t o[3])
{
    o[2] = lin % g->out[2];
    o[1] = (lin / g->out[2]) % g->out[1];
    o[0] = lin / (g->out[2] * g->out[1]);
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
    for (int64_t n = 0; n < p->n; n++)
        for (int64_t k = 0; k < p->k; k++) {
            int64_t grp = k / g.kpg;
            for (int64_t ol = 0; ol < g.out_sz; ol++) {
                int64_t o[3];
                out_coords(&g, ol, o);
                double acc = 0;
                for (int64_t cg = 0; cg < g.cpg; cg++) {
                    int64_t xbase = (n * p->c + grp * g.cpg + cg) * g.in_sz;
                    int64_t wbase = (k * g.cpg + cg) * g.filt_sz;
                    for (int64_t f0 = 0; f0 < g.filt[0]; f0++)
                        for (int64_t f1 = 0; f1 < g.filt[1]; f1++)
                            for (int64_t f2 = 0; f2 < g.filt[2]; f2++) {
                                int64_t xo = x_offset(&g, o, f0, f1, f2);
                                if (xo < 0) continue;
                                acc += nn__load(x->data, dt, xbase + xo) *
                                       nn__load(w->data, dt, wbase + tap_offset(p, &g, f0, f1, f2));
                            }
                }
                double v = alpha * acc + (b ? nn__load(b->data, dt, k) : 0);
                if (p->activation == NN_ACTIVATION_RELU && v < 0) v = 0;
                store_scaled(y, (n * p->k + k) * g.out_sz + ol, v, beta);
            }
        }
    return NN_OK;
}

/* dx by scattering every dy element through the filter into a double buffer, then one rounding:
 * the transpose of the forward loop, so both share x_offset() and tap_offset(). */
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
    for (int64_t n = 0; n < p->n; n++)
        for (int64_t k = 0; k < p->k; k++) {
            int64_t grp = k / g.kpg;
            for (int64_t ol = 0; ol < g.out_sz; ol++) {
                int64_t o[3];
                out_coords(&g, ol, o);
                double d = nn__load(dy->data, dt, (n * p->k + k) * g.out_sz + ol);
                if (d == 0) continue;
                for (int64_t cg = 0; cg < g.cpg; cg++) {
                    int64_t xbase = (n * p->c + grp * g.cpg + cg) * g.in_sz;
                    int64_t wbase = (k * g.cpg + cg) * g.filt_sz;
                    for (int64_t f0 = 0; f0 < g.filt[0]; f0++)
                        for (int64_t f1 = 0; f1 < g.filt[1]; f1++)
                            for (int64_t f2 = 0; f2 < g.filt[2]; f2++) {
                                int64_t xo = x_offset(&g, o, f0, f1, f2);
                                if (xo < 0) continue;
                                acc[xbase + xo] +=
                                    d *
                                    nn__load(w->data, dt, wbase + tap_offset(p, &g, f0, f1, f2));
                            }
                }
            }
        }
    for (int64_t i = 0; i < count; i++)
        store_scaled(dx, i, alpha * acc[i], beta);
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
    for (int64_t k = 0; k < p->k; k++) {
        int64_t grp = k / g.kpg;
        for (int64_t cg = 0; cg < g.cpg; cg++)
            for (int64_t f0 = 0; f0 < g.filt[0]; f0++)
                for (int64_t f1 = 0; f1 < g.filt[1]; f1++)
                    for (int64_t f2 = 0; f2 < g.filt[2]; f2++) {
                        double acc = 0;
                        for (int64_t n = 0; n < p->n; n++) {
                            int64_t xbase = (n * p->c + grp * g.cpg + cg) * g.in_sz;
                            int64_t ybase = (n * p->k + k) * g.out_sz;
                            for (int64_t ol = 0; ol < g.out_sz; ol++) {
                                int64_t o[3];
                                out_coords(&g, ol, o);
                                int64_t xo = x_offset(&g, o, f0, f1, f2);
                                if (xo < 0) continue;
                                acc += nn__load(x->data, dt, xbase + xo) *
                                       nn__load(dy->data, dt, ybase + ol);
                            }
                        }
                        int64_t wi = (k * g.cpg + cg) * g.filt_sz + tap_offset(p, &g, f0, f1, f2);
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
    int64_t plane = 1;
    for (int i = 0; i < p->nsp; i++)
        plane *= p->out[i];
    for (int64_t k = 0; k < p->k; k++) {
        double acc = 0;
        for (int64_t n = 0; n < p->n; n++)
            for (int64_t i = 0; i < plane; i++)
                acc += nn__load(dy->data, p->dtype, (n * p->k + k) * plane + i);
        store_scaled(db, k, alpha * acc, beta);
    }
    return NN_OK;
}

nn_status nn__conv_relu_backward_ref(struct nn_ctx *ctx, const nn_tensor *y, const nn_tensor *dy,
                                     nn_tensor *dyr, struct nn__conv_note *note)
{
    (void)note;
    (void)ctx;
    int64_t count = nn_tensor_numel(dy);
    for (int64_t i = 0; i < count; i++) {
        double v = nn__load(y->data, y->dtype, i) > 0 ? nn__load(dy->data, dy->dtype, i) : 0;
        nn__store(dyr->data, dyr->dtype, i, v);
    }
    return NN_OK;
}

/* Plain-C reference of softmax, log-softmax and the softmax cross-entropy: loops over each
 * (n, s) row of C values in double, the maximum subtracted first. It defines the semantics the
 * cuDNN path is compared against. */
#include <math.h>
#include <string.h>

#include "core/elem.h"
#include "core/error.h"
#include "core/tensor_util.h"
#include "softmax/softmax_internal.h"

/* Packed n x c x s: element (n, c, s). */
static int64_t at(const struct nn__softmax_problem *p, int64_t n, int64_t c, int64_t s)
{
    return (n * p->c + c) * p->s + s;
}

/* max_c x and log sum_c exp(x - max) of the row (n, s). */
static void row_stats(const struct nn__softmax_problem *p, const nn_tensor *x, int64_t n, int64_t s,
                      double *max, double *lse)
{
    double m = -INFINITY, sum = 0;
    for (int64_t c = 0; c < p->c; c++) {
        double v = nn__load(x->data, p->dtype, at(p, n, c, s));
        if (v > m) m = v;
    }
    for (int64_t c = 0; c < p->c; c++)
        sum += exp(nn__load(x->data, p->dtype, at(p, n, c, s)) - m);
    *max = m;
    *lse = log(sum);
}

static nn_status forward_ref(struct nn_ctx *ctx, const struct nn__softmax_problem *p,
                             const nn_tensor *x, nn_tensor *y, struct nn__softmax_note *note)
{
    (void)ctx;
    (void)note;
    for (int64_t n = 0; n < p->n; n++)
        for (int64_t s = 0; s < p->s; s++) {
            double m, lse;
            row_stats(p, x, n, s, &m, &lse);
            for (int64_t c = 0; c < p->c; c++) {
                double l = nn__load(x->data, p->dtype, at(p, n, c, s)) - m - lse;
                nn__store(y->data, p->dtype, at(p, n, c, s),
                          p->mode == NN_SOFTMAX_MODE_LOG ? l : exp(l));
            }
        }
    return NN_OK;
}

static nn_status backward_ref(struct nn_ctx *ctx, const struct nn__softmax_problem *p,
                              const nn_tensor *y, const nn_tensor *dy, nn_tensor *dx,
                              struct nn__softmax_note *note)
{
    (void)ctx;
    (void)note;
    nn_dtype dt = p->dtype;
    int log_mode = p->mode == NN_SOFTMAX_MODE_LOG;
    int acc = (p->accumulate & NN_ACCUMULATE_DX) != 0;
    for (int64_t n = 0; n < p->n; n++)
        for (int64_t s = 0; s < p->s; s++) {
            double sum = 0; /* sum dy (log) or sum dy * y (softmax) */
            for (int64_t c = 0; c < p->c; c++) {
                int64_t k = at(p, n, c, s);
                double d = nn__load(dy->data, dt, k);
                sum += log_mode ? d : d * nn__load(y->data, dt, k);
            }
            for (int64_t c = 0; c < p->c; c++) {
                int64_t k = at(p, n, c, s);
                double yv = nn__load(y->data, dt, k), d = nn__load(dy->data, dt, k);
                double g = log_mode ? d - exp(yv) * sum : yv * (d - sum);
                nn__store(dx->data, dt, k, acc ? nn__load(dx->data, dt, k) + g : g);
            }
        }
    return NN_OK;
}

static nn_status read_targets_ref(struct nn_ctx *ctx, const char *fn, const void *data,
                                  nn_index_type type, int64_t count, int64_t *out)
{
    /* A device pointer here would crash the host loop below. */
    NN__TRY(nn__check_host_ptr(ctx, fn, data, "targets.data"));
    if (type == NN_INDEX_I64) {
        memcpy(out, data, (size_t)count * sizeof *out);
    } else {
        const int32_t *t = data;
        for (int64_t i = 0; i < count; i++)
            out[i] = t[i];
    }
    return NN_OK;
}

static nn_status xent_forward_ref(struct nn_ctx *ctx, const struct nn__softmax_problem *p,
                                  const nn_tensor *x, const int64_t *t, nn_tensor *loss,
                                  struct nn__xent_saved **saved_out, struct nn__softmax_note *note)
{
    (void)ctx;
    (void)note;
    if (saved_out) *saved_out = NULL; /* backward recomputes from x */
    for (int64_t n = 0; n < p->n; n++)
        for (int64_t s = 0; s < p->s; s++) {
            double m, lse;
            row_stats(p, x, n, s, &m, &lse);
            int64_t i = n * p->s + s;
            double xt = nn__load(x->data, p->dtype, at(p, n, t[i], s));
            nn__store(loss->data, p->dtype, i, m + lse - xt);
        }
    return NN_OK;
}

static nn_status xent_backward_ref(struct nn_ctx *ctx, const struct nn__softmax_problem *p,
                                   const nn_tensor *x, const int64_t *t,
                                   struct nn__xent_saved *saved, const nn_tensor *dloss,
                                   nn_tensor *dx, struct nn__softmax_note *note)
{
    (void)ctx;
    (void)saved;
    (void)note;
    int acc = (p->accumulate & NN_ACCUMULATE_DX) != 0;
    for (int64_t n = 0; n < p->n; n++)
        for (int64_t s = 0; s < p->s; s++) {
            double m, lse;
            row_stats(p, x, n, s, &m, &lse);
            int64_t i = n * p->s + s;
            double dl = nn__load(dloss->data, p->dtype, i);
            for (int64_t c = 0; c < p->c; c++) {
                int64_t k = at(p, n, c, s);
                double prob = exp(nn__load(x->data, p->dtype, k) - m - lse);
                double g = (prob - (c == t[i])) * dl;
                nn__store(dx->data, p->dtype, k, acc ? nn__load(dx->data, p->dtype, k) + g : g);
            }
        }
    return NN_OK;
}

static void saved_free_ref(struct nn_ctx *ctx, struct nn__xent_saved *saved)
{
    (void)ctx;
    (void)saved;
}

/* Host memory only: no pool bytes. */
static nn_status workspace_ref(struct nn_ctx *ctx, const struct nn__softmax_problem *p,
                               int backward, size_t *bytes)
{
    (void)ctx, (void)p, (void)backward;
    *bytes = 0;
    return NN_OK;
}

const struct nn__softmax_backend nn__softmax_backend_ref = {
    "ref",
    forward_ref,
    backward_ref,
    read_targets_ref,
    xent_forward_ref,
    xent_backward_ref,
    saved_free_ref,
    workspace_ref,
};

/* Plain-C reference of layer normalisation: loops over each row of d elements in double, the
 * mean first and then the biased variance from it (two passes, as PyTorch's CPU kernel). It
 * defines the semantics the GPU path is compared against. */
#include <math.h>
#include <string.h>

#include "core/alloc.h"
#include "core/elem.h"
#include "core/error.h"
#include "layernorm/layernorm_internal.h"

/* stats[2 r] is row r's mean, stats[2 r + 1] its rstd. */
struct nn__layernorm_saved {
    double *stats;
};

static void row_stats(const struct nn__layernorm_problem *p, const nn_tensor *x, int64_t r,
                      double *mean, double *rstd)
{
    double s = 0, v = 0;
    for (int64_t i = 0; i < p->d; i++)
        s += nn__load(x->data, p->dtype, r * p->d + i);
    double m = s / (double)p->d;
    for (int64_t i = 0; i < p->d; i++) {
        double c = nn__load(x->data, p->dtype, r * p->d + i) - m;
        v += c * c;
    }
    *mean = m;
    *rstd = 1 / sqrt(v / (double)p->d + p->eps);
}

static double param(const nn_tensor *t, nn_dtype dt, int64_t i, double none)
{
    return t ? nn__load(t->data, dt, i) : none;
}

static void saved_free_ref(struct nn_ctx *ctx, struct nn__layernorm_saved *s)
{
    (void)ctx;
    if (!s) return;
    nn__host_free(s->stats);
    nn__host_free(s);
}

static nn_status forward_ref(struct nn_ctx *ctx, const char *fn,
                             const struct nn__layernorm_problem *p, const nn_tensor *x,
                             const nn_tensor *gamma, const nn_tensor *beta, nn_tensor *y,
                             struct nn__layernorm_saved **saved_out,
                             struct nn__layernorm_note *note)
{
    (void)note;
    struct nn__layernorm_saved *s = NULL;
    if (saved_out) {
        s = nn__host_calloc(1, sizeof *s);
        if (s) s->stats = nn__host_calloc((size_t)p->m * 2, sizeof *s->stats);
        if (!s || !s->stats) {
            saved_free_ref(ctx, s);
            return NN__FAIL(ctx, NN_E_OOM_HOST, "%s: out of host memory for the row statistics",
                            fn);
        }
    }
    nn_dtype dt = p->dtype;
    for (int64_t r = 0; r < p->m; r++) {
        double mean, rstd;
        row_stats(p, x, r, &mean, &rstd);
        for (int64_t i = 0; i < p->d; i++) {
            int64_t k = r * p->d + i;
            double xhat = (nn__load(x->data, dt, k) - mean) * rstd;
            nn__store(y->data, dt, k, xhat * param(gamma, dt, i, 1) + param(beta, dt, i, 0));
        }
        if (s) {
            s->stats[2 * r] = mean;
            s->stats[2 * r + 1] = rstd;
        }
    }
    if (saved_out) *saved_out = s;
    return NN_OK;
}

static void store(nn_tensor *t, nn_dtype dt, int64_t k, double v, int acc)
{
    nn__store(t->data, dt, k, acc ? nn__load(t->data, dt, k) + v : v);
}

static nn_status backward_ref(struct nn_ctx *ctx, const char *fn,
                              const struct nn__layernorm_problem *p, const nn_tensor *x,
                              const nn_tensor *gamma, const struct nn__layernorm_saved *saved,
                              const nn_tensor *dy, nn_tensor *dx, nn_tensor *dgamma,
                              nn_tensor *dbeta, struct nn__layernorm_note *note)
{
    (void)note;
    nn_dtype dt = p->dtype;
    /* dgamma and dbeta are sums over rows: kept in double until every row is in */
    double *dg = NULL, *db = NULL;
    if (dgamma || dbeta) {
        dg = nn__host_calloc((size_t)p->d * 2, sizeof *dg);
        if (!dg)
            return NN__FAIL(ctx, NN_E_OOM_HOST, "%s: out of host memory for the sums over rows",
                            fn);
        db = dg + p->d;
    }
    for (int64_t r = 0; r < p->m; r++) {
        double mean = saved->stats[2 * r], rstd = saved->stats[2 * r + 1];
        double a = 0, b = 0; /* sum g and sum g * xhat, g = dy * gamma */
        for (int64_t i = 0; i < p->d; i++) {
            int64_t k = r * p->d + i;
            double xhat = (nn__load(x->data, dt, k) - mean) * rstd, d = nn__load(dy->data, dt, k);
            double g = d * param(gamma, dt, i, 1);
            a += g;
            b += g * xhat;
            if (dg) {
                dg[i] += d * xhat;
                db[i] += d;
            }
        }
        if (!dx) continue;
        double n = (double)p->d;
        for (int64_t i = 0; i < p->d; i++) {
            int64_t k = r * p->d + i;
            double xhat = (nn__load(x->data, dt, k) - mean) * rstd;
            double g = nn__load(dy->data, dt, k) * param(gamma, dt, i, 1);
            store(dx, dt, k, rstd * (g - a / n - xhat * b / n),
                  (p->accumulate & NN_ACCUMULATE_DX) != 0);
        }
    }
    for (int64_t i = 0; dg && i < p->d; i++) {
        if (dgamma) store(dgamma, dt, i, dg[i], (p->accumulate & NN_ACCUMULATE_DW) != 0);
        if (dbeta) store(dbeta, dt, i, db[i], (p->accumulate & NN_ACCUMULATE_DB) != 0);
    }
    nn__host_free(dg);
    return NN_OK;
}

const struct nn__layernorm_backend nn__layernorm_backend_ref = {"ref", forward_ref, backward_ref,
                                                                saved_free_ref};

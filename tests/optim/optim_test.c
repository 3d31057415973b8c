#include "optim_test.h"

#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

nn_ctx *ot_ctx(nn_backend b, int verbose)
{
    nn_settings s;
    cr_assert_eq(nn_settings_from_env(&s), NN_OK, "%s", nn_last_error()->message);
    s.backend = b;
    s.verbose = verbose;
    s.plan_cache_file = NULL;
    nn_ctx *ctx = NULL;
    cr_assert_eq(nn_ctx_create(&ctx, &s), NN_OK, "%s", nn_last_error()->message);
    return ctx;
}

static int64_t count_of(int rank, const int64_t *dims)
{
    int64_t n = 1;
    for (int i = 0; i < rank; i++)
        n *= dims[i];
    return n;
}

/* A host view of buf with t's dtype and dims. */
static nn_tensor host_view(const nn_tensor *t, void *buf)
{
    nn_tensor h = *t;
    h.data = buf;
    h.space = NN_SPACE_HOST;
    h.device = -1;
    return h;
}

void ot_write(nn_ctx *ctx, nn_tensor *t, const double *vals)
{
    int64_t n = count_of(t->rank, t->dims);
    void *buf = malloc((size_t)n * nn_dtype_size(t->dtype));
    cr_assert_not_null(buf);
    for (int64_t i = 0; i < n; i++) {
        if (t->dtype == NN_DTYPE_F32)
            ((float *)buf)[i] = (float)vals[i];
        else
            ((double *)buf)[i] = vals[i];
    }
    nn_tensor h = host_view(t, buf);
    cr_assert_eq(nn_tensor_copy(ctx, t, &h), NN_OK, "%s", nn_last_error()->message);
    cr_assert_eq(nn_ctx_synchronize(ctx), NN_OK, "%s", nn_last_error()->message);
    free(buf);
}

nn_tensor ot_tensor(nn_ctx *ctx, nn_dtype dt, int rank, const int64_t *dims, const double *vals)
{
    nn_tensor t;
    cr_assert_eq(nn_tensor_empty(ctx, dt, rank, dims, &t), NN_OK, "%s", nn_last_error()->message);
    ot_write(ctx, &t, vals);
    return t;
}

void ot_read(nn_ctx *ctx, const nn_tensor *t, double *out)
{
    int64_t n = count_of(t->rank, t->dims);
    void *buf = malloc((size_t)n * nn_dtype_size(t->dtype));
    cr_assert_not_null(buf);
    nn_tensor h = host_view(t, buf);
    cr_assert_eq(nn_ctx_synchronize(ctx), NN_OK, "%s", nn_last_error()->message);
    cr_assert_eq(nn_tensor_copy(ctx, &h, t), NN_OK, "%s", nn_last_error()->message);
    for (int64_t i = 0; i < n; i++)
        out[i] = t->dtype == NN_DTYPE_F32 ? ((float *)buf)[i] : ((double *)buf)[i];
    free(buf);
}

void ot_uniform(uint64_t seed, double *out, int64_t n)
{
    uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
    for (int64_t i = 0; i < n; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        out[i] = (double)(x >> 11) / 4503599627370496.0 - 1.0; /* 2^52: [-1, 1) */
    }
}

static double **arrays(int n, const int64_t *count)
{
    double **a = calloc((size_t)n, sizeof *a);
    cr_assert_not_null(a);
    for (int i = 0; i < n; i++) {
        a[i] = calloc((size_t)count[i], sizeof **a);
        cr_assert_not_null(a[i]);
    }
    return a;
}

static void free_arrays(double **a, int n)
{
    for (int i = 0; i < n; i++)
        free(a[i]);
    free(a);
}

void ot_plain_init(struct ot_plain *o, const nn_optim_params *p, int n, const int64_t *count,
                   double **param)
{
    memset(o, 0, sizeof *o);
    o->p = *p;
    o->n = n;
    o->count = count;
    o->param = param;
    o->buf = arrays(n, count);
    o->m = arrays(n, count);
    o->v = arrays(n, count);
}

void ot_plain_free(struct ot_plain *o)
{
    free_arrays(o->buf, o->n);
    free_arrays(o->m, o->n);
    free_arrays(o->v, o->n);
}

/* torch.nn.utils.clip_grad_norm_: the factor the gradients are multiplied by (1 when none). */
static double clip_factor(const struct ot_plain *o, double *const *grads)
{
    if (o->p.max_grad_norm == 0) return 1;
    double sq = 0;
    for (int i = 0; i < o->n; i++)
        for (int64_t k = 0; k < o->count[i]; k++)
            sq += grads[i][k] * grads[i][k];
    double c = o->p.max_grad_norm / (sqrt(sq) + 1e-6);
    return c < 1 ? c : 1;
}

static void plain_sgd(struct ot_plain *o, int i, int64_t k, double g)
{
    const nn_optim_params *p = &o->p;
    double *param = &o->param[i][k], *buf = &o->buf[i][k];
    if (p->weight_decay != 0) g += p->weight_decay * *param; /* grad.add(param, alpha=wd) */
    if (p->momentum != 0) {
        if (o->step == 0)
            *buf = g; /* torch.clone(grad) */
        else
            *buf = *buf * p->momentum + (1 - p->dampening) * g;
        if (p->nesterov)
            g = g + p->momentum * *buf;
        else
            g = *buf;
    }
    *param += -p->lr * g; /* param.add_(grad, alpha=-lr) */
}

static void plain_adam(struct ot_plain *o, int i, int64_t k, double g)
{
    const nn_optim_params *p = &o->p;
    double *param = &o->param[i][k], *m = &o->m[i][k], *v = &o->v[i][k];
    double t = (double)(o->step + 1);
    if (p->kind == NN_OPTIM_ADAMW)
        *param *= 1 - p->lr * p->weight_decay;
    else if (p->weight_decay != 0)
        g += p->weight_decay * *param;
    double w = 1 - p->beta1; /* exp_avg.lerp_(grad, 1 - beta1), ATen's two forms */
    *m = w < 0.5 ? *m + w * (g - *m) : g - (g - *m) * (1 - w);
    *v = *v * p->beta2 + (1 - p->beta2) * g * g;
    double bc1 = 1 - pow(p->beta1, t), bc2 = 1 - pow(p->beta2, t);
    double denom = sqrt(*v) / sqrt(bc2) + p->eps;
    *param += -(p->lr / bc1) * *m / denom; /* addcdiv_(exp_avg, denom, value=-step_size) */
}

void ot_plain_step(struct ot_plain *o, double *const *grads)
{
    double c = clip_factor(o, grads);
    for (int i = 0; i < o->n; i++)
        for (int64_t k = 0; k < o->count[i]; k++) {
            double g = grads[i][k] * c;
            if (o->p.kind == NN_OPTIM_SGD)
                plain_sgd(o, i, k, g);
            else
                plain_adam(o, i, k, g);
        }
    o->step++;
}

double ot_rel_err(const double *a, const double *b, int64_t n)
{
    double most = 0, scale = 1e-300;
    for (int64_t i = 0; i < n; i++)
        if (fabs(b[i]) > scale) scale = fabs(b[i]);
    for (int64_t i = 0; i < n; i++) {
        double e = isnan(a[i]) != isnan(b[i]) ? INFINITY : fabs(a[i] - b[i]);
        if (e > most) most = e;
    }
    return most / scale;
}

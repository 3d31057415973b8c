/* The reference optimizer: plain loops over host tensors, in double, with the formulas of
 * optim_formula.h (the GPU kernels' too). */
#include <string.h>

#include "core/alloc.h"
#include "core/error.h"
#include "optim/optim_internal.h"

static double get(const void *data, nn_dtype dt, int64_t k)
{
    return dt == NN_DTYPE_F32 ? (double)((const float *)data)[k] : ((const double *)data)[k];
}

static void put(void *data, nn_dtype dt, int64_t k, double v)
{
    if (dt == NN_DTYPE_F32)
        ((float *)data)[k] = (float)v;
    else
        ((double *)data)[k] = v;
}

/* State buffer j of parameter i. */
static void *state_of(const struct nn_optim *opt, int i, int j)
{
    return (char *)opt->host_state + opt->state_off[i * opt->states + j];
}

static nn_status create_ref(struct nn_ctx *ctx, const char *fn, struct nn_optim *opt)
{
    opt->step = 0;
    if (!opt->state_bytes) return NN_OK;
    opt->host_state = nn__host_calloc(1, opt->state_bytes);
    if (!opt->host_state)
        return NN__FAIL(ctx, NN_E_OOM_HOST, "%s: out of host memory for the state (%zu bytes)", fn,
                        opt->state_bytes);
    return NN_OK;
}

/* clip_grad_norm_'s coefficient: the sum of every gradient element's square, in order. */
static double clip_coef(const struct nn_optim *opt, const nn_tensor *grads)
{
    double s = 0;
    for (int i = 0; i < opt->n; i++) {
        int64_t count = nn_tensor_numel(&grads[i]);
        for (int64_t k = 0; k < count; k++) {
            double g = get(grads[i].data, opt->dtype, k);
            s += g * g;
        }
    }
    return nn__optim_clip_coef(opt->hyper.max_grad_norm, s);
}

static void sgd_tensor(const struct nn_optim *opt, int i, const nn_tensor *grad, double coef)
{
    nn_dtype dt = opt->dtype;
    void *p = opt->p[i].data, *buf = opt->states ? state_of(opt, i, 0) : NULL;
    int64_t count = nn_tensor_numel(grad);
    for (int64_t k = 0; k < count; k++) {
        double g = nn__optim_clipped(get(grad->data, dt, k), coef);
        double b = buf && opt->step > 0 ? get(buf, dt, k) : 0;
        put(p, dt, k,
            nn__optim_sgd(&opt->hyper, opt->params.nesterov, opt->step == 0, get(p, dt, k), g, &b));
        if (buf) put(buf, dt, k, b);
    }
}

static void adam_tensor(const struct nn_optim *opt, int i, const nn_tensor *grad, double coef,
                        double step_size, double bc2_sqrt)
{
    nn_dtype dt = opt->dtype;
    int decoupled = opt->params.kind == NN_OPTIM_ADAMW;
    void *p = opt->p[i].data, *ms = state_of(opt, i, 0), *vs = state_of(opt, i, 1);
    int64_t count = nn_tensor_numel(grad);
    for (int64_t k = 0; k < count; k++) {
        double g = nn__optim_clipped(get(grad->data, dt, k), coef);
        double m = get(ms, dt, k), v = get(vs, dt, k);
        put(p, dt, k,
            nn__optim_adam(&opt->hyper, decoupled, step_size, bc2_sqrt, get(p, dt, k), g, &m, &v));
        put(ms, dt, k, m);
        put(vs, dt, k, v);
    }
}

static nn_status step_ref(struct nn_ctx *ctx, struct nn_optim *opt, const nn_tensor *grads,
                          struct nn__optim_note *note)
{
    (void)ctx;
    double coef = opt->hyper.max_grad_norm > 0 ? clip_coef(opt, grads) : 1;
    double step_size = 0, bc2_sqrt = 1;
    if (opt->params.kind != NN_OPTIM_SGD)
        nn__optim_adam_scalars(&opt->hyper, (double)(opt->step + 1), &step_size, &bc2_sqrt);
    for (int i = 0; i < opt->n; i++) {
        if (opt->params.kind == NN_OPTIM_SGD)
            sgd_tensor(opt, i, &grads[i], coef);
        else
            adam_tensor(opt, i, &grads[i], coef, step_size, bc2_sqrt);
    }
    opt->step++;
    strcpy(note->impl, "ref");
    return NN_OK;
}

/* The steps read opt->hyper, whose lr optim.c sets after this. */
static nn_status set_lr_ref(struct nn_ctx *ctx, struct nn_optim *opt, double lr)
{
    (void)ctx, (void)opt, (void)lr;
    return NN_OK;
}

static nn_status get_step_ref(struct nn_ctx *ctx, struct nn_optim *opt, int64_t *step)
{
    (void)ctx;
    *step = opt->step;
    return NN_OK;
}

static nn_status reset_ref(struct nn_ctx *ctx, struct nn_optim *opt)
{
    (void)ctx;
    if (opt->host_state) memset(opt->host_state, 0, opt->state_bytes);
    opt->step = 0;
    return NN_OK;
}

static void destroy_ref(struct nn_ctx *ctx, struct nn_optim *opt)
{
    (void)ctx;
    nn__host_free(opt->host_state);
    opt->host_state = NULL;
}

const struct nn__optim_backend nn__optim_backend_ref = {
    "ref", create_ref, step_ref, set_lr_ref, get_step_ref, reset_ref, destroy_ref};

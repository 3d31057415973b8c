/* Catalogue rows: the optimizer (include/nnprim/optim.h). Each row makes two parameters and two
 * gradients (f32 2x3, in the context's memory) and Adam's parameters, and frees them after;
 * rows that need an optimizer make one on those parameters. */
#include <math.h>
#include <string.h>

#include "catalogue.h"
#include "catalogue_family.h"

struct op {
    nn_optim_params p;
    nn_tensor params[2], grads[2];
};

static const int64_t X[] = {2, 3};

static void op_setup(struct cat *c, struct op *o)
{
    cr_assert_eq(nn_optim_params_default(&o->p, NN_OPTIM_ADAM), NN_OK, "fixture");
    for (int i = 0; i < 2; i++) {
        o->params[i] = cat_tensor(c, NN_DTYPE_F32, 2, X, 301 + (uint64_t)i);
        o->grads[i] = cat_tensor(c, NN_DTYPE_F32, 2, X, 311 + (uint64_t)i);
    }
}

static void op_free(struct cat *c, struct op *o)
{
    CAT_FREE_TENSORS(c, &o->params[0], &o->grads[0], &o->params[1], &o->grads[1]);
}

/* A row body gets the operands; rows change copies of the views, never o's own. */
#define CALL(fname) CAT_FAMILY_CALL(fname, struct op, o, op_setup, op_free)

/* nn_optim_create on the fixture's parameters, with params[i] replaced by t (i < 0: none). */
static nn_status create_with(struct cat *c, struct op *o, int i, const nn_tensor *t)
{
    nn_tensor ps[2] = {o->params[0], o->params[1]};
    if (i >= 0) ps[i] = *t;
    nn_optim *opt = (nn_optim *)c;
    nn_status st = nn_optim_create(c->ctx, &o->p, 2, ps, &opt);
    if (st == NN_OK) {
        cr_assert_eq(nn_optim_free(c->ctx, opt), NN_OK, "%s", nn_last_error()->message);
    } else {
        cr_assert_null(opt, "*out must be NULL after a failure");
    }
    return st;
}

/* An optimizer of ctx on the fixture's parameters (the row frees it, or frees it to test). */
static nn_optim *make(nn_ctx *ctx, struct op *o)
{
    nn_optim *opt = NULL;
    cr_assert_eq(nn_optim_create(ctx, &o->p, 2, o->params, &opt), NN_OK, "fixture: %s",
                 nn_last_error()->message);
    return opt;
}

/* A step with grads[i] replaced by t (i < 0: none); a refused step must leave the parameters and
 * the step count as they were. */
static nn_status step_with(struct cat *c, struct op *o, int i, const nn_tensor *t)
{
    nn_optim *opt = make(c->ctx, o);
    nn_tensor gs[2] = {o->grads[0], o->grads[1]};
    if (i >= 0) gs[i] = *t;
    double before[2][6], after[2][6];
    for (int k = 0; k < 2; k++)
        cat_read(c, &o->params[k], before[k]);
    nn_status st = nn_optim_step(c->ctx, opt, 2, gs);
    int64_t steps = -1;
    cr_assert_eq(nn_optim_get_step(c->ctx, opt, &steps), NN_OK, "%s", nn_last_error()->message);
    cr_assert_eq(steps, st == NN_OK ? 1 : 0, "the step count after the row: %lld",
                 (long long)steps);
    for (int k = 0; st != NN_OK && k < 2; k++) {
        cat_read(c, &o->params[k], after[k]);
        for (int j = 0; j < 6; j++)
            cr_assert_eq(after[k][j], before[k][j], "a refused step wrote params[%d][%d]", k, j);
    }
    cr_assert_eq(nn_optim_free(c->ctx, opt), NN_OK, "%s", nn_last_error()->message);
    return st;
}

/* t's storage read as 2x3 with column-major strides: valid, not packed. */
static nn_tensor strided(const nn_tensor *t)
{
    nn_tensor v = *t;
    v.strides[0] = 1;
    v.strides[1] = 2;
    return v;
}

/* ---- nn_optim_params_default ---- */

static nn_status pd_null(struct cat *c)
{
    (void)c;
    return nn_optim_params_default(NULL, NN_OPTIM_SGD);
}
static nn_status pd_kind0(struct cat *c)
{
    (void)c;
    nn_optim_params p;
    return nn_optim_params_default(&p, (nn_optim_kind)0);
}
static nn_status pd_kind4(struct cat *c)
{
    (void)c;
    nn_optim_params p;
    return nn_optim_params_default(&p, (nn_optim_kind)4);
}

/* ---- nn_optim_create: arguments and parameters ---- */

CALL(c_null_ctx)
{
    (void)c;
    nn_optim *opt = (nn_optim *)o;
    nn_status st = nn_optim_create(NULL, &o->p, 2, o->params, &opt);
    cr_assert_null(opt, "*out must be NULL after a failure");
    return st;
}
CALL(c_null_p)
{
    nn_optim *opt;
    return nn_optim_create(c->ctx, NULL, 2, o->params, &opt);
}
CALL(c_null_params)
{
    nn_optim *opt;
    return nn_optim_create(c->ctx, &o->p, 2, NULL, &opt);
}
CALL(c_null_out)
{
    return nn_optim_create(c->ctx, &o->p, 2, o->params, NULL);
}
CALL(c_n0)
{
    nn_optim *opt;
    return nn_optim_create(c->ctx, &o->p, 0, o->params, &opt);
}
CALL(c_n_negative)
{
    nn_optim *opt;
    return nn_optim_create(c->ctx, &o->p, -3, o->params, &opt);
}
CALL(c_one_of_two)
{
    nn_optim *opt = NULL;
    nn_status st = nn_optim_create(c->ctx, &o->p, 1, o->params, &opt);
    if (st == NN_OK) cr_assert_eq(nn_optim_free(c->ctx, opt), NN_OK);
    return st;
}
CALL(c_kind0)
{
    o->p.kind = (nn_optim_kind)0;
    return create_with(c, o, -1, NULL);
}
CALL(c_kind4)
{
    o->p.kind = (nn_optim_kind)4;
    return create_with(c, o, -1, NULL);
}

/* A field set to v. */
#define FIELD_ROW(fname, field, v)                                                                 \
    CALL(fname)                                                                                    \
    {                                                                                              \
        o->p.field = (v);                                                                          \
        return create_with(c, o, -1, NULL);                                                        \
    }
FIELD_ROW(c_lr_negative, lr, -1e-3)
FIELD_ROW(c_lr_nan, lr, NAN)
FIELD_ROW(c_lr_inf, lr, INFINITY)
FIELD_ROW(c_lr_zero, lr, 0)
FIELD_ROW(c_momentum_negative, momentum, -0.5)
FIELD_ROW(c_momentum_nan, momentum, NAN)
FIELD_ROW(c_dampening_negative, dampening, -0.25)
FIELD_ROW(c_dampening_above_1, dampening, 1.5)
FIELD_ROW(c_dampening_1, dampening, 1)
FIELD_ROW(c_weight_decay_negative, weight_decay, -1e-4)
FIELD_ROW(c_weight_decay_nan, weight_decay, NAN)
FIELD_ROW(c_beta1_1, beta1, 1)
FIELD_ROW(c_beta1_negative, beta1, -0.1)
FIELD_ROW(c_beta1_0, beta1, 0)
FIELD_ROW(c_beta2_1, beta2, 1)
FIELD_ROW(c_beta2_nan, beta2, NAN)
FIELD_ROW(c_beta2_above_1, beta2, 2)
FIELD_ROW(c_eps_negative, eps, -1e-8)
FIELD_ROW(c_eps_inf, eps, INFINITY)
FIELD_ROW(c_eps_0, eps, 0)
FIELD_ROW(c_max_grad_norm_negative, max_grad_norm, -1)
FIELD_ROW(c_max_grad_norm_nan, max_grad_norm, NAN)
FIELD_ROW(c_nesterov_2, nesterov, 2)
FIELD_ROW(c_reserved0, reserved[0], 1)
FIELD_ROW(c_reserved3, reserved[3], UINT64_MAX)

CALL(c_nesterov_without_momentum)
{
    cr_assert_eq(nn_optim_params_default(&o->p, NN_OPTIM_SGD), NN_OK);
    o->p.nesterov = 1;
    return create_with(c, o, -1, NULL);
}
CALL(c_nesterov_with_dampening)
{
    cr_assert_eq(nn_optim_params_default(&o->p, NN_OPTIM_SGD), NN_OK);
    o->p.nesterov = 1;
    o->p.momentum = 0.9;
    o->p.dampening = 0.1;
    return create_with(c, o, -1, NULL);
}
CALL(c_nesterov_ok)
{
    cr_assert_eq(nn_optim_params_default(&o->p, NN_OPTIM_SGD), NN_OK);
    o->p.nesterov = 1;
    o->p.momentum = 0.9;
    return create_with(c, o, -1, NULL);
}

/* ---- nn_optim_create: the parameter tensors ---- */

CALL(c_param_null_data)
{
    nn_tensor t = o->params[0];
    t.data = NULL;
    return create_with(c, o, 0, &t);
}
CALL(c_param_rank0)
{
    nn_tensor t = o->params[1];
    t.rank = 0;
    return create_with(c, o, 1, &t);
}
CALL(c_param_dtype_invalid)
{
    nn_tensor t = o->params[1];
    t.dtype = (nn_dtype)9;
    return create_with(c, o, 1, &t);
}
CALL(c_param_f16)
{
    nn_tensor t = o->params[1];
    t.dtype = NN_DTYPE_F16;
    return create_with(c, o, 1, &t);
}
CALL(c_param_bf16)
{
    nn_tensor t = o->params[0];
    t.dtype = NN_DTYPE_BF16;
    return create_with(c, o, 0, &t);
}
CALL(c_param_dtypes_differ)
{
    nn_tensor t = cat_tensor(c, NN_DTYPE_F64, 2, X, 321);
    nn_status st = create_with(c, o, 1, &t);
    cr_assert_eq(nn_tensor_free(c->ctx, &t), NN_OK);
    return st;
}
CALL(c_param_f64)
{
    nn_tensor t[2] = {cat_tensor(c, NN_DTYPE_F64, 2, X, 322),
                      cat_tensor(c, NN_DTYPE_F64, 1, X, 323)};
    nn_optim *opt = NULL;
    nn_status st = nn_optim_create(c->ctx, &o->p, 2, t, &opt);
    if (st == NN_OK) cr_assert_eq(nn_optim_free(c->ctx, opt), NN_OK);
    for (int i = 0; i < 2; i++)
        cr_assert_eq(nn_tensor_free(c->ctx, &t[i]), NN_OK);
    return st;
}
CALL(c_param_strided)
{
    nn_tensor t = strided(&o->params[0]);
    return create_with(c, o, 0, &t);
}
CALL(c_param_broadcast)
{
    nn_tensor t = o->params[1];
    t.strides[0] = 0;
    return create_with(c, o, 1, &t);
}
CALL(c_param_twice)
{
    return create_with(c, o, 1, &o->params[0]);
}
CALL(c_param_overlapping)
{
    int64_t d[] = {3};
    nn_tensor t = cat_view_on(&o->params[0], 1, d, 2); /* elements 2..4 of params[0] */
    return create_with(c, o, 1, &t);
}
CALL(c_param_adjacent)
{
    /* two halves of one buffer: apart, accepted */
    int64_t d[] = {3};
    nn_tensor ps[2] = {cat_view_on(&o->params[0], 1, d, 0), cat_view_on(&o->params[0], 1, d, 3)};
    nn_optim *opt = NULL;
    nn_status st = nn_optim_create(c->ctx, &o->p, 2, ps, &opt);
    if (st == NN_OK) cr_assert_eq(nn_optim_free(c->ctx, opt), NN_OK);
    return st;
}
CALL(c_param_wrong_space)
{
    nn_tensor t = cat_wrong_space(c, &o->params[1]);
    return create_with(c, o, 1, &t);
}
CALL(c_param_claims_other_space)
{
    nn_tensor t = cat_claim_other_space(c, &o->params[0]);
    return create_with(c, o, 0, &t);
}
CALL(c_param_misaligned)
{
    nn_tensor t = o->params[1];
    t.data = (char *)t.data + 2;
    return create_with(c, o, 1, &t);
}
CALL(c_param_count_overflow)
{
    nn_tensor t = cat_count_overflow(&o->params[1]);
    return create_with(c, o, 1, &t);
}
CALL(c_starved)
{
    struct cat_pool_mark m;
    cat_pool_starve(c, &m);
    nn_status st = create_with(c, o, -1, NULL);
    cat_pool_restore(&m, 0);
    return st;
}

/* ---- nn_optim_step ---- */

CALL(s_ok)
{
    return step_with(c, o, -1, NULL);
}
CALL(s_ok_sgd_momentum_clip)
{
    cr_assert_eq(nn_optim_params_default(&o->p, NN_OPTIM_SGD), NN_OK);
    o->p.momentum = 0.9;
    o->p.max_grad_norm = 1;
    return step_with(c, o, -1, NULL);
}
CALL(s_grads_share_memory)
{
    return step_with(c, o, 1, &o->grads[0]); /* gradients are read only: allowed */
}
CALL(s_null_ctx)
{
    nn_optim *opt = make(c->ctx, o);
    nn_status st = nn_optim_step(NULL, opt, 2, o->grads);
    cr_assert_eq(nn_optim_free(c->ctx, opt), NN_OK);
    return st;
}
CALL(s_null_opt)
{
    return nn_optim_step(c->ctx, NULL, 2, o->grads);
}
CALL(s_freed_opt)
{
    nn_optim *opt = make(c->ctx, o);
    cr_assert_eq(nn_optim_free(c->ctx, opt), NN_OK);
    return nn_optim_step(c->ctx, opt, 2, o->grads);
}
CALL(s_foreign_opt)
{
    return nn_optim_step(c->ctx, (nn_optim *)o, 2, o->grads);
}
CALL(s_other_ctx)
{
    nn_ctx *other = cat_other_ctx(c);
    nn_optim *opt = make(other, o);
    nn_status st = nn_optim_step(c->ctx, opt, 2, o->grads);
    cr_assert_eq(nn_optim_free(other, opt), NN_OK);
    return st;
}
CALL(s_n_wrong)
{
    nn_optim *opt = make(c->ctx, o);
    nn_status st = nn_optim_step(c->ctx, opt, 1, o->grads);
    cr_assert_eq(nn_optim_free(c->ctx, opt), NN_OK);
    return st;
}
CALL(s_null_grads)
{
    nn_optim *opt = make(c->ctx, o);
    nn_status st = nn_optim_step(c->ctx, opt, 2, NULL);
    cr_assert_eq(nn_optim_free(c->ctx, opt), NN_OK);
    return st;
}
CALL(s_grad_null_data)
{
    nn_tensor t = o->grads[1];
    t.data = NULL;
    return step_with(c, o, 1, &t);
}
CALL(s_grad_dtype)
{
    nn_tensor t = cat_tensor(c, NN_DTYPE_F64, 2, X, 331);
    nn_status st = step_with(c, o, 1, &t);
    cr_assert_eq(nn_tensor_free(c->ctx, &t), NN_OK);
    return st;
}
CALL(s_grad_f16)
{
    nn_tensor t = o->grads[0];
    t.dtype = NN_DTYPE_F16;
    return step_with(c, o, 0, &t);
}
CALL(s_grad_dims)
{
    int64_t d[] = {3, 2};
    nn_tensor t = cat_view_on(&o->grads[0], 2, d, 0);
    return step_with(c, o, 0, &t);
}
CALL(s_grad_rank)
{
    int64_t d[] = {6};
    nn_tensor t = cat_view_on(&o->grads[1], 1, d, 0);
    return step_with(c, o, 1, &t);
}
CALL(s_grad_strided)
{
    nn_tensor t = strided(&o->grads[0]);
    return step_with(c, o, 0, &t);
}
CALL(s_grad_wrong_space)
{
    nn_tensor t = cat_wrong_space(c, &o->grads[1]);
    return step_with(c, o, 1, &t);
}
CALL(s_grad_claims_other_space)
{
    nn_tensor t = cat_claim_other_space(c, &o->grads[0]);
    return step_with(c, o, 0, &t);
}
CALL(s_grad_is_its_param)
{
    return step_with(c, o, 0, &o->params[0]);
}
CALL(s_grad_is_another_param)
{
    return step_with(c, o, 1, &o->params[0]);
}
CALL(s_grad_overlaps_a_param)
{
    int64_t d[] = {2, 3};
    nn_tensor big = cat_tensor(c, NN_DTYPE_F32, 1, (int64_t[]){12}, 332);
    /* params[1] is elements 0..5 of big, grads[0] elements 4..9 */
    nn_tensor p1 = cat_view_on(&big, 2, d, 0), g0 = cat_view_on(&big, 2, d, 4);
    nn_tensor ps[2] = {o->params[0], p1}, gs[2] = {g0, o->grads[1]};
    nn_optim *opt = NULL;
    cr_assert_eq(nn_optim_create(c->ctx, &o->p, 2, ps, &opt), NN_OK, "%s",
                 nn_last_error()->message);
    nn_status st = nn_optim_step(c->ctx, opt, 2, gs);
    cr_assert_eq(nn_optim_free(c->ctx, opt), NN_OK);
    cr_assert_eq(nn_tensor_free(c->ctx, &big), NN_OK);
    return st;
}
CALL(s_starved_takes_nothing)
{
    nn_optim *opt = make(c->ctx, o);
    o->p.max_grad_norm = 1;
    nn_optim *clip = make(c->ctx, o);
    struct cat_pool_mark m;
    cat_pool_starve(c, &m);
    nn_status st = nn_optim_step(c->ctx, opt, 2, o->grads);
    if (st == NN_OK) st = nn_optim_step(c->ctx, clip, 2, o->grads);
    cat_pool_restore(&m, 1);
    cr_assert_eq(nn_optim_free(c->ctx, opt), NN_OK);
    cr_assert_eq(nn_optim_free(c->ctx, clip), NN_OK);
    return st;
}

/* ---- nn_optim_set_lr, nn_optim_get_step, nn_optim_reset, nn_optim_free ---- */

/* fn applied to an optimizer of ctx_of (NULL: the row's context), called with ctx; freed after
 * unless freed (then freed first). */
enum which { SET_LR, GET_STEP, RESET, FREE };
static nn_status on_opt(struct cat *c, struct op *o, enum which w, nn_ctx *call_ctx, int freed,
                        double lr)
{
    nn_ctx *home = c->ctx;
    if (call_ctx == (nn_ctx *)1) home = cat_other_ctx(c), call_ctx = c->ctx;
    nn_optim *opt = make(home, o);
    if (freed) cr_assert_eq(nn_optim_free(home, opt), NN_OK);
    int64_t steps = 0;
    nn_status st = NN_OK;
    switch (w) {
    case SET_LR: st = nn_optim_set_lr(call_ctx, opt, lr); break;
    case GET_STEP: st = nn_optim_get_step(call_ctx, opt, lr == 0 ? NULL : &steps); break;
    case RESET: st = nn_optim_reset(call_ctx, opt); break;
    case FREE: st = nn_optim_free(call_ctx, opt); break;
    }
    if (!freed && !(w == FREE && st == NN_OK)) cr_assert_eq(nn_optim_free(home, opt), NN_OK);
    return st;
}
#define OTHER ((nn_ctx *)1)

CALL(sl_null_ctx)
{
    return on_opt(c, o, SET_LR, NULL, 0, 0.1);
}
CALL(sl_null_opt)
{
    return nn_optim_set_lr(c->ctx, NULL, 0.1);
}
CALL(sl_freed)
{
    return on_opt(c, o, SET_LR, c->ctx, 1, 0.1);
}
CALL(sl_other_ctx)
{
    return on_opt(c, o, SET_LR, OTHER, 0, 0.1);
}
CALL(sl_negative)
{
    return on_opt(c, o, SET_LR, c->ctx, 0, -0.1);
}
CALL(sl_nan)
{
    return on_opt(c, o, SET_LR, c->ctx, 0, NAN);
}
CALL(sl_inf)
{
    return on_opt(c, o, SET_LR, c->ctx, 0, INFINITY);
}
CALL(sl_ok)
{
    return on_opt(c, o, SET_LR, c->ctx, 0, 0.5);
}
CALL(gs_null_ctx)
{
    return on_opt(c, o, GET_STEP, NULL, 0, 1);
}
CALL(gs_null_opt)
{
    int64_t s;
    return nn_optim_get_step(c->ctx, NULL, &s);
}
CALL(gs_null_step)
{
    return on_opt(c, o, GET_STEP, c->ctx, 0, 0);
}
CALL(gs_freed)
{
    return on_opt(c, o, GET_STEP, c->ctx, 1, 1);
}
CALL(gs_other_ctx)
{
    return on_opt(c, o, GET_STEP, OTHER, 0, 1);
}
CALL(r_null_ctx)
{
    return on_opt(c, o, RESET, NULL, 0, 0);
}
CALL(r_null_opt)
{
    return nn_optim_reset(c->ctx, NULL);
}
CALL(r_freed)
{
    return on_opt(c, o, RESET, c->ctx, 1, 0);
}
CALL(r_other_ctx)
{
    return on_opt(c, o, RESET, OTHER, 0, 0);
}
CALL(r_ok)
{
    return on_opt(c, o, RESET, c->ctx, 0, 0);
}
CALL(f_null_ctx)
{
    return on_opt(c, o, FREE, NULL, 0, 0);
}
CALL(f_null_opt)
{
    return nn_optim_free(c->ctx, NULL);
}
CALL(f_twice)
{
    return on_opt(c, o, FREE, c->ctx, 1, 0);
}
CALL(f_other_ctx)
{
    return on_opt(c, o, FREE, OTHER, 0, 0);
}
CALL(f_foreign)
{
    return nn_optim_free(c->ctx, (nn_optim *)o);
}

#define PD "nn_optim_params_default"
#define CR "nn_optim_create"
#define ST "nn_optim_step"
#define SL "nn_optim_set_lr"
#define GS "nn_optim_get_step"
#define RS "nn_optim_reset"
#define FR "nn_optim_free"
#define E  NN_E_INVALID_ARG
#define D  NN_E_DTYPE
#define S  NN_E_SHAPE
#define M  NN_E_MEMSPACE
#define U  NN_E_UNSUPPORTED
#define B  NN_E_BAD_POINTER
#define O  NN_E_OVERFLOW

static struct cat_row rows[] = {
    ROW("params_default p NULL", PD, "p", E, pd_null),
    ROW("params_default kind 0", PD, "kind", E, pd_kind0),
    ROW("params_default kind 4", PD, "kind", E, pd_kind4),
    ROW("create ctx NULL", CR, "ctx", E, c_null_ctx),
    ROW("create p NULL", CR, "p", E, c_null_p),
    ROW("create params NULL", CR, "params", E, c_null_params),
    ROW("create out NULL", CR, "out", E, c_null_out),
    ROW("create n 0", CR, "n", E, c_n0),
    ROW("create n -3", CR, "n", E, c_n_negative),
    ROW("create n 1 of two (edge)", CR, NULL, NN_OK, c_one_of_two),
    ROW("create kind 0", CR, "kind", E, c_kind0),
    ROW("create kind 4", CR, "kind", E, c_kind4),
    ROW("create lr < 0", CR, "lr", E, c_lr_negative),
    ROW("create lr NaN", CR, "lr", E, c_lr_nan),
    ROW("create lr infinite", CR, "lr", E, c_lr_inf),
    ROW("create lr 0 (edge)", CR, NULL, NN_OK, c_lr_zero),
    ROW("create momentum < 0", CR, "momentum", E, c_momentum_negative),
    ROW("create momentum NaN", CR, "momentum", E, c_momentum_nan),
    ROW("create dampening < 0", CR, "dampening", E, c_dampening_negative),
    ROW("create dampening > 1", CR, "dampening", E, c_dampening_above_1),
    ROW("create dampening 1 (edge)", CR, NULL, NN_OK, c_dampening_1),
    ROW("create weight_decay < 0", CR, "weight_decay", E, c_weight_decay_negative),
    ROW("create weight_decay NaN", CR, "weight_decay", E, c_weight_decay_nan),
    ROW("create beta1 1", CR, "beta1", E, c_beta1_1),
    ROW("create beta1 < 0", CR, "beta1", E, c_beta1_negative),
    ROW("create beta1 0 (edge)", CR, NULL, NN_OK, c_beta1_0),
    ROW("create beta2 1", CR, "beta2", E, c_beta2_1),
    ROW("create beta2 NaN", CR, "beta2", E, c_beta2_nan),
    ROW("create beta2 2", CR, "beta2", E, c_beta2_above_1),
    ROW("create eps < 0", CR, "eps", E, c_eps_negative),
    ROW("create eps infinite", CR, "eps", E, c_eps_inf),
    ROW("create eps 0 (edge)", CR, NULL, NN_OK, c_eps_0),
    ROW("create max_grad_norm < 0", CR, "max_grad_norm", E, c_max_grad_norm_negative),
    ROW("create max_grad_norm NaN", CR, "max_grad_norm", E, c_max_grad_norm_nan),
    ROW("create nesterov 2", CR, "nesterov", E, c_nesterov_2),
    ROW("create nesterov with momentum 0", CR, "momentum", E, c_nesterov_without_momentum),
    ROW("create nesterov with dampening", CR, "dampening", E, c_nesterov_with_dampening),
    ROW("create nesterov with momentum (edge)", CR, NULL, NN_OK, c_nesterov_ok),
    ROW("create reserved[0] set", CR, "p.reserved[0]", E, c_reserved0),
    ROW("create reserved[3] set", CR, "p.reserved[3]", E, c_reserved3),
    ROW("create params[0].data NULL", CR, "params[0]", E, c_param_null_data),
    ROW("create params[1] rank 0", CR, "params[1]", E, c_param_rank0),
    ROW("create params[1] dtype 9", CR, "params[1]", D, c_param_dtype_invalid),
    ROW("create params[1] f16", CR, "params[1]", D, c_param_f16),
    ROW("create params[0] bf16", CR, "params[0]", D, c_param_bf16),
    ROW("create params of two dtypes", CR, "params[1]", D, c_param_dtypes_differ),
    ROW("create f64 params (edge)", CR, NULL, NN_OK, c_param_f64),
    ROW("create params[0] strided", CR, "params[0]", U, c_param_strided),
    ROW("create params[1] broadcast", CR, "params[1]", U, c_param_broadcast),
    ROW("create params[1] is params[0]", CR, "params[1]", E, c_param_twice),
    ROW("create params[1] overlaps params[0]", CR, "params[1]", E, c_param_overlapping),
    ROW("create params halves of one buffer (edge)", CR, NULL, NN_OK, c_param_adjacent),
    ROW("create params[1] in the other space", CR, "params[1]", M, c_param_wrong_space),
    ROW("create params[0] claims the other space", CR, "params[0]", M, c_param_claims_other_space),
    ROW("create params[1] misaligned", CR, "params[1]", E, c_param_misaligned),
    ROW("create params[1] element count overflows", CR, "params[1]", O, c_param_count_overflow),
    ROW_ON(CAT_GPU_ONLY, "create under a 1-byte pool limit", CR, "limit", NN_E_OOM_DEVICE,
           c_starved),
    ROW("step (edge)", ST, NULL, NN_OK, s_ok),
    ROW("step sgd momentum clip (edge)", ST, NULL, NN_OK, s_ok_sgd_momentum_clip),
    ROW("step grads sharing memory (edge)", ST, NULL, NN_OK, s_grads_share_memory),
    ROW("step ctx NULL", ST, "ctx", E, s_null_ctx),
    ROW("step opt NULL", ST, "opt", E, s_null_opt),
    ROW("step opt freed", ST, "opt", B, s_freed_opt),
    ROW("step opt foreign", ST, "opt", B, s_foreign_opt),
    ROW("step opt of another context", ST, "opt", E, s_other_ctx),
    ROW("step n 1 for 2", ST, "n", E, s_n_wrong),
    ROW("step grads NULL", ST, "grads", E, s_null_grads),
    ROW("step grads[1].data NULL", ST, "grads[1]", E, s_grad_null_data),
    ROW("step grads[1] f64 for f32", ST, "grads[1]", D, s_grad_dtype),
    ROW("step grads[0] f16", ST, "grads[0]", D, s_grad_f16),
    ROW("step grads[0] dims 3x2", ST, "grads[0]", S, s_grad_dims),
    ROW("step grads[1] rank 1", ST, "grads[1]", S, s_grad_rank),
    ROW("step grads[0] strided", ST, "grads[0]", U, s_grad_strided),
    ROW("step grads[1] in the other space", ST, "grads[1]", M, s_grad_wrong_space),
    ROW("step grads[0] claims the other space", ST, "grads[0]", M, s_grad_claims_other_space),
    ROW("step grads[0] is params[0]", ST, "grads[0]", E, s_grad_is_its_param),
    ROW("step grads[1] is params[0]", ST, "grads[1]", E, s_grad_is_another_param),
    ROW("step grads[0] overlaps params[1]", ST, "params[1]", E, s_grad_overlaps_a_param),
    ROW_ON(CAT_GPU_ONLY, "step under a 1-byte pool limit (edge: no pool use)", ST, NULL, NN_OK,
           s_starved_takes_nothing),
    ROW("set_lr ctx NULL", SL, "ctx", E, sl_null_ctx),
    ROW("set_lr opt NULL", SL, "opt", E, sl_null_opt),
    ROW("set_lr opt freed", SL, "opt", B, sl_freed),
    ROW("set_lr opt of another context", SL, "opt", E, sl_other_ctx),
    ROW("set_lr lr < 0", SL, "lr", E, sl_negative),
    ROW("set_lr lr NaN", SL, "lr", E, sl_nan),
    ROW("set_lr lr infinite", SL, "lr", E, sl_inf),
    ROW("set_lr (edge)", SL, NULL, NN_OK, sl_ok),
    ROW("get_step ctx NULL", GS, "ctx", E, gs_null_ctx),
    ROW("get_step opt NULL", GS, "opt", E, gs_null_opt),
    ROW("get_step step NULL", GS, "step", E, gs_null_step),
    ROW("get_step opt freed", GS, "opt", B, gs_freed),
    ROW("get_step opt of another context", GS, "opt", E, gs_other_ctx),
    ROW("reset ctx NULL", RS, "ctx", E, r_null_ctx),
    ROW("reset opt NULL", RS, "opt", E, r_null_opt),
    ROW("reset opt freed", RS, "opt", B, r_freed),
    ROW("reset opt of another context", RS, "opt", E, r_other_ctx),
    ROW("reset (edge)", RS, NULL, NN_OK, r_ok),
    ROW("free ctx NULL", FR, "ctx", E, f_null_ctx),
    ROW("free opt NULL (edge)", FR, NULL, NN_OK, f_null_opt),
    ROW("free twice", FR, "opt", B, f_twice),
    ROW("free opt of another context", FR, "opt", E, f_other_ctx),
    ROW("free opt foreign", FR, "opt", B, f_foreign),
};

CAT_SUBJECT(optim, rows)

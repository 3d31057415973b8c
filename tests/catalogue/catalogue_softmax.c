/* Catalogue rows: softmax, log-softmax and the softmax cross-entropy (include/nnprim/softmax.h).
 * Each row makes its operands (x y dy dx 2x3, loss dloss 2, targets {0, 2} on the host) in the
 * context's memory and frees them after. */
#include <math.h>
#include <string.h>

#include "catalogue.h"
#include "catalogue_family.h"

struct sm {
    nn_softmax_params p;
    nn_tensor x, y, dy, dx, loss, dloss;
    int64_t t[2];
    nn_class_targets targets;
};

static const int64_t X[] = {2, 3}, L[] = {2};

static void sm_setup(struct cat *c, struct sm *s)
{
    cr_assert_eq(nn_softmax_params_default(&s->p), NN_OK, "fixture");
    s->x = cat_tensor(c, NN_DTYPE_F32, 2, X, 201);
    s->y = cat_tensor(c, NN_DTYPE_F32, 2, X, 202);
    s->dy = cat_tensor(c, NN_DTYPE_F32, 2, X, 203);
    s->dx = cat_tensor(c, NN_DTYPE_F32, 2, X, 204);
    s->loss = cat_tensor(c, NN_DTYPE_F32, 1, L, 205);
    s->dloss = cat_tensor(c, NN_DTYPE_F32, 1, L, 206);
    s->t[0] = 0;
    s->t[1] = 2;
    memset(&s->targets, 0, sizeof s->targets);
    s->targets.data = s->t;
    s->targets.type = NN_INDEX_I64;
}

static void sm_free(struct cat *c, struct sm *s)
{
    CAT_FREE_TENSORS(c, &s->x, &s->y, &s->dy, &s->dx, &s->loss, &s->dloss);
}

/* A row body gets the operands; rows change copies of the views, never s's own. */
#define CALL(fname) CAT_FAMILY_CALL(fname, struct sm, s, sm_setup, sm_free)

static nn_status fwd(struct cat *c, struct sm *s, const nn_tensor *x, nn_tensor *y)
{
    return nn_softmax_forward(c->ctx, &s->p, x, y, NULL);
}

static nn_status xent(struct cat *c, const nn_tensor *x, const nn_class_targets *t, nn_tensor *loss)
{
    return nn_softmax_cross_entropy_forward(c->ctx, x, t, loss, NULL);
}

/* A refused call leaves its output as it was. */
static nn_status unchanged(struct cat *c, const nn_tensor *t, const double *before, int64_t n,
                           nn_status st)
{
    double after[16];
    cat_read(c, t, after);
    for (int64_t i = 0; i < n; i++)
        cr_assert_eq(after[i], before[i], "a refused call wrote [%lld]: %g, was %g", (long long)i,
                     after[i], before[i]);
    return st;
}

/* ---- nn_softmax_params_default ---- */

static nn_status pd_null(struct cat *c)
{
    (void)c;
    return nn_softmax_params_default(NULL);
}

/* ---- nn_softmax_forward ---- */

CALL(f_null_ctx)
{
    (void)c;
    return nn_softmax_forward(NULL, &s->p, &s->x, &s->y, NULL);
}
CALL(f_null_p)
{
    return nn_softmax_forward(c->ctx, NULL, &s->x, &s->y, NULL);
}
CALL(f_null_x)
{
    return fwd(c, s, NULL, &s->y);
}
CALL(f_null_y)
{
    return fwd(c, s, &s->x, NULL);
}
CALL(f_null_xdata)
{
    nn_tensor x = s->x;
    x.data = NULL;
    return fwd(c, s, &x, &s->y);
}
CALL(f_pullback_null_on_failure)
{
    nn_softmax_pullback *pb = (nn_softmax_pullback *)c;
    nn_status st = nn_softmax_forward(c->ctx, &s->p, &s->x, NULL, &pb);
    cr_assert_null(pb, "*pullback_out must be NULL after a failure");
    return st;
}
CALL(f_mode2)
{
    s->p.mode = (nn_softmax_mode)2;
    return fwd(c, s, &s->x, &s->y);
}
CALL(f_mode_neg)
{
    s->p.mode = (nn_softmax_mode)-1;
    return fwd(c, s, &s->x, &s->y);
}
CALL(f_res0)
{
    s->p.reserved[0] = 1;
    return fwd(c, s, &s->x, &s->y);
}
CALL(f_res3)
{
    s->p.reserved[3] = UINT64_MAX;
    return fwd(c, s, &s->x, &s->y);
}
CALL(f_x_rank1)
{
    nn_tensor x = cat_view_on(&s->x, 1, (int64_t[]){6}, 0);
    nn_tensor y = cat_view_on(&s->y, 1, (int64_t[]){6}, 0);
    return fwd(c, s, &x, &y);
}
CALL(f_x_rank0)
{
    nn_tensor x = s->x;
    x.rank = 0;
    return fwd(c, s, &x, &s->y);
}
CALL(f_x_dim0)
{
    nn_tensor x = s->x;
    x.dims[1] = 0;
    return fwd(c, s, &x, &s->y);
}
CALL(f_y_dims)
{
    nn_tensor y = cat_view_on(&s->y, 2, (int64_t[]){2, 2}, 0);
    return fwd(c, s, &s->x, &y);
}
CALL(f_y_rank)
{
    nn_tensor y = cat_view_on(&s->y, 3, (int64_t[]){2, 3, 1}, 0);
    return fwd(c, s, &s->x, &y);
}
CALL(f_y_dtype)
{
    nn_tensor y = s->y;
    y.dtype = NN_DTYPE_BF16;
    return fwd(c, s, &s->x, &y);
}
CALL(f_x_dtype_bad)
{
    nn_tensor x = s->x;
    x.dtype = (nn_dtype)4;
    return fwd(c, s, &x, &s->y);
}
CALL(f_y_reserved)
{
    nn_tensor y = s->y;
    y.reserved[0] = 9;
    return fwd(c, s, &s->x, &y);
}
CALL(f_y_misaligned)
{
    nn_tensor y = s->y;
    y.data = (char *)y.data + 2;
    return fwd(c, s, &s->x, &y);
}
CALL(f_x_device_neg)
{
    nn_tensor x = s->x;
    x.space = NN_SPACE_DEVICE;
    x.device = -2;
    return fwd(c, s, &x, &s->y);
}
CALL(f_x_overflow)
{
    nn_tensor x = s->x;
    x.dims[0] = INT64_MAX / 2;
    return fwd(c, s, &x, &s->y);
}
CALL(f_x_strided)
{
    nn_tensor x = cat_transposed(&s->x);
    return fwd(c, s, &x, &s->y);
}
CALL(f_y_strided)
{
    nn_tensor y = cat_transposed(&s->y);
    return fwd(c, s, &s->x, &y);
}
CALL(f_x_broadcast)
{
    nn_tensor x = s->x;
    x.strides[0] = 0;
    return fwd(c, s, &x, &s->y);
}
CALL(f_claim_x)
{
    nn_tensor t = cat_claim_other_space(c, &s->x);
    return fwd(c, s, &t, &s->y);
}
CALL(f_claim_y)
{
    nn_tensor t = cat_claim_other_space(c, &s->y);
    return fwd(c, s, &s->x, &t);
}
CALL(f_space_x)
{
    nn_tensor t = cat_wrong_space(c, &s->x);
    return fwd(c, s, &t, &s->y);
}
CALL(f_space_y)
{
    nn_tensor t = cat_wrong_space(c, &s->y);
    return fwd(c, s, &s->x, &t);
}
CALL(f_y_is_x)
{
    return fwd(c, s, &s->x, &s->x);
}
CALL(f_y_in_x)
{
    nn_tensor x = cat_view_on(&s->x, 2, (int64_t[]){1, 3}, 0);
    nn_tensor y = cat_view_on(&s->x, 2, (int64_t[]){1, 3}, 2);
    return fwd(c, s, &x, &y);
}
CALL(f_y_zero_strides)
{
    nn_tensor y = s->y;
    memset(y.strides, 0, sizeof y.strides);
    return fwd(c, s, &s->x, &y);
}
CALL(f_y_interleaved)
{
    nn_tensor y = s->y;
    y.strides[0] = 1;
    return fwd(c, s, &s->x, &y);
}
/* Edge: softmax and log-softmax values. */
static nn_status values(struct cat *c, struct sm *s, int log_mode)
{
    s->p.mode = log_mode ? NN_SOFTMAX_MODE_LOG : NN_SOFTMAX_MODE_SOFTMAX;
    nn_status st = fwd(c, s, &s->x, &s->y);
    if (st != NN_OK) return st;
    double x[6], y[6];
    cat_read(c, &s->x, x);
    cat_read(c, &s->y, y);
    for (int n = 0; n < 2; n++) {
        double m = fmax(x[n * 3], fmax(x[n * 3 + 1], x[n * 3 + 2])), sum = 0;
        for (int k = 0; k < 3; k++)
            sum += exp(x[n * 3 + k] - m);
        for (int k = 0; k < 3; k++) {
            double want = log_mode ? x[n * 3 + k] - m - log(sum) : exp(x[n * 3 + k] - m) / sum;
            cr_assert(fabs(y[n * 3 + k] - want) <= 2e-5, "y[%d][%d] = %.9g, expected %.9g", n, k,
                      y[n * 3 + k], want);
        }
    }
    return NN_OK;
}
CALL(f_values)
{
    return values(c, s, 0);
}
CALL(f_log_values)
{
    return values(c, s, 1);
}
CALL(f_rank4)
{
    nn_tensor x = cat_view_on(&s->x, 4, (int64_t[]){1, 3, 1, 2}, 0);
    nn_tensor y = cat_view_on(&s->y, 4, (int64_t[]){1, 3, 1, 2}, 0);
    return fwd(c, s, &x, &y);
}
CALL(f_c1)
{
    /* one class: softmax 1, log-softmax 0 */
    nn_tensor x = cat_view_on(&s->x, 2, (int64_t[]){6, 1}, 0);
    nn_tensor y = cat_view_on(&s->y, 2, (int64_t[]){6, 1}, 0);
    nn_status st = fwd(c, s, &x, &y);
    if (st != NN_OK) return st;
    double v[6];
    cat_read(c, &y, v);
    for (int i = 0; i < 6; i++)
        cr_assert_eq(v[i], 1.0, "y[%d] = %g", i, v[i]);
    return st;
}
CALL(f_f16)
{
    nn_tensor x = cat_tensor(c, NN_DTYPE_F16, 2, X, 210),
              y = cat_tensor(c, NN_DTYPE_F16, 2, X, 211);
    nn_status st = fwd(c, s, &x, &y);
    nn_tensor_free(c->ctx, &x);
    nn_tensor_free(c->ctx, &y);
    return st;
}

/* ---- nn_softmax_backward ---- */

static nn_softmax_pullback *pullback(struct cat *c, struct sm *s)
{
    nn_softmax_pullback *pb = NULL;
    cr_assert_eq(nn_softmax_forward(c->ctx, &s->p, &s->x, &s->y, &pb), NN_OK, "fixture: %s",
                 nn_last_error()->message);
    return pb;
}
static nn_status then_retry(struct cat *c, struct sm *s, nn_status st, nn_softmax_pullback **pb)
{
    if (st == NN_OK) return st;
    nn_error_info e = *nn_last_error();
    cr_assert_not_null(*pb, "a refused call leaves the pullback with the caller");
    cr_assert_eq(nn_softmax_backward(c->ctx, pb, &s->dy, &s->dx), NN_OK,
                 "a valid retry with the same pullback: %s", nn_last_error()->message);
    cr_assert_null(*pb);
    cr_assert_str_eq(nn_last_error()->message, e.message, "the record changed");
    return st;
}
static nn_status bwd(struct cat *c, struct sm *s, const nn_tensor *dy, nn_tensor *dx)
{
    nn_softmax_pullback *pb = pullback(c, s);
    return then_retry(c, s, nn_softmax_backward(c->ctx, &pb, dy, dx), &pb);
}
static nn_softmax_cross_entropy_pullback *xent_pullback(struct cat *c, struct sm *s)
{
    nn_softmax_cross_entropy_pullback *pb = NULL;
    cr_assert_eq(nn_softmax_cross_entropy_forward(c->ctx, &s->x, &s->targets, &s->loss, &pb), NN_OK,
                 "fixture: %s", nn_last_error()->message);
    return pb;
}

CALL(b_null_ctx)
{
    nn_softmax_pullback *pb = pullback(c, s);
    return then_retry(c, s, nn_softmax_backward(NULL, &pb, &s->dy, &s->dx), &pb);
}
CALL(b_null_pullback)
{
    return nn_softmax_backward(c->ctx, NULL, &s->dy, &s->dx);
}
CALL(b_null_star)
{
    nn_softmax_pullback *pb = NULL;
    return nn_softmax_backward(c->ctx, &pb, &s->dy, &s->dx);
}
CALL(b_twice)
{
    nn_softmax_pullback *pb = pullback(c, s), *copy = pb;
    cr_assert_eq(nn_softmax_backward(c->ctx, &pb, &s->dy, &s->dx), NN_OK, "first");
    return nn_softmax_backward(c->ctx, &copy, &s->dy, &s->dx);
}
CALL(b_freed)
{
    nn_softmax_pullback *pb = pullback(c, s), *copy = pb;
    cr_assert_eq(nn_softmax_pullback_free(&pb), NN_OK, "free");
    return nn_softmax_backward(c->ctx, &copy, &s->dy, &s->dx);
}
CALL(b_other_ctx)
{
    nn_softmax_pullback *pb = pullback(c, s);
    return then_retry(c, s, nn_softmax_backward(cat_other_ctx(c), &pb, &s->dy, &s->dx), &pb);
}
CALL(b_xent_pullback)
{
    nn_softmax_cross_entropy_pullback *xp = xent_pullback(c, s);
    nn_softmax_pullback *pb = (nn_softmax_pullback *)xp;
    nn_status st = nn_softmax_backward(c->ctx, &pb, &s->dy, &s->dx);
    cr_assert_eq(nn_softmax_cross_entropy_pullback_free(&xp), NN_OK, "intact");
    return st;
}
CALL(b_pool_pullback)
{
    nn_pool_pullback *pp = NULL;
    cr_assert_eq(nn_pool_forward(c->ctx, &c->pp, &c->px, &c->py, &pp), NN_OK, "fixture");
    nn_softmax_pullback *pb = (nn_softmax_pullback *)pp;
    nn_status st = nn_softmax_backward(c->ctx, &pb, &s->dy, &s->dx);
    cr_assert_eq(nn_pool_pullback_free(&pp), NN_OK, "intact");
    return st;
}
CALL(b_null_dy)
{
    return bwd(c, s, NULL, &s->dx);
}
CALL(b_null_dx)
{
    return bwd(c, s, &s->dy, NULL);
}
CALL(b_dy_dims)
{
    nn_tensor dy = cat_view_on(&s->dy, 2, (int64_t[]){3, 2}, 0);
    return bwd(c, s, &dy, &s->dx);
}
CALL(b_dx_dims)
{
    nn_tensor dx = cat_view_on(&s->dx, 2, (int64_t[]){2, 2}, 0);
    return bwd(c, s, &s->dy, &dx);
}
CALL(b_dx_rank)
{
    nn_tensor dx = cat_view_on(&s->dx, 1, (int64_t[]){6}, 0);
    return bwd(c, s, &s->dy, &dx);
}
CALL(b_dy_dtype)
{
    nn_tensor dy = s->dy;
    dy.dtype = NN_DTYPE_F16;
    cat_packed(&dy);
    return bwd(c, s, &dy, &s->dx);
}
CALL(b_dx_dtype)
{
    nn_tensor dx = s->dx;
    dx.dtype = NN_DTYPE_BF16;
    return bwd(c, s, &s->dy, &dx);
}
CALL(b_claim_dy)
{
    nn_tensor t = cat_claim_other_space(c, &s->dy);
    return bwd(c, s, &t, &s->dx);
}
CALL(b_claim_dx)
{
    nn_tensor t = cat_claim_other_space(c, &s->dx);
    return bwd(c, s, &s->dy, &t);
}
CALL(b_space_dy)
{
    nn_tensor t = cat_wrong_space(c, &s->dy);
    return bwd(c, s, &t, &s->dx);
}
CALL(b_space_dx)
{
    nn_tensor t = cat_wrong_space(c, &s->dx);
    return bwd(c, s, &s->dy, &t);
}
CALL(b_dx_is_dy)
{
    return bwd(c, s, &s->dy, &s->dy);
}
CALL(b_dx_on_y)
{
    return bwd(c, s, &s->dy, &s->y);
}
CALL(b_dx_self)
{
    nn_tensor dx = s->dx;
    dx.strides[1] = 0;
    return bwd(c, s, &s->dy, &dx);
}
CALL(b_dx_strided)
{
    nn_tensor dx = cat_transposed(&s->dx);
    return bwd(c, s, &s->dy, &dx);
}
CALL(b_dy_strided)
{
    nn_tensor dy = cat_transposed(&s->dy);
    return bwd(c, s, &dy, &s->dx);
}
/* Edge: dy = 1 everywhere gives dx = 0 for softmax (the rows of y sum to 1); accumulated here
 * (nn_softmax_backward_ex's NN_ACCUMULATE_DX), so dx keeps its values. */
CALL(b_accumulate)
{
    cr_assert_eq(nn_tensor_fill_constant(c->ctx, &s->dy, 1.0), NN_OK, "fixture");
    double before[6], after[6];
    cat_read(c, &s->dx, before);
    nn_softmax_pullback *pb = pullback(c, s);
    nn_backward_options o = {.accumulate = NN_ACCUMULATE_DX};
    nn_status st = nn_softmax_backward_ex(c->ctx, &pb, &o, &s->dy, &s->dx);
    if (st != NN_OK) return st;
    cat_read(c, &s->dx, after);
    for (int i = 0; i < 6; i++)
        cr_assert(fabs(after[i] - before[i]) <= 1e-6, "dx[%d] = %g, was %g", i, after[i],
                  before[i]);
    return st;
}

/* ---- nn_softmax_pullback_free ---- */

static nn_status pf_null(struct cat *c)
{
    (void)c;
    return nn_softmax_pullback_free(NULL);
}
static nn_status pf_star_null(struct cat *c)
{
    (void)c;
    nn_softmax_pullback *pb = NULL;
    return nn_softmax_pullback_free(&pb);
}
CALL(pf_twice)
{
    nn_softmax_pullback *pb = pullback(c, s), *copy = pb;
    cr_assert_eq(nn_softmax_pullback_free(&pb), NN_OK, "first free");
    return nn_softmax_pullback_free(&copy);
}
CALL(pf_consumed)
{
    nn_softmax_pullback *pb = pullback(c, s), *copy = pb;
    cr_assert_eq(nn_softmax_backward(c->ctx, &pb, &s->dy, &s->dx), NN_OK, "backward");
    return nn_softmax_pullback_free(&copy);
}
CALL(pf_xent)
{
    nn_softmax_cross_entropy_pullback *xp = xent_pullback(c, s);
    nn_softmax_pullback *pb = (nn_softmax_pullback *)xp;
    nn_status st = nn_softmax_pullback_free(&pb);
    cr_assert_eq(nn_softmax_cross_entropy_pullback_free(&xp), NN_OK, "intact");
    return st;
}

/* ---- nn_softmax_cross_entropy_forward ---- */

CALL(x_null_ctx)
{
    (void)c;
    return nn_softmax_cross_entropy_forward(NULL, &s->x, &s->targets, &s->loss, NULL);
}
CALL(x_null_x)
{
    return xent(c, NULL, &s->targets, &s->loss);
}
CALL(x_null_targets)
{
    return xent(c, &s->x, NULL, &s->loss);
}
CALL(x_null_tdata)
{
    s->targets.data = NULL;
    return xent(c, &s->x, &s->targets, &s->loss);
}
CALL(x_null_loss)
{
    return xent(c, &s->x, &s->targets, NULL);
}
CALL(x_pullback_null_on_failure)
{
    nn_softmax_cross_entropy_pullback *pb = (nn_softmax_cross_entropy_pullback *)c;
    s->t[1] = 3;
    nn_status st = nn_softmax_cross_entropy_forward(c->ctx, &s->x, &s->targets, &s->loss, &pb);
    cr_assert_null(pb, "*pullback_out must be NULL after a failure");
    return st;
}
CALL(x_type0)
{
    s->targets.type = (nn_index_type)0;
    return xent(c, &s->x, &s->targets, &s->loss);
}
CALL(x_type3)
{
    s->targets.type = (nn_index_type)3;
    return xent(c, &s->x, &s->targets, &s->loss);
}
CALL(x_t_misaligned)
{
    s->targets.data = (const char *)s->t + 4;
    return xent(c, &s->x, &s->targets, &s->loss);
}
CALL(x_t_res0)
{
    s->targets.reserved[0] = 1;
    return xent(c, &s->x, &s->targets, &s->loss);
}
CALL(x_t_res1)
{
    s->targets.reserved[1] = UINT64_MAX;
    return xent(c, &s->x, &s->targets, &s->loss);
}
/* A target outside [0, C): refused before anything is written. */
static nn_status bad_target(struct cat *c, struct sm *s, int64_t t0, int64_t t1)
{
    s->t[0] = t0;
    s->t[1] = t1;
    double before[2];
    cat_read(c, &s->loss, before);
    return unchanged(c, &s->loss, before, 2, xent(c, &s->x, &s->targets, &s->loss));
}
CALL(x_t_neg)
{
    return bad_target(c, s, -1, 0);
}
CALL(x_t_c)
{
    return bad_target(c, s, 0, 3);
}
CALL(x_t_max)
{
    return bad_target(c, s, 1, INT64_MAX);
}
CALL(x_t_min)
{
    return bad_target(c, s, INT64_MIN, 1);
}
CALL(x_t32_bad)
{
    int32_t t[2] = {1, -7};
    s->targets.data = t;
    s->targets.type = NN_INDEX_I32;
    return xent(c, &s->x, &s->targets, &s->loss);
}
CALL(x_t_device_on_ref)
{
    /* device memory of a second (cuDNN) context as the targets of a reference context */
    nn_tensor t = cat_wrong_space(c, &s->loss);
    s->targets.data = t.data;
    s->targets.type = NN_INDEX_I32;
    return xent(c, &s->x, &s->targets, &s->loss);
}
/* int32 targets in device memory of the cuDNN context (its f32 storage holds their bits: a copy
 * of one dtype moves bytes). */
static const void *device_targets(struct cat *c, struct sm *s, const int32_t *t)
{
    nn_tensor h = cat_host_view((void *)t, NN_DTYPE_F32, 1, L);
    cr_assert_eq(nn_tensor_copy(c->ctx, &s->dloss, &h), NN_OK, "fixture: %s",
                 nn_last_error()->message);
    cr_assert_eq(nn_ctx_synchronize(c->ctx), NN_OK, "fixture: %s", nn_last_error()->message);
    return s->dloss.data;
}
/* Edge: the cuDNN backend takes device targets (read back to the host) as it takes host ones. */
CALL(x_t_device_on_gpu)
{
    int32_t t[2] = {2, 0};
    s->targets.type = NN_INDEX_I32;
    s->targets.data = t;
    nn_status st = xent(c, &s->x, &s->targets, &s->loss);
    cr_assert_eq(st, NN_OK, "host targets: %s", nn_last_error()->message);
    double want[2], got[2];
    cat_read(c, &s->loss, want);
    cr_assert_eq(nn_tensor_fill_constant(c->ctx, &s->loss, -1), NN_OK, "fixture");
    s->targets.data = device_targets(c, s, t);
    st = xent(c, &s->x, &s->targets, &s->loss);
    if (st != NN_OK) return st;
    cat_read(c, &s->loss, got);
    for (int n = 0; n < 2; n++)
        cr_assert_eq(got[n], want[n], "loss[%d] = %.9g with device targets, %.9g with host ones", n,
                     got[n], want[n]);
    return st;
}
/* A device target outside [0, C) is found as a host one is, and nothing is written. */
CALL(x_t_device_bad_on_gpu)
{
    int32_t t[2] = {1, 3};
    s->targets.type = NN_INDEX_I32;
    s->targets.data = device_targets(c, s, t);
    double before[2];
    cat_read(c, &s->loss, before);
    return unchanged(c, &s->loss, before, 2, xent(c, &s->x, &s->targets, &s->loss));
}
CALL(x_x_rank1)
{
    nn_tensor x = cat_view_on(&s->x, 1, (int64_t[]){6}, 0);
    return xent(c, &x, &s->targets, &s->loss);
}
CALL(x_loss_dims)
{
    nn_tensor loss = cat_view_on(&s->loss, 1, (int64_t[]){1}, 0);
    return xent(c, &s->x, &s->targets, &loss);
}
CALL(x_loss_rank)
{
    nn_tensor loss = cat_view_on(&s->loss, 2, (int64_t[]){2, 1}, 0);
    return xent(c, &s->x, &s->targets, &loss);
}
CALL(x_loss_like_x)
{
    /* loss must drop C: x's own dims are wrong */
    return xent(c, &s->x, &s->targets, &s->y);
}
CALL(x_loss_dtype)
{
    nn_tensor loss = s->loss;
    loss.dtype = NN_DTYPE_F16;
    return xent(c, &s->x, &s->targets, &loss);
}
CALL(x_x_dtype_bad)
{
    nn_tensor x = s->x;
    x.dtype = (nn_dtype)17;
    return xent(c, &x, &s->targets, &s->loss);
}
CALL(x_loss_on_x)
{
    nn_tensor loss = cat_view_on(&s->x, 1, L, 3);
    return xent(c, &s->x, &s->targets, &loss);
}
CALL(x_loss_zero_stride)
{
    nn_tensor loss = s->loss;
    loss.strides[0] = 0;
    return xent(c, &s->x, &s->targets, &loss);
}
CALL(x_x_strided)
{
    nn_tensor x = cat_transposed(&s->x);
    return xent(c, &x, &s->targets, &s->loss);
}
CALL(x_loss_strided)
{
    nn_tensor loss = cat_view_on(&s->y, 1, L, 0);
    loss.strides[0] = 2;
    return xent(c, &s->x, &s->targets, &loss);
}
CALL(x_claim_x)
{
    nn_tensor t = cat_claim_other_space(c, &s->x);
    return xent(c, &t, &s->targets, &s->loss);
}
CALL(x_claim_loss)
{
    nn_tensor t = cat_claim_other_space(c, &s->loss);
    return xent(c, &s->x, &s->targets, &t);
}
CALL(x_space_x)
{
    nn_tensor t = cat_wrong_space(c, &s->x);
    return xent(c, &t, &s->targets, &s->loss);
}
CALL(x_space_loss)
{
    nn_tensor t = cat_wrong_space(c, &s->loss);
    return xent(c, &s->x, &s->targets, &t);
}
CALL(x_x_overflow)
{
    nn_tensor x = s->x;
    x.dims[1] = INT64_MAX / 2;
    return xent(c, &x, &s->targets, &s->loss);
}
/* Edge: loss = -log softmax(x)[t], with int32 targets. */
CALL(x_values)
{
    int32_t t[2] = {2, 0};
    s->targets.data = t;
    s->targets.type = NN_INDEX_I32;
    nn_status st = xent(c, &s->x, &s->targets, &s->loss);
    if (st != NN_OK) return st;
    double x[6], loss[2];
    cat_read(c, &s->x, x);
    cat_read(c, &s->loss, loss);
    for (int n = 0; n < 2; n++) {
        double m = fmax(x[n * 3], fmax(x[n * 3 + 1], x[n * 3 + 2])), sum = 0;
        for (int k = 0; k < 3; k++)
            sum += exp(x[n * 3 + k] - m);
        double want = -(x[n * 3 + t[n]] - m - log(sum));
        cr_assert(fabs(loss[n] - want) <= 1e-5, "loss[%d] = %.9g, expected %.9g", n, loss[n], want);
    }
    return st;
}
CALL(x_rank3)
{
    /* x 1x3x2: loss and targets 1x2 */
    nn_tensor x = cat_view_on(&s->x, 3, (int64_t[]){1, 3, 2}, 0);
    nn_tensor loss = cat_view_on(&s->loss, 2, (int64_t[]){1, 2}, 0);
    return xent(c, &x, &s->targets, &loss);
}
CALL(x_t_rank3_bad)
{
    /* the second target (position 1) is out of range */
    nn_tensor x = cat_view_on(&s->x, 3, (int64_t[]){1, 3, 2}, 0);
    nn_tensor loss = cat_view_on(&s->loss, 2, (int64_t[]){1, 2}, 0);
    s->t[1] = 5;
    return xent(c, &x, &s->targets, &loss);
}

/* ---- nn_softmax_cross_entropy_backward ---- */

static nn_status x_then_retry(struct cat *c, struct sm *s, nn_status st,
                              nn_softmax_cross_entropy_pullback **pb)
{
    if (st == NN_OK) return st;
    nn_error_info e = *nn_last_error();
    cr_assert_not_null(*pb, "a refused call leaves the pullback with the caller");
    cr_assert_eq(nn_softmax_cross_entropy_backward(c->ctx, pb, &s->dloss, &s->dx), NN_OK,
                 "a valid retry with the same pullback: %s", nn_last_error()->message);
    cr_assert_null(*pb);
    cr_assert_str_eq(nn_last_error()->message, e.message, "the record changed");
    return st;
}
static nn_status xbwd(struct cat *c, struct sm *s, const nn_tensor *dloss, nn_tensor *dx)
{
    nn_softmax_cross_entropy_pullback *pb = xent_pullback(c, s);
    return x_then_retry(c, s, nn_softmax_cross_entropy_backward(c->ctx, &pb, dloss, dx), &pb);
}

#define XB "nn_softmax_cross_entropy_backward"
CALL(xb_null_ctx)
{
    nn_softmax_cross_entropy_pullback *pb = xent_pullback(c, s);
    return x_then_retry(c, s, nn_softmax_cross_entropy_backward(NULL, &pb, &s->dloss, &s->dx), &pb);
}
CALL(xb_null_pullback)
{
    return nn_softmax_cross_entropy_backward(c->ctx, NULL, &s->dloss, &s->dx);
}
CALL(xb_null_star)
{
    nn_softmax_cross_entropy_pullback *pb = NULL;
    return nn_softmax_cross_entropy_backward(c->ctx, &pb, &s->dloss, &s->dx);
}
CALL(xb_twice)
{
    nn_softmax_cross_entropy_pullback *pb = xent_pullback(c, s), *copy = pb;
    cr_assert_eq(nn_softmax_cross_entropy_backward(c->ctx, &pb, &s->dloss, &s->dx), NN_OK, "first");
    return nn_softmax_cross_entropy_backward(c->ctx, &copy, &s->dloss, &s->dx);
}
CALL(xb_freed)
{
    nn_softmax_cross_entropy_pullback *pb = xent_pullback(c, s), *copy = pb;
    cr_assert_eq(nn_softmax_cross_entropy_pullback_free(&pb), NN_OK, "free");
    return nn_softmax_cross_entropy_backward(c->ctx, &copy, &s->dloss, &s->dx);
}
CALL(xb_other_ctx)
{
    nn_softmax_cross_entropy_pullback *pb = xent_pullback(c, s);
    return x_then_retry(
        c, s, nn_softmax_cross_entropy_backward(cat_other_ctx(c), &pb, &s->dloss, &s->dx), &pb);
}
CALL(xb_softmax_pullback)
{
    nn_softmax_pullback *sp = pullback(c, s);
    nn_softmax_cross_entropy_pullback *pb = (nn_softmax_cross_entropy_pullback *)sp;
    nn_status st = nn_softmax_cross_entropy_backward(c->ctx, &pb, &s->dloss, &s->dx);
    cr_assert_eq(nn_softmax_pullback_free(&sp), NN_OK, "intact");
    return st;
}
CALL(xb_null_dloss)
{
    return xbwd(c, s, NULL, &s->dx);
}
CALL(xb_null_dx)
{
    return xbwd(c, s, &s->dloss, NULL);
}
CALL(xb_dloss_dims)
{
    nn_tensor d = cat_view_on(&s->dloss, 1, (int64_t[]){1}, 0);
    return xbwd(c, s, &d, &s->dx);
}
CALL(xb_dloss_like_x)
{
    return xbwd(c, s, &s->dy, &s->dx);
}
CALL(xb_dx_dims)
{
    nn_tensor dx = cat_view_on(&s->dx, 2, (int64_t[]){2, 2}, 0);
    return xbwd(c, s, &s->dloss, &dx);
}
CALL(xb_dx_like_loss)
{
    nn_tensor dx = cat_view_on(&s->dx, 1, L, 0);
    return xbwd(c, s, &s->dloss, &dx);
}
CALL(xb_dloss_dtype)
{
    nn_tensor d = s->dloss;
    d.dtype = NN_DTYPE_F64;
    d.dims[0] = 1;
    return xbwd(c, s, &d, &s->dx);
}
CALL(xb_dx_dtype)
{
    nn_tensor dx = s->dx;
    dx.dtype = NN_DTYPE_F16;
    return xbwd(c, s, &s->dloss, &dx);
}
CALL(xb_claim_dloss)
{
    nn_tensor t = cat_claim_other_space(c, &s->dloss);
    return xbwd(c, s, &t, &s->dx);
}
CALL(xb_claim_dx)
{
    nn_tensor t = cat_claim_other_space(c, &s->dx);
    return xbwd(c, s, &s->dloss, &t);
}
CALL(xb_space_dloss)
{
    nn_tensor t = cat_wrong_space(c, &s->dloss);
    return xbwd(c, s, &t, &s->dx);
}
CALL(xb_space_dx)
{
    nn_tensor t = cat_wrong_space(c, &s->dx);
    return xbwd(c, s, &s->dloss, &t);
}
CALL(xb_dx_on_dloss)
{
    nn_tensor d = cat_view_on(&s->dx, 1, L, 4);
    return xbwd(c, s, &d, &s->dx);
}
CALL(xb_dx_on_x)
{
    return xbwd(c, s, &s->dloss, &s->x);
}
CALL(xb_dx_self)
{
    nn_tensor dx = s->dx;
    dx.strides[0] = 1;
    return xbwd(c, s, &s->dloss, &dx);
}
CALL(xb_dloss_strided)
{
    nn_tensor d = cat_view_on(&s->dy, 1, L, 0);
    d.strides[0] = 3;
    return xbwd(c, s, &d, &s->dx);
}
/* Edge: dx = (softmax(x) - onehot(t)) * dloss. */
CALL(xb_values)
{
    nn_softmax_cross_entropy_pullback *pb = xent_pullback(c, s);
    nn_status st = nn_softmax_cross_entropy_backward(c->ctx, &pb, &s->dloss, &s->dx);
    if (st != NN_OK) return st;
    cr_assert_null(pb, "consumed");
    double x[6], dl[2], dx[6];
    cat_read(c, &s->x, x);
    cat_read(c, &s->dloss, dl);
    cat_read(c, &s->dx, dx);
    for (int n = 0; n < 2; n++) {
        double m = fmax(x[n * 3], fmax(x[n * 3 + 1], x[n * 3 + 2])), sum = 0;
        for (int k = 0; k < 3; k++)
            sum += exp(x[n * 3 + k] - m);
        for (int k = 0; k < 3; k++) {
            double want = (exp(x[n * 3 + k] - m) / sum - (k == s->t[n])) * dl[n];
            cr_assert(fabs(dx[n * 3 + k] - want) <= 1e-5, "dx[%d][%d] = %.9g, expected %.9g", n, k,
                      dx[n * 3 + k], want);
        }
    }
    return st;
}
/* Edge: the targets are copied by forward; changing them after does not change backward. */
CALL(xb_targets_copied)
{
    nn_softmax_cross_entropy_pullback *pb = xent_pullback(c, s);
    s->t[0] = -100;
    return nn_softmax_cross_entropy_backward(c->ctx, &pb, &s->dloss, &s->dx);
}

/* ---- nn_softmax_cross_entropy_pullback_free ---- */

#define XPF "nn_softmax_cross_entropy_pullback_free"
static nn_status xpf_null(struct cat *c)
{
    (void)c;
    return nn_softmax_cross_entropy_pullback_free(NULL);
}
static nn_status xpf_star_null(struct cat *c)
{
    (void)c;
    nn_softmax_cross_entropy_pullback *pb = NULL;
    return nn_softmax_cross_entropy_pullback_free(&pb);
}
CALL(xpf_twice)
{
    nn_softmax_cross_entropy_pullback *pb = xent_pullback(c, s), *copy = pb;
    cr_assert_eq(nn_softmax_cross_entropy_pullback_free(&pb), NN_OK, "first free");
    return nn_softmax_cross_entropy_pullback_free(&copy);
}
CALL(xpf_consumed)
{
    nn_softmax_cross_entropy_pullback *pb = xent_pullback(c, s), *copy = pb;
    cr_assert_eq(nn_softmax_cross_entropy_backward(c->ctx, &pb, &s->dloss, &s->dx), NN_OK,
                 "backward");
    return nn_softmax_cross_entropy_pullback_free(&copy);
}
CALL(xpf_softmax)
{
    nn_softmax_pullback *sp = pullback(c, s);
    nn_softmax_cross_entropy_pullback *pb = (nn_softmax_cross_entropy_pullback *)sp;
    nn_status st = nn_softmax_cross_entropy_pullback_free(&pb);
    cr_assert_eq(nn_softmax_pullback_free(&sp), NN_OK, "intact");
    return st;
}

/* The workspace queries: bytes stay untouched on failure; the softmax takes no pool memory, nor
 * does the reference. */
static nn_status sws(struct cat *c, const nn_softmax_params *p, const nn_tensor *x,
                     nn_softmax_pass pass)
{
    size_t n = CAT_WS_UNSET; /* the softmax takes no pool memory on either backend */
    nn_status st = nn_softmax_workspace_size(c->ctx, p, x, pass, &n);
    return cat_ws_answer(c, st, n, 1);
}
static nn_status xws(struct cat *c, const nn_tensor *x, nn_softmax_pass pass)
{
    size_t n = CAT_WS_UNSET;
    nn_status st = nn_softmax_cross_entropy_workspace_size(c->ctx, x, pass, &n);
    st = cat_ws_answer(c, st, n, 0);
    if (st == NN_OK && c->gpu)
        cr_assert_eq(n, pass == NN_SOFTMAX_PASS_FORWARD ? 6 * sizeof(float) + 2 * 8 : 0,
                     "forward: the log-softmax (x's 6 floats) and 2 int64 targets; backward: "
                     "nothing; got %zu",
                     n);
    return st;
}
CALL(sws_null_ctx)
{
    size_t n;
    (void)c;
    return nn_softmax_workspace_size(NULL, &s->p, &s->x, NN_SOFTMAX_PASS_FORWARD, &n);
}
CALL(sws_null_bytes)
{
    return nn_softmax_workspace_size(c->ctx, &s->p, &s->x, NN_SOFTMAX_PASS_FORWARD, NULL);
}
CALL(sws_null_p)
{
    return sws(c, NULL, &s->x, NN_SOFTMAX_PASS_FORWARD);
}
CALL(sws_null_x)
{
    return sws(c, &s->p, NULL, NN_SOFTMAX_PASS_BACKWARD);
}
CALL(sws_pass_2)
{
    return sws(c, &s->p, &s->x, (nn_softmax_pass)2);
}
CALL(sws_mode)
{
    s->p.mode = (nn_softmax_mode)3;
    return sws(c, &s->p, &s->x, NN_SOFTMAX_PASS_FORWARD);
}
CALL(sws_reserved)
{
    s->p.reserved[3] = 9;
    return sws(c, &s->p, &s->x, NN_SOFTMAX_PASS_FORWARD);
}
CALL(sws_x_rank1)
{
    return sws(c, &s->p, &s->loss, NN_SOFTMAX_PASS_FORWARD);
}
CALL(sws_x_dtype)
{
    nn_tensor x = s->x;
    x.dtype = (nn_dtype)17;
    return sws(c, &s->p, &x, NN_SOFTMAX_PASS_FORWARD);
}
CALL(sws_x_strided)
{
    nn_tensor x = cat_transposed(&s->x);
    return sws(c, &s->p, &x, NN_SOFTMAX_PASS_FORWARD);
}
CALL(sws_x_space)
{
    nn_tensor x = cat_wrong_space(c, &s->x);
    return sws(c, &s->p, &x, NN_SOFTMAX_PASS_FORWARD);
}
CALL(sws_x_count_overflow)
{
    nn_tensor x = cat_count_overflow(&s->x);
    return sws(c, &s->p, &x, NN_SOFTMAX_PASS_FORWARD);
}
CALL(sws_x_extent_overflow)
{
    nn_tensor x = cat_extent_overflow(&s->x);
    return sws(c, &s->p, &x, NN_SOFTMAX_PASS_BACKWARD);
}
CALL(sws_log_backward)
{
    s->p.mode = NN_SOFTMAX_MODE_LOG;
    return sws(c, &s->p, &s->x, NN_SOFTMAX_PASS_BACKWARD);
}
CALL(xws_null_ctx)
{
    size_t n;
    (void)c;
    return nn_softmax_cross_entropy_workspace_size(NULL, &s->x, NN_SOFTMAX_PASS_FORWARD, &n);
}
CALL(xws_null_bytes)
{
    return nn_softmax_cross_entropy_workspace_size(c->ctx, &s->x, NN_SOFTMAX_PASS_FORWARD, NULL);
}
CALL(xws_null_x)
{
    (void)s;
    return xws(c, NULL, NN_SOFTMAX_PASS_FORWARD);
}
CALL(xws_pass_negative)
{
    return xws(c, &s->x, (nn_softmax_pass)-1);
}
CALL(xws_null_xdata)
{
    nn_tensor x = s->x;
    x.data = NULL;
    return xws(c, &x, NN_SOFTMAX_PASS_FORWARD);
}
CALL(xws_x_rank1)
{
    return xws(c, &s->loss, NN_SOFTMAX_PASS_BACKWARD);
}
CALL(xws_x_dtype)
{
    nn_tensor x = s->x;
    x.dtype = (nn_dtype)17;
    return xws(c, &x, NN_SOFTMAX_PASS_FORWARD);
}
CALL(xws_x_strided)
{
    nn_tensor x = cat_transposed(&s->x);
    return xws(c, &x, NN_SOFTMAX_PASS_BACKWARD);
}
CALL(xws_x_space)
{
    nn_tensor x = cat_wrong_space(c, &s->x);
    return xws(c, &x, NN_SOFTMAX_PASS_FORWARD);
}
CALL(xws_x_count_overflow)
{
    nn_tensor x = cat_count_overflow(&s->x);
    return xws(c, &x, NN_SOFTMAX_PASS_FORWARD);
}
CALL(xws_x_extent_overflow)
{
    nn_tensor x = cat_extent_overflow(&s->x);
    return xws(c, &x, NN_SOFTMAX_PASS_BACKWARD);
}
CALL(xws_forward)
{
    return xws(c, &s->x, NN_SOFTMAX_PASS_FORWARD);
}
CALL(xws_backward)
{
    return xws(c, &s->x, NN_SOFTMAX_PASS_BACKWARD);
}

/* Shapes beyond cuDNN's int sizes, as views on the row's small tensors (never read: the queries
 * read dims only, and the call refuses before any cuDNN call). The reference takes any size. */
static const nn_tensor *highest(const struct sm *s, const nn_tensor **lowest)
{
    const nn_tensor *ts[] = {&s->x, &s->y, &s->dy, &s->dx, &s->loss, &s->dloss}, *hi = ts[0];
    *lowest = ts[0];
    for (int i = 1; i < 6; i++) {
        if ((char *)ts[i]->data > (char *)hi->data) hi = ts[i];
        if ((char *)ts[i]->data < (char *)(*lowest)->data) *lowest = ts[i];
    }
    return hi;
}
CALL(sws_c_beyond_int)
{
    nn_tensor x = cat_view_on(&s->x, 2, (int64_t[]){1, INT64_C(1) << 31}, 0);
    return sws(c, &s->p, &x, NN_SOFTMAX_PASS_FORWARD);
}
CALL(sws_cs_beyond_int)
{
    nn_tensor x = cat_view_on(&s->x, 3, (int64_t[]){1, 2, INT64_C(1) << 30}, 0);
    return sws(c, &s->p, &x, NN_SOFTMAX_PASS_BACKWARD);
}
/* On cuDNN the forward call is refused first, with the same status: x on the highest of the
 * row's tensors and the loss on the lowest, so that they do not overlap. */
CALL(xws_c_beyond_int)
{
    const nn_tensor *lo, *hi = highest(s, &lo);
    nn_tensor x = cat_view_on(hi, 2, (int64_t[]){1, INT64_C(1) << 31}, 0);
    if (c->gpu) {
        nn_tensor loss = cat_view_on(lo, 1, (int64_t[]){1}, 0);
        cr_assert_eq(xent(c, &x, &s->targets, &loss), NN_E_UNSUPPORTED, "the forward call: %s",
                     nn_last_error()->message);
    }
    return xws(c, &x, NN_SOFTMAX_PASS_FORWARD);
}
CALL(xws_cs_beyond_int)
{
    nn_tensor x = cat_view_on(&s->x, 3, (int64_t[]){1, 2, INT64_C(1) << 30}, 0);
    return xws(c, &x, NN_SOFTMAX_PASS_BACKWARD);
}

/* Under a pool limit no allocation meets (cat_pool_starve): the cross-entropy's queries make the
 * shape's scratch, whose zeros are pool memory, so they are refused as the forward call would
 * be; the softmax's take no pool memory and answer. */
static nn_status xws_starved(struct cat *c, struct sm *s, nn_softmax_pass pass)
{
    struct cat_pool_mark m;
    cat_pool_starve(c, &m);
    nn_status st = xws(c, &s->x, pass);
    cat_pool_restore(&m, 0);
    return st;
}
CALL(xws_starved_forward)
{
    return xws_starved(c, s, NN_SOFTMAX_PASS_FORWARD);
}
CALL(xws_starved_backward)
{
    return xws_starved(c, s, NN_SOFTMAX_PASS_BACKWARD);
}
CALL(sws_starved)
{
    struct cat_pool_mark m;
    cat_pool_starve(c, &m);
    nn_status st = sws(c, &s->p, &s->x, NN_SOFTMAX_PASS_FORWARD);
    if (st == NN_OK) st = sws(c, &s->p, &s->x, NN_SOFTMAX_PASS_BACKWARD);
    cat_pool_restore(&m, 1);
    return st;
}

#define E   NN_E_INVALID_ARG
#define S   NN_E_SHAPE
#define D   NN_E_DTYPE
#define M   NN_E_MEMSPACE
#define U   NN_E_UNSUPPORTED
#define P   NN_E_PULLBACK
#define O   NN_E_OVERFLOW
#define F   "nn_softmax_forward"
#define BW  "nn_softmax_backward"
#define PF  "nn_softmax_pullback_free"
#define XF  "nn_softmax_cross_entropy_forward"
#define SWS "nn_softmax_workspace_size"
#define XWS "nn_softmax_cross_entropy_workspace_size"

static const struct cat_row rows[] = {
    ROW("params_default p NULL", "nn_softmax_params_default", "p", E, pd_null),

    ROW("forward ctx NULL", F, "ctx", E, f_null_ctx),
    ROW("forward p NULL", F, "p", E, f_null_p),
    ROW("forward x NULL", F, "x", E, f_null_x),
    ROW("forward y NULL", F, "y", E, f_null_y),
    ROW("forward x.data NULL", F, "x.data", E, f_null_xdata),
    ROW("forward failure sets *pullback_out NULL", F, "y", E, f_pullback_null_on_failure),
    ROW("forward mode 2", F, "p.mode", E, f_mode2),
    ROW("forward mode -1", F, "p.mode", E, f_mode_neg),
    ROW("forward reserved[0]", F, "p.reserved[0]", E, f_res0),
    ROW("forward reserved[3]", F, "p.reserved[3]", E, f_res3),
    ROW("forward x rank 1", F, "x.rank", S, f_x_rank1),
    ROW("forward x rank 0", F, "x.rank", E, f_x_rank0),
    ROW("forward x dim 0", F, "x.dims[1]", E, f_x_dim0),
    ROW("forward y dims", F, "y.dims[1]", S, f_y_dims),
    ROW("forward y rank", F, "y.rank", S, f_y_rank),
    ROW("forward y dtype", F, "y.dtype", D, f_y_dtype),
    ROW("forward x dtype 4", F, "x.dtype", D, f_x_dtype_bad),
    ROW("forward y reserved", F, "y.reserved[0]", E, f_y_reserved),
    ROW("forward y misaligned", F, "y.data", E, f_y_misaligned),
    ROW("forward x device -2", F, "x.device", E, f_x_device_neg),
    ROW("forward x element count overflows", F, "x", O, f_x_overflow),
    ROW("forward x strided", F, "x", U, f_x_strided),
    ROW("forward y strided", F, "y", U, f_y_strided),
    ROW("forward x broadcast", F, "x", U, f_x_broadcast),
    ROW("forward x space label", F, "x", M, f_claim_x),
    ROW("forward y space label", F, "y", M, f_claim_y),
    ROW("forward x wrong space", F, "x", M, f_space_x),
    ROW("forward y wrong space", F, "y", M, f_space_y),
    ROW("forward y is x", F, "y", E, f_y_is_x),
    ROW("forward y inside x", F, "y", E, f_y_in_x),
    ROW("forward y zero strides", F, "y", E, f_y_zero_strides),
    ROW("forward y interleaved strides", F, "y", E, f_y_interleaved),
    ROW("forward softmax values (edge)", F, NULL, NN_OK, f_values),
    ROW("forward log-softmax values (edge)", F, NULL, NN_OK, f_log_values),
    ROW("forward rank 4 (edge)", F, NULL, NN_OK, f_rank4),
    ROW("forward one class (edge)", F, NULL, NN_OK, f_c1),
    ROW("forward f16 (edge)", F, NULL, NN_OK, f_f16),

    ROW("backward ctx NULL", BW, "ctx", E, b_null_ctx),
    ROW("backward pullback NULL", BW, "pullback", P, b_null_pullback),
    ROW("backward *pullback NULL", BW, "pullback", P, b_null_star),
    ROW("backward pullback used twice", BW, "pullback", P, b_twice),
    ROW("backward pullback freed", BW, "pullback", P, b_freed),
    ROW("backward pullback of another context", BW, "pullback", P, b_other_ctx),
    ROW("backward cross-entropy pullback", BW, "pullback", P, b_xent_pullback),
    ROW("backward pool pullback", BW, "pullback", P, b_pool_pullback),
    ROW("backward dy NULL", BW, "dy", E, b_null_dy),
    ROW("backward dx NULL", BW, "dx", E, b_null_dx),
    ROW("backward dy dims", BW, "dy.dims[0]", S, b_dy_dims),
    ROW("backward dx dims", BW, "dx.dims[1]", S, b_dx_dims),
    ROW("backward dx rank", BW, "dx.rank", S, b_dx_rank),
    ROW("backward dy dtype", BW, "dy.dtype", D, b_dy_dtype),
    ROW("backward dx dtype", BW, "dx.dtype", D, b_dx_dtype),
    ROW("backward dy space label", BW, "dy", M, b_claim_dy),
    ROW("backward dx space label", BW, "dx", M, b_claim_dx),
    ROW("backward dy wrong space", BW, "dy", M, b_space_dy),
    ROW("backward dx wrong space", BW, "dx", M, b_space_dx),
    ROW("backward dx is dy", BW, "dx", E, b_dx_is_dy),
    ROW("backward dx on the saved y", BW, "dx", E, b_dx_on_y),
    ROW("backward dx zero stride", BW, "dx", E, b_dx_self),
    ROW("backward dx strided", BW, "dx", U, b_dx_strided),
    ROW("backward dy strided", BW, "dy", U, b_dy_strided),
    ROW("backward accumulate, dy = 1 (edge)", BW, NULL, NN_OK, b_accumulate),

    ROW("pullback_free NULL (edge)", PF, NULL, NN_OK, pf_null),
    ROW("pullback_free *NULL (edge)", PF, NULL, NN_OK, pf_star_null),
    ROW("pullback_free twice", PF, "pullback", P, pf_twice),
    ROW("pullback_free consumed", PF, "pullback", P, pf_consumed),
    ROW("pullback_free cross-entropy pullback", PF, "pullback", P, pf_xent),

    ROW("xent forward ctx NULL", XF, "ctx", E, x_null_ctx),
    ROW("xent forward x NULL", XF, "x", E, x_null_x),
    ROW("xent forward targets NULL", XF, "targets", E, x_null_targets),
    ROW("xent forward targets.data NULL", XF, "targets.data", E, x_null_tdata),
    ROW("xent forward loss NULL", XF, "loss", E, x_null_loss),
    ROW("xent forward failure sets *pullback_out NULL", XF, "targets[1]", E,
        x_pullback_null_on_failure),
    ROW("xent forward targets.type 0", XF, "targets.type", E, x_type0),
    ROW("xent forward targets.type 3", XF, "targets.type", E, x_type3),
    ROW("xent forward targets misaligned", XF, "targets.data", E, x_t_misaligned),
    ROW("xent forward targets.reserved[0]", XF, "targets.reserved[0]", E, x_t_res0),
    ROW("xent forward targets.reserved[1]", XF, "targets.reserved[1]", E, x_t_res1),
    ROW("xent forward target -1", XF, "targets[0]", E, x_t_neg),
    ROW("xent forward target C", XF, "targets[1]", E, x_t_c),
    ROW("xent forward target INT64_MAX", XF, "targets[1]", E, x_t_max),
    ROW("xent forward target INT64_MIN", XF, "targets[0]", E, x_t_min),
    ROW("xent forward int32 target -7", XF, "targets[1]", E, x_t32_bad),
    ROW_ON(CAT_REF_ONLY, "xent forward device targets on the reference", XF, "targets.data", M,
           x_t_device_on_ref),
    ROW_ON(CAT_GPU_ONLY, "xent forward device targets on cuDNN (edge)", XF, NULL, NN_OK,
           x_t_device_on_gpu),
    ROW_ON(CAT_GPU_ONLY, "xent forward device target C on cuDNN", XF, "targets[1]", E,
           x_t_device_bad_on_gpu),
    ROW("xent forward x rank 1", XF, "x.rank", S, x_x_rank1),
    ROW("xent forward loss dims", XF, "loss.dims[0]", S, x_loss_dims),
    ROW("xent forward loss rank", XF, "loss.rank", S, x_loss_rank),
    ROW("xent forward loss with x's dims", XF, "loss.rank", S, x_loss_like_x),
    ROW("xent forward loss dtype", XF, "loss.dtype", D, x_loss_dtype),
    ROW("xent forward x dtype 17", XF, "x.dtype", D, x_x_dtype_bad),
    ROW("xent forward loss on x", XF, "loss", E, x_loss_on_x),
    ROW("xent forward loss zero stride", XF, "loss", E, x_loss_zero_stride),
    ROW("xent forward x strided", XF, "x", U, x_x_strided),
    ROW("xent forward loss strided", XF, "loss", U, x_loss_strided),
    ROW("xent forward x space label", XF, "x", M, x_claim_x),
    ROW("xent forward loss space label", XF, "loss", M, x_claim_loss),
    ROW("xent forward x wrong space", XF, "x", M, x_space_x),
    ROW("xent forward loss wrong space", XF, "loss", M, x_space_loss),
    ROW("xent forward x element count overflows", XF, "x", O, x_x_overflow),
    ROW("xent forward values, int32 targets (edge)", XF, NULL, NN_OK, x_values),
    ROW("xent forward rank 3 (edge)", XF, NULL, NN_OK, x_rank3),
    ROW("xent forward rank 3, bad target at position 1", XF, "targets[1]", E, x_t_rank3_bad),

    ROW("xent backward ctx NULL", XB, "ctx", E, xb_null_ctx),
    ROW("xent backward pullback NULL", XB, "pullback", P, xb_null_pullback),
    ROW("xent backward *pullback NULL", XB, "pullback", P, xb_null_star),
    ROW("xent backward pullback used twice", XB, "pullback", P, xb_twice),
    ROW("xent backward pullback freed", XB, "pullback", P, xb_freed),
    ROW("xent backward pullback of another context", XB, "pullback", P, xb_other_ctx),
    ROW("xent backward softmax pullback", XB, "pullback", P, xb_softmax_pullback),
    ROW("xent backward dloss NULL", XB, "dloss", E, xb_null_dloss),
    ROW("xent backward dx NULL", XB, "dx", E, xb_null_dx),
    ROW("xent backward dloss dims", XB, "dloss.dims[0]", S, xb_dloss_dims),
    ROW("xent backward dloss with x's dims", XB, "dloss.rank", S, xb_dloss_like_x),
    ROW("xent backward dx dims", XB, "dx.dims[1]", S, xb_dx_dims),
    ROW("xent backward dx with the loss's dims", XB, "dx.rank", S, xb_dx_like_loss),
    ROW("xent backward dloss dtype", XB, "dloss.dtype", D, xb_dloss_dtype),
    ROW("xent backward dx dtype", XB, "dx.dtype", D, xb_dx_dtype),
    ROW("xent backward dloss space label", XB, "dloss", M, xb_claim_dloss),
    ROW("xent backward dx space label", XB, "dx", M, xb_claim_dx),
    ROW("xent backward dloss wrong space", XB, "dloss", M, xb_space_dloss),
    ROW("xent backward dx wrong space", XB, "dx", M, xb_space_dx),
    ROW("xent backward dx on dloss", XB, "dx", E, xb_dx_on_dloss),
    ROW("xent backward dx on the saved x", XB, "dx", E, xb_dx_on_x),
    ROW("xent backward dx interleaved", XB, "dx", E, xb_dx_self),
    ROW("xent backward dloss strided", XB, "dloss", U, xb_dloss_strided),
    ROW("xent backward values (edge)", XB, NULL, NN_OK, xb_values),
    ROW("xent backward targets copied by forward (edge)", XB, NULL, NN_OK, xb_targets_copied),

    ROW("xent pullback_free NULL (edge)", XPF, NULL, NN_OK, xpf_null),
    ROW("xent pullback_free *NULL (edge)", XPF, NULL, NN_OK, xpf_star_null),
    ROW("xent pullback_free twice", XPF, "pullback", P, xpf_twice),
    ROW("xent pullback_free consumed", XPF, "pullback", P, xpf_consumed),
    ROW("xent pullback_free softmax pullback", XPF, "pullback", P, xpf_softmax),

    ROW("workspace_size ctx NULL", SWS, "ctx", E, sws_null_ctx),
    ROW("workspace_size bytes NULL", SWS, "bytes", E, sws_null_bytes),
    ROW("workspace_size p NULL", SWS, "p", E, sws_null_p),
    ROW("workspace_size x NULL", SWS, "x", E, sws_null_x),
    ROW("workspace_size pass 2", SWS, "pass", E, sws_pass_2),
    ROW("workspace_size mode 3", SWS, "p.mode", E, sws_mode),
    ROW("workspace_size reserved[3]", SWS, "p.reserved[3]", E, sws_reserved),
    ROW("workspace_size x rank 1", SWS, "x.rank", S, sws_x_rank1),
    ROW("workspace_size x dtype 17", SWS, "x.dtype", D, sws_x_dtype),
    ROW("workspace_size x strided", SWS, "x", U, sws_x_strided),
    ROW("workspace_size x wrong space", SWS, "x", M, sws_x_space),
    ROW("workspace_size x element count overflows", SWS, "x", O, sws_x_count_overflow),
    ROW("workspace_size x byte extent overflows", SWS, "x", O, sws_x_extent_overflow),
    ROW("workspace_size log backward (edge)", SWS, NULL, NN_OK, sws_log_backward),
    ROW("xent workspace_size ctx NULL", XWS, "ctx", E, xws_null_ctx),
    ROW("xent workspace_size bytes NULL", XWS, "bytes", E, xws_null_bytes),
    ROW("xent workspace_size x NULL", XWS, "x", E, xws_null_x),
    ROW("xent workspace_size pass -1", XWS, "pass", E, xws_pass_negative),
    ROW("xent workspace_size x.data NULL", XWS, "x.data", E, xws_null_xdata),
    ROW("xent workspace_size x rank 1", XWS, "x.rank", S, xws_x_rank1),
    ROW("xent workspace_size x dtype 17", XWS, "x.dtype", D, xws_x_dtype),
    ROW("xent workspace_size x strided", XWS, "x", U, xws_x_strided),
    ROW("xent workspace_size x wrong space", XWS, "x", M, xws_x_space),
    ROW("xent workspace_size x element count overflows", XWS, "x", O, xws_x_count_overflow),
    ROW("xent workspace_size x byte extent overflows", XWS, "x", O, xws_x_extent_overflow),
    ROW("xent workspace_size forward (edge)", XWS, NULL, NN_OK, xws_forward),
    ROW("xent workspace_size backward (edge)", XWS, NULL, NN_OK, xws_backward),
    ROW2("workspace_size C beyond int (cuDNN)", SWS, "x", NN_OK, U, sws_c_beyond_int),
    ROW2("workspace_size C x trailing beyond int (cuDNN)", SWS, "x", NN_OK, U, sws_cs_beyond_int),
    ROW2("xent workspace_size C beyond int (cuDNN), as the call", XWS, "x", NN_OK, U,
         xws_c_beyond_int),
    ROW2("xent workspace_size C x trailing beyond int (cuDNN)", XWS, "x", NN_OK, U,
         xws_cs_beyond_int),
    ROW_ON(CAT_GPU_ONLY, "xent workspace_size forward under a 1-byte pool limit (the zeros)", XWS,
           "limit", NN_E_OOM_DEVICE, xws_starved_forward),
    ROW_ON(CAT_GPU_ONLY, "xent workspace_size backward under a 1-byte pool limit (the zeros)", XWS,
           "limit", NN_E_OOM_DEVICE, xws_starved_backward),
    ROW_ON(CAT_GPU_ONLY, "workspace_size under a 1-byte pool limit (edge: no pool use)", SWS, NULL,
           NN_OK, sws_starved),
};

CAT_SUBJECT(softmax, rows)

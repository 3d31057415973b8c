/* Catalogue rows: layer normalisation (include/nnprim/layernorm.h). Each row makes its operands
 * (x y dy dx 2x3, gamma beta dgamma dbeta 3) in the context's memory and frees them after. */
#include <math.h>
#include <string.h>

#include "catalogue.h"
#include "catalogue_family.h"

struct ln {
    nn_layernorm_params p;
    nn_tensor x, y, dy, dx, g, b, dg, db;
};

static const int64_t X[] = {2, 3}, G[] = {3};

static void ln_setup(struct cat *c, struct ln *s)
{
    cr_assert_eq(nn_layernorm_params_default(&s->p), NN_OK, "fixture");
    s->x = cat_tensor(c, NN_DTYPE_F32, 2, X, 301);
    s->y = cat_tensor(c, NN_DTYPE_F32, 2, X, 302);
    s->dy = cat_tensor(c, NN_DTYPE_F32, 2, X, 303);
    s->dx = cat_tensor(c, NN_DTYPE_F32, 2, X, 304);
    s->g = cat_tensor(c, NN_DTYPE_F32, 1, G, 305);
    s->b = cat_tensor(c, NN_DTYPE_F32, 1, G, 306);
    s->dg = cat_tensor(c, NN_DTYPE_F32, 1, G, 307);
    s->db = cat_tensor(c, NN_DTYPE_F32, 1, G, 308);
}

static void ln_free(struct cat *c, struct ln *s)
{
    CAT_FREE_TENSORS(c, &s->x, &s->y, &s->dy, &s->dx, &s->g, &s->b, &s->dg, &s->db);
}

/* A row body gets the operands; rows change copies of the views, never s's own. */
#define CALL(fname) CAT_FAMILY_CALL(fname, struct ln, s, ln_setup, ln_free)

static nn_status fwd(struct cat *c, struct ln *s, const nn_tensor *x, const nn_tensor *g,
                     const nn_tensor *b, nn_tensor *y)
{
    return nn_layernorm_forward(c->ctx, &s->p, x, g, b, y, NULL);
}

/* ---- nn_layernorm_params_default ---- */

static nn_status pd_null(struct cat *c)
{
    (void)c;
    return nn_layernorm_params_default(NULL);
}

/* ---- nn_layernorm_forward ---- */

CALL(f_null_ctx)
{
    (void)c;
    return nn_layernorm_forward(NULL, &s->p, &s->x, &s->g, &s->b, &s->y, NULL);
}
CALL(f_null_p)
{
    return nn_layernorm_forward(c->ctx, NULL, &s->x, &s->g, &s->b, &s->y, NULL);
}
CALL(f_null_x)
{
    return fwd(c, s, NULL, &s->g, &s->b, &s->y);
}
CALL(f_null_y)
{
    return fwd(c, s, &s->x, &s->g, &s->b, NULL);
}
CALL(f_null_xdata)
{
    nn_tensor x = s->x;
    x.data = NULL;
    return fwd(c, s, &x, &s->g, &s->b, &s->y);
}
CALL(f_pullback_null_on_failure)
{
    nn_layernorm_pullback *pb = (nn_layernorm_pullback *)c;
    nn_status st = nn_layernorm_forward(c->ctx, &s->p, &s->x, &s->g, &s->b, NULL, &pb);
    cr_assert_null(pb, "*pullback_out must be NULL after a failure");
    return st;
}
CALL(f_k0)
{
    s->p.normalized_rank = 0;
    return fwd(c, s, &s->x, &s->g, &s->b, &s->y);
}
CALL(f_k3)
{
    s->p.normalized_rank = 3;
    return fwd(c, s, &s->x, &s->g, &s->b, &s->y);
}
CALL(f_eps_neg)
{
    s->p.eps = -1e-5;
    return fwd(c, s, &s->x, &s->g, &s->b, &s->y);
}
CALL(f_eps_inf)
{
    s->p.eps = INFINITY;
    return fwd(c, s, &s->x, &s->g, &s->b, &s->y);
}
CALL(f_eps_nan)
{
    s->p.eps = NAN;
    return fwd(c, s, &s->x, &s->g, &s->b, &s->y);
}
CALL(f_res0)
{
    s->p.reserved[0] = 1;
    return fwd(c, s, &s->x, &s->g, &s->b, &s->y);
}
CALL(f_res3)
{
    s->p.reserved[3] = UINT64_MAX;
    return fwd(c, s, &s->x, &s->g, &s->b, &s->y);
}
CALL(f_x_rank0)
{
    nn_tensor x = s->x;
    x.rank = 0;
    return fwd(c, s, &x, &s->g, &s->b, &s->y);
}
CALL(f_x_dim0)
{
    nn_tensor x = s->x;
    x.dims[1] = 0;
    return fwd(c, s, &x, &s->g, &s->b, &s->y);
}
CALL(f_y_dims)
{
    nn_tensor y = cat_view_on(&s->y, 2, (int64_t[]){2, 2}, 0);
    return fwd(c, s, &s->x, &s->g, &s->b, &y);
}
CALL(f_g_dims)
{
    nn_tensor g = cat_view_on(&s->g, 1, (int64_t[]){2}, 0);
    return fwd(c, s, &s->x, &g, &s->b, &s->y);
}
CALL(f_b_rank)
{
    nn_tensor b = cat_view_on(&s->dx, 2, (int64_t[]){2, 3}, 0);
    return fwd(c, s, &s->x, &s->g, &b, &s->y);
}
CALL(f_g_k2)
{
    /* k = 2: gamma must be the whole 2 x 3 */
    s->p.normalized_rank = 2;
    return fwd(c, s, &s->x, &s->g, NULL, &s->y);
}
CALL(f_y_dtype)
{
    nn_tensor y = s->y;
    y.dtype = NN_DTYPE_BF16;
    return fwd(c, s, &s->x, &s->g, &s->b, &y);
}
CALL(f_g_dtype)
{
    nn_tensor g = s->g;
    g.dtype = NN_DTYPE_F16;
    return fwd(c, s, &s->x, &g, &s->b, &s->y);
}
CALL(f_x_dtype_bad)
{
    nn_tensor x = s->x;
    x.dtype = (nn_dtype)17;
    return fwd(c, s, &x, &s->g, &s->b, &s->y);
}
CALL(f_y_misaligned)
{
    nn_tensor y = s->y;
    y.data = (char *)y.data + 2;
    return fwd(c, s, &s->x, &s->g, &s->b, &y);
}
CALL(f_x_overflow)
{
    nn_tensor x = cat_count_overflow(&s->x);
    return fwd(c, s, &x, &s->g, &s->b, &s->y);
}
CALL(f_x_strided)
{
    nn_tensor x = cat_transposed(&s->x);
    return fwd(c, s, &x, NULL, NULL, &s->y);
}
CALL(f_y_strided)
{
    nn_tensor y = cat_transposed(&s->y);
    return fwd(c, s, &s->x, &s->g, &s->b, &y);
}
CALL(f_g_broadcast)
{
    nn_tensor g = s->g;
    g.strides[0] = 0;
    return fwd(c, s, &s->x, &g, &s->b, &s->y);
}
CALL(f_claim_x)
{
    nn_tensor t = cat_claim_other_space(c, &s->x);
    return fwd(c, s, &t, &s->g, &s->b, &s->y);
}
CALL(f_space_g)
{
    nn_tensor t = cat_wrong_space(c, &s->g);
    return fwd(c, s, &s->x, &t, &s->b, &s->y);
}
CALL(f_space_b)
{
    nn_tensor t = cat_wrong_space(c, &s->b);
    return fwd(c, s, &s->x, &s->g, &t, &s->y);
}
CALL(f_space_y)
{
    nn_tensor t = cat_wrong_space(c, &s->y);
    return fwd(c, s, &s->x, &s->g, &s->b, &t);
}
CALL(f_y_is_x)
{
    return fwd(c, s, &s->x, &s->g, &s->b, &s->x);
}
CALL(f_y_on_gamma)
{
    nn_tensor y = cat_view_on(&s->g, 2, (int64_t[]){1, 3}, 0);
    nn_tensor x = cat_view_on(&s->x, 2, (int64_t[]){1, 3}, 0);
    return fwd(c, s, &x, &s->g, &s->b, &y);
}
CALL(f_y_zero_strides)
{
    nn_tensor y = s->y;
    memset(y.strides, 0, sizeof y.strides);
    return fwd(c, s, &s->x, &s->g, &s->b, &y);
}
/* Edge: the values against the definition, in double. */
CALL(f_values)
{
    nn_status st = fwd(c, s, &s->x, &s->g, &s->b, &s->y);
    if (st != NN_OK) return st;
    double x[6], g[3], b[3], y[6];
    cat_read(c, &s->x, x);
    cat_read(c, &s->g, g);
    cat_read(c, &s->b, b);
    cat_read(c, &s->y, y);
    for (int r = 0; r < 2; r++) {
        double m = (x[r * 3] + x[r * 3 + 1] + x[r * 3 + 2]) / 3, v = 0;
        for (int i = 0; i < 3; i++)
            v += (x[r * 3 + i] - m) * (x[r * 3 + i] - m) / 3;
        for (int i = 0; i < 3; i++) {
            double want = (x[r * 3 + i] - m) / sqrt(v + 1e-5) * g[i] + b[i];
            cr_assert(fabs(y[r * 3 + i] - want) <= 1e-5 * (1 + fabs(want)),
                      "y[%d][%d] = %.9g, expected %.9g", r, i, y[r * 3 + i], want);
        }
    }
    return NN_OK;
}
CALL(f_no_affine)
{
    return fwd(c, s, &s->x, NULL, NULL, &s->y);
}
CALL(f_k2_rank1)
{
    nn_tensor x = cat_view_on(&s->x, 1, (int64_t[]){6}, 0),
              y = cat_view_on(&s->y, 1, (int64_t[]){6}, 0);
    return fwd(c, s, &x, NULL, NULL, &y);
}
CALL(f_eps0)
{
    s->p.eps = 0;
    return fwd(c, s, &s->x, &s->g, &s->b, &s->y);
}
CALL(f_bf16)
{
    nn_tensor x = cat_tensor(c, NN_DTYPE_BF16, 2, X, 310),
              y = cat_tensor(c, NN_DTYPE_BF16, 2, X, 311);
    nn_status st = fwd(c, s, &x, NULL, NULL, &y);
    nn_tensor_free(c->ctx, &x);
    nn_tensor_free(c->ctx, &y);
    return st;
}

/* ---- nn_layernorm_backward ---- */

static nn_layernorm_pullback *pullback(struct cat *c, struct ln *s, int affine)
{
    nn_layernorm_pullback *pb = NULL;
    cr_assert_eq(nn_layernorm_forward(c->ctx, &s->p, &s->x, affine ? &s->g : NULL,
                                      affine ? &s->b : NULL, &s->y, &pb),
                 NN_OK, "fixture: %s", nn_last_error()->message);
    return pb;
}
static nn_status then_retry(struct cat *c, struct ln *s, nn_status st, nn_layernorm_pullback **pb)
{
    if (st == NN_OK) return st;
    nn_error_info e = *nn_last_error();
    cr_assert_not_null(*pb, "a refused call leaves the pullback with the caller");
    cr_assert_eq(nn_layernorm_backward(c->ctx, pb, &s->dy, &s->dx, NULL, NULL), NN_OK,
                 "a valid retry with the same pullback: %s", nn_last_error()->message);
    cr_assert_null(*pb);
    cr_assert_str_eq(nn_last_error()->message, e.message, "the record changed");
    return st;
}
static nn_status bwd(struct cat *c, struct ln *s, const nn_tensor *dy, nn_tensor *dx, nn_tensor *dg,
                     nn_tensor *db)
{
    nn_layernorm_pullback *pb = pullback(c, s, 1);
    return then_retry(c, s, nn_layernorm_backward(c->ctx, &pb, dy, dx, dg, db), &pb);
}

CALL(b_null_ctx)
{
    nn_layernorm_pullback *pb = pullback(c, s, 1);
    return then_retry(c, s, nn_layernorm_backward(NULL, &pb, &s->dy, &s->dx, NULL, NULL), &pb);
}
CALL(b_null_pullback)
{
    return nn_layernorm_backward(c->ctx, NULL, &s->dy, &s->dx, NULL, NULL);
}
CALL(b_null_star)
{
    nn_layernorm_pullback *pb = NULL;
    return nn_layernorm_backward(c->ctx, &pb, &s->dy, &s->dx, NULL, NULL);
}
CALL(b_twice)
{
    nn_layernorm_pullback *pb = pullback(c, s, 1), *copy = pb;
    cr_assert_eq(nn_layernorm_backward(c->ctx, &pb, &s->dy, &s->dx, NULL, NULL), NN_OK, "first");
    return nn_layernorm_backward(c->ctx, &copy, &s->dy, &s->dx, NULL, NULL);
}
CALL(b_freed)
{
    nn_layernorm_pullback *pb = pullback(c, s, 1), *copy = pb;
    cr_assert_eq(nn_layernorm_pullback_free(&pb), NN_OK, "free");
    return nn_layernorm_backward(c->ctx, &copy, &s->dy, &s->dx, NULL, NULL);
}
CALL(b_other_ctx)
{
    nn_layernorm_pullback *pb = pullback(c, s, 1);
    return then_retry(
        c, s, nn_layernorm_backward(cat_other_ctx(c), &pb, &s->dy, &s->dx, NULL, NULL), &pb);
}
CALL(b_pool_pullback)
{
    nn_pool_pullback *pp = NULL;
    cr_assert_eq(nn_pool_forward(c->ctx, &c->pp, &c->px, &c->py, &pp), NN_OK, "fixture");
    nn_layernorm_pullback *pb = (nn_layernorm_pullback *)pp;
    nn_status st = nn_layernorm_backward(c->ctx, &pb, &s->dy, &s->dx, NULL, NULL);
    cr_assert_eq(nn_pool_pullback_free(&pp), NN_OK, "intact");
    return st;
}
CALL(b_null_dy)
{
    return bwd(c, s, NULL, &s->dx, &s->dg, &s->db);
}
CALL(b_dgamma_without_gamma)
{
    nn_layernorm_pullback *pb = pullback(c, s, 0);
    return then_retry(c, s, nn_layernorm_backward(c->ctx, &pb, &s->dy, &s->dx, &s->dg, NULL), &pb);
}
CALL(b_dbeta_without_beta)
{
    nn_layernorm_pullback *pb = pullback(c, s, 0);
    return then_retry(c, s, nn_layernorm_backward(c->ctx, &pb, &s->dy, NULL, NULL, &s->db), &pb);
}
CALL(b_dy_dims)
{
    nn_tensor dy = cat_view_on(&s->dy, 2, (int64_t[]){3, 2}, 0);
    return bwd(c, s, &dy, &s->dx, NULL, NULL);
}
CALL(b_dx_rank)
{
    nn_tensor dx = cat_view_on(&s->dx, 1, (int64_t[]){6}, 0);
    return bwd(c, s, &s->dy, &dx, NULL, NULL);
}
CALL(b_dg_dims)
{
    nn_tensor dg = cat_view_on(&s->dg, 1, (int64_t[]){2}, 0);
    return bwd(c, s, &s->dy, &s->dx, &dg, &s->db);
}
CALL(b_db_rank)
{
    nn_tensor db = cat_view_on(&s->dx, 2, (int64_t[]){1, 3}, 0);
    return bwd(c, s, &s->dy, NULL, &s->dg, &db);
}
CALL(b_dy_dtype)
{
    nn_tensor dy = s->dy;
    dy.dtype = NN_DTYPE_F16;
    cat_packed(&dy);
    return bwd(c, s, &dy, &s->dx, NULL, NULL);
}
CALL(b_dg_dtype)
{
    nn_tensor dg = s->dg;
    dg.dtype = NN_DTYPE_F64;
    return bwd(c, s, &s->dy, &s->dx, &dg, NULL);
}
CALL(b_space_dy)
{
    nn_tensor t = cat_wrong_space(c, &s->dy);
    return bwd(c, s, &t, &s->dx, NULL, NULL);
}
CALL(b_space_db)
{
    nn_tensor t = cat_wrong_space(c, &s->db);
    return bwd(c, s, &s->dy, &s->dx, NULL, &t);
}
CALL(b_dx_is_dy)
{
    return bwd(c, s, &s->dy, &s->dy, NULL, NULL);
}
CALL(b_dx_on_x)
{
    return bwd(c, s, &s->dy, &s->x, NULL, NULL);
}
CALL(b_dbeta_is_dgamma)
{
    return bwd(c, s, &s->dy, NULL, &s->dg, &s->dg);
}
CALL(b_dgamma_on_dx)
{
    nn_tensor dg = cat_view_on(&s->dx, 1, (int64_t[]){3}, 3);
    return bwd(c, s, &s->dy, &s->dx, &dg, NULL);
}
CALL(b_dx_strided)
{
    nn_tensor dx = cat_transposed(&s->dx);
    return bwd(c, s, &s->dy, &dx, NULL, NULL);
}
/* Edge: nothing asked but dy: a valid call that writes nothing. */
CALL(b_nothing)
{
    nn_layernorm_pullback *pb = pullback(c, s, 1);
    return nn_layernorm_backward(c->ctx, &pb, &s->dy, NULL, NULL, NULL);
}
/* Edge: dbeta is the column sum of dy. */
CALL(b_dbeta_values)
{
    nn_layernorm_pullback *pb = pullback(c, s, 1);
    nn_status st = nn_layernorm_backward(c->ctx, &pb, &s->dy, &s->dx, &s->dg, &s->db);
    if (st != NN_OK) return st;
    double dy[6], db[3];
    cat_read(c, &s->dy, dy);
    cat_read(c, &s->db, db);
    for (int i = 0; i < 3; i++)
        cr_assert_eq(db[i], dy[i] + dy[3 + i], "dbeta[%d] = %g", i, db[i]);
    return st;
}

/* ---- nn_layernorm_pullback_free ---- */

static nn_status pf_null(struct cat *c)
{
    (void)c;
    return nn_layernorm_pullback_free(NULL);
}
static nn_status pf_star_null(struct cat *c)
{
    (void)c;
    nn_layernorm_pullback *pb = NULL;
    return nn_layernorm_pullback_free(&pb);
}
CALL(pf_twice)
{
    nn_layernorm_pullback *pb = pullback(c, s, 1), *copy = pb;
    cr_assert_eq(nn_layernorm_pullback_free(&pb), NN_OK, "first free");
    return nn_layernorm_pullback_free(&copy);
}
CALL(pf_consumed)
{
    nn_layernorm_pullback *pb = pullback(c, s, 0), *copy = pb;
    cr_assert_eq(nn_layernorm_backward(c->ctx, &pb, &s->dy, &s->dx, NULL, NULL), NN_OK, "backward");
    return nn_layernorm_pullback_free(&copy);
}
CALL(pf_softmax)
{
    nn_softmax_params sp;
    nn_softmax_params_default(&sp);
    nn_softmax_pullback *spb = NULL;
    cr_assert_eq(nn_softmax_forward(c->ctx, &sp, &s->x, &s->y, &spb), NN_OK, "fixture");
    nn_layernorm_pullback *pb = (nn_layernorm_pullback *)spb;
    nn_status st = nn_layernorm_pullback_free(&pb);
    cr_assert_eq(nn_softmax_pullback_free(&spb), NN_OK, "intact");
    return st;
}
CALL(pf_unused)
{
    nn_layernorm_pullback *pb = pullback(c, s, 1);
    nn_status st = nn_layernorm_pullback_free(&pb);
    cr_assert_null(pb);
    return st;
}

#define E  NN_E_INVALID_ARG
#define S  NN_E_SHAPE
#define D  NN_E_DTYPE
#define M  NN_E_MEMSPACE
#define U  NN_E_UNSUPPORTED
#define P  NN_E_PULLBACK
#define O  NN_E_OVERFLOW
#define F  "nn_layernorm_forward"
#define BW "nn_layernorm_backward"
#define PF "nn_layernorm_pullback_free"

static const struct cat_row rows[] = {
    ROW("params_default p NULL", "nn_layernorm_params_default", "p", E, pd_null),

    ROW("forward ctx NULL", F, "ctx", E, f_null_ctx),
    ROW("forward p NULL", F, "p", E, f_null_p),
    ROW("forward x NULL", F, "x", E, f_null_x),
    ROW("forward y NULL", F, "y", E, f_null_y),
    ROW("forward x.data NULL", F, "x.data", E, f_null_xdata),
    ROW("forward failure sets *pullback_out NULL", F, "y", E, f_pullback_null_on_failure),
    ROW("forward normalized_rank 0", F, "p.normalized_rank", E, f_k0),
    ROW("forward normalized_rank above x.rank", F, "p.normalized_rank", S, f_k3),
    ROW("forward eps negative", F, "p.eps", E, f_eps_neg),
    ROW("forward eps infinite", F, "p.eps", E, f_eps_inf),
    ROW("forward eps NaN", F, "p.eps", E, f_eps_nan),
    ROW("forward reserved[0]", F, "p.reserved[0]", E, f_res0),
    ROW("forward reserved[3]", F, "p.reserved[3]", E, f_res3),
    ROW("forward x rank 0", F, "x.rank", E, f_x_rank0),
    ROW("forward x dim 0", F, "x.dims[1]", E, f_x_dim0),
    ROW("forward y dims", F, "y.dims[1]", S, f_y_dims),
    ROW("forward gamma dims", F, "gamma.dims[0]", S, f_g_dims),
    ROW("forward beta rank", F, "beta.rank", S, f_b_rank),
    ROW("forward gamma of rank 1 with normalized_rank 2", F, "gamma.rank", S, f_g_k2),
    ROW("forward y dtype", F, "y.dtype", D, f_y_dtype),
    ROW("forward gamma dtype", F, "gamma.dtype", D, f_g_dtype),
    ROW("forward x dtype 17", F, "x.dtype", D, f_x_dtype_bad),
    ROW("forward y misaligned", F, "y.data", E, f_y_misaligned),
    ROW("forward x element count overflows", F, "x", O, f_x_overflow),
    ROW("forward x strided", F, "x", U, f_x_strided),
    ROW("forward y strided", F, "y", U, f_y_strided),
    ROW("forward gamma broadcast", F, "gamma", U, f_g_broadcast),
    ROW("forward x space label", F, "x", M, f_claim_x),
    ROW("forward gamma wrong space", F, "gamma", M, f_space_g),
    ROW("forward beta wrong space", F, "beta", M, f_space_b),
    ROW("forward y wrong space", F, "y", M, f_space_y),
    ROW("forward y is x", F, "y", E, f_y_is_x),
    ROW("forward y on gamma", F, "y", E, f_y_on_gamma),
    ROW("forward y zero strides", F, "y", E, f_y_zero_strides),
    ROW("forward values (edge)", F, NULL, NN_OK, f_values),
    ROW("forward without gamma and beta (edge)", F, NULL, NN_OK, f_no_affine),
    ROW("forward rank 1 (edge)", F, NULL, NN_OK, f_k2_rank1),
    ROW("forward eps 0 (edge)", F, NULL, NN_OK, f_eps0),
    ROW("forward bf16 (edge)", F, NULL, NN_OK, f_bf16),

    ROW("backward ctx NULL", BW, "ctx", E, b_null_ctx),
    ROW("backward pullback NULL", BW, "pullback", P, b_null_pullback),
    ROW("backward *pullback NULL", BW, "pullback", P, b_null_star),
    ROW("backward pullback used twice", BW, "pullback", P, b_twice),
    ROW("backward pullback freed", BW, "pullback", P, b_freed),
    ROW("backward pullback of another context", BW, "pullback", P, b_other_ctx),
    ROW("backward pool pullback", BW, "pullback", P, b_pool_pullback),
    ROW("backward dy NULL", BW, "dy", E, b_null_dy),
    ROW("backward dgamma without forward's gamma", BW, "dgamma", E, b_dgamma_without_gamma),
    ROW("backward dbeta without forward's beta", BW, "dbeta", E, b_dbeta_without_beta),
    ROW("backward dy dims", BW, "dy.dims[0]", S, b_dy_dims),
    ROW("backward dx rank", BW, "dx.rank", S, b_dx_rank),
    ROW("backward dgamma dims", BW, "dgamma.dims[0]", S, b_dg_dims),
    ROW("backward dbeta rank", BW, "dbeta.rank", S, b_db_rank),
    ROW("backward dy dtype", BW, "dy.dtype", D, b_dy_dtype),
    ROW("backward dgamma dtype", BW, "dgamma.dtype", D, b_dg_dtype),
    ROW("backward dy wrong space", BW, "dy", M, b_space_dy),
    ROW("backward dbeta wrong space", BW, "dbeta", M, b_space_db),
    ROW("backward dx is dy", BW, "dx", E, b_dx_is_dy),
    ROW("backward dx on the saved x", BW, "dx", E, b_dx_on_x),
    ROW("backward dbeta is dgamma", BW, "dgamma", E, b_dbeta_is_dgamma),
    ROW("backward dgamma inside dx", BW, "dx", E, b_dgamma_on_dx),
    ROW("backward dx strided", BW, "dx", U, b_dx_strided),
    ROW("backward no gradient asked (edge)", BW, NULL, NN_OK, b_nothing),
    ROW("backward dbeta values (edge)", BW, NULL, NN_OK, b_dbeta_values),

    ROW("pullback_free NULL (edge)", PF, NULL, NN_OK, pf_null),
    ROW("pullback_free *NULL (edge)", PF, NULL, NN_OK, pf_star_null),
    ROW("pullback_free twice", PF, "pullback", P, pf_twice),
    ROW("pullback_free consumed", PF, "pullback", P, pf_consumed),
    ROW("pullback_free softmax pullback", PF, "pullback", P, pf_softmax),
    ROW("pullback_free unused (edge)", PF, NULL, NN_OK, pf_unused),
};

CAT_SUBJECT(layernorm, rows)

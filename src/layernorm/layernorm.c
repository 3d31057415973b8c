/* Layer normalisation: validation, dispatch to a backend, pullbacks and the verbose line.
 * Messages name the public function that was called. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "core/ctx.h"
#include "core/error.h"
#include "core/log.h"
#include "core/pullback.h"
#include "core/tensor_util.h"
#include "core/text.h"
#include "layernorm/layernorm_internal.h"

struct nn_layernorm_pullback {
    struct nn__pullback hdr; /* the shared registry's header (core/pullback.h) */
    struct nn__layernorm_problem prob;
    nn_tensor x, gamma;                /* the caller's views (gamma: data NULL when not given) */
    struct nn__layernorm_saved *saved; /* the backend's: each row's mean and rstd */
};

/* dx, dgamma (the weight's role) and dbeta (the bias's) */
static const struct nn__pullback_kind layernorm_kind = {
    "layernorm", NN_ACCUMULATE_DX | NN_ACCUMULATE_DW | NN_ACCUMULATE_DB, NULL};

/* A GPU context exists only in builds with cuDNN. */
static const struct nn__layernorm_backend *backend_of(const struct nn_ctx *ctx)
{
#if NN_HAVE_CUDNN
    if (nn__ctx_on_gpu(ctx)) return &nn__layernorm_backend_cuda;
#endif
    (void)ctx;
    return &nn__layernorm_backend_ref;
}

/* ---------------------------------------------------------------------------------------------
 * Text form (docs/LAYERNORM.md):
 * d<d0>{x<d>} k<K> [gamma] [beta] [eps<v>] [accdx] [accdw] [accdb] <dtype> [grads=...] [keep]
 */

static void problem_text(const struct nn__layernorm_problem *p, int keep, char *buf, size_t cap)
{
    size_t n = 0;
    for (int i = 0; i < p->rank; i++)
        n = nn__text_put(buf, cap, n, i ? "x%lld" : "d%lld", (long long)p->dims[i]);
    n = nn__text_put(buf, cap, n, " k%d", p->k);
    if (p->gamma) n = nn__text_put(buf, cap, n, " gamma");
    if (p->beta) n = nn__text_put(buf, cap, n, " beta");
    if (p->eps != 1e-5) {
        /* the shortest text that reads back as the same double */
        char e[40];
        snprintf(e, sizeof e, "%.15g", p->eps);
        if (strtod(e, NULL) != p->eps) snprintf(e, sizeof e, "%.17g", p->eps);
        n = nn__text_put(buf, cap, n, " eps%s", e);
    }
    if (p->accumulate & NN_ACCUMULATE_DX) n = nn__text_put(buf, cap, n, " accdx");
    if (p->accumulate & NN_ACCUMULATE_DW) n = nn__text_put(buf, cap, n, " accdw");
    if (p->accumulate & NN_ACCUMULATE_DB) n = nn__text_put(buf, cap, n, " accdb");
    n = nn__text_put(buf, cap, n, " %s", nn_dtype_name(p->dtype));
    /* grads= lists the gradients asked for when one that forward makes possible was not */
    if (p->backward && p->skip)
        n = nn__text_put_grads(buf, cap, n, !(p->skip & 1), p->gamma && !(p->skip & 2),
                               p->beta && !(p->skip & 4));
    if (keep) nn__text_put(buf, cap, n, " keep");
}

static void verbose_line(struct nn_ctx *ctx, const char *fn, const struct nn__layernorm_backend *be,
                         const struct nn__layernorm_note *note,
                         const struct nn__layernorm_problem *p, int keep, uint64_t t0)
{
    char shape[320];
    problem_text(p, keep, shape, sizeof shape);
    /* The verbose op is the public name without its "nn_". */
    nn__verbose_op(ctx, fn + 3, note->impl[0] ? note->impl : be->name, "-", shape, t0);
}

/* The call's case, once its problem is known, for its failure line. */
static void failure_case(const struct nn__layernorm_problem *p, int keep, uint64_t t0)
{
    if (!t0) return;
    char shape[320];
    problem_text(p, keep, shape, sizeof shape);
    nn__verbose_case(shape);
}

/* ---------------------------------------------------------------------------------------------
 * Validation
 */

nn_status nn_layernorm_params_default(nn_layernorm_params *p)
{
    if (!p)
        return NN__FAIL(NULL, NN_E_INVALID_ARG, "nn_layernorm_params_default: p must not be NULL");
    memset(p, 0, sizeof *p);
    p->normalized_rank = 1;
    p->eps = 1e-5;
    return NN_OK;
}

static nn_status check_params(struct nn_ctx *ctx, const char *fn, const nn_layernorm_params *p)
{
    if (!p) return NN__FAIL(ctx, NN_E_INVALID_ARG, "%s: p (the parameters) must not be NULL", fn);
    if (p->normalized_rank < 1)
        return NN__FAIL(ctx, NN_E_INVALID_ARG,
                        "%s: p.normalized_rank must be >= 1 (the trailing dims of x normalised "
                        "together), got %d",
                        fn, p->normalized_rank);
    if (!(p->eps >= 0) || !isfinite(p->eps))
        return NN__FAIL(ctx, NN_E_INVALID_ARG, "%s: p.eps must be finite and >= 0, got %g", fn,
                        p->eps);
    NN__TRY(NN__CHECK_RESERVED(ctx, fn, "p.reserved", p->reserved));
    return NN_OK;
}

/* t: not NULL; checked, and of dtype. */
static nn_status check_arg(struct nn_ctx *ctx, const char *fn, const nn_tensor *t, const char *name,
                           nn_dtype dtype)
{
    NN__TRY(nn__check_tensor(ctx, fn, t, name));
    if (t->dtype != dtype)
        return NN__FAIL(ctx, NN_E_DTYPE, "%s: %s.dtype must equal x.dtype (%s), got %s", fn, name,
                        nn_dtype_name(dtype), nn_dtype_name(t->dtype));
    return NN_OK;
}

/* x's dims (whole = 1) or its trailing k dims, the normalized shape (whole = 0). */
static nn_status check_dims(struct nn_ctx *ctx, const char *fn, const nn_tensor *t,
                            const char *name, const struct nn__layernorm_problem *p, int whole)
{
    int rank = whole ? p->rank : p->k, first = p->rank - rank;
    const char *what = whole ? "x's dims" : "the normalized dims, x's trailing normalized_rank";
    if (t->rank != rank)
        return NN__FAIL(ctx, NN_E_SHAPE, "%s: %s.rank must be %d (%s), got %d", fn, name, rank,
                        what, t->rank);
    for (int i = 0; i < rank; i++)
        if (t->dims[i] != p->dims[first + i])
            return NN__FAIL(ctx, NN_E_SHAPE, "%s: %s.dims[%d] must be %lld (%s), got %lld", fn,
                            name, i, (long long)p->dims[first + i], what, (long long)t->dims[i]);
    return NN_OK;
}

/* Checked after the dims, so that wrong dims are reported as such. NULL entries are skipped. */
static nn_status check_packed(struct nn_ctx *ctx, const char *fn, const nn_tensor *const *t,
                              const char *const *names, int n)
{
    for (int i = 0; i < n; i++)
        if (t[i] && !nn_tensor_is_contiguous(t[i]))
            return NN__FAIL(ctx, NN_E_UNSUPPORTED,
                            "%s: %s must be fully packed row-major (nn_tensor_is_contiguous); "
                            "other strides are not supported",
                            fn, names[i]);
    return NN_OK;
}

/* in[self] is an output: it must not share memory with itself or with any other non-NULL
 * entry of in. */
static nn_status check_output(struct nn_ctx *ctx, const char *fn, int self,
                              const nn_tensor *const *in, const char *const *names, int n)
{
    const nn_tensor *out = in[self];
    NN__TRY(nn__check_output_distinct(ctx, fn, out, names[self]));
    for (int i = 0; i < n; i++)
        if (in[i] && i != self)
            NN__TRY(nn__check_no_overlap(ctx, fn, out, names[self], in[i], names[i]));
    return NN_OK;
}

static nn_status resolve(struct nn_ctx *ctx, const char *fn, const nn_layernorm_params *p,
                         const nn_tensor *x, struct nn__layernorm_problem *prob)
{
    if (p->normalized_rank > x->rank)
        return NN__FAIL(ctx, NN_E_SHAPE, "%s: p.normalized_rank must be <= x.rank (%d), got %d", fn,
                        x->rank, p->normalized_rank);
    memset(prob, 0, sizeof *prob);
    prob->k = p->normalized_rank;
    prob->eps = p->eps;
    prob->dtype = x->dtype;
    prob->rank = x->rank;
    memcpy(prob->dims, x->dims, sizeof prob->dims);
    prob->m = 1;
    prob->d = 1;
    for (int i = 0; i < x->rank; i++) {
        if (i < x->rank - prob->k)
            prob->m *= x->dims[i];
        else
            prob->d *= x->dims[i];
    }
    return NN_OK;
}

/* ---------------------------------------------------------------------------------------------
 * Calls
 */

static void free_pullback(void *p)
{
    nn_layernorm_pullback *pb = p;
    backend_of(pb->hdr.ctx)->saved_free(pb->hdr.ctx, pb->saved);
    nn__host_free(pb);
}

static nn_status layernorm_forward(nn_ctx *ctx, const nn_layernorm_params *p, const nn_tensor *x,
                                   const nn_tensor *gamma, const nn_tensor *beta, nn_tensor *y,
                                   nn_layernorm_pullback **pullback_out)
{
    const char *fn = "nn_layernorm_forward";
    if (pullback_out) *pullback_out = NULL;
    if (!ctx) return NN__FAIL(NULL, NN_E_INVALID_ARG, "%s: ctx must not be NULL", fn);
    uint64_t t0 = nn__verbose(ctx) ? nn__now_ns() : 0;
    NN__TRY(check_params(ctx, fn, p));
    if (!x) return NN__FAIL(ctx, NN_E_INVALID_ARG, "%s: x must not be NULL", fn);
    if (!y) return NN__FAIL(ctx, NN_E_INVALID_ARG, "%s: y must not be NULL", fn);
    NN__TRY(check_arg(ctx, fn, x, "x", x->dtype));
    struct nn__layernorm_problem prob;
    NN__TRY(resolve(ctx, fn, p, x, &prob));
    prob.gamma = gamma != NULL;
    prob.beta = beta != NULL;
    failure_case(&prob, 0, t0);
    if (gamma) NN__TRY(check_arg(ctx, fn, gamma, "gamma", x->dtype));
    if (beta) NN__TRY(check_arg(ctx, fn, beta, "beta", x->dtype));
    NN__TRY(check_arg(ctx, fn, y, "y", x->dtype));
    if (gamma) NN__TRY(check_dims(ctx, fn, gamma, "gamma", &prob, 0));
    if (beta) NN__TRY(check_dims(ctx, fn, beta, "beta", &prob, 0));
    NN__TRY(check_dims(ctx, fn, y, "y", &prob, 1));
    const nn_tensor *in[] = {y, x, gamma, beta};
    const char *const in_names[] = {"y", "x", "gamma", "beta"};
    NN__TRY(check_output(ctx, fn, 0, in, in_names, 4));
    const nn_tensor *all[] = {x, gamma, beta, y};
    const char *const names[] = {"x", "gamma", "beta", "y"};
    NN__TRY(check_packed(ctx, fn, all, names, 4));

    const struct nn__layernorm_backend *be = backend_of(ctx);
    nn_layernorm_pullback *pb = NULL;
    if (pullback_out) {
        pb = nn__host_calloc(1, sizeof *pb);
        if (!pb) return NN__FAIL(ctx, NN_E_OOM_HOST, "%s: out of host memory for the pullback", fn);
        pb->hdr.ctx = ctx; /* for free_pullback() before it is live */
        pb->prob = prob;
        pb->x = *x;
        if (gamma) pb->gamma = *gamma;
    }
    struct nn__layernorm_note note = {{0}};
    nn_status st = be->forward(ctx, fn, &prob, x, gamma, beta, y, pb ? &pb->saved : NULL, &note);
    if (st == NN_OK && pb) st = nn__pullback_add(ctx, fn, &layernorm_kind, &pb->hdr);
    if (st != NN_OK) {
        if (pb) free_pullback(pb);
        return st;
    }
    if (t0) verbose_line(ctx, fn, be, &note, &prob, 0, t0);
    if (pullback_out) *pullback_out = pb;
    return NN_OK;
}

nn_status nn_layernorm_forward(nn_ctx *ctx, const nn_layernorm_params *p, const nn_tensor *x,
                               const nn_tensor *gamma, const nn_tensor *beta, nn_tensor *y,
                               nn_layernorm_pullback **pullback_out)
{
    uint64_t t0 = nn__verbose(ctx) ? nn__now_ns() : 0;
    return nn__verbose_exit(ctx, "layernorm_forward", t0,
                            layernorm_forward(ctx, p, x, gamma, beta, y, pullback_out));
}

static nn_status layernorm_backward(nn_ctx *ctx, const char *fn, nn_layernorm_pullback **pullback,
                                    const nn_backward_options *opts, const nn_tensor *dy,
                                    nn_tensor *dx, nn_tensor *dgamma, nn_tensor *dbeta)
{
    if (!ctx) return NN__FAIL(NULL, NN_E_INVALID_ARG, "%s: ctx must not be NULL", fn);
    uint64_t t0 = nn__verbose(ctx) ? nn__now_ns() : 0;
    struct nn__backward bw;
    NN__TRY(NN__BACKWARD_BEGIN(ctx, fn, &layernorm_kind, pullback, opts, &bw));
    nn_layernorm_pullback *pb = *pullback;
    /* the problem as this call runs it: its accumulate, gradients (and text form) are the call's */
    struct nn__layernorm_problem prob = pb->prob;
    prob.accumulate = bw.accumulate;
    prob.backward = 1;
    prob.skip = (dx ? 0 : 1u) | (prob.gamma && !dgamma ? 2u : 0) | (prob.beta && !dbeta ? 4u : 0);
    failure_case(&prob, bw.keep, t0);
    if (!dy) return NN__FAIL(ctx, NN_E_INVALID_ARG, "%s: dy must not be NULL", fn);
    if (dgamma && !prob.gamma)
        return NN__FAIL(ctx, NN_E_INVALID_ARG,
                        "%s: dgamma must be NULL: the forward call had no gamma (pass gamma to "
                        "nn_layernorm_forward to learn a scale)",
                        fn);
    if (dbeta && !prob.beta)
        return NN__FAIL(ctx, NN_E_INVALID_ARG,
                        "%s: dbeta must be NULL: the forward call had no beta (pass beta to "
                        "nn_layernorm_forward to learn a shift)",
                        fn);
    nn_dtype dt = prob.dtype;
    NN__TRY(check_arg(ctx, fn, dy, "dy", dt));
    if (dx) NN__TRY(check_arg(ctx, fn, dx, "dx", dt));
    if (dgamma) NN__TRY(check_arg(ctx, fn, dgamma, "dgamma", dt));
    if (dbeta) NN__TRY(check_arg(ctx, fn, dbeta, "dbeta", dt));
    NN__TRY(check_dims(ctx, fn, dy, "dy", &prob, 1));
    if (dx) NN__TRY(check_dims(ctx, fn, dx, "dx", &prob, 1));
    if (dgamma) NN__TRY(check_dims(ctx, fn, dgamma, "dgamma", &prob, 0));
    if (dbeta) NN__TRY(check_dims(ctx, fn, dbeta, "dbeta", &prob, 0));
    const nn_tensor *gamma = prob.gamma ? &pb->gamma : NULL;
    const nn_tensor *in[] = {dy, &pb->x, gamma, dx, dgamma, dbeta};
    const char *const in_names[] = {
        "dy", "x (saved by forward)", "gamma (saved by forward)", "dx", "dgamma", "dbeta"};
    for (int i = 3; i < 6; i++)
        if (in[i]) NN__TRY(check_output(ctx, fn, i, in, in_names, 6));
    const nn_tensor *all[] = {dy, dx, dgamma, dbeta};
    const char *const names[] = {"dy", "dx", "dgamma", "dbeta"};
    NN__TRY(check_packed(ctx, fn, all, names, 4));
    const struct nn__layernorm_backend *be = backend_of(ctx);
    struct nn__layernorm_note note = {{0}};
    NN__TRY(be->backward(ctx, fn, &prob, &pb->x, gamma, pb->saved, dy, dx, dgamma, dbeta, &note));
    if (t0) verbose_line(ctx, fn, be, &note, &prob, bw.keep, t0);
    return bw.keep ? NN_OK : nn_layernorm_pullback_free(pullback);
}

nn_status nn_layernorm_backward(nn_ctx *ctx, nn_layernorm_pullback **pullback, const nn_tensor *dy,
                                nn_tensor *dx, nn_tensor *dgamma, nn_tensor *dbeta)
{
    uint64_t t0 = nn__verbose(ctx) ? nn__now_ns() : 0;
    return nn__verbose_exit(
        ctx, "layernorm_backward", t0,
        layernorm_backward(ctx, "nn_layernorm_backward", pullback, NULL, dy, dx, dgamma, dbeta));
}

nn_status nn_layernorm_backward_ex(nn_ctx *ctx, nn_layernorm_pullback **pullback,
                                   const nn_backward_options *opts, const nn_tensor *dy,
                                   nn_tensor *dx, nn_tensor *dgamma, nn_tensor *dbeta)
{
    uint64_t t0 = nn__verbose(ctx) ? nn__now_ns() : 0;
    return nn__verbose_exit(
        ctx, "layernorm_backward_ex", t0,
        layernorm_backward(ctx, "nn_layernorm_backward_ex", pullback, opts, dy, dx, dgamma, dbeta));
}

nn_status nn_layernorm_pullback_free(nn_layernorm_pullback **pullback)
{
    return nn__pullback_free("nn_layernorm_pullback_free", &layernorm_kind, pullback,
                             free_pullback);
}

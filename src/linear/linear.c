/* The linear layer: validation, the problem description, dispatch to a backend, pullbacks and
 * the verbose line. Messages name the public function that was called. */
#include <stdio.h>
#include <string.h>

#include "core/alloc.h"
#include "core/ctx.h"
#include "core/error.h"
#include "core/log.h"
#include "core/pullback.h"
#include "core/tensor_util.h"
#include "core/text.h"
#include "linear/linear_internal.h"

struct nn_linear_pullback {
    struct nn__pullback hdr; /* the shared registry's header (core/pullback.h) */
    struct nn__linear_problem prob;
    nn_tensor x, w, y; /* the caller's views; y only with relu */
};

static const struct nn__pullback_kind pullback_kind = {
    "linear", NN_ACCUMULATE_DX | NN_ACCUMULATE_DW | NN_ACCUMULATE_DB, NULL};

/* A GPU context exists only in builds with cuDNN (and cuBLASLt beside it). */
static const struct nn__linear_backend *backend_of(const struct nn_ctx *ctx)
{
#if NN_HAVE_CUDNN
    if (nn__ctx_on_gpu(ctx)) return &nn__linear_backend_cublaslt;
#endif
    (void)ctx;
    return &nn__linear_backend_ref;
}

/* ---------------------------------------------------------------------------------------------
 * Text form (docs/LINEAR.md): [m<d>{x<d>}]in<d>out<d> [relu] [bias] [accdx] [accdw] [accdb]
 * <dtype> [tf32]
 */

void nn__linear_problem_text(const struct nn__linear_problem *p, char *buf, size_t cap)
{
    size_t n = 0;
    if (cap) buf[0] = 0;
    for (int i = 0; i + 1 < p->x_rank; i++)
        n = nn__text_put(buf, cap, n, i ? "x%lld" : "m%lld", (long long)p->lead[i]);
    n = nn__text_put(buf, cap, n, "in%lldout%lld", (long long)p->in, (long long)p->out);
    if (p->activation == NN_ACTIVATION_RELU) n = nn__text_put(buf, cap, n, " relu");
    if (p->has_bias) n = nn__text_put(buf, cap, n, " bias");
    if (p->accumulate & NN_ACCUMULATE_DX) n = nn__text_put(buf, cap, n, " accdx");
    if (p->accumulate & NN_ACCUMULATE_DW) n = nn__text_put(buf, cap, n, " accdw");
    if (p->accumulate & NN_ACCUMULATE_DB) n = nn__text_put(buf, cap, n, " accdb");
    n = nn__text_put(buf, cap, n, " %s", nn_dtype_name(p->dtype));
    if (p->dtype == NN_DTYPE_F32 && p->math == NN_MATH_TF32) nn__text_put(buf, cap, n, " tf32");
}

/* ---------------------------------------------------------------------------------------------
 * Validation
 */

nn_status nn_linear_params_default(nn_linear_params *p)
{
    if (!p) return NN__FAIL(NULL, NN_E_INVALID_ARG, "nn_linear_params_default: p must not be NULL");
    memset(p, 0, sizeof *p);
    p->activation = NN_ACTIVATION_IDENTITY;
    return NN_OK;
}

static nn_status check_params(struct nn_ctx *ctx, const char *fn, const nn_linear_params *p)
{
    if (!p) return NN__FAIL(ctx, NN_E_INVALID_ARG, "%s: p (the parameters) must not be NULL", fn);
    if (p->activation != NN_ACTIVATION_IDENTITY && p->activation != NN_ACTIVATION_RELU)
        return NN__FAIL(ctx, NN_E_INVALID_ARG,
                        "%s: p.activation must be NN_ACTIVATION_IDENTITY (0) or NN_ACTIVATION_RELU "
                        "(1), got %d",
                        fn, (int)p->activation);
    NN__TRY(NN__CHECK_RESERVED(ctx, fn, "p.reserved", p->reserved));
    return NN_OK;
}

/* A tensor argument: present, well formed, in the context's memory, the call's dtype. */
static nn_status check_arg(struct nn_ctx *ctx, const char *fn, const nn_tensor *t, const char *name,
                           nn_dtype dtype, const char *dtype_from)
{
    if (!t) return NN__FAIL(ctx, NN_E_INVALID_ARG, "%s: %s must not be NULL", fn, name);
    NN__TRY(nn__check_tensor(ctx, fn, t, name));
    if (t->dtype != dtype)
        return NN__FAIL(ctx, NN_E_DTYPE, "%s: %s.dtype must equal %s.dtype (%s), got %s", fn, name,
                        dtype_from, nn_dtype_name(dtype), nn_dtype_name(t->dtype));
    return NN_OK;
}

/* Checked last, so that wrong dims (whose strides no longer fit) are reported as such. */
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

static nn_status check_dims(struct nn_ctx *ctx, const char *fn, const nn_tensor *t,
                            const char *name, int rank, const int64_t *want, const char *what)
{
    if (t->rank != rank)
        return NN__FAIL(ctx, NN_E_SHAPE, "%s: %s.rank must be %d (%s), got %d", fn, name, rank,
                        what, t->rank);
    for (int i = 0; i < rank; i++)
        if (t->dims[i] != want[i])
            return NN__FAIL(ctx, NN_E_SHAPE, "%s: %s.dims[%d] must be %lld (%s), got %lld", fn,
                            name, i, (long long)want[i], what, (long long)t->dims[i]);
    return NN_OK;
}

/* The problem of x and w (checked tensors of matching features). */
static void problem_of(const struct nn_ctx *ctx, const nn_linear_params *p, const nn_tensor *x,
                       const nn_tensor *w, int has_bias, struct nn__linear_problem *out)
{
    int64_t in = x->dims[x->rank - 1], m = 1;
    for (int i = 0; i + 1 < x->rank; i++)
        m *= x->dims[i]; /* fits: x's element count does */
    memset(out, 0, sizeof *out);
    out->m = m;
    out->in = in;
    out->out = w->dims[0];
    out->dtype = x->dtype;
    out->math = ctx->settings.math_mode;
    out->activation = p->activation;
    out->has_bias = has_bias;
    out->x_rank = x->rank;
    memcpy(out->lead, x->dims, (size_t)(x->rank - 1) * sizeof x->dims[0]);
}

/* The problem of x and w (both checked tensors). */
static nn_status resolve(struct nn_ctx *ctx, const char *fn, const nn_linear_params *p,
                         const nn_tensor *x, const nn_tensor *w, int has_bias,
                         struct nn__linear_problem *out)
{
    if (w->rank != 2)
        return NN__FAIL(ctx, NN_E_SHAPE, "%s: w.rank must be 2 ([out, in]), got %d", fn, w->rank);
    int64_t in = x->dims[x->rank - 1];
    if (w->dims[1] != in)
        return NN__FAIL(ctx, NN_E_SHAPE,
                        "%s: w.dims[1] must be x.dims[%d] = %lld (the input features), got %lld",
                        fn, x->rank - 1, (long long)in, (long long)w->dims[1]);
    problem_of(ctx, p, x, w, has_bias, out);
    return NN_OK;
}

/* y / dy: x's leading dims, then out. */
static nn_status check_y_dims(struct nn_ctx *ctx, const char *fn, const nn_tensor *t,
                              const char *name, const struct nn__linear_problem *p)
{
    int64_t want[NN_MAX_RANK];
    memcpy(want, p->lead, sizeof want);
    want[p->x_rank - 1] = p->out;
    return check_dims(ctx, fn, t, name, p->x_rank, want, "x's leading dims, then w.dims[0]");
}

static nn_status check_bias_dims(struct nn_ctx *ctx, const char *fn, const nn_tensor *t,
                                 const char *name, const struct nn__linear_problem *p)
{
    return check_dims(ctx, fn, t, name, 1, &p->out, "[out] = [w.dims[0]]");
}

/* The call's case: the problem, then for a backward (g, NULL for a forward) the gradients it
 * asked for when not all of them (grads=) and keep when it kept the pullback. */
static void case_text(const struct nn__linear_problem *p, const struct nn__linear_grads *g,
                      int keep, char *shape, size_t cap)
{
    nn__linear_problem_text(p, shape, cap);
    size_t n = strlen(shape);
    if (g) n = nn__text_put_grads(shape, cap, n, g->dx != NULL, g->dw != NULL, g->db != NULL);
    if (keep) nn__text_put(shape, cap, n, " keep");
}

static void verbose_line(struct nn_ctx *ctx, const char *fn, const struct nn__linear_backend *be,
                         const struct nn__linear_note *note, const struct nn__linear_problem *p,
                         const struct nn__linear_grads *g, int keep, uint64_t t0)
{
    char shape[256];
    case_text(p, g, keep, shape, sizeof shape);
    /* The verbose op is the public name without its "nn_" (conv_forward, pool_forward, ...). */
    nn__verbose_op(ctx, fn + 3, note->impl[0] ? note->impl : be->name,
                   note->cache[0] ? note->cache : "-", shape, t0);
}

/* The call's case, once its problem is known, for its failure line. */
static void failure_case(struct nn_ctx *ctx, const struct nn__linear_problem *p,
                         const struct nn__linear_grads *g, int keep)
{
    if (!nn__verbose(ctx)) return;
    char shape[256];
    case_text(p, g, keep, shape, sizeof shape);
    nn__verbose_case(shape);
}

/* The tensors of a forward call, checked one by one in the order their messages take. */
static nn_status check_forward(struct nn_ctx *ctx, const char *fn, const nn_linear_params *p,
                               const nn_tensor *x, const nn_tensor *w, const nn_tensor *b,
                               const nn_tensor *y, struct nn__linear_problem *prob)
{
    NN__TRY(check_arg(ctx, fn, x, "x", x->dtype, "x"));
    NN__TRY(check_arg(ctx, fn, w, "w", x->dtype, "x"));
    if (b) NN__TRY(check_arg(ctx, fn, b, "b", x->dtype, "x"));
    NN__TRY(check_arg(ctx, fn, y, "y", x->dtype, "x"));
    NN__TRY(resolve(ctx, fn, p, x, w, b != NULL, prob));
    failure_case(ctx, prob, NULL, 0);
    if (b) NN__TRY(check_bias_dims(ctx, fn, b, "b", prob));
    NN__TRY(check_y_dims(ctx, fn, y, "y", prob));
    const nn_tensor *ins[] = {x, w, b};
    const char *const in_names[] = {"x", "w", "b"};
    NN__TRY(nn__check_output(ctx, fn, y, "y", ins, in_names, 3));
    const nn_tensor *all[] = {x, w, b, y};
    const char *const all_names[] = {"x", "w", "b", "y"};
    return check_packed(ctx, fn, all, all_names, 4);
}

/* Fast paths: 1 when every check of check_forward (check_grads) passes, decided in one pass over
 * plain views (nn__tensor_plain: each packed, so that the self-overlap and packing checks hold
 * and its extent is its bytes), with no message; 0 sends the call through the checks one by one,
 * which report the first failure. */

static int same_dims(const nn_tensor *t, int rank, const int64_t *dims)
{
    if (t->rank != rank) return 0;
    for (int i = 0; i < rank; i++)
        if (t->dims[i] != dims[i]) return 0;
    return 1;
}

/* [..., last]: t has x's rank and leading dims. */
static int lead_then(const nn_tensor *t, const nn_tensor *x, int64_t last)
{
    int r = x->rank;
    if (t->rank != r || t->dims[r - 1] != last) return 0;
    for (int i = 0; i + 1 < r; i++)
        if (t->dims[i] != x->dims[i]) return 0;
    return 1;
}

/* A view's bytes [lo, hi); an absent view's is empty. The fast paths compare views that are all
 * in the context's memory (plain ones, and forward's, which it checked so), so two views overlap
 * (nn__tensors_overlap) exactly when their spans do. */
struct span {
    uintptr_t lo, hi;
};

/* 0 when the end would wrap (left to the checks). */
static int span_of(const nn_tensor *t, size_t bytes, struct span *s)
{
    s->lo = (uintptr_t)t->data;
    return !__builtin_add_overflow(s->lo, bytes, &s->hi);
}

/* s[n] shares no byte with s[0..n). */
static int apart(const struct span *s, int n)
{
    for (int i = 0; i < n; i++)
        if (s[i].lo < s[n].hi && s[n].lo < s[i].hi) return 0;
    return 1;
}

static int forward_plain(struct nn_ctx *ctx, const nn_tensor *x, const nn_tensor *w,
                         const nn_tensor *b, const nn_tensor *y)
{
    size_t xn, wn, bn = 0, yn;
    if (!w || !y || !nn__tensor_plain(ctx, x, &xn) || !nn__tensor_plain(ctx, w, &wn) ||
        (b && !nn__tensor_plain(ctx, b, &bn)) || !nn__tensor_plain(ctx, y, &yn))
        return 0;
    nn_dtype dt = x->dtype;
    int64_t out = w->dims[0];
    if (w->dtype != dt || y->dtype != dt || w->rank != 2 || w->dims[1] != x->dims[x->rank - 1] ||
        !lead_then(y, x, out))
        return 0;
    if (b && (b->dtype != dt || b->rank != 1 || b->dims[0] != out)) return 0;
    struct span s[4] = {{0, 0}, {0, 0}, {0, 0}, {0, 0}}; /* x, w, b, y */
    return span_of(x, xn, &s[0]) && span_of(w, wn, &s[1]) && (!b || span_of(b, bn, &s[2])) &&
           span_of(y, yn, &s[3]) && apart(s, 3);
}

/* ---------------------------------------------------------------------------------------------
 * Forward, backward, pullbacks
 */

/* t0: the call's start when verbose, else 0. */
static nn_status linear_forward(nn_ctx *ctx, uint64_t t0, const nn_linear_params *p,
                                const nn_tensor *x, const nn_tensor *w, const nn_tensor *b,
                                nn_tensor *y, nn_linear_pullback **pullback_out)
{
    const char *fn = "nn_linear_forward";
    if (pullback_out) *pullback_out = NULL;
    if (!ctx) return NN__FAIL(NULL, NN_E_INVALID_ARG, "%s: ctx must not be NULL", fn);
    NN__TRY(check_params(ctx, fn, p));
    if (!x) return NN__FAIL(ctx, NN_E_INVALID_ARG, "%s: x must not be NULL", fn);
    struct nn__linear_problem prob;
    if (forward_plain(ctx, x, w, b, y)) {
        problem_of(ctx, p, x, w, b != NULL, &prob);
        failure_case(ctx, &prob, NULL, 0);
    } else {
        NN__TRY(check_forward(ctx, fn, p, x, w, b, y, &prob));
    }

    nn_linear_pullback *pb = NULL;
    if (pullback_out) {
        /* not zeroed: what is read is set here or by nn__pullback_add (the header) */
        pb = nn__host_alloc(sizeof *pb);
        if (!pb) return NN__FAIL(ctx, NN_E_OOM_HOST, "%s: out of host memory for the pullback", fn);
        pb->prob = prob;
        pb->x = *x;
        pb->w = *w;
        if (prob.activation == NN_ACTIVATION_RELU) pb->y = *y;
    }
    const struct nn__linear_backend *be = backend_of(ctx);
    struct nn__linear_note note;
    note.impl[0] = note.cache[0] = 0; /* empty strings; the rest is never read */
    nn_status st = be->forward(ctx, &prob, x, w, b, y, &note);
    if (st == NN_OK && pb) st = nn__pullback_add(ctx, fn, &pullback_kind, &pb->hdr);
    if (st != NN_OK) {
        nn__host_free(pb);
        return st;
    }
    if (t0) verbose_line(ctx, fn, be, &note, &prob, NULL, 0, t0);
    if (pullback_out) *pullback_out = pb;
    return NN_OK;
}

nn_status nn_linear_forward(nn_ctx *ctx, const nn_linear_params *p, const nn_tensor *x,
                            const nn_tensor *w, const nn_tensor *b, nn_tensor *y,
                            nn_linear_pullback **pullback_out)
{
    uint64_t t0 = nn__verbose(ctx) ? nn__now_ns() : 0;
    nn_status st = linear_forward(ctx, t0, p, x, w, b, y, pullback_out);
    /* a success has printed its op line */
    return st == NN_OK ? st : nn__verbose_exit(ctx, "linear_forward", t0, st);
}

/* An output of backward (NULL: not asked for, its span left empty): plain, of dtype, rank and
 * dims, apart from the views before it (s[0..n)); its span goes to s[n]. */
static int grad_plain(struct nn_ctx *ctx, const nn_tensor *t, nn_dtype dtype, int rank,
                      const int64_t *dims, struct span *s, int n)
{
    size_t bytes;
    if (!t) return 1;
    return nn__tensor_plain(ctx, t, &bytes) && t->dtype == dtype && same_dims(t, rank, dims) &&
           span_of(t, bytes, &s[n]) && apart(s, n);
}

static int grads_plain(struct nn_ctx *ctx, const struct nn__linear_problem *p,
                       const struct nn__linear_grads *g)
{
    /* check_grads' order: dy, the saved views, then the outputs, each apart from all before */
    struct span s[7] = {{0, 0}, {0, 0}, {0, 0}, {0, 0}, {0, 0}, {0, 0}, {0, 0}};
    nn_dtype dt = p->dtype;
    size_t es = nn_dtype_size(dt), dyn;
    if (!g->dy || !nn__tensor_plain(ctx, g->dy, &dyn) || g->dy->dtype != dt ||
        !lead_then(g->dy, g->x, p->out) || !span_of(g->dy, dyn, &s[0]))
        return 0;
    /* forward checked the saved views packed: extent = elements x es, which fit */
    if (!span_of(g->x, (size_t)(p->m * p->in) * es, &s[1]) ||
        !span_of(g->w, (size_t)(p->out * p->in) * es, &s[2]) ||
        (g->y && !span_of(g->y, (size_t)(p->m * p->out) * es, &s[3])))
        return 0;
    return grad_plain(ctx, g->dx, dt, g->x->rank, g->x->dims, s, 4) &&
           grad_plain(ctx, g->dw, dt, 2, g->w->dims, s, 5) &&
           grad_plain(ctx, g->db, dt, 1, &p->out, s, 6);
}

static nn_status check_grads(struct nn_ctx *ctx, const char *fn, const struct nn__linear_problem *p,
                             const struct nn__linear_grads *g)
{
    if (grads_plain(ctx, p, g)) return NN_OK;
    nn_dtype dt = p->dtype;
    NN__TRY(check_arg(ctx, fn, g->dy, "dy", dt, "x"));
    NN__TRY(check_y_dims(ctx, fn, g->dy, "dy", p));
    /* Everything an output could clobber before it is read: the saved views and dy, and the
     * other outputs. */
    const nn_tensor *others[] = {g->dy, g->x, g->w, g->y, g->dx, g->dw, g->db};
    const char *const names[] = {
        "dy", "x (saved by forward)", "w (saved by forward)", "y (saved by forward)", "dx", "dw",
        "db"};
    if (g->dx) {
        NN__TRY(check_arg(ctx, fn, g->dx, "dx", dt, "x"));
        int64_t want[NN_MAX_RANK];
        memcpy(want, p->lead, sizeof want);
        want[p->x_rank - 1] = p->in;
        NN__TRY(check_dims(ctx, fn, g->dx, "dx", p->x_rank, want, "x's dims"));
        NN__TRY(nn__check_output(ctx, fn, g->dx, "dx", others, names, 4));
    }
    if (g->dw) {
        NN__TRY(check_arg(ctx, fn, g->dw, "dw", dt, "x"));
        int64_t want[2] = {p->out, p->in};
        NN__TRY(check_dims(ctx, fn, g->dw, "dw", 2, want, "w's dims"));
        NN__TRY(nn__check_output(ctx, fn, g->dw, "dw", others, names, 5));
    }
    if (g->db) {
        NN__TRY(check_arg(ctx, fn, g->db, "db", dt, "x"));
        NN__TRY(check_bias_dims(ctx, fn, g->db, "db", p));
        NN__TRY(nn__check_output(ctx, fn, g->db, "db", others, names, 6));
    }
    const nn_tensor *all[] = {g->dy, g->dx, g->dw, g->db};
    const char *const all_names[] = {"dy", "dx", "dw", "db"};
    return check_packed(ctx, fn, all, all_names, 4);
}

/* t0 as in linear_forward. */
static nn_status linear_backward(nn_ctx *ctx, uint64_t t0, const char *fn,
                                 nn_linear_pullback **pullback, const nn_backward_options *opts,
                                 const nn_tensor *dy, nn_tensor *dx, nn_tensor *dw, nn_tensor *db)
{
    if (!ctx) return NN__FAIL(NULL, NN_E_INVALID_ARG, "%s: ctx must not be NULL", fn);
    struct nn__backward bw;
    NN__TRY(NN__BACKWARD_BEGIN(ctx, fn, &pullback_kind, pullback, opts, &bw));
    nn_linear_pullback *pb = *pullback;
    /* the problem as this call runs it: its accumulate (and text form) are the call's */
    struct nn__linear_problem prob = pb->prob;
    prob.accumulate = bw.accumulate;
    int relu = prob.activation == NN_ACTIVATION_RELU;
    struct nn__linear_grads g = {&pb->x, &pb->w, relu ? &pb->y : NULL, dy, dx,
                                 dw,     db,     bw.accumulate};
    failure_case(ctx, &prob, &g, bw.keep);
    NN__TRY(check_grads(ctx, fn, &prob, &g));
    const struct nn__linear_backend *be = backend_of(ctx);
    struct nn__linear_note note;
    note.impl[0] = note.cache[0] = 0; /* empty strings; the rest is never read */
    if (dx || dw || db) NN__TRY(be->backward(ctx, &prob, &g, &note));
    if (t0) verbose_line(ctx, fn, be, &note, &prob, &g, bw.keep, t0);
    if (bw.keep) return NN_OK;
    NN__TRY(nn__pullback_consume("nn_linear_pullback_free", pb));
    nn__host_free(pb);
    *pullback = NULL;
    return NN_OK;
}

nn_status nn_linear_backward(nn_ctx *ctx, nn_linear_pullback **pullback, const nn_tensor *dy,
                             nn_tensor *dx, nn_tensor *dw, nn_tensor *db)
{
    uint64_t t0 = nn__verbose(ctx) ? nn__now_ns() : 0;
    nn_status st = linear_backward(ctx, t0, "nn_linear_backward", pullback, NULL, dy, dx, dw, db);
    return st == NN_OK ? st : nn__verbose_exit(ctx, "linear_backward", t0, st);
}

nn_status nn_linear_backward_ex(nn_ctx *ctx, nn_linear_pullback **pullback,
                                const nn_backward_options *opts, const nn_tensor *dy, nn_tensor *dx,
                                nn_tensor *dw, nn_tensor *db)
{
    uint64_t t0 = nn__verbose(ctx) ? nn__now_ns() : 0;
    nn_status st =
        linear_backward(ctx, t0, "nn_linear_backward_ex", pullback, opts, dy, dx, dw, db);
    return st == NN_OK ? st : nn__verbose_exit(ctx, "linear_backward_ex", t0, st);
}

nn_status nn_linear_workspace_size(nn_ctx *ctx, const nn_linear_params *p, const nn_tensor *x,
                                   const nn_tensor *w, const nn_tensor *b, unsigned pass,
                                   unsigned accumulate, size_t *bytes)
{
    const char *fn = "nn_linear_workspace_size";
    if (!ctx) return NN__FAIL(NULL, NN_E_INVALID_ARG, "%s: ctx must not be NULL", fn);
    if (!bytes) return NN__FAIL(ctx, NN_E_INVALID_ARG, "%s: bytes must not be NULL", fn);
    NN__TRY(check_params(ctx, fn, p));
    unsigned all = NN_LINEAR_PASS_DX | NN_LINEAR_PASS_DW | NN_LINEAR_PASS_DB;
    if (pass & ~all)
        return NN__FAIL(ctx, NN_E_INVALID_ARG,
                        "%s: pass must be NN_LINEAR_PASS_FORWARD (0) or an OR of "
                        "NN_LINEAR_PASS_DX, _DW and _DB (1..7), got %u",
                        fn, pass);
    NN__TRY(nn__backward_accumulate(ctx, fn, &pullback_kind, "accumulate", accumulate));
    if (!x) return NN__FAIL(ctx, NN_E_INVALID_ARG, "%s: x must not be NULL", fn);
    NN__TRY(check_arg(ctx, fn, x, "x", x->dtype, "x"));
    NN__TRY(check_arg(ctx, fn, w, "w", x->dtype, "x"));
    if (b) NN__TRY(check_arg(ctx, fn, b, "b", x->dtype, "x"));
    struct nn__linear_problem prob;
    NN__TRY(resolve(ctx, fn, p, x, w, b != NULL, &prob));
    prob.accumulate = accumulate;
    if (b) NN__TRY(check_bias_dims(ctx, fn, b, "b", &prob));
    const nn_tensor *all_in[] = {x, w, b};
    const char *const names[] = {"x", "w", "b"};
    NN__TRY(check_packed(ctx, fn, all_in, names, 3));
    size_t n = 0;
    NN__TRY(backend_of(ctx)->workspace(ctx, &prob, pass, x, w, pass ? NULL : b, &n));
    *bytes = n;
    return NN_OK;
}

nn_status nn_linear_pullback_free(nn_linear_pullback **pullback)
{
    return nn__pullback_free("nn_linear_pullback_free", &pullback_kind, pullback, nn__host_free);
}

/* The optimizer: validation, the live set, the state's layout, dispatch to a backend and the
 * verbose line of a step. Messages name the public function that was called. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "core/capture.h"
#include "core/ctx.h"
#include "core/error.h"
#include "core/log.h"
#include "core/ptrset.h"
#include "core/tensor_util.h"
#include "core/text.h"
#include "optim/optim_internal.h"

/* Every optimizer made and not yet freed: a freed or foreign pointer is told apart from a live
 * optimizer before its memory is read. */
static struct nn__ptrset live = NN__PTRSET_INIT;

/* A GPU context exists only in builds with cuDNN. */
static const struct nn__optim_backend *backend_of(const struct nn_ctx *ctx)
{
#if NN_HAVE_CUDNN
    if (nn__ctx_on_gpu(ctx)) return &nn__optim_backend_cuda;
#endif
    (void)ctx;
    return &nn__optim_backend_ref;
}

static const char *kind_name(nn_optim_kind kind)
{
    switch (kind) {
    case NN_OPTIM_SGD: return "sgd";
    case NN_OPTIM_ADAM: return "adam";
    case NN_OPTIM_ADAMW: return "adamw";
    }
    return "?";
}

/* ---------------------------------------------------------------------------------------------
 * Parameters
 */

nn_status nn_optim_params_default(nn_optim_params *p, nn_optim_kind kind)
{
    const char *fn = "nn_optim_params_default";
    if (!p) return NN__FAIL(NULL, NN_E_INVALID_ARG, "%s: p must not be NULL", fn);
    if (kind != NN_OPTIM_SGD && kind != NN_OPTIM_ADAM && kind != NN_OPTIM_ADAMW)
        return NN__FAIL(NULL, NN_E_INVALID_ARG,
                        "%s: kind must be NN_OPTIM_SGD (1), NN_OPTIM_ADAM (2) or NN_OPTIM_ADAMW "
                        "(3), got %d",
                        fn, (int)kind);
    memset(p, 0, sizeof *p);
    p->kind = kind;
    p->lr = 1e-3;
    p->beta1 = 0.9;
    p->beta2 = 0.999;
    p->eps = 1e-8;
    p->weight_decay = kind == NN_OPTIM_ADAMW ? 1e-2 : 0;
    return NN_OK;
}

/* A field's range: [lo, hi] or [lo, hi) (open_hi), hi INFINITY for none. */
struct range {
    const char *name;
    double value, lo, hi;
    int open_hi;
};

static nn_status check_range(struct nn_ctx *ctx, const char *fn, const struct range *r)
{
    if (!isfinite(r->value))
        return NN__FAIL(ctx, NN_E_INVALID_ARG, "%s: %s must be finite, got %g", fn, r->name,
                        r->value);
    if (r->value < r->lo || r->value > r->hi || (r->open_hi && r->value == r->hi)) {
        if (isinf(r->hi))
            return NN__FAIL(ctx, NN_E_INVALID_ARG, "%s: %s must be >= %g, got %g", fn, r->name,
                            r->lo, r->value);
        return NN__FAIL(ctx, NN_E_INVALID_ARG, "%s: %s must be in [%g, %g%c, got %g", fn, r->name,
                        r->lo, r->hi, r->open_hi ? ')' : ']', r->value);
    }
    return NN_OK;
}

static nn_status check_params(struct nn_ctx *ctx, const char *fn, const nn_optim_params *p)
{
    if (!p) return NN__FAIL(ctx, NN_E_INVALID_ARG, "%s: p (the parameters) must not be NULL", fn);
    if (p->kind != NN_OPTIM_SGD && p->kind != NN_OPTIM_ADAM && p->kind != NN_OPTIM_ADAMW)
        return NN__FAIL(ctx, NN_E_INVALID_ARG,
                        "%s: p.kind must be NN_OPTIM_SGD (1), NN_OPTIM_ADAM (2) or NN_OPTIM_ADAMW "
                        "(3), got %d",
                        fn, (int)p->kind);
    if (p->nesterov != 0 && p->nesterov != 1)
        return NN__FAIL(ctx, NN_E_INVALID_ARG, "%s: p.nesterov must be 0 or 1, got %d", fn,
                        p->nesterov);
    const struct range ranges[] = {
        {"p.lr", p->lr, 0, INFINITY, 0},
        {"p.momentum", p->momentum, 0, INFINITY, 0},
        {"p.dampening", p->dampening, 0, 1, 0},
        {"p.weight_decay", p->weight_decay, 0, INFINITY, 0},
        {"p.beta1", p->beta1, 0, 1, 1},
        {"p.beta2", p->beta2, 0, 1, 1},
        {"p.eps", p->eps, 0, INFINITY, 0},
        {"p.max_grad_norm", p->max_grad_norm, 0, INFINITY, 0},
    };
    for (size_t i = 0; i < sizeof ranges / sizeof ranges[0]; i++)
        NN__TRY(check_range(ctx, fn, &ranges[i]));
    if (p->nesterov && (p->momentum <= 0 || p->dampening != 0))
        return NN__FAIL(ctx, NN_E_INVALID_ARG,
                        "%s: p.nesterov = 1 needs p.momentum > 0 and p.dampening = 0 (PyTorch's "
                        "rule), got momentum %g and dampening %g",
                        fn, p->momentum, p->dampening);
    return NN__CHECK_RESERVED(ctx, fn, "p.reserved", p->reserved);
}

static void hyper_of(const nn_optim_params *p, struct nn__optim_hyper *h)
{
    h->lr = p->lr;
    h->momentum = p->momentum;
    h->dampening = p->dampening;
    h->weight_decay = p->weight_decay;
    h->beta1 = p->beta1;
    h->beta2 = p->beta2;
    h->eps = p->eps;
    h->max_grad_norm = p->max_grad_norm;
}

/* ---------------------------------------------------------------------------------------------
 * Tensors
 */

static int span_cmp(const void *a, const void *b)
{
    uintptr_t x = ((const struct nn__optim_span *)a)->lo,
              y = ((const struct nn__optim_span *)b)->lo;
    return x < y ? -1 : x > y;
}

/* A tensor that passed nn__check_tensor and is packed: its bytes. */
static struct nn__optim_span span_of(const nn_tensor *t, int index)
{
    struct nn__optim_span s;
    s.lo = (uintptr_t)t->data;
    s.hi = s.lo + (uintptr_t)nn_tensor_numel(t) * nn_dtype_size(t->dtype);
    s.index = index;
    return s;
}

static nn_status check_param(struct nn_ctx *ctx, const char *fn, const nn_tensor *t, int i,
                             nn_dtype first)
{
    char name[32];
    snprintf(name, sizeof name, "params[%d]", i);
    NN__TRY(nn__check_tensor(ctx, fn, t, name));
    if (t->dtype != NN_DTYPE_F32 && t->dtype != NN_DTYPE_F64)
        return NN__FAIL(ctx, NN_E_DTYPE, "%s: %s.dtype must be f32 or f64, got %s", fn, name,
                        nn_dtype_name(t->dtype));
    if (i > 0 && t->dtype != first)
        return NN__FAIL(ctx, NN_E_DTYPE,
                        "%s: %s.dtype must equal params[0].dtype (%s): one optimizer takes one "
                        "dtype, got %s",
                        fn, name, nn_dtype_name(first), nn_dtype_name(t->dtype));
    if (!nn_tensor_is_contiguous(t))
        return NN__FAIL(ctx, NN_E_UNSUPPORTED,
                        "%s: %s must be fully packed row-major (nn_tensor_is_contiguous); other "
                        "strides are not supported",
                        fn, name);
    return NN_OK;
}

/* The parameters' spans, sorted, into out (n of them); two that overlap are refused. */
static nn_status check_params_apart(struct nn_ctx *ctx, const char *fn, const nn_tensor *params,
                                    int n, struct nn__optim_span *out)
{
    for (int i = 0; i < n; i++)
        out[i] = span_of(&params[i], i);
    qsort(out, (size_t)n, sizeof *out, span_cmp);
    for (int i = 1; i < n; i++)
        if (out[i].lo < out[i - 1].hi) {
            int a = out[i - 1].index, b = out[i].index;
            return NN__FAIL(ctx, NN_E_INVALID_ARG,
                            "%s: params[%d] and params[%d] share memory: each parameter must have "
                            "storage of its own",
                            fn, a < b ? a : b, a < b ? b : a);
        }
    return NN_OK;
}

/* The parameter whose bytes overlap s, or -1 (spans sorted and disjoint). */
static int overlapping_param(const struct nn_optim *opt, struct nn__optim_span s)
{
    int lo = 0, hi = opt->n; /* the first span ending after s.lo */
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        if (opt->spans[mid].hi <= s.lo)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < opt->n && opt->spans[lo].lo < s.hi ? opt->spans[lo].index : -1;
}

static nn_status check_grad(struct nn_ctx *ctx, const char *fn, const struct nn_optim *opt,
                            const nn_tensor *g, int i)
{
    char name[32];
    const nn_tensor *p = &opt->p[i];
    snprintf(name, sizeof name, "grads[%d]", i);
    NN__TRY(nn__check_tensor(ctx, fn, g, name));
    if (g->dtype != p->dtype)
        return NN__FAIL(ctx, NN_E_DTYPE, "%s: %s.dtype must equal params[%d].dtype (%s), got %s",
                        fn, name, i, nn_dtype_name(p->dtype), nn_dtype_name(g->dtype));
    if (g->rank != p->rank)
        return NN__FAIL(ctx, NN_E_SHAPE, "%s: %s.rank must be params[%d].rank (%d), got %d", fn,
                        name, i, p->rank, g->rank);
    for (int d = 0; d < p->rank; d++)
        if (g->dims[d] != p->dims[d])
            return NN__FAIL(ctx, NN_E_SHAPE,
                            "%s: %s.dims[%d] must be params[%d].dims[%d] (%lld), got %lld", fn,
                            name, d, i, d, (long long)p->dims[d], (long long)g->dims[d]);
    if (!nn_tensor_is_contiguous(g))
        return NN__FAIL(ctx, NN_E_UNSUPPORTED,
                        "%s: %s must be fully packed row-major (nn_tensor_is_contiguous); other "
                        "strides are not supported",
                        fn, name);
    int other = overlapping_param(opt, span_of(g, i));
    if (other >= 0)
        return NN__FAIL(ctx, NN_E_INVALID_ARG,
                        "%s: %s shares memory with params[%d], which the step writes: a gradient "
                        "must not overlap any parameter",
                        fn, name, other);
    return NN_OK;
}

/* opt is live and ctx's (nothing of it is read before it is known live). */
static nn_status check_opt(struct nn_ctx *ctx, const char *fn, const nn_optim *opt)
{
    if (!opt) return NN__FAIL(ctx, NN_E_INVALID_ARG, "%s: opt must not be NULL", fn);
    if (!nn__ptrset_contains(&live, opt))
        return NN__FAIL(ctx, NN_E_BAD_POINTER,
                        "%s: opt (%p) is not a live optimizer: already freed by nn_optim_free, "
                        "or never made by nn_optim_create",
                        fn, (const void *)opt);
    if (opt->ctx != ctx)
        return NN__FAIL(ctx, NN_E_INVALID_ARG,
                        "%s: opt was created with context %p, but this call has context %p; use "
                        "the one that made it",
                        fn, (void *)opt->ctx, (void *)ctx);
    return NN_OK;
}

/* ---------------------------------------------------------------------------------------------
 * Create and free
 */

/* The state: states buffers per parameter, of its bytes, each 256-byte aligned. */
static nn_status lay_out_state(struct nn_ctx *ctx, const char *fn, struct nn_optim *opt)
{
    size_t at = 0, es = nn_dtype_size(opt->dtype);
    for (int i = 0; i < opt->n; i++)
        for (int j = 0; j < opt->states; j++) {
            size_t bytes = (size_t)nn_tensor_numel(&opt->p[i]) * es, end;
            opt->state_off[i * opt->states + j] = at;
            if (__builtin_add_overflow(at, bytes, &end) ||
                __builtin_add_overflow(end, (size_t)255, &at))
                return NN__FAIL(ctx, NN_E_OVERFLOW,
                                "%s: the optimizer's state (%d buffer(s) of every parameter) "
                                "overflows size_t",
                                fn, opt->states);
            at &= ~(size_t)255;
        }
    opt->state_bytes = at;
    return NN_OK;
}

static void optim_release(struct nn_ctx *ctx, const struct nn__optim_backend *be,
                          struct nn_optim *opt)
{
    be->destroy(ctx, opt);
    nn__host_free(opt->p);
    nn__host_free(opt->state_off);
    nn__host_free(opt->spans);
    nn__host_free(opt);
}

static nn_status optim_create(nn_ctx *ctx, const char *fn, const nn_optim_params *p, int n,
                              const nn_tensor *params, struct nn_optim *opt)
{
    for (int i = 0; i < n; i++)
        NN__TRY(check_param(ctx, fn, &params[i], i, params[0].dtype));
    opt->p = nn__host_calloc((size_t)n, sizeof *opt->p);
    opt->spans = nn__host_calloc((size_t)n, sizeof *opt->spans);
    opt->states = p->kind != NN_OPTIM_SGD ? 2 : p->momentum != 0;
    opt->state_off = nn__host_calloc((size_t)n * (size_t)(opt->states ? opt->states : 1),
                                     sizeof *opt->state_off);
    if (!opt->p || !opt->spans || !opt->state_off)
        return NN__FAIL(ctx, NN_E_OOM_HOST, "%s: out of host memory for the optimizer", fn);
    NN__TRY(check_params_apart(ctx, fn, params, n, opt->spans));
    memcpy(opt->p, params, (size_t)n * sizeof *params);
    opt->ctx = ctx;
    opt->params = *p;
    hyper_of(p, &opt->hyper);
    opt->n = n;
    opt->dtype = params[0].dtype;
    for (int i = 0; i < n; i++)
        opt->total += nn_tensor_numel(&params[i]); /* fits: the spans are disjoint */
    NN__TRY(lay_out_state(ctx, fn, opt));
    NN__TRY(backend_of(ctx)->create(ctx, fn, opt));
    if (nn__ptrset_add(&live, opt) != 0)
        return NN__FAIL(ctx, NN_E_OOM_HOST, "%s: out of host memory for the live set", fn);
    return NN_OK;
}

nn_status nn_optim_create(nn_ctx *ctx, const nn_optim_params *p, int n, const nn_tensor *params,
                          nn_optim **out)
{
    const char *fn = "nn_optim_create";
    if (out) *out = NULL;
    if (!ctx) return NN__FAIL(NULL, NN_E_INVALID_ARG, "%s: ctx must not be NULL", fn);
    NN__TRY(check_params(ctx, fn, p));
    if (n < 1) return NN__FAIL(ctx, NN_E_INVALID_ARG, "%s: n must be >= 1, got %d", fn, n);
    if (!params) return NN__FAIL(ctx, NN_E_INVALID_ARG, "%s: params must not be NULL", fn);
    if (!out) return NN__FAIL(ctx, NN_E_INVALID_ARG, "%s: out must not be NULL", fn);
    if (ctx->capture)
        return NN__FAIL(ctx, NN_E_GRAPH,
                        "%s: a graph capture is open on the context; an optimizer's state is "
                        "made and zeroed at its creation, which every launch would repeat: create "
                        "it before nn_graph_begin()",
                        fn);
    struct nn_optim *opt = nn__host_calloc(1, sizeof *opt);
    if (!opt) return NN__FAIL(ctx, NN_E_OOM_HOST, "%s: out of host memory for the optimizer", fn);
    nn_status st = optim_create(ctx, fn, p, n, params, opt);
    if (st != NN_OK) {
        struct nn__error_kept keep = nn__error_keep(ctx);
        optim_release(ctx, backend_of(ctx), opt);
        nn__error_restore(ctx, &keep);
        return st;
    }
    *out = opt;
    return NN_OK;
}

nn_status nn_optim_free(nn_ctx *ctx, nn_optim *opt)
{
    const char *fn = "nn_optim_free";
    if (!ctx) return NN__FAIL(NULL, NN_E_INVALID_ARG, "%s: ctx must not be NULL", fn);
    if (!opt) return NN_OK;
    NN__TRY(check_opt(ctx, fn, opt));
    /* Two threads freeing the same optimizer: only one removes it. */
    if (!nn__ptrset_remove(&live, opt))
        return NN__FAIL(ctx, NN_E_BAD_POINTER,
                        "%s: opt (%p) is not a live optimizer: already freed", fn, (void *)opt);
    optim_release(ctx, backend_of(ctx), opt);
    return NN_OK;
}

/* ---------------------------------------------------------------------------------------------
 * Step and the rest
 */

/* The case text of docs/OPTIM.md: "adamw t3n4170 f32 lr=0.001 beta1=0.9 ... clip=1". */
static void step_text(const struct nn_optim *opt, char *buf, size_t cap)
{
    const nn_optim_params *p = &opt->params;
    size_t n = nn__text_put(buf, cap, 0, "%s t%dn%lld %s lr=%g", kind_name(p->kind), opt->n,
                            (long long)opt->total, nn_dtype_name(opt->dtype), opt->hyper.lr);
    if (p->kind == NN_OPTIM_SGD)
        n = nn__text_put(buf, cap, n, " momentum=%g dampening=%g%s", p->momentum, p->dampening,
                         p->nesterov ? " nesterov" : "");
    else
        n = nn__text_put(buf, cap, n, " beta1=%g beta2=%g eps=%g", p->beta1, p->beta2, p->eps);
    n = nn__text_put(buf, cap, n, " wd=%g", p->weight_decay);
    if (p->max_grad_norm > 0) nn__text_put(buf, cap, n, " clip=%g", p->max_grad_norm);
}

static nn_status optim_step(nn_ctx *ctx, uint64_t t0, nn_optim *opt, int n, const nn_tensor *grads)
{
    const char *fn = "nn_optim_step";
    if (!ctx) return NN__FAIL(NULL, NN_E_INVALID_ARG, "%s: ctx must not be NULL", fn);
    NN__TRY(check_opt(ctx, fn, opt));
    if (n != opt->n)
        return NN__FAIL(ctx, NN_E_INVALID_ARG,
                        "%s: n must be the optimizer's tensor count (%d, as created), got %d", fn,
                        opt->n, n);
    if (!grads) return NN__FAIL(ctx, NN_E_INVALID_ARG, "%s: grads must not be NULL", fn);
    for (int i = 0; i < n; i++)
        NN__TRY(check_grad(ctx, fn, opt, &grads[i], i));
    const struct nn__optim_backend *be = backend_of(ctx);
    struct nn__optim_note note;
    note.impl[0] = 0;
    NN__TRY_IN(ctx, fn, be->step(ctx, opt, grads, &note));
    if (t0) {
        char shape[256];
        step_text(opt, shape, sizeof shape);
        nn__verbose_op(ctx, "optim_step", note.impl[0] ? note.impl : be->name, "-", shape, t0);
    }
    return NN_OK;
}

nn_status nn_optim_step(nn_ctx *ctx, nn_optim *opt, int n, const nn_tensor *grads)
{
    uint64_t t0 = nn__verbose(ctx) ? nn__now_ns() : 0;
    nn_status st = optim_step(ctx, t0, opt, n, grads);
    return st == NN_OK ? st : nn__verbose_exit(ctx, "optim_step", t0, st);
}

nn_status nn_optim_set_lr(nn_ctx *ctx, nn_optim *opt, double lr)
{
    const char *fn = "nn_optim_set_lr";
    if (!ctx) return NN__FAIL(NULL, NN_E_INVALID_ARG, "%s: ctx must not be NULL", fn);
    NN__TRY(check_opt(ctx, fn, opt));
    const struct range r = {"lr", lr, 0, INFINITY, 0};
    NN__TRY(check_range(ctx, fn, &r));
    NN__TRY_IN(ctx, fn, backend_of(ctx)->set_lr(ctx, opt, lr));
    opt->params.lr = lr;
    opt->hyper.lr = lr;
    return NN_OK;
}

nn_status nn_optim_get_step(nn_ctx *ctx, nn_optim *opt, int64_t *step)
{
    const char *fn = "nn_optim_get_step";
    if (!ctx) return NN__FAIL(NULL, NN_E_INVALID_ARG, "%s: ctx must not be NULL", fn);
    NN__TRY(check_opt(ctx, fn, opt));
    if (!step) return NN__FAIL(ctx, NN_E_INVALID_ARG, "%s: step must not be NULL", fn);
    NN__TRY_IN(ctx, fn, backend_of(ctx)->get_step(ctx, opt, step));
    return NN_OK;
}

nn_status nn_optim_reset(nn_ctx *ctx, nn_optim *opt)
{
    const char *fn = "nn_optim_reset";
    if (!ctx) return NN__FAIL(NULL, NN_E_INVALID_ARG, "%s: ctx must not be NULL", fn);
    NN__TRY(check_opt(ctx, fn, opt));
    NN__TRY_IN(ctx, fn, backend_of(ctx)->reset(ctx, opt));
    return NN_OK;
}

/* Softmax and the softmax cross-entropy: validation, dispatch to a backend, pullbacks and the
 * verbose line. Messages name the public function that was called. */
#include <stdio.h>
#include <string.h>

#include "core/alloc.h"
#include "core/capture.h"
#include "core/ctx.h"
#include "core/error.h"
#include "core/log.h"
#include "core/pullback.h"
#include "core/tensor_util.h"
#include "core/text.h"
#include "softmax/softmax_internal.h"

struct nn_softmax_pullback {
    struct nn__pullback hdr; /* the shared registry's header (core/pullback.h) */
    struct nn__softmax_problem prob;
    nn_tensor y; /* the caller's view */
};

struct nn_softmax_cross_entropy_pullback {
    struct nn__pullback hdr;
    struct nn__softmax_problem prob;
    nn_tensor x;                  /* the caller's view */
    int64_t *targets;             /* host copy, n * s values in [0, c) */
    struct nn__xent_saved *saved; /* the backend's (NULL for the reference) */
};

static const struct nn__pullback_kind softmax_kind = {"softmax", NN_ACCUMULATE_DX, NULL};
static const struct nn__pullback_kind xent_kind = {"softmax_cross_entropy", NN_ACCUMULATE_DX, NULL};

/* A GPU context exists only in builds with cuDNN. */
static const struct nn__softmax_backend *backend_of(const struct nn_ctx *ctx)
{
#if NN_HAVE_CUDNN
    if (nn__ctx_on_gpu(ctx)) return &nn__softmax_backend_cudnn;
#endif
    (void)ctx;
    return &nn__softmax_backend_ref;
}

/* ---------------------------------------------------------------------------------------------
 * Text form (docs/SOFTMAX.md): n<N>c<C>[s<d>{x<d>}] softmax|log|xent [accdx] [i32|i64] <dtype>
 */

static void problem_text(const struct nn__softmax_problem *p, char *buf, size_t cap)
{
    size_t n =
        nn__text_put(buf, cap, 0, "n%lldc%lld", (long long)p->dims[0], (long long)p->dims[1]);
    for (int i = 2; i < p->rank; i++)
        n = nn__text_put(buf, cap, n, i == 2 ? "s%lld" : "x%lld", (long long)p->dims[i]);
    if (p->xent)
        n = nn__text_put(buf, cap, n, " xent %s", p->index == NN_INDEX_I32 ? "i32" : "i64");
    else
        n = nn__text_put(buf, cap, n, " %s", p->mode == NN_SOFTMAX_MODE_LOG ? "log" : "softmax");
    if (p->accumulate & NN_ACCUMULATE_DX) n = nn__text_put(buf, cap, n, " accdx");
    nn__text_put(buf, cap, n, " %s", nn_dtype_name(p->dtype));
}

static void verbose_line(struct nn_ctx *ctx, const char *fn, const struct nn__softmax_backend *be,
                         const struct nn__softmax_note *note, const struct nn__softmax_problem *p,
                         int keep, uint64_t t0)
{
    char shape[256];
    problem_text(p, shape, sizeof shape);
    /* a backward that kept its pullback (the case syntax's "keep") */
    if (keep) nn__text_put(shape, sizeof shape, strlen(shape), " keep");
    /* The verbose op is the public name without its "nn_". */
    nn__verbose_op(ctx, fn + 3, note->impl[0] ? note->impl : be->name, "-", shape, t0);
}

/* The call's case, once its problem is known, for its failure line. */
static void failure_case(const struct nn__softmax_problem *p, int keep, uint64_t t0)
{
    if (!t0) return;
    char shape[256];
    problem_text(p, shape, sizeof shape);
    if (keep) nn__text_put(shape, sizeof shape, strlen(shape), " keep");
    nn__verbose_case(shape);
}

/* ---------------------------------------------------------------------------------------------
 * Validation
 */

nn_status nn_softmax_params_default(nn_softmax_params *p)
{
    if (!p)
        return NN__FAIL(NULL, NN_E_INVALID_ARG, "nn_softmax_params_default: p must not be NULL");
    memset(p, 0, sizeof *p);
    p->mode = NN_SOFTMAX_MODE_SOFTMAX;
    return NN_OK;
}

static nn_status check_params(struct nn_ctx *ctx, const char *fn, const nn_softmax_params *p)
{
    if (!p) return NN__FAIL(ctx, NN_E_INVALID_ARG, "%s: p (the parameters) must not be NULL", fn);
    if (p->mode != NN_SOFTMAX_MODE_SOFTMAX && p->mode != NN_SOFTMAX_MODE_LOG)
        return NN__FAIL(ctx, NN_E_INVALID_ARG,
                        "%s: p.mode must be NN_SOFTMAX_MODE_SOFTMAX (0) or NN_SOFTMAX_MODE_LOG "
                        "(1), got %d",
                        fn, (int)p->mode);
    NN__TRY(NN__CHECK_RESERVED(ctx, fn, "p.reserved", p->reserved));
    return NN_OK;
}

static nn_status check_arg(struct nn_ctx *ctx, const char *fn, const nn_tensor *t, const char *name,
                           nn_dtype dtype)
{
    if (!t) return NN__FAIL(ctx, NN_E_INVALID_ARG, "%s: %s must not be NULL", fn, name);
    NN__TRY(nn__check_tensor(ctx, fn, t, name));
    if (t->dtype != dtype)
        return NN__FAIL(ctx, NN_E_DTYPE, "%s: %s.dtype must equal x.dtype (%s), got %s", fn, name,
                        nn_dtype_name(dtype), nn_dtype_name(t->dtype));
    return NN_OK;
}

/* want: rank dims; skip_c drops x's dim 1 (the cross-entropy's per-sample tensors). */
static nn_status check_dims(struct nn_ctx *ctx, const char *fn, const nn_tensor *t,
                            const char *name, const struct nn__softmax_problem *p, int skip_c)
{
    int64_t want[NN_MAX_RANK];
    int rank = 0;
    for (int i = 0; i < p->rank; i++)
        if (!(skip_c && i == 1)) want[rank++] = p->dims[i];
    const char *what = skip_c ? "x's dims without C" : "x's dims";
    if (t->rank != rank)
        return NN__FAIL(ctx, NN_E_SHAPE, "%s: %s.rank must be %d (%s), got %d", fn, name, rank,
                        what, t->rank);
    for (int i = 0; i < rank; i++)
        if (t->dims[i] != want[i])
            return NN__FAIL(ctx, NN_E_SHAPE, "%s: %s.dims[%d] must be %lld (%s), got %lld", fn,
                            name, i, (long long)want[i], what, (long long)t->dims[i]);
    return NN_OK;
}

/* Checked after the dims, so that wrong dims are reported as such. */
static nn_status check_packed(struct nn_ctx *ctx, const char *fn, const nn_tensor *const *t,
                              const char *const *names, int n)
{
    for (int i = 0; i < n; i++)
        if (!nn_tensor_is_contiguous(t[i]))
            return NN__FAIL(ctx, NN_E_UNSUPPORTED,
                            "%s: %s must be fully packed row-major (nn_tensor_is_contiguous); "
                            "other strides are not supported",
                            fn, names[i]);
    return NN_OK;
}

static nn_status check_output(struct nn_ctx *ctx, const char *fn, const nn_tensor *out,
                              const char *name, const nn_tensor *a, const char *aname,
                              const nn_tensor *b, const char *bname)
{
    NN__TRY(nn__check_output_distinct(ctx, fn, out, name));
    NN__TRY(nn__check_no_overlap(ctx, fn, out, name, a, aname));
    return b ? nn__check_no_overlap(ctx, fn, out, name, b, bname) : NN_OK;
}

/* x: a checked tensor of rank >= 2. */
static nn_status resolve(struct nn_ctx *ctx, const char *fn, const nn_tensor *x,
                         struct nn__softmax_problem *p)
{
    if (x->rank < 2)
        return NN__FAIL(ctx, NN_E_SHAPE,
                        "%s: x.rank must be >= 2 (N x C [x ...], the softmax over dim 1), got %d",
                        fn, x->rank);
    memset(p, 0, sizeof *p);
    p->n = x->dims[0];
    p->c = x->dims[1];
    p->s = nn_tensor_numel(x) / (p->n * p->c);
    p->dtype = x->dtype;
    p->rank = x->rank;
    memcpy(p->dims, x->dims, sizeof p->dims);
    return NN_OK;
}

/* ---------------------------------------------------------------------------------------------
 * Softmax
 */

static nn_status softmax_forward(nn_ctx *ctx, const nn_softmax_params *p, const nn_tensor *x,
                                 nn_tensor *y, nn_softmax_pullback **pullback_out)
{
    const char *fn = "nn_softmax_forward";
    if (pullback_out) *pullback_out = NULL;
    if (!ctx) return NN__FAIL(NULL, NN_E_INVALID_ARG, "%s: ctx must not be NULL", fn);
    uint64_t t0 = nn__verbose(ctx) ? nn__now_ns() : 0;
    NN__TRY(check_params(ctx, fn, p));
    if (!x) return NN__FAIL(ctx, NN_E_INVALID_ARG, "%s: x must not be NULL", fn);
    NN__TRY(check_arg(ctx, fn, x, "x", x->dtype));
    NN__TRY(check_arg(ctx, fn, y, "y", x->dtype));
    struct nn__softmax_problem prob;
    NN__TRY(resolve(ctx, fn, x, &prob));
    prob.mode = p->mode;
    failure_case(&prob, 0, t0);
    NN__TRY(check_dims(ctx, fn, y, "y", &prob, 0));
    NN__TRY(check_output(ctx, fn, y, "y", x, "x", NULL, NULL));
    const nn_tensor *all[] = {x, y};
    const char *const names[] = {"x", "y"};
    NN__TRY(check_packed(ctx, fn, all, names, 2));

    nn_softmax_pullback *pb = NULL;
    if (pullback_out) {
        pb = nn__host_calloc(1, sizeof *pb);
        if (!pb) return NN__FAIL(ctx, NN_E_OOM_HOST, "%s: out of host memory for the pullback", fn);
        pb->prob = prob;
        pb->y = *y;
    }
    const struct nn__softmax_backend *be = backend_of(ctx);
    struct nn__softmax_note note = {{0}};
    nn_status st = be->forward(ctx, &prob, x, y, &note);
    if (st == NN_OK && pb) st = nn__pullback_add(ctx, fn, &softmax_kind, &pb->hdr);
    if (st != NN_OK) {
        nn__host_free(pb);
        return st;
    }
    if (t0) verbose_line(ctx, fn, be, &note, &prob, 0, t0);
    if (pullback_out) *pullback_out = pb;
    return NN_OK;
}

nn_status nn_softmax_forward(nn_ctx *ctx, const nn_softmax_params *p, const nn_tensor *x,
                             nn_tensor *y, nn_softmax_pullback **pullback_out)
{
    uint64_t t0 = nn__verbose(ctx) ? nn__now_ns() : 0;
    return nn__verbose_exit(ctx, "softmax_forward", t0,
                            softmax_forward(ctx, p, x, y, pullback_out));
}

static nn_status softmax_backward(nn_ctx *ctx, const char *fn, nn_softmax_pullback **pullback,
                                  const nn_backward_options *opts, const nn_tensor *dy,
                                  nn_tensor *dx)
{
    if (!ctx) return NN__FAIL(NULL, NN_E_INVALID_ARG, "%s: ctx must not be NULL", fn);
    uint64_t t0 = nn__verbose(ctx) ? nn__now_ns() : 0;
    struct nn__backward bw;
    NN__TRY(NN__BACKWARD_BEGIN(ctx, fn, &softmax_kind, pullback, opts, &bw));
    nn_softmax_pullback *pb = *pullback;
    /* the problem as this call runs it: its accumulate (and text form) are the call's */
    struct nn__softmax_problem prob = pb->prob;
    prob.accumulate = bw.accumulate;
    failure_case(&prob, bw.keep, t0);
    nn_dtype dt = prob.dtype;
    NN__TRY(check_arg(ctx, fn, dy, "dy", dt));
    NN__TRY(check_arg(ctx, fn, dx, "dx", dt));
    NN__TRY(check_dims(ctx, fn, dy, "dy", &prob, 0));
    NN__TRY(check_dims(ctx, fn, dx, "dx", &prob, 0));
    NN__TRY(check_output(ctx, fn, dx, "dx", dy, "dy", &pb->y, "y (saved by forward)"));
    const nn_tensor *all[] = {dy, dx};
    const char *const names[] = {"dy", "dx"};
    NN__TRY(check_packed(ctx, fn, all, names, 2));
    const struct nn__softmax_backend *be = backend_of(ctx);
    struct nn__softmax_note note = {{0}};
    NN__TRY(be->backward(ctx, &prob, &pb->y, dy, dx, &note));
    if (t0) verbose_line(ctx, fn, be, &note, &prob, bw.keep, t0);
    return bw.keep ? NN_OK : nn_softmax_pullback_free(pullback);
}

nn_status nn_softmax_backward(nn_ctx *ctx, nn_softmax_pullback **pullback, const nn_tensor *dy,
                              nn_tensor *dx)
{
    uint64_t t0 = nn__verbose(ctx) ? nn__now_ns() : 0;
    return nn__verbose_exit(ctx, "softmax_backward", t0,
                            softmax_backward(ctx, "nn_softmax_backward", pullback, NULL, dy, dx));
}

nn_status nn_softmax_backward_ex(nn_ctx *ctx, nn_softmax_pullback **pullback,
                                 const nn_backward_options *opts, const nn_tensor *dy,
                                 nn_tensor *dx)
{
    uint64_t t0 = nn__verbose(ctx) ? nn__now_ns() : 0;
    return nn__verbose_exit(
        ctx, "softmax_backward_ex", t0,
        softmax_backward(ctx, "nn_softmax_backward_ex", pullback, opts, dy, dx));
}

/* The checks the calls make of what a query is given (x, and p for the softmax). */
static nn_status workspace_query(nn_ctx *ctx, const char *fn, const nn_softmax_params *p, int xent,
                                 const nn_tensor *x, nn_softmax_pass pass, size_t *bytes)
{
    if (!ctx) return NN__FAIL(NULL, NN_E_INVALID_ARG, "%s: ctx must not be NULL", fn);
    if (!bytes) return NN__FAIL(ctx, NN_E_INVALID_ARG, "%s: bytes must not be NULL", fn);
    if (!xent) NN__TRY(check_params(ctx, fn, p));
    if (pass != NN_SOFTMAX_PASS_FORWARD && pass != NN_SOFTMAX_PASS_BACKWARD)
        return NN__FAIL(ctx, NN_E_INVALID_ARG,
                        "%s: pass must be NN_SOFTMAX_PASS_FORWARD (0) or NN_SOFTMAX_PASS_BACKWARD "
                        "(1), got %d",
                        fn, (int)pass);
    if (!x) return NN__FAIL(ctx, NN_E_INVALID_ARG, "%s: x must not be NULL", fn);
    NN__TRY(check_arg(ctx, fn, x, "x", x->dtype));
    struct nn__softmax_problem prob;
    NN__TRY(resolve(ctx, fn, x, &prob));
    prob.xent = xent;
    prob.index = NN_INDEX_I64;
    if (!xent) prob.mode = p->mode;
    const nn_tensor *all[] = {x};
    const char *const names[] = {"x"};
    NN__TRY(check_packed(ctx, fn, all, names, 1));
    size_t n = 0;
    NN__TRY(backend_of(ctx)->workspace(ctx, &prob, pass == NN_SOFTMAX_PASS_BACKWARD, &n));
    *bytes = n;
    return NN_OK;
}

nn_status nn_softmax_workspace_size(nn_ctx *ctx, const nn_softmax_params *p, const nn_tensor *x,
                                    nn_softmax_pass pass, size_t *bytes)
{
    return workspace_query(ctx, "nn_softmax_workspace_size", p, 0, x, pass, bytes);
}

nn_status nn_softmax_pullback_free(nn_softmax_pullback **pullback)
{
    return nn__pullback_free("nn_softmax_pullback_free", &softmax_kind, pullback, nn__host_free);
}

/* ---------------------------------------------------------------------------------------------
 * Cross-entropy
 */

static nn_status check_targets(struct nn_ctx *ctx, const char *fn, const nn_class_targets *t)
{
    if (!t) return NN__FAIL(ctx, NN_E_INVALID_ARG, "%s: targets must not be NULL", fn);
    if (!t->data) return NN__FAIL(ctx, NN_E_INVALID_ARG, "%s: targets.data must not be NULL", fn);
    if (t->type != NN_INDEX_I32 && t->type != NN_INDEX_I64)
        return NN__FAIL(ctx, NN_E_INVALID_ARG,
                        "%s: targets.type must be NN_INDEX_I32 (1) or NN_INDEX_I64 (2), got %d", fn,
                        (int)t->type);
    size_t align = t->type == NN_INDEX_I32 ? 4 : 8;
    if ((uintptr_t)t->data % align)
        return NN__FAIL(ctx, NN_E_INVALID_ARG,
                        "%s: targets.data (%p) must be aligned to %zu bytes for %s indices", fn,
                        t->data, align, t->type == NN_INDEX_I32 ? "int32" : "int64");
    return NN__CHECK_RESERVED(ctx, fn, "targets.reserved", t->reserved);
}

/* The targets as host int64 values, each in [0, c) (the first one outside is named). */
static nn_status take_targets(struct nn_ctx *ctx, const char *fn,
                              const struct nn__softmax_backend *be,
                              const struct nn__softmax_problem *p, const nn_class_targets *t,
                              int64_t **out)
{
    int64_t count = p->n * p->s;
    int64_t *h = nn__host_calloc((size_t)count, sizeof *h);
    if (!h) return NN__FAIL(ctx, NN_E_OOM_HOST, "%s: out of host memory for the targets", fn);
    nn_status st = be->read_targets(ctx, fn, t->data, t->type, count, h);
    for (int64_t i = 0; st == NN_OK && i < count; i++)
        if (h[i] < 0 || h[i] >= p->c)
            st = NN__FAIL(ctx, NN_E_INVALID_ARG,
                          "%s: targets[%lld] (sample %lld, position %lld) must be a class in "
                          "[0, C - 1] = [0, %lld], got %lld",
                          fn, (long long)i, (long long)(i / p->s), (long long)(i % p->s),
                          (long long)p->c - 1, (long long)h[i]);
    if (st != NN_OK) {
        nn__host_free(h);
        return st;
    }
    *out = h;
    return NN_OK;
}

/* Inside a graph capture the targets are read by each launch on the device, where they must be:
 * host targets would be read once, now. Their range is checked there (graph.h). */
static nn_status capture_targets(struct nn_ctx *ctx, const char *fn, struct nn__softmax_problem *p,
                                 const nn_class_targets *t)
{
    size_t bytes = (size_t)(p->n * p->s) * (t->type == NN_INDEX_I32 ? 4 : 8);
    if (!nn__device_data(ctx, t->data))
        return NN__FAIL(ctx, NN_E_GRAPH,
                        "%s: inside a graph capture targets.data must be device memory of the "
                        "context's device (each launch reads the batch's targets there; host "
                        "targets would be read once, at this call): copy them to the device "
                        "(nn_mem_copy, or nn_graph_launch_feeds at each launch)",
                        fn);
    nn__capture_touch_span(ctx, t->data, bytes);
    p->dev_targets = t->data;
    return NN_OK;
}

static void free_xent(void *p)
{
    nn_softmax_cross_entropy_pullback *pb = p;
    backend_of(pb->hdr.ctx)->saved_free(pb->hdr.ctx, pb->saved);
    nn__host_free(pb->targets);
    nn__host_free(pb);
}

static nn_status softmax_cross_entropy_forward(nn_ctx *ctx, const nn_tensor *x,
                                               const nn_class_targets *targets, nn_tensor *loss,
                                               nn_softmax_cross_entropy_pullback **pullback_out)
{
    const char *fn = "nn_softmax_cross_entropy_forward";
    if (pullback_out) *pullback_out = NULL;
    if (!ctx) return NN__FAIL(NULL, NN_E_INVALID_ARG, "%s: ctx must not be NULL", fn);
    uint64_t t0 = nn__verbose(ctx) ? nn__now_ns() : 0;
    if (!x) return NN__FAIL(ctx, NN_E_INVALID_ARG, "%s: x must not be NULL", fn);
    NN__TRY(check_arg(ctx, fn, x, "x", x->dtype));
    NN__TRY(check_targets(ctx, fn, targets));
    NN__TRY(check_arg(ctx, fn, loss, "loss", x->dtype));
    struct nn__softmax_problem prob;
    NN__TRY(resolve(ctx, fn, x, &prob));
    prob.xent = 1;
    prob.index = targets->type;
    failure_case(&prob, 0, t0);
    NN__TRY(check_dims(ctx, fn, loss, "loss", &prob, 1));
    NN__TRY(check_output(ctx, fn, loss, "loss", x, "x", NULL, NULL));
    const nn_tensor *all[] = {x, loss};
    const char *const names[] = {"x", "loss"};
    NN__TRY(check_packed(ctx, fn, all, names, 2));

    const struct nn__softmax_backend *be = backend_of(ctx);
    nn_softmax_cross_entropy_pullback *pb = nn__host_calloc(1, sizeof *pb);
    if (!pb) return NN__FAIL(ctx, NN_E_OOM_HOST, "%s: out of host memory for the pullback", fn);
    pb->hdr.ctx = ctx; /* for free_xent() before it is live */
    pb->x = *x;
    nn_status st = NN_OK;
    if (ctx->capture)
        st = capture_targets(ctx, fn, &prob, targets);
    else if (ctx->settings.xent_targets == NN_TARGETS_ON_DEVICE && nn__ctx_on_gpu(ctx) &&
             nn__device_data(ctx, targets->data))
        prob.dev_targets = targets->data; /* read by the kernel only: no wait, no check */
    else
        st = take_targets(ctx, fn, be, &prob, targets, &pb->targets);
    pb->prob = prob;
    struct nn__softmax_note note = {{0}};
    if (st == NN_OK)
        st = be->xent_forward(ctx, &prob, x, pb->targets, loss, pullback_out ? &pb->saved : NULL,
                              &note);
    if (st == NN_OK && pullback_out) st = nn__pullback_add(ctx, fn, &xent_kind, &pb->hdr);
    if (st != NN_OK || !pullback_out) {
        free_xent(pb);
        pb = NULL;
    }
    NN__TRY(st);
    if (t0) verbose_line(ctx, fn, be, &note, &prob, 0, t0);
    if (pullback_out) *pullback_out = pb;
    return NN_OK;
}

nn_status nn_softmax_cross_entropy_forward(nn_ctx *ctx, const nn_tensor *x,
                                           const nn_class_targets *targets, nn_tensor *loss,
                                           nn_softmax_cross_entropy_pullback **pullback_out)
{
    uint64_t t0 = nn__verbose(ctx) ? nn__now_ns() : 0;
    return nn__verbose_exit(ctx, "softmax_cross_entropy_forward", t0,
                            softmax_cross_entropy_forward(ctx, x, targets, loss, pullback_out));
}

static nn_status xent_backward(nn_ctx *ctx, const char *fn,
                               nn_softmax_cross_entropy_pullback **pullback,
                               const nn_backward_options *opts, const nn_tensor *dloss,
                               nn_tensor *dx)
{
    if (!ctx) return NN__FAIL(NULL, NN_E_INVALID_ARG, "%s: ctx must not be NULL", fn);
    uint64_t t0 = nn__verbose(ctx) ? nn__now_ns() : 0;
    struct nn__backward bw;
    NN__TRY(NN__BACKWARD_BEGIN(ctx, fn, &xent_kind, pullback, opts, &bw));
    nn_softmax_cross_entropy_pullback *pb = *pullback;
    struct nn__softmax_problem prob = pb->prob;
    prob.accumulate = bw.accumulate;
    failure_case(&prob, bw.keep, t0);
    nn_dtype dt = prob.dtype;
    NN__TRY(check_arg(ctx, fn, dloss, "dloss", dt));
    NN__TRY(check_arg(ctx, fn, dx, "dx", dt));
    NN__TRY(check_dims(ctx, fn, dloss, "dloss", &prob, 1));
    NN__TRY(check_dims(ctx, fn, dx, "dx", &prob, 0));
    NN__TRY(check_output(ctx, fn, dx, "dx", dloss, "dloss", &pb->x, "x (saved by forward)"));
    const nn_tensor *all[] = {dloss, dx};
    const char *const names[] = {"dloss", "dx"};
    NN__TRY(check_packed(ctx, fn, all, names, 2));
    const struct nn__softmax_backend *be = backend_of(ctx);
    struct nn__softmax_note note = {{0}};
    NN__TRY(be->xent_backward(ctx, &prob, &pb->x, pb->targets, pb->saved, dloss, dx, &note));
    if (t0) verbose_line(ctx, fn, be, &note, &prob, bw.keep, t0);
    return bw.keep ? NN_OK : nn_softmax_cross_entropy_pullback_free(pullback);
}

nn_status nn_softmax_cross_entropy_backward(nn_ctx *ctx,
                                            nn_softmax_cross_entropy_pullback **pullback,
                                            const nn_tensor *dloss, nn_tensor *dx)
{
    uint64_t t0 = nn__verbose(ctx) ? nn__now_ns() : 0;
    return nn__verbose_exit(
        ctx, "softmax_cross_entropy_backward", t0,
        xent_backward(ctx, "nn_softmax_cross_entropy_backward", pullback, NULL, dloss, dx));
}

nn_status nn_softmax_cross_entropy_backward_ex(nn_ctx *ctx,
                                               nn_softmax_cross_entropy_pullback **pullback,
                                               const nn_backward_options *opts,
                                               const nn_tensor *dloss, nn_tensor *dx)
{
    uint64_t t0 = nn__verbose(ctx) ? nn__now_ns() : 0;
    return nn__verbose_exit(
        ctx, "softmax_cross_entropy_backward_ex", t0,
        xent_backward(ctx, "nn_softmax_cross_entropy_backward_ex", pullback, opts, dloss, dx));
}

nn_status nn_softmax_cross_entropy_workspace_size(nn_ctx *ctx, const nn_tensor *x,
                                                  nn_softmax_pass pass, size_t *bytes)
{
    return workspace_query(ctx, "nn_softmax_cross_entropy_workspace_size", NULL, 1, x, pass, bytes);
}

nn_status nn_softmax_cross_entropy_pullback_free(nn_softmax_cross_entropy_pullback **pullback)
{
    return nn__pullback_free("nn_softmax_cross_entropy_pullback_free", &xent_kind, pullback,
                             free_xent);
}

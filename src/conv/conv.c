/* Convolution: validation, the problem description, dispatch to a backend, pullbacks and the
 * verbose line. Everything cuDNN would refuse with BAD_PARAM is refused here first, with the
 * argument named. */
#include <stdio.h>
#include <string.h>

#include "conv/conv_internal.h"
#include "core/alloc.h"
#include "core/ctx.h"
#include "core/error.h"
#include "core/log.h"
#include "core/pullback.h"
#include "core/tensor_util.h"
#include "core/text.h"

struct nn_conv_pullback {
    struct nn__pullback hdr; /* the shared registry's header (core/pullback.h) */
    struct nn__conv_problem prob;
    nn_tensor x, w, y; /* views; y only with a fused relu */
};

static const struct nn__pullback_kind pullback_kind = {
    "conv", NN_ACCUMULATE_DX | NN_ACCUMULATE_DW | NN_ACCUMULATE_DB, NULL};

/* ---------------------------------------------------------------------------------------------
 * Backends
 */

struct conv_backend {
    const char *name;
    /* NN_E_UNSUPPORTED naming op and the field for sizes the backend cannot take (cuDNN: int);
     * NULL for none. Called on every problem before the backend sees it. */
    nn_status (*check_limits)(struct nn_ctx *, const char *, const struct nn__conv_problem *);
    nn_status (*forward)(struct nn_ctx *, const struct nn__conv_problem *, const nn_tensor *,
                         const nn_tensor *, const nn_tensor *, nn_tensor *, double, double,
                         struct nn__conv_note *);
    nn_status (*backward_data)(struct nn_ctx *, const struct nn__conv_problem *, const nn_tensor *,
                               const nn_tensor *, nn_tensor *, double, double,
                               struct nn__conv_note *);
    nn_status (*backward_filter)(struct nn_ctx *, const struct nn__conv_problem *,
                                 const nn_tensor *, const nn_tensor *, nn_tensor *, double, double,
                                 struct nn__conv_note *);
    nn_status (*backward_bias)(struct nn_ctx *, const struct nn__conv_problem *, const nn_tensor *,
                               nn_tensor *, double, double, struct nn__conv_note *);
    nn_status (*relu_backward)(struct nn_ctx *, const nn_tensor *, const nn_tensor *, nn_tensor *,
                               struct nn__conv_note *);
    /* nn_conv_workspace_size(); NULL: the backend takes no pool memory (the reference) */
    nn_status (*workspace)(struct nn_ctx *, const struct nn__conv_problem *, nn_conv_pass,
                           const struct nn__conv_query *, double, size_t *);
};

static const struct conv_backend backend_ref = {
    "ref",
    NULL,
    nn__conv_forward_ref,
    nn__conv_backward_data_ref,
    nn__conv_backward_filter_ref,
    nn__conv_backward_bias_ref,
    nn__conv_relu_backward_ref,
    NULL,
};

#if NN_HAVE_CUDNN
static const struct conv_backend backend_cudnn = {
    "cudnn",
    nn__conv_cudnn_check_limits,
    nn__conv_forward_cudnn,
    nn__conv_backward_data_cudnn,
    nn__conv_backward_filter_cudnn,
    nn__conv_backward_bias_cudnn,
    nn__conv_relu_backward_cudnn,
    nn__conv_workspace_cudnn,
};
#endif

/* A GPU context exists only in builds with cuDNN. */
static const struct conv_backend *backend_of(const struct nn_ctx *ctx)
{
#if NN_HAVE_CUDNN
    if (nn__ctx_on_gpu(ctx)) return &backend_cudnn;
#endif
    (void)ctx;
    return &backend_ref;
}

/* An empty note for one op call. */
static void note_init(struct nn__conv_note *n, struct nn__conv_exec *exec)
{
    n->impl[0] = n->cache[0] = '\0';
    n->exec = exec;
}

/* ---------------------------------------------------------------------------------------------
 * Text form (include/nnprim/conv.h, docs/CONV.md)
 */

/* " nhwc" when every tensor of the call is channels-last, else the channels-last ones joined by
 * '+' (" nhwc=x+dy": the verbose line separates its fields with commas). */
static size_t put_layout(char *buf, size_t cap, size_t len, const struct nn__conv_problem *p)
{
    static const char *const names[] = {"x", "w", "y", "dx", "dw", "dy"};
    if (!p->nhwc) return len;
    if (p->nhwc == p->roles) return nn__text_put(buf, cap, len, " nhwc");
    len = nn__text_put(buf, cap, len, " nhwc=");
    int first = 1;
    for (int i = 0; i < 6; i++)
        if (p->nhwc & (1u << i)) {
            len = nn__text_put(buf, cap, len, "%s%s", first ? "" : "+", names[i]);
            first = 0;
        }
    return len;
}

void nn__conv_problem_text(const struct nn__conv_problem *p, char *buf, size_t cap)
{
    static const char in_letters[] = "dhw", filt_letters[] = "trs";
    size_t len = 0;
    if (cap) buf[0] = 0;
    int off = 3 - p->nsp;
    len = nn__text_put(buf, cap, len, "n%lldc%lld", (long long)p->n, (long long)p->c);
    for (int i = 0; i < p->nsp; i++)
        len = nn__text_put(buf, cap, len, "%c%lld", in_letters[off + i], (long long)p->in[i]);
    len = nn__text_put(buf, cap, len, "k%lld", (long long)p->k);
    for (int i = 0; i < p->nsp; i++)
        len = nn__text_put(buf, cap, len, "%c%lld", filt_letters[off + i], (long long)p->filt[i]);
    len = nn__text_put(buf, cap, len, " g%lld", (long long)p->groups);
    len = nn__text_put_list(buf, cap, len, "stride", p->nsp, p->stride);
    len = nn__text_put_list(buf, cap, len, "dil", p->nsp, p->dilation);
    if (memcmp(p->pad_lo, p->pad_hi, sizeof p->pad_lo) == 0) {
        len = nn__text_put_list(buf, cap, len, "pad", p->nsp, p->pad_lo);
    } else {
        len = nn__text_put_list(buf, cap, len, "padlo", p->nsp, p->pad_lo);
        len = nn__text_put_list(buf, cap, len, "padhi", p->nsp, p->pad_hi);
    }
    len = nn__text_put(buf, cap, len, " %s", p->mode == NN_CONV_CONVOLUTION ? "conv" : "xcorr");
    if (p->activation == NN_ACTIVATION_RELU) len = nn__text_put(buf, cap, len, " relu");
    if (p->has_bias) len = nn__text_put(buf, cap, len, " bias");
    len = nn__text_put(buf, cap, len, " %s", nn_dtype_name(p->dtype));
    if (p->dtype == NN_DTYPE_F32 && p->math == NN_MATH_TF32)
        len = nn__text_put(buf, cap, len, " tf32");
    put_layout(buf, cap, len, p);
}

/* ---------------------------------------------------------------------------------------------
 * Validation
 */

static nn_status check_params(struct nn_ctx *ctx, const char *op, const nn_conv_params *p)
{
    if (!p) return NN__FAIL(ctx, NN_E_INVALID_ARG, "%s: p (the parameters) must not be NULL", op);
    if (p->spatial_rank < 1 || p->spatial_rank > NN_CONV_MAX_SPATIAL)
        return NN__FAIL(ctx, NN_E_INVALID_ARG, "%s: p.spatial_rank must be 1, 2 or 3, got %d", op,
                        p->spatial_rank);
    for (int i = 0; i < p->spatial_rank; i++) {
        if (p->stride[i] < 1)
            return NN__FAIL(ctx, NN_E_INVALID_ARG, "%s: p.stride[%d] must be >= 1, got %lld", op, i,
                            (long long)p->stride[i]);
        if (p->dilation[i] < 1)
            return NN__FAIL(ctx, NN_E_INVALID_ARG, "%s: p.dilation[%d] must be >= 1, got %lld", op,
                            i, (long long)p->dilation[i]);
        if (p->pad_lo[i] < 0)
            return NN__FAIL(ctx, NN_E_INVALID_ARG, "%s: p.pad_lo[%d] must be >= 0, got %lld", op, i,
                            (long long)p->pad_lo[i]);
        if (p->pad_hi[i] < 0)
            return NN__FAIL(ctx, NN_E_INVALID_ARG, "%s: p.pad_hi[%d] must be >= 0, got %lld", op, i,
                            (long long)p->pad_hi[i]);
    }
    if (p->groups < 1)
        return NN__FAIL(ctx, NN_E_INVALID_ARG, "%s: p.groups must be >= 1, got %lld", op,
                        (long long)p->groups);
    if (p->mode != NN_CONV_CROSS_CORRELATION && p->mode != NN_CONV_CONVOLUTION)
        return NN__FAIL(ctx, NN_E_INVALID_ARG,
                        "%s: p.mode must be NN_CONV_CROSS_CORRELATION or NN_CONV_CONVOLUTION, got "
                        "%d",
                        op, (int)p->mode);
    if (p->activation != NN_ACTIVATION_IDENTITY && p->activation != NN_ACTIVATION_RELU)
        return NN__FAIL(ctx, NN_E_INVALID_ARG,
                        "%s: p.activation must be NN_ACTIVATION_IDENTITY or NN_ACTIVATION_RELU, "
                        "got %d",
                        op, (int)p->activation);
    return NN__CHECK_RESERVED(ctx, op, "p.reserved", p->reserved);
}

/* Shape arithmetic shared by nn_conv_output_shape() and the ops; p is already checked. */
static nn_status resolve(struct nn_ctx *ctx, const char *op, const nn_conv_params *p, int rank,
                         const int64_t *x_dims, const int64_t *w_dims, const char *xn,
                         const char *wn, struct nn__conv_problem *out)
{
    int nsp = p->spatial_rank;
    if (rank != nsp + 2)
        return NN__FAIL(ctx, NN_E_SHAPE, "%s: %s.rank must be p.spatial_rank + 2 = %d, got %d", op,
                        xn, nsp + 2, rank);
    for (int i = 0; i < rank; i++) {
        if (x_dims[i] < 1)
            return NN__FAIL(ctx, NN_E_SHAPE, "%s: %s.dims[%d] must be >= 1, got %lld", op, xn, i,
                            (long long)x_dims[i]);
        if (w_dims[i] < 1)
            return NN__FAIL(ctx, NN_E_SHAPE, "%s: %s.dims[%d] must be >= 1, got %lld", op, wn, i,
                            (long long)w_dims[i]);
    }
    if (x_dims[1] % p->groups)
        return NN__FAIL(ctx, NN_E_SHAPE,
                        "%s: %s.dims[1] (channels) must be divisible by p.groups = %lld, got %lld",
                        op, xn, (long long)p->groups, (long long)x_dims[1]);
    if (w_dims[0] % p->groups)
        return NN__FAIL(ctx, NN_E_SHAPE,
                        "%s: %s.dims[0] (output channels) must be divisible by p.groups = %lld, "
                        "got %lld",
                        op, wn, (long long)p->groups, (long long)w_dims[0]);
    /* x_dims[1] is a multiple of groups here, so the division is exact (and cannot overflow, as
     * w_dims[1] * groups could). */
    if (w_dims[1] != x_dims[1] / p->groups)
        return NN__FAIL(ctx, NN_E_SHAPE,
                        "%s: %s.dims[1] (input channels per group) must be %s.dims[1] / p.groups "
                        "= %lld, got %lld",
                        op, wn, xn, (long long)(x_dims[1] / p->groups), (long long)w_dims[1]);
    memset(out, 0, sizeof *out);
    out->nsp = nsp;
    out->n = x_dims[0];
    out->c = x_dims[1];
    out->k = w_dims[0];
    out->groups = p->groups;
    for (int i = 0; i < nsp; i++) {
        int64_t span, padded;
        if (__builtin_mul_overflow(p->dilation[i], w_dims[2 + i] - 1, &span) ||
            __builtin_add_overflow(span, 1, &span))
            return NN__FAIL(ctx, NN_E_OVERFLOW,
                            "%s: spatial dim %d: the dilated filter size p.dilation[%d] * "
                            "(%s.dims[%d] - 1) + 1 overflows int64 (dilation %lld, filter %lld)",
                            op, i, i, wn, 2 + i, (long long)p->dilation[i],
                            (long long)w_dims[2 + i]);
        if (__builtin_add_overflow(x_dims[2 + i], p->pad_lo[i], &padded) ||
            __builtin_add_overflow(padded, p->pad_hi[i], &padded))
            return NN__FAIL(ctx, NN_E_OVERFLOW,
                            "%s: spatial dim %d: the padded input %s.dims[%d] + p.pad_lo[%d] + "
                            "p.pad_hi[%d] overflows int64 (%lld + %lld + %lld)",
                            op, i, xn, 2 + i, i, i, (long long)x_dims[2 + i],
                            (long long)p->pad_lo[i], (long long)p->pad_hi[i]);
        if (padded < span)
            return NN__FAIL(ctx, NN_E_SHAPE,
                            "%s: output spatial dim %d would be < 1: the padded input (%s.dims[%d] "
                            "+ pad = %lld) is smaller than the dilated filter (%lld)",
                            op, i, xn, 2 + i, (long long)padded, (long long)span);
        out->in[i] = x_dims[2 + i];
        out->filt[i] = w_dims[2 + i];
        out->out[i] = (padded - span) / p->stride[i] + 1;
        out->stride[i] = p->stride[i];
        out->dilation[i] = p->dilation[i];
        out->pad_lo[i] = p->pad_lo[i];
        out->pad_hi[i] = p->pad_hi[i];
    }
    out->mode = p->mode;
    out->activation = p->activation;
    return NN_OK;
}

nn_status nn_conv_params_default(nn_conv_params *p, int spatial_rank)
{
    if (!p) return NN__FAIL(NULL, NN_E_INVALID_ARG, "nn_conv_params_default: p must not be NULL");
    if (spatial_rank < 1 || spatial_rank > NN_CONV_MAX_SPATIAL)
        return NN__FAIL(NULL, NN_E_INVALID_ARG,
                        "nn_conv_params_default: spatial_rank must be 1, 2 or 3, got %d",
                        spatial_rank);
    memset(p, 0, sizeof *p);
    p->spatial_rank = spatial_rank;
    for (int i = 0; i < NN_CONV_MAX_SPATIAL; i++)
        p->stride[i] = p->dilation[i] = 1;
    p->groups = 1;
    return NN_OK;
}

nn_status nn_conv_output_shape(const nn_conv_params *p, int rank, const int64_t *x_dims,
                               const int64_t *w_dims, int64_t *y_dims)
{
    const char *op = "nn_conv_output_shape";
    if (!x_dims || !w_dims || !y_dims)
        return NN__FAIL(NULL, NN_E_INVALID_ARG, "%s: x_dims, w_dims and y_dims must not be NULL",
                        op);
    NN__TRY(check_params(NULL, op, p));
    struct nn__conv_problem prob;
    NN__TRY(resolve(NULL, op, p, rank, x_dims, w_dims, "x", "w", &prob));
    y_dims[0] = prob.n;
    y_dims[1] = prob.k;
    for (int i = 0; i < prob.nsp; i++)
        y_dims[2 + i] = prob.out[i];
    return NN_OK;
}

/* A tensor argument: well formed, in the context's memory, the call's dtype, fully packed (NCHW
 * order or channels-last, conv_layout.c); an output (output nonzero) also with distinct
 * elements. */
static nn_status check_tensor_arg(struct nn_ctx *ctx, const char *op, const nn_tensor *t,
                                  const char *name, nn_dtype dtype, const char *dtype_from,
                                  int output)
{
    if (!t) return NN__FAIL(ctx, NN_E_INVALID_ARG, "%s: %s must not be NULL", op, name);
    NN__TRY(nn__check_tensor(ctx, op, t, name));
    if (t->dtype != dtype)
        return NN__FAIL(ctx, NN_E_DTYPE, "%s: %s.dtype must equal %s.dtype (%s), got %s", op, name,
                        dtype_from, nn_dtype_name(dtype), nn_dtype_name(t->dtype));
    if (output) NN__TRY(nn__check_output_distinct(ctx, op, t, name));
    return NN_OK;
}

static nn_status check_arg(struct nn_ctx *ctx, const char *op, const nn_tensor *t, const char *name,
                           nn_dtype dtype, const char *dtype_from, int output)
{
    NN__TRY(check_tensor_arg(ctx, op, t, name, dtype, dtype_from, output));
    return nn__conv_check_layout(ctx, op, t, name);
}

/* The bias and db: K packed elements, whatever their rank. */
static nn_status check_bias_arg(struct nn_ctx *ctx, const char *op, const nn_tensor *t,
                                const char *name, nn_dtype dtype, const char *dtype_from,
                                int output)
{
    NN__TRY(check_tensor_arg(ctx, op, t, name, dtype, dtype_from, output));
    if (!nn_tensor_is_contiguous(t))
        return NN__FAIL(ctx, NN_E_UNSUPPORTED,
                        "%s: %s must be fully packed (its K elements contiguous); other strides "
                        "are not supported",
                        op, name);
    return NN_OK;
}

static nn_status check_dims(struct nn_ctx *ctx, const char *op, const nn_tensor *t,
                            const char *name, int rank, const int64_t *want)
{
    if (t->rank != rank)
        return NN__FAIL(ctx, NN_E_SHAPE, "%s: %s.rank must be %d, got %d", op, name, rank, t->rank);
    for (int i = 0; i < rank; i++)
        if (t->dims[i] != want[i])
            return NN__FAIL(ctx, NN_E_SHAPE, "%s: %s.dims[%d] must be %lld, got %lld", op, name, i,
                            (long long)want[i], (long long)t->dims[i]);
    return NN_OK;
}

static void y_dims_of(const struct nn__conv_problem *p, int64_t *d)
{
    d[0] = p->n;
    d[1] = p->k;
    for (int i = 0; i < p->nsp; i++)
        d[2 + i] = p->out[i];
}

/* Bias and db: K, or 1 x K x 1 ... x 1 at the activations' rank. */
static nn_status check_bias_dims(struct nn_ctx *ctx, const char *op, const nn_tensor *t,
                                 const char *name, const struct nn__conv_problem *p)
{
    int rank = p->nsp + 2;
    if (t->rank == 1) {
        if (t->dims[0] != p->k)
            return NN__FAIL(ctx, NN_E_SHAPE, "%s: %s.dims[0] must be K = %lld, got %lld", op, name,
                            (long long)p->k, (long long)t->dims[0]);
        return NN_OK;
    }
    if (t->rank != rank)
        return NN__FAIL(ctx, NN_E_SHAPE, "%s: %s.rank must be 1 (K) or %d (1 x K x 1...), got %d",
                        op, name, rank, t->rank);
    int64_t want[NN_MAX_RANK];
    for (int i = 0; i < rank; i++)
        want[i] = 1;
    want[1] = p->k;
    return check_dims(ctx, op, t, name, rank, want);
}

/* The shared overlap check, for optional tensors: a NULL one overlaps nothing. */
static nn_status check_no_overlap(struct nn_ctx *ctx, const char *op, const nn_tensor *out,
                                  const char *out_name, const nn_tensor *in, const char *in_name)
{
    if (!out || !in) return NN_OK;
    return nn__check_no_overlap(ctx, op, out, out_name, in, in_name);
}

/* Sizes the context's backend cannot take (cuDNN: int), refused before it sees them. */
static nn_status check_backend_limits(struct nn_ctx *ctx, const char *op,
                                      const struct nn__conv_problem *prob)
{
    const struct conv_backend *be = backend_of(ctx);
    return be->check_limits ? be->check_limits(ctx, op, prob) : NN_OK;
}

static void fill_ctx_fields(struct nn_ctx *ctx, struct nn__conv_problem *prob, nn_dtype dtype)
{
    prob->dtype = dtype;
    prob->math = ctx->settings.math_mode;
    prob->deterministic = ctx->settings.deterministic;
}

/* ---------------------------------------------------------------------------------------------
 * Forward
 */

static nn_status make_pullback(struct nn_ctx *ctx, const struct nn__conv_problem *prob,
                               const nn_tensor *x, const nn_tensor *w, const nn_tensor *y,
                               nn_conv_pullback **out)
{
    nn_conv_pullback *pb = nn__host_calloc(1, sizeof *pb);
    if (!pb)
        return NN__FAIL(ctx, NN_E_OOM_HOST, "nn_conv_forward: out of host memory for the pullback");
    nn_status st = nn__pullback_add(ctx, "nn_conv_forward", &pullback_kind, &pb->hdr);
    if (st != NN_OK) {
        nn__host_free(pb);
        return st;
    }
    pb->prob = *prob;
    pb->x = *x;
    pb->w = *w;
    if (prob->activation == NN_ACTIVATION_RELU) pb->y = *y;
    *out = pb;
    return NN_OK;
}

/* What a backward call with the pullback asked for beyond its problem: which gradients (each
 * nonzero when asked; every other call's line says nothing of them) and whether it kept the
 * pullback. */
struct asked {
    int backward, dx, dw, db, keep;
};

/* The call's case: the problem and the backward's accumulate bits, which change the gradients
 * (the case syntax's accdx/accdw/accdb tokens); then a backward's grads= and keep. */
static void case_text(const struct nn__conv_problem *prob, unsigned accumulate, struct asked a,
                      char *shape, size_t cap)
{
    nn__conv_problem_text(prob, shape, cap);
    size_t n = strlen(shape);
    if (accumulate & NN_ACCUMULATE_DX) n = nn__text_put(shape, cap, n, " accdx");
    if (accumulate & NN_ACCUMULATE_DW) n = nn__text_put(shape, cap, n, " accdw");
    if (accumulate & NN_ACCUMULATE_DB) n = nn__text_put(shape, cap, n, " accdb");
    if (a.backward) n = nn__text_put_grads(shape, cap, n, a.dx, a.dw, a.db);
    if (a.keep) nn__text_put(shape, cap, n, " keep");
}

static void verbose_line(struct nn_ctx *ctx, const char *op, const char *impl,
                         const struct nn__conv_note *note, const struct nn__conv_problem *prob,
                         unsigned accumulate, struct asked a, uint64_t t0)
{
    char shape[256];
    case_text(prob, accumulate, a, shape, sizeof shape);
    /* The verbose line names the op without the "nn_" of the public function (docs/CONV.md). */
    nn__verbose_op(ctx, op + strlen("nn_"), note->impl[0] ? note->impl : impl,
                   note->cache[0] ? note->cache : "-", shape, t0);
}

/* At verbose >= 1, the case of a call whose problem is not resolved yet, for its failure line:
 * the arguments as given (params valid, x and w of rank spatial_rank + 2), so that a shape the
 * library refuses is reproduced by nnprim check and bench with the same message. */
static void failure_case(struct nn_ctx *ctx, const nn_conv_params *p, const int64_t *xd,
                         const int64_t *wd, int bias, nn_dtype dtype, unsigned accumulate)
{
    if (!nn__verbose(ctx)) return;
    struct nn__conv_problem q;
    memset(&q, 0, sizeof q);
    q.nsp = p->spatial_rank;
    q.n = xd[0];
    q.c = xd[1];
    q.k = wd[0];
    q.groups = p->groups;
    for (int i = 0; i < q.nsp; i++) {
        q.in[i] = xd[2 + i];
        q.filt[i] = wd[2 + i];
        q.stride[i] = p->stride[i];
        q.dilation[i] = p->dilation[i];
        q.pad_lo[i] = p->pad_lo[i];
        q.pad_hi[i] = p->pad_hi[i];
    }
    q.mode = p->mode;
    q.activation = p->activation;
    q.has_bias = bias;
    fill_ctx_fields(ctx, &q, dtype);
    char shape[256];
    case_text(&q, accumulate, (struct asked){0}, shape, sizeof shape);
    nn__verbose_case(shape);
}

static nn_status conv_forward(nn_ctx *ctx, const nn_conv_params *p, const nn_tensor *x,
                              const nn_tensor *w, const nn_tensor *b, nn_tensor *y,
                              nn_conv_pullback **pullback_out, struct nn__conv_exec *exec)
{
    const char *op = "nn_conv_forward";
    if (pullback_out) *pullback_out = NULL;
    if (!ctx) return NN__FAIL(NULL, NN_E_INVALID_ARG, "%s: ctx must not be NULL", op);
    uint64_t t0 = nn__verbose(ctx) ? nn__now_ns() : 0;
    NN__TRY(check_params(ctx, op, p));
    if (!x) return NN__FAIL(ctx, NN_E_INVALID_ARG, "%s: x must not be NULL", op);
    NN__TRY(check_arg(ctx, op, x, "x", x->dtype, "x", 0));
    NN__TRY(check_arg(ctx, op, w, "w", x->dtype, "x", 0));
    if (b) NN__TRY(check_bias_arg(ctx, op, b, "b", x->dtype, "x", 0));
    NN__TRY(check_arg(ctx, op, y, "y", x->dtype, "x", 1));
    if (x->rank != p->spatial_rank + 2)
        return NN__FAIL(ctx, NN_E_SHAPE, "%s: x.rank must be p.spatial_rank + 2 = %d, got %d", op,
                        p->spatial_rank + 2, x->rank);
    if (w->rank != x->rank)
        return NN__FAIL(ctx, NN_E_SHAPE, "%s: w.rank must equal x.rank (%d), got %d", op, x->rank,
                        w->rank);
    failure_case(ctx, p, x->dims, w->dims, b != NULL, x->dtype, 0);
    struct nn__conv_problem prob;
    NN__TRY(resolve(ctx, op, p, x->rank, x->dims, w->dims, "x", "w", &prob));
    fill_ctx_fields(ctx, &prob, x->dtype);
    prob.has_bias = b != NULL;
    int64_t yd[NN_MAX_RANK];
    y_dims_of(&prob, yd);
    NN__TRY(check_dims(ctx, op, y, "y", x->rank, yd));
    if (b) NN__TRY(check_bias_dims(ctx, op, b, "b", &prob));
    NN__TRY(check_no_overlap(ctx, op, y, "y", x, "x"));
    NN__TRY(check_no_overlap(ctx, op, y, "y", w, "w"));
    NN__TRY(check_no_overlap(ctx, op, y, "y", b, "b"));
    NN__TRY(check_backend_limits(ctx, op, &prob));
    const struct conv_backend *be = backend_of(ctx);
    nn_tensor xl, wl, yl;
    struct nn__conv_layout_arg la[] = {
        {NN__CONV_ROLE_X, x, &xl}, {NN__CONV_ROLE_W, w, &wl}, {NN__CONV_ROLE_Y, y, &yl}};
    nn__conv_describe_layouts(&prob, la, 3);

    nn_conv_pullback *pb = NULL;
    if (pullback_out) NN__TRY(make_pullback(ctx, &prob, &xl, &wl, &yl, &pb));
    struct nn__conv_note note;
    note_init(&note, exec);
    if (be->forward(ctx, &prob, &xl, &wl, b, &yl, 1.0, 0.0, &note) != NN_OK) {
        nn_status st = nn__error_in(ctx, op);
        nn_conv_pullback_free(&pb);
        return st;
    }
    if (t0) verbose_line(ctx, op, be->name, &note, &prob, 0, (struct asked){0}, t0);
    if (pullback_out) *pullback_out = pb;
    return NN_OK;
}

nn_status nn_conv_forward(nn_ctx *ctx, const nn_conv_params *p, const nn_tensor *x,
                          const nn_tensor *w, const nn_tensor *b, nn_tensor *y,
                          nn_conv_pullback **pullback_out)
{
    uint64_t t0 = nn__verbose(ctx) ? nn__now_ns() : 0;
    return nn__verbose_exit(ctx, "conv_forward", t0,
                            conv_forward(ctx, p, x, w, b, y, pullback_out, NULL));
}

nn_status nn__conv_forward_capture(struct nn_ctx *ctx, const nn_conv_params *p, const nn_tensor *x,
                                   const nn_tensor *w, const nn_tensor *b, nn_tensor *y,
                                   struct nn__conv_exec *exec)
{
    memset(exec, 0, sizeof *exec);
    return conv_forward(ctx, p, x, w, b, y, NULL, exec);
}

/* ---------------------------------------------------------------------------------------------
 * Backward
 */

static double beta_for(unsigned accumulate, unsigned bit)
{
    return (accumulate & bit) ? 1.0 : 0.0;
}

/* The gradients a backward call asked for, all checked against prob. x and w may be NULL when
 * the call has no use for them (dx only needs w, dw only x). */
struct grads {
    const nn_tensor *x, *w, *dy;
    nn_tensor *dx, *dw, *db;
};

static nn_status check_grads(struct nn_ctx *ctx, const char *op,
                             const struct nn__conv_problem *prob, const struct grads *g,
                             const char *dtype_from)
{
    int rank = prob->nsp + 2;
    nn_dtype dt = prob->dtype;
    NN__TRY(check_arg(ctx, op, g->dy, "dy", dt, dtype_from, 0));
    int64_t d[NN_MAX_RANK];
    y_dims_of(prob, d);
    NN__TRY(check_dims(ctx, op, g->dy, "dy", rank, d));
    if (g->dx) {
        NN__TRY(check_arg(ctx, op, g->dx, "dx", dt, dtype_from, 1));
        d[0] = prob->n;
        d[1] = prob->c;
        for (int i = 0; i < prob->nsp; i++)
            d[2 + i] = prob->in[i];
        NN__TRY(check_dims(ctx, op, g->dx, "dx", rank, d));
        NN__TRY(check_no_overlap(ctx, op, g->dx, "dx", g->dy, "dy"));
        NN__TRY(check_no_overlap(ctx, op, g->dx, "dx", g->w, "w"));
        /* dw reads x after dx is written */
        NN__TRY(check_no_overlap(ctx, op, g->dx, "dx", g->x, "x"));
    }
    if (g->dw) {
        NN__TRY(check_arg(ctx, op, g->dw, "dw", dt, dtype_from, 1));
        d[0] = prob->k;
        d[1] = prob->c / prob->groups;
        for (int i = 0; i < prob->nsp; i++)
            d[2 + i] = prob->filt[i];
        NN__TRY(check_dims(ctx, op, g->dw, "dw", rank, d));
        NN__TRY(check_no_overlap(ctx, op, g->dw, "dw", g->dy, "dy"));
        NN__TRY(check_no_overlap(ctx, op, g->dw, "dw", g->x, "x"));
        NN__TRY(check_no_overlap(ctx, op, g->dw, "dw", g->w, "w"));
        NN__TRY(check_no_overlap(ctx, op, g->dw, "dw", g->dx, "dx"));
    }
    if (g->db) {
        NN__TRY(check_bias_arg(ctx, op, g->db, "db", dt, dtype_from, 1));
        NN__TRY(check_bias_dims(ctx, op, g->db, "db", prob));
        NN__TRY(check_no_overlap(ctx, op, g->db, "db", g->dy, "dy"));
        NN__TRY(check_no_overlap(ctx, op, g->db, "db", g->x, "x"));
        NN__TRY(check_no_overlap(ctx, op, g->db, "db", g->w, "w"));
        NN__TRY(check_no_overlap(ctx, op, g->db, "db", g->dx, "dx"));
        NN__TRY(check_no_overlap(ctx, op, g->db, "db", g->dw, "dw"));
    }
    return NN_OK;
}

/* The call's tensors with the canonical strides of their layouts, into store (conv_layout.c);
 * p gets the roles and layouts. */
static void describe_grads(struct nn__conv_problem *p, const struct grads *g, nn_tensor store[5],
                           struct grads *out)
{
    *out = *g;
    struct nn__conv_layout_arg la[] = {
        {NN__CONV_ROLE_X, g->x, &store[0]},   {NN__CONV_ROLE_W, g->w, &store[1]},
        {NN__CONV_ROLE_DY, g->dy, &store[2]}, {NN__CONV_ROLE_DX, g->dx, &store[3]},
        {NN__CONV_ROLE_DW, g->dw, &store[4]},
    };
    nn__conv_describe_layouts(p, la, 5);
    out->x = g->x ? &store[0] : NULL;
    out->w = g->w ? &store[1] : NULL;
    out->dy = &store[2];
    out->dx = g->dx ? &store[3] : NULL;
    out->dw = g->dw ? &store[4] : NULL;
}

/* Runs the asked-for gradients with dy already masked; prob->activation is ignored. */
static nn_status run_grads(struct nn_ctx *ctx, const struct conv_backend *be,
                           const struct nn__conv_problem *prob, unsigned accumulate,
                           const struct grads *g, const nn_tensor *dy, struct nn__conv_note *note)
{
    struct nn__conv_problem q = *prob;
    q.activation = NN_ACTIVATION_IDENTITY;
    if (g->dx)
        NN__TRY(be->backward_data(ctx, &q, dy, g->w, g->dx, 1.0,
                                  beta_for(accumulate, NN_ACCUMULATE_DX), note));
    if (g->dw)
        NN__TRY(be->backward_filter(ctx, &q, g->x, dy, g->dw, 1.0,
                                    beta_for(accumulate, NN_ACCUMULATE_DW), note));
    if (g->db)
        NN__TRY(be->backward_bias(ctx, &q, dy, g->db, 1.0, beta_for(accumulate, NN_ACCUMULATE_DB),
                                  note));
    return NN_OK;
}

/* With a fused relu, the gradients see dy masked by y > 0, in a temporary from the context (in
 * dy's layout). */
static nn_status run_masked(struct nn_ctx *ctx, const struct conv_backend *be,
                            const nn_conv_pullback *pb, const struct nn__conv_problem *prob,
                            unsigned accumulate, const struct grads *g, struct nn__conv_note *note)
{
    nn_tensor dyr;
    NN__TRY(nn_tensor_empty(ctx, g->dy->dtype, g->dy->rank, g->dy->dims, &dyr));
    memcpy(dyr.strides, g->dy->strides, sizeof dyr.strides);
    nn_status st = be->relu_backward(ctx, &pb->y, g->dy, &dyr, note);
    if (st == NN_OK) st = run_grads(ctx, be, prob, accumulate, g, &dyr, note);
    nn_status fst = nn_tensor_free(ctx, &dyr);
    return st != NN_OK ? st : fst;
}

static nn_status conv_backward(nn_ctx *ctx, const char *op, nn_conv_pullback **pullback,
                               const nn_backward_options *opts, const nn_tensor *dy, nn_tensor *dx,
                               nn_tensor *dw, nn_tensor *db)
{
    if (!ctx) return NN__FAIL(NULL, NN_E_INVALID_ARG, "%s: ctx must not be NULL", op);
    uint64_t t0 = nn__verbose(ctx) ? nn__now_ns() : 0;
    struct nn__backward bw;
    NN__TRY(NN__BACKWARD_BEGIN(ctx, op, &pullback_kind, pullback, opts, &bw));
    nn_conv_pullback *pb = *pullback;
    struct asked asked = {1, dx != NULL, dw != NULL, db != NULL, bw.keep};
    if (t0) {
        char shape[256];
        case_text(&pb->prob, bw.accumulate, asked, shape, sizeof shape);
        nn__verbose_case(shape);
    }
    struct grads g = {&pb->x, &pb->w, dy, dx, dw, db}, gl;
    NN__TRY(check_grads(ctx, op, &pb->prob, &g, "x"));
    struct nn__conv_problem prob = pb->prob;
    nn_tensor store[5];
    describe_grads(&prob, &g, store, &gl);
    const struct conv_backend *be = backend_of(ctx);
    struct nn__conv_note note;
    note_init(&note, NULL);
    if (dx || dw || db) {
        if (prob.activation == NN_ACTIVATION_RELU)
            NN__TRY_IN(ctx, op, run_masked(ctx, be, pb, &prob, bw.accumulate, &gl, &note));
        else
            NN__TRY_IN(ctx, op, run_grads(ctx, be, &prob, bw.accumulate, &gl, gl.dy, &note));
    }
    if (t0) verbose_line(ctx, op, be->name, &note, &prob, bw.accumulate, asked, t0);
    return bw.keep ? NN_OK : nn_conv_pullback_free(pullback);
}

nn_status nn_conv_backward(nn_ctx *ctx, nn_conv_pullback **pullback, const nn_tensor *dy,
                           nn_tensor *dx, nn_tensor *dw, nn_tensor *db)
{
    uint64_t t0 = nn__verbose(ctx) ? nn__now_ns() : 0;
    return nn__verbose_exit(ctx, "conv_backward", t0,
                            conv_backward(ctx, "nn_conv_backward", pullback, NULL, dy, dx, dw, db));
}

nn_status nn_conv_backward_ex(nn_ctx *ctx, nn_conv_pullback **pullback,
                              const nn_backward_options *opts, const nn_tensor *dy, nn_tensor *dx,
                              nn_tensor *dw, nn_tensor *db)
{
    uint64_t t0 = nn__verbose(ctx) ? nn__now_ns() : 0;
    return nn__verbose_exit(
        ctx, "conv_backward_ex", t0,
        conv_backward(ctx, "nn_conv_backward_ex", pullback, opts, dy, dx, dw, db));
}

nn_status nn_conv_pullback_free(nn_conv_pullback **pullback)
{
    return nn__pullback_free("nn_conv_pullback_free", &pullback_kind, pullback, nn__host_free);
}

/* Stand-alone gradients: the same checks, the problem from the shapes at hand; accumulate takes
 * every bit a conv backward does (each call reads its own). */
static nn_status standalone_params(struct nn_ctx *ctx, const char *op, const nn_conv_params *p,
                                   unsigned accumulate)
{
    NN__TRY(check_params(ctx, op, p));
    NN__TRY(nn__backward_accumulate(ctx, op, &pullback_kind, "accumulate", accumulate));
    if (p->activation != NN_ACTIVATION_IDENTITY)
        return NN__FAIL(ctx, NN_E_INVALID_ARG,
                        "%s: p.activation must be NN_ACTIVATION_IDENTITY for a stand-alone "
                        "gradient (mask dy yourself, or use nn_conv_backward with the pullback), "
                        "got %d",
                        op, (int)p->activation);
    return NN_OK;
}

/* xlike (x or dx) and wlike (w or dw) give the problem's shapes; one of them is the output. */
static nn_status standalone(struct nn_ctx *ctx, const char *op, const nn_conv_params *p,
                            const nn_tensor *xlike, const char *xn, const nn_tensor *wlike,
                            const char *wn, struct grads *g, unsigned accumulate)
{
    if (!ctx) return NN__FAIL(NULL, NN_E_INVALID_ARG, "%s: ctx must not be NULL", op);
    uint64_t t0 = nn__verbose(ctx) ? nn__now_ns() : 0;
    NN__TRY(standalone_params(ctx, op, p, accumulate));
    if (!xlike) return NN__FAIL(ctx, NN_E_INVALID_ARG, "%s: %s must not be NULL", op, xn);
    NN__TRY(check_arg(ctx, op, xlike, xn, xlike->dtype, xn, xlike == g->dx));
    NN__TRY(check_arg(ctx, op, wlike, wn, xlike->dtype, xn, wlike == g->dw));
    if (wlike->rank != xlike->rank)
        return NN__FAIL(ctx, NN_E_SHAPE, "%s: %s.rank must equal %s.rank (%d), got %d", op, wn, xn,
                        xlike->rank, wlike->rank);
    failure_case(ctx, p, xlike->dims, wlike->dims, 0, xlike->dtype, accumulate);
    struct nn__conv_problem prob;
    NN__TRY(resolve(ctx, op, p, xlike->rank, xlike->dims, wlike->dims, xn, wn, &prob));
    fill_ctx_fields(ctx, &prob, xlike->dtype);
    NN__TRY(check_grads(ctx, op, &prob, g, xn));
    NN__TRY(check_backend_limits(ctx, op, &prob));
    nn_tensor store[5];
    struct grads gl;
    describe_grads(&prob, g, store, &gl);
    const struct conv_backend *be = backend_of(ctx);
    struct nn__conv_note note;
    note_init(&note, NULL);
    NN__TRY_IN(ctx, op, run_grads(ctx, be, &prob, accumulate, &gl, gl.dy, &note));
    if (t0) verbose_line(ctx, op, be->name, &note, &prob, accumulate, (struct asked){0}, t0);
    return NN_OK;
}

nn_status nn_conv_backward_data(nn_ctx *ctx, const nn_conv_params *p, const nn_tensor *dy,
                                const nn_tensor *w, nn_tensor *dx, unsigned accumulate)
{
    struct grads g = {NULL, w, dy, dx, NULL, NULL};
    uint64_t t0 = nn__verbose(ctx) ? nn__now_ns() : 0;
    return nn__verbose_exit(
        ctx, "conv_backward_data", t0,
        standalone(ctx, "nn_conv_backward_data", p, dx, "dx", w, "w", &g, accumulate));
}

nn_status nn_conv_backward_filter(nn_ctx *ctx, const nn_conv_params *p, const nn_tensor *x,
                                  const nn_tensor *dy, nn_tensor *dw, unsigned accumulate)
{
    struct grads g = {x, NULL, dy, NULL, dw, NULL};
    uint64_t t0 = nn__verbose(ctx) ? nn__now_ns() : 0;
    return nn__verbose_exit(
        ctx, "conv_backward_filter", t0,
        standalone(ctx, "nn_conv_backward_filter", p, x, "x", dw, "dw", &g, accumulate));
}

static nn_status conv_backward_bias(nn_ctx *ctx, const nn_conv_params *p, const nn_tensor *dy,
                                    nn_tensor *db, unsigned accumulate)
{
    const char *op = "nn_conv_backward_bias";
    if (!ctx) return NN__FAIL(NULL, NN_E_INVALID_ARG, "%s: ctx must not be NULL", op);
    uint64_t t0 = nn__verbose(ctx) ? nn__now_ns() : 0;
    NN__TRY(standalone_params(ctx, op, p, accumulate));
    if (!dy) return NN__FAIL(ctx, NN_E_INVALID_ARG, "%s: dy must not be NULL", op);
    NN__TRY(check_arg(ctx, op, dy, "dy", dy->dtype, "dy", 0));
    if (dy->rank != p->spatial_rank + 2)
        return NN__FAIL(ctx, NN_E_SHAPE, "%s: dy.rank must be p.spatial_rank + 2 = %d, got %d", op,
                        p->spatial_rank + 2, dy->rank);
    NN__TRY(check_bias_arg(ctx, op, db, "db", dy->dtype, "dy", 1));
    /* Only N, K and the output sizes matter for the bias: describe dy as a 1x1 convolution. */
    struct nn__conv_problem prob;
    memset(&prob, 0, sizeof prob);
    prob.nsp = p->spatial_rank;
    prob.n = dy->dims[0];
    prob.c = prob.k = dy->dims[1];
    prob.groups = 1;
    for (int i = 0; i < prob.nsp; i++) {
        prob.in[i] = prob.out[i] = dy->dims[2 + i];
        prob.filt[i] = prob.stride[i] = prob.dilation[i] = 1;
    }
    fill_ctx_fields(ctx, &prob, dy->dtype);
    NN__TRY(check_bias_dims(ctx, op, db, "db", &prob));
    NN__TRY(check_no_overlap(ctx, op, db, "db", dy, "dy"));
    NN__TRY(check_backend_limits(ctx, op, &prob));
    nn_tensor dyl;
    struct nn__conv_layout_arg la[] = {{NN__CONV_ROLE_DY, dy, &dyl}};
    nn__conv_describe_layouts(&prob, la, 1);
    const struct conv_backend *be = backend_of(ctx);
    struct nn__conv_note note;
    note_init(&note, NULL);
    NN__TRY_IN(ctx, op,
               be->backward_bias(ctx, &prob, &dyl, db, 1.0, beta_for(accumulate, NN_ACCUMULATE_DB),
                                 &note));
    if (t0)
        verbose_line(ctx, op, be->name, &note, &prob, accumulate & NN_ACCUMULATE_DB,
                     (struct asked){0}, t0);
    return NN_OK;
}

nn_status nn_conv_backward_bias(nn_ctx *ctx, const nn_conv_params *p, const nn_tensor *dy,
                                nn_tensor *db, unsigned accumulate)
{
    uint64_t t0 = nn__verbose(ctx) ? nn__now_ns() : 0;
    return nn__verbose_exit(ctx, "conv_backward_bias", t0,
                            conv_backward_bias(ctx, p, dy, db, accumulate));
}

/* ---------------------------------------------------------------------------------------------
 * Workspace query
 */

/* A tensor of the query's pass that it is not given: x's dtype and memory, dims, the canonical
 * strides of the layout the call's would have, no data. */
static nn_tensor unseen(const nn_tensor *x, int rank, const int64_t *dims, int channels_last)
{
    nn_tensor t = *x;
    t.data = NULL;
    memcpy(t.dims, dims, (size_t)rank * sizeof *dims);
    nn__conv_layout_strides(rank, dims, channels_last, t.strides);
    return t;
}

/* The call's own rules: the layout it gives tensors that are both layouts at once, from x and w,
 * for those the query is not given; then its description of them all. */
void nn__conv_describe_query(struct nn__conv_problem *p, nn_conv_pass pass, const nn_tensor *x,
                             const nn_tensor *w, const nn_tensor *b, struct nn__conv_query *q)
{
    memset(q, 0, sizeof *q);
    q->b = b;
    struct nn__conv_layout_arg given[] = {{NN__CONV_ROLE_X, x, &q->x}, {NN__CONV_ROLE_W, w, &q->w}};
    int cl = nn__conv_prefers_channels_last(given, 2);
    int rank = x->rank;
    int64_t yd[NN_MAX_RANK];
    y_dims_of(p, yd);
    nn_tensor y = unseen(x, rank, yd, cl), dx = unseen(x, rank, x->dims, cl),
              dw = unseen(x, rank, w->dims, cl);
    int fwd = pass == NN_CONV_PASS_FORWARD;
    struct nn__conv_layout_arg la[] = {
        {NN__CONV_ROLE_X, x, &q->x},
        {NN__CONV_ROLE_W, w, &q->w},
        {NN__CONV_ROLE_Y, fwd ? &y : NULL, &q->y},
        {NN__CONV_ROLE_DY, fwd ? NULL : &y, &q->dy},
        {NN__CONV_ROLE_DX, pass == NN_CONV_PASS_BACKWARD_DATA ? &dx : NULL, &q->dx},
        {NN__CONV_ROLE_DW, pass == NN_CONV_PASS_BACKWARD_FILTER ? &dw : NULL, &q->dw},
    };
    nn__conv_describe_layouts(p, la, 6);
}

nn_status nn_conv_workspace_size(nn_ctx *ctx, const nn_conv_params *p, const nn_tensor *x,
                                 const nn_tensor *w, const nn_tensor *b, nn_conv_pass pass,
                                 unsigned accumulate, size_t *bytes)
{
    const char *op = "nn_conv_workspace_size";
    if (!ctx) return NN__FAIL(NULL, NN_E_INVALID_ARG, "%s: ctx must not be NULL", op);
    if (!bytes) return NN__FAIL(ctx, NN_E_INVALID_ARG, "%s: bytes must not be NULL", op);
    NN__TRY(check_params(ctx, op, p));
    static const unsigned pass_bit[] = {0, NN_ACCUMULATE_DX, NN_ACCUMULATE_DW, NN_ACCUMULATE_DB};
    if ((unsigned)pass > NN_CONV_PASS_BACKWARD_BIAS)
        return NN__FAIL(ctx, NN_E_INVALID_ARG,
                        "%s: pass must be NN_CONV_PASS_FORWARD (0), _BACKWARD_DATA (1), "
                        "_BACKWARD_FILTER (2) or _BACKWARD_BIAS (3), got %d",
                        op, (int)pass);
    NN__TRY(nn__backward_accumulate(ctx, op, &pullback_kind, "accumulate", accumulate));
    if (!x) return NN__FAIL(ctx, NN_E_INVALID_ARG, "%s: x must not be NULL", op);
    NN__TRY(check_arg(ctx, op, x, "x", x->dtype, "x", 0));
    NN__TRY(check_arg(ctx, op, w, "w", x->dtype, "x", 0));
    if (b) NN__TRY(check_bias_arg(ctx, op, b, "b", x->dtype, "x", 0));
    if (x->rank != p->spatial_rank + 2)
        return NN__FAIL(ctx, NN_E_SHAPE, "%s: x.rank must be p.spatial_rank + 2 = %d, got %d", op,
                        p->spatial_rank + 2, x->rank);
    if (w->rank != x->rank)
        return NN__FAIL(ctx, NN_E_SHAPE, "%s: w.rank must equal x.rank (%d), got %d", op, x->rank,
                        w->rank);
    struct nn__conv_problem prob;
    NN__TRY(resolve(ctx, op, p, x->rank, x->dims, w->dims, "x", "w", &prob));
    fill_ctx_fields(ctx, &prob, x->dtype);
    prob.has_bias = b != NULL;
    if (b) NN__TRY(check_bias_dims(ctx, op, b, "b", &prob));
    NN__TRY(check_backend_limits(ctx, op, &prob));
    const struct conv_backend *be = backend_of(ctx);
    size_t n = 0;
    if (be->workspace) {
        struct nn__conv_query q;
        nn__conv_describe_query(&prob, pass, x, w, b, &q);
        NN__TRY_IN(ctx, op,
                   be->workspace(ctx, &prob, pass, &q, beta_for(accumulate, pass_bit[pass]), &n));
    }
    *bytes = n;
    return NN_OK;
}

/* Convolution on cuDNN: forward, data and filter gradients through the graph API (plans from the
 * plan cache, src/cudnn/plan_get_cudnn.h); the relu mask of the backward pass, the bias gradient
 * (f32, f16, f64) and, where no engine fuses them into the forward plan (NCHW on cuDNN 9.14:
 * the fusion engines want NHWC), the bias add and relu, through cuDNN's legacy tensor calls
 * (cudnnActivationBackward, cudnnConvolutionBackwardBias, cudnnAddTensor,
 * cudnnActivationForward), which take these dtypes with alpha/beta. The bf16 bias gradient, which
 * the legacy call refuses, is a filter-gradient plan over ones. The verbose line names every
 * step ("legacy" for the tensor calls). */
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "conv/conv_graph_cudnn.h"
#include "conv/conv_internal.h"
#include "core/alloc.h"
#include "core/capture.h"
#include "core/ctx.h"
#include "core/cuda_util.h"
#include "core/error.h"
#include "core/log.h"
#include "cudnn/bindings_cudnn.h"
#include "cudnn/cudnn_ctx.h"
#include "cudnn/describe_cudnn.h"
#include "cudnn/plan_build_cudnn.h"
#include "cudnn/plan_get_cudnn.h"
#include "mem/mem.h"

/* ---------------------------------------------------------------------------------------------
 * Limits: cuDNN takes convolution sizes as int (a stride of INT64_MAX, valid for a 1x1 output,
 * failed inside cuDNN with INTERNAL_ERROR in an integer cast)
 */

static nn_status limit(struct nn_ctx *ctx, const char *op, const char *field, int i, int64_t v)
{
    if (v <= INT32_MAX) return NN_OK;
    char at[16] = "";
    if (i >= 0) snprintf(at, sizeof at, "[%d]", i);
    return NN__FAIL(ctx, NN_E_UNSUPPORTED,
                    "%s: %s%s = %lld is beyond what cuDNN takes (%d, sizes are int there); use a "
                    "reference-backend context",
                    op, field, at, (long long)v, INT32_MAX);
}

nn_status nn__conv_cudnn_check_limits(struct nn_ctx *ctx, const char *op,
                                      const struct nn__conv_problem *p)
{
    NN__TRY(limit(ctx, op, "x.dims[0] (N)", -1, p->n));
    NN__TRY(limit(ctx, op, "x.dims[1] (C)", -1, p->c));
    NN__TRY(limit(ctx, op, "w.dims[0] (K)", -1, p->k));
    NN__TRY(limit(ctx, op, "p.groups", -1, p->groups));
    for (int i = 0; i < p->nsp; i++) {
        NN__TRY(limit(ctx, op, "p.stride", i, p->stride[i]));
        NN__TRY(limit(ctx, op, "p.dilation", i, p->dilation[i]));
        NN__TRY(limit(ctx, op, "p.pad_lo", i, p->pad_lo[i]));
        NN__TRY(limit(ctx, op, "p.pad_hi", i, p->pad_hi[i]));
        NN__TRY(limit(ctx, op, "the input size of spatial dim", i, p->in[i]));
        NN__TRY(limit(ctx, op, "the filter size of spatial dim", i, p->filt[i]));
        NN__TRY(limit(ctx, op, "the output size of spatial dim", i, p->out[i]));
    }
    return NN_OK;
}

/* ---------------------------------------------------------------------------------------------
 * Verbose: what the cuDNN calls of one op call did, into the op call's note (conv_internal.h)
 */

/* Each cuDNN step of an op call appends "what:impl" and its cache outcome. */
static void verbose_add(struct nn_ctx *ctx, struct nn__conv_note *note, const char *what,
                        const char *impl, const char *cache)
{
    if (!nn__verbose(ctx)) return;
    if (!note->impl[0]) {
        snprintf(note->impl, sizeof note->impl, "cudnn");
        note->cache[0] = 0;
    }
    size_t n = strlen(note->impl), m = strlen(note->cache);
    snprintf(note->impl + n, sizeof note->impl - n, " %s:%s", what, impl);
    snprintf(note->cache + m, sizeof note->cache - m, "%s%s", m ? " " : "", cache);
}

static void verbose_plan(struct nn_ctx *ctx, struct nn__conv_note *note, const char *what,
                         const struct nn__cudnn_plan *plan, enum nn__plan_source src)
{
    if (!nn__verbose(ctx)) return;
    char impl[48];
    snprintf(impl, sizeof impl, "eng%lld", (long long)nn__cudnn_plan_choice(plan)->engine);
    verbose_add(ctx, note, what, impl, nn__plan_source_name(src));
}

/* ---------------------------------------------------------------------------------------------
 * Checks and descriptions
 */

/* Whether a view from conv.c (canonical strides, conv_internal.h) is described channels-last.
 * A tensor that is both layouts at once has the same memory either way. */
static int channels_last(const nn_tensor *t)
{
    return t->strides[1] == 1 && nn__conv_is_channels_last(t);
}

static void graph_conv(struct nn__conv_graph_params *c, const struct nn__conv_problem *p)
{
    memset(c, 0, sizeof *c);
    c->spatial_rank = p->nsp;
    for (int i = 0; i < p->nsp; i++) {
        c->stride[i] = p->stride[i];
        c->dilation[i] = p->dilation[i];
        c->pre_pad[i] = p->pad_lo[i];
        c->post_pad[i] = p->pad_hi[i];
    }
    c->mode = p->mode == NN_CONV_CONVOLUTION ? NN__CONV_GRAPH_CONVOLUTION : NN__CONV_GRAPH_XCORR;
    c->compute = p->dtype == NN_DTYPE_F64 ? NN_DTYPE_F64 : NN_DTYPE_F32;
}

static size_t bytes_of(const nn_tensor *t)
{
    return (size_t)nn_tensor_numel(t) * nn_dtype_size(t->dtype);
}

/* A plan search that found no engine: say what was asked, and what to do about f64. */
static nn_status explain(struct nn_ctx *ctx, nn_status st, const char *op,
                         const struct nn__conv_problem *p)
{
    if (st != NN_E_UNSUPPORTED) return st;
    char shape[256];
    nn__conv_problem_text(p, shape, sizeof shape);
    /* The message is copied first: NN__FAIL writes the record it reads. */
    char why[NN_ERROR_MESSAGE_MAX];
    snprintf(why, sizeof why, "%s", ctx->last_error.message);
    if (p->dtype == NN_DTYPE_F64)
        return NN__FAIL(ctx, NN_E_UNSUPPORTED,
                        "%s: cuDNN has no engine for f64 convolution here (%s); use a "
                        "reference-backend context for f64. cuDNN layer: %s",
                        op, shape, why);
    return NN__FAIL(ctx, NN_E_UNSUPPORTED, "%s: no cuDNN engine takes %s: %s", op, shape, why);
}

/* ---------------------------------------------------------------------------------------------
 * Plan-cache keys, made straight from the problem and the views (the graph is made from the key
 * only when a plan is built): this runs on every call, hits included
 */

/* The key's common part: the pass, the problem's parameters and dtype, alpha/beta, settings. */
static void key_begin(struct nn_ctx *ctx, struct nn__conv_key *k, enum nn__conv_pass op,
                      const struct nn__conv_problem *p, double alpha, double beta)
{
    struct nn__conv_graph_params c;
    graph_conv(&c, p);
    nn__conv_key_begin(ctx, k, op, &c, p->groups, alpha, beta);
    k->dtype = p->dtype;
}

/* The key's tensor of uid: its slot in the key's pass comes from the one table
 * (conv_plan_key.h); the backend names tensors by uid only, as the variant pack does. */
static struct nn__conv_key_tensor *key_slot(struct nn__conv_key *k, int uid)
{
    return &k->t[nn__conv_slot_of_uid(k->pass, uid)];
}

static void slot_tensor(struct nn__conv_key_tensor *kt, const nn_tensor *t)
{
    nn__conv_key_tensor_set(kt, t->rank, t->dims, t->strides, nn__cudnn_ptr_alignment(t->data));
}

static void key_tensor(struct nn__conv_key *k, int uid, const nn_tensor *t)
{
    slot_tensor(key_slot(k, uid), t);
}

struct fwd_call {
    const struct nn__conv_problem *p;
    const nn_tensor *x, *w, *b, *y;
    int relu;
    double alpha, beta;
};

/* The bias is 1 x K x 1 ... at y's rank in y's layout, whatever rank the caller gave it (the
 * same K elements). */
static void key_fwd(struct nn_ctx *ctx, const struct fwd_call *f, struct nn__conv_key *k)
{
    key_begin(ctx, k, NN__CONV_PASS_FWD, f->p, f->alpha, f->beta);
    key_tensor(k, NN__CONV_UID_X, f->x);
    key_tensor(k, NN__CONV_UID_W, f->w);
    key_tensor(k, NN__CONV_UID_Y, f->y);
    k->relu = f->relu;
    if (!f->b) return;
    struct nn__conv_key_tensor *kb = key_slot(k, NN__CONV_UID_B);
    kb->align = nn__cudnn_ptr_alignment(f->b->data);
    kb->nhwc = key_slot(k, NN__CONV_UID_Y)->nhwc;
    for (int i = 0; i < f->y->rank; i++)
        kb->dims[i] = i == 1 ? f->p->k : 1;
}

/* A gradient plan's call: its tensors by key slot (conv_plan_key.h), the data gradient's dx, w,
 * dy or the filter gradient's x, dw, dy; the output is dx (the input slot) or dw (the filter
 * slot). */
struct bwd_call {
    const struct nn__conv_problem *p;
    enum nn__conv_pass pass; /* NN__CONV_PASS_BWD_DATA or _BWD_FILTER */
    const nn_tensor *t[3];   /* NN__CONV_SLOT_IN, _FILTER, _OUT */
    double alpha, beta;
};

static int bwd_out_slot(enum nn__conv_pass pass)
{
    return pass == NN__CONV_PASS_BWD_DATA ? NN__CONV_SLOT_IN : NN__CONV_SLOT_FILTER;
}

/* The internal name of the op a gradient plan belongs to, for its messages. */
static const char *bwd_op(enum nn__conv_pass pass)
{
    return pass == NN__CONV_PASS_BWD_DATA ? "conv_backward_data" : "conv_backward_filter";
}

static void key_bwd(struct nn_ctx *ctx, const struct bwd_call *f, struct nn__conv_key *k)
{
    key_begin(ctx, k, f->pass, f->p, f->alpha, f->beta);
    for (int i = 0; i < 3; i++)
        slot_tensor(&k->t[i], f->t[i]);
}

/* The call's pointers, for autotune: candidates write a scratch copy of the output. */
static void bwd_args(const struct bwd_call *f, struct nn__plan_args *pa)
{
    memset(pa, 0, sizeof *pa);
    for (int i = 0; i < 3; i++)
        pa->args.p[nn__conv_uid_of_slot(f->pass, i)] = f->t[i]->data;
    int out = bwd_out_slot(f->pass);
    pa->out_uid = nn__conv_uid_of_slot(f->pass, out);
    pa->out_bytes = bytes_of(f->t[out]);
}

/* ---------------------------------------------------------------------------------------------
 * Legacy tensor calls
 */

/* A packed N x C x spatial tensor as a legacy descriptor of rank 4 or 5 (1-D as N, C, 1, W);
 * a bias is the same with n = 1 and unit spatial sizes. */
struct legacy_desc {
    cudnnTensorDescriptor_t d;
};

static nn_status legacy_desc_set(struct nn_ctx *ctx, struct legacy_desc *ld, nn_dtype dtype,
                                 int nsp, int64_t n, int64_t c, const int64_t *sp)
{
    int dims[5], strides[5];
    int rank = nsp == 3 ? 5 : 4;
    int64_t d64[5] = {n, c, 1, 1, 1};
    if (nsp == 1)
        d64[3] = sp[0];
    else
        for (int i = 0; i < nsp; i++)
            d64[2 + i] = sp[i];
    int64_t stride = 1;
    for (int i = rank - 1; i >= 0; i--) {
        if (d64[i] > INT_MAX || stride > INT_MAX)
            return NN__FAIL(ctx, NN_E_UNSUPPORTED,
                            "cuDNN's tensor calls take 32-bit sizes; a tensor here has %lld "
                            "elements in one dimension or stride",
                            (long long)(d64[i] > stride ? d64[i] : stride));
        dims[i] = (int)d64[i];
        strides[i] = (int)stride;
        stride *= d64[i];
    }
    return nn__cudnn_SetTensorNdDescriptor(ctx, ld->d, nn__cudnn_data_type(dtype), rank, dims,
                                           strides);
}

/* The N x C x spatial view t (NCHW or channels-last strides) as a legacy descriptor of rank 4
 * or 5 (1-D as N, C, 1, W). */
static nn_status legacy_desc_of(struct nn_ctx *ctx, struct legacy_desc *ld, const nn_tensor *t)
{
    int dims[5], strides[5];
    int64_t d64[5], s64[5];
    int rank = t->rank == 3 ? 4 : t->rank;
    for (int i = 0, j = 0; i < rank; i++) {
        if (t->rank == 3 && i == 2) {
            d64[i] = 1;
            s64[i] = t->dims[2] * t->strides[2];
            continue;
        }
        d64[i] = t->dims[j];
        s64[i] = t->strides[j++];
    }
    for (int i = 0; i < rank; i++) {
        if (d64[i] > INT_MAX || s64[i] > INT_MAX)
            return NN__FAIL(ctx, NN_E_UNSUPPORTED,
                            "cuDNN's tensor calls take 32-bit sizes; a tensor here has %lld "
                            "elements in one dimension or stride",
                            (long long)(d64[i] > s64[i] ? d64[i] : s64[i]));
        dims[i] = (int)d64[i];
        strides[i] = (int)s64[i];
    }
    return nn__cudnn_SetTensorNdDescriptor(ctx, ld->d, nn__cudnn_data_type(t->dtype), rank, dims,
                                           strides);
}

/* Two legacy descriptors, created and destroyed together. */
static nn_status legacy_pair_create(struct nn_ctx *ctx, struct legacy_desc ld[2])
{
    ld[0].d = ld[1].d = NULL;
    NN__TRY(nn__cudnn_CreateTensorDescriptor(ctx, &ld[0].d));
    nn_status st = nn__cudnn_CreateTensorDescriptor(ctx, &ld[1].d);
    if (st != NN_OK) nn__cudnn_DestroyTensorDescriptor(ctx, ld[0].d);
    return st;
}

static void legacy_pair_destroy(struct nn_ctx *ctx, struct legacy_desc ld[2])
{
    struct nn__error_kept keep = nn__error_keep(ctx);
    nn__cudnn_DestroyTensorDescriptor(ctx, ld[0].d);
    nn__cudnn_DestroyTensorDescriptor(ctx, ld[1].d);
    nn__error_restore(ctx, &keep);
}

static nn_status bias_grad_legacy(struct nn_ctx *ctx, cudnnHandle_t h,
                                  const struct nn__conv_problem *p, struct legacy_desc ld[2],
                                  const nn_tensor *dy, nn_tensor *db, double alpha, double beta)
{
    int64_t ones[3] = {1, 1, 1};
    NN__TRY(legacy_desc_of(ctx, &ld[0], dy));
    NN__TRY(legacy_desc_set(ctx, &ld[1], p->dtype, p->nsp, 1, p->k, ones));
    union nn__cudnn_scale a, b;
    return nn__cudnn_ConvolutionBackwardBias(ctx, h, nn__cudnn_scale(&a, p->dtype, alpha), ld[0].d,
                                             dy->data, nn__cudnn_scale(&b, p->dtype, beta), ld[1].d,
                                             db->data);
}

/* y = relu(y + b) in place, after a convolution plan without the fused epilogue. */
static nn_status bias_relu_legacy(struct nn_ctx *ctx, cudnnHandle_t h,
                                  const struct nn__conv_problem *p, struct legacy_desc ld[2],
                                  const nn_tensor *b, nn_tensor *y, int relu)
{
    int64_t ones[3] = {1, 1, 1};
    union nn__cudnn_scale one, second;
    NN__TRY(legacy_desc_of(ctx, &ld[0], y));
    if (b) {
        NN__TRY(legacy_desc_set(ctx, &ld[1], p->dtype, p->nsp, 1, p->k, ones));
        /* y = 1 * b + 1 * y, b broadcast over N and space. */
        NN__TRY(nn__cudnn_AddTensor(ctx, h, nn__cudnn_scale(&one, p->dtype, 1.0), ld[1].d, b->data,
                                    nn__cudnn_scale(&second, p->dtype, 1.0), ld[0].d, y->data));
    }
    if (!relu) return NN_OK;
    cudnnActivationDescriptor_t act;
    NN__TRY(nn__cudnn_relu_desc(ctx, &act));
    nn_status st = nn__cudnn_ActivationForward(
        ctx, h, act, nn__cudnn_scale(&one, p->dtype, 1.0), ld[0].d, y->data,
        nn__cudnn_scale(&second, p->dtype, 0.0), ld[0].d, y->data);
    nn__cudnn_relu_desc_destroy(ctx, act);
    return st;
}

/* ---------------------------------------------------------------------------------------------
 * Forward
 */

/* The call's pointers, for autotune: candidates write a scratch copy of y. */
static void fwd_args(const struct fwd_call *f, struct nn__plan_args *pa)
{
    memset(pa, 0, sizeof *pa);
    pa->args.p[NN__CONV_UID_X] = f->x->data;
    pa->args.p[NN__CONV_UID_W] = f->w->data;
    pa->args.p[NN__CONV_UID_Y] = f->y->data;
    if (f->b) pa->args.p[NN__CONV_UID_B] = f->b->data;
    pa->out_uid = NN__CONV_UID_Y;
    pa->out_bytes = bytes_of(f->y);
}

/* The forward's key; returns whether the forward has an epilogue (bias or relu). */
static int forward_key(struct nn_ctx *ctx, const struct fwd_call *fc, struct nn__conv_key *key)
{
    key_fwd(ctx, fc, key);
    return fc->b || fc->relu;
}

typedef struct nn__cudnn_plan *(*plan_find)(struct nn_ctx *, const struct nn__conv_key *);

/* The live plan of a key, counted as a hit or a miss (every call's lookup). */
static struct nn__cudnn_plan *lookup(struct nn_ctx *ctx, const struct nn__conv_key *key)
{
    return nn__cudnn_plan_lookup(ctx, &nn__conv_graph_kind, key);
}

/* The forward's live plan by find: the fused one (key) before, for a forward with an epilogue
 * (epi not NULL), the plain one, whose key (key with NN__CONV_KEY_PLAIN) it writes to *epi only
 * when the fused one is not live; *fused says which. NULL when neither is live. */
static struct nn__cudnn_plan *forward_live(struct nn_ctx *ctx, const struct nn__conv_key *key,
                                           struct nn__conv_key *epi, plan_find find, int *fused)
{
    struct nn__cudnn_plan *plan = find(ctx, key);
    *fused = plan && epi;
    if (plan || !epi) return plan;
    *epi = *key;
    epi->flags = NN__CONV_KEY_PLAIN;
    return find(ctx, epi);
}

/* With bias or relu the forward first tries one fused plan (key with the bias flag and the
 * activation). When no engine takes that graph, the plain convolution plan is kept under the
 * epilogue key (the same key plus NN__CONV_KEY_PLAIN) and the bias and relu run after it; that key
 * is cached and saved like any other, so neither this process nor one that loads the plan file asks
 * cuDNN about the fused graph again. A call whose plans are live costs one or two lookups. */
static nn_status forward_plan(struct nn_ctx *ctx, struct fwd_call *fc,
                              const struct nn__plan_args *pa, struct nn__cudnn_plan **plan,
                              enum nn__plan_source *src, int *fused)
{
    struct nn__conv_key key, epi;
    *fused = 0;
    if (!forward_key(ctx, fc, &key))
        return nn__cudnn_plan_get(ctx, &nn__conv_graph_kind, &key, pa, plan, src);
    struct nn__cache *c = nn__cudnn_plan_cache(ctx);
    if ((*plan = forward_live(ctx, &key, &epi, lookup, fused))) {
        *src = NN__PLAN_HIT;
        return NN_OK;
    }
    if (!nn__plan_cache_lookup_known(c, NN__CONV_KIND_ID, &epi) ||
        nn__plan_cache_lookup_known(c, NN__CONV_KIND_ID, &key)) {
        struct nn__error_kept keep = nn__error_keep(ctx);
        nn_status st = nn__cudnn_plan_get(ctx, &nn__conv_graph_kind, &key, pa, plan, src);
        if (st == NN_OK) {
            *fused = 1;
            return NN_OK;
        }
        if (st == NN_E_OOM_HOST || st == NN_E_OOM_DEVICE || st == NN_E_CUDA) return st;
        if (nn__verbose(ctx))
            nn__log("conv_forward: no engine fuses the bias/relu here; they run after the "
                    "convolution: %s",
                    ctx->last_error.message);
        nn__error_restore(ctx, &keep);
    }
    return nn__cudnn_plan_get(ctx, &nn__conv_graph_kind, &epi, pa, plan, src);
}

/* For nn__conv_forward_capture(): the plan and its variant pack's tensors, in slot order (the
 * bias last). */
static void capture(struct nn__conv_exec *e, struct nn__cudnn_plan *plan, int fused,
                    const struct nn__cudnn_args *a)
{
    _Static_assert(sizeof e->uids / sizeof e->uids[0] == NN__CONV_SLOTS, "one uid per slot");
    e->plan = plan;
    e->n = fused && a->p[NN__CONV_UID_B] ? 4 : 3;
    for (int i = 0; i < NN__CONV_SLOTS; i++) {
        int u = nn__conv_uid_of_slot(NN__CONV_PASS_FWD, i);
        e->uids[i] = u;
        e->ptrs[i] = a->p[u];
    }
}

nn_status nn__conv_forward_cudnn(struct nn_ctx *ctx, const struct nn__conv_problem *p,
                                 const nn_tensor *x, const nn_tensor *w, const nn_tensor *b,
                                 nn_tensor *y, double alpha, double beta,
                                 struct nn__conv_note *note)
{
    const char *op = "conv_forward";
    int relu = p->activation == NN_ACTIVATION_RELU;
    /* The fused graph and the legacy epilogue both compute act(x * w + b) as a whole. */
    if ((b || relu) && (alpha != 1.0 || beta != 0.0))
        return NN__FAIL(ctx, NN_E_INTERNAL,
                        "%s: with bias or relu the cuDNN path takes alpha = 1 and beta = 0, got "
                        "%g and %g",
                        op, alpha, beta);
    struct fwd_call fc = {p, x, w, b, y, relu, alpha, beta};
    struct nn__plan_args pa;
    fwd_args(&fc, &pa);

    struct nn__cudnn_plan *plan;
    enum nn__plan_source src;
    int fused;
    nn_status st = forward_plan(ctx, &fc, &pa, &plan, &src, &fused);
    if (st != NN_OK) return explain(ctx, st, op, p);
    verbose_plan(ctx, note,
                 !fused      ? "fwd"
                 : b && relu ? "fwd+bias+relu"
                 : b         ? "fwd+bias"
                             : "fwd+relu",
                 plan, src);
    if (note->exec) capture(note->exec, plan, fused, &pa.args);
    NN__TRY(nn__cudnn_plan_run(ctx, plan, &pa.args));
    if (fused || (!b && !relu)) return NN_OK;

    cudnnHandle_t h;
    NN__TRY(nn__cudnn_handle(ctx, &h));
    struct legacy_desc ld[2];
    NN__TRY(legacy_pair_create(ctx, ld));
    st = bias_relu_legacy(ctx, h, p, ld, b, y, relu);
    legacy_pair_destroy(ctx, ld);
    verbose_add(ctx, note, b && relu ? "bias+relu" : b ? "bias" : "relu", "legacy", "-");
    return st;
}

/* ---------------------------------------------------------------------------------------------
 * Backward
 */

/* Find (or build) the plan of a gradient call and run it. */
static nn_status run_plan(struct nn_ctx *ctx, const char *what, const struct bwd_call *f,
                          struct nn__conv_note *note)
{
    struct nn__conv_key key;
    key_bwd(ctx, f, &key);
    struct nn__plan_args pa;
    bwd_args(f, &pa);
    struct nn__cudnn_plan *plan;
    enum nn__plan_source src;
    nn_status st = nn__cudnn_plan_get(ctx, &nn__conv_graph_kind, &key, &pa, &plan, &src);
    if (st != NN_OK) return explain(ctx, st, bwd_op(f->pass), f->p);
    verbose_plan(ctx, note, what, plan, src);
    return nn__cudnn_plan_run(ctx, plan, &pa.args);
}

nn_status nn__conv_backward_data_cudnn(struct nn_ctx *ctx, const struct nn__conv_problem *p,
                                       const nn_tensor *dy, const nn_tensor *w, nn_tensor *dx,
                                       double alpha, double beta, struct nn__conv_note *note)
{
    struct bwd_call bc = {p, NN__CONV_PASS_BWD_DATA, {dx, w, dy}, alpha, beta};
    return run_plan(ctx, "data", &bc, note);
}

/* dw = alpha * wgrad(x, dy) + beta * dw through a plan. what names the step in the verbose line. */
static nn_status wgrad_run(struct nn_ctx *ctx, const char *what, const struct nn__conv_problem *p,
                           const nn_tensor *x, const nn_tensor *dy, nn_tensor *dw, double alpha,
                           double beta, struct nn__conv_note *note)
{
    struct bwd_call bc = {p, NN__CONV_PASS_BWD_FILTER, {x, dw, dy}, alpha, beta};
    return run_plan(ctx, what, &bc, note);
}

/* Copy the packed N x C x spatial tensor src (planes planes of spatial sizes from, each spatial
 * position inner contiguous elements: N * C planes and inner 1 in NCHW order, N planes and inner
 * C channels-last) into the packed, larger dst of the same layout (the same planes, spatial sizes
 * to), zeroed first, with the source's first element of every plane at the spatial offset at
 * (from[i] + at[i] <= to[i]): the rest of every dimension is left zero. at = 0 extends at the high
 * end. */
static nn_status copy_into_zeroed(struct nn_ctx *ctx, int nsp, int64_t planes, int64_t inner,
                                  const int64_t *from, const int64_t *to, const int64_t *at,
                                  size_t es, const void *src, void *dst, size_t dst_bytes)
{
    cudaStream_t s = (cudaStream_t)ctx->stream;
    int64_t f[3] = {1, 1, 1}, t[3] = {1, 1, 1}, o[3] = {0, 0, 0}; /* D, H, W */
    for (int i = 0; i < nsp; i++) {
        f[3 - nsp + i] = from[i];
        t[3 - nsp + i] = to[i];
        o[3 - nsp + i] = at[i];
    }
    NN__TRY(NN__CUDA(ctx, cudaMemsetAsync(dst, 0, dst_bytes, s)));
    es *= (size_t)inner; /* from here on, one "element" is one spatial position */
    struct cudaMemcpy3DParms m;
    memset(&m, 0, sizeof m);
    m.kind = cudaMemcpyDeviceToDevice;
    m.extent.width = (size_t)f[2] * es;
    m.extent.height = (size_t)f[1];
    m.extent.depth = (size_t)(nsp == 3 ? f[0] : planes);
    /* Below 3-D every (n, c) plane is one slice of a single copy; in 3-D, one copy per plane. The
     * offset is applied to the destination pointer: it is the same within every slice. */
    int64_t copies = nsp == 3 ? planes : 1;
    size_t src_step = (size_t)(f[0] * f[1] * f[2]) * es,
           dst_step = (size_t)(t[0] * t[1] * t[2]) * es,
           dst_at = (size_t)((o[0] * t[1] + o[1]) * t[2] + o[2]) * es;
    for (int64_t j = 0; j < copies; j++) {
        m.srcPtr.ptr = (void *)((const char *)src + (size_t)j * src_step);
        m.srcPtr.pitch = (size_t)f[2] * es;
        m.srcPtr.xsize = (size_t)f[2];
        m.srcPtr.ysize = (size_t)f[1];
        m.dstPtr.ptr = (char *)dst + (size_t)j * dst_step + dst_at;
        m.dstPtr.pitch = (size_t)t[2] * es;
        m.dstPtr.xsize = (size_t)t[2];
        m.dstPtr.ysize = (size_t)t[1];
        NN__TRY(NN__CUDA(ctx, cudaMemcpy3DAsync(&m, s)));
    }
    return NN_OK;
}

/* cuDNN 9.14's filter gradient came out wrong on the GPU machine (H200) whenever a dimension's
 * post-padding was smaller than its pre-padding (1-D and 3-D cases, f16, bf16, f32, f64, either
 * mode), while forward and data gradient were right. Such a problem runs with the post-padding
 * raised to the pre-padding and dy extended with zeros at the high end: the output positions
 * that adds have a zero gradient, and the others see the same inputs, so dw is unchanged. */
static int post_pad_short(const struct nn__conv_problem *p)
{
    for (int i = 0; i < p->nsp; i++)
        if (p->pad_hi[i] < p->pad_lo[i]) return 1;
    return 0;
}

/* The problem with the post-padding raised, and dy2 (dy's view) with its larger dims. */
static void raised_post_pad(const struct nn__conv_problem *p, struct nn__conv_problem *q,
                            nn_tensor *dy2)
{
    int cl = channels_last(dy2);
    *q = *p;
    for (int i = 0; i < q->nsp; i++) {
        if (q->pad_hi[i] < q->pad_lo[i]) q->pad_hi[i] = q->pad_lo[i];
        int64_t span = q->dilation[i] * (q->filt[i] - 1) + 1;
        q->out[i] = (q->in[i] + q->pad_lo[i] + q->pad_hi[i] - span) / q->stride[i] + 1;
        dy2->dims[2 + i] = q->out[i];
    }
    nn__conv_layout_strides(dy2->rank, dy2->dims, cl, dy2->strides);
}

static nn_status wgrad_raised_post_pad(struct nn_ctx *ctx, const struct nn__conv_problem *p,
                                       const nn_tensor *x, const nn_tensor *dy, nn_tensor *dw,
                                       double alpha, double beta, struct nn__conv_note *note)
{
    struct nn__conv_problem q;
    nn_tensor dy2 = *dy;
    int cl = channels_last(dy);
    raised_post_pad(p, &q, &dy2);
    size_t bytes = bytes_of(&dy2);
    NN__TRY(nn__dev_alloc(ctx, bytes, &dy2.data));
    static const int64_t at_low[NN_CONV_MAX_SPATIAL] = {0};
    nn_status st =
        copy_into_zeroed(ctx, p->nsp, cl ? p->n : p->n * p->k, cl ? p->k : 1, p->out, q.out, at_low,
                         nn_dtype_size(p->dtype), dy->data, dy2.data, bytes);
    if (st == NN_OK) st = wgrad_run(ctx, "filter(raised pad)", &q, x, &dy2, dw, alpha, beta, note);
    nn_status fst = nn__dev_free(ctx, dy2.data);
    return st != NN_OK ? st : fst;
}

/* cuDNN 9.14's filter gradient was wrong in almost every element on the GPU machine (H200,
 * 2026-11-30, a sweep of 96 `nnprim check` cases over f16/bf16, rank 2/3, groups 1/2/4, stride
 * 1/2, dilation 1/2, symmetric pad1 or padlo1x1x0 padhi0x1x2) exactly for 3-D, groups >= 2,
 * asymmetric padding and f16 or bf16 data: rank 2, groups 1, symmetric padding, f32 (strict and
 * TF32) and f64 all passed. With g4 every stride/dilation failed, with g2 only stride2x1x1
 * dil1x2x1, so every such problem is taken as affected. Raising the post-padding (above) does not
 * help (padlo1x1x0 padhi1x1x2 fails too), and heuristics engines 1 and 20 give the same wrong
 * values. Such problems run on an explicitly zero-padded copy of x with no padding at all. */
static int wgrad_needs_padded_copy(const struct nn__conv_problem *p)
{
    if (p->nsp != 3 || p->groups < 2) return 0;
    if (p->dtype != NN_DTYPE_F16 && p->dtype != NN_DTYPE_BF16) return 0;
    for (int i = 0; i < p->nsp; i++)
        if (p->pad_lo[i] != p->pad_hi[i]) return 1;
    return 0;
}

/* The problem without padding on x2, x's view with the padded dims. */
static void padded_copy_problem(const struct nn__conv_problem *p, struct nn__conv_problem *q,
                                nn_tensor *x2)
{
    int cl = channels_last(x2);
    *q = *p;
    for (int i = 0; i < q->nsp; i++) {
        q->in[i] = p->in[i] + p->pad_lo[i] + p->pad_hi[i];
        q->pad_lo[i] = q->pad_hi[i] = 0;
        x2->dims[2 + i] = q->in[i];
    }
    nn__conv_layout_strides(x2->rank, x2->dims, cl, x2->strides);
}

/* dw from x2 = x zero-padded by hand (each spatial size in + pad_lo + pad_hi, x at offset pad_lo)
 * and a problem without padding: the same output size, the same products, so the same dw. */
static nn_status wgrad_padded_copy(struct nn_ctx *ctx, const struct nn__conv_problem *p,
                                   const nn_tensor *x, const nn_tensor *dy, nn_tensor *dw,
                                   double alpha, double beta, struct nn__conv_note *note)
{
    /* The copy reads x as packed planes. conv.c only passes packed tensors, NCHW or
     * channels-last (conv_internal.h); checked here too, since another x would be copied
     * wrongly. */
    int cl = channels_last(x);
    if (!cl && !nn_tensor_is_contiguous(x))
        return NN__FAIL(ctx, NN_E_INTERNAL,
                        "conv_backward_filter: the zero-padded copy of x needs a packed x (NCHW "
                        "or channels-last); got other strides");
    struct nn__conv_problem q;
    nn_tensor x2 = *x;
    padded_copy_problem(p, &q, &x2);
    size_t bytes = bytes_of(&x2);
    NN__TRY(nn__dev_alloc(ctx, bytes, &x2.data));
    nn_status st =
        copy_into_zeroed(ctx, p->nsp, cl ? p->n : p->n * p->c, cl ? p->c : 1, p->in, q.in,
                         p->pad_lo, nn_dtype_size(p->dtype), x->data, x2.data, bytes);
    if (st == NN_OK) st = wgrad_run(ctx, "filter(padded copy)", &q, &x2, dy, dw, alpha, beta, note);
    nn_status fst = nn__dev_free(ctx, x2.data);
    return st != NN_OK ? st : fst;
}

/* When both workarounds apply (a 16-bit grouped 3-D problem with a post-padding below its
 * pre-padding), the padded copy runs: it leaves no padding, so the raise has nothing to do. */
nn_status nn__conv_backward_filter_cudnn(struct nn_ctx *ctx, const struct nn__conv_problem *p,
                                         const nn_tensor *x, const nn_tensor *dy, nn_tensor *dw,
                                         double alpha, double beta, struct nn__conv_note *note)
{
    if (wgrad_needs_padded_copy(p)) return wgrad_padded_copy(ctx, p, x, dy, dw, alpha, beta, note);
    if (post_pad_short(p)) return wgrad_raised_post_pad(ctx, p, x, dy, dw, alpha, beta, note);
    return wgrad_run(ctx, "filter", p, x, dy, dw, alpha, beta, note);
}

/* bf16 bias gradient: cudnnConvolutionBackwardBias has no bf16 kernel (NOT_SUPPORTED on cuDNN
 * 9.14), so db is the filter gradient of a 1x1 convolution whose input is all ones with one
 * channel: dw[k] = sum over n and space of dy[n, k, ...] * 1, a plan like any other. */
/* The 1x1 problem of bias_grad_ones() and its views: ones (N x 1 x spatial) and dw, db as
 * K x 1 x 1 ... (the same K elements); dy is dy's view. */
static void ones_problem(const struct nn__conv_problem *p, const nn_tensor *dy,
                         struct nn__conv_problem *q, nn_tensor *ones, nn_tensor *dw)
{
    memset(q, 0, sizeof *q);
    q->nsp = p->nsp;
    q->n = p->n;
    q->c = 1;
    q->k = p->k;
    q->groups = 1;
    for (int i = 0; i < p->nsp; i++) {
        q->in[i] = q->out[i] = p->out[i];
        q->filt[i] = q->stride[i] = q->dilation[i] = 1;
    }
    q->mode = NN_CONV_CROSS_CORRELATION;
    q->dtype = p->dtype;
    q->math = p->math;
    q->deterministic = p->deterministic;
    *ones = *dy;
    *dw = *dy;
    ones->dims[1] = 1;
    dw->dims[0] = p->k;
    for (int i = 1; i < dy->rank; i++)
        dw->dims[i] = 1;
    /* In dy's layout, so that the plan sees one layout (the memory is the same either way). */
    nn__conv_layout_strides(ones->rank, ones->dims, channels_last(dy), ones->strides);
    nn__conv_layout_strides(dw->rank, dw->dims, channels_last(dy), dw->strides);
}

/* The ones are made once per element count and dtype and kept in the context's cache (kind 9,
 * not persisted: device memory of this process), freed with their entry. An entry is counted:
 * a call holds it while its plan runs, since finding that plan may evict it (a cache of capacity
 * 1); the last holder gives the memory back to the pool, in stream order after the reads. */
struct ones_key {
    int32_t dtype;
    int64_t count;
};

struct ones_record {
    int32_t unused[2];
};

struct kept_ones {
    int refs;
    struct nn_ctx *ctx;
    void *data;
};

static const struct nn__field ones_key_fields[] = {
    NN__FIELD(struct ones_key, dtype, NN__FIELD_I32),
    NN__FIELD(struct ones_key, count, NN__FIELD_I64),
    NN__FIELD_END,
};

static const struct nn__field ones_record_fields[] = {
    NN__FIELD(struct ones_record, unused, NN__FIELD_I32),
    NN__FIELD_END,
};

static void ones_unref(struct kept_ones *o)
{
    if (--o->refs > 0) return;
    if (o->data) {
        struct nn__error_kept keep = nn__error_keep(o->ctx);
        /* the stream the free is ordered on waits for the last call that may read them */
        nn__cudnn_shared_release(o->ctx);
        (void)nn__dev_free(o->ctx, o->data);
        nn__error_restore(o->ctx, &keep);
    }
    nn__host_free(o);
}

static void ones_destroy(void *live)
{
    ones_unref(live);
}

const struct nn__cache_kind nn__conv_ones_kind = {
    .id = NN__CONV_ONES_KIND_ID,
    .name = "conv bias ones",
    .flags = NN__CACHE_KIND_NOT_PERSISTED,
    .key_size = sizeof(struct ones_key),
    .key_fields = ones_key_fields,
    .record_size = sizeof(struct ones_record),
    .record_fields = ones_record_fields,
    .destroy = ones_destroy,
};

/* The kept ones of t's element count in its dtype, held for the caller (ones_unref()). */
static nn_status ones_get(struct nn_ctx *ctx, const nn_tensor *t, struct kept_ones **out)
{
    const char *fn = "the convolution bias gradient (bf16 on cuDNN)";
    struct nn__cache *c = nn__cudnn_plan_cache(ctx);
    struct ones_key k;
    memset(&k, 0, sizeof k);
    k.dtype = t->dtype;
    k.count = nn_tensor_numel(t);
    struct kept_ones *o = nn__cache_lookup(c, NN__CONV_ONES_KIND_ID, &k, NULL);
    if (!o) {
        NN__TRY(nn__capture_no_build(ctx, fn, "the kept vector of ones of this shape"));
        o = nn__host_calloc(1, sizeof *o);
        if (!o) return NN__FAIL(ctx, NN_E_OOM_HOST, "%s: out of host memory", fn);
        o->refs = 1;
        o->ctx = ctx;
        /* kept across calls: its write, like every product that reads it, is a shared-buffer
         * bracket (a later call may run on another stream, nn_ctx_set_stream) */
        nn__cudnn_shared_enter(ctx);
        nn_status st = nn__dev_alloc_ones(ctx, fn, t->dtype, (size_t)k.count, &o->data);
        nn__cudnn_shared_leave(ctx);
        struct ones_record rec = {{0, 0}};
        if (st == NN_OK) st = nn__cache_insert(ctx, c, NN__CONV_ONES_KIND_ID, &k, &rec, NULL, 0, o);
        if (st != NN_OK) {
            ones_unref(o);
            return st;
        }
    }
    o->refs++;
    *out = o;
    return NN_OK;
}

static nn_status bias_grad_ones(struct nn_ctx *ctx, const struct nn__conv_problem *p,
                                const nn_tensor *dy, nn_tensor *db, double alpha, double beta,
                                struct nn__conv_note *note)
{
    struct nn__conv_problem q;
    nn_tensor ones, dw;
    ones_problem(p, dy, &q, &ones, &dw);
    dw.data = db->data;
    struct kept_ones *o;
    NN__TRY(ones_get(ctx, &ones, &o));
    ones.data = o->data;
    nn__cudnn_shared_enter(ctx); /* reads the kept ones */
    nn_status st = wgrad_run(ctx, "bias(ones)", &q, &ones, dy, &dw, alpha, beta, note);
    nn__cudnn_shared_leave(ctx);
    ones_unref(o);
    return st;
}

nn_status nn__conv_backward_bias_cudnn(struct nn_ctx *ctx, const struct nn__conv_problem *p,
                                       const nn_tensor *dy, nn_tensor *db, double alpha,
                                       double beta, struct nn__conv_note *note)
{
    if (p->dtype == NN_DTYPE_BF16) return bias_grad_ones(ctx, p, dy, db, alpha, beta, note);
    if (nn__conv_bias_kernel_fits(p, dy)) {
        verbose_add(ctx, note, "bias", "kernel", "-");
        return nn__conv_bias_grad_cuda(ctx, dy, db, alpha, beta);
    }
    cudnnHandle_t h;
    NN__TRY(nn__cudnn_handle(ctx, &h));
    struct legacy_desc ld[2];
    NN__TRY(legacy_pair_create(ctx, ld));
    nn_status st = bias_grad_legacy(ctx, h, p, ld, dy, db, alpha, beta);
    legacy_pair_destroy(ctx, ld);
    verbose_add(ctx, note, "bias", "legacy", "-");
    return st;
}

nn_status nn__conv_relu_backward_cudnn(struct nn_ctx *ctx, const nn_tensor *y, const nn_tensor *dy,
                                       nn_tensor *dyr, struct nn__conv_note *note)
{
    int64_t numel = nn_tensor_numel(dy);
    if (numel > INT_MAX)
        return NN__FAIL(ctx, NN_E_UNSUPPORTED,
                        "conv_backward: the relu mask runs through cuDNN's 32-bit tensor calls; "
                        "dy has %lld elements",
                        (long long)numel);
    cudnnHandle_t h;
    NN__TRY(nn__cudnn_handle(ctx, &h));
    struct legacy_desc ld[2];
    NN__TRY(legacy_pair_create(ctx, ld));
    /* Elementwise: when y and dy share a layout (dyr has dy's, conv.c) the shape does not
     * matter, one row of numel elements; else each is described with its strides. */
    int same = memcmp(y->strides, dy->strides, (size_t)dy->rank * sizeof dy->strides[0]) == 0;
    int64_t row = numel;
    nn_status st = same ? legacy_desc_set(ctx, &ld[0], dy->dtype, 1, 1, 1, &row)
                        : legacy_desc_of(ctx, &ld[0], y);
    if (st == NN_OK && !same) st = legacy_desc_of(ctx, &ld[1], dy);
    cudnnTensorDescriptor_t yd = ld[0].d, dyd = same ? ld[0].d : ld[1].d;
    cudnnActivationDescriptor_t act = NULL;
    if (st == NN_OK) st = nn__cudnn_relu_desc(ctx, &act);
    if (st == NN_OK) {
        union nn__cudnn_scale one, zero;
        /* cuDNN's relu gradient is dy where its input is > 0; y > 0 exactly where the
         * pre-activation is, so y serves as both y and x. */
        st = nn__cudnn_ActivationBackward(ctx, h, act, nn__cudnn_scale(&one, dy->dtype, 1.0), yd,
                                          y->data, dyd, dy->data, yd, y->data,
                                          nn__cudnn_scale(&zero, dy->dtype, 0.0), dyd, dyr->data);
        nn__cudnn_relu_desc_destroy(ctx, act);
    }
    legacy_pair_destroy(ctx, ld);
    verbose_add(ctx, note, "relu_bwd", "legacy", "-");
    return st;
}

/* ---------------------------------------------------------------------------------------------
 * Workspace query
 */

/* Device scratch standing in for the pass's tensors the query is not given (conv.c describes
 * them, data NULL), taken only when a plan must be found or built: autotune runs candidates on
 * real memory, and the pool's alignment is what nn_tensor_empty gives. Zeroed where a candidate
 * reads it (gradient plans may blend with beta). */
struct stand_ins {
    void *p[4];
    int n;
};

static nn_status stand_in(struct nn_ctx *ctx, struct stand_ins *s, nn_tensor *t, int zero)
{
    if (s->n == (int)(sizeof s->p / sizeof s->p[0]))
        return NN__FAIL(ctx, NN_E_INTERNAL, "conv workspace query: more stand-ins than room");
    size_t bytes = bytes_of(t);
    NN__TRY(nn__dev_alloc(ctx, bytes, &t->data));
    s->p[s->n++] = t->data;
    if (zero) NN__TRY(NN__CUDA(ctx, cudaMemsetAsync(t->data, 0, bytes, (cudaStream_t)ctx->stream)));
    return NN_OK;
}

static nn_status stand_ins_free(struct nn_ctx *ctx, struct stand_ins *s, nn_status st)
{
    for (int i = 0; i < s->n; i++) {
        nn_status fst = nn__dev_free(ctx, s->p[i]);
        if (st == NN_OK) st = fst;
    }
    return st;
}

/* The live plan of key, or NULL, counting no miss: the query looks before it takes scratch, and
 * the search after a miss counts it as the call's would. Finished background builds are
 * collected first, as the call's lookup does, so that a plan built meanwhile counts as live. */
static struct nn__cudnn_plan *live_plan(struct nn_ctx *ctx, const struct nn__conv_key *key)
{
    nn__plan_builder_collect(ctx);
    if (!nn__plan_cache_is_live(nn__cudnn_plan_cache(ctx), NN__CONV_KIND_ID, key)) return NULL;
    return lookup(ctx, key);
}

static nn_status ws_forward(struct nn_ctx *ctx, struct stand_ins *s,
                            const struct nn__conv_problem *p, const struct nn__conv_query *q,
                            size_t *bytes)
{
    nn_tensor y = q->y;
    struct fwd_call fc = {p, &q->x, &q->w, q->b, &y, p->activation == NN_ACTIVATION_RELU, 1.0, 0.0};
    struct nn__conv_key key, epi;
    int has_epi = forward_key(ctx, &fc, &key);
    int fused;
    struct nn__cudnn_plan *plan = forward_live(ctx, &key, has_epi ? &epi : NULL, live_plan, &fused);
    if (!plan) {
        NN__TRY(stand_in(ctx, s, &y, 0));
        struct nn__plan_args pa;
        fwd_args(&fc, &pa);
        enum nn__plan_source src;
        nn_status st = forward_plan(ctx, &fc, &pa, &plan, &src, &fused);
        if (st != NN_OK) return explain(ctx, st, "conv_forward", p);
    }
    *bytes = (size_t)nn__cudnn_plan_workspace(plan); /* the legacy epilogue takes no pool memory */
    return NN_OK;
}

/* The workspace of the gradient plan over t (a bwd_call's tensors by slot, by value): the live
 * plan's when there is one; else scratch stands in for those without data and the plan is found
 * or built, and cached, as the call would, the scratch's pointers serving autotune. The key
 * stands: a NULL pointer and a device block (16-byte aligned at least, from the pool or a user
 * allocator, nnprim/mem.h) both give alignment 16. */
static nn_status ws_grad(struct nn_ctx *ctx, struct stand_ins *s, const struct nn__conv_problem *p,
                         enum nn__conv_pass pass, nn_tensor t[3], double beta, size_t *bytes)
{
    struct bwd_call bc = {p, pass, {&t[0], &t[1], &t[2]}, 1.0, beta};
    struct nn__conv_key key;
    key_bwd(ctx, &bc, &key);
    struct nn__cudnn_plan *plan = live_plan(ctx, &key);
    if (!plan) {
        for (int i = 0; i < 3; i++)
            if (!t[i].data) NN__TRY(stand_in(ctx, s, &t[i], 1));
        struct nn__plan_args pa;
        bwd_args(&bc, &pa);
        enum nn__plan_source src;
        nn_status st = nn__cudnn_plan_get(ctx, &nn__conv_graph_kind, &key, &pa, &plan, &src);
        if (st != NN_OK) return explain(ctx, st, bwd_op(pass), p);
    }
    *bytes = (size_t)nn__cudnn_plan_workspace(plan);
    return NN_OK;
}

/* As nn__conv_backward_filter_cudnn() chooses: a workaround's copy is held while its plan runs. */
static nn_status ws_filter(struct nn_ctx *ctx, struct stand_ins *s,
                           const struct nn__conv_problem *p, const struct nn__conv_query *q,
                           double beta, size_t *bytes)
{
    struct nn__conv_problem r;
    size_t ws = 0;
    if (wgrad_needs_padded_copy(p)) {
        nn_tensor x2 = q->x;
        x2.data = NULL;
        padded_copy_problem(p, &r, &x2);
        nn_tensor t[3] = {x2, q->dw, q->dy};
        NN__TRY(ws_grad(ctx, s, &r, NN__CONV_PASS_BWD_FILTER, t, beta, &ws));
        *bytes = ws + bytes_of(&x2);
    } else if (post_pad_short(p)) {
        nn_tensor dy2 = q->dy;
        raised_post_pad(p, &r, &dy2);
        nn_tensor t[3] = {q->x, q->dw, dy2};
        NN__TRY(ws_grad(ctx, s, &r, NN__CONV_PASS_BWD_FILTER, t, beta, &ws));
        *bytes = ws + bytes_of(&dy2);
    } else {
        nn_tensor t[3] = {q->x, q->dw, q->dy};
        NN__TRY(ws_grad(ctx, s, p, NN__CONV_PASS_BWD_FILTER, t, beta, bytes));
    }
    return NN_OK;
}

/* Only bf16's ones-filter path takes pool memory (the legacy reduction takes none): its plan's
 * workspace. The ones it makes (or finds) are kept, as the call's are, and not counted; its dw is
 * the caller's db, taken as the pool would align it. */
static nn_status ws_bias(struct nn_ctx *ctx, struct stand_ins *s, const struct nn__conv_problem *p,
                         const struct nn__conv_query *q, double beta, size_t *bytes)
{
    *bytes = 0;
    if (p->dtype != NN_DTYPE_BF16) return NN_OK;
    struct nn__conv_problem r;
    nn_tensor ones, dw;
    ones_problem(p, &q->dy, &r, &ones, &dw);
    struct kept_ones *o;
    NN__TRY(ones_get(ctx, &ones, &o));
    ones.data = o->data;
    nn_tensor t[3] = {ones, dw, q->dy};
    nn_status st = ws_grad(ctx, s, &r, NN__CONV_PASS_BWD_FILTER, t, beta, bytes);
    ones_unref(o);
    return st;
}

nn_status nn__conv_workspace_cudnn(struct nn_ctx *ctx, const struct nn__conv_problem *p,
                                   nn_conv_pass pass, const struct nn__conv_query *q, double beta,
                                   size_t *bytes)
{
    struct stand_ins s = {{NULL}, 0};
    nn_status st = NN_OK;
    size_t n = 0;
    switch (pass) {
    case NN_CONV_PASS_FORWARD: st = ws_forward(ctx, &s, p, q, &n); break;
    case NN_CONV_PASS_BACKWARD_DATA: {
        nn_tensor t[3] = {q->dx, q->w, q->dy};
        st = ws_grad(ctx, &s, p, NN__CONV_PASS_BWD_DATA, t, beta, &n);
        break;
    }
    case NN_CONV_PASS_BACKWARD_FILTER: st = ws_filter(ctx, &s, p, q, beta, &n); break;
    case NN_CONV_PASS_BACKWARD_BIAS: st = ws_bias(ctx, &s, p, q, beta, &n); break;
    }
    st = stand_ins_free(ctx, &s, st);
    if (st != NN_OK) return st;
    /* nn_conv_backward through a fused relu holds the masked dy (dy's layout) during all its
     * passes */
    if (pass != NN_CONV_PASS_FORWARD && p->activation == NN_ACTIVATION_RELU) n += bytes_of(&q->dy);
    *bytes = n;
    return NN_OK;
}

/* Convolution as cuDNN graphs; see conv_graph_cudnn.h. Attribute names and types follow the
 * cuDNN 9 backend API reference (cudnn_graph_v9.h and NVIDIA's backend descriptor
 * documentation). */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "conv/conv_graph_cudnn.h"
#include "conv/conv_internal.h"
#include "core/error.h"
#include "core/text.h"
#include "cudnn/bindings_cudnn.h"
#include "cudnn/describe_cudnn.h"

#define SET(ctx, d, attr, type, n, ptr)                                                            \
    nn__cudnn_BackendSetAttribute((ctx), (d), (attr), (type), (int64_t)(n), (ptr))

/* The name of each graph op (as nn__conv_graph_describe prints it), or NULL for a value that is
 * no op. */
static const char *op_name(enum nn__conv_pass op)
{
    switch (op) {
    case NN__CONV_PASS_FWD: return "conv_fwd";
    case NN__CONV_PASS_BWD_DATA: return "conv_bwd_data";
    case NN__CONV_PASS_BWD_FILTER: return "conv_bwd_filter";
    }
    return NULL;
}

/* The tensors (bit 1 << uid) op must have, and those it may have (the forward's fused bias), from
 * the key's slots (conv_plan_key.h). */
static unsigned op_uses(enum nn__conv_pass op, int optional)
{
    unsigned bits = 0;
    for (int i = 0; i < NN__CONV_SLOTS; i++) {
        int u = nn__conv_uid_of_slot(op, i);
        if (u && (i == NN__CONV_SLOT_BIAS) == optional) bits |= NN__CONV_UID_BIT(u);
    }
    return bits;
}

/* ---------------------------------------------------------------------------------------------
 * Descriptions and their checks
 */

static void graph_init(struct nn__conv_graph *d, enum nn__conv_pass op)
{
    memset(d, 0, sizeof *d);
    d->op = op;
    d->alpha = 1.0;
}

void nn__conv_graph_fwd(struct nn__conv_graph *d, const struct nn__cudnn_tensor *x,
                        const struct nn__cudnn_tensor *w, const struct nn__cudnn_tensor *b,
                        const struct nn__cudnn_tensor *y, const struct nn__conv_graph_params *c,
                        int relu)
{
    graph_init(d, NN__CONV_PASS_FWD);
    d->t[NN__CONV_UID_X] = *x;
    d->t[NN__CONV_UID_W] = *w;
    if (b) d->t[NN__CONV_UID_B] = *b;
    d->t[NN__CONV_UID_Y] = *y;
    d->conv = *c;
    d->relu = relu;
}

void nn__conv_graph_bwd_data(struct nn__conv_graph *d, const struct nn__cudnn_tensor *dy,
                             const struct nn__cudnn_tensor *w, const struct nn__cudnn_tensor *dx,
                             const struct nn__conv_graph_params *c)
{
    graph_init(d, NN__CONV_PASS_BWD_DATA);
    d->t[NN__CONV_UID_DY] = *dy;
    d->t[NN__CONV_UID_W] = *w;
    d->t[NN__CONV_UID_DX] = *dx;
    d->conv = *c;
}

void nn__conv_graph_bwd_filter(struct nn__conv_graph *d, const struct nn__cudnn_tensor *x,
                               const struct nn__cudnn_tensor *dy, const struct nn__cudnn_tensor *dw,
                               const struct nn__conv_graph_params *c)
{
    graph_init(d, NN__CONV_PASS_BWD_FILTER);
    d->t[NN__CONV_UID_X] = *x;
    d->t[NN__CONV_UID_DY] = *dy;
    d->t[NN__CONV_UID_DW] = *dw;
    d->conv = *c;
}

static const char *uid_name(int uid)
{
    static const char *const names[NN__CONV_UID_END] = {"?",  "x",  "w",  "y", "b",
                                                        "dx", "dw", "dy", "db"};
    return uid > 0 && uid < NN__CONV_UID_END ? names[uid] : "?";
}

static nn_status check_spatial(struct nn_ctx *ctx, const char *what, int rank, const int64_t *a,
                               int64_t min)
{
    for (int i = 0; i < rank; i++)
        if (a[i] < min)
            return NN__FAIL(ctx, NN_E_INVALID_ARG, "graph_cudnn: %s[%d] must be >= %lld, got %lld",
                            what, i, (long long)min, (long long)a[i]);
    return NN_OK;
}

nn_status nn__conv_graph_check(struct nn_ctx *ctx, const struct nn__conv_graph *d)
{
    if (!op_name(d->op))
        return NN__FAIL(ctx, NN_E_INVALID_ARG, "graph_cudnn: unknown graph kind %d", (int)d->op);
    unsigned uses = op_uses(d->op, 0), optional = op_uses(d->op, 1);
    int srank = d->conv.spatial_rank;
    if (srank < 1 || srank > NN__CONV_GRAPH_SPATIAL_MAX)
        return NN__FAIL(ctx, NN_E_INVALID_ARG, "graph_cudnn: spatial rank must be 1..%d, got %d",
                        NN__CONV_GRAPH_SPATIAL_MAX, srank);
    nn_dtype dtype = 0;
    for (int u = 1; u < NN__CONV_UID_END; u++) {
        const struct nn__cudnn_tensor *t = &d->t[u];
        unsigned bit = NN__CONV_UID_BIT(u);
        int used = (uses & bit) || ((optional & bit) && t->rank > 0);
        if (!used) {
            if (t->rank != 0)
                return NN__FAIL(ctx, NN_E_INVALID_ARG,
                                "graph_cudnn: tensor %s is not used by this graph kind, but has "
                                "rank %d (expected 0)",
                                uid_name(u), t->rank);
            continue;
        }
        int want = 2 + srank;
        if (t->rank < 3 || t->rank > 5 || t->rank != want)
            return NN__FAIL(
                ctx, NN_E_INVALID_ARG,
                "graph_cudnn: tensor %s must have rank %d (N, C and %d spatial), got %d",
                uid_name(u), want < 3 ? 3 : want, srank, t->rank);
        if (nn__cudnn_data_type(t->dtype) == (cudnnDataType_t)-1)
            return NN__FAIL(ctx, NN_E_DTYPE, "graph_cudnn: tensor %s has invalid dtype %d",
                            uid_name(u), (int)t->dtype);
        if (dtype && t->dtype != dtype)
            return NN__FAIL(ctx, NN_E_DTYPE, "graph_cudnn: tensor %s is %s, other tensors are %s",
                            uid_name(u), nn_dtype_name(t->dtype), nn_dtype_name(dtype));
        dtype = t->dtype;
        if (t->alignment < 1 || (t->alignment & (t->alignment - 1)))
            return NN__FAIL(ctx, NN_E_INVALID_ARG,
                            "graph_cudnn: tensor %s alignment must be a power of two, got %lld",
                            uid_name(u), (long long)t->alignment);
        NN__TRY(check_spatial(ctx, "dims", t->rank, t->dims, 1));
        NN__TRY(check_spatial(ctx, "strides", t->rank, t->strides, 1));
        /* The key holds a tensor's layout, not its strides (conv_plan_key.h). */
        int64_t packed[NN_MAX_RANK];
        nn__conv_layout_strides(t->rank, t->dims, nn__conv_key_layout(t->rank, t->dims, t->strides),
                                packed);
        if (memcmp(packed, t->strides, (size_t)t->rank * sizeof *packed))
            return NN__FAIL(ctx, NN_E_INVALID_ARG,
                            "graph_cudnn: tensor %s must be packed in NCHW order or channels-last",
                            uid_name(u));
    }
    nn_dtype compute = d->conv.compute;
    if (compute != NN_DTYPE_F32 && compute != NN_DTYPE_F64)
        return NN__FAIL(ctx, NN_E_DTYPE, "graph_cudnn: compute type must be f32 or f64, got %s",
                        nn_dtype_name(compute));
    const struct nn__conv_graph_params *c = &d->conv;
    NN__TRY(check_spatial(ctx, "conv.stride", srank, c->stride, 1));
    NN__TRY(check_spatial(ctx, "conv.dilation", srank, c->dilation, 1));
    NN__TRY(check_spatial(ctx, "conv.pre_pad", srank, c->pre_pad, 0));
    NN__TRY(check_spatial(ctx, "conv.post_pad", srank, c->post_pad, 0));
    return NN_OK;
}

static void shift_in(int64_t *a, int64_t lead)
{
    a[1] = a[0];
    a[0] = lead;
}

void nn__conv_graph_params_to_2d(struct nn__conv_graph_params *c)
{
    if (c->spatial_rank != 1) return;
    shift_in(c->stride, 1);
    shift_in(c->dilation, 1);
    shift_in(c->pre_pad, 0);
    shift_in(c->post_pad, 0);
    c->spatial_rank = 2;
}

/* ---------------------------------------------------------------------------------------------
 * Keys
 */

void nn__conv_key_begin(const struct nn_ctx *ctx, struct nn__conv_key *k, enum nn__conv_pass op,
                        const struct nn__conv_graph_params *c, int64_t groups, double alpha,
                        double beta)
{
    memset(k, 0, sizeof *k);
    k->pass = (int32_t)op;
    k->spatial_rank = c->spatial_rank;
    k->mode = c->mode;
    k->groups = groups;
    for (int i = 0; i < c->spatial_rank && i < NN__CONV_KEY_SPATIAL_MAX; i++) {
        k->stride[i] = c->stride[i];
        k->dilation[i] = c->dilation[i];
        k->pad_lo[i] = c->pre_pad[i];
        k->pad_hi[i] = c->post_pad[i];
    }
    k->alpha = alpha;
    k->beta = beta;
    nn__cache_settings_fill(ctx, &k->s);
}

void nn__conv_plan_key_of(const struct nn_ctx *ctx, const struct nn__conv_graph *d, int32_t flags,
                          struct nn__conv_key *k)
{
    /* cuDNN reads the groups off the filter's channel dim; the key says it outright. */
    const struct nn__cudnn_tensor *x =
        d->t[NN__CONV_UID_X].rank ? &d->t[NN__CONV_UID_X] : &d->t[NN__CONV_UID_DX];
    const struct nn__cudnn_tensor *w =
        d->t[NN__CONV_UID_W].rank ? &d->t[NN__CONV_UID_W] : &d->t[NN__CONV_UID_DW];
    int64_t groups = x->rank && w->rank && w->dims[1] ? x->dims[1] / w->dims[1] : 1;
    nn__conv_key_begin(ctx, k, d->op, &d->conv, groups, d->alpha, d->beta);
    k->relu = d->relu ? 1 : 0;
    k->flags = flags;
    for (int u = 1; u < NN__CONV_UID_END; u++) {
        const struct nn__cudnn_tensor *t = &d->t[u];
        int slot = nn__conv_slot_of_uid(d->op, u);
        if (!t->rank || slot < 0) continue;
        k->dtype = t->dtype;
        nn__conv_key_tensor_set(&k->t[slot], t->rank, t->dims, t->strides, t->alignment);
    }
}

int nn__conv_graph_of_key(const struct nn__conv_key *k, struct nn__conv_graph *d)
{
    memset(d, 0, sizeof *d);
    if (k->pass < NN__CONV_PASS_FWD || k->pass > NN__CONV_PASS_BWD_FILTER) return -1;
    d->op = (enum nn__conv_pass)k->pass;
    int rank = k->spatial_rank + 2;
    for (int i = 0; i < NN__CONV_SLOTS; i++) {
        const struct nn__conv_key_tensor *kt = &k->t[i];
        int u = nn__conv_uid_of_slot(d->op, i);
        if (!kt->align || !u || rank > NN__CONV_KEY_RANK_MAX) continue;
        struct nn__cudnn_tensor *t = &d->t[u];
        t->rank = rank;
        t->dtype = (nn_dtype)k->dtype;
        t->alignment = kt->align;
        memcpy(t->dims, kt->dims, (size_t)rank * sizeof *t->dims);
        nn__conv_key_strides(kt, rank, t->strides);
    }
    d->conv.spatial_rank = k->spatial_rank;
    for (int i = 0; i < k->spatial_rank && i < NN__CONV_KEY_SPATIAL_MAX; i++) {
        d->conv.stride[i] = k->stride[i];
        d->conv.dilation[i] = k->dilation[i];
        d->conv.pre_pad[i] = k->pad_lo[i];
        d->conv.post_pad[i] = k->pad_hi[i];
    }
    d->conv.mode = (enum nn__conv_graph_mode)k->mode;
    d->conv.compute = k->dtype == NN_DTYPE_F64 ? NN_DTYPE_F64 : NN_DTYPE_F32;
    d->relu = k->relu != 0;
    d->alpha = k->alpha;
    d->beta = k->beta;
    if (k->flags & NN__CONV_KEY_PLAIN) {
        memset(&d->t[NN__CONV_UID_B], 0, sizeof d->t[NN__CONV_UID_B]);
        d->relu = 0;
    }
    return 0;
}

/* ---------------------------------------------------------------------------------------------
 * Graphs
 */

static nn_status make_conv(struct nn_ctx *ctx, struct nn__cudnn_graph *g,
                           const struct nn__conv_graph_params *c, cudnnBackendDescriptor_t *out)
{
    cudnnBackendDescriptor_t d;
    NN__TRY(nn__cudnn_graph_new_desc(ctx, g, CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR, &d));
    cudnnDataType_t ct = nn__cudnn_data_type(c->compute);
    cudnnConvolutionMode_t mode =
        c->mode == NN__CONV_GRAPH_CONVOLUTION ? CUDNN_CONVOLUTION : CUDNN_CROSS_CORRELATION;
    int64_t n = c->spatial_rank;
    NN__TRY(SET(ctx, d, CUDNN_ATTR_CONVOLUTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &ct));
    NN__TRY(SET(ctx, d, CUDNN_ATTR_CONVOLUTION_CONV_MODE, CUDNN_TYPE_CONVOLUTION_MODE, 1, &mode));
    NN__TRY(SET(ctx, d, CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS, CUDNN_TYPE_INT64, 1, &n));
    NN__TRY(SET(ctx, d, CUDNN_ATTR_CONVOLUTION_DILATIONS, CUDNN_TYPE_INT64, n, c->dilation));
    NN__TRY(SET(ctx, d, CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES, CUDNN_TYPE_INT64, n, c->stride));
    NN__TRY(SET(ctx, d, CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS, CUDNN_TYPE_INT64, n, c->pre_pad));
    NN__TRY(SET(ctx, d, CUDNN_ATTR_CONVOLUTION_POST_PADDINGS, CUDNN_TYPE_INT64, n, c->post_pad));
    NN__TRY(nn__cudnn_BackendFinalize(ctx, d));
    *out = d;
    return NN_OK;
}

/* One convolution operation. Its three tensor attributes and alpha/beta differ by direction. */
struct conv_op_attrs {
    cudnnBackendDescriptorType_t type;
    cudnnBackendAttributeName_t a, b, out, conv, alpha, beta;
};

static const struct conv_op_attrs conv_fwd_attrs = {
    CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR,
    CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X,
    CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W,
    CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y,
    CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC,
    CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA,
    CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA};
static const struct conv_op_attrs conv_bwd_data_attrs = {
    CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_DATA_DESCRIPTOR,
    CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DY,
    CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_W,
    CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DX,
    CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_CONV_DESC,
    CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_ALPHA,
    CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_BETA};
static const struct conv_op_attrs conv_bwd_filter_attrs = {
    CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_FILTER_DESCRIPTOR,
    CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_X,
    CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DY,
    CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DW,
    CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_CONV_DESC,
    CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_ALPHA,
    CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_BETA};

static nn_status make_conv_op(struct nn_ctx *ctx, struct nn__cudnn_graph *g,
                              const struct conv_op_attrs *at, cudnnBackendDescriptor_t a,
                              cudnnBackendDescriptor_t b, cudnnBackendDescriptor_t out,
                              cudnnBackendDescriptor_t conv, nn_dtype compute, double alpha,
                              double beta, cudnnBackendDescriptor_t *op)
{
    cudnnBackendDescriptor_t d;
    NN__TRY(nn__cudnn_graph_new_desc(ctx, g, at->type, &d));
    NN__TRY(SET(ctx, d, at->a, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &a));
    NN__TRY(SET(ctx, d, at->b, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &b));
    NN__TRY(SET(ctx, d, at->out, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &out));
    NN__TRY(SET(ctx, d, at->conv, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &conv));
    NN__TRY(nn__cudnn_set_scalar(ctx, d, at->alpha, compute, alpha));
    NN__TRY(nn__cudnn_set_scalar(ctx, d, at->beta, compute, beta));
    NN__TRY(nn__cudnn_BackendFinalize(ctx, d));
    *op = d;
    return NN_OK;
}

/* The ops of each kind, on tensors already mapped to 2-D where needed. */
static nn_status build_ops(struct nn_ctx *ctx, struct nn__cudnn_graph *g,
                           const struct nn__conv_graph *m, cudnnBackendDescriptor_t *ops,
                           int *n_ops)
{
    cudnnBackendDescriptor_t t[NN__CONV_UID_END] = {0};
    for (int u = 1; u < NN__CONV_UID_END; u++)
        if (m->t[u].rank) NN__TRY(nn__cudnn_graph_tensor(ctx, g, &m->t[u], u, &t[u]));
    *n_ops = 0;
    cudnnBackendDescriptor_t cd;
    switch (m->op) {
    case NN__CONV_PASS_FWD: {
        nn_dtype ct = m->conv.compute;
        int fused = m->t[NN__CONV_UID_B].rank > 0 || m->relu;
        cudnnBackendDescriptor_t conv_out = t[NN__CONV_UID_Y];
        if (fused)
            NN__TRY(nn__cudnn_graph_virtual(ctx, g, &m->t[NN__CONV_UID_Y], ct,
                                            NN__CONV_UID_VIRTUAL_CONV, &conv_out));
        NN__TRY(make_conv(ctx, g, &m->conv, &cd));
        NN__TRY(make_conv_op(ctx, g, &conv_fwd_attrs, t[NN__CONV_UID_X], t[NN__CONV_UID_W],
                             conv_out, cd, ct, fused ? 1.0 : m->alpha, fused ? 0.0 : m->beta,
                             &ops[(*n_ops)++]));
        cudnnBackendDescriptor_t cur = conv_out;
        if (m->t[NN__CONV_UID_B].rank) {
            cudnnBackendDescriptor_t out = t[NN__CONV_UID_Y];
            if (m->relu)
                NN__TRY(nn__cudnn_graph_virtual(ctx, g, &m->t[NN__CONV_UID_Y], ct,
                                                NN__CONV_UID_VIRTUAL_BIAS, &out));
            NN__TRY(nn__cudnn_graph_pointwise(ctx, g, CUDNN_POINTWISE_ADD, ct, cur,
                                              t[NN__CONV_UID_B], out, &ops[(*n_ops)++]));
            cur = out;
        }
        if (m->relu)
            NN__TRY(nn__cudnn_graph_pointwise(ctx, g, CUDNN_POINTWISE_RELU_FWD, ct, cur, NULL,
                                              t[NN__CONV_UID_Y], &ops[(*n_ops)++]));
        return NN_OK;
    }
    case NN__CONV_PASS_BWD_DATA:
        NN__TRY(make_conv(ctx, g, &m->conv, &cd));
        return make_conv_op(ctx, g, &conv_bwd_data_attrs, t[NN__CONV_UID_DY], t[NN__CONV_UID_W],
                            t[NN__CONV_UID_DX], cd, m->conv.compute, m->alpha, m->beta,
                            &ops[(*n_ops)++]);
    case NN__CONV_PASS_BWD_FILTER:
        NN__TRY(make_conv(ctx, g, &m->conv, &cd));
        return make_conv_op(ctx, g, &conv_bwd_filter_attrs, t[NN__CONV_UID_X], t[NN__CONV_UID_DY],
                            t[NN__CONV_UID_DW], cd, m->conv.compute, m->alpha, m->beta,
                            &ops[(*n_ops)++]);
    }
    return NN__FAIL(ctx, NN_E_INTERNAL, "graph_cudnn: unknown graph kind %d", (int)m->op);
}

/* The description with tensors and parameters as cuDNN gets them: 1-D as 2-D. */
static nn_status map_to_2d(const struct nn__conv_graph *d, struct nn__conv_graph *m)
{
    *m = *d;
    if (d->conv.spatial_rank != 1) return NN_OK;
    for (int u = 1; u < NN__CONV_UID_END; u++)
        if (m->t[u].rank) NN__TRY(nn__cudnn_tensor_insert_unit_dim(&m->t[u], 2));
    nn__conv_graph_params_to_2d(&m->conv);
    return NN_OK;
}

/* ---------------------------------------------------------------------------------------------
 * Text and read-back
 */

static void put_conv(struct nn__text *o, const struct nn__conv_graph_params *c)
{
    int n = c->spatial_rank;
    if (n < 1 || n > NN__CONV_GRAPH_SPATIAL_MAX) {
        nn__text_add(o, "conv(invalid spatial rank %d)", n);
        return;
    }
    nn__text_add(o, "conv%dd stride=", n);
    nn__text_add_list(o, c->stride, n, "x");
    nn__text_add(o, " dilation=");
    nn__text_add_list(o, c->dilation, n, "x");
    nn__text_add(o, " pad=");
    nn__text_add_list(o, c->pre_pad, n, "x");
    nn__text_add(o, "/");
    nn__text_add_list(o, c->post_pad, n, "x");
    nn__text_add(o, " %s acc=%s", c->mode == NN__CONV_GRAPH_CONVOLUTION ? "conv" : "xcorr",
                 nn_dtype_name(c->compute));
}

const char *nn__conv_graph_describe_params(char *buf, size_t cap,
                                           const struct nn__conv_graph_params *c)
{
    struct nn__text o = nn__text_start(buf, cap);
    put_conv(&o, c);
    return buf;
}

const char *nn__conv_graph_describe(char *buf, size_t cap, const struct nn__conv_graph *d)
{
    struct nn__text o = nn__text_start(buf, cap);
    const char *name = op_name(d->op);
    nn__text_add(&o, "%s", name ? name : "?");
    char t[NN__CUDNN_DESCRIBE_MAX];
    for (int u = 1; u < NN__CONV_UID_END; u++) {
        if (d->t[u].rank <= 0) continue;
        nn__text_add(&o, " %s", nn__cudnn_describe_tensor(t, sizeof t, uid_name(u), &d->t[u]));
    }
    if (name) {
        nn__text_add(&o, " ");
        put_conv(&o, &d->conv);
    }
    if (d->relu) nn__text_add(&o, " +relu");
    if (d->alpha != 1.0 || d->beta != 0.0) nn__text_add(&o, " alpha=%g beta=%g", d->alpha, d->beta);
    return buf;
}

#define GET(ctx, d, attr, type, req, count, ptr)                                                   \
    nn__cudnn_BackendGetAttribute((ctx), (d), (attr), (type), (int64_t)(req), (count), (ptr))

nn_status nn__conv_graph_read_params(struct nn_ctx *ctx, cudnnBackendDescriptor_t d,
                                     struct nn__conv_graph_params *out)
{
    struct nn__conv_graph_params c = {0};
    cudnnDataType_t dt;
    cudnnConvolutionMode_t mode;
    int64_t n, rank;
    NN__TRY(GET(ctx, d, CUDNN_ATTR_CONVOLUTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &n, &dt));
    /* cuDNN 9.19 answers a get of CONV_MODE as CUDNN_TYPE_CONVOLUTION_MODE with
     * BAD_PARAM_ATTRIBUTE_TYPE but accepts CUDNN_TYPE_DATA_TYPE (both are 4-byte enums): try the
     * documented type unrecorded, then the one that works, checked. */
    if (cudnnBackendGetAttribute(d, CUDNN_ATTR_CONVOLUTION_CONV_MODE, CUDNN_TYPE_CONVOLUTION_MODE,
                                 1, &n, &mode) != CUDNN_STATUS_SUCCESS)
        NN__TRY(GET(ctx, d, CUDNN_ATTR_CONVOLUTION_CONV_MODE, CUDNN_TYPE_DATA_TYPE, 1, &n, &mode));
    NN__TRY(GET(ctx, d, CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS, CUDNN_TYPE_INT64, 1, &n, &rank));
    if (rank < 1 || rank > NN__CONV_GRAPH_SPATIAL_MAX)
        return NN__FAIL(ctx, NN_E_OVERFLOW, "read_conv: spatial rank %lld outside 1..%d",
                        (long long)rank, NN__CONV_GRAPH_SPATIAL_MAX);
    NN__TRY(GET(ctx, d, CUDNN_ATTR_CONVOLUTION_DILATIONS, CUDNN_TYPE_INT64, rank, &n, c.dilation));
    NN__TRY(
        GET(ctx, d, CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES, CUDNN_TYPE_INT64, rank, &n, c.stride));
    NN__TRY(
        GET(ctx, d, CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS, CUDNN_TYPE_INT64, rank, &n, c.pre_pad));
    NN__TRY(
        GET(ctx, d, CUDNN_ATTR_CONVOLUTION_POST_PADDINGS, CUDNN_TYPE_INT64, rank, &n, c.post_pad));
    c.spatial_rank = (int)rank;
    c.mode = mode == CUDNN_CONVOLUTION ? NN__CONV_GRAPH_CONVOLUTION : NN__CONV_GRAPH_XCORR;
    c.compute = nn__cudnn_nn_dtype(dt);
    *out = c;
    return NN_OK;
}

/* ---------------------------------------------------------------------------------------------
 * The kinds
 */

const struct nn__cache_kind nn__conv_plan_kind = NN__CONV_PLAN_KIND_INIT(nn__cudnn_plan_destroy);

static nn_status kind_build(struct nn_ctx *ctx, const void *key, struct nn__cudnn_graph *g,
                            cudnnBackendDescriptor_t *ops, int *n_ops)
{
    struct nn__conv_graph d, m;
    if (nn__conv_graph_of_key(key, &d) != 0)
        return NN__FAIL(ctx, NN_E_INVALID_ARG, "graph_cudnn: the key's pass %d has no graph",
                        (int)((const struct nn__conv_key *)key)->pass);
    NN__TRY(nn__conv_graph_check(ctx, &d));
    NN__TRY(map_to_2d(&d, &m));
    return build_ops(ctx, g, &m, ops, n_ops);
}

static nn_dtype kind_data_dtype(const void *key)
{
    return (nn_dtype)((const struct nn__conv_key *)key)->dtype;
}

static void kind_settings(const void *key, struct nn__cache_settings *s)
{
    *s = ((const struct nn__conv_key *)key)->s;
}

static const char *kind_describe(char *buf, size_t cap, const void *key)
{
    struct nn__conv_graph d;
    nn__conv_graph_of_key(key, &d);
    return nn__conv_graph_describe(buf, cap, &d);
}

/* Keys of the cache have a pass (nn__conv_key_invalid() checks those read from files); this refuses
 * others before any cuDNN call. */
static int kind_has_graph(const void *key)
{
    int32_t pass = ((const struct nn__conv_key *)key)->pass;
    return pass >= NN__CONV_PASS_FWD && pass <= NN__CONV_PASS_BWD_FILTER;
}

const struct nn__graph_kind nn__conv_graph_kind = {
    &nn__conv_plan_kind, kind_build, kind_has_graph, kind_data_dtype, kind_settings, kind_describe,
};

/* Convolution as cuDNN graphs: the graph description (a value struct), its plan-cache key, the
 * operation graphs built from it (forward with fused bias/relu, backward data, backward filter),
 * and conv's entries in the cuDNN layer's tables: the cache kind of conv plans and the graph kind
 * whose build callback turns a key into a graph (graph_cudnn.h), which the context assembly lists.
 *
 * The cuDNN layer knows none of this: it asks the graph kind to build a key's graph (on a miss, on
 * the background builder, when prebuilding a plan file's records) and does the rest (heuristics,
 * autotune, plans, execution) itself. Compiled only with cuDNN (NN_HAVE_CUDNN). */
#ifndef NN_CONV_CONV_GRAPH_CUDNN_H
#define NN_CONV_CONV_GRAPH_CUDNN_H

#include <stddef.h>
#include <stdint.h>

#include "core/cuda_load.h"

#include "conv/conv_plan_key.h"
#include "cudnn/cache_kinds.h"
#include "cudnn/graph_cudnn.h"
#include "cudnn/plan_cache.h"
#include "nnprim/tensor.h"

struct nn_ctx;

#define NN__CONV_GRAPH_SPATIAL_MAX 3 /* 1-D (as 2-D), 2-D and 3-D */

/* Convolution mode: frameworks mean cross-correlation by "convolution". */
enum nn__conv_graph_mode { NN__CONV_GRAPH_XCORR = 0, NN__CONV_GRAPH_CONVOLUTION = 1 };

struct nn__conv_graph_params {
    int spatial_rank; /* 1..3; 1-D runs as 2-D with a unit height */
    int64_t stride[NN__CONV_GRAPH_SPATIAL_MAX];
    int64_t dilation[NN__CONV_GRAPH_SPATIAL_MAX];
    int64_t pre_pad[NN__CONV_GRAPH_SPATIAL_MAX];
    int64_t post_pad[NN__CONV_GRAPH_SPATIAL_MAX];
    enum nn__conv_graph_mode mode;
    nn_dtype compute; /* accumulation type: F32 for f32/f16/bf16 data, F64 for f64 */
};

/* What a graph computes is the key's pass (enum nn__conv_pass, conv_plan_key.h). No pooling
 * graphs: cuDNN 9.14's resample backward refused average pooling without x (BAD_PARAM) and crashed
 * on max pooling on the H200, so src/pool uses the legacy calls; the bias gradient is the legacy
 * call (or the bf16 ones trick), never a reduction graph. */

/* The tensors' uids (enum nn__conv_uid) and which fills which key slot by pass are in
 * conv_plan_key.h. */

#define NN__CONV_UID_BIT(u) (1u << (u))

/* The graph as plain values: what was asked for (also what nn__conv_graph_describe prints).
 * Tensors are kept as given (before the 1-D to 2-D mapping). Unused tensors have rank 0. */
struct nn__conv_graph {
    enum nn__conv_pass op;
    struct nn__cudnn_tensor t[NN__CONV_UID_END]; /* indexed by enum nn__conv_uid */
    struct nn__conv_graph_params conv;
    int relu;           /* forward: fused relu */
    double alpha, beta; /* blend: out = alpha * result + beta * out */
};

/* Convenience builders: fill a graph for one op (alpha 1, beta 0; relu off). b may be NULL (no
 * fused bias). */
void nn__conv_graph_fwd(struct nn__conv_graph *d, const struct nn__cudnn_tensor *x,
                        const struct nn__cudnn_tensor *w, const struct nn__cudnn_tensor *b,
                        const struct nn__cudnn_tensor *y, const struct nn__conv_graph_params *c,
                        int relu);
void nn__conv_graph_bwd_data(struct nn__conv_graph *d, const struct nn__cudnn_tensor *dy,
                             const struct nn__cudnn_tensor *w, const struct nn__cudnn_tensor *dx,
                             const struct nn__conv_graph_params *c);
void nn__conv_graph_bwd_filter(struct nn__conv_graph *d, const struct nn__cudnn_tensor *x,
                               const struct nn__cudnn_tensor *dy, const struct nn__cudnn_tensor *dw,
                               const struct nn__conv_graph_params *c);

/* Check d before a graph is built from it: the op, ranks, matching dtypes, packed layouts (NCHW
 * or channels-last), spatial ranks, conv parameters. ctx may be NULL. Returns NN_OK;
 * NN_E_INVALID_ARG or NN_E_DTYPE (the message names the field). */
nn_status nn__conv_graph_check(struct nn_ctx *ctx, const struct nn__conv_graph *d);

/* 1-D parameters as 2-D: a leading spatial dimension with stride 1, dilation 1, no padding.
 * Rank 2 and 3 are left alone. */
void nn__conv_graph_params_to_2d(struct nn__conv_graph_params *c);

/* ---------------------------------------------------------------------------------------------
 * Keys
 */

/* Start key k (zeroed first) of a graph of op (the graph ops are the key's passes) with the conv
 * parameters c, groups, alpha, beta and the context's settings (math mode, determinism,
 * workspace cap); the caller sets dtype, the tensors (nn__conv_key_tensor_set()), relu and flags.
 * The one place a key's common part is made, for the backend's keys and nn__conv_plan_key_of(). */
void nn__conv_key_begin(const struct nn_ctx *ctx, struct nn__conv_key *k, enum nn__conv_pass op,
                        const struct nn__conv_graph_params *c, int64_t groups, double alpha,
                        double beta);

/* The plan-cache key of graph d under the context's settings: its tensors by slot (dims, layout,
 * alignment), the conv parameters, groups (from x's and w's channels), the fused relu, alpha and
 * beta, and the caller's flags (NN__CONV_KEY_PLAIN or 0). d must pass nn__conv_graph_check()
 * (tensors of rank 3..5, packed). Only tests call it: the graph layer's tests describe graphs as
 * struct nn__conv_graph, and check nn__conv_graph_of_key() (which builds and prebuilds every
 * plan) against it. The backend makes its keys straight from the call's views, with no graph
 * struct on the hit path, through the same nn__conv_key_begin(), slot table and
 * nn__conv_key_tensor_set(). */
void nn__conv_plan_key_of(const struct nn_ctx *ctx, const struct nn__conv_graph *d, int32_t flags,
                          struct nn__conv_key *k);

/* The graph a key was made from, the inverse of nn__conv_plan_key_of() (with a key flagged
 * NN__CONV_KEY_PLAIN, the graph without bias and relu, which the plan was built for); strides
 * are the canonical ones of each tensor's layout. Returns 0; -1 if the key's pass is none.
 * Pure: tested on the CPU. */
int nn__conv_graph_of_key(const struct nn__conv_key *k, struct nn__conv_graph *d);

/* ---------------------------------------------------------------------------------------------
 * Text and read-back
 */

/* "conv2d stride=1x1 dilation=1x1 pad=0x0/0x0 xcorr acc=f32" */
const char *nn__conv_graph_describe_params(char *buf, size_t cap,
                                           const struct nn__conv_graph_params *c);

/* The whole graph: "conv_fwd x:... w:... b:... y:... conv2d ... +relu alpha=1 beta=0" */
const char *nn__conv_graph_describe(char *buf, size_t cap, const struct nn__conv_graph *d);

/* A CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR read back (spatial_rank as cuDNN holds it: 2 for a 1-D
 * conv). Returns NN_OK; NN_E_OVERFLOW (a spatial rank outside 1..3); NN_E_CUDNN. */
nn_status nn__conv_graph_read_params(struct nn_ctx *ctx, cudnnBackendDescriptor_t d,
                                     struct nn__conv_graph_params *out);

/* ---------------------------------------------------------------------------------------------
 * Conv's entries in the cuDNN layer's tables (listed by src/context.c)
 */

/* The cache kind of conv plans: struct nn__conv_key keys (conv_plan_key.h, kind 7), graph-plan
 * records (NN__CONV_PLAN_KIND_INIT with nn__cudnn_plan_destroy). */
extern const struct nn__cache_kind nn__conv_plan_kind;

/* The graph kind of conv plans: builds the graph of a struct nn__conv_key (all three passes). */
extern const struct nn__graph_kind nn__conv_graph_kind;

/* The cache kind of the tensors of ones that bf16 bias gradients sum through (conv_cudnn.c),
 * kept per element count: device memory of this process, NN__CACHE_KIND_NOT_PERSISTED (id
 * NN__CONV_ONES_KIND_ID). */
extern const struct nn__cache_kind nn__conv_ones_kind;

#endif

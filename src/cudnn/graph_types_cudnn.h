/* The graph layer's value structs (graph_cudnn.h builds graphs and plans from them;
 * describe_cudnn.h prints and reads them back): tensors, convolution and pooling parameters, graph
 * descriptions, tensor uids and engine choices. Plain values, no cuDNN objects. */
#ifndef NN_CUDNN_GRAPH_TYPES_CUDNN_H
#define NN_CUDNN_GRAPH_TYPES_CUDNN_H

#include <stdint.h>

#include "nnprim/tensor.h"

#define NN__CUDNN_SPATIAL_MAX 3 /* 1-D (as 2-D), 2-D and 3-D */

/* ---------------------------------------------------------------------------------------------
 * Value structs
 */

/* A tensor as cuDNN sees it. rank is 2 + spatial rank (N, C, spatial...) or what the op needs;
 * strides are in elements; alignment is the byte alignment of the data pointer (16 for pool
 * blocks; a smaller power of two for views into them). */
struct nn__cudnn_tensor {
    nn_dtype dtype;
    int rank;
    int64_t dims[NN_MAX_RANK];
    int64_t strides[NN_MAX_RANK];
    int64_t alignment;
};

/* Convolution mode: frameworks mean cross-correlation by "convolution". */
enum nn__cudnn_conv_mode { NN__CUDNN_CROSS_CORRELATION = 0, NN__CUDNN_CONVOLUTION = 1 };

struct nn__cudnn_conv {
    int spatial_rank; /* 1..3; 1-D runs as 2-D with a unit height */
    int64_t stride[NN__CUDNN_SPATIAL_MAX];
    int64_t dilation[NN__CUDNN_SPATIAL_MAX];
    int64_t pre_pad[NN__CUDNN_SPATIAL_MAX];
    int64_t post_pad[NN__CUDNN_SPATIAL_MAX];
    enum nn__cudnn_conv_mode mode;
    nn_dtype compute; /* accumulation type: F32 for f32/f16/bf16 data, F64 for f64 */
};

/* What a graph computes. */
enum nn__cudnn_graph_kind {
    NN__CUDNN_GRAPH_CONV_FWD = 1,       /* y = conv(x, w) [+ b] [relu] */
    NN__CUDNN_GRAPH_CONV_BWD_DATA = 2,  /* dx = alpha conv_bwd_data(dy, w) + beta dx */
    NN__CUDNN_GRAPH_CONV_BWD_FILTER = 3 /* dw = alpha conv_bwd_filter(x, dy) + beta dw */
    /* No pooling graphs: cuDNN 9.14's resample backward refused average pooling without x
     * (BAD_PARAM) and crashed on max pooling on the H200, so src/pool uses the legacy calls; the
     * bias gradient is the legacy call (or the bf16 ones trick), never a reduction graph. */
};

/* Unique ids of a graph's tensors: the variant pack's keys, and the index into
 * struct nn__cudnn_args. Fixed by role so records and JSON plans stay valid across runs. */
enum nn__cudnn_uid {
    NN__UID_X = 1,
    NN__UID_W = 2,
    NN__UID_Y = 3,
    NN__UID_B = 4,
    NN__UID_DX = 5,
    NN__UID_DW = 6,
    NN__UID_DY = 7,
    NN__UID_DB = 8,
    NN__UID_IO_END = 9,         /* first id that is not a graph input or output */
    NN__UID_VIRTUAL_CONV = 101, /* conv output before the fused bias/relu */
    NN__UID_VIRTUAL_BIAS = 102  /* bias-add output before relu */
};

/* The one table of graph kinds: each kind's name and the tensors it takes (bit 1 << uid). Looked
 * up by value, never by range, so a new kind is described here or nowhere. */
struct nn__cudnn_graph_kind_info {
    enum nn__cudnn_graph_kind kind;
    const char *name;  /* as describe_cudnn prints it */
    unsigned uses;     /* tensors the kind must have */
    unsigned optional; /* tensors it may have (conv forward's fused bias) */
};

#define NN__UID_BIT(u) (1u << (u))

/* The kind's entry, or NULL for a value that is no kind. */
static inline const struct nn__cudnn_graph_kind_info *
nn__cudnn_graph_kind_info(enum nn__cudnn_graph_kind k)
{
    static const struct nn__cudnn_graph_kind_info table[] = {
        {NN__CUDNN_GRAPH_CONV_FWD, "conv_fwd",
         NN__UID_BIT(NN__UID_X) | NN__UID_BIT(NN__UID_W) | NN__UID_BIT(NN__UID_Y),
         NN__UID_BIT(NN__UID_B)},
        {NN__CUDNN_GRAPH_CONV_BWD_DATA, "conv_bwd_data",
         NN__UID_BIT(NN__UID_DY) | NN__UID_BIT(NN__UID_W) | NN__UID_BIT(NN__UID_DX), 0},
        {NN__CUDNN_GRAPH_CONV_BWD_FILTER, "conv_bwd_filter",
         NN__UID_BIT(NN__UID_X) | NN__UID_BIT(NN__UID_DY) | NN__UID_BIT(NN__UID_DW), 0},
    };
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
        if (table[i].kind == k) return &table[i];
    return NULL;
}

/* Data pointers of one execution, indexed by enum nn__cudnn_uid; unused entries are ignored. */
struct nn__cudnn_args {
    void *p[NN__UID_IO_END];
};

/* The graph as plain values: what was asked for (also what describe_cudnn prints). Tensors are
 * kept as given (before the 1-D to 2-D mapping). Unused tensors have rank 0. */
struct nn__cudnn_graph_desc {
    enum nn__cudnn_graph_kind kind;
    struct nn__cudnn_tensor t[NN__UID_IO_END]; /* indexed by enum nn__cudnn_uid */
    struct nn__cudnn_conv conv;
    int relu;           /* conv forward: fused relu */
    double alpha, beta; /* blend: out = alpha * result + beta * out */
};

/* An engine and its knob choices: all that is needed to rebuild a plan for the same graph on
 * the same cuDNN and GPU. A plan-cache record holds two (plan_cache.h: tuned and quick). */
#define NN__ENGINE_KNOBS_MAX 64
struct nn__engine_knob {
    int64_t type;  /* cudnnBackendKnobType_t */
    int64_t value; /* the choice */
};
struct nn__engine_choice {
    int64_t engine; /* CUDNN_ATTR_ENGINE_GLOBAL_INDEX */
    int32_t knob_count;
    struct nn__engine_knob knobs[NN__ENGINE_KNOBS_MAX];
};

#endif

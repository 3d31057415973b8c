/* The graph layer's value structs (graph_cudnn.h builds graphs and plans from them;
 * describe_cudnn.h prints and reads them back): tensors, the pointers of one execution and engine
 * choices. Plain values, no cuDNN objects; no op's parameters (each family has its own). */
#ifndef NN_CUDNN_GRAPH_TYPES_CUDNN_H
#define NN_CUDNN_GRAPH_TYPES_CUDNN_H

#include <stdint.h>

#include "nnprim/tensor.h"

/* ---------------------------------------------------------------------------------------------
 * Value structs
 */

/* A tensor as cuDNN sees it: rank is what the op needs (at most NN_MAX_RANK); strides are in
 * elements; alignment is the byte alignment of the data pointer (16 for blocks of the memory pool;
 * a smaller power of two for views into them). */
struct nn__cudnn_tensor {
    nn_dtype dtype;
    int rank;
    int64_t dims[NN_MAX_RANK];
    int64_t strides[NN_MAX_RANK];
    int64_t alignment;
};

/* Tensors a graph reads or writes (not its virtual intermediates) have unique ids 1..this - 1,
 * which the family that builds the graph fixes by role (so records and JSON plans stay valid
 * across runs). They are the variant pack's keys and the index into struct nn__cudnn_args. */
#define NN__CUDNN_UID_MAX 16

/* Data pointers of one execution, indexed by tensor uid; unused entries are ignored. */
struct nn__cudnn_args {
    void *p[NN__CUDNN_UID_MAX];
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

/* The context's layout, private to the library. Upper layers keep their per-context state in
 * the opaque slots below; core/ never looks inside them. */
#ifndef NN_CORE_CTX_H
#define NN_CORE_CTX_H

#include <stdint.h>

#include "nnprim/context.h"
#include "nnprim/status.h"

struct nn__mem_pool;    /* src/mem: the device's memory pool */
struct nn__cudnn_state; /* src/cudnn: handles, plan cache */
struct nn__capture;     /* core/capture.h: a graph capture in progress */
struct nn__graph_mem;   /* src/mem: graph memory */
struct nn_graph;        /* src/graph: a captured step */

struct nn_ctx {
    nn_settings settings; /* resolved: backend is REF or CUDNN, plan_cache_file is ours */
    int device;           /* CUDA ordinal, or -1 for the reference backend */
    void *stream;         /* cudaStream_t the calls run on now, NULL for the reference backend */
    int owns_stream;
    unsigned long long stream_id; /* cudaStreamGetId, for the pool's stream keys */
    void *home_stream;            /* the stream of nn_ctx_create() (ours or the settings'), which
                                     lives as long as the context */
    unsigned long long home_stream_id;
    int stream_switched;   /* nn_ctx_set_stream() has changed the stream at least once */
    int stream_capturable; /* nn__stream_can_capture() of stream, asked when it is set */
    void *order_event; /* cudaEvent_t for ordering one stream after another, made on first use */
    struct nn__mem_pool *mem_pool;
    struct nn__cudnn_state *cudnn;
    struct nn__capture *capture;     /* the graph capture open on the context, or NULL */
    struct nn__graph_mem *graph_mem; /* the memory of its live graphs and capture: a list */
    struct nn_graph *graph_list;     /* its live graphs (src/graph) */
    nn_error_info last_error;
};

static inline int nn__ctx_on_gpu(const struct nn_ctx *ctx)
{
    return ctx->settings.backend == NN_BACKEND_CUDNN;
}

struct nn__cache_kind;
/* The kind table a cuDNN context's cache is made of (src/context.c), and its length in *n, so
 * that a test without a GPU checks it as nn_ctx_create() would. NULL with *n = 0 in a build
 * without cuDNN. */
const struct nn__cache_kind *const *nn__ctx_cache_kinds(int *n);

#endif

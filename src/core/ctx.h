/* The context's layout, private to the library. Upper layers keep their per-context state in
 * the opaque slots below; core/ never looks inside them. */
#ifndef NN_CORE_CTX_H
#define NN_CORE_CTX_H

#include <stdint.h>

#include "nnprim/context.h"
#include "nnprim/status.h"

struct nn__mem_pool;    /* src/mem: the device's memory pool */
struct nn__cudnn_state; /* src/cudnn: handles, plan cache */

struct nn_ctx {
    nn_settings settings; /* resolved: backend is REF or CUDNN, plan_cache_file is ours */
    int device;           /* CUDA ordinal, or -1 for the reference backend */
    void *stream;         /* cudaStream_t, NULL for the reference backend */
    int owns_stream;
    unsigned long long stream_id; /* cudaStreamGetId, for the pool's stream keys */
    struct nn__mem_pool *mem_pool;
    struct nn__cudnn_state *cudnn;
    nn_error_info last_error;
};

static inline int nn__ctx_on_gpu(const struct nn_ctx *ctx)
{
    return ctx->settings.backend == NN_BACKEND_CUDNN;
}

#endif

/* The cuDNN layer's per-context state: handles (created on first use, bound to the context's
 * stream once) and, in later layers, the plan cache. */
#ifndef NN_CUDNN_CUDNN_CTX_H
#define NN_CUDNN_CUDNN_CTX_H

#include "nn_config.h"
#include "nnprim/status.h"

struct nn_ctx;

#if NN_HAVE_CUDNN
#include <cublas_v2.h>
#include <cudnn.h>

nn_status nn__cudnn_ctx_init(struct nn_ctx *ctx);
void nn__cudnn_ctx_fini(struct nn_ctx *ctx);

/* The context's handles, created on first use with the context's stream set once. */
nn_status nn__cudnn_handle(struct nn_ctx *ctx, cudnnHandle_t *out);
nn_status nn__cublas_handle(struct nn_ctx *ctx, cublasHandle_t *out);
#endif

#endif

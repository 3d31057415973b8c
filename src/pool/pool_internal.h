/* Pooling internals shared by pool.c (validation, dispatch) and the backends. */
#ifndef NN_POOL_POOL_INTERNAL_H
#define NN_POOL_POOL_INTERNAL_H

#include <stdint.h>

#include "nn_config.h"
#include "nnprim/pool.h"

struct nn_ctx;
struct nn__pool_cudnn_saved; /* pool_cudnn.c: forward's descriptors */

struct nn_pool_pullback {
    struct nn_ctx *ctx;
    nn_pool_params params;
    nn_tensor x; /* the caller's views; the caller keeps the storage alive and unchanged */
    nn_tensor y;
    struct nn__pool_cudnn_saved *cudnn; /* NULL on the reference backend */
};

/* Reference backend. Arguments are validated; y and dy have the output dims. */
nn_status nn__pool_forward_ref(struct nn_ctx *ctx, const nn_pool_params *p, const nn_tensor *x,
                               nn_tensor *y);
nn_status nn__pool_backward_ref(struct nn_ctx *ctx, const nn_pool_params *p, const nn_tensor *x,
                                const nn_tensor *dy, nn_tensor *dx);

#if NN_HAVE_CUDNN
/* cuDNN legacy pooling. saved_out NULL = inference; otherwise *saved_out receives what backward
 * needs (freed with nn__pool_cudnn_saved_free). */
nn_status nn__pool_forward_cudnn(struct nn_ctx *ctx, const nn_pool_params *p, const nn_tensor *x,
                                 nn_tensor *y, struct nn__pool_cudnn_saved **saved_out);
nn_status nn__pool_backward_cudnn(struct nn_ctx *ctx, const nn_pool_params *p,
                                  struct nn__pool_cudnn_saved *saved, const nn_tensor *x,
                                  const nn_tensor *y, const nn_tensor *dy, nn_tensor *dx);
void nn__pool_cudnn_saved_free(struct nn_ctx *ctx, struct nn__pool_cudnn_saved *saved);
/* NN_E_UNSUPPORTED naming op (the public function) and the field for what cuDNN's legacy pooling
 * cannot take: pad_lo != pad_hi, a dim, stride, window or element count beyond int, a zero
 * stride. pool.c calls it for every tensor of a call on a cuDNN context, before the backend. */
nn_status nn__pool_cudnn_check_limits(struct nn_ctx *ctx, const char *op, const nn_pool_params *p,
                                      const nn_tensor *t, const char *name);
#endif

#endif

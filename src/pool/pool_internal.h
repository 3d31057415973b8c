/* Pooling internals shared by pool.c (validation, dispatch) and the backends. */
#ifndef NN_POOL_POOL_INTERNAL_H
#define NN_POOL_POOL_INTERNAL_H

#include <stdint.h>

#include "nn_config.h"
#include "core/pullback.h"
#include "nnprim/pool.h"

struct nn_ctx;
struct nn__pool_saved; /* what a backend's forward keeps for backward (pool_cudnn.c: descriptors) */

struct nn_pool_pullback {
    struct nn__pullback hdr; /* the shared registry's header (core/pullback.h) */
    nn_pool_params params;
    nn_tensor x; /* the caller's views; the caller keeps the storage alive and unchanged */
    nn_tensor y;
    struct nn__pool_saved *saved; /* NULL when the backend keeps nothing (the reference) */
};

/* A backend: pool.c picks one per call and calls it with validated arguments. saved_out NULL =
 * inference; otherwise *saved_out receives what backward needs (NULL if nothing), released with
 * saved_free (which takes NULL). */
struct nn__pool_backend {
    const char *name; /* for the verbose line */
    nn_status (*forward)(struct nn_ctx *ctx, const nn_pool_params *p, const nn_tensor *x,
                         nn_tensor *y, struct nn__pool_saved **saved_out);
    nn_status (*backward)(struct nn_ctx *ctx, const nn_pool_params *p, struct nn__pool_saved *saved,
                          const nn_tensor *x, const nn_tensor *y, const nn_tensor *dy,
                          nn_tensor *dx);
    void (*saved_free)(struct nn_ctx *ctx, struct nn__pool_saved *saved);
};

/* Reference backend. Arguments are validated; y and dy have the output dims. */
nn_status nn__pool_forward_ref(struct nn_ctx *ctx, const nn_pool_params *p, const nn_tensor *x,
                               nn_tensor *y);
nn_status nn__pool_backward_ref(struct nn_ctx *ctx, const nn_pool_params *p, const nn_tensor *x,
                                const nn_tensor *dy, nn_tensor *dx);

#if NN_HAVE_CUDNN
/* pool_cudnn.c: cuDNN's legacy pooling calls ("cudnn-legacy"). */
extern const struct nn__pool_backend nn__pool_backend_cudnn;
#endif

#endif

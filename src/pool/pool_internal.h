/* Pooling internals shared by pool.c (validation, dispatch) and the backends. */
#ifndef NN_POOL_POOL_INTERNAL_H
#define NN_POOL_POOL_INTERNAL_H

#include <stddef.h>
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
 * saved_free (which takes NULL). backward takes saved NULL for a call without a pullback
 * (nn_pool_backward_stateless) and makes what it needs itself; accumulate nonzero: dx += the
 * gradient (dx's old contents are read), else dx = the gradient (never read, may be NaN). */
struct nn__pool_backend {
    const char *name; /* for the verbose line */
    nn_status (*forward)(struct nn_ctx *ctx, const nn_pool_params *p, const nn_tensor *x,
                         nn_tensor *y, struct nn__pool_saved **saved_out);
    nn_status (*backward)(struct nn_ctx *ctx, const nn_pool_params *p, struct nn__pool_saved *saved,
                          const nn_tensor *x, const nn_tensor *y, const nn_tensor *dy,
                          nn_tensor *dx, int accumulate);
    void (*saved_free)(struct nn_ctx *ctx, struct nn__pool_saved *saved);
    /* NN_E_UNSUPPORTED naming op (the public function) and the field for what the backend cannot
     * take (cuDNN's legacy pooling: pad_lo != pad_hi, a dim, stride, window or element count
     * beyond int, a zero stride); pool.c calls it for every tensor of a call before the backend
     * sees any. NULL: no limits beyond the checks of pool.c. */
    nn_status (*check_limits)(struct nn_ctx *ctx, const char *op, const nn_pool_params *p,
                              const nn_tensor *t, const char *name);
    /* The device-pool bytes backward would take for these (validated) tensors, for
     * nn_pool_workspace_size(); NULL: none (the reference takes host memory only). */
    size_t (*workspace)(const nn_pool_params *p, const nn_tensor *x, const nn_tensor *y,
                        const nn_tensor *dy, const nn_tensor *dx);
};

/* Reference backend. Arguments are validated; y and dy have the output dims; fn is the called
 * public function, for messages. */
nn_status nn__pool_forward_ref(struct nn_ctx *ctx, const nn_pool_params *p, const nn_tensor *x,
                               nn_tensor *y);
nn_status nn__pool_backward_ref(struct nn_ctx *ctx, const char *fn, const nn_pool_params *p,
                                const nn_tensor *x, const nn_tensor *dy, nn_tensor *dx,
                                int accumulate);

#if NN_HAVE_CUDNN
/* pool_cudnn.c: cuDNN's legacy pooling calls ("cudnn-legacy"). */
extern const struct nn__pool_backend nn__pool_backend_cudnn;
#endif

#endif

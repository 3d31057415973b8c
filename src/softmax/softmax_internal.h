/* Softmax internals shared by softmax.c (validation, dispatch, pullbacks) and the backends. */
#ifndef NN_SOFTMAX_SOFTMAX_INTERNAL_H
#define NN_SOFTMAX_SOFTMAX_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "nn_config.h"
#include "nnprim/softmax.h"

struct nn_ctx;
struct nn__xent_saved; /* what a backend's cross-entropy forward keeps (cuDNN: the log-softmax) */

/* A validated call: x is n x c x s (its trailing dims flattened into s). */
struct nn__softmax_problem {
    int64_t n, c, s;
    nn_dtype dtype;
    nn_softmax_mode mode;
    unsigned accumulate; /* NN_ACCUMULATE_DX: the backward adds to dx */
    int xent;            /* 1 for the cross-entropy (mode unused) */
    nn_index_type index; /* the cross-entropy's target type */
    /* Inside a graph capture (include/nnprim/graph.h), or with settings.xent_targets =
     * NN_TARGETS_ON_DEVICE for targets in device memory: the caller's device targets, which the
     * cross-entropy's kernel reads (each launch, in a graph); the forward's t is NULL then. NULL
     * otherwise. */
    const void *dev_targets;
    int rank;
    int64_t dims[NN_MAX_RANK]; /* x's dims, for the text form */
};

/* What a backend puts on the verbose line. */
struct nn__softmax_note {
    char impl[64];
};

/* A backend: softmax.c picks one per call. Targets reach the backends as a host array of n * s
 * int64 values already checked to lie in [0, c), or inside a graph capture or under
 * NN_TARGETS_ON_DEVICE (cuDNN only) as the caller's device targets (p->dev_targets), which no
 * host code reads. */
struct nn__softmax_backend {
    const char *name;
    nn_status (*forward)(struct nn_ctx *ctx, const struct nn__softmax_problem *p,
                         const nn_tensor *x, nn_tensor *y, struct nn__softmax_note *note);
    nn_status (*backward)(struct nn_ctx *ctx, const struct nn__softmax_problem *p,
                          const nn_tensor *y, const nn_tensor *dy, nn_tensor *dx,
                          struct nn__softmax_note *note);
    /* Copy count targets of type from data (the caller's memory) into out, widened. */
    nn_status (*read_targets)(struct nn_ctx *ctx, const char *fn, const void *data,
                              nn_index_type type, int64_t count, int64_t *out);
    /* saved_out NULL = inference; else *saved_out receives what backward needs (NULL if
     * nothing), released with saved_free (which takes NULL). */
    nn_status (*xent_forward)(struct nn_ctx *ctx, const struct nn__softmax_problem *p,
                              const nn_tensor *x, const int64_t *t, nn_tensor *loss,
                              struct nn__xent_saved **saved_out, struct nn__softmax_note *note);
    nn_status (*xent_backward)(struct nn_ctx *ctx, const struct nn__softmax_problem *p,
                               const nn_tensor *x, const int64_t *t, struct nn__xent_saved *saved,
                               const nn_tensor *dloss, nn_tensor *dx,
                               struct nn__softmax_note *note);
    void (*saved_free)(struct nn_ctx *ctx, struct nn__xent_saved *saved);
    /* nn_softmax_workspace_size() (p->xent 0) and nn_softmax_cross_entropy_workspace_size():
     * the pool bytes of the forward (backward 0) or backward call at its peak, the shape's cached
     * state made as the call would make it. */
    nn_status (*workspace)(struct nn_ctx *ctx, const struct nn__softmax_problem *p, int backward,
                           size_t *bytes);
};

/* softmax_ref.c: loops in double. */
extern const struct nn__softmax_backend nn__softmax_backend_ref;

#if NN_HAVE_CUDNN
/* softmax_cudnn.c: cuDNN's legacy softmax calls ("cudnn-legacy"). */
extern const struct nn__softmax_backend nn__softmax_backend_cudnn;
/* The cross-entropy's per-shape scratch in the context's cache (listed in src/context.c). */
struct nn__cache_kind;
extern const struct nn__cache_kind nn__softmax_xent_kind;
#endif

#endif

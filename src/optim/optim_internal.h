/* Optimizer internals shared by optim.c (validation, dispatch, the live set) and the backends. */
#ifndef NN_OPTIM_OPTIM_INTERNAL_H
#define NN_OPTIM_OPTIM_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "nn_config.h"
#include "nnprim/optim.h"
#include "optim/optim_formula.h"

struct nn_ctx;
struct nn__optim_cuda; /* optim_cuda.c: the device block and the launches */

/* A byte range of a parameter, for the overlap checks: params sorted by lo, disjoint. */
struct nn__optim_span {
    uintptr_t lo, hi;
    int index;
};

struct nn_optim {
    struct nn_ctx *ctx;
    nn_optim_params params; /* lr as last set */
    struct nn__optim_hyper hyper;
    int n;
    nn_dtype dtype;
    int states;         /* state buffers per parameter: 0, 1 (SGD) or 2 (Adam) */
    int64_t total;      /* elements of every parameter */
    nn_tensor *p;       /* the n parameter views */
    size_t *state_off;  /* n * states offsets into the state, buffer j of i at i*states+j */
    size_t state_bytes; /* every state buffer, each 256-byte aligned */
    struct nn__optim_span *spans; /* the parameters' bytes, sorted */
    /* The reference backend's: its host state and step count. */
    void *host_state;
    int64_t step;
    /* The cuDNN backend's; its work is queued on stream (ctx's when it was last used). */
    struct nn__optim_cuda *cuda;
    void *stream;
    unsigned long long stream_id;
};

/* What a step puts on the verbose line. */
struct nn__optim_note {
    char impl[64];
};

/* A backend: optim.c picks one per call (the context's) and calls it with validated arguments;
 * fn is the public function, for messages. */
struct nn__optim_backend {
    const char *name;
    /* The state (opt->state_bytes, zeroed) and whatever the steps need. */
    nn_status (*create)(struct nn_ctx *ctx, const char *fn, struct nn_optim *opt);
    nn_status (*step)(struct nn_ctx *ctx, struct nn_optim *opt, const nn_tensor *grads,
                      struct nn__optim_note *note);
    nn_status (*set_lr)(struct nn_ctx *ctx, struct nn_optim *opt, double lr);
    nn_status (*get_step)(struct nn_ctx *ctx, struct nn_optim *opt, int64_t *step);
    nn_status (*reset)(struct nn_ctx *ctx, struct nn_optim *opt);
    /* Releases what create made (also after a create that failed half way). */
    void (*destroy)(struct nn_ctx *ctx, struct nn_optim *opt);
};

/* optim_ref.c: loops in double over host tensors. */
extern const struct nn__optim_backend nn__optim_backend_ref;

#if NN_HAVE_CUDNN
/* optim_cuda.c: nnprim's multi-tensor kernels (optim.cu). */
extern const struct nn__optim_backend nn__optim_backend_cuda;
#endif

#endif

/* Layer-norm internals shared by layernorm.c (validation, dispatch, pullbacks) and the
 * backends. */
#ifndef NN_LAYERNORM_LAYERNORM_INTERNAL_H
#define NN_LAYERNORM_LAYERNORM_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "nn_config.h"
#include "nnprim/layernorm.h"

struct nn_ctx;
struct nn__layernorm_saved; /* each backend's: the rows' mean and 1 / std */

/* A validated call: x is m rows of d packed elements. */
struct nn__layernorm_problem {
    int64_t m, d;
    nn_dtype dtype;
    double eps;
    int k;               /* normalized rank */
    int gamma, beta;     /* forward was given them */
    unsigned accumulate; /* backward: NN_ACCUMULATE_DX (dx), _DW (dgamma), _DB (dbeta) */
    unsigned skip;       /* backward: the gradients forward makes possible but not asked for
                            (1 dx, 2 dgamma, 4 dbeta) */
    int backward;        /* the text form is a backward call's */
    int rank;
    int64_t dims[NN_MAX_RANK]; /* x's dims, for the text form */
};

/* What a backend puts on the verbose line. */
struct nn__layernorm_note {
    char impl[64];
};

/* A backend: layernorm.c picks one per call. gamma, beta, dx, dgamma, dbeta may be NULL. */
struct nn__layernorm_backend {
    const char *name;
    /* saved_out NULL = inference; else *saved_out receives each row's mean and rstd, released
     * with saved_free (which takes NULL). */
    nn_status (*forward)(struct nn_ctx *ctx, const char *fn, const struct nn__layernorm_problem *p,
                         const nn_tensor *x, const nn_tensor *gamma, const nn_tensor *beta,
                         nn_tensor *y, struct nn__layernorm_saved **saved_out,
                         struct nn__layernorm_note *note);
    nn_status (*backward)(struct nn_ctx *ctx, const char *fn, const struct nn__layernorm_problem *p,
                          const nn_tensor *x, const nn_tensor *gamma,
                          const struct nn__layernorm_saved *saved, const nn_tensor *dy,
                          nn_tensor *dx, nn_tensor *dgamma, nn_tensor *dbeta,
                          struct nn__layernorm_note *note);
    void (*saved_free)(struct nn_ctx *ctx, struct nn__layernorm_saved *saved);
};

/* layernorm_ref.c: loops in double. */
extern const struct nn__layernorm_backend nn__layernorm_backend_ref;

#if NN_HAVE_CUDNN
/* layernorm_cuda.c: nnprim's own kernels (layernorm.cu) on a cuDNN context. */
extern const struct nn__layernorm_backend nn__layernorm_backend_cuda;
#endif

#endif

/* Linear-layer internals shared by linear.c (validation, dispatch) and the backends. */
#ifndef NN_LINEAR_LINEAR_INTERNAL_H
#define NN_LINEAR_LINEAR_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "nn_config.h"
#include "nnprim/linear.h"

struct nn_ctx;

/* A validated call: x is m x in (its leading dims flattened into m rows), w out x in. */
struct nn__linear_problem {
    int64_t m, in, out;
    nn_dtype dtype;
    nn_math_mode math;
    nn_activation activation;
    int has_bias;
    unsigned accumulate;       /* a backward's NN_ACCUMULATE_* bits, for the text form */
    int x_rank;                /* for the text form */
    int64_t lead[NN_MAX_RANK]; /* x's leading dims (x_rank - 1 of them) */
};

/* The gradients a backward call asked for (any of dx, dw, db may be NULL) with the forward's
 * views; y is set only with relu. */
struct nn__linear_grads {
    const nn_tensor *x, *w, *y, *dy;
    nn_tensor *dx, *dw, *db;
    unsigned accumulate; /* NN_ACCUMULATE_* bits: which outputs accumulate */
};

/* What a backend puts on the verbose line: implementation and cache outcome. */
struct nn__linear_note {
    char impl[256];
    char cache[64];
};

/* A backend: linear.c picks one per call and calls it with validated arguments. */
struct nn__linear_backend {
    const char *name;
    nn_status (*forward)(struct nn_ctx *ctx, const struct nn__linear_problem *p, const nn_tensor *x,
                         const nn_tensor *w, const nn_tensor *b, nn_tensor *y,
                         struct nn__linear_note *note);
    nn_status (*backward)(struct nn_ctx *ctx, const struct nn__linear_problem *p,
                          const struct nn__linear_grads *g, struct nn__linear_note *note);
    /* nn_linear_workspace_size(): the pool bytes of pass (an nn_linear_pass value) at its peak,
     * its plans found and cached as the call would (x, w, b for their alignment). */
    nn_status (*workspace)(struct nn_ctx *ctx, const struct nn__linear_problem *p, unsigned pass,
                           const nn_tensor *x, const nn_tensor *w, const nn_tensor *b,
                           size_t *bytes);
};

/* The call in the case syntax of docs/LINEAR.md: "m64in512out10 relu bias f32". */
void nn__linear_problem_text(const struct nn__linear_problem *p, char *buf, size_t cap);

/* linear_ref.c: loops in double. */
extern const struct nn__linear_backend nn__linear_backend_ref;

#if NN_HAVE_CUDNN
/* linear_cublaslt.c: cublasLtMatmul with bias / relu epilogues. */
extern const struct nn__linear_backend nn__linear_backend_cublaslt;
/* algo (a cublasLtMatmulAlgo_t) as text: config id, tile, stages, split-k, reduction scheme,
 * swizzle, custom option and cluster shape, "a21t20s8k1r0w0c0l0"; for the verbose line and
 * `nnprim bench linear`'s raw column. */
void nn__lt_algo_text(const void *algo, char *buf, size_t cap);
/* Its per-shape matmul plans in the context's cache (listed in src/context.c). */
struct nn__cache_kind;
extern const struct nn__cache_kind nn__linear_matmul_kind;
#endif

#endif

/* What the optimizer suites share: contexts, tensors of given values, and an independent plain
 * implementation of PyTorch's formulas (written from torch/optim/sgd.py and adam.py, not from
 * src/optim) to check the backends against. */
#ifndef NN_TESTS_OPTIM_TEST_H
#define NN_TESTS_OPTIM_TEST_H

#include <stdint.h>

#include "nnprim/nnprim.h"

/* A context of backend b (the environment's other settings, no plan file); fails the test on an
 * error. */
nn_ctx *ot_ctx(nn_backend b, int verbose);

/* A tensor of ctx (nn_tensor_empty) holding vals (count = the dims' product), in dtype. */
nn_tensor ot_tensor(nn_ctx *ctx, nn_dtype dt, int rank, const int64_t *dims, const double *vals);

/* t's values as doubles (any space; device tensors are copied back after a synchronize). */
void ot_read(nn_ctx *ctx, const nn_tensor *t, double *out);

/* Overwrite t's values. */
void ot_write(nn_ctx *ctx, nn_tensor *t, const double *vals);

/* Reproducible values in [-1, 1) from a seed. */
void ot_uniform(uint64_t seed, double *out, int64_t n);

/* The plain implementation: n tensors of count[i] elements, state arrays owned by it. */
struct ot_plain {
    nn_optim_params p;
    int n;
    const int64_t *count;
    double **param, **buf, **m, **v;
    int64_t step;
};

void ot_plain_init(struct ot_plain *o, const nn_optim_params *p, int n, const int64_t *count,
                   double **param);
/* One step from grads (not modified). */
void ot_plain_step(struct ot_plain *o, double *const *grads);
void ot_plain_free(struct ot_plain *o);

/* The largest |a - b| / max(max |b|, tiny) over n elements. */
double ot_rel_err(const double *a, const double *b, int64_t n);

#endif

/* Setup shared by the workspace-query tests (conv, linear, softmax): a context of a backend and
 * math mode, and a tensor of small integers. Both fail the calling test on an error. */
#ifndef NN_TESTS_FIXTURE_H
#define NN_TESTS_FIXTURE_H

#include <stdint.h>

#include "nnprim/nnprim.h"

/* nn_settings_from_env() (the environment's NNPRIM_* included) with backend b; _math also sets
 * the math mode. */
nn_ctx *nn_test_ctx(nn_backend b);
nn_ctx *nn_test_ctx_math(nn_backend b, nn_math_mode math);

/* A cuDNN context with settings.deterministic set (the environment not read), for tests that
 * compare bits: a launched graph against the same calls eager, say. */
nn_ctx *nn_test_deterministic_gpu(void);

/* An nn_tensor_empty() tensor of ctx filled with integers in [-2, 2], seeded by its shape. */
nn_tensor nn_test_ints(nn_ctx *ctx, nn_dtype dt, int rank, const int64_t *dims);

/* 0 when the two f32 device tensors (of contexts ca and cb) hold the same bytes, 1 if not. */
int nn_test_f32_differ(nn_ctx *ca, const nn_tensor *a, nn_ctx *cb, const nn_tensor *b);

#endif

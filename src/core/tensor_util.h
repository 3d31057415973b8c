/* Checks every op runs on its tensor arguments. */
#ifndef NN_CORE_TENSOR_UTIL_H
#define NN_CORE_TENSOR_UTIL_H

#include "nnprim/tensor.h"

struct nn_ctx;

/* nn_tensor_validate(), then: the tensor lives where the context computes (host memory for the
 * reference backend, device memory of the context's device for cuDNN). op and name go into the
 * message ("conv_forward: x is in host memory, but this context runs cuDNN on device 0"). */
nn_status nn__check_tensor(struct nn_ctx *ctx, const char *op, const nn_tensor *t,
                           const char *name);

/* A short text of a tensor's dims for messages and verbose lines: "32x64x56x56". */
void nn__dims_text(const nn_tensor *t, char *buf, size_t cap);

#endif

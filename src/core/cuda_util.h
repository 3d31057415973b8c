/* Checked CUDA runtime calls: a failure is recorded with the function name, the raw error and
 * CUDA's own message, and becomes an nn_status. Only for files compiled with NN_HAVE_CUDA. */
#ifndef NN_CORE_CUDA_UTIL_H
#define NN_CORE_CUDA_UTIL_H

#include "nn_config.h"

#if NN_HAVE_CUDA
#include <cuda_runtime_api.h>

#include "error.h"

struct nn_ctx;

nn_status nn__cuda_fail(struct nn_ctx *ctx, cudaError_t err, const char *call, const char *file,
                        int line);

/* Evaluates to NN_OK or the recorded status. cudaErrorMemoryAllocation maps to NN_E_OOM_DEVICE. */
#define NN__CUDA(ctx, call)                                                                        \
    nn__cuda_check((ctx), (call), #call, __FILE__, __LINE__)

static inline nn_status nn__cuda_check(struct nn_ctx *ctx, cudaError_t err, const char *call,
                                       const char *file, int line)
{
    return err == cudaSuccess ? NN_OK : nn__cuda_fail(ctx, err, call, file, line);
}
#endif

/* Number of usable devices, 0 when there is no CUDA, driver or device (no error recorded).
 * Safe to call often: the answer is computed once per process. */
int nn__cuda_device_count(void);

#endif

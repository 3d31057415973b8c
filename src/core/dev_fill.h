/* nn_tensor_fill_*() of a packed device tensor as one kernel launch on the context's stream
 * (dev_fill.cu): the host's values, bitwise, without a host staging copy, and capturable into a
 * CUDA graph. Only for files compiled with NN_HAVE_CUDA. */
#ifndef NN_CORE_DEV_FILL_H
#define NN_CORE_DEV_FILL_H

#include <stdint.h>

#include "core/cuda_util.h"

#if NN_HAVE_CUDA

/* The kernel's parameter, byte for byte (src/core/dev_fill.cu). */
struct nn__fill {
    uint64_t data;
    int64_t n;     /* elements, >= 1 */
    int32_t dtype; /* nn_dtype */
    int32_t kind;  /* 0 constant a, 1 uniform in [a, b) from seed, 2 integers in [a, b] */
    double a, b;
    uint64_t seed;
};
_Static_assert(sizeof(struct nn__fill) == 48, "struct nn__fill is the kernel's parameter");

/* NULL where this build and process can run the fill kernel, else why not (static text). */
const char *nn__fill_unavailable(void);

/* Launch f on ctx's stream. NN_OK; NN_E_UNSUPPORTED (nn__fill_unavailable() says why); NN_E_CUDA.
 * Failures are recorded with fn in front. */
nn_status nn__dev_fill(struct nn_ctx *ctx, const char *fn, const struct nn__fill *f);

#endif
#endif

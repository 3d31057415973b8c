/* The cuDNN version and GPU the fuzz seeds are written with and the target reads them as. */
#ifndef NN_FUZZ_PLAN_FUZZ_IDENTITY_H
#define NN_FUZZ_PLAN_FUZZ_IDENTITY_H

#include <stdio.h>
#include <string.h>

#include "cudnn/plan_cache.h"

#define FUZZ_CUDNN_VERSION 91400u

static inline struct nn__gpu_id fuzz_gpu(void)
{
    struct nn__gpu_id g;
    memset(&g, 0, sizeof g);
    snprintf(g.name, sizeof g.name, "NVIDIA H200");
    g.cc_major = 9;
    g.cc_minor = 0;
    g.sm_count = 132;
    return g;
}

#endif

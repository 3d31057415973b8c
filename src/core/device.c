#include <stdio.h>
#include <string.h>

#include "nn_config.h"

#include "core/cuda_util.h"
#include "core/error.h"
#include "nnprim/context.h"

const char *nn_version(void)
{
    return NN_VERSION_STRING;
}

int nn_version_number(void)
{
    return NN_VERSION_MAJOR * 10000 + NN_VERSION_MINOR * 100 + NN_VERSION_PATCH;
}

unsigned nn_build_features(void)
{
    return (NN_HAVE_CUDA ? NN_FEATURE_CUDA : 0u) | (NN_HAVE_CUDNN ? NN_FEATURE_CUDNN : 0u) |
           (NN_HAVE_JEMALLOC ? NN_FEATURE_JEMALLOC : 0u) |
           (NN_HAVE_DLPACK ? NN_FEATURE_DLPACK : 0u);
}

nn_status nn_device_count(int *count)
{
    if (!count) return NN__FAIL(NULL, NN_E_INVALID_ARG, "nn_device_count: count must not be NULL");
    *count = nn__cuda_device_count();
    return NN_OK;
}

nn_status nn_device_get_info(int ordinal, nn_device_info *info)
{
    if (!info) return NN__FAIL(NULL, NN_E_INVALID_ARG, "nn_device_get_info: info must not be NULL");
#if NN_HAVE_CUDA
    int n = nn__cuda_device_count();
    const char *no_cudart = nn__dl_problem(NN__DL_CUDART);
    if (no_cudart)
        return NN__FAIL(NULL, NN_E_NO_DEVICE, "nn_device_get_info: no usable CUDA device: %s",
                        no_cudart);
    if (n == 0)
        return NN__FAIL(NULL, NN_E_NO_DEVICE,
                        "nn_device_get_info: no usable CUDA device (no driver or no device)");
    if (ordinal < 0 || ordinal >= n)
        return NN__FAIL(NULL, NN_E_INVALID_ARG,
                        "nn_device_get_info: ordinal must be in [0, %d), got %d", n, ordinal);
    struct cudaDeviceProp p;
    NN__TRY(NN__CUDA(NULL, cudaGetDeviceProperties(&p, ordinal)));
    memset(info, 0, sizeof *info);
    info->ordinal = ordinal;
    info->cc_major = p.major;
    info->cc_minor = p.minor;
    info->sm_count = p.multiProcessorCount;
    info->total_memory = p.totalGlobalMem;
    snprintf(info->name, sizeof info->name, "%s", p.name);
    return NN_OK;
#else
    (void)ordinal;
    return NN__FAIL(NULL, NN_E_NOT_BUILT, "nn_device_get_info: this build of nnprim has no CUDA");
#endif
}

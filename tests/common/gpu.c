#include "gpu.h"

#include "nnprim/nnprim.h"

int nn_test_have_gpu(const char **why)
{
    if (!(nn_build_features() & NN_FEATURE_CUDNN)) {
        *why = "this build has no cuDNN";
        return 0;
    }
    int n = 0;
    nn_device_count(&n);
    if (n == 0) {
        *why = "no CUDA device is visible (no driver or no GPU)";
        return 0;
    }
    *why = "";
    return 1;
}

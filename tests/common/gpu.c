#include "gpu.h"

#include <stdio.h>

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
    /* The run-time libraries: the test program links them, but libnnprim loads its own. */
    static char lib_why[1024];
    for (int i = 0; i < NN_RUNTIME_LIBRARY_COUNT; i++) {
        nn_runtime_library l;
        if (nn_runtime_library_info(i, &l) == NN_OK && !l.usable) {
            snprintf(lib_why, sizeof lib_why, "%s runtime not usable: %s", l.name, l.problem);
            *why = lib_why;
            return 0;
        }
    }
    *why = "";
    return 1;
}

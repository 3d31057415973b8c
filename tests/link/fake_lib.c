/* Stand-ins for the CUDA runtime and cuDNN (tests/link/runtime_libs.c, mode fake), built as
 * libcudart.so.<major> and libcudnn.so.<major> under the build's tests/link/fake/: the runtime
 * reports the version nnprim needs but has none of the functions nnprim calls, cuDNN reports
 * 8.9.7. (There is no cuBLASLt there at all.) */
#if NN_FAKE_CUDART
#include <cuda_runtime_api.h>

cudaError_t cudaRuntimeGetVersion(int *runtimeVersion)
{
    *runtimeVersion = CUDART_VERSION / 1000 * 1000;
    return cudaSuccess;
}
#else
#include <cudnn.h>

size_t cudnnGetVersion(void)
{
    return 80907;
}
#endif

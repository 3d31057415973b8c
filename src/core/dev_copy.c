#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "core/dev_copy.h"
#include "core/error.h"

#if NN_HAVE_CUDA
#if NN_HAVE_COPY_KERNEL
/* The fat binary of dev_copy.cu, generated at build time (tools/embed_bin.py). */
extern const unsigned char nn__dev_copy_image[];
#endif

static pthread_once_t once = PTHREAD_ONCE_INIT;
static cudaKernel_t kernel;
static const char *unavailable;
static char why[160];

static void load(void)
{
#if NN_HAVE_COPY_KERNEL
    cudaLibrary_t lib;
    cudaError_t err = cudaLibraryLoadData(&lib, nn__dev_copy_image, NULL, NULL, 0, NULL, NULL, 0);
    if (err == cudaSuccess) err = cudaLibraryGetKernel(&kernel, lib, "nn__dev_copies");
    if (err != cudaSuccess) {
        (void)cudaGetLastError();
        snprintf(why, sizeof why, "the driver refused nnprim's device copy kernel (%s)",
                 cudaGetErrorName(err));
        unavailable = why;
    }
#else
    unavailable = "this build has no device copy kernel (nvcc was not found when it was built)";
#endif
}

const char *nn__copies_unavailable(void)
{
    pthread_once(&once, load);
    return unavailable;
}

/* 256 threads of 16 bytes, four rounds each, per block; at most 1024 blocks per copy (the H200 has
 * 132 multiprocessors), which keeps a large copy near the copy engines' bandwidth. */
static void params_of(const struct nn__copies *c, void **args, struct cudaKernelNodeParams *kp)
{
    uint64_t most = 0;
    for (uint32_t i = 0; i < c->n; i++)
        if (c->bytes[i] > most) most = c->bytes[i];
    uint64_t per = 256 * 16 * 4, blocks = (most + per - 1) / per;
    if (blocks < 1) blocks = 1;
    if (blocks > 1024) blocks = 1024;
    memset(kp, 0, sizeof *kp);
    args[0] = (void *)c;
    kp->func = (void *)kernel;
    kp->gridDim = (dim3){(unsigned)blocks, c->n ? c->n : 1, 1};
    kp->blockDim = (dim3){256, 1, 1};
    kp->kernelParams = args;
}

nn_status nn__graph_add_copies(struct nn_ctx *ctx, cudaGraph_t g, const cudaGraphNode_t *deps,
                               size_t ndeps, const struct nn__copies *c, cudaGraphNode_t *node)
{
    const char *no = nn__copies_unavailable();
    if (no) return NN__FAIL(ctx, NN_E_UNSUPPORTED, "CUDA graph copies: %s", no);
    void *args[1];
    struct cudaKernelNodeParams kp;
    params_of(c, args, &kp);
    return NN__CUDA(ctx, cudaGraphAddKernelNode(node, g, deps, ndeps, &kp));
}

cudaError_t nn__graph_exec_set_copies(cudaGraphExec_t x, cudaGraphNode_t node,
                                      const struct nn__copies *c)
{
    void *args[1];
    struct cudaKernelNodeParams kp;
    params_of(c, args, &kp);
    return cudaGraphExecKernelNodeSetParams(x, node, &kp);
}
#endif

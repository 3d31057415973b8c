#include <string.h>

#include "core/dev_copy.h"
#include "core/error.h"
#include "core/kernel_image.h"

#if NN_HAVE_CUDA
#if NN_HAVE_KERNEL_IMAGES
/* The fat binary of dev_copy.cu, generated at build time (src/meson.build: nn_cuda_images). */
extern const unsigned char nn__dev_copy_image[];
#define IMAGE nn__dev_copy_image
#else
#define IMAGE NULL
#endif

static const char *const names[] = {"nn__dev_copies", NULL};
static cudaKernel_t kernels[1];
static struct nn__kernel_image image =
    NN__KERNEL_IMAGE_INIT(IMAGE, "device copy kernel", names, kernels);

const char *nn__copies_unavailable(void)
{
    return nn__kernel_image_load(&image);
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
    kp->func = (void *)kernels[0];
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

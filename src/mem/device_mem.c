/* Device memory passes through to the driver's stream-ordered allocator until the caching pool
 * (src/mem/pool.c) takes over this interface. */
#include "nn_config.h"

#include "core/ctx.h"
#include "core/cuda_util.h"
#include "core/error.h"
#include "mem/mem.h"

nn_status nn__mem_ctx_init(struct nn_ctx *ctx)
{
    (void)ctx;
    return NN_OK;
}

void nn__mem_ctx_fini(struct nn_ctx *ctx)
{
    (void)ctx;
}

nn_status nn__dev_alloc(struct nn_ctx *ctx, size_t bytes, void **out)
{
    *out = NULL;
#if NN_HAVE_CUDA
    return NN__CUDA(ctx, cudaMallocAsync(out, bytes, (cudaStream_t)ctx->stream));
#else
    (void)bytes;
    return NN__FAIL(ctx, NN_E_NOT_BUILT, "device memory needs a build with CUDA");
#endif
}

nn_status nn__dev_free(struct nn_ctx *ctx, void *p)
{
    if (!p) return NN_OK;
#if NN_HAVE_CUDA
    return NN__CUDA(ctx, cudaFreeAsync(p, (cudaStream_t)ctx->stream));
#else
    return NN__FAIL(ctx, NN_E_NOT_BUILT, "device memory needs a build with CUDA");
#endif
}

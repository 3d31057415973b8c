#include "core/alloc.h"
#include "core/ctx.h"
#include "core/error.h"
#include "cudnn/cudnn_ctx.h"

struct nn__cudnn_state {
    cudnnHandle_t cudnn;
    cublasHandle_t cublas;
};

nn_status nn__cudnn_ctx_init(struct nn_ctx *ctx)
{
    ctx->cudnn = nn__host_calloc(1, sizeof *ctx->cudnn);
    if (!ctx->cudnn) return NN__FAIL(ctx, NN_E_OOM_HOST, "nn_ctx_create: out of host memory");
    return NN_OK;
}

void nn__cudnn_ctx_fini(struct nn_ctx *ctx)
{
    if (!ctx->cudnn) return;
    if (ctx->cudnn->cudnn) cudnnDestroy(ctx->cudnn->cudnn);
    if (ctx->cudnn->cublas) cublasDestroy(ctx->cudnn->cublas);
    nn__host_free(ctx->cudnn);
    ctx->cudnn = NULL;
}

nn_status nn__cudnn_handle(struct nn_ctx *ctx, cudnnHandle_t *out)
{
    struct nn__cudnn_state *s = ctx->cudnn;
    if (!s->cudnn) {
        cudnnHandle_t h;
        cudnnStatus_t st = cudnnCreate(&h);
        if (st == CUDNN_STATUS_SUCCESS) {
            st = cudnnSetStream(h, (cudaStream_t)ctx->stream);
            if (st != CUDNN_STATUS_SUCCESS) cudnnDestroy(h);
        }
        if (st != CUDNN_STATUS_SUCCESS)
            return nn__record_error(ctx, NN_E_CUDNN, "cudnnCreate", (int)st,
                                    cudnnGetErrorString(st), __FILE__, __LINE__,
                                    "creating the cuDNN handle failed: %s",
                                    cudnnGetErrorString(st));
        s->cudnn = h;
    }
    *out = s->cudnn;
    return NN_OK;
}

nn_status nn__cublas_handle(struct nn_ctx *ctx, cublasHandle_t *out)
{
    struct nn__cudnn_state *s = ctx->cudnn;
    if (!s->cublas) {
        cublasHandle_t h;
        cublasStatus_t st = cublasCreate(&h);
        if (st == CUBLAS_STATUS_SUCCESS) {
            st = cublasSetStream(h, (cudaStream_t)ctx->stream);
            if (st != CUBLAS_STATUS_SUCCESS) cublasDestroy(h);
        }
        if (st != CUBLAS_STATUS_SUCCESS)
            return nn__record_error(ctx, NN_E_CUBLAS, "cublasCreate", (int)st,
                                    cublasGetStatusName(st), __FILE__, __LINE__,
                                    "creating the cuBLAS handle failed: %s",
                                    cublasGetStatusString(st));
        s->cublas = h;
    }
    *out = s->cublas;
    return NN_OK;
}

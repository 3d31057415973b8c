/* The cuDNN recurrent path: the launches of one call on raw pointers. */
#include <string.h>

#include "rnn/rnn_cudnn_internal.h"

/* ---------------------------------------------------------------------------------------------
 * The launches of one call, on raw pointers: the eager path passes the caller's tensors, a
 * capture the staging buffers.
 */

/* cuDNN writes its fill value (zero) to hy, cy, dhx and dcx of a zero-length sequence (RNN.md trap
 * 4); the reference's semantics pass the state through: dst[:, n, :] = src[:, n, :] (zero for a
 * NULL src, which the fill already is). */
static nn_status pass_through(struct nn_ctx *ctx, const struct nn__rnn_problem *p,
                              const struct rnn_live *e, void *dst, const void *src, int64_t width)
{
    if (!dst || !src) return NN_OK;
    size_t es = nn_dtype_size(p->dtype), row = (size_t)width * es, pitch = (size_t)p->n * row;
    for (int64_t n = 0; n < p->n; n++) {
        if (e->lengths[n] != 0) continue;
        NN__TRY(
            NN__CUDA(ctx, cudaMemcpy2DAsync((char *)dst + (size_t)n * row, pitch,
                                            (const char *)src + (size_t)n * row, pitch, row,
                                            (size_t)(p->layers * p->dirs), cudaMemcpyDeviceToDevice,
                                            (cudaStream_t)ctx->stream)));
    }
    return NN_OK;
}

nn_status nn__rnn_cudnn_fwd_launch(struct nn_ctx *ctx, cudnnHandle_t h,
                                   const struct nn__rnn_problem *p, const struct rnn_live *e,
                                   const void *arg)
{
    const struct fwd_io *a = arg;
    NN__TRY(nn__cudnn_RNNForward(
        ctx, h, e->rnn, a->reserve ? CUDNN_FWD_MODE_TRAINING : CUDNN_FWD_MODE_INFERENCE, NULL,
        e->xd, a->x, e->yd, a->y, e->hd, a->hx, a->hy, e->cd, a->cx, a->cy, e->weight_bytes, a->w,
        e->work_bytes, a->ws, a->reserve_bytes, a->reserve));
    NN__TRY(pass_through(ctx, p, e, a->hy, a->hx, p->out));
    return pass_through(ctx, p, e, a->cy, a->cx, p->hidden);
}

nn_status nn__rnn_cudnn_bwd_launch(struct nn_ctx *ctx, cudnnHandle_t h,
                                   const struct nn__rnn_problem *p, const struct rnn_live *e,
                                   const void *arg)
{
    const struct bwd_io *a = arg;
    cudaStream_t s = (cudaStream_t)ctx->stream;
    if (a->zero_dy) NN__TRY(NN__CUDA(ctx, cudaMemsetAsync(a->dy, 0, e->ybytes, s)));
    /* Data first, always: the weights pass reads what the data pass leaves in the reserve (RNN.md
     * traps 1 and 2). */
    NN__TRY(nn__cudnn_RNNBackwardData_v8(ctx, h, e->rnn, NULL, e->yd, a->y, a->dy, e->xd, a->dx,
                                         e->hd, a->hx, a->dhy, a->dhx, e->cd, a->cx, a->dcy, a->dcx,
                                         e->weight_bytes, a->w, e->work_bytes, a->ws,
                                         a->reserve_bytes, a->reserve));
    /* cuDNN only adds into dw (WGRAD_MODE_SET is NOT_SUPPORTED, trap 5): overwrite = zero first. */
    if (a->weights && a->zero_dw)
        NN__TRY(NN__CUDA(ctx, cudaMemsetAsync(a->dw, 0, e->weight_bytes, s)));
    if (a->weights)
        NN__TRY(nn__cudnn_RNNBackwardWeights_v8(
            ctx, h, e->rnn, CUDNN_WGRAD_MODE_ADD, NULL, e->xd, a->x, e->hd, a->hx, e->yd, a->y,
            e->weight_bytes, a->dw, e->work_bytes, a->ws, a->reserve_bytes, a->reserve));
    NN__TRY(pass_through(ctx, p, e, a->dhx, a->dhy, p->out));
    return pass_through(ctx, p, e, a->dcx, a->dcy, p->hidden);
}

static const void *data_of(const nn_tensor *t)
{
    return t ? t->data : NULL;
}

static void *out_of(nn_tensor *t)
{
    return t ? t->data : NULL;
}

/* A forward's launch arguments on the caller's tensors of io (rs NULL: inference). */
struct fwd_io nn__rnn_cudnn_fwd_io_of(const struct nn__rnn_io *io, void *ws,
                                      const struct reserve *rs)
{
    return (struct fwd_io){io->x->data,         data_of(io->hx),   data_of(io->cx), io->w->data,
                           io->y_out->data,     out_of(io->hy),    out_of(io->cy),  ws,
                           rs ? rs->ptr : NULL, rs ? rs->bytes : 0};
}

/* A backward's launch arguments on the caller's tensors of io; dy0 and dx0 stand in for a dy or
 * dx the caller did not pass (cuDNN needs the buffers). */
struct bwd_io nn__rnn_cudnn_bwd_io_of(const struct nn__rnn_io *io, void *ws,
                                      const struct reserve *rs, void *dy0, void *dx0)
{
    return (struct bwd_io){io->x->data,
                           data_of(io->hx),
                           data_of(io->cx),
                           io->w->data,
                           io->y->data,
                           data_of(io->dhy),
                           data_of(io->dcy),
                           io->dy ? io->dy->data : dy0,
                           io->dx ? io->dx->data : dx0,
                           out_of(io->dhx),
                           out_of(io->dcx),
                           out_of(io->dw),
                           ws,
                           rs->ptr,
                           rs->bytes,
                           !io->dy,
                           io->dw != NULL,
                           !io->accumulate};
}

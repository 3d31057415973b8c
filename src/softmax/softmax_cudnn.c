/* Softmax on cuDNN's legacy calls (cudnnSoftmaxForward / cudnnSoftmaxBackward, which cuDNN 9
 * keeps), over the channel dim of x seen as n x c x s x 1 (CUDNN_SOFTMAX_MODE_CHANNEL).
 *
 * The cross-entropy needs no kernel of its own: forward is cuDNN's log-softmax L into a pool
 * buffer, the targets' one-hot mask M (n x c x s, built on the host, uploaded with one copy and
 * kept for backward), and loss = -sum_c M * L (cudnnOpTensor's product; the sum over C as below,
 * since cudnnReduceTensor refused bf16 and C = 1 on the H200). Backward uses
 *   dx = dy - exp(L) * sum_c dy   (the log-softmax gradient)
 * with dy = -M * dloss (dloss broadcast over C by cudnnOpTensor), so that sum_c dy = -dloss and
 * dx = (softmax - onehot) * dloss. The targets are on the host by then (softmax.c). A batched
 * device copy of the n * s picked elements cost about 4 us per element on the H200
 * (docs/PERFORMANCE.md), several times a language model's whole step in PyTorch. */
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "core/cuda_load.h"

#include "core/alloc.h"
#include "core/ctx.h"
#include "core/cuda_util.h"
#include "core/elem.h"
#include "core/error.h"
#include "core/log.h"
#include "cudnn/bindings_cudnn.h"
#include "cudnn/cudnn_ctx.h"
#include "cudnn/describe_cudnn.h"
#include "mem/mem.h"
#include "softmax/softmax_internal.h"

/* The log-softmax of the forward call, for backward. */
struct nn__xent_saved {
    void *logp; /* n x c x s, x's dtype, from the pool */
    void *mask; /* the targets' one-hot, n x c x s, x's dtype, from the pool */
};

/* Descriptor releases never replace the failure being reported. */
static void destroy_tensor(struct nn_ctx *ctx, cudnnTensorDescriptor_t d)
{
    if (!d) return;
    nn_error_info keep = ctx->last_error;
    (void)nn__cudnn_DestroyTensorDescriptor(ctx, d);
    ctx->last_error = keep;
}

static nn_status check_int(struct nn_ctx *ctx, const char *fn, const struct nn__softmax_problem *p)
{
    if (p->n > INT_MAX || p->c > INT_MAX || p->s > INT_MAX || p->c * p->s > INT_MAX)
        return NN__FAIL(ctx, NN_E_UNSUPPORTED,
                        "%s: cuDNN's softmax takes int sizes and strides, but x is N %lld x C %lld "
                        "x %lld",
                        fn, (long long)p->n, (long long)p->c, (long long)p->s);
    return NN_OK;
}

/* A packed a x b x c x 1 descriptor. */
static nn_status desc4(struct nn_ctx *ctx, nn_dtype t, int64_t a, int64_t b, int64_t c,
                       cudnnTensorDescriptor_t *out)
{
    int dims[4] = {(int)a, (int)b, (int)c, 1}, str[4] = {(int)(b * c), (int)c, 1, 1};
    cudnnTensorDescriptor_t d;
    NN__TRY(nn__cudnn_CreateTensorDescriptor(ctx, &d));
    nn_status st = nn__cudnn_SetTensorNdDescriptor(ctx, d, nn__cudnn_data_type(t), 4, dims, str);
    if (st != NN_OK) {
        destroy_tensor(ctx, d);
        return st;
    }
    *out = d;
    return NN_OK;
}

/* cuDNN's scaling factors: double for f64 data, float otherwise. */
union scale {
    float f;
    double d;
};

static const void *scale_of(union scale *s, nn_dtype t, double v)
{
    if (t == NN_DTYPE_F64)
        s->d = v;
    else
        s->f = (float)v;
    return s;
}

static void note_set(struct nn_ctx *ctx, struct nn__softmax_note *note, const char *impl)
{
    if (nn__verbose(ctx)) snprintf(note->impl, sizeof note->impl, "%s", impl);
}

/* y = beta y + (log-)softmax(x) over C; x and y may be any pointers of the problem's shape. */
static nn_status softmax_run(struct nn_ctx *ctx, const char *fn,
                             const struct nn__softmax_problem *p, cudnnSoftmaxAlgorithm_t algo,
                             const void *x, void *y)
{
    NN__TRY(check_int(ctx, fn, p));
    cudnnHandle_t h;
    NN__TRY(nn__cudnn_handle(ctx, &h));
    cudnnTensorDescriptor_t d;
    NN__TRY(desc4(ctx, p->dtype, p->n, p->c, p->s, &d));
    union scale one, zero;
    nn_status st = nn__cudnn_SoftmaxForward(ctx, h, algo, CUDNN_SOFTMAX_MODE_CHANNEL,
                                            scale_of(&one, p->dtype, 1.0), d, x,
                                            scale_of(&zero, p->dtype, 0.0), d, y);
    destroy_tensor(ctx, d);
    return st;
}

static nn_status softmax_grad(struct nn_ctx *ctx, const char *fn,
                              const struct nn__softmax_problem *p, cudnnSoftmaxAlgorithm_t algo,
                              const void *y, const void *dy, void *dx, double beta)
{
    NN__TRY(check_int(ctx, fn, p));
    cudnnHandle_t h;
    NN__TRY(nn__cudnn_handle(ctx, &h));
    cudnnTensorDescriptor_t d;
    NN__TRY(desc4(ctx, p->dtype, p->n, p->c, p->s, &d));
    union scale one, bt;
    nn_status st = nn__cudnn_SoftmaxBackward(ctx, h, algo, CUDNN_SOFTMAX_MODE_CHANNEL,
                                             scale_of(&one, p->dtype, 1.0), d, y, d, dy,
                                             scale_of(&bt, p->dtype, beta), d, dx);
    destroy_tensor(ctx, d);
    return st;
}

static cudnnSoftmaxAlgorithm_t algo_of(nn_softmax_mode m)
{
    return m == NN_SOFTMAX_MODE_LOG ? CUDNN_SOFTMAX_LOG : CUDNN_SOFTMAX_ACCURATE;
}

static nn_status forward_cudnn(struct nn_ctx *ctx, const struct nn__softmax_problem *p,
                               const nn_tensor *x, nn_tensor *y, struct nn__softmax_note *note)
{
    note_set(ctx, note, "cudnn-legacy");
    return softmax_run(ctx, "nn_softmax_forward", p, algo_of(p->mode), x->data, y->data);
}

static nn_status backward_cudnn(struct nn_ctx *ctx, const struct nn__softmax_problem *p,
                                const nn_tensor *y, const nn_tensor *dy, nn_tensor *dx,
                                struct nn__softmax_note *note)
{
    note_set(ctx, note, "cudnn-legacy");
    double beta = (p->flags & NN_SOFTMAX_ACCUMULATE_DX) ? 1.0 : 0.0;
    return softmax_grad(ctx, "nn_softmax_backward", p, algo_of(p->mode), y->data, dy->data,
                        dx->data, beta);
}

/* The caller's targets copied to the host. Ordinary (pageable) host memory is read as it is: a
 * copy into it from the stream has completed when cudaMemcpyAsync returns, so nothing can be
 * pending, and a training step keeps the GPU queue full. Device, managed or pinned memory may
 * still be written by queued work: copied after it, one wait for the stream. */
static nn_status read_targets_cudnn(struct nn_ctx *ctx, const char *fn, const void *data,
                                    nn_index_type type, int64_t count, int64_t *out)
{
    struct cudaPointerAttributes attr;
    if (cudaPointerGetAttributes(&attr, data) != cudaSuccess) {
        (void)cudaGetLastError(); /* unknown to CUDA: ordinary host memory */
        attr.type = cudaMemoryTypeUnregistered;
    }
    if (attr.type == cudaMemoryTypeUnregistered)
        return nn__softmax_backend_ref.read_targets(ctx, fn, data, type, count, out);
    size_t width = type == NN_INDEX_I32 ? 4 : 8, bytes = (size_t)count * width;
    /* int64 targets land in out directly; int32 ones in its upper half, widened in place front
     * to back (out[i] overwrites only int32 elements at positions <= i, already read). */
    char *dst = (char *)out + (type == NN_INDEX_I32 ? bytes : 0);
    cudaStream_t s = (cudaStream_t)ctx->stream;
    NN__TRY(NN__CUDA(ctx, cudaMemcpyAsync(dst, data, bytes, cudaMemcpyDefault, s)));
    NN__TRY(NN__CUDA(ctx, cudaStreamSynchronize(s)));
    (void)fn;
    if (type == NN_INDEX_I32) {
        const int32_t *t = (const int32_t *)dst;
        for (int64_t i = 0; i < count; i++)
            out[i] = t[i];
    }
    return NN_OK;
}

/* The targets' one-hot mask, n x c x s in x's dtype, into the pool buffer *mask. The host
 * buffer may go once cudaMemcpyAsync returns: a copy from pageable memory has been staged by
 * then. */
static nn_status mask_upload(struct nn_ctx *ctx, const char *fn,
                             const struct nn__softmax_problem *p, const int64_t *t, void **mask)
{
    size_t w = nn_dtype_size(p->dtype), bytes = (size_t)(p->n * p->c * p->s) * w;
    unsigned char *h = nn__host_calloc(1, bytes), one[8];
    if (!h) return NN__FAIL(ctx, NN_E_OOM_HOST, "%s: out of host memory for the target mask", fn);
    nn__elem_one(p->dtype, one);
    for (int64_t i = 0; i < p->n * p->s; i++) {
        int64_t n = i / p->s, k = i % p->s;
        memcpy(h + (size_t)((n * p->c + t[i]) * p->s + k) * w, one, w);
    }
    nn_status st = nn__dev_alloc_for(ctx, fn, bytes, mask);
    if (st == NN_OK)
        st = NN__CUDA(ctx, cudaMemcpyAsync(*mask, h, bytes, cudaMemcpyHostToDevice,
                                           (cudaStream_t)ctx->stream));
    nn__host_free(h);
    return st;
}

static cudnnDataType_t compute_type(nn_dtype t)
{
    return t == NN_DTYPE_F64 ? CUDNN_DATA_DOUBLE : CUDNN_DATA_FLOAT;
}

/* c = op(alpha_a * a, alpha_b * b) (b may be n x 1 x s, broadcast over C). */
static nn_status op_tensor(struct nn_ctx *ctx, const struct nn__softmax_problem *p,
                           cudnnOpTensorOp_t what, double alpha_a, cudnnTensorDescriptor_t da,
                           const void *a, double alpha_b, cudnnTensorDescriptor_t db, const void *b,
                           cudnnTensorDescriptor_t dc, void *c)
{
    cudnnHandle_t h;
    NN__TRY(nn__cudnn_handle(ctx, &h));
    cudnnOpTensorDescriptor_t op;
    NN__TRY(nn__cudnn_CreateOpTensorDescriptor(ctx, &op));
    union scale s1, s2, zero;
    nn_status st =
        nn__cudnn_SetOpTensorDescriptor(ctx, op, what, compute_type(p->dtype), CUDNN_PROPAGATE_NAN);
    if (st == NN_OK)
        st = nn__cudnn_OpTensor(ctx, h, op, scale_of(&s1, p->dtype, alpha_a), da, a,
                                scale_of(&s2, p->dtype, alpha_b), db, b,
                                scale_of(&zero, p->dtype, 0.0), dc, c);
    nn_error_info keep = ctx->last_error;
    (void)nn__cudnn_DestroyOpTensorDescriptor(ctx, op);
    if (st == NN_OK) ctx->last_error = keep;
    return st;
}

/* Channel 0 of an n x c x s buffer, seen as n x 1 x s. */
static nn_status desc_channel0(struct nn_ctx *ctx, const struct nn__softmax_problem *p,
                               cudnnTensorDescriptor_t *out)
{
    int dims[4] = {(int)p->n, 1, (int)p->s, 1}, str[4] = {(int)(p->c * p->s), (int)p->s, 1, 1};
    cudnnTensorDescriptor_t d;
    NN__TRY(nn__cudnn_CreateTensorDescriptor(ctx, &d));
    nn_status st =
        nn__cudnn_SetTensorNdDescriptor(ctx, d, nn__cudnn_data_type(p->dtype), 4, dims, str);
    if (st != NN_OK) {
        destroy_tensor(ctx, d);
        return st;
    }
    *out = d;
    return NN_OK;
}

/* out = -sum_c a (a n x c x s, out n x s). cuDNN's log-softmax gradient at y = 0 is
 * g = a - sum_c a (exp(0) = 1), so -sum_c a = g - a in any one channel: channel 0. */
static nn_status neg_sum_c(struct nn_ctx *ctx, const char *fn, const struct nn__softmax_problem *p,
                           const void *a, void *out)
{
    size_t bytes = (size_t)(p->n * p->c * p->s) * nn_dtype_size(p->dtype);
    void *zeros = NULL, *g = NULL;
    cudnnTensorDescriptor_t ch0 = NULL, row = NULL;
    nn_status st = nn__dev_alloc_for(ctx, fn, bytes, &zeros);
    if (st == NN_OK) st = nn__dev_alloc_for(ctx, fn, bytes, &g);
    if (st == NN_OK)
        st = NN__CUDA(ctx, cudaMemsetAsync(zeros, 0, bytes, (cudaStream_t)ctx->stream));
    if (st == NN_OK) st = softmax_grad(ctx, fn, p, CUDNN_SOFTMAX_LOG, zeros, a, g, 0.0);
    if (st == NN_OK) st = desc_channel0(ctx, p, &ch0);
    if (st == NN_OK) st = desc4(ctx, p->dtype, p->n, 1, p->s, &row);
    if (st == NN_OK)
        st = op_tensor(ctx, p, CUDNN_OP_TENSOR_ADD, 1.0, ch0, g, -1.0, ch0, a, row, out);
    destroy_tensor(ctx, ch0);
    destroy_tensor(ctx, row);
    nn_error_info keep = ctx->last_error;
    if (zeros) (void)nn__dev_free_for(ctx, fn, zeros);
    if (g) (void)nn__dev_free_for(ctx, fn, g);
    ctx->last_error = keep;
    return st;
}

static void saved_free_cudnn(struct nn_ctx *ctx, struct nn__xent_saved *saved)
{
    if (!saved) return;
    nn_error_info keep = ctx->last_error;
    (void)nn__dev_free(ctx, saved->logp);
    if (saved->mask) (void)nn__dev_free(ctx, saved->mask);
    ctx->last_error = keep;
    nn__host_free(saved);
}

static nn_status xent_forward_cudnn(struct nn_ctx *ctx, const struct nn__softmax_problem *p,
                                    const nn_tensor *x, const int64_t *t, nn_tensor *loss,
                                    struct nn__xent_saved **saved_out,
                                    struct nn__softmax_note *note)
{
    const char *fn = "nn_softmax_cross_entropy_forward";
    if (saved_out) *saved_out = NULL;
    NN__TRY(check_int(ctx, fn, p));
    size_t w = nn_dtype_size(p->dtype);
    int64_t count = p->n * p->s;
    struct nn__xent_saved *sv = nn__host_calloc(1, sizeof *sv);
    if (!sv) return NN__FAIL(ctx, NN_E_OOM_HOST, "%s: out of host memory", fn);
    void *prod = NULL;
    cudnnTensorDescriptor_t full = NULL;
    nn_status st = nn__dev_alloc_for(ctx, fn, (size_t)(count * p->c) * w, &sv->logp);
    if (st == NN_OK) st = nn__dev_alloc_for(ctx, fn, (size_t)(count * p->c) * w, &prod);
    if (st == NN_OK) st = softmax_run(ctx, fn, p, CUDNN_SOFTMAX_LOG, x->data, sv->logp);
    if (st == NN_OK) st = mask_upload(ctx, fn, p, t, &sv->mask);
    if (st == NN_OK) st = desc4(ctx, p->dtype, p->n, p->c, p->s, &full);
    if (st == NN_OK)
        st = op_tensor(ctx, p, CUDNN_OP_TENSOR_MUL, 1.0, full, sv->mask, 1.0, full, sv->logp, full,
                       prod);
    if (st == NN_OK) st = neg_sum_c(ctx, fn, p, prod, loss->data);
    destroy_tensor(ctx, full);
    nn_status fst = prod ? nn__dev_free_for(ctx, fn, prod) : NN_OK;
    if (st == NN_OK) st = fst;
    if (st != NN_OK || !saved_out)
        saved_free_cudnn(ctx, sv);
    else
        *saved_out = sv;
    note_set(ctx, note, "cudnn-legacy+mask");
    return st;
}

static nn_status xent_backward_cudnn(struct nn_ctx *ctx, const struct nn__softmax_problem *p,
                                     const nn_tensor *x, const int64_t *t,
                                     struct nn__xent_saved *saved, const nn_tensor *dloss,
                                     nn_tensor *dx, struct nn__softmax_note *note)
{
    const char *fn = "nn_softmax_cross_entropy_backward";
    (void)x, (void)t;
    size_t w = nn_dtype_size(p->dtype);
    int64_t count = p->n * p->s;
    void *dy = NULL;
    cudnnTensorDescriptor_t full = NULL, row = NULL;
    NN__TRY(check_int(ctx, fn, p));
    nn_status st = nn__dev_alloc_for(ctx, fn, (size_t)(count * p->c) * w, &dy);
    if (st == NN_OK) st = desc4(ctx, p->dtype, p->n, p->c, p->s, &full);
    if (st == NN_OK) st = desc4(ctx, p->dtype, p->n, 1, p->s, &row);
    if (st == NN_OK)
        st = op_tensor(ctx, p, CUDNN_OP_TENSOR_MUL, -1.0, full, saved->mask, 1.0, row, dloss->data,
                       full, dy);
    double beta = (p->flags & NN_SOFTMAX_ACCUMULATE_DX) ? 1.0 : 0.0;
    if (st == NN_OK)
        st = softmax_grad(ctx, fn, p, CUDNN_SOFTMAX_LOG, saved->logp, dy, dx->data, beta);
    destroy_tensor(ctx, full);
    destroy_tensor(ctx, row);
    nn_status f1 = dy ? nn__dev_free_for(ctx, fn, dy) : NN_OK;
    note_set(ctx, note, "cudnn-legacy+mask");
    return st != NN_OK ? st : f1;
}

const struct nn__softmax_backend nn__softmax_backend_cudnn = {
    "cudnn",
    forward_cudnn,
    backward_cudnn,
    read_targets_cudnn,
    xent_forward_cudnn,
    xent_backward_cudnn,
    saved_free_cudnn,
};

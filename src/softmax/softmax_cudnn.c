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
 * (docs/PERFORMANCE.md), several times a language model's whole step in PyTorch.
 *
 * What a shape needs every call and can keep lives in the context's cache (kind 8, "softmax
 * xent scratch", below): the cuDNN tensor and op descriptors of both directions, the zeros the
 * sum over C reads, and a pinned host buffer that stages the mask, so its upload is asynchronous
 * (a copy from pageable memory makes the host wait for the stream first). A warm shape's calls
 * create no descriptor. The per-call buffers come from the pool: the log-softmax and the mask (kept
 * in the pullback: several forwards may be outstanding), the product M * L and the gradient g of
 * the sum (scratch of one call; a stream-ordered pool hit, and kept per shape they would race
 * when the context moves to another stream). */
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "core/cuda_load.h"

#include "core/alloc.h"
#include "core/capture.h"
#include "core/ctx.h"
#include "core/cuda_util.h"
#include "core/elem.h"
#include "core/error.h"
#include "core/kernel_image.h"
#include "core/log.h"
#include "cudnn/bindings_cudnn.h"
#include "cudnn/cache.h"
#include "cudnn/cache_kinds.h"
#include "cudnn/cudnn_ctx.h"
#include "cudnn/describe_cudnn.h"
#include "mem/mem.h"
#include "softmax/softmax_internal.h"

/* The log-softmax of the forward call, for backward. */
struct nn__xent_saved {
    void *logp; /* n x c x s, x's dtype, from the pool */
    void *mask; /* the targets' one-hot, n x c x s, x's dtype, from the pool */
};

/* ---------------------------------------------------------------------------------------------
 * The cross-entropy's per-shape scratch: a live entry of the context's cache
 */

struct xent_key {
    int32_t dtype; /* nn_dtype */
    int32_t unused;
    int64_t n, c, s;
    struct nn__cache_settings set;
};

/* Nothing to rebuild from: the scratch is made from the key. */
struct xent_record {
    int32_t unused[2];
};

struct xent_scratch {
    struct nn_ctx *ctx;
    cudnnTensorDescriptor_t full; /* n x c x s x 1, packed: x, the log-softmax, the mask, dx */
    cudnnTensorDescriptor_t row;  /* n x 1 x s x 1, packed: the loss and dloss */
    cudnnTensorDescriptor_t ch0;  /* channel 0 of a full buffer, seen as n x 1 x s x 1 */
    cudnnOpTensorDescriptor_t mul, add;
    size_t bytes; /* n x c x s elements of the key's dtype */
    void *zeros;  /* that many zero bytes, pool memory of ctx: a buffer kept across calls, whose
                   * memset and every read are nn__cudnn_shared_enter/leave brackets */
    unsigned char *stage; /* pinned host memory: the last mask uploaded */
    int64_t *last;        /* its targets (n * s), -1 before the first upload */
    cudaEvent_t staged;   /* after the last upload from stage */
    int uploading;        /* staged has been recorded: wait for it before rewriting stage */
};

static const struct nn__field xent_key_fields[] = {
    NN__FIELD(struct xent_key, dtype, NN__FIELD_I32), NN__FIELD(struct xent_key, n, NN__FIELD_I64),
    NN__FIELD(struct xent_key, c, NN__FIELD_I64),     NN__FIELD(struct xent_key, s, NN__FIELD_I64),
    NN__CACHE_SETTINGS_FIELDS(struct xent_key, set),  NN__FIELD_END,
};

static const struct nn__field xent_record_fields[] = {
    NN__FIELD(struct xent_record, unused, NN__FIELD_I32),
    NN__FIELD_END,
};

static const char *xent_key_invalid(const void *key)
{
    const struct xent_key *k = key;
    if (k->dtype != NN_DTYPE_F32 && k->dtype != NN_DTYPE_F64 && k->dtype != NN_DTYPE_F16 &&
        k->dtype != NN_DTYPE_BF16)
        return "dtype is unknown";
    if (k->n < 1 || k->c < 1 || k->s < 1 || k->n > INT_MAX || k->c > INT_MAX || k->s > INT_MAX)
        return "a size is outside 1..INT_MAX";
    return nn__cache_settings_invalid(&k->set);
}

/* Everything x holds (NULL members are skipped), not x itself. */
static void xent_scratch_release(struct xent_scratch *x)
{
    /* the last upload may still read the staging buffer */
    if (x->uploading) (void)cudaEventSynchronize(x->staged);
    if (x->staged) (void)cudaEventDestroy(x->staged);
    if (x->stage) (void)cudaFreeHost(x->stage);
    if (x->zeros) {
        struct nn__error_kept keep = nn__error_keep(x->ctx);
        /* the stream the free is ordered on waits for the last forward that may read them */
        nn__cudnn_shared_release(x->ctx);
        (void)nn__dev_free(x->ctx, x->zeros);
        nn__error_restore(x->ctx, &keep);
    }
    (void)cudaGetLastError();
    cudnnTensorDescriptor_t tensors[] = {x->full, x->row, x->ch0};
    for (int i = 0; i < 3; i++)
        if (tensors[i]) (void)cudnnDestroyTensorDescriptor(tensors[i]);
    if (x->mul) (void)cudnnDestroyOpTensorDescriptor(x->mul);
    if (x->add) (void)cudnnDestroyOpTensorDescriptor(x->add);
    nn__host_free(x->last);
}

static void xent_scratch_destroy(void *live)
{
    if (!live) return;
    xent_scratch_release(live);
    nn__host_free(live);
}

/* Not persisted: device scratch of this process, nothing to rebuild from. */
const struct nn__cache_kind nn__softmax_xent_kind = {
    .id = NN__SOFTMAX_XENT_KIND_ID,
    .name = "softmax xent scratch",
    .flags = NN__CACHE_KIND_NOT_PERSISTED,
    .key_size = sizeof(struct xent_key),
    .key_fields = xent_key_fields,
    .record_size = sizeof(struct xent_record),
    .record_fields = xent_record_fields,
    .key_invalid = xent_key_invalid,
    .destroy = xent_scratch_destroy,
};

static nn_status check_int(struct nn_ctx *ctx, const char *fn, const struct nn__softmax_problem *p)
{
    if (p->n > INT_MAX || p->c > INT_MAX || p->s > INT_MAX || p->c * p->s > INT_MAX)
        return NN__FAIL(ctx, NN_E_UNSUPPORTED,
                        "%s: cuDNN's softmax takes int sizes and strides, but x is N %lld x C %lld "
                        "x %lld",
                        fn, (long long)p->n, (long long)p->c, (long long)p->s);
    return NN_OK;
}

/* An a x b x c x 1 descriptor with strides str (sizes checked by check_int()). */
static nn_status tensor_desc(struct nn_ctx *ctx, nn_dtype t, int64_t a, int64_t b, int64_t c,
                             const int str[4], cudnnTensorDescriptor_t *out)
{
    int dims[4] = {(int)a, (int)b, (int)c, 1};
    return nn__cudnn_tensor_desc(ctx, t, 4, dims, str, out);
}

/* A packed a x b x c x 1 descriptor. */
static nn_status desc4(struct nn_ctx *ctx, nn_dtype t, int64_t a, int64_t b, int64_t c,
                       cudnnTensorDescriptor_t *out)
{
    int str[4] = {(int)(b * c), (int)c, 1, 1};
    return tensor_desc(ctx, t, a, b, c, str, out);
}

static cudnnDataType_t compute_type(nn_dtype t)
{
    return t == NN_DTYPE_F64 ? CUDNN_DATA_DOUBLE : CUDNN_DATA_FLOAT;
}

static nn_status op_desc(struct nn_ctx *ctx, nn_dtype t, cudnnOpTensorOp_t what,
                         cudnnOpTensorDescriptor_t *out)
{
    cudnnOpTensorDescriptor_t op;
    NN__TRY(nn__cudnn_CreateOpTensorDescriptor(ctx, &op));
    nn_status st =
        nn__cudnn_SetOpTensorDescriptor(ctx, op, what, compute_type(t), CUDNN_PROPAGATE_NAN);
    if (st != NN_OK) {
        struct nn__error_kept keep = nn__error_keep(ctx);
        (void)nn__cudnn_DestroyOpTensorDescriptor(ctx, op);
        nn__error_restore(ctx, &keep);
        return st;
    }
    *out = op;
    return NN_OK;
}

/* The descriptors backward's cuDNN calls use, and the size of a full buffer (n x c x s of p's
 * dtype, that of every buffer of both directions; sizes checked by check_int()). */
static nn_status xent_backward_descriptors(struct nn_ctx *ctx, const struct nn__softmax_problem *p,
                                           struct xent_scratch *x)
{
    x->bytes = (size_t)(p->n * p->c * p->s) * nn_dtype_size(p->dtype);
    NN__TRY(desc4(ctx, p->dtype, p->n, p->c, p->s, &x->full));
    NN__TRY(desc4(ctx, p->dtype, p->n, 1, p->s, &x->row));
    return op_desc(ctx, p->dtype, CUDNN_OP_TENSOR_MUL, &x->mul);
}

/* The descriptors of every cuDNN call of both directions. */
static nn_status xent_descriptors(struct nn_ctx *ctx, const struct nn__softmax_problem *p,
                                  struct xent_scratch *x)
{
    int ch0_str[4] = {(int)(p->c * p->s), (int)p->s, 1, 1};
    NN__TRY(xent_backward_descriptors(ctx, p, x));
    NN__TRY(tensor_desc(ctx, p->dtype, p->n, 1, p->s, ch0_str, &x->ch0));
    return op_desc(ctx, p->dtype, CUDNN_OP_TENSOR_ADD, &x->add);
}

static nn_status xent_scratch_make(struct nn_ctx *ctx, const char *fn,
                                   const struct nn__softmax_problem *p, struct xent_scratch **out)
{
    struct xent_scratch *x = nn__host_calloc(1, sizeof *x);
    int64_t count = p->n * p->s;
    if (x) x->last = nn__host_alloc((size_t)count * sizeof *x->last);
    if (!x || !x->last) {
        if (x) nn__host_free(x);
        return NN__FAIL(ctx, NN_E_OOM_HOST, "%s: out of host memory for the scratch of a shape",
                        fn);
    }
    for (int64_t i = 0; i < count; i++)
        x->last[i] = -1;
    x->ctx = ctx;
    cudaStream_t st = (cudaStream_t)ctx->stream;
    nn_status r = xent_descriptors(ctx, p, x);
    if (r == NN_OK) r = NN__CUDA(ctx, cudaEventCreateWithFlags(&x->staged, cudaEventDisableTiming));
    if (r == NN_OK) r = nn__dev_alloc_for(ctx, fn, x->bytes, &x->zeros);
    if (r == NN_OK) {
        nn__cudnn_shared_enter(ctx);
        r = NN__CUDA(ctx, cudaMemsetAsync(x->zeros, 0, x->bytes, st));
        nn__cudnn_shared_leave(ctx);
    }
    if (r == NN_OK && cudaMallocHost((void **)&x->stage, x->bytes) != cudaSuccess) {
        (void)cudaGetLastError();
        x->stage = NULL;
        r = NN__FAIL(ctx, NN_E_OOM_HOST,
                     "%s: cudaMallocHost refused %zu bytes of pinned memory for the target mask",
                     fn, x->bytes);
    }
    if (r == NN_OK) memset(x->stage, 0, x->bytes);
    if (r != NN_OK) {
        xent_scratch_destroy(x);
        return r;
    }
    *out = x;
    return NN_OK;
}

/* The cached scratch of p's shape (its key into *k), or NULL. */
static struct xent_scratch *
xent_scratch_find(struct nn_ctx *ctx, const struct nn__softmax_problem *p, struct xent_key *k)
{
    memset(k, 0, sizeof *k);
    k->dtype = (int32_t)p->dtype;
    k->n = p->n;
    k->c = p->c;
    k->s = p->s;
    nn__cache_settings_fill(ctx, &k->set);
    return nn__cache_lookup(nn__cudnn_plan_cache(ctx), nn__softmax_xent_kind.id, k, NULL);
}

/* The scratch of p's shape: the cache's, or made and inserted. A hit allocates nothing. */
static nn_status xent_scratch_get(struct nn_ctx *ctx, const char *fn,
                                  const struct nn__softmax_problem *p, struct xent_scratch **out)
{
    struct xent_key k;
    struct xent_scratch *x = xent_scratch_find(ctx, p, &k);
    if (x) {
        *out = x;
        return NN_OK;
    }
    NN__TRY(nn__capture_no_build(ctx, fn, "the descriptors and buffers of this shape"));
    NN__TRY(xent_scratch_make(ctx, fn, p, &x));
    struct nn__cache *c = nn__cudnn_plan_cache(ctx);
    struct xent_record rec;
    memset(&rec, 0, sizeof rec);
    nn_status st = nn__cache_insert(ctx, c, nn__softmax_xent_kind.id, &k, &rec, NULL, 0, x);
    if (st != NN_OK) {
        xent_scratch_destroy(x);
        return st;
    }
    *out = x;
    return NN_OK;
}

static void note_set(struct nn_ctx *ctx, struct nn__softmax_note *note, const char *impl)
{
    if (nn__verbose(ctx)) snprintf(note->impl, sizeof note->impl, "%s", impl);
}

/* y = (log-)softmax(x) over C; x and y are of d's shape. */
static nn_status softmax_call(struct nn_ctx *ctx, nn_dtype t, cudnnSoftmaxAlgorithm_t algo,
                              cudnnTensorDescriptor_t d, const void *x, void *y)
{
    cudnnHandle_t h;
    NN__TRY(nn__cudnn_handle(ctx, &h));
    union nn__cudnn_scale one, zero;
    return nn__cudnn_SoftmaxForward(ctx, h, algo, CUDNN_SOFTMAX_MODE_CHANNEL,
                                    nn__cudnn_scale(&one, t, 1.0), d, x,
                                    nn__cudnn_scale(&zero, t, 0.0), d, y);
}

/* dx = beta dx + the (log-)softmax gradient at y for dy; all of d's shape. */
static nn_status softmax_grad_call(struct nn_ctx *ctx, nn_dtype t, cudnnSoftmaxAlgorithm_t algo,
                                   cudnnTensorDescriptor_t d, const void *y, const void *dy,
                                   void *dx, double beta)
{
    cudnnHandle_t h;
    NN__TRY(nn__cudnn_handle(ctx, &h));
    union nn__cudnn_scale one, bt;
    return nn__cudnn_SoftmaxBackward(ctx, h, algo, CUDNN_SOFTMAX_MODE_CHANNEL,
                                     nn__cudnn_scale(&one, t, 1.0), d, y, d, dy,
                                     nn__cudnn_scale(&bt, t, beta), d, dx);
}

static cudnnSoftmaxAlgorithm_t algo_of(nn_softmax_mode m)
{
    return m == NN_SOFTMAX_MODE_LOG ? CUDNN_SOFTMAX_LOG : CUDNN_SOFTMAX_ACCURATE;
}

/* Softmax and its gradient keep nothing per shape: one descriptor for the one cuDNN call. */
static nn_status forward_cudnn(struct nn_ctx *ctx, const struct nn__softmax_problem *p,
                               const nn_tensor *x, nn_tensor *y, struct nn__softmax_note *note)
{
    note_set(ctx, note, "cudnn-legacy");
    NN__TRY(check_int(ctx, "nn_softmax_forward", p));
    cudnnTensorDescriptor_t d;
    NN__TRY(desc4(ctx, p->dtype, p->n, p->c, p->s, &d));
    nn_status st = softmax_call(ctx, p->dtype, algo_of(p->mode), d, x->data, y->data);
    nn__cudnn_tensor_desc_destroy(ctx, d);
    return st;
}

static nn_status backward_cudnn(struct nn_ctx *ctx, const struct nn__softmax_problem *p,
                                const nn_tensor *y, const nn_tensor *dy, nn_tensor *dx,
                                struct nn__softmax_note *note)
{
    note_set(ctx, note, "cudnn-legacy");
    NN__TRY(check_int(ctx, "nn_softmax_backward", p));
    double beta = (p->accumulate & NN_ACCUMULATE_DX) ? 1.0 : 0.0;
    cudnnTensorDescriptor_t d;
    NN__TRY(desc4(ctx, p->dtype, p->n, p->c, p->s, &d));
    nn_status st =
        softmax_grad_call(ctx, p->dtype, algo_of(p->mode), d, y->data, dy->data, dx->data, beta);
    nn__cudnn_tensor_desc_destroy(ctx, d);
    return st;
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

/* The targets' one-hot mask, n x c x s in x's dtype, into a new pool buffer *mask, staged in
 * the shape's pinned buffer: only the ones of the previous targets are cleared and the new ones
 * set (n * s elements, not a pass over n x c x s), once the previous upload from it has
 * finished (its event: in a training loop, long done). The copy is then asynchronous. */
static nn_status mask_upload(struct nn_ctx *ctx, const char *fn,
                             const struct nn__softmax_problem *p, struct xent_scratch *x,
                             const int64_t *t, void **mask)
{
    size_t w = nn_dtype_size(p->dtype);
    unsigned char one[8];
    nn__elem_one(p->dtype, one);
    if (x->uploading) {
        NN__TRY(NN__CUDA(ctx, cudaEventSynchronize(x->staged)));
        x->uploading = 0;
    }
    for (int64_t i = 0; i < p->n * p->s; i++) {
        int64_t n = i / p->s, k = i % p->s;
        if (x->last[i] >= 0)
            memset(x->stage + (size_t)((n * p->c + x->last[i]) * p->s + k) * w, 0, w);
        memcpy(x->stage + (size_t)((n * p->c + t[i]) * p->s + k) * w, one, w);
        x->last[i] = t[i];
    }
    cudaStream_t s = (cudaStream_t)ctx->stream;
    NN__TRY(nn__dev_alloc_for(ctx, fn, x->bytes, mask));
    NN__TRY(NN__CUDA(ctx, cudaMemcpyAsync(*mask, x->stage, x->bytes, cudaMemcpyHostToDevice, s)));
    if (NN__CUDA(ctx, cudaEventRecord(x->staged, s)) != NN_OK) {
        /* without the event, the next call could not tell when the copy is done */
        struct nn__error_kept keep = nn__error_keep(ctx);
        (void)cudaStreamSynchronize(s);
        (void)cudaGetLastError();
        nn__error_restore(ctx, &keep);
        return nn__error_in(ctx, fn);
    }
    x->uploading = 1;
    return NN_OK;
}
/* The one-hot mask from device targets, by a kernel (softmax_mask.cu): inside a graph capture
 * every launch builds it from the targets then in device memory; under NN_TARGETS_ON_DEVICE the
 * call does, without reading the targets on the host. */
struct nn__onehot {
    uint64_t mask, targets;
    int64_t n, c, s;
    int32_t dtype, wide;
};
_Static_assert(sizeof(struct nn__onehot) == 48, "struct nn__onehot is the kernel's parameter");

#if NN_HAVE_KERNEL_IMAGES
extern const unsigned char nn__softmax_mask_image[];
#define MASK_IMAGE nn__softmax_mask_image
#else
#define MASK_IMAGE NULL
#endif
static const char *const mask_names[] = {"nn__softmax_onehot", NULL};
static cudaKernel_t mask_kernels[1];
static struct nn__kernel_image mask_image =
    NN__KERNEL_IMAGE_INIT(MASK_IMAGE, "one-hot mask kernel", mask_names, mask_kernels);

static nn_status mask_on_device(struct nn_ctx *ctx, const char *fn,
                                const struct nn__softmax_problem *p, struct xent_scratch *x,
                                void **mask)
{
    const char *no = nn__kernel_image_load(&mask_image);
    if (no && ctx->capture)
        return NN__FAIL(ctx, NN_E_GRAPH,
                        "%s: inside a graph capture the targets' one-hot mask is made on the "
                        "device, and %s",
                        fn, no);
    if (no)
        return NN__FAIL(ctx, NN_E_UNSUPPORTED,
                        "%s: settings.xent_targets = NN_TARGETS_ON_DEVICE has the targets' one-hot "
                        "mask made on the device, and %s; use NN_TARGETS_CHECKED",
                        fn, no);
    NN__TRY(nn__dev_alloc_for(ctx, fn, x->bytes, mask));
    struct nn__onehot a = {(uint64_t)(uintptr_t)*mask,
                           (uint64_t)(uintptr_t)p->dev_targets,
                           p->n,
                           p->c,
                           p->s,
                           (int32_t)p->dtype,
                           p->index == NN_INDEX_I64};
    int64_t blocks = (p->n * p->c * p->s + 255) / 256;
    if (blocks > 4096) blocks = 4096;
    void *args[1] = {&a};
    return NN__CUDA(ctx,
                    cudaLaunchKernel((const void *)mask_kernels[0], (dim3){(unsigned)blocks, 1, 1},
                                     (dim3){256, 1, 1}, args, 0, (cudaStream_t)ctx->stream));
}

/* c = op(alpha_a * a, alpha_b * b) (b may be n x 1 x s, broadcast over C). */
static nn_status op_tensor(struct nn_ctx *ctx, nn_dtype t, cudnnOpTensorDescriptor_t op,
                           double alpha_a, cudnnTensorDescriptor_t da, const void *a,
                           double alpha_b, cudnnTensorDescriptor_t db, const void *b,
                           cudnnTensorDescriptor_t dc, void *c)
{
    cudnnHandle_t h;
    NN__TRY(nn__cudnn_handle(ctx, &h));
    union nn__cudnn_scale s1, s2, zero;
    return nn__cudnn_OpTensor(ctx, h, op, nn__cudnn_scale(&s1, t, alpha_a), da, a,
                              nn__cudnn_scale(&s2, t, alpha_b), db, b,
                              nn__cudnn_scale(&zero, t, 0.0), dc, c);
}

/* out = -sum_c a (a n x c x s, out n x s). cuDNN's log-softmax gradient at y = 0 is
 * g = a - sum_c a (exp(0) = 1), so -sum_c a = g - a in any one channel: channel 0. The zeros are
 * the shape's scratch. */
static nn_status neg_sum_c(struct nn_ctx *ctx, const char *fn, const struct nn__softmax_problem *p,
                           struct xent_scratch *x, const void *a, void *out)
{
    void *g = NULL;
    nn_status st = nn__dev_alloc_for(ctx, fn, x->bytes, &g);
    if (st == NN_OK)
        st = softmax_grad_call(ctx, p->dtype, CUDNN_SOFTMAX_LOG, x->full, x->zeros, a, g, 0.0);
    if (st == NN_OK)
        st = op_tensor(ctx, p->dtype, x->add, 1.0, x->ch0, g, -1.0, x->ch0, a, x->row, out);
    struct nn__error_kept keep = nn__error_keep(ctx);
    if (g) (void)nn__dev_free_for(ctx, fn, g);
    nn__error_restore(ctx, &keep);
    return st;
}

/* The pool buffers of what forward keeps for backward. */
static void saved_buffers_free(struct nn_ctx *ctx, struct nn__xent_saved *saved)
{
    struct nn__error_kept keep = nn__error_keep(ctx);
    if (saved->logp) (void)nn__dev_free(ctx, saved->logp);
    if (saved->mask) (void)nn__dev_free(ctx, saved->mask);
    nn__error_restore(ctx, &keep);
}

static void saved_free_cudnn(struct nn_ctx *ctx, struct nn__xent_saved *saved)
{
    if (!saved) return;
    saved_buffers_free(ctx, saved);
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
    struct xent_scratch *xs;
    NN__TRY(xent_scratch_get(ctx, fn, p, &xs));
    /* Inference keeps nothing: its buffers are tracked on the stack, not in a host allocation. */
    struct nn__xent_saved local = {NULL, NULL}, *sv = &local;
    if (saved_out && !(sv = nn__host_calloc(1, sizeof *sv)))
        return NN__FAIL(ctx, NN_E_OOM_HOST, "%s: out of host memory", fn);
    void *prod = NULL;
    nn_status st = nn__dev_alloc_for(ctx, fn, xs->bytes, &sv->logp);
    if (st == NN_OK) st = nn__dev_alloc_for(ctx, fn, xs->bytes, &prod);
    if (st == NN_OK)
        st = softmax_call(ctx, p->dtype, CUDNN_SOFTMAX_LOG, xs->full, x->data, sv->logp);
    if (st == NN_OK)
        st = p->dev_targets ? mask_on_device(ctx, fn, p, xs, &sv->mask)
                            : mask_upload(ctx, fn, p, xs, t, &sv->mask);
    if (st == NN_OK)
        st = op_tensor(ctx, p->dtype, xs->mul, 1.0, xs->full, sv->mask, 1.0, xs->full, sv->logp,
                       xs->full, prod);
    if (st == NN_OK) {
        /* the zeros are kept across calls, perhaps on other streams (cudnn_ctx.h) */
        nn__cudnn_shared_enter(ctx);
        st = neg_sum_c(ctx, fn, p, xs, prod, loss->data);
        nn__cudnn_shared_leave(ctx);
    }
    nn_status fst = prod ? nn__dev_free_for(ctx, fn, prod) : NN_OK;
    if (st == NN_OK) st = fst;
    if (st == NN_OK && saved_out) {
        *saved_out = sv;
    } else {
        saved_buffers_free(ctx, sv);
        if (sv != &local) nn__host_free(sv);
    }
    note_set(ctx, note, "cudnn-legacy+mask");
    return st;
}

/* The shape's scratch again, for its descriptors: a hit, unless the cache dropped it since the
 * forward call. Then only backward's descriptors are made, for this call (the zeros and the
 * staging buffer are forward's, which makes the whole scratch again). */
static nn_status xent_backward_cudnn(struct nn_ctx *ctx, const struct nn__softmax_problem *p,
                                     const nn_tensor *x, const int64_t *t,
                                     struct nn__xent_saved *saved, const nn_tensor *dloss,
                                     nn_tensor *dx, struct nn__softmax_note *note)
{
    const char *fn = "nn_softmax_cross_entropy_backward";
    (void)x, (void)t;
    void *dy = NULL;
    NN__TRY(check_int(ctx, fn, p));
    struct xent_key k;
    struct xent_scratch own, *xs = xent_scratch_find(ctx, p, &k);
    if (!xs) {
        memset(&own, 0, sizeof own);
        nn_status st = xent_backward_descriptors(ctx, p, &own);
        if (st != NN_OK) {
            xent_scratch_release(&own);
            return st;
        }
        xs = &own;
    }
    nn_status st = nn__dev_alloc_for(ctx, fn, xs->bytes, &dy);
    if (st == NN_OK)
        st = op_tensor(ctx, p->dtype, xs->mul, -1.0, xs->full, saved->mask, 1.0, xs->row,
                       dloss->data, xs->full, dy);
    double beta = (p->accumulate & NN_ACCUMULATE_DX) ? 1.0 : 0.0;
    if (st == NN_OK)
        st = softmax_grad_call(ctx, p->dtype, CUDNN_SOFTMAX_LOG, xs->full, saved->logp, dy,
                               dx->data, beta);
    nn_status f1 = dy ? nn__dev_free_for(ctx, fn, dy) : NN_OK;
    if (xs == &own) xent_scratch_release(&own);
    note_set(ctx, note, "cudnn-legacy+mask");
    return st != NN_OK ? st : f1;
}

/* The pool bytes of xent_forward_cudnn at its peak (in neg_sum_c: the log-softmax, the product,
 * the mask and the sum's gradient, each of the scratch's size) and of xent_backward_cudnn (its
 * dy); the softmax calls take none. Sizes beyond int are refused as the calls refuse them. The
 * shape's scratch (which both calls use) is made here, so that the call takes none. */
static nn_status workspace_cudnn(struct nn_ctx *ctx, const struct nn__softmax_problem *p,
                                 int backward, size_t *bytes)
{
    const char *fn =
        p->xent ? "nn_softmax_cross_entropy_workspace_size" : "nn_softmax_workspace_size";
    NN__TRY(check_int(ctx, fn, p)); /* as both calls */
    if (!p->xent) {
        *bytes = 0;
        return NN_OK;
    }
    struct xent_scratch *xs;
    NN__TRY(xent_scratch_get(ctx, fn, p, &xs));
    *bytes = backward ? xs->bytes : 4 * xs->bytes;
    return NN_OK;
}

const struct nn__softmax_backend nn__softmax_backend_cudnn = {
    "cudnn",
    forward_cudnn,
    backward_cudnn,
    read_targets_cudnn,
    xent_forward_cudnn,
    xent_backward_cudnn,
    saved_free_cudnn,
    workspace_cudnn,
};

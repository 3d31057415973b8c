/* Softmax on cuDNN's legacy calls (cudnnSoftmaxForward / cudnnSoftmaxBackward, which cuDNN 9
 * keeps), over the channel dim of x seen as n x c x s x 1 (CUDNN_SOFTMAX_MODE_CHANNEL).
 *
 * The cross-entropy: forward is cuDNN's log-softmax L into a pool buffer, then nnprim's kernel
 * (softmax_xent.cu) picks loss = -L[t] and copies the targets, as int64, into a pool buffer; both
 * buffers are kept for backward, which is one kernel: dx = (exp(L) - onehot(t)) * dloss. Host
 * targets (checked on the host, softmax.c) reach the device through a pinned staging buffer kept
 * per shape, so their upload is asynchronous (a copy from pageable memory makes the host wait for
 * the stream first); device targets (inside a graph capture, or under NN_TARGETS_ON_DEVICE) are
 * read by the kernel. cuDNN's softmax gradient over a row of C elements in CHANNEL mode took
 * about 1.3 ns per element on the H100 (docs/PERFORMANCE.md), too slow to build the loss from.
 *
 * What a shape needs every call and can keep lives in the context's cache (kind 8, "softmax
 * xent scratch", below): the log-softmax's tensor descriptor, the staging buffer and the event
 * after its last upload. A warm shape's calls create no descriptor. */
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "core/cuda_load.h"

#include "core/alloc.h"
#include "core/capture.h"
#include "core/ctx.h"
#include "core/cuda_util.h"
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

/* What the forward keeps for backward. */
struct nn__xent_saved {
    void *logp;    /* the log-softmax, n x c x s, x's dtype, from the pool */
    void *targets; /* n x s int64, from the pool */
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
    cudnnTensorDescriptor_t full; /* n x c x s x 1, packed: x and the log-softmax */
    size_t bytes;                 /* n x c x s elements of the key's dtype */
    size_t tbytes;                /* n x s int64 targets */
    int64_t *stage;               /* pinned host memory: the last targets uploaded */
    cudaEvent_t staged;           /* after the last upload from stage */
    int uploading;                /* staged has been recorded: wait for it before rewriting stage */
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
    (void)cudaGetLastError();
    if (x->full) (void)cudnnDestroyTensorDescriptor(x->full);
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

static nn_status xent_scratch_make(struct nn_ctx *ctx, const char *fn,
                                   const struct nn__softmax_problem *p, struct xent_scratch **out)
{
    struct xent_scratch *x = nn__host_calloc(1, sizeof *x);
    if (!x)
        return NN__FAIL(ctx, NN_E_OOM_HOST, "%s: out of host memory for the scratch of a shape",
                        fn);
    x->ctx = ctx;
    x->bytes = (size_t)(p->n * p->c * p->s) * nn_dtype_size(p->dtype);
    x->tbytes = (size_t)(p->n * p->s) * sizeof *x->stage;
    nn_status r = desc4(ctx, p->dtype, p->n, p->c, p->s, &x->full);
    if (r == NN_OK) r = NN__CUDA(ctx, cudaEventCreateWithFlags(&x->staged, cudaEventDisableTiming));
    if (r == NN_OK && cudaMallocHost((void **)&x->stage, x->tbytes) != cudaSuccess) {
        (void)cudaGetLastError();
        x->stage = NULL;
        r = NN__FAIL(ctx, NN_E_OOM_HOST,
                     "%s: cudaMallocHost refused %zu bytes of pinned memory for the targets", fn,
                     x->tbytes);
    }
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

/* The host targets (n * s, checked) into the pool buffer dst, staged in the shape's pinned
 * buffer once the previous upload from it has finished (its event: in a training loop, long
 * done). The copy is then asynchronous. */
static nn_status targets_upload(struct nn_ctx *ctx, struct xent_scratch *x, const int64_t *t,
                                void *dst)
{
    if (x->uploading) {
        NN__TRY(NN__CUDA(ctx, cudaEventSynchronize(x->staged)));
        x->uploading = 0;
    }
    memcpy(x->stage, t, x->tbytes);
    cudaStream_t s = (cudaStream_t)ctx->stream;
    NN__TRY(NN__CUDA(ctx, cudaMemcpyAsync(dst, x->stage, x->tbytes, cudaMemcpyHostToDevice, s)));
    if (NN__CUDA(ctx, cudaEventRecord(x->staged, s)) != NN_OK) {
        /* without the event, the next call could not tell when the copy is done */
        struct nn__error_kept keep = nn__error_keep(ctx);
        (void)cudaStreamSynchronize(s);
        (void)cudaGetLastError();
        nn__error_restore(ctx, &keep);
        return nn__error_in(ctx, "nn_softmax_cross_entropy_forward");
    }
    x->uploading = 1;
    return NN_OK;
}

/* The kernels of softmax_xent.cu; struct nn__xent_args is their parameter byte for byte. */
struct nn__xent_args {
    uint64_t logp, targets, saved, loss, dloss, dx;
    int64_t n, c, s;
    int32_t dtype, wide, acc, unused;
};
_Static_assert(sizeof(struct nn__xent_args) == 88,
               "struct nn__xent_args is the kernels' parameter");

#if NN_HAVE_KERNEL_IMAGES
extern const unsigned char nn__softmax_xent_image[];
#define XENT_IMAGE nn__softmax_xent_image
#else
#define XENT_IMAGE NULL
#endif
static const char *const xent_names[] = {"nn__xent_pick", "nn__xent_grad", NULL};
static cudaKernel_t xent_kernels[2];
static struct nn__kernel_image xent_image =
    NN__KERNEL_IMAGE_INIT(XENT_IMAGE, "cross-entropy kernels", xent_names, xent_kernels);

static nn_status kernels_ready(struct nn_ctx *ctx, const char *fn)
{
    const char *no = nn__kernel_image_load(&xent_image);
    if (no)
        return NN__FAIL(ctx, NN_E_UNSUPPORTED,
                        "%s: the cross-entropy on cuDNN runs nnprim's own kernels, and %s", fn, no);
    return NN_OK;
}

/* Kernel k over count elements (a grid-stride loop). */
static nn_status launch(struct nn_ctx *ctx, int k, struct nn__xent_args *a, int64_t count)
{
    int64_t blocks = (count + 255) / 256;
    if (blocks > 4096) blocks = 4096;
    void *args[1] = {a};
    return NN__CUDA(ctx,
                    cudaLaunchKernel((const void *)xent_kernels[k], (dim3){(unsigned)blocks, 1, 1},
                                     (dim3){256, 1, 1}, args, 0, (cudaStream_t)ctx->stream));
}

/* The pool buffers of what forward keeps for backward. */
static void saved_buffers_free(struct nn_ctx *ctx, struct nn__xent_saved *saved)
{
    struct nn__error_kept keep = nn__error_keep(ctx);
    if (saved->logp) (void)nn__dev_free(ctx, saved->logp);
    if (saved->targets) (void)nn__dev_free(ctx, saved->targets);
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
    NN__TRY(kernels_ready(ctx, fn));
    struct xent_scratch *xs;
    NN__TRY(xent_scratch_get(ctx, fn, p, &xs));
    /* Inference keeps nothing: its buffers are tracked on the stack, not in a host allocation. */
    struct nn__xent_saved local = {NULL, NULL}, *sv = &local;
    if (saved_out && !(sv = nn__host_calloc(1, sizeof *sv)))
        return NN__FAIL(ctx, NN_E_OOM_HOST, "%s: out of host memory", fn);
    nn_status st = nn__dev_alloc_for(ctx, fn, xs->bytes, &sv->logp);
    if (st == NN_OK) st = nn__dev_alloc_for(ctx, fn, xs->tbytes, &sv->targets);
    if (st == NN_OK)
        st = softmax_call(ctx, p->dtype, CUDNN_SOFTMAX_LOG, xs->full, x->data, sv->logp);
    if (st == NN_OK && !p->dev_targets) st = targets_upload(ctx, xs, t, sv->targets);
    if (st == NN_OK) {
        struct nn__xent_args a = {
            .logp = (uint64_t)(uintptr_t)sv->logp,
            .targets = (uint64_t)(uintptr_t)(p->dev_targets ? p->dev_targets : sv->targets),
            .saved = (uint64_t)(uintptr_t)sv->targets,
            .loss = (uint64_t)(uintptr_t)loss->data,
            .n = p->n,
            .c = p->c,
            .s = p->s,
            .dtype = (int32_t)p->dtype,
            .wide = !p->dev_targets || p->index == NN_INDEX_I64,
        };
        st = launch(ctx, 0, &a, p->n * p->s);
    }
    if (st == NN_OK && saved_out) {
        *saved_out = sv;
    } else {
        saved_buffers_free(ctx, sv);
        if (sv != &local) nn__host_free(sv);
    }
    note_set(ctx, note, "cudnn-legacy+kernel");
    return st;
}

static nn_status xent_backward_cudnn(struct nn_ctx *ctx, const struct nn__softmax_problem *p,
                                     const nn_tensor *x, const int64_t *t,
                                     struct nn__xent_saved *saved, const nn_tensor *dloss,
                                     nn_tensor *dx, struct nn__softmax_note *note)
{
    const char *fn = "nn_softmax_cross_entropy_backward";
    (void)x, (void)t;
    NN__TRY(check_int(ctx, fn, p));
    NN__TRY(kernels_ready(ctx, fn));
    struct nn__xent_args a = {
        .logp = (uint64_t)(uintptr_t)saved->logp,
        .saved = (uint64_t)(uintptr_t)saved->targets,
        .dloss = (uint64_t)(uintptr_t)dloss->data,
        .dx = (uint64_t)(uintptr_t)dx->data,
        .n = p->n,
        .c = p->c,
        .s = p->s,
        .dtype = (int32_t)p->dtype,
        .acc = (p->accumulate & NN_ACCUMULATE_DX) != 0,
    };
    note_set(ctx, note, "kernel");
    return launch(ctx, 1, &a, p->n * p->c * p->s);
}

/* The pool bytes of xent_forward_cudnn (the log-softmax and the targets, both kept in a
 * training-mode pullback until backward) and of xent_backward_cudnn (none: one kernel writes dx);
 * the softmax calls take none. Sizes beyond int are refused as the calls refuse them. The shape's
 * scratch is made here, so that the call takes none. */
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
    *bytes = backward ? 0 : xs->bytes + xs->tbytes;
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

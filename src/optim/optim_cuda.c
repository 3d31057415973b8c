/* The GPU optimizer: nnprim's own kernels (optim.cu), launched on the context's stream. One device
 * block holds the header the kernels read (hyper-parameters, step count, clipping coefficient,
 * completion counters), the clipping pass's partial sums and the state. The launches' parameters
 * are made once, at create; a step writes the gradients' pointers into them and launches. */
#include <stdio.h>

#include "core/alloc.h"
#include "core/capture.h"
#include "core/ctx.h"
#include "core/cuda_util.h"
#include "core/error.h"
#include "core/kernel_image.h"
#include "mem/mem.h"
#include "optim/optim_internal.h"

#if NN_HAVE_KERNEL_IMAGES
/* The fat binary of optim.cu, generated at build time (src/meson.build: nn_cuda_images). */
extern const unsigned char nn__optim_image[];
#define IMAGE nn__optim_image
#else
#define IMAGE NULL
#endif

enum { K_NORM, K_UPDATE, K_INIT, K_SET_LR };
static const char *const names[] = {"nn__optim_norm", "nn__optim_update", "nn__optim_init",
                                    "nn__optim_set_lr", NULL};
static cudaKernel_t kernels[4];
static struct nn__kernel_image image =
    NN__KERNEL_IMAGE_INIT(IMAGE, "optimizer kernels", names, kernels);

_Static_assert(sizeof(struct nn__optim_launch) <= 4096, "a launch's parameter fits in 4 KiB");
_Static_assert(NN_DTYPE_F32 == 1 && NN_DTYPE_F64 == 2, "the kernels' dtype codes");
_Static_assert(NN_OPTIM_SGD == NN__OPTIM_SGD && NN_OPTIM_ADAM == NN__OPTIM_ADAM &&
                   NN_OPTIM_ADAMW == NN__OPTIM_ADAMW,
               "the kernels' kind codes");

struct nn__optim_cuda {
    void *block; /* from the pool: header, partials, state */
    struct nn__optim_dev *dev;
    char *state;
    int launches;                   /* per kernel and step */
    struct nn__optim_launch *l;     /* each launch's parameter; g filled at every step */
    unsigned *norm_blocks, *blocks; /* grid of each launch of the clipping pass and the update */
};

#define ALIGN(x) (((x) + 255) & ~(size_t)255)

static size_t header_bytes(void)
{
    return ALIGN(sizeof(struct nn__optim_dev));
}

static unsigned grid_for(uint64_t most, uint64_t per_block, unsigned cap)
{
    uint64_t b = (most + per_block - 1) / per_block;
    return b < 1 ? 1 : b > cap ? cap : (unsigned)b;
}

/* The launches' parameters and grids (host memory only). */
static nn_status plan_launches(struct nn_ctx *ctx, const char *fn, struct nn_optim *opt,
                               struct nn__optim_cuda *c, unsigned partials)
{
    int per = NN__OPTIM_TENSORS_MAX;
    c->launches = (opt->n + per - 1) / per;
    c->l = nn__host_calloc((size_t)c->launches, sizeof *c->l);
    c->norm_blocks = nn__host_calloc((size_t)c->launches, sizeof *c->norm_blocks);
    c->blocks = nn__host_calloc((size_t)c->launches, sizeof *c->blocks);
    if (!c->l || !c->norm_blocks || !c->blocks)
        return NN__FAIL(ctx, NN_E_OOM_HOST, "%s: out of host memory for the launches", fn);
    unsigned norm_cap = partials / (unsigned)c->launches, base = 0;
    int clip = opt->hyper.max_grad_norm > 0;
    for (int j = 0; j < c->launches; j++) {
        struct nn__optim_launch *l = &c->l[j];
        uint64_t most = 0;
        for (int i = j * per; i < opt->n && i < (j + 1) * per; i++) {
            int k = i - j * per;
            l->p[k] = (uintptr_t)opt->p[i].data;
            l->n[k] = (uint64_t)nn_tensor_numel(&opt->p[i]);
            if (opt->states > 0) l->s1[k] = (uintptr_t)(c->state + opt->state_off[i * opt->states]);
            if (opt->states > 1)
                l->s2[k] = (uintptr_t)(c->state + opt->state_off[i * opt->states + 1]);
            if (l->n[k] > most) most = l->n[k];
            l->count++;
        }
        l->dev = (uintptr_t)c->dev;
        l->partial = (uintptr_t)((char *)c->block + header_bytes());
        l->dtype = (unsigned)opt->dtype;
        l->kind = (unsigned)opt->params.kind;
        l->nesterov = (unsigned)opt->params.nesterov;
        l->clip = (unsigned)clip;
        l->last = j == c->launches - 1;
        /* 4 elements a thread per pass of the update, 8 of the reduction */
        c->blocks[j] = grid_for(most, NN__OPTIM_THREADS * 4, 1024);
        c->norm_blocks[j] = grid_for(most, NN__OPTIM_THREADS * 8, norm_cap);
        l->partial_base = base;
        base += c->norm_blocks[j];
    }
    for (int j = 0; j < c->launches; j++)
        c->l[j].partial_count = base;
    return NN_OK;
}

static nn_status launch(struct nn_ctx *ctx, int k, unsigned blocks, unsigned threads, void **args)
{
    return NN__CUDA(ctx,
                    cudaLaunchKernel((const void *)kernels[k], (dim3){blocks, 1, 1},
                                     (dim3){threads, 1, 1}, args, 0, (cudaStream_t)ctx->stream));
}

static void destroy_cuda(struct nn_ctx *ctx, struct nn_optim *opt)
{
    struct nn__optim_cuda *c = opt->cuda;
    if (!c) return;
    if (c->block) {
        /* the pool frees in ctx's stream order: after the optimizer's queued work */
        struct nn__error_kept keep = nn__error_keep(ctx);
        if (nn__stream_follow(ctx, "nn_optim_free", &opt->stream, &opt->stream_id) != NN_OK) {
            (void)cudaStreamSynchronize((cudaStream_t)opt->stream);
            (void)cudaGetLastError();
        }
        (void)nn__dev_free_for(ctx, "nn_optim_free", c->block);
        nn__error_restore(ctx, &keep);
    }
    nn__host_free(c->l);
    nn__host_free(c->norm_blocks);
    nn__host_free(c->blocks);
    nn__host_free(c);
    opt->cuda = NULL;
}

static nn_status create_cuda(struct nn_ctx *ctx, const char *fn, struct nn_optim *opt)
{
    const char *no = nn__kernel_image_load(&image);
    if (no)
        return NN__FAIL(ctx, NN_E_UNSUPPORTED,
                        "%s: an optimizer on a cuDNN context runs nnprim's own kernels, but %s", fn,
                        no);
    struct nn__optim_cuda *c = nn__host_calloc(1, sizeof *c);
    if (!c) return NN__FAIL(ctx, NN_E_OOM_HOST, "%s: out of host memory for the optimizer", fn);
    opt->cuda = c;
    int launches = (opt->n + NN__OPTIM_TENSORS_MAX - 1) / NN__OPTIM_TENSORS_MAX;
    unsigned partials = launches > NN__OPTIM_PARTIALS ? (unsigned)launches : NN__OPTIM_PARTIALS;
    size_t state_at = header_bytes() + ALIGN(partials * sizeof(double));
    size_t bytes = state_at + opt->state_bytes;
    if (bytes < opt->state_bytes)
        return NN__FAIL(ctx, NN_E_OVERFLOW, "%s: the optimizer's state overflows size_t", fn);
    NN__TRY(nn__dev_alloc_for(ctx, fn, bytes, &c->block));
    c->dev = c->block;
    c->state = (char *)c->block + state_at;
    opt->stream = ctx->stream;
    opt->stream_id = ctx->stream_id;
    NN__TRY(plan_launches(ctx, fn, opt, c, partials));
    cudaStream_t s = (cudaStream_t)ctx->stream;
    if (opt->state_bytes)
        NN__TRY_IN(ctx, fn, NN__CUDA(ctx, cudaMemsetAsync(c->state, 0, opt->state_bytes, s)));
    unsigned long long dev = (uintptr_t)c->dev;
    void *args[] = {&dev, &opt->hyper};
    NN__TRY_IN(ctx, fn, launch(ctx, K_INIT, 1, 1, args));
    return NN_OK;
}

static nn_status step_cuda(struct nn_ctx *ctx, struct nn_optim *opt, const nn_tensor *grads,
                           struct nn__optim_note *note)
{
    const char *fn = "nn_optim_step";
    struct nn__optim_cuda *c = opt->cuda;
    NN__TRY(nn__stream_follow(ctx, fn, &opt->stream, &opt->stream_id));
    for (int i = 0; i < opt->n; i++)
        c->l[i / NN__OPTIM_TENSORS_MAX].g[i % NN__OPTIM_TENSORS_MAX] = (uintptr_t)grads[i].data;
    int clip = opt->hyper.max_grad_norm > 0;
    for (int j = 0; clip && j < c->launches; j++) {
        void *args[] = {&c->l[j]};
        NN__TRY_IN(ctx, fn, launch(ctx, K_NORM, c->norm_blocks[j], NN__OPTIM_THREADS, args));
    }
    for (int j = 0; j < c->launches; j++) {
        void *args[] = {&c->l[j]};
        NN__TRY_IN(ctx, fn, launch(ctx, K_UPDATE, c->blocks[j], NN__OPTIM_THREADS, args));
    }
    snprintf(note->impl, sizeof note->impl, "multi-tensor %d launch%s",
             c->launches * (clip ? 2 : 1), c->launches * (clip ? 2 : 1) > 1 ? "es" : "");
    return NN_OK;
}

/* NN_E_GRAPH naming fn inside nnprim's capture (graph.h), NN_E_UNSUPPORTED while someone else
 * captures ctx's stream. */
static nn_status not_capturing(struct nn_ctx *ctx, const char *fn, const char *why)
{
    if (ctx->capture)
        return NN__FAIL(ctx, NN_E_GRAPH,
                        "%s: a graph capture is open on the context, and %s; call it before "
                        "nn_graph_begin() or after nn_graph_end()",
                        fn, why);
    enum cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
    NN__TRY_IN(ctx, fn, NN__CUDA(ctx, cudaStreamIsCapturing((cudaStream_t)ctx->stream, &cs)));
    if (cs != cudaStreamCaptureStatusNone)
        return NN__FAIL(ctx, NN_E_UNSUPPORTED,
                        "%s: the context's stream is capturing a CUDA graph, and %s; call it "
                        "outside the capture",
                        fn, why);
    return NN_OK;
}

static nn_status set_lr_cuda(struct nn_ctx *ctx, struct nn_optim *opt, double lr)
{
    const char *fn = "nn_optim_set_lr";
    NN__TRY(not_capturing(ctx, fn, "the new lr would be baked into the graph"));
    NN__TRY(nn__stream_follow(ctx, fn, &opt->stream, &opt->stream_id));
    unsigned long long dev = (uintptr_t)opt->cuda->dev;
    void *args[] = {&dev, &lr};
    NN__TRY_IN(ctx, fn, launch(ctx, K_SET_LR, 1, 1, args));
    return NN_OK;
}

static nn_status get_step_cuda(struct nn_ctx *ctx, struct nn_optim *opt, int64_t *step)
{
    const char *fn = "nn_optim_get_step";
    NN__TRY(not_capturing(ctx, fn, "reading the count waits for the stream"));
    NN__TRY(nn__stream_follow(ctx, fn, &opt->stream, &opt->stream_id));
    long long v = 0;
    cudaStream_t s = (cudaStream_t)ctx->stream;
    NN__TRY_IN(ctx, fn,
               NN__CUDA(ctx, cudaMemcpyAsync(&v, &opt->cuda->dev->step, sizeof v,
                                             cudaMemcpyDeviceToHost, s)));
    NN__TRY_IN(ctx, fn, NN__CUDA(ctx, cudaStreamSynchronize(s)));
    *step = v;
    return NN_OK;
}

static nn_status reset_cuda(struct nn_ctx *ctx, struct nn_optim *opt)
{
    const char *fn = "nn_optim_reset";
    struct nn__optim_cuda *c = opt->cuda;
    cudaStream_t s;
    NN__TRY(nn__stream_follow(ctx, fn, &opt->stream, &opt->stream_id));
    s = (cudaStream_t)ctx->stream;
    if (opt->state_bytes)
        NN__TRY_IN(ctx, fn, NN__CUDA(ctx, cudaMemsetAsync(c->state, 0, opt->state_bytes, s)));
    NN__TRY_IN(ctx, fn, NN__CUDA(ctx, cudaMemsetAsync(&c->dev->step, 0, sizeof c->dev->step, s)));
    return NN_OK;
}

const struct nn__optim_backend nn__optim_backend_cuda = {
    "cuda", create_cuda, step_cuda, set_lr_cuda, get_step_cuda, reset_cuda, destroy_cuda};

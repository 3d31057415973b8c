/* Layer normalisation on a cuDNN context by nnprim's own kernels (layernorm.cu), launched on the
 * context's stream. cuDNN 9.14 has layer norm only as a graph operation whose engines vary by
 * dtype and shape; these kernels take every dtype and shape, in a fixed summation order. The
 * forward keeps each row's mean and rstd (two doubles) in a pool buffer for backward. */
#include <stdio.h>

#include "core/alloc.h"
#include "core/ctx.h"
#include "core/cuda_util.h"
#include "core/error.h"
#include "core/kernel_image.h"
#include "layernorm/layernorm_internal.h"
#include "layernorm/layernorm_kernel.h"
#include "mem/mem.h"

#if NN_HAVE_KERNEL_IMAGES
/* The fat binary of layernorm.cu, generated at build time (src/meson.build: nn_cuda_images). */
extern const unsigned char nn__layernorm_image[];
#define IMAGE nn__layernorm_image
#else
#define IMAGE NULL
#endif

enum { K_FORWARD, K_DATA, K_PARAM, K_FINISH };
static const char *const names[] = {"nn__layernorm_forward", "nn__layernorm_backward_data",
                                    "nn__layernorm_backward_param", "nn__layernorm_param_finish",
                                    NULL};
static cudaKernel_t kernels[4];
static struct nn__kernel_image image =
    NN__KERNEL_IMAGE_INIT(IMAGE, "layer-norm kernels", names, kernels);

_Static_assert(NN_DTYPE_F32 == 1 && NN_DTYPE_F64 == 2 && NN_DTYPE_F16 == 3 && NN_DTYPE_BF16 == 4,
               "the kernels' dtype codes");

/* Row blocks of one launch: a few waves on the largest devices; each strides over the rest. */
#define MOST_ROW_BLOCKS 8192
/* The most parts the rows of a column are split into (the grid's y, and the partials' size). */
#define MOST_PARTS      256

struct nn__layernorm_saved {
    void *stats; /* pool memory: 2 m doubles, mean and rstd per row */
};

static nn_status ready(struct nn_ctx *ctx, const char *fn, const struct nn__layernorm_problem *p)
{
    const char *no = nn__kernel_image_load(&image);
    if (no)
        return NN__FAIL(ctx, NN_E_UNSUPPORTED,
                        "%s: layer norm on a cuDNN context runs nnprim's own kernels, but %s", fn,
                        no);
    if (p->d > 0x7fffffffLL * NN__LAYERNORM_THREADS)
        return NN__FAIL(ctx, NN_E_UNSUPPORTED,
                        "%s: a row of %lld elements is beyond the kernels' grid (at most %lld)", fn,
                        (long long)p->d, 0x7fffffffLL * NN__LAYERNORM_THREADS);
    return NN_OK;
}

static nn_status launch(struct nn_ctx *ctx, int k, dim3 grid, struct nn__layernorm_args *a)
{
    void *args[1] = {a};
    return NN__CUDA(ctx, cudaLaunchKernel((const void *)kernels[k], grid,
                                          (dim3){NN__LAYERNORM_THREADS, 1, 1}, args, 0,
                                          (cudaStream_t)ctx->stream));
}

static dim3 row_grid(int64_t m)
{
    return (dim3){(unsigned)(m < MOST_ROW_BLOCKS ? m : MOST_ROW_BLOCKS), 1, 1};
}

static unsigned long long addr(const nn_tensor *t)
{
    return t ? (uintptr_t)t->data : 0;
}

static void saved_free_cuda(struct nn_ctx *ctx, struct nn__layernorm_saved *s)
{
    if (!s) return;
    /* the pool reuses the block only after the queued backward (stream order) */
    if (s->stats) (void)nn__dev_free(ctx, s->stats);
    nn__host_free(s);
}

static nn_status forward_cuda(struct nn_ctx *ctx, const char *fn,
                              const struct nn__layernorm_problem *p, const nn_tensor *x,
                              const nn_tensor *gamma, const nn_tensor *beta, nn_tensor *y,
                              struct nn__layernorm_saved **saved_out,
                              struct nn__layernorm_note *note)
{
    NN__TRY(ready(ctx, fn, p));
    struct nn__layernorm_saved *s = NULL;
    if (saved_out) {
        s = nn__host_calloc(1, sizeof *s);
        if (!s) return NN__FAIL(ctx, NN_E_OOM_HOST, "%s: out of host memory for the pullback", fn);
        nn_status st = nn__dev_alloc_for(ctx, fn, (size_t)p->m * 2 * sizeof(double), &s->stats);
        if (st != NN_OK) {
            saved_free_cuda(ctx, s);
            return st;
        }
    }
    struct nn__layernorm_args a = {0};
    a.x = addr(x);
    a.gamma = addr(gamma);
    a.beta = addr(beta);
    a.y = addr(y);
    a.stats = s ? (uintptr_t)s->stats : 0;
    a.m = p->m;
    a.d = p->d;
    a.eps = p->eps;
    a.dtype = (int)p->dtype;
    nn_status st = launch(ctx, K_FORWARD, row_grid(p->m), &a);
    if (st != NN_OK) {
        saved_free_cuda(ctx, s);
        return nn__error_in(ctx, fn);
    }
    snprintf(note->impl, sizeof note->impl, "kernel");
    if (saved_out) *saved_out = s;
    return NN_OK;
}

/* dgamma and dbeta: parts of at least NN__LAYERNORM_ROWS_PER_PART rows, partials in pool memory
 * when there is more than one. */
static nn_status param_grads(struct nn_ctx *ctx, const char *fn, struct nn__layernorm_args *a)
{
    long long parts = (a->m + NN__LAYERNORM_ROWS_PER_PART - 1) / NN__LAYERNORM_ROWS_PER_PART;
    if (parts > MOST_PARTS) parts = MOST_PARTS;
    if (parts < 1) parts = 1;
    a->parts = (int)parts;
    a->chunk = (a->m + parts - 1) / parts;
    unsigned tiles = (unsigned)((a->d + NN__LAYERNORM_THREADS - 1) / NN__LAYERNORM_THREADS);
    dim3 grid = {tiles, (unsigned)parts, 1};
    if (parts == 1) return launch(ctx, K_PARAM, grid, a);
    void *partial;
    NN__TRY(nn__dev_alloc_for(ctx, fn, (size_t)(parts * a->d) * 2 * sizeof(double), &partial));
    a->partial = (uintptr_t)partial;
    nn_status st = launch(ctx, K_PARAM, grid, a);
    if (st == NN_OK) st = launch(ctx, K_FINISH, (dim3){tiles, 1, 1}, a);
    /* the pool reuses the block only after the queued launches (stream order) */
    nn_status fst = nn__dev_free_for(ctx, fn, partial);
    return st != NN_OK ? st : fst;
}

static nn_status backward_cuda(struct nn_ctx *ctx, const char *fn,
                               const struct nn__layernorm_problem *p, const nn_tensor *x,
                               const nn_tensor *gamma, const struct nn__layernorm_saved *saved,
                               const nn_tensor *dy, nn_tensor *dx, nn_tensor *dgamma,
                               nn_tensor *dbeta, struct nn__layernorm_note *note)
{
    NN__TRY(ready(ctx, fn, p));
    struct nn__layernorm_args a = {0};
    a.x = addr(x);
    a.gamma = addr(gamma);
    a.stats = (uintptr_t)saved->stats;
    a.dy = addr(dy);
    a.dx = addr(dx);
    a.dgamma = addr(dgamma);
    a.dbeta = addr(dbeta);
    a.m = p->m;
    a.d = p->d;
    a.eps = p->eps;
    a.dtype = (int)p->dtype;
    a.acc_dx = (p->accumulate & NN_ACCUMULATE_DX) != 0;
    a.acc_dgamma = (p->accumulate & NN_ACCUMULATE_DW) != 0;
    a.acc_dbeta = (p->accumulate & NN_ACCUMULATE_DB) != 0;
    if (dx) NN__TRY_IN(ctx, fn, launch(ctx, K_DATA, row_grid(p->m), &a));
    if (dgamma || dbeta) NN__TRY(param_grads(ctx, fn, &a));
    snprintf(note->impl, sizeof note->impl, "kernel");
    return NN_OK;
}

const struct nn__layernorm_backend nn__layernorm_backend_cuda = {"cuda", forward_cuda,
                                                                 backward_cuda, saved_free_cuda};

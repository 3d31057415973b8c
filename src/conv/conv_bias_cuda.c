/* The convolution's bias gradient by nnprim's own kernels (conv_bias.cu) for f32 and f64 dy whose
 * spatial positions run with stride 1 (NCHW and its batch or channel views). cuDNN 9.14's
 * cudnnConvolutionBackwardBias (calc_bias_diff_nchw_packed) takes 110 us for a 256x8x8x8 dy on
 * the H200, where PyTorch's sum over the same elements takes 15 us: it was most of a small CNN's
 * training step. Here every channel's sum is split over enough blocks to fill the device. Other
 * dtypes and channels-last dy keep cuDNN's paths (conv_cudnn.c). */
#include "conv/conv_bias.h"

#include "conv/conv_internal.h"
#include "core/ctx.h"
#include "core/cuda_util.h"
#include "core/error.h"
#include "core/kernel_image.h"
#include "mem/mem.h"

#if NN_HAVE_KERNEL_IMAGES
/* The fat binary of conv_bias.cu, generated at build time (src/meson.build: nn_cuda_images). */
extern const unsigned char nn__conv_bias_image[];
#define IMAGE nn__conv_bias_image
#else
#define IMAGE NULL
#endif

enum { K_SUM, K_FINISH };
static const char *const names[] = {"nn__bias_grad_sum", "nn__bias_grad_finish", NULL};
static cudaKernel_t kernels[2];
static struct nn__kernel_image image =
    NN__KERNEL_IMAGE_INIT(IMAGE, "bias gradient kernels", names, kernels);

_Static_assert(NN_DTYPE_F32 == 1 && NN_DTYPE_F64 == 2, "the kernels' dtype codes");

/* The most blocks of one launch: a few waves on the largest devices, partial sums kept small. */
#define MOST_BLOCKS 2048

int nn__conv_bias_kernel_fits(const struct nn__conv_problem *p, const nn_tensor *dy)
{
    if (p->dtype != NN_DTYPE_F32 && p->dtype != NN_DTYPE_F64) return 0;
    if (dy->dims[1] > 65535) return 0; /* the channels are the grid's y */
    int64_t run = 1;
    for (int d = dy->rank - 1; d >= 2; d--) {
        if (dy->dims[d] != 1 && dy->strides[d] != run) return 0;
        run *= dy->dims[d];
    }
    return nn__kernel_image_load(&image) == NULL;
}

static nn_status launch(struct nn_ctx *ctx, int k, dim3 grid, struct nn__bias_grad *a)
{
    void *args[1] = {a};
    return NN__CUDA(ctx,
                    cudaLaunchKernel((const void *)kernels[k], grid, (dim3){NN__BIAS_THREADS, 1, 1},
                                     args, 0, (cudaStream_t)ctx->stream));
}

nn_status nn__conv_bias_grad_cuda(struct nn_ctx *ctx, const nn_tensor *dy, nn_tensor *db,
                                  double alpha, double beta)
{
    struct nn__bias_grad a = {0};
    a.dy = (uintptr_t)dy->data;
    a.db = (uintptr_t)db->data;
    a.n = dy->dims[0];
    a.k = dy->dims[1];
    a.s = 1;
    for (int d = 2; d < dy->rank; d++)
        a.s *= dy->dims[d];
    a.sn = dy->strides[0];
    a.sk = dy->strides[1];
    a.dtype = (int)dy->dtype;
    a.alpha = alpha;
    a.beta = beta;
    long long m = a.n * a.s, most = MOST_BLOCKS / a.k;
    long long parts = (m + NN__BIAS_PER_BLOCK - 1) / NN__BIAS_PER_BLOCK;
    if (parts > most) parts = most;
    if (parts < 1) parts = 1;
    a.parts = (int)parts;
    a.chunk = (m + parts - 1) / parts;
    dim3 grid = {(unsigned)parts, (unsigned)a.k, 1};
    if (parts == 1) return launch(ctx, K_SUM, grid, &a);
    void *partial;
    NN__TRY(nn__dev_alloc(ctx, (size_t)(a.k * parts) * sizeof(double), &partial));
    a.partial = (uintptr_t)partial;
    nn_status st = launch(ctx, K_SUM, grid, &a);
    if (st == NN_OK)
        st = launch(ctx, K_FINISH,
                    (dim3){(unsigned)((a.k + NN__BIAS_THREADS - 1) / NN__BIAS_THREADS), 1, 1}, &a);
    /* the pool reuses the block only after the queued launches (stream order) */
    nn_status fst = nn__dev_free(ctx, partial);
    return st != NN_OK ? st : fst;
}

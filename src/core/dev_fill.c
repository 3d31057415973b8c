#include "core/dev_fill.h"

#include "core/ctx.h"
#include "core/error.h"
#include "core/kernel_image.h"

#if NN_HAVE_CUDA
#if NN_HAVE_KERNEL_IMAGES
extern const unsigned char nn__dev_fill_image[];
#define FILL_IMAGE nn__dev_fill_image
#else
#define FILL_IMAGE NULL
#endif

static const char *const names[] = {"nn__dev_fill", NULL};
static cudaKernel_t kernels[1];
static struct nn__kernel_image image =
    NN__KERNEL_IMAGE_INIT(FILL_IMAGE, "device fill kernel", names, kernels);

const char *nn__fill_unavailable(void)
{
    return nn__kernel_image_load(&image);
}

nn_status nn__dev_fill(struct nn_ctx *ctx, const char *fn, const struct nn__fill *f)
{
    const char *no = nn__fill_unavailable();
    if (no) return NN__FAIL(ctx, NN_E_UNSUPPORTED, "%s: %s", fn, no);
    /* 256 threads, at most 4096 blocks striding over the rest (the H200 has 132 SMs) */
    int64_t blocks = (f->n + 255) / 256;
    if (blocks > 4096) blocks = 4096;
    void *args[1] = {(void *)f};
    NN__TRY_IN(
        ctx, fn,
        NN__CUDA(ctx, cudaLaunchKernel((const void *)kernels[0], (dim3){(unsigned)blocks, 1, 1},
                                       (dim3){256, 1, 1}, args, 0, (cudaStream_t)ctx->stream)));
    return NN_OK;
}
#endif

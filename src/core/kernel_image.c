#include "core/kernel_image.h"

#include <stdatomic.h>
#include <stdio.h>

#if NN_HAVE_CUDA
static void load_now(struct nn__kernel_image *img)
{
    if (!img->data) {
        snprintf(img->why, sizeof img->why,
                 "this build has no %s (nvcc was not found when it was built)", img->what);
        img->unavailable = img->why;
        return;
    }
    cudaLibrary_t lib;
    cudaError_t err = cudaLibraryLoadData(&lib, img->data, NULL, NULL, 0, NULL, NULL, 0);
    for (int i = 0; err == cudaSuccess && img->names[i]; i++)
        err = cudaLibraryGetKernel(&img->kernels[i], lib, img->names[i]);
    if (err != cudaSuccess) {
        (void)cudaGetLastError();
        snprintf(img->why, sizeof img->why, "the driver refused nnprim's %s (%s)", img->what,
                 cudaGetErrorName(err));
        img->unavailable = img->why;
    }
}

const char *nn__kernel_image_load(struct nn__kernel_image *img)
{
    if (atomic_load_explicit(&img->loaded, memory_order_acquire)) return img->unavailable;
    pthread_mutex_lock(&img->lock);
    if (!atomic_load_explicit(&img->loaded, memory_order_relaxed)) {
        load_now(img);
        atomic_store_explicit(&img->loaded, 1, memory_order_release);
    }
    pthread_mutex_unlock(&img->lock);
    return img->unavailable;
}
#endif

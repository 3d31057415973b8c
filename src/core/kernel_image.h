/* Kernels that nvcc compiled at build time into a fat binary the library embeds (the images are
 * listed in src/meson.build: nn_cuda_images), loaded at run time with cudaLibraryLoadData: the
 * library links no CUDA C++ runtime. An image is loaded once per process, at its first use, and
 * kept for the process's life (libnnprim is never unloaded: -z nodelete), with every kernel it
 * names looked up then. Only for files compiled with NN_HAVE_CUDA. */
#ifndef NN_CORE_KERNEL_IMAGE_H
#define NN_CORE_KERNEL_IMAGE_H

#include <pthread.h>

#include "core/cuda_util.h"

#if NN_HAVE_CUDA

/* One embedded image and the kernels taken from it. Static storage, filled with
 * NN__KERNEL_IMAGE_INIT; the rest is the loader's. */
struct nn__kernel_image {
    const unsigned char *data; /* the fat binary; NULL where the build had no nvcc */
    const char *what;          /* how messages name it: "device copy kernel" */
    const char *const *names;  /* the kernels' names, NULL-terminated */
    cudaKernel_t *kernels;     /* out: one per name, set once the image is loaded */
    pthread_mutex_t lock;
    _Atomic int loaded; /* 1 once the answer below is final */
    const char *unavailable;
    char why[160];
};

/* data: the embedded array's name where the build has it (NN_HAVE_KERNEL_IMAGES), else NULL. */
#define NN__KERNEL_IMAGE_INIT(data, what, names, kernels)                                          \
    {                                                                                              \
        (data), (what), (names), (kernels), PTHREAD_MUTEX_INITIALIZER, 0, NULL, ""                 \
    }

/* NULL when img's kernels are ready to launch (the first call loads them), else why not, as
 * static text for the process's life: "this build has no <what> (nvcc was not found when it was
 * built)", or "the driver refused nnprim's <what> (<CUDA error name>)". Thread-safe; after the
 * first call it costs one atomic load. A refusal leaves no CUDA error pending. */
const char *nn__kernel_image_load(struct nn__kernel_image *img);

#endif
#endif

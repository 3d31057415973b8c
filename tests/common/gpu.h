/* GPU detection for tests. Call only inside a test body: Criterion forks each test, and CUDA
 * must not be initialised before the fork. */
#ifndef NN_TESTS_GPU_H
#define NN_TESTS_GPU_H

#include <criterion/criterion.h>

/* 1 if a CUDA device and cuDNN are usable; otherwise 0 and *why says why not. */
int nn_test_have_gpu(const char **why);

/* Skip the current test, printing the reason, when there is no usable GPU. */
#define NN_REQUIRE_GPU()                                                                           \
    do {                                                                                           \
        const char *nn__why;                                                                       \
        if (!nn_test_have_gpu(&nn__why)) cr_skip_test("needs a GPU: %s", nn__why);                 \
    } while (0)

#endif

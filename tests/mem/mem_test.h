/* Shared helpers of the mem suites: one test body runs over the host pool and, where a GPU is
 * usable, over device 0's CUDA pool. */
#ifndef NN_TESTS_MEM_TEST_H
#define NN_TESTS_MEM_TEST_H

#include <criterion/criterion.h>

#include "gpu.h"
#include "nnprim/nnprim.h"

/* A stream of the pool under test, which a test can keep busy and release. */
struct tstream {
    nn_mem_stream *h;
    void *cuda;
    int device;
};

void ts_open(struct tstream *t, int device);
void ts_close(struct tstream *t);
void *ts_alloc(struct tstream *t, size_t bytes); /* asserts success */
void ts_free(struct tstream *t, void *p);        /* asserts success */
void ts_busy(struct tstream *t);                 /* queue work that waits for ts_sync */
void ts_sync(struct tstream *t);                 /* let it finish, wait for the stream */
nn_mem_stats ts_stats(int device);

/* Define name over the host pool (suite mem_host) and the CUDA pool (suite mem_cuda). */
#define MEM_TEST(name)                                                                             \
    static void name(int device);                                                                  \
    Test(mem_host, name)                                                                           \
    {                                                                                              \
        name(NN_MEM_HOST);                                                                         \
    }                                                                                              \
    Test(mem_cuda, name)                                                                           \
    {                                                                                              \
        NN_REQUIRE_GPU();                                                                          \
        name(0);                                                                                   \
    }                                                                                              \
    static void name(int device)

#endif

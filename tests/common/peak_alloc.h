/* A user allocator (include/nnprim/mem.h) on cudaMalloc that counts the device bytes live and
 * their peak, for the GPU tests that compare a workspace query with what a call takes: it sees
 * every device allocation at its requested size (the pool's statistics round and lag). */
#ifndef NN_TESTS_PEAK_ALLOC_H
#define NN_TESTS_PEAK_ALLOC_H

#include <stdatomic.h>

#include "nnprim/mem.h"

struct nn_test_peak {
    atomic_long live, peak;
};

/* Device 0's allocator from now on: one counting into k (zeroed here). Asserts it is taken. */
void nn_test_peak_install(struct nn_test_peak *k);

/* Device 0's allocator back to the pool's own. Asserts it is taken. */
void nn_test_peak_remove(void);

/* Restart the peak at the bytes live now, and return them. */
long nn_test_peak_mark(struct nn_test_peak *k);

/* The peak since nn_test_peak_mark() returned base, above base. */
long nn_test_peak_since(struct nn_test_peak *k, long base);

#endif

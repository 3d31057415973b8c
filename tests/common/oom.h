/* Failure injection for host allocations: run an operation once for every allocation it makes,
 * with exactly that allocation failing, and check that each run returns NN_E_OOM_HOST and leaves
 * no host block behind. */
#ifndef NN_TESTS_OOM_H
#define NN_TESTS_OOM_H

#include "nnprim/status.h"

/* The operation runs once without failures first. It does its work and releases everything it made
 * when it succeeds. */
typedef nn_status (*nn_test_op)(void *arg);

/* Returns how many allocations the operation makes when nothing fails (asserts inside). */
long nn_test_every_host_alloc_failure(nn_test_op op, void *arg, const char *what);

#endif

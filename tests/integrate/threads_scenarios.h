/* The thread-safety scenarios, shared by the Criterion suite (test_threads.c) and the
 * plain driver that runs them under ThreadSanitizer (tsan_threads.c, tools/tsan.sh): Criterion's
 * runner cannot start under TSan. Each returns 0 when every check held, else 1 with the first
 * failure in fail. Public API only. */
#ifndef NN_TESTS_THREADS_SCENARIOS_H
#define NN_TESTS_THREADS_SCENARIOS_H

#include <stddef.h>

#include "nnprim/nnprim.h"

/* TS_THREADS threads x TS_CONTEXTS contexts each (one of them verbose, its lines counted by a
 * log callback) x TS_ROUNDS rounds of conv + relu, max pool, linear, softmax and LSTM forward
 * and backward, a provoked failure read back per thread and per context, plan cache statistics,
 * and tensors made by one context and freed by another. Results are compared with the same seeds
 * run on one thread first: bitwise when tol is 0, else within tol relative. The threads go to
 * devices 0 .. devices - 1 in turn (devices 1 for the reference backend). */
#define TS_THREADS  4
#define TS_CONTEXTS 3
#define TS_ROUNDS   3
int ts_stress(nn_backend backend, int devices, double tol, char *fail, size_t cap);

/* cuDNN contexts of devices 0 and 1 used alternately by one thread: the two devices agree within
 * f32 rounding, and a second round repeats the first bitwise. Needs two devices. */
int ts_two_devices_one_thread(char *fail, size_t cap);

#endif

/* The many-thread workload, shared by the Criterion suite and the stand-alone driver that runs
 * under ThreadSanitizer (Criterion itself cannot start under TSan: Snaipe/Criterion#274). */
#ifndef NN_TESTS_MEM_STRESS_H
#define NN_TESTS_MEM_STRESS_H

#include "nnprim/mem.h"

/* threads threads, thread i on streams[i], rounds random allocations and frees each (sizes up to
 * 12 MiB, one free in five handed to the next thread and freed on its stream). On the host pool
 * every block is tagged and checked, so two threads holding one block is seen. Leaves nothing
 * allocated. Returns the number of errors. */
int mem_stress_run(int device, nn_mem_stream **streams, int threads, int rounds);

/* The host pool under contention: threads threads (>= 2) on streams of their own, each rounds
 * allocations and frees (a quarter freed through the next thread's stream) with work left pending
 * on its stream part of the time, while one more thread reads statistics, resets the peak, turns
 * the event log on and off and reads it, trims, and opens, uses and closes a stream of its own
 * with work pending. Leaves nothing allocated. Returns the number of errors. */
int mem_contention_run(int threads, int rounds);

#endif

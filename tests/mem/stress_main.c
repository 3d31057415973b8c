/* The many-thread workloads on the host pool outside Criterion, so that they run under
 * ThreadSanitizer (tools/tsan.sh runs this program): the allocation stress, then the pool under
 * contention (pending work, cross-stream frees, readers and trims). The host pool runs the device
 * pool's bookkeeping (mem/mem_pool.c) over simulated streams. */
#include <stdio.h>

#include "nnprim/nnprim.h"
#include "stress.h"

#define THREADS 8

int main(void)
{
    nn_mem_stream *s[THREADS];
    for (int i = 0; i < THREADS; i++)
        if (nn_mem_stream_open(NN_MEM_HOST, NULL, &s[i]) != NN_OK) {
            fprintf(stderr, "mem_stress: %s\n", nn_last_error()->message);
            return 1;
        }
    int errors = mem_stress_run(NN_MEM_HOST, s, THREADS, 20000);
    for (int i = 0; i < THREADS; i++)
        nn_mem_stream_close(s[i]);
    nn_mem_stats st;
    if (nn_mem_get_stats(NN_MEM_HOST, &st) != NN_OK || st.allocated_bytes || st.alloc_count ||
        st.alloc_count_total != st.free_count_total)
        errors++;
    size_t released;
    if (nn_mem_trim(NN_MEM_HOST, &released) != NN_OK || released != st.reserved_bytes) errors++;
    printf("mem_stress: %d threads, %llu allocations, %d errors\n", THREADS,
           (unsigned long long)st.alloc_count_total, errors);
    int contention = mem_contention_run(THREADS, 20000);
    if (nn_mem_get_stats(NN_MEM_HOST, &st) != NN_OK || st.allocated_bytes || st.alloc_count ||
        st.alloc_count_total != st.free_count_total)
        contention++;
    if (nn_mem_trim(NN_MEM_HOST, &released) != NN_OK || released != st.reserved_bytes) contention++;
    printf("mem_contention: %d threads and a reader, %d errors\n", THREADS, contention);
    errors += contention;
    return errors != 0;
}

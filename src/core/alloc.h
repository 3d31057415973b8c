/* Host memory: every host allocation of nnprim goes through here. Backed by a private jemalloc
 * arena (mallocx/dallocx) so the application's malloc is left alone, or by plain malloc when
 * built with -Djemalloc=disabled (sanitizer builds). Failures return NULL; callers turn that
 * into NN_E_OOM_HOST. */
#ifndef NN_CORE_ALLOC_H
#define NN_CORE_ALLOC_H

#include <stddef.h>

void *nn__host_alloc(size_t size);
void *nn__host_calloc(size_t count, size_t size); /* NULL on overflow of count * size too */
void *nn__host_realloc(void *p, size_t size);     /* p is kept on failure */
void nn__host_free(void *p);
char *nn__host_strdup(const char *s);

/* Test hook: make the n-th host allocation from now fail (1 = the next one), 0 = never.
 * Counts allocations from every thread. Returns how many allocations were made since the last
 * call, so a test can learn how many a call makes. */
long nn__host_alloc_fail_at(long n);

/* Test hook: host blocks allocated and not yet freed (a leak check for tests). */
long nn__host_alloc_live(void);

/* Test hook: 1 when the calling thread's allocations go through its own thread cache (jemalloc
 * builds, once the thread has allocated), else 0. */
int nn__host_alloc_cached(void);

#endif

#include <limits.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "nn_config.h"

#include "core/alloc.h"

#if NN_HAVE_JEMALLOC
#include <nnprim_je/jemalloc.h>
#include <pthread.h>

/* nnprim's own jemalloc build (tools/jemalloc.sh), whose every symbol is prefixed nnprim_je_.
 * A private arena: nnprim's host memory never mixes with the application's heap, and the
 * application's malloc is not replaced. jemalloc's automatic thread cache is bound to the
 * thread's own arena, so each thread gets an explicit one of nnprim's (tcache.create) that serves
 * the private arena. Without it every allocation and free takes the arena's lock, and a block
 * allocated and freed per call (a pullback) frees and recycles a whole slab each time: about
 * 0.5 us of a linear layer's 1.8 us forward and backward on the reference backend, as profiled.
 * A thread whose cache cannot be made allocates without one. The shared library is linked
 * -z nodelete (src/meson.build): dlclose() leaves it mapped, so threads that outlive the close
 * still find this cache's destructor, and jemalloc's own. */
static unsigned nn__arena;
static int nn__arena_ok;
static pthread_once_t nn__arena_once = PTHREAD_ONCE_INIT;
static pthread_key_t nn__tcache_key; /* its value: the thread's tcache index + 1 */
static int nn__tcache_key_ok;
/* The thread's cache: its index + 1; 0 none yet; TCACHE_NONE none ever (tcache.create failed,
 * or the cache went back at the thread's exit). */
#define TCACHE_NONE UINT_MAX
static _Thread_local unsigned nn__tcache;

/* At thread exit: the cache's blocks go back to the arena. A later destructor of the thread that
 * allocates through nnprim does so without a cache: the destroyed id may already be another
 * thread's. */
static void tcache_destroy(void *v)
{
    unsigned idx = (unsigned)((uintptr_t)v - 1);
    nn__tcache = TCACHE_NONE;
    (void)nnprim_je_mallctl("tcache.destroy", NULL, NULL, &idx, sizeof idx);
}

static void create_arena(void)
{
    size_t sz = sizeof nn__arena;
    nn__arena_ok = nnprim_je_mallctl("arenas.create", &nn__arena, &sz, NULL, 0) == 0;
    nn__tcache_key_ok = pthread_key_create(&nn__tcache_key, tcache_destroy) == 0;
}

static void tcache_make(void)
{
    unsigned idx;
    size_t sz = sizeof idx;
    nn__tcache = TCACHE_NONE;
    if (!nn__tcache_key_ok || nnprim_je_mallctl("tcache.create", &idx, &sz, NULL, 0) != 0) return;
    if (pthread_setspecific(nn__tcache_key, (void *)((uintptr_t)idx + 1)) != 0) {
        (void)nnprim_je_mallctl("tcache.destroy", NULL, NULL, &idx, sizeof idx);
        return;
    }
    nn__tcache = idx + 1;
}

static int arena_flags(void)
{
    pthread_once(&nn__arena_once, create_arena);
    if (!nn__arena_ok) return 0;
    if (!nn__tcache) tcache_make();
    return (
        int)(MALLOCX_ARENA(nn__arena) |
             (nn__tcache != TCACHE_NONE ? MALLOCX_TCACHE(nn__tcache - 1) : MALLOCX_TCACHE_NONE));
}

int nn__host_alloc_cached(void)
{
    return nn__tcache != 0 && nn__tcache != TCACHE_NONE;
}

static void *raw_alloc(size_t size)
{
    return nnprim_je_mallocx(size ? size : 1, arena_flags());
}
static void *raw_realloc(void *p, size_t size)
{
    return nnprim_je_rallocx(p, size ? size : 1, arena_flags());
}
static void raw_free(void *p)
{
    nnprim_je_dallocx(p, arena_flags());
}
#else
int nn__host_alloc_cached(void)
{
    return 0;
}

static void *raw_alloc(size_t size)
{
    return malloc(size ? size : 1);
}
static void *raw_realloc(void *p, size_t size)
{
    return realloc(p, size ? size : 1);
}
static void raw_free(void *p)
{
    free(p);
}
#endif

/* Requests above this fail with NULL before reaching the allocator. No object may exceed
 * PTRDIFF_MAX; and AddressSanitizer's allocator aborts on a request above its maximum (1 TiB by
 * default) instead of returning NULL, so sanitizer builds refuse earlier: bad input (a huge
 * nn_tensor_empty) must come back as NN_E_OOM_HOST there too. */
#if defined(__SANITIZE_ADDRESS__)
#define HOST_MAX ((size_t)1 << 40)
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define HOST_MAX ((size_t)1 << 40)
#endif
#endif
#ifndef HOST_MAX
#define HOST_MAX ((size_t)PTRDIFF_MAX)
#endif

static atomic_long nn__alloc_count;
static atomic_long nn__live;
static atomic_long nn__fail_at; /* allocation number (from the last reset) that fails; 0 none */

long nn__host_alloc_fail_at(long n)
{
    long made = atomic_exchange(&nn__alloc_count, 0);
    atomic_store(&nn__fail_at, n);
    return made;
}

static int injected_failure(void)
{
    long k = atomic_fetch_add(&nn__alloc_count, 1) + 1;
    long at = atomic_load(&nn__fail_at);
    return at > 0 && k == at;
}

long nn__host_alloc_live(void)
{
    return atomic_load(&nn__live);
}

void *nn__host_alloc(size_t size)
{
    if (injected_failure() || size > HOST_MAX) return NULL;
    void *p = raw_alloc(size);
    if (p) atomic_fetch_add(&nn__live, 1);
    return p;
}

void *nn__host_calloc(size_t count, size_t size)
{
    if (size && count > SIZE_MAX / size) return NULL;
    void *p = nn__host_alloc(count * size);
    if (p) memset(p, 0, count * size);
    return p;
}

void *nn__host_realloc(void *p, size_t size)
{
    if (!p) return nn__host_alloc(size);
    if (injected_failure() || size > HOST_MAX) return NULL;
    return raw_realloc(p, size);
}

void nn__host_free(void *p)
{
    if (!p) return;
    atomic_fetch_sub(&nn__live, 1);
    raw_free(p);
}

char *nn__host_strdup(const char *s)
{
    size_t n = strlen(s) + 1;
    char *d = nn__host_alloc(n);
    if (d) memcpy(d, s, n);
    return d;
}

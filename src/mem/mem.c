/* The per-device pools, the context hooks (mem.h) and the public nn_mem_* functions. A pool is
 * created on first use of its device and lives as long as the process. */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "nn_config.h"

#include "core/alloc.h"
#include "core/capture.h"
#include "core/ctx.h"
#include "core/elem.h"
#include "core/cuda_util.h"
#include "core/env.h"
#include "core/error.h"
#include "mem/graph_mem.h"
#include "mem/mem.h"
#include "mem/mem_pool.h"

#define MAX_DEVICES 64

/* Slot 0 is the host pool, slot d + 1 device d. */
static struct nn__mem_pool *_Atomic pools[MAX_DEVICES + 1];
static pthread_mutex_t pools_lock = PTHREAD_MUTEX_INITIALIZER;

static nn_status check_device(int device, const char *fn)
{
    if (device == NN_MEM_HOST) return NN_OK;
    if (device < 0)
        return NN__FAIL(NULL, NN_E_INVALID_ARG,
                        "%s: device must be a CUDA ordinal >= 0 or NN_MEM_HOST (-1), got %d", fn,
                        device);
    if (!NN_HAVE_CUDA)
        return NN__FAIL(NULL, NN_E_NOT_BUILT, "%s: device %d needs a build with CUDA", fn, device);
    int n = nn__cuda_device_count();
    if (device >= n || device >= MAX_DEVICES)
        return NN__FAIL(NULL, NN_E_NO_DEVICE, "%s: device %d, but %d CUDA device(s) are usable", fn,
                        device, n);
    return NN_OK;
}

static nn_status create_pool(int device, const nn_mem_settings *s, const char *fn,
                             struct nn__mem_pool **out)
{
    struct nn__upstream up;
    if (device == NN_MEM_HOST) {
        NN__TRY(nn__upstream_host(&up));
    } else {
#if NN_HAVE_CUDA
        NN__TRY(nn__upstream_cuda(device, s, fn, &up, NULL));
#else
        return NN__FAIL(NULL, NN_E_NOT_BUILT, "%s: device memory needs a build with CUDA", fn);
#endif
    }
    return nn__mem_pool_create(up, s, fn, out);
}

static nn_status settings_from_env(const char *fn, nn_mem_settings *s);
static void user_stats(int device, nn_mem_stats *out);

/* The bytes graph memory holds per device (graph_mem.c), by slot as pools[]. */
static atomic_llong graph_bytes[MAX_DEVICES + 1];

/* The device's pool, created with settings s (NULL: nn_mem_settings_from_env()) if it does not
 * exist yet. *created tells whether this call made it. While an NNPRIM_MEM_* variable is
 * malformed a pool is not created with defaults: the call fails with NN_E_ENV, so that a limit
 * the user asked for is never silently dropped. */
static nn_status pool_get(int device, const nn_mem_settings *s, const char *fn,
                          struct nn__mem_pool **out, int *created)
{
    *out = NULL;
    if (created) *created = 0;
    NN__TRY(check_device(device, fn));
    _Atomic(struct nn__mem_pool *) *slot = &pools[device + 1];
    struct nn__mem_pool *p = atomic_load_explicit(slot, memory_order_acquire);
    if (p) {
        *out = p;
        return NN_OK;
    }
    nn_status st = NN_OK;
    pthread_mutex_lock(&pools_lock);
    p = atomic_load_explicit(slot, memory_order_acquire);
    if (!p) {
        nn_mem_settings d;
        if (!s) {
            st = settings_from_env(fn, &d);
            s = &d;
        }
        if (st == NN_OK) st = create_pool(device, s, fn, &p);
        if (st == NN_OK) {
            atomic_store_explicit(slot, p, memory_order_release);
            if (created) *created = 1;
        }
    }
    pthread_mutex_unlock(&pools_lock);
    *out = p;
    return st;
}

/* ---- settings ---- */

static void set_defaults(nn_mem_settings *s)
{
    memset(s, 0, sizeof *s);
    s->growth_slack = 0.0; /* no device synchronisation while a workload repeats: docs/MEMORY.md */
}

nn_status nn_mem_settings_defaults(nn_mem_settings *s)
{
    if (!s) return NN__FAIL(NULL, NN_E_INVALID_ARG, "nn_mem_settings_defaults: s must not be NULL");
    set_defaults(s);
    return NN_OK;
}

nn_status nn_mem_settings_from_env(nn_mem_settings *s)
{
    if (!s) return NN__FAIL(NULL, NN_E_INVALID_ARG, "nn_mem_settings_from_env: s must not be NULL");
    return settings_from_env("nn_mem_settings_from_env", s);
}

/* The defaults and the environment; fn names the public function called in messages. */
static nn_status settings_from_env(const char *fn, nn_mem_settings *s)
{
    set_defaults(s);
    nn_status first = NN_OK, st;
    static const struct nn__env_word bools[] = {{"0", 0}, {"1", 1}};
    static const struct nn__env_word upstreams[] = {{"malloc", NN_MEM_UPSTREAM_MALLOC},
                                                    {"async", NN_MEM_UPSTREAM_MALLOC_ASYNC}};
    int v_int = s->bypass;
    if ((st = nn__env_word(fn, "NNPRIM_MEM_BYPASS", bools, 2, "0 or 1", &v_int)) != NN_OK)
        first = st;
    s->bypass = v_int;
    if ((st = nn__env_bytes(fn, "NNPRIM_MEM_LIMIT", &s->limit)) != NN_OK && first == NN_OK)
        first = st;
    v_int = (int)s->upstream;
    if ((st = nn__env_word(fn, "NNPRIM_MEM_UPSTREAM", upstreams, 2, "malloc or async", &v_int)) !=
            NN_OK &&
        first == NN_OK)
        first = st;
    s->upstream = (nn_mem_upstream)v_int;
    const char *v = getenv("NNPRIM_MEM_GROWTH_SLACK");
    if (v) {
        char *end;
        /* strtod takes leading blanks and signs: a number starts with a digit here. */
        double x = v[0] >= '0' && v[0] <= '9' ? strtod(v, &end) : -1.0;
        if (x != -1.0 && !*end && (x == 0.0 || (x >= 1.0 && isfinite(x))))
            s->growth_slack = x;
        else if (first == NN_OK)
            first = NN__FAIL(NULL, NN_E_ENV,
                             "%s: NNPRIM_MEM_GROWTH_SLACK must be 0 or a finite number >= 1.0, "
                             "got \"%s\"",
                             fn, v);
    }
    return first;
}

nn_status nn_mem_configure(int device, const nn_mem_settings *s)
{
    if (!s) return NN__FAIL(NULL, NN_E_INVALID_ARG, "nn_mem_configure: s must not be NULL");
    if (s->upstream != NN_MEM_UPSTREAM_MALLOC && s->upstream != NN_MEM_UPSTREAM_MALLOC_ASYNC)
        return NN__FAIL(NULL, NN_E_INVALID_ARG,
                        "nn_mem_configure: s.upstream must be NN_MEM_UPSTREAM_MALLOC or "
                        "NN_MEM_UPSTREAM_MALLOC_ASYNC, got %d",
                        (int)s->upstream);
    NN__TRY(NN__CHECK_RESERVED(NULL, "nn_mem_configure", "s.reserved", s->reserved));
    if (!(s->growth_slack == 0.0 || s->growth_slack >= 1.0))
        return NN__FAIL(NULL, NN_E_INVALID_ARG,
                        "nn_mem_configure: s.growth_slack must be 0 or >= 1.0, got %g",
                        s->growth_slack);
    struct nn__mem_pool *p;
    int created;
    NN__TRY(pool_get(device, s, "nn_mem_configure", &p, &created));
    return created ? NN_OK : nn__mem_pool_configure(p, s, NULL);
}

nn_status nn_mem_set_limit(int device, size_t limit)
{
    struct nn__mem_pool *p;
    NN__TRY(pool_get(device, NULL, "nn_mem_set_limit", &p, NULL));
    nn__mem_pool_set_limit(p, limit);
    return NN_OK;
}

/* ---- statistics, trim, log ---- */

nn_status nn_mem_get_stats(int device, nn_mem_stats *out)
{
    if (!out) return NN__FAIL(NULL, NN_E_INVALID_ARG, "nn_mem_get_stats: out must not be NULL");
    struct nn__mem_pool *p;
    NN__TRY(pool_get(device, NULL, "nn_mem_get_stats", &p, NULL));
    nn__mem_pool_get_stats(p, out);
    user_stats(device, out);
    out->graph_bytes = (uint64_t)atomic_load(&graph_bytes[device + 1]);
    return NN_OK;
}

nn_status nn_mem_reset_peak_stats(int device)
{
    struct nn__mem_pool *p;
    NN__TRY(pool_get(device, NULL, "nn_mem_reset_peak_stats", &p, NULL));
    nn__mem_pool_reset_peak(p);
    return NN_OK;
}

static double mib(size_t bytes)
{
    return (double)bytes / (1024.0 * 1024.0);
}

nn_status nn_mem_stats_format(const nn_mem_stats *s, char *buf, size_t cap)
{
    const char *fn = "nn_mem_stats_format";
    if (!s) return NN__FAIL(NULL, NN_E_INVALID_ARG, "%s: s must not be NULL", fn);
    if (!buf) return NN__FAIL(NULL, NN_E_INVALID_ARG, "%s: buf must not be NULL", fn);
    if (!cap) return NN__FAIL(NULL, NN_E_INVALID_ARG, "%s: cap must be > 0, got 0", fn);
    char lim[32] = "none";
    if (s->limit) snprintf(lim, sizeof lim, "%.1f MiB", mib(s->limit));
    snprintf(buf, cap,
             "allocated: %.1f MiB now (%llu blocks, %.1f MiB requested), %.1f MiB peak, "
             "%llu allocations, %llu frees\n"
             "reserved:  %.1f MiB now in %llu segments, %.1f MiB peak (%llu segments), limit %s\n"
             "cache:     %llu hits, %llu misses, %.1f MiB cached, largest free %.1f MiB, "
             "fragmentation %.3f\n"
             "oom:       %llu retries, %llu failures\n"
             "allocator: %s; %llu user blocks (%.1f MiB), %llu user allocations, %llu user "
             "frees\n",
             mib(s->allocated_bytes), (unsigned long long)s->alloc_count, mib(s->requested_bytes),
             mib(s->allocated_bytes_peak), (unsigned long long)s->alloc_count_total,
             (unsigned long long)s->free_count_total, mib(s->reserved_bytes),
             (unsigned long long)s->segment_count, mib(s->reserved_bytes_peak),
             (unsigned long long)s->segment_count_peak, lim, (unsigned long long)s->cache_hits,
             (unsigned long long)s->cache_misses, mib(s->cached_bytes), mib(s->largest_free_bytes),
             s->fragmentation, (unsigned long long)s->oom_retries,
             (unsigned long long)s->oom_failures,
             s->user_allocator ? "the user's (nn_mem_set_allocator)" : "nnprim's pool",
             (unsigned long long)s->user_alloc_count, mib((size_t)s->user_allocated_bytes),
             (unsigned long long)s->user_alloc_total, (unsigned long long)s->user_free_total);
    return NN_OK;
}

nn_status nn_mem_trim(int device, size_t *released)
{
    struct nn__mem_pool *p;
    NN__TRY(pool_get(device, NULL, "nn_mem_trim", &p, NULL));
    size_t r = nn__mem_pool_trim(p);
    if (released) *released = r;
    return NN_OK;
}

nn_status nn_mem_log_enable(int device, int on)
{
    struct nn__mem_pool *p;
    NN__TRY(pool_get(device, NULL, "nn_mem_log_enable", &p, NULL));
    nn__mem_pool_log_enable(p, on);
    return NN_OK;
}

nn_status nn_mem_log_read(int device, nn_mem_event *out, size_t cap, size_t *count)
{
    if (!out) return NN__FAIL(NULL, NN_E_INVALID_ARG, "nn_mem_log_read: out must not be NULL");
    if (!count) return NN__FAIL(NULL, NN_E_INVALID_ARG, "nn_mem_log_read: count must not be NULL");
    *count = 0;
    struct nn__mem_pool *p;
    NN__TRY(pool_get(device, NULL, "nn_mem_log_read", &p, NULL));
    *count = nn__mem_pool_log_read(p, out, cap);
    return NN_OK;
}

/* ---- user allocators ----
 * A device's current allocator is a refcounted record: one reference for being current, one per
 * block it made that is not freed yet, so that a block always returns to its maker, even after
 * nn_mem_set_allocator() replaced it. Blocks are found at free time in a per-device table; while
 * a device has no such block (live == 0) frees skip the table and its lock. */

struct user_rec {
    nn_mem_allocator a;
    atomic_long refs;
};

struct user_blk {
    void *p; /* NULL empty; TOMB deleted */
    struct user_rec *rec;
    size_t bytes;
};

#define TOMB ((void *)1)

struct dev_user {
    pthread_mutex_t lock;
    struct user_rec *_Atomic cur;
    atomic_long live; /* blocks in the table */
    struct user_blk *tab;
    size_t cap, used; /* used counts tombstones too */
    size_t bytes;
    uint64_t alloc_total, free_total;
};

static struct dev_user users[MAX_DEVICES + 1];
static pthread_once_t users_once = PTHREAD_ONCE_INIT;

static void users_init(void)
{
    for (size_t i = 0; i < MAX_DEVICES + 1; i++)
        pthread_mutex_init(&users[i].lock, NULL);
}

static struct dev_user *dev_user(int device)
{
    pthread_once(&users_once, users_init);
    return &users[device + 1];
}

static void rec_release(struct user_rec *r)
{
    if (r && atomic_fetch_sub(&r->refs, 1) == 1) nn__host_free(r);
}

static size_t slot_of(const void *p, size_t cap)
{
    uint64_t h = (uint64_t)(uintptr_t)p * 0x9E3779B97F4A7C15ull;
    return (size_t)(h >> 17) & (cap - 1);
}

/* Under the lock. -1 when the table cannot grow. */
static int tab_put(struct dev_user *u, void *p, struct user_rec *rec, size_t bytes)
{
    if ((u->used + 1) * 2 > u->cap) {
        size_t cap = u->cap ? u->cap : 16;
        while ((size_t)atomic_load(&u->live) * 4 + 4 > cap)
            cap *= 2;
        struct user_blk *n = nn__host_calloc(cap, sizeof *n);
        if (!n) return -1;
        for (size_t i = 0; i < u->cap; i++) {
            void *q = u->tab[i].p;
            if (!q || q == TOMB) continue;
            size_t j = slot_of(q, cap);
            while (n[j].p)
                j = (j + 1) & (cap - 1);
            n[j] = u->tab[i];
        }
        nn__host_free(u->tab);
        u->tab = n;
        u->cap = cap;
        u->used = (size_t)atomic_load(&u->live);
    }
    size_t j = slot_of(p, u->cap);
    while (u->tab[j].p && u->tab[j].p != TOMB)
        j = (j + 1) & (u->cap - 1);
    if (!u->tab[j].p) u->used++;
    u->tab[j] = (struct user_blk){p, rec, bytes};
    atomic_fetch_add(&u->live, 1);
    return 0;
}

/* Under the lock: remove p, returning its entry (p NULL when absent). An empty table is given
 * back, so that nothing stays allocated once every block is freed. */
static struct user_blk tab_take(struct dev_user *u, const void *p)
{
    struct user_blk e = {0};
    if (!u->cap) return e;
    for (size_t j = slot_of(p, u->cap), n = 0; u->tab[j].p && n < u->cap;
         j = (j + 1) & (u->cap - 1), n++) {
        if (u->tab[j].p != p) continue;
        e = u->tab[j];
        u->tab[j].p = TOMB;
        if (atomic_fetch_sub(&u->live, 1) == 1) {
            nn__host_free(u->tab);
            u->tab = NULL;
            u->cap = u->used = 0;
        }
        break;
    }
    return e;
}

nn_status nn_mem_set_allocator(int device, const nn_mem_allocator *a)
{
    const char *fn = "nn_mem_set_allocator";
    NN__TRY(check_device(device, fn));
    struct user_rec *r = NULL;
    if (a) {
        if (!a->alloc) return NN__FAIL(NULL, NN_E_INVALID_ARG, "%s: a.alloc must not be NULL", fn);
        if (!a->free) return NN__FAIL(NULL, NN_E_INVALID_ARG, "%s: a.free must not be NULL", fn);
        NN__TRY(NN__CHECK_RESERVED(NULL, fn, "a.reserved", a->reserved));
        r = nn__host_calloc(1, sizeof *r);
        if (!r) return NN__FAIL(NULL, NN_E_OOM_HOST, "%s: out of host memory", fn);
        r->a = *a;
        atomic_store(&r->refs, 1);
    }
    struct dev_user *u = dev_user(device);
    pthread_mutex_lock(&u->lock);
    struct user_rec *old = atomic_exchange(&u->cur, r);
    pthread_mutex_unlock(&u->lock);
    rec_release(old);
    return NN_OK;
}

/* The current user allocator of the device, with a reference taken; NULL for the pool. */
static struct user_rec *user_get(struct dev_user *u)
{
    if (!atomic_load_explicit(&u->cur, memory_order_acquire)) return NULL;
    pthread_mutex_lock(&u->lock);
    struct user_rec *r = atomic_load_explicit(&u->cur, memory_order_relaxed);
    if (r) atomic_fetch_add(&r->refs, 1);
    pthread_mutex_unlock(&u->lock);
    return r;
}

/* An allocation that goes to the device's user allocator, or to the pool when none is set. */
static nn_status dev_alloc(int device, struct nn__mem_pool *pool, void *stream, uint64_t sid,
                           size_t bytes, void **out, const char *fn, struct nn_ctx *ectx)
{
    struct dev_user *u = dev_user(device);
    struct user_rec *r = user_get(u);
    if (!r) return nn__mem_pool_alloc(pool, stream, sid, bytes, out, fn, ectx);
    *out = NULL;
    if (bytes == 0) {
        rec_release(r);
        return NN__FAIL(ectx, NN_E_INVALID_ARG, "%s: bytes must be > 0, got 0", fn);
    }
    void *p = r->a.alloc(r->a.user, bytes, device, stream);
    if (!p) {
        rec_release(r);
        return NN__FAIL(ectx, NN_E_OOM_DEVICE,
                        "%s: the allocator set with nn_mem_set_allocator() for device %d returned "
                        "NULL for %zu bytes",
                        fn, device, bytes);
    }
    if ((uintptr_t)p % 16) {
        r->a.free(r->a.user, p, bytes, device, stream);
        rec_release(r);
        return NN__FAIL(ectx, NN_E_BAD_POINTER,
                        "%s: the allocator set with nn_mem_set_allocator() for device %d returned "
                        "%p for %zu bytes, not aligned to 16 bytes",
                        fn, device, p, bytes);
    }
    pthread_mutex_lock(&u->lock);
    int bad = tab_put(u, p, r, bytes);
    if (!bad) {
        u->bytes += bytes;
        u->alloc_total++;
    }
    pthread_mutex_unlock(&u->lock);
    if (bad) {
        r->a.free(r->a.user, p, bytes, device, stream);
        rec_release(r);
        return NN__FAIL(ectx, NN_E_OOM_HOST, "%s: out of host memory to track a block", fn);
    }
    *out = p;
    return NN_OK;
}

/* A free: to the user allocator that made p, else to the pool. */
static nn_status dev_free(int device, struct nn__mem_pool *pool, void *stream, uint64_t sid,
                          void *p, const char *fn, struct nn_ctx *ectx)
{
    if (!p) return NN_OK;
    struct dev_user *u = dev_user(device);
    if (atomic_load(&u->live)) {
        pthread_mutex_lock(&u->lock);
        struct user_blk e = tab_take(u, p);
        if (e.p) {
            u->bytes -= e.bytes;
            u->free_total++;
        }
        pthread_mutex_unlock(&u->lock);
        if (e.p) {
            e.rec->a.free(e.rec->a.user, p, e.bytes, device, stream);
            rec_release(e.rec);
            return NN_OK;
        }
    }
    return nn__mem_pool_free(pool, stream, sid, p, fn, ectx);
}

static void user_stats(int device, nn_mem_stats *out)
{
    struct dev_user *u = dev_user(device);
    pthread_mutex_lock(&u->lock);
    out->user_allocator = atomic_load(&u->cur) != NULL;
    out->user_alloc_count = (uint64_t)atomic_load(&u->live);
    out->user_allocated_bytes = u->bytes;
    out->user_alloc_total = u->alloc_total;
    out->user_free_total = u->free_total;
    pthread_mutex_unlock(&u->lock);
}

int nn__dev_owns(struct nn_ctx *ctx, const void *p)
{
    struct dev_user *u = dev_user(ctx->device);
    int found = 0;
    if (atomic_load(&u->live)) {
        pthread_mutex_lock(&u->lock);
        for (size_t j = slot_of(p, u->cap), n = 0; u->cap && u->tab[j].p && n < u->cap;
             j = (j + 1) & (u->cap - 1), n++)
            if (u->tab[j].p == p) {
                found = 1;
                break;
            }
        pthread_mutex_unlock(&u->lock);
    }
    return found || (ctx->graph_mem && nn__graph_mem_owns(ctx, p)) ||
           (ctx->mem_pool && nn__mem_pool_owns(ctx->mem_pool, p));
}

/* ---- contexts ---- */

nn_status nn__mem_ctx_init(struct nn_ctx *ctx)
{
    struct nn__mem_pool *p;
    nn_status st = pool_get(ctx->device, NULL, "nn_ctx_create", &p, NULL);
    if (st != NN_OK) return nn__error_rethrow(ctx, NULL);
    NN__TRY(nn__mem_pool_stream_ref(p, ctx->stream, ctx->stream_id, "nn_ctx_create", ctx));
    ctx->mem_pool = p;
    return NN_OK;
}

void nn__mem_ctx_fini(struct nn_ctx *ctx)
{
    if (!ctx->mem_pool) return;
    nn__mem_pool_stream_unref(ctx->mem_pool, ctx->stream_id);
    ctx->mem_pool = NULL;
}

nn_status nn__mem_ctx_enter(struct nn_ctx *ctx, void *stream, uint64_t stream_id, const char *fn)
{
    return nn__mem_pool_stream_ref(ctx->mem_pool, stream, stream_id, fn, ctx);
}

void nn__mem_ctx_leave(struct nn_ctx *ctx, void *stream, uint64_t stream_id)
{
    nn__mem_pool_stream_leave(ctx->mem_pool, stream, stream_id);
}

nn_status nn__mem_stream_ref(struct nn_ctx *ctx)
{
    return nn__mem_pool_stream_ref(ctx->mem_pool, ctx->stream, ctx->stream_id,
                                   "the background plan builder", ctx);
}

void nn__mem_stream_unref(struct nn_ctx *ctx)
{
    nn__mem_pool_stream_unref(ctx->mem_pool, ctx->stream_id);
}

nn_status nn__dev_alloc_for(struct nn_ctx *ctx, const char *fn, size_t bytes, void **out)
{
    if (ctx->capture) return nn__graph_mem_alloc(ctx, ctx->capture->mem, fn, bytes, out);
    return dev_alloc(ctx->device, ctx->mem_pool, ctx->stream, ctx->stream_id, bytes, out, fn, ctx);
}

nn_status nn__dev_free_for(struct nn_ctx *ctx, const char *fn, void *p)
{
    nn_status st;
    if (p && ctx->graph_mem && nn__graph_mem_free(ctx, fn, p, &st)) return st;
    return dev_free(ctx->device, ctx->mem_pool, ctx->stream, ctx->stream_id, p, fn, ctx);
}

nn_status nn__dev_alloc_capturing(struct nn_ctx *ctx, const char *fn, size_t bytes, void **out,
                                  size_t *size)
{
    *size = bytes;
    if (atomic_load_explicit(&dev_user(ctx->device)->cur, memory_order_acquire))
        return dev_alloc(ctx->device, ctx->mem_pool, ctx->stream, ctx->stream_id, bytes, out, fn,
                         ctx);
    NN__TRY(nn__mem_pool_alloc_capturing(ctx->mem_pool, ctx->stream, ctx->stream_id, bytes, out, fn,
                                         ctx));
    size_t got = nn__mem_pool_block_size(ctx->mem_pool, ctx->stream_id, *out);
    if (got > bytes) *size = got;
    return NN_OK;
}

int nn__dev_grow_block(struct nn_ctx *ctx, void *p, size_t add, size_t *size)
{
    if (atomic_load_explicit(&dev_user(ctx->device)->cur, memory_order_acquire)) return 0;
    return nn__mem_pool_grow(ctx->mem_pool, ctx->stream_id, p, add, size);
}

nn_status nn__dev_free_block(struct nn_ctx *ctx, const char *fn, void *p)
{
    return dev_free(ctx->device, ctx->mem_pool, ctx->stream, ctx->stream_id, p, fn, ctx);
}

void nn__mem_graph_count(struct nn_ctx *ctx, long long delta)
{
    atomic_fetch_add(&graph_bytes[ctx->device + 1], delta);
}

nn_status nn__dev_alloc_ones(struct nn_ctx *ctx, const char *fn, nn_dtype dtype, size_t count,
                             void **out)
{
    *out = NULL;
    size_t es = nn_dtype_size(dtype);
    if (count > SIZE_MAX / es)
        return NN__FAIL(ctx, NN_E_OVERFLOW, "%s: %zu ones of %zu bytes overflow size_t", fn, count,
                        es);
    unsigned char one[8], *h = nn__host_alloc(count * es);
    if (!h)
        return NN__FAIL(ctx, NN_E_OOM_HOST, "%s: out of host memory for %zu bytes of ones", fn,
                        count * es);
    nn__elem_one(dtype, one);
    for (size_t i = 0; i < count; i++)
        memcpy(h + i * es, one, es);
    void *d = NULL;
    nn_status st = nn__dev_alloc_for(ctx, fn, count * es, &d);
#if NN_HAVE_CUDA
    if (st == NN_OK)
        st = NN__CUDA(ctx, cudaMemcpyAsync(d, h, count * es, cudaMemcpyHostToDevice,
                                           (cudaStream_t)ctx->stream));
#endif
    nn__host_free(h);
    if (st != NN_OK) {
        if (d) (void)nn__dev_free_for(ctx, fn, d);
        return st;
    }
    *out = d;
    return NN_OK;
}

nn_status nn__dev_alloc(struct nn_ctx *ctx, size_t bytes, void **out)
{
    return nn__dev_alloc_for(ctx, "nnprim's device memory pool", bytes, out);
}

nn_status nn__dev_free(struct nn_ctx *ctx, void *p)
{
    return nn__dev_free_for(ctx, "nnprim's device memory pool", p);
}

static nn_status check_ctx(nn_ctx *ctx, const char *fn)
{
    if (!ctx) return NN__FAIL(NULL, NN_E_INVALID_ARG, "%s: ctx must not be NULL", fn);
    if (!ctx->mem_pool)
        return NN__FAIL(ctx, NN_E_INVALID_ARG,
                        "%s: ctx runs the reference backend and has no device memory", fn);
    return NN_OK;
}

nn_status nn_mem_alloc(nn_ctx *ctx, size_t bytes, void **out)
{
    if (out) *out = NULL; /* mem.h: NULL on every failure */
    NN__TRY(check_ctx(ctx, "nn_mem_alloc"));
    if (!out) return NN__FAIL(ctx, NN_E_INVALID_ARG, "nn_mem_alloc: out must not be NULL");
    return nn__dev_alloc_for(ctx, "nn_mem_alloc", bytes, out);
}

nn_status nn_mem_free(nn_ctx *ctx, void *p)
{
    NN__TRY(check_ctx(ctx, "nn_mem_free"));
    NN__TRY(nn__dev_free_for(ctx, "nn_mem_free", p));
    nn__watch_freed(p);
    return NN_OK;
}

/* Where p lives: 0 host memory (or unknown to CUDA), 1 device memory of ctx's device, -1 device
 * memory of another one. */
static int where(const struct nn_ctx *ctx, const void *p)
{
#if NN_HAVE_CUDA
    if (nn__cuda_device_count() == 0) return 0;
    struct cudaPointerAttributes a;
    if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
        (void)cudaGetLastError();
        return 0;
    }
    if (a.type != cudaMemoryTypeDevice && a.type != cudaMemoryTypeManaged) return 0;
    return nn__ctx_on_gpu(ctx) && a.device == ctx->device ? 1 : -1;
#else
    (void)ctx, (void)p;
    return 0;
#endif
}

nn_status nn_mem_copy(nn_ctx *ctx, void *dst, const void *src, size_t bytes)
{
    const char *fn = "nn_mem_copy";
    if (!ctx) return NN__FAIL(NULL, NN_E_INVALID_ARG, "%s: ctx must not be NULL", fn);
    if (!bytes) return NN_OK;
    if (!dst || !src)
        return NN__FAIL(ctx, NN_E_INVALID_ARG, "%s: %s must not be NULL", fn, dst ? "src" : "dst");
    const char *d = dst, *s = src;
    if (bytes > SIZE_MAX - (uintptr_t)d || bytes > SIZE_MAX - (uintptr_t)s)
        return NN__FAIL(ctx, NN_E_INVALID_ARG, "%s: %zu bytes from %p or %p wrap the address space",
                        fn, bytes, dst, src);
    if (d < s + bytes && s < d + bytes)
        return NN__FAIL(ctx, NN_E_INVALID_ARG, "%s: dst %p and src %p overlap over %zu bytes", fn,
                        dst, src, bytes);
    int wd = where(ctx, dst), ws = where(ctx, src);
    if (wd < 0 || ws < 0 || (!nn__ctx_on_gpu(ctx) && (wd || ws)))
        return NN__FAIL(ctx, NN_E_MEMSPACE,
                        "%s: %s is device memory %s; this context computes on %s", fn,
                        wd ? "dst" : "src", nn__ctx_on_gpu(ctx) ? "of another device" : "",
                        nn__ctx_on_gpu(ctx) ? "its own device" : "the host (reference backend)");
    if (!wd && !ws) {
        memcpy(dst, src, bytes);
        return NN_OK;
    }
    if (ctx->capture && (!wd || !ws))
        return NN__FAIL(ctx, NN_E_GRAPH,
                        "%s: a copy %s host memory cannot be captured in a graph (the host would "
                        "read or write it at the call, not at each launch); bring data in with "
                        "nn_graph_launch_feeds()",
                        fn, wd ? "from" : "to");
#if NN_HAVE_CUDA
    cudaStream_t st = (cudaStream_t)ctx->stream;
    nn__capture_touch_span(ctx, dst, bytes);
    nn__capture_touch_span(ctx, src, bytes);
    NN__TRY(NN__CUDA(ctx, cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, st)));
    if (!wd) NN__TRY(NN__CUDA(ctx, cudaStreamSynchronize(st)));
#endif
    return NN_OK;
}

/* ---- stream handles ---- */

struct nn_mem_stream {
    struct nn__mem_pool *mem_pool;
    int device;
    void *stream; /* cudaStream_t, or the host stream */
    uint64_t id;
    struct nn__hstream *host;
};

nn_status nn_mem_stream_open(int device, void *stream, nn_mem_stream **out)
{
    if (!out) return NN__FAIL(NULL, NN_E_INVALID_ARG, "nn_mem_stream_open: out must not be NULL");
    *out = NULL;
    if (device == NN_MEM_HOST && stream)
        return NN__FAIL(NULL, NN_E_INVALID_ARG,
                        "nn_mem_stream_open: stream must be NULL for NN_MEM_HOST, got %p", stream);
    struct nn__mem_pool *p;
    NN__TRY(pool_get(device, NULL, "nn_mem_stream_open", &p, NULL));
    nn_mem_stream *s = nn__host_calloc(1, sizeof *s);
    if (!s) return NN__FAIL(NULL, NN_E_OOM_HOST, "nn_mem_stream_open: out of host memory");
    s->mem_pool = p;
    s->device = device;
    nn_status st = NN_OK;
    if (device == NN_MEM_HOST) {
        st = nn__hstream_create(&s->host);
        if (st == NN_OK) {
            s->stream = s->host;
            s->id = nn__hstream_id(s->host);
        }
    } else {
#if NN_HAVE_CUDA
        unsigned long long id = 0;
        s->stream = stream;
        st = NN__CUDA(NULL, cudaStreamGetId((cudaStream_t)stream, &id));
        s->id = id;
#endif
    }
    if (st == NN_OK) st = nn__mem_pool_stream_ref(p, s->stream, s->id, "nn_mem_stream_open", NULL);
    if (st != NN_OK) {
        nn__hstream_destroy(s->host);
        nn__host_free(s);
        return st;
    }
    *out = s;
    return NN_OK;
}

void nn_mem_stream_close(nn_mem_stream *s)
{
    if (!s) return;
    if (s->host) {
        nn__hstream_sync(s->host);
    } else {
#if NN_HAVE_CUDA
        if (cudaStreamSynchronize((cudaStream_t)s->stream) != cudaSuccess) (void)cudaGetLastError();
#endif
    }
    nn__mem_pool_stream_unref(s->mem_pool, s->id);
    nn__hstream_destroy(s->host);
    nn__host_free(s);
}

nn_status nn_mem_stream_alloc(nn_mem_stream *s, size_t bytes, void **out)
{
    if (!s) return NN__FAIL(NULL, NN_E_INVALID_ARG, "nn_mem_stream_alloc: s must not be NULL");
    if (!out) return NN__FAIL(NULL, NN_E_INVALID_ARG, "nn_mem_stream_alloc: out must not be NULL");
    return dev_alloc(s->device, s->mem_pool, s->stream, s->id, bytes, out, "nn_mem_stream_alloc",
                     NULL);
}

nn_status nn_mem_stream_free(nn_mem_stream *s, void *p)
{
    if (!s) return NN__FAIL(NULL, NN_E_INVALID_ARG, "nn_mem_stream_free: s must not be NULL");
    return dev_free(s->device, s->mem_pool, s->stream, s->id, p, "nn_mem_stream_free", NULL);
}

struct nn__hstream *nn__mem_stream_host(nn_mem_stream *s)
{
    return s->host;
}

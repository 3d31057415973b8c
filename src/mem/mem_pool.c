/* The caching pool (see docs/MEMORY.md). Layout:
 *   - 64 shards, chosen by stream id, each with its own lock: threads on their own streams
 *     rarely meet. A shard owns segments; a segment is a list of blocks in address order.
 *   - Free blocks sit in size-class bins (two families: small requests from 2 MiB segments,
 *     large ones from 20 MiB or their own segments), each with its owning stream. A block is
 *     handed out again at once on its own stream; another stream may take it only once an event
 *     recorded on the owner stream has completed (queried, never waited for).
 *   - Adjacent free blocks are merged lazily, when a request finds no fit, so that a hot
 *     alloc/free pair touches no neighbour and no block table.
 *   - Lock order: a shard lock, then the pool lock (a leaf). Two shard locks are never held. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "core/error.h"
#include "core/log.h"
#include "mem/mem_pool.h"

#define NSHARD          64
#define SMALL_MAX       ((size_t)1 << 20)
#define SMALL_SEG       ((size_t)2 << 20)
#define MEDIUM_MAX      ((size_t)10 << 20)
#define MEDIUM_SEG      ((size_t)20 << 20)
#define LARGE_ROUND     ((size_t)2 << 20)
#define LARGE_SPLIT_MIN ((size_t)1 << 20)
#define PUBLISH_QUANTUM ((long long)1 << 20)
#define FIT_SCAN        32 /* blocks looked at per bin: best fit within that window */
#define STEAL_RECORDS   4  /* events recorded on other streams per shard and attempt */
#define EVENT_CACHE     16
#define SPARE_EVENTS    4 /* the stream table's events, kept for the next retirement */
#define OVERSIZE_DIV    8 /* an own-segment request takes blocks up to 1/8 larger (+2 MiB) */
#define GROWTH_FLOOR    ((size_t)8 << 20)
#define MAX_REQUEST     ((size_t)1 << 48) /* more than any device has; keeps sums exact */
#define NWORDS          ((NN__MEM_CLASSES + 63) / 64)

enum { B_LIVE = 1, B_FREE = 2, B_PENDING = 3 };
enum { F_SMALL = 0, F_LARGE = 1 };

/* Why an allocation found no memory, for the message. */
enum why { WHY_SIZE, WHY_LIMIT, WHY_OVER_LIMIT, WHY_UPSTREAM };
struct oom {
    enum why why;
    size_t bytes; /* WHY_LIMIT: the room left; WHY_UPSTREAM: the segment refused */
};

struct seg;

struct blk {
    char *ptr;
    size_t size, requested;
    struct seg *seg;           /* NULL for a bypass allocation */
    struct blk *prev, *next;   /* neighbours in the segment */
    struct blk *lprev, *lnext; /* bin, pending or spare list */
    void *stream;
    uint64_t stream_id;
    void *event; /* PENDING: recorded at a cross-stream free; FREE: recorded for a steal */
    unsigned char state, any_stream;
};

struct seg {
    char *base;
    size_t size;
    int family;
    struct blk *first;
    struct seg *prev, *next;
    uint64_t last_use; /* the owning shard's allocation count when a block was last taken */
};

/* Open addressing (linear probing, backward-shift deletion): block start -> block. */
struct map {
    uintptr_t *keys;
    struct blk **vals;
    size_t cap, used;
};

struct shard {
    pthread_mutex_t lock;
    struct map map;
    struct blk *bins[2][NN__MEM_CLASSES];
    uint64_t mask[2][NWORDS];
    struct blk *pending;
    struct seg *segs;
    atomic_long nsegs; /* read without the lock to skip empty shards */
    atomic_int hint;   /* the shard where this shard's streams last found cached memory */
    struct blk *spare;
    void *events[EVENT_CACHE];
    int n_events;
    int merge_hint[2];
    size_t alloc_bytes, alloc_peak, req_bytes;
    uint64_t alloc_total_bytes, alloc_count, alloc_total, free_total, hits, misses;
    long long unpublished;
} __attribute__((aligned(64)));

/* A stream's state once its users have gone (refs == 0). */
enum { S_ACTIVE, S_RETIRING, S_DONE, S_KEPT };

struct stream_ref {
    uint64_t id;
    long refs;
    int state;   /* S_ACTIVE while refs > 0 */
    void *event; /* S_RETIRING: recorded on the stream as its last user left */
};

struct nn__mem_pool {
    struct nn__upstream up;
    atomic_int bypass;
    atomic_int log_on;
    atomic_int over_limit; /* reserved > limit: read without the lock on every allocation */
    pthread_mutex_t lock;  /* everything below up to the log */
    nn_mem_upstream upstream_kind;
    double growth_slack;
    size_t limit, reserved, reserved_peak;
    uint64_t reserved_total, segs, segs_peak, seg_allocs, seg_frees, oom_retries, oom_failures;
    struct stream_ref *streams;
    size_t n_streams, cap_streams;
    atomic_int n_retired; /* entries with refs == 0: read without the lock on slow paths */
    void *spare[SPARE_EVENTS];
    int n_spare;
    atomic_llong published, published_peak;
    pthread_mutex_t log_lock;
    nn_mem_event *log;
    size_t log_n, log_cap;
    struct shard shards[NSHARD];
};

/* After any change of limit or reserved (pool lock held). */
static void note_limit(struct nn__mem_pool *pool)
{
    atomic_store_explicit(&pool->over_limit, pool->limit && pool->reserved > pool->limit,
                          memory_order_relaxed);
}

/* ---- host structures, counted for the leak check ---- */

static atomic_long meta_live;

long nn__mem_pool_meta_live(void)
{
    return atomic_load(&meta_live);
}

static void *meta_calloc(size_t n, size_t size)
{
    void *p = nn__host_calloc(n, size);
    if (p) atomic_fetch_add(&meta_live, 1);
    return p;
}

static void meta_free(void *p)
{
    if (!p) return;
    atomic_fetch_sub(&meta_live, 1);
    nn__host_free(p);
}

/* ---- block table ---- */

static size_t map_slot(const struct map *m, uintptr_t k)
{
    uint64_t h = (uint64_t)(k >> 9) * 0x9E3779B97F4A7C15ull;
    return (size_t)(h >> 32) & (m->cap - 1);
}

static void map_put(struct map *m, uintptr_t k, struct blk *v)
{
    size_t i = map_slot(m, k);
    while (m->keys[i])
        i = (i + 1) & (m->cap - 1);
    m->keys[i] = k;
    m->vals[i] = v;
    m->used++;
}

/* Room for extra more entries at load <= 1/2; -1 when out of host memory (nothing changed). */
static int map_reserve(struct map *m, size_t extra)
{
    if ((m->used + extra) * 2 <= m->cap) return 0;
    size_t cap = m->cap ? m->cap : 64;
    while ((m->used + extra) * 2 > cap)
        cap *= 2;
    struct map n = {meta_calloc(cap, sizeof *n.keys), meta_calloc(cap, sizeof *n.vals), cap, 0};
    if (!n.keys || !n.vals) {
        meta_free(n.keys);
        meta_free(n.vals);
        return -1;
    }
    for (size_t i = 0; i < m->cap; i++)
        if (m->keys[i]) map_put(&n, m->keys[i], m->vals[i]);
    meta_free(m->keys);
    meta_free(m->vals);
    *m = n;
    return 0;
}

static struct blk *map_get(const struct map *m, uintptr_t k)
{
    if (!m->cap) return NULL;
    for (size_t i = map_slot(m, k);; i = (i + 1) & (m->cap - 1)) {
        if (!m->keys[i]) return NULL;
        if (m->keys[i] == k) return m->vals[i];
    }
}

static void map_del(struct map *m, uintptr_t k)
{
    size_t mask = m->cap - 1, i = map_slot(m, k);
    while (m->keys[i] != k)
        i = (i + 1) & mask;
    /* Shift back the entries of the run that follows, so probing never meets a hole. */
    for (size_t j = (i + 1) & mask; m->keys[j]; j = (j + 1) & mask) {
        size_t home = map_slot(m, m->keys[j]);
        if (((j - home) & mask) >= ((j - i) & mask)) {
            m->keys[i] = m->keys[j];
            m->vals[i] = m->vals[j];
            i = j;
        }
    }
    m->keys[i] = 0;
    m->vals[i] = NULL;
    m->used--;
}

/* ---- block structs, bins, events ---- */

static struct blk *blk_new(struct shard *sh)
{
    struct blk *b = sh->spare;
    if (b)
        sh->spare = b->lnext;
    else if (!(b = meta_calloc(1, sizeof *b)))
        return NULL;
    memset(b, 0, sizeof *b);
    return b;
}

static void blk_recycle(struct shard *sh, struct blk *b)
{
    b->lnext = sh->spare;
    sh->spare = b;
}

static int family_of_size(size_t size)
{
    return size <= SMALL_MAX ? F_SMALL : F_LARGE;
}

static void bin_push(struct shard *sh, struct blk *b)
{
    int f = b->seg->family, c = nn__class_of(b->size);
    b->lprev = NULL;
    b->lnext = sh->bins[f][c];
    if (b->lnext) b->lnext->lprev = b;
    sh->bins[f][c] = b;
    sh->mask[f][c >> 6] |= 1ull << (c & 63);
}

static void bin_remove(struct shard *sh, struct blk *b)
{
    int f = b->seg->family, c = nn__class_of(b->size);
    if (b->lprev)
        b->lprev->lnext = b->lnext;
    else
        sh->bins[f][c] = b->lnext;
    if (b->lnext) b->lnext->lprev = b->lprev;
    if (!sh->bins[f][c]) sh->mask[f][c >> 6] &= ~(1ull << (c & 63));
}

static void list_push(struct blk **head, struct blk *b)
{
    b->lprev = NULL;
    b->lnext = *head;
    if (*head) (*head)->lprev = b;
    *head = b;
}

static void list_remove(struct blk **head, struct blk *b)
{
    if (b->lprev)
        b->lprev->lnext = b->lnext;
    else
        *head = b->lnext;
    if (b->lnext) b->lnext->lprev = b->lprev;
}

static nn_status event_get(struct nn__mem_pool *pool, struct shard *sh, void **ev,
                           struct nn_ctx *ectx)
{
    if (sh->n_events) {
        *ev = sh->events[--sh->n_events];
        return NN_OK;
    }
    return pool->up.ops->event_create(pool->up.st, ev, ectx);
}

static void event_put(struct nn__mem_pool *pool, struct shard *sh, void *ev)
{
    if (sh->n_events < EVENT_CACHE)
        sh->events[sh->n_events++] = ev;
    else
        pool->up.ops->event_destroy(pool->up.st, ev);
}

/* ---- statistics and log ---- */

static void log_event(struct nn__mem_pool *pool, nn_mem_event_kind kind, uint64_t sid,
                      const void *p, size_t bytes)
{
    if (!atomic_load_explicit(&pool->log_on, memory_order_relaxed)) return;
    nn_mem_event e = {kind, nn__now_ns(), sid, (uintptr_t)p, bytes};
    pthread_mutex_lock(&pool->log_lock);
    if (pool->log_n == pool->log_cap) {
        size_t cap = pool->log_cap ? pool->log_cap * 2 : 1024;
        nn_mem_event *n = nn__host_realloc(pool->log, cap * sizeof *n);
        if (n) {
            pool->log = n;
            pool->log_cap = cap;
        }
    }
    if (pool->log_n < pool->log_cap) pool->log[pool->log_n++] = e;
    pthread_mutex_unlock(&pool->log_lock);
}

static void raise_peak(struct nn__mem_pool *pool, long long v)
{
    long long peak = atomic_load(&pool->published_peak);
    while (v > peak && !atomic_compare_exchange_weak(&pool->published_peak, &peak, v)) {}
}

static void publish(struct nn__mem_pool *pool, struct shard *sh, long long delta)
{
    sh->unpublished += delta;
    if (sh->unpublished < PUBLISH_QUANTUM && sh->unpublished > -PUBLISH_QUANTUM) return;
    long long v = atomic_fetch_add(&pool->published, sh->unpublished) + sh->unpublished;
    sh->unpublished = 0;
    raise_peak(pool, v);
}

/* sh's (locked) remainder into the published sum, without raising the peak: while other shards
 * still hold theirs, the partial sum may be above anything that was ever allocated. A shard whose
 * stream is gone would otherwise keep its remainder, and the sum off by it, for good. */
static void publish_rest(struct nn__mem_pool *pool, struct shard *sh)
{
    atomic_fetch_add(&pool->published, sh->unpublished);
    sh->unpublished = 0;
}

/* Bytes handed out (size, rounded) and asked for (requested) grow by these. */
static void count_more(struct nn__mem_pool *pool, struct shard *sh, size_t size, size_t requested)
{
    sh->alloc_bytes += size;
    sh->req_bytes += requested;
    if (sh->alloc_bytes > sh->alloc_peak) sh->alloc_peak = sh->alloc_bytes;
    sh->alloc_total_bytes += size;
    publish(pool, sh, (long long)size);
}

static void count_alloc(struct nn__mem_pool *pool, struct shard *sh, struct blk *b)
{
    count_more(pool, sh, b->size, b->requested);
    sh->alloc_count++;
    sh->alloc_total++;
    log_event(pool, NN_MEM_EVENT_ALLOC, b->stream_id, b->ptr, b->requested);
}

static void count_free(struct nn__mem_pool *pool, struct shard *sh, struct blk *b, uint64_t sid)
{
    sh->alloc_bytes -= b->size;
    sh->req_bytes -= b->requested;
    sh->alloc_count--;
    sh->free_total++;
    publish(pool, sh, -(long long)b->size);
    log_event(pool, NN_MEM_EVENT_FREE, sid, b->ptr, b->requested);
}

/* ---- finding and taking blocks ---- */

static int eligible(const struct blk *b, uint64_t sid)
{
    return b->any_stream || b->stream_id == sid;
}

/* Smallest eligible block of at least size in one bin (within the scan window). */
static int whole(const struct blk *b)
{
    return !b->prev && !b->next;
}

static struct blk *bin_best(struct blk *b, size_t size, size_t most, uint64_t sid, int whole_only)
{
    struct blk *best = NULL;
    for (int n = 0; b && n < FIT_SCAN; b = b->lnext, n++) {
        if (b->size < size || b->size > most || !eligible(b, sid)) continue;
        if (whole_only && !whole(b)) continue;
        if (!best || b->size < best->size) best = b;
        if (b->size == size) break;
    }
    return best;
}

/* The largest block a request may be cut from. Requests that get their own segment are not cut
 * from much larger blocks: a small live piece would pin a big segment that could otherwise go
 * back to the driver when the pool has to grow. */
static size_t most_for(int f, size_t size)
{
    if (f == F_SMALL || size <= MEDIUM_MAX) return SIZE_MAX;
    return size + size / OVERSIZE_DIV + LARGE_ROUND;
}

/* Best fit among the blocks sid may use; whole_only: only blocks that are a whole segment. */
static struct blk *find_fit_in(struct shard *sh, int f, size_t size, uint64_t sid, int whole_only)
{
    int c = nn__class_of(size);
    size_t most = most_for(f, size);
    struct blk *b = bin_best(sh->bins[f][c], size, most, sid, whole_only);
    if (b) return b;
    /* Every block of a higher class is large enough. */
    for (int w = (c + 1) >> 6; w < NWORDS; w++) {
        uint64_t bits = sh->mask[f][w];
        if (w == (c + 1) >> 6) bits &= ~0ull << ((c + 1) & 63);
        while (bits) {
            int k = w * 64 + __builtin_ctzll(bits);
            bits &= bits - 1;
            if (nn__class_lo(k) > most) return NULL;
            if ((b = bin_best(sh->bins[f][k], 0, most, sid, whole_only))) return b;
        }
    }
    return NULL;
}

static struct blk *find_fit(struct shard *sh, int f, size_t size, uint64_t sid)
{
    return find_fit_in(sh, f, size, sid, 0);
}

/* For a graph's memory, which grows its blocks in place (nn__mem_pool_grow): the largest block
 * sid may use of at least size, of either family (each bin within the scan window), so that the
 * block has the most free memory after it. Blocks above most_for() stay out as in find_fit. */
static struct blk *find_roomy(struct shard *sh, size_t size, uint64_t sid)
{
    struct blk *best = NULL;
    for (int f = F_SMALL; f <= F_LARGE; f++) {
        size_t most = most_for(f, size);
        for (int k = NN__MEM_CLASSES - 1;
             k >= 0 && (k + 1 == NN__MEM_CLASSES || nn__class_lo(k + 1) > size); k--) {
            if (!(sh->mask[f][k >> 6] & 1ull << (k & 63)) || nn__class_lo(k) > most) continue;
            struct blk *b = sh->bins[f][k], *top = NULL;
            for (int n = 0; b && n < FIT_SCAN; b = b->lnext, n++)
                if (b->size >= size && b->size <= most && eligible(b, sid) &&
                    (!top || b->size > top->size))
                    top = b;
            if (top) {
                if (!best || top->size > best->size) best = top;
                break; /* the lower classes of this family hold smaller blocks */
            }
        }
    }
    return best;
}

static size_t split_min(int family)
{
    return family == F_SMALL ? NN__MEM_ALIGN : LARGE_SPLIT_MIN;
}

/* Hand out b (FREE, in its bin) for size bytes; split off the rest when it is worth keeping and
 * host memory allows (otherwise the whole block goes out). */
static void take(struct nn__mem_pool *pool, struct shard *sh, struct blk *b, size_t size,
                 size_t requested, void *stream, uint64_t sid)
{
    bin_remove(sh, b);
    if (b->event) {
        event_put(pool, sh, b->event);
        b->event = NULL;
    }
    size_t rest = b->size - size;
    if (rest >= split_min(b->seg->family) && map_reserve(&sh->map, 1) == 0) {
        struct blk *r = blk_new(sh);
        if (r) {
            r->ptr = b->ptr + size;
            r->size = rest;
            r->seg = b->seg;
            r->prev = b;
            r->next = b->next;
            if (b->next) b->next->prev = r;
            b->next = r;
            r->state = B_FREE;
            r->stream = b->stream;
            r->stream_id = b->stream_id;
            r->any_stream = b->any_stream;
            b->size = size;
            map_put(&sh->map, (uintptr_t)r->ptr, r);
            bin_push(sh, r);
        }
    }
    b->state = B_LIVE;
    b->stream = stream;
    b->stream_id = sid;
    b->any_stream = 0;
    b->requested = requested;
    count_alloc(pool, sh, b);
    if (b->seg) b->seg->last_use = sh->alloc_total;
}

static int mergeable(const struct blk *a, const struct blk *b)
{
    return a && b && a->state == B_FREE && b->state == B_FREE && !a->event && !b->event &&
           (a->any_stream || b->any_stream || a->stream_id == b->stream_id);
}

/* Merge b->next into b (both FREE and compatible). */
static void merge_next(struct shard *sh, struct blk *b)
{
    struct blk *n = b->next;
    bin_remove(sh, b);
    bin_remove(sh, n);
    if (b->any_stream && !n->any_stream) {
        b->stream = n->stream;
        b->stream_id = n->stream_id;
        b->any_stream = 0;
    }
    b->size += n->size;
    b->next = n->next;
    if (n->next) n->next->prev = b;
    map_del(&sh->map, (uintptr_t)n->ptr);
    blk_recycle(sh, n);
    bin_push(sh, b);
}

static void coalesce(struct shard *sh, int f)
{
    if (!sh->merge_hint[f]) return;
    sh->merge_hint[f] = 0;
    for (struct seg *s = sh->segs; s; s = s->next) {
        if (s->family != f) continue;
        for (struct blk *b = s->first; b; b = b->next)
            while (mergeable(b, b->next))
                merge_next(sh, b);
    }
}

static void note_free_neighbours(struct shard *sh, struct blk *b)
{
    if ((b->prev && b->prev->state == B_FREE) || (b->next && b->next->state == B_FREE))
        sh->merge_hint[b->seg->family] = 1;
}

static int stream_retired(struct nn__mem_pool *pool, uint64_t id);
static void settle_streams(struct nn__mem_pool *pool);

/* Blocks freed from another stream become usable by all once their event has completed. */
static void poll_pending(struct nn__mem_pool *pool, struct shard *sh)
{
    struct blk *b = sh->pending, *next;
    for (; b; b = next) {
        next = b->lnext;
        if (pool->up.ops->event_query(pool->up.st, b->event) != 1) continue;
        list_remove(&sh->pending, b);
        event_put(pool, sh, b->event);
        b->event = NULL;
        b->state = B_FREE;
        b->any_stream = 1;
        bin_push(sh, b);
        note_free_neighbours(sh, b);
    }
}

/* Try to make a block of another stream usable by sid: record an event on its owner stream
 * (once) and query it. Returns 1 if one became usable. */
static int steal_one(struct nn__mem_pool *pool, struct shard *sh, int f, size_t size, uint64_t sid,
                     int whole_only, struct nn_ctx *ectx)
{
    int records = 0;
    for (int c = nn__class_of(size); c < NN__MEM_CLASSES; c++) {
        if (!(sh->mask[f][c >> 6] & (1ull << (c & 63)))) continue;
        for (struct blk *b = sh->bins[f][c]; b; b = b->lnext) {
            if (b->size < size || b->size > most_for(f, size) || eligible(b, sid)) continue;
            if (whole_only && !whole(b)) continue;
            if (!b->event) {
                if (stream_retired(pool, b->stream_id)) continue;
                if (records == STEAL_RECORDS) return 0;
                void *ev;
                if (event_get(pool, sh, &ev, ectx) != NN_OK) return 0;
                if (pool->up.ops->event_record(pool->up.st, ev, b->stream, ectx) != NN_OK) {
                    event_put(pool, sh, ev);
                    return 0;
                }
                b->event = ev;
                records++;
            }
            if (pool->up.ops->event_query(pool->up.st, b->event) == 1) {
                event_put(pool, sh, b->event);
                b->event = NULL;
                b->any_stream = 1;
                return 1;
            }
        }
    }
    return 0;
}

/* ---- segments ---- */

static void seg_release(struct nn__mem_pool *pool, struct shard *sh, struct seg *s)
{
    struct blk *b = s->first;
    bin_remove(sh, b);
    if (b->event) event_put(pool, sh, b->event);
    map_del(&sh->map, (uintptr_t)b->ptr);
    blk_recycle(sh, b);
    if (s->prev)
        s->prev->next = s->next;
    else
        sh->segs = s->next;
    if (s->next) s->next->prev = s->prev;
    atomic_fetch_sub(&sh->nsegs, 1);
    pool->up.ops->seg_free(pool->up.st, s->base);
    log_event(pool, NN_MEM_EVENT_SEGMENT_FREE, 0, s->base, s->size);
    pthread_mutex_lock(&pool->lock);
    pool->reserved -= s->size;
    note_limit(pool);
    pool->segs--;
    pool->seg_frees++;
    pthread_mutex_unlock(&pool->lock);
    meta_free(s);
}

/* After a quiesce, a free block owned by a stream can be shared when its stream is idle: known
 * when the upstream says every stream is, else asked through an event. */
static void share_if_idle(struct nn__mem_pool *pool, struct shard *sh, struct blk *b, int all_idle)
{
    if (b->state != B_FREE || b->any_stream) return;
    if (!all_idle) {
        if (!b->event) {
            if (stream_retired(pool, b->stream_id)) return;
            void *ev;
            if (event_get(pool, sh, &ev, NULL) != NN_OK) return;
            if (pool->up.ops->event_record(pool->up.st, ev, b->stream, NULL) != NN_OK) {
                event_put(pool, sh, ev);
                return;
            }
            b->event = ev;
        }
        if (pool->up.ops->event_query(pool->up.st, b->event) != 1) return;
    }
    if (b->event) event_put(pool, sh, b->event);
    b->event = NULL;
    b->any_stream = 1;
}

/* Make what can be shared shareable and merge, so that entirely free segments show. */
static void shard_settle(struct nn__mem_pool *pool, struct shard *sh, int all_idle)
{
    poll_pending(pool, sh);
    for (struct seg *s = sh->segs; s; s = s->next)
        for (struct blk *b = s->first; b; b = b->next)
            share_if_idle(pool, sh, b, all_idle);
    sh->merge_hint[0] = sh->merge_hint[1] = 1;
    coalesce(sh, F_SMALL);
    coalesce(sh, F_LARGE);
}

static int releasable(const struct seg *s, int all_idle)
{
    const struct blk *b = s->first;
    return b->state == B_FREE && !b->next && (all_idle || b->any_stream);
}

/* Release every segment that is one free block once shared blocks are merged. */
static size_t shard_trim(struct nn__mem_pool *pool, struct shard *sh, int all_idle)
{
    size_t released = 0;
    pthread_mutex_lock(&sh->lock);
    shard_settle(pool, sh, all_idle);
    struct seg *s = sh->segs, *next;
    for (; s; s = next) {
        next = s->next;
        if (releasable(s, all_idle)) {
            released += s->size;
            seg_release(pool, sh, s);
        }
    }
    pthread_mutex_unlock(&sh->lock);
    return released;
}

size_t nn__mem_pool_trim(struct nn__mem_pool *pool)
{
    settle_streams(pool);
    int all_idle = pool->up.ops->quiesce(pool->up.st);
    size_t released = 0;
    for (int i = 0; i < NSHARD; i++)
        if (atomic_load_explicit(&pool->shards[i].nsegs, memory_order_relaxed))
            released += shard_trim(pool, &pool->shards[i], all_idle);
    return released;
}

struct candidate {
    uint64_t last_use;
    struct seg *seg;
    int shard;
};

static int by_last_use(const void *a, const void *b)
{
    uint64_t x = ((const struct candidate *)a)->last_use;
    uint64_t y = ((const struct candidate *)b)->last_use;
    return x < y ? -1 : x > y;
}

/* Release entirely free segments, least recently used first, until at least want bytes went.
 * Falls back to releasing all of them when the candidate list cannot be allocated. */
static void release_lru(struct nn__mem_pool *pool, size_t want)
{
    int all_idle = pool->up.ops->quiesce(pool->up.st);
    struct candidate *c = NULL;
    size_t n = 0, cap = 0;
    int oom = 0;
    for (int i = 0; i < NSHARD && !oom; i++) {
        struct shard *sh = &pool->shards[i];
        if (!atomic_load_explicit(&sh->nsegs, memory_order_relaxed)) continue;
        pthread_mutex_lock(&sh->lock);
        shard_settle(pool, sh, all_idle);
        for (struct seg *s = sh->segs; s && !oom; s = s->next) {
            if (!releasable(s, all_idle)) continue;
            if (n == cap) {
                size_t ncap = cap ? cap * 2 : 64;
                struct candidate *g = nn__host_realloc(c, ncap * sizeof *g);
                if (!g) {
                    oom = 1;
                    break;
                }
                c = g;
                cap = ncap;
            }
            c[n++] = (struct candidate){s->last_use, s, i};
        }
        pthread_mutex_unlock(&sh->lock);
    }
    if (oom) {
        nn__host_free(c);
        nn__mem_pool_trim(pool);
        return;
    }
    if (n) qsort(c, n, sizeof *c, by_last_use);
    size_t released = 0;
    for (size_t k = 0; k < n && released < want; k++) {
        struct shard *sh = &pool->shards[c[k].shard];
        pthread_mutex_lock(&sh->lock);
        /* Still there and still free? Another thread may have used or released it. */
        struct seg *s = sh->segs;
        while (s && s != c[k].seg)
            s = s->next;
        if (s && releasable(s, all_idle)) {
            released += s->size;
            seg_release(pool, sh, s);
        }
        pthread_mutex_unlock(&sh->lock);
    }
    nn__host_free(c);
}

/* size rounded up to LARGE_ROUND; 0 when that overflows. */
static size_t round_large(size_t size)
{
    if (size > SIZE_MAX - (LARGE_ROUND - 1)) return 0;
    return (size + LARGE_ROUND - 1) / LARGE_ROUND * LARGE_ROUND;
}

static size_t segment_size(int f, size_t size)
{
    if (f == F_SMALL) return SMALL_SEG;
    if (size <= MEDIUM_MAX) return MEDIUM_SEG;
    return round_large(size);
}

/* Count a segment for a request of size bytes in family f against the limit: the usual segment
 * when it fits; else a medium request's own 2 MiB-rounded size; else whatever fits under the
 * limit, if the request does (so a small limit still serves small requests). Returns the bytes
 * counted, 0 for none; *room receives what the limit left. */
static size_t reserve_bytes(struct nn__mem_pool *pool, int f, size_t size, size_t *room)
{
    size_t want = segment_size(f, size); /* 0 when rounding overflows */
    size_t own = f == F_SMALL ? 0 : round_large(size);
    size_t got = 0;
    pthread_mutex_lock(&pool->lock);
    *room = !pool->limit                   ? SIZE_MAX
            : pool->limit > pool->reserved ? pool->limit - pool->reserved
                                           : 0;
    if (want && want <= *room) {
        got = want;
    } else if (own && own <= *room) {
        got = own;
    } else if (size <= *room) {
        size_t cap = want ? want : own ? own : size, fit = *room & ~(size_t)(NN__MEM_ALIGN - 1);
        got = fit < cap ? fit : cap;
    }
    if (got) {
        pool->reserved += got;
        note_limit(pool);
    }
    pthread_mutex_unlock(&pool->lock);
    return got;
}

static void unreserve(struct nn__mem_pool *pool, size_t bytes)
{
    pthread_mutex_lock(&pool->lock);
    pool->reserved -= bytes;
    note_limit(pool);
    pthread_mutex_unlock(&pool->lock);
}

/* A new segment in sh, and the block for the request taken from it. NN_E_OOM_DEVICE when the
 * limit or the upstream refuses, *why saying which (the caller writes the message). */
static nn_status grow(struct nn__mem_pool *pool, struct shard *sh, int f, size_t size,
                      size_t requested, void *stream, uint64_t sid, void **out, const char *fn,
                      struct oom *why, struct nn_ctx *ectx)
{
    size_t room, bytes = reserve_bytes(pool, f, size, &room);
    if (!bytes) {
        *why = (struct oom){WHY_LIMIT, room};
        return NN_E_OOM_DEVICE;
    }
    struct seg *s = meta_calloc(1, sizeof *s);
    if (!s) {
        unreserve(pool, bytes);
        return NN__FAIL(ectx, NN_E_OOM_HOST, "%s: out of host memory for a segment", fn);
    }
    void *base;
    nn_status st = pool->up.ops->seg_alloc(pool->up.st, bytes, stream, &base, ectx);
    if (st != NN_OK) {
        meta_free(s);
        unreserve(pool, bytes);
        *why = (struct oom){WHY_UPSTREAM, bytes};
        return st;
    }
    pthread_mutex_lock(&sh->lock);
    struct blk *b = map_reserve(&sh->map, 2) == 0 ? blk_new(sh) : NULL;
    if (!b) {
        pthread_mutex_unlock(&sh->lock);
        pool->up.ops->seg_free(pool->up.st, base);
        meta_free(s);
        unreserve(pool, bytes);
        return NN__FAIL(ectx, NN_E_OOM_HOST, "%s: out of host memory for a segment", fn);
    }
    s->base = base;
    s->size = bytes;
    s->family = f;
    s->first = b;
    s->next = sh->segs;
    if (sh->segs) sh->segs->prev = s;
    sh->segs = s;
    atomic_fetch_add(&sh->nsegs, 1);
    b->ptr = base;
    b->size = bytes;
    b->seg = s;
    b->state = B_FREE;
    b->stream = stream;
    b->stream_id = sid;
    map_put(&sh->map, (uintptr_t)base, b);
    bin_push(sh, b);
    pthread_mutex_lock(&pool->lock);
    pool->segs++;
    if (pool->segs > pool->segs_peak) pool->segs_peak = pool->segs;
    if (pool->reserved > pool->reserved_peak) pool->reserved_peak = pool->reserved;
    pool->reserved_total += bytes;
    pool->seg_allocs++;
    pthread_mutex_unlock(&pool->lock);
    log_event(pool, NN_MEM_EVENT_SEGMENT_ALLOC, sid, base, bytes);
    take(pool, sh, b, size, requested, stream, sid);
    sh->misses++;
    pthread_mutex_unlock(&sh->lock);
    *out = b->ptr;
    return NN_OK;
}

/* ---- allocation and free ---- */

static struct shard *shard_of(struct nn__mem_pool *pool, uint64_t sid)
{
    return &pool->shards[sid % NSHARD];
}

static void allocated_now(struct nn__mem_pool *pool, size_t *bytes, size_t *req);

static nn_status oom_message(struct nn__mem_pool *pool, const char *fn, size_t requested,
                             const struct oom *why, struct nn_ctx *ectx)
{
    size_t in_use, req;
    allocated_now(pool, &in_use, &req);
    pthread_mutex_lock(&pool->lock);
    pool->oom_failures++;
    size_t reserved = pool->reserved, limit = pool->limit;
    pthread_mutex_unlock(&pool->lock);
    char lim[32], reason[160];
    if (limit)
        snprintf(lim, sizeof lim, "%zu", limit);
    else
        snprintf(lim, sizeof lim, "none");
    switch (why->why) {
    case WHY_SIZE:
        snprintf(reason, sizeof reason, "no pool can serve more than %zu bytes", MAX_REQUEST);
        break;
    case WHY_LIMIT:
        snprintf(reason, sizeof reason, "the limit leaves room for %zu more bytes", why->bytes);
        break;
    case WHY_OVER_LIMIT:
        snprintf(reason, sizeof reason,
                 "the limit is below what is reserved, also after releasing the cached "
                 "segments; free memory first");
        break;
    case WHY_UPSTREAM:
        snprintf(reason, sizeof reason, "the %s refused a segment of %zu bytes", pool->up.name,
                 why->bytes);
        break;
    }
    return NN__FAIL(ectx, NN_E_OOM_DEVICE,
                    "%s: out of device memory (%s): requested %zu bytes, in use %zu, "
                    "reserved %zu, limit %s: %s",
                    fn, pool->up.name, requested, in_use, reserved, lim, reason);
}

/* Take the segment of b (its only block, FREE) out of sh. */
static void seg_detach(struct nn__mem_pool *pool, struct shard *sh, struct blk *b)
{
    struct seg *s = b->seg;
    bin_remove(sh, b);
    if (b->event) event_put(pool, sh, b->event);
    b->event = NULL;
    map_del(&sh->map, (uintptr_t)b->ptr);
    if (s->prev)
        s->prev->next = s->next;
    else
        sh->segs = s->next;
    if (s->next) s->next->prev = s->prev;
    atomic_fetch_sub(&sh->nsegs, 1);
}

/* Put a detached segment into sh; the caller reserved a table slot. */
static void seg_attach(struct shard *sh, struct blk *b)
{
    struct seg *s = b->seg;
    s->prev = NULL;
    s->next = sh->segs;
    if (sh->segs) sh->segs->prev = s;
    sh->segs = s;
    atomic_fetch_add(&sh->nsegs, 1);
    map_put(&sh->map, (uintptr_t)b->ptr, b);
    bin_push(sh, b);
}

/* Look through every shard, own first: complete cross-stream frees, merge, fit, and try to take
 * blocks cached by other streams. From other shards only whole free segments are taken (and
 * moved to the requester's shard) unless partial_ok: a stream that takes a piece of another
 * stream's segment works under that stream's lock from then on, which serialises the two. */
static int alloc_from_cache(struct nn__mem_pool *pool, int f, size_t size, size_t requested,
                            void *stream, uint64_t sid, int partial_ok, void **out,
                            struct nn_ctx *ectx)
{
    size_t own = sid % NSHARD;
    settle_streams(pool);
    for (size_t i = 0; i < NSHARD; i++) {
        struct shard *sh = &pool->shards[(own + i) % NSHARD];
        if (i && !atomic_load_explicit(&sh->nsegs, memory_order_relaxed)) continue;
        int whole_only = i && !partial_ok;
        pthread_mutex_lock(&sh->lock);
        poll_pending(pool, sh);
        coalesce(sh, f);
        struct blk *b = find_fit_in(sh, f, size, sid, whole_only);
        if (!b && steal_one(pool, sh, f, size, sid, whole_only, ectx))
            b = find_fit_in(sh, f, size, sid, whole_only);
        if (b && i && whole(b)) {
            /* The segment moves to the requester's shard. */
            seg_detach(pool, sh, b);
            pthread_mutex_unlock(&sh->lock);
            struct shard *to = &pool->shards[own];
            pthread_mutex_lock(&to->lock);
            if (map_reserve(&to->map, 1) != 0) {
                pthread_mutex_unlock(&to->lock);
                to = sh; /* room is left where it came from */
                pthread_mutex_lock(&to->lock);
            }
            seg_attach(to, b);
            take(pool, to, b, size, requested, stream, sid);
            to->hits++;
            pthread_mutex_unlock(&to->lock);
            *out = b->ptr;
            return 1;
        }
        if (b) {
            take(pool, sh, b, size, requested, stream, sid);
            sh->hits++;
            pthread_mutex_unlock(&sh->lock);
            atomic_store_explicit(&pool->shards[own].hint, (int)((own + i) % NSHARD),
                                  memory_order_relaxed);
            *out = b->ptr;
            return 1;
        }
        pthread_mutex_unlock(&sh->lock);
    }
    return 0;
}

static nn_status alloc_bypass(struct nn__mem_pool *pool, size_t size, size_t requested,
                              void *stream, uint64_t sid, void **out, const char *fn,
                              struct nn_ctx *ectx)
{
    pthread_mutex_lock(&pool->lock);
    size_t room = !pool->limit                   ? SIZE_MAX
                  : pool->limit > pool->reserved ? pool->limit - pool->reserved
                                                 : 0;
    int over = size > room;
    if (!over) {
        pool->reserved += size;
        note_limit(pool);
    }
    pthread_mutex_unlock(&pool->lock);
    if (over) return oom_message(pool, fn, requested, &(struct oom){WHY_LIMIT, room}, ectx);
    void *p;
    nn_status st = pool->up.ops->raw_alloc(pool->up.st, size, &p, ectx);
    if (st != NN_OK) {
        unreserve(pool, size);
        return st == NN_E_OOM_DEVICE
                   ? oom_message(pool, fn, requested, &(struct oom){WHY_UPSTREAM, size}, ectx)
                   : st;
    }
    struct shard *sh = shard_of(pool, sid);
    pthread_mutex_lock(&sh->lock);
    struct blk *b = map_reserve(&sh->map, 1) == 0 ? blk_new(sh) : NULL;
    if (!b) {
        pthread_mutex_unlock(&sh->lock);
        pool->up.ops->raw_free(pool->up.st, p);
        unreserve(pool, size);
        return NN__FAIL(ectx, NN_E_OOM_HOST, "%s: out of host memory", fn);
    }
    b->ptr = p;
    b->size = size;
    b->requested = requested;
    b->state = B_LIVE;
    b->stream = stream;
    b->stream_id = sid;
    map_put(&sh->map, (uintptr_t)p, b);
    count_alloc(pool, sh, b);
    sh->misses++;
    pthread_mutex_unlock(&sh->lock);
    pthread_mutex_lock(&pool->lock);
    if (pool->reserved > pool->reserved_peak) pool->reserved_peak = pool->reserved;
    pool->reserved_total += size;
    pthread_mutex_unlock(&pool->lock);
    *out = p;
    return NN_OK;
}

/* The fast path: a fit in one shard, no bookkeeping beyond the block itself. */
static int try_shard(struct nn__mem_pool *pool, struct shard *sh, int f, size_t size,
                     size_t requested, void *stream, uint64_t sid, void **out)
{
    pthread_mutex_lock(&sh->lock);
    struct blk *b = find_fit(sh, f, size, sid);
    if (b) {
        take(pool, sh, b, size, requested, stream, sid);
        sh->hits++;
    }
    pthread_mutex_unlock(&sh->lock);
    if (b) *out = b->ptr;
    return b != NULL;
}

/* Before taking a new segment: when reserved memory would pass growth_slack times the peak in
 * use (plus GROWTH_FLOOR), give the segments that are entirely free back first, so that reserved
 * memory follows the peak in use instead of the sum of every size ever asked for. Measuring
 * against the peak keeps a repeating workload from releasing and re-taking the same segments at
 * every round. */
static void release_for_growth(struct nn__mem_pool *pool, int f, size_t size)
{
    pthread_mutex_lock(&pool->lock);
    double slack = pool->growth_slack;
    pthread_mutex_unlock(&pool->lock);
    if (slack == 0.0) return;
    size_t seg = segment_size(f, size), in_use, req;
    allocated_now(pool, &in_use, &req);
    size_t peak = (size_t)atomic_load(&pool->published_peak);
    for (int i = 0; i < NSHARD; i++) {
        struct shard *sh = &pool->shards[i];
        pthread_mutex_lock(&sh->lock);
        if (sh->alloc_peak > peak) peak = sh->alloc_peak;
        pthread_mutex_unlock(&sh->lock);
    }
    if (in_use + seg > peak) peak = in_use + seg;
    pthread_mutex_lock(&pool->lock);
    size_t reserved = pool->reserved;
    pthread_mutex_unlock(&pool->lock);
    double allowed = slack * (double)peak + (double)GROWTH_FLOOR;
    if ((double)(reserved + seg) <= allowed) return;
    release_lru(pool, (size_t)((double)(reserved + seg) - allowed));
}

/* While a lowered limit sits below what is reserved, every allocation first releases the cached
 * segments (as the out-of-memory ladder does) and fails if that does not bring the pool under the
 * limit: serving from the cache would keep the pool above the limit indefinitely. */
static int still_over_limit(struct nn__mem_pool *pool)
{
    if (!atomic_load_explicit(&pool->over_limit, memory_order_relaxed)) return 0;
    pthread_mutex_lock(&pool->lock);
    pool->oom_retries++;
    pthread_mutex_unlock(&pool->lock);
    nn__mem_pool_trim(pool);
    return atomic_load_explicit(&pool->over_limit, memory_order_relaxed);
}

nn_status nn__mem_pool_alloc(struct nn__mem_pool *pool, void *stream, uint64_t stream_id,
                             size_t bytes, void **out, const char *fn, struct nn_ctx *ectx)
{
    *out = NULL;
    if (bytes == 0) return NN__FAIL(ectx, NN_E_INVALID_ARG, "%s: bytes must be > 0, got 0", fn);
    if (bytes > MAX_REQUEST) return oom_message(pool, fn, bytes, &(struct oom){WHY_SIZE, 0}, ectx);
    if (still_over_limit(pool))
        return oom_message(pool, fn, bytes, &(struct oom){WHY_OVER_LIMIT, 0}, ectx);
    size_t size = nn__mem_round(bytes);
    if (atomic_load_explicit(&pool->bypass, memory_order_relaxed))
        return alloc_bypass(pool, size, bytes, stream, stream_id, out, fn, ectx);
    int f = family_of_size(size);
    struct shard *sh = shard_of(pool, stream_id);

    if (try_shard(pool, sh, f, size, bytes, stream, stream_id, out)) return NN_OK;
    /* Memory this stream took over from others lives in their shards; look where it last was. */
    int hint = atomic_load_explicit(&sh->hint, memory_order_relaxed);
    if (&pool->shards[hint] != sh &&
        try_shard(pool, &pool->shards[hint], f, size, bytes, stream, stream_id, out))
        return NN_OK;

    if (alloc_from_cache(pool, f, size, bytes, stream, stream_id, 0, out, ectx)) return NN_OK;
    release_for_growth(pool, f, size);
    struct oom why;
    nn_status st = grow(pool, sh, f, size, bytes, stream, stream_id, out, fn, &why, ectx);
    if (st != NN_E_OOM_DEVICE) return st;
    /* The ladder: give cached segments back to the driver and try once more. */
    pthread_mutex_lock(&pool->lock);
    pool->oom_retries++;
    pthread_mutex_unlock(&pool->lock);
    nn__mem_pool_trim(pool);
    if (alloc_from_cache(pool, f, size, bytes, stream, stream_id, 1, out, ectx)) return NN_OK;
    st = grow(pool, sh, f, size, bytes, stream, stream_id, out, fn, &why, ectx);
    if (st != NN_E_OOM_DEVICE) return st;
    return oom_message(pool, fn, bytes, &why, ectx);
}

nn_status nn__mem_pool_alloc_capturing(struct nn__mem_pool *pool, void *stream, uint64_t stream_id,
                                       size_t bytes, void **out, const char *fn,
                                       struct nn_ctx *ectx)
{
    *out = NULL;
    if (bytes == 0) return NN__FAIL(ectx, NN_E_INVALID_ARG, "%s: bytes must be > 0, got 0", fn);
    if (bytes > MAX_REQUEST) return oom_message(pool, fn, bytes, &(struct oom){WHY_SIZE, 0}, ectx);
    /* still_over_limit() would trim, which waits for the device */
    if (atomic_load_explicit(&pool->over_limit, memory_order_relaxed))
        return oom_message(pool, fn, bytes, &(struct oom){WHY_OVER_LIMIT, 0}, ectx);
    size_t size = nn__mem_round(bytes);
    int f = family_of_size(size);
    struct shard *sh = shard_of(pool, stream_id);
    if (!atomic_load_explicit(&pool->bypass, memory_order_relaxed)) {
        pthread_mutex_lock(&sh->lock);
        poll_pending(pool, sh);
        coalesce(sh, F_SMALL);
        coalesce(sh, F_LARGE);
        struct blk *b = find_roomy(sh, size, stream_id);
        if (b) {
            take(pool, sh, b, size, bytes, stream, stream_id);
            sh->hits++;
            *out = b->ptr;
        }
        pthread_mutex_unlock(&sh->lock);
        if (b) return NN_OK;
        if (alloc_from_cache(pool, f, size, bytes, stream, stream_id, 0, out, ectx)) return NN_OK;
    }
    return alloc_bypass(pool, size, bytes, stream, stream_id, out, fn, ectx);
}

static nn_status bad_pointer(struct nn_ctx *ectx, const char *fn, const void *p, const char *why)
{
    return NN__FAIL(ectx, NN_E_BAD_POINTER, "%s: %p %s; nothing was changed", fn, p, why);
}

/* Free b, found in sh (locked). */
static nn_status free_in(struct nn__mem_pool *pool, struct shard *sh, struct blk *b, void *stream,
                         uint64_t sid, const char *fn, struct nn_ctx *ectx)
{
    if (b->state != B_LIVE) return bad_pointer(ectx, fn, b->ptr, "was already freed");
    if (!b->seg) {
        count_free(pool, sh, b, sid);
        map_del(&sh->map, (uintptr_t)b->ptr);
        pool->up.ops->raw_free(pool->up.st, b->ptr);
        size_t size = b->size;
        blk_recycle(sh, b);
        unreserve(pool, size);
        return NN_OK;
    }
    if (b->stream_id == sid) {
        b->state = B_FREE;
        b->stream = stream;
        bin_push(sh, b);
        note_free_neighbours(sh, b);
    } else {
        void *ev;
        NN__TRY(event_get(pool, sh, &ev, ectx));
        nn_status st = pool->up.ops->event_record(pool->up.st, ev, stream, ectx);
        if (st != NN_OK) {
            event_put(pool, sh, ev);
            return st;
        }
        b->event = ev;
        b->state = B_PENDING;
        list_push(&sh->pending, b);
    }
    count_free(pool, sh, b, sid);
    return NN_OK;
}

/* The shard whose table holds block p (stream_id's shard first, then its hint, then the others),
 * locked, with the block in *b; NULL when no shard has it. */
static struct shard *lock_holder(struct nn__mem_pool *pool, uint64_t stream_id, const void *p,
                                 struct blk **b)
{
    size_t own = stream_id % NSHARD;
    size_t hint = (size_t)atomic_load_explicit(&pool->shards[own].hint, memory_order_relaxed);
    for (size_t i = 0; i <= NSHARD; i++) {
        size_t k = i == 0 ? own : i == 1 ? hint : (own + i - 1) % NSHARD;
        if (i > 1 && (k == hint || k == own)) continue;
        if (i == 1 && k == own) continue;
        struct shard *sh = &pool->shards[k];
        pthread_mutex_lock(&sh->lock);
        if ((*b = map_get(&sh->map, (uintptr_t)p))) return sh;
        pthread_mutex_unlock(&sh->lock);
    }
    return NULL;
}

nn_status nn__mem_pool_free(struct nn__mem_pool *pool, void *stream, uint64_t stream_id, void *p,
                            const char *fn, struct nn_ctx *ectx)
{
    if (!p) return NN_OK;
    struct blk *b;
    struct shard *sh = lock_holder(pool, stream_id, p, &b);
    if (!sh)
        return bad_pointer(ectx, fn, p,
                           "was not allocated by nnprim's memory pool or was already freed");
    nn_status st = free_in(pool, sh, b, stream, stream_id, fn, ectx);
    pthread_mutex_unlock(&sh->lock);
    return st;
}

size_t nn__mem_pool_block_size(struct nn__mem_pool *pool, uint64_t stream_id, const void *p)
{
    struct blk *b;
    struct shard *sh = lock_holder(pool, stream_id, p, &b);
    if (!sh) return 0;
    size_t size = b->state == B_LIVE ? b->size : 0;
    pthread_mutex_unlock(&sh->lock);
    return size;
}

int nn__mem_pool_grow(struct nn__mem_pool *pool, uint64_t stream_id, void *p, size_t add,
                      size_t *size)
{
    add = nn__mem_round(add);
    struct blk *b;
    struct shard *sh = add ? lock_holder(pool, stream_id, p, &b) : NULL;
    if (!sh) return 0;
    struct blk *n = b->next;
    int ok = b->state == B_LIVE && b->seg && b->stream_id == stream_id && n && n->state == B_FREE &&
             eligible(n, stream_id);
    /* Free neighbours not merged yet (merging is lazy) count as one. */
    while (ok && mergeable(n, n->next) && n->size < add)
        merge_next(sh, n);
    if (!ok || n->size < add) {
        pthread_mutex_unlock(&sh->lock);
        return 0;
    }
    bin_remove(sh, n);
    if (n->event) {
        event_put(pool, sh, n->event);
        n->event = NULL;
    }
    if (n->size - add >= split_min(b->seg->family)) {
        map_del(&sh->map, (uintptr_t)n->ptr); /* the same entry again, at its new start */
        n->ptr += add;
        n->size -= add;
        map_put(&sh->map, (uintptr_t)n->ptr, n);
        bin_push(sh, n);
    } else {
        add = n->size;
        b->next = n->next;
        if (n->next) n->next->prev = b;
        map_del(&sh->map, (uintptr_t)n->ptr);
        blk_recycle(sh, n);
    }
    /* Counted and logged as the old block's free and the longer block's allocation, so that a
     * replay of the log (nnprim bench mem) sees every block's bytes as they were. */
    log_event(pool, NN_MEM_EVENT_FREE, stream_id, b->ptr, b->requested);
    b->size += add;
    b->requested += add;
    count_more(pool, sh, add, add);
    log_event(pool, NN_MEM_EVENT_ALLOC, stream_id, b->ptr, b->requested);
    b->seg->last_use = sh->alloc_total;
    *size = b->size;
    pthread_mutex_unlock(&sh->lock);
    return 1;
}

int nn__mem_pool_owns(struct nn__mem_pool *pool, const void *p)
{
    for (size_t k = 0; k < NSHARD; k++) {
        struct shard *sh = &pool->shards[k];
        pthread_mutex_lock(&sh->lock);
        struct blk *b = map_get(&sh->map, (uintptr_t)p);
        int live = b && b->state == B_LIVE;
        pthread_mutex_unlock(&sh->lock);
        if (live) return 1;
    }
    return 0;
}

/* ---- streams ----
 * A stream's entry counts its users (contexts, handles, the plan builder's worker). When the last
 * one goes the stream is retired: its handle is never used again (the user may destroy the
 * stream), and the free blocks it cached become usable by every stream once its work is known to
 * be complete: at once after unref (the caller synchronised the stream), or when the event that
 * leave recorded on it has completed. */

static struct stream_ref *stream_find(struct nn__mem_pool *pool, uint64_t id)
{
    for (size_t i = 0; i < pool->n_streams; i++)
        if (pool->streams[i].id == id) return &pool->streams[i];
    return NULL;
}

/* Pool lock held. */
static void stream_event_put(struct nn__mem_pool *pool, void *ev)
{
    if (pool->n_spare < SPARE_EVENTS)
        pool->spare[pool->n_spare++] = ev;
    else
        pool->up.ops->event_destroy(pool->up.st, ev);
}

/* 1 when the owner of a cached block was retired: its handle must not be used. */
static int stream_retired(struct nn__mem_pool *pool, uint64_t id)
{
    if (!atomic_load_explicit(&pool->n_retired, memory_order_relaxed)) return 0;
    pthread_mutex_lock(&pool->lock);
    struct stream_ref *r = stream_find(pool, id);
    int gone = r && r->refs == 0;
    pthread_mutex_unlock(&pool->lock);
    return gone;
}

static int stream_done(struct nn__mem_pool *pool, uint64_t id)
{
    pthread_mutex_lock(&pool->lock);
    struct stream_ref *r = stream_find(pool, id);
    int done = r && r->refs == 0 && r->state == S_DONE;
    pthread_mutex_unlock(&pool->lock);
    return done;
}

/* Every free block cached by the retired stream id becomes usable by all, then its entry goes.
 * Each shard is checked under its lock: should a user come back to the stream meanwhile, the
 * blocks it frees from then on are ordered on the stream again, and are left alone. */
static void share_stream(struct nn__mem_pool *pool, uint64_t id)
{
    for (int i = 0; i < NSHARD; i++) {
        struct shard *sh = &pool->shards[i];
        if (!atomic_load_explicit(&sh->nsegs, memory_order_relaxed)) continue;
        pthread_mutex_lock(&sh->lock);
        if (!stream_done(pool, id)) {
            pthread_mutex_unlock(&sh->lock);
            return;
        }
        for (struct seg *s = sh->segs; s; s = s->next)
            for (struct blk *b = s->first; b; b = b->next) {
                if (b->state != B_FREE || b->any_stream || b->stream_id != id) continue;
                if (b->event) event_put(pool, sh, b->event);
                b->event = NULL;
                b->any_stream = 1;
                b->stream = NULL;
                note_free_neighbours(sh, b);
            }
        pthread_mutex_unlock(&sh->lock);
    }
    pthread_mutex_lock(&pool->lock);
    struct stream_ref *r = stream_find(pool, id);
    if (r && r->refs == 0 && r->state == S_DONE) {
        *r = pool->streams[--pool->n_streams];
        atomic_fetch_sub(&pool->n_retired, 1);
    }
    pthread_mutex_unlock(&pool->lock);
}

/* Retired streams whose work has completed share what they cached (a few per call). */
static void settle_streams(struct nn__mem_pool *pool)
{
    if (!atomic_load_explicit(&pool->n_retired, memory_order_relaxed)) return;
    uint64_t done[8];
    int n = 0;
    pthread_mutex_lock(&pool->lock);
    for (size_t i = 0; i < pool->n_streams && n < 8; i++) {
        struct stream_ref *r = &pool->streams[i];
        if (r->refs) continue;
        if (r->state == S_RETIRING && pool->up.ops->event_query(pool->up.st, r->event) == 1) {
            stream_event_put(pool, r->event);
            r->event = NULL;
            r->state = S_DONE;
        }
        if (r->state == S_DONE) done[n++] = r->id;
    }
    pthread_mutex_unlock(&pool->lock);
    for (int k = 0; k < n; k++)
        share_stream(pool, done[k]);
}

nn_status nn__mem_pool_stream_ref(struct nn__mem_pool *pool, void *stream, uint64_t stream_id,
                                  const char *fn, struct nn_ctx *ectx)
{
    (void)stream;
    nn_status st = NN_OK;
    pthread_mutex_lock(&pool->lock);
    struct stream_ref *r = stream_find(pool, stream_id);
    if (r) {
        if (r->refs == 0) {
            /* Back before its blocks were shared: they are again reused in stream order. */
            if (r->event) stream_event_put(pool, r->event);
            r->event = NULL;
            r->state = S_ACTIVE;
            atomic_fetch_sub(&pool->n_retired, 1);
        }
        r->refs++;
    } else {
        if (pool->n_streams == pool->cap_streams) {
            size_t cap = pool->cap_streams ? pool->cap_streams * 2 : 8;
            struct stream_ref *n = meta_calloc(cap, sizeof *n);
            if (n) {
                if (pool->n_streams) memcpy(n, pool->streams, pool->n_streams * sizeof *n);
                meta_free(pool->streams);
                pool->streams = n;
                pool->cap_streams = cap;
            }
        }
        if (pool->n_streams < pool->cap_streams)
            pool->streams[pool->n_streams++] = (struct stream_ref){stream_id, 1, S_ACTIVE, NULL};
        else
            st = NN__FAIL(ectx, NN_E_OOM_HOST, "%s: out of host memory for the stream table", fn);
    }
    pthread_mutex_unlock(&pool->lock);
    return st;
}

void nn__mem_pool_stream_unref(struct nn__mem_pool *pool, uint64_t stream_id)
{
    pthread_mutex_lock(&pool->lock);
    struct stream_ref *r = stream_find(pool, stream_id);
    int last = r && r->refs > 0 && --r->refs == 0;
    if (last) {
        r->state = S_DONE; /* the caller synchronised the stream */
        atomic_fetch_add(&pool->n_retired, 1);
    }
    pthread_mutex_unlock(&pool->lock);
    if (last) share_stream(pool, stream_id);
}

void nn__mem_pool_stream_leave(struct nn__mem_pool *pool, void *stream, uint64_t stream_id)
{
    pthread_mutex_lock(&pool->lock);
    struct stream_ref *r = stream_find(pool, stream_id);
    if (r && r->refs > 0 && --r->refs == 0) {
        /* The last use of the stream's handle: an event now covers every use of what it cached. */
        void *ev = pool->n_spare ? pool->spare[--pool->n_spare] : NULL;
        if (!ev && pool->up.ops->event_create(pool->up.st, &ev, NULL) != NN_OK) ev = NULL;
        if (ev && pool->up.ops->event_record(pool->up.st, ev, stream, NULL) != NN_OK) {
            stream_event_put(pool, ev);
            ev = NULL;
        }
        /* Without an event the blocks stay the stream's until it comes back, or until a trim
         * finds the device idle. */
        r->state = ev ? S_RETIRING : S_KEPT;
        r->event = ev;
        atomic_fetch_add(&pool->n_retired, 1);
    }
    pthread_mutex_unlock(&pool->lock);
}

/* ---- creation, settings, statistics ---- */

nn_status nn__mem_pool_create(struct nn__upstream up, const nn_mem_settings *s, const char *fn,
                              struct nn__mem_pool **out)
{
    *out = NULL;
    struct nn__mem_pool *pool = meta_calloc(1, sizeof *pool);
    if (!pool) {
        up.ops->destroy(up.st);
        return NN__FAIL(NULL, NN_E_OOM_HOST, "%s: out of host memory for a pool", fn);
    }
    pool->up = up;
    pthread_mutex_init(&pool->lock, NULL);
    pthread_mutex_init(&pool->log_lock, NULL);
    for (int i = 0; i < NSHARD; i++)
        pthread_mutex_init(&pool->shards[i].lock, NULL);
    pool->limit = s->limit;
    pool->growth_slack = s->growth_slack;
    pool->upstream_kind = s->upstream;
    atomic_store(&pool->bypass, s->bypass != 0);
    atomic_store(&pool->log_on, s->log_events != 0);
    *out = pool;
    return NN_OK;
}

void nn__mem_pool_destroy(struct nn__mem_pool *pool)
{
    if (!pool) return;
    for (int i = 0; i < NSHARD; i++) {
        struct shard *sh = &pool->shards[i];
        for (size_t k = 0; k < sh->map.cap; k++) {
            struct blk *b = sh->map.vals[k];
            if (!b) continue;
            if (b->event) pool->up.ops->event_destroy(pool->up.st, b->event);
            if (!b->seg) pool->up.ops->raw_free(pool->up.st, b->ptr);
            meta_free(b);
        }
        struct seg *s = sh->segs, *next;
        for (; s; s = next) {
            next = s->next;
            pool->up.ops->seg_free(pool->up.st, s->base);
            meta_free(s);
        }
        struct blk *b = sh->spare, *bn;
        for (; b; b = bn) {
            bn = b->lnext;
            meta_free(b);
        }
        for (int e = 0; e < sh->n_events; e++)
            pool->up.ops->event_destroy(pool->up.st, sh->events[e]);
        meta_free(sh->map.keys);
        meta_free(sh->map.vals);
        pthread_mutex_destroy(&sh->lock);
    }
    for (size_t i = 0; i < pool->n_streams; i++)
        if (pool->streams[i].event)
            pool->up.ops->event_destroy(pool->up.st, pool->streams[i].event);
    for (int e = 0; e < pool->n_spare; e++)
        pool->up.ops->event_destroy(pool->up.st, pool->spare[e]);
    pool->up.ops->destroy(pool->up.st);
    meta_free(pool->streams);
    nn__host_free(pool->log);
    pthread_mutex_destroy(&pool->lock);
    pthread_mutex_destroy(&pool->log_lock);
    meta_free(pool);
}

int nn__mem_pool_bypass(const struct nn__mem_pool *pool)
{
    return atomic_load((atomic_int *)&pool->bypass);
}

nn_status nn__mem_pool_configure(struct nn__mem_pool *pool, const nn_mem_settings *s,
                                 struct nn_ctx *ectx)
{
    nn_status st = NN_OK;
    pthread_mutex_lock(&pool->lock);
    int changes =
        (s->bypass != 0) != nn__mem_pool_bypass(pool) || s->upstream != pool->upstream_kind;
    if (changes && pool->reserved != 0)
        st = NN__FAIL(ectx, NN_E_INVALID_ARG,
                      "nn_mem_configure: the upstream and bypass can change only while the pool "
                      "holds no memory (%zu bytes reserved; free everything and call "
                      "nn_mem_trim() first)",
                      pool->reserved);
    else if (changes)
        st = pool->up.ops->configure(pool->up.st, s, ectx);
    if (st == NN_OK) {
        atomic_store(&pool->bypass, s->bypass != 0);
        pool->upstream_kind = s->upstream;
        pool->limit = s->limit;
        note_limit(pool);
        pool->growth_slack = s->growth_slack;
    }
    pthread_mutex_unlock(&pool->lock);
    if (st == NN_OK) nn__mem_pool_log_enable(pool, s->log_events);
    return st;
}

void nn__mem_pool_set_limit(struct nn__mem_pool *pool, size_t limit)
{
    pthread_mutex_lock(&pool->lock);
    pool->limit = limit;
    note_limit(pool);
    pthread_mutex_unlock(&pool->lock);
}

static void allocated_now(struct nn__mem_pool *pool, size_t *bytes, size_t *req)
{
    *bytes = *req = 0;
    for (int i = 0; i < NSHARD; i++) {
        struct shard *sh = &pool->shards[i];
        pthread_mutex_lock(&sh->lock);
        *bytes += sh->alloc_bytes;
        *req += sh->req_bytes;
        pthread_mutex_unlock(&sh->lock);
    }
}

/* Largest run of adjacent free blocks (merged or not), and the free bytes. */
static void free_runs(struct shard *sh, size_t *largest, size_t *total)
{
    for (struct seg *s = sh->segs; s; s = s->next) {
        size_t run = 0;
        for (struct blk *b = s->first; b; b = b->next) {
            if (b->state == B_FREE) {
                run += b->size;
                *total += b->size;
                if (run > *largest) *largest = run;
            } else {
                run = 0;
            }
        }
    }
}

void nn__mem_pool_get_stats(struct nn__mem_pool *pool, nn_mem_stats *out)
{
    memset(out, 0, sizeof *out);
    size_t shard_peak = 0, free_total = 0;
    for (int i = 0; i < NSHARD; i++) {
        struct shard *sh = &pool->shards[i];
        pthread_mutex_lock(&sh->lock);
        out->allocated_bytes += sh->alloc_bytes;
        out->requested_bytes += sh->req_bytes;
        out->allocated_bytes_total += sh->alloc_total_bytes;
        out->alloc_count += sh->alloc_count;
        out->alloc_count_total += sh->alloc_total;
        out->free_count_total += sh->free_total;
        out->cache_hits += sh->hits;
        out->cache_misses += sh->misses;
        if (sh->alloc_peak > shard_peak) shard_peak = sh->alloc_peak;
        free_runs(sh, &out->largest_free_bytes, &free_total);
        publish_rest(pool, sh);
        pthread_mutex_unlock(&sh->lock);
    }
    raise_peak(pool, atomic_load(&pool->published));
    size_t peak = (size_t)atomic_load(&pool->published_peak);
    if (shard_peak > peak) peak = shard_peak;
    if (out->allocated_bytes > peak) peak = out->allocated_bytes;
    out->allocated_bytes_peak = peak;
    pthread_mutex_lock(&pool->lock);
    out->reserved_bytes = pool->reserved;
    out->reserved_bytes_peak = pool->reserved_peak;
    out->reserved_bytes_total = pool->reserved_total;
    out->segment_count = pool->segs;
    out->segment_count_peak = pool->segs_peak;
    out->segment_alloc_total = pool->seg_allocs;
    out->segment_free_total = pool->seg_frees;
    out->oom_retries = pool->oom_retries;
    out->oom_failures = pool->oom_failures;
    out->limit = pool->limit;
    pthread_mutex_unlock(&pool->lock);
    /* Segments (free or pending) minus what is handed out; bypass memory is never cached. */
    out->cached_bytes =
        out->reserved_bytes > out->allocated_bytes ? out->reserved_bytes - out->allocated_bytes : 0;
    out->fragmentation =
        free_total ? 1.0 - (double)out->largest_free_bytes / (double)free_total : 0.0;
}

void nn__mem_pool_reset_peak(struct nn__mem_pool *pool)
{
    for (int i = 0; i < NSHARD; i++) {
        struct shard *sh = &pool->shards[i];
        pthread_mutex_lock(&sh->lock);
        sh->alloc_peak = sh->alloc_bytes;
        publish_rest(pool, sh);
        pthread_mutex_unlock(&sh->lock);
    }
    atomic_store(&pool->published_peak, atomic_load(&pool->published));
    pthread_mutex_lock(&pool->lock);
    pool->reserved_peak = pool->reserved;
    pool->segs_peak = pool->segs;
    pthread_mutex_unlock(&pool->lock);
}

void nn__mem_pool_log_enable(struct nn__mem_pool *pool, int on)
{
    pthread_mutex_lock(&pool->log_lock);
    if (on && !atomic_load(&pool->log_on)) pool->log_n = 0;
    atomic_store(&pool->log_on, on != 0);
    pthread_mutex_unlock(&pool->log_lock);
}

size_t nn__mem_pool_log_read(struct nn__mem_pool *pool, nn_mem_event *out, size_t cap)
{
    pthread_mutex_lock(&pool->log_lock);
    size_t n = pool->log_n < cap ? pool->log_n : cap;
    if (n) {
        memcpy(out, pool->log, n * sizeof *out);
        memmove(pool->log, pool->log + n, (pool->log_n - n) * sizeof *out);
        pool->log_n -= n;
    }
    pthread_mutex_unlock(&pool->log_lock);
    return n;
}

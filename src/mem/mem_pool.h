/* The caching pool's core, generic over an upstream that provides segments and events.
 * Two upstreams exist: CUDA (upstream_cuda.c) and host memory (upstream_host.c), so that every
 * line of bookkeeping runs and is tested on machines without a GPU. */
#ifndef NN_MEM_MEM_POOL_H
#define NN_MEM_MEM_POOL_H

#include <stddef.h>
#include <stdint.h>

#include "nn_config.h"

#include "nnprim/mem.h"
#include "nnprim/status.h"

struct nn_ctx;

/* What the pool needs from below. Every call may record an error on ectx (may be NULL).
 * Streams and events are opaque handles. */
struct nn__upstream_ops {
    /* A segment for use on stream. Out of memory must give NN_E_OOM_DEVICE. */
    nn_status (*seg_alloc)(void *st, size_t bytes, void *stream, void **out, struct nn_ctx *ectx);
    void (*seg_free)(void *st, void *p);
    /* Before a batch of seg_free: wait until no queued work still uses pool memory. Returns 1
     * when every stream is then idle, 0 when it cannot tell (the pool then asks each stream
     * through an event). */
    int (*quiesce)(void *st);
    /* Direct allocation for the bypass mode (cudaMalloc / cudaFree). */
    nn_status (*raw_alloc)(void *st, size_t bytes, void **out, struct nn_ctx *ectx);
    void (*raw_free)(void *st, void *p);
    nn_status (*event_create)(void *st, void **ev, struct nn_ctx *ectx);
    void (*event_destroy)(void *st, void *ev);
    nn_status (*event_record)(void *st, void *ev, void *stream, struct nn_ctx *ectx);
    /* 1 completed, 0 still pending. An error counts as pending (and is recorded). */
    int (*event_query)(void *st, void *ev);
    /* Apply the upstream choice of the settings (only called while the pool holds no memory). */
    nn_status (*configure)(void *st, const nn_mem_settings *s, struct nn_ctx *ectx);
    void (*destroy)(void *st);
};

struct nn__upstream {
    const struct nn__upstream_ops *ops;
    void *st;
    const char *name;
};

struct nn__mem_pool;

/* Size classes: four per doubling from 512 bytes. Class c covers [nn__class_lo(c),
 * nn__class_lo(c + 1)). Requests are rounded up to NN__MEM_ALIGN. */
#define NN__MEM_ALIGN   512u
#define NN__MEM_CLASSES 220

static inline int nn__class_of(size_t size)
{
    if (size < 1024) return size < 640 ? 0 : size < 768 ? 1 : size < 896 ? 2 : 3;
    int e = 63 - __builtin_clzll((unsigned long long)size);
    return (e - 9) * 4 + (int)((size >> (e - 2)) & 3);
}

static inline size_t nn__class_lo(int c)
{
    return (size_t)(4 + (c & 3)) << (c / 4 + 7);
}

/* bytes rounded up to the alignment; 0 when that overflows. */
static inline size_t nn__mem_round(size_t bytes)
{
    if (bytes > SIZE_MAX - (NN__MEM_ALIGN - 1)) return 0;
    size_t r = (bytes + NN__MEM_ALIGN - 1) & ~(size_t)(NN__MEM_ALIGN - 1);
    return r ? r : NN__MEM_ALIGN;
}

/* Create a pool over an upstream; the pool owns the upstream afterwards (also on failure). */
nn_status nn__mem_pool_create(struct nn__upstream up, const nn_mem_settings *s, const char *fn,
                              struct nn__mem_pool **out);
/* Release every segment and structure. Memory still handed out is released too. */
void nn__mem_pool_destroy(struct nn__mem_pool *pool);

/* fn is the public function called, for the messages. An impossible size, a request the limit
 * or the upstream refuses, and any request while reserved memory stays above a lowered limit
 * give NN_E_OOM_DEVICE with requested, in use, reserved, limit and the reason. */
nn_status nn__mem_pool_alloc(struct nn__mem_pool *pool, void *stream, uint64_t stream_id,
                             size_t bytes, void **out, const char *fn, struct nn_ctx *ectx);
/* For a CUDA graph capture on stream (mem/graph_mem.c): what nn__mem_pool_alloc() does without
 * anything a capture forbids or would record. The pool's cache first, where the block is cut from
 * the largest free block of the stream's shard (of either family) rather than the best fit, so
 * that nn__mem_pool_grow() finds room after it; on a miss a block of its
 * own from the upstream's synchronous allocation (cudaMalloc, as in bypass mode, which a relaxed
 * capture allows), released to the upstream when freed; no growth into segments (a stream-ordered
 * upstream would record cudaMallocAsync in the graph) and no out-of-memory ladder (it waits for
 * the device). Statuses as nn__mem_pool_alloc(). */
nn_status nn__mem_pool_alloc_capturing(struct nn__mem_pool *pool, void *stream, uint64_t stream_id,
                                       size_t bytes, void **out, const char *fn,
                                       struct nn_ctx *ectx);
nn_status nn__mem_pool_free(struct nn__mem_pool *pool, void *stream, uint64_t stream_id, void *p,
                            const char *fn, struct nn_ctx *ectx);
/* The bytes of the live block p (its rounded request, or more: a remainder too small to keep
 * apart goes out with it); 0 when p is no live block of the pool. */
size_t nn__mem_pool_block_size(struct nn__mem_pool *pool, uint64_t stream_id, const void *p);
/* For a graph's memory (mem/graph_mem.c), which cannot move a block a capture has recorded: make
 * the live block p, handed out on stream_id, at least add bytes (rounded up) longer in place,
 * from the free memory that follows it in its segment and that stream_id may use; its new size
 * in *size. 0, and nothing changed, where there is none (p a bypass block or not the pool's, the
 * next block live, pending or too short). Allocates nothing and never waits: safe in a capture.
 * The added bytes count as allocated; the log shows p's free and its longer allocation. */
int nn__mem_pool_grow(struct nn__mem_pool *pool, uint64_t stream_id, void *p, size_t add,
                      size_t *size);
/* 1 when p is a block the pool handed out and that is not freed yet. */
int nn__mem_pool_owns(struct nn__mem_pool *pool, const void *p);

/* A stream that allocates from the pool: counted, so that when its last user goes its cached
 * blocks become usable by every stream and its handle is never used again (its owner may destroy
 * it). ref of a stream whose users went, before its blocks were shared, takes them back in
 * stream order. Fails only with NN_E_OOM_HOST. */
nn_status nn__mem_pool_stream_ref(struct nn__mem_pool *pool, void *stream, uint64_t stream_id,
                                  const char *fn, struct nn_ctx *ectx);
/* A user goes after synchronising the stream: the last one shares its blocks at once. */
void nn__mem_pool_stream_unref(struct nn__mem_pool *pool, uint64_t stream_id);
/* A user goes without synchronising (a context that switches streams): the last one records an
 * event on the stream, and its blocks are shared once that has completed, found by a later
 * allocation's slow path or a trim (the host never waits). Should no event be recordable, the
 * blocks stay the stream's until it comes back or a trim finds the device idle. */
void nn__mem_pool_stream_leave(struct nn__mem_pool *pool, void *stream, uint64_t stream_id);

nn_status nn__mem_pool_configure(struct nn__mem_pool *pool, const nn_mem_settings *s,
                                 struct nn_ctx *ectx);
void nn__mem_pool_set_limit(struct nn__mem_pool *pool, size_t limit);
void nn__mem_pool_get_stats(struct nn__mem_pool *pool, nn_mem_stats *out);
void nn__mem_pool_reset_peak(struct nn__mem_pool *pool);
size_t nn__mem_pool_trim(struct nn__mem_pool *pool);
void nn__mem_pool_log_enable(struct nn__mem_pool *pool, int on);
size_t nn__mem_pool_log_read(struct nn__mem_pool *pool, nn_mem_event *out, size_t cap);
int nn__mem_pool_bypass(const struct nn__mem_pool *pool);

/* Structures (blocks, segments, table slots) the pools hold from nn__host_alloc, over all
 * pools of the process: a test's leak check. */
long nn__mem_pool_meta_live(void);

/* Upstream constructors. */
nn_status nn__upstream_host(struct nn__upstream *out);
#if NN_HAVE_CUDA
nn_status nn__upstream_cuda(int device, const nn_mem_settings *s, const char *fn,
                            struct nn__upstream *out, struct nn_ctx *ectx);
#endif

/* Host upstream streams: simulated streams whose work completes only when told. */
struct nn__hstream;
nn_status nn__hstream_create(struct nn__hstream **out);
void nn__hstream_destroy(struct nn__hstream *s);
uint64_t nn__hstream_id(const struct nn__hstream *s);
void nn__hstream_busy(struct nn__hstream *s); /* queue work that stays pending */
void nn__hstream_sync(struct nn__hstream *s); /* complete everything queued */

/* The simulated stream of a host pool's handle (NULL for a CUDA handle). */
struct nn__hstream *nn__mem_stream_host(nn_mem_stream *s);

#endif

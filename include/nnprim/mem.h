/*
 * nnprim: the device memory pool.
 *
 * Every device allocation of nnprim (nn_tensor_empty(), cuDNN workspaces, the buffers a pullback
 * keeps from forward to backward) comes from one caching pool per device, shared by all contexts
 * of that device and safe to use from many threads, unless a framework gave the device its own
 * allocator (nn_mem_set_allocator(), below). The pool keeps freed memory and hands it out
 * again without calling the driver:
 *
 *   - Reuse on the stream that freed a block is immediate (stream order makes it safe). Another
 *     stream gets the block only after an event recorded on the owning stream has completed; the
 *     pool never synchronises the host to reuse memory. Streams are told apart by
 *     cudaStreamGetId(), not by handle.
 *   - A byte limit caps the memory the pool reserves from the driver. When a request does not
 *     fit, the pool releases its cached unused segments and retries once; then it fails with
 *     NN_E_OOM_DEVICE and a message giving requested, in use, reserved and limit, and why: the
 *     room the limit leaves, the segment the driver refused, or a size above 2^48 bytes, which
 *     no device has (so no size computation can overflow). Under a limit smaller than the
 *     pool's usual segments (2 MiB for requests up to 1 MiB, 20 MiB up to 10 MiB) a request
 *     gets a segment of what fits under the limit. The host pool (NN_MEM_HOST) runs the same
 *     code and also answers NN_E_OOM_DEVICE.
 *   - Releasing segments (nn_mem_trim(), the out-of-memory retry) synchronises the device, as
 *     cudaFree() does.
 *
 * Environment (read by nn_mem_settings_from_env(), which is applied when a device's pool is first
 * used unless nn_mem_configure() came first). While a variable is malformed, a pool that does not
 * exist yet is not created: every call that would create it (each nn_mem_* function taking a
 * device, nn_mem_stream_open(), nn_ctx_create() with the cuDNN backend) fails with NN_E_ENV
 * naming the variable and its value, so a limit asked for is never silently dropped. Numbers
 * are decimal digits only: no blanks, no sign.
 *
 *   NNPRIM_MEM_BYPASS     0 | 1: 1 sends every allocation straight to cudaMalloc/cudaFree, so
 *                         compute-sanitizer's memcheck sees each one (slow; for debugging)
 *   NNPRIM_MEM_LIMIT      bytes, with an optional K, M or G suffix (powers of 1024); 0 = no limit
 *   NNPRIM_MEM_UPSTREAM   malloc | async: where segments come from (cudaMalloc, or
 *                         cudaMallocAsync from the device's default pool with its release
 *                         threshold raised so the driver keeps what it gets back)
 *   NNPRIM_MEM_GROWTH_SLACK  0 or a number >= 1.0 (see nn_mem_settings.growth_slack)
 *
 * Functions that take a device accept a CUDA ordinal or NN_MEM_HOST, a pool over host memory that
 * runs the same code with simulated streams (for tests and benchmarks without a GPU). Any other
 * negative value is NN_E_INVALID_ARG. Messages start with the public function called.
 */
#ifndef NNPRIM_MEM_H
#define NNPRIM_MEM_H

#include <stddef.h>
#include <stdint.h>

#include "context.h"
#include "status.h"

#ifdef __cplusplus
extern "C" {
#endif

/** The device argument that selects the host-memory pool. */
#define NN_MEM_HOST (-1)

/** Where the pool's segments come from. */
typedef enum nn_mem_upstream {
    NN_MEM_UPSTREAM_MALLOC = 0,      /**< cudaMalloc / cudaFree (the default) */
    NN_MEM_UPSTREAM_MALLOC_ASYNC = 1 /**< cudaMallocAsync, release threshold raised to the max */
} nn_mem_upstream;

/** Pool settings; fill with nn_mem_settings_defaults() or nn_mem_settings_from_env(). */
typedef struct nn_mem_settings {
    nn_mem_upstream upstream;
    size_t limit;   /**< most bytes the pool may reserve; 0 = no limit */
    int bypass;     /**< nonzero: no caching, every call goes to cudaMalloc/cudaFree */
    int log_events; /**< nonzero: keep the event log (see nn_mem_log_read()) from the start */
    /** Before taking a new segment, when reserved memory would pass growth_slack times the peak
     *  in use (plus 8 MiB), entirely free segments are released first, least recently used
     *  first (this synchronises the device). 0 = never (reserved memory only grows until trim
     *  or the limit); otherwise >= 1.0. A workload whose rounds need more than this margin
     *  releases and re-takes segments every round: raise it or set 0 when segment churn shows
     *  (nn_mem_stats.segment_alloc_total keeps rising). */
    double growth_slack;
    uint64_t reserved[8]; /**< zero */
} nn_mem_settings;

/** Pool statistics; "allocated" is memory handed out, "reserved" memory taken from the driver. */
typedef struct nn_mem_stats {
    size_t allocated_bytes;      /**< handed out now (block sizes, rounded to 512 bytes) */
    size_t allocated_bytes_peak; /**< since creation or nn_mem_reset_peak_stats() */
    uint64_t allocated_bytes_total;
    size_t requested_bytes;     /**< handed out now, as the callers asked */
    uint64_t alloc_count;       /**< blocks handed out now */
    uint64_t alloc_count_total; /**< successful allocations */
    uint64_t free_count_total;  /**< successful frees */
    size_t reserved_bytes;      /**< held from the driver now */
    size_t reserved_bytes_peak;
    uint64_t reserved_bytes_total;
    uint64_t segment_count; /**< segments held now */
    uint64_t segment_count_peak;
    uint64_t segment_alloc_total;
    uint64_t segment_free_total;
    uint64_t cache_hits;       /**< allocations served from cached memory */
    uint64_t cache_misses;     /**< allocations that needed a new segment */
    uint64_t oom_retries;      /**< times cached segments were released to retry an allocation */
    uint64_t oom_failures;     /**< allocations that failed with NN_E_OOM_DEVICE */
    size_t cached_bytes;       /**< free in the pool (reserved - allocated) */
    size_t largest_free_bytes; /**< largest free run of adjacent free blocks */
    double fragmentation; /**< 1 - largest_free_bytes / cached_bytes; 0 when nothing is cached */
    size_t limit;         /**< the byte limit in force; 0 = none */
    /** Nonzero while an allocator set with nn_mem_set_allocator() serves the device: the
     *  figures above then count only what nnprim's pool still holds (blocks it handed out
     *  before, its cached segments); the user_* figures count the allocator's blocks. */
    uint64_t user_allocator;
    uint64_t user_alloc_count;     /**< blocks from user allocators not yet freed */
    uint64_t user_allocated_bytes; /**< their bytes, as requested */
    uint64_t user_alloc_total;     /**< successful allocations through user allocators */
    uint64_t user_free_total;      /**< blocks given back to user allocators */
    /** Bytes the device's live CUDA graphs and open captures hold as their own memory
     *  (graph.h, "Memory"), from the pool or the user allocator: part of allocated_bytes (or of
     *  user_allocated_bytes), until nn_graph_free(). */
    uint64_t graph_bytes;
    uint64_t reserved[2];
} nn_mem_stats;

/** Kinds of nn_mem_event. */
typedef enum nn_mem_event_kind {
    NN_MEM_EVENT_ALLOC = 1,         /**< a block handed out: ptr, bytes (as requested), stream_id */
    NN_MEM_EVENT_FREE = 2,          /**< a block given back: ptr, bytes (as requested), stream_id */
    NN_MEM_EVENT_SEGMENT_ALLOC = 3, /**< a segment taken from the driver: ptr, bytes */
    NN_MEM_EVENT_SEGMENT_FREE = 4   /**< a segment released to the driver: ptr, bytes */
} nn_mem_event_kind;

/** One entry of the event log, in the order the pool performed them. */
typedef struct nn_mem_event {
    nn_mem_event_kind kind;
    uint64_t time_ns; /**< monotonic clock */
    uint64_t stream_id;
    uintptr_t ptr;
    size_t bytes;
} nn_mem_event;

/**
 * Fill pool settings with the defaults, then apply the NNPRIM_MEM_* environment variables.
 * Defaults: cudaMalloc upstream, no limit, no bypass, no event log, growth_slack 0 (never release
 * while growing).
 *
 * @param s out: always filled completely (a malformed variable leaves its default in s; the
 *          pools themselves are not created with such defaults: see the top of this header).
 * @return NN_OK; NN_E_INVALID_ARG if s is NULL; NN_E_ENV if a variable is malformed (the message
 *         names it, the accepted values and what it held).
 */
NN_API nn_status nn_mem_settings_from_env(nn_mem_settings *s);

/**
 * Fill pool settings with the same defaults as nn_mem_settings_from_env() without reading the
 * environment: for a framework that decides the pool's settings itself. Pass the result to
 * nn_mem_configure() before the device's pool is first used (before the first cuDNN context of
 * the device): a pool created implicitly reads NNPRIM_MEM_* (see the top of this header).
 *
 * @param s out: filled completely.
 * @return NN_OK; NN_E_INVALID_ARG if s is NULL.
 */
NN_API nn_status nn_mem_settings_defaults(nn_mem_settings *s);

/**
 * Set a device's pool settings. The upstream and the bypass switch can change only while the pool
 * holds no memory (before its first allocation, or after everything was freed and trimmed); the
 * limit and the log switch can change at any time. A limit below what is reserved now does not
 * release anything at once: while reserved memory stays above it, every allocation first
 * releases the cached unused segments (synchronising the device, as nn_mem_trim() does) and
 * fails with NN_E_OOM_DEVICE if the pool is still above the limit, even when cached memory could
 * serve it. So allocations fail until enough memory is freed. The environment is not read.
 *
 * @param device a CUDA ordinal or NN_MEM_HOST.
 * @param s      the settings; read, not kept.
 * @return NN_OK; NN_E_INVALID_ARG for a NULL s, a negative device other than NN_MEM_HOST, an
 *         unknown upstream, a growth_slack that is neither 0 nor >= 1.0 (nor a number), a
 *         nonzero reserved field ("s.reserved[3] must be 0, got 7"), or an upstream/bypass
 *         change while the pool holds memory; NN_E_NO_DEVICE for an ordinal without a device;
 *         NN_E_NOT_BUILT for a CUDA ordinal in a build without CUDA; NN_E_UNSUPPORTED
 *         (cudaMallocAsync on a device without memory pools); NN_E_CUDA; NN_E_OOM_HOST.
 */
NN_API nn_status nn_mem_configure(int device, const nn_mem_settings *s);

/**
 * Change a device pool's byte limit (see nn_mem_configure()).
 *
 * @param device a CUDA ordinal or NN_MEM_HOST.
 * @param limit  bytes; 0 = no limit.
 * @return NN_OK; NN_E_INVALID_ARG (a negative device other than NN_MEM_HOST); NN_E_ENV (see the
 *         top of this header); NN_E_NO_DEVICE; NN_E_NOT_BUILT; NN_E_CUDA; NN_E_OOM_HOST.
 */
NN_API nn_status nn_mem_set_limit(int device, size_t limit);

/**
 * Read a device pool's statistics. Allocated-byte figures summed over streams are exact when no
 * allocation is in flight. allocated_bytes_peak is exact while one stream allocates; with several
 * at once it may be off by up to 1 MiB per stream that allocated since the last reading or reset
 * (each of which sums every stream's share, streams that are gone included).
 *
 * @param device a CUDA ordinal or NN_MEM_HOST.
 * @param out    out: the statistics (counters are zero for a pool never used).
 * @return NN_OK; NN_E_INVALID_ARG if out is NULL or the device negative (not NN_MEM_HOST);
 *         NN_E_ENV; NN_E_NO_DEVICE; NN_E_NOT_BUILT; NN_E_CUDA; NN_E_OOM_HOST.
 */
NN_API nn_status nn_mem_get_stats(int device, nn_mem_stats *out);

/**
 * Reset the peak figures (allocated and reserved bytes, segments) to the current values.
 *
 * @param device a CUDA ordinal or NN_MEM_HOST.
 * @return NN_OK; NN_E_INVALID_ARG (a negative device other than NN_MEM_HOST); NN_E_ENV;
 *         NN_E_NO_DEVICE; NN_E_NOT_BUILT; NN_E_CUDA; NN_E_OOM_HOST.
 */
NN_API nn_status nn_mem_reset_peak_stats(int device);

/**
 * Write a multi-line text summary of statistics, always NUL-terminated.
 *
 * @param s   statistics from nn_mem_get_stats().
 * @param buf out: the text; truncated to cap - 1 characters if it does not fit.
 * @param cap size of buf, >= 1.
 * @return NN_OK; NN_E_INVALID_ARG if s or buf is NULL or cap is 0.
 */
NN_API nn_status nn_mem_stats_format(const nn_mem_stats *s, char *buf, size_t cap);

/**
 * Release every cached segment that has no block in use back to the driver. Synchronises the
 * device first (no queued work may still use the memory).
 *
 * @param device   a CUDA ordinal or NN_MEM_HOST.
 * @param released out, may be NULL: the bytes released.
 * @return NN_OK; NN_E_INVALID_ARG (a negative device other than NN_MEM_HOST); NN_E_ENV;
 *         NN_E_NO_DEVICE; NN_E_NOT_BUILT; NN_E_CUDA; NN_E_OOM_HOST.
 */
NN_API nn_status nn_mem_trim(int device, size_t *released);

/**
 * Start or stop the event log of a device's pool. Starting empties the log. Logging costs a lock
 * per allocation and free; the log grows until read.
 *
 * @param device a CUDA ordinal or NN_MEM_HOST.
 * @param on     nonzero to start, 0 to stop (the entries so far stay readable).
 * @return NN_OK; NN_E_INVALID_ARG (a negative device other than NN_MEM_HOST); NN_E_ENV;
 *         NN_E_NO_DEVICE; NN_E_NOT_BUILT; NN_E_CUDA; NN_E_OOM_HOST.
 */
NN_API nn_status nn_mem_log_enable(int device, int on);

/**
 * Take the oldest entries of a device pool's event log (they are removed from the log).
 * If the log could not grow (out of host memory) the entries that did not fit were dropped.
 *
 * @param device a CUDA ordinal or NN_MEM_HOST.
 * @param out    out: up to cap entries.
 * @param cap    room in out.
 * @param count  out: entries written.
 * @return NN_OK; NN_E_INVALID_ARG if out or count is NULL or the device negative (not
 *         NN_MEM_HOST); NN_E_ENV; NN_E_NO_DEVICE; NN_E_NOT_BUILT; NN_E_CUDA; NN_E_OOM_HOST.
 */
NN_API nn_status nn_mem_log_read(int device, nn_mem_event *out, size_t cap, size_t *count);

/**
 * Allocate device memory from the pool of a cuDNN context's device, ordered on its stream: the
 * memory may be used by work queued on the stream from now on.
 *
 * @param ctx   a context with the cuDNN backend.
 * @param bytes > 0.
 * @param out   out: the memory (512-byte aligned), NULL on failure.
 * @return NN_OK; NN_E_INVALID_ARG (NULL ctx or out, bytes 0, a reference-backend context);
 *         NN_E_OOM_DEVICE (message: requested, in use, reserved, limit and why; also for sizes
 *         above 2^48 and while reserved memory stays above a lowered limit; or the user
 *         allocator returned NULL); NN_E_BAD_POINTER (the user allocator returned a pointer not
 *         aligned to 16 bytes: it was given back); NN_E_OOM_HOST; NN_E_CUDA.
 * Ownership: the memory is the pool's (or the user allocator's) until nn_mem_free().
 */
NN_API nn_status nn_mem_alloc(nn_ctx *ctx, size_t bytes, void **out);

/**
 * Give memory from nn_mem_alloc() (or a device tensor's storage) back to the pool, ordered on
 * the context's stream: work queued on that stream before the call may still use it. Freeing
 * with a context whose stream differs from the allocating one makes the block wait for the work
 * queued on the freeing stream before any stream reuses it.
 *
 * @param ctx a context with the cuDNN backend on the same device.
 * @param p   the memory; NULL is a no-op.
 * @return NN_OK; NN_E_INVALID_ARG; NN_E_BAD_POINTER if p was not handed out by the pool or was
 *         already freed (nothing changes then); NN_E_CUDA; NN_E_OOM_HOST.
 */
NN_API nn_status nn_mem_free(nn_ctx *ctx, void *p);

/**
 * Copy bytes between host memory and the context's device memory, in either direction or within
 * either, in the order of the context's stream (for data that is no float tensor, such as class
 * targets). A copy from host memory has read it when the call returns; a copy to host memory waits
 * for the stream, so the bytes are there when it returns. A reference-backend context copies
 * host memory only.
 *
 * @param ctx   a context.
 * @param dst   bytes of writable memory; src bytes of readable memory; the two must not overlap.
 * @param bytes 0 does nothing.
 * @return NN_OK; NN_E_INVALID_ARG (NULL ctx, dst or src with bytes > 0, overlapping ranges);
 *         NN_E_MEMSPACE (device memory given to a reference-backend context, or memory of another
 *         device); NN_E_GRAPH inside a graph capture for a copy to or from host memory (graph.h:
 *         nn_graph_launch_feeds() brings host data in); NN_E_CUDA.
 */
NN_API nn_status nn_mem_copy(nn_ctx *ctx, void *dst, const void *src, size_t bytes);

/**
 * A framework's allocator. While one is set for a device (nn_mem_set_allocator()), every device
 * allocation nnprim makes on that device goes to it instead of nnprim's pool: nn_tensor_empty(),
 * cuDNN workspaces, the buffers pullbacks keep, nn_mem_alloc() and nn_mem_stream_alloc(). Each
 * block goes back to the allocator that made it, even after the allocator was replaced or
 * unset. The callbacks may be called from any thread, concurrently, and must not call nnprim.
 */
typedef struct nn_mem_allocator {
    /** Return bytes (> 0) of memory of device (a CUDA ordinal, or NN_MEM_HOST for the host
     *  pool), aligned to at least 16 bytes (256 recommended, as cudaMalloc does), usable by work
     *  queued on stream from now on; NULL when out of memory (nnprim then fails the call with
     *  NN_E_OOM_DEVICE). stream is the cudaStream_t of the context or handle that asks; for
     *  NN_MEM_HOST an opaque handle that names the simulated stream. */
    void *(*alloc)(void *user, size_t bytes, int device, void *stream);
    /** Take back p (from alloc; bytes as asked then). Work queued on stream (the freeing
     *  context's or handle's, possibly another than the allocating one) before this call may
     *  still use p: reuse it only after that work, as cudaFreeAsync would. */
    void (*free)(void *user, void *p, size_t bytes, int device, void *stream);
    void *user;           /**< passed to both callbacks */
    uint64_t reserved[4]; /**< zero */
} nn_mem_allocator;

/**
 * Set or unset the allocator of a device's allocations (see nn_mem_allocator). nnprim's pool
 * stays the default: a is NULL (or the allocator is never set) means the pool serves the
 * device. Blocks allocated before the change stay valid and return, when freed, to whoever made
 * them. The pool's own settings, limit and bypass switch do not apply to a user allocator's
 * blocks; nn_mem_get_stats() says which one is in use. The environment is not read and the pool
 * is not created by this call.
 *
 * @param device a CUDA ordinal or NN_MEM_HOST.
 * @param a      the allocator, copied (the user pointer is kept as given); NULL = the pool.
 * @return NN_OK; NN_E_INVALID_ARG (a negative device other than NN_MEM_HOST, a NULL callback,
 *         a nonzero reserved field: "a.reserved[2] must be 0, got 7"); NN_E_NO_DEVICE;
 *         NN_E_NOT_BUILT (a CUDA ordinal in a build without CUDA); NN_E_OOM_HOST.
 */
NN_API nn_status nn_mem_set_allocator(int device, const nn_mem_allocator *a);

/** A stream's handle on a pool, for callers without a context (benchmarks, frameworks). */
typedef struct nn_mem_stream nn_mem_stream;

/**
 * Open a stream's handle on a device's pool.
 *
 * @param device a CUDA ordinal, or NN_MEM_HOST for the host pool.
 * @param stream a cudaStream_t of that device (NULL = the legacy default stream); must be NULL
 *               for NN_MEM_HOST, which creates a simulated stream whose work is always complete.
 * @param out    out: the handle; NULL on failure.
 * @return NN_OK; NN_E_INVALID_ARG (NULL out, a stream given with NN_MEM_HOST, a negative device
 *         other than NN_MEM_HOST); NN_E_ENV; NN_E_NO_DEVICE; NN_E_NOT_BUILT; NN_E_CUDA;
 *         NN_E_OOM_HOST.
 * Ownership: the caller closes it with nn_mem_stream_close() before destroying the stream.
 */
NN_API nn_status nn_mem_stream_open(int device, void *stream, nn_mem_stream **out);

/**
 * Close a handle: synchronises its stream, then makes the memory it cached usable by every
 * stream. Memory allocated through the handle and not yet freed stays valid (free it through
 * another handle or context of the device).
 *
 * @param s NULL is a no-op.
 */
NN_API void nn_mem_stream_close(nn_mem_stream *s);

/**
 * Allocate from the handle's pool, ordered on its stream (see nn_mem_alloc()).
 *
 * @param s     the handle.
 * @param bytes > 0.
 * @param out   out: the memory, NULL on failure.
 * @return NN_OK; NN_E_INVALID_ARG (NULL s or out, bytes 0); NN_E_OOM_DEVICE (as
 *         nn_mem_alloc()); NN_E_OOM_HOST; NN_E_CUDA.
 */
NN_API nn_status nn_mem_stream_alloc(nn_mem_stream *s, size_t bytes, void **out);

/**
 * Free through the handle, ordered on its stream (see nn_mem_free()).
 *
 * @param s the handle.
 * @param p the memory; NULL is a no-op.
 * @return NN_OK; NN_E_INVALID_ARG (NULL s); NN_E_BAD_POINTER (not from the pool, or already
 *         freed: nothing changes then); NN_E_CUDA; NN_E_OOM_HOST.
 */
NN_API nn_status nn_mem_stream_free(nn_mem_stream *s, void *p);

#ifdef __cplusplus
}
#endif

#endif /* NNPRIM_MEM_H */

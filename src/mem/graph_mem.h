/* A graph's own device memory (include/nnprim/graph.h, "Memory"): what the calls inside a capture
 * allocate, at addresses that stay the same for every launch of the graph.
 *
 * Chunks come from the device's pool (its cache, else cudaMalloc: nothing that waits for the device
 * or is ordered on the stream being captured, mem_pool.h). A block freed inside the capture is
 * reused by a later allocation of the same capture: every launch runs the captured calls in the
 * order they were issued on one stream, so the later call's work comes after the earlier one's. A
 * block freed after the capture stays the graph's (each launch still uses it) until the graph is
 * freed. A pool block allocated before the capture and freed inside it is adopted: kept until the
 * graph goes, for the same reason. Freeing the graph returns everything to the pool, on the
 * context's stream.
 *
 * A context keeps the memories of its live graphs and of its capture in one list (ctx->graph_mem),
 * so that a free through the context finds the graph a block belongs to. Not thread-safe: a
 * context is used by one thread at a time. */
#ifndef NN_MEM_GRAPH_MEM_H
#define NN_MEM_GRAPH_MEM_H

#include <stddef.h>

#include "nnprim/status.h"

struct nn_ctx;
struct nn__graph_mem;

/* A new, empty memory for the capture that ctx opens, linked into ctx's list; allocations and
 * frees through ctx go to it until nn__graph_mem_seal(). Returns NN_OK; NN_E_OOM_HOST (naming
 * fn). */
nn_status nn__graph_mem_open(struct nn_ctx *ctx, const char *fn, struct nn__graph_mem **out);

/* The capture ended: no block is handed out or reused any more; frees only release. */
void nn__graph_mem_seal(struct nn__graph_mem *m);

/* m's graph is gone (freed, or its capture failed; m sealed or not): the adopted blocks and every
 * chunk that holds no live block go back to the pool on ctx's stream now, each other chunk once
 * its last live block is freed; m unlinks itself when nothing is left. NULL is allowed. The
 * caller has ordered ctx's stream after the graph's last launch. */
void nn__graph_mem_orphan(struct nn_ctx *ctx, struct nn__graph_mem *m);

/* The context goes: every graph memory of ctx returns everything to the pool. */
void nn__graph_mem_close_all(struct nn_ctx *ctx);

/* bytes > 0 from m (open): statuses of nn__dev_alloc_for(); *out NULL on failure. */
nn_status nn__graph_mem_alloc(struct nn_ctx *ctx, struct nn__graph_mem *m, const char *fn,
                              size_t bytes, void **out);

/* A free through ctx that is graph business: p is a block of one of ctx's graph memories, or a
 * capture is open (then any other live block of the device is adopted by it). Returns 1 with *st
 * set (NN_OK, or NN_E_BAD_POINTER for a block freed twice or a pointer that is no live block,
 * message naming fn), or 0 when the pool (or a user allocator) should free p as usual. */
int nn__graph_mem_free(struct nn_ctx *ctx, const char *fn, void *p, nn_status *st);

/* 1 when p is a block of one of ctx's graph memories that has not been freed. */
int nn__graph_mem_owns(const struct nn_ctx *ctx, const void *p);

/* 1 when [p, p + bytes) lies inside m's chunks. */
int nn__graph_mem_contains(const struct nn__graph_mem *m, const void *p, size_t bytes);

/* The bytes of m's chunks (adopted blocks are the caller's allocations, counted as such). */
size_t nn__graph_mem_bytes(const struct nn__graph_mem *m);

/* The most bytes m had handed out at once during the capture: what its chunks would need
 * without fragmentation. */
size_t nn__graph_mem_live_peak(const struct nn__graph_mem *m);

#endif

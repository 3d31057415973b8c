/* Device memory for the whole library: tensors, cuDNN workspaces, pullback buffers.
 * Allocation and release are ordered on the context's stream. */
#ifndef NN_MEM_MEM_H
#define NN_MEM_MEM_H

#include <stddef.h>
#include <stdint.h>

#include "nnprim/status.h"
#include "nnprim/tensor.h"

struct nn_ctx;

/* Attach the device's pool to a new GPU context / detach it at destroy. */
nn_status nn__mem_ctx_init(struct nn_ctx *ctx);
void nn__mem_ctx_fini(struct nn_ctx *ctx);

/* A context moves to another stream (nn_ctx_set_stream): enter takes a reference on the new
 * stream (NN_OK; NN_E_OOM_HOST, the message naming fn), leave gives up the one on the stream it
 * leaves without synchronising it (the pool orders its blocks' reuse after an event recorded
 * now, and never uses the handle again). */
nn_status nn__mem_ctx_enter(struct nn_ctx *ctx, void *stream, uint64_t stream_id, const char *fn);
void nn__mem_ctx_leave(struct nn_ctx *ctx, void *stream, uint64_t stream_id);

/* A context that shares another's pool (ctx->mem_pool set, not owned) on a stream of its own: the
 * background plan builder's. ref registers the stream with the pool; unref, once the stream's
 * work has completed, lets every stream reuse what it cached. */
nn_status nn__mem_stream_ref(struct nn_ctx *ctx);
void nn__mem_stream_unref(struct nn_ctx *ctx);

/* bytes > 0. On failure *out is NULL and the status is NN_E_OOM_DEVICE (message with requested,
 * in use, reserved, limit and why), NN_E_OOM_HOST or NN_E_CUDA. fn, the public function the
 * user called ("nn_conv_forward"), starts the message. While a graph capture is open on ctx the
 * block is graph memory (graph_mem.h): an object that outlives the call (a cache entry's
 * buffers, a kept workspace) is never allocated inside a capture. */
nn_status nn__dev_alloc_for(struct nn_ctx *ctx, const char *fn, size_t bytes, void **out);

/* NULL is a no-op. A pointer the pool did not hand out, or one already freed, gives
 * NN_E_BAD_POINTER and changes nothing. Graph memory and a free inside a capture go to
 * nn__graph_mem_free(). */
nn_status nn__dev_free_for(struct nn_ctx *ctx, const char *fn, void *p);

/* For graph memory (graph_mem.c). A block for a capture open on ctx: from the user allocator
 * if one is set (called while the stream is being captured), else nn__mem_pool_alloc_capturing();
 * *size is what the block holds, bytes or more (a pool block may carry a small remainder).
 * A block's free straight to the pool or user allocator, past the graph memories. The bytes that
 * graph memory holds on ctx's device grow by delta (nn_mem_stats.graph_bytes). */
nn_status nn__dev_alloc_capturing(struct nn_ctx *ctx, const char *fn, size_t bytes, void **out,
                                  size_t *size);
nn_status nn__dev_free_block(struct nn_ctx *ctx, const char *fn, void *p);
/* A block of nn__dev_alloc_capturing() made at least add bytes longer in place: 1 with its new
 * size in *size, 0 (nothing changed) when the pool cannot (nn__mem_pool_grow()) or the block is
 * the user allocator's. */
int nn__dev_grow_block(struct nn_ctx *ctx, void *p, size_t add, size_t *size);
void nn__mem_graph_count(struct nn_ctx *ctx, long long delta);

/* 1 when p is a live block of the context's device: from its pool or its user allocator. */
int nn__dev_owns(struct nn_ctx *ctx, const void *p);

/* A block of count > 0 elements of dtype, each one, for products that sum through a vector of
 * ones. Written in the stream order of ctx's stream, from a pageable host copy (read when the
 * copy returns): a block kept and read later on another stream needs that stream ordered after
 * the write (an event recorded on ctx's stream after this returns). Statuses of
 * nn__dev_alloc_for(), NN_E_OOM_HOST (message starting with fn), NN_E_CUDA; *out NULL on
 * failure. */
nn_status nn__dev_alloc_ones(struct nn_ctx *ctx, const char *fn, nn_dtype dtype, size_t count,
                             void **out);

/* The same, with messages that name the pool instead of a function: prefer the _for forms. */
nn_status nn__dev_alloc(struct nn_ctx *ctx, size_t bytes, void **out);
nn_status nn__dev_free(struct nn_ctx *ctx, void *p);

#endif

/*
 * nnprim: a sequence of nnprim calls captured once as one CUDA graph and launched many times.
 *
 * A training step is dozens of calls; issued one by one, each costs the host a few microseconds,
 * and small models are paced by that host time. Captured once, the whole step (forward calls,
 * loss, backward calls, the optimizer's update, copies and fills) replays with one
 * cudaGraphLaunch:
 *
 *     step(ctx);                         // once, eagerly: plans are built, shapes seen
 *     nn_graph_begin(ctx);
 *     step(ctx);                         // recorded, not run
 *     nn_graph *g;
 *     nn_graph_end(ctx, &g);
 *     for (...) {
 *         nn_graph_feed f = {x.data, batch, bytes};
 *         nn_graph_launch_feeds(ctx, g, &f, 1); // this step's batch in, then the whole step
 *     }
 *     nn_graph_free(ctx, g);
 *
 * cuDNN backend only; the reference backend answers NN_E_UNSUPPORTED. docs/GRAPHS.md has the
 * whole story and the measured gain.
 *
 * What can be captured: every op family's forward, backward and *_backward_ex calls and their
 * *_pullback_free, nn_optim_step(), nn_tensor_empty() / nn_tensor_free() / nn_mem_alloc() /
 * nn_mem_free(), nn_tensor_copy() between device tensors, and the nn_tensor_fill_*() of device
 * tensors, on one context, on its stream. Everything else that needs the host to wait for the
 * device (a copy to or from host memory, nn_ctx_synchronize()), or that changes what the
 * context is (nn_ctx_set_stream(), nn_plan_cache_load()), is refused with NN_E_GRAPH while a
 * capture is open on the context.
 *
 * Host work before capture. Building a plan, tuning it, creating descriptors and a recurrent
 * layer's first call of a shape happen on the host and may wait for the device; none of it
 * happens inside a capture. A call whose shape has no plan yet is refused with NN_E_GRAPH
 * ("run the step once before nn_graph_begin()"): run the step once eagerly first (a warm-up),
 * which leaves every plan built. Nothing inside a capture synchronises with the host.
 *
 * Inside a capture:
 *   - the calls are recorded, not run: their outputs are written at each launch;
 *   - any failing call (refused, or failing for another reason) spoils the capture:
 *     nn_graph_end() reports the first failure and makes no graph;
 *   - per-call graph replays (settings.rnn_graphs, settings.linear_graphs) are not used: the
 *     calls are recorded as their eager forms, whose results are bitwise the replays';
 *   - class targets of nn_softmax_cross_entropy_forward() must be in device memory (each launch
 *     reads the batch's targets there; host targets are read once, at the call, and are
 *     refused). On the device, a target outside [0, C) cannot be reported as a status: that
 *     sample's loss and gradient become NaN.
 *
 * Memory. What the captured calls allocate (their workspaces, pullbacks' buffers, tensors made
 * with nn_tensor_empty(), raw nn_mem_alloc() blocks) is the graph's own memory: taken from the
 * device's pool (nn_mem_stats.graph_bytes counts it) at addresses that stay the same for every
 * launch, and reused inside the capture after it is freed there (in stream order). So a tensor
 * allocated inside the capture and read after it (the loss, a gradient) holds that launch's value
 * after every launch. Freed after the capture (nn_tensor_free), such a block stays the graph's,
 * since every launch writes it; it goes back to the pool with the graph. A block allocated before
 * the capture and freed inside it stays allocated as long as the graph lives, for the same
 * reason. nn_graph_free() returns the graph's memory to the pool, except blocks allocated inside
 * the capture that are still live (a tensor not freed yet): each returns when it is freed.
 *
 * Buffers from before the capture (weights, gradients, inputs) are read and written at their
 * addresses: they must stay allocated while the graph lives. Freeing one with nn_tensor_free() or
 * nn_mem_free() makes the graph stale: its next launch is refused with NN_E_GRAPH. (nnprim sees
 * only its own frees: memory the caller wrapped is the caller's to keep alive.)
 *
 * Pullbacks. A pullback made by a forward inside the capture is consumed by a backward inside
 * the same capture; consuming one across the boundary (made before the capture and consumed
 * inside it, or made inside and consumed after) is refused with NN_E_GRAPH. Freeing a pullback
 * with its *_pullback_free is allowed on either side.
 *
 * Changing data. A graph reads its inputs at the addresses it was captured on. Each launch can
 * first copy this step's data there: nn_graph_launch_feeds() takes (dst, src, bytes) triples, dst
 * the start of a buffer a captured call read (an input tensor's data, device class targets),
 * src host or device memory holding the new batch, and copies them on the context's stream
 * before the launch. A batch of another size (a different byte count) is refused with NN_E_SHAPE:
 * a new shape needs a graph of its own (capture once per shape, e.g. one more for the last short
 * batch of an epoch).
 *
 * Streams. A capture records the context's stream, which must be a stream made with
 * cudaStreamNonBlocking (as the context's own is): the legacy and per-thread default streams and
 * blocking streams are refused. A graph launches on the context's stream at the time of the
 * launch (nn_ctx_set_stream() between launches is fine): launches of one graph run one after
 * another, each after the work queued before it on its stream.
 *
 * Threads: as for every call of a context (context.h). While a capture is open, another thread's
 * call that synchronises the whole device (an out-of-memory retry of the pool, nn_mem_trim())
 * can spoil it, as CUDA's relaxed capture mode says; keep such calls out of that time.
 *
 * Determinism: with settings.deterministic set, a launch gives results bitwise equal to the same
 * calls run eagerly (tests/graph/ checks this for every family and both example models).
 *
 * Verbose (NNPRIM_VERBOSE=1): a launch prints
 *   nnprim_verbose,graph_launch,cudnn,graph,-,g<id> nodes=<n> feeds=<k>,host_ms=<ms>
 * and nn_graph_end() a line naming the graph, its node count and its memory.
 */
#ifndef NNPRIM_GRAPH_H
#define NNPRIM_GRAPH_H

#include <stddef.h>
#include <stdint.h>

#include "context.h"
#include "status.h"

#ifdef __cplusplus
extern "C" {
#endif

/** A captured step: opaque; made by nn_graph_end(), released by nn_graph_free(). */
typedef struct nn_graph nn_graph;

/** What nn_graph_get_info() says of a graph. */
typedef struct nn_graph_info {
    uint64_t id;           /**< the graph's number in this process, as its verbose lines say */
    uint64_t nodes;        /**< nodes of the captured CUDA graph */
    uint64_t memory_bytes; /**< its own memory (see "Memory" above) */
    uint64_t inputs;       /**< distinct buffers from before the capture its calls use */
    uint64_t launches;     /**< launches so far */
    uint64_t reserved[4];  /**< zero */
} nn_graph_info;

/** One copy made before a launch (nn_graph_launch_feeds()). */
typedef struct nn_graph_feed {
    void *dst;            /**< the start of a buffer a captured call read (device memory) */
    const void *src;      /**< this launch's data: host or device memory, bytes of it */
    size_t bytes;         /**< must equal the bytes the captured call read at dst */
    uint64_t reserved[2]; /**< zero */
} nn_graph_feed;

/**
 * Start recording the context's calls into a graph.
 *
 * @param ctx a cuDNN context whose stream is non-blocking, with no capture open.
 * @return NN_OK (the calls that follow are recorded, until nn_graph_end());
 *         NN_E_INVALID_ARG for a NULL ctx;
 *         NN_E_UNSUPPORTED for a reference-backend context;
 *         NN_E_GRAPH when a capture is already open on the context, or its stream cannot be
 *         captured (the legacy or per-thread default stream, a blocking stream, a stream that
 *         something else is capturing): the message says which;
 *         NN_E_CUDA when the stream reports an earlier failure of its work (a pending error), or
 *         CUDA refuses the capture; NN_E_OOM_HOST.
 *         On failure nothing is open and the context is as before.
 */
NN_API nn_status nn_graph_begin(nn_ctx *ctx);

/**
 * Stop recording and make the graph of what was recorded.
 *
 * @param ctx the context with the open capture.
 * @param out out: the new graph; NULL on failure.
 * @return NN_OK;
 *         NN_E_INVALID_ARG for a NULL ctx or out (the capture stays open);
 *         NN_E_GRAPH when no capture is open, or when a call inside the capture failed: the
 *         message gives the first failure ("nn_graph_end: the capture failed: nn_conv_forward:
 *         ..."); the capture is then closed, nothing is made, and the memory allocated inside it
 *         goes back as described under "Memory" (its tensors must not be used);
 *         NN_E_CUDA (CUDA refused the capture or the graph's instantiation, also closed);
 *         NN_E_OOM_HOST (closed, nothing made).
 * Ownership: the caller owns the graph and releases it with nn_graph_free().
 */
NN_API nn_status nn_graph_end(nn_ctx *ctx, nn_graph **out);

/**
 * Run the graph once on the context's stream (asynchronously: the call returns once the launch
 * is queued).
 *
 * @param ctx   the context the graph was captured with, with no capture open.
 * @param graph a live graph of ctx.
 * @return NN_OK;
 *         NN_E_INVALID_ARG for a NULL ctx or graph, or a graph of another context;
 *         NN_E_BAD_POINTER for a graph that is not live (freed, or never made);
 *         NN_E_GRAPH while a capture is open on the context, or when the graph is stale (a buffer
 *         it uses was freed after the capture: the message gives its address);
 *         NN_E_CUDA.
 */
NN_API nn_status nn_graph_launch(nn_ctx *ctx, nn_graph *graph);

/**
 * Copy this launch's data into the graph's input buffers, then run the graph: the copies and the
 * launch are queued on the context's stream in that order. A host src is read before the call
 * returns (the caller may reuse it then); a device src must be ready on the context's stream.
 *
 * @param ctx, graph as nn_graph_launch().
 * @param feeds     n copies (NULL allowed when n is 0); each dst the start of a buffer the
 *                  captured calls read or wrote, each bytes that buffer's size; no two dst equal,
 *                  src not overlapping its dst.
 * @param n         0 <= n.
 * @return the statuses of nn_graph_launch(); NN_E_INVALID_ARG for n < 0, a NULL feeds with n > 0,
 *         a NULL dst or src, a dst that is no buffer of the graph's calls, a dst given twice, a
 *         src that overlaps its dst, a nonzero reserved field (the message names feeds[i]);
 *         NN_E_SHAPE for bytes other than the buffer's size (a batch of another shape needs a
 *         graph captured for it). Nothing is copied or launched on failure.
 */
NN_API nn_status nn_graph_launch_feeds(nn_ctx *ctx, nn_graph *graph, const nn_graph_feed *feeds,
                                       int n);

/**
 * Release a graph and its memory (see "Memory"). Launches already queued complete first: the
 * memory goes back in the order of the context's stream.
 *
 * @param ctx   the context the graph was captured with, with no capture open.
 * @param graph NULL (does nothing) or a live graph of ctx.
 * @return NN_OK; NN_E_INVALID_ARG for a NULL ctx or a graph of another context;
 *         NN_E_BAD_POINTER for a graph that is not live (freed already); NN_E_GRAPH while a
 *         capture is open on the context. On failure the graph stays as it was.
 */
NN_API nn_status nn_graph_free(nn_ctx *ctx, nn_graph *graph);

/**
 * Describe a graph.
 *
 * @param graph a live graph.
 * @param out   out: filled on success.
 * @return NN_OK; NN_E_INVALID_ARG for a NULL graph or out; NN_E_BAD_POINTER for a graph that is
 *         not live.
 */
NN_API nn_status nn_graph_get_info(const nn_graph *graph, nn_graph_info *out);

/**
 * Whether a capture is open on the context.
 *
 * @param ctx a context.
 * @param out out: 1 while a capture is open (between nn_graph_begin() and nn_graph_end()), else 0.
 * @return NN_OK; NN_E_INVALID_ARG for a NULL ctx or out.
 */
NN_API nn_status nn_graph_capturing(const nn_ctx *ctx, int *out);

#ifdef __cplusplus
}
#endif

#endif /* NNPRIM_GRAPH_H */

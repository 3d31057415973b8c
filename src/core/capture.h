/* A whole-step graph capture in progress on a context (include/nnprim/graph.h), as the layers
 * below the graph API see it: src/graph/ opens and closes it (ctx->capture), the families and the
 * memory layer ask it what a call may do while it is open, and what the captured calls touched.
 *
 * And the watch over live graphs: a graph reads and writes buffers that were allocated before its
 * capture (weights, gradients, inputs); a free of one of them makes the graph stale, so that its
 * next launch is refused instead of writing into memory that may belong to another tensor. */
#ifndef NN_CORE_CAPTURE_H
#define NN_CORE_CAPTURE_H

#include <stdatomic.h>
#include <stddef.h>

#include "core/ctx.h"
#include "nnprim/status.h"

struct nn__graph_mem;

/* A buffer a captured call read or wrote: [p, p + bytes). */
struct nn__span {
    const void *p;
    size_t bytes;
};

struct nn__capture {
    unsigned long long id;     /* process-unique, nonzero: pullbacks made inside carry it */
    struct nn__graph_mem *mem; /* the graph's own memory (mem/graph_mem.h) */
    nn_status refused;         /* the first call refused inside the capture, NN_OK while none */
    nn_error_info why;         /* its record */
    struct nn__span *touched;  /* what the captured calls' tensors span, in call order */
    size_t ntouched, cap;
    int touch_oom; /* a span could not be recorded (out of host memory): end fails */
};

/* A new capture id (never 0). */
unsigned long long nn__capture_next_id(void);

/* Every failure recorded on a context while its capture is open (nn__record_error) is
 * remembered in the capture as well (the first one): its calls are partly captured, so
 * nn_graph_end() reports it and makes no graph. A call that cannot run inside a capture fails
 * with NN_E_GRAPH and a message that says what to do instead. */

/* What a call of a shape not seen before does first (build a plan, tune it, make descriptors
 * and device buffers that outlive the call) needs the host and must not be recorded: inside a
 * capture it is refused with NN_E_GRAPH, "fn: <what> ... run the step once before
 * nn_graph_begin()" (fn NULL: no prefix, for a layer whose caller adds it). Returns NN_OK
 * outside a capture. */
nn_status nn__capture_no_build(struct nn_ctx *ctx, const char *fn, const char *what);

/* Inside a capture (ctx->capture set), record that a captured call uses [p, p + bytes); outside
 * one it does nothing. Never fails (a span that cannot be stored marks the capture). */
void nn__capture_touch_span(struct nn_ctx *ctx, const void *p, size_t bytes);

/* Whether a capture is open on ctx. */
static inline int nn__capturing(const struct nn_ctx *ctx)
{
    return ctx->capture != NULL;
}

/* ---------------------------------------------------------------------------------------------
 * The watch
 */

/* A live graph's buffers from before its capture, sorted by address; freed is the first of them
 * a free gave back since (NULL while none was). */
struct nn__watch {
    struct nn__span *spans;
    size_t n;
    const void *_Atomic freed;
    struct nn__watch *prev, *next;
};

/* Start / stop watching (thread-safe). A watch is added once, removed once. */
void nn__watch_add(struct nn__watch *w);
void nn__watch_remove(struct nn__watch *w);

/* The memory layer gives back a block that starts at p (a tensor's storage, a raw allocation):
 * every watch whose spans start there is marked. Costs one atomic load while no graph is live. */
void nn__watch_freed(const void *p);

#endif

/* The pullback registry shared by every op family: one set of live pullbacks, so that a consumed,
 * freed, foreign or other-family pullback is told apart from a real one without touching its
 * memory, and one set of checks (liveness, family, context) with messages that name the called
 * public function.
 *
 * A family's pullback struct starts with a struct nn__pullback, and the family has one static
 * struct nn__pullback_kind. Thread-safe (the set has its own lock). */
#ifndef NN_CORE_PULLBACK_H
#define NN_CORE_PULLBACK_H

#include "nnprim/backward.h"
#include "nnprim/status.h"

struct nn_ctx;

/* One per op family ("conv", "pool"): its name for messages and the family check, and what its
 * backward calls accept in nn_backward_options. */
struct nn__pullback_kind {
    const char *name;
    unsigned accumulate;    /* the NN_ACCUMULATE_* bits the family's backward honours */
    const char *single_use; /* NULL: a pullback may be kept (opts.keep); else why it cannot */
};

/* The first member of every family's pullback struct. */
struct nn__pullback {
    const struct nn__pullback_kind *kind;
    struct nn_ctx *ctx; /* the context of the forward call that made it */
    /* The stream the pullback's device work is ordered on: the forward's, then that of a backward
     * call made after the context switched streams (which waits for the forward's first). */
    void *stream;
    unsigned long long stream_id;
    unsigned long long capture; /* the id of the graph capture it was made in, 0 for none */
};

/* Make pb live as a pullback of kind made with ctx on its current stream. Its header is filled
 * in.
 * Returns NN_OK; NN_E_OOM_HOST ("fn: out of host memory for the pullback"; pb is not live). */
nn_status nn__pullback_add(struct nn_ctx *ctx, const char *fn, const struct nn__pullback_kind *kind,
                           struct nn__pullback *pb);

/* Check the pullback a backward call fn (a public function's name) of family kind was given
 * (*pullback, may be NULL): live, of this family, made with ctx, and on the same side of a graph
 * capture as the call (made inside the capture open now, or outside any). Returns NN_OK,
 * NN_E_PULLBACK, or NN_E_GRAPH for a pullback that crosses a capture's boundary, with a message
 * naming fn and what is wrong, which changes nothing. On success, when ctx has
 * switched streams since the forward, ctx's stream is made to wait for the forward's (no host
 * wait; NN_E_CUDA if CUDA refuses) and the pullback counts as ctx's stream's from then on. */
nn_status nn__pullback_check(struct nn_ctx *ctx, const char *fn,
                             const struct nn__pullback_kind *kind, void *pb);

/* What one backward call does, from its options. */
struct nn__backward {
    unsigned accumulate; /* NN_ACCUMULATE_* bits */
    int keep;            /* leave the pullback live after success */
};

/* The start of every backward call fn of family kind through a pullback: the caller's pullback
 * argument (NULL: NN_E_PULLBACK) and the pullback it points to (pb) checked as
 * nn__pullback_check() does, then opts (NULL: overwrite every gradient, and consume)
 * checked against kind: reserved fields zero, keep 0 or 1, accumulate bits known
 * (NN_E_INVALID_ARG) and honoured by the family, keep allowed (NN_E_UNSUPPORTED). Fills *out;
 * nothing changes on failure. Call it as NN__BACKWARD_BEGIN(ctx, fn, &kind, pullback, opts,
 * &bw) with the public call's `T **pullback`. */
nn_status nn__backward_begin(struct nn_ctx *ctx, const char *fn,
                             const struct nn__pullback_kind *kind, int pullback_given, void *pb,
                             const nn_backward_options *opts, struct nn__backward *out);
#define NN__BACKWARD_BEGIN(ctx, fn, kind, pullback, opts, out)                                     \
    nn__backward_begin((ctx), (fn), (kind), (pullback) != NULL,                                    \
                       (pullback) ? (void *)*(pullback) : NULL, (opts), (out))

/* The accumulate argument of a call without a pullback (conv's stand-alone gradients,
 * nn_pool_backward_stateless, the workspace queries; name: the argument's, for the message):
 * bits checked as above against kind. */
nn_status nn__backward_accumulate(struct nn_ctx *ctx, const char *fn,
                                  const struct nn__pullback_kind *kind, const char *name,
                                  unsigned accumulate);

/* Make pb (not NULL) no longer live, before the family frees it. Returns NN_OK; NN_E_PULLBACK
 * (recorded without a context, message naming fn) when pb is not a live pullback of kind, which
 * then stays as it was. Its context's stream is first ordered after the pullback's (as in
 * nn__pullback_check), so that the family frees its buffers in a valid stream order; should CUDA
 * refuse that, the host waits for the pullback's stream instead. */
nn_status nn__pullback_remove(const char *fn, const struct nn__pullback_kind *kind, void *pb);

/* nn__pullback_remove() for a backward call that consumes the pullback it checked with
 * nn__backward_begin(): the family check was made there, so the set is asked once, to remove it.
 * Returns as nn__pullback_remove() does. */
nn_status nn__pullback_consume(const char *fn, void *pb);

/* The body of every family's *_pullback_free: slot is the caller's `T **pullback` (NULL, or
 * pointing to NULL: a no-op). A live pullback of kind is made no longer live as by
 * nn__pullback_remove(), released with release (the family's free of the pullback and what hangs
 * off it), and *slot set to NULL. Returns NN_OK; NN_E_PULLBACK as nn__pullback_remove(), which
 * leaves *slot as it was. */
nn_status nn__pullback_free(const char *fn, const struct nn__pullback_kind *kind, void *slot,
                            void (*release)(void *pb));

#endif

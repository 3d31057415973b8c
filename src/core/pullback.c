/* The live set is a pointer set: membership is decided before a pullback's memory is read, so a
 * stale copy of a consumed pullback (freed memory) is recognised safely. */
#include "core/pullback.h"

#include <string.h>

#include "nn_config.h"

#include "core/capture.h"
#include "core/ctx.h"
#include "core/cuda_util.h"
#include "core/error.h"
#include "core/ptrset.h"

static struct nn__ptrset live = NN__PTRSET_INIT;

nn_status nn__pullback_add(struct nn_ctx *ctx, const char *fn, const struct nn__pullback_kind *kind,
                           struct nn__pullback *pb)
{
    pb->kind = kind;
    pb->ctx = ctx;
    pb->stream = ctx->stream;
    pb->stream_id = ctx->stream_id;
    pb->capture = ctx->capture ? ctx->capture->id : 0;
    if (nn__ptrset_add(&live, pb) != 0)
        return NN__FAIL(ctx, NN_E_OOM_HOST, "%s: out of host memory for the pullback", fn);
    return NN_OK;
}

/* NN_OK if pb is a live pullback of kind; else the failure, recorded with ctx, or for a call
 * without one (a *_pullback_free) with the context a live pullback is bound to. */
static nn_status check_live(struct nn_ctx *ctx, const char *fn,
                            const struct nn__pullback_kind *kind, const void *pb)
{
    if (!nn__ptrset_contains(&live, pb))
        return NN__FAIL(ctx, NN_E_PULLBACK,
                        "%s: *pullback (%p) is not a live pullback: already consumed or freed", fn,
                        pb);
    const struct nn__pullback *h = pb;
    if (h->kind != kind)
        return NN__FAIL(ctx ? ctx : h->ctx, NN_E_PULLBACK,
                        "%s: *pullback (%p) is a %s pullback, not a %s one: pass it to the %s "
                        "family's calls",
                        fn, pb, h->kind->name, kind->name, h->kind->name);
    return NN_OK;
}

/* The forward's work is queued on h->stream: ctx's stream follows it, and the pullback is ctx's
 * stream's from then on, so that a second check or the free costs nothing. */
static nn_status follow_forward(struct nn_ctx *ctx, const char *fn, struct nn__pullback *h)
{
    return nn__stream_follow(ctx, fn, &h->stream, &h->stream_id);
}

nn_status nn__pullback_check(struct nn_ctx *ctx, const char *fn,
                             const struct nn__pullback_kind *kind, void *pb)
{
    if (!pb)
        return NN__FAIL(ctx, NN_E_PULLBACK,
                        "%s: *pullback is NULL: it was already consumed by a backward call, freed, "
                        "or never made (forward in inference mode)",
                        fn);
    /* A live pullback stays live until a call consumes it, so reading its header is safe here
     * while the caller's thread holds it. */
    NN__TRY(check_live(ctx, fn, kind, pb));
    const struct nn__pullback *h = pb;
    if (h->ctx != ctx)
        return NN__FAIL(ctx, NN_E_PULLBACK,
                        "%s: the pullback was created with context %p, but this call has another "
                        "context (%p); use the one that made it",
                        fn, (void *)h->ctx, (void *)ctx);
    unsigned long long now = ctx->capture ? ctx->capture->id : 0;
    if (h->capture != now) {
        if (!h->capture)
            return NN__FAIL(ctx, NN_E_GRAPH,
                            "%s: the pullback was made before the graph capture that is open now "
                            "(nn_graph_begin); a graph's backward calls take pullbacks of forward "
                            "calls captured in the same graph: run the forward inside the capture",
                            fn);
        return NN__FAIL(ctx, NN_E_GRAPH,
                        "%s: the pullback was made inside a graph capture (%s); it can be consumed "
                        "only inside that capture, and freed (its *_pullback_free) anywhere",
                        fn, now ? "another one" : "which has ended");
    }
    return follow_forward(ctx, fn, pb);
}

/* The family frees the pullback's buffers on its context's stream next. */
static void order_for_free(const char *fn, struct nn__pullback *h)
{
    struct nn_ctx *ctx = h->ctx;
    if (!ctx || !nn__ctx_on_gpu(ctx) || h->stream_id == ctx->stream_id) return;
    struct nn__error_kept keep = nn__error_keep(ctx);
    if (follow_forward(ctx, fn, h) != NN_OK) {
#if NN_HAVE_CUDA
        (void)cudaStreamSynchronize((cudaStream_t)h->stream);
        (void)cudaGetLastError();
#endif
        h->stream = ctx->stream;
        h->stream_id = ctx->stream_id;
    }
    nn__error_restore(ctx, &keep);
}

nn_status nn__pullback_remove(const char *fn, const struct nn__pullback_kind *kind, void *pb)
{
    NN__TRY(check_live(NULL, fn, kind, pb));
    return nn__pullback_consume(fn, pb);
}

nn_status nn__pullback_consume(const char *fn, void *pb)
{
    /* Two threads freeing the same pullback: only one removes it. */
    if (!nn__ptrset_remove(&live, pb))
        return NN__FAIL(NULL, NN_E_PULLBACK,
                        "%s: *pullback (%p) is not a live pullback: already consumed or freed", fn,
                        pb);
    order_for_free(fn, pb);
    return NN_OK;
}

nn_status nn__pullback_free(const char *fn, const struct nn__pullback_kind *kind, void *slot,
                            void (*release)(void *pb))
{
    /* slot is a T ** of the family's type: read and written as bytes, which any object allows */
    _Static_assert(sizeof(void *) == sizeof(struct nn__pullback *), "pullback pointers are void *");
    if (!slot) return NN_OK;
    void *pb;
    memcpy(&pb, slot, sizeof pb);
    if (!pb) return NN_OK;
    NN__TRY(nn__pullback_remove(fn, kind, pb));
    release(pb);
    pb = NULL;
    memcpy(slot, &pb, sizeof pb);
    return NN_OK;
}

static const char *bit_name(unsigned bit)
{
    switch (bit) {
    case NN_ACCUMULATE_DX: return "NN_ACCUMULATE_DX";
    case NN_ACCUMULATE_DW: return "NN_ACCUMULATE_DW";
    case NN_ACCUMULATE_DB: return "NN_ACCUMULATE_DB";
    }
    return "?";
}

nn_status nn__backward_accumulate(struct nn_ctx *ctx, const char *fn,
                                  const struct nn__pullback_kind *kind, const char *name,
                                  unsigned accumulate)
{
    unsigned known = NN_ACCUMULATE_DX | NN_ACCUMULATE_DW | NN_ACCUMULATE_DB;
    if (accumulate & ~known)
        return NN__FAIL(ctx, NN_E_INVALID_ARG,
                        "%s: %s must hold only NN_ACCUMULATE_* bits (0x%x), got 0x%x (unknown "
                        "bits 0x%x)",
                        fn, name, known, accumulate, accumulate & ~known);
    unsigned other = accumulate & ~kind->accumulate;
    if (other) {
        unsigned bit = other & (0u - other); /* the lowest one */
        return NN__FAIL(ctx, NN_E_UNSUPPORTED,
                        "%s: %s = 0x%x asks for %s, but a %s backward accumulates only the bits "
                        "0x%x",
                        fn, name, accumulate, bit_name(bit), kind->name, kind->accumulate);
    }
    return NN_OK;
}

nn_status nn__backward_begin(struct nn_ctx *ctx, const char *fn,
                             const struct nn__pullback_kind *kind, int pullback_given, void *pb,
                             const nn_backward_options *opts, struct nn__backward *out)
{
    if (!pullback_given)
        return NN__FAIL(ctx, NN_E_PULLBACK, "%s: pullback must not be NULL (pass &pb)", fn);
    NN__TRY(nn__pullback_check(ctx, fn, kind, pb));
    if (!opts) {
        out->accumulate = 0;
        out->keep = 0;
        return NN_OK;
    }
    NN__TRY(NN__CHECK_RESERVED(ctx, fn, "opts.reserved", opts->reserved));
    if (opts->keep != 0 && opts->keep != 1)
        return NN__FAIL(ctx, NN_E_INVALID_ARG, "%s: opts.keep must be 0 or 1, got %d", fn,
                        opts->keep);
    NN__TRY(nn__backward_accumulate(ctx, fn, kind, "opts.accumulate", opts->accumulate));
    if (opts->keep && kind->single_use)
        return NN__FAIL(ctx, NN_E_UNSUPPORTED,
                        "%s: opts.keep = 1, but %s pullbacks are single-use (%s); run the forward "
                        "again for another backward",
                        fn, kind->name, kind->single_use);
    out->accumulate = opts->accumulate;
    out->keep = opts->keep;
    return NN_OK;
}

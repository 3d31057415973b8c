/* The live set is a pointer set: membership is decided before a pullback's memory is read, so a
 * stale copy of a consumed pullback (freed memory) is recognised safely. */
#include "core/pullback.h"

#include "core/error.h"
#include "core/ptrset.h"

static struct nn__ptrset live = NN__PTRSET_INIT;

nn_status nn__pullback_add(struct nn_ctx *ctx, const char *fn, const struct nn__pullback_kind *kind,
                           struct nn__pullback *pb)
{
    pb->kind = kind;
    pb->ctx = ctx;
    if (nn__ptrset_add(&live, pb) != 0)
        return NN__FAIL(ctx, NN_E_OOM_HOST, "%s: out of host memory for the pullback", fn);
    return NN_OK;
}

/* NN_OK if pb is a live pullback of kind; else the failure, recorded with ctx (may be NULL). */
static nn_status check_live(struct nn_ctx *ctx, const char *fn,
                            const struct nn__pullback_kind *kind, const void *pb)
{
    if (!nn__ptrset_contains(&live, pb))
        return NN__FAIL(ctx, NN_E_PULLBACK,
                        "%s: *pullback (%p) is not a live pullback: already consumed or freed", fn,
                        pb);
    const struct nn__pullback *h = pb;
    if (h->kind != kind)
        return NN__FAIL(ctx, NN_E_PULLBACK,
                        "%s: *pullback (%p) is a %s pullback, not a %s one: pass it to the %s "
                        "family's calls",
                        fn, pb, h->kind->name, kind->name, h->kind->name);
    return NN_OK;
}

nn_status nn__pullback_check(struct nn_ctx *ctx, const char *fn,
                             const struct nn__pullback_kind *kind, const void *pb)
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
    return NN_OK;
}

nn_status nn__pullback_remove(const char *fn, const struct nn__pullback_kind *kind, void *pb)
{
    NN__TRY(check_live(NULL, fn, kind, pb));
    /* Two threads freeing the same pullback: only one removes it. */
    if (!nn__ptrset_remove(&live, pb))
        return NN__FAIL(NULL, NN_E_PULLBACK,
                        "%s: *pullback (%p) is not a live pullback: already consumed or freed", fn,
                        pb);
    return NN_OK;
}

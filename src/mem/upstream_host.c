/* The host upstream: segments are real host memory (nn__host_alloc), streams are simulated.
 * A simulated stream counts work queued and work completed; an event recorded on it completes
 * once the work queued before the record has completed. Work is queued and completed only by
 * tests (nn__hstream_busy / nn__hstream_sync), so a stream is idle unless a test says otherwise. */
#include <stdatomic.h>

#include "core/alloc.h"
#include "core/error.h"
#include "mem/mem_pool.h"

struct nn__hstream {
    uint64_t id;
    atomic_ulong queued, done;
    atomic_long refs; /* the owner and every event recorded on it */
};

struct hevent {
    struct nn__hstream *s;
    unsigned long ticket;
};

static atomic_ullong next_id = 1;

nn_status nn__hstream_create(struct nn__hstream **out)
{
    struct nn__hstream *s = nn__host_calloc(1, sizeof *s);
    *out = s;
    if (!s)
        return NN__FAIL(NULL, NN_E_OOM_HOST,
                        "nn_mem_stream_open: out of host memory for a host stream");
    s->id = atomic_fetch_add(&next_id, 1);
    atomic_store(&s->refs, 1);
    return NN_OK;
}

static void hstream_release(struct nn__hstream *s)
{
    if (s && atomic_fetch_sub(&s->refs, 1) == 1) nn__host_free(s);
}

void nn__hstream_destroy(struct nn__hstream *s)
{
    hstream_release(s);
}

uint64_t nn__hstream_id(const struct nn__hstream *s)
{
    return s->id;
}

void nn__hstream_busy(struct nn__hstream *s)
{
    atomic_fetch_add(&s->queued, 1);
}

void nn__hstream_sync(struct nn__hstream *s)
{
    atomic_store(&s->done, atomic_load(&s->queued));
}

static nn_status host_seg_alloc(void *st, size_t bytes, void *stream, void **out,
                                struct nn_ctx *ectx)
{
    (void)st;
    (void)stream;
    *out = nn__host_alloc(bytes);
    if (!*out)
        return NN__FAIL(ectx, NN_E_OOM_DEVICE, "host upstream: no memory for %zu bytes", bytes);
    return NN_OK;
}

static void host_seg_free(void *st, void *p)
{
    (void)st;
    nn__host_free(p);
}

static int host_quiesce(void *st)
{
    (void)st;
    return 0;
}

static nn_status host_raw_alloc(void *st, size_t bytes, void **out, struct nn_ctx *ectx)
{
    return host_seg_alloc(st, bytes, NULL, out, ectx);
}

static nn_status host_event_create(void *st, void **ev, struct nn_ctx *ectx)
{
    (void)st;
    *ev = nn__host_calloc(1, sizeof(struct hevent));
    if (!*ev)
        return NN__FAIL(ectx, NN_E_OOM_HOST, "host upstream: out of host memory for an event");
    return NN_OK;
}

static void host_event_destroy(void *st, void *ev)
{
    (void)st;
    hstream_release(((struct hevent *)ev)->s);
    nn__host_free(ev);
}

static nn_status host_event_record(void *st, void *ev, void *stream, struct nn_ctx *ectx)
{
    (void)st;
    (void)ectx;
    struct hevent *e = ev;
    struct nn__hstream *s = stream;
    if (s) atomic_fetch_add(&s->refs, 1);
    hstream_release(e->s);
    e->s = s;
    e->ticket = s ? atomic_load(&s->queued) : 0;
    return NN_OK;
}

static int host_event_query(void *st, void *ev)
{
    (void)st;
    struct hevent *e = ev;
    return !e->s || atomic_load(&e->s->done) >= e->ticket;
}

static nn_status host_configure(void *st, const nn_mem_settings *s, struct nn_ctx *ectx)
{
    (void)st;
    (void)s;
    (void)ectx;
    return NN_OK;
}

static void host_destroy(void *st)
{
    (void)st;
}

static const struct nn__upstream_ops host_ops = {
    host_seg_alloc,   host_seg_free,     host_quiesce,       host_raw_alloc,
    host_seg_free,    host_event_create, host_event_destroy, host_event_record,
    host_event_query, host_configure,    host_destroy,
};

nn_status nn__upstream_host(struct nn__upstream *out)
{
    *out = (struct nn__upstream){&host_ops, NULL, "host upstream"};
    return NN_OK;
}

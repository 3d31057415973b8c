#include "core/capture.h"

#include <pthread.h>

#include "core/alloc.h"
#include "core/error.h"

unsigned long long nn__capture_next_id(void)
{
    static atomic_ullong next;
    return atomic_fetch_add(&next, 1) + 1;
}

nn_status nn__capture_no_build(struct nn_ctx *ctx, const char *fn, const char *what)
{
    if (!ctx->capture) return NN_OK;
    return NN__FAIL(ctx, NN_E_GRAPH,
                    "%s%s%s does not exist yet, and making it needs the host, which a graph "
                    "capture cannot record: run the step once before nn_graph_begin() (a warm-up "
                    "builds every plan it needs)",
                    fn ? fn : "", fn ? ": " : "", what);
}

void nn__capture_touch_span(struct nn_ctx *ctx, const void *p, size_t bytes)
{
    struct nn__capture *c = ctx->capture;
    if (!c || !p) return;
    if (c->ntouched == c->cap) {
        size_t cap = c->cap ? 2 * c->cap : 64;
        struct nn__span *n = nn__host_realloc(c->touched, cap * sizeof *n);
        if (!n) {
            c->touch_oom = 1;
            return;
        }
        c->touched = n;
        c->cap = cap;
    }
    c->touched[c->ntouched++] = (struct nn__span){p, bytes};
}

/* ---- the watch ---- */

static pthread_mutex_t watch_lock = PTHREAD_MUTEX_INITIALIZER;
static struct nn__watch *watches;
static atomic_int watching;

void nn__watch_add(struct nn__watch *w)
{
    pthread_mutex_lock(&watch_lock);
    w->prev = NULL;
    w->next = watches;
    if (watches) watches->prev = w;
    watches = w;
    atomic_fetch_add(&watching, 1);
    pthread_mutex_unlock(&watch_lock);
}

void nn__watch_remove(struct nn__watch *w)
{
    pthread_mutex_lock(&watch_lock);
    if (w->prev)
        w->prev->next = w->next;
    else
        watches = w->next;
    if (w->next) w->next->prev = w->prev;
    atomic_fetch_sub(&watching, 1);
    pthread_mutex_unlock(&watch_lock);
}

static int spans_start_at(const struct nn__watch *w, const void *p)
{
    size_t lo = 0, hi = w->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if ((const char *)w->spans[mid].p < (const char *)p)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < w->n && w->spans[lo].p == p;
}

void nn__watch_freed(const void *p)
{
    if (!atomic_load_explicit(&watching, memory_order_relaxed) || !p) return;
    pthread_mutex_lock(&watch_lock);
    for (struct nn__watch *w = watches; w; w = w->next) {
        const void *none = NULL;
        if (spans_start_at(w, p)) atomic_compare_exchange_strong(&w->freed, &none, p);
    }
    pthread_mutex_unlock(&watch_lock);
}

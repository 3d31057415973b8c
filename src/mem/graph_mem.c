#include "mem/graph_mem.h"

#include <stdint.h>
#include <string.h>

#include "core/alloc.h"
#include "core/capture.h"
#include "core/ctx.h"
#include "core/error.h"
#include "mem/mem.h"
#include "mem/mem_pool.h"

enum { B_FREE, B_LIVE, B_RELEASED };

/* A run of a chunk: the runs of a chunk cover it, in address order. */
struct run {
    char *p;
    size_t size;
    int state;
};

struct chunk {
    char *base;
    size_t size;
    struct run *runs;
    size_t n, cap;
};

struct nn__graph_mem {
    struct chunk *chunks;
    size_t nchunks, capchunks;
    void **adopted; /* pool blocks from before the capture, freed inside it */
    size_t nadopted, capadopted;
    size_t bytes;           /* the chunks' */
    size_t live, live_peak; /* bytes handed out and not freed during the capture; their peak */
    int sealed;             /* the capture ended: nothing is handed out or reused */
    int orphan; /* its graph is gone: chunks go back once no live block is left in them */
    struct nn__graph_mem *prev, *next;
};

nn_status nn__graph_mem_open(struct nn_ctx *ctx, const char *fn, struct nn__graph_mem **out)
{
    struct nn__graph_mem *m = nn__host_calloc(1, sizeof *m);
    if (!m) return NN__FAIL(ctx, NN_E_OOM_HOST, "%s: out of host memory", fn);
    m->next = ctx->graph_mem;
    if (m->next) m->next->prev = m;
    ctx->graph_mem = m;
    *out = m;
    return NN_OK;
}

void nn__graph_mem_seal(struct nn__graph_mem *m)
{
    m->sealed = 1;
}

static void unlink_mem(struct nn_ctx *ctx, struct nn__graph_mem *m)
{
    if (m->prev)
        m->prev->next = m->next;
    else
        ctx->graph_mem = m->next;
    if (m->next) m->next->prev = m->prev;
    nn__host_free(m->chunks);
    nn__host_free(m->adopted);
    nn__host_free(m);
}

/* Chunk i back to the pool (its runs forgotten). */
static void chunk_return(struct nn_ctx *ctx, struct nn__graph_mem *m, size_t i)
{
    struct nn__error_kept keep = nn__error_keep(ctx);
    (void)nn__dev_free_block(ctx, "nn_graph_free", m->chunks[i].base);
    nn__error_restore(ctx, &keep);
    nn__host_free(m->chunks[i].runs);
    m->bytes -= m->chunks[i].size;
    nn__mem_graph_count(ctx, -(long long)m->chunks[i].size);
    m->chunks[i] = m->chunks[--m->nchunks];
}

static int chunk_in_use(const struct chunk *c)
{
    for (size_t j = 0; j < c->n; j++)
        if (c->runs[j].state == B_LIVE) return 1;
    return 0;
}

/* An orphan gives back what no live block holds, and goes when nothing is left. */
static void orphan_settle(struct nn_ctx *ctx, struct nn__graph_mem *m)
{
    for (size_t i = m->nchunks; i-- > 0;)
        if (!chunk_in_use(&m->chunks[i])) chunk_return(ctx, m, i);
    if (!m->nchunks) unlink_mem(ctx, m);
}

void nn__graph_mem_orphan(struct nn_ctx *ctx, struct nn__graph_mem *m)
{
    if (!m) return;
    m->sealed = m->orphan = 1;
    struct nn__error_kept keep = nn__error_keep(ctx);
    for (size_t i = 0; i < m->nadopted; i++)
        (void)nn__dev_free_block(ctx, "nn_graph_free", m->adopted[i]);
    nn__error_restore(ctx, &keep);
    m->nadopted = 0;
    orphan_settle(ctx, m);
}

void nn__graph_mem_close_all(struct nn_ctx *ctx)
{
    while (ctx->graph_mem) {
        struct nn__graph_mem *m = ctx->graph_mem;
        nn__graph_mem_orphan(ctx, m);
        if (ctx->graph_mem != m) continue;
        while (m->nchunks)
            chunk_return(ctx, m, m->nchunks - 1);
        unlink_mem(ctx, m);
    }
}

static int grow(void **arr, size_t *cap, size_t n, size_t elem)
{
    if (n < *cap) return 0;
    size_t c = *cap ? 2 * *cap : 8;
    void *a = nn__host_realloc(*arr, c * elem);
    if (!a) return -1;
    *arr = a;
    *cap = c;
    return 0;
}

/* Split run i of c so that it is exactly size bytes, the rest a free run after it. */
static int split(struct chunk *c, size_t i, size_t size)
{
    if (c->runs[i].size == size) return 0;
    if (grow((void **)&c->runs, &c->cap, c->n, sizeof *c->runs)) return -1;
    memmove(c->runs + i + 2, c->runs + i + 1, (c->n - i - 1) * sizeof *c->runs);
    c->runs[i + 1] = (struct run){c->runs[i].p + size, c->runs[i].size - size, B_FREE};
    c->runs[i].size = size;
    c->n++;
    return 0;
}

/* Merge the free run i with free neighbours. */
static void coalesce(struct chunk *c, size_t i)
{
    if (i + 1 < c->n && c->runs[i + 1].state == B_FREE) {
        c->runs[i].size += c->runs[i + 1].size;
        memmove(c->runs + i + 1, c->runs + i + 2, (c->n - i - 2) * sizeof *c->runs);
        c->n--;
    }
    if (i > 0 && c->runs[i - 1].state == B_FREE) {
        c->runs[i - 1].size += c->runs[i].size;
        memmove(c->runs + i, c->runs + i + 1, (c->n - i - 1) * sizeof *c->runs);
        c->n--;
    }
}

/* The smallest free run of at least size: *ci, *ri; 0 when there is none. */
static int best_fit(const struct nn__graph_mem *m, size_t size, size_t *ci, size_t *ri)
{
    size_t best = SIZE_MAX;
    for (size_t i = 0; i < m->nchunks; i++)
        for (size_t j = 0; j < m->chunks[i].n; j++) {
            const struct run *r = &m->chunks[i].runs[j];
            if (r->state == B_FREE && r->size >= size && r->size < best) {
                best = r->size;
                *ci = i, *ri = j;
            }
        }
    return best != SIZE_MAX;
}

static nn_status new_chunk(struct nn_ctx *ctx, struct nn__graph_mem *m, const char *fn, size_t size)
{
    if (grow((void **)&m->chunks, &m->capchunks, m->nchunks, sizeof *m->chunks))
        return NN__FAIL(ctx, NN_E_OOM_HOST, "%s: out of host memory", fn);
    struct chunk c = {0};
    c.runs = nn__host_alloc(4 * sizeof *c.runs);
    if (!c.runs) return NN__FAIL(ctx, NN_E_OOM_HOST, "%s: out of host memory", fn);
    c.cap = 4;
    void *p;
    nn_status st = nn__dev_alloc_capturing(ctx, fn, size, &p, &size);
    if (st != NN_OK) {
        nn__host_free(c.runs);
        return st;
    }
    c.base = p;
    c.size = size;
    c.runs[0] = (struct run){p, size, B_FREE};
    c.n = 1;
    m->chunks[m->nchunks++] = c;
    m->bytes += size;
    nn__mem_graph_count(ctx, (long long)size);
    return NN_OK;
}

static size_t tail_free(const struct chunk *c)
{
    const struct run *last = &c->runs[c->n - 1];
    return last->state == B_FREE ? last->size : 0;
}

/* A run of size bytes at the end of a chunk grown in place (the pool's free memory after it), so
 * that a request no free run fits does not leave the chunks' free runs behind as waste: the chunk
 * whose trailing free run is longest (it needs the fewest bytes) is tried first. 1 with *ci, *ri
 * (the run, free, at least size bytes); 0 when no chunk can grow (a new chunk is needed). */
static int grow_chunk(struct nn_ctx *ctx, struct nn__graph_mem *m, size_t size, size_t *ci,
                      size_t *ri)
{
    size_t first = 0;
    for (size_t i = 1; i < m->nchunks; i++)
        if (tail_free(&m->chunks[i]) > tail_free(&m->chunks[first])) first = i;
    for (size_t k = 0; k < m->nchunks; k++) {
        size_t i = k == 0 ? first : k <= first ? k - 1 : k; /* first, then the others in order */
        struct chunk *c = &m->chunks[i];
        size_t tail = tail_free(c), now;
        /* room for the run first: a grown block must never go untracked */
        if (grow((void **)&c->runs, &c->cap, c->n, sizeof *c->runs)) return 0;
        if (!nn__dev_grow_block(ctx, c->base, size - tail, &now)) continue;
        size_t add = now - c->size;
        if (tail)
            c->runs[c->n - 1].size += add;
        else
            c->runs[c->n++] = (struct run){c->base + c->size, add, B_FREE};
        c->size = now;
        m->bytes += add;
        nn__mem_graph_count(ctx, (long long)add);
        *ci = i, *ri = c->n - 1;
        return 1;
    }
    return 0;
}

nn_status nn__graph_mem_alloc(struct nn_ctx *ctx, struct nn__graph_mem *m, const char *fn,
                              size_t bytes, void **out)
{
    *out = NULL;
    if (bytes == 0) return NN__FAIL(ctx, NN_E_INVALID_ARG, "%s: bytes must be > 0, got 0", fn);
    size_t size = nn__mem_round(bytes);
    if (!size) return NN__FAIL(ctx, NN_E_OOM_DEVICE, "%s: %zu bytes cannot be served", fn, bytes);
    size_t ci, ri;
    if (!best_fit(m, size, &ci, &ri) && !grow_chunk(ctx, m, size, &ci, &ri)) {
        NN__TRY(new_chunk(ctx, m, fn, size));
        ci = m->nchunks - 1, ri = 0;
    }
    struct chunk *c = &m->chunks[ci];
    if (split(c, ri, size)) return NN__FAIL(ctx, NN_E_OOM_HOST, "%s: out of host memory", fn);
    c->runs[ri].state = B_LIVE;
    m->live += size;
    if (m->live > m->live_peak) m->live_peak = m->live;
    *out = c->runs[ri].p;
    return NN_OK;
}

/* The run that starts at p in one of ctx's memories: 1 with *mo, *co, *ro; 0 when p lies in no
 * chunk; -1 when it lies in one but no run starts there. */
static int find(const struct nn_ctx *ctx, const void *p, struct nn__graph_mem **mo, size_t *co,
                size_t *ro)
{
    const char *q = p;
    for (struct nn__graph_mem *m = ctx->graph_mem; m; m = m->next)
        for (size_t i = 0; i < m->nchunks; i++) {
            const struct chunk *c = &m->chunks[i];
            if (q < c->base || q >= c->base + c->size) continue;
            for (size_t j = 0; j < c->n; j++)
                if (c->runs[j].p == q) {
                    *mo = m, *co = i, *ro = j;
                    return 1;
                }
            return -1;
        }
    return 0;
}

static int adopted_by(const struct nn_ctx *ctx, const void *p)
{
    for (struct nn__graph_mem *m = ctx->graph_mem; m; m = m->next)
        for (size_t i = 0; i < m->nadopted; i++)
            if (m->adopted[i] == p) return 1;
    return 0;
}

static nn_status bad(struct nn_ctx *ctx, const char *fn, const void *p, const char *why)
{
    return NN__FAIL(ctx, NN_E_BAD_POINTER, "%s: %p %s; nothing was changed", fn, p, why);
}

int nn__graph_mem_free(struct nn_ctx *ctx, const char *fn, void *p, nn_status *st)
{
    struct nn__graph_mem *m;
    size_t ci, ri;
    int found = find(ctx, p, &m, &ci, &ri);
    *st = NN_OK;
    if (found < 0) {
        *st = bad(ctx, fn, p, "lies inside a block of a graph's memory but does not start one");
        return 1;
    }
    if (found) {
        struct chunk *c = &m->chunks[ci];
        struct run *r = &c->runs[ri];
        if (r->state != B_LIVE) {
            *st = bad(ctx, fn, p, "is graph memory that was already freed");
        } else if (m->orphan) {
            r->state = B_RELEASED;
            orphan_settle(ctx, m);
        } else if (m->sealed) {
            r->state = B_RELEASED; /* every launch still uses it */
        } else {
            m->live -= r->size;
            r->state = B_FREE;
            coalesce(c, ri);
        }
        return 1;
    }
    if (adopted_by(ctx, p)) {
        *st = bad(ctx, fn, p, "was already freed (inside a graph capture, which keeps it)");
        return 1;
    }
    struct nn__capture *cap = ctx->capture;
    if (!cap) return 0;
    /* Allocated before the capture: the graph's launches use it, so it stays until the graph
     * goes. */
    if (!nn__dev_owns(ctx, p)) {
        *st = bad(ctx, fn, p, "was not allocated by nnprim's memory pool or was already freed");
        return 1;
    }
    m = cap->mem;
    if (grow((void **)&m->adopted, &m->capadopted, m->nadopted, sizeof *m->adopted)) {
        *st = NN__FAIL(ctx, NN_E_OOM_HOST, "%s: out of host memory", fn);
        return 1;
    }
    m->adopted[m->nadopted++] = p;
    return 1;
}

int nn__graph_mem_owns(const struct nn_ctx *ctx, const void *p)
{
    struct nn__graph_mem *m;
    size_t ci, ri;
    return find(ctx, p, &m, &ci, &ri) == 1 && m->chunks[ci].runs[ri].state == B_LIVE;
}

int nn__graph_mem_contains(const struct nn__graph_mem *m, const void *p, size_t bytes)
{
    const char *q = p;
    for (size_t i = 0; i < m->nchunks; i++) {
        const struct chunk *c = &m->chunks[i];
        if (q >= c->base && bytes <= c->size && (size_t)(q - c->base) <= c->size - bytes) return 1;
    }
    return 0;
}

size_t nn__graph_mem_bytes(const struct nn__graph_mem *m)
{
    return m->bytes;
}

size_t nn__graph_mem_live_peak(const struct nn__graph_mem *m)
{
    return m->live_peak;
}

/* Whole-step CUDA graphs (include/nnprim/graph.h, docs/GRAPHS.md): opening and closing a capture
 * on a context (core/capture.h), the graph's memory (mem/graph_mem.h), launches and their feeds.
 * This layer sits above the cuDNN one: it holds the context's plan cache while a graph may use its
 * objects, and orders launches with the buffers the context keeps across calls. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nn_config.h"

#include "nnprim/graph.h"

#include "core/alloc.h"
#include "core/capture.h"
#include "core/ctx.h"
#include "core/cuda_util.h"
#include "core/error.h"
#include "core/log.h"
#include "core/ptrset.h"
#include "graph/graph_internal.h"
#include "mem/graph_mem.h"
#if NN_HAVE_CUDNN
#include "cudnn/cache.h"
#include "cudnn/cudnn_ctx.h"
#endif

static struct nn__ptrset live = NN__PTRSET_INIT;

struct nn_graph {
    struct nn_ctx *ctx;
    unsigned long long id;
#if NN_HAVE_CUDNN
    cudaGraphExec_t exec;
    cudaEvent_t ready; /* recorded on the capture's stream after it: what launches elsewhere wait */
#endif
    unsigned long long capture_sid; /* the stream the capture recorded */
    void *last_stream;              /* the stream of the last launch (capture_sid's at first) */
    unsigned long long last_sid;
    uint64_t nodes, launches;
    struct nn__graph_mem *mem;
    struct nn__span *spans; /* every buffer the calls used, sorted by address: the feeds' dsts */
    size_t nspans;
    struct nn__watch watch; /* the spans outside the graph's memory */
    struct nn_graph *prev, *next;
};

/* A failure of the graph calls themselves (a misuse): recorded on ctx and the thread without
 * spoiling an open capture, which the misuse did not touch. */
static nn_status misuse(nn_ctx *ctx, nn_status st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static nn_status misuse(nn_ctx *ctx, nn_status st, const char *fmt, ...)
{
    char msg[NN_ERROR_MESSAGE_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    struct nn__capture *c = ctx ? ctx->capture : NULL;
    if (ctx) ctx->capture = NULL;
    NN__FAIL(ctx, st, "%s", msg);
    if (ctx) ctx->capture = c;
    return st;
}

nn_status nn_graph_capturing(const nn_ctx *ctx, int *out)
{
    if (!ctx) return NN__FAIL(NULL, NN_E_INVALID_ARG, "nn_graph_capturing: ctx must not be NULL");
    if (!out)
        return misuse((nn_ctx *)ctx, NN_E_INVALID_ARG, "nn_graph_capturing: out must not be NULL");
    *out = ctx->capture != NULL;
    return NN_OK;
}

/* A live graph of ctx (fn names the call in messages). */
static nn_status check_graph(nn_ctx *ctx, const char *fn, const nn_graph *g)
{
    if (!g) return misuse(ctx, NN_E_INVALID_ARG, "%s: graph must not be NULL", fn);
    if (!nn__ptrset_contains(&live, g))
        return misuse(ctx, NN_E_BAD_POINTER,
                      "%s: graph %p is not a live graph: freed already (nn_graph_free, or its "
                      "context was destroyed) or never made by nn_graph_end()",
                      fn, (const void *)g);
    if (g->ctx != ctx)
        return misuse(ctx, NN_E_INVALID_ARG,
                      "%s: graph %p was captured with context %p, not this one (%p); launch and "
                      "free it with its own",
                      fn, (const void *)g, (void *)g->ctx, (void *)ctx);
    return NN_OK;
}

static nn_status no_capture_open(nn_ctx *ctx, const char *fn)
{
    if (!ctx->capture) return NN_OK;
    return misuse(ctx, NN_E_GRAPH,
                  "%s: a capture is open on the context (nn_graph_begin): end it with "
                  "nn_graph_end() first",
                  fn);
}

nn_status nn_graph_get_info(const nn_graph *g, nn_graph_info *out)
{
    const char *fn = "nn_graph_get_info";
    if (!g) return NN__FAIL(NULL, NN_E_INVALID_ARG, "%s: graph must not be NULL", fn);
    if (!nn__ptrset_contains(&live, g))
        return NN__FAIL(NULL, NN_E_BAD_POINTER, "%s: graph %p is not a live graph", fn,
                        (const void *)g);
    if (!out) return misuse(g->ctx, NN_E_INVALID_ARG, "%s: out must not be NULL", fn);
    memset(out, 0, sizeof *out);
    out->id = g->id;
    out->nodes = g->nodes;
    out->memory_bytes = nn__graph_mem_bytes(g->mem);
    out->inputs = g->watch.n;
    out->launches = g->launches;
    return NN_OK;
}

#if NN_HAVE_CUDNN
/* ---------------------------------------------------------------------------------------------
 * Capture
 */

static nn_status check_stream(nn_ctx *ctx, const char *fn)
{
    cudaStream_t s = (cudaStream_t)ctx->stream;
    if (!ctx->stream_capturable)
        return misuse(ctx, NN_E_GRAPH,
                      "%s: the context's stream %p cannot be captured: it is %s; a capture needs a "
                      "stream made with cudaStreamNonBlocking (nn_ctx_set_stream)",
                      fn, (void *)s,
                      !s || s == cudaStreamLegacy ? "the legacy default stream"
                      : s == cudaStreamPerThread  ? "the per-thread default stream"
                                                  : "a blocking stream");
    enum cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
    if (cudaStreamIsCapturing(s, &cs) != cudaSuccess) (void)cudaGetLastError();
    if (cs != cudaStreamCaptureStatusNone)
        return misuse(ctx, NN_E_GRAPH,
                      "%s: the context's stream %p is being captured by someone else already", fn,
                      (void *)s);
    /* A failure of earlier work is sticky or pending: a capture would record on a broken
     * stream and report it far from its cause. */
    cudaError_t q = cudaStreamQuery(s);
    if (q != cudaSuccess && q != cudaErrorNotReady) {
        (void)cudaGetLastError();
        return misuse(ctx, NN_E_CUDA,
                      "%s: the context's stream reports a failure of earlier work (%s: %s); "
                      "nothing can be captured on it",
                      fn, cudaGetErrorName(q), cudaGetErrorString(q));
    }
    return NN_OK;
}

nn_status nn_graph_begin(nn_ctx *ctx)
{
    const char *fn = "nn_graph_begin";
    if (!ctx) return NN__FAIL(NULL, NN_E_INVALID_ARG, "%s: ctx must not be NULL", fn);
    if (!nn__ctx_on_gpu(ctx))
        return NN__FAIL(ctx, NN_E_UNSUPPORTED,
                        "%s: CUDA graphs need a cuDNN context; this context runs the reference "
                        "backend",
                        fn);
    if (ctx->capture)
        return misuse(ctx, NN_E_GRAPH,
                      "%s: a capture is already open on this context; captures do not nest "
                      "(nn_graph_end() closes it)",
                      fn);
    NN__TRY(check_stream(ctx, fn));
    struct nn__capture *c = nn__host_calloc(1, sizeof *c);
    if (!c) return NN__FAIL(ctx, NN_E_OOM_HOST, "%s: out of host memory", fn);
    nn_status st = nn__graph_mem_open(ctx, fn, &c->mem);
    if (st != NN_OK) {
        nn__host_free(c);
        return st;
    }
    /* Buffers the context keeps across calls are ordered here, on the host, for the whole
     * capture: its calls then find them last used on this stream and wait for nothing. */
    nn__cudnn_shared_enter(ctx);
    st = nn__stream_capture_begin(ctx);
    if (st != NN_OK) {
        nn__graph_mem_seal(c->mem);
        nn__graph_mem_orphan(ctx, c->mem);
        nn__host_free(c);
        return nn__error_in(ctx, fn);
    }
    nn__cache_hold(nn__cudnn_plan_cache(ctx));
    c->id = nn__capture_next_id();
    ctx->capture = c;
    return NN_OK;
}

static int span_cmp(const void *a, const void *b)
{
    const struct nn__span *x = a, *y = b;
    if (x->p != y->p) return (const char *)x->p < (const char *)y->p ? -1 : 1;
    return x->bytes < y->bytes ? 1 : x->bytes > y->bytes ? -1 : 0; /* the largest first */
}

/* The capture's spans sorted and merged per start address (the largest extent kept), and those
 * outside the graph's memory for the watch. */
static nn_status spans_of(nn_ctx *ctx, struct nn__capture *c, nn_graph *g)
{
    size_t n = 0;
    if (c->ntouched) qsort(c->touched, c->ntouched, sizeof *c->touched, span_cmp);
    for (size_t i = 0; i < c->ntouched; i++)
        if (!n || c->touched[n - 1].p != c->touched[i].p) c->touched[n++] = c->touched[i];
    g->spans = c->touched, g->nspans = n;
    c->touched = NULL;
    struct nn__span *w = n ? nn__host_calloc(n, sizeof *w) : NULL;
    if (n && !w) return NN__FAIL(ctx, NN_E_OOM_HOST, "nn_graph_end: out of host memory");
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (!nn__graph_mem_contains(g->mem, g->spans[i].p, g->spans[i].bytes)) w[k++] = g->spans[i];
    g->watch.spans = w, g->watch.n = k;
    return NN_OK;
}

static void capture_close(nn_ctx *ctx, struct nn__capture *c, int made)
{
    ctx->capture = NULL;
    nn__graph_mem_seal(c->mem);
    if (!made) {
        nn__graph_mem_orphan(ctx, c->mem);
        nn__cache_release(nn__cudnn_plan_cache(ctx));
    }
    nn__host_free(c->touched);
    nn__host_free(c);
}

static void graph_release(nn_graph *g)
{
    if (g->exec) (void)cudaGraphExecDestroy(g->exec);
    if (g->ready) (void)cudaEventDestroy(g->ready);
    (void)cudaGetLastError();
    nn__host_free(g->spans);
    nn__host_free(g->watch.spans);
    nn__host_free(g);
}

/* The graph of a capture that recorded no failure. */
static nn_status make_graph(nn_ctx *ctx, struct nn__capture *c, cudaGraph_t cg, nn_graph *g)
{
    const char *fn = "nn_graph_end";
    size_t nodes = 0;
    NN__TRY_IN(ctx, fn, NN__CUDA(ctx, cudaGraphGetNodes(cg, NULL, &nodes)));
    g->nodes = nodes;
    NN__TRY_IN(ctx, fn, NN__CUDA(ctx, cudaGraphInstantiate(&g->exec, cg, 0)));
    NN__TRY_IN(ctx, fn, NN__CUDA(ctx, cudaEventCreateWithFlags(&g->ready, cudaEventDisableTiming)));
    NN__TRY_IN(ctx, fn, NN__CUDA(ctx, cudaEventRecord(g->ready, (cudaStream_t)ctx->stream)));
    NN__TRY(spans_of(ctx, c, g));
    if (nn__ptrset_add(&live, g) != 0)
        return NN__FAIL(ctx, NN_E_OOM_HOST, "%s: out of host memory", fn);
    return NN_OK;
}

nn_status nn_graph_end(nn_ctx *ctx, nn_graph **out)
{
    const char *fn = "nn_graph_end";
    if (!ctx) return NN__FAIL(NULL, NN_E_INVALID_ARG, "%s: ctx must not be NULL", fn);
    if (!out) return misuse(ctx, NN_E_INVALID_ARG, "%s: out must not be NULL", fn);
    *out = NULL;
    struct nn__capture *c = ctx->capture;
    if (!c)
        return misuse(ctx, NN_E_GRAPH, "%s: no capture is open on this context (nn_graph_begin)",
                      fn);
    nn_status failed = c->refused;
    nn_error_info why = c->why;
    if (failed == NN_OK && c->touch_oom) {
        failed = NN_E_OOM_HOST;
        snprintf(why.message, sizeof why.message, "out of host memory for the buffers it uses");
    }
    ctx->capture = NULL; /* what follows is recorded as the end's own */
    cudaGraph_t cg;
    nn_status st = nn__stream_capture_end(ctx, NN_OK, &cg);
    nn_graph *g = NULL;
    if (failed != NN_OK) {
        st = NN__FAIL(ctx, NN_E_GRAPH, "%s: the capture failed: %s", fn, why.message);
    } else if (st == NN_OK) {
        g = nn__host_calloc(1, sizeof *g);
        if (!g) st = NN__FAIL(ctx, NN_E_OOM_HOST, "%s: out of host memory", fn);
    } else {
        st = nn__error_in(ctx, fn);
    }
    if (g) {
        g->ctx = ctx;
        g->id = c->id;
        g->mem = c->mem;
        g->capture_sid = g->last_sid = ctx->stream_id;
        g->last_stream = ctx->stream;
        st = make_graph(ctx, c, cg, g);
    }
    if (cg) (void)cudaGraphDestroy(cg);
    if (st != NN_OK && g) {
        graph_release(g);
        g = NULL;
    }
    capture_close(ctx, c, g != NULL);
    if (!g) return st;
    nn__watch_add(&g->watch);
    g->next = ctx->graph_list;
    if (g->next) g->next->prev = g;
    ctx->graph_list = g;
    if (nn__verbose(ctx))
        nn__log("graph g%llu captured: %llu nodes, %zu bytes of its own memory (at most %zu in "
                "use at once), %zu buffers from before the capture",
                g->id, (unsigned long long)g->nodes, nn__graph_mem_bytes(g->mem),
                nn__graph_mem_live_peak(g->mem), g->watch.n);
    *out = g;
    return NN_OK;
}

/* ---------------------------------------------------------------------------------------------
 * Launch and free
 */

/* ctx's stream waits for the graph's last launch (or its capture) when that was on another
 * stream; no host wait. */
static nn_status follow_last(nn_ctx *ctx, const char *fn, nn_graph *g)
{
    if (g->last_sid == ctx->stream_id) return NN_OK;
    if (g->launches) return nn__stream_follow(ctx, fn, &g->last_stream, &g->last_sid);
    /* before the first launch: the capture's stream, at the end of the capture */
    NN__TRY_IN(ctx, fn, NN__CUDA(ctx, cudaStreamWaitEvent((cudaStream_t)ctx->stream, g->ready, 0)));
    g->last_stream = ctx->stream;
    g->last_sid = ctx->stream_id;
    return NN_OK;
}

static const struct nn__span *span_at(const nn_graph *g, const void *p)
{
    size_t lo = 0, hi = g->nspans;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if ((const char *)g->spans[mid].p < (const char *)p)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < g->nspans && g->spans[lo].p == p ? &g->spans[lo] : NULL;
}

static nn_status check_feeds(nn_ctx *ctx, const char *fn, const nn_graph *g, const nn_graph_feed *f,
                             int n)
{
    if (n < 0) return misuse(ctx, NN_E_INVALID_ARG, "%s: n must be >= 0, got %d", fn, n);
    if (n > 0 && !f)
        return misuse(ctx, NN_E_INVALID_ARG, "%s: feeds must not be NULL when n = %d", fn, n);
    for (int i = 0; i < n; i++) {
        for (size_t r = 0; r < sizeof f[i].reserved / sizeof f[i].reserved[0]; r++)
            if (f[i].reserved[r])
                return misuse(ctx, NN_E_INVALID_ARG, "%s: feeds[%d].reserved[%zu] must be 0", fn, i,
                              r);
        if (!f[i].dst || !f[i].src)
            return misuse(ctx, NN_E_INVALID_ARG, "%s: feeds[%d].%s must not be NULL", fn, i,
                          f[i].dst ? "src" : "dst");
        const struct nn__span *s = span_at(g, f[i].dst);
        if (!s)
            return misuse(ctx, NN_E_INVALID_ARG,
                          "%s: feeds[%d].dst %p is not the start of a buffer the graph's calls "
                          "use (a tensor's data, device class targets)",
                          fn, i, f[i].dst);
        if (f[i].bytes != s->bytes)
            return misuse(ctx, NN_E_SHAPE,
                          "%s: feeds[%d].bytes must be %zu, the size of the buffer the graph was "
                          "captured with at dst, got %zu: data of another shape needs a graph "
                          "captured for that shape",
                          fn, i, s->bytes, f[i].bytes);
        const char *d = f[i].dst, *q = f[i].src;
        if (q < d + f[i].bytes && d < q + f[i].bytes)
            return misuse(ctx, NN_E_INVALID_ARG, "%s: feeds[%d].src overlaps feeds[%d].dst", fn, i,
                          i);
        for (int j = 0; j < i; j++)
            if (f[j].dst == f[i].dst)
                return misuse(ctx, NN_E_INVALID_ARG, "%s: feeds[%d].dst repeats feeds[%d].dst", fn,
                              i, j);
    }
    return NN_OK;
}

static nn_status launch(nn_ctx *ctx, const char *fn, nn_graph *g, const nn_graph_feed *f, int n)
{
    uint64_t t0 = nn__verbose(ctx) ? nn__now_ns() : 0;
    if (!ctx) return NN__FAIL(NULL, NN_E_INVALID_ARG, "%s: ctx must not be NULL", fn);
    NN__TRY(no_capture_open(ctx, fn));
    NN__TRY(check_graph(ctx, fn, g));
    const void *freed = atomic_load(&g->watch.freed);
    if (freed)
        return NN__FAIL(ctx, NN_E_GRAPH,
                        "%s: graph g%llu is stale: the buffer at %p that its calls use was freed "
                        "after the capture; capture the step again with buffers that live as "
                        "long as the graph",
                        fn, g->id, freed);
    NN__TRY(check_feeds(ctx, fn, g, f, n));
    cudaStream_t s = (cudaStream_t)ctx->stream;
    NN__TRY(follow_last(ctx, fn, g));
    for (int i = 0; i < n; i++)
        NN__TRY_IN(
            ctx, fn,
            NN__CUDA(ctx, cudaMemcpyAsync(f[i].dst, f[i].src, f[i].bytes, cudaMemcpyDefault, s)));
    nn__cudnn_shared_enter(ctx);
    nn_status st = NN__CUDA(ctx, cudaGraphLaunch(g->exec, s));
    nn__cudnn_shared_leave(ctx);
    if (st != NN_OK) return nn__error_in(ctx, fn);
    g->launches++;
    if (t0) {
        char shape[96];
        snprintf(shape, sizeof shape, "g%llu nodes=%llu feeds=%d", g->id,
                 (unsigned long long)g->nodes, n);
        nn__verbose_op(ctx, "graph_launch", "graph", "-", shape, t0);
    }
    return NN_OK;
}

nn_status nn_graph_launch(nn_ctx *ctx, nn_graph *g)
{
    return launch(ctx, "nn_graph_launch", g, NULL, 0);
}

nn_status nn_graph_launch_feeds(nn_ctx *ctx, nn_graph *g, const nn_graph_feed *feeds, int n)
{
    return launch(ctx, "nn_graph_launch_feeds", g, feeds, n);
}

/* Unlink and release g: its memory in the order of ctx's stream after its last launch. */
static void graph_drop(nn_ctx *ctx, nn_graph *g)
{
    struct nn__error_kept keep = nn__error_keep(ctx);
    if (follow_last(ctx, "nn_graph_free", g) != NN_OK)
        (void)cudaStreamSynchronize((cudaStream_t)g->last_stream);
    (void)cudaGetLastError();
    nn__error_restore(ctx, &keep);
    (void)nn__ptrset_remove(&live, g);
    nn__watch_remove(&g->watch);
    if (g->prev)
        g->prev->next = g->next;
    else
        ctx->graph_list = g->next;
    if (g->next) g->next->prev = g->prev;
    nn__graph_mem_orphan(ctx, g->mem);
    nn__cache_release(nn__cudnn_plan_cache(ctx));
    graph_release(g);
}

nn_status nn_graph_free(nn_ctx *ctx, nn_graph *g)
{
    const char *fn = "nn_graph_free";
    if (!ctx) return NN__FAIL(NULL, NN_E_INVALID_ARG, "%s: ctx must not be NULL", fn);
    if (!g) return NN_OK;
    NN__TRY(no_capture_open(ctx, fn));
    NN__TRY(check_graph(ctx, fn, g));
    graph_drop(ctx, g);
    return NN_OK;
}

void nn__graph_ctx_fini(nn_ctx *ctx)
{
    struct nn__capture *c = ctx->capture;
    if (c) {
        cudaGraph_t cg;
        ctx->capture = NULL;
        struct nn__error_kept keep = nn__error_keep(ctx);
        (void)nn__stream_capture_end(ctx, NN_OK, &cg);
        if (cg) (void)cudaGraphDestroy(cg);
        nn__error_restore(ctx, &keep);
        capture_close(ctx, c, 0);
    }
    while (ctx->graph_list)
        graph_drop(ctx, ctx->graph_list);
    nn__graph_mem_close_all(ctx);
}
#else
nn_status nn_graph_begin(nn_ctx *ctx)
{
    const char *fn = "nn_graph_begin";
    if (!ctx) return NN__FAIL(NULL, NN_E_INVALID_ARG, "%s: ctx must not be NULL", fn);
    return NN__FAIL(ctx, NN_E_UNSUPPORTED,
                    "%s: CUDA graphs need a cuDNN context; this build of nnprim has no cuDNN", fn);
}

nn_status nn_graph_end(nn_ctx *ctx, nn_graph **out)
{
    const char *fn = "nn_graph_end";
    if (!ctx) return NN__FAIL(NULL, NN_E_INVALID_ARG, "%s: ctx must not be NULL", fn);
    if (!out) return NN__FAIL(ctx, NN_E_INVALID_ARG, "%s: out must not be NULL", fn);
    *out = NULL;
    return NN__FAIL(ctx, NN_E_GRAPH, "%s: no capture is open on this context (nn_graph_begin)", fn);
}

nn_status nn_graph_launch(nn_ctx *ctx, nn_graph *g)
{
    if (!ctx) return NN__FAIL(NULL, NN_E_INVALID_ARG, "nn_graph_launch: ctx must not be NULL");
    return check_graph(ctx, "nn_graph_launch", g);
}

nn_status nn_graph_launch_feeds(nn_ctx *ctx, nn_graph *g, const nn_graph_feed *feeds, int n)
{
    (void)feeds, (void)n;
    if (!ctx)
        return NN__FAIL(NULL, NN_E_INVALID_ARG, "nn_graph_launch_feeds: ctx must not be NULL");
    return check_graph(ctx, "nn_graph_launch_feeds", g);
}

nn_status nn_graph_free(nn_ctx *ctx, nn_graph *g)
{
    if (!ctx) return NN__FAIL(NULL, NN_E_INVALID_ARG, "nn_graph_free: ctx must not be NULL");
    return g ? check_graph(ctx, "nn_graph_free", g) : NN_OK;
}

void nn__graph_ctx_fini(nn_ctx *ctx)
{
    (void)ctx;
}
#endif

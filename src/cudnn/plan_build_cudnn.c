#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "core/cuda_load.h"

#include "core/alloc.h"
#include "core/ctx.h"
#include "core/cuda_util.h"
#include "core/error.h"
#include "core/log.h"
#include "cudnn/cudnn_ctx.h"
#include "cudnn/plan_build_cudnn.h"
#include "mem/mem.h"

struct job {
    const struct nn__graph_kind *kind;
    const void *key; /* the copy after the struct */
    uint32_t id;     /* kind->cache->id */
    struct nn__cudnn_filter f;
    struct nn__engine_choice c;
    struct nn__plan_record fallback; /* json dropped; valid when has_fallback */
    int has_fallback; /* a call runs the quick alternate until this job's plan replaces it */
    int prebuild;     /* queued when a plan file loaded (no call was waiting for it) */
    /* Results, written by the worker. */
    struct nn__cudnn_plan *plan;
    nn_status status;
    char message[NN_ERROR_MESSAGE_MAX];
    double ms;      /* graph and plan, host wall time */
    double warm_ms; /* its run on the worker's stream (warm_launch), host wall time; -1: none */
    int n_io;       /* the graph's tensors, for the warm launch */
    int64_t io_uids[NN__CUDNN_UID_MAX];
    size_t io_bytes[NN__CUDNN_UID_MAX];
    struct job *next;
};

struct nn__plan_builder {
    struct nn_ctx *wctx; /* the worker's context: its handle and last error */
    unsigned fork_gen;   /* nn__cudnn_fork_generation() when the worker started */
    pthread_t thread;
    int started;
    pthread_mutex_t mu;
    pthread_cond_t wake; /* a job was queued, or stop */
    pthread_cond_t idle; /* a job finished */
    struct job *queue, *queue_tail, *done;
    struct job *current; /* the job the worker is building (taken off the queue), or NULL */
    cudaStream_t own;    /* the worker's stream for warm launches, or NULL (none then) */
    int stop;
    atomic_int done_count; /* jobs on the done list; read without the lock by collect */
};

/* Run a freshly built plan once on the worker's own stream, on scratch buffers of the graph's
 * sizes from the pool (their contents do not matter), and wait for it. CUDA loads a kernel's
 * module at its first launch by default, and some cuDNN engines' first launch in a process took
 * 2-19 ms on the H200: paid here, it is not paid by the call that first runs the plan. Returns 1
 * if it ran; 0 if it could not (no memory: the first call pays instead). */
static int warm_launch(struct nn_ctx *w, struct job *j)
{
    struct nn__cudnn_args args;
    memset(&args, 0, sizeof args);
    nn_status st = NN_OK;
    for (int i = 0; i < j->n_io && st == NN_OK; i++)
        st = nn__dev_alloc(w, j->io_bytes[i], &args.p[j->io_uids[i]]);
    if (st == NN_OK) st = nn__cudnn_plan_run(w, j->plan, &args);
    if (st == NN_OK) st = NN__CUDA(w, cudaStreamSynchronize((cudaStream_t)w->stream));
    for (int u = 1; u < NN__CUDNN_UID_MAX; u++)
        if (args.p[u]) nn__dev_free(w, args.p[u]);
    return st == NN_OK;
}

/* The worker's build: graph, plan, graph destroyed (the plan does not need it), then a warm
 * launch when the worker has its own stream. */
static void build(struct nn__plan_builder *b, struct job *j)
{
    struct nn_ctx *w = b->wctx;
    uint64_t t0 = nn__now_ns();
    struct nn__cudnn_graph *g = NULL;
    j->plan = NULL;
    j->status = nn__cudnn_graph_create(w, j->kind, j->key, &g);
    if (j->status == NN_OK) {
        j->n_io = nn__cudnn_graph_io(g, j->io_uids, j->io_bytes);
        j->status = nn__cudnn_plan_from_choice(w, g, &j->f, &j->c, &j->plan);
    }
    nn__cudnn_graph_destroy(g);
    if (j->status != NN_OK) snprintf(j->message, sizeof j->message, "%s", w->last_error.message);
    j->ms = (double)(nn__now_ns() - t0) / 1e6;
    j->warm_ms = -1;
    if (j->status == NN_OK && b->own) {
        uint64_t t1 = nn__now_ns();
        if (warm_launch(w, j)) j->warm_ms = (double)(nn__now_ns() - t1) / 1e6;
    }
}

static void *worker_main(void *arg)
{
    struct nn__plan_builder *b = arg;
    /* cuDNN takes the device from the calling thread; a failure shows up in the first build.
     * The worker's handle, created at its first build, runs warm launches on the worker's own
     * stream, never on the context's. */
    struct nn_ctx *w = b->wctx;
    void *parent_stream = w->stream;
    unsigned long long id = 0, parent_id = w->stream_id;
    if (cudaSetDevice(w->device) == cudaSuccess &&
        cudaStreamCreateWithFlags(&b->own, cudaStreamNonBlocking) == cudaSuccess &&
        cudaStreamGetId(b->own, &id) == cudaSuccess) {
        w->stream = b->own;
        w->stream_id = id;
        if (nn__mem_stream_ref(w) != NN_OK) {
            w->stream = parent_stream;
            w->stream_id = parent_id;
        }
    }
    if (b->own && w->stream != b->own) {
        cudaStreamDestroy(b->own);
        b->own = NULL;
    }
    (void)cudaGetLastError();
    pthread_mutex_lock(&b->mu);
    for (;;) {
        while (!b->stop && !b->queue)
            pthread_cond_wait(&b->wake, &b->mu);
        if (b->stop) break;
        struct job *j = b->queue;
        b->queue = j->next;
        if (!b->queue) b->queue_tail = NULL;
        b->current = j;
        pthread_mutex_unlock(&b->mu);
        build(b, j);
        pthread_mutex_lock(&b->mu);
        j->next = b->done;
        b->done = j;
        b->current = NULL;
        atomic_fetch_add(&b->done_count, 1);
        pthread_cond_broadcast(&b->idle);
    }
    pthread_mutex_unlock(&b->mu);
    return NULL;
}

static nn_status builder_new(struct nn_ctx *ctx, struct nn__plan_builder **out)
{
    struct nn__plan_builder *b = nn__host_calloc(1, sizeof *b);
    if (!b) return NN__FAIL(ctx, NN_E_OOM_HOST, "plan builder: out of host memory");
    nn_status st = nn__cudnn_worker_ctx_create(ctx, &b->wctx);
    if (st != NN_OK) {
        nn__host_free(b);
        return st;
    }
    pthread_mutex_init(&b->mu, NULL);
    pthread_cond_init(&b->wake, NULL);
    pthread_cond_init(&b->idle, NULL);
    atomic_init(&b->done_count, 0);
    b->fork_gen = nn__cudnn_fork_generation();
    int e = pthread_create(&b->thread, NULL, worker_main, b);
    if (e) {
        nn__plan_builder_free(b);
        return NN__FAIL(ctx, NN_E_INTERNAL, "plan builder: pthread_create failed: %s", strerror(e));
    }
    b->started = 1;
    *out = b;
    return NN_OK;
}

/* A new job for key, the builder started if need be; NULL on failure (the status in *st). */
static struct job *new_job(struct nn_ctx *ctx, const struct nn__graph_kind *kind, const void *key,
                           const struct nn__cudnn_filter *f, const struct nn__engine_choice *c,
                           nn_status *st)
{
    struct nn__plan_builder **slot = nn__cudnn_builder_slot(ctx);
    /* One allocation: the job and its copy of the key. */
    size_t head = (sizeof(struct job) + 15) & ~(size_t)15;
    struct job *j = nn__host_calloc(1, head + kind->cache->key_size);
    if (!j) {
        *st = NN__FAIL(ctx, NN_E_OOM_HOST, "plan builder: out of host memory");
        return NULL;
    }
    if (!*slot && (*st = builder_new(ctx, slot)) != NN_OK) {
        nn__host_free(j);
        return NULL;
    }
    memcpy((char *)j + head, key, kind->cache->key_size);
    j->kind = kind;
    j->key = (char *)j + head;
    j->id = kind->cache->id;
    j->f = *f;
    j->c = *c;
    *st = NN_OK;
    return j;
}

/* The job for key that is being built or queued, or NULL; *prev gets the queued job before it
 * (NULL when it is first, being built or not found). Called with the lock held. */
static int same_key(const struct job *j, const struct nn__graph_kind *kind, const void *key)
{
    return j->kind->cache == kind->cache && nn__cache_key_equal(kind->cache, j->key, key);
}

static struct job *pending(struct nn__plan_builder *b, const struct nn__graph_kind *kind,
                           const void *key, struct job **prev)
{
    *prev = NULL;
    if (b->current && same_key(b->current, kind, key)) return b->current;
    for (struct job *before = NULL, *j = b->queue; j; before = j, j = j->next)
        if (same_key(j, kind, key)) {
            *prev = before;
            return j;
        }
    return NULL;
}

/* Queue a job for key: fallback NULL is a prebuild (at the back, unless a job for key is
 * already queued or running); otherwise a call runs the quick alternate meanwhile: the job goes
 * to the front, or the pending job for key moves there, and takes fallback. */
static nn_status enqueue(struct nn_ctx *ctx, const struct nn__graph_kind *kind, const void *key,
                         const struct nn__cudnn_filter *f, const struct nn__engine_choice *c,
                         const struct nn__plan_record *fallback)
{
    nn_status st;
    struct job *j = new_job(ctx, kind, key, f, c, &st);
    if (!j) return st;
    struct nn__plan_builder *b = *nn__cudnn_builder_slot(ctx);
    pthread_mutex_lock(&b->mu);
    struct job *prev, *p = pending(b, kind, key, &prev);
    if (p) {
        nn__host_free(j);
        j = p;
    } else {
        j->prebuild = !fallback;
    }
    if (fallback) {
        if (!p || prev) { /* to the front, a call is waiting for it (unless first or running) */
            if (prev) {
                prev->next = p->next;
                if (b->queue_tail == p) b->queue_tail = prev;
            }
            j->next = b->queue;
            b->queue = j;
            if (!b->queue_tail) b->queue_tail = j;
        }
        j->fallback = *fallback;
        j->fallback.json = NULL;
        j->fallback.json_len = 0;
        j->has_fallback = 1;
    } else if (!p) {
        if (b->queue_tail)
            b->queue_tail->next = j;
        else
            b->queue = j;
        b->queue_tail = j;
    }
    pthread_cond_signal(&b->wake);
    pthread_mutex_unlock(&b->mu);
    return NN_OK;
}

nn_status nn__plan_builder_submit(struct nn_ctx *ctx, const struct nn__graph_kind *kind,
                                  const void *key, const struct nn__cudnn_filter *f,
                                  const struct nn__engine_choice *c,
                                  const struct nn__plan_record *fallback)
{
    return enqueue(ctx, kind, key, f, c, fallback);
}

nn_status nn__plan_builder_prebuild(struct nn_ctx *ctx, const struct nn__graph_kind *kind,
                                    const void *key, const struct nn__cudnn_filter *f,
                                    const struct nn__engine_choice *c)
{
    return enqueue(ctx, kind, key, f, c, NULL);
}

/* One finished job into the cache; the job is freed. */
static void collect_one(struct nn_ctx *ctx, struct nn__cache *c, struct job *j)
{
    struct nn__error_kept keep = nn__error_keep(ctx);
    if (j->status == NN_OK) {
        const struct nn__plan_record *known;
        if (nn__plan_cache_replace_live(ctx, c, j->id, j->key, j->plan, NULL) == NN_OK) {
            /* In place of the quick alternate (or of the same plan, rebuilt by a call that did
             * not wait for prebuilding). */
            nn__plan_cache_note_build_ms(c, j->id, j->key, j->ms);
            if (j->has_fallback) {
                nn__cache_count(c, NN__PC_BACKGROUND_BUILT);
                if (nn__verbose(ctx))
                    nn__log("plan cache: tuned plan (engine %lld) built in the background in "
                            "%.1f ms replaces its quick alternate (engine %lld)",
                            (long long)j->c.engine, j->ms, (long long)j->fallback.tuned.engine);
            }
        } else if (j->prebuild && (known = nn__plan_cache_lookup_known(c, j->id, j->key)) &&
                   nn__plan_cache_insert(ctx, c, j->id, j->key, known, j->plan) == NN_OK) {
            /* No live plan: it goes live with the key's known record (gone if the cache was
             * cleared or the record dropped meanwhile). */
            nn__plan_cache_note_build_ms(c, j->id, j->key, j->ms);
            nn__cache_count(c, NN__PC_PREBUILT);
            if (nn__verbose(ctx) >= 2)
                nn__log("plan cache: plan (engine %lld) prebuilt in %.1f ms, first run on the "
                        "builder's stream %.1f ms (-1: none)",
                        (long long)j->c.engine, j->ms, j->warm_ms);
        } else {
            /* The key was evicted or the cache cleared meanwhile: its record is known again
             * (or gone), and the next miss rebuilds it. */
            nn__cudnn_plan_destroy(j->plan);
        }
    } else if (j->has_fallback) {
        nn__cache_count(c, NN__PC_BACKGROUND_FAILED);
        /* The tuned configuration no longer builds here: keep the alternate, and its record so
         * that a save does not hand the failure on. */
        nn__plan_cache_replace_live(ctx, c, j->id, j->key, NULL, &j->fallback);
        nn__warn(nn__verbose(ctx),
                 "plan cache: the tuned plan (engine %lld) did not build in the background, its "
                 "quick alternate (engine %lld) stays: %s",
                 (long long)j->c.engine, (long long)j->fallback.tuned.engine, j->message);
    } else {
        nn__cache_count(c, NN__PC_BACKGROUND_FAILED);
        if (nn__verbose(ctx))
            nn__log("plan cache: prebuilding a loaded record (engine %lld) failed; its first call "
                    "rebuilds or searches: %s",
                    (long long)j->c.engine, j->message);
    }
    nn__error_restore(ctx, &keep);
    nn__host_free(j);
}

void nn__plan_builder_collect(struct nn_ctx *ctx)
{
    struct nn__plan_builder *b = *nn__cudnn_builder_slot(ctx);
    if (!b || atomic_load(&b->done_count) == 0) return;
    pthread_mutex_lock(&b->mu);
    struct job *done = b->done;
    b->done = NULL;
    atomic_store(&b->done_count, 0);
    pthread_mutex_unlock(&b->mu);
    /* The list is newest first; swap oldest first. */
    struct job *rev = NULL;
    while (done) {
        struct job *n = done->next;
        done->next = rev;
        rev = done;
        done = n;
    }
    struct nn__cache *c = nn__cudnn_plan_cache(ctx);
    while (rev) {
        struct job *n = rev->next;
        collect_one(ctx, c, rev);
        rev = n;
    }
}

void nn__plan_builder_wait(struct nn_ctx *ctx)
{
    struct nn__plan_builder *b = *nn__cudnn_builder_slot(ctx);
    if (!b) return;
    pthread_mutex_lock(&b->mu);
    while (b->queue || b->current)
        pthread_cond_wait(&b->idle, &b->mu);
    pthread_mutex_unlock(&b->mu);
    nn__plan_builder_collect(ctx);
}

static void free_jobs(struct job *j)
{
    while (j) {
        struct job *n = j->next;
        nn__cudnn_plan_destroy(j->plan);
        nn__host_free(j);
        j = n;
    }
}

void nn__plan_builder_stop(struct nn__plan_builder *b)
{
    if (!b || !b->started) return;
    pthread_mutex_lock(&b->mu);
    b->stop = 1;
    free_jobs(b->queue);
    b->queue = b->queue_tail = NULL;
    pthread_cond_signal(&b->wake);
    pthread_mutex_unlock(&b->mu);
    pthread_join(b->thread, NULL);
    b->started = 0;
    free_jobs(b->done);
    b->done = NULL;
    atomic_store(&b->done_count, 0);
}

void nn__plan_builder_free(struct nn__plan_builder *b)
{
    if (!b) return;
    nn__plan_builder_stop(b);
    if (b->own) {
        /* Warm launches were waited for; the stream's cached blocks go to every stream. */
        nn__mem_stream_unref(b->wctx);
        cudaStreamDestroy(b->own);
    }
    pthread_cond_destroy(&b->idle);
    pthread_cond_destroy(&b->wake);
    pthread_mutex_destroy(&b->mu);
    nn__cudnn_worker_ctx_destroy(b->wctx);
    nn__host_free(b);
}

/* ---------------------------------------------------------------------------------------------
 * fork()
 */

static atomic_uint fork_count;
static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;

/* Async-signal-safe, as a child handler must be: one atomic increment. */
static void on_fork_child(void)
{
    atomic_fetch_add(&fork_count, 1);
}

static void register_atfork(void)
{
    /* Without the handler (ENOMEM) inherited contexts look like the child's own: destroying one
     * then behaves as before this mechanism existed, which the docs still warn about. */
    (void)pthread_atfork(NULL, NULL, on_fork_child);
}

unsigned nn__cudnn_fork_generation(void)
{
    pthread_once(&atfork_once, register_atfork);
    return atomic_load(&fork_count);
}

int nn__cudnn_ctx_inherited(const struct nn_ctx *ctx)
{
    return ctx->cudnn && ctx->cudnn->fork_gen != nn__cudnn_fork_generation();
}

static int on_list(const struct job *list, const struct job *j)
{
    for (; list; list = list->next)
        if (list == j) return 1;
    return 0;
}

/* Host memory only: the jobs and the builder's own block. Its plans, handle, stream, mutex and
 * condition variables (possibly held by the vanished worker) are left alone. The fork may have
 * caught the worker between two steps of moving a job (the lists are as it left them): a job
 * taken off the queue but not yet current is leaked, and the current job is freed only if it
 * is not on a list as well. */
static void builder_abandon(struct nn__plan_builder *b)
{
    if (!b) return;
    struct job *cur = b->current;
    if (cur && !on_list(b->queue, cur) && !on_list(b->done, cur)) nn__host_free(cur);
    struct job *lists[2] = {b->queue, b->done};
    for (int i = 0; i < 2; i++) {
        for (struct job *j = lists[i]; j;) {
            struct job *n = j->next;
            nn__host_free(j);
            j = n;
        }
    }
    if (b->wctx) {
        nn__host_free(b->wctx->cudnn);
        nn__host_free(b->wctx);
    }
    nn__host_free(b);
}

void nn__cudnn_ctx_abandon(struct nn_ctx *ctx)
{
    struct nn__cudnn_state *s = ctx->cudnn;
    if (!s) return;
    builder_abandon(s->builder);
    nn__cache_abandon(s->plans);
    nn__host_free(s);
    ctx->cudnn = NULL;
}

#include <stdlib.h>
#include <string.h>

#include "core/cuda_load.h"

#include "core/alloc.h"
#include "core/capture.h"
#include "core/ctx.h"
#include "core/cuda_util.h"
#include "core/error.h"
#include "core/log.h"
#include "cudnn/cudnn_ctx.h"
#include "cudnn/plan_build_cudnn.h"
#include "cudnn/plan_get_cudnn.h"
#include "mem/mem.h"

const char *nn__plan_source_name(enum nn__plan_source s)
{
    switch (s) {
    case NN__PLAN_HIT: return "hit";
    case NN__PLAN_REBUILT: return "rebuilt";
    case NN__PLAN_HEURISTIC: return "heuristic";
    case NN__PLAN_AUTOTUNED: return "autotuned";
    case NN__PLAN_QUICK: return "quick";
    }
    return "?";
}

int32_t nn__cudnn_ptr_alignment(const void *p)
{
    uintptr_t a = (uintptr_t)p;
    int32_t align = 16;
    while (align > 1 && (a & (uintptr_t)(align - 1)))
        align /= 2;
    return align;
}

static void count_search(struct nn__cache *c, const struct nn__cudnn_search_stats *s)
{
    for (int i = 0; i < s->heuristic_queries; i++)
        nn__cache_count(c, NN__PC_HEURISTIC_QUERY);
    for (int i = 0; i < s->plans_built; i++)
        nn__cache_count(c, NN__PC_PLAN_BUILT);
}

/* The record of a freshly built plan: engine, knobs, workspace, time, its quick alternate
 * (quick->engine -1: none), and its JSON form when the engine has one (the fallback of a later
 * rebuild). Its build time stays unknown (-1): this process has prepared the engine already, so
 * only a process that loads the record sees what a rebuild costs. *json is the caller's to
 * free. */
static nn_status record_of(struct nn_ctx *ctx, const struct nn__cudnn_plan *p, double time_us,
                           const struct nn__engine_choice *quick, struct nn__plan_record *r,
                           char **json)
{
    nn__plan_record_init(r);
    r->tuned = *nn__cudnn_plan_choice(p);
    r->workspace = (uint64_t)nn__cudnn_plan_workspace(p);
    r->time_us = time_us;
    if (quick->engine >= 0) r->quick = *quick;
    *json = NULL;
    size_t len = 0;
    struct nn__error_kept keep = nn__error_keep(ctx);
    nn_status st = nn__cudnn_plan_json(ctx, p, json, &len);
    if (st == NN_E_OOM_HOST) return st;
    if (st != NN_OK || len == 0 || len > NN__PLAN_JSON_MAX) {
        /* No JSON form for this engine: the record rebuilds from engine + knobs. */
        nn__error_restore(ctx, &keep);
        nn__host_free(*json);
        *json = NULL;
        return NN_OK;
    }
    r->json = *json;
    r->json_len = (uint32_t)len;
    return NN_OK;
}

/* A known record with a quick alternate, on a context that allows it (background builds on, not
 * deterministic: the calls before the swap run another engine): rebuild the alternate and queue
 * the tuned configuration on the background builder. NN_OK with *plan NULL: not taken (no
 * alternate, not allowed, or the alternate did not build; the failure is forgotten and the tuned
 * plan is rebuilt in the foreground). */
static nn_status start_quick(struct nn_ctx *ctx, struct nn__cache *c, const void *key,
                             const struct nn__cudnn_graph *g, const struct nn__cudnn_filter *f,
                             const struct nn__plan_record *known, struct nn__cudnn_plan **plan)
{
    *plan = NULL;
    if (known->quick.engine < 0 || !ctx->settings.background_builds || ctx->settings.deterministic)
        return NN_OK;
    struct nn__error_kept keep = nn__error_keep(ctx);
    struct nn__engine_choice qc = known->quick, tuned = known->tuned;
    uint64_t t0 = nn__now_ns();
    nn_status st = nn__cudnn_plan_from_choice(ctx, g, f, &qc, plan);
    double quick_ms = (double)(nn__now_ns() - t0) / 1e6;
    if (st == NN_OK) {
        struct nn__plan_record fallback;
        nn__plan_record_init(&fallback);
        fallback.tuned = qc;
        fallback.workspace = (uint64_t)nn__cudnn_plan_workspace(*plan);
        fallback.build_ms = quick_ms;
        st = nn__plan_builder_submit(ctx, nn__cudnn_graph_kind(g), key, f, &tuned, &fallback);
    }
    if (st == NN_E_OOM_HOST) {
        nn__cudnn_plan_destroy(*plan);
        *plan = NULL;
        return st;
    }
    if (st != NN_OK) {
        if (nn__verbose(ctx))
            nn__log("plan cache: quick alternate (engine %lld) not used: %s", (long long)qc.engine,
                    ctx->last_error.message);
        nn__cudnn_plan_destroy(*plan);
        *plan = NULL;
        nn__error_restore(ctx, &keep);
        return NN_OK;
    }
    nn__cache_count(c, NN__PC_REBUILT);
    nn__cache_count(c, NN__PC_QUICK);
    if (nn__verbose(ctx) >= 2)
        nn__log("plan cache: quick alternate engine %lld rebuilt in %.3f ms; tuned engine %lld "
                "(slowest rebuild seen %.1f ms, -1 = none yet) queued for the background",
                (long long)qc.engine, quick_ms, (long long)tuned.engine, known->build_ms);
    return NN_OK;
}

/* Rebuild a known record: engine + knobs, else its JSON when there is one. The record is
 * copied into *out (json duplicated into *json, the caller's to free), because inserting the
 * rebuilt plan supersedes the cache's copy. NN_OK with *plan NULL: the record no longer builds
 * (it is dropped, and the failure forgotten). */
static nn_status rebuild_known(struct nn_ctx *ctx, struct nn__cache *c, const void *key,
                               const struct nn__cudnn_graph *g, const struct nn__cudnn_filter *f,
                               struct nn__cudnn_plan **plan, struct nn__plan_record *out,
                               char **json, int *quick)
{
    *plan = NULL;
    *json = NULL;
    *quick = 0;
    uint32_t kind = nn__cudnn_graph_kind(g)->cache->id;
    const struct nn__plan_record *known = nn__plan_cache_lookup_known(c, kind, key);
    if (!known) return NN_OK;
    *out = *known;
    out->json = NULL;
    out->json_len = 0;
    if (known->json_len) {
        *json = nn__host_alloc((size_t)known->json_len + 1);
        if (!*json)
            return NN__FAIL(ctx, NN_E_OOM_HOST, "plan cache: out of host memory for a record");
        memcpy(*json, known->json, known->json_len);
        (*json)[known->json_len] = 0;
        out->json = *json;
        out->json_len = known->json_len;
    }
    NN__TRY(start_quick(ctx, c, key, g, f, out, plan));
    if (*plan) {
        *quick = 1;
        return NN_OK;
    }
    struct nn__error_kept keep = nn__error_keep(ctx);
    uint64_t t0 = nn__now_ns();
    /* Engine and knobs first, the robust form (ARCHITECTURE.md). The JSON was meant as the fast
     * path, but on the H200 (cuDNN 9.14) it was no faster: 47 ms against 46-76 ms for the same
     * runtime-compiled configuration, which cuDNN compiles at finalization either way. It stays
     * as the fallback for a record whose engine index no longer resolves. */
    const char *how = "engine and knobs";
    nn_status st = nn__cudnn_plan_from_choice(ctx, g, f, &out->tuned, plan);
    if (st != NN_OK && st != NN_E_OOM_HOST && *json) {
        how = "JSON";
        st = nn__cudnn_plan_from_json(ctx, g, f, *json, out->json_len, plan);
    }
    if (st == NN_E_OOM_HOST) return st;
    if (st != NN_OK) {
        if (nn__verbose(ctx))
            nn__log("plan cache: known record (engine %lld) no longer builds, dropped: %s",
                    (long long)out->tuned.engine, ctx->last_error.message);
        nn__error_restore(ctx, &keep);
        nn__plan_cache_drop_known(c, kind, key);
        *plan = NULL;
        return NN_OK;
    }
    out->workspace = (uint64_t)nn__cudnn_plan_workspace(*plan);
    double ms = (double)(nn__now_ns() - t0) / 1e6;
    if (ms > out->build_ms) out->build_ms = ms; /* the slowest seen: a fresh process's */
    nn__cache_count(c, NN__PC_REBUILT);
    if (nn__verbose(ctx) >= 2)
        nn__log("plan cache: engine %lld rebuilt from its %s in %.3f ms (workspace %llu bytes)",
                (long long)out->tuned.engine, how, ms, (unsigned long long)out->workspace);
    return NN_OK;
}

/* ---------------------------------------------------------------------------------------------
 * Autotune
 */

static int cmp_float(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

/* Scratch for autotune: the largest workspace of the candidates and a copy of the output. */
struct tune_scratch {
    void *ws, *out;
    cudaEvent_t *ev; /* a start and a stop event per candidate */
    int nev;
    float *samples; /* NN__AUTOTUNE_RUNS per candidate, milliseconds */
};

static nn_status scratch_init(struct nn_ctx *ctx, struct nn__cudnn_plan **plans, int n,
                              const struct nn__plan_args *a, struct tune_scratch *sc)
{
    memset(sc, 0, sizeof *sc);
    int64_t ws = 0;
    for (int i = 0; i < n; i++)
        if (nn__cudnn_plan_workspace(plans[i]) > ws) ws = nn__cudnn_plan_workspace(plans[i]);
    if (ws > 0) NN__TRY(nn__dev_alloc(ctx, (size_t)ws, &sc->ws));
    if (a->out_bytes) {
        NN__TRY(nn__dev_alloc(ctx, a->out_bytes, &sc->out));
        /* A blending graph reads its output: give it the caller's values, never NaN garbage. */
        NN__TRY(
            NN__CUDA(ctx, cudaMemcpyAsync(sc->out, a->args.p[a->out_uid], a->out_bytes,
                                          cudaMemcpyDeviceToDevice, (cudaStream_t)ctx->stream)));
    }
    sc->ev = nn__host_calloc((size_t)n * 2, sizeof *sc->ev);
    sc->samples = nn__host_calloc((size_t)n * NN__AUTOTUNE_RUNS, sizeof *sc->samples);
    if (!sc->ev || !sc->samples)
        return NN__FAIL(ctx, NN_E_OOM_HOST, "autotune: out of host memory");
    for (; sc->nev < 2 * n; sc->nev++)
        NN__TRY(NN__CUDA(ctx, cudaEventCreate(&sc->ev[sc->nev])));
    return NN_OK;
}

static void scratch_fini(struct nn_ctx *ctx, struct tune_scratch *sc)
{
    struct nn__error_kept keep = nn__error_keep(ctx);
    for (int i = 0; i < sc->nev; i++)
        cudaEventDestroy(sc->ev[i]);
    nn__host_free(sc->ev);
    nn__host_free(sc->samples);
    nn__dev_free(ctx, sc->ws);
    nn__dev_free(ctx, sc->out);
    nn__error_restore(ctx, &keep);
}

/* A candidate's run failed: remember the first failure; a failure that may have broken the
 * stream (out of memory, CUDA) ends the whole autotune. */
static void candidate_failed(struct nn_ctx *ctx, nn_status rs, nn_status *st, nn_status *first,
                             nn_error_info *first_info)
{
    if (*first == NN_OK) {
        *first = rs;
        *first_info = ctx->last_error;
    }
    if (rs == NN_E_OOM_HOST || rs == NN_E_CUDA) *st = rs;
}

/* Time every candidate; *best gets the fastest (the others are destroyed), *besti its index,
 * and ch[0..n) and t[0..n) what each candidate was and took. Each candidate runs once as a warm-up,
 * then NN__AUTOTUNE_RUNS rounds run every candidate once, back to back, each between its own event
 * pair, starting each round at the next candidate: clock changes and the host's launch cost
 * fall on all candidates alike. A candidate slower than NN__AUTOTUNE_DROP times the fastest in
 * the first round runs no further rounds (it cannot win, and the slowest candidates, often 10 to
 * 50 times the fastest, would otherwise take most of the autotune time). A candidate's time is
 * the median of its rounds. A candidate that fails to run is skipped; if none runs, the first
 * failure is returned. */
static nn_status autotune(struct nn_ctx *ctx, struct nn__cudnn_plan **plans, int n,
                          const struct nn__plan_args *a, struct nn__cudnn_plan **best,
                          double *best_us, struct nn__engine_choice *ch,
                          struct nn__plan_candidate *t, int *besti)
{
    struct tune_scratch sc;
    nn_status st = scratch_init(ctx, plans, n, a, &sc);
    struct nn__cudnn_args args = a->args;
    if (a->out_bytes) args.p[a->out_uid] = sc.out;
    cudaStream_t s = (cudaStream_t)ctx->stream;
    *besti = -1;
    nn_status first_fail = NN_OK;
    nn_error_info fail_info = ctx->last_error;
    for (int i = 0; i < n; i++) {
        ch[i] = *nn__cudnn_plan_choice(plans[i]);
        t[i].engine = ch[i].engine;
        t[i].workspace = nn__cudnn_plan_workspace(plans[i]);
        t[i].time_us = -1;
        t[i].rtc = nn__cudnn_plan_runtime_compiled(plans[i]);
    }
    int *ok = st == NN_OK ? nn__host_calloc((size_t)n, sizeof *ok) : NULL;
    if (st == NN_OK && !ok) st = NN__FAIL(ctx, NN_E_OOM_HOST, "autotune: out of host memory");
    for (int i = 0; st == NN_OK && i < n; i++) {
        nn_status rs = nn__cudnn_plan_execute(ctx, plans[i], &args, sc.ws);
        ok[i] = rs == NN_OK;
        if (rs != NN_OK) candidate_failed(ctx, rs, &st, &first_fail, &fail_info);
    }
    if (st == NN_OK) st = NN__CUDA(ctx, cudaStreamSynchronize(s));
    int rounds = 0; /* rounds every candidate still in ok[] has run */
    for (int r = 0; st == NN_OK && r < NN__AUTOTUNE_RUNS; r++) {
        if (r == 1) nn__autotune_drop_slow(ok, sc.samples, NN__AUTOTUNE_RUNS, n, NN__AUTOTUNE_DROP);
        for (int k = 0; st == NN_OK && k < n; k++) {
            int i = (k + r) % n;
            if (ok[i] != 1) continue;
            st = NN__CUDA(ctx, cudaEventRecord(sc.ev[2 * i], s));
            if (st != NN_OK) break;
            nn_status rs = nn__cudnn_plan_execute(ctx, plans[i], &args, sc.ws);
            if (rs != NN_OK) {
                ok[i] = 0;
                candidate_failed(ctx, rs, &st, &first_fail, &fail_info);
                continue;
            }
            st = NN__CUDA(ctx, cudaEventRecord(sc.ev[2 * i + 1], s));
        }
        if (st == NN_OK) st = NN__CUDA(ctx, cudaStreamSynchronize(s));
        for (int i = 0; st == NN_OK && i < n; i++)
            if (ok[i] == 1)
                st = NN__CUDA(ctx, cudaEventElapsedTime(&sc.samples[i * NN__AUTOTUNE_RUNS + r],
                                                        sc.ev[2 * i], sc.ev[2 * i + 1]));
        if (st == NN_OK) rounds = r + 1;
    }
    for (int i = 0; st == NN_OK && i < n; i++) {
        if (!ok[i]) continue;
        int runs = ok[i] == 1 ? rounds : 1;
        float *v = &sc.samples[i * NN__AUTOTUNE_RUNS];
        qsort(v, (size_t)runs, sizeof *v, cmp_float);
        double us = (double)v[runs / 2] * 1000.0;
        t[i].time_us = us;
        if (nn__verbose(ctx) >= 2)
            nn__log("autotune: candidate %d engine %lld%s: %.2f us (workspace %lld bytes%s)", i,
                    (long long)t[i].engine, t[i].rtc ? " (runtime-compiled)" : "", us,
                    (long long)t[i].workspace, runs == 1 ? "; one round: too slow" : "");
        if (*besti < 0 || us < *best_us) {
            *besti = i;
            *best_us = us;
        }
    }
    nn__host_free(ok);
    if (st == NN_OK && *besti < 0) {
        st = first_fail;
        nn__error_put(ctx, &fail_info);
    }
    scratch_fini(ctx, &sc);
    *best = NULL;
    for (int i = 0; i < n; i++) {
        if (st == NN_OK && i == *besti)
            *best = plans[i];
        else
            nn__cudnn_plan_destroy(plans[i]);
    }
    return st;
}

/* ---------------------------------------------------------------------------------------------
 * Search on a miss
 */

/* The first precompiled engine config in heuristic order (not timed: a quick alternate only
 * answers the calls before the tuned plan is built). */
static int first_precompiled(struct nn_ctx *ctx, const struct nn__cudnn_graph *g,
                             const struct nn__cudnn_filter *f, struct nn__engine_choice *out,
                             struct nn__cache *c)
{
    struct nn__error_kept keep = nn__error_keep(ctx);
    struct nn__cudnn_filter pf = *f;
    pf.precompiled_only = 1;
    struct nn__cudnn_plan *p = NULL;
    int n = 0;
    struct nn__cudnn_search_stats ss;
    memset(&ss, 0, sizeof ss);
    int found = nn__cudnn_plan_candidates(ctx, g, &pf, 1, &p, &n, &ss) == NN_OK && n == 1;
    count_search(c, &ss);
    if (found) *out = *nn__cudnn_plan_choice(p);
    nn__cudnn_plan_destroy(p);
    nn__error_restore(ctx, &keep);
    return found;
}

/* The quick alternate of the tuned candidate besti: the first in nn__plan_quick_order() (the
 * fastest other engine that is not runtime-compiled, preferring those that need no more
 * workspace); if there is none and the tuned engine is
 * runtime-compiled, the first precompiled config in heuristic order. quick->engine -1: none.
 * Whether a process uses it is decided when it rebuilds the record (start_quick). */
static nn_status choose_quick(struct nn_ctx *ctx, struct nn__cache *c,
                              const struct nn__cudnn_graph *g, const struct nn__cudnn_filter *f,
                              const struct nn__engine_choice *ch,
                              const struct nn__plan_candidate *t, int n, int besti,
                              struct nn__engine_choice *quick)
{
    quick->engine = -1;
    quick->knob_count = 0;
    int *order = nn__host_alloc((size_t)n * sizeof *order);
    if (!order) return NN__FAIL(ctx, NN_E_OOM_HOST, "autotune: out of host memory");
    struct nn__engine_choice pre;
    if (nn__plan_quick_order(t, n, besti, order) > 0)
        *quick = ch[order[0]];
    else if (t[besti].rtc && first_precompiled(ctx, g, f, &pre, c))
        *quick = pre;
    nn__host_free(order);
    if (nn__verbose(ctx) >= 2)
        nn__log("autotune: tuned engine %lld%s, quick alternate: %s%lld",
                (long long)t[besti].engine, t[besti].rtc ? " (runtime-compiled)" : "",
                quick->engine >= 0 ? "engine " : "none ", (long long)quick->engine);
    return NN_OK;
}

static nn_status search(struct nn_ctx *ctx, struct nn__cache *c, const struct nn__cudnn_graph *g,
                        const struct nn__cudnn_filter *f, const struct nn__plan_args *a,
                        struct nn__cudnn_plan **plan, double *time_us,
                        struct nn__engine_choice *quick, enum nn__plan_source *src)
{
    struct nn__cudnn_search_stats ss;
    memset(&ss, 0, sizeof ss);
    *time_us = -1;
    *plan = NULL;
    quick->engine = -1;
    quick->knob_count = 0;
    if (ctx->settings.tuning != NN_TUNING_AUTOTUNE) {
        nn_status st = nn__cudnn_plan_heuristic(ctx, g, f, plan, &ss);
        count_search(c, &ss);
        *src = NN__PLAN_HEURISTIC;
        return st;
    }
    int max = ctx->settings.autotune_candidates > 0 ? ctx->settings.autotune_candidates : 1;
    struct nn__cudnn_plan **cand = nn__host_calloc((size_t)max, sizeof *cand);
    if (!cand) return NN__FAIL(ctx, NN_E_OOM_HOST, "autotune: out of host memory");
    uint64_t t0 = nn__now_ns();
    int n = 0;
    nn_status st = nn__cudnn_plan_candidates(ctx, g, f, max, cand, &n, &ss);
    count_search(c, &ss);
    struct nn__plan_candidate *t = st == NN_OK ? nn__host_calloc((size_t)n, sizeof *t) : NULL;
    struct nn__engine_choice *ch = st == NN_OK ? nn__host_calloc((size_t)n, sizeof *ch) : NULL;
    if (st == NN_OK && (!t || !ch)) {
        for (int i = 0; i < n; i++)
            nn__cudnn_plan_destroy(cand[i]);
        st = NN__FAIL(ctx, NN_E_OOM_HOST, "autotune: out of host memory");
    }
    int besti = -1;
    if (st == NN_OK) st = autotune(ctx, cand, n, a, plan, time_us, ch, t, &besti);
    nn__host_free(cand);
    if (st == NN_OK) st = choose_quick(ctx, c, g, f, ch, t, n, besti, quick);
    if (st != NN_OK && *plan) {
        nn__cudnn_plan_destroy(*plan);
        *plan = NULL;
    }
    nn__host_free(t);
    nn__host_free(ch);
    if (st == NN_OK) nn__cache_count_autotune(c, nn__now_ns() - t0);
    *src = NN__PLAN_AUTOTUNED;
    return st;
}

struct nn__cudnn_plan *nn__cudnn_plan_lookup(struct nn_ctx *ctx, const struct nn__graph_kind *kind,
                                             const void *key)
{
    nn__plan_builder_collect(ctx);
    return nn__plan_cache_lookup(nn__cudnn_plan_cache(ctx), kind->cache->id, key, NULL);
}

/* ---------------------------------------------------------------------------------------------
 * Prebuilding loaded records
 */

struct prebuild_walk {
    struct nn_ctx *ctx;
    struct nn__cache *c;
    struct nn__cache_settings now; /* the context's */
    size_t room;                   /* plans the cache can still take */
    int queued;                    /* jobs queued */
    nn_status fail;                /* why queuing stopped, NN_OK if it did not */
};

/* The context's graph kind whose plans are entries of cache kind id, or NULL (entries that are
 * no graph plans). */
static const struct nn__graph_kind *graph_kind_of(const struct nn_ctx *ctx, uint32_t id)
{
    const struct nn__cudnn_state *s = ctx->cudnn;
    for (int i = 0; i < s->n_graph_kinds; i++)
        if (s->graph_kinds[i]->cache->id == id) return s->graph_kinds[i];
    return NULL;
}

static int prebuild_one(void *arg, const struct nn__cache_kind *ck, const void *key,
                        const struct nn__cache_view *v)
{
    struct prebuild_walk *w = arg;
    if ((size_t)w->queued >= w->room) return 1;
    const struct nn__graph_kind *kind = graph_kind_of(w->ctx, ck->id);
    if (!kind || (kind->has_graph && !kind->has_graph(key))) return 0;
    struct nn__cache_settings s;
    kind->settings(key, &s);
    if (!nn__cache_settings_equal(&s, &w->now) || nn__plan_cache_is_live(w->c, ck->id, key))
        return 0;
    struct nn__cudnn_filter f;
    nn__cudnn_filter_from_ctx(w->ctx, kind->data_dtype(key), &f);
    const struct nn__plan_record *rec = v->record;
    w->fail = nn__plan_builder_prebuild(w->ctx, kind, key, &f, &rec->tuned);
    if (w->fail != NN_OK) return 1;
    w->queued++;
    return 0;
}

void nn__cudnn_plan_prebuild(struct nn_ctx *ctx)
{
    if (!ctx->settings.background_builds || !ctx->settings.prebuild_plans) return;
    struct nn__cache *c = nn__cudnn_plan_cache(ctx);
    size_t cap = (size_t)nn__cache_capacity(c), live = nn__cache_size(c);
    struct prebuild_walk w = {ctx, c, {0}, cap > live ? cap - live : 0, 0, NN_OK};
    nn__cache_settings_fill(ctx, &w.now);
    struct nn__error_kept keep = nn__error_keep(ctx);
    nn__cache_visit(c, prebuild_one, &w);
    if (nn__verbose(ctx)) {
        if (w.fail != NN_OK)
            nn__log("plan cache: prebuilding stopped after %d plans, the rest build when first "
                    "needed: %s",
                    w.queued, ctx->last_error.message);
        else
            nn__log("plan cache: %d plans of the loaded file queued for prebuilding", w.queued);
    }
    nn__error_restore(ctx, &keep);
}

nn_status nn__cudnn_plan_get(struct nn_ctx *ctx, const struct nn__graph_kind *kind, const void *key,
                             const struct nn__plan_args *a, struct nn__cudnn_plan **plan,
                             enum nn__plan_source *src)
{
    struct nn__cache *c = nn__cudnn_plan_cache(ctx);
    *plan = nn__cudnn_plan_lookup(ctx, kind, key);
    if (*plan) {
        *src = NN__PLAN_HIT;
        return NN_OK;
    }
    NN__TRY(nn__capture_no_build(ctx, NULL, "the execution plan of this call's shape"));

    struct nn__cudnn_graph *g;
    NN__TRY(nn__cudnn_graph_create(ctx, kind, key, &g));
    struct nn__cudnn_filter f;
    nn__cudnn_filter_from_ctx(ctx, kind->data_dtype(key), &f);
    struct nn__cudnn_plan *p = NULL;
    struct nn__plan_record rec;
    char *json = NULL;
    int quick;
    nn_status st = rebuild_known(ctx, c, key, g, &f, &p, &rec, &json, &quick);
    if (st == NN_OK && p) {
        *src = quick ? NN__PLAN_QUICK : NN__PLAN_REBUILT;
    } else if (st == NN_OK) {
        double us;
        struct nn__engine_choice qc;
        st = search(ctx, c, g, &f, a, &p, &us, &qc, src);
        if (st == NN_OK) st = record_of(ctx, p, us, &qc, &rec, &json);
    }
    nn__cudnn_graph_destroy(g);
    if (st == NN_OK) st = nn__plan_cache_insert(ctx, c, kind->cache->id, key, &rec, p);
    nn__host_free(json);
    if (st != NN_OK) {
        nn__cudnn_plan_destroy(p);
        return st;
    }
    *plan = p;
    return NN_OK;
}

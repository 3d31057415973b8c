/* The in-memory plan cache: one chained hash table of live plans threaded on an LRU list, and a
 * second table of known records (loaded from files, or evicted). Also the public nn_plan_cache_*
 * entry points, which exist in every build. */
#include <math.h>
#include <string.h>

#include "nn_config.h"

#include "core/alloc.h"
#include "core/ctx.h"
#include "core/error.h"
#include "cudnn/cudnn_ctx.h"
#include "cudnn/plan_cache.h"
#if NN_HAVE_CUDNN
#include "cudnn/plan_build_cudnn.h"
#endif

/* ---------------------------------------------------------------------------------------------
 * Keys
 */

void nn__plan_key_init(struct nn__plan_key *k)
{
    memset(k, 0, sizeof *k);
}

static uint64_t bits_of(double v)
{
    uint64_t u;
    memcpy(&u, &v, sizeof u);
    return u;
}

static int tensor_equal(const struct nn__key_tensor *a, const struct nn__key_tensor *b)
{
    if (a->rank != b->rank) return 0;
    if (a->rank == 0) return 1;
    if (a->dtype != b->dtype || a->alignment != b->alignment) return 0;
    for (int i = 0; i < a->rank && i < NN_MAX_RANK; i++)
        if (a->dims[i] != b->dims[i] || a->strides[i] != b->strides[i]) return 0;
    return 1;
}

static int params_equal(const struct nn__key_params *a, const struct nn__key_params *b)
{
    if (a->spatial_rank != b->spatial_rank || a->groups != b->groups || a->mode != b->mode ||
        a->activation != b->activation || a->pool_mode != b->pool_mode || a->flags != b->flags ||
        bits_of(a->alpha) != bits_of(b->alpha) || bits_of(a->beta) != bits_of(b->beta))
        return 0;
    for (int i = 0; i < a->spatial_rank && i < NN__KEY_SPATIAL_MAX; i++)
        if (a->stride[i] != b->stride[i] || a->dilation[i] != b->dilation[i] ||
            a->pad_lo[i] != b->pad_lo[i] || a->pad_hi[i] != b->pad_hi[i] ||
            a->window[i] != b->window[i])
            return 0;
    return 1;
}

int nn__plan_key_equal(const struct nn__plan_key *a, const struct nn__plan_key *b)
{
    if (a->op != b->op || a->compute != b->compute || a->math_mode != b->math_mode ||
        a->deterministic != b->deterministic || a->workspace_cap != b->workspace_cap)
        return 0;
    for (int i = 0; i < NN__KEY_OPERANDS; i++)
        if (!tensor_equal(&a->t[i], &b->t[i])) return 0;
    return params_equal(&a->p, &b->p);
}

/* One multiply-xorshift round per 64-bit word: cheap on the hit path, and every bit of the word
 * reaches the state. */
static uint64_t mix(uint64_t h, uint64_t v)
{
    h = (h ^ v) * 0x9e3779b97f4a7c15u;
    return h ^ (h >> 29);
}

static uint64_t pair(int32_t lo, int32_t hi)
{
    return (uint64_t)(uint32_t)lo | (uint64_t)(uint32_t)hi << 32;
}

uint64_t nn__plan_key_hash(const struct nn__plan_key *k)
{
    uint64_t h = 0xcbf29ce484222325u;
    h = mix(h, pair(k->op, k->compute));
    h = mix(h, pair(k->math_mode, k->deterministic));
    h = mix(h, k->workspace_cap);
    for (int i = 0; i < NN__KEY_OPERANDS; i++) {
        const struct nn__key_tensor *t = &k->t[i];
        if (t->rank == 0) {
            h = mix(h, 0);
            continue;
        }
        h = mix(h, pair(t->rank, t->dtype));
        h = mix(h, (uint64_t)t->alignment);
        for (int d = 0; d < t->rank && d < NN_MAX_RANK; d++) {
            h = mix(h, (uint64_t)t->dims[d]);
            h = mix(h, (uint64_t)t->strides[d]);
        }
    }
    const struct nn__key_params *p = &k->p;
    h = mix(h, pair(p->spatial_rank, p->groups));
    h = mix(h, pair(p->mode, p->activation));
    h = mix(h, pair(p->pool_mode, p->flags));
    h = mix(h, bits_of(p->alpha));
    h = mix(h, bits_of(p->beta));
    for (int i = 0; i < p->spatial_rank && i < NN__KEY_SPATIAL_MAX; i++) {
        h = mix(h, (uint64_t)p->stride[i]);
        h = mix(h, (uint64_t)p->dilation[i]);
        h = mix(h, (uint64_t)p->pad_lo[i]);
        h = mix(h, (uint64_t)p->pad_hi[i]);
        h = mix(h, (uint64_t)p->window[i]);
    }
    return h;
}

static int is_dtype(int32_t d)
{
    return d >= NN_DTYPE_F32 && d <= NN_DTYPE_BF16;
}

const char *nn__plan_key_invalid(const struct nn__plan_key *k)
{
    if (k->op <= NN__OP_NONE || k->op >= NN__OP_KIND_COUNT) return "op is not a known op kind";
    if (!is_dtype(k->compute)) return "compute is not an nn_dtype";
    if (k->math_mode != NN_MATH_STRICT_FP32 && k->math_mode != NN_MATH_TF32)
        return "math_mode is not an nn_math_mode";
    if (k->deterministic != 0 && k->deterministic != 1) return "deterministic is not 0 or 1";
    for (int i = 0; i < NN__KEY_OPERANDS; i++) {
        const struct nn__key_tensor *t = &k->t[i];
        if (t->rank < 0 || t->rank > NN_MAX_RANK) return "an operand's rank is out of 0..8";
        if (t->rank == 0) continue;
        if (!is_dtype(t->dtype)) return "an operand's dtype is not an nn_dtype";
        if (t->alignment < 0) return "an operand's alignment is negative";
        for (int d = 0; d < t->rank; d++) {
            if (t->dims[d] < 1) return "an operand's dim is < 1";
            if (t->strides[d] < 0) return "an operand's stride is negative";
        }
    }
    const struct nn__key_params *p = &k->p;
    if (p->spatial_rank < 0 || p->spatial_rank > NN__KEY_SPATIAL_MAX)
        return "params.spatial_rank is out of 0..3";
    if (p->groups < 0) return "params.groups is negative";
    if (!isfinite(p->alpha) || !isfinite(p->beta)) return "params.alpha or beta is not finite";
    for (int i = 0; i < p->spatial_rank; i++)
        if (p->stride[i] < 0 || p->dilation[i] < 0 || p->pad_lo[i] < 0 || p->pad_hi[i] < 0 ||
            p->window[i] < 0)
            return "a spatial parameter is negative";
    return NULL;
}

void nn__plan_record_init(struct nn__plan_record *r)
{
    memset(r, 0, sizeof *r);
    r->time_us = -1;
    r->build_ms = -1;
    r->quick_engine = -1;
}

const char *nn__plan_record_invalid(const struct nn__plan_record *r)
{
    if (r->engine < 0) return "engine index is negative";
    if (r->knob_count < 0 || r->knob_count > NN__PLAN_KNOBS_MAX)
        return "knob count is out of 0..64";
    if (!isfinite(r->time_us) || (r->time_us < 0 && r->time_us != -1.0))
        return "time_us is neither >= 0 nor -1";
    if (!isfinite(r->build_ms) || (r->build_ms < 0 && r->build_ms != -1.0))
        return "build_ms is neither >= 0 nor -1";
    if (r->quick_engine < -1) return "quick engine index is below -1";
    if (r->quick_knob_count < 0 || r->quick_knob_count > NN__PLAN_KNOBS_MAX)
        return "quick knob count is out of 0..64";
    if (r->quick_engine == -1 && r->quick_knob_count)
        return "quick knobs are given without a quick engine";
    if (r->json_len > NN__PLAN_JSON_MAX) return "JSON length exceeds 256 KiB";
    if (r->json_len && !r->json) return "JSON is NULL with a nonzero length";
    return NULL;
}

/* 1 if candidate a goes before b in nn__plan_quick_order(). */
static int quick_before(const struct nn__plan_candidate *a, const struct nn__plan_candidate *b,
                        int64_t best_ws)
{
    int fits_a = a->workspace <= best_ws, fits_b = b->workspace <= best_ws;
    if (fits_a != fits_b) return fits_a;
    return a->time_us < b->time_us;
}

int nn__plan_quick_order(const struct nn__plan_candidate *c, int n, int best, int *order)
{
    if (best < 0 || best >= n) return 0;
    int m = 0;
    for (int i = 0; i < n; i++) {
        if (i == best || c[i].time_us < 0 || c[i].rtc || c[i].engine == c[best].engine) continue;
        int j = m++;
        for (; j > 0 && quick_before(&c[i], &c[order[j - 1]], c[best].workspace); j--)
            order[j] = order[j - 1];
        order[j] = i;
    }
    return m;
}

void nn__autotune_drop_slow(int *active, const float *first, int stride, int n, float factor)
{
    float fastest = -1;
    for (int i = 0; i < n; i++)
        if (active[i] == 1 && (fastest < 0 || first[i * stride] < fastest))
            fastest = first[i * stride];
    for (int i = 0; i < n; i++)
        if (active[i] == 1 && first[i * stride] > factor * fastest) active[i] = 2;
}

/* ---------------------------------------------------------------------------------------------
 * Entries and tables
 */

struct entry {
    struct nn__plan_key key;
    uint64_t hash;
    struct nn__plan_record rec; /* rec.json points at json below, or "" */
    char *json;                 /* owned, NUL-terminated, NULL when rec.json_len is 0 */
    void *plan;                 /* live entries only */
    nn__plan_destroy_fn destroy;
    struct entry *chain;       /* next in the hash bucket */
    struct entry *prev, *next; /* LRU list (live) or insertion order (known) */
};

struct table {
    struct entry **buckets; /* power-of-two count, or NULL when empty */
    size_t nbuckets;
    size_t count;
    struct entry list; /* sentinel: list.next is the newest (MRU), list.prev the oldest */
};

struct nn__plan_cache {
    int capacity;
    struct table live, known;
    nn_plan_cache_stats stats;
};

static void list_unlink(struct entry *e)
{
    e->prev->next = e->next;
    e->next->prev = e->prev;
}

static void list_push_front(struct entry *head, struct entry *e)
{
    e->next = head->next;
    e->prev = head;
    head->next->prev = e;
    head->next = e;
}

static void table_init(struct table *t)
{
    t->buckets = NULL;
    t->nbuckets = 0;
    t->count = 0;
    t->list.next = t->list.prev = &t->list;
}

static struct entry *table_find(const struct table *t, const struct nn__plan_key *key,
                                uint64_t hash)
{
    if (!t->nbuckets) return NULL;
    for (struct entry *e = t->buckets[hash & (t->nbuckets - 1)]; e; e = e->chain)
        if (e->hash == hash && nn__plan_key_equal(&e->key, key)) return e;
    return NULL;
}

/* Make room for n more entries (load factor <= 1). The only allocation a table makes, so callers
 * reserve first and then change things without failing. */
static int table_reserve(struct table *t, size_t n)
{
    if (t->count + n <= t->nbuckets) return 1;
    size_t nb = t->nbuckets ? t->nbuckets : 16;
    while (nb < t->count + n)
        nb *= 2;
    struct entry **b = nn__host_calloc(nb, sizeof *b);
    if (!b) return 0;
    for (size_t i = 0; i < t->nbuckets; i++) {
        for (struct entry *e = t->buckets[i], *next; e; e = next) {
            next = e->chain;
            e->chain = b[e->hash & (nb - 1)];
            b[e->hash & (nb - 1)] = e;
        }
    }
    nn__host_free(t->buckets);
    t->buckets = b;
    t->nbuckets = nb;
    return 1;
}

/* Needs a prior table_reserve(t, 1). */
static void table_add(struct table *t, struct entry *e)
{
    struct entry **slot = &t->buckets[e->hash & (t->nbuckets - 1)];
    e->chain = *slot;
    *slot = e;
    list_push_front(&t->list, e);
    t->count++;
}

static void table_remove(struct table *t, struct entry *e)
{
    struct entry **p = &t->buckets[e->hash & (t->nbuckets - 1)];
    while (*p != e)
        p = &(*p)->chain;
    *p = e->chain;
    list_unlink(e);
    t->count--;
}

static void entry_free(struct entry *e)
{
    if (e->plan) e->destroy(e->plan);
    nn__host_free(e->json);
    nn__host_free(e);
}

static void table_free_all(struct table *t)
{
    struct entry *e = t->list.next;
    while (e != &t->list) {
        struct entry *next = e->next;
        entry_free(e);
        e = next;
    }
    nn__host_free(t->buckets);
    table_init(t);
}

static struct entry *entry_new(const struct nn__plan_key *key, uint64_t hash,
                               const struct nn__plan_record *rec)
{
    struct entry *e = nn__host_calloc(1, sizeof *e);
    if (!e) return NULL;
    if (rec->json_len) {
        e->json = nn__host_alloc((size_t)rec->json_len + 1);
        if (!e->json) {
            nn__host_free(e);
            return NULL;
        }
        memcpy(e->json, rec->json, rec->json_len);
        e->json[rec->json_len] = '\0';
    }
    e->key = *key;
    e->hash = hash;
    e->rec = *rec;
    e->rec.json = e->json ? e->json : "";
    return e;
}

/* ---------------------------------------------------------------------------------------------
 * The cache
 */

nn_status nn__plan_cache_create(struct nn_ctx *ctx, int capacity, struct nn__plan_cache **out)
{
    *out = NULL;
    if (capacity < 1)
        return NN__FAIL(ctx, NN_E_INVALID_ARG, "plan cache: capacity must be >= 1, got %d",
                        capacity);
    struct nn__plan_cache *c = nn__host_calloc(1, sizeof *c);
    if (!c) return NN__FAIL(ctx, NN_E_OOM_HOST, "plan cache: out of host memory");
    c->capacity = capacity;
    table_init(&c->live);
    table_init(&c->known);
    *out = c;
    return NN_OK;
}

void nn__plan_cache_destroy(struct nn__plan_cache *c)
{
    if (!c) return;
    table_free_all(&c->live);
    table_free_all(&c->known);
    nn__host_free(c);
}

void nn__plan_cache_clear(struct nn__plan_cache *c)
{
    table_free_all(&c->live);
    table_free_all(&c->known);
}

void *nn__plan_cache_lookup(struct nn__plan_cache *c, const struct nn__plan_key *key,
                            const struct nn__plan_record **rec)
{
    struct entry *e = table_find(&c->live, key, nn__plan_key_hash(key));
    if (!e) {
        c->stats.misses++;
        if (rec) *rec = NULL;
        return NULL;
    }
    c->stats.hits++;
    list_unlink(e);
    list_push_front(&c->live.list, e);
    if (rec) *rec = &e->rec;
    return e->plan;
}

int nn__plan_cache_is_live(const struct nn__plan_cache *c, const struct nn__plan_key *key)
{
    return table_find(&c->live, key, nn__plan_key_hash(key)) != NULL;
}

/* An evicted record stays useful: it is kept as a known record (up to the bound). */
static void evict_lru(struct nn__plan_cache *c)
{
    struct entry *e = c->live.list.prev;
    table_remove(&c->live, e);
    e->destroy(e->plan);
    e->plan = NULL;
    e->destroy = NULL;
    c->stats.evictions++;
    if (c->known.count < NN__PLAN_KNOWN_MAX)
        table_add(&c->known, e);
    else
        entry_free(e);
}

nn_status nn__plan_cache_insert(struct nn_ctx *ctx, struct nn__plan_cache *c,
                                const struct nn__plan_key *key, const struct nn__plan_record *rec,
                                void *plan, nn__plan_destroy_fn destroy)
{
    if (!key || !rec || !destroy)
        return NN__FAIL(ctx, NN_E_INVALID_ARG,
                        "plan cache insert: key, rec and destroy must not be NULL");
    const char *bad = nn__plan_record_invalid(rec);
    if (bad) return NN__FAIL(ctx, NN_E_INVALID_ARG, "plan cache insert: record: %s", bad);
    uint64_t hash = nn__plan_key_hash(key);
    struct entry *old = table_find(&c->live, key, hash);
    int evicting = !old && c->live.count >= (size_t)c->capacity;
    struct entry *e = entry_new(key, hash, rec);
    if (!e || !table_reserve(&c->live, 1) || (evicting && !table_reserve(&c->known, 1))) {
        nn__host_free(e ? e->json : NULL);
        nn__host_free(e);
        return NN__FAIL(ctx, NN_E_OOM_HOST, "plan cache insert: out of host memory");
    }
    if (old) {
        table_remove(&c->live, old);
        entry_free(old);
    } else if (evicting) {
        evict_lru(c);
    }
    struct entry *known = table_find(&c->known, key, hash);
    if (known) {
        table_remove(&c->known, known);
        entry_free(known);
    }
    e->plan = plan;
    e->destroy = destroy;
    table_add(&c->live, e);
    return NN_OK;
}

nn_status nn__plan_cache_replace_live(struct nn_ctx *ctx, struct nn__plan_cache *c,
                                      const struct nn__plan_key *key, void *plan,
                                      const struct nn__plan_record *rec)
{
    struct entry *e = table_find(&c->live, key, nn__plan_key_hash(key));
    if (!e) return NN__FAIL(ctx, NN_E_INVALID_ARG, "plan cache: no live plan to replace");
    if (rec) {
        const char *bad = nn__plan_record_invalid(rec);
        if (bad) return NN__FAIL(ctx, NN_E_INVALID_ARG, "plan cache replace: record: %s", bad);
        struct entry *n = entry_new(key, e->hash, rec);
        if (!n) return NN__FAIL(ctx, NN_E_OOM_HOST, "plan cache replace: out of host memory");
        nn__host_free(e->json);
        e->json = n->json;
        e->rec = n->rec;
        nn__host_free(n);
    }
    if (plan && e->plan != plan) {
        e->destroy(e->plan);
        e->plan = plan;
    }
    return NN_OK;
}

void nn__plan_cache_note_build_ms(struct nn__plan_cache *c, const struct nn__plan_key *key,
                                  double ms)
{
    struct entry *e = table_find(&c->live, key, nn__plan_key_hash(key));
    if (e && isfinite(ms) && ms > e->rec.build_ms) e->rec.build_ms = ms;
}

const struct nn__plan_record *nn__plan_cache_lookup_known(const struct nn__plan_cache *c,
                                                          const struct nn__plan_key *key)
{
    struct entry *e = table_find(&c->known, key, nn__plan_key_hash(key));
    return e ? &e->rec : NULL;
}

int nn__plan_cache_drop_known(struct nn__plan_cache *c, const struct nn__plan_key *key)
{
    struct entry *e = table_find(&c->known, key, nn__plan_key_hash(key));
    if (!e) return 0;
    table_remove(&c->known, e);
    entry_free(e);
    c->stats.records_dropped++;
    return 1;
}

nn_status nn__plan_cache_add_known(struct nn_ctx *ctx, struct nn__plan_cache *c,
                                   const struct nn__plan_key *key,
                                   const struct nn__plan_record *rec)
{
    const char *bad = nn__plan_record_invalid(rec);
    if (bad) return NN__FAIL(ctx, NN_E_INVALID_ARG, "plan cache: record: %s", bad);
    uint64_t hash = nn__plan_key_hash(key);
    struct entry *old = table_find(&c->known, key, hash);
    if (!old && c->known.count >= NN__PLAN_KNOWN_MAX)
        return NN__FAIL(ctx, NN_E_OVERFLOW, "plan cache: more than %d known records",
                        NN__PLAN_KNOWN_MAX);
    struct entry *e = entry_new(key, hash, rec);
    if (!e || !table_reserve(&c->known, 1)) {
        nn__host_free(e ? e->json : NULL);
        nn__host_free(e);
        return NN__FAIL(ctx, NN_E_OOM_HOST, "plan cache: out of host memory");
    }
    if (old) {
        table_remove(&c->known, old);
        entry_free(old);
    }
    table_add(&c->known, e);
    return NN_OK;
}

nn_status nn__plan_cache_take_known(struct nn_ctx *ctx, struct nn__plan_cache *dst,
                                    struct nn__plan_cache *src)
{
    if (!table_reserve(&dst->known, src->known.count))
        return NN__FAIL(ctx, NN_E_OOM_HOST, "plan cache: out of host memory");
    /* Oldest first, so the insertion order (and thus the save order) is kept. */
    while (src->known.count) {
        struct entry *e = src->known.list.prev;
        table_remove(&src->known, e);
        dst->stats.records_loaded++;
        if (table_find(&dst->live, &e->key, e->hash)) {
            entry_free(e);
            continue;
        }
        struct entry *old = table_find(&dst->known, &e->key, e->hash);
        if (old) {
            table_remove(&dst->known, old);
            entry_free(old);
        } else if (dst->known.count >= NN__PLAN_KNOWN_MAX) {
            entry_free(e);
            continue;
        }
        table_add(&dst->known, e);
    }
    return NN_OK;
}

size_t nn__plan_cache_size(const struct nn__plan_cache *c)
{
    return c->live.count;
}

size_t nn__plan_cache_known_count(const struct nn__plan_cache *c)
{
    return c->known.count;
}

int nn__plan_cache_capacity(const struct nn__plan_cache *c)
{
    return c->capacity;
}

int nn__plan_cache_visit(const struct nn__plan_cache *c, nn__plan_visit_fn fn, void *arg)
{
    for (const struct entry *e = c->live.list.next; e != &c->live.list; e = e->next) {
        int r = fn(arg, &e->key, &e->rec);
        if (r) return r;
    }
    /* Known keys are never live (insertion removes them), so nothing is visited twice. */
    for (const struct entry *e = c->known.list.prev; e != &c->known.list; e = e->prev) {
        int r = fn(arg, &e->key, &e->rec);
        if (r) return r;
    }
    return 0;
}

/* ---------------------------------------------------------------------------------------------
 * Statistics
 */

void nn__plan_cache_count(struct nn__plan_cache *c, enum nn__plan_cache_event e)
{
    switch (e) {
    case NN__PC_HEURISTIC_QUERY: c->stats.heuristic_queries++; break;
    case NN__PC_PLAN_BUILT: c->stats.plans_built++; break;
    case NN__PC_REBUILT: c->stats.plans_rebuilt++; break;
    case NN__PC_QUICK: c->stats.quick_plans++; break;
    case NN__PC_BACKGROUND_BUILT: c->stats.background_builds++; break;
    case NN__PC_BACKGROUND_FAILED: c->stats.background_failures++; break;
    case NN__PC_PREBUILT: c->stats.plans_prebuilt++; break;
    }
}

void nn__plan_cache_count_autotune(struct nn__plan_cache *c, uint64_t ns)
{
    c->stats.autotune_runs++;
    c->stats.autotune_ns += ns;
}

void nn__plan_cache_count_skipped(struct nn__plan_cache *c, uint64_t n)
{
    c->stats.records_skipped += n;
}

void nn__plan_cache_get_stats(const struct nn__plan_cache *c, nn_plan_cache_stats *out)
{
    *out = c->stats;
    out->entries = c->live.count;
    out->known_records = c->known.count;
}

/* ---------------------------------------------------------------------------------------------
 * Public entry points. The cache lives in the cuDNN layer's per-context state; a reference
 * context has none.
 */

static nn_status no_plans(nn_ctx *ctx, const char *fn)
{
    return NN__FAIL(ctx, NN_E_UNSUPPORTED,
                    "%s: this context runs the reference backend, which has no execution plans "
                    "to save or load (plan caches belong to cuDNN contexts)",
                    fn);
}

nn_status nn_plan_cache_save(nn_ctx *ctx, const char *path)
{
    if (!ctx || !path || !path[0])
        return NN__FAIL(ctx, NN_E_INVALID_ARG,
                        "nn_plan_cache_save: ctx and path must not be NULL, path not empty");
#if NN_HAVE_CUDNN
    if (nn__ctx_on_gpu(ctx)) return nn__cudnn_plan_cache_save(ctx, path);
#endif
    return no_plans(ctx, "nn_plan_cache_save");
}

nn_status nn_plan_cache_load(nn_ctx *ctx, const char *path)
{
    if (!ctx || !path || !path[0])
        return NN__FAIL(ctx, NN_E_INVALID_ARG,
                        "nn_plan_cache_load: ctx and path must not be NULL, path not empty");
#if NN_HAVE_CUDNN
    if (nn__ctx_on_gpu(ctx)) return nn__cudnn_plan_cache_load(ctx, path);
#endif
    return no_plans(ctx, "nn_plan_cache_load");
}

nn_status nn_plan_cache_clear(nn_ctx *ctx)
{
    if (!ctx) return NN__FAIL(NULL, NN_E_INVALID_ARG, "nn_plan_cache_clear: ctx must not be NULL");
#if NN_HAVE_CUDNN
    if (nn__ctx_on_gpu(ctx)) nn__plan_cache_clear(nn__cudnn_plan_cache(ctx));
#endif
    return NN_OK;
}

nn_status nn_plan_cache_get_stats(const nn_ctx *ctx, nn_plan_cache_stats *stats)
{
    if (!ctx || !stats)
        return NN__FAIL(NULL, NN_E_INVALID_ARG,
                        "nn_plan_cache_get_stats: ctx and stats must not be NULL");
    memset(stats, 0, sizeof *stats);
#if NN_HAVE_CUDNN
    if (nn__ctx_on_gpu(ctx)) nn__plan_cache_get_stats(nn__cudnn_plan_cache((nn_ctx *)ctx), stats);
#endif
    return NN_OK;
}

nn_status nn_plan_cache_wait(nn_ctx *ctx)
{
    if (!ctx) return NN__FAIL(NULL, NN_E_INVALID_ARG, "nn_plan_cache_wait: ctx must not be NULL");
#if NN_HAVE_CUDNN
    if (nn__ctx_on_gpu(ctx)) nn__plan_builder_wait(ctx);
#endif
    return NN_OK;
}

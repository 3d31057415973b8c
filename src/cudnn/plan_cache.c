/* Graph plans in the generic cache (cache.c): their keys and records, the field lists of both,
 * the quick-alternate and autotune rules. */
#include <math.h>
#include <string.h>

#include "core/error.h"
#include "cudnn/plan_cache.h"

/* ---------------------------------------------------------------------------------------------
 * Keys
 */

void nn__plan_key_init(struct nn__plan_key *k)
{
    memset(k, 0, sizeof *k);
}

/* The key's fields, in file order. Every entry of the arrays takes part: the graph layer fills a
 * key after nn__plan_key_init(), so entries a key does not use hold 0. */
#define KEY_TENSOR_FIELDS(i)                                                                       \
    NN__FIELD(struct nn__plan_key, t[i].rank, NN__FIELD_I32),                                      \
        NN__FIELD(struct nn__plan_key, t[i].dtype, NN__FIELD_I32),                                 \
        NN__FIELD(struct nn__plan_key, t[i].alignment, NN__FIELD_I64),                             \
        NN__FIELD(struct nn__plan_key, t[i].dims, NN__FIELD_I64),                                  \
        NN__FIELD(struct nn__plan_key, t[i].strides, NN__FIELD_I64)

const struct nn__field nn__plan_key_fields[] = {
    NN__FIELD(struct nn__plan_key, op, NN__FIELD_I32),
    NN__FIELD(struct nn__plan_key, compute, NN__FIELD_I32),
    NN__FIELD(struct nn__plan_key, math_mode, NN__FIELD_I32),
    NN__FIELD(struct nn__plan_key, deterministic, NN__FIELD_I32),
    NN__FIELD(struct nn__plan_key, workspace_cap, NN__FIELD_U64),
    KEY_TENSOR_FIELDS(0),
    KEY_TENSOR_FIELDS(1),
    KEY_TENSOR_FIELDS(2),
    KEY_TENSOR_FIELDS(3),
    KEY_TENSOR_FIELDS(4),
    KEY_TENSOR_FIELDS(5),
    KEY_TENSOR_FIELDS(6),
    KEY_TENSOR_FIELDS(7),
    NN__FIELD(struct nn__plan_key, p.spatial_rank, NN__FIELD_I32),
    NN__FIELD(struct nn__plan_key, p.groups, NN__FIELD_I32),
    NN__FIELD(struct nn__plan_key, p.stride, NN__FIELD_I64),
    NN__FIELD(struct nn__plan_key, p.dilation, NN__FIELD_I64),
    NN__FIELD(struct nn__plan_key, p.pad_lo, NN__FIELD_I64),
    NN__FIELD(struct nn__plan_key, p.pad_hi, NN__FIELD_I64),
    NN__FIELD(struct nn__plan_key, p.window, NN__FIELD_I64),
    NN__FIELD(struct nn__plan_key, p.mode, NN__FIELD_I32),
    NN__FIELD(struct nn__plan_key, p.activation, NN__FIELD_I32),
    NN__FIELD(struct nn__plan_key, p.pool_mode, NN__FIELD_I32),
    NN__FIELD(struct nn__plan_key, p.flags, NN__FIELD_I32),
    NN__FIELD(struct nn__plan_key, p.alpha, NN__FIELD_F64),
    NN__FIELD(struct nn__plan_key, p.beta, NN__FIELD_F64),
    NN__FIELD_END,
};

/* The JSON is the entry's blob, so json and json_len are no fields. */
const struct nn__field nn__plan_record_fields[] = {
    NN__FIELD(struct nn__plan_record, tuned.engine, NN__FIELD_I64),
    NN__FIELD(struct nn__plan_record, tuned.knob_count, NN__FIELD_I32),
    NN__FIELD(struct nn__plan_record, tuned.knobs, NN__FIELD_I64),
    NN__FIELD(struct nn__plan_record, workspace, NN__FIELD_U64),
    NN__FIELD(struct nn__plan_record, time_us, NN__FIELD_F64),
    NN__FIELD(struct nn__plan_record, build_ms, NN__FIELD_F64),
    NN__FIELD(struct nn__plan_record, quick.engine, NN__FIELD_I64),
    NN__FIELD(struct nn__plan_record, quick.knob_count, NN__FIELD_I32),
    NN__FIELD(struct nn__plan_record, quick.knobs, NN__FIELD_I64),
    NN__FIELD_END,
};

/* The kind as the field-wise functions need it (they read id and fields only). */
static const struct nn__cache_kind key_kind = {.id = NN__PLAN_KIND_ID,
                                               .key_size = sizeof(struct nn__plan_key),
                                               .key_fields = nn__plan_key_fields};

int nn__plan_key_equal(const struct nn__plan_key *a, const struct nn__plan_key *b)
{
    return nn__cache_key_equal(&key_kind, a, b);
}

uint64_t nn__plan_key_hash(const struct nn__plan_key *k)
{
    return nn__cache_key_hash(&key_kind, k);
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
        if (t->rank < 0 || t->rank > NN__KEY_RANK_MAX) return "an operand's rank is out of 0..5";
        /* Entries a key does not use are 0 (nn__plan_key_init()), as equality needs. */
        for (int d = t->rank; d < NN__KEY_RANK_MAX; d++)
            if (t->dims[d] || t->strides[d])
                return "an operand's entries beyond its rank are not 0";
        if (t->rank == 0) {
            if (t->dtype || t->alignment) return "an absent operand's dtype or alignment is not 0";
            continue;
        }
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
    for (int i = p->spatial_rank; i < NN__KEY_SPATIAL_MAX; i++)
        if (p->stride[i] || p->dilation[i] || p->pad_lo[i] || p->pad_hi[i] || p->window[i])
            return "a spatial parameter beyond spatial_rank is not 0";
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
    r->quick.engine = -1;
}

const char *nn__plan_record_invalid(const struct nn__plan_record *r)
{
    if (r->tuned.engine < 0) return "engine index is negative";
    if (r->tuned.knob_count < 0 || r->tuned.knob_count > NN__PLAN_KNOBS_MAX)
        return "knob count is out of 0..64";
    if (!isfinite(r->time_us) || (r->time_us < 0 && r->time_us != -1.0))
        return "time_us is neither >= 0 nor -1";
    if (!isfinite(r->build_ms) || (r->build_ms < 0 && r->build_ms != -1.0))
        return "build_ms is neither >= 0 nor -1";
    if (r->quick.engine < -1) return "quick engine index is below -1";
    if (r->quick.knob_count < 0 || r->quick.knob_count > NN__PLAN_KNOBS_MAX)
        return "quick knob count is out of 0..64";
    if (r->quick.engine == -1 && r->quick.knob_count)
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
 * The graph-plan kind
 */

const char *nn__plan_kind_key_invalid(const void *key)
{
    return nn__plan_key_invalid(key);
}

/* The record as the caller gave it, with its JSON length taken from the blob. */
const char *nn__plan_kind_record_invalid(const void *record, uint32_t blob_len)
{
    struct nn__plan_record r = *(const struct nn__plan_record *)record;
    r.json_len = blob_len;
    r.json = "";
    return nn__plan_record_invalid(&r);
}

void nn__plan_kind_bind_json(void *record, const char *blob, uint32_t blob_len)
{
    struct nn__plan_record *r = record;
    r->json = blob;
    r->json_len = blob_len;
}

void *nn__plan_cache_lookup(struct nn__cache *c, uint32_t kind, const void *key,
                            const struct nn__plan_record **rec)
{
    struct nn__cache_view v;
    void *plan = nn__cache_lookup(c, kind, key, &v);
    if (rec) *rec = v.record;
    return plan;
}

int nn__plan_cache_is_live(const struct nn__cache *c, uint32_t kind, const void *key)
{
    return nn__cache_is_live(c, kind, key);
}

/* The record checks come first so that a bad JSON length is reported as the record's. */
static nn_status check_record(struct nn_ctx *ctx, const struct nn__plan_record *rec,
                              const char *what)
{
    if (!rec) return NN__FAIL(ctx, NN_E_INVALID_ARG, "%s: rec must not be NULL", what);
    const char *bad = nn__plan_record_invalid(rec);
    if (bad) return NN__FAIL(ctx, NN_E_INVALID_ARG, "%s: record: %s", what, bad);
    return NN_OK;
}

nn_status nn__plan_cache_insert(struct nn_ctx *ctx, struct nn__cache *c, uint32_t kind,
                                const void *key, const struct nn__plan_record *rec, void *plan)
{
    NN__TRY(check_record(ctx, rec, "plan cache insert"));
    return nn__cache_insert(ctx, c, kind, key, rec, rec->json, rec->json_len, plan);
}

nn_status nn__plan_cache_replace_live(struct nn_ctx *ctx, struct nn__cache *c, uint32_t kind,
                                      const void *key, void *plan,
                                      const struct nn__plan_record *rec)
{
    if (rec) NN__TRY(check_record(ctx, rec, "plan cache replace"));
    return nn__cache_replace_live(ctx, c, kind, key, plan, rec, rec ? rec->json : NULL,
                                  rec ? rec->json_len : 0);
}

const struct nn__plan_record *nn__plan_cache_lookup_known(const struct nn__cache *c, uint32_t kind,
                                                          const void *key)
{
    return nn__cache_lookup_known(c, kind, key, NULL);
}

int nn__plan_cache_drop_known(struct nn__cache *c, uint32_t kind, const void *key)
{
    return nn__cache_drop_known(c, kind, key);
}

nn_status nn__plan_cache_add_known(struct nn_ctx *ctx, struct nn__cache *c, uint32_t kind,
                                   const void *key, const struct nn__plan_record *rec)
{
    NN__TRY(check_record(ctx, rec, "plan cache"));
    return nn__cache_add_known(ctx, c, kind, key, rec, rec->json, rec->json_len);
}

void nn__plan_cache_note_build_ms(struct nn__cache *c, uint32_t kind, const void *key, double ms)
{
    struct nn__plan_record *r = nn__cache_live_record(c, kind, key);
    if (r && isfinite(ms) && ms > r->build_ms) r->build_ms = ms;
}

struct plan_visit {
    uint32_t kind;
    nn__plan_visit_fn fn;
    void *arg;
};

static int visit_plan(void *arg, const struct nn__cache_kind *kind, const void *key,
                      const struct nn__cache_view *v)
{
    const struct plan_visit *pv = arg;
    return kind->id == pv->kind ? pv->fn(pv->arg, key, v->record) : 0;
}

int nn__plan_cache_visit(const struct nn__cache *c, uint32_t kind, nn__plan_visit_fn fn, void *arg)
{
    struct plan_visit pv = {kind, fn, arg};
    return nn__cache_visit(c, visit_plan, &pv);
}

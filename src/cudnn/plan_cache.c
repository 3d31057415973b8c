/* Graph plans in the generic cache (cache.c): their records and its field list, the
 * quick-alternate and autotune rules. */
#include <math.h>
#include <string.h>

#include "core/error.h"
#include "cudnn/plan_cache.h"

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

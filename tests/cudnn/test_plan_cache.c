/* The in-memory plan cache: keys, LRU, known records, statistics, allocation failures, and the
 * public entry points on reference and (where there is a GPU) cuDNN contexts. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdlib.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "nn_config.h"
#include "nnprim/nnprim.h"

#include "core/alloc.h"
#include "core/ctx.h"
#include "cudnn/cudnn_ctx.h"
#include "conv/conv_internal.h"
#include "conv/conv_plan_key.h"
#include "cudnn/plan_cache.h"
#if NN_HAVE_CUDNN
#include "cudnn/plan_build_cudnn.h"
#endif
#include "gpu.h"
#include "plan_fixtures.h"

/* Plans are fake: small ints whose destruction is tallied. */
static int destroyed[64];
static int destroyed_total;

static void fake_destroy(void *plan)
{
    int id = *(int *)plan;
    destroyed[id]++;
    destroyed_total++;
}

static int plan_ids[64];

static void *fake_plan(int id)
{
    plan_ids[id] = id;
    return &plan_ids[id];
}

static void reset_tally(void)
{
    memset(destroyed, 0, sizeof destroyed);
    destroyed_total = 0;
}

static struct nn__cache *new_cache(int capacity)
{
    fx_plan_destroy = fake_destroy;
    struct nn__cache *c = NULL;
    cr_assert_eq(fx_cache_create(NULL, capacity, &c), NN_OK);
    cr_assert_not_null(c);
    return c;
}

static void insert(struct nn__cache *c, int seed)
{
    char json[64];
    struct nn__conv_key k = fx_key(seed);
    struct nn__plan_record r = fx_record(seed, json);
    cr_assert_eq(nn__plan_cache_insert(NULL, c, NN__CONV_KIND_ID, &k, &r, fake_plan(seed)), NN_OK);
}

static void *lookup(struct nn__cache *c, int seed)
{
    struct nn__conv_key k = fx_key(seed);
    return nn__plan_cache_lookup(c, NN__CONV_KIND_ID, &k, NULL);
}

/* ---------------------------------------------------------------------------------------------
 * Keys
 */

Test(plan_key, equal_keys_have_equal_hashes)
{
    struct nn__conv_key a = fx_key(3), b = fx_key(3);
    cr_expect(nn__conv_key_equal(&a, &b));
    cr_expect_eq(nn__conv_key_hash(&a), nn__conv_key_hash(&b));
    cr_expect_null(nn__conv_key_invalid(&a));
}

/* Equality and hashing read the fields of the kind's field list, never padding bytes; entries a key
 * does not use are 0 by construction (keys are zeroed), and a key read from a file with anything
 * else there is refused by the range check. */
Test(plan_key, padding_does_not_matter_and_unused_entries_are_zero)
{
    struct nn__conv_key a = fx_key(5), b;
    memset(&b, 0xAB, sizeof b); /* garbage everywhere, padding included */
    for (const struct nn__field *f = nn__conv_key_fields; f->name; f++)
        memcpy((char *)&b + f->offset, (const char *)&a + f->offset,
               (size_t)NN__FIELD_WIDTH(f->type) * f->count);
    cr_expect(nn__conv_key_equal(&a, &b));
    cr_expect_eq(nn__conv_key_hash(&a), nn__conv_key_hash(&b));
    /* The field list covers the whole struct but its padding: every byte the list does not name
     * is padding (the struct has none, so the list names every byte). */
    size_t named = nn__field_list_encoded_size(nn__conv_key_fields);
    cr_expect_eq(named, sizeof(struct nn__conv_key));
    cr_expect_leq(sizeof(struct nn__conv_key), 352, "the key is what a hit hashes and compares");

    /* Unused entries take part, so the key check refuses keys where they are not 0. */
    struct nn__conv_key c = fx_key(5);
    c.t[0].dims[4] = 7; /* x has rank 4 */
    cr_expect_str_eq(nn__conv_key_invalid(&c), "a tensor's dims beyond its rank are not 0");
    c = fx_key(4); /* a filter gradient: no bias */
    c.t[NN__CONV_SLOT_BIAS].nhwc = 1;
    cr_expect_str_eq(nn__conv_key_invalid(&c), "an absent tensor's align or nhwc is not 0");
    c = fx_key(5);
    c.stride[2] = 1;
    cr_expect_str_eq(nn__conv_key_invalid(&c), "a spatial parameter beyond spatial_rank is not 0");
}

/* Every field that takes part, changed alone, makes the keys unequal and (for these values) the
 * hashes different. */
Test(plan_key, any_field_change_breaks_equality)
{
    const struct nn__conv_key base = fx_key(5); /* a forward with a bias */
    int changes = 0;
#define CHANGE(stmt)                                                                               \
    do {                                                                                           \
        struct nn__conv_key k = base;                                                              \
        stmt;                                                                                      \
        cr_expect(!nn__conv_key_equal(&base, &k), "still equal after: %s", #stmt);                 \
        cr_expect(!nn__conv_key_equal(&k, &base), "still equal (reversed) after: %s", #stmt);      \
        cr_expect_neq(nn__conv_key_hash(&base), nn__conv_key_hash(&k), "same hash after: %s",      \
                      #stmt);                                                                      \
        changes++;                                                                                 \
    } while (0)
    CHANGE(k.pass = NN__CONV_PASS_BWD_DATA);
    CHANGE(k.dtype = NN_DTYPE_F16);
    CHANGE(k.spatial_rank = 3);
    CHANGE(k.mode = 1);
    CHANGE(k.relu = 1);
    CHANGE(k.flags = NN__CONV_KEY_PLAIN);
    CHANGE(k.groups = 2);
    for (int i = 0; i < 2; i++) {
        CHANGE(k.stride[i] = 2);
        CHANGE(k.dilation[i] = 2);
        CHANGE(k.pad_lo[i] = 1);
        CHANGE(k.pad_hi[i] = 1);
    }
    CHANGE(k.alpha = 2.0);
    CHANGE(k.beta = 1.0);
    CHANGE(k.beta = -0.0);
    CHANGE(k.s.math_mode = NN_MATH_STRICT_FP32);
    CHANGE(k.s.deterministic = !k.s.deterministic);
    CHANGE(k.s.workspace_cap = 0);
    for (int i = 0; i < NN__CONV_SLOTS; i++) { /* every slot is present */
        CHANGE(k.t[i].align = 4);
        CHANGE(k.t[i].align = 0);
        CHANGE(k.t[i].nhwc = !k.t[i].nhwc);
        for (int d = 0; d < 4; d++)
            CHANGE(k.t[i].dims[d] += 1);
    }
#undef CHANGE
    cr_expect_eq(changes, 7 + 2 * 4 + 3 + 3 + 4 * 7);
}

Test(plan_key, distinct_seeds_spread_over_hash_values)
{
    /* Not a quality test: only that nearby keys do not collide in the low bits all at once. */
    int low_bits_seen[64] = {0}, distinct = 0;
    for (int s = 0; s < 64; s++) {
        struct nn__conv_key k = fx_key(s);
        int b = (int)(nn__conv_key_hash(&k) & 63);
        if (!low_bits_seen[b]++) distinct++;
    }
    cr_expect_gt(distinct, 24, "only %d of 64 buckets used", distinct);
}

Test(plan_key, invalid_fields_are_named)
{
    struct nn__conv_key k = fx_key(1);
    k.pass = 4;
    cr_expect_str_eq(nn__conv_key_invalid(&k), "pass is not a conv pass");
    k = fx_key(1);
    k.t[1].dims[2] = 0;
    cr_expect_str_eq(nn__conv_key_invalid(&k), "a tensor's dim is < 1");
    k = fx_key(1);
    k.t[0].align = 3;
    cr_expect_str_eq(nn__conv_key_invalid(&k), "a tensor's align is not 1, 2, 4, 8 or 16");
    k = fx_key(1);
    k.spatial_rank = 4;
    cr_expect_str_eq(nn__conv_key_invalid(&k), "spatial_rank is out of 1..3");
    k = fx_key(2); /* a data gradient */
    k.relu = 1;
    cr_expect_str_eq(nn__conv_key_invalid(&k), "relu or flags are set on a backward pass");
    k = fx_key(2);
    k.t[NN__CONV_SLOT_BIAS] = k.t[NN__CONV_SLOT_OUT];
    cr_expect_str_eq(nn__conv_key_invalid(&k), "a tensor the pass does not have is present");
    k = fx_key(1);
    memset(&k.t[NN__CONV_SLOT_FILTER], 0, sizeof k.t[0]);
    cr_expect_str_eq(nn__conv_key_invalid(&k), "a tensor the pass needs is absent");
    k = fx_key(1);
    k.s.math_mode = 7;
    cr_expect_str_eq(nn__conv_key_invalid(&k), "math_mode is not an nn_math_mode");
}

/* The layout a key holds gives back the strides conv's layouts have (nn__conv_layout_strides,
 * which the backend's views carry). */
Test(plan_key, layouts_give_conv_strides)
{
    const int64_t dims[5][5] = {
        {2, 3, 4, 5, 6}, {1, 1, 4, 5, 0}, {3, 7, 1, 1, 0}, {2, 4, 9, 0, 0}, {5, 1, 1, 1, 1}};
    const int ranks[5] = {5, 4, 4, 3, 5};
    for (int i = 0; i < 5; i++) {
        for (int cl = 0; cl < 2; cl++) {
            int64_t want[NN_MAX_RANK], got[NN_MAX_RANK];
            nn__conv_layout_strides(ranks[i], dims[i], cl, want);
            struct nn__conv_key_tensor kt;
            memset(&kt, 0, sizeof kt);
            nn__conv_key_tensor_set(&kt, ranks[i], dims[i], want, 16);
            nn__conv_key_strides(&kt, ranks[i], got);
            cr_expect_arr_eq(got, want, (size_t)ranks[i] * sizeof *got, "case %d layout %d", i, cl);
        }
    }
}

/* ---------------------------------------------------------------------------------------------
 * The cache
 */

Test(plan_cache, capacity_must_be_positive)
{
    struct nn__cache *c = (void *)1;
    cr_expect_eq(fx_cache_create(NULL, 0, &c), NN_E_INVALID_ARG);
    cr_expect_null(c);
    cr_expect(strstr(nn_last_error()->message, "capacity must be >= 1, got 0"));
}

Test(plan_cache, hit_returns_the_stored_plan_and_record)
{
    reset_tally();
    struct nn__cache *c = new_cache(4);
    insert(c, 1);
    const struct nn__plan_record *rec = NULL;
    struct nn__conv_key k = fx_key(1);
    void *p = nn__plan_cache_lookup(c, NN__CONV_KIND_ID, &k, &rec);
    cr_assert_eq(p, &plan_ids[1]);
    char json[64];
    struct nn__plan_record want = fx_record(1, json);
    cr_assert_not_null(rec);
    cr_expect(fx_record_equal(rec, &want));
    cr_expect_eq(rec->json[rec->json_len], '\0');
    cr_expect_neq(rec->json, json, "the record's JSON must be the cache's copy");
    k = fx_key(2);
    cr_expect_null(nn__plan_cache_lookup(c, NN__CONV_KIND_ID, &k, &rec));
    cr_expect_null(rec);
    nn_plan_cache_stats st;
    nn__cache_get_stats(c, &st);
    cr_expect_eq(st.hits, 1);
    cr_expect_eq(st.misses, 1);
    cr_expect_eq(st.entries, 1);
    nn__cache_destroy(c);
    cr_expect_eq(destroyed[1], 1);
    cr_expect_eq(destroyed_total, 1);
}

Test(plan_cache, lru_evicts_least_recently_used_and_keeps_its_record)
{
    reset_tally();
    struct nn__cache *c = new_cache(3);
    insert(c, 1);
    insert(c, 2);
    insert(c, 3);
    cr_assert_not_null(lookup(c, 1)); /* order now (MRU first): 1 3 2 */
    insert(c, 4);                     /* evicts 2 */
    cr_expect_eq(destroyed[2], 1);
    cr_expect_eq(destroyed_total, 1);
    cr_expect_eq(nn__cache_size(c), 3);
    cr_expect_null(lookup(c, 2));
    cr_expect_not_null(lookup(c, 3)); /* 3 4 1 */
    cr_expect_not_null(lookup(c, 1)); /* 1 3 4 */
    insert(c, 5);                     /* evicts 4 */
    cr_expect_eq(destroyed[4], 1);
    insert(c, 6); /* evicts 3 */
    cr_expect_eq(destroyed[3], 1);
    cr_expect_eq(destroyed[1], 0);
    cr_expect_eq(nn__cache_size(c), 3);

    /* Evicted records are known records now, rebuildable without heuristics. */
    cr_expect_eq(nn__cache_known_count(c), 3);
    char json[64];
    struct nn__conv_key k2 = fx_key(2);
    const struct nn__plan_record *known = nn__plan_cache_lookup_known(c, NN__CONV_KIND_ID, &k2);
    struct nn__plan_record want = fx_record(2, json);
    cr_assert_not_null(known);
    cr_expect(fx_record_equal(known, &want));

    /* is_live: live keys only, and it counts nothing. */
    nn_plan_cache_stats before, after;
    nn__cache_get_stats(c, &before);
    struct nn__conv_key k5 = fx_key(5);
    cr_expect_eq(nn__plan_cache_is_live(c, NN__CONV_KIND_ID, &k5), 1);
    cr_expect_eq(nn__plan_cache_is_live(c, NN__CONV_KIND_ID, &k2), 0, "known, not live");
    nn__cache_get_stats(c, &after);
    cr_expect_eq(after.hits + after.misses, before.hits + before.misses);

    /* Re-inserting a known key makes it live again and removes the known copy; the record
     * given may be that known record itself (as prebuilding does). */
    cr_assert_eq(nn__plan_cache_insert(NULL, c, NN__CONV_KIND_ID, &k2,
                                       nn__plan_cache_lookup_known(c, NN__CONV_KIND_ID, &k2),
                                       fake_plan(2)),
                 NN_OK); /* evicts 1 */
    cr_expect_null(nn__plan_cache_lookup_known(c, NN__CONV_KIND_ID, &k2));
    const struct nn__plan_record *live = NULL;
    cr_expect_not_null(nn__plan_cache_lookup(c, NN__CONV_KIND_ID, &k2, &live));
    cr_expect(live && fx_record_equal(live, &want), "the known record, JSON included, went live");
    cr_expect_eq(destroyed[1], 1);
    nn_plan_cache_stats st;
    nn__cache_get_stats(c, &st);
    cr_expect_eq(st.evictions, 4);
    cr_expect_eq(st.entries, 3);
    cr_expect_eq(st.known_records, 3); /* 4, 3, 1 */
    nn__cache_destroy(c);
    cr_expect_eq(destroyed_total, 7, "every inserted plan destroyed exactly once");
}

Test(plan_cache, capacity_one)
{
    reset_tally();
    struct nn__cache *c = new_cache(1);
    for (int s = 1; s <= 10; s++) {
        insert(c, s);
        cr_expect_eq(nn__cache_size(c), 1);
        cr_expect_not_null(lookup(c, s));
        cr_expect_null(lookup(c, s - 1));
    }
    cr_expect_eq(destroyed_total, 9);
    nn__cache_destroy(c);
    cr_expect_eq(destroyed_total, 10);
}

Test(plan_cache, insert_of_equal_key_replaces_and_destroys_old_plan)
{
    reset_tally();
    struct nn__cache *c = new_cache(4);
    insert(c, 1);
    char json[64];
    struct nn__conv_key k = fx_key(1);
    struct nn__plan_record r = fx_record(9, json);
    cr_assert_eq(nn__plan_cache_insert(NULL, c, NN__CONV_KIND_ID, &k, &r, fake_plan(9)), NN_OK);
    cr_expect_eq(destroyed[1], 1);
    cr_expect_eq(nn__cache_size(c), 1);
    const struct nn__plan_record *got;
    cr_expect_eq(nn__plan_cache_lookup(c, NN__CONV_KIND_ID, &k, &got), &plan_ids[9]);
    cr_expect_eq(got->tuned.engine, r.tuned.engine);
    nn_plan_cache_stats st;
    nn__cache_get_stats(c, &st);
    cr_expect_eq(st.evictions, 0);
    nn__cache_destroy(c);
}

Test(plan_cache, invalid_records_are_refused_and_plan_stays_callers)
{
    reset_tally();
    struct nn__cache *c = new_cache(4);
    char json[64];
    struct nn__conv_key k = fx_key(1);
    struct nn__plan_record r = fx_record(1, json);
    r.tuned.knob_count = NN__PLAN_KNOBS_MAX + 1;
    cr_expect_eq(nn__plan_cache_insert(NULL, c, NN__CONV_KIND_ID, &k, &r, fake_plan(1)),
                 NN_E_INVALID_ARG);
    cr_expect(strstr(nn_last_error()->message, "knob count"));
    r = fx_record(1, json);
    r.time_us = -2;
    cr_expect_eq(nn__plan_cache_insert(NULL, c, NN__CONV_KIND_ID, &k, &r, fake_plan(1)),
                 NN_E_INVALID_ARG);
    r = fx_record(1, json);
    r.json_len = NN__PLAN_JSON_MAX + 1;
    cr_expect_eq(nn__plan_cache_insert(NULL, c, NN__CONV_KIND_ID, &k, &r, fake_plan(1)),
                 NN_E_INVALID_ARG);
    r = fx_record(1, json);
    r.build_ms = -0.5;
    cr_expect_eq(nn__plan_cache_insert(NULL, c, NN__CONV_KIND_ID, &k, &r, fake_plan(1)),
                 NN_E_INVALID_ARG);
    cr_expect(strstr(nn_last_error()->message, "build_ms"));
    r = fx_record(1, json);
    r.quick.engine = -2;
    cr_expect_eq(nn__plan_cache_insert(NULL, c, NN__CONV_KIND_ID, &k, &r, fake_plan(1)),
                 NN_E_INVALID_ARG);
    cr_expect(strstr(nn_last_error()->message, "quick engine"));
    r = fx_record(1, json);
    r.quick.engine = 3;
    r.quick.knob_count = NN__PLAN_KNOBS_MAX + 1;
    cr_expect_eq(nn__plan_cache_insert(NULL, c, NN__CONV_KIND_ID, &k, &r, fake_plan(1)),
                 NN_E_INVALID_ARG);
    cr_expect(strstr(nn_last_error()->message, "quick knob count"));
    r = fx_record(1, json);
    r.quick.engine = -1;
    r.quick.knob_count = 2;
    cr_expect_eq(nn__plan_cache_insert(NULL, c, NN__CONV_KIND_ID, &k, &r, fake_plan(1)),
                 NN_E_INVALID_ARG);
    cr_expect(strstr(nn_last_error()->message, "without a quick engine"));
    r = fx_record(1, json);
    cr_expect_eq(nn__plan_cache_insert(NULL, c, NN__CONV_KIND_ID, &k, &r, NULL), NN_E_INVALID_ARG);
    cr_expect_eq(nn__cache_size(c), 0);
    nn__cache_destroy(c);
    cr_expect_eq(destroyed_total, 0);
}

/* A background build's plan replaces the live one in place: same LRU position, the old plan
 * destroyed once, the record kept unless a new one is given; NULL keeps the plan. */
Test(plan_cache, replace_live_keeps_the_entry)
{
    reset_tally();
    struct nn__cache *c = new_cache(2);
    insert(c, 1);
    insert(c, 2); /* 2 is now the most recently used */
    struct nn__conv_key k1 = fx_key(1), k9 = fx_key(9);
    cr_assert_eq(nn__plan_cache_replace_live(NULL, c, NN__CONV_KIND_ID, &k1, fake_plan(11), NULL),
                 NN_OK);
    cr_expect_eq(destroyed[1], 1);
    cr_expect_eq(destroyed_total, 1);
    nn_plan_cache_stats st;
    nn__cache_get_stats(c, &st);
    cr_expect_eq(st.hits + st.misses + st.evictions, 0, "replacing is not a lookup");
    insert(c, 3); /* evicts the least recently used: still 1 (now plan 11) */
    cr_expect_eq(destroyed[11], 1);
    cr_expect_not_null(lookup(c, 2));
    cr_expect_null(nn__plan_cache_lookup(c, NN__CONV_KIND_ID, &k1, NULL));
    /* No live entry: refused, the plan stays the caller's. */
    cr_expect_eq(nn__plan_cache_replace_live(NULL, c, NN__CONV_KIND_ID, &k9, fake_plan(12), NULL),
                 NN_E_INVALID_ARG);
    cr_expect_eq(destroyed[12], 0);
    /* A new record with the same plan (NULL): the record changes, the plan does not. */
    char json[64];
    struct nn__conv_key k3 = fx_key(3);
    struct nn__plan_record r = fx_record(8, json);
    cr_assert_eq(nn__plan_cache_replace_live(NULL, c, NN__CONV_KIND_ID, &k3, NULL, &r), NN_OK);
    const struct nn__plan_record *got = NULL;
    cr_expect_eq(nn__plan_cache_lookup(c, NN__CONV_KIND_ID, &k3, &got), fake_plan(3));
    cr_assert_not_null(got);
    cr_expect(fx_record_equal(got, &r));
    cr_expect_eq(destroyed[3], 0);
    r.quick.engine = -2;
    cr_expect_eq(nn__plan_cache_replace_live(NULL, c, NN__CONV_KIND_ID, &k3, NULL, &r),
                 NN_E_INVALID_ARG);
    nn__cache_destroy(c);
    cr_expect_eq(destroyed[3], 1);
}

/* A background build's time raises the live record's build_ms, never lowers it. */
Test(plan_cache, note_build_ms_keeps_the_slowest)
{
    struct nn__cache *c = new_cache(2);
    insert(c, 1);
    struct nn__conv_key k = fx_key(1), other = fx_key(2);
    const struct nn__plan_record *r = NULL;
    nn__plan_cache_note_build_ms(c, NN__CONV_KIND_ID, &k, 40.5);
    cr_assert_not_null(nn__plan_cache_lookup(c, NN__CONV_KIND_ID, &k, &r));
    cr_expect_eq(r->build_ms, 40.5);
    nn__plan_cache_note_build_ms(c, NN__CONV_KIND_ID, &k, 0.2);
    nn__plan_cache_lookup(c, NN__CONV_KIND_ID, &k, &r);
    cr_expect_eq(r->build_ms, 40.5);
    nn__plan_cache_note_build_ms(c, NN__CONV_KIND_ID, &other,
                                 1.0); /* no live entry: nothing happens */
    cr_expect_eq(nn__cache_size(c), 1);
    nn__cache_destroy(c);
}

/* Quick-alternate candidates: never the best, one that did not run, a runtime-compiled one or
 * one of the best's engine; those needing no more workspace than the best first, each group
 * fastest first. */
Test(plan_cache, quick_alternate_order)
{
    /* The H200's 32x64x56x56 forward: engine 70 tuned (no workspace), engine 3 faster than 28
     * but with 207 MB of workspace. {engine, workspace, time_us, rtc} */
    struct nn__plan_candidate c[] = {{70, 0, 244, 0},  {70, 0, 260, 0}, {3, 207765504, 291, 0},
                                     {0, 0, -1, 0},    {28, 0, 348, 0}, {5, 0, 120, 1},
                                     {1, 2304, 454, 0}};
    int order[7];
    int m = nn__plan_quick_order(c, 7, 0, order);
    cr_assert_eq(m, 3);
    cr_expect_eq(order[0], 4, "engine 28: no workspace");
    cr_expect_eq(order[1], 2, "then engine 3 (291 us) before engine 1 (454 us)");
    cr_expect_eq(order[2], 6);
    for (int i = 0; i < 7; i++) {
        c[i].rtc = 0;
        c[i].workspace = 0;
    }
    m = nn__plan_quick_order(c, 7, 5, order);
    cr_assert_eq(m, 5, "best 5: every other engine that ran");
    cr_expect_eq(order[0], 0);
    cr_expect_eq(order[1], 1);
    cr_expect_eq(order[4], 6);
    struct nn__plan_candidate one[] = {{1, 0, 100, 0}};
    cr_expect_eq(nn__plan_quick_order(one, 1, 0, order), 0, "one candidate");
    cr_expect_eq(nn__plan_quick_order(one, 1, 3, order), 0, "best out of range");
}

/* Autotune's cut after the first round: only active candidates (1) count and can be cut (to 2);
 * failed ones (0) keep their value and their times are ignored. */
Test(plan_cache, autotune_drops_candidates_over_twice_the_fastest)
{
    /* First-round times (ms) of the H200's n16c256h20w84k256r3s3 forward candidates, two per
     * candidate (stride 2: the second column is a later round and must not be read). Candidate 4
     * failed: its time 0.1 is garbage. */
    float t[] = {1.05f, 9.0f, 9.69f, 0.0f, 2.11f, 0.0f, 2.09f, 0.0f, 0.1f, 0.0f, 16.57f, 0.0f};
    int active[] = {1, 1, 1, 1, 0, 1};
    nn__autotune_drop_slow(active, t, 2, 6, 2.0f);
    int want[] = {1, 2, 2, 1, 0, 2};
    for (int i = 0; i < 6; i++)
        cr_expect_eq(active[i], want[i], "candidate %d: %d, expected %d", i, active[i], want[i]);
    int again[] = {2, 1, 1};
    float u[] = {0.5f, 3.0f, 7.0f};
    nn__autotune_drop_slow(again, u, 1, 3, 2.0f);
    cr_expect_eq(again[0], 2, "an already cut candidate is not the fastest");
    cr_expect_eq(again[1], 1, "3.0 is the fastest active time");
    cr_expect_eq(again[2], 2, "7.0 > 2 x 3.0");
}

Test(plan_cache, known_records_lookup_drop_and_clear)
{
    reset_tally();
    struct nn__cache *c = new_cache(4);
    char json[64];
    for (int s = 1; s <= 3; s++) {
        struct nn__conv_key k = fx_key(s);
        struct nn__plan_record r = fx_record(s, json);
        cr_assert_eq(nn__plan_cache_add_known(NULL, c, NN__CONV_KIND_ID, &k, &r), NN_OK);
    }
    /* A known record is not a live plan: lookup misses. */
    cr_expect_null(lookup(c, 2));
    struct nn__conv_key k2 = fx_key(2);
    cr_assert_not_null(nn__plan_cache_lookup_known(c, NN__CONV_KIND_ID, &k2));
    cr_expect_eq(nn__plan_cache_drop_known(c, NN__CONV_KIND_ID, &k2), 1);
    cr_expect_eq(nn__plan_cache_drop_known(c, NN__CONV_KIND_ID, &k2), 0);
    cr_expect_null(nn__plan_cache_lookup_known(c, NN__CONV_KIND_ID, &k2));
    insert(c, 7);
    nn_plan_cache_stats st;
    nn__cache_get_stats(c, &st);
    cr_expect_eq(st.records_dropped, 1);
    cr_expect_eq(st.known_records, 2);
    nn__cache_clear(c);
    cr_expect_eq(destroyed[7], 1);
    cr_expect_eq(nn__cache_size(c), 0);
    cr_expect_eq(nn__cache_known_count(c), 0);
    nn__cache_get_stats(c, &st);
    cr_expect_eq(st.records_dropped, 1, "clear keeps the statistics");
    cr_expect_eq(st.misses, 1);
    nn__cache_destroy(c);
    cr_expect_eq(destroyed_total, 1);
}

static int visit_collect(void *arg, const void *key, const struct nn__plan_record *r)
{
    const struct nn__conv_key *k = key;
    int *out = arg;
    (void)r;
    out[++out[0]] = (int)k->t[0].dims[0] - 1; /* the seed */
    return 0;
}

Test(plan_cache, visit_yields_live_mru_first_then_known_oldest_first)
{
    struct nn__cache *c = new_cache(2);
    char json[64];
    struct nn__conv_key k = fx_key(10);
    struct nn__plan_record r = fx_record(10, json);
    cr_assert_eq(nn__plan_cache_add_known(NULL, c, NN__CONV_KIND_ID, &k, &r), NN_OK);
    insert(c, 1);
    insert(c, 2);
    insert(c, 3); /* evicts 1 into the known records */
    int seen[8] = {0};
    cr_expect_eq(nn__plan_cache_visit(c, NN__CONV_KIND_ID, visit_collect, seen), 0);
    cr_assert_eq(seen[0], 4);
    cr_expect_eq(seen[1], 3);
    cr_expect_eq(seen[2], 2);
    cr_expect_eq(seen[3], 10);
    cr_expect_eq(seen[4], 1);
    nn__cache_destroy(c);
}

Test(plan_cache, events_are_counted)
{
    struct nn__cache *c = new_cache(2);
    nn__cache_count(c, NN__PC_HEURISTIC_QUERY);
    nn__cache_count(c, NN__PC_HEURISTIC_QUERY);
    nn__cache_count(c, NN__PC_PLAN_BUILT);
    nn__cache_count(c, NN__PC_REBUILT);
    nn__cache_count(c, NN__PC_QUICK);
    nn__cache_count(c, NN__PC_BACKGROUND_BUILT);
    nn__cache_count(c, NN__PC_BACKGROUND_BUILT);
    nn__cache_count(c, NN__PC_BACKGROUND_FAILED);
    nn__cache_count(c, NN__PC_PREBUILT);
    nn__cache_count(c, NN__PC_PREBUILT);
    nn__cache_count(c, NN__PC_PREBUILT);
    nn__cache_count_autotune(c, 1500);
    nn__cache_count_autotune(c, 500);
    nn__cache_count_skipped(c, 5);
    nn_plan_cache_stats st;
    nn__cache_get_stats(c, &st);
    cr_expect_eq(st.heuristic_queries, 2);
    cr_expect_eq(st.plans_built, 1);
    cr_expect_eq(st.plans_rebuilt, 1);
    cr_expect_eq(st.autotune_runs, 2);
    cr_expect_eq(st.autotune_ns, 2000);
    cr_expect_eq(st.records_skipped, 5);
    cr_expect_eq(st.quick_plans, 1);
    cr_expect_eq(st.background_builds, 2);
    cr_expect_eq(st.background_failures, 1);
    cr_expect_eq(st.plans_prebuilt, 3);
    cr_expect_eq(st.hits + st.misses + st.evictions + st.records_loaded, 0);
    nn__cache_destroy(c);
}

/* Every allocation an insertion makes, failing in turn, gives NN_E_OOM_HOST and leaves the cache
 * as it was (the plan stays the caller's: not destroyed). Leaks are caught by the sanitizer
 * build. */
Test(plan_cache, allocation_failures_change_nothing)
{
    reset_tally();
    struct nn__cache *c = new_cache(2);
    insert(c, 1);
    insert(c, 2);
    char json[64];
    struct nn__conv_key k = fx_key(3); /* odd seed: has JSON; evicts into an empty known table */
    struct nn__plan_record r = fx_record(3, json);
    int failures = 0;
    for (long n = 1;; n++) {
        nn__host_alloc_fail_at(n);
        nn_status st = nn__plan_cache_insert(NULL, c, NN__CONV_KIND_ID, &k, &r, fake_plan(3));
        nn__host_alloc_fail_at(0);
        if (st == NN_OK) break;
        failures++;
        cr_assert_eq(st, NN_E_OOM_HOST, "allocation %ld: %s", n, nn_status_name(st));
        cr_expect_eq(nn__cache_size(c), 2);
        cr_expect_eq(nn__cache_known_count(c), 0);
        cr_expect_not_null(lookup(c, 1));
        cr_expect_eq(destroyed_total, 0);
        cr_assert_lt(n, 100);
    }
    cr_expect_eq(failures, 2, "the entry (key, record and JSON in one block), known-table buckets");
    cr_expect_not_null(lookup(c, 3));
    nn__cache_destroy(c);
    cr_expect_eq(destroyed_total, 3);
}

Test(plan_cache, create_allocation_failure)
{
    /* The cache, then its kind's key runs. */
    for (long n = 1; n <= 2; n++) {
        struct nn__cache *c = (void *)1;
        nn__host_alloc_fail_at(n);
        nn_status st = fx_cache_create(NULL, 4, &c);
        nn__host_alloc_fail_at(0);
        cr_expect_eq(st, NN_E_OOM_HOST, "allocation %ld", n);
        cr_expect_null(c);
    }
}

/* ---------------------------------------------------------------------------------------------
 * Public entry points
 */

static nn_ctx *ref_ctx(void)
{
    nn_settings s;
    cr_assert_eq(nn_settings_from_env(&s), NN_OK);
    s.backend = NN_BACKEND_REF;
    s.plan_cache_file = NULL;
    nn_ctx *ctx = NULL;
    cr_assert_eq(nn_ctx_create(&ctx, &s), NN_OK);
    return ctx;
}

Test(plan_cache_api, reference_context_has_no_plans)
{
    nn_ctx *ctx = ref_ctx();
    cr_expect_eq(nn_plan_cache_save(ctx, "/tmp/nnprim-never-written.plans"), NN_E_UNSUPPORTED);
    cr_expect(strstr(nn_last_error()->message, "reference backend"));
    cr_expect_eq(access("/tmp/nnprim-never-written.plans", F_OK), -1);
    cr_expect_eq(nn_plan_cache_load(ctx, "/tmp/nnprim-never-written.plans"), NN_E_UNSUPPORTED);
    cr_expect_eq(nn_plan_cache_clear(ctx), NN_OK);
    cr_expect_eq(nn_plan_cache_wait(ctx), NN_OK);
    nn_plan_cache_stats st;
    memset(&st, 0xFF, sizeof st);
    cr_expect_eq(nn_plan_cache_get_stats(ctx, &st), NN_OK);
    nn_plan_cache_stats zero;
    memset(&zero, 0, sizeof zero);
    cr_expect_eq(memcmp(&st, &zero, sizeof st), 0);
    nn_ctx_destroy(ctx);
}

Test(plan_cache_api, null_arguments)
{
    nn_ctx *ctx = ref_ctx();
    nn_plan_cache_stats st;
    cr_expect_eq(nn_plan_cache_save(NULL, "x"), NN_E_INVALID_ARG);
    cr_expect_eq(nn_plan_cache_save(ctx, NULL), NN_E_INVALID_ARG);
    cr_expect_eq(nn_plan_cache_save(ctx, ""), NN_E_INVALID_ARG);
    cr_expect_eq(nn_plan_cache_load(NULL, "x"), NN_E_INVALID_ARG);
    cr_expect_eq(nn_plan_cache_load(ctx, NULL), NN_E_INVALID_ARG);
    cr_expect_eq(nn_plan_cache_clear(NULL), NN_E_INVALID_ARG);
    cr_expect_eq(nn_plan_cache_wait(NULL), NN_E_INVALID_ARG);
    cr_expect_eq(nn_plan_cache_get_stats(NULL, &st), NN_E_INVALID_ARG);
    cr_expect_eq(nn_plan_cache_get_stats(ctx, NULL), NN_E_INVALID_ARG);
    nn_ctx_destroy(ctx);
}

#if NN_HAVE_CUDNN
static nn_ctx *gpu_ctx(const char *file)
{
    nn_settings s;
    cr_assert_eq(nn_settings_from_env(&s), NN_OK);
    s.backend = NN_BACKEND_CUDNN;
    s.plan_cache_file = file;
    s.plan_cache_capacity = 4;
    nn_ctx *ctx = NULL;
    nn_status st = nn_ctx_create(&ctx, &s);
    cr_assert_eq(st, NN_OK, "nn_ctx_create: %s", nn_last_error()->message);
    return ctx;
}

/* GPU: the settings file is saved at destroy with this process's cuDNN version and GPU, and a
 * second context loads every record of it (none skipped); a file of another GPU is skipped. */
Test(plan_cache_gpu, settings_file_round_trip_through_contexts)
{
    NN_REQUIRE_GPU();
    char dir[] = "/tmp/nnprim-plan-gpu-XXXXXX";
    cr_assert_not_null(mkdtemp(dir));
    char path[64];
    snprintf(path, sizeof path, "%s/cache.plans", dir);

    nn_ctx *a = gpu_ctx(path); /* the file does not exist yet: not an error */
    char json[64];
    for (int s = 1; s <= 5; s++) {
        struct nn__conv_key k = fx_key(s);
        struct nn__plan_record r = fx_record(s, json);
        cr_assert_eq(
            nn__plan_cache_add_known(NULL, nn__cudnn_plan_cache(a), NN__CONV_KIND_ID, &k, &r),
            NN_OK);
    }
    nn_ctx_destroy(a);
    cr_assert_eq(access(path, R_OK), 0, "destroy must have saved %s", path);

    nn_ctx *b = gpu_ctx(path);
    nn_plan_cache_stats st;
    cr_assert_eq(nn_plan_cache_get_stats(b, &st), NN_OK);
    cr_expect_eq(st.records_loaded, 5);
    cr_expect_eq(st.records_skipped, 0);
    cr_expect_eq(st.known_records, 5);
    struct nn__conv_key k3 = fx_key(3);
    struct nn__plan_record want = fx_record(3, json);
    const struct nn__plan_record *got =
        nn__plan_cache_lookup_known(nn__cudnn_plan_cache(b), NN__CONV_KIND_ID, &k3);
    cr_assert_not_null(got);
    cr_expect(fx_record_equal(got, &want));

    /* The same records under another GPU's name are skipped. */
    struct nn__gpu_id other = fx_gpu();
    snprintf(other.name, sizeof other.name, "Some Other GPU");
    char other_path[80];
    snprintf(other_path, sizeof other_path, "%s/other.plans", dir);
    cr_assert_eq(nn__plan_file_save(NULL, nn__cudnn_plan_cache(b), other_path,
                                    nn_cudnn_runtime_version(), &other),
                 NN_OK);
    cr_assert_eq(nn_plan_cache_clear(b), NN_OK);
    cr_assert_eq(nn_plan_cache_load(b, other_path), NN_OK);
    cr_assert_eq(nn_plan_cache_get_stats(b, &st), NN_OK);
    cr_expect_eq(st.records_skipped, 5);
    cr_expect_eq(st.known_records, 0);
    cr_expect_eq(nn_plan_cache_save(b, other_path), NN_OK);
    nn_ctx_destroy(b);

    /* A corrupted settings file: the context is still created, with an empty cache. */
    FILE *f = fopen(path, "r+b");
    cr_assert_not_null(f);
    fputs("garbage!", f);
    fclose(f);
    nn_ctx *c = gpu_ctx(path);
    cr_assert_eq(nn_plan_cache_get_stats(c, &st), NN_OK);
    cr_expect_eq(st.records_loaded, 0);
    cr_expect_eq(st.known_records, 0);
    nn_ctx_destroy(c); /* its save refuses to overwrite the corrupted file (logged) */
    unlink(path);
    unlink(other_path);
    char lock[120];
    snprintf(lock, sizeof lock, "%s.lock", path);
    unlink(lock);
    snprintf(lock, sizeof lock, "%s.lock", other_path);
    unlink(lock);
    rmdir(dir);
}

/* A small forward convolution on ctx: x 1x4x8x8, w 4x4x3x3, y 1x4x6x6 (f32), allocated and freed
 * here (the pool is the device's, so any context of it may free them). */
struct small_conv {
    nn_conv_params p;
    nn_tensor x, w, y;
};

static void small_conv_alloc(nn_ctx *ctx, struct small_conv *c, int64_t channels)
{
    int64_t xd[4] = {1, channels, 8, 8}, wd[4] = {4, channels, 3, 3}, yd[4] = {1, 4, 6, 6};
    cr_assert_eq(nn_conv_params_default(&c->p, 2), NN_OK);
    cr_assert_eq(nn_tensor_empty(ctx, NN_DTYPE_F32, 4, xd, &c->x), NN_OK);
    cr_assert_eq(nn_tensor_empty(ctx, NN_DTYPE_F32, 4, wd, &c->w), NN_OK);
    cr_assert_eq(nn_tensor_empty(ctx, NN_DTYPE_F32, 4, yd, &c->y), NN_OK);
    cr_assert_eq(nn_tensor_fill_uniform(ctx, &c->x, -1, 1, 1), NN_OK);
    cr_assert_eq(nn_tensor_fill_uniform(ctx, &c->w, -1, 1, 2), NN_OK);
}

static void small_conv_free(nn_ctx *ctx, struct small_conv *c)
{
    nn_tensor_free(ctx, &c->x);
    nn_tensor_free(ctx, &c->w);
    nn_tensor_free(ctx, &c->y);
}

static nn_ctx *tuning_gpu_ctx(void)
{
    nn_settings s;
    cr_assert_eq(nn_settings_from_env(&s), NN_OK);
    s.backend = NN_BACKEND_CUDNN;
    s.plan_cache_file = NULL;
    s.tuning = NN_TUNING_AUTOTUNE;
    s.background_builds = 0; /* a rebuild from a record is then the tuned plan itself */
    nn_ctx *ctx = NULL;
    cr_assert_eq(nn_ctx_create(&ctx, &s), NN_OK, "nn_ctx_create: %s", nn_last_error()->message);
    return ctx;
}

/* GPU: two live contexts of one device tune once. The second context's first call finds the
 * first one's record in the device's shared tuning and rebuilds it on its own handle: no
 * heuristics query, no autotune; its second call is a hit. Clearing forgets the device's
 * tuning too. */
Test(plan_cache_gpu, a_second_context_of_the_device_takes_the_first_ones_tuning)
{
    NN_REQUIRE_GPU();
    nn_ctx *a = tuning_gpu_ctx(), *b = tuning_gpu_ctx();
    struct small_conv c;
    small_conv_alloc(a, &c, 4);
    cr_assert_eq(nn_conv_forward(a, &c.p, &c.x, &c.w, NULL, &c.y, NULL), NN_OK, "%s",
                 nn_last_error()->message);
    cr_assert_eq(nn_ctx_synchronize(a), NN_OK);
    nn_plan_cache_stats sa, sb;
    cr_assert_eq(nn_plan_cache_get_stats(a, &sa), NN_OK);
    cr_expect_geq(sa.autotune_runs, 1);
    cr_expect_eq(sa.device_records, sa.misses, "every plan a tuned is published");

    cr_assert_eq(nn_conv_forward(b, &c.p, &c.x, &c.w, NULL, &c.y, NULL), NN_OK, "%s",
                 nn_last_error()->message);
    cr_assert_eq(nn_plan_cache_get_stats(b, &sb), NN_OK);
    cr_expect_eq(sb.misses, sa.misses);
    cr_expect_eq(sb.shared_records, sa.misses, "from a's tuning");
    cr_expect_eq(sb.plans_rebuilt, sa.misses);
    cr_expect_eq(sb.heuristic_queries, 0);
    cr_expect_eq(sb.autotune_runs, 0);
    cr_expect_eq(sb.plans_built, 0, "no search");
    cr_expect_eq(sb.entries, sa.entries);
    cr_assert_eq(nn_conv_forward(b, &c.p, &c.x, &c.w, NULL, &c.y, NULL), NN_OK);
    cr_assert_eq(nn_plan_cache_get_stats(b, &sb), NN_OK);
    cr_expect_eq(sb.hits, sa.misses);
    cr_expect_eq(sb.misses, sa.misses);

    /* Cleared: b searches again, and so would a new context. */
    cr_assert_eq(nn_plan_cache_clear(b), NN_OK);
    cr_assert_eq(nn_plan_cache_get_stats(b, &sb), NN_OK);
    cr_expect_eq(sb.device_records, 0);
    cr_assert_eq(nn_conv_forward(b, &c.p, &c.x, &c.w, NULL, &c.y, NULL), NN_OK);
    cr_assert_eq(nn_plan_cache_get_stats(b, &sb), NN_OK);
    cr_expect_eq(sb.autotune_runs, sa.autotune_runs);
    nn_plan_cache_stats sa2;
    cr_assert_eq(nn_plan_cache_get_stats(a, &sa2), NN_OK);
    cr_expect_eq(sa2.entries, sa.entries, "a keeps its live plans");
    cr_assert_eq(nn_ctx_synchronize(b), NN_OK);
    small_conv_free(a, &c);
    nn_ctx_destroy(b);
    nn_ctx_destroy(a);
}

/* GPU: contexts in threads of their own run the same shapes at once, each shape several times:
 * every call succeeds, each context's lookups add up, and the shapes were tuned at most once
 * per context. */
struct conv_thread {
    nn_ctx *ctx;
    int failures;
    nn_plan_cache_stats stats;
};

static void *conv_thread_main(void *arg)
{
    struct conv_thread *t = arg;
    struct small_conv c[3];
    for (int i = 0; i < 3; i++)
        small_conv_alloc(t->ctx, &c[i], 2 + 2 * i);
    for (int round = 0; round < 5; round++)
        for (int i = 0; i < 3; i++)
            if (nn_conv_forward(t->ctx, &c[i].p, &c[i].x, &c[i].w, NULL, &c[i].y, NULL) != NN_OK)
                t->failures++;
    if (nn_ctx_synchronize(t->ctx) != NN_OK) t->failures++;
    for (int i = 0; i < 3; i++)
        small_conv_free(t->ctx, &c[i]);
    nn_plan_cache_get_stats(t->ctx, &t->stats);
    return NULL;
}

Test(plan_cache_gpu, contexts_in_two_threads_share_the_tuning_at_once)
{
    NN_REQUIRE_GPU();
    struct conv_thread t[2];
    pthread_t th[2];
    for (int i = 0; i < 2; i++) {
        memset(&t[i], 0, sizeof t[i]);
        t[i].ctx = tuning_gpu_ctx();
    }
    for (int i = 0; i < 2; i++)
        cr_assert_eq(pthread_create(&th[i], NULL, conv_thread_main, &t[i]), 0);
    for (int i = 0; i < 2; i++)
        pthread_join(th[i], NULL);
    uint64_t tuned = 0, keys = t[0].stats.misses; /* one per shape and graph */
    cr_expect_geq(keys, 3);
    for (int i = 0; i < 2; i++) {
        cr_expect_eq(t[i].failures, 0, "thread %d", i);
        cr_expect_eq(t[i].stats.misses, keys, "thread %d", i);
        cr_expect_eq(t[i].stats.hits, 4 * keys, "thread %d: rounds 2 to 5 hit", i);
        /* Each miss either tuned or took the other thread's record. */
        cr_expect_eq(t[i].stats.autotune_runs + t[i].stats.shared_records, keys, "thread %d", i);
        tuned += t[i].stats.autotune_runs;
    }
    /* Both may miss a key before either has published it; never more than once per side. */
    cr_expect_geq(tuned, keys);
    cr_expect_leq(tuned, 2 * keys);
    cr_expect_eq(t[0].stats.device_records, keys);
    nn_ctx_destroy(t[0].ctx);
    nn_ctx_destroy(t[1].ctx);
}
/* The fork count the child handler keeps: the child sees one more, the parent none. */
Test(plan_cache_fork, a_child_counts_the_fork_and_the_parent_does_not)
{
    unsigned before = nn__cudnn_fork_generation();
    pid_t pid = fork();
    cr_assert_neq(pid, -1);
    if (pid == 0) _exit(nn__cudnn_fork_generation() == before + 1 ? 0 : 1);
    int status = 0;
    cr_assert_eq(waitpid(pid, &status, 0), pid);
    cr_expect(WIFEXITED(status) && WEXITSTATUS(status) == 0, "status 0x%x", status);
    cr_expect_eq(nn__cudnn_fork_generation(), before);
}

/* Wait up to seconds for pid; kill it and return -1 if it is still running. */
static int wait_or_kill(pid_t pid, int seconds, int *status)
{
    for (int i = 0; i < seconds * 20; i++) {
        pid_t r = waitpid(pid, status, WNOHANG);
        if (r == pid) return 0;
        struct timespec ts = {0, 50 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    kill(pid, SIGKILL);
    waitpid(pid, status, 0);
    return -1;
}

/* GPU: a child's nn_ctx_destroy() of an inherited cuDNN context whose background builder thread
 * is running returns (host memory only, no CUDA call), and the parent's context carries on. */
Test(plan_cache_gpu, a_forked_child_destroys_an_inherited_context_with_a_builder_thread)
{
    NN_REQUIRE_GPU();
    char dir[] = "/tmp/nnprim-fork-XXXXXX";
    cr_assert_not_null(mkdtemp(dir));
    char path[64], lock[80];
    snprintf(path, sizeof path, "%s/plans", dir);
    snprintf(lock, sizeof lock, "%s.lock", path);

    /* A tuned record in a file, then a context that prebuilds it on its builder thread. */
    nn_ctx *a = tuning_gpu_ctx();
    struct small_conv c;
    small_conv_alloc(a, &c, 4);
    cr_assert_eq(nn_conv_forward(a, &c.p, &c.x, &c.w, NULL, &c.y, NULL), NN_OK, "%s",
                 nn_last_error()->message);
    cr_assert_eq(nn_ctx_synchronize(a), NN_OK);
    cr_assert_eq(nn_plan_cache_save(a, path), NN_OK, "%s", nn_last_error()->message);
    small_conv_free(a, &c);
    nn_ctx_destroy(a);

    nn_settings s;
    cr_assert_eq(nn_settings_from_env(&s), NN_OK);
    s.backend = NN_BACKEND_CUDNN;
    s.tuning = NN_TUNING_AUTOTUNE;
    s.background_builds = 1;
    s.prebuild_plans = 1;
    s.plan_cache_file = path;
    nn_ctx *b = NULL;
    cr_assert_eq(nn_ctx_create(&b, &s), NN_OK, "%s", nn_last_error()->message);
    cr_assert_not_null(*nn__cudnn_builder_slot(b), "loading the file started the builder");

    pid_t pid = fork();
    cr_assert_neq(pid, -1);
    if (pid == 0) {
        nn_ctx_destroy(b);
        _exit(0);
    }
    int status = 0;
    int r = wait_or_kill(pid, 20, &status);
    cr_expect_eq(r, 0, "the child's nn_ctx_destroy() did not return within 20 s");
    cr_expect(r != 0 || (WIFEXITED(status) && WEXITSTATUS(status) == 0), "child status 0x%x",
              status);

    cr_assert_eq(nn_plan_cache_wait(b), NN_OK);
    nn_plan_cache_stats st;
    cr_assert_eq(nn_plan_cache_get_stats(b, &st), NN_OK);
    cr_expect_geq(st.plans_prebuilt + st.background_failures, 1, "the parent's builder ran on");
    nn_ctx_destroy(b);
    unlink(path);
    unlink(lock);
    rmdir(dir);
}
#endif

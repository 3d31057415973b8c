/* The generic cache with more than one kind: a second, made-up family ("probe") whose key has
 * padding and a settings block, next to graph plans. Kinds share the LRU and the statistics but
 * never each other's entries; the plan file carries both, and skips a kind the reader lacks.
 * A third ("scratch", NN__CACHE_KIND_NOT_PERSISTED) is per-process state: never saved, shared or
 * kept as a known record, and skipped when an older file holds it. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "nnprim/nnprim.h"

#include "core/alloc.h"
#include "core/ctx.h"
#include "cudnn/cache.h"
#include "conv/conv_plan_key.h"
#include "cudnn/plan_cache.h"
#include "cudnn/plan_file.h"
#include "plan_fixtures.h"

/* A family's problem description: padding after n and after mode, a settings block. */
struct probe_key {
    int32_t n;
    int64_t dims[3];
    int32_t mode;
    struct nn__cache_settings s;
    double scale;
};

struct probe_record {
    int64_t offsets[4];
    int32_t algo;
};

static const struct nn__field probe_key_fields[] = {
    NN__FIELD(struct probe_key, n, NN__FIELD_I32),
    NN__FIELD(struct probe_key, dims, NN__FIELD_I64),
    NN__FIELD(struct probe_key, mode, NN__FIELD_I32),
    NN__CACHE_SETTINGS_FIELDS(struct probe_key, s),
    NN__FIELD(struct probe_key, scale, NN__FIELD_F64),
    NN__FIELD_END,
};

static const struct nn__field probe_record_fields[] = {
    NN__FIELD(struct probe_record, offsets, NN__FIELD_I64),
    NN__FIELD(struct probe_record, algo, NN__FIELD_I32),
    NN__FIELD_END,
};

static const char *probe_key_invalid(const void *key)
{
    const struct probe_key *k = key;
    if (k->n < 1) return "n is < 1";
    return nn__cache_settings_invalid(&k->s);
}

static const char *probe_record_invalid(const void *record, uint32_t blob_len)
{
    const struct probe_record *r = record;
    (void)blob_len;
    return r->algo < 0 ? "algo is negative" : NULL;
}

static int probe_destroyed;

static void probe_destroy(void *live)
{
    (void)live;
    probe_destroyed++;
}

static const struct nn__cache_kind probe_kind = {
    .id = 9,
    .name = "probe",
    .key_size = sizeof(struct probe_key),
    .key_fields = probe_key_fields,
    .record_size = sizeof(struct probe_record),
    .record_fields = probe_record_fields,
    .blob_max = 64,
    .key_invalid = probe_key_invalid,
    .record_invalid = probe_record_invalid,
    .destroy = probe_destroy,
};

static const struct nn__cache_kind *const both[] = {&fx_plan_kind, &probe_kind};

static struct nn__cache *new_cache(const struct nn__cache_kind *const *table, int n, int cap)
{
    fx_plan_destroy = NULL;
    struct nn__cache *c = NULL;
    cr_assert_eq(nn__cache_create(NULL, table, n, cap, &c), NN_OK, "%s", nn_last_error()->message);
    return c;
}

static struct probe_key probe_key(int seed, unsigned char padding)
{
    struct probe_key k;
    memset(&k, padding, sizeof k); /* whatever the padding holds */
    k.n = 1 + seed;
    for (int i = 0; i < 3; i++)
        k.dims[i] = seed * 10 + i;
    k.mode = seed % 2;
    k.s.math_mode = NN_MATH_TF32;
    k.s.deterministic = 0;
    k.s.workspace_cap = 0;
    k.scale = 0.5 * seed;
    return k;
}

static struct probe_record probe_record(int seed)
{
    struct probe_record r;
    memset(&r, 0, sizeof r);
    for (int i = 0; i < 4; i++)
        r.offsets[i] = seed * 100 + i;
    r.algo = seed % 3;
    return r;
}

static int live_token[8];

Test(cache, kinds_share_the_lru_but_not_entries)
{
    probe_destroyed = 0;
    struct nn__cache *c = new_cache(both, 2, 3);
    cr_expect_eq(nn__cache_kind_of(c, 9), &probe_kind);
    cr_expect_null(nn__cache_kind_of(c, 2));
    struct probe_key k = probe_key(1, 0x00);
    struct probe_record r = probe_record(1);
    cr_assert_eq(nn__cache_insert(NULL, c, 9, &k, &r, "blob", 4, &live_token[0]), NN_OK);

    /* Padding does not matter: a key with other padding bytes finds the entry. */
    struct probe_key same = probe_key(1, 0xEE);
    struct nn__cache_view v;
    cr_expect_eq(nn__cache_lookup(c, 9, &same, &v), &live_token[0]);
    cr_expect_eq(((const struct probe_record *)v.record)->offsets[3], 103);
    cr_expect_eq(v.blob_len, 4);
    cr_expect_str_eq(v.blob, "blob");
    cr_expect_eq(nn__cache_key_hash(&probe_kind, &k), nn__cache_key_hash(&probe_kind, &same));
    cr_expect(nn__cache_key_equal(&probe_kind, &k, &same));

    /* The same bytes under another kind id are another entry (a key of that kind's size that starts
     * with them); an unknown kind finds nothing. */
    struct nn__conv_key same_bytes;
    memset(&same_bytes, 0, sizeof same_bytes);
    memcpy(&same_bytes, &k, sizeof k);
    cr_expect_null(nn__cache_lookup(c, NN__CONV_KIND_ID, &same_bytes, NULL));
    cr_expect_null(nn__cache_lookup(c, 2, &k, NULL));
    cr_expect_eq(nn__cache_insert(NULL, c, 2, &k, &r, NULL, 0, &live_token[1]), NN_E_INVALID_ARG);

    /* Graph plans and probes fill one LRU of capacity 3: the oldest (the probe) is evicted and
     * kept as a known record, its object destroyed by its own kind. */
    char json[64];
    for (int s = 1; s <= 3; s++) {
        struct nn__conv_key pk = fx_key(s);
        struct nn__plan_record pr = fx_record(s, json);
        cr_assert_eq(nn__plan_cache_insert(NULL, c, NN__CONV_KIND_ID, &pk, &pr, &live_token[1 + s]),
                     NN_OK);
    }
    cr_expect_eq(probe_destroyed, 1);
    cr_expect_eq(nn__cache_size(c), 3);
    cr_expect_not_null(nn__cache_lookup_known(c, 9, &k, &v));
    cr_expect_str_eq(v.blob, "blob");
    nn_plan_cache_stats st;
    nn__cache_get_stats(c, &st);
    cr_expect_eq(st.evictions, 1);
    cr_expect_eq(st.hits, 1);
    cr_expect_eq(st.misses, 2);
    nn__cache_destroy(c);
    cr_expect_eq(probe_destroyed, 1, "graph plans go through their own kind's callback");
}

Test(cache, records_and_blobs_are_checked)
{
    struct nn__cache *c = new_cache(both, 2, 2);
    struct probe_key k = probe_key(2, 0);
    struct probe_record r = probe_record(2);
    r.algo = -1;
    cr_expect_eq(nn__cache_insert(NULL, c, 9, &k, &r, NULL, 0, &live_token[0]), NN_E_INVALID_ARG);
    cr_expect(strstr(nn_last_error()->message, "probe record: algo is negative"), "%s",
              nn_last_error()->message);
    r = probe_record(2);
    char big[65] = {0};
    cr_expect_eq(nn__cache_insert(NULL, c, 9, &k, &r, big, 65, &live_token[0]), NN_E_INVALID_ARG);
    cr_expect(strstr(nn_last_error()->message, "blob of 65 bytes, at most 64"), "%s",
              nn_last_error()->message);
    cr_expect_eq(nn__cache_insert(NULL, c, 9, &k, &r, NULL, 0, NULL), NN_E_INVALID_ARG);
    cr_expect_eq(nn__cache_size(c), 0);
    nn__cache_destroy(c);
}

/* The table every cuDNN context is made of: a repeated id there would fail every nn_ctx_create()
 * on a GPU and nothing on a machine without one. */
Test(cache, the_contexts_kind_table_is_accepted)
{
    int n = 0;
    const struct nn__cache_kind *const *table = nn__ctx_cache_kinds(&n);
    cr_assert_gt(n, 0);
    struct nn__cache *c = NULL;
    cr_assert_eq(nn__cache_create(NULL, table, n, 4, &c), NN_OK, "%s", nn_last_error()->message);
    nn__cache_destroy(c);
}

Test(cache, malformed_kind_tables_are_refused)
{
    struct nn__cache *c = (void *)1;
    const struct nn__cache_kind *twice[] = {&probe_kind, &probe_kind};
    cr_expect_eq(nn__cache_create(NULL, twice, 2, 4, &c), NN_E_INVALID_ARG);
    cr_expect_null(c);
    cr_expect(strstr(nn_last_error()->message, "kind 1 (probe) repeats the id"), "%s",
              nn_last_error()->message);

    struct nn__cache_kind bad = probe_kind;
    bad.id = 0;
    const struct nn__cache_kind *one[] = {&bad};
    cr_expect_eq(nn__cache_create(NULL, one, 1, 4, &c), NN_E_INVALID_ARG);
    cr_expect(strstr(nn_last_error()->message, "id is outside 1..63"));
    bad = probe_kind;
    bad.key_size = 8; /* the field list runs past it */
    cr_expect_eq(nn__cache_create(NULL, one, 1, 4, &c), NN_E_INVALID_ARG);
    cr_expect(strstr(nn_last_error()->message, "past its struct"));
    bad = probe_kind;
    bad.destroy = NULL;
    cr_expect_eq(nn__cache_create(NULL, one, 1, 4, &c), NN_E_INVALID_ARG);
    cr_expect(strstr(nn_last_error()->message, "no destroy callback"));
}

Test(cache, settings_are_filled_from_the_context)
{
    nn_settings s;
    cr_assert_eq(nn_settings_from_env(&s), NN_OK);
    s.backend = NN_BACKEND_REF;
    s.plan_cache_file = NULL;
    s.math_mode = NN_MATH_STRICT_FP32;
    s.deterministic = 1;
    s.workspace_cap = 12345;
    nn_ctx *ctx = NULL;
    cr_assert_eq(nn_ctx_create(&ctx, &s), NN_OK);
    struct nn__cache_settings cs;
    memset(&cs, 0, sizeof cs);
    nn__cache_settings_fill(ctx, &cs);
    cr_expect_eq(cs.math_mode, NN_MATH_STRICT_FP32);
    cr_expect_eq(cs.deterministic, 1);
    cr_expect_eq(cs.workspace_cap, 12345);
    cr_expect_null(nn__cache_settings_invalid(&cs));
    cs.deterministic = 2;
    cr_expect_str_eq(nn__cache_settings_invalid(&cs), "deterministic is not 0 or 1");
    nn_ctx_destroy(ctx);
}

/* Both kinds round-trip through a version-3 file; a reader without the probe kind skips its
 * records (counted) and loads the graph plans. */
Test(cache, plan_file_carries_every_kind)
{
    struct nn__cache *c = new_cache(both, 2, 4);
    char json[64];
    for (int s = 1; s <= 3; s++) {
        struct probe_key k = probe_key(s, 0x5A);
        struct probe_record r = probe_record(s);
        cr_assert_eq(nn__cache_add_known(NULL, c, 9, &k, &r, "xyz", (uint32_t)(s % 2) * 3), NN_OK);
        struct nn__conv_key pk = fx_key(s);
        struct nn__plan_record pr = fx_record(s, json);
        cr_assert_eq(nn__plan_cache_add_known(NULL, c, NN__CONV_KIND_ID, &pk, &pr), NN_OK);
    }
    struct nn__gpu_id gpu = fx_gpu();
    unsigned char *buf;
    size_t len;
    cr_assert_eq(nn__plan_file_encode(NULL, c, FX_CUDNN_VERSION, &gpu, &buf, &len), NN_OK);

    struct nn__cache *d = new_cache(both, 2, 4);
    cr_assert_eq(nn__plan_file_decode(NULL, d, "t", buf, len, FX_CUDNN_VERSION, &gpu), NN_OK, "%s",
                 nn_last_error()->message);
    cr_expect_eq(nn__cache_known_count(d), 6);
    for (int s = 1; s <= 3; s++) {
        struct probe_key k = probe_key(s, 0x00);
        struct nn__cache_view v;
        const struct probe_record *r = nn__cache_lookup_known(d, 9, &k, &v);
        cr_assert_not_null(r, "probe %d", s);
        struct probe_record want = probe_record(s);
        cr_expect_eq(memcmp(r->offsets, want.offsets, sizeof want.offsets), 0);
        cr_expect_eq(r->algo, want.algo);
        cr_expect_eq(v.blob_len, (uint32_t)(s % 2) * 3);
        struct nn__conv_key pk = fx_key(s);
        struct nn__plan_record pr = fx_record(s, json);
        cr_expect(fx_record_equal(nn__plan_cache_lookup_known(d, NN__CONV_KIND_ID, &pk), &pr),
                  "plan %d", s);
    }

    struct nn__cache *plans_only = new_cache(fx_kinds, 1, 4);
    cr_assert_eq(nn__plan_file_decode(NULL, plans_only, "t", buf, len, FX_CUDNN_VERSION, &gpu),
                 NN_OK, "%s", nn_last_error()->message);
    nn_plan_cache_stats st;
    nn__cache_get_stats(plans_only, &st);
    cr_expect_eq(st.known_records, 3);
    cr_expect_eq(st.records_skipped, 3, "the probes");
    cr_expect_eq(st.records_loaded, 3);
    nn__host_free(buf);
    nn__cache_destroy(plans_only);
    nn__cache_destroy(d);
    nn__cache_destroy(c);
}

/* A version-3 probe record whose key or record the kind refuses, or whose body does not match
 * the kind's field lists, is a format error naming the field. */
Test(cache, plan_file_checks_records_through_their_kind)
{
    struct nn__cache *c = new_cache(both, 2, 4);
    struct probe_key k = probe_key(1, 0);
    struct probe_record r = probe_record(1);
    cr_assert_eq(nn__cache_add_known(NULL, c, 9, &k, &r, NULL, 0), NN_OK);
    struct nn__gpu_id gpu = fx_gpu();
    unsigned char *buf;
    size_t len;
    cr_assert_eq(nn__plan_file_encode(NULL, c, FX_CUDNN_VERSION, &gpu, &buf, &len), NN_OK);
    /* header 51 bytes, body length at 51, kind at 55, key (n first) at 59: 4 + 24 + 4 + 16 + 8
     * = 56 bytes, then the record: offsets (32 bytes), algo at 147, blob_len at 151. */
    cr_assert_eq(fx_get_u32(buf + 55), 9);
    cr_assert_eq(len, 51 + 4 + 4 + 56 + 36 + 4 + 8);
    struct {
        size_t at;
        uint32_t value;
        const char *want;
    } cases[] = {
        {59, 0, "record 0 key at byte offset 59: n is < 1"},
        {59 + 32, 7, "record 0 key at byte offset 59: math_mode is not an nn_math_mode"},
        {147, 0xFFFFFFFFu, "record 0 record at byte offset 115: algo is negative"},
        {151, 65, "record 0 blob_len at byte offset 151: 65 bytes, a probe holds at most 64"},
        {51, 99, "body length"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        unsigned char *copy = malloc(len);
        memcpy(copy, buf, len);
        fx_put_le(copy + cases[i].at, cases[i].value, 4);
        fx_put_le(copy + len - 8, fx_fnv1a64(copy, len - 8), 8);
        struct nn__cache *d = new_cache(both, 2, 4);
        cr_expect_eq(nn__plan_file_decode(NULL, d, "t", copy, len, FX_CUDNN_VERSION, &gpu),
                     NN_E_FORMAT, "case %zu", i);
        cr_expect(strstr(nn_last_error()->message, cases[i].want), "case %zu: %s", i,
                  nn_last_error()->message);
        cr_expect_eq(nn__cache_known_count(d), 0);
        nn__cache_destroy(d);
        free(copy);
    }
    nn__host_free(buf);
    nn__cache_destroy(c);
}

/* ---------------------------------------------------------------------------------------------
 * A kind that is not persisted
 */

struct scratch_key {
    int64_t n;
};

struct scratch_record {
    int32_t unused[2];
};

static const struct nn__field scratch_key_fields[] = {
    NN__FIELD(struct scratch_key, n, NN__FIELD_I64),
    NN__FIELD_END,
};

static const struct nn__field scratch_record_fields[] = {
    NN__FIELD(struct scratch_record, unused, NN__FIELD_I32),
    NN__FIELD_END,
};

static int scratch_destroyed;

static void scratch_destroy(void *live)
{
    (void)live;
    scratch_destroyed++;
}

#define SCRATCH_KIND(flag_bits)                                                                    \
    {                                                                                              \
        .id = 10, .name = "scratch", .flags = (flag_bits), .key_size = sizeof(struct scratch_key), \
        .key_fields = scratch_key_fields, .record_size = sizeof(struct scratch_record),            \
        .record_fields = scratch_record_fields, .destroy = scratch_destroy,                        \
    }

static const struct nn__cache_kind scratch_kind = SCRATCH_KIND(NN__CACHE_KIND_NOT_PERSISTED);
/* The same id as an older writer had it, persisted: its files hold records of id 10. */
static const struct nn__cache_kind scratch_kind_saved = SCRATCH_KIND(0);

static const struct nn__cache_kind *const with_scratch[] = {&probe_kind, &scratch_kind};
static const struct nn__cache_kind *const with_saved_scratch[] = {&probe_kind, &scratch_kind_saved};

static struct scratch_key scratch_key(int64_t n)
{
    struct scratch_key k = {n};
    return k;
}

static const struct scratch_record no_record = {{0, 0}};

/* 3 probes and 3 scratch entries live in c (capacity >= 6), the scratch ones most recent. */
static void fill_both(struct nn__cache *c)
{
    for (int s = 1; s <= 3; s++) {
        struct probe_key k = probe_key(s, 0);
        struct probe_record r = probe_record(s);
        cr_assert_eq(nn__cache_insert(NULL, c, 9, &k, &r, NULL, 0, &live_token[s]), NN_OK);
    }
    for (int s = 1; s <= 3; s++) {
        struct scratch_key k = scratch_key(s);
        cr_assert_eq(nn__cache_insert(NULL, c, 10, &k, &no_record, NULL, 0, &live_token[3 + s]),
                     NN_OK, "%s", nn_last_error()->message);
    }
}

static int count_visit(void *arg, const struct nn__cache_kind *kind, const void *key,
                       const struct nn__cache_view *view)
{
    (void)key, (void)view;
    int *n = arg;
    n[kind->id == 10]++;
    return 0;
}

/* The real table: the cross-entropy's scratch (id 8, softmax_cudnn.c) and the RNN dropout
 * states (id 5, rnn_cudnn_dropout.c) are marked, graph plans are not. Without cuDNN the table is
 * empty and there is nothing to check. */
Test(cache, the_contexts_kind_table_marks_scratch_not_persisted)
{
    int n = 0;
    const struct nn__cache_kind *const *table = nn__ctx_cache_kinds(&n);
    int seen = 0;
    for (int i = 0; i < n; i++) {
        if (table[i]->id == 8 || table[i]->id == 5) {
            seen++;
            cr_expect(table[i]->flags & NN__CACHE_KIND_NOT_PERSISTED, "kind 8 (%s)",
                      table[i]->name);
        }
        if (table[i]->id == NN__CONV_KIND_ID)
            cr_expect_eq(table[i]->flags & NN__CACHE_KIND_NOT_PERSISTED, 0,
                         "graph plans are saved");
    }
    cr_expect_eq(seen, n ? 2 : 0);
}

Test(cache, a_kind_not_persisted_is_never_saved)
{
    scratch_destroyed = 0;
    struct nn__cache *c = new_cache(with_scratch, 2, 8);
    fill_both(c);
    cr_expect_eq(nn__cache_size(c), 6);
    struct scratch_key k2 = scratch_key(2);
    cr_expect_eq(nn__cache_lookup(c, 10, &k2, NULL), &live_token[5], "a live scratch is a hit");
    int visited[2] = {0, 0};
    cr_expect_eq(nn__cache_visit(c, count_visit, visited), 0);
    cr_expect_eq(visited[0], 3);
    cr_expect_eq(visited[1], 0, "nn__cache_visit() yields no scratch record");

    /* Encoded: the header counts the 3 probes and nothing else follows them. */
    struct nn__gpu_id gpu = fx_gpu();
    unsigned char *buf;
    size_t len;
    cr_assert_eq(nn__plan_file_encode(NULL, c, FX_CUDNN_VERSION, &gpu, &buf, &len), NN_OK);
    size_t at_count = 8 + 4 + 8 + 12 + 4 + strlen(gpu.name);
    cr_expect_eq(fx_get_u32(buf + at_count), 3);
    size_t probe = 4 + 4 + 56 + 36 + 4;
    cr_expect_eq(len, at_count + 4 + 3 * probe + 8);
    /* A reader whose kind 10 is persisted would load any record of it: there is none. */
    struct nn__cache *d = new_cache(with_saved_scratch, 2, 8);
    cr_assert_eq(nn__plan_file_decode(NULL, d, "t", buf, len, FX_CUDNN_VERSION, &gpu), NN_OK, "%s",
                 nn_last_error()->message);
    nn_plan_cache_stats st;
    nn__cache_get_stats(d, &st);
    cr_expect_eq(st.records_loaded, 3);
    cr_expect_eq(st.records_skipped, 0);
    cr_expect_null(nn__cache_lookup_known(d, 10, &k2, NULL));
    nn__cache_destroy(d);
    nn__host_free(buf);

    /* Saved (merged through a scratch cache of the same kinds, then encoded): likewise. */
    char dir[64], path[96];
    snprintf(dir, sizeof dir, "/tmp/nnprim-cache-XXXXXX");
    cr_assert_not_null(mkdtemp(dir), "mkdtemp: %s", strerror(errno));
    snprintf(path, sizeof path, "%s/plans", dir);
    cr_assert_eq(nn__plan_file_save(NULL, c, path, FX_CUDNN_VERSION, &gpu), NN_OK, "%s",
                 nn_last_error()->message);
    d = new_cache(with_saved_scratch, 2, 8);
    cr_assert_eq(nn__plan_file_load(NULL, d, path, FX_CUDNN_VERSION, &gpu), NN_OK, "%s",
                 nn_last_error()->message);
    nn__cache_get_stats(d, &st);
    cr_expect_eq(st.records_loaded, 3);
    cr_expect_eq(st.records_skipped, 0);
    cr_expect_eq(nn__cache_known_count(d), 3);
    nn__cache_destroy(d);
    unlink(path);
    snprintf(path, sizeof path, "%s/plans.lock", dir);
    unlink(path);
    rmdir(dir);

    cr_expect_eq(scratch_destroyed, 0);
    nn__cache_destroy(c);
    cr_expect_eq(scratch_destroyed, 3, "each live scratch destroyed once, with the cache");
}

/* Evicted, a scratch entry's record is dropped, not kept to rebuild from; known records of the
 * kind are refused; the device's shared tuning never learns one. */
Test(cache, a_kind_not_persisted_keeps_no_records)
{
    scratch_destroyed = 0;
    struct nn__cache *c = new_cache(with_scratch, 2, 1);
    cr_assert_eq(nn__cache_share_device(NULL, c, 424242), NN_OK);
    struct scratch_key k = scratch_key(7);
    cr_assert_eq(nn__cache_insert(NULL, c, 10, &k, &no_record, NULL, 0, &live_token[0]), NN_OK);
    nn_plan_cache_stats st;
    nn__cache_get_stats(c, &st);
    cr_expect_eq(st.device_records, 0, "not published");
    struct probe_key pk = probe_key(1, 0);
    struct probe_record pr = probe_record(1);
    cr_assert_eq(nn__cache_insert(NULL, c, 9, &pk, &pr, NULL, 0, &live_token[1]), NN_OK);
    cr_expect_eq(scratch_destroyed, 1, "evicted");
    nn__cache_get_stats(c, &st);
    cr_expect_eq(st.evictions, 1);
    cr_expect_eq(st.known_records, 0, "its record is not kept");
    cr_expect_eq(st.device_records, 1, "the probe is published");
    cr_expect_null(nn__cache_lookup_known(c, 10, &k, NULL));

    cr_expect_eq(nn__cache_add_known(NULL, c, 10, &k, &no_record, NULL, 0), NN_E_INVALID_ARG);
    cr_expect(strstr(nn_last_error()->message, "kind 10 (scratch) is not persisted"), "%s",
              nn_last_error()->message);
    cr_expect_eq(nn__cache_known_count(c), 0);
    nn__cache_destroy(c);
}

/* A file an older writer made, whose kind 10 was persisted: its scratch records are skipped and
 * counted, the others load. */
Test(cache, plan_file_skips_records_of_a_kind_not_persisted)
{
    struct nn__cache *old = new_cache(with_saved_scratch, 2, 8);
    fill_both(old);
    struct nn__gpu_id gpu = fx_gpu();
    unsigned char *buf;
    size_t len;
    cr_assert_eq(nn__plan_file_encode(NULL, old, FX_CUDNN_VERSION, &gpu, &buf, &len), NN_OK);
    struct nn__cache *d = new_cache(with_scratch, 2, 8);
    cr_assert_eq(nn__plan_file_decode(NULL, d, "t", buf, len, FX_CUDNN_VERSION, &gpu), NN_OK, "%s",
                 nn_last_error()->message);
    nn_plan_cache_stats st;
    nn__cache_get_stats(d, &st);
    cr_expect_eq(st.records_skipped, 3, "the scratch records");
    cr_expect_eq(st.records_loaded, 3);
    cr_expect_eq(st.known_records, 3);
    struct scratch_key k = scratch_key(1);
    cr_expect_null(nn__cache_lookup_known(d, 10, &k, NULL));
    struct probe_key pk = probe_key(2, 0);
    cr_expect_not_null(nn__cache_lookup_known(d, 9, &pk, NULL));
    nn__host_free(buf);
    nn__cache_destroy(d);
    nn__cache_destroy(old);
}

Test(cache, kind_flags_are_checked)
{
    struct nn__cache *c = (void *)1;
    struct nn__cache_kind bad = scratch_kind;
    bad.flags = 2;
    const struct nn__cache_kind *one[] = {&bad};
    cr_expect_eq(nn__cache_create(NULL, one, 1, 4, &c), NN_E_INVALID_ARG);
    cr_expect_null(c);
    cr_expect(strstr(nn_last_error()->message, "kind 0 (scratch) has unknown flag bits"), "%s",
              nn_last_error()->message);
}

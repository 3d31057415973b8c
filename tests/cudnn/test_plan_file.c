/* The plan file: round trip, identity checks, corruption of every kind, concurrent saves,
 * allocation failures, and the fuzz corpus replayed through the loader. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "nn_config.h"
#include "nnprim/nnprim.h"

#include "core/alloc.h"
#include "conv/conv_plan_key.h"
#include "cudnn/plan_cache.h"
#include "plan_fixtures.h"

static int plan_token;

static struct nn__cache *new_cache(int capacity)
{
    struct nn__cache *c = NULL;
    cr_assert_eq(fx_cache_create(NULL, capacity, &c), NN_OK);
    return c;
}

/* A cache with live plans for seeds [first, first + live) and known records for the next
 * `known` seeds. */
static struct nn__cache *filled_cache(int first, int live, int known)
{
    struct nn__cache *c = new_cache(live > 0 ? live : 1);
    char json[64];
    for (int s = first; s < first + live; s++) {
        struct nn__conv_key k = fx_key(s);
        struct nn__plan_record r = fx_record(s, json);
        cr_assert_eq(nn__plan_cache_insert(NULL, c, NN__CONV_KIND_ID, &k, &r, &plan_token), NN_OK);
    }
    for (int s = first + live; s < first + live + known; s++) {
        struct nn__conv_key k = fx_key(s);
        struct nn__plan_record r = fx_record(s, json);
        cr_assert_eq(nn__plan_cache_add_known(NULL, c, NN__CONV_KIND_ID, &k, &r), NN_OK);
    }
    return c;
}

static void encode(const struct nn__cache *c, unsigned char **buf, size_t *len)
{
    struct nn__gpu_id gpu = fx_gpu();
    cr_assert_eq(nn__plan_file_encode(NULL, c, FX_CUDNN_VERSION, &gpu, buf, len), NN_OK);
}

/* The version-2 image of c, as an older build wrote it (free() it). */
static void encode_v2(const struct nn__cache *c, unsigned char **buf, size_t *len)
{
    struct nn__gpu_id gpu = fx_gpu();
    *buf = fx_plan_file_v2(c, FX_CUDNN_VERSION, &gpu, len);
    cr_assert_not_null(*buf);
}

static nn_status decode(struct nn__cache *c, const unsigned char *buf, size_t len)
{
    struct nn__gpu_id gpu = fx_gpu();
    return nn__plan_file_decode(NULL, c, "test", buf, len, FX_CUDNN_VERSION, &gpu);
}

/* The known records of c are exactly seeds [first, first + n). */
static void expect_known_seeds(const struct nn__cache *c, int first, int n)
{
    cr_expect_eq(nn__cache_known_count(c), (size_t)n);
    char json[64];
    for (int s = first; s < first + n; s++) {
        struct nn__conv_key k = fx_key(s);
        struct nn__plan_record want = fx_record(s, json);
        const struct nn__plan_record *got = nn__plan_cache_lookup_known(c, NN__CONV_KIND_ID, &k);
        cr_assert_not_null(got, "seed %d missing", s);
        cr_expect(fx_record_equal(got, &want), "seed %d differs", s);
        cr_expect_eq(got->json[got->json_len], '\0');
    }
}

static void make_temp_dir(char *dir, size_t cap)
{
    snprintf(dir, cap, "/tmp/nnprim-planfile-XXXXXX");
    cr_assert_not_null(mkdtemp(dir), "mkdtemp: %s", strerror(errno));
}

static int count_dir_entries(const char *dir)
{
    DIR *d = opendir(dir);
    cr_assert_not_null(d);
    int n = 0;
    for (struct dirent *e; (e = readdir(d));)
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) n++;
    closedir(d);
    return n;
}

static void remove_dir(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d) return;
    char p[512];
    for (struct dirent *e; (e = readdir(d));) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        unlink(p);
    }
    closedir(d);
    rmdir(dir);
}

/* ---------------------------------------------------------------------------------------------
 * Round trip
 */

Test(plan_file, round_trip_in_memory)
{
    /* Seeds 1..11 cover records with and without JSON, build time and quick alternate (with
     * knobs: 1, 4, 7, 10; without knobs: 2, 5, 8, 11; none: 3, 6, 9). */
    char json[64];
    int quick_knobs = 0, quick_bare = 0, no_quick = 0, no_build = 0;
    for (int s = 1; s <= 11; s++) {
        struct nn__plan_record r = fx_record(s, json);
        cr_assert_null(nn__plan_record_invalid(&r), "fixture seed %d", s);
        quick_knobs += r.quick.engine >= 0 && r.quick.knob_count > 0;
        quick_bare += r.quick.engine >= 0 && r.quick.knob_count == 0;
        no_quick += r.quick.engine == -1;
        no_build += r.build_ms == -1;
    }
    cr_assert(quick_knobs >= 2 && quick_bare >= 2 && no_quick >= 2 && no_build >= 2);
    struct nn__cache *c = filled_cache(1, 6, 5);
    unsigned char *buf;
    size_t len;
    encode(c, &buf, &len);
    struct nn__cache *d = new_cache(8);
    cr_assert_eq(decode(d, buf, len), NN_OK, "%s", nn_last_error()->message);
    expect_known_seeds(d, 1, 11);
    nn_plan_cache_stats st;
    nn__cache_get_stats(d, &st);
    cr_expect_eq(st.records_loaded, 11);
    cr_expect_eq(st.records_skipped, 0);
    cr_expect_eq(st.entries, 0, "loaded records are known records, not live plans");

    /* Saving what was loaded gives the same bytes back (known records keep the file order). */
    unsigned char *again;
    size_t again_len;
    encode(d, &again, &again_len);
    cr_expect_eq(again_len, len);
    cr_expect_eq(memcmp(again, buf, len), 0);
    nn__host_free(again);
    nn__host_free(buf);
    nn__cache_destroy(d);
    nn__cache_destroy(c);
}

Test(plan_file, empty_cache_round_trip)
{
    struct nn__cache *c = new_cache(1);
    unsigned char *buf;
    size_t len;
    encode(c, &buf, &len);
    cr_expect_eq(len, 8 + 4 + 8 + 12 + 4 + strlen("NVIDIA H200") + 4 + 8);
    cr_expect_eq(memcmp(buf, "NNPLANC\n", 8), 0);
    cr_expect_eq(buf[8], 3, "format version, little-endian");
    cr_expect_eq(decode(c, buf, len), NN_OK);
    cr_expect_eq(nn__cache_known_count(c), 0);
    nn__host_free(buf);
    nn__cache_destroy(c);
}

Test(plan_file, round_trip_through_a_file)
{
    char dir[64], path[128];
    make_temp_dir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/cache.plans", dir);
    struct nn__gpu_id gpu = fx_gpu();
    struct nn__cache *c = filled_cache(20, 3, 4);
    cr_assert_eq(nn__plan_file_save(NULL, c, path, FX_CUDNN_VERSION, &gpu), NN_OK, "%s",
                 nn_last_error()->message);
    cr_expect_eq(count_dir_entries(dir), 2, "the file and its lock file, no temporary file");
    struct stat sb;
    cr_assert_eq(stat(path, &sb), 0);
    cr_expect_eq(sb.st_mode & 0777, 0644);
    /* Saving again over the existing file merges the same records: nothing doubles. */
    cr_assert_eq(nn__plan_file_save(NULL, c, path, FX_CUDNN_VERSION, &gpu), NN_OK);
    struct nn__cache *d = new_cache(2);
    cr_assert_eq(nn__plan_file_load(NULL, d, path, FX_CUDNN_VERSION, &gpu), NN_OK, "%s",
                 nn_last_error()->message);
    expect_known_seeds(d, 20, 7);
    nn__cache_destroy(d);
    nn__cache_destroy(c);
    remove_dir(dir);
}

Test(plan_file, loading_merges_into_known_records_and_live_plans_win)
{
    struct nn__cache *file_cache = filled_cache(1, 0, 4); /* seeds 1..4 */
    unsigned char *buf;
    size_t len;
    encode(file_cache, &buf, &len);
    struct nn__cache *c = new_cache(4);
    char json[64];
    /* Seed 2 is live with another record; seed 9 is a known record already. */
    struct nn__conv_key k2 = fx_key(2), k9 = fx_key(9);
    struct nn__plan_record r = fx_record(30, json);
    cr_assert_eq(nn__plan_cache_insert(NULL, c, NN__CONV_KIND_ID, &k2, &r, &plan_token), NN_OK);
    r = fx_record(9, json);
    cr_assert_eq(nn__plan_cache_add_known(NULL, c, NN__CONV_KIND_ID, &k9, &r), NN_OK);
    cr_assert_eq(decode(c, buf, len), NN_OK);
    cr_expect_eq(nn__cache_known_count(c), 4, "seeds 1, 3, 4 and 9");
    cr_expect_null(nn__plan_cache_lookup_known(c, NN__CONV_KIND_ID, &k2));
    const struct nn__plan_record *live;
    cr_expect_eq(nn__plan_cache_lookup(c, NN__CONV_KIND_ID, &k2, &live), &plan_token);
    cr_expect_eq(live->workspace, fx_record(30, json).workspace, "the live record is kept");
    cr_expect_not_null(nn__plan_cache_lookup_known(c, NN__CONV_KIND_ID, &k9));
    nn__host_free(buf);
    nn__cache_destroy(c);
    nn__cache_destroy(file_cache);
}

/* ---------------------------------------------------------------------------------------------
 * Identity: records of another cuDNN or GPU are skipped, counted, not trusted
 */

static void expect_skipped(uint64_t version, struct nn__gpu_id gpu, const char *why)
{
    struct nn__cache *c = filled_cache(1, 2, 3);
    unsigned char *buf;
    size_t len;
    cr_assert_eq(nn__plan_file_encode(NULL, c, version, &gpu, &buf, &len), NN_OK);
    struct nn__cache *d = new_cache(2);
    cr_expect_eq(decode(d, buf, len), NN_OK, "%s", why);
    nn_plan_cache_stats st;
    nn__cache_get_stats(d, &st);
    cr_expect_eq(st.records_skipped, 5, "%s", why);
    cr_expect_eq(st.records_loaded, 0, "%s", why);
    cr_expect_eq(st.known_records, 0, "%s", why);
    nn__host_free(buf);
    nn__cache_destroy(d);
    nn__cache_destroy(c);
}

Test(plan_file, other_cudnn_or_gpu_records_are_skipped)
{
    struct nn__gpu_id g = fx_gpu();
    expect_skipped(FX_CUDNN_VERSION + 100, g, "cudnn 9.15");
    expect_skipped(FX_CUDNN_VERSION - 1, g, "cudnn patch level");
    g = fx_gpu();
    snprintf(g.name, sizeof g.name, "NVIDIA H100 80GB HBM3");
    expect_skipped(FX_CUDNN_VERSION, g, "gpu name");
    g = fx_gpu();
    snprintf(g.name, sizeof g.name, "NVIDIA H200 ");
    expect_skipped(FX_CUDNN_VERSION, g, "gpu name with a trailing space");
    g = fx_gpu();
    g.cc_major = 8;
    expect_skipped(FX_CUDNN_VERSION, g, "cc major");
    g = fx_gpu();
    g.cc_minor = 1;
    expect_skipped(FX_CUDNN_VERSION, g, "cc minor");
    g = fx_gpu();
    g.sm_count = 114;
    expect_skipped(FX_CUDNN_VERSION, g, "sm count");
}

/* ---------------------------------------------------------------------------------------------
 * Corruption
 */

static void expect_format_error(const unsigned char *buf, size_t len, const char *what)
{
    struct nn__cache *c = new_cache(2);
    nn_status st = decode(c, buf, len);
    cr_expect_eq(st, NN_E_FORMAT, "%s: got %s", what, nn_status_name(st));
    cr_expect(strstr(nn_last_error()->message, "byte offset"), "%s: message: %s", what,
              nn_last_error()->message);
    nn_plan_cache_stats s;
    nn__cache_get_stats(c, &s);
    cr_expect_eq(s.known_records + s.records_loaded + s.records_skipped, 0,
                 "%s: the cache must stay empty", what);
    nn__cache_destroy(c);
}

static void expect_every_truncation_rejected(const unsigned char *buf, size_t len, const char *kind)
{
    char what[96];
    for (size_t n = 0; n < len; n++) {
        unsigned char *copy = malloc(n ? n : 1); /* exact size, so a read past n is caught */
        memcpy(copy, buf, n);
        snprintf(what, sizeof what, "%s truncated to %zu of %zu bytes", kind, n, len);
        expect_format_error(copy, n, what);
        free(copy);
    }
}

static void expect_every_flip_rejected(unsigned char *buf, size_t len, const char *kind)
{
    char what[96];
    for (size_t i = 0; i < len; i++) {
        for (int mask = 0x01; mask <= 0x80; mask <<= 7) { /* the low bit, then the high bit */
            buf[i] ^= (unsigned char)mask;
            snprintf(what, sizeof what, "%s byte %zu ^ 0x%02x", kind, i, mask);
            expect_format_error(buf, len, what);
            buf[i] ^= (unsigned char)mask;
        }
        buf[i] ^= 0xFF;
        snprintf(what, sizeof what, "%s byte %zu ^ 0xff", kind, i);
        expect_format_error(buf, len, what);
        buf[i] ^= 0xFF;
    }
    struct nn__cache *d = new_cache(2);
    cr_expect_eq(decode(d, buf, len), NN_OK, "%s: the restored image loads again", kind);
    nn__cache_destroy(d);
}

/* Seeds 1..4: quick alternates with knobs (1, 4) and without (2), none (3). */
Test(plan_file, truncation_at_every_byte_is_rejected)
{
    struct nn__cache *c = filled_cache(1, 2, 2);
    unsigned char *buf;
    size_t len;
    encode(c, &buf, &len);
    expect_every_truncation_rejected(buf, len, "v3");
    nn__host_free(buf);
    encode_v2(c, &buf, &len);
    expect_every_truncation_rejected(buf, len, "v2");
    free(buf);
    nn__cache_destroy(c);
}

Test(plan_file, every_flipped_byte_is_rejected)
{
    struct nn__cache *c = filled_cache(1, 2, 2);
    unsigned char *buf;
    size_t len;
    encode(c, &buf, &len);
    expect_every_flip_rejected(buf, len, "v3");
    nn__host_free(buf);
    encode_v2(c, &buf, &len);
    expect_every_flip_rejected(buf, len, "v2");
    free(buf);
    nn__cache_destroy(c);
}

Test(plan_file, extra_bytes_are_rejected)
{
    struct nn__cache *c = filled_cache(1, 1, 1);
    unsigned char *buf;
    size_t len;
    encode(c, &buf, &len);
    unsigned char *longer = malloc(len + 1);
    memcpy(longer, buf, len);
    longer[len] = 0;
    expect_format_error(longer, len + 1, "one extra byte");
    cr_expect(strstr(nn_last_error()->message, "extra bytes"));
    free(longer);
    nn__host_free(buf);
    nn__cache_destroy(c);
}

/* Rewrite a field and fix the checksum, so the decoder's own range checks are what reject it. */
static void put_le(unsigned char *p, uint64_t v, int bytes)
{
    fx_put_le(p, v, bytes);
}

static void reseal(unsigned char *buf, size_t len)
{
    put_le(buf + len - 8, fx_fnv1a64(buf, len - 8), 8);
}

/* In the version-2 image (v2 1) or the version-3 image (v2 0) of seed 1's record (with JSON),
 * rewrite a field and reseal: the decoder must refuse it, naming field. */
static void expect_field_rejected_in(int v2, size_t offset, uint64_t value, int bytes,
                                     const char *field)
{
    struct nn__cache *c = filled_cache(1, 1, 0);
    unsigned char *buf;
    size_t len;
    if (v2)
        encode_v2(c, &buf, &len);
    else
        encode(c, &buf, &len);
    put_le(buf + offset, value, bytes);
    reseal(buf, len);
    expect_format_error(buf, len, field);
    cr_expect(strstr(nn_last_error()->message, field), "wanted '%s' in: %s", field,
              nn_last_error()->message);
    if (v2)
        free(buf);
    else
        nn__host_free(buf);
    nn__cache_destroy(c);
}

static void expect_field_rejected(size_t offset, uint64_t value, int bytes, const char *field)
{
    expect_field_rejected_in(1, offset, value, bytes, field);
}

/* Offsets in the file of filled_cache(1, 1, 0) with fx_gpu(): the header is 8 + 4 + 8 + 12 + 4 +
 * 11 (name) + 4 = 51 bytes; the record's body length is at 51 and (version 2) its key starts at
 * 55. */
#define REC 55

Test(plan_file, wrong_magic_and_version)
{
    expect_field_rejected(0, 0x4e4e504c414e4331u, 8, "magic"); /* "1CNALPNN" */
    expect_field_rejected(8, 4, 4, "format version");
    cr_expect(
        strstr(nn_last_error()->message, "format version 4, this build reads versions 1 to 3"),
        "message: %s", nn_last_error()->message);
    expect_field_rejected(8, 0, 4, "format version");
    cr_expect(
        strstr(nn_last_error()->message, "format version 0, this build reads versions 1 to 3"),
        "message: %s", nn_last_error()->message);
    expect_field_rejected(8, 0xFFFFFFFFu, 4, "format version");
}

Test(plan_file, hostile_lengths_and_values)
{
    expect_field_rejected(32, 256, 4, "gpu name length");
    expect_field_rejected(32, 0xFFFFFFFFu, 4, "gpu name length");
    expect_field_rejected(36, 0, 1, "gpu name"); /* a NUL inside the name */
    expect_field_rejected(47, NN__CACHE_KNOWN_MAX + 1, 4, "record count");
    expect_field_rejected(47, 2, 4, "record 1 record body"); /* says 2 records, holds 1 */
    expect_field_rejected(47, 0xFFFFFFFFu, 4, "record count");
    expect_field_rejected(51, 0xFFFFFFFFu, 4, "record body");
    expect_field_rejected(51, 3, 4, "body length"); /* shorter than its fields */
    expect_field_rejected(REC + 0, 0, 4, "key op");
    expect_field_rejected(REC + 0, NN__CONV_V1_OP_COUNT, 4, "key op");
    expect_field_rejected(REC + 4, 9, 4, "key compute");
    expect_field_rejected(REC + 8, 2, 4, "key math_mode");
    expect_field_rejected(REC + 12, 2, 4, "key deterministic");
    expect_field_rejected(REC + 24, 9, 4, "key operand rank");
    expect_field_rejected(REC + 24, 0xFFFFFFFFu, 4, "key operand rank");
    expect_field_rejected(REC + 28, 0, 4, "key operand dtype");
    expect_field_rejected(REC + 32, (uint64_t)-16, 8, "key operand alignment");
    expect_field_rejected(REC + 40, 0, 8, "key operand dim");
    expect_field_rejected(REC + 48, (uint64_t)-1, 8, "key operand stride");
    /* x, w, y of rank 4: 3 * (16 + 64) = 240 bytes; then 5 absent operands of 16 bytes. */
    expect_field_rejected(REC + 268, 1, 4, "key operand dtype"); /* b absent, dtype set */
    expect_field_rejected(REC + 272, 16, 8, "key operand alignment");
    expect_field_rejected(REC + 344, 4, 4, "key spatial_rank");
    expect_field_rejected(REC + 348, 0xFFFFFFFFu, 4, "key groups");
    expect_field_rejected(REC + 352, (uint64_t)-1, 8, "key stride");
    /* 2 x 5 spatial fields of 8 bytes; mode, activation, pool_mode, flags; alpha at REC + 448 */
    expect_field_rejected(REC + 448, 0x7ff0000000000000u, 8, "key alpha"); /* +inf */
    expect_field_rejected(REC + 456, 0x7ff8000000000000u, 8, "key beta");  /* NaN */
    /* engine at REC + 464, workspace +472, time +480, knob_count +488 */
    expect_field_rejected(REC + 464, (uint64_t)-5, 8, "engine");
    expect_field_rejected(REC + 480, 0x7ff8000000000000u, 8, "time_us"); /* NaN */
    expect_field_rejected(REC + 480, 0xc000000000000000u, 8, "time_us"); /* -2.0 */
    expect_field_rejected(REC + 488, NN__PLAN_KNOBS_MAX + 1, 4, "knob_count");
    expect_field_rejected(REC + 488, 0xFFFFFFFFu, 4, "knob_count");
    /* seed 1 has 1 knob (16 bytes): json_len at REC + 508 */
    expect_field_rejected(REC + 508, NN__PLAN_JSON_MAX + 1, 4, "json_len");
    expect_field_rejected(REC + 508, 0xFFFFFFF0u, 4, "json_len");
    expect_field_rejected(REC + 508, 1000, 4, "json");
    /* seed 1's JSON is 21 bytes: build_ms at REC + 533, quick_engine +541, quick_knob_count
     * +549, its one quick knob +553..+569 (the end of the record) */
    expect_field_rejected(REC + 533, 0x7ff8000000000000u, 8, "build_ms"); /* NaN */
    expect_field_rejected(REC + 533, 0x7ff0000000000000u, 8, "build_ms"); /* +inf */
    expect_field_rejected(REC + 533, 0xc000000000000000u, 8, "build_ms"); /* -2.0 */
    expect_field_rejected(REC + 541, (uint64_t)-2, 8, "quick_engine");
    cr_expect(strstr(nn_last_error()->message, "record 0 quick_engine at byte offset 596: "),
              "message: %s", nn_last_error()->message);
    expect_field_rejected(REC + 541, (uint64_t)INT64_MIN, 8, "quick_engine");
    /* quick engine -1 (none) with a quick knob */
    expect_field_rejected(REC + 541, (uint64_t)-1, 8, "quick_knob_count");
    expect_field_rejected(REC + 549, NN__PLAN_KNOBS_MAX + 1, 4, "quick_knob_count");
    /* refused before any knob is read (the 65 knobs would run past the file) */
    cr_expect(strstr(nn_last_error()->message, "record 0 quick_knob_count at byte offset 604: "),
              "message: %s", nn_last_error()->message);
    expect_field_rejected(REC + 549, 0xFFFFFFFFu, 4, "quick_knob_count");
    /* none: the record holds 16 bytes more than its fields */
    expect_field_rejected(REC + 549, 0, 4, "body length");
    /* one more: the second knob would run past the end of the file */
    expect_field_rejected(REC + 549, 2, 4, "quick knob value");
}

/* The offsets above, checked against the version-2 writer: seed 1's record ends after one quick
 * knob. */
Test(plan_file, record_layout_matches_the_offsets_of_the_field_tests)
{
    struct nn__cache *c = filled_cache(1, 1, 0);
    unsigned char *buf;
    size_t len;
    encode_v2(c, &buf, &len);
    cr_expect_eq(len, REC + 569 + 8, "header, record, checksum");
    cr_expect_eq(fx_get_u32(buf + 51), 569, "body length");
    cr_expect_eq(fx_get_u32(buf + REC + 508), 21, "seed 1's json_len");
    double build_ms;
    uint64_t bits = 0;
    for (int i = 0; i < 8; i++)
        bits |= (uint64_t)buf[REC + 533 + i] << (8 * i);
    memcpy(&build_ms, &bits, sizeof bits);
    cr_expect_eq(build_ms, 0.125, "seed 1's build_ms");
    cr_expect_eq(fx_get_u32(buf + REC + 541), 11, "seed 1's quick engine, low half");
    cr_expect_eq(fx_get_u32(buf + REC + 549), 1, "seed 1's quick knob count");
    cr_expect_eq(fx_get_u32(buf + REC + 553), 10, "seed 1's quick knob type");
    free(buf);
    nn__cache_destroy(c);
}

/* ---------------------------------------------------------------------------------------------
 * Version 1 files (no build time, no quick alternate) still load
 */

/* A version-1 image of seeds [first, first + n) (free() it): their fx_record()s without a quick
 * alternate (version 1 has none), written as version 2 and rewritten as version 1. */
static void encode_v1(int first, int n, unsigned char **buf, size_t *len)
{
    struct nn__cache *c = new_cache(1);
    char json[64];
    for (int s = first; s < first + n; s++) {
        struct nn__conv_key k = fx_key(s);
        struct nn__plan_record r = fx_record(s, json);
        r.quick.engine = -1;
        r.quick.knob_count = 0;
        cr_assert_eq(nn__plan_cache_add_known(NULL, c, NN__CONV_KIND_ID, &k, &r), NN_OK);
    }
    size_t v2_len;
    encode_v2(c, buf, &v2_len);
    *len = fx_plan_file_to_v1(*buf);
    cr_assert_eq(*len, v2_len - 20 * (size_t)n);
    cr_assert_eq((*buf)[8], 1);
    nn__cache_destroy(c);
}

/* The known records of c are seeds [first, first + n) as a version-1 file holds them. */
static void expect_v1_seeds(const struct nn__cache *c, int first, int n)
{
    cr_expect_eq(nn__cache_known_count(c), (size_t)n);
    char json[64];
    for (int s = first; s < first + n; s++) {
        struct nn__conv_key k = fx_key(s);
        struct nn__plan_record want = fx_record(s, json);
        want.build_ms = -1;
        want.quick.engine = -1;
        want.quick.knob_count = 0;
        const struct nn__plan_record *got = nn__plan_cache_lookup_known(c, NN__CONV_KIND_ID, &k);
        cr_assert_not_null(got, "seed %d missing", s);
        cr_expect(fx_record_equal(got, &want), "seed %d differs", s);
        cr_expect_eq(got->build_ms, -1.0, "seed %d", s);
        cr_expect_eq(got->quick.engine, -1, "seed %d", s);
        cr_expect_eq(got->quick.knob_count, 0, "seed %d", s);
    }
}

Test(plan_file, version_1_file_loads_with_defaults_and_saves_as_version_3)
{
    unsigned char *v1;
    size_t v1_len;
    encode_v1(1, 7, &v1, &v1_len);
    struct nn__cache *c = new_cache(2);
    cr_assert_eq(decode(c, v1, v1_len), NN_OK, "%s", nn_last_error()->message);
    expect_v1_seeds(c, 1, 7);
    nn_plan_cache_stats st;
    nn__cache_get_stats(c, &st);
    cr_expect_eq(st.records_loaded, 7);

    /* Saved again, the records are written as version 3 with the defaults, and load back. */
    unsigned char *v3;
    size_t v3_len;
    encode(c, &v3, &v3_len);
    cr_expect_eq(v3[8], 3);
    struct nn__cache *d = new_cache(2);
    cr_assert_eq(decode(d, v3, v3_len), NN_OK, "%s", nn_last_error()->message);
    expect_v1_seeds(d, 1, 7);
    nn__host_free(v3);
    free(v1);
    nn__cache_destroy(d);
    nn__cache_destroy(c);
}

Test(plan_file, version_2_records_under_a_version_1_header_are_rejected)
{
    /* A version-2 image relabelled as version 1: each record has 20 bytes more than a version-1
     * record's fields take. */
    struct nn__cache *c = filled_cache(3, 1, 0); /* seed 3: no quick alternate */
    unsigned char *buf;
    size_t len;
    encode_v2(c, &buf, &len);
    put_le(buf + 8, 1, 4);
    reseal(buf, len);
    expect_format_error(buf, len, "version 2 records in a version 1 file");
    cr_expect(strstr(nn_last_error()->message, "body length"), "message: %s",
              nn_last_error()->message);
    free(buf);
    nn__cache_destroy(c);
}

Test(plan_file, version_1_truncations_and_flipped_bytes_are_rejected)
{
    unsigned char *buf;
    size_t len;
    encode_v1(1, 4, &buf, &len);
    expect_every_truncation_rejected(buf, len, "v1");
    expect_every_flip_rejected(buf, len, "v1");
    free(buf);
}

/* ---------------------------------------------------------------------------------------------
 * Files: errors, concurrency
 */

/* ---------------------------------------------------------------------------------------------
 * Format 3 files of kind 1 (written before conv's key became kind 7) load as kind 7
 */

/* The format-3 image of seeds [first, first + n) as a build with kind 1 wrote it: their kind-1
 * keys (fx_key_v1) and records, plus one pooling record, which is skipped. */
static void encode_kind_1(int first, int n, unsigned char **buf, size_t *len)
{
    struct nn__cache *c = NULL;
    cr_assert_eq(fx_v1_cache_create(NULL, 1, &c), NN_OK);
    char json[64];
    for (int s = first; s < first + n; s++) {
        struct nn__conv_key k = fx_key(s);
        struct nn__conv_key_v1 old = fx_key_v1(&k);
        struct nn__plan_record r = fx_record(s, json);
        cr_assert_eq(nn__plan_cache_add_known(NULL, c, NN__CONV_KIND_V1_ID, &old, &r), NN_OK);
    }
    struct nn__conv_key k = fx_key(first);
    struct nn__conv_key_v1 pool = fx_key_v1(&k);
    pool.op = NN__CONV_V1_POOL_FWD;
    pool.p.window[0] = pool.p.window[1] = 2;
    struct nn__plan_record r = fx_record(first, json);
    cr_assert_eq(nn__plan_cache_add_known(NULL, c, NN__CONV_KIND_V1_ID, &pool, &r), NN_OK);
    encode(c, buf, len);
    cr_assert_eq(fx_get_u32(*buf + 55), NN__CONV_KIND_V1_ID, "the first record is of kind 1");
    nn__cache_destroy(c);
}

Test(plan_file, kind_1_records_import_as_kind_7_and_save_as_kind_7)
{
    unsigned char *buf;
    size_t len;
    encode_kind_1(1, 9, &buf, &len);
    struct nn__cache *c = new_cache(2);
    cr_assert_eq(decode(c, buf, len), NN_OK, "%s", nn_last_error()->message);
    nn__host_free(buf);
    expect_known_seeds(c, 1, 9);
    nn_plan_cache_stats st;
    nn__cache_get_stats(c, &st);
    cr_expect_eq(st.records_loaded, 9);
    cr_expect_eq(st.records_skipped, 1, "the pooling record");
    /* Saved again, the records are kind 7's and load as they are. */
    encode(c, &buf, &len);
    cr_expect_eq(fx_get_u32(buf + 55), NN__CONV_KIND_ID);
    struct nn__cache *d = new_cache(2);
    cr_assert_eq(decode(d, buf, len), NN_OK, "%s", nn_last_error()->message);
    expect_known_seeds(d, 1, 9);
    nn__host_free(buf);
    nn__cache_destroy(d);
    nn__cache_destroy(c);
}

/* A kind-1 key that fails kind 1's range check is a format error, as before; the file's bytes are
 * the kind-1 layout (its body length is kind 1's). */
Test(plan_file, kind_1_keys_are_range_checked_in_their_layout)
{
    unsigned char *buf;
    size_t len;
    encode_kind_1(1, 1, &buf, &len);
    put_le(buf + 59, 9, 4); /* the kind-1 key's op */
    reseal(buf, len);
    expect_format_error(buf, len, "key");
    cr_expect(strstr(nn_last_error()->message, "op is not a known op kind"), "%s",
              nn_last_error()->message);
    nn__host_free(buf);
}

/* Kind 7 takes over kind 1: a table that also registers kind 1 is refused. */
Test(plan_file, a_table_with_the_retired_kind_is_refused)
{
    const struct nn__cache_kind *const both[] = {&fx_plan_kind, &fx_v1_kind};
    struct nn__cache *c = (void *)1;
    cr_expect_eq(nn__cache_create(NULL, both, 2, 1, &c), NN_E_INVALID_ARG);
    cr_expect_null(c);
    cr_expect(strstr(nn_last_error()->message, "has a legacy id that is a kind of the table"), "%s",
              nn_last_error()->message);
    /* A legacy hook must name a retired id other than its own kind's, and import. */
    struct nn__cache_legacy leg = nn__conv_kind_legacy;
    struct nn__cache_kind k = fx_plan_kind;
    k.legacy = &leg;
    const struct nn__cache_kind *const one[] = {&k};
    leg.import = NULL;
    cr_expect_eq(nn__cache_create(NULL, one, 1, 1, &c), NN_E_INVALID_ARG);
    cr_expect(strstr(nn_last_error()->message, "without an import"), "%s",
              nn_last_error()->message);
    leg = nn__conv_kind_legacy;
    leg.id = k.id;
    cr_expect_eq(nn__cache_create(NULL, one, 1, 1, &c), NN_E_INVALID_ARG);
    leg.id = NN__CACHE_KIND_ID_MAX + 1;
    cr_expect_eq(nn__cache_create(NULL, one, 1, 1, &c), NN_E_INVALID_ARG);
    leg = nn__conv_kind_legacy;
    cr_assert_eq(nn__cache_create(NULL, one, 1, 1, &c), NN_OK);
    cr_expect_eq(nn__cache_kind_importing(c, NN__CONV_KIND_V1_ID), &k);
    cr_expect_null(nn__cache_kind_importing(c, NN__CONV_KIND_ID));
    nn__cache_destroy(c);
}

Test(plan_file, missing_file_is_an_io_error_naming_path_and_reason)
{
    struct nn__gpu_id gpu = fx_gpu();
    struct nn__cache *c = new_cache(2);
    nn_status st = nn__plan_file_load(NULL, c, "/nonexistent/nnprim.plans", FX_CUDNN_VERSION, &gpu);
    cr_expect_eq(st, NN_E_IO);
    const char *m = nn_last_error()->message;
    cr_expect(strstr(m, "/nonexistent/nnprim.plans"), "message: %s", m);
    cr_expect(strstr(m, strerror(ENOENT)), "message: %s", m);
    cr_expect_eq(nn__plan_file_load(NULL, c, "/tmp", FX_CUDNN_VERSION, &gpu), NN_E_IO);
    nn__cache_destroy(c);
}

Test(plan_file, save_into_a_missing_directory_is_an_io_error)
{
    struct nn__gpu_id gpu = fx_gpu();
    struct nn__cache *c = filled_cache(1, 1, 1);
    nn_status st =
        nn__plan_file_save(NULL, c, "/nonexistent/dir/nnprim.plans", FX_CUDNN_VERSION, &gpu);
    cr_expect_eq(st, NN_E_IO);
    const char *m = nn_last_error()->message;
    cr_expect(strstr(m, "/nonexistent/dir/nnprim.plans"), "message: %s", m);
    cr_expect(strstr(m, strerror(ENOENT)), "message: %s", m);
    nn__cache_destroy(c);
}

/* A directory at path is neither read nor replaced (a non-empty one could not be renamed over
 * anyway), and nothing is left behind but the lock file. */
Test(plan_file, a_directory_at_path_is_refused_without_a_temporary_file)
{
    char dir[64], path[128];
    make_temp_dir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/adir", dir);
    cr_assert_eq(mkdir(path, 0755), 0);
    char inner[160];
    snprintf(inner, sizeof inner, "%s/keep", path);
    FILE *f = fopen(inner, "w"); /* a non-empty directory cannot be renamed over */
    cr_assert_not_null(f);
    fclose(f);
    struct nn__gpu_id gpu = fx_gpu();
    struct nn__cache *c = filled_cache(1, 1, 1);
    cr_expect_eq(nn__plan_file_save(NULL, c, path, FX_CUDNN_VERSION, &gpu), NN_E_IO);
    cr_expect(strstr(nn_last_error()->message, "not a regular file"), "message: %s",
              nn_last_error()->message);
    cr_expect_eq(count_dir_entries(dir), 2, "the directory and the lock file, no temporary file");
    nn__cache_destroy(c);
    unlink(inner);
    rmdir(path);
    char lock[200];
    snprintf(lock, sizeof lock, "%s.lock", path);
    unlink(lock);
    remove_dir(dir);
}

/* Several processes save different caches to one path at the same time, many times over; the
 * file left is complete and, the saves merging under the lock, holds every writer's records. */
Test(plan_file, concurrent_saves_leave_one_complete_file_with_every_record)
{
    char dir[64], path[128];
    make_temp_dir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/shared.plans", dir);
    enum { WRITERS = 6, ROUNDS = 30, PER = 8 };
    pid_t pids[WRITERS];
    for (int w = 0; w < WRITERS; w++) {
        pids[w] = fork();
        cr_assert_neq(pids[w], -1);
        if (pids[w] == 0) {
            struct nn__gpu_id gpu = fx_gpu();
            struct nn__cache *c = NULL;
            if (fx_cache_create(NULL, PER, &c) != NN_OK) _exit(2);
            char json[64];
            for (int s = 100 * w; s < 100 * w + PER; s++) {
                struct nn__conv_key k = fx_key(s);
                struct nn__plan_record r = fx_record(s, json);
                if (nn__plan_cache_add_known(NULL, c, NN__CONV_KIND_ID, &k, &r) != NN_OK) _exit(3);
            }
            for (int i = 0; i < ROUNDS; i++)
                if (nn__plan_file_save(NULL, c, path, FX_CUDNN_VERSION, &gpu) != NN_OK) _exit(4);
            nn__cache_destroy(c);
            _exit(0);
        }
    }
    for (int w = 0; w < WRITERS; w++) {
        int status;
        cr_assert_eq(waitpid(pids[w], &status, 0), pids[w]);
        cr_expect(WIFEXITED(status) && WEXITSTATUS(status) == 0, "writer %d: status %d", w, status);
    }
    cr_expect_eq(count_dir_entries(dir), 2, "the file and its lock, no temporary files");
    struct nn__gpu_id gpu = fx_gpu();
    struct nn__cache *c = new_cache(2);
    cr_assert_eq(nn__plan_file_load(NULL, c, path, FX_CUDNN_VERSION, &gpu), NN_OK, "%s",
                 nn_last_error()->message);
    cr_expect_eq(nn__cache_known_count(c), (size_t)(WRITERS * PER));
    char json[64];
    for (int w = 0; w < WRITERS; w++) {
        for (int s = 100 * w; s < 100 * w + PER; s++) {
            struct nn__conv_key k = fx_key(s);
            struct nn__plan_record want = fx_record(s, json);
            const struct nn__plan_record *got =
                nn__plan_cache_lookup_known(c, NN__CONV_KIND_ID, &k);
            cr_expect(got && fx_record_equal(got, &want), "writer %d seed %d", w, s);
        }
    }
    nn__cache_destroy(c);
    remove_dir(dir);
}

/* ---------------------------------------------------------------------------------------------
 * Host allocation failures: each one gives NN_E_OOM_HOST and changes nothing
 */

Test(plan_file, allocation_failures_in_encode_decode_save_load)
{
    char dir[64], path[128];
    make_temp_dir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/oom.plans", dir);
    struct nn__gpu_id gpu = fx_gpu();
    struct nn__cache *c = filled_cache(1, 2, 3);
    int kinds = 0;
    for (int op = 0; op < 3; op++) {
        for (long n = 1;; n++) {
            struct nn__cache *d = new_cache(2);
            unsigned char *buf = NULL;
            size_t len = 0;
            nn__host_alloc_fail_at(n);
            nn_status st = op == 0
                               ? nn__plan_file_encode(NULL, c, FX_CUDNN_VERSION, &gpu, &buf, &len)
                           : op == 1 ? nn__plan_file_save(NULL, c, path, FX_CUDNN_VERSION, &gpu)
                                     : nn__plan_file_load(NULL, d, path, FX_CUDNN_VERSION, &gpu);
            nn__host_alloc_fail_at(0);
            nn__host_free(buf);
            if (st == NN_OK) {
                if (op == 2) expect_known_seeds(d, 1, 5);
                nn__cache_destroy(d);
                cr_expect_gt(n, 1, "op %d made no allocation to fail", op);
                kinds++;
                break;
            }
            cr_assert_eq(st, NN_E_OOM_HOST, "op %d, allocation %ld: %s (%s)", op, n,
                         nn_status_name(st), nn_last_error()->message);
            cr_expect_null(buf);
            cr_expect_eq(nn__cache_known_count(d), 0, "op %d, allocation %ld", op, n);
            nn__cache_destroy(d);
            cr_assert_lt(n, 200);
        }
    }
    cr_expect_eq(kinds, 3);
    cr_expect_eq(count_dir_entries(dir), 2, "the file and its lock");
    nn__cache_destroy(c);
    remove_dir(dir);
}

/* ---------------------------------------------------------------------------------------------
 * The fuzz corpus (tests/cudnn/plan_file_corpus, grown by tools/fuzz.sh --merge): every file
 * loads or is rejected with NN_E_FORMAT, and never crashes.
 */

Test(plan_file, corpus_replays_without_crashing)
{
    const char *dirname = NN_SOURCE_ROOT "/tests/cudnn/plan_file_corpus";
    DIR *d = opendir(dirname);
    cr_assert_not_null(d, "%s: %s", dirname, strerror(errno));
    struct nn__gpu_id gpu = fx_gpu();
    int files = 0, loaded = 0;
    char p[1024];
    for (struct dirent *e; (e = readdir(d));) {
        if (e->d_name[0] == '.') continue;
        snprintf(p, sizeof p, "%s/%s", dirname, e->d_name);
        struct nn__cache *c = new_cache(2);
        nn_status st = nn__plan_file_load(NULL, c, p, FX_CUDNN_VERSION, &gpu);
        cr_expect(st == NN_OK || st == NN_E_FORMAT, "%s: %s (%s)", e->d_name, nn_status_name(st),
                  nn_last_error()->message);
        if (st == NN_E_FORMAT)
            cr_expect_eq(nn__cache_known_count(c), 0, "%s: rejected but kept records", e->d_name);
        loaded += st == NN_OK;
        files++;
        nn__cache_destroy(c);
    }
    closedir(d);
    cr_expect_geq(files, 10, "the corpus has only %d files", files);
    cr_expect_geq(loaded, 1, "no corpus file loads: the seeds are missing");
}

static int expect_v1_defaults(void *arg, const void *key, const struct nn__plan_record *r)
{
    const struct nn__conv_key *k = key;
    (void)k;
    int *n = arg;
    cr_expect_eq(r->build_ms, -1.0);
    cr_expect_eq(r->quick.engine, -1);
    cr_expect_eq(r->quick.knob_count, 0);
    (*n)++;
    return 0;
}

/* seed-v1-every-op (fuzz/make_seeds.c) is a version-1 file; it is byte-identical to the
 * seed-every-op that the version-1 writer made, so it is a file an older build wrote. */
Test(plan_file, corpus_version_1_seed_loads_with_defaults)
{
    const char *path = NN_SOURCE_ROOT "/tests/cudnn/plan_file_corpus/seed-v1-every-op";
    FILE *f = fopen(path, "rb");
    cr_assert_not_null(f, "%s: %s", path, strerror(errno));
    unsigned char head[12];
    cr_assert_eq(fread(head, 1, sizeof head, f), sizeof head);
    fclose(f);
    cr_expect_eq(fx_get_u32(head + 8), 1, "format version");
    struct nn__gpu_id gpu = fx_gpu();
    struct nn__cache *c = new_cache(2);
    cr_assert_eq(nn__plan_file_load(NULL, c, path, FX_CUDNN_VERSION, &gpu), NN_OK, "%s",
                 nn_last_error()->message);
    int n = 0;
    nn__plan_cache_visit(c, NN__CONV_KIND_ID, expect_v1_defaults, &n);
    /* Seeds 10..21 cycle through the six op kinds of kind 1, their tensors always in the x, w
     * and y slots (fuzz/make_seeds.c): the two forwards (seeds 12 and 18) import into kind 7;
     * the gradients (whose tensors a real file holds in dx, dw, dy), the bias gradients and the
     * pooling records have no kind-7 key and are skipped. */
    cr_expect_eq(n, 2, "seed-every-op holds seeds 10..21, 2 of them forwards");
    nn_plan_cache_stats st;
    nn__cache_get_stats(c, &st);
    cr_expect_eq(st.records_skipped, 10);
    cr_expect_eq(st.records_loaded, 2);
    nn__cache_destroy(c);
}

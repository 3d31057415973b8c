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
    expect_every_truncation_rejected(buf, len, "image");
    nn__host_free(buf);
    nn__cache_destroy(c);
}

Test(plan_file, every_flipped_byte_is_rejected)
{
    struct nn__cache *c = filled_cache(1, 2, 2);
    unsigned char *buf;
    size_t len;
    encode(c, &buf, &len);
    expect_every_flip_rejected(buf, len, "image");
    nn__host_free(buf);
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

/* In the image of seed 1's record (a forward with JSON), rewrite a field and reseal: the decoder
 * must refuse it, naming field. */
static void expect_field_rejected(size_t offset, uint64_t value, int bytes, const char *field)
{
    struct nn__cache *c = filled_cache(1, 1, 0);
    unsigned char *buf;
    size_t len;
    encode(c, &buf, &len);
    put_le(buf + offset, value, bytes);
    reseal(buf, len);
    expect_format_error(buf, len, field);
    cr_expect(strstr(nn_last_error()->message, field), "wanted '%s' in: %s", field,
              nn_last_error()->message);
    nn__host_free(buf);
    nn__cache_destroy(c);
}

/* Offsets in the file of filled_cache(1, 1, 0) with fx_gpu(): the header is 8 + 4 + 8 + 12 + 4 +
 * 11 (name) + 4 = 51 bytes; the record's body length is at 51, its kind id at 55, its key at KEY,
 * its record at REC (KEY + the key's fields) and its blob length at BLOB (REC + the record's). */
#define KEY  59
#define REC  (KEY + nn__field_list_encoded_size(nn__conv_key_fields))
#define BLOB (REC + nn__field_list_encoded_size(nn__plan_record_fields))

/* The image's format version rewritten (and resealed): refused, the message naming the file's
 * version and this build's, and what to do. */
static void expect_version_refused(uint32_t version)
{
    char want[256];
    snprintf(want, sizeof want,
             "plan file test: format version at byte offset 8: the file is format version %u, "
             "this build reads version 3 only (delete it: the plans are tuned again and saved in "
             "version 3)",
             version);
    expect_field_rejected(8, version, 4, "format version");
    cr_expect_str_eq(nn_last_error()->message, want);
}

Test(plan_file, wrong_magic_and_every_other_version_are_refused)
{
    expect_field_rejected(0, 0x4e4e504c414e4331u, 8, "magic"); /* "1CNALPNN" */
    expect_version_refused(1);
    expect_version_refused(2);
    expect_version_refused(4);
    expect_version_refused(0);
    expect_version_refused(0xFFFFFFFFu);
}

/* A refused file (of another format version), loaded into a cache that holds live plans and known
 * records, leaves them and the statistics as they were; saving over it leaves the file as it was.
 */
Test(plan_file, a_refused_file_leaves_the_cache_and_the_file_unchanged)
{
    char dir[64], path[128];
    make_temp_dir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/old.plans", dir);
    struct nn__cache *old = filled_cache(40, 0, 3);
    unsigned char *buf;
    size_t len;
    encode(old, &buf, &len);
    nn__cache_destroy(old);
    put_le(buf + 8, 2, 4);
    reseal(buf, len);
    FILE *f = fopen(path, "wb");
    cr_assert_not_null(f);
    cr_assert_eq(fwrite(buf, 1, len, f), len);
    cr_assert_eq(fclose(f), 0);

    struct nn__gpu_id gpu = fx_gpu();
    struct nn__cache *c = filled_cache(1, 2, 3); /* seeds 1, 2 live; 3..5 known */
    nn_plan_cache_stats before, after;
    nn__cache_get_stats(c, &before);
    cr_expect_eq(nn__plan_file_load(NULL, c, path, FX_CUDNN_VERSION, &gpu), NN_E_FORMAT);
    cr_expect(strstr(nn_last_error()->message, "the file is format version 2, this build reads "
                                               "version 3 only"),
              "%s", nn_last_error()->message);
    nn__cache_get_stats(c, &after);
    cr_expect_eq(after.entries, before.entries);
    cr_expect_eq(after.known_records, before.known_records);
    cr_expect_eq(after.records_loaded, before.records_loaded);
    cr_expect_eq(after.records_skipped, before.records_skipped);
    char json[64];
    for (int s = 1; s <= 2; s++) {
        struct nn__conv_key k = fx_key(s);
        const struct nn__plan_record *live;
        cr_expect_eq(nn__plan_cache_lookup(c, NN__CONV_KIND_ID, &k, &live), &plan_token, "seed %d",
                     s);
    }
    for (int s = 3; s <= 5; s++) {
        struct nn__conv_key k = fx_key(s);
        struct nn__plan_record want = fx_record(s, json);
        const struct nn__plan_record *got = nn__plan_cache_lookup_known(c, NN__CONV_KIND_ID, &k);
        cr_expect(got && fx_record_equal(got, &want), "seed %d", s);
    }
    for (int s = 40; s < 43; s++) {
        struct nn__conv_key k = fx_key(s);
        cr_expect_null(nn__plan_cache_lookup_known(c, NN__CONV_KIND_ID, &k), "seed %d", s);
    }

    cr_expect_eq(nn__plan_file_save(NULL, c, path, FX_CUDNN_VERSION, &gpu), NN_E_FORMAT);
    cr_expect(strstr(nn_last_error()->message, "format version 2") &&
                  strstr(nn_last_error()->message, "not overwritten"),
              "%s", nn_last_error()->message);
    unsigned char *again = malloc(len + 1);
    f = fopen(path, "rb");
    cr_assert_not_null(f);
    cr_expect_eq(fread(again, 1, len + 1, f), len, "the file keeps its size");
    fclose(f);
    cr_expect_eq(memcmp(again, buf, len), 0, "and its bytes");
    free(again);
    nn__host_free(buf);
    nn__cache_destroy(c);
    remove_dir(dir);
}

/* Records of a kind id this process has no kind for (1 held conv's plans before kind 7; 63 is
 * nobody's) are skipped whole by their body length and counted, as every unknown kind is; the
 * file's other records load. */
Test(plan_file, records_of_an_unknown_kind_are_skipped_and_counted)
{
    struct nn__cache *c = filled_cache(1, 0, 3);
    unsigned char *buf;
    size_t len;
    encode(c, &buf, &len);
    nn__cache_destroy(c);
    size_t second = 51 + 4 + fx_get_u32(buf + 51); /* the second record's body length */
    for (int i = 0; i < 2; i++) {
        uint32_t id = i ? 63 : 1;
        put_le(buf + 55, id, 4);
        put_le(buf + second + 4, id, 4);
        reseal(buf, len);
        struct nn__cache *d = new_cache(2);
        cr_assert_eq(decode(d, buf, len), NN_OK, "kind %u: %s", id, nn_last_error()->message);
        nn_plan_cache_stats st;
        nn__cache_get_stats(d, &st);
        cr_expect_eq(st.records_skipped, 2, "kind %u", id);
        cr_expect_eq(st.records_loaded, 1, "kind %u", id);
        cr_expect_eq(nn__cache_known_count(d), 1, "kind %u", id);
        struct nn__conv_key k = fx_key(3);
        cr_expect_not_null(nn__plan_cache_lookup_known(d, NN__CONV_KIND_ID, &k), "kind %u", id);
        nn__cache_destroy(d);
    }
    /* A record of an unknown kind must still hold its kind id. */
    put_le(buf + 51, 3, 4);
    reseal(buf, len);
    expect_format_error(buf, len, "body shorter than the kind id");
    cr_expect(strstr(nn_last_error()->message, "is shorter than the kind id"), "%s",
              nn_last_error()->message);
    nn__host_free(buf);
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
    expect_field_rejected(51, 8, 4, "body length"); /* shorter than its fields */
    expect_field_rejected(KEY + 0, 0, 4, "key");
    cr_expect(strstr(nn_last_error()->message, "pass is not a conv pass"), "%s",
              nn_last_error()->message);
    expect_field_rejected(KEY + 4, 99, 4, "key");
    cr_expect(strstr(nn_last_error()->message, "dtype is not an nn_dtype"), "%s",
              nn_last_error()->message);
    expect_field_rejected(REC + 0, (uint64_t)-5, 8, "record");
    cr_expect(strstr(nn_last_error()->message, "engine index is negative"), "%s",
              nn_last_error()->message);
    expect_field_rejected(REC + 8, NN__PLAN_KNOBS_MAX + 1, 4, "record");
    cr_expect(strstr(nn_last_error()->message, "knob count is out of 0..64"), "%s",
              nn_last_error()->message);
    expect_field_rejected(BLOB, NN__PLAN_JSON_MAX + 1, 4, "blob_len");
    cr_expect(strstr(nn_last_error()->message, "a conv plan holds at most"), "%s",
              nn_last_error()->message);
    expect_field_rejected(BLOB, 0xFFFFFFF0u, 4, "blob_len");
    expect_field_rejected(BLOB, 1000, 4, "blob");
    expect_field_rejected(BLOB, 0, 4, "body length"); /* the JSON left over */
}

/* The offsets above, checked against the writer: seed 1's record is a forward whose JSON (21
 * bytes) ends it. */
Test(plan_file, record_layout_matches_the_offsets_of_the_field_tests)
{
    struct nn__cache *c = filled_cache(1, 1, 0);
    unsigned char *buf;
    size_t len;
    encode(c, &buf, &len);
    size_t body = BLOB + 4 + 21 - 55;
    cr_expect_eq(len, 55 + body + 8, "header, record, checksum");
    cr_expect_eq(fx_get_u32(buf + 51), body, "body length");
    cr_expect_eq(fx_get_u32(buf + 55), NN__CONV_KIND_ID, "kind");
    cr_expect_eq(fx_get_u32(buf + KEY), NN__CONV_PASS_FWD, "seed 1's pass");
    cr_expect_eq(fx_get_u32(buf + REC), 7, "seed 1's engine, low half");
    cr_expect_eq(fx_get_u32(buf + REC + 8), 1, "seed 1's knob count");
    cr_expect_eq(fx_get_u32(buf + BLOB), 21, "seed 1's JSON length");
    cr_expect_eq(memcmp(buf + BLOB + 4, "{\"engine\":7,\"seed\":1}", 21), 0);
    nn__host_free(buf);
    nn__cache_destroy(c);
}

/* ---------------------------------------------------------------------------------------------
 * Files: errors, concurrency
 */

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

/* The corpus's refusal seeds (fuzz/make_seeds.c): an image under format versions 1, 2 and 4 is
 * refused, naming the version; the same records under a kind id nobody has are skipped. */
Test(plan_file, corpus_refusal_seeds)
{
    struct nn__gpu_id gpu = fx_gpu();
    static const char *const names[] = {"seed-version-1", "seed-version-2", "seed-version-4"};
    char path[512], want[64];
    for (int i = 0; i < 3; i++) {
        snprintf(path, sizeof path, "%s/tests/cudnn/plan_file_corpus/%s", NN_SOURCE_ROOT, names[i]);
        struct nn__cache *c = new_cache(2);
        cr_expect_eq(nn__plan_file_load(NULL, c, path, FX_CUDNN_VERSION, &gpu), NN_E_FORMAT, "%s",
                     names[i]);
        snprintf(want, sizeof want, "the file is format version %c,", names[i][13]);
        cr_expect(strstr(nn_last_error()->message, want), "%s: %s", names[i],
                  nn_last_error()->message);
        cr_expect_eq(nn__cache_known_count(c), 0);
        nn__cache_destroy(c);
    }
    snprintf(path, sizeof path, "%s/tests/cudnn/plan_file_corpus/seed-unknown-kind",
             NN_SOURCE_ROOT);
    struct nn__cache *c = new_cache(2);
    cr_assert_eq(nn__plan_file_load(NULL, c, path, FX_CUDNN_VERSION, &gpu), NN_OK, "%s",
                 nn_last_error()->message);
    nn_plan_cache_stats st;
    nn__cache_get_stats(c, &st);
    cr_expect_eq(st.records_skipped, 3);
    cr_expect_eq(st.records_loaded, 0);
    nn__cache_destroy(c);
}

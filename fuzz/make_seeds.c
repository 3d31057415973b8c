/* Writes the starting corpus for fuzz_plan_file into the directory given as argv[1]: valid plan
 * files (format version 3) of conv's kind-7 records in several shapes (empty, one record, many
 * records of the three passes with and without a bias, knobs, JSON, build time and quick
 * alternate, one of another GPU), one whose records are of a kind id no build registers (skipped
 * whole), and the same image under format versions 1, 2 and 4 (refused: this build reads 3
 * only). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "conv/conv_plan_key.h"
#include "cudnn/plan_cache.h"
#include "cudnn/plan_file.h"
#include "plan_fixtures.h" /* the identity the corpus test replays with */

static struct nn__plan_record seed_record(int s, char *json, size_t json_cap)
{
    struct nn__plan_record r;
    nn__plan_record_init(&r);
    r.tuned.engine = s % 60;
    r.tuned.knob_count = s % 4;
    for (int i = 0; i < r.tuned.knob_count; i++) {
        r.tuned.knobs[i].type = i + 1;
        r.tuned.knobs[i].value = s + i;
    }
    r.workspace = (uint64_t)s * 512;
    r.time_us = s % 3 ? 3.5 * s : -1.0;
    r.build_ms = s % 5 == 4 ? -1.0 : 0.5 * s;
    if (s % 3 != 2) {
        r.quick.engine = (s * 7) % 60;
        r.quick.knob_count = s % 3;
        for (int i = 0; i < r.quick.knob_count; i++) {
            r.quick.knobs[i].type = 2 * i + 1;
            r.quick.knobs[i].value = 100 + s + i;
        }
    }
    if (s % 2) {
        r.json_len = (uint32_t)snprintf(json, json_cap, "{\"engineId\":%d}", s % 60);
        r.json = json;
    }
    return r;
}

/* What is done to the version-3 image before it is written. */
enum rewrite {
    AS_IS,
    UNKNOWN_KIND, /* every record's kind id becomes 1 (retired: conv's plans before kind 7) */
    VERSION_1,
    VERSION_2,
    VERSION_4
};

static void rewrite_image(unsigned char *buf, size_t len, enum rewrite how)
{
    if (how == AS_IS) return;
    if (how != UNKNOWN_KIND) {
        fx_put_le(buf + 8, how == VERSION_1 ? 1 : how == VERSION_2 ? 2 : 4, 4);
    } else {
        size_t pos = 36 + fx_get_u32(buf + 32); /* after the GPU name */
        uint32_t count = fx_get_u32(buf + pos);
        pos += 4;
        for (uint32_t i = 0; i < count; i++) {
            fx_put_le(buf + pos + 4, 1, 4);
            pos += 4 + (size_t)fx_get_u32(buf + pos);
        }
    }
    fx_put_le(buf + len - 8, fx_fnv1a64(buf, len - 8), 8);
}

/* Seeds [first, first + n) as fx_key()'s conv keys (the three passes in turn, odd seeds
 * channels-last, multiples of 5 forwards with a bias) with seed_record()'s records. */
static int write_seed(const char *dir, const char *name, int first, int n, const char *gpu_name,
                      enum rewrite how)
{
    struct nn__cache *c;
    if (fx_cache_create(NULL, 1, &c) != NN_OK) return 1;
    char json[128];
    for (int s = first; s < first + n; s++) {
        struct nn__conv_key k = fx_key(s);
        struct nn__plan_record r = seed_record(s, json, sizeof json);
        if (nn__plan_cache_add_known(NULL, c, NN__CONV_KIND_ID, &k, &r) != NN_OK) {
            nn__cache_destroy(c);
            return 1;
        }
    }
    struct nn__gpu_id gpu = fx_gpu();
    if (gpu_name) snprintf(gpu.name, sizeof gpu.name, "%s", gpu_name);
    unsigned char *buf;
    size_t len;
    nn_status st = nn__plan_file_encode(NULL, c, FX_CUDNN_VERSION, &gpu, &buf, &len);
    nn__cache_destroy(c);
    if (st != NN_OK) return 1;
    rewrite_image(buf, len, how);
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    int bad = !f || fwrite(buf, 1, len, f) != len;
    if (f && fclose(f) != 0) bad = 1;
    if (bad) fprintf(stderr, "writing %s failed\n", path);
    nn__host_free(buf);
    return bad;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s DIR\n", argv[0]);
        return 2;
    }
    int bad = write_seed(argv[1], "seed-empty", 0, 0, NULL, AS_IS);
    bad |= write_seed(argv[1], "seed-one", 1, 1, NULL, AS_IS);
    bad |= write_seed(argv[1], "seed-two", 2, 2, NULL, AS_IS);
    bad |= write_seed(argv[1], "seed-every-pass", 10, 12, NULL, AS_IS);
    bad |= write_seed(argv[1], "seed-other-gpu", 5, 3, "NVIDIA A100-SXM4-80GB", AS_IS);
    bad |= write_seed(argv[1], "seed-unknown-kind", 4, 3, NULL, UNKNOWN_KIND);
    bad |= write_seed(argv[1], "seed-version-1", 4, 3, NULL, VERSION_1);
    bad |= write_seed(argv[1], "seed-version-2", 4, 3, NULL, VERSION_2);
    bad |= write_seed(argv[1], "seed-version-4", 4, 3, NULL, VERSION_4);
    if (bad) fprintf(stderr, "writing the seeds failed: %s\n", nn_last_error()->message);
    return bad;
}

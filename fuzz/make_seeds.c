/* Writes the starting corpus for fuzz_plan_file into the directory given as argv[1]: valid plan
 * files of several shapes (empty, one record, many records of every op kind, with and without
 * knobs, JSON, build time and quick alternate, one of another GPU), written as format version 2
 * (the names without a version) and 3 (seed-v3-*), and one version-1 file (the records of
 * seed-every-op without their version-2 fields); their records are of kind 1, the layout conv's
 * plans had before kind 7. seed-v3-kind7 holds kind-7 records. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "conv/conv_plan_key.h"
#include "cudnn/plan_cache.h"
#include "cudnn/plan_file.h"
#include "plan_fixtures.h" /* the identity the corpus test replays with */

/* Keys of kind 1, the layout files held before kind 7 (most do not import: they cover the decoder,
 * not conv's shapes). */
static struct nn__conv_key_v1 seed_key(int s)
{
    struct nn__conv_key_v1 k;
    memset(&k, 0, sizeof k);
    k.op = 1 + s % (NN__CONV_V1_OP_COUNT - 1);
    k.compute = s % 4 == 1 ? NN_DTYPE_F64 : NN_DTYPE_F32;
    k.math_mode = s % 2;
    k.deterministic = (s / 2) % 2;
    k.workspace_cap = (uint64_t)s << 20;
    int operands = k.op == NN__CONV_V1_BIAS_GRAD ? 2 : 3;
    for (int i = 0; i < operands; i++) {
        k.t[i].rank = 3 + s % 3;
        k.t[i].dtype = 1 + s % 4;
        k.t[i].alignment = 16;
        int64_t stride = 1;
        for (int d = k.t[i].rank - 1; d >= 0; d--) {
            k.t[i].dims[d] = 1 + (s + d + i) % 7;
            k.t[i].strides[d] = stride;
            stride *= k.t[i].dims[d];
        }
    }
    k.p.spatial_rank = k.t[0].rank - 2;
    for (int i = 0; i < k.p.spatial_rank; i++) {
        k.p.stride[i] = 1 + s % 2;
        k.p.dilation[i] = 1;
        k.p.pad_lo[i] = k.p.pad_hi[i] = s % 3;
        k.p.window[i] = k.op >= NN__CONV_V1_POOL_FWD ? 2 : 0;
    }
    k.p.groups = 1;
    k.p.pool_mode = k.op >= NN__CONV_V1_POOL_FWD ? s % 3 : 0;
    k.p.alpha = 1.0;
    k.p.beta = s % 5 == 0 ? 1.0 : 0.0;
    return k;
}

static struct nn__plan_record seed_record(int s, char *json, size_t json_cap, int quick)
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
    if (quick && s % 3 != 2) {
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

/* version 1: the records are written without quick alternates, then rewritten as version 1;
 * versions 1 and 2 are written by the tests' writer of those versions (plan_fixtures.h), version
 * 3 by the library. */
static int write_seed(const char *dir, const char *name, int first, int n, const char *gpu_name,
                      int version)
{
    struct nn__cache *c;
    if (fx_v1_cache_create(NULL, 1, &c) != NN_OK) return 1;
    char json[128];
    for (int s = first; s < first + n; s++) {
        struct nn__conv_key_v1 k = seed_key(s);
        struct nn__plan_record r = seed_record(s, json, sizeof json, version == 2);
        if (nn__plan_cache_add_known(NULL, c, NN__CONV_KIND_V1_ID, &k, &r) != NN_OK) {
            nn__cache_destroy(c);
            return 1;
        }
    }
    struct nn__gpu_id gpu = fx_gpu();
    if (gpu_name) snprintf(gpu.name, sizeof gpu.name, "%s", gpu_name);
    unsigned char *buf;
    size_t len;
    nn_status st = NN_OK;
    if (version == 3) {
        st = nn__plan_file_encode(NULL, c, FX_CUDNN_VERSION, &gpu, &buf, &len);
    } else {
        buf = fx_plan_file_v2(c, FX_CUDNN_VERSION, &gpu, &len);
        if (!buf) st = NN_E_OOM_HOST;
    }
    nn__cache_destroy(c);
    if (st != NN_OK) return 1;
    if (version == 1) len = fx_plan_file_to_v1(buf);
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    int bad = !f || fwrite(buf, 1, len, f) != len;
    if (f && fclose(f) != 0) bad = 1;
    if (bad) fprintf(stderr, "writing %s failed\n", path);
    if (version == 3)
        nn__host_free(buf);
    else
        free(buf);
    return bad;
}

/* Conv's kind-7 records (fx_key()'s three passes, one with a bias, both layouts), so that
 * the fuzzer starts from records that load as they are. */
static int write_kind7_seed(const char *dir, const char *name, int first, int n)
{
    struct nn__cache *c;
    if (fx_cache_create(NULL, 1, &c) != NN_OK) return 1;
    char json[128];
    for (int s = first; s < first + n; s++) {
        struct nn__conv_key k = fx_key(s);
        struct nn__plan_record r = seed_record(s, json, sizeof json, 1);
        if (nn__plan_cache_add_known(NULL, c, NN__CONV_KIND_ID, &k, &r) != NN_OK) {
            nn__cache_destroy(c);
            return 1;
        }
    }
    struct nn__gpu_id gpu = fx_gpu();
    unsigned char *buf;
    size_t len;
    nn_status st = nn__plan_file_encode(NULL, c, FX_CUDNN_VERSION, &gpu, &buf, &len);
    nn__cache_destroy(c);
    if (st != NN_OK) return 1;
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
    int bad = write_seed(argv[1], "seed-empty", 0, 0, NULL, 2);
    bad |= write_seed(argv[1], "seed-one", 1, 1, NULL, 2);
    bad |= write_seed(argv[1], "seed-two", 2, 2, NULL, 2);
    bad |= write_seed(argv[1], "seed-every-op", 10, 12, NULL, 2);
    bad |= write_seed(argv[1], "seed-other-gpu", 5, 3, "NVIDIA A100-SXM4-80GB", 2);
    bad |= write_seed(argv[1], "seed-v1-every-op", 10, 12, NULL, 1);
    bad |= write_seed(argv[1], "seed-v3-empty", 0, 0, NULL, 3);
    bad |= write_seed(argv[1], "seed-v3-one", 1, 1, NULL, 3);
    bad |= write_seed(argv[1], "seed-v3-every-op", 10, 12, NULL, 3);
    bad |= write_seed(argv[1], "seed-v3-other-gpu", 5, 3, "NVIDIA A100-SXM4-80GB", 3);
    bad |= write_kind7_seed(argv[1], "seed-v3-kind7", 4, 3);
    if (bad) fprintf(stderr, "writing the seeds failed: %s\n", nn_last_error()->message);
    return bad;
}

/* Keys and records for the plan-cache tests: distinct, valid values made from a seed. */
#ifndef NN_TESTS_PLAN_FIXTURES_H
#define NN_TESTS_PLAN_FIXTURES_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conv/conv_plan_key.h"
#include "cudnn/plan_cache.h"
#include "cudnn/plan_file.h"

/* A 2-D convolution key whose batch size is the seed, so seeds give distinct keys: the three
 * passes in turn (their tensors in their slots), odd seeds channels-last, seeds that are multiples
 * of 5 a forward with a bias. */
static inline struct nn__conv_key fx_key(int seed)
{
    struct nn__conv_key k;
    memset(&k, 0, sizeof k);
    k.pass = NN__CONV_PASS_FWD + (seed + 2) % 3; /* seed 1 a forward: the file tests' offsets */
    k.dtype = NN_DTYPE_F32;
    k.spatial_rank = 2;
    k.groups = 1;
    for (int i = 0; i < 2; i++)
        k.stride[i] = k.dilation[i] = 1;
    k.alpha = 1.0;
    k.s.math_mode = NN_MATH_TF32;
    k.s.deterministic = seed % 2;
    k.s.workspace_cap = (uint64_t)1 << 30;
    const int64_t in[4] = {1 + seed, 3, 32, 32}, filt[4] = {8, 3, 3, 3},
                  out[4] = {1 + seed, 8, 30, 30};
    const int64_t *dims[3] = {in, filt, out};
    for (int i = 0; i < 3; i++) {
        k.t[i].align = 16;
        k.t[i].nhwc = seed % 2;
        memcpy(k.t[i].dims, dims[i], sizeof in);
    }
    if (seed % 5 == 0) {
        k.pass = NN__CONV_PASS_FWD;
        struct nn__conv_key_tensor *b = &k.t[NN__CONV_SLOT_BIAS];
        b->align = 16;
        b->nhwc = seed % 2;
        const int64_t bd[4] = {1, 8, 1, 1};
        memcpy(b->dims, bd, sizeof bd);
    }
    return k;
}

/* A record with seed-dependent engine, knobs, workspace, time, build time, (for odd seeds) JSON
 * and a quick alternate: seeds 3n + 1 have one with 1..3 knobs, seeds 3n + 2 one without knobs,
 * seeds 3n none. The JSON text lives in buf (at least 64 bytes), which must outlive the record. */
static inline struct nn__plan_record fx_record(int seed, char *buf)
{
    struct nn__plan_record r;
    nn__plan_record_init(&r);
    r.tuned.engine = seed * 7 % 40;
    r.tuned.knob_count = seed % 5;
    for (int i = 0; i < r.tuned.knob_count; i++) {
        r.tuned.knobs[i].type = i + 1;
        r.tuned.knobs[i].value = seed * 100 + i;
    }
    r.workspace = (uint64_t)seed * 4096;
    r.time_us = seed % 4 == 0 ? -1.0 : 10.25 * seed;
    r.build_ms = seed % 4 == 2 ? -1.0 : 0.125 * seed;
    if (seed % 3) {
        r.quick.engine = seed * 11 % 50;
        r.quick.knob_count = seed % 3 == 1 ? 1 + seed / 3 % 3 : 0;
        for (int i = 0; i < r.quick.knob_count; i++) {
            r.quick.knobs[i].type = 10 + i;
            r.quick.knobs[i].value = -(int64_t)seed * 1000 - i;
        }
    }
    if (seed % 2) {
        r.json_len =
            (uint32_t)snprintf(buf, 64, "{\"engine\":%d,\"seed\":%d}", seed * 7 % 40, seed);
        r.json = buf;
    }
    return r;
}

static inline int fx_record_equal(const struct nn__plan_record *a, const struct nn__plan_record *b)
{
    if (a->tuned.engine != b->tuned.engine || a->tuned.knob_count != b->tuned.knob_count ||
        a->workspace != b->workspace || a->time_us != b->time_us || a->build_ms != b->build_ms ||
        a->quick.engine != b->quick.engine || a->quick.knob_count != b->quick.knob_count ||
        a->json_len != b->json_len)
        return 0;
    for (int i = 0; i < a->tuned.knob_count; i++)
        if (a->tuned.knobs[i].type != b->tuned.knobs[i].type ||
            a->tuned.knobs[i].value != b->tuned.knobs[i].value)
            return 0;
    for (int i = 0; i < a->quick.knob_count; i++)
        if (a->quick.knobs[i].type != b->quick.knobs[i].type ||
            a->quick.knobs[i].value != b->quick.knobs[i].value)
            return 0;
    return a->json_len == 0 || memcmp(a->json, b->json, a->json_len) == 0;
}

static inline struct nn__gpu_id fx_gpu(void)
{
    struct nn__gpu_id g;
    memset(&g, 0, sizeof g);
    snprintf(g.name, sizeof g.name, "NVIDIA H200");
    g.cc_major = 9;
    g.cc_minor = 0;
    g.sm_count = 132;
    return g;
}

#define FX_CUDNN_VERSION 91400u

/* Caches of graph plans (and no other kind) for the tests: live plans are fakes, released through
 * fx_plan_destroy (set it before inserting; NULL releases nothing). */
static void (*fx_plan_destroy)(void *plan);

static inline void fx_destroy_thunk(void *plan)
{
    if (fx_plan_destroy) fx_plan_destroy(plan);
}

static const struct nn__cache_kind fx_plan_kind = NN__CONV_PLAN_KIND_INIT(fx_destroy_thunk);
static const struct nn__cache_kind *const fx_kinds[] = {&fx_plan_kind};

static inline nn_status fx_cache_create(struct nn_ctx *ctx, int capacity, struct nn__cache **out)
{
    return nn__cache_create(ctx, fx_kinds, 1, capacity, out);
}

/* Plan files: FNV-1a 64, the file's checksum. */
static inline uint64_t fx_fnv1a64(const unsigned char *p, size_t n)
{
    uint64_t h = 0xcbf29ce484222325u;
    for (size_t i = 0; i < n; i++)
        h = (h ^ p[i]) * 0x100000001b3u;
    return h;
}

static inline uint32_t fx_get_u32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static inline void fx_put_le(unsigned char *p, uint64_t v, int bytes)
{
    for (int i = 0; i < bytes; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

#endif

/* Keys and records for the plan-cache tests: distinct, valid values made from a seed. */
#ifndef NN_TESTS_PLAN_FIXTURES_H
#define NN_TESTS_PLAN_FIXTURES_H

#include <stdio.h>
#include <string.h>

#include "cudnn/plan_cache.h"

/* A 2-D convolution key whose batch size is the seed, so seeds give distinct keys; seeds that
 * are multiples of 5 also have a bias operand. */
static inline struct nn__plan_key fx_key(int seed)
{
    struct nn__plan_key k;
    nn__plan_key_init(&k);
    k.op = NN__OP_CONV_FWD + seed % 3;
    k.compute = NN_DTYPE_F32;
    k.math_mode = NN_MATH_TF32;
    k.deterministic = seed % 2;
    k.workspace_cap = (uint64_t)1 << 30;
    const int64_t x[4] = {1 + seed, 3, 32, 32}, w[4] = {8, 3, 3, 3}, y[4] = {1 + seed, 8, 30, 30};
    const int64_t *dims[3] = {x, w, y};
    for (int i = 0; i < 3; i++) {
        k.t[i].rank = 4;
        k.t[i].dtype = NN_DTYPE_F32;
        k.t[i].alignment = 16;
        int64_t s = 1;
        for (int d = 3; d >= 0; d--) {
            k.t[i].dims[d] = dims[i][d];
            k.t[i].strides[d] = s;
            s *= dims[i][d];
        }
    }
    k.p.spatial_rank = 2;
    for (int i = 0; i < 2; i++) {
        k.p.stride[i] = 1;
        k.p.dilation[i] = 1;
    }
    k.p.groups = 1;
    k.p.alpha = 1.0;
    if (seed % 5 == 0) {
        struct nn__key_tensor *b = &k.t[NN__KEY_B];
        b->rank = 4;
        b->dtype = NN_DTYPE_F32;
        b->alignment = 16;
        const int64_t bd[4] = {1, 8, 1, 1}, bs[4] = {8, 1, 1, 1};
        memcpy(b->dims, bd, sizeof bd);
        memcpy(b->strides, bs, sizeof bs);
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
    r.engine = seed * 7 % 40;
    r.knob_count = seed % 5;
    for (int i = 0; i < r.knob_count; i++) {
        r.knobs[i].type = i + 1;
        r.knobs[i].value = seed * 100 + i;
    }
    r.workspace = (uint64_t)seed * 4096;
    r.time_us = seed % 4 == 0 ? -1.0 : 10.25 * seed;
    r.build_ms = seed % 4 == 2 ? -1.0 : 0.125 * seed;
    if (seed % 3) {
        r.quick_engine = seed * 11 % 50;
        r.quick_knob_count = seed % 3 == 1 ? 1 + seed / 3 % 3 : 0;
        for (int i = 0; i < r.quick_knob_count; i++) {
            r.quick_knobs[i].type = 10 + i;
            r.quick_knobs[i].value = -(int64_t)seed * 1000 - i;
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
    if (a->engine != b->engine || a->knob_count != b->knob_count || a->workspace != b->workspace ||
        a->time_us != b->time_us || a->build_ms != b->build_ms ||
        a->quick_engine != b->quick_engine || a->quick_knob_count != b->quick_knob_count ||
        a->json_len != b->json_len)
        return 0;
    for (int i = 0; i < a->knob_count; i++)
        if (a->knobs[i].type != b->knobs[i].type || a->knobs[i].value != b->knobs[i].value)
            return 0;
    for (int i = 0; i < a->quick_knob_count; i++)
        if (a->quick_knobs[i].type != b->quick_knobs[i].type ||
            a->quick_knobs[i].value != b->quick_knobs[i].value)
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

/* Rewrites, in place, a version-2 plan file image whose records have no quick knobs as the
 * version-1 image of the same records: the version becomes 1, each record loses its last 20
 * bytes (f64 build_ms, i64 quick_engine, u32 quick_knob_count 0) and its body length shrinks to
 * match, and the checksum is recomputed. Returns the new length. Only for images the encoder
 * wrote (nothing is checked). */
static inline size_t fx_plan_file_to_v1(unsigned char *buf)
{
    fx_put_le(buf + 8, 1, 4);
    size_t pos = 36 + fx_get_u32(buf + 32); /* after the GPU name */
    uint32_t count = fx_get_u32(buf + pos);
    pos += 4;
    size_t out = pos;
    for (uint32_t i = 0; i < count; i++) {
        uint32_t body = fx_get_u32(buf + pos);
        fx_put_le(buf + out, body - 20, 4);
        memmove(buf + out + 4, buf + pos + 4, body - 20);
        out += 4 + (size_t)body - 20;
        pos += 4 + (size_t)body;
    }
    fx_put_le(buf + out, fx_fnv1a64(buf, out), 8);
    return out + 8;
}

#endif

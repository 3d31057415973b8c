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

/* The kind-1 key (the layout of files written before kind 7) that imports as k: the inverse of
 * nn__conv_key_import(), for writing old files. */
static inline struct nn__conv_key_v1 fx_key_v1(const struct nn__conv_key *k)
{
    static const int slot_of[4][NN__CONV_SLOTS] = {
        {0},
        {NN__CONV_V1_X, NN__CONV_V1_W, NN__CONV_V1_Y, NN__CONV_V1_B},
        {NN__CONV_V1_DX, NN__CONV_V1_W, NN__CONV_V1_DY, -1},
        {NN__CONV_V1_X, NN__CONV_V1_DW, NN__CONV_V1_DY, -1},
    };
    struct nn__conv_key_v1 o;
    memset(&o, 0, sizeof o);
    o.op = k->pass;
    o.compute = k->dtype == NN_DTYPE_F64 ? NN_DTYPE_F64 : NN_DTYPE_F32;
    o.math_mode = k->s.math_mode;
    o.deterministic = k->s.deterministic;
    o.workspace_cap = k->s.workspace_cap;
    int rank = k->spatial_rank + 2;
    for (int i = 0; i < NN__CONV_SLOTS; i++) {
        int to = slot_of[k->pass][i];
        if (to < 0 || !k->t[i].align) continue;
        struct nn__conv_v1_tensor *t = &o.t[to];
        t->rank = rank;
        t->dtype = k->dtype;
        t->alignment = k->t[i].align;
        memcpy(t->dims, k->t[i].dims, sizeof t->dims);
        nn__conv_key_strides(&k->t[i], rank, t->strides);
    }
    o.p.spatial_rank = k->spatial_rank;
    o.p.groups = (int32_t)k->groups;
    for (int i = 0; i < k->spatial_rank; i++) {
        o.p.stride[i] = k->stride[i];
        o.p.dilation[i] = k->dilation[i];
        o.p.pad_lo[i] = k->pad_lo[i];
        o.p.pad_hi[i] = k->pad_hi[i];
    }
    o.p.mode = k->mode;
    o.p.activation = k->relu;
    o.p.flags = k->flags;
    o.p.alpha = k->alpha;
    o.p.beta = k->beta;
    return o;
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

/* Kind 1 as the builds before kind 7 registered it (kind-1 keys, graph-plan records), to write
 * the files they wrote: a cache of it encodes format 3 records of kind 1. */
static const char *fx_v1_key_invalid(const void *key)
{
    return nn__conv_key_v1_invalid(key);
}

static const struct nn__cache_kind fx_v1_kind = {
    .id = NN__CONV_KIND_V1_ID,
    .name = "graph plan",
    .key_size = sizeof(struct nn__conv_key_v1),
    .key_fields = nn__conv_key_v1_fields,
    .record_size = sizeof(struct nn__plan_record),
    .record_fields = nn__plan_record_fields,
    .blob_max = NN__PLAN_JSON_MAX,
    .key_invalid = fx_v1_key_invalid,
    .record_invalid = nn__plan_kind_record_invalid,
    .bind_blob = nn__plan_kind_bind_json,
    .destroy = fx_destroy_thunk,
};
static const struct nn__cache_kind *const fx_v1_kinds[] = {&fx_v1_kind};

static inline nn_status fx_v1_cache_create(struct nn_ctx *ctx, int capacity, struct nn__cache **out)
{
    return nn__cache_create(ctx, fx_v1_kinds, 1, capacity, out);
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

/* Version 2 plan files, which the library reads but no longer writes: the writer of that version,
 * kept here to make the images the version 1 and 2 tests and the corpus seeds need. */
struct fx_v2 {
    unsigned char *buf; /* NULL while sizing */
    size_t pos;
    uint32_t count;
};

static inline void fx_v2_put(struct fx_v2 *w, uint64_t v, int bytes)
{
    if (w->buf) fx_put_le(w->buf + w->pos, v, bytes);
    w->pos += (size_t)bytes;
}

static inline void fx_v2_put_f64(struct fx_v2 *w, double d)
{
    uint64_t u;
    memcpy(&u, &d, sizeof u);
    fx_v2_put(w, u, 8);
}

static inline void fx_v2_body(struct fx_v2 *w, const struct nn__conv_key_v1 *k,
                              const struct nn__plan_record *r)
{
    fx_v2_put(w, (uint32_t)k->op, 4);
    fx_v2_put(w, (uint32_t)k->compute, 4);
    fx_v2_put(w, (uint32_t)k->math_mode, 4);
    fx_v2_put(w, (uint32_t)k->deterministic, 4);
    fx_v2_put(w, k->workspace_cap, 8);
    for (int i = 0; i < NN__CONV_V1_SLOTS; i++) {
        const struct nn__conv_v1_tensor *t = &k->t[i];
        fx_v2_put(w, (uint32_t)t->rank, 4);
        fx_v2_put(w, t->rank ? (uint32_t)t->dtype : 0, 4);
        fx_v2_put(w, t->rank ? (uint64_t)t->alignment : 0, 8);
        for (int d = 0; d < t->rank; d++) {
            fx_v2_put(w, (uint64_t)t->dims[d], 8);
            fx_v2_put(w, (uint64_t)t->strides[d], 8);
        }
    }
    const struct nn__conv_v1_params *p = &k->p;
    fx_v2_put(w, (uint32_t)p->spatial_rank, 4);
    fx_v2_put(w, (uint32_t)p->groups, 4);
    for (int i = 0; i < p->spatial_rank; i++) {
        fx_v2_put(w, (uint64_t)p->stride[i], 8);
        fx_v2_put(w, (uint64_t)p->dilation[i], 8);
        fx_v2_put(w, (uint64_t)p->pad_lo[i], 8);
        fx_v2_put(w, (uint64_t)p->pad_hi[i], 8);
        fx_v2_put(w, (uint64_t)p->window[i], 8);
    }
    fx_v2_put(w, (uint32_t)p->mode, 4);
    fx_v2_put(w, (uint32_t)p->activation, 4);
    fx_v2_put(w, (uint32_t)p->pool_mode, 4);
    fx_v2_put(w, (uint32_t)p->flags, 4);
    fx_v2_put_f64(w, p->alpha);
    fx_v2_put_f64(w, p->beta);
    fx_v2_put(w, (uint64_t)r->tuned.engine, 8);
    fx_v2_put(w, r->workspace, 8);
    fx_v2_put_f64(w, r->time_us);
    fx_v2_put(w, (uint32_t)r->tuned.knob_count, 4);
    for (int i = 0; i < r->tuned.knob_count; i++) {
        fx_v2_put(w, (uint64_t)r->tuned.knobs[i].type, 8);
        fx_v2_put(w, (uint64_t)r->tuned.knobs[i].value, 8);
    }
    fx_v2_put(w, r->json_len, 4);
    if (w->buf && r->json_len) memcpy(w->buf + w->pos, r->json, r->json_len);
    w->pos += r->json_len;
    fx_v2_put_f64(w, r->build_ms);
    fx_v2_put(w, (uint64_t)r->quick.engine, 8);
    fx_v2_put(w, (uint32_t)r->quick.knob_count, 4);
    for (int i = 0; i < r->quick.knob_count; i++) {
        fx_v2_put(w, (uint64_t)r->quick.knobs[i].type, 8);
        fx_v2_put(w, (uint64_t)r->quick.knobs[i].value, 8);
    }
}

/* A record of kind 1 as it is, one of kind 7 as its kind-1 key. */
static inline int fx_v2_record(void *arg, const struct nn__cache_kind *kind, const void *key,
                               const struct nn__cache_view *v)
{
    struct nn__conv_key_v1 old;
    const struct nn__conv_key_v1 *k = key;
    if (kind->id == NN__CONV_KIND_ID) {
        old = fx_key_v1(key);
        k = &old;
    }
    const struct nn__plan_record *r = v->record;
    struct fx_v2 *w = arg;
    struct fx_v2 sizer = {NULL, 0, 0};
    fx_v2_body(&sizer, k, r);
    fx_v2_put(w, sizer.pos, 4);
    fx_v2_body(w, k, r);
    w->count++;
    return 0;
}

static inline void fx_v2_all(struct fx_v2 *w, const struct nn__cache *c, uint64_t cudnn_version,
                             const struct nn__gpu_id *gpu, uint32_t count)
{
    size_t name_len = strlen(gpu->name);
    if (w->buf) memcpy(w->buf, "NNPLANC\n", 8);
    w->pos = 8;
    fx_v2_put(w, 2, 4);
    fx_v2_put(w, cudnn_version, 8);
    fx_v2_put(w, (uint32_t)gpu->cc_major, 4);
    fx_v2_put(w, (uint32_t)gpu->cc_minor, 4);
    fx_v2_put(w, (uint32_t)gpu->sm_count, 4);
    fx_v2_put(w, (uint32_t)name_len, 4);
    if (w->buf) memcpy(w->buf + w->pos, gpu->name, name_len);
    w->pos += name_len;
    fx_v2_put(w, count, 4);
    nn__cache_visit(c, fx_v2_record, w);
}

/* The version-2 image of c's conv records (kind 7 or 1, in nn__cache_visit() order), in a
 * malloc'd buffer of *len bytes. */
static inline unsigned char *fx_plan_file_v2(const struct nn__cache *c, uint64_t cudnn_version,
                                             const struct nn__gpu_id *gpu, size_t *len)
{
    struct fx_v2 size = {NULL, 0, 0};
    fx_v2_all(&size, c, cudnn_version, gpu, 0);
    struct fx_v2 w = {malloc(size.pos + 8), 0, 0};
    if (!w.buf) return NULL;
    fx_v2_all(&w, c, cudnn_version, gpu, size.count);
    fx_put_le(w.buf + w.pos, fx_fnv1a64(w.buf, w.pos), 8);
    *len = w.pos + 8;
    return w.buf;
}

/* Rewrites, in place, a version-2 plan file image whose records have no quick knobs as the
 * version-1 image of the same records: the version becomes 1, each record loses its last 20
 * bytes (f64 build_ms, i64 quick_engine, u32 quick_knob_count 0) and its body length shrinks to
 * match, and the checksum is recomputed. Returns the new length. Only for images
 * fx_plan_file_v2() wrote (nothing is checked). */
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

/* Graph plans in the generic cache (cache.h): their value keys, the record needed to rebuild a
 * plan (engine, knobs, JSON as the entry's blob), the kind's field lists and checks, the calls of
 * the generic cache for this kind, and the quick-alternate and autotune rules.
 *
 * Nothing here calls cuDNN, so it builds and is tested without cuDNN. The graph layer defines the
 * kind (NN__PLAN_KIND_INIT with its plan destroy callback) and uses it per op call as cache.h
 * describes: build a key (nn__plan_key_init(), then the fields that apply), look it up, rebuild a
 * known record, or run heuristics / autotune (counting NN__PC_HEURISTIC_QUERY, NN__PC_PLAN_BUILT
 * per finalized plan and nn__cache_count_autotune() per autotune run), and insert. */
#ifndef NN_CUDNN_PLAN_CACHE_H
#define NN_CUDNN_PLAN_CACHE_H

#include <stddef.h>
#include <stdint.h>

#include "cudnn/cache.h"
#include "cudnn/graph_types_cudnn.h"
#include "nnprim/status.h"
#include "nnprim/tensor.h"

struct nn_ctx;

/* ---------------------------------------------------------------------------------------------
 * Keys
 */

/* What the plan computes. Values are written to plan files: append, never renumber. */
enum nn__op_kind {
    NN__OP_NONE = 0,
    NN__OP_CONV_FWD = 1,
    NN__OP_CONV_BWD_DATA = 2,
    NN__OP_CONV_BWD_FILTER = 3,
    /* 4..6 were the bias-gradient and pooling graphs, no longer built (pooling and the bias
     * gradient run on legacy calls): keys of files may still hold them, nothing looks them up. */
    NN__OP_CONV_BIAS_GRAD = 4,
    NN__OP_POOL_FWD = 5,
    NN__OP_POOL_BWD = 6,
    NN__OP_KIND_COUNT /* first invalid value */
};

/* The key's tensors, by role; the order matches the graph layer's tensor uids (enum
 * nn__cudnn_uid: slot i holds uid i + 1). Values are written to plan files. */
enum nn__key_operand {
    NN__KEY_X = 0,
    NN__KEY_W = 1,
    NN__KEY_Y = 2,
    NN__KEY_B = 3,
    NN__KEY_DX = 4,
    NN__KEY_DW = 5,
    NN__KEY_DY = 6,
    NN__KEY_DB = 7,
    NN__KEY_OPERANDS = 8
};

#define NN__KEY_SPATIAL_MAX 3 /* 1-D, 2-D and 3-D convolution and pooling */

/* Graph tensors have rank 3..5 (N, C and 1..3 spatial dims; graph_cudnn checks it): the key
 * holds no more, so that a lookup hashes and compares as few bytes as it can. */
#define NN__KEY_RANK_MAX 5

/* One tensor of the key. rank 0 = the op has no such tensor (all other fields then 0). */
struct nn__key_tensor {
    int32_t rank;                      /* 0..NN__KEY_RANK_MAX */
    int32_t dtype;                     /* nn_dtype */
    int64_t alignment;                 /* byte alignment of the data pointer cuDNN is told about */
    int64_t dims[NN__KEY_RANK_MAX];    /* entries >= rank are 0 */
    int64_t strides[NN__KEY_RANK_MAX]; /* in elements; entries >= rank are 0 */
};

/* Op parameters as plain values. Entries of the spatial arrays >= spatial_rank are 0;
 * fields an op does not have stay 0 (as nn__plan_key_init() leaves them). */
struct nn__key_params {
    int32_t spatial_rank; /* 0..NN__KEY_SPATIAL_MAX */
    int32_t groups;       /* convolution groups (1 = ordinary) */
    int64_t stride[NN__KEY_SPATIAL_MAX];
    int64_t dilation[NN__KEY_SPATIAL_MAX];
    int64_t pad_lo[NN__KEY_SPATIAL_MAX];
    int64_t pad_hi[NN__KEY_SPATIAL_MAX];
    int64_t window[NN__KEY_SPATIAL_MAX]; /* pooling window */
    int32_t mode;                        /* conv: cross-correlation vs convolution (op's enum) */
    int32_t activation;                  /* fused activation (op's enum), 0 = none */
    int32_t pool_mode;                   /* max / average with or without padding (op's enum) */
    int32_t flags;                       /* op-specific extra bits */
    /* Blend factors baked into the plan (out = alpha * result + beta * out). Compared and
     * hashed by bit pattern, so -0.0 and 0.0 are different keys. */
    double alpha, beta;
};

/* The value key. Build with nn__plan_key_init() first, so that the entries a key does not use
 * (named above) hold 0: equality and hashing go over every field of nn__plan_key_fields (the cache
 * kind's field list), never over padding bytes. Every value is written to plan files. */
struct nn__plan_key {
    int32_t op;             /* enum nn__op_kind */
    int32_t compute;        /* accumulation nn_dtype (F32 for f32/f16/bf16 data, F64 for f64) */
    int32_t math_mode;      /* nn_math_mode */
    int32_t deterministic;  /* 0 or 1 */
    uint64_t workspace_cap; /* bytes, 0 = no cap */
    struct nn__key_tensor t[NN__KEY_OPERANDS];
    struct nn__key_params p;
};

/* Zero every field (and padding byte). */
void nn__plan_key_init(struct nn__plan_key *k);

/* Field-wise equality (the cache's). */
int nn__plan_key_equal(const struct nn__plan_key *a, const struct nn__plan_key *b);

/* 64-bit hash over the same fields; equal keys give equal hashes. */
uint64_t nn__plan_key_hash(const struct nn__plan_key *k);

/* Check that every field is in range (op, dtype, ranks, dims >= 1, strides >= 0, unused entries
 * 0, ...).
 * Returns NULL if valid, else a static description of the first bad field. Used on keys read
 * from files; the graph layer's keys come from validated tensors. */
const char *nn__plan_key_invalid(const struct nn__plan_key *k);

/* ---------------------------------------------------------------------------------------------
 * Records: what is needed to rebuild a plan
 */

#define NN__PLAN_KNOBS_MAX NN__ENGINE_KNOBS_MAX /* knob choices per engine config */
#define NN__PLAN_JSON_MAX  (256 * 1024)         /* bytes of the plan's JSON form, without a NUL */

/* Both engine choices of a record are the graph layer's own struct (graph_types_cudnn.h), so a
 * plan is rebuilt from a record and a record filled from a plan without conversions. */
struct nn__plan_record {
    struct nn__engine_choice tuned; /* engine (its global index), knob_count 0..64, knobs */
    uint64_t workspace;             /* bytes the plan needs */
    double time_us;                 /* measured median time, or -1 if the plan was not timed */
    /* The slowest rebuild of the tuned plan seen in a process that loaded the record (foreground
     * or background), milliseconds, or -1: a diagnostic for verbose lines and reports. */
    double build_ms;
    /* The quick alternate: the fastest autotune candidate of another engine that is not
     * runtime-compiled, preferring those that need no more workspace than the tuned plan (else,
     * for a runtime-compiled tuned engine, cuDNN's first precompiled config). A process that
     * rebuilds the record runs the alternate until the tuned plan, built on a background thread,
     * replaces it: the first rebuild of some engines in a process stalls for tens of ms (63.6 ms
     * for engine 70 on the H200, cuDNN 9.14), a cost the tuning process never sees again and that
     * depends on what else the loading process has done, so it is not predicted, only avoided.
     * quick.engine -1 = none (quick.knob_count is then 0). */
    struct nn__engine_choice quick;
    /* The plan's JSON form (optional fast path). json_len 0 = none. On insertion the cache
     * copies json_len bytes; in records the cache hands out, json is NUL-terminated. */
    uint32_t json_len; /* 0..NN__PLAN_JSON_MAX */
    const char *json;
};

/* A record with every field "none": engine 0, no knobs, time_us, build_ms and quick.engine -1. */
void nn__plan_record_init(struct nn__plan_record *r);

/* Check a record's ranges; NULL if valid, else a static description of the bad field. */
const char *nn__plan_record_invalid(const struct nn__plan_record *r);

/* What autotune learned about one timed candidate, for choosing a quick alternate. */
struct nn__plan_candidate {
    int64_t engine;    /* global index */
    int64_t workspace; /* bytes */
    double time_us;    /* median, or -1 if it did not run */
    int rtc;           /* runtime-compiled engine (cuDNN's behavior note) */
};

/* The order in which the n candidates c are taken as the quick alternate of c[best]: leaving out
 * best, candidates that did not run, runtime-compiled ones and those of best's engine (other
 * knobs of the engine cost the same to prepare); first those whose workspace is no larger than
 * best's (a one-off plan should not grow the memory pool), then the others, each group by
 * ascending time_us. Writes the indices to order (room for n) and returns their count. */
int nn__plan_quick_order(const struct nn__plan_candidate *c, int n, int best, int *order);

/* Autotune's cut after its first timed round: among the candidates with active[i] == 1, each
 * whose first time first[i * stride] is more than factor times the fastest such time gets
 * active[i] = 2 (it keeps that one time and runs no more rounds). Other active[] values (0: the
 * candidate failed) are left alone and their times ignored. */
void nn__autotune_drop_slow(int *active, const float *first, int stride, int n, float factor);

/* ---------------------------------------------------------------------------------------------
 * Graph plans as an entry kind of the generic cache (cache.h)
 */

/* The kind id of graph plans keyed by struct nn__plan_key (written to plan files). */
#define NN__PLAN_KIND_ID 1u

/* The field lists and checks of the kind. The kind itself names the destroy callback of live
 * plans, which only the graph layer has: it defines the kind with NN__PLAN_KIND_INIT(). */
extern const struct nn__field nn__plan_key_fields[];
extern const struct nn__field nn__plan_record_fields[];
const char *nn__plan_kind_key_invalid(const void *key);
const char *nn__plan_kind_record_invalid(const void *record, uint32_t blob_len);
void nn__plan_kind_bind_json(void *record, const char *blob, uint32_t blob_len);

#define NN__PLAN_KIND_INIT(destroy_fn)                                                             \
    {                                                                                              \
        NN__PLAN_KIND_ID, "graph plan", sizeof(struct nn__plan_key), nn__plan_key_fields,          \
            sizeof(struct nn__plan_record), nn__plan_record_fields, NN__PLAN_JSON_MAX,             \
            nn__plan_kind_key_invalid, nn__plan_kind_record_invalid, nn__plan_kind_bind_json,      \
            (destroy_fn)                                                                           \
    }

/* The generic cache's calls for graph-plan entries of cache kind kind (the id of a kind made
 * with NN__PLAN_KIND_INIT, whose keys key points to): the record's JSON is the entry's blob, and
 * records handed out have json pointing at the cache's NUL-terminated copy. See cache.h for each
 * call's contract; the record checks are nn__plan_record_invalid()'s. */
void *nn__plan_cache_lookup(struct nn__cache *c, uint32_t kind, const void *key,
                            const struct nn__plan_record **rec);
int nn__plan_cache_is_live(const struct nn__cache *c, uint32_t kind, const void *key);
nn_status nn__plan_cache_insert(struct nn_ctx *ctx, struct nn__cache *c, uint32_t kind,
                                const void *key, const struct nn__plan_record *rec, void *plan);
/* plan NULL keeps the plan; rec NULL keeps the record. */
nn_status nn__plan_cache_replace_live(struct nn_ctx *ctx, struct nn__cache *c, uint32_t kind,
                                      const void *key, void *plan,
                                      const struct nn__plan_record *rec);
const struct nn__plan_record *nn__plan_cache_lookup_known(const struct nn__cache *c, uint32_t kind,
                                                          const void *key);
int nn__plan_cache_drop_known(struct nn__cache *c, uint32_t kind, const void *key);
nn_status nn__plan_cache_add_known(struct nn_ctx *ctx, struct nn__cache *c, uint32_t kind,
                                   const void *key, const struct nn__plan_record *rec);

/* Raise the build_ms of key's live record to ms if that is larger (a background build's time).
 * Does nothing when key has no live entry. */
void nn__plan_cache_note_build_ms(struct nn__cache *c, uint32_t kind, const void *key, double ms);

/* Visit the records of cache kind kind that nn__cache_visit() yields (other kinds are passed
 * over), in its order. Stops early when fn returns nonzero, and returns that value (0 if it
 * visited all). */
typedef int (*nn__plan_visit_fn)(void *arg, const void *key, const struct nn__plan_record *rec);
int nn__plan_cache_visit(const struct nn__cache *c, uint32_t kind, nn__plan_visit_fn fn, void *arg);

#endif

/* The plan cache: value keys, the record needed to rebuild a plan, the per-context in-memory LRU
 * of live plans, the "known records" loaded from a plan file, and the statistics.
 *
 * Nothing here calls cuDNN. A live plan is an opaque pointer owned by the cache together with the
 * destroy callback given at insertion (the graph layer owns the cuDNN objects behind it), so the
 * cache builds and is tested without cuDNN.
 *
 * How the graph layer uses it, per op call:
 *   1. build a key: nn__plan_key_init(&k), then fill the fields that apply;
 *   2. nn__plan_cache_lookup(): a hit returns the plan and its record; nothing else is called;
 *   3. on a miss, nn__plan_cache_lookup_known(): a record from the loaded file (or one evicted
 *      earlier) to rebuild from engine index + knobs (or the JSON); count it with
 *      nn__plan_cache_count(c, NN__PC_REBUILT); if the rebuild fails, nn__plan_cache_drop_known()
 *      (counted as dropped) and fall through;
 *   4. heuristics / autotune, counting NN__PC_HEURISTIC_QUERY, NN__PC_PLAN_BUILT per finalized
 *      plan and nn__plan_cache_count_autotune() per autotune run;
 *   5. nn__plan_cache_insert() the plan with its record.
 *
 * Not thread-safe: one cache per context, and a context is used by one thread at a time. */
#ifndef NN_CUDNN_PLAN_CACHE_H
#define NN_CUDNN_PLAN_CACHE_H

#include <stddef.h>
#include <stdint.h>

#include "nnprim/plan_cache.h"
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

/* One tensor of the key. rank 0 = the op has no such tensor (all other fields then ignored). */
struct nn__key_tensor {
    int32_t rank;                 /* 0..NN_MAX_RANK */
    int32_t dtype;                /* nn_dtype */
    int64_t alignment;            /* byte alignment of the data pointer cuDNN is told about */
    int64_t dims[NN_MAX_RANK];    /* entries >= rank are ignored */
    int64_t strides[NN_MAX_RANK]; /* in elements; entries >= rank are ignored */
};

/* Op parameters as plain values. Entries of the spatial arrays >= spatial_rank are ignored;
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

/* The value key. Build with nn__plan_key_init() first: equality and hashing go field by field
 * (never memcmp), skip the ignored entries named above, and so are stable whatever the padding
 * bytes hold. Every value is written to plan files. */
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

/* Field-wise equality (see struct nn__plan_key for the ignored entries). */
int nn__plan_key_equal(const struct nn__plan_key *a, const struct nn__plan_key *b);

/* 64-bit hash over the same fields; equal keys give equal hashes. */
uint64_t nn__plan_key_hash(const struct nn__plan_key *k);

/* Check that every field is in range (op, dtype, ranks, dims >= 1, strides >= 0, ...).
 * Returns NULL if valid, else a static description of the first bad field. Used on keys read
 * from files; the graph layer's keys come from validated tensors. */
const char *nn__plan_key_invalid(const struct nn__plan_key *k);

/* ---------------------------------------------------------------------------------------------
 * Records: what is needed to rebuild a plan
 */

#define NN__PLAN_KNOBS_MAX 64           /* knob choices per engine config */
#define NN__PLAN_JSON_MAX  (256 * 1024) /* bytes of the plan's JSON form, without a NUL */
#define NN__PLAN_KNOWN_MAX (1 << 20)    /* known records kept (and records in a file) */

struct nn__plan_knob {
    int64_t type;  /* cudnnBackendKnobType_t */
    int64_t value; /* the choice */
};

struct nn__plan_record {
    int64_t engine;     /* the engine's global index (CUDNN_ATTR_ENGINE_GLOBAL_INDEX) */
    int32_t knob_count; /* 0..NN__PLAN_KNOBS_MAX */
    struct nn__plan_knob knobs[NN__PLAN_KNOBS_MAX];
    uint64_t workspace; /* bytes the plan needs */
    double time_us;     /* measured median time, or -1 if the plan was not timed */
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
     * quick_engine -1 = none (quick_knob_count is then 0). */
    int64_t quick_engine;
    int32_t quick_knob_count; /* 0..NN__PLAN_KNOBS_MAX */
    struct nn__plan_knob quick_knobs[NN__PLAN_KNOBS_MAX];
    /* The plan's JSON form (optional fast path). json_len 0 = none. On insertion the cache
     * copies json_len bytes; in records the cache hands out, json is NUL-terminated. */
    uint32_t json_len; /* 0..NN__PLAN_JSON_MAX */
    const char *json;
};

/* A record with every field "none": engine 0, no knobs, time_us, build_ms and quick_engine -1. */
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
 * The cache
 */

struct nn__plan_cache;

/* Releases a live plan (the graph layer's cuDNN objects). Called exactly once per inserted plan:
 * on eviction, replacement, nn__plan_cache_clear() or nn__plan_cache_destroy(). */
typedef void (*nn__plan_destroy_fn)(void *plan);

/* Create an empty cache holding at most capacity live plans (>= 1).
 * Returns NN_OK, NN_E_INVALID_ARG (capacity < 1), NN_E_OOM_HOST. */
nn_status nn__plan_cache_create(struct nn_ctx *ctx, int capacity, struct nn__plan_cache **out);

/* Destroy every live plan (through its callback), the known records and the cache. NULL is ok. */
void nn__plan_cache_destroy(struct nn__plan_cache *c);

/* The live plan for key, or NULL. A hit moves the entry to the most-recently-used end and counts
 * a hit; a miss counts a miss. *rec (if rec is not NULL) receives the entry's record, valid until
 * the entry is evicted or the cache cleared; NULL on a miss. Never allocates, never fails. */
void *nn__plan_cache_lookup(struct nn__plan_cache *c, const struct nn__plan_key *key,
                            const struct nn__plan_record **rec);

/* Insert a live plan with its record (copied, JSON included). On success the cache owns plan and
 * calls destroy(plan) when it lets go of it; an existing entry with an equal key is replaced (its
 * plan destroyed); the least recently used entry is evicted when the cache is full (its record
 * is kept as a known record, so a later miss can rebuild it without heuristics). A known record
 * with an equal key is superseded by the new record; rec may be that known record itself (it is
 * copied before the known entry goes).
 * On failure nothing changes and plan stays the caller's.
 * Returns NN_OK; NN_E_INVALID_ARG (NULL key/rec/destroy, or a record out of range, named in the
 * message); NN_E_OOM_HOST. */
nn_status nn__plan_cache_insert(struct nn_ctx *ctx, struct nn__plan_cache *c,
                                const struct nn__plan_key *key, const struct nn__plan_record *rec,
                                void *plan, nn__plan_destroy_fn destroy);

/* 1 if key has a live plan, else 0. Counts nothing and leaves the LRU order alone. */
int nn__plan_cache_is_live(const struct nn__plan_cache *c, const struct nn__plan_key *key);

/* The known record for key (loaded from a plan file, or evicted earlier), or NULL. Does not
 * count a hit or a miss. Valid until the next change of the cache. */
const struct nn__plan_record *nn__plan_cache_lookup_known(const struct nn__plan_cache *c,
                                                          const struct nn__plan_key *key);

/* Forget the known record for key because rebuilding it failed; counts records_dropped.
 * Returns 1 if there was one, else 0. */
int nn__plan_cache_drop_known(struct nn__plan_cache *c, const struct nn__plan_key *key);

/* Replace the live plan of key, keeping its place in the LRU order and the statistics; the old
 * plan is destroyed through its callback unless it is plan itself. plan NULL keeps the current
 * plan. rec, if not NULL, replaces the entry's record (copied). Returns NN_OK; NN_E_INVALID_ARG (no
 * live entry for key, or rec out of range: nothing changes and plan stays the caller's);
 * NN_E_OOM_HOST (nothing changes). */
nn_status nn__plan_cache_replace_live(struct nn_ctx *ctx, struct nn__plan_cache *c,
                                      const struct nn__plan_key *key, void *plan,
                                      const struct nn__plan_record *rec);

/* Raise the build_ms of key's live record to ms if that is larger (a background build's time).
 * Does nothing when key has no live entry. */
void nn__plan_cache_note_build_ms(struct nn__plan_cache *c, const struct nn__plan_key *key,
                                  double ms);

/* Drop every live plan (through its callback) and every known record. Statistics are kept. */
void nn__plan_cache_clear(struct nn__plan_cache *c);

/* Add a known record (as the file loader does). Replaces a known record with an equal key.
 * Returns NN_OK; NN_E_INVALID_ARG (record out of range); NN_E_OOM_HOST (nothing changed). */
nn_status nn__plan_cache_add_known(struct nn_ctx *ctx, struct nn__plan_cache *c,
                                   const struct nn__plan_key *key,
                                   const struct nn__plan_record *rec);

/* Move every known record of src into dst's known records (replacing equal keys; a record whose
 * key is live in dst is discarded, the live plan wins) and count them as loaded in dst. src ends
 * with no known records. On NN_E_OOM_HOST neither cache changes. */
nn_status nn__plan_cache_take_known(struct nn_ctx *ctx, struct nn__plan_cache *dst,
                                    struct nn__plan_cache *src);

/* Count records of a file that were skipped (another cuDNN version or GPU). */
void nn__plan_cache_count_skipped(struct nn__plan_cache *c, uint64_t n);

/* Number of live plans / known records, and the capacity. */
size_t nn__plan_cache_size(const struct nn__plan_cache *c);
size_t nn__plan_cache_known_count(const struct nn__plan_cache *c);
int nn__plan_cache_capacity(const struct nn__plan_cache *c);

/* Visit every record the cache would save: live entries from most to least recently used, then
 * known records not shadowed by a live entry. Stops early when fn returns nonzero, and returns
 * that value (0 if it visited all). */
typedef int (*nn__plan_visit_fn)(void *arg, const struct nn__plan_key *key,
                                 const struct nn__plan_record *rec);
int nn__plan_cache_visit(const struct nn__plan_cache *c, nn__plan_visit_fn fn, void *arg);

/* ---------------------------------------------------------------------------------------------
 * Statistics (the public nn_plan_cache_stats is filled from these)
 */

/* Events the graph layer reports; hits, misses, evictions, loaded/skipped/dropped records are
 * counted by the cache and the file loader themselves. */
enum nn__plan_cache_event {
    NN__PC_HEURISTIC_QUERY,   /* one cudnn heuristics query (mode A or fallback) */
    NN__PC_PLAN_BUILT,        /* one execution plan finalized (autotune candidates included) */
    NN__PC_REBUILT,           /* a live plan rebuilt from a known record */
    NN__PC_QUICK,             /* a known record started on its quick alternate */
    NN__PC_BACKGROUND_BUILT,  /* a tuned plan built in the background replaced its alternate */
    NN__PC_BACKGROUND_FAILED, /* a background build failed; the alternate stays */
    NN__PC_PREBUILT           /* a loaded record's plan, prebuilt in the background, went live */
};
void nn__plan_cache_count(struct nn__plan_cache *c, enum nn__plan_cache_event e);

/* One autotune run (all candidates of one key) that took ns nanoseconds of host wall time. */
void nn__plan_cache_count_autotune(struct nn__plan_cache *c, uint64_t ns);

void nn__plan_cache_get_stats(const struct nn__plan_cache *c, nn_plan_cache_stats *out);

/* ---------------------------------------------------------------------------------------------
 * The plan file (plan_file.c). The cuDNN version and GPU identity are parameters, so tests can
 * fake them; handle_cudnn.c passes cudnnGetVersion() and the context's device.
 */

#define NN__GPU_NAME_MAX 256 /* bytes including the NUL */

struct nn__gpu_id {
    char name[NN__GPU_NAME_MAX]; /* NUL-terminated */
    int32_t cc_major, cc_minor;
    int32_t sm_count;
};

/* Serialize every record nn__plan_cache_visit() yields into a new buffer (nn__host_free it).
 * Returns NN_OK; NN_E_OOM_HOST; NN_E_OVERFLOW (more than the format holds). */
nn_status nn__plan_file_encode(struct nn_ctx *ctx, const struct nn__plan_cache *c,
                               uint64_t cudnn_version, const struct nn__gpu_id *gpu,
                               unsigned char **out, size_t *out_len);

/* Parse a whole file image. If it is well formed, its records are added to c's known records
 * (records of another cuDNN version or GPU are skipped and counted, not added); otherwise
 * nothing is added and NN_E_FORMAT names the field and its byte offset. what names the source in
 * messages (the path). Returns NN_OK; NN_E_FORMAT; NN_E_OOM_HOST (nothing added). */
nn_status nn__plan_file_decode(struct nn_ctx *ctx, struct nn__plan_cache *c, const char *what,
                               const unsigned char *buf, size_t len, uint64_t cudnn_version,
                               const struct nn__gpu_id *gpu);

/* Write the cache to path atomically: a temporary file in the same directory (mkstemp), fsync,
 * rename over path. Concurrent savers leave one of their files, complete.
 * Returns NN_OK; NN_E_IO (path and strerror in the message); NN_E_OOM_HOST; NN_E_OVERFLOW. */
nn_status nn__plan_file_save(struct nn_ctx *ctx, const struct nn__plan_cache *c, const char *path,
                             uint64_t cudnn_version, const struct nn__gpu_id *gpu);

/* Read path and nn__plan_file_decode() it. Returns NN_OK; NN_E_IO (missing or unreadable file:
 * path and strerror); NN_E_FORMAT; NN_E_OOM_HOST. On failure nothing is added. */
nn_status nn__plan_file_load(struct nn_ctx *ctx, struct nn__plan_cache *c, const char *path,
                             uint64_t cudnn_version, const struct nn__gpu_id *gpu);

#endif

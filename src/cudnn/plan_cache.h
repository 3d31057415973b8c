/* Graph plans in the generic cache (cache.h): the record needed to rebuild a plan (engine, knobs,
 * JSON as the entry's blob), its field list and checks, the calls of the generic cache for
 * graph-plan kinds, and the quick-alternate and autotune rules. The keys are the families' (a
 * family defines its graph-plan cache kind with its own key and this record, in its own folder).
 *
 * Nothing here calls cuDNN, so it builds and is tested without cuDNN. The graph layer uses a kind
 * per op call as cache.h describes: look the family's key up, rebuild a known record, or run
 * heuristics / autotune (counting NN__PC_HEURISTIC_QUERY, NN__PC_PLAN_BUILT per finalized plan and
 * nn__cache_count_autotune() per autotune run), and insert. */
#ifndef NN_CUDNN_PLAN_CACHE_H
#define NN_CUDNN_PLAN_CACHE_H

#include <stddef.h>
#include <stdint.h>

#include "cudnn/cache.h"
#include "cudnn/graph_types_cudnn.h"
#include "nnprim/status.h"

struct nn_ctx;

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

/* The record's field list and checks, for a family's graph-plan cache kind (its key is the
 * family's). */
extern const struct nn__field nn__plan_record_fields[];
const char *nn__plan_kind_record_invalid(const void *record, uint32_t blob_len);
void nn__plan_kind_bind_json(void *record, const char *blob, uint32_t blob_len);

/* The generic cache's calls for graph-plan entries of cache kind kind (the id of a kind made
 * with the record fields and hooks below, whose keys key points to): the record's JSON is the
 * entry's blob, and records handed out have json pointing at the cache's NUL-terminated copy. See
 * cache.h for each call's contract; the record checks are nn__plan_record_invalid()'s. */
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

/* Get-or-build a cuDNN execution plan for a plan-cache key of a family's graph kind, and run it:
 * the glue between the graph helpers (graph_cudnn.h) and the plan cache (plan_cache.h), shared by
 * the families.
 *
 * Per call:
 *   hit   the live plan from the cache; no heuristics query, no cuDNN descriptor is built;
 *   miss  the graph is built from the key by the graph kind's build callback, then
 *         1. a known record (loaded from a plan file, or evicted earlier) is rebuilt from engine
 *            global index + knobs, else from its JSON form; one that no longer builds is dropped
 *            and the search goes on. A record with a quick alternate (its tuned plan is slow to
 *            finalize) starts on the alternate while the background builder (plan_build_cudnn.h)
 *            builds the tuned plan, which replaces it at a later lookup;
 *         2. heuristic tuning: the first plan that finalizes and passes the numerical-note filter
 *            and the workspace cap;
 *         3. autotune: the top settings.autotune_candidates plans are timed with CUDA events on
 *            the context's stream (one warm-up each, then the median of NN__AUTOTUNE_RUNS rounds
 *            that run every candidate in turn; a candidate over NN__AUTOTUNE_DROP times the
 *            fastest in the first round runs no more), the fastest is kept and its time
 *            recorded;
 *         and the plan is inserted with its record. The plan cache's counters say what happened.
 * Execution takes the workspace from the pool on the context's stream and gives it back right
 * after (stream order makes its reuse safe). */
#ifndef NN_CUDNN_PLAN_GET_CUDNN_H
#define NN_CUDNN_PLAN_GET_CUDNN_H

#include <stddef.h>
#include <stdint.h>

#include "cudnn/graph_cudnn.h"
#include "cudnn/plan_cache.h"

struct nn_ctx;

#define NN__AUTOTUNE_RUNS 9    /* timed rounds over all candidates, after one warm-up each */
#define NN__AUTOTUNE_DROP 2.0f /* slower than this times the fastest in round 1: no more rounds */

/* How the plan of a call was found, for verbose lines. */
enum nn__plan_source {
    NN__PLAN_HIT = 0,       /* live in the cache */
    NN__PLAN_REBUILT = 1,   /* a known record rebuilt (plan file or evicted) */
    NN__PLAN_HEURISTIC = 2, /* heuristics, first plan that finalized */
    NN__PLAN_AUTOTUNED = 3, /* autotune, the fastest candidate */
    NN__PLAN_QUICK = 4      /* a known record's quick alternate; the tuned plan builds meanwhile */
};

/* "hit", "rebuilt", "heuristic", "autotuned" or "quick". */
const char *nn__plan_source_name(enum nn__plan_source s);

/* Prebuilding (settings.prebuild_plans): queue on the background builder the tuned plan of
 * every known record of a graph kind (the context's table, nn__cudnn_ctx_init) whose key has a
 * graph, matches the context's settings (math mode, determinism, workspace cap) and has no live
 * plan, as many as the cache has room for. Called after a plan
 * file loads. Best effort: what cannot be queued (out of host memory, no worker thread) is left
 * to the first call, with a verbose line. Does nothing unless settings.background_builds and
 * settings.prebuild_plans are set. */
void nn__cudnn_plan_prebuild(struct nn_ctx *ctx);

/* What autotune needs to run candidates: the call's pointers, and which output it may write.
 * Candidates write into a scratch copy of that output (out_bytes bytes, its old contents
 * copied in when the graph blends with beta), never into the caller's. */
struct nn__plan_args {
    struct nn__cudnn_args args;
    int out_uid;      /* uid of the graph's output (the family's) */
    size_t out_bytes; /* its size */
};

/* The live plan for key, or NULL (counted as a hit or a miss): the cache-hit path of every op,
 * which nn__cudnn_plan_get() takes first. Background builds that have finished replace their
 * quick alternates before the lookup. Calls no cuDNN function and allocates nothing. */
struct nn__cudnn_plan *nn__cudnn_plan_lookup(struct nn_ctx *ctx, const struct nn__graph_kind *kind,
                                             const void *key);

/* The context's plan for key (a key of kind's cache kind): from the cache, or built from the key
 * as described above and inserted. *plan stays owned by the
 * cache (valid until the next plan-cache change of this context); *src says how it was found.
 * a is used only by autotune.
 * Returns NN_OK; NN_E_UNSUPPORTED (no engine takes the graph under the context's settings: the
 * message says why); NN_E_CUDNN; NN_E_CUDA; NN_E_OOM_HOST; NN_E_OOM_DEVICE. */
nn_status nn__cudnn_plan_get(struct nn_ctx *ctx, const struct nn__graph_kind *kind, const void *key,
                             const struct nn__plan_args *a, struct nn__cudnn_plan **plan,
                             enum nn__plan_source *src);

/* Byte alignment of a device pointer as cuDNN is told about it: the largest power of two <= 16
 * that divides the address. */
int32_t nn__cudnn_ptr_alignment(const void *p);

#endif

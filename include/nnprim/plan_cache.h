/*
 * nnprim: the plan cache of a context, its file and its statistics.
 *
 * A cuDNN context keeps the execution plans it has built, keyed by the op's plain values (op,
 * dtype, dims, strides, alignment, op parameters, math mode, determinism, workspace cap), in a
 * bounded LRU cache (settings.plan_cache_capacity plans). A hit reuses the plan without querying
 * cuDNN's heuristics or rebuilding anything.
 *
 * One tuning per device: the cuDNN contexts of one device (every thread's, every stream's) share
 * their tuning. Each record a context tunes or rebuilds (engine and knobs, or an op family's own
 * record) is also published to the device's shared tuning, and a context's miss that has no
 * record of its own takes the device's: the plan is then rebuilt from it (plans_rebuilt,
 * shared_records) instead of running heuristics or autotuning again. The execution plans
 * themselves stay per context: cuDNN binds a plan to the handle it was finalized with, and a
 * handle may be used by one thread at a time, so each context finalizes its own plan from the
 * shared record (a fraction of a millisecond for precompiled engines; a runtime-compiled engine
 * starts on its quick alternate, see below). The shared tuning is created by the device's first
 * cuDNN context and freed with its last; it holds the records of at most as many keys as the
 * largest settings.plan_cache_capacity among the contexts that joined it (at least 256), and
 * drops the least recently published or taken record first. It is thread-safe behind one mutex
 * that is held only to copy one record in or out: cache hits never take it, and nothing is
 * built while it is held. Records loaded from a plan file stay the loading context's until a
 * plan goes live on them (then they are published).
 *
 * A plan file keeps what is needed to rebuild each plan (the engine's global index and knob
 * choices, workspace size, measured time, optionally the plan's JSON form) together with the
 * cuDNN version and the GPU identity (name, compute capability, SM count) of the process that
 * wrote it. Records loaded from a file are "known records": on a miss, a known record is rebuilt
 * first, and heuristics or autotuning run only if there is none or it no longer builds (it is
 * then dropped). Records written by another cuDNN version or GPU are skipped, never trusted.
 * When settings.plan_cache_file names a file, nn_ctx_create() loads it and nn_ctx_destroy()
 * saves (merges) it.
 *
 * The first rebuild of some engines in a process stalls inside cuDNN for tens of milliseconds
 * (63.6 ms for one convolution engine on an H200), a cost the tuning process never sees again.
 * Autotuning therefore also records a quick alternate for each plan: the fastest candidate of
 * another engine that needs no compilation. With settings.background_builds on (the default) and
 * deterministic off, a process that loads such a record answers the first call of its shape with
 * the alternate and builds the tuned plan on a background thread of the context; a later call
 * finds it in place of the alternate (quick_plans and background_builds count both steps).
 * With settings.prebuild_plans also on (the default), the same thread starts building the tuned
 * plans of a file's records as soon as the file loads, so that a shape whose first call comes
 * later finds its plan ready (plans_prebuilt); a first call that comes before its plan is built
 * is served as above. nn_plan_cache_wait() waits for all of these background builds.
 *
 * File format (version 3, all integers little-endian, fixed width): docs in
 * src/cudnn/plan_file.c. A build reads its own format version only: a file of another version is
 * refused with NN_E_FORMAT, the message naming the file's version and the one this build reads
 * (delete the file; its plans are tuned again and saved in the current version).
 *
 * Reference-backend contexts have no plans: nn_plan_cache_save() and nn_plan_cache_load() return
 * NN_E_UNSUPPORTED for them (in every build; a build without cuDNN has only such contexts),
 * nn_plan_cache_clear() does nothing and nn_plan_cache_get_stats() reports zeros.
 */
#ifndef NNPRIM_PLAN_CACHE_H
#define NNPRIM_PLAN_CACHE_H

#include <stdint.h>

#include "context.h"
#include "status.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Counters of one context's plan cache since the context was created (device_records: now). */
typedef struct nn_plan_cache_stats {
    uint64_t hits;                /**< lookups answered by a live plan */
    uint64_t misses;              /**< lookups that found no live plan */
    uint64_t plans_built;         /**< execution plans finalized (autotune candidates included) */
    uint64_t plans_rebuilt;       /**< live plans rebuilt from known (loaded or evicted) records */
    uint64_t heuristic_queries;   /**< cuDNN heuristics queries */
    uint64_t autotune_runs;       /**< keys autotuned (each times several candidates) */
    uint64_t autotune_ns;         /**< host wall time spent in autotune runs, nanoseconds */
    uint64_t records_loaded;      /**< records taken from plan files */
    uint64_t records_skipped;     /**< file records ignored: of another cuDNN version or GPU,
                                       of a kind this build does not know, or of per-process
                                       state that is no longer saved */
    uint64_t records_dropped;     /**< known records that no longer built a plan, forgotten */
    uint64_t evictions;           /**< live plans evicted by the LRU bound */
    uint64_t entries;             /**< live plans now */
    uint64_t known_records;       /**< known records now (not counting live plans) */
    uint64_t quick_plans;         /**< known records started on their quick alternate */
    uint64_t background_builds;   /**< tuned plans built in the background that replaced one */
    uint64_t background_failures; /**< background builds that failed (the alternate stays) */
    uint64_t plans_prebuilt;      /**< loaded records' plans prebuilt before a call needed them */
    uint64_t shared_records;      /**< misses answered by the device's shared tuning (see above) */
    uint64_t device_records;      /**< records in the device's shared tuning now */
    uint64_t reserved[2];         /**< zero; room for the ABI to grow */
} nn_plan_cache_stats;

/**
 * Merge the context's plan cache into a file: every live plan's record, every known record and
 * every record of the device's shared tuning, together with the records already in the file
 * (written by another context or process) that this context has no record of: on equal keys,
 * this context's record wins (it is the one this process measured or used; the file's may be a
 * stale tuning). Records in the file written by another cuDNN version or GPU are dropped (a file
 * carries one identity). Savers of one path are serialized by an exclusive flock() of the file
 * "path.lock" beside it (created with mode 0644 and left in place): each reads the file under
 * the lock, merges, writes a temporary file in the same directory, flushes it to disk and renames
 * it over path, so readers always see a complete file and concurrent savers, threads or
 * processes, keep each other's records. The file is created with mode 0644; an empty file at path
 * counts as holding no records. A file at path that is not a valid plan file (another program's
 * file, one of another format version, a truncated or corrupted one) is reported with
 * NN_E_FORMAT and left untouched: remove it, or save to another path.
 *
 * @param ctx  a context.
 * @param path the file to write; its directory must exist and be writable.
 * @return NN_OK; NN_E_INVALID_ARG (ctx or path NULL, or path empty); NN_E_UNSUPPORTED
 *         (reference-backend context: it has no plans); NN_E_IO (locking, reading the existing
 *         file, creating, writing, syncing or renaming failed: the message gives the path and the
 *         system's reason); NN_E_FORMAT (the existing file does not decode: the message names the
 *         field and its byte offset; nothing was written); NN_E_OVERFLOW (more records than the
 *         format holds); NN_E_OOM_HOST.
 */
NN_API nn_status nn_plan_cache_save(nn_ctx *ctx, const char *path);

/**
 * Read a plan file and add its records to the context's known records (a record replaces a
 * known record with the same key; live plans are kept). Records written by another cuDNN version
 * or GPU, of a kind this build does not know, or of per-process state (scratch, random states)
 * that older versions saved, are skipped and counted in records_skipped. The whole file is
 * checked before anything is added: on any failure the cache is unchanged. With
 * settings.background_builds and settings.prebuild_plans on, the records that match the
 * context's settings are then queued for prebuilding (see above); what cannot be queued is built
 * when first needed. With
 * settings.prebuild_plans on, recurrent-layer records of the context's settings are also
 * prepared before this returns, on the calling thread and the context's stream (docs/RNN.md,
 * "The first step from a plan file"): descriptors built, cuDNN's first calls made on pool
 * scratch and, where a shape replays, its graphs captured, each counted in plans_prebuilt; a
 * failure there leaves that shape to its first call and does not fail the load. The call then
 * waits for the context's stream (that GPU work, and whatever the caller queued before it).
 *
 * @param ctx  a context.
 * @param path the file to read.
 * @return NN_OK; NN_E_INVALID_ARG (ctx or path NULL, or path empty); NN_E_UNSUPPORTED
 *         (reference-backend context); NN_E_IO (the file cannot be opened or read: path and
 *         system reason in the message); NN_E_FORMAT (not a plan file, another format version,
 *         truncated, corrupted or inconsistent: the message names the field and its byte
 *         offset); NN_E_OOM_HOST.
 */
NN_API nn_status nn_plan_cache_load(nn_ctx *ctx, const char *path);

/**
 * Forget every live plan and known record of the context, and every record of its device's
 * shared tuning (statistics are kept; other contexts keep their live plans and own records).
 * The next call of each op searches its plan again.
 *
 * @param ctx a context.
 * @return NN_OK (also for a reference-backend context, which has nothing to clear);
 *         NN_E_INVALID_ARG if ctx is NULL.
 */
NN_API nn_status nn_plan_cache_clear(nn_ctx *ctx);

/**
 * Wait until the context's background plan builds (see above) have finished and their plans
 * have replaced the quick alternates or, for prebuilt plans, gone live, e.g. before timing
 * steady-state calls. Builds that failed leave the alternate in place (counted in
 * background_failures, reported on stderr); a failed prebuild leaves its record to the first
 * call.
 *
 * @param ctx a context; a reference-backend context has nothing to wait for.
 * @return NN_OK; NN_E_INVALID_ARG if ctx is NULL.
 */
NN_API nn_status nn_plan_cache_wait(nn_ctx *ctx);

/**
 * Read the context's plan-cache counters.
 *
 * @param ctx   a context.
 * @param stats out: filled completely (all zeros for a reference-backend context).
 * @return NN_OK; NN_E_INVALID_ARG if ctx or stats is NULL.
 */
NN_API nn_status nn_plan_cache_get_stats(const nn_ctx *ctx, nn_plan_cache_stats *stats);

#ifdef __cplusplus
}
#endif

#endif /* NNPRIM_PLAN_CACHE_H */

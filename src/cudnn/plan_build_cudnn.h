/* Background builds of tuned plans.
 *
 * cuDNN compiles some engine configurations when their plan is finalized, in every process (46-76
 * ms for the tuned 32x64x56x56 3x3 forward on the H200, cuDNN 9.14). A plan-file record whose
 * tuned plan is such a configuration carries a quick alternate (plan_cache.h). The first call of
 * its key in a process then runs the alternate, rebuilt in a fraction of a millisecond, and hands
 * the tuned configuration to this builder: one worker thread per context, with its own cuDNN
 * handle (a handle must not be used by two threads at once), builds the graph and the plan, and
 * the context's next plan lookup swaps the finished plan into the cache in place of the
 * alternate. The same worker prebuilds the plans of a plan file as soon as it loads
 * (settings.prebuild_plans), so that a first call that comes later finds its plan ready; a
 * call that comes first moves its record's build to the front.
 *
 * The worker owns nothing the context's thread touches: it reads its jobs' value structs and
 * writes their results; the queue and the finished list are guarded by a mutex, and a counter
 * read without the lock lets nn__plan_builder_collect() return at once when nothing finished.
 * Plans the worker built were finalized with its handle, which therefore lives until the plan
 * cache is destroyed (nn__plan_builder_stop() then nn__plan_builder_free()).
 * Compiled only with cuDNN. */
#ifndef NN_CUDNN_PLAN_BUILD_CUDNN_H
#define NN_CUDNN_PLAN_BUILD_CUDNN_H

#include "cudnn/graph_cudnn.h"
#include "cudnn/plan_cache.h"

struct nn_ctx;
struct nn__plan_builder;

/* Queue the build of engine choice c for the graph of key (a key of kind's cache kind, copied;
 * the worker builds the graph with kind's build callback) under filter f, at the front of the
 * queue (a call waits for it); when it finishes, its plan replaces the live plan of key (the
 * quick alternate). fallback is the record to keep if the build fails (the alternate's own record;
 * copied, its JSON ignored). If a prebuild of key is queued or running, that job takes the
 * fallback instead (and moves to the front) and nothing new is queued. The worker thread and
 * its handle are created on the first call.
 * Returns NN_OK; NN_E_OOM_HOST; NN_E_INTERNAL (the thread could not be started: the message
 * says why). On failure nothing is queued. */
nn_status nn__plan_builder_submit(struct nn_ctx *ctx, const struct nn__graph_kind *kind,
                                  const void *key, const struct nn__cudnn_filter *f,
                                  const struct nn__engine_choice *c,
                                  const struct nn__plan_record *fallback);

/* Queue, at the back, the prebuild of a loaded record's plan (engine choice c for the graph of
 * key, of kind, under filter f) unless a job for key is already queued or running. When it
 * finishes, a key with no live plan gets it, with the key's known record; a key that went live
 * meanwhile (its first call came first) has its live plan replaced. A failed prebuild is counted
 * and left to the first call. Returns as nn__plan_builder_submit(). */
nn_status nn__plan_builder_prebuild(struct nn_ctx *ctx, const struct nn__graph_kind *kind,
                                    const void *key, const struct nn__cudnn_filter *f,
                                    const struct nn__engine_choice *c);

/* Swap every finished build into the context's plan cache (a key no longer live just drops its
 * plan, unless it was prebuilt; a failed build replaces the entry's record with its fallback)
 * and count them. Returns at once, without taking the lock, when nothing has finished. Never
 * fails. */
void nn__plan_builder_collect(struct nn_ctx *ctx);

/* Wait until every queued build has finished, then collect. Does nothing without a builder. */
void nn__plan_builder_wait(struct nn_ctx *ctx);

/* Stop the worker: queued builds are dropped, the build in progress is waited for, and finished
 * plans not yet collected are destroyed. The worker's handle stays (see above). */
void nn__plan_builder_stop(struct nn__plan_builder *b);

/* Release a stopped builder and its handle, after every plan it built has been destroyed.
 * NULL is allowed. */
void nn__plan_builder_free(struct nn__plan_builder *b);

/* ---------------------------------------------------------------------------------------------
 * fork()
 *
 * A child process has the parent's memory but none of its other threads (the builder's worker
 * is gone, its mutex may be held for good) and no usable CUDA state. A pthread_atfork() child
 * handler, registered at the first call below, counts forks; a cuDNN context records the count
 * when it is created, so a context inherited through a fork is recognised, and its destruction
 * in the child frees host memory only: no join, no lock of the builder or of the device's
 * shared tuning, no CUDA or cuDNN call, no plan-file save (the cuDNN objects' own memory is
 * abandoned to the child's exit or exec).
 */

/* Forks seen by this process so far (0 in a process that never forked; each child counts one
 * more than its parent did when it forked). Registers the handler on first use. */
unsigned nn__cudnn_fork_generation(void);

/* 1 if ctx's cuDNN state was made before a fork() this process is the child of, else 0. */
int nn__cudnn_ctx_inherited(const struct nn_ctx *ctx);

/* Release an inherited context's cuDNN state (ctx->cudnn, then NULL) as described above. */
void nn__cudnn_ctx_abandon(struct nn_ctx *ctx);

#endif

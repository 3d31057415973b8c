/* The cuDNN layer's per-context state: the cuDNN handle (created on first use, bound to the
 * context's stream, and again at each nn_ctx_set_stream), the context's cache with the identity its
 * file records carry (cuDNN version, GPU), and the background plan builder.
 *
 * Two files share it, one above the other: handle_cudnn.c (the state's parts: the handle, the
 * cache and builder slots, worker contexts), which the plan machinery uses, and ctx_cudnn.c (the
 * state's life: creation with the plan file loaded and prebuilt, saving and release), which only
 * the context assembly and the public plan-cache calls use. */
#ifndef NN_CUDNN_CUDNN_CTX_H
#define NN_CUDNN_CUDNN_CTX_H

#include <stdint.h>

#include "nn_config.h"
#include "nnprim/status.h"

struct nn_ctx;
struct nn__cache;

#if NN_HAVE_CUDNN
#include "core/cuda_load.h"

#include "cudnn/plan_file.h"

struct nn__plan_builder;
struct nn__graph_kind;

struct cublasLtContext; /* cublasLtHandle_t's struct */

struct nn__cudnn_state {
    cudnnHandle_t cudnn;
    struct cublasLtContext *cublaslt; /* the linear family's handle, created on its first call */
    /* The linear family's kept workspace (linear_cublaslt.c), pool memory freed with the state:
     * the products whose workspace is small run on it. */
    void *lt_ws;
    size_t lt_ws_bytes;
    struct nn__cache *plans;
    struct nn__plan_builder *builder;
    const struct nn__graph_kind *const *graph_kinds; /* the context assembly's table */
    int n_graph_kinds;
    uint64_t cudnn_version; /* cudnnGetVersion(): what plan files are written with and read for */
    unsigned fork_gen;      /* nn__cudnn_fork_generation() at creation (plan_build_cudnn.h) */
    struct nn__gpu_id gpu;
    /* The last call that used buffers shared across calls (nn__cudnn_shared_enter). */
    cudaEvent_t shared_ev; /* recorded at its end once the context has switched streams */
    void *shared_stream;   /* its stream */
    unsigned long long shared_sid;
    int shared_used, shared_recorded;
    /* A non-blocking stream of the context's own on which a per-call replay is captured while the
     * context's stream cannot be (nn__cudnn_capture), made on first need. */
    void *capture_stream;
    unsigned long long capture_sid;
};

/* ---------------------------------------------------------------------------------------------
 * handle_cudnn.c
 */

/* The context's handle, created on first use with the context's stream set once.
 * Returns NN_OK; NN_E_CUDNN. */
nn_status nn__cudnn_handle(struct nn_ctx *ctx, cudnnHandle_t *out);

/* Release a handle (NULL is allowed) without touching ctx's last error. */
void nn__cudnn_handle_destroy(struct nn_ctx *ctx, cudnnHandle_t h);

/* The context's cache (never NULL after nn__cudnn_ctx_init). */
struct nn__cache *nn__cudnn_plan_cache(struct nn_ctx *ctx);

/* Where the context keeps its background plan builder (plan_build_cudnn.h); NULL until the
 * first background build. */
struct nn__plan_builder **nn__cudnn_builder_slot(struct nn_ctx *ctx);

/* A context for a worker thread that builds plans for parent: same device, settings and stream,
 * its own cuDNN handle (created on first use, like any context's) and last error; no pool and
 * no plan cache, so it may only build graphs and plans. Returns NN_OK; NN_E_OOM_HOST. */
nn_status nn__cudnn_worker_ctx_create(struct nn_ctx *parent, struct nn_ctx **out);
/* Release a worker context and its handle. NULL is allowed. */
void nn__cudnn_worker_ctx_destroy(struct nn_ctx *w);

/* ---------------------------------------------------------------------------------------------
 * ctx_cudnn.c
 */

/* Create the state and the cache (for the n entry kinds of table: the context assembly lists
 * every family's kinds, so this layer knows none; and the ng graph kinds of graphs, static, each
 * with its cache kind in table, by which a loaded file's plans are prebuilt), and load
 * settings.plan_cache_file if it names a file (a missing file is silently skipped; an unreadable
 * or malformed one is logged and the cache starts empty). Fails only on NN_E_OOM_HOST,
 * NN_E_INVALID_ARG (a malformed kind table) or when the device cannot be described. */
struct nn__cache_kind;
nn_status nn__cudnn_ctx_init(struct nn_ctx *ctx, const struct nn__cache_kind *const *table, int n,
                             const struct nn__graph_kind *const *graphs, int ng);

/* Save settings.plan_cache_file if set (a failure is logged), then release plans and handles. */
void nn__cudnn_ctx_fini(struct nn_ctx *ctx);

/* Calls that use device buffers the context keeps across calls (recurrent layers' replay staging
 * and slots, dropout states, the kept ones of conv's and linear's bias gradients, linear's kept
 * workspace, cross-entropy's zeros) bracket their launches with enter and leave: on another stream
 * than the last such call, enter makes the stream wait for that call first, so that two streams
 * never use the buffers at once. leave records the end of the call; it costs nothing until the
 * context first switches streams (before that every call ran on the stream the context was made
 * with, which lives as long as it, so the wait can record there when needed). release goes before
 * such buffers are freed (on the context's stream, perhaps by another family's call that evicts
 * their cache entry): the stream waits for the last call, as in enter, which stays the last. None
 * fails: should CUDA refuse the event or the wait, the host waits instead. */
void nn__cudnn_shared_enter(struct nn_ctx *ctx);
void nn__cudnn_shared_leave(struct nn_ctx *ctx);
void nn__cudnn_shared_release(struct nn_ctx *ctx);

/* A per-call replay's capture (the recurrent layers' and linear products' graphs): fn(arg)'s
 * launches recorded into *out as nn__stream_capture() does. On a context whose stream cannot be
 * captured (the legacy or per-thread default stream, a blocking stream: nn__stream_can_capture)
 * the capture runs on the context's own non-blocking capture stream, with ctx->stream and the
 * handle pointed at it for the capture only: capturing queues no work, and the graph then
 * launches on the context's stream, which any stream may take. fn must launch work only (no
 * allocation, no event on the stream). NN_OK; NN_E_CUDA, NN_E_CUDNN (*out NULL). */
nn_status nn__cudnn_capture(struct nn_ctx *ctx, nn_status (*fn)(void *arg), void *arg,
                            cudaGraph_t *out);

/* nn_ctx_set_stream: the handle, if made, runs on stream from now on. NN_OK; NN_E_CUDNN. */
nn_status nn__cudnn_ctx_set_stream(struct nn_ctx *ctx, void *stream);

/* nn_plan_cache_save / _load for a cuDNN context: the file carries this process's cuDNN
 * version (cudnnGetVersion()) and the context's GPU; a load queues prebuilds. */
nn_status nn__cudnn_plan_cache_save(struct nn_ctx *ctx, const char *path);
nn_status nn__cudnn_plan_cache_load(struct nn_ctx *ctx, const char *path);
#endif

#endif

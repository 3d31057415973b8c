/* cuDNN graph (backend) API helpers: operation graphs built by an op family's graph kind, plan
 * selection (heuristics mode A then fallback, filtered by numerical notes and the workspace cap),
 * plans rebuilt from an engine's global index and knob choices (what the plan cache stores) or
 * from the plan's JSON form, and execution with a reused variant pack.
 *
 * Every cuDNN call goes through the checked bindings (bindings_cudnn.h), so a failure is recorded
 * with the function, cuDNN's status and message, and the call site.
 *
 * Ownership: graphs and plans are owned by the caller and released with their destroy functions.
 * A plan does not reference its graph after it is built (it copies what it needs), so a plan may
 * outlive the graph it came from. Neither is thread-safe; use them with one context at a time.
 * Compiled only with cuDNN (NN_HAVE_CUDNN). */
#ifndef NN_CUDNN_GRAPH_CUDNN_H
#define NN_CUDNN_GRAPH_CUDNN_H

#include <stddef.h>
#include <stdint.h>

#include "core/cuda_load.h"

#include "cudnn/cache.h"
#include "cudnn/graph_types_cudnn.h"
#include "nnprim/context.h"
#include "nnprim/tensor.h"

struct nn_ctx;

/* ---------------------------------------------------------------------------------------------
 * Pure helpers (no cuDNN calls; tested on the CPU)
 */

/* Insert a unit dimension at index axis (2 for the height of N, C, W). Its stride is
 * dims[axis] * strides[axis] of the dimension that moves right, which keeps a packed tensor
 * packed. Returns NN_OK; NN_E_INVALID_ARG if rank is already NN_MAX_RANK or axis is out of range.
 */
nn_status nn__cudnn_tensor_insert_unit_dim(struct nn__cudnn_tensor *t, int axis);

/* Plan selection rules, from the context's settings and the data type. */
struct nn__cudnn_filter {
    nn_dtype dtype;
    nn_math_mode math;
    int deterministic;
    size_t workspace_cap; /* 0 = no cap */
    int precompiled_only; /* candidates: skip engines cuDNN compiles at run time (their
                           * CUDNN_BEHAVIOR_NOTE_RUNTIME_COMPILATION), for a quick alternate */
};
void nn__cudnn_filter_from_ctx(const struct nn_ctx *ctx, nn_dtype dtype,
                               struct nn__cudnn_filter *f);

/* 1 if an engine with these numerical notes (cudnnBackendNumericalNote_t values) may run under
 * f: never DOWN_CONVERT_INPUTS; no TENSOR_CORE for f32 data under strict fp32; no
 * NONDETERMINISTIC when deterministic. Else 0, with *why (if not NULL) naming the note. */
int nn__cudnn_notes_allowed(const int64_t *notes, int n, const struct nn__cudnn_filter *f,
                            const char **why);

/* Workspaces of 1 TiB or more are cuDNN's way of saying "not really": treat them as unusable. */
#define NN__CUDNN_WORKSPACE_UNUSABLE ((int64_t)1 << 40)

/* 1 if a plan needing ws bytes may run under cap (0 = no cap); else 0 with *why. */
int nn__cudnn_workspace_usable(int64_t ws, size_t cap, const char **why);

/* ---------------------------------------------------------------------------------------------
 * Graphs
 */

struct nn__cudnn_graph;

#define NN__CUDNN_GRAPH_OPS_MAX 8 /* operations in one graph */

/* What an op family tells the graph layer about one kind of graph. The family defines it as a
 * static const table entry next to its cache kind; the context assembly lists it in the table
 * given to nn__cudnn_ctx_init(), so that the plans of a loaded file can be prebuilt from their
 * keys alone. Every callback is pure but build. */
struct nn__graph_kind {
    /* The cache kind of the plans (its key struct and field lists; records are graph-plan
     * records, plan_cache.h). Keys of this graph kind are keys of that cache kind. */
    const struct nn__cache_kind *cache;
    /* Check the key and create the graph's operations with the builder calls below, writing them
     * to ops (room for NN__CUDNN_GRAPH_OPS_MAX) in execution order. Returns NN_OK;
     * NN_E_INVALID_ARG or NN_E_DTYPE (the message names the field); the builder calls' errors. */
    nn_status (*build)(struct nn_ctx *ctx, const void *key, struct nn__cudnn_graph *g,
                       cudnnBackendDescriptor_t *ops, int *n_ops);
    /* 0 if the key's records have no graph (ops of old plan files no longer built): nothing is
     * built or prebuilt for them. */
    int (*has_graph)(const void *key);
    /* The dtype of the graph's data, which the numerical-note filter looks at. */
    nn_dtype (*data_dtype)(const void *key);
    /* The context settings the key was made under (prebuilding takes only the current ones). */
    void (*settings)(const void *key, struct nn__cache_settings *out);
    /* The graph as text, for messages; returns buf (cap bytes, NUL-terminated). */
    const char *(*describe)(char *buf, size_t cap, const void *key);
};

/* Build and finalize the operation graph of key (a key of kind's cache kind, copied into g) with
 * kind->build. Returns NN_OK; NN_E_INVALID_ARG (a key with no graph, or what build refuses: the
 * message names the field); NN_E_UNSUPPORTED (cuDNN rejects the graph); NN_E_CUDNN;
 * NN_E_OOM_HOST. */
nn_status nn__cudnn_graph_create(struct nn_ctx *ctx, const struct nn__graph_kind *kind,
                                 const void *key, struct nn__cudnn_graph **out);
void nn__cudnn_graph_destroy(struct nn__cudnn_graph *g);

/* The kind the graph was built with. */
const struct nn__graph_kind *nn__cudnn_graph_kind(const struct nn__cudnn_graph *g);

/* The finalized CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR (owned by g), e.g. for describe. */
cudnnBackendDescriptor_t nn__cudnn_graph_backend(const struct nn__cudnn_graph *g);

/* The graph's input and output tensors: their uids and the bytes each spans (from its first to
 * its last element), in the order they were created; returns their count (at most
 * NN__CUDNN_UID_MAX - 1). uids and bytes have room for NN__CUDNN_UID_MAX entries. */
int nn__cudnn_graph_io(const struct nn__cudnn_graph *g, int64_t *uids, size_t *bytes);

/* Builder calls, for a graph kind's build callback. Each descriptor they create is owned by g
 * (released with it) and finalized. */

/* A new, unfinalized descriptor of type, owned by g (for the family's own descriptors and
 * operations; the family sets its attributes and finalizes it). Returns NN_OK; NN_E_INTERNAL
 * (more descriptors than a graph holds); NN_E_CUDNN. */
nn_status nn__cudnn_graph_new_desc(struct nn_ctx *ctx, struct nn__cudnn_graph *g,
                                   cudnnBackendDescriptorType_t type,
                                   cudnnBackendDescriptor_t *out);

/* A tensor the graph reads or writes, with unique id uid (1..NN__CUDNN_UID_MAX - 1, once per
 * graph): a pointer for it is expected in every execution's struct nn__cudnn_args. Returns NN_OK;
 * NN_E_INVALID_ARG (uid out of range or taken); NN_E_INTERNAL; NN_E_CUDNN. */
nn_status nn__cudnn_graph_tensor(struct nn_ctx *ctx, struct nn__cudnn_graph *g,
                                 const struct nn__cudnn_tensor *t, int64_t uid,
                                 cudnnBackendDescriptor_t *out);

/* A virtual intermediate (uid NN__CUDNN_UID_MAX or above): packed in like's dimension order
 * (NCHW or channels-last as like is), in the accumulator's type compute, shaped like like. Returns
 * as nn__cudnn_graph_tensor(). */
nn_status nn__cudnn_graph_virtual(struct nn_ctx *ctx, struct nn__cudnn_graph *g,
                                  const struct nn__cudnn_tensor *like, nn_dtype compute,
                                  int64_t uid, cudnnBackendDescriptor_t *out);

/* A pointwise operation y = mode(x[, b]) computed in compute (b NULL: unary). Returns as
 * nn__cudnn_graph_new_desc(). */
nn_status nn__cudnn_graph_pointwise(struct nn_ctx *ctx, struct nn__cudnn_graph *g,
                                    cudnnPointwiseMode_t mode, nn_dtype compute,
                                    cudnnBackendDescriptor_t x, cudnnBackendDescriptor_t b,
                                    cudnnBackendDescriptor_t y, cudnnBackendDescriptor_t *op);

/* Set a scalar attribute (an operation's alpha or beta): double for an f64 accumulator, float
 * otherwise. Returns NN_OK; NN_E_CUDNN. */
nn_status nn__cudnn_set_scalar(struct nn_ctx *ctx, cudnnBackendDescriptor_t d,
                               cudnnBackendAttributeName_t attr, nn_dtype compute, double v);

/* ---------------------------------------------------------------------------------------------
 * Plans
 */

struct nn__cudnn_plan;

/* What a plan search did, for the plan cache's statistics (add, never reset). */
struct nn__cudnn_search_stats {
    int heuristic_queries;  /* heuristics descriptors finalized (mode A, fallback) */
    int plans_built;        /* execution plans finalized */
    int rejected_notes;     /* engine configs skipped for their numerical notes */
    int rejected_workspace; /* plans skipped for their workspace */
    int failed;             /* engine configs whose plan did not finalize */
};

/* Up to max finalized plans for g that pass f, in heuristic order: mode A's list, then the
 * fallback list (engines already taken are not repeated), written to plans (room for max).
 * stats may be NULL. Engine configs that fail on the way leave their failure in the context's
 * last error even when the search succeeds; verbose level 2 logs each one.
 * Returns NN_OK with *n >= 1; NN_E_UNSUPPORTED when no engine config passes (the message gives
 * the counts of each reason); NN_E_INVALID_ARG (max < 1); NN_E_CUDNN; NN_E_OOM_HOST.
 * On failure nothing is returned to free. */
nn_status nn__cudnn_plan_candidates(struct nn_ctx *ctx, const struct nn__cudnn_graph *g,
                                    const struct nn__cudnn_filter *f, int max,
                                    struct nn__cudnn_plan **plans, int *n,
                                    struct nn__cudnn_search_stats *stats);

/* The first plan that finalizes (heuristic tuning): candidates with max 1. */
nn_status nn__cudnn_plan_heuristic(struct nn_ctx *ctx, const struct nn__cudnn_graph *g,
                                   const struct nn__cudnn_filter *f, struct nn__cudnn_plan **out,
                                   struct nn__cudnn_search_stats *stats);

/* Rebuild the plan of engine choice c for g, with no heuristics query. The engine's notes and
 * the plan's workspace are checked against f (a record made under other settings is refused).
 * Returns NN_OK; NN_E_UNSUPPORTED (the engine does not take g here, or f refuses it);
 * NN_E_INVALID_ARG (knob_count out of range); NN_E_CUDNN; NN_E_OOM_HOST. */
nn_status nn__cudnn_plan_from_choice(struct nn_ctx *ctx, const struct nn__cudnn_graph *g,
                                     const struct nn__cudnn_filter *f,
                                     const struct nn__engine_choice *c,
                                     struct nn__cudnn_plan **out);

/* The plan's JSON form (CUDNN_ATTR_EXECUTION_PLAN_JSON_REPRESENTATION), NUL-terminated, in a
 * new host buffer (nn__host_free it); *len excludes the NUL. Returns NN_OK; NN_E_UNSUPPORTED
 * (this engine has no JSON form); NN_E_CUDNN; NN_E_OOM_HOST. */
nn_status nn__cudnn_plan_json(struct nn_ctx *ctx, const struct nn__cudnn_plan *p, char **json,
                              size_t *len);

/* Rebuild a plan from its JSON form (the fast path of the plan cache). g supplies the tensor
 * ids and the workspace check (its graph must be the one the JSON was made from).
 * Returns NN_OK; NN_E_UNSUPPORTED (cuDNN refuses the JSON or f refuses the plan); NN_E_CUDNN;
 * NN_E_OOM_HOST. */
nn_status nn__cudnn_plan_from_json(struct nn_ctx *ctx, const struct nn__cudnn_graph *g,
                                   const struct nn__cudnn_filter *f, const char *json, size_t len,
                                   struct nn__cudnn_plan **out);

/* Release a plan (its variant pack too). Takes void * to serve as the plan cache's
 * nn__plan_destroy_fn. NULL is allowed. */
void nn__cudnn_plan_destroy(void *plan);

/* The engine choice and workspace recorded when the plan was built. */
const struct nn__engine_choice *nn__cudnn_plan_choice(const struct nn__cudnn_plan *p);
int64_t nn__cudnn_plan_workspace(const struct nn__cudnn_plan *p);
/* 1 if the plan's engine is one cuDNN compiles at finalization (its behavior notes say
 * RUNTIME_COMPILATION): a fresh process pays that compilation again. */
int nn__cudnn_plan_runtime_compiled(const struct nn__cudnn_plan *p);

/* The finalized CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR (owned by p). */
cudnnBackendDescriptor_t nn__cudnn_plan_backend(const struct nn__cudnn_plan *p);

/* Run p on the context's stream. args holds the device pointers of the graph's tensors (by
 * uid); workspace has at least nn__cudnn_plan_workspace(p) bytes (may be NULL when that is 0).
 * The variant pack is rebuilt only when a pointer differs from the previous call's.
 * Returns NN_OK; NN_E_INVALID_ARG (a pointer the graph needs is NULL, or a workspace is
 * missing); NN_E_CUDNN; NN_E_OOM_HOST. */
nn_status nn__cudnn_plan_execute(struct nn_ctx *ctx, struct nn__cudnn_plan *p,
                                 const struct nn__cudnn_args *args, void *workspace);

/* Run plan with a workspace from the pool (taken and given back on the context's stream). */
nn_status nn__cudnn_plan_run(struct nn_ctx *ctx, struct nn__cudnn_plan *plan,
                             const struct nn__cudnn_args *args);

#endif

/* cuDNN graph (backend) API helpers: operation graphs built from plain value structs, plan
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

#include <cudnn.h>

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

/* 1-D parameters as 2-D: a leading spatial dimension with stride 1, dilation 1, no padding.
 * Rank 2 and 3 are left alone. */
void nn__cudnn_conv_to_2d(struct nn__cudnn_conv *c);

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

/* Build and finalize the operation graph described by d (checked first: the kind, ranks, matching
 * dtypes, spatial ranks, conv parameters). 1-D convolutions run as 2-D.
 * Returns NN_OK; NN_E_INVALID_ARG (the message names the field); NN_E_UNSUPPORTED (cuDNN
 * rejects the graph); NN_E_CUDNN; NN_E_OOM_HOST. */
nn_status nn__cudnn_graph_create(struct nn_ctx *ctx, const struct nn__cudnn_graph_desc *d,
                                 struct nn__cudnn_graph **out);
void nn__cudnn_graph_destroy(struct nn__cudnn_graph *g);

/* The values the graph was built from. */
const struct nn__cudnn_graph_desc *nn__cudnn_graph_get_desc(const struct nn__cudnn_graph *g);

/* The finalized CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR (owned by g), e.g. for describe. */
cudnnBackendDescriptor_t nn__cudnn_graph_backend(const struct nn__cudnn_graph *g);

/* Convenience builders: fill a graph desc for one op (alpha 1, beta 0; relu off). b may be NULL
 * (no fused bias). */
void nn__cudnn_desc_conv_fwd(struct nn__cudnn_graph_desc *d, const struct nn__cudnn_tensor *x,
                             const struct nn__cudnn_tensor *w, const struct nn__cudnn_tensor *b,
                             const struct nn__cudnn_tensor *y, const struct nn__cudnn_conv *c,
                             int relu);
void nn__cudnn_desc_conv_bwd_data(struct nn__cudnn_graph_desc *d, const struct nn__cudnn_tensor *dy,
                                  const struct nn__cudnn_tensor *w,
                                  const struct nn__cudnn_tensor *dx,
                                  const struct nn__cudnn_conv *c);
void nn__cudnn_desc_conv_bwd_filter(struct nn__cudnn_graph_desc *d,
                                    const struct nn__cudnn_tensor *x,
                                    const struct nn__cudnn_tensor *dy,
                                    const struct nn__cudnn_tensor *dw,
                                    const struct nn__cudnn_conv *c);

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

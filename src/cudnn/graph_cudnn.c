/* cuDNN graph API helpers; see graph_cudnn.h. Attribute names and types follow the cuDNN 9
 * backend API reference (cudnn_graph_v9.h and NVIDIA's backend descriptor documentation). */
#include <stdbool.h>
#include <string.h>

#include "core/alloc.h"
#include "core/ctx.h"
#include "core/error.h"
#include "core/log.h"
#include "cudnn/bindings_cudnn.h"
#include "cudnn/cudnn_ctx.h"
#include "cudnn/describe_cudnn.h"
#include "cudnn/graph_cudnn.h"
#include "mem/mem.h"

/* ---------------------------------------------------------------------------------------------
 * Pure helpers
 */

nn_status nn__cudnn_tensor_insert_unit_dim(struct nn__cudnn_tensor *t, int axis)
{
    if (t->rank >= NN_MAX_RANK || axis < 0 || axis > t->rank)
        return NN__FAIL(NULL, NN_E_INVALID_ARG,
                        "insert_unit_dim: axis %d into a rank-%d tensor (at most %d dims)", axis,
                        t->rank, NN_MAX_RANK);
    int64_t stride = axis < t->rank ? t->dims[axis] * t->strides[axis] : 1;
    for (int i = t->rank; i > axis; i--) {
        t->dims[i] = t->dims[i - 1];
        t->strides[i] = t->strides[i - 1];
    }
    t->dims[axis] = 1;
    t->strides[axis] = stride;
    t->rank++;
    return NN_OK;
}

void nn__cudnn_filter_from_ctx(const struct nn_ctx *ctx, nn_dtype dtype, struct nn__cudnn_filter *f)
{
    f->dtype = dtype;
    f->math = ctx->settings.math_mode;
    f->deterministic = ctx->settings.deterministic;
    f->workspace_cap = ctx->settings.workspace_cap;
    f->precompiled_only = 0;
}

int nn__cudnn_notes_allowed(const int64_t *notes, int n, const struct nn__cudnn_filter *f,
                            const char **why)
{
    const char *no = NULL;
    for (int i = 0; i < n && !no; i++) {
        if (notes[i] == CUDNN_NUMERICAL_NOTE_DOWN_CONVERT_INPUTS)
            no = "DOWN_CONVERT_INPUTS (never allowed)";
        else if (notes[i] == CUDNN_NUMERICAL_NOTE_TENSOR_CORE && f->dtype == NN_DTYPE_F32 &&
                 f->math == NN_MATH_STRICT_FP32)
            no = "TENSOR_CORE (f32 data under strict fp32 math)";
        else if (notes[i] == CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC && f->deterministic)
            no = "NONDETERMINISTIC (deterministic context)";
    }
    if (why) *why = no;
    return no == NULL;
}

int nn__cudnn_workspace_usable(int64_t ws, size_t cap, const char **why)
{
    const char *no = NULL;
    if (ws < 0)
        no = "negative workspace size";
    else if (ws >= NN__CUDNN_WORKSPACE_UNUSABLE)
        no = "workspace of 1 TiB or more";
    else if (cap && (uint64_t)ws > (uint64_t)cap)
        no = "workspace above the cap";
    if (why) *why = no;
    return no == NULL;
}

/* ---------------------------------------------------------------------------------------------
 * Graphs
 */

#define GRAPH_DESCS_MAX 24

struct nn__cudnn_graph {
    const struct nn__graph_kind *kind;
    const void *key; /* the copy after the struct */
    cudnnBackendDescriptor_t opgraph;
    cudnnBackendDescriptor_t owned[GRAPH_DESCS_MAX]; /* every descriptor behind opgraph */
    int n_owned;
    int64_t uids[NN__CUDNN_UID_MAX]; /* the variant pack's tensors */
    size_t bytes[NN__CUDNN_UID_MAX]; /* the bytes each spans */
    int n_uids;
};

#define SET(ctx, d, attr, type, n, ptr)                                                            \
    nn__cudnn_BackendSetAttribute((ctx), (d), (attr), (type), (int64_t)(n), (ptr))

nn_status nn__cudnn_graph_new_desc(struct nn_ctx *ctx, struct nn__cudnn_graph *g,
                                   cudnnBackendDescriptorType_t type, cudnnBackendDescriptor_t *out)
{
    if (g->n_owned == GRAPH_DESCS_MAX)
        return NN__FAIL(ctx, NN_E_INTERNAL, "graph_cudnn: more than %d descriptors in one graph",
                        GRAPH_DESCS_MAX);
    NN__TRY(nn__cudnn_BackendCreateDescriptor(ctx, type, out));
    g->owned[g->n_owned++] = *out;
    return NN_OK;
}

nn_status nn__cudnn_set_scalar(struct nn_ctx *ctx, cudnnBackendDescriptor_t d,
                               cudnnBackendAttributeName_t attr, nn_dtype compute, double v)
{
    if (compute == NN_DTYPE_F64) return SET(ctx, d, attr, CUDNN_TYPE_DOUBLE, 1, &v);
    float f = (float)v;
    return SET(ctx, d, attr, CUDNN_TYPE_FLOAT, 1, &f);
}

/* Bytes from the first element of t to the end of its last. */
static size_t span_bytes(const struct nn__cudnn_tensor *t)
{
    size_t n = 1;
    for (int i = 0; i < t->rank; i++)
        n += (size_t)(t->dims[i] - 1) * (size_t)t->strides[i];
    return n * nn_dtype_size(t->dtype);
}

static nn_status make_tensor(struct nn_ctx *ctx, struct nn__cudnn_graph *g,
                             const struct nn__cudnn_tensor *t, int64_t uid, bool is_virtual,
                             cudnnBackendDescriptor_t *out)
{
    cudnnBackendDescriptor_t d;
    NN__TRY(nn__cudnn_graph_new_desc(ctx, g, CUDNN_BACKEND_TENSOR_DESCRIPTOR, &d));
    cudnnDataType_t dt = nn__cudnn_data_type(t->dtype);
    NN__TRY(SET(ctx, d, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &dt));
    NN__TRY(SET(ctx, d, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, t->rank, t->dims));
    NN__TRY(SET(ctx, d, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, t->rank, t->strides));
    NN__TRY(SET(ctx, d, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid));
    NN__TRY(SET(ctx, d, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &t->alignment));
    NN__TRY(SET(ctx, d, CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, 1, &is_virtual));
    NN__TRY(nn__cudnn_BackendFinalize(ctx, d));
    if (!is_virtual) {
        g->uids[g->n_uids] = uid;
        g->bytes[g->n_uids++] = span_bytes(t);
    }
    *out = d;
    return NN_OK;
}

nn_status nn__cudnn_graph_tensor(struct nn_ctx *ctx, struct nn__cudnn_graph *g,
                                 const struct nn__cudnn_tensor *t, int64_t uid,
                                 cudnnBackendDescriptor_t *out)
{
    int taken = 0;
    for (int i = 0; i < g->n_uids; i++)
        taken |= g->uids[i] == uid;
    if (uid < 1 || uid >= NN__CUDNN_UID_MAX || taken)
        return NN__FAIL(ctx, NN_E_INVALID_ARG,
                        "graph_cudnn: tensor uid %lld must be in 1..%d and not taken, got %s",
                        (long long)uid, NN__CUDNN_UID_MAX - 1, taken ? "a taken one" : "it");
    return make_tensor(ctx, g, t, uid, false, out);
}

nn_status nn__cudnn_graph_virtual(struct nn_ctx *ctx, struct nn__cudnn_graph *g,
                                  const struct nn__cudnn_tensor *like, nn_dtype compute,
                                  int64_t uid, cudnnBackendDescriptor_t *out)
{
    if (uid < NN__CUDNN_UID_MAX)
        return NN__FAIL(ctx, NN_E_INVALID_ARG,
                        "graph_cudnn: virtual tensor uid must be >= %d, got %lld",
                        NN__CUDNN_UID_MAX, (long long)uid);
    struct nn__cudnn_tensor v = *like;
    v.dtype = compute;
    v.alignment = 16;
    /* Packed in like's dimension order (outermost = largest stride, ties in dim order): a
     * channels-last graph keeps its intermediates channels-last, as the fusion engines want. */
    int order[NN_MAX_RANK];
    for (int i = 0; i < v.rank; i++) {
        int j = i;
        for (; j > 0 && like->strides[order[j - 1]] < like->strides[i]; j--)
            order[j] = order[j - 1];
        order[j] = i;
    }
    int64_t s = 1;
    for (int i = v.rank - 1; i >= 0; i--) {
        v.strides[order[i]] = s;
        s *= v.dims[order[i]];
    }
    return make_tensor(ctx, g, &v, uid, true, out);
}

nn_status nn__cudnn_graph_pointwise(struct nn_ctx *ctx, struct nn__cudnn_graph *g,
                                    cudnnPointwiseMode_t mode, nn_dtype compute,
                                    cudnnBackendDescriptor_t x, cudnnBackendDescriptor_t b,
                                    cudnnBackendDescriptor_t y, cudnnBackendDescriptor_t *op)
{
    cudnnBackendDescriptor_t pw, d;
    cudnnDataType_t ct = nn__cudnn_data_type(compute);
    NN__TRY(nn__cudnn_graph_new_desc(ctx, g, CUDNN_BACKEND_POINTWISE_DESCRIPTOR, &pw));
    NN__TRY(SET(ctx, pw, CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &mode));
    NN__TRY(SET(ctx, pw, CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1, &ct));
    NN__TRY(nn__cudnn_BackendFinalize(ctx, pw));
    NN__TRY(nn__cudnn_graph_new_desc(ctx, g, CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR, &d));
    NN__TRY(SET(ctx, d, CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, CUDNN_TYPE_BACKEND_DESCRIPTOR,
                1, &pw));
    NN__TRY(
        SET(ctx, d, CUDNN_ATTR_OPERATION_POINTWISE_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x));
    if (b)
        NN__TRY(SET(ctx, d, CUDNN_ATTR_OPERATION_POINTWISE_BDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1,
                    &b));
    NN__TRY(
        SET(ctx, d, CUDNN_ATTR_OPERATION_POINTWISE_YDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y));
    NN__TRY(nn__cudnn_BackendFinalize(ctx, d));
    *op = d;
    return NN_OK;
}

void nn__cudnn_graph_destroy(struct nn__cudnn_graph *g)
{
    if (!g) return;
    if (g->opgraph) nn__cudnn_BackendDestroyDescriptor(NULL, g->opgraph);
    for (int i = g->n_owned - 1; i >= 0; i--)
        nn__cudnn_BackendDestroyDescriptor(NULL, g->owned[i]);
    nn__host_free(g);
}

nn_status nn__cudnn_graph_create(struct nn_ctx *ctx, const struct nn__graph_kind *kind,
                                 const void *key, struct nn__cudnn_graph **out)
{
    *out = NULL;
    if (kind->has_graph && !kind->has_graph(key))
        return NN__FAIL(ctx, NN_E_INVALID_ARG, "graph_cudnn: this %s key has no graph",
                        kind->cache->name);
    cudnnHandle_t h;
    NN__TRY(nn__cudnn_handle(ctx, &h));
    /* One allocation: the graph and its copy of the key. */
    size_t head = (sizeof(struct nn__cudnn_graph) + 15) & ~(size_t)15;
    struct nn__cudnn_graph *g = nn__host_calloc(1, head + kind->cache->key_size);
    if (!g) return NN__FAIL(ctx, NN_E_OOM_HOST, "graph_cudnn: out of host memory");
    memcpy((char *)g + head, key, kind->cache->key_size);
    g->kind = kind;
    g->key = (char *)g + head;
    cudnnBackendDescriptor_t ops[NN__CUDNN_GRAPH_OPS_MAX];
    int n_ops = 0;
    nn_status st = kind->build(ctx, g->key, g, ops, &n_ops);
    if (st == NN_OK && (n_ops < 1 || n_ops > NN__CUDNN_GRAPH_OPS_MAX))
        st = NN__FAIL(ctx, NN_E_INTERNAL, "graph_cudnn: a %s graph of %d operations (1..%d)",
                      kind->cache->name, n_ops, NN__CUDNN_GRAPH_OPS_MAX);
    if (st == NN_OK)
        st = nn__cudnn_BackendCreateDescriptor(ctx, CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR,
                                               &g->opgraph);
    if (st == NN_OK)
        st = SET(ctx, g->opgraph, CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &h);
    if (st == NN_OK)
        st = SET(ctx, g->opgraph, CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR,
                 n_ops, ops);
    if (st == NN_OK) st = nn__cudnn_BackendFinalize(ctx, g->opgraph);
    if (st != NN_OK) {
        nn__cudnn_graph_destroy(g);
        return st;
    }
    *out = g;
    return NN_OK;
}

const struct nn__graph_kind *nn__cudnn_graph_kind(const struct nn__cudnn_graph *g)
{
    return g->kind;
}

cudnnBackendDescriptor_t nn__cudnn_graph_backend(const struct nn__cudnn_graph *g)
{
    return g->opgraph;
}

int nn__cudnn_graph_io(const struct nn__cudnn_graph *g, int64_t *uids, size_t *bytes)
{
    memcpy(uids, g->uids, (size_t)g->n_uids * sizeof *uids);
    memcpy(bytes, g->bytes, (size_t)g->n_uids * sizeof *bytes);
    return g->n_uids;
}

/* ---------------------------------------------------------------------------------------------
 * Plans
 */

struct nn__cudnn_plan {
    cudnnBackendDescriptor_t plan;
    int64_t workspace;
    struct nn__engine_choice choice;
    int runtime_compiled; /* the engine has CUDNN_BEHAVIOR_NOTE_RUNTIME_COMPILATION */
    int64_t uids[NN__CUDNN_UID_MAX];
    int n_uids;
    /* The last variant pack and what it holds: reused while the pointers stay the same. */
    cudnnBackendDescriptor_t vp;
    void *vp_ptrs[NN__CUDNN_UID_MAX];
    void *vp_workspace;
};

void nn__cudnn_plan_destroy(void *plan)
{
    struct nn__cudnn_plan *p = plan;
    if (!p) return;
    if (p->vp) nn__cudnn_BackendDestroyDescriptor(NULL, p->vp);
    if (p->plan) nn__cudnn_BackendDestroyDescriptor(NULL, p->plan);
    nn__host_free(p);
}

const struct nn__engine_choice *nn__cudnn_plan_choice(const struct nn__cudnn_plan *p)
{
    return &p->choice;
}

int64_t nn__cudnn_plan_workspace(const struct nn__cudnn_plan *p)
{
    return p->workspace;
}

int nn__cudnn_plan_runtime_compiled(const struct nn__cudnn_plan *p)
{
    return p->runtime_compiled;
}

static int has_runtime_compilation(const struct nn__cudnn_engine_info *info)
{
    for (int i = 0; i < info->n_behavior; i++)
        if (info->behavior[i] == CUDNN_BEHAVIOR_NOTE_RUNTIME_COMPILATION) return 1;
    return 0;
}

cudnnBackendDescriptor_t nn__cudnn_plan_backend(const struct nn__cudnn_plan *p)
{
    return p->plan;
}

/* Finalize a plan for an engine config; on success *out owns the descriptor. A plan whose
 * workspace f refuses is released and reported as NN_E_UNSUPPORTED with *ws_refused set. */
static nn_status finalize_plan(struct nn_ctx *ctx, const struct nn__cudnn_graph *g,
                               const struct nn__cudnn_filter *f, cudnnBackendDescriptor_t engcfg,
                               const struct nn__engine_choice *choice, struct nn__cudnn_plan **out,
                               int *ws_refused)
{
    *ws_refused = 0;
    cudnnHandle_t h;
    NN__TRY(nn__cudnn_handle(ctx, &h));
    struct nn__cudnn_plan *p = nn__host_calloc(1, sizeof *p);
    if (!p) return NN__FAIL(ctx, NN_E_OOM_HOST, "graph_cudnn: out of host memory");
    int64_t n = 0;
    nn_status st =
        nn__cudnn_BackendCreateDescriptor(ctx, CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR, &p->plan);
    if (st == NN_OK)
        st = SET(ctx, p->plan, CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &h);
    if (st == NN_OK)
        st = SET(ctx, p->plan, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG,
                 CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &engcfg);
    if (st == NN_OK) st = nn__cudnn_BackendFinalize(ctx, p->plan);
    if (st == NN_OK)
        st = nn__cudnn_BackendGetAttribute(ctx, p->plan, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE,
                                           CUDNN_TYPE_INT64, 1, &n, &p->workspace);
    const char *why;
    if (st == NN_OK && !nn__cudnn_workspace_usable(p->workspace, f->workspace_cap, &why)) {
        *ws_refused = 1;
        st = NN__FAIL(ctx, NN_E_UNSUPPORTED,
                      "graph_cudnn: engine %lld needs %lld bytes of workspace: %s (cap %zu)",
                      (long long)choice->engine, (long long)p->workspace, why, f->workspace_cap);
    }
    if (st != NN_OK) {
        nn__cudnn_plan_destroy(p);
        return st;
    }
    p->choice = *choice;
    memcpy(p->uids, g->uids, sizeof p->uids);
    p->n_uids = g->n_uids;
    *out = p;
    return NN_OK;
}

static int same_choice(const struct nn__engine_choice *a, const struct nn__engine_choice *b)
{
    if (a->engine != b->engine || a->knob_count != b->knob_count) return 0;
    for (int i = 0; i < a->knob_count; i++)
        if (a->knobs[i].type != b->knobs[i].type || a->knobs[i].value != b->knobs[i].value)
            return 0;
    return 1;
}

/* Engine configs of one heuristics query; the caller destroys cfgs[0..*n) and frees cfgs. */
static nn_status heuristics(struct nn_ctx *ctx, const struct nn__cudnn_graph *g,
                            cudnnBackendHeurMode_t mode, cudnnBackendDescriptor_t **cfgs, int *n,
                            struct nn__cudnn_search_stats *stats)
{
    *cfgs = NULL;
    *n = 0;
    cudnnBackendDescriptor_t heur;
    NN__TRY(nn__cudnn_BackendCreateDescriptor(ctx, CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR, &heur));
    int64_t count = 0;
    nn_status st = SET(ctx, heur, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH,
                       CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &g->opgraph);
    if (st == NN_OK)
        st = SET(ctx, heur, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &mode);
    if (st == NN_OK) st = nn__cudnn_BackendFinalize(ctx, heur);
    if (st == NN_OK) {
        stats->heuristic_queries++;
        st = nn__cudnn_BackendGetAttribute(ctx, heur, CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                           CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &count, NULL);
    }
    cudnnBackendDescriptor_t *a = NULL;
    int made = 0;
    if (st == NN_OK && count > 0) {
        a = nn__host_calloc((size_t)count, sizeof *a);
        if (!a) st = NN__FAIL(ctx, NN_E_OOM_HOST, "graph_cudnn: out of host memory");
        while (st == NN_OK && made < count) {
            st = nn__cudnn_BackendCreateDescriptor(ctx, CUDNN_BACKEND_ENGINECFG_DESCRIPTOR,
                                                   &a[made]);
            if (st == NN_OK) made++;
        }
        if (st == NN_OK)
            st = nn__cudnn_BackendGetAttribute(ctx, heur, CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                               CUDNN_TYPE_BACKEND_DESCRIPTOR, count, &count, a);
    }
    nn__cudnn_BackendDestroyDescriptor(NULL, heur);
    if (st != NN_OK) {
        for (int i = 0; i < made; i++)
            nn__cudnn_BackendDestroyDescriptor(NULL, a[i]);
        nn__host_free(a);
        return st;
    }
    if (count > made) count = made;
    for (int i = (int)count; i < made; i++)
        nn__cudnn_BackendDestroyDescriptor(NULL, a[i]);
    *cfgs = a;
    *n = (int)count;
    return NN_OK;
}

/* Verbose level 2: one line per engine config the search looks at, and what became of it. */
static void log_candidate(const struct nn_ctx *ctx, cudnnBackendHeurMode_t mode,
                          const struct nn__cudnn_engine_info *info, int64_t workspace,
                          const char *refused)
{
    if (nn__verbose(ctx) < 2) return;
    char choice[NN__CUDNN_DESCRIBE_MAX], notes[256];
    nn__cudnn_describe_choice(choice, sizeof choice, &info->choice);
    nn__cudnn_describe_notes(notes, sizeof notes, info->notes, info->n_notes);
    if (refused)
        nn__log("plan search (%s): %s notes=%s: refused: %s",
                mode == CUDNN_HEUR_MODE_A ? "mode A" : "fallback", choice, notes, refused);
    else
        nn__log("plan search (%s): %s notes=%s: finalized, workspace %lld bytes",
                mode == CUDNN_HEUR_MODE_A ? "mode A" : "fallback", choice, notes,
                (long long)workspace);
}

nn_status nn__cudnn_plan_candidates(struct nn_ctx *ctx, const struct nn__cudnn_graph *g,
                                    const struct nn__cudnn_filter *f, int max,
                                    struct nn__cudnn_plan **plans, int *n,
                                    struct nn__cudnn_search_stats *stats)
{
    *n = 0;
    if (max < 1)
        return NN__FAIL(ctx, NN_E_INVALID_ARG, "plan_candidates: max must be >= 1, got %d", max);
    struct nn__cudnn_search_stats local = {0};
    if (!stats) stats = &local;
    struct nn__cudnn_search_stats before = *stats;
    static const cudnnBackendHeurMode_t modes[] = {CUDNN_HEUR_MODE_A, CUDNN_HEUR_MODE_FALLBACK};
    nn_status st = NN_OK, hard = NN_OK;
    const char *last_why = "";
    nn_error_info last_fail = {0};
    /* Candidates that fail are recorded as they are tried; a search that finds a plan succeeds,
     * and leaves both records as they were. */
    struct nn__error_kept keep = nn__error_keep(ctx);
    for (size_t m = 0; m < sizeof modes / sizeof modes[0] && *n < max && hard == NN_OK; m++) {
        cudnnBackendDescriptor_t *cfgs;
        int count;
        st = heuristics(ctx, g, modes[m], &cfgs, &count, stats);
        if (st == NN_E_OOM_HOST) hard = st;
        if (st != NN_OK) {
            last_fail = *nn_last_error();
            continue; /* a mode that does not take this graph: try the next */
        }
        for (int i = 0; i < count && *n < max && hard == NN_OK; i++) {
            struct nn__cudnn_engine_info info;
            st = nn__cudnn_read_engcfg(ctx, cfgs[i], &info);
            if (st != NN_OK) {
                stats->failed++;
                last_fail = *nn_last_error();
                continue;
            }
            int seen = 0;
            for (int k = 0; k < *n && !seen; k++)
                seen = same_choice(&plans[k]->choice, &info.choice);
            if (seen) continue;
            const char *why;
            if (!nn__cudnn_notes_allowed(info.notes, info.n_notes, f, &why)) {
                last_why = why;
                stats->rejected_notes++;
                log_candidate(ctx, modes[m], &info, -1, why);
                continue;
            }
            if (f->precompiled_only && has_runtime_compilation(&info)) {
                last_why = "RUNTIME_COMPILATION (precompiled engines asked for)";
                stats->rejected_notes++;
                log_candidate(ctx, modes[m], &info, -1, last_why);
                continue;
            }
            int ws_refused;
            st = finalize_plan(ctx, g, f, cfgs[i], &info.choice, &plans[*n], &ws_refused);
            if (st == NN_OK) plans[*n]->runtime_compiled = has_runtime_compilation(&info);
            if (st == NN_OK || ws_refused) stats->plans_built++;
            log_candidate(ctx, modes[m], &info, st == NN_OK ? plans[*n]->workspace : -1,
                          st == NN_OK ? NULL : nn_last_error()->message);
            if (st == NN_OK) {
                (*n)++;
            } else if (st == NN_E_OOM_HOST) {
                hard = st;
            } else {
                last_fail = *nn_last_error();
                if (ws_refused)
                    stats->rejected_workspace++;
                else
                    stats->failed++;
            }
        }
        for (int i = 0; i < count; i++)
            nn__cudnn_BackendDestroyDescriptor(NULL, cfgs[i]);
        nn__host_free(cfgs);
    }
    if (hard != NN_OK || *n == 0) {
        for (int k = 0; k < *n; k++)
            nn__cudnn_plan_destroy(plans[k]);
        *n = 0;
        if (hard != NN_OK) return hard;
        char gd[NN__CUDNN_DESCRIBE_MAX];
        return NN__FAIL(
            ctx, NN_E_UNSUPPORTED,
            "no cuDNN engine for %s: %d config(s) refused for numerical notes%s%s, %d "
            "for workspace, %d failed%s%s",
            g->kind->describe(gd, sizeof gd, g->key), stats->rejected_notes - before.rejected_notes,
            last_why && *last_why ? " e.g. " : "", last_why ? last_why : "",
            stats->rejected_workspace - before.rejected_workspace, stats->failed - before.failed,
            last_fail.message[0] ? "; last: " : "", last_fail.message);
    }
    nn__error_restore(ctx, &keep);
    return NN_OK;
}

nn_status nn__cudnn_plan_heuristic(struct nn_ctx *ctx, const struct nn__cudnn_graph *g,
                                   const struct nn__cudnn_filter *f, struct nn__cudnn_plan **out,
                                   struct nn__cudnn_search_stats *stats)
{
    int n;
    *out = NULL;
    return nn__cudnn_plan_candidates(ctx, g, f, 1, out, &n, stats);
}

nn_status nn__cudnn_plan_from_choice(struct nn_ctx *ctx, const struct nn__cudnn_graph *g,
                                     const struct nn__cudnn_filter *f,
                                     const struct nn__engine_choice *c, struct nn__cudnn_plan **out)
{
    *out = NULL;
    if (c->knob_count < 0 || c->knob_count > NN__ENGINE_KNOBS_MAX)
        return NN__FAIL(ctx, NN_E_INVALID_ARG, "plan_from_choice: knob_count must be 0..%d, got %d",
                        NN__ENGINE_KNOBS_MAX, (int)c->knob_count);
    cudnnBackendDescriptor_t engine = NULL, cfg = NULL, knobs[NN__ENGINE_KNOBS_MAX];
    int n_knobs = 0;
    nn_status st = nn__cudnn_BackendCreateDescriptor(ctx, CUDNN_BACKEND_ENGINE_DESCRIPTOR, &engine);
    if (st == NN_OK)
        st = SET(ctx, engine, CUDNN_ATTR_ENGINE_OPERATION_GRAPH, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1,
                 &g->opgraph);
    if (st == NN_OK)
        st = SET(ctx, engine, CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64, 1, &c->engine);
    if (st == NN_OK) st = nn__cudnn_BackendFinalize(ctx, engine);
    struct nn__cudnn_engine_info info;
    if (st == NN_OK) st = nn__cudnn_read_engine(ctx, engine, &info);
    const char *why;
    if (st == NN_OK && !nn__cudnn_notes_allowed(info.notes, info.n_notes, f, &why))
        st = NN__FAIL(ctx, NN_E_UNSUPPORTED, "plan_from_choice: engine %lld is refused: %s",
                      (long long)c->engine, why);
    for (; st == NN_OK && n_knobs < c->knob_count; n_knobs++) {
        cudnnBackendDescriptor_t k;
        st = nn__cudnn_BackendCreateDescriptor(ctx, CUDNN_BACKEND_KNOB_CHOICE_DESCRIPTOR, &k);
        if (st != NN_OK) break;
        knobs[n_knobs] = k;
        cudnnBackendKnobType_t type = (cudnnBackendKnobType_t)c->knobs[n_knobs].type;
        st = SET(ctx, k, CUDNN_ATTR_KNOB_CHOICE_KNOB_TYPE, CUDNN_TYPE_KNOB_TYPE, 1, &type);
        if (st == NN_OK)
            st = SET(ctx, k, CUDNN_ATTR_KNOB_CHOICE_KNOB_VALUE, CUDNN_TYPE_INT64, 1,
                     &c->knobs[n_knobs].value);
        if (st == NN_OK) st = nn__cudnn_BackendFinalize(ctx, k);
    }
    if (st == NN_OK)
        st = nn__cudnn_BackendCreateDescriptor(ctx, CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, &cfg);
    if (st == NN_OK)
        st = SET(ctx, cfg, CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &engine);
    if (st == NN_OK && n_knobs)
        st = SET(ctx, cfg, CUDNN_ATTR_ENGINECFG_KNOB_CHOICES, CUDNN_TYPE_BACKEND_DESCRIPTOR,
                 n_knobs, knobs);
    if (st == NN_OK) st = nn__cudnn_BackendFinalize(ctx, cfg);
    int ws_refused;
    if (st == NN_OK) st = finalize_plan(ctx, g, f, cfg, c, out, &ws_refused);
    if (st == NN_OK) (*out)->runtime_compiled = has_runtime_compilation(&info);
    if (cfg) nn__cudnn_BackendDestroyDescriptor(NULL, cfg);
    for (int i = 0; i < n_knobs; i++)
        nn__cudnn_BackendDestroyDescriptor(NULL, knobs[i]);
    if (engine) nn__cudnn_BackendDestroyDescriptor(NULL, engine);
    return st;
}

nn_status nn__cudnn_plan_json(struct nn_ctx *ctx, const struct nn__cudnn_plan *p, char **json,
                              size_t *len)
{
    *json = NULL;
    *len = 0;
    int64_t n = 0;
    NN__TRY(nn__cudnn_BackendGetAttribute(
        ctx, p->plan, CUDNN_ATTR_EXECUTION_PLAN_JSON_REPRESENTATION, CUDNN_TYPE_CHAR, 0, &n, NULL));
    if (n <= 0)
        return NN__FAIL(ctx, NN_E_UNSUPPORTED, "plan_json: engine %lld has no JSON form",
                        (long long)p->choice.engine);
    char *s = nn__host_alloc((size_t)n + 1);
    if (!s)
        return NN__FAIL(ctx, NN_E_OOM_HOST, "plan_json: out of host memory (%lld bytes)",
                        (long long)n + 1);
    nn_status st = nn__cudnn_BackendGetAttribute(
        ctx, p->plan, CUDNN_ATTR_EXECUTION_PLAN_JSON_REPRESENTATION, CUDNN_TYPE_CHAR, n, &n, s);
    if (st != NN_OK) {
        nn__host_free(s);
        return st;
    }
    s[n] = '\0';
    *json = s;
    *len = strlen(s);
    return NN_OK;
}

nn_status nn__cudnn_plan_from_json(struct nn_ctx *ctx, const struct nn__cudnn_graph *g,
                                   const struct nn__cudnn_filter *f, const char *json, size_t len,
                                   struct nn__cudnn_plan **out)
{
    *out = NULL;
    cudnnHandle_t h;
    NN__TRY(nn__cudnn_handle(ctx, &h));
    struct nn__cudnn_plan *p = nn__host_calloc(1, sizeof *p);
    if (!p) return NN__FAIL(ctx, NN_E_OOM_HOST, "graph_cudnn: out of host memory");
    int64_t n;
    nn_status st =
        nn__cudnn_BackendCreateDescriptor(ctx, CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR, &p->plan);
    if (st == NN_OK)
        st = SET(ctx, p->plan, CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &h);
    if (st == NN_OK)
        st = SET(ctx, p->plan, CUDNN_ATTR_EXECUTION_PLAN_JSON_REPRESENTATION, CUDNN_TYPE_CHAR,
                 (int64_t)len, json);
    if (st == NN_OK) st = nn__cudnn_BackendFinalize(ctx, p->plan);
    if (st == NN_OK)
        st = nn__cudnn_BackendGetAttribute(ctx, p->plan, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE,
                                           CUDNN_TYPE_INT64, 1, &n, &p->workspace);
    /* The engine behind a deserialized plan is read back for its notes and the record; where
     * cuDNN cannot say, the plan is kept with engine -1 (its record was made under the same
     * settings, which are part of the plan cache key). */
    struct nn__cudnn_plan_info info = {.engine.choice.engine = -1};
    struct nn__error_kept saved = nn__error_keep(ctx);
    if (st == NN_OK && nn__cudnn_read_plan(ctx, p->plan, &info) != NN_OK) {
        info.engine.choice.engine = -1;
        info.engine.choice.knob_count = 0;
        info.engine.n_notes = 0;
        info.engine.n_behavior = 0;
        nn__error_restore(ctx, &saved);
    }
    p->runtime_compiled = has_runtime_compilation(&info.engine);
    const char *why = NULL;
    if (st == NN_OK && (!nn__cudnn_notes_allowed(info.engine.notes, info.engine.n_notes, f, &why) ||
                        !nn__cudnn_workspace_usable(p->workspace, f->workspace_cap, &why)))
        st = NN__FAIL(ctx, NN_E_UNSUPPORTED, "plan_from_json: engine %lld is refused: %s",
                      (long long)info.engine.choice.engine, why);
    if (st != NN_OK) {
        nn__cudnn_plan_destroy(p);
        return st;
    }
    p->choice = info.engine.choice;
    memcpy(p->uids, g->uids, sizeof p->uids);
    p->n_uids = g->n_uids;
    *out = p;
    return NN_OK;
}

/* Point the plan's variant pack at ptrs and workspace: keep it when nothing changed. */
static nn_status variant_pack(struct nn_ctx *ctx, struct nn__cudnn_plan *p, void *const *ptrs,
                              void *workspace)
{
    if (p->vp && p->vp_workspace == workspace &&
        !memcmp(p->vp_ptrs, ptrs, (size_t)p->n_uids * sizeof *ptrs))
        return NN_OK;
    if (p->vp) {
        nn__cudnn_BackendDestroyDescriptor(NULL, p->vp);
        p->vp = NULL;
    }
    cudnnBackendDescriptor_t vp;
    NN__TRY(nn__cudnn_BackendCreateDescriptor(ctx, CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, &vp));
    nn_status st =
        SET(ctx, vp, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, p->n_uids, p->uids);
    if (st == NN_OK)
        st = SET(ctx, vp, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, p->n_uids,
                 ptrs);
    if (st == NN_OK)
        st = SET(ctx, vp, CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &workspace);
    if (st == NN_OK) st = nn__cudnn_BackendFinalize(ctx, vp);
    if (st != NN_OK) {
        nn__cudnn_BackendDestroyDescriptor(NULL, vp);
        return st;
    }
    p->vp = vp;
    memcpy(p->vp_ptrs, ptrs, (size_t)p->n_uids * sizeof *ptrs);
    p->vp_workspace = workspace;
    return NN_OK;
}

nn_status nn__cudnn_plan_execute(struct nn_ctx *ctx, struct nn__cudnn_plan *p,
                                 const struct nn__cudnn_args *args, void *workspace)
{
    void *ptrs[NN__CUDNN_UID_MAX];
    for (int i = 0; i < p->n_uids; i++) {
        ptrs[i] = args->p[p->uids[i]];
        if (!ptrs[i])
            return NN__FAIL(ctx, NN_E_INVALID_ARG,
                            "plan_execute: the pointer of tensor uid %lld is NULL",
                            (long long)p->uids[i]);
    }
    if (p->workspace > 0 && !workspace)
        return NN__FAIL(ctx, NN_E_INVALID_ARG,
                        "plan_execute: the plan needs %lld bytes of workspace, got NULL",
                        (long long)p->workspace);
    cudnnHandle_t h;
    NN__TRY(nn__cudnn_handle(ctx, &h));
    NN__TRY(variant_pack(ctx, p, ptrs, workspace));
    return nn__cudnn_BackendExecute(ctx, h, p->plan, p->vp);
}

nn_status nn__cudnn_plan_run(struct nn_ctx *ctx, struct nn__cudnn_plan *plan,
                             const struct nn__cudnn_args *args)
{
    int64_t bytes = nn__cudnn_plan_workspace(plan);
    void *ws = NULL;
    if (bytes > 0) {
        uint64_t t0 = nn__verbose(ctx) >= 2 ? nn__now_ns() : 0;
        NN__TRY(nn__dev_alloc(ctx, (size_t)bytes, &ws));
        if (t0)
            nn__log("workspace: %lld bytes from the pool in %.3f ms", (long long)bytes,
                    (double)(nn__now_ns() - t0) / 1e6);
    }
    nn_status st = nn__cudnn_plan_execute(ctx, plan, args, ws);
    nn_status fst = nn__dev_free(ctx, ws);
    return st != NN_OK ? st : fst;
}

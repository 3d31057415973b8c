/* The linear layer on cuBLASLt: one cublasLtMatmul per product, with the bias and relu fused in
 * its epilogue (forward) and the bias gradient fused into the weight gradient (BGRADB) where
 * cuBLASLt has an algorithm for them, else the plain product followed by cuDNN's legacy bias and
 * activation calls (forward). An unfused bias gradient is a product of its own, g times a column
 * of ones, for every dtype: cuDNN's legacy bias gradient has no bf16 kernel. Descriptors and the
 * heuristic's algorithm are cached per shape in the context's generic cache (kind "linear
 * matmul"), whose plan file keeps the algorithm.
 *
 * Row-major tensors are read as column-major matrices of the transposed shape, so every product
 * is computed transposed (docs/LINEAR.md):
 *   forward  y^T  (out x m) = op_T(w: in x out) * x^T (in x m)       + b (out), relu
 *   dx       dx^T (in x m)  = w (in x out) * g^T (out x m)
 *   dw       dw^T (in x out) = x^T (in x m) * op_T(g^T: out x m)     db = sum over k = m
 *   db       db   (out x 1)  = g^T (out x m) * ones (m x 1)          where BGRADB did not run */
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "core/cuda_load.h"

#include "core/alloc.h"
#include "core/capture.h"
#include "core/ctx.h"
#include "core/cuda_util.h"
#include "core/error.h"
#include "core/log.h"
#include "cudnn/bindings_cudnn.h"
#include "cudnn/cache.h"
#include "cudnn/cache_kinds.h"
#include "cudnn/cudnn_ctx.h"
#include "cudnn/describe_cudnn.h"
#include "linear/linear_internal.h"
#include "mem/mem.h"

/* The cap on a matmul's workspace when the context sets none: cuBLASLt's own guidance for
 * Hopper is 32 MiB. */
#define LT_WORKSPACE_DEFAULT ((uint64_t)32 << 20)

/* A product whose workspace is at most this runs on the context's kept workspace
 * (nn__cudnn_state.lt_ws) rather than on a pool block taken and given back per call: that pair
 * costs a host-paced product, a classifier's head, a measurable part of its step (the H200's
 * figures: docs/LINEAR.md). Larger workspaces come with products whose GPU time dwarfs it. */
#define LT_WORKSPACE_KEEP ((uint64_t)1 << 20)

/* ---------------------------------------------------------------------------------------------
 * Checked cuBLASLt calls: a failure is recorded with the call's name and cuBLAS status
 */

static const char *lt_status_name(cublasStatus_t s)
{
    switch (s) {
    case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "CUBLAS_STATUS_ARCH_MISMATCH";
    case CUBLAS_STATUS_MAPPING_ERROR: return "CUBLAS_STATUS_MAPPING_ERROR";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_INTERNAL_ERROR: return "CUBLAS_STATUS_INTERNAL_ERROR";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
    case CUBLAS_STATUS_LICENSE_ERROR: return "CUBLAS_STATUS_LICENSE_ERROR";
    }
    return "CUBLAS_STATUS_UNKNOWN";
}

static nn_status lt_check(struct nn_ctx *ctx, const char *fn, const char *call, cublasStatus_t s,
                          const char *file, int line)
{
    if (s == CUBLAS_STATUS_SUCCESS) return NN_OK;
    return nn__record_error(ctx, NN_E_CUBLAS, call, (int)s, lt_status_name(s), file, line,
                            "%s: %s failed: %s (%d)", fn, call, lt_status_name(s), (int)s);
}

#define LT(ctx, fn, call) lt_check((ctx), (fn), #call, (call), __FILE__, __LINE__)

/* The context's cuBLASLt handle, created once, beside its cuDNN handle (cudnn_ctx.h). */
static nn_status lt_handle(struct nn_ctx *ctx, const char *fn, cublasLtHandle_t *out)
{
    struct nn__cudnn_state *s = ctx->cudnn;
    if (!s->cublaslt) NN__TRY(LT(ctx, fn, cublasLtCreate(&s->cublaslt)));
    *out = s->cublaslt;
    return NN_OK;
}

/* ---------------------------------------------------------------------------------------------
 * The cache kind: key = the product asked for, record = the algorithm, live = descriptors
 */

enum lt_op { LT_FWD = 0, LT_DX = 1, LT_DW = 2, LT_DB = 3 };

struct lt_key {
    int32_t op;       /* enum lt_op */
    int32_t dtype;    /* nn_dtype */
    int32_t epilogue; /* cublasLtEpilogue_t asked for */
    int32_t align;    /* the smallest alignment of the call's pointers, bytes (1..256) */
    int64_t m, in, out;
    struct nn__cache_settings s;
};

struct lt_record {
    uint64_t algo[8]; /* cublasLtMatmulAlgo_t.data */
    uint64_t workspace;
    int32_t epilogue; /* what the algorithm runs: the key's, or DEFAULT (fallback calls after) */
};

/* One product's call: every pointer its kernel reads or writes, and whether beta is 1 (alpha and
 * beta are host scalars, so a captured call keeps their values). */
struct lt_call {
    const void *a, *b, *d, *bias, *ws;
    int accumulate;
};

/* The product captured as a graph on one call's buffers (exec NULL: none yet) and the call before
 * this one. refused: a capture failed, so the plan stays eager. */
struct lt_replay {
    cudaGraphExec_t exec;
    struct lt_call at, last;
    int refused;
};

struct lt_plan {
    cublasLtMatmulDesc_t desc;
    cublasLtMatrixLayout_t a, b, d;
    cublasLtMatmulAlgo_t algo;
    uint64_t workspace;
    int32_t epilogue;
    /* alpha and beta in the scale type of the key's dtype: 1 and 0 (1 also for an accumulating
     * beta), made once */
    union nn__cudnn_scale one, zero;
    char algo_text[64]; /* nn__lt_algo_text() of algo, for verbose lines */
    /* The bias (or BGRADB's db) pointer last set on desc (a new descriptor's is NULL): set again
     * only when a call passes another one, as a caller with fixed buffers would. */
    const void *bias_set;
    /* LT_DB: the column of m ones in the key's dtype, made on the plan's first use (pool memory
     * of ctx, given back when the cache drops the plan). A buffer the context keeps across calls:
     * its write and every product that reads it are nn__cudnn_shared_enter/leave brackets. */
    struct nn_ctx *ctx; /* the context the ones and the descriptors below were made with */
    void *ones;
    /* cuDNN's legacy calls of the plan's shape, made on the first call that runs one and kept:
     * y (forward) or g (backward), m x out; b, 1 x out; relu. A forward plan's are for what its
     * epilogue could not fuse, a backward plan's for relu's mask. */
    cudnnTensorDescriptor_t y_desc, b_desc;
    cudnnActivationDescriptor_t relu;
    struct lt_replay replay;
};

static const struct nn__field key_fields[] = {
    NN__FIELD(struct lt_key, op, NN__FIELD_I32),
    NN__FIELD(struct lt_key, dtype, NN__FIELD_I32),
    NN__FIELD(struct lt_key, epilogue, NN__FIELD_I32),
    NN__FIELD(struct lt_key, align, NN__FIELD_I32),
    NN__FIELD(struct lt_key, m, NN__FIELD_I64),
    NN__FIELD(struct lt_key, in, NN__FIELD_I64),
    NN__FIELD(struct lt_key, out, NN__FIELD_I64),
    NN__CACHE_SETTINGS_FIELDS(struct lt_key, s),
    NN__FIELD_END,
};

static const struct nn__field record_fields[] = {
    NN__FIELD(struct lt_record, algo, NN__FIELD_U64),
    NN__FIELD(struct lt_record, workspace, NN__FIELD_U64),
    NN__FIELD(struct lt_record, epilogue, NN__FIELD_I32),
    NN__FIELD_END,
};

static int epilogue_known(int32_t e)
{
    return e == CUBLASLT_EPILOGUE_DEFAULT || e == CUBLASLT_EPILOGUE_RELU ||
           e == CUBLASLT_EPILOGUE_BIAS || e == CUBLASLT_EPILOGUE_RELU_BIAS ||
           e == CUBLASLT_EPILOGUE_BGRADB;
}

static const char *key_invalid(const void *key)
{
    const struct lt_key *k = key;
    if (k->op < LT_FWD || k->op > LT_DB) return "op is not forward, dx, dw or db";
    if (k->dtype != NN_DTYPE_F32 && k->dtype != NN_DTYPE_F64 && k->dtype != NN_DTYPE_F16 &&
        k->dtype != NN_DTYPE_BF16)
        return "dtype is unknown";
    if (!epilogue_known(k->epilogue)) return "epilogue is not one nnprim asks for";
    if (k->align < 1 || k->align > 256 || (k->align & (k->align - 1))) return "align is bad";
    if (k->m < 1 || k->in < 1 || k->out < 1) return "a size is < 1";
    return nn__cache_settings_invalid(&k->s);
}

static const char *record_invalid(const void *record, uint32_t blob_len)
{
    const struct lt_record *r = record;
    (void)blob_len;
    if (!epilogue_known(r->epilogue)) return "epilogue is not one nnprim asks for";
    if (r->workspace > ((uint64_t)1 << 34)) return "workspace is above 16 GiB";
    return NULL;
}

static void plan_destroy(void *live)
{
    struct lt_plan *p = live;
    if (!p) return;
    if (p->ones) {
        /* the stream the free is ordered on waits for the last product that may read them */
        nn__cudnn_shared_release(p->ctx);
        (void)nn__dev_free(p->ctx, p->ones);
    }
    if (p->ctx) {
        nn__cudnn_tensor_desc_destroy(p->ctx, p->y_desc);
        nn__cudnn_tensor_desc_destroy(p->ctx, p->b_desc);
        nn__cudnn_relu_desc_destroy(p->ctx, p->relu);
    }
    /* a launch still in flight completes first: CUDA frees the graph after it */
    if (p->replay.exec) cudaGraphExecDestroy(p->replay.exec);
    if (p->a) cublasLtMatrixLayoutDestroy(p->a);
    if (p->b) cublasLtMatrixLayoutDestroy(p->b);
    if (p->d) cublasLtMatrixLayoutDestroy(p->d);
    if (p->desc) cublasLtMatmulDescDestroy(p->desc);
    nn__host_free(p);
}

const struct nn__cache_kind nn__linear_matmul_kind = {
    .id = NN__LINEAR_MATMUL_KIND_ID,
    .name = "linear matmul",
    .key_size = sizeof(struct lt_key),
    .key_fields = key_fields,
    .record_size = sizeof(struct lt_record),
    .record_fields = record_fields,
    .key_invalid = key_invalid,
    .record_invalid = record_invalid,
    .destroy = plan_destroy,
};

/* ---------------------------------------------------------------------------------------------
 * Building a plan
 */

static cudaDataType_t lt_type(nn_dtype t)
{
    switch (t) {
    case NN_DTYPE_F64: return CUDA_R_64F;
    case NN_DTYPE_F16: return CUDA_R_16F;
    case NN_DTYPE_BF16: return CUDA_R_16BF;
    case NN_DTYPE_F32: break;
    }
    return CUDA_R_32F;
}

/* f64 computes in f64; everything else accumulates in f32, with TF32 only when the context asks
 * for it (strict fp32 is CUBLAS_COMPUTE_32F, which never uses TF32). The bias gradient is a sum,
 * not worth TF32's rounding of g: always f32. */
static cublasComputeType_t lt_compute(const struct lt_key *k)
{
    if (k->dtype == NN_DTYPE_F64) return CUBLAS_COMPUTE_64F;
    if (k->dtype == NN_DTYPE_F32 && k->s.math_mode == NN_MATH_TF32 && k->op != LT_DB)
        return CUBLAS_COMPUTE_32F_FAST_TF32;
    return CUBLAS_COMPUTE_32F;
}

/* The column-major product of an op (file comment): stored rows, cols and leading dim of A, B
 * and D, and the transposes. */
struct lt_shape {
    uint64_t rows[3], cols[3];
    int64_t ld[3];
    cublasOperation_t ta, tb;
};

static void shape_of(const struct lt_key *k, struct lt_shape *s)
{
    uint64_t m = (uint64_t)k->m, in = (uint64_t)k->in, out = (uint64_t)k->out;
    s->ta = s->tb = CUBLAS_OP_N;
    switch ((enum lt_op)k->op) {
    case LT_FWD: /* A = w (in x out), B = x (in x m), D = y (out x m) */
        s->ta = CUBLAS_OP_T;
        s->rows[0] = in, s->cols[0] = out, s->rows[1] = in, s->cols[1] = m;
        s->rows[2] = out, s->cols[2] = m;
        break;
    case LT_DX: /* A = w (in x out), B = g (out x m), D = dx (in x m) */
        s->rows[0] = in, s->cols[0] = out, s->rows[1] = out, s->cols[1] = m;
        s->rows[2] = in, s->cols[2] = m;
        break;
    case LT_DW: /* A = x (in x m), B = g (out x m), D = dw (in x out) */
        s->tb = CUBLAS_OP_T;
        s->rows[0] = in, s->cols[0] = m, s->rows[1] = out, s->cols[1] = m;
        s->rows[2] = in, s->cols[2] = out;
        break;
    case LT_DB: /* A = g (out x m), B = ones (m x 1), D = db (out x 1) */
        s->rows[0] = out, s->cols[0] = m, s->rows[1] = m, s->cols[1] = 1;
        s->rows[2] = out, s->cols[2] = 1;
        break;
    }
    for (int i = 0; i < 3; i++)
        s->ld[i] = (int64_t)s->rows[i];
}

static nn_status set_desc(struct nn_ctx *ctx, const char *fn, cublasLtMatmulDesc_t d,
                          cublasLtMatmulDescAttributes_t a, const void *v, size_t size)
{
    return LT(ctx, fn, cublasLtMatmulDescSetAttribute(d, a, v, size));
}

void nn__lt_algo_text(const void *algo, char *buf, size_t cap)
{
    const cublasLtMatmulAlgo_t *a = algo;
    int32_t id = -1, splitk = 0;
    uint32_t tile = 0, stages = 0, reduction = 0, swizzle = 0, custom = 0;
    uint16_t cluster = 0;
    size_t n;
    cublasLtMatmulAlgoConfigGetAttribute(a, CUBLASLT_ALGO_CONFIG_ID, &id, sizeof id, &n);
    cublasLtMatmulAlgoConfigGetAttribute(a, CUBLASLT_ALGO_CONFIG_TILE_ID, &tile, sizeof tile, &n);
    cublasLtMatmulAlgoConfigGetAttribute(a, CUBLASLT_ALGO_CONFIG_STAGES_ID, &stages, sizeof stages,
                                         &n);
    cublasLtMatmulAlgoConfigGetAttribute(a, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &splitk, sizeof splitk,
                                         &n);
    cublasLtMatmulAlgoConfigGetAttribute(a, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, &reduction,
                                         sizeof reduction, &n);
    cublasLtMatmulAlgoConfigGetAttribute(a, CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING, &swizzle,
                                         sizeof swizzle, &n);
    cublasLtMatmulAlgoConfigGetAttribute(a, CUBLASLT_ALGO_CONFIG_CUSTOM_OPTION, &custom,
                                         sizeof custom, &n);
    cublasLtMatmulAlgoConfigGetAttribute(a, CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID, &cluster,
                                         sizeof cluster, &n);
    snprintf(buf, cap, "a%dt%us%uk%dr%uw%uc%ul%u", (int)id, tile, stages, (int)splitk, reduction,
             swizzle, custom, (unsigned)cluster);
}

/* Descriptors for the key, with epilogue e. */
static nn_status plan_create(struct nn_ctx *ctx, const char *fn, const struct lt_key *k, int32_t e,
                             struct lt_plan **out)
{
    struct lt_plan *p = nn__host_calloc(1, sizeof *p);
    if (!p) return NN__FAIL(ctx, NN_E_OOM_HOST, "%s: out of host memory for a matmul plan", fn);
    struct lt_shape s;
    shape_of(k, &s);
    cudaDataType_t t = lt_type((nn_dtype)k->dtype);
    cudaDataType_t scale = k->dtype == NN_DTYPE_F64 ? CUDA_R_64F : CUDA_R_32F;
    cublasLtEpilogue_t epi = (cublasLtEpilogue_t)e;
    (void)nn__cudnn_scale(&p->one, (nn_dtype)k->dtype, 1.0);
    (void)nn__cudnn_scale(&p->zero, (nn_dtype)k->dtype, 0.0);
    nn_status st = LT(ctx, fn, cublasLtMatmulDescCreate(&p->desc, lt_compute(k), scale));
    if (st == NN_OK)
        st = set_desc(ctx, fn, p->desc, CUBLASLT_MATMUL_DESC_TRANSA, &s.ta, sizeof s.ta);
    if (st == NN_OK)
        st = set_desc(ctx, fn, p->desc, CUBLASLT_MATMUL_DESC_TRANSB, &s.tb, sizeof s.tb);
    if (st == NN_OK)
        st = set_desc(ctx, fn, p->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi);
    cublasLtMatrixLayout_t *lay[3] = {&p->a, &p->b, &p->d};
    for (int i = 0; i < 3 && st == NN_OK; i++)
        st = LT(ctx, fn, cublasLtMatrixLayoutCreate(lay[i], t, s.rows[i], s.cols[i], s.ld[i]));
    p->epilogue = e;
    if (st != NN_OK) {
        plan_destroy(p);
        return st;
    }
    *out = p;
    return NN_OK;
}

static uint64_t workspace_cap(const struct lt_key *k)
{
    uint64_t cap = k->s.workspace_cap;
    return cap && cap < LT_WORKSPACE_DEFAULT ? cap : LT_WORKSPACE_DEFAULT;
}

/* cuBLASLt's heuristic for the plan's descriptors: its best algorithm, or *found = 0 when it has
 * none for this epilogue. */
static nn_status plan_heuristic(struct nn_ctx *ctx, const char *fn, cublasLtHandle_t h,
                                const struct lt_key *k, struct lt_plan *p, int *found)
{
    cublasLtMatmulPreference_t pref;
    *found = 0;
    NN__TRY(LT(ctx, fn, cublasLtMatmulPreferenceCreate(&pref)));
    uint64_t ws = workspace_cap(k);
    uint32_t align = (uint32_t)k->align;
    nn_status st = LT(ctx, fn,
                      cublasLtMatmulPreferenceSetAttribute(
                          pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws));
    static const cublasLtMatmulPreferenceAttributes_t aligns[] = {
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES};
    for (size_t i = 0; i < 4 && st == NN_OK; i++)
        st = LT(ctx, fn,
                cublasLtMatmulPreferenceSetAttribute(pref, aligns[i], &align, sizeof align));
    cublasLtMatmulHeuristicResult_t r;
    int n = 0;
    memset(&r, 0, sizeof r);
    if (st == NN_OK) {
        nn__cache_count(nn__cudnn_plan_cache(ctx), NN__PC_HEURISTIC_QUERY);
        cublasStatus_t cs =
            cublasLtMatmulAlgoGetHeuristic(h, p->desc, p->a, p->b, p->d, p->d, pref, 1, &r, &n);
        /* No algorithm for this configuration is an answer, not a failure. */
        if (cs != CUBLAS_STATUS_NOT_SUPPORTED)
            st = lt_check(ctx, fn, "cublasLtMatmulAlgoGetHeuristic", cs, __FILE__, __LINE__);
    }
    cublasLtMatmulPreferenceDestroy(pref);
    if (st == NN_OK && n > 0 && r.state == CUBLAS_STATUS_SUCCESS) {
        p->algo = r.algo;
        p->workspace = r.workspaceSize;
        nn__lt_algo_text(&p->algo, p->algo_text, sizeof p->algo_text);
        *found = 1;
    }
    return st;
}

/* A plan from a known record: its descriptors, its algorithm if cuBLASLt still accepts it. */
static int plan_rebuild(struct nn_ctx *ctx, const char *fn, cublasLtHandle_t h,
                        const struct lt_key *k, const struct lt_record *r, struct lt_plan **out)
{
    struct lt_plan *p = NULL;
    if (plan_create(ctx, fn, k, r->epilogue, &p) != NN_OK) return 0;
    memcpy(p->algo.data, r->algo, sizeof r->algo);
    cublasLtMatmulHeuristicResult_t res;
    memset(&res, 0, sizeof res);
    if (cublasLtMatmulAlgoCheck(h, p->desc, p->a, p->b, p->d, p->d, &p->algo, &res) !=
            CUBLAS_STATUS_SUCCESS ||
        res.workspaceSize > workspace_cap(k)) {
        plan_destroy(p);
        return 0;
    }
    p->workspace = res.workspaceSize;
    nn__lt_algo_text(&p->algo, p->algo_text, sizeof p->algo_text);
    *out = p;
    return 1;
}

/* The plan of the key from the cache, a known record, or the heuristic (with the key's
 * epilogue, else DEFAULT), inserted. cache says which. */
static nn_status plan_get(struct nn_ctx *ctx, const char *fn, cublasLtHandle_t h,
                          const struct lt_key *k, struct lt_plan **out, const char **cache)
{
    struct nn__cache *c = nn__cudnn_plan_cache(ctx);
    struct lt_plan *p = nn__cache_lookup(c, nn__linear_matmul_kind.id, k, NULL);
    if (p) {
        *out = p;
        *cache = "hit";
        return NN_OK;
    }
    NN__TRY(nn__capture_no_build(ctx, fn, "the cuBLASLt plan of this product's shape"));
    const struct lt_record *known = nn__cache_lookup_known(c, nn__linear_matmul_kind.id, k, NULL);
    *cache = "rebuilt";
    if (known && plan_rebuild(ctx, fn, h, k, known, &p)) {
        nn__cache_count(c, NN__PC_REBUILT);
    } else {
        if (known) nn__cache_drop_known(c, nn__linear_matmul_kind.id, k);
        *cache = "heuristic";
        int found = 0;
        int32_t tries[2] = {k->epilogue, CUBLASLT_EPILOGUE_DEFAULT};
        for (int i = 0; i < 2 && !found; i++) {
            if (i && tries[0] == CUBLASLT_EPILOGUE_DEFAULT) break;
            NN__TRY(plan_create(ctx, fn, k, tries[i], &p));
            nn_status st = plan_heuristic(ctx, fn, h, k, p, &found);
            if (st != NN_OK || !found) plan_destroy(p);
            NN__TRY(st);
        }
        if (!found)
            return NN__FAIL(ctx, NN_E_UNSUPPORTED,
                            "%s: cuBLASLt has no matmul algorithm for this problem (dtype %s, "
                            "m %lld, in %lld, out %lld, pointer alignment %d bytes)",
                            fn, nn_dtype_name((nn_dtype)k->dtype), (long long)k->m,
                            (long long)k->in, (long long)k->out, k->align);
        nn__cache_count(c, NN__PC_PLAN_BUILT);
    }
    struct lt_record rec;
    memset(&rec, 0, sizeof rec);
    memcpy(rec.algo, p->algo.data, sizeof rec.algo);
    rec.workspace = p->workspace;
    rec.epilogue = p->epilogue;
    nn_status st = nn__cache_insert(ctx, c, nn__linear_matmul_kind.id, k, &rec, NULL, 0, p);
    if (st != NN_OK) {
        plan_destroy(p);
        return st;
    }
    *out = p;
    return NN_OK;
}

/* ---------------------------------------------------------------------------------------------
 * Running products
 */

static void key_init(struct nn_ctx *ctx, const struct nn__linear_problem *p, enum lt_op op,
                     int32_t epilogue, const void *const *ptrs, int nptr, struct lt_key *k)
{
    memset(k, 0, sizeof *k);
    k->op = (int32_t)op;
    k->dtype = (int32_t)p->dtype;
    k->epilogue = epilogue;
    /* The smallest alignment of the pointers, capped at 256, is the lowest set bit of all of
     * them and 256 together (a NULL adds no bit). */
    uintptr_t bits = 256;
    for (int i = 0; i < nptr; i++)
        bits |= (uintptr_t)ptrs[i];
    k->align = (int32_t)(bits & (~bits + 1));
    k->m = p->m;
    k->in = p->in;
    k->out = p->out;
    nn__cache_settings_fill(ctx, &k->s);
}

static void note_add(struct nn__linear_note *note, const char *impl, const char *cache)
{
    size_t n = strlen(note->impl), m = strlen(note->cache);
    snprintf(note->impl + n, sizeof note->impl - n, "%s%s", n ? " " : "", impl);
    snprintf(note->cache + m, sizeof note->cache - m, "%s%s", m ? " " : "", cache);
}

static const char *epilogue_name(int32_t e)
{
    switch (e) {
    case CUBLASLT_EPILOGUE_RELU: return "relu";
    case CUBLASLT_EPILOGUE_BIAS: return "bias";
    case CUBLASLT_EPILOGUE_RELU_BIAS: return "relu_bias";
    case CUBLASLT_EPILOGUE_BGRADB: return "bgradb";
    }
    return "default";
}

/* The LT_DB plan's column of ones, made once and kept with the plan (the plan is this context's
 * alone: other contexts have their own). The host waits for nothing (the copy's source is read
 * when it returns): calls on the stream that wrote the ones are ordered after the write, and a
 * call on another stream (nn_ctx_set_stream) waits for it in nn__cudnn_shared_enter. */
static nn_status plan_ones(struct nn_ctx *ctx, const char *fn, const struct lt_key *k,
                           struct lt_plan *p)
{
    if (p->ones) return NN_OK;
    nn__cudnn_shared_enter(ctx);
    nn_status st = nn__dev_alloc_ones(ctx, fn, (nn_dtype)k->dtype, (size_t)k->m, &p->ones);
    nn__cudnn_shared_leave(ctx);
    NN__TRY(st);
    p->ctx = ctx;
    return NN_OK;
}

/* The key's plan, made ready to run: from the cache or built (plan_get), with an LT_DB plan's
 * ones. */
static nn_status product_plan(struct nn_ctx *ctx, const char *fn, const struct lt_key *k,
                              cublasLtHandle_t *h, struct lt_plan **out, const char **cache)
{
    NN__TRY(lt_handle(ctx, fn, h));
    NN__TRY(plan_get(ctx, fn, *h, k, out, cache));
    if (k->op == LT_DB) NN__TRY(plan_ones(ctx, fn, k, *out));
    return NN_OK;
}

/* ---------------------------------------------------------------------------------------------
 * cuDNN's legacy calls for what an epilogue could not fuse (and the relu mask of backward)
 */

/* What runs through cuDNN (an unfused bias or relu in forward, relu's mask in backward) takes
 * int sizes: checked by the calls and, with the same rule, by the workspace query. */
static nn_status check_int(struct nn_ctx *ctx, const char *fn, const struct nn__linear_problem *p)
{
    if (p->m > INT_MAX || p->out > INT_MAX || p->m * p->out > INT_MAX)
        return NN__FAIL(ctx, NN_E_UNSUPPORTED,
                        "%s: this step runs through cuDNN's 32-bit tensor calls, but y has "
                        "%lld x %lld elements",
                        fn, (long long)p->m, (long long)p->out);
    return NN_OK;
}

/* A packed n x c x 1 x 1 descriptor. */
static nn_status desc4(struct nn_ctx *ctx, nn_dtype t, int64_t n, int64_t c,
                       cudnnTensorDescriptor_t *out)
{
    int dims[4] = {(int)n, (int)c, 1, 1}, str[4] = {(int)c, 1, 1, 1};
    return nn__cudnn_tensor_desc(ctx, t, 4, dims, str, out);
}

/* The plan's legacy descriptors that a call needs (lt_plan): y or g always, b with bias, relu
 * with relu; those missing are made now and kept. Sizes checked by the caller (check_int). */
static nn_status plan_legacy(struct nn_ctx *ctx, const struct lt_key *k, struct lt_plan *p,
                             int bias, int relu)
{
    nn_dtype t = (nn_dtype)k->dtype;
    p->ctx = ctx;
    if (!p->y_desc) NN__TRY(desc4(ctx, t, k->m, k->out, &p->y_desc));
    if (bias && !p->b_desc) NN__TRY(desc4(ctx, t, 1, k->out, &p->b_desc));
    if (relu && !p->relu) NN__TRY(nn__cudnn_relu_desc(ctx, &p->relu));
    return NN_OK;
}

/* y += b broadcast over the rows, then relu in place, as asked, with the forward plan pl's
 * descriptors. */
static nn_status bias_relu_cudnn(struct nn_ctx *ctx, const char *fn,
                                 const struct nn__linear_problem *p, const struct lt_key *k,
                                 struct lt_plan *pl, const nn_tensor *b, nn_tensor *y, int do_bias,
                                 int do_relu, struct nn__linear_note *note)
{
    NN__TRY(check_int(ctx, fn, p));
    cudnnHandle_t h;
    NN__TRY(nn__cudnn_handle(ctx, &h));
    NN__TRY(plan_legacy(ctx, k, pl, do_bias, do_relu));
    nn_status st = NN_OK;
    if (do_bias)
        st = nn__cudnn_AddTensor(ctx, h, &pl->one, pl->b_desc, b->data, &pl->one, pl->y_desc,
                                 y->data);
    if (st == NN_OK && do_relu)
        st = nn__cudnn_ActivationForward(ctx, h, pl->relu, &pl->one, pl->y_desc, y->data, &pl->zero,
                                         pl->y_desc, y->data);
    if (nn__verbose(ctx))
        note_add(note,
                 do_bias && do_relu ? "bias+relu:cudnn-legacy"
                 : do_bias          ? "bias:cudnn-legacy"
                                    : "relu:cudnn-legacy",
                 "-");
    return st;
}

/* relu's mask in a backward call: gd = dy where y > 0, else 0 (cuDNN's relu gradient, with y
 * standing for the pre-activation: y > 0 exactly where it is), made before the call's first
 * product runs, with that product's plan's descriptors (every backward plan has g's shape,
 * m x out). Sizes checked by the caller (check_int). */
struct lt_mask {
    const nn_tensor *y, *dy;
    void *gd;
    int done;
};

static nn_status relu_mask(struct nn_ctx *ctx, const struct lt_key *k, struct lt_plan *pl,
                           struct lt_mask *mask, struct nn__linear_note *note)
{
    cudnnHandle_t h;
    NN__TRY(nn__cudnn_handle(ctx, &h));
    NN__TRY(plan_legacy(ctx, k, pl, 0, 1));
    cudnnTensorDescriptor_t d = pl->y_desc;
    NN__TRY(nn__cudnn_ActivationBackward(ctx, h, pl->relu, &pl->one, d, mask->y->data, d,
                                         mask->dy->data, d, mask->y->data, &pl->zero, d, mask->gd));
    mask->done = 1;
    if (nn__verbose(ctx)) note_add(note, "relu_bwd:cudnn-legacy", "-");
    return NN_OK;
}

/* ---------------------------------------------------------------------------------------------
 * The products
 */

/* The context's kept workspace, at least bytes (at most LT_WORKSPACE_KEEP): grown to the largest
 * a product has asked for, the smaller block given back after the last product that used it. */
static nn_status kept_workspace(struct nn_ctx *ctx, const char *fn, size_t bytes, void **out)
{
    struct nn__cudnn_state *s = ctx->cudnn;
    if (s->lt_ws_bytes < bytes) {
        void *p, *old = s->lt_ws;
        NN__TRY(nn__dev_alloc_for(ctx, fn, bytes, &p));
        s->lt_ws = p;
        s->lt_ws_bytes = bytes;
        if (old) {
            nn__cudnn_shared_release(ctx);
            NN__TRY(nn__dev_free_for(ctx, fn, old));
        }
    }
    *out = s->lt_ws;
    return NN_OK;
}

/* ---------------------------------------------------------------------------------------------
 * Running a product: eagerly, or from the graph captured on its buffers
 */

/* One cublasLtMatmul of plan p, as nn__stream_capture() takes it. */
struct lt_run {
    struct nn_ctx *ctx;
    const char *fn;
    cublasLtHandle_t h;
    struct lt_plan *p;
    const struct lt_call *c;
};

static nn_status lt_matmul(void *arg)
{
    const struct lt_run *r = arg;
    const struct lt_plan *p = r->p;
    const struct lt_call *c = r->c;
    return LT(r->ctx, r->fn,
              cublasLtMatmul(r->h, p->desc, &p->one, c->a, p->a, c->b, p->b,
                             c->accumulate ? &p->one : &p->zero, (void *)c->d, p->d, (void *)c->d,
                             p->d, &p->algo, (void *)c->ws, p->workspace,
                             (cudaStream_t)r->ctx->stream));
}

static int call_eq(const struct lt_call *x, const struct lt_call *y)
{
    return x->a == y->a && x->b == y->b && x->d == y->d && x->bias == y->bias && x->ws == y->ws &&
           x->accumulate == y->accumulate;
}

/* Capture the call into a new executable graph of the plan, replacing the one it had. */
static nn_status capture_product(struct lt_run *r, struct lt_replay *rp)
{
    cudaGraph_t g;
    if (rp->exec) cudaGraphExecDestroy(rp->exec);
    rp->exec = NULL;
    NN__TRY(nn__cudnn_capture(r->ctx, lt_matmul, r, &g));
    nn_status st = NN__CUDA(r->ctx, cudaGraphInstantiate(&rp->exec, g, 0));
    cudaGraphDestroy(g);
    if (st != NN_OK) {
        (void)cudaGetLastError();
        rp->exec = NULL;
        return st;
    }
    rp->at = *r->c;
    return NN_OK;
}

/* Run the call: from the plan's graph while its buffers are the ones the graph was captured on,
 * capturing it when they are also the last call's (a training loop on fixed buffers then issues
 * one graph launch per product, which costs the host less than cublasLtMatmul: docs/LINEAR.md);
 * otherwise eagerly. A capture that fails leaves the plan eager from then on, its failure
 * readable in the context's last error. *replayed says which ran. */
static nn_status run_product(struct lt_run *r, int *replayed)
{
    struct nn_ctx *ctx = r->ctx;
    struct lt_replay *rp = &r->p->replay;
    *replayed = 0;
    /* a whole-step capture records the eager call (include/nnprim/graph.h) */
    if (ctx->settings.linear_graphs == NN_GRAPHS_OFF || rp->refused || ctx->capture)
        return lt_matmul(r);
    int ready = rp->exec && call_eq(&rp->at, r->c);
    if (!ready && call_eq(&rp->last, r->c)) {
        rp->refused = capture_product(r, rp) != NN_OK;
        ready = !rp->refused;
    }
    rp->last = *r->c;
    if (!ready) return lt_matmul(r);
    *replayed = 1;
    return NN__CUDA(ctx, cudaGraphLaunch(rp->exec, (cudaStream_t)ctx->stream));
}

/* D = A * B (+ D when accumulate) through the key's plan; bias is the epilogue's vector (or
 * NULL); an LT_DB product takes the plan's ones for B; relu's mask (NULL: none) is made first if
 * it is not yet. The plan that ran goes to *ran (its epilogue says what ran). The workspace is
 * the algorithm's own size: the context's kept one when it is small, else from the pool (a pool
 * hit on a warm shape: no driver call). */
static nn_status matmul(struct nn_ctx *ctx, const char *fn, const char *what,
                        const struct lt_key *k, const void *a, const void *b, void *d, void *bias,
                        int accumulate, struct lt_mask *mask, struct lt_plan **ran,
                        struct nn__linear_note *note)
{
    cublasLtHandle_t h;
    struct lt_plan *p = NULL;
    const char *cache = "";
    NN__TRY(product_plan(ctx, fn, k, &h, &p, &cache));
    if (mask && !mask->done) NN__TRY(relu_mask(ctx, k, p, mask, note));
    if (k->op == LT_DB) b = p->ones;
    *ran = p;
    if (p->epilogue != CUBLASLT_EPILOGUE_DEFAULT && p->bias_set != bias) {
        NN__TRY(set_desc(ctx, fn, p->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias));
        p->bias_set = bias;
    }
    void *ws = NULL;
    /* Not inside a whole-step capture: the kept workspace is freed when it grows, and a graph
     * would go on using it; the graph's own memory serves instead. */
    int kept = p->workspace && p->workspace <= LT_WORKSPACE_KEEP && !ctx->capture;
    if (kept)
        NN__TRY(kept_workspace(ctx, fn, (size_t)p->workspace, &ws));
    else if (p->workspace)
        NN__TRY(nn__dev_alloc_for(ctx, fn, p->workspace, &ws));
    /* the plan's ones (LT_DB) and the kept workspace are kept across calls */
    int shared = kept || k->op == LT_DB, replayed;
    if (shared) nn__cudnn_shared_enter(ctx);
    struct lt_call call = {a, b, d, bias, ws, accumulate};
    struct lt_run run = {ctx, fn, h, p, &call};
    nn_status st = run_product(&run, &replayed);
    if (shared) nn__cudnn_shared_leave(ctx);
    nn_status fst = ws && !kept ? nn__dev_free_for(ctx, fn, ws) : NN_OK;
    if (nn__verbose(ctx)) {
        char impl[112];
        snprintf(impl, sizeof impl, "%s:cublaslt-%s/%s/ws%llu%s", what, epilogue_name(p->epilogue),
                 p->algo_text, (unsigned long long)p->workspace, replayed ? "/graph" : "");
        note_add(note, impl, cache);
    }
    return st != NN_OK ? st : fst;
}

/* ---------------------------------------------------------------------------------------------
 * The backend
 */

/* The rules each pass runs by, shared by the calls and by the workspace query. */

/* The forward product's epilogue: bias and relu fused where cuBLASLt runs them. */
static int32_t forward_epilogue(int relu, int has_bias)
{
    return relu ? (has_bias ? CUBLASLT_EPILOGUE_RELU_BIAS : CUBLASLT_EPILOGUE_RELU)
                : (has_bias ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT);
}

/* BGRADB writes db (it never accumulates), so the dw product fuses db only when db is wanted
 * with dw and overwritten. */
static int db_fusable(int want_db, int want_dw, unsigned accumulate)
{
    return want_db && want_dw && !(accumulate & NN_ACCUMULATE_DB);
}

/* The relu-masked gradient backward holds while its products run (0 without relu). */
static size_t masked_bytes(const struct nn__linear_problem *p)
{
    return p->activation == NN_ACTIVATION_RELU
               ? (size_t)p->m * (size_t)p->out * nn_dtype_size(p->dtype)
               : 0;
}

static nn_status forward_lt(struct nn_ctx *ctx, const struct nn__linear_problem *p,
                            const nn_tensor *x, const nn_tensor *w, const nn_tensor *b,
                            nn_tensor *y, struct nn__linear_note *note)
{
    const char *fn = "nn_linear_forward";
    int relu = p->activation == NN_ACTIVATION_RELU;
    int32_t e = forward_epilogue(relu, b != NULL);
    const void *ptrs[] = {x->data, w->data, y->data, b ? b->data : NULL};
    struct lt_key k;
    key_init(ctx, p, LT_FWD, e, ptrs, 4, &k);
    struct lt_plan *ran;
    NN__TRY(matmul(ctx, fn, "fwd", &k, w->data, x->data, y->data, b ? b->data : NULL, 0, NULL, &ran,
                   note));
    if (ran->epilogue == e) return NN_OK;
    return bias_relu_cudnn(ctx, fn, p, &k, ran, b, y, b != NULL, relu, note);
}

/* db (+)= the sum of g over the rows, as a product with a column of ones (f32 accumulation, no
 * TF32), beta 1 when db accumulates. */
static nn_status bias_grad_lt(struct nn_ctx *ctx, const char *fn,
                              const struct nn__linear_problem *p, const void *g, nn_tensor *db,
                              int accumulate, struct lt_mask *mask, struct nn__linear_note *note)
{
    const void *ptrs[] = {g, db->data};
    struct lt_key k;
    key_init(ctx, p, LT_DB, CUBLASLT_EPILOGUE_DEFAULT, ptrs, 2, &k);
    struct lt_plan *ran;
    return matmul(ctx, fn, "db", &k, g, NULL, db->data, NULL, accumulate, mask, &ran, note);
}

/* The products of g: dy, or relu's mask of it in mask->gd (mask not NULL). */
static nn_status grads_lt(struct nn_ctx *ctx, const char *fn, const struct nn__linear_problem *p,
                          const struct nn__linear_grads *g, struct lt_mask *mask,
                          struct nn__linear_note *note)
{
    const void *gd = mask ? mask->gd : g->dy->data;
    struct lt_plan *ran;
    struct lt_key k;
    if (g->dx) {
        const void *ptrs[] = {g->w->data, gd, g->dx->data};
        key_init(ctx, p, LT_DX, CUBLASLT_EPILOGUE_DEFAULT, ptrs, 3, &k);
        NN__TRY(matmul(ctx, fn, "dx", &k, g->w->data, gd, g->dx->data, NULL,
                       (g->accumulate & NN_ACCUMULATE_DX) != 0, mask, &ran, note));
    }
    int fuse_db = db_fusable(g->db != NULL, g->dw != NULL, g->accumulate);
    int db_done = 0;
    if (g->dw) {
        const void *ptrs[] = {g->x->data, gd, g->dw->data, fuse_db ? g->db->data : NULL};
        int32_t e = fuse_db ? CUBLASLT_EPILOGUE_BGRADB : CUBLASLT_EPILOGUE_DEFAULT;
        key_init(ctx, p, LT_DW, e, ptrs, 4, &k);
        NN__TRY(matmul(ctx, fn, "dw", &k, g->x->data, gd, g->dw->data, fuse_db ? g->db->data : NULL,
                       (g->accumulate & NN_ACCUMULATE_DW) != 0, mask, &ran, note));
        db_done = fuse_db && ran->epilogue == CUBLASLT_EPILOGUE_BGRADB;
    }
    if (g->db && !db_done)
        NN__TRY(bias_grad_lt(ctx, fn, p, gd, g->db, (g->accumulate & NN_ACCUMULATE_DB) != 0, mask,
                             note));
    return NN_OK;
}

static nn_status backward_lt(struct nn_ctx *ctx, const struct nn__linear_problem *p,
                             const struct nn__linear_grads *g, struct nn__linear_note *note)
{
    const char *fn = "nn_linear_backward";
    if (p->activation != NN_ACTIVATION_RELU) return grads_lt(ctx, fn, p, g, NULL, note);
    /* relu_mask's cuDNN call, checked before its buffer is taken */
    NN__TRY(check_int(ctx, fn, p));
    /* The masked gradient lives in a pool buffer for the products (freed in stream order). */
    struct lt_mask mask = {g->y, g->dy, NULL, 0};
    NN__TRY(nn__dev_alloc_for(ctx, fn, masked_bytes(p), &mask.gd));
    nn_status st = grads_lt(ctx, fn, p, g, &mask, note);
    nn_status fst = nn__dev_free_for(ctx, fn, mask.gd);
    return st != NN_OK ? st : fst;
}

/* The pool workspace of the key's plan (found or built as the call would), into *peak if larger
 * (a kept one is the context's, not the call's); *ran receives the epilogue the plan runs. */
static nn_status product_workspace(struct nn_ctx *ctx, const struct nn__linear_problem *p,
                                   enum lt_op op, int32_t epilogue, const void *const *ptrs,
                                   int nptr, size_t *peak, int32_t *ran)
{
    struct lt_key k;
    key_init(ctx, p, op, epilogue, ptrs, nptr, &k);
    cublasLtHandle_t h;
    struct lt_plan *pl;
    const char *cache;
    NN__TRY(product_plan(ctx, "nn_linear_workspace_size", &k, &h, &pl, &cache));
    if (pl->workspace > LT_WORKSPACE_KEEP && pl->workspace > *peak) *peak = (size_t)pl->workspace;
    *ran = pl->epilogue;
    return NN_OK;
}

/* The pointers the call's keys would take that the query does not know (y, dy, the outputs, the
 * relu-masked buffer) are left out: pool memory is 256-byte aligned, as they are when they come
 * from nn_tensor_empty(). */
static nn_status workspace_lt(struct nn_ctx *ctx, const struct nn__linear_problem *p, unsigned pass,
                              const nn_tensor *x, const nn_tensor *w, const nn_tensor *b,
                              size_t *bytes)
{
    const char *fn = "nn_linear_workspace_size";
    size_t peak = 0;
    int32_t ran;
    if (pass == NN_LINEAR_PASS_FORWARD) {
        int32_t e = forward_epilogue(p->activation == NN_ACTIVATION_RELU, b != NULL);
        const void *ptrs[] = {x->data, w->data, b ? b->data : NULL};
        NN__TRY(product_workspace(ctx, p, LT_FWD, e, ptrs, 3, &peak, &ran));
        /* the legacy bias / relu calls after a plain product take no pool memory, but int sizes */
        if (ran != e) NN__TRY(check_int(ctx, fn, p));
        *bytes = peak;
        return NN_OK;
    }
    /* backward_lt: relu's mask checked first, then the masked gradient is held while the
     * products run one after another, each with its workspace */
    if (p->activation == NN_ACTIVATION_RELU) NN__TRY(check_int(ctx, fn, p));
    size_t masked = masked_bytes(p);
    if (pass & NN_LINEAR_PASS_DX) {
        const void *ptrs[] = {w->data};
        NN__TRY(product_workspace(ctx, p, LT_DX, CUBLASLT_EPILOGUE_DEFAULT, ptrs, 1, &peak, &ran));
    }
    int want_db = (pass & NN_LINEAR_PASS_DB) != 0;
    int fuse_db = db_fusable(want_db, (pass & NN_LINEAR_PASS_DW) != 0, p->accumulate);
    int db_done = 0;
    if (pass & NN_LINEAR_PASS_DW) {
        const void *ptrs[] = {x->data};
        int32_t e = fuse_db ? CUBLASLT_EPILOGUE_BGRADB : CUBLASLT_EPILOGUE_DEFAULT;
        NN__TRY(product_workspace(ctx, p, LT_DW, e, ptrs, 1, &peak, &ran));
        db_done = fuse_db && ran == CUBLASLT_EPILOGUE_BGRADB;
    }
    if (want_db && !db_done)
        NN__TRY(product_workspace(ctx, p, LT_DB, CUBLASLT_EPILOGUE_DEFAULT, NULL, 0, &peak, &ran));
    *bytes = masked + peak;
    return NN_OK;
}

const struct nn__linear_backend nn__linear_backend_cublaslt = {"cublaslt", forward_lt, backward_lt,
                                                               workspace_lt};

/* The cuDNN recurrent path on the v8 calls (RNNs are not in the graph API). Per shape, one entry
 * of the context's generic cache holds the RNN, data, h and c descriptors, the dropout state, the
 * weight-space size and view offsets (asked of cuDNN once) and the temp-space sizes; its record is
 * the algorithm, so it persists in the plan file. Per call: the workspace comes from the pool and
 * goes back, the reserve space comes from the pool and lives in the pullback, and nothing
 * synchronises the host. ../shared/design/RNN.md lists the traps handled here (docs/RNN.md says
 * how). */
#include <limits.h>
#include <stddef.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "core/alloc.h"
#include "core/ctx.h"
#include "core/cuda_util.h"
#include "core/error.h"
#include "cudnn/bindings_cudnn.h"
#include "cudnn/cache.h"
#include "cudnn/cudnn_ctx.h"
#include "mem/mem.h"
#include "rnn/rnn_internal.h"

/* ---------------------------------------------------------------------------------------------
 * The cache entry: key, record, live object
 */

/* A problem as plain fields. t = n = 0 is a descriptor-only entry (weight layout queries). */
struct rnn_key {
    int32_t cell, bias_mode, input_mode, layout, dirs, dtype, clip_enabled, varied;
    int64_t t, n, input, hidden, proj, layers;
    double dropout, clip_lo, clip_hi;
    uint64_t dropout_seed;
    struct nn__cache_settings s;
};

static const struct nn__field key_fields[] = {
    NN__FIELD(struct rnn_key, cell, NN__FIELD_I32),
    NN__FIELD(struct rnn_key, bias_mode, NN__FIELD_I32),
    NN__FIELD(struct rnn_key, input_mode, NN__FIELD_I32),
    NN__FIELD(struct rnn_key, layout, NN__FIELD_I32),
    NN__FIELD(struct rnn_key, dirs, NN__FIELD_I32),
    NN__FIELD(struct rnn_key, dtype, NN__FIELD_I32),
    NN__FIELD(struct rnn_key, clip_enabled, NN__FIELD_I32),
    NN__FIELD(struct rnn_key, varied, NN__FIELD_I32),
    NN__FIELD(struct rnn_key, t, NN__FIELD_I64),
    NN__FIELD(struct rnn_key, n, NN__FIELD_I64),
    NN__FIELD(struct rnn_key, input, NN__FIELD_I64),
    NN__FIELD(struct rnn_key, hidden, NN__FIELD_I64),
    NN__FIELD(struct rnn_key, proj, NN__FIELD_I64),
    NN__FIELD(struct rnn_key, layers, NN__FIELD_I64),
    NN__FIELD(struct rnn_key, dropout, NN__FIELD_F64),
    NN__FIELD(struct rnn_key, clip_lo, NN__FIELD_F64),
    NN__FIELD(struct rnn_key, clip_hi, NN__FIELD_F64),
    NN__FIELD(struct rnn_key, dropout_seed, NN__FIELD_U64),
    NN__CACHE_SETTINGS_FIELDS(struct rnn_key, s),
    NN__FIELD_END,
};

struct rnn_record {
    int32_t algo; /* cudnnRNNAlgo_t */
    int32_t unused;
};

static const struct nn__field record_fields[] = {
    NN__FIELD(struct rnn_record, algo, NN__FIELD_I32),
    NN__FIELD(struct rnn_record, unused, NN__FIELD_I32),
    NN__FIELD_END,
};

static int fits_int(int64_t v)
{
    return v >= 0 && v <= INT_MAX;
}

static const char *key_invalid(const void *key)
{
    const struct rnn_key *k = key;
    if (k->cell < NN_RNN_RELU || k->cell > NN_RNN_GRU) return "cell";
    if (k->bias_mode < NN_RNN_BIAS_NONE || k->bias_mode > NN_RNN_BIAS_DOUBLE) return "bias_mode";
    if (k->input_mode != NN_RNN_INPUT_LINEAR && k->input_mode != NN_RNN_INPUT_SKIP)
        return "input_mode";
    if (k->layout != NN_RNN_SEQ_MAJOR && k->layout != NN_RNN_BATCH_MAJOR) return "layout";
    if (k->dirs != 1 && k->dirs != 2) return "dirs";
    if (nn_dtype_size((nn_dtype)k->dtype) == 0) return "dtype";
    if ((k->clip_enabled | k->varied) & ~1) return "clip_enabled or varied";
    if (!fits_int(k->t) || !fits_int(k->n) || k->input < 1 || k->hidden < 1 || k->proj < 0 ||
        k->proj >= k->hidden || k->layers < 1 || !fits_int(k->input) || !fits_int(k->hidden) ||
        !fits_int(k->layers))
        return "sizes";
    if (!(k->dropout >= 0 && k->dropout < 1)) return "dropout";
    return nn__cache_settings_invalid(&k->s);
}

static const char *record_invalid(const void *record, uint32_t blob_len)
{
    const struct rnn_record *r = record;
    if (blob_len) return "blob";
    if (r->algo != CUDNN_RNN_ALGO_STANDARD && r->algo != CUDNN_RNN_ALGO_PERSIST_STATIC &&
        r->algo != CUDNN_RNN_ALGO_PERSIST_DYNAMIC &&
        r->algo != CUDNN_RNN_ALGO_PERSIST_STATIC_SMALL_H)
        return "algo";
    return NULL;
}

/* The dropout state (cuDNN's RNG states, about 2 MB, initialised by a kernel) is one per context
 * and (probability, seed): an entry of its own kind, created once, and shared by every shape's
 * descriptor through cudnnRestoreDropoutDescriptor (no new initialisation), as PyTorch shares
 * its one state. The buffer is reference-counted, so a shape that uses it keeps it alive when the
 * LRU evicts the dropout entry itself (a later miss then makes a fresh state). */
struct drop_states {
    int refs; /* the dropout entry's and each shape entry's; one context, one thread */
    struct nn_ctx *ctx;
    void *ptr;
    size_t bytes;
};

static void states_unref(struct drop_states *d)
{
    if (!d || --d->refs > 0) return;
    nn__dev_free(d->ctx, d->ptr);
    nn__host_free(d);
}

struct drop_key {
    double dropout;
    uint64_t seed;
    struct nn__cache_settings s;
};

static const struct nn__field drop_key_fields[] = {
    NN__FIELD(struct drop_key, dropout, NN__FIELD_F64),
    NN__FIELD(struct drop_key, seed, NN__FIELD_U64),
    NN__CACHE_SETTINGS_FIELDS(struct drop_key, s),
    NN__FIELD_END,
};

/* Nothing to rebuild from: the state is made from the key. */
struct drop_record {
    int32_t unused[2];
};

static const struct nn__field drop_record_fields[] = {
    NN__FIELD(struct drop_record, unused, NN__FIELD_I32),
    NN__FIELD_END,
};

static const char *drop_key_invalid(const void *key)
{
    const struct drop_key *k = key;
    if (!(k->dropout > 0 && k->dropout < 1)) return "dropout";
    return nn__cache_settings_invalid(&k->s);
}

static void drop_destroy(void *live)
{
    states_unref(live);
}

const struct nn__cache_kind nn__rnn_cudnn_dropout_kind = {
    .id = NN__RNN_CUDNN_DROPOUT_KIND_ID,
    .name = "rnn dropout state",
    .key_size = sizeof(struct drop_key),
    .key_fields = drop_key_fields,
    .record_size = sizeof(struct drop_record),
    .record_fields = drop_record_fields,
    .key_invalid = drop_key_invalid,
    .destroy = drop_destroy,
};

/* The context's state for (dropout, seed), made and initialised on first use. */
static nn_status dropout_states(struct nn_ctx *ctx, cudnnHandle_t h, double dropout, uint64_t seed,
                                struct drop_states **out)
{
    struct nn__cache *c = nn__cudnn_plan_cache(ctx);
    struct drop_key k;
    memset(&k, 0, sizeof k);
    k.dropout = dropout;
    k.seed = seed;
    nn__cache_settings_fill(ctx, &k.s);
    struct drop_states *d = nn__cache_lookup(c, NN__RNN_CUDNN_DROPOUT_KIND_ID, &k, NULL);
    if (d) {
        *out = d;
        return NN_OK;
    }
    d = nn__host_calloc(1, sizeof *d);
    if (!d) return NN__FAIL(ctx, NN_E_OOM_HOST, "nn_rnn_forward: out of host memory");
    d->refs = 1;
    d->ctx = ctx;
    cudnnDropoutDescriptor_t init = NULL;
    nn_status st = nn__cudnn_DropoutGetStatesSize(ctx, h, &d->bytes);
    if (st == NN_OK) st = nn__dev_alloc(ctx, d->bytes, &d->ptr);
    if (st == NN_OK) st = nn__cudnn_CreateDropoutDescriptor(ctx, &init);
    if (st == NN_OK)
        st = nn__cudnn_SetDropoutDescriptor(ctx, init, h, (float)dropout, d->ptr, d->bytes, seed);
    if (init) cudnnDestroyDropoutDescriptor(init);
    struct drop_record rec = {{0, 0}};
    if (st == NN_OK)
        st = nn__cache_insert(ctx, c, NN__RNN_CUDNN_DROPOUT_KIND_ID, &k, &rec, NULL, 0, d);
    if (st != NN_OK) {
        states_unref(d);
        return st;
    }
    *out = d;
    return NN_OK;
}

/* What one shape needs, built once. */
struct rnn_live {
    struct nn_ctx *ctx; /* the dropout state goes back to its pool */
    cudnnRNNDescriptor_t rnn;
    cudnnDropoutDescriptor_t drop;
    struct drop_states *states; /* shared with the context's dropout entry; NULL without dropout */
    cudnnRNNDataDescriptor_t xd, yd; /* NULL in a descriptor-only entry */
    cudnnTensorDescriptor_t hd, cd;
    cudnnDataType_t dtype;
    size_t weight_bytes, work_bytes, reserve_bytes;
    int64_t *offsets; /* [L*D][5] by nn_rnn_weight_name, in elements; -1 absent */
    int32_t *lengths; /* the lengths xd and yd hold now, n of them */
    int algo;
};

static void live_destroy(void *p)
{
    struct rnn_live *e = p;
    if (!e) return;
    if (e->xd) cudnnDestroyRNNDataDescriptor(e->xd);
    if (e->yd) cudnnDestroyRNNDataDescriptor(e->yd);
    if (e->hd) cudnnDestroyTensorDescriptor(e->hd);
    if (e->cd) cudnnDestroyTensorDescriptor(e->cd);
    if (e->rnn) cudnnDestroyRNNDescriptor(e->rnn);
    if (e->drop) cudnnDestroyDropoutDescriptor(e->drop);
    states_unref(e->states);
    nn__host_free(e->offsets);
    nn__host_free(e->lengths);
    nn__host_free(e);
}

const struct nn__cache_kind nn__rnn_cudnn_kind = {
    .id = NN__RNN_CUDNN_KIND_ID,
    .name = "rnn descriptors",
    .key_size = sizeof(struct rnn_key),
    .key_fields = key_fields,
    .record_size = sizeof(struct rnn_record),
    .record_fields = record_fields,
    .key_invalid = key_invalid,
    .record_invalid = record_invalid,
    .destroy = live_destroy,
};

static void key_of(struct nn_ctx *ctx, const struct nn__rnn_problem *p, int with_data,
                   struct rnn_key *k)
{
    memset(k, 0, sizeof *k);
    k->cell = p->cell;
    k->bias_mode = p->bias_mode;
    k->input_mode = p->input_mode;
    k->dirs = p->dirs;
    k->dtype = p->dtype;
    k->input = p->input;
    k->hidden = p->hidden;
    k->proj = p->proj;
    k->layers = p->layers;
    k->clip_enabled = p->clip_enabled;
    k->clip_lo = p->clip_lo;
    k->clip_hi = p->clip_hi;
    if (with_data) {
        k->layout = p->layout;
        k->t = p->t;
        k->n = p->n;
        k->varied = p->varied;
        k->dropout = p->dropout;
        k->dropout_seed = p->dropout > 0 ? p->dropout_seed : 0;
    }
    nn__cache_settings_fill(ctx, &k->s);
}

/* ---------------------------------------------------------------------------------------------
 * Building an entry
 */

static cudnnDataType_t cudnn_dtype(nn_dtype d)
{
    switch (d) {
    case NN_DTYPE_F64: return CUDNN_DATA_DOUBLE;
    case NN_DTYPE_F16: return CUDNN_DATA_HALF;
    case NN_DTYPE_BF16: return CUDNN_DATA_BFLOAT16;
    default: return CUDNN_DATA_FLOAT;
    }
}

/* Strict fp32 is FMA math (no implicit TF32); the context's TF32 mode allows DEFAULT. 16-bit data
 * computes in f32 on tensor cores (bf16 with bf16 compute is NOT_SUPPORTED). */
static void math_of(const struct rnn_key *k, cudnnDataType_t *prec, cudnnMathType_t *math)
{
    switch ((nn_dtype)k->dtype) {
    case NN_DTYPE_F64: *prec = CUDNN_DATA_DOUBLE, *math = CUDNN_DEFAULT_MATH; return;
    case NN_DTYPE_F16:
    case NN_DTYPE_BF16: *prec = CUDNN_DATA_FLOAT, *math = CUDNN_TENSOR_OP_MATH; return;
    default:
        *prec = CUDNN_DATA_FLOAT;
        *math = k->s.math_mode == NN_MATH_TF32 ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH;
    }
}

/* The algorithm for a shape without a record. The standard algorithm runs every configuration;
 * the persistent ones fail at forward time with varied lengths and refuse projections (RNN.md
 * trap 7), and were not measured to pay off here, so they are never chosen. */
static int choose_algo(const struct rnn_key *k)
{
    (void)k;
    return CUDNN_RNN_ALGO_STANDARD;
}

static nn_status set_data_descs(struct nn_ctx *ctx, struct rnn_live *e, const struct rnn_key *k,
                                const int32_t *lengths)
{
    /* Padded positions of y and dx get this fill: zero, which every dtype spells as zero bytes. */
    static double zero_fill = 0;
    cudnnRNNDataLayout_t layout = k->layout == NN_RNN_BATCH_MAJOR
                                      ? CUDNN_RNN_DATA_LAYOUT_BATCH_MAJOR_UNPACKED
                                      : CUDNN_RNN_DATA_LAYOUT_SEQ_MAJOR_UNPACKED;
    int64_t o = k->proj ? k->proj : k->hidden;
    for (int64_t i = 0; i < k->n; i++)
        e->lengths[i] = lengths ? lengths[i] : (int32_t)k->t;
    NN__TRY(nn__cudnn_SetRNNDataDescriptor(ctx, e->xd, e->dtype, layout, (int)k->t, (int)k->n,
                                           (int)k->input, e->lengths, &zero_fill));
    return nn__cudnn_SetRNNDataDescriptor(ctx, e->yd, e->dtype, layout, (int)k->t, (int)k->n,
                                          (int)(k->dirs * o), e->lengths, &zero_fill);
}

static nn_status set_state_desc(struct nn_ctx *ctx, cudnnTensorDescriptor_t d, cudnnDataType_t dt,
                                int64_t ld, int64_t n, int64_t w)
{
    int dims[3] = {(int)ld, (int)n, (int)w}, strides[3] = {(int)(n * w), (int)w, 1};
    return nn__cudnn_SetTensorNdDescriptor(ctx, d, dt, 3, dims, strides);
}

/* Offsets of every view, from cudnnGetRNNWeightParams on a scratch weight space from the pool
 * (the call only does address arithmetic on it, but gets a real device pointer); the gates of one
 * side must sit back to back in PyTorch's order (measured on the H200, RNN.md), which is checked
 * here rather than assumed. */
static nn_status query_offsets(struct nn_ctx *ctx, cudnnHandle_t h, struct rnn_live *e,
                               const struct nn__rnn_problem *p)
{
    void *space;
    NN__TRY(nn__dev_alloc(ctx, e->weight_bytes ? e->weight_bytes : 1, &space));
    const char *base = space;
    size_t es = nn_dtype_size(p->dtype);
    cudnnTensorDescriptor_t md = NULL, bd = NULL;
    nn_status st = nn__cudnn_CreateTensorDescriptor(ctx, &md);
    if (st == NN_OK) st = nn__cudnn_CreateTensorDescriptor(ctx, &bd);
    int G = p->gates;
    for (int64_t pl = 0; st == NN_OK && pl < p->layers * p->dirs; pl++) {
        int64_t l = pl / p->dirs, *off = e->offsets + pl * 5;
        for (int k = 0; k < 5; k++)
            off[k] = -1;
        int n_lin = 2 * G + (p->proj ? 1 : 0);
        for (int lin = 0; st == NN_OK && lin < n_lin; lin++) {
            void *m = NULL, *b = NULL;
            st = nn__cudnn_GetRNNWeightParams(ctx, h, e->rnn, (int32_t)pl, e->weight_bytes, base,
                                              lin, md, &m, bd, &b);
            if (st != NN_OK) break;
            int side = lin < G ? 0 : lin < 2 * G ? 1 : 2, gate = lin % G;
            int64_t rows = side == 2 ? p->proj : p->hidden;
            int64_t cols = side == 0 ? nn__rnn_layer_input(p, l) : side == 1 ? p->out : p->hidden;
            nn_rnn_weight_name mn = side == 0   ? NN_RNN_WEIGHT_IH
                                    : side == 1 ? NN_RNN_WEIGHT_HH
                                                : NN_RNN_WEIGHT_HR;
            nn_rnn_weight_name bn = side == 0 ? NN_RNN_BIAS_IH : NN_RNN_BIAS_HH;
            int64_t mo = m ? ((const char *)m - base) / (int64_t)es : -1;
            int64_t bo = b ? ((const char *)b - base) / (int64_t)es : -1;
            if (gate == 0 || side == 2) {
                off[mn] = mo;
                if (side < 2) off[bn] = bo;
            } else if ((off[mn] >= 0) != (mo >= 0) ||
                       (mo >= 0 && mo != off[mn] + gate * rows * cols) ||
                       (off[bn] >= 0) != (bo >= 0) || (bo >= 0 && bo != off[bn] + gate * rows)) {
                st = NN__FAIL(ctx, NN_E_INTERNAL,
                              "cuDNN's weight layout is not PyTorch's: pseudo-layer %lld, linear "
                              "layer %d is not right after gate %d",
                              (long long)pl, lin, gate - 1);
            }
        }
        /* A view nnprim does not have (say a layer-0 matrix with skip input) is never handed
         * out; one that cuDNN lacks would leave a PyTorch tensor nowhere to go. */
        for (int k = 0; st == NN_OK && k < 5; k++) {
            int want = nn__rnn_view_exists(p, l, (nn_rnn_weight_name)k);
            if (!want)
                off[k] = -1;
            else if (off[k] < 0)
                st = NN__FAIL(ctx, NN_E_INTERNAL,
                              "cuDNN has no %s view (nn_rnn_weight_name %d) of pseudo-layer %lld",
                              k == NN_RNN_WEIGHT_IH   ? "weight_ih"
                              : k == NN_RNN_WEIGHT_HH ? "weight_hh"
                              : k == NN_RNN_BIAS_IH   ? "bias_ih"
                              : k == NN_RNN_BIAS_HH   ? "bias_hh"
                                                      : "weight_hr",
                              k, (long long)pl);
        }
    }
    if (md) cudnnDestroyTensorDescriptor(md);
    if (bd) cudnnDestroyTensorDescriptor(bd);
    nn__dev_free(ctx, space);
    return st;
}

static nn_status build(struct nn_ctx *ctx, const struct rnn_key *k, const struct nn__rnn_problem *p,
                       int algo, struct rnn_live **out)
{
    static const char *op = "nn_rnn (cuDNN)";
    if (!fits_int(k->t) || !fits_int(k->n) || !fits_int(k->input) || !fits_int(k->hidden) ||
        !fits_int(k->layers) || !fits_int(k->n * k->dirs * (k->proj ? k->proj : k->hidden)) ||
        !fits_int(k->input * k->n) || !fits_int(k->layers * k->dirs * k->n * k->hidden))
        return NN__FAIL(ctx, NN_E_UNSUPPORTED, "%s: a size beyond int, which cuDNN takes", op);
    cudnnHandle_t h;
    NN__TRY(nn__cudnn_handle(ctx, &h));
    struct rnn_live *e = nn__host_calloc(1, sizeof *e);
    if (!e) return NN__FAIL(ctx, NN_E_OOM_HOST, "%s: out of host memory", op);
    e->ctx = ctx;
    e->dtype = cudnn_dtype(p->dtype);
    e->algo = algo;
    e->offsets = nn__host_alloc((size_t)(p->layers * p->dirs * 5) * sizeof *e->offsets);
    e->lengths = k->n ? nn__host_alloc((size_t)k->n * sizeof *e->lengths) : NULL;
    nn_status st = NN_OK;
    if (!e->offsets || (k->n && !e->lengths))
        st = NN__FAIL(ctx, NN_E_OOM_HOST, "%s: out of host memory", op);
    if (st == NN_OK) st = nn__cudnn_CreateDropoutDescriptor(ctx, &e->drop);
    if (st == NN_OK && k->dropout > 0 && k->layers > 1) {
        st = dropout_states(ctx, h, k->dropout, k->dropout_seed, &e->states);
        if (st == NN_OK) {
            e->states->refs++;
            st = nn__cudnn_RestoreDropoutDescriptor(ctx, e->drop, h, (float)k->dropout,
                                                    e->states->ptr, e->states->bytes,
                                                    k->dropout_seed);
        }
    } else if (st == NN_OK) {
        st = nn__cudnn_SetDropoutDescriptor(ctx, e->drop, h, 0.0f, NULL, 0, 0);
    }
    if (st == NN_OK) st = nn__cudnn_CreateRNNDescriptor(ctx, &e->rnn);
    if (st == NN_OK) {
        static const cudnnRNNMode_t modes[] = {CUDNN_RNN_RELU, CUDNN_RNN_TANH, CUDNN_LSTM,
                                               CUDNN_GRU};
        static const cudnnRNNBiasMode_t biases[] = {CUDNN_RNN_NO_BIAS, CUDNN_RNN_SINGLE_INP_BIAS,
                                                    CUDNN_RNN_SINGLE_REC_BIAS,
                                                    CUDNN_RNN_DOUBLE_BIAS};
        cudnnDataType_t prec;
        cudnnMathType_t math;
        math_of(k, &prec, &math);
        st = nn__cudnn_SetRNNDescriptor_v8(
            ctx, e->rnn, (cudnnRNNAlgo_t)algo, modes[p->cell], biases[p->bias_mode],
            p->dirs == 2 ? CUDNN_BIDIRECTIONAL : CUDNN_UNIDIRECTIONAL,
            p->input_mode == NN_RNN_INPUT_SKIP ? CUDNN_SKIP_INPUT : CUDNN_LINEAR_INPUT, e->dtype,
            prec, math, (int32_t)p->input, (int32_t)p->hidden,
            (int32_t)(p->proj ? p->proj : p->hidden), (int32_t)p->layers, e->drop,
            CUDNN_RNN_PADDED_IO_ENABLED);
    }
    if (st == NN_OK && p->clip_enabled)
        st = nn__cudnn_RNNSetClip_v9(ctx, e->rnn, CUDNN_RNN_CLIP_MINMAX, p->clip_lo, p->clip_hi);
    if (st == NN_OK) st = nn__cudnn_GetRNNWeightSpaceSize(ctx, h, e->rnn, &e->weight_bytes);
    if (st == NN_OK && e->weight_bytes % nn_dtype_size(p->dtype))
        st = NN__FAIL(ctx, NN_E_INTERNAL,
                      "%s: cuDNN's weight space (%zu bytes) is not whole %s "
                      "elements",
                      op, e->weight_bytes, nn_dtype_name(p->dtype));
    if (st == NN_OK) st = query_offsets(ctx, h, e, p);
    if (st == NN_OK && k->n) {
        st = nn__cudnn_CreateRNNDataDescriptor(ctx, &e->xd);
        if (st == NN_OK) st = nn__cudnn_CreateRNNDataDescriptor(ctx, &e->yd);
        if (st == NN_OK) st = set_data_descs(ctx, e, k, NULL);
        if (st == NN_OK) st = nn__cudnn_CreateTensorDescriptor(ctx, &e->hd);
        if (st == NN_OK)
            st = set_state_desc(ctx, e->hd, e->dtype, p->layers * p->dirs, p->n, p->out);
        if (st == NN_OK) st = nn__cudnn_CreateTensorDescriptor(ctx, &e->cd);
        if (st == NN_OK)
            st = set_state_desc(ctx, e->cd, e->dtype, p->layers * p->dirs, p->n, p->hidden);
        /* Sizes for full-length sequences bound those of any lengths of the same shape. */
        if (st == NN_OK)
            st = nn__cudnn_GetRNNTempSpaceSizes(ctx, h, e->rnn, CUDNN_FWD_MODE_TRAINING, e->xd,
                                                &e->work_bytes, &e->reserve_bytes);
    }
    if (st != NN_OK) {
        live_destroy(e);
        return st;
    }
    *out = e;
    return NN_OK;
}

static void note(const struct rnn_live *e)
{
    switch (e->algo) {
    case CUDNN_RNN_ALGO_PERSIST_STATIC: nn__rnn_note_impl = "cudnn-persist-static"; break;
    case CUDNN_RNN_ALGO_PERSIST_DYNAMIC: nn__rnn_note_impl = "cudnn-persist-dynamic"; break;
    case CUDNN_RNN_ALGO_PERSIST_STATIC_SMALL_H: nn__rnn_note_impl = "cudnn-persist-small-h"; break;
    default: nn__rnn_note_impl = "cudnn-standard";
    }
}

/* The shape's entry, built on a miss (from a known record's algorithm when the plan file has
 * one). with_data 0: a descriptor-only entry for weight queries. */
static nn_status entry_get(struct nn_ctx *ctx, const struct nn__rnn_problem *p, int with_data,
                           struct rnn_live **out)
{
    struct nn__cache *c = nn__cudnn_plan_cache(ctx);
    struct rnn_key k;
    key_of(ctx, p, with_data, &k);
    struct rnn_live *e = nn__cache_lookup(c, NN__RNN_CUDNN_KIND_ID, &k, NULL);
    if (e) {
        note(e);
        *out = e;
        return NN_OK;
    }
    const struct rnn_record *known = nn__cache_lookup_known(c, NN__RNN_CUDNN_KIND_ID, &k, NULL);
    struct rnn_record rec = {choose_algo(&k), 0};
    nn_status st;
    if (known && (known->algo == CUDNN_RNN_ALGO_STANDARD || !k.varied)) {
        rec = *known;
        st = build(ctx, &k, p, rec.algo, &e);
        if (st == NN_OK) {
            nn__cache_count(c, NN__PC_REBUILT);
        } else {
            nn__cache_drop_known(c, NN__RNN_CUDNN_KIND_ID, &k);
            rec.algo = choose_algo(&k);
            st = build(ctx, &k, p, rec.algo, &e);
        }
    } else {
        st = build(ctx, &k, p, rec.algo, &e);
    }
    NN__TRY(st);
    st = nn__cache_insert(ctx, c, NN__RNN_CUDNN_KIND_ID, &k, &rec, NULL, 0, e);
    if (st != NN_OK) {
        live_destroy(e);
        return st;
    }
    note(e);
    *out = e;
    return NN_OK;
}

/* ---------------------------------------------------------------------------------------------
 * Backend entry points
 */

nn_status nn__rnn_weights_size_cudnn(struct nn_ctx *ctx, const struct nn__rnn_problem *p,
                                     int64_t *numel)
{
    /* Inside a call (n > 0) the call's own entry answers, so a call builds one entry. */
    struct rnn_live *e;
    NN__TRY(entry_get(ctx, p, p->n > 0, &e));
    *numel = (int64_t)(e->weight_bytes / nn_dtype_size(p->dtype));
    return NN_OK;
}

nn_status nn__rnn_weight_offset_cudnn(struct nn_ctx *ctx, const struct nn__rnn_problem *p,
                                      int64_t pseudo, nn_rnn_weight_name name, int64_t *offset)
{
    struct rnn_live *e;
    NN__TRY(entry_get(ctx, p, 0, &e));
    *offset = e->offsets[pseudo * 5 + name];
    return NN_OK;
}

/* Data descriptors hold this call's lengths (set again only when they changed). */
static nn_status bind_lengths(struct nn_ctx *ctx, const struct nn__rnn_problem *p,
                              struct rnn_live *e, const int32_t *lengths)
{
    int same = 1;
    for (int64_t i = 0; same && i < p->n; i++)
        same = e->lengths[i] == (lengths ? lengths[i] : (int32_t)p->t);
    if (same) return NN_OK;
    struct rnn_key k;
    key_of(ctx, p, 1, &k);
    return set_data_descs(ctx, e, &k, lengths);
}

/* cuDNN writes its fill value (zero) to hy, cy, dhx and dcx of a zero-length sequence (RNN.md trap
 * 4); the reference's semantics pass the state through: dst[:, n, :] = src[:, n, :] (zero for a
 * NULL src, which the fill already is). */
static nn_status pass_through(struct nn_ctx *ctx, const struct nn__rnn_problem *p,
                              const struct rnn_live *e, nn_tensor *dst, const nn_tensor *src,
                              int64_t width)
{
    if (!dst || !src) return NN_OK;
    size_t es = nn_dtype_size(p->dtype), row = (size_t)width * es, pitch = (size_t)p->n * row;
    for (int64_t n = 0; n < p->n; n++) {
        if (e->lengths[n] != 0) continue;
        NN__TRY(
            NN__CUDA(ctx, cudaMemcpy2DAsync((char *)dst->data + (size_t)n * row, pitch,
                                            (const char *)src->data + (size_t)n * row, pitch, row,
                                            (size_t)(p->layers * p->dirs), cudaMemcpyDeviceToDevice,
                                            (cudaStream_t)ctx->stream)));
    }
    return NN_OK;
}

static const void *data_of(const nn_tensor *t)
{
    return t ? t->data : NULL;
}

/* The pullback's state: the reserve space, which must live from forward to backward unchanged. */
struct reserve {
    void *ptr;
    size_t bytes;
};

nn_status nn__rnn_forward_cudnn(struct nn_ctx *ctx, const struct nn__rnn_problem *p,
                                const struct nn__rnn_io *io, void **state)
{
    struct rnn_live *e;
    cudnnHandle_t h;
    NN__TRY(nn__cudnn_handle(ctx, &h));
    NN__TRY(entry_get(ctx, p, 1, &e));
    NN__TRY(bind_lengths(ctx, p, e, io->lengths));
    struct reserve *rs = NULL;
    if (state) {
        rs = nn__host_calloc(1, sizeof *rs);
        if (!rs) return NN__FAIL(ctx, NN_E_OOM_HOST, "nn_rnn_forward: out of host memory");
        rs->bytes = e->reserve_bytes;
        nn_status st = rs->bytes ? nn__dev_alloc(ctx, rs->bytes, &rs->ptr) : NN_OK;
        if (st != NN_OK) {
            nn__host_free(rs);
            return st;
        }
    }
    void *ws = NULL;
    nn_status st = e->work_bytes ? nn__dev_alloc(ctx, e->work_bytes, &ws) : NN_OK;
    if (st == NN_OK)
        st = nn__cudnn_RNNForward(
            ctx, h, e->rnn, state ? CUDNN_FWD_MODE_TRAINING : CUDNN_FWD_MODE_INFERENCE, NULL, e->xd,
            io->x->data, e->yd, io->y_out->data, e->hd, data_of(io->hx),
            io->hy ? io->hy->data : NULL, e->cd, data_of(io->cx), io->cy ? io->cy->data : NULL,
            e->weight_bytes, io->w->data, e->work_bytes, ws, rs ? rs->bytes : 0,
            rs ? rs->ptr : NULL);
    if (ws) nn__dev_free(ctx, ws);
    if (st == NN_OK && io->lengths) st = pass_through(ctx, p, e, io->hy, io->hx, p->out);
    if (st == NN_OK && io->lengths) st = pass_through(ctx, p, e, io->cy, io->cx, p->hidden);
    if (st != NN_OK) {
        nn__rnn_state_free_cudnn(ctx, rs);
        return st;
    }
    if (state) *state = rs;
    return NN_OK;
}

void nn__rnn_state_free_cudnn(struct nn_ctx *ctx, void *state)
{
    struct reserve *rs = state;
    if (!rs) return;
    if (rs->ptr) nn__dev_free(ctx, rs->ptr);
    nn__host_free(rs);
}

/* A zeroed scratch tensor's worth of bytes from the pool, for a gradient cuDNN requires. */
static nn_status zeros(struct nn_ctx *ctx, size_t bytes, void **out)
{
    NN__TRY(nn__dev_alloc(ctx, bytes, out));
    nn_status st = NN__CUDA(ctx, cudaMemsetAsync(*out, 0, bytes, (cudaStream_t)ctx->stream));
    if (st != NN_OK) {
        nn__dev_free(ctx, *out);
        *out = NULL;
    }
    return st;
}

nn_status nn__rnn_backward_cudnn(struct nn_ctx *ctx, const struct nn__rnn_problem *p, void *state,
                                 const struct nn__rnn_io *io)
{
    struct reserve *rs = state;
    if (!io->dx && !io->dhx && !io->dcx && !io->dw) return NN_OK;
    struct rnn_live *e;
    cudnnHandle_t h;
    NN__TRY(nn__cudnn_handle(ctx, &h));
    NN__TRY(entry_get(ctx, p, 1, &e));
    NN__TRY(bind_lengths(ctx, p, e, io->lengths));
    size_t es = nn_dtype_size(p->dtype);
    size_t ybytes = (size_t)(p->t * p->n * p->dirs * p->out) * es;
    size_t xbytes = (size_t)(p->t * p->n * p->input) * es;
    void *ws = NULL, *dy0 = NULL, *dx0 = NULL;
    nn_status st = e->work_bytes ? nn__dev_alloc(ctx, e->work_bytes, &ws) : NN_OK;
    if (st == NN_OK && !io->dy) st = zeros(ctx, ybytes, &dy0);
    if (st == NN_OK && !io->dx) st = nn__dev_alloc(ctx, xbytes, &dx0);
    /* Data first, always: the weights pass reads what the data pass leaves in the reserve (RNN.md
     * traps 1 and 2). */
    if (st == NN_OK)
        st = nn__cudnn_RNNBackwardData_v8(
            ctx, h, e->rnn, NULL, e->yd, io->y->data, io->dy ? io->dy->data : dy0, e->xd,
            io->dx ? io->dx->data : dx0, e->hd, data_of(io->hx), data_of(io->dhy),
            io->dhx ? io->dhx->data : NULL, e->cd, data_of(io->cx), data_of(io->dcy),
            io->dcx ? io->dcx->data : NULL, e->weight_bytes, io->w->data, e->work_bytes, ws,
            rs->bytes, rs->ptr);
    /* cuDNN only adds into dw (WGRAD_MODE_SET is NOT_SUPPORTED, trap 5): overwrite = zero first. */
    if (st == NN_OK && io->dw && !io->accumulate)
        st = NN__CUDA(ctx,
                      cudaMemsetAsync(io->dw->data, 0, e->weight_bytes, (cudaStream_t)ctx->stream));
    if (st == NN_OK && io->dw)
        st = nn__cudnn_RNNBackwardWeights_v8(ctx, h, e->rnn, CUDNN_WGRAD_MODE_ADD, NULL, e->xd,
                                             io->x->data, e->hd, data_of(io->hx), e->yd,
                                             io->y->data, e->weight_bytes, io->dw->data,
                                             e->work_bytes, ws, rs->bytes, rs->ptr);
    if (ws) nn__dev_free(ctx, ws);
    if (dy0) nn__dev_free(ctx, dy0);
    if (dx0) nn__dev_free(ctx, dx0);
    if (st == NN_OK && io->lengths) st = pass_through(ctx, p, e, io->dhx, io->dhy, p->out);
    if (st == NN_OK && io->lengths) st = pass_through(ctx, p, e, io->dcx, io->dcy, p->hidden);
    return st;
}

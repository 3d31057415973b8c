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

#include "core/cuda_load.h"

#include "core/alloc.h"
#include "core/capture.h"
#include "core/ctx.h"
#include "core/cuda_util.h"
#include "core/dev_copy.h"
#include "core/error.h"
#include "core/log.h"
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
    int32_t algo;  /* cudnnRNNAlgo_t */
    int32_t flags; /* NN__RNN_REC_*; files written before these bits existed hold 0 */
};

static const struct nn__field record_fields[] = {
    NN__FIELD(struct rnn_record, algo, NN__FIELD_I32),
    NN__FIELD(struct rnn_record, flags, NN__FIELD_I32),
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
    if (r->flags & ~NN__RNN_REC_ALL) return "flags";
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
    nn__cudnn_shared_release(d->ctx);
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
    /* per-process random state: a file's record of it would rebuild nothing */
    .flags = NN__CACHE_KIND_NOT_PERSISTED,
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
    NN__TRY(nn__capture_no_build(ctx, "nn_rnn_forward", "the dropout state of this seed"));
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

/* ---------------------------------------------------------------------------------------------
 * Replay state of a shape (docs/RNN.md, "Graph replay"). The graphs read and write nnprim-owned
 * staging buffers at fixed addresses; the caller's tensors enter and leave through two copy
 * nodes (src/core/dev_copy.h) that nnprim adds around the captured cuDNN calls, so a call with
 * other pointers only changes those nodes' parameters and never captures again.
 */

#define RNN_SLOTS  4  /* training graph pairs of a shape, one per pullback alive at once */
#define RNN_COPIES 12 /* caller-side copies of one graph, at most */
_Static_assert(RNN_COPIES <= NN__COPIES_MAX, "one copy node takes every copy of a side");

/* A reserve space. An eager forward's belongs to its pullback alone (owner NULL); a slot's is
 * shared by the slot (one reference) and the pullback of the replayed forward that wrote it (a
 * second one: the slot is busy until that pullback is consumed or freed). owner is cleared when
 * the shape's entry goes, so a pullback that outlives it runs its backward eagerly. */
struct reserve {
    int refs;
    struct nn_ctx *ctx;
    void *ptr;
    size_t bytes;
    struct rnn_live *owner;
    int slot;
};

static void reserve_unref(struct reserve *rs)
{
    if (!rs || --rs->refs > 0) return;
    if (rs->ptr) nn__dev_free(rs->ctx, rs->ptr);
    nn__host_free(rs);
}

/* A graph's signature: which optional tensors its call had (the record keeps it, record_sig). */
enum { FS_HX = 1, FS_CX = 2, FS_HY = 4, FS_CY = 8, FS_ALL = 15 }; /* a forward's */
enum {                                                            /* a backward's */
       BS_HX = 1,
       BS_CX = 2,
       BS_DY = 4,
       BS_DHY = 8,
       BS_DCY = 16,
       BS_DX = 32,
       BS_DHX = 64,
       BS_DCX = 128,
       BS_DW = 256,
       BS_ACCUMULATE = 512,
       BS_ALL = 1023
};

/* One caller-side copy of a graph: staging <- caller (in) or caller <- staging (out). */
struct copy {
    void *stage;
    const void *user; /* the pointer the node holds now */
    size_t bytes;
    int out;
};

/* The caller's pointers of one call, in the order of its copies. */
struct tuple {
    unsigned sig;
    int n;
    const void *user[RNN_COPIES];
};

struct exec {
    cudaGraph_t body;  /* the captured cuDNN calls, kept to assemble the graph again */
    cudaGraph_t graph; /* body as a child node between the copies; the copy nodes are its own */
    cudaGraphExec_t exec;
    cudaGraphNode_t in, out; /* the copies before and after body (NULL: none that side) */
    unsigned sig;            /* which optional tensors the captured call had */
    int ncopy;
    struct copy copy[RNN_COPIES];
    /* The same call captured on the caller's own pointers once two calls in a row passed the
     * same ones: no copies. Used while the pointers stay those; the staging graph serves others. */
    cudaGraphExec_t direct;
    struct tuple direct_at, last;
};

struct slot {
    struct reserve *rs;
    struct exec fwd, bwd;
};

enum { U_INFER, U_TRAIN };                         /* decision units */
enum { P_EAGER_TRIAL, P_REPLAY_TRIAL, P_DECIDED }; /* auto's phases */
enum { W_INFER, W_TRAIN, W_BWD };                  /* variants that ran eagerly once */

/* auto mode: the cost of a few eager calls, then of a few replayed ones, each phase timed as one
 * window of the caller's calls as it issues them (the host waits once, at the window's end). The
 * first call of each phase is a warm-up (cuDNN's first call, the capture); a call that warms up
 * or captures restarts the window. */
struct trial {
    int phase, replay, calls;
    int skip[2], n[2]; /* [0] forwards, [1] backwards: warm-ups left, calls in the window */
    int open;          /* a window started at a call's start: host clock t0, event ev[0] */
    uint64_t t0;
    cudaEvent_t ev[2];
    double eager_ns, replay_ns;
};

struct stage {
    void *base;
    size_t bytes;
    void *x, *hx, *cx, *w, *y, *hy, *cy, *dy, *dhy, *dcy, *dx, *dhx, *dcx, *dw, *ws;
};

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
    size_t xbytes, ybytes, hbytes, cbytes; /* of one call's x, y, hx and cx */
    int64_t *offsets; /* [L*D][5] by nn_rnn_weight_name, in elements; -1 absent */
    int32_t *lengths; /* the lengths xd and yd hold now, n of them */
    int algo;
    /* replay */
    const char *no_replay; /* why this shape never replays (static text), or NULL */
    struct stage st;
    struct exec infer;
    struct slot slots[RNN_SLOTS];
    int nslots;
    struct trial trial[2];
    int warm[3];
    int captured; /* this call captured (auto leaves such a call out of its measurement) */
    int prepared; /* made ready by a plan file's load, not yet called (the verbose line says so) */
};

static void exec_clear(struct exec *ex)
{
    if (ex->direct) cudaGraphExecDestroy(ex->direct);
    if (ex->exec) cudaGraphExecDestroy(ex->exec);
    if (ex->graph) cudaGraphDestroy(ex->graph);
    if (ex->body) cudaGraphDestroy(ex->body);
    memset(ex, 0, sizeof *ex);
}

/* Every graph of the shape (the slots' reserves stay). */
static void drop_graphs(struct rnn_live *e, int unit)
{
    if (unit == U_INFER) exec_clear(&e->infer);
    for (int i = 0; unit == U_TRAIN && i < e->nslots; i++) {
        exec_clear(&e->slots[i].fwd);
        exec_clear(&e->slots[i].bwd);
    }
}

static void live_destroy(void *p)
{
    struct rnn_live *e = p;
    if (!e) return;
    /* The slots and staging may be freed on another stream than their last use. */
    nn__cudnn_shared_release(e->ctx);
    drop_graphs(e, U_INFER);
    drop_graphs(e, U_TRAIN);
    for (int i = 0; i < e->nslots; i++) {
        e->slots[i].rs->owner = NULL;
        reserve_unref(e->slots[i].rs);
    }
    if (e->st.base) nn__dev_free(e->ctx, e->st.base);
    for (int u = 0; u < 2; u++)
        for (int i = 0; i < 2; i++)
            if (e->trial[u].ev[i]) cudaEventDestroy(e->trial[u].ev[i]);
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

static void prepare_loaded(struct nn_ctx *ctx);

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
    .loaded = prepare_loaded,
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
    int64_t o = nn__rnn_out_size(k->hidden, k->proj);
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

/* The unit's starting phase: from the record's decision when it has one (no timing), else auto's
 * trials; fixed by the setting when it is not auto. Runs on an entry that has not replayed yet
 * (build's, or tune's pick). */
static void trial_init(struct nn_ctx *ctx, struct rnn_live *e, int unit, int32_t flags)
{
    struct trial *t = &e->trial[unit];
    cudaEvent_t ev[2] = {t->ev[0], t->ev[1]};
    memset(t, 0, sizeof *t);
    t->ev[0] = ev[0], t->ev[1] = ev[1];
    t->skip[0] = t->skip[1] = 1;
    int eager = unit == U_INFER ? NN__RNN_REC_INFER_EAGER : NN__RNN_REC_TRAIN_EAGER;
    int replay = unit == U_INFER ? NN__RNN_REC_INFER_REPLAY : NN__RNN_REC_TRAIN_REPLAY;
    switch (ctx->settings.rnn_graphs) {
    case NN_GRAPHS_OFF: t->phase = P_DECIDED; return;
    case NN_GRAPHS_ON: t->phase = P_DECIDED, t->replay = 1; return;
    default:
        if (flags & (eager | replay)) t->phase = P_DECIDED, t->replay = !!(flags & replay);
    }
}

static nn_status build(struct nn_ctx *ctx, const struct rnn_key *k, const struct nn__rnn_problem *p,
                       const struct rnn_record *rec, struct rnn_live **out)
{
    int algo = rec->algo;
    static const char *op = "nn_rnn (cuDNN)";
    int64_t v;
    const char *beyond = nn__rnn_beyond_int(p, &v);
    if (beyond)
        return NN__FAIL(ctx, NN_E_UNSUPPORTED, "%s: %s = %lld is beyond int, which cuDNN takes", op,
                        beyond, (long long)v);
    cudnnHandle_t h;
    NN__TRY(nn__cudnn_handle(ctx, &h));
    struct rnn_live *e = nn__host_calloc(1, sizeof *e);
    if (!e) return NN__FAIL(ctx, NN_E_OOM_HOST, "%s: out of host memory", op);
    e->ctx = ctx;
    e->dtype = cudnn_dtype(p->dtype);
    e->algo = algo;
    /* replay moves the caller's tensors through staging with the device copy kernel */
    if (ctx->settings.rnn_graphs != NN_GRAPHS_OFF) e->no_replay = nn__copies_unavailable();
    if (e->no_replay && nn__verbose(ctx))
        nn__log("nn_rnn: this shape never replays: %s", e->no_replay);
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
            prec, math, (int32_t)p->input, (int32_t)p->hidden, (int32_t)p->out, (int32_t)p->layers,
            e->drop, CUDNN_RNN_PADDED_IO_ENABLED);
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
        /* The dynamic persistent kernels are compiled for the batch size. */
        if (st == NN_OK && algo == CUDNN_RNN_ALGO_PERSIST_DYNAMIC) {
            cudnnStatus_t cs = cudnnBuildRNNDynamic(h, e->rnn, (int)k->n);
            if (cs != CUDNN_STATUS_SUCCESS)
                st = nn__cudnn_fail(ctx, cs, "cudnnBuildRNNDynamic", __FILE__, __LINE__);
        }
        /* Sizes for full-length sequences bound those of any lengths of the same shape. */
        if (st == NN_OK)
            st = nn__cudnn_GetRNNTempSpaceSizes(ctx, h, e->rnn, CUDNN_FWD_MODE_TRAINING, e->xd,
                                                &e->work_bytes, &e->reserve_bytes);
        size_t es = nn_dtype_size(p->dtype);
        e->xbytes = (size_t)(p->t * p->n * p->input) * es;
        e->ybytes = (size_t)(p->t * p->n * p->dirs * p->out) * es;
        e->hbytes = (size_t)(p->layers * p->dirs * p->n * p->out) * es;
        e->cbytes =
            p->cell == NN_RNN_LSTM ? (size_t)(p->layers * p->dirs * p->n * p->hidden) * es : 0;
        trial_init(ctx, e, U_INFER, rec->flags);
        trial_init(ctx, e, U_TRAIN, rec->flags);
        /* cuDNN's dropout draws from its random state; whether a replay advances it exactly as
         * the eager calls do was not measured, so training with dropout stays eager. */
        if (p->dropout > 0 && p->layers > 1)
            e->trial[U_TRAIN].phase = P_DECIDED, e->trial[U_TRAIN].replay = 0;
    }
    if (st != NN_OK) {
        live_destroy(e);
        return st;
    }
    *out = e;
    return NN_OK;
}

static void note(const struct rnn_live *e, int replayed)
{
    static const char *const names[4][2] = {
        {"cudnn-standard", "cudnn-standard-replay"},
        {"cudnn-persist-static", "cudnn-persist-static-replay"},
        {"cudnn-persist-dynamic", "cudnn-persist-dynamic-replay"},
        {"cudnn-persist-small-h", "cudnn-persist-small-h-replay"}};
    int i = e->algo == CUDNN_RNN_ALGO_PERSIST_STATIC           ? 1
            : e->algo == CUDNN_RNN_ALGO_PERSIST_DYNAMIC        ? 2
            : e->algo == CUDNN_RNN_ALGO_PERSIST_STATIC_SMALL_H ? 3
                                                               : 0;
    nn__rnn_note_impl = names[i][!!replayed];
}

/* ---------------------------------------------------------------------------------------------
 * The launches of one call, on raw pointers: the eager path passes the caller's tensors, a
 * capture the staging buffers.
 */

/* cuDNN writes its fill value (zero) to hy, cy, dhx and dcx of a zero-length sequence (RNN.md trap
 * 4); the reference's semantics pass the state through: dst[:, n, :] = src[:, n, :] (zero for a
 * NULL src, which the fill already is). */
static nn_status pass_through(struct nn_ctx *ctx, const struct nn__rnn_problem *p,
                              const struct rnn_live *e, void *dst, const void *src, int64_t width)
{
    if (!dst || !src) return NN_OK;
    size_t es = nn_dtype_size(p->dtype), row = (size_t)width * es, pitch = (size_t)p->n * row;
    for (int64_t n = 0; n < p->n; n++) {
        if (e->lengths[n] != 0) continue;
        NN__TRY(
            NN__CUDA(ctx, cudaMemcpy2DAsync((char *)dst + (size_t)n * row, pitch,
                                            (const char *)src + (size_t)n * row, pitch, row,
                                            (size_t)(p->layers * p->dirs), cudaMemcpyDeviceToDevice,
                                            (cudaStream_t)ctx->stream)));
    }
    return NN_OK;
}

struct fwd_io {
    const void *x, *hx, *cx, *w;
    void *y, *hy, *cy, *ws, *reserve; /* reserve NULL: inference */
    size_t reserve_bytes;
};

static nn_status fwd_launch(struct nn_ctx *ctx, cudnnHandle_t h, const struct nn__rnn_problem *p,
                            const struct rnn_live *e, const void *arg)
{
    const struct fwd_io *a = arg;
    NN__TRY(nn__cudnn_RNNForward(
        ctx, h, e->rnn, a->reserve ? CUDNN_FWD_MODE_TRAINING : CUDNN_FWD_MODE_INFERENCE, NULL,
        e->xd, a->x, e->yd, a->y, e->hd, a->hx, a->hy, e->cd, a->cx, a->cy, e->weight_bytes, a->w,
        e->work_bytes, a->ws, a->reserve_bytes, a->reserve));
    NN__TRY(pass_through(ctx, p, e, a->hy, a->hx, p->out));
    return pass_through(ctx, p, e, a->cy, a->cx, p->hidden);
}

struct bwd_io {
    const void *x, *hx, *cx, *w, *y, *dhy, *dcy;
    void *dy, *dx, *dhx, *dcx, *dw, *ws, *reserve;
    size_t reserve_bytes;
    int zero_dy; /* dy is a scratch buffer to clear (the caller passed none) */
    int weights; /* run backward-weights into dw */
    int zero_dw; /* overwrite: clear dw first */
};

static nn_status bwd_launch(struct nn_ctx *ctx, cudnnHandle_t h, const struct nn__rnn_problem *p,
                            const struct rnn_live *e, const void *arg)
{
    const struct bwd_io *a = arg;
    cudaStream_t s = (cudaStream_t)ctx->stream;
    if (a->zero_dy) NN__TRY(NN__CUDA(ctx, cudaMemsetAsync(a->dy, 0, e->ybytes, s)));
    /* Data first, always: the weights pass reads what the data pass leaves in the reserve (RNN.md
     * traps 1 and 2). */
    NN__TRY(nn__cudnn_RNNBackwardData_v8(ctx, h, e->rnn, NULL, e->yd, a->y, a->dy, e->xd, a->dx,
                                         e->hd, a->hx, a->dhy, a->dhx, e->cd, a->cx, a->dcy, a->dcx,
                                         e->weight_bytes, a->w, e->work_bytes, a->ws,
                                         a->reserve_bytes, a->reserve));
    /* cuDNN only adds into dw (WGRAD_MODE_SET is NOT_SUPPORTED, trap 5): overwrite = zero first. */
    if (a->weights && a->zero_dw)
        NN__TRY(NN__CUDA(ctx, cudaMemsetAsync(a->dw, 0, e->weight_bytes, s)));
    if (a->weights)
        NN__TRY(nn__cudnn_RNNBackwardWeights_v8(
            ctx, h, e->rnn, CUDNN_WGRAD_MODE_ADD, NULL, e->xd, a->x, e->hd, a->hx, e->yd, a->y,
            e->weight_bytes, a->dw, e->work_bytes, a->ws, a->reserve_bytes, a->reserve));
    NN__TRY(pass_through(ctx, p, e, a->dhx, a->dhy, p->out));
    return pass_through(ctx, p, e, a->dcx, a->dcy, p->hidden);
}

static const void *data_of(const nn_tensor *t)
{
    return t ? t->data : NULL;
}

static void *out_of(nn_tensor *t)
{
    return t ? t->data : NULL;
}

/* A forward's launch arguments on the caller's tensors of io (rs NULL: inference). */
static struct fwd_io fwd_io_of(const struct nn__rnn_io *io, void *ws, const struct reserve *rs)
{
    return (struct fwd_io){io->x->data,         data_of(io->hx),   data_of(io->cx), io->w->data,
                           io->y_out->data,     out_of(io->hy),    out_of(io->cy),  ws,
                           rs ? rs->ptr : NULL, rs ? rs->bytes : 0};
}

/* A backward's launch arguments on the caller's tensors of io; dy0 and dx0 stand in for a dy or
 * dx the caller did not pass (cuDNN needs the buffers). */
static struct bwd_io bwd_io_of(const struct nn__rnn_io *io, void *ws, const struct reserve *rs,
                               void *dy0, void *dx0)
{
    return (struct bwd_io){io->x->data,
                           data_of(io->hx),
                           data_of(io->cx),
                           io->w->data,
                           io->y->data,
                           data_of(io->dhy),
                           data_of(io->dcy),
                           io->dy ? io->dy->data : dy0,
                           io->dx ? io->dx->data : dx0,
                           out_of(io->dhx),
                           out_of(io->dcx),
                           out_of(io->dw),
                           ws,
                           rs->ptr,
                           rs->bytes,
                           !io->dy,
                           io->dw != NULL,
                           !io->accumulate};
}

/* ---------------------------------------------------------------------------------------------
 * Algorithm choice under NNPRIM_TUNING=autotune
 */

/* The launches of one call on raw pointers (fwd_launch, bwd_launch), as captured. */
typedef nn_status (*launch_fn)(struct nn_ctx *ctx, cudnnHandle_t h, const struct nn__rnn_problem *p,
                               const struct rnn_live *e, const void *arg);
static nn_status capture(struct nn_ctx *ctx, cudnnHandle_t h, const struct nn__rnn_problem *p,
                         struct rnn_live *e, launch_fn fn, const void *arg, cudaGraph_t *out);

/* Whether e's calls can replay now: the shape may (no_replay: no copy kernel in this build or
 * driver, or a replay that failed), the context's stream can be captured, and no whole-step
 * capture is open (it records the eager calls, include/nnprim/graph.h). */
static int can_replay(const struct nn_ctx *ctx, const struct rnn_live *e)
{
    return !e->no_replay && ctx->stream_capturable && !ctx->capture;
}

/* Milliseconds per training step of REPS steps back to back, between events ev (the host waits
 * for them): eager launches, or the launches of the two graphs when gx is not NULL. */
enum { TUNE_REPS = 3 };
static nn_status time_reps(struct nn_ctx *ctx, cudnnHandle_t h, const struct nn__rnn_problem *p,
                           const struct rnn_live *e, const struct fwd_io *f, const struct bwd_io *g,
                           cudaGraphExec_t *gx, cudaEvent_t *ev, double *ms)
{
    cudaStream_t s = (cudaStream_t)ctx->stream;
    nn_status st = NN__CUDA(ctx, cudaEventRecord(ev[0], s));
    for (int r = 0; st == NN_OK && r < TUNE_REPS; r++) {
        if (gx) {
            st = NN__CUDA(ctx, cudaGraphLaunch(gx[0], s));
            if (st == NN_OK) st = NN__CUDA(ctx, cudaGraphLaunch(gx[1], s));
        } else {
            st = fwd_launch(ctx, h, p, e, f);
            if (st == NN_OK) st = bwd_launch(ctx, h, p, e, g);
        }
    }
    float t = 0;
    if (st == NN_OK) st = NN__CUDA(ctx, cudaEventRecord(ev[1], s));
    if (st == NN_OK) st = NN__CUDA(ctx, cudaEventSynchronize(ev[1]));
    if (st == NN_OK) st = NN__CUDA(ctx, cudaEventElapsedTime(&t, ev[0], ev[1]));
    if (st == NN_OK) *ms = (double)t / TUNE_REPS;
    return st;
}

/* A candidate's training step (forward, backward-data, backward-weights) on zeroed pool scratch,
 * timed the ways it may run: eager (*eager_ms) and replayed (*replay_ms: the forward and the
 * backward captured once each on the same buffers and launched as graphs, which is how a loop on
 * fixed buffers replays, "Fixed buffers pay no copies" in docs/RNN.md). Events around steps back
 * to back measure what bounds them, host or GPU. One untimed eager step goes first (cuDNN's first
 * call of a configuration does one-time work, and must not be captured). A mode not wanted, or a
 * capture the driver refuses, is left at -1; a failing eager step fails the candidate. */
static nn_status time_step(struct nn_ctx *ctx, cudnnHandle_t h, const struct nn__rnn_problem *p,
                           struct rnn_live *e, int want_eager, int want_replay, double *eager_ms,
                           double *replay_ms)
{
    enum { X, Y, W, DY, DX, DW, WS, RS, NBUF };
    size_t bytes[NBUF] = {e->xbytes, e->ybytes,       e->weight_bytes, e->ybytes,
                          e->xbytes, e->weight_bytes, e->work_bytes,   e->reserve_bytes};
    void *b[NBUF] = {0};
    cudaEvent_t ev[2] = {0, 0};
    cudaGraph_t g[2] = {0, 0};
    cudaGraphExec_t gx[2] = {0, 0};
    cudaStream_t s = (cudaStream_t)ctx->stream;
    *eager_ms = *replay_ms = -1;
    nn_status st = NN_OK;
    for (int i = 0; st == NN_OK && i < NBUF; i++)
        if (bytes[i]) {
            st = nn__dev_alloc(ctx, bytes[i], &b[i]);
            if (st == NN_OK) st = NN__CUDA(ctx, cudaMemsetAsync(b[i], 0, bytes[i], s));
        }
    for (int i = 0; st == NN_OK && i < 2; i++)
        st = NN__CUDA(ctx, cudaEventCreate(&ev[i]));
    struct fwd_io f = {b[X], NULL, NULL, b[W], b[Y], NULL, NULL, b[WS], b[RS], bytes[RS]};
    struct bwd_io bw = {b[X], NULL, NULL,  b[W],  b[Y],  NULL,      NULL, b[DY], b[DX],
                        NULL, NULL, b[DW], b[WS], b[RS], bytes[RS], 0,    1,     1};
    if (st == NN_OK) st = fwd_launch(ctx, h, p, e, &f);
    if (st == NN_OK) st = bwd_launch(ctx, h, p, e, &bw);
    if (st == NN_OK && want_eager) st = time_reps(ctx, h, p, e, &f, &bw, NULL, ev, eager_ms);
    if (st == NN_OK && want_replay) {
        nn_status cs = capture(ctx, h, p, e, fwd_launch, &f, &g[0]);
        if (cs == NN_OK) cs = capture(ctx, h, p, e, bwd_launch, &bw, &g[1]);
        for (int i = 0; cs == NN_OK && i < 2; i++)
            cs = NN__CUDA(ctx, cudaGraphInstantiate(&gx[i], g[i], 0));
        /* one untimed replay: a graph's first launch uploads it */
        for (int i = 0; cs == NN_OK && i < 2; i++)
            cs = NN__CUDA(ctx, cudaGraphLaunch(gx[i], s));
        if (cs == NN_OK) cs = time_reps(ctx, h, p, e, NULL, NULL, gx, ev, replay_ms);
        if (cs != NN_OK) {
            (void)cudaGetLastError();
            *replay_ms = -1;
        }
        e->captured = 0;
    }
    for (int i = 0; i < 2; i++) {
        if (gx[i]) cudaGraphExecDestroy(gx[i]);
        if (g[i]) cudaGraphDestroy(g[i]);
        if (ev[i]) cudaEventDestroy(ev[i]);
    }
    for (int i = 0; i < NBUF; i++)
        if (b[i]) nn__dev_free(ctx, b[i]);
    return st;
}

static int same_layout(const struct rnn_live *a, const struct rnn_live *b,
                       const struct nn__rnn_problem *p)
{
    return a->weight_bytes == b->weight_bytes &&
           !memcmp(a->offsets, b->offsets, (size_t)(p->layers * p->dirs * 5) * sizeof *a->offsets);
}

/* What the verbose line says of a tuned shape (nn__rnn_note_cache): the pair autotune kept. */
static const char *tuned_note(int algo, int replay)
{
    static const char *const names[4][2] = {
        {"autotuned:standard+eager", "autotuned:standard+replay"},
        {"autotuned:persist-static+eager", "autotuned:persist-static+replay"},
        {"autotuned:persist-dynamic+eager", "autotuned:persist-dynamic+replay"},
        {"autotuned:persist-small-h+eager", "autotuned:persist-small-h+replay"}};
    int i = algo == CUDNN_RNN_ALGO_PERSIST_STATIC           ? 1
            : algo == CUDNN_RNN_ALGO_PERSIST_DYNAMIC        ? 2
            : algo == CUDNN_RNN_ALGO_PERSIST_STATIC_SMALL_H ? 3
                                                            : 0;
    return names[i][!!replay];
}

/* Build every algorithm cuDNN allows the shape, time each training step the ways it may run
 * (eager unless NNPRIM_RNN_GRAPHS=1, replayed unless =0 or the stream cannot be captured), and
 * keep the cheapest (algorithm, mode) pair: an algorithm that wins eager may lose replayed, as the
 * persistent GRU kernels did on the H200 (105 us replayed against 45 for the standard one). Under
 * auto the mode goes into the record as its training decision (no trials then); under 0 or 1 the
 * setting fixes the mode and only the algorithm is recorded. A refused candidate (at descriptor
 * time or at its first call) is skipped and recorded in rec->flags. */
static nn_status tune(struct nn_ctx *ctx, const struct rnn_key *k, const struct nn__rnn_problem *p,
                      struct rnn_record *rec, struct rnn_live **out)
{
    static const int algos[] = {CUDNN_RNN_ALGO_STANDARD, CUDNN_RNN_ALGO_PERSIST_STATIC,
                                CUDNN_RNN_ALGO_PERSIST_STATIC_SMALL_H,
                                CUDNN_RNN_ALGO_PERSIST_DYNAMIC};
    enum { NA = sizeof algos / sizeof algos[0] };
    cudnnHandle_t h;
    NN__TRY(nn__cudnn_handle(ctx, &h));
    nn_graphs_mode graphs = ctx->settings.rnn_graphs;
    uint64_t t0 = nn__now_ns();
    struct rnn_live *cand[NA] = {0};
    double eager_ms[NA], replay_ms[NA];
    nn_status st = NN_OK;
    for (int i = 0; i < NA; i++) {
        struct rnn_record r = {algos[i], rec->flags};
        eager_ms[i] = replay_ms[i] = -1;
        st = build(ctx, k, p, &r, &cand[i]);
        /* Weight views come from a standard descriptor: an algorithm whose weight layout
         * differed would read the buffer wrongly, so it is not a candidate. */
        if (st == NN_OK && i > 0 && !same_layout(cand[0], cand[i], p))
            st = NN__FAIL(ctx, NN_E_UNSUPPORTED,
                          "nn_rnn (cuDNN): algorithm %d lays the weights out unlike the standard",
                          algos[i]);
        int want_replay = st == NN_OK && graphs != NN_GRAPHS_OFF && can_replay(ctx, cand[i]);
        if (st == NN_OK)
            st = time_step(ctx, h, p, cand[i], graphs != NN_GRAPHS_ON || !want_replay, want_replay,
                           &eager_ms[i], &replay_ms[i]);
        if (st == NN_OK) continue;
        live_destroy(cand[i]);
        cand[i] = NULL;
        if (i == 0) return st; /* the standard algorithm runs every shape cuDNN runs */
        (void)cudaGetLastError();
        rec->flags |= NN__RNN_REC_PERSIST_REFUSED;
        st = NN_OK;
    }
    int replay = 0, best = nn__rnn_tune_pick(NA, eager_ms, replay_ms, &replay);
    if (best < 0) best = 0, replay = 0; /* nothing timed: the standard one, eagerly */
    for (int i = 0; i < NA; i++)
        if (i != best) live_destroy(cand[i]);
    nn__cache_count_autotune(nn__cudnn_plan_cache(ctx), nn__now_ns() - t0);
    rec->algo = algos[best];
    rec->flags |= NN__RNN_REC_TUNED;
    /* else the stream or the build decided, not the timing */
    if (graphs == NN_GRAPHS_AUTO && can_replay(ctx, cand[best])) {
        rec->flags &= ~(NN__RNN_REC_TRAIN_EAGER | NN__RNN_REC_TRAIN_REPLAY);
        rec->flags |= replay ? NN__RNN_REC_TRAIN_REPLAY : NN__RNN_REC_TRAIN_EAGER;
        trial_init(ctx, cand[best], U_TRAIN, rec->flags);
    }
    if (!nn__rnn_note_cache) nn__rnn_note_cache = tuned_note(rec->algo, replay);
    *out = cand[best];
    return NN_OK;
}

/* The shape's entry, built on a miss: from a known record's algorithm when the plan file has one,
 * else timed under autotune (equal lengths, no projection, no dropout: what the persistent
 * algorithms run, and no random state consumed), else the standard algorithm. with_data 0: a
 * descriptor-only entry for weight queries. */
static nn_status entry_get(struct nn_ctx *ctx, const struct nn__rnn_problem *p, int with_data,
                           struct rnn_live **out)
{
    struct nn__cache *c = nn__cudnn_plan_cache(ctx);
    struct rnn_key k;
    key_of(ctx, p, with_data, &k);
    struct rnn_live *e = nn__cache_lookup(c, NN__RNN_CUDNN_KIND_ID, &k, NULL);
    if (e) {
        if (!nn__rnn_note_cache) nn__rnn_note_cache = e->prepared ? "prepared" : "hit";
        e->prepared = 0;
        note(e, 0);
        *out = e;
        return NN_OK;
    }
    NN__TRY(nn__capture_no_build(ctx, NULL, "the descriptors of this recurrent shape"));
    const struct rnn_record *known = nn__cache_lookup_known(c, NN__RNN_CUDNN_KIND_ID, &k, NULL);
    struct rnn_record rec = {choose_algo(&k), 0};
    nn_status st;
    if (known && (known->algo == CUDNN_RNN_ALGO_STANDARD || !k.varied)) {
        rec = *known;
        st = build(ctx, &k, p, &rec, &e);
        if (st == NN_OK) {
            nn__cache_count(c, NN__PC_REBUILT);
            if (!nn__rnn_note_cache) nn__rnn_note_cache = "rebuilt";
        } else {
            (void)cudaGetLastError();
            nn__cache_drop_known(c, NN__RNN_CUDNN_KIND_ID, &k);
            if (rec.algo != CUDNN_RNN_ALGO_STANDARD) rec.flags |= NN__RNN_REC_PERSIST_REFUSED;
            rec.algo = choose_algo(&k);
            st = build(ctx, &k, p, &rec, &e);
        }
    } else if (with_data && ctx->settings.tuning == NN_TUNING_AUTOTUNE && !k.varied && !k.proj &&
               !(k.dropout > 0 && k.layers > 1)) {
        st = tune(ctx, &k, p, &rec, &e);
    } else {
        st = build(ctx, &k, p, &rec, &e);
    }
    NN__TRY(st);
    if (!nn__rnn_note_cache) nn__rnn_note_cache = "heuristic";
    st = nn__cache_insert(ctx, c, NN__RNN_CUDNN_KIND_ID, &k, &rec, NULL, 0, e);
    if (st != NN_OK) {
        live_destroy(e);
        return st;
    }
    note(e, 0);
    *out = e;
    return NN_OK;
}

/* ---------------------------------------------------------------------------------------------
 * Graph replay
 */

/* Buffers of every tensor of a call (and the workspace, with_ws) in one pool allocation. */
static nn_status stage_alloc(struct nn_ctx *ctx, const struct rnn_live *e, int with_ws,
                             struct stage *g)
{
    memset(g, 0, sizeof *g);
    void **at[] = {&g->x,   &g->hx,  &g->cx, &g->w,   &g->y,   &g->hy, &g->cy, &g->dy,
                   &g->dhy, &g->dcy, &g->dx, &g->dhx, &g->dcx, &g->dw, &g->ws};
    size_t sz[] = {e->xbytes, e->hbytes, e->cbytes, e->weight_bytes, e->ybytes,
                   e->hbytes, e->cbytes, e->ybytes, e->hbytes,       e->cbytes,
                   e->xbytes, e->hbytes, e->cbytes, e->weight_bytes, with_ws ? e->work_bytes : 0};
    size_t off[15], total = 0;
    for (int i = 0; i < 15; i++) {
        off[i] = total;
        total += (sz[i] + 255) & ~(size_t)255;
    }
    NN__TRY(nn__dev_alloc(ctx, total ? total : 256, &g->base));
    g->bytes = total;
    for (int i = 0; i < 15; i++)
        *at[i] = sz[i] ? (char *)g->base + off[i] : NULL;
    return NN_OK;
}

/* The staging buffers, allocated from the pool at the shape's first capture. */
static nn_status stage_get(struct nn_ctx *ctx, struct rnn_live *e)
{
    return e->st.base ? NN_OK : stage_alloc(ctx, e, 1, &e->st);
}

static void drop_slots(struct rnn_live *e)
{
    for (int i = 0; i < e->nslots; i++) {
        exec_clear(&e->slots[i].fwd);
        exec_clear(&e->slots[i].bwd);
        e->slots[i].rs->owner = NULL;
        reserve_unref(e->slots[i].rs);
        e->slots[i].rs = NULL;
    }
    e->nslots = 0;
}

/* A slot whose reserve no pullback holds, made when all are busy and there is room; NULL when
 * there is none (the call runs eagerly). */
static nn_status free_slot(struct nn_ctx *ctx, struct rnn_live *e, struct slot **out)
{
    *out = NULL;
    for (int i = 0; i < e->nslots; i++)
        if (e->slots[i].rs->refs == 1) {
            *out = &e->slots[i];
            return NN_OK;
        }
    if (e->nslots == RNN_SLOTS) return NN_OK;
    struct reserve *rs = nn__host_calloc(1, sizeof *rs);
    if (!rs) return NN__FAIL(ctx, NN_E_OOM_HOST, "nn_rnn_forward: out of host memory");
    rs->refs = 1, rs->ctx = ctx, rs->bytes = e->reserve_bytes, rs->owner = e;
    rs->slot = e->nslots;
    nn_status st = rs->bytes ? nn__dev_alloc(ctx, rs->bytes, &rs->ptr) : NN_OK;
    if (st != NN_OK) {
        nn__host_free(rs);
        return st;
    }
    struct slot *sl = &e->slots[e->nslots++];
    memset(sl, 0, sizeof *sl);
    sl->rs = rs;
    *out = sl;
    return NN_OK;
}

static void add_copy(struct copy *c, int *n, void *stage, const void *user, size_t bytes, int out)
{
    c[*n] = (struct copy){stage, user, bytes, out};
    (*n)++;
}

/* The ins (out = 0) or the outs of copies as one copy node's list. */
static void copies_of(const struct copy *copies, int ncopy, int out, struct nn__copies *k)
{
    memset(k, 0, sizeof *k);
    for (int i = 0; i < ncopy; i++) {
        if (copies[i].out != out) continue;
        const void *dst = out ? copies[i].user : copies[i].stage;
        const void *src = out ? copies[i].stage : copies[i].user;
        k->dst[k->n] = (uint64_t)(uintptr_t)dst, k->src[k->n] = (uint64_t)(uintptr_t)src;
        k->bytes[k->n++] = copies[i].bytes;
    }
}

/* The executable graph from ex->body and copies: one node doing the in-copies, the body after it,
 * one node doing the out-copies after that. copies lists ins before outs; ex keeps them. */
static nn_status exec_assemble(struct nn_ctx *ctx, struct exec *ex, const struct copy *copies,
                               int ncopy)
{
    cudaGraphNode_t child = NULL;
    struct nn__copies k;
    if (ex->exec) cudaGraphExecDestroy(ex->exec);
    if (ex->graph) cudaGraphDestroy(ex->graph);
    ex->exec = NULL, ex->graph = NULL, ex->in = ex->out = NULL, ex->ncopy = 0;
    nn_status st = NN__CUDA(ctx, cudaGraphCreate(&ex->graph, 0));
    copies_of(copies, ncopy, 0, &k);
    if (st == NN_OK && k.n) st = nn__graph_add_copies(ctx, ex->graph, NULL, 0, &k, &ex->in);
    if (st == NN_OK)
        st = NN__CUDA(ctx, cudaGraphAddChildGraphNode(&child, ex->graph, ex->in ? &ex->in : NULL,
                                                      ex->in ? 1 : 0, ex->body));
    copies_of(copies, ncopy, 1, &k);
    if (st == NN_OK && k.n) st = nn__graph_add_copies(ctx, ex->graph, &child, 1, &k, &ex->out);
    if (st == NN_OK) st = NN__CUDA(ctx, cudaGraphInstantiate(&ex->exec, ex->graph, 0));
    if (st == NN_OK) {
        memcpy(ex->copy, copies, (size_t)ncopy * sizeof *copies);
        ex->ncopy = ncopy;
    }
    return st;
}

/* One launch_fn call, as nn__stream_capture() takes it. */
struct launch {
    struct nn_ctx *ctx;
    cudnnHandle_t h;
    const struct nn__rnn_problem *p;
    struct rnn_live *e;
    launch_fn fn;
    const void *arg;
};

static nn_status run_launch(void *arg)
{
    struct launch *l = arg;
    return l->fn(l->ctx, l->h, l->p, l->e, l->arg);
}

/* Capture the launches of fn on the context's stream into a new graph. */
static nn_status capture(struct nn_ctx *ctx, cudnnHandle_t h, const struct nn__rnn_problem *p,
                         struct rnn_live *e, launch_fn fn, const void *arg, cudaGraph_t *out)
{
    e->captured = 1;
    struct launch l = {ctx, h, p, e, fn, arg};
    return nn__stream_capture(ctx, run_launch, &l, out);
}

/* Capture fn into ex->body and assemble the staging graph around it. */
static nn_status exec_build(struct nn_ctx *ctx, cudnnHandle_t h, const struct nn__rnn_problem *p,
                            struct rnn_live *e, struct exec *ex, unsigned sig,
                            const struct copy *copies, int ncopy, launch_fn fn, const void *arg)
{
    exec_clear(ex);
    nn_status st = capture(ctx, h, p, e, fn, arg, &ex->body);
    if (st == NN_OK) st = exec_assemble(ctx, ex, copies, ncopy);
    if (st != NN_OK) {
        (void)cudaGetLastError();
        exec_clear(ex);
        return st;
    }
    ex->sig = sig;
    return NN_OK;
}

/* Point the copy nodes at this call's tensors (a side whose tensors all stayed keeps its node),
 * then launch. Should the driver refuse to repoint a node, the graph is assembled again around
 * the same captured body (host work only, no capture). */
static nn_status exec_launch(struct nn_ctx *ctx, struct exec *ex, const struct copy *want)
{
    int moved[2] = {0, 0};
    for (int i = 0; i < ex->ncopy; i++)
        moved[ex->copy[i].out] |= ex->copy[i].user != want[i].user;
    for (int out = 0; out < 2; out++) {
        if (!moved[out]) continue;
        struct nn__copies k;
        copies_of(want, ex->ncopy, out, &k);
        if (nn__graph_exec_set_copies(ex->exec, out ? ex->out : ex->in, &k) != cudaSuccess) {
            (void)cudaGetLastError();
            NN__TRY(exec_assemble(ctx, ex, want, ex->ncopy));
            break;
        }
        for (int i = 0; i < ex->ncopy; i++)
            if (ex->copy[i].out == out) ex->copy[i].user = want[i].user;
    }
    return NN__CUDA(ctx, cudaGraphLaunch(ex->exec, (cudaStream_t)ctx->stream));
}

static void tuple_of(struct tuple *t, unsigned sig, const struct copy *c, int n)
{
    memset(t, 0, sizeof *t);
    t->sig = sig, t->n = n;
    for (int i = 0; i < n; i++)
        t->user[i] = c[i].user;
}

static int tuple_eq(const struct tuple *a, const struct tuple *b)
{
    return a->n > 0 && memcmp(a, b, sizeof *a) == 0;
}

/* Run one call whose caller-side copies are c: on the direct graph while the caller's pointers are
 * the ones it was captured on, capturing it when they are also the last call's (a training loop
 * on fixed buffers then pays no copies); otherwise through the staging graph, built on first use.
 * staged and direct are fn's arguments on the staging buffers and on the caller's tensors. */
static nn_status exec_run(struct nn_ctx *ctx, cudnnHandle_t h, const struct nn__rnn_problem *p,
                          struct rnn_live *e, struct exec *ex, unsigned sig, const struct copy *c,
                          int n, launch_fn fn, const void *staged, const void *direct)
{
    struct tuple now;
    tuple_of(&now, sig, c, n);
    if (!ex->exec || ex->sig != sig) {
        NN__TRY(exec_build(ctx, h, p, e, ex, sig, c, n, fn, staged));
    } else if (!(ex->direct && tuple_eq(&ex->direct_at, &now)) && tuple_eq(&ex->last, &now)) {
        cudaGraph_t g;
        NN__TRY(capture(ctx, h, p, e, fn, direct, &g));
        if (ex->direct) cudaGraphExecDestroy(ex->direct);
        ex->direct = NULL;
        nn_status st = NN__CUDA(ctx, cudaGraphInstantiate(&ex->direct, g, 0));
        cudaGraphDestroy(g);
        if (st != NN_OK) {
            ex->direct = NULL;
            return st;
        }
        ex->direct_at = now;
    }
    ex->last = now;
    if (ex->direct && tuple_eq(&ex->direct_at, &now))
        return NN__CUDA(ctx, cudaGraphLaunch(ex->direct, (cudaStream_t)ctx->stream));
    return exec_launch(ctx, ex, c);
}

static int replay_wanted(const struct nn_ctx *ctx, const struct rnn_live *e, int unit)
{
    const struct trial *t = &e->trial[unit];
    return can_replay(ctx, e) &&
           (t->phase == P_REPLAY_TRIAL || (t->phase == P_DECIDED && t->replay));
}

/* A replay that failed (capture refused, an update refused): the shape runs eagerly from now on;
 * the failure stays readable in the context's last error. */
static void disable_replay(struct rnn_live *e, const char *why)
{
    e->no_replay = why;
    drop_graphs(e, U_INFER);
    drop_slots(e);
    for (int u = 0; u < 2; u++)
        e->trial[u].phase = P_DECIDED, e->trial[u].replay = 0;
}

/* The live record of p's shape, if any: the flags in clear off, then those in set on. */
static void record_flags(struct nn_ctx *ctx, const struct nn__rnn_problem *p, int32_t clear,
                         int32_t set)
{
    struct rnn_key k;
    key_of(ctx, p, 1, &k);
    struct rnn_record *r =
        nn__cache_live_record(nn__cudnn_plan_cache(ctx), NN__RNN_CUDNN_KIND_ID, &k);
    if (r) r->flags = (r->flags & ~clear) | set;
}

/* The record keeps which optional tensors the training graphs were captured with (the
 * NN__RNN_REC_*_SIG bits), so that a plan file's load captures the same calls. */
static void record_sig(struct nn_ctx *ctx, const struct nn__rnn_problem *p, int bwd, unsigned sig)
{
    int shift = bwd ? NN__RNN_REC_BWD_SHIFT : NN__RNN_REC_FWD_SHIFT;
    int32_t mask = (int32_t)((bwd ? (unsigned)BS_ALL : (unsigned)FS_ALL) << shift);
    record_flags(ctx, p, mask,
                 (int32_t)(sig << shift) | (bwd ? NN__RNN_REC_BWD_SIG : NN__RNN_REC_FWD_SIG));
}

static nn_status forward_replay(struct nn_ctx *ctx, cudnnHandle_t h,
                                const struct nn__rnn_problem *p, struct rnn_live *e,
                                const struct nn__rnn_io *io, int training, struct reserve **rs,
                                int *done)
{
    NN__TRY(stage_get(ctx, e));
    struct stage *g = &e->st;
    struct copy c[RNN_COPIES];
    int n = 0;
    unsigned sig = 0;
    add_copy(c, &n, g->x, io->x->data, e->xbytes, 0);
    if (io->hx) add_copy(c, &n, g->hx, io->hx->data, e->hbytes, 0), sig |= FS_HX;
    if (io->cx) add_copy(c, &n, g->cx, io->cx->data, e->cbytes, 0), sig |= FS_CX;
    add_copy(c, &n, g->w, io->w->data, e->weight_bytes, 0);
    add_copy(c, &n, g->y, io->y_out->data, e->ybytes, 1);
    if (io->hy) add_copy(c, &n, g->hy, io->hy->data, e->hbytes, 1), sig |= FS_HY;
    if (io->cy) add_copy(c, &n, g->cy, io->cy->data, e->cbytes, 1), sig |= FS_CY;
    struct exec *ex = &e->infer;
    struct reserve *r = NULL;
    if (training) {
        struct slot *sl;
        NN__TRY(free_slot(ctx, e, &sl));
        if (!sl) return NN_OK;
        ex = &sl->fwd, r = sl->rs;
    }
    struct fwd_io a = {g->x,
                       io->hx ? g->hx : NULL,
                       io->cx ? g->cx : NULL,
                       g->w,
                       g->y,
                       io->hy ? g->hy : NULL,
                       io->cy ? g->cy : NULL,
                       g->ws,
                       r ? r->ptr : NULL,
                       r ? r->bytes : 0};
    struct fwd_io d = fwd_io_of(io, g->ws, r);
    int fresh = !ex->exec || ex->sig != sig;
    NN__TRY(exec_run(ctx, h, p, e, ex, sig, c, n, fwd_launch, &a, &d));
    if (fresh && training) record_sig(ctx, p, 0, sig);
    if (r) {
        r->refs++;
        *rs = r;
    }
    *done = 1;
    return NN_OK;
}

static nn_status backward_replay(struct nn_ctx *ctx, cudnnHandle_t h,
                                 const struct nn__rnn_problem *p, struct rnn_live *e,
                                 const struct reserve *rs, const struct nn__rnn_io *io, int *done)
{
    NN__TRY(stage_get(ctx, e));
    struct stage *g = &e->st;
    struct copy c[RNN_COPIES];
    int n = 0;
    unsigned sig = 0;
    add_copy(c, &n, g->x, io->x->data, e->xbytes, 0);
    if (io->hx) add_copy(c, &n, g->hx, io->hx->data, e->hbytes, 0), sig |= BS_HX;
    if (io->cx) add_copy(c, &n, g->cx, io->cx->data, e->cbytes, 0), sig |= BS_CX;
    add_copy(c, &n, g->w, io->w->data, e->weight_bytes, 0);
    add_copy(c, &n, g->y, io->y->data, e->ybytes, 0);
    if (io->dy) add_copy(c, &n, g->dy, io->dy->data, e->ybytes, 0), sig |= BS_DY;
    if (io->dhy) add_copy(c, &n, g->dhy, io->dhy->data, e->hbytes, 0), sig |= BS_DHY;
    if (io->dcy) add_copy(c, &n, g->dcy, io->dcy->data, e->cbytes, 0), sig |= BS_DCY;
    if (io->dw && io->accumulate) add_copy(c, &n, g->dw, io->dw->data, e->weight_bytes, 0);
    if (io->dx) add_copy(c, &n, g->dx, io->dx->data, e->xbytes, 1), sig |= BS_DX;
    if (io->dhx) add_copy(c, &n, g->dhx, io->dhx->data, e->hbytes, 1), sig |= BS_DHX;
    if (io->dcx) add_copy(c, &n, g->dcx, io->dcx->data, e->cbytes, 1), sig |= BS_DCX;
    if (io->dw) add_copy(c, &n, g->dw, io->dw->data, e->weight_bytes, 1), sig |= BS_DW;
    if (io->dw && io->accumulate) sig |= BS_ACCUMULATE;
    struct exec *ex = &e->slots[rs->slot].bwd;
    struct bwd_io a = {g->x,
                       io->hx ? g->hx : NULL,
                       io->cx ? g->cx : NULL,
                       g->w,
                       g->y,
                       io->dhy ? g->dhy : NULL,
                       io->dcy ? g->dcy : NULL,
                       g->dy,
                       g->dx,
                       io->dhx ? g->dhx : NULL,
                       io->dcx ? g->dcx : NULL,
                       g->dw,
                       g->ws,
                       rs->ptr,
                       rs->bytes,
                       !io->dy,
                       io->dw != NULL,
                       !io->accumulate};
    /* Without the caller's dy or dx, cuDNN still needs the buffers: the staging ones serve. */
    struct bwd_io d = bwd_io_of(io, g->ws, rs, g->dy, g->dx);
    int fresh = !ex->exec || ex->sig != sig;
    NN__TRY(exec_run(ctx, h, p, e, ex, sig, c, n, bwd_launch, &a, &d));
    if (fresh) record_sig(ctx, p, 1, sig);
    *done = 1;
    return NN_OK;
}

/* auto's measurement: a call of a unit still deciding starts the unit's window if none is open
 * (returns 0 when not measuring). */
static int trial_start(struct nn_ctx *ctx, struct rnn_live *e, int unit)
{
    /* On a stream that cannot be captured nothing replays, so a trial could only time eager
     * calls and record a decision the stream made, not the shape: it waits, undecided, for a
     * stream that can be. Likewise where this build or driver has no copy kernel (no_replay). */
    struct trial *t = &e->trial[unit];
    if (t->phase == P_DECIDED || !can_replay(ctx, e)) return 0;
    if (t->open) return 1;
    for (int i = 0; i < 2; i++)
        if (!t->ev[i] && cudaEventCreate(&t->ev[i]) != cudaSuccess) {
            (void)cudaGetLastError();
            t->ev[i] = NULL;
        }
    if (t->ev[0] && cudaEventRecord(t->ev[0], (cudaStream_t)ctx->stream) != cudaSuccess) {
        (void)cudaGetLastError();
        return 0;
    }
    t->open = t->ev[0] && t->ev[1];
    t->t0 = nn__now_ns();
    return t->open;
}

/* Ends a measured call. A window's cost per step is max(host time, GPU time) over its calls:
 * whichever bounds calls issued back to back, as the caller issues them (timing each call on its
 * own, synchronised, put eager 3-4% above its back-to-back cost on the H200 and mispicked replay
 * for gru t375n32i2048h2048). */
static void trial_end(struct nn_ctx *ctx, const struct nn__rnn_problem *p, struct rnn_live *e,
                      int unit, int pass, int measuring)
{
    struct trial *t = &e->trial[unit];
    if (!measuring || t->phase == P_DECIDED) return;
    /* Warm-ups and captures start the window again. A replay phase's call that ran eagerly (every
     * slot busy, lengths that changed) counts: it is what the mode costs this caller. A training
     * window closes on as many backwards as forwards (forwards alone, 8, where pullbacks never
     * reach a backward); a phase whose calls never balance so ends eager after 32. */
    int stuck = ++t->calls > 32;
    if (t->skip[pass]) {
        t->skip[pass] = 0;
        t->open = 0, t->n[0] = t->n[1] = 0;
    } else {
        t->n[pass]++;
    }
    int ready = unit == U_INFER
                    ? t->n[0] >= 2
                    : (t->n[0] >= 2 && t->n[1] == t->n[0]) || (!t->n[1] && t->n[0] >= 8);
    if (!stuck && !ready) return;
    double cost = -1; /* not measured: a stuck phase decides eager */
    if (!stuck) {
        double ns = (double)(nn__now_ns() - t->t0);
        float ms = 0;
        if (cudaEventRecord(t->ev[1], (cudaStream_t)ctx->stream) == cudaSuccess &&
            cudaEventSynchronize(t->ev[1]) == cudaSuccess &&
            cudaEventElapsedTime(&ms, t->ev[0], t->ev[1]) == cudaSuccess) {
            if (ms * 1e6 > ns) ns = ms * 1e6;
        } else {
            (void)cudaGetLastError();
        }
        nn__cache_count_autotune(nn__cudnn_plan_cache(ctx), (uint64_t)ns);
        cost = ns / t->n[0];
    }
    t->open = 0, t->n[0] = t->n[1] = t->calls = 0, t->skip[0] = t->skip[1] = 1;
    if (t->phase == P_EAGER_TRIAL && !stuck) {
        t->eager_ns = cost;
        t->phase = P_REPLAY_TRIAL;
        return;
    }
    t->replay_ns = cost;
    t->replay = !stuck && nn__rnn_replay_pays(t->eager_ns, cost);
    t->phase = P_DECIDED;
    if (nn__verbose(ctx))
        nn__log("nn_rnn: auto: the %s calls of this call's shape %s (eager %.1f us, replayed "
                "%.1f us per %s)",
                unit == U_INFER ? "inference" : "training", t->replay ? "replay" : "run eagerly",
                t->eager_ns / 1e3, cost / 1e3, unit == U_INFER ? "call" : "forward and backward");
    if (unit == U_INFER)
        record_flags(ctx, p, 0, t->replay ? NN__RNN_REC_INFER_REPLAY : NN__RNN_REC_INFER_EAGER);
    else
        record_flags(ctx, p, 0, t->replay ? NN__RNN_REC_TRAIN_REPLAY : NN__RNN_REC_TRAIN_EAGER);
    if (!t->replay && unit == U_INFER) drop_graphs(e, U_INFER);
    if (!t->replay && unit == U_TRAIN) drop_slots(e);
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

/* What an eager call of the pass takes from the pool (rnn.h): forward_eager's workspace and, in
 * training, the reserve forward_cudnn takes for the pullback; backward_eager's workspace (its
 * zeroed dy and dx stand-ins only when the call passes none). */
nn_status nn__rnn_workspace_cudnn(struct nn_ctx *ctx, const struct nn__rnn_problem *p,
                                  nn_rnn_pass pass, size_t *bytes)
{
    struct rnn_live *e;
    nn__cudnn_shared_enter(ctx);
    nn_status st = entry_get(ctx, p, 1, &e);
    nn__cudnn_shared_leave(ctx);
    NN__TRY(st);
    *bytes = e->work_bytes + (pass == NN_RNN_PASS_TRAINING ? e->reserve_bytes : 0);
    return NN_OK;
}

/* Data descriptors hold this call's lengths (set again only when they changed: then the graphs,
 * which hold the old lengths, go, and this call runs eagerly). */
static nn_status bind_lengths(struct nn_ctx *ctx, const struct nn__rnn_problem *p,
                              struct rnn_live *e, const int32_t *lengths, int *changed)
{
    int same = 1;
    for (int64_t i = 0; same && i < p->n; i++)
        same = e->lengths[i] == (lengths ? lengths[i] : (int32_t)p->t);
    *changed = !same;
    if (same) return NN_OK;
    drop_graphs(e, U_INFER);
    drop_graphs(e, U_TRAIN);
    struct rnn_key k;
    key_of(ctx, p, 1, &k);
    return set_data_descs(ctx, e, &k, lengths);
}

/* A reserve of the pullback's own (an eager training forward's). */
static nn_status reserve_new(struct nn_ctx *ctx, const struct rnn_live *e, struct reserve **out)
{
    struct reserve *rs = nn__host_calloc(1, sizeof *rs);
    if (!rs) return NN__FAIL(ctx, NN_E_OOM_HOST, "nn_rnn_forward: out of host memory");
    rs->refs = 1, rs->ctx = ctx, rs->bytes = e->reserve_bytes, rs->slot = -1;
    nn_status st = rs->bytes ? nn__dev_alloc(ctx, rs->bytes, &rs->ptr) : NN_OK;
    if (st != NN_OK) {
        nn__host_free(rs);
        return st;
    }
    *out = rs;
    return NN_OK;
}

/* cuDNN's first call of a configuration does one-time work that a graph capture must not record
 * (RNN.md): inside a capture, a call whose kind (warm) has not run eagerly yet is refused. */
static nn_status first_call_done(struct nn_ctx *ctx, const char *fn, const struct rnn_live *e,
                                 int warm)
{
    if (e->warm[warm]) return NN_OK;
    static const char *const what[] = {"inference forward", "training forward", "backward"};
    char text[96];
    snprintf(text, sizeof text, "this shape's first eager %s (cuDNN's one-time work)", what[warm]);
    return nn__capture_no_build(ctx, fn, text);
}

static nn_status forward_eager(struct nn_ctx *ctx, cudnnHandle_t h, const struct nn__rnn_problem *p,
                               const struct rnn_live *e, const struct nn__rnn_io *io,
                               struct reserve *rs)
{
    void *ws = NULL;
    nn_status st = e->work_bytes ? nn__dev_alloc(ctx, e->work_bytes, &ws) : NN_OK;
    struct fwd_io a = fwd_io_of(io, ws, rs);
    if (st == NN_OK) st = fwd_launch(ctx, h, p, e, &a);
    if (ws) nn__dev_free(ctx, ws);
    return st;
}

static nn_status forward_cudnn(struct nn_ctx *ctx, const struct nn__rnn_problem *p,
                               const struct nn__rnn_io *io, void **state)
{
    struct rnn_live *e;
    cudnnHandle_t h;
    int changed, replayed = 0, unit = state ? U_TRAIN : U_INFER, warm = state ? W_TRAIN : W_INFER;
    NN__TRY(nn__cudnn_handle(ctx, &h));
    NN__TRY(entry_get(ctx, p, 1, &e));
    NN__TRY(first_call_done(ctx, "nn_rnn_forward", e, warm));
    NN__TRY(bind_lengths(ctx, p, e, io->lengths, &changed));
    int measuring = trial_start(ctx, e, unit);
    struct reserve *rs = NULL;
    if (replay_wanted(ctx, e, unit) && e->warm[warm] && !changed &&
        forward_replay(ctx, h, p, e, io, state != NULL, &rs, &replayed) != NN_OK) {
        disable_replay(e, "a capture or graph update failed (the context's last error)");
        rs = NULL, replayed = 0;
    }
    if (!replayed && state) NN__TRY(reserve_new(ctx, e, &rs));
    if (!replayed) {
        nn_status st = forward_eager(ctx, h, p, e, io, rs);
        if (st != NN_OK) {
            reserve_unref(rs);
            return st;
        }
        e->warm[warm] = 1;
    }
    if (e->captured) e->trial[unit].skip[0] = 1, e->captured = 0;
    trial_end(ctx, p, e, unit, 0, measuring);
    note(e, replayed);
    if (state) *state = rs;
    return NN_OK;
}

/* A call's staging, slots and dropout states are the context's, shared by its calls on every
 * stream (cudnn_ctx.h). */
nn_status nn__rnn_forward_cudnn(struct nn_ctx *ctx, const struct nn__rnn_problem *p,
                                const struct nn__rnn_io *io, void **state)
{
    nn__cudnn_shared_enter(ctx);
    nn_status st = forward_cudnn(ctx, p, io, state);
    nn__cudnn_shared_leave(ctx);
    return st;
}

void nn__rnn_state_free_cudnn(struct nn_ctx *ctx, void *state)
{
    (void)ctx;
    reserve_unref(state);
}

static nn_status backward_eager(struct nn_ctx *ctx, cudnnHandle_t h,
                                const struct nn__rnn_problem *p, const struct rnn_live *e,
                                const struct reserve *rs, const struct nn__rnn_io *io)
{
    void *ws = NULL, *dy0 = NULL, *dx0 = NULL;
    nn_status st = e->work_bytes ? nn__dev_alloc(ctx, e->work_bytes, &ws) : NN_OK;
    if (st == NN_OK && !io->dy) st = nn__dev_alloc(ctx, e->ybytes, &dy0);
    if (st == NN_OK && !io->dx) st = nn__dev_alloc(ctx, e->xbytes, &dx0);
    struct bwd_io a = bwd_io_of(io, ws, rs, dy0, dx0);
    if (st == NN_OK) st = bwd_launch(ctx, h, p, e, &a);
    if (ws) nn__dev_free(ctx, ws);
    if (dy0) nn__dev_free(ctx, dy0);
    if (dx0) nn__dev_free(ctx, dx0);
    return st;
}

static nn_status backward_cudnn(struct nn_ctx *ctx, const struct nn__rnn_problem *p, void *state,
                                const struct nn__rnn_io *io)
{
    struct reserve *rs = state;
    if (!io->dx && !io->dhx && !io->dcx && !io->dw) return NN_OK;
    struct rnn_live *e;
    cudnnHandle_t h;
    int changed, replayed = 0;
    NN__TRY(nn__cudnn_handle(ctx, &h));
    NN__TRY(entry_get(ctx, p, 1, &e));
    NN__TRY(first_call_done(ctx, "nn_rnn_backward", e, W_BWD));
    NN__TRY(bind_lengths(ctx, p, e, io->lengths, &changed));
    int measuring = trial_start(ctx, e, U_TRAIN);
    if (rs->owner == e && replay_wanted(ctx, e, U_TRAIN) && e->warm[W_BWD] && !changed &&
        backward_replay(ctx, h, p, e, rs, io, &replayed) != NN_OK) {
        disable_replay(e, "a capture or graph update failed (the context's last error)");
        replayed = 0;
    }
    if (!replayed) {
        NN__TRY(backward_eager(ctx, h, p, e, rs, io));
        e->warm[W_BWD] = 1;
    }
    if (e->captured) e->trial[U_TRAIN].skip[1] = 1, e->captured = 0;
    trial_end(ctx, p, e, U_TRAIN, 1, measuring);
    note(e, replayed);
    return NN_OK;
}

nn_status nn__rnn_backward_cudnn(struct nn_ctx *ctx, const struct nn__rnn_problem *p, void *state,
                                 const struct nn__rnn_io *io)
{
    nn__cudnn_shared_enter(ctx);
    nn_status st = backward_cudnn(ctx, p, state, io);
    nn__cudnn_shared_leave(ctx);
    return st;
}

/* ---------------------------------------------------------------------------------------------
 * A plan file's shapes, prepared at load (docs/RNN.md, "The first step from a plan file")
 */

/* The problem a loaded key describes (key_of's inverse; the key's settings are the context's). */
static void problem_of_key(const struct rnn_key *k, struct nn__rnn_problem *p)
{
    memset(p, 0, sizeof *p);
    p->cell = (nn_rnn_cell)k->cell;
    p->t = k->t, p->n = k->n;
    p->input = k->input, p->hidden = k->hidden, p->proj = k->proj;
    p->out = nn__rnn_out_size(k->hidden, k->proj);
    p->layers = k->layers;
    p->dirs = k->dirs;
    p->gates = nn__rnn_gates((nn_rnn_cell)k->cell);
    p->bias_mode = (nn_rnn_bias_mode)k->bias_mode;
    p->input_mode = (nn_rnn_input_mode)k->input_mode;
    p->layout = (nn_rnn_layout)k->layout;
    p->dropout = k->dropout, p->dropout_seed = k->dropout_seed;
    p->clip_enabled = k->clip_enabled, p->clip_lo = k->clip_lo, p->clip_hi = k->clip_hi;
    p->dtype = (nn_dtype)k->dtype;
    p->math = (nn_math_mode)k->s.math_mode;
    p->deterministic = k->s.deterministic;
    p->varied = k->varied;
}

/* Calls of one shape on zeroed scratch g, passing the optional tensors the record's signatures
 * name (every one when it has none). */
static void prepare_io(const struct nn__rnn_problem *p, int32_t flags, const struct stage *g,
                       nn_tensor *t, struct nn__rnn_io *fio, struct nn__rnn_io *bio)
{
    unsigned lstm = p->cell == NN_RNN_LSTM;
    unsigned fs = flags & NN__RNN_REC_FWD_SIG ? (unsigned)flags >> NN__RNN_REC_FWD_SHIFT & FS_ALL
                                              : FS_HX | FS_HY | (lstm ? FS_CX | FS_CY : 0u);
    unsigned bs = flags & NN__RNN_REC_BWD_SIG
                      ? (unsigned)flags >> NN__RNN_REC_BWD_SHIFT & BS_ALL
                      : BS_DY | BS_DHY | BS_DX | BS_DHX | BS_DW | (lstm ? BS_DCY | BS_DCX : 0u);
    void *const at[14] = {g->x,  g->hx,  g->cx,  g->w,  g->y,   g->hy,  g->cy,
                          g->dy, g->dhy, g->dcy, g->dx, g->dhx, g->dcx, g->dw};
    for (int i = 0; i < 14; i++) {
        memset(&t[i], 0, sizeof t[i]);
        t[i].data = at[i];
    }
    memset(fio, 0, sizeof *fio);
    fio->x = &t[0], fio->w = &t[3], fio->y = fio->y_out = &t[4];
    fio->hx = fs & FS_HX ? &t[1] : NULL, fio->cx = fs & FS_CX ? &t[2] : NULL;
    fio->hy = fs & FS_HY ? &t[5] : NULL, fio->cy = fs & FS_CY ? &t[6] : NULL;
    fio->training = 1;
    *bio = *fio;
    bio->y_out = bio->hy = bio->cy = NULL;
    bio->dy = bs & BS_DY ? &t[7] : NULL, bio->dhy = bs & BS_DHY ? &t[8] : NULL;
    bio->dcy = bs & BS_DCY ? &t[9] : NULL, bio->dx = bs & BS_DX ? &t[10] : NULL;
    bio->dhx = bs & BS_DHX ? &t[11] : NULL, bio->dcx = bs & BS_DCX ? &t[12] : NULL;
    bio->dw = bs & BS_DW ? &t[13] : NULL, bio->accumulate = (bs & BS_ACCUMULATE) != 0;
    bio->training = 0;
}

/* One loaded record made ready: its descriptors built (from the record, as a first call would),
 * cuDNN's first calls of the configuration done eagerly on zeroed scratch (a training forward and
 * its backward; an inference forward too where the record shows the shape ran inference), and,
 * where the shape replays, its staging graphs captured, so that the caller's first call of each
 * kind replays. Training with dropout is left to its first call: its first calls would draw from
 * cuDNN's random state, and a run must repeat under its seed. Varied lengths are not known
 * before the call (the lengths live in the data descriptors): such a shape gets its first calls
 * with full lengths and no graphs. *captured counts the shapes whose graphs were captured. */
static nn_status prepare_one(struct nn_ctx *ctx, const struct nn__rnn_problem *p, int32_t flags,
                             int *captured)
{
    struct rnn_live *e;
    cudnnHandle_t h;
    NN__TRY(nn__cudnn_handle(ctx, &h));
    NN__TRY(entry_get(ctx, p, p->n > 0, &e));
    nn__cache_count(nn__cudnn_plan_cache(ctx), NN__PC_PREBUILT);
    if (!p->n) return NN_OK;
    struct stage g;
    NN__TRY(stage_alloc(ctx, e, 0, &g));
    nn_status st = NN__CUDA(ctx, cudaMemsetAsync(g.base, 0, g.bytes, (cudaStream_t)ctx->stream));
    nn_tensor t[14];
    struct nn__rnn_io fio, bio, iio;
    prepare_io(p, flags, &g, t, &fio, &bio);
    iio = fio;
    iio.training = 0;
    int train = !(p->dropout > 0 && p->layers > 1);
    int infer = (flags & (NN__RNN_REC_INFER_EAGER | NN__RNN_REC_INFER_REPLAY)) != 0;
    int grads = bio.dx || bio.dhx || bio.dcx || bio.dw;
    if (st == NN_OK && train) {
        struct reserve *rs = NULL;
        st = reserve_new(ctx, e, &rs);
        if (st == NN_OK) st = forward_eager(ctx, h, p, e, &fio, rs);
        if (st == NN_OK && grads) st = backward_eager(ctx, h, p, e, rs, &bio);
        reserve_unref(rs);
        if (st == NN_OK) e->warm[W_TRAIN] = e->warm[W_BWD] = 1;
    }
    if (st == NN_OK && infer) {
        st = forward_eager(ctx, h, p, e, &iio, NULL);
        if (st == NN_OK) e->warm[W_INFER] = 1;
    }
    int got = 0;
    if (st == NN_OK && !p->varied && e->warm[W_TRAIN] && grads && replay_wanted(ctx, e, U_TRAIN)) {
        struct reserve *rs = NULL;
        int done = 0;
        nn_status cs = forward_replay(ctx, h, p, e, &fio, 1, &rs, &done);
        if (cs == NN_OK && done) cs = backward_replay(ctx, h, p, e, rs, &bio, &done);
        reserve_unref(rs); /* the slot is free again, its graphs kept */
        if (cs != NN_OK)
            disable_replay(e, "a capture or graph update failed (the context's last error)");
        got |= cs == NN_OK && done;
    }
    if (st == NN_OK && !p->varied && e->warm[W_INFER] && replay_wanted(ctx, e, U_INFER)) {
        struct reserve *none = NULL;
        int done = 0;
        if (forward_replay(ctx, h, p, e, &iio, 0, &none, &done) != NN_OK)
            disable_replay(e, "a capture or graph update failed (the context's last error)");
        got |= done;
    }
    *captured += got;
    e->captured = 0;
    e->prepared = st == NN_OK;
    nn__dev_free(ctx, g.base);
    return st;
}

struct loaded {
    struct nn__cache *c;
    struct nn__cache_settings now;
    struct rnn_key *keys;
    int32_t *flags;
    size_t n, cap;
};

static int collect_loaded(void *arg, const struct nn__cache_kind *kind, const void *key,
                          const struct nn__cache_view *v)
{
    struct loaded *l = arg;
    const struct rnn_key *k = key;
    if (kind->id != NN__RNN_CUDNN_KIND_ID || !nn__cache_settings_equal(&k->s, &l->now) ||
        nn__cache_is_live(l->c, kind->id, key))
        return 0;
    if (l->n == l->cap) return 1;
    l->keys[l->n] = *k;
    l->flags[l->n++] = ((const struct rnn_record *)v->record)->flags;
    return 0;
}

/* The cache kind's loaded hook (cache.h), on the loading thread and the context's stream:
 * synchronous, since the cuDNN handle, the stream (which a capture takes over) and the pool are
 * the context's, which the caller's thread uses. Each record of the context's settings, up to
 * the cache's free room, is prepared (prepare_one); one that fails is left to its first call.
 * The cost moves to the load: about a first call of each shape (0.8-171 ms measured for the
 * anchors' first steps) plus its captures. */
static void prepare_loaded(struct nn_ctx *ctx)
{
    struct loaded l;
    memset(&l, 0, sizeof l);
    l.c = nn__cudnn_plan_cache(ctx);
    nn__cache_settings_fill(ctx, &l.now);
    size_t cap = (size_t)nn__cache_capacity(l.c), live = nn__cache_size(l.c);
    l.cap = cap > live ? cap - live : 0;
    size_t known = nn__cache_known_count(l.c);
    if (l.cap > known) l.cap = known;
    if (!l.cap) return;
    l.keys = nn__host_alloc(l.cap * sizeof *l.keys);
    l.flags = nn__host_alloc(l.cap * sizeof *l.flags);
    struct nn__error_kept keep = nn__error_keep(ctx);
    if (l.keys && l.flags) nn__cache_visit(l.c, collect_loaded, &l);
    uint64_t t0 = nn__now_ns();
    int ready = 0, captured = 0, failed = 0;
    for (size_t i = 0; i < l.n; i++) {
        struct nn__rnn_problem p;
        problem_of_key(&l.keys[i], &p);
        int64_t numel;
        if (nn__rnn_weights_numel(&p, &numel) != 0) continue; /* build would refuse it */
        nn__cudnn_shared_enter(ctx);
        nn_status st = prepare_one(ctx, &p, l.flags[i], &captured);
        nn__cudnn_shared_leave(ctx);
        if (st == NN_OK) {
            ready++;
        } else {
            (void)cudaGetLastError();
            if (!failed++ && nn__verbose(ctx))
                nn__log("plan cache: preparing a recurrent shape failed, its first call builds "
                        "it: %s",
                        ctx->last_error.message);
        }
    }
    /* The preparation's GPU work is part of the load: left queued, it would delay the caller's
     * first calls on the device (and land in the first step a benchmark times). */
    if (l.n && cudaStreamSynchronize((cudaStream_t)ctx->stream) != cudaSuccess)
        (void)cudaGetLastError();
    if (nn__verbose(ctx) && l.n)
        nn__log("plan cache: %d recurrent shapes prepared (first calls done, %d with their graphs "
                "captured) in %.1f ms",
                ready, captured, (double)(nn__now_ns() - t0) / 1e6);
    nn__rnn_note_cache = NULL, nn__rnn_note_impl = NULL;
    nn__error_restore(ctx, &keep);
    nn__host_free(l.keys);
    nn__host_free(l.flags);
}

/* Tests read the records back (live ones first): kind 4 records of shapes with data. */
struct records_arg {
    int32_t *algo, *flags;
    int n, cap;
};

static int visit_record(void *arg, const struct nn__cache_kind *kind, const void *key,
                        const struct nn__cache_view *view)
{
    struct records_arg *a = arg;
    const struct rnn_key *k = key;
    const struct rnn_record *r = view->record;
    if (kind->id != NN__RNN_CUDNN_KIND_ID || k->n == 0) return 0;
    if (a->n < a->cap) a->algo[a->n] = r->algo, a->flags[a->n] = r->flags;
    a->n++;
    return 0;
}

int nn__rnn_cudnn_records(struct nn_ctx *ctx, int32_t *algo, int32_t *flags, int cap)
{
    struct records_arg a = {algo, flags, 0, cap};
    nn__cache_visit(nn__cudnn_plan_cache(ctx), visit_record, &a);
    return a.n;
}

/* The cuDNN recurrent path: building a shape's descriptors. */
#include <string.h>

#include "rnn/rnn_cudnn_internal.h"

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

/* The algorithm for a shape without a record. Small hidden sizes run the persistent small-h
 * algorithm: one kernel per layer and pass where the standard algorithm launches a matrix product
 * and an element-wise kernel per time step (docs/RNN.md, "Algorithm choice"). The bounds are
 * PyTorch's for running it in both passes (hidden at most 128 for LSTM and GRU, 256 for ReLU and
 * tanh cells; aten/src/ATen/native/cudnn/RNN.cpp), and so are the exclusions: double data
 * (unsupported), projections and lengths that are not all T (refused at the forward call, varied
 * ones and equal short ones alike: RNN.md trap 7). A descriptor-only entry (weight queries) is
 * standard: the weight views are asked of it, and the entry of a shape with data is built standard
 * when the persistent one lays the weights out otherwise or is refused
 * (nn__rnn_cudnn_build_heuristic). */
int nn__rnn_cudnn_choose_algo(const struct rnn_key *k)
{
    int64_t small = k->cell == NN_RNN_LSTM || k->cell == NN_RNN_GRU ? 128 : 256;
    if (k->n > 0 && k->dtype != NN_DTYPE_F64 && !k->proj &&
        k->lengths_kind == NN__RNN_LENGTHS_FULL && k->hidden <= small)
        return CUDNN_RNN_ALGO_PERSIST_STATIC_SMALL_H;
    return CUDNN_RNN_ALGO_STANDARD;
}

nn_status nn__rnn_cudnn_build_like(struct nn_ctx *ctx, const struct rnn_key *k,
                                   const struct nn__rnn_problem *p, const struct rnn_live *standard,
                                   const struct rnn_record *rec, struct rnn_live **out)
{
    *out = NULL;
    struct rnn_live *e;
    NN__TRY(nn__rnn_cudnn_build(ctx, k, p, rec, &e));
    /* Weight views come from a standard descriptor: an algorithm whose weight layout differed
     * would read the buffer wrongly. */
    if (e->weight_bytes == standard->weight_bytes &&
        !memcmp(e->offsets, standard->offsets,
                (size_t)(p->layers * p->dirs * 5) * sizeof *e->offsets)) {
        *out = e;
        return NN_OK;
    }
    nn__rnn_cudnn_live_destroy(e);
    return NN__FAIL(ctx, NN_E_UNSUPPORTED,
                    "nn_rnn (cuDNN): algorithm %d lays the weights out unlike the standard",
                    (int)rec->algo);
}

nn_status nn__rnn_cudnn_build_heuristic(struct nn_ctx *ctx, const struct rnn_key *k,
                                        const struct nn__rnn_problem *p, struct rnn_record *rec,
                                        struct rnn_live **out)
{
    rec->algo = nn__rnn_cudnn_choose_algo(k);
    if (rec->algo == CUDNN_RNN_ALGO_STANDARD) return nn__rnn_cudnn_build(ctx, k, p, rec, out);
    struct rnn_record standard = {CUDNN_RNN_ALGO_STANDARD, rec->flags};
    struct rnn_live *persist, *e;
    NN__TRY(nn__rnn_cudnn_build(ctx, k, p, &standard, &e));
    struct nn__error_kept keep = nn__error_keep(ctx);
    if (nn__rnn_cudnn_build_like(ctx, k, p, e, rec, &persist) == NN_OK) {
        nn__rnn_cudnn_live_destroy(e);
        *out = persist;
        return NN_OK;
    }
    /* a refusal is not the call's failure: it goes on with the standard descriptor */
    nn__error_restore(ctx, &keep);
    (void)cudaGetLastError();
    rec->algo = CUDNN_RNN_ALGO_STANDARD;
    rec->flags |= NN__RNN_REC_PERSIST_REFUSED;
    *out = e;
    return NN_OK;
}

nn_status nn__rnn_cudnn_set_data_descs(struct nn_ctx *ctx, struct rnn_live *e,
                                       const struct rnn_key *k, const int32_t *lengths)
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

nn_status nn__rnn_cudnn_build(struct nn_ctx *ctx, const struct rnn_key *k,
                              const struct nn__rnn_problem *p, const struct rnn_record *rec,
                              struct rnn_live **out)
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
        st = nn__rnn_cudnn_dropout_states(ctx, h, k->dropout, k->dropout_seed, &e->states);
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
    if (st == NN_OK) st = nn__rnn_cudnn_query_offsets(ctx, h, e, p);
    if (st == NN_OK && k->n) {
        st = nn__cudnn_CreateRNNDataDescriptor(ctx, &e->xd);
        if (st == NN_OK) st = nn__cudnn_CreateRNNDataDescriptor(ctx, &e->yd);
        if (st == NN_OK) st = nn__rnn_cudnn_set_data_descs(ctx, e, k, NULL);
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
        nn__rnn_cudnn_trial_init(ctx, e, U_INFER, rec->flags);
        nn__rnn_cudnn_trial_init(ctx, e, U_TRAIN, rec->flags);
        /* cuDNN's dropout draws from its random state; whether a replay advances it exactly as
         * the eager calls do was not measured, so training with dropout stays eager. */
        if (p->dropout > 0 && p->layers > 1)
            e->trial[U_TRAIN].phase = P_DECIDED, e->trial[U_TRAIN].replay = 0;
    }
    if (st != NN_OK) {
        nn__rnn_cudnn_live_destroy(e);
        return st;
    }
    *out = e;
    return NN_OK;
}

void nn__rnn_cudnn_note(const struct rnn_live *e, int replayed, struct nn__rnn_note *note)
{
    if (!note) return;
    static const char *const names[4][2] = {
        {"cudnn-standard", "cudnn-standard-replay"},
        {"cudnn-persist-static", "cudnn-persist-static-replay"},
        {"cudnn-persist-dynamic", "cudnn-persist-dynamic-replay"},
        {"cudnn-persist-small-h", "cudnn-persist-small-h-replay"}};
    int i = e->algo == CUDNN_RNN_ALGO_PERSIST_STATIC           ? 1
            : e->algo == CUDNN_RNN_ALGO_PERSIST_DYNAMIC        ? 2
            : e->algo == CUDNN_RNN_ALGO_PERSIST_STATIC_SMALL_H ? 3
                                                               : 0;
    note->impl = names[i][!!replayed];
}

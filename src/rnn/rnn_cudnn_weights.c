/* The cuDNN recurrent path: the packed weight buffer's size and the offsets of its views. */
#include <string.h>

#include "rnn/rnn_cudnn_internal.h"

/* Offsets of every view, from cudnnGetRNNWeightParams on a scratch weight space from the pool
 * (the call only does address arithmetic on it, but gets a real device pointer); the gates of one
 * side must sit back to back in PyTorch's order (measured on the H200, RNN.md), which is checked
 * here rather than assumed. */
nn_status nn__rnn_cudnn_query_offsets(struct nn_ctx *ctx, cudnnHandle_t h, struct rnn_live *e,
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

nn_status nn__rnn_weights_size_cudnn(struct nn_ctx *ctx, const struct nn__rnn_problem *p,
                                     int64_t *numel, struct nn__rnn_note *note)
{
    /* Inside a call (n > 0) the call's own entry answers, so a call builds one entry. */
    struct rnn_live *e;
    NN__TRY(nn__rnn_cudnn_entry_get(ctx, p, p->n > 0, note, &e));
    *numel = (int64_t)(e->weight_bytes / nn_dtype_size(p->dtype));
    return NN_OK;
}

nn_status nn__rnn_weight_offset_cudnn(struct nn_ctx *ctx, const struct nn__rnn_problem *p,
                                      int64_t pseudo, nn_rnn_weight_name name, int64_t *offset)
{
    struct rnn_live *e;
    NN__TRY(nn__rnn_cudnn_entry_get(ctx, p, 0, NULL, &e));
    *offset = e->offsets[pseudo * 5 + name];
    return NN_OK;
}

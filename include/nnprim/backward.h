/*
 * nnprim: options of a backward call, shared by every op family with a pullback (conv, pool,
 * linear, softmax, softmax cross-entropy, layernorm, rnn).
 *
 * An autograd engine decides at backward time whether a gradient is written or added to (a
 * tensor used twice in the graph, micro-batches summed into one weight gradient), and may run a
 * backward twice through one forward (double backward, a retried step). Each family's
 * `*_backward_ex()` call takes these options; its plain `*_backward()` call is the same call
 * with opts NULL: every gradient is overwritten and the pullback is consumed.
 *
 * nn_accumulate is the one vocabulary of accumulation: the options' `accumulate`, and the
 * `unsigned accumulate` argument of the calls without a pullback (nn_conv_backward_data,
 * _filter and _bias, nn_pool_backward_stateless, nn_conv_workspace_size and
 * nn_linear_workspace_size). No params struct holds any.
 *
 * The bits of `accumulate` name gradients by role; a family takes the ones it has:
 *   conv, linear        NN_ACCUMULATE_DX, NN_ACCUMULATE_DW, NN_ACCUMULATE_DB
 *   pool, softmax,
 *   softmax cross-entropy  NN_ACCUMULATE_DX
 *   layernorm           NN_ACCUMULATE_DX, NN_ACCUMULATE_DW (dgamma), NN_ACCUMULATE_DB (dbeta)
 *   rnn                 NN_ACCUMULATE_DW (cuDNN's RNN data gradients have no accumulating form)
 * A bit outside this list is NN_E_INVALID_ARG; a bit the family names but cannot honour (rnn's
 * dx) is NN_E_UNSUPPORTED. Each message names the called function and opts.accumulate (or
 * accumulate).
 */
#ifndef NNPRIM_BACKWARD_H
#define NNPRIM_BACKWARD_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/** Bits of nn_backward_options.accumulate and of the calls' `accumulate` arguments: which
 *  gradients are added to (g += gradient) instead of overwritten (g = gradient). */
enum nn_accumulate {
    NN_ACCUMULATE_DX = 1 << 0, /**< the data gradient (dx) */
    NN_ACCUMULATE_DW = 1 << 1, /**< the weight / filter gradient (dw) */
    NN_ACCUMULATE_DB = 1 << 2  /**< the bias gradient (db) */
};

/**
 * Options of a `*_backward_ex()` call. Zero-initialise (`nn_backward_options o = {0};`), then set
 * what you need. Read during the call only.
 */
typedef struct nn_backward_options {
    /** OR of nn_accumulate bits (0: overwrite every gradient). */
    unsigned accumulate;
    /** 0: the pullback is consumed (freed, *pullback set to NULL) as by `*_backward()`.
     *  1: it stays live and unchanged, for another backward call (with other gradients, other
     *  options, or the same ones); free it with the family's `*_pullback_free()`. The caller
     *  keeps the forward's tensors alive and unchanged for as long as it keeps the pullback.
     *  RNN pullbacks are single-use: keep = 1 there is NN_E_UNSUPPORTED. */
    int keep;
    uint64_t reserved[4]; /**< zero (NN_E_INVALID_ARG otherwise, naming the index) */
} nn_backward_options;

#ifdef __cplusplus
}
#endif

#endif /* NNPRIM_BACKWARD_H */

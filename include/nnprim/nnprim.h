/*
 * nnprim: neural-network primitives for NVIDIA GPUs, with a plain-C reference backend.
 *
 * Include this header for the whole API. Each subject has its own header:
 *   version.h  NNPRIM_VERSION_MAJOR/MINOR/PATCH: the headers' version, at compile time
 *   status.h   status codes, nn_status_string(), the last-error record
 *   context.h  version, build features, devices, settings, nn_ctx
 *   tensor.h   nn_tensor views, allocation, wrapping, copies and fills
 *   pool.h     max and mean pooling, forward and backward
 *   backward.h options of the *_backward_ex() calls: accumulate chosen at backward time, keep
 *   activation.h  the activations conv and linear fuse after the bias (nn_activation)
 *   plan_cache.h  the context's plan cache: save, load, clear, statistics
 *   mem.h      the device memory pool: settings, statistics, trim, event log, raw allocations
 *   conv.h     convolution forward and backward, pullbacks
 *   rnn.h      recurrent layers (RNN, LSTM, GRU) forward and backward, packed weights, pullbacks
 *   linear.h   the dense layer y = act(x w^T + b), forward and backward, pullbacks
 *   softmax.h  softmax, log-softmax and softmax cross-entropy, forward and backward
 *   optim.h    fused optimizer updates: SGD (momentum, Nesterov), Adam, AdamW, gradient clipping
 *   graph.h    a training step captured once as one CUDA graph and launched many times
 */
#ifndef NNPRIM_NNPRIM_H
#define NNPRIM_NNPRIM_H

/* Generated: in the build tree it is under the build directory's include/nnprim/. */
#include <nnprim/version.h>
#include "status.h"
#include "context.h"
#include "tensor.h"
#include "backward.h"
#include "activation.h"
#include "pool.h"
#include "plan_cache.h"
#include "mem.h"
#include "conv.h"
#include "rnn.h"
#include "linear.h"
#include "softmax.h"
#include "layernorm.h"
#include "optim.h"
#include "dlpack.h"
#include "graph.h"

#endif /* NNPRIM_NNPRIM_H */

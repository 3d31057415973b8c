/*
 * nnprim: neural-network primitives for NVIDIA GPUs, with a plain-C reference backend.
 *
 * Include this header for the whole API. Each subject has its own header:
 *   status.h   status codes, nn_strerror(), the last-error record
 *   context.h  version, build features, devices, settings, nn_ctx
 *   tensor.h   nn_tensor views, allocation, wrapping, copies and fills
 *   pool.h     max and mean pooling, forward and backward
 *   plan_cache.h  the context's plan cache: save, load, clear, statistics
 *   mem.h      the device memory pool: settings, statistics, trim, event log, raw allocations
 *   conv.h     convolution forward and backward, pullbacks
 */
#ifndef NNPRIM_NNPRIM_H
#define NNPRIM_NNPRIM_H

#include "status.h"
#include "context.h"
#include "tensor.h"
#include "pool.h"
#include "plan_cache.h"
#include "mem.h"
#include "conv.h"
#include "linear.h"
#include "softmax.h"

#endif /* NNPRIM_NNPRIM_H */

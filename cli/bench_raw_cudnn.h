/* The raw-cuDNN rows of `nnprim bench conv`: the plan an nnprim forward call executes, run again
 * through plain cudnnBackendExecute with a variant pack built once, so the difference from
 * nnprim's figures is nnprim's own per-call cost. */
#ifndef NN_CLI_BENCH_RAW_CUDNN_H
#define NN_CLI_BENCH_RAW_CUDNN_H

#include "nnprim/nnprim.h"

struct nn_raw_plan;

/* Run nn_conv_forward(ctx, params, x, w, b, y, NULL) once and take the plan it executed, with its
 * tensors. Returns NULL when the call fails, ran no graph plan, or cuDNN refuses the variant
 * pack (with a line on stderr for the last). */
struct nn_raw_plan *nn_raw_plan_take(nn_ctx *ctx, const nn_conv_params *params, const nn_tensor *x,
                                     const nn_tensor *w, const nn_tensor *b, nn_tensor *y);

/* Median GPU time (CUDA events) of one execute after warmup executes, in microseconds; host
 * time to issue one execute (nn_cli_host_median_us, reps executes in batches). Negative on
 * failure. */
double nn_raw_plan_gpu_us(struct nn_raw_plan *r, int warmup, int reps);
double nn_raw_plan_host_us(struct nn_raw_plan *r, int reps);

void nn_raw_plan_free(struct nn_raw_plan *r);

#endif

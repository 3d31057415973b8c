/* The raw-cuDNN rows of `nnprim bench conv`: the plan nnprim's last forward call on this thread
 * executed, run again through plain cudnnBackendExecute with a variant pack built once, so the
 * difference from nnprim's figures is nnprim's own per-call cost. */
#ifndef NN_CLI_BENCH_RAW_CUDNN_H
#define NN_CLI_BENCH_RAW_CUDNN_H

#include "nnprim/nnprim.h"

struct nn_raw_plan;

/* Take the last forward's plan (call nn_conv_forward on ctx first). Returns NULL with a line on
 * stderr when there is none or cuDNN refuses the variant pack. */
struct nn_raw_plan *nn_raw_plan_take(nn_ctx *ctx);

/* Median GPU time (CUDA events) of one execute after warmup executes, in microseconds; host
 * wall time per execute of reps back-to-back executes and one synchronisation. Negative on
 * failure. */
double nn_raw_plan_gpu_us(struct nn_raw_plan *r, int warmup, int reps);
double nn_raw_plan_host_us(struct nn_raw_plan *r, int reps);

void nn_raw_plan_free(struct nn_raw_plan *r);

#endif

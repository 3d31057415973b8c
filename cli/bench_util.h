/* What the benchmarks share: a host clock, the median, GPU and host timers. */
#ifndef NN_CLI_BENCH_UTIL_H
#define NN_CLI_BENCH_UTIL_H

/* Monotonic host time in microseconds. */
double nn_cli_now_us(void);

/* The median of v[0..n) (n >= 1; the mean of the middle two for even n). Sorts v. */
double nn_cli_median(double *v, int n);

/* The median GPU time in microseconds of reps calls of fn(arg) (which returns 0 on success),
 * each between its own CUDA event pair on stream (a cudaStream_t), issued back to back with one
 * synchronisation at the end: the host cost of a call overlaps the GPU work queued before it,
 * as in PyTorch's CUDA-event benchmarks (bench/torch_conv.py), so both sides are timed alike.
 * Returns -1 on any failure. Needs CUDA (-1 in a build without it). */
double nn_cli_gpu_median_us(void *stream, int reps, int (*fn)(void *), void *arg);

/* The GPU time in microseconds of each of reps calls of fn(arg) (0 on success), into
 * out[0..reps), as nn_cli_gpu_median_us times them; with hold nonzero, the GPU's part alone: the
 * stream is held (a host function that waits) while each chunk of NN_CLI_HELD_CHUNK calls is
 * queued, and released once it is, so that a chunk's calls run back to back on the GPU whatever
 * the host's cost of issuing them (that cost is host time's figure, nn_cli_host_median_us). The
 * hold is NVBench's blocking kernel, made of cudaLaunchHostFunc. *held (if held is not NULL) is
 * set to 0 when a hold ran out (after 2 s: the launch queue filled before its chunk was queued,
 * and that chunk's calls waited on the host as nn_cli_gpu_median_us's do), or the build has no
 * CUDA; else left as it was. Returns 0, or -1 on any failure. */
#define NN_CLI_HELD_CHUNK 16
int nn_cli_gpu_times_us(void *stream, int reps, int (*fn)(void *), void *arg, int hold, int *held,
                        double *out);

/* Sides of a benchmark taking turns, so that a GPU whose speed drifts during the run (clocks,
 * power, temperature) weighs on each alike: NN_CLI_ROUNDS rounds (reps of them when reps is
 * smaller), round r led by side r % nsides and the others after it in order, each side's shares
 * of the rounds summing to reps. turn(arg, side, round, share) runs one turn (round 0's after the
 * side's warm-up, the later ones after one untimed call: the turn's own calls) and returns 0, or
 * nonzero when the side failed, which drops it from the later rounds. ok[side]: in, whether the
 * side runs; out, whether every turn of it succeeded. */
#define NN_CLI_ROUNDS 6
void nn_cli_take_turns(int nsides, int reps, int *ok,
                       int (*turn)(void *arg, int side, int round, int share), void *arg);

/* The median host time in microseconds per call of fn(arg) (0 on success), issued in batches of
 * NN_CLI_HOST_BATCH calls with sync(sync_arg) between batches, outside the timed part: only the
 * issuing is timed. Calls issued back to back with one synchronisation at the end would measure
 * the GPU's time per call instead wherever that is the larger (the launch queue fills and the
 * host waits on it), which hides the host cost of a tiny op. reps calls in all (at least one
 * batch). Returns -1 on any failure. */
#define NN_CLI_HOST_BATCH 32
double nn_cli_host_median_us(int reps, int (*fn)(void *), void *arg, int (*sync)(void *),
                             void *sync_arg);

#endif

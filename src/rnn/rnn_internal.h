/* The recurrent op's internal interface: the validated problem rnn.c hands to a backend, the
 * arguments of one call, and the backend entry points (_ref in rnn_ref.c, _cudnn in
 * rnn_cudnn_*.c).
 *
 * rnn.c has checked everything before a backend is called: parameters, every dim against them,
 * dtypes (all tensors share p->dtype), memory spaces, that every tensor is fully packed
 * row-major, lengths in [0, T], and that outputs overlap nothing else of the call. */
#ifndef NN_RNN_RNN_INTERNAL_H
#define NN_RNN_RNN_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "nn_config.h"

#include "cudnn/cache_kinds.h"
#include "nnprim/rnn.h"

struct nn_ctx;
struct nn__cache_kind;

/* One recurrent problem, resolved. Plain values only (no pointers), zeroed before filling, so it
 * can serve as a cache key compared with memcmp. Lengths are per call and not part of it;
 * lengths_kind says how they run (cuDNN's persistent algorithms refuse any but full ones). */
struct nn__rnn_problem {
    nn_rnn_cell cell;
    int64_t t, n;          /* time steps, sequences */
    int64_t input, hidden; /* I, H */
    int64_t proj;          /* P, 0 = none */
    int64_t out;           /* O = P or H: the width of h */
    int64_t layers;        /* L */
    int dirs;              /* D: 1 or 2 */
    int gates;             /* G: 1, 4 or 3 */
    nn_rnn_bias_mode bias_mode;
    nn_rnn_input_mode input_mode;
    nn_rnn_layout layout;
    double dropout;
    uint64_t dropout_seed;
    int clip_enabled;
    double clip_lo, clip_hi;
    nn_dtype dtype;
    nn_math_mode math; /* the context's; TF32 only matters for f32 on cuDNN */
    int deterministic; /* the context's */
    int lengths_kind;  /* this call's, NN__RNN_LENGTHS_* */
};

/* How a call's sequence lengths run. The values are plan-file key values: never renumber. */
enum {
    NN__RNN_LENGTHS_FULL = 0,   /* every sequence is T long (no lengths, or all T) */
    NN__RNN_LENGTHS_VARIED = 1, /* they differ from one another */
    NN__RNN_LENGTHS_SHORT = 2,  /* all equal, shorter than T */
};

/* Width of layer l's input: I for layer 0, D*O above. */
static inline int64_t nn__rnn_layer_input(const struct nn__rnn_problem *p, int64_t layer)
{
    return layer == 0 ? p->input : p->dirs * p->out;
}

/* Whether a weight view exists for these parameters, and its dims (rank 1 or 2). */
int nn__rnn_view_exists(const struct nn__rnn_problem *p, int64_t layer, nn_rnn_weight_name name);
int nn__rnn_view_dims(const struct nn__rnn_problem *p, int64_t layer, nn_rnn_weight_name name,
                      int64_t *dims);

/* Elements of one direction of layer l (the sum of its views), -1 if that overflows int64; and of
 * the whole buffer as the reference lays it out (0, or -1 on overflow). rnn.c refuses parameters
 * whose count overflows before a backend is called. */
int64_t nn__rnn_layer_numel(const struct nn__rnn_problem *p, int64_t layer);

/* a * b * c * d fits int (all >= 0), computed without overflow: cuDNN's RNN calls take int sizes
 * and int products of them. */
int nn__rnn_product_fits_int(int64_t a, int64_t b, int64_t c, int64_t d);
int nn__rnn_weights_numel(const struct nn__rnn_problem *p, int64_t *out);

/* The problem as text in the CLI syntax (include/nnprim/rnn.h, docs/RNN.md); lengths NULL = all
 * T. Always NUL-terminated; truncated to cap. */
void nn__rnn_problem_text(const struct nn__rnn_problem *p, const int32_t *lengths, char *buf,
                          size_t cap);

/* The tensors of one call. Absent optional tensors are NULL; lengths NULL means all T. Forward
 * reads x, hx, cx, w and writes y, hy, cy; backward reads x, hx, cx, w, y, dy, dhy, dcy and
 * writes dx, dhx, dcx, dw (dw added to when accumulate is set). */
struct nn__rnn_io {
    const nn_tensor *x, *hx, *cx, *w, *y;
    nn_tensor *y_out, *hy, *cy;
    const int32_t *lengths;
    const nn_tensor *dy, *dhy, *dcy;
    nn_tensor *dx, *dhx, *dcx, *dw;
    int training;   /* forward: a pullback was asked for (dropout applies) */
    int accumulate; /* backward: dw += (nn_rnn_backward_ex() asked NN_ACCUMULATE_DW) */
};

/* What a backend tells the verbose line of one op call: rnn.c puts it on its stack, zeroed at
 * the start of the call, hands it to the backend calls (weights_size, forward, backward) and
 * prints it. Static strings only. A backend call that prints no line gets NULL. */
struct nn__rnn_note {
    /* What ran ("cudnn-standard", "cudnn-standard-replay"); NULL prints the backend's name.
     * rnn.c clears it before dispatching, so the line names the pass that ran. */
    const char *impl;
    /* Where the call's shape came from, the line's cache field: "hit", "rebuilt" (from a known
     * record), "heuristic", "autotuned:<algorithm>+<eager|replay>" (the pair autotune chose), or
     * "prepared" (the first call of a shape that a plan file's load prepared). Set at the call's
     * first lookup only (nn__rnn_note_cache); NULL prints "-". */
    const char *cache;
};

/* Sets note->cache unless the call's first lookup has already (note NULL: nothing). */
static inline void nn__rnn_note_cache(struct nn__rnn_note *note, const char *cache)
{
    if (note && !note->cache) note->cache = cache;
}

/* The first of p's sizes (or products of them) beyond int, which cuDNN's RNN calls take, as the
 * argument it comes from ("p.input_size", "x's N", ...), its value in *value; NULL when all fit.
 * The calls' checks and the build of a record read from a plan file both ask it. */
const char *nn__rnn_beyond_int(const struct nn__rnn_problem *p, int64_t *value);

/* A cell's gate count (4 LSTM, 3 GRU, 1 RELU and TANH) and the size of h (proj when it is not 0,
 * else hidden): one rule for the checks, the reference and the cuDNN keys. */
int nn__rnn_gates(nn_rnn_cell cell);
int64_t nn__rnn_out_size(int64_t hidden, int64_t proj);

/* Whether a shape replays, from the cost of its calls eager and replayed (< 0 or NaN: not
 * measured): replay must be measured, and cheaper by more than NN__RNN_REPLAY_MARGIN of the eager
 * cost where that was measured too. The margin covers what measuring misjudges (two timings of
 * identical work differ by up to 3% on the H200) and that a graph that merely ties still costs
 * its capture and staging memory; real wins measured 0.91 and below (docs/PERFORMANCE.md).
 * Here, with no cuDNN in it, so that the CPU tests reach it; auto's trials and autotune use it. */
#define NN__RNN_REPLAY_MARGIN 0.03
int nn__rnn_replay_pays(double eager, double replay);

/* Autotune's (algorithm, mode) pair: candidate i's training step took eager_ms[i] eager and
 * replay_ms[i] replayed, < 0 (or NaN) where it was not measured (the mode not allowed, the
 * algorithm refused, a capture failed). The cheapest replayed candidate wins where its figure
 * pays against the cheapest eager one (nn__rnn_replay_pays), else the cheapest eager one; a tie
 * goes to the earlier candidate. Returns the winner's index and sets *replay, or returns -1 (and
 * leaves *replay) when nothing was measured. */
int nn__rnn_tune_pick(int n, const double *eager_ms, const double *replay_ms, int *replay);

/* Backend entry points; each returns NN_OK or a recorded failure, and queues its work on the
 * context's stream (the _ref ones finish before returning). note: the op call's verbose note
 * (struct nn__rnn_note), NULL outside an op call.
 *   weights_size:  the element count of the packed buffer
 *   weight_offset: where view (layer * D + direction, name) starts in the buffer, in elements;
 *                  called only for views that exist (nn__rnn_view_exists)
 *   forward:       state NULL for inference; otherwise *state receives what backward needs
 *   backward:      consumes nothing: rnn.c frees the state after a successful call
 *   state_free:    NULL state is a no-op
 *   workspace:     the pool bytes one eager call of the pass holds at its peak (rnn.h) */
nn_status nn__rnn_weights_size_ref(struct nn_ctx *ctx, const struct nn__rnn_problem *p,
                                   int64_t *numel, struct nn__rnn_note *note);
nn_status nn__rnn_weight_offset_ref(struct nn_ctx *ctx, const struct nn__rnn_problem *p,
                                    int64_t pseudo, nn_rnn_weight_name name, int64_t *offset);
nn_status nn__rnn_forward_ref(struct nn_ctx *ctx, const struct nn__rnn_problem *p,
                              const struct nn__rnn_io *io, void **state, struct nn__rnn_note *note);
nn_status nn__rnn_backward_ref(struct nn_ctx *ctx, const struct nn__rnn_problem *p, void *state,
                               const struct nn__rnn_io *io, struct nn__rnn_note *note);
void nn__rnn_state_free_ref(struct nn_ctx *ctx, void *state);
nn_status nn__rnn_workspace_ref(struct nn_ctx *ctx, const struct nn__rnn_problem *p,
                                nn_rnn_pass pass, size_t *bytes);

/* The flags of a shape's record (saved in the plan file with its algorithm): what auto mode
 * decided about graph replay and what the algorithm choice found. */
enum {
    NN__RNN_REC_INFER_EAGER = 1,      /* inference forwards measured faster eager */
    NN__RNN_REC_INFER_REPLAY = 2,     /* ... faster replayed */
    NN__RNN_REC_TRAIN_EAGER = 4,      /* training steps (forward + backward) faster eager */
    NN__RNN_REC_TRAIN_REPLAY = 8,     /* ... faster replayed */
    NN__RNN_REC_PERSIST_REFUSED = 16, /* a persistent algorithm was refused for the shape */
    NN__RNN_REC_TUNED = 32,           /* the algorithm was timed (NNPRIM_TUNING=autotune) */
    /* Which optional tensors the training calls passed when their graphs were captured (the
     * forward's: 1 hx, 2 cx, 4 hy, 8 cy; the backward's: 1 hx, 2 cx, 4 dy, 8 dhy, 16 dcy, 32 dx,
     * 64 dhx, 128 dcx, 256 dw, 512 accumulate), so that a plan file's load captures the graphs
     * of the same calls (rnn_cudnn_plan.c, nn__rnn_cudnn_prepare_loaded). */
    NN__RNN_REC_FWD_SIG = 64,  /* bits FWD_SHIFT.. hold the forward's */
    NN__RNN_REC_BWD_SIG = 128, /* bits BWD_SHIFT.. hold the backward's */
    NN__RNN_REC_FWD_SHIFT = 8,
    NN__RNN_REC_BWD_SHIFT = 12,
    NN__RNN_REC_ALL = (1 << 22) - 1
};
/* For tests (rnn_cudnn_cache.c, cuDNN builds only): the algorithm (cudnnRNNAlgo_t) and flags of
 * every record of shapes with data in the context's cache, live ones first, up to cap of them;
 * returns how many there are. */
int nn__rnn_cudnn_records(struct nn_ctx *ctx, int32_t *algo, int32_t *flags, int cap);

#if NN_HAVE_CUDNN
/* rnn_cudnn_*.c: the v8 calls, per-shape descriptors in the context's generic cache (kinds
 * NN__RNN_CUDNN_KIND_ID and NN__RNN_CUDNN_DROPOUT_KIND_ID of cudnn/cache_kinds.h, both listed in
 * src/context.c's table). The same contracts as the _ref functions; *state is the reserve space,
 * which the backward call reads and changes (so a pullback is single-use). */
extern const struct nn__cache_kind nn__rnn_cudnn_kind;
extern const struct nn__cache_kind nn__rnn_cudnn_dropout_kind;
nn_status nn__rnn_weights_size_cudnn(struct nn_ctx *ctx, const struct nn__rnn_problem *p,
                                     int64_t *numel, struct nn__rnn_note *note);
nn_status nn__rnn_weight_offset_cudnn(struct nn_ctx *ctx, const struct nn__rnn_problem *p,
                                      int64_t pseudo, nn_rnn_weight_name name, int64_t *offset);
nn_status nn__rnn_forward_cudnn(struct nn_ctx *ctx, const struct nn__rnn_problem *p,
                                const struct nn__rnn_io *io, void **state,
                                struct nn__rnn_note *note);
nn_status nn__rnn_backward_cudnn(struct nn_ctx *ctx, const struct nn__rnn_problem *p, void *state,
                                 const struct nn__rnn_io *io, struct nn__rnn_note *note);
void nn__rnn_state_free_cudnn(struct nn_ctx *ctx, void *state);
nn_status nn__rnn_workspace_cudnn(struct nn_ctx *ctx, const struct nn__rnn_problem *p,
                                  nn_rnn_pass pass, size_t *bytes);
#endif

#endif

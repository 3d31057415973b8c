/* What the files of the cuDNN recurrent path (rnn_cudnn_*.c, one per subject) share: the cache
 * key and record, the live entry of a shape and its replay state, and the functions that cross
 * files.
 *
 * The path runs on the v8 calls (RNNs are not in the graph API). Per shape, one entry
 * of the context's generic cache holds the RNN, data, h and c descriptors, the dropout state, the
 * weight-space size and view offsets (asked of cuDNN once) and the temp-space sizes; its record is
 * the algorithm, so it persists in the plan file. Per call: the workspace comes from the pool and
 * goes back, the reserve space comes from the pool and lives in the pullback, and nothing
 * synchronises the host. ../shared/design/RNN.md lists the traps these files handle (docs/RNN.md
 * says how). */
#ifndef NN_RNN_CUDNN_INTERNAL_H
#define NN_RNN_CUDNN_INTERNAL_H

#include <stddef.h>

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

/* A problem as plain fields. t = n = 0 is a descriptor-only entry (weight layout queries). */
struct rnn_key {
    int32_t cell, bias_mode, input_mode, layout, dirs, dtype, clip_enabled, lengths_kind;
    int64_t t, n, input, hidden, proj, layers;
    double dropout, clip_lo, clip_hi;
    uint64_t dropout_seed;
    struct nn__cache_settings s;
};

struct rnn_record {
    int32_t algo;  /* cudnnRNNAlgo_t */
    int32_t flags; /* NN__RNN_REC_*; files written before these bits existed hold 0 */
};

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

struct fwd_io {
    const void *x, *hx, *cx, *w;
    void *y, *hy, *cy, *ws, *reserve; /* reserve NULL: inference */
    size_t reserve_bytes;
};

struct bwd_io {
    const void *x, *hx, *cx, *w, *y, *dhy, *dcy;
    void *dy, *dx, *dhx, *dcx, *dw, *ws, *reserve;
    size_t reserve_bytes;
    int zero_dy; /* dy is a scratch buffer to clear (the caller passed none) */
    int weights; /* run backward-weights into dw */
    int zero_dw; /* overwrite: clear dw first */
};

/* The launches of one call on raw pointers (fwd_launch, bwd_launch), as captured. */
typedef nn_status (*launch_fn)(struct nn_ctx *ctx, cudnnHandle_t h, const struct nn__rnn_problem *p,
                               const struct rnn_live *e, const void *arg);

/* rnn_cudnn_cache.c */
void nn__rnn_cudnn_live_destroy(void *p);
void nn__rnn_cudnn_key_of(struct nn_ctx *ctx, const struct nn__rnn_problem *p, int with_data,
                          struct rnn_key *k);
nn_status nn__rnn_cudnn_entry_get(struct nn_ctx *ctx, const struct nn__rnn_problem *p,
                                  int with_data, struct nn__rnn_note *note, struct rnn_live **out);

/* rnn_cudnn_dropout.c */
void nn__rnn_cudnn_states_unref(struct drop_states *d);
nn_status nn__rnn_cudnn_dropout_states(struct nn_ctx *ctx, cudnnHandle_t h, double dropout,
                                       uint64_t seed, struct drop_states **out);

/* rnn_cudnn_replay.c */
void nn__rnn_cudnn_reserve_unref(struct reserve *rs);
void nn__rnn_cudnn_drop_graphs(struct rnn_live *e, int unit);
void nn__rnn_cudnn_trial_init(struct nn_ctx *ctx, struct rnn_live *e, int unit, int32_t flags);
int nn__rnn_cudnn_can_replay(const struct nn_ctx *ctx, const struct rnn_live *e);
nn_status nn__rnn_cudnn_stage_alloc(struct nn_ctx *ctx, const struct rnn_live *e, int with_ws,
                                    struct stage *g);
nn_status nn__rnn_cudnn_capture(struct nn_ctx *ctx, cudnnHandle_t h,
                                const struct nn__rnn_problem *p, struct rnn_live *e, launch_fn fn,
                                const void *arg, cudaGraph_t *out);
int nn__rnn_cudnn_replay_wanted(const struct nn_ctx *ctx, const struct rnn_live *e, int unit);
void nn__rnn_cudnn_disable_replay(struct rnn_live *e, const char *why);
nn_status nn__rnn_cudnn_forward_replay(struct nn_ctx *ctx, cudnnHandle_t h,
                                       const struct nn__rnn_problem *p, struct rnn_live *e,
                                       const struct nn__rnn_io *io, int training,
                                       struct reserve **rs, int *done);
nn_status nn__rnn_cudnn_backward_replay(struct nn_ctx *ctx, cudnnHandle_t h,
                                        const struct nn__rnn_problem *p, struct rnn_live *e,
                                        const struct reserve *rs, const struct nn__rnn_io *io,
                                        int *done);
int nn__rnn_cudnn_trial_start(struct nn_ctx *ctx, struct rnn_live *e, int unit);
void nn__rnn_cudnn_trial_end(struct nn_ctx *ctx, const struct nn__rnn_problem *p,
                             struct rnn_live *e, int unit, int pass, int measuring);

/* rnn_cudnn_desc.c */
int nn__rnn_cudnn_choose_algo(const struct rnn_key *k);
/* An entry of rec's algorithm that lays the weights out as standard (an entry of the same shape)
 * does: its weight space size and every view's offset alike; else NN_E_UNSUPPORTED, nothing
 * built. */
nn_status nn__rnn_cudnn_build_like(struct nn_ctx *ctx, const struct rnn_key *k,
                                   const struct nn__rnn_problem *p, const struct rnn_live *standard,
                                   const struct rnn_record *rec, struct rnn_live **out);
/* The entry of a shape without a record: nn__rnn_cudnn_choose_algo's algorithm, or the standard
 * one (rec->flags gets NN__RNN_REC_PERSIST_REFUSED) when cuDNN refuses the persistent one or it
 * lays the weights out unlike the standard descriptor. rec->algo says which was built. */
nn_status nn__rnn_cudnn_build_heuristic(struct nn_ctx *ctx, const struct rnn_key *k,
                                        const struct nn__rnn_problem *p, struct rnn_record *rec,
                                        struct rnn_live **out);
nn_status nn__rnn_cudnn_set_data_descs(struct nn_ctx *ctx, struct rnn_live *e,
                                       const struct rnn_key *k, const int32_t *lengths);
nn_status nn__rnn_cudnn_build(struct nn_ctx *ctx, const struct rnn_key *k,
                              const struct nn__rnn_problem *p, const struct rnn_record *rec,
                              struct rnn_live **out);
void nn__rnn_cudnn_note(const struct rnn_live *e, int replayed, struct nn__rnn_note *note);

/* rnn_cudnn_weights.c */
nn_status nn__rnn_cudnn_query_offsets(struct nn_ctx *ctx, cudnnHandle_t h, struct rnn_live *e,
                                      const struct nn__rnn_problem *p);

/* rnn_cudnn_launch.c */
nn_status nn__rnn_cudnn_fwd_launch(struct nn_ctx *ctx, cudnnHandle_t h,
                                   const struct nn__rnn_problem *p, const struct rnn_live *e,
                                   const void *arg);
nn_status nn__rnn_cudnn_bwd_launch(struct nn_ctx *ctx, cudnnHandle_t h,
                                   const struct nn__rnn_problem *p, const struct rnn_live *e,
                                   const void *arg);
struct fwd_io nn__rnn_cudnn_fwd_io_of(const struct nn__rnn_io *io, void *ws,
                                      const struct reserve *rs);
struct bwd_io nn__rnn_cudnn_bwd_io_of(const struct nn__rnn_io *io, void *ws,
                                      const struct reserve *rs, void *dy0, void *dx0);

/* rnn_cudnn_tune.c */
nn_status nn__rnn_cudnn_tune(struct nn_ctx *ctx, const struct rnn_key *k,
                             const struct nn__rnn_problem *p, struct rnn_record *rec,
                             struct nn__rnn_note *note, struct rnn_live **out);

/* rnn_cudnn_calls.c */
nn_status nn__rnn_cudnn_reserve_new(struct nn_ctx *ctx, const struct rnn_live *e,
                                    struct reserve **out);
nn_status nn__rnn_cudnn_forward_eager(struct nn_ctx *ctx, cudnnHandle_t h,
                                      const struct nn__rnn_problem *p, const struct rnn_live *e,
                                      const struct nn__rnn_io *io, struct reserve *rs);
nn_status nn__rnn_cudnn_backward_eager(struct nn_ctx *ctx, cudnnHandle_t h,
                                       const struct nn__rnn_problem *p, const struct rnn_live *e,
                                       const struct reserve *rs, const struct nn__rnn_io *io);

/* rnn_cudnn_plan.c */
void nn__rnn_cudnn_prepare_loaded(struct nn_ctx *ctx);

#endif /* NN_RNN_CUDNN_INTERNAL_H */

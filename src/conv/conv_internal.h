/* The convolution op's internal interface: the validated problem conv.c hands to a backend, and
 * the backend entry points (_ref in conv_ref.c, _cudnn in conv_cudnn.c).
 *
 * conv.c has checked everything before a backend is called: ranks, dims, dtypes (all tensors of
 * the call share p->dtype), memory spaces (host for _ref, the context's device for _cudnn),
 * layouts, and that outputs are distinct from inputs. x, w, y, dx, dw and dy reach a backend
 * fully packed in one of two layouts, with the canonical strides of that layout
 * (nn__conv_layout_strides(): a dim of 1 has the stride the layout gives it, not the caller's):
 * NCHW order (row-major) or channels-last (NHWC / NDHWC / NWC, and KRSC for filters); p->nhwc
 * says which. The bias and db views are packed: rank 1 (K) or rank p->nsp + 2 (1 x K x 1 ...),
 * which address the same K contiguous elements. Tensors keep their caller's rank (p->nsp + 2);
 * a backend that needs rank >= 4 (cuDNN for 1-D) unsqueezes itself. */
#ifndef NN_CONV_CONV_INTERNAL_H
#define NN_CONV_CONV_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "nn_config.h"
#include "nnprim/conv.h"

struct nn_ctx;

/* One convolution, all of it resolved. Plain values only (no pointers), zeroed before filling
 * (unused array entries are 0), so it can be hashed or compared with memcmp as a plan-cache key
 * part. Spatial arrays are in D, H, W order, the first nsp entries used. */
struct nn__conv_problem {
    int nsp;                           /* spatial rank, 1..3 */
    int64_t n;                         /* batch */
    int64_t c;                         /* input channels (all groups) */
    int64_t k;                         /* output channels (all groups) */
    int64_t groups;                    /* divides c and k; filter dims[1] = c / groups */
    int64_t in[NN_CONV_MAX_SPATIAL];   /* x spatial sizes */
    int64_t filt[NN_CONV_MAX_SPATIAL]; /* w spatial sizes */
    int64_t out[NN_CONV_MAX_SPATIAL];  /* y spatial sizes */
    int64_t stride[NN_CONV_MAX_SPATIAL];
    int64_t dilation[NN_CONV_MAX_SPATIAL];
    int64_t pad_lo[NN_CONV_MAX_SPATIAL];
    int64_t pad_hi[NN_CONV_MAX_SPATIAL];
    nn_conv_mode mode;
    nn_activation activation; /* forward: fused after the bias; backward calls see IDENTITY */
    int has_bias;             /* forward: b is not NULL */
    nn_dtype dtype;           /* of every tensor of the call */
    nn_math_mode math;        /* the context's; TF32 only matters for f32 on cuDNN */
    int deterministic;        /* the context's */
    unsigned roles;           /* NN__CONV_ROLE bits: the layout-carrying tensors of the call */
    unsigned nhwc;            /* the subset of roles described channels-last */
};

/* The tensors of a call whose layout is NCHW or channels-last (bits of nn__conv_problem.roles
 * and .nhwc); the bias is always packed K elements. */
enum nn__conv_role {
    NN__CONV_ROLE_X = 1 << 0,
    NN__CONV_ROLE_W = 1 << 1,
    NN__CONV_ROLE_Y = 1 << 2,
    NN__CONV_ROLE_DX = 1 << 3,
    NN__CONV_ROLE_DW = 1 << 4,
    NN__CONV_ROLE_DY = 1 << 5
};

/* conv_plan_key.c (which the fuzzer links alone). The canonical packed strides of dims (rank >= 3)
 * in NCHW order, or channels-last (C fastest, then the spatial dims from the innermost, N slowest)
 * when channels_last is nonzero. */
void nn__conv_layout_strides(int rank, const int64_t *dims, int channels_last, int64_t *strides);

/* Whether t (rank >= 3) is channels-last packed: its strides are those of
 * nn__conv_layout_strides(..., 1, ...) in every dim larger than 1. */
int nn__conv_is_channels_last(const nn_tensor *t);

/* NN_OK if t (already a valid view) is NCHW packed or channels-last packed; else
 * NN_E_UNSUPPORTED with a message naming op, name, the strides and the layouts accepted. */
nn_status nn__conv_check_layout(struct nn_ctx *ctx, const char *op, const nn_tensor *t,
                                const char *name);

/* One tensor of a call for nn__conv_describe_layouts(): in may be NULL (absent); out receives
 * the view with the canonical strides of its layout. */
struct nn__conv_layout_arg {
    unsigned role; /* one NN__CONV_ROLE bit */
    const nn_tensor *in;
    nn_tensor *out;
};

/* Whether a call with these tensors (in NULL: absent) describes the ones that are both layouts at
 * once channels-last: when one of them is channels-last only (not also NCHW packed). */
int nn__conv_prefers_channels_last(const struct nn__conv_layout_arg *a, int n);

/* Choose the layout each present tensor of a call is described in and write its canonical view;
 * sets p->roles and p->nhwc. Every in passed nn__conv_check_layout(). A tensor that is both
 * layouts at once (C = 1, or all spatial sizes 1) follows the call: channels-last when another
 * tensor of the call is channels-last only, so that cuDNN sees one layout where it can. */
void nn__conv_describe_layouts(struct nn__conv_problem *p, struct nn__conv_layout_arg *a, int n);

/* The tensors of one pass of nn_conv_workspace_size() as its call would describe them (conv.c,
 * nn__conv_describe_layouts()): x and w are the caller's (their canonical views), b the caller's
 * or NULL; the pass's tensors the query is not given, y for the forward, dy for the gradients, dx
 * for the data gradient and dw for the filter gradient, have the dims and layout the call's would
 * have and data NULL; those the pass lacks are zeroed. */
struct nn__conv_query {
    nn_tensor x, w, y, dy, dx, dw;
    const nn_tensor *b;
};

/* Fill q for pass of problem p (resolved from x and w, which passed the layout checks) as
 * nn_conv_forward, or nn_conv_backward through the forward's pullback (which holds x and w),
 * would describe the pass's tensors; sets p->roles and p->nhwc as that call does. The tensors
 * the query is not given are channels-last when x or w is channels-last only
 * (nn__conv_prefers_channels_last()), else NCHW. */
void nn__conv_describe_query(struct nn__conv_problem *p, nn_conv_pass pass, const nn_tensor *x,
                             const nn_tensor *w, const nn_tensor *b, struct nn__conv_query *q);

/* The problem as text in the CLI syntax (include/nnprim/conv.h, docs/CONV.md), e.g.
 * "n2c4h9w9k6r3s3 g2 stride2x1 dil1x1 padlo1x0 padhi2x1 conv relu bias f32"; TF32 math on an
 * f32 problem adds " tf32"; channels-last tensors add " nhwc" (every tensor of roles) or
 * " nhwc=x+dy" (those named). Always NUL-terminated; truncated to cap. */
void nn__conv_problem_text(const struct nn__conv_problem *p, char *buf, size_t cap);

/* The forward plan a cuDNN forward ran, with its variant pack's tensors: for `nnprim bench conv`,
 * which runs the same plan through raw cudnnBackendExecute to show nnprim's host overhead (see
 * nn__conv_forward_capture()). plan is a struct nn__cudnn_plan * owned by the context's plan
 * cache; NULL when the backend ran none. */
struct nn__conv_exec {
    void *plan;
    int n;
    int64_t uids[4];
    void *ptrs[4];
};

/* What the backend's calls did during one op call, for its verbose line: conv.c puts one on its
 * stack per op call (empty strings, exec NULL), passes it to every backend call of that op call
 * and prints it after. A backend appends to impl (e.g. "cudnn fwd:eng12") and cache ("hit"),
 * only when verbose output is on; empty fields print as the backend's name and "-". exec, when
 * not NULL, asks a forward to say which plan it ran. */
struct nn__conv_note {
    char impl[160];
    char cache[96];
    struct nn__conv_exec *exec;
};

/* nn_conv_forward() with a note whose exec is exec (exec->plan stays NULL on the reference
 * backend). The same statuses as nn_conv_forward() in inference mode. */
nn_status nn__conv_forward_capture(struct nn_ctx *ctx, const nn_conv_params *p, const nn_tensor *x,
                                   const nn_tensor *w, const nn_tensor *b, nn_tensor *y,
                                   struct nn__conv_exec *exec);

/* Backend entry points. Each returns NN_OK or a recorded failure; all queue their work on the
 * context's stream (the _ref ones finish before returning).
 *
 * forward:       y = act(alpha * (x ⋆ w) + b) + beta * y      (b NULL: no bias term;
 *                act from p->activation)
 * backward_data: dx = alpha * (dy ⋆ᵀ w) + beta * dx
 * backward_filter: dw = alpha * (x ⋆ᵀ dy) + beta * dw
 * backward_bias: db[k] = alpha * sum_{n, spatial} dy + beta * db
 * relu_backward: dyr = (y > 0) ? dy : 0   (dyr has dy's dims; dyr may not alias dy or y)
 *
 * conv.c calls them with alpha = 1 and beta = 0, or beta = 1 for an accumulating flag; with
 * beta = 0 the old contents of the output are never read (they may be NaN). The backward calls
 * always get p->activation == IDENTITY: conv.c masks dy through relu_backward first. note is the
 * op call's verbose note (never NULL). */
nn_status nn__conv_forward_ref(struct nn_ctx *ctx, const struct nn__conv_problem *p,
                               const nn_tensor *x, const nn_tensor *w, const nn_tensor *b,
                               nn_tensor *y, double alpha, double beta, struct nn__conv_note *note);
nn_status nn__conv_backward_data_ref(struct nn_ctx *ctx, const struct nn__conv_problem *p,
                                     const nn_tensor *dy, const nn_tensor *w, nn_tensor *dx,
                                     double alpha, double beta, struct nn__conv_note *note);
nn_status nn__conv_backward_filter_ref(struct nn_ctx *ctx, const struct nn__conv_problem *p,
                                       const nn_tensor *x, const nn_tensor *dy, nn_tensor *dw,
                                       double alpha, double beta, struct nn__conv_note *note);
nn_status nn__conv_backward_bias_ref(struct nn_ctx *ctx, const struct nn__conv_problem *p,
                                     const nn_tensor *dy, nn_tensor *db, double alpha, double beta,
                                     struct nn__conv_note *note);
nn_status nn__conv_relu_backward_ref(struct nn_ctx *ctx, const nn_tensor *y, const nn_tensor *dy,
                                     nn_tensor *dyr, struct nn__conv_note *note);

#if NN_HAVE_CUDNN
/* conv_cudnn.c: the graph API through the cuDNN layer (plan cache keyed by the problem, workspace
 * from the pool). The same contracts as the _ref functions; f64 may be refused with
 * NN_E_UNSUPPORTED. A cuDNN plan that fuses the relu into the forward is welcome; the results
 * must match the reference within the harness tolerances. */
nn_status nn__conv_forward_cudnn(struct nn_ctx *ctx, const struct nn__conv_problem *p,
                                 const nn_tensor *x, const nn_tensor *w, const nn_tensor *b,
                                 nn_tensor *y, double alpha, double beta,
                                 struct nn__conv_note *note);
nn_status nn__conv_backward_data_cudnn(struct nn_ctx *ctx, const struct nn__conv_problem *p,
                                       const nn_tensor *dy, const nn_tensor *w, nn_tensor *dx,
                                       double alpha, double beta, struct nn__conv_note *note);
nn_status nn__conv_backward_filter_cudnn(struct nn_ctx *ctx, const struct nn__conv_problem *p,
                                         const nn_tensor *x, const nn_tensor *dy, nn_tensor *dw,
                                         double alpha, double beta, struct nn__conv_note *note);
nn_status nn__conv_backward_bias_cudnn(struct nn_ctx *ctx, const struct nn__conv_problem *p,
                                       const nn_tensor *dy, nn_tensor *db, double alpha,
                                       double beta, struct nn__conv_note *note);
nn_status nn__conv_relu_backward_cudnn(struct nn_ctx *ctx, const nn_tensor *y, const nn_tensor *dy,
                                       nn_tensor *dyr, struct nn__conv_note *note);

/* conv_bias_cuda.c: whether nnprim's bias-gradient kernels take dy (f32 or f64, the spatial
 * positions of each (n, k) one stride-1 run, and the kernels loaded), and the gradient by them:
 * db = alpha * sum + beta * db (db read only when beta is not 0). */
int nn__conv_bias_kernel_fits(const struct nn__conv_problem *p, const nn_tensor *dy);
nn_status nn__conv_bias_grad_cuda(struct nn_ctx *ctx, const nn_tensor *dy, nn_tensor *db,
                                  double alpha, double beta);

/* nn_conv_workspace_size() of a checked problem (include/nnprim/conv.h): the pool bytes the pass
 * would hold at its peak, with its plan found or built (and cached) as the call would; beta is
 * the pass's blend (1 when its gradient accumulates). q holds the pass's tensors; those without
 * data are stood in for by pool scratch only while a plan that is not live is found or built. */
nn_status nn__conv_workspace_cudnn(struct nn_ctx *ctx, const struct nn__conv_problem *p,
                                   nn_conv_pass pass, const struct nn__conv_query *q, double beta,
                                   size_t *bytes);

/* What cuDNN cannot take, refused before it sees it (docs/INPUT.md): NN_E_UNSUPPORTED naming op
 * (the public function) and the field when a dim, stride, dilation or padding of p is beyond
 * INT32_MAX (cuDNN casts them to int). conv.c calls it for every problem on a cuDNN context. */
nn_status nn__conv_cudnn_check_limits(struct nn_ctx *ctx, const char *op,
                                      const struct nn__conv_problem *p);

#endif

#endif

/* Pooling: argument checks, backend dispatch, the pullback and the verbose line. */
#include <stdio.h>
#include <string.h>

#include "core/alloc.h"
#include "core/ctx.h"
#include "core/error.h"
#include "core/log.h"
#include "core/pullback.h"
#include "core/tensor_util.h"
#include "core/text.h"
#include "pool/pool_internal.h"

static const struct nn__pullback_kind pullback_kind = {"pool", NN_ACCUMULATE_DX, NULL};

/* ---------------------------------------------------------------------------------------------
 * Backends
 */

static nn_status forward_ref(struct nn_ctx *ctx, const nn_pool_params *p, const nn_tensor *x,
                             nn_tensor *y, struct nn__pool_saved **saved_out)
{
    if (saved_out) *saved_out = NULL; /* backward needs only x */
    return nn__pool_forward_ref(ctx, p, x, y);
}

static nn_status backward_ref(struct nn_ctx *ctx, const nn_pool_params *p,
                              struct nn__pool_saved *saved, const nn_tensor *x, const nn_tensor *y,
                              const nn_tensor *dy, nn_tensor *dx, int accumulate)
{
    (void)saved;
    (void)y;
    return nn__pool_backward_ref(ctx, "pooling backward", p, x, dy, dx, accumulate);
}

static void saved_free_ref(struct nn_ctx *ctx, struct nn__pool_saved *saved)
{
    (void)ctx;
    (void)saved;
}

static const struct nn__pool_backend backend_ref = {"ref",          forward_ref, backward_ref,
                                                    saved_free_ref, NULL,        NULL};

/* A GPU context exists only in builds with cuDNN. */
static const struct nn__pool_backend *backend_of(const struct nn_ctx *ctx)
{
#if NN_HAVE_CUDNN
    if (nn__ctx_on_gpu(ctx)) return &nn__pool_backend_cudnn;
#endif
    (void)ctx;
    return &backend_ref;
}

/* The backend that made the pullback releases what it saved. */
static void free_pullback(void *p)
{
    nn_pool_pullback *pb = p;
    backend_of(pb->hdr.ctx)->saved_free(pb->hdr.ctx, pb->saved);
    nn__host_free(pb);
}

static const char *mode_name(nn_pool_mode m)
{
    switch (m) {
    case NN_POOL_MAX: return "max";
    case NN_POOL_MEAN_INCLUDE_PAD: return "mean_include_pad";
    case NN_POOL_MEAN_EXCLUDE_PAD: return "mean_exclude_pad";
    }
    return "invalid";
}

static nn_status check_params(nn_ctx *ctx, const char *op, const nn_pool_params *p)
{
    if (!p) return NN__FAIL(ctx, NN_E_INVALID_ARG, "%s: params must not be NULL", op);
    if (p->spatial_rank < 1 || p->spatial_rank > NN_POOL_MAX_SPATIAL)
        return NN__FAIL(ctx, NN_E_INVALID_ARG, "%s: params.spatial_rank must be 1, 2 or 3, got %d",
                        op, p->spatial_rank);
    if (strcmp(mode_name(p->mode), "invalid") == 0)
        return NN__FAIL(ctx, NN_E_INVALID_ARG,
                        "%s: params.mode must be NN_POOL_MAX, NN_POOL_MEAN_INCLUDE_PAD or "
                        "NN_POOL_MEAN_EXCLUDE_PAD, got %d",
                        op, (int)p->mode);
    for (int i = 0; i < p->spatial_rank; i++) {
        if (p->window[i] < 1)
            return NN__FAIL(ctx, NN_E_INVALID_ARG, "%s: params.window[%d] must be >= 1, got %lld",
                            op, i, (long long)p->window[i]);
        if (p->stride[i] < 1)
            return NN__FAIL(ctx, NN_E_INVALID_ARG, "%s: params.stride[%d] must be >= 1, got %lld",
                            op, i, (long long)p->stride[i]);
        const int64_t *pads[2] = {p->pad_lo, p->pad_hi};
        for (int s = 0; s < 2; s++)
            if (pads[s][i] < 0 || pads[s][i] >= p->window[i])
                return NN__FAIL(ctx, NN_E_INVALID_ARG,
                                "%s: params.%s[%d] must be in [0, window[%d] - 1] = [0, %lld], "
                                "got %lld",
                                op, s ? "pad_hi" : "pad_lo", i, i, (long long)p->window[i] - 1,
                                (long long)pads[s][i]);
    }
    return NN__CHECK_RESERVED(ctx, op, "params.reserved", p->reserved);
}

/* Output dims for validated params; NN_E_SHAPE when x's rank or size does not fit them. */
static nn_status output_dims(nn_ctx *ctx, const char *op, const nn_pool_params *p, int x_rank,
                             const int64_t *x_dims, int64_t *y_dims)
{
    if (x_rank != p->spatial_rank + 2)
        return NN__FAIL(ctx, NN_E_SHAPE,
                        "%s: x.rank must be params.spatial_rank + 2 = %d (N, C and the spatial "
                        "dims), got %d",
                        op, p->spatial_rank + 2, x_rank);
    for (int i = 0; i < x_rank; i++)
        if (x_dims[i] < 1)
            return NN__FAIL(ctx, NN_E_INVALID_ARG, "%s: x.dims[%d] must be >= 1, got %lld", op, i,
                            (long long)x_dims[i]);
    y_dims[0] = x_dims[0];
    y_dims[1] = x_dims[1];
    for (int i = 0; i < p->spatial_rank; i++) {
        int64_t padded;
        if (__builtin_add_overflow(x_dims[2 + i], p->pad_lo[i], &padded) ||
            __builtin_add_overflow(padded, p->pad_hi[i], &padded))
            return NN__FAIL(ctx, NN_E_OVERFLOW, "%s: x.dims[%d] + padding overflows int64", op,
                            2 + i);
        if (padded < p->window[i])
            return NN__FAIL(ctx, NN_E_SHAPE,
                            "%s: params.window[%d] = %lld is larger than the padded input "
                            "x.dims[%d] + pad_lo[%d] + pad_hi[%d] = %lld",
                            op, i, (long long)p->window[i], 2 + i, i, i, (long long)padded);
        y_dims[2 + i] = (padded - p->window[i]) / p->stride[i] + 1;
    }
    return NN_OK;
}

nn_status nn_pool_output_shape(const nn_pool_params *params, int x_rank, const int64_t *x_dims,
                               int64_t *y_dims)
{
    const char *op = "nn_pool_output_shape";
    NN__TRY(check_params(NULL, op, params));
    if (!x_dims || !y_dims)
        return NN__FAIL(NULL, NN_E_INVALID_ARG, "%s: x_dims and y_dims must not be NULL", op);
    return output_dims(NULL, op, params, x_rank, x_dims, y_dims);
}

static nn_status check_dims(nn_ctx *ctx, const char *op, const char *name, const nn_tensor *t,
                            const int64_t *want, int rank)
{
    int same = t->rank == rank;
    for (int i = 0; same && i < rank; i++)
        same = t->dims[i] == want[i];
    if (same) return NN_OK;
    nn_tensor w = {.rank = rank};
    memcpy(w.dims, want, (size_t)rank * sizeof *want);
    char a[128], b[128];
    nn__dims_text(&w, a, sizeof a);
    nn__dims_text(t, b, sizeof b);
    return NN__FAIL(ctx, NN_E_SHAPE, "%s: %s dims must be %s, got %s (rank %d)", op, name, a, b,
                    t->rank);
}

static nn_status check_dtype(nn_ctx *ctx, const char *op, const char *name, const nn_tensor *t,
                             nn_dtype want)
{
    if (t->dtype != want)
        return NN__FAIL(ctx, NN_E_DTYPE, "%s: %s.dtype must equal x.dtype (%s), got %s", op, name,
                        nn_dtype_name(want), nn_dtype_name(t->dtype));
    return NN_OK;
}

/* Sizes the context's backend cannot take (cuDNN: int), refused before it sees them. */
static nn_status check_backend_limits(nn_ctx *ctx, const char *op, const nn_pool_params *p,
                                      const nn_tensor *t, const char *name)
{
    const struct nn__pool_backend *be = backend_of(ctx);
    return be->check_limits ? be->check_limits(ctx, op, p, t, name) : NN_OK;
}

/* The call in the case syntax of docs/POOL.md (what `nnprim check pool` and the harness read),
 * e.g. "n2c3h8w8 max win3x3 stride2x2 pad1x1 f32"; a backward that adds to dx ends in " accdx",
 * as conv's line does, so that the reproducer accumulates too. */
static void shape_text(const nn_pool_params *p, const nn_tensor *x, unsigned accumulate, int keep,
                       char *buf, size_t cap)
{
    static const char letters[] = "dhw";
    int nsp = p->spatial_rank, off = 3 - nsp;
    size_t n =
        (size_t)snprintf(buf, cap, "n%lldc%lld", (long long)x->dims[0], (long long)x->dims[1]);
    for (int i = 0; i < nsp && n < cap; i++)
        n += (size_t)snprintf(buf + n, cap - n, "%c%lld", letters[off + i],
                              (long long)x->dims[2 + i]);
    if (n < cap) n += (size_t)snprintf(buf + n, cap - n, " %s", mode_name(p->mode));
    n = nn__text_put_list(buf, cap, n, "win", nsp, p->window);
    n = nn__text_put_list(buf, cap, n, "stride", nsp, p->stride);
    if (memcmp(p->pad_lo, p->pad_hi, (size_t)nsp * sizeof p->pad_lo[0]) == 0) {
        n = nn__text_put_list(buf, cap, n, "pad", nsp, p->pad_lo);
    } else {
        n = nn__text_put_list(buf, cap, n, "padlo", nsp, p->pad_lo);
        n = nn__text_put_list(buf, cap, n, "padhi", nsp, p->pad_hi);
    }
    if (n < cap) n += (size_t)snprintf(buf + n, cap - n, " %s", nn_dtype_name(x->dtype));
    if (n < cap && (accumulate & NN_ACCUMULATE_DX))
        n += (size_t)snprintf(buf + n, cap - n, " accdx");
    if (n < cap && keep) snprintf(buf + n, cap - n, " keep");
}

static void verbose(nn_ctx *ctx, const char *op, const struct nn__pool_backend *be,
                    const nn_pool_params *p, const nn_tensor *x, unsigned accumulate, int keep,
                    uint64_t start)
{
    char shape[512];
    shape_text(p, x, accumulate, keep, shape, sizeof shape);
    /* The verbose line names the op without the "nn_" of the public function (docs/POOL.md). */
    nn__verbose_op(ctx, op + strlen("nn_"), be->name, "-", shape, start);
}

/* At verbose >= 1, the call's case for its failure line, once params are valid and x has their
 * rank: the arguments as given, so that a shape the library refuses (a window larger than the
 * padded input) is reproduced by nnprim check and bench with the same message. */
static void failure_case(nn_ctx *ctx, const nn_pool_params *p, const nn_tensor *x,
                         unsigned accumulate, int keep)
{
    if (!nn__verbose(ctx) || !x || x->rank != p->spatial_rank + 2) return;
    char shape[512];
    shape_text(p, x, accumulate, keep, shape, sizeof shape);
    nn__verbose_case(shape);
}

/* x and y as nn_pool_forward() takes them (params valid), for it and for the calls without a
 * pullback. y_out: y is the call's output, so it must not overlap itself or x; that is checked
 * before what the backend cannot take, so such a y is NN_E_INVALID_ARG on every backend. */
static nn_status check_x_y(nn_ctx *ctx, const char *op, const nn_pool_params *p, const nn_tensor *x,
                           const nn_tensor *y, int y_out)
{
    NN__TRY(nn__check_tensor(ctx, op, x, "x"));
    NN__TRY(nn__check_tensor(ctx, op, y, "y"));
    int64_t y_dims[NN_MAX_RANK];
    NN__TRY(output_dims(ctx, op, p, x->rank, x->dims, y_dims));
    NN__TRY(check_dims(ctx, op, "y", y, y_dims, x->rank));
    NN__TRY(check_dtype(ctx, op, "x", x, x->dtype));
    NN__TRY(check_dtype(ctx, op, "y", y, x->dtype));
    if (y_out) {
        NN__TRY(nn__check_output_distinct(ctx, op, y, "y"));
        NN__TRY(nn__check_no_overlap(ctx, op, y, "y", x, "x"));
    }
    NN__TRY(check_backend_limits(ctx, op, p, x, "x"));
    return check_backend_limits(ctx, op, p, y, "y");
}

static nn_status pool_forward(nn_ctx *ctx, const nn_pool_params *params, const nn_tensor *x,
                              nn_tensor *y, nn_pool_pullback **pullback_out)
{
    const char *op = "nn_pool_forward";
    uint64_t start = nn__verbose(ctx) ? nn__now_ns() : 0;
    if (pullback_out) *pullback_out = NULL;
    if (!ctx) return NN__FAIL(NULL, NN_E_INVALID_ARG, "%s: ctx must not be NULL", op);
    NN__TRY(check_params(ctx, op, params));
    failure_case(ctx, params, x, 0, 0);
    NN__TRY(check_x_y(ctx, op, params, x, y, 1));

    const struct nn__pool_backend *be = backend_of(ctx);
    nn_pool_pullback *pb = NULL;
    if (pullback_out) {
        pb = nn__host_calloc(1, sizeof *pb);
        if (!pb) return NN__FAIL(ctx, NN_E_OOM_HOST, "%s: out of host memory for the pullback", op);
        pb->hdr.ctx = ctx; /* for free_pullback() before it is live */
        pb->params = *params;
        pb->x = *x;
        pb->y = *y;
    }
    nn_status st = be->forward(ctx, params, x, y, pb ? &pb->saved : NULL);
    if (st != NN_OK) {
        nn__host_free(pb);
        return nn__error_in(ctx, op);
    }
    if (pb) {
        st = nn__pullback_add(ctx, op, &pullback_kind, &pb->hdr);
        if (st != NN_OK) {
            free_pullback(pb);
            return st;
        }
        *pullback_out = pb;
    }
    if (nn__verbose(ctx)) verbose(ctx, op, be, params, x, 0, 0, start);
    return NN_OK;
}

nn_status nn_pool_forward(nn_ctx *ctx, const nn_pool_params *params, const nn_tensor *x,
                          nn_tensor *y, nn_pool_pullback **pullback_out)
{
    uint64_t t0 = nn__verbose(ctx) ? nn__now_ns() : 0;
    return nn__verbose_exit(ctx, "pool_forward", t0, pool_forward(ctx, params, x, y, pullback_out));
}

/* The checks of every backward call: dy and dx against the forward's x and y (x and y given and
 * valid), then what the backend cannot take. */
static nn_status check_backward(nn_ctx *ctx, const char *op, const nn_pool_params *p,
                                const nn_tensor *x, const char *xn, const nn_tensor *y,
                                const char *yn, const nn_tensor *dy, const nn_tensor *dx)
{
    NN__TRY(nn__check_tensor(ctx, op, dy, "dy"));
    NN__TRY(nn__check_tensor(ctx, op, dx, "dx"));
    NN__TRY(check_dims(ctx, op, "dy", dy, y->dims, x->rank));
    NN__TRY(check_dims(ctx, op, "dx", dx, x->dims, x->rank));
    NN__TRY(check_dtype(ctx, op, "dy", dy, x->dtype));
    NN__TRY(check_dtype(ctx, op, "dx", dx, x->dtype));
    NN__TRY(nn__check_output_distinct(ctx, op, dx, "dx"));
    NN__TRY(nn__check_no_overlap(ctx, op, dx, "dx", dy, "dy"));
    /* backward reads the forward's x (and y, for max pooling on cuDNN) while it writes dx */
    NN__TRY(nn__check_no_overlap(ctx, op, dx, "dx", x, xn));
    NN__TRY(nn__check_no_overlap(ctx, op, dx, "dx", y, yn));
    NN__TRY(check_backend_limits(ctx, op, p, dy, "dy"));
    return check_backend_limits(ctx, op, p, dx, "dx");
}

static nn_status pool_backward(nn_ctx *ctx, const char *op, nn_pool_pullback **pullback,
                               const nn_backward_options *opts, const nn_tensor *dy, nn_tensor *dx)
{
    uint64_t start = nn__verbose(ctx) ? nn__now_ns() : 0;
    if (!ctx) return NN__FAIL(NULL, NN_E_INVALID_ARG, "%s: ctx must not be NULL", op);
    /* pooling's status for a NULL pullback argument (the other families say NN_E_PULLBACK) */
    if (!pullback)
        return NN__FAIL(ctx, NN_E_INVALID_ARG, "%s: pullback must not be NULL (pass &pb)", op);
    struct nn__backward bw;
    NN__TRY(NN__BACKWARD_BEGIN(ctx, op, &pullback_kind, pullback, opts, &bw));
    nn_pool_pullback *pb = *pullback;
    failure_case(ctx, &pb->params, &pb->x, bw.accumulate, bw.keep);
    NN__TRY(check_backward(ctx, op, &pb->params, &pb->x, "the forward's x", &pb->y,
                           "the forward's y", dy, dx));
    const struct nn__pool_backend *be = backend_of(ctx);
    NN__TRY_IN(ctx, op,
               be->backward(ctx, &pb->params, pb->saved, &pb->x, &pb->y, dy, dx,
                            bw.accumulate & NN_ACCUMULATE_DX));
    if (nn__verbose(ctx)) verbose(ctx, op, be, &pb->params, &pb->x, bw.accumulate, bw.keep, start);
    return bw.keep ? NN_OK : nn_pool_pullback_free(pullback);
}

nn_status nn_pool_backward(nn_ctx *ctx, nn_pool_pullback **pullback, const nn_tensor *dy,
                           nn_tensor *dx)
{
    uint64_t t0 = nn__verbose(ctx) ? nn__now_ns() : 0;
    return nn__verbose_exit(ctx, "pool_backward", t0,
                            pool_backward(ctx, "nn_pool_backward", pullback, NULL, dy, dx));
}

nn_status nn_pool_backward_ex(nn_ctx *ctx, nn_pool_pullback **pullback,
                              const nn_backward_options *opts, const nn_tensor *dy, nn_tensor *dx)
{
    uint64_t t0 = nn__verbose(ctx) ? nn__now_ns() : 0;
    return nn__verbose_exit(ctx, "pool_backward_ex", t0,
                            pool_backward(ctx, "nn_pool_backward_ex", pullback, opts, dy, dx));
}

static nn_status pool_backward_stateless(nn_ctx *ctx, const nn_pool_params *params,
                                         const nn_tensor *x, const nn_tensor *y,
                                         const nn_tensor *dy, nn_tensor *dx, unsigned accumulate)
{
    const char *op = "nn_pool_backward_stateless";
    uint64_t start = nn__verbose(ctx) ? nn__now_ns() : 0;
    if (!ctx) return NN__FAIL(NULL, NN_E_INVALID_ARG, "%s: ctx must not be NULL", op);
    NN__TRY(check_params(ctx, op, params));
    NN__TRY(nn__backward_accumulate(ctx, op, &pullback_kind, "accumulate", accumulate));
    failure_case(ctx, params, x, accumulate, 0);
    NN__TRY(check_x_y(ctx, op, params, x, y, 0));
    NN__TRY(check_backward(ctx, op, params, x, "x", y, "y", dy, dx));
    const struct nn__pool_backend *be = backend_of(ctx);
    NN__TRY_IN(ctx, op,
               be->backward(ctx, params, NULL, x, y, dy, dx, accumulate & NN_ACCUMULATE_DX));
    if (nn__verbose(ctx)) verbose(ctx, op, be, params, x, accumulate, 0, start);
    return NN_OK;
}

nn_status nn_pool_backward_stateless(nn_ctx *ctx, const nn_pool_params *params, const nn_tensor *x,
                                     const nn_tensor *y, const nn_tensor *dy, nn_tensor *dx,
                                     unsigned accumulate)
{
    uint64_t t0 = nn__verbose(ctx) ? nn__now_ns() : 0;
    return nn__verbose_exit(ctx, "pool_backward_stateless", t0,
                            pool_backward_stateless(ctx, params, x, y, dy, dx, accumulate));
}

nn_status nn_pool_workspace_size(nn_ctx *ctx, const nn_pool_params *params, const nn_tensor *x,
                                 const nn_tensor *y, const nn_tensor *dy, const nn_tensor *dx,
                                 nn_pool_pass pass, size_t *bytes)
{
    const char *op = "nn_pool_workspace_size";
    if (!ctx) return NN__FAIL(NULL, NN_E_INVALID_ARG, "%s: ctx must not be NULL", op);
    if (!bytes) return NN__FAIL(ctx, NN_E_INVALID_ARG, "%s: bytes must not be NULL", op);
    if (pass != NN_POOL_PASS_FORWARD && pass != NN_POOL_PASS_BACKWARD)
        return NN__FAIL(ctx, NN_E_INVALID_ARG,
                        "%s: pass must be NN_POOL_PASS_FORWARD (0) or NN_POOL_PASS_BACKWARD (1), "
                        "got %d",
                        op, (int)pass);
    NN__TRY(check_params(ctx, op, params));
    NN__TRY(check_x_y(ctx, op, params, x, y, 0));
    size_t n = 0; /* the forward takes no pool memory on either backend */
    if (pass == NN_POOL_PASS_BACKWARD) {
        NN__TRY(check_backward(ctx, op, params, x, "x", y, "y", dy, dx));
        const struct nn__pool_backend *be = backend_of(ctx);
        if (be->workspace) n = be->workspace(params, x, y, dy, dx);
    }
    *bytes = n;
    return NN_OK;
}

nn_status nn_pool_pullback_free(nn_pool_pullback **pullback)
{
    return nn__pullback_free("nn_pool_pullback_free", &pullback_kind, pullback, free_pullback);
}

/* Pooling through cuDNN's legacy calls (cudnnPoolingForward / cudnnPoolingBackward; deprecated
 * in cuDNN 9, still present). 1-D pooling runs as 2-D with a leading spatial dim of size 1.
 * Calls go through the generated checked bindings (src/cudnn/bindings_cudnn.h). */
#include <limits.h>
#include <string.h>

#include "core/cuda_load.h"

#include "core/alloc.h"
#include "core/ctx.h"
#include "core/cuda_util.h"
#include "core/error.h"
#include "cudnn/bindings_cudnn.h"
#include "cudnn/cudnn_ctx.h"
#include "cudnn/describe_cudnn.h"
#include "mem/mem.h"
#include "pool/pool_internal.h"

/* What backward needs besides the caller's views: the descriptors of forward (made once). */
struct nn__pool_saved {
    cudnnPoolingDescriptor_t pool;
    cudnnTensorDescriptor_t xd; /* x's dims and strides */
    cudnnTensorDescriptor_t yd; /* y's dims, contiguous: y and dy as backward sees them */
};

/* Like nn__cudnn_tensor_desc_destroy: through the checked bindings (so NNPRIM_VERBOSE=2 shows
 * it) and never replacing the failure being reported, as it runs on error paths too. NULL is
 * allowed. */
static void destroy_pooling(struct nn_ctx *ctx, cudnnPoolingDescriptor_t d)
{
    if (!d) return;
    struct nn__error_kept keep = nn__error_keep(ctx);
    (void)nn__cudnn_DestroyPoolingDescriptor(ctx, d);
    nn__error_restore(ctx, &keep);
}

/* Max pooling's plain mode is the fast one; its backward may add overlapping windows' gradients
 * in any order, so a deterministic context gets the deterministic algorithm. */
static cudnnPoolingMode_t pool_mode(nn_pool_mode m, int deterministic)
{
    switch (m) {
    case NN_POOL_MEAN_INCLUDE_PAD: return CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING;
    case NN_POOL_MEAN_EXCLUDE_PAD: return CUDNN_POOLING_AVERAGE_COUNT_EXCLUDE_PADDING;
    case NN_POOL_MAX: break;
    }
    return deterministic ? CUDNN_POOLING_MAX_DETERMINISTIC : CUDNN_POOLING_MAX;
}

/* What cuDNN's legacy pooling cannot take, refused before it sees it. */
static nn_status check_limits_cudnn(struct nn_ctx *ctx, const char *op, const nn_pool_params *p,
                                    const nn_tensor *t, const char *name)
{
    for (int i = 0; i < p->spatial_rank; i++)
        if (p->pad_lo[i] != p->pad_hi[i])
            return NN__FAIL(ctx, NN_E_UNSUPPORTED,
                            "%s: cuDNN's pooling pads both sides of a dim equally, but "
                            "params.pad_lo[%d] = %lld and pad_hi[%d] = %lld; use symmetric "
                            "padding, or pad x yourself, or use the reference backend",
                            op, i, (long long)p->pad_lo[i], i, (long long)p->pad_hi[i]);
    for (int i = 0; i < t->rank; i++) {
        if (t->dims[i] > INT_MAX || t->strides[i] > INT_MAX)
            return NN__FAIL(ctx, NN_E_UNSUPPORTED,
                            "%s: cuDNN takes int sizes, but %s.dims[%d] = %lld, strides[%d] = %lld",
                            op, name, i, (long long)t->dims[i], i, (long long)t->strides[i]);
        /* cudnnSetTensorNdDescriptor answers BAD_PARAM for a zero stride */
        if (t->strides[i] < 1)
            return NN__FAIL(ctx, NN_E_UNSUPPORTED,
                            "%s: cuDNN's tensor descriptors take strides >= 1, but "
                            "%s.strides[%d] = %lld (a broadcast view); copy %s to a packed tensor, "
                            "or use the reference backend",
                            op, name, i, (long long)t->strides[i], name);
    }
    if (nn_tensor_numel(t) > INT_MAX)
        return NN__FAIL(ctx, NN_E_UNSUPPORTED,
                        "%s: cuDNN's legacy pooling takes at most %d elements per tensor, but %s "
                        "has %lld",
                        op, INT_MAX, name, (long long)nn_tensor_numel(t));
    for (int i = 0; i < p->spatial_rank; i++)
        if (p->window[i] > INT_MAX || p->stride[i] > INT_MAX)
            return NN__FAIL(ctx, NN_E_UNSUPPORTED,
                            "%s: cuDNN takes int sizes, but params.window[%d] = %lld, "
                            "params.stride[%d] = %lld",
                            op, i, (long long)p->window[i], i, (long long)p->stride[i]);
    return NN_OK;
}

/* Dims and strides as cuDNN sees them: rank-3 (1-D) tensors get a size-1 H before W. */
static int cudnn_shape(const nn_tensor *t, const int64_t *strides, int dims[5], int str[5])
{
    int nd = t->rank == 3 ? 4 : t->rank;
    for (int i = 0, j = 0; i < t->rank; i++, j++) {
        if (t->rank == 3 && i == 2) {
            /* a size-1 dim is never stepped over; any consistent stride will do */
            int64_t packed = t->dims[2] * strides[2];
            dims[j] = 1;
            str[j] = packed >= 1 && packed <= INT_MAX ? (int)packed : 1;
            j++;
        }
        dims[j] = (int)t->dims[i];
        str[j] = (int)strides[i];
    }
    return nd;
}

static nn_status tensor_desc(struct nn_ctx *ctx, const nn_tensor *t, int contiguous,
                             cudnnTensorDescriptor_t *out)
{
    int64_t cs[NN_MAX_RANK];
    if (contiguous) nn_contiguous_strides(t->rank, t->dims, cs);
    int dims[5], str[5];
    int nd = cudnn_shape(t, contiguous ? cs : t->strides, dims, str);
    return nn__cudnn_tensor_desc(ctx, t->dtype, nd, dims, str, out);
}

static nn_status pool_desc(struct nn_ctx *ctx, const nn_pool_params *p,
                           cudnnPoolingDescriptor_t *out)
{
    int win[3], pad[3], str[3], nd = p->spatial_rank == 1 ? 2 : p->spatial_rank;
    for (int i = 0, j = 0; i < p->spatial_rank; i++, j++) {
        if (p->spatial_rank == 1) {
            win[j] = 1;
            pad[j] = 0;
            str[j] = 1;
            j++;
        }
        win[j] = (int)p->window[i];
        pad[j] = (int)p->pad_lo[i];
        str[j] = (int)p->stride[i];
    }
    cudnnPoolingDescriptor_t d;
    NN__TRY(nn__cudnn_CreatePoolingDescriptor(ctx, &d));
    nn_status st =
        nn__cudnn_SetPoolingNdDescriptor(ctx, d, pool_mode(p->mode, ctx->settings.deterministic),
                                         CUDNN_PROPAGATE_NAN, nd, win, pad, str);
    if (st != NN_OK) {
        destroy_pooling(ctx, d);
        return st;
    }
    *out = d;
    return NN_OK;
}

static int same_strides(const nn_tensor *a, const nn_tensor *b)
{
    return memcmp(a->strides, b->strides, (size_t)a->rank * sizeof a->strides[0]) == 0;
}

static void saved_free_cudnn(struct nn_ctx *ctx, struct nn__pool_saved *s)
{
    if (!s) return;
    destroy_pooling(ctx, s->pool);
    nn__cudnn_tensor_desc_destroy(ctx, s->xd);
    nn__cudnn_tensor_desc_destroy(ctx, s->yd);
    nn__host_free(s);
}

static nn_status forward_cudnn(struct nn_ctx *ctx, const nn_pool_params *p, const nn_tensor *x,
                               nn_tensor *y, struct nn__pool_saved **saved_out)
{
    const char *op = "pool_forward";
    cudnnHandle_t h;
    NN__TRY(nn__cudnn_handle(ctx, &h));
    struct nn__pool_saved *s = nn__host_calloc(1, sizeof *s);
    if (!s) return NN__FAIL(ctx, NN_E_OOM_HOST, "%s: out of host memory for descriptors", op);
    cudnnTensorDescriptor_t yd_user = NULL;
    union nn__cudnn_scale one, zero;
    nn_status st = pool_desc(ctx, p, &s->pool);
    if (st == NN_OK) st = tensor_desc(ctx, x, 0, &s->xd);
    if (st == NN_OK) st = tensor_desc(ctx, y, 0, &yd_user);
    if (st == NN_OK)
        st = nn__cudnn_PoolingForward(ctx, h, s->pool, nn__cudnn_scale(&one, x->dtype, 1.0), s->xd,
                                      x->data, nn__cudnn_scale(&zero, x->dtype, 0.0), yd_user,
                                      y->data);
    if (st == NN_OK && saved_out) {
        if (nn_tensor_is_contiguous(y)) {
            s->yd = yd_user;
            yd_user = NULL;
        } else {
            st = tensor_desc(ctx, y, 1, &s->yd);
        }
    }
    nn__cudnn_tensor_desc_destroy(ctx, yd_user);
    if (st != NN_OK || !saved_out) {
        saved_free_cudnn(ctx, s);
        return st;
    }
    *saved_out = s;
    return NN_OK;
}

/* A contiguous device copy of t (described by td; the copy by cd), from the device pool. */
static nn_status pack(struct nn_ctx *ctx, cudnnHandle_t h, const nn_tensor *t,
                      cudnnTensorDescriptor_t td, cudnnTensorDescriptor_t cd, void **out)
{
    NN__TRY(nn__dev_alloc(ctx, (size_t)nn_tensor_numel(t) * nn_dtype_size(t->dtype), out));
    union nn__cudnn_scale one, zero;
    nn_status st =
        nn__cudnn_TransformTensor(ctx, h, nn__cudnn_scale(&one, t->dtype, 1.0), td, t->data,
                                  nn__cudnn_scale(&zero, t->dtype, 0.0), cd, *out);
    if (st != NN_OK) {
        nn__dev_free(ctx, *out);
        *out = NULL;
    }
    return st;
}

/* Scratch of one backward call for layouts cuDNN's backward does not take directly. */
struct scratch {
    cudnnTensorDescriptor_t dyd, ydd, xcd, dxd; /* dy's own, y's own, x/dx contiguous, dx's own */
    void *dy, *y, *x, *dx;                      /* contiguous copies, from the device pool */
};

static void scratch_free(struct nn_ctx *ctx, struct scratch *k)
{
    cudnnTensorDescriptor_t d[4] = {k->dyd, k->ydd, k->xcd, k->dxd};
    void *m[4] = {k->dy, k->y, k->x, k->dx};
    for (int i = 0; i < 4; i++) {
        nn__cudnn_tensor_desc_destroy(ctx, d[i]);
        if (m[i]) nn__dev_free(ctx, m[i]);
    }
}

/* The descriptors forward would have saved, for a backward without a pullback. */
static nn_status saved_make(struct nn_ctx *ctx, const nn_pool_params *p, const nn_tensor *x,
                            const nn_tensor *y, struct nn__pool_saved **out)
{
    struct nn__pool_saved *s = nn__host_calloc(1, sizeof *s);
    if (!s)
        return NN__FAIL(ctx, NN_E_OOM_HOST, "pool_backward: out of host memory for descriptors");
    nn_status st = pool_desc(ctx, p, &s->pool);
    if (st == NN_OK) st = tensor_desc(ctx, x, 0, &s->xd);
    if (st == NN_OK) st = tensor_desc(ctx, y, 1, &s->yd);
    if (st != NN_OK) {
        saved_free_cudnn(ctx, s);
        return st;
    }
    *out = s;
    return NN_OK;
}

/* Which contiguous copies a backward makes (backward_with) and the workspace query counts. */
struct copies {
    int dy, y;  /* packed copies of a strided dy; of a strided y, read by max pooling only */
    int x_desc; /* dx's strides differ from x's: both go through contiguous scratch */
    int x, dx;  /* with x_desc: a packed copy of a strided x; a packed dx, copied back */
};

static struct copies copies_of(const nn_pool_params *p, const nn_tensor *x, const nn_tensor *y,
                               const nn_tensor *dy, const nn_tensor *dx)
{
    struct copies c = {0};
    c.dy = !nn_tensor_is_contiguous(dy);
    c.y = p->mode == NN_POOL_MAX && !nn_tensor_is_contiguous(y);
    c.x_desc = !same_strides(dx, x);
    c.x = c.x_desc && !nn_tensor_is_contiguous(x);
    c.dx = c.x_desc && !nn_tensor_is_contiguous(dx);
    return c;
}

static size_t workspace_cudnn(const nn_pool_params *p, const nn_tensor *x, const nn_tensor *y,
                              const nn_tensor *dy, const nn_tensor *dx)
{
    struct copies c = copies_of(p, x, y, dy, dx);
    size_t es = nn_dtype_size(x->dtype);
    const nn_tensor *t[4] = {dy, y, x, dx};
    int made[4] = {c.dy, c.y, c.x, c.dx};
    size_t n = 0;
    for (int i = 0; i < 4; i++)
        if (made[i]) n += (size_t)nn_tensor_numel(t[i]) * es;
    return n;
}

/* cuDNN's legacy backward is given y and dy in one layout, and x and dx in one layout: its API
 * reference (as we recall it; not checked on a GPU here) lists differing strides among the
 * BAD_PARAM cases. A strided y (read by max pooling only) or dy is packed, and
 * when dx's strides differ from x's both go through contiguous scratch. The usual case (all
 * contiguous) reuses forward's descriptors and copies nothing. Accumulating is cuDNN's beta = 1,
 * on dx itself or, through scratch, in the copy back (cudnnTransformTensor's beta). */
static nn_status backward_with(struct nn_ctx *ctx, const nn_pool_params *p,
                               struct nn__pool_saved *s, const nn_tensor *x, const nn_tensor *y,
                               const nn_tensor *dy, nn_tensor *dx, int accumulate)
{
    cudnnHandle_t h;
    NN__TRY(nn__cudnn_handle(ctx, &h));
    struct scratch k = {0};
    const void *dyv = dy->data, *xv = x->data, *yv = y->data;
    void *dxv = dx->data;
    cudnnTensorDescriptor_t xd = s->xd;
    struct copies c = copies_of(p, x, y, dy, dx);
    nn_status st = NN_OK;
    if (c.dy) {
        st = tensor_desc(ctx, dy, 0, &k.dyd);
        if (st == NN_OK) st = pack(ctx, h, dy, k.dyd, s->yd, &k.dy);
        dyv = k.dy;
    }
    if (st == NN_OK && c.y) {
        st = tensor_desc(ctx, y, 0, &k.ydd);
        if (st == NN_OK) st = pack(ctx, h, y, k.ydd, s->yd, &k.y);
        yv = k.y;
    }
    if (st == NN_OK && c.x_desc) {
        st = tensor_desc(ctx, x, 1, &k.xcd);
        xd = k.xcd;
        if (st == NN_OK && c.x) {
            st = pack(ctx, h, x, s->xd, k.xcd, &k.x);
            xv = k.x;
        }
        if (st == NN_OK && c.dx) {
            st = tensor_desc(ctx, dx, 0, &k.dxd);
            if (st == NN_OK)
                st = nn__dev_alloc(ctx, (size_t)nn_tensor_numel(dx) * nn_dtype_size(dx->dtype),
                                   &k.dx);
            dxv = k.dx;
        }
    }
    /* Mean-pooling backward reads only dy; cuDNN still takes a y, so dy stands in for it. */
    if (p->mode != NN_POOL_MAX) yv = dyv;
    union nn__cudnn_scale one, zero, beta;
    const void *one_p = nn__cudnn_scale(&one, dx->dtype, 1.0);
    const void *beta_p = nn__cudnn_scale(&beta, dx->dtype, accumulate ? 1.0 : 0.0);
    if (st == NN_OK)
        st = nn__cudnn_PoolingBackward(ctx, h, s->pool, one_p, s->yd, yv, s->yd, dyv, xd, xv,
                                       k.dx ? nn__cudnn_scale(&zero, dx->dtype, 0.0) : beta_p, xd,
                                       dxv);
    if (st == NN_OK && k.dx)
        st = nn__cudnn_TransformTensor(ctx, h, one_p, k.xcd, k.dx, beta_p, k.dxd, dx->data);
    scratch_free(ctx, &k);
    return st;
}

static nn_status backward_cudnn(struct nn_ctx *ctx, const nn_pool_params *p,
                                struct nn__pool_saved *saved, const nn_tensor *x,
                                const nn_tensor *y, const nn_tensor *dy, nn_tensor *dx,
                                int accumulate)
{
    if (saved) return backward_with(ctx, p, saved, x, y, dy, dx, accumulate);
    struct nn__pool_saved *s = NULL;
    NN__TRY(saved_make(ctx, p, x, y, &s));
    nn_status st = backward_with(ctx, p, s, x, y, dy, dx, accumulate);
    saved_free_cudnn(ctx, s);
    return st;
}

const struct nn__pool_backend nn__pool_backend_cudnn = {"cudnn-legacy",     forward_cudnn,
                                                        backward_cudnn,     saved_free_cudnn,
                                                        check_limits_cudnn, workspace_cudnn};

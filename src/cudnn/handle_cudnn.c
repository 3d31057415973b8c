/* The cuDNN layer's per-context parts (cudnn_ctx.h): the handle, the cache and builder slots,
 * worker contexts. */
#include "core/alloc.h"
#include "core/ctx.h"
#include "core/error.h"
#include "cudnn/bindings_cudnn.h"
#include "cudnn/cudnn_ctx.h"

struct nn__cache *nn__cudnn_plan_cache(struct nn_ctx *ctx)
{
    return ctx->cudnn->plans;
}

struct nn__plan_builder **nn__cudnn_builder_slot(struct nn_ctx *ctx)
{
    return &ctx->cudnn->builder;
}

nn_status nn__cudnn_worker_ctx_create(struct nn_ctx *parent, struct nn_ctx **out)
{
    *out = NULL;
    struct nn_ctx *w = nn__host_calloc(1, sizeof *w);
    struct nn__cudnn_state *s = nn__host_calloc(1, sizeof *s);
    if (!w || !s) {
        nn__host_free(w);
        nn__host_free(s);
        return NN__FAIL(parent, NN_E_OOM_HOST, "plan builder: out of host memory");
    }
    w->settings = parent->settings;
    w->settings.plan_cache_file = NULL;
    w->device = parent->device;
    /* The worker replaces it with its own (plan_build_cudnn.c); should it fail to, the parent's
     * first stream is the one that lives as long as the parent (nn_ctx_set_stream may move). */
    w->stream = parent->home_stream;
    w->stream_id = parent->home_stream_id;
    w->mem_pool = parent->mem_pool; /* borrowed: the worker stops before the context lets it go */
    s->cudnn_version = parent->cudnn->cudnn_version;
    s->gpu = parent->cudnn->gpu;
    w->cudnn = s;
    *out = w;
    return NN_OK;
}

void nn__cudnn_worker_ctx_destroy(struct nn_ctx *w)
{
    if (!w) return;
    nn__cudnn_handle_destroy(w, w->cudnn->cudnn);
    nn__host_free(w->cudnn);
    nn__host_free(w);
}

nn_status nn__cudnn_handle(struct nn_ctx *ctx, cudnnHandle_t *out)
{
    struct nn__cudnn_state *s = ctx->cudnn;
    if (!s->cudnn) {
        cudnnHandle_t h;
        NN__TRY(nn__cudnn_Create(ctx, &h));
        nn_status st = nn__cudnn_SetStream(ctx, h, (cudaStream_t)ctx->stream);
        if (st != NN_OK) {
            nn__cudnn_handle_destroy(ctx, h);
            return st;
        }
        s->cudnn = h;
    }
    *out = s->cudnn;
    return NN_OK;
}

void nn__cudnn_handle_destroy(struct nn_ctx *ctx, cudnnHandle_t h)
{
    if (!h) return;
    struct nn__error_kept keep = nn__error_keep(ctx);
    (void)nn__cudnn_Destroy(ctx, h);
    nn__error_restore(ctx, &keep);
}

/* The public nn_plan_cache_* entry points, which exist in every build. The cache lives in the
 * cuDNN layer's per-context state; a reference context has none. */
#include <string.h>

#include "nn_config.h"

#include "core/ctx.h"
#include "core/error.h"
#include "cudnn/cache.h"
#include "cudnn/cudnn_ctx.h"
#include "nnprim/plan_cache.h"
#if NN_HAVE_CUDNN
#include "cudnn/plan_build_cudnn.h"
#endif

static nn_status no_plans(nn_ctx *ctx, const char *fn)
{
    return NN__FAIL(ctx, NN_E_UNSUPPORTED,
                    "%s: this context runs the reference backend, which has no execution plans "
                    "to save or load (plan caches belong to cuDNN contexts)",
                    fn);
}

nn_status nn_plan_cache_save(nn_ctx *ctx, const char *path)
{
    if (!ctx || !path || !path[0])
        return NN__FAIL(ctx, NN_E_INVALID_ARG,
                        "nn_plan_cache_save: ctx and path must not be NULL, path not empty");
#if NN_HAVE_CUDNN
    /* The file layer's messages start with the path; the user called this function. */
    if (nn__ctx_on_gpu(ctx))
        return nn__cudnn_plan_cache_save(ctx, path) == NN_OK
                   ? NN_OK
                   : nn__error_rethrow(ctx, "nn_plan_cache_save");
#endif
    return no_plans(ctx, "nn_plan_cache_save");
}

nn_status nn_plan_cache_load(nn_ctx *ctx, const char *path)
{
    if (!ctx || !path || !path[0])
        return NN__FAIL(ctx, NN_E_INVALID_ARG,
                        "nn_plan_cache_load: ctx and path must not be NULL, path not empty");
#if NN_HAVE_CUDNN
    if (nn__ctx_on_gpu(ctx))
        return nn__cudnn_plan_cache_load(ctx, path) == NN_OK
                   ? NN_OK
                   : nn__error_rethrow(ctx, "nn_plan_cache_load");
#endif
    return no_plans(ctx, "nn_plan_cache_load");
}

nn_status nn_plan_cache_clear(nn_ctx *ctx)
{
    if (!ctx) return NN__FAIL(NULL, NN_E_INVALID_ARG, "nn_plan_cache_clear: ctx must not be NULL");
#if NN_HAVE_CUDNN
    if (nn__ctx_on_gpu(ctx)) {
        /* The device's shared tuning too: otherwise the next call would just fetch it back. */
        nn__cache_clear_shared(nn__cudnn_plan_cache(ctx));
        nn__cache_clear(nn__cudnn_plan_cache(ctx));
    }
#endif
    return NN_OK;
}

nn_status nn_plan_cache_get_stats(const nn_ctx *ctx, nn_plan_cache_stats *stats)
{
    if (!ctx)
        return NN__FAIL(NULL, NN_E_INVALID_ARG, "nn_plan_cache_get_stats: ctx must not be NULL");
    if (!stats)
        return NN__FAIL(ctx, NN_E_INVALID_ARG, "nn_plan_cache_get_stats: stats must not be NULL");
    memset(stats, 0, sizeof *stats);
#if NN_HAVE_CUDNN
    if (nn__ctx_on_gpu(ctx)) nn__cache_get_stats(nn__cudnn_plan_cache((nn_ctx *)ctx), stats);
#endif
    return NN_OK;
}

nn_status nn_plan_cache_wait(nn_ctx *ctx)
{
    if (!ctx) return NN__FAIL(NULL, NN_E_INVALID_ARG, "nn_plan_cache_wait: ctx must not be NULL");
#if NN_HAVE_CUDNN
    if (nn__ctx_on_gpu(ctx)) nn__plan_builder_wait(ctx);
#endif
    return NN_OK;
}

#include "fuzz/fuzz_ref_ctx.h"

#include <stdlib.h>

nn_ctx *nn_fuzz_ref_ctx(void)
{
    static nn_ctx *ctx;
    if (!ctx) {
        nn_settings s;
        if (nn_settings_defaults(&s) != NN_OK) abort();
        s.backend = NN_BACKEND_REF;
        if (nn_ctx_create(&ctx, &s) != NN_OK) abort();
    }
    return ctx;
}

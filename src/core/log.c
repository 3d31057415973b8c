#include <stdarg.h>
#include <stdio.h>
#include <time.h>

#include "core/ctx.h"
#include "core/log.h"

void nn__log(const char *fmt, ...)
{
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    fprintf(stderr, "nnprim: %s\n", line);
}

uint64_t nn__now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

int nn__verbose(const struct nn_ctx *ctx)
{
    return ctx ? ctx->settings.verbose : 0;
}

void nn__verbose_op(const struct nn_ctx *ctx, const char *op, const char *impl, const char *cache,
                    const char *shape, uint64_t start_ns)
{
    double ms = (double)(nn__now_ns() - start_ns) / 1e6;
    fprintf(stderr, "nnprim_verbose,%s,%s,%s,%s,%s,%.4f\n", op,
            nn__ctx_on_gpu(ctx) ? "cudnn" : "ref", impl, cache, shape, ms);
}

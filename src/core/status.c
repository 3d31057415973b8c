#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "core/capture.h"
#include "core/ctx.h"
#include "core/error.h"

static _Thread_local nn_error_info nn__thread_error;

const char *nn_status_string(nn_status status)
{
    switch (status) {
#define NN__CASE(name, value, text)                                                                \
    case name: return text;
        NN_STATUS_LIST(NN__CASE)
#undef NN__CASE
    }
    return "unknown status";
}

const char *nn_status_name(nn_status status)
{
    switch (status) {
#define NN__CASE(name, value, text)                                                                \
    case name: return #name;
        NN_STATUS_LIST(NN__CASE)
#undef NN__CASE
    }
    return "NN_UNKNOWN";
}

const nn_error_info *nn_last_error(void)
{
    return &nn__thread_error;
}

void nn_clear_last_error(void)
{
    memset(&nn__thread_error, 0, sizeof nn__thread_error);
}

static void copy_field(char *dst, size_t cap, const char *src)
{
    snprintf(dst, cap, "%s", src ? src : "");
}

static const char *base_name(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

/* A failure recorded on ctx: the context's record, and the capture's first (core/capture.h).
 * Casting const away is defined: every context is a mutable object (error.h). */
static void to_ctx(const struct nn_ctx *cctx, const nn_error_info *e)
{
    struct nn_ctx *ctx = (struct nn_ctx *)cctx;
    ctx->last_error = *e;
    struct nn__capture *c = ctx->capture;
    if (c && c->refused == NN_OK) {
        c->refused = e->status;
        c->why = *e;
    }
}

nn_status nn__record_error(const struct nn_ctx *ctx, nn_status status, const char *call,
                           int raw_status, const char *raw_name, const char *file, int line,
                           const char *fmt, ...)
{
    nn_error_info *e = &nn__thread_error;
    e->status = status;
    e->raw_status = raw_status;
    e->line = line;
    copy_field(e->call, sizeof e->call, call);
    copy_field(e->raw_name, sizeof e->raw_name, raw_name);
    copy_field(e->file, sizeof e->file, file ? base_name(file) : NULL);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->message, sizeof e->message, fmt, ap);
    va_end(ap);
    if (ctx) to_ctx(ctx, e);
    return status;
}

nn_status nn__check_reserved(const struct nn_ctx *ctx, const char *fn, const char *name,
                             const uint64_t *reserved, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (reserved[i])
            return NN__FAIL(ctx, NN_E_INVALID_ARG, "%s: %s[%zu] must be 0, got %llu", fn, name, i,
                            (unsigned long long)reserved[i]);
    return NN_OK;
}

nn_status nn__error_in(const struct nn_ctx *ctx, const char *fn)
{
    const char *m = nn__thread_error.message;
    size_t n = strlen(fn);
    int named = strncmp(m, fn, n) == 0 && m[n] == ':';
    return nn__error_rethrow(ctx, named ? NULL : fn);
}

nn_status nn__error_rethrow(const struct nn_ctx *ctx, const char *prefix)
{
    nn_error_info *e = &nn__thread_error;
    if (prefix) {
        /* Truncation of a long message is acceptable; overlap is not, hence the copy. */
        char msg[NN_ERROR_MESSAGE_MAX];
        size_t n = (size_t)snprintf(msg, sizeof msg, "%s: ", prefix);
        if (n < sizeof msg) snprintf(msg + n, sizeof msg - n, "%s", e->message);
        memcpy(e->message, msg, sizeof msg);
    }
    if (ctx) to_ctx(ctx, e);
    return e->status;
}

struct nn__error_kept nn__error_keep(const struct nn_ctx *ctx)
{
    struct nn__error_kept k = {.thread = nn__thread_error};
    if (ctx) k.ctx = ctx->last_error;
    return k;
}

void nn__error_restore(const struct nn_ctx *ctx, const struct nn__error_kept *k)
{
    nn__thread_error = k->thread;
    if (ctx) ((struct nn_ctx *)ctx)->last_error = k->ctx;
}

nn_status nn__error_put(const struct nn_ctx *ctx, const nn_error_info *e)
{
    nn__thread_error = *e;
    if (ctx) to_ctx(ctx, e);
    return e->status;
}

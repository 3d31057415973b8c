/* Recording failures: per thread and per context (see include/nnprim/status.h). */
#ifndef NN_CORE_ERROR_H
#define NN_CORE_ERROR_H

#include <stddef.h>
#include <stdint.h>

#include "nnprim/status.h"

struct nn_ctx;

/* Record a failure and return its status: on the thread, and on ctx when it is not NULL. Every
 * public function that has a context (its ctx argument, or the context an object it was given is
 * bound to: a graph, a live pullback) passes it, also for refusals of its other arguments, so the
 * two records agree (status.h); NULL only where no context is usable (a NULL ctx, an object that
 * is not live). ctx is const because read-only calls (nn_ctx_get_stream(), the stats getters)
 * record too: a context's error record is the one field such a call writes, and every context is
 * a mutable object from nn_ctx_create(). call/raw_name may be NULL. The message is
 * printf-formatted. */
nn_status nn__record_error(const struct nn_ctx *ctx, nn_status status, const char *call,
                           int raw_status, const char *raw_name, const char *file, int line,
                           const char *fmt, ...) __attribute__((format(printf, 8, 9)));

/* The usual case: a check of nnprim's own failed. Evaluates to the status. */
#define NN__FAIL(ctx, status, ...)                                                                 \
    nn__record_error((ctx), (status), NULL, 0, NULL, __FILE__, __LINE__, __VA_ARGS__)

/* The thread's last failure, recorded again with "prefix: " in front of its message (prefix may be
 * NULL) and copied to ctx. For checks that fail before a context is known. Returns its status. */
nn_status nn__error_rethrow(const struct nn_ctx *ctx, const char *prefix);

/* A backend's recorded failure, seen from the public function fn: the message gets "fn: " in
 * front unless it starts so already (one backend entry serves several public functions, so it
 * cannot name the caller itself). Copied to ctx. Returns the failure's status. */
nn_status nn__error_in(const struct nn_ctx *ctx, const char *fn);

/* Both records as they are now, kept around work whose own failures must not replace the call's
 * (a fallback that recovers, a cleanup after the failure): nn__error_restore() puts the thread's
 * and the context's back together, so that they still agree (status.h) and a call that succeeds
 * changes neither. Restoring only ctx->last_error would leave the thread with the inner failure. */
struct nn__error_kept {
    nn_error_info thread, ctx;
};
struct nn__error_kept nn__error_keep(const struct nn_ctx *ctx);
void nn__error_restore(const struct nn_ctx *ctx, const struct nn__error_kept *k);

/* Record e (a failure kept earlier, such as the first of several candidates that failed) as the
 * call's failure, on the thread and on ctx. Returns e->status. */
nn_status nn__error_put(const struct nn_ctx *ctx, const nn_error_info *e);

/* NN__TRY for a backend call made on behalf of the public function fn (see nn__error_in). */
#define NN__TRY_IN(ctx, fn, expr)                                                                  \
    do {                                                                                           \
        if ((expr) != NN_OK) return nn__error_in((ctx), (fn));                                     \
    } while (0)

/* NN_E_INVALID_ARG naming fn and "name[i]" for the first non-zero of n reserved words (public
 * structs keep them zero so the ABI can grow); NN_OK when all are zero. */
nn_status nn__check_reserved(const struct nn_ctx *ctx, const char *fn, const char *name,
                             const uint64_t *reserved, size_t n);
#define NN__CHECK_RESERVED(ctx, fn, name, array)                                                   \
    nn__check_reserved((ctx), (fn), (name), (array), sizeof(array) / sizeof((array)[0]))

/* Propagate a failure that is already recorded. */
#define NN__TRY(expr)                                                                              \
    do {                                                                                           \
        nn_status nn__st = (expr);                                                                 \
        if (nn__st != NN_OK) return nn__st;                                                        \
    } while (0)

#endif

/* Everything nnprim says: warnings, the verbose op lines (NNPRIM_VERBOSE, docs/VERBOSE.md) and
 * the level-2 traces, to the callback of nn_set_log_callback() or else to stderr. */
#ifndef NN_CORE_LOG_H
#define NN_CORE_LOG_H

#include <stddef.h>
#include <stdint.h>

#include "nnprim/context.h"

struct nn_ctx;

/* One finished line (no newline) to the log callback, or to stderr when there is none. */
void nn__log_line(nn_log_kind kind, const char *line);

/* A message from code that already checked the verbose level: "nnprim: <message>". */
void nn__log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* A warning (something did not go as asked, the call carries on): always to a log callback,
 * to stderr only at verbose >= 1, so that a quiet program stays quiet. */
void nn__warn(int verbose, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Monotonic clock in nanoseconds. */
uint64_t nn__now_ns(void);

/* Verbose level of a context (0 when ctx is NULL). Checking it costs one load. */
int nn__verbose(const struct nn_ctx *ctx);

/* At verbose >= 1, a new context's header line: a '#' comment (case files skip it) naming the
 * version, backend, device, cuDNN and math settings that the context's lines come from.
 * cudnn_version: nn_cudnn_runtime_version(), 0 for none; the caller asks it, since core/ does
 * not know the cuDNN layer. */
void nn__verbose_header(const struct nn_ctx *ctx, size_t cudnn_version);

/* One verbose line for a successful op call (level >= 1; see docs/VERBOSE.md):
 *   nnprim_verbose,<op>,<backend>,<impl>,<cache>,<shape>,host_ms=<ms>
 * shape uses the case syntax `nnprim check` and `nnprim bench` accept, so the line reproduces
 * the call. */
void nn__verbose_op(const struct nn_ctx *ctx, const char *op, const char *impl, const char *cache,
                    const char *shape, uint64_t start_ns);

/* The case of the op call in progress (its family's case syntax, as far as the arguments are
 * known and valid), for the failure line of nn__verbose_exit(); a family sets it at verbose >= 1
 * once it can say it. Per thread; the call's verbose line clears it, and a case set before the
 * call began (by an internal call that printed no line) is not used. */
void nn__verbose_case(const char *text);

/* The public op function's exit: at verbose >= 1, a failed call (st != NN_OK) prints
 *   nnprim_verbose,<op>,<backend>,-,-,<case>,status=<NAME> host_ms=<ms>,<message>
 * case: nn__verbose_case()'s text, or "-" when the call set none. Returns st. start_ns:
 * nn__now_ns() when the call began (0 when it was not taken). */
nn_status nn__verbose_exit(const struct nn_ctx *ctx, const char *op, uint64_t start_ns,
                           nn_status st);

#endif

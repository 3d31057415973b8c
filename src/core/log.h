/* Log lines on stderr, and the verbose op lines (NNPRIM_VERBOSE). */
#ifndef NN_CORE_LOG_H
#define NN_CORE_LOG_H

#include <stdint.h>

struct nn_ctx;

void nn__log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Monotonic clock in nanoseconds. */
uint64_t nn__now_ns(void);

/* Verbose level of a context (0 when ctx is NULL). Checking it costs one load. */
int nn__verbose(const struct nn_ctx *ctx);

/* One verbose line for an op call (level >= 1):
 *   nnprim_verbose,<op>,<backend>,<impl>,<cache>,<shape>,<time ms>
 * shape uses the syntax the benchmark accepts, so the line can be pasted to reproduce. */
void nn__verbose_op(const struct nn_ctx *ctx, const char *op, const char *impl, const char *cache,
                    const char *shape, uint64_t start_ns);

#endif

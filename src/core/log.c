#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <time.h>

#include "core/ctx.h"
#include "core/log.h"

/* The callback and its argument change together, and a line is delivered whole: one lock around
 * both, held during the call, so that once nn_set_log_callback() returns the old callback is
 * never called again and lines of concurrent calls do not interleave. */
static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
static nn_log_fn log_fn;
static void *log_user;

void nn_set_log_callback(nn_log_fn fn, void *user)
{
    pthread_mutex_lock(&log_lock);
    log_fn = fn;
    log_user = user;
    pthread_mutex_unlock(&log_lock);
}

static int have_callback(void)
{
    pthread_mutex_lock(&log_lock);
    int have = log_fn != NULL;
    pthread_mutex_unlock(&log_lock);
    return have;
}

void nn__log_line(nn_log_kind kind, const char *line)
{
    pthread_mutex_lock(&log_lock);
    if (log_fn)
        log_fn(kind, line, log_user);
    else
        fprintf(stderr, "%s\n", line);
    pthread_mutex_unlock(&log_lock);
}

static void vlog(nn_log_kind kind, const char *fmt, va_list ap)
{
    char line[1024];
    int n = snprintf(line, sizeof line, "nnprim: ");
    vsnprintf(line + n, sizeof line - (size_t)n, fmt, ap);
    nn__log_line(kind, line);
}

void nn__log(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vlog(NN_LOG_WARNING, fmt, ap);
    va_end(ap);
}

void nn__warn(int verbose, const char *fmt, ...)
{
    if (verbose < 1 && !have_callback()) return;
    va_list ap;
    va_start(ap, fmt);
    vlog(NN_LOG_WARNING, fmt, ap);
    va_end(ap);
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

void nn__verbose_header(const struct nn_ctx *ctx, size_t cudnn_version)
{
    if (nn__verbose(ctx) < 1) return;
    int gpu = nn__ctx_on_gpu(ctx);
    char device[320] = "host (reference backend)", cudnn[32] = "none";
    nn_device_info d;
    if (gpu && nn_device_get_info(ctx->device, &d) == NN_OK)
        snprintf(device, sizeof device, "%d %s (cc %d.%d)", ctx->device, d.name, d.cc_major,
                 d.cc_minor);
    size_t v = cudnn_version;
    if (v) snprintf(cudnn, sizeof cudnn, "%zu.%zu.%zu", v / 10000, (v % 10000) / 100, v % 100);
    char line[1024];
    snprintf(line, sizeof line,
             "# nnprim_verbose header: nnprim %s, backend %s, device %s, cuDNN %s, math %s, "
             "deterministic %d; host_ms is the host wall time of a call (GPU work may still be "
             "queued)",
             nn_version(), gpu ? "cudnn" : "ref", device, cudnn,
             ctx->settings.math_mode == NN_MATH_TF32 ? "tf32" : "strict",
             ctx->settings.deterministic);
    nn__log_line(NN_LOG_OP, line);
}

static double ms_since(uint64_t start_ns)
{
    return start_ns ? (double)(nn__now_ns() - start_ns) / 1e6 : 0.0;
}

/* The case of the op call in progress on this thread, for its failure line, and when it was
 * set: a case set before the call began (by a call that returned without a verbose line, as an
 * internal one does) is not the call's. Cleared by the call's verbose line (either kind). */
static _Thread_local char call_case[1024];
static _Thread_local uint64_t call_case_ns;

void nn__verbose_case(const char *text)
{
    snprintf(call_case, sizeof call_case, "%s", text);
    call_case_ns = nn__now_ns();
}

void nn__verbose_op(const struct nn_ctx *ctx, const char *op, const char *impl, const char *cache,
                    const char *shape, uint64_t start_ns)
{
    double ms = ms_since(start_ns);
    char line[9000];
    call_case[0] = 0;
    snprintf(line, sizeof line, "nnprim_verbose,%s,%s,%s,%s,%s,host_ms=%.4f", op,
             nn__ctx_on_gpu(ctx) ? "cudnn" : "ref", impl, cache, shape, ms);
    nn__log_line(NN_LOG_OP, line);
}

nn_status nn__verbose_exit(const struct nn_ctx *ctx, const char *op, uint64_t start_ns,
                           nn_status st)
{
    if (st == NN_OK || nn__verbose(ctx) < 1) {
        call_case[0] = 0;
        return st;
    }
    double ms = ms_since(start_ns);
    char line[2400];
    snprintf(line, sizeof line, "nnprim_verbose,%s,%s,-,-,%s,status=%s host_ms=%.4f,%s", op,
             nn__ctx_on_gpu(ctx) ? "cudnn" : "ref",
             call_case[0] && call_case_ns >= start_ns ? call_case : "-", nn_status_name(st), ms,
             nn_last_error()->message);
    call_case[0] = 0;
    nn__log_line(NN_LOG_OP, line);
    return st;
}

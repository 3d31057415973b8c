/* `nnprim bench conv`: time forward, backward-data and backward-filter per shape.
 *
 * On a cuDNN context each call is timed on the GPU with a CUDA event pair on the context's
 * stream, the calls issued back to back (nn_cli_gpu_median_us: as PyTorch's benchmark times
 * them); on a reference context with the host clock. The figure is the median over the timed
 * repetitions, after warm-up calls (which also fill the plan cache). The host time per forward
 * call is the time to issue it, in batches with a synchronisation between them
 * (nn_cli_host_median_us: the cost of a plan-cache hit for small shapes). Columns are a table
 * (struct column) so that raw-cuDNN and other rows can be added beside nnprim's. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "nn_config.h"
#include "cli/args.h"
#include "cli/bench_util.h"
#include "cli/cli.h"
#include "tests/harness/conv_case.h"

#if NN_HAVE_CUDNN
#include "bench_raw_cudnn.h"
#endif

/* Small shapes for a reference context (and the default list without --shapes). */
static const char *const small_shapes[] = {
    "n1c4h8w8k4r3s3 pad1",
    "n2c16h14w14k16r3s3 pad1",
    "n2c32h7w7k32r1s1",
    "n1c8h16w16k8r3s3 g8 stride2 pad1",
};

struct bench {
    nn_ctx *ctx;
    int gpu, reps, warmup;
    int first; /* --mode first: only each op's first call, wall time to its completion */
    /* --mode first, shapes after the first one (which pays the process's one-time cuDNN
     * start): count, sums per op, calls over 1 ms, and the slowest call. */
    int shapes_seen, after_first;
    double sum_ms[3], max_ms;
    int over_1ms;
    char max_what[300];
    int case_no, cases; /* progress through a shape file (cases 0: no file) */
};

/* What one timed call runs. */
enum which { FWD, BWD_DATA, BWD_FILTER };

struct shape_io {
    struct nn_conv_case c;
    nn_conv_params bp; /* the backward calls' parameters: no activation */
    nn_tensor x, w, b, y, dy, dx, dw;
};

static nn_status call(struct bench *B, struct shape_io *s, enum which k)
{
    switch (k) {
    case FWD:
        return nn_conv_forward(B->ctx, &s->c.p, &s->x, &s->w, s->c.bias ? &s->b : NULL, &s->y,
                               NULL);
    case BWD_DATA: return nn_conv_backward_data(B->ctx, &s->bp, &s->dy, &s->w, &s->dx, 0);
    case BWD_FILTER: return nn_conv_backward_filter(B->ctx, &s->bp, &s->x, &s->dy, &s->dw, 0);
    }
    return NN_E_INTERNAL;
}

struct one_call {
    struct bench *B;
    struct shape_io *s;
    enum which k;
};

static int call_fn(void *arg)
{
    struct one_call *c = arg;
    return call(c->B, c->s, c->k) == NN_OK ? 0 : -1;
}

/* Median time per call in microseconds after the warm-up calls (which also fill the plan
 * cache): GPU time from CUDA event pairs on a cuDNN context (nn_cli_gpu_median_us), host time
 * on a reference context. Negative on failure. */
static double median_us(struct bench *B, struct shape_io *s, enum which k)
{
    for (int i = 0; i < B->warmup; i++)
        if (call(B, s, k) != NN_OK) return -1;
    /* Steady state: a tuned plan still building in the background replaces its quick alternate
     * before the timed calls (the first call of a shape, with --warmup 0, is timed as it is). */
    if (nn_plan_cache_wait(B->ctx) != NN_OK) return -1;
    struct one_call oc = {B, s, k};
    if (B->gpu) return nn_cli_gpu_median_us(nn_ctx_stream(B->ctx), B->reps, call_fn, &oc);
    double *t = malloc((size_t)B->reps * sizeof *t);
    if (!t) return -1;
    double m = 0;
    for (int i = 0; i < B->reps && m >= 0; i++) {
        double t0 = nn_cli_now_us();
        m = t[i] = call(B, s, k) == NN_OK ? nn_cli_now_us() - t0 : -1;
    }
    if (m >= 0) m = nn_cli_median(t, B->reps);
    free(t);
    return m;
}

static int sync_fn(void *arg)
{
    return nn_ctx_synchronize(arg) == NN_OK ? 0 : -1;
}

/* Host time per forward call, issued in batches (nn_cli_host_median_us). */
static double host_us(struct bench *B, struct shape_io *s, enum which k)
{
    struct one_call oc = {B, s, k};
    return nn_cli_host_median_us(B->reps, call_fn, &oc, sync_fn, B->ctx);
}

/* Raw cuDNN: the plan nnprim's forward runs, executed with plain cudnnBackendExecute (GPU
 * time, and host time per call back to back). -2: not applicable (no cuDNN context). */
static double raw_measure(struct bench *B, struct shape_io *s, int host)
{
#if NN_HAVE_CUDNN
    if (!B->gpu) return -2;
    struct nn_raw_plan *r =
        nn_raw_plan_take(B->ctx, &s->c.p, &s->x, &s->w, s->c.bias ? &s->b : NULL, &s->y);
    if (!r) return -1;
    double us = host ? nn_raw_plan_host_us(r, B->reps) : nn_raw_plan_gpu_us(r, B->warmup, B->reps);
    nn_raw_plan_free(r);
    return us;
#else
    (void)B;
    (void)s;
    (void)host;
    return -2;
#endif
}

static double raw_gpu_us(struct bench *B, struct shape_io *s, enum which k)
{
    (void)k;
    return raw_measure(B, s, 0);
}

static double raw_host_us(struct bench *B, struct shape_io *s, enum which k)
{
    (void)k;
    return raw_measure(B, s, 1);
}

struct column {
    const char *title;
    double (*measure)(struct bench *, struct shape_io *, enum which);
    enum which k;
};

static const struct column columns[] = {
    {"fwd_us", median_us, FWD},
    {"bwd_data_us", median_us, BWD_DATA},
    {"bwd_filter_us", median_us, BWD_FILTER},
    {"fwd_host_us", host_us, FWD},
    {"raw_fwd_us", raw_gpu_us, FWD},
    {"raw_host_us", raw_host_us, FWD},
};
#define N_COLUMNS (sizeof columns / sizeof columns[0])

static void free_io(nn_ctx *ctx, struct shape_io *s)
{
    nn_tensor *all[] = {&s->x, &s->w, &s->b, &s->y, &s->dy, &s->dx, &s->dw};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        if (all[i]->data) nn_tensor_free(ctx, all[i]);
}

static nn_status alloc_io(nn_ctx *ctx, struct shape_io *s)
{
    const struct nn_conv_case *c = &s->c;
    int rank = c->p.spatial_rank + 2;
    int64_t yd[NN_CONV_MAX_SPATIAL + 2], bd[1] = {c->w_dims[0]};
    nn_dtype dt = c->dtype;
    nn_status st = nn_conv_output_shape(&c->p, rank, c->x_dims, c->w_dims, yd);
    struct {
        nn_tensor *t;
        int rank;
        const int64_t *dims;
    } all[] = {{&s->x, rank, c->x_dims}, {&s->w, rank, c->w_dims}, {&s->b, 1, bd},
               {&s->y, rank, yd},        {&s->dy, rank, yd},       {&s->dx, rank, c->x_dims},
               {&s->dw, rank, c->w_dims}};
    /* The case's channels-last tensors ("nhwc"): the same elements, read with other strides. */
    const unsigned cl[] = {NN_CONV_CASE_X,  NN_CONV_CASE_W, 0, NN_CONV_CASE_Y, NN_CONV_CASE_DY,
                           NN_CONV_CASE_DX, NN_CONV_CASE_DW};
    for (size_t i = 0; i < sizeof all / sizeof all[0] && st == NN_OK; i++) {
        st = nn_tensor_empty(ctx, dt, all[i].rank, all[i].dims, all[i].t);
        if (st == NN_OK) st = nn_tensor_fill_uniform(ctx, all[i].t, -1, 1, 100 + i);
        if (st == NN_OK && (c->nhwc & cl[i])) {
            nn_tensor *t = all[i].t;
            int64_t step = t->dims[1];
            t->strides[1] = 1;
            for (int d = t->rank - 1; d >= 2; d--) {
                t->strides[d] = step;
                step *= t->dims[d];
            }
            t->strides[0] = step;
        }
    }
    s->bp = c->p;
    s->bp.activation = NN_ACTIVATION_IDENTITY;
    return st;
}

static int bench_line(void *arg, const char *line, const char *where)
{
    struct bench *B = arg;
    struct shape_io s;
    memset(&s, 0, sizeof s);
    char err[256], text[256];
    int got = nn_conv_case_parse_line(line, &s.c, err, sizeof err);
    if (got < 0) {
        fprintf(stderr, "nnprim bench conv: %s: %s\n", where, err);
        return -1;
    }
    if (got == 0) return 0;
    nn_conv_case_format(&s.c, text, sizeof text);
    if (B->cases) nn_cli_progress("nnprim bench conv", ++B->case_no, B->cases, text);
    double macs = nn_cli_conv_macs(&s.c);
    if (macs < 0) {
        fprintf(stderr, "nnprim bench conv: %s: %s\n", where, nn_last_error()->message);
        return -1;
    }
    /* each of the three ops does the forward's multiply-adds, warm-up and timed calls alike;
     * the host-time column runs the forward once more per repetition */
    if (!B->gpu)
        nn_cli_warn_slow("nnprim bench conv", text,
                         macs * (B->first ? 3 : 3.0 * (B->warmup + B->reps) + B->reps));
    if (alloc_io(B->ctx, &s) != NN_OK) {
        printf("# %s: %s\n", text, nn_last_error()->message);
        free_io(B->ctx, &s);
        return 1;
    }
    if (B->first) {
        /* The wall time from the call to the end of its GPU work: what a caller waits for its
         * first result (plan found or built, workspace, launch, kernel). */
        double ms[3];
        for (enum which k = FWD; k <= BWD_FILTER; k++) {
            double t0 = 0;
            ms[k] = -1;
            if (nn_ctx_synchronize(B->ctx) == NN_OK) {
                t0 = nn_cli_now_us();
                if (call(B, &s, k) == NN_OK && nn_ctx_synchronize(B->ctx) == NN_OK)
                    ms[k] = (nn_cli_now_us() - t0) / 1e3;
            }
        }
        /* Printed after the calls, so that their verbose lines (stderr) do not split it. */
        static const char *const op[3] = {"fwd", "data", "filter"};
        for (int k = 0; k < 3; k++) {
            if (ms[k] < 0)
                printf(" %13s", "error");
            else
                printf(" %13.3f", ms[k]);
            if (B->shapes_seen == 0 || ms[k] < 0) continue;
            B->sum_ms[k] += ms[k];
            B->over_1ms += ms[k] > 1.0;
            if (ms[k] > B->max_ms) {
                B->max_ms = ms[k];
                snprintf(B->max_what, sizeof B->max_what, "%s of %s", op[k], text);
            }
        }
        B->after_first += B->shapes_seen++ > 0;
        printf("  %s\n", text);
        fflush(stdout);
        free_io(B->ctx, &s);
        return 0;
    }
    for (size_t i = 0; i < N_COLUMNS; i++) {
        double us = columns[i].measure(B, &s, columns[i].k);
        if (us < 0)
            printf(" %13s", us == -2 ? "-" : "error");
        else
            printf(" %13.2f", us);
    }
    printf("  %s\n", text);
    fflush(stdout);
    free_io(B->ctx, &s);
    return 0;
}

int nn_cli_bench_conv(int argc, char **argv)
{
    nn_settings s;
    if (nn_settings_from_env(&s) != NN_OK) {
        fprintf(stderr, "nnprim bench conv: %s\n", nn_last_error()->message);
        return 1;
    }
    const char *shapes = NULL, *one = NULL;
    int reps = 0, warmup = -1, first = 0, backend = -1, math = -1;
    const struct nn_cli_opt opts[] = {
        {"--shapes", NN_CLI_STRING, &shapes, "FILE",
         "the shapes of FILE (docs/CONV.md syntax or verbose lines)", 0, 0, NULL},
        {"--case", NN_CLI_STRING, &one, "TEXT", "one shape, or a whole verbose line (quote it)", 0,
         0, NULL},
        {"--reps", NN_CLI_INT, &reps, "N", "timed calls (default 100 GPU, 5 reference)", 1, 1000000,
         NULL},
        {"--warmup", NN_CLI_INT, &warmup, "N", "untimed calls first (default 10 GPU, 1 reference)",
         0, 1000000, NULL},
        {"--backend", NN_CLI_CHOICE, &backend, NULL, "default: NNPRIM_BACKEND, else auto", 0, 0,
         "ref|cudnn"},
        {"--math", NN_CLI_CHOICE, &math, NULL, "default: NNPRIM_MATH, else strict", 0, 0,
         "strict|tf32"},
        {"--mode", NN_CLI_CHOICE, &first, NULL,
         "first: only each op's first call, ms to the end of its GPU work", 0, 0, "steady|first"},
    };
    const struct nn_cli_cmd cmd = {
        "nnprim bench conv", "[CASE...]",
        "Times forward, backward-data and backward-filter per shape (GPU time from CUDA events\n"
        "on a cuDNN context, host time on the reference one), beside the same plan run through\n"
        "raw cuDNN. Without --shapes or --case a few small shapes run.\n",
        opts, NN_CLI_NOPTS(opts)};
    int operands, prc = nn_cli_parse(&cmd, argc, argv, &operands);
    if (prc == NN_CLI_RUN) prc = nn_cli_case_operands(&cmd, argc, argv, operands, &one);
    if (prc != NN_CLI_RUN) return prc;
    if (shapes && one) return nn_cli_usage_error(&cmd, "takes --shapes or --case, not both");
    if (backend >= 0) s.backend = backend ? NN_BACKEND_CUDNN : NN_BACKEND_REF;
    if (math >= 0) s.math_mode = math ? NN_MATH_TF32 : NN_MATH_STRICT_FP32;
    struct bench B = {0};
    B.first = first;
    if (nn_ctx_create(&B.ctx, &s) != NN_OK) {
        fprintf(stderr, "nnprim bench conv: cannot create a context: %s\n",
                nn_last_error()->message);
        return 1;
    }
    B.gpu = nn_ctx_backend(B.ctx) == NN_BACKEND_CUDNN;
    B.reps = reps > 0 ? reps : B.gpu ? 100 : 5;
    B.warmup = warmup >= 0 ? warmup : B.gpu ? 10 : 1;
    if (B.first) {
        printf("# nnprim bench conv: backend %s, math %s, first calls, ms from the call to the end "
               "of its GPU work\n",
               B.gpu ? "cudnn" : "ref", s.math_mode == NN_MATH_TF32 ? "tf32" : "strict");
        printf(" %13s %13s %13s", "fwd_first_ms", "data_first_ms", "filt_first_ms");
    } else {
        printf("# nnprim bench conv: backend %s, math %s, timing %s, median of %d after %d "
               "warm-up\n",
               B.gpu ? "cudnn" : "ref", s.math_mode == NN_MATH_TF32 ? "tf32" : "strict",
               B.gpu ? "CUDA events" : "host clock", B.reps, B.warmup);
        for (size_t i = 0; i < N_COLUMNS; i++)
            printf(" %13s", columns[i].title);
    }
    printf("  shape\n");
    int rc = 0;
    if (one) {
        if (bench_line(&B, one, "--case") < 0) rc = 2;
    } else if (shapes) {
        rc = nn_cli_each_case("nnprim bench conv", shapes, &B.cases, bench_line, &B);
    } else {
        for (size_t i = 0; i < sizeof small_shapes / sizeof small_shapes[0]; i++)
            bench_line(&B, small_shapes[i], "built-in shape");
    }
    if (B.first && B.after_first > 0)
        printf("# shapes after the first: %d; first calls summed: fwd %.1f ms, data %.1f ms, "
               "filter %.1f ms, all %.1f ms; %d of %d calls over 1 ms; slowest %.1f ms (%s)\n",
               B.after_first, B.sum_ms[0], B.sum_ms[1], B.sum_ms[2],
               B.sum_ms[0] + B.sum_ms[1] + B.sum_ms[2], B.over_1ms, 3 * B.after_first, B.max_ms,
               B.max_what);
    nn_ctx_destroy(B.ctx);
    return rc;
}

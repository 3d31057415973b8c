/* nnprim bench softmax: softmax, log-softmax and softmax cross-entropy, forward and
 * forward+backward per case, timed like the other areas: on a cuDNN context the GPU time of
 * each call from CUDA events (nn_cli_gpu_median_us), on a reference context the host clock;
 * the median after warm-up calls. It takes the case syntax of docs/SOFTMAX.md and whole
 * NNPRIM_VERBOSE lines, so that a softmax line of a framework's log can be timed alone. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/args.h"
#include "cli/bench_util.h"
#include "cli/cli.h"
#include "nnprim/nnprim.h"
#include "tests/harness/softmax_case.h"

/* A language model's loss over 10000 words, a 1000-class classifier and per-pixel log-softmax
 * of a segmentation head (GPU); small ones on the reference backend. */
static const char *const gpu_shapes[] = {"n2048c10000 xent i64 f32", "n256c1000 softmax f32",
                                         "n8c21s128x128 log f16"};
static const char *const cpu_shapes[] = {"n64c100 xent i64 f32", "n32c10s4x4 log f32"};

struct bench {
    nn_ctx *ctx;
    int gpu, reps, warmup;
    int case_no, cases; /* progress through a shape file (cases 0: no file) */
};

struct problem {
    nn_ctx *ctx;
    struct nn_softmax_case c;
    nn_tensor x, y, dy, dx;
    void *targets; /* xent: host memory, one index per sample */
    int backward;  /* the timed call also runs the backward pass */
};

static void problem_free(struct problem *pr)
{
    nn_tensor *all[] = {&pr->x, &pr->y, &pr->dy, &pr->dx};
    for (int i = 0; i < 4; i++)
        if (all[i]->data) nn_tensor_free(pr->ctx, all[i]);
    free(pr->targets);
}

/* The tensors of case c: x and dx with its dims; y and dy with x's dims, or the loss's (x's
 * dims without C) for the cross-entropy; valid targets. Returns NULL, or what failed. */
static const char *problem_init(nn_ctx *ctx, const struct nn_softmax_case *c, struct problem *pr)
{
    memset(pr, 0, sizeof *pr);
    pr->ctx = ctx;
    pr->c = *c;
    int64_t ld[NN_MAX_RANK], samples = 1;
    int lrank = 0;
    for (int i = 0; i < c->rank; i++)
        if (i != 1) samples *= ld[lrank++] = c->dims[i];
    int yrank = c->xent ? lrank : c->rank;
    const int64_t *yd = c->xent ? ld : c->dims;
    nn_status st = nn_tensor_empty(ctx, c->dtype, c->rank, c->dims, &pr->x);
    if (st == NN_OK) st = nn_tensor_empty(ctx, c->dtype, c->rank, c->dims, &pr->dx);
    if (st == NN_OK) st = nn_tensor_empty(ctx, c->dtype, yrank, yd, &pr->y);
    if (st == NN_OK) st = nn_tensor_empty(ctx, c->dtype, yrank, yd, &pr->dy);
    if (st == NN_OK) st = nn_tensor_fill_uniform(ctx, &pr->x, -4, 4, 1);
    if (st == NN_OK) st = nn_tensor_fill_uniform(ctx, &pr->dy, -1, 1, 2);
    if (st == NN_OK) st = nn_tensor_fill_constant(ctx, &pr->dx, 0);
    if (st == NN_OK && c->xent) {
        size_t es = c->index == NN_INDEX_I32 ? sizeof(int32_t) : sizeof(int64_t);
        pr->targets = malloc((size_t)samples * es);
        if (!pr->targets) return "out of host memory for the targets";
        for (int64_t i = 0; i < samples; i++) {
            int64_t t = (i * 7919) % c->dims[1];
            if (c->index == NN_INDEX_I32)
                ((int32_t *)pr->targets)[i] = (int32_t)t;
            else
                ((int64_t *)pr->targets)[i] = t;
        }
    }
    return st == NN_OK ? NULL : nn_last_error()->message;
}

static int step(void *arg)
{
    struct problem *pr = arg;
    nn_ctx *ctx = pr->ctx;
    nn_backward_options o = {.accumulate = pr->c.accumulate}; /* the case's accdx */
    if (pr->c.xent) {
        nn_class_targets t = {.data = pr->targets, .type = pr->c.index};
        nn_softmax_cross_entropy_pullback *pb = NULL;
        if (nn_softmax_cross_entropy_forward(ctx, &pr->x, &t, &pr->y, pr->backward ? &pb : NULL))
            return -1;
        if (pr->backward && nn_softmax_cross_entropy_backward_ex(ctx, &pb, &o, &pr->dy, &pr->dx)) {
            nn_softmax_cross_entropy_pullback_free(&pb);
            return -1;
        }
        return 0;
    }
    nn_softmax_pullback *pb = NULL;
    if (nn_softmax_forward(ctx, &pr->c.p, &pr->x, &pr->y, pr->backward ? &pb : NULL)) return -1;
    if (pr->backward && nn_softmax_backward_ex(ctx, &pb, &o, &pr->dy, &pr->dx)) {
        nn_softmax_pullback_free(&pb);
        return -1;
    }
    return 0;
}

/* Median microseconds per step after the warm-up; negative on failure. */
static double median_us(struct bench *B, struct problem *pr)
{
    for (int i = 0; i < B->warmup; i++)
        if (step(pr)) return -1;
    if (B->gpu) return nn_cli_gpu_median_us(nn_ctx_stream(B->ctx), B->reps, step, pr);
    double *t = malloc((size_t)B->reps * sizeof *t), m = 0;
    if (!t) return -1;
    for (int i = 0; i < B->reps && m >= 0; i++) {
        double t0 = nn_cli_now_us();
        m = t[i] = step(pr) ? -1 : nn_cli_now_us() - t0;
    }
    if (m >= 0) m = nn_cli_median(t, B->reps);
    free(t);
    return m;
}

/* One line of cases: -1 after a usage error (a case that does not parse), else 0. */
static int bench_line(void *arg, const char *line, const char *where)
{
    struct bench *B = arg;
    struct nn_softmax_case c;
    char err[256], text[256];
    int got = nn_softmax_case_parse_line(line, &c, err, sizeof err);
    if (got < 0) {
        fprintf(stderr, "nnprim bench softmax: %s: %s\n", where, err);
        return -1;
    }
    if (got == 0) return 0;
    nn_softmax_case_format(&c, text, sizeof text);
    if (B->cases) nn_cli_progress("nnprim bench softmax", ++B->case_no, B->cases, text);
    double elems = 1;
    for (int i = 0; i < c.rank; i++)
        elems *= (double)c.dims[i];
    /* a few operations per element and pass; forward and forward+backward, warm-up and timed */
    if (!B->gpu) nn_cli_warn_slow("nnprim bench softmax", text, 30 * elems * (B->warmup + B->reps));
    struct problem pr;
    double us[2] = {-1, -1};
    const char *failed = problem_init(B->ctx, &c, &pr);
    if (failed) printf("# %s: %s\n", text, failed);
    for (int bwd = 0; bwd < 2 && !failed; bwd++) {
        pr.backward = bwd;
        us[bwd] = median_us(B, &pr);
    }
    problem_free(&pr);
    for (int i = 0; i < 2; i++)
        if (us[i] < 0)
            printf(" %12s", "error");
        else
            printf(" %12.2f", us[i]);
    printf("  %s\n", text);
    fflush(stdout);
    return 0;
}

int nn_cli_bench_softmax(int argc, char **argv)
{
    nn_settings s;
    if (nn_settings_from_env(&s) != NN_OK) {
        fprintf(stderr, "nnprim bench softmax: %s\n", nn_last_error()->message);
        return 1;
    }
    const char *shapes = NULL, *one = NULL;
    int reps = 0, warmup = -1, backend = -1;
    const struct nn_cli_opt opts[] = {
        {"--shapes", NN_CLI_STRING, &shapes, "FILE",
         "the cases of FILE (docs/SOFTMAX.md syntax or verbose lines)", 0, 0, NULL},
        {"--case", NN_CLI_STRING, &one, "TEXT", "one case, or a whole verbose line (quote it)", 0,
         0, NULL},
        {"--reps", NN_CLI_INT, &reps, "N", "timed calls (default 100 GPU, 5 reference)", 1, 1000000,
         NULL},
        {"--warmup", NN_CLI_INT, &warmup, "N", "untimed calls first (default 10 GPU, 1 reference)",
         0, 1000000, NULL},
        {"--backend", NN_CLI_CHOICE, &backend, NULL, "default: NNPRIM_BACKEND, else auto", 0, 0,
         "ref|cudnn"},
    };
    const struct nn_cli_cmd cmd = {
        "nnprim bench softmax", "[CASE...]",
        "Times softmax, log-softmax or the softmax cross-entropy per case: the forward call, and\n"
        "forward + backward (GPU time from CUDA events on a cuDNN context, host time on the\n"
        "reference one), median after warm-up, in microseconds. Without --shapes or --case a few\n"
        "built-in cases run.\n",
        opts, NN_CLI_NOPTS(opts)};
    int operands, prc = nn_cli_parse(&cmd, argc, argv, &operands);
    if (prc == NN_CLI_RUN) prc = nn_cli_case_operands(&cmd, argc, argv, operands, &one);
    if (prc != NN_CLI_RUN) return prc;
    if (shapes && one) return nn_cli_usage_error(&cmd, "takes --shapes or --case, not both");
    if (one) { /* refused before anything starts */
        struct nn_softmax_case c;
        char err[256];
        int got = nn_softmax_case_parse_line(one, &c, err, sizeof err);
        if (got == 0) snprintf(err, sizeof err, "an empty case");
        if (got != 1) return nn_cli_usage_error(&cmd, "--case: %s", err);
    }
    if (backend >= 0) s.backend = backend ? NN_BACKEND_CUDNN : NN_BACKEND_REF;
    struct bench B = {0};
    if (nn_ctx_create(&B.ctx, &s) != NN_OK) {
        fprintf(stderr, "nnprim bench softmax: cannot create a context: %s\n",
                nn_last_error()->message);
        return 1;
    }
    B.gpu = nn_ctx_backend(B.ctx) == NN_BACKEND_CUDNN;
    B.reps = reps > 0 ? reps : B.gpu ? 100 : 5;
    B.warmup = warmup >= 0 ? warmup : B.gpu ? 10 : 1;
    printf("# nnprim bench softmax: backend %s, timing %s, median of %d after %d warm-up\n",
           B.gpu ? "cudnn" : "ref", B.gpu ? "CUDA events" : "host clock", B.reps, B.warmup);
    printf(" %12s %12s  case\n", "fwd_us", "fwd_bwd_us");
    int rc = 0;
    if (one) {
        if (bench_line(&B, one, "--case") < 0) rc = 2;
    } else if (shapes) {
        rc = nn_cli_each_case("nnprim bench softmax", shapes, &B.cases, bench_line, &B);
    } else {
        const char *const *list = B.gpu ? gpu_shapes : cpu_shapes;
        size_t n = B.gpu ? sizeof gpu_shapes / sizeof gpu_shapes[0]
                         : sizeof cpu_shapes / sizeof cpu_shapes[0];
        for (size_t i = 0; i < n; i++)
            bench_line(&B, list[i], "built-in case");
    }
    nn_ctx_destroy(B.ctx);
    return rc;
}

/* nnprim bench layernorm: layer normalisation, forward and forward+backward (dx, dgamma and
 * dbeta as the case asks) per case, timed like the other areas: on a cuDNN context the GPU time
 * of each call from CUDA events (nn_cli_gpu_median_us), on a reference context the host clock;
 * the median after warm-up calls. It takes the case syntax of docs/LAYERNORM.md and whole
 * NNPRIM_VERBOSE lines, so that a layer-norm line of a framework's log can be timed alone. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/args.h"
#include "cli/bench_util.h"
#include "cli/cli.h"
#include "nnprim/nnprim.h"
#include "tests/harness/layernorm_case.h"

/* A transformer's layer norms (BERT-base and a 4096-wide model, bf16) and a vision model's
 * channels-last rows (GPU); small ones on the reference backend. */
static const char *const gpu_shapes[] = {"d32x128x768 k1 gamma beta f32",
                                         "d8x1024x4096 k1 gamma beta bf16",
                                         "d64x3136x96 k1 gamma beta f16"};
static const char *const cpu_shapes[] = {"d16x64x128 k1 gamma beta f32", "d8x6x32 k2 f32"};

struct bench {
    nn_ctx *ctx;
    int gpu, reps, warmup;
    int case_no, cases; /* progress through a shape file (cases 0: no file) */
};

struct problem {
    nn_ctx *ctx;
    struct nn_layernorm_case c;
    nn_tensor x, y, dy, g, b, dx, dg, db; /* g, b, dg, db: data NULL when the case has none */
    int backward;                         /* the timed call also runs the backward pass */
};

static void problem_free(struct problem *pr)
{
    nn_tensor *all[] = {&pr->x, &pr->y, &pr->dy, &pr->g, &pr->b, &pr->dx, &pr->dg, &pr->db};
    for (int i = 0; i < 8; i++)
        if (all[i]->data) nn_tensor_free(pr->ctx, all[i]);
}

static nn_status make(nn_ctx *ctx, const struct nn_layernorm_case *c, int whole, nn_tensor *t)
{
    int k = c->p.normalized_rank, r = whole ? c->rank : k;
    nn_status st = nn_tensor_empty(ctx, c->dtype, r, c->dims + (c->rank - r), t);
    return st == NN_OK ? nn_tensor_fill_uniform(ctx, t, -1, 1, 1) : st;
}

/* The tensors of case c. Returns NULL, or what failed. */
static const char *problem_init(nn_ctx *ctx, const struct nn_layernorm_case *c, struct problem *pr)
{
    memset(pr, 0, sizeof *pr);
    pr->ctx = ctx;
    pr->c = *c;
    nn_status st = make(ctx, c, 1, &pr->x);
    if (st == NN_OK) st = make(ctx, c, 1, &pr->y);
    if (st == NN_OK) st = make(ctx, c, 1, &pr->dy);
    if (st == NN_OK && !(c->skip & NN_H_SKIP_DX)) st = make(ctx, c, 1, &pr->dx);
    if (st == NN_OK && c->gamma) st = make(ctx, c, 0, &pr->g);
    if (st == NN_OK && c->beta) st = make(ctx, c, 0, &pr->b);
    if (st == NN_OK && c->gamma && !(c->skip & NN_H_SKIP_DW)) st = make(ctx, c, 0, &pr->dg);
    if (st == NN_OK && c->beta && !(c->skip & NN_H_SKIP_DB)) st = make(ctx, c, 0, &pr->db);
    return st == NN_OK ? NULL : nn_last_error()->message;
}

static nn_tensor *opt(nn_tensor *t)
{
    return t->data ? t : NULL;
}

static int step(void *arg)
{
    struct problem *pr = arg;
    nn_ctx *ctx = pr->ctx;
    nn_backward_options o = {.accumulate = pr->c.accumulate}; /* the case's accdx, accdw, accdb */
    nn_layernorm_pullback *pb = NULL;
    if (nn_layernorm_forward(ctx, &pr->c.p, &pr->x, opt(&pr->g), opt(&pr->b), &pr->y,
                             pr->backward ? &pb : NULL))
        return -1;
    if (pr->backward &&
        nn_layernorm_backward_ex(ctx, &pb, &o, &pr->dy, opt(&pr->dx), opt(&pr->dg), opt(&pr->db))) {
        nn_layernorm_pullback_free(&pb);
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
    struct nn_layernorm_case c;
    char err[256], text[256];
    int got = nn_layernorm_case_parse_line(line, &c, err, sizeof err);
    if (got < 0) {
        fprintf(stderr, "nnprim bench layernorm: %s: %s\n", where, err);
        return -1;
    }
    if (got == 0) return 0;
    nn_layernorm_case_format(&c, text, sizeof text);
    if (B->cases) nn_cli_progress("nnprim bench layernorm", ++B->case_no, B->cases, text);
    double elems = 1;
    for (int i = 0; i < c.rank; i++)
        elems *= (double)c.dims[i];
    /* a few operations per element and pass; forward and forward+backward, warm-up and timed */
    if (!B->gpu)
        nn_cli_warn_slow("nnprim bench layernorm", text, 30 * elems * (B->warmup + B->reps));
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

int nn_cli_bench_layernorm(int argc, char **argv)
{
    nn_settings s;
    if (nn_settings_from_env(&s) != NN_OK) {
        fprintf(stderr, "nnprim bench layernorm: %s\n", nn_last_error()->message);
        return 1;
    }
    const char *shapes = NULL, *one = NULL;
    int reps = 0, warmup = -1, backend = -1;
    const struct nn_cli_opt opts[] = {
        {"--shapes", NN_CLI_STRING, &shapes, "FILE",
         "the cases of FILE (docs/LAYERNORM.md syntax or verbose lines)", 0, 0, NULL},
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
        "nnprim bench layernorm", "[CASE...]",
        "Times layer normalisation per case: the forward call, and\n"
        "forward + backward (GPU time from CUDA events on a cuDNN context, host time on the\n"
        "reference one), median after warm-up, in microseconds. Without --shapes or --case a few\n"
        "built-in cases run.\n",
        opts, NN_CLI_NOPTS(opts)};
    int operands, prc = nn_cli_parse(&cmd, argc, argv, &operands);
    if (prc == NN_CLI_RUN) prc = nn_cli_case_operands(&cmd, argc, argv, operands, &one);
    if (prc != NN_CLI_RUN) return prc;
    if (shapes && one) return nn_cli_usage_error(&cmd, "takes --shapes or --case, not both");
    if (one) { /* refused before anything starts */
        struct nn_layernorm_case c;
        char err[256];
        int got = nn_layernorm_case_parse_line(one, &c, err, sizeof err);
        if (got == 0) snprintf(err, sizeof err, "an empty case");
        if (got != 1) return nn_cli_usage_error(&cmd, "--case: %s", err);
    }
    if (backend >= 0) s.backend = backend ? NN_BACKEND_CUDNN : NN_BACKEND_REF;
    struct bench B = {0};
    if (nn_ctx_create(&B.ctx, &s) != NN_OK) {
        fprintf(stderr, "nnprim bench layernorm: cannot create a context: %s\n",
                nn_last_error()->message);
        return 1;
    }
    B.gpu = nn_ctx_backend(B.ctx) == NN_BACKEND_CUDNN;
    B.reps = reps > 0 ? reps : B.gpu ? 100 : 5;
    B.warmup = warmup >= 0 ? warmup : B.gpu ? 10 : 1;
    printf("# nnprim bench layernorm: backend %s, timing %s, median of %d after %d warm-up\n",
           B.gpu ? "cudnn" : "ref", B.gpu ? "CUDA events" : "host clock", B.reps, B.warmup);
    printf(" %12s %12s  case\n", "fwd_us", "fwd_bwd_us");
    int rc = 0;
    if (one) {
        if (bench_line(&B, one, "--case") < 0) rc = 2;
    } else if (shapes) {
        rc = nn_cli_each_case("nnprim bench layernorm", shapes, &B.cases, bench_line, &B);
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

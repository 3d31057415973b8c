/* nnprim bench models: the time of one training step (forward, backward and the SGD update with
 * momentum) of the examples' two models, built by examples/models.c, the code the examples train
 * with: the LSTM language model of examples/lstm_lm.c and the classifier of
 * examples/cnn_classifier.c, each at the example's size and at a larger one, in strict fp32 and
 * TF32. bench/torch_models.py runs the same models in PyTorch and prints rows of the same form.
 *
 * A step's time is the wall time of reps steps issued back to back, from the first call to the
 * end of a final synchronisation, divided by reps (as bench/torch_models.py measures PyTorch).
 * Two rows per model on a GPU: nnprim (the calls issued one by one) and nnprim-graph (the whole
 * step captured once, include/nnprim/graph.h, and launched on the same batch, as
 * bench/torch_models.py replays PyTorch's captured step). Without a GPU (or with --cpu): small
 * sizes on the reference backend, host timing, eager only. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/args.h"
#include "cli/bench_util.h"
#include "cli/cli.h"
#include "examples/models.h"
#include "nnprim/nnprim.h"

/* The LSTM sizes use the vocabulary of examples/data/tiny.txt (35 symbols). */
static const struct lstm_lm_config lstm_gpu[] = {
    {.batch = 32, .seq = 32, .hidden = 128, .vocab = 35, .layers = 2}, /* lstm_lm's defaults */
    {.batch = 64, .seq = 32, .hidden = 512, .vocab = 35, .layers = 2},
};
static const struct cnn_config cnn_gpu[] = {
    {.batch = 256, .size = 8, .c1 = 8, .c2 = 8, .classes = 4}, /* cnn_classifier's */
    {.batch = 64, .size = 32, .c1 = 8, .c2 = 8, .classes = 4},
};
static const struct lstm_lm_config lstm_cpu[] = {
    {.batch = 4, .seq = 8, .hidden = 16, .vocab = 35, .layers = 2}};
static const struct cnn_config cnn_cpu[] = {
    {.batch = 16, .size = 8, .c1 = 8, .c2 = 8, .classes = 4}};

#define LR 0.01 /* small: the weights stay sane over the timed steps */
#define MU 0.9

struct opts {
    int reps, warmup, cpu, lstm, cnn, strict, tf32;
};

static int parse(int argc, char **argv, struct opts *o)
{
    *o = (struct opts){0};
    int model = 0, math = 0;
    const struct nn_cli_opt opts[] = {
        {"--reps", NN_CLI_INT, &o->reps, "N", "timed steps (default 50 GPU, 3 reference)", 1,
         1000000, NULL},
        {"--warmup", NN_CLI_INT, &o->warmup, "N",
         "untimed steps first (default 10 GPU, 1 reference)", 1, 1000000, NULL},
        {"--model", NN_CLI_CHOICE, &model, NULL, "one model only (default both)", 0, 0,
         "both|lstm|cnn"},
        {"--math", NN_CLI_CHOICE, &math, NULL, "one math mode only (default both)", 0, 0,
         "both|strict|tf32"},
        {"--cpu", NN_CLI_FLAG, &o->cpu, NULL, "small sizes on the reference backend", 0, 0, NULL},
    };
    const struct nn_cli_cmd cmd = {
        "nnprim bench models", NULL,
        "One training step (forward, backward, SGD with momentum) of the examples' models\n"
        "(examples/models.c): lstm_lm n32t32h128v35l2 (example_lstm_lm's size) and\n"
        "n64t32h512v35l2; cnn n256s8c8c8k4 (example_cnn_classifier's) and n64s32c8c8k4; in strict\n"
        "fp32 and TF32, each on a fresh context; wall us per step, steps back to back, and the\n"
        "device pool's peak use (MiB, the model's tensors included); each issued call by call\n"
        "(nnprim) and as one CUDA graph (nnprim-graph). --cpu (or no GPU): small sizes on the\n"
        "reference backend, call by call. bench/torch_models.py prints the same rows for "
        "PyTorch.\n",
        opts, NN_CLI_NOPTS(opts)};
    int first, rc = nn_cli_parse(&cmd, argc, argv, &first);
    if (rc != NN_CLI_RUN) return rc;
    o->lstm = model != 2, o->cnn = model != 1;
    o->strict = math != 2, o->tf32 = math != 1;
    return NN_CLI_RUN;
}

static int fail(const char *what, nn_status st)
{
    fprintf(stderr, "nnprim bench models: %s: %s (%s)\n", what, nn_last_error()->message,
            nn_status_name(st));
    return 1;
}

/* One model at one size, ready to step. */
struct bench_model {
    nn_ctx *ctx;
    int is_lstm;
    struct lstm_lm lm;
    struct cnn cnn;
    nn_tensor x;  /* the classifier's images */
    int32_t *cls; /* and their classes */
};

static nn_status step(struct bench_model *b)
{
    return b->is_lstm ? lstm_lm_step(b->ctx, &b->lm, LR, MU)
                      : cnn_step(b->ctx, &b->cnn, &b->x, b->cls, LR, MU);
}

/* The graph row's step: the model's *_step_graph (its first call eager, its second the capture)
 * until the graph exists, then launches of it on the batch it holds. */
static nn_status step_graph(struct bench_model *b)
{
    nn_graph *g = b->is_lstm ? b->lm.graph.g : b->cnn.graph.g;
    if (g) return nn_graph_launch(b->ctx, g);
    /* the step that captures also feeds the batch in once: the launches then run on it */
    return b->is_lstm ? lstm_lm_step_graph(b->ctx, &b->lm, LR, MU)
                      : cnn_step_graph(b->ctx, &b->cnn, &b->x, b->cls, LR, MU);
}

static uint64_t rng = 0x9e3779b97f4a7c15ULL;

static uint64_t next_random(void)
{
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return rng;
}

static nn_status lstm_setup(struct bench_model *b, const struct lstm_lm_config *c)
{
    nn_status st = lstm_lm_init(b->ctx, &b->lm, c, 1);
    if (st != NN_OK) return st;
    size_t n = (size_t)(c->batch * (c->seq + 1));
    uint8_t *seqs = malloc(n);
    if (!seqs) return NN_E_OOM_HOST;
    for (size_t i = 0; i < n; i++)
        seqs[i] = (uint8_t)(next_random() % (uint64_t)c->vocab);
    st = lstm_lm_set_batch(b->ctx, &b->lm, seqs);
    free(seqs);
    return st;
}

static nn_status cnn_setup(struct bench_model *b, const struct cnn_config *c)
{
    nn_status st = cnn_init(b->ctx, &b->cnn, c, 1);
    if (st != NN_OK) return st;
    int64_t dims[4] = {c->batch, 1, c->size, c->size};
    st = nn_tensor_empty(b->ctx, NN_DTYPE_F32, 4, dims, &b->x);
    if (st == NN_OK) st = nn_tensor_fill_uniform(b->ctx, &b->x, 0, 1, 7);
    b->cls = malloc((size_t)c->batch * sizeof *b->cls);
    if (!b->cls) return st == NN_OK ? NN_E_OOM_HOST : st;
    for (int64_t i = 0; i < c->batch; i++)
        b->cls[i] = (int32_t)(next_random() % (uint64_t)c->classes);
    return st;
}

static void bench_model_free(struct bench_model *b)
{
    if (b->is_lstm) {
        lstm_lm_free(b->ctx, &b->lm);
    } else {
        cnn_free(b->ctx, &b->cnn);
        if (b->x.data) nn_tensor_free(b->ctx, &b->x);
        free(b->cls);
    }
}

/* Wall us per step of reps steps back to back after warmup, or -1 (the failure printed). */
static double time_steps(struct bench_model *b, nn_status (*fn)(struct bench_model *b), int warmup,
                         int reps)
{
    nn_status st = NN_OK;
    for (int i = 0; i < warmup && st == NN_OK; i++)
        st = fn(b);
    if (st == NN_OK) st = nn_ctx_synchronize(b->ctx);
    double t0 = nn_cli_now_us();
    for (int i = 0; i < reps && st == NN_OK; i++)
        st = fn(b);
    if (st == NN_OK) st = nn_ctx_synchronize(b->ctx);
    if (st != NN_OK) {
        fail("training step", st);
        return -1;
    }
    return (nn_cli_now_us() - t0) / reps;
}

static void lstm_name(const struct lstm_lm_config *c, char *buf, size_t cap)
{
    snprintf(buf, cap, "n%lldt%lldh%lldv%lldl%lld", (long long)c->batch, (long long)c->seq,
             (long long)c->hidden, (long long)c->vocab, (long long)c->layers);
}

static void cnn_name(const struct cnn_config *c, char *buf, size_t cap)
{
    snprintf(buf, cap, "n%llds%lldc%lldc%lldk%lld", (long long)c->batch, (long long)c->size,
             (long long)c->c1, (long long)c->c2, (long long)c->classes);
}

static nn_ctx *make_ctx(nn_backend backend, nn_math_mode math)
{
    nn_settings s;
    nn_settings_from_env(&s);
    s.backend = backend;
    s.math_mode = math;
    nn_ctx *ctx = NULL;
    nn_status st = nn_ctx_create(&ctx, &s);
    if (st != NN_OK) fail("creating a context", st);
    return ctx;
}

/* The device pool's peak since the last reset, in MiB; -1 without a pool (reference). */
static double peak_mib(nn_ctx *ctx)
{
    nn_settings s;
    nn_mem_stats m;
    if (nn_ctx_backend(ctx) != NN_BACKEND_CUDNN || nn_ctx_get_settings(ctx, &s) != NN_OK ||
        nn_mem_get_stats(s.device, &m) != NN_OK)
        return -1;
    return (double)m.allocated_bytes_peak / (1024.0 * 1024.0);
}

/* One row on a context of its own: model, size, math, impl, the step's time, and the pool's peak
 * from the model's creation to its last step (its tensors, the steps' transient memory, what the
 * context keeps for the shapes, a graph's own memory). */
static int run_one(nn_backend backend, nn_math_mode mode, const struct lstm_lm_config *lc,
                   const struct cnn_config *cc, int graph, int warmup, int reps)
{
    nn_ctx *ctx = make_ctx(backend, mode);
    if (!ctx) return 1;
    const char *math = mode == NN_MATH_TF32 ? "tf32" : "strict";
    nn_settings set;
    if (nn_ctx_backend(ctx) == NN_BACKEND_CUDNN && nn_ctx_get_settings(ctx, &set) == NN_OK)
        (void)nn_mem_reset_peak_stats(set.device);
    struct bench_model b;
    memset(&b, 0, sizeof b);
    b.ctx = ctx;
    b.is_lstm = lc != NULL;
    char name[64];
    if (lc)
        lstm_name(lc, name, sizeof name);
    else
        cnn_name(cc, name, sizeof name);
    nn_status st = lc ? lstm_setup(&b, lc) : cnn_setup(&b, cc);
    /* the graph row's warm-up holds its eager step and its capture */
    double us = st == NN_OK
                    ? time_steps(&b, graph ? step_graph : step, graph ? warmup + 2 : warmup, reps)
                    : -1;
    if (st != NN_OK) fail("building the model", st);
    double peak = peak_mib(ctx);
    bench_model_free(&b);
    nn_ctx_destroy(ctx);
    if (us < 0) return 1;
    printf("%-8s %-18s %-7s %-12s %12.1f", lc ? "lstm_lm" : "cnn", name, math,
           graph ? "nnprim-graph" : "nnprim", us);
    if (peak < 0)
        printf(" %10s\n", "-");
    else
        printf(" %10.2f\n", peak);
    fflush(stdout);
    return 0;
}

int nn_cli_bench_models(int argc, char **argv)
{
    struct opts o;
    int prc = parse(argc, argv, &o);
    if (prc != NN_CLI_RUN) return prc;
    int ndev = 0;
    nn_device_count(&ndev);
    int gpu = !o.cpu && ndev > 0 && (nn_build_features() & NN_FEATURE_CUDNN);
    int reps = o.reps ? o.reps : gpu ? 50 : 3, warmup = o.warmup ? o.warmup : gpu ? 10 : 1;
    const struct lstm_lm_config *lc = gpu ? lstm_gpu : lstm_cpu;
    const struct cnn_config *cc = gpu ? cnn_gpu : cnn_cpu;
    size_t nl = gpu ? sizeof lstm_gpu / sizeof lstm_gpu[0] : 1;
    size_t nc = gpu ? sizeof cnn_gpu / sizeof cnn_gpu[0] : 1;
    if (gpu) {
        nn_settings s;
        nn_device_info d = {.name = "unknown device"};
        nn_settings_from_env(&s);
        nn_device_get_info(s.device, &d);
        printf("# nnprim %s, %s; wall us per training step (%d back to back after %d warm-up)\n",
               nn_version(), d.name, reps, warmup);
    } else {
        printf("# nnprim %s, reference backend; wall us per training step (%d after %d "
               "warm-up)\n",
               nn_version(), reps, warmup);
    }
    printf("%-8s %-18s %-7s %-12s %12s %10s\n", "model", "size", "math", "impl", "step_us",
           "peak_MiB");
    int rc = 0;
    for (int m = 0; m < 2 && !rc; m++) {
        int tf32 = m == 1;
        if (!(tf32 ? o.tf32 : o.strict) || (tf32 && !gpu)) continue;
        nn_backend backend = gpu ? NN_BACKEND_CUDNN : NN_BACKEND_REF;
        nn_math_mode mode = tf32 ? NN_MATH_TF32 : NN_MATH_STRICT_FP32;
        for (int graph = 0; graph <= gpu && !rc; graph++) {
            for (size_t i = 0; i < nl && o.lstm && !rc; i++)
                rc = run_one(backend, mode, &lc[i], NULL, graph, warmup, reps);
            for (size_t i = 0; i < nc && o.cnn && !rc; i++)
                rc = run_one(backend, mode, NULL, &cc[i], graph, warmup, reps);
        }
    }
    return rc;
}

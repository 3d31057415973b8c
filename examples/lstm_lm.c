/* A character-level language model trained with nnprim alone: one-hot characters -> 2-layer LSTM
 * -> linear -> softmax cross-entropy against the next character (the model of
 * examples/models.c), by SGD with momentum wherever the context computes. It trains on random
 * windows of a text (examples/data/tiny.txt by default) and prints the mean loss of each epoch next
 * to the text's unigram entropy, the loss of the best model that ignores context. The run ends with
 * status 1 unless the last epoch's loss is below --require times that entropy (0.8 by default).
 *
 *   example_lstm_lm [--text PATH] [--batch N] [--seq T] [--hidden H] [--layers L]
 *                   [--epochs E] [--lr LR] [--momentum MU] [--seed S]
 *                   [--backend auto|ref|cudnn] [--tf32] [--require R] [--time] [--graph]
 *     --time: also print the time per training step (each step waited for)
 *     --graph: run each step as one CUDA graph (include/nnprim/graph.h; cuDNN backend): the
 *              first step eagerly, then the captured step launched with each batch fed in
 *   An epoch is as many steps as the text has windows of N x T characters (at least one).
 *   The defaults (batch 32, seq 32, hidden 128, 2 layers, 100 epochs, lr 1, momentum 0.9) are
 *   sized for a GPU; the reference backend's test runs --batch 16 --seq 16 --hidden 32
 *   --epochs 8 --lr 2 in a few seconds. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <nnprim/nnprim.h>

#include "models.h"

struct opts {
    const char *text, *backend;
    struct lstm_lm_config cfg;
    int epochs, tf32, timing, graph;
    double lr, momentum, require;
    uint64_t seed;
};

static int usage(void)
{
    fprintf(stderr, "usage: example_lstm_lm [--text PATH] [--batch N] [--seq T] [--hidden H]\n"
                    "                       [--layers L] [--epochs E] [--lr LR] [--momentum MU]\n"
                    "                       [--seed S]"
                    " [--backend auto|ref|cudnn] [--tf32] [--require R] [--time]\n"
                    "                       [--graph]\n");
    return 2;
}

static int parse(int argc, char **argv, struct opts *o)
{
    *o = (struct opts){.text = "examples/data/tiny.txt",
                       .backend = "auto",
                       .cfg = {.batch = 32, .seq = 32, .hidden = 128, .layers = 2},
                       .epochs = 100,
                       .lr = 1.0,
                       .momentum = 0.9,
                       .require = 0.8,
                       .seed = 1};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--tf32")) {
            o->tf32 = 1;
            continue;
        }
        if (!strcmp(a, "--time")) {
            o->timing = 1;
            continue;
        }
        if (!strcmp(a, "--graph")) {
            o->graph = 1;
            continue;
        }
        if (!v) return usage();
        i++;
        if (!strcmp(a, "--text")) {
            o->text = v;
        } else if (!strcmp(a, "--backend")) {
            o->backend = v;
        } else if (!strcmp(a, "--lr")) {
            o->lr = atof(v);
        } else if (!strcmp(a, "--momentum")) {
            o->momentum = atof(v);
        } else if (!strcmp(a, "--require")) {
            o->require = atof(v);
        } else if (!strcmp(a, "--seed")) {
            o->seed = strtoull(v, NULL, 10);
        } else {
            int64_t n = atoll(v);
            if (n < 1) return usage();
            if (!strcmp(a, "--batch"))
                o->cfg.batch = n;
            else if (!strcmp(a, "--seq"))
                o->cfg.seq = n;
            else if (!strcmp(a, "--hidden"))
                o->cfg.hidden = n;
            else if (!strcmp(a, "--layers"))
                o->cfg.layers = n;
            else if (!strcmp(a, "--epochs"))
                o->epochs = (int)n;
            else
                return usage();
        }
    }
    return strcmp(o->backend, "auto") && strcmp(o->backend, "ref") && strcmp(o->backend, "cudnn")
               ? usage()
               : 0;
}

static nn_status check(nn_status st, const char *what)
{
    if (st != NN_OK)
        fprintf(stderr, "%s: %s: %s\n", what, nn_status_name(st), nn_last_error()->message);
    return st;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ---------------------------------------------------------------------------------------------
 * The text
 */

struct text {
    uint8_t *sym; /* the text as symbols 0..vocab-1 */
    long len;
    int vocab;
    double entropy; /* unigram entropy, nats per character */
};

/* The whole file at path, or NULL (with the reason printed). */
static unsigned char *read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        perror(path);
        return NULL;
    }
    unsigned char *raw = NULL;
    size_t cap = 0, got;
    *len = 0;
    do {
        if (*len == cap) {
            unsigned char *r = realloc(raw, cap = cap ? 2 * cap : 1 << 16);
            if (!r) {
                fprintf(stderr, "%s: out of memory\n", path);
                free(raw);
                fclose(f);
                return NULL;
            }
            raw = r;
        }
        got = fread(raw + *len, 1, cap - *len, f);
        *len += got;
    } while (got > 0);
    fclose(f);
    return raw;
}

static int text_load(const char *path, struct text *t)
{
    memset(t, 0, sizeof *t);
    size_t len;
    unsigned char *raw = read_file(path, &len);
    if (!raw) return 1;
    if (len < 2 || !(t->sym = malloc(len))) {
        fprintf(stderr, "%s: cannot load a text of 2 characters or more\n", path);
        free(raw);
        return 1;
    }
    long count[256] = {0};
    for (size_t i = 0; i < len; i++)
        count[raw[i]]++;
    int id[256];
    for (int c = 0; c < 256; c++)
        if (count[c]) {
            id[c] = t->vocab++;
            double p = (double)count[c] / (double)len;
            t->entropy -= p * log(p);
        }
    for (size_t i = 0; i < len; i++)
        t->sym[i] = (uint8_t)id[raw[i]];
    t->len = (long)len;
    free(raw);
    return 0;
}

static uint64_t rng = 0x9e3779b97f4a7c15ULL;

static uint64_t next_random(void)
{
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return rng;
}

/* N random windows of T + 1 symbols (wrapping around the end of the text). */
static void sample(const struct text *t, const struct lstm_lm_config *c, uint8_t *seqs)
{
    for (int64_t n = 0; n < c->batch; n++) {
        long start = (long)(next_random() % (uint64_t)t->len);
        for (int64_t j = 0; j <= c->seq; j++)
            seqs[n * (c->seq + 1) + j] = t->sym[(start + j) % t->len];
    }
}

/* ---------------------------------------------------------------------------------------------
 * Training
 */

static nn_status train(nn_ctx *ctx, const struct opts *o, const struct text *t, double *last)
{
    struct lstm_lm_config cfg = o->cfg;
    cfg.vocab = t->vocab;
    uint8_t *seqs = malloc((size_t)(cfg.batch * (cfg.seq + 1)));
    if (!seqs) return NN_E_OOM_HOST;
    struct lstm_lm m;
    nn_status st = check(lstm_lm_init(ctx, &m, &cfg, o->seed), "lstm_lm_init");
    if (st != NN_OK) {
        free(seqs);
        return st;
    }
    long steps = t->len / (long)(cfg.batch * cfg.seq);
    if (steps < 1) steps = 1;
    double t_train = 0;
    long timed = 0;
    for (int e = 0; e < o->epochs && st == NN_OK; e++) {
        double sum = 0;
        for (long s = 0; s < steps && st == NN_OK; s++) {
            sample(t, &cfg, seqs);
            double t0 = now_s(), loss = 0;
            st = check(lstm_lm_set_batch(ctx, &m, seqs), "lstm_lm_set_batch");
            if (st == NN_OK)
                st = o->graph ? check(lstm_lm_step_graph(ctx, &m, o->lr, o->momentum),
                                      "lstm_lm_step_graph")
                              : check(lstm_lm_step(ctx, &m, o->lr, o->momentum), "lstm_lm_step");
            if (st == NN_OK && o->timing) {
                st = check(nn_ctx_synchronize(ctx), "nn_ctx_synchronize");
                /* The first steps build plans and graphs: not part of the steady state. */
                if (e || s > 1) t_train += now_s() - t0, timed++;
            }
            if (st == NN_OK) st = check(lstm_lm_loss(ctx, &m, &loss), "lstm_lm_loss");
            sum += loss;
        }
        *last = sum / (double)steps;
        if (st == NN_OK) {
            printf("epoch %3d  loss %.4f nats/char  (%.3f of the unigram entropy)\n", e, *last,
                   *last / t->entropy);
            fflush(stdout);
        }
    }
    if (st == NN_OK && timed)
        printf("time per training step: %.3f ms (set batch + forward + backward + SGD, %ld "
               "steps)\n",
               t_train / (double)timed * 1e3, timed);
    lstm_lm_free(ctx, &m);
    free(seqs);
    return st;
}

int main(int argc, char **argv)
{
    struct opts o;
    if (parse(argc, argv, &o)) return 2;
    struct text t;
    if (text_load(o.text, &t)) return 1;
    rng ^= o.seed * 0x2545f4914f6cdd1dULL;
    nn_settings s;
    nn_settings_from_env(&s);
    if (!strcmp(o.backend, "ref")) s.backend = NN_BACKEND_REF;
    if (!strcmp(o.backend, "cudnn")) s.backend = NN_BACKEND_CUDNN;
    if (o.tf32) s.math_mode = NN_MATH_TF32;
    nn_ctx *ctx;
    if (check(nn_ctx_create(&ctx, &s), "nn_ctx_create")) {
        free(t.sym);
        return 1;
    }
    if (o.graph && nn_ctx_backend(ctx) != NN_BACKEND_CUDNN) {
        fprintf(stderr, "example_lstm_lm: --graph needs the cuDNN backend (CUDA graphs)\n");
        nn_ctx_destroy(ctx);
        free(t.sym);
        return 2;
    }
    printf("backend %s%s, %ld characters, vocabulary %d, batch %lld, seq %lld, hidden %lld, "
           "layers %lld\n",
           nn_ctx_backend(ctx) == NN_BACKEND_CUDNN ? "cudnn" : "ref",
           o.graph ? " (each step one CUDA graph)" : "", t.len, t.vocab, (long long)o.cfg.batch,
           (long long)o.cfg.seq, (long long)o.cfg.hidden, (long long)o.cfg.layers);
    printf("unigram entropy %.4f nats/char\n", t.entropy);
    double last = 0;
    nn_status st = train(ctx, &o, &t, &last);
    nn_ctx_destroy(ctx);
    free(t.sym);
    if (st != NN_OK) return 1;
    int ok = last < o.require * t.entropy;
    printf("final loss %.4f: %s %.2f x the unigram entropy (%.4f)\n", last,
           ok ? "below" : "NOT below", o.require, o.require * t.entropy);
    return ok ? 0 : 1;
}

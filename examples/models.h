/* The two models of the examples, written once and used by examples/lstm_lm.c,
 * examples/cnn_classifier.c and `nnprim bench models` (cli/bench_models.c), so that the step the
 * bench times is the step the examples train with.
 *
 * Every parameter of a model is a view into one packed value buffer, and every gradient a view
 * into one packed gradient buffer (struct model_arena), so the SGD update of the whole model is
 * one nn_optim_step() over one tensor: model_sgd(). Every tensor lives where the context computes
 * (device memory for a cuDNN context, host memory for a reference one); the models read back
 * only what is asked for (losses, predictions).
 *
 * On a cuDNN context each model's step can also run as one CUDA graph (include/nnprim/graph.h):
 * *_step_graph() runs the first step eagerly (every plan gets built), captures the second and
 * launches it, and launches the captured step from then on, the batch brought in by feeds.
 *
 * Each function returns NN_OK or the status of the nnprim call that failed (its message is in
 * nn_last_error()); a failed *_init leaves nothing allocated. */
#ifndef NNPRIM_EXAMPLES_MODELS_H
#define NNPRIM_EXAMPLES_MODELS_H

#include <stdint.h>

#include <nnprim/nnprim.h>

/* ---------------------------------------------------------------------------------------------
 * Parameters and the SGD update
 */

#define MODEL_MAX_PARAMS 8

struct model_arena {
    nn_tensor value, grad; /* rank 1, total elements each */
    nn_optim *opt;         /* SGD over value, made at the first update */
    double lr_held, mu_held;
    int64_t total;
};

/* SGD with momentum mu (PyTorch's torch.optim.SGD without dampening), for every parameter at
 * once: m = mu m + g (m = g at the first step); v -= lr m (mu = 0: v -= lr g), one
 * nn_optim_step() (include/nnprim/optim.h). A change of lr is a nn_optim_set_lr(); a change of
 * mu starts a new optimizer (its momentum from zero). */
nn_status model_sgd(nn_ctx *ctx, struct model_arena *a, double lr, double mu);

/* A model's captured step (*_step_graph): the graph, its class targets in device memory and the
 * momentum it was captured with. */
struct model_graph {
    nn_graph *g;
    void *targets; /* int32, one per loss element */
    double mu;
    int eager_done; /* the first, eager step ran */
};

/* ---------------------------------------------------------------------------------------------
 * Character-level language model: one-hot input -> 2-layer LSTM -> linear -> softmax
 * cross-entropy against the next symbol
 */

struct lstm_lm_config {
    int64_t batch;  /* N sequences per step */
    int64_t seq;    /* T symbols per sequence */
    int64_t hidden; /* H */
    int64_t vocab;  /* V symbols */
    int64_t layers; /* L */
};

struct lstm_lm {
    struct lstm_lm_config cfg;
    nn_ctx *host; /* a reference context: wraps host buffers for the copies */
    nn_rnn_params rnn;
    nn_linear_params head;
    struct model_arena arena;
    nn_tensor w, dw;   /* the LSTM's packed weights (rank 1) */
    nn_tensor hw, dhw; /* the head's weight [V, H] */
    nn_tensor hb, dhb; /* the head's bias [V] */
    nn_tensor x;       /* T x N x V, one-hot */
    nn_tensor y, dy;   /* T x N x H */
    nn_tensor logits;  /* T*N x V */
    nn_tensor dlogits; /* T*N x V */
    nn_tensor loss;    /* T*N */
    nn_tensor dloss;   /* T*N, 1 / (T*N): the gradient of the mean loss */
    int32_t *targets;  /* T*N, host: the symbol after each input symbol */
    float *x_host, *loss_host;
    struct model_graph graph;
};

/* A model with weights uniform in [-1/sqrt(H), 1/sqrt(H)] (PyTorch's default) from seed, the
 * same on every backend (the LSTM's are filled view by view). */
nn_status lstm_lm_init(nn_ctx *ctx, struct lstm_lm *m, const struct lstm_lm_config *cfg,
                       uint64_t seed);
void lstm_lm_free(nn_ctx *ctx, struct lstm_lm *m);

/* The next step's batch: seqs holds N sequences of T + 1 symbols in [0, V), one after the other;
 * sequence n's symbols 0..T-1 are its input and 1..T its targets. */
nn_status lstm_lm_set_batch(nn_ctx *ctx, struct lstm_lm *m, const uint8_t *seqs);

/* One training step on the current batch: forward, backward, SGD with lr and momentum mu. */
nn_status lstm_lm_step(nn_ctx *ctx, struct lstm_lm *m, double lr, double mu);

/* lstm_lm_step() as one CUDA graph (cuDNN contexts only; see the top): the batch that
 * lstm_lm_set_batch() copied into the model's input reaches it, and its targets by a feed. The
 * same results as lstm_lm_step(), bitwise on a deterministic context. */
nn_status lstm_lm_step_graph(nn_ctx *ctx, struct lstm_lm *m, double lr, double mu);

/* The mean loss (nats per symbol) of the last step (waits for the stream). */
nn_status lstm_lm_loss(nn_ctx *ctx, struct lstm_lm *m, double *mean);

/* ---------------------------------------------------------------------------------------------
 * Image classifier: conv 3x3 (+bias, relu) -> max pool 2x2 -> conv 3x3 (+bias, relu) -> linear
 * -> softmax cross-entropy
 */

struct cnn_config {
    int64_t batch;   /* N images per step */
    int64_t size;    /* images are size x size, one channel (even) */
    int64_t c1, c2;  /* the convolutions' output channels */
    int64_t classes; /* K */
};

struct cnn {
    struct cnn_config cfg;
    nn_ctx *host;
    nn_conv_params conv1, conv2;
    nn_pool_params pool;
    nn_linear_params fc;
    struct model_arena arena;
    nn_tensor w1, dw1, b1, db1, w2, dw2, b2, db2, w3, dw3, b3, db3;
    nn_tensor h1, h2, h3, logits, loss, dloss, dlogits, dh3, dh2, dh1;
    float *host_buf; /* N * K floats: logits or losses read back */
    nn_tensor gx;    /* the captured step's input (cnn_step_graph), the batch fed in */
    struct model_graph graph;
};

/* A model with the weights uniform in small ranges from seed, the same on every backend. */
nn_status cnn_init(nn_ctx *ctx, struct cnn *m, const struct cnn_config *cfg, uint64_t seed);
void cnn_free(nn_ctx *ctx, struct cnn *m);

/* One training step on images x (N x 1 x size x size, where ctx computes) with host classes t
 * (N int32 values in [0, K)): forward, backward, SGD with lr and momentum mu. */
nn_status cnn_step(nn_ctx *ctx, struct cnn *m, const nn_tensor *x, const int32_t *t, double lr,
                   double mu);

/* cnn_step() as one CUDA graph (cuDNN contexts only; see the top): x (x's dims must stay those
 * of the first call) and t are fed in at each launch. The same results as cnn_step(), bitwise on
 * a deterministic context. */
nn_status cnn_step_graph(nn_ctx *ctx, struct cnn *m, const nn_tensor *x, const int32_t *t,
                         double lr, double mu);

/* The mean loss of the last step (waits for the stream). */
nn_status cnn_loss(nn_ctx *ctx, struct cnn *m, double *mean);

/* The fraction of the images x whose largest logit is their class t (inference, no pullbacks). */
nn_status cnn_accuracy(nn_ctx *ctx, struct cnn *m, const nn_tensor *x, const int32_t *t,
                       double *acc);

#endif

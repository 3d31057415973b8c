/* The examples' two models (see models.h). */
#include "models.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TRY(call)                                                                                  \
    do {                                                                                           \
        nn_status st_ = (call);                                                                    \
        if (st_ != NN_OK) return st_;                                                              \
    } while (0)

/* A packed view of t's memory from element offset on, with other dims. */
static nn_tensor view_of(const nn_tensor *t, int64_t offset, int rank, const int64_t *dims)
{
    nn_tensor v = *t;
    v.data = (char *)t->data + (size_t)offset * nn_dtype_size(t->dtype);
    v.rank = rank;
    int64_t stride = 1;
    for (int i = rank - 1; i >= 0; i--) {
        v.dims[i] = dims[i];
        v.strides[i] = stride;
        stride *= dims[i];
    }
    return v;
}

static nn_status tensor(nn_ctx *ctx, nn_tensor *t, int rank, const int64_t *dims)
{
    return nn_tensor_empty(ctx, NN_DTYPE_F32, rank, dims, t);
}

static void tensor_free(nn_ctx *ctx, nn_tensor *t)
{
    if (t->data) nn_tensor_free(ctx, t);
}

/* ---------------------------------------------------------------------------------------------
 * The arena
 */

struct param_shape {
    int rank;
    int64_t dims[4];
};

static int64_t shape_numel(const struct param_shape *s)
{
    int64_t n = 1;
    for (int i = 0; i < s->rank; i++)
        n *= s->dims[i];
    return n;
}

/* Parameters start 256 bytes apart at least, as the GPU libraries like their operands. */
static int64_t aligned(int64_t n)
{
    return (n + 63) / 64 * 64;
}

static void arena_free(nn_ctx *ctx, struct model_arena *a)
{
    tensor_free(ctx, &a->value);
    tensor_free(ctx, &a->grad);
    if (a->opt) nn_optim_free(ctx, a->opt);
    a->opt = NULL;
}

/* n parameters of the given shapes: values[i] and grads[i] become their views, both zero (so the
 * padding between them stays zero in the gradient and the update leaves it alone). */
static nn_status arena_init(nn_ctx *ctx, struct model_arena *a, int n,
                            const struct param_shape *shapes, nn_tensor *const *values,
                            nn_tensor *const *grads)
{
    memset(a, 0, sizeof *a);
    a->lr_held = a->mu_held = NAN;
    for (int i = 0; i < n; i++)
        a->total += aligned(shape_numel(&shapes[i]));
    nn_status st = tensor(ctx, &a->value, 1, &a->total);
    if (st == NN_OK) st = tensor(ctx, &a->grad, 1, &a->total);
    if (st == NN_OK) st = nn_tensor_fill_constant(ctx, &a->value, 0);
    if (st == NN_OK) st = nn_tensor_fill_constant(ctx, &a->grad, 0);
    if (st != NN_OK) {
        arena_free(ctx, a);
        return st;
    }
    int64_t off = 0;
    for (int i = 0; i < n; i++) {
        *values[i] = view_of(&a->value, off, shapes[i].rank, shapes[i].dims);
        *grads[i] = view_of(&a->grad, off, shapes[i].rank, shapes[i].dims);
        off += aligned(shape_numel(&shapes[i]));
    }
    return NN_OK;
}

/* The optimizer made, or its lr set, for a step with lr and mu: outside a graph capture, since a
 * capture records the steps, not these. */
static nn_status sgd_ready(nn_ctx *ctx, struct model_arena *a, double lr, double mu)
{
    if (a->opt && mu != a->mu_held) {
        TRY(nn_optim_free(ctx, a->opt));
        a->opt = NULL;
    }
    if (!a->opt) {
        nn_optim_params p;
        TRY(nn_optim_params_default(&p, NN_OPTIM_SGD));
        p.lr = lr;
        p.momentum = mu;
        TRY(nn_optim_create(ctx, &p, 1, &a->value, &a->opt));
        a->lr_held = lr, a->mu_held = mu;
    }
    if (lr != a->lr_held) {
        TRY(nn_optim_set_lr(ctx, a->opt, lr));
        a->lr_held = lr;
    }
    return NN_OK;
}

nn_status model_sgd(nn_ctx *ctx, struct model_arena *a, double lr, double mu)
{
    TRY(sgd_ready(ctx, a, lr, mu));
    return nn_optim_step(ctx, a->opt, 1, &a->grad);
}

/* ---------------------------------------------------------------------------------------------
 * Steps as CUDA graphs
 */

static void graph_free(nn_ctx *ctx, struct model_graph *g)
{
    if (g->g) nn_graph_free(ctx, g->g);
    if (g->targets) nn_mem_free(ctx, g->targets);
    memset(g, 0, sizeof *g);
}

/* g's graph for momentum mu: captured now from step(ctx, m, targets) (the model's step on its
 * graph inputs, with g's device targets for count losses) unless it is there already. */
static nn_status graph_for(nn_ctx *ctx, struct model_graph *g, struct model_arena *a, double lr,
                           double mu, int64_t count,
                           nn_status (*step)(nn_ctx *ctx, void *m, const nn_class_targets *t),
                           void *m)
{
    TRY(sgd_ready(ctx, a, lr, mu));
    if (g->g && mu == g->mu) return NN_OK;
    if (g->g) TRY(nn_graph_free(ctx, g->g));
    g->g = NULL;
    if (!g->targets) TRY(nn_mem_alloc(ctx, (size_t)count * sizeof(int32_t), &g->targets));
    nn_class_targets t = {g->targets, NN_INDEX_I32, {0}};
    TRY(nn_graph_begin(ctx));
    nn_status st = step(ctx, m, &t);
    nn_graph *made = NULL;
    nn_status end = nn_graph_end(ctx, &made);
    TRY(st != NN_OK ? st : end);
    g->g = made;
    g->mu = mu;
    return NN_OK;
}

/* The context that wraps host buffers for copies to and from ctx's tensors. */
static nn_status host_ctx(nn_ctx **out)
{
    nn_settings s;
    TRY(nn_settings_from_env(&s));
    s.backend = NN_BACKEND_REF;
    return nn_ctx_create(out, &s);
}

/* n floats of t (rank 1 or more, packed) into h; waits for the copy. */
static nn_status read_floats(nn_ctx *ctx, nn_ctx *host, const nn_tensor *t, float *h)
{
    nn_tensor v;
    TRY(nn_tensor_wrap(host, h, NN_DTYPE_F32, t->rank, t->dims, NULL, &v));
    return nn_tensor_copy(ctx, &v, t);
}

static double mean_of(const float *v, int64_t n)
{
    double s = 0;
    for (int64_t i = 0; i < n; i++)
        s += v[i];
    return s / (double)n;
}

/* ---------------------------------------------------------------------------------------------
 * The language model
 */

void lstm_lm_free(nn_ctx *ctx, struct lstm_lm *m)
{
    graph_free(ctx, &m->graph);
    arena_free(ctx, &m->arena);
    nn_tensor *ts[] = {&m->x, &m->y, &m->dy, &m->logits, &m->dlogits, &m->loss, &m->dloss};
    for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++)
        tensor_free(ctx, ts[i]);
    free(m->targets);
    free(m->x_host);
    free(m->loss_host);
    if (m->host) nn_ctx_destroy(m->host);
    memset(m, 0, sizeof *m);
}

static nn_status lstm_lm_alloc(nn_ctx *ctx, struct lstm_lm *m, uint64_t seed)
{
    const struct lstm_lm_config *c = &m->cfg;
    int64_t tn = c->seq * c->batch;
    TRY(host_ctx(&m->host));
    TRY(nn_rnn_params_default(&m->rnn, NN_RNN_LSTM, c->vocab, c->hidden));
    m->rnn.num_layers = c->layers;
    TRY(nn_linear_params_default(&m->head));
    int64_t nw;
    TRY(nn_rnn_weights_size(ctx, &m->rnn, NN_DTYPE_F32, &nw));
    struct param_shape shapes[3] = {{1, {nw}}, {2, {c->vocab, c->hidden}}, {1, {c->vocab}}};
    nn_tensor *values[3] = {&m->w, &m->hw, &m->hb}, *grads[3] = {&m->dw, &m->dhw, &m->dhb};
    TRY(arena_init(ctx, &m->arena, 3, shapes, values, grads));
    double k = 1 / sqrt((double)c->hidden);
    /* Through the views, so the model starts alike on every backend (each lays w out its own
     * way); what belongs to no view stays zero. */
    for (int64_t l = 0; l < c->layers; l++)
        for (int name = NN_RNN_WEIGHT_IH; name <= NN_RNN_BIAS_HH; name++) {
            nn_tensor v;
            TRY(nn_rnn_weight_view(ctx, &m->rnn, &m->w, l, 0, (nn_rnn_weight_name)name, &v));
            TRY(nn_tensor_fill_uniform(ctx, &v, -k, k, seed + (uint64_t)(4 * l + name)));
        }
    uint64_t head_seed = seed + (uint64_t)(4 * c->layers);
    TRY(nn_tensor_fill_uniform(ctx, &m->hw, -k, k, head_seed));
    TRY(nn_tensor_fill_uniform(ctx, &m->hb, -k, k, head_seed + 1));

    int64_t xd[3] = {c->seq, c->batch, c->vocab}, yd[3] = {c->seq, c->batch, c->hidden};
    int64_t ld[2] = {tn, c->vocab};
    TRY(tensor(ctx, &m->x, 3, xd));
    TRY(tensor(ctx, &m->y, 3, yd));
    TRY(tensor(ctx, &m->dy, 3, yd));
    TRY(tensor(ctx, &m->logits, 2, ld));
    TRY(tensor(ctx, &m->dlogits, 2, ld));
    TRY(tensor(ctx, &m->loss, 1, &tn));
    TRY(tensor(ctx, &m->dloss, 1, &tn));
    TRY(nn_tensor_fill_constant(ctx, &m->dloss, 1.0 / (double)tn));
    m->targets = calloc((size_t)tn, sizeof *m->targets);
    m->x_host = calloc((size_t)(tn * c->vocab), sizeof *m->x_host);
    m->loss_host = calloc((size_t)tn, sizeof *m->loss_host);
    return m->targets && m->x_host && m->loss_host ? NN_OK : NN_E_OOM_HOST;
}

nn_status lstm_lm_init(nn_ctx *ctx, struct lstm_lm *m, const struct lstm_lm_config *cfg,
                       uint64_t seed)
{
    memset(m, 0, sizeof *m);
    m->cfg = *cfg;
    nn_status st = lstm_lm_alloc(ctx, m, seed);
    if (st != NN_OK) lstm_lm_free(ctx, m);
    return st;
}

nn_status lstm_lm_set_batch(nn_ctx *ctx, struct lstm_lm *m, const uint8_t *seqs)
{
    const struct lstm_lm_config *c = &m->cfg;
    int64_t n = c->batch, t = c->seq, v = c->vocab;
    memset(m->x_host, 0, (size_t)(t * n * v) * sizeof *m->x_host);
    for (int64_t i = 0; i < n; i++) {
        const uint8_t *s = seqs + i * (t + 1);
        for (int64_t j = 0; j <= t; j++)
            if (s[j] >= v) {
                fprintf(stderr, "lstm_lm_set_batch: symbol %d of sequence %lld is %d, not < %lld\n",
                        (int)j, (long long)i, s[j], (long long)v);
                return NN_E_INVALID_ARG;
            }
        for (int64_t j = 0; j < t; j++) {
            m->x_host[(j * n + i) * v + s[j]] = 1;
            m->targets[j * n + i] = s[j + 1];
        }
    }
    nn_tensor h;
    TRY(nn_tensor_wrap(m->host, m->x_host, NN_DTYPE_F32, 3, m->x.dims, NULL, &h));
    return nn_tensor_copy(ctx, &m->x, &h);
}

struct lstm_lm_pullbacks {
    nn_rnn_pullback *rnn;
    nn_linear_pullback *head;
    nn_softmax_cross_entropy_pullback *xent;
};

static nn_status lstm_lm_grad(nn_ctx *ctx, struct lstm_lm *m, const nn_class_targets *t,
                              struct lstm_lm_pullbacks *pb)
{
    int64_t rows[2] = {m->cfg.seq * m->cfg.batch, m->cfg.hidden};
    nn_tensor y2 = view_of(&m->y, 0, 2, rows), dy2 = view_of(&m->dy, 0, 2, rows);
    TRY(nn_rnn_forward(ctx, &m->rnn, &(nn_rnn_forward_tensors){.x = &m->x, .w = &m->w, .y = &m->y},
                       &pb->rnn));
    TRY(nn_linear_forward(ctx, &m->head, &y2, &m->hw, &m->hb, &m->logits, &pb->head));
    TRY(nn_softmax_cross_entropy_forward(ctx, &m->logits, t, &m->loss, &pb->xent));
    TRY(nn_softmax_cross_entropy_backward(ctx, &pb->xent, &m->dloss, &m->dlogits));
    TRY(nn_linear_backward(ctx, &pb->head, &m->dlogits, &dy2, &m->dhw, &m->dhb));
    /* The input is one-hot data: no dx. */
    return nn_rnn_backward(ctx, &pb->rnn, &(nn_rnn_backward_tensors){.dy = &m->dy, .dw = &m->dw});
}

/* The step against targets t; the update with the arena's optimizer as it is set. */
static nn_status lstm_lm_train(nn_ctx *ctx, void *model, const nn_class_targets *t)
{
    struct lstm_lm *m = model;
    struct lstm_lm_pullbacks pb = {NULL, NULL, NULL};
    nn_status st = lstm_lm_grad(ctx, m, t, &pb);
    /* On a failure the pullbacks not yet consumed go; the first failure is the one reported. */
    nn_rnn_pullback_free(&pb.rnn);
    nn_linear_pullback_free(&pb.head);
    nn_softmax_cross_entropy_pullback_free(&pb.xent);
    if (st != NN_OK) return st;
    return nn_optim_step(ctx, m->arena.opt, 1, &m->arena.grad);
}

nn_status lstm_lm_step(nn_ctx *ctx, struct lstm_lm *m, double lr, double mu)
{
    nn_class_targets t = {m->targets, NN_INDEX_I32, {0}};
    TRY(sgd_ready(ctx, &m->arena, lr, mu));
    return lstm_lm_train(ctx, m, &t);
}

nn_status lstm_lm_step_graph(nn_ctx *ctx, struct lstm_lm *m, double lr, double mu)
{
    struct model_graph *g = &m->graph;
    int64_t count = m->cfg.seq * m->cfg.batch;
    if (!g->eager_done) {
        /* the first step eagerly: it builds every plan the captured one needs */
        TRY(lstm_lm_step(ctx, m, lr, mu));
        g->eager_done = 1;
        return NN_OK;
    }
    TRY(graph_for(ctx, g, &m->arena, lr, mu, count, lstm_lm_train, m));
    nn_graph_feed f = {g->targets, m->targets, (size_t)count * sizeof(int32_t), {0}};
    return nn_graph_launch_feeds(ctx, g->g, &f, 1);
}

nn_status lstm_lm_loss(nn_ctx *ctx, struct lstm_lm *m, double *mean)
{
    TRY(read_floats(ctx, m->host, &m->loss, m->loss_host));
    *mean = mean_of(m->loss_host, m->cfg.seq * m->cfg.batch);
    return NN_OK;
}

/* ---------------------------------------------------------------------------------------------
 * The classifier
 */

void cnn_free(nn_ctx *ctx, struct cnn *m)
{
    graph_free(ctx, &m->graph);
    arena_free(ctx, &m->arena);
    nn_tensor *ts[] = {&m->h1,      &m->h2,  &m->h3,  &m->logits, &m->loss, &m->dloss,
                       &m->dlogits, &m->dh3, &m->dh2, &m->dh1,    &m->gx};
    for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++)
        tensor_free(ctx, ts[i]);
    free(m->host_buf);
    if (m->host) nn_ctx_destroy(m->host);
    memset(m, 0, sizeof *m);
}

static int64_t cnn_features(const struct cnn_config *c)
{
    return c->c2 * (c->size / 2) * (c->size / 2);
}

static nn_status cnn_alloc(nn_ctx *ctx, struct cnn *m, uint64_t seed)
{
    const struct cnn_config *c = &m->cfg;
    int64_t n = c->batch, s = c->size, h = s / 2, feat = cnn_features(c);
    TRY(host_ctx(&m->host));
    TRY(nn_conv_params_default(&m->conv1, 2));
    m->conv1.pad_lo[0] = m->conv1.pad_lo[1] = m->conv1.pad_hi[0] = m->conv1.pad_hi[1] = 1;
    m->conv1.activation = NN_ACTIVATION_RELU;
    m->conv2 = m->conv1;
    m->pool = (nn_pool_params){
        .spatial_rank = 2, .mode = NN_POOL_MAX, .window = {2, 2}, .stride = {2, 2}};
    TRY(nn_linear_params_default(&m->fc));
    struct param_shape shapes[6] = {{4, {c->c1, 1, 3, 3}},     {1, {c->c1}},
                                    {4, {c->c2, c->c1, 3, 3}}, {1, {c->c2}},
                                    {2, {c->classes, feat}},   {1, {c->classes}}};
    nn_tensor *values[6] = {&m->w1, &m->b1, &m->w2, &m->b2, &m->w3, &m->b3};
    nn_tensor *grads[6] = {&m->dw1, &m->db1, &m->dw2, &m->db2, &m->dw3, &m->db3};
    TRY(arena_init(ctx, &m->arena, 6, shapes, values, grads));
    /* The ranges that train the 8x8 example well; the head's shrinks with its fan-in. */
    double scale[6] = {0.6, 0.1, 0.2, 0.1, 0.1 * sqrt(128.0 / (double)feat), 0.1};
    for (int i = 0; i < 6; i++)
        TRY(nn_tensor_fill_uniform(ctx, values[i], -scale[i], scale[i], seed + (uint64_t)i));

    int64_t d1[4] = {n, c->c1, s, s}, d2[4] = {n, c->c1, h, h}, d3[4] = {n, c->c2, h, h};
    int64_t dl[2] = {n, c->classes};
    TRY(tensor(ctx, &m->h1, 4, d1));
    TRY(tensor(ctx, &m->h2, 4, d2));
    TRY(tensor(ctx, &m->h3, 4, d3));
    TRY(tensor(ctx, &m->logits, 2, dl));
    TRY(tensor(ctx, &m->loss, 1, &n));
    TRY(tensor(ctx, &m->dloss, 1, &n));
    TRY(nn_tensor_fill_constant(ctx, &m->dloss, 1.0 / (double)n)); /* the mean over the batch */
    TRY(tensor(ctx, &m->dlogits, 2, dl));
    TRY(tensor(ctx, &m->dh3, 4, d3));
    TRY(tensor(ctx, &m->dh2, 4, d2));
    TRY(tensor(ctx, &m->dh1, 4, d1));
    m->host_buf = calloc((size_t)(n * c->classes), sizeof *m->host_buf);
    return m->host_buf ? NN_OK : NN_E_OOM_HOST;
}

nn_status cnn_init(nn_ctx *ctx, struct cnn *m, const struct cnn_config *cfg, uint64_t seed)
{
    memset(m, 0, sizeof *m);
    m->cfg = *cfg;
    nn_status st = cnn_alloc(ctx, m, seed);
    if (st != NN_OK) cnn_free(ctx, m);
    return st;
}

struct cnn_pullbacks {
    nn_conv_pullback *c1, *c2;
    nn_pool_pullback *pool;
    nn_linear_pullback *fc;
    nn_softmax_cross_entropy_pullback *xent;
};

/* The logits of x; training (pb not NULL): also the loss against t, with pullbacks. */
static nn_status cnn_forward(nn_ctx *ctx, struct cnn *m, const nn_tensor *x,
                             const nn_class_targets *t, struct cnn_pullbacks *pb)
{
    int64_t flat[2] = {m->cfg.batch, cnn_features(&m->cfg)};
    nn_tensor h3 = view_of(&m->h3, 0, 2, flat);
    TRY(nn_conv_forward(ctx, &m->conv1, x, &m->w1, &m->b1, &m->h1, pb ? &pb->c1 : NULL));
    TRY(nn_pool_forward(ctx, &m->pool, &m->h1, &m->h2, pb ? &pb->pool : NULL));
    TRY(nn_conv_forward(ctx, &m->conv2, &m->h2, &m->w2, &m->b2, &m->h3, pb ? &pb->c2 : NULL));
    TRY(nn_linear_forward(ctx, &m->fc, &h3, &m->w3, &m->b3, &m->logits, pb ? &pb->fc : NULL));
    if (!pb) return NN_OK;
    return nn_softmax_cross_entropy_forward(ctx, &m->logits, t, &m->loss, &pb->xent);
}

static nn_status cnn_backward(nn_ctx *ctx, struct cnn *m, struct cnn_pullbacks *pb)
{
    int64_t flat[2] = {m->cfg.batch, cnn_features(&m->cfg)};
    nn_tensor dh3 = view_of(&m->dh3, 0, 2, flat);
    TRY(nn_softmax_cross_entropy_backward(ctx, &pb->xent, &m->dloss, &m->dlogits));
    TRY(nn_linear_backward(ctx, &pb->fc, &m->dlogits, &dh3, &m->dw3, &m->db3));
    TRY(nn_conv_backward(ctx, &pb->c2, &m->dh3, &m->dh2, &m->dw2, &m->db2));
    TRY(nn_pool_backward(ctx, &pb->pool, &m->dh2, &m->dh1));
    return nn_conv_backward(ctx, &pb->c1, &m->dh1, NULL, &m->dw1, &m->db1);
}

/* The step on x against targets t; the update with the arena's optimizer as it is set. */
static nn_status cnn_train(nn_ctx *ctx, struct cnn *m, const nn_tensor *x,
                           const nn_class_targets *t)
{
    struct cnn_pullbacks pb = {NULL, NULL, NULL, NULL, NULL};
    nn_status st = cnn_forward(ctx, m, x, t, &pb);
    if (st == NN_OK) st = cnn_backward(ctx, m, &pb);
    nn_conv_pullback_free(&pb.c1);
    nn_conv_pullback_free(&pb.c2);
    nn_pool_pullback_free(&pb.pool);
    nn_linear_pullback_free(&pb.fc);
    nn_softmax_cross_entropy_pullback_free(&pb.xent);
    if (st != NN_OK) return st;
    return nn_optim_step(ctx, m->arena.opt, 1, &m->arena.grad);
}

nn_status cnn_step(nn_ctx *ctx, struct cnn *m, const nn_tensor *x, const int32_t *t, double lr,
                   double mu)
{
    nn_class_targets tg = {t, NN_INDEX_I32, {0}};
    TRY(sgd_ready(ctx, &m->arena, lr, mu));
    return cnn_train(ctx, m, x, &tg);
}

/* The captured step: on the model's own input gx. */
static nn_status cnn_train_graph(nn_ctx *ctx, void *model, const nn_class_targets *t)
{
    struct cnn *m = model;
    return cnn_train(ctx, m, &m->gx, t);
}

nn_status cnn_step_graph(nn_ctx *ctx, struct cnn *m, const nn_tensor *x, const int32_t *t,
                         double lr, double mu)
{
    struct model_graph *g = &m->graph;
    if (!g->eager_done) {
        /* the first step eagerly: it builds every plan the captured one needs */
        TRY(cnn_step(ctx, m, x, t, lr, mu));
        TRY(tensor(ctx, &m->gx, x->rank, x->dims));
        g->eager_done = 1;
        return NN_OK;
    }
    TRY(graph_for(ctx, g, &m->arena, lr, mu, m->cfg.batch, cnn_train_graph, m));
    nn_graph_feed f[2] = {{m->gx.data, x->data, (size_t)nn_tensor_numel(x) * sizeof(float), {0}},
                          {g->targets, t, (size_t)m->cfg.batch * sizeof(int32_t), {0}}};
    return nn_graph_launch_feeds(ctx, g->g, f, 2);
}

nn_status cnn_loss(nn_ctx *ctx, struct cnn *m, double *mean)
{
    TRY(read_floats(ctx, m->host, &m->loss, m->host_buf));
    *mean = mean_of(m->host_buf, m->cfg.batch);
    return NN_OK;
}

nn_status cnn_accuracy(nn_ctx *ctx, struct cnn *m, const nn_tensor *x, const int32_t *t,
                       double *acc)
{
    TRY(cnn_forward(ctx, m, x, NULL, NULL));
    TRY(read_floats(ctx, m->host, &m->logits, m->host_buf));
    int64_t right = 0, k = m->cfg.classes;
    for (int64_t i = 0; i < m->cfg.batch; i++) {
        const float *l = m->host_buf + i * k;
        int64_t best = 0;
        for (int64_t c = 1; c < k; c++)
            if (l[c] > l[best]) best = c;
        right += best == t[i];
    }
    *acc = (double)right / (double)m->cfg.batch;
    return NN_OK;
}

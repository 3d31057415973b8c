/* A small image classifier trained with nnprim alone: conv 3x3 (+bias, relu) -> max pool 2x2 ->
 * conv 3x3 (+bias, relu) -> linear -> softmax cross-entropy, by SGD with momentum. The data set is
 * generated here: 8x8 images of one of four strokes (a horizontal, vertical, diagonal or
 * anti-diagonal bar of length 4 at a random place) on uniform noise. It trains on 256 images and
 * reports the accuracy on 256 others; the run ends with status 1 below 90% test accuracy.
 *
 *   example_cnn_classifier [steps]   (NNPRIM_BACKEND=ref|cudnn picks the backend) */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <nnprim/nnprim.h>

#define N       256 /* images per set (one batch) */
#define CLASSES 4
#define HW      8
#define C1      8
#define C2      8
#define FEAT    (C2 * (HW / 2) * (HW / 2))

static nn_status check(nn_status st, const char *what)
{
    if (st != NN_OK)
        fprintf(stderr, "%s: %s: %s\n", what, nn_status_name(st), nn_last_error()->message);
    return st;
}

#define TRY(call)                                                                                  \
    do {                                                                                           \
        nn_status st_ = check((call), #call);                                                      \
        if (st_ != NN_OK) return st_;                                                              \
    } while (0)

static nn_status tensor(nn_ctx *ctx, nn_tensor *t, int rank, int64_t d0, int64_t d1, int64_t d2,
                        int64_t d3)
{
    int64_t dims[4] = {d0, d1, d2, d3};
    return nn_tensor_empty(ctx, NN_DTYPE_F32, rank, dims, t);
}

/* A packed view of t's memory with other dims (the same number of elements). */
static nn_tensor reshaped(const nn_tensor *t, int rank, const int64_t *dims)
{
    nn_tensor v = *t;
    v.rank = rank;
    int64_t stride = 1;
    for (int i = rank - 1; i >= 0; i--) {
        v.dims[i] = dims[i];
        v.strides[i] = stride;
        stride *= dims[i];
    }
    return v;
}

/* ---------------------------------------------------------------------------------------------
 * The data set
 */

static uint64_t rng = 0x2545f4914f6cdd1dULL;

static double uniform(void)
{
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (double)(rng >> 11) / 9007199254740992.0;
}

/* n images with their classes: noise in [0, 0.5), the stroke's 4 pixels at 1. */
static void make_set(float *img, int32_t *cls, int n)
{
    static const int step[CLASSES][2] = {{0, 1}, {1, 0}, {1, 1}, {1, -1}};
    for (int i = 0; i < n; i++) {
        float *p = img + (size_t)i * HW * HW;
        for (int k = 0; k < HW * HW; k++)
            p[k] = (float)(0.5 * uniform());
        int c = (int)(uniform() * CLASSES);
        int dr = step[c][0], dc = step[c][1];
        int r0 = (int)(uniform() * (HW - 3 * dr));
        int c0 = dc < 0 ? 3 + (int)(uniform() * (HW - 3)) : (int)(uniform() * (HW - 3 * dc));
        for (int k = 0; k < 4; k++)
            p[(r0 + k * dr) * HW + c0 + k * dc] = 1.0f;
        cls[i] = c;
    }
}

/* ---------------------------------------------------------------------------------------------
 * The network
 */

struct param {
    nn_tensor v, g; /* value and gradient */
    float *m;       /* momentum, on the host */
};

struct net {
    nn_conv_params c1, c2;
    nn_pool_params pool;
    nn_linear_params fc;
    struct param w1, b1, w2, b2, w3, b3;
    nn_tensor h1, h2, h3, logits, loss, dloss, dlogits, dh3, dh2, dh1;
};

static nn_status param_init(nn_ctx *ctx, struct param *p, int rank, int64_t d0, int64_t d1,
                            int64_t d2, int64_t d3, double scale, uint64_t seed)
{
    TRY(tensor(ctx, &p->v, rank, d0, d1, d2, d3));
    TRY(tensor(ctx, &p->g, rank, d0, d1, d2, d3));
    p->m = calloc((size_t)nn_tensor_numel(&p->v), sizeof *p->m);
    if (!p->m) return NN_E_OOM_HOST;
    return nn_tensor_fill_uniform(ctx, &p->v, -scale, scale, seed);
}

static nn_status net_init(nn_ctx *ctx, struct net *n)
{
    TRY(nn_conv_params_default(&n->c1, 2));
    n->c1.pad_lo[0] = n->c1.pad_lo[1] = n->c1.pad_hi[0] = n->c1.pad_hi[1] = 1;
    n->c1.activation = NN_ACTIVATION_RELU;
    n->c2 = n->c1;
    n->pool = (nn_pool_params){
        .spatial_rank = 2, .mode = NN_POOL_MAX, .window = {2, 2}, .stride = {2, 2}};
    TRY(nn_linear_params_default(&n->fc));
    TRY(param_init(ctx, &n->w1, 4, C1, 1, 3, 3, 0.6, 1));
    TRY(param_init(ctx, &n->b1, 1, C1, 0, 0, 0, 0.1, 2));
    TRY(param_init(ctx, &n->w2, 4, C2, C1, 3, 3, 0.2, 3));
    TRY(param_init(ctx, &n->b2, 1, C2, 0, 0, 0, 0.1, 4));
    TRY(param_init(ctx, &n->w3, 2, CLASSES, FEAT, 0, 0, 0.1, 5));
    TRY(param_init(ctx, &n->b3, 1, CLASSES, 0, 0, 0, 0.1, 6));
    TRY(tensor(ctx, &n->h1, 4, N, C1, HW, HW));
    TRY(tensor(ctx, &n->h2, 4, N, C1, HW / 2, HW / 2));
    TRY(tensor(ctx, &n->h3, 4, N, C2, HW / 2, HW / 2));
    TRY(tensor(ctx, &n->logits, 2, N, CLASSES, 0, 0));
    TRY(tensor(ctx, &n->loss, 1, N, 0, 0, 0));
    TRY(tensor(ctx, &n->dloss, 1, N, 0, 0, 0));
    TRY(nn_tensor_fill_constant(ctx, &n->dloss, 1.0 / N)); /* the mean over the batch */
    TRY(tensor(ctx, &n->dlogits, 2, N, CLASSES, 0, 0));
    TRY(tensor(ctx, &n->dh3, 4, N, C2, HW / 2, HW / 2));
    TRY(tensor(ctx, &n->dh2, 4, N, C1, HW / 2, HW / 2));
    return tensor(ctx, &n->dh1, 4, N, C1, HW, HW);
}

static void net_free(nn_ctx *ctx, struct net *n)
{
    struct param *ps[] = {&n->w1, &n->b1, &n->w2, &n->b2, &n->w3, &n->b3};
    for (int i = 0; i < 6; i++) {
        nn_tensor_free(ctx, &ps[i]->v);
        nn_tensor_free(ctx, &ps[i]->g);
        free(ps[i]->m);
    }
    nn_tensor *ts[] = {&n->h1,    &n->h2,      &n->h3,  &n->logits, &n->loss,
                       &n->dloss, &n->dlogits, &n->dh3, &n->dh2,    &n->dh1};
    for (int i = 0; i < 10; i++)
        nn_tensor_free(ctx, ts[i]);
}

struct pullbacks {
    nn_conv_pullback *c1, *c2;
    nn_pool_pullback *pool;
    nn_linear_pullback *fc;
    nn_softmax_cross_entropy_pullback *xent;
};

/* The logits of x; training (pb not NULL): also the loss against the targets, with pullbacks. */
static nn_status forward(nn_ctx *ctx, struct net *n, const nn_tensor *x, const nn_class_targets *t,
                         struct pullbacks *pb)
{
    TRY(nn_conv_forward(ctx, &n->c1, x, &n->w1.v, &n->b1.v, &n->h1, pb ? &pb->c1 : NULL));
    TRY(nn_pool_forward(ctx, &n->pool, &n->h1, &n->h2, pb ? &pb->pool : NULL));
    TRY(nn_conv_forward(ctx, &n->c2, &n->h2, &n->w2.v, &n->b2.v, &n->h3, pb ? &pb->c2 : NULL));
    nn_tensor flat = reshaped(&n->h3, 2, (int64_t[]){N, FEAT});
    TRY(nn_linear_forward(ctx, &n->fc, &flat, &n->w3.v, &n->b3.v, &n->logits, pb ? &pb->fc : NULL));
    if (!pb) return NN_OK;
    return nn_softmax_cross_entropy_forward(ctx, &n->logits, t, &n->loss, &pb->xent);
}

static nn_status backward(nn_ctx *ctx, struct net *n, struct pullbacks *pb)
{
    TRY(nn_softmax_cross_entropy_backward(ctx, &pb->xent, &n->dloss, &n->dlogits));
    nn_tensor dflat = reshaped(&n->dh3, 2, (int64_t[]){N, FEAT});
    TRY(nn_linear_backward(ctx, &pb->fc, &n->dlogits, &dflat, &n->w3.g, &n->b3.g));
    TRY(nn_conv_backward(ctx, &pb->c2, &n->dh3, &n->dh2, &n->w2.g, &n->b2.g));
    TRY(nn_pool_backward(ctx, &pb->pool, &n->dh2, &n->dh1));
    return nn_conv_backward(ctx, &pb->c1, &n->dh1, NULL, &n->w1.g, &n->b1.g);
}

/* ---------------------------------------------------------------------------------------------
 * Host arithmetic: the update and the accuracy stay plain C
 */

static nn_status to_host(nn_ctx *ctx, nn_ctx *host, const nn_tensor *t, float *h)
{
    nn_tensor v;
    TRY(nn_tensor_wrap(host, h, NN_DTYPE_F32, t->rank, t->dims, NULL, &v));
    return nn_tensor_copy(ctx, &v, t);
}

/* m = 0.9 m + g; v -= lr * m */
static nn_status sgd(nn_ctx *ctx, nn_ctx *host, struct param *p, float lr)
{
    int64_t n = nn_tensor_numel(&p->v);
    float *v = malloc((size_t)n * sizeof *v), *g = malloc((size_t)n * sizeof *g);
    nn_status st = v && g ? NN_OK : NN_E_OOM_HOST;
    if (st == NN_OK) st = to_host(ctx, host, &p->v, v);
    if (st == NN_OK) st = to_host(ctx, host, &p->g, g);
    if (st == NN_OK) {
        for (int64_t i = 0; i < n; i++) {
            p->m[i] = 0.9f * p->m[i] + g[i];
            v[i] -= lr * p->m[i];
        }
        nn_tensor hv;
        st = nn_tensor_wrap(host, v, NN_DTYPE_F32, p->v.rank, p->v.dims, NULL, &hv);
        if (st == NN_OK) st = nn_tensor_copy(ctx, &p->v, &hv);
        if (st == NN_OK) st = nn_ctx_synchronize(ctx);
    }
    free(v);
    free(g);
    return st;
}

static nn_status mean_loss(nn_ctx *ctx, nn_ctx *host, struct net *n, double *out)
{
    float h[N];
    TRY(to_host(ctx, host, &n->loss, h));
    double s = 0;
    for (int i = 0; i < N; i++)
        s += h[i];
    *out = s / N;
    return NN_OK;
}

/* The fraction of x's images whose largest logit is their class. */
static nn_status accuracy(nn_ctx *ctx, nn_ctx *host, struct net *n, const nn_tensor *x,
                          const int32_t *cls, double *out)
{
    TRY(forward(ctx, n, x, NULL, NULL));
    float h[N * CLASSES];
    TRY(to_host(ctx, host, &n->logits, h));
    int right = 0;
    for (int i = 0; i < N; i++) {
        int best = 0;
        for (int c = 1; c < CLASSES; c++)
            if (h[i * CLASSES + c] > h[i * CLASSES + best]) best = c;
        right += best == cls[i];
    }
    *out = (double)right / N;
    return NN_OK;
}

static nn_status upload(nn_ctx *ctx, nn_ctx *host, float *img, nn_tensor *x)
{
    nn_tensor h;
    TRY(tensor(ctx, x, 4, N, 1, HW, HW));
    TRY(nn_tensor_wrap(host, img, NN_DTYPE_F32, 4, x->dims, NULL, &h));
    TRY(nn_tensor_copy(ctx, x, &h));
    return nn_ctx_synchronize(ctx);
}

static nn_status run(nn_ctx *ctx, nn_ctx *host, int steps, double *test_acc)
{
    static float img[2][N * HW * HW];
    static int32_t cls[2][N];
    make_set(img[0], cls[0], N);
    make_set(img[1], cls[1], N);
    nn_tensor x[2];
    TRY(upload(ctx, host, img[0], &x[0]));
    TRY(upload(ctx, host, img[1], &x[1]));
    struct net n;
    TRY(net_init(ctx, &n));
    nn_class_targets t = {cls[0], NN_INDEX_I32, {0}};
    struct param *ps[] = {&n.w1, &n.b1, &n.w2, &n.b2, &n.w3, &n.b3};
    for (int step = 0; step < steps; step++) {
        struct pullbacks pb;
        TRY(forward(ctx, &n, &x[0], &t, &pb));
        TRY(backward(ctx, &n, &pb));
        for (int i = 0; i < 6; i++)
            TRY(sgd(ctx, host, ps[i], 0.05f));
        if (step % 50 == 0 || step == steps - 1) {
            double loss, acc;
            TRY(mean_loss(ctx, host, &n, &loss));
            TRY(accuracy(ctx, host, &n, &x[0], cls[0], &acc));
            printf("step %4d  loss %.4f  train accuracy %.3f\n", step, loss, acc);
        }
    }
    TRY(accuracy(ctx, host, &n, &x[1], cls[1], test_acc));
    net_free(ctx, &n);
    nn_tensor_free(ctx, &x[0]);
    nn_tensor_free(ctx, &x[1]);
    return NN_OK;
}

int main(int argc, char **argv)
{
    int steps = argc > 1 ? atoi(argv[1]) : 150;
    nn_ctx *ctx, *host;
    nn_settings s;
    nn_default_settings(&s);
    if (check(nn_ctx_create(&ctx, &s), "nn_ctx_create")) return 1;
    s.backend = NN_BACKEND_REF; /* wraps the host buffers of the update and the accuracy */
    if (check(nn_ctx_create(&host, &s), "nn_ctx_create (host)")) return 1;
    printf("backend: %s\n", nn_ctx_backend(ctx) == NN_BACKEND_CUDNN ? "cudnn" : "ref");
    double acc = 0;
    nn_status st = run(ctx, host, steps, &acc);
    nn_ctx_destroy(host);
    nn_ctx_destroy(ctx);
    if (st != NN_OK) return 1;
    printf("test accuracy %.3f (4 classes; 0.90 required)\n", acc);
    return acc >= 0.9 ? 0 : 1;
}

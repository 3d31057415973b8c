/* A training loop of a tiny CNN with nnprim's pullbacks: conv 3x3 (+bias, fused relu) -> max pool
 * 2x2 -> conv 3x3 (+bias). A "teacher" network with fixed random weights makes the targets; the
 * student starts from other weights and learns them by SGD on the squared error. The loss falls
 * on every backend; the run ends with status 1 if it does not fall by at least 10x.
 *
 *   example_cnn_train [steps]        (NNPRIM_BACKEND=ref|cudnn picks the backend) */
#include <stdio.h>
#include <stdlib.h>

#include <nnprim/nnprim.h>

#define N  16 /* batch */
#define C0 1
#define C1 4
#define C2 2
#define HW 8

struct layer {
    nn_conv_params p;
    nn_tensor w, b, dw, db;
};

struct net {
    struct layer c1, c2;
    nn_pool_params pool;
};

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

static nn_status tensor(nn_ctx *ctx, nn_tensor *t, int64_t d0, int64_t d1, int64_t d2, int64_t d3,
                        int rank)
{
    int64_t dims[4] = {d0, d1, d2, d3};
    return nn_tensor_empty(ctx, NN_DTYPE_F32, rank, dims, t);
}

static nn_status layer_init(nn_ctx *ctx, struct layer *l, int64_t cin, int64_t cout,
                            nn_activation act, uint64_t seed)
{
    TRY(nn_conv_params_default(&l->p, 2));
    l->p.pad_lo[0] = l->p.pad_lo[1] = l->p.pad_hi[0] = l->p.pad_hi[1] = 1;
    l->p.activation = act;
    TRY(tensor(ctx, &l->w, cout, cin, 3, 3, 4));
    TRY(tensor(ctx, &l->dw, cout, cin, 3, 3, 4));
    TRY(tensor(ctx, &l->b, cout, 0, 0, 0, 1));
    TRY(tensor(ctx, &l->db, cout, 0, 0, 0, 1));
    TRY(nn_tensor_fill_uniform(ctx, &l->w, -0.5, 0.5, seed));
    return nn_tensor_fill_uniform(ctx, &l->b, -0.1, 0.1, seed + 1);
}

static void layer_free(nn_ctx *ctx, struct layer *l)
{
    nn_tensor_free(ctx, &l->w);
    nn_tensor_free(ctx, &l->b);
    nn_tensor_free(ctx, &l->dw);
    nn_tensor_free(ctx, &l->db);
}

/* Activations of one forward pass. */
struct acts {
    nn_tensor h1, h2, y;
};

static nn_status acts_init(nn_ctx *ctx, struct acts *a)
{
    TRY(tensor(ctx, &a->h1, N, C1, HW, HW, 4));
    TRY(tensor(ctx, &a->h2, N, C1, HW / 2, HW / 2, 4));
    return tensor(ctx, &a->y, N, C2, HW / 2, HW / 2, 4);
}

static void acts_free(nn_ctx *ctx, struct acts *a)
{
    nn_tensor_free(ctx, &a->h1);
    nn_tensor_free(ctx, &a->h2);
    nn_tensor_free(ctx, &a->y);
}

struct pullbacks {
    nn_conv_pullback *c1, *c2;
    nn_pool_pullback *pool;
};

/* pb NULL: inference. */
static nn_status forward(nn_ctx *ctx, struct net *n, const nn_tensor *x, struct acts *a,
                         struct pullbacks *pb)
{
    TRY(nn_conv_forward(ctx, &n->c1.p, x, &n->c1.w, &n->c1.b, &a->h1, pb ? &pb->c1 : NULL));
    TRY(nn_pool_forward(ctx, &n->pool, &a->h1, &a->h2, pb ? &pb->pool : NULL));
    return nn_conv_forward(ctx, &n->c2.p, &a->h2, &n->c2.w, &n->c2.b, &a->y, pb ? &pb->c2 : NULL);
}

/* Host copies for the loss and the update: this example keeps its own arithmetic plain C. */
static float *to_host(nn_ctx *ctx, const nn_tensor *t, nn_ctx *host)
{
    int64_t n = nn_tensor_numel(t);
    float *h = malloc((size_t)n * sizeof *h);
    nn_tensor v;
    if (!h || check(nn_tensor_wrap(host, h, NN_DTYPE_F32, t->rank, t->dims, NULL, &v), "wrap") ||
        check(nn_tensor_copy(ctx, &v, t), "copy to host")) {
        free(h);
        return NULL;
    }
    return h;
}

static nn_status from_host(nn_ctx *ctx, nn_tensor *t, float *h, nn_ctx *host)
{
    nn_tensor v;
    TRY(nn_tensor_wrap(host, h, NN_DTYPE_F32, t->rank, t->dims, NULL, &v));
    TRY(nn_tensor_copy(ctx, t, &v));
    return nn_ctx_synchronize(ctx);
}

/* w -= lr * dw, on the host. */
static nn_status sgd(nn_ctx *ctx, nn_ctx *host, nn_tensor *w, const nn_tensor *dw, float lr)
{
    float *hw = to_host(ctx, w, host), *hd = to_host(ctx, dw, host);
    nn_status st = hw && hd ? NN_OK : NN_E_OOM_HOST;
    if (st == NN_OK) {
        for (int64_t i = 0; i < nn_tensor_numel(w); i++)
            hw[i] -= lr * hd[i];
        st = from_host(ctx, w, hw, host);
    }
    free(hw);
    free(hd);
    return st;
}

/* loss = 0.5 * sum (y - t)^2 / N; dy = (y - t) / N. */
static nn_status loss_and_grad(nn_ctx *ctx, nn_ctx *host, const nn_tensor *y, const float *target,
                               nn_tensor *dy, double *loss)
{
    float *hy = to_host(ctx, y, host);
    if (!hy) return NN_E_OOM_HOST;
    double sum = 0;
    for (int64_t i = 0; i < nn_tensor_numel(y); i++) {
        double d = hy[i] - target[i];
        sum += 0.5 * d * d / N;
        hy[i] = (float)(d / N);
    }
    *loss = sum;
    nn_status st = from_host(ctx, dy, hy, host);
    free(hy);
    return st;
}

static nn_status train(nn_ctx *ctx, nn_ctx *host, int steps, double *first, double *last)
{
    struct net student, teacher;
    struct acts a;
    nn_tensor x, dy, dh2, dh1;
    nn_pool_params pool = {
        .spatial_rank = 2, .mode = NN_POOL_MAX, .window = {2, 2}, .stride = {2, 2}};
    student.pool = teacher.pool = pool;
    TRY(layer_init(ctx, &teacher.c1, C0, C1, NN_ACTIVATION_RELU, 100));
    TRY(layer_init(ctx, &teacher.c2, C1, C2, NN_ACTIVATION_IDENTITY, 200));
    TRY(layer_init(ctx, &student.c1, C0, C1, NN_ACTIVATION_RELU, 300));
    TRY(layer_init(ctx, &student.c2, C1, C2, NN_ACTIVATION_IDENTITY, 400));
    TRY(acts_init(ctx, &a));
    TRY(tensor(ctx, &x, N, C0, HW, HW, 4));
    TRY(tensor(ctx, &dy, N, C2, HW / 2, HW / 2, 4));
    TRY(tensor(ctx, &dh2, N, C1, HW / 2, HW / 2, 4));
    TRY(tensor(ctx, &dh1, N, C1, HW, HW, 4));
    TRY(nn_tensor_fill_uniform(ctx, &x, -1, 1, 7));
    TRY(forward(ctx, &teacher, &x, &a, NULL));
    float *target = to_host(ctx, &a.y, host);
    if (!target) return NN_E_OOM_HOST;

    for (int step = 0; step < steps; step++) {
        struct pullbacks pb;
        double loss;
        TRY(forward(ctx, &student, &x, &a, &pb));
        TRY(loss_and_grad(ctx, host, &a.y, target, &dy, &loss));
        TRY(nn_conv_backward(ctx, &pb.c2, &dy, &dh2, &student.c2.dw, &student.c2.db));
        TRY(nn_pool_backward(ctx, &pb.pool, &dh2, &dh1));
        TRY(nn_conv_backward(ctx, &pb.c1, &dh1, NULL, &student.c1.dw, &student.c1.db));
        struct layer *layers[2] = {&student.c1, &student.c2};
        for (int l = 0; l < 2; l++) {
            TRY(sgd(ctx, host, &layers[l]->w, &layers[l]->dw, 0.03f));
            TRY(sgd(ctx, host, &layers[l]->b, &layers[l]->db, 0.03f));
        }
        if (step == 0) *first = loss;
        *last = loss;
        if (step % 50 == 0 || step == steps - 1) printf("step %4d  loss %.6f\n", step, loss);
    }
    free(target);
    layer_free(ctx, &teacher.c1), layer_free(ctx, &teacher.c2);
    layer_free(ctx, &student.c1), layer_free(ctx, &student.c2);
    acts_free(ctx, &a);
    nn_tensor_free(ctx, &x), nn_tensor_free(ctx, &dy);
    nn_tensor_free(ctx, &dh2), nn_tensor_free(ctx, &dh1);
    return NN_OK;
}

int main(int argc, char **argv)
{
    int steps = argc > 1 ? atoi(argv[1]) : 600;
    nn_ctx *ctx, *host;
    nn_settings s;
    nn_settings_from_env(&s);
    if (check(nn_ctx_create(&ctx, &s), "nn_ctx_create")) return 1;
    s.backend = NN_BACKEND_REF; /* wraps the host buffers of the loss and the update */
    if (check(nn_ctx_create(&host, &s), "nn_ctx_create (host)")) return 1;
    printf("backend: %s\n", nn_ctx_backend(ctx) == NN_BACKEND_CUDNN ? "cudnn" : "ref");
    double first = 0, last = 0;
    nn_status st = train(ctx, host, steps, &first, &last);
    nn_ctx_destroy(host);
    nn_ctx_destroy(ctx);
    if (st != NN_OK) return 1;
    printf("loss %.6f -> %.6f (%.1fx lower)\n", first, last, first / last);
    return last * 10 <= first ? 0 : 1;
}

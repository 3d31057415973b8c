/* A small image classifier trained with nnprim alone: conv 3x3 (+bias, relu) -> max pool 2x2 ->
 * conv 3x3 (+bias, relu) -> linear -> softmax cross-entropy (the network of examples/models.c), by
 * SGD with momentum on the GPU or the host, wherever the context computes. The data set is
 * generated here: 8x8 images of one of four strokes (a horizontal, vertical, diagonal or
 * anti-diagonal bar of length 4 at a random place) on uniform noise. It trains on 256 images and
 * reports the accuracy on 256 others; the run ends with status 1 below 90% test accuracy.
 *
 *   example_cnn_classifier [steps] [--time] [--graph]
 *     --time: also print the time per training step (each step waited for)
 *     --graph: run each step as one CUDA graph (include/nnprim/graph.h; cuDNN backend): the
 *              first step eagerly, then the captured step launched with the batch fed in
 *   NNPRIM_BACKEND=ref|cudnn picks the backend, NNPRIM_MATH=tf32 the math mode. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <nnprim/nnprim.h>

#include "models.h"

#define N       256 /* images per set (one batch) */
#define CLASSES 4
#define HW      8
#define C1      8
#define C2      8
#define LR      0.05
#define MU      0.9

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

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
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
 * Training (the network is examples/models.c's, shared with `nnprim bench models`)
 */

static nn_status upload(nn_ctx *ctx, nn_ctx *host, float *img, nn_tensor *x)
{
    int64_t dims[4] = {N, 1, HW, HW};
    nn_tensor h;
    TRY(nn_tensor_empty(ctx, NN_DTYPE_F32, 4, dims, x));
    TRY(nn_tensor_wrap(host, img, NN_DTYPE_F32, 4, dims, NULL, &h));
    return nn_tensor_copy(ctx, x, &h);
}

static nn_status train(nn_ctx *ctx, struct cnn *net, const nn_tensor *x, const int32_t *cls,
                       int steps, int timing, int graph)
{
    double t_train = 0;
    int timed = 0;
    for (int step = 0; step < steps; step++) {
        double t0 = now_s();
        if (graph)
            TRY(check(cnn_step_graph(ctx, net, x, cls, LR, MU), "cnn_step_graph"));
        else
            TRY(check(cnn_step(ctx, net, x, cls, LR, MU), "cnn_step"));
        if (timing) {
            TRY(check(nn_ctx_synchronize(ctx), "nn_ctx_synchronize"));
            /* the first steps build plans and the graph: not part of the steady state */
            if (step > 1) t_train += now_s() - t0, timed++;
        }
        if (step % 50 == 0 || step == steps - 1) {
            double loss, acc;
            TRY(check(cnn_loss(ctx, net, &loss), "cnn_loss"));
            TRY(check(cnn_accuracy(ctx, net, x, cls, &acc), "cnn_accuracy"));
            printf("step %4d  loss %.4f  train accuracy %.3f\n", step, loss, acc);
        }
    }
    if (timed)
        printf("time per training step: %.3f ms (forward + backward + SGD with momentum%s, %d "
               "steps)\n",
               t_train / timed * 1e3, graph ? ", one CUDA graph" : "", timed);
    return NN_OK;
}

static nn_status run(nn_ctx *ctx, nn_ctx *host, int steps, int timing, int graph, double *test_acc)
{
    static float img[2][N * HW * HW];
    static int32_t cls[2][N];
    make_set(img[0], cls[0], N);
    make_set(img[1], cls[1], N);
    nn_tensor x[2] = {{0}, {0}};
    struct cnn net;
    const struct cnn_config cfg = {.batch = N, .size = HW, .c1 = C1, .c2 = C2, .classes = CLASSES};
    nn_status st = upload(ctx, host, img[0], &x[0]);
    if (st == NN_OK) st = upload(ctx, host, img[1], &x[1]);
    if (st == NN_OK) st = check(cnn_init(ctx, &net, &cfg, 1), "cnn_init");
    if (st == NN_OK) {
        st = train(ctx, &net, &x[0], cls[0], steps, timing, graph);
        if (st == NN_OK)
            st = check(cnn_accuracy(ctx, &net, &x[1], cls[1], test_acc), "cnn_accuracy");
        cnn_free(ctx, &net);
    }
    for (int i = 0; i < 2; i++)
        if (x[i].data) nn_tensor_free(ctx, &x[i]);
    return st;
}

int main(int argc, char **argv)
{
    int steps = 150, timing = 0, graph = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--time")) {
            timing = 1;
        } else if (!strcmp(argv[i], "--graph")) {
            graph = 1;
        } else if ((steps = atoi(argv[i])) < 1) {
            fprintf(stderr, "usage: example_cnn_classifier [steps] [--time] [--graph]\n");
            return 2;
        }
    }
    nn_ctx *ctx, *host;
    nn_settings s;
    nn_settings_from_env(&s);
    if (check(nn_ctx_create(&ctx, &s), "nn_ctx_create")) return 1;
    s.backend = NN_BACKEND_REF; /* wraps the host buffers of the data set */
    if (check(nn_ctx_create(&host, &s), "nn_ctx_create (host)")) return 1;
    printf("backend: %s%s\n", nn_ctx_backend(ctx) == NN_BACKEND_CUDNN ? "cudnn" : "ref",
           graph ? " (each step one CUDA graph)" : "");
    if (graph && nn_ctx_backend(ctx) != NN_BACKEND_CUDNN) {
        fprintf(stderr, "example_cnn_classifier: --graph needs the cuDNN backend (CUDA graphs)\n");
        nn_ctx_destroy(host);
        nn_ctx_destroy(ctx);
        return 2;
    }
    double acc = 0;
    nn_status st = run(ctx, host, steps, timing, graph, &acc);
    nn_ctx_destroy(host);
    nn_ctx_destroy(ctx);
    if (st != NN_OK) return 1;
    printf("test accuracy %.3f (4 classes; 0.90 required)\n", acc);
    return acc >= 0.9 ? 0 : 1;
}

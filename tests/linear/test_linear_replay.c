/* Graph replay of the cuBLASLt linear path (docs/LINEAR.md, "Graph replay"): replayed products
 * against a context that never replays, bitwise, while the buffers move between two sets and the
 * gradients accumulate on some steps; the replayed products counted in the verbose lines; no
 * replay with the setting off; replays on the default streams and on a blocking stream, captured
 * on the context's capture stream. GPU only: every test skips with the reason elsewhere. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fixture.h"
#include "gpu.h"
#include "nn_config.h"
#include "nnprim/nnprim.h"

#if NN_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

#define OK(call) cr_assert_eq((call), NN_OK, "%s: %s", #call, nn_last_error()->message)

static nn_ctx *make_ctx(nn_graphs_mode graphs, nn_math_mode math, int verbose)
{
    nn_settings s;
    OK(nn_settings_defaults(&s));
    s.backend = NN_BACKEND_CUDNN;
    s.linear_graphs = graphs;
    s.math_mode = math;
    s.verbose = verbose;
    nn_ctx *ctx = NULL;
    OK(nn_ctx_create(&ctx, &s));
    return ctx;
}

struct shape {
    int64_t m, in, out;
    int bias, relu;
};

/* Every tensor of a training step; the same seed gives the same contents at other addresses. */
struct set {
    nn_tensor x, w, b, y, dy, dx, dw, db;
};

static void dev(nn_ctx *ctx, nn_tensor *t, int rank, const int64_t *dims, uint64_t seed)
{
    OK(nn_tensor_empty(ctx, NN_DTYPE_F32, rank, dims, t));
    OK(nn_tensor_fill_uniform(ctx, t, -1, 1, seed));
}

static void set_alloc(nn_ctx *ctx, const struct shape *s, struct set *o)
{
    memset(o, 0, sizeof *o);
    int64_t xd[2] = {s->m, s->in}, wd[2] = {s->out, s->in}, yd[2] = {s->m, s->out};
    dev(ctx, &o->x, 2, xd, 1), dev(ctx, &o->w, 2, wd, 2), dev(ctx, &o->y, 2, yd, 3);
    dev(ctx, &o->dy, 2, yd, 4), dev(ctx, &o->dx, 2, xd, 5), dev(ctx, &o->dw, 2, wd, 6);
    if (s->bias) dev(ctx, &o->b, 1, &s->out, 7), dev(ctx, &o->db, 1, &s->out, 8);
}

static void set_free(nn_ctx *ctx, struct set *o)
{
    nn_tensor *all[] = {&o->x, &o->w, &o->b, &o->y, &o->dy, &o->dx, &o->dw, &o->db};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        if (all[i]->data) OK(nn_tensor_free(ctx, all[i]));
}

static nn_tensor *opt(nn_tensor *t)
{
    return t->data ? t : NULL;
}

/* Forward in training mode, then backward with every gradient, dx and dw accumulating when
 * accumulate is set. */
static void step(nn_ctx *ctx, const struct shape *s, struct set *o, int accumulate)
{
    nn_linear_params p;
    OK(nn_linear_params_default(&p));
    p.activation = s->relu ? NN_ACTIVATION_RELU : NN_ACTIVATION_IDENTITY;
    nn_linear_pullback *pb = NULL;
    OK(nn_linear_forward(ctx, &p, &o->x, &o->w, opt(&o->b), &o->y, &pb));
    nn_backward_options opts;
    memset(&opts, 0, sizeof opts);
    opts.accumulate = accumulate ? NN_ACCUMULATE_DX | NN_ACCUMULATE_DW : 0;
    OK(nn_linear_backward_ex(ctx, &pb, &opts, &o->dy, &o->dx, &o->dw, opt(&o->db)));
}

/* 0 when the two device tensors hold the same bytes. */
static int differ(nn_ctx *ca, const nn_tensor *a, nn_ctx *cb, const nn_tensor *b)
{
    return a->data ? nn_test_f32_differ(ca, a, cb, b) : 0;
}

static void expect_same(nn_ctx *ca, struct set *a, nn_ctx *cb, struct set *b, const char *what)
{
    cr_expect_not(differ(ca, &a->y, cb, &b->y), "%s: y", what);
    cr_expect_not(differ(ca, &a->dx, cb, &b->dx), "%s: dx", what);
    cr_expect_not(differ(ca, &a->dw, cb, &b->dw), "%s: dw", what);
    cr_expect_not(differ(ca, &a->db, cb, &b->db), "%s: db", what);
}

/* stderr into a file, to count the products the verbose lines say were replayed. */
static char log_path[64];
static void log_begin(void)
{
    strcpy(log_path, "/tmp/nnprim_linear_replay_XXXXXX");
    int fd = mkstemp(log_path);
    cr_assert_geq(fd, 0);
    close(fd);
    cr_assert(freopen(log_path, "w", stderr));
}

/* Replayed products ("/graph" in a product's implementation) on the linear calls' op lines. */
static int log_replays(void)
{
    fflush(stderr);
    FILE *f = fopen(log_path, "r");
    cr_assert(f);
    char line[4096];
    int n = 0;
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "nnprim_verbose,linear_", 22) != 0) continue;
        for (const char *q = line; (q = strstr(q, "/graph")) != NULL; q++)
            n++;
    }
    fclose(f);
    return n;
}

static const struct shape shapes[] = {
    {64, 512, 10, 1, 0}, /* a classifier's head */
    {8, 16, 12, 0, 0},
    {15, 7, 4, 1, 1}, /* relu: backward's products read the masked gradient */
};

Test(linear_replay, bitwise_the_eager_calls_with_moved_buffers_and_accumulation)
{
    NN_REQUIRE_GPU();
    log_begin();
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++)
        for (int math = 0; math < 2; math++) {
            const struct shape *s = &shapes[si];
            nn_math_mode mm = math ? NN_MATH_TF32 : NN_MATH_STRICT_FP32;
            nn_ctx *eager = make_ctx(NN_GRAPHS_OFF, mm, 0);
            nn_ctx *rep = make_ctx(NN_GRAPHS_ON, mm, 1);
            struct set e, a, b;
            set_alloc(eager, s, &e);
            set_alloc(rep, s, &a);
            set_alloc(rep, s, &b); /* the same values at other addresses */
            /* Two steps on a first: the first may grow the context's kept workspace between its
             * products (strict f32), so after the second every product's last call was on a
             * with the workspace the steps below use. */
            for (int w = 0; w < 2; w++) {
                step(eager, s, &e, 0);
                step(rep, s, &a, 0);
            }
            int before = log_replays();
            char what[80];
            /* Steps 0-3 and 7-9 on a, 4-6 on b; dx and dw accumulate at 2 and 8, each after a
             * step on the same set, so both contexts add to the same values. */
            for (int k = 0; k < 10; k++) {
                struct set *r = k >= 4 && k <= 6 ? &b : &a;
                int acc = k == 2 || k == 8;
                step(eager, s, &e, acc);
                step(rep, s, r, acc);
                snprintf(what, sizeof what, "shape %zu math %d step %d", si, math, k);
                expect_same(eager, &e, rep, r, what);
            }
            /* The forward product replays at steps 0-3, 5, 6, 8, 9 (captured at 0, 5 and 8,
             * whose buffers are the step before's); dx and dw, whose beta changes at 2 and 8,
             * at 0, 1, 3, 5 and 6. The relu shape's backward products read a pool buffer of the
             * call's, so only its forward's count is certain: it is not counted. */
            int n = log_replays() - before;
            if (!s->relu)
                cr_expect_eq(n, 8 + 5 + 5, "shape %zu math %d: %d replayed products, not 18", si,
                             math, n);
            else
                cr_expect(n >= 8 && n <= 18, "shape %zu math %d: %d replayed products, not 8-18",
                          si, math, n);
            set_free(eager, &e), set_free(rep, &a), set_free(rep, &b);
            nn_ctx_destroy(eager);
            nn_ctx_destroy(rep);
        }
    unlink(log_path);
}

/* Three steps on the same buffers, against a context that never replays: some replayed products
 * (some 1) or none (some 0). */
static void expect_steps(nn_ctx *ctx, const char *what, int some)
{
    nn_ctx *eager = make_ctx(NN_GRAPHS_OFF, NN_MATH_STRICT_FP32, 0);
    struct set e, o;
    set_alloc(eager, &shapes[0], &e);
    set_alloc(ctx, &shapes[0], &o);
    int before = log_replays();
    for (int k = 0; k < 3; k++) {
        step(eager, &shapes[0], &e, 0);
        step(ctx, &shapes[0], &o, 0);
        expect_same(eager, &e, ctx, &o, what);
    }
    int n = log_replays() - before;
    cr_expect_eq(n > 0, some, "%s: %d replayed products", what, n);
    set_free(eager, &e), set_free(ctx, &o);
    nn_ctx_destroy(eager);
}

Test(linear_replay, none_with_the_setting_off)
{
    NN_REQUIRE_GPU();
    log_begin();
    nn_ctx *off = make_ctx(NN_GRAPHS_OFF, NN_MATH_STRICT_FP32, 1);
    expect_steps(off, "linear_graphs off", 0);
    nn_ctx_destroy(off);
    unlink(log_path);
}

/* Streams nnprim must not capture on itself (the default streams; a blocking one, whose capture
 * would break other threads' legacy-stream work): the products are captured on the context's
 * capture stream and launched on them, bitwise the eager calls. */
Test(linear_replay, on_streams_it_must_not_capture_itself)
{
    NN_REQUIRE_GPU();
#if NN_HAVE_CUDA
    log_begin();
    nn_ctx *on = make_ctx(NN_GRAPHS_ON, NN_MATH_STRICT_FP32, 1);
    expect_steps(on, "the context's own stream", 1);
    OK(nn_ctx_set_stream(on, (void *)cudaStreamPerThread));
    expect_steps(on, "the per-thread stream", 1);
    OK(nn_ctx_set_stream(on, NULL));
    expect_steps(on, "the legacy default stream", 1);
    cudaStream_t blocking;
    cr_assert_eq(cudaStreamCreate(&blocking), cudaSuccess);
    OK(nn_ctx_set_stream(on, (void *)blocking));
    expect_steps(on, "a blocking stream", 1);
    nn_ctx_destroy(on);
    cudaStreamDestroy(blocking);
    unlink(log_path);
#endif
}

/* Streams per call: nn_ctx_set_stream() / nn_ctx_get_stream().
 *
 * On the CPU: the checks, the reference backend (accepted and ignored), and the pool's side of a
 * context leaving a stream, over the host pool with simulated streams: blocks a stream cached are
 * not given to another before the work queued on it at the switch has completed, later work on
 * the stream left behind does not hold them back (its handle is not used again), and a context
 * that comes back takes them in stream order.
 *
 * On a GPU: forward on one stream and backward on another (conv, pooling, linear, LSTM eager and
 * replayed) give the bits of one stream, while the forward's stream is held back by a sleeping
 * host function, so a backward that did not wait for its forward would read stale data; memory
 * freed on a busy stream is not handed to another before that work has finished, nor are a
 * cached shape's buffers (a pullback's reserve, cross-entropy's staging) dropped on another
 * stream before the work reading them; and many
 * switches in one context (the legacy default stream and a stream destroyed after the switch
 * included) keep results and the pool's size steady. Each test runs in its own process
 * (Criterion forks), so each starts with fresh pools. */
#include <math.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "nn_config.h"

#include "core/ctx.h"
#include "gpu.h"
#include "mem/mem.h"
#include "mem/mem_pool.h"
#include "nnprim/nnprim.h"

#if NN_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

static void expect_message(const char *fragment)
{
    const char *m = nn_last_error()->message;
    cr_expect(strstr(m, fragment), "message \"%s\" lacks \"%s\"", m, fragment);
}

/* ---------------------------------------------------------------------------------------------
 * CPU: the calls' checks and the reference backend
 */

static nn_ctx *ref_ctx(void)
{
    nn_settings s;
    cr_assert_eq(nn_settings_defaults(&s), NN_OK);
    s.backend = NN_BACKEND_REF;
    nn_ctx *ctx;
    cr_assert_eq(nn_ctx_create(&ctx, &s), NN_OK, "%s", nn_last_error()->message);
    return ctx;
}

Test(streams, null_arguments)
{
    cr_expect_eq(nn_ctx_set_stream(NULL, NULL), NN_E_INVALID_ARG);
    expect_message("nn_ctx_set_stream: ctx must not be NULL");
    void *s = (void *)1;
    cr_expect_eq(nn_ctx_get_stream(NULL, &s), NN_E_INVALID_ARG);
    expect_message("nn_ctx_get_stream: ctx must not be NULL");
    cr_expect_eq(s, (void *)1, "out untouched on failure");
    nn_ctx *ctx = ref_ctx();
    cr_expect_eq(nn_ctx_get_stream(ctx, NULL), NN_E_INVALID_ARG);
    expect_message("nn_ctx_get_stream: out must not be NULL");
    nn_ctx_destroy(ctx);
}

/* A reference context has no stream: any value is accepted and changes nothing, and a pullback
 * made before the call is consumed after it. */
Test(streams, reference_backend_ignores_the_stream)
{
    nn_ctx *ctx = ref_ctx();
    nn_conv_params p;
    cr_assert_eq(nn_conv_params_default(&p, 2), NN_OK);
    int64_t xd[] = {1, 2, 5, 5}, wd[] = {3, 2, 3, 3}, yd[] = {1, 3, 3, 3};
    nn_tensor x, w, y, dy, dx, dx2;
    cr_assert_eq(nn_tensor_empty(ctx, NN_DTYPE_F32, 4, xd, &x), NN_OK);
    cr_assert_eq(nn_tensor_empty(ctx, NN_DTYPE_F32, 4, wd, &w), NN_OK);
    cr_assert_eq(nn_tensor_empty(ctx, NN_DTYPE_F32, 4, yd, &y), NN_OK);
    cr_assert_eq(nn_tensor_empty(ctx, NN_DTYPE_F32, 4, yd, &dy), NN_OK);
    cr_assert_eq(nn_tensor_empty(ctx, NN_DTYPE_F32, 4, xd, &dx), NN_OK);
    cr_assert_eq(nn_tensor_empty(ctx, NN_DTYPE_F32, 4, xd, &dx2), NN_OK);
    cr_assert_eq(nn_tensor_fill_ints(ctx, &x, -3, 3, 1), NN_OK);
    cr_assert_eq(nn_tensor_fill_ints(ctx, &w, -3, 3, 2), NN_OK);
    cr_assert_eq(nn_tensor_fill_ints(ctx, &dy, -3, 3, 3), NN_OK);

    nn_conv_pullback *pb = NULL;
    cr_assert_eq(nn_conv_forward(ctx, &p, &x, &w, NULL, &y, &pb), NN_OK);
    cr_assert_eq(nn_conv_backward(ctx, &pb, &dy, &dx, NULL, NULL), NN_OK);

    cr_assert_eq(nn_conv_forward(ctx, &p, &x, &w, NULL, &y, &pb), NN_OK);
    cr_expect_eq(nn_ctx_set_stream(ctx, (void *)0x1234), NN_OK);
    cr_expect_eq(nn_ctx_set_stream(ctx, NULL), NN_OK);
    void *s = (void *)1;
    cr_expect_eq(nn_ctx_get_stream(ctx, &s), NN_OK);
    cr_expect_null(s);
    cr_expect_null(nn_ctx_stream(ctx));
    cr_assert_eq(nn_conv_backward(ctx, &pb, &dy, &dx2, NULL, NULL), NN_OK, "%s",
                 nn_last_error()->message);
    cr_expect_eq(memcmp(dx.data, dx2.data, 50 * sizeof(float)), 0, "same gradient");
    nn_tensor *all[] = {&x, &w, &y, &dy, &dx, &dx2};
    for (int i = 0; i < 6; i++)
        cr_expect_eq(nn_tensor_free(ctx, all[i]), NN_OK);
    nn_ctx_destroy(ctx);
}

/* ---------------------------------------------------------------------------------------------
 * CPU: the pool's side, over the host pool (the code a device's pool runs)
 */

struct hpool {
    struct nn__mem_pool *pool;
    struct nn__hstream *a, *b;
    uint64_t ida, idb;
};

static void hpool_open(struct hpool *h)
{
    memset(h, 0, sizeof *h);
    struct nn__upstream up;
    cr_assert_eq(nn__upstream_host(&up), NN_OK);
    nn_mem_settings s;
    cr_assert_eq(nn_mem_settings_defaults(&s), NN_OK);
    cr_assert_eq(nn__mem_pool_create(up, &s, "test", &h->pool), NN_OK);
    cr_assert_eq(nn__hstream_create(&h->a), NN_OK);
    cr_assert_eq(nn__hstream_create(&h->b), NN_OK);
    h->ida = nn__hstream_id(h->a);
    h->idb = nn__hstream_id(h->b);
}

static void hpool_close(struct hpool *h)
{
    nn__mem_pool_destroy(h->pool);
    if (h->a) nn__hstream_destroy(h->a);
    if (h->b) nn__hstream_destroy(h->b);
    cr_expect_eq(nn__mem_pool_meta_live(), 0, "pool structures leaked");
}

#define BIG ((size_t)32 << 20) /* a segment of its own, so a reuse is the same pointer */

static void *alloc_on(struct hpool *h, struct nn__hstream *s, size_t bytes)
{
    void *p;
    cr_assert_eq(nn__mem_pool_alloc(h->pool, s, nn__hstream_id(s), bytes, &p, "test", NULL), NN_OK,
                 "%s", nn_last_error()->message);
    return p;
}

static void free_on(struct hpool *h, struct nn__hstream *s, void *p)
{
    cr_assert_eq(nn__mem_pool_free(h->pool, s, nn__hstream_id(s), p, "test", NULL), NN_OK);
}

/* A context on A frees a block while A is busy, then switches to B: B gets other memory until
 * A's work of before the switch has completed, then A's block. */
Test(streams, left_stream_blocks_wait_for_its_work)
{
    struct hpool h;
    hpool_open(&h);
    cr_assert_eq(nn__mem_pool_stream_ref(h.pool, h.a, h.ida, "test", NULL), NN_OK);
    void *x = alloc_on(&h, h.a, BIG);
    nn__hstream_busy(h.a); /* a kernel that uses x */
    free_on(&h, h.a, x);
    cr_assert_eq(nn__mem_pool_stream_ref(h.pool, h.b, h.idb, "test", NULL), NN_OK);
    nn__mem_pool_stream_leave(h.pool, h.a, h.ida);
    void *y = alloc_on(&h, h.b, BIG);
    cr_expect_neq(y, x, "A's block went to B while A's work was pending");
    nn__hstream_sync(h.a);
    void *z = alloc_on(&h, h.b, BIG);
    cr_expect_eq(z, x, "A's block once its work completed");
    free_on(&h, h.b, y);
    free_on(&h, h.b, z);
    nn__mem_pool_stream_unref(h.pool, h.idb);
    hpool_close(&h);
}

/* Work queued on A after the switch is not the context's: what A cached is covered by the event
 * recorded at the switch, so B takes it although A is busy again (the pool did not go back to A's
 * handle, which its owner may have destroyed). */
Test(streams, left_stream_handle_is_not_used_again)
{
    struct hpool h;
    hpool_open(&h);
    cr_assert_eq(nn__mem_pool_stream_ref(h.pool, h.a, h.ida, "test", NULL), NN_OK);
    void *x = alloc_on(&h, h.a, BIG);
    free_on(&h, h.a, x);
    cr_assert_eq(nn__mem_pool_stream_ref(h.pool, h.b, h.idb, "test", NULL), NN_OK);
    nn__mem_pool_stream_leave(h.pool, h.a, h.ida);
    nn__hstream_busy(h.a); /* the framework's own work on A, after the switch */
    nn__hstream_destroy(h.a);
    h.a = NULL;
    void *z = alloc_on(&h, h.b, BIG);
    cr_expect_eq(z, x, "covered by the switch's event");
    free_on(&h, h.b, z);
    /* More requests on B that find nothing of their own look at every cached block. */
    void *more[4];
    for (int i = 0; i < 4; i++)
        more[i] = alloc_on(&h, h.b, (size_t)(i + 1) << 10);
    for (int i = 0; i < 4; i++)
        free_on(&h, h.b, more[i]);
    nn__mem_pool_stream_unref(h.pool, h.idb);
    hpool_close(&h);
}

/* A context that comes back to A before A's blocks were shared reuses them in stream order,
 * busy or not; leaving again retires A again. */
Test(streams, coming_back_reuses_in_stream_order)
{
    struct hpool h;
    hpool_open(&h);
    cr_assert_eq(nn__mem_pool_stream_ref(h.pool, h.a, h.ida, "test", NULL), NN_OK);
    void *x = alloc_on(&h, h.a, BIG);
    nn__hstream_busy(h.a);
    free_on(&h, h.a, x);
    cr_assert_eq(nn__mem_pool_stream_ref(h.pool, h.b, h.idb, "test", NULL), NN_OK);
    nn__mem_pool_stream_leave(h.pool, h.a, h.ida);
    cr_assert_eq(nn__mem_pool_stream_ref(h.pool, h.a, h.ida, "test", NULL), NN_OK);
    nn__mem_pool_stream_leave(h.pool, h.b, h.idb);
    void *z = alloc_on(&h, h.a, BIG);
    cr_expect_eq(z, x, "A's own block, in A's order");
    free_on(&h, h.a, z);
    /* Leave A again while busy: B (back as well) must wait once more. */
    cr_assert_eq(nn__mem_pool_stream_ref(h.pool, h.b, h.idb, "test", NULL), NN_OK);
    nn__mem_pool_stream_leave(h.pool, h.a, h.ida);
    void *y = alloc_on(&h, h.b, BIG);
    cr_expect_neq(y, x);
    nn__hstream_sync(h.a);
    void *w = alloc_on(&h, h.b, BIG);
    cr_expect_eq(w, x);
    free_on(&h, h.b, y);
    free_on(&h, h.b, w);
    nn__mem_pool_stream_unref(h.pool, h.idb);
    hpool_close(&h);
}

/* Two users of one stream: the stream is retired only when the second goes. */
Test(streams, a_stream_with_another_user_is_not_retired)
{
    struct hpool h;
    hpool_open(&h);
    cr_assert_eq(nn__mem_pool_stream_ref(h.pool, h.a, h.ida, "test", NULL), NN_OK);
    cr_assert_eq(nn__mem_pool_stream_ref(h.pool, h.a, h.ida, "test", NULL), NN_OK);
    cr_assert_eq(nn__mem_pool_stream_ref(h.pool, h.b, h.idb, "test", NULL), NN_OK);
    void *x = alloc_on(&h, h.a, BIG);
    free_on(&h, h.a, x);
    nn__mem_pool_stream_leave(h.pool, h.a, h.ida); /* one of the two goes */
    nn__hstream_busy(h.a);                         /* the other keeps working on A */
    void *y = alloc_on(&h, h.b, BIG);
    cr_expect_neq(y, x, "A still has a user whose work is pending");
    nn__mem_pool_stream_unref(h.pool, h.ida); /* (unref's contract: A synchronised) */
    nn__hstream_sync(h.a);
    void *z = alloc_on(&h, h.b, BIG);
    cr_expect_eq(z, x);
    free_on(&h, h.b, y);
    free_on(&h, h.b, z);
    nn__mem_pool_stream_unref(h.pool, h.idb);
    hpool_close(&h);
}

/* The context hooks over a hand-made context on the host pool (real contexts over host memory run
 * the reference backend, which has no pool), as nn_ctx_set_stream() calls them. */
Test(streams, context_enter_and_leave)
{
    struct hpool h;
    hpool_open(&h);
    struct nn_ctx ctx;
    memset(&ctx, 0, sizeof ctx);
    ctx.settings.backend = NN_BACKEND_CUDNN;
    ctx.device = NN_MEM_HOST;
    ctx.mem_pool = h.pool;
    ctx.stream = h.a;
    ctx.stream_id = h.ida;
    cr_assert_eq(nn__mem_ctx_enter(&ctx, h.a, h.ida, "nn_ctx_set_stream"), NN_OK);
    void *x;
    cr_assert_eq(nn__dev_alloc_for(&ctx, "nn_conv_forward", BIG, &x), NN_OK);
    nn__hstream_busy(h.a);
    cr_assert_eq(nn__dev_free_for(&ctx, "nn_conv_forward", x), NN_OK);
    cr_assert_eq(nn__mem_ctx_enter(&ctx, h.b, h.idb, "nn_ctx_set_stream"), NN_OK);
    nn__mem_ctx_leave(&ctx, h.a, h.ida);
    ctx.stream = h.b;
    ctx.stream_id = h.idb;
    void *y, *z;
    cr_assert_eq(nn__dev_alloc_for(&ctx, "nn_conv_forward", BIG, &y), NN_OK);
    cr_expect_neq(y, x);
    nn__hstream_sync(h.a);
    cr_assert_eq(nn__dev_alloc_for(&ctx, "nn_conv_forward", BIG, &z), NN_OK);
    cr_expect_eq(z, x);
    cr_expect_eq(nn__dev_free_for(&ctx, "nn_conv_forward", y), NN_OK);
    cr_expect_eq(nn__dev_free_for(&ctx, "nn_conv_forward", z), NN_OK);
    nn__mem_pool_stream_unref(h.pool, h.idb);
    hpool_close(&h);
}

/* ---------------------------------------------------------------------------------------------
 * GPU
 */

#if NN_HAVE_CUDA

/* Holds a stream back: a host function that sleeps, so that work queued after it waits that long
 * (no flag to open, so a call that waits on the host cannot deadlock the test). */
static void CUDART_CB sleep_fn(void *arg)
{
    long ms = (long)(intptr_t)arg;
    struct timespec t = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&t, &t) != 0) {}
}

static void hold(cudaStream_t s, long ms)
{
    cr_assert_eq(cudaLaunchHostFunc(s, sleep_fn, (void *)(intptr_t)ms), cudaSuccess);
}

static cudaStream_t new_stream(void)
{
    cudaStream_t s;
    cr_assert_eq(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
    return s;
}

static nn_ctx *gpu_ctx(cudaStream_t s, nn_graphs_mode graphs)
{
    nn_settings st;
    cr_assert_eq(nn_settings_defaults(&st), NN_OK);
    st.backend = NN_BACKEND_CUDNN;
    st.stream = s;
    st.deterministic = 1;
    st.rnn_graphs = graphs;
    nn_ctx *ctx;
    cr_assert_eq(nn_ctx_create(&ctx, &st), NN_OK, "%s", nn_last_error()->message);
    return ctx;
}

static void set_stream(nn_ctx *ctx, cudaStream_t s)
{
    cr_assert_eq(nn_ctx_set_stream(ctx, s), NN_OK, "%s", nn_last_error()->message);
    void *now = (void *)1;
    cr_assert_eq(nn_ctx_get_stream(ctx, &now), NN_OK);
    cr_assert_eq(now, (void *)s);
}

static nn_tensor dev(nn_ctx *ctx, int rank, const int64_t *dims)
{
    nn_tensor t;
    cr_assert_eq(nn_tensor_empty(ctx, NN_DTYPE_F32, rank, dims, &t), NN_OK, "%s",
                 nn_last_error()->message);
    return t;
}

/* Integers make every sum exact; seed picks the values. */
static void ints(nn_ctx *ctx, nn_tensor *t, uint64_t seed)
{
    cr_assert_eq(nn_tensor_fill_ints(ctx, t, -3, 3, seed), NN_OK, "%s", nn_last_error()->message);
}

static void fill(nn_ctx *ctx, nn_tensor *t, double v)
{
    cr_assert_eq(nn_tensor_fill_constant(ctx, t, v), NN_OK, "%s", nn_last_error()->message);
}

/* A host copy of t (the copy waits for the context's stream); the caller frees it. */
static float *host_copy(nn_ctx *ctx, const nn_tensor *t)
{
    int64_t n = nn_tensor_numel(t);
    float *h = calloc((size_t)n, sizeof *h);
    cr_assert_not_null(h);
    /* By hand: nn_tensor_wrap() with a cuDNN context refuses host memory. */
    nn_tensor hv;
    memset(&hv, 0, sizeof hv);
    hv.data = h;
    hv.dtype = NN_DTYPE_F32;
    hv.rank = t->rank;
    memcpy(hv.dims, t->dims, sizeof hv.dims);
    nn_contiguous_strides(t->rank, t->dims, hv.strides);
    hv.space = NN_SPACE_HOST;
    hv.device = -1;
    cr_assert_eq(nn_tensor_copy(ctx, &hv, t), NN_OK, "%s", nn_last_error()->message);
    return h;
}

static void expect_same_bits(nn_ctx *ctx, const nn_tensor *got, const float *want, const char *what)
{
    float *h = host_copy(ctx, got);
    int64_t n = nn_tensor_numel(got);
    int64_t first = -1;
    for (int64_t i = 0; i < n && first < 0; i++)
        if (memcmp(&h[i], &want[i], sizeof *h)) first = i;
    cr_expect_eq(first, -1, "%s differs from the one-stream result at %lld: %g, want %g", what,
                 (long long)first, first >= 0 ? h[first] : 0.0, first >= 0 ? want[first] : 0.0);
    free(h);
}

/* One family's training step on the context's current stream: prepare fills the inputs from
 * seed and waits for them; forward makes the pullback, backward consumes it into outs[]. */
struct step {
    void *state;
    void (*prepare)(nn_ctx *ctx, void *state, uint64_t seed);
    void (*forward)(nn_ctx *ctx, void *state);
    void (*backward)(nn_ctx *ctx, void *state);
    nn_tensor *outs[4];
    int nouts;
};

static void run(nn_ctx *ctx, struct step *st, uint64_t seed)
{
    st->prepare(ctx, st->state, seed);
    st->forward(ctx, st->state);
    st->backward(ctx, st->state);
}

/* The two-stream check shared by the families: warm both streams up on other inputs (plans
 * built, blocks cached on each), take the one-stream result on s1, then the forward on s1 held
 * back by a sleeping host function and the backward on s2 at once, and compare the bits. */
static void two_streams(nn_ctx *ctx, cudaStream_t s1, cudaStream_t s2, struct step *st)
{
    float *want[4];
    set_stream(ctx, s2);
    run(ctx, st, 1);
    set_stream(ctx, s1);
    run(ctx, st, 1);
    run(ctx, st, 2);
    for (int i = 0; i < st->nouts; i++)
        want[i] = host_copy(ctx, st->outs[i]);
    /* Stale outputs and saved data hold seed 1's values (and the gradients NaN), so a backward
     * that ran before its forward would not match. */
    run(ctx, st, 1);
    for (int i = 0; i < st->nouts; i++)
        fill(ctx, st->outs[i], NAN);
    st->prepare(ctx, st->state, 2);
    hold(s1, 300);
    st->forward(ctx, st->state);
    set_stream(ctx, s2);
    st->backward(ctx, st->state);
    for (int i = 0; i < st->nouts; i++) {
        char what[32];
        snprintf(what, sizeof what, "output %d", i);
        expect_same_bits(ctx, st->outs[i], want[i], what);
        free(want[i]);
    }
    set_stream(ctx, s1);
}

/* ---- convolution: fused relu, so that backward reads the forward's y ---- */

struct conv_step {
    nn_conv_params p;
    nn_tensor x, w, b, y, dy, dx, dw, db;
    nn_conv_pullback *pb;
};

static void conv_prep(nn_ctx *ctx, void *state, uint64_t seed)
{
    struct conv_step *c = state;
    ints(ctx, &c->x, seed);
    ints(ctx, &c->w, seed + 10);
    ints(ctx, &c->b, seed + 20);
    ints(ctx, &c->dy, seed + 30);
    cr_assert_eq(nn_ctx_synchronize(ctx), NN_OK);
}

static void conv_fwd(nn_ctx *ctx, void *state)
{
    struct conv_step *c = state;
    cr_assert_eq(nn_conv_forward(ctx, &c->p, &c->x, &c->w, &c->b, &c->y, &c->pb), NN_OK, "%s",
                 nn_last_error()->message);
}

static void conv_bwd(nn_ctx *ctx, void *state)
{
    struct conv_step *c = state;
    cr_assert_eq(nn_conv_backward(ctx, &c->pb, &c->dy, &c->dx, &c->dw, &c->db), NN_OK, "%s",
                 nn_last_error()->message);
}

Test(streams_gpu, conv_forward_and_backward_on_two_streams)
{
    NN_REQUIRE_GPU();
    cudaStream_t s1 = new_stream(), s2 = new_stream();
    nn_ctx *ctx = gpu_ctx(s1, NN_GRAPHS_AUTO);
    struct conv_step c;
    memset(&c, 0, sizeof c);
    cr_assert_eq(nn_conv_params_default(&c.p, 2), NN_OK);
    c.p.pad_lo[0] = c.p.pad_lo[1] = c.p.pad_hi[0] = c.p.pad_hi[1] = 1;
    c.p.activation = NN_ACTIVATION_RELU;
    int64_t xd[] = {4, 8, 16, 16}, wd[] = {16, 8, 3, 3}, bd[] = {16}, yd[] = {4, 16, 16, 16};
    c.x = dev(ctx, 4, xd), c.w = dev(ctx, 4, wd), c.b = dev(ctx, 1, bd);
    c.y = dev(ctx, 4, yd), c.dy = dev(ctx, 4, yd), c.dx = dev(ctx, 4, xd);
    c.dw = dev(ctx, 4, wd), c.db = dev(ctx, 1, bd);
    struct step st = {&c, conv_prep, conv_fwd, conv_bwd, {&c.dx, &c.dw, &c.db}, 3};
    two_streams(ctx, s1, s2, &st);
    nn_tensor *all[] = {&c.x, &c.w, &c.b, &c.y, &c.dy, &c.dx, &c.dw, &c.db};
    for (int i = 0; i < 8; i++)
        cr_expect_eq(nn_tensor_free(ctx, all[i]), NN_OK);
    nn_ctx_destroy(ctx);
    cudaStreamDestroy(s1);
    cudaStreamDestroy(s2);
}

/* ---- max pooling: backward reads the forward's y ---- */

struct pool_step {
    nn_pool_params p;
    nn_tensor x, y, dy, dx;
    nn_pool_pullback *pb;
};

static void pool_prep(nn_ctx *ctx, void *state, uint64_t seed)
{
    struct pool_step *c = state;
    cr_assert_eq(nn_tensor_fill_uniform(ctx, &c->x, -1, 1, seed), NN_OK);
    ints(ctx, &c->dy, seed + 30);
    cr_assert_eq(nn_ctx_synchronize(ctx), NN_OK);
}

static void pool_fwd(nn_ctx *ctx, void *state)
{
    struct pool_step *c = state;
    cr_assert_eq(nn_pool_forward(ctx, &c->p, &c->x, &c->y, &c->pb), NN_OK, "%s",
                 nn_last_error()->message);
}

static void pool_bwd(nn_ctx *ctx, void *state)
{
    struct pool_step *c = state;
    cr_assert_eq(nn_pool_backward(ctx, &c->pb, &c->dy, &c->dx), NN_OK, "%s",
                 nn_last_error()->message);
}

Test(streams_gpu, pool_forward_and_backward_on_two_streams)
{
    NN_REQUIRE_GPU();
    cudaStream_t s1 = new_stream(), s2 = new_stream();
    nn_ctx *ctx = gpu_ctx(s1, NN_GRAPHS_AUTO);
    struct pool_step c;
    memset(&c, 0, sizeof c);
    c.p.mode = NN_POOL_MAX;
    c.p.spatial_rank = 2;
    for (int i = 0; i < 2; i++)
        c.p.window[i] = 2, c.p.stride[i] = 2;
    int64_t xd[] = {4, 8, 32, 32}, yd[] = {4, 8, 16, 16};
    c.x = dev(ctx, 4, xd), c.y = dev(ctx, 4, yd), c.dy = dev(ctx, 4, yd), c.dx = dev(ctx, 4, xd);
    struct step st = {&c, pool_prep, pool_fwd, pool_bwd, {&c.dx}, 1};
    two_streams(ctx, s1, s2, &st);
    nn_tensor *all[] = {&c.x, &c.y, &c.dy, &c.dx};
    for (int i = 0; i < 4; i++)
        cr_expect_eq(nn_tensor_free(ctx, all[i]), NN_OK);
    nn_ctx_destroy(ctx);
    cudaStreamDestroy(s1);
    cudaStreamDestroy(s2);
}

/* ---- linear with relu: backward reads the forward's y ---- */

struct linear_step {
    nn_linear_params p;
    nn_tensor x, w, b, y, dy, dx, dw, db;
    nn_linear_pullback *pb;
};

static void linear_prep(nn_ctx *ctx, void *state, uint64_t seed)
{
    struct linear_step *c = state;
    ints(ctx, &c->x, seed);
    ints(ctx, &c->w, seed + 10);
    ints(ctx, &c->b, seed + 20);
    ints(ctx, &c->dy, seed + 30);
    cr_assert_eq(nn_ctx_synchronize(ctx), NN_OK);
}

static void linear_fwd(nn_ctx *ctx, void *state)
{
    struct linear_step *c = state;
    cr_assert_eq(nn_linear_forward(ctx, &c->p, &c->x, &c->w, &c->b, &c->y, &c->pb), NN_OK, "%s",
                 nn_last_error()->message);
}

static void linear_bwd(nn_ctx *ctx, void *state)
{
    struct linear_step *c = state;
    cr_assert_eq(nn_linear_backward(ctx, &c->pb, &c->dy, &c->dx, &c->dw, &c->db), NN_OK, "%s",
                 nn_last_error()->message);
}

Test(streams_gpu, linear_forward_and_backward_on_two_streams)
{
    NN_REQUIRE_GPU();
    cudaStream_t s1 = new_stream(), s2 = new_stream();
    nn_ctx *ctx = gpu_ctx(s1, NN_GRAPHS_AUTO);
    struct linear_step c;
    memset(&c, 0, sizeof c);
    cr_assert_eq(nn_linear_params_default(&c.p), NN_OK);
    c.p.activation = NN_ACTIVATION_RELU;
    int64_t xd[] = {64, 96}, wd[] = {48, 96}, bd[] = {48}, yd[] = {64, 48};
    c.x = dev(ctx, 2, xd), c.w = dev(ctx, 2, wd), c.b = dev(ctx, 1, bd);
    c.y = dev(ctx, 2, yd), c.dy = dev(ctx, 2, yd), c.dx = dev(ctx, 2, xd);
    c.dw = dev(ctx, 2, wd), c.db = dev(ctx, 1, bd);
    struct step st = {&c, linear_prep, linear_fwd, linear_bwd, {&c.dx, &c.dw, &c.db}, 3};
    two_streams(ctx, s1, s2, &st);
    nn_tensor *all[] = {&c.x, &c.w, &c.b, &c.y, &c.dy, &c.dx, &c.dw, &c.db};
    for (int i = 0; i < 8; i++)
        cr_expect_eq(nn_tensor_free(ctx, all[i]), NN_OK);
    nn_ctx_destroy(ctx);
    cudaStreamDestroy(s1);
    cudaStreamDestroy(s2);
}

/* ---- LSTM: backward reads the reserve space the forward wrote (and, replayed, the staging
 * buffers and slots every call of the shape shares) ---- */

struct rnn_step {
    nn_rnn_params p;
    nn_tensor x, w, y, dy, dx, dw;
    nn_rnn_pullback *pb;
};

static void rnn_prep(nn_ctx *ctx, void *state, uint64_t seed)
{
    struct rnn_step *c = state;
    cr_assert_eq(nn_tensor_fill_uniform(ctx, &c->x, -1, 1, seed), NN_OK);
    cr_assert_eq(nn_tensor_fill_uniform(ctx, &c->w, -0.5, 0.5, seed + 10), NN_OK);
    cr_assert_eq(nn_tensor_fill_uniform(ctx, &c->dy, -1, 1, seed + 30), NN_OK);
    cr_assert_eq(nn_ctx_synchronize(ctx), NN_OK);
}

static void rnn_fwd(nn_ctx *ctx, void *state)
{
    struct rnn_step *c = state;
    cr_assert_eq(nn_rnn_forward(ctx, &c->p,
                                &(nn_rnn_forward_tensors){.x = &c->x, .w = &c->w, .y = &c->y},
                                &c->pb),
                 NN_OK, "%s", nn_last_error()->message);
}

static void rnn_bwd(nn_ctx *ctx, void *state)
{
    struct rnn_step *c = state;
    cr_assert_eq(
        nn_rnn_backward(ctx, &c->pb,
                        &(nn_rnn_backward_tensors){.dy = &c->dy, .dx = &c->dx, .dw = &c->dw}),
        NN_OK, "%s", nn_last_error()->message);
}

static void rnn_two_streams(nn_graphs_mode graphs)
{
    cudaStream_t s1 = new_stream(), s2 = new_stream();
    nn_ctx *ctx = gpu_ctx(s1, graphs);
    struct rnn_step c;
    memset(&c, 0, sizeof c);
    int64_t t = 6, n = 4, in = 8, hid = 16;
    cr_assert_eq(nn_rnn_params_default(&c.p, NN_RNN_LSTM, in, hid), NN_OK);
    c.p.num_layers = 2;
    int64_t wn;
    cr_assert_eq(nn_rnn_weights_size(ctx, &c.p, NN_DTYPE_F32, &wn), NN_OK, "%s",
                 nn_last_error()->message);
    int64_t xd[] = {t, n, in}, yd[] = {t, n, hid}, wd[] = {wn};
    c.x = dev(ctx, 3, xd), c.y = dev(ctx, 3, yd), c.dy = dev(ctx, 3, yd);
    c.dx = dev(ctx, 3, xd), c.w = dev(ctx, 1, wd), c.dw = dev(ctx, 1, wd);
    struct step st = {&c, rnn_prep, rnn_fwd, rnn_bwd, {&c.dx, &c.dw}, 2};
    two_streams(ctx, s1, s2, &st);
    /* Again, now that every variant has run (replays from captured graphs where asked). */
    two_streams(ctx, s1, s2, &st);
    nn_tensor *all[] = {&c.x, &c.w, &c.y, &c.dy, &c.dx, &c.dw};
    for (int i = 0; i < 6; i++)
        cr_expect_eq(nn_tensor_free(ctx, all[i]), NN_OK);
    nn_ctx_destroy(ctx);
    cudaStreamDestroy(s1);
    cudaStreamDestroy(s2);
}

Test(streams_gpu, lstm_eager_forward_and_backward_on_two_streams)
{
    NN_REQUIRE_GPU();
    rnn_two_streams(NN_GRAPHS_OFF);
}

Test(streams_gpu, lstm_replayed_forward_and_backward_on_two_streams)
{
    NN_REQUIRE_GPU();
    rnn_two_streams(NN_GRAPHS_ON);
}

/* ---- the pool across streams ---- */

#define DBIG ((size_t)64 << 20) /* a segment of its own: a reuse is the same pointer */

static void *mem_alloc(nn_ctx *ctx)
{
    void *p;
    cr_assert_eq(nn_mem_alloc(ctx, DBIG, &p), NN_OK, "%s", nn_last_error()->message);
    return p;
}

/* A block freed while its stream is held back goes to no other stream until that work is done:
 * after the context moved on (the stream left behind), and when the free itself is made on
 * another stream than the allocation (the freeing stream's work then counts). */
Test(streams_gpu, no_reuse_before_the_first_streams_work_ends)
{
    NN_REQUIRE_GPU();
    cudaStream_t s1 = new_stream(), s2 = new_stream();
    nn_ctx *ctx = gpu_ctx(s1, NN_GRAPHS_AUTO);

    void *p = mem_alloc(ctx);
    hold(s1, 300);
    cr_assert_eq(cudaMemsetAsync(p, 1, DBIG, s1), cudaSuccess); /* runs after the hold */
    cr_assert_eq(nn_mem_free(ctx, p), NN_OK);
    set_stream(ctx, s2);
    void *q = mem_alloc(ctx);
    cr_expect_neq(q, p, "s1's block handed to s2 while s1's memset was pending");
    cr_expect_eq(cudaStreamQuery(s1), cudaErrorNotReady, "the hold outlasted the check");
    (void)cudaGetLastError();
    cr_assert_eq(cudaStreamSynchronize(s1), cudaSuccess);
    void *r = mem_alloc(ctx);
    cr_expect_eq(r, p, "s1's block once its work ended");
    /* s1 may go now: the pool does not use its handle again. */
    cr_assert_eq(cudaStreamDestroy(s1), cudaSuccess);
    cr_assert_eq(nn_mem_free(ctx, q), NN_OK);
    cr_assert_eq(nn_mem_free(ctx, r), NN_OK);

    /* Allocated on s2, freed on s3 while s3 is held back: s2 waits for s3's work. */
    cudaStream_t s3 = new_stream();
    void *a = mem_alloc(ctx);
    set_stream(ctx, s3);
    hold(s3, 300);
    cr_assert_eq(cudaMemsetAsync(a, 2, DBIG, s3), cudaSuccess);
    cr_assert_eq(nn_mem_free(ctx, a), NN_OK);
    set_stream(ctx, s2);
    void *b = mem_alloc(ctx);
    cr_expect_neq(b, a, "a block freed on s3 reused on s2 before s3's memset");
    cr_assert_eq(cudaStreamSynchronize(s3), cudaSuccess);
    void *c = mem_alloc(ctx);
    cr_expect_eq(c, a, "the block once s3's work ended");
    cr_assert_eq(nn_mem_free(ctx, b), NN_OK);
    cr_assert_eq(nn_mem_free(ctx, c), NN_OK);
    nn_ctx_destroy(ctx);
    cudaStreamDestroy(s2);
    cudaStreamDestroy(s3);
}

/* ---- many switches in one context ---- */

Test(streams_gpu, switching_streams_repeatedly)
{
    NN_REQUIRE_GPU();
    cudaStream_t mine[3] = {new_stream(), new_stream(), new_stream()};
    nn_ctx *ctx = gpu_ctx(NULL, NN_GRAPHS_AUTO);
    void *home = NULL;
    cr_assert_eq(nn_ctx_get_stream(ctx, &home), NN_OK);
    cr_assert_not_null(home, "a context made with no stream has its own");
    struct conv_step c;
    memset(&c, 0, sizeof c);
    cr_assert_eq(nn_conv_params_default(&c.p, 2), NN_OK);
    c.p.activation = NN_ACTIVATION_RELU;
    int64_t xd[] = {2, 4, 12, 12}, wd[] = {8, 4, 3, 3}, bd[] = {8}, yd[] = {2, 8, 10, 10};
    c.x = dev(ctx, 4, xd), c.w = dev(ctx, 4, wd), c.b = dev(ctx, 1, bd);
    c.y = dev(ctx, 4, yd), c.dy = dev(ctx, 4, yd), c.dx = dev(ctx, 4, xd);
    c.dw = dev(ctx, 4, wd), c.db = dev(ctx, 1, bd);
    conv_prep(ctx, &c, 5);
    conv_fwd(ctx, &c);
    conv_bwd(ctx, &c);
    float *y0 = host_copy(ctx, &c.y), *dx0 = host_copy(ctx, &c.dx), *dw0 = host_copy(ctx, &c.dw);
    size_t reserved_warm = 0;
    for (int i = 0; i < 48; i++) {
        /* home, three streams of ours and the legacy default stream, in turn; the forward on one
         * and the backward on the next */
        void *order[5] = {home, mine[0], mine[1], NULL, mine[2]};
        set_stream(ctx, order[i % 5]);
        if (i % 3 == 0) hold(order[i % 5], 20);
        conv_fwd(ctx, &c);
        set_stream(ctx, order[(i + 1) % 5]);
        cr_assert_eq(nn_ctx_set_stream(ctx, order[(i + 1) % 5]), NN_OK, "again: costs nothing");
        conv_bwd(ctx, &c);
        expect_same_bits(ctx, &c.y, y0, "y");
        expect_same_bits(ctx, &c.dx, dx0, "dx");
        expect_same_bits(ctx, &c.dw, dw0, "dw");
        if (i == 20) {
            /* The context is on mine[0] now: mine[2], left behind, may be destroyed. */
            cr_assert_eq(cudaStreamDestroy(mine[2]), cudaSuccess);
            mine[2] = new_stream();
        }
        nn_mem_stats ms;
        cr_assert_eq(nn_mem_get_stats(0, &ms), NN_OK);
        if (i == 10) reserved_warm = ms.reserved_bytes;
        /* Bounded: blocks of the streams left behind serve the others (no growth per switch). */
        if (i > 10)
            cr_expect_leq(ms.reserved_bytes, 2 * reserved_warm + ((size_t)64 << 20),
                          "switch %d: reserved grew from %zu to %zu", i, reserved_warm,
                          (size_t)ms.reserved_bytes);
    }
    set_stream(ctx, home);
    free(y0), free(dx0), free(dw0);
    nn_tensor *all[] = {&c.x, &c.w, &c.b, &c.y, &c.dy, &c.dx, &c.dw, &c.db};
    for (int i = 0; i < 8; i++)
        cr_expect_eq(nn_tensor_free(ctx, all[i]), NN_OK);
    nn_ctx_destroy(ctx);
    for (int i = 0; i < 3; i++)
        cudaStreamDestroy(mine[i]);
}

/* s2 waits for the (held back) forward queued on s1: an event recorded on s2 now completes only
 * once that wait is over. */
static void expect_s2_waits_for_s1(cudaStream_t s1, cudaStream_t s2)
{
    cudaEvent_t after;
    cr_assert_eq(cudaEventCreateWithFlags(&after, cudaEventDisableTiming), cudaSuccess);
    cr_assert_eq(cudaEventRecord(after, s2), cudaSuccess);
    cr_expect_eq(cudaEventQuery(after), cudaErrorNotReady, "s2 waits for the forward on s1");
    (void)cudaGetLastError();
    cr_assert_eq(cudaEventSynchronize(after), cudaSuccess);
    cr_expect_eq(cudaStreamQuery(s1), cudaSuccess, "so s1's forward is done too");
    cudaEventDestroy(after);
}

/* A pullback dropped on another stream than its forward's: the free waits for the forward. */
Test(streams_gpu, pullback_freed_on_another_stream)
{
    NN_REQUIRE_GPU();
    cudaStream_t s1 = new_stream(), s2 = new_stream();
    nn_ctx *ctx = gpu_ctx(s1, NN_GRAPHS_OFF);
    struct rnn_step c;
    memset(&c, 0, sizeof c);
    cr_assert_eq(nn_rnn_params_default(&c.p, NN_RNN_GRU, 8, 16), NN_OK);
    int64_t wn;
    cr_assert_eq(nn_rnn_weights_size(ctx, &c.p, NN_DTYPE_F32, &wn), NN_OK);
    int64_t xd[] = {5, 3, 8}, yd[] = {5, 3, 16}, wd[] = {wn};
    c.x = dev(ctx, 3, xd), c.y = dev(ctx, 3, yd), c.dy = dev(ctx, 3, yd);
    c.dx = dev(ctx, 3, xd), c.w = dev(ctx, 1, wd), c.dw = dev(ctx, 1, wd);
    rnn_prep(ctx, &c, 1);
    rnn_fwd(ctx, &c);
    rnn_bwd(ctx, &c);
    rnn_prep(ctx, &c, 2);
    hold(s1, 300);
    rnn_fwd(ctx, &c);
    set_stream(ctx, s2);
    cr_assert_eq(nn_rnn_pullback_free(&c.pb), NN_OK);
    expect_s2_waits_for_s1(s1, s2);
    nn_tensor *all[] = {&c.x, &c.w, &c.y, &c.dy, &c.dx, &c.dw};
    for (int i = 0; i < 6; i++)
        cr_expect_eq(nn_tensor_free(ctx, all[i]), NN_OK);
    nn_ctx_destroy(ctx);
    cudaStreamDestroy(s1);
    cudaStreamDestroy(s2);
}

/* Sets the flag it is given: queued after a hold, it says the hold is over. */
static void CUDART_CB mark_fn(void *arg)
{
    atomic_store((atomic_int *)arg, 1);
}

/* Cross-entropy keeps per shape a pinned staging buffer, from which each forward uploads its
 * targets. Dropped with the cache on another stream while a forward on the first is held back,
 * it is freed only once that forward's upload is over: the host waits for it (the staging memory
 * is freed), and the loss comes out right. */
Test(streams_gpu, cross_entropy_scratch_dropped_while_a_forward_is_pending)
{
    NN_REQUIRE_GPU();
    cudaStream_t s1 = new_stream(), s2 = new_stream();
    nn_ctx *ctx = gpu_ctx(s1, NN_GRAPHS_OFF);
    int64_t xd[] = {4, 5}, ld[] = {4};
    nn_tensor x = dev(ctx, 2, xd), loss = dev(ctx, 1, ld);
    fill(ctx, &x, 0.25);
    int64_t t[4] = {0, 1, 2, 4};
    nn_class_targets tg = {t, NN_INDEX_I64, {0, 0}};
    cr_assert_eq(nn_softmax_cross_entropy_forward(ctx, &x, &tg, &loss, NULL), NN_OK, "%s",
                 nn_last_error()->message);
    cr_assert_eq(nn_ctx_synchronize(ctx), NN_OK);
    static atomic_int held_over;
    atomic_store(&held_over, 0);
    hold(s1, 300);
    cr_assert_eq(cudaLaunchHostFunc(s1, mark_fn, &held_over), cudaSuccess);
    cr_assert_eq(nn_softmax_cross_entropy_forward(ctx, &x, &tg, &loss, NULL), NN_OK, "%s",
                 nn_last_error()->message);
    cr_expect_eq(atomic_load(&held_over), 0, "the forward is queued behind the hold");
    set_stream(ctx, s2);
    cr_assert_eq(nn_plan_cache_clear(ctx), NN_OK);
    cr_expect_eq(atomic_load(&held_over), 1, "the clear returned before the forward's upload");
    /* the loss of uniform logits over 5 classes */
    float *got = host_copy(ctx, &loss);
    for (int i = 0; i < 4; i++)
        cr_expect_float_eq(got[i], logf(5.0f), 1e-5f, "loss[%d] = %g", i, (double)got[i]);
    free(got);
    cr_expect_eq(nn_tensor_free(ctx, &x), NN_OK);
    cr_expect_eq(nn_tensor_free(ctx, &loss), NN_OK);
    nn_ctx_destroy(ctx);
    cudaStreamDestroy(s1);
    cudaStreamDestroy(s2);
}

/* What a stream must be: of the context's device and not capturing. */
Test(streams_gpu, refused_streams_leave_the_context_as_it_was)
{
    NN_REQUIRE_GPU();
    cudaStream_t s1 = new_stream(), cap = new_stream();
    nn_ctx *ctx = gpu_ctx(s1, NN_GRAPHS_AUTO);
    cr_assert_eq(cudaStreamBeginCapture(cap, cudaStreamCaptureModeRelaxed), cudaSuccess);
    cr_expect_eq(nn_ctx_set_stream(ctx, cap), NN_E_UNSUPPORTED);
    expect_message("nn_ctx_set_stream: stream");
    expect_message("being captured");
    cudaGraph_t g = NULL;
    cr_assert_eq(cudaStreamEndCapture(cap, &g), cudaSuccess);
    if (g) cudaGraphDestroy(g);
    void *now = NULL;
    cr_expect_eq(nn_ctx_get_stream(ctx, &now), NN_OK);
    cr_expect_eq(now, (void *)s1, "still on s1");
    int n = 0;
    cr_assert_eq(cudaGetDeviceCount(&n), cudaSuccess);
    if (n > 1) {
        cudaStream_t other;
        cr_assert_eq(cudaSetDevice(1), cudaSuccess);
        cr_assert_eq(cudaStreamCreate(&other), cudaSuccess);
        cr_assert_eq(cudaSetDevice(0), cudaSuccess);
        cr_expect_eq(nn_ctx_set_stream(ctx, other), NN_E_INVALID_ARG);
        expect_message("belongs to device 1, but the context computes on device 0");
        cudaStreamDestroy(other);
    }
    /* The context still computes, on s1. */
    int64_t d[] = {16};
    nn_tensor t = dev(ctx, 1, d);
    fill(ctx, &t, 3.0);
    float want[16];
    for (int i = 0; i < 16; i++)
        want[i] = 3.0f;
    expect_same_bits(ctx, &t, want, "t");
    cr_expect_eq(nn_tensor_free(ctx, &t), NN_OK);
    nn_ctx_destroy(ctx);
    cudaStreamDestroy(s1);
    cudaStreamDestroy(cap);
}

#endif

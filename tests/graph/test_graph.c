/* Whole-step CUDA graphs (include/nnprim/graph.h): every family's calls captured and launched
 * against the same calls run eagerly, bitwise, on a deterministic context; a training loop of 100
 * launches against 100 eager steps; the graph's memory (tensors made inside the capture, the pool's
 * statistics, what a free after the capture does); feeds; and what is refused inside a capture. GPU
 * only: each test skips with the reason elsewhere, except the reference-backend refusal. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fixture.h"
#include "gpu.h"
#include "nnprim/nnprim.h"

#define OK(call) cr_assert_eq((call), NN_OK, "%s: %s", #call, nn_last_error()->message)

static nn_ctx *host_ctx(void)
{
    nn_settings s;
    OK(nn_settings_defaults(&s));
    s.backend = NN_BACKEND_REF;
    nn_ctx *ctx = NULL;
    OK(nn_ctx_create(&ctx, &s));
    return ctx;
}

static nn_tensor dev(nn_ctx *ctx, int rank, const int64_t *dims, uint64_t seed)
{
    nn_tensor t;
    OK(nn_tensor_empty(ctx, NN_DTYPE_F32, rank, dims, &t));
    OK(nn_tensor_fill_uniform(ctx, &t, -1, 1, seed));
    return t;
}

/* The bytes of device tensors, read back into one host buffer (the caller frees it). */
static unsigned char *snapshot(nn_ctx *ctx, nn_tensor *const *ts, int n, size_t *bytes)
{
    size_t total = 0;
    for (int i = 0; i < n; i++)
        total += (size_t)nn_tensor_numel(ts[i]) * nn_dtype_size(ts[i]->dtype);
    unsigned char *h = malloc(total ? total : 1), *p = h;
    cr_assert(h);
    for (int i = 0; i < n; i++) {
        size_t b = (size_t)nn_tensor_numel(ts[i]) * nn_dtype_size(ts[i]->dtype);
        OK(nn_mem_copy(ctx, p, ts[i]->data, b));
        p += b;
    }
    *bytes = total;
    return h;
}

/* NaN in every output, so that an output a launch does not write shows. */
static void poison(nn_ctx *ctx, nn_tensor *const *ts, int n)
{
    for (int i = 0; i < n; i++)
        OK(nn_tensor_fill_constant(ctx, ts[i], NAN));
}

/* A step of one family: its calls on the tensors of struct fam, written into outs. */
struct fam {
    const char *name;
    void (*setup)(nn_ctx *ctx, struct fam *f);
    void (*step)(nn_ctx *ctx, struct fam *f);
    nn_tensor t[16];
    nn_tensor *outs[16];
    int nouts;
    void *extra;
};

/* Eagerly twice (the first call of each shape builds its plans), snapshot; then poisoned,
 * captured, launched: the launch's outputs must be bitwise the eager ones, at every launch. */
static void eager_vs_graph(struct fam *f, int launches)
{
    nn_ctx *ctx = nn_test_deterministic_gpu();
    f->setup(ctx, f);
    f->step(ctx, f);
    f->step(ctx, f);
    size_t nb, gb;
    unsigned char *want = snapshot(ctx, f->outs, f->nouts, &nb);
    poison(ctx, f->outs, f->nouts);
    OK(nn_graph_begin(ctx));
    f->step(ctx, f);
    nn_graph *g = NULL;
    OK(nn_graph_end(ctx, &g));
    /* recorded, not run: the outputs still hold the poison */
    unsigned char *before = snapshot(ctx, f->outs, f->nouts, &gb);
    int untouched = 0;
    for (size_t i = 0; i + 4 <= gb; i += 4) {
        float v;
        memcpy(&v, before + i, 4);
        untouched += isnan(v);
    }
    cr_expect_eq(untouched, (int)(gb / 4), "%s: the capture ran calls (%d of %zu poisoned)",
                 f->name, untouched, gb / 4);
    free(before);
    nn_graph_info info;
    OK(nn_graph_get_info(g, &info));
    cr_expect_gt(info.nodes, 0, "%s: an empty graph", f->name);
    for (int l = 0; l < launches; l++) {
        poison(ctx, f->outs, f->nouts);
        OK(nn_graph_launch(ctx, g));
        unsigned char *got = snapshot(ctx, f->outs, f->nouts, &gb);
        cr_assert_eq(gb, nb);
        cr_expect_eq(memcmp(got, want, nb), 0, "%s: launch %d differs from the eager calls",
                     f->name, l);
        free(got);
    }
    OK(nn_graph_get_info(g, &info));
    cr_expect_eq(info.launches, (uint64_t)launches);
    OK(nn_graph_free(ctx, g));
    free(want);
    for (int i = 0; i < 16; i++)
        if (f->t[i].data) OK(nn_tensor_free(ctx, &f->t[i]));
    nn_ctx_destroy(ctx);
}

/* ---- conv: forward with bias and relu, backward with every gradient ---- */

static void conv_setup(nn_ctx *ctx, struct fam *f)
{
    int64_t xd[4] = {4, 3, 12, 12}, wd[4] = {8, 3, 3, 3}, bd[1] = {8}, yd[4] = {4, 8, 12, 12};
    f->t[0] = dev(ctx, 4, xd, 1), f->t[1] = dev(ctx, 4, wd, 2), f->t[2] = dev(ctx, 1, bd, 3);
    f->t[3] = dev(ctx, 4, yd, 4), f->t[4] = dev(ctx, 4, yd, 5); /* y, dy */
    f->t[5] = dev(ctx, 4, xd, 6), f->t[6] = dev(ctx, 4, wd, 7), f->t[7] = dev(ctx, 1, bd, 8);
    f->outs[0] = &f->t[3], f->outs[1] = &f->t[5], f->outs[2] = &f->t[6], f->outs[3] = &f->t[7];
    f->nouts = 4;
}

static void conv_step(nn_ctx *ctx, struct fam *f)
{
    nn_conv_params p;
    OK(nn_conv_params_default(&p, 2));
    p.pad_lo[0] = p.pad_lo[1] = p.pad_hi[0] = p.pad_hi[1] = 1;
    p.activation = NN_ACTIVATION_RELU;
    nn_conv_pullback *pb = NULL;
    OK(nn_conv_forward(ctx, &p, &f->t[0], &f->t[1], &f->t[2], &f->t[3], &pb));
    OK(nn_conv_backward(ctx, &pb, &f->t[4], &f->t[5], &f->t[6], &f->t[7]));
}

Test(graph, conv)
{
    NN_REQUIRE_GPU();
    struct fam f = {"conv", conv_setup, conv_step, {{0}}, {0}, 0, NULL};
    eager_vs_graph(&f, 3);
}

/* The same with the weight gradient accumulating (_ex): each launch adds once, as each eager
 * call does; the outputs are reset before each step, inside it. */
static void conv_acc_step(nn_ctx *ctx, struct fam *f)
{
    nn_conv_params p;
    OK(nn_conv_params_default(&p, 2));
    OK(nn_tensor_fill_constant(ctx, &f->t[6], 0.5));
    nn_conv_pullback *pb = NULL;
    OK(nn_conv_forward(ctx, &p, &f->t[0], &f->t[1], NULL, &f->t[3], &pb));
    nn_backward_options o;
    memset(&o, 0, sizeof o);
    o.accumulate = NN_ACCUMULATE_DW;
    OK(nn_conv_backward_ex(ctx, &pb, &o, &f->t[4], &f->t[5], &f->t[6], NULL));
}

static void conv_acc_setup(nn_ctx *ctx, struct fam *f)
{
    int64_t xd[4] = {2, 3, 9, 9}, wd[4] = {4, 3, 3, 3}, yd[4] = {2, 4, 7, 7};
    f->t[0] = dev(ctx, 4, xd, 1), f->t[1] = dev(ctx, 4, wd, 2);
    f->t[3] = dev(ctx, 4, yd, 4), f->t[4] = dev(ctx, 4, yd, 5);
    f->t[5] = dev(ctx, 4, xd, 6), f->t[6] = dev(ctx, 4, wd, 7);
    f->outs[0] = &f->t[3], f->outs[1] = &f->t[5], f->outs[2] = &f->t[6];
    f->nouts = 3;
}

Test(graph, conv_backward_ex_accumulate_and_fill)
{
    NN_REQUIRE_GPU();
    struct fam f = {"conv _ex", conv_acc_setup, conv_acc_step, {{0}}, {0}, 0, NULL};
    eager_vs_graph(&f, 3);
}

/* ---- pooling: max and mean, forward and backward ---- */

static void pool_setup(nn_ctx *ctx, struct fam *f)
{
    int64_t xd[4] = {2, 3, 8, 8}, yd[4] = {2, 3, 4, 4};
    f->t[0] = dev(ctx, 4, xd, 1), f->t[1] = dev(ctx, 4, yd, 2), f->t[2] = dev(ctx, 4, yd, 3);
    f->t[3] = dev(ctx, 4, xd, 4), f->t[4] = dev(ctx, 4, yd, 5), f->t[5] = dev(ctx, 4, xd, 6);
    f->outs[0] = &f->t[1], f->outs[1] = &f->t[3], f->outs[2] = &f->t[4], f->outs[3] = &f->t[5];
    f->nouts = 4;
}

static void pool_step(nn_ctx *ctx, struct fam *f)
{
    nn_pool_params p = {.spatial_rank = 2, .mode = NN_POOL_MAX, .window = {2, 2}, .stride = {2, 2}};
    nn_pool_pullback *pb = NULL;
    OK(nn_pool_forward(ctx, &p, &f->t[0], &f->t[1], &pb));
    OK(nn_pool_backward(ctx, &pb, &f->t[2], &f->t[3]));
    p.mode = NN_POOL_MEAN_EXCLUDE_PAD;
    OK(nn_pool_forward(ctx, &p, &f->t[0], &f->t[4], &pb));
    OK(nn_pool_backward(ctx, &pb, &f->t[2], &f->t[5]));
}

Test(graph, pool)
{
    NN_REQUIRE_GPU();
    struct fam f = {"pool", pool_setup, pool_step, {{0}}, {0}, 0, NULL};
    eager_vs_graph(&f, 3);
}

/* ---- linear: bias and relu ---- */

static void linear_setup(nn_ctx *ctx, struct fam *f)
{
    int64_t xd[2] = {16, 32}, wd[2] = {24, 32}, bd[1] = {24}, yd[2] = {16, 24};
    f->t[0] = dev(ctx, 2, xd, 1), f->t[1] = dev(ctx, 2, wd, 2), f->t[2] = dev(ctx, 1, bd, 3);
    f->t[3] = dev(ctx, 2, yd, 4), f->t[4] = dev(ctx, 2, yd, 5);
    f->t[5] = dev(ctx, 2, xd, 6), f->t[6] = dev(ctx, 2, wd, 7), f->t[7] = dev(ctx, 1, bd, 8);
    f->outs[0] = &f->t[3], f->outs[1] = &f->t[5], f->outs[2] = &f->t[6], f->outs[3] = &f->t[7];
    f->nouts = 4;
}

static void linear_step(nn_ctx *ctx, struct fam *f)
{
    nn_linear_params p;
    OK(nn_linear_params_default(&p));
    p.activation = NN_ACTIVATION_RELU;
    nn_linear_pullback *pb = NULL;
    OK(nn_linear_forward(ctx, &p, &f->t[0], &f->t[1], &f->t[2], &f->t[3], &pb));
    OK(nn_linear_backward(ctx, &pb, &f->t[4], &f->t[5], &f->t[6], &f->t[7]));
}

Test(graph, linear)
{
    NN_REQUIRE_GPU();
    struct fam f = {"linear", linear_setup, linear_step, {{0}}, {0}, 0, NULL};
    eager_vs_graph(&f, 3);
}

/* ---- softmax and log-softmax; cross-entropy with device targets ---- */

static void softmax_setup(nn_ctx *ctx, struct fam *f)
{
    int64_t xd[2] = {8, 10}, ld[1] = {8};
    f->t[0] = dev(ctx, 2, xd, 1), f->t[1] = dev(ctx, 2, xd, 2), f->t[2] = dev(ctx, 2, xd, 3);
    f->t[3] = dev(ctx, 2, xd, 4), f->t[4] = dev(ctx, 2, xd, 5), f->t[5] = dev(ctx, 1, ld, 6);
    f->t[6] = dev(ctx, 1, ld, 7), f->t[7] = dev(ctx, 2, xd, 8);
    f->outs[0] = &f->t[1], f->outs[1] = &f->t[3], f->outs[2] = &f->t[4], f->outs[3] = &f->t[5];
    f->outs[4] = &f->t[7];
    f->nouts = 5;
    int32_t t[8] = {0, 9, 3, 3, 5, 1, 8, 2};
    void *d = NULL;
    OK(nn_mem_alloc(ctx, sizeof t, &d));
    OK(nn_mem_copy(ctx, d, t, sizeof t));
    f->extra = d;
}

static void softmax_step(nn_ctx *ctx, struct fam *f)
{
    nn_softmax_params p;
    OK(nn_softmax_params_default(&p));
    nn_softmax_pullback *pb = NULL;
    OK(nn_softmax_forward(ctx, &p, &f->t[0], &f->t[1], &pb));
    OK(nn_softmax_backward(ctx, &pb, &f->t[2], &f->t[3]));
    p.mode = NN_SOFTMAX_MODE_LOG;
    OK(nn_softmax_forward(ctx, &p, &f->t[0], &f->t[4], NULL));
    nn_class_targets t = {f->extra, NN_INDEX_I32, {0}};
    nn_softmax_cross_entropy_pullback *xb = NULL;
    OK(nn_softmax_cross_entropy_forward(ctx, &f->t[0], &t, &f->t[5], &xb));
    OK(nn_softmax_cross_entropy_backward(ctx, &xb, &f->t[6], &f->t[7]));
}

Test(graph, softmax_and_cross_entropy)
{
    NN_REQUIRE_GPU();
    struct fam f = {"softmax", softmax_setup, softmax_step, {{0}}, {0}, 0, NULL};
    eager_vs_graph(&f, 3);
}

/* ---- layer norm: forward with gamma and beta, every gradient (256 rows: dgamma and dbeta sum
 * partials, a pool buffer made inside the capture, as the pullback's statistics are) ---- */

static void layernorm_setup(nn_ctx *ctx, struct fam *f)
{
    int64_t xd[3] = {4, 64, 48};
    f->t[0] = dev(ctx, 3, xd, 1), f->t[1] = dev(ctx, 1, xd + 2, 2),
    f->t[2] = dev(ctx, 1, xd + 2, 3);
    f->t[3] = dev(ctx, 3, xd, 4), f->t[4] = dev(ctx, 3, xd, 5); /* y, dy */
    f->t[5] = dev(ctx, 3, xd, 6), f->t[6] = dev(ctx, 1, xd + 2, 7),
    f->t[7] = dev(ctx, 1, xd + 2, 8);
    f->outs[0] = &f->t[3], f->outs[1] = &f->t[5], f->outs[2] = &f->t[6], f->outs[3] = &f->t[7];
    f->nouts = 4;
}

static void layernorm_step(nn_ctx *ctx, struct fam *f)
{
    nn_layernorm_params p;
    OK(nn_layernorm_params_default(&p));
    nn_layernorm_pullback *pb = NULL;
    OK(nn_layernorm_forward(ctx, &p, &f->t[0], &f->t[1], &f->t[2], &f->t[3], &pb));
    OK(nn_layernorm_backward(ctx, &pb, &f->t[4], &f->t[5], &f->t[6], &f->t[7]));
}

Test(graph, layernorm)
{
    NN_REQUIRE_GPU();
    struct fam f = {"layernorm", layernorm_setup, layernorm_step, {{0}}, {0}, 0, NULL};
    eager_vs_graph(&f, 3);
}

/* ---- recurrent layers: a 2-layer LSTM with state, and a GRU ---- */

struct rnn_extra {
    nn_rnn_params p;
};

static void rnn_setup_cell(nn_ctx *ctx, struct fam *f, nn_rnn_cell cell)
{
    struct rnn_extra *e = calloc(1, sizeof *e);
    cr_assert(e);
    OK(nn_rnn_params_default(&e->p, cell, 6, 8));
    e->p.num_layers = 2;
    int64_t nw;
    OK(nn_rnn_weights_size(ctx, &e->p, NN_DTYPE_F32, &nw));
    int64_t xd[3] = {5, 3, 6}, yd[3] = {5, 3, 8}, hd[3] = {2, 3, 8};
    f->t[0] = dev(ctx, 3, xd, 1), f->t[1] = dev(ctx, 3, hd, 2), f->t[2] = dev(ctx, 3, hd, 3);
    f->t[3] = dev(ctx, 1, &nw, 4), f->t[4] = dev(ctx, 3, yd, 5), f->t[5] = dev(ctx, 3, hd, 6);
    f->t[6] = dev(ctx, 3, hd, 7), f->t[7] = dev(ctx, 3, yd, 8), f->t[8] = dev(ctx, 3, xd, 9);
    f->t[9] = dev(ctx, 3, hd, 10), f->t[10] = dev(ctx, 3, hd, 11), f->t[11] = dev(ctx, 1, &nw, 12);
    OK(nn_tensor_fill_uniform(ctx, &f->t[3], -0.3, 0.3, 4));
    int lstm = cell == NN_RNN_LSTM;
    int n = 0;
    f->outs[n++] = &f->t[4], f->outs[n++] = &f->t[5], f->outs[n++] = &f->t[8];
    f->outs[n++] = &f->t[9], f->outs[n++] = &f->t[11];
    if (lstm) f->outs[n++] = &f->t[6], f->outs[n++] = &f->t[10];
    f->nouts = n;
    f->extra = e;
}

static void rnn_step(nn_ctx *ctx, struct fam *f)
{
    struct rnn_extra *e = f->extra;
    int lstm = e->p.cell == NN_RNN_LSTM;
    nn_tensor *cx = lstm ? &f->t[2] : NULL, *cy = lstm ? &f->t[6] : NULL;
    nn_tensor *dcx = lstm ? &f->t[10] : NULL;
    nn_rnn_pullback *pb = NULL;
    OK(nn_rnn_forward(ctx, &e->p,
                      &(nn_rnn_forward_tensors){.x = &f->t[0],
                                                .hx = &f->t[1],
                                                .cx = cx,
                                                .w = &f->t[3],
                                                .y = &f->t[4],
                                                .hy = &f->t[5],
                                                .cy = cy},
                      &pb));
    OK(nn_rnn_backward(
        ctx, &pb,
        &(nn_rnn_backward_tensors){
            .dy = &f->t[7], .dx = &f->t[8], .dhx = &f->t[9], .dcx = dcx, .dw = &f->t[11]}));
}

static void lstm_setup(nn_ctx *ctx, struct fam *f)
{
    rnn_setup_cell(ctx, f, NN_RNN_LSTM);
}

static void gru_setup(nn_ctx *ctx, struct fam *f)
{
    rnn_setup_cell(ctx, f, NN_RNN_GRU);
}

Test(graph, lstm)
{
    NN_REQUIRE_GPU();
    struct fam f = {"lstm", lstm_setup, rnn_step, {{0}}, {0}, 0, NULL};
    eager_vs_graph(&f, 3);
    free(f.extra);
}

Test(graph, gru)
{
    NN_REQUIRE_GPU();
    struct fam f = {"gru", gru_setup, rnn_step, {{0}}, {0}, 0, NULL};
    eager_vs_graph(&f, 3);
    free(f.extra);
}

/* ---- tensors: fills, a device copy, a scratch tensor made and freed inside the step ---- */

static void tensor_setup(nn_ctx *ctx, struct fam *f)
{
    int64_t d[2] = {33, 7};
    f->t[0] = dev(ctx, 2, d, 1), f->t[1] = dev(ctx, 2, d, 2), f->t[2] = dev(ctx, 2, d, 3);
    f->t[3] = dev(ctx, 2, d, 4);
    f->outs[0] = &f->t[0], f->outs[1] = &f->t[1], f->outs[2] = &f->t[2], f->outs[3] = &f->t[3];
    f->nouts = 4;
}

static void tensor_step(nn_ctx *ctx, struct fam *f)
{
    OK(nn_tensor_fill_uniform(ctx, &f->t[0], -2, 3, 99));
    OK(nn_tensor_fill_ints(ctx, &f->t[1], -5, 5, 7));
    nn_tensor s;
    OK(nn_tensor_empty(ctx, NN_DTYPE_F32, 2, f->t[0].dims, &s));
    OK(nn_tensor_fill_constant(ctx, &s, 0.25));
    OK(nn_tensor_copy(ctx, &f->t[2], &s));
    OK(nn_tensor_free(ctx, &s));
    OK(nn_tensor_copy(ctx, &f->t[3], &f->t[0]));
}

Test(graph, tensor_fills_and_copies)
{
    NN_REQUIRE_GPU();
    struct fam f = {"tensor", tensor_setup, tensor_step, {{0}}, {0}, 0, NULL};
    eager_vs_graph(&f, 2);
}

/* The device fills give the host's values, bitwise, in every dtype. */
Test(graph, device_fills_match_the_host)
{
    NN_REQUIRE_GPU();
    nn_ctx *ctx = nn_test_deterministic_gpu(), *h = host_ctx();
    nn_dtype dts[4] = {NN_DTYPE_F32, NN_DTYPE_F64, NN_DTYPE_F16, NN_DTYPE_BF16};
    int64_t d[1] = {1000};
    for (int i = 0; i < 4; i++) {
        nn_tensor a, b, ha;
        OK(nn_tensor_empty(ctx, dts[i], 1, d, &a));
        OK(nn_tensor_empty(h, dts[i], 1, d, &b));
        OK(nn_tensor_empty(h, dts[i], 1, d, &ha));
        for (int k = 0; k < 3; k++) {
            nn_tensor *both[2] = {&a, &b};
            nn_ctx *on[2] = {ctx, h};
            for (int j = 0; j < 2; j++) {
                if (k == 0) OK(nn_tensor_fill_uniform(on[j], both[j], -3, 2, 5));
                if (k == 1) OK(nn_tensor_fill_ints(on[j], both[j], -9, 9, 6));
                if (k == 2) OK(nn_tensor_fill_constant(on[j], both[j], 0.1));
            }
            OK(nn_tensor_copy(ctx, &ha, &a));
            cr_expect_eq(memcmp(ha.data, b.data, 1000 * nn_dtype_size(dts[i])), 0,
                         "dtype %d fill %d", (int)dts[i], k);
        }
        OK(nn_tensor_free(ctx, &a));
        OK(nn_tensor_free(h, &b));
        OK(nn_tensor_free(h, &ha));
    }
    nn_ctx_destroy(h);
    nn_ctx_destroy(ctx);
}

/* ---- memory ---- */

/* A tensor made inside the capture holds each launch's value after it; the graph's memory is
 * counted while it lives and gone after nn_graph_free(); a block freed after the capture stays
 * the graph's until then. */
Test(graph, memory_made_inside_the_capture)
{
    NN_REQUIRE_GPU();
    nn_ctx *ctx = nn_test_deterministic_gpu();
    int64_t d[1] = {256};
    nn_tensor x = dev(ctx, 1, d, 1), y;
    nn_mem_stats s0, s1, s2;
    OK(nn_mem_get_stats(0, &s0));
    OK(nn_graph_begin(ctx));
    OK(nn_tensor_empty(ctx, NN_DTYPE_F32, 1, d, &y));
    OK(nn_tensor_copy(ctx, &y, &x));
    nn_graph *g;
    OK(nn_graph_end(ctx, &g));
    OK(nn_mem_get_stats(0, &s1));
    cr_expect_geq(s1.graph_bytes, s0.graph_bytes + 1024);
    size_t b;
    for (int i = 0; i < 3; i++) {
        OK(nn_tensor_fill_constant(ctx, &x, (double)i));
        OK(nn_graph_launch(ctx, g));
        float *v = (float *)snapshot(ctx, (nn_tensor *[]){&y}, 1, &b);
        cr_expect_eq(v[0], (float)i);
        cr_expect_eq(v[255], (float)i);
        free(v);
    }
    OK(nn_tensor_free(ctx, &y)); /* the graph keeps it */
    OK(nn_tensor_fill_constant(ctx, &x, 7));
    OK(nn_graph_launch(ctx, g));
    OK(nn_graph_free(ctx, g));
    OK(nn_mem_get_stats(0, &s2));
    cr_expect_eq(s2.graph_bytes, s0.graph_bytes);
    OK(nn_tensor_free(ctx, &x));
    nn_ctx_destroy(ctx);
}

/* A request that no freed block of the capture fits grows the graph's memory in place into the
 * pool's free memory after it, instead of taking a block of its own beside the freed one: the
 * graph holds the larger request's bytes, not both. */
Test(graph, memory_grows_in_place)
{
    NN_REQUIRE_GPU();
    nn_ctx *ctx = nn_test_deterministic_gpu();
    int64_t big[1] = {256 * 1024}, small[1] = {16 * 1024}, large[1] = {48 * 1024};
    nn_tensor w, x = dev(ctx, 1, large, 1), a, b;
    /* a free segment in the pool's cache, as a warm-up step leaves one */
    OK(nn_tensor_empty(ctx, NN_DTYPE_F32, 1, big, &w));
    OK(nn_tensor_free(ctx, &w));
    nn_mem_stats s0, s1, s2;
    OK(nn_mem_get_stats(0, &s0));
    OK(nn_graph_begin(ctx));
    OK(nn_tensor_empty(ctx, NN_DTYPE_F32, 1, small, &a));
    OK(nn_tensor_fill_constant(ctx, &a, 1));
    OK(nn_tensor_free(ctx, &a));
    OK(nn_tensor_empty(ctx, NN_DTYPE_F32, 1, large, &b));
    OK(nn_tensor_copy(ctx, &b, &x));
    nn_graph *g;
    OK(nn_graph_end(ctx, &g));
    OK(nn_mem_get_stats(0, &s1));
    cr_expect_eq(s1.graph_bytes - s0.graph_bytes, (size_t)large[0] * 4,
                 "the graph holds %llu bytes for a %lld-byte block freed before a %lld-byte one",
                 (unsigned long long)(s1.graph_bytes - s0.graph_bytes), (long long)small[0] * 4,
                 (long long)large[0] * 4);
    size_t n;
    for (int i = 0; i < 2; i++) {
        OK(nn_tensor_fill_constant(ctx, &x, (double)i + 2));
        OK(nn_graph_launch(ctx, g));
        float *v = (float *)snapshot(ctx, (nn_tensor *[]){&b}, 1, &n);
        cr_expect_eq(v[0], (float)i + 2);
        cr_expect_eq(v[large[0] - 1], (float)i + 2);
        free(v);
    }
    OK(nn_tensor_free(ctx, &b));
    OK(nn_graph_free(ctx, g));
    OK(nn_ctx_synchronize(ctx));
    OK(nn_mem_get_stats(0, &s2));
    cr_expect_eq(s2.graph_bytes, s0.graph_bytes);
    cr_expect_eq(s2.allocated_bytes, s0.allocated_bytes, "every byte went back to the pool");
    OK(nn_tensor_free(ctx, &x));
    nn_ctx_destroy(ctx);
}

/* A tensor made inside the capture and still live when the graph goes stays valid until it is
 * freed. */
Test(graph, live_tensor_outlives_its_graph)
{
    NN_REQUIRE_GPU();
    nn_ctx *ctx = nn_test_deterministic_gpu();
    int64_t d[1] = {64};
    nn_tensor x = dev(ctx, 1, d, 1), y;
    OK(nn_graph_begin(ctx));
    OK(nn_tensor_empty(ctx, NN_DTYPE_F32, 1, d, &y));
    OK(nn_tensor_copy(ctx, &y, &x));
    nn_graph *g;
    OK(nn_graph_end(ctx, &g));
    OK(nn_graph_launch(ctx, g));
    OK(nn_graph_free(ctx, g));
    size_t b;
    unsigned char *want = snapshot(ctx, (nn_tensor *[]){&x}, 1, &b);
    unsigned char *got = snapshot(ctx, (nn_tensor *[]){&y}, 1, &b);
    cr_expect_eq(memcmp(want, got, b), 0);
    free(want), free(got);
    OK(nn_tensor_free(ctx, &y));
    cr_expect_eq(nn_tensor_free(ctx, &y), NN_OK, "a freed view has data NULL: a no-op");
    OK(nn_tensor_free(ctx, &x));
    nn_ctx_destroy(ctx);
}

/* ---- feeds ---- */

Test(graph, feeds_bring_each_batch_in)
{
    NN_REQUIRE_GPU();
    nn_ctx *ctx = nn_test_deterministic_gpu();
    int64_t d[2] = {4, 8};
    nn_tensor x = dev(ctx, 2, d, 1), w = dev(ctx, 2, (int64_t[]){3, 8}, 2), y, ye;
    OK(nn_tensor_empty(ctx, NN_DTYPE_F32, 2, (int64_t[]){4, 3}, &y));
    OK(nn_tensor_empty(ctx, NN_DTYPE_F32, 2, (int64_t[]){4, 3}, &ye));
    nn_linear_params p;
    OK(nn_linear_params_default(&p));
    OK(nn_linear_forward(ctx, &p, &x, &w, NULL, &y, NULL));
    OK(nn_graph_begin(ctx));
    OK(nn_linear_forward(ctx, &p, &x, &w, NULL, &y, NULL));
    nn_graph *g;
    OK(nn_graph_end(ctx, &g));
    float batch[32];
    for (int step = 0; step < 4; step++) {
        for (int i = 0; i < 32; i++)
            batch[i] = (float)((i * 7 + step * 3) % 11) - 5.0f;
        nn_graph_feed f = {x.data, batch, sizeof batch, {0}};
        OK(nn_graph_launch_feeds(ctx, g, &f, 1));
        nn_tensor xe;
        OK(nn_tensor_empty(ctx, NN_DTYPE_F32, 2, d, &xe));
        OK(nn_mem_copy(ctx, xe.data, batch, sizeof batch));
        OK(nn_linear_forward(ctx, &p, &xe, &w, NULL, &ye, NULL));
        size_t b;
        unsigned char *a = snapshot(ctx, (nn_tensor *[]){&y}, 1, &b);
        unsigned char *e = snapshot(ctx, (nn_tensor *[]){&ye}, 1, &b);
        cr_expect_eq(memcmp(a, e, b), 0, "step %d", step);
        free(a), free(e);
        OK(nn_tensor_free(ctx, &xe));
    }
    nn_graph_feed wrong = {x.data, batch, sizeof batch / 2, {0}};
    cr_expect_eq(nn_graph_launch_feeds(ctx, g, &wrong, 1), NN_E_SHAPE);
    cr_expect(strstr(nn_last_error()->message, "another shape"), "%s", nn_last_error()->message);
    nn_graph_feed stray = {(char *)x.data + 4, batch, 4, {0}};
    cr_expect_eq(nn_graph_launch_feeds(ctx, g, &stray, 1), NN_E_INVALID_ARG);
    OK(nn_graph_free(ctx, g));
    nn_tensor *all[] = {&x, &w, &y, &ye};
    for (int i = 0; i < 4; i++)
        OK(nn_tensor_free(ctx, all[i]));
    nn_ctx_destroy(ctx);
}

/* ---- refusals ---- */

Test(graph, reference_backend_refuses)
{
    nn_ctx *ctx = host_ctx();
    cr_expect_eq(nn_graph_begin(ctx), NN_E_UNSUPPORTED);
    nn_graph *g = (nn_graph *)1;
    cr_expect_eq(nn_graph_end(ctx, &g), NN_E_GRAPH);
    cr_expect_null(g);
    int on = 1;
    OK(nn_graph_capturing(ctx, &on));
    cr_expect_eq(on, 0);
    nn_ctx_destroy(ctx);
}

/* A shape not seen before is refused inside the capture, which then makes no graph; the context
 * computes afterwards, and the same call after a warm-up is captured. */
Test(graph, first_call_of_a_shape_is_refused_inside)
{
    NN_REQUIRE_GPU();
    nn_ctx *ctx = nn_test_deterministic_gpu();
    int64_t xd[2] = {5, 9}, wd[2] = {4, 9}, yd[2] = {5, 4};
    nn_tensor x = dev(ctx, 2, xd, 1), w = dev(ctx, 2, wd, 2), y = dev(ctx, 2, yd, 3);
    nn_linear_params p;
    OK(nn_linear_params_default(&p));
    OK(nn_graph_begin(ctx));
    cr_expect_eq(nn_linear_forward(ctx, &p, &x, &w, NULL, &y, NULL), NN_E_GRAPH);
    cr_expect(strstr(nn_last_error()->message, "nn_graph_begin"), "%s", nn_last_error()->message);
    nn_graph *g = NULL;
    cr_expect_eq(nn_graph_end(ctx, &g), NN_E_GRAPH);
    cr_expect(strstr(nn_last_error()->message, "the capture failed: nn_linear_forward"), "%s",
              nn_last_error()->message);
    cr_expect_null(g);
    OK(nn_linear_forward(ctx, &p, &x, &w, NULL, &y, NULL));
    OK(nn_graph_begin(ctx));
    OK(nn_linear_forward(ctx, &p, &x, &w, NULL, &y, NULL));
    OK(nn_graph_end(ctx, &g));
    OK(nn_graph_launch(ctx, g));
    OK(nn_graph_free(ctx, g));
    nn_tensor *all[] = {&x, &w, &y};
    for (int i = 0; i < 3; i++)
        OK(nn_tensor_free(ctx, all[i]));
    nn_ctx_destroy(ctx);
}

Test(graph, pullbacks_do_not_cross_the_boundary)
{
    NN_REQUIRE_GPU();
    nn_ctx *ctx = nn_test_deterministic_gpu();
    int64_t xd[2] = {5, 9}, wd[2] = {4, 9}, yd[2] = {5, 4};
    nn_tensor x = dev(ctx, 2, xd, 1), w = dev(ctx, 2, wd, 2), y = dev(ctx, 2, yd, 3);
    nn_tensor dy = dev(ctx, 2, yd, 4), dx = dev(ctx, 2, xd, 5), dw = dev(ctx, 2, wd, 6);
    nn_linear_params p;
    OK(nn_linear_params_default(&p));
    nn_linear_pullback *out = NULL, *in = NULL;
    OK(nn_linear_forward(ctx, &p, &x, &w, NULL, &y, &out));
    OK(nn_linear_backward(ctx, &out, &dy, &dx, &dw, NULL)); /* warm */
    OK(nn_linear_forward(ctx, &p, &x, &w, NULL, &y, &out));
    OK(nn_graph_begin(ctx));
    cr_expect_eq(nn_linear_backward(ctx, &out, &dy, &dx, &dw, NULL), NN_E_GRAPH);
    cr_expect(strstr(nn_last_error()->message, "before the graph capture"), "%s",
              nn_last_error()->message);
    nn_graph *g = NULL;
    cr_expect_eq(nn_graph_end(ctx, &g), NN_E_GRAPH);
    OK(nn_graph_begin(ctx));
    OK(nn_linear_forward(ctx, &p, &x, &w, NULL, &y, &in));
    OK(nn_graph_end(ctx, &g));
    cr_expect_eq(nn_linear_backward(ctx, &in, &dy, &dx, &dw, NULL), NN_E_GRAPH);
    cr_expect(strstr(nn_last_error()->message, "has ended"), "%s", nn_last_error()->message);
    OK(nn_linear_pullback_free(&in));
    OK(nn_linear_backward(ctx, &out, &dy, &dx, &dw, NULL)); /* still usable outside */
    OK(nn_graph_launch(ctx, g));
    OK(nn_graph_free(ctx, g));
    nn_tensor *all[] = {&x, &w, &y, &dy, &dx, &dw};
    for (int i = 0; i < 6; i++)
        OK(nn_tensor_free(ctx, all[i]));
    nn_ctx_destroy(ctx);
}

/* Freeing a buffer the graph uses makes it stale; host copies, a wait, a stream switch are
 * refused inside; a second begin does not spoil the open capture. */
Test(graph, misuse)
{
    NN_REQUIRE_GPU();
    nn_ctx *ctx = nn_test_deterministic_gpu();
    int64_t d[1] = {16};
    nn_tensor a = dev(ctx, 1, d, 1), b = dev(ctx, 1, d, 2);
    float h[16];
    OK(nn_graph_begin(ctx));
    cr_expect_eq(nn_graph_begin(ctx), NN_E_GRAPH);
    OK(nn_tensor_copy(ctx, &b, &a));
    nn_graph *g;
    OK(nn_graph_end(ctx, &g));
    OK(nn_graph_begin(ctx));
    cr_expect_eq(nn_mem_copy(ctx, h, a.data, sizeof h), NN_E_GRAPH);
    nn_graph *g2 = NULL;
    cr_expect_eq(nn_graph_end(ctx, &g2), NN_E_GRAPH);
    OK(nn_graph_begin(ctx));
    cr_expect_eq(nn_ctx_synchronize(ctx), NN_E_GRAPH);
    cr_expect_eq(nn_graph_launch(ctx, g), NN_E_GRAPH);
    cr_expect_eq(nn_graph_free(ctx, g), NN_E_GRAPH);
    cr_expect_eq(nn_graph_end(ctx, &g2), NN_E_GRAPH);
    nn_ctx *other = nn_test_deterministic_gpu();
    cr_expect_eq(nn_graph_launch(other, g), NN_E_INVALID_ARG);
    nn_ctx_destroy(other);
    OK(nn_graph_launch(ctx, g));
    OK(nn_tensor_free(ctx, &a));
    cr_expect_eq(nn_graph_launch(ctx, g), NN_E_GRAPH);
    cr_expect(strstr(nn_last_error()->message, "stale"), "%s", nn_last_error()->message);
    OK(nn_graph_free(ctx, g));
    cr_expect_eq(nn_graph_launch(ctx, g), NN_E_BAD_POINTER);
    cr_expect_eq(nn_graph_free(ctx, g), NN_E_BAD_POINTER);
    OK(nn_tensor_free(ctx, &b));
    /* a capture and a graph left open at destroy */
    OK(nn_graph_begin(ctx));
    nn_ctx_destroy(ctx);
}

/* The legacy default stream and a blocking stream cannot be captured. */
Test(graph, streams_that_cannot_be_captured)
{
    NN_REQUIRE_GPU();
    nn_ctx *ctx = nn_test_deterministic_gpu();
    void *home;
    OK(nn_ctx_get_stream(ctx, &home));
    OK(nn_ctx_set_stream(ctx, NULL));
    cr_expect_eq(nn_graph_begin(ctx), NN_E_GRAPH);
    cr_expect(strstr(nn_last_error()->message, "legacy"), "%s", nn_last_error()->message);
    OK(nn_ctx_set_stream(ctx, home));
    int on = 1;
    OK(nn_graph_capturing(ctx, &on));
    cr_expect_eq(on, 0);
    nn_ctx_destroy(ctx);
}

/* Graph replay and the tuned algorithm choice of the cuDNN recurrent path (docs/RNN.md, "Graph
 * replay"): replayed calls against eager ones bitwise, pointers changed under the graphs and kept
 * still (then the graphs run on the caller's own buffers), dropout, several contexts, the decision
 * and algorithm surviving a plan file, a refused persistent algorithm, memory back to the baseline,
 * replays on streams nnprim does not capture on itself.
 * GPU only: every test skips with the reason elsewhere. Every test has the same timeout: with a
 * longer one sorted before a shorter one, Criterion's runner leaks 48 bytes that LeakSanitizer
 * reports (seen in the ASan build). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fixture.h"
#include "gpu.h"
#include "peak_alloc.h"
#include "nnprim/nnprim.h"
#include "rnn/rnn_internal.h"

#if NN_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

#if !NN_HAVE_CUDNN /* every test skips there; this keeps the suite linking */
int nn__rnn_cudnn_records(struct nn_ctx *ctx, int32_t *algo, int32_t *flags, int cap)
{
    (void)ctx, (void)algo, (void)flags, (void)cap;
    return 0;
}
#endif

static nn_ctx *make_ctx(nn_graphs_mode graphs, nn_tuning_mode tuning, int verbose)
{
    nn_settings s;
    nn_settings_from_env(&s);
    s.backend = NN_BACKEND_CUDNN;
    s.rnn_graphs = graphs;
    s.tuning = tuning;
    s.verbose = verbose;
    nn_ctx *ctx = NULL;
    cr_assert_eq(nn_ctx_create(&ctx, &s), NN_OK, "%s", nn_last_error()->message);
    return ctx;
}

struct shape {
    nn_rnn_params p;
    int64_t t, n;
    const int32_t *lengths; /* NULL = all T */
};

/* Every tensor of a training step; the same seed gives the same contents at other addresses. */
struct set {
    nn_tensor x, hx, cx, w, y, hy, cy, dy, dhy, dcy, dx, dhx, dcx, dw;
};

static void dev(nn_ctx *ctx, nn_tensor *t, int rank, const int64_t *dims, uint64_t seed)
{
    cr_assert_eq(nn_tensor_empty(ctx, NN_DTYPE_F32, rank, dims, t), NN_OK, "%s",
                 nn_last_error()->message);
    cr_assert_eq(nn_tensor_fill_uniform(ctx, t, -1, 1, seed), NN_OK);
}

static void set_alloc(nn_ctx *ctx, const struct shape *s, struct set *o, uint64_t seed)
{
    memset(o, 0, sizeof *o);
    const nn_rnn_params *p = &s->p;
    int64_t d = p->bidirectional ? 2 : 1, out = p->proj_size ? p->proj_size : p->hidden_size;
    int64_t xd[3] = {s->t, s->n, p->input_size}, yd[3] = {s->t, s->n, d * out};
    int64_t hd[3] = {p->num_layers * d, s->n, out},
            cd[3] = {p->num_layers * d, s->n, p->hidden_size};
    int64_t nw;
    cr_assert_eq(nn_rnn_weights_size(ctx, p, NN_DTYPE_F32, &nw), NN_OK, "%s",
                 nn_last_error()->message);
    dev(ctx, &o->x, 3, xd, seed + 1), dev(ctx, &o->dx, 3, xd, seed + 2);
    dev(ctx, &o->y, 3, yd, seed + 3), dev(ctx, &o->dy, 3, yd, seed + 4);
    dev(ctx, &o->hx, 3, hd, seed + 5), dev(ctx, &o->hy, 3, hd, seed + 6);
    dev(ctx, &o->dhy, 3, hd, seed + 7), dev(ctx, &o->dhx, 3, hd, seed + 8);
    if (p->cell == NN_RNN_LSTM) {
        dev(ctx, &o->cx, 3, cd, seed + 9), dev(ctx, &o->cy, 3, cd, seed + 10);
        dev(ctx, &o->dcy, 3, cd, seed + 11), dev(ctx, &o->dcx, 3, cd, seed + 12);
    }
    dev(ctx, &o->w, 1, &nw, seed + 13), dev(ctx, &o->dw, 1, &nw, seed + 14);
}

static void set_free(nn_ctx *ctx, struct set *o)
{
    nn_tensor *all[] = {&o->x,  &o->hx,  &o->cx,  &o->w,  &o->y,   &o->hy,  &o->cy,
                        &o->dy, &o->dhy, &o->dcy, &o->dx, &o->dhx, &o->dcx, &o->dw};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        if (all[i]->data) nn_tensor_free(ctx, all[i]);
}

static nn_tensor *opt(nn_tensor *t)
{
    return t->data ? t : NULL;
}

/* Forward in training mode, then backward with every gradient asked for. */
static nn_status step(nn_ctx *ctx, const struct shape *s, struct set *o)
{
    nn_rnn_pullback *pb;
    nn_status st = nn_rnn_forward(ctx, &s->p,
                                  &(nn_rnn_forward_tensors){.x = &o->x,
                                                            .lengths = s->lengths,
                                                            .hx = &o->hx,
                                                            .cx = opt(&o->cx),
                                                            .w = &o->w,
                                                            .y = &o->y,
                                                            .hy = &o->hy,
                                                            .cy = opt(&o->cy)},
                                  &pb);
    if (st != NN_OK) return st;
    st = nn_rnn_backward(ctx, &pb,
                         &(nn_rnn_backward_tensors){.dy = &o->dy,
                                                    .dhy = &o->dhy,
                                                    .dcy = opt(&o->dcy),
                                                    .dx = &o->dx,
                                                    .dhx = &o->dhx,
                                                    .dcx = opt(&o->dcx),
                                                    .dw = &o->dw});
    if (st != NN_OK) nn_rnn_pullback_free(&pb);
    return st;
}

static nn_status infer(nn_ctx *ctx, const struct shape *s, struct set *o)
{
    return nn_rnn_forward(ctx, &s->p,
                          &(nn_rnn_forward_tensors){.x = &o->x,
                                                    .lengths = s->lengths,
                                                    .hx = &o->hx,
                                                    .cx = opt(&o->cx),
                                                    .w = &o->w,
                                                    .y = &o->y,
                                                    .hy = &o->hy,
                                                    .cy = opt(&o->cy)},
                          NULL);
}

/* 0 when the two device tensors hold the same bytes. */
static int differ(nn_ctx *ca, const nn_tensor *a, nn_ctx *cb, const nn_tensor *b)
{
    return a->data ? nn_test_f32_differ(ca, a, cb, b) : 0;
}

static void expect_same(nn_ctx *ca, struct set *a, nn_ctx *cb, struct set *b, const char *what)
{
    cr_expect_not(differ(ca, &a->y, cb, &b->y), "%s: y", what);
    cr_expect_not(differ(ca, &a->hy, cb, &b->hy), "%s: hy", what);
    cr_expect_not(differ(ca, &a->cy, cb, &b->cy), "%s: cy", what);
    cr_expect_not(differ(ca, &a->dx, cb, &b->dx), "%s: dx", what);
    cr_expect_not(differ(ca, &a->dhx, cb, &b->dhx), "%s: dhx", what);
    cr_expect_not(differ(ca, &a->dcx, cb, &b->dcx), "%s: dcx", what);
    cr_expect_not(differ(ca, &a->dw, cb, &b->dw), "%s: dw", what);
}

/* stderr into a file, to count the verbose lines that say a call replayed. */
static char log_path[64];
static void log_begin(void)
{
    strcpy(log_path, "/tmp/nnprim_rnn_replay_XXXXXX");
    int fd = mkstemp(log_path);
    cr_assert_geq(fd, 0);
    close(fd);
    cr_assert(freopen(log_path, "w", stderr));
}

static int log_count(const char *needle)
{
    fflush(stderr);
    FILE *f = fopen(log_path, "r");
    cr_assert(f);
    char line[4096];
    int n = 0;
    while (fgets(line, sizeof line, f))
        n += !strncmp(line, "nnprim_verbose,rnn_", 19) && strstr(line, needle) != NULL;
    fclose(f);
    return n;
}

static void shape_of(struct shape *s, nn_rnn_cell cell, const int32_t *lengths)
{
    memset(s, 0, sizeof *s);
    cr_assert_eq(nn_rnn_params_default(&s->p, cell, 4, 6), NN_OK);
    s->p.num_layers = 2;
    s->p.bidirectional = 1;
    s->t = 5, s->n = 3;
    s->lengths = lengths;
}

Test(rnn_replay, bitwise_the_eager_calls_every_cell_lengths_and_moved_pointers, .timeout = 300)
{
    NN_REQUIRE_GPU();
    static const int32_t varied[3] = {5, 0, 3};
    log_begin();
    for (int cell = NN_RNN_RELU; cell <= NN_RNN_GRU; cell++)
        for (int lv = 0; lv < 2; lv++) {
            struct shape s;
            shape_of(&s, (nn_rnn_cell)cell, lv ? varied : NULL);
            nn_ctx *eager = make_ctx(NN_GRAPHS_OFF, NN_TUNING_HEURISTIC, 0);
            nn_ctx *rep = make_ctx(NN_GRAPHS_ON, NN_TUNING_HEURISTIC, 1);
            struct set e, a, b;
            set_alloc(eager, &s, &e, 100);
            set_alloc(rep, &s, &a, 100);
            set_alloc(rep, &s, &b, 100); /* the same values at other addresses */
            int before = log_count("-replay,");
            char what[64];
            /* Set a: eager, staging graph, then captured on a's own pointers and replayed so;
             * b: staging again, then its own direct graph; a once more: staging, repointed. */
            for (int k = 0; k < 8; k++) {
                struct set *r = k >= 4 && k < 7 ? &b : &a;
                cr_assert_eq(step(eager, &s, &e), NN_OK, "%s", nn_last_error()->message);
                cr_assert_eq(step(rep, &s, r), NN_OK, "%s", nn_last_error()->message);
                snprintf(what, sizeof what, "cell %d lengths %d step %d", cell, lv, k);
                expect_same(eager, &e, rep, r, what);
            }
            /* inference on b: eager, staging, direct; then a (staging), then b (direct again) */
            for (int k = 0; k < 5; k++) {
                struct set *r = k == 3 ? &a : &b;
                cr_assert_eq(infer(eager, &s, &e), NN_OK, "%s", nn_last_error()->message);
                cr_assert_eq(infer(rep, &s, r), NN_OK, "%s", nn_last_error()->message);
                snprintf(what, sizeof what, "cell %d lengths %d inference %d", cell, lv, k);
                expect_same(eager, &e, rep, r, what);
            }
            /* steps 1..7 forward and backward, inference calls 1 to 4 */
            cr_expect_eq(log_count("-replay,") - before, 18, "cell %d lengths %d: replayed calls",
                         cell, lv);
            set_free(eager, &e), set_free(rep, &a), set_free(rep, &b);
            nn_ctx_destroy(eager);
            nn_ctx_destroy(rep);
        }
    unlink(log_path);
}

/* A context on a stream nnprim must not capture on itself (the legacy and per-thread default
 * streams, PyTorch's default among them; a blocking stream) replays too: its graphs are captured
 * on the context's capture stream and launched on its stream, bitwise the eager calls. */
Test(rnn_replay, on_streams_it_must_not_capture_itself, .timeout = 300)
{
    NN_REQUIRE_GPU();
#if NN_HAVE_CUDA
    cudaStream_t blocking;
    cr_assert_eq(cudaStreamCreate(&blocking), cudaSuccess);
    struct {
        void *stream;
        const char *what;
    } on[] = {{NULL, "the legacy default stream"},
              {(void *)cudaStreamPerThread, "the per-thread default stream"},
              {(void *)blocking, "a blocking stream"}};
    log_begin();
    for (size_t i = 0; i < sizeof on / sizeof on[0]; i++) {
        struct shape s;
        shape_of(&s, NN_RNN_LSTM, NULL);
        nn_ctx *eager = make_ctx(NN_GRAPHS_OFF, NN_TUNING_HEURISTIC, 0);
        nn_ctx *rep = make_ctx(NN_GRAPHS_ON, NN_TUNING_HEURISTIC, 1);
        cr_assert_eq(nn_ctx_set_stream(rep, on[i].stream), NN_OK, "%s", nn_last_error()->message);
        struct set e, a;
        set_alloc(eager, &s, &e, 100);
        set_alloc(rep, &s, &a, 100);
        int before = log_count("-replay,");
        char what[80];
        for (int k = 0; k < 4; k++) {
            cr_assert_eq(step(eager, &s, &e), NN_OK, "%s", nn_last_error()->message);
            cr_assert_eq(step(rep, &s, &a), NN_OK, "%s", nn_last_error()->message);
            snprintf(what, sizeof what, "%s step %d", on[i].what, k);
            expect_same(eager, &e, rep, &a, what);
        }
        /* steps 1..3, forward and backward */
        cr_expect_eq(log_count("-replay,") - before, 6, "%s: replayed calls", on[i].what);
        set_free(eager, &e), set_free(rep, &a);
        nn_ctx_destroy(eager);
        nn_ctx_destroy(rep);
    }
    cudaStreamDestroy(blocking);
    unlink(log_path);
#endif
}

Test(rnn_replay, dropout_training_stays_eager_and_matches_under_a_fixed_seed, .timeout = 300)
{
    NN_REQUIRE_GPU();
    log_begin();
    struct shape s;
    shape_of(&s, NN_RNN_LSTM, NULL);
    s.p.dropout = 0.5, s.p.dropout_seed = 4321;
    nn_ctx *eager = make_ctx(NN_GRAPHS_OFF, NN_TUNING_HEURISTIC, 0);
    nn_ctx *rep = make_ctx(NN_GRAPHS_ON, NN_TUNING_HEURISTIC, 1);
    struct set e, a;
    set_alloc(eager, &s, &e, 7);
    set_alloc(rep, &s, &a, 7);
    char what[32];
    for (int k = 0; k < 4; k++) { /* the state advances alike: every step's mask is the same */
        cr_assert_eq(step(eager, &s, &e), NN_OK, "%s", nn_last_error()->message);
        cr_assert_eq(step(rep, &s, &a), NN_OK, "%s", nn_last_error()->message);
        snprintf(what, sizeof what, "dropout step %d", k);
        expect_same(eager, &e, rep, &a, what);
    }
    cr_expect_eq(log_count("-replay,"), 0);
    for (int k = 0; k < 2; k++) { /* inference has no dropout: it replays */
        cr_assert_eq(infer(eager, &s, &e), NN_OK);
        cr_assert_eq(infer(rep, &s, &a), NN_OK);
        expect_same(eager, &e, rep, &a, "dropout shape, inference");
    }
    cr_expect_eq(log_count("-replay,"), 1);
    set_free(eager, &e), set_free(rep, &a);
    nn_ctx_destroy(eager);
    nn_ctx_destroy(rep);
    unlink(log_path);
}

Test(rnn_replay, several_contexts_on_one_device_interleaved, .timeout = 300)
{
    NN_REQUIRE_GPU();
    struct shape s;
    shape_of(&s, NN_RNN_LSTM, NULL);
    nn_ctx *eager = make_ctx(NN_GRAPHS_OFF, NN_TUNING_HEURISTIC, 0);
    nn_ctx *c[2] = {make_ctx(NN_GRAPHS_ON, NN_TUNING_HEURISTIC, 0),
                    make_ctx(NN_GRAPHS_ON, NN_TUNING_HEURISTIC, 0)};
    struct set e, r[2];
    set_alloc(eager, &s, &e, 55);
    for (int i = 0; i < 2; i++)
        set_alloc(c[i], &s, &r[i], 55);
    for (int k = 0; k < 4; k++) {
        cr_assert_eq(step(eager, &s, &e), NN_OK);
        for (int i = 0; i < 2; i++)
            cr_assert_eq(step(c[i], &s, &r[i]), NN_OK, "%s", nn_last_error()->message);
        for (int i = 0; i < 2; i++)
            expect_same(eager, &e, c[i], &r[i], i ? "context 2" : "context 1");
    }
    set_free(eager, &e);
    for (int i = 0; i < 2; i++) {
        set_free(c[i], &r[i]);
        nn_ctx_destroy(c[i]);
    }
    nn_ctx_destroy(eager);
}

/* Two pullbacks of one shape alive at once: each replayed forward takes its own slot. */
Test(rnn_replay, two_pullbacks_alive_at_once, .timeout = 300)
{
    NN_REQUIRE_GPU();
    struct shape s;
    shape_of(&s, NN_RNN_GRU, NULL);
    nn_ctx *eager = make_ctx(NN_GRAPHS_OFF, NN_TUNING_HEURISTIC, 0);
    nn_ctx *rep = make_ctx(NN_GRAPHS_ON, NN_TUNING_HEURISTIC, 0);
    struct set e[2], a[2];
    for (int i = 0; i < 2; i++) {
        set_alloc(eager, &s, &e[i], 10 + 100 * (uint64_t)i);
        set_alloc(rep, &s, &a[i], 10 + 100 * (uint64_t)i);
    }
    for (int k = 0; k < 3; k++) {
        nn_ctx *ctxs[2] = {eager, rep};
        struct set *sets[2] = {e, a};
        for (int c = 0; c < 2; c++) {
            nn_rnn_pullback *pb[2];
            for (int i = 0; i < 2; i++) {
                struct set *o = &sets[c][i];
                cr_assert_eq(
                    nn_rnn_forward(
                        ctxs[c], &s.p,
                        &(nn_rnn_forward_tensors){
                            .x = &o->x, .hx = &o->hx, .w = &o->w, .y = &o->y, .hy = &o->hy},
                        &pb[i]),
                    NN_OK, "%s", nn_last_error()->message);
            }
            for (int i = 1; i >= 0; i--) {
                struct set *o = &sets[c][i];
                cr_assert_eq(nn_rnn_backward(ctxs[c], &pb[i],
                                             &(nn_rnn_backward_tensors){.dy = &o->dy,
                                                                        .dhy = &o->dhy,
                                                                        .dx = &o->dx,
                                                                        .dhx = &o->dhx,
                                                                        .dw = &o->dw}),
                             NN_OK, "%s", nn_last_error()->message);
            }
        }
        for (int i = 0; i < 2; i++)
            expect_same(eager, &e[i], rep, &a[i], i ? "second pullback" : "first pullback");
    }
    for (int i = 0; i < 2; i++)
        set_free(eager, &e[i]), set_free(rep, &a[i]);
    nn_ctx_destroy(eager);
    nn_ctx_destroy(rep);
}

Test(rnn_replay, decision_and_algorithm_survive_a_plan_file_untimed, .timeout = 300)
{
    NN_REQUIRE_GPU();
    char path[] = "/tmp/nnprim_rnn_replay_plans_XXXXXX";
    int fd = mkstemp(path);
    cr_assert_geq(fd, 0);
    close(fd);
    struct shape s;
    memset(&s, 0, sizeof s);
    cr_assert_eq(nn_rnn_params_default(&s.p, NN_RNN_LSTM, 8, 8), NN_OK);
    s.t = 2, s.n = 1;
    nn_ctx *a = make_ctx(NN_GRAPHS_AUTO, NN_TUNING_AUTOTUNE, 0);
    struct set o;
    set_alloc(a, &s, &o, 3);
    for (int k = 0; k < 12; k++)
        cr_assert_eq(step(a, &s, &o), NN_OK, "%s", nn_last_error()->message);
    int32_t algo[4], flags[4];
    cr_assert_eq(nn__rnn_cudnn_records(a, algo, flags, 4), 1);
    cr_expect(flags[0] & NN__RNN_REC_TUNED, "flags %d", flags[0]);
    cr_expect(flags[0] & (NN__RNN_REC_TRAIN_EAGER | NN__RNN_REC_TRAIN_REPLAY),
              "auto decided the training step: flags %d", flags[0]);
    nn_plan_cache_stats st;
    cr_assert_eq(nn_plan_cache_get_stats(a, &st), NN_OK);
    cr_expect_geq(st.autotune_runs, 1, "the (algorithm, mode) pair, timed once");
    cr_assert_eq(nn_plan_cache_save(a, path), NN_OK, "%s", nn_last_error()->message);
    set_free(a, &o);
    nn_ctx_destroy(a);

    nn_ctx *b = make_ctx(NN_GRAPHS_AUTO, NN_TUNING_AUTOTUNE, 0);
    cr_assert_eq(nn_plan_cache_load(b, path), NN_OK, "%s", nn_last_error()->message);
    set_alloc(b, &s, &o, 3);
    for (int k = 0; k < 4; k++)
        cr_assert_eq(step(b, &s, &o), NN_OK, "%s", nn_last_error()->message);
    int32_t algo_b[4], flags_b[4];
    cr_assert_eq(nn__rnn_cudnn_records(b, algo_b, flags_b, 4), 1);
    cr_expect_eq(algo_b[0], algo[0]);
    cr_expect_eq(flags_b[0], flags[0]);
    cr_assert_eq(nn_plan_cache_get_stats(b, &st), NN_OK);
    cr_expect_eq(st.autotune_runs, 0, "nothing timed in the second context");
    cr_expect_geq(st.plans_rebuilt, 1);
    set_free(b, &o);
    nn_ctx_destroy(b);
    unlink(path);
}

/* Autotune times each algorithm eager and replayed and keeps the cheaper pair (the decision
 * itself is checked with injected timings in rnn_validation): here only that the record holds a
 * pair, the verbose line of the tuning call names it, and the calls after the first run it. */
Test(rnn_replay, autotune_records_an_algorithm_and_mode_pair_and_runs_it, .timeout = 300)
{
    NN_REQUIRE_GPU();
    log_begin();
    static const struct {
        nn_rnn_cell cell;
        int64_t t, n, i, h;
    } shapes[] = {{NN_RNN_LSTM, 2, 1, 8, 8}, {NN_RNN_GRU, 1, 32, 512, 512}};
    for (int si = 0; si < 2; si++) {
        struct shape s;
        memset(&s, 0, sizeof s);
        cr_assert_eq(nn_rnn_params_default(&s.p, shapes[si].cell, shapes[si].i, shapes[si].h),
                     NN_OK);
        s.t = shapes[si].t, s.n = shapes[si].n;
        nn_ctx *ctx = make_ctx(NN_GRAPHS_AUTO, NN_TUNING_AUTOTUNE, 1);
        struct set o;
        set_alloc(ctx, &s, &o, 17);
        int replayed0 = log_count("-replay,"), tuned0 = log_count(",autotuned:");
        int said_replay0 = log_count("+replay,");
        for (int k = 0; k < 4; k++)
            cr_assert_eq(step(ctx, &s, &o), NN_OK, "%s", nn_last_error()->message);
        int32_t algo[2], flags[2];
        cr_assert_eq(nn__rnn_cudnn_records(ctx, algo, flags, 2), 1);
        int train = flags[0] & (NN__RNN_REC_TRAIN_EAGER | NN__RNN_REC_TRAIN_REPLAY);
        cr_expect(flags[0] & NN__RNN_REC_TUNED, "shape %d: flags %d", si, flags[0]);
        cr_expect(train == NN__RNN_REC_TRAIN_EAGER || train == NN__RNN_REC_TRAIN_REPLAY,
                  "shape %d: one mode recorded, flags %d", si, flags[0]);
        int replay = train == NN__RNN_REC_TRAIN_REPLAY;
        nn_plan_cache_stats st;
        cr_assert_eq(nn_plan_cache_get_stats(ctx, &st), NN_OK);
        cr_expect_eq(st.autotune_runs, 1, "shape %d: the pair is timed once, no trials after", si);
        cr_expect_eq(log_count(",autotuned:") - tuned0, 1, "shape %d: the tuning call says so", si);
        cr_expect_eq(log_count("+replay,") - said_replay0, replay,
                     "shape %d: the verbose line names the mode recorded (flags %d)", si, flags[0]);
        /* the first step runs eagerly (cuDNN's first call), steps 2 to 4 as the pair says */
        cr_expect_eq(log_count("-replay,") - replayed0, replay ? 6 : 0,
                     "shape %d: replayed calls (flags %d, algorithm %d)", si, flags[0], algo[0]);
        set_free(ctx, &o);
        nn_ctx_destroy(ctx);
    }
    unlink(log_path);
}

/* A plan file's load prepares its recurrent shapes (docs/RNN.md, "The first step from a plan
 * file"): in a second context, the first training step builds no descriptors (no cache miss, no
 * rebuild), makes no eager first call (both of its calls replay, the first one saying "prepared"),
 * and gives bitwise the eager calls' results; the same from settings.plan_cache_file at context
 * creation; the pool goes back to its baseline with the contexts. */
Test(rnn_replay, a_loaded_plan_file_prepares_the_first_step, .timeout = 300)
{
    NN_REQUIRE_GPU();
    char path[] = "/tmp/nnprim_rnn_prepare_XXXXXX";
    int fd = mkstemp(path);
    cr_assert_geq(fd, 0);
    close(fd);
    log_begin();
    static const nn_rnn_cell cells[] = {NN_RNN_LSTM, NN_RNN_GRU};
    for (int ci = 0; ci < 2; ci++) {
        struct shape s;
        shape_of(&s, cells[ci], NULL);
        unlink(path);
        /* the tuning process: its record keeps the replay and the tensors the calls passed */
        nn_ctx *a = make_ctx(NN_GRAPHS_ON, NN_TUNING_HEURISTIC, 0);
        struct set o;
        set_alloc(a, &s, &o, 5);
        for (int k = 0; k < 4; k++)
            cr_assert_eq(step(a, &s, &o), NN_OK, "%s", nn_last_error()->message);
        set_free(a, &o);
        cr_assert_eq(nn_plan_cache_save(a, path), NN_OK, "%s", nn_last_error()->message);
        nn_ctx_destroy(a);

        nn_mem_stats base, after;
        cr_assert_eq(nn_mem_get_stats(0, &base), NN_OK);
        for (int from_settings = 0; from_settings < 2; from_settings++) {
            nn_ctx *b;
            nn_plan_cache_stats s0, s1, s2;
            if (from_settings) {
                nn_settings set;
                nn_settings_from_env(&set);
                set.backend = NN_BACKEND_CUDNN;
                set.rnn_graphs = NN_GRAPHS_ON;
                set.verbose = 1;
                set.plan_cache_file = path;
                cr_assert_eq(nn_ctx_create(&b, &set), NN_OK, "%s", nn_last_error()->message);
                memset(&s0, 0, sizeof s0);
            } else {
                b = make_ctx(NN_GRAPHS_ON, NN_TUNING_HEURISTIC, 1);
                cr_assert_eq(nn_plan_cache_get_stats(b, &s0), NN_OK);
                cr_assert_eq(nn_plan_cache_load(b, path), NN_OK, "%s", nn_last_error()->message);
            }
            cr_assert_eq(nn_plan_cache_get_stats(b, &s1), NN_OK);
            cr_expect_geq(s1.plans_prebuilt - s0.plans_prebuilt, 2,
                          "cell %d: the shape and its weight layout prepared at load",
                          (int)cells[ci]);
            cr_expect_geq(s1.plans_rebuilt - s0.plans_rebuilt, 2, "from the file's records");
            nn_ctx *eager = make_ctx(NN_GRAPHS_OFF, NN_TUNING_HEURISTIC, 0);
            struct set e, r;
            set_alloc(eager, &s, &e, 77);
            set_alloc(b, &s, &r, 77);
            cr_assert_eq(nn_plan_cache_get_stats(b, &s1), NN_OK);
            int rep0 = log_count("-replay,"), prep0 = log_count(",prepared,");
            char what[64];
            for (int k = 0; k < 3; k++) {
                cr_assert_eq(step(eager, &s, &e), NN_OK, "%s", nn_last_error()->message);
                cr_assert_eq(step(b, &s, &r), NN_OK, "%s", nn_last_error()->message);
                snprintf(what, sizeof what, "cell %d settings %d step %d", (int)cells[ci],
                         from_settings, k);
                expect_same(eager, &e, b, &r, what);
                if (k == 0) {
                    cr_assert_eq(nn_plan_cache_get_stats(b, &s2), NN_OK);
                    cr_expect_eq(s2.misses, s1.misses, "%s: no descriptors built", what);
                    cr_expect_eq(s2.plans_rebuilt, s1.plans_rebuilt, "%s: nothing rebuilt", what);
                    cr_expect_eq(log_count("-replay,") - rep0, 2,
                                 "%s: no eager first call, forward and backward replayed", what);
                    cr_expect_eq(log_count(",prepared,") - prep0, 1, "%s: said so", what);
                }
            }
            set_free(eager, &e), set_free(b, &r);
            nn_ctx_destroy(eager);
            nn_ctx_destroy(b);
        }
        cr_assert_eq(nn_mem_get_stats(0, &after), NN_OK);
        cr_expect_eq(after.allocated_bytes, base.allocated_bytes,
                     "cell %d: %zu bytes after, %zu before", (int)cells[ci], after.allocated_bytes,
                     base.allocated_bytes);
    }
    unlink(path);
    unlink(log_path);
}

Test(rnn_replay, a_refused_persistent_algorithm_falls_back_and_is_recorded, .timeout = 300)
{
    NN_REQUIRE_GPU();
    /* hidden 512: PERSIST_STATIC_SMALL_H is refused at descriptor time (RNN.md trap 7) */
    struct shape s;
    memset(&s, 0, sizeof s);
    cr_assert_eq(nn_rnn_params_default(&s.p, NN_RNN_GRU, 16, 512), NN_OK);
    s.t = 3, s.n = 4;
    nn_ctx *ctx = make_ctx(NN_GRAPHS_OFF, NN_TUNING_AUTOTUNE, 0);
    struct set o;
    set_alloc(ctx, &s, &o, 9);
    cr_assert_eq(step(ctx, &s, &o), NN_OK, "%s", nn_last_error()->message);
    int32_t algo[2], flags[2];
    cr_assert_eq(nn__rnn_cudnn_records(ctx, algo, flags, 2), 1);
    cr_expect(flags[0] & NN__RNN_REC_PERSIST_REFUSED, "flags %d", flags[0]);
    cr_expect_neq(algo[0], 3 /* CUDNN_RNN_ALGO_PERSIST_STATIC_SMALL_H */);
    set_free(ctx, &o);
    nn_ctx_destroy(ctx);
}

Test(rnn_replay, the_heuristic_runs_small_hidden_sizes_on_the_persistent_small_h_algorithm,
     .timeout = 300)
{
    NN_REQUIRE_GPU();
    static const int32_t varied[3] = {5, 0, 3}, full[3] = {5, 5, 5}, short_[3] = {4, 4, 4};
    const struct {
        nn_rnn_cell cell;
        int64_t hidden, proj;
        const int32_t *lengths;
        int algo; /* cudnnRNNAlgo_t: 0 standard, 3 persistent small-h */
    } rows[] = {
        {NN_RNN_LSTM, 128, 0, NULL, 3}, {NN_RNN_GRU, 128, 0, full, 3},
        {NN_RNN_GRU, 129, 0, NULL, 0},  {NN_RNN_RELU, 256, 0, NULL, 3},
        {NN_RNN_TANH, 257, 0, NULL, 0}, {NN_RNN_LSTM, 6, 0, varied, 0},
        {NN_RNN_LSTM, 6, 0, short_, 0}, {NN_RNN_LSTM, 6, 3, NULL, 0},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        struct shape s;
        memset(&s, 0, sizeof s);
        cr_assert_eq(nn_rnn_params_default(&s.p, rows[i].cell, 8, rows[i].hidden), NN_OK);
        s.p.proj_size = rows[i].proj;
        s.t = 5, s.n = 3, s.lengths = rows[i].lengths;
        nn_ctx *ctx = make_ctx(NN_GRAPHS_OFF, NN_TUNING_HEURISTIC, 0);
        struct set o;
        set_alloc(ctx, &s, &o, 5);
        cr_assert_eq(step(ctx, &s, &o), NN_OK, "row %zu: %s", i, nn_last_error()->message);
        int32_t algo[2], flags[2];
        cr_assert_eq(nn__rnn_cudnn_records(ctx, algo, flags, 2), 1, "row %zu", i);
        cr_expect_eq(algo[0], rows[i].algo, "row %zu: algorithm %d", i, (int)algo[0]);
        cr_expect_not(flags[0] & NN__RNN_REC_PERSIST_REFUSED, "row %zu: flags %d", i,
                      (int)flags[0]);
        set_free(ctx, &o);
        nn_ctx_destroy(ctx);
    }
}

Test(rnn_replay, graphs_in_the_pool_and_back_to_the_baseline_when_the_context_goes, .timeout = 300)
{
    NN_REQUIRE_GPU();
    nn_mem_stats base, mid, after;
    struct shape s;
    shape_of(&s, NN_RNN_LSTM, NULL);
    nn_ctx *ctx = make_ctx(NN_GRAPHS_ON, NN_TUNING_HEURISTIC, 0);
    cr_assert_eq(nn_ctx_synchronize(ctx), NN_OK);
    cr_assert_eq(nn_mem_get_stats(0, &base), NN_OK);
    struct set o;
    set_alloc(ctx, &s, &o, 1);
    for (int k = 0; k < 3; k++)
        cr_assert_eq(step(ctx, &s, &o), NN_OK, "%s", nn_last_error()->message);
    set_free(ctx, &o);
    cr_assert_eq(nn_ctx_synchronize(ctx), NN_OK);
    cr_assert_eq(nn_mem_get_stats(0, &mid), NN_OK);
    cr_expect_gt(mid.allocated_bytes, base.allocated_bytes,
                 "staging buffers and the slot's reserve are the pool's");
    nn_ctx_destroy(ctx);
    cr_assert_eq(nn_mem_get_stats(0, &after), NN_OK);
    cr_expect_eq(after.allocated_bytes, base.allocated_bytes, "%zu bytes after, %zu before",
                 after.allocated_bytes, base.allocated_bytes);
}

/* ---------------------------------------------------------------------------------------------
 * nn_rnn_workspace_size against what each eager call takes, counted by a user allocator (which
 * sees every device allocation at its requested size)
 */

Test(rnn_replay, workspace_query_is_the_pool_peak_of_each_eager_call, .timeout = 300)
{
    NN_REQUIRE_GPU();
#if NN_HAVE_CUDA
    static const int32_t varied[3] = {5, 0, 3};
    struct nn_test_peak k;
    nn_test_peak_install(&k);
    nn_ctx *ctx = make_ctx(NN_GRAPHS_OFF, NN_TUNING_HEURISTIC, 0);
    static const nn_rnn_cell cells[] = {NN_RNN_LSTM, NN_RNN_GRU, NN_RNN_TANH};
    for (int ci = 0; ci < 3; ci++)
        for (int lv = 0; lv < 2; lv++) {
            struct shape s;
            shape_of(&s, cells[ci], lv ? varied : NULL);
            struct set o;
            set_alloc(ctx, &s, &o, 21);
            size_t q[3];
            for (int pass = 0; pass < 3; pass++)
                cr_assert_eq(
                    nn_rnn_workspace_size(ctx, &s.p, &o.x, s.lengths, (nn_rnn_pass)pass, &q[pass]),
                    NN_OK, "%s", nn_last_error()->message);
            cr_expect_gt(q[0], 0, "cuDNN's workspace is never empty (RNN.md trap 9)");
            nn_plan_cache_stats before, after;
            cr_assert_eq(nn_plan_cache_get_stats(ctx, &before), NN_OK);
            long base = nn_test_peak_mark(&k);
            cr_assert_eq(infer(ctx, &s, &o), NN_OK, "%s", nn_last_error()->message);
            long took[3];
            took[0] = nn_test_peak_since(&k, base);
            base = nn_test_peak_mark(&k);
            nn_rnn_pullback *pb;
            cr_assert_eq(nn_rnn_forward(ctx, &s.p,
                                        &(nn_rnn_forward_tensors){.x = &o.x,
                                                                  .lengths = s.lengths,
                                                                  .hx = &o.hx,
                                                                  .cx = opt(&o.cx),
                                                                  .w = &o.w,
                                                                  .y = &o.y,
                                                                  .hy = &o.hy,
                                                                  .cy = opt(&o.cy)},
                                        &pb),
                         NN_OK, "%s", nn_last_error()->message);
            took[1] = nn_test_peak_since(&k, base);
            base = nn_test_peak_mark(
                &k); /* the pullback's reserve is live: the backward's peak is above it */
            cr_assert_eq(nn_rnn_backward(ctx, &pb,
                                         &(nn_rnn_backward_tensors){.dy = &o.dy,
                                                                    .dhy = &o.dhy,
                                                                    .dcy = opt(&o.dcy),
                                                                    .dx = &o.dx,
                                                                    .dhx = &o.dhx,
                                                                    .dcx = opt(&o.dcx),
                                                                    .dw = &o.dw}),
                         NN_OK, "%s", nn_last_error()->message);
            took[2] = nn_test_peak_since(&k, base);
            cr_assert_eq(nn_plan_cache_get_stats(ctx, &after), NN_OK);
            for (int pass = 0; pass < 3; pass++) {
                cr_expect_eq(took[pass], (long)q[pass],
                             "cell %d lengths %d pass %d: the call took %ld bytes, the query "
                             "said %zu",
                             (int)cells[ci], lv, pass, took[pass], q[pass]);
                cr_log_info("cell %d lengths %d pass %d: query %zu, call peak %ld", (int)cells[ci],
                            lv, pass, q[pass], took[pass]);
            }
            cr_expect_eq(after.misses, before.misses, "the calls found what the query built");
            set_free(ctx, &o);
        }
    nn_ctx_destroy(ctx);
    nn_test_peak_remove();
#endif
}

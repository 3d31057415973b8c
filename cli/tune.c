/* `nnprim tune`: fill a plan file for a list of convolution shapes. Each shape's forward,
 * backward-data and backward-filter run once on a cuDNN context in autotune mode, so every plan
 * is the fastest of the timed candidates; the file then serves later processes (settings'
 * plan_cache_file or nn_plan_cache_load) with no heuristics query and no timing run. Recurrent
 * shapes (docs/RNN.md syntax) in the same file run training steps until their algorithm is timed
 * and graph replay decided (NNPRIM_RNN_GRAPHS=auto), which their record then carries. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "cli/args.h"
#include "cli/cli.h"
#include "rnn/rnn_internal.h"
#include "tests/harness/conv_case.h"
#include "tests/harness/rnn_case.h"

struct tune_opts {
    const char *shapes, *out;
    int candidates, deterministic, retune;
};

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

struct shape_list {
    struct nn_conv_case *c;
    struct nn_rnn_case *r; /* used where rnn[i] */
    unsigned char *rnn;
    char (*text)[256];
    size_t n, cap;
};

static int read_shapes(const char *path, struct shape_list *l)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "nnprim tune: cannot open %s: %s\n", path, strerror(errno));
        return -1;
    }
    char line[512], err[256];
    int lineno = 0, rc = 0;
    while (rc == 0 && fgets(line, sizeof line, f)) {
        lineno++;
        struct nn_conv_case c;
        struct nn_rnn_case r;
        char rerr[256];
        int got = nn_conv_case_parse_line(line, &c, err, sizeof err), is_rnn = 0;
        if (got < 0 && nn_rnn_case_parse_line(line, &r, rerr, sizeof rerr) > 0) got = is_rnn = 1;
        if (got < 0) {
            fprintf(stderr, "nnprim tune: %s:%d: %s\n", path, lineno, err);
            rc = -1;
        }
        if (got <= 0) continue;
        if (l->n == l->cap) {
            size_t cap = l->cap ? 2 * l->cap : 16;
            struct nn_conv_case *nc = realloc(l->c, cap * sizeof *nc);
            if (nc) l->c = nc;
            char(*nt)[256] = realloc(l->text, cap * sizeof *nt);
            if (nt) l->text = nt;
            struct nn_rnn_case *nr = realloc(l->r, cap * sizeof *nr);
            if (nr) l->r = nr;
            unsigned char *nb = realloc(l->rnn, cap);
            if (nb) l->rnn = nb;
            if (!nc || !nt || !nr || !nb) {
                fprintf(stderr, "nnprim tune: out of memory\n");
                rc = -1;
                continue;
            }
            l->cap = cap;
        }
        l->rnn[l->n] = (unsigned char)is_rnn;
        if (is_rnn) {
            l->r[l->n] = r;
            nn_rnn_case_format(&r, l->text[l->n], sizeof l->text[0]);
        } else {
            l->c[l->n] = c;
            nn_conv_case_format(&c, l->text[l->n], sizeof l->text[0]);
        }
        l->n++;
    }
    fclose(f);
    if (rc == 0 && l->n == 0) {
        fprintf(stderr, "nnprim tune: %s has no shapes\n", path);
        rc = -1;
    }
    return rc;
}

struct io {
    nn_tensor x, w, b, y, dy, dx, dw;
};

static void io_free(nn_ctx *ctx, struct io *t)
{
    nn_tensor *all[] = {&t->x, &t->w, &t->b, &t->y, &t->dy, &t->dx, &t->dw};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        if (all[i]->data) nn_tensor_free(ctx, all[i]);
}

/* The three calls of one shape, once each. */
static nn_status tune_shape(nn_ctx *ctx, const struct nn_conv_case *c)
{
    struct io t;
    memset(&t, 0, sizeof t);
    int rank = c->p.spatial_rank + 2;
    int64_t yd[NN_CONV_MAX_SPATIAL + 2], kd[1] = {c->w_dims[0]};
    nn_status st = nn_conv_output_shape(&c->p, rank, c->x_dims, c->w_dims, yd);
    struct {
        nn_tensor *t;
        int rank;
        const int64_t *dims;
    } all[] = {{&t.x, rank, c->x_dims}, {&t.w, rank, c->w_dims}, {&t.b, 1, kd},
               {&t.y, rank, yd},        {&t.dy, rank, yd},       {&t.dx, rank, c->x_dims},
               {&t.dw, rank, c->w_dims}};
    for (size_t i = 0; i < sizeof all / sizeof all[0] && st == NN_OK; i++) {
        st = nn_tensor_empty(ctx, c->dtype, all[i].rank, all[i].dims, all[i].t);
        if (st == NN_OK) st = nn_tensor_fill_uniform(ctx, all[i].t, -1, 1, 7 + i);
    }
    nn_conv_params bp = c->p;
    bp.activation = NN_ACTIVATION_IDENTITY;
    if (st == NN_OK)
        st = nn_conv_forward(ctx, &c->p, &t.x, &t.w, c->bias ? &t.b : NULL, &t.y, NULL);
    if (st == NN_OK) st = nn_conv_backward_data(ctx, &bp, &t.dy, &t.w, &t.dx, 0);
    if (st == NN_OK) st = nn_conv_backward_filter(ctx, &bp, &t.x, &t.dy, &t.dw, 0);
    if (st == NN_OK) st = nn_ctx_synchronize(ctx);
    io_free(ctx, &t);
    return st;
}

/* Training steps of one recurrent shape: the first times the algorithms (and, under autotune,
 * the mode), the next ones let auto decide what is left (docs/RNN.md, "How auto decides"). The
 * calls pass the tensors `nnprim bench rnn` passes (hx, cx in; hy, cy, and dx, dhx, dcx, dw out),
 * since the record keeps which ones its graphs were captured with and a process loading the file
 * captures the same calls at load ("The first step from a plan file"). */
static nn_status tune_rnn_shape(nn_ctx *ctx, const struct nn_rnn_case *c)
{
    const nn_rnn_params *p = &c->p;
    int lstm = p->cell == NN_RNN_LSTM, seq = p->layout == NN_RNN_SEQ_MAJOR;
    int64_t D = p->bidirectional ? 2 : 1, O = nn__rnn_out_size(p->hidden_size, p->proj_size), nw;
    int64_t xd[3] = {seq ? c->t : c->n, seq ? c->n : c->t, p->input_size};
    int64_t yd[3] = {xd[0], xd[1], D * O}, hd[3] = {p->num_layers * D, c->n, O};
    int64_t cd[3] = {p->num_layers * D, c->n, p->hidden_size};
    nn_tensor t[10];
    memset(t, 0, sizeof t);
    nn_status st = nn_rnn_weights_size(ctx, p, c->dtype, &nw);
    const int64_t *dims[10] = {xd, hd, cd, &nw, yd, hd, cd, yd, hd, cd};
    int ranks[10] = {3, 3, 3, 1, 3, 3, 3, 3, 3, 3};
    for (int i = 0; i < 10 && st == NN_OK; i++) {
        st = nn_tensor_empty(ctx, c->dtype, ranks[i], dims[i], &t[i]);
        if (st == NN_OK) st = nn_tensor_fill_uniform(ctx, &t[i], -0.5, 0.5, 11 + (uint64_t)i);
    }
    nn_tensor *x = &t[0], *hx = &t[1], *cx = lstm ? &t[2] : NULL, *w = &t[3], *y = &t[4];
    nn_tensor *hy = &t[5], *cy = lstm ? &t[6] : NULL, *dy = &t[7];
    nn_tensor *dhx = &t[8], *dcx = lstm ? &t[9] : NULL;
    nn_tensor dx, dw;
    memset(&dx, 0, sizeof dx), memset(&dw, 0, sizeof dw);
    if (st == NN_OK) st = nn_tensor_empty(ctx, c->dtype, 3, xd, &dx);
    if (st == NN_OK) st = nn_tensor_empty(ctx, c->dtype, 1, &nw, &dw);
    for (int k = 0; k < 10 && st == NN_OK; k++) {
        nn_rnn_pullback *pb;
        st = nn_rnn_forward(ctx, p,
                            &(nn_rnn_forward_tensors){.x = x,
                                                      .lengths = c->has_lengths ? c->lengths : NULL,
                                                      .hx = hx,
                                                      .cx = cx,
                                                      .w = w,
                                                      .y = y,
                                                      .hy = hy,
                                                      .cy = cy},
                            &pb);
        if (st == NN_OK)
            st = nn_rnn_backward(
                ctx, &pb,
                &(nn_rnn_backward_tensors){.dy = dy, .dx = &dx, .dhx = dhx, .dcx = dcx, .dw = &dw});
        if (st != NN_OK) nn_rnn_pullback_free(&pb);
    }
    if (st == NN_OK) st = nn_ctx_synchronize(ctx);
    for (int i = 0; i < 10; i++)
        if (t[i].data) nn_tensor_free(ctx, &t[i]);
    if (dx.data) nn_tensor_free(ctx, &dx);
    if (dw.data) nn_tensor_free(ctx, &dw);
    return st;
}

/* The shapes of one math mode, on one context that starts from the file and saves back to it
 * (so a second pass, for the other math mode, keeps the first pass's records). */
static int tune_pass(const struct tune_opts *o, const struct shape_list *l, nn_math_mode math,
                     int first, size_t *done)
{
    nn_settings s;
    if (nn_settings_from_env(&s) != NN_OK) {
        fprintf(stderr, "nnprim tune: %s\n", nn_last_error()->message);
        return 1;
    }
    s.backend = NN_BACKEND_CUDNN;
    s.math_mode = math;
    s.tuning = NN_TUNING_AUTOTUNE;
    if (o->candidates > 0) s.autotune_candidates = o->candidates;
    if (o->deterministic) s.deterministic = 1;
    s.plan_cache_file = NULL; /* loaded and saved below, where failures can be reported */
    nn_ctx *ctx;
    if (nn_ctx_create(&ctx, &s) != NN_OK) {
        fprintf(stderr, "nnprim tune: cannot create a cuDNN context: %s\n",
                nn_last_error()->message);
        return 1;
    }
    struct stat sb;
    /* --retune ignores the old file, not what an earlier pass of this run wrote to it. */
    int load = !(o->retune && first) && stat(o->out, &sb) == 0;
    if (load && nn_plan_cache_load(ctx, o->out) != NN_OK) {
        fprintf(stderr, "nnprim tune: %s is not used: %s\n", o->out, nn_last_error()->message);
        nn_plan_cache_clear(ctx);
    }
    int failures = 0;
    for (size_t i = 0; i < l->n; i++) {
        if ((l->rnn[i] ? l->r[i].math : l->c[i].math) != math) continue;
        nn_plan_cache_stats s0, s1;
        nn_plan_cache_get_stats(ctx, &s0);
        double t0 = now_ms();
        nn_status st = l->rnn[i] ? tune_rnn_shape(ctx, &l->r[i]) : tune_shape(ctx, &l->c[i]);
        double ms = now_ms() - t0;
        nn_plan_cache_get_stats(ctx, &s1);
        ++*done;
        if (st != NN_OK) {
            failures++;
            printf("[%zu/%zu] FAIL %s: %s\n", *done, l->n, l->text[i], nn_last_error()->message);
        } else {
            printf("[%zu/%zu] %8.1f ms  tuned %llu, reused %llu, plans timed %llu  %s\n", *done,
                   l->n, ms, (unsigned long long)(s1.autotune_runs - s0.autotune_runs),
                   (unsigned long long)(s1.hits - s0.hits + s1.plans_rebuilt - s0.plans_rebuilt),
                   (unsigned long long)(s1.plans_built - s0.plans_built), l->text[i]);
        }
        fflush(stdout);
    }
    if (nn_plan_cache_save(ctx, o->out) != NN_OK) {
        fprintf(stderr, "nnprim tune: saving %s failed: %s\n", o->out, nn_last_error()->message);
        failures++;
    } else {
        nn_plan_cache_stats s1;
        nn_plan_cache_get_stats(ctx, &s1);
        printf("# %s math: %llu plans saved to %s (autotune %.1f ms in all)\n",
               math == NN_MATH_TF32 ? "tf32" : "strict",
               (unsigned long long)(s1.entries + s1.known_records), o->out,
               (double)s1.autotune_ns / 1e6);
    }
    nn_ctx_destroy(ctx);
    return failures;
}

int nn_cli_tune(int argc, char **argv)
{
    struct tune_opts o = {0};
    const struct nn_cli_opt opts[] = {
        {"--shapes", NN_CLI_STRING, &o.shapes, "FILE", "the shapes to tune (required)", 0, 0, NULL},
        {"--out", NN_CLI_STRING, &o.out, "PLANFILE", "the plan file to fill (required)", 0, 0,
         NULL},
        {"--candidates", NN_CLI_INT, &o.candidates, "N",
         "plans timed per shape (default: the settings', NNPRIM_AUTOTUNE_CANDIDATES)", 1, 1000000,
         NULL},
        {"--deterministic", NN_CLI_FLAG, &o.deterministic, NULL, "deterministic plans only", 0, 0,
         NULL},
        {"--retune", NN_CLI_FLAG, &o.retune, NULL, "time again the records already in PLANFILE", 0,
         0, NULL},
    };
    const struct nn_cli_cmd cmd = {
        "nnprim tune", NULL,
        "Autotunes the forward, backward-data and backward-filter plans of every shape in\n"
        "FILE (docs/CONV.md syntax, one per line, '#' comments; a 'tf32' token selects TF32\n"
        "math; recurrent shapes in docs/RNN.md syntax run training steps until their\n"
        "algorithm is timed and graph replay decided) and writes them to PLANFILE. Records\n"
        "already in PLANFILE are kept and reused (not timed again) unless --retune is given.\n"
        "Needs a cuDNN build and a GPU.\n",
        opts, NN_CLI_NOPTS(opts)};
    int first, prc = nn_cli_parse(&cmd, argc, argv, &first);
    if (prc != NN_CLI_RUN) return prc;
    if (!o.shapes || !o.out)
        return nn_cli_usage_error(&cmd, "needs --shapes FILE and --out PLANFILE");
    if (!(nn_build_features() & NN_FEATURE_CUDNN)) {
        fprintf(stderr, "nnprim tune: this build has no cuDNN; plans are a cuDNN thing\n");
        return 1;
    }
    struct shape_list l = {0};
    int rc = read_shapes(o.shapes, &l) ? 2 : 0;
    size_t done = 0;
    int passes = 0;
    static const nn_math_mode modes[2] = {NN_MATH_STRICT_FP32, NN_MATH_TF32};
    for (int m = 0; m < 2 && rc == 0; m++) {
        int any = 0;
        for (size_t i = 0; i < l.n; i++)
            any |= (l.rnn[i] ? l.r[i].math : l.c[i].math) == modes[m];
        if (any && tune_pass(&o, &l, modes[m], passes++ == 0, &done)) rc = 1;
    }
    free(l.c);
    free(l.r);
    free(l.rnn);
    free(l.text);
    return rc;
}

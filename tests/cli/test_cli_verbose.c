/* Verbose lines are reproducers, through the public log callback:
 *   - each family's op calls on a verbose reference context, captured by nn_set_log_callback(),
 *     fed whole to `nnprim check --ref-only` (the program the build made, NNPRIM_CLI), give the
 *     case that was run back, and it passes;
 *   - a context's header line, the host_ms tag, the line of a failed call (with its status and
 *     message), nothing at verbose 0, warnings to the callback, stderr again after a reset. */
#include <criterion/criterion.h>
#include <criterion/redirect.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu.h"
#include "nnprim/nnprim.h"
#include "../harness/conv_case.h"
#include "../harness/layernorm_case.h"
#include "../harness/linear_case.h"
#include "../harness/pool_case.h"
#include "../harness/rnn_case.h"
#include "../harness/softmax_case.h"

#define MAX_LINES 4096

static struct {
    int n;
    nn_log_kind kind[MAX_LINES];
    char *line[MAX_LINES];
} got;

static void capture(nn_log_kind kind, const char *line, void *user)
{
    cr_assert_eq(user, &got, "the callback gets its user pointer");
    if (got.n == MAX_LINES) return;
    got.kind[got.n] = kind;
    got.line[got.n++] = strdup(line);
}

static void start_capture(void)
{
    for (int i = 0; i < got.n; i++)
        free(got.line[i]);
    got.n = 0;
    nn_set_log_callback(capture, &got);
}

static nn_ctx *ref_ctx(int verbose)
{
    nn_settings s;
    cr_assert_eq(nn_settings_defaults(&s), NN_OK);
    s.backend = NN_BACKEND_REF;
    s.verbose = verbose;
    nn_ctx *ctx;
    cr_assert_eq(nn_ctx_create(&ctx, &s), NN_OK, "%s", nn_last_error()->message);
    return ctx;
}

/* `nnprim check [--ref-only] '<line>'`: its exit status, and in echo the case text of its result
 * line ("ok   <family> <case>", the family word absent for rnn). Without --ref-only a machine
 * with a GPU also runs the case on cuDNN against the reference. */
static int run_check_with(const char *line, int ref_only, char *echo, size_t cap)
{
    const char *cli = getenv("NNPRIM_CLI");
    cr_assert_not_null(cli, "NNPRIM_CLI names the nnprim program (tests/cli/meson.build)");
    cr_assert_null(strchr(line, '\''), "%s", line);
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "'%s' check%s '%s' 2>&1", cli, ref_only ? " --ref-only" : "", line);
    FILE *p = popen(cmd, "r");
    cr_assert_not_null(p);
    char buf[8192];
    echo[0] = 0;
    while (fgets(buf, sizeof buf, p))
        if (!strncmp(buf, "ok   ", 5) || !strncmp(buf, "FAIL ", 5)) {
            size_t n = strcspn(buf, "\n");
            if (n >= cap) n = cap - 1;
            memcpy(echo, buf, n);
            echo[n] = 0;
        }
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* The op lines captured since start_capture(): each distinct one (without its time) goes
 * through run_check_with, which must pass; for each k, one line of ops[k] must give back
 * "ok   <prefix><wants[k]>" (an op may be listed twice, with two cases). */
static void round_trip_each(const char *prefix, const char *const *ops, const char *const *wants,
                            int nops, int ref_only)
{
    int found[16] = {0};
    cr_assert_leq(nops, 16);
    char seen[64][2048];
    int nseen = 0;
    for (int i = 0; i < got.n; i++) {
        const char *l = got.line[i];
        if (got.kind[i] != NN_LOG_OP || strncmp(l, "nnprim_verbose,", 15)) continue;
        const char *t = strstr(l, ",host_ms=");
        cr_assert_not_null(t, "the line says its time is host time: %s", l);
        int dup = 0;
        for (int k = 0; k < nseen && !dup; k++)
            dup = !strncmp(seen[k], l, (size_t)(t - l)) && seen[k][t - l] == 0;
        if (dup || nseen == 64) continue;
        snprintf(seen[nseen++], sizeof seen[0], "%.*s", (int)(t - l), l);
        char echo[4096], expect[4096];
        int rc = run_check_with(l, ref_only, echo, sizeof echo);
        cr_expect_eq(rc, 0, "nnprim check '%s': exit %d (%s)", l, rc, echo);
        for (int k = 0; k < nops; k++) {
            size_t n = strlen(ops[k]);
            snprintf(expect, sizeof expect, "ok   %s%s", prefix, wants[k]);
            if (!strncmp(l + 15, ops[k], n) && l[15 + n] == ',' && !strcmp(echo, expect))
                found[k] = 1;
        }
    }
    for (int k = 0; k < nops; k++)
        cr_expect(found[k], "no %s line of the calls gave the case back: want '%s'", ops[k],
                  wants[k]);
}

static void round_trip(const char *prefix, const char *want, const char *const *ops, int nops)
{
    const char *wants[16];
    for (int k = 0; k < nops && k < 16; k++)
        wants[k] = want;
    round_trip_each(prefix, ops, wants, nops, 1);
}

static FILE *devnull(void)
{
    FILE *f = fopen("/dev/null", "w");
    cr_assert_not_null(f);
    return f;
}

Test(cli_verbose, conv_lines_are_reproducers)
{
    const char *text =
        "n2c4h7w6k6r3s2 g2 stride2x1 dil1x2 padlo1x0 padhi0x1 conv relu bias accdx accdw f32";
    struct nn_conv_case c;
    char err[256], want[512], fwd[512];
    cr_assert_eq(nn_conv_case_parse_line(text, &c, err, sizeof err), 1, "%s", err);
    nn_conv_case_format(&c, want, sizeof want);
    /* the accumulating backward is the _ex call; the forward's line has no accumulation */
    struct nn_conv_case f = c;
    f.accumulate = 0;
    nn_conv_case_format(&f, fwd, sizeof fwd);
    start_capture();
    nn_ctx *ctx = ref_ctx(1);
    FILE *out = devnull();
    cr_expect_eq(nn_conv_check_reference(ctx, &c, out), 0);
    fclose(out);
    static const char *const ops[] = {"conv_forward", "conv_backward_ex"};
    const char *const wants[] = {fwd, want};
    round_trip_each("conv ", ops, wants, 2, 1);
    nn_ctx_destroy(ctx);
}

Test(cli_verbose, pool_lines_are_reproducers)
{
    const char *text = "n2c3h7w6 mean_exclude_pad win3x2 stride2x1 padlo1x0 padhi0x1 f32";
    struct nn_pool_case c;
    char err[256], want[512];
    cr_assert_eq(nn_pool_case_parse_line(text, &c, err, sizeof err), 1, "%s", err);
    nn_pool_case_format(&c, want, sizeof want);
    start_capture();
    nn_ctx *ctx = ref_ctx(1);
    FILE *out = devnull();
    cr_expect_eq(nn_pool_check_reference(ctx, &c, out), 0);
    fclose(out);
    static const char *const ops[] = {"pool_forward", "pool_backward", "pool_backward_stateless"};
    round_trip("pool ", want, ops, 3);
    nn_ctx_destroy(ctx);
}

Test(cli_verbose, linear_lines_are_reproducers)
{
    /* the accumulating backward is the _ex call; the forward's line has no accumulation */
    const char *text = "m3x2in5out4 relu bias accdx accdw accdb f32";
    struct nn_linear_case c;
    char err[256], want[512], fwd[512];
    cr_assert_eq(nn_linear_case_parse_line(text, &c, err, sizeof err), 1, "%s", err);
    nn_linear_case_format(&c, want, sizeof want);
    struct nn_linear_case f = c;
    f.accumulate = 0;
    nn_linear_case_format(&f, fwd, sizeof fwd);
    start_capture();
    nn_ctx *ctx = ref_ctx(1);
    FILE *out = devnull();
    cr_expect_eq(nn_linear_check_reference(ctx, &c, out), 0);
    fclose(out);
    static const char *const ops[] = {"linear_forward", "linear_backward_ex"};
    const char *const wants[] = {fwd, want};
    round_trip_each("linear ", ops, wants, 2, 1);
    nn_ctx_destroy(ctx);
}

Test(cli_verbose, softmax_lines_are_reproducers)
{
    /* an accumulating case runs its backward through the _ex call; the forward's line has no
     * accumulation (it is chosen at backward time) */
    static const char *const texts[] = {"n3c5s2 log accdx f32", "n4c6 xent i32 f64"};
    static const char *const ops[2][2] = {
        {"softmax_forward", "softmax_backward_ex"},
        {"softmax_cross_entropy_forward", "softmax_cross_entropy_backward"}};
    for (int i = 0; i < 2; i++) {
        struct nn_softmax_case c;
        char err[256], want[512], fwd[512];
        cr_assert_eq(nn_softmax_case_parse_line(texts[i], &c, err, sizeof err), 1, "%s", err);
        nn_softmax_case_format(&c, want, sizeof want);
        struct nn_softmax_case f = c;
        f.accumulate = 0;
        nn_softmax_case_format(&f, fwd, sizeof fwd);
        start_capture();
        nn_ctx *ctx = ref_ctx(1);
        FILE *out = devnull();
        cr_expect_eq(nn_softmax_check_reference(ctx, &c, out), 0);
        fclose(out);
        const char *const wants[] = {fwd, want};
        round_trip_each("softmax ", ops[i], wants, 2, 1);
        nn_ctx_destroy(ctx);
    }
}

Test(cli_verbose, layernorm_lines_are_reproducers)
{
    /* the forward's line has none of the backward's choices (accumulation, the gradients asked,
     * keep); the backward's has them all */
    static const char *const texts[] = {
        "d3x2x4 k2 gamma beta eps0.01 accdx accdw f32 grads=dx+dw keep", "d5x6 k1 beta f64"};
    static const char *const ops[2][2] = {{"layernorm_forward", "layernorm_backward_ex"},
                                          {"layernorm_forward", "layernorm_backward"}};
    for (int i = 0; i < 2; i++) {
        struct nn_layernorm_case c;
        char err[256], want[512], fwd[512];
        cr_assert_eq(nn_layernorm_case_parse_line(texts[i], &c, err, sizeof err), 1, "%s", err);
        nn_layernorm_case_format(&c, want, sizeof want);
        struct nn_layernorm_case f = c;
        f.accumulate = 0;
        f.skip = 0;
        f.keep = 0;
        nn_layernorm_case_format(&f, fwd, sizeof fwd);
        start_capture();
        nn_ctx *ctx = ref_ctx(1);
        FILE *out = devnull();
        cr_expect_eq(nn_layernorm_check_reference(ctx, &c, out), 0);
        fclose(out);
        const char *const wants[] = {fwd, want};
        round_trip_each("layernorm ", ops[i], wants, 2, 1);
        nn_ctx_destroy(ctx);
    }
}

Test(cli_verbose, rnn_lines_are_reproducers)
{
    const char *text = "gru t3n2i3h4 l2 bidir bias_input batch lens3x1 f32";
    static struct nn_rnn_case c;
    char err[256];
    static char want[4096];
    cr_assert_eq(nn_rnn_case_parse_line(text, &c, err, sizeof err), 1, "%s", err);
    nn_rnn_case_format(&c, want, sizeof want);
    start_capture();
    nn_ctx *ctx = ref_ctx(1);
    FILE *out = devnull();
    cr_expect_eq(nn_rnn_check_reference(ctx, &c, out), 0);
    fclose(out);
    static const char *const ops[] = {"rnn_forward", "rnn_backward"};
    round_trip("", want, ops, 2);
    nn_ctx_destroy(ctx);
}

/* ---------------------------------------------------------------------------------------------
 * The *_backward_ex calls (accumulate chosen at backward time, keep) and
 * nn_pool_backward_stateless, called directly: their lines carry the backward's own flags and round
 * trip like the others.
 */

/* A new tensor in ctx's memory, uniform in [-1, 1). */
static nn_tensor filled(nn_ctx *ctx, nn_dtype dt, int rank, const int64_t *dims, uint64_t seed)
{
    nn_tensor t;
    cr_assert_eq(nn_tensor_empty(ctx, dt, rank, dims, &t), NN_OK, "%s", nn_last_error()->message);
    cr_assert_eq(nn_tensor_fill_uniform(ctx, &t, -1, 1, seed), NN_OK, "%s",
                 nn_last_error()->message);
    return t;
}

static void free_all(nn_ctx *ctx, nn_tensor *const *t, int n)
{
    for (int i = 0; i < n; i++)
        cr_expect_eq(nn_tensor_free(ctx, t[i]), NN_OK);
}

#define OK(call) cr_assert_eq((call), NN_OK, "%s: %s", #call, nn_last_error()->message)

static nn_backward_options acc_keep(unsigned accumulate)
{
    return (nn_backward_options){.accumulate = accumulate, .keep = 1};
}

static void conv_ex_lines(nn_ctx *ctx, int ref_only)
{
    struct nn_conv_case c;
    char err[256], base[512], acc[512];
    cr_assert_eq(nn_conv_case_parse_line("n2c4h7w6k6r3s2 g2 stride2x1 padlo1x0 padhi0x1 relu bias",
                                         &c, err, sizeof err),
                 1, "%s", err);
    nn_conv_case_format(&c, base, sizeof base);
    struct nn_conv_case a = c;
    a.accumulate = NN_ACCUMULATE_DX | NN_ACCUMULATE_DW | NN_ACCUMULATE_DB;
    a.keep = 1; /* the accumulating call keeps the pullback */
    nn_conv_case_format(&a, acc, sizeof acc);
    int rank = c.p.spatial_rank + 2;
    int64_t yd[NN_CONV_MAX_SPATIAL + 2], bd[1] = {c.w_dims[0]};
    OK(nn_conv_output_shape(&c.p, rank, c.x_dims, c.w_dims, yd));
    nn_tensor x = filled(ctx, c.dtype, rank, c.x_dims, 1),
              w = filled(ctx, c.dtype, rank, c.w_dims, 2), b = filled(ctx, c.dtype, 1, bd, 3),
              y = filled(ctx, c.dtype, rank, yd, 4), dy = filled(ctx, c.dtype, rank, yd, 5),
              dx = filled(ctx, c.dtype, rank, c.x_dims, 6),
              dw = filled(ctx, c.dtype, rank, c.w_dims, 7), db = filled(ctx, c.dtype, 1, bd, 8);
    start_capture();
    nn_conv_pullback *pb;
    nn_backward_options kept = acc_keep(NN_ACCUMULATE_DX | NN_ACCUMULATE_DW | NN_ACCUMULATE_DB),
                        once = {0};
    OK(nn_conv_forward(ctx, &c.p, &x, &w, &b, &y, &pb));
    OK(nn_conv_backward_ex(ctx, &pb, &kept, &dy, &dx, &dw, &db));
    OK(nn_conv_backward_ex(ctx, &pb, &once, &dy, &dx, &dw, &db));
    cr_expect_null(pb, "consumed by the second call");
    /* a backward asking for some of the gradients says which */
    struct nn_conv_case some = c;
    some.skip = NN_H_SKIP_DW;
    char part[512];
    nn_conv_case_format(&some, part, sizeof part);
    OK(nn_conv_forward(ctx, &c.p, &x, &w, &b, &y, &pb));
    OK(nn_conv_backward(ctx, &pb, &dy, &dx, NULL, &db));
    static const char *const ops[] = {"conv_forward", "conv_backward_ex", "conv_backward_ex",
                                      "conv_backward"};
    const char *const wants[] = {base, acc, base, part};
    round_trip_each("conv ", ops, wants, 4, ref_only);
    nn_tensor *const all[] = {&x, &w, &b, &y, &dy, &dx, &dw, &db};
    free_all(ctx, all, 8);
}

static void pool_ex_lines(nn_ctx *ctx, int ref_only)
{
    struct nn_pool_case c;
    char err[256], base[512], acc[512], kacc[512];
    /* equal padding on both sides: the cuDNN backend's legacy pooling takes nothing else */
    cr_assert_eq(
        nn_pool_case_parse_line("n2c3h7w6 max win3x2 stride2x1 pad1x0", &c, err, sizeof err), 1,
        "%s", err);
    nn_pool_case_format(&c, base, sizeof base);
    struct nn_pool_case a = c;
    a.accumulate = NN_ACCUMULATE_DX;
    nn_pool_case_format(&a, acc, sizeof acc);
    a.keep = 1; /* nn_pool_backward_ex's accumulating call keeps the pullback */
    nn_pool_case_format(&a, kacc, sizeof kacc);
    int rank = c.p.spatial_rank + 2;
    int64_t yd[NN_POOL_MAX_SPATIAL + 2];
    OK(nn_pool_output_shape(&c.p, rank, c.x_dims, yd));
    nn_tensor x = filled(ctx, c.dtype, rank, c.x_dims, 1), y = filled(ctx, c.dtype, rank, yd, 2),
              dy = filled(ctx, c.dtype, rank, yd, 3), dx = filled(ctx, c.dtype, rank, c.x_dims, 4);
    start_capture();
    nn_pool_pullback *pb;
    nn_backward_options kept = acc_keep(NN_ACCUMULATE_DX), once = {0};
    OK(nn_pool_forward(ctx, &c.p, &x, &y, &pb));
    OK(nn_pool_backward_ex(ctx, &pb, &kept, &dy, &dx));
    OK(nn_pool_backward_ex(ctx, &pb, &once, &dy, &dx));
    cr_expect_null(pb, "consumed by the second call");
    OK(nn_pool_backward_stateless(ctx, &c.p, &x, &y, &dy, &dx, NN_ACCUMULATE_DX));
    OK(nn_pool_backward_stateless(ctx, &c.p, &x, &y, &dy, &dx, 0));
    static const char *const ops[] = {"pool_forward", "pool_backward_ex", "pool_backward_ex",
                                      "pool_backward_stateless", "pool_backward_stateless"};
    const char *const wants[] = {base, kacc, base, acc, base};
    round_trip_each("pool ", ops, wants, 5, ref_only);
    nn_tensor *const all[] = {&x, &y, &dy, &dx};
    free_all(ctx, all, 4);
}

/* The linear case of the line tests ("m3x2in5out4 relu bias"): its text plain (base) and
 * accumulating with the pullback kept (acc), and the dims of x, y, w and b. */
struct linear_lines {
    struct nn_linear_case c;
    char base[512], acc[512];
    int64_t xd[NN_MAX_RANK], yd[NN_MAX_RANK], wd[2], bd[1];
};

static void linear_lines_of(struct linear_lines *L)
{
    struct nn_linear_case *c = &L->c;
    char err[256];
    cr_assert_eq(nn_linear_case_parse_line("m3x2in5out4 relu bias", c, err, sizeof err), 1, "%s",
                 err);
    nn_linear_case_format(c, L->base, sizeof L->base);
    struct nn_linear_case a = *c;
    a.accumulate = NN_ACCUMULATE_DX | NN_ACCUMULATE_DW | NN_ACCUMULATE_DB;
    a.keep = 1; /* the accumulating call keeps the pullback */
    nn_linear_case_format(&a, L->acc, sizeof L->acc);
    for (int i = 0; i + 1 < c->x_rank; i++)
        L->xd[i] = L->yd[i] = c->lead[i];
    L->xd[c->x_rank - 1] = c->in;
    L->yd[c->x_rank - 1] = c->out;
    L->wd[0] = c->out, L->wd[1] = c->in;
    L->bd[0] = c->out;
}

static void linear_ex_lines(nn_ctx *ctx, int ref_only)
{
    struct linear_lines L;
    linear_lines_of(&L);
    struct nn_linear_case c = L.c;
    const char *base = L.base, *acc = L.acc;
    int64_t *xd = L.xd, *yd = L.yd, *wd = L.wd, *bd = L.bd;
    nn_tensor x = filled(ctx, c.dtype, c.x_rank, xd, 1), w = filled(ctx, c.dtype, 2, wd, 2),
              b = filled(ctx, c.dtype, 1, bd, 3), y = filled(ctx, c.dtype, c.x_rank, yd, 4),
              dy = filled(ctx, c.dtype, c.x_rank, yd, 5),
              dx = filled(ctx, c.dtype, c.x_rank, xd, 6), dw = filled(ctx, c.dtype, 2, wd, 7),
              db = filled(ctx, c.dtype, 1, bd, 8);
    start_capture();
    nn_linear_pullback *pb;
    nn_backward_options kept = acc_keep(NN_ACCUMULATE_DX | NN_ACCUMULATE_DW | NN_ACCUMULATE_DB),
                        once = {0};
    OK(nn_linear_forward(ctx, &c.p, &x, &w, &b, &y, &pb));
    OK(nn_linear_backward_ex(ctx, &pb, &kept, &dy, &dx, &dw, &db));
    OK(nn_linear_backward_ex(ctx, &pb, &once, &dy, &dx, &dw, &db));
    cr_expect_null(pb, "consumed by the second call");
    /* a backward asking for some of the gradients says which */
    struct nn_linear_case some = c;
    some.skip = NN_H_SKIP_DX | NN_H_SKIP_DB;
    char part[512];
    nn_linear_case_format(&some, part, sizeof part);
    OK(nn_linear_forward(ctx, &c.p, &x, &w, &b, &y, &pb));
    OK(nn_linear_backward(ctx, &pb, &dy, NULL, &dw, NULL));
    static const char *const ops[] = {"linear_forward", "linear_backward_ex", "linear_backward_ex",
                                      "linear_backward"};
    const char *const wants[] = {base, acc, base, part};
    round_trip_each("linear ", ops, wants, 4, ref_only);
    nn_tensor *const all[] = {&x, &w, &b, &y, &dy, &dx, &dw, &db};
    free_all(ctx, all, 8);
}

static void softmax_ex_lines(nn_ctx *ctx, int ref_only)
{
    struct nn_softmax_case c;
    char err[256], base[512], acc[512];
    cr_assert_eq(nn_softmax_case_parse_line("n3c5s2 log", &c, err, sizeof err), 1, "%s", err);
    nn_softmax_case_format(&c, base, sizeof base);
    struct nn_softmax_case a = c;
    a.accumulate = NN_ACCUMULATE_DX;
    a.keep = 1; /* the accumulating call keeps the pullback */
    nn_softmax_case_format(&a, acc, sizeof acc);
    nn_tensor x = filled(ctx, c.dtype, c.rank, c.dims, 1),
              y = filled(ctx, c.dtype, c.rank, c.dims, 2),
              dy = filled(ctx, c.dtype, c.rank, c.dims, 3),
              dx = filled(ctx, c.dtype, c.rank, c.dims, 4);
    start_capture();
    nn_softmax_pullback *pb;
    nn_backward_options kept = acc_keep(NN_ACCUMULATE_DX), once = {0};
    OK(nn_softmax_forward(ctx, &c.p, &x, &y, &pb));
    OK(nn_softmax_backward_ex(ctx, &pb, &kept, &dy, &dx));
    OK(nn_softmax_backward_ex(ctx, &pb, &once, &dy, &dx));
    cr_expect_null(pb, "consumed by the second call");
    static const char *const ops[] = {"softmax_forward", "softmax_backward_ex",
                                      "softmax_backward_ex"};
    const char *const wants[] = {base, acc, base};
    round_trip_each("softmax ", ops, wants, 3, ref_only);
    nn_tensor *const all[] = {&x, &y, &dy, &dx};
    free_all(ctx, all, 4);
}

static void xent_ex_lines(nn_ctx *ctx, int ref_only)
{
    struct nn_softmax_case c;
    char err[256], base[512], acc[512];
    cr_assert_eq(nn_softmax_case_parse_line("n4c6 xent i32", &c, err, sizeof err), 1, "%s", err);
    nn_softmax_case_format(&c, base, sizeof base);
    struct nn_softmax_case a = c;
    a.accumulate = NN_ACCUMULATE_DX;
    a.keep = 1; /* the accumulating call keeps the pullback */
    nn_softmax_case_format(&a, acc, sizeof acc);
    int64_t ld[1] = {c.dims[0]};
    int32_t t[4] = {0, 5, 2, 3};
    nn_class_targets targets = {.data = t, .type = NN_INDEX_I32};
    nn_tensor x = filled(ctx, c.dtype, c.rank, c.dims, 1), loss = filled(ctx, c.dtype, 1, ld, 2),
              dl = filled(ctx, c.dtype, 1, ld, 3), dx = filled(ctx, c.dtype, c.rank, c.dims, 4);
    start_capture();
    nn_softmax_cross_entropy_pullback *pb;
    nn_backward_options kept = acc_keep(NN_ACCUMULATE_DX), once = {0};
    OK(nn_softmax_cross_entropy_forward(ctx, &x, &targets, &loss, &pb));
    OK(nn_softmax_cross_entropy_backward_ex(ctx, &pb, &kept, &dl, &dx));
    OK(nn_softmax_cross_entropy_backward_ex(ctx, &pb, &once, &dl, &dx));
    cr_expect_null(pb, "consumed by the second call");
    static const char *const ops[] = {"softmax_cross_entropy_forward",
                                      "softmax_cross_entropy_backward_ex",
                                      "softmax_cross_entropy_backward_ex"};
    const char *const wants[] = {base, acc, base};
    round_trip_each("softmax ", ops, wants, 3, ref_only);
    nn_tensor *const all[] = {&x, &loss, &dl, &dx};
    free_all(ctx, all, 4);
}

static void rnn_ex_lines(nn_ctx *ctx, int ref_only)
{
    static struct nn_rnn_case c, a;
    char err[256];
    static char base[4096], acc[4096];
    cr_assert_eq(nn_rnn_case_parse_line("lstm t3n2i3h4", &c, err, sizeof err), 1, "%s", err);
    nn_rnn_case_format(&c, base, sizeof base);
    a = c;
    a.accumulate = NN_ACCUMULATE_DW; /* the line of a backward that adds to dw says "acc" */
    /* the backward calls ask for dx and dw, not dhx and dcx */
    a.skip = NN_RNN_CASE_SKIP_DHX | NN_RNN_CASE_SKIP_DCX;
    nn_rnn_case_format(&a, acc, sizeof acc);
    static struct nn_rnn_case some;
    static char part[4096];
    some = c;
    some.skip = a.skip;
    nn_rnn_case_format(&some, part, sizeof part);
    int64_t wn, xd[3] = {c.t, c.n, c.p.input_size}, yd[3] = {c.t, c.n, c.p.hidden_size};
    OK(nn_rnn_weights_size(ctx, &c.p, c.dtype, &wn));
    nn_tensor x = filled(ctx, c.dtype, 3, xd, 1), w = filled(ctx, c.dtype, 1, &wn, 2),
              y = filled(ctx, c.dtype, 3, yd, 3), dy = filled(ctx, c.dtype, 3, yd, 4),
              dx = filled(ctx, c.dtype, 3, xd, 5), dw = filled(ctx, c.dtype, 1, &wn, 6);
    start_capture();
    nn_backward_options accumulate = {.accumulate = NN_ACCUMULATE_DW}, plain = {0};
    for (int k = 0; k < 2; k++) {
        nn_rnn_pullback *pb;
        OK(nn_rnn_forward(ctx, &c.p, &(nn_rnn_forward_tensors){.x = &x, .w = &w, .y = &y}, &pb));
        /* RNN pullbacks are single-use (keep = 1 is NN_E_UNSUPPORTED): one forward each */
        OK(nn_rnn_backward_ex(ctx, &pb, k ? &plain : &accumulate,
                              &(nn_rnn_backward_tensors){.dy = &dy, .dx = &dx, .dw = &dw}));
    }
    static const char *const ops[] = {"rnn_forward", "rnn_backward_ex", "rnn_backward_ex"};
    const char *const wants[] = {base, acc, part};
    round_trip_each("", ops, wants, 3, ref_only);
    nn_tensor *const all[] = {&x, &w, &y, &dy, &dx, &dw};
    free_all(ctx, all, 6);
}

/* ---------------------------------------------------------------------------------------------
 * Failed calls: their lines carry the case, and `nnprim check` runs it
 */

/* `nnprim check --ref-only '<line>'`: its exit status and whole output (stdout, stderr). */
static int check_output(const char *line, char *buf, size_t cap)
{
    const char *cli = getenv("NNPRIM_CLI");
    cr_assert_not_null(cli);
    char cmd[8192];
    size_t c = (size_t)snprintf(cmd, sizeof cmd, "'%s' check --ref-only '", cli);
    /* the message may hold a quote: ' closes, \' is the quote, ' reopens */
    for (const char *l = line; *l && c + 8 < sizeof cmd; l++)
        if (*l == '\'') {
            memcpy(cmd + c, "'\\''", 4);
            c += 4;
        } else {
            cmd[c++] = *l;
        }
    snprintf(cmd + c, sizeof cmd - c, "' 2>&1");
    FILE *p = popen(cmd, "r");
    cr_assert_not_null(p);
    size_t n = fread(buf, 1, cap - 1, p);
    buf[n] = 0;
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* The failed op lines captured since start_capture(), in order: line k is of ops[k], has
 * status[k], carries the case wants[k] ("-": none), and `nnprim check` exits 1 saying whether
 * the call's status and message came back (reproduced[k]: the failure is in the case itself). */
static void failed_lines(const char *const *ops, const char *const *status,
                         const char *const *wants, const int *reproduced, int n)
{
    int k = 0;
    for (int i = 0; i < got.n; i++) {
        const char *l = got.line[i];
        if (got.kind[i] != NN_LOG_OP || strncmp(l, "nnprim_verbose,", 15) || !strstr(l, ",status="))
            continue;
        cr_assert_lt(k, n, "one failed line too many: %s", l);
        char op[64], cases[1024], st[64];
        /* op, backend, impl, cache, case, "status=<st> host_ms=..." */
        cr_assert_eq(sscanf(l + 15, "%63[^,],%*[^,],-,-,%1023[^,],status=%63[^ ]", op, cases, st),
                     3, "%s", l);
        cr_expect_str_eq(op, ops[k], "%s", l);
        cr_expect_str_eq(st, status[k], "%s", l);
        cr_expect_str_eq(cases, wants[k], "%s", l);
        char out[16384];
        int rc = check_output(l, out, sizeof out);
        cr_expect_eq(rc, 1, "nnprim check '%s': exit %d: %s", l, rc, out);
        char said[1200];
        snprintf(said, sizeof said, "the line's call (%s) failed: %s: ", ops[k], status[k]);
        cr_expect(strstr(out, said), "nnprim check '%s' does not say '%s': %s", l, said, out);
        if (strcmp(wants[k], "-"))
            cr_expect(strstr(out, reproduced[k] ? ": reproduced: " : ": not reproduced: "),
                      "nnprim check '%s': want %s: %s", l,
                      reproduced[k] ? "reproduced" : "not reproduced", out);
        k++;
    }
    cr_expect_eq(k, n, "%d failed lines, want %d", k, n);
}

/* A tensor of dims with its last dim one larger: the wrong output that fails a call. */
static nn_tensor wrong(nn_ctx *ctx, nn_dtype dt, int rank, const int64_t *dims)
{
    int64_t d[NN_MAX_RANK];
    memcpy(d, dims, (size_t)rank * sizeof *d);
    d[rank - 1]++;
    return filled(ctx, dt, rank, d, 99);
}

static void conv_failed_lines(nn_ctx *ctx)
{
    struct nn_conv_case c, s;
    char err[256], base[512], acc[512], shape[512];
    cr_assert_eq(nn_conv_case_parse_line("n2c4h7w6k6r3s2 g2 stride2x1 padlo1x0 padhi0x1 relu bias",
                                         &c, err, sizeof err),
                 1, "%s", err);
    /* a shape the library refuses: the padded input is smaller than the filter */
    cr_assert_eq(nn_conv_case_parse_line("n1c2h3w3k2r5s5", &s, err, sizeof err), 1, "%s", err);
    nn_conv_case_format(&c, base, sizeof base);
    nn_conv_case_format(&s, shape, sizeof shape);
    struct nn_conv_case a = c;
    a.accumulate = NN_ACCUMULATE_DX | NN_ACCUMULATE_DW | NN_ACCUMULATE_DB;
    a.keep = 1; /* the accumulating call keeps the pullback */
    nn_conv_case_format(&a, acc, sizeof acc);
    int rank = c.p.spatial_rank + 2;
    int64_t yd[NN_CONV_MAX_SPATIAL + 2], bd[1] = {c.w_dims[0]}, one[4] = {1, 2, 1, 1};
    OK(nn_conv_output_shape(&c.p, rank, c.x_dims, c.w_dims, yd));
    nn_tensor x = filled(ctx, c.dtype, rank, c.x_dims, 1),
              w = filled(ctx, c.dtype, rank, c.w_dims, 2), b = filled(ctx, c.dtype, 1, bd, 3),
              y = filled(ctx, c.dtype, rank, yd, 4), bad = wrong(ctx, c.dtype, rank, yd),
              dx = filled(ctx, c.dtype, rank, c.x_dims, 6),
              dw = filled(ctx, c.dtype, rank, c.w_dims, 7), db = filled(ctx, c.dtype, 1, bd, 8),
              sx = filled(ctx, c.dtype, rank, s.x_dims, 9),
              sw = filled(ctx, c.dtype, rank, s.w_dims, 10),
              sy = filled(ctx, c.dtype, rank, one, 11);
    start_capture();
    nn_conv_pullback *pb;
    nn_backward_options kept = acc_keep(NN_ACCUMULATE_DX | NN_ACCUMULATE_DW | NN_ACCUMULATE_DB);
    cr_expect_eq(nn_conv_forward(ctx, &s.p, &sx, &sw, NULL, &sy, NULL), NN_E_SHAPE);
    cr_expect_eq(nn_conv_forward(ctx, &c.p, &x, &w, &b, &bad, NULL), NN_E_SHAPE);
    OK(nn_conv_forward(ctx, &c.p, &x, &w, &b, &y, &pb));
    cr_expect_eq(nn_conv_backward(ctx, &pb, &bad, &dx, &dw, &db), NN_E_SHAPE);
    cr_expect_eq(nn_conv_backward_ex(ctx, &pb, &kept, &bad, &dx, &dw, &db), NN_E_SHAPE);
    cr_expect_eq(nn_conv_forward(ctx, &c.p, NULL, &w, &b, &y, NULL), NN_E_INVALID_ARG);
    OK(nn_conv_pullback_free(&pb));
    static const char *const ops[] = {"conv_forward", "conv_forward", "conv_backward",
                                      "conv_backward_ex", "conv_forward"};
    static const char *const st[] = {"NN_E_SHAPE", "NN_E_SHAPE", "NN_E_SHAPE", "NN_E_SHAPE",
                                     "NN_E_INVALID_ARG"};
    const char *const wants[] = {shape, base, base, acc, "-"};
    static const int reproduced[] = {1, 0, 0, 0, 0};
    failed_lines(ops, st, wants, reproduced, 5);
    nn_tensor *const all[] = {&x, &w, &b, &y, &bad, &dx, &dw, &db, &sx, &sw, &sy};
    free_all(ctx, all, 11);
}

static void pool_failed_lines(nn_ctx *ctx)
{
    struct nn_pool_case c, s;
    char err[256], base[512], acc[512], kacc[512], shape[512];
    cr_assert_eq(
        nn_pool_case_parse_line("n2c3h7w6 max win3x2 stride2x1 pad1x0", &c, err, sizeof err), 1,
        "%s", err);
    /* a window larger than the padded input */
    cr_assert_eq(nn_pool_case_parse_line("n1c3h5w5 max win9", &s, err, sizeof err), 1, "%s", err);
    nn_pool_case_format(&c, base, sizeof base);
    nn_pool_case_format(&s, shape, sizeof shape);
    struct nn_pool_case a = c;
    a.accumulate = NN_ACCUMULATE_DX;
    nn_pool_case_format(&a, acc, sizeof acc);
    a.keep = 1; /* nn_pool_backward_ex's accumulating call keeps the pullback */
    nn_pool_case_format(&a, kacc, sizeof kacc);
    int rank = c.p.spatial_rank + 2;
    int64_t yd[NN_POOL_MAX_SPATIAL + 2], one[4] = {1, 3, 1, 1};
    OK(nn_pool_output_shape(&c.p, rank, c.x_dims, yd));
    nn_tensor x = filled(ctx, c.dtype, rank, c.x_dims, 1), y = filled(ctx, c.dtype, rank, yd, 2),
              dy = filled(ctx, c.dtype, rank, yd, 3), bad = wrong(ctx, c.dtype, rank, c.x_dims),
              sx = filled(ctx, c.dtype, rank, s.x_dims, 5), sy = filled(ctx, c.dtype, rank, one, 6);
    start_capture();
    nn_pool_pullback *pb;
    nn_backward_options kept = acc_keep(NN_ACCUMULATE_DX);
    cr_expect_eq(nn_pool_forward(ctx, &s.p, &sx, &sy, NULL), NN_E_SHAPE);
    OK(nn_pool_forward(ctx, &c.p, &x, &y, &pb));
    cr_expect_eq(nn_pool_backward(ctx, &pb, &dy, &bad), NN_E_SHAPE);
    cr_expect_eq(nn_pool_backward_ex(ctx, &pb, &kept, &dy, &bad), NN_E_SHAPE);
    cr_expect_eq(nn_pool_backward_stateless(ctx, &c.p, &x, &y, &dy, &bad, NN_ACCUMULATE_DX),
                 NN_E_SHAPE);
    OK(nn_pool_pullback_free(&pb));
    static const char *const ops[] = {"pool_forward", "pool_backward", "pool_backward_ex",
                                      "pool_backward_stateless"};
    static const char *const st[] = {"NN_E_SHAPE", "NN_E_SHAPE", "NN_E_SHAPE", "NN_E_SHAPE"};
    const char *const wants[] = {shape, base, kacc, acc};
    static const int reproduced[] = {1, 0, 0, 0};
    failed_lines(ops, st, wants, reproduced, 4);
    nn_tensor *const all[] = {&x, &y, &dy, &bad, &sx, &sy};
    free_all(ctx, all, 6);
}

static void linear_failed_lines(nn_ctx *ctx)
{
    struct linear_lines L;
    linear_lines_of(&L);
    struct nn_linear_case c = L.c;
    const char *base = L.base, *acc = L.acc;
    int64_t *xd = L.xd, *yd = L.yd, *wd = L.wd, *bd = L.bd;
    nn_tensor x = filled(ctx, c.dtype, c.x_rank, xd, 1), w = filled(ctx, c.dtype, 2, wd, 2),
              b = filled(ctx, c.dtype, 1, bd, 3), y = filled(ctx, c.dtype, c.x_rank, yd, 4),
              bad = wrong(ctx, c.dtype, c.x_rank, yd), dx = filled(ctx, c.dtype, c.x_rank, xd, 6),
              dw = filled(ctx, c.dtype, 2, wd, 7), db = filled(ctx, c.dtype, 1, bd, 8);
    start_capture();
    nn_linear_pullback *pb;
    nn_backward_options kept = acc_keep(NN_ACCUMULATE_DX | NN_ACCUMULATE_DW | NN_ACCUMULATE_DB);
    cr_expect_eq(nn_linear_forward(ctx, &c.p, &x, &w, &b, &bad, NULL), NN_E_SHAPE);
    OK(nn_linear_forward(ctx, &c.p, &x, &w, &b, &y, &pb));
    cr_expect_eq(nn_linear_backward(ctx, &pb, &bad, &dx, &dw, &db), NN_E_SHAPE);
    cr_expect_eq(nn_linear_backward_ex(ctx, &pb, &kept, &bad, &dx, &dw, &db), NN_E_SHAPE);
    OK(nn_linear_pullback_free(&pb));
    static const char *const ops[] = {"linear_forward", "linear_backward", "linear_backward_ex"};
    static const char *const st[] = {"NN_E_SHAPE", "NN_E_SHAPE", "NN_E_SHAPE"};
    const char *const wants[] = {base, base, acc};
    static const int reproduced[] = {0, 0, 0};
    failed_lines(ops, st, wants, reproduced, 3);
    nn_tensor *const all[] = {&x, &w, &b, &y, &bad, &dx, &dw, &db};
    free_all(ctx, all, 8);
}

static void softmax_failed_lines(nn_ctx *ctx)
{
    struct nn_softmax_case c, xc;
    char err[256], base[512], acc[512], xbase[512], xacc[512];
    cr_assert_eq(nn_softmax_case_parse_line("n3c5s2 log", &c, err, sizeof err), 1, "%s", err);
    cr_assert_eq(nn_softmax_case_parse_line("n4c6 xent i32", &xc, err, sizeof err), 1, "%s", err);
    nn_softmax_case_format(&c, base, sizeof base);
    nn_softmax_case_format(&xc, xbase, sizeof xbase);
    struct nn_softmax_case a = c, xa = xc;
    a.accumulate = NN_ACCUMULATE_DX;
    xa.accumulate = NN_ACCUMULATE_DX;
    a.keep = xa.keep = 1; /* the accumulating calls keep their pullbacks */
    nn_softmax_case_format(&a, acc, sizeof acc);
    nn_softmax_case_format(&xa, xacc, sizeof xacc);
    int64_t ld[1] = {xc.dims[0]};
    int32_t t[4] = {0, 5, 2, 3};
    nn_class_targets targets = {.data = t, .type = NN_INDEX_I32};
    nn_tensor x = filled(ctx, c.dtype, c.rank, c.dims, 1),
              y = filled(ctx, c.dtype, c.rank, c.dims, 2),
              bad = wrong(ctx, c.dtype, c.rank, c.dims),
              dx = filled(ctx, c.dtype, c.rank, c.dims, 4),
              xx = filled(ctx, xc.dtype, xc.rank, xc.dims, 5),
              loss = filled(ctx, xc.dtype, 1, ld, 6), xbad = wrong(ctx, xc.dtype, 1, ld),
              xdx = filled(ctx, xc.dtype, xc.rank, xc.dims, 8);
    start_capture();
    nn_softmax_pullback *pb;
    nn_softmax_cross_entropy_pullback *xpb;
    nn_backward_options kept = acc_keep(NN_ACCUMULATE_DX);
    cr_expect_eq(nn_softmax_forward(ctx, &c.p, &x, &bad, NULL), NN_E_SHAPE);
    OK(nn_softmax_forward(ctx, &c.p, &x, &y, &pb));
    cr_expect_eq(nn_softmax_backward(ctx, &pb, &bad, &dx), NN_E_SHAPE);
    cr_expect_eq(nn_softmax_backward_ex(ctx, &pb, &kept, &bad, &dx), NN_E_SHAPE);
    OK(nn_softmax_pullback_free(&pb));
    cr_expect_eq(nn_softmax_cross_entropy_forward(ctx, &xx, &targets, &xbad, NULL), NN_E_SHAPE);
    OK(nn_softmax_cross_entropy_forward(ctx, &xx, &targets, &loss, &xpb));
    cr_expect_eq(nn_softmax_cross_entropy_backward(ctx, &xpb, &xbad, &xdx), NN_E_SHAPE);
    cr_expect_eq(nn_softmax_cross_entropy_backward_ex(ctx, &xpb, &kept, &xbad, &xdx), NN_E_SHAPE);
    OK(nn_softmax_cross_entropy_pullback_free(&xpb));
    static const char *const ops[] = {"softmax_forward",
                                      "softmax_backward",
                                      "softmax_backward_ex",
                                      "softmax_cross_entropy_forward",
                                      "softmax_cross_entropy_backward",
                                      "softmax_cross_entropy_backward_ex"};
    static const char *const st[] = {"NN_E_SHAPE", "NN_E_SHAPE", "NN_E_SHAPE",
                                     "NN_E_SHAPE", "NN_E_SHAPE", "NN_E_SHAPE"};
    const char *const wants[] = {base, base, acc, xbase, xbase, xacc};
    static const int reproduced[] = {0, 0, 0, 0, 0, 0};
    failed_lines(ops, st, wants, reproduced, 6);
    nn_tensor *const all[] = {&x, &y, &bad, &dx, &xx, &loss, &xbad, &xdx};
    free_all(ctx, all, 8);
}

static void rnn_failed_lines(nn_ctx *ctx)
{
    static struct nn_rnn_case c, a, some;
    char err[256];
    static char base[4096], acc[4096], part[4096];
    cr_assert_eq(nn_rnn_case_parse_line("lstm t3n2i3h4", &c, err, sizeof err), 1, "%s", err);
    nn_rnn_case_format(&c, base, sizeof base);
    /* the backward calls ask for dx and dw, not dhx and dcx */
    some = c;
    some.skip = NN_RNN_CASE_SKIP_DHX | NN_RNN_CASE_SKIP_DCX;
    nn_rnn_case_format(&some, part, sizeof part);
    a = some;
    a.accumulate = NN_ACCUMULATE_DW;
    nn_rnn_case_format(&a, acc, sizeof acc);
    int64_t wn, xd[3] = {c.t, c.n, c.p.input_size}, yd[3] = {c.t, c.n, c.p.hidden_size};
    OK(nn_rnn_weights_size(ctx, &c.p, c.dtype, &wn));
    nn_tensor x = filled(ctx, c.dtype, 3, xd, 1), w = filled(ctx, c.dtype, 1, &wn, 2),
              y = filled(ctx, c.dtype, 3, yd, 3), dy = filled(ctx, c.dtype, 3, yd, 4),
              bad = wrong(ctx, c.dtype, 3, xd), ybad = wrong(ctx, c.dtype, 3, yd),
              dw = filled(ctx, c.dtype, 1, &wn, 6);
    start_capture();
    nn_backward_options accumulate = {.accumulate = NN_ACCUMULATE_DW};
    nn_rnn_pullback *pb;
    cr_expect_eq(
        nn_rnn_forward(ctx, &c.p, &(nn_rnn_forward_tensors){.x = &x, .w = &w, .y = &ybad}, NULL),
        NN_E_SHAPE);
    OK(nn_rnn_forward(ctx, &c.p, &(nn_rnn_forward_tensors){.x = &x, .w = &w, .y = &y}, &pb));
    cr_expect_eq(
        nn_rnn_backward(ctx, &pb, &(nn_rnn_backward_tensors){.dy = &dy, .dx = &bad, .dw = &dw}),
        NN_E_SHAPE);
    cr_expect_eq(nn_rnn_backward_ex(ctx, &pb, &accumulate,
                                    &(nn_rnn_backward_tensors){.dy = &dy, .dx = &bad, .dw = &dw}),
                 NN_E_SHAPE);
    OK(nn_rnn_pullback_free(&pb));
    static const char *const ops[] = {"rnn_forward", "rnn_backward", "rnn_backward_ex"};
    static const char *const st[] = {"NN_E_SHAPE", "NN_E_SHAPE", "NN_E_SHAPE"};
    const char *const wants[] = {base, part, acc};
    static const int reproduced[] = {0, 0, 0};
    failed_lines(ops, st, wants, reproduced, 3);
    nn_tensor *const all[] = {&x, &w, &y, &dy, &bad, &ybad, &dw};
    free_all(ctx, all, 7);
}

/* Every family's failed forward, backward and *_backward_ex lines carry the call's case (a
 * backward's from its pullback, with the accumulation it asked for); `nnprim check` runs it and
 * says whether the failure came back: it does where the case itself is refused. */
Test(cli_verbose, failed_lines_carry_their_case)
{
    nn_ctx *ctx = ref_ctx(1);
    conv_failed_lines(ctx);
    pool_failed_lines(ctx);
    linear_failed_lines(ctx);
    softmax_failed_lines(ctx);
    rnn_failed_lines(ctx);
    nn_ctx_destroy(ctx);
}

static void every_ex_line(nn_ctx *ctx, int ref_only)
{
    conv_ex_lines(ctx, ref_only);
    pool_ex_lines(ctx, ref_only);
    linear_ex_lines(ctx, ref_only);
    softmax_ex_lines(ctx, ref_only);
    xent_ex_lines(ctx, ref_only);
    rnn_ex_lines(ctx, ref_only);
}

Test(cli_verbose, ex_and_stateless_lines_are_reproducers)
{
    nn_ctx *ctx = ref_ctx(1);
    every_ex_line(ctx, 1);
    nn_ctx_destroy(ctx);
}

/* The same calls on cuDNN; `nnprim check` runs each line on the reference and on cuDNN. */
Test(cli_verbose, ex_and_stateless_lines_on_cudnn)
{
    NN_REQUIRE_GPU();
    nn_settings s;
    cr_assert_eq(nn_settings_defaults(&s), NN_OK);
    s.backend = NN_BACKEND_CUDNN;
    s.verbose = 1;
    nn_ctx *ctx;
    cr_assert_eq(nn_ctx_create(&ctx, &s), NN_OK, "%s", nn_last_error()->message);
    every_ex_line(ctx, 0);
    nn_ctx_destroy(ctx);
}

Test(cli_verbose, header_line_per_context)
{
    start_capture();
    nn_ctx *ctx = ref_ctx(1);
    cr_assert_eq(got.n, 1);
    cr_expect_eq(got.kind[0], NN_LOG_OP);
    char want[256];
    snprintf(want, sizeof want,
             "# nnprim_verbose header: nnprim %s, backend ref, device host (reference backend), "
             "cuDNN ",
             nn_version());
    cr_expect(!strncmp(got.line[0], want, strlen(want)), "%s", got.line[0]);
    cr_expect(strstr(got.line[0], ", math strict, deterministic "), "%s", got.line[0]);
    nn_ctx_destroy(ctx);
}

Test(cli_verbose, failed_call_prints_its_status)
{
    nn_ctx *ctx = ref_ctx(1);
    start_capture();
    nn_conv_params p;
    cr_assert_eq(nn_conv_params_default(&p, 2), NN_OK);
    nn_tensor w = {0}, y = {0};
    cr_assert_eq(nn_conv_forward(ctx, &p, NULL, &w, NULL, &y, NULL), NN_E_INVALID_ARG);
    cr_assert_eq(nn_pool_backward(ctx, NULL, &w, &y), NN_E_INVALID_ARG);
    cr_assert_eq(got.n, 2);
    cr_expect(
        !strncmp(got.line[0],
                 "nnprim_verbose,conv_forward,ref,-,-,-,status=NN_E_INVALID_ARG host_ms=", 70),
        "%s", got.line[0]);
    cr_expect(strstr(got.line[0], ",nn_conv_forward: x must not be NULL"), "%s", got.line[0]);
    cr_expect(
        !strncmp(got.line[1],
                 "nnprim_verbose,pool_backward,ref,-,-,-,status=NN_E_INVALID_ARG host_ms=", 70),
        "%s", got.line[1]);
    /* a failure before the case was known: check says so, with the call's status and message,
     * and has nothing to run */
    char out[4096];
    cr_expect_eq(check_output(got.line[0], out, sizeof out), 1);
    cr_expect(strstr(out, "the line's call (conv_forward) failed: NN_E_INVALID_ARG: "
                          "nn_conv_forward: x must not be NULL"),
              "%s", out);
    cr_expect(strstr(out, "there is no case to run"), "%s", out);
    nn_ctx_destroy(ctx);
}

/* Verbose 0: no line, neither to a callback nor to stderr. */
Test(cli_verbose, quiet_at_verbose_0, .init = cr_redirect_stderr)
{
    const char *text = "n1c2h5w5k2r3s3 bias f32";
    struct nn_conv_case c;
    char err[256];
    cr_assert_eq(nn_conv_case_parse_line(text, &c, err, sizeof err), 1, "%s", err);
    start_capture();
    nn_ctx *ctx = ref_ctx(0);
    FILE *out = devnull();
    cr_expect_eq(nn_conv_check_reference(ctx, &c, out), 0);
    nn_conv_params p;
    nn_conv_params_default(&p, 2);
    nn_tensor w = {0}, y = {0};
    cr_assert_eq(nn_conv_forward(ctx, &p, NULL, &w, NULL, &y, NULL), NN_E_INVALID_ARG);
    cr_expect_eq(got.n, 0, "%s", got.n ? got.line[0] : "");
    nn_set_log_callback(NULL, NULL);
    cr_expect_eq(nn_conv_check_reference(ctx, &c, out), 0);
    fclose(out);
    nn_ctx_destroy(ctx);
    fflush(stderr);
    cr_expect_stderr_eq_str("");
}

/* Without a callback the lines go to stderr; a reset callback is not called again. */
Test(cli_verbose, reset_goes_back_to_stderr, .init = cr_redirect_stderr)
{
    start_capture();
    nn_set_log_callback(NULL, NULL);
    nn_ctx *ctx = ref_ctx(1);
    nn_ctx_destroy(ctx);
    cr_expect_eq(got.n, 0);
    fflush(stderr);
    char line[512] = "";
    cr_assert(fgets(line, sizeof line, cr_get_redirected_stderr()));
    cr_expect(!strncmp(line, "# nnprim_verbose header: nnprim ", 32), "%s", line);
}

/* A warning reaches a callback at verbose 0 (stderr only at verbose >= 1): the automatic backend
 * falling back to the reference one, where there is no usable GPU or no cuDNN. */
Test(cli_verbose, warnings_go_to_the_callback)
{
    int ndev = 0;
    nn_device_count(&ndev);
    int falls_back = ndev == 0 || !(nn_build_features() & NN_FEATURE_CUDNN);
    start_capture();
    nn_settings s;
    cr_assert_eq(nn_settings_defaults(&s), NN_OK);
    s.backend = NN_BACKEND_AUTO;
    nn_ctx *ctx;
    cr_assert_eq(nn_ctx_create(&ctx, &s), NN_OK, "%s", nn_last_error()->message);
    if (falls_back) {
        cr_assert_eq(got.n, 1);
        cr_expect_eq(got.kind[0], NN_LOG_WARNING);
        cr_expect(!strncmp(got.line[0], "nnprim: backend auto: ", 22), "%s", got.line[0]);
    } else {
        cr_expect_eq(got.n, 0, "auto found the GPU: nothing to say (%s)", got.n ? got.line[0] : "");
    }
    nn_ctx_destroy(ctx);
}

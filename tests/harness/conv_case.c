#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "conv_case.h"

/* ---------------------------------------------------------------------------------------------
 * Text form
 */

/* "n2c4h9w9k6r3s3": letters n c [d [h]] w k [t [r]] s, each followed by a number >= 1. */
static int parse_dims(const char *tok, struct nn_conv_case *c, char *err, size_t cap)
{
    static const char letters[] = "ncdhwktrs";
    int64_t v[9];
    int seen[9] = {0};
    const char *s = tok;
    while (*s) {
        const char *l = strchr(letters, *s);
        if (!l || !isdigit((unsigned char)s[1]))
            return nn_h_fail(err, cap,
                             "dims token '%s': expected letter+number pairs from ncdhwktrs", tok);
        char *end;
        long long n = strtoll(s + 1, &end, 10);
        int i = (int)(l - letters);
        if (seen[i]++ || n < 1)
            return nn_h_fail(err, cap, "dims token '%s': a letter repeats or a size is < 1", tok);
        v[i] = n;
        s = end;
    }
    int nsp = seen[2] ? 3 : seen[3] ? 2 : 1;
    /* required: n c w k s; d needs h, and the filter letters must match the input letters */
    if (!seen[0] || !seen[1] || !seen[4] || !seen[5] || !seen[8] || (seen[2] && !seen[3]) ||
        seen[2] != seen[6] || seen[3] != seen[7])
        return nn_h_fail(err, cap,
                         "dims token '%s': need n, c, w, k, s; h with r; d with t (and d needs h)",
                         tok);
    nn_conv_params_default(&c->p, nsp);
    c->x_dims[0] = v[0];
    c->x_dims[1] = v[1];
    c->w_dims[0] = v[5];
    c->w_dims[1] = v[1]; /* divided by groups once g is known */
    for (int i = 0; i < nsp; i++) {
        c->x_dims[2 + i] = v[2 + 3 - nsp + i];
        c->w_dims[2 + i] = v[6 + 3 - nsp + i];
    }
    return 0;
}

static const char *const layout_names[] = {"x", "w", "y", "dx", "dw", "dy"};

/* "nhwc" (every tensor channels-last) or "nhwc=x+dy" (those named; not commas, which separate
 * the fields of a verbose line). */
static int parse_layout(const char *t, struct nn_conv_case *c, char *err, size_t cap)
{
    if (!t[4]) {
        c->nhwc = NN_CONV_CASE_ALL;
        return 0;
    }
    char list[64];
    snprintf(list, sizeof list, "%s", t + 5);
    for (char *save = NULL, *name = strtok_r(list, "+", &save); name;
         name = strtok_r(NULL, "+", &save)) {
        size_t i = 0;
        while (i < 6 && strcmp(name, layout_names[i]))
            i++;
        if (i == 6)
            return nn_h_fail(err, cap, "token '%s': nhwc= takes x, w, y, dx, dw, dy joined by '+'",
                             t);
        c->nhwc |= 1u << i;
    }
    if (!c->nhwc) return nn_h_fail(err, cap, "token '%s': nhwc= needs a tensor", t);
    return 0;
}

static int parse_token(const char *t, struct nn_conv_case *c, char *err, size_t cap)
{
    nn_conv_params *p = &c->p;
    int nsp = p->spatial_rank;
    if (nn_h_dtype_token(t, &c->dtype)) return 0;
    if (!strcmp(t, "xcorr"))
        p->mode = NN_CONV_CROSS_CORRELATION;
    else if (!strcmp(t, "conv"))
        p->mode = NN_CONV_CONVOLUTION;
    else if (!strcmp(t, "relu"))
        p->activation = NN_ACTIVATION_RELU;
    else if (!strcmp(t, "bias"))
        c->bias = 1;
    else if (!strcmp(t, "tf32"))
        c->math = NN_MATH_TF32;
    else if (!strcmp(t, "strict"))
        c->math = NN_MATH_STRICT_FP32;
    else if (!strcmp(t, "accdx"))
        c->accumulate |= NN_ACCUMULATE_DX;
    else if (!strcmp(t, "accdw"))
        c->accumulate |= NN_ACCUMULATE_DW;
    else if (!strcmp(t, "accdb"))
        c->accumulate |= NN_ACCUMULATE_DB;
    else if (!strcmp(t, "keep"))
        c->keep = 1;
    else if (!strncmp(t, "grads=", 6))
        return nn_h_grads_token(t, &c->skip, err, cap) < 0 ? -1 : 0;
    else if (!strcmp(t, "nhwc") || !strncmp(t, "nhwc=", 5))
        return parse_layout(t, c, err, cap);
    else if (!strncmp(t, "stride", 6))
        return nn_h_parse_list(t, t + 6, nsp, NN_CONV_MAX_SPATIAL, p->stride, 1, err, cap);
    else if (!strncmp(t, "dil", 3))
        return nn_h_parse_list(t, t + 3, nsp, NN_CONV_MAX_SPATIAL, p->dilation, 1, err, cap);
    else if (!strncmp(t, "padlo", 5))
        return nn_h_parse_list(t, t + 5, nsp, NN_CONV_MAX_SPATIAL, p->pad_lo, 0, err, cap);
    else if (!strncmp(t, "padhi", 5))
        return nn_h_parse_list(t, t + 5, nsp, NN_CONV_MAX_SPATIAL, p->pad_hi, 0, err, cap);
    else if (!strncmp(t, "pad", 3)) {
        if (nn_h_parse_list(t, t + 3, nsp, NN_CONV_MAX_SPATIAL, p->pad_lo, 0, err, cap)) return -1;
        memcpy(p->pad_hi, p->pad_lo, sizeof p->pad_hi);
    } else if (t[0] == 'g' && isdigit((unsigned char)t[1])) {
        char *end;
        p->groups = strtoll(t + 1, &end, 10);
        if (*end || p->groups < 1)
            return nn_h_fail(err, cap, "token '%s': g needs a number >= 1", t);
    } else
        return nn_h_fail(err, cap, "unknown token '%s' (see docs/CONV.md for the syntax)", t);
    return 0;
}

int nn_conv_case_parse(int ntok, char **tok, struct nn_conv_case *c, char *err, size_t cap)
{
    memset(c, 0, sizeof *c);
    c->dtype = NN_DTYPE_F32;
    if (ntok < 1) return nn_h_fail(err, cap, "%s", "no case given (expected e.g. n1c4h8w8k4r3s3)");
    if (parse_dims(tok[0], c, err, cap)) return -1;
    for (int i = 1; i < ntok; i++)
        if (parse_token(tok[i], c, err, cap)) return -1;
    if (c->x_dims[1] % c->p.groups)
        return nn_h_fail(err, cap, "case '%s': c must be divisible by g", tok[0]);
    /* as linear cases: the text of another dtype has no tf32, so it would not reproduce one */
    if (c->math == NN_MATH_TF32 && c->dtype != NN_DTYPE_F32)
        return nn_h_fail(err, cap, "%s", "tf32 applies to f32 cases only");
    c->w_dims[1] = c->x_dims[1] / c->p.groups;
    return 0;
}

int nn_conv_case_parse_line(const char *line, struct nn_conv_case *c, char *err, size_t cap)
{
    char buf[512], *tok[32];
    int n = nn_h_case_tokens(line, buf, sizeof buf, tok, 32, err, cap);
    if (n <= 0) return n;
    return nn_conv_case_parse(n, tok, c, err, cap) == 0 ? 1 : -1;
}

void nn_conv_case_format(const struct nn_conv_case *c, char *buf, size_t cap)
{
    static const char in_letters[] = "dhw", filt_letters[] = "trs";
    const nn_conv_params *p = &c->p;
    int nsp = p->spatial_rank, off = 3 - nsp;
    size_t n =
        (size_t)snprintf(buf, cap, "n%lldc%lld", (long long)c->x_dims[0], (long long)c->x_dims[1]);
    for (int i = 0; i < nsp && n < cap; i++)
        n += (size_t)snprintf(buf + n, cap - n, "%c%lld", in_letters[off + i],
                              (long long)c->x_dims[2 + i]);
    if (n < cap) n += (size_t)snprintf(buf + n, cap - n, "k%lld", (long long)c->w_dims[0]);
    for (int i = 0; i < nsp && n < cap; i++)
        n += (size_t)snprintf(buf + n, cap - n, "%c%lld", filt_letters[off + i],
                              (long long)c->w_dims[2 + i]);
    if (n < cap) n += (size_t)snprintf(buf + n, cap - n, " g%lld", (long long)p->groups);
    n = nn_h_put_list(buf, cap, n, "stride", nsp, p->stride);
    n = nn_h_put_list(buf, cap, n, "dil", nsp, p->dilation);
    if (memcmp(p->pad_lo, p->pad_hi, (size_t)nsp * sizeof p->pad_lo[0]) == 0) {
        n = nn_h_put_list(buf, cap, n, "pad", nsp, p->pad_lo);
    } else {
        n = nn_h_put_list(buf, cap, n, "padlo", nsp, p->pad_lo);
        n = nn_h_put_list(buf, cap, n, "padhi", nsp, p->pad_hi);
    }
    const char *words[] = {
        p->mode == NN_CONV_CONVOLUTION ? "conv" : "xcorr",
        p->activation == NN_ACTIVATION_RELU ? "relu" : NULL,
        c->bias ? "bias" : NULL,
        nn_dtype_name(c->dtype),
        c->dtype == NN_DTYPE_F32 && c->math == NN_MATH_TF32 ? "tf32" : NULL,
        c->accumulate & NN_ACCUMULATE_DX ? "accdx" : NULL,
        c->accumulate & NN_ACCUMULATE_DW ? "accdw" : NULL,
        c->accumulate & NN_ACCUMULATE_DB ? "accdb" : NULL,
        NULL, /* grads=, below */
        c->keep ? "keep" : NULL,
    };
    for (size_t i = 0; i < sizeof words / sizeof words[0] && n < cap; i++) {
        if (i == 8) n = nn_h_put_grads(buf, cap, n, c->skip);
        if (words[i]) n += (size_t)snprintf(buf + n, cap - n, " %s", words[i]);
        if (i == 4 && c->nhwc && n < cap) /* after the math mode, as the verbose line has it */
            n += (size_t)snprintf(buf + n, cap - n, " nhwc%s",
                                  c->nhwc == NN_CONV_CASE_ALL ? "" : "=");
        if (i == 4 && c->nhwc && c->nhwc != NN_CONV_CASE_ALL)
            for (int b = 0, first = 1; b < 6 && n < cap; b++)
                if (c->nhwc & (1u << b)) {
                    n += (size_t)snprintf(buf + n, cap - n, "%s%s", first ? "" : "+",
                                          layout_names[b]);
                    first = 0;
                }
    }
}

/* ---------------------------------------------------------------------------------------------
 * Standard cases: every geometry in every dtype variant.
 */

static const char *const geometries[] = {
    "n2c3w11k4s3 pad1 bias",                              /* 1-D */
    "n1c4w10k2s3 stride2 dil2 padlo2 padhi0 conv",        /* 1-D, batch 1, asymmetric */
    "n2c4h7w6k6r3s3 g2 pad1 bias relu",                   /* groups, relu */
    "n1c6h9w9k6r3s3 g6 stride2 pad1 bias",                /* depthwise */
    "n2c3h6w6k6r3s3 g3 pad1 conv accdx",                  /* depthwise, multiplier 2 */
    "n1c3h8w7k4r2s3 stride2x1 padlo0x1 padhi1x2 conv",    /* asymmetric padding */
    "n2c2h9w9k3r3s3 dil2x3 pad2x1 relu",                  /* dilation */
    "n3c5h5w5k2r1s1 bias accdw accdb",                    /* 1x1, accumulation */
    "n1c1h3w3k1r3s3",                                     /* smallest */
    "n2c3h13w11k5r5s3 stride3x2 pad2x1 bias",             /* odd sizes */
    "n2c8h5w5k8r3s3 g4 pad1 relu bias accdx accdw accdb", /* groups + everything */
    "n1c2d5h6w5k3t3r3s2 stride1x2x1 pad1x0x1 bias",       /* 3-D */
    "n2c4d4h5w6k4t2r3s3 g2 stride2x1x1 dil1x2x1 padlo1x1x0 padhi0x1x2 conv relu", /* 3-D */
    "n2c4d4h5w6k4t2r3s3 g4 padlo1x1x0 padhi0x1x2 bias", /* 3-D, wrong 16-bit dw on cuDNN 9.14 */
};
static const char *const variants[] = {"f32", "f32 tf32", "f16", "bf16", "f64"};
#define N_GEOMETRIES (sizeof geometries / sizeof geometries[0])
#define N_VARIANTS   (sizeof variants / sizeof variants[0])

size_t nn_conv_standard_case_count(void)
{
    return N_GEOMETRIES * N_VARIANTS;
}

int nn_conv_standard_case(size_t i, struct nn_conv_case *c)
{
    if (i >= nn_conv_standard_case_count()) return -1;
    char line[256], err[256];
    snprintf(line, sizeof line, "%s %s", geometries[i / N_VARIANTS], variants[i % N_VARIANTS]);
    return nn_conv_case_parse_line(line, c, err, sizeof err) == 1 ? 0 : -1;
}

/* ---------------------------------------------------------------------------------------------
 * Running a case
 */

static int rank_of(const struct nn_conv_case *c)
{
    return c->p.spatial_rank + 2;
}

static int64_t prod(const int64_t *v, int n)
{
    int64_t r = 1;
    for (int i = 0; i < n; i++)
        r *= v[i];
    return r;
}

/* Products summed into one element of y, dx, dw / db (upper bounds), for tolerances. */
struct terms {
    int64_t y, dx, dw;
};

static struct terms terms_of(const struct nn_conv_case *c, const int64_t *y_dims)
{
    int nsp = c->p.spatial_rank;
    int64_t filt = prod(c->w_dims + 2, nsp);
    struct terms t = {c->w_dims[1] * filt + 1, c->w_dims[0] / c->p.groups * filt + 1,
                      y_dims[0] * prod(y_dims + 2, nsp) + 1};
    return t;
}

struct io {
    nn_tensor x, w, b, dy;             /* inputs, on the run's context */
    struct nn_h_guarded y, dx, dw, db; /* outputs */
};

static void io_free(nn_ctx *ctx, nn_ctx *host, struct io *io)
{
    nn_tensor *in[] = {&io->x, &io->w, &io->b, &io->dy};
    for (size_t i = 0; i < 4; i++)
        if (in[i]->data) nn_tensor_free(ctx, in[i]);
    nn_h_guarded_free(ctx, host, &io->y);
    nn_h_guarded_free(ctx, host, &io->dx);
    nn_h_guarded_free(ctx, host, &io->dw);
    nn_h_guarded_free(ctx, host, &io->db);
}

/* Channels-last packed strides of dims (C fastest, then the spatial dims, N slowest). */
static void channels_last_strides(int rank, const int64_t *dims, int64_t *strides)
{
    int64_t s = dims[1];
    strides[1] = 1;
    for (int i = rank - 1; i >= 2; i--) {
        strides[i] = s;
        s *= dims[i];
    }
    strides[0] = s;
}

/* The same storage as a flat run of its elements, for raw copies between memory spaces. */
static nn_tensor flat(const nn_tensor *t)
{
    nn_tensor v = *t;
    v.rank = 1;
    v.dims[0] = nn_tensor_numel(t);
    v.strides[0] = 1;
    return v;
}

/* t (ctx's memory, NCHW or channels-last) as a packed NCHW host tensor. */
static nn_status to_host(nn_ctx *ctx, nn_ctx *host, const nn_tensor *t, nn_tensor *out)
{
    if (nn_tensor_is_contiguous(t)) return nn_h_to_host(ctx, host, t, out);
    nn_tensor raw;
    nn_status st = nn_tensor_empty(host, t->dtype, t->rank, t->dims, &raw);
    if (st != NN_OK) return st;
    nn_tensor fr = flat(&raw), ft = flat(t);
    st = nn_tensor_copy(ctx, &fr, &ft);
    memcpy(raw.strides, t->strides, sizeof raw.strides);
    if (st == NN_OK) st = nn_tensor_empty(host, t->dtype, t->rank, t->dims, out);
    if (st == NN_OK && (st = nn_tensor_copy(host, out, &raw)) != NN_OK) nn_tensor_free(host, out);
    nn_tensor_free(host, &raw);
    return st;
}

/* Inputs filled on host (the same values for every backend), then copied to ctx, in NCHW order
 * or (cl) channels-last. */
static nn_status make_input(nn_ctx *ctx, nn_ctx *host, nn_dtype dt, int rank, const int64_t *dims,
                            int ints, uint64_t seed, int cl, nn_tensor *out)
{
    nn_tensor h, hl;
    nn_status st = nn_tensor_empty(host, dt, rank, dims, &h);
    if (st != NN_OK) return st;
    st = ints ? nn_tensor_fill_ints(host, &h, -2, 2, seed)
              : nn_tensor_fill_uniform(host, &h, -1, 1, seed);
    hl = h;
    if (st == NN_OK && cl) {
        st = nn_tensor_empty(host, dt, rank, dims, &hl);
        if (st == NN_OK) {
            channels_last_strides(rank, dims, hl.strides);
            st = nn_tensor_copy(host, &hl, &h);
        }
    }
    if (st == NN_OK) st = nn_tensor_empty(ctx, dt, rank, dims, out);
    if (st == NN_OK) {
        nn_tensor fo = flat(out), fh = flat(&hl);
        st = nn_tensor_copy(ctx, &fo, &fh);
        memcpy(out->strides, hl.strides, sizeof out->strides);
        if (st != NN_OK) nn_tensor_free(ctx, out);
    }
    if (hl.data != h.data && hl.data) nn_tensor_free(host, &hl);
    nn_tensor_free(host, &h);
    return st;
}

/* An output with guards, in NCHW order or (cl) channels-last: the same elements either way, so
 * the guards and the NaN fill stay as they are. An accumulating output starts from small
 * integers in the order of its memory. */
static nn_status make_output(nn_ctx *ctx, nn_ctx *host, nn_dtype dt, int rank, const int64_t *dims,
                             int accumulate, uint64_t seed, int cl, struct nn_h_guarded *g)
{
    nn_status st = nn_h_guarded_alloc(ctx, host, dt, rank, dims, seed, g);
    if (st == NN_OK && accumulate) st = nn_tensor_fill_ints(ctx, &g->view, -2, 2, seed + 1);
    if (st == NN_OK && cl) channels_last_strides(rank, dims, g->view.strides);
    return st;
}

/* Allocate, fill and run forward + backward of case c on ctx (dtype dt). */
static nn_status run_case(nn_ctx *ctx, nn_ctx *host, const struct nn_conv_case *c, nn_dtype dt,
                          int ints, struct io *io)
{
    memset(io, 0, sizeof *io);
    int rank = rank_of(c);
    int64_t yd[NN_CONV_MAX_SPATIAL + 2], bd[1] = {c->w_dims[0]};
    unsigned f = c->accumulate, cl = c->nhwc;
    nn_status st = nn_conv_output_shape(&c->p, rank, c->x_dims, c->w_dims, yd);
    if (st != NN_OK) {
        /* a shape the library refuses: y of ones, so that the op's own call says why (the
         * message of a failed call's verbose line) */
        for (int i = 0; i < rank; i++)
            yd[i] = i == 0 ? c->x_dims[0] : i == 1 ? c->w_dims[0] : 1;
        st = NN_OK;
    }
    if (st == NN_OK)
        st = make_input(ctx, host, dt, rank, c->x_dims, ints, 11, cl & NN_CONV_CASE_X, &io->x);
    if (st == NN_OK)
        st = make_input(ctx, host, dt, rank, c->w_dims, ints, 12, cl & NN_CONV_CASE_W, &io->w);
    if (st == NN_OK && c->bias) st = make_input(ctx, host, dt, 1, bd, ints, 13, 0, &io->b);
    if (st == NN_OK)
        st = make_input(ctx, host, dt, rank, yd, ints, 14, cl & NN_CONV_CASE_DY, &io->dy);
    if (st == NN_OK) st = make_output(ctx, host, dt, rank, yd, 0, 21, cl & NN_CONV_CASE_Y, &io->y);
    /* a gradient not asked for stays NaN: the backward must leave it alone */
    unsigned sk = c->skip;
    if (st == NN_OK)
        st = make_output(ctx, host, dt, rank, c->x_dims,
                         !(sk & NN_H_SKIP_DX) && (f & NN_ACCUMULATE_DX), 22, cl & NN_CONV_CASE_DX,
                         &io->dx);
    if (st == NN_OK)
        st = make_output(ctx, host, dt, rank, c->w_dims,
                         !(sk & NN_H_SKIP_DW) && (f & NN_ACCUMULATE_DW), 23, cl & NN_CONV_CASE_DW,
                         &io->dw);
    if (st == NN_OK)
        st = make_output(ctx, host, dt, 1, bd, !(sk & NN_H_SKIP_DB) && (f & NN_ACCUMULATE_DB), 24,
                         0, &io->db);
    if (st != NN_OK) return st;
    nn_conv_pullback *pb = NULL;
    /* the case's accumulation, and "keep": the pullback kept (and freed below) */
    nn_backward_options opts = {.accumulate = f, .keep = c->keep};
    st = nn_conv_forward(ctx, &c->p, &io->x, &io->w, c->bias ? &io->b : NULL, &io->y.view, &pb);
    nn_tensor *dx = sk & NN_H_SKIP_DX ? NULL : &io->dx.view,
              *dw = sk & NN_H_SKIP_DW ? NULL : &io->dw.view,
              *db = sk & NN_H_SKIP_DB ? NULL : &io->db.view;
    if (st == NN_OK)
        st = opts.accumulate || opts.keep
                 ? nn_conv_backward_ex(ctx, &pb, &opts, &io->dy, dx, dw, db)
                 : nn_conv_backward(ctx, &pb, &io->dy, dx, dw, db);
    nn_conv_pullback_free(&pb);
    return st;
}

static int report_status(nn_status st, const char *what, FILE *out, const char *repro)
{
    fprintf(out, "FAIL %s: %s: %s | repro: %s\n", what, nn_status_name(st),
            nn_last_error()->message, repro);
    return 1;
}

/* ---------------------------------------------------------------------------------------------
 * Finite differences (f64, reference)
 */

/* The convolution without its activation into z, for nn_h_fd. */
struct fd_arg {
    nn_ctx *ref;
    nn_conv_params p;
    struct io *io;
    nn_tensor *b, z;
};

static int fd_forward(void *arg)
{
    struct fd_arg *a = arg;
    return nn_conv_forward(a->ref, &a->p, &a->io->x, &a->io->w, a->b, &a->z, NULL) == NN_OK ? 0
                                                                                            : -1;
}

/* Multiply-adds of one forward call. */
static double forward_macs(const struct nn_conv_case *c)
{
    int64_t yd[NN_CONV_MAX_SPATIAL + 2];
    if (nn_conv_output_shape(&c->p, rank_of(c), c->x_dims, c->w_dims, yd) != NN_OK) return 0;
    int nsp = c->p.spatial_rank;
    return (double)prod(yd, nsp + 2) * (double)prod(c->w_dims + 1, nsp + 1);
}

/* Finite differences cost two forward calls per sampled element: skipped above this size. */
#define FD_MAX_MACS 2e7

/* The f64 gradients against finite differences (nn_h_fd: the relu pattern held, so a large batch
 * or a step across a kink is no false failure). */
static int check_fd(nn_ctx *ref, const struct nn_conv_case *c, FILE *out, const char *repro)
{
    if (forward_macs(c) > FD_MAX_MACS) {
        fprintf(out, "note: finite differences skipped (more than %.0e multiply-adds) | %s\n",
                FD_MAX_MACS, repro);
        return 0;
    }
    struct nn_conv_case d = *c;
    d.dtype = NN_DTYPE_F64;
    d.accumulate = 0;
    d.nhwc = 0; /* the differences index raw memory; layouts are checked by the other runs */
    struct io io;
    struct fd_arg arg = {ref, d.p, &io, d.bias ? &io.b : NULL, {0}};
    arg.p.activation = NN_ACTIVATION_IDENTITY;
    nn_status st = run_case(ref, ref, &d, NN_DTYPE_F64, 0, &io);
    if (st == NN_OK)
        st = nn_tensor_empty(ref, NN_DTYPE_F64, io.y.view.rank, io.y.view.dims, &arg.z);
    if (st != NN_OK) {
        int fails = report_status(st, "reference f64 run", out, repro);
        io_free(ref, ref, &io);
        return fails;
    }
    nn_tensor *inputs[] = {&io.x, &io.w, &io.b};
    struct nn_h_fd fd = {fd_forward,
                         &arg,
                         &arg.z,
                         &io.dy,
                         inputs,
                         d.bias ? 3 : 2,
                         d.p.activation == NN_ACTIVATION_RELU,
                         d.w_dims[1] * prod(d.w_dims + 2, d.p.spatial_rank) + 1,
                         NULL,
                         0};
    int fails = 0;
    if (nn_h_fd_begin(&fd)) {
        fails = report_status(nn_last_error()->status, "reference f64 forward", out, repro);
    } else {
        fails += nn_h_fd_check_activation(&fd, &io.y.view, out, repro);
        if (!(d.skip & NN_H_SKIP_DX))
            fails += nn_h_fd_check(&fd, &io.x, &io.dx.view, NULL, 48, "dx", out, repro);
        if (!(d.skip & NN_H_SKIP_DW))
            fails += nn_h_fd_check(&fd, &io.w, &io.dw.view, NULL, 48, "dw", out, repro);
        if (d.bias && !(d.skip & NN_H_SKIP_DB))
            fails += nn_h_fd_check(&fd, &io.b, &io.db.view, NULL, 48, "db", out, repro);
    }
    nn_h_fd_end(&fd);
    nn_tensor_free(ref, &arg.z);
    io_free(ref, ref, &io);
    return fails;
}

/* ---------------------------------------------------------------------------------------------
 * Guards and written outputs
 */

/* skip: the NN_H_SKIP_* gradients the backward was not asked for, which must stay NaN. */
static int check_outputs(nn_ctx *ctx, nn_ctx *host, struct io *io, unsigned skip, const char *who,
                         FILE *out, const char *repro)
{
    struct {
        const char *name;
        struct nn_h_guarded *g;
    } outs[] = {{"y", &io->y}, {"dx", &io->dx}, {"dw", &io->dw}, {"db", &io->db}};
    int fails = 0;
    for (size_t i = 0; i < 4; i++) {
        char name[64];
        snprintf(name, sizeof name, "%s %s", who, outs[i].name);
        fails += nn_h_guarded_check(ctx, host, outs[i].g, name, out, repro);
        nn_tensor h;
        if (to_host(ctx, host, &outs[i].g->view, &h) != NN_OK) {
            fails += report_status(nn_last_error()->status, name, out, repro);
            continue;
        }
        fails += i && (skip & (1u << (i - 1))) ? nn_h_check_untouched(name, &h, out, repro)
                                               : nn_h_check_written(name, &h, out, repro);
        nn_tensor_free(host, &h);
    }
    return fails;
}

/* y, dx, dw and db of got (on ctx) against want (on ref), scale a (nn_h_compare); prefix names
 * what got is. Returns the number of failures. */
static int compare_io(nn_ctx *ctx, struct io *got, nn_ctx *ref, struct io *want, double a,
                      struct terms t, unsigned skip, const char *prefix, FILE *out,
                      const char *repro)
{
    struct {
        const char *name;
        struct nn_h_guarded *g, *w;
        int64_t terms;
    } outs[] = {{"y", &got->y, &want->y, t.y},
                {"dx", &got->dx, &want->dx, t.dx},
                {"dw", &got->dw, &want->dw, t.dw},
                {"db", &got->db, &want->db, t.dw}};
    int fails = 0;
    for (size_t i = 0; i < 4; i++) {
        if (i && (skip & (1u << (i - 1)))) continue; /* not asked: check_outputs' */
        char name[64];
        snprintf(name, sizeof name, "%s%s", prefix, outs[i].name);
        nn_tensor h, w;
        if (to_host(ctx, ref, &outs[i].g->view, &h) != NN_OK) {
            fails += report_status(nn_last_error()->status, name, out, repro);
            continue;
        }
        if (to_host(ref, ref, &outs[i].w->view, &w) != NN_OK) {
            fails += report_status(nn_last_error()->status, name, out, repro);
            nn_tensor_free(ref, &h);
            continue;
        }
        fails += nn_h_compare(name, &h, &w, a, outs[i].terms, out, repro);
        nn_tensor_free(ref, &h);
        nn_tensor_free(ref, &w);
    }
    return fails;
}

int nn_conv_check_reference(nn_ctx *ref, const struct nn_conv_case *c, FILE *out)
{
    char repro[320], text[256];
    nn_conv_case_format(c, text, sizeof text);
    snprintf(repro, sizeof repro, "nnprim check conv %s", text);
    int64_t yd[NN_CONV_MAX_SPATIAL + 2];
    struct io io, want;
    if (nn_conv_output_shape(&c->p, rank_of(c), c->x_dims, c->w_dims, yd) != NN_OK) {
        /* a shape the library refuses: one run, for the op's own status and message */
        nn_status st = run_case(ref, ref, c, c->dtype, 1, &io);
        io_free(ref, ref, &io);
        return st == NN_OK ? 0 : report_status(st, "reference run", out, repro);
    }
    int fails = check_fd(ref, c, out, repro);
    /* The case's dtype against f64 on the same small-integer inputs: exact where the sums are,
     * else within the dtype's tolerance. */
    struct terms t = terms_of(c, yd);
    int64_t most = t.y > t.dx ? t.y : t.dx;
    most = most > t.dw ? most : t.dw;
    double a = nn_h_exact(c->dtype, most) ? 0 : nn_h_tolerance(c->dtype, c->math);
    struct nn_conv_case d = *c;
    d.dtype = NN_DTYPE_F64;
    nn_status st = run_case(ref, ref, c, c->dtype, 1, &io);
    if (st != NN_OK)
        fails += report_status(st, "reference run", out, repro);
    else
        fails += check_outputs(ref, ref, &io, c->skip, "reference", out, repro);
    nn_status wst = c->dtype == NN_DTYPE_F64 ? NN_OK : run_case(ref, ref, &d, d.dtype, 1, &want);
    if (wst != NN_OK) fails += report_status(wst, "reference f64 run", out, repro);
    if (st == NN_OK && wst == NN_OK && c->dtype != NN_DTYPE_F64)
        fails += compare_io(ref, &io, ref, &want, a, t, c->skip, "reference vs f64: ", out, repro);
    if (c->dtype != NN_DTYPE_F64) io_free(ref, ref, &want);
    io_free(ref, ref, &io);
    return fails;
}

/* ---------------------------------------------------------------------------------------------
 * A backend against the reference
 */

int nn_conv_check_backend(nn_ctx *dev, nn_ctx *ref, const struct nn_conv_case *c, FILE *out)
{
    char repro[320], text[256];
    nn_conv_case_format(c, text, sizeof text);
    snprintf(repro, sizeof repro, "nnprim check conv %s", text);
    int64_t yd[NN_CONV_MAX_SPATIAL + 2];
    nn_status st = nn_conv_output_shape(&c->p, rank_of(c), c->x_dims, c->w_dims, yd);
    if (st != NN_OK) {
        /* a shape the library refuses: one run on the backend too, for its own status and
         * message (what a failed call's line is reproduced against) */
        struct io io;
        st = run_case(dev, ref, c, c->dtype, 1, &io);
        io_free(dev, ref, &io);
        return st == NN_OK ? 0 : report_status(st, "backend run", out, repro);
    }
    struct terms t = terms_of(c, yd);
    int64_t most = t.y > t.dx ? t.y : t.dx;
    most = most > t.dw ? most : t.dw;
    int ints = nn_h_exact(c->dtype, most);
    nn_settings s;
    nn_ctx_get_settings(dev, &s);
    double a = ints ? 0 : nn_h_tolerance(c->dtype, s.math_mode);

    struct io want, got;
    int fails = 0;
    st = run_case(ref, ref, c, c->dtype, ints, &want);
    if (st != NN_OK) fails += report_status(st, "reference run", out, repro);
    nn_status dst = run_case(dev, ref, c, c->dtype, ints, &got);
    if (dst == NN_E_UNSUPPORTED && c->dtype == NN_DTYPE_F64) /* allowed by conv.h */
        fprintf(out, "note: backend has no f64 path (%s) | %s\n", nn_last_error()->message, repro);
    else if (dst != NN_OK)
        fails += report_status(dst, "backend run", out, repro);
    if (st == NN_OK && dst == NN_OK) {
        fails += check_outputs(dev, ref, &got, c->skip, "backend", out, repro);
        fails += compare_io(dev, &got, ref, &want, a, t, c->skip, "", out, repro);
    }
    io_free(ref, ref, &want);
    io_free(dev, ref, &got);
    return fails;
}

/* Channels-last (NHWC / NDHWC / NWC) convolution tensors:
 * - on the reference backend, every tensor channels-last (and mixes of both layouts) gives
 *   bitwise the results of NCHW: forward with bias and relu, the pullback's backward, and the
 *   stand-alone data, filter and bias gradients, in f32, f64, f16 and bf16, 1-D to 3-D;
 * - the problem text names the layout;
 * - on a GPU (skipped elsewhere), NHWC on cuDNN against the NCHW reference in f32 (strict and
 *   TF32), f16 and bf16, after the same shapes ran NCHW on the same context (the plan cache must
 *   not hand an NCHW plan to an NHWC call): required to run for plain 2-D problems in TF32, f16
 *   and bf16, elsewhere it may be refused with NN_E_UNSUPPORTED naming the layout; a mixed-layout
 *   call either matches or is refused the same way.
 * Refused layouts are rows of the bad-input catalogue (tests/catalogue/catalogue_conv.c). */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "conv/conv_internal.h"
#include "gpu.h"
#include "tests/harness/conv_case.h"

static nn_ctx *make_ctx(nn_backend backend, nn_math_mode math)
{
    nn_settings s;
    nn_settings_defaults(&s);
    s.backend = backend;
    s.math_mode = math;
    nn_ctx *ctx = NULL;
    cr_assert_eq(nn_ctx_create(&ctx, &s), NN_OK, "%s", nn_last_error()->message);
    return ctx;
}

/* Layout bits: which tensors of a run are channels-last. */
enum { CL_X = 1, CL_W = 2, CL_Y = 4, CL_DX = 8, CL_DW = 16, CL_DY = 32, CL_ALL = 63 };

/* A host tensor of dims, packed in NCHW order, filled from seed (small integers or uniform). */
static nn_tensor host_filled(nn_ctx *ref, nn_dtype dt, int rank, const int64_t *dims, uint64_t seed,
                             int ints)
{
    nn_tensor t;
    cr_assert_eq(nn_tensor_empty(ref, dt, rank, dims, &t), NN_OK, "%s", nn_last_error()->message);
    nn_status st = ints ? nn_tensor_fill_ints(ref, &t, -2, 2, seed)
                        : nn_tensor_fill_uniform(ref, &t, -1, 1, seed);
    cr_assert_eq(st, NN_OK, "%s", nn_last_error()->message);
    return t;
}

/* A packed host tensor of src's dims in the layout asked for, holding src's values. */
static nn_tensor host_in_layout(nn_ctx *ref, const nn_tensor *src, int cl)
{
    nn_tensor t;
    cr_assert_eq(nn_tensor_empty(ref, src->dtype, src->rank, src->dims, &t), NN_OK);
    nn__conv_layout_strides(t.rank, t.dims, cl, t.strides);
    cr_assert_eq(nn_tensor_copy(ref, &t, src), NN_OK, "%s", nn_last_error()->message);
    return t;
}

/* The same memory described as a packed row-major run of its elements (for raw copies). */
static nn_tensor flat(const nn_tensor *t)
{
    nn_tensor v = *t;
    v.rank = 1;
    v.dims[0] = nn_tensor_numel(t);
    v.strides[0] = 1;
    return v;
}

/* A copy of the host tensor h in ctx's memory, with h's strides (a raw copy of its storage). */
static nn_tensor to_ctx(nn_ctx *ctx, const nn_tensor *h)
{
    nn_tensor d;
    cr_assert_eq(nn_tensor_empty(ctx, h->dtype, h->rank, h->dims, &d), NN_OK, "%s",
                 nn_last_error()->message);
    nn_tensor fd = flat(&d), fh = flat(h);
    cr_assert_eq(nn_tensor_copy(ctx, &fd, &fh), NN_OK, "%s", nn_last_error()->message);
    memcpy(d.strides, h->strides, sizeof d.strides);
    return d;
}

/* t (ctx's memory, any of the two layouts) as a packed NCHW host tensor. */
static nn_tensor to_host_nchw(nn_ctx *ctx, nn_ctx *ref, const nn_tensor *t)
{
    nn_tensor raw, out;
    cr_assert_eq(nn_tensor_empty(ref, t->dtype, t->rank, t->dims, &raw), NN_OK);
    nn_tensor fr = flat(&raw), ft = flat(t);
    cr_assert_eq(nn_tensor_copy(ctx, &fr, &ft), NN_OK, "%s", nn_last_error()->message);
    memcpy(raw.strides, t->strides, sizeof raw.strides);
    cr_assert_eq(nn_tensor_empty(ref, t->dtype, t->rank, t->dims, &out), NN_OK);
    cr_assert_eq(nn_tensor_copy(ref, &out, &raw), NN_OK, "%s", nn_last_error()->message);
    nn_tensor_free(ref, &raw);
    return out;
}

/* One run's tensors: inputs and outputs in ctx's memory, in the layouts of mask. */
struct run {
    nn_tensor x, w, b, dy, y, dx, dw, db;
};

static void run_free(nn_ctx *ctx, struct run *r)
{
    nn_tensor *all[] = {&r->x, &r->w, &r->b, &r->dy, &r->y, &r->dx, &r->dw, &r->db};
    for (size_t i = 0; i < 8; i++)
        if (all[i]->data) nn_tensor_free(ctx, all[i]);
}

/* An output in ctx's memory in the layout asked for, filled with 1 (accumulating flags add to
 * it, the others must overwrite it). */
static nn_tensor output(nn_ctx *ctx, nn_ctx *ref, nn_dtype dt, int rank, const int64_t *dims,
                        int cl)
{
    nn_tensor h = host_filled(ref, dt, rank, dims, 0, 1);
    cr_assert_eq(nn_tensor_fill_constant(ref, &h, 1.0), NN_OK);
    nn_tensor hl = host_in_layout(ref, &h, cl);
    nn_tensor d = to_ctx(ctx, &hl);
    nn_tensor_free(ref, &h);
    nn_tensor_free(ref, &hl);
    return d;
}

static nn_tensor input(nn_ctx *ctx, nn_ctx *ref, nn_dtype dt, int rank, const int64_t *dims,
                       uint64_t seed, int ints, int cl)
{
    nn_tensor h = host_filled(ref, dt, rank, dims, seed, ints);
    nn_tensor hl = host_in_layout(ref, &h, cl);
    nn_tensor d = to_ctx(ctx, &hl);
    nn_tensor_free(ref, &h);
    nn_tensor_free(ref, &hl);
    return d;
}

/* Forward (with the case's bias and relu) and the pullback's backward of case c on ctx, the
 * tensors in the layouts of mask. Returns the status of the first failing call. */
static nn_status run_case(nn_ctx *ctx, nn_ctx *ref, const struct nn_conv_case *c, unsigned mask,
                          int ints, struct run *r)
{
    memset(r, 0, sizeof *r);
    int rank = c->p.spatial_rank + 2;
    int64_t yd[5], bd[1] = {c->w_dims[0]};
    cr_assert_eq(nn_conv_output_shape(&c->p, rank, c->x_dims, c->w_dims, yd), NN_OK);
    nn_dtype dt = c->dtype;
    r->x = input(ctx, ref, dt, rank, c->x_dims, 11, ints, mask & CL_X);
    r->w = input(ctx, ref, dt, rank, c->w_dims, 12, ints, mask & CL_W);
    if (c->bias) r->b = input(ctx, ref, dt, 1, bd, 13, ints, 0);
    r->dy = input(ctx, ref, dt, rank, yd, 14, ints, mask & CL_DY);
    r->y = output(ctx, ref, dt, rank, yd, mask & CL_Y);
    r->dx = output(ctx, ref, dt, rank, c->x_dims, mask & CL_DX);
    r->dw = output(ctx, ref, dt, rank, c->w_dims, mask & CL_DW);
    r->db = output(ctx, ref, dt, 1, bd, 0);
    nn_conv_pullback *pb = NULL;
    nn_status st = nn_conv_forward(ctx, &c->p, &r->x, &r->w, c->bias ? &r->b : NULL, &r->y, &pb);
    if (st == NN_OK) st = nn_conv_backward(ctx, &pb, &r->dy, &r->dx, &r->dw, &r->db);
    nn_conv_pullback_free(&pb);
    return st;
}

/* The stand-alone gradients of case c (activation taken as identity) into r's dx, dw and db. */
static nn_status run_standalone(nn_ctx *ctx, const struct nn_conv_case *c, struct run *r)
{
    nn_conv_params p = c->p;
    p.activation = NN_ACTIVATION_IDENTITY;
    nn_status st = nn_conv_backward_data(ctx, &p, &r->dy, &r->w, &r->dx, 0);
    if (st == NN_OK) st = nn_conv_backward_filter(ctx, &p, &r->x, &r->dy, &r->dw, 0);
    if (st == NN_OK) st = nn_conv_backward_bias(ctx, &p, &r->dy, &r->db, 0);
    return st;
}

static double value(const nn_tensor *t, int64_t i)
{
    const void *d = t->data;
    switch (t->dtype) {
    case NN_DTYPE_F32: return ((const float *)d)[i];
    case NN_DTYPE_F64: return ((const double *)d)[i];
    case NN_DTYPE_F16: {
        uint16_t h = ((const uint16_t *)d)[i];
        int e = (h >> 10) & 31, m = h & 1023;
        double v = e ? ldexp(1024 + m, e - 25) : ldexp(m, -24);
        return (h & 0x8000) ? -v : v;
    }
    case NN_DTYPE_BF16: {
        uint32_t u = (uint32_t)((const uint16_t *)d)[i] << 16;
        float f;
        memcpy(&f, &u, sizeof f);
        return f;
    }
    }
    return NAN;
}

/* got (ctx's memory, any layout) against want (ctx2's memory, any layout), element by element
 * in NCHW order: |got - want| <= tol * (1 + |want|); tol 0 asks for bitwise equality. */
static void expect_close(nn_ctx *ctx, const nn_tensor *got, nn_ctx *ctx2, const nn_tensor *want,
                         nn_ctx *ref, double tol, const char *what)
{
    nn_tensor g = to_host_nchw(ctx, ref, got), w = to_host_nchw(ctx2, ref, want);
    int64_t n = nn_tensor_numel(&g);
    if (tol == 0) {
        cr_expect_eq(memcmp(g.data, w.data, (size_t)n * nn_dtype_size(g.dtype)), 0,
                     "%s: not bitwise equal", what);
    } else {
        int bad = 0;
        for (int64_t i = 0; i < n && bad < 3; i++) {
            double a = value(&g, i), b = value(&w, i);
            if (!(fabs(a - b) <= tol * (1 + fabs(b)))) {
                cr_expect(0, "%s: element %lld: got %.8g, want %.8g", what, (long long)i, a, b);
                bad++;
            }
        }
    }
    nn_tensor_free(ref, &g);
    nn_tensor_free(ref, &w);
}

static void expect_run_close(nn_ctx *ctx, const struct run *got, nn_ctx *ctx2,
                             const struct run *want, nn_ctx *ref, double tol, const char *what)
{
    char name[320];
    const nn_tensor *g[] = {&got->y, &got->dx, &got->dw, &got->db};
    const nn_tensor *w[] = {&want->y, &want->dx, &want->dw, &want->db};
    const char *names[] = {"y", "dx", "dw", "db"};
    for (int i = 0; i < 4; i++) {
        snprintf(name, sizeof name, "%s: %s", what, names[i]);
        expect_close(ctx, g[i], ctx2, w[i], ref, tol, name);
    }
}

static struct nn_conv_case parse(const char *line)
{
    struct nn_conv_case c;
    char err[256];
    cr_assert_eq(nn_conv_case_parse_line(line, &c, err, sizeof err), 1, "%s: %s", line, err);
    return c;
}

/* Geometries: 2-D with bias and relu, groups and stride, 1x1 (tensors of both layouts at once),
 * C = 1, 1-D, 3-D with asymmetric padding, and accumulation into the outputs. */
static const char *const geometries[] = {
    "n2c4h7w6k6r3s3 pad1 bias relu",
    "n2c6h9w8k4r3s3 g2 stride2x1 dil1x2 padlo1x0 padhi0x2 conv bias",
    "n3c5h5w5k4r1s1 bias accdx accdw accdb",
    "n2c1h6w6k3r3s3 pad1 bias relu",
    "n2c3w11k4s3 pad1 bias relu",
    "n1c4d4h5w6k4t2r3s3 g2 padlo1x1x0 padhi0x1x2 bias relu",
};
#define N_GEOMETRIES (sizeof geometries / sizeof geometries[0])

static const char *const ref_dtypes[] = {"f32", "f64", "f16", "bf16"};

Test(conv_nhwc, reference_channels_last_equals_nchw)
{
    nn_ctx *ref = make_ctx(NN_BACKEND_REF, NN_MATH_STRICT_FP32);
    const unsigned masks[] = {CL_ALL, CL_X | CL_Y, CL_W | CL_DX, CL_DY | CL_DW, CL_Y | CL_DY};
    for (size_t gi = 0; gi < N_GEOMETRIES; gi++)
        for (size_t di = 0; di < 4; di++) {
            char line[256];
            snprintf(line, sizeof line, "%s %s", geometries[gi], ref_dtypes[di]);
            struct nn_conv_case c = parse(line);
            struct run want, got;
            cr_assert_eq(run_case(ref, ref, &c, 0, 0, &want), NN_OK, "%s: %s", line,
                         nn_last_error()->message);
            for (size_t mi = 0; mi < sizeof masks / sizeof masks[0]; mi++) {
                char what[320];
                snprintf(what, sizeof what, "%s, layout mask 0x%x", line, masks[mi]);
                cr_assert_eq(run_case(ref, ref, &c, masks[mi], 0, &got), NN_OK, "%s: %s", what,
                             nn_last_error()->message);
                expect_run_close(ref, &got, ref, &want, ref, 0, what);
                /* The stand-alone gradients, in the same layouts. */
                cr_assert_eq(run_standalone(ref, &c, &got), NN_OK, "%s: %s", what,
                             nn_last_error()->message);
                cr_assert_eq(run_standalone(ref, &c, &want), NN_OK, "%s: %s", what,
                             nn_last_error()->message);
                expect_run_close(ref, &got, ref, &want, ref, 0, what);
                run_free(ref, &got);
                /* run_standalone accumulated into want's outputs where the case's flags say so:
                 * rebuild it for the next mask. */
                run_free(ref, &want);
                cr_assert_eq(run_case(ref, ref, &c, 0, 0, &want), NN_OK);
            }
            run_free(ref, &want);
        }
    nn_ctx_destroy(ref);
}

/* A tensor that is channels-last and NCHW at once is accepted whatever its unit dims' strides. */
Test(conv_nhwc, unit_dims_take_any_stride)
{
    nn_ctx *ref = make_ctx(NN_BACKEND_REF, NN_MATH_STRICT_FP32);
    struct nn_conv_case c = parse("n1c3h4w4k2r1s1 f64");
    struct run want, got;
    cr_assert_eq(run_case(ref, ref, &c, 0, 0, &want), NN_OK);
    cr_assert_eq(run_case(ref, ref, &c, CL_ALL, 0, &got), NN_OK);
    got.x.strides[0] = 12345;                  /* N = 1 */
    got.w.strides[2] = got.w.strides[3] = 777; /* 1x1 filter */
    cr_assert_eq(nn_conv_forward(ref, &c.p, &got.x, &got.w, NULL, &got.y, NULL), NN_OK, "%s",
                 nn_last_error()->message);
    expect_close(ref, &got.y, ref, &want.y, ref, 0, "y");
    run_free(ref, &got);
    run_free(ref, &want);
    nn_ctx_destroy(ref);
}

/* Strides that are neither layout stay refused, naming the tensor and the layouts accepted. */
Test(conv_nhwc, other_strides_refused)
{
    nn_ctx *ref = make_ctx(NN_BACKEND_REF, NN_MATH_STRICT_FP32);
    struct nn_conv_case c = parse("n2c4h5w5k3r3s3 f32");
    struct run r;
    cr_assert_eq(run_case(ref, ref, &c, CL_ALL, 0, &r), NN_OK);
    nn_tensor x = r.x;
    x.strides[2] = 4; /* NHWC, but W and H swapped: N, W, H, C */
    x.strides[3] = 4 * 5;
    cr_expect_eq(nn_conv_forward(ref, &c.p, &x, &r.w, NULL, &r.y, NULL), NN_E_UNSUPPORTED);
    cr_expect(strstr(nn_last_error()->message, "nn_conv_forward: x must be fully packed"), "%s",
              nn_last_error()->message);
    cr_expect(strstr(nn_last_error()->message, "channels-last"), "%s", nn_last_error()->message);
    run_free(ref, &r);
    nn_ctx_destroy(ref);
}

/* The problem text (verbose lines, nnprim check) names the channels-last tensors. */
Test(conv_nhwc, problem_text_names_the_layout)
{
    struct nn__conv_problem p;
    memset(&p, 0, sizeof p);
    p.nsp = 2;
    p.n = p.c = p.k = p.groups = 1;
    for (int i = 0; i < 2; i++)
        p.in[i] = p.filt[i] = p.out[i] = p.stride[i] = p.dilation[i] = 1;
    p.dtype = NN_DTYPE_F16;
    char buf[256];
    nn__conv_problem_text(&p, buf, sizeof buf);
    cr_expect(!strstr(buf, "nhwc"), "%s", buf);
    p.roles = NN__CONV_ROLE_X | NN__CONV_ROLE_W | NN__CONV_ROLE_Y;
    p.nhwc = p.roles;
    nn__conv_problem_text(&p, buf, sizeof buf);
    cr_expect(strstr(buf, " f16 nhwc"), "%s", buf);
    p.nhwc = NN__CONV_ROLE_X | NN__CONV_ROLE_Y;
    nn__conv_problem_text(&p, buf, sizeof buf);
    cr_expect(strstr(buf, " f16 nhwc=x+y"), "%s", buf);
}

/* The case syntax (nnprim check conv, shape files) takes the layout and gives it back. */
Test(conv_nhwc, case_syntax_round_trip)
{
    const char *lines[] = {"n2c4h7w6k6r3s3 g1 stride1x1 dil1x1 pad1x1 xcorr relu bias f16 nhwc",
                           "n2c4h7w6k6r3s3 g1 stride1x1 dil1x1 pad1x1 xcorr f32 tf32 nhwc=x+dy"};
    unsigned want[] = {NN_CONV_CASE_ALL, NN_CONV_CASE_X | NN_CONV_CASE_DY};
    for (int i = 0; i < 2; i++) {
        struct nn_conv_case c = parse(lines[i]);
        cr_expect_eq(c.nhwc, want[i]);
        char buf[256];
        nn_conv_case_format(&c, buf, sizeof buf);
        cr_expect_str_eq(buf, lines[i]);
    }
    struct nn_conv_case c;
    char err[256];
    cr_expect_eq(nn_conv_case_parse_line("n1c1h3w3k1r3s3 nhwc=x+q", &c, err, sizeof err), -1);
    cr_expect(strstr(err, "nhwc="), "%s", err);
}

/* The harness's reference checks (finite differences, guards, every output written) with
 * channels-last tensors, as `nnprim check conv ... nhwc` runs them. */
Test(conv_nhwc, harness_reference_checks)
{
    nn_ctx *ref = make_ctx(NN_BACKEND_REF, NN_MATH_STRICT_FP32);
    const char *layouts[] = {"nhwc", "nhwc=x+dy+dw"};
    for (size_t gi = 0; gi < N_GEOMETRIES; gi++)
        for (size_t di = 0; di < 4; di++)
            for (int li = 0; li < 2; li++) {
                char line[256];
                snprintf(line, sizeof line, "%s %s %s", geometries[gi], ref_dtypes[di],
                         layouts[li]);
                struct nn_conv_case c = parse(line);
                cr_expect_eq(nn_conv_check_reference(ref, &c, stderr), 0, "%s", line);
            }
    nn_ctx_destroy(ref);
}

/* ---------------------------------------------------------------------------------------------
 * cuDNN
 */

static const struct {
    const char *dtype;
    nn_math_mode math;
    double tol;
} gpu_variants[] = {
    {"f32", NN_MATH_STRICT_FP32, 1e-5},
    {"f32", NN_MATH_TF32, 1e-2},
    {"f16", NN_MATH_STRICT_FP32, 1e-2},
    {"bf16", NN_MATH_STRICT_FP32, 2e-2},
};

/* What must run channels-last on cuDNN: the plain 2-D geometries in the tensor-core dtypes (TF32,
 * f16, bf16). Elsewhere an engine may be missing for the layout: NN_E_UNSUPPORTED naming it is
 * then an answer (printed as a note), a wrong value never is. */
static int nhwc_required(size_t geometry, size_t variant)
{
    return geometry <= 1 && variant >= 1;
}

/* st of an NHWC run: NN_OK, or a refusal the contract above allows (which prints a note). */
static int nhwc_ran(nn_status st, size_t gi, size_t vi, const char *what)
{
    if (st == NN_E_UNSUPPORTED && !nhwc_required(gi, vi) &&
        strstr(nn_last_error()->message, "nhwc")) {
        fprintf(stderr, "note: %s refused: %s\n", what, nn_last_error()->message);
        return 0;
    }
    cr_expect_eq(st, NN_OK, "%s: %s", what, nn_last_error()->message);
    return st == NN_OK;
}

Test(conv_nhwc, cudnn_channels_last_matches_reference)
{
    NN_REQUIRE_GPU();
    nn_ctx *ref = make_ctx(NN_BACKEND_REF, NN_MATH_STRICT_FP32);
    for (size_t vi = 0; vi < sizeof gpu_variants / sizeof gpu_variants[0]; vi++) {
        nn_ctx *dev = make_ctx(NN_BACKEND_CUDNN, gpu_variants[vi].math);
        for (size_t gi = 0; gi < N_GEOMETRIES; gi++) {
            char line[256], what[320];
            snprintf(line, sizeof line, "%s %s", geometries[gi], gpu_variants[vi].dtype);
            struct nn_conv_case c = parse(line);
            struct run want, nchw, nhwc;
            cr_assert_eq(run_case(ref, ref, &c, 0, 1, &want), NN_OK);
            /* NCHW first: its plans are in the cache when the NHWC call looks. */
            nn_status st = run_case(dev, ref, &c, 0, 1, &nchw);
            snprintf(what, sizeof what, "%s%s NCHW on cuDNN", line,
                     gpu_variants[vi].math == NN_MATH_TF32 ? " tf32" : "");
            cr_expect_eq(st, NN_OK, "%s: %s", what, nn_last_error()->message);
            if (st == NN_OK)
                expect_run_close(dev, &nchw, ref, &want, ref, gpu_variants[vi].tol, what);
            st = run_case(dev, ref, &c, CL_ALL, 1, &nhwc);
            snprintf(what, sizeof what, "%s%s NHWC on cuDNN", line,
                     gpu_variants[vi].math == NN_MATH_TF32 ? " tf32" : "");
            if (nhwc_ran(st, gi, vi, what))
                expect_run_close(dev, &nhwc, ref, &want, ref, gpu_variants[vi].tol, what);
            run_free(dev, &nchw);
            run_free(dev, &nhwc);
            run_free(ref, &want);
        }
        nn_ctx_destroy(dev);
    }
    nn_ctx_destroy(ref);
}

/* The harness's comparison (guards, exact on small integers where the sums are exact, else its
 * tolerances) of cuDNN against the reference, every tensor channels-last, for the required
 * problems (nhwc_required()). */
Test(conv_nhwc, harness_cudnn_against_reference)
{
    NN_REQUIRE_GPU();
    nn_ctx *ref = make_ctx(NN_BACKEND_REF, NN_MATH_STRICT_FP32);
    for (size_t vi = 0; vi < sizeof gpu_variants / sizeof gpu_variants[0]; vi++) {
        nn_ctx *dev = make_ctx(NN_BACKEND_CUDNN, gpu_variants[vi].math);
        for (size_t gi = 0; gi < N_GEOMETRIES; gi++) {
            if (!nhwc_required(gi, vi)) continue;
            char line[256];
            snprintf(line, sizeof line, "%s %s%s nhwc", geometries[gi], gpu_variants[vi].dtype,
                     gpu_variants[vi].math == NN_MATH_TF32 ? " tf32" : "");
            struct nn_conv_case c = parse(line);
            cr_expect_eq(nn_conv_check_backend(dev, ref, &c, stderr), 0, "%s", line);
        }
        nn_ctx_destroy(dev);
    }
    nn_ctx_destroy(ref);
}

/* Layouts mixed within one call: cuDNN's engines may refuse them; then the refusal is
 * NN_E_UNSUPPORTED and names the layout, never a wrong result. */
Test(conv_nhwc, cudnn_mixed_layouts_match_or_are_refused)
{
    NN_REQUIRE_GPU();
    nn_ctx *ref = make_ctx(NN_BACKEND_REF, NN_MATH_STRICT_FP32);
    nn_ctx *dev = make_ctx(NN_BACKEND_CUDNN, NN_MATH_STRICT_FP32);
    const unsigned masks[] = {CL_X | CL_Y | CL_DX | CL_DY, CL_W | CL_DW, CL_X | CL_DX};
    struct nn_conv_case c = parse("n2c4h7w6k6r3s3 pad1 bias relu f16");
    struct run want, got;
    cr_assert_eq(run_case(ref, ref, &c, 0, 1, &want), NN_OK);
    for (size_t mi = 0; mi < sizeof masks / sizeof masks[0]; mi++) {
        nn_status st = run_case(dev, ref, &c, masks[mi], 1, &got);
        char what[320];
        snprintf(what, sizeof what, "layout mask 0x%x", masks[mi]);
        if (st == NN_E_UNSUPPORTED) {
            cr_expect(strstr(nn_last_error()->message, "nhwc"), "%s: %s", what,
                      nn_last_error()->message);
            fprintf(stderr, "note: %s refused: %s\n", what, nn_last_error()->message);
        } else {
            cr_expect_eq(st, NN_OK, "%s: %s", what, nn_last_error()->message);
            if (st == NN_OK) expect_run_close(dev, &got, ref, &want, ref, 1e-2, what);
        }
        run_free(dev, &got);
    }
    run_free(ref, &want);
    nn_ctx_destroy(dev);
    nn_ctx_destroy(ref);
}

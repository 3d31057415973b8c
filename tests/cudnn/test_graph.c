/* Graph-API helpers and introspection, with conv's graphs (src/conv/conv_graph_cudnn.h) built
 * through its graph kind as the plan cache builds them. CPU tests: text descriptions, the
 * numerical-note filter, the 1 TiB rule, 1-D as 2-D, graph validation, descriptor read-back
 * (cuDNN's descriptor calls run on the host). GPU tests: build, plan, execute and compare with host
 * loops; describe a plan; rebuild it from its engine choice and from its JSON form, bit-identical.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "gpu.h"

#include "nnprim/nnprim.h"

#include "core/alloc.h"
#include "conv/conv_graph_cudnn.h"
#include "core/ctx.h"
#include "cudnn/bindings_cudnn.h"
#include "cudnn/describe_cudnn.h"
#include "cudnn/graph_cudnn.h"

static struct nn__cudnn_tensor tensor(nn_dtype dt, int rank, const int64_t *dims)
{
    struct nn__cudnn_tensor t = {.dtype = dt, .rank = rank, .alignment = 16};
    int64_t s = 1;
    for (int i = rank - 1; i >= 0; i--) {
        t.dims[i] = dims[i];
        t.strides[i] = s;
        s *= dims[i];
    }
    return t;
}

static struct nn__conv_graph_params conv2d(int64_t stride, int64_t dil, int64_t pad)
{
    struct nn__conv_graph_params c = {
        .spatial_rank = 2, .mode = NN__CONV_GRAPH_XCORR, .compute = NN_DTYPE_F32};
    for (int i = 0; i < 2; i++) {
        c.stride[i] = stride;
        c.dilation[i] = dil;
        c.pre_pad[i] = pad;
        c.post_pad[i] = pad;
    }
    return c;
}

/* ---------------------------------------------------------------------------------------------
 * Text
 */

Test(cudnn_graph, describe_tensor_conv_pool)
{
    char b[NN__CUDNN_DESCRIBE_MAX];
    struct nn__cudnn_tensor x = tensor(NN_DTYPE_F32, 4, (int64_t[]){2, 3, 5, 5});
    cr_expect_str_eq(nn__cudnn_describe_tensor(b, sizeof b, "x", &x),
                     "x:f32[2,3,5,5]/[75,25,5,1]@16");
    cr_expect_str_eq(nn__cudnn_describe_tensor(b, sizeof b, NULL, &x),
                     "f32[2,3,5,5]/[75,25,5,1]@16");
    struct nn__cudnn_tensor none = {0};
    cr_expect_str_eq(nn__cudnn_describe_tensor(b, sizeof b, "b", &none), "b:-");

    struct nn__conv_graph_params c = conv2d(2, 1, 1);
    c.post_pad[1] = 0;
    cr_expect_str_eq(nn__conv_graph_describe_params(b, sizeof b, &c),
                     "conv2d stride=2x2 dilation=1x1 pad=1x1/1x0 xcorr acc=f32");
    c.mode = NN__CONV_GRAPH_CONVOLUTION;
    c.spatial_rank = 1;
    c.compute = NN_DTYPE_F64;
    cr_expect_str_eq(nn__conv_graph_describe_params(b, sizeof b, &c),
                     "conv1d stride=2 dilation=1 pad=1/1 conv acc=f64");
    c.spatial_rank = 7;
    cr_expect_str_eq(nn__conv_graph_describe_params(b, sizeof b, &c),
                     "conv(invalid spatial rank 7)");
}

Test(cudnn_graph, describe_graph_desc)
{
    char b[NN__CUDNN_DESCRIBE_MAX];
    struct nn__cudnn_tensor x = tensor(NN_DTYPE_F16, 3, (int64_t[]){1, 2, 8});
    struct nn__cudnn_tensor w = tensor(NN_DTYPE_F16, 3, (int64_t[]){4, 2, 3});
    struct nn__cudnn_tensor bias = tensor(NN_DTYPE_F16, 3, (int64_t[]){1, 4, 1});
    struct nn__cudnn_tensor y = tensor(NN_DTYPE_F16, 3, (int64_t[]){1, 4, 6});
    struct nn__conv_graph_params c = conv2d(1, 1, 0);
    c.spatial_rank = 1;
    struct nn__conv_graph d;
    nn__conv_graph_fwd(&d, &x, &w, &bias, &y, &c, 1);
    cr_expect_str_eq(nn__conv_graph_describe(b, sizeof b, &d),
                     "conv_fwd x:f16[1,2,8]/[16,8,1]@16 w:f16[4,2,3]/[6,3,1]@16 "
                     "y:f16[1,4,6]/[24,6,1]@16 b:f16[1,4,1]/[4,1,1]@16 "
                     "conv1d stride=1 dilation=1 pad=0/0 xcorr acc=f32 +relu");
    struct nn__conv_graph g;
    nn__conv_graph_bwd_filter(&g, &x, &y, &w, &c);
    g.beta = 1;
    cr_expect_str_eq(nn__conv_graph_describe(b, sizeof b, &g),
                     "conv_bwd_filter x:f16[1,2,8]/[16,8,1]@16 dw:f16[4,2,3]/[6,3,1]@16 "
                     "dy:f16[1,4,6]/[24,6,1]@16 conv1d stride=1 dilation=1 pad=0/0 xcorr acc=f32 "
                     "alpha=1 beta=1");
    /* A value that is no kind in the table prints as such. */
    g.op = (enum nn__conv_pass)4;
    cr_expect_eq(strncmp(nn__conv_graph_describe(b, sizeof b, &g), "? x:", 4), 0, "%s", b);
}

Test(cudnn_graph, describe_choice_and_notes)
{
    char b[NN__CUDNN_DESCRIBE_MAX];
    struct nn__engine_choice c = {.engine = 12, .knob_count = 3};
    c.knobs[0] = (struct nn__engine_knob){CUDNN_KNOB_TYPE_TILE_SIZE, 3};
    c.knobs[1] = (struct nn__engine_knob){CUDNN_KNOB_TYPE_SPLIT_K_SLC, 1};
    c.knobs[2] = (struct nn__engine_knob){999, -2};
    cr_expect_str_eq(nn__cudnn_describe_choice(b, sizeof b, &c),
                     "engine=12 knobs=[TILE_SIZE=3,SPLIT_K_SLC=1,999=-2]");
    int64_t notes[] = {CUDNN_NUMERICAL_NOTE_TENSOR_CORE, CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC};
    cr_expect_str_eq(nn__cudnn_describe_notes(b, sizeof b, notes, 2),
                     "TENSOR_CORE|NONDETERMINISTIC");
    cr_expect_str_eq(nn__cudnn_describe_notes(b, sizeof b, notes, 0), "none");
}

Test(cudnn_graph, describe_truncates_without_overrun)
{
    char b[12];
    memset(b, 'Z', sizeof b);
    struct nn__cudnn_tensor x = tensor(NN_DTYPE_F32, 4, (int64_t[]){2, 3, 5, 5});
    nn__cudnn_describe_tensor(b, 8, "x", &x);
    cr_expect_str_eq(b, "x:f32[2");
    cr_expect_eq(b[8], 'Z');
}

/* ---------------------------------------------------------------------------------------------
 * Rules
 */

Test(cudnn_graph, numerical_note_filter)
{
    const char *why;
    int64_t tc[] = {CUDNN_NUMERICAL_NOTE_TENSOR_CORE};
    int64_t nd[] = {CUDNN_NUMERICAL_NOTE_FFT, CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC};
    int64_t dc[] = {CUDNN_NUMERICAL_NOTE_TENSOR_CORE, CUDNN_NUMERICAL_NOTE_DOWN_CONVERT_INPUTS};
    int64_t ok[] = {CUDNN_NUMERICAL_NOTE_WINOGRAD, CUDNN_NUMERICAL_NOTE_STRICT_NAN_PROP};

    struct nn__cudnn_filter f = {NN_DTYPE_F32, NN_MATH_STRICT_FP32, 0, 0, 0};
    cr_expect_eq(nn__cudnn_notes_allowed(tc, 1, &f, &why), 0);
    cr_expect(strstr(why, "TENSOR_CORE"), "why: %s", why);
    cr_expect_eq(nn__cudnn_notes_allowed(ok, 2, &f, &why), 1);
    cr_expect_null(why);
    cr_expect_eq(nn__cudnn_notes_allowed(nd, 2, &f, NULL), 1); /* not deterministic */
    cr_expect_eq(nn__cudnn_notes_allowed(NULL, 0, &f, &why), 1);

    f.math = NN_MATH_TF32; /* tensor cores allowed for f32 under TF32 */
    cr_expect_eq(nn__cudnn_notes_allowed(tc, 1, &f, NULL), 1);
    f.math = NN_MATH_STRICT_FP32;
    f.dtype = NN_DTYPE_F16; /* strict fp32 says nothing about f16 data */
    cr_expect_eq(nn__cudnn_notes_allowed(tc, 1, &f, NULL), 1);
    f.dtype = NN_DTYPE_F64;
    cr_expect_eq(nn__cudnn_notes_allowed(tc, 1, &f, NULL), 1);

    f.deterministic = 1;
    cr_expect_eq(nn__cudnn_notes_allowed(nd, 2, &f, &why), 0);
    cr_expect(strstr(why, "NONDETERMINISTIC"), "why: %s", why);

    f = (struct nn__cudnn_filter){NN_DTYPE_F16, NN_MATH_TF32, 0, 0, 0};
    cr_expect_eq(nn__cudnn_notes_allowed(dc, 2, &f, &why), 0); /* never down-convert */
    cr_expect(strstr(why, "DOWN_CONVERT_INPUTS"), "why: %s", why);
}

Test(cudnn_graph, one_tib_rule_and_workspace_cap)
{
    const char *why;
    int64_t tib = (int64_t)1 << 40;
    cr_expect_eq(nn__cudnn_workspace_usable(0, 0, &why), 1);
    cr_expect_null(why);
    cr_expect_eq(nn__cudnn_workspace_usable(tib - 1, 0, NULL), 1);
    cr_expect_eq(nn__cudnn_workspace_usable(tib, 0, &why), 0);
    cr_expect(strstr(why, "1 TiB"), "why: %s", why);
    cr_expect_eq(nn__cudnn_workspace_usable(INT64_MAX, 0, NULL), 0);
    cr_expect_eq(nn__cudnn_workspace_usable(-1, 0, NULL), 0);
    cr_expect_eq(nn__cudnn_workspace_usable(4096, 4096, NULL), 1);
    cr_expect_eq(nn__cudnn_workspace_usable(4097, 4096, &why), 0);
    cr_expect(strstr(why, "cap"), "why: %s", why);
    cr_expect_eq(nn__cudnn_workspace_usable(tib, (size_t)1 << 50, NULL), 0); /* cap above 1 TiB */
}

Test(cudnn_graph, one_d_as_two_d)
{
    struct nn__cudnn_tensor x = tensor(NN_DTYPE_F32, 3, (int64_t[]){2, 3, 7});
    cr_assert_eq(nn__cudnn_tensor_insert_unit_dim(&x, 2), NN_OK);
    cr_expect_eq(x.rank, 4);
    int64_t dims[] = {2, 3, 1, 7}, strides[] = {21, 7, 7, 1};
    for (int i = 0; i < 4; i++) {
        cr_expect_eq(x.dims[i], dims[i], "dims[%d]", i);
        cr_expect_eq(x.strides[i], strides[i], "strides[%d]", i);
    }
    /* A strided view stays the same view. */
    struct nn__cudnn_tensor v = {.dtype = NN_DTYPE_F32,
                                 .rank = 3,
                                 .dims = {2, 3, 7},
                                 .strides = {42, 14, 2},
                                 .alignment = 4};
    cr_assert_eq(nn__cudnn_tensor_insert_unit_dim(&v, 2), NN_OK);
    cr_expect_eq(v.strides[2], 14);
    cr_expect_eq(v.strides[3], 2);
    cr_expect_eq(v.dims[3], 7);

    struct nn__conv_graph_params c = {
        .spatial_rank = 1, .stride = {3}, .dilation = {2}, .pre_pad = {4}, .post_pad = {5}};
    nn__conv_graph_params_to_2d(&c);
    cr_expect_eq(c.spatial_rank, 2);
    cr_expect(c.stride[0] == 1 && c.stride[1] == 3);
    cr_expect(c.dilation[0] == 1 && c.dilation[1] == 2);
    cr_expect(c.pre_pad[0] == 0 && c.pre_pad[1] == 4);
    cr_expect(c.post_pad[0] == 0 && c.post_pad[1] == 5);
    nn__conv_graph_params_to_2d(&c); /* 2-D is left alone */
    cr_expect(c.stride[0] == 1 && c.stride[1] == 3);

    struct nn__cudnn_tensor full = {.rank = NN_MAX_RANK};
    cr_expect_eq(nn__cudnn_tensor_insert_unit_dim(&full, 2), NN_E_INVALID_ARG);
}

/* Bad descriptions are refused before any cuDNN call (ctx NULL: nothing else is touched). */
Test(cudnn_graph, graph_validation_names_the_field)
{
    struct nn__cudnn_tensor x = tensor(NN_DTYPE_F32, 4, (int64_t[]){1, 2, 5, 5});
    struct nn__cudnn_tensor w = tensor(NN_DTYPE_F32, 4, (int64_t[]){3, 2, 3, 3});
    struct nn__cudnn_tensor y = tensor(NN_DTYPE_F32, 4, (int64_t[]){1, 3, 3, 3});
    struct nn__cudnn_tensor x3 = tensor(NN_DTYPE_F32, 3, (int64_t[]){1, 2, 5});
    struct nn__cudnn_tensor yh = tensor(NN_DTYPE_F16, 4, (int64_t[]){1, 3, 3, 3});
    struct nn__conv_graph_params c = conv2d(1, 1, 0);
    struct nn__conv_graph d;

    nn__conv_graph_fwd(&d, &x3, &w, NULL, &y, &c, 0);
    cr_expect_eq(nn__conv_graph_check(NULL, &d), NN_E_INVALID_ARG);
    cr_expect(strstr(nn_last_error()->message, "tensor x must have rank 4"), "%s",
              nn_last_error()->message);

    nn__conv_graph_fwd(&d, &x, &w, NULL, &yh, &c, 0);
    cr_expect_eq(nn__conv_graph_check(NULL, &d), NN_E_DTYPE);
    cr_expect(strstr(nn_last_error()->message, "tensor y is f16, other tensors are f32"), "%s",
              nn_last_error()->message);

    c.dilation[1] = 0;
    nn__conv_graph_fwd(&d, &x, &w, NULL, &y, &c, 0);
    cr_expect_eq(nn__conv_graph_check(NULL, &d), NN_E_INVALID_ARG);
    cr_expect(strstr(nn_last_error()->message, "conv.dilation[1] must be >= 1, got 0"), "%s",
              nn_last_error()->message);

    c = conv2d(1, 1, 0);
    nn__conv_graph_fwd(&d, &x, &w, NULL, &y, &c, 0);
    d.t[NN__CONV_UID_DB] = y;
    cr_expect_eq(nn__conv_graph_check(NULL, &d), NN_E_INVALID_ARG);
    cr_expect(strstr(nn_last_error()->message, "tensor db is not used"), "%s",
              nn_last_error()->message);

    /* Kinds come from one table: a value outside it (the retired bias-gradient and pooling
     * kinds 4 and 5 included) is refused, never taken for a neighbour. */
    for (int k = 4; k <= 5; k++) {
        nn__conv_graph_fwd(&d, &x, &w, NULL, &y, &c, 0);
        d.op = (enum nn__conv_pass)k;
        cr_expect_eq(nn__conv_graph_check(NULL, &d), NN_E_INVALID_ARG);
        cr_expect(strstr(nn_last_error()->message, "unknown graph kind"), "%s",
                  nn_last_error()->message);
    }

    x.alignment = 12;
    nn__conv_graph_fwd(&d, &x, &w, NULL, &y, &c, 0);
    cr_expect_eq(nn__conv_graph_check(NULL, &d), NN_E_INVALID_ARG);
    cr_expect(strstr(nn_last_error()->message, "alignment must be a power of two, got 12"), "%s",
              nn_last_error()->message);
}

/* ---------------------------------------------------------------------------------------------
 * Read-back of descriptors built on the host
 */

Test(cudnn_graph, read_back_tensor_and_conv_descriptors)
{
    cudnnBackendDescriptor_t t, c;
    cudnnDataType_t dt = CUDNN_DATA_HALF;
    int64_t dims[] = {2, 3, 4, 5}, strides[] = {60, 1, 15, 3}, uid = 42, align = 8;
    bool virt = true;
    cr_assert_eq(nn__cudnn_BackendCreateDescriptor(NULL, CUDNN_BACKEND_TENSOR_DESCRIPTOR, &t),
                 NN_OK);
    cr_assert_eq(nn__cudnn_BackendSetAttribute(NULL, t, CUDNN_ATTR_TENSOR_DATA_TYPE,
                                               CUDNN_TYPE_DATA_TYPE, 1, &dt),
                 NN_OK);
    cr_assert_eq(nn__cudnn_BackendSetAttribute(NULL, t, CUDNN_ATTR_TENSOR_DIMENSIONS,
                                               CUDNN_TYPE_INT64, 4, dims),
                 NN_OK);
    cr_assert_eq(nn__cudnn_BackendSetAttribute(NULL, t, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64,
                                               4, strides),
                 NN_OK);
    cr_assert_eq(nn__cudnn_BackendSetAttribute(NULL, t, CUDNN_ATTR_TENSOR_UNIQUE_ID,
                                               CUDNN_TYPE_INT64, 1, &uid),
                 NN_OK);
    cr_assert_eq(nn__cudnn_BackendSetAttribute(NULL, t, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT,
                                               CUDNN_TYPE_INT64, 1, &align),
                 NN_OK);
    cr_assert_eq(nn__cudnn_BackendSetAttribute(NULL, t, CUDNN_ATTR_TENSOR_IS_VIRTUAL,
                                               CUDNN_TYPE_BOOLEAN, 1, &virt),
                 NN_OK);
    cr_assert_eq(nn__cudnn_BackendFinalize(NULL, t), NN_OK);

    struct nn__cudnn_tensor r;
    int64_t ruid;
    int rvirt;
    cr_assert_eq(nn__cudnn_read_tensor(NULL, t, &r, &ruid, &rvirt), NN_OK, "%s",
                 nn_last_error()->message);
    cr_expect_eq(r.dtype, NN_DTYPE_F16);
    cr_expect_eq(r.rank, 4);
    for (int i = 0; i < 4; i++) {
        cr_expect_eq(r.dims[i], dims[i]);
        cr_expect_eq(r.strides[i], strides[i]);
    }
    cr_expect_eq(r.alignment, 0); /* cuDNN does not give the alignment back */
    cr_expect_eq(ruid, 42);
    cr_expect_eq(rvirt, 1);
    char b[NN__CUDNN_DESCRIBE_MAX];
    cr_expect_eq(nn__cudnn_describe_backend(NULL, CUDNN_BACKEND_TENSOR_DESCRIPTOR, t, b, sizeof b),
                 NN_OK);
    cr_expect_str_eq(b, "TENSOR_DESCRIPTOR uid=42 virtual f16[2,3,4,5]/[60,1,15,3]");

    cudnnDataType_t ct = CUDNN_DATA_FLOAT;
    cudnnConvolutionMode_t mode = CUDNN_CROSS_CORRELATION;
    int64_t n = 2, dil[] = {1, 2}, st[] = {2, 1}, pre[] = {0, 1}, post[] = {1, 0};
    cr_assert_eq(nn__cudnn_BackendCreateDescriptor(NULL, CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR, &c),
                 NN_OK);
    nn__cudnn_BackendSetAttribute(NULL, c, CUDNN_ATTR_CONVOLUTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE,
                                  1, &ct);
    nn__cudnn_BackendSetAttribute(NULL, c, CUDNN_ATTR_CONVOLUTION_CONV_MODE,
                                  CUDNN_TYPE_CONVOLUTION_MODE, 1, &mode);
    nn__cudnn_BackendSetAttribute(NULL, c, CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS, CUDNN_TYPE_INT64, 1,
                                  &n);
    nn__cudnn_BackendSetAttribute(NULL, c, CUDNN_ATTR_CONVOLUTION_DILATIONS, CUDNN_TYPE_INT64, 2,
                                  dil);
    nn__cudnn_BackendSetAttribute(NULL, c, CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES, CUDNN_TYPE_INT64,
                                  2, st);
    nn__cudnn_BackendSetAttribute(NULL, c, CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS, CUDNN_TYPE_INT64, 2,
                                  pre);
    nn__cudnn_BackendSetAttribute(NULL, c, CUDNN_ATTR_CONVOLUTION_POST_PADDINGS, CUDNN_TYPE_INT64,
                                  2, post);
    cr_assert_eq(nn__cudnn_BackendFinalize(NULL, c), NN_OK);
    struct nn__conv_graph_params rc;
    cr_assert_eq(nn__conv_graph_read_params(NULL, c, &rc), NN_OK);
    cr_expect_str_eq(nn__conv_graph_describe_params(b, sizeof b, &rc),
                     "conv2d stride=2x1 dilation=1x2 pad=0x1/1x0 xcorr acc=f32");
    /* The graph layer reads back its own descriptors only; a family's (conv's, read above) it
     * names by type. */
    cr_expect_eq(
        nn__cudnn_describe_backend(NULL, CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR, c, b, sizeof b),
        NN_OK);
    cr_expect_str_eq(b, "CONVOLUTION_DESCRIPTOR (no read-back for this type)");
    nn__cudnn_BackendDestroyDescriptor(NULL, c);
    nn__cudnn_BackendDestroyDescriptor(NULL, t);
}

/* ---------------------------------------------------------------------------------------------
 * GPU
 */

/* Small integers: every product and sum below is exact in f32, so results compare with ==. */
static void fill_ints(float *a, size_t n, unsigned seed, int lo, int hi)
{
    for (size_t i = 0; i < n; i++) {
        seed = seed * 1103515245u + 12345u;
        a[i] = (float)(lo + (int)((seed >> 16) % (unsigned)(hi - lo + 1)));
    }
}

struct shape {
    int64_t n, c, h, w, k, r, s;
    int64_t stride, pad, dil;
    int64_t oh, ow;
};

static struct shape make_shape(int64_t n, int64_t c, int64_t h, int64_t w, int64_t k, int64_t r,
                               int64_t s, int64_t stride, int64_t pad, int64_t dil)
{
    struct shape q = {n, c, h, w, k, r, s, stride, pad, dil, 0, 0};
    q.oh = (h + 2 * pad - dil * (r - 1) - 1) / stride + 1;
    q.ow = (w + 2 * pad - dil * (s - 1) - 1) / stride + 1;
    return q;
}

/* Visit every (output position, filter tap) pair that reads inside x. */
#define FOR_TAPS(q)                                                                                \
    for (int64_t n_ = 0; n_ < (q).n; n_++)                                                         \
        for (int64_t k_ = 0; k_ < (q).k; k_++)                                                     \
            for (int64_t oh_ = 0; oh_ < (q).oh; oh_++)                                             \
                for (int64_t ow_ = 0; ow_ < (q).ow; ow_++)                                         \
                    for (int64_t c_ = 0; c_ < (q).c; c_++)                                         \
                        for (int64_t r_ = 0; r_ < (q).r; r_++)                                     \
                            for (int64_t s_ = 0; s_ < (q).s; s_++)

#define TAP_H(q)  (oh_ * (q).stride - (q).pad + r_ * (q).dil)
#define TAP_W(q)  (ow_ * (q).stride - (q).pad + s_ * (q).dil)
#define XI(q)     (((n_ * (q).c + c_) * (q).h + TAP_H(q)) * (q).w + TAP_W(q))
#define WI(q)     (((k_ * (q).c + c_) * (q).r + r_) * (q).s + s_)
#define YI(q)     (((n_ * (q).k + k_) * (q).oh + oh_) * (q).ow + ow_)
#define INSIDE(q) (TAP_H(q) >= 0 && TAP_H(q) < (q).h && TAP_W(q) >= 0 && TAP_W(q) < (q).w)

static void ref_conv_fwd(const struct shape *q, const float *x, const float *w, float *y)
{
    memset(y, 0, (size_t)(q->n * q->k * q->oh * q->ow) * sizeof *y);
    FOR_TAPS(*q) if (INSIDE(*q)) y[YI(*q)] += x[XI(*q)] * w[WI(*q)];
}

static void ref_conv_bwd_data(const struct shape *q, const float *dy, const float *w, float *dx)
{
    memset(dx, 0, (size_t)(q->n * q->c * q->h * q->w) * sizeof *dx);
    FOR_TAPS(*q) if (INSIDE(*q)) dx[XI(*q)] += dy[YI(*q)] * w[WI(*q)];
}

static void ref_conv_bwd_filter(const struct shape *q, const float *x, const float *dy, float *dw)
{
    memset(dw, 0, (size_t)(q->k * q->c * q->r * q->s) * sizeof *dw);
    FOR_TAPS(*q) if (INSIDE(*q)) dw[WI(*q)] += x[XI(*q)] * dy[YI(*q)];
}

static nn_ctx *gpu_ctx(nn_math_mode math)
{
    nn_settings s;
    cr_assert_eq(nn_settings_from_env(&s), NN_OK);
    s.backend = NN_BACKEND_CUDNN;
    s.math_mode = math;
    nn_ctx *ctx;
    cr_assert_eq(nn_ctx_create(&ctx, &s), NN_OK, "%s", nn_last_error()->message);
    return ctx;
}

/* The graph of d as the plan cache builds it: through conv's key and graph kind. */
static nn_status graph_of(nn_ctx *ctx, const struct nn__conv_graph *d, struct nn__cudnn_graph **g)
{
    struct nn__conv_key k;
    nn__conv_plan_key_of(ctx, d, 0, &k);
    return nn__cudnn_graph_create(ctx, &nn__conv_graph_kind, &k, g);
}

static void *dev_copy(const float *h, size_t n)
{
    void *d;
    cr_assert_eq(cudaMalloc(&d, n * sizeof(float)), cudaSuccess);
    if (h)
        cr_assert_eq(cudaMemcpy(d, h, n * sizeof(float), cudaMemcpyHostToDevice), cudaSuccess);
    else
        cr_assert_eq(cudaMemset(d, 0, n * sizeof(float)), cudaSuccess);
    return d;
}

static void host_copy(float *h, const void *d, size_t n)
{
    cr_assert_eq(cudaMemcpy(h, d, n * sizeof(float), cudaMemcpyDeviceToHost), cudaSuccess);
}

/* Plan (heuristics), workspace, execute, wait. Returns the plan for more use. */
static struct nn__cudnn_plan *run_graph(nn_ctx *ctx, struct nn__cudnn_graph *g,
                                        const struct nn__cudnn_args *args, void **ws)
{
    struct nn__cudnn_filter f;
    nn__cudnn_filter_from_ctx(ctx, NN_DTYPE_F32, &f);
    struct nn__cudnn_plan *p;
    struct nn__cudnn_search_stats st = {0};
    cr_assert_eq(nn__cudnn_plan_heuristic(ctx, g, &f, &p, &st), NN_OK, "%s",
                 nn_last_error()->message);
    cr_expect_geq(st.heuristic_queries, 1);
    cr_expect_geq(st.plans_built, 1);
    *ws = NULL;
    if (nn__cudnn_plan_workspace(p) > 0)
        cr_assert_eq(cudaMalloc(ws, (size_t)nn__cudnn_plan_workspace(p)), cudaSuccess);
    cr_assert_eq(nn__cudnn_plan_execute(ctx, p, args, *ws), NN_OK, "%s", nn_last_error()->message);
    cr_assert_eq(nn_ctx_synchronize(ctx), NN_OK);
    return p;
}

static void expect_equal(const float *got, const float *want, size_t n, const char *what)
{
    size_t bad = 0;
    for (size_t i = 0; i < n; i++)
        if (got[i] != want[i] && bad++ < 5)
            cr_expect_eq(got[i], want[i], "%s[%zu]: got %g, want %g", what, i, got[i], want[i]);
    cr_expect_eq(bad, 0, "%s: %zu of %zu elements differ", what, bad, n);
}

struct conv_case {
    struct shape q;
    float *x, *w, *y;
    void *dx, *dw, *dy;
    struct nn__cudnn_tensor tx, tw, ty;
    struct nn__conv_graph_params c;
};

static void conv_case_init(struct conv_case *cc, struct shape q)
{
    cc->q = q;
    size_t nx = (size_t)(q.n * q.c * q.h * q.w), nw = (size_t)(q.k * q.c * q.r * q.s),
           ny = (size_t)(q.n * q.k * q.oh * q.ow);
    cc->x = malloc(nx * sizeof(float));
    cc->w = malloc(nw * sizeof(float));
    cc->y = malloc(ny * sizeof(float));
    fill_ints(cc->x, nx, 1, -3, 3);
    fill_ints(cc->w, nw, 2, -2, 2);
    fill_ints(cc->y, ny, 3, -2, 2); /* used as dy */
    cc->dx = dev_copy(cc->x, nx);
    cc->dw = dev_copy(cc->w, nw);
    cc->dy = dev_copy(cc->y, ny);
    cc->tx = tensor(NN_DTYPE_F32, 4, (int64_t[]){q.n, q.c, q.h, q.w});
    cc->tw = tensor(NN_DTYPE_F32, 4, (int64_t[]){q.k, q.c, q.r, q.s});
    cc->ty = tensor(NN_DTYPE_F32, 4, (int64_t[]){q.n, q.k, q.oh, q.ow});
    cc->c = conv2d(q.stride, q.dil, q.pad);
}

static void conv_case_fini(struct conv_case *cc)
{
    cudaFree(cc->dx);
    cudaFree(cc->dw);
    cudaFree(cc->dy);
    free(cc->x);
    free(cc->w);
    free(cc->y);
}

Test(cudnn_graph, gpu_conv_forward_matches_host_and_rebuilds_bit_identical)
{
    NN_REQUIRE_GPU();
    nn_ctx *ctx = gpu_ctx(NN_MATH_STRICT_FP32);
    struct conv_case cc;
    conv_case_init(&cc, make_shape(2, 3, 7, 6, 4, 3, 3, 1, 1, 1));
    const struct shape *q = &cc.q;
    size_t ny = (size_t)(q->n * q->k * q->oh * q->ow);
    float *want = malloc(ny * sizeof(float)), *got = malloc(ny * sizeof(float)),
          *again = malloc(ny * sizeof(float));
    ref_conv_fwd(q, cc.x, cc.w, want);
    void *y = dev_copy(NULL, ny);

    struct nn__conv_graph d;
    nn__conv_graph_fwd(&d, &cc.tx, &cc.tw, NULL, &cc.ty, &cc.c, 0);
    struct nn__cudnn_graph *g;
    cr_assert_eq(graph_of(ctx, &d, &g), NN_OK, "%s", nn_last_error()->message);
    struct nn__cudnn_args args = {0};
    args.p[NN__CONV_UID_X] = cc.dx;
    args.p[NN__CONV_UID_W] = cc.dw;
    args.p[NN__CONV_UID_Y] = y;
    void *ws;
    struct nn__cudnn_plan *p = run_graph(ctx, g, &args, &ws);
    host_copy(got, y, ny);
    expect_equal(got, want, ny, "y");

    /* Describe the finalized plan: read back, it names the engine the plan recorded. */
    struct nn__cudnn_plan_info info;
    cr_assert_eq(nn__cudnn_read_plan(ctx, nn__cudnn_plan_backend(p), &info), NN_OK, "%s",
                 nn_last_error()->message);
    const struct nn__engine_choice *ch = nn__cudnn_plan_choice(p);
    cr_expect_eq(info.engine.choice.engine, ch->engine);
    cr_expect_eq(info.engine.choice.knob_count, ch->knob_count);
    for (int i = 0; i < ch->knob_count; i++) {
        cr_expect_eq(info.engine.choice.knobs[i].type, ch->knobs[i].type);
        cr_expect_eq(info.engine.choice.knobs[i].value, ch->knobs[i].value);
    }
    cr_expect_eq(info.workspace, nn__cudnn_plan_workspace(p));
    char text[NN__CUDNN_DESCRIBE_MAX], want_text[64];
    cr_expect_eq(nn__cudnn_describe_backend(ctx, CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR,
                                            nn__cudnn_plan_backend(p), text, sizeof text),
                 NN_OK);
    snprintf(want_text, sizeof want_text, "EXECUTION_PLAN_DESCRIPTOR engine=%lld ",
             (long long)ch->engine);
    cr_expect(!strncmp(text, want_text, strlen(want_text)), "describe: %s", text);
    cr_expect(!strstr(text, "TENSOR_CORE"), "strict fp32 plan uses tensor cores: %s", text);
    cr_log_info("plan: %s", text);
    cr_expect_eq(nn__cudnn_describe_backend(ctx, CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR,
                                            nn__cudnn_graph_backend(g), text, sizeof text),
                 NN_OK);
    cr_expect(strstr(text, "engines="), "describe: %s", text);

    /* Rebuild from engine index + knobs: no heuristics, bit-identical output. */
    struct nn__cudnn_filter f;
    nn__cudnn_filter_from_ctx(ctx, NN_DTYPE_F32, &f);
    struct nn__cudnn_plan *p2;
    cr_assert_eq(nn__cudnn_plan_from_choice(ctx, g, &f, ch, &p2), NN_OK, "%s",
                 nn_last_error()->message);
    cr_expect_eq(nn__cudnn_plan_workspace(p2), nn__cudnn_plan_workspace(p));
    cr_assert_eq(cudaMemset(y, 0, ny * sizeof(float)), cudaSuccess);
    cr_assert_eq(nn__cudnn_plan_execute(ctx, p2, &args, ws), NN_OK, "%s", nn_last_error()->message);
    cr_assert_eq(nn_ctx_synchronize(ctx), NN_OK);
    host_copy(again, y, ny);
    cr_expect_eq(memcmp(again, got, ny * sizeof(float)), 0, "rebuilt plan differs");

    /* The same plan executed again with the same pointers (variant pack reused), then with a
     * different output buffer (variant pack rebuilt). */
    void *y2 = dev_copy(NULL, ny);
    args.p[NN__CONV_UID_Y] = y2;
    cr_assert_eq(nn__cudnn_plan_execute(ctx, p2, &args, ws), NN_OK, "%s", nn_last_error()->message);
    cr_assert_eq(nn_ctx_synchronize(ctx), NN_OK);
    host_copy(again, y2, ny);
    cr_expect_eq(memcmp(again, got, ny * sizeof(float)), 0, "plan with new pointers differs");

    /* JSON round trip. */
    char *json;
    size_t len;
    cr_assert_eq(nn__cudnn_plan_json(ctx, p, &json, &len), NN_OK, "%s", nn_last_error()->message);
    cr_expect_gt(len, 0);
    struct nn__cudnn_plan *p3;
    cr_assert_eq(nn__cudnn_plan_from_json(ctx, g, &f, json, len, &p3), NN_OK, "%s",
                 nn_last_error()->message);
    cr_assert_eq(cudaMemset(y2, 0, ny * sizeof(float)), cudaSuccess);
    cr_assert_eq(nn__cudnn_plan_execute(ctx, p3, &args, ws), NN_OK, "%s", nn_last_error()->message);
    cr_assert_eq(nn_ctx_synchronize(ctx), NN_OK);
    host_copy(again, y2, ny);
    cr_expect_eq(memcmp(again, got, ny * sizeof(float)), 0, "plan from JSON differs");
    nn__host_free(json);

    nn__cudnn_plan_destroy(p3);
    nn__cudnn_plan_destroy(p2);
    nn__cudnn_plan_destroy(p);
    nn__cudnn_graph_destroy(g);
    cudaFree(ws);
    cudaFree(y);
    cudaFree(y2);
    free(want);
    free(got);
    free(again);
    conv_case_fini(&cc);
    nn_ctx_destroy(ctx);
}

/* NCHW <-> NHWC for the channels-last test (runtime fusion engines want channels last). */
static float *to_nhwc(const float *a, int64_t n, int64_t c, int64_t hw)
{
    float *b = malloc((size_t)(n * c * hw) * sizeof(float));
    for (int64_t i = 0; i < n; i++)
        for (int64_t j = 0; j < c; j++)
            for (int64_t p = 0; p < hw; p++)
                b[(i * hw + p) * c + j] = a[(i * c + j) * hw + p];
    return b;
}

static struct nn__cudnn_tensor tensor_nhwc(int64_t n, int64_t c, int64_t h, int64_t w)
{
    return (struct nn__cudnn_tensor){.dtype = NN_DTYPE_F32,
                                     .rank = 4,
                                     .dims = {n, c, h, w},
                                     .strides = {h * w * c, 1, w * c, c},
                                     .alignment = 16};
}

/* conv + bias + relu as one graph, channels last, TF32 allowed (small integers stay exact). */
/* Candidates with precompiled_only exclude runtime-compiled engines (the quick alternates of
 * slow-to-build tuned plans come from them), and each still computes the right result. */
Test(cudnn_graph, gpu_precompiled_only_candidates)
{
    NN_REQUIRE_GPU();
    nn_ctx *ctx = gpu_ctx(NN_MATH_STRICT_FP32);
    struct conv_case cc;
    conv_case_init(&cc, make_shape(2, 8, 12, 12, 8, 3, 3, 1, 1, 1));
    const struct shape *q = &cc.q;
    size_t ny = (size_t)(q->n * q->k * q->oh * q->ow);
    float *want = malloc(ny * sizeof(float)), *got = malloc(ny * sizeof(float));
    ref_conv_fwd(q, cc.x, cc.w, want);
    void *y = dev_copy(NULL, ny);
    struct nn__conv_graph d;
    nn__conv_graph_fwd(&d, &cc.tx, &cc.tw, NULL, &cc.ty, &cc.c, 0);
    struct nn__cudnn_graph *g;
    cr_assert_eq(graph_of(ctx, &d, &g), NN_OK, "%s", nn_last_error()->message);
    struct nn__cudnn_filter f;
    nn__cudnn_filter_from_ctx(ctx, NN_DTYPE_F32, &f);
    struct nn__cudnn_plan *all[16], *pre[16];
    int n_all = 0, n_pre = 0, rtc_all = 0;
    cr_assert_eq(nn__cudnn_plan_candidates(ctx, g, &f, 16, all, &n_all, NULL), NN_OK, "%s",
                 nn_last_error()->message);
    for (int i = 0; i < n_all; i++)
        rtc_all += nn__cudnn_plan_runtime_compiled(all[i]);
    f.precompiled_only = 1;
    cr_assert_eq(nn__cudnn_plan_candidates(ctx, g, &f, 16, pre, &n_pre, NULL), NN_OK, "%s",
                 nn_last_error()->message);
    cr_expect_geq(n_pre, 1);
    cr_expect_leq(n_pre, n_all);
    struct nn__cudnn_args args = {0};
    args.p[NN__CONV_UID_X] = cc.dx;
    args.p[NN__CONV_UID_W] = cc.dw;
    args.p[NN__CONV_UID_Y] = y;
    for (int i = 0; i < n_pre; i++) {
        cr_expect_eq(nn__cudnn_plan_runtime_compiled(pre[i]), 0, "engine %lld",
                     (long long)nn__cudnn_plan_choice(pre[i])->engine);
        void *ws = NULL;
        if (nn__cudnn_plan_workspace(pre[i]) > 0)
            cr_assert_eq(cudaMalloc(&ws, (size_t)nn__cudnn_plan_workspace(pre[i])), cudaSuccess);
        cr_assert_eq(nn__cudnn_plan_execute(ctx, pre[i], &args, ws), NN_OK, "%s",
                     nn_last_error()->message);
        cr_assert_eq(nn_ctx_synchronize(ctx), NN_OK);
        host_copy(got, y, ny);
        /* Winograd and FFT engines are not exact on integer inputs: strict fp32 rounding of
         * C*R*S = 72 products per element. */
        size_t off = 0;
        for (size_t j = 0; j < ny; j++)
            if (fabsf(got[j] - want[j]) > 1e-5f * (fabsf(want[j]) + 72.0f)) off++;
        cr_expect_eq(off, 0, "engine %lld: %zu of %zu elements off",
                     (long long)nn__cudnn_plan_choice(pre[i])->engine, off, ny);
        cudaFree(ws);
        nn__cudnn_plan_destroy(pre[i]);
    }
    cr_log_info("%d of %d candidates runtime-compiled, %d precompiled", rtc_all, n_all, n_pre);
    for (int i = 0; i < n_all; i++)
        nn__cudnn_plan_destroy(all[i]);
    nn__cudnn_graph_destroy(g);
    cudaFree(y);
    free(want);
    free(got);
    conv_case_fini(&cc);
    nn_ctx_destroy(ctx);
}

Test(cudnn_graph, gpu_conv_forward_bias_relu_fused)
{
    NN_REQUIRE_GPU();
    nn_ctx *ctx = gpu_ctx(NN_MATH_TF32);
    struct shape q = make_shape(2, 8, 6, 6, 16, 3, 3, 1, 1, 1);
    size_t nx = (size_t)(q.n * q.c * q.h * q.w), nw = (size_t)(q.k * q.c * q.r * q.s),
           hw = (size_t)(q.oh * q.ow), ny = (size_t)q.n * (size_t)q.k * hw;
    float *x = malloc(nx * sizeof(float)), *w = malloc(nw * sizeof(float)),
          *want = malloc(ny * sizeof(float)), *got = malloc(ny * sizeof(float)), bias[16];
    fill_ints(x, nx, 1, -3, 3);
    fill_ints(w, nw, 2, -2, 2);
    fill_ints(bias, 16, 4, -4, 4);
    ref_conv_fwd(&q, x, w, want);
    for (size_t i = 0; i < ny; i++) {
        float v = want[i] + bias[(i / hw) % (size_t)q.k];
        want[i] = v > 0 ? v : 0;
    }
    float *xl = to_nhwc(x, q.n, q.c, q.h * q.w), *wl = to_nhwc(w, q.k, q.c, q.r * q.s),
          *wantl = to_nhwc(want, q.n, q.k, (int64_t)hw);
    void *dx = dev_copy(xl, nx), *dw = dev_copy(wl, nw), *y = dev_copy(NULL, ny),
         *b = dev_copy(bias, 16);
    struct nn__cudnn_tensor tx = tensor_nhwc(q.n, q.c, q.h, q.w);
    struct nn__cudnn_tensor tw = tensor_nhwc(q.k, q.c, q.r, q.s);
    struct nn__cudnn_tensor ty = tensor_nhwc(q.n, q.k, q.oh, q.ow);
    struct nn__cudnn_tensor tb = tensor_nhwc(1, q.k, 1, 1);
    struct nn__conv_graph_params c = conv2d(1, 1, 1);
    struct nn__conv_graph d;
    nn__conv_graph_fwd(&d, &tx, &tw, &tb, &ty, &c, 1);
    struct nn__cudnn_graph *g;
    cr_assert_eq(graph_of(ctx, &d, &g), NN_OK, "%s", nn_last_error()->message);
    struct nn__cudnn_args args = {0};
    args.p[NN__CONV_UID_X] = dx;
    args.p[NN__CONV_UID_W] = dw;
    args.p[NN__CONV_UID_B] = b;
    args.p[NN__CONV_UID_Y] = y;
    void *ws;
    struct nn__cudnn_plan *p = run_graph(ctx, g, &args, &ws);
    host_copy(got, y, ny);
    expect_equal(got, wantl, ny, "relu(conv + b) (NHWC)");
    nn__cudnn_plan_destroy(p);
    nn__cudnn_graph_destroy(g);
    cudaFree(ws);
    cudaFree(dx);
    cudaFree(dw);
    cudaFree(y);
    cudaFree(b);
    free(x);
    free(w);
    free(xl);
    free(wl);
    free(wantl);
    free(want);
    free(got);
    nn_ctx_destroy(ctx);
}

Test(cudnn_graph, gpu_conv_backward_data_and_filter)
{
    NN_REQUIRE_GPU();
    nn_ctx *ctx = gpu_ctx(NN_MATH_STRICT_FP32);
    struct conv_case cc;
    conv_case_init(&cc, make_shape(2, 3, 9, 8, 5, 3, 2, 2, 1, 1));
    const struct shape *q = &cc.q;
    size_t nx = (size_t)(q->n * q->c * q->h * q->w), nw = (size_t)(q->k * q->c * q->r * q->s),
           most = nx > nw ? nx : nw;
    float *want = malloc(most * sizeof(float)), *got = malloc(most * sizeof(float));
    void *gx = dev_copy(NULL, nx), *gw = dev_copy(NULL, nw);
    struct nn__cudnn_args args = {0};
    args.p[NN__CONV_UID_X] = cc.dx;
    args.p[NN__CONV_UID_W] = cc.dw;
    args.p[NN__CONV_UID_DY] = cc.dy;
    args.p[NN__CONV_UID_DX] = gx;
    args.p[NN__CONV_UID_DW] = gw;
    struct nn__conv_graph d;
    struct nn__cudnn_graph *g;
    void *ws;

    nn__conv_graph_bwd_data(&d, &cc.ty, &cc.tw, &cc.tx, &cc.c);
    cr_assert_eq(graph_of(ctx, &d, &g), NN_OK, "%s", nn_last_error()->message);
    struct nn__cudnn_plan *p = run_graph(ctx, g, &args, &ws);
    host_copy(got, gx, nx);
    ref_conv_bwd_data(q, cc.y, cc.w, want);
    expect_equal(got, want, nx, "dx");
    nn__cudnn_plan_destroy(p);
    nn__cudnn_graph_destroy(g);
    cudaFree(ws);

    nn__conv_graph_bwd_filter(&d, &cc.tx, &cc.ty, &cc.tw, &cc.c);
    cr_assert_eq(graph_of(ctx, &d, &g), NN_OK, "%s", nn_last_error()->message);
    p = run_graph(ctx, g, &args, &ws);
    host_copy(got, gw, nw);
    ref_conv_bwd_filter(q, cc.x, cc.y, want);
    expect_equal(got, want, nw, "dw");
    nn__cudnn_plan_destroy(p);
    nn__cudnn_graph_destroy(g);
    cudaFree(ws);

    cudaFree(gx);
    cudaFree(gw);
    free(want);
    free(got);
    conv_case_fini(&cc);
    nn_ctx_destroy(ctx);
}

/* A 1-D convolution runs as 2-D with a unit height; the host loop sees it as h = 1. */
Test(cudnn_graph, gpu_conv1d_through_the_2d_mapping)
{
    NN_REQUIRE_GPU();
    nn_ctx *ctx = gpu_ctx(NN_MATH_STRICT_FP32);
    struct {
        int64_t n, c, k;
    } q = {2, 3, 4};
    int64_t L = 11, S = 3, pad = 1, stride = 2, dil = 2;
    int64_t ol = (L + 2 * pad - dil * (S - 1) - 1) / stride + 1;
    size_t nx = (size_t)(q.n * q.c * L), nw = (size_t)(q.k * q.c * S),
           ny = (size_t)(q.n * q.k * ol);
    float *x = malloc(nx * sizeof(float)), *w = malloc(nw * sizeof(float)),
          *want = calloc(ny, sizeof(float)), *got = malloc(ny * sizeof(float));
    fill_ints(x, nx, 5, -3, 3);
    fill_ints(w, nw, 6, -2, 2);
    for (int64_t n = 0; n < q.n; n++)
        for (int64_t k = 0; k < q.k; k++)
            for (int64_t o = 0; o < ol; o++)
                for (int64_t c = 0; c < q.c; c++)
                    for (int64_t s = 0; s < S; s++) {
                        int64_t i = o * stride - pad + s * dil;
                        if (i >= 0 && i < L)
                            want[(n * q.k + k) * ol + o] +=
                                x[(n * q.c + c) * L + i] * w[(k * q.c + c) * S + s];
                    }
    void *dx = dev_copy(x, nx), *dw = dev_copy(w, nw), *dy = dev_copy(NULL, ny);
    struct nn__cudnn_tensor tx = tensor(NN_DTYPE_F32, 3, (int64_t[]){q.n, q.c, L});
    struct nn__cudnn_tensor tw = tensor(NN_DTYPE_F32, 3, (int64_t[]){q.k, q.c, S});
    struct nn__cudnn_tensor ty = tensor(NN_DTYPE_F32, 3, (int64_t[]){q.n, q.k, ol});
    struct nn__conv_graph_params c = {.spatial_rank = 1,
                                      .stride = {stride},
                                      .dilation = {dil},
                                      .pre_pad = {pad},
                                      .post_pad = {pad},
                                      .mode = NN__CONV_GRAPH_XCORR,
                                      .compute = NN_DTYPE_F32};
    struct nn__conv_graph d;
    nn__conv_graph_fwd(&d, &tx, &tw, NULL, &ty, &c, 0);
    struct nn__cudnn_graph *g;
    cr_assert_eq(graph_of(ctx, &d, &g), NN_OK, "%s", nn_last_error()->message);
    struct nn__cudnn_args args = {0};
    args.p[NN__CONV_UID_X] = dx;
    args.p[NN__CONV_UID_W] = dw;
    args.p[NN__CONV_UID_Y] = dy;
    void *ws;
    struct nn__cudnn_plan *p = run_graph(ctx, g, &args, &ws);
    host_copy(got, dy, ny);
    expect_equal(got, want, ny, "y (1-D)");
    nn__cudnn_plan_destroy(p);
    nn__cudnn_graph_destroy(g);
    cudaFree(ws);
    cudaFree(dx);
    cudaFree(dw);
    cudaFree(dy);
    free(x);
    free(w);
    free(want);
    free(got);
    nn_ctx_destroy(ctx);
}

/* nn_conv_workspace_size(): 0 on the reference backend, its checks, and on a GPU the bytes it
 * gives against what the pass then really takes (counted by a user allocator, which sees every
 * device allocation at its requested size), with the call finding the plan the query cached, in
 * NCHW and channels-last; a query of a live plan takes no device memory. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "conv/conv_internal.h"
#include "gpu.h"
#include "fixture.h"
#include "peak_alloc.h"
#include "nn_config.h"
#include "nnprim/nnprim.h"

#define OK(call) cr_assert_eq((call), NN_OK, "%s: %s", #call, nn_last_error()->message)

Test(conv_workspace, reference_takes_no_pool_memory)
{
    nn_ctx *r = nn_test_ctx(NN_BACKEND_REF);
    nn_conv_params p;
    OK(nn_conv_params_default(&p, 2));
    p.activation = NN_ACTIVATION_RELU;
    nn_tensor x = nn_test_ints(r, NN_DTYPE_F32, 4, (int64_t[]){2, 3, 8, 8});
    nn_tensor w = nn_test_ints(r, NN_DTYPE_F32, 4, (int64_t[]){4, 3, 3, 3});
    nn_tensor b = nn_test_ints(r, NN_DTYPE_F32, 1, (int64_t[]){4});
    for (int pass = 0; pass < 4; pass++) {
        size_t n = 77;
        OK(nn_conv_workspace_size(r, &p, &x, &w, &b, (nn_conv_pass)pass, 0, &n));
        cr_expect_eq(n, 0, "pass %d: %zu", pass, n);
    }
    nn_tensor *ts[] = {&x, &w, &b};
    for (int i = 0; i < 3; i++)
        OK(nn_tensor_free(r, ts[i]));
    nn_ctx_destroy(r);
}

Test(conv_workspace, checks_its_arguments)
{
    nn_ctx *r = nn_test_ctx(NN_BACKEND_REF);
    nn_conv_params p;
    OK(nn_conv_params_default(&p, 2));
    nn_tensor x = nn_test_ints(r, NN_DTYPE_F32, 4, (int64_t[]){2, 3, 8, 8});
    nn_tensor w = nn_test_ints(r, NN_DTYPE_F32, 4, (int64_t[]){4, 3, 3, 3});
    nn_tensor w5 = nn_test_ints(r, NN_DTYPE_F32, 4, (int64_t[]){4, 2, 3, 3});
    size_t n = 5;
    struct {
        nn_status st;
        const char *text;
    } want[] = {
        {NN_E_INVALID_ARG, "nn_conv_workspace_size: ctx must not be NULL"},
        {NN_E_INVALID_ARG, "nn_conv_workspace_size: bytes must not be NULL"},
        {NN_E_INVALID_ARG, "nn_conv_workspace_size: p (the parameters) must not be NULL"},
        {NN_E_INVALID_ARG, "nn_conv_workspace_size: pass must be NN_CONV_PASS_FORWARD (0)"},
        {NN_E_INVALID_ARG, "nn_conv_workspace_size: x must not be NULL"},
        {NN_E_SHAPE, "nn_conv_workspace_size: w.dims[1] (input channels per group)"},
    };
    for (int i = 0; i < 6; i++) {
        nn_status st;
        switch (i) {
        case 0:
            st = nn_conv_workspace_size(NULL, &p, &x, &w, NULL, NN_CONV_PASS_FORWARD, 0, &n);
            break;
        case 1:
            st = nn_conv_workspace_size(r, &p, &x, &w, NULL, NN_CONV_PASS_FORWARD, 0, NULL);
            break;
        case 2:
            st = nn_conv_workspace_size(r, NULL, &x, &w, NULL, NN_CONV_PASS_FORWARD, 0, &n);
            break;
        case 3: st = nn_conv_workspace_size(r, &p, &x, &w, NULL, (nn_conv_pass)4, 0, &n); break;
        case 4:
            st = nn_conv_workspace_size(r, &p, NULL, &w, NULL, NN_CONV_PASS_FORWARD, 0, &n);
            break;
        default:
            st = nn_conv_workspace_size(r, &p, &x, &w5, NULL, NN_CONV_PASS_BACKWARD_DATA, 0, &n);
        }
        cr_expect_eq(st, want[i].st, "case %d: %d", i, (int)st);
        cr_expect(strstr(nn_last_error()->message, want[i].text), "case %d: %s", i,
                  nn_last_error()->message);
    }
    cr_expect_eq(n, 5, "bytes untouched on failure");
    nn_tensor *ts[] = {&x, &w, &w5};
    for (int i = 0; i < 3; i++)
        OK(nn_tensor_free(r, ts[i]));
    nn_ctx_destroy(r);
}

/* t described channels-last (NHWC, KRSC for a filter): the same storage, other strides. */
static void to_channels_last(nn_tensor *t)
{
    nn__conv_layout_strides(t->rank, t->dims, 1, t->strides);
}

Test(conv_workspace, reference_takes_channels_last_tensors)
{
    nn_ctx *r = nn_test_ctx(NN_BACKEND_REF);
    nn_conv_params p;
    OK(nn_conv_params_default(&p, 2));
    nn_tensor x = nn_test_ints(r, NN_DTYPE_F32, 4, (int64_t[]){2, 3, 8, 8});
    nn_tensor w = nn_test_ints(r, NN_DTYPE_F32, 4, (int64_t[]){4, 3, 3, 3});
    to_channels_last(&x);
    for (int pass = 0; pass < 4; pass++) {
        size_t n = 77;
        OK(nn_conv_workspace_size(r, &p, &x, &w, NULL, (nn_conv_pass)pass, 0, &n));
        cr_expect_eq(n, 0, "x channels-last, pass %d: %zu", pass, n);
        to_channels_last(&w);
        n = 77;
        OK(nn_conv_workspace_size(r, &p, &x, &w, NULL, (nn_conv_pass)pass, 0, &n));
        cr_expect_eq(n, 0, "x and w channels-last, pass %d: %zu", pass, n);
        nn_contiguous_strides(w.rank, w.dims, w.strides);
    }
    /* neither layout: W and H swapped */
    x.strides[2] = 3;
    x.strides[3] = 3 * 8;
    size_t n = 5;
    cr_expect_eq(nn_conv_workspace_size(r, &p, &x, &w, NULL, NN_CONV_PASS_FORWARD, 0, &n),
                 NN_E_UNSUPPORTED);
    cr_expect(strstr(nn_last_error()->message, "nn_conv_workspace_size: x must be fully packed"),
              "%s", nn_last_error()->message);
    cr_expect_eq(n, 5, "bytes untouched on failure");
    nn_contiguous_strides(x.rank, x.dims, x.strides);
    OK(nn_tensor_free(r, &x));
    OK(nn_tensor_free(r, &w));
    nn_ctx_destroy(r);
}

Test(conv_workspace, overflowing_shapes_are_refused)
{
    nn_ctx *r = nn_test_ctx(NN_BACKEND_REF);
    nn_conv_params p;
    OK(nn_conv_params_default(&p, 2));
    p.dilation[1] = INT64_MAX / 2 + 1; /* times the filter's 3 - 1 overflows */
    nn_tensor x = nn_test_ints(r, NN_DTYPE_F32, 4, (int64_t[]){2, 3, 8, 8});
    nn_tensor w = nn_test_ints(r, NN_DTYPE_F32, 4, (int64_t[]){4, 3, 3, 3});
    size_t n = 5;
    cr_expect_eq(nn_conv_workspace_size(r, &p, &x, &w, NULL, NN_CONV_PASS_BACKWARD_DATA, 0, &n),
                 NN_E_OVERFLOW);
    cr_expect(strstr(nn_last_error()->message,
                     "nn_conv_workspace_size: spatial dim 1: the dilated filter size"),
              "%s", nn_last_error()->message);
    cr_expect_eq(n, 5, "bytes untouched on failure");
    OK(nn_tensor_free(r, &x));
    OK(nn_tensor_free(r, &w));
    nn_ctx_destroy(r);
}

/* The problem nn_conv_workspace_size() resolves for x and w (2-D, no padding unless pad). */
static struct nn__conv_problem problem_of(const nn_tensor *x, const nn_tensor *w, int64_t pad)
{
    nn_conv_params p;
    OK(nn_conv_params_default(&p, 2));
    p.pad_lo[0] = p.pad_lo[1] = p.pad_hi[0] = p.pad_hi[1] = pad;
    int64_t yd[4];
    OK(nn_conv_output_shape(&p, 4, x->dims, w->dims, yd));
    struct nn__conv_problem q;
    memset(&q, 0, sizeof q);
    q.nsp = 2;
    q.n = x->dims[0];
    q.c = x->dims[1];
    q.k = w->dims[0];
    q.groups = 1;
    for (int i = 0; i < 2; i++) {
        q.in[i] = x->dims[2 + i];
        q.filt[i] = w->dims[2 + i];
        q.out[i] = yd[2 + i];
        q.stride[i] = q.dilation[i] = 1;
        q.pad_lo[i] = q.pad_hi[i] = pad;
    }
    q.dtype = x->dtype;
    return q;
}

/* Each pass's tensors described as the call's: y, dy, dx and dw (no data) channels-last when
 * want_cl (else NCHW), the roles the call has, and which are channels-last (given_cl: of x, w). */
static void expect_query(const nn_tensor *x, const nn_tensor *w, int64_t pad, int want_cl,
                         unsigned given_cl, const char *what)
{
    static const unsigned roles[] = {
        NN__CONV_ROLE_X | NN__CONV_ROLE_W | NN__CONV_ROLE_Y,
        NN__CONV_ROLE_X | NN__CONV_ROLE_W | NN__CONV_ROLE_DY | NN__CONV_ROLE_DX,
        NN__CONV_ROLE_X | NN__CONV_ROLE_W | NN__CONV_ROLE_DY | NN__CONV_ROLE_DW,
        NN__CONV_ROLE_X | NN__CONV_ROLE_W | NN__CONV_ROLE_DY,
    };
    for (int pass = 0; pass < 4; pass++) {
        struct nn__conv_problem p = problem_of(x, w, pad);
        struct nn__conv_query q;
        nn__conv_describe_query(&p, (nn_conv_pass)pass, x, w, NULL, &q);
        cr_expect_eq(p.roles, roles[pass], "%s pass %d: roles 0x%x", what, pass, p.roles);
        unsigned nhwc =
            (want_cl ? roles[pass] & ~(NN__CONV_ROLE_X | NN__CONV_ROLE_W) : 0u) | given_cl;
        cr_expect_eq(p.nhwc, nhwc, "%s pass %d: nhwc 0x%x", what, pass, p.nhwc);
        cr_expect_eq(q.x.data, x->data, "%s pass %d: x is the caller's", what, pass);
        cr_expect_eq(q.w.data, w->data, "%s pass %d: w is the caller's", what, pass);
        const nn_tensor *unseen[] = {&q.y, &q.dy, &q.dx, &q.dw};
        const char *names[] = {"y", "dy", "dx", "dw"};
        const unsigned role[] = {NN__CONV_ROLE_Y, NN__CONV_ROLE_DY, NN__CONV_ROLE_DX,
                                 NN__CONV_ROLE_DW};
        const int64_t *dims[] = {NULL, NULL, x->dims, w->dims};
        for (int i = 0; i < 4; i++) {
            const nn_tensor *t = unseen[i];
            if (!(roles[pass] & role[i])) {
                cr_expect_eq(t->rank, 0, "%s pass %d: %s is not the pass's", what, pass, names[i]);
                continue;
            }
            cr_expect_null(t->data, "%s pass %d: %s has data", what, pass, names[i]);
            cr_expect_eq(t->dtype, x->dtype);
            cr_expect_eq(t->space, x->space);
            int64_t d[4] = {p.n, p.k, p.out[0], p.out[1]}, st[4];
            if (dims[i]) memcpy(d, dims[i], sizeof d);
            cr_expect_arr_eq(t->dims, d, sizeof d, "%s pass %d: %s dims", what, pass, names[i]);
            nn__conv_layout_strides(4, d, want_cl, st);
            cr_expect_arr_eq(t->strides, st, sizeof st, "%s pass %d: %s strides", what, pass,
                             names[i]);
        }
    }
}

/* The tensors the query is not given follow x and w: channels-last when either is channels-last
 * only, else NCHW (also when x and w are both layouts at once). */
Test(conv_workspace, query_describes_the_calls_layouts)
{
    nn_ctx *r = nn_test_ctx(NN_BACKEND_REF);
    nn_tensor x = nn_test_ints(r, NN_DTYPE_F32, 4, (int64_t[]){2, 3, 8, 8});
    nn_tensor w = nn_test_ints(r, NN_DTYPE_F32, 4, (int64_t[]){4, 3, 3, 3});
    expect_query(&x, &w, 0, 0, 0, "NCHW");
    to_channels_last(&x);
    expect_query(&x, &w, 0, 1, NN__CONV_ROLE_X, "x NHWC, w KCRS");
    to_channels_last(&w);
    expect_query(&x, &w, 0, 1, NN__CONV_ROLE_X | NN__CONV_ROLE_W, "x NHWC, w KRSC");
    /* a mixed call keeps x's NCHW and describes the others channels-last, as w */
    nn_contiguous_strides(x.rank, x.dims, x.strides);
    expect_query(&x, &w, 0, 1, NN__CONV_ROLE_W, "x NCHW, w KRSC");
    nn_tensor x1 = nn_test_ints(r, NN_DTYPE_F32, 4, (int64_t[]){2, 1, 8, 8});
    nn_tensor w1 = nn_test_ints(r, NN_DTYPE_F32, 4, (int64_t[]){4, 1, 3, 3});
    expect_query(&x1, &w1, 0, 0, 0, "C = 1, both layouts at once");
    /* x is both layouts (1 x 1 spatial), w channels-last only: all channels-last */
    nn_tensor xs = nn_test_ints(r, NN_DTYPE_F32, 4, (int64_t[]){2, 3, 1, 1});
    expect_query(&xs, &w, 1, 1, NN__CONV_ROLE_X | NN__CONV_ROLE_W, "x 1x1, w KRSC");
    nn_tensor *ts[] = {&x, &w, &x1, &w1, &xs};
    for (int i = 0; i < 5; i++)
        OK(nn_tensor_free(r, ts[i]));
    nn_ctx_destroy(r);
}

/* ---------------------------------------------------------------------------------------------
 * GPU: the query against a counting allocator
 */

#if NN_HAVE_CUDA
/* run_pass() flags: the call's peak must equal the query (not only stay within it); cuDNN may
 * refuse the problem (NN_E_UNSUPPORTED), the query and the call alike. */
enum { RUN_EXACT = 1, RUN_MAY_REFUSE = 2 };

/* The call of pass: the forward, or the backward through a pullback made first. */
static nn_status call_pass(nn_ctx *g, const nn_conv_params *p, const nn_tensor *x,
                           const nn_tensor *w, const nn_tensor *b, nn_tensor *y, nn_tensor *dy,
                           nn_tensor *dx, nn_tensor *dw, nn_tensor *db, nn_conv_pass pass,
                           nn_conv_pullback **pb)
{
    switch (pass) {
    case NN_CONV_PASS_FORWARD: return nn_conv_forward(g, p, x, w, b, y, NULL);
    case NN_CONV_PASS_BACKWARD_DATA: return nn_conv_backward(g, pb, dy, dx, NULL, NULL);
    case NN_CONV_PASS_BACKWARD_FILTER: return nn_conv_backward(g, pb, dy, NULL, dw, NULL);
    case NN_CONV_PASS_BACKWARD_BIAS: return nn_conv_backward(g, pb, dy, NULL, NULL, db);
    }
    return NN_E_INVALID_ARG;
}

/* The pass's peak above what was live before it. */
static void run_pass(nn_ctx *g, struct nn_test_peak *k, const nn_conv_params *p, const nn_tensor *x,
                     const nn_tensor *w, const nn_tensor *b, nn_tensor *y, nn_tensor *dy,
                     nn_tensor *dx, nn_tensor *dw, nn_tensor *db, nn_conv_pass pass,
                     const char *what, int flags)
{
    size_t q;
    nn_status qst = nn_conv_workspace_size(g, p, x, w, b, pass, 0, &q);
    nn_conv_pullback *pb = NULL;
    if ((flags & RUN_MAY_REFUSE) && qst == NN_E_UNSUPPORTED) {
        char why[NN_ERROR_MESSAGE_MAX];
        snprintf(why, sizeof why, "%s", nn_last_error()->message);
        nn_status st = NN_OK;
        if (pass != NN_CONV_PASS_FORWARD) st = nn_conv_forward(g, p, x, w, b, y, &pb);
        if (st == NN_OK) st = call_pass(g, p, x, w, b, y, dy, dx, dw, db, pass, &pb);
        cr_expect_eq(st, NN_E_UNSUPPORTED, "%s pass %d: the query refused (%s), the call said %d",
                     what, (int)pass, why, (int)st);
        OK(nn_conv_pullback_free(&pb));
        cr_log_info("%s pass %d: refused by cuDNN, query and call: %s", what, (int)pass, why);
        return;
    }
    OK(qst);
    if (pass != NN_CONV_PASS_FORWARD) OK(nn_conv_forward(g, p, x, w, b, y, &pb));
    nn_plan_cache_stats before, after;
    OK(nn_plan_cache_get_stats(g, &before));
    long base = nn_test_peak_mark(k);
    OK(call_pass(g, p, x, w, b, y, dy, dx, dw, db, pass, &pb));
    OK(nn_plan_cache_get_stats(g, &after));
    long took = nn_test_peak_since(k, base);
    cr_expect(took >= 0 && (size_t)took <= q,
              "%s pass %d: the call took %ld bytes, the query said %zu", what, (int)pass, took, q);
    if (flags & RUN_EXACT)
        cr_expect_eq((size_t)took, q,
                     "%s pass %d: the call's peak %ld bytes is not the query's %zu", what,
                     (int)pass, took, q);
    cr_expect_eq(after.misses, before.misses,
                 "%s pass %d: the call missed the plan the query built", what, (int)pass);
    cr_log_info("%s pass %d: query %zu bytes, call peak %ld", what, (int)pass, q, took);
}

/* Every pass of f32, f16 and bf16, with and without relu, in g, against what the calls take: a
 * 2-D convolution with padding 1, every tensor channels-last (the filter KRSC) when
 * channels_last. */
static void query_every_pass(nn_ctx *g, struct nn_test_peak *k, int channels_last, int flags)
{
    const nn_dtype types[] = {NN_DTYPE_F32, NN_DTYPE_F16, NN_DTYPE_BF16};
    for (int t = 0; t < 3; t++)
        for (int relu = 0; relu < 2; relu++) {
            nn_conv_params p;
            OK(nn_conv_params_default(&p, 2));
            p.pad_lo[0] = p.pad_lo[1] = p.pad_hi[0] = p.pad_hi[1] = 1;
            p.activation = relu ? NN_ACTIVATION_RELU : NN_ACTIVATION_IDENTITY;
            nn_dtype dt = types[t];
            const int64_t xd[] = {4, 16, 20, 20}, wd[] = {32, 16, 3, 3}, yd[] = {4, 32, 20, 20};
            nn_tensor x = nn_test_ints(g, dt, 4, xd), w = nn_test_ints(g, dt, 4, wd);
            nn_tensor b = nn_test_ints(g, dt, 1, (int64_t[]){32}), y = nn_test_ints(g, dt, 4, yd);
            nn_tensor dy = nn_test_ints(g, dt, 4, yd), dx = nn_test_ints(g, dt, 4, xd),
                      dw = nn_test_ints(g, dt, 4, wd);
            nn_tensor db = nn_test_ints(g, dt, 1, (int64_t[]){32});
            nn_tensor *cl[] = {&x, &w, &y, &dy, &dx, &dw};
            for (int i = 0; channels_last && i < 6; i++)
                to_channels_last(cl[i]);
            char what[64];
            snprintf(what, sizeof what, "%s%s%s", channels_last ? "nhwc " : "", nn_dtype_name(dt),
                     relu ? " relu" : "");
            for (int pass = 0; pass < 4; pass++)
                run_pass(g, k, &p, &x, &w, &b, &y, &dy, &dx, &dw, &db, (nn_conv_pass)pass, what,
                         flags);
            nn_tensor *ts[] = {&x, &w, &b, &y, &dy, &dx, &dw, &db};
            for (int i = 0; i < 8; i++)
                OK(nn_tensor_free(g, ts[i]));
        }
}
#endif

Test(conv_workspace_gpu, query_covers_what_each_pass_takes)
{
    NN_REQUIRE_GPU();
#if NN_HAVE_CUDA
    struct nn_test_peak k;
    nn_test_peak_install(&k);
    nn_ctx *g = nn_test_ctx(NN_BACKEND_CUDNN);
    query_every_pass(g, &k, 0, 0);
    nn_ctx_destroy(g);
    nn_test_peak_remove();
#endif
}

/* A 3-D grouped f16 problem with asymmetric padding takes the zero-padded copy of x in its
 * filter gradient (conv_cudnn.c): the query counts the copy. */
Test(conv_workspace_gpu, query_counts_the_padded_copy)
{
    NN_REQUIRE_GPU();
#if NN_HAVE_CUDA
    struct nn_test_peak k;
    nn_test_peak_install(&k);
    nn_ctx *g = nn_test_ctx(NN_BACKEND_CUDNN);
    nn_conv_params p;
    OK(nn_conv_params_default(&p, 3));
    p.groups = 2;
    p.pad_lo[0] = 1;
    p.pad_hi[2] = 2;
    const int64_t xd[] = {1, 4, 5, 6, 7}, wd[] = {4, 2, 3, 3, 3};
    int64_t yd[5];
    OK(nn_conv_output_shape(&p, 5, xd, wd, yd));
    nn_tensor x = nn_test_ints(g, NN_DTYPE_F16, 5, xd), w = nn_test_ints(g, NN_DTYPE_F16, 5, wd);
    nn_tensor y = nn_test_ints(g, NN_DTYPE_F16, 5, yd), dy = nn_test_ints(g, NN_DTYPE_F16, 5, yd);
    nn_tensor dw = nn_test_ints(g, NN_DTYPE_F16, 5, wd);
    size_t q;
    OK(nn_conv_workspace_size(g, &p, &x, &w, NULL, NN_CONV_PASS_BACKWARD_FILTER, 0, &q));
    size_t copy = (size_t)(1 * 4 * 6 * 6 * 9) * 2; /* x padded: 5+1, 6+0, 7+2 */
    cr_expect_geq(q, copy, "the query %zu lacks the padded copy (%zu bytes)", q, copy);
    run_pass(g, &k, &p, &x, &w, NULL, &y, &dy, NULL, &dw, NULL, NN_CONV_PASS_BACKWARD_FILTER,
             "f16 3-D g2 asymmetric", 0);
    nn_tensor *ts[] = {&x, &w, &y, &dy, &dw};
    for (int i = 0; i < 5; i++)
        OK(nn_tensor_free(g, ts[i]));
    nn_ctx_destroy(g);
    nn_test_peak_remove();
#endif
}

/* A channels-last call (every tensor NHWC, the filter KRSC) takes the plan its query found and
 * cached, not an NCHW one, and exactly the pool memory the query said: the query describes y,
 * dy, dx and dw in the layout the call gives them beside channels-last x and w. f32 runs with
 * TF32 math (cuDNN's channels-last engines); a problem cuDNN refuses must be refused by both. */
Test(conv_workspace_gpu, channels_last_query_is_the_calls_peak)
{
    NN_REQUIRE_GPU();
#if NN_HAVE_CUDA
    struct nn_test_peak k;
    nn_test_peak_install(&k);
    nn_ctx *g = nn_test_ctx_math(NN_BACKEND_CUDNN, NN_MATH_TF32);
    query_every_pass(g, &k, 1, RUN_EXACT | RUN_MAY_REFUSE);
    nn_ctx_destroy(g);
    nn_test_peak_remove();
#endif
}

/* Once a pass's plans are live (cached by its call, or by a first query), the query takes no
 * device memory and counts no plan-cache miss; the first query of an uncached forward stands
 * scratch in for y while it builds the plan. In f32, f16 and bf16: bf16's bias gradient is a plan
 * over a tensor of ones, both kept by the call. */
#if NN_HAVE_CUDA
static void cached_query(nn_ctx *g, struct nn_test_peak *k, nn_dtype dt)
{
    const char *name = nn_dtype_name(dt);
    nn_conv_params p;
    OK(nn_conv_params_default(&p, 2));
    p.pad_lo[0] = p.pad_lo[1] = p.pad_hi[0] = p.pad_hi[1] = 1;
    p.activation = NN_ACTIVATION_RELU;
    const int64_t xd[] = {2, 8, 12, 12}, wd[] = {16, 8, 3, 3}, yd[] = {2, 16, 12, 12};
    nn_tensor x = nn_test_ints(g, dt, 4, xd), w = nn_test_ints(g, dt, 4, wd);
    nn_tensor b = nn_test_ints(g, dt, 1, (int64_t[]){16}), y = nn_test_ints(g, dt, 4, yd);
    nn_tensor dy = nn_test_ints(g, dt, 4, yd), dx = nn_test_ints(g, dt, 4, xd);
    nn_tensor dw = nn_test_ints(g, dt, 4, wd), db = nn_test_ints(g, dt, 1, (int64_t[]){16});
    size_t q, q2;
    long base = nn_test_peak_mark(k);
    OK(nn_conv_workspace_size(g, &p, &x, &w, &b, NN_CONV_PASS_FORWARD, 0, &q));
    long first = nn_test_peak_since(k, base);
    size_t y_bytes = (size_t)(2 * 16 * 12 * 12) * nn_dtype_size(dt);
    cr_expect_geq((size_t)first, y_bytes, "%s: the first query took %ld bytes, y's stand-in is %zu",
                  name, first, y_bytes);
    nn_conv_pullback *pb = NULL;
    OK(nn_conv_forward(g, &p, &x, &w, &b, &y, &pb));
    OK(nn_conv_backward(g, &pb, &dy, &dx, &dw, &db));
    for (int pass = 0; pass < 4; pass++) {
        for (int round = 0; round < 2; round++) {
            nn_plan_cache_stats before, after;
            OK(nn_plan_cache_get_stats(g, &before));
            base = nn_test_peak_mark(k);
            OK(nn_conv_workspace_size(g, &p, &x, &w, &b, (nn_conv_pass)pass, 0, round ? &q2 : &q));
            long took = nn_test_peak_since(k, base);
            OK(nn_plan_cache_get_stats(g, &after));
            cr_expect_eq(took, 0, "%s pass %d round %d: a query of a live plan took %ld bytes",
                         name, pass, round, took);
            cr_expect_eq(after.misses, before.misses,
                         "%s pass %d round %d: a query of a live plan counted a miss", name, pass,
                         round);
        }
        cr_expect_eq(q, q2, "%s pass %d: the same query said %zu, then %zu", name, pass, q, q2);
    }
    nn_tensor *ts[] = {&x, &w, &b, &y, &dy, &dx, &dw, &db};
    for (int i = 0; i < 8; i++)
        OK(nn_tensor_free(g, ts[i]));
}

/* A bf16 tensor's elements as floats, read back to the host. */
static void bf16_to_host(nn_ctx *g, nn_ctx *r, const nn_tensor *d, float *out)
{
    nn_tensor h;
    OK(nn_tensor_empty(r, NN_DTYPE_BF16, d->rank, d->dims, &h));
    OK(nn_tensor_copy(g, &h, d));
    const uint16_t *v = h.data;
    for (int64_t i = 0; i < nn_tensor_numel(d); i++) {
        uint32_t bits = (uint32_t)v[i] << 16;
        memcpy(&out[i], &bits, sizeof bits);
    }
    OK(nn_tensor_free(r, &h));
}
#endif

Test(conv_workspace_gpu, a_cached_query_takes_no_device_memory)
{
    NN_REQUIRE_GPU();
#if NN_HAVE_CUDA
    struct nn_test_peak k;
    nn_test_peak_install(&k);
    nn_ctx *g = nn_test_ctx(NN_BACKEND_CUDNN);
    const nn_dtype types[] = {NN_DTYPE_F32, NN_DTYPE_F16, NN_DTYPE_BF16};
    for (int t = 0; t < 3; t++)
        cached_query(g, &k, types[t]);
    nn_ctx_destroy(g);
    nn_test_peak_remove();
#endif
}

/* bf16's bias gradient sums dy through a tensor of ones (conv_cudnn.c), made once per element
 * count and kept in the plan cache: the query makes it, so the calls after it take no more than
 * the query says (their plan's workspace), round after round. In a cache of one entry, where
 * finding the plan evicts the ones the call holds, db is still the sum of dy (exact: small
 * integers). */
Test(conv_workspace_gpu, bf16_bias_ones_are_kept)
{
    NN_REQUIRE_GPU();
#if NN_HAVE_CUDA
    struct nn_test_peak k;
    nn_test_peak_install(&k);
    nn_ctx *r = nn_test_ctx(NN_BACKEND_REF);
    for (int one = 0; one < 2; one++) {
        nn_settings s;
        OK(nn_settings_from_env(&s));
        s.backend = NN_BACKEND_CUDNN;
        if (one) s.plan_cache_capacity = 1;
        nn_ctx *g = NULL;
        OK(nn_ctx_create(&g, &s));
        nn_conv_params p;
        OK(nn_conv_params_default(&p, 2));
        const int64_t xd[] = {2, 3, 6, 6}, wd[] = {4, 3, 1, 1}, yd[] = {2, 4, 6, 6};
        nn_tensor x = nn_test_ints(g, NN_DTYPE_BF16, 4, xd);
        nn_tensor w = nn_test_ints(g, NN_DTYPE_BF16, 4, wd);
        nn_tensor dy = nn_test_ints(g, NN_DTYPE_BF16, 4, yd);
        nn_tensor db = nn_test_ints(g, NN_DTYPE_BF16, 1, (int64_t[]){4});
        float h[2 * 4 * 6 * 6], got[4];
        bf16_to_host(g, r, &dy, h);
        for (int round = 0; round < 3; round++) {
            size_t q;
            OK(nn_conv_workspace_size(g, &p, &x, &w, NULL, NN_CONV_PASS_BACKWARD_BIAS, 0, &q));
            long base = nn_test_peak_mark(&k);
            OK(nn_conv_backward_bias(g, &p, &dy, &db, 0));
            long took = nn_test_peak_since(&k, base);
            if (!one)
                cr_expect(took >= 0 && (size_t)took <= q,
                          "round %d: the call took %ld bytes, the query said %zu", round, took, q);
            bf16_to_host(g, r, &db, got);
            for (int c = 0; c < 4; c++) {
                float want = 0;
                for (int n = 0; n < 2; n++)
                    for (int i = 0; i < 36; i++)
                        want += h[(n * 4 + c) * 36 + i];
                cr_expect_eq(got[c], want, "capacity %s round %d: db[%d] = %g, dy's sum is %g",
                             one ? "1" : "default", round, c, (double)got[c], (double)want);
            }
        }
        nn_tensor *ts[] = {&x, &w, &dy, &db};
        for (int i = 0; i < 4; i++)
            OK(nn_tensor_free(g, ts[i]));
        nn_ctx_destroy(g);
    }
    nn_ctx_destroy(r);
    nn_test_peak_remove();
#endif
}

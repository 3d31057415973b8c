/* nn_conv_workspace_size(): 0 on the reference backend, its checks, and on a GPU the bytes it
 * gives against what the pass then really takes (counted by a user allocator, which sees every
 * device allocation at its requested size), with the call finding the plan the query cached. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "gpu.h"
#include "peak_alloc.h"
#include "nn_config.h"
#include "nnprim/nnprim.h"

#define OK(call) cr_assert_eq((call), NN_OK, "%s: %s", #call, nn_last_error()->message)

static nn_ctx *ctx_of(nn_backend b)
{
    nn_settings s;
    nn_default_settings(&s);
    s.backend = b;
    nn_ctx *ctx = NULL;
    OK(nn_ctx_create(&ctx, &s));
    return ctx;
}

static nn_tensor mk(nn_ctx *c, nn_dtype dt, int rank, const int64_t *dims)
{
    nn_tensor t;
    OK(nn_tensor_empty(c, dt, rank, dims, &t));
    OK(nn_tensor_fill_ints(c, &t, -2, 2, (uint64_t)rank + (uint64_t)dims[0]));
    return t;
}

Test(conv_workspace, reference_takes_no_pool_memory)
{
    nn_ctx *r = ctx_of(NN_BACKEND_REF);
    nn_conv_params p;
    OK(nn_conv_params_default(&p, 2));
    p.activation = NN_ACTIVATION_RELU;
    nn_tensor x = mk(r, NN_DTYPE_F32, 4, (int64_t[]){2, 3, 8, 8});
    nn_tensor w = mk(r, NN_DTYPE_F32, 4, (int64_t[]){4, 3, 3, 3});
    nn_tensor b = mk(r, NN_DTYPE_F32, 1, (int64_t[]){4});
    for (int pass = 0; pass < 4; pass++) {
        size_t n = 77;
        OK(nn_conv_workspace_size(r, &p, &x, &w, &b, (nn_conv_pass)pass, &n));
        cr_expect_eq(n, 0, "pass %d: %zu", pass, n);
    }
    nn_tensor *ts[] = {&x, &w, &b};
    for (int i = 0; i < 3; i++)
        OK(nn_tensor_free(r, ts[i]));
    nn_ctx_destroy(r);
}

Test(conv_workspace, checks_its_arguments)
{
    nn_ctx *r = ctx_of(NN_BACKEND_REF);
    nn_conv_params p;
    OK(nn_conv_params_default(&p, 2));
    nn_tensor x = mk(r, NN_DTYPE_F32, 4, (int64_t[]){2, 3, 8, 8});
    nn_tensor w = mk(r, NN_DTYPE_F32, 4, (int64_t[]){4, 3, 3, 3});
    nn_tensor w5 = mk(r, NN_DTYPE_F32, 4, (int64_t[]){4, 2, 3, 3});
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
            st = nn_conv_workspace_size(NULL, &p, &x, &w, NULL, NN_CONV_PASS_FORWARD, &n);
            break;
        case 1: st = nn_conv_workspace_size(r, &p, &x, &w, NULL, NN_CONV_PASS_FORWARD, NULL); break;
        case 2: st = nn_conv_workspace_size(r, NULL, &x, &w, NULL, NN_CONV_PASS_FORWARD, &n); break;
        case 3: st = nn_conv_workspace_size(r, &p, &x, &w, NULL, (nn_conv_pass)4, &n); break;
        case 4: st = nn_conv_workspace_size(r, &p, NULL, &w, NULL, NN_CONV_PASS_FORWARD, &n); break;
        default: st = nn_conv_workspace_size(r, &p, &x, &w5, NULL, NN_CONV_PASS_BACKWARD_DATA, &n);
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

/* ---------------------------------------------------------------------------------------------
 * GPU: the query against a counting allocator
 */

#if NN_HAVE_CUDA
/* The pass's peak above what was live before it. */
static void run_pass(nn_ctx *g, struct nn_test_peak *k, const nn_conv_params *p, const nn_tensor *x,
                     const nn_tensor *w, const nn_tensor *b, nn_tensor *y, nn_tensor *dy,
                     nn_tensor *dx, nn_tensor *dw, nn_tensor *db, nn_conv_pass pass,
                     const char *what)
{
    size_t q;
    OK(nn_conv_workspace_size(g, p, x, w, b, pass, &q));
    nn_conv_pullback *pb = NULL;
    if (pass != NN_CONV_PASS_FORWARD) OK(nn_conv_forward(g, p, x, w, b, y, &pb));
    nn_plan_cache_stats before, after;
    OK(nn_plan_cache_get_stats(g, &before));
    long base = nn_test_peak_mark(k);
    switch (pass) {
    case NN_CONV_PASS_FORWARD: OK(nn_conv_forward(g, p, x, w, b, y, NULL)); break;
    case NN_CONV_PASS_BACKWARD_DATA: OK(nn_conv_backward(g, &pb, dy, dx, NULL, NULL)); break;
    case NN_CONV_PASS_BACKWARD_FILTER: OK(nn_conv_backward(g, &pb, dy, NULL, dw, NULL)); break;
    case NN_CONV_PASS_BACKWARD_BIAS: OK(nn_conv_backward(g, &pb, dy, NULL, NULL, db)); break;
    }
    OK(nn_plan_cache_get_stats(g, &after));
    long took = nn_test_peak_since(k, base);
    cr_expect(took >= 0 && (size_t)took <= q,
              "%s pass %d: the call took %ld bytes, the query said %zu", what, (int)pass, took, q);
    cr_expect_eq(after.misses, before.misses,
                 "%s pass %d: the call missed the plan the query built", what, (int)pass);
    cr_log_info("%s pass %d: query %zu bytes, call peak %ld", what, (int)pass, q, took);
}
#endif

Test(conv_workspace_gpu, query_covers_what_each_pass_takes)
{
    NN_REQUIRE_GPU();
#if NN_HAVE_CUDA
    struct nn_test_peak k = {0, 0};
    nn_mem_allocator a = nn_test_peak_allocator(&k);
    OK(nn_mem_set_allocator(0, &a));
    nn_ctx *g = ctx_of(NN_BACKEND_CUDNN);
    const nn_dtype types[] = {NN_DTYPE_F32, NN_DTYPE_F16, NN_DTYPE_BF16};
    for (int t = 0; t < 3; t++)
        for (int relu = 0; relu < 2; relu++) {
            nn_conv_params p;
            OK(nn_conv_params_default(&p, 2));
            p.pad_lo[0] = p.pad_lo[1] = p.pad_hi[0] = p.pad_hi[1] = 1;
            p.activation = relu ? NN_ACTIVATION_RELU : NN_ACTIVATION_IDENTITY;
            nn_dtype dt = types[t];
            const int64_t xd[] = {4, 16, 20, 20}, wd[] = {32, 16, 3, 3}, yd[] = {4, 32, 20, 20};
            nn_tensor x = mk(g, dt, 4, xd), w = mk(g, dt, 4, wd);
            nn_tensor b = mk(g, dt, 1, (int64_t[]){32}), y = mk(g, dt, 4, yd);
            nn_tensor dy = mk(g, dt, 4, yd), dx = mk(g, dt, 4, xd), dw = mk(g, dt, 4, wd);
            nn_tensor db = mk(g, dt, 1, (int64_t[]){32});
            char what[64];
            snprintf(what, sizeof what, "%s%s", nn_dtype_name(dt), relu ? " relu" : "");
            for (int pass = 0; pass < 4; pass++)
                run_pass(g, &k, &p, &x, &w, &b, &y, &dy, &dx, &dw, &db, (nn_conv_pass)pass, what);
            nn_tensor *ts[] = {&x, &w, &b, &y, &dy, &dx, &dw, &db};
            for (int i = 0; i < 8; i++)
                OK(nn_tensor_free(g, ts[i]));
        }
    nn_ctx_destroy(g);
    OK(nn_mem_set_allocator(0, NULL));
#endif
}

/* A 3-D grouped f16 problem with asymmetric padding takes the zero-padded copy of x in its
 * filter gradient (conv_cudnn.c): the query counts the copy. */
Test(conv_workspace_gpu, query_counts_the_padded_copy)
{
    NN_REQUIRE_GPU();
#if NN_HAVE_CUDA
    struct nn_test_peak k = {0, 0};
    nn_mem_allocator a = nn_test_peak_allocator(&k);
    OK(nn_mem_set_allocator(0, &a));
    nn_ctx *g = ctx_of(NN_BACKEND_CUDNN);
    nn_conv_params p;
    OK(nn_conv_params_default(&p, 3));
    p.groups = 2;
    p.pad_lo[0] = 1;
    p.pad_hi[2] = 2;
    const int64_t xd[] = {1, 4, 5, 6, 7}, wd[] = {4, 2, 3, 3, 3};
    int64_t yd[5];
    OK(nn_conv_output_shape(&p, 5, xd, wd, yd));
    nn_tensor x = mk(g, NN_DTYPE_F16, 5, xd), w = mk(g, NN_DTYPE_F16, 5, wd);
    nn_tensor y = mk(g, NN_DTYPE_F16, 5, yd), dy = mk(g, NN_DTYPE_F16, 5, yd);
    nn_tensor dw = mk(g, NN_DTYPE_F16, 5, wd);
    size_t q;
    OK(nn_conv_workspace_size(g, &p, &x, &w, NULL, NN_CONV_PASS_BACKWARD_FILTER, &q));
    size_t copy = (size_t)(1 * 4 * 6 * 6 * 9) * 2; /* x padded: 5+1, 6+0, 7+2 */
    cr_expect_geq(q, copy, "the query %zu lacks the padded copy (%zu bytes)", q, copy);
    run_pass(g, &k, &p, &x, &w, NULL, &y, &dy, NULL, &dw, NULL, NN_CONV_PASS_BACKWARD_FILTER,
             "f16 3-D g2 asymmetric");
    nn_tensor *ts[] = {&x, &w, &y, &dy, &dw};
    for (int i = 0; i < 5; i++)
        OK(nn_tensor_free(g, ts[i]));
    nn_ctx_destroy(g);
    OK(nn_mem_set_allocator(0, NULL));
#endif
}

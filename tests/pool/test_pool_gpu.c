/* The cuDNN path against the reference on the same inputs: every mode x rank x dtype over several
 * window/stride/padding choices. Max pooling is compared exactly (distinct inputs: no ties;
 * integer gradients: exact sums); means to a tolerance of the dtype. Skipped without a GPU. */
#include <criterion/criterion.h>
#include <criterion/redirect.h>
#include <stdio.h>
#include <string.h>

#include "gpu.h"
#include "nnprim/nnprim.h"
#include "pool_check.h"

struct tol {
    double atol, rtol;
};

static struct tol mean_tol(nn_dtype t)
{
    switch (t) {
    case NN_DTYPE_F16: return (struct tol){1e-2, 4e-3};
    case NN_DTYPE_BF16: return (struct tol){5e-2, 1e-2};
    default: return (struct tol){1e-5, 1e-6};
    }
}

static nn_tensor to_device(nn_ctx *g, const nn_tensor *h)
{
    nn_tensor d = pc_empty(g, h->dtype, h->rank, h->dims);
    cr_assert_eq(nn_tensor_copy(g, &d, h), NN_OK, "%s", nn_last_error()->message);
    return d;
}

static nn_tensor to_host(nn_ctx *g, nn_ctx *r, const nn_tensor *d)
{
    nn_tensor h = pc_empty(r, d->dtype, d->rank, d->dims);
    cr_assert_eq(nn_tensor_copy(g, &h, d), NN_OK, "%s", nn_last_error()->message);
    return h;
}

static void expect_close(const nn_tensor *got, const nn_tensor *want, const nn_pool_params *p,
                         const nn_tensor *x, const char *what)
{
    struct tol t = p->mode == NN_POOL_MAX ? (struct tol){0, 0} : mean_tol(got->dtype);
    int64_t i;
    double e = pc_compare(got, want, t.atol, t.rtol, &i);
    cr_expect(e <= 1, "%s: %s[%lld] cudnn %.9g, reference %.9g", pc_describe(p, x), what,
              (long long)i, pc_get(got, i), pc_get(want, i));
}

/* Forward and backward on both backends. */
static void compare_case(nn_ctx *g, nn_ctx *r, const nn_pool_params *p, nn_dtype dt, int rank,
                         const int64_t *xd, uint64_t seed)
{
    int64_t yd[5];
    cr_assert_eq(nn_pool_output_shape(p, rank, xd, yd), NN_OK, "%s", nn_last_error()->message);
    nn_tensor x = pc_empty(r, dt, rank, xd), y = pc_empty(r, dt, rank, yd);
    nn_tensor dy = pc_empty(r, dt, rank, yd), dx = pc_empty(r, dt, rank, xd);
    pc_fill_distinct(&x, seed, 1, -(double)(nn_tensor_numel(&x) / 2));
    cr_assert_eq(nn_tensor_fill_ints(r, &dy, -3, 3, seed + 1), NN_OK);
    nn_pool_pullback *pb;
    cr_assert_eq(nn_pool_forward(r, p, &x, &y, &pb), NN_OK, "%s", nn_last_error()->message);
    cr_assert_eq(nn_pool_backward(r, &pb, &dy, &dx), NN_OK, "%s", nn_last_error()->message);

    nn_tensor gx = to_device(g, &x), gdy = to_device(g, &dy);
    nn_tensor gy = pc_empty(g, dt, rank, yd), gdx = pc_empty(g, dt, rank, xd);
    nn_pool_pullback *gpb;
    cr_assert_eq(nn_pool_forward(g, p, &gx, &gy, &gpb), NN_OK, "%s: %s", pc_describe(p, &x),
                 nn_last_error()->message);
    nn_tensor hy = to_host(g, r, &gy);
    cr_assert_eq(nn_pool_backward(g, &gpb, &gdy, &gdx), NN_OK, "%s: %s", pc_describe(p, &x),
                 nn_last_error()->message);
    cr_expect_null(gpb);
    nn_tensor hdx = to_host(g, r, &gdx);
    expect_close(&hy, &y, p, &x, "y");
    expect_close(&hdx, &dx, p, &x, "dx");

    nn_tensor *hosts[] = {&x, &y, &dy, &dx, &hy, &hdx}, *devs[] = {&gx, &gy, &gdy, &gdx};
    for (size_t i = 0; i < 6; i++)
        nn_tensor_free(r, hosts[i]);
    for (size_t i = 0; i < 4; i++)
        nn_tensor_free(g, devs[i]);
}

/* Inputs of at most 256 elements, so distinct integers stay exact in bf16. */
static const int64_t shapes[3][5] = {{2, 3, 11}, {2, 2, 7, 8}, {1, 2, 5, 4, 6}};

Test(pool_gpu, cudnn_matches_reference_every_mode_rank_dtype)
{
    NN_REQUIRE_GPU();
    nn_ctx *g = pc_ctx(NN_BACKEND_CUDNN), *r = pc_ctx(NN_BACKEND_REF);
    const int64_t cfg[][3] = {{2, 2, 0}, {3, 2, 1}, {3, 1, 0}, {2, 1, 1}, {3, 3, 2}, {1, 1, 0}};
    const nn_dtype types[] = {NN_DTYPE_F32, NN_DTYPE_F16, NN_DTYPE_BF16};
    uint64_t seed = 1;
    for (size_t t = 0; t < 3; t++)
        for (int mode = 0; mode < 3; mode++)
            for (int rank = 1; rank <= 3; rank++)
                for (size_t c = 0; c < sizeof cfg / sizeof cfg[0]; c++) {
                    nn_pool_params p = pc_params(rank, (nn_pool_mode)mode, cfg[c][0], cfg[c][1],
                                                 cfg[c][2], cfg[c][2]);
                    if (rank >= 2) { /* a different window and stride on the last dim */
                        p.window[rank - 1] = 2;
                        p.stride[rank - 1] = cfg[c][1] == 1 ? 2 : 1;
                        p.pad_lo[rank - 1] = p.pad_hi[rank - 1] = 0;
                    }
                    compare_case(g, r, &p, types[t], rank + 2, shapes[rank - 1], seed++);
                }
    nn_ctx_destroy(g);
    nn_ctx_destroy(r);
}

/* y, dy and dx as every-other-channel views of wider device tensors. */
Test(pool_gpu, strided_views)
{
    NN_REQUIRE_GPU();
    nn_ctx *g = pc_ctx(NN_BACKEND_CUDNN), *r = pc_ctx(NN_BACKEND_REF);
    for (int mode = 0; mode < 3; mode++) {
        nn_pool_params p = pc_params(2, (nn_pool_mode)mode, 3, 2, 1, 1);
        int64_t xd[4] = {2, 3, 9, 8}, yd[4], wide_x[4] = {2, 6, 9, 8}, wide_y[4];
        cr_assert_eq(nn_pool_output_shape(&p, 4, xd, yd), NN_OK);
        memcpy(wide_y, yd, sizeof yd);
        wide_y[1] = 6;
        nn_tensor x = pc_empty(r, NN_DTYPE_F32, 4, xd), y = pc_empty(r, NN_DTYPE_F32, 4, yd);
        nn_tensor dx = pc_empty(r, NN_DTYPE_F32, 4, xd);
        nn_tensor wdy = pc_empty(r, NN_DTYPE_F32, 4, wide_y);
        pc_fill_distinct(&x, 5, 1, -200);
        cr_assert_eq(nn_tensor_fill_ints(r, &wdy, -3, 3, 6), NN_OK);
        nn_tensor dy = wdy;
        dy.dims[1] = 3;
        dy.strides[1] *= 2;
        nn_pool_pullback *pb;
        cr_assert_eq(nn_pool_forward(r, &p, &x, &y, &pb), NN_OK);
        cr_assert_eq(nn_pool_backward(r, &pb, &dy, &dx), NN_OK);

        nn_tensor gx = to_device(g, &x), gwdy = to_device(g, &wdy);
        nn_tensor gwy = pc_empty(g, NN_DTYPE_F32, 4, wide_y);
        nn_tensor gwdx = pc_empty(g, NN_DTYPE_F32, 4, wide_x);
        nn_tensor gy = gwy, gdy = gwdy, gdx = gwdx;
        gy.dims[1] = gdy.dims[1] = gdx.dims[1] = 3;
        gy.strides[1] *= 2;
        gdy.strides[1] *= 2;
        gdx.strides[1] *= 2;
        cr_assert_eq(nn_pool_forward(g, &p, &gx, &gy, &pb), NN_OK, "%s", nn_last_error()->message);
        cr_assert_eq(nn_pool_backward(g, &pb, &gdy, &gdx), NN_OK, "%s", nn_last_error()->message);
        nn_tensor hwy = to_host(g, r, &gwy), hwdx = to_host(g, r, &gwdx);
        nn_tensor hy = hwy, hdx = hwdx;
        hy.dims[1] = hdx.dims[1] = 3;
        hy.strides[1] *= 2;
        hdx.strides[1] *= 2;
        expect_close(&hy, &y, &p, &x, "strided y");
        expect_close(&hdx, &dx, &p, &x, "strided dx");
        nn_tensor *hosts[] = {&x, &y, &dx, &wdy, &hwy, &hwdx}, *devs[] = {&gx, &gwdy, &gwy, &gwdx};
        for (size_t i = 0; i < 6; i++)
            nn_tensor_free(r, hosts[i]);
        for (size_t i = 0; i < 4; i++)
            nn_tensor_free(g, devs[i]);
    }
    nn_ctx_destroy(g);
    nn_ctx_destroy(r);
}

/* nn_pool_workspace_size counts the contiguous copies of a backward (here a strided dy and a
 * dx whose strides differ from x's, so a packed dx too), and the pool hands out that much during
 * the call, rounded to its 512-byte blocks. */
Test(pool_gpu, workspace_size_counts_the_copies)
{
    NN_REQUIRE_GPU();
    nn_ctx *g = pc_ctx(NN_BACKEND_CUDNN);
    nn_pool_params p = pc_params(2, NN_POOL_MAX, 2, 2, 0, 0);
    int64_t xd[4] = {2, 3, 8, 8}, yd[4] = {2, 3, 4, 4}, wide_x[4] = {2, 6, 8, 8},
            wide_y[4] = {2, 6, 4, 4};
    nn_tensor x = pc_empty(g, NN_DTYPE_F32, 4, xd), y = pc_empty(g, NN_DTYPE_F32, 4, yd);
    nn_tensor pdy = pc_empty(g, NN_DTYPE_F32, 4, yd), pdx = pc_empty(g, NN_DTYPE_F32, 4, xd);
    nn_tensor wdy = pc_empty(g, NN_DTYPE_F32, 4, wide_y),
              wdx = pc_empty(g, NN_DTYPE_F32, 4, wide_x);
    cr_assert_eq(nn_tensor_fill_uniform(g, &x, -1, 1, 1), NN_OK);
    cr_assert_eq(nn_tensor_fill_uniform(g, &wdy, -1, 1, 2), NN_OK);
    nn_tensor dy = wdy, dx = wdx;
    dy.dims[1] = dx.dims[1] = 3;
    dy.strides[1] *= 2;
    dx.strides[1] *= 2;
    size_t n = 1;
    cr_assert_eq(nn_pool_workspace_size(g, &p, &x, &y, &pdy, &pdx, NN_POOL_PASS_BACKWARD, &n),
                 NN_OK, "%s", nn_last_error()->message);
    cr_expect_eq(n, 0, "packed tensors: no copies");
    cr_assert_eq(nn_pool_workspace_size(g, &p, &x, &y, &dy, &dx, NN_POOL_PASS_FORWARD, &n), NN_OK);
    cr_expect_eq(n, 0, "the forward takes nothing");
    cr_assert_eq(nn_pool_workspace_size(g, &p, &x, &y, &dy, &dx, NN_POOL_PASS_BACKWARD, &n), NN_OK,
                 "%s", nn_last_error()->message);
    size_t want = (size_t)(nn_tensor_numel(&dy) + nn_tensor_numel(&dx)) * sizeof(float);
    cr_expect_eq(n, want, "copies of dy and dx: %zu bytes, the query says %zu", want, n);

    nn_settings s;
    cr_assert_eq(nn_ctx_get_settings(g, &s), NN_OK);
    nn_pool_pullback *pb;
    cr_assert_eq(nn_pool_forward(g, &p, &x, &y, &pb), NN_OK, "%s", nn_last_error()->message);
    cr_assert_eq(nn_ctx_synchronize(g), NN_OK);
    nn_mem_stats before, after;
    cr_assert_eq(nn_mem_reset_peak_stats(s.device), NN_OK);
    cr_assert_eq(nn_mem_get_stats(s.device, &before), NN_OK);
    cr_assert_eq(nn_pool_backward(g, &pb, &dy, &dx), NN_OK, "%s", nn_last_error()->message);
    cr_assert_eq(nn_mem_get_stats(s.device, &after), NN_OK);
    size_t used = after.allocated_bytes_peak - before.allocated_bytes;
    cr_expect(used >= n && used < n + 2 * 512,
              "the backward took %zu bytes of the pool at its peak; the query said %zu", used, n);
    nn_tensor *all[] = {&x, &y, &pdy, &pdx, &wdy, &wdx};
    for (size_t i = 0; i < 6; i++)
        nn_tensor_free(g, all[i]);
    nn_ctx_destroy(g);
}

Test(pool_gpu, refuses_what_legacy_cudnn_cannot_do)
{
    NN_REQUIRE_GPU();
    nn_ctx *g = pc_ctx(NN_BACKEND_CUDNN);
    nn_pool_params p = pc_params(2, NN_POOL_MAX, 3, 2, 0, 1);
    nn_tensor x = pc_empty(g, NN_DTYPE_F32, 4, (int64_t[]){1, 1, 8, 8});
    nn_tensor y = pc_empty(g, NN_DTYPE_F32, 4, (int64_t[]){1, 1, 4, 4});
    nn_pool_pullback *pb = NULL;
    cr_expect_eq(nn_pool_forward(g, &p, &x, &y, &pb), NN_E_UNSUPPORTED);
    cr_expect(strstr(nn_last_error()->message, "pad_lo[0] = 0 and pad_hi[0] = 1"), "%s",
              nn_last_error()->message);
    cr_expect_null(pb);
    nn_tensor x64 = pc_empty(g, NN_DTYPE_F64, 4, x.dims),
              y64 = pc_empty(g, NN_DTYPE_F64, 4, y.dims);
    p = pc_params(2, NN_POOL_MAX, 2, 2, 0, 0);
    cr_expect_eq(nn_pool_forward(g, &p, &x64, &y64, NULL), NN_OK, "f64 runs on cuDNN: %s",
                 nn_last_error()->message);
    nn_tensor *ts[] = {&x, &y, &x64, &y64};
    for (size_t i = 0; i < 4; i++)
        nn_tensor_free(g, ts[i]);
    nn_ctx_destroy(g);
}

Test(pool_gpu, verbose_line_says_cudnn_legacy, .init = cr_redirect_stderr)
{
    NN_REQUIRE_GPU();
    nn_settings s;
    nn_settings_from_env(&s);
    s.backend = NN_BACKEND_CUDNN;
    s.verbose = 1;
    nn_ctx *g;
    cr_assert_eq(nn_ctx_create(&g, &s), NN_OK, "%s", nn_last_error()->message);
    nn_pool_params p = pc_params(1, NN_POOL_MAX, 2, 2, 0, 0);
    nn_tensor x = pc_empty(g, NN_DTYPE_F16, 3, (int64_t[]){1, 2, 8});
    nn_tensor y = pc_empty(g, NN_DTYPE_F16, 3, (int64_t[]){1, 2, 4});
    cr_assert_eq(nn_tensor_fill_constant(g, &x, 1), NN_OK);
    cr_assert_eq(nn_pool_forward(g, &p, &x, &y, NULL), NN_OK, "%s", nn_last_error()->message);
    fflush(stderr);
    char line[512] = "";
    FILE *f = cr_get_redirected_stderr();
    int found = 0;
    while (fgets(line, sizeof line, f))
        found |= strstr(line, "nnprim_verbose,pool_forward,cudnn,cudnn-legacy,-,n1c2w8 max win2 "
                              "stride2 pad0 f16,") != NULL;
    cr_expect(found, "no cudnn-legacy verbose line; last line: %s", line);
    nn_tensor_free(g, &x);
    nn_tensor_free(g, &y);
    nn_ctx_destroy(g);
}

/* The core layer on a real device. Every test skips, saying why, where there is no GPU. */
#include <criterion/criterion.h>
#include <criterion/redirect.h>
#include <stdio.h>
#include <string.h>

#include "gpu.h"
#include "nnprim/nnprim.h"

static nn_ctx *make_ctx(nn_backend backend, int verbose)
{
    nn_settings s;
    nn_settings_from_env(&s);
    s.backend = backend;
    s.verbose = verbose;
    nn_ctx *ctx;
    cr_assert_eq(nn_ctx_create(&ctx, &s), NN_OK, "%s", nn_last_error()->message);
    return ctx;
}

Test(gpu_core, device_info)
{
    NN_REQUIRE_GPU();
    nn_device_info d;
    cr_assert_eq(nn_device_get_info(0, &d), NN_OK);
    cr_expect_gt(strlen(d.name), 0);
    cr_expect_geq(d.cc_major, 7);
    cr_expect_gt(d.sm_count, 0);
    cr_expect_gt(d.total_memory, (size_t)1 << 30);
    cr_expect_geq(nn_cudnn_runtime_version(), 90000);
}

Test(gpu_core, device_tensor_round_trip_matches_host_fill)
{
    NN_REQUIRE_GPU();
    nn_ctx *gpu = make_ctx(NN_BACKEND_CUDNN, 0);
    nn_ctx *ref = make_ctx(NN_BACKEND_REF, 0);
    cr_assert_not_null(nn_ctx_stream(gpu));
    int64_t dims[4] = {3, 5, 7, 11};
    nn_dtype types[4] = {NN_DTYPE_F32, NN_DTYPE_F64, NN_DTYPE_F16, NN_DTYPE_BF16};
    for (int k = 0; k < 4; k++) {
        nn_tensor d, h, expect;
        cr_assert_eq(nn_tensor_empty(gpu, types[k], 4, dims, &d), NN_OK);
        cr_expect_eq(d.space, NN_SPACE_DEVICE);
        cr_expect_eq(d.device, 0);
        cr_assert_eq(nn_tensor_fill_uniform(gpu, &d, -1, 1, 99), NN_OK);
        cr_assert_eq(nn_tensor_empty(ref, types[k], 4, dims, &h), NN_OK);
        cr_assert_eq(nn_tensor_empty(ref, types[k], 4, dims, &expect), NN_OK);
        cr_assert_eq(nn_tensor_fill_uniform(ref, &expect, -1, 1, 99), NN_OK);
        cr_assert_eq(nn_tensor_copy(gpu, &h, &d), NN_OK, "%s", nn_last_error()->message);
        size_t bytes = (size_t)nn_tensor_numel(&h) * nn_dtype_size(types[k]);
        cr_expect_eq(memcmp(h.data, expect.data, bytes), 0, "dtype %s", nn_dtype_name(types[k]));
        cr_expect_eq(nn_tensor_free(gpu, &d), NN_OK);
        nn_tensor_free(ref, &h);
        nn_tensor_free(ref, &expect);
    }
    nn_ctx_destroy(ref);
    nn_ctx_destroy(gpu);
}

Test(gpu_core, wrap_refuses_the_wrong_memory_space)
{
    NN_REQUIRE_GPU();
    nn_ctx *gpu = make_ctx(NN_BACKEND_CUDNN, 0);
    nn_ctx *ref = make_ctx(NN_BACKEND_REF, 0);
    int64_t dims[1] = {64};
    nn_tensor d, t;
    cr_assert_eq(nn_tensor_empty(gpu, NN_DTYPE_F32, 1, dims, &d), NN_OK);
    /* Device memory handed to a reference context. */
    cr_expect_eq(nn_tensor_wrap(ref, d.data, NN_DTYPE_F32, 1, dims, NULL, &t), NN_E_MEMSPACE);
    cr_expect(strstr(nn_last_error()->message, "must be in host memory"), "%s",
              nn_last_error()->message);
    /* The same memory is accepted by the GPU context, and recognised as device memory. */
    cr_assert_eq(nn_tensor_wrap(gpu, d.data, NN_DTYPE_F32, 1, dims, NULL, &t), NN_OK);
    cr_expect_eq(t.space, NN_SPACE_DEVICE);
    /* Host memory handed to a GPU context. */
    float host[64];
    cr_expect_eq(nn_tensor_wrap(gpu, host, NN_DTYPE_F32, 1, dims, NULL, &t), NN_E_MEMSPACE);
    cr_expect(strstr(nn_last_error()->message, "must be in device memory of device 0"), "%s",
              nn_last_error()->message);
    /* A device tensor cannot be freed through a reference context. */
    cr_expect_eq(nn_tensor_free(ref, &d), NN_E_MEMSPACE);
    cr_expect_eq(nn_tensor_free(gpu, &d), NN_OK);
    nn_ctx_destroy(ref);
    nn_ctx_destroy(gpu);
}

/* A device view is copied as the bytes it spans: one with gaps is refused, and so is a copy
 * between device views of two layouts; a host view of any layout goes through a host buffer, a
 * channels-last device view both ways with its values in place. */
Test(gpu_core, device_copies_by_layout)
{
    NN_REQUIRE_GPU();
    nn_ctx *gpu = make_ctx(NN_BACKEND_CUDNN, 0), *ref = make_ctx(NN_BACKEND_REF, 0);
    int64_t dims[4] = {2, 3, 2, 2}, nhwc[4] = {12, 1, 6, 3}, gaps[4] = {24, 8, 2, 1};
    nn_tensor d, cl, h, hcl, hg;
    float src[24], back[24], gapped[48];
    for (int i = 0; i < 24; i++)
        src[i] = (float)i;
    cr_assert_eq(nn_tensor_empty(gpu, NN_DTYPE_F32, 4, dims, &d), NN_OK);
    cr_assert_eq(nn_tensor_empty(gpu, NN_DTYPE_F32, 4, dims, &cl), NN_OK);
    cr_assert_eq(nn_tensor_wrap(ref, src, NN_DTYPE_F32, 4, dims, NULL, &h), NN_OK);
    memcpy(cl.strides, nhwc, sizeof nhwc);
    /* NCHW host -> channels-last device -> channels-last host: each element where NHWC puts it */
    cr_assert_eq(nn_tensor_copy(gpu, &cl, &h), NN_OK, "%s", nn_last_error()->message);
    cr_assert_eq(nn_tensor_wrap(ref, back, NN_DTYPE_F32, 4, dims, nhwc, &hcl), NN_OK);
    cr_assert_eq(nn_tensor_copy(gpu, &hcl, &cl), NN_OK, "%s", nn_last_error()->message);
    for (int n = 0; n < 2; n++)
        for (int c = 0; c < 3; c++)
            for (int y = 0; y < 2; y++)
                for (int x = 0; x < 2; x++)
                    cr_expect_eq(back[n * 12 + y * 6 + x * 3 + c], src[n * 12 + c * 4 + y * 2 + x],
                                 "n%d c%d y%d x%d", n, c, y, x);
    /* channels-last device -> NCHW device: two layouts, refused */
    cr_expect_eq(nn_tensor_copy(gpu, &d, &cl), NN_E_UNSUPPORTED);
    cr_expect(strstr(nn_last_error()->message, "different layouts"), "%s",
              nn_last_error()->message);
    /* a host view with gaps to and from a packed device view */
    memset(gapped, 0, sizeof gapped);
    cr_assert_eq(nn_tensor_wrap(ref, gapped, NN_DTYPE_F32, 4, dims, gaps, &hg), NN_OK);
    cr_assert_eq(nn_tensor_copy(gpu, &d, &h), NN_OK);
    cr_assert_eq(nn_tensor_copy(gpu, &hg, &d), NN_OK, "%s", nn_last_error()->message);
    for (int i = 0; i < 24; i++)
        cr_expect_eq(gapped[(i / 4) * 8 + i % 4], src[i], "element %d", i);
    /* a device view with gaps is refused */
    nn_tensor g = d; /* 1x1x2x2 at offsets 0, 1, 3, 4 of d */
    g.dims[0] = g.dims[1] = 1;
    g.strides[2] = 3;
    nn_tensor hs;
    float small[4];
    int64_t sd[4] = {1, 1, 2, 2};
    cr_assert_eq(nn_tensor_wrap(ref, small, NN_DTYPE_F32, 4, sd, NULL, &hs), NN_OK);
    cr_expect_eq(nn_tensor_copy(gpu, &hs, &g), NN_E_UNSUPPORTED);
    cr_expect(strstr(nn_last_error()->message, "nn_tensor_copy: src is a device view with gaps"),
              "%s", nn_last_error()->message);
    nn_tensor_free(gpu, &d);
    nn_tensor_free(gpu, &cl);
    nn_ctx_destroy(ref);
    nn_ctx_destroy(gpu);
}

Test(gpu_core, verbose_two_traces_cuda_calls, .init = cr_redirect_stderr)
{
    NN_REQUIRE_GPU();
    nn_ctx *gpu = make_ctx(NN_BACKEND_CUDNN, 2);
    int64_t dims[1] = {16};
    nn_tensor d;
    cr_assert_eq(nn_tensor_empty(gpu, NN_DTYPE_F32, 1, dims, &d), NN_OK);
    cr_assert_eq(nn_tensor_fill_constant(gpu, &d, 2), NN_OK);
    nn_tensor_free(gpu, &d);
    nn_ctx_destroy(gpu);
    fflush(stderr);
    FILE *f = cr_get_redirected_stderr();
    char buf[8192];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = 0;
    /* the fill is a kernel of nnprim's own (the host's values, computed on the device) */
    cr_expect(strstr(buf, "nnprim_trace,cuda,cudaLaunchKernel"), "stderr was: %s", buf);
}

/* Bad input on device memory: misaligned views, overlapping device copies and a broadcast
 * output are refused before any CUDA call; memory stays usable. */
Test(gpu_core, bad_device_views_are_refused)
{
    NN_REQUIRE_GPU();
    nn_ctx *gpu = make_ctx(NN_BACKEND_CUDNN, 0);
    int64_t dims[1] = {16}, half[1] = {8};
    nn_tensor d, t, u;
    cr_assert_eq(nn_tensor_empty(gpu, NN_DTYPE_F32, 1, dims, &d), NN_OK);
    cr_expect_eq(nn_tensor_wrap(gpu, (char *)d.data + 2, NN_DTYPE_F32, 1, half, NULL, &t),
                 NN_E_INVALID_ARG);
    cr_expect(strstr(nn_last_error()->message, "nn_tensor_wrap: data ("), "%s",
              nn_last_error()->message);
    cr_assert_eq(nn_tensor_wrap(gpu, (float *)d.data + 4, NN_DTYPE_F32, 1, half, NULL, &t), NN_OK);
    cr_assert_eq(nn_tensor_wrap(gpu, d.data, NN_DTYPE_F32, 1, half, NULL, &u), NN_OK);
    cr_expect_eq(nn_tensor_copy(gpu, &t, &u), NN_E_INVALID_ARG);
    cr_expect(strstr(nn_last_error()->message, "nn_tensor_copy: dst and src must not overlap"),
              "%s", nn_last_error()->message);
    nn_tensor b = u;
    b.strides[0] = 0;
    cr_expect_eq(nn_tensor_fill_ints(gpu, &b, 0, 3, 1), NN_E_INVALID_ARG);
    cr_expect(strstr(nn_last_error()->message, "nn_tensor_fill_ints: t is written"), "%s",
              nn_last_error()->message);
    /* Disjoint halves copy fine. */
    nn_tensor v;
    cr_assert_eq(nn_tensor_wrap(gpu, (float *)d.data + 8, NN_DTYPE_F32, 1, half, NULL, &v), NN_OK);
    cr_expect_eq(nn_tensor_fill_ints(gpu, &u, 1, 1, 1), NN_OK);
    cr_expect_eq(nn_tensor_copy(gpu, &v, &u), NN_OK);
    nn_ctx *ref = make_ctx(NN_BACKEND_REF, 0);
    nn_tensor h;
    cr_assert_eq(nn_tensor_empty(ref, NN_DTYPE_F32, 1, half, &h), NN_OK);
    cr_assert_eq(nn_tensor_copy(gpu, &h, &v), NN_OK);
    for (int i = 0; i < 8; i++)
        cr_expect_eq(((float *)h.data)[i], 1.0f);
    nn_tensor_free(ref, &h);
    nn_tensor_free(gpu, &d);
    nn_ctx_destroy(ref);
    nn_ctx_destroy(gpu);
}

/* The convolution's bias gradient on a GPU (skipped elsewhere) against the reference backend:
 * every dy is filled with small integers, so both sums are exact and the gradients must be
 * bitwise equal. The shapes cover one block per channel, a channel's sum split over several
 * blocks and over the most blocks a launch takes, accumulation, f64, 3-D, many channels, and
 * channels-last dy (cuDNN's path, named in the verbose line beside nnprim's kernel). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu.h"
#include "nnprim/nnprim.h"

static nn_ctx *make(nn_backend backend)
{
    nn_settings s;
    nn_settings_from_env(&s);
    s.backend = backend;
    s.verbose = 1;
    nn_ctx *ctx = NULL;
    cr_assert_eq(nn_ctx_create(&ctx, &s), NN_OK, "%s", nn_last_error()->message);
    return ctx;
}

static char impl_seen[64];

static void log_line(nn_log_kind kind, const char *line, void *user)
{
    (void)user;
    const char *b = kind == NN_LOG_OP ? strstr(line, " bias:") : NULL;
    if (b) snprintf(impl_seen, sizeof impl_seen, "%.*s", (int)strcspn(b + 1, ",; "), b + 1);
}

/* The bytes of a packed tensor of dims. */
static size_t bytes_of(nn_dtype dt, int rank, const int64_t *dims)
{
    size_t n = nn_dtype_size(dt);
    for (int i = 0; i < rank; i++)
        n *= (size_t)dims[i];
    return n;
}

/* db of a packed dy of dims (channels-last when cl) on the GPU and on the reference backend,
 * from the same db (overwritten, or added to with accumulate): the two equal bitwise, and the
 * GPU's verbose line names impl. */
static void check(nn_dtype dt, int rank, const int64_t *dims, int cl, int accumulate,
                  const char *impl)
{
    nn_ctx *gpu = make(NN_BACKEND_CUDNN), *ref = make(NN_BACKEND_REF);
    nn_conv_params p;
    cr_assert_eq(nn_conv_params_default(&p, rank - 2), NN_OK);
    unsigned acc = accumulate ? NN_ACCUMULATE_DB : 0;
    int64_t k = dims[1], kd[1] = {k};
    nn_tensor dy, db, hdy, hdb;
    cr_assert_eq(nn_tensor_empty(gpu, dt, rank, dims, &dy), NN_OK);
    cr_assert_eq(nn_tensor_fill_ints(gpu, &dy, -3, 3, 11), NN_OK);
    if (cl) {
        /* channels-last: C fastest, then the spatial dims, N slowest */
        int64_t s = k;
        dy.strides[1] = 1;
        for (int d = rank - 1; d >= 2; d--)
            dy.strides[d] = s, s *= dims[d];
        dy.strides[0] = s;
    }
    cr_assert_eq(nn_tensor_empty(gpu, dt, 1, kd, &db), NN_OK);
    cr_assert_eq(nn_tensor_fill_ints(gpu, &db, -2, 2, 5), NN_OK);

    size_t sb = bytes_of(dt, rank, dims), kb = bytes_of(dt, 1, kd);
    void *hs = malloc(sb), *hb = malloc(kb), *out = malloc(kb);
    cr_assert_eq(nn_tensor_wrap(ref, hs, dt, rank, dims, dy.strides, &hdy), NN_OK);
    cr_assert_eq(nn_tensor_copy(gpu, &hdy, &dy), NN_OK, "%s", nn_last_error()->message);
    cr_assert_eq(nn_tensor_wrap(ref, hb, dt, 1, kd, NULL, &hdb), NN_OK);
    cr_assert_eq(nn_tensor_copy(gpu, &hdb, &db), NN_OK);

    impl_seen[0] = 0;
    nn_set_log_callback(log_line, NULL);
    cr_assert_eq(nn_conv_backward_bias(gpu, &p, &dy, &db, acc), NN_OK, "%s",
                 nn_last_error()->message);
    nn_set_log_callback(NULL, NULL);
    cr_expect_str_eq(impl_seen, impl);
    cr_assert_eq(nn_conv_backward_bias(ref, &p, &hdy, &hdb, acc), NN_OK, "%s",
                 nn_last_error()->message);
    nn_tensor hout;
    cr_assert_eq(nn_tensor_wrap(ref, out, dt, 1, kd, NULL, &hout), NN_OK);
    cr_assert_eq(nn_tensor_copy(gpu, &hout, &db), NN_OK);
    cr_expect(memcmp(out, hb, kb) == 0, "db differs from the reference's");
    if (dt == NN_DTYPE_F32)
        cr_expect_neq(((float *)hb)[0], 0.0f, "a sum of nothing would pass vacuously");
    nn_tensor_free(gpu, &dy);
    nn_tensor_free(gpu, &db);
    free(hs), free(hb), free(out);
    nn_ctx_destroy(gpu);
    nn_ctx_destroy(ref);
}

Test(conv_bias, one_block_per_channel)
{
    NN_REQUIRE_GPU();
    int64_t d[4] = {2, 3, 5, 5};
    check(NN_DTYPE_F32, 4, d, 0, 0, "bias:kernel");
}

Test(conv_bias, channels_split_over_blocks)
{
    NN_REQUIRE_GPU();
    int64_t a[4] = {256, 8, 8, 8}, b[4] = {64, 8, 32, 32};
    check(NN_DTYPE_F32, 4, a, 0, 0, "bias:kernel");
    check(NN_DTYPE_F32, 4, b, 0, 1, "bias:kernel");
}

Test(conv_bias, the_most_blocks_of_a_launch)
{
    NN_REQUIRE_GPU();
    int64_t d[4] = {1, 1, 3000, 4096};
    check(NN_DTYPE_F32, 4, d, 0, 1, "bias:kernel");
}

Test(conv_bias, f64_three_d)
{
    NN_REQUIRE_GPU();
    int64_t d[5] = {3, 5, 7, 9, 2};
    check(NN_DTYPE_F64, 5, d, 0, 1, "bias:kernel");
}

Test(conv_bias, many_channels_one_position)
{
    NN_REQUIRE_GPU();
    int64_t d[4] = {5, 3000, 1, 1};
    check(NN_DTYPE_F32, 4, d, 0, 1, "bias:kernel");
}

Test(conv_bias, channels_last_takes_cudnn)
{
    NN_REQUIRE_GPU();
    int64_t d[4] = {16, 8, 6, 6};
    check(NN_DTYPE_F32, 4, d, 1, 1, "bias:legacy");
}

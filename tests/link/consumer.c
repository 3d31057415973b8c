/* A user's program, built against an installed nnprim (and as a parent project of nnprim through
 * meson's fallback): a reference context, a tensor, a 3x3 convolution of ones whose every output
 * is 9. Built with -Wall -Wextra -pedantic -Werror, also as C++17 (consumer.cpp includes it). */
#include <nnprim/nnprim.h>
#include <stdio.h>
#include <string.h>

#if NNPRIM_VERSION_NUMBER < 100
#error "nnprim/version.h missing or wrong"
#endif

static int fail(const char *what, nn_status st)
{
    fprintf(stderr, "%s: %s (%s): %s\n", what, nn_status_name(st), nn_status_string(st),
            nn_last_error()->message);
    return 1;
}

int main(void)
{
    if (nn_version_number() != NNPRIM_VERSION_NUMBER) {
        fprintf(stderr, "library %s, headers %s\n", nn_version(), NNPRIM_VERSION_STRING);
        return 1;
    }
    nn_settings s;
    nn_settings_from_env(&s);
    s.backend = NN_BACKEND_REF;
    nn_ctx *ctx;
    nn_status st = nn_ctx_create(&ctx, &s);
    if (st != NN_OK) return fail("nn_ctx_create", st);
    int64_t xd[4] = {1, 1, 4, 4}, wd[4] = {1, 1, 3, 3}, yd[4] = {1, 1, 2, 2};
    nn_tensor x, w, y;
    memset(&x, 0, sizeof x); /* freeing a view never filled is a no-op */
    memset(&w, 0, sizeof w);
    memset(&y, 0, sizeof y);
    nn_conv_params p;
    nn_conv_params_default(&p, 2);
    int bad = 0;
    if ((st = nn_tensor_empty(ctx, NN_DTYPE_F32, 4, xd, &x)) != NN_OK ||
        (st = nn_tensor_empty(ctx, NN_DTYPE_F32, 4, wd, &w)) != NN_OK ||
        (st = nn_tensor_empty(ctx, NN_DTYPE_F32, 4, yd, &y)) != NN_OK ||
        (st = nn_tensor_fill_constant(ctx, &x, 1)) != NN_OK ||
        (st = nn_tensor_fill_constant(ctx, &w, 1)) != NN_OK ||
        (st = nn_conv_forward(ctx, &p, &x, &w, NULL, &y, NULL)) != NN_OK) {
        bad = fail("convolution", st);
    } else {
        const float *out = (const float *)y.data;
        for (int i = 0; i < 4; i++)
            if (out[i] != 9.0f) {
                fprintf(stderr, "y[%d] = %g, expected 9\n", i, out[i]);
                bad = 1;
            }
    }
    nn_tensor_free(ctx, &x);
    nn_tensor_free(ctx, &w);
    nn_tensor_free(ctx, &y);
    nn_ctx_destroy(ctx);
    if (!bad) printf("nnprim %s: convolution ok\n", nn_version());
    return bad;
}

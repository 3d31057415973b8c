/* The README's example: a context, a tensor in the context's memory, a fill. */
#include <nnprim/nnprim.h>
#include <stdio.h>

int main(void)
{
    nn_ctx *ctx;
    if (nn_ctx_create(&ctx, NULL) != NN_OK) { /* NULL: nn_settings_from_env(), NNPRIM_* */
        fprintf(stderr, "%s\n", nn_last_error()->message);
        return 1;
    }
    int64_t dims[4] = {8, 3, 32, 32};
    nn_tensor x;
    nn_status st = nn_tensor_empty(ctx, NN_DTYPE_F32, 4, dims, &x); /* device memory on a GPU */
    if (st == NN_OK) st = nn_tensor_fill_uniform(ctx, &x, -1, 1, 42);
    if (st != NN_OK) fprintf(stderr, "%s: %s\n", nn_status_name(st), nn_last_error()->message);
    nn_tensor_free(ctx, &x);
    nn_ctx_destroy(ctx);
    return st == NN_OK ? 0 : 1;
}

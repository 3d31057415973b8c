/* Backward options on the cuDNN backend: the checks of backward_check.h on a cuDNN context (beta
 * = 1 for accumulation, kept pullbacks, the stateless pooling backward with its own descriptors,
 * RNN refusing keep), and their gradients against the reference backend's on the same inputs.
 * Skipped without a GPU. */
#include <criterion/criterion.h>

#include "backward_check.h"
#include "gpu.h"

typedef void (*family_fn)(nn_ctx *, nn_ctx *, struct bc_out *);

/* The family on cuDNN and on the reference; tol 0 compares exactly. */
static void compare(family_fn f, const char *name, double tol)
{
    NN_REQUIRE_GPU();
    nn_ctx *g = bc_ctx(NN_BACKEND_CUDNN), *r = bc_ctx(NN_BACKEND_REF);
    struct bc_out og = {0}, orf = {0};
    f(g, r, &og);
    f(r, r, &orf);
    cr_assert_eq(og.n, orf.n);
    int64_t at;
    double e = bc_err(og.v, orf.v, og.n, tol, tol, &at);
    cr_expect(e <= 1, "%s: gradient value %lld: cudnn %.9g, reference %.9g", name, (long long)at,
              og.v[at], orf.v[at]);
    bc_out_free(&og);
    bc_out_free(&orf);
    nn_ctx_destroy(g);
    nn_ctx_destroy(r);
}

static void pool_max(nn_ctx *c, nn_ctx *h, struct bc_out *o)
{
    bc_pool(c, h, NN_POOL_MAX, o);
}
static void pool_mean(nn_ctx *c, nn_ctx *h, struct bc_out *o)
{
    bc_pool(c, h, NN_POOL_MEAN_INCLUDE_PAD, o);
}
static void pool_mean_ex(nn_ctx *c, nn_ctx *h, struct bc_out *o)
{
    bc_pool(c, h, NN_POOL_MEAN_EXCLUDE_PAD, o);
}
static void softmax_plain(nn_ctx *c, nn_ctx *h, struct bc_out *o)
{
    bc_softmax(c, h, NN_SOFTMAX_MODE_SOFTMAX, o);
}
static void softmax_log(nn_ctx *c, nn_ctx *h, struct bc_out *o)
{
    bc_softmax(c, h, NN_SOFTMAX_MODE_LOG, o);
}

Test(backward_gpu, conv)
{
    compare(bc_conv, "conv", 1e-5); /* Winograd or FFT engines round */
}
Test(backward_gpu, linear)
{
    compare(bc_linear, "linear", 1e-6);
}
Test(backward_gpu, pool_max)
{
    compare(pool_max, "max pooling", 0);
}
Test(backward_gpu, pool_mean)
{
    compare(pool_mean, "mean pooling (include pad)", 1e-6);
    compare(pool_mean_ex, "mean pooling (exclude pad)", 1e-6);
}
Test(backward_gpu, softmax)
{
    /* cuDNN computes in f32, the reference in double */
    compare(softmax_plain, "softmax", 1e-5);
    compare(softmax_log, "log-softmax", 1e-5);
}
Test(backward_gpu, cross_entropy)
{
    compare(bc_xent, "cross-entropy", 1e-5);
}
Test(backward_gpu, layernorm)
{
    /* both sum in double, in other orders, and round to f32 once */
    compare(bc_layernorm, "layernorm", 1e-6);
}
Test(backward_gpu, rnn)
{
    NN_REQUIRE_GPU();
    nn_ctx *g = bc_ctx(NN_BACKEND_CUDNN), *r = bc_ctx(NN_BACKEND_REF);
    bc_rnn(g, r);
    nn_ctx_destroy(g);
    nn_ctx_destroy(r);
}

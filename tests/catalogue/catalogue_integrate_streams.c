/* Catalogue rows: streams per call (nn_ctx_set_stream, nn_ctx_get_stream in context.h). The GPU
 * rows leave the context on the stream they set (the legacy default one) or switch back, so the
 * runner's convolution and pooling afterwards check that the context still computes. */
#include <string.h>

#include "nn_config.h"

#include "catalogue.h"

#if NN_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

#define CALL(fname) static nn_status fname(struct cat *c)

CALL(set_null_ctx)
{
    (void)c;
    return nn_ctx_set_stream(NULL, NULL);
}
CALL(get_null_ctx)
{
    (void)c;
    void *s = NULL;
    return nn_ctx_get_stream(NULL, &s);
}
CALL(get_null_out)
{
    return nn_ctx_get_stream(c->ctx, NULL);
}
/* Any value on the reference backend: accepted, and the context keeps no stream. */
CALL(set_ref_ignored)
{
    nn_status st = nn_ctx_set_stream(c->ctx, (void *)0x1234);
    void *s = (void *)1;
    cr_assert_eq(nn_ctx_get_stream(c->ctx, &s), NN_OK);
    cr_assert_null(s, "a reference context has no stream");
    return st;
}

#if NN_HAVE_CUDA
static cudaStream_t new_stream(void)
{
    cudaStream_t s;
    cr_assert_eq(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
    return s;
}

CALL(set_capturing)
{
    cudaStream_t cap = new_stream();
    void *before = NULL;
    cr_assert_eq(nn_ctx_get_stream(c->ctx, &before), NN_OK);
    cr_assert_eq(cudaStreamBeginCapture(cap, cudaStreamCaptureModeRelaxed), cudaSuccess);
    nn_status st = nn_ctx_set_stream(c->ctx, cap);
    cudaGraph_t g = NULL;
    cr_assert_eq(cudaStreamEndCapture(cap, &g), cudaSuccess);
    if (g) cudaGraphDestroy(g);
    cudaStreamDestroy(cap);
    void *after = NULL;
    cr_assert_eq(nn_ctx_get_stream(c->ctx, &after), NN_OK);
    cr_assert_eq(after, before, "a refused stream changes nothing");
    return st;
}
CALL(set_legacy)
{
    nn_status st = nn_ctx_set_stream(c->ctx, NULL);
    void *s = (void *)1;
    cr_assert_eq(nn_ctx_get_stream(c->ctx, &s), NN_OK);
    cr_assert_null(s, "the legacy default stream");
    return st;
}
/* A convolution on a stream of the caller's, then back; the stream is destroyed after. */
CALL(set_and_back)
{
    void *home = NULL;
    cr_assert_eq(nn_ctx_get_stream(c->ctx, &home), NN_OK);
    cudaStream_t s = new_stream();
    nn_status st = nn_ctx_set_stream(c->ctx, s);
    if (st == NN_OK) st = nn_ctx_set_stream(c->ctx, s); /* again: a no-op */
    if (st == NN_OK) st = nn_conv_forward(c->ctx, &c->cp, &c->x, &c->w, &c->b, &c->y, NULL);
    if (st == NN_OK) st = nn_ctx_set_stream(c->ctx, home);
    cudaStreamDestroy(s);
    return st;
}
#endif

#define E NN_E_INVALID_ARG

static const struct cat_row rows[] = {
    ROW("ctx_set_stream ctx NULL", "nn_ctx_set_stream", "ctx", E, set_null_ctx),
    ROW("ctx_get_stream ctx NULL", "nn_ctx_get_stream", "ctx", E, get_null_ctx),
    ROW("ctx_get_stream out NULL", "nn_ctx_get_stream", "out", E, get_null_out),
    ROW_ON(CAT_REF_ONLY, "ctx_set_stream on the reference backend (edge)", "nn_ctx_set_stream",
           NULL, NN_OK, set_ref_ignored),
#if NN_HAVE_CUDA
    ROW_ON(CAT_GPU_ONLY, "ctx_set_stream capturing stream", "nn_ctx_set_stream", "stream",
           NN_E_UNSUPPORTED, set_capturing),
    ROW_ON(CAT_GPU_ONLY, "ctx_set_stream legacy default stream (edge)", "nn_ctx_set_stream", NULL,
           NN_OK, set_legacy),
    ROW_ON(CAT_GPU_ONLY, "ctx_set_stream and back (edge)", "nn_ctx_set_stream", NULL, NN_OK,
           set_and_back),
#endif
};
CAT_SUBJECT(streams, rows)

/* Compiled only in builds with cuDNN (cli/meson.build). */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "bench_raw_cudnn.h"
#include "cli/bench_util.h"

#include "core/cuda_load.h"

#include "conv/conv_internal.h"
#include "cudnn/cudnn_ctx.h"
#include "cudnn/graph_cudnn.h"

struct nn_raw_plan {
    cudnnHandle_t h;
    cudnnBackendDescriptor_t plan, vp;
    void *ws;
    cudaStream_t stream;
};

static int cudnn_ok(cudnnStatus_t st, const char *what)
{
    if (st == CUDNN_STATUS_SUCCESS) return 1;
    fprintf(stderr, "nnprim bench conv: raw cuDNN: %s: %s\n", what, cudnnGetErrorString(st));
    return 0;
}

struct nn_raw_plan *nn_raw_plan_take(nn_ctx *ctx, const nn_conv_params *params, const nn_tensor *x,
                                     const nn_tensor *w, const nn_tensor *b, nn_tensor *y)
{
    struct nn__conv_exec last;
    if (nn__conv_forward_capture(ctx, params, x, w, b, y, &last) != NN_OK || !last.plan)
        return NULL;
    struct nn_raw_plan *r = calloc(1, sizeof *r);
    if (!r) return NULL;
    const struct nn__cudnn_plan *p = last.plan;
    int64_t ws = nn__cudnn_plan_workspace(p);
    r->plan = nn__cudnn_plan_backend(p);
    r->stream = (cudaStream_t)nn_ctx_stream(ctx);
    int ok = nn__cudnn_handle(ctx, &r->h) == NN_OK;
    ok = ok && (ws == 0 || cudaMalloc(&r->ws, (size_t)ws) == cudaSuccess);
    ok = ok && cudnn_ok(cudnnBackendCreateDescriptor(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, &r->vp),
                        "variant pack");
    ok = ok && cudnn_ok(cudnnBackendSetAttribute(r->vp, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS,
                                                 CUDNN_TYPE_INT64, last.n, last.uids),
                        "unique ids");
    ok = ok && cudnn_ok(cudnnBackendSetAttribute(r->vp, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS,
                                                 CUDNN_TYPE_VOID_PTR, last.n, last.ptrs),
                        "data pointers");
    ok = ok && cudnn_ok(cudnnBackendSetAttribute(r->vp, CUDNN_ATTR_VARIANT_PACK_WORKSPACE,
                                                 CUDNN_TYPE_VOID_PTR, 1, &r->ws),
                        "workspace");
    ok = ok && cudnn_ok(cudnnBackendFinalize(r->vp), "finalize variant pack");
    if (!ok) {
        nn_raw_plan_free(r);
        return NULL;
    }
    return r;
}

static int execute_fn(void *arg)
{
    struct nn_raw_plan *r = arg;
    return cudnnBackendExecute(r->h, r->plan, r->vp) == CUDNN_STATUS_SUCCESS ? 0 : -1;
}

double nn_raw_plan_gpu_us(struct nn_raw_plan *r, int warmup, int reps)
{
    for (int i = 0; i < warmup; i++)
        if (execute_fn(r) != 0) return -1;
    return nn_cli_gpu_median_us(r->stream, reps, execute_fn, r);
}

static int sync_fn(void *arg)
{
    struct nn_raw_plan *r = arg;
    return cudaStreamSynchronize(r->stream) == cudaSuccess ? 0 : -1;
}

double nn_raw_plan_host_us(struct nn_raw_plan *r, int reps)
{
    return nn_cli_host_median_us(reps, execute_fn, r, sync_fn, r);
}

void nn_raw_plan_free(struct nn_raw_plan *r)
{
    if (!r) return;
    if (r->vp) cudnnBackendDestroyDescriptor(r->vp);
    cudaFree(r->ws);
    free(r);
}

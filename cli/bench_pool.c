/* nnprim bench pool: pooling forward and forward+backward, nnprim against raw cuDNN legacy
 * pooling (same descriptors, same stream, same run), timed with CUDA events, median of many
 * repetitions after warm-up, with achieved GB/s. Without a GPU: small reference shapes, host
 * timing. bench/torch_pool.py measures PyTorch the same way. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/args.h"
#include "cli/bench_util.h"
#include "cli/cli.h"
#include "nn_config.h"
#include "nnprim/nnprim.h"
#include "tests/harness/pool_case.h"

#if NN_HAVE_CUDNN
#include "core/cuda_load.h"
#endif

struct shape {
    int64_t x[4];
    int64_t window, stride;
};

static const struct shape cpu_shapes[] = {{{2, 8, 56, 56}, 3, 2}, {{2, 16, 28, 28}, 2, 2}};

struct opts {
    int reps, warmup, cpu;
    nn_dtype dtype;
    int has_case; /* --case: one pooling call instead of the built-in shapes */
    struct nn_pool_case one;
};

static int parse(int argc, char **argv, struct opts *o)
{
    *o = (struct opts){.reps = 0, .warmup = 0, .cpu = 0, .dtype = NN_DTYPE_F32};
    const char *one = NULL;
    int dtype = 0;
    const struct nn_cli_opt opts[] = {
        {"--reps", NN_CLI_INT, &o->reps, "N", "timed calls (default 200 GPU, 5 reference)", 1,
         1000000, NULL},
        {"--warmup", NN_CLI_INT, &o->warmup, "N",
         "untimed calls first (default 20 GPU, 1 reference)", 1, 1000000, NULL},
        {"--dtype", NN_CLI_CHOICE, &dtype, NULL, "the built-in shapes' dtype (default f32)", 0, 0,
         "f32|f16|bf16"},
        {"--cpu", NN_CLI_FLAG, &o->cpu, NULL, "the reference backend, even with a GPU", 0, 0, NULL},
        {"--case", NN_CLI_STRING, &one, "TEXT",
         "one call instead: docs/POOL.md syntax or a whole verbose line (quote it)", 0, 0, NULL},
    };
    const struct nn_cli_cmd cmd = {
        "nnprim bench pool", "[CASE...]",
        "Pooling forward and forward+backward, nnprim against raw cuDNN legacy pooling (same\n"
        "descriptors, stream and run), CUDA-event timing, with achieved GB/s. Shapes (GPU):\n"
        "32x64x112x112 3x3 stride 2, 32x256x56x56 2x2 stride 2, modes max and mean. Without a\n"
        "GPU (or --cpu): small shapes on the reference backend, host timing. --case: its dtype\n"
        "wins; the raw cuDNN rows need 2-D and pad_lo == pad_hi.\n",
        opts, NN_CLI_NOPTS(opts)};
    int first, rc = nn_cli_parse(&cmd, argc, argv, &first);
    if (rc == NN_CLI_RUN) rc = nn_cli_case_operands(&cmd, argc, argv, first, &one);
    if (rc != NN_CLI_RUN) return rc;
    static const nn_dtype types[] = {NN_DTYPE_F32, NN_DTYPE_F16, NN_DTYPE_BF16};
    o->dtype = types[dtype];
    if (one) {
        char err[600];
        int got = nn_pool_case_parse_line(one, &o->one, err, sizeof err);
        if (got == 0) snprintf(err, sizeof err, "an empty case");
        int64_t y[NN_POOL_MAX_SPATIAL + 2];
        if (got == 1 &&
            nn_pool_output_shape(&o->one.p, o->one.p.spatial_rank + 2, o->one.x_dims, y) != NN_OK) {
            snprintf(err, sizeof err, "%s", nn_last_error()->message);
            got = -1;
        }
        if (got != 1) return nn_cli_usage_error(&cmd, "--case: %s", err);
        o->has_case = 1;
        o->dtype = o->one.dtype;
    }
    return NN_CLI_RUN;
}

static int fail(const char *what)
{
    fprintf(stderr, "nnprim bench pool: %s: %s (%s)\n", what, nn_last_error()->message,
            nn_status_name(nn_last_error()->status));
    return 1;
}

/* One benchmark problem: tensors in the context's memory, params, and what one step moves. */
struct problem {
    nn_pool_params p;
    nn_tensor x, y, dy, dx;
    unsigned accumulate; /* the backward's: 0 or NN_ACCUMULATE_DX (a case's "accdx") */
    double fwd_bytes, fwdbwd_bytes;
};

/* The problem of params p on x dims xd (rank p->spatial_rank + 2). */
static int problem_init_params(nn_ctx *ctx, const nn_pool_params *p, const int64_t *xd, nn_dtype dt,
                               unsigned accumulate, struct problem *pr)
{
    memset(pr, 0, sizeof *pr);
    pr->p = *p;
    pr->accumulate = accumulate;
    nn_pool_mode mode = p->mode;
    int rank = p->spatial_rank + 2;
    int64_t yd[NN_POOL_MAX_SPATIAL + 2];
    if (nn_pool_output_shape(&pr->p, rank, xd, yd) != NN_OK) return fail("output shape");
    if (nn_tensor_empty(ctx, dt, rank, xd, &pr->x) != NN_OK ||
        nn_tensor_empty(ctx, dt, rank, yd, &pr->y) != NN_OK ||
        nn_tensor_empty(ctx, dt, rank, yd, &pr->dy) != NN_OK ||
        nn_tensor_empty(ctx, dt, rank, xd, &pr->dx) != NN_OK)
        return fail("allocating tensors");
    if (nn_tensor_fill_uniform(ctx, &pr->x, -1, 1, 1) != NN_OK ||
        nn_tensor_fill_uniform(ctx, &pr->dy, -1, 1, 2) != NN_OK)
        return fail("filling tensors");
    double es = (double)nn_dtype_size(dt), nx = (double)nn_tensor_numel(&pr->x) * es,
           ny = (double)nn_tensor_numel(&pr->y) * es;
    /* forward reads x, writes y; max backward reads x, y, dy and writes dx; mean backward reads
     * dy and writes dx */
    pr->fwd_bytes = nx + ny;
    pr->fwdbwd_bytes = mode == NN_POOL_MAX ? 3 * nx + 3 * ny : 2 * nx + 2 * ny;
    if (accumulate) pr->fwdbwd_bytes += nx; /* dx is read too */
    return 0;
}

static int problem_init(nn_ctx *ctx, const struct shape *s, nn_pool_mode mode, nn_dtype dt,
                        struct problem *pr)
{
    nn_pool_params p = {.spatial_rank = 2, .mode = mode};
    for (int i = 0; i < 2; i++) {
        p.window[i] = s->window;
        p.stride[i] = s->stride;
    }
    return problem_init_params(ctx, &p, s->x, dt, 0, pr);
}

static const char *mode_word(nn_pool_mode m)
{
    return m == NN_POOL_MAX ? "max" : m == NN_POOL_MEAN_INCLUDE_PAD ? "mean" : "meanx";
}

static void problem_free(nn_ctx *ctx, struct problem *pr)
{
    nn_tensor *ts[] = {&pr->x, &pr->y, &pr->dy, &pr->dx};
    for (size_t i = 0; i < 4; i++)
        if (ts[i]->data) nn_tensor_free(ctx, ts[i]);
}

static int nnprim_step(nn_ctx *ctx, struct problem *pr, int backward)
{
    nn_pool_pullback *pb = NULL;
    if (nn_pool_forward(ctx, &pr->p, &pr->x, &pr->y, backward ? &pb : NULL) != NN_OK)
        return fail("nn_pool_forward");
    nn_backward_options bo = {.accumulate = pr->accumulate};
    if (backward && nn_pool_backward_ex(ctx, &pb, &bo, &pr->dy, &pr->dx) != NN_OK) {
        nn_pool_pullback_free(&pb);
        return fail("nn_pool_backward_ex");
    }
    return 0;
}

static void print_row(const char *shape, const char *mode, const char *pass, const char *impl,
                      double us, double bytes, double base_us)
{
    printf("%-24s %-5s %-8s %-12s %10.1f %9.2f", shape, mode, pass, impl, us, bytes / us * 1e-3);
    if (base_us > 0) printf(" %8.3fx", us / base_us);
    printf("\n");
}

static void shape_name(const struct shape *s, char *buf, size_t cap)
{
    snprintf(buf, cap, "%lldx%lldx%lldx%lld/%lld/s%lld", (long long)s->x[0], (long long)s->x[1],
             (long long)s->x[2], (long long)s->x[3], (long long)s->window, (long long)s->stride);
}

static int bench_cpu(nn_ctx *ctx, const struct opts *o)
{
    int reps = o->reps ? o->reps : 5, warmup = o->warmup ? o->warmup : 1;
    double *t = malloc((size_t)reps * sizeof *t);
    if (!t) return 1;
    printf("reference backend, host timing, median of %d after %d warm-up\n", reps, warmup);
    printf("%-24s %-5s %-8s %-12s %10s %9s\n", "shape", "mode", "pass", "impl", "us", "GB/s");
    int rc = 0;
    size_t nshapes = o->has_case ? 1 : sizeof cpu_shapes / sizeof cpu_shapes[0];
    for (size_t si = 0; si < nshapes && !rc; si++)
        for (int m = 0; m < (o->has_case ? 1 : 2) && !rc; m++) {
            struct problem pr;
            nn_pool_mode mode = o->has_case ? o->one.p.mode
                                : m         ? NN_POOL_MEAN_INCLUDE_PAD
                                            : NN_POOL_MAX;
            char name[256];
            if (o->has_case) {
                rc = problem_init_params(ctx, &o->one.p, o->one.x_dims, o->dtype, o->one.accumulate,
                                         &pr);
                nn_pool_case_format(&o->one, name, sizeof name);
                /* a window's reads per output, forward and twice as many forward + backward */
                double work = rc ? 0 : (double)nn_tensor_numel(&pr.y) * 3 * (warmup + reps);
                for (int i = 0; i < o->one.p.spatial_rank; i++)
                    work *= (double)o->one.p.window[i];
                nn_cli_warn_slow("nnprim bench pool", name, work);
            } else {
                rc = problem_init(ctx, &cpu_shapes[si], mode, o->dtype, &pr);
                shape_name(&cpu_shapes[si], name, sizeof name);
            }
            for (int bwd = 0; bwd < 2 && !rc; bwd++) {
                for (int i = 0; i < warmup + reps && !rc; i++) {
                    double t0 = nn_cli_now_us();
                    rc = nnprim_step(ctx, &pr, bwd);
                    if (i >= warmup) t[i - warmup] = nn_cli_now_us() - t0;
                }
                if (!rc)
                    print_row(name, mode_word(mode), bwd ? "fwd+bwd" : "fwd", "nnprim-ref",
                              nn_cli_median(t, reps), bwd ? pr.fwdbwd_bytes : pr.fwd_bytes, 0);
            }
            problem_free(ctx, &pr);
        }
    free(t);
    return rc;
}

#if NN_HAVE_CUDNN
static const struct shape gpu_shapes[] = {{{32, 64, 112, 112}, 3, 2}, {{32, 256, 56, 56}, 2, 2}};

static int cuda_ok(cudaError_t e, const char *what)
{
    if (e == cudaSuccess) return 0;
    fprintf(stderr, "nnprim bench pool: %s: %s\n", what, cudaGetErrorString(e));
    return 1;
}

static int cudnn_ok(cudnnStatus_t s, const char *what)
{
    if (s == CUDNN_STATUS_SUCCESS) return 0;
    char detail[256] = "";
    cudnnGetLastErrorString(detail, sizeof detail);
    fprintf(stderr, "nnprim bench pool: %s: %s %s\n", what, cudnnGetErrorString(s), detail);
    return 1;
}

/* Raw cuDNN with descriptors made once: the floor that nnprim is measured against. */
struct raw {
    cudnnHandle_t h;
    cudnnPoolingDescriptor_t pool;
    cudnnTensorDescriptor_t xd, yd;
};

static cudnnDataType_t raw_type(nn_dtype t)
{
    return t == NN_DTYPE_F16    ? CUDNN_DATA_HALF
           : t == NN_DTYPE_BF16 ? CUDNN_DATA_BFLOAT16
                                : CUDNN_DATA_FLOAT;
}

static int raw_init(struct raw *r, cudaStream_t stream, const struct problem *pr)
{
    memset(r, 0, sizeof *r);
    int win[2] = {(int)pr->p.window[0], (int)pr->p.window[1]};
    int pad[2] = {(int)pr->p.pad_lo[0], (int)pr->p.pad_lo[1]};
    int str[2] = {(int)pr->p.stride[0], (int)pr->p.stride[1]};
    /* The mode nnprim picks for a context that is not deterministic (the bench's). */
    cudnnPoolingMode_t mode = pr->p.mode == NN_POOL_MAX ? CUDNN_POOLING_MAX
                              : pr->p.mode == NN_POOL_MEAN_INCLUDE_PAD
                                  ? CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING
                                  : CUDNN_POOLING_AVERAGE_COUNT_EXCLUDE_PADDING;
    int xd[4], xs[4], yd[4], ys[4];
    for (int i = 0; i < 4; i++) {
        xd[i] = (int)pr->x.dims[i];
        xs[i] = (int)pr->x.strides[i];
        yd[i] = (int)pr->y.dims[i];
        ys[i] = (int)pr->y.strides[i];
    }
    if (cudnn_ok(cudnnCreate(&r->h), "cudnnCreate") ||
        cudnn_ok(cudnnSetStream(r->h, stream), "cudnnSetStream") ||
        cudnn_ok(cudnnCreatePoolingDescriptor(&r->pool), "cudnnCreatePoolingDescriptor") ||
        cudnn_ok(cudnnSetPoolingNdDescriptor(r->pool, mode, CUDNN_PROPAGATE_NAN, 2, win, pad, str),
                 "cudnnSetPoolingNdDescriptor") ||
        cudnn_ok(cudnnCreateTensorDescriptor(&r->xd), "cudnnCreateTensorDescriptor") ||
        cudnn_ok(cudnnCreateTensorDescriptor(&r->yd), "cudnnCreateTensorDescriptor") ||
        cudnn_ok(cudnnSetTensorNdDescriptor(r->xd, raw_type(pr->x.dtype), 4, xd, xs),
                 "cudnnSetTensorNdDescriptor x") ||
        cudnn_ok(cudnnSetTensorNdDescriptor(r->yd, raw_type(pr->x.dtype), 4, yd, ys),
                 "cudnnSetTensorNdDescriptor y"))
        return 1;
    return 0;
}

static void raw_free(struct raw *r)
{
    if (r->xd) cudnnDestroyTensorDescriptor(r->xd);
    if (r->yd) cudnnDestroyTensorDescriptor(r->yd);
    if (r->pool) cudnnDestroyPoolingDescriptor(r->pool);
    if (r->h) cudnnDestroy(r->h);
}

static int raw_step(struct raw *r, struct problem *pr, int backward)
{
    float one = 1.0f, zero = 0.0f, beta = pr->accumulate ? 1.0f : 0.0f;
    if (cudnn_ok(
            cudnnPoolingForward(r->h, r->pool, &one, r->xd, pr->x.data, &zero, r->yd, pr->y.data),
            "cudnnPoolingForward"))
        return 1;
    if (backward &&
        cudnn_ok(cudnnPoolingBackward(r->h, r->pool, &one, r->yd, pr->y.data, r->yd, pr->dy.data,
                                      r->xd, pr->x.data, &beta, r->xd, pr->dx.data),
                 "cudnnPoolingBackward"))
        return 1;
    return 0;
}

/* Median GPU time of one step (between events on the stream, so host work inside the step that
 * delays the launch is counted too). */
static int time_gpu(cudaStream_t stream, int warmup, int reps, double *t, double *med, nn_ctx *ctx,
                    struct raw *raw, struct problem *pr, int backward)
{
    cudaEvent_t a, b;
    if (cuda_ok(cudaEventCreate(&a), "cudaEventCreate")) return 1;
    if (cuda_ok(cudaEventCreate(&b), "cudaEventCreate")) {
        cudaEventDestroy(a);
        return 1;
    }
    int rc = 0;
    for (int i = 0; i < warmup + reps && !rc; i++) {
        rc = cuda_ok(cudaEventRecord(a, stream), "cudaEventRecord");
        if (!rc) rc = raw ? raw_step(raw, pr, backward) : nnprim_step(ctx, pr, backward);
        if (!rc) rc = cuda_ok(cudaEventRecord(b, stream), "cudaEventRecord");
        if (!rc) rc = cuda_ok(cudaEventSynchronize(b), "cudaEventSynchronize");
        float ms = 0;
        if (!rc) rc = cuda_ok(cudaEventElapsedTime(&ms, a, b), "cudaEventElapsedTime");
        if (i >= warmup) t[i - warmup] = (double)ms * 1e3;
    }
    cudaEventDestroy(a);
    cudaEventDestroy(b);
    if (!rc) *med = nn_cli_median(t, reps);
    return rc;
}

static int bench_gpu(nn_ctx *ctx, const struct opts *o)
{
    int reps = o->reps ? o->reps : 200, warmup = o->warmup ? o->warmup : 20;
    double *t = malloc((size_t)reps * sizeof *t);
    if (!t) return 1;
    cudaStream_t stream = (cudaStream_t)nn_ctx_stream(ctx);
    nn_settings cs;
    nn_device_info d = {.name = "unknown device"};
    nn_ctx_get_settings(ctx, &cs);
    nn_device_get_info(cs.device, &d);
    size_t v = nn_cudnn_runtime_version();
    printf("%s, cuDNN %zu.%zu.%zu, %s, CUDA events, median of %d after %d warm-up\n", d.name,
           v / 10000, (v % 10000) / 100, v % 100, nn_dtype_name(o->dtype), reps, warmup);
    printf("bytes: forward x + y; fwd+bwd max 3(x + y), mean 2(x + y), accdx + x\n");
    printf("%-24s %-5s %-8s %-12s %10s %9s %9s\n", "shape", "mode", "pass", "impl", "us", "GB/s",
           "vs cudnn");
    int rc = 0;
    size_t nshapes = o->has_case ? 1 : sizeof gpu_shapes / sizeof gpu_shapes[0];
    for (size_t si = 0; si < nshapes && !rc; si++)
        for (int m = 0; m < (o->has_case ? 1 : 2) && !rc; m++) {
            struct problem pr;
            struct raw raw;
            memset(&raw, 0, sizeof raw);
            nn_pool_mode mode = o->has_case ? o->one.p.mode
                                : m         ? NN_POOL_MEAN_INCLUDE_PAD
                                            : NN_POOL_MAX;
            char name[256];
            if (o->has_case) {
                rc = problem_init_params(ctx, &o->one.p, o->one.x_dims, o->dtype, o->one.accumulate,
                                         &pr);
                nn_pool_case_format(&o->one, name, sizeof name);
            } else {
                rc = problem_init(ctx, &gpu_shapes[si], mode, o->dtype, &pr);
                shape_name(&gpu_shapes[si], name, sizeof name);
            }
            /* The raw rows run cuDNN's 2-D legacy call, one padding per dim. */
            int raw_ok = pr.p.spatial_rank == 2 && pr.p.pad_lo[0] == pr.p.pad_hi[0] &&
                         pr.p.pad_lo[1] == pr.p.pad_hi[1];
            if (!raw_ok && !rc) printf("# no raw cuDNN rows: they need 2-D and pad_lo == pad_hi\n");
            if (!rc && raw_ok) rc = raw_init(&raw, stream, &pr);
            for (int bwd = 0; bwd < 2 && !rc; bwd++) {
                double raw_us = 0, nn_us = 0, bytes = bwd ? pr.fwdbwd_bytes : pr.fwd_bytes;
                if (raw_ok) rc = time_gpu(stream, warmup, reps, t, &raw_us, ctx, &raw, &pr, bwd);
                if (!rc) rc = time_gpu(stream, warmup, reps, t, &nn_us, ctx, NULL, &pr, bwd);
                if (rc) break;
                const char *mn = mode_word(mode), *pass = bwd ? "fwd+bwd" : "fwd";
                if (raw_ok) print_row(name, mn, pass, "cudnn-raw", raw_us, bytes, 0);
                print_row(name, mn, pass, "nnprim", nn_us, bytes, raw_ok ? raw_us : 0);
            }
            raw_free(&raw);
            problem_free(ctx, &pr);
        }
    free(t);
    return rc;
}
#endif

int nn_cli_bench_pool(int argc, char **argv)
{
    struct opts o;
    int prc = parse(argc, argv, &o);
    if (prc != NN_CLI_RUN) return prc;
    nn_settings s;
    nn_settings_from_env(&s);
    s.deterministic = 0; /* raw cuDNN runs the non-deterministic max mode too */
    if (o.cpu) s.backend = NN_BACKEND_REF;
    nn_ctx *ctx;
    if (nn_ctx_create(&ctx, &s) != NN_OK) return fail("nn_ctx_create");
    int rc;
#if NN_HAVE_CUDNN
    if (nn_ctx_backend(ctx) == NN_BACKEND_CUDNN)
        rc = bench_gpu(ctx, &o);
    else
#endif
        rc = bench_cpu(ctx, &o);
    nn_ctx_destroy(ctx);
    return rc;
}

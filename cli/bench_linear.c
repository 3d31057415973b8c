/* nnprim bench linear: the linear layer's forward and forward+backward, nnprim against raw
 * cuBLASLt (the same products with the same epilogues, heuristic preferences, descriptors and
 * algorithm made once, bias pointers set once, a workspace allocated once, the same stream, the
 * same run), and raw cuBLASLt replayed ("lt-graph": each product captured once as a graph on the
 * same buffers, as nnprim replays its own), all timed alike with CUDA events, taking turns a share
 * of the calls at a time (timed), so that a drift of the GPU's clocks during a row weighs on every
 * side alike. Two figures per pass: "us", the calls back to back (as bench/torch_linear.py times
 * PyTorch), where a tiny product's time is the host's cost of issuing it whenever that is the
 * larger; and
 * "gpu_us", the GPU's part alone: the calls queued behind a hold on the stream, then run back to
 * back (nn_cli_gpu_times_us). Each case then prints the algorithm of every product on both sides
 * (nnprim's from the verbose line of a twin context). Without a GPU: the reference backend with
 * host timing. Each shape is printed in the case syntax of docs/LINEAR.md, which --case takes
 * back (as does a whole NNPRIM_VERBOSE line of linear_forward). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/args.h"
#include "cli/bench_util.h"
#include "cli/cli.h"
#include "nn_config.h"
#include "nnprim/nnprim.h"
#include "tests/harness/linear_case.h"

#if NN_HAVE_CUDNN
#include "core/cuda_load.h"
#include "linear/linear_internal.h"
#endif

/* An LSTM language model's head (batch 20 x 35 steps, hidden 650, 10000 words), a classifier's
 * last layer, and a square 4096 layer. */
static const char *const gpu_shapes[] = {"m20x35in650out10000 bias", "m64in512out10 bias",
                                         "m4096in4096out4096 bias"};
static const char *const cpu_shapes[] = {"m16in64out32 bias", "m64in128out10 relu bias"};

struct opts {
    int reps, warmup, cpu, tf32;
    nn_dtype dtype;
    int has_case;
    struct nn_linear_case one;
};

static int parse(int argc, char **argv, struct opts *o)
{
    *o = (struct opts){.dtype = NN_DTYPE_F32};
    const char *one = NULL;
    int dtype = 0;
    const struct nn_cli_opt opts[] = {
        {"--reps", NN_CLI_INT, &o->reps, "N", "timed calls (default 100 GPU, 5 reference)", 1,
         1000000, NULL},
        {"--warmup", NN_CLI_INT, &o->warmup, "N",
         "untimed calls first (default 10 GPU, 1 reference)", 1, 1000000, NULL},
        {"--dtype", NN_CLI_CHOICE, &dtype, NULL, "the built-in shapes' dtype (default f32)", 0, 0,
         "f32|f64|f16|bf16"},
        {"--tf32", NN_CLI_FLAG, &o->tf32, NULL, "TF32 math for the built-in f32 shapes", 0, 0,
         NULL},
        {"--cpu", NN_CLI_FLAG, &o->cpu, NULL, "small shapes on the reference backend", 0, 0, NULL},
        {"--case", NN_CLI_STRING, &one, "TEXT",
         "one case in docs/LINEAR.md syntax or a whole verbose line (quote it)", 0, 0, NULL},
    };
    const struct nn_cli_cmd cmd = {
        "nnprim bench linear", "[CASE...]",
        "The linear layer's forward and forward+backward (dx, dw, db), nnprim against raw\n"
        "cuBLASLt in the same run. Shapes (GPU): m20x35in650out10000 bias (LSTM LM head),\n"
        "m64in512out10 bias (classifier), m4096in4096out4096 bias. --case: its dtype and tf32\n"
        "win. --cpu (or no GPU): small shapes on the reference backend, host timing.\n",
        opts, NN_CLI_NOPTS(opts)};
    int first, rc = nn_cli_parse(&cmd, argc, argv, &first);
    if (rc == NN_CLI_RUN) rc = nn_cli_case_operands(&cmd, argc, argv, first, &one);
    if (rc != NN_CLI_RUN) return rc;
    static const nn_dtype types[] = {NN_DTYPE_F32, NN_DTYPE_F64, NN_DTYPE_F16, NN_DTYPE_BF16};
    o->dtype = types[dtype];
    if (one) {
        char err[256];
        int got = nn_linear_case_parse_line(one, &o->one, err, sizeof err);
        if (got == 0) snprintf(err, sizeof err, "an empty case");
        if (got != 1) return nn_cli_usage_error(&cmd, "--case: %s", err);
        o->has_case = 1;
    }
    return NN_CLI_RUN;
}

static int fail(const char *what)
{
    fprintf(stderr, "nnprim bench linear: %s: %s (%s)\n", what, nn_last_error()->message,
            nn_status_name(nn_last_error()->status));
    return 1;
}

/* One problem: the case and its tensors in the context's memory. */
struct problem {
    nn_ctx *ctx;
    struct nn_linear_case c;
    nn_tensor x, w, b, y, dy, dx, dw, db;
    int64_t m;
};

static int problem_init(nn_ctx *ctx, const struct nn_linear_case *c, struct problem *pr)
{
    memset(pr, 0, sizeof *pr);
    pr->ctx = ctx;
    pr->c = *c;
    int r = c->x_rank;
    int64_t xd[NN_MAX_RANK], yd[NN_MAX_RANK];
    pr->m = 1;
    for (int i = 0; i + 1 < r; i++) {
        xd[i] = yd[i] = c->lead[i];
        pr->m *= c->lead[i];
    }
    xd[r - 1] = c->in;
    yd[r - 1] = c->out;
    int64_t wd[2] = {c->out, c->in};
    nn_dtype dt = c->dtype;
    if (nn_tensor_empty(ctx, dt, r, xd, &pr->x) || nn_tensor_empty(ctx, dt, 2, wd, &pr->w) ||
        nn_tensor_empty(ctx, dt, 1, &c->out, &pr->b) || nn_tensor_empty(ctx, dt, r, yd, &pr->y) ||
        nn_tensor_empty(ctx, dt, r, yd, &pr->dy) || nn_tensor_empty(ctx, dt, r, xd, &pr->dx) ||
        nn_tensor_empty(ctx, dt, 2, wd, &pr->dw) || nn_tensor_empty(ctx, dt, 1, &c->out, &pr->db))
        return fail("allocating tensors");
    nn_tensor *in[] = {&pr->x, &pr->w, &pr->b, &pr->dy};
    for (int i = 0; i < 4; i++)
        if (nn_tensor_fill_uniform(ctx, in[i], -1, 1, (uint64_t)i + 1)) return fail("filling");
    return 0;
}

static void problem_free(struct problem *pr)
{
    nn_tensor *all[] = {&pr->x, &pr->w, &pr->b, &pr->y, &pr->dy, &pr->dx, &pr->dw, &pr->db};
    for (int i = 0; i < 8; i++)
        if (all[i]->data) nn_tensor_free(pr->ctx, all[i]);
}

static int nnprim_fwd(void *arg)
{
    struct problem *pr = arg;
    return nn_linear_forward(pr->ctx, &pr->c.p, &pr->x, &pr->w, pr->c.bias ? &pr->b : NULL, &pr->y,
                             NULL) != NN_OK;
}

static int nnprim_fwdbwd(void *arg)
{
    struct problem *pr = arg;
    nn_linear_pullback *pb = NULL;
    nn_backward_options o = {.accumulate = pr->c.accumulate}; /* the case's accdx/accdw/accdb */
    if (nn_linear_forward(pr->ctx, &pr->c.p, &pr->x, &pr->w, pr->c.bias ? &pr->b : NULL, &pr->y,
                          &pb) != NN_OK)
        return 1;
    if (nn_linear_backward_ex(pr->ctx, &pb, &o, &pr->dy, &pr->dx, &pr->dw,
                              pr->c.bias ? &pr->db : NULL) != NN_OK) {
        nn_linear_pullback_free(&pb);
        return 1;
    }
    return 0;
}

/* 2 m in out per product: one forward, three (forward, dx, dw) for forward+backward. */
static double flops(const struct problem *pr, int bwd)
{
    return 2.0 * (double)pr->m * (double)pr->c.in * (double)pr->c.out * (bwd ? 3 : 1);
}

/* us: calls back to back (the host's issuing overlaps the GPU work queued before it); gpu_us: the
 * GPU's part alone (held); base: raw's, graph: raw's replayed (each {0, 0} where not printed). */
static void print_row(const char *name, const char *pass, const char *impl, const double us[2],
                      double fl, const double base[2], const double graph[2])
{
    printf("%-34s %-8s %-9s %10.1f %10.1f %8.1f", name, pass, impl, us[0], us[1],
           fl / us[0] * 1e-6);
    if (base[0] > 0) printf(" %8.3fx %8.3fx", us[0] / base[0], us[1] / base[1]);
    if (graph[0] > 0) printf(" %8.3fx %8.3fx", us[0] / graph[0], us[1] / graph[1]);
    printf("\n");
}

/* The case of shape text s with the run's dtype and math. */
static int case_of(const struct opts *o, const char *s, struct nn_linear_case *c)
{
    if (o->has_case) {
        *c = o->one;
        return 0;
    }
    char line[256], err[256];
    snprintf(line, sizeof line, "%s %s%s", s, nn_dtype_name(o->dtype),
             o->tf32 && o->dtype == NN_DTYPE_F32 ? " tf32" : "");
    if (nn_linear_case_parse_line(line, c, err, sizeof err) != 1) {
        fprintf(stderr, "nnprim bench linear: %s\n", err);
        return 1;
    }
    return 0;
}

static int bench_cpu(nn_ctx *ctx, const struct opts *o)
{
    int reps = o->reps ? o->reps : 5, warmup = o->warmup ? o->warmup : 1;
    double *t = malloc((size_t)reps * sizeof *t);
    if (!t) return 1;
    printf("reference backend, host timing, median of %d after %d warm-up\n", reps, warmup);
    printf("%-34s %-8s %-9s %10s %8s\n", "case", "pass", "impl", "us", "GFLOP/s");
    int rc = 0;
    size_t n = o->has_case ? 1 : sizeof cpu_shapes / sizeof cpu_shapes[0];
    for (size_t si = 0; si < n && !rc; si++) {
        struct nn_linear_case c;
        struct problem pr;
        if (case_of(o, cpu_shapes[si], &c)) return 1;
        char name[256];
        nn_linear_case_format(&c, name, sizeof name);
        /* forward, then forward + backward (3 products), warm-up and timed calls */
        double macs = (double)c.in * (double)c.out;
        for (int i = 0; i + 1 < c.x_rank; i++)
            macs *= (double)c.lead[i];
        nn_cli_warn_slow("nnprim bench linear", name, 4 * macs * (warmup + reps));
        rc = problem_init(ctx, &c, &pr);
        for (int bwd = 0; bwd < 2 && !rc; bwd++) {
            for (int i = 0; i < warmup + reps && !rc; i++) {
                double t0 = nn_cli_now_us();
                rc = bwd ? nnprim_fwdbwd(&pr) : nnprim_fwd(&pr);
                if (rc) fail(bwd ? "nnprim forward+backward" : "nnprim forward");
                if (i >= warmup) t[i - warmup] = nn_cli_now_us() - t0;
            }
            double us = rc ? 0 : nn_cli_median(t, reps);
            if (!rc)
                printf("%-34s %-8s %-9s %10.1f %8.1f\n", name, bwd ? "fwd+bwd" : "fwd", "nnprim",
                       us, flops(&pr, bwd) / us * 1e-3);
        }
        problem_free(&pr);
    }
    free(t);
    return rc;
}

#if NN_HAVE_CUDNN
/* ---------------------------------------------------------------------------------------------
 * Raw cuBLASLt: what nnprim's cuBLASLt backend does, with everything made once
 */

struct raw_gemm {
    cublasLtMatmulDesc_t desc;
    cublasLtMatrixLayout_t a, b, d;
    cublasLtMatmulAlgo_t algo;
    size_t ws; /* the algorithm's workspace */
    cublasLtEpilogue_t epi;
    int ok;
    cudaGraphExec_t exec; /* the product captured once on the problem's buffers (raw_capture) */
};

struct raw {
    cublasLtHandle_t h;
    struct raw_gemm fwd, dx, dw;
    void *ws;
    size_t ws_size;
    cudaStream_t stream;
    struct problem *pr;
};

static int lt_ok(cublasStatus_t s, const char *what)
{
    if (s == CUBLAS_STATUS_SUCCESS) return 0;
    fprintf(stderr, "nnprim bench linear: raw cuBLASLt: %s failed (status %d)\n", what, (int)s);
    return 1;
}

static cudaDataType_t raw_type(nn_dtype t)
{
    return t == NN_DTYPE_F16    ? CUDA_R_16F
           : t == NN_DTYPE_BF16 ? CUDA_R_16BF
           : t == NN_DTYPE_F64  ? CUDA_R_64F
                                : CUDA_R_32F;
}

/* The largest power of two up to 256 that divides every pointer, as cuBLASLt's alignment
 * preferences take it (nnprim asks with the same). */
static uint32_t raw_align(const void *const *ptrs, int n)
{
    uint32_t a = 256;
    for (int i = 0; i < n; i++)
        while (ptrs[i] && a > 1 && ((uintptr_t)ptrs[i] & (a - 1)))
            a >>= 1;
    return a;
}

/* One product D (rows x cols) = op(A) op(B), column-major views of the row-major tensors
 * (docs/LINEAR.md), its bias (or BGRADB's db) pointer set once; ptrs are the call's pointers. */
static int raw_gemm_init(struct raw *r, struct raw_gemm *g, cublasOperation_t ta,
                         cublasOperation_t tb, uint64_t ar, uint64_t ac, uint64_t br, uint64_t bc,
                         uint64_t dr, uint64_t dc, cublasLtEpilogue_t epi, void *bias,
                         const void *const *ptrs, int nptr)
{
    const struct nn_linear_case *c = &r->pr->c;
    cublasComputeType_t ct = c->dtype == NN_DTYPE_F64  ? CUBLAS_COMPUTE_64F
                             : c->math == NN_MATH_TF32 ? CUBLAS_COMPUTE_32F_FAST_TF32
                                                       : CUBLAS_COMPUTE_32F;
    cudaDataType_t st = c->dtype == NN_DTYPE_F64 ? CUDA_R_64F : CUDA_R_32F, t = raw_type(c->dtype);
    if (lt_ok(cublasLtMatmulDescCreate(&g->desc, ct, st), "cublasLtMatmulDescCreate") ||
        lt_ok(cublasLtMatmulDescSetAttribute(g->desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta),
              "set transa") ||
        lt_ok(cublasLtMatmulDescSetAttribute(g->desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb),
              "set transb") ||
        lt_ok(cublasLtMatmulDescSetAttribute(g->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi,
                                             sizeof epi),
              "set epilogue") ||
        lt_ok(cublasLtMatrixLayoutCreate(&g->a, t, ar, ac, (int64_t)ar), "layout A") ||
        lt_ok(cublasLtMatrixLayoutCreate(&g->b, t, br, bc, (int64_t)br), "layout B") ||
        lt_ok(cublasLtMatrixLayoutCreate(&g->d, t, dr, dc, (int64_t)dr), "layout D"))
        return 1;
    g->epi = epi;
    if (bias && lt_ok(cublasLtMatmulDescSetAttribute(g->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER,
                                                     &bias, sizeof bias),
                      "set bias pointer"))
        return 1;
    cublasLtMatmulPreference_t pref;
    if (lt_ok(cublasLtMatmulPreferenceCreate(&pref), "cublasLtMatmulPreferenceCreate")) return 1;
    uint64_t ws = r->ws_size;
    uint32_t align = raw_align(ptrs, nptr);
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws,
                                         sizeof ws);
    static const cublasLtMatmulPreferenceAttributes_t aligns[] = {
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES};
    for (size_t i = 0; i < 4; i++)
        cublasLtMatmulPreferenceSetAttribute(pref, aligns[i], &align, sizeof align);
    cublasLtMatmulHeuristicResult_t res;
    int n = 0;
    cublasStatus_t s =
        cublasLtMatmulAlgoGetHeuristic(r->h, g->desc, g->a, g->b, g->d, g->d, pref, 1, &res, &n);
    cublasLtMatmulPreferenceDestroy(pref);
    g->ok = s == CUBLAS_STATUS_SUCCESS && n > 0 && res.state == CUBLAS_STATUS_SUCCESS;
    if (g->ok) {
        g->algo = res.algo;
        g->ws = res.workspaceSize;
    }
    return 0;
}

static void raw_gemm_fini(struct raw_gemm *g)
{
    if (g->exec) cudaGraphExecDestroy(g->exec);
    if (g->a) cublasLtMatrixLayoutDestroy(g->a);
    if (g->b) cublasLtMatrixLayoutDestroy(g->b);
    if (g->d) cublasLtMatrixLayoutDestroy(g->d);
    if (g->desc) cublasLtMatmulDescDestroy(g->desc);
}

static void raw_fini(struct raw *r)
{
    raw_gemm_fini(&r->fwd);
    raw_gemm_fini(&r->dx);
    raw_gemm_fini(&r->dw);
    if (r->ws) cudaFree(r->ws);
    if (r->h) cublasLtDestroy(r->h);
}

static int raw_init(struct raw *r, struct problem *pr, cudaStream_t stream)
{
    memset(r, 0, sizeof *r);
    r->pr = pr;
    r->stream = stream;
    r->ws_size = (size_t)32 << 20;
    const struct nn_linear_case *c = &pr->c;
    uint64_t m = (uint64_t)pr->m, in = (uint64_t)c->in, out = (uint64_t)c->out;
    int relu = c->p.activation == NN_ACTIVATION_RELU;
    cublasLtEpilogue_t fe = relu ? (c->bias ? CUBLASLT_EPILOGUE_RELU_BIAS : CUBLASLT_EPILOGUE_RELU)
                                 : (c->bias ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT);
    void *b = c->bias ? pr->b.data : NULL, *db = c->bias ? pr->db.data : NULL;
    const void *fp[] = {pr->x.data, pr->w.data, pr->y.data, b};
    const void *xp[] = {pr->w.data, pr->dy.data, pr->dx.data};
    const void *wp[] = {pr->x.data, pr->dy.data, pr->dw.data, db};
    if (lt_ok(cublasLtCreate(&r->h), "cublasLtCreate") ||
        cudaMalloc(&r->ws, r->ws_size) != cudaSuccess ||
        raw_gemm_init(r, &r->fwd, CUBLAS_OP_T, CUBLAS_OP_N, in, out, in, m, out, m, fe, b, fp, 4) ||
        raw_gemm_init(r, &r->dx, CUBLAS_OP_N, CUBLAS_OP_N, in, out, out, m, in, m,
                      CUBLASLT_EPILOGUE_DEFAULT, NULL, xp, 3) ||
        raw_gemm_init(r, &r->dw, CUBLAS_OP_N, CUBLAS_OP_T, in, m, out, m, in, out,
                      c->bias ? CUBLASLT_EPILOGUE_BGRADB : CUBLASLT_EPILOGUE_DEFAULT, db, wp, 4)) {
        raw_fini(r);
        return 1;
    }
    return 0;
}

static int raw_run(struct raw *r, struct raw_gemm *g, const void *a, const void *b, void *d)
{
    const struct nn_linear_case *c = &r->pr->c;
    float one = 1, zero = 0;
    double one_d = 1, zero_d = 0;
    int f64 = c->dtype == NN_DTYPE_F64;
    return cublasLtMatmul(r->h, g->desc, f64 ? (void *)&one_d : (void *)&one, a, g->a, b, g->b,
                          f64 ? (void *)&zero_d : (void *)&zero, d, g->d, d, g->d, &g->algo,
                          g->ws ? r->ws : NULL, g->ws, r->stream) != CUBLAS_STATUS_SUCCESS;
}

static int raw_fwd(void *arg)
{
    struct raw *r = arg;
    struct problem *pr = r->pr;
    return raw_run(r, &r->fwd, pr->w.data, pr->x.data, pr->y.data);
}

/* Raw backward without relu (a relu case's raw rows are forward only). */
static int raw_fwdbwd(void *arg)
{
    struct raw *r = arg;
    struct problem *pr = r->pr;
    return raw_fwd(arg) || raw_run(r, &r->dx, pr->w.data, pr->dy.data, pr->dx.data) ||
           raw_run(r, &r->dw, pr->x.data, pr->dy.data, pr->dw.data);
}

/* Raw's products replayed: each captured once as a graph of its own on the problem's buffers, as
 * nnprim's are (docs/LINEAR.md, "Graph replay"), so this side is raw cuBLASLt with the same host
 * saving. 0 when every product of the pass captured; without one the side does not run. */
static int raw_capture(struct raw *r, struct raw_gemm *g, const void *a, const void *b, void *d)
{
    cudaGraph_t gr = NULL;
    if (!g->ok || cudaStreamBeginCapture(r->stream, cudaStreamCaptureModeRelaxed) != cudaSuccess)
        return 1;
    int bad = raw_run(r, g, a, b, d);
    bad |= cudaStreamEndCapture(r->stream, &gr) != cudaSuccess;
    bad = bad || cudaGraphInstantiate(&g->exec, gr, 0) != cudaSuccess;
    if (gr) cudaGraphDestroy(gr);
    if (bad) {
        g->exec = NULL;
        (void)cudaGetLastError();
    }
    return bad;
}

static int raw_capture_all(struct raw *r)
{
    struct problem *pr = r->pr;
    int fwd = raw_capture(r, &r->fwd, pr->w.data, pr->x.data, pr->y.data);
    int dx = raw_capture(r, &r->dx, pr->w.data, pr->dy.data, pr->dx.data);
    int dw = raw_capture(r, &r->dw, pr->x.data, pr->dy.data, pr->dw.data);
    return fwd | ((dx | dw) << 1); /* bit 0: forward failed, bit 1: backward */
}

static int raw_graph_fwd(void *arg)
{
    struct raw *r = arg;
    return cudaGraphLaunch(r->fwd.exec, r->stream) != cudaSuccess;
}

static int raw_graph_fwdbwd(void *arg)
{
    struct raw *r = arg;
    return raw_graph_fwd(arg) || cudaGraphLaunch(r->dx.exec, r->stream) != cudaSuccess ||
           cudaGraphLaunch(r->dw.exec, r->stream) != cudaSuccess;
}

/* The sides of a pass: raw eagerly, raw replayed, nnprim. */
enum { S_RAW, S_GRAPH, S_NNPRIM, S_N };

/* One pass's timing in turns (nn_cli_take_turns): each side's times gather in t. */
struct pass_turns {
    cudaStream_t s;
    int warmup, hold, *held;
    int (*const *fn)(void *);
    void *const *arg;
    double *t[S_N];
    int n[S_N];
};

static int pass_turn(void *arg, int i, int round, int share)
{
    struct pass_turns *pt = arg;
    for (int w = 0; w < (round ? 1 : pt->warmup); w++)
        if (pt->fn[i](pt->arg[i])) return -1;
    int st = nn_cli_gpu_times_us(pt->s, share, pt->fn[i], pt->arg[i], pt->hold, pt->held,
                                 pt->t[i] + pt->n[i]);
    pt->n[i] += share;
    return st;
}

/* The median GPU time of each side (fn[S_*], NULL for a side that does not run) over reps calls,
 * back to back (hold 0) or queued behind a hold, the sides taking turns so that where the GPU
 * drifts during a row (clocks, power) all see it alike. us[i] is -1 where side i failed or does
 * not run; *held is cleared when a hold ran out. */
static void timed(cudaStream_t s, int warmup, int reps, int hold, int (*const fn[S_N])(void *),
                  void *const arg[S_N], double us[S_N], int *held)
{
    struct pass_turns pt = {s, warmup, hold, held, fn, arg, {NULL}, {0}};
    int ok[S_N];
    for (int i = 0; i < S_N; i++) {
        pt.t[i] = fn[i] ? malloc((size_t)reps * sizeof(double)) : NULL;
        ok[i] = pt.t[i] != NULL;
    }
    nn_cli_take_turns(S_N, reps, ok, pass_turn, &pt);
    for (int i = 0; i < S_N; i++) {
        us[i] = ok[i] ? nn_cli_median(pt.t[i], reps) : -1;
        free(pt.t[i]);
    }
}

/* ---------------------------------------------------------------------------------------------
 * Which algorithm each side ran
 */

static const char *raw_epilogue_name(cublasLtEpilogue_t e)
{
    switch (e) {
    case CUBLASLT_EPILOGUE_RELU: return "relu";
    case CUBLASLT_EPILOGUE_BIAS: return "bias";
    case CUBLASLT_EPILOGUE_RELU_BIAS: return "relu_bias";
    case CUBLASLT_EPILOGUE_BGRADB: return "bgradb";
    default: return "default";
    }
}

/* A product as nnprim's verbose line names it: "fwd:cublaslt-bias/a21t20s8k1r0w0c0l0/ws0". */
static void raw_describe(const char *what, const struct raw_gemm *g, char *buf, size_t cap)
{
    char algo[64];
    nn__lt_algo_text(&g->algo, algo, sizeof algo);
    snprintf(buf, cap, "%s:cublaslt-%s/%s/ws%zu", what, raw_epilogue_name(g->epi), algo, g->ws);
}

/* The impl fields of the last linear_forward and linear_backward_ex verbose lines. */
struct verbose_capture {
    char fwd[256], bwd[256];
};

static void capture_impl(const char *line, const char *op, char *out, size_t cap)
{
    static const char prefix[] = "nnprim_verbose,";
    size_t n = strlen(op);
    if (strncmp(line, prefix, sizeof prefix - 1) || strncmp(line + sizeof prefix - 1, op, n) ||
        line[sizeof prefix - 1 + n] != ',')
        return;
    const char *f = strchr(line + sizeof prefix - 1 + n + 1, ','); /* past the backend */
    const char *end = f ? strchr(f + 1, ',') : NULL;
    if (end) snprintf(out, cap, "%.*s", (int)(end - f - 1), f + 1);
}

static void capture_line(nn_log_kind kind, const char *line, void *user)
{
    struct verbose_capture *v = user;
    if (kind != NN_LOG_OP) return;
    capture_impl(line, "linear_forward", v->fwd, sizeof v->fwd);
    capture_impl(line, "linear_backward_ex", v->bwd, sizeof v->bwd);
}

/* One forward+backward of the case on a verbose twin of its context (same settings; plans are
 * found the same way), and raw's products, printed under the case's rows. */
static void print_algorithms(nn_ctx *twin, const struct problem *pr, const struct raw *raw)
{
    struct verbose_capture v = {{0}, {0}};
    struct problem tp = *pr;
    tp.ctx = twin;
    nn_set_log_callback(capture_line, &v);
    int failed = nnprim_fwdbwd(&tp);
    nn_set_log_callback(NULL, NULL);
    /* the twin's stream wrote the case's outputs: done before they are freed or timed again */
    failed |= nn_ctx_synchronize(twin) != NN_OK;
    char f[160], x[160], w[160];
    raw_describe("fwd", &raw->fwd, f, sizeof f);
    raw_describe("dx", &raw->dx, x, sizeof x);
    raw_describe("dw", &raw->dw, w, sizeof w);
    printf("  algorithms, raw:    %s | %s %s\n", raw->fwd.ok ? f : "-", raw->dx.ok ? x : "-",
           raw->dw.ok ? w : "-");
    printf("  algorithms, nnprim: %s | %s\n", failed ? "(the verbose call failed)" : v.fwd,
           failed ? "" : v.bwd);
}

static int bench_gpu(nn_ctx *ctx[2], nn_ctx *twin[2], const struct opts *o)
{
    int reps = o->reps ? o->reps : 100, warmup = o->warmup ? o->warmup : 10;
    nn_settings cs;
    nn_device_info d = {.name = "unknown device"};
    nn_ctx_get_settings(ctx[0], &cs);
    nn_device_get_info(cs.device, &d);
    printf("%s, cuBLASLt %zu, CUDA events, median of %d after %d warm-up\n", d.name,
           cublasLtGetVersion(), reps, warmup);
    printf("%-34s %-8s %-9s %10s %10s %8s %9s %9s %9s %9s\n", "case", "pass", "impl", "us",
           "gpu_us", "TFLOP/s", "vs raw", "gpu/raw", "vs graph", "gpu/graph");
    int rc = 0, all_held = 1;
    size_t n = o->has_case ? 1 : sizeof gpu_shapes / sizeof gpu_shapes[0];
    for (size_t si = 0; si < n && !rc; si++) {
        struct nn_linear_case c;
        if (case_of(o, gpu_shapes[si], &c)) return 1;
        nn_ctx *cx = ctx[c.math == NN_MATH_TF32], *tw = twin[c.math == NN_MATH_TF32];
        cudaStream_t stream = (cudaStream_t)nn_ctx_stream(cx);
        struct problem pr;
        struct raw raw;
        if (problem_init(cx, &c, &pr)) return 1;
        if (raw_init(&raw, &pr, stream)) {
            problem_free(&pr);
            return 1;
        }
        char name[256];
        nn_linear_case_format(&c, name, sizeof name);
        int relu = c.p.activation == NN_ACTIVATION_RELU, uncaptured = raw_capture_all(&raw);
        for (int bwd = 0; bwd < 2 && !rc; bwd++) {
            const char *pass = bwd ? "fwd+bwd" : "fwd";
            int have_raw = raw.fwd.ok && (!bwd || (!relu && raw.dx.ok && raw.dw.ok));
            int have_graph = have_raw && !(uncaptured & (bwd ? 3 : 1));
            int (*rf)(void *) = bwd ? raw_fwdbwd : raw_fwd,
                           (*gf)(void *) = bwd ? raw_graph_fwdbwd : raw_graph_fwd,
                           (*nf)(void *) = bwd ? nnprim_fwdbwd : nnprim_fwd;
            /* [side][0] back to back, [side][1] held */
            double t_us[S_N][2] = {{0, 0}, {0, 0}, {0, 0}};
            int (*const fn[S_N])(void *) = {have_raw ? rf : NULL, have_graph ? gf : NULL, nf};
            void *const arg[S_N] = {&raw, &raw, &pr};
            for (int h = 0; h < 2; h++) {
                double us[S_N];
                timed(stream, warmup, reps, h, fn, arg, us, &all_held);
                for (int i = 0; i < S_N; i++)
                    t_us[i][h] = i == S_NNPRIM || us[i] > 0 ? us[i] : 0;
                if (us[S_NNPRIM] < 0) break;
            }
            const double *n_us = t_us[S_NNPRIM], *r_us = t_us[S_RAW], *g_us = t_us[S_GRAPH];
            if (n_us[0] < 0 || n_us[1] < 0) {
                rc = fail(bwd ? "nnprim forward+backward" : "nnprim forward");
                break;
            }
            static const double none[2] = {0, 0};
            int raw_ran = have_raw && r_us[0] > 0 && r_us[1] > 0;
            if (raw_ran) print_row(name, pass, "cublaslt", r_us, flops(&pr, bwd), none, none);
            if (raw_ran && g_us[0] > 0 && g_us[1] > 0)
                print_row(name, pass, "lt-graph", g_us, flops(&pr, bwd), r_us, none);
            print_row(name, pass, "nnprim", n_us, flops(&pr, bwd), raw_ran ? r_us : none,
                      raw_ran && g_us[0] > 0 && g_us[1] > 0 ? g_us : none);
        }
        if (!rc) print_algorithms(tw, &pr, &raw);
        raw_fini(&raw);
        problem_free(&pr);
    }
    if (!all_held)
        printf("# a hold ran out before its calls were queued: those gpu_us figures include the "
               "host's issuing\n");
    return rc;
}
#endif

static nn_ctx *make_ctx(nn_backend backend, nn_math_mode math, int verbose)
{
    nn_settings s;
    nn_settings_from_env(&s);
    s.backend = backend;
    s.math_mode = math;
    s.verbose = verbose;
    nn_ctx *ctx = NULL;
    if (nn_ctx_create(&ctx, &s) != NN_OK) fail("creating a context");
    return ctx;
}

int nn_cli_bench_linear(int argc, char **argv)
{
    struct opts o;
    int prc = parse(argc, argv, &o);
    if (prc != NN_CLI_RUN) return prc;
    int ndev = 0;
    nn_device_count(&ndev);
    int gpu = !o.cpu && ndev > 0 && (nn_build_features() & NN_FEATURE_CUDNN);
    int rc = 1;
#if NN_HAVE_CUDNN
    if (gpu) {
        nn_ctx *ctx[2] = {make_ctx(NN_BACKEND_CUDNN, NN_MATH_STRICT_FP32, 0),
                          make_ctx(NN_BACKEND_CUDNN, NN_MATH_TF32, 0)};
        /* verbose twins for the algorithm lines; their header lines go nowhere */
        struct verbose_capture none;
        nn_set_log_callback(capture_line, &none);
        nn_ctx *twin[2] = {make_ctx(NN_BACKEND_CUDNN, NN_MATH_STRICT_FP32, 1),
                           make_ctx(NN_BACKEND_CUDNN, NN_MATH_TF32, 1)};
        nn_set_log_callback(NULL, NULL);
        if (ctx[0] && ctx[1] && twin[0] && twin[1]) rc = bench_gpu(ctx, twin, &o);
        for (int i = 0; i < 2; i++) {
            nn_ctx_destroy(ctx[i]);
            nn_ctx_destroy(twin[i]);
        }
        return rc;
    }
#endif
    (void)gpu;
    nn_ctx *ref = make_ctx(NN_BACKEND_REF, NN_MATH_STRICT_FP32, 0);
    if (ref) rc = bench_cpu(ref, &o);
    nn_ctx_destroy(ref);
    return rc;
}

/* nn_linear_workspace_size(): 0 on the reference backend, its checks, and on a GPU the bytes it
 * gives against what the call then really takes (counted by a user allocator, which sees every
 * device allocation at its requested size), with the call finding the plans the query cached,
 * and the context's kept workspace given back with the context. */
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "gpu.h"
#include "fixture.h"
#include "peak_alloc.h"
#include "nn_config.h"
#include "nnprim/nnprim.h"

#if NN_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

#define OK(call) cr_assert_eq((call), NN_OK, "%s: %s", #call, nn_last_error()->message)

Test(linear_workspace, reference_takes_no_pool_memory)
{
    nn_ctx *r = nn_test_ctx_math(NN_BACKEND_REF, NN_MATH_STRICT_FP32);
    nn_linear_params p;
    OK(nn_linear_params_default(&p));
    p.activation = NN_ACTIVATION_RELU;
    nn_tensor x = nn_test_ints(r, NN_DTYPE_F32, 3, (int64_t[]){2, 3, 8});
    nn_tensor w = nn_test_ints(r, NN_DTYPE_F32, 2, (int64_t[]){5, 8});
    nn_tensor b = nn_test_ints(r, NN_DTYPE_F32, 1, (int64_t[]){5});
    for (unsigned pass = 0; pass < 8; pass++) {
        size_t n = 77;
        OK(nn_linear_workspace_size(r, &p, &x, &w, &b, pass, 0, &n));
        cr_expect_eq(n, 0, "pass %u: %zu", pass, n);
    }
    nn_tensor *ts[] = {&x, &w, &b};
    for (int i = 0; i < 3; i++)
        OK(nn_tensor_free(r, ts[i]));
    nn_ctx_destroy(r);
}

Test(linear_workspace, checks_its_arguments)
{
    nn_ctx *r = nn_test_ctx_math(NN_BACKEND_REF, NN_MATH_STRICT_FP32);
    nn_linear_params p;
    OK(nn_linear_params_default(&p));
    nn_tensor x = nn_test_ints(r, NN_DTYPE_F32, 2, (int64_t[]){4, 8});
    nn_tensor w = nn_test_ints(r, NN_DTYPE_F32, 2, (int64_t[]){5, 8});
    nn_tensor w7 = nn_test_ints(r, NN_DTYPE_F32, 2, (int64_t[]){5, 7});
    nn_tensor b4 = nn_test_ints(r, NN_DTYPE_F32, 1, (int64_t[]){4});
    size_t n = 5;
    struct {
        nn_status st;
        const char *text;
    } want[] = {
        {NN_E_INVALID_ARG, "nn_linear_workspace_size: ctx must not be NULL"},
        {NN_E_INVALID_ARG, "nn_linear_workspace_size: bytes must not be NULL"},
        {NN_E_INVALID_ARG, "nn_linear_workspace_size: p (the parameters) must not be NULL"},
        {NN_E_INVALID_ARG, "nn_linear_workspace_size: pass must be NN_LINEAR_PASS_FORWARD (0)"},
        {NN_E_INVALID_ARG, "nn_linear_workspace_size: x must not be NULL"},
        {NN_E_SHAPE, "nn_linear_workspace_size: w.dims[1] must be x.dims[1] = 8"},
        {NN_E_SHAPE, "nn_linear_workspace_size: b.dims[0] must be 5"},
    };
    for (int i = 0; i < 7; i++) {
        nn_status st;
        switch (i) {
        case 0: st = nn_linear_workspace_size(NULL, &p, &x, &w, NULL, 0, 0, &n); break;
        case 1: st = nn_linear_workspace_size(r, &p, &x, &w, NULL, 0, 0, NULL); break;
        case 2: st = nn_linear_workspace_size(r, NULL, &x, &w, NULL, 0, 0, &n); break;
        case 3: st = nn_linear_workspace_size(r, &p, &x, &w, NULL, 8, 0, &n); break;
        case 4: st = nn_linear_workspace_size(r, &p, NULL, &w, NULL, 0, 0, &n); break;
        case 5:
            st = nn_linear_workspace_size(r, &p, &x, &w7, NULL, NN_LINEAR_PASS_DX, 0, &n);
            break;
        default: st = nn_linear_workspace_size(r, &p, &x, &w, &b4, 0, 0, &n);
        }
        cr_expect_eq(st, want[i].st, "case %d: %d", i, (int)st);
        cr_expect(strstr(nn_last_error()->message, want[i].text), "case %d: %s", i,
                  nn_last_error()->message);
    }
    cr_expect_eq(n, 5, "bytes untouched on failure");
    nn_tensor *ts[] = {&x, &w, &w7, &b4};
    for (int i = 0; i < 4; i++)
        OK(nn_tensor_free(r, ts[i]));
    nn_ctx_destroy(r);
}

/* ---------------------------------------------------------------------------------------------
 * GPU: the query against a counting allocator
 */

#if NN_HAVE_CUDA
struct io {
    nn_tensor x, w, b, y, dy, dx, dw, db;
};

/* One call of pass (forward, or backward with the outputs its bits name and the accumulate
 * bits acc, through a pullback made first): its peak above what was live before it. */
static long call_pass(nn_ctx *g, struct nn_test_peak *k, const nn_linear_params *p, struct io *t,
                      int bias, unsigned pass, unsigned acc)
{
    nn_linear_pullback *pb = NULL;
    nn_backward_options o = {.accumulate = acc};
    if (pass) OK(nn_linear_forward(g, p, &t->x, &t->w, bias ? &t->b : NULL, &t->y, &pb));
    OK(nn_ctx_synchronize(g));
    long base = nn_test_peak_mark(k);
    if (!pass)
        OK(nn_linear_forward(g, p, &t->x, &t->w, bias ? &t->b : NULL, &t->y, NULL));
    else
        OK(nn_linear_backward_ex(g, &pb, &o, &t->dy, (pass & NN_LINEAR_PASS_DX) ? &t->dx : NULL,
                                 (pass & NN_LINEAR_PASS_DW) ? &t->dw : NULL,
                                 (pass & NN_LINEAR_PASS_DB) ? &t->db : NULL));
    return nn_test_peak_since(k, base);
}

/* The first call of pass after the query may add to the context's kept workspace (a product's
 * workspace of at most 1 MiB, which the query leaves out); the peak of the next, above what was
 * live before it, must equal the query, and neither may miss a plan the query made. */
static void run_pass(nn_ctx *g, struct nn_test_peak *k, const nn_linear_params *p, struct io *t,
                     int bias, unsigned pass, unsigned acc, const char *what)
{
    size_t q;
    OK(nn_linear_workspace_size(g, p, &t->x, &t->w, bias ? &t->b : NULL, pass, acc, &q));
    nn_plan_cache_stats before, after;
    OK(nn_plan_cache_get_stats(g, &before));
    long first = call_pass(g, k, p, t, bias, pass, acc);
    cr_expect(first >= 0 && (size_t)first >= q && (size_t)first <= q + (1u << 20),
              "%s pass %u: the first call took %ld bytes, the query said %zu (+ at most 1 MiB "
              "kept)",
              what, pass, first, q);
    long took = call_pass(g, k, p, t, bias, pass, acc);
    OK(nn_plan_cache_get_stats(g, &after));
    cr_expect(took >= 0 && (size_t)took == q,
              "%s pass %u: the call took %ld bytes, the query said %zu", what, pass, took, q);
    cr_expect_eq(after.misses, before.misses, "%s pass %u: the call missed a plan the query built",
                 what, pass);
    cr_log_info("%s pass %u: query %zu bytes, first call's peak %ld, next call's %ld", what, pass,
                q, first, took);
}
#endif

Test(linear_workspace_gpu, query_equals_what_each_pass_takes)
{
    NN_REQUIRE_GPU();
#if NN_HAVE_CUDA
    struct nn_test_peak k;
    nn_test_peak_install(&k);
    long live0 = nn_test_peak_mark(&k);
    /* a classifier head, a square layer large enough for split-k workspaces, TF32 */
    const struct {
        int64_t m, in, out;
        nn_dtype dt;
        nn_math_mode math;
    } shapes[] = {{64, 512, 10, NN_DTYPE_F32, NN_MATH_STRICT_FP32},
                  {96, 2048, 256, NN_DTYPE_F32, NN_MATH_TF32},
                  {64, 512, 10, NN_DTYPE_F16, NN_MATH_STRICT_FP32},
                  {40, 96, 24, NN_DTYPE_BF16, NN_MATH_STRICT_FP32}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        nn_ctx *g = nn_test_ctx_math(NN_BACKEND_CUDNN, shapes[s].math);
        nn_dtype dt = shapes[s].dt;
        const int64_t xd[] = {shapes[s].m, shapes[s].in}, wd[] = {shapes[s].out, shapes[s].in};
        const int64_t yd[] = {shapes[s].m, shapes[s].out};
        struct io t = {nn_test_ints(g, dt, 2, xd),
                       nn_test_ints(g, dt, 2, wd),
                       nn_test_ints(g, dt, 1, &shapes[s].out),
                       nn_test_ints(g, dt, 2, yd),
                       nn_test_ints(g, dt, 2, yd),
                       nn_test_ints(g, dt, 2, xd),
                       nn_test_ints(g, dt, 2, wd),
                       nn_test_ints(g, dt, 1, &shapes[s].out)};
        for (int v = 0; v < 4; v++) { /* relu, bias, accumulated db */
            nn_linear_params p;
            OK(nn_linear_params_default(&p));
            p.activation = (v & 1) ? NN_ACTIVATION_RELU : NN_ACTIVATION_IDENTITY;
            int bias = v != 0;
            unsigned acc = v == 3 ? NN_ACCUMULATE_DB : 0;
            char what[96];
            snprintf(what, sizeof what, "m%lldin%lldout%lld %s%s%s%s", (long long)shapes[s].m,
                     (long long)shapes[s].in, (long long)shapes[s].out, nn_dtype_name(dt),
                     shapes[s].math == NN_MATH_TF32 ? " tf32" : "", (v & 1) ? " relu" : "",
                     v == 3 ? " accdb" : "");
            for (unsigned pass = 0; pass < 8; pass++)
                run_pass(g, &k, &p, &t, bias, pass, acc, what);
        }
        nn_tensor *ts[] = {&t.x, &t.w, &t.b, &t.y, &t.dy, &t.dx, &t.dw, &t.db};
        for (int i = 0; i < 8; i++)
            OK(nn_tensor_free(g, ts[i]));
        nn_ctx_destroy(g);
        cr_expect_eq(nn_test_peak_mark(&k), live0,
                     "%lld x %lld x %lld: the context gave back every block, its kept workspace "
                     "with it",
                     (long long)shapes[s].m, (long long)shapes[s].in, (long long)shapes[s].out);
    }
    nn_test_peak_remove();
#endif
}

/* y of more than INT_MAX elements (x [32769, 8], w [65536, 8], f16: y and dy 4 GiB each): relu's
 * mask in backward runs through cuDNN's int-sized calls, so the backward call refuses it, and the
 * query must answer the same status, naming itself. Forward fuses relu where cuBLASLt has the
 * epilogue (then both succeed) and otherwise refuses too: the query answers as the call did. */
Test(linear_workspace_gpu, query_refuses_what_the_call_refuses_beyond_int)
{
    NN_REQUIRE_GPU();
    nn_ctx *g = nn_test_ctx_math(NN_BACKEND_CUDNN, NN_MATH_STRICT_FP32);
    nn_linear_params p;
    OK(nn_linear_params_default(&p));
    p.activation = NN_ACTIVATION_RELU;
    const int64_t xd[] = {32769, 8}, wd[] = {65536, 8}, yd[] = {32769, 65536};
    nn_tensor x = nn_test_ints(g, NN_DTYPE_F16, 2, xd), w = nn_test_ints(g, NN_DTYPE_F16, 2, wd);
    nn_tensor y, dy, dx = nn_test_ints(g, NN_DTYPE_F16, 2, xd);
    OK(nn_tensor_empty(g, NN_DTYPE_F16, 2, yd, &y));
    OK(nn_tensor_empty(g, NN_DTYPE_F16, 2, yd, &dy));
    size_t q = 77;
    nn_status qf = nn_linear_workspace_size(g, &p, &x, &w, NULL, NN_LINEAR_PASS_FORWARD, 0, &q);
    char qmsg[512];
    snprintf(qmsg, sizeof qmsg, "%s", nn_last_error()->message);
    nn_linear_pullback *pb = NULL;
    nn_status cf = nn_linear_forward(g, &p, &x, &w, NULL, &y, &pb);
    cr_expect_eq(qf, cf, "forward: the query said %s (%s), the call %s (%s)", nn_status_name(qf),
                 qmsg, nn_status_name(cf), nn_last_error()->message);
    if (cf != NN_OK) {
        cr_expect_eq(cf, NN_E_UNSUPPORTED, "an unfused relu beyond int: %s",
                     nn_last_error()->message);
        cr_expect(strncmp(qmsg, "nn_linear_workspace_size: ", 26) == 0, "%s", qmsg);
        cr_log_info("forward: relu not fused for this shape; both refused");
    } else {
        q = 77;
        nn_status qb = nn_linear_workspace_size(g, &p, &x, &w, NULL, NN_LINEAR_PASS_DX, 0, &q);
        snprintf(qmsg, sizeof qmsg, "%s", nn_last_error()->message);
        cr_expect_eq(qb, NN_E_UNSUPPORTED, "backward query: %s (%s)", nn_status_name(qb), qmsg);
        cr_expect(strncmp(qmsg, "nn_linear_workspace_size: ", 26) == 0, "%s", qmsg);
        cr_expect_eq(q, 77, "bytes untouched on failure");
        nn_status cb = nn_linear_backward(g, &pb, &dy, &dx, NULL, NULL);
        cr_expect_eq(cb, qb, "backward: the call said %s (%s)", nn_status_name(cb),
                     nn_last_error()->message);
        cr_expect(strncmp(nn_last_error()->message, "nn_linear_backward: ", 20) == 0, "%s",
                  nn_last_error()->message);
        OK(nn_linear_pullback_free(&pb));
    }
    nn_tensor *ts[] = {&x, &w, &y, &dy, &dx};
    for (int i = 0; i < 5; i++)
        OK(nn_tensor_free(g, ts[i]));
    nn_ctx_destroy(g);
}

#if NN_HAVE_CUDA
/* Holds a stream back: work queued after it waits this long (no flag to open, so a call that
 * waits on the host cannot deadlock the test). */
static void CUDART_CB sleep_ms(void *arg)
{
    long ms = (long)(intptr_t)arg;
    struct timespec t = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&t, &t) != 0) {}
}

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}
#endif

/* A stand-alone db product (accumulated db) reads its plan's column of ones, which the query
 * writes on the context's stream while that stream is held back by a sleeping host function; the
 * calls then run on another stream, which must wait for the write (an event, not the host), and
 * db must be the column sums of dy exactly. Round 1: the cached plan's ones serve the calls on
 * the stream that wrote them, held back again. */
Test(linear_workspace_gpu, db_ones_written_on_a_held_stream_serve_another)
{
    NN_REQUIRE_GPU();
#if NN_HAVE_CUDA
    nn_ctx *g = nn_test_ctx_math(NN_BACKEND_CUDNN, NN_MATH_STRICT_FP32);
    nn_ctx *r = nn_test_ctx_math(NN_BACKEND_REF, NN_MATH_STRICT_FP32);
    nn_linear_params p;
    OK(nn_linear_params_default(&p));
    /* BGRADB does not accumulate: db is a product of ones */
    nn_backward_options acc_db = {.accumulate = NN_ACCUMULATE_DB};
    enum { M = 64, IN = 16, OUT = 8 };
    const int64_t xd[] = {M, IN}, wd[] = {OUT, IN}, yd[] = {M, OUT}, bd[] = {OUT};
    nn_tensor x = nn_test_ints(g, NN_DTYPE_F32, 2, xd), w = nn_test_ints(g, NN_DTYPE_F32, 2, wd);
    nn_tensor dy = nn_test_ints(g, NN_DTYPE_F32, 2, yd), y, db;
    OK(nn_tensor_empty(g, NN_DTYPE_F32, 2, yd, &y));
    OK(nn_tensor_empty(g, NN_DTYPE_F32, 1, bd, &db));
    float hdy[M * OUT], hdb[OUT];
    nn_tensor v;
    OK(nn_tensor_wrap(r, hdy, NN_DTYPE_F32, 2, yd, NULL, &v));
    OK(nn_tensor_copy(g, &v, &dy));
    void *home = NULL;
    OK(nn_ctx_get_stream(g, &home));
    cudaStream_t other;
    cr_assert_eq(cudaStreamCreateWithFlags(&other, cudaStreamNonBlocking), cudaSuccess);
    for (int round = 0; round < 2; round++) {
        OK(nn_tensor_fill_constant(g, &db, 0.0));
        OK(nn_ctx_synchronize(g));
        cr_assert_eq(cudaLaunchHostFunc((cudaStream_t)home, sleep_ms, (void *)(intptr_t)300),
                     cudaSuccess);
        size_t q;
        double t0 = now_ms();
        OK(nn_linear_workspace_size(g, &p, &x, &w, NULL, NN_LINEAR_PASS_DB, NN_ACCUMULATE_DB, &q));
        cr_log_info("round %d: the query returned after %.1f ms (the stream is held 300 ms)", round,
                    now_ms() - t0);
        OK(nn_ctx_set_stream(g, round == 0 ? (void *)other : home));
        nn_linear_pullback *pb = NULL;
        OK(nn_linear_forward(g, &p, &x, &w, NULL, &y, &pb));
        OK(nn_linear_backward_ex(g, &pb, &acc_db, &dy, NULL, NULL, &db));
        OK(nn_tensor_wrap(r, hdb, NN_DTYPE_F32, 1, bd, NULL, &v));
        OK(nn_tensor_copy(g, &v, &db));
        for (int j = 0; j < OUT; j++) {
            float want = 0;
            for (int i = 0; i < M; i++)
                want += hdy[i * OUT + j];
            cr_expect_eq(hdb[j], want, "round %d: db[%d] = %g, the sum of dy's column %g", round, j,
                         hdb[j], want);
        }
    }
    OK(nn_ctx_set_stream(g, home));
    nn_tensor *ts[] = {&x, &w, &dy, &y, &db};
    for (int i = 0; i < 5; i++)
        OK(nn_tensor_free(g, ts[i]));
    nn_ctx_destroy(g);
    nn_ctx_destroy(r);
    cr_assert_eq(cudaStreamDestroy(other), cudaSuccess);
#endif
}

/* nn_softmax_workspace_size() and nn_softmax_cross_entropy_workspace_size(): 0 on the reference
 * backend, their checks, and on a GPU the bytes they give against what the call then really
 * takes (counted by a user allocator, which sees every device allocation at its requested size).
 * And the cross-entropy's per-shape scratch: calls back to back with other targets (the pinned
 * staging buffer rewritten only after its last upload) give the reference's losses. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "gpu.h"
#include "fixture.h"
#include "peak_alloc.h"
#include "nn_config.h"
#include "nnprim/nnprim.h"

#if NN_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

#define OK(call) cr_assert_eq((call), NN_OK, "%s: %s", #call, nn_last_error()->message)

Test(softmax_workspace, reference_takes_no_pool_memory)
{
    nn_ctx *r = nn_test_ctx(NN_BACKEND_REF);
    nn_softmax_params p;
    OK(nn_softmax_params_default(&p));
    nn_tensor x = nn_test_ints(r, NN_DTYPE_F32, 3, (int64_t[]){2, 5, 3});
    for (int pass = 0; pass < 2; pass++) {
        size_t n = 77, m = 78;
        OK(nn_softmax_workspace_size(r, &p, &x, (nn_softmax_pass)pass, &n));
        OK(nn_softmax_cross_entropy_workspace_size(r, &x, (nn_softmax_pass)pass, &m));
        cr_expect_eq(n, 0, "softmax pass %d: %zu", pass, n);
        cr_expect_eq(m, 0, "cross-entropy pass %d: %zu", pass, m);
    }
    OK(nn_tensor_free(r, &x));
    nn_ctx_destroy(r);
}

Test(softmax_workspace, checks_its_arguments)
{
    nn_ctx *r = nn_test_ctx(NN_BACKEND_REF);
    nn_softmax_params p;
    OK(nn_softmax_params_default(&p));
    nn_tensor x = nn_test_ints(r, NN_DTYPE_F32, 2, (int64_t[]){4, 8});
    nn_tensor x1 = nn_test_ints(r, NN_DTYPE_F32, 1, (int64_t[]){4});
    size_t n = 5;
    struct {
        nn_status st;
        const char *text;
    } want[] = {
        {NN_E_INVALID_ARG, "nn_softmax_workspace_size: ctx must not be NULL"},
        {NN_E_INVALID_ARG, "nn_softmax_workspace_size: bytes must not be NULL"},
        {NN_E_INVALID_ARG, "nn_softmax_workspace_size: p (the parameters) must not be NULL"},
        {NN_E_INVALID_ARG, "nn_softmax_workspace_size: pass must be NN_SOFTMAX_PASS_FORWARD (0)"},
        {NN_E_INVALID_ARG, "nn_softmax_cross_entropy_workspace_size: x must not be NULL"},
        {NN_E_SHAPE, "nn_softmax_cross_entropy_workspace_size: x.rank must be >= 2"},
        {NN_E_INVALID_ARG, "nn_softmax_cross_entropy_workspace_size: pass must be"},
    };
    for (int i = 0; i < 7; i++) {
        nn_status st;
        switch (i) {
        case 0: st = nn_softmax_workspace_size(NULL, &p, &x, NN_SOFTMAX_PASS_FORWARD, &n); break;
        case 1: st = nn_softmax_workspace_size(r, &p, &x, NN_SOFTMAX_PASS_FORWARD, NULL); break;
        case 2: st = nn_softmax_workspace_size(r, NULL, &x, NN_SOFTMAX_PASS_FORWARD, &n); break;
        case 3: st = nn_softmax_workspace_size(r, &p, &x, (nn_softmax_pass)2, &n); break;
        case 4:
            st = nn_softmax_cross_entropy_workspace_size(r, NULL, NN_SOFTMAX_PASS_FORWARD, &n);
            break;
        case 5:
            st = nn_softmax_cross_entropy_workspace_size(r, &x1, NN_SOFTMAX_PASS_BACKWARD, &n);
            break;
        default: st = nn_softmax_cross_entropy_workspace_size(r, &x, (nn_softmax_pass)-1, &n);
        }
        cr_expect_eq(st, want[i].st, "case %d: %d", i, (int)st);
        cr_expect(strstr(nn_last_error()->message, want[i].text), "case %d: %s", i,
                  nn_last_error()->message);
    }
    cr_expect_eq(n, 5, "bytes untouched on failure");
    OK(nn_tensor_free(r, &x));
    OK(nn_tensor_free(r, &x1));
    nn_ctx_destroy(r);
}

/* ---------------------------------------------------------------------------------------------
 * GPU
 */

#if NN_HAVE_CUDA
static void expect_took(struct nn_test_peak *k, long base, size_t q, const char *what)
{
    long took = nn_test_peak_since(k, base);
    cr_expect(took >= 0 && (size_t)took == q, "%s: the call took %ld bytes, the query said %zu",
              what, took, q);
    cr_log_info("%s: query %zu bytes, call peak %ld", what, q, took);
}
#endif

Test(softmax_workspace_gpu, query_equals_what_each_call_takes)
{
    NN_REQUIRE_GPU();
#if NN_HAVE_CUDA
    struct nn_test_peak k;
    nn_test_peak_install(&k);
    nn_ctx *g = nn_test_ctx(NN_BACKEND_CUDNN);
    const nn_dtype types[] = {NN_DTYPE_F32, NN_DTYPE_F16, NN_DTYPE_BF16};
    const int64_t shapes[][3] = {{64, 10, 1}, {20, 65, 1}, {3, 7, 5}};
    for (int t = 0; t < 3; t++)
        for (int sh = 0; sh < 3; sh++) {
            nn_dtype dt = types[t];
            int64_t n = shapes[sh][0], c = shapes[sh][1], s = shapes[sh][2];
            int rank = s > 1 ? 3 : 2;
            const int64_t xd[] = {n, c, s}, ld[] = {n, s};
            nn_tensor x = nn_test_ints(g, dt, rank, xd), y = nn_test_ints(g, dt, rank, xd),
                      dy = nn_test_ints(g, dt, rank, xd);
            nn_tensor dx = nn_test_ints(g, dt, rank, xd), loss = nn_test_ints(g, dt, rank - 1, ld);
            nn_tensor dloss = nn_test_ints(g, dt, rank - 1, ld), tg;
            OK(nn_tensor_empty(g, NN_DTYPE_F32, rank - 1, ld, &tg)); /* int32 storage */
            int32_t host[64 * 5];
            for (int64_t i = 0; i < n * s; i++)
                host[i] = (int32_t)((i * 7 + 3) % c);
            OK(cudaMemcpy(tg.data, host, (size_t)(n * s) * 4, cudaMemcpyHostToDevice) == cudaSuccess
                   ? NN_OK
                   : NN_E_CUDA);
            nn_class_targets targets = {tg.data, NN_INDEX_I32, {0, 0}};
            char what[96];
            long base;
            size_t q;
            /* softmax: no pool memory either way */
            nn_softmax_params p;
            OK(nn_softmax_params_default(&p));
            nn_softmax_pullback *spb = NULL;
            OK(nn_softmax_workspace_size(g, &p, &x, NN_SOFTMAX_PASS_FORWARD, &q));
            base = nn_test_peak_mark(&k);
            OK(nn_softmax_forward(g, &p, &x, &y, &spb));
            snprintf(what, sizeof what, "softmax %s n%lld c%lld s%lld fwd", nn_dtype_name(dt),
                     (long long)n, (long long)c, (long long)s);
            expect_took(&k, base, q, what);
            OK(nn_softmax_workspace_size(g, &p, &x, NN_SOFTMAX_PASS_BACKWARD, &q));
            base = nn_test_peak_mark(&k);
            OK(nn_softmax_backward(g, &spb, &dy, &dx));
            what[strlen(what) - 3] = 0;
            strcat(what, "bwd");
            expect_took(&k, base, q, what);
            /* cross-entropy: forward (training and inference), backward */
            for (int train = 0; train < 2; train++) {
                nn_softmax_cross_entropy_pullback *pb = NULL;
                OK(nn_softmax_cross_entropy_workspace_size(g, &x, NN_SOFTMAX_PASS_FORWARD, &q));
                base = nn_test_peak_mark(&k);
                OK(nn_softmax_cross_entropy_forward(g, &x, &targets, &loss, train ? &pb : NULL));
                snprintf(what, sizeof what, "xent %s n%lld c%lld s%lld fwd%s", nn_dtype_name(dt),
                         (long long)n, (long long)c, (long long)s, train ? " train" : "");
                expect_took(&k, base, q, what);
                if (!train) continue;
                OK(nn_softmax_cross_entropy_workspace_size(g, &x, NN_SOFTMAX_PASS_BACKWARD, &q));
                base = nn_test_peak_mark(&k);
                OK(nn_softmax_cross_entropy_backward(g, &pb, &dloss, &dx));
                strcat(what, " bwd");
                expect_took(&k, base, q, what);
            }
            nn_tensor *ts[] = {&x, &y, &dy, &dx, &loss, &dloss, &tg};
            for (int i = 0; i < 7; i++)
                OK(nn_tensor_free(g, ts[i]));
        }
    nn_ctx_destroy(g);
    nn_test_peak_remove();
#endif
}

/* Forward calls of one shape back to back (no synchronisation between them), each with other
 * host targets: every loss must be the reference's, so each upload saw its own targets (the
 * staging buffer is rewritten only after its last upload). */
Test(softmax_workspace_gpu, staged_targets_follow_the_targets)
{
    NN_REQUIRE_GPU();
#if NN_HAVE_CUDA
    nn_ctx *g = nn_test_ctx(NN_BACKEND_CUDNN), *r = nn_test_ctx(NN_BACKEND_REF);
    const int64_t n = 16, c = 33, xd[] = {16, 33};
    enum { CALLS = 6 };
    nn_tensor xh = nn_test_ints(r, NN_DTYPE_F32, 2, xd), xg, lg[CALLS], lh;
    OK(nn_tensor_empty(g, NN_DTYPE_F32, 2, xd, &xg));
    OK(nn_tensor_copy(g, &xg, &xh));
    OK(nn_tensor_empty(r, NN_DTYPE_F32, 1, &n, &lh));
    int64_t t[CALLS][16];
    for (int k = 0; k < CALLS; k++) {
        for (int64_t i = 0; i < n; i++)
            t[k][i] = (i * (k + 3) + k) % c;
        OK(nn_tensor_empty(g, NN_DTYPE_F32, 1, &n, &lg[k]));
        nn_class_targets tg = {t[k], NN_INDEX_I64, {0, 0}};
        OK(nn_softmax_cross_entropy_forward(g, &xg, &tg, &lg[k], NULL));
    }
    for (int k = 0; k < CALLS; k++) {
        nn_class_targets tg = {t[k], NN_INDEX_I64, {0, 0}};
        OK(nn_softmax_cross_entropy_forward(r, &xh, &tg, &lh, NULL));
        float got[16];
        nn_tensor gh;
        OK(nn_tensor_wrap(r, got, NN_DTYPE_F32, 1, &n, NULL, &gh));
        OK(nn_tensor_copy(g, &gh, &lg[k]));
        const float *want = lh.data;
        for (int64_t i = 0; i < n; i++)
            cr_expect(fabsf(got[i] - want[i]) <= 1e-5f * (1 + fabsf(want[i])),
                      "call %d, sample %lld: %g, the reference %g", k, (long long)i, got[i],
                      want[i]);
        OK(nn_tensor_free(g, &lg[k]));
    }
    OK(nn_tensor_free(g, &xg));
    OK(nn_tensor_free(r, &xh));
    OK(nn_tensor_free(r, &lh));
    nn_ctx_destroy(g);
    nn_ctx_destroy(r);
#endif
}

/* The cuDNN recurrent path against the reference, and the traps of RNN.md as tests. GPU only:
 * every test skips with the reason on a machine without one. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "gpu.h"
#include "nnprim/nnprim.h"
#include "tests/harness/rnn_case.h"

static nn_ctx *make_ctx(nn_backend backend, nn_math_mode math, int verbose)
{
    nn_settings s;
    nn_settings_from_env(&s);
    s.backend = backend;
    s.math_mode = math;
    s.verbose = verbose;
    nn_ctx *ctx = NULL;
    cr_assert_eq(nn_ctx_create(&ctx, &s), NN_OK, "%s", nn_last_error()->message);
    return ctx;
}

Test(rnn_cudnn, matches_the_reference_on_the_case_matrix, .timeout = 600)
{
    NN_REQUIRE_GPU();
    nn_ctx *ref = make_ctx(NN_BACKEND_REF, NN_MATH_STRICT_FP32, 0);
    nn_ctx *dev[2] = {make_ctx(NN_BACKEND_CUDNN, NN_MATH_STRICT_FP32, 0),
                      make_ctx(NN_BACKEND_CUDNN, NN_MATH_TF32, 0)};
    static char buf[1 << 16];
    FILE *out = fmemopen(buf, sizeof buf, "w");
    int fails = 0;
    size_t n = nn_rnn_gpu_case_count();
    for (size_t i = 0; i < n; i++) {
        struct nn_rnn_case c;
        cr_assert_eq(nn_rnn_gpu_case(i, &c), 0, "case %zu", i);
        fails += nn_rnn_check_backend(dev[c.math == NN_MATH_TF32], ref, &c, out) != 0;
    }
    fclose(out);
    cr_expect_eq(fails, 0, "%d of %zu cases failed:\n%s", fails, n, buf);
    nn_ctx_destroy(dev[0]);
    nn_ctx_destroy(dev[1]);
    nn_ctx_destroy(ref);
}

/* A 2-layer bidirectional LSTM on the device, inputs in [-1, 1]. */
struct run {
    nn_ctx *ctx;
    nn_rnn_params p;
    nn_dtype dt;
    nn_tensor x, hx, cx, w, y, hy, cy, dy, dhy, dx, dhx, dcx, dw;
    int32_t lengths[3];
    unsigned accumulate; /* the backward's nn_backward_options.accumulate */
};

static nn_tensor dev_tensor(struct run *r, int rank, const int64_t *dims, uint64_t seed)
{
    nn_tensor t;
    cr_assert_eq(nn_tensor_empty(r->ctx, r->dt, rank, dims, &t), NN_OK, "%s",
                 nn_last_error()->message);
    cr_assert_eq(nn_tensor_fill_uniform(r->ctx, &t, -1, 1, seed), NN_OK);
    return t;
}

static void setup(struct run *r, nn_ctx *ctx, nn_dtype dt)
{
    memset(r, 0, sizeof *r);
    r->ctx = ctx;
    r->dt = dt;
    cr_assert_eq(nn_rnn_params_default(&r->p, NN_RNN_LSTM, 4, 8), NN_OK);
    r->p.num_layers = 2;
    r->p.bidirectional = 1;
    int64_t xd[3] = {6, 3, 4}, yd[3] = {6, 3, 16}, hd[3] = {4, 3, 8}, nw;
    cr_assert_eq(nn_rnn_weights_size(ctx, &r->p, dt, &nw), NN_OK, "%s", nn_last_error()->message);
    r->x = dev_tensor(r, 3, xd, 1), r->dx = dev_tensor(r, 3, xd, 2);
    r->y = dev_tensor(r, 3, yd, 3), r->dy = dev_tensor(r, 3, yd, 4);
    r->hx = dev_tensor(r, 3, hd, 5), r->cx = dev_tensor(r, 3, hd, 6),
    r->hy = dev_tensor(r, 3, hd, 7);
    r->cy = dev_tensor(r, 3, hd, 8), r->dhy = dev_tensor(r, 3, hd, 9);
    r->dhx = dev_tensor(r, 3, hd, 10), r->dcx = dev_tensor(r, 3, hd, 11);
    r->w = dev_tensor(r, 1, &nw, 12), r->dw = dev_tensor(r, 1, &nw, 13);
    r->lengths[0] = 6, r->lengths[1] = 0, r->lengths[2] = 4;
}

static nn_status train_step(struct run *r)
{
    nn_rnn_pullback *pb;
    nn_status st = nn_rnn_forward(r->ctx, &r->p,
                                  &(nn_rnn_forward_tensors){.x = &r->x,
                                                            .lengths = r->lengths,
                                                            .hx = &r->hx,
                                                            .cx = &r->cx,
                                                            .w = &r->w,
                                                            .y = &r->y,
                                                            .hy = &r->hy,
                                                            .cy = &r->cy},
                                  &pb);
    if (st != NN_OK) return st;
    nn_backward_options o = {.accumulate = r->accumulate};
    st = nn_rnn_backward_ex(r->ctx, &pb, &o,
                            &(nn_rnn_backward_tensors){.dy = &r->dy,
                                                       .dhy = &r->dhy,
                                                       .dx = &r->dx,
                                                       .dhx = &r->dhx,
                                                       .dcx = &r->dcx,
                                                       .dw = &r->dw});
    if (st != NN_OK) nn_rnn_pullback_free(&pb);
    return st;
}

static void host_copy(nn_ctx *ref, struct run *r, const nn_tensor *t, double *out)
{
    nn_tensor h;
    cr_assert_eq(nn_h_to_host(r->ctx, ref, t, &h), NN_OK, "%s", nn_last_error()->message);
    for (int64_t i = 0; i < nn_tensor_numel(t); i++)
        out[i] = nn_h_get(&h, i);
    nn_tensor_free(ref, &h);
}

Test(rnn_cudnn, dw_overwrite_ignores_old_contents_accumulate_adds)
{
    NN_REQUIRE_GPU();
    nn_ctx *ref = make_ctx(NN_BACKEND_REF, NN_MATH_STRICT_FP32, 0);
    struct run r;
    setup(&r, make_ctx(NN_BACKEND_CUDNN, NN_MATH_STRICT_FP32, 0), NN_DTYPE_F64);
    int64_t nw = nn_tensor_numel(&r.w);
    static double g[1 << 14], old[1 << 14], acc[1 << 14];
    cr_assert_lt(nw, 1 << 14);
    cr_assert_eq(nn_tensor_fill_constant(r.ctx, &r.dw, NAN), NN_OK);
    cr_assert_eq(train_step(&r), NN_OK, "%s", nn_last_error()->message);
    host_copy(ref, &r, &r.dw, g);
    for (int64_t i = 0; i < nw; i++)
        cr_assert(isfinite(g[i]), "dw[%lld] is %g after overwrite over NaN", (long long)i, g[i]);
    cr_assert_eq(nn_tensor_fill_uniform(r.ctx, &r.dw, -2, 2, 77), NN_OK);
    host_copy(ref, &r, &r.dw, old);
    r.accumulate = NN_ACCUMULATE_DW;
    cr_assert_eq(train_step(&r), NN_OK);
    host_copy(ref, &r, &r.dw, acc);
    for (int64_t i = 0; i < nw; i++)
        cr_expect(fabs(acc[i] - (old[i] + g[i])) <= 1e-13 * (1 + fabs(acc[i])),
                  "dw[%lld]: %.17g, want %.17g", (long long)i, acc[i], old[i] + g[i]);
    nn_ctx_destroy(r.ctx);
    nn_ctx_destroy(ref);
}

Test(rnn_cudnn, two_runs_bitwise_equal_and_dropout_reproducible_from_the_seed)
{
    NN_REQUIRE_GPU();
    nn_ctx *ref = make_ctx(NN_BACKEND_REF, NN_MATH_STRICT_FP32, 0);
    static double a[3][1 << 14], b[3][1 << 14];
    for (int drop = 0; drop < 2; drop++) {
        for (int k = 0; k < 2; k++) {
            /* with dropout each run gets a fresh context: the state starts from the seed */
            struct run r;
            setup(&r, make_ctx(NN_BACKEND_CUDNN, NN_MATH_STRICT_FP32, 0), NN_DTYPE_F32);
            if (drop) r.p.dropout = 0.5, r.p.dropout_seed = 1234;
            cr_assert_eq(train_step(&r), NN_OK, "%s", nn_last_error()->message);
            double(*o)[1 << 14] = k ? b : a;
            host_copy(ref, &r, &r.y, o[0]);
            host_copy(ref, &r, &r.dx, o[1]);
            host_copy(ref, &r, &r.dw, o[2]);
            nn_ctx_destroy(r.ctx);
        }
        cr_expect_eq(memcmp(a[0], b[0], 6 * 3 * 16 * sizeof(double)), 0, "y (dropout %d)", drop);
        cr_expect_eq(memcmp(a[1], b[1], 6 * 3 * 4 * sizeof(double)), 0, "dx (dropout %d)", drop);
        cr_expect_eq(memcmp(a[2], b[2], sizeof a[2]), 0, "dw (dropout %d)", drop);
    }
    nn_ctx_destroy(ref);
}

Test(rnn_cudnn, backward_twice_refused_pool_back_to_baseline)
{
    NN_REQUIRE_GPU();
    struct run r;
    nn_ctx *ctx = make_ctx(NN_BACKEND_CUDNN, NN_MATH_STRICT_FP32, 0);
    setup(&r, ctx, NN_DTYPE_F32);
    cr_assert_eq(train_step(&r), NN_OK, "%s", nn_last_error()->message); /* builds the entry */
    cr_assert_eq(nn_ctx_synchronize(ctx), NN_OK);
    nn_mem_stats before, after;
    cr_assert_eq(nn_mem_get_stats(0, &before), NN_OK);
    nn_rnn_pullback *pb, *copy;
    cr_assert_eq(
        nn_rnn_forward(
            ctx, &r.p,
            &(nn_rnn_forward_tensors){
                .x = &r.x, .lengths = r.lengths, .hx = &r.hx, .cx = &r.cx, .w = &r.w, .y = &r.y},
            &pb),
        NN_OK);
    copy = pb;
    cr_assert_eq(nn_rnn_backward(ctx, &pb,
                                 &(nn_rnn_backward_tensors){.dy = &r.dy, .dx = &r.dx, .dw = &r.dw}),
                 NN_OK);
    cr_expect_eq(nn_rnn_backward(ctx, &pb,
                                 &(nn_rnn_backward_tensors){.dy = &r.dy, .dx = &r.dx, .dw = &r.dw}),
                 NN_E_PULLBACK);
    cr_expect_eq(nn_rnn_backward(ctx, &copy,
                                 &(nn_rnn_backward_tensors){.dy = &r.dy, .dx = &r.dx, .dw = &r.dw}),
                 NN_E_PULLBACK);
    cr_assert_eq(nn_ctx_synchronize(ctx), NN_OK);
    cr_assert_eq(nn_mem_get_stats(0, &after), NN_OK);
    cr_expect_eq(after.allocated_bytes, before.allocated_bytes,
                 "pool: %zu bytes allocated after backward, %zu before", after.allocated_bytes,
                 before.allocated_bytes);
    /* a dropped pullback gives its reserve back too */
    cr_assert_eq(
        nn_rnn_forward(ctx, &r.p, &(nn_rnn_forward_tensors){.x = &r.x, .w = &r.w, .y = &r.y}, &pb),
        NN_OK);
    cr_assert_eq(nn_rnn_pullback_free(&pb), NN_OK);
    cr_assert_eq(nn_ctx_synchronize(ctx), NN_OK);
    cr_assert_eq(nn_mem_get_stats(0, &after), NN_OK);
    cr_expect_eq(after.allocated_bytes, before.allocated_bytes);
    nn_ctx_destroy(ctx);
}

Test(rnn_cudnn, weights_copied_through_views_read_back_unchanged)
{
    NN_REQUIRE_GPU();
    nn_ctx *ref = make_ctx(NN_BACKEND_REF, NN_MATH_STRICT_FP32, 0);
    nn_ctx *ctx = make_ctx(NN_BACKEND_CUDNN, NN_MATH_STRICT_FP32, 0);
    nn_rnn_params p;
    cr_assert_eq(nn_rnn_params_default(&p, NN_RNN_LSTM, 5, 6), NN_OK);
    p.num_layers = 2, p.bidirectional = 1, p.proj_size = 3;
    int64_t nw;
    cr_assert_eq(nn_rnn_weights_size(ctx, &p, NN_DTYPE_F32, &nw), NN_OK, "%s",
                 nn_last_error()->message);
    nn_tensor w;
    cr_assert_eq(nn_tensor_empty(ctx, NN_DTYPE_F32, 1, &nw, &w), NN_OK);
    uint64_t seed = 1;
    for (int pass = 0; pass < 2; pass++)
        for (int64_t l = 0; l < 2; l++)
            for (int d = 0; d < 2; d++)
                for (int k = 0; k < 5; k++, seed++) {
                    nn_tensor v, h, want;
                    cr_assert_eq(nn_rnn_weight_view(ctx, &p, &w, l, d, (nn_rnn_weight_name)k, &v),
                                 NN_OK, "%s", nn_last_error()->message);
                    cr_assert_eq(nn_tensor_empty(ref, NN_DTYPE_F32, v.rank, v.dims, &want), NN_OK);
                    cr_assert_eq(
                        nn_tensor_fill_ints(ref, &want, -1000, 1000, pass ? seed - 20 : seed),
                        NN_OK);
                    if (!pass) { /* copy the "PyTorch tensor" in */
                        cr_assert_eq(nn_tensor_copy(ctx, &v, &want), NN_OK);
                    } else { /* read it back after every view was written */
                        cr_assert_eq(nn_tensor_empty(ref, NN_DTYPE_F32, v.rank, v.dims, &h), NN_OK);
                        cr_assert_eq(nn_tensor_copy(ctx, &h, &v), NN_OK);
                        cr_expect_eq(memcmp(h.data, want.data, (size_t)nn_tensor_numel(&v) * 4), 0,
                                     "layer %lld dir %d view %d", (long long)l, d, k);
                        nn_tensor_free(ref, &h);
                    }
                    nn_tensor_free(ref, &want);
                }
    nn_ctx_destroy(ctx);
    nn_ctx_destroy(ref);
}

Test(rnn_cudnn, verbose_line_standard_algorithm_with_varied_lengths_parses_back)
{
    NN_REQUIRE_GPU();
    char path[] = "/tmp/nnprim_rnn_cudnn_verbose_XXXXXX";
    int fd = mkstemp(path);
    cr_assert_geq(fd, 0);
    cr_assert(freopen(path, "w", stderr));
    struct run r;
    setup(&r, make_ctx(NN_BACKEND_CUDNN, NN_MATH_STRICT_FP32, 1), NN_DTYPE_F32);
    cr_assert_eq(train_step(&r), NN_OK, "%s", nn_last_error()->message);
    fflush(stderr);
    FILE *f = fopen(path, "r");
    char line[2048], err[256];
    int seen = 0;
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "nnprim_verbose,rnn_", 19)) continue;
        seen++;
        cr_expect(strstr(line, ",cudnn,cudnn-standard,"), "%s", line);
        struct nn_rnn_case c;
        cr_expect_eq(nn_rnn_case_parse_line(line, &c, err, sizeof err), 1, "%s: %s", line, err);
        cr_expect(c.has_lengths && c.lengths[1] == 0 && c.n == 3 && c.t == 6, "%s", line);
    }
    fclose(f);
    unlink(path);
    cr_expect_eq(seen, 2);
    nn_ctx_destroy(r.ctx);
}

Test(rnn_cudnn, the_shape_record_persists_in_the_plan_file)
{
    NN_REQUIRE_GPU();
    char path[] = "/tmp/nnprim_rnn_plans_XXXXXX";
    int fd = mkstemp(path);
    cr_assert_geq(fd, 0);
    close(fd);
    struct run r;
    setup(&r, make_ctx(NN_BACKEND_CUDNN, NN_MATH_STRICT_FP32, 0), NN_DTYPE_F32);
    cr_assert_eq(train_step(&r), NN_OK, "%s", nn_last_error()->message);
    nn_plan_cache_stats st;
    cr_assert_eq(nn_plan_cache_get_stats(r.ctx, &st), NN_OK);
    cr_expect_geq(st.entries, 1);
    cr_assert_eq(nn_plan_cache_save(r.ctx, path), NN_OK, "%s", nn_last_error()->message);
    nn_ctx_destroy(r.ctx);
    nn_ctx *ctx = make_ctx(NN_BACKEND_CUDNN, NN_MATH_STRICT_FP32, 0);
    cr_assert_eq(nn_plan_cache_load(ctx, path), NN_OK, "%s", nn_last_error()->message);
    cr_assert_eq(nn_plan_cache_get_stats(ctx, &st), NN_OK);
    cr_expect_geq(st.records_loaded, 1);
    setup(&r, ctx, NN_DTYPE_F32);
    cr_assert_eq(train_step(&r), NN_OK, "%s", nn_last_error()->message);
    cr_assert_eq(nn_plan_cache_get_stats(ctx, &st), NN_OK);
    cr_expect_geq(st.plans_rebuilt, 1, "the shape's entry was rebuilt from its loaded record");
    unlink(path);
    nn_ctx_destroy(ctx);
}

/* settings.xent_targets (context.h): under NN_TARGETS_ON_DEVICE a cuDNN context reads class
 * targets in device memory on the device only. Its loss and gradient are bitwise those of the
 * checked path; a target out of range puts NaN in its sample's loss and gradient (NN_OK) where the
 * checked path refuses it; host targets stay checked; the reference backend always checks. GPU
 * tests skip with the reason elsewhere. */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "gpu.h"
#include "nnprim/nnprim.h"

#define OK(call) cr_assert_eq((call), NN_OK, "%s: %s", #call, nn_last_error()->message)

enum { N = 6, C = 5, S = 2 };

static nn_ctx *make_ctx(nn_backend backend, nn_targets_mode mode)
{
    nn_settings s;
    OK(nn_settings_defaults(&s));
    s.backend = backend;
    s.xent_targets = mode;
    nn_ctx *ctx = NULL;
    OK(nn_ctx_create(&ctx, &s));
    return ctx;
}

/* The tensors of one step on ctx: x filled from seed, dloss ones-ish. */
struct step {
    nn_tensor x, loss, dloss, dx;
};

static void step_alloc(nn_ctx *ctx, struct step *o)
{
    const int64_t xd[] = {N, C, S}, ld[] = {N, S};
    OK(nn_tensor_empty(ctx, NN_DTYPE_F32, 3, xd, &o->x));
    OK(nn_tensor_empty(ctx, NN_DTYPE_F32, 3, xd, &o->dx));
    OK(nn_tensor_empty(ctx, NN_DTYPE_F32, 2, ld, &o->loss));
    OK(nn_tensor_empty(ctx, NN_DTYPE_F32, 2, ld, &o->dloss));
    OK(nn_tensor_fill_ints(ctx, &o->x, -4, 4, 21));
    OK(nn_tensor_fill_ints(ctx, &o->dloss, 1, 3, 22));
}

static void step_free(nn_ctx *ctx, struct step *o)
{
    nn_tensor *ts[] = {&o->x, &o->loss, &o->dloss, &o->dx};
    for (int i = 0; i < 4; i++)
        OK(nn_tensor_free(ctx, ts[i]));
}

static nn_status run(nn_ctx *ctx, struct step *o, const void *targets, nn_index_type type)
{
    nn_class_targets tg = {targets, type, {0, 0}};
    nn_softmax_cross_entropy_pullback *pb = NULL;
    nn_status st = nn_softmax_cross_entropy_forward(ctx, &o->x, &tg, &o->loss, &pb);
    if (st != NN_OK) return st;
    return nn_softmax_cross_entropy_backward(ctx, &pb, &o->dloss, &o->dx);
}

static void to_host(nn_ctx *ctx, float *dst, const nn_tensor *src)
{
    OK(nn_mem_copy(ctx, dst, src->data, (size_t)nn_tensor_numel(src) * sizeof(float)));
}

Test(softmax_targets, the_reference_backend_checks_under_either_mode)
{
    nn_ctx *ctx = make_ctx(NN_BACKEND_REF, NN_TARGETS_ON_DEVICE);
    struct step o;
    step_alloc(ctx, &o);
    int64_t t[N * S];
    for (int i = 0; i < N * S; i++)
        t[i] = i % C;
    t[3] = C;
    cr_expect_eq(run(ctx, &o, t, NN_INDEX_I64), NN_E_INVALID_ARG);
    cr_expect(strstr(nn_last_error()->message, "targets[3]"), "%s", nn_last_error()->message);
    t[3] = 1;
    cr_expect_eq(run(ctx, &o, t, NN_INDEX_I64), NN_OK, "%s", nn_last_error()->message);
    step_free(ctx, &o);
    nn_ctx_destroy(ctx);
}

Test(softmax_targets_gpu, on_device_is_bitwise_the_checked_path_without_a_check)
{
    NN_REQUIRE_GPU();
    nn_ctx *checked = make_ctx(NN_BACKEND_CUDNN, NN_TARGETS_CHECKED);
    nn_ctx *dev = make_ctx(NN_BACKEND_CUDNN, NN_TARGETS_ON_DEVICE);
    struct step a, b;
    step_alloc(checked, &a);
    step_alloc(dev, &b);
    for (int wide = 0; wide < 2; wide++) {
        int64_t t64[N * S];
        int32_t t32[N * S];
        for (int i = 0; i < N * S; i++)
            t64[i] = t32[i] = (i * 3 + 1) % C;
        size_t bytes = wide ? sizeof t64 : sizeof t32;
        const void *host = wide ? (const void *)t64 : (const void *)t32;
        nn_index_type type = wide ? NN_INDEX_I64 : NN_INDEX_I32;
        void *da = NULL, *db = NULL;
        OK(nn_mem_alloc(checked, bytes, &da));
        OK(nn_mem_alloc(dev, bytes, &db));
        OK(nn_mem_copy(checked, da, host, bytes));
        OK(nn_mem_copy(dev, db, host, bytes));
        OK(run(checked, &a, da, type));
        OK(run(dev, &b, db, type));
        float la[N * S], lb[N * S], ga[N * C * S], gb[N * C * S];
        to_host(checked, la, &a.loss), to_host(dev, lb, &b.loss);
        to_host(checked, ga, &a.dx), to_host(dev, gb, &b.dx);
        cr_expect_eq(memcmp(la, lb, sizeof la), 0, "int%d targets: loss", wide ? 64 : 32);
        cr_expect_eq(memcmp(ga, gb, sizeof ga), 0, "int%d targets: dx", wide ? 64 : 32);

        /* target 4 out of range: refused by the checked path, NaN in sample 2 (position 0)
         * under the device mode, the other samples as before */
        if (wide)
            t64[4] = C;
        else
            t32[4] = -1;
        OK(nn_mem_copy(checked, da, host, bytes));
        OK(nn_mem_copy(dev, db, host, bytes));
        cr_expect_eq(run(checked, &a, da, type), NN_E_INVALID_ARG);
        cr_expect(strstr(nn_last_error()->message, "targets[4]"), "%s", nn_last_error()->message);
        OK(run(dev, &b, db, type));
        float lbad[N * S], gbad[N * C * S];
        to_host(dev, lbad, &b.loss), to_host(dev, gbad, &b.dx);
        for (int i = 0; i < N * S; i++) {
            if (i == 4)
                cr_expect(isnan(lbad[i]), "loss[4] = %g, not NaN", lbad[i]);
            else
                cr_expect_eq(memcmp(&lbad[i], &lb[i], sizeof lbad[i]), 0, "loss[%d]", i);
        }
        for (int c = 0; c < C; c++) /* sample 2, position 0: element (2 C + c) S */
            cr_expect(isnan(gbad[(2 * C + c) * S]), "dx of the bad target, class %d", c);
        OK(nn_mem_free(checked, da));
        OK(nn_mem_free(dev, db));
    }
    /* host targets are read on the host, so checked as always */
    int64_t th[N * S] = {0};
    th[7] = C + 2;
    cr_expect_eq(run(dev, &b, th, NN_INDEX_I64), NN_E_INVALID_ARG);
    cr_expect(strstr(nn_last_error()->message, "targets[7]"), "%s", nn_last_error()->message);
    step_free(checked, &a);
    step_free(dev, &b);
    nn_ctx_destroy(checked);
    nn_ctx_destroy(dev);
}

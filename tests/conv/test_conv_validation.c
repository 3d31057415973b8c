/* Every refusal of the convolution calls: status, and a message naming the argument with the
 * expected and actual value. Also the pullback's life cycle. */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "core/alloc.h"
#include "gpu.h"
#include "nnprim/nnprim.h"

/* A valid 2-D problem: x 2x4x6x6, w 6x2x3x3 (groups 2), b 6, y 2x6x4x4, and gradients. */
struct fx {
    nn_ctx *ctx;
    nn_conv_params p;
    nn_tensor x, w, b, y, dy, dx, dw, db;
};

static void fx_init(struct fx *f)
{
    nn_settings s;
    nn_settings_from_env(&s);
    s.backend = NN_BACKEND_REF;
    cr_assert_eq(nn_ctx_create(&f->ctx, &s), NN_OK);
    cr_assert_eq(nn_conv_params_default(&f->p, 2), NN_OK);
    f->p.groups = 2;
    int64_t xd[4] = {2, 4, 6, 6}, wd[4] = {6, 2, 3, 3}, yd[4] = {2, 6, 4, 4}, bd[1] = {6};
    struct {
        nn_tensor *t;
        int rank;
        const int64_t *dims;
    } all[] = {{&f->x, 4, xd},  {&f->w, 4, wd},  {&f->b, 1, bd},  {&f->y, 4, yd},
               {&f->dy, 4, yd}, {&f->dx, 4, xd}, {&f->dw, 4, wd}, {&f->db, 1, bd}};
    for (int i = 0; i < 8; i++) {
        cr_assert_eq(nn_tensor_empty(f->ctx, NN_DTYPE_F32, all[i].rank, all[i].dims, all[i].t),
                     NN_OK);
        cr_assert_eq(nn_tensor_fill_ints(f->ctx, all[i].t, -2, 2, (uint64_t)i), NN_OK);
    }
}

static void fx_fini(struct fx *f)
{
    nn_tensor *all[] = {&f->x, &f->w, &f->b, &f->y, &f->dy, &f->dx, &f->dw, &f->db};
    for (int i = 0; i < 8; i++)
        nn_tensor_free(f->ctx, all[i]);
    nn_ctx_destroy(f->ctx);
}

static void expect_error(nn_status got, nn_status want, const char *const *parts, int n)
{
    const nn_error_info *e = nn_last_error();
    cr_expect_eq(got, want, "status %s, want %s (%s)", nn_status_name(got), nn_status_name(want),
                 e->message);
    for (int i = 0; i < n; i++)
        cr_expect(strstr(e->message, parts[i]) != NULL, "message '%s' lacks '%s'", e->message,
                  parts[i]);
}

#define EXPECT_ERROR(call, status, ...)                                                            \
    do {                                                                                           \
        const char *const parts_[] = {__VA_ARGS__};                                                \
        expect_error((call), (status), parts_, (int)(sizeof parts_ / sizeof parts_[0]));           \
    } while (0)

/* Change one dim and keep the view packed, so that only the dim is wrong. */
static void redim(nn_tensor *t, int i, int64_t v)
{
    t->dims[i] = v;
    cr_assert_eq(nn_contiguous_strides(t->rank, t->dims, t->strides), NN_OK);
}

static nn_status fwd(struct fx *f)
{
    return nn_conv_forward(f->ctx, &f->p, &f->x, &f->w, &f->b, &f->y, NULL);
}

Test(conv_validation, the_fixture_is_valid)
{
    struct fx f;
    fx_init(&f);
    cr_expect_eq(fwd(&f), NN_OK, "%s", nn_last_error()->message);
    cr_expect_eq(nn_conv_backward_data(f.ctx, &f.p, &f.dy, &f.w, &f.dx, 0), NN_OK);
    cr_expect_eq(nn_conv_backward_filter(f.ctx, &f.p, &f.x, &f.dy, &f.dw, 0), NN_OK);
    cr_expect_eq(nn_conv_backward_bias(f.ctx, &f.p, &f.dy, &f.db, 0), NN_OK);
    fx_fini(&f);
}

Test(conv_validation, parameters)
{
    struct fx f;
    fx_init(&f);
    nn_conv_params keep = f.p;
    f.p.stride[1] = 0;
    EXPECT_ERROR(fwd(&f), NN_E_INVALID_ARG, "conv_forward", "p.stride[1] must be >= 1, got 0");
    f.p = keep;
    f.p.dilation[0] = -1;
    EXPECT_ERROR(fwd(&f), NN_E_INVALID_ARG, "p.dilation[0] must be >= 1, got -1");
    f.p = keep;
    f.p.pad_hi[0] = -2;
    EXPECT_ERROR(fwd(&f), NN_E_INVALID_ARG, "p.pad_hi[0] must be >= 0, got -2");
    f.p = keep;
    f.p.pad_lo[1] = -1;
    EXPECT_ERROR(fwd(&f), NN_E_INVALID_ARG, "p.pad_lo[1] must be >= 0, got -1");
    f.p = keep;
    f.p.groups = 0;
    EXPECT_ERROR(fwd(&f), NN_E_INVALID_ARG, "p.groups must be >= 1, got 0");
    f.p = keep;
    f.p.spatial_rank = 4;
    EXPECT_ERROR(fwd(&f), NN_E_INVALID_ARG, "p.spatial_rank must be 1, 2 or 3, got 4");
    f.p = keep;
    f.p.mode = (nn_conv_mode)7;
    EXPECT_ERROR(fwd(&f), NN_E_INVALID_ARG, "p.mode", "got 7");
    f.p = keep;
    f.p.activation = (nn_activation)9;
    EXPECT_ERROR(fwd(&f), NN_E_INVALID_ARG, "p.activation", "got 9");
    f.p = keep;
    EXPECT_ERROR(nn_conv_backward_data(f.ctx, &f.p, &f.dy, &f.w, &f.dx, 0x100), NN_E_INVALID_ARG,
                 "nn_conv_backward_data: accumulate must hold only NN_ACCUMULATE_* bits (0x7), got "
                 "0x100");
    EXPECT_ERROR(nn_conv_forward(f.ctx, NULL, &f.x, &f.w, NULL, &f.y, NULL), NN_E_INVALID_ARG,
                 "p (the parameters) must not be NULL");
    EXPECT_ERROR(nn_conv_forward(NULL, &keep, &f.x, &f.w, NULL, &f.y, NULL), NN_E_INVALID_ARG,
                 "ctx must not be NULL");
    EXPECT_ERROR(nn_conv_params_default(&f.p, 0), NN_E_INVALID_ARG, "spatial_rank");
    fx_fini(&f);
}

Test(conv_validation, shapes)
{
    struct fx f;
    fx_init(&f);
    f.p.groups = 3;
    EXPECT_ERROR(fwd(&f), NN_E_SHAPE, "x.dims[1] (channels) must be divisible by p.groups = 3",
                 "got 4");
    f.p.groups = 4; /* C divisible, K = 6 not */
    EXPECT_ERROR(fwd(&f), NN_E_SHAPE, "w.dims[0] (output channels) must be divisible by p.groups");
    f.p.groups = 1;
    EXPECT_ERROR(fwd(&f), NN_E_SHAPE, "w.dims[1] (input channels per group) must be", "= 4, got 2");
    f.p.groups = 2;
    f.p.dilation[0] = 4; /* dilated filter 9 > 6 */
    EXPECT_ERROR(fwd(&f), NN_E_SHAPE, "output spatial dim 0 would be < 1", "(9)");
    f.p.dilation[0] = 1;
    redim(&f.y, 3, 5);
    EXPECT_ERROR(fwd(&f), NN_E_SHAPE, "y.dims[3] must be 4, got 5");
    redim(&f.y, 3, 4);
    f.p.spatial_rank = 1;
    EXPECT_ERROR(fwd(&f), NN_E_SHAPE, "x.rank must be p.spatial_rank + 2 = 3, got 4");
    f.p.spatial_rank = 2;
    redim(&f.b, 0, 5);
    EXPECT_ERROR(fwd(&f), NN_E_SHAPE, "b.dims[0] must be K = 6, got 5");
    redim(&f.b, 0, 6);
    nn_tensor w3 = f.w;
    w3.rank = 3;
    redim(&w3, 2, 3);
    EXPECT_ERROR(nn_conv_forward(f.ctx, &f.p, &f.x, &w3, NULL, &f.y, NULL), NN_E_SHAPE,
                 "w.rank must equal x.rank (4), got 3");
    redim(&f.dx, 2, 7);
    EXPECT_ERROR(nn_conv_backward_data(f.ctx, &f.p, &f.dy, &f.w, &f.dx, 0), NN_E_SHAPE,
                 "conv_backward_data", "dy.dims[2] must be 5, got 4");
    redim(&f.dx, 2, 6);
    redim(&f.dw, 3, 2);
    EXPECT_ERROR(nn_conv_backward_filter(f.ctx, &f.p, &f.x, &f.dy, &f.dw, 0), NN_E_SHAPE,
                 "conv_backward_filter", "dy.dims[3] must be 5, got 4");
    redim(&f.dw, 3, 3);
    redim(&f.db, 0, 2);
    EXPECT_ERROR(nn_conv_backward_bias(f.ctx, &f.p, &f.dy, &f.db, 0), NN_E_SHAPE,
                 "db.dims[0] must be K = 6, got 2");
    fx_fini(&f);
}

Test(conv_validation, output_shape)
{
    nn_conv_params p;
    nn_conv_params_default(&p, 2);
    int64_t xd[4] = {1, 3, 7, 7}, wd[4] = {5, 3, 3, 3}, yd[4] = {0, 0, 0, 0};
    p.stride[0] = 2;
    p.pad_lo[1] = 1;
    cr_assert_eq(nn_conv_output_shape(&p, 4, xd, wd, yd), NN_OK);
    cr_expect_eq(yd[0], 1);
    cr_expect_eq(yd[1], 5);
    cr_expect_eq(yd[2], 3); /* (7 - 3) / 2 + 1 */
    cr_expect_eq(yd[3], 6); /* 7 + 1 - 3 + 1 */
    xd[2] = 0;
    EXPECT_ERROR(nn_conv_output_shape(&p, 4, xd, wd, yd), NN_E_SHAPE, "x.dims[2] must be >= 1");
    xd[2] = 7;
    wd[3] = -1;
    EXPECT_ERROR(nn_conv_output_shape(&p, 4, xd, wd, yd), NN_E_SHAPE, "w.dims[3] must be >= 1");
    EXPECT_ERROR(nn_conv_output_shape(&p, 4, NULL, wd, yd), NN_E_INVALID_ARG, "must not be NULL");
    wd[3] = 3;
    p.dilation[1] = INT64_MAX;
    EXPECT_ERROR(nn_conv_output_shape(&p, 4, xd, wd, yd), NN_E_OVERFLOW, "spatial dim 1",
                 "overflows int64");
}

Test(conv_validation, dtypes_layouts_memory)
{
    struct fx f;
    fx_init(&f);
    nn_tensor w16 = f.w;
    w16.dtype = NN_DTYPE_F16;
    EXPECT_ERROR(nn_conv_forward(f.ctx, &f.p, &f.x, &w16, NULL, &f.y, NULL), NN_E_DTYPE,
                 "w.dtype must equal x.dtype (f32), got f16");
    nn_tensor db64 = f.db;
    db64.dtype = NN_DTYPE_F64;
    EXPECT_ERROR(nn_conv_backward_bias(f.ctx, &f.p, &f.dy, &db64, 0), NN_E_DTYPE,
                 "db.dtype must equal dy.dtype (f32), got f64");
    nn_tensor xs = f.x; /* a transposed view: strides of N and C swapped */
    xs.dims[0] = 4;
    xs.dims[1] = 2;
    xs.strides[0] = 36;
    xs.strides[1] = 144;
    EXPECT_ERROR(nn_conv_forward(f.ctx, &f.p, &xs, &f.w, NULL, &f.y, NULL), NN_E_UNSUPPORTED,
                 "x must be fully packed row-major");
    nn_tensor yd = f.y;
    yd.space = NN_SPACE_DEVICE;
    yd.device = 0;
    EXPECT_ERROR(nn_conv_forward(f.ctx, &f.p, &f.x, &f.w, NULL, &yd, NULL), NN_E_MEMSPACE,
                 "y must be in host memory");
    nn_tensor yn = f.y;
    yn.data = NULL;
    EXPECT_ERROR(nn_conv_forward(f.ctx, &f.p, &f.x, &f.w, NULL, &yn, NULL), NN_E_INVALID_ARG,
                 "y.data must not be NULL");
    EXPECT_ERROR(nn_conv_forward(f.ctx, &f.p, &f.x, &f.w, NULL, NULL, NULL), NN_E_INVALID_ARG,
                 "y must not be NULL");
    nn_tensor alias = f.y; /* y over x's memory */
    alias.data = f.x.data;
    EXPECT_ERROR(nn_conv_forward(f.ctx, &f.p, &f.x, &f.w, NULL, &alias, NULL), NN_E_INVALID_ARG,
                 "y and x must not overlap");
    f.p.activation = NN_ACTIVATION_RELU;
    EXPECT_ERROR(nn_conv_backward_data(f.ctx, &f.p, &f.dy, &f.w, &f.dx, 0), NN_E_INVALID_ARG,
                 "p.activation must be NN_ACTIVATION_IDENTITY for a stand-alone gradient");
    fx_fini(&f);
}

Test(conv_validation, a_failing_forward_writes_nothing)
{
    struct fx f;
    fx_init(&f);
    cr_assert_eq(nn_tensor_fill_constant(f.ctx, &f.y, NAN), NN_OK);
    nn_conv_pullback *pb = (nn_conv_pullback *)&f; /* set to NULL on failure */
    redim(&f.y, 0, 3);
    cr_expect_eq(nn_conv_forward(f.ctx, &f.p, &f.x, &f.w, &f.b, &f.y, &pb), NN_E_SHAPE);
    cr_expect_null(pb);
    redim(&f.y, 0, 2);
    cr_expect(isnan(((float *)f.y.data)[0]));
    fx_fini(&f);
}

Test(conv_validation, pullback_life_cycle)
{
    struct fx f;
    fx_init(&f);
    nn_conv_pullback *pb = NULL, *stale;
    cr_assert_eq(nn_conv_forward(f.ctx, &f.p, &f.x, &f.w, &f.b, &f.y, &pb), NN_OK);
    cr_assert_not_null(pb);
    stale = pb;

    /* a failing backward leaves the pullback with the caller */
    redim(&f.dx, 1, 5);
    EXPECT_ERROR(nn_conv_backward(f.ctx, &pb, &f.dy, &f.dx, NULL, NULL), NN_E_SHAPE,
                 "conv_backward", "dx.dims[1] must be 4, got 5");
    cr_expect_eq(pb, stale);
    redim(&f.dx, 1, 4);

    /* another context is refused */
    nn_ctx *other;
    cr_assert_eq(nn_ctx_create(&other, NULL), NN_OK);
    EXPECT_ERROR(nn_conv_backward(other, &pb, &f.dy, &f.dx, NULL, NULL), NN_E_PULLBACK,
                 "another context");
    nn_ctx_destroy(other);
    cr_expect_eq(pb, stale);

    /* consumed on success, refused after */
    cr_assert_eq(nn_conv_backward(f.ctx, &pb, &f.dy, &f.dx, &f.dw, &f.db), NN_OK);
    cr_expect_null(pb);
    EXPECT_ERROR(nn_conv_backward(f.ctx, &pb, &f.dy, &f.dx, NULL, NULL), NN_E_PULLBACK,
                 "already consumed");
    EXPECT_ERROR(nn_conv_backward(f.ctx, &stale, &f.dy, &f.dx, NULL, NULL), NN_E_PULLBACK,
                 "not a live pullback");
    EXPECT_ERROR(nn_conv_backward(f.ctx, NULL, &f.dy, &f.dx, NULL, NULL), NN_E_PULLBACK,
                 "pullback must not be NULL");
    EXPECT_ERROR(nn_conv_pullback_free(&stale), NN_E_PULLBACK, "not a live pullback");

    /* dropped without use; NULL is a no-op */
    cr_assert_eq(nn_conv_forward(f.ctx, &f.p, &f.x, &f.w, NULL, &f.y, &pb), NN_OK);
    cr_expect_eq(nn_conv_pullback_free(&pb), NN_OK);
    cr_expect_null(pb);
    cr_expect_eq(nn_conv_pullback_free(&pb), NN_OK);
    cr_expect_eq(nn_conv_pullback_free(NULL), NN_OK);

    /* a backward with no gradient asked for still consumes it */
    cr_assert_eq(nn_conv_forward(f.ctx, &f.p, &f.x, &f.w, NULL, &f.y, &pb), NN_OK);
    cr_expect_eq(nn_conv_backward(f.ctx, &pb, &f.dy, NULL, NULL, NULL), NN_OK);
    cr_expect_null(pb);
    fx_fini(&f);
}

/* Every host allocation of the conv calls can fail: a status, nothing leaked, the pullback kept. */
Test(conv_validation, out_of_host_memory_is_a_status)
{
    struct fx f;
    fx_init(&f);
    nn_conv_pullback *pb = (nn_conv_pullback *)&f;
    nn__host_alloc_fail_at(1);
    EXPECT_ERROR(nn_conv_forward(f.ctx, &f.p, &f.x, &f.w, &f.b, &f.y, &pb), NN_E_OOM_HOST,
                 "pullback");
    cr_expect_null(pb);
    nn__host_alloc_fail_at(1);
    EXPECT_ERROR(nn_conv_backward_data(f.ctx, &f.p, &f.dy, &f.w, &f.dx, 0), NN_E_OOM_HOST,
                 "accumulator");
    nn__host_alloc_fail_at(0);

    f.p.activation = NN_ACTIVATION_RELU; /* the masked dy is a temporary */
    cr_assert_eq(nn_conv_forward(f.ctx, &f.p, &f.x, &f.w, &f.b, &f.y, &pb), NN_OK);
    nn__host_alloc_fail_at(1);
    cr_expect_eq(nn_conv_backward(f.ctx, &pb, &f.dy, &f.dx, &f.dw, &f.db), NN_E_OOM_HOST);
    nn__host_alloc_fail_at(0);
    cr_expect_not_null(pb);
    cr_expect_eq(nn_conv_backward(f.ctx, &pb, &f.dy, &f.dx, &f.dw, &f.db), NN_OK);
    cr_expect_null(pb);
    fx_fini(&f);
}

/* A cuDNN context refuses host tensors before anything reaches cuDNN. */
Test(conv_validation_gpu, host_tensors_are_refused_on_a_cudnn_context)
{
    NN_REQUIRE_GPU();
    struct fx f;
    fx_init(&f);
    nn_settings s;
    nn_settings_from_env(&s);
    s.backend = NN_BACKEND_CUDNN;
    nn_ctx *gpu;
    cr_assert_eq(nn_ctx_create(&gpu, &s), NN_OK, "%s", nn_last_error()->message);
    EXPECT_ERROR(nn_conv_forward(gpu, &f.p, &f.x, &f.w, NULL, &f.y, NULL), NN_E_MEMSPACE,
                 "conv_forward: x must be in device memory");
    EXPECT_ERROR(nn_conv_backward_bias(gpu, &f.p, &f.dy, &f.db, 0), NN_E_MEMSPACE,
                 "conv_backward_bias: dy must be in device memory");
    nn_ctx_destroy(gpu);
    fx_fini(&f);
}

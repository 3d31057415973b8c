/* The glue between conv's graph descriptions and the plan cache (src/conv/conv_graph_cudnn.h,
 * src/cudnn/plan_get_cudnn.h): the key made from a graph description and the context's settings,
 * its inverse, what conv's graph kind answers about a key, and the pointer alignment cuDNN is told
 * about. Pure functions: they run on the CPU (a reference context supplies the settings). */
#include <criterion/criterion.h>
#include <string.h>

#include "conv/conv_graph_cudnn.h"
#include "cudnn/describe_cudnn.h"
#include "cudnn/plan_get_cudnn.h"
#include "nnprim/nnprim.h"

static nn_ctx *ref_ctx(nn_math_mode math, int deterministic, size_t cap)
{
    nn_settings s;
    nn_settings_from_env(&s);
    s.backend = NN_BACKEND_REF;
    s.math_mode = math;
    s.deterministic = deterministic;
    s.workspace_cap = cap;
    nn_ctx *ctx = NULL;
    cr_assert_eq(nn_ctx_create(&ctx, &s), NN_OK, "%s", nn_last_error()->message);
    return ctx;
}

static struct nn__cudnn_tensor packed(nn_dtype dt, int rank, const int64_t *dims)
{
    struct nn__cudnn_tensor t;
    memset(&t, 0, sizeof t);
    t.dtype = dt;
    t.rank = rank;
    int64_t stride = 1;
    for (int i = rank - 1; i >= 0; i--) {
        t.dims[i] = dims[i];
        t.strides[i] = stride;
        stride *= dims[i];
    }
    t.alignment = 16;
    return t;
}

/* A grouped 2-D forward: x 2x8x10x10, w 6x4x3x3 (2 groups), y 2x6x8x8. */
static void fwd_desc(struct nn__conv_graph *d, int bias, int relu)
{
    int64_t xd[4] = {2, 8, 10, 10}, wd[4] = {6, 4, 3, 3}, yd[4] = {2, 6, 8, 8},
            bd[4] = {1, 6, 1, 1};
    struct nn__cudnn_tensor x = packed(NN_DTYPE_F32, 4, xd), w = packed(NN_DTYPE_F32, 4, wd),
                            y = packed(NN_DTYPE_F32, 4, yd), b = packed(NN_DTYPE_F32, 4, bd);
    struct nn__conv_graph_params c;
    memset(&c, 0, sizeof c);
    c.spatial_rank = 2;
    for (int i = 0; i < 2; i++)
        c.stride[i] = c.dilation[i] = 1;
    c.post_pad[1] = 1;
    c.compute = NN_DTYPE_F32;
    nn__conv_graph_fwd(d, &x, &w, bias ? &b : NULL, &y, &c, relu);
}

Test(plan_get, key_follows_the_graph_and_the_settings)
{
    nn_ctx *ctx = ref_ctx(NN_MATH_TF32, 1, 1 << 20);
    struct nn__conv_graph d;
    fwd_desc(&d, 0, 0);
    struct nn__conv_key k;
    nn__conv_plan_key_of(ctx, &d, 0, &k);
    cr_expect_null(nn__conv_key_invalid(&k), "%s", nn__conv_key_invalid(&k));
    cr_expect_eq(k.pass, NN__CONV_PASS_FWD);
    cr_expect_eq(k.dtype, NN_DTYPE_F32);
    cr_expect_eq(k.s.math_mode, NN_MATH_TF32);
    cr_expect_eq(k.s.deterministic, 1);
    cr_expect_eq(k.s.workspace_cap, 1 << 20);
    cr_expect_eq(k.t[NN__CONV_SLOT_IN].align, 16);
    cr_expect_eq(k.t[NN__CONV_SLOT_IN].nhwc, 0);
    cr_expect_eq(k.t[NN__CONV_SLOT_IN].dims[1], 8);
    cr_expect_eq(k.t[NN__CONV_SLOT_FILTER].dims[0], 6);
    cr_expect_eq(k.t[NN__CONV_SLOT_OUT].dims[3], 8);
    cr_expect_eq(k.t[NN__CONV_SLOT_BIAS].align, 0);
    cr_expect_eq(k.groups, 2, "groups come from x's and w's channels");
    cr_expect_eq(k.spatial_rank, 2);
    cr_expect_eq(k.pad_hi[1], 1);
    cr_expect_eq(k.alpha, 1.0);
    cr_expect_eq(k.beta, 0.0);
    nn_ctx_destroy(ctx);
}

Test(plan_get, keys_differ_where_plans_differ)
{
    nn_ctx *ctx = ref_ctx(NN_MATH_STRICT_FP32, 0, 0);
    struct nn__conv_graph d;
    struct nn__conv_key plain, again, fused, epilogue, blend;
    fwd_desc(&d, 0, 0);
    nn__conv_plan_key_of(ctx, &d, 0, &plain);
    nn__conv_plan_key_of(ctx, &d, 0, &again);
    cr_expect(nn__conv_key_equal(&plain, &again));
    cr_expect_eq(nn__conv_key_hash(&plain), nn__conv_key_hash(&again));
    d.beta = 1.0;
    nn__conv_plan_key_of(ctx, &d, 0, &blend);
    cr_expect_not(nn__conv_key_equal(&plain, &blend), "beta is baked into the plan");
    fwd_desc(&d, 1, 1);
    nn__conv_plan_key_of(ctx, &d, 0, &fused);
    nn__conv_plan_key_of(ctx, &d, 1, &epilogue);
    cr_expect_eq(fused.t[NN__CONV_SLOT_BIAS].dims[1], 6);
    cr_expect_eq(fused.relu, 1);
    cr_expect_not(nn__conv_key_equal(&plain, &fused));
    cr_expect_not(nn__conv_key_equal(&fused, &epilogue), "the caller's flags are part of the key");
    nn_ctx *tf32 = ref_ctx(NN_MATH_TF32, 0, 0);
    struct nn__conv_key other;
    nn__conv_plan_key_of(tf32, &d, 0, &other);
    cr_expect_not(nn__conv_key_equal(&fused, &other), "the math mode is part of the key");
    nn_ctx_destroy(tf32);
    nn_ctx_destroy(ctx);
}

/* f16 1-D tensors x 2x4x20, w 6x4x5, y 2x6x8 and a true convolution with stride 2 and
 * dilation dil. */
static void conv1d(int64_t dil, struct nn__cudnn_tensor *x, struct nn__cudnn_tensor *w,
                   struct nn__cudnn_tensor *y, struct nn__conv_graph_params *c)
{
    int64_t xd[3] = {2, 4, 20}, wd[3] = {6, 4, 5}, yd[3] = {2, 6, 8};
    *x = packed(NN_DTYPE_F16, 3, xd);
    *w = packed(NN_DTYPE_F16, 3, wd);
    *y = packed(NN_DTYPE_F16, 3, yd);
    memset(c, 0, sizeof *c);
    c->spatial_rank = 1;
    c->stride[0] = 2;
    c->dilation[0] = dil;
    c->mode = NN__CONV_GRAPH_CONVOLUTION;
    c->compute = NN_DTYPE_F32;
}

Test(plan_get, backward_kinds_map_to_their_ops)
{
    nn_ctx *ctx = ref_ctx(NN_MATH_STRICT_FP32, 0, 0);
    struct nn__cudnn_tensor x, w, y;
    struct nn__conv_graph_params c;
    conv1d(1, &x, &w, &y, &c);
    struct nn__conv_graph d;
    struct nn__conv_key data, filter;
    nn__conv_graph_bwd_data(&d, &y, &w, &x, &c);
    nn__conv_plan_key_of(ctx, &d, 0, &data);
    nn__conv_graph_bwd_filter(&d, &x, &y, &w, &c);
    nn__conv_plan_key_of(ctx, &d, 0, &filter);
    cr_expect_eq(data.pass, NN__CONV_PASS_BWD_DATA);
    cr_expect_eq(filter.pass, NN__CONV_PASS_BWD_FILTER);
    cr_expect_eq(data.dtype, NN_DTYPE_F16);
    cr_expect_eq(data.t[NN__CONV_SLOT_IN].dims[2], 20, "dx");
    cr_expect_eq(data.t[NN__CONV_SLOT_OUT].dims[2], 8, "dy");
    cr_expect_eq(filter.t[NN__CONV_SLOT_FILTER].dims[2], 5, "dw");
    cr_expect_eq(data.groups, 1);
    cr_expect_eq(filter.mode, NN__CONV_GRAPH_CONVOLUTION);
    cr_expect_eq(filter.stride[0], 2);
    cr_expect_null(nn__conv_key_invalid(&data), "%s", nn__conv_key_invalid(&data));
    cr_expect_null(nn__conv_key_invalid(&filter), "%s", nn__conv_key_invalid(&filter));
    nn_ctx_destroy(ctx);
}

Test(plan_get, pointer_alignment)
{
    char *base = (char *)(uintptr_t)0x100000;
    cr_expect_eq(nn__cudnn_ptr_alignment(base), 16);
    cr_expect_eq(nn__cudnn_ptr_alignment(base + 8), 8);
    cr_expect_eq(nn__cudnn_ptr_alignment(base + 4), 4);
    cr_expect_eq(nn__cudnn_ptr_alignment(base + 6), 2);
    cr_expect_eq(nn__cudnn_ptr_alignment(base + 3), 1);
    cr_expect_eq(nn__cudnn_ptr_alignment(base + 48), 16);
}

Test(plan_get, source_names)
{
    cr_expect_str_eq(nn__plan_source_name(NN__PLAN_HIT), "hit");
    cr_expect_str_eq(nn__plan_source_name(NN__PLAN_REBUILT), "rebuilt");
    cr_expect_str_eq(nn__plan_source_name(NN__PLAN_HEURISTIC), "heuristic");
    cr_expect_str_eq(nn__plan_source_name(NN__PLAN_AUTOTUNED), "autotuned");
}

/* Prebuilding rebuilds graphs from keys: nn__conv_graph_of_key() inverts
 * nn__conv_plan_key_of() for every graph kind, and a key flagged NN__CONV_KEY_PLAIN gives the
 * graph without bias and relu (the plan of a forward whose epilogue runs after it). */
static void expect_round_trip(nn_ctx *ctx, const struct nn__conv_graph *d, const char *what)
{
    struct nn__conv_key k, again;
    struct nn__conv_graph back;
    nn__conv_plan_key_of(ctx, d, 0, &k);
    cr_assert_eq(nn__conv_graph_of_key(&k, &back), 0, "%s", what);
    cr_expect_eq(back.op, d->op, "%s", what);
    nn__conv_plan_key_of(ctx, &back, 0, &again);
    cr_expect(nn__conv_key_equal(&k, &again), "%s: the key of the rebuilt graph differs", what);
}

Test(plan_get, graph_desc_of_key_inverts_the_key)
{
    nn_ctx *ctx = ref_ctx(NN_MATH_STRICT_FP32, 0, 0);
    struct nn__conv_graph d, plain, back;
    fwd_desc(&d, 1, 1);
    d.alpha = 0.5;
    expect_round_trip(ctx, &d, "fwd+bias+relu");
    struct nn__conv_key k;
    nn__conv_plan_key_of(ctx, &d, 0, &k);
    cr_assert_eq(nn__conv_graph_of_key(&k, &back), 0);
    cr_expect_eq(back.relu, 1);
    cr_expect_eq(back.t[NN__CONV_UID_B].dims[1], 6);
    cr_expect_eq(back.conv.post_pad[1], 1);
    cr_expect_eq(back.conv.pre_pad[1], 0);
    cr_expect_eq(back.alpha, 0.5);
    cr_expect_eq(back.t[NN__CONV_UID_W].dims[1], 4, "the grouped filter's channels");

    /* The epilogue key: the plain graph comes back. */
    struct nn__conv_key epi, plain_key, back_key;
    nn__conv_plan_key_of(ctx, &d, NN__CONV_KEY_PLAIN, &epi);
    cr_assert_eq(nn__conv_graph_of_key(&epi, &back), 0);
    cr_expect_eq(back.t[NN__CONV_UID_B].rank, 0);
    cr_expect_eq(back.relu, 0);
    fwd_desc(&plain, 0, 0);
    plain.alpha = 0.5;
    nn__conv_plan_key_of(ctx, &plain, 0, &plain_key);
    nn__conv_plan_key_of(ctx, &back, 0, &back_key);
    cr_expect(nn__conv_key_equal(&plain_key, &back_key));

    struct nn__cudnn_tensor x, w, y;
    struct nn__conv_graph_params c;
    conv1d(3, &x, &w, &y, &c);
    nn__conv_graph_bwd_data(&d, &y, &w, &x, &c);
    d.beta = 1.0;
    expect_round_trip(ctx, &d, "bwd data, 1-D, true convolution, accumulating");
    nn__conv_graph_bwd_filter(&d, &x, &y, &w, &c);
    expect_round_trip(ctx, &d, "bwd filter");
    /* A key of no pass has no graph. */
    nn__conv_plan_key_of(ctx, &d, 0, &k);
    k.pass = 4;
    cr_expect_eq(nn__conv_graph_of_key(&k, &back), -1);
    k.pass = 0;
    cr_expect_eq(nn__conv_graph_of_key(&k, &back), -1);
    nn_ctx_destroy(ctx);
}

/* Conv's graph kind answers what the cuDNN layer asks of a key without building anything: whether
 * it has a graph, its data dtype (the note filter), the settings it was made under (prebuilding)
 * and its text; a key with no graph is refused before any cuDNN call. */
Test(plan_get, conv_graph_kind_reads_its_keys)
{
    nn_ctx *ctx = ref_ctx(NN_MATH_TF32, 1, 4096);
    const struct nn__graph_kind *kind = &nn__conv_graph_kind;
    cr_expect_eq(kind->cache, &nn__conv_plan_kind);
    cr_expect_eq(kind->cache->id, NN__CONV_KIND_ID);
    cr_expect_eq(kind->cache->key_size, sizeof(struct nn__conv_key));
    struct nn__conv_graph d;
    fwd_desc(&d, 1, 1);
    for (int u = 1; u < NN__CONV_UID_END; u++)
        if (d.t[u].rank) d.t[u].dtype = NN_DTYPE_F16;
    struct nn__conv_key k;
    nn__conv_plan_key_of(ctx, &d, 0, &k);
    cr_expect(kind->has_graph(&k));
    cr_expect_eq(kind->data_dtype(&k), NN_DTYPE_F16);
    struct nn__cache_settings s, want;
    kind->settings(&k, &s);
    nn__cache_settings_fill(ctx, &want);
    cr_expect(s.math_mode == want.math_mode && s.deterministic == want.deterministic &&
              s.workspace_cap == want.workspace_cap && s.workspace_cap == 4096);
    char a[NN__CUDNN_DESCRIBE_MAX], b[NN__CUDNN_DESCRIBE_MAX];
    cr_expect_str_eq(kind->describe(a, sizeof a, &k), nn__conv_graph_describe(b, sizeof b, &d));

    k.pass = 4;
    cr_expect_not(kind->has_graph(&k));
    struct nn__cudnn_graph *g = (void *)1;
    cr_expect_eq(nn__cudnn_graph_create(NULL, kind, &k, &g), NN_E_INVALID_ARG);
    cr_expect_null(g);
    cr_expect(strstr(nn_last_error()->message, "has no graph"), "%s", nn_last_error()->message);
    nn_ctx_destroy(ctx);
}

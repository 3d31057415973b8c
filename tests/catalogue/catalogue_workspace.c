/* Catalogue rows: nn_conv_workspace_size() (include/nnprim/conv.h) on the fixture's convolution
 * operands. */
#include <stdint.h>
#include <string.h>

#include "catalogue.h"

#define CALL(fname) static nn_status fname(struct cat *c)

static nn_status ws(struct cat *c, const nn_conv_params *p, const nn_tensor *x, const nn_tensor *w,
                    const nn_tensor *b, nn_conv_pass pass)
{
    size_t n = CAT_WS_UNSET;
    nn_status st = nn_conv_workspace_size(c->ctx, p, x, w, b, pass, 0, &n);
    return cat_ws_answer(c, st, n, 0);
}
static nn_status ws_fix(struct cat *c, nn_conv_pass pass)
{
    return ws(c, &c->cp, &c->x, &c->w, &c->b, pass);
}

CALL(null_ctx)
{
    size_t n;
    return nn_conv_workspace_size(NULL, &c->cp, &c->x, &c->w, NULL, NN_CONV_PASS_FORWARD, 0, &n);
}
CALL(null_bytes)
{
    return nn_conv_workspace_size(c->ctx, &c->cp, &c->x, &c->w, NULL, NN_CONV_PASS_FORWARD, 0,
                                  NULL);
}
CALL(null_p)
{
    return ws(c, NULL, &c->x, &c->w, NULL, NN_CONV_PASS_FORWARD);
}
CALL(null_x)
{
    return ws(c, &c->cp, NULL, &c->w, NULL, NN_CONV_PASS_FORWARD);
}
CALL(null_w)
{
    return ws(c, &c->cp, &c->x, NULL, NULL, NN_CONV_PASS_BACKWARD_DATA);
}
CALL(pass_4)
{
    return ws_fix(c, (nn_conv_pass)4);
}
CALL(pass_negative)
{
    return ws_fix(c, (nn_conv_pass)-1);
}
CALL(stride_0)
{
    c->cp.stride[1] = 0;
    return ws_fix(c, NN_CONV_PASS_FORWARD);
}
CALL(groups_0)
{
    c->cp.groups = 0;
    return ws_fix(c, NN_CONV_PASS_BACKWARD_FILTER);
}
CALL(reserved)
{
    c->cp.reserved[1] = 2;
    return ws_fix(c, NN_CONV_PASS_FORWARD);
}
CALL(accumulate_unknown)
{
    size_t n = CAT_WS_UNSET;
    nn_status st = nn_conv_workspace_size(c->ctx, &c->cp, &c->x, &c->w, &c->b,
                                          NN_CONV_PASS_BACKWARD_DATA, 0x40, &n);
    return cat_ws_answer(c, st, n, 0);
}
CALL(mode)
{
    c->cp.mode = (nn_conv_mode)9;
    return ws_fix(c, NN_CONV_PASS_FORWARD);
}
CALL(x_rank)
{
    c->cp.spatial_rank = 1;
    return ws_fix(c, NN_CONV_PASS_FORWARD);
}
CALL(w_rank)
{
    nn_tensor w = c->w;
    w.rank = 3;
    cat_packed(&w);
    return ws(c, &c->cp, &c->x, &w, NULL, NN_CONV_PASS_FORWARD);
}
CALL(w_channels)
{
    nn_tensor w = c->w;
    w.dims[1] = 1;
    cat_packed(&w);
    return ws(c, &c->cp, &c->x, &w, NULL, NN_CONV_PASS_BACKWARD_FILTER);
}
CALL(filter_too_big)
{
    nn_tensor w = c->w;
    w.dims[2] = 6;
    cat_packed(&w);
    return ws(c, &c->cp, &c->x, &w, NULL, NN_CONV_PASS_FORWARD);
}
CALL(b_dims)
{
    nn_tensor b = c->b;
    b.dims[0] = 2;
    cat_packed(&b);
    return ws(c, &c->cp, &c->x, &c->w, &b, NN_CONV_PASS_FORWARD);
}
CALL(w_dtype)
{
    nn_tensor w = c->w;
    w.dtype = NN_DTYPE_F16;
    cat_packed(&w);
    return ws(c, &c->cp, &c->x, &w, NULL, NN_CONV_PASS_FORWARD);
}
CALL(x_space)
{
    nn_tensor x = cat_wrong_space(c, &c->x);
    return ws(c, &c->cp, &x, &c->w, NULL, NN_CONV_PASS_FORWARD);
}
CALL(w_space)
{
    nn_tensor w = cat_wrong_space(c, &c->w);
    return ws(c, &c->cp, &c->x, &w, NULL, NN_CONV_PASS_BACKWARD_DATA);
}
CALL(b_claim)
{
    nn_tensor b = cat_claim_other_space(c, &c->b);
    return ws(c, &c->cp, &c->x, &c->w, &b, NN_CONV_PASS_FORWARD);
}
CALL(x_misaligned)
{
    nn_tensor x = c->x;
    x.data = (char *)x.data + 1;
    return ws(c, &c->cp, &x, &c->w, NULL, NN_CONV_PASS_FORWARD);
}
CALL(x_strided)
{
    nn_tensor x = c->x;
    x.strides[3] = 2;
    x.strides[2] = 10;
    x.strides[1] = 50;
    x.strides[0] = 100;
    return ws(c, &c->cp, &x, &c->w, NULL, NN_CONV_PASS_FORWARD);
}
CALL(x_count_overflow)
{
    nn_tensor x = cat_count_overflow(&c->x);
    return ws(c, &c->cp, &x, &c->w, NULL, NN_CONV_PASS_FORWARD);
}
CALL(w_extent_overflow)
{
    nn_tensor w = cat_extent_overflow(&c->w);
    return ws(c, &c->cp, &c->x, &w, NULL, NN_CONV_PASS_BACKWARD_FILTER);
}
/* The reference computes any size that fits int64; cuDNN takes int. */
CALL(stride_huge)
{
    c->cp.stride[0] = c->cp.stride[1] = INT64_MAX;
    return ws_fix(c, NN_CONV_PASS_FORWARD);
}
/* Edge: every pass of the fixture, with relu (the backward passes hold the masked dy). */
CALL(every_pass)
{
    c->cp.activation = NN_ACTIVATION_RELU;
    for (int pass = 0; pass < 4; pass++)
        cr_assert_eq(ws_fix(c, (nn_conv_pass)pass), NN_OK, "pass %d: %s", pass,
                     nn_last_error()->message);
    return NN_OK;
}

/* bf16's bias gradient on cuDNN sums dy through a tensor of ones kept per shape, which the query
 * makes (conv.h): under a 1-byte pool limit it is refused as the call would be. */
CALL(bias_bf16_starved)
{
    nn_tensor x = cat_tensor(c, NN_DTYPE_BF16, c->x.rank, c->x.dims, 31),
              w = cat_tensor(c, NN_DTYPE_BF16, c->w.rank, c->w.dims, 32),
              b = cat_tensor(c, NN_DTYPE_BF16, c->b.rank, c->b.dims, 33);
    struct cat_pool_mark m;
    cat_pool_starve(c, &m);
    nn_status st = ws(c, &c->cp, &x, &w, &b, NN_CONV_PASS_BACKWARD_BIAS);
    cat_pool_restore(&m, 0);
    nn_tensor *all[] = {&x, &w, &b};
    for (int i = 0; i < 3; i++)
        cr_assert_eq(nn_tensor_free(c->ctx, all[i]), NN_OK, "row cleanup");
    return st;
}

#define E NN_E_INVALID_ARG
#define S NN_E_SHAPE
#define D NN_E_DTYPE
#define M NN_E_MEMSPACE
#define U NN_E_UNSUPPORTED
#define O NN_E_OVERFLOW

static const struct cat_row rows[] = {
    ROW("ctx NULL", "nn_conv_workspace_size", "ctx", E, null_ctx),
    ROW("bytes NULL", "nn_conv_workspace_size", "bytes", E, null_bytes),
    ROW("p NULL", "nn_conv_workspace_size", "p", E, null_p),
    ROW("x NULL", "nn_conv_workspace_size", "x", E, null_x),
    ROW("w NULL", "nn_conv_workspace_size", "w", E, null_w),
    ROW("pass 4", "nn_conv_workspace_size", "pass", E, pass_4),
    ROW("pass -1", "nn_conv_workspace_size", "pass", E, pass_negative),
    ROW("stride 0", "nn_conv_workspace_size", "p.stride[1]", E, stride_0),
    ROW("groups 0", "nn_conv_workspace_size", "p.groups", E, groups_0),
    ROW("reserved", "nn_conv_workspace_size", "p.reserved[1]", E, reserved),
    ROW("accumulate bit unknown", "nn_conv_workspace_size", "accumulate", E, accumulate_unknown),
    ROW("mode", "nn_conv_workspace_size", "p.mode", E, mode),
    ROW("x rank", "nn_conv_workspace_size", "x.rank", S, x_rank),
    ROW("w rank", "nn_conv_workspace_size", "w.rank", S, w_rank),
    ROW("w channels", "nn_conv_workspace_size", "w.dims[1]", S, w_channels),
    ROW("filter larger than the input", "nn_conv_workspace_size", "x.dims[2]", S, filter_too_big),
    ROW("b dims", "nn_conv_workspace_size", "b.dims[0]", S, b_dims),
    ROW("w dtype", "nn_conv_workspace_size", "w.dtype", D, w_dtype),
    ROW("x wrong space", "nn_conv_workspace_size", "x", M, x_space),
    ROW("w wrong space", "nn_conv_workspace_size", "w", M, w_space),
    ROW("b space label", "nn_conv_workspace_size", "b", M, b_claim),
    ROW("x misaligned", "nn_conv_workspace_size", "x", E, x_misaligned),
    ROW("x strided", "nn_conv_workspace_size", "x", U, x_strided),
    ROW("x element count overflows", "nn_conv_workspace_size", "x", O, x_count_overflow),
    ROW("w byte extent overflows", "nn_conv_workspace_size", "w", O, w_extent_overflow),
    ROW2("stride INT64_MAX", "nn_conv_workspace_size", "p.stride[0]", NN_OK, U, stride_huge),
    ROW("every pass", "nn_conv_workspace_size", NULL, NN_OK, every_pass),
    ROW_ON(CAT_GPU_ONLY, "bf16 bias under a 1-byte pool limit (the ones)", "nn_conv_workspace_size",
           "limit", NN_E_OOM_DEVICE, bias_bf16_starved),
};

CAT_SUBJECT(workspace, rows)

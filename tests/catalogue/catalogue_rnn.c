/* Catalogue rows: the recurrent layers and their weight views (include/nnprim/rnn.h). Each row
 * makes its operands for a one-layer LSTM (I 2, H 3; T 3, N 2, sequence-major: x dx 3x2x2, y dy
 * 3x2x3, hx hy cx cy and their gradients 1x2x3, w dw nn_rnn_weights_size()) in the context's
 * memory and frees them after. */
#include <math.h>
#include <string.h>

#include "catalogue.h"
#include "catalogue_family.h"

struct rn {
    nn_rnn_params p;
    int64_t wn;
    nn_tensor x, y, hx, hy, cx, cy, w;
    nn_tensor dx, dy, dhx, dhy, dcx, dcy, dw;
};

static const int64_t X[] = {3, 2, 2}, Y[] = {3, 2, 3}, H[] = {1, 2, 3};

static void rn_setup(struct cat *c, struct rn *r)
{
    cr_assert_eq(nn_rnn_params_default(&r->p, NN_RNN_LSTM, 2, 3), NN_OK, "fixture");
    cr_assert_eq(nn_rnn_weights_size(c->ctx, &r->p, NN_DTYPE_F32, &r->wn), NN_OK, "fixture: %s",
                 nn_last_error()->message);
    int64_t wd[] = {r->wn};
    r->x = cat_tensor(c, NN_DTYPE_F32, 3, X, 301);
    r->y = cat_tensor(c, NN_DTYPE_F32, 3, Y, 302);
    r->hx = cat_tensor(c, NN_DTYPE_F32, 3, H, 303);
    r->hy = cat_tensor(c, NN_DTYPE_F32, 3, H, 304);
    r->cx = cat_tensor(c, NN_DTYPE_F32, 3, H, 305);
    r->cy = cat_tensor(c, NN_DTYPE_F32, 3, H, 306);
    r->w = cat_tensor(c, NN_DTYPE_F32, 1, wd, 307);
    r->dx = cat_tensor(c, NN_DTYPE_F32, 3, X, 308);
    r->dy = cat_tensor(c, NN_DTYPE_F32, 3, Y, 309);
    r->dhx = cat_tensor(c, NN_DTYPE_F32, 3, H, 310);
    r->dhy = cat_tensor(c, NN_DTYPE_F32, 3, H, 311);
    r->dcx = cat_tensor(c, NN_DTYPE_F32, 3, H, 312);
    r->dcy = cat_tensor(c, NN_DTYPE_F32, 3, H, 313);
    r->dw = cat_tensor(c, NN_DTYPE_F32, 1, wd, 314);
}

static void rn_free(struct cat *c, struct rn *r)
{
    CAT_FREE_TENSORS(c, &r->x, &r->y, &r->hx, &r->hy, &r->cx, &r->cy, &r->w, &r->dx, &r->dy,
                     &r->dhx, &r->dhy, &r->dcx, &r->dcy, &r->dw);
}

/* A row body gets the operands; rows change copies of the views, never r's own. */
#define CALL(fname) CAT_FAMILY_CALL(fname, struct rn, r, rn_setup, rn_free)

/* Forward with every optional argument given. */
static nn_status fwd_all(struct cat *c, struct rn *r, const nn_tensor *x, const int32_t *lengths,
                         const nn_tensor *hx, const nn_tensor *cx, const nn_tensor *w, nn_tensor *y,
                         nn_tensor *hy, nn_tensor *cy)
{
    return nn_rnn_forward(
        c->ctx, &r->p,
        &(nn_rnn_forward_tensors){
            .x = x, .lengths = lengths, .hx = hx, .cx = cx, .w = w, .y = y, .hy = hy, .cy = cy},
        NULL);
}
static nn_status fwd(struct cat *c, struct rn *r)
{
    return fwd_all(c, r, &r->x, NULL, &r->hx, &r->cx, &r->w, &r->y, &r->hy, &r->cy);
}

/* dims 0 and 1 of a rank-3 view swapped in the strides (valid, not packed). */
static nn_tensor swapped(const nn_tensor *t)
{
    nn_tensor v = *t;
    v.strides[0] = t->dims[2];
    v.strides[1] = t->dims[0] * t->dims[2];
    return v;
}

/* ---- nn_rnn_params_default ---- */

static nn_status pd_null(struct cat *c)
{
    (void)c;
    return nn_rnn_params_default(NULL, NN_RNN_LSTM, 2, 3);
}
static nn_status pd_cell(struct cat *c)
{
    (void)c;
    nn_rnn_params p;
    return nn_rnn_params_default(&p, (nn_rnn_cell)4, 2, 3);
}
static nn_status pd_cell_neg(struct cat *c)
{
    (void)c;
    nn_rnn_params p;
    return nn_rnn_params_default(&p, (nn_rnn_cell)-1, 2, 3);
}
static nn_status pd_input0(struct cat *c)
{
    (void)c;
    nn_rnn_params p;
    return nn_rnn_params_default(&p, NN_RNN_GRU, 0, 3);
}
static nn_status pd_hidden_neg(struct cat *c)
{
    (void)c;
    nn_rnn_params p;
    return nn_rnn_params_default(&p, NN_RNN_TANH, 2, INT64_MIN);
}
/* Edge: a refused call leaves p as it was. */
static nn_status pd_untouched(struct cat *c)
{
    (void)c;
    nn_rnn_params p, before;
    memset(&p, 0x5a, sizeof p);
    before = p;
    nn_status st = nn_rnn_params_default(&p, NN_RNN_RELU, -1, 3);
    cr_assert(memcmp(&p, &before, sizeof p) == 0, "p changed");
    return st;
}

/* ---- nn_rnn_weights_size: every parameter ---- */

static nn_status ws(struct cat *c, const nn_rnn_params *p)
{
    int64_t n = -7;
    nn_status st = nn_rnn_weights_size(c->ctx, p, NN_DTYPE_F32, &n);
    if (st != NN_OK) cr_assert_eq(n, -7, "numel must be untouched on failure");
    return st;
}
#define PARAM_ROW(fname, stmt)                                                                     \
    CALL(fname)                                                                                    \
    {                                                                                              \
        stmt;                                                                                      \
        return ws(c, &r->p);                                                                       \
    }
CALL(ws_null_ctx)
{
    (void)c;
    int64_t n;
    return nn_rnn_weights_size(NULL, &r->p, NN_DTYPE_F32, &n);
}
static nn_status ws_null_p(struct cat *c)
{
    int64_t n;
    return nn_rnn_weights_size(c->ctx, NULL, NN_DTYPE_F32, &n);
}
CALL(ws_null_numel)
{
    return nn_rnn_weights_size(c->ctx, &r->p, NN_DTYPE_F32, NULL);
}
CALL(ws_dtype)
{
    int64_t n;
    return nn_rnn_weights_size(c->ctx, &r->p, (nn_dtype)7, &n);
}
PARAM_ROW(ws_cell, r->p.cell = (nn_rnn_cell)9)
PARAM_ROW(ws_input0, r->p.input_size = 0)
PARAM_ROW(ws_hidden0, r->p.hidden_size = 0)
PARAM_ROW(ws_proj_neg, r->p.proj_size = -1)
PARAM_ROW(ws_proj_gru, r->p.cell = NN_RNN_GRU; r->p.proj_size = 1)
PARAM_ROW(ws_proj_big, r->p.proj_size = 3)
PARAM_ROW(ws_layers0, r->p.num_layers = 0)
PARAM_ROW(ws_layers_neg, r->p.num_layers = INT64_MIN)
PARAM_ROW(ws_bidir2, r->p.bidirectional = 2)
PARAM_ROW(ws_bidir_neg, r->p.bidirectional = -1)
PARAM_ROW(ws_bias4, r->p.bias_mode = (nn_rnn_bias_mode)4)
PARAM_ROW(ws_input_mode2, r->p.input_mode = (nn_rnn_input_mode)2)
PARAM_ROW(ws_skip, r->p.input_mode = NN_RNN_INPUT_SKIP)
PARAM_ROW(ws_layout2, r->p.layout = (nn_rnn_layout)2)
PARAM_ROW(ws_drop_neg, r->p.dropout = -0.1)
PARAM_ROW(ws_drop_one, r->p.dropout = 1.0)
PARAM_ROW(ws_drop_nan, r->p.dropout = NAN)
PARAM_ROW(ws_clip2, r->p.clip_enabled = 2)
PARAM_ROW(ws_clip_gru, r->p.cell = NN_RNN_GRU; r->p.clip_enabled = 1)
PARAM_ROW(ws_clip_order, r->p.clip_enabled = 1; r->p.clip_lo = 1; r->p.clip_hi = -1)
PARAM_ROW(ws_clip_inf, r->p.clip_enabled = 1; r->p.clip_lo = -1; r->p.clip_hi = INFINITY)
PARAM_ROW(ws_clip_nan, r->p.clip_enabled = 1; r->p.clip_lo = NAN; r->p.clip_hi = 1)
PARAM_ROW(ws_res0, r->p.reserved[0] = 1)
PARAM_ROW(ws_res1, r->p.reserved[1] = 2)
PARAM_ROW(ws_res2, r->p.reserved[2] = 3)
PARAM_ROW(ws_res3, r->p.reserved[3] = UINT64_MAX)
/* Edge: clip bounds are ignored (not checked) while the clip is off. */
PARAM_ROW(ws_clip_off_nan, r->p.clip_lo = NAN; r->p.clip_hi = -INFINITY)
/* Edge: the sizes of the weights, counted on the reference (cuDNN may pad the buffer). */
CALL(ws_count)
{
    int64_t n;
    nn_status st = nn_rnn_weights_size(c->ctx, &r->p, NN_DTYPE_F32, &n);
    if (st == NN_OK && !c->gpu)
        cr_assert_eq(n, 12 * 2 + 12 * 3 + 12 + 12, "LSTM I 2 H 3 has 84 weights, got %lld",
                     (long long)n);
    return st;
}
/* Sizes whose products overflow int64 (the reference counted them in a loop over layers). */
PARAM_ROW(ws_hidden_overflow, r->p.hidden_size = INT64_MAX / 2)
PARAM_ROW(ws_hidden_sq_overflow, r->p.hidden_size = INT64_C(1) << 32)
PARAM_ROW(ws_input_overflow, r->p.input_size = INT64_MAX)
PARAM_ROW(ws_layers_max, r->p.num_layers = INT64_MAX)
PARAM_ROW(ws_layers_bidir, r->p.num_layers = INT64_MAX / 2 + 1; r->p.bidirectional = 1)
PARAM_ROW(ws_dirs_overflow, r->p.cell = NN_RNN_RELU; r->p.hidden_size = INT64_MAX / 2 + 1;
          r->p.bidirectional = 1)
/* Sizes that fit int64 but not cuDNN's int: the reference counts them. */
PARAM_ROW(ws_hidden_2_31, r->p.cell = NN_RNN_RELU; r->p.input_size = 1;
          r->p.hidden_size = INT64_C(1) << 31)
PARAM_ROW(ws_layers_2_40, r->p.cell = NN_RNN_RELU; r->p.input_size = r->p.hidden_size = 1;
          r->p.num_layers = INT64_C(1) << 40)
PARAM_ROW(ws_input_2_31, r->p.input_size = INT64_C(1) << 31)
PARAM_ROW(ws_gates_int, r->p.hidden_size = (INT64_C(1) << 29) + 1; r->p.input_size = 1)

/* ---- nn_rnn_weight_view ---- */

static nn_status wv(struct cat *c, struct rn *r, const nn_tensor *w, int64_t layer, int dir,
                    nn_rnn_weight_name name)
{
    nn_tensor out;
    memset(&out, 0x5a, sizeof out);
    nn_tensor before = out;
    nn_status st = nn_rnn_weight_view(c->ctx, &r->p, w, layer, dir, name, &out);
    if (st != NN_OK) cr_assert(memcmp(&out, &before, sizeof out) == 0, "out must be untouched");
    return st;
}
CALL(wv_null_ctx)
{
    (void)c;
    nn_tensor out;
    return nn_rnn_weight_view(NULL, &r->p, &r->w, 0, 0, NN_RNN_WEIGHT_IH, &out);
}
CALL(wv_null_p)
{
    nn_tensor out;
    return nn_rnn_weight_view(c->ctx, NULL, &r->w, 0, 0, NN_RNN_WEIGHT_IH, &out);
}
CALL(wv_null_w)
{
    return wv(c, r, NULL, 0, 0, NN_RNN_WEIGHT_IH);
}
CALL(wv_null_out)
{
    return nn_rnn_weight_view(c->ctx, &r->p, &r->w, 0, 0, NN_RNN_WEIGHT_IH, NULL);
}
CALL(wv_null_wdata)
{
    nn_tensor w = r->w;
    w.data = NULL;
    return wv(c, r, &w, 0, 0, NN_RNN_WEIGHT_IH);
}
CALL(wv_layer_neg)
{
    return wv(c, r, &r->w, -1, 0, NN_RNN_WEIGHT_HH);
}
CALL(wv_layer_L)
{
    return wv(c, r, &r->w, 1, 0, NN_RNN_WEIGHT_HH);
}
CALL(wv_layer_max)
{
    return wv(c, r, &r->w, INT64_MAX, 0, NN_RNN_WEIGHT_HH);
}
CALL(wv_dir1_uni)
{
    return wv(c, r, &r->w, 0, 1, NN_RNN_WEIGHT_HH);
}
CALL(wv_dir_neg)
{
    return wv(c, r, &r->w, 0, -1, NN_RNN_WEIGHT_HH);
}
CALL(wv_dir2_bidir)
{
    r->p.bidirectional = 1;
    return wv(c, r, &r->w, 0, 2, NN_RNN_WEIGHT_HH);
}
CALL(wv_name5)
{
    return wv(c, r, &r->w, 0, 0, (nn_rnn_weight_name)5);
}
CALL(wv_name_neg)
{
    return wv(c, r, &r->w, 0, 0, (nn_rnn_weight_name)-1);
}
CALL(wv_bias_none)
{
    r->p.bias_mode = NN_RNN_BIAS_NONE;
    return wv(c, r, &r->w, 0, 0, NN_RNN_BIAS_IH);
}
CALL(wv_bias_hh_input)
{
    r->p.bias_mode = NN_RNN_BIAS_INPUT;
    return wv(c, r, &r->w, 0, 0, NN_RNN_BIAS_HH);
}
CALL(wv_bias_ih_recurrent)
{
    r->p.bias_mode = NN_RNN_BIAS_RECURRENT;
    return wv(c, r, &r->w, 0, 0, NN_RNN_BIAS_IH);
}
CALL(wv_skip_ih)
{
    r->p.input_mode = NN_RNN_INPUT_SKIP;
    r->p.input_size = 3;
    return wv(c, r, &r->w, 0, 0, NN_RNN_WEIGHT_IH);
}
CALL(wv_hr_no_proj)
{
    return wv(c, r, &r->w, 0, 0, NN_RNN_WEIGHT_HR);
}
CALL(wv_bad_param)
{
    r->p.dropout = 2;
    return wv(c, r, &r->w, 0, 0, NN_RNN_WEIGHT_HH);
}
CALL(wv_w_short)
{
    nn_tensor w = cat_view_on(&r->w, 1, (int64_t[]){r->wn - 1}, 0);
    return wv(c, r, &w, 0, 0, NN_RNN_WEIGHT_HH);
}
CALL(wv_w_long)
{
    /* a buffer for other parameters: these have fewer weights */
    r->p.bias_mode = NN_RNN_BIAS_NONE;
    return wv(c, r, &r->w, 0, 0, NN_RNN_WEIGHT_HH);
}
CALL(wv_w_rank2)
{
    nn_tensor w = cat_view_on(&r->w, 2, (int64_t[]){1, r->wn}, 0);
    return wv(c, r, &w, 0, 0, NN_RNN_WEIGHT_HH);
}
CALL(wv_w_dtype_bad)
{
    nn_tensor w = r->w;
    w.dtype = (nn_dtype)11;
    return wv(c, r, &w, 0, 0, NN_RNN_WEIGHT_HH);
}
CALL(wv_w_strided)
{
    nn_tensor w = cat_view_on(&r->dw, 1, (int64_t[]){r->wn / 2}, 0);
    w.strides[0] = 2; /* every other element of dw's storage */
    return wv(c, r, &w, 0, 0, NN_RNN_WEIGHT_HH);
}
CALL(wv_w_misaligned)
{
    nn_tensor w = r->w;
    w.data = (char *)w.data + 1;
    return wv(c, r, &w, 0, 0, NN_RNN_WEIGHT_HH);
}
CALL(wv_claim_w)
{
    nn_tensor w = cat_claim_other_space(c, &r->w);
    return wv(c, r, &w, 0, 0, NN_RNN_WEIGHT_HH);
}
CALL(wv_space_w)
{
    nn_tensor w = cat_wrong_space(c, &r->w);
    return wv(c, r, &w, 0, 0, NN_RNN_WEIGHT_HH);
}
CALL(wv_hidden_overflow)
{
    r->p.hidden_size = INT64_MAX / 3;
    return wv(c, r, &r->w, 0, 0, NN_RNN_WEIGHT_HH);
}
CALL(wv_layer_huge)
{
    /* many layers: the offset of the last one is computed, not walked to */
    r->p.cell = NN_RNN_RELU;
    r->p.input_size = r->p.hidden_size = 1;
    r->p.bias_mode = NN_RNN_BIAS_NONE;
    r->p.num_layers = INT64_C(1) << 40;
    nn_tensor w = r->w;
    w.dims[0] = INT64_C(1) << 41; /* never read: the view is only computed */
    w.dtype = NN_DTYPE_F16;
    nn_tensor out;
    nn_status st =
        nn_rnn_weight_view(c->ctx, &r->p, &w, (INT64_C(1) << 40) - 1, 0, NN_RNN_WEIGHT_HH, &out);
    if (st == NN_OK)
        cr_assert_eq((char *)out.data - (char *)w.data, ((INT64_C(1) << 41) - 1) * 2,
                     "offset of the last layer's weight_hh");
    return st;
}
/* Edge: every view of a 2-layer bidirectional LSTM with a projection has its dims, lies in w and
 * overlaps no other. */
CALL(wv_all)
{
    nn_rnn_params p;
    cr_assert_eq(nn_rnn_params_default(&p, NN_RNN_LSTM, 2, 4), NN_OK, "fixture");
    p.num_layers = 2;
    p.bidirectional = 1;
    p.proj_size = 2;
    r->p = p;
    int64_t n;
    cr_assert_eq(nn_rnn_weights_size(c->ctx, &p, NN_DTYPE_F32, &n), NN_OK, "fixture: %s",
                 nn_last_error()->message);
    nn_tensor w = cat_tensor(c, NN_DTYPE_F32, 1, (int64_t[]){n}, 320);
    nn_tensor v[20];
    int nv = 0;
    nn_status st = NN_OK;
    for (int64_t l = 0; l < 2 && st == NN_OK; l++)
        for (int d = 0; d < 2 && st == NN_OK; d++)
            for (int k = 0; k < 5 && st == NN_OK; k++) {
                st = nn_rnn_weight_view(c->ctx, &p, &w, l, d, (nn_rnn_weight_name)k, &v[nv]);
                if (st != NN_OK) break;
                int64_t want[5][2] = {{16, l ? 4 : 2}, {16, 2}, {16, 0}, {16, 0}, {2, 4}};
                cr_assert_eq(v[nv].dims[0], want[k][0], "view %d dims[0]", k);
                if (want[k][1]) cr_assert_eq(v[nv].dims[1], want[k][1], "view %d dims[1]", k);
                size_t bytes;
                cr_assert_eq(nn_tensor_extent_bytes(&v[nv], &bytes), NN_OK, "extent");
                cr_assert((char *)v[nv].data >= (char *)w.data &&
                              (char *)v[nv].data + bytes <= (char *)w.data + n * 4,
                          "view %d lies outside w", k);
                for (int j = 0; j < nv; j++) {
                    size_t bj;
                    nn_tensor_extent_bytes(&v[j], &bj);
                    cr_assert((char *)v[nv].data >= (char *)v[j].data + bj ||
                                  (char *)v[j].data >= (char *)v[nv].data + bytes,
                              "views %d and %d overlap", nv, j);
                }
                nv++;
            }
    nn_tensor_free(c->ctx, &w);
    return st;
}

/* A weight view's free is refused, the first view (which starts where w does) included; w then
 * frees its storage once, as before. */
CALL(wv_free_refused)
{
    int64_t n;
    cr_assert_eq(nn_rnn_weights_size(c->ctx, &r->p, NN_DTYPE_F32, &n), NN_OK, "fixture");
    nn_tensor w = cat_tensor(c, NN_DTYPE_F32, 1, (int64_t[]){n}, 321), v;
    cr_assert_eq(nn_rnn_weight_view(c->ctx, &r->p, &w, 0, 0, NN_RNN_WEIGHT_IH, &v), NN_OK, "%s",
                 nn_last_error()->message);
    cr_assert_eq(v.flags, NN_TENSOR_BORROWED, "a weight view is marked borrowed");
    nn_tensor before = v;
    nn_status st = nn_tensor_free(c->ctx, &v);
    cr_assert_eq(memcmp(&v, &before, sizeof v), 0, "a refused free changes the view");
    cr_assert_eq(nn_tensor_free(c->ctx, &w), NN_OK, "w still owns its storage");
    return st;
}

/* ---- nn_rnn_forward ---- */

CALL(f_null_ctx)
{
    (void)c;
    return nn_rnn_forward(NULL, &r->p,
                          &(nn_rnn_forward_tensors){.x = &r->x, .w = &r->w, .y = &r->y}, NULL);
}
CALL(f_null_p)
{
    return nn_rnn_forward(c->ctx, NULL,
                          &(nn_rnn_forward_tensors){.x = &r->x, .w = &r->w, .y = &r->y}, NULL);
}
CALL(f_null_x)
{
    return fwd_all(c, r, NULL, NULL, &r->hx, &r->cx, &r->w, &r->y, &r->hy, &r->cy);
}
CALL(f_null_w)
{
    return fwd_all(c, r, &r->x, NULL, &r->hx, &r->cx, NULL, &r->y, &r->hy, &r->cy);
}
CALL(f_null_y)
{
    return fwd_all(c, r, &r->x, NULL, &r->hx, &r->cx, &r->w, NULL, &r->hy, &r->cy);
}
CALL(f_null_xdata)
{
    nn_tensor x = r->x;
    x.data = NULL;
    return fwd_all(c, r, &x, NULL, &r->hx, &r->cx, &r->w, &r->y, &r->hy, &r->cy);
}
CALL(f_null_hxdata)
{
    nn_tensor hx = r->hx;
    hx.data = NULL;
    return fwd_all(c, r, &r->x, NULL, &hx, &r->cx, &r->w, &r->y, &r->hy, &r->cy);
}
CALL(f_null_t)
{
    return nn_rnn_forward(c->ctx, &r->p, NULL, NULL);
}
CALL(f_t_reserved)
{
    nn_rnn_forward_tensors t = {.x = &r->x, .w = &r->w, .y = &r->y, .reserved = {0, 5}};
    return nn_rnn_forward(c->ctx, &r->p, &t, NULL);
}
CALL(f_pullback_null_on_failure)
{
    nn_rnn_pullback *pb = (nn_rnn_pullback *)c;
    nn_status st =
        nn_rnn_forward(c->ctx, &r->p, &(nn_rnn_forward_tensors){.x = &r->x, .w = &r->w}, &pb);
    cr_assert_null(pb, "*pullback_out must be NULL after a failure");
    return st;
}
CALL(f_cell)
{
    r->p.cell = (nn_rnn_cell)4;
    return fwd(c, r);
}
CALL(f_dropout)
{
    r->p.dropout = 1.5;
    return fwd(c, r);
}
CALL(f_res2)
{
    r->p.reserved[2] = 1;
    return fwd(c, r);
}
CALL(f_proj_gru)
{
    r->p.cell = NN_RNN_GRU;
    r->p.proj_size = 2;
    return fwd(c, r);
}
CALL(f_x_rank2)
{
    nn_tensor x = cat_view_on(&r->x, 2, (int64_t[]){6, 2}, 0);
    return fwd_all(c, r, &x, NULL, &r->hx, &r->cx, &r->w, &r->y, &r->hy, &r->cy);
}
CALL(f_x_rank4)
{
    nn_tensor x = cat_view_on(&r->x, 4, (int64_t[]){3, 2, 2, 1}, 0);
    return fwd_all(c, r, &x, NULL, &r->hx, &r->cx, &r->w, &r->y, &r->hy, &r->cy);
}
CALL(f_x_input)
{
    nn_tensor x = cat_view_on(&r->x, 3, (int64_t[]){3, 2, 1}, 0);
    return fwd_all(c, r, &x, NULL, &r->hx, &r->cx, &r->w, &r->y, &r->hy, &r->cy);
}
CALL(f_x_dtype_bad)
{
    nn_tensor x = r->x;
    x.dtype = (nn_dtype)6;
    return fwd_all(c, r, &x, NULL, &r->hx, &r->cx, &r->w, &r->y, &r->hy, &r->cy);
}
CALL(f_y_width)
{
    nn_tensor y = cat_view_on(&r->y, 3, (int64_t[]){3, 2, 2}, 0);
    return fwd_all(c, r, &r->x, NULL, &r->hx, &r->cx, &r->w, &y, &r->hy, &r->cy);
}
CALL(f_y_T)
{
    nn_tensor y = cat_view_on(&r->y, 3, (int64_t[]){2, 2, 3}, 0);
    return fwd_all(c, r, &r->x, NULL, &r->hx, &r->cx, &r->w, &y, &r->hy, &r->cy);
}
CALL(f_y_rank)
{
    nn_tensor y = cat_view_on(&r->y, 2, (int64_t[]){6, 3}, 0);
    return fwd_all(c, r, &r->x, NULL, &r->hx, &r->cx, &r->w, &y, &r->hy, &r->cy);
}
CALL(f_y_bidir)
{
    /* bidirectional: y is D*O = 6 wide */
    r->p.bidirectional = 1;
    return fwd_all(c, r, &r->x, NULL, NULL, NULL, &r->w, &r->y, NULL, NULL);
}
CALL(f_hx_layers)
{
    r->p.num_layers = 2;
    return fwd_all(c, r, &r->x, NULL, &r->hx, NULL, &r->w, &r->y, NULL, NULL);
}
CALL(f_hx_n)
{
    nn_tensor hx = cat_view_on(&r->hx, 3, (int64_t[]){1, 1, 3}, 0);
    return fwd_all(c, r, &r->x, NULL, &hx, &r->cx, &r->w, &r->y, &r->hy, &r->cy);
}
CALL(f_hx_width)
{
    nn_tensor hx = cat_view_on(&r->hx, 3, (int64_t[]){1, 3, 2}, 0);
    return fwd_all(c, r, &r->x, NULL, &hx, &r->cx, &r->w, &r->y, &r->hy, &r->cy);
}
CALL(f_hx_rank)
{
    nn_tensor hx = cat_view_on(&r->hx, 2, (int64_t[]){2, 3}, 0);
    return fwd_all(c, r, &r->x, NULL, &hx, &r->cx, &r->w, &r->y, &r->hy, &r->cy);
}
CALL(f_cx_proj)
{
    /* with a projection h is P = 2 wide and c stays H = 3 wide: a cx 2 wide is refused */
    r->p.proj_size = 2;
    int64_t n;
    cr_assert_eq(nn_rnn_weights_size(c->ctx, &r->p, NN_DTYPE_F32, &n), NN_OK, "fixture");
    nn_tensor w = cat_tensor(c, NN_DTYPE_F32, 1, (int64_t[]){n}, 321);
    nn_tensor y = cat_view_on(&r->y, 3, (int64_t[]){3, 2, 2}, 0);
    nn_tensor hx = cat_view_on(&r->hx, 3, (int64_t[]){1, 2, 2}, 0);
    nn_tensor cx = cat_view_on(&r->cx, 3, (int64_t[]){1, 2, 2}, 0);
    nn_status st = fwd_all(c, r, &r->x, NULL, &hx, &cx, &w, &y, NULL, NULL);
    nn_tensor_free(c->ctx, &w);
    return st;
}
CALL(f_cx_gru)
{
    r->p.cell = NN_RNN_GRU;
    return fwd_all(c, r, &r->x, NULL, NULL, &r->cx, &r->w, &r->y, NULL, NULL);
}
CALL(f_cy_relu)
{
    r->p.cell = NN_RNN_RELU;
    return fwd_all(c, r, &r->x, NULL, NULL, NULL, &r->w, &r->y, NULL, &r->cy);
}
CALL(f_hy_dims)
{
    nn_tensor hy = cat_view_on(&r->hy, 3, (int64_t[]){2, 1, 3}, 0);
    return fwd_all(c, r, &r->x, NULL, &r->hx, &r->cx, &r->w, &r->y, &hy, &r->cy);
}
CALL(f_cy_dims)
{
    nn_tensor cy = cat_view_on(&r->cy, 3, (int64_t[]){1, 2, 2}, 0);
    return fwd_all(c, r, &r->x, NULL, &r->hx, &r->cx, &r->w, &r->y, &r->hy, &cy);
}
CALL(f_w_dims)
{
    nn_tensor w = cat_view_on(&r->w, 1, (int64_t[]){r->wn - 4}, 0);
    return fwd_all(c, r, &r->x, NULL, &r->hx, &r->cx, &w, &r->y, &r->hy, &r->cy);
}
CALL(f_w_other_params)
{
    /* w sized for these parameters, then the parameters change under it */
    r->p.bias_mode = NN_RNN_BIAS_INPUT;
    return fwd(c, r);
}
CALL(f_w_dtype)
{
    nn_tensor w = r->w;
    w.dtype = NN_DTYPE_F64;
    w.dims[0] = r->wn / 2;
    return fwd_all(c, r, &r->x, NULL, &r->hx, &r->cx, &w, &r->y, &r->hy, &r->cy);
}
CALL(f_y_dtype)
{
    nn_tensor y = r->y;
    y.dtype = NN_DTYPE_F16;
    return fwd_all(c, r, &r->x, NULL, &r->hx, &r->cx, &r->w, &y, &r->hy, &r->cy);
}
CALL(f_hx_dtype)
{
    nn_tensor hx = r->hx;
    hx.dtype = NN_DTYPE_BF16;
    return fwd_all(c, r, &r->x, NULL, &hx, &r->cx, &r->w, &r->y, &r->hy, &r->cy);
}
CALL(f_cy_dtype)
{
    nn_tensor cy = r->cy;
    cy.dtype = NN_DTYPE_F16;
    return fwd_all(c, r, &r->x, NULL, &r->hx, &r->cx, &r->w, &r->y, &r->hy, &cy);
}
CALL(f_layout_dims)
{
    /* batch-major reads x 3x2x2 as N 3, T 2: hx's N (2) no longer matches */
    r->p.layout = NN_RNN_BATCH_MAJOR;
    return fwd(c, r);
}
CALL(f_len_neg)
{
    int32_t len[2] = {-1, 3};
    return fwd_all(c, r, &r->x, len, &r->hx, &r->cx, &r->w, &r->y, &r->hy, &r->cy);
}
CALL(f_len_big)
{
    int32_t len[2] = {3, 4};
    return fwd_all(c, r, &r->x, len, &r->hx, &r->cx, &r->w, &r->y, &r->hy, &r->cy);
}
CALL(f_len_min)
{
    int32_t len[2] = {2, INT32_MIN};
    return fwd_all(c, r, &r->x, len, &r->hx, &r->cx, &r->w, &r->y, &r->hy, &r->cy);
}
CALL(f_x_strided)
{
    nn_tensor x = swapped(&r->x);
    return fwd_all(c, r, &x, NULL, &r->hx, &r->cx, &r->w, &r->y, &r->hy, &r->cy);
}
CALL(f_y_strided)
{
    nn_tensor y = swapped(&r->y);
    return fwd_all(c, r, &r->x, NULL, &r->hx, &r->cx, &r->w, &y, &r->hy, &r->cy);
}
CALL(f_hx_strided)
{
    nn_tensor hx = r->hx;
    hx.strides[1] = 1;
    hx.strides[2] = 2;
    return fwd_all(c, r, &r->x, NULL, &hx, &r->cx, &r->w, &r->y, &r->hy, &r->cy);
}
CALL(f_hy_zero_stride)
{
    nn_tensor hy = r->hy;
    hy.strides[1] = 0;
    return fwd_all(c, r, &r->x, NULL, &r->hx, &r->cx, &r->w, &r->y, &hy, &r->cy);
}
CALL(f_hx_misaligned)
{
    nn_tensor hx = r->hx;
    hx.data = (char *)hx.data + 3;
    return fwd_all(c, r, &r->x, NULL, &hx, &r->cx, &r->w, &r->y, &r->hy, &r->cy);
}
CALL(f_x_overflow)
{
    nn_tensor x = r->x;
    x.dims[1] = INT64_MAX / 4;
    return fwd_all(c, r, &x, NULL, &r->hx, &r->cx, &r->w, &r->y, &r->hy, &r->cy);
}
CALL(f_cx_reserved)
{
    nn_tensor cx = r->cx;
    cx.reserved[0] = 1;
    return fwd_all(c, r, &r->x, NULL, &r->hx, &cx, &r->w, &r->y, &r->hy, &r->cy);
}
#define SPACE_ROWS(arg)                                                                            \
    CALL(f_claim_##arg)                                                                            \
    {                                                                                              \
        nn_tensor t[7] = {r->x, r->hx, r->cx, r->w, r->y, r->hy, r->cy};                           \
        static const char *names[7] = {"x", "hx", "cx", "w", "y", "hy", "cy"};                     \
        for (int i = 0; i < 7; i++)                                                                \
            if (!strcmp(names[i], #arg)) t[i] = cat_claim_other_space(c, &t[i]);                   \
        return fwd_all(c, r, &t[0], NULL, &t[1], &t[2], &t[3], &t[4], &t[5], &t[6]);               \
    }                                                                                              \
    CALL(f_space_##arg)                                                                            \
    {                                                                                              \
        nn_tensor t[7] = {r->x, r->hx, r->cx, r->w, r->y, r->hy, r->cy};                           \
        static const char *names[7] = {"x", "hx", "cx", "w", "y", "hy", "cy"};                     \
        for (int i = 0; i < 7; i++)                                                                \
            if (!strcmp(names[i], #arg)) t[i] = cat_wrong_space(c, &t[i]);                         \
        return fwd_all(c, r, &t[0], NULL, &t[1], &t[2], &t[3], &t[4], &t[5], &t[6]);               \
    }
SPACE_ROWS(x)
SPACE_ROWS(hx)
SPACE_ROWS(cx)
SPACE_ROWS(w)
SPACE_ROWS(y)
SPACE_ROWS(hy)
SPACE_ROWS(cy)
CALL(f_y_on_x)
{
    nn_tensor x = cat_view_on(&r->y, 3, X, 0);
    return fwd_all(c, r, &x, NULL, &r->hx, &r->cx, &r->w, &r->y, &r->hy, &r->cy);
}
CALL(f_y_on_w)
{
    nn_tensor y = r->y;
    if (r->wn < 18) cr_skip_test("w is smaller than y");
    y.data = r->w.data;
    return fwd_all(c, r, &r->x, NULL, &r->hx, &r->cx, &r->w, &y, &r->hy, &r->cy);
}
CALL(f_hy_is_hx)
{
    return fwd_all(c, r, &r->x, NULL, &r->hx, &r->cx, &r->w, &r->y, &r->hx, &r->cy);
}
CALL(f_cy_is_cx)
{
    return fwd_all(c, r, &r->x, NULL, &r->hx, &r->cx, &r->w, &r->y, &r->hy, &r->cx);
}
CALL(f_cy_is_hy)
{
    return fwd_all(c, r, &r->x, NULL, &r->hx, &r->cx, &r->w, &r->y, &r->hy, &r->hy);
}
CALL(f_hy_in_y)
{
    nn_tensor hy = cat_view_on(&r->y, 3, H, 12);
    return fwd_all(c, r, &r->x, NULL, &r->hx, &r->cx, &r->w, &r->y, &hy, &r->cy);
}
CALL(f_hy_on_cx)
{
    return fwd_all(c, r, &r->x, NULL, &r->hx, &r->cx, &r->w, &r->y, &r->cx, &r->cy);
}
/* Edge: inputs may share memory (hx and cx are one buffer). */
CALL(f_hx_is_cx)
{
    return fwd_all(c, r, &r->x, NULL, &r->hx, &r->hx, &r->w, &r->y, &r->hy, &r->cy);
}
/* Edge: sequences of length 0 keep their state: hy = hx, cy = cx, y = 0. */
CALL(f_len_zero)
{
    int32_t len[2] = {0, 2};
    nn_status st = fwd_all(c, r, &r->x, len, &r->hx, &r->cx, &r->w, &r->y, &r->hy, &r->cy);
    if (st != NN_OK) return st;
    double hx[6], hy[6], cx[6], cy[6], y[18];
    cat_read(c, &r->hx, hx);
    cat_read(c, &r->hy, hy);
    cat_read(c, &r->cx, cx);
    cat_read(c, &r->cy, cy);
    cat_read(c, &r->y, y);
    for (int k = 0; k < 3; k++) {
        cr_assert_eq(hy[k], hx[k], "hy[0][%d] = %g, hx %g", k, hy[k], hx[k]);
        cr_assert_eq(cy[k], cx[k], "cy[0][%d] = %g, cx %g", k, cy[k], cx[k]);
        for (int t = 0; t < 3; t++)
            cr_assert_eq(y[(t * 2) * 3 + k], 0.0, "y[%d][0][%d] = %g", t, k, y[(t * 2) * 3 + k]);
        cr_assert_eq(y[(2 * 2 + 1) * 3 + k], 0.0, "y[2][1][%d] (padded) = %g", k,
                     y[(2 * 2 + 1) * 3 + k]);
    }
    return st;
}
/* Edge: only the required arguments. */
CALL(f_minimal)
{
    return fwd_all(c, r, &r->x, NULL, NULL, NULL, &r->w, &r->y, NULL, NULL);
}
/* Edge: dropout is for training only; an inference call with it runs. */
CALL(f_dropout_inference)
{
    r->p.dropout = 0.5;
    r->p.num_layers = 1;
    return fwd(c, r);
}

/* ---- nn_rnn_backward ---- */

static nn_rnn_pullback *pullback(struct cat *c, struct rn *r)
{
    nn_rnn_pullback *pb = NULL;
    cr_assert_eq(nn_rnn_forward(c->ctx, &r->p,
                                &(nn_rnn_forward_tensors){.x = &r->x,
                                                          .hx = &r->hx,
                                                          .cx = &r->cx,
                                                          .w = &r->w,
                                                          .y = &r->y,
                                                          .hy = &r->hy,
                                                          .cy = &r->cy},
                                &pb),
                 NN_OK, "fixture: %s", nn_last_error()->message);
    return pb;
}
static nn_status bwd_all(struct cat *c, struct rn *r, nn_rnn_pullback **pb, const nn_tensor *dy,
                         const nn_tensor *dhy, const nn_tensor *dcy, nn_tensor *dx, nn_tensor *dhx,
                         nn_tensor *dcx, nn_tensor *dw)
{
    (void)r;
    return nn_rnn_backward(
        c->ctx, pb,
        &(nn_rnn_backward_tensors){
            .dy = dy, .dhy = dhy, .dcy = dcy, .dx = dx, .dhx = dhx, .dcx = dcx, .dw = dw});
}
static nn_status then_retry(struct cat *c, struct rn *r, nn_status st, nn_rnn_pullback **pb)
{
    if (st == NN_OK) return st;
    nn_error_info e = *nn_last_error();
    cr_assert_not_null(*pb, "a refused call leaves the pullback with the caller");
    cr_assert_eq(bwd_all(c, r, pb, &r->dy, &r->dhy, &r->dcy, &r->dx, &r->dhx, &r->dcx, &r->dw),
                 NN_OK, "a valid retry with the same pullback: %s", nn_last_error()->message);
    cr_assert_null(*pb);
    cr_assert_str_eq(nn_last_error()->message, e.message, "the record changed");
    return st;
}
/* Backward of the fixture's forward with t[] = dy, dhy, dcy, dx, dhx, dcx, dw. */
static nn_status bwd_t(struct cat *c, struct rn *r, nn_tensor *t[7])
{
    nn_rnn_pullback *pb = pullback(c, r);
    return then_retry(c, r, bwd_all(c, r, &pb, t[0], t[1], t[2], t[3], t[4], t[5], t[6]), &pb);
}
#define GRADS(r)                                                                                   \
    {                                                                                              \
        &(r)->dy, &(r)->dhy, &(r)->dcy, &(r)->dx, &(r)->dhx, &(r)->dcx, &(r)->dw                   \
    }

CALL(b_null_ctx)
{
    nn_rnn_pullback *pb = pullback(c, r);
    return then_retry(
        c, r,
        nn_rnn_backward(NULL, &pb,
                        &(nn_rnn_backward_tensors){.dy = &r->dy, .dx = &r->dx, .dw = &r->dw}),
        &pb);
}
CALL(b_null_pullback)
{
    return nn_rnn_backward(c->ctx, NULL,
                           &(nn_rnn_backward_tensors){.dy = &r->dy, .dx = &r->dx, .dw = &r->dw});
}
CALL(b_null_star)
{
    nn_rnn_pullback *pb = NULL;
    return nn_rnn_backward(c->ctx, &pb,
                           &(nn_rnn_backward_tensors){.dy = &r->dy, .dx = &r->dx, .dw = &r->dw});
}
CALL(b_twice)
{
    nn_rnn_pullback *pb = pullback(c, r), *copy = pb;
    cr_assert_eq(
        nn_rnn_backward(c->ctx, &pb,
                        &(nn_rnn_backward_tensors){.dy = &r->dy, .dx = &r->dx, .dw = &r->dw}),
        NN_OK, "first: %s", nn_last_error()->message);
    return nn_rnn_backward(c->ctx, &copy,
                           &(nn_rnn_backward_tensors){.dy = &r->dy, .dx = &r->dx, .dw = &r->dw});
}
CALL(b_freed)
{
    nn_rnn_pullback *pb = pullback(c, r), *copy = pb;
    cr_assert_eq(nn_rnn_pullback_free(&pb), NN_OK, "free");
    return nn_rnn_backward(c->ctx, &copy,
                           &(nn_rnn_backward_tensors){.dy = &r->dy, .dx = &r->dx, .dw = &r->dw});
}
CALL(b_other_ctx)
{
    nn_rnn_pullback *pb = pullback(c, r);
    return then_retry(
        c, r,
        nn_rnn_backward(cat_other_ctx(c), &pb,
                        &(nn_rnn_backward_tensors){.dy = &r->dy, .dx = &r->dx, .dw = &r->dw}),
        &pb);
}
CALL(b_linear_pullback)
{
    nn_linear_params lp;
    nn_linear_params_default(&lp);
    nn_tensor lx = cat_view_on(&r->x, 2, (int64_t[]){6, 2}, 0);
    nn_tensor lw = cat_view_on(&r->dx, 2, (int64_t[]){3, 2}, 0);
    nn_tensor ly = cat_view_on(&r->y, 2, (int64_t[]){6, 3}, 0);
    nn_linear_pullback *lpb = NULL;
    cr_assert_eq(nn_linear_forward(c->ctx, &lp, &lx, &lw, NULL, &ly, &lpb), NN_OK, "fixture: %s",
                 nn_last_error()->message);
    nn_rnn_pullback *pb = (nn_rnn_pullback *)lpb;
    nn_status st = nn_rnn_backward(
        c->ctx, &pb, &(nn_rnn_backward_tensors){.dy = &r->dy, .dx = &r->dx, .dw = &r->dw});
    cr_assert_eq(nn_linear_pullback_free(&lpb), NN_OK, "the linear pullback is intact");
    return st;
}
CALL(b_inference)
{
    /* forward without a pullback gives none to pass */
    nn_rnn_pullback *pb = NULL;
    cr_assert_eq(fwd(c, r), NN_OK, "fixture");
    return nn_rnn_backward(c->ctx, &pb,
                           &(nn_rnn_backward_tensors){.dy = &r->dy, .dx = &r->dx, .dw = &r->dw});
}
/* One gradient argument replaced by a bad one. */
#define GRAD_ROW(fname, idx, make)                                                                 \
    CALL(fname)                                                                                    \
    {                                                                                              \
        nn_tensor *t[7] = GRADS(r);                                                                \
        nn_tensor bad = *t[idx];                                                                   \
        make;                                                                                      \
        t[idx] = &bad;                                                                             \
        return bwd_t(c, r, t);                                                                     \
    }
GRAD_ROW(b_dy_width, 0, bad = cat_view_on(&r->dy, 3, (int64_t[]){3, 2, 2}, 0))
GRAD_ROW(b_dy_T, 0, bad = cat_view_on(&r->dy, 3, (int64_t[]){1, 2, 3}, 0))
GRAD_ROW(b_dhy_dims, 1, bad = cat_view_on(&r->dhy, 3, (int64_t[]){1, 1, 3}, 0))
GRAD_ROW(b_dcy_dims, 2, bad = cat_view_on(&r->dcy, 3, (int64_t[]){1, 2, 2}, 0))
GRAD_ROW(b_dx_dims, 3, bad = cat_view_on(&r->dx, 3, (int64_t[]){3, 2, 1}, 0))
GRAD_ROW(b_dx_rank, 3, bad = cat_view_on(&r->dx, 2, (int64_t[]){6, 2}, 0))
GRAD_ROW(b_dhx_dims, 4, bad = cat_view_on(&r->dhx, 3, (int64_t[]){1, 2, 2}, 0))
GRAD_ROW(b_dcx_dims, 5, bad = cat_view_on(&r->dcx, 3, (int64_t[]){1, 1, 3}, 0))
GRAD_ROW(b_dw_dims, 6, bad = cat_view_on(&r->dw, 1, (int64_t[]){r->wn - 1}, 0))
GRAD_ROW(b_dy_dtype, 0, bad.dtype = NN_DTYPE_F16)
GRAD_ROW(b_dhy_dtype, 1, bad.dtype = NN_DTYPE_BF16)
GRAD_ROW(b_dw_dtype, 6, bad.dtype = NN_DTYPE_F16)
GRAD_ROW(b_dcx_dtype_bad, 5, bad.dtype = (nn_dtype)8)
GRAD_ROW(b_dx_strided, 3, bad = swapped(&r->dx))
GRAD_ROW(b_dy_misaligned, 0, bad.data = (char *)bad.data + 2)
GRAD_ROW(b_dhx_reserved, 4, bad.reserved[0] = 5)
GRAD_ROW(b_claim_dy, 0, bad = cat_claim_other_space(c, &bad))
GRAD_ROW(b_claim_dhy, 1, bad = cat_claim_other_space(c, &bad))
GRAD_ROW(b_claim_dcy, 2, bad = cat_claim_other_space(c, &bad))
GRAD_ROW(b_claim_dx, 3, bad = cat_claim_other_space(c, &bad))
GRAD_ROW(b_claim_dhx, 4, bad = cat_claim_other_space(c, &bad))
GRAD_ROW(b_claim_dcx, 5, bad = cat_claim_other_space(c, &bad))
GRAD_ROW(b_claim_dw, 6, bad = cat_claim_other_space(c, &bad))
GRAD_ROW(b_space_dy, 0, bad = cat_wrong_space(c, &bad))
GRAD_ROW(b_space_dx, 3, bad = cat_wrong_space(c, &bad))
GRAD_ROW(b_space_dw, 6, bad = cat_wrong_space(c, &bad))
GRAD_ROW(b_dx_on_dy, 3, bad = cat_view_on(&r->dy, 3, X, 4))
GRAD_ROW(b_dx_on_x, 3, bad = r->x)
GRAD_ROW(b_dx_on_y, 3, bad = cat_view_on(&r->y, 3, X, 0))
GRAD_ROW(b_dhx_on_hx, 4, bad = r->hx)
GRAD_ROW(b_dcx_on_cx, 5, bad = r->cx)
GRAD_ROW(b_dw_on_w, 6, bad = r->w)
GRAD_ROW(b_dhx_is_dhy, 4, bad = r->dhy)
GRAD_ROW(b_dcx_is_dcy, 5, bad = r->dcy)
GRAD_ROW(b_dcx_is_dhx, 5, bad = r->dhx)
GRAD_ROW(b_dhx_in_dx, 4, bad = cat_view_on(&r->dx, 3, H, 2))
CALL(b_dcy_gru)
{
    /* a GRU's pullback: no cell state gradients */
    r->p.cell = NN_RNN_GRU;
    int64_t n;
    cr_assert_eq(nn_rnn_weights_size(c->ctx, &r->p, NN_DTYPE_F32, &n), NN_OK, "fixture");
    nn_tensor w = cat_tensor(c, NN_DTYPE_F32, 1, (int64_t[]){n}, 322);
    nn_rnn_pullback *pb = NULL;
    cr_assert_eq(nn_rnn_forward(c->ctx, &r->p,
                                &(nn_rnn_forward_tensors){.x = &r->x, .w = &w, .y = &r->y}, &pb),
                 NN_OK, "fixture: %s", nn_last_error()->message);
    nn_status st = nn_rnn_backward(
        c->ctx, &pb, &(nn_rnn_backward_tensors){.dy = &r->dy, .dcy = &r->dcy, .dx = &r->dx});
    cr_assert_eq(nn_rnn_pullback_free(&pb), NN_OK, "the pullback stays the caller's");
    nn_tensor_free(c->ctx, &w);
    return st;
}
/* Edge: nothing asked for still consumes the pullback. */
CALL(b_null_t)
{
    nn_rnn_pullback *pb = pullback(c, r);
    return then_retry(c, r, nn_rnn_backward(c->ctx, &pb, NULL), &pb);
}
CALL(b_t_reserved)
{
    nn_rnn_pullback *pb = pullback(c, r);
    nn_rnn_backward_tensors t = {.dy = &r->dy, .dw = &r->dw, .reserved = {[3] = 1}};
    return then_retry(c, r, nn_rnn_backward(c->ctx, &pb, &t), &pb);
}
CALL(bx_null_t)
{
    nn_rnn_pullback *pb = pullback(c, r);
    nn_backward_options acc = {.accumulate = NN_ACCUMULATE_DW};
    return then_retry(c, r, nn_rnn_backward_ex(c->ctx, &pb, &acc, NULL), &pb);
}
CALL(bx_t_reserved)
{
    nn_rnn_pullback *pb = pullback(c, r);
    nn_rnn_backward_tensors t = {.dy = &r->dy, .dw = &r->dw, .reserved = {7}};
    return then_retry(c, r, nn_rnn_backward_ex(c->ctx, &pb, NULL, &t), &pb);
}
CALL(b_nothing)
{
    nn_rnn_pullback *pb = pullback(c, r);
    nn_status st = nn_rnn_backward(c->ctx, &pb, &(nn_rnn_backward_tensors){});
    if (st == NN_OK) cr_assert_null(pb, "consumed");
    return st;
}
/* Edge: dw accumulates exactly: twice the same step gives old + 2 g. */
CALL(b_accumulate)
{
    nn_backward_options acc = {.accumulate = NN_ACCUMULATE_DW};
    double *w0 = cat_host_block(c, (size_t)r->wn * sizeof(double));
    double *w1 = cat_host_block(c, (size_t)r->wn * sizeof(double));
    double *w2 = cat_host_block(c, (size_t)r->wn * sizeof(double));
    nn_tensor *t[7] = GRADS(r);
    cat_read(c, &r->dw, w0);
    for (int i = 0; i < 2; i++) {
        nn_rnn_pullback *pb = pullback(c, r);
        nn_status st = nn_rnn_backward_ex(
            c->ctx, &pb, &acc,
            &(nn_rnn_backward_tensors){.dy = t[0], .dhy = t[1], .dcy = t[2], .dw = t[6]});
        if (st != NN_OK) return st;
        cat_read(c, &r->dw, i ? w2 : w1);
    }
    for (int64_t i = 0; i < r->wn; i++)
        cr_assert(fabs((w2[i] - w1[i]) - (w1[i] - w0[i])) <= 1e-4 * (1 + fabs(w1[i] - w0[i])),
                  "dw[%lld]: steps %g then %g", (long long)i, w1[i] - w0[i], w2[i] - w1[i]);
    return NN_OK;
}

/* ---- nn_rnn_workspace_size ---- */

static nn_status wk(struct cat *c, struct rn *r, const nn_tensor *x, const int32_t *lengths,
                    nn_rnn_pass pass)
{
    size_t n = CAT_WS_UNSET;
    nn_status st = nn_rnn_workspace_size(c->ctx, &r->p, x, lengths, pass, &n);
    return cat_ws_answer(c, st, n, 0);
}
/* Under a pool limit no allocation meets (cat_pool_starve): a shape no earlier row built needs
 * pool scratch for cuDNN's weight-layout query, so the workspace query is refused as the call
 * would be, naming itself. */
CALL(wk_starved)
{
    r->p.hidden_size = 5;
    struct cat_pool_mark m;
    cat_pool_starve(c, &m);
    nn_status st = wk(c, r, &r->x, NULL, NN_RNN_PASS_TRAINING);
    cat_pool_restore(&m, 0);
    return st;
}
CALL(wk_null_ctx)
{
    (void)c;
    size_t n;
    return nn_rnn_workspace_size(NULL, &r->p, &r->x, NULL, NN_RNN_PASS_TRAINING, &n);
}
CALL(wk_null_p)
{
    size_t n;
    return nn_rnn_workspace_size(c->ctx, NULL, &r->x, NULL, NN_RNN_PASS_TRAINING, &n);
}
CALL(wk_null_x)
{
    size_t n;
    return nn_rnn_workspace_size(c->ctx, &r->p, NULL, NULL, NN_RNN_PASS_TRAINING, &n);
}
CALL(wk_null_bytes)
{
    return nn_rnn_workspace_size(c->ctx, &r->p, &r->x, NULL, NN_RNN_PASS_TRAINING, NULL);
}
CALL(wk_pass3)
{
    return wk(c, r, &r->x, NULL, (nn_rnn_pass)3);
}
CALL(wk_pass_neg)
{
    return wk(c, r, &r->x, NULL, (nn_rnn_pass)-1);
}
CALL(wk_cell)
{
    r->p.cell = (nn_rnn_cell)7;
    return wk(c, r, &r->x, NULL, NN_RNN_PASS_INFERENCE);
}
CALL(wk_reserved)
{
    r->p.reserved[3] = 1;
    return wk(c, r, &r->x, NULL, NN_RNN_PASS_BACKWARD);
}
CALL(wk_x_rank2)
{
    nn_tensor x = cat_view_on(&r->x, 2, (int64_t[]){6, 2}, 0);
    return wk(c, r, &x, NULL, NN_RNN_PASS_TRAINING);
}
CALL(wk_x_input)
{
    nn_tensor x = cat_view_on(&r->x, 3, (int64_t[]){3, 2, 1}, 0);
    return wk(c, r, &x, NULL, NN_RNN_PASS_TRAINING);
}
CALL(wk_x_dtype_bad)
{
    nn_tensor x = r->x;
    x.dtype = (nn_dtype)9;
    return wk(c, r, &x, NULL, NN_RNN_PASS_TRAINING);
}
CALL(wk_x_strided)
{
    nn_tensor x = swapped(&r->x);
    return wk(c, r, &x, NULL, NN_RNN_PASS_TRAINING);
}
CALL(wk_x_claim)
{
    nn_tensor x = cat_claim_other_space(c, &r->x);
    return wk(c, r, &x, NULL, NN_RNN_PASS_TRAINING);
}
CALL(wk_x_space)
{
    nn_tensor x = cat_wrong_space(c, &r->x);
    return wk(c, r, &x, NULL, NN_RNN_PASS_TRAINING);
}
CALL(wk_len_big)
{
    int32_t len[2] = {3, 4};
    return wk(c, r, &r->x, len, NN_RNN_PASS_TRAINING);
}
CALL(wk_len_neg)
{
    int32_t len[2] = {-2, 3};
    return wk(c, r, &r->x, len, NN_RNN_PASS_BACKWARD);
}
CALL(wk_x_count_overflow)
{
    nn_tensor x = cat_count_overflow(&r->x);
    return wk(c, r, &x, NULL, NN_RNN_PASS_INFERENCE);
}
CALL(wk_x_extent_overflow)
{
    nn_tensor x = cat_extent_overflow(&r->x);
    return wk(c, r, &x, NULL, NN_RNN_PASS_BACKWARD);
}
CALL(wk_every_pass)
{
    static const int32_t len[2] = {3, 1};
    nn_status st = NN_OK;
    for (int pass = 0; pass < 3 && st == NN_OK; pass++) {
        st = wk(c, r, &r->x, NULL, (nn_rnn_pass)pass);
        if (st == NN_OK) st = wk(c, r, &r->x, len, (nn_rnn_pass)pass);
    }
    return st;
}

/* Sizes beyond cuDNN's int, refused by the query as by the calls (x as a view on the row's small
 * tensor: its data is never read). The reference takes any size. */
CALL(wk_gates_beyond_int)
{
    r->p.hidden_size = (INT64_C(1) << 29) + 1; /* 4 H gates of an LSTM */
    r->p.input_size = 1;
    nn_tensor x = cat_view_on(&r->x, 3, (int64_t[]){3, 2, 1}, 0);
    return wk(c, r, &x, NULL, NN_RNN_PASS_TRAINING);
}
CALL(wk_t_beyond_int)
{
    nn_tensor x = cat_view_on(&r->x, 3, (int64_t[]){INT64_C(1) << 31, 2, 2}, 0);
    return wk(c, r, &x, NULL, NN_RNN_PASS_INFERENCE);
}

/* ---- nn_rnn_pullback_free ---- */

static nn_status pf_null(struct cat *c)
{
    (void)c;
    return nn_rnn_pullback_free(NULL);
}
static nn_status pf_star_null(struct cat *c)
{
    (void)c;
    nn_rnn_pullback *pb = NULL;
    return nn_rnn_pullback_free(&pb);
}
CALL(pf_twice)
{
    nn_rnn_pullback *pb = pullback(c, r), *copy = pb;
    cr_assert_eq(nn_rnn_pullback_free(&pb), NN_OK, "first free");
    cr_assert_null(pb);
    return nn_rnn_pullback_free(&copy);
}
CALL(pf_consumed)
{
    nn_rnn_pullback *pb = pullback(c, r), *copy = pb;
    cr_assert_eq(
        nn_rnn_backward(c->ctx, &pb, &(nn_rnn_backward_tensors){.dy = &r->dy, .dw = &r->dw}), NN_OK,
        "backward: %s", nn_last_error()->message);
    return nn_rnn_pullback_free(&copy);
}
static nn_status pf_pool(struct cat *c)
{
    nn_pool_pullback *pp = NULL;
    cr_assert_eq(nn_pool_forward(c->ctx, &c->pp, &c->px, &c->py, &pp), NN_OK, "fixture");
    nn_rnn_pullback *pb = (nn_rnn_pullback *)pp;
    nn_status st = nn_rnn_pullback_free(&pb);
    cr_assert_eq(nn_pool_pullback_free(&pp), NN_OK, "the pool pullback is intact");
    return st;
}

#define E  NN_E_INVALID_ARG
#define S  NN_E_SHAPE
#define D  NN_E_DTYPE
#define M  NN_E_MEMSPACE
#define U  NN_E_UNSUPPORTED
#define P  NN_E_PULLBACK
#define O  NN_E_OVERFLOW
#define PD "nn_rnn_params_default"
#define WS "nn_rnn_weights_size"
#define WV "nn_rnn_weight_view"
#define F  "nn_rnn_forward"
#define BW "nn_rnn_backward"
#define BX "nn_rnn_backward_ex"
#define PF "nn_rnn_pullback_free"
#define WK "nn_rnn_workspace_size"

static const struct cat_row rows[] = {
    ROW("params_default p NULL", PD, "p", E, pd_null),
    ROW("params_default cell 4", PD, "cell", E, pd_cell),
    ROW("params_default cell -1", PD, "cell", E, pd_cell_neg),
    ROW("params_default input_size 0", PD, "input_size", E, pd_input0),
    ROW("params_default hidden_size INT64_MIN", PD, "hidden_size", E, pd_hidden_neg),
    ROW("params_default refused leaves p alone", PD, "input_size", E, pd_untouched),

    ROW("weights_size ctx NULL", WS, "ctx", E, ws_null_ctx),
    ROW("weights_size p NULL", WS, "p", E, ws_null_p),
    ROW("weights_size numel NULL", WS, "numel", E, ws_null_numel),
    ROW("weights_size dtype 7", WS, "dtype", D, ws_dtype),
    ROW("weights_size cell 9", WS, "p.cell", E, ws_cell),
    ROW("weights_size input_size 0", WS, "p.input_size", E, ws_input0),
    ROW("weights_size hidden_size 0", WS, "p.hidden_size", E, ws_hidden0),
    ROW("weights_size proj_size -1", WS, "p.proj_size", E, ws_proj_neg),
    ROW("weights_size proj_size with GRU", WS, "p.proj_size", E, ws_proj_gru),
    ROW("weights_size proj_size = hidden_size", WS, "p.proj_size", E, ws_proj_big),
    ROW("weights_size num_layers 0", WS, "p.num_layers", E, ws_layers0),
    ROW("weights_size num_layers INT64_MIN", WS, "p.num_layers", E, ws_layers_neg),
    ROW("weights_size bidirectional 2", WS, "p.bidirectional", E, ws_bidir2),
    ROW("weights_size bidirectional -1", WS, "p.bidirectional", E, ws_bidir_neg),
    ROW("weights_size bias_mode 4", WS, "p.bias_mode", E, ws_bias4),
    ROW("weights_size input_mode 2", WS, "p.input_mode", E, ws_input_mode2),
    ROW("weights_size skip input with I != H", WS, "p.input_size", E, ws_skip),
    ROW("weights_size layout 2", WS, "p.layout", E, ws_layout2),
    ROW("weights_size dropout < 0", WS, "p.dropout", E, ws_drop_neg),
    ROW("weights_size dropout 1", WS, "p.dropout", E, ws_drop_one),
    ROW("weights_size dropout NaN", WS, "p.dropout", E, ws_drop_nan),
    ROW("weights_size clip_enabled 2", WS, "p.clip_enabled", E, ws_clip2),
    ROW("weights_size clip with GRU", WS, "p.clip_enabled", E, ws_clip_gru),
    ROW("weights_size clip_lo > clip_hi", WS, "p.clip_lo", E, ws_clip_order),
    ROW("weights_size clip_hi infinite", WS, "p.clip_hi", E, ws_clip_inf),
    ROW("weights_size clip_lo NaN", WS, "p.clip_lo", E, ws_clip_nan),
    ROW("weights_size reserved[0]", WS, "p.reserved[0]", E, ws_res0),
    ROW("weights_size reserved[1]", WS, "p.reserved[1]", E, ws_res1),
    ROW("weights_size reserved[2]", WS, "p.reserved[2]", E, ws_res2),
    ROW("weights_size reserved[3]", WS, "p.reserved[3]", E, ws_res3),
    ROW("weights_size clip bounds ignored while off (edge)", WS, NULL, NN_OK, ws_clip_off_nan),
    ROW("weights_size count (edge)", WS, NULL, NN_OK, ws_count),
    ROW("weights_size G*H overflows", WS, "p.hidden_size", O, ws_hidden_overflow),
    ROW("weights_size H*H overflows", WS, "p.hidden_size", O, ws_hidden_sq_overflow),
    ROW("weights_size G*H*I overflows", WS, "p.input_size", O, ws_input_overflow),
    ROW("weights_size num_layers INT64_MAX", WS, "p.num_layers", O, ws_layers_max),
    ROW("weights_size L*D overflows", WS, "p.num_layers", O, ws_layers_bidir),
    ROW("weights_size D*H overflows", WS, "p.hidden_size", O, ws_dirs_overflow),
    ROW2("weights_size hidden_size 2^31", WS, "p.hidden_size", NN_OK, U, ws_hidden_2_31),
    ROW2("weights_size num_layers 2^40", WS, "p.num_layers", NN_OK, U, ws_layers_2_40),
    ROW2("weights_size input_size 2^31", WS, "p.input_size", NN_OK, U, ws_input_2_31),
    ROW2("weights_size 4*H beyond int", WS, "p.hidden_size", NN_OK, U, ws_gates_int),

    ROW("weight_view ctx NULL", WV, "ctx", E, wv_null_ctx),
    ROW("weight_view p NULL", WV, "p", E, wv_null_p),
    ROW("weight_view w NULL", WV, "w", E, wv_null_w),
    ROW("weight_view out NULL", WV, "out", E, wv_null_out),
    ROW("weight_view w.data NULL", WV, "w.data", E, wv_null_wdata),
    ROW("weight_view layer -1", WV, "layer", E, wv_layer_neg),
    ROW("weight_view layer = num_layers", WV, "layer", E, wv_layer_L),
    ROW("weight_view layer INT64_MAX", WV, "layer", E, wv_layer_max),
    ROW("weight_view direction 1, unidirectional", WV, "direction", E, wv_dir1_uni),
    ROW("weight_view direction -1", WV, "direction", E, wv_dir_neg),
    ROW("weight_view direction 2, bidirectional", WV, "direction", E, wv_dir2_bidir),
    ROW("weight_view name 5", WV, "name", E, wv_name5),
    ROW("weight_view name -1", WV, "name", E, wv_name_neg),
    ROW("weight_view bias_ih with no bias", WV, "bias_ih", E, wv_bias_none),
    ROW("weight_view bias_hh with input bias only", WV, "bias_hh", E, wv_bias_hh_input),
    ROW("weight_view bias_ih with recurrent bias only", WV, "bias_ih", E, wv_bias_ih_recurrent),
    ROW("weight_view weight_ih of layer 0 with skip input", WV, "weight_ih", E, wv_skip_ih),
    ROW("weight_view weight_hr without projection", WV, "weight_hr", E, wv_hr_no_proj),
    ROW("weight_view dropout 2", WV, "p.dropout", E, wv_bad_param),
    ROW("weight_view w too short", WV, "w.dims[0]", S, wv_w_short),
    ROW("weight_view w for other parameters", WV, "w.dims[0]", S, wv_w_long),
    ROW("weight_view w rank 2", WV, "w.rank", S, wv_w_rank2),
    ROW("weight_view w dtype 11", WV, "w.dtype", D, wv_w_dtype_bad),
    ROW("weight_view w strided", WV, "w", U, wv_w_strided),
    ROW("weight_view w misaligned", WV, "w.data", E, wv_w_misaligned),
    ROW("weight_view w space label", WV, "w", M, wv_claim_w),
    ROW("weight_view w wrong space", WV, "w", M, wv_space_w),
    ROW("weight_view G*H overflows", WV, "p.hidden_size", O, wv_hidden_overflow),
    ROW2("weight_view last of 2^40 layers", WV, "p.num_layers", NN_OK, U, wv_layer_huge),
    ROW("weight_view every view in place (edge)", WV, NULL, NN_OK, wv_all),
    ROW("free of a weight view (w owns the storage)", "nn_tensor_free", "t", NN_E_BAD_POINTER,
        wv_free_refused),

    ROW("forward ctx NULL", F, "ctx", E, f_null_ctx),
    ROW("forward p NULL", F, "p", E, f_null_p),
    ROW("forward x NULL", F, "t.x", E, f_null_x),
    ROW("forward w NULL", F, "t.w", E, f_null_w),
    ROW("forward y NULL", F, "t.y", E, f_null_y),
    ROW("forward x.data NULL", F, "t.x.data", E, f_null_xdata),
    ROW("forward hx.data NULL", F, "t.hx.data", E, f_null_hxdata),
    ROW("forward t NULL", F, "t", E, f_null_t),
    ROW("forward t.reserved[1]", F, "t.reserved[1]", E, f_t_reserved),
    ROW("forward failure sets *pullback_out NULL", F, "t.y", E, f_pullback_null_on_failure),
    ROW("forward cell 4", F, "p.cell", E, f_cell),
    ROW("forward dropout 1.5", F, "p.dropout", E, f_dropout),
    ROW("forward reserved[2]", F, "p.reserved[2]", E, f_res2),
    ROW("forward proj_size with GRU", F, "p.proj_size", E, f_proj_gru),
    ROW("forward x rank 2", F, "t.x.rank", S, f_x_rank2),
    ROW("forward x rank 4", F, "t.x.rank", S, f_x_rank4),
    ROW("forward x width != input_size", F, "t.x.dims[2]", S, f_x_input),
    ROW("forward x dtype 6", F, "t.x.dtype", D, f_x_dtype_bad),
    ROW("forward y width", F, "t.y.dims[2]", S, f_y_width),
    ROW("forward y T", F, "t.y.dims[0]", S, f_y_T),
    ROW("forward y rank", F, "t.y.rank", S, f_y_rank),
    ROW("forward y width, bidirectional", F, "t.y.dims[2]", S, f_y_bidir),
    ROW("forward hx L*D", F, "t.hx.dims[0]", S, f_hx_layers),
    ROW("forward hx N", F, "t.hx.dims[1]", S, f_hx_n),
    ROW("forward hx width", F, "t.hx.dims[1]", S, f_hx_width),
    ROW("forward hx rank", F, "t.hx.rank", S, f_hx_rank),
    ROW("forward cx P wide with a projection", F, "t.cx.dims[2]", S, f_cx_proj),
    ROW("forward cx with GRU", F, "t.cx", E, f_cx_gru),
    ROW("forward cy with relu", F, "t.cy", E, f_cy_relu),
    ROW("forward hy dims", F, "t.hy.dims[0]", S, f_hy_dims),
    ROW("forward cy dims", F, "t.cy.dims[2]", S, f_cy_dims),
    ROW("forward w dims", F, "t.w.dims[0]", S, f_w_dims),
    ROW("forward w for other parameters", F, "t.w.dims[0]", S, f_w_other_params),
    ROW("forward w dtype", F, "t.w.dtype", D, f_w_dtype),
    ROW("forward y dtype", F, "t.y.dtype", D, f_y_dtype),
    ROW("forward hx dtype", F, "t.hx.dtype", D, f_hx_dtype),
    ROW("forward cy dtype", F, "t.cy.dtype", D, f_cy_dtype),
    ROW("forward batch-major reads other dims", F, "t.hx.dims[1]", S, f_layout_dims),
    ROW("forward length -1", F, "t.lengths[0]", S, f_len_neg),
    ROW("forward length T + 1", F, "t.lengths[1]", S, f_len_big),
    ROW("forward length INT32_MIN", F, "t.lengths[1]", S, f_len_min),
    ROW("forward x strided", F, "t.x", U, f_x_strided),
    ROW("forward y strided", F, "t.y", U, f_y_strided),
    ROW("forward hx strided", F, "t.hx", U, f_hx_strided),
    ROW("forward hy zero stride", F, "t.hy", E, f_hy_zero_stride),
    ROW("forward hx misaligned", F, "t.hx.data", E, f_hx_misaligned),
    ROW("forward x element count overflows", F, "t.x", O, f_x_overflow),
    ROW("forward cx reserved", F, "t.cx.reserved[0]", E, f_cx_reserved),
    ROW("forward x space label", F, "t.x", M, f_claim_x),
    ROW("forward hx space label", F, "t.hx", M, f_claim_hx),
    ROW("forward cx space label", F, "t.cx", M, f_claim_cx),
    ROW("forward w space label", F, "t.w", M, f_claim_w),
    ROW("forward y space label", F, "t.y", M, f_claim_y),
    ROW("forward hy space label", F, "t.hy", M, f_claim_hy),
    ROW("forward cy space label", F, "t.cy", M, f_claim_cy),
    ROW("forward x wrong space", F, "t.x", M, f_space_x),
    ROW("forward hx wrong space", F, "t.hx", M, f_space_hx),
    ROW("forward cx wrong space", F, "t.cx", M, f_space_cx),
    ROW("forward w wrong space", F, "t.w", M, f_space_w),
    ROW("forward y wrong space", F, "t.y", M, f_space_y),
    ROW("forward hy wrong space", F, "t.hy", M, f_space_hy),
    ROW("forward cy wrong space", F, "t.cy", M, f_space_cy),
    ROW("forward y on x", F, "t.y", E, f_y_on_x),
    ROW("forward y on w", F, "t.y", E, f_y_on_w),
    ROW("forward hy is hx", F, "t.hy", E, f_hy_is_hx),
    ROW("forward cy is cx", F, "t.cy", E, f_cy_is_cx),
    ROW("forward cy is hy", F, "t.cy", E, f_cy_is_hy),
    ROW("forward hy inside y", F, "t.hy", E, f_hy_in_y),
    ROW("forward hy on cx", F, "t.hy", E, f_hy_on_cx),
    ROW("forward hx and cx share memory (edge)", F, NULL, NN_OK, f_hx_is_cx),
    ROW("forward zero-length sequence keeps its state (edge)", F, NULL, NN_OK, f_len_zero),
    ROW("forward required arguments only (edge)", F, NULL, NN_OK, f_minimal),
    ROW("forward dropout in inference (edge)", F, NULL, NN_OK, f_dropout_inference),

    ROW("backward ctx NULL", BW, "ctx", E, b_null_ctx),
    ROW("backward pullback NULL", BW, "pullback", P, b_null_pullback),
    ROW("backward *pullback NULL", BW, "pullback", P, b_null_star),
    ROW("backward pullback used twice", BW, "pullback", P, b_twice),
    ROW("backward pullback freed", BW, "pullback", P, b_freed),
    ROW("backward pullback of another context", BW, "pullback", P, b_other_ctx),
    ROW("backward linear pullback", BW, "pullback", P, b_linear_pullback),
    ROW("backward after an inference forward", BW, "pullback", P, b_inference),
    ROW("backward dy width", BW, "t.dy.dims[2]", S, b_dy_width),
    ROW("backward dy T", BW, "t.dy.dims[0]", S, b_dy_T),
    ROW("backward dhy dims", BW, "t.dhy.dims[1]", S, b_dhy_dims),
    ROW("backward dcy dims", BW, "t.dcy.dims[2]", S, b_dcy_dims),
    ROW("backward dx dims", BW, "t.dx.dims[2]", S, b_dx_dims),
    ROW("backward dx rank", BW, "t.dx.rank", S, b_dx_rank),
    ROW("backward dhx dims", BW, "t.dhx.dims[2]", S, b_dhx_dims),
    ROW("backward dcx dims", BW, "t.dcx.dims[1]", S, b_dcx_dims),
    ROW("backward dw dims", BW, "t.dw.dims[0]", S, b_dw_dims),
    ROW("backward dy dtype", BW, "t.dy.dtype", D, b_dy_dtype),
    ROW("backward dhy dtype", BW, "t.dhy.dtype", D, b_dhy_dtype),
    ROW("backward dw dtype", BW, "t.dw.dtype", D, b_dw_dtype),
    ROW("backward dcx dtype 8", BW, "t.dcx.dtype", D, b_dcx_dtype_bad),
    ROW("backward dx strided", BW, "t.dx", U, b_dx_strided),
    ROW("backward dy misaligned", BW, "t.dy.data", E, b_dy_misaligned),
    ROW("backward dhx reserved", BW, "t.dhx.reserved[0]", E, b_dhx_reserved),
    ROW("backward dy space label", BW, "t.dy", M, b_claim_dy),
    ROW("backward dhy space label", BW, "t.dhy", M, b_claim_dhy),
    ROW("backward dcy space label", BW, "t.dcy", M, b_claim_dcy),
    ROW("backward dx space label", BW, "t.dx", M, b_claim_dx),
    ROW("backward dhx space label", BW, "t.dhx", M, b_claim_dhx),
    ROW("backward dcx space label", BW, "t.dcx", M, b_claim_dcx),
    ROW("backward dw space label", BW, "t.dw", M, b_claim_dw),
    ROW("backward dy wrong space", BW, "t.dy", M, b_space_dy),
    ROW("backward dx wrong space", BW, "t.dx", M, b_space_dx),
    ROW("backward dw wrong space", BW, "t.dw", M, b_space_dw),
    ROW("backward dx on dy", BW, "t.dx", E, b_dx_on_dy),
    ROW("backward dx on the saved x", BW, "t.dx", E, b_dx_on_x),
    ROW("backward dx on the saved y", BW, "t.dx", E, b_dx_on_y),
    ROW("backward dhx on the saved hx", BW, "t.dhx", E, b_dhx_on_hx),
    ROW("backward dcx on the saved cx", BW, "t.dcx", E, b_dcx_on_cx),
    ROW("backward dw on the saved w", BW, "t.dw", E, b_dw_on_w),
    ROW("backward dhx is dhy", BW, "t.dhx", E, b_dhx_is_dhy),
    ROW("backward dcx is dcy", BW, "t.dcx", E, b_dcx_is_dcy),
    ROW("backward dcx is dhx", BW, "t.dcx", E, b_dcx_is_dhx),
    ROW("backward dhx inside dx", BW, "t.dhx", E, b_dhx_in_dx),
    ROW("backward dcy with a GRU pullback", BW, "t.dcy", E, b_dcy_gru),
    ROW("backward t NULL", BW, "t", E, b_null_t),
    ROW("backward t.reserved[3]", BW, "t.reserved[3]", E, b_t_reserved),
    ROW("backward_ex t NULL", BX, "t", E, bx_null_t),
    ROW("backward_ex t.reserved[0]", BX, "t.reserved[0]", E, bx_t_reserved),
    ROW("backward nothing asked for (edge)", BW, NULL, NN_OK, b_nothing),
    ROW("backward dw accumulates exactly (edge)", BW, NULL, NN_OK, b_accumulate),

    ROW("workspace_size ctx NULL", WK, "ctx", E, wk_null_ctx),
    ROW("workspace_size p NULL", WK, "p", E, wk_null_p),
    ROW("workspace_size x NULL", WK, "x", E, wk_null_x),
    ROW("workspace_size bytes NULL", WK, "bytes", E, wk_null_bytes),
    ROW("workspace_size pass 3", WK, "pass", E, wk_pass3),
    ROW("workspace_size pass -1", WK, "pass", E, wk_pass_neg),
    ROW("workspace_size cell 7", WK, "p.cell", E, wk_cell),
    ROW("workspace_size reserved[3]", WK, "p.reserved[3]", E, wk_reserved),
    ROW("workspace_size x rank 2", WK, "x.rank", S, wk_x_rank2),
    ROW("workspace_size x width != input_size", WK, "x.dims[2]", S, wk_x_input),
    ROW("workspace_size x dtype 9", WK, "x.dtype", D, wk_x_dtype_bad),
    ROW("workspace_size x strided", WK, "x", U, wk_x_strided),
    ROW("workspace_size x space label", WK, "x", M, wk_x_claim),
    ROW("workspace_size x wrong space", WK, "x", M, wk_x_space),
    ROW("workspace_size x element count overflows", WK, "x", O, wk_x_count_overflow),
    ROW("workspace_size x byte extent overflows", WK, "x", O, wk_x_extent_overflow),
    ROW("workspace_size length T + 1", WK, "lengths[1]", S, wk_len_big),
    ROW("workspace_size length -2", WK, "lengths[0]", S, wk_len_neg),
    ROW2("workspace_size 4*H beyond int (cuDNN)", WK, "p.hidden_size", NN_OK, U,
         wk_gates_beyond_int),
    ROW2("workspace_size T beyond int (cuDNN)", WK, "x", NN_OK, U, wk_t_beyond_int),
    ROW_ON(CAT_GPU_ONLY, "workspace_size of a new shape under a 1-byte pool limit", WK, "limit",
           NN_E_OOM_DEVICE, wk_starved),
    ROW("workspace_size every pass, equal and varied lengths (edge)", WK, NULL, NN_OK,
        wk_every_pass),

    ROW("pullback_free NULL (edge)", PF, NULL, NN_OK, pf_null),
    ROW("pullback_free *NULL (edge)", PF, NULL, NN_OK, pf_star_null),
    ROW("pullback_free twice", PF, "pullback", P, pf_twice),
    ROW("pullback_free consumed", PF, "pullback", P, pf_consumed),
    ROW("pullback_free pool pullback", PF, "pullback", P, pf_pool),
};

CAT_SUBJECT(rnn, rows)

/* The cuDNN recurrent path: the forward and backward calls (backend entry points), eager or
 * replayed. */
#include <stdio.h>
#include <string.h>

#include "rnn/rnn_cudnn_internal.h"

/* ---------------------------------------------------------------------------------------------
 * Backend entry points
 */

/* What an eager call of the pass takes from the pool (rnn.h): nn__rnn_cudnn_forward_eager's
 * workspace and, in training, the reserve forward_cudnn takes for the pullback;
 * nn__rnn_cudnn_backward_eager's workspace (its zeroed dy and dx stand-ins only when the call
 * passes none). */
nn_status nn__rnn_workspace_cudnn(struct nn_ctx *ctx, const struct nn__rnn_problem *p,
                                  nn_rnn_pass pass, size_t *bytes)
{
    struct rnn_live *e;
    nn__cudnn_shared_enter(ctx);
    nn_status st = nn__rnn_cudnn_entry_get(ctx, p, 1, NULL, &e);
    nn__cudnn_shared_leave(ctx);
    NN__TRY(st);
    *bytes = e->work_bytes + (pass == NN_RNN_PASS_TRAINING ? e->reserve_bytes : 0);
    return NN_OK;
}

/* Data descriptors hold this call's lengths (set again only when they changed: then the graphs,
 * which hold the old lengths, go, and this call runs eagerly). */
static nn_status bind_lengths(struct nn_ctx *ctx, const struct nn__rnn_problem *p,
                              struct rnn_live *e, const int32_t *lengths, int *changed)
{
    int same = 1;
    for (int64_t i = 0; same && i < p->n; i++)
        same = e->lengths[i] == (lengths ? lengths[i] : (int32_t)p->t);
    *changed = !same;
    if (same) return NN_OK;
    nn__rnn_cudnn_drop_graphs(e, U_INFER);
    nn__rnn_cudnn_drop_graphs(e, U_TRAIN);
    struct rnn_key k;
    nn__rnn_cudnn_key_of(ctx, p, 1, &k);
    return nn__rnn_cudnn_set_data_descs(ctx, e, &k, lengths);
}

/* A reserve of the pullback's own (an eager training forward's). */
nn_status nn__rnn_cudnn_reserve_new(struct nn_ctx *ctx, const struct rnn_live *e,
                                    struct reserve **out)
{
    struct reserve *rs = nn__host_calloc(1, sizeof *rs);
    if (!rs) return NN__FAIL(ctx, NN_E_OOM_HOST, "nn_rnn_forward: out of host memory");
    rs->refs = 1, rs->ctx = ctx, rs->bytes = e->reserve_bytes, rs->slot = -1;
    nn_status st = rs->bytes ? nn__dev_alloc(ctx, rs->bytes, &rs->ptr) : NN_OK;
    if (st != NN_OK) {
        nn__host_free(rs);
        return st;
    }
    *out = rs;
    return NN_OK;
}

/* cuDNN's first call of a configuration does one-time work that a graph capture must not record
 * (RNN.md): inside a capture, a call whose kind (warm) has not run eagerly yet is refused. */
static nn_status first_call_done(struct nn_ctx *ctx, const char *fn, const struct rnn_live *e,
                                 int warm)
{
    if (e->warm[warm]) return NN_OK;
    static const char *const what[] = {"inference forward", "training forward", "backward"};
    char text[96];
    snprintf(text, sizeof text, "this shape's first eager %s (cuDNN's one-time work)", what[warm]);
    return nn__capture_no_build(ctx, fn, text);
}

nn_status nn__rnn_cudnn_forward_eager(struct nn_ctx *ctx, cudnnHandle_t h,
                                      const struct nn__rnn_problem *p, const struct rnn_live *e,
                                      const struct nn__rnn_io *io, struct reserve *rs)
{
    void *ws = NULL;
    nn_status st = e->work_bytes ? nn__dev_alloc(ctx, e->work_bytes, &ws) : NN_OK;
    struct fwd_io a = nn__rnn_cudnn_fwd_io_of(io, ws, rs);
    if (st == NN_OK) st = nn__rnn_cudnn_fwd_launch(ctx, h, p, e, &a);
    if (ws) nn__dev_free(ctx, ws);
    return st;
}

static nn_status forward_cudnn(struct nn_ctx *ctx, const struct nn__rnn_problem *p,
                               const struct nn__rnn_io *io, void **state, struct nn__rnn_note *note)
{
    struct rnn_live *e;
    cudnnHandle_t h;
    int changed, replayed = 0, unit = state ? U_TRAIN : U_INFER, warm = state ? W_TRAIN : W_INFER;
    NN__TRY(nn__cudnn_handle(ctx, &h));
    NN__TRY(nn__rnn_cudnn_entry_get(ctx, p, 1, note, &e));
    NN__TRY(first_call_done(ctx, "nn_rnn_forward", e, warm));
    NN__TRY(bind_lengths(ctx, p, e, io->lengths, &changed));
    int measuring = nn__rnn_cudnn_trial_start(ctx, e, unit);
    struct reserve *rs = NULL;
    if (nn__rnn_cudnn_replay_wanted(ctx, e, unit) && e->warm[warm] && !changed &&
        nn__rnn_cudnn_forward_replay(ctx, h, p, e, io, state != NULL, &rs, &replayed) != NN_OK) {
        nn__rnn_cudnn_disable_replay(e,
                                     "a capture or graph update failed (the context's last error)");
        rs = NULL, replayed = 0;
    }
    if (!replayed && state) NN__TRY(nn__rnn_cudnn_reserve_new(ctx, e, &rs));
    if (!replayed) {
        nn_status st = nn__rnn_cudnn_forward_eager(ctx, h, p, e, io, rs);
        if (st != NN_OK) {
            nn__rnn_cudnn_reserve_unref(rs);
            return st;
        }
        e->warm[warm] = 1;
    }
    if (e->captured) e->trial[unit].skip[0] = 1, e->captured = 0;
    nn__rnn_cudnn_trial_end(ctx, p, e, unit, 0, measuring);
    nn__rnn_cudnn_note(e, replayed, note);
    if (state) *state = rs;
    return NN_OK;
}

/* A call's staging, slots and dropout states are the context's, shared by its calls on every
 * stream (cudnn_ctx.h). */
nn_status nn__rnn_forward_cudnn(struct nn_ctx *ctx, const struct nn__rnn_problem *p,
                                const struct nn__rnn_io *io, void **state,
                                struct nn__rnn_note *note)
{
    nn__cudnn_shared_enter(ctx);
    nn_status st = forward_cudnn(ctx, p, io, state, note);
    nn__cudnn_shared_leave(ctx);
    return st;
}

void nn__rnn_state_free_cudnn(struct nn_ctx *ctx, void *state)
{
    (void)ctx;
    nn__rnn_cudnn_reserve_unref(state);
}

nn_status nn__rnn_cudnn_backward_eager(struct nn_ctx *ctx, cudnnHandle_t h,
                                       const struct nn__rnn_problem *p, const struct rnn_live *e,
                                       const struct reserve *rs, const struct nn__rnn_io *io)
{
    void *ws = NULL, *dy0 = NULL, *dx0 = NULL;
    nn_status st = e->work_bytes ? nn__dev_alloc(ctx, e->work_bytes, &ws) : NN_OK;
    if (st == NN_OK && !io->dy) st = nn__dev_alloc(ctx, e->ybytes, &dy0);
    if (st == NN_OK && !io->dx) st = nn__dev_alloc(ctx, e->xbytes, &dx0);
    struct bwd_io a = nn__rnn_cudnn_bwd_io_of(io, ws, rs, dy0, dx0);
    if (st == NN_OK) st = nn__rnn_cudnn_bwd_launch(ctx, h, p, e, &a);
    if (ws) nn__dev_free(ctx, ws);
    if (dy0) nn__dev_free(ctx, dy0);
    if (dx0) nn__dev_free(ctx, dx0);
    return st;
}

static nn_status backward_cudnn(struct nn_ctx *ctx, const struct nn__rnn_problem *p, void *state,
                                const struct nn__rnn_io *io, struct nn__rnn_note *note)
{
    struct reserve *rs = state;
    if (!io->dx && !io->dhx && !io->dcx && !io->dw) return NN_OK;
    struct rnn_live *e;
    cudnnHandle_t h;
    int changed, replayed = 0;
    NN__TRY(nn__cudnn_handle(ctx, &h));
    NN__TRY(nn__rnn_cudnn_entry_get(ctx, p, 1, note, &e));
    NN__TRY(first_call_done(ctx, "nn_rnn_backward", e, W_BWD));
    NN__TRY(bind_lengths(ctx, p, e, io->lengths, &changed));
    int measuring = nn__rnn_cudnn_trial_start(ctx, e, U_TRAIN);
    if (rs->owner == e && nn__rnn_cudnn_replay_wanted(ctx, e, U_TRAIN) && e->warm[W_BWD] &&
        !changed && nn__rnn_cudnn_backward_replay(ctx, h, p, e, rs, io, &replayed) != NN_OK) {
        nn__rnn_cudnn_disable_replay(e,
                                     "a capture or graph update failed (the context's last error)");
        replayed = 0;
    }
    if (!replayed) {
        NN__TRY(nn__rnn_cudnn_backward_eager(ctx, h, p, e, rs, io));
        e->warm[W_BWD] = 1;
    }
    if (e->captured) e->trial[U_TRAIN].skip[1] = 1, e->captured = 0;
    nn__rnn_cudnn_trial_end(ctx, p, e, U_TRAIN, 1, measuring);
    nn__rnn_cudnn_note(e, replayed, note);
    return NN_OK;
}

nn_status nn__rnn_backward_cudnn(struct nn_ctx *ctx, const struct nn__rnn_problem *p, void *state,
                                 const struct nn__rnn_io *io, struct nn__rnn_note *note)
{
    nn__cudnn_shared_enter(ctx);
    nn_status st = backward_cudnn(ctx, p, state, io, note);
    nn__cudnn_shared_leave(ctx);
    return st;
}

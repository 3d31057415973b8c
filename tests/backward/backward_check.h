/* Checks of the backward options (include/nnprim/backward.h) shared by the reference suite and
 * the GPU suite: each family's check runs its calls on context c, reads values back through the
 * reference context h (c itself on the reference backend), asserts the rules of the options
 * (accumulate at backward time gives the prior value plus the fresh gradient, a kept pullback
 * gives the same gradients again, the old call follows the forward's flags, the stateless pooling
 * backward equals the pullback one) and returns the fresh gradients for comparison across
 * backends. */
#ifndef NN_TESTS_BACKWARD_CHECK_H
#define NN_TESTS_BACKWARD_CHECK_H

#include <stdint.h>

#include "nnprim/nnprim.h"

/* Gradient values a check computed (host doubles, row-major, concatenated), for comparing two
 * backends. */
struct bc_out {
    double *v;
    int64_t n;
};

/* A context of backend b with strict f32 math (exact integer sums on cuDNN too). */
nn_ctx *bc_ctx(nn_backend b);
void bc_out_free(struct bc_out *o);

/* One check per family; o receives the gradients of a plain backward. */
void bc_conv(nn_ctx *c, nn_ctx *h, struct bc_out *o);
void bc_pool(nn_ctx *c, nn_ctx *h, nn_pool_mode mode, struct bc_out *o);
void bc_linear(nn_ctx *c, nn_ctx *h, struct bc_out *o);
void bc_softmax(nn_ctx *c, nn_ctx *h, nn_softmax_mode mode, struct bc_out *o);
void bc_xent(nn_ctx *c, nn_ctx *h, struct bc_out *o);
void bc_layernorm(nn_ctx *c, nn_ctx *h, struct bc_out *o);
/* RNN: accumulate dw at backward time, keep refused, the refused pullback still usable. Packed
 * weights differ in layout between backends, so o stays empty. */
void bc_rnn(nn_ctx *c, nn_ctx *h);

/* max |a - b| / (atol + rtol * |b|) over n values (<= 1 passes); *at the worst index. */
double bc_err(const double *a, const double *b, int64_t n, double atol, double rtol, int64_t *at);

#endif

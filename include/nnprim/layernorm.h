/*
 * nnprim: layer normalisation (torch.nn.functional.layer_norm), forward and backward.
 *
 * Shapes: x has rank R (1 to NN_MAX_RANK); its trailing K = normalized_rank dims (1 <= K <= R)
 * are normalised together. With D the product of those K dims and M the product of the leading
 * R - K dims (1 when K = R), x is M rows of D elements. y, dy and dx have x's dims; gamma, beta,
 * dgamma and dbeta have the normalized dims (rank K, x's trailing K dims).
 *
 * Math (per row r, elements i = 1..D; the variance is biased, as PyTorch's):
 *   mean_r = sum_i x[r,i] / D,  var_r = sum_i (x[r,i] - mean_r)^2 / D,
 *   rstd_r = 1 / sqrt(var_r + eps),  xhat[r,i] = (x[r,i] - mean_r) * rstd_r,
 *   y[r,i] = xhat[r,i] * gamma[i] + beta[i]       (gamma 1 and beta 0 when not given)
 * Backward, with g[r,i] = dy[r,i] * gamma[i]:
 *   dx[r,i]   = rstd_r * (g[r,i] - sum_j g[r,j] / D - xhat[r,i] * sum_j g[r,j] xhat[r,j] / D)
 *   dgamma[i] = sum_r dy[r,i] * xhat[r,i],  dbeta[i] = sum_r dy[r,i]
 *
 * Layout: every tensor fully packed row-major (nn_tensor_is_contiguous()). dtypes: one per call
 * (gamma and beta take x's); f32, f64, f16 and bf16 on both backends, accumulated in double on
 * both. The cuDNN-context backend runs nnprim's own kernels (docs/LAYERNORM.md): every sum is
 * taken in a fixed order, so results are the same bits at every run.
 *
 * Text form of a call (verbose lines and `nnprim check layernorm`; docs/LAYERNORM.md):
 * "d8x16x32 k1 gamma beta f32", "d4x6 k2 eps0.001 accdx f64 grads=dx+dw".
 */
#ifndef NNPRIM_LAYERNORM_H
#define NNPRIM_LAYERNORM_H

#include <stddef.h>
#include <stdint.h>

#include "backward.h"
#include "context.h"
#include "status.h"
#include "tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Layer-norm parameters. Fill with nn_layernorm_params_default(), then change what you need. */
typedef struct nn_layernorm_params {
    int normalized_rank;  /**< K: x's trailing dims normalised together, 1 <= K <= x.rank */
    double eps;           /**< added to the variance, finite and >= 0 (default 1e-5) */
    uint64_t reserved[4]; /**< zero (NN_E_INVALID_ARG otherwise); room for the ABI to grow */
} nn_layernorm_params;

/** State kept from a training-mode forward call. Opaque. */
typedef struct nn_layernorm_pullback nn_layernorm_pullback;

/**
 * Default parameters: normalized_rank 1 (the last dim), eps 1e-5 (PyTorch's), reserved zero.
 *
 * @param p out: filled completely.
 * @return NN_OK; NN_E_INVALID_ARG if p is NULL.
 */
NN_API nn_status nn_layernorm_params_default(nn_layernorm_params *p);

/**
 * Forward: y = (x - mean) / sqrt(var + eps) * gamma + beta over x's trailing
 * p->normalized_rank dims.
 *
 * @param ctx          the context; its backend runs the op on its stream.
 * @param p            parameters, read and copied.
 * @param x            input, rank >= p->normalized_rank.
 * @param gamma        NULL (no scale) or the scale: the normalized dims, x's dtype.
 * @param beta         NULL (no shift) or the shift: the normalized dims, x's dtype.
 * @param y            output, x's dims and dtype, overwritten; must not overlap x, gamma or beta.
 * @param pullback_out NULL for inference; otherwise out: a pullback for nn_layernorm_backward()
 *                     (NULL on failure). It keeps the *views* of x and gamma (keep their storage
 *                     alive and unchanged until backward) and each row's mean and 1 / std, which
 *                     it owns (host memory on the reference backend, pool memory on a GPU
 *                     context).
 * @return NN_OK; NN_E_INVALID_ARG (NULL ctx, p, x or y; normalized_rank < 1; eps negative or not
 *         finite; a nonzero reserved field; malformed, misaligned or overlapping tensors);
 *         NN_E_SHAPE (normalized_rank > x.rank; y's, gamma's or beta's dims); NN_E_OVERFLOW (a
 *         tensor's element count or byte extent beyond int64); NN_E_DTYPE (an unknown dtype,
 *         or a tensor whose dtype is not x's); NN_E_MEMSPACE (a tensor not where the context
 *         computes); NN_E_UNSUPPORTED (strided tensors; on a GPU context: a build without the
 *         layer-norm kernels, or rows longer than 2^31 - 1 blocks of 256 elements);
 *         NN_E_OOM_HOST; NN_E_OOM_DEVICE; NN_E_CUDA.
 * Ownership: a returned pullback is the caller's until nn_layernorm_backward() consumes it or
 * nn_layernorm_pullback_free() drops it. On failure nothing is allocated and y's contents are
 * unspecified.
 */
NN_API nn_status nn_layernorm_forward(nn_ctx *ctx, const nn_layernorm_params *p, const nn_tensor *x,
                                      const nn_tensor *gamma, const nn_tensor *beta, nn_tensor *y,
                                      nn_layernorm_pullback **pullback_out);

/**
 * Backward: dx, dgamma and dbeta from dy and what forward kept. Each output is optional.
 *
 * @param ctx      the context of the forward call.
 * @param pullback in/out: consumed and set to NULL on success; unchanged on failure.
 * @param dy       gradient of y (x's dims and dtype).
 * @param dx       NULL, or out: gradient of x, x's dims and dtype, overwritten
 *                 (nn_layernorm_backward_ex() accumulates).
 * @param dgamma   NULL, or out: gradient of gamma, the normalized dims, overwritten; only when
 *                 forward was given gamma (NN_E_INVALID_ARG otherwise).
 * @param dbeta    NULL, or out: gradient of beta, the normalized dims, overwritten; only when
 *                 forward was given beta (NN_E_INVALID_ARG otherwise).
 *                 No output may overlap dy, another output, or the saved x and gamma.
 * @return NN_OK; NN_E_PULLBACK (NULL, consumed, freed, another family's or context's);
 *         NN_E_INVALID_ARG (NULL ctx or dy; dgamma or dbeta without forward's gamma or beta;
 *         malformed, misaligned or overlapping tensors); NN_E_SHAPE; NN_E_OVERFLOW; NN_E_DTYPE;
 *         NN_E_MEMSPACE; NN_E_UNSUPPORTED (strided tensors; a GPU context as in
 *         nn_layernorm_forward()); NN_E_OOM_HOST; NN_E_OOM_DEVICE (the partial sums of dgamma
 *         and dbeta on a GPU context); NN_E_CUDA.
 * The same as nn_layernorm_backward_ex() with opts NULL.
 */
NN_API nn_status nn_layernorm_backward(nn_ctx *ctx, nn_layernorm_pullback **pullback,
                                       const nn_tensor *dy, nn_tensor *dx, nn_tensor *dgamma,
                                       nn_tensor *dbeta);

/**
 * nn_layernorm_backward() with options chosen at backward time (include/nnprim/backward.h).
 *
 * @param ctx      the context of the forward call.
 * @param pullback in/out: as nn_layernorm_backward(), except that with opts->keep = 1 it stays
 *                 live and unchanged on success, for another backward call.
 * @param opts     NULL: as nn_layernorm_backward(). Otherwise opts->accumulate, an OR of
 *                 NN_ACCUMULATE_DX (dx += its gradient), NN_ACCUMULATE_DW (dgamma +=) and
 *                 NN_ACCUMULATE_DB (dbeta +=), and opts->keep.
 * @param dy, dx, dgamma, dbeta  as nn_layernorm_backward().
 * @return the statuses of nn_layernorm_backward(); NN_E_INVALID_ARG (a bit outside
 *         NN_ACCUMULATE_*, keep not 0 or 1, a nonzero opts->reserved). Options are checked after
 *         the pullback.
 * Ownership: a kept pullback stays the caller's (nn_layernorm_pullback_free()); x and gamma must
 * stay alive and unchanged while it is kept.
 */
NN_API nn_status nn_layernorm_backward_ex(nn_ctx *ctx, nn_layernorm_pullback **pullback,
                                          const nn_backward_options *opts, const nn_tensor *dy,
                                          nn_tensor *dx, nn_tensor *dgamma, nn_tensor *dbeta);

/**
 * Drop a pullback without using it (its saved statistics go back to where they came from: the
 * pool of the context it was made with, which must still exist, on a GPU context).
 *
 * @param pullback in/out: NULL or *pullback NULL is a no-op; set to NULL.
 * @return NN_OK; NN_E_PULLBACK if *pullback is not a live layer-norm pullback.
 */
NN_API nn_status nn_layernorm_pullback_free(nn_layernorm_pullback **pullback);

#ifdef __cplusplus
}
#endif

#endif /* NNPRIM_LAYERNORM_H */

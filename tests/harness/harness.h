/* The shared correctness harness, generic part: guarded output tensors, element access on host
 * views, comparison with stated tolerances. Uses only nnprim's public API, so the same sources
 * build into the Criterion suites and into the `nnprim check` command. Op families (conv, pool,
 * rnn) add their cases on top (conv_case.h). */
#ifndef NN_HARNESS_HARNESS_H
#define NN_HARNESS_HARNESS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "nnprim/nnprim.h"

/* Element i (row-major, packed) of a host tensor as double; f16 and bf16 are decoded from their
 * bit patterns here because the public API has no element access. */
double nn_h_get(const nn_tensor *t, int64_t i);

/* An output tensor with guard elements on both sides, to catch writes out of bounds. `whole`
 * is the allocation (1-D, numel + 2 * NN_H_GUARD elements), `view` the tensor handed to the op
 * (packed, the requested dims). The guards hold a random bit pattern remembered on the host; the
 * view starts as NaN, so an element the op never writes shows up too. */
#define NN_H_GUARD 64
struct nn_h_guarded {
    nn_tensor whole, view;
    nn_tensor pattern; /* host copy of whole as it was filled */
};

/* ctx: where the tensor lives (any backend); host: a reference context for host staging. */
nn_status nn_h_guarded_alloc(nn_ctx *ctx, nn_ctx *host, nn_dtype dtype, int rank,
                             const int64_t *dims, uint64_t seed, struct nn_h_guarded *g);
/* 0 if both guards are bit-identical to the pattern; otherwise 1 and a line to out. */
int nn_h_guarded_check(nn_ctx *ctx, nn_ctx *host, const struct nn_h_guarded *g, const char *name,
                       FILE *out, const char *repro);
void nn_h_guarded_free(nn_ctx *ctx, nn_ctx *host, struct nn_h_guarded *g);

/* A host copy (allocated in host, packed) of any tensor; free with nn_tensor_free(host, ...). */
nn_status nn_h_to_host(nn_ctx *ctx, nn_ctx *host, const nn_tensor *t, nn_tensor *out);

/* The tolerance scale a for a dtype and math mode: a result passes when
 * |got - want| <= a * (|want| + sqrt(terms)), terms being the number of products summed into
 * the element. Values: f64 1e-12, f32 strict 1e-5, f32 TF32 2e-3, f16 2e-3, bf16 1.6e-2.
 * With small-integer inputs (see nn_h_exact()) the comparison is exact (a = 0). */
double nn_h_tolerance(nn_dtype dtype, nn_math_mode math);

/* Whether sums of up to `terms` products of integers in [-2, 2] (plus an integer in [-2, 2]
 * accumulated) are exact in dtype: 4 * terms + 2 must be representable, so <= 2^24 for f32,
 * 2^11 for f16, 2^8 for bf16, 2^53 for f64. */
int nn_h_exact(nn_dtype dtype, int64_t terms);

/* Compare two host tensors of equal dims elementwise with scale a (0 = exact). Returns 0 on
 * pass; otherwise 1 and one line to out: the first mismatch, the count, and the reproducer. */
int nn_h_compare(const char *name, const nn_tensor *got, const nn_tensor *want, double a,
                 int64_t terms, FILE *out, const char *repro);

/* The case text of one input line: a whole verbose line ("nnprim_verbose,op,backend,impl,cache,
 * shape,ms", as nnprim prints it) gives its shape field, any other line is copied as it is.
 * Returns 1 (a verbose line), 0 (another line) or -1 (a verbose line without a shape field);
 * buf is always NUL-terminated. */
int nn_h_verbose_shape(const char *line, char *buf, size_t cap);

/* 0 if no element of a host tensor is NaN; otherwise 1 and a line (an element never written). */
int nn_h_check_written(const char *name, const nn_tensor *t, FILE *out, const char *repro);

/* 0 if every element of a host tensor is still NaN (an output the call was not asked for, left
 * alone); otherwise 1 and a line. */
int nn_h_check_untouched(const char *name, const nn_tensor *t, FILE *out, const char *repro);

/* The gradients a backward asks for: "grads=dx+db" (names joined by '+') or "grads=none";
 * without the token, all of dx, dw and db. Bits of the ones not asked for: */
enum { NN_H_SKIP_DX = 1, NN_H_SKIP_DW = 2, NN_H_SKIP_DB = 4 };

/* If t is a grads= token: the bits of the gradients it leaves out in *skip, and 1 (or -1 and a
 * message in err naming t); 0 for another token. */
int nn_h_grads_token(const char *t, unsigned *skip, char *err, size_t cap);

/* " grads=..." for skip (nothing when 0) appended at len, as nn_h_put_list(). */
size_t nn_h_put_grads(char *buf, size_t cap, size_t len, unsigned skip);

/* Case-text parsing shared by the op families' cases. */

/* Formats a message into err (cap bytes, always NUL-terminated); returns -1, so a parser can
 * `return nn_h_fail(...)`. */
int nn_h_fail(char *err, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* If name is a dtype token ("f32", "f64", "f16", "bf16"): sets *dtype and returns 1; else 0. */
int nn_h_dtype_token(const char *name, nn_dtype *dtype);

/* A number >= 1 at *s: on success stores it in *v, advances *s past it and returns 0;
 * otherwise -1 with *s unchanged. */
int nn_h_number(const char **s, int64_t *v);

/* "2" or "2x1" at s, inside token tok: one value for every one of the nsp dims, or one per dim
 * (at most max values), each >= min, stored in out[0..nsp). Returns 0, or -1 and a message in
 * err naming tok. */
int nn_h_parse_list(const char *tok, const char *s, int nsp, int max, int64_t *out, int64_t min,
                    char *err, size_t cap);

/* The tokens of one case line: its case text (nn_h_verbose_shape) without a '#' comment, split
 * on blanks into buf (bufcap bytes), at most maxtok pointers into buf stored in tok. Returns the
 * number of tokens (0: nothing to parse), or -1 and a message in err (a verbose line without a
 * shape field). */
int nn_h_case_tokens(const char *line, char *buf, size_t bufcap, char **tok, int maxtok, char *err,
                     size_t cap);

/* " <name><v0>x<v1>..." (nsp values) appended at len to buf (cap bytes); returns the new length
 * (may exceed cap once the text is truncated, as snprintf does). */
size_t nn_h_put_list(char *buf, size_t cap, size_t len, const char *name, int nsp,
                     const int64_t *v);

/* Finite differences of a piecewise-linear loss, for ops whose output before its activation, z,
 * is linear in every input element (a convolution, a dense product, with bias): the loss is
 * L = sum_j r_j m_j z_j, m_j the activation's slope at the unperturbed inputs (identity: 1; relu:
 * 1 where z_j > 0, else 0), held while an element moves. That is the loss on the linear piece the
 * analytic gradient describes, so a step across a relu kink changes nothing, and the central
 * difference is exact but for rounding: its tolerance is the rounding's bound, from the sum of
 * the loss's absolute terms (mag), the products per z_j and the step. Host f64 tensors only. */
struct nn_h_fd {
    /* Recomputes z from the inputs as they are now (the op without its activation). Returns 0,
     * or -1 with the library's error in nn_last_error(). */
    int (*forward)(void *arg);
    void *arg;
    const nn_tensor *z, *r;   /* z (written by forward) and the loss's weights, packed */
    nn_tensor *const *inputs; /* every input forward reads, for the magnitude */
    int ninputs;
    int relu;
    int64_t terms; /* products summed into one z_j (+1 for a bias) */
    /* Set by nn_h_fd_begin(): */
    unsigned char *active; /* relu: z_j > 0 at the unperturbed inputs */
    double mag;            /* sum_j |r_j| * (z_j of the inputs' absolute values) */
};

/* Runs forward on the inputs' absolute values (mag) and on the inputs (the relu pattern). Returns
 * 0, or -1 (forward failed, nn_last_error() says why; nothing to free). */
int nn_h_fd_begin(struct nn_h_fd *fd);
void nn_h_fd_end(struct nn_h_fd *fd);

/* 0 if y, the op's output with its activation, is exactly act(z) at the unperturbed inputs (z as
 * nn_h_fd_begin() left it); otherwise 1 and a line to out. */
int nn_h_fd_check_activation(const struct nn_h_fd *fd, const nn_tensor *y, FILE *out,
                             const char *repro);

/* The gradient of L with respect to t (one of fd's inputs) against central differences at up to
 * `samples` evenly spread elements; grad is the analytic gradient, start (or NULL) what an
 * accumulated gradient started from. Returns 0, or 1 and one line to out (the first element
 * outside the tolerance); a failed forward is reported as one too. */
int nn_h_fd_check(const struct nn_h_fd *fd, nn_tensor *t, const nn_tensor *grad,
                  const nn_tensor *start, int64_t samples, const char *name, FILE *out,
                  const char *repro);

/* A test's deliberate error: while grad names a gradient ("dw"), nn_h_fd_check() compares that
 * gradient's analytic elements as g * (1 + rel) + rel, so that a test shows an error of that size
 * is caught. grad NULL (the default) in every other use. */
struct nn_h_fd_tamper {
    const char *grad;
    double rel;
};
extern struct nn_h_fd_tamper nn_h_fd_tamper;

#endif

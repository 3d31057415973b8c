/* Checks every op runs on its tensor arguments, and the pieces of tensor validation that the
 * allocation functions in src/mem share. Every check records a message that starts with fn, the
 * public function the user called, and names the argument. */
#ifndef NN_CORE_TENSOR_UTIL_H
#define NN_CORE_TENSOR_UTIL_H

#include <stddef.h>

#include "nnprim/tensor.h"

struct nn_ctx;

/* nn_tensor_validate() with the message starting "fn: " and recorded on ctx (may be NULL). */
nn_status nn__tensor_validate(struct nn_ctx *ctx, const char *fn, const nn_tensor *t,
                              const char *name);

/* nn__tensor_validate(), then: the tensor lives where the context computes (host memory for the
 * reference backend, device memory of the context's device for cuDNN). op and name go into the
 * message ("nn_conv_forward: x must be in device memory of device 0 ..."). */
nn_status nn__check_tensor(struct nn_ctx *ctx, const char *op, const nn_tensor *t,
                           const char *name);

/* The common case of nn__check_tensor() decided in one pass, for calls that check many views:
 * 1 when t passes nn__check_tensor(ctx, ...) and is packed row-major with the natural strides of
 * its dims (those of nn_contiguous_strides()), with *bytes set to its extent; else 0 (and *bytes
 * untouched), which says only that the caller's own checks, made one by one, must find and
 * report what is wrong, if anything. Records nothing. */
int nn__tensor_plain(struct nn_ctx *ctx, const nn_tensor *t, size_t *bytes);

/* NN_E_MEMSPACE if t says host memory but CUDA knows its data as device memory (the label is the
 * caller's word; host loops would crash on it). nn__check_tensor() does it for reference contexts;
 * host copies and fills do it before touching the data. */
nn_status nn__check_host_data(struct nn_ctx *ctx, const char *fn, const nn_tensor *t,
                              const char *name);

/* The same for a bare pointer that host code is about to read (the cross-entropy's targets):
 * NN_E_MEMSPACE naming fn and name when CUDA knows data as device memory. */
nn_status nn__check_host_ptr(struct nn_ctx *ctx, const char *fn, const void *data,
                             const char *name);

/* 1 when CUDA knows data as device memory of ctx's device (a cuDNN context), else 0. */
int nn__device_data(struct nn_ctx *ctx, const void *data);

/* Do a and b (both valid) share memory? Conservative: compares the byte ranges
 * [data, data + extent) of views in the same memory space (and device); views in different
 * spaces never overlap. */
int nn__tensors_overlap(const nn_tensor *a, const nn_tensor *b);

/* NN_E_INVALID_ARG naming fn, aname and bname when nn__tensors_overlap(a, b). */
nn_status nn__check_no_overlap(struct nn_ctx *ctx, const char *fn, const nn_tensor *a,
                               const char *aname, const nn_tensor *b, const char *bname);

/* Can two elements of t (valid) share memory? True for a stride 0 on a dim > 1, or strides that
 * cannot be proven distinct: sorted by stride, the dims > 1 must each step past the whole extent
 * of the smaller ones (packed layouts in any order, and padded ones, pass). */
int nn__tensor_self_overlaps(const nn_tensor *t);

/* NN_E_INVALID_ARG naming fn and name when an output view t (valid) self-overlaps. */
nn_status nn__check_output_distinct(struct nn_ctx *ctx, const char *fn, const nn_tensor *t,
                                    const char *name);

/* An output's checks: nn__check_output_distinct(out), then nn__check_no_overlap(out, others[i])
 * for each non-NULL others[i] in order, with the same statuses and messages; out's byte range is
 * found once for all of them. */
nn_status nn__check_output(struct nn_ctx *ctx, const char *fn, const nn_tensor *out,
                           const char *name, const nn_tensor *const *others,
                           const char *const *other_names, int n);

/* dtype, rank and dims of a tensor to be made (nn_tensor_empty, nn_tensor_wrap); the messages
 * name fn and the argument ("nn_tensor_empty: dims[1] must be >= 1, got 0"). */
nn_status nn__tensor_check_shape(struct nn_ctx *ctx, const char *fn, nn_dtype dtype, int rank,
                                 const int64_t *dims);

/* Contiguous strides and byte extent of a shape that passed nn__tensor_check_shape (strides
 * NULL) or of the given strides; NN_E_OVERFLOW (element count or extent) or NN_E_INVALID_ARG
 * (a negative stride) naming fn. */
nn_status nn__tensor_layout(struct nn_ctx *ctx, const char *fn, nn_dtype dtype, int rank,
                            const int64_t *dims, const int64_t *strides, int64_t *strides_out,
                            size_t *bytes);

/* Fill a view (zeroing the rest of it). */
void nn__tensor_set(nn_tensor *out, void *data, nn_dtype dtype, int rank, const int64_t *dims,
                    const int64_t *strides, nn_space space, int device);

/* A short text of a tensor's dims for messages and verbose lines: "32x64x56x56". */
void nn__dims_text(const nn_tensor *t, char *buf, size_t cap);

#endif

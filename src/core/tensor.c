#include <float.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "nn_config.h"

#include "core/alloc.h"
#include "core/capture.h"
#include "core/ctx.h"
#include "core/cuda_util.h"
#include "core/dev_fill.h"
#include "core/elem.h"
#include "core/error.h"
#include "core/tensor_util.h"

/* The library's own calls take this, not the exported nn_dtype_size (a call through the PLT). */
static size_t dtype_bytes(nn_dtype dtype)
{
    switch (dtype) {
    case NN_DTYPE_F32: return 4;
    case NN_DTYPE_F64: return 8;
    case NN_DTYPE_F16:
    case NN_DTYPE_BF16: return 2;
    }
    return 0;
}

size_t nn_dtype_size(nn_dtype dtype)
{
    return dtype_bytes(dtype);
}

const char *nn_dtype_name(nn_dtype dtype)
{
    switch (dtype) {
    case NN_DTYPE_F32: return "f32";
    case NN_DTYPE_F64: return "f64";
    case NN_DTYPE_F16: return "f16";
    case NN_DTYPE_BF16: return "bf16";
    }
    return "invalid";
}

/* "x." for a named tensor, "" for the bare arguments of nn_tensor_empty and its kind. */
#define FIELD(name) (name) ? (name) : "", (name) ? "." : ""

static void shape_text(int rank, const int64_t *dims, char *buf, size_t cap)
{
    size_t n = 0;
    buf[0] = 0;
    if (rank > NN_MAX_RANK) rank = NN_MAX_RANK;
    for (int i = 0; i < rank && n < cap; i++)
        n += (size_t)snprintf(buf + n, cap - n, i ? "x%lld" : "%lld", (long long)dims[i]);
}

void nn__dims_text(const nn_tensor *t, char *buf, size_t cap)
{
    shape_text(t->rank, t->dims, buf, cap);
}

static nn_status check_shape(struct nn_ctx *ctx, const char *fn, const char *name, nn_dtype dtype,
                             int rank, const int64_t *dims)
{
    if (nn_dtype_size(dtype) == 0)
        return NN__FAIL(ctx, NN_E_DTYPE, "%s: %s%sdtype must be f32, f64, f16 or bf16, got %d", fn,
                        FIELD(name), (int)dtype);
    if (rank < 1 || rank > NN_MAX_RANK)
        return NN__FAIL(ctx, NN_E_INVALID_ARG, "%s: %s%srank must be in [1, %d], got %d", fn,
                        FIELD(name), NN_MAX_RANK, rank);
    if (!dims) return NN__FAIL(ctx, NN_E_INVALID_ARG, "%s: dims must not be NULL", fn);
    for (int i = 0; i < rank; i++)
        if (dims[i] < 1)
            return NN__FAIL(ctx, NN_E_INVALID_ARG, "%s: %s%sdims[%d] must be >= 1, got %lld", fn,
                            FIELD(name), i, (long long)dims[i]);
    return NN_OK;
}

nn_status nn__tensor_check_shape(struct nn_ctx *ctx, const char *fn, nn_dtype dtype, int rank,
                                 const int64_t *dims)
{
    return check_shape(ctx, fn, NULL, dtype, rank, dims);
}

/* Product of dims (each >= 1); nonzero when it overflows int64. */
static int count_overflows(int rank, const int64_t *dims, int64_t *count)
{
    int64_t n = 1;
    for (int i = 0; i < rank; i++)
        if (__builtin_mul_overflow(n, dims[i], &n)) return 1;
    *count = n;
    return 0;
}

/* Byte extent of a checked shape with the given strides; the element count must fit int64 too
 * (a stride 0 makes a small extent hold a huge count). */
static nn_status extent(struct nn_ctx *ctx, const char *fn, const char *name, nn_dtype dtype,
                        int rank, const int64_t *dims, const int64_t *strides, size_t *out)
{
    char text[160];
    uint64_t last = 0; /* offset of the last element, in elements */
    for (int i = 0; i < rank; i++) {
        if (strides[i] < 0)
            return NN__FAIL(ctx, NN_E_INVALID_ARG, "%s: %s%sstrides[%d] must be >= 0, got %lld", fn,
                            FIELD(name), i, (long long)strides[i]);
        uint64_t step;
        if (__builtin_mul_overflow((uint64_t)(dims[i] - 1), (uint64_t)strides[i], &step) ||
            __builtin_add_overflow(last, step, &last))
            goto overflow;
    }
    uint64_t bytes;
    if (__builtin_add_overflow(last, 1u, &last) ||
        __builtin_mul_overflow(last, (uint64_t)nn_dtype_size(dtype), &bytes) || bytes > SIZE_MAX ||
        bytes > (uint64_t)INT64_MAX)
        goto overflow;
    int64_t count;
    if (count_overflows(rank, dims, &count)) {
        shape_text(rank, dims, text, sizeof text);
        return NN__FAIL(ctx, NN_E_OVERFLOW, "%s: the element count of %s%sdims %s overflows int64",
                        fn, FIELD(name), text);
    }
    *out = (size_t)bytes;
    return NN_OK;
overflow:
    shape_text(rank, dims, text, sizeof text);
    return NN__FAIL(ctx, NN_E_OVERFLOW,
                    "%s: the byte extent of %s%sdims %s (%s) with its strides does not fit in "
                    "int64 bytes",
                    fn, FIELD(name), text, nn_dtype_name(dtype));
}

static nn_status contiguous(struct nn_ctx *ctx, const char *fn, int rank, const int64_t *dims,
                            int64_t *strides)
{
    int64_t s = 1;
    for (int i = rank - 1; i >= 0; i--) {
        strides[i] = s;
        if (__builtin_mul_overflow(s, dims[i], &s)) {
            char text[160];
            shape_text(rank, dims, text, sizeof text);
            return NN__FAIL(ctx, NN_E_OVERFLOW, "%s: the element count of dims %s overflows int64",
                            fn, text);
        }
    }
    return NN_OK;
}

nn_status nn__tensor_layout(struct nn_ctx *ctx, const char *fn, nn_dtype dtype, int rank,
                            const int64_t *dims, const int64_t *strides, int64_t *strides_out,
                            size_t *bytes)
{
    if (!strides) {
        NN__TRY(contiguous(ctx, fn, rank, dims, strides_out));
        strides = strides_out;
    } else if (strides != strides_out) {
        memcpy(strides_out, strides, (size_t)rank * sizeof *strides);
    }
    return extent(ctx, fn, NULL, dtype, rank, dims, strides, bytes);
}

nn_status nn_contiguous_strides(int rank, const int64_t *dims, int64_t *strides)
{
    const char *fn = "nn_contiguous_strides";
    if (!strides) return NN__FAIL(NULL, NN_E_INVALID_ARG, "%s: strides must not be NULL", fn);
    NN__TRY(check_shape(NULL, fn, NULL, NN_DTYPE_F32, rank, dims));
    return contiguous(NULL, fn, rank, dims, strides);
}

/* The largest power of two dividing the address (capped: an aligned pointer needs no more). */
static size_t alignment_of(const void *p)
{
    uintptr_t a = (uintptr_t)p;
    return a ? (size_t)(a & (~a + 1)) : 0;
}

/* The one-pass tests' part that reads no dim or stride: a dtype (its size in *es), a rank, data
 * aligned to the element, known flags, zero reserved words. Inline: every op call runs it once per
 * view. */
static inline int fields_valid(const nn_tensor *t, size_t *es)
{
    *es = dtype_bytes(t->dtype);
    /* es is 2, 4 or 8: the mask is the remainder */
    return *es && t->rank >= 1 && t->rank <= NN_MAX_RANK && t->data &&
           !((uintptr_t)t->data & (*es - 1)) && !(t->flags & ~(uint64_t)NN_TENSOR_BORROWED) &&
           !t->reserved[0];
}

/* Every check of nn__tensor_validate in one pass, deciding only that all of them pass (each
 * condition is one of explain_invalid's, negated); a view that fails any is left to
 * explain_invalid, which reports the first failure in its order. */
static int tensor_valid(const nn_tensor *t)
{
    size_t es;
    int rank = t->rank;
    if (!fields_valid(t, &es) ||
        (t->space != NN_SPACE_HOST && (t->space != NN_SPACE_DEVICE || t->device < 0)))
        return 0;
    uint64_t last = 0;
    int64_t count = 1;
    for (int i = 0; i < rank; i++) {
        int64_t d = t->dims[i], s = t->strides[i];
        uint64_t step;
        if (d < 1 || s < 0 || __builtin_mul_overflow((uint64_t)(d - 1), (uint64_t)s, &step) ||
            __builtin_add_overflow(last, step, &last) || __builtin_mul_overflow(count, d, &count))
            return 0;
    }
    uint64_t bytes;
    return last < (uint64_t)INT64_MAX && !__builtin_mul_overflow(last + 1, (uint64_t)es, &bytes) &&
           bytes <= SIZE_MAX && bytes <= (uint64_t)INT64_MAX;
}

/* nn__tensor_validate's checks one after another, for a view that failed the one-pass test: the
 * first failure, recorded. */
static nn_status explain_invalid(struct nn_ctx *ctx, const char *fn, const nn_tensor *t,
                                 const char *name)
{
    if (!t) return NN__FAIL(ctx, NN_E_INVALID_ARG, "%s: %s must not be NULL", fn, name);
    NN__TRY(check_shape(ctx, fn, name, t->dtype, t->rank, t->dims));
    if (!t->data) return NN__FAIL(ctx, NN_E_INVALID_ARG, "%s: %s.data must not be NULL", fn, name);
    size_t es = nn_dtype_size(t->dtype);
    if ((uintptr_t)t->data % es)
        return NN__FAIL(ctx, NN_E_INVALID_ARG,
                        "%s: %s.data (%p) is aligned to %zu byte(s), but %s elements need %zu", fn,
                        name, t->data, alignment_of(t->data), nn_dtype_name(t->dtype), es);
    if (t->space != NN_SPACE_HOST && t->space != NN_SPACE_DEVICE)
        return NN__FAIL(ctx, NN_E_INVALID_ARG,
                        "%s: %s.space must be NN_SPACE_HOST or NN_SPACE_DEVICE, got %d", fn, name,
                        (int)t->space);
    if (t->space == NN_SPACE_DEVICE && t->device < 0)
        return NN__FAIL(ctx, NN_E_INVALID_ARG,
                        "%s: %s.device must be a CUDA ordinal >= 0 for device memory, got %d", fn,
                        name, t->device);
    if (t->flags & ~(uint64_t)NN_TENSOR_BORROWED)
        return NN__FAIL(ctx, NN_E_INVALID_ARG,
                        "%s: %s.flags must be 0 or NN_TENSOR_BORROWED (%u), got %llu", fn, name,
                        NN_TENSOR_BORROWED, (unsigned long long)t->flags);
    if (t->reserved[0])
        return NN__FAIL(ctx, NN_E_INVALID_ARG, "%s: %s.reserved[0] must be 0, got %llu", fn, name,
                        (unsigned long long)t->reserved[0]);
    size_t bytes;
    return extent(ctx, fn, name, t->dtype, t->rank, t->dims, t->strides, &bytes);
}

nn_status nn__tensor_validate(struct nn_ctx *ctx, const char *fn, const nn_tensor *t,
                              const char *name)
{
    if (t && tensor_valid(t)) return NN_OK;
    return explain_invalid(ctx, fn, t, name ? name : "tensor");
}

nn_status nn_tensor_validate(const nn_tensor *t, const char *name)
{
    return nn__tensor_validate(NULL, "nn_tensor_validate", t, name);
}

int64_t nn_tensor_numel(const nn_tensor *t)
{
    if (!t || t->rank < 1 || t->rank > NN_MAX_RANK) return 0;
    int64_t n;
    return count_overflows(t->rank, t->dims, &n) ? -1 : n;
}

nn_status nn_tensor_extent_bytes(const nn_tensor *t, size_t *out)
{
    const char *fn = "nn_tensor_extent_bytes";
    if (!t) return NN__FAIL(NULL, NN_E_INVALID_ARG, "%s: t must not be NULL", fn);
    if (!out) return NN__FAIL(NULL, NN_E_INVALID_ARG, "%s: out must not be NULL", fn);
    NN__TRY(check_shape(NULL, fn, "t", t->dtype, t->rank, t->dims));
    return extent(NULL, fn, "t", t->dtype, t->rank, t->dims, t->strides, out);
}

int nn_tensor_is_contiguous(const nn_tensor *t)
{
    if (!t || t->rank < 1 || t->rank > NN_MAX_RANK) return 0;
    int64_t s = 1;
    for (int i = t->rank - 1; i >= 0; i--) {
        if (t->dims[i] != 1 && t->strides[i] != s) return 0;
        /* Past the outermost dim the product is not needed; before it, an overflowing product
         * means no stride can match. */
        if (i > 0 && __builtin_mul_overflow(s, t->dims[i], &s)) return 0;
    }
    return 1;
}

/* The extent of a valid view (cannot fail). */
static size_t extent_of(const nn_tensor *t)
{
    uint64_t last = 0;
    for (int i = 0; i < t->rank; i++)
        last += (uint64_t)(t->dims[i] - 1) * (uint64_t)t->strides[i];
    return (size_t)((last + 1) * dtype_bytes(t->dtype));
}

static uintptr_t end_of(const nn_tensor *t)
{
    uintptr_t p = (uintptr_t)t->data, e;
    return __builtin_add_overflow(p, (uintptr_t)extent_of(t), &e) ? UINTPTR_MAX : e;
}

static int same_memory(const nn_tensor *a, const nn_tensor *b)
{
    return a->space == b->space && (a->space != NN_SPACE_DEVICE || a->device == b->device);
}

/* Whether b's bytes meet [lo, hi), a's: lo < end(b) && b.data < hi. A view ends past its start
 * (an extent is at least one element), so only the lower view's end is in doubt. */
static int meets(uintptr_t lo, uintptr_t hi, const nn_tensor *b)
{
    uintptr_t p = (uintptr_t)b->data;
    return lo <= p ? p < hi : lo < end_of(b);
}

int nn__tensors_overlap(const nn_tensor *a, const nn_tensor *b)
{
    return same_memory(a, b) && meets((uintptr_t)a->data, end_of(a), b);
}

nn_status nn__check_no_overlap(struct nn_ctx *ctx, const char *fn, const nn_tensor *a,
                               const char *aname, const nn_tensor *b, const char *bname)
{
    if (!nn__tensors_overlap(a, b)) return NN_OK;
    return NN__FAIL(ctx, NN_E_INVALID_ARG,
                    "%s: %s and %s must not overlap in memory, but %s spans [%p, +%zu bytes) and "
                    "%s [%p, +%zu bytes)",
                    fn, aname, bname, aname, a->data, extent_of(a), bname, b->data, extent_of(b));
}

/* The test of nn__tensor_self_overlaps on the dims in their own order, innermost first: when
 * each steps past the span of those inside it, their strides rise, so this order is the sorted
 * one and the answer is the sorted test's. Row-major views, the usual ones, pass in one pass. */
static int distinct_in_order(const nn_tensor *t)
{
    int64_t span = 0;
    for (int i = t->rank - 1; i >= 0; i--) {
        if (t->dims[i] == 1) continue;
        if (t->strides[i] <= span) return 0;
        span += (t->dims[i] - 1) * t->strides[i];
    }
    return 1;
}

int nn__tensor_self_overlaps(const nn_tensor *t)
{
    if (distinct_in_order(t)) return 0;
    int64_t d[NN_MAX_RANK], s[NN_MAX_RANK];
    int n = 0;
    for (int i = 0; i < t->rank; i++) {
        if (t->dims[i] == 1) continue;
        if (t->strides[i] == 0) return 1;
        /* Insertion by stride: at most NN_MAX_RANK entries. */
        int k = n++;
        for (; k > 0 && s[k - 1] > t->strides[i]; k--) {
            s[k] = s[k - 1];
            d[k] = d[k - 1];
        }
        s[k] = t->strides[i];
        d[k] = t->dims[i];
    }
    /* Each dim must step past the span of the smaller ones: then every element has its own
     * offset. The sums fit: the view's extent does. */
    int64_t span = 0;
    for (int k = 0; k < n; k++) {
        if (s[k] <= span) return 1;
        span += (d[k] - 1) * s[k];
    }
    return 0;
}

nn_status nn__check_output_distinct(struct nn_ctx *ctx, const char *fn, const nn_tensor *t,
                                    const char *name)
{
    if (!nn__tensor_self_overlaps(t)) return NN_OK;
    char dims[160], strides[160];
    nn__dims_text(t, dims, sizeof dims);
    shape_text(t->rank, t->strides, strides, sizeof strides);
    return NN__FAIL(ctx, NN_E_INVALID_ARG,
                    "%s: %s is written, so its elements must not share memory, but dims %s with "
                    "strides %s map two elements to one address",
                    fn, name, dims, strides);
}

nn_status nn__check_output(struct nn_ctx *ctx, const char *fn, const nn_tensor *out,
                           const char *name, const nn_tensor *const *others,
                           const char *const *other_names, int n)
{
    NN__TRY(nn__check_output_distinct(ctx, fn, out, name));
    /* nn__tensors_overlap(out, others[i]) with out's end found once */
    uintptr_t lo = (uintptr_t)out->data, hi = end_of(out);
    for (int i = 0; i < n; i++) {
        const nn_tensor *o = others[i];
        if (o && same_memory(out, o) && meets(lo, hi, o))
            return nn__check_no_overlap(ctx, fn, out, name, o, other_names[i]);
    }
    return NN_OK;
}

static nn_status locate(nn_ctx *ctx, const void *data, nn_space *space, int *device);

/* A view labelled host memory whose data CUDA knows as device memory would be read and written
 * by host loops (a crash): its space field is the caller's word, so it is checked where host code
 * is about to touch the data. Costs one cudaPointerGetAttributes where a GPU is present. */
nn_status nn__check_host_data(nn_ctx *ctx, const char *fn, const nn_tensor *t, const char *name)
{
    nn_space space;
    int device;
    NN__TRY(locate(ctx, t->data, &space, &device));
    if (space == NN_SPACE_DEVICE)
        return NN__FAIL(ctx, NN_E_MEMSPACE,
                        "%s: %s.space says host memory, but its data is device memory of device %d",
                        fn, name, device);
    return NN_OK;
}

nn_status nn__check_host_ptr(nn_ctx *ctx, const char *fn, const void *data, const char *name)
{
    nn_space space;
    int device;
    NN__TRY(locate(ctx, data, &space, &device));
    if (space == NN_SPACE_DEVICE)
        return NN__FAIL(ctx, NN_E_MEMSPACE,
                        "%s: %s must be host memory (this context runs the reference backend, "
                        "which reads it on the host), but it is device memory of device %d",
                        fn, name, device);
    return NN_OK;
}

int nn__device_data(nn_ctx *ctx, const void *data)
{
    nn_space space;
    int device;
    (void)locate(ctx, data, &space, &device); /* never fails */
    return nn__ctx_on_gpu(ctx) && space == NN_SPACE_DEVICE && device == ctx->device;
}

/* A capture records what its calls' tensors span (core/capture.h). */
static void touch(nn_ctx *ctx, const nn_tensor *t)
{
    size_t bytes = 0;
    if (ctx->capture && nn_tensor_extent_bytes(t, &bytes) == NN_OK)
        nn__capture_touch_span(ctx, t->data, bytes);
}

/* nn__check_tensor's checks one after another, for a view that failed the one-pass test. */
static nn_status explain_misplaced(nn_ctx *ctx, const char *op, const nn_tensor *t,
                                   const char *name)
{
    NN__TRY(nn__tensor_validate(ctx, op, t, name));
    if (nn__ctx_on_gpu(ctx)) {
        if (t->space != NN_SPACE_DEVICE || t->device != ctx->device)
            return NN__FAIL(ctx, NN_E_MEMSPACE,
                            "%s: %s must be in device memory of device %d (this context runs "
                            "cuDNN there), but it is in %s memory%s",
                            op, name, ctx->device, t->space == NN_SPACE_HOST ? "host" : "device",
                            t->space == NN_SPACE_HOST ? "" : " of another device");
        touch(ctx, t);
    } else if (t->space != NN_SPACE_HOST) {
        return NN__FAIL(ctx, NN_E_MEMSPACE,
                        "%s: %s must be in host memory (this context runs the reference "
                        "backend), but it is in device memory of device %d",
                        op, name, t->device);
    } else {
        return nn__check_host_data(ctx, op, t, name);
    }
    return NN_OK;
}

nn_status nn__check_tensor(nn_ctx *ctx, const char *op, const nn_tensor *t, const char *name)
{
    if (t && tensor_valid(t)) {
        if (nn__ctx_on_gpu(ctx)) {
            if (t->space == NN_SPACE_DEVICE && t->device == ctx->device) {
                touch(ctx, t);
                return NN_OK;
            }
        } else if (t->space == NN_SPACE_HOST) {
            return nn__check_host_data(ctx, op, t, name);
        }
    }
    return explain_misplaced(ctx, op, t, name);
}

/* locate() says host memory; without a CUDA device there is nothing to ask. */
static int host_data(nn_ctx *ctx, const void *data)
{
    if (nn__cuda_device_count() == 0) return 1;
    nn_space space;
    int device;
    (void)locate(ctx, data, &space, &device); /* never fails */
    return space == NN_SPACE_HOST;
}

int nn__tensor_plain(nn_ctx *ctx, const nn_tensor *t, size_t *bytes)
{
    size_t es;
    int rank = t->rank;
    int gpu = nn__ctx_on_gpu(ctx);
    /* a context's device is >= 0 */
    if (!fields_valid(t, &es) ||
        (gpu ? t->space != NN_SPACE_DEVICE || t->device != ctx->device : t->space != NN_SPACE_HOST))
        return 0;
    /* Natural strides make every stride >= 1 and the last element's offset the count - 1, so
     * the count fitting int64 and the extent (count x es) fitting int64 bytes are all the
     * extent checks there are. */
    int64_t n = 1;
    for (int i = rank - 1; i >= 0; i--)
        if (t->dims[i] < 1 || t->strides[i] != n || __builtin_mul_overflow(n, t->dims[i], &n))
            return 0;
    uint64_t b;
    if (__builtin_mul_overflow((uint64_t)n, (uint64_t)es, &b) || b > (uint64_t)INT64_MAX ||
        b > SIZE_MAX)
        return 0;
    if (!gpu && !host_data(ctx, t->data)) return 0;
    *bytes = (size_t)b;
    if (ctx->capture) nn__capture_touch_span(ctx, t->data, *bytes);
    return 1;
}

void nn__tensor_set(nn_tensor *out, void *data, nn_dtype dtype, int rank, const int64_t *dims,
                    const int64_t *strides, nn_space space, int device)
{
    memset(out, 0, sizeof *out);
    out->data = data;
    out->dtype = dtype;
    out->rank = rank;
    memcpy(out->dims, dims, (size_t)rank * sizeof *dims);
    memcpy(out->strides, strides, (size_t)rank * sizeof *strides);
    out->space = space;
    out->device = device;
}

static nn_status check_ctx(nn_ctx *ctx, const char *fn)
{
    if (!ctx) return NN__FAIL(NULL, NN_E_INVALID_ARG, "%s: ctx must not be NULL", fn);
    return NN_OK;
}

/* Where does this pointer live? Only CUDA can tell device memory from host memory. */
static nn_status locate(nn_ctx *ctx, const void *data, nn_space *space, int *device)
{
    *space = NN_SPACE_HOST;
    *device = -1;
#if NN_HAVE_CUDA
    if (nn__cuda_device_count() == 0) return NN_OK;
    struct cudaPointerAttributes a;
    if (cudaPointerGetAttributes(&a, data) != cudaSuccess) {
        (void)cudaGetLastError(); /* unknown to CUDA: ordinary host memory */
        return NN_OK;
    }
    if (a.type == cudaMemoryTypeDevice ||
        (a.type == cudaMemoryTypeManaged && nn__ctx_on_gpu(ctx))) {
        *space = NN_SPACE_DEVICE;
        *device = a.device;
    }
#else
    (void)ctx;
    (void)data;
#endif
    return NN_OK;
}

nn_status nn_tensor_wrap(nn_ctx *ctx, void *data, nn_dtype dtype, int rank, const int64_t *dims,
                         const int64_t *strides, nn_tensor *out)
{
    const char *fn = "nn_tensor_wrap";
    NN__TRY(check_ctx(ctx, fn));
    if (!out) return NN__FAIL(ctx, NN_E_INVALID_ARG, "%s: out must not be NULL", fn);
    memset(out, 0, sizeof *out);
    if (!data) return NN__FAIL(ctx, NN_E_INVALID_ARG, "%s: data must not be NULL", fn);
    int64_t layout[NN_MAX_RANK];
    size_t bytes;
    NN__TRY(nn__tensor_check_shape(ctx, fn, dtype, rank, dims));
    NN__TRY(nn__tensor_layout(ctx, fn, dtype, rank, dims, strides, layout, &bytes));
    size_t es = nn_dtype_size(dtype);
    if ((uintptr_t)data % es)
        return NN__FAIL(ctx, NN_E_INVALID_ARG,
                        "%s: data (%p) is aligned to %zu byte(s), but %s elements need %zu", fn,
                        data, alignment_of(data), nn_dtype_name(dtype), es);
    nn_space space;
    int device;
    NN__TRY(locate(ctx, data, &space, &device));
    nn_tensor view;
    nn__tensor_set(&view, data, dtype, rank, dims, layout, space, device);
    /* the caller's memory, or nnprim's own storage wrapped again: never this view's to free */
    view.flags = NN_TENSOR_BORROWED;
    NN__TRY(nn__check_tensor(ctx, fn, &view, "data"));
    *out = view;
    return NN_OK;
}

static nn_status same_shape(nn_ctx *ctx, const char *fn, const nn_tensor *dst, const char *dname,
                            const nn_tensor *src, const char *sname)
{
    if (dst->dtype != src->dtype)
        return NN__FAIL(ctx, NN_E_DTYPE, "%s: %s.dtype (%s) must equal %s.dtype (%s)", fn, dname,
                        nn_dtype_name(dst->dtype), sname, nn_dtype_name(src->dtype));
    int same = dst->rank == src->rank;
    for (int i = 0; same && i < dst->rank; i++)
        same = dst->dims[i] == src->dims[i];
    if (!same) {
        char a[160], b[160];
        nn__dims_text(dst, a, sizeof a);
        nn__dims_text(src, b, sizeof b);
        return NN__FAIL(ctx, NN_E_SHAPE, "%s: %s dims (%s) must equal %s dims (%s)", fn, dname, a,
                        sname, b);
    }
    return NN_OK;
}

static void copy_host_strided(nn_tensor *dst, const nn_tensor *src)
{
    size_t es = nn_dtype_size(src->dtype);
    int64_t n = nn_tensor_numel(src);
    for (int64_t i = 0; i < n; i++)
        memcpy((char *)dst->data + nn__offset_of(dst, i) * (int64_t)es,
               (const char *)src->data + nn__offset_of(src, i) * (int64_t)es, es);
}

/* Whether t's elements fill [data, data + numel) exactly: a packed layout in some order of its
 * dims (row-major, channels-last, any other permutation). */
static int packed_in_some_order(const nn_tensor *t)
{
    int order[NN_MAX_RANK], n = 0;
    for (int i = 0; i < t->rank; i++)
        if (t->dims[i] > 1) order[n++] = i;
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && t->strides[order[j]] < t->strides[order[j - 1]]; j--) {
            int k = order[j];
            order[j] = order[j - 1], order[j - 1] = k;
        }
    int64_t s = 1; /* a valid view's element count fits in int64_t: no overflow */
    for (int i = 0; i < n; i++) {
        if (t->strides[order[i]] != s) return 0;
        s *= t->dims[order[i]];
    }
    return 1;
}

/* Whether two views of the same dims put every element at the same offset. */
static int same_layout(const nn_tensor *a, const nn_tensor *b)
{
    for (int i = 0; i < a->rank; i++)
        if (a->dims[i] > 1 && a->strides[i] != b->strides[i]) return 0;
    return 1;
}

#if NN_HAVE_CUDA
/* A copy between a packed device view and a host view of another layout: through a host buffer
 * in the device view's layout, which the stream's copy fills or empties before the call returns. */
static nn_status copy_staged(nn_ctx *ctx, const char *fn, nn_tensor *dst, const nn_tensor *src,
                             size_t bytes)
{
    const nn_tensor *dev = dst->space == NN_SPACE_DEVICE ? dst : src;
    nn_tensor stage = *dev;
    stage.space = NN_SPACE_HOST;
    stage.device = -1;
    stage.data = nn__host_alloc(bytes);
    if (!stage.data)
        return NN__FAIL(ctx, NN_E_OOM_HOST, "%s: out of host memory for %zu bytes of staging", fn,
                        bytes);
    nn_status st = NN_OK;
    if (dev == src) {
        st = NN__CUDA(ctx, cudaMemcpyAsync(stage.data, src->data, bytes, cudaMemcpyDefault,
                                           (cudaStream_t)ctx->stream));
        if (st == NN_OK) st = NN__CUDA(ctx, cudaStreamSynchronize((cudaStream_t)ctx->stream));
        if (st == NN_OK) copy_host_strided(dst, &stage);
    } else {
        copy_host_strided(&stage, src);
        st = NN__CUDA(ctx, cudaMemcpyAsync(dst->data, stage.data, bytes, cudaMemcpyDefault,
                                           (cudaStream_t)ctx->stream));
        /* the buffer is freed below: the copy must have read it */
        if (st == NN_OK) st = NN__CUDA(ctx, cudaStreamSynchronize((cudaStream_t)ctx->stream));
    }
    nn__host_free(stage.data);
    return st != NN_OK ? nn__error_in(ctx, fn) : NN_OK;
}
#endif

/* nn_tensor_copy for fn (the public function called) and its argument names. */
static nn_status copy(nn_ctx *ctx, const char *fn, nn_tensor *dst, const char *dname,
                      const nn_tensor *src, const char *sname)
{
    NN__TRY(nn__tensor_validate(ctx, fn, dst, dname));
    NN__TRY(nn__tensor_validate(ctx, fn, src, sname));
    NN__TRY(same_shape(ctx, fn, dst, dname, src, sname));
    NN__TRY(nn__check_output_distinct(ctx, fn, dst, dname));
    NN__TRY(nn__check_no_overlap(ctx, fn, dst, dname, src, sname));
    size_t bytes = (size_t)nn_tensor_numel(src) * nn_dtype_size(src->dtype);
    if (dst->space == NN_SPACE_HOST && src->space == NN_SPACE_HOST) {
        NN__TRY(nn__check_host_data(ctx, fn, dst, dname));
        NN__TRY(nn__check_host_data(ctx, fn, src, sname));
        if (nn_tensor_is_contiguous(dst) && nn_tensor_is_contiguous(src))
            memcpy(dst->data, src->data, bytes);
        else
            copy_host_strided(dst, src);
        return NN_OK;
    }
    if (!nn__ctx_on_gpu(ctx)) {
        const nn_tensor *d = dst->space == NN_SPACE_DEVICE ? dst : src;
        return NN__FAIL(ctx, NN_E_MEMSPACE,
                        "%s: %s is in device memory of device %d, which needs a cuDNN context; "
                        "this context runs the reference backend",
                        fn, d == dst ? dname : sname, d->device);
    }
    const nn_tensor *host = dst->space == NN_SPACE_HOST   ? dst
                            : src->space == NN_SPACE_HOST ? src
                                                          : NULL;
    /* a device view is copied as the bytes it spans: it must have no gaps and no repeats */
    const nn_tensor *views[2] = {dst, src};
    const char *names[2] = {dname, sname};
    for (int i = 0; i < 2; i++)
        if (views[i]->space == NN_SPACE_DEVICE && !packed_in_some_order(views[i]))
            return NN__FAIL(ctx, NN_E_UNSUPPORTED,
                            "%s: %s is a device view with gaps or repeated elements; a copy to or "
                            "from device memory needs each device view packed (row-major, "
                            "channels-last or another order of its dims)",
                            fn, names[i]);
    int same = same_layout(dst, src);
    if (!same && !host)
        return NN__FAIL(ctx, NN_E_UNSUPPORTED,
                        "%s: %s and %s are device views of different layouts; a copy between "
                        "device tensors needs the same strides (copy through a host tensor)",
                        fn, dname, sname);
    if (ctx->capture && (dst->space == NN_SPACE_HOST || src->space == NN_SPACE_HOST))
        return NN__FAIL(ctx, NN_E_GRAPH,
                        "%s: a copy %s host memory cannot be captured in a graph (the host would "
                        "read or write it at the call, not at each launch); bring a batch in with "
                        "nn_graph_launch_feeds() and read results after a launch",
                        fn, dst->space == NN_SPACE_HOST ? "to" : "from");
    if (ctx->capture) {
        nn__capture_touch_span(ctx, dst->data, bytes);
        nn__capture_touch_span(ctx, src->data, bytes);
    }
#if NN_HAVE_CUDA
    if (!same) {
        NN__TRY(nn__check_host_data(ctx, fn, host, host == dst ? dname : sname));
        return copy_staged(ctx, fn, dst, src, bytes);
    }
    NN__TRY_IN(ctx, fn,
               NN__CUDA(ctx, cudaMemcpyAsync(dst->data, src->data, bytes, cudaMemcpyDefault,
                                             (cudaStream_t)ctx->stream)));
    if (dst->space == NN_SPACE_HOST)
        NN__TRY_IN(ctx, fn, NN__CUDA(ctx, cudaStreamSynchronize((cudaStream_t)ctx->stream)));
    return NN_OK;
#else
    return NN__FAIL(ctx, NN_E_NOT_BUILT, "%s: this build of nnprim has no CUDA", fn);
#endif
}

nn_status nn_tensor_copy(nn_ctx *ctx, nn_tensor *dst, const nn_tensor *src)
{
    NN__TRY(check_ctx(ctx, "nn_tensor_copy"));
    return copy(ctx, "nn_tensor_copy", dst, "dst", src, "src");
}

/* splitmix64: small, fast, and the same sequence everywhere. */
static uint64_t next_random(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* the kinds of struct nn__fill (dev_fill.h) */
enum fill_kind { FILL_CONSTANT = 0, FILL_UNIFORM = 1, FILL_INTS = 2 };

struct fill {
    enum fill_kind kind;
    double a, b;
    uint64_t state;
};

static double draw(struct fill *f)
{
    switch (f->kind) {
    case FILL_CONSTANT: return f->a;
    case FILL_UNIFORM:
        return f->a + (f->b - f->a) * ((double)(next_random(&f->state) >> 11) * 0x1p-53);
    case FILL_INTS: {
        uint64_t span = (uint64_t)((int64_t)f->b - (int64_t)f->a) + 1u;
        return f->a + (double)(next_random(&f->state) % span);
    }
    }
    return 0;
}

/* Largest finite value of a dtype: a larger double would become infinite (converting it to f32
 * is even undefined). */
static double finite_max(nn_dtype dtype)
{
    switch (dtype) {
    case NN_DTYPE_F32: return FLT_MAX;
    case NN_DTYPE_F64: return DBL_MAX;
    case NN_DTYPE_F16: return 65504.0;
    case NN_DTYPE_BF16: return 0x1.fep127;
    }
    return 0;
}

/* Largest n such that every integer in [-n, n] is exact in the dtype. */
static double exact_int_max(nn_dtype dtype)
{
    switch (dtype) {
    case NN_DTYPE_F32: return 0x1p24;
    case NN_DTYPE_F64: return 0x1p53;
    case NN_DTYPE_F16: return 2048.0;
    case NN_DTYPE_BF16: return 256.0;
    }
    return 0;
}

/* The bounds of f must be values of t's dtype (already validated). */
static nn_status check_bounds(nn_ctx *ctx, const char *fn, const nn_tensor *t, const struct fill *f)
{
    const char *dt = nn_dtype_name(t->dtype);
    if (f->kind == FILL_INTS) {
        double m = exact_int_max(t->dtype);
        if (f->a < -m || f->b > m)
            return NN__FAIL(ctx, NN_E_INVALID_ARG,
                            "%s: lo=%.0f and hi=%.0f must lie in [-%.0f, %.0f], where every "
                            "integer is exact in %s",
                            fn, f->a, f->b, m, m, dt);
        return NN_OK;
    }
    double m = finite_max(t->dtype);
    int n = f->kind == FILL_CONSTANT ? 1 : 2;
    for (int i = 0; i < n; i++) {
        double v = i ? f->b : f->a;
        if (isfinite(v) && fabs(v) > m)
            return NN__FAIL(ctx, NN_E_INVALID_ARG,
                            "%s: %s=%g does not fit in %s (largest finite %g); it would become "
                            "infinite",
                            fn,
                            f->kind == FILL_CONSTANT ? "value"
                            : i                      ? "hi"
                                                     : "lo",
                            v, dt, m);
    }
    return NN_OK;
}

static nn_status fill(nn_ctx *ctx, const char *fn, nn_tensor *t, struct fill *f)
{
    NN__TRY(check_ctx(ctx, fn));
    NN__TRY(nn__tensor_validate(ctx, fn, t, "t"));
    NN__TRY(nn__check_output_distinct(ctx, fn, t, "t"));
    NN__TRY(check_bounds(ctx, fn, t, f));
    int64_t n = nn_tensor_numel(t);
    if (t->space == NN_SPACE_HOST) {
        NN__TRY(nn__check_host_data(ctx, fn, t, "t"));
        for (int64_t i = 0; i < n; i++)
            nn__store(t->data, t->dtype, nn__offset_of(t, i), draw(f));
        return NN_OK;
    }
    if (!nn__ctx_on_gpu(ctx))
        return NN__FAIL(ctx, NN_E_MEMSPACE,
                        "%s: t is in device memory of device %d, which needs a cuDNN context; "
                        "this context runs the reference backend",
                        fn, t->device);
    if (!nn_tensor_is_contiguous(t))
        return NN__FAIL(ctx, NN_E_UNSUPPORTED, "%s: a device tensor t must be contiguous to fill",
                        fn);
#if NN_HAVE_CUDA
    const char *no_kernel = nn__fill_unavailable();
    if (!no_kernel) {
        struct nn__fill k = {(uint64_t)(uintptr_t)t->data,
                             n,
                             (int32_t)t->dtype,
                             (int32_t)f->kind,
                             f->a,
                             f->b,
                             f->state};
        nn__capture_touch_span(ctx, t->data, (size_t)n * nn_dtype_size(t->dtype));
        return nn__dev_fill(ctx, fn, &k);
    }
    if (ctx->capture)
        return NN__FAIL(ctx, NN_E_GRAPH,
                        "%s: a device fill is captured as a kernel, and %s: fill t before "
                        "nn_graph_begin()",
                        fn, no_kernel);
#endif
    nn_tensor staging = *t;
    staging.space = NN_SPACE_HOST;
    staging.device = -1;
    staging.data = nn__host_alloc((size_t)n * nn_dtype_size(t->dtype));
    if (!staging.data)
        return NN__FAIL(ctx, NN_E_OOM_HOST, "%s: out of host memory for %zu bytes of staging", fn,
                        (size_t)n * nn_dtype_size(t->dtype));
    for (int64_t i = 0; i < n; i++)
        nn__store(staging.data, t->dtype, i, draw(f));
    nn_status st = copy(ctx, fn, t, "t", &staging, "the host staging copy of t");
    nn__host_free(staging.data);
    return st;
}

nn_status nn_tensor_fill_constant(nn_ctx *ctx, nn_tensor *t, double value)
{
    struct fill f = {FILL_CONSTANT, value, 0, 0};
    return fill(ctx, "nn_tensor_fill_constant", t, &f);
}

nn_status nn_tensor_fill_uniform(nn_ctx *ctx, nn_tensor *t, double lo, double hi, uint64_t seed)
{
    const char *fn = "nn_tensor_fill_uniform";
    if (!isfinite(lo) || !isfinite(hi) || lo > hi)
        return NN__FAIL(ctx, NN_E_INVALID_ARG, "%s: need finite lo <= hi, got lo=%g hi=%g", fn, lo,
                        hi);
    if (!isfinite(hi - lo))
        return NN__FAIL(ctx, NN_E_INVALID_ARG,
                        "%s: the width hi - lo must be finite, got lo=%g hi=%g (the width "
                        "overflows a double)",
                        fn, lo, hi);
    struct fill f = {FILL_UNIFORM, lo, hi, seed};
    return fill(ctx, fn, t, &f);
}

nn_status nn_tensor_fill_ints(nn_ctx *ctx, nn_tensor *t, int lo, int hi, uint64_t seed)
{
    const char *fn = "nn_tensor_fill_ints";
    if (lo > hi)
        return NN__FAIL(ctx, NN_E_INVALID_ARG, "%s: need lo <= hi, got lo=%d hi=%d", fn, lo, hi);
    struct fill f = {FILL_INTS, lo, hi, seed};
    return fill(ctx, fn, t, &f);
}

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "nn_config.h"

#include "core/alloc.h"
#include "core/ctx.h"
#include "core/cuda_util.h"
#include "core/elem.h"
#include "core/error.h"
#include "core/ptrset.h"
#include "core/tensor_util.h"
#include "mem/mem.h"

/* Host blocks handed out by nn_tensor_empty() for reference contexts. */
static struct nn__ptrset nn__host_tensors = NN__PTRSET_INIT;

size_t nn_dtype_size(nn_dtype dtype)
{
    switch (dtype) {
    case NN_DTYPE_F32: return 4;
    case NN_DTYPE_F64: return 8;
    case NN_DTYPE_F16:
    case NN_DTYPE_BF16: return 2;
    }
    return 0;
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

static nn_status check_shape(const char *name, nn_dtype dtype, int rank, const int64_t *dims)
{
    if (nn_dtype_size(dtype) == 0)
        return NN__FAIL(NULL, NN_E_DTYPE, "%s.dtype must be f32, f64, f16 or bf16, got %d", name,
                        (int)dtype);
    if (rank < 1 || rank > NN_MAX_RANK)
        return NN__FAIL(NULL, NN_E_INVALID_ARG, "%s.rank must be in [1, %d], got %d", name,
                        NN_MAX_RANK, rank);
    if (!dims) return NN__FAIL(NULL, NN_E_INVALID_ARG, "%s: dims must not be NULL", name);
    for (int i = 0; i < rank; i++)
        if (dims[i] < 1)
            return NN__FAIL(NULL, NN_E_INVALID_ARG, "%s.dims[%d] must be >= 1, got %lld", name, i,
                            (long long)dims[i]);
    return NN_OK;
}

static nn_status extent(const char *name, nn_dtype dtype, int rank, const int64_t *dims,
                        const int64_t *strides, size_t *out)
{
    uint64_t last = 0; /* offset of the last element, in elements */
    for (int i = 0; i < rank; i++) {
        if (strides[i] < 0)
            return NN__FAIL(NULL, NN_E_INVALID_ARG, "%s.strides[%d] must be >= 0, got %lld", name,
                            i, (long long)strides[i]);
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
    *out = (size_t)bytes;
    return NN_OK;
overflow:
    return NN__FAIL(NULL, NN_E_OVERFLOW, "%s: the byte extent of the tensor does not fit in size_t",
                    name);
}

nn_status nn_contiguous_strides(int rank, const int64_t *dims, int64_t *strides)
{
    if (!strides) return NN__FAIL(NULL, NN_E_INVALID_ARG, "strides must not be NULL");
    NN__TRY(check_shape("tensor", NN_DTYPE_F32, rank, dims));
    int64_t s = 1;
    for (int i = rank - 1; i >= 0; i--) {
        strides[i] = s;
        if (__builtin_mul_overflow(s, dims[i], &s))
            return NN__FAIL(NULL, NN_E_OVERFLOW, "tensor: the element count overflows int64");
    }
    return NN_OK;
}

nn_status nn_tensor_validate(const nn_tensor *t, const char *name)
{
    if (!name) name = "tensor";
    if (!t) return NN__FAIL(NULL, NN_E_INVALID_ARG, "%s must not be NULL", name);
    NN__TRY(check_shape(name, t->dtype, t->rank, t->dims));
    if (!t->data) return NN__FAIL(NULL, NN_E_INVALID_ARG, "%s.data must not be NULL", name);
    if (t->space != NN_SPACE_HOST && t->space != NN_SPACE_DEVICE)
        return NN__FAIL(NULL, NN_E_INVALID_ARG,
                        "%s.space must be NN_SPACE_HOST or NN_SPACE_DEVICE, got %d", name,
                        (int)t->space);
    size_t bytes;
    return extent(name, t->dtype, t->rank, t->dims, t->strides, &bytes);
}

int64_t nn_tensor_numel(const nn_tensor *t)
{
    if (!t || t->rank < 1 || t->rank > NN_MAX_RANK) return 0;
    int64_t n = 1;
    for (int i = 0; i < t->rank; i++)
        n *= t->dims[i];
    return n;
}

nn_status nn_tensor_extent_bytes(const nn_tensor *t, size_t *out)
{
    if (!t || !out) return NN__FAIL(NULL, NN_E_INVALID_ARG, "t and out must not be NULL");
    NN__TRY(check_shape("tensor", t->dtype, t->rank, t->dims));
    return extent("tensor", t->dtype, t->rank, t->dims, t->strides, out);
}

int nn_tensor_is_contiguous(const nn_tensor *t)
{
    if (!t || t->rank < 1 || t->rank > NN_MAX_RANK) return 0;
    int64_t s = 1;
    for (int i = t->rank - 1; i >= 0; i--) {
        if (t->dims[i] != 1 && t->strides[i] != s) return 0;
        s *= t->dims[i];
    }
    return 1;
}

void nn__dims_text(const nn_tensor *t, char *buf, size_t cap)
{
    size_t n = 0;
    buf[0] = 0;
    for (int i = 0; i < t->rank && n < cap; i++)
        n += (size_t)snprintf(buf + n, cap - n, i ? "x%lld" : "%lld", (long long)t->dims[i]);
}

static nn_status check_ctx(nn_ctx *ctx, const char *fn)
{
    if (!ctx) return NN__FAIL(NULL, NN_E_INVALID_ARG, "%s: ctx must not be NULL", fn);
    return NN_OK;
}

nn_status nn__check_tensor(nn_ctx *ctx, const char *op, const nn_tensor *t, const char *name)
{
    if (nn_tensor_validate(t, name) != NN_OK) return nn__error_rethrow(ctx, op);
    if (nn__ctx_on_gpu(ctx)) {
        if (t->space != NN_SPACE_DEVICE || t->device != ctx->device)
            return NN__FAIL(ctx, NN_E_MEMSPACE,
                            "%s: %s must be in device memory of device %d (this context runs "
                            "cuDNN there), but it is in %s memory%s",
                            op, name, ctx->device, t->space == NN_SPACE_HOST ? "host" : "device",
                            t->space == NN_SPACE_HOST ? "" : " of another device");
    } else if (t->space != NN_SPACE_HOST) {
        return NN__FAIL(ctx, NN_E_MEMSPACE,
                        "%s: %s must be in host memory (this context runs the reference "
                        "backend), but it is in device memory of device %d",
                        op, name, t->device);
    }
    return NN_OK;
}

static void fill_view(nn_tensor *out, void *data, nn_dtype dtype, int rank, const int64_t *dims,
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

nn_status nn_tensor_empty(nn_ctx *ctx, nn_dtype dtype, int rank, const int64_t *dims,
                          nn_tensor *out)
{
    NN__TRY(check_ctx(ctx, "nn_tensor_empty"));
    if (!out) return NN__FAIL(ctx, NN_E_INVALID_ARG, "nn_tensor_empty: out must not be NULL");
    memset(out, 0, sizeof *out);
    int64_t strides[NN_MAX_RANK];
    size_t bytes;
    nn_status st = check_shape("nn_tensor_empty", dtype, rank, dims);
    if (st == NN_OK) st = nn_contiguous_strides(rank, dims, strides);
    if (st == NN_OK) st = extent("nn_tensor_empty", dtype, rank, dims, strides, &bytes);
    if (st != NN_OK) return nn__error_rethrow(ctx, NULL);
    void *data;
    if (nn__ctx_on_gpu(ctx)) {
        NN__TRY(nn__dev_alloc(ctx, bytes, &data));
        fill_view(out, data, dtype, rank, dims, strides, NN_SPACE_DEVICE, ctx->device);
        return NN_OK;
    }
    data = nn__host_alloc(bytes);
    if (!data || nn__ptrset_add(&nn__host_tensors, data) != 0) {
        nn__host_free(data);
        return NN__FAIL(ctx, NN_E_OOM_HOST, "nn_tensor_empty: out of host memory for %zu bytes",
                        bytes);
    }
    fill_view(out, data, dtype, rank, dims, strides, NN_SPACE_HOST, -1);
    return NN_OK;
}

nn_status nn_tensor_free(nn_ctx *ctx, nn_tensor *t)
{
    NN__TRY(check_ctx(ctx, "nn_tensor_free"));
    if (!t) return NN__FAIL(ctx, NN_E_INVALID_ARG, "nn_tensor_free: t must not be NULL");
    if (!t->data) return NN_OK;
    if (t->space == NN_SPACE_DEVICE) {
        if (!nn__ctx_on_gpu(ctx) || t->device != ctx->device)
            return NN__FAIL(ctx, NN_E_MEMSPACE,
                            "nn_tensor_free: t is device memory of device %d; free it with a "
                            "context of that device",
                            t->device);
        NN__TRY(nn__dev_free(ctx, t->data));
    } else {
        if (!nn__ptrset_remove(&nn__host_tensors, t->data))
            return NN__FAIL(ctx, NN_E_BAD_POINTER,
                            "nn_tensor_free: t.data %p was not allocated by nn_tensor_empty() or "
                            "was already freed",
                            t->data);
        nn__host_free(t->data);
    }
    t->data = NULL;
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
    NN__TRY(check_ctx(ctx, "nn_tensor_wrap"));
    if (!out) return NN__FAIL(ctx, NN_E_INVALID_ARG, "nn_tensor_wrap: out must not be NULL");
    memset(out, 0, sizeof *out);
    if (!data) return NN__FAIL(ctx, NN_E_INVALID_ARG, "nn_tensor_wrap: data must not be NULL");
    int64_t contiguous[NN_MAX_RANK];
    size_t bytes;
    nn_status st = check_shape("nn_tensor_wrap", dtype, rank, dims);
    if (st == NN_OK && !strides) st = nn_contiguous_strides(rank, dims, contiguous);
    if (st == NN_OK)
        st = extent("nn_tensor_wrap", dtype, rank, dims, strides ? strides : contiguous, &bytes);
    if (st != NN_OK) return nn__error_rethrow(ctx, NULL);
    nn_space space;
    int device;
    NN__TRY(locate(ctx, data, &space, &device));
    nn_tensor view;
    fill_view(&view, data, dtype, rank, dims, strides ? strides : contiguous, space, device);
    NN__TRY(nn__check_tensor(ctx, "nn_tensor_wrap", &view, "data"));
    *out = view;
    return NN_OK;
}

static nn_status same_shape(nn_ctx *ctx, const nn_tensor *dst, const nn_tensor *src)
{
    if (dst->dtype != src->dtype)
        return NN__FAIL(ctx, NN_E_DTYPE, "nn_tensor_copy: dst.dtype (%s) must equal src.dtype (%s)",
                        nn_dtype_name(dst->dtype), nn_dtype_name(src->dtype));
    int same = dst->rank == src->rank;
    for (int i = 0; same && i < dst->rank; i++)
        same = dst->dims[i] == src->dims[i];
    if (!same) {
        char a[128], b[128];
        nn__dims_text(dst, a, sizeof a);
        nn__dims_text(src, b, sizeof b);
        return NN__FAIL(ctx, NN_E_SHAPE, "nn_tensor_copy: dst dims (%s) must equal src dims (%s)",
                        a, b);
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

nn_status nn_tensor_copy(nn_ctx *ctx, nn_tensor *dst, const nn_tensor *src)
{
    NN__TRY(check_ctx(ctx, "nn_tensor_copy"));
    if (nn_tensor_validate(dst, "dst") != NN_OK || nn_tensor_validate(src, "src") != NN_OK)
        return nn__error_rethrow(ctx, "nn_tensor_copy");
    NN__TRY(same_shape(ctx, dst, src));
    size_t bytes = (size_t)nn_tensor_numel(src) * nn_dtype_size(src->dtype);
    if (dst->space == NN_SPACE_HOST && src->space == NN_SPACE_HOST) {
        if (nn_tensor_is_contiguous(dst) && nn_tensor_is_contiguous(src))
            memmove(dst->data, src->data, bytes);
        else
            copy_host_strided(dst, src);
        return NN_OK;
    }
    if (!nn_tensor_is_contiguous(dst) || !nn_tensor_is_contiguous(src))
        return NN__FAIL(ctx, NN_E_UNSUPPORTED,
                        "nn_tensor_copy: a copy to or from device memory needs contiguous dst and "
                        "src; copy through a contiguous host tensor first");
#if NN_HAVE_CUDA
    if (!nn__ctx_on_gpu(ctx))
        return NN__FAIL(ctx, NN_E_MEMSPACE,
                        "nn_tensor_copy: device memory needs a cuDNN context; this context runs "
                        "the reference backend");
    NN__TRY(NN__CUDA(ctx, cudaMemcpyAsync(dst->data, src->data, bytes, cudaMemcpyDefault,
                                          (cudaStream_t)ctx->stream)));
    if (dst->space == NN_SPACE_HOST)
        NN__TRY(NN__CUDA(ctx, cudaStreamSynchronize((cudaStream_t)ctx->stream)));
    return NN_OK;
#else
    return NN__FAIL(ctx, NN_E_NOT_BUILT, "nn_tensor_copy: this build of nnprim has no CUDA");
#endif
}

/* splitmix64: small, fast, and the same sequence everywhere. */
static uint64_t next_random(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

enum fill_kind { FILL_CONSTANT, FILL_UNIFORM, FILL_INTS };

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

static nn_status fill(nn_ctx *ctx, const char *fn, nn_tensor *t, struct fill *f)
{
    NN__TRY(check_ctx(ctx, fn));
    if (nn_tensor_validate(t, "t") != NN_OK) return nn__error_rethrow(ctx, fn);
    int64_t n = nn_tensor_numel(t);
    if (t->space == NN_SPACE_HOST) {
        for (int64_t i = 0; i < n; i++)
            nn__store(t->data, t->dtype, nn__offset_of(t, i), draw(f));
        return NN_OK;
    }
    if (!nn_tensor_is_contiguous(t))
        return NN__FAIL(ctx, NN_E_UNSUPPORTED, "%s: a device tensor must be contiguous to fill",
                        fn);
    nn_tensor staging = *t;
    staging.space = NN_SPACE_HOST;
    staging.device = -1;
    staging.data = nn__host_alloc((size_t)n * nn_dtype_size(t->dtype));
    if (!staging.data)
        return NN__FAIL(ctx, NN_E_OOM_HOST, "%s: out of host memory for staging", fn);
    for (int64_t i = 0; i < n; i++)
        nn__store(staging.data, t->dtype, i, draw(f));
    nn_status st = nn_tensor_copy(ctx, t, &staging);
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
    if (!isfinite(lo) || !isfinite(hi) || lo > hi)
        return NN__FAIL(ctx, NN_E_INVALID_ARG,
                        "nn_tensor_fill_uniform: need finite lo <= hi, got lo=%g hi=%g", lo, hi);
    struct fill f = {FILL_UNIFORM, lo, hi, seed};
    return fill(ctx, "nn_tensor_fill_uniform", t, &f);
}

nn_status nn_tensor_fill_ints(nn_ctx *ctx, nn_tensor *t, int lo, int hi, uint64_t seed)
{
    if (lo > hi)
        return NN__FAIL(ctx, NN_E_INVALID_ARG,
                        "nn_tensor_fill_ints: need lo <= hi, got lo=%d hi=%d", lo, hi);
    struct fill f = {FILL_INTS, lo, hi, seed};
    return fill(ctx, "nn_tensor_fill_ints", t, &f);
}

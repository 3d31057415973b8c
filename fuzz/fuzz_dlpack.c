/* libFuzzer target for DLPack capsules (src/mem/dlpack.c). Built with -Dfuzz=true
 * (tools/fuzz.sh).
 *
 * The input gives every field of a DLManagedTensor: data (NULL or not), device type and id,
 * ndim, dtype code, bits and lanes, shape, strides (or NULL), byte_offset. The import must answer
 * NN_OK or one of the statuses dlpack.h lists, with a message naming nn_tensor_from_dlpack, never
 * crash, and never call the capsule's deleter (the capsule stays the caller's). An accepted
 * capsule is imported again over a buffer of exactly the byte extent the view claims, and its
 * elements are copied out and filled: every access stays inside the buffer (AddressSanitizer).
 * nn_tensor_free() must refuse the view.
 *
 * The input's last byte also drives an export: a tensor from nn_tensor_empty() handed to a
 * capsule (checked field by field), imported back (the same memory), its storage refused to
 * nn_tensor_free() and to a second export while the capsule lives, and freed by one call of the
 * capsule's deleter (after which the storage is unknown to nnprim). */
#include <dlpack/dlpack.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nnprim/nnprim.h"
#include "fuzz/fuzz_ref_ctx.h"

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);

/* The input as a stream of fields; zeros once it runs out. */
struct input {
    const unsigned char *p;
    size_t n;
};

static uint64_t take(struct input *in, int bytes)
{
    uint64_t v = 0;
    for (int i = 0; i < bytes && in->n; i++, in->p++, in->n--)
        v |= (uint64_t)*in->p << (8 * i);
    return v;
}

static int deleter_calls;

static void count_deleter(DLManagedTensor *self)
{
    (void)self;
    deleter_calls++;
}

static void fail(const char *what, nn_status st)
{
    fprintf(stderr, "%s: %s: %s\n", what, nn_status_name(st), nn_last_error()->message);
    abort();
}

static void check_refusal(nn_status st)
{
    if (st != NN_E_INVALID_ARG && st != NN_E_DTYPE && st != NN_E_MEMSPACE && st != NN_E_OVERFLOW)
        fail("nn_tensor_from_dlpack: a status dlpack.h does not list", st);
    if (strncmp(nn_last_error()->message, "nn_tensor_from_dlpack: ", 23) != 0)
        fail("nn_tensor_from_dlpack: a message that does not name the call", st);
}

/* An accepted capsule over real memory: exactly the bytes its view spans. */
static void touch(DLManagedTensor m, const nn_tensor *fake)
{
    nn_ctx *ctx = nn_fuzz_ref_ctx();
    size_t extent;
    nn_status st = nn_tensor_extent_bytes(fake, &extent);
    if (st != NN_OK) fail("nn_tensor_extent_bytes of an accepted view", st);
    /* large views (or many elements over little memory, by stride 0): only validated */
    if (extent > ((size_t)1 << 20) || nn_tensor_numel(fake) > (1 << 18)) return;
    unsigned char *buf = malloc(extent);
    if (!buf) abort();
    memset(buf, 0x3c, extent);
    m.dl_tensor.data = buf;
    m.dl_tensor.byte_offset = 0;
    nn_tensor view, dense;
    if ((st = nn_tensor_from_dlpack(ctx, &m, &view)) != NN_OK)
        fail("the same capsule over real memory", st);
    if (view.data != buf) abort();
    if ((st = nn_tensor_empty(ctx, view.dtype, view.rank, view.dims, &dense)) != NN_OK)
        fail("nn_tensor_empty", st);
    if ((st = nn_tensor_copy(ctx, &dense, &view)) != NN_OK) fail("copy out of the view", st);
    /* A view whose elements share memory (stride 0) may be refused as a destination. */
    st = nn_tensor_copy(ctx, &view, &dense);
    if (st != NN_OK && st != NN_E_INVALID_ARG) fail("copy into the view", st);
    st = nn_tensor_fill_constant(ctx, &view, 1.5);
    if (st != NN_OK && st != NN_E_INVALID_ARG) fail("fill the view", st);
    if ((st = nn_tensor_free(ctx, &view)) != NN_E_BAD_POINTER)
        fail("nn_tensor_free of an imported view", st);
    if (nn_tensor_free(ctx, &dense) != NN_OK) abort();
    free(buf);
}

static void import(struct input *in)
{
    nn_ctx *ctx = nn_fuzz_ref_ctx();
    int64_t shape[64], strides[64];
    uint64_t flags = take(in, 1);
    DLManagedTensor m;
    memset(&m, 0, sizeof m);
    /* Mostly an aligned address that is never read (the import does not touch the data). */
    m.dl_tensor.data = flags & 1 ? NULL : (void *)(uintptr_t)(0x10000 + (take(in, 1) & 7));
    m.dl_tensor.device.device_type =
        (DLDeviceType)(flags & 2 ? (int32_t)take(in, 4) : (int32_t)(take(in, 1) % 3));
    m.dl_tensor.device.device_id = (int32_t)take(in, flags & 4 ? 4 : 1);
    m.dl_tensor.ndim = flags & 8 ? (int32_t)take(in, 4) : (int32_t)(take(in, 1) % 10);
    m.dl_tensor.dtype.code = (uint8_t)take(in, 1) % 8;
    m.dl_tensor.dtype.bits = (uint8_t)take(in, 1);
    m.dl_tensor.dtype.lanes = (uint16_t)(flags & 16 ? take(in, 2) : 1);
    m.dl_tensor.byte_offset = flags & 32 ? take(in, 8) : take(in, 1);
    int n = m.dl_tensor.ndim < 0 ? 0 : m.dl_tensor.ndim > 64 ? 64 : m.dl_tensor.ndim;
    for (int i = 0; i < n; i++) {
        int wide = (int)take(in, 1);
        shape[i] = wide & 1 ? (int64_t)take(in, 8) : (int64_t)(wide >> 2) % 9 - 1;
        strides[i] = wide & 2 ? (int64_t)take(in, 8) : (int64_t)take(in, 1) - 8;
    }
    /* shape and strides hold exactly ndim entries (at most 64), so a read past them is seen */
    int64_t *sh = malloc(sizeof(int64_t) * (size_t)(n ? n : 1));
    int64_t *st_ = malloc(sizeof(int64_t) * (size_t)(n ? n : 1));
    if (!sh || !st_) abort();
    memcpy(sh, shape, sizeof(int64_t) * (size_t)n);
    memcpy(st_, strides, sizeof(int64_t) * (size_t)n);
    m.dl_tensor.shape = flags & 64 ? NULL : sh;
    m.dl_tensor.strides = flags & 128 ? NULL : st_;
    m.deleter = count_deleter;
    deleter_calls = 0;
    nn_tensor view;
    nn_status st = nn_tensor_from_dlpack(ctx, &m, &view);
    if (deleter_calls) abort();
    if (st != NN_OK) {
        check_refusal(st);
        static const nn_tensor zero;
        if (memcmp(&view, &zero, sizeof view) != 0) abort(); /* zeroed on failure */
    } else {
        if ((uintptr_t)view.data != (uintptr_t)m.dl_tensor.data + m.dl_tensor.byte_offset) abort();
        touch(m, &view);
    }
    if (deleter_calls) abort();
    free(sh);
    free(st_);
}

static void export_round_trip(unsigned seed)
{
    nn_ctx *ctx = nn_fuzz_ref_ctx();
    static const nn_dtype types[] = {NN_DTYPE_F32, NN_DTYPE_F64, NN_DTYPE_F16, NN_DTYPE_BF16};
    int rank = 1 + (int)(seed % 4);
    int64_t dims[4];
    for (int i = 0; i < rank; i++)
        dims[i] = 1 + (int64_t)((seed >> (2 + 3 * i)) % 7);
    nn_tensor t, copy, view;
    nn_status st = nn_tensor_empty(ctx, types[(seed >> 2) % 4], rank, dims, &t);
    if (st != NN_OK) fail("nn_tensor_empty", st);
    copy = t;
    DLManagedTensor *m;
    if ((st = nn_tensor_to_dlpack(ctx, &t, &m)) != NN_OK) fail("nn_tensor_to_dlpack", st);
    DLTensor *d = &m->dl_tensor;
    if (t.data || d->data != copy.data || d->ndim != rank || d->byte_offset ||
        d->device.device_type != kDLCPU || d->dtype.lanes != 1 || !m->deleter)
        abort();
    for (int i = 0; i < rank; i++)
        if (d->shape[i] != copy.dims[i] || d->strides[i] != copy.strides[i]) abort();
    if ((st = nn_tensor_from_dlpack(ctx, m, &view)) != NN_OK) fail("import of an export", st);
    if (view.data != copy.data || view.dtype != copy.dtype) abort();
    if ((st = nn_tensor_free(ctx, &view)) != NN_E_BAD_POINTER) fail("free of the capsule's", st);
    nn_tensor again = copy;
    DLManagedTensor *m2;
    if ((st = nn_tensor_to_dlpack(ctx, &again, &m2)) != NN_E_BAD_POINTER || m2)
        fail("a second export of the capsule's storage", st);
    m->deleter(m);
    /* The deleter freed the storage: nnprim no longer knows it. */
    if ((st = nn_tensor_free(ctx, &copy)) != NN_E_BAD_POINTER) fail("free after the deleter", st);
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
    struct input in = {data, size};
    import(&in);
    if (size && data[size - 1] & 1) export_round_trip(data[size - 1]);
    return 0;
}

/* Tensor storage: nn_tensor_empty() and nn_tensor_free(). They live here, not in core/, because
 * a device tensor's storage comes from the memory pool; a reference context's comes from the
 * host allocator, tracked so that a free can tell nnprim's blocks from foreign pointers. */
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#include "core/alloc.h"
#include "core/capture.h"
#include "core/ctx.h"
#include "core/error.h"
#include "core/ptrset.h"
#include "core/tensor_util.h"
#include "mem/mem.h"
#include "mem/tensor_mem.h"

static struct nn__ptrset host_tensors = NN__PTRSET_INIT;

int nn__host_tensor_owned(const void *p)
{
    return nn__ptrset_contains(&host_tensors, p);
}

/* The exported storage: a list through the exporters' nodes. */
static pthread_mutex_t export_lock = PTHREAD_MUTEX_INITIALIZER;
static struct nn__storage_export *export_head;
/* How many are on the list: every nn_tensor_free() asks, and without exports it need not lock. */
static atomic_int export_count;

int nn__storage_exported(const void *p)
{
    if (atomic_load_explicit(&export_count, memory_order_acquire) == 0) return 0;
    pthread_mutex_lock(&export_lock);
    struct nn__storage_export *e = export_head;
    while (e && e->data != p)
        e = e->next;
    pthread_mutex_unlock(&export_lock);
    return e != NULL;
}

void nn__storage_export_link(struct nn__storage_export *e, const void *data)
{
    pthread_mutex_lock(&export_lock);
    e->data = data;
    e->prev = NULL;
    e->next = export_head;
    if (export_head) export_head->prev = e;
    export_head = e;
    atomic_fetch_add_explicit(&export_count, 1, memory_order_release);
    pthread_mutex_unlock(&export_lock);
}

void nn__storage_export_unlink(struct nn__storage_export *e)
{
    pthread_mutex_lock(&export_lock);
    if (e->prev)
        e->prev->next = e->next;
    else
        export_head = e->next;
    if (e->next) e->next->prev = e->prev;
    atomic_fetch_sub_explicit(&export_count, 1, memory_order_release);
    pthread_mutex_unlock(&export_lock);
}

nn_status nn_tensor_empty(nn_ctx *ctx, nn_dtype dtype, int rank, const int64_t *dims,
                          nn_tensor *out)
{
    const char *fn = "nn_tensor_empty";
    if (!ctx) return NN__FAIL(NULL, NN_E_INVALID_ARG, "%s: ctx must not be NULL", fn);
    if (!out) return NN__FAIL(ctx, NN_E_INVALID_ARG, "%s: out must not be NULL", fn);
    memset(out, 0, sizeof *out);
    int64_t strides[NN_MAX_RANK];
    size_t bytes;
    NN__TRY(nn__tensor_check_shape(ctx, fn, dtype, rank, dims));
    NN__TRY(nn__tensor_layout(ctx, fn, dtype, rank, dims, NULL, strides, &bytes));
    void *data;
    if (nn__ctx_on_gpu(ctx)) {
        NN__TRY(nn__dev_alloc_for(ctx, fn, bytes, &data));
        nn__tensor_set(out, data, dtype, rank, dims, strides, NN_SPACE_DEVICE, ctx->device);
        return NN_OK;
    }
    data = nn__host_alloc(bytes);
    if (!data || nn__ptrset_add(&host_tensors, data) != 0) {
        nn__host_free(data);
        return NN__FAIL(ctx, NN_E_OOM_HOST, "%s: out of host memory for %zu bytes", fn, bytes);
    }
    nn__tensor_set(out, data, dtype, rank, dims, strides, NN_SPACE_HOST, -1);
    return NN_OK;
}

nn_status nn_tensor_free(nn_ctx *ctx, nn_tensor *t)
{
    const char *fn = "nn_tensor_free";
    if (!ctx) return NN__FAIL(NULL, NN_E_INVALID_ARG, "%s: ctx must not be NULL", fn);
    if (!t) return NN__FAIL(ctx, NN_E_INVALID_ARG, "%s: t must not be NULL", fn);
    if (!t->data) return NN_OK;
    if (t->flags & NN_TENSOR_BORROWED)
        return NN__FAIL(ctx, NN_E_BAD_POINTER,
                        "%s: t is a borrowed view (t.flags has NN_TENSOR_BORROWED: made by "
                        "nn_tensor_wrap(), nn_rnn_weight_view() or a DLPack import); its memory "
                        "(%p) is its owner's to free",
                        fn, t->data);
    if (nn__storage_exported(t->data))
        return NN__FAIL(ctx, NN_E_BAD_POINTER,
                        "%s: t.data %p belongs to a DLPack capsule now (nn_tensor_to_dlpack); "
                        "its deleter frees it",
                        fn, t->data);
    if (t->space == NN_SPACE_DEVICE) {
        if (!nn__ctx_on_gpu(ctx) || t->device != ctx->device)
            return NN__FAIL(ctx, NN_E_MEMSPACE,
                            "%s: t is device memory of device %d; free it with a cuDNN context "
                            "of that device",
                            fn, t->device);
        NN__TRY(nn__dev_free_for(ctx, fn, t->data));
        nn__watch_freed(t->data);
    } else if (t->space == NN_SPACE_HOST) {
        if (!nn__ptrset_remove(&host_tensors, t->data))
            return NN__FAIL(ctx, NN_E_BAD_POINTER,
                            "%s: t.data %p was not allocated by nn_tensor_empty() or was already "
                            "freed",
                            fn, t->data);
        nn__host_free(t->data);
    } else {
        return NN__FAIL(ctx, NN_E_INVALID_ARG,
                        "%s: t.space must be NN_SPACE_HOST or NN_SPACE_DEVICE, got %d", fn,
                        (int)t->space);
    }
    t->data = NULL;
    return NN_OK;
}

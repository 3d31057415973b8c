/* Catalogue rows: who owns what across DLPack import, export and nn_tensor_free (dlpack.h). A view
 * imported from a capsule is marked NN_TENSOR_BORROWED and is never freed or exported by nnprim,
 * whatever memory the capsule's data is: the caller's, a live tensor's pool storage (of this or
 * another context), a freed tensor's, or a capsule nnprim exported. Each row's call is the one
 * that must be refused (or, for edge rows, succeed); the rest of the row checks that the memory
 * is still its owner's, freed exactly once by that owner, and that nnprim never calls an
 * imported capsule's deleter. The ASan build checks that nothing leaks or is freed twice. */
#include <string.h>

#include "nn_config.h"

#include "catalogue.h"
#include "core/alloc.h"

#if NN_HAVE_DLPACK

#include <dlpack/dlpack.h>

#define CALL(fname) static nn_status fname(struct cat *c)

/* A capsule made by hand over memory the row chooses; its deleter only counts. */
struct hand {
    DLManagedTensor m;
    int64_t shape[NN_MAX_RANK];
};

static int hand_deleted;

static void hand_delete(DLManagedTensor *self)
{
    (void)self;
    hand_deleted++;
}

/* A capsule over t's memory, dims and dtype (f32), on the device the context computes on. */
static void hand_over(struct cat *c, struct hand *h, const nn_tensor *t)
{
    memset(h, 0, sizeof *h);
    h->m.dl_tensor.data = t->data;
    h->m.dl_tensor.device.device_type = c->gpu ? kDLCUDA : kDLCPU;
    h->m.dl_tensor.device.device_id = c->gpu ? t->device : 0;
    h->m.dl_tensor.ndim = t->rank;
    h->m.dl_tensor.dtype.code = kDLFloat;
    h->m.dl_tensor.dtype.bits = 32;
    h->m.dl_tensor.dtype.lanes = 1;
    memcpy(h->shape, t->dims, (size_t)t->rank * sizeof t->dims[0]);
    h->m.dl_tensor.shape = h->shape;
    h->m.deleter = hand_delete;
}

static nn_tensor import(struct cat *c, const DLManagedTensor *m)
{
    nn_tensor v;
    cr_assert_eq(nn_tensor_from_dlpack(c->ctx, m, &v), NN_OK, "import: %s",
                 nn_last_error()->message);
    cr_assert_eq(v.flags, NN_TENSOR_BORROWED, "an imported view is marked");
    cr_assert_eq(nn_tensor_validate(&v, "v"), NN_OK, "an imported view is a valid view");
    return v;
}

/* t's values, read now, equal want's (same numel, at most 128). */
static void same_values(struct cat *c, const nn_tensor *t, const double *want)
{
    double got[128];
    int64_t n = nn_tensor_numel(t);
    cr_assert_leq(n, 128);
    cat_read(c, t, got);
    for (int64_t i = 0; i < n; i++)
        cr_assert_eq(got[i], want[i], "[%lld] = %g, expected %g: the memory changed", (long long)i,
                     got[i], want[i]);
}

/* What nnprim holds now: its live host blocks (capsules, and a reference context's tensor
 * storage) and, on a cuDNN context, the blocks its device pool has handed out. Equal counts
 * before a tensor is made and after its capsule's deleter ran: freed, and only once (a second
 * free of the same block would be refused or caught by ASan). */
struct held {
    long host;
    uint64_t blocks;
};

static struct held held_now(struct cat *c)
{
    struct held h = {nn__host_alloc_live(), 0};
    if (c->gpu) {
        nn_mem_stats s;
        cr_assert_eq(nn_mem_get_stats(c->x.device, &s), NN_OK);
        h.blocks = s.alloc_count;
    }
    return h;
}

static void held_as(struct cat *c, struct held want, const char *what)
{
    struct held now = held_now(c);
    cr_assert(now.host == want.host && now.blocks == want.blocks,
              "%s: nnprim holds %ld host blocks and %llu pool blocks, expected %ld and %llu", what,
              now.host, (unsigned long long)now.blocks, want.host, (unsigned long long)want.blocks);
}

static const int64_t D[] = {2, 3};

/* What nnprim holds before a row makes its tensor: after one export, import and deleter of a
 * tensor of its own, so that what nnprim makes at the first use of those paths and keeps (the
 * table of exported storage, say) is counted before as well as after. */
static struct held held_before(struct cat *c)
{
    nn_tensor t = cat_tensor(c, NN_DTYPE_F32, 2, D, 6), v;
    DLManagedTensor *m;
    cr_assert_eq(nn_tensor_to_dlpack(c->ctx, &t, &m), NN_OK, "%s", nn_last_error()->message);
    cr_assert_eq(nn_tensor_from_dlpack(c->ctx, m, &v), NN_OK, "%s", nn_last_error()->message);
    m->deleter(m);
    return held_now(c);
}

/* The refusal of a free, and what it must leave: the view as it was. */
static nn_status free_refused(struct cat *c, nn_tensor *v)
{
    nn_tensor before = *v;
    struct held h = held_now(c);
    nn_status st = nn_tensor_free(c->ctx, v);
    cr_assert_eq(memcmp(&before, v, sizeof before), 0, "a refused free changes the view");
    held_as(c, h, "a refused free");
    return st;
}

/* ---- caller memory ---- */

CALL(caller_memory)
{
    nn_tensor t;
    void *mem = NULL;
    if (c->gpu) {
        cr_assert_eq(nn_mem_alloc(c->ctx, 6 * sizeof(float), &mem), NN_OK);
        cr_assert_eq(nn_tensor_wrap(c->ctx, mem, NN_DTYPE_F32, 2, D, NULL, &t), NN_OK);
    } else {
        t = cat_host_view(cat_host_block(c, 6 * sizeof(float)), NN_DTYPE_F32, 2, D);
    }
    cr_assert_eq(nn_tensor_fill_ints(c->ctx, &t, -3, 3, 5), NN_OK);
    double want[6];
    cat_read(c, &t, want);
    struct hand h;
    hand_over(c, &h, &t);
    nn_tensor v = import(c, &h.m);
    nn_status st = free_refused(c, &v);
    same_values(c, &t, want);
    cr_assert_eq(hand_deleted, 0, "nnprim never calls an imported capsule's deleter");
    if (mem) cr_assert_eq(nn_mem_free(c->ctx, mem), NN_OK);
    return st;
}

/* ---- a live tensor's storage (the bug: the free used to succeed and free it) ---- */

CALL(live_tensor_storage)
{
    double want[75];
    cat_read(c, &c->x, want);
    struct hand h;
    hand_over(c, &h, &c->x);
    nn_tensor v = import(c, &h.m);
    nn_status st = free_refused(c, &v);
    /* Still the tensor's: its values, and its own free (by the runner's teardown) succeeds. */
    same_values(c, &c->x, want);
    cr_assert_eq(hand_deleted, 0);
    return st;
}

CALL(live_tensor_export)
{
    struct hand h;
    hand_over(c, &h, &c->x);
    nn_tensor v = import(c, &h.m);
    DLManagedTensor *m = (DLManagedTensor *)&h;
    nn_status st = nn_tensor_to_dlpack(c->ctx, &v, &m);
    cr_assert_null(m, "out is NULL on failure");
    cr_assert_eq(v.data, c->x.data, "a refused export changes nothing");
    return st;
}

CALL(view_used_by_ops)
{
    /* The mark is no obstacle to computing: an imported x gives the same y as x. */
    struct hand h;
    hand_over(c, &h, &c->x);
    nn_tensor v = import(c, &h.m);
    double want[27], got[27];
    cr_assert_eq(nn_conv_forward(c->ctx, &c->cp, &c->x, &c->w, &c->b, &c->y, NULL), NN_OK);
    cat_read(c, &c->y, want);
    cr_assert_eq(nn_tensor_fill_constant(c->ctx, &c->y, 0.0), NN_OK);
    nn_status st = nn_conv_forward(c->ctx, &c->cp, &v, &c->w, &c->b, &c->y, NULL);
    cat_read(c, &c->y, got);
    for (int i = 0; i < 27; i++)
        cr_assert_eq(got[i], want[i]);
    return st;
}

CALL(original_freed_first)
{
    /* dlpack.h: the tensor still owns its storage; its free frees it (the view is invalid from
     * then on), and the view's free is still refused: no second free. */
    nn_tensor t = cat_tensor(c, NN_DTYPE_F32, 2, D, 3);
    struct hand h;
    hand_over(c, &h, &t);
    nn_tensor v = import(c, &h.m);
    cr_assert_eq(nn_tensor_free(c->ctx, &t), NN_OK, "%s", nn_last_error()->message);
    cr_assert_null(t.data);
    return free_refused(c, &v);
}

CALL(double_free)
{
    struct hand h;
    hand_over(c, &h, &c->w);
    nn_tensor v = import(c, &h.m);
    nn_tensor copy = v;
    cr_assert_eq(free_refused(c, &v), NN_E_BAD_POINTER);
    cr_assert_eq(free_refused(c, &copy), NN_E_BAD_POINTER, "a copy of the view keeps the mark");
    cr_assert_eq(hand_deleted, 0);
    return free_refused(c, &v);
}

/* ---- another context's tensor ---- */

CALL(other_context_tensor)
{
    nn_ctx *o = cat_other_ctx(c);
    nn_tensor t;
    cr_assert_eq(nn_tensor_empty(o, NN_DTYPE_F32, 2, D, &t), NN_OK);
    cr_assert_eq(nn_tensor_fill_ints(o, &t, -3, 3, 9), NN_OK);
    cr_assert_eq(nn_ctx_synchronize(o), NN_OK, "the fill is on o's stream; reads are on c's");
    double want[6];
    cat_read(c, &t, want);
    struct hand h;
    hand_over(c, &h, &t);
    nn_tensor v = import(c, &h.m);
    nn_status st = free_refused(c, &v);
    nn_tensor v2 = v;
    cr_assert_eq(nn_tensor_free(o, &v2), NN_E_BAD_POINTER, "refused with its owner's context too");
    same_values(c, &t, want);
    cr_assert_eq(nn_tensor_free(o, &t), NN_OK, "the owner frees it, once");
    return st;
}

/* ---- a freed tensor's storage: refused without reading or freeing it ---- */

CALL(freed_storage)
{
    nn_tensor t = cat_tensor(c, NN_DTYPE_F32, 2, D, 4);
    nn_tensor stale = t;
    cr_assert_eq(nn_tensor_free(c->ctx, &t), NN_OK);
    struct hand h;
    hand_over(c, &h, &stale);
    nn_tensor v = import(c, &h.m); /* import trusts the capsule: nothing is looked up */
    return free_refused(c, &v);
}

/* ---- export, then import ---- */

/* The runner checks the record of the row's refused call, so the rows below make no failing call
 * after it: that the deleter freed the storage is the row deleter_freed's own call. */

CALL(export_import_free)
{
    struct held h0 = held_before(c);
    nn_tensor t = cat_tensor(c, NN_DTYPE_F32, 2, D, 6);
    nn_tensor orig = t;
    double want[6];
    cat_read(c, &t, want);
    DLManagedTensor *m;
    cr_assert_eq(nn_tensor_to_dlpack(c->ctx, &t, &m), NN_OK, "%s", nn_last_error()->message);
    cr_assert_null(t.data, "the capsule owns the storage");
    cr_assert_eq(nn_tensor_free(c->ctx, &t), NN_OK, "the emptied view frees nothing");
    nn_tensor v = import(c, m);
    cr_assert_eq(v.data, orig.data);
    nn_status st = free_refused(c, &v);
    same_values(c, &v, want);
    m->deleter(m);
    held_as(c, h0, "after the deleter");
    return st;
}

CALL(export_import_export)
{
    struct held h0 = held_before(c);
    nn_tensor t = cat_tensor(c, NN_DTYPE_F32, 2, D, 6);
    nn_tensor orig = t;
    DLManagedTensor *m, *m2 = NULL;
    cr_assert_eq(nn_tensor_to_dlpack(c->ctx, &t, &m), NN_OK);
    nn_tensor v = import(c, m);
    cr_assert_eq(v.data, orig.data);
    nn_status st = nn_tensor_to_dlpack(c->ctx, &v, &m2);
    cr_assert_null(m2);
    m->deleter(m);
    held_as(c, h0, "after the deleter");
    return st;
}

CALL(export_original_copy_free)
{
    /* A copy of the tensor's view made before the export: its free is refused while the capsule
     * lives (the capsule owns the storage), and the deleter frees it once. */
    struct held h0 = held_before(c);
    nn_tensor t = cat_tensor(c, NN_DTYPE_F32, 2, D, 6);
    nn_tensor copy = t;
    DLManagedTensor *m;
    cr_assert_eq(nn_tensor_to_dlpack(c->ctx, &t, &m), NN_OK);
    nn_status st = nn_tensor_free(c->ctx, &copy);
    cr_assert_not_null(copy.data, "a refused free changes nothing");
    m->deleter(m);
    held_as(c, h0, "after the deleter");
    return st;
}

CALL(deleter_freed)
{
    /* The storage of an exported and imported tensor is freed by the capsule's deleter, once:
     * afterwards a copy of the tensor's view (unmarked) is refused as freed memory. */
    struct held h0 = held_before(c);
    nn_tensor t = cat_tensor(c, NN_DTYPE_F32, 2, D, 6);
    nn_tensor orig = t;
    DLManagedTensor *m;
    cr_assert_eq(nn_tensor_to_dlpack(c->ctx, &t, &m), NN_OK);
    nn_tensor v = import(c, m);
    cr_assert_eq(free_refused(c, &v), NN_E_BAD_POINTER);
    m->deleter(m);
    held_as(c, h0, "after the deleter");
    return nn_tensor_free(c->ctx, &orig);
}

CALL(import_twice_deleter_once)
{
    /* Two imports of one exported capsule, both freed (refused), then the deleter: the storage
     * and the capsule are released once (ASan: no leak, no double free). */
    struct held h0 = held_before(c);
    nn_tensor t = cat_tensor(c, NN_DTYPE_F32, 2, D, 6);
    nn_tensor orig = t;
    DLManagedTensor *m;
    cr_assert_eq(nn_tensor_to_dlpack(c->ctx, &t, &m), NN_OK);
    nn_tensor a = import(c, m), b = import(c, m);
    cr_assert(a.data == orig.data && b.data == orig.data);
    cr_assert_eq(free_refused(c, &a), NN_E_BAD_POINTER);
    nn_status st = free_refused(c, &b);
    m->deleter(m);
    held_as(c, h0, "after the deleter");
    return st;
}

/* A wrapped view of a live tensor's storage is not the tensor: its export is refused, no capsule
 * is made, and the tensor frees its storage once, as before. */
CALL(export_wrapped_live)
{
    struct held h0 = held_before(c);
    nn_tensor t = cat_tensor(c, NN_DTYPE_F32, 2, D, 6), v;
    cr_assert_eq(nn_tensor_wrap(c->ctx, t.data, NN_DTYPE_F32, 2, t.dims, NULL, &v), NN_OK, "%s",
                 nn_last_error()->message);
    DLManagedTensor *m = NULL;
    nn_status st = nn_tensor_to_dlpack(c->ctx, &v, &m);
    cr_assert_null(m, "a refused export makes no capsule");
    cr_assert_eq(nn_tensor_free(c->ctx, &t), NN_OK, "the tensor still owns its storage");
    held_as(c, h0, "after the tensor's free");
    return st;
}

#define E  NN_E_BAD_POINTER
#define TF "nn_tensor_free"
#define TD "nn_tensor_to_dlpack"

static const struct cat_row rows[] = {
    ROW("import caller memory, free the view", TF, "t", E, caller_memory),
    ROW("import a live tensor's storage, free the view", TF, "t", E, live_tensor_storage),
    ROW("import a live tensor's storage, export the view", TD, "t", E, live_tensor_export),
    ROW("an imported view as an op's input (edge)", "nn_conv_forward", NULL, NN_OK,
        view_used_by_ops),
    ROW("free the original, then the imported view", TF, "t", E, original_freed_first),
    ROW("free an imported view twice (and a copy)", TF, "t", E, double_free),
    ROW("import another context's tensor, free the view", TF, "t", E, other_context_tensor),
    ROW("import a freed tensor's storage, free the view", TF, "t", E, freed_storage),
    ROW("export, import, free the view; the deleter frees", TF, "t", E, export_import_free),
    ROW("export, import, export the view again", TD, "t.data", E, export_import_export),
    ROW("export, free a copy of the original view", TF, "t.data", E, export_original_copy_free),
    ROW("export, import twice, free both; one deleter call", TF, "t", E, import_twice_deleter_once),
    /* The pool names the pointer, not the argument, on a cuDNN context. */
    ROW("after the deleter, the storage is freed (once)", TF, NULL, E, deleter_freed),
    ROW("export a wrapped view of a live tensor", TD, "t", E, export_wrapped_live),
};

#else /* !NN_HAVE_DLPACK */

static nn_status not_built(struct cat *c)
{
    nn_tensor v;
    return nn_tensor_from_dlpack(c->ctx, NULL, &v);
}

static const struct cat_row rows[] = {
    ROW("a build without dlpack.h", "nn_tensor_from_dlpack", NULL, NN_E_NOT_BUILT, not_built),
};

#endif

CAT_SUBJECT(dlpack, rows)

/* The cross-entropy's cache kind ("softmax xent scratch", id 8) is well formed: a cache takes it
 * beside the other families' kinds, keys round-trip through the field lists, range checks refuse
 * bad keys, and it is marked not persisted (device scratch: plan files never hold it). These run
 * without a GPU (nothing calls CUDA). On a GPU: a warm shape's calls create no cuDNN descriptor
 * (counted through the loader's function pointers) and give bitwise the first call's results, a
 * backward whose scratch was dropped makes none (it uses no cuDNN call), and a plan file saved
 * after a cross-entropy call holds no kind-8 record. */
#include <criterion/criterion.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gpu.h"
#include "nnprim/nnprim.h"

#include "conv/conv_graph_cudnn.h"
#include "core/alloc.h"
#include "core/cuda_load.h"
#include "cudnn/cache.h"
#include "linear/linear_internal.h"
#include "softmax/softmax_internal.h"

#define OK(call) cr_assert_eq((call), NN_OK, "%s: %s", #call, nn_last_error()->message)

Test(softmax_cache, kind_is_accepted_and_round_trips)
{
    const struct nn__cache_kind *const table[] = {&nn__conv_plan_kind, &nn__linear_matmul_kind,
                                                  &nn__softmax_xent_kind};
    struct nn__cache *c = NULL;
    cr_assert_eq(nn__cache_create(NULL, table, 3, 4, &c), NN_OK, "%s", nn_last_error()->message);
    const struct nn__cache_kind *k = &nn__softmax_xent_kind;
    cr_expect_eq(k->id, 8);
    cr_expect_eq(k->flags, NN__CACHE_KIND_NOT_PERSISTED);
    unsigned char key[256], back[256], enc[512];
    cr_assert_leq(k->key_size, sizeof key);
    memset(key, 0, sizeof key);
    cr_expect_not_null(k->key_invalid(key), "an all-zero key (dtype 0, sizes 0) is refused");
    size_t n = nn__field_list_encoded_size(k->key_fields);
    cr_assert_leq(n, sizeof enc);
    for (size_t i = 0; i < k->key_size; i++)
        key[i] = (unsigned char)(i * 29 + 3);
    nn__field_list_encode(k->key_fields, key, enc);
    memset(back, 0, sizeof back);
    nn__field_list_decode(k->key_fields, enc, back);
    cr_expect(nn__cache_key_equal(k, key, back), "a key decodes to itself");
    /* A valid key by the layout of softmax_cudnn.c: dtype, unused (int32), n, c, s (int64), the
     * settings. */
    memset(key, 0, sizeof key);
    int32_t *h = (int32_t *)key;
    h[0] = NN_DTYPE_BF16;
    int64_t *sizes = (int64_t *)(key + 8);
    sizes[0] = 64, sizes[1] = 10, sizes[2] = 1;
    cr_expect_null(k->key_invalid(key), "%s", k->key_invalid(key));
    sizes[1] = (int64_t)INT_MAX + 1;
    cr_expect_not_null(k->key_invalid(key), "C beyond int is refused");
    sizes[1] = 10;
    h[0] = 9;
    cr_expect_not_null(k->key_invalid(key), "an unknown dtype is refused");
    nn__cache_destroy(c);
}

/* ---------------------------------------------------------------------------------------------
 * GPU
 */

/* The cuDNN calls that create descriptors, counted: the loader's pointer of each (filled once
 * cuDNN is loaded) is pointed at a wrapper that counts and calls the library. */
static int created;
static cudnnStatus_t (*real_tensor)(cudnnTensorDescriptor_t *);
static cudnnStatus_t (*real_op)(cudnnOpTensorDescriptor_t *);
static cudnnStatus_t (*real_backend)(cudnnBackendDescriptorType_t, cudnnBackendDescriptor_t *);

static cudnnStatus_t count_tensor(cudnnTensorDescriptor_t *d)
{
    created++;
    return real_tensor(d);
}

static cudnnStatus_t count_op(cudnnOpTensorDescriptor_t *d)
{
    created++;
    return real_op(d);
}

static cudnnStatus_t count_backend(cudnnBackendDescriptorType_t t, cudnnBackendDescriptor_t *d)
{
    created++;
    return real_backend(t, d);
}

static void *loader_slot(const char *name)
{
    for (const struct nn__dl_symbol *s = nn__dl_symbols_cudnn; s->name; s++)
        if (strcmp(s->name, name) == 0) return s->slot;
    cr_assert_fail("the loader has no %s", name);
    return NULL;
}

/* on 1: count from now on; on 0: call the library directly again. */
static void count_descriptors(int on)
{
    cudnnStatus_t (**t)(cudnnTensorDescriptor_t *) = loader_slot("cudnnCreateTensorDescriptor");
    cudnnStatus_t (**o)(cudnnOpTensorDescriptor_t *) = loader_slot("cudnnCreateOpTensorDescriptor");
    cudnnStatus_t (**b)(cudnnBackendDescriptorType_t, cudnnBackendDescriptor_t *) =
        loader_slot("cudnnBackendCreateDescriptor");
    if (on) {
        cr_assert(nn__dl_ready(NN__DL_CUDNN), "cuDNN is loaded");
        real_tensor = *t, real_op = *o, real_backend = *b;
        *t = count_tensor, *o = count_op, *b = count_backend;
    } else {
        *t = real_tensor, *o = real_op, *b = real_backend;
    }
    created = 0;
}

enum { N = 8, C = 33, S = 3 };

struct step {
    float loss[N * S], dx[N * C * S];
};

struct xent_fixture {
    nn_ctx *g, *h;
    nn_tensor x, loss, dloss, dx;
    int64_t t[N * S];
};

static void fixture_init(struct xent_fixture *f)
{
    nn_settings st;
    nn_settings_from_env(&st);
    st.plan_cache_file = NULL; /* whatever NNPRIM_PLAN_CACHE says: no file loaded or saved */
    st.backend = NN_BACKEND_CUDNN;
    OK(nn_ctx_create(&f->g, &st));
    st.backend = NN_BACKEND_REF;
    OK(nn_ctx_create(&f->h, &st));
    const int64_t xd[] = {N, C, S}, ld[] = {N, S};
    OK(nn_tensor_empty(f->g, NN_DTYPE_F32, 3, xd, &f->x));
    OK(nn_tensor_empty(f->g, NN_DTYPE_F32, 3, xd, &f->dx));
    OK(nn_tensor_empty(f->g, NN_DTYPE_F32, 2, ld, &f->loss));
    OK(nn_tensor_empty(f->g, NN_DTYPE_F32, 2, ld, &f->dloss));
    OK(nn_tensor_fill_ints(f->g, &f->x, -4, 4, 11));
    OK(nn_tensor_fill_ints(f->g, &f->dloss, -2, 2, 12));
    for (int i = 0; i < N * S; i++)
        f->t[i] = (i * 7 + 2) % C;
}

static void fixture_fini(struct xent_fixture *f)
{
    nn_tensor *ts[] = {&f->x, &f->dx, &f->loss, &f->dloss};
    for (int i = 0; i < 4; i++)
        OK(nn_tensor_free(f->g, ts[i]));
    nn_ctx_destroy(f->g);
    nn_ctx_destroy(f->h);
}

static void to_host(struct xent_fixture *f, float *dst, const nn_tensor *src)
{
    nn_tensor v;
    OK(nn_tensor_wrap(f->h, dst, NN_DTYPE_F32, src->rank, src->dims, NULL, &v));
    OK(nn_tensor_copy(f->g, &v, src));
}

/* Forward (training) and backward; the plan cache cleared between them when clear is set, so
 * that backward finds no scratch. */
static void run_step(struct xent_fixture *f, int clear, struct step *out)
{
    nn_class_targets tg = {f->t, NN_INDEX_I64, {0, 0}};
    nn_softmax_cross_entropy_pullback *pb = NULL;
    OK(nn_softmax_cross_entropy_forward(f->g, &f->x, &tg, &f->loss, &pb));
    if (clear) OK(nn_plan_cache_clear(f->g));
    OK(nn_softmax_cross_entropy_backward(f->g, &pb, &f->dloss, &f->dx));
    to_host(f, out->loss, &f->loss);
    to_host(f, out->dx, &f->dx);
}

Test(softmax_cache_gpu, a_warm_shape_creates_no_descriptor)
{
    NN_REQUIRE_GPU();
    struct xent_fixture f;
    fixture_init(&f);
    static struct step cold, warm, remade;
    run_step(&f, 0, &cold);
    run_step(&f, 0, &warm); /* the pool and the handle warm too */

    nn_class_targets tg = {f.t, NN_INDEX_I64, {0, 0}};
    nn_softmax_cross_entropy_pullback *pb = NULL;
    count_descriptors(1);
    (void)nn__host_alloc_fail_at(0);
    OK(nn_softmax_cross_entropy_forward(f.g, &f.x, &tg, &f.loss, NULL));
    long infer = nn__host_alloc_fail_at(0);
    OK(nn_softmax_cross_entropy_forward(f.g, &f.x, &tg, &f.loss, &pb));
    long train = nn__host_alloc_fail_at(0);
    OK(nn_softmax_cross_entropy_backward(f.g, &pb, &f.dloss, &f.dx));
    long back = nn__host_alloc_fail_at(0);
    int warm_created = created;
    count_descriptors(0);
    cr_expect_eq(warm_created, 0, "a warm forward and backward created %d descriptors",
                 warm_created);
    /* softmax.c's pullback record and host copy of the targets; training adds what the pullback
     * keeps of the backend's; the backend itself allocates nothing on a hit. */
    cr_expect_leq(infer, 2, "host allocations of a warm inference forward: %ld", infer);
    cr_expect_leq(train, 3, "host allocations of a warm training forward: %ld", train);
    cr_expect_eq(back, 0, "host allocations of a warm backward: %ld", back);
    cr_log_info("warm host allocations: inference %ld, training %ld, backward %ld", infer, train,
                back);

    /* Not vacuous: a backward whose scratch was dropped makes no descriptor (it is one kernel of
     * nnprim's) and inserts nothing: the next forward makes the scratch again (its 1 tensor
     * descriptor). */
    count_descriptors(1);
    run_step(&f, 1, &remade);
    int remade_created = created;
    nn_plan_cache_stats cs;
    OK(nn_plan_cache_get_stats(f.g, &cs));
    created = 0;
    OK(nn_softmax_cross_entropy_forward(f.g, &f.x, &tg, &f.loss, NULL));
    int forward_created = created;
    count_descriptors(0);
    cr_expect_eq(remade_created, 0, "a backward without its scratch created %d descriptors",
                 remade_created);
    cr_expect_eq(cs.entries, 0, "that backward left %llu cache entries",
                 (unsigned long long)cs.entries);
    cr_expect_eq(forward_created, 1, "the forward after it created %d descriptors",
                 forward_created);

    cr_expect_eq(memcmp(cold.loss, warm.loss, sizeof cold.loss), 0, "warm loss, bitwise");
    cr_expect_eq(memcmp(cold.dx, warm.dx, sizeof cold.dx), 0, "warm dx, bitwise");
    cr_expect_eq(memcmp(cold.loss, remade.loss, sizeof cold.loss), 0, "loss, bitwise");
    cr_expect_eq(memcmp(cold.dx, remade.dx, sizeof cold.dx), 0,
                 "dx of a backward without its scratch, bitwise");
    fixture_fini(&f);
}

static uint32_t le32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* The scratch is live in the cache when the context saves; the file has no record of kind 8
 * (read record by record, by the layout of src/cudnn/plan_file.c), and loads with none
 * skipped. */
Test(softmax_cache_gpu, a_saved_plan_file_holds_no_scratch)
{
    NN_REQUIRE_GPU();
    struct xent_fixture f;
    fixture_init(&f);
    static struct step one;
    run_step(&f, 0, &one);
    nn_plan_cache_stats st;
    OK(nn_plan_cache_get_stats(f.g, &st));
    cr_expect_geq(st.entries, 1, "the scratch is live");

    char dir[] = "/tmp/nnprim-xent-XXXXXX", path[64];
    cr_assert_not_null(mkdtemp(dir), "mkdtemp: %s", strerror(errno));
    snprintf(path, sizeof path, "%s/plans", dir);
    OK(nn_plan_cache_save(f.g, path));
    FILE *fp = fopen(path, "rb");
    cr_assert_not_null(fp);
    static unsigned char buf[1 << 20];
    size_t len = fread(buf, 1, sizeof buf, fp);
    fclose(fp);
    /* magic, version, cuDNN version, cc and SM count, then the GPU name and the record count */
    cr_assert_geq(len, 36 + 4);
    size_t pos = 36 + le32(buf + 32);
    cr_assert_leq(pos + 4, len);
    uint32_t count = le32(buf + pos);
    pos += 4;
    for (uint32_t i = 0; i < count; i++) {
        cr_assert_leq(pos + 8, len, "record %u", i);
        uint32_t body = le32(buf + pos), kind = le32(buf + pos + 4);
        cr_expect_neq(kind, 8, "record %u is the cross-entropy's scratch", i);
        pos += 4 + (size_t)body;
    }
    cr_expect_eq(pos + 8, len, "the records end at the checksum");

    nn_ctx *fresh = NULL;
    nn_settings s;
    nn_settings_from_env(&s);
    s.plan_cache_file = NULL;
    s.backend = NN_BACKEND_CUDNN;
    OK(nn_ctx_create(&fresh, &s));
    OK(nn_plan_cache_load(fresh, path));
    OK(nn_plan_cache_get_stats(fresh, &st));
    cr_expect_eq(st.records_skipped, 0);
    nn_ctx_destroy(fresh);
    unlink(path);
    snprintf(path, sizeof path, "%s/plans.lock", dir);
    unlink(path);
    rmdir(dir);
    fixture_fini(&f);
}

/* The linear family's cache kind ("linear matmul", id 6) is well formed: a cache takes it beside
 * conv's graph plans, keys round-trip through the field lists, and range checks refuse bad records
 * read from files. Runs without a GPU (nothing here calls cuBLASLt). */
#include <criterion/criterion.h>
#include <string.h>

#include "core/alloc.h"
#include "cudnn/cache.h"
#include "conv/conv_graph_cudnn.h"
#include "linear/linear_internal.h"

Test(linear_cache, kind_is_accepted_and_round_trips)
{
    const struct nn__cache_kind *const table[] = {&nn__conv_plan_kind, &nn__linear_matmul_kind};
    struct nn__cache *c = NULL;
    cr_assert_eq(nn__cache_create(NULL, table, 2, 4, &c), NN_OK, "%s", nn_last_error()->message);
    const struct nn__cache_kind *k = &nn__linear_matmul_kind;
    cr_expect_eq(k->id, 6);
    unsigned char key[256], back[256], rec[256];
    cr_assert_leq(k->key_size, sizeof key);
    cr_assert_leq(k->record_size, sizeof rec);
    memset(key, 0, sizeof key);
    memset(rec, 0, sizeof rec);
    cr_expect_not_null(k->key_invalid(key), "an all-zero key (sizes 0, align 0) is refused");
    unsigned char enc[512];
    size_t n = nn__field_list_encoded_size(k->key_fields);
    cr_assert_leq(n, sizeof enc);
    for (size_t i = 0; i < k->key_size; i++)
        key[i] = (unsigned char)(i * 37 + 1);
    nn__field_list_encode(k->key_fields, key, enc);
    memset(back, 0, sizeof back);
    nn__field_list_decode(k->key_fields, enc, back);
    cr_expect(nn__cache_key_equal(k, key, back), "a key decodes to itself");
    cr_expect_not_null(k->record_invalid(rec, 0), "epilogue 0 is not one nnprim asks for");
    void *live = nn__host_calloc(1, 256); /* an empty plan: destroy releases only the host block */
    cr_assert_not_null(live);
    /* A valid key and record, by the layouts of linear_cublaslt.c: key = op, dtype, epilogue,
     * align (int32), m, in, out (int64), the settings; record = 8 algorithm words, workspace,
     * epilogue. */
    memset(key, 0, sizeof key);
    int32_t *h = (int32_t *)key;
    h[1] = NN_DTYPE_F32;
    h[2] = 1;   /* epilogue DEFAULT */
    h[3] = 256; /* align */
    int64_t *sizes = (int64_t *)(key + 16);
    sizes[0] = sizes[1] = sizes[2] = 8;
    cr_expect_null(k->key_invalid(key), "%s", k->key_invalid(key));
    int32_t epi = 1;
    memcpy(rec + 72, &epi, sizeof epi);
    cr_expect_null(k->record_invalid(rec, 0), "%s", k->record_invalid(rec, 0));
    cr_assert_eq(nn__cache_insert(NULL, c, k->id, key, rec, NULL, 0, live), NN_OK, "%s",
                 nn_last_error()->message);
    cr_expect_eq(nn__cache_lookup(c, k->id, key, NULL), live);
    nn__cache_destroy(c);
}

/* The cross-entropy's cache kind ("softmax xent scratch", id 8) is well formed: a cache takes it
 * beside the other families' kinds, keys round-trip through the field lists, range checks refuse
 * bad keys, and it is marked not persisted (device scratch: plan files never hold it). Runs
 * without a GPU (nothing here calls CUDA). */
#include <criterion/criterion.h>
#include <limits.h>
#include <string.h>

#include "conv/conv_graph_cudnn.h"
#include "cudnn/cache.h"
#include "linear/linear_internal.h"
#include "softmax/softmax_internal.h"

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

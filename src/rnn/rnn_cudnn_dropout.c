/* The cuDNN recurrent path: the dropout states, one cache entry per context and (probability,
 * seed). */
#include <string.h>

#include "rnn/rnn_cudnn_internal.h"

void nn__rnn_cudnn_states_unref(struct drop_states *d)
{
    if (!d || --d->refs > 0) return;
    nn__cudnn_shared_release(d->ctx);
    nn__dev_free(d->ctx, d->ptr);
    nn__host_free(d);
}

struct drop_key {
    double dropout;
    uint64_t seed;
    struct nn__cache_settings s;
};

static const struct nn__field drop_key_fields[] = {
    NN__FIELD(struct drop_key, dropout, NN__FIELD_F64),
    NN__FIELD(struct drop_key, seed, NN__FIELD_U64),
    NN__CACHE_SETTINGS_FIELDS(struct drop_key, s),
    NN__FIELD_END,
};

/* Nothing to rebuild from: the state is made from the key. */
struct drop_record {
    int32_t unused[2];
};

static const struct nn__field drop_record_fields[] = {
    NN__FIELD(struct drop_record, unused, NN__FIELD_I32),
    NN__FIELD_END,
};

static const char *drop_key_invalid(const void *key)
{
    const struct drop_key *k = key;
    if (!(k->dropout > 0 && k->dropout < 1)) return "dropout";
    return nn__cache_settings_invalid(&k->s);
}

static void drop_destroy(void *live)
{
    nn__rnn_cudnn_states_unref(live);
}

const struct nn__cache_kind nn__rnn_cudnn_dropout_kind = {
    .id = NN__RNN_CUDNN_DROPOUT_KIND_ID,
    .name = "rnn dropout state",
    .key_size = sizeof(struct drop_key),
    .key_fields = drop_key_fields,
    .record_size = sizeof(struct drop_record),
    .record_fields = drop_record_fields,
    .key_invalid = drop_key_invalid,
    .destroy = drop_destroy,
    /* per-process random state: a file's record of it would rebuild nothing */
    .flags = NN__CACHE_KIND_NOT_PERSISTED,
};

/* The context's state for (dropout, seed), made and initialised on first use. */
nn_status nn__rnn_cudnn_dropout_states(struct nn_ctx *ctx, cudnnHandle_t h, double dropout,
                                       uint64_t seed, struct drop_states **out)
{
    struct nn__cache *c = nn__cudnn_plan_cache(ctx);
    struct drop_key k;
    memset(&k, 0, sizeof k);
    k.dropout = dropout;
    k.seed = seed;
    nn__cache_settings_fill(ctx, &k.s);
    struct drop_states *d = nn__cache_lookup(c, NN__RNN_CUDNN_DROPOUT_KIND_ID, &k, NULL);
    if (d) {
        *out = d;
        return NN_OK;
    }
    NN__TRY(nn__capture_no_build(ctx, "nn_rnn_forward", "the dropout state of this seed"));
    d = nn__host_calloc(1, sizeof *d);
    if (!d) return NN__FAIL(ctx, NN_E_OOM_HOST, "nn_rnn_forward: out of host memory");
    d->refs = 1;
    d->ctx = ctx;
    cudnnDropoutDescriptor_t init = NULL;
    nn_status st = nn__cudnn_DropoutGetStatesSize(ctx, h, &d->bytes);
    if (st == NN_OK) st = nn__dev_alloc(ctx, d->bytes, &d->ptr);
    if (st == NN_OK) st = nn__cudnn_CreateDropoutDescriptor(ctx, &init);
    if (st == NN_OK)
        st = nn__cudnn_SetDropoutDescriptor(ctx, init, h, (float)dropout, d->ptr, d->bytes, seed);
    if (init) cudnnDestroyDropoutDescriptor(init);
    struct drop_record rec = {{0, 0}};
    if (st == NN_OK)
        st = nn__cache_insert(ctx, c, NN__RNN_CUDNN_DROPOUT_KIND_ID, &k, &rec, NULL, 0, d);
    if (st != NN_OK) {
        nn__rnn_cudnn_states_unref(d);
        return st;
    }
    *out = d;
    return NN_OK;
}

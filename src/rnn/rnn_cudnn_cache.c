/* The cuDNN recurrent path: a shape's cache entry (key, record, live object), built on a miss
 * and found on a hit, and the records read back for tests. */
#include <limits.h>
#include <string.h>

#include "rnn/rnn_cudnn_internal.h"

/* ---------------------------------------------------------------------------------------------
 * The cache entry: key, record, live object
 */

static const struct nn__field key_fields[] = {
    NN__FIELD(struct rnn_key, cell, NN__FIELD_I32),
    NN__FIELD(struct rnn_key, bias_mode, NN__FIELD_I32),
    NN__FIELD(struct rnn_key, input_mode, NN__FIELD_I32),
    NN__FIELD(struct rnn_key, layout, NN__FIELD_I32),
    NN__FIELD(struct rnn_key, dirs, NN__FIELD_I32),
    NN__FIELD(struct rnn_key, dtype, NN__FIELD_I32),
    NN__FIELD(struct rnn_key, clip_enabled, NN__FIELD_I32),
    NN__FIELD(struct rnn_key, lengths_kind, NN__FIELD_I32),
    NN__FIELD(struct rnn_key, t, NN__FIELD_I64),
    NN__FIELD(struct rnn_key, n, NN__FIELD_I64),
    NN__FIELD(struct rnn_key, input, NN__FIELD_I64),
    NN__FIELD(struct rnn_key, hidden, NN__FIELD_I64),
    NN__FIELD(struct rnn_key, proj, NN__FIELD_I64),
    NN__FIELD(struct rnn_key, layers, NN__FIELD_I64),
    NN__FIELD(struct rnn_key, dropout, NN__FIELD_F64),
    NN__FIELD(struct rnn_key, clip_lo, NN__FIELD_F64),
    NN__FIELD(struct rnn_key, clip_hi, NN__FIELD_F64),
    NN__FIELD(struct rnn_key, dropout_seed, NN__FIELD_U64),
    NN__CACHE_SETTINGS_FIELDS(struct rnn_key, s),
    NN__FIELD_END,
};

static const struct nn__field record_fields[] = {
    NN__FIELD(struct rnn_record, algo, NN__FIELD_I32),
    NN__FIELD(struct rnn_record, flags, NN__FIELD_I32),
    NN__FIELD_END,
};

static int fits_int(int64_t v)
{
    return v >= 0 && v <= INT_MAX;
}

static const char *key_invalid(const void *key)
{
    const struct rnn_key *k = key;
    if (k->cell < NN_RNN_RELU || k->cell > NN_RNN_GRU) return "cell";
    if (k->bias_mode < NN_RNN_BIAS_NONE || k->bias_mode > NN_RNN_BIAS_DOUBLE) return "bias_mode";
    if (k->input_mode != NN_RNN_INPUT_LINEAR && k->input_mode != NN_RNN_INPUT_SKIP)
        return "input_mode";
    if (k->layout != NN_RNN_SEQ_MAJOR && k->layout != NN_RNN_BATCH_MAJOR) return "layout";
    if (k->dirs != 1 && k->dirs != 2) return "dirs";
    if (nn_dtype_size((nn_dtype)k->dtype) == 0) return "dtype";
    if (k->clip_enabled & ~1) return "clip_enabled";
    if (k->lengths_kind < NN__RNN_LENGTHS_FULL || k->lengths_kind > NN__RNN_LENGTHS_SHORT)
        return "lengths_kind";
    if (!fits_int(k->t) || !fits_int(k->n) || k->input < 1 || k->hidden < 1 || k->proj < 0 ||
        k->proj >= k->hidden || k->layers < 1 || !fits_int(k->input) || !fits_int(k->hidden) ||
        !fits_int(k->layers))
        return "sizes";
    if (!(k->dropout >= 0 && k->dropout < 1)) return "dropout";
    return nn__cache_settings_invalid(&k->s);
}

static const char *record_invalid(const void *record, uint32_t blob_len)
{
    const struct rnn_record *r = record;
    if (blob_len) return "blob";
    if (r->algo != CUDNN_RNN_ALGO_STANDARD && r->algo != CUDNN_RNN_ALGO_PERSIST_STATIC &&
        r->algo != CUDNN_RNN_ALGO_PERSIST_DYNAMIC &&
        r->algo != CUDNN_RNN_ALGO_PERSIST_STATIC_SMALL_H)
        return "algo";
    if (r->flags & ~NN__RNN_REC_ALL) return "flags";
    return NULL;
}

void nn__rnn_cudnn_live_destroy(void *p)
{
    struct rnn_live *e = p;
    if (!e) return;
    /* The slots and staging may be freed on another stream than their last use. */
    nn__cudnn_shared_release(e->ctx);
    nn__rnn_cudnn_drop_graphs(e, U_INFER);
    nn__rnn_cudnn_drop_graphs(e, U_TRAIN);
    for (int i = 0; i < e->nslots; i++) {
        e->slots[i].rs->owner = NULL;
        nn__rnn_cudnn_reserve_unref(e->slots[i].rs);
    }
    if (e->st.base) nn__dev_free(e->ctx, e->st.base);
    for (int u = 0; u < 2; u++)
        for (int i = 0; i < 2; i++)
            if (e->trial[u].ev[i]) cudaEventDestroy(e->trial[u].ev[i]);
    if (e->xd) cudnnDestroyRNNDataDescriptor(e->xd);
    if (e->yd) cudnnDestroyRNNDataDescriptor(e->yd);
    if (e->hd) cudnnDestroyTensorDescriptor(e->hd);
    if (e->cd) cudnnDestroyTensorDescriptor(e->cd);
    if (e->rnn) cudnnDestroyRNNDescriptor(e->rnn);
    if (e->drop) cudnnDestroyDropoutDescriptor(e->drop);
    nn__rnn_cudnn_states_unref(e->states);
    nn__host_free(e->offsets);
    nn__host_free(e->lengths);
    nn__host_free(e);
}

const struct nn__cache_kind nn__rnn_cudnn_kind = {
    .id = NN__RNN_CUDNN_KIND_ID,
    .name = "rnn descriptors",
    .key_size = sizeof(struct rnn_key),
    .key_fields = key_fields,
    .record_size = sizeof(struct rnn_record),
    .record_fields = record_fields,
    .key_invalid = key_invalid,
    .record_invalid = record_invalid,
    .destroy = nn__rnn_cudnn_live_destroy,
    .loaded = nn__rnn_cudnn_prepare_loaded,
};

void nn__rnn_cudnn_key_of(struct nn_ctx *ctx, const struct nn__rnn_problem *p, int with_data,
                          struct rnn_key *k)
{
    memset(k, 0, sizeof *k);
    k->cell = p->cell;
    k->bias_mode = p->bias_mode;
    k->input_mode = p->input_mode;
    k->dirs = p->dirs;
    k->dtype = p->dtype;
    k->input = p->input;
    k->hidden = p->hidden;
    k->proj = p->proj;
    k->layers = p->layers;
    k->clip_enabled = p->clip_enabled;
    k->clip_lo = p->clip_lo;
    k->clip_hi = p->clip_hi;
    if (with_data) {
        k->layout = p->layout;
        k->t = p->t;
        k->n = p->n;
        k->lengths_kind = p->lengths_kind;
        k->dropout = p->dropout;
        k->dropout_seed = p->dropout > 0 ? p->dropout_seed : 0;
    }
    nn__cache_settings_fill(ctx, &k->s);
}

/* The shape's entry, built on a miss: from a known record's algorithm when the plan file has one,
 * else timed under autotune (full lengths, no projection, no dropout: what the persistent
 * algorithms run, and no random state consumed), else the heuristic's algorithm. with_data 0: a
 * descriptor-only entry for weight queries. */
nn_status nn__rnn_cudnn_entry_get(struct nn_ctx *ctx, const struct nn__rnn_problem *p,
                                  int with_data, struct nn__rnn_note *note, struct rnn_live **out)
{
    struct nn__cache *c = nn__cudnn_plan_cache(ctx);
    struct rnn_key k;
    nn__rnn_cudnn_key_of(ctx, p, with_data, &k);
    struct rnn_live *e = nn__cache_lookup(c, NN__RNN_CUDNN_KIND_ID, &k, NULL);
    if (e) {
        nn__rnn_note_cache(note, e->prepared ? "prepared" : "hit");
        e->prepared = 0;
        nn__rnn_cudnn_note(e, 0, note);
        *out = e;
        return NN_OK;
    }
    NN__TRY(nn__capture_no_build(ctx, NULL, "the descriptors of this recurrent shape"));
    const struct rnn_record *known = nn__cache_lookup_known(c, NN__RNN_CUDNN_KIND_ID, &k, NULL);
    struct rnn_record rec = {CUDNN_RNN_ALGO_STANDARD, 0};
    nn_status st;
    if (known &&
        (known->algo == CUDNN_RNN_ALGO_STANDARD || k.lengths_kind == NN__RNN_LENGTHS_FULL)) {
        rec = *known;
        st = nn__rnn_cudnn_build(ctx, &k, p, &rec, &e);
        if (st == NN_OK) {
            nn__cache_count(c, NN__PC_REBUILT);
            nn__rnn_note_cache(note, "rebuilt");
        } else {
            (void)cudaGetLastError();
            nn__cache_drop_known(c, NN__RNN_CUDNN_KIND_ID, &k);
            if (rec.algo != CUDNN_RNN_ALGO_STANDARD) rec.flags |= NN__RNN_REC_PERSIST_REFUSED;
            rec.algo = CUDNN_RNN_ALGO_STANDARD;
            st = nn__rnn_cudnn_build(ctx, &k, p, &rec, &e);
        }
    } else if (with_data && ctx->settings.tuning == NN_TUNING_AUTOTUNE &&
               k.lengths_kind == NN__RNN_LENGTHS_FULL && !k.proj &&
               !(k.dropout > 0 && k.layers > 1)) {
        st = nn__rnn_cudnn_tune(ctx, &k, p, &rec, note, &e);
    } else {
        st = nn__rnn_cudnn_build_heuristic(ctx, &k, p, &rec, &e);
    }
    NN__TRY(st);
    nn__rnn_note_cache(note, "heuristic");
    st = nn__cache_insert(ctx, c, NN__RNN_CUDNN_KIND_ID, &k, &rec, NULL, 0, e);
    if (st != NN_OK) {
        nn__rnn_cudnn_live_destroy(e);
        return st;
    }
    nn__rnn_cudnn_note(e, 0, note);
    *out = e;
    return NN_OK;
}

/* Tests read the records back (live ones first): kind 4 records of shapes with data. */
struct records_arg {
    int32_t *algo, *flags;
    int n, cap;
};

static int visit_record(void *arg, const struct nn__cache_kind *kind, const void *key,
                        const struct nn__cache_view *view)
{
    struct records_arg *a = arg;
    const struct rnn_key *k = key;
    const struct rnn_record *r = view->record;
    if (kind->id != NN__RNN_CUDNN_KIND_ID || k->n == 0) return 0;
    if (a->n < a->cap) a->algo[a->n] = r->algo, a->flags[a->n] = r->flags;
    a->n++;
    return 0;
}

int nn__rnn_cudnn_records(struct nn_ctx *ctx, int32_t *algo, int32_t *flags, int cap)
{
    struct records_arg a = {algo, flags, 0, cap};
    nn__cache_visit(nn__cudnn_plan_cache(ctx), visit_record, &a);
    return a.n;
}

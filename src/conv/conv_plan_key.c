/* Conv's plan-cache key; see conv_plan_key.h. */
#include <math.h>
#include <string.h>

#include "conv/conv_internal.h"
#include "conv/conv_plan_key.h"
#include "nnprim/context.h"

/* ---------------------------------------------------------------------------------------------
 * The key (kind 7)
 */

#define KEY_TENSOR_FIELDS(i)                                                                       \
    NN__FIELD(struct nn__conv_key, t[i].align, NN__FIELD_I32),                                     \
        NN__FIELD(struct nn__conv_key, t[i].nhwc, NN__FIELD_I32),                                  \
        NN__FIELD(struct nn__conv_key, t[i].dims, NN__FIELD_I64)

/* In file order. Every entry of the arrays takes part: keys are zeroed before they are filled. */
const struct nn__field nn__conv_key_fields[] = {
    NN__FIELD(struct nn__conv_key, pass, NN__FIELD_I32),
    NN__FIELD(struct nn__conv_key, dtype, NN__FIELD_I32),
    NN__FIELD(struct nn__conv_key, spatial_rank, NN__FIELD_I32),
    NN__FIELD(struct nn__conv_key, mode, NN__FIELD_I32),
    NN__FIELD(struct nn__conv_key, relu, NN__FIELD_I32),
    NN__FIELD(struct nn__conv_key, flags, NN__FIELD_I32),
    NN__FIELD(struct nn__conv_key, groups, NN__FIELD_I64),
    NN__FIELD(struct nn__conv_key, stride, NN__FIELD_I64),
    NN__FIELD(struct nn__conv_key, dilation, NN__FIELD_I64),
    NN__FIELD(struct nn__conv_key, pad_lo, NN__FIELD_I64),
    NN__FIELD(struct nn__conv_key, pad_hi, NN__FIELD_I64),
    NN__FIELD(struct nn__conv_key, alpha, NN__FIELD_F64),
    NN__FIELD(struct nn__conv_key, beta, NN__FIELD_F64),
    NN__CACHE_SETTINGS_FIELDS(struct nn__conv_key, s),
    KEY_TENSOR_FIELDS(0),
    KEY_TENSOR_FIELDS(1),
    KEY_TENSOR_FIELDS(2),
    KEY_TENSOR_FIELDS(3),
    NN__FIELD_END,
};

int nn__conv_uid_of_slot(int32_t pass, int slot)
{
    static const int uids[][NN__CONV_SLOTS] = {
        [NN__CONV_PASS_FWD] = {NN__CONV_UID_X, NN__CONV_UID_W, NN__CONV_UID_Y, NN__CONV_UID_B},
        [NN__CONV_PASS_BWD_DATA] = {NN__CONV_UID_DX, NN__CONV_UID_W, NN__CONV_UID_DY, 0},
        [NN__CONV_PASS_BWD_FILTER] = {NN__CONV_UID_X, NN__CONV_UID_DW, NN__CONV_UID_DY, 0},
    };
    if (pass < NN__CONV_PASS_FWD || pass > NN__CONV_PASS_BWD_FILTER || slot < 0 ||
        slot >= NN__CONV_SLOTS)
        return 0;
    return uids[pass][slot];
}

int nn__conv_slot_of_uid(int32_t pass, int uid)
{
    for (int i = 0; uid > 0 && i < NN__CONV_SLOTS; i++)
        if (nn__conv_uid_of_slot(pass, i) == uid) return i;
    return -1;
}

/* Defined here rather than in conv_layout.c so that this file links without the op (the fuzzer
 * builds it alone). */
void nn__conv_layout_strides(int rank, const int64_t *dims, int channels_last, int64_t *strides)
{
    int64_t s = 1;
    if (!channels_last) {
        for (int i = rank - 1; i >= 0; i--) {
            strides[i] = s;
            s *= dims[i];
        }
        return;
    }
    strides[1] = 1;
    s = dims[1];
    for (int i = rank - 1; i >= 2; i--) {
        strides[i] = s;
        s *= dims[i];
    }
    strides[0] = s;
}

/* nn__conv_layout_strides(..., 1, ...) compared as it goes: an NCHW tensor (channel stride 1 only
 * when every spatial size is 1) is told apart at its first stride, on every call of the backend.
 * Dims of a file's key may be anything: a product past int64 is no layout. */
int32_t nn__conv_key_layout(int rank, const int64_t *dims, const int64_t *strides)
{
    if (strides[1] != 1) return 0;
    int64_t s = dims[1];
    for (int i = rank - 1; i >= 2; i--) {
        if (strides[i] != s || __builtin_mul_overflow(s, dims[i], &s)) return 0;
    }
    return strides[0] == s;
}

/* 1 if the element count of dims (each >= 1) fits int64, so that their strides do. */
static int dims_fit(int rank, const int64_t *dims)
{
    int64_t n = 1;
    for (int i = 0; i < rank; i++)
        if (__builtin_mul_overflow(n, dims[i], &n)) return 0;
    return 1;
}

void nn__conv_key_tensor_set(struct nn__conv_key_tensor *kt, int rank, const int64_t *dims,
                             const int64_t *strides, int64_t alignment)
{
    kt->align = (int32_t)alignment;
    kt->nhwc = nn__conv_key_layout(rank, dims, strides);
    for (int i = 0; i < rank; i++)
        kt->dims[i] = dims[i];
}

void nn__conv_key_strides(const struct nn__conv_key_tensor *kt, int rank, int64_t *strides)
{
    nn__conv_layout_strides(rank, kt->dims, kt->nhwc, strides);
}

/* The kind as the field-wise functions need it (they read id and fields only). */
static const struct nn__cache_kind key_kind = {.id = NN__CONV_KIND_ID,
                                               .key_size = sizeof(struct nn__conv_key),
                                               .key_fields = nn__conv_key_fields};

int nn__conv_key_equal(const struct nn__conv_key *a, const struct nn__conv_key *b)
{
    return nn__cache_key_equal(&key_kind, a, b);
}

uint64_t nn__conv_key_hash(const struct nn__conv_key *k)
{
    return nn__cache_key_hash(&key_kind, k);
}

static int is_dtype(int32_t d)
{
    return d >= NN_DTYPE_F32 && d <= NN_DTYPE_BF16;
}

static int is_alignment(int64_t a)
{
    return a == 1 || a == 2 || a == 4 || a == 8 || a == 16;
}

/* The slots each pass has (the bias is the forward's option). */
static unsigned slots_of(int32_t pass)
{
    unsigned slots = 0;
    for (int i = 0; i < NN__CONV_SLOTS; i++)
        if (nn__conv_uid_of_slot(pass, i)) slots |= 1u << i;
    return slots;
}

static const char *tensor_invalid(const struct nn__conv_key_tensor *t, int rank, int present)
{
    if (!present) {
        if (t->align || t->nhwc) return "an absent tensor's align or nhwc is not 0";
        for (int d = 0; d < NN__CONV_KEY_RANK_MAX; d++)
            if (t->dims[d]) return "an absent tensor's dims are not 0";
        return NULL;
    }
    if (!is_alignment(t->align)) return "a tensor's align is not 1, 2, 4, 8 or 16";
    if (t->nhwc != 0 && t->nhwc != 1) return "a tensor's nhwc is not 0 or 1";
    for (int d = 0; d < NN__CONV_KEY_RANK_MAX; d++) {
        if (d < rank && t->dims[d] < 1) return "a tensor's dim is < 1";
        if (d >= rank && t->dims[d]) return "a tensor's dims beyond its rank are not 0";
    }
    if (!dims_fit(rank, t->dims)) return "a tensor's element count overflows int64";
    return NULL;
}

const char *nn__conv_key_invalid(const struct nn__conv_key *k)
{
    if (k->pass < NN__CONV_PASS_FWD || k->pass > NN__CONV_PASS_BWD_FILTER)
        return "pass is not a conv pass";
    if (!is_dtype(k->dtype)) return "dtype is not an nn_dtype";
    if (k->spatial_rank < 1 || k->spatial_rank > NN__CONV_KEY_SPATIAL_MAX)
        return "spatial_rank is out of 1..3";
    if (k->mode != 0 && k->mode != 1) return "mode is not 0 or 1";
    if (k->relu != 0 && k->relu != 1) return "relu is not 0 or 1";
    if (k->flags & ~NN__CONV_KEY_PLAIN) return "flags has unknown bits";
    if (k->pass != NN__CONV_PASS_FWD && (k->relu || k->flags))
        return "relu or flags are set on a backward pass";
    if (k->groups < 1) return "groups is < 1";
    for (int i = 0; i < NN__CONV_KEY_SPATIAL_MAX; i++) {
        int used = i < k->spatial_rank;
        if (!used && (k->stride[i] || k->dilation[i] || k->pad_lo[i] || k->pad_hi[i]))
            return "a spatial parameter beyond spatial_rank is not 0";
        if (used && (k->stride[i] < 1 || k->dilation[i] < 1)) return "a stride or dilation is < 1";
        if (used && (k->pad_lo[i] < 0 || k->pad_hi[i] < 0)) return "a padding is negative";
    }
    if (!isfinite(k->alpha) || !isfinite(k->beta)) return "alpha or beta is not finite";
    const char *bad = nn__cache_settings_invalid(&k->s);
    if (bad) return bad;
    unsigned slots = slots_of(k->pass);
    for (int i = 0; i < NN__CONV_SLOTS; i++) {
        int present = k->t[i].align != 0;
        if (!present && i != NN__CONV_SLOT_BIAS && (slots >> i & 1u))
            return "a tensor the pass needs is absent";
        if (present && !(slots >> i & 1u)) return "a tensor the pass does not have is present";
        bad = tensor_invalid(&k->t[i], k->spatial_rank + 2, present);
        if (bad) return bad;
    }
    return NULL;
}

const char *nn__conv_kind_key_invalid(const void *key)
{
    return nn__conv_key_invalid(key);
}

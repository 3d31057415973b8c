/* Conv's plan-cache key and the import of its retired kind-1 layout; see conv_plan_key.h. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "conv/conv_internal.h"
#include "conv/conv_plan_key.h"
#include "cudnn/plan_file.h"
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

/* ---------------------------------------------------------------------------------------------
 * The kind-1 key
 */

#define V1_TENSOR_FIELDS(i)                                                                        \
    NN__FIELD(struct nn__conv_key_v1, t[i].rank, NN__FIELD_I32),                                   \
        NN__FIELD(struct nn__conv_key_v1, t[i].dtype, NN__FIELD_I32),                              \
        NN__FIELD(struct nn__conv_key_v1, t[i].alignment, NN__FIELD_I64),                          \
        NN__FIELD(struct nn__conv_key_v1, t[i].dims, NN__FIELD_I64),                               \
        NN__FIELD(struct nn__conv_key_v1, t[i].strides, NN__FIELD_I64)

const struct nn__field nn__conv_key_v1_fields[] = {
    NN__FIELD(struct nn__conv_key_v1, op, NN__FIELD_I32),
    NN__FIELD(struct nn__conv_key_v1, compute, NN__FIELD_I32),
    NN__FIELD(struct nn__conv_key_v1, math_mode, NN__FIELD_I32),
    NN__FIELD(struct nn__conv_key_v1, deterministic, NN__FIELD_I32),
    NN__FIELD(struct nn__conv_key_v1, workspace_cap, NN__FIELD_U64),
    V1_TENSOR_FIELDS(0),
    V1_TENSOR_FIELDS(1),
    V1_TENSOR_FIELDS(2),
    V1_TENSOR_FIELDS(3),
    V1_TENSOR_FIELDS(4),
    V1_TENSOR_FIELDS(5),
    V1_TENSOR_FIELDS(6),
    V1_TENSOR_FIELDS(7),
    NN__FIELD(struct nn__conv_key_v1, p.spatial_rank, NN__FIELD_I32),
    NN__FIELD(struct nn__conv_key_v1, p.groups, NN__FIELD_I32),
    NN__FIELD(struct nn__conv_key_v1, p.stride, NN__FIELD_I64),
    NN__FIELD(struct nn__conv_key_v1, p.dilation, NN__FIELD_I64),
    NN__FIELD(struct nn__conv_key_v1, p.pad_lo, NN__FIELD_I64),
    NN__FIELD(struct nn__conv_key_v1, p.pad_hi, NN__FIELD_I64),
    NN__FIELD(struct nn__conv_key_v1, p.window, NN__FIELD_I64),
    NN__FIELD(struct nn__conv_key_v1, p.mode, NN__FIELD_I32),
    NN__FIELD(struct nn__conv_key_v1, p.activation, NN__FIELD_I32),
    NN__FIELD(struct nn__conv_key_v1, p.pool_mode, NN__FIELD_I32),
    NN__FIELD(struct nn__conv_key_v1, p.flags, NN__FIELD_I32),
    NN__FIELD(struct nn__conv_key_v1, p.alpha, NN__FIELD_F64),
    NN__FIELD(struct nn__conv_key_v1, p.beta, NN__FIELD_F64),
    NN__FIELD_END,
};

const char *nn__conv_key_v1_invalid(const struct nn__conv_key_v1 *k)
{
    if (k->op < NN__CONV_V1_FWD || k->op >= NN__CONV_V1_OP_COUNT)
        return "op is not a known op kind";
    if (!is_dtype(k->compute)) return "compute is not an nn_dtype";
    if (k->math_mode != NN_MATH_STRICT_FP32 && k->math_mode != NN_MATH_TF32)
        return "math_mode is not an nn_math_mode";
    if (k->deterministic != 0 && k->deterministic != 1) return "deterministic is not 0 or 1";
    for (int i = 0; i < NN__CONV_V1_SLOTS; i++) {
        const struct nn__conv_v1_tensor *t = &k->t[i];
        if (t->rank < 0 || t->rank > NN__CONV_KEY_RANK_MAX)
            return "an operand's rank is out of 0..5";
        for (int d = t->rank; d < NN__CONV_KEY_RANK_MAX; d++)
            if (t->dims[d] || t->strides[d])
                return "an operand's entries beyond its rank are not 0";
        if (t->rank == 0) {
            if (t->dtype || t->alignment) return "an absent operand's dtype or alignment is not 0";
            continue;
        }
        if (!is_dtype(t->dtype)) return "an operand's dtype is not an nn_dtype";
        if (t->alignment < 0) return "an operand's alignment is negative";
        for (int d = 0; d < t->rank; d++) {
            if (t->dims[d] < 1) return "an operand's dim is < 1";
            if (t->strides[d] < 0) return "an operand's stride is negative";
        }
    }
    const struct nn__conv_v1_params *p = &k->p;
    if (p->spatial_rank < 0 || p->spatial_rank > NN__CONV_KEY_SPATIAL_MAX)
        return "params.spatial_rank is out of 0..3";
    if (p->groups < 0) return "params.groups is negative";
    if (!isfinite(p->alpha) || !isfinite(p->beta)) return "params.alpha or beta is not finite";
    for (int i = p->spatial_rank; i < NN__CONV_KEY_SPATIAL_MAX; i++)
        if (p->stride[i] || p->dilation[i] || p->pad_lo[i] || p->pad_hi[i] || p->window[i])
            return "a spatial parameter beyond spatial_rank is not 0";
    for (int i = 0; i < p->spatial_rank; i++)
        if (p->stride[i] < 0 || p->dilation[i] < 0 || p->pad_lo[i] < 0 || p->pad_hi[i] < 0 ||
            p->window[i] < 0)
            return "a spatial parameter is negative";
    return NULL;
}

static const char *v1_key_invalid(const void *key)
{
    return nn__conv_key_v1_invalid(key);
}

/* Kind 1's tensor as key tensor kt of a key of dtype and rank: 0 if it is none kind 7 holds
 * (another rank or dtype, an alignment cuDNN is never told, strides of neither packed layout). */
static int import_tensor(const struct nn__conv_v1_tensor *t, int32_t dtype, int rank,
                         struct nn__conv_key_tensor *kt)
{
    if (t->rank != rank || t->dtype != dtype || !is_alignment(t->alignment) ||
        !dims_fit(rank, t->dims))
        return 0;
    nn__conv_key_tensor_set(kt, rank, t->dims, t->strides, t->alignment);
    int64_t s[NN__CONV_KEY_RANK_MAX];
    nn__conv_key_strides(kt, rank, s);
    return memcmp(s, t->strides, (size_t)rank * sizeof *s) == 0;
}

/* Kind 1's slot i held the tensor of uid i + 1, and its ops 1..3 are kind 7's passes. */
_Static_assert(NN__CONV_V1_X == NN__CONV_UID_X - 1 && NN__CONV_V1_W == NN__CONV_UID_W - 1 &&
                   NN__CONV_V1_Y == NN__CONV_UID_Y - 1 && NN__CONV_V1_B == NN__CONV_UID_B - 1 &&
                   NN__CONV_V1_DX == NN__CONV_UID_DX - 1 && NN__CONV_V1_DW == NN__CONV_UID_DW - 1 &&
                   NN__CONV_V1_DY == NN__CONV_UID_DY - 1 && NN__CONV_V1_DB == NN__CONV_UID_DB - 1,
               "kind 1's slots are the uids less one");
_Static_assert((int)NN__CONV_V1_FWD == (int)NN__CONV_PASS_FWD &&
                   (int)NN__CONV_V1_BWD_DATA == (int)NN__CONV_PASS_BWD_DATA &&
                   (int)NN__CONV_V1_BWD_FILTER == (int)NN__CONV_PASS_BWD_FILTER,
               "kind 1's convolution ops are kind 7's passes");

/* Kind 1's slot of kind 7's slot i in a key of pass, or -1 for none. */
static int v1_slot_of(int32_t pass, int i)
{
    return nn__conv_uid_of_slot(pass, i) - 1;
}

int nn__conv_key_import(const struct nn__conv_key_v1 *old, struct nn__conv_key *k)
{
    memset(k, 0, sizeof *k);
    if (old->op < NN__CONV_V1_FWD || old->op > NN__CONV_V1_BWD_FILTER) return 0;
    const struct nn__conv_v1_params *p = &old->p;
    int32_t dtype = old->t[v1_slot_of(old->op, NN__CONV_SLOT_IN)].dtype;
    int32_t compute = dtype == NN_DTYPE_F64 ? NN_DTYPE_F64 : NN_DTYPE_F32;
    if (old->compute != compute || p->pool_mode || (p->flags & ~NN__CONV_KEY_PLAIN) ||
        (p->activation != 0 && p->activation != 1))
        return 0;
    k->pass = old->op;
    k->dtype = dtype;
    k->spatial_rank = p->spatial_rank;
    k->mode = p->mode;
    k->relu = p->activation;
    k->flags = p->flags;
    k->groups = p->groups;
    for (int i = 0; i < p->spatial_rank; i++) {
        if (p->window[i]) return 0;
        k->stride[i] = p->stride[i];
        k->dilation[i] = p->dilation[i];
        k->pad_lo[i] = p->pad_lo[i];
        k->pad_hi[i] = p->pad_hi[i];
    }
    k->alpha = p->alpha;
    k->beta = p->beta;
    k->s.math_mode = old->math_mode;
    k->s.deterministic = old->deterministic;
    k->s.workspace_cap = old->workspace_cap;
    unsigned taken = 0;
    for (int i = 0; i < NN__CONV_SLOTS; i++) {
        int from = v1_slot_of(old->op, i);
        if (from < 0 || (i == NN__CONV_SLOT_BIAS && !old->t[from].rank)) continue;
        taken |= 1u << from;
        if (!import_tensor(&old->t[from], dtype, p->spatial_rank + 2, &k->t[i])) return 0;
    }
    for (int i = 0; i < NN__CONV_V1_SLOTS; i++)
        if (old->t[i].rank && !(taken >> i & 1u)) return 0; /* a tensor kind 7 has no slot for */
    return nn__conv_key_invalid(k) == NULL;
}

static int v1_import(const void *old_key, void *key)
{
    return nn__conv_key_import(old_key, key);
}

/* ---------------------------------------------------------------------------------------------
 * Format 1 and 2 files: kind 1's key, each array only as far as its rank
 */

static int read_v2_tensor(struct nn__plan_reader *r, struct nn__conv_v1_tensor *t)
{
    if (!nn__plan_reader_i32_in(r, "key operand rank", 0, NN__CONV_KEY_RANK_MAX, &t->rank))
        return 0;
    if (t->rank == 0)
        return nn__plan_reader_i32_in(r, "key operand dtype", 0, 0, &t->dtype) &&
               nn__plan_reader_i64_min(r, "key operand alignment", 0, &t->alignment) &&
               (t->alignment == 0 ||
                nn__plan_reader_bad(r, nn__plan_reader_pos(r) - 8, "key operand alignment",
                                    "is nonzero for an absent operand"));
    if (!nn__plan_reader_i32_in(r, "key operand dtype", NN_DTYPE_F32, NN_DTYPE_BF16, &t->dtype) ||
        !nn__plan_reader_i64_min(r, "key operand alignment", 0, &t->alignment))
        return 0;
    for (int d = 0; d < t->rank; d++)
        if (!nn__plan_reader_i64_min(r, "key operand dim", 1, &t->dims[d]) ||
            !nn__plan_reader_i64_min(r, "key operand stride", 0, &t->strides[d]))
            return 0;
    return 1;
}

static int read_v2_key(struct nn__plan_reader *r, void *key)
{
    struct nn__conv_key_v1 *k = key;
    memset(k, 0, sizeof *k);
    if (!nn__plan_reader_i32_in(r, "key op", NN__CONV_V1_FWD, NN__CONV_V1_OP_COUNT - 1, &k->op) ||
        !nn__plan_reader_i32_in(r, "key compute", NN_DTYPE_F32, NN_DTYPE_BF16, &k->compute) ||
        !nn__plan_reader_i32_in(r, "key math_mode", NN_MATH_STRICT_FP32, NN_MATH_TF32,
                                &k->math_mode) ||
        !nn__plan_reader_i32_in(r, "key deterministic", 0, 1, &k->deterministic) ||
        !nn__plan_reader_u64(r, "key workspace_cap", &k->workspace_cap))
        return 0;
    for (int i = 0; i < NN__CONV_V1_SLOTS; i++)
        if (!read_v2_tensor(r, &k->t[i])) return 0;
    struct nn__conv_v1_params *p = &k->p;
    if (!nn__plan_reader_i32_in(r, "key spatial_rank", 0, NN__CONV_KEY_SPATIAL_MAX,
                                &p->spatial_rank) ||
        !nn__plan_reader_i32_in(r, "key groups", 0, INT32_MAX, &p->groups))
        return 0;
    for (int i = 0; i < p->spatial_rank; i++)
        if (!nn__plan_reader_i64_min(r, "key stride", 0, &p->stride[i]) ||
            !nn__plan_reader_i64_min(r, "key dilation", 0, &p->dilation[i]) ||
            !nn__plan_reader_i64_min(r, "key pad_lo", 0, &p->pad_lo[i]) ||
            !nn__plan_reader_i64_min(r, "key pad_hi", 0, &p->pad_hi[i]) ||
            !nn__plan_reader_i64_min(r, "key window", 0, &p->window[i]))
            return 0;
    return nn__plan_reader_i32(r, "key mode", &p->mode) &&
           nn__plan_reader_i32(r, "key activation", &p->activation) &&
           nn__plan_reader_i32(r, "key pool_mode", &p->pool_mode) &&
           nn__plan_reader_i32(r, "key flags", &p->flags) &&
           nn__plan_reader_f64_finite(r, "key alpha", &p->alpha) &&
           nn__plan_reader_f64_finite(r, "key beta", &p->beta);
}

const struct nn__cache_legacy nn__conv_kind_legacy = {
    .id = NN__CONV_KIND_V1_ID,
    .key_size = sizeof(struct nn__conv_key_v1),
    .key_fields = nn__conv_key_v1_fields,
    .key_invalid = v1_key_invalid,
    .read_v2_key = read_v2_key,
    .import = v1_import,
};

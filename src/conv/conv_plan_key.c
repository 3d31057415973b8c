/* Conv's plan-cache key; see conv_plan_key.h. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "conv/conv_plan_key.h"
#include "cudnn/plan_file.h"
#include "nnprim/context.h"

/* ---------------------------------------------------------------------------------------------
 * Keys
 */

void nn__plan_key_init(struct nn__plan_key *k)
{
    memset(k, 0, sizeof *k);
}

/* The key's fields, in file order. Every entry of the arrays takes part: nn__conv_plan_key_of
 * fills a key after nn__plan_key_init(), so entries a key does not use hold 0. */
#define KEY_TENSOR_FIELDS(i)                                                                       \
    NN__FIELD(struct nn__plan_key, t[i].rank, NN__FIELD_I32),                                      \
        NN__FIELD(struct nn__plan_key, t[i].dtype, NN__FIELD_I32),                                 \
        NN__FIELD(struct nn__plan_key, t[i].alignment, NN__FIELD_I64),                             \
        NN__FIELD(struct nn__plan_key, t[i].dims, NN__FIELD_I64),                                  \
        NN__FIELD(struct nn__plan_key, t[i].strides, NN__FIELD_I64)

const struct nn__field nn__plan_key_fields[] = {
    NN__FIELD(struct nn__plan_key, op, NN__FIELD_I32),
    NN__FIELD(struct nn__plan_key, compute, NN__FIELD_I32),
    NN__FIELD(struct nn__plan_key, math_mode, NN__FIELD_I32),
    NN__FIELD(struct nn__plan_key, deterministic, NN__FIELD_I32),
    NN__FIELD(struct nn__plan_key, workspace_cap, NN__FIELD_U64),
    KEY_TENSOR_FIELDS(0),
    KEY_TENSOR_FIELDS(1),
    KEY_TENSOR_FIELDS(2),
    KEY_TENSOR_FIELDS(3),
    KEY_TENSOR_FIELDS(4),
    KEY_TENSOR_FIELDS(5),
    KEY_TENSOR_FIELDS(6),
    KEY_TENSOR_FIELDS(7),
    NN__FIELD(struct nn__plan_key, p.spatial_rank, NN__FIELD_I32),
    NN__FIELD(struct nn__plan_key, p.groups, NN__FIELD_I32),
    NN__FIELD(struct nn__plan_key, p.stride, NN__FIELD_I64),
    NN__FIELD(struct nn__plan_key, p.dilation, NN__FIELD_I64),
    NN__FIELD(struct nn__plan_key, p.pad_lo, NN__FIELD_I64),
    NN__FIELD(struct nn__plan_key, p.pad_hi, NN__FIELD_I64),
    NN__FIELD(struct nn__plan_key, p.window, NN__FIELD_I64),
    NN__FIELD(struct nn__plan_key, p.mode, NN__FIELD_I32),
    NN__FIELD(struct nn__plan_key, p.activation, NN__FIELD_I32),
    NN__FIELD(struct nn__plan_key, p.pool_mode, NN__FIELD_I32),
    NN__FIELD(struct nn__plan_key, p.flags, NN__FIELD_I32),
    NN__FIELD(struct nn__plan_key, p.alpha, NN__FIELD_F64),
    NN__FIELD(struct nn__plan_key, p.beta, NN__FIELD_F64),
    NN__FIELD_END,
};

/* The kind as the field-wise functions need it (they read id and fields only). */
static const struct nn__cache_kind key_kind = {.id = NN__PLAN_KIND_ID,
                                               .key_size = sizeof(struct nn__plan_key),
                                               .key_fields = nn__plan_key_fields};

int nn__plan_key_equal(const struct nn__plan_key *a, const struct nn__plan_key *b)
{
    return nn__cache_key_equal(&key_kind, a, b);
}

uint64_t nn__plan_key_hash(const struct nn__plan_key *k)
{
    return nn__cache_key_hash(&key_kind, k);
}

static int is_dtype(int32_t d)
{
    return d >= NN_DTYPE_F32 && d <= NN_DTYPE_BF16;
}

const char *nn__plan_key_invalid(const struct nn__plan_key *k)
{
    if (k->op <= NN__OP_NONE || k->op >= NN__OP_KIND_COUNT) return "op is not a known op kind";
    if (!is_dtype(k->compute)) return "compute is not an nn_dtype";
    if (k->math_mode != NN_MATH_STRICT_FP32 && k->math_mode != NN_MATH_TF32)
        return "math_mode is not an nn_math_mode";
    if (k->deterministic != 0 && k->deterministic != 1) return "deterministic is not 0 or 1";
    for (int i = 0; i < NN__KEY_OPERANDS; i++) {
        const struct nn__key_tensor *t = &k->t[i];
        if (t->rank < 0 || t->rank > NN__KEY_RANK_MAX) return "an operand's rank is out of 0..5";
        /* Entries a key does not use are 0 (nn__plan_key_init()), as equality needs. */
        for (int d = t->rank; d < NN__KEY_RANK_MAX; d++)
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
    const struct nn__key_params *p = &k->p;
    if (p->spatial_rank < 0 || p->spatial_rank > NN__KEY_SPATIAL_MAX)
        return "params.spatial_rank is out of 0..3";
    if (p->groups < 0) return "params.groups is negative";
    if (!isfinite(p->alpha) || !isfinite(p->beta)) return "params.alpha or beta is not finite";
    for (int i = p->spatial_rank; i < NN__KEY_SPATIAL_MAX; i++)
        if (p->stride[i] || p->dilation[i] || p->pad_lo[i] || p->pad_hi[i] || p->window[i])
            return "a spatial parameter beyond spatial_rank is not 0";
    for (int i = 0; i < p->spatial_rank; i++)
        if (p->stride[i] < 0 || p->dilation[i] < 0 || p->pad_lo[i] < 0 || p->pad_hi[i] < 0 ||
            p->window[i] < 0)
            return "a spatial parameter is negative";
    return NULL;
}

const char *nn__plan_kind_key_invalid(const void *key)
{
    return nn__plan_key_invalid(key);
}

/* ---------------------------------------------------------------------------------------------
 * Format 1 and 2 files
 */

static int read_v2_tensor(struct nn__plan_reader *r, struct nn__key_tensor *t)
{
    if (!nn__plan_reader_i32_in(r, "key operand rank", 0, NN__KEY_RANK_MAX, &t->rank)) return 0;
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

int nn__plan_kind_read_v2_key(struct nn__plan_reader *r, void *key, int *skip)
{
    struct nn__plan_key *k = key;
    memset(k, 0, sizeof *k);
    *skip = 0;
    if (!nn__plan_reader_i32_in(r, "key op", NN__OP_NONE + 1, NN__OP_KIND_COUNT - 1, &k->op) ||
        !nn__plan_reader_i32_in(r, "key compute", NN_DTYPE_F32, NN_DTYPE_BF16, &k->compute) ||
        !nn__plan_reader_i32_in(r, "key math_mode", NN_MATH_STRICT_FP32, NN_MATH_TF32,
                                &k->math_mode) ||
        !nn__plan_reader_i32_in(r, "key deterministic", 0, 1, &k->deterministic) ||
        !nn__plan_reader_u64(r, "key workspace_cap", &k->workspace_cap))
        return 0;
    for (int i = 0; i < NN__KEY_OPERANDS; i++)
        if (!read_v2_tensor(r, &k->t[i])) return 0;
    struct nn__key_params *p = &k->p;
    if (!nn__plan_reader_i32_in(r, "key spatial_rank", 0, NN__KEY_SPATIAL_MAX, &p->spatial_rank) ||
        !nn__plan_reader_i32_in(r, "key groups", 0, INT32_MAX, &p->groups))
        return 0;
    for (int i = 0; i < p->spatial_rank; i++)
        if (!nn__plan_reader_i64_min(r, "key stride", 0, &p->stride[i]) ||
            !nn__plan_reader_i64_min(r, "key dilation", 0, &p->dilation[i]) ||
            !nn__plan_reader_i64_min(r, "key pad_lo", 0, &p->pad_lo[i]) ||
            !nn__plan_reader_i64_min(r, "key pad_hi", 0, &p->pad_hi[i]) ||
            !nn__plan_reader_i64_min(r, "key window", 0, &p->window[i]))
            return 0;
    if (!nn__plan_reader_i32(r, "key mode", &p->mode) ||
        !nn__plan_reader_i32(r, "key activation", &p->activation) ||
        !nn__plan_reader_i32(r, "key pool_mode", &p->pool_mode) ||
        !nn__plan_reader_i32(r, "key flags", &p->flags) ||
        !nn__plan_reader_f64_finite(r, "key alpha", &p->alpha) ||
        !nn__plan_reader_f64_finite(r, "key beta", &p->beta))
        return 0;
    *skip = k->op == NN__OP_POOL_FWD || k->op == NN__OP_POOL_BWD;
    return 1;
}

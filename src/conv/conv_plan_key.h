/* Conv's plan-cache key (cache kind 1, written to plan files since format 1): every tensor of a
 * conv graph by role, the conv parameters, alpha/beta and the context settings that change the
 * plan, as plain values; its field list, range checks and the key layout of format 1 and 2 plan
 * files; and conv's graph-plan cache kind made of it and the cuDNN layer's graph-plan record
 * (plan_cache.h).
 *
 * The layout is the one files of kind 1 hold, retired pooling fields included (they stay 0): a
 * layout change takes a new kind id. Nothing here calls cuDNN, so it builds and is tested in every
 * configuration (the plan-file tests and the fuzzer decode conv's records). */
#ifndef NN_CONV_CONV_PLAN_KEY_H
#define NN_CONV_CONV_PLAN_KEY_H

#include <stddef.h>
#include <stdint.h>

#include "cudnn/cache.h"
#include "cudnn/plan_cache.h"
#include "nnprim/tensor.h"

struct nn__plan_reader;

/* ---------------------------------------------------------------------------------------------
 * Keys
 */

/* What the plan computes. Values are written to plan files: append, never renumber. */
enum nn__op_kind {
    NN__OP_NONE = 0,
    NN__OP_CONV_FWD = 1,
    NN__OP_CONV_BWD_DATA = 2,
    NN__OP_CONV_BWD_FILTER = 3,
    /* 4..6 were the bias-gradient and pooling graphs, no longer built (pooling and the bias
     * gradient run on legacy calls): keys of files may still hold them, nothing looks them up. */
    NN__OP_CONV_BIAS_GRAD = 4,
    NN__OP_POOL_FWD = 5,
    NN__OP_POOL_BWD = 6,
    NN__OP_KIND_COUNT /* first invalid value */
};

/* The key's tensors, by role; the order matches conv's tensor uids (enum nn__conv_uid,
 * conv_graph_cudnn.h: slot i holds uid i + 1). Values are written to plan files. */
enum nn__key_operand {
    NN__KEY_X = 0,
    NN__KEY_W = 1,
    NN__KEY_Y = 2,
    NN__KEY_B = 3,
    NN__KEY_DX = 4,
    NN__KEY_DW = 5,
    NN__KEY_DY = 6,
    NN__KEY_DB = 7,
    NN__KEY_OPERANDS = 8
};

#define NN__KEY_SPATIAL_MAX 3 /* 1-D, 2-D and 3-D convolution and pooling */

/* Graph tensors have rank 3..5 (N, C and 1..3 spatial dims; nn__conv_graph_check checks it): the
 * key holds no more, so that a lookup hashes and compares as few bytes as it can. */
#define NN__KEY_RANK_MAX 5

/* One tensor of the key. rank 0 = the op has no such tensor (all other fields then 0). */
struct nn__key_tensor {
    int32_t rank;                      /* 0..NN__KEY_RANK_MAX */
    int32_t dtype;                     /* nn_dtype */
    int64_t alignment;                 /* byte alignment of the data pointer cuDNN is told about */
    int64_t dims[NN__KEY_RANK_MAX];    /* entries >= rank are 0 */
    int64_t strides[NN__KEY_RANK_MAX]; /* in elements; entries >= rank are 0 */
};

/* Op parameters as plain values. Entries of the spatial arrays >= spatial_rank are 0;
 * fields an op does not have stay 0 (as nn__plan_key_init() leaves them). */
struct nn__key_params {
    int32_t spatial_rank; /* 0..NN__KEY_SPATIAL_MAX */
    int32_t groups;       /* convolution groups (1 = ordinary) */
    int64_t stride[NN__KEY_SPATIAL_MAX];
    int64_t dilation[NN__KEY_SPATIAL_MAX];
    int64_t pad_lo[NN__KEY_SPATIAL_MAX];
    int64_t pad_hi[NN__KEY_SPATIAL_MAX];
    int64_t window[NN__KEY_SPATIAL_MAX]; /* pooling window */
    int32_t mode;                        /* conv: cross-correlation vs convolution (op's enum) */
    int32_t activation;                  /* fused activation (op's enum), 0 = none */
    int32_t pool_mode;                   /* max / average with or without padding (op's enum) */
    int32_t flags;                       /* op-specific extra bits */
    /* Blend factors baked into the plan (out = alpha * result + beta * out). Compared and
     * hashed by bit pattern, so -0.0 and 0.0 are different keys. */
    double alpha, beta;
};

/* The value key. Build with nn__plan_key_init() first, so that the entries a key does not use
 * (named above) hold 0: equality and hashing go over every field of nn__plan_key_fields (the cache
 * kind's field list), never over padding bytes. Every value is written to plan files. */
struct nn__plan_key {
    int32_t op;             /* enum nn__op_kind */
    int32_t compute;        /* accumulation nn_dtype (F32 for f32/f16/bf16 data, F64 for f64) */
    int32_t math_mode;      /* nn_math_mode */
    int32_t deterministic;  /* 0 or 1 */
    uint64_t workspace_cap; /* bytes, 0 = no cap */
    struct nn__key_tensor t[NN__KEY_OPERANDS];
    struct nn__key_params p;
};

/* Zero every field (and padding byte). */
void nn__plan_key_init(struct nn__plan_key *k);

/* Field-wise equality (the cache's). */
int nn__plan_key_equal(const struct nn__plan_key *a, const struct nn__plan_key *b);

/* 64-bit hash over the same fields; equal keys give equal hashes. */
uint64_t nn__plan_key_hash(const struct nn__plan_key *k);

/* Check that every field is in range (op, dtype, ranks, dims >= 1, strides >= 0, unused entries
 * 0, ...).
 * Returns NULL if valid, else a static description of the first bad field. Used on keys read
 * from files; the graph layer's keys come from validated tensors. */
const char *nn__plan_key_invalid(const struct nn__plan_key *k);

/* The cache kind id of conv's graph plans (written to plan files). */
#define NN__PLAN_KIND_ID 1u

/* The field list and the checks of the key, for the kind. */
extern const struct nn__field nn__plan_key_fields[];
const char *nn__plan_kind_key_invalid(const void *key);

/* The kind's reader of format 1 and 2 files' key layout (struct nn__cache_kind.read_v2_key):
 * the fields in the key's order, each array only as far as its rank, range-checked as they are
 * read; *skip is set for the keys of pooling records, which nothing uses. */
int nn__plan_kind_read_v2_key(struct nn__plan_reader *r, void *key, int *skip);

/* Conv's graph-plan cache kind, with destroy_fn the destroy callback of its live plans (the cuDNN
 * layer's nn__cudnn_plan_destroy in conv_graph_cudnn.c; a test's stand-in elsewhere). */
#define NN__PLAN_KIND_INIT(destroy_fn)                                                             \
    {                                                                                              \
        .id = NN__PLAN_KIND_ID, .name = "graph plan", .key_size = sizeof(struct nn__plan_key),     \
        .key_fields = nn__plan_key_fields, .record_size = sizeof(struct nn__plan_record),          \
        .record_fields = nn__plan_record_fields, .blob_max = NN__PLAN_JSON_MAX,                    \
        .key_invalid = nn__plan_kind_key_invalid, .record_invalid = nn__plan_kind_record_invalid,  \
        .bind_blob = nn__plan_kind_bind_json, .destroy = (destroy_fn),                             \
        .read_v2_key = nn__plan_kind_read_v2_key                                                   \
    }

#endif

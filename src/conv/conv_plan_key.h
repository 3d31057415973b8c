/* Conv's plan-cache key (cache kind 7): one convolution pass as plain values (the pass, the conv
 * parameters, the call's four tensors by role, the fused relu, alpha/beta and the context
 * settings that change a plan); its field list, range checks and conv's graph-plan cache kind made
 * of it and the cuDNN layer's graph-plan record (plan_cache.h). A plan file's records of any
 * other kind id (kind 1 held conv's plans before kind 7) are skipped and counted, as every kind
 * this process lacks. Nothing here calls cuDNN, so it builds and is tested in every configuration
 * (the plan-file tests and the fuzzer decode conv's records). */
#ifndef NN_CONV_CONV_PLAN_KEY_H
#define NN_CONV_CONV_PLAN_KEY_H

#include <stddef.h>
#include <stdint.h>

#include "cudnn/cache.h"
#include "cudnn/cache_kinds.h"
#include "cudnn/plan_cache.h"
#include "nnprim/tensor.h"

/* ---------------------------------------------------------------------------------------------
 * The key (kind 7)
 */

/* Which convolution the plan computes. Values are written to plan files. */
enum nn__conv_pass {
    NN__CONV_PASS_FWD = 1,       /* y = conv(x, w) [+ b] [relu] */
    NN__CONV_PASS_BWD_DATA = 2,  /* dx = alpha conv_bwd_data(dy, w) + beta dx */
    NN__CONV_PASS_BWD_FILTER = 3 /* dw = alpha conv_bwd_filter(x, dy) + beta dw */
};

/* The key's tensors by role; the pass says which is a gradient: the input slot is x (forward,
 * filter gradient) or dx (data gradient), the filter slot w or dw (filter gradient), the output
 * slot y (forward) or dy (both gradients); only a forward has a bias. Values are written to plan
 * files. */
enum nn__conv_slot {
    NN__CONV_SLOT_IN = 0,
    NN__CONV_SLOT_FILTER = 1,
    NN__CONV_SLOT_OUT = 2,
    NN__CONV_SLOT_BIAS = 3,
    NN__CONV_SLOTS = 4
};

/* Unique ids of a graph's tensors: the variant pack's keys, and the index into
 * struct nn__cudnn_args. Fixed by role so records and JSON plans stay valid across runs. */
enum nn__conv_uid {
    NN__CONV_UID_X = 1,
    NN__CONV_UID_W = 2,
    NN__CONV_UID_Y = 3,
    NN__CONV_UID_B = 4,
    NN__CONV_UID_DX = 5,
    NN__CONV_UID_DW = 6,
    NN__CONV_UID_DY = 7,
    NN__CONV_UID_DB = 8,
    NN__CONV_UID_END = 9,            /* first id that is not a graph input or output */
    NN__CONV_UID_VIRTUAL_CONV = 101, /* conv output before the fused bias/relu */
    NN__CONV_UID_VIRTUAL_BIAS = 102  /* bias-add output before relu */
};

/* The uid of the tensor in slot of a key of pass (a pass value, checked), or 0 when the pass has
 * no such slot or pass is none: the one table of which tensor fills which slot. The tensors a
 * graph takes and the slots a key must have are derived from it. */
int nn__conv_uid_of_slot(int32_t pass, int slot);

/* The slot of tensor uid in a key of pass, or -1 when the pass has no such tensor. */
int nn__conv_slot_of_uid(int32_t pass, int uid);

#define NN__CONV_KEY_SPATIAL_MAX 3 /* 1-D, 2-D and 3-D */
#define NN__CONV_KEY_RANK_MAX    5 /* N, C and up to 3 spatial dims */

/* Key flag (struct nn__conv_key.flags): the plan is for the forward without its bias and relu,
 * which run after it (a forward whose epilogue no engine fuses); the rest of the key is the full
 * forward's, so that it differs from the fused forward's key only here. */
#define NN__CONV_KEY_PLAIN (1 << 0)

/* One tensor. Conv's tensors are packed, NCHW (row-major) or channels-last, with the canonical
 * strides of that layout (nn__conv_layout_strides(), conv_internal.h), so dims and the layout
 * give the strides: the key holds the layout, not the strides. align 0 = the call has no such
 * tensor (then every field is 0). */
struct nn__conv_key_tensor {
    int32_t align; /* byte alignment of the data pointer cuDNN is told about: 1, 2, 4, 8 or 16 */
    int32_t nhwc;  /* 1: channels-last, 0: NCHW */
    int64_t dims[NN__CONV_KEY_RANK_MAX]; /* spatial_rank + 2 entries, the rest 0 */
};

/* The value key. Zero it (memset) before filling it, so that entries a key does not use hold 0:
 * equality and hashing go over the field list, never over padding bytes (there is none). Every
 * value is written to plan files. */
struct nn__conv_key {
    int32_t pass;         /* enum nn__conv_pass */
    int32_t dtype;        /* nn_dtype of every tensor (accumulation: f64 for f64, else f32) */
    int32_t spatial_rank; /* 1..3 */
    int32_t mode;         /* enum nn__conv_graph_mode: 0 cross-correlation, 1 convolution */
    int32_t relu;         /* forward: fused relu (0 or 1) */
    int32_t flags;        /* NN__CONV_KEY_PLAIN (forward only) */
    int64_t groups;       /* >= 1 */
    int64_t stride[NN__CONV_KEY_SPATIAL_MAX];
    int64_t dilation[NN__CONV_KEY_SPATIAL_MAX];
    int64_t pad_lo[NN__CONV_KEY_SPATIAL_MAX];
    int64_t pad_hi[NN__CONV_KEY_SPATIAL_MAX];
    /* Blend factors baked into the plan (out = alpha * result + beta * out). Compared and
     * hashed by bit pattern, so -0.0 and 0.0 are different keys. */
    double alpha, beta;
    struct nn__cache_settings s; /* math mode, determinism, workspace cap */
    struct nn__conv_key_tensor t[NN__CONV_SLOTS];
};

/* The layout of a tensor of rank 3..5 with these dims and strides as a key tensor: 1 if the
 * strides are exactly channels-last's, else 0 (the caller passes packed tensors only). */
int32_t nn__conv_key_layout(int rank, const int64_t *dims, const int64_t *strides);

/* Fill key tensor kt (zeroed) with rank dims (3..5), the layout of strides and the alignment. */
void nn__conv_key_tensor_set(struct nn__conv_key_tensor *kt, int rank, const int64_t *dims,
                             const int64_t *strides, int64_t alignment);

/* The strides of key tensor kt of rank spatial_rank + 2 (its layout's canonical ones). */
void nn__conv_key_strides(const struct nn__conv_key_tensor *kt, int rank, int64_t *strides);

/* Field-wise equality and hash (the cache's); equal keys give equal hashes. */
int nn__conv_key_equal(const struct nn__conv_key *a, const struct nn__conv_key *b);
uint64_t nn__conv_key_hash(const struct nn__conv_key *k);

/* Check that every field is in range: the pass, dtype, ranks, dims >= 1, the slots the pass has
 * and no other, alignments, the parameters, unused entries 0, the settings.
 * Returns NULL if valid, else a static description of the first bad field. Used on keys read
 * from files; the backend's keys come from validated tensors. */
const char *nn__conv_key_invalid(const struct nn__conv_key *k);

/* The field list and the check of the key, for the kind. */
extern const struct nn__field nn__conv_key_fields[];
const char *nn__conv_kind_key_invalid(const void *key);

/* ---------------------------------------------------------------------------------------------
 * The kind
 */

/* Conv's graph-plan cache kind, with destroy_fn the destroy callback of its live plans (the cuDNN
 * layer's nn__cudnn_plan_destroy in conv_graph_cudnn.c; a test's stand-in elsewhere). */
#define NN__CONV_PLAN_KIND_INIT(destroy_fn)                                                        \
    {                                                                                              \
        .id = NN__CONV_KIND_ID, .name = "conv plan", .key_size = sizeof(struct nn__conv_key),      \
        .key_fields = nn__conv_key_fields, .record_size = sizeof(struct nn__plan_record),          \
        .record_fields = nn__plan_record_fields, .blob_max = NN__PLAN_JSON_MAX,                    \
        .key_invalid = nn__conv_kind_key_invalid, .record_invalid = nn__plan_kind_record_invalid,  \
        .bind_blob = nn__plan_kind_bind_json, .destroy = (destroy_fn)                              \
    }

#endif

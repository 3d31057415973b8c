/* The id of every cache kind (struct nn__cache_kind.id, cache.h), in one list so that no two kinds
 * share one. Ids are written to plan files: never reuse or renumber one. A key or record layout
 * change takes a new id, and the old one moves to the retired list (files holding it skip and
 * count its records). A new kind takes the next number after the largest here, at most
 * NN__CACHE_KIND_ID_MAX, and is listed in cache_kinds[] of src/context.c. Only the ids live
 * here; each kind is defined by its family. tools/check_families.py (the `families` test) checks
 * that ids are defined here and nowhere else, each number once. */
#ifndef NN_CUDNN_CACHE_KINDS_H
#define NN_CUDNN_CACHE_KINDS_H

/* Retired. 2 and 3 were never assigned. */
#define NN__RETIRED_CONV_PLAN_V1_KIND_ID 1u /* conv's graph plans before 7 (docs/CONV_CUDNN.md) */

#define NN__RNN_CUDNN_KIND_ID         4u /* rnn descriptors and algorithm (rnn_cudnn_cache.c) */
#define NN__RNN_CUDNN_DROPOUT_KIND_ID 5u /* rnn dropout state (rnn_cudnn_dropout.c) */
#define NN__LINEAR_MATMUL_KIND_ID     6u /* linear's cuBLASLt matmul (linear_cublaslt.c) */
#define NN__CONV_KIND_ID              7u /* conv's graph plans (conv_plan_key.h) */
#define NN__SOFTMAX_XENT_KIND_ID      8u /* cross-entropy scratch, not persisted (softmax_cudnn.c) */
#define NN__CONV_ONES_KIND_ID         9u /* bf16 bias-gradient ones, not persisted (conv_cudnn.c) */

#endif

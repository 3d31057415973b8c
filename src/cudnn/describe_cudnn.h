/* Introspection ("reverse lookup") of the cuDNN layer: the value structs of graph_cudnn.h and the
 * backend descriptors built from them, as text (for verbose lines and error messages) and, for
 * descriptors, as value structs read back with cudnnBackendGetAttribute.
 *
 * Text functions write a NUL-terminated line into buf (truncated to cap, never overrun) and
 * return buf, so they can sit inside a printf argument list. They call no cuDNN function.
 * Compiled only with cuDNN (NN_HAVE_CUDNN). */
#ifndef NN_CUDNN_DESCRIBE_CUDNN_H
#define NN_CUDNN_DESCRIBE_CUDNN_H

#include <stddef.h>
#include <stdint.h>

#include "core/cuda_load.h"

#include "cudnn/graph_types_cudnn.h"

struct nn_ctx;

/* Enough for any single description below. */
#define NN__CUDNN_DESCRIBE_MAX 1024

/* "x:f32[2,3,5,5]/[75,25,5,1]@16" (name may be NULL: no "x:" prefix; "@alignment" only when
 * it is known, > 0); "-" for rank 0. */
const char *nn__cudnn_describe_tensor(char *buf, size_t cap, const char *name,
                                      const struct nn__cudnn_tensor *t);

/* "engine=12 knobs=[TILE_SIZE=3,SPLIT_K=1]" (knob names from the headers, numbers otherwise) */
const char *nn__cudnn_describe_choice(char *buf, size_t cap, const struct nn__engine_choice *c);

/* "TENSOR_CORE|NONDETERMINISTIC", or "none" */
const char *nn__cudnn_describe_notes(char *buf, size_t cap, const int64_t *notes, int n);

/* ---------------------------------------------------------------------------------------------
 * Read back from finalized backend descriptors
 */

#define NN__CUDNN_NOTES_MAX 32

/* An engine config: its engine's global index and knob choices, numerical and behaviour notes. */
struct nn__cudnn_engine_info {
    struct nn__engine_choice choice;
    int n_notes;
    int64_t notes[NN__CUDNN_NOTES_MAX]; /* cudnnBackendNumericalNote_t */
    int n_behavior;
    int64_t behavior[NN__CUDNN_NOTES_MAX]; /* cudnnBackendBehaviorNote_t */
};

struct nn__cudnn_plan_info {
    struct nn__cudnn_engine_info engine;
    int64_t workspace;
};

/* A CUDNN_BACKEND_TENSOR_DESCRIPTOR: dtype (0 if cuDNN's type has no nn_dtype), rank, dims,
 * strides; alignment is 0 (cuDNN does not give it back). uid and is_virtual may be NULL. */
nn_status nn__cudnn_read_tensor(struct nn_ctx *ctx, cudnnBackendDescriptor_t d,
                                struct nn__cudnn_tensor *out, int64_t *uid, int *is_virtual);

/* A CUDNN_BACKEND_ENGINE_DESCRIPTOR: global index and notes (no knobs: those are a config's). */
nn_status nn__cudnn_read_engine(struct nn_ctx *ctx, cudnnBackendDescriptor_t engine,
                                struct nn__cudnn_engine_info *out);

/* A CUDNN_BACKEND_ENGINECFG_DESCRIPTOR: its engine and knob choices.
 * Returns NN_OK; NN_E_OVERFLOW (more knobs than NN__ENGINE_KNOBS_MAX); NN_E_CUDNN. */
nn_status nn__cudnn_read_engcfg(struct nn_ctx *ctx, cudnnBackendDescriptor_t engcfg,
                                struct nn__cudnn_engine_info *out);

/* A finalized CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR: its engine config and workspace. */
nn_status nn__cudnn_read_plan(struct nn_ctx *ctx, cudnnBackendDescriptor_t plan,
                              struct nn__cudnn_plan_info *out);

/* A descriptor of the graph layer read back and described as text: tensor, operation graph (its
 * engine count), engine config, execution plan; other types (a family's own descriptors) give
 * their type name only. Returns NN_OK; what reading fails with (the text then says so). */
nn_status nn__cudnn_describe_backend(struct nn_ctx *ctx, cudnnBackendDescriptorType_t type,
                                     cudnnBackendDescriptor_t d, char *buf, size_t cap);

/* nn_dtype <-> cudnnDataType_t (0 / -1 for types the other side lacks). */
cudnnDataType_t nn__cudnn_data_type(nn_dtype t);
nn_dtype nn__cudnn_nn_dtype(cudnnDataType_t t);

/* alpha/beta as cuDNN's legacy calls read them: a double for f64 data, a float otherwise. */
union nn__cudnn_scale {
    float f;
    double d;
};

/* v stored in s as data of dtype t needs; returns the pointer to pass. */
const void *nn__cudnn_scale(union nn__cudnn_scale *s, nn_dtype t, double v);

/* A legacy tensor descriptor of dtype t with nd dims and strides (cuDNN's int sizes: the caller
 * checked they fit), created and set; on failure nothing is left and *out is untouched. */
nn_status nn__cudnn_tensor_desc(struct nn_ctx *ctx, nn_dtype t, int nd, const int *dims,
                                const int *strides, cudnnTensorDescriptor_t *out);

/* Destroys d (NULL: nothing) keeping the context's last error, so that a clean-up after a failure
 * does not replace the failure's message. */
void nn__cudnn_tensor_desc_destroy(struct nn_ctx *ctx, cudnnTensorDescriptor_t d);

/* A relu activation descriptor (CUDNN_NOT_PROPAGATE_NAN, coefficient 0), created and set, for
 * the calls that run relu or its gradient through cuDNN's legacy API (conv and linear); on failure
 * nothing is left and *out is untouched. */
nn_status nn__cudnn_relu_desc(struct nn_ctx *ctx, cudnnActivationDescriptor_t *out);

/* Destroys act (NULL: nothing) keeping the context's last error, as
 * nn__cudnn_tensor_desc_destroy does. */
void nn__cudnn_relu_desc_destroy(struct nn_ctx *ctx, cudnnActivationDescriptor_t act);

#endif

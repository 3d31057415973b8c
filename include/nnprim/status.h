/*
 * nnprim: status codes and the detail of the last failure.
 *
 * Every nnprim function that can fail returns an nn_status: NN_OK (0) or a negative code.
 * A failing call has no side effects on its outputs unless its documentation says otherwise,
 * and it records what went wrong (which argument or which CUDA/cuDNN call, the raw status and
 * the library's own message) in two places:
 *   - per thread: nn_last_error() returns the calling thread's last failure;
 *   - per context: nn_ctx_last_error() returns the last failure of calls made with that context:
 *     its ctx argument, or for a call without one the context of the live graph or pullback it
 *     was given (nn_graph_get_info(), a *_pullback_free() of another family's pullback).
 * Both records then hold the same status and message; a call with no usable context (a NULL ctx,
 * an object that is not live) writes only the thread's.
 * Bad input never aborts the process.
 */
#ifndef NNPRIM_STATUS_H
#define NNPRIM_STATUS_H

#include <stddef.h>

#if defined(NN_BUILDING_LIBRARY) && defined(__GNUC__)
#define NN_API __attribute__((visibility("default")))
#else
#define NN_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

/*
 * The one list of status codes: X(NAME, value, description).
 * It generates the enum below, nn_status_string() and nn_status_name().
 */
#define NN_STATUS_LIST(X)                                                                          \
    X(NN_OK, 0, "success")                                                                         \
    X(NN_E_INVALID_ARG, -1, "invalid argument")                                                    \
    X(NN_E_SHAPE, -2, "tensor shapes do not agree")                                                \
    X(NN_E_DTYPE, -3, "unsupported or mismatched data type")                                       \
    X(NN_E_MEMSPACE, -4, "tensor is in the wrong memory space")                                    \
    X(NN_E_OOM_HOST, -5, "out of host memory")                                                     \
    X(NN_E_OOM_DEVICE, -6, "out of device memory")                                                 \
    X(NN_E_NO_DEVICE, -7, "no usable CUDA device")                                                 \
    X(NN_E_UNSUPPORTED, -8, "configuration not supported by this backend")                         \
    X(NN_E_NOT_BUILT, -9, "feature not compiled into this build of nnprim")                        \
    X(NN_E_CUDA, -10, "CUDA runtime call failed")                                                  \
    X(NN_E_CUDNN, -11, "cuDNN call failed")                                                        \
    X(NN_E_CUBLAS, -12, "cuBLAS call failed")                                                      \
    X(NN_E_OVERFLOW, -13, "size computation overflows")                                            \
    X(NN_E_ENV, -14, "invalid NNPRIM_* environment variable")                                      \
    X(NN_E_IO, -15, "file input/output failed")                                                    \
    X(NN_E_FORMAT, -16, "file is truncated, corrupted or of another format")                       \
    X(NN_E_BAD_POINTER, -17, "pointer not owned by nnprim (foreign or already freed)")             \
    X(NN_E_PULLBACK, -18, "pullback already consumed or used with another context")                \
    X(NN_E_INTERNAL, -19, "internal error in nnprim")                                              \
    X(NN_E_GRAPH, -20, "not possible inside a CUDA graph capture, or the graph cannot run")

#define NN__STATUS_ENUM(name, value, text) name = value,
typedef enum nn_status { NN_STATUS_LIST(NN__STATUS_ENUM) } nn_status;
#undef NN__STATUS_ENUM

/**
 * Describe a status in words.
 *
 * @param status any value; codes nnprim does not define give "unknown status".
 * @return a static string, never NULL. Owned by the library.
 */
NN_API const char *nn_status_string(nn_status status);

/**
 * The enumerator's name of a status, e.g. "NN_E_SHAPE".
 *
 * @param status any value; codes nnprim does not define give "NN_UNKNOWN".
 * @return a static string, never NULL. Owned by the library.
 */
NN_API const char *nn_status_name(nn_status status);

/** Sizes of the text fields of nn_error_info (including the terminating NUL). */
#define NN_ERROR_MESSAGE_MAX 512
#define NN_ERROR_NAME_MAX    64

/**
 * The detail of one failure.
 *
 * message    what went wrong in words: it starts with the public function that was called and
 *            names the argument, the expected and the actual value (for example
 *            "nn_conv_forward: x.dims[1] (channels) must equal w.dims[1] * groups = 6, got 4"),
 *            or for a library call failure cuDNN's or CUDA's own message.
 * call       the check or the CUDA/cuDNN function that failed ("cudnnBackendFinalize",
 *            "validate x"), or "" when none applies.
 * raw_status the raw cudaError_t / cudnnStatus_t / cublasStatus_t value, or 0.
 * raw_name   its name ("CUDNN_STATUS_BAD_PARAM"), or "".
 * file, line where in nnprim's source it was recorded.
 */
typedef struct nn_error_info {
    nn_status status;
    int raw_status;
    int line;
    char call[NN_ERROR_NAME_MAX];
    char raw_name[NN_ERROR_NAME_MAX];
    char file[NN_ERROR_NAME_MAX];
    char message[NN_ERROR_MESSAGE_MAX];
} nn_error_info;

/**
 * The calling thread's last failure.
 *
 * @return a pointer to thread-local storage, valid until the thread's next failing nnprim call
 *         overwrites it or the thread exits; status is NN_OK if this thread has had no failure
 *         since the start or since nn_clear_last_error(). Never NULL.
 */
NN_API const nn_error_info *nn_last_error(void);

/** Forget the calling thread's last failure (nn_last_error() then reports NN_OK). */
NN_API void nn_clear_last_error(void);

#ifdef __cplusplus
}
#endif

#endif /* NNPRIM_STATUS_H */

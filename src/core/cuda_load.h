/* The CUDA runtime, cuDNN and cuBLASLt as nnprim calls them: loaded at run time with dlopen, so
 * that libnnprim and the nnprim program have no NEEDED entry for them and one binary serves GPU
 * and CPU-only machines. Include this instead of <cuda_runtime_api.h>, <cudnn.h> or
 * <cublasLt.h>: after the headers, it renames every function nnprim calls (tools/
 * cuda_loader_spec.txt) to its generated wrapper (cuda_load_gen.h), which loads the library on
 * first use and, where the library is not usable, returns its "not initialized" status instead of
 * calling through NULL. Call sites stay as they are. */
#ifndef NN_CORE_CUDA_LOAD_H
#define NN_CORE_CUDA_LOAD_H

#include "nn_config.h"

#if NN_HAVE_CUDA
#include <cuda_runtime_api.h>
#if NN_HAVE_CUDNN
#include <cublasLt.h>
#include <cudnn.h>
#endif
#endif

/* The libraries, in the order of nn_runtime_library_id (include/nnprim/context.h). */
enum nn__dl_lib { NN__DL_CUDART, NN__DL_CUDNN, NN__DL_CUBLASLT, NN__DL_COUNT };

/* A generated table row: a function's name and the address of the pointer it is loaded into. */
struct nn__dl_symbol {
    const char *name;
    void *slot;
};

/* The generated tables of each library's functions (cuda_load_gen.c), ended by a NULL name;
 * only those of the libraries the build has exist. */
extern const struct nn__dl_symbol nn__dl_symbols_cudart[];
extern const struct nn__dl_symbol nn__dl_symbols_cudnn[];
extern const struct nn__dl_symbol nn__dl_symbols_cublasLt[];

/* 1 when lib is loaded, has every function nnprim calls and reports a version nnprim works with;
 * else 0. The first call for a library loads it (once per process, thread-safe); later calls
 * cost one pthread_once check. Always 0 for a library the build does not have. */
int nn__dl_ready(enum nn__dl_lib lib);

/* NULL when lib is usable (this loads it), else why not, naming the library file and, where
 * dlopen or dlsym failed, dlerror()'s text. Static storage, valid for the process's lifetime. */
const char *nn__dl_problem(enum nn__dl_lib lib);

/* NULL when all three libraries are usable (the cuDNN backend can run), else the first
 * library's problem. */
const char *nn__dl_backend_problem(void);

#if NN_HAVE_CUDA
#include "cuda_load_gen.h"
#endif

#endif

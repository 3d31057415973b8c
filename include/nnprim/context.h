/*
 * nnprim: library version, build features, devices, settings and the context.
 *
 * A context (nn_ctx) is what every op call takes. It holds one device ordinal (or the CPU),
 * the CUDA stream its calls run on (chosen at creation, changed with nn_ctx_set_stream()), the
 * cuDNN and cuBLAS handles (created on first use), the settings below and a reference to the
 * device's memory pool.
 *
 * Threads: a context, and every pullback and tensor made with it, must be used by one thread at
 * a time (handing it to another thread between calls is fine). Distinct contexts may be used
 * concurrently from any threads, on the same or different devices. Shared underneath, and
 * locked or atomic: each device's memory pool (mem.h) and the registry of pools, each device's
 * store of tuned plan records (plan_cache.h), the tables of live tensors and pullbacks, the
 * run-time library loader and the device count (each set up once per process). A context's
 * execution plans and its background plan builder are its own (the builder's thread has a
 * context of its own and its own stream). nn_last_error() is per thread (thread-local);
 * nn_ctx_last_error() is per context. Verbose and log lines go out whole, one at a time, through
 * nn_set_log_callback()'s lock, so lines of concurrent contexts interleave but do not mix.
 * Allocator callbacks (nn_mem_set_allocator()) may be called from any thread at once.
 * tests/integrate/test_threads.c checks this on the reference backend and on every GPU.
 *
 * Settings are filled by one of two functions, named after what they read, and may then be
 * changed by the caller before nn_ctx_create(): nn_settings_defaults() fills the library's
 * defaults and reads nothing; nn_settings_from_env() fills the same defaults, then applies the
 * NNPRIM_* environment variables below. nn_ctx_create() with settings NULL uses
 * nn_settings_from_env().
 *
 *   NNPRIM_BACKEND            auto | ref | cudnn
 *   NNPRIM_DEVICE             CUDA device ordinal, an integer >= 0
 *   NNPRIM_MATH               strict | tf32
 *   NNPRIM_DETERMINISTIC      0 | 1
 *   NNPRIM_WORKSPACE_CAP      bytes, with an optional K, M or G suffix (powers of 1024); 0 = no cap
 *   NNPRIM_TUNING             heuristic | autotune
 *   NNPRIM_AUTOTUNE_CANDIDATES  how many plans autotune times, an integer >= 1
 *   NNPRIM_PLAN_CACHE         path of the plan cache file ("" = none)
 *   NNPRIM_PLAN_CACHE_CAPACITY  plans kept in memory per context, an integer >= 1
 *   NNPRIM_BACKGROUND_BUILDS  0 | 1: start slow-to-build tuned plans on their quick alternate
 *   NNPRIM_PREBUILD_PLANS     0 | 1: build a loaded plan file's plans in the background at once
 *   NNPRIM_RNN_GRAPHS         auto | 0 | 1: recurrent calls replayed from CUDA graphs (auto:
 *                             settings.rnn_graphs says how; 0 never; 1 every shape it can)
 *   NNPRIM_LINEAR_GRAPHS      auto | 0 | 1: linear products replayed from CUDA graphs, likewise
 *                             (settings.linear_graphs)
 *   NNPRIM_XENT_TARGETS       checked | device: how the cuDNN cross-entropy reads class targets
 *                             in device memory (settings.xent_targets)
 *   NNPRIM_VERBOSE            0 (quiet) | 1 (one line per op call) | 2 (also every CUDA/cuDNN
 * call); the lines: "Log lines" below and docs/VERBOSE.md
 *
 * and, read by the library loader rather than by nn_settings_from_env(), once per process when a
 * library is first needed (nn_runtime_library_info() below):
 *
 *   NNPRIM_CUDA_LIBS          where the CUDA runtime, cuDNN and cuBLASLt are loaded from:
 *                             unset or "": dlopen's own search (LD_LIBRARY_PATH, the system's
 *                             library path), then the directory the build found each in;
 *                             a directory: there only; none: not at all, as on a machine
 *                             without CUDA (AUTO then runs the reference backend)
 *
 * Numbers are decimal digits only (a byte count may end in one suffix letter): a blank, a '+',
 * a '-' (except in a negative integer range, which none of these has) or trailing characters
 * make the variable malformed, so " -5" is refused rather than read as a huge count.
 * A framework that decides every setting itself fills them with nn_settings_defaults() (and
 * nn_mem_settings_defaults(), mem.h), which read no variable.
 *
 * fork(): a child process must not use a cuDNN context, a CUDA device's pool, a stream handle or
 * device memory that existed before the fork: CUDA does not survive fork() (calls in the child
 * fail, typically with cudaErrorInitializationError, or block), and a cuDNN context's background
 * plan builder thread does not exist in the child. The child may nn_ctx_destroy() an inherited
 * cuDNN context: nnprim recognises it (a pthread_atfork() child handler counts forks) and frees
 * its host memory only, without joining the builder, taking a lock, calling CUDA or cuDNN, or
 * saving settings.plan_cache_file (the cuDNN objects' memory is left to the child's exit or
 * exec). Otherwise leave such contexts alone and end the child with _exit() or exec(); do not
 * free inherited device tensors. Reference-backend contexts have no thread
 * and no CUDA state: a child may use and destroy those it inherited, and create new ones. A
 * child that needs the GPU must exec a new program (or the parent must fork before its first
 * CUDA call), as CUDA requires. Fork only while no other thread is inside an nnprim call (a lock
 * held then stays held in the child).
 */
#ifndef NNPRIM_CONTEXT_H
#define NNPRIM_CONTEXT_H

#include <stddef.h>
#include <stdint.h>

#include "status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------------------------------------
 * Version and build
 */

/** @return the library version as "MAJOR.MINOR.PATCH"; a static string owned by the library. */
NN_API const char *nn_version(void);

/** @return the library version as MAJOR * 10000 + MINOR * 100 + PATCH. */
NN_API int nn_version_number(void);

/** Features compiled into this build (a bit set returned by nn_build_features()). */
enum nn_feature {
    NN_FEATURE_CUDA = 1 << 0,     /**< CUDA runtime: device memory, streams, copies */
    NN_FEATURE_CUDNN = 1 << 1,    /**< the cuDNN backend (with cuBLAS) */
    NN_FEATURE_JEMALLOC = 1 << 2, /**< host allocations from a private jemalloc arena */
    NN_FEATURE_DLPACK = 1 << 3,   /**< DLPack import and export (dlpack.h) */
};

/** @return the OR of the nn_feature bits compiled into this build. */
NN_API unsigned nn_build_features(void);

/* ---------------------------------------------------------------------------------------------
 * Devices
 */

/** What nnprim knows of one CUDA device. */
typedef struct nn_device_info {
    int ordinal;
    int cc_major, cc_minor; /**< compute capability */
    int sm_count;           /**< multiprocessors */
    size_t total_memory;    /**< bytes */
    char name[256];
    uint64_t reserved[4];
} nn_device_info;

/**
 * Count the CUDA devices this process can use.
 *
 * @param count out: the number of devices; 0 where the build has no CUDA, the CUDA runtime
 *              library cannot be loaded (nn_runtime_library_info()), no driver is installed or
 *              no device is visible (those are not errors).
 * @return NN_OK; NN_E_INVALID_ARG if count is NULL.
 */
NN_API nn_status nn_device_count(int *count);

/**
 * Describe one CUDA device.
 *
 * @param ordinal the device, 0 <= ordinal < nn_device_count().
 * @param info    out: filled on success, untouched on failure.
 * @return NN_OK; NN_E_INVALID_ARG if info is NULL or ordinal is out of range;
 *         NN_E_NO_DEVICE if there is no usable device; NN_E_NOT_BUILT without CUDA.
 */
NN_API nn_status nn_device_get_info(int ordinal, nn_device_info *info);

/**
 * The version of the cuDNN library loaded at run time (cudnnGetVersion(), e.g. 91400 for 9.14.0).
 *
 * @return the version, or 0 where the build has no cuDNN or libcudnn is not usable
 *         (nn_runtime_library_info() says why).
 */
NN_API size_t nn_cudnn_runtime_version(void);

/**
 * The libraries the cuDNN backend loads at run time. libnnprim and the nnprim program are not
 * linked against them (no NEEDED entry): the same binary runs where they are absent, with the
 * reference backend. Each is loaded (dlopen) when first needed: by the first cuDNN or AUTO
 * context, nn_device_count() (the CUDA runtime), or nn_runtime_library_info(). NNPRIM_CUDA_LIBS
 * (above) says where from. The cuDNN backend needs all three usable.
 */
typedef enum nn_runtime_library_id {
    NN_RUNTIME_CUDART = 0,   /**< the CUDA runtime, libcudart.so.<major> */
    NN_RUNTIME_CUDNN = 1,    /**< cuDNN, libcudnn.so.<major> */
    NN_RUNTIME_CUBLASLT = 2, /**< cuBLASLt, libcublasLt.so.<major> (nn_linear) */
    NN_RUNTIME_LIBRARY_COUNT = 3
} nn_runtime_library_id;

/** What nnprim found of one run-time library. The strings are the library's, valid for the
 *  life of the process. */
typedef struct nn_runtime_library {
    const char *name;   /**< "CUDA", "cuDNN" or "cuBLASLt" */
    const char *soname; /**< the file looked for, from the headers this build used, e.g.
                             "libcudnn.so.9"; "" where the build has no such library */
    const char *path;   /**< the file loaded, as the dynamic loader names it; "" if none was */
    /** What the loaded library reports, in its own encoding: cudaRuntimeGetVersion() (13000 is
     *  13.0), cudnnGetVersion() (91400 is 9.14.0), cublasLtGetVersion() (130100 is 13.1.0);
     *  0 if none was loaded. */
    size_t version;
    size_t version_needed;        /**< the oldest version this build accepts, same encoding */
    char version_text[16];        /**< version as "13.0" or "9.14.0"; "" if 0 */
    char version_needed_text[16]; /**< version_needed likewise */
    int usable; /**< nonzero: loaded, every function nnprim calls found, version new enough */
    /** "" when usable, else why not: the dlopen() or dlsym() failure with dlerror()'s text, a
     *  version too old, NNPRIM_CUDA_LIBS=none, or a build without the library. */
    const char *problem;
    uint64_t reserved[4]; /**< zero */
} nn_runtime_library;

/**
 * Describe one run-time library: where it was loaded from and its version, or why it is not
 * usable. Loads it if nothing has yet (as the first cuDNN context would).
 *
 * @param which a nn_runtime_library_id, 0 <= which < NN_RUNTIME_LIBRARY_COUNT.
 * @param out   out: filled on success, untouched on failure.
 * @return NN_OK, also where the library is missing or unusable (out says so);
 *         NN_E_INVALID_ARG if out is NULL or which is out of range.
 */
NN_API nn_status nn_runtime_library_info(int which, nn_runtime_library *out);

/* ---------------------------------------------------------------------------------------------
 * Settings
 */

/** Which implementation runs the ops. */
typedef enum nn_backend {
    NN_BACKEND_AUTO = 0, /**< cuDNN when a GPU is usable, else the reference (with a log line) */
    NN_BACKEND_REF = 1,  /**< the plain-C reference on host memory */
    NN_BACKEND_CUDNN = 2 /**< cuDNN on the context's device; fails if there is none */
} nn_backend;

/** How f32 convolutions and matrix products may round. */
typedef enum nn_math_mode {
    NN_MATH_STRICT_FP32 = 0, /**< full f32 arithmetic, no tensor-core down-conversion */
    NN_MATH_TF32 = 1         /**< f32 inputs may be rounded to TF32 on tensor cores */
} nn_math_mode;

/** How the cuDNN backend picks a plan on a plan-cache miss. */
typedef enum nn_tuning_mode {
    NN_TUNING_HEURISTIC = 0, /**< the first heuristic plan that finalizes */
    NN_TUNING_AUTOTUNE = 1 /**< time the top candidates on the context's stream, keep the fastest */
} nn_tuning_mode;

/** Whether a family of calls replays CUDA graphs: settings.rnn_graphs (recurrent calls,
 *  include/nnprim/rnn.h, docs/RNN.md) and settings.linear_graphs (linear products,
 *  include/nnprim/linear.h, docs/LINEAR.md). Each field says what its AUTO does. */
typedef enum nn_graphs_mode {
    NN_GRAPHS_AUTO = 0, /**< the default: the family's own policy (its field says which) */
    NN_GRAPHS_OFF = 1,  /**< always eager (every call issues its cuDNN or cuBLASLt calls) */
    NN_GRAPHS_ON = 2    /**< replay whatever the family can capture (its field says what) */
} nn_graphs_mode;

/** How a cuDNN context's cross-entropy forward (softmax.h) reads class targets that lie in
 *  device memory of its device: settings.xent_targets. */
typedef enum nn_targets_mode {
    /** The default: copied to the host, where every target is checked to lie in [0, C) (one
     *  out of range is refused with NN_E_INVALID_ARG) before they are uploaded for the kernel;
     *  the call waits for the context's stream once. */
    NN_TARGETS_CHECKED = 0,
    /** Read on the device only, as inside a graph capture: the kernel reads them and the call
     *  does not wait; a target outside [0, C) is not refused but puts NaN in that
     *  sample's loss and gradient. For a training loop whose targets live on the GPU (a
     *  framework's), where a wait per step would idle the host. Targets in host memory are
     *  checked as under NN_TARGETS_CHECKED; the reference backend always checks. */
    NN_TARGETS_ON_DEVICE = 1
} nn_targets_mode;

/** Context settings; fill with nn_settings_defaults() or nn_settings_from_env(), then change
 *  what you need. */
typedef struct nn_settings {
    nn_backend backend;
    int device;   /**< CUDA device ordinal; ignored by the reference backend */
    void *stream; /**< a cudaStream_t to run on; NULL = the context creates its own */
    nn_math_mode math_mode;
    int deterministic;    /**< nonzero: refuse plans cuDNN marks nondeterministic */
    size_t workspace_cap; /**< largest cuDNN workspace in bytes; 0 = no cap */
    nn_tuning_mode tuning;
    int autotune_candidates;     /**< plans timed per shape in autotune mode, >= 1 */
    const char *plan_cache_file; /**< NULL or "" = none; copied by nn_ctx_create() */
    int plan_cache_capacity;     /**< plans kept in memory (LRU), >= 1 */
    int verbose;                 /**< 0, 1 or 2; see NNPRIM_VERBOSE above */
    /** Nonzero (the default): when a plan-file record has a quick alternate (see plan_cache.h),
     *  the first call of its shape runs the alternate and a background thread builds the tuned
     *  plan, which replaces it on a later call (nn_plan_cache_wait() waits for that): the first
     *  rebuild of some engines in a process stalls for tens of ms. Results of the calls before
     *  the swap come from another engine, so they can differ in the last bits; contexts with
     *  deterministic set never do this. 0: the first call builds the tuned plan itself. */
    int background_builds;
    /** Nonzero (the default) with background_builds also nonzero: as soon as a plan file loads
     *  (at nn_ctx_create() or nn_plan_cache_load()), the background thread starts building the
     *  tuned plans of its records for this context's settings, up to plan_cache_capacity, so
     *  that the first call of a shape finds its plan ready when there was time to build it
     *  (plans_prebuilt counts them; a call that comes first is served as without prebuilding,
     *  and its record's build moves to the front of the queue). The plans are the tuned ones, so
     *  results are the same bits as without prebuilding. Recurrent-layer records are prepared
     *  too, on the loading thread before the load returns, whatever background_builds says
     *  (docs/RNN.md, "The first step from a plan file"). 0: plans are built when first needed. */
    int prebuild_plans;
    /** cuDNN backend: whether a recurrent shape seen before runs from CUDA graphs captured once
     *  (its forward and backward calls replayed, results bitwise those of the eager calls).
     *  NN_GRAPHS_AUTO (the default): per shape, time the eager and the replayed calls once and
     *  keep the faster; ON: replay every shape that can be captured; OFF: never.
     *  NNPRIM_RNN_GRAPHS=auto|0|1. Takes what was reserved[0], so the struct's size is unchanged.
     */
    nn_graphs_mode rnn_graphs;
    /** cuDNN backend: whether a linear product runs from a CUDA graph captured on its buffers
     *  (results bitwise those of the eager call). NN_GRAPHS_AUTO (the default) and ON: a product
     *  called twice in a row on the same buffers is captured once, then replayed while its
     *  buffers stay those (linear has no other replay policy, so ON is AUTO); OFF: never.
     *  NNPRIM_LINEAR_GRAPHS=auto|0|1. Takes the padding after rnn_graphs, so the struct's size
     *  and reserved are unchanged. */
    nn_graphs_mode linear_graphs;
    /** cuDNN backend: how the cross-entropy forward reads targets in device memory
     *  (nn_targets_mode): NN_TARGETS_CHECKED (the default) or NN_TARGETS_ON_DEVICE.
     *  NNPRIM_XENT_TARGETS=checked|device. */
    nn_targets_mode xent_targets;
    uint64_t reserved[6]; /**< zero; room for the ABI to grow */
} nn_settings;

/**
 * Fill settings with the library defaults, then apply the NNPRIM_* environment variables.
 *
 * Defaults: backend AUTO, device 0, stream NULL, strict fp32, not deterministic, no workspace
 * cap, heuristic tuning with 16 autotune candidates, no plan cache file, 256 cached plans,
 * verbose 0, background builds and prebuilding on, recurrent and linear graphs NN_GRAPHS_AUTO.
 *
 * @param s out: always filled completely (with the default for any variable that is malformed).
 * @return NN_OK; NN_E_INVALID_ARG if s is NULL; NN_E_ENV if a variable is malformed (the message
 *         names the variable, the accepted values and what it held).
 */
NN_API nn_status nn_settings_from_env(nn_settings *s);

/**
 * Fill settings with the library defaults (those nn_settings_from_env() starts from) without
 * reading the environment: for a framework that decides every setting itself, so that a user's
 * NNPRIM_* variables (even malformed ones) change nothing. The device's memory pool reads
 * NNPRIM_MEM_* when a cuDNN context first uses it unless nn_mem_configure() came first: pass it the
 * result of nn_mem_settings_defaults() (mem.h) before the first context of the device.
 *
 * @param s out: filled completely.
 * @return NN_OK; NN_E_INVALID_ARG if s is NULL.
 */
NN_API nn_status nn_settings_defaults(nn_settings *s);

/* ---------------------------------------------------------------------------------------------
 * Context
 */

typedef struct nn_ctx nn_ctx;

/**
 * Create a context.
 *
 * With backend AUTO and no usable GPU (no CUDA in the build, a run-time library missing or
 * unusable, no driver, no device, or the ordinal out of range), the context runs the reference
 * backend and says so once on stderr.
 * When settings->plan_cache_file names a file, it is loaded here (a missing file is not an
 * error; a corrupted one is reported on stderr and the cache starts empty) and saved at
 * nn_ctx_destroy().
 *
 * @param out      out: the new context; set to NULL on failure.
 * @param settings NULL: the settings of nn_settings_from_env() (defaults, then the NNPRIM_*
 *                 environment); otherwise read, not kept (strings are copied).
 * @return NN_OK;
 *         NN_E_INVALID_ARG for a NULL out, a setting out of range or a nonzero reserved field
 *         (named in the message: "nn_ctx_create: settings.reserved[3] must be 0, got 7");
 *         NN_E_ENV if settings is NULL and the environment is malformed, or (cuDNN backend)
 *         when the device's memory pool is first used while an NNPRIM_MEM_* variable is
 *         malformed (see mem.h);
 *         NN_E_NO_DEVICE if backend is CUDNN and the device cannot be used, or one of the
 *         run-time libraries is not usable (the message names it and gives dlerror()'s text:
 *         "nn_ctx_create: backend cudnn requested, but libcudnn.so.9 not loaded: ...");
 *         NN_E_NOT_BUILT if backend is CUDNN and this build has no cuDNN;
 *         NN_E_CUDA if creating the stream fails; NN_E_OOM_HOST.
 * Ownership: the caller owns the context and releases it with nn_ctx_destroy(). A stream passed
 * in settings stays the caller's and must outlive the context.
 */
NN_API nn_status nn_ctx_create(nn_ctx **out, const nn_settings *settings);

/**
 * Destroy a context: wait for its stream, save the plan cache file if one is set (a failure to
 * save is reported on stderr), release the handles, the stream it created and its plans.
 *
 * @param ctx NULL is allowed and does nothing.
 */
NN_API void nn_ctx_destroy(nn_ctx *ctx);

/**
 * The settings in force (after environment and AUTO resolution: backend is REF or CUDNN).
 *
 * @param ctx a context.
 * @param out out: a copy; plan_cache_file points into the context and lives as long as it.
 * @return NN_OK; NN_E_INVALID_ARG if ctx or out is NULL.
 */
NN_API nn_status nn_ctx_get_settings(const nn_ctx *ctx, nn_settings *out);

/**
 * The backend that runs this context's ops: NN_BACKEND_REF or NN_BACKEND_CUDNN (never AUTO).
 *
 * @param ctx a context, not NULL.
 */
NN_API nn_backend nn_ctx_backend(const nn_ctx *ctx);

/**
 * The stream the context's calls run on now (a cudaStream_t: the one nn_ctx_create() made or was
 * given, or the last nn_ctx_set_stream()), or NULL for a reference-backend context. NULL is also
 * the answer for a cuDNN context set to the legacy default stream; nn_ctx_get_stream() is the
 * checked form.
 *
 * @param ctx a context, not NULL. A stream nn_ctx_create() made is the context's; any other stays
 *            its owner's.
 */
NN_API void *nn_ctx_stream(const nn_ctx *ctx);

/**
 * Run the context's later calls on another CUDA stream: a framework passes its current stream
 * before the calls it makes there (PyTorch: at::cuda::getCurrentCUDAStream().stream()), without a
 * context per stream. Everything of the context follows: its cuDNN handle, cuBLASLt's calls, the
 * workspaces and buffers it takes from the memory pool, recurrent graph replays and autotuning.
 *
 * Streams. NULL is CUDA's legacy default stream (what a cudaStream_t of 0 means to CUDA, and the
 * handle of PyTorch's default stream), not the context's own: to go back to the stream the
 * context started with, pass what nn_ctx_get_stream() answered then. cudaStreamPerThread names
 * the calling thread's default stream at each call, so a context set to it must stay on that
 * thread. The stream must belong to the context's device and must not be capturing a CUDA graph.
 * Graph replays (recurrent layers, linear products) need a stream made with cudaStreamNonBlocking
 * (as the context's own and PyTorch's side streams are): on a blocking one, or either default
 * stream, every call runs eagerly. Passing the current stream again costs nothing; a switch costs a
 * few CUDA calls on the host (an event recorded on the stream left behind, no wait).
 *
 * Ordering (no host synchronisation anywhere):
 * - Memory the context frees (workspaces, tensors freed through it, a pullback's buffers) is
 *   freed in the order of the context's stream at the time of the free, as with cudaFreeAsync:
 *   work on other streams that still uses it must be ordered before that point by the caller
 *   (cudaStreamWaitEvent). nnprim's own buffers obey this by themselves.
 * - The stream left behind is given up by the pool: the blocks it cached go to other streams once
 *   the work queued on it before the switch has finished, and its handle is not used again, so
 *   the caller may destroy it after the switch (unless a live pullback was made on it, below).
 * - Pullbacks: a backward call (or *_pullback_free) on another stream than the forward's makes
 *   its stream wait for the forward's (an event recorded on the forward's stream at that moment
 *   and cudaStreamWaitEvent), so the gradients are those of one stream, bit for bit where the
 *   settings are deterministic. The forward's stream must therefore still exist when the
 *   pullback is consumed or freed. The caller's own tensors are the caller's to order: dy must be
 *   ready on the backward's stream, and the forward's inputs must not be overwritten before the
 *   backward has run.
 * - The calls of one context keep their order across streams where they share state: recurrent
 *   layers' replay buffers and dropout states, the ones the bias gradients of linear and of
 *   bf16 convolution keep per shape, and cross-entropy's zeros (such a call on a new stream
 *   waits for the context's last one).
 *
 * Thread rule as for every call of a context: not concurrently with another call of the same
 * context. A stream passed here must outlive its use: until the context is switched away from it
 * or destroyed, and until the pullbacks made on it are consumed or freed. (The context's first
 * stream, made by nn_ctx_create() or given in its settings, still lives as long as the context:
 * the context keeps using it for what must outlast a switch.)
 *
 * Reference backend: accepted and ignored (any value; the ops run on the calling thread and
 * nn_ctx_get_stream() stays NULL), so a framework may call it whatever the backend.
 *
 * @param ctx    a context.
 * @param stream a cudaStream_t of the context's device, or NULL for the legacy default stream.
 * @return NN_OK (the stream is in force);
 *         NN_E_INVALID_ARG for a NULL ctx, a stream of another device ("nn_ctx_set_stream:
 *         stream 0x... belongs to device 1, but the context computes on device 0") or a handle
 *         CUDA refuses (the message has CUDA's answer);
 *         NN_E_UNSUPPORTED for a stream that is capturing a CUDA graph;
 *         NN_E_GRAPH while a graph capture is open on the context (graph.h: it records the
 *         stream it began on);
 *         NN_E_OOM_HOST; NN_E_CUDNN if cuDNN refuses the stream.
 *         On failure the context stays on its previous stream.
 * Ownership: the stream stays the caller's.
 */
NN_API nn_status nn_ctx_set_stream(nn_ctx *ctx, void *stream);

/**
 * The stream the context's calls run on now (see nn_ctx_set_stream()).
 *
 * @param ctx a context.
 * @param out out: the cudaStream_t (NULL for the legacy default stream, and always NULL for a
 *            reference-backend context).
 * @return NN_OK; NN_E_INVALID_ARG if ctx or out is NULL.
 */
NN_API nn_status nn_ctx_get_stream(const nn_ctx *ctx, void **out);

/**
 * Wait until all work queued on the context's stream has finished.
 *
 * @param ctx a context.
 * @return NN_OK (at once for the reference backend); NN_E_INVALID_ARG if ctx is NULL;
 *         NN_E_GRAPH while a graph capture is open on the context (its calls are recorded, not
 *         run);
 *         NN_E_CUDA if the stream reports an error (possibly from an earlier asynchronous call).
 */
NN_API nn_status nn_ctx_synchronize(nn_ctx *ctx);

/**
 * The last failure of a call made with this context (see nn_last_error() for the thread's).
 *
 * @param ctx a context.
 * @param out out: a copy of the record; status NN_OK if the context has had no failure.
 * @return NN_OK; NN_E_INVALID_ARG if ctx or out is NULL.
 */
NN_API nn_status nn_ctx_last_error(const nn_ctx *ctx, nn_error_info *out);

/* ---------------------------------------------------------------------------------------------
 * Log lines (docs/VERBOSE.md)
 *
 * nnprim says three kinds of things, each as one line without a newline:
 *   - warnings ("nnprim: ..."): something did not go as asked and the call carried on (the
 *     automatic backend fell back to the reference one, a plan cache file was not usable, ...);
 *   - at verbose >= 1, one line per op call, a reproducer of the call that `nnprim check` and
 *     `nnprim bench` take back whole:
 *       nnprim_verbose,<op>,<backend>,<impl>,<cache>,<shape>,host_ms=<ms>
 *     (a failed call: nnprim_verbose,<op>,<backend>,-,-,<case>,status=<NAME>
 *     host_ms=<ms>,<message>, the case as far as the arguments were valid, or "-"),
 *     and, when a context is created, its header line "# nnprim_verbose header: nnprim
 *     <version>, backend <b>, device <d>, cuDNN <v>, math <m>, deterministic <0|1>; ..." (a '#'
 *     comment, which case files skip);
 *   - at verbose 2, one line per CUDA and cuDNN call ("nnprim_trace,..." and the cuDNN trace).
 * host_ms is the host wall time of the call: on a cuDNN context its GPU work may still be
 * queued when the call returns.
 */

/** What a log line is. */
typedef enum nn_log_kind {
    NN_LOG_WARNING = 1, /**< "nnprim: ..."; to a callback always, to stderr at verbose >= 1 */
    NN_LOG_OP = 2,      /**< an op call's verbose line or a header line (verbose >= 1) */
    NN_LOG_TRACE = 3    /**< a CUDA or cuDNN call (verbose 2) */
} nn_log_kind;

/**
 * A log callback: receives one whole line (NUL-terminated, no newline; valid only during the
 * call) and the user pointer given to nn_set_log_callback(). It may be called from any thread
 * that calls nnprim (and from a cuDNN context's background plan builder), but never by two
 * threads at once: nnprim holds a lock around it. It must therefore return promptly and must
 * not call nnprim itself.
 */
typedef void (*nn_log_fn)(nn_log_kind kind, const char *line, void *user);

/**
 * Route nnprim's log lines to fn instead of stderr, for the whole process (every context).
 *
 * Without a callback, verbose and trace lines go to stderr as the contexts' verbose levels say
 * and warnings go there only at verbose >= 1, so that nothing is printed at verbose 0. With
 * one, fn gets the same verbose and trace lines and every warning, whatever the verbose level,
 * and nothing goes to stderr.
 *
 * Thread safety: may be called at any time from any thread; once it returns, the previous
 * callback is not called again (a line being delivered to it finishes first).
 *
 * @param fn   the callback, or NULL for stderr again.
 * @param user passed to every call of fn; not owned (it must stay valid while fn is set).
 */
NN_API void nn_set_log_callback(nn_log_fn fn, void *user);

#ifdef __cplusplus
}
#endif

#endif /* NNPRIM_CONTEXT_H */

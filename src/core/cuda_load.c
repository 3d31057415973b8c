/* Loading the CUDA runtime, cuDNN and cuBLASLt at run time (see cuda_load.h): each library once,
 * on first need, by its soname (from the headers' version macros), through dlopen's own search
 * and then in the directory the build found it in; NNPRIM_CUDA_LIBS overrides that (context.h).
 * A library is usable when every function nnprim calls resolves and its version is new enough;
 * otherwise the reason is kept for nn_runtime_library_info() and the context's error message. */
#define NN__DL_NO_RENAME
#include "core/cuda_load.h"

#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/error.h"
#include "nnprim/context.h"

struct lib {
    const char *name; /* as nn_runtime_library names it */
    char soname[32];  /* "" where the build has no such library */
    const char *dir;  /* where the build found it: the last place searched */
    size_t needed;    /* oldest version accepted, in the library's own encoding */
    int (*version)(void *handle, size_t *v); /* asks the loaded library its version */
    void (*format)(size_t v, char *buf, size_t cap);
    const struct nn__dl_symbol *symbols;
    char path[512];
    size_t found; /* the version the library reported */
    int usable;
    char problem[768];
    pthread_once_t once;
};

/* cudaRuntimeGetVersion: 1000 * major + 10 * minor. */
static void format_cudart(size_t v, char *buf, size_t cap)
{
    snprintf(buf, cap, "%zu.%zu", v / 1000, v % 1000 / 10);
}

/* cudnnGetVersion, cublasLtGetVersion: 10000 * major + 100 * minor + patch. */
static void format_major_minor_patch(size_t v, char *buf, size_t cap)
{
    snprintf(buf, cap, "%zu.%zu.%zu", v / 10000, v % 10000 / 100, v % 100);
}

#if NN_HAVE_CUDA
/* A dlsym result as a function pointer: ISO C has no such conversion, POSIX guarantees that
 * their representations agree. */
static int sym(void *handle, const char *name, void *fnptr)
{
    void *f = dlsym(handle, name);
    memcpy(fnptr, &f, sizeof f);
    return f != NULL;
}

static int version_cudart(void *h, size_t *v)
{
    cudaError_t (*fn)(int *);
    int x = 0;
    if (!sym(h, "cudaRuntimeGetVersion", &fn) || fn(&x) != cudaSuccess) return 0;
    *v = (size_t)x;
    return 1;
}
#endif

#if NN_HAVE_CUDNN
static int version_size_t(void *h, const char *name, size_t *v)
{
    size_t (*fn)(void);
    if (!sym(h, name, &fn)) return 0;
    *v = fn();
    return 1;
}

static int version_cudnn(void *h, size_t *v)
{
    return version_size_t(h, "cudnnGetVersion", v);
}

static int version_cublaslt(void *h, size_t *v)
{
    return version_size_t(h, "cublasLtGetVersion", v);
}
#endif

static struct lib libs[NN__DL_COUNT] = {
    [NN__DL_CUDART] = {.name = "CUDA", .format = format_cudart, .once = PTHREAD_ONCE_INIT},
    [NN__DL_CUDNN] = {.name = "cuDNN",
                      .format = format_major_minor_patch,
                      .once = PTHREAD_ONCE_INIT},
    [NN__DL_CUBLASLT] = {.name = "cuBLASLt",
                         .format = format_major_minor_patch,
                         .once = PTHREAD_ONCE_INIT},
};

/* What the headers of this build say: sonames, versions needed, the generated tables. */
static void describe_build(void)
{
#if NN_HAVE_CUDA
    struct lib *l = &libs[NN__DL_CUDART];
    snprintf(l->soname, sizeof l->soname, "libcudart.so.%d", CUDART_VERSION / 1000);
    l->dir = NN_CUDART_DIR;
    l->needed = CUDART_VERSION / 1000 * 1000;
    l->version = version_cudart;
    l->symbols = nn__dl_symbols_cudart;
#endif
#if NN_HAVE_CUDNN
    l = &libs[NN__DL_CUDNN];
    snprintf(l->soname, sizeof l->soname, "libcudnn.so.%d", CUDNN_MAJOR);
    l->dir = NN_CUDNN_DIR;
    l->needed = CUDNN_MAJOR * 10000;
    l->version = version_cudnn;
    l->symbols = nn__dl_symbols_cudnn;
    l = &libs[NN__DL_CUBLASLT];
    snprintf(l->soname, sizeof l->soname, "libcublasLt.so.%d", CUBLAS_VER_MAJOR);
    l->dir = NN_CUBLASLT_DIR;
    l->needed = CUBLAS_VER_MAJOR * 10000;
    l->version = version_cublaslt;
    l->symbols = nn__dl_symbols_cublasLt;
#endif
}

static pthread_once_t build_once = PTHREAD_ONCE_INIT;

#if NN_HAVE_CUDA
static void *open_in(struct lib *l, const char *dir, char *err, size_t cap)
{
    char file[1024];
    snprintf(file, sizeof file, "%s/%s", dir, l->soname);
    void *h = dlopen(file, RTLD_LAZY | RTLD_LOCAL);
    if (!h) snprintf(err, cap, "%s", dlerror());
    return h;
}

/* dlopen by soname (LD_LIBRARY_PATH, the loader's cache and default directories), then in the
 * build's directory; NNPRIM_CUDA_LIBS=DIR: only in DIR; =none: not at all. */
static void *open_lib(struct lib *l)
{
    const char *env = getenv("NNPRIM_CUDA_LIBS");
    char err[512];
    if (env && !strcmp(env, "none")) {
        snprintf(l->problem, sizeof l->problem, "%s not loaded: NNPRIM_CUDA_LIBS=none", l->soname);
        return NULL;
    }
    if (env && env[0]) {
        void *h = open_in(l, env, err, sizeof err);
        if (!h)
            snprintf(l->problem, sizeof l->problem, "%s not loaded (NNPRIM_CUDA_LIBS=%s): %s",
                     l->soname, env, err);
        return h;
    }
    void *h = dlopen(l->soname, RTLD_LAZY | RTLD_LOCAL);
    if (h) return h;
    snprintf(err, sizeof err, "%s", dlerror());
    char file[1024];
    snprintf(file, sizeof file, "%s/%s", l->dir, l->soname);
    if (l->dir[0] && access(file, F_OK) == 0) {
        h = open_in(l, l->dir, err, sizeof err);
        if (h) return h;
        snprintf(l->problem, sizeof l->problem, "%s not loaded: %s", l->soname, err);
    } else {
        snprintf(l->problem, sizeof l->problem, "%s not loaded: %s (nor found in %s)", l->soname,
                 err, l->dir[0] ? l->dir : "the build's CUDA directory");
    }
    return NULL;
}
#endif

static void load(struct lib *l)
{
    pthread_once(&build_once, describe_build);
    if (!l->soname[0]) {
        snprintf(l->problem, sizeof l->problem, "this build of nnprim has no %s",
                 l == &libs[NN__DL_CUDART] ? "CUDA" : "cuDNN");
        return;
    }
#if NN_HAVE_CUDA
    void *h = open_lib(l);
    if (!h) return;
    struct link_map *map = NULL;
    if (dlinfo(h, RTLD_DI_LINKMAP, &map) == 0 && map && map->l_name)
        snprintf(l->path, sizeof l->path, "%s", map->l_name);
    const char *where = l->path[0] ? l->path : l->soname;
    /* Kept loaded even when unusable: CUDA's libraries are not meant to be unloaded. */
    if (!l->version(h, &l->found)) {
        const char *e = dlerror();
        snprintf(l->problem, sizeof l->problem, "%s does not report its version: %s", where,
                 e ? e : "the call failed");
        return;
    }
    char have[16], need[16];
    l->format(l->found, have, sizeof have);
    l->format(l->needed, need, sizeof need);
    if (l->found < l->needed) {
        snprintf(l->problem, sizeof l->problem, "%s is version %s; nnprim needs %s or newer", where,
                 have, need);
        return;
    }
    /* The wrappers call through these pointers only once usable is set. */
    for (const struct nn__dl_symbol *s = l->symbols; s->name; s++) {
        if (!sym(h, s->name, s->slot)) {
            const char *e = dlerror();
            snprintf(l->problem, sizeof l->problem,
                     "%s (version %s) lacks %s, which nnprim calls: %s", where, have, s->name,
                     e ? e : "not found");
            return;
        }
    }
    l->usable = 1;
#endif
}

static void load_cudart(void)
{
    load(&libs[NN__DL_CUDART]);
}

static void load_cudnn(void)
{
    load(&libs[NN__DL_CUDNN]);
}

static void load_cublaslt(void)
{
    load(&libs[NN__DL_CUBLASLT]);
}

static void (*const loaders[NN__DL_COUNT])(void) = {load_cudart, load_cudnn, load_cublaslt};

int nn__dl_ready(enum nn__dl_lib lib)
{
    pthread_once(&libs[lib].once, loaders[lib]);
    return libs[lib].usable;
}

const char *nn__dl_problem(enum nn__dl_lib lib)
{
    return nn__dl_ready(lib) ? NULL : libs[lib].problem;
}

const char *nn__dl_backend_problem(void)
{
    for (int i = 0; i < NN__DL_COUNT; i++)
        if (!nn__dl_ready((enum nn__dl_lib)i)) return libs[i].problem;
    return NULL;
}

nn_status nn_runtime_library_info(int which, nn_runtime_library *out)
{
    if (!out)
        return NN__FAIL(NULL, NN_E_INVALID_ARG, "nn_runtime_library_info: out must not be NULL");
    if (which < 0 || which >= NN_RUNTIME_LIBRARY_COUNT)
        return NN__FAIL(NULL, NN_E_INVALID_ARG,
                        "nn_runtime_library_info: which must be in [0, %d), got %d",
                        NN_RUNTIME_LIBRARY_COUNT, which);
    struct lib *l = &libs[which];
    nn__dl_ready((enum nn__dl_lib)which);
    memset(out, 0, sizeof *out);
    out->name = l->name;
    out->soname = l->soname;
    out->path = l->path;
    out->version = l->found;
    out->version_needed = l->needed;
    if (l->found) l->format(l->found, out->version_text, sizeof out->version_text);
    if (l->needed) l->format(l->needed, out->version_needed_text, sizeof out->version_needed_text);
    out->usable = l->usable;
    out->problem = l->usable ? "" : l->problem;
    return NN_OK;
}

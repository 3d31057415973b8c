/* Loads libnnprim.so with dlopen(), as language bindings do, and calls a few functions through
 * dlsym(): a library with initial-exec TLS fails here with "cannot allocate memory in static TLS
 * block". Then a thread that used the library outlives its dlclose(): the thread's exit runs the
 * library's thread-exit cleanups, which must still be mapped (it is linked -z nodelete). Not
 * linked with nnprim; the library's path is the first argument. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include <nnprim/nnprim.h>

typedef const char *(*version_fn)(void);
typedef const char *(*status_string_fn)(nn_status);
typedef nn_status (*settings_from_env_fn)(nn_settings *);
typedef nn_status (*ctx_create_fn)(nn_ctx **, const nn_settings *);
typedef void (*ctx_destroy_fn)(nn_ctx *);
typedef nn_status (*tensor_empty_fn)(nn_ctx *, nn_dtype, int, const int64_t *, nn_tensor *);
typedef nn_status (*tensor_fill_fn)(nn_ctx *, nn_tensor *, double);
typedef nn_status (*tensor_free_fn)(nn_ctx *, nn_tensor *);

static void *lib;

/* The thread that outlives the dlclose(): it allocates through the library, then waits. */
struct late {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int used, go;
    ctx_create_fn ctx_create;
    ctx_destroy_fn ctx_destroy;
    settings_from_env_fn settings_from_env;
};

static void *late_thread(void *arg)
{
    struct late *l = arg;
    nn_settings s;
    l->settings_from_env(&s);
    s.backend = NN_BACKEND_REF;
    nn_ctx *ctx;
    int ok = l->ctx_create(&ctx, &s) == NN_OK;
    if (ok) l->ctx_destroy(ctx);
    pthread_mutex_lock(&l->mu);
    l->used = ok ? 1 : -1;
    pthread_cond_broadcast(&l->cv);
    while (!l->go)
        pthread_cond_wait(&l->cv, &l->mu);
    pthread_mutex_unlock(&l->mu);
    return NULL;
}

/* Stores a function's address in *fn (a function pointer): ISO C has no conversion from dlsym()'s
 * void * to a function pointer, POSIX guarantees the representations agree. 0 (printed) if absent.
 */
static int sym(void *fn, const char *name)
{
    void *f = dlsym(lib, name);
    if (!f) fprintf(stderr, "dlsym %s: %s\n", name, dlerror());
    memcpy(fn, &f, sizeof f);
    return f != NULL;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s LIBNNPRIM\n", argv[0]);
        return 2;
    }
    lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        fprintf(stderr, "dlopen %s: %s\n", argv[1], dlerror());
        return 1;
    }
    version_fn version;
    status_string_fn status_string;
    settings_from_env_fn settings_from_env;
    ctx_create_fn ctx_create;
    ctx_destroy_fn ctx_destroy;
    tensor_empty_fn tensor_empty;
    tensor_fill_fn tensor_fill;
    tensor_free_fn tensor_free;
    if (!sym(&version, "nn_version") || !sym(&status_string, "nn_status_string") ||
        !sym(&settings_from_env, "nn_settings_from_env") || !sym(&ctx_create, "nn_ctx_create") ||
        !sym(&ctx_destroy, "nn_ctx_destroy") || !sym(&tensor_empty, "nn_tensor_empty") ||
        !sym(&tensor_fill, "nn_tensor_fill_constant") || !sym(&tensor_free, "nn_tensor_free"))
        return 1;

    int bad = 0;
    if (strcmp(version(), NNPRIM_VERSION_STRING) != 0) {
        fprintf(stderr, "nn_version() = %s, headers %s\n", version(), NNPRIM_VERSION_STRING);
        bad = 1;
    }
    if (strcmp(status_string(NN_E_SHAPE), "tensor shapes do not agree") != 0) {
        fprintf(stderr, "nn_status_string(NN_E_SHAPE) = %s\n", status_string(NN_E_SHAPE));
        bad = 1;
    }
    nn_settings s;
    settings_from_env(&s);
    s.backend = NN_BACKEND_REF;
    nn_ctx *ctx;
    nn_status st = ctx_create(&ctx, &s);
    if (st != NN_OK) {
        fprintf(stderr, "nn_ctx_create: %s\n", status_string(st));
        return 1;
    }
    int64_t dims[2] = {3, 5};
    nn_tensor t;
    st = tensor_empty(ctx, NN_DTYPE_F32, 2, dims, &t);
    if (st == NN_OK) st = tensor_fill(ctx, &t, 2.5);
    if (st == NN_OK && ((const float *)t.data)[14] != 2.5f) {
        fprintf(stderr, "the tensor's last element is %g, expected 2.5\n",
                ((const float *)t.data)[14]);
        bad = 1;
    }
    if (st != NN_OK) {
        fprintf(stderr, "tensor: %s\n", status_string(st));
        bad = 1;
    } else if (tensor_free(ctx, &t) != NN_OK) {
        bad = 1;
    }
    ctx_destroy(ctx);
    struct late l = {
        PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0, ctx_create, ctx_destroy,
        settings_from_env};
    pthread_t th;
    int started = pthread_create(&th, NULL, late_thread, &l) == 0;
    if (!started) {
        fprintf(stderr, "pthread_create failed\n");
        bad = 1;
    }
    pthread_mutex_lock(&l.mu);
    while (started && !l.used)
        pthread_cond_wait(&l.cv, &l.mu);
    pthread_mutex_unlock(&l.mu);
    if (l.used < 0) {
        fprintf(stderr, "the second thread's nn_ctx_create failed\n");
        bad = 1;
    }
    if (dlclose(lib) != 0) {
        fprintf(stderr, "dlclose: %s\n", dlerror());
        bad = 1;
    }
    if (started) { /* the thread exits after the close: a crash here fails the test */
        pthread_mutex_lock(&l.mu);
        l.go = 1;
        pthread_cond_broadcast(&l.cv);
        pthread_mutex_unlock(&l.mu);
        pthread_join(th, NULL);
    }
    if (!bad) printf("dlopen %s: ok\n", argv[1]);
    return bad;
}

/* The CUDA runtime, cuDNN and cuBLASLt as libnnprim loads them at run time, seen through the
 * public API (and the CLI's `nnprim info`), with NNPRIM_CUDA_LIBS set by the test:
 *
 *   runtime_libs present NNPRIM            unset: in a CUDA build all three load (they are
 *                                          installed where the build found them)
 *   runtime_libs absent NNPRIM TEXT        none, or a directory without them: nothing loads,
 *                                          each problem contains TEXT; nn_device_count() is 0,
 *                                          AUTO runs the reference backend, a convolution
 *                                          runs there, CUDNN fails with NN_E_NO_DEVICE naming
 *                                          the library; `nnprim info` exits 0 and says why
 *   runtime_libs fake NNPRIM               tests/link/fake_lib.c's stand-ins: a CUDA runtime
 *                                          lacking nnprim's functions, a cuDNN too old, no
 *                                          cuBLASLt; each reason is told
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <nnprim/nnprim.h>

static int bad;

#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);                                   \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fputc('\n', stderr);                                                                   \
            bad = 1;                                                                               \
        }                                                                                          \
    } while (0)

static int have_cuda(void)
{
    return (nn_build_features() & NN_FEATURE_CUDA) != 0;
}

static nn_runtime_library info(int which)
{
    nn_runtime_library l;
    memset(&l, 0, sizeof l);
    nn_status st = nn_runtime_library_info(which, &l);
    CHECK(st == NN_OK, "nn_runtime_library_info(%d): %s", which, nn_status_name(st));
    CHECK(l.name && l.soname && l.path && l.problem, "library %d: a NULL string", which);
    return l;
}

static void check_present(void)
{
    for (int i = 0; i < NN_RUNTIME_LIBRARY_COUNT; i++) {
        nn_runtime_library l = info(i);
        int built =
            have_cuda() && (i == NN_RUNTIME_CUDART || (nn_build_features() & NN_FEATURE_CUDNN));
        if (!built) {
            CHECK(!l.usable && strstr(l.problem, "this build of nnprim has no"),
                  "%s: usable=%d problem '%s'", l.name, l.usable, l.problem);
            continue;
        }
        CHECK(l.usable, "%s (%s) is not usable: %s", l.name, l.soname, l.problem);
        CHECK(l.path[0] && strstr(l.path, l.soname), "%s: path '%s'", l.name, l.path);
        CHECK(l.version >= l.version_needed && l.version_needed > 0, "%s: version %zu, needed %zu",
              l.name, l.version, l.version_needed);
        CHECK(l.version_text[0] && l.version_needed_text[0], "%s: no version text", l.name);
        CHECK(!l.problem[0], "%s: usable but problem '%s'", l.name, l.problem);
        printf("%s: %s %s from %s\n", l.name, l.soname, l.version_text, l.path);
    }
    if (have_cuda() && (nn_build_features() & NN_FEATURE_CUDNN)) {
        nn_runtime_library l = info(NN_RUNTIME_CUDNN);
        CHECK(nn_cudnn_runtime_version() == l.version, "nn_cudnn_runtime_version() %zu, info %zu",
              nn_cudnn_runtime_version(), l.version);
    }
}

static int conv_on_ref(nn_ctx *ctx)
{
    int64_t xd[4] = {1, 1, 4, 4}, wd[4] = {1, 1, 3, 3}, yd[4] = {1, 1, 2, 2};
    nn_tensor x, w, y;
    memset(&x, 0, sizeof x);
    memset(&w, 0, sizeof w);
    memset(&y, 0, sizeof y);
    nn_conv_params p;
    nn_conv_params_default(&p, 2);
    nn_status st;
    int ok = 0;
    if ((st = nn_tensor_empty(ctx, NN_DTYPE_F32, 4, xd, &x)) == NN_OK &&
        (st = nn_tensor_empty(ctx, NN_DTYPE_F32, 4, wd, &w)) == NN_OK &&
        (st = nn_tensor_empty(ctx, NN_DTYPE_F32, 4, yd, &y)) == NN_OK &&
        (st = nn_tensor_fill_constant(ctx, &x, 1)) == NN_OK &&
        (st = nn_tensor_fill_constant(ctx, &w, 1)) == NN_OK &&
        (st = nn_conv_forward(ctx, &p, &x, &w, NULL, &y, NULL)) == NN_OK) {
        const float *out = (const float *)y.data;
        ok = out[0] == 9.0f && out[1] == 9.0f && out[2] == 9.0f && out[3] == 9.0f;
    }
    CHECK(ok, "reference convolution: %s %s", nn_status_name(st), nn_last_error()->message);
    nn_tensor_free(ctx, &x);
    nn_tensor_free(ctx, &w);
    nn_tensor_free(ctx, &y);
    return ok;
}

/* `nnprim info` exits 0 and prints each library's problem. */
static void check_cli(const char *cli)
{
    char cmd[1024], out[8192];
    snprintf(cmd, sizeof cmd, "'%s' info 2>&1", cli);
    FILE *p = popen(cmd, "r");
    CHECK(p, "popen %s", cmd);
    if (!p) return;
    size_t n = fread(out, 1, sizeof out - 1, p);
    out[n] = '\0';
    int rc = pclose(p);
    CHECK(rc == 0, "%s exited with %d:\n%s", cmd, rc, out);
    CHECK(strstr(out, "backend:        ref"), "%s: no reference backend in:\n%s", cmd, out);
    for (int i = 0; i < NN_RUNTIME_LIBRARY_COUNT; i++) {
        nn_runtime_library l = info(i);
        char line[1024];
        snprintf(line, sizeof line, "%s runtime:", l.name);
        CHECK(strstr(out, line), "%s: no '%s' in:\n%s", cmd, line, out);
        snprintf(line, sizeof line, "none: %s\n", l.problem);
        CHECK(strstr(out, line), "%s: no '%s' in:\n%s", cmd, line, out);
    }
    printf("%s", out);
}

static void check_absent(const char *text, const char *cli)
{
    for (int i = 0; i < NN_RUNTIME_LIBRARY_COUNT; i++) {
        nn_runtime_library l = info(i);
        CHECK(!l.usable, "%s is usable with NNPRIM_CUDA_LIBS=%s", l.name,
              getenv("NNPRIM_CUDA_LIBS"));
        CHECK(!l.path[0] && l.version == 0 && !l.version_text[0], "%s: path '%s' version %zu",
              l.name, l.path, l.version);
        if (have_cuda() && l.soname[0]) {
            CHECK(strstr(l.problem, l.soname) && strstr(l.problem, text),
                  "%s: problem '%s' lacks '%s' or '%s'", l.name, l.problem, l.soname, text);
        } else {
            CHECK(strstr(l.problem, "this build of nnprim has no"), "%s: problem '%s'", l.name,
                  l.problem);
        }
    }
    int count = -1;
    CHECK(nn_device_count(&count) == NN_OK && count == 0, "nn_device_count: %d", count);
    CHECK(nn_cudnn_runtime_version() == 0, "nn_cudnn_runtime_version() = %zu",
          nn_cudnn_runtime_version());
    nn_device_info d;
    nn_status st = nn_device_get_info(0, &d);
    if (have_cuda()) {
        nn_runtime_library rt = info(NN_RUNTIME_CUDART);
        CHECK(st == NN_E_NO_DEVICE && strstr(nn_last_error()->message, rt.problem),
              "nn_device_get_info(0): %s '%s'", nn_status_name(st), nn_last_error()->message);
    } else {
        CHECK(st == NN_E_NOT_BUILT, "nn_device_get_info(0): %s", nn_status_name(st));
    }

    nn_settings s;
    nn_settings_defaults(&s);
    s.backend = NN_BACKEND_CUDNN;
    nn_ctx *ctx = (nn_ctx *)&s;
    st = nn_ctx_create(&ctx, &s);
    const char *msg = nn_last_error()->message;
    CHECK(ctx == NULL, "a failed nn_ctx_create left out set");
    if (!(nn_build_features() & NN_FEATURE_CUDNN)) {
        CHECK(st == NN_E_NOT_BUILT, "backend cudnn: %s", nn_status_name(st));
    } else {
        nn_runtime_library rt = info(NN_RUNTIME_CUDART);
        char want[1024];
        snprintf(want, sizeof want, "nn_ctx_create: backend cudnn requested, but %s", rt.problem);
        CHECK(st == NN_E_NO_DEVICE, "backend cudnn: %s (%s)", nn_status_name(st), msg);
        CHECK(!strcmp(msg, want), "backend cudnn: message '%s', expected '%s'", msg, want);
    }

    s.backend = NN_BACKEND_AUTO;
    st = nn_ctx_create(&ctx, &s);
    CHECK(st == NN_OK, "backend auto: %s %s", nn_status_name(st), nn_last_error()->message);
    if (st == NN_OK) {
        CHECK(nn_ctx_backend(ctx) == NN_BACKEND_REF, "auto gave backend %d",
              (int)nn_ctx_backend(ctx));
        conv_on_ref(ctx);
        nn_ctx_destroy(ctx);
    }
    if (cli) check_cli(cli);
}

/* The stand-ins of fake_lib.c: each failure is told with its reason. */
static void check_fake(void)
{
    nn_runtime_library rt = info(NN_RUNTIME_CUDART), dnn = info(NN_RUNTIME_CUDNN),
                       lt = info(NN_RUNTIME_CUBLASLT);
    CHECK(!rt.usable && rt.path[0] && rt.version == rt.version_needed &&
              strstr(rt.problem, "lacks cuda") && strstr(rt.problem, "which nnprim calls"),
          "fake CUDA runtime: usable=%d version %zu path '%s' problem '%s'", rt.usable, rt.version,
          rt.path, rt.problem);
    CHECK(!dnn.usable && dnn.version == 80907 && !strcmp(dnn.version_text, "8.9.7") &&
              strstr(dnn.problem, "is version 8.9.7; nnprim needs 9.0.0 or newer"),
          "fake cuDNN: usable=%d version %zu '%s' problem '%s'", dnn.usable, dnn.version,
          dnn.version_text, dnn.problem);
    CHECK(!lt.usable && lt.version == 0 && strstr(lt.problem, "cannot open shared object file"),
          "missing cuBLASLt: usable=%d problem '%s'", lt.usable, lt.problem);
    CHECK(nn_cudnn_runtime_version() == 0, "an unusable cuDNN gives version %zu",
          nn_cudnn_runtime_version());
    nn_settings s;
    nn_settings_defaults(&s);
    s.backend = NN_BACKEND_CUDNN;
    nn_ctx *ctx;
    nn_status st = nn_ctx_create(&ctx, &s);
    CHECK(st == NN_E_NO_DEVICE && strstr(nn_last_error()->message, rt.problem),
          "backend cudnn on the fakes: %s %s", nn_status_name(st), nn_last_error()->message);
    printf("fakes: %s | %s | %s\n", rt.problem, dnn.problem, lt.problem);
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: %s present|absent|fake NNPRIM [TEXT]\n", argv[0]);
        return 2;
    }
    nn_runtime_library l;
    CHECK(nn_runtime_library_info(-1, &l) == NN_E_INVALID_ARG, "which -1 accepted");
    CHECK(nn_runtime_library_info(NN_RUNTIME_LIBRARY_COUNT, &l) == NN_E_INVALID_ARG,
          "which COUNT accepted");
    CHECK(nn_runtime_library_info(0, NULL) == NN_E_INVALID_ARG, "out NULL accepted");
    if (!strcmp(argv[1], "present"))
        check_present();
    else if (!strcmp(argv[1], "absent") && argc == 4)
        check_absent(argv[3], argv[2]);
    else if (!strcmp(argv[1], "fake"))
        check_fake();
    else
        return fprintf(stderr, "bad arguments\n"), 2;
    if (!bad) printf("ok: %s (NNPRIM_CUDA_LIBS=%s)\n", argv[1], getenv("NNPRIM_CUDA_LIBS"));
    return bad;
}

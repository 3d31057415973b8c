/* The generated cuDNN bindings: the committed file matches what the generator writes from the
 * installed headers, the generator refuses an incomplete spec, failures are recorded with the
 * function, cuDNN's status and message and the call site, verbose level 2 traces every call.
 * None of this needs a GPU: cuDNN's descriptor calls run on the host. */
#include <criterion/criterion.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "nn_config.h"

#include "core/ctx.h"
#include "cudnn/bindings_cudnn.h"

static int have_python(void)
{
    return system("command -v python3 >/dev/null 2>&1") == 0;
}

static int have_headers(void)
{
    return access(NN_CUDA_INCLUDE_DIR "/cudnn_graph_v9.h", R_OK) == 0;
}

static char *read_all(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = malloc((size_t)n + 1);
    size_t got = fread(s, 1, (size_t)n, f);
    fclose(f);
    s[got] = '\0';
    *len = got;
    return s;
}

/* The first line where a and b differ (1-based), or 0 if they are equal. */
static int first_diff_line(const char *a, size_t na, const char *b, size_t nb)
{
    int line = 1;
    size_t i = 0;
    for (; i < na && i < nb && a[i] == b[i]; i++)
        if (a[i] == '\n') line++;
    return i == na && i == nb ? 0 : line;
}

static int run_generator(const char *spec, const char *outdir, char *err, size_t errcap)
{
    char cmd[4096], errpath[256];
    snprintf(errpath, sizeof errpath, "%s/stderr.txt", outdir);
    snprintf(cmd, sizeof cmd,
             "python3 '%s/tools/gen_cudnn_bindings.py' --include '%s' %s%s%s --out '%s' 2>'%s'",
             NN_SOURCE_ROOT, NN_CUDA_INCLUDE_DIR, spec ? "--spec '" : "", spec ? spec : "",
             spec ? "'" : "", outdir, errpath);
    int rc = system(cmd);
    size_t n;
    char *e = read_all(errpath, &n);
    snprintf(err, errcap, "%s", e ? e : "");
    free(e);
    return rc;
}

static void make_tmpdir(char *dir, size_t cap)
{
    snprintf(dir, cap, "/tmp/nn_bindings_XXXXXX");
    cr_assert_not_null(mkdtemp(dir));
}

static void remove_tmpdir(const char *dir)
{
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    cr_expect_eq(system(cmd), 0);
}

Test(cudnn_bindings, committed_file_matches_the_generator)
{
    if (!have_python()) cr_skip_test("python3 is not installed");
    if (!have_headers()) cr_skip_test("no cuDNN 9 headers under %s", NN_CUDA_INCLUDE_DIR);
    if (CUDNN_VERSION != NN_CUDNN_BINDINGS_HEADER_VERSION)
        cr_skip_test("the committed bindings come from cuDNN %d headers, these are %d: "
                     "regenerate with tools/gen_cudnn_bindings.py to compare",
                     NN_CUDNN_BINDINGS_HEADER_VERSION, CUDNN_VERSION);
    char dir[64], err[4096];
    make_tmpdir(dir, sizeof dir);
    cr_assert_eq(run_generator(NULL, dir, err, sizeof err), 0, "generator failed: %s", err);
    static const char *const files[] = {"bindings_cudnn.h", "bindings_cudnn.c"};
    for (int i = 0; i < 2; i++) {
        char fresh[256], committed[512];
        snprintf(fresh, sizeof fresh, "%s/%s", dir, files[i]);
        snprintf(committed, sizeof committed, "%s/src/cudnn/%s", NN_SOURCE_ROOT, files[i]);
        size_t na, nb;
        char *a = read_all(fresh, &na), *b = read_all(committed, &nb);
        cr_assert_not_null(a, "generator wrote no %s", fresh);
        cr_assert_not_null(b, "cannot read %s", committed);
        int line = first_diff_line(a, na, b, nb);
        cr_expect_eq(line, 0,
                     "src/cudnn/%s differs from the generator's output from line %d: "
                     "regenerate with tools/gen_cudnn_bindings.py --include %s --out src/cudnn",
                     files[i], line, NN_CUDA_INCLUDE_DIR);
        free(a);
        free(b);
    }
    remove_tmpdir(dir);
}

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f);
    fputs(text, f);
    fclose(f);
}

Test(cudnn_bindings, generator_refuses_incomplete_or_wrong_specs)
{
    if (!have_python()) cr_skip_test("python3 is not installed");
    if (!have_headers()) cr_skip_test("no cuDNN 9 headers under %s", NN_CUDA_INCLUDE_DIR);
    static const struct {
        const char *spec, *expect;
    } cases[] = {
        {"cudnnPoolingForward alpha:in x:dev beta:in\n",
         "pointer argument y of cudnnPoolingForward"},
        {"cudnnNoSuchCall\n", "cudnnNoSuchCall is not declared"},
        {"cudnnBackendFinalize descriptor:dev\n",
         "descriptor of cudnnBackendFinalize is not a pointer"},
        {"cudnnGetErrorString\n", "list it under 'uses'"},
        {"uses cudnnGetVersion int\n", "returns 'size_t'"},
        {"cudnnSetTensorNdDescriptor dimA:in[count] strideA:in\n",
         "count count is not an argument"},
    };
    char dir[64];
    make_tmpdir(dir, sizeof dir);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char spec[128], err[4096];
        snprintf(spec, sizeof spec, "%s/spec.txt", dir);
        write_file(spec, cases[i].spec);
        cr_expect_neq(run_generator(spec, dir, err, sizeof err), 0, "spec %s was accepted",
                      cases[i].spec);
        cr_expect(strstr(err, cases[i].expect), "spec %s: expected '%s' in: %s", cases[i].spec,
                  cases[i].expect, err);
    }
    remove_tmpdir(dir);
}

/* Sizes stay as wide as cuDNN's: every byte-size parameter of the generated header (workspace,
 * reserve and weight space sizes, sizes in bytes) is size_t or int64_t, or a pointer to one. */
Test(cudnn_bindings, size_parameters_are_64_bit)
{
    char path[512];
    snprintf(path, sizeof path, "%s/src/cudnn/bindings_cudnn.h", NN_SOURCE_ROOT);
    size_t n;
    char *h = read_all(path, &n);
    cr_assert_not_null(h, "cannot read %s", path);
    int checked = 0;
    for (char *line = strtok(h, "\n"); line; line = strtok(NULL, "\n")) {
        if (strncmp(line, "nn_status nn__cudnn_", 20) != 0) continue;
        char *args = strchr(line, '(');
        for (char *p = args; p && *p;) {
            char *end = strpbrk(p + 1, ",)");
            if (!end) break;
            char param[256];
            size_t len = (size_t)(end - p - 1);
            snprintf(param, sizeof param, "%.*s", (int)len, p + 1);
            const char *name = strrchr(param, ' ');
            name = name ? name + 1 : param;
            if (*name == '*') name++;
            if (strstr(name, "SpaceSize") || strstr(name, "InBytes")) {
                checked++;
                const char *t = param;
                while (*t == ' ')
                    t++;
                if (!strncmp(t, "const ", 6)) t += 6;
                cr_expect(!strncmp(t, "size_t", 6) || !strncmp(t, "int64_t", 7),
                          "%s: size parameter '%s' is not 64-bit", line, param);
            }
            p = *end == ')' ? NULL : end;
        }
    }
    cr_expect_gt(checked, 10, "only %d size parameters found", checked);
    free(h);
}

Test(cudnn_bindings, status_mapping)
{
    cr_expect_eq(nn__cudnn_status_to_nn(CUDNN_STATUS_SUCCESS), NN_OK);
    cr_expect_eq(nn__cudnn_status_to_nn(CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED),
                 NN_E_OOM_HOST);
    cr_expect_eq(nn__cudnn_status_to_nn(CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED),
                 NN_E_OOM_DEVICE);
    cr_expect_eq(nn__cudnn_status_to_nn(CUDNN_STATUS_NOT_SUPPORTED), NN_E_UNSUPPORTED);
    cr_expect_eq(nn__cudnn_status_to_nn(CUDNN_STATUS_NOT_SUPPORTED_SHAPE), NN_E_UNSUPPORTED);
    cr_expect_eq(nn__cudnn_status_to_nn(CUDNN_STATUS_BAD_PARAM_NULL_POINTER), NN_E_CUDNN);
    cr_expect_eq(nn__cudnn_status_to_nn(CUDNN_STATUS_EXECUTION_FAILED), NN_E_CUDNN);
}

Test(cudnn_bindings, enum_names_come_from_the_headers)
{
    cr_expect_str_eq(nn__cudnn_BackendAttributeName_name(CUDNN_ATTR_TENSOR_UNIQUE_ID),
                     "CUDNN_ATTR_TENSOR_UNIQUE_ID");
    cr_expect_str_eq(nn__cudnn_BackendKnobType_name(CUDNN_KNOB_TYPE_TILE_SIZE),
                     "CUDNN_KNOB_TYPE_TILE_SIZE");
    cr_expect_str_eq(nn__cudnn_DataType_name(CUDNN_DATA_BFLOAT16), "CUDNN_DATA_BFLOAT16");
    /* A deprecated alias never replaces the current name. */
    cr_expect_str_eq(nn__cudnn_Status_name(CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED),
                     "CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED");
    cr_expect_null(nn__cudnn_BackendKnobType_name(-5));
    cr_expect_null(nn__cudnn_Status_name(123456));
}

Test(cudnn_bindings, failure_records_call_status_message_and_site)
{
    struct nn_ctx ctx;
    memset(&ctx, 0, sizeof ctx);
    nn_clear_last_error();
    int line = __LINE__ + 1;
    nn_status st = nn__cudnn_BackendFinalize(&ctx, NULL);
    cr_assert_eq(st, NN_E_CUDNN, "got %s", nn_status_name(st));
    const nn_error_info *e = nn_last_error();
    cr_expect_eq(e->status, NN_E_CUDNN);
    cr_expect_str_eq(e->call, "cudnnBackendFinalize");
    cr_expect_eq(e->raw_status, CUDNN_STATUS_BAD_PARAM_NULL_POINTER);
    cr_expect_str_eq(e->raw_name, "CUDNN_STATUS_BAD_PARAM_NULL_POINTER");
    cr_expect_str_eq(e->file, "test_bindings.c");
    cr_expect_eq(e->line, line);
    cr_expect(
        strstr(e->message, "cudnnBackendFinalize failed: CUDNN_STATUS_BAD_PARAM_NULL_POINTER"),
        "message: %s", e->message);
    /* cudnnGetLastErrorString's text follows the status name. */
    cr_expect(strlen(e->message) > strlen("cudnnBackendFinalize failed: "
                                          "CUDNN_STATUS_BAD_PARAM_NULL_POINTER (2002)"),
              "no cuDNN detail in: %s", e->message);
    cr_expect_eq(ctx.last_error.status, NN_E_CUDNN);
    cr_expect_str_eq(ctx.last_error.call, "cudnnBackendFinalize");
}

/* Run fn with stderr captured into buf. */
static void capture_stderr(void (*fn)(struct nn_ctx *), struct nn_ctx *ctx, char *buf, size_t cap)
{
    fflush(stderr);
    FILE *tmp = tmpfile();
    cr_assert_not_null(tmp);
    int saved = dup(2);
    dup2(fileno(tmp), 2);
    fn(ctx);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    rewind(tmp);
    size_t n = fread(buf, 1, cap - 1, tmp);
    buf[n] = '\0';
    fclose(tmp);
}

static void make_tensor_desc(struct nn_ctx *ctx)
{
    cudnnBackendDescriptor_t d = NULL;
    int64_t dims[4] = {2, 3, 5, 7};
    cr_assert_eq(nn__cudnn_BackendCreateDescriptor(ctx, CUDNN_BACKEND_TENSOR_DESCRIPTOR, &d),
                 NN_OK);
    cr_assert_eq(nn__cudnn_BackendSetAttribute(ctx, d, CUDNN_ATTR_TENSOR_DIMENSIONS,
                                               CUDNN_TYPE_INT64, 4, dims),
                 NN_OK);
    cr_assert_eq(nn__cudnn_BackendFinalize(ctx, d), NN_E_CUDNN); /* incomplete: no strides etc. */
    cr_assert_eq(nn__cudnn_BackendDestroyDescriptor(ctx, d), NN_OK);
}

Test(cudnn_bindings, verbose_2_traces_every_call_with_arguments)
{
    struct nn_ctx ctx;
    memset(&ctx, 0, sizeof ctx);
    ctx.settings.verbose = 2;
    char out[8192];
    capture_stderr(make_tensor_desc, &ctx, out, sizeof out);
    cr_expect(strstr(out, "nnprim_trace,cudnnBackendCreateDescriptor(descriptorType="
                          "CUDNN_BACKEND_TENSOR_DESCRIPTOR, descriptor=0x"),
              "trace: %s", out);
    cr_expect(strstr(out, "nnprim_trace,cudnnBackendSetAttribute(descriptor=0x"), "trace: %s", out);
    cr_expect(strstr(out, "attributeName=CUDNN_ATTR_TENSOR_DIMENSIONS, "
                          "attributeType=CUDNN_TYPE_INT64, elementCount=4, arrayOfElements=0x"),
              "trace: %s", out);
    cr_expect(strstr(out, ") -> CUDNN_STATUS_SUCCESS "), "trace: %s", out);
    cr_expect(strstr(out, "nnprim_trace,cudnnBackendFinalize(descriptor=0x"), "trace: %s", out);
    cr_expect(strstr(out, ") -> CUDNN_STATUS_BAD_PARAM"), "trace: %s", out);
    cr_expect(strstr(out, " ms\n"), "trace: %s", out);
    int lines = 0;
    for (const char *p = out; (p = strstr(p, "nnprim_trace,")); p++)
        lines++;
    cr_expect_eq(lines, 4, "expected one line per call, got %d: %s", lines, out);

    ctx.settings.verbose = 1;
    capture_stderr(make_tensor_desc, &ctx, out, sizeof out);
    cr_expect_null(strstr(out, "nnprim_trace"), "level 1 traced: %s", out);
}

/* Debug builds check device-pointer arguments before calling cuDNN: a host pointer is refused
 * with the function and argument named (on a machine without a GPU, the check itself fails and
 * says so: the pointer is refused either way). NULL is left to cuDNN. */
Test(cudnn_bindings, debug_builds_refuse_host_pointers_as_device_memory)
{
#if NN_DEBUG_CHECKS
    struct nn_ctx ctx;
    memset(&ctx, 0, sizeof ctx);
    float alpha = 1, beta = 0, host_x[4] = {0}, host_y[4] = {0};
    nn_status st =
        nn__cudnn_PoolingForward(&ctx, NULL, NULL, &alpha, NULL, host_x, &beta, NULL, host_y);
    cr_expect_eq(st, NN_E_MEMSPACE, "got %s", nn_status_name(st));
    cr_expect_str_eq(ctx.last_error.call, "cudnnPoolingForward");
    cr_expect(strstr(ctx.last_error.message, "argument x = "), "message: %s",
              ctx.last_error.message);
    st = nn__cudnn_PoolingForward(&ctx, NULL, NULL, &alpha, NULL, NULL, &beta, NULL, NULL);
    cr_expect_eq(st, NN_E_CUDNN, "NULL device pointers reach cuDNN, got %s", nn_status_name(st));
#else
    cr_skip_test("device-pointer checks are compiled only in debug builds (NN_DEBUG_CHECKS)");
#endif
}

/* `nnprim check rnn`: the recurrent correctness harness from the command line (the same code as
 * the rnn_ref and rnn_cudnn test suites). */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "tests/harness/rnn_case.h"

static int usage(FILE *to)
{
    fprintf(to,
            "usage: nnprim check rnn [--ref-only] [--gpu-matrix] [--shapes FILE | CASE TOKENS...]\n"
            "\n"
            "Runs the recurrent correctness harness: the reference backend's gradients against\n"
            "central finite differences (f64) and guard elements around every output; with a GPU,\n"
            "also the cuDNN path against the reference on the same inputs. Without a case, the\n"
            "standard cases run (--gpu-matrix: the GPU test suite's case matrix). A case is one\n"
            "line of docs/RNN.md syntax, or a whole NNPRIM_VERBOSE=1 line of an RNN call, e.g.\n"
            "  nnprim check rnn lstm t5n3i4h6 l2 bidir proj3 bias_double seq lens5x2x0 f32\n"
            "Each failure prints one line ending in a reproducer. Exit status 1 on any failure.\n");
    return to == stdout ? 0 : 2;
}

struct runner {
    nn_ctx *ref, *gpu[2]; /* gpu[math mode], created on first use */
    int use_gpu;
    int cases, failures;
};

static nn_ctx *make_ctx(nn_backend backend, nn_math_mode math)
{
    nn_settings s;
    if (nn_default_settings(&s) != NN_OK) return NULL;
    s.backend = backend;
    s.math_mode = math;
    nn_ctx *ctx = NULL;
    if (nn_ctx_create(&ctx, &s) != NN_OK)
        fprintf(stderr, "nnprim check rnn: cannot create a %s context: %s\n",
                backend == NN_BACKEND_REF ? "reference" : "cuDNN", nn_last_error()->message);
    return ctx;
}

static void run_one(struct runner *r, const struct nn_rnn_case *c)
{
    int fails = nn_rnn_check_reference(r->ref, c, stdout);
    if (r->use_gpu) {
        nn_ctx **g = &r->gpu[c->math == NN_MATH_TF32];
        if (!*g) *g = make_ctx(NN_BACKEND_CUDNN, c->math);
        fails += *g ? nn_rnn_check_backend(*g, r->ref, c, stdout) : 1;
    }
    char text[16384];
    nn_rnn_case_format(c, text, sizeof text);
    printf("%s %s\n", fails ? "FAIL" : "ok  ", text);
    r->cases++;
    r->failures += fails != 0;
}

static int run_file(struct runner *r, const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "nnprim check rnn: cannot open %s\n", path);
        return -1;
    }
    static char line[16384];
    char err[256];
    int lineno = 0, rc = 0;
    while (fgets(line, sizeof line, f)) {
        static struct nn_rnn_case c;
        lineno++;
        int got = nn_rnn_case_parse_line(line, &c, err, sizeof err);
        if (got < 0) {
            fprintf(stderr, "nnprim check rnn: %s:%d: %s\n", path, lineno, err);
            rc = -1;
            break;
        }
        if (got) run_one(r, &c);
    }
    fclose(f);
    return rc;
}

int nn_cli_check_rnn(int argc, char **argv)
{
    struct runner r = {0};
    const char *shapes = NULL;
    int first_case = argc, ref_only = 0, matrix = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) return usage(stdout);
        if (!strcmp(argv[i], "--ref-only"))
            ref_only = 1;
        else if (!strcmp(argv[i], "--gpu-matrix"))
            matrix = 1;
        else if (!strcmp(argv[i], "--shapes") && i + 1 < argc)
            shapes = argv[++i];
        else if (argv[i][0] == '-')
            return usage(stderr);
        else {
            first_case = i;
            break;
        }
    }
    int ndev = 0;
    nn_device_count(&ndev);
    r.use_gpu = !ref_only && (nn_build_features() & NN_FEATURE_CUDNN) && ndev > 0;
    r.ref = make_ctx(NN_BACKEND_REF, NN_MATH_STRICT_FP32);
    if (!r.ref) return 1;
    printf("nnprim check rnn: reference vs finite differences + guards%s\n",
           r.use_gpu ? "; cuDNN vs reference" : " (no GPU used)");
    static struct nn_rnn_case c;
    int rc = 0;
    if (first_case < argc) {
        /* one case: its tokens, or one verbose line passed as a single argument */
        char err[256];
        int bad =
            argc - first_case == 1
                ? nn_rnn_case_parse_line(argv[first_case], &c, err, sizeof err) != 1
                : nn_rnn_case_parse(argc - first_case, argv + first_case, &c, err, sizeof err) != 0;
        if (bad) {
            fprintf(stderr, "nnprim check rnn: %s\n", err);
            rc = 2;
        } else {
            run_one(&r, &c);
        }
    } else if (shapes) {
        if (run_file(&r, shapes)) rc = 2;
    } else if (matrix) {
        for (size_t i = 0; i < nn_rnn_gpu_case_count(); i++)
            if (nn_rnn_gpu_case(i, &c) == 0) run_one(&r, &c);
    } else {
        for (size_t i = 0; i < nn_rnn_standard_case_count(); i++)
            if (nn_rnn_standard_case(i, &c) == 0) run_one(&r, &c);
    }
    printf("%d case(s), %d failed\n", r.cases, r.failures);
    nn_ctx_destroy(r.gpu[0]);
    nn_ctx_destroy(r.gpu[1]);
    nn_ctx_destroy(r.ref);
    return rc ? rc : r.failures ? 1 : 0;
}

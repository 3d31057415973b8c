/* `nnprim check`: the correctness harness from the command line (the same code as the
 * conv_harness test suite). */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "tests/harness/conv_case.h"


static int usage(FILE *to)
{
    fprintf(to,
            "usage: nnprim check [--ref-only] [--shapes FILE | CASE TOKENS...]\n"
            "       nnprim check rnn ... (recurrent layers; nnprim check rnn --help)\n"
            "\n"
            "Runs the convolution correctness harness: the reference backend's gradients against\n"
            "central finite differences (f64) and guard bytes around every output; with a GPU,\n"
            "also the cuDNN path against the reference on the same inputs. Without a case, the\n"
            "standard cases run. A case is one line of docs/CONV.md syntax, e.g.\n"
            "  nnprim check n2c4h9w9k6r3s3 g2 stride2x1 padlo1x0 padhi2x1 conv relu bias f16\n"
            "Each failure prints one line ending in a reproducer. Exit status 1 on any failure.\n");
    return to == stdout ? 0 : 2;
}

struct runner {
    nn_ctx *ref, *gpu[2]; /* gpu[math mode], created on first use; NULL without a GPU */
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
        fprintf(stderr, "nnprim check: cannot create a %s context: %s\n",
                backend == NN_BACKEND_REF ? "reference" : "cuDNN", nn_last_error()->message);
    return ctx;
}

static void run_one(struct runner *r, const struct nn_conv_case *c)
{
    int fails = nn_conv_check_reference(r->ref, c, stdout);
    if (r->use_gpu) {
        nn_ctx **g = &r->gpu[c->math == NN_MATH_TF32];
        if (!*g) *g = make_ctx(NN_BACKEND_CUDNN, c->math);
        if (*g)
            fails += nn_conv_check_backend(*g, r->ref, c, stdout);
        else
            fails++;
    }
    char text[256];
    nn_conv_case_format(c, text, sizeof text);
    printf("%s %s\n", fails ? "FAIL" : "ok  ", text);
    r->cases++;
    r->failures += fails != 0;
}

static int run_file(struct runner *r, const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "nnprim check: cannot open %s\n", path);
        return -1;
    }
    char line[512], err[256];
    int lineno = 0, rc = 0;
    while (fgets(line, sizeof line, f)) {
        struct nn_conv_case c;
        lineno++;
        int got = nn_conv_case_parse_line(line, &c, err, sizeof err);
        if (got < 0) {
            fprintf(stderr, "nnprim check: %s:%d: %s\n", path, lineno, err);
            rc = -1;
            break;
        }
        if (got) run_one(r, &c);
    }
    fclose(f);
    return rc;
}

int nn_cli_check(int argc, char **argv)
{
    if (argc > 1 && !strcmp(argv[1], "rnn")) return nn_cli_check_rnn(argc - 1, argv + 1);
    struct runner r = {0};
    const char *shapes = NULL;
    int first_case = argc, ref_only = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) return usage(stdout);
        if (!strcmp(argv[i], "--ref-only"))
            ref_only = 1;
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
    printf("nnprim check: reference vs finite differences + guards%s\n",
           r.use_gpu ? "; cuDNN vs reference" : " (no GPU used)");

    int rc = 0;
    if (first_case < argc) {
        struct nn_conv_case c;
        char err[256];
        if (nn_conv_case_parse(argc - first_case, argv + first_case, &c, err, sizeof err)) {
            fprintf(stderr, "nnprim check: %s\n", err);
            rc = 2;
        } else {
            run_one(&r, &c);
        }
    } else if (shapes) {
        if (run_file(&r, shapes)) rc = 2;
    } else {
        for (size_t i = 0; i < nn_conv_standard_case_count(); i++) {
            struct nn_conv_case c;
            if (nn_conv_standard_case(i, &c) == 0) run_one(&r, &c);
        }
    }
    printf("%d case(s), %d failed\n", r.cases, r.failures);
    nn_ctx_destroy(r.gpu[0]);
    nn_ctx_destroy(r.gpu[1]);
    nn_ctx_destroy(r.ref);
    return rc ? rc : r.failures ? 1 : 0;
}

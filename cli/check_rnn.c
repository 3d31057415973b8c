/* `nnprim check rnn`: the recurrent correctness harness from the command line (the same code as
 * the rnn_ref and rnn_cudnn test suites). */
#include <stdio.h>
#include <string.h>

#include "cli/args.h"
#include "cli/cli.h"
#include "tests/harness/rnn_case.h"

static const char about[] =
    "Runs the recurrent correctness harness: the reference backend's gradients against\n"
    "central finite differences (f64) and guard elements around every output; with a GPU,\n"
    "also the cuDNN path against the reference on the same inputs. Without a case, the\n"
    "standard cases run (--gpu-matrix: the GPU test suite's case matrix). A case is one\n"
    "line of docs/RNN.md syntax, or a whole NNPRIM_VERBOSE=1 line of an RNN call, e.g.\n"
    "  nnprim check rnn lstm t5n3i4h6 l2 bidir proj3 bias_double seq lens5x2x0 f32\n"
    "Each failure prints one line ending in a reproducer. The line of a failed call\n"
    "(status=...) runs its case, refused or not, and says whether the call's status and\n"
    "message come back. Exit status: 0 all passed, 1 a case failed (and any failed call's\n"
    "line), 2 a usage error (a case that does not parse or that the library refuses).\n";

struct runner {
    nn_ctx *ref, *gpu[2]; /* gpu[math mode], created on first use */
    int use_gpu;
    int cases, failures;
};

static nn_ctx *make_ctx(nn_backend backend, nn_math_mode math)
{
    nn_settings s;
    if (nn_settings_from_env(&s) != NN_OK) return NULL;
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

/* A case the library refuses is a usage error, found before anything runs: -1 with err. A long
 * one (each step of each sequence multiplies by about every weight once) gets a warning. */
static int validate(const struct nn_rnn_case *c, char *err, size_t cap)
{
    nn_settings s;
    nn_ctx *ctx = NULL;
    int64_t numel;
    int bad = nn_settings_defaults(&s) != NN_OK;
    s.backend = NN_BACKEND_REF;
    bad = bad || nn_ctx_create(&ctx, &s) != NN_OK ||
          nn_rnn_weights_size(ctx, &c->p, c->dtype, &numel) != NN_OK;
    if (bad)
        snprintf(err, cap, "%s (%s)", nn_last_error()->message,
                 nn_status_name(nn_last_error()->status));
    nn_ctx_destroy(ctx);
    if (bad) return -1;
    char text[512];
    nn_rnn_case_format(c, text, sizeof text);
    /* forward and backward in f64 and in the case's dtype */
    nn_cli_warn_slow("nnprim check rnn", text, 6.0 * (double)c->t * (double)c->n * (double)numel);
    return 0;
}

static int run_file(struct runner *r, const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "nnprim check rnn: cannot open %s\n", path);
        return -1;
    }
    static char line[16384];
    char err[600];
    int lineno = 0, rc = 0;
    while (fgets(line, sizeof line, f)) {
        static struct nn_rnn_case c;
        lineno++;
        int got = nn_rnn_case_parse_line(line, &c, err, sizeof err);
        if (got > 0 && validate(&c, err, sizeof err)) got = -1;
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
    int ref_only = 0, matrix = 0;
    const struct nn_cli_opt opts[] = {
        {"--ref-only", NN_CLI_FLAG, &ref_only, NULL, "only the reference checks, even with a GPU",
         0, 0, NULL},
        {"--gpu-matrix", NN_CLI_FLAG, &matrix, NULL, "the GPU test suite's cases", 0, 0, NULL},
        {"--shapes", NN_CLI_STRING, &shapes, "FILE",
         "the cases of FILE, one per line ('#' comments)", 0, 0, NULL},
    };
    const struct nn_cli_cmd cmd = {"nnprim check rnn", "[CASE...]", about, opts,
                                   NN_CLI_NOPTS(opts)};
    int first_case, prc = nn_cli_parse(&cmd, argc, argv, &first_case);
    if (prc != NN_CLI_RUN) return prc;
    if (first_case < argc && (shapes || matrix))
        return nn_cli_usage_error(&cmd, "takes a case, --shapes FILE or --gpu-matrix, one of them");
    static struct nn_rnn_case c;
    static struct nn_cli_failure failure;
    int failed_call = 0;
    if (first_case < argc) {
        /* one case: its tokens, or one verbose line (quoted, or split by the shell) */
        static char line[16384];
        char err[600];
        nn_cli_join(argc - first_case, argv + first_case, line, sizeof line);
        failed_call = nn_cli_failed_line(line, &failure);
        if (failed_call) {
            /* a failed call's line: its case runs whatever the library says of it */
            nn_cli_print_failure(cmd.name, &failure);
            if (!strcmp(failure.cases, "-")) return 1;
            if (nn_rnn_case_parse_line(failure.cases, &c, err, sizeof err) != 1) {
                printf("%s: its case does not parse: %s\n", cmd.name, err);
                return 1;
            }
        }
        int got = failed_call ? 1 : nn_rnn_case_parse_line(line, &c, err, sizeof err);
        if (got == 0) snprintf(err, sizeof err, "an empty case");
        if (!failed_call && (got != 1 || validate(&c, err, sizeof err))) {
            fprintf(stderr, "nnprim check rnn: the case: %s\n", err);
            return 2;
        }
    }
    int ndev = 0;
    nn_device_count(&ndev);
    r.use_gpu = !ref_only && (nn_build_features() & NN_FEATURE_CUDNN) && ndev > 0;
    r.ref = make_ctx(NN_BACKEND_REF, NN_MATH_STRICT_FP32);
    if (!r.ref) return 1;
    printf("nnprim check rnn: reference vs finite differences + guards%s\n",
           r.use_gpu ? "; cuDNN vs reference" : " (no GPU used)");
    int rc = 0;
    if (first_case < argc) {
        run_one(&r, &c);
        if (failed_call) rc = nn_cli_failure_outcome(cmd.name, &failure, r.failures > 0);
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

/* `nnprim check`: the correctness harness from the command line (the same code as the
 * conv_harness and pool_harness test suites), one family per run. */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "tests/harness/conv_case.h"
#include "tests/harness/linear_case.h"
#include "tests/harness/pool_case.h"
#include "tests/harness/softmax_case.h"

/* One op family's cases: the harness calls behind a common shape. */
union any_case {
    struct nn_conv_case conv;
    struct nn_pool_case pool;
    struct nn_linear_case linear;
    struct nn_softmax_case softmax;
};

struct family {
    const char *name;
    const char *example; /* a case, for the usage text */
    int (*parse_line)(const char *line, union any_case *c, char *err, size_t cap);
    void (*format)(const union any_case *c, char *buf, size_t cap);
    size_t (*standard_count)(void);
    int (*standard)(size_t i, union any_case *c);
    int (*check_reference)(nn_ctx *ref, const union any_case *c, FILE *out);
    int (*check_backend)(nn_ctx *dev, nn_ctx *ref, const union any_case *c, FILE *out);
    nn_math_mode (*math)(const union any_case *c);
};

static int conv_parse(const char *line, union any_case *c, char *err, size_t cap)
{
    return nn_conv_case_parse_line(line, &c->conv, err, cap);
}
static void conv_format(const union any_case *c, char *buf, size_t cap)
{
    nn_conv_case_format(&c->conv, buf, cap);
}
static int conv_standard(size_t i, union any_case *c)
{
    return nn_conv_standard_case(i, &c->conv);
}
static int conv_ref(nn_ctx *ref, const union any_case *c, FILE *out)
{
    return nn_conv_check_reference(ref, &c->conv, out);
}
static int conv_dev(nn_ctx *dev, nn_ctx *ref, const union any_case *c, FILE *out)
{
    return nn_conv_check_backend(dev, ref, &c->conv, out);
}
static nn_math_mode conv_math(const union any_case *c)
{
    return c->conv.math;
}

static int pool_parse(const char *line, union any_case *c, char *err, size_t cap)
{
    return nn_pool_case_parse_line(line, &c->pool, err, cap);
}
static void pool_format(const union any_case *c, char *buf, size_t cap)
{
    nn_pool_case_format(&c->pool, buf, cap);
}
static int pool_standard(size_t i, union any_case *c)
{
    return nn_pool_standard_case(i, &c->pool);
}
static int pool_ref(nn_ctx *ref, const union any_case *c, FILE *out)
{
    return nn_pool_check_reference(ref, &c->pool, out);
}
static int pool_dev(nn_ctx *dev, nn_ctx *ref, const union any_case *c, FILE *out)
{
    return nn_pool_check_backend(dev, ref, &c->pool, out);
}
static nn_math_mode pool_math(const union any_case *c)
{
    (void)c;
    return NN_MATH_STRICT_FP32;
}

static int linear_parse(const char *line, union any_case *c, char *err, size_t cap)
{
    return nn_linear_case_parse_line(line, &c->linear, err, cap);
}
static void linear_format(const union any_case *c, char *buf, size_t cap)
{
    nn_linear_case_format(&c->linear, buf, cap);
}
static int linear_standard(size_t i, union any_case *c)
{
    return nn_linear_standard_case(i, &c->linear);
}
static int linear_ref(nn_ctx *ref, const union any_case *c, FILE *out)
{
    return nn_linear_check_reference(ref, &c->linear, out);
}
static int linear_dev(nn_ctx *dev, nn_ctx *ref, const union any_case *c, FILE *out)
{
    return nn_linear_check_backend(dev, ref, &c->linear, out);
}
static nn_math_mode linear_math(const union any_case *c)
{
    return c->linear.math;
}

static int softmax_parse(const char *line, union any_case *c, char *err, size_t cap)
{
    return nn_softmax_case_parse_line(line, &c->softmax, err, cap);
}
static void softmax_format(const union any_case *c, char *buf, size_t cap)
{
    nn_softmax_case_format(&c->softmax, buf, cap);
}
static int softmax_standard(size_t i, union any_case *c)
{
    return nn_softmax_standard_case(i, &c->softmax);
}
static int softmax_ref(nn_ctx *ref, const union any_case *c, FILE *out)
{
    return nn_softmax_check_reference(ref, &c->softmax, out);
}
static int softmax_dev(nn_ctx *dev, nn_ctx *ref, const union any_case *c, FILE *out)
{
    return nn_softmax_check_backend(dev, ref, &c->softmax, out);
}
static nn_math_mode softmax_math(const union any_case *c)
{
    (void)c;
    return NN_MATH_STRICT_FP32;
}

static const struct family families[] = {
    {"conv", "n2c4h9w9k6r3s3 g2 stride2x1 padlo1x0 padhi2x1 conv relu bias f16", conv_parse,
     conv_format, nn_conv_standard_case_count, conv_standard, conv_ref, conv_dev, conv_math},
    {"pool", "n2c3h8w8 mean_exclude_pad win3 stride2 pad1 bf16", pool_parse, pool_format,
     nn_pool_standard_case_count, pool_standard, pool_ref, pool_dev, pool_math},
    {"linear", "m35x20in650out10000 bias f32 tf32", linear_parse, linear_format,
     nn_linear_standard_case_count, linear_standard, linear_ref, linear_dev, linear_math},
    {"softmax", "n64c10000 xent i64 f32", softmax_parse, softmax_format,
     nn_softmax_standard_case_count, softmax_standard, softmax_ref, softmax_dev, softmax_math},
};

static int usage(FILE *to)
{
    fprintf(
        to,
        "usage: nnprim check [conv|pool|linear|softmax] [--ref-only] [--shapes FILE | CASE...]\n"
        "       nnprim check rnn ... (recurrent layers; nnprim check rnn --help)\n"
        "\n"
        "Runs a family's correctness harness (conv when none is named): the reference\n"
        "backend's gradients against central finite differences (f64) and guard bytes\n"
        "around every output; with a GPU, also the cuDNN path against the reference on the\n"
        "same inputs. Without a case, the family's standard cases run. A case is one line of\n"
        "the family's docs/<FAMILY>.md syntax, or a whole NNPRIM_VERBOSE line of that family\n"
        "(its shape field is taken), e.g.\n");
    for (size_t i = 0; i < sizeof families / sizeof families[0]; i++)
        fprintf(to, "  nnprim check %s %s\n", families[i].name, families[i].example);
    fprintf(to, "Each failure prints one line ending in a reproducer. Exit status 1 on any "
                "failure.\n");
    return to == stdout ? 0 : 2;
}

struct runner {
    const struct family *fam;
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

static void run_one(struct runner *r, const union any_case *c)
{
    int fails = r->fam->check_reference(r->ref, c, stdout);
    if (r->use_gpu) {
        nn_math_mode m = r->fam->math(c);
        nn_ctx **g = &r->gpu[m == NN_MATH_TF32];
        if (!*g) *g = make_ctx(NN_BACKEND_CUDNN, m);
        if (*g)
            fails += r->fam->check_backend(*g, r->ref, c, stdout);
        else
            fails++;
    }
    char text[256];
    r->fam->format(c, text, sizeof text);
    printf("%s %s %s\n", fails ? "FAIL" : "ok  ", r->fam->name, text);
    r->cases++;
    r->failures += fails != 0;
}

/* Returns 0, or -1 after a parse error (reported with where). */
static int run_line(struct runner *r, const char *line, const char *where)
{
    union any_case c;
    char err[256];
    int got = r->fam->parse_line(line, &c, err, sizeof err);
    if (got < 0) {
        fprintf(stderr, "nnprim check %s: %s: %s\n", r->fam->name, where, err);
        return -1;
    }
    if (got) run_one(r, &c);
    return 0;
}

static int run_file(struct runner *r, const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "nnprim check: cannot open %s\n", path);
        return -1;
    }
    char line[512], where[600];
    int lineno = 0, rc = 0;
    while (rc == 0 && fgets(line, sizeof line, f)) {
        snprintf(where, sizeof where, "%s:%d", path, ++lineno);
        rc = run_line(r, line, where);
    }
    fclose(f);
    return rc;
}

int nn_cli_check(int argc, char **argv)
{
    if (argc > 1 && !strcmp(argv[1], "rnn")) return nn_cli_check_rnn(argc - 1, argv + 1);
    struct runner r = {0};
    r.fam = &families[0];
    int i = 1;
    for (size_t k = 0; i < argc && k < sizeof families / sizeof families[0]; k++)
        if (!strcmp(argv[i], families[k].name)) {
            r.fam = &families[k];
            i++;
            break;
        }
    const char *shapes = NULL;
    int first_case = argc, ref_only = 0;
    for (; i < argc; i++) {
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
    printf("nnprim check %s: reference vs finite differences + guards%s\n", r.fam->name,
           r.use_gpu ? "; cuDNN vs reference" : " (no GPU used)");

    int rc = 0;
    if (first_case < argc) {
        /* The words of one case, or of one pasted verbose line that the shell split at its
         * blanks: joined back into one line. */
        char line[1024];
        size_t n = 0;
        line[0] = 0;
        for (int k = first_case; k < argc && n < sizeof line; k++)
            n += (size_t)snprintf(line + n, sizeof line - n, "%s%s", k > first_case ? " " : "",
                                  argv[k]);
        if (run_line(&r, line, "the case")) rc = 2;
    } else if (shapes) {
        if (run_file(&r, shapes)) rc = 2;
    } else {
        for (size_t k = 0; k < r.fam->standard_count(); k++) {
            union any_case c;
            if (r.fam->standard(k, &c) == 0) run_one(&r, &c);
        }
    }
    printf("%d case(s), %d failed\n", r.cases, r.failures);
    nn_ctx_destroy(r.gpu[0]);
    nn_ctx_destroy(r.gpu[1]);
    nn_ctx_destroy(r.ref);
    return rc ? rc : r.failures ? 1 : 0;
}

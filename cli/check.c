/* `nnprim check`: the correctness harness from the command line (the same code as the
 * conv_harness and pool_harness test suites), one family per run. */
#include <stdio.h>
#include <string.h>

#include "cli/args.h"
#include "cli/cli.h"
#include "tests/harness/conv_case.h"
#include "tests/harness/layernorm_case.h"
#include "tests/harness/linear_case.h"
#include "tests/harness/pool_case.h"
#include "tests/harness/softmax_case.h"

/* One op family's cases: the harness calls behind a common shape. */
union any_case {
    struct nn_conv_case conv;
    struct nn_pool_case pool;
    struct nn_linear_case linear;
    struct nn_softmax_case softmax;
    struct nn_layernorm_case layernorm;
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
    /* A parsed case that the library would refuse: -1 and the library's message in err (it
     * names the field); else 0 and *macs, the multiply-adds of one forward call (the work). */
    int (*validate)(const union any_case *c, double *macs, char *err, size_t cap);
};

static int refused(char *err, size_t cap)
{
    snprintf(err, cap, "%s (%s)", nn_last_error()->message,
             nn_status_name(nn_last_error()->status));
    return -1;
}

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
double nn_cli_conv_macs(const struct nn_conv_case *k)
{
    int rank = k->p.spatial_rank + 2;
    int64_t y[NN_CONV_MAX_SPATIAL + 2];
    if (nn_conv_output_shape(&k->p, rank, k->x_dims, k->w_dims, y) != NN_OK) return -1;
    /* every output element sums C/G times the filter's size products */
    double m = (double)k->w_dims[1];
    for (int i = 0; i < rank; i++)
        m *= (double)y[i] * (i >= 2 ? (double)k->w_dims[i] : 1.0);
    return m;
}
static int conv_validate(const union any_case *c, double *macs, char *err, size_t cap)
{
    *macs = nn_cli_conv_macs(&c->conv);
    return *macs < 0 ? refused(err, cap) : 0;
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
static int pool_validate(const union any_case *c, double *macs, char *err, size_t cap)
{
    const struct nn_pool_case *k = &c->pool;
    int rank = k->p.spatial_rank + 2;
    int64_t y[NN_POOL_MAX_SPATIAL + 2];
    if (nn_pool_output_shape(&k->p, rank, k->x_dims, y) != NN_OK) return refused(err, cap);
    double m = 1;
    for (int i = 0; i < rank; i++)
        m *= (double)y[i] * (i >= 2 ? (double)k->p.window[i - 2] : 1.0);
    *macs = m;
    return 0;
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
static int linear_validate(const union any_case *c, double *macs, char *err, size_t cap)
{
    (void)err;
    (void)cap;
    const struct nn_linear_case *k = &c->linear;
    double m = (double)k->in * (double)k->out;
    for (int i = 0; i + 1 < k->x_rank; i++)
        m *= (double)k->lead[i];
    *macs = m;
    return 0;
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
static int softmax_validate(const union any_case *c, double *macs, char *err, size_t cap)
{
    (void)err;
    (void)cap;
    double m = 1;
    for (int i = 0; i < c->softmax.rank; i++)
        m *= (double)c->softmax.dims[i];
    *macs = m;
    return 0;
}

static int layernorm_parse(const char *line, union any_case *c, char *err, size_t cap)
{
    return nn_layernorm_case_parse_line(line, &c->layernorm, err, cap);
}
static void layernorm_format(const union any_case *c, char *buf, size_t cap)
{
    nn_layernorm_case_format(&c->layernorm, buf, cap);
}
static int layernorm_standard(size_t i, union any_case *c)
{
    return nn_layernorm_standard_case(i, &c->layernorm);
}
static int layernorm_ref(nn_ctx *ref, const union any_case *c, FILE *out)
{
    return nn_layernorm_check_reference(ref, &c->layernorm, out);
}
static int layernorm_dev(nn_ctx *dev, nn_ctx *ref, const union any_case *c, FILE *out)
{
    return nn_layernorm_check_backend(dev, ref, &c->layernorm, out);
}
static nn_math_mode layernorm_math(const union any_case *c)
{
    (void)c;
    return NN_MATH_STRICT_FP32;
}
/* The case text already holds the rules the library checks (k <= rank, eps >= 0). */
static int layernorm_validate(const union any_case *c, double *macs, char *err, size_t cap)
{
    (void)err;
    (void)cap;
    double m = 1;
    for (int i = 0; i < c->layernorm.rank; i++)
        m *= (double)c->layernorm.dims[i];
    *macs = m;
    return 0;
}

static const struct family families[] = {
    {"conv", "n2c4h9w9k6r3s3 g2 stride2x1 padlo1x0 padhi2x1 conv relu bias f16", conv_parse,
     conv_format, nn_conv_standard_case_count, conv_standard, conv_ref, conv_dev, conv_math,
     conv_validate},
    {"pool", "n2c3h8w8 mean_exclude_pad win3 stride2 pad1 bf16", pool_parse, pool_format,
     nn_pool_standard_case_count, pool_standard, pool_ref, pool_dev, pool_math, pool_validate},
    {"linear", "m35x20in650out10000 bias f32 tf32", linear_parse, linear_format,
     nn_linear_standard_case_count, linear_standard, linear_ref, linear_dev, linear_math,
     linear_validate},
    {"softmax", "n64c10000 xent i64 f32", softmax_parse, softmax_format,
     nn_softmax_standard_case_count, softmax_standard, softmax_ref, softmax_dev, softmax_math,
     softmax_validate},
    {"layernorm", "d8x128x768 k1 gamma beta bf16", layernorm_parse, layernorm_format,
     nn_layernorm_standard_case_count, layernorm_standard, layernorm_ref, layernorm_dev,
     layernorm_math, layernorm_validate},
};

/* The usage text: the fixed part and one example per family. */
static const char *about(void)
{
    static char text[2560];
    size_t n = (size_t)snprintf(
        text, sizeof text,
        "FAMILY: conv (the default), pool, linear, softmax, layernorm, or rnn (nnprim check rnn\n"
        "--help).\n"
        "Runs a family's correctness harness: the reference backend's gradients against\n"
        "central finite differences (f64; conv and linear hold relu's pattern, so kinks and\n"
        "large batches do not fail correct gradients) and guard bytes around every output;\n"
        "with a GPU, also the cuDNN path against the reference on the same inputs. Without a\n"
        "case, the family's standard cases run. A case is one line of the family's\n"
        "docs/<FAMILY>.md syntax, or a whole NNPRIM_VERBOSE line (quoted or not; its op picks\n"
        "the family when none is named), e.g.\n");
    for (size_t i = 0; i < sizeof families / sizeof families[0] && n < sizeof text; i++)
        n += (size_t)snprintf(text + n, sizeof text - n, "  nnprim check %s %s\n", families[i].name,
                              families[i].example);
    if (n < sizeof text)
        snprintf(text + n, sizeof text - n,
                 "Each failure prints one line ending in a reproducer. The line of a failed call\n"
                 "(status=...) runs its case, refused or not, and says whether the call's status\n"
                 "and message come back. Exit status: 0 all passed, 1 a case failed (and any\n"
                 "failed call's line), 2 a usage error (an unknown option, a case that does not\n"
                 "parse or that the library refuses: the message names the field).\n");
    return text;
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
    if (nn_settings_from_env(&s) != NN_OK) return NULL;
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

/* One line: 1 and the case in *c, 0 for a blank or comment line, -1 after a usage error
 * (reported with where): a case that does not parse or that the library refuses. */
static int take_line(const struct family *fam, const char *line, const char *where,
                     union any_case *c)
{
    char err[600];
    double macs = 0;
    int got = fam->parse_line(line, c, err, sizeof err);
    if (got > 0 && fam->validate(c, &macs, err, sizeof err)) got = -1;
    if (got < 0) fprintf(stderr, "nnprim check %s: %s: %s\n", fam->name, where, err);
    if (got > 0) {
        char text[256];
        fam->format(c, text, sizeof text);
        /* the reference runs forward and backward in f64 and in the case's dtype */
        nn_cli_warn_slow("nnprim check", text, 6 * macs);
    }
    return got;
}

/* Returns 0, or -1 after a usage error (take_line). */
static int run_line(struct runner *r, const char *line, const char *where)
{
    union any_case c;
    int got = take_line(r->fam, line, where, &c);
    if (got > 0) run_one(r, &c);
    return got < 0 ? -1 : 0;
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
    int shift = 0; /* 1: argv[1] named the family */
    for (size_t k = 0; k < sizeof families / sizeof families[0]; k++)
        if (argc > 1 && !strcmp(argv[1], families[k].name)) {
            r.fam = &families[k];
            shift = 1;
        }
    const char *shapes = NULL;
    int ref_only = 0;
    const struct nn_cli_opt opts[] = {
        {"--ref-only", NN_CLI_FLAG, &ref_only, NULL, "only the reference checks, even with a GPU",
         0, 0, NULL},
        {"--shapes", NN_CLI_STRING, &shapes, "FILE",
         "the cases of FILE, one per line ('#' comments)", 0, 0, NULL},
    };
    char name[64];
    snprintf(name, sizeof name, "nnprim check%s%s", shift ? " " : "", shift ? r.fam->name : "");
    const struct nn_cli_cmd cmd = {name, shift ? "[CASE...]" : "[FAMILY] [CASE...]", about(), opts,
                                   NN_CLI_NOPTS(opts)};
    int first_case, prc = nn_cli_parse(&cmd, argc - shift, argv + shift, &first_case);
    if (prc != NN_CLI_RUN) return prc;
    first_case += shift;
    if (!shift && first_case < argc)
        for (size_t k = 0; k < sizeof families / sizeof families[0]; k++)
            if (!strcmp(argv[first_case], families[k].name) || !strcmp(argv[first_case], "rnn")) {
                /* "nnprim check --ref-only pool ...": the family first, and parse again */
                char *f = argv[first_case];
                memmove(&argv[2], &argv[1], (size_t)(first_case - 1) * sizeof *argv);
                argv[1] = f;
                return nn_cli_check(argc, argv);
            }
    if (first_case < argc && shapes)
        return nn_cli_usage_error(&cmd, "takes --shapes FILE or a case, not both");
    /* A whole verbose line: its op names the family. */
    const char *fam = first_case < argc ? nn_cli_verbose_family(argv[first_case]) : NULL;
    if (fam && !shift && !strcmp(fam, "rnn")) return nn_cli_check_rnn(argc, argv);
    if (fam) {
        const struct family *f = NULL;
        for (size_t k = 0; k < sizeof families / sizeof families[0]; k++)
            if (!strcmp(fam, families[k].name)) f = &families[k];
        if (!f) return nn_cli_usage_error(&cmd, "the op of this verbose line has no check family");
        if (shift && f != r.fam)
            return nn_cli_usage_error(&cmd, "the verbose line is of a %s op, not of %s", f->name,
                                      r.fam->name);
        r.fam = f;
    }
    /* One case: refused before anything runs. */
    union any_case one;
    char line[4096];
    struct nn_cli_failure failure;
    int failed_call = 0;
    if (first_case < argc) {
        /* The words of one case, or of one pasted verbose line that the shell split at its
         * blanks: joined back into one line. */
        nn_cli_join(argc - first_case, argv + first_case, line, sizeof line);
        failed_call = nn_cli_failed_line(line, &failure);
        if (failed_call) {
            /* a failed call's line: its case runs whatever the library says of it, to show
             * the call's failure again */
            char err[600];
            nn_cli_print_failure(name, &failure);
            if (!strcmp(failure.cases, "-")) return 1;
            if (r.fam->parse_line(failure.cases, &one, err, sizeof err) != 1) {
                printf("%s: its case does not parse: %s\n", name, err);
                return 1;
            }
        } else if (take_line(r.fam, line, "the case", &one) < 0) {
            return 2;
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
        run_one(&r, &one);
        if (failed_call) rc = nn_cli_failure_outcome(name, &failure, r.failures > 0);
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

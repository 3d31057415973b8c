/* libFuzzer target for the case grammar of every op family: the text `nnprim check` and
 * `nnprim bench` take as a case or a pasted NNPRIM_VERBOSE line (tests/harness/<family>_case.c,
 * cli/args.c). Built with -Dfuzz=true (tools/fuzz.sh).
 *
 * The input, up to its first NUL, is one line given to every family's parser. Any line must be
 * parsed or refused with a message, never crash. A parsed case must survive a round trip: its
 * text form parses again, to a case of the same text (fields the text leaves out, such as a
 * dropout seed without dropout, mean nothing to the op). Conv, pool and rnn cases then go through
 * the library's own validation, as the CLI does before running anything (output shapes, the
 * weights' size), which must answer a status for any values the grammar lets through. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/args.h"
#include "fuzz/fuzz_ref_ctx.h"
#include "tests/harness/conv_case.h"
#include "tests/harness/layernorm_case.h"
#include "tests/harness/linear_case.h"
#include "tests/harness/pool_case.h"
#include "tests/harness/rnn_case.h"
#include "tests/harness/softmax_case.h"

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);

/* One family's parser and printer over a case held in a buffer of the largest case's size. */
union any_case {
    struct nn_conv_case conv;
    struct nn_pool_case pool;
    struct nn_linear_case linear;
    struct nn_softmax_case softmax;
    struct nn_layernorm_case layernorm;
    struct nn_rnn_case rnn;
};

struct family {
    const char *name;
    int (*parse)(const char *line, union any_case *c, char *err, size_t cap);
    void (*format)(const union any_case *c, char *buf, size_t cap);
    void (*validate)(const union any_case *c);
};

/* A refusal must come with a message naming the call. */
static void refused_well(nn_status st, const char *fn)
{
    if (st == NN_OK) return;
    const char *msg = nn_last_error()->message;
    if (strncmp(msg, fn, strlen(fn)) != 0) {
        fprintf(stderr, "%s refused with message \"%s\"\n", fn, msg);
        abort();
    }
}

#define FAMILY(name)                                                                               \
    static int name##_parse(const char *line, union any_case *c, char *err, size_t cap)            \
    {                                                                                              \
        return nn_##name##_case_parse_line(line, &c->name, err, cap);                              \
    }                                                                                              \
    static void name##_format(const union any_case *c, char *buf, size_t cap)                      \
    {                                                                                              \
        nn_##name##_case_format(&c->name, buf, cap);                                               \
    }
FAMILY(conv)
FAMILY(pool)
FAMILY(linear)
FAMILY(softmax)
FAMILY(layernorm)
FAMILY(rnn)

static void conv_validate(const union any_case *c)
{
    int64_t y[NN_CONV_MAX_SPATIAL + 2];
    refused_well(nn_conv_output_shape(&c->conv.p, c->conv.p.spatial_rank + 2, c->conv.x_dims,
                                      c->conv.w_dims, y),
                 "nn_conv_output_shape");
}

static void pool_validate(const union any_case *c)
{
    int64_t y[NN_POOL_MAX_SPATIAL + 2];
    refused_well(nn_pool_output_shape(&c->pool.p, c->pool.p.spatial_rank + 2, c->pool.x_dims, y),
                 "nn_pool_output_shape");
}

static void rnn_validate(const union any_case *c)
{
    int64_t numel;
    refused_well(nn_rnn_weights_size(nn_fuzz_ref_ctx(), &c->rnn.p, c->rnn.dtype, &numel),
                 "nn_rnn_weights_size");
}

static const struct family families[] = {
    {"conv", conv_parse, conv_format, conv_validate},
    {"pool", pool_parse, pool_format, pool_validate},
    {"linear", linear_parse, linear_format, NULL},
    {"softmax", softmax_parse, softmax_format, NULL},
    {"layernorm", layernorm_parse, layernorm_format, NULL},
    {"rnn", rnn_parse, rnn_format, rnn_validate},
};

static void one_family(const struct family *f, const char *line)
{
    /* An rnn case's text holds up to NN_RNN_CASE_MAX_N lengths. */
    static union any_case c, again;
    static char text[32768], text2[32768];
    char err[512];
    int got = f->parse(line, &c, err, sizeof err);
    if (got < -1 || got > 1) abort();
    if (got == -1 && !err[0]) {
        fprintf(stderr, "%s: a refusal without a message\n", f->name);
        abort();
    }
    if (got != 1) return;
    f->format(&c, text, sizeof text);
    if (f->parse(text, &again, err, sizeof err) != 1) {
        fprintf(stderr, "%s: \"%s\" does not parse back: %s\n", f->name, text, err);
        abort();
    }
    f->format(&again, text2, sizeof text2);
    if (strcmp(text, text2) != 0) {
        fprintf(stderr, "%s: \"%s\" parses back as \"%s\"\n", f->name, text, text2);
        abort();
    }
    if (f->validate) f->validate(&c);
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
    char *line = malloc(size + 1);
    if (!line) abort();
    memcpy(line, data, size);
    line[size] = 0;
    /* A family is only named for a verbose line of one of its ops. */
    const char *family = nn_cli_verbose_family(line);
    if (family && (!strstr(line, "nnprim_verbose,") ||
                   (strcmp(family, "unknown") != 0 && !strstr(line, family))))
        abort();
    for (size_t i = 0; i < sizeof families / sizeof families[0]; i++)
        one_family(&families[i], line);
    free(line);
    return 0;
}

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "cli/args.h"
#include "nnprim/nnprim.h"

int nn_cli_usage_error(const struct nn_cli_cmd *cmd, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fprintf(stderr, "%s: %s\n(\"%s --help\" lists what it takes)\n", cmd->name, msg, cmd->name);
    return 2;
}

/* What an option accepts, for its usage line and its errors: "an integer in [1, 1000000]". */
static void accepted(const struct nn_cli_opt *o, char *buf, size_t cap)
{
    switch (o->kind) {
    case NN_CLI_FLAG: snprintf(buf, cap, "no value"); break;
    case NN_CLI_INT:
    case NN_CLI_U64: snprintf(buf, cap, "an integer in [%lld, %lld]", o->min, o->max); break;
    case NN_CLI_BYTES:
        snprintf(buf, cap, "a byte count in [%lld, %lld], digits with an optional K, M or G",
                 o->min, o->max);
        break;
    case NN_CLI_STRING: snprintf(buf, cap, "%s", o->value ? o->value : "a value"); break;
    case NN_CLI_CHOICE: {
        size_t n = (size_t)snprintf(buf, cap, "one of ");
        for (const char *c = o->choices; *c && n + 3 < cap; c++)
            n += (size_t)snprintf(buf + n, cap - n, *c == '|' ? ", " : "%c", *c);
        break;
    }
    }
}

void nn_cli_usage(const struct nn_cli_cmd *cmd, FILE *to)
{
    fprintf(to, "usage: %s [options]%s%s\n\n%s\noptions:\n", cmd->name, cmd->operands ? " " : "",
            cmd->operands ? cmd->operands : "", cmd->about);
    for (int i = 0; i < cmd->nopts; i++) {
        const struct nn_cli_opt *o = &cmd->opts[i];
        char left[96];
        if (o->kind == NN_CLI_FLAG)
            snprintf(left, sizeof left, "%s", o->name);
        else if (o->kind == NN_CLI_CHOICE)
            snprintf(left, sizeof left, "%s %s", o->name, o->choices);
        else
            snprintf(left, sizeof left, "%s %s", o->name, o->value ? o->value : "VALUE");
        fprintf(to, "  %-24s %s\n", left, o->help);
    }
    fprintf(to, "  %-24s %s\n", "-h, --help", "this text");
}

static int choice_index(const char *choices, const char *v)
{
    size_t len = strlen(v);
    int i = 0;
    for (const char *c = choices;; i++) {
        const char *bar = strchr(c, '|');
        size_t n = bar ? (size_t)(bar - c) : strlen(c);
        if (n == len && !strncmp(c, v, n)) return i;
        if (!bar) return -1;
        c = bar + 1;
    }
}

static int take_value(const struct nn_cli_cmd *cmd, const struct nn_cli_opt *o, const char *v)
{
    char what[256];
    accepted(o, what, sizeof what);
    switch (o->kind) {
    case NN_CLI_FLAG: *(int *)o->out = 1; return 0;
    case NN_CLI_STRING:
        if (!*v)
            return nn_cli_usage_error(cmd, "%s: expected %s, got an empty value", o->name, what);
        *(const char **)o->out = v;
        return 0;
    case NN_CLI_INT: {
        char *end;
        errno = 0;
        long long n = strtoll(v, &end, 10);
        /* digits only (an optional '-'): "1e99", " 5", "5x" and out-of-range values are refused */
        int ok = *v && (v[0] == '-' || (v[0] >= '0' && v[0] <= '9')) && !*end && errno == 0 &&
                 n >= o->min && n <= o->max;
        if (!ok) return nn_cli_usage_error(cmd, "%s: expected %s, got '%s'", o->name, what, v);
        *(int *)o->out = (int)n;
        return 0;
    }
    case NN_CLI_U64:
    case NN_CLI_BYTES: {
        char *end;
        errno = 0;
        unsigned long long n = strtoull(v, &end, 10);
        unsigned shift = 0;
        if (o->kind == NN_CLI_BYTES)
            shift = *end == 'K' ? 10 : *end == 'M' ? 20 : *end == 'G' ? 30 : 0;
        if (shift) end++;
        int ok = v[0] >= '0' && v[0] <= '9' && !*end && errno == 0 && n <= (ULLONG_MAX >> shift);
        n <<= shift;
        ok = ok && n >= (unsigned long long)o->min && n <= (unsigned long long)o->max;
        if (!ok) return nn_cli_usage_error(cmd, "%s: expected %s, got '%s'", o->name, what, v);
        *(uint64_t *)o->out = n;
        return 0;
    }
    case NN_CLI_CHOICE: {
        int k = choice_index(o->choices, v);
        if (k < 0) return nn_cli_usage_error(cmd, "%s: expected %s, got '%s'", o->name, what, v);
        *(int *)o->out = k;
        return 0;
    }
    }
    return 2;
}

/* argv[from, to): its last k words moved to its front, the others kept in order. */
static void rotate(char **argv, int from, int to, int k)
{
    for (int n = 0; n < k; n++) {
        char *w = argv[to - 1];
        memmove(&argv[from + 1], &argv[from], (size_t)(to - 1 - from) * sizeof *argv);
        argv[from] = w;
    }
}

int nn_cli_parse(const struct nn_cli_cmd *cmd, int argc, char **argv, int *first)
{
    int start = -1; /* where the operands met so far begin; options found after them move
                       in front of them, so that they end up in argv[*first, argc) */
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            nn_cli_usage(cmd, stdout);
            return 0;
        }
        if (!strcmp(a, "--")) {
            if (i + 1 < argc && !cmd->operands)
                return nn_cli_usage_error(cmd, "takes no operands, got '%s'", argv[i + 1]);
            if (start < 0) start = i;
            rotate(argv, start, i + 1, 1);
            *first = start + 1;
            return NN_CLI_RUN;
        }
        if (a[0] != '-' || !a[1]) {
            if (!cmd->operands) return nn_cli_usage_error(cmd, "takes no operands, got '%s'", a);
            if (start < 0) start = i;
            continue;
        }
        const char *eq = strchr(a, '=');
        size_t len = eq ? (size_t)(eq - a) : strlen(a);
        const struct nn_cli_opt *o = NULL;
        for (int k = 0; k < cmd->nopts && !o; k++)
            if (strlen(cmd->opts[k].name) == len && !strncmp(cmd->opts[k].name, a, len))
                o = &cmd->opts[k];
        if (!o) return nn_cli_usage_error(cmd, "unknown option '%.*s'", (int)len, a);
        const char *v = NULL;
        int words = 1;
        if (o->kind == NN_CLI_FLAG) {
            if (eq) return nn_cli_usage_error(cmd, "%s takes no value, got '%s'", o->name, eq + 1);
        } else if (eq) {
            v = eq + 1;
        } else if (i + 1 < argc) {
            v = argv[i + 1];
            words = 2;
        } else {
            char what[256];
            accepted(o, what, sizeof what);
            return nn_cli_usage_error(cmd, "%s needs a value: %s", o->name, what);
        }
        int rc = take_value(cmd, o, v);
        if (rc) return rc;
        i += words - 1;
        if (start >= 0) {
            rotate(argv, start, i + 1, words);
            start += words;
        }
    }
    *first = start < 0 ? argc : start;
    return NN_CLI_RUN;
}

const char *nn_cli_verbose_family(const char *text)
{
    static const char prefix[] = "nnprim_verbose,";
    static const char *const families[] = {"conv", "pool", "linear", "softmax", "layernorm", "rnn"};
    while (*text == ' ' || *text == '\t')
        text++;
    if (strncmp(text, prefix, sizeof prefix - 1)) return NULL;
    const char *op = text + sizeof prefix - 1;
    if (!strncmp(op, "nn_", 3)) op += 3; /* recurrent lines of nnprim 0.1.0 named nn_rnn_* */
    for (size_t i = 0; i < sizeof families / sizeof families[0]; i++) {
        size_t n = strlen(families[i]);
        if (!strncmp(op, families[i], n) && (op[n] == '_' || op[n] == ',')) return families[i];
    }
    return "unknown";
}

/* Copies the field at s up to its comma (or the end: last) into buf; returns past the comma, or
 * NULL when there is none and !last. */
static const char *field(const char *s, char *buf, size_t cap, int last)
{
    const char *end = last ? s + strlen(s) : strchr(s, ',');
    if (!end) return NULL;
    size_t n = (size_t)(end - s);
    while (last && n && (s[n - 1] == '\n' || s[n - 1] == '\r'))
        n--;
    snprintf(buf, cap, "%.*s", (int)(n < cap ? n : cap - 1), s);
    return *end ? end + 1 : end;
}

int nn_cli_failed_line(const char *text, struct nn_cli_failure *f)
{
    static const char prefix[] = "nnprim_verbose,";
    while (*text == ' ' || *text == '\t')
        text++;
    if (strncmp(text, prefix, sizeof prefix - 1)) return 0;
    const char *s = text + sizeof prefix - 1;
    char skip[64], timing[128];
    s = field(s, f->op, sizeof f->op, 0);
    for (int i = 0; s && i < 3; i++) /* backend, impl, cache */
        s = field(s, skip, sizeof skip, 0);
    if (s) s = field(s, f->cases, sizeof f->cases, 0);
    if (s) s = field(s, timing, sizeof timing, 0);
    if (!s || strncmp(timing, "status=", 7)) return 0;
    field(s, f->message, sizeof f->message, 1);
    size_t n = strcspn(timing + 7, " ");
    snprintf(f->status, sizeof f->status, "%.*s", (int)n, timing + 7);
    return 1;
}

void nn_cli_print_failure(const char *who, const struct nn_cli_failure *f)
{
    printf("%s: the line's call (%s) failed: %s: %s\n", who, f->op, f->status, f->message);
    if (!strcmp(f->cases, "-"))
        printf("%s: it failed before its case was known (a NULL or invalid argument, a "
               "pullback): there is no case to run\n",
               who);
}

int nn_cli_failure_outcome(const char *who, const struct nn_cli_failure *f, int failed)
{
    const nn_error_info *e = nn_last_error();
    if (!failed)
        printf("%s: not reproduced: the case runs here, so the call's failure is in what a case "
               "does not carry (a tensor's dims, strides, dtype or memory, a pullback)\n",
               who);
    else if (!strcmp(nn_status_name(e->status), f->status) && !strcmp(e->message, f->message))
        printf("%s: reproduced: %s: %s\n", who, f->status, f->message);
    else
        printf("%s: the case fails here with %s: %s\n", who, nn_status_name(e->status), e->message);
    return 1;
}

void nn_cli_join(int argc, char **argv, char *buf, size_t cap)
{
    size_t n = 0;
    if (cap) buf[0] = 0;
    for (int k = 0; k < argc && n < cap; k++)
        n += (size_t)snprintf(buf + n, cap - n, "%s%s", k ? " " : "", argv[k]);
}

void nn_cli_warn_slow(const char *who, const char *what, double macs)
{
    double s = macs / NN_CLI_REF_MACS_PER_S;
    if (s < 60) return;
    fprintf(stderr,
            "%s: warning: %s is about %.2g multiply-adds on the reference backend: expect about "
            "%.0f minutes\n",
            who, what, macs, s / 60);
}

int nn_cli_count_cases(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    char line[16384];
    int n = 0;
    while (fgets(line, sizeof line, f)) {
        const char *c = line;
        while (*c == ' ' || *c == '\t' || *c == '\r' || *c == '\n')
            c++;
        n += *c && *c != '#';
    }
    fclose(f);
    return n;
}

int nn_cli_each_case(const char *who, const char *path, int *cases,
                     int (*run)(void *arg, const char *line, const char *where), void *arg)
{
    *cases = nn_cli_count_cases(path);
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "%s: cannot open %s\n", who, path);
        return 1;
    }
    static char line[16384];
    char where[600];
    int lineno = 0, rc = 0;
    while (rc == 0 && fgets(line, sizeof line, f)) {
        snprintf(where, sizeof where, "%s:%d", path, ++lineno);
        if (run(arg, line, where) < 0) rc = 2;
    }
    fclose(f);
    return rc;
}

void nn_cli_progress(const char *who, int i, int n, const char *what)
{
    fprintf(stderr, "%s: case %d of %d: %s\n", who, i, n, what);
}

int nn_cli_case_operands(const struct nn_cli_cmd *cmd, int argc, char **argv, int first,
                         const char **one)
{
    static char words[16384];
    if (first < argc && *one)
        return nn_cli_usage_error(cmd, "takes --case TEXT or a case, not both");
    if (first < argc) {
        nn_cli_join(argc - first, argv + first, words, sizeof words);
        *one = words;
    }
    struct nn_cli_failure f;
    if (!*one || !nn_cli_failed_line(*one, &f)) return NN_CLI_RUN;
    nn_cli_print_failure(cmd->name, &f);
    printf("%s: a failed call has no time to measure; nnprim check '<the line>' runs its case\n",
           cmd->name);
    return 1;
}

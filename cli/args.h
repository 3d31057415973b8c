/* The one option parser of every nnprim subcommand: a table of options per command, parsed the
 * same way everywhere ("--name value" or "--name=value", "-h"/"--help" for usage on stdout,
 * "--" ends the options) with the same errors: an unknown option, a missing or a bad value is
 * reported on stderr naming the option and what it accepts, and the command exits 2. */
#ifndef NN_CLI_ARGS_H
#define NN_CLI_ARGS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

enum nn_cli_opt_kind {
    NN_CLI_FLAG,   /* no value: *(int *)out = 1 */
    NN_CLI_INT,    /* a decimal integer in [min, max]: *(int *)out */
    NN_CLI_STRING, /* any value: *(const char **)out (points into argv) */
    NN_CLI_CHOICE, /* one of the '|'-separated words of choices: *(int *)out = its index */
    NN_CLI_U64,    /* decimal digits, a value in [min, max]: *(uint64_t *)out */
    NN_CLI_BYTES   /* as NN_CLI_U64, with an optional K, M or G suffix (powers of 1024) */
};

struct nn_cli_opt {
    const char *name; /* "--reps" */
    enum nn_cli_opt_kind kind;
    void *out;
    const char *value;   /* the value's name in the usage text: "N", "FILE" (choices: NULL) */
    const char *help;    /* one line */
    long long min, max;  /* NN_CLI_INT, NN_CLI_U64, NN_CLI_BYTES (those two: min >= 0) */
    const char *choices; /* NN_CLI_CHOICE: "ref|cudnn" */
};

struct nn_cli_cmd {
    const char *name;     /* "nnprim bench conv": starts every message */
    const char *operands; /* after the options in the usage line ("[CASE...]"), NULL: none taken */
    const char *about;    /* the usage text's paragraphs, each line ending in '\n' */
    const struct nn_cli_opt *opts;
    int nopts;
};

/* What nn_cli_parse() returns when the command should run; anything else is its exit code. */
#define NN_CLI_RUN (-1)

/* Parses argv[1..argc): options and operands in any order (options are moved in front, so the
 * operands end up in argv[*first, argc), in their order; everything after "--" is an operand;
 * a command without operands refuses them). Returns NN_CLI_RUN; 0 after printing the usage on
 * stdout (-h, --help); 2 after an error on stderr. */
int nn_cli_parse(const struct nn_cli_cmd *cmd, int argc, char **argv, int *first);

/* The usage text (to stdout for --help; the caller's choice otherwise). */
void nn_cli_usage(const struct nn_cli_cmd *cmd, FILE *to);

/* A usage error: "<cmd name>: <message>" and a pointer to --help on stderr; returns 2. */
int nn_cli_usage_error(const struct nn_cli_cmd *cmd, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* For a whole NNPRIM_VERBOSE line ("nnprim_verbose,<op>,..."): the family of its op, which names
 * both its `nnprim check` family and its `nnprim bench` area ("conv", "pool", "linear",
 * "softmax", "rnn"; "unknown" for another op); NULL for any other text. */
const char *nn_cli_verbose_family(const char *text);

/* A failed call's verbose line ("nnprim_verbose,<op>,<backend>,-,-,<case>,status=<NAME>
 * host_ms=<ms>,<message>"), whole or as the shell split it: 1 with its op, status name, case
 * ("-" when the call failed before it was known) and message copied out (each NUL-terminated,
 * cut at its capacity); 0 for any other text. */
struct nn_cli_failure {
    char op[64], status[64], cases[1024], message[1024];
};
int nn_cli_failed_line(const char *text, struct nn_cli_failure *f);

/* What a command says of a failed call's line before it runs the line's case (nothing to run
 * when the case is "-"): the call's status and message, on stdout. */
void nn_cli_print_failure(const char *who, const struct nn_cli_failure *f);

/* After the case of a failed call's line ran: whether it failed the same way. failed: the case
 * failed here, with nn_last_error() as its last failure. Prints one line; returns 1 (the exit
 * status of a failed case, which the line's call is, reproduced or not). */
int nn_cli_failure_outcome(const char *who, const struct nn_cli_failure *f, int failed);

/* argv[0..argc) joined by single blanks into buf (cap bytes, NUL-terminated): a case or a pasted
 * verbose line that the shell split at its blanks, whole again. */
void nn_cli_join(int argc, char **argv, char *buf, size_t cap);

/* The reference backend's speed the warning below assumes, in multiply-adds a second: an f32
 * 3x3 convolution ran at about 2e7 on a busy 2-core machine; a quiet core does a few times more. */
#define NN_CLI_REF_MACS_PER_S 5e7

/* Before work on the reference backend of about macs multiply-adds in all: a warning on stderr
 * naming what (a case's text) and the expected minutes, when that is a minute or more. */
void nn_cli_warn_slow(const char *who, const char *what, double macs);

/* The cases in a shape file: its lines with something before any '#'; -1 if it cannot be read. */
int nn_cli_count_cases(const char *path);

/* Every line of a shape file given to run(arg, line, where), where = "path:lineno"; *cases set
 * to nn_cli_count_cases() first (for the progress lines). Returns 0; 1 if the file cannot be
 * opened (said on stderr, "<who>: cannot open <path>"); 2 once run() returned < 0 (it has said
 * why; the lines after it are not run). */
int nn_cli_each_case(const char *who, const char *path, int *cases,
                     int (*run)(void *arg, const char *line, const char *where), void *arg);

/* Progress through a shape file on stderr: "<who>: case i of n: <what>". */
void nn_cli_progress(const char *who, int i, int n, const char *what);

/* A case given as operands (`nnprim bench conv n1c4h8w8k4r3s3 pad1`, or a pasted verbose line
 * split by the shell): argv[first, argc) joined into *one (a buffer of this file's, valid until
 * the next call); an error when *one was already set by --case. A failed call's verbose line (by
 * --case or as operands) has no time to measure: its status and message are printed (stdout)
 * and 1 is returned. Returns NN_CLI_RUN, 1 or 2. */
int nn_cli_case_operands(const struct nn_cli_cmd *cmd, int argc, char **argv, int first,
                         const char **one);

#define NN_CLI_NOPTS(a) ((int)(sizeof(a) / sizeof((a)[0])))

#endif

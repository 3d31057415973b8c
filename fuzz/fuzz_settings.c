/* libFuzzer target for the settings nnprim reads from NNPRIM_* variables (src/core/settings.c,
 * src/core/env.c, the NNPRIM_MEM_* ones in src/mem/mem.c). Built with -Dfuzz=true
 * (tools/fuzz.sh).
 *
 * The input's lines are the values of the variables below, in their order (a missing line leaves
 * the variable unset; a value ends at a NUL). Each variable is checked alone against the rules
 * its header states, written again here as the oracle: accepted exactly when well-formed, and
 * then to the same settings as its plain form ("007" as "7", "TF32" as "tf32", "2K" as "2048");
 * refused with NN_E_ENV and a message naming the function and the variable. Then all at once:
 * NN_OK when every one is well-formed, else NN_E_ENV naming one of the malformed ones, with
 * settings as if only the well-formed ones were set (the headers: "always filled completely",
 * a malformed variable leaves its default). Not fuzzed here:
 * NNPRIM_PLAN_CACHE (a path; the file's contents are fuzz_plan_file's) and NNPRIM_CUDA_LIBS
 * (library names for dlopen). */
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "nnprim/nnprim.h"

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);

enum kind { WORD, INT, BYTES, SLACK };

struct var {
    const char *name;
    enum kind kind;
    long lo, hi;          /* INT */
    const char *words[4]; /* WORD */
    int mem;              /* read by nn_mem_settings_from_env(), else nn_settings_from_env() */
};

static const struct var vars[] = {
    {"NNPRIM_BACKEND", WORD, 0, 0, {"auto", "ref", "cudnn"}, 0},
    {"NNPRIM_DEVICE", INT, 0, INT_MAX, {NULL}, 0},
    {"NNPRIM_MATH", WORD, 0, 0, {"strict", "tf32"}, 0},
    {"NNPRIM_DETERMINISTIC", WORD, 0, 0, {"0", "1"}, 0},
    {"NNPRIM_WORKSPACE_CAP", BYTES, 0, 0, {NULL}, 0},
    {"NNPRIM_TUNING", WORD, 0, 0, {"heuristic", "autotune"}, 0},
    {"NNPRIM_AUTOTUNE_CANDIDATES", INT, 1, 1000, {NULL}, 0},
    {"NNPRIM_PLAN_CACHE_CAPACITY", INT, 1, 1 << 20, {NULL}, 0},
    {"NNPRIM_VERBOSE", INT, 0, 2, {NULL}, 0},
    {"NNPRIM_BACKGROUND_BUILDS", WORD, 0, 0, {"0", "1"}, 0},
    {"NNPRIM_PREBUILD_PLANS", WORD, 0, 0, {"0", "1"}, 0},
    {"NNPRIM_RNN_GRAPHS", WORD, 0, 0, {"auto", "0", "1"}, 0},
    {"NNPRIM_LINEAR_GRAPHS", WORD, 0, 0, {"auto", "0", "1"}, 0},
    {"NNPRIM_XENT_TARGETS", WORD, 0, 0, {"checked", "device"}, 0},
    {"NNPRIM_MEM_BYPASS", WORD, 0, 0, {"0", "1"}, 1},
    {"NNPRIM_MEM_LIMIT", BYTES, 0, 0, {NULL}, 1},
    {"NNPRIM_MEM_UPSTREAM", WORD, 0, 0, {"malloc", "async"}, 1},
    {"NNPRIM_MEM_GROWTH_SLACK", SLACK, 0, 0, {NULL}, 1},
};
#define NVARS (sizeof vars / sizeof vars[0])

/* Whether v is well-formed for var; if so, its plain form in canon. */
static int oracle(const struct var *var, const char *v, char *canon, size_t cap)
{
    switch (var->kind) {
    case WORD:
        for (int i = 0; i < 4 && var->words[i]; i++)
            if (strcasecmp(v, var->words[i]) == 0) {
                snprintf(canon, cap, "%s", var->words[i]);
                return 1;
            }
        return 0;
    case INT: {
        const char *p = v + (v[0] == '-');
        if (!*p) return 0;
        unsigned __int128 x = 0;
        for (; *p; p++) {
            if (*p < '0' || *p > '9') return 0;
            x = x * 10 + (unsigned)(*p - '0');
            if (x > (unsigned __int128)1 << 64) return 0;
        }
        __int128 s = v[0] == '-' ? -(__int128)x : (__int128)x;
        if (s < var->lo || s > var->hi) return 0;
        snprintf(canon, cap, "%ld", (long)s);
        return 1;
    }
    case BYTES: {
        const char *p = v;
        unsigned __int128 x = 0;
        for (; *p >= '0' && *p <= '9'; p++) {
            x = x * 10 + (unsigned)(*p - '0');
            if (x > SIZE_MAX) return 0;
        }
        if (p == v) return 0;
        unsigned shift = 0;
        switch (*p) {
        case 'K':
        case 'k': shift = 10, p++; break;
        case 'M':
        case 'm': shift = 20, p++; break;
        case 'G':
        case 'g': shift = 30, p++; break;
        }
        if (*p || (x << shift) > SIZE_MAX) return 0;
        snprintf(canon, cap, "%llu", (unsigned long long)(x << shift));
        return 1;
    }
    case SLACK: {
        if (v[0] < '0' || v[0] > '9') return 0;
        char *end;
        double x = strtod(v, &end);
        if (*end || !(x == 0.0 || (x >= 1.0 && isfinite(x)))) return 0;
        snprintf(canon, cap, "%.17g", x);
        return 1;
    }
    }
    return 0;
}

/* Both settings structs as the environment gives them now; the statuses in st[2]. */
struct got {
    nn_settings s;
    nn_mem_settings m;
    nn_status st[2];
    char msg[2][512];
};

static void read_settings(struct got *g)
{
    memset(g, 0, sizeof *g);
    g->st[0] = nn_settings_from_env(&g->s);
    snprintf(g->msg[0], sizeof g->msg[0], "%s", g->st[0] ? nn_last_error()->message : "");
    g->st[1] = nn_mem_settings_from_env(&g->m);
    snprintf(g->msg[1], sizeof g->msg[1], "%s", g->st[1] ? nn_last_error()->message : "");
}

static void names(nn_status st, const char *msg, const char *fn, const char *var)
{
    char want[128];
    snprintf(want, sizeof want, "%s: %s ", fn, var);
    if (st != NN_E_ENV || strncmp(msg, want, strlen(want)) != 0) {
        fprintf(stderr, "expected NN_E_ENV \"%s...\", got %s \"%s\"\n", want, nn_status_name(st),
                msg);
        abort();
    }
}

static const char *fn_of(const struct var *v)
{
    return v->mem ? "nn_mem_settings_from_env" : "nn_settings_from_env";
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
    char *text = malloc(size + 1), *val[NVARS] = {NULL};
    if (!text) abort();
    memcpy(text, data, size);
    text[size] = 0;
    char *p = text;
    for (size_t i = 0; i < NVARS && p; i++) {
        val[i] = p;
        p = strchr(p, '\n');
        if (p) *p++ = 0;
    }
    for (size_t i = 0; i < NVARS; i++)
        unsetenv(vars[i].name);
    struct got g, c;
    int ok[NVARS];
    for (size_t i = 0; i < NVARS; i++) {
        if (!val[i]) continue;
        char canon[128];
        ok[i] = oracle(&vars[i], val[i], canon, sizeof canon);
        setenv(vars[i].name, val[i], 1);
        read_settings(&g);
        nn_status st = g.st[vars[i].mem];
        if (!ok[i]) {
            names(st, g.msg[vars[i].mem], fn_of(&vars[i]), vars[i].name);
        } else {
            if (st != NN_OK) {
                fprintf(stderr, "%s=\"%s\" refused: %s\n", vars[i].name, val[i],
                        g.msg[vars[i].mem]);
                abort();
            }
            setenv(vars[i].name, canon, 1);
            read_settings(&c);
            if (c.st[0] || c.st[1] || memcmp(&g.s, &c.s, sizeof g.s) != 0 ||
                memcmp(&g.m, &c.m, sizeof g.m) != 0) {
                fprintf(stderr, "%s=\"%s\" does not read as \"%s\"\n", vars[i].name, val[i], canon);
                abort();
            }
        }
        unsetenv(vars[i].name);
    }
    /* All at once: each function names one of the malformed variables it reads, and fills the
     * settings as if only the well-formed ones were set. */
    int bad[2] = {0, 0};
    for (size_t i = 0; i < NVARS; i++)
        if (val[i] && ok[i]) setenv(vars[i].name, val[i], 1);
    read_settings(&c);
    if (c.st[0] || c.st[1]) abort();
    for (size_t i = 0; i < NVARS; i++)
        if (val[i] && !ok[i]) {
            setenv(vars[i].name, val[i], 1);
            bad[vars[i].mem]++;
        }
    read_settings(&g);
    for (int m = 0; m < 2; m++) {
        if (!bad[m]) {
            if (g.st[m] != NN_OK) abort();
            continue;
        }
        size_t i = 0;
        for (; i < NVARS; i++) {
            char want[128];
            snprintf(want, sizeof want, "%s: %s ", fn_of(&vars[i]), vars[i].name);
            if (vars[i].mem == m && val[i] && !ok[i] && !strncmp(g.msg[m], want, strlen(want)))
                break;
        }
        if (i == NVARS) {
            fprintf(stderr, "%d malformed, got %s \"%s\"\n", bad[m], nn_status_name(g.st[m]),
                    g.msg[m]);
            abort();
        }
        names(g.st[m], g.msg[m], fn_of(&vars[i]), vars[i].name);
    }
    if (memcmp(&g.s, &c.s, sizeof g.s) != 0 || memcmp(&g.m, &c.m, sizeof g.m) != 0) {
        fprintf(stderr, "a malformed variable changed the settings\n");
        abort();
    }
    for (size_t i = 0; i < NVARS; i++)
        unsetenv(vars[i].name);
    free(text);
    return 0;
}

/* Parsing NNPRIM_* variables: every failure names the public function being called, the variable,
 * what it accepts and what it held. Numbers are parsed strictly, digits only (strtoul would take
 * leading blanks and a sign, so " -1" would become a huge byte count). */
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/env.h"
#include "core/error.h"

static nn_status env_fail(const char *fn, const char *var, const char *accepted, const char *got)
{
    return NN__FAIL(NULL, NN_E_ENV, "%s: %s must be %s, got \"%s\"", fn, var, accepted, got);
}

nn_status nn__env_word(const char *fn, const char *var, const struct nn__env_word *words, size_t n,
                       const char *accepted, int *out)
{
    const char *v = getenv(var);
    if (!v) return NN_OK;
    for (size_t i = 0; i < n; i++)
        if (strcasecmp(v, words[i].text) == 0) {
            *out = words[i].value;
            return NN_OK;
        }
    return env_fail(fn, var, accepted, v);
}

/* Leading decimal digits of v as a value <= max; *end after them. Nonzero on no digits or a
 * value above max. */
static int digits(const char *v, uint64_t max, uint64_t *x, const char **end)
{
    uint64_t r = 0;
    const char *p = v;
    for (; *p >= '0' && *p <= '9'; p++) {
        unsigned d = (unsigned)(*p - '0');
        if (r > (max - d) / 10) return 1;
        r = r * 10 + d;
    }
    *x = r;
    *end = p;
    return p == v;
}

nn_status nn__env_int(const char *fn, const char *var, long lo, long hi, int *out)
{
    const char *v = getenv(var);
    if (!v) return NN_OK;
    int neg = v[0] == '-';
    uint64_t mag;
    const char *end;
    long x = 0;
    int bad = digits(v + neg, (uint64_t)LONG_MAX + neg, &mag, &end) || *end;
    if (!bad) x = neg ? (mag > (uint64_t)LONG_MAX ? LONG_MIN : -(long)mag) : (long)mag;
    if (bad || x < lo || x > hi) {
        char accepted[96];
        snprintf(accepted, sizeof accepted, "an integer in [%ld, %ld]", lo, hi);
        return env_fail(fn, var, accepted, v);
    }
    *out = (int)x;
    return NN_OK;
}

nn_status nn__env_bytes(const char *fn, const char *var, size_t *out)
{
    const char *v = getenv(var);
    if (!v) return NN_OK;
    const char *accepted = "a byte count (digits only) with an optional K, M or G suffix";
    uint64_t x;
    const char *end;
    if (digits(v, SIZE_MAX, &x, &end)) return env_fail(fn, var, accepted, v);
    unsigned shift = 0;
    if (*end == 'K' || *end == 'k')
        shift = 10, end++;
    else if (*end == 'M' || *end == 'm')
        shift = 20, end++;
    else if (*end == 'G' || *end == 'g')
        shift = 30, end++;
    if (*end || x > (uint64_t)SIZE_MAX >> shift) return env_fail(fn, var, accepted, v);
    *out = (size_t)(x << shift);
    return NN_OK;
}

/* Parsing NNPRIM_* variables: every failure names the variable, what it accepts and what it held.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/env.h"
#include "core/error.h"

static nn_status env_fail(const char *var, const char *accepted, const char *got)
{
    return NN__FAIL(NULL, NN_E_ENV, "%s must be %s, got \"%s\"", var, accepted, got);
}

nn_status nn__env_word(const char *var, const struct nn__env_word *words, size_t n,
                       const char *accepted, int *out)
{
    const char *v = getenv(var);
    if (!v) return NN_OK;
    for (size_t i = 0; i < n; i++)
        if (strcasecmp(v, words[i].text) == 0) {
            *out = words[i].value;
            return NN_OK;
        }
    return env_fail(var, accepted, v);
}

nn_status nn__env_int(const char *var, long lo, long hi, int *out)
{
    const char *v = getenv(var);
    if (!v) return NN_OK;
    char *end;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (errno || end == v || *end || x < lo || x > hi) {
        char accepted[96];
        snprintf(accepted, sizeof accepted, "an integer in [%ld, %ld]", lo, hi);
        return env_fail(var, accepted, v);
    }
    *out = (int)x;
    return NN_OK;
}

/* Bytes with an optional K/M/G suffix (powers of 1024). */
nn_status nn__env_bytes(const char *var, size_t *out)
{
    const char *v = getenv(var);
    if (!v) return NN_OK;
    char *end;
    errno = 0;
    unsigned long long x = strtoull(v, &end, 10);
    unsigned shift = 0;
    if (*end == 'K' || *end == 'k')
        shift = 10, end++;
    else if (*end == 'M' || *end == 'm')
        shift = 20, end++;
    else if (*end == 'G' || *end == 'g')
        shift = 30, end++;
    if (errno || end == v || *end || v[0] == '-' || (x << shift >> shift) != x ||
        x << shift > SIZE_MAX)
        return env_fail(var, "a byte count with an optional K, M or G suffix", v);
    *out = (size_t)(x << shift);
    return NN_OK;
}

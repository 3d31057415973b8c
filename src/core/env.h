/* Reading NNPRIM_* environment variables. Each function leaves *out alone when the variable is
 * unset and returns NN_OK; a malformed value gives NN_E_ENV with a message naming fn (the public
 * function being called), the variable, the accepted values and what it held (and *out is left
 * alone too). Numbers are digits only: no blanks, no '+', a '-' only for an integer range that
 * includes negatives. */
#ifndef NN_CORE_ENV_H
#define NN_CORE_ENV_H

#include <stddef.h>

#include "nnprim/status.h"

/* One accepted word of an enumerated variable (compared without case). */
struct nn__env_word {
    const char *text;
    int value;
};

nn_status nn__env_word(const char *fn, const char *var, const struct nn__env_word *words, size_t n,
                       const char *accepted, int *out);
nn_status nn__env_int(const char *fn, const char *var, long lo, long hi, int *out);
/* Bytes with an optional K, M or G suffix (powers of 1024). */
nn_status nn__env_bytes(const char *fn, const char *var, size_t *out);

#endif

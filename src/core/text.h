/* Building the problem text of an op (the case syntax its verbose line and `nnprim check` use). */
#ifndef NN_CORE_TEXT_H
#define NN_CORE_TEXT_H

#include <stddef.h>

/* Appends printf-style text at offset n of buf (cap bytes, kept NUL-terminated, truncated when
 * full) and returns the new offset; once n >= cap nothing is written and n is returned, so a
 * sequence of calls needs no checks in between. */
size_t nn__text_put(char *buf, size_t cap, size_t n, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* A backward call's gradients, when it did not ask for all of dx, dw and db (each nonzero when
 * asked): " grads=dx+db" (" grads=none" for none) at offset n, as nn__text_put(); nothing when
 * all three were asked. */
size_t nn__text_put_grads(char *buf, size_t cap, size_t n, int dx, int dw, int db);

#endif

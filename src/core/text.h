/* Building the problem text of an op (the case syntax its verbose line and `nnprim check` use). */
#ifndef NN_CORE_TEXT_H
#define NN_CORE_TEXT_H

#include <stddef.h>
#include <stdint.h>

/* Appends printf-style text at offset n of buf (cap bytes, kept NUL-terminated, truncated when
 * full) and returns the new offset; once n >= cap nothing is written and n is returned, so a
 * sequence of calls needs no checks in between. */
size_t nn__text_put(char *buf, size_t cap, size_t n, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* One list of the case syntax at offset n, as nn__text_put(): " name" then the nsp values joined
 * by 'x' (" stride2x2"). */
size_t nn__text_put_list(char *buf, size_t cap, size_t n, const char *name, int nsp,
                         const int64_t *v);

/* A backward call's gradients, when it did not ask for all of dx, dw and db (each nonzero when
 * asked): " grads=dx+db" (" grads=none" for none) at offset n, as nn__text_put(); nothing when
 * all three were asked. */
size_t nn__text_put_grads(char *buf, size_t cap, size_t n, int dx, int dw, int db);

/* The same writer with its buffer and offset in one struct, for text built by several functions
 * that pass it down (the cuDNN layer's descriptions). */
struct nn__text {
    char *buf;
    size_t cap, n;
};

/* A text at the start of buf (cap bytes; made "" when cap > 0). */
struct nn__text nn__text_start(char *buf, size_t cap);

/* Appends printf-style text, as nn__text_put(). */
void nn__text_add(struct nn__text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Appends the n values of a, separated by sep ("1x2x3"). */
void nn__text_add_list(struct nn__text *t, const int64_t *a, int n, const char *sep);

#endif

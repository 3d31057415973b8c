#include "core/text.h"

#include <stdarg.h>
#include <stdio.h>

size_t nn__text_put(char *buf, size_t cap, size_t n, const char *fmt, ...)
{
    if (n >= cap) return n;
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(buf + n, cap - n, fmt, ap);
    va_end(ap);
    return k > 0 ? n + (size_t)k : n;
}

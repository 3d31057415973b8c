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

size_t nn__text_put_list(char *buf, size_t cap, size_t n, const char *name, int nsp,
                         const int64_t *v)
{
    n = nn__text_put(buf, cap, n, " %s", name);
    for (int i = 0; i < nsp; i++)
        n = nn__text_put(buf, cap, n, i ? "x%lld" : "%lld", (long long)v[i]);
    return n;
}

size_t nn__text_put_grads(char *buf, size_t cap, size_t n, int dx, int dw, int db)
{
    if (dx && dw && db) return n;
    if (!dx && !dw && !db) return nn__text_put(buf, cap, n, " grads=none");
    const char *sep = " grads=";
    if (dx) n = nn__text_put(buf, cap, n, "%sdx", sep), sep = "+";
    if (dw) n = nn__text_put(buf, cap, n, "%sdw", sep), sep = "+";
    if (db) n = nn__text_put(buf, cap, n, "%sdb", sep);
    return n;
}

struct nn__text nn__text_start(char *buf, size_t cap)
{
    if (cap) buf[0] = '\0';
    return (struct nn__text){buf, cap, 0};
}

void nn__text_add(struct nn__text *t, const char *fmt, ...)
{
    if (t->n >= t->cap) return;
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(t->buf + t->n, t->cap - t->n, fmt, ap);
    va_end(ap);
    if (k > 0) t->n += (size_t)k;
}

void nn__text_add_list(struct nn__text *t, const int64_t *a, int n, const char *sep)
{
    for (int i = 0; i < n; i++)
        nn__text_add(t, "%s%lld", i ? sep : "", (long long)a[i]);
}

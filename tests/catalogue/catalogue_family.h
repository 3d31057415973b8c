/* What the catalogue's family files (catalogue_<family>.c) share beyond catalogue.h: a fixture of
 * the family's own tensors made before each row's call and freed after it, and views into
 * tensors. A new family's file includes this instead of copying them. */
#ifndef NN_TESTS_CATALOGUE_FAMILY_H
#define NN_TESTS_CATALOGUE_FAMILY_H

#include <string.h>

#include "catalogue.h"

/* A row's call on a family fixture. With
 *   #define CALL(fname) CAT_FAMILY_CALL(fname, struct lin, l, lin_setup, lin_free)
 * `CALL(name) { ... }` defines the row's `nn_status name(struct cat *c)`: it runs setup(c, &f),
 * then the braces as a body that sees the fixture as `l` (a struct lin *), then teardown(c, &f),
 * and returns the body's status. */
#define CAT_FAMILY_CALL(fname, type, var, setup, teardown)                                         \
    static nn_status fname##_body(struct cat *c, type *var);                                       \
    static nn_status fname(struct cat *c)                                                          \
    {                                                                                              \
        type fixture;                                                                              \
        setup(c, &fixture);                                                                        \
        nn_status st = fname##_body(c, &fixture);                                                  \
        teardown(c, &fixture);                                                                     \
        return st;                                                                                 \
    }                                                                                              \
    static nn_status fname##_body(struct cat *c, type *var)

/* Frees each tensor with c's context, in order; a failure is a row's failure ("row cleanup"). */
static inline void cat_free_tensors(struct cat *c, nn_tensor *const *ts, size_t n)
{
    for (size_t i = 0; i < n; i++)
        cr_expect_eq(nn_tensor_free(c->ctx, ts[i]), NN_OK, "row cleanup: %s",
                     nn_last_error()->message);
}
#define CAT_FREE_TENSORS(c, ...)                                                                   \
    cat_free_tensors((c), (nn_tensor *const[]){__VA_ARGS__},                                       \
                     sizeof((nn_tensor *const[]){__VA_ARGS__}) / sizeof(nn_tensor *))

/* A packed view of rank and dims on t's storage, starting offset elements in (t's dtype and
 * space; the bytes are t's, in or out of its extent as the row wants). */
static inline nn_tensor cat_view_on(const nn_tensor *t, int rank, const int64_t *dims,
                                    int64_t offset)
{
    nn_tensor v = *t;
    v.rank = rank;
    memset(v.dims, 0, sizeof v.dims);
    memcpy(v.dims, dims, (size_t)rank * sizeof *dims);
    cat_packed(&v);
    v.data = (char *)t->data + offset * (int64_t)nn_dtype_size(t->dtype);
    return v;
}

/* A rank-2 t viewed column-major: the same dims, strides {1, dims[0]} (not packed row-major). */
static inline nn_tensor cat_transposed(const nn_tensor *t)
{
    nn_tensor v = *t;
    v.strides[0] = 1;
    v.strides[1] = t->dims[0];
    return v;
}

#endif

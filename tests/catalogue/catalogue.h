/* The bad-input catalogue: one table of rows per subject (catalogue_<subject>.c), each row one
 * bad or edge call of a public function, run in its own process (a Criterion parameterized test
 * per subject) on whichever backend the context gets: the reference backend without a GPU or with
 * NNPRIM_BACKEND=ref, cuDNN with device tensors where a GPU is found (or NNPRIM_BACKEND=cudnn).
 *
 * A row gives the function called, the argument its message must name, the exact status on each
 * backend and the call itself. The runner (catalogue.c) builds the fixture, clears the thread's
 * last error, runs the call, and asserts:
 *   - the status is the row's (want_ref on a reference context, want_gpu on a cuDNN one);
 *   - for a failure, nn_last_error()->message starts with "<fn>: " and names the argument as a
 *     word (so "x" does not match "dx");
 *   - then a valid convolution and a valid max pooling on the same context give the right values.
 *
 * Adding a family (docs/INPUT.md): write tests/catalogue/catalogue_<family>.c with a static
 * `struct cat_row rows[]` and CAT_SUBJECT(<family>, rows) at the end, and add the file to
 * tests/catalogue/meson.build; catalogue_family.h makes and frees a fixture of the family's own
 * tensors around each row (CAT_FAMILY_CALL) and views into them. Helpers below make the fixture's
 * tensors and the wrong-space, misaligned and overlapping variants of them. */
#ifndef NN_TESTS_CATALOGUE_H
#define NN_TESTS_CATALOGUE_H

#include <criterion/criterion.h>
#include <criterion/parameterized.h>

#include "nnprim/nnprim.h"

/* What every row gets: a context and small valid operands for conv and pooling, in the context's
 * memory, filled with small integers (every sum is exact). */
struct cat {
    nn_ctx *ctx;
    int gpu;                              /* ctx runs cuDNN */
    nn_conv_params cp;                    /* 2-D, 3x3 filter, stride 1, no padding */
    nn_tensor x, w, b, y, dy, dx, dw, db; /* x 1x2x5x5, w 3x2x3x3, b 3, y dy 1x3x3x3 */
    nn_pool_params pp;                    /* 2-D max, window 2, stride 2 */
    nn_tensor px, py, pdy, pdx;           /* px pdx 1x2x4x4, py pdy 1x2x2x2 */
    char dir[64];                         /* a fresh temporary directory, removed after */
    nn_ctx *other;                        /* cat_other_ctx() */
    nn_ctx *gpu_ctx;                      /* cat_device_tensor() on a reference context */
    void *blocks[16];                     /* cat_host_block() memory, freed after */
    int nblocks;
};

/* Backend a row runs on; a row that only makes sense on one skips on the other. */
enum cat_needs {
    CAT_ANY = 0,
    CAT_REF_ONLY = 1, /* skipped on a cuDNN context */
    CAT_GPU_ONLY = 2  /* skipped on a reference context */
};

struct cat_row {
    const char *name; /* unique in its table, says what is wrong */
    const char *fn;   /* the public function called: the message must start with "fn: " */
    const char *arg;  /* the argument the message must name; NULL: not checked */
    nn_status want_ref, want_gpu;
    enum cat_needs needs;
    nn_status (*call)(struct cat *c);
};

/* A row with the same status on both backends. */
#define ROW(name, fn, arg, st, call)                                                               \
    {                                                                                              \
        name, fn, arg, st, st, CAT_ANY, call                                                       \
    }
/* A row whose status differs by backend. */
#define ROW2(name, fn, arg, st_ref, st_gpu, call)                                                  \
    {                                                                                              \
        name, fn, arg, st_ref, st_gpu, CAT_ANY, call                                               \
    }
/* A row for one backend only. */
#define ROW_ON(needs, name, fn, arg, st, call)                                                     \
    {                                                                                              \
        name, fn, arg, st, st, needs, call                                                         \
    }

void cat_run(const struct cat_row *row);

/* One parameterized test per table: each row in its own process. The parameters are row indices
 * (in Criterion's shared memory), so nothing with a pointer crosses the process boundary. */
#define CAT_SUBJECT(subject, table)                                                                \
    static void cat_free_##subject(struct criterion_test_params *p)                                \
    {                                                                                              \
        cr_free(p->params);                                                                        \
    }                                                                                              \
    ParameterizedTestParameters(catalogue, subject)                                                \
    {                                                                                              \
        size_t n = sizeof table / sizeof table[0];                                                 \
        int *idx = cr_malloc(n * sizeof *idx);                                                     \
        for (size_t i = 0; i < n; i++)                                                             \
            idx[i] = (int)i;                                                                       \
        return cr_make_param_array(int, idx, n, cat_free_##subject);                               \
    }                                                                                              \
    ParameterizedTest(int *i, catalogue, subject)                                                  \
    {                                                                                              \
        cat_run(&table[*i]);                                                                       \
    }

/* ---------------------------------------------------------------------------------------------
 * Helpers for rows (each aborts the test on an unexpected failure)
 */

/* A new contiguous tensor in c->ctx's memory, filled with integers in [-3, 3] from seed. */
nn_tensor cat_tensor(struct cat *c, nn_dtype dtype, int rank, const int64_t *dims, uint64_t seed);

/* Host memory of bytes bytes (zeroed, 64-byte aligned), freed with the fixture. */
void *cat_host_block(struct cat *c, size_t bytes);

/* The same view, in the other memory space for real: a host copy for a cuDNN context; for a
 * reference context, a device tensor of a cuDNN context (the row skips without a GPU). */
nn_tensor cat_wrong_space(struct cat *c, const nn_tensor *t);

/* The same view with only its space label flipped (never dereferenced: it must be refused). */
nn_tensor cat_claim_other_space(const struct cat *c, const nn_tensor *t);

/* A second context with the same settings (for pullbacks used with another context). */
nn_ctx *cat_other_ctx(struct cat *c);

/* Row-major contiguous strides of t's dims, written into t. */
void cat_packed(nn_tensor *t);

/* A workspace query's answer: call the query with bytes = CAT_WS_UNSET, then (in a statement of
 * its own: an argument list's order is unspecified) pass its status and bytes here. bytes must be
 * untouched on failure and 0 on success where zero or on the reference (which takes no pool
 * memory). Returns st. */
#define CAT_WS_UNSET ((size_t)12345)
nn_status cat_ws_answer(struct cat *c, nn_status st, size_t bytes, int zero);

/* A row that runs a call with the device pool of c's (cuDNN) context limited to one byte, below
 * what the fixture holds, so that every allocation from the pool fails with NN_E_OOM_DEVICE:
 * cat_pool_starve() sets the limit and notes the pool's counters; cat_pool_restore() puts the
 * limit back (before the runner's checks, which allocate) and, with took_none, asserts that the
 * call took nothing from the pool (no allocation made, none refused). CAT_GPU_ONLY rows. */
struct cat_pool_mark {
    int device;
    nn_mem_stats before;
};
void cat_pool_starve(struct cat *c, struct cat_pool_mark *m);
void cat_pool_restore(const struct cat_pool_mark *m, int took_none);

/* t with dims[0] = INT64_MAX / 2 and every stride 0: a one-element extent whose element count
 * overflows int64 (t has 3 or more elements per index of dims[0]). */
nn_tensor cat_count_overflow(const nn_tensor *t);

/* t with dims[0] = INT64_MAX / 2 and its own strides: a byte extent beyond int64 (t.rank >= 2,
 * t.strides[0] >= 2). */
nn_tensor cat_extent_overflow(const nn_tensor *t);

/* A host view of memory (no pointer lookup), space HOST, packed strides. */
nn_tensor cat_host_view(void *data, nn_dtype dtype, int rank, const int64_t *dims);

/* Element values of t (any space) as doubles, in row-major order, into out (numel entries). */
void cat_read(struct cat *c, const nn_tensor *t, double *out);

/* A file under c->dir: returns its path (static storage per call site is the caller's). */
void cat_path(const struct cat *c, const char *name, char *out, size_t cap);

/* Set an environment variable for the rest of the row (the process ends with it). */
void cat_setenv(const char *name, const char *value);

#endif

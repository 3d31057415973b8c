/* The catalogue's fixture and runner (see catalogue.h). */
#include <ftw.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "catalogue.h"
#include "gpu.h"

/* Device tensors made on another context, released before it goes. */
static struct {
    nn_ctx *ctx;
    nn_tensor t;
} foreign[8];
static int nforeign;

nn_tensor cat_tensor(struct cat *c, nn_dtype dtype, int rank, const int64_t *dims, uint64_t seed)
{
    nn_tensor t;
    cr_assert_eq(nn_tensor_empty(c->ctx, dtype, rank, dims, &t), NN_OK, "fixture: %s",
                 nn_last_error()->message);
    cr_assert_eq(nn_tensor_fill_ints(c->ctx, &t, -3, 3, seed), NN_OK, "fixture: %s",
                 nn_last_error()->message);
    return t;
}

void *cat_host_block(struct cat *c, size_t bytes)
{
    cr_assert_lt(c->nblocks, (int)(sizeof c->blocks / sizeof c->blocks[0]), "fixture: blocks");
    void *p = NULL;
    cr_assert_eq(posix_memalign(&p, 64, bytes ? bytes : 1), 0, "fixture: out of host memory");
    memset(p, 0, bytes);
    c->blocks[c->nblocks++] = p;
    return p;
}

void cat_packed(nn_tensor *t)
{
    cr_assert_eq(nn_contiguous_strides(t->rank, t->dims, t->strides), NN_OK, "fixture: %s",
                 nn_last_error()->message);
}

nn_status cat_ws_answer(struct cat *c, nn_status st, size_t bytes, int zero)
{
    if (st != NN_OK) cr_assert_eq(bytes, CAT_WS_UNSET, "bytes untouched on failure");
    if (st == NN_OK && (zero || !c->gpu))
        cr_assert_eq(bytes, 0, "no pool memory: the reference, or a query that takes none");
    return st;
}

void cat_pool_starve(struct cat *c, struct cat_pool_mark *m)
{
    cr_assert(c->gpu, "fixture: a pool limit row runs on a cuDNN context");
    nn_settings s;
    cr_assert_eq(nn_ctx_get_settings(c->ctx, &s), NN_OK, "fixture");
    m->device = s.device;
    cr_assert_eq(nn_mem_get_stats(m->device, &m->before), NN_OK, "fixture: %s",
                 nn_last_error()->message);
    cr_assert_eq(nn_mem_set_limit(m->device, 1), NN_OK, "fixture: %s", nn_last_error()->message);
}

void cat_pool_restore(const struct cat_pool_mark *m, int took_none)
{
    nn_error_info e = *nn_last_error(); /* the row's: the calls below succeed or abort */
    cr_assert_eq(nn_mem_set_limit(m->device, m->before.limit), NN_OK, "fixture: %s",
                 nn_last_error()->message);
    nn_mem_stats after;
    cr_assert_eq(nn_mem_get_stats(m->device, &after), NN_OK, "fixture: %s",
                 nn_last_error()->message);
    if (took_none) {
        cr_assert_eq(after.alloc_count_total, m->before.alloc_count_total,
                     "the call allocated from the pool");
        cr_assert_eq(after.oom_failures, m->before.oom_failures,
                     "the call asked the pool for memory (refused under the limit)");
    }
    cr_assert_eq(nn_last_error()->status, e.status, "fixture: the row's error is kept");
}

nn_tensor cat_count_overflow(const nn_tensor *t)
{
    int64_t rest = 1;
    for (int i = 1; i < t->rank; i++)
        rest *= t->dims[i];
    cr_assert_geq(rest, 3, "fixture: a count overflow needs 3 or more elements per dims[0]");
    nn_tensor v = *t;
    v.dims[0] = INT64_MAX / 2;
    memset(v.strides, 0, sizeof v.strides);
    return v;
}

nn_tensor cat_extent_overflow(const nn_tensor *t)
{
    cr_assert(t->rank >= 2 && t->strides[0] >= 2,
              "fixture: an extent overflow needs strides[0] >= 2");
    nn_tensor v = *t;
    v.dims[0] = INT64_MAX / 2;
    return v;
}

nn_tensor cat_host_view(void *data, nn_dtype dtype, int rank, const int64_t *dims)
{
    nn_tensor t;
    memset(&t, 0, sizeof t);
    t.data = data;
    t.dtype = dtype;
    t.rank = rank;
    memcpy(t.dims, dims, (size_t)rank * sizeof *dims);
    t.space = NN_SPACE_HOST;
    t.device = -1;
    cat_packed(&t);
    return t;
}

static size_t bytes_of(const nn_tensor *t)
{
    return (size_t)nn_tensor_numel(t) * nn_dtype_size(t->dtype);
}

nn_tensor cat_wrong_space(struct cat *c, const nn_tensor *t)
{
    if (c->gpu) {
        nn_tensor h = cat_host_view(cat_host_block(c, bytes_of(t)), t->dtype, t->rank, t->dims);
        cr_assert_eq(nn_tensor_copy(c->ctx, &h, t), NN_OK, "fixture: %s", nn_last_error()->message);
        return h;
    }
    const char *why;
    if (!nn_test_have_gpu(&why))
        cr_skip_test("a real device tensor on a reference context needs a GPU: %s", why);
    if (!c->gpu_ctx) {
        nn_settings s;
        nn_settings_from_env(&s);
        s.backend = NN_BACKEND_CUDNN;
        s.plan_cache_file = NULL;
        cr_assert_eq(nn_ctx_create(&c->gpu_ctx, &s), NN_OK, "fixture: %s",
                     nn_last_error()->message);
    }
    cr_assert_lt(nforeign, 8, "fixture: foreign tensors");
    nn_tensor d;
    cr_assert_eq(nn_tensor_empty(c->gpu_ctx, t->dtype, t->rank, t->dims, &d), NN_OK, "fixture: %s",
                 nn_last_error()->message);
    cr_assert_eq(nn_tensor_copy(c->gpu_ctx, &d, t), NN_OK, "fixture: %s", nn_last_error()->message);
    cr_assert_eq(nn_ctx_synchronize(c->gpu_ctx), NN_OK, "fixture: %s", nn_last_error()->message);
    foreign[nforeign].ctx = c->gpu_ctx;
    foreign[nforeign++].t = d;
    return d;
}

nn_tensor cat_claim_other_space(const struct cat *c, const nn_tensor *t)
{
    nn_tensor v = *t;
    v.space = c->gpu ? NN_SPACE_HOST : NN_SPACE_DEVICE;
    v.device = c->gpu ? -1 : 0;
    return v;
}

nn_ctx *cat_other_ctx(struct cat *c)
{
    if (!c->other) {
        nn_settings s;
        cr_assert_eq(nn_ctx_get_settings(c->ctx, &s), NN_OK, "fixture");
        s.plan_cache_file = NULL;
        cr_assert_eq(nn_ctx_create(&c->other, &s), NN_OK, "fixture: %s", nn_last_error()->message);
    }
    return c->other;
}

static double half_to_double(uint16_t h)
{
    int e = (h >> 10) & 0x1f, m = h & 0x3ff;
    double v = e == 0 ? ldexp(m, -24) : e == 31 ? (m ? NAN : INFINITY) : ldexp(m + 1024, e - 25);
    return (h & 0x8000) ? -v : v;
}

void cat_read(struct cat *c, const nn_tensor *t, double *out)
{
    int64_t n = nn_tensor_numel(t);
    void *buf = malloc(bytes_of(t));
    cr_assert_not_null(buf, "fixture: out of host memory");
    nn_tensor h = cat_host_view(buf, t->dtype, t->rank, t->dims);
    cr_assert_eq(nn_tensor_copy(c->ctx, &h, t), NN_OK, "fixture: %s", nn_last_error()->message);
    for (int64_t i = 0; i < n; i++) {
        switch (t->dtype) {
        case NN_DTYPE_F32: out[i] = ((const float *)buf)[i]; break;
        case NN_DTYPE_F64: out[i] = ((const double *)buf)[i]; break;
        case NN_DTYPE_F16: out[i] = half_to_double(((const uint16_t *)buf)[i]); break;
        case NN_DTYPE_BF16: {
            uint32_t bits = (uint32_t)((const uint16_t *)buf)[i] << 16;
            float f;
            memcpy(&f, &bits, sizeof f);
            out[i] = f;
            break;
        }
        }
    }
    free(buf);
}

void cat_path(const struct cat *c, const char *name, char *out, size_t cap)
{
    snprintf(out, cap, "%s/%s", c->dir, name);
}

void cat_setenv(const char *name, const char *value)
{
    cr_assert_eq(setenv(name, value, 1), 0, "fixture: setenv %s", name);
}

/* ---------------------------------------------------------------------------------------------
 * Fixture
 */

static const int64_t x_dims[] = {1, 2, 5, 5}, w_dims[] = {3, 2, 3, 3}, b_dims[] = {3},
                     y_dims[] = {1, 3, 3, 3}, px_dims[] = {1, 2, 4, 4}, py_dims[] = {1, 2, 2, 2};

static void setup(struct cat *c)
{
    memset(c, 0, sizeof *c);
    nforeign = 0;
    nn_settings s;
    /* The environment chooses the backend (NNPRIM_BACKEND); no plan file is read or written. */
    cr_assert_eq(nn_settings_from_env(&s), NN_OK, "fixture: %s", nn_last_error()->message);
    s.plan_cache_file = NULL;
    cr_assert_eq(nn_ctx_create(&c->ctx, &s), NN_OK, "fixture: %s", nn_last_error()->message);
    c->gpu = nn_ctx_backend(c->ctx) == NN_BACKEND_CUDNN;
    snprintf(c->dir, sizeof c->dir, "/tmp/nn-catalogue.XXXXXX");
    cr_assert_not_null(mkdtemp(c->dir), "fixture: mkdtemp");

    cr_assert_eq(nn_conv_params_default(&c->cp, 2), NN_OK, "fixture");
    c->x = cat_tensor(c, NN_DTYPE_F32, 4, x_dims, 1);
    c->w = cat_tensor(c, NN_DTYPE_F32, 4, w_dims, 2);
    c->b = cat_tensor(c, NN_DTYPE_F32, 1, b_dims, 3);
    c->y = cat_tensor(c, NN_DTYPE_F32, 4, y_dims, 4);
    c->dy = cat_tensor(c, NN_DTYPE_F32, 4, y_dims, 5);
    c->dx = cat_tensor(c, NN_DTYPE_F32, 4, x_dims, 6);
    c->dw = cat_tensor(c, NN_DTYPE_F32, 4, w_dims, 7);
    c->db = cat_tensor(c, NN_DTYPE_F32, 1, b_dims, 8);

    memset(&c->pp, 0, sizeof c->pp);
    c->pp.spatial_rank = 2;
    c->pp.mode = NN_POOL_MAX;
    c->pp.window[0] = c->pp.window[1] = 2;
    c->pp.stride[0] = c->pp.stride[1] = 2;
    c->px = cat_tensor(c, NN_DTYPE_F32, 4, px_dims, 9);
    c->py = cat_tensor(c, NN_DTYPE_F32, 4, py_dims, 10);
    c->pdy = cat_tensor(c, NN_DTYPE_F32, 4, py_dims, 11);
    c->pdx = cat_tensor(c, NN_DTYPE_F32, 4, px_dims, 12);
}

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(path);
}

static void teardown(struct cat *c)
{
    /* Rows may have consumed or replaced a tensor's data; free what is still nnprim's. */
    nn_tensor *ts[] = {&c->x,  &c->w,  &c->b,  &c->y,  &c->dy,  &c->dx,
                       &c->dw, &c->db, &c->px, &c->py, &c->pdy, &c->pdx};
    for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++)
        cr_expect_eq(nn_tensor_free(c->ctx, ts[i]), NN_OK, "teardown: %s",
                     nn_last_error()->message);
    for (int i = 0; i < nforeign; i++)
        nn_tensor_free(foreign[i].ctx, &foreign[i].t);
    nn_ctx_destroy(c->other);
    nn_ctx_destroy(c->gpu_ctx);
    nn_ctx_destroy(c->ctx);
    for (int i = 0; i < c->nblocks; i++)
        free(c->blocks[i]);
    nftw(c->dir, rm_entry, 8, FTW_DEPTH | FTW_PHYS);
}

/* ---------------------------------------------------------------------------------------------
 * After the row: the context still computes right
 */

static void expect_values(const char *what, const double *got, const double *want, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        cr_assert_eq(got[i], want[i],
                     "after the row, a valid %s on the same context: [%lld] = %g, "
                     "expected %g",
                     what, (long long)i, got[i], want[i]);
}

static void check_conv(struct cat *c)
{
    nn_conv_params p;
    nn_conv_params_default(&p, 2);
    nn_tensor x = cat_tensor(c, NN_DTYPE_F32, 4, x_dims, 21);
    nn_tensor w = cat_tensor(c, NN_DTYPE_F32, 4, w_dims, 22);
    nn_tensor b = cat_tensor(c, NN_DTYPE_F32, 1, b_dims, 23);
    nn_tensor y = cat_tensor(c, NN_DTYPE_F32, 4, y_dims, 24);
    cr_assert_eq(nn_conv_forward(c->ctx, &p, &x, &w, &b, &y, NULL), NN_OK,
                 "after the row, a valid nn_conv_forward failed: %s", nn_last_error()->message);
    double hx[50], hw[54], hb[3], hy[27], want[27];
    cat_read(c, &x, hx);
    cat_read(c, &w, hw);
    cat_read(c, &b, hb);
    cat_read(c, &y, hy);
    for (int k = 0; k < 3; k++)
        for (int i = 0; i < 3; i++)
            for (int j = 0; j < 3; j++) {
                double s = hb[k];
                for (int ch = 0; ch < 2; ch++)
                    for (int r = 0; r < 3; r++)
                        for (int q = 0; q < 3; q++)
                            s += hx[(ch * 5 + i + r) * 5 + j + q] *
                                 hw[((k * 2 + ch) * 3 + r) * 3 + q];
                want[(k * 3 + i) * 3 + j] = s;
            }
    expect_values("nn_conv_forward", hy, want, 27);
    nn_tensor *ts[] = {&x, &w, &b, &y};
    for (int i = 0; i < 4; i++)
        cr_assert_eq(nn_tensor_free(c->ctx, ts[i]), NN_OK, "%s", nn_last_error()->message);
}

static void check_pool(struct cat *c)
{
    nn_pool_params p;
    memset(&p, 0, sizeof p);
    p.spatial_rank = 2;
    p.mode = NN_POOL_MAX;
    p.window[0] = p.window[1] = p.stride[0] = p.stride[1] = 2;
    nn_tensor x = cat_tensor(c, NN_DTYPE_F32, 4, px_dims, 31);
    nn_tensor y = cat_tensor(c, NN_DTYPE_F32, 4, py_dims, 32);
    cr_assert_eq(nn_pool_forward(c->ctx, &p, &x, &y, NULL), NN_OK,
                 "after the row, a valid nn_pool_forward failed: %s", nn_last_error()->message);
    double hx[32], hy[8], want[8];
    cat_read(c, &x, hx);
    cat_read(c, &y, hy);
    for (int ch = 0; ch < 2; ch++)
        for (int i = 0; i < 2; i++)
            for (int j = 0; j < 2; j++) {
                double m = -INFINITY;
                for (int r = 0; r < 2; r++)
                    for (int q = 0; q < 2; q++)
                        m = fmax(m, hx[(ch * 4 + 2 * i + r) * 4 + 2 * j + q]);
                want[(ch * 2 + i) * 2 + j] = m;
            }
    expect_values("nn_pool_forward", hy, want, 8);
    cr_assert_eq(nn_tensor_free(c->ctx, &x), NN_OK, "%s", nn_last_error()->message);
    cr_assert_eq(nn_tensor_free(c->ctx, &y), NN_OK, "%s", nn_last_error()->message);
}

/* ---------------------------------------------------------------------------------------------
 * Runner
 */

static int is_word_char(char ch)
{
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
           ch == '_';
}

/* arg occurs in msg with no identifier character right before or after it. */
static int names_word(const char *msg, const char *arg)
{
    size_t n = strlen(arg);
    for (const char *p = strstr(msg, arg); p; p = strstr(p + 1, arg)) {
        int before = p > msg && is_word_char(p[-1]) && is_word_char(arg[0]);
        int after = is_word_char(p[n]) && is_word_char(arg[n - 1]);
        if (!before && !after) return 1;
    }
    return 0;
}

void cat_run(const struct cat_row *row)
{
    struct cat c;
    setup(&c);
    if (row->needs == CAT_REF_ONLY && c.gpu)
        cr_skip_test("%s: a reference-backend row (this context runs cuDNN)", row->name);
    if (row->needs == CAT_GPU_ONLY && !c.gpu)
        cr_skip_test("%s: a cuDNN-backend row (this context runs the reference backend)",
                     row->name);
    nn_clear_last_error();
    nn_status st = row->call(&c);
    nn_error_info e = *nn_last_error();
    nn_status want = c.gpu ? row->want_gpu : row->want_ref;
    cr_assert_eq(st, want, "%s: %s returned %s, expected %s (message: \"%s\")", row->name, row->fn,
                 nn_status_name(st), nn_status_name(want), e.message);
    if (want != NN_OK) {
        cr_assert_eq(e.status, st, "%s: nn_last_error()->status is %s, the call returned %s",
                     row->name, nn_status_name(e.status), nn_status_name(st));
        size_t n = strlen(row->fn);
        cr_assert(strncmp(e.message, row->fn, n) == 0 && e.message[n] == ':',
                  "%s: the message must start with \"%s:\", got \"%s\"", row->name, row->fn,
                  e.message);
        if (row->arg)
            cr_assert(names_word(e.message + n, row->arg),
                      "%s: the message must name %s, got \"%s\"", row->name, row->arg, e.message);
    }
    check_conv(&c);
    check_pool(&c);
    teardown(&c);
}

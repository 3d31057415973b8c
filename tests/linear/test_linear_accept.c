/* nn_linear_forward and nn_linear_backward accept exactly the calls their rules allow
 * (include/nnprim/linear.h): a seeded sweep of valid calls with one or two fields of a tensor
 * argument mutated (moved onto another tensor, misaligned, dims, strides, rank, dtype, space,
 * reserved, made NULL), each compared with an oracle made of the step-by-step checks
 * (nn_tensor_validate, nn_tensor_is_contiguous, nn__tensors_overlap,
 * nn__tensor_self_overlaps). linear.c decides the common case in one pass and leaves every
 * other call to its checks made one by one, which give the refusal and its message; the sweep
 * shows that the one-pass test accepts nothing the checks refuse, and refuses nothing they
 * accept, on the reference backend. */
#include <criterion/criterion.h>
#include <stdint.h>
#include <string.h>

#include "core/tensor_util.h"
#include "nnprim/nnprim.h"

#define SLOT   4096
#define SLOTS  8
#define TRIALS 6000

static _Alignas(256) unsigned char arena[(SLOTS + 1) * SLOT];
static nn_ctx *ctx;

static uint64_t next(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static void setup(void)
{
    nn_settings st;
    nn_settings_from_env(&st);
    st.backend = NN_BACKEND_REF;
    cr_assert_eq(nn_ctx_create(&ctx, &st), NN_OK);
}

static void teardown(void)
{
    nn_ctx_destroy(ctx);
}

TestSuite(linear_accept, .init = setup, .fini = teardown);

/* x, w, b, y, dy, dx, dw, db of one problem, each packed in its own slot of the arena. */
enum { X, W, B, Y, DY, DX, DW, DB };

struct call {
    nn_tensor t[SLOTS];
    const nn_tensor *arg[SLOTS]; /* &t[i] or NULL */
};

static void place(nn_tensor *t, int slot, nn_dtype dt, int rank, const int64_t *dims)
{
    memset(t, 0, sizeof *t);
    t->data = arena + (size_t)slot * SLOT;
    t->dtype = dt;
    t->rank = rank;
    memcpy(t->dims, dims, (size_t)rank * sizeof *dims);
    cr_assert_eq(nn_contiguous_strides(rank, dims, t->strides), NN_OK);
    t->space = NN_SPACE_HOST;
    t->device = -1;
}

static void make_call(uint64_t *s, struct call *c)
{
    nn_dtype dt = (next(s) % 4) ? NN_DTYPE_F32 : NN_DTYPE_F64;
    int xr = 1 + (int)(next(s) % 3);
    int64_t xd[3], in = 1 + (int64_t)(next(s) % 4), out = 1 + (int64_t)(next(s) % 4);
    for (int i = 0; i + 1 < xr; i++)
        xd[i] = 1 + (int64_t)(next(s) % 3);
    xd[xr - 1] = in;
    int64_t yd[3];
    memcpy(yd, xd, sizeof yd);
    yd[xr - 1] = out;
    place(&c->t[X], X, dt, xr, xd);
    place(&c->t[W], W, dt, 2, (int64_t[]){out, in});
    place(&c->t[B], B, dt, 1, &out);
    place(&c->t[Y], Y, dt, xr, yd);
    place(&c->t[DY], DY, dt, xr, yd);
    place(&c->t[DX], DX, dt, xr, xd);
    place(&c->t[DW], DW, dt, 2, (int64_t[]){out, in});
    place(&c->t[DB], DB, dt, 1, &out);
    for (int i = 0; i < SLOTS; i++)
        c->arg[i] = &c->t[i];
}

/* v one up or down, held at int64's ends (a hostile value stays one). */
static int64_t nudged(int64_t v, int up)
{
    return up ? (v < INT64_MAX ? v + 1 : v) : (v > INT64_MIN ? v - 1 : v);
}

/* One field of tensor i replaced; with others, the moves make overlaps. */
static void mutate(uint64_t *s, struct call *c, int i)
{
    nn_tensor *t = &c->t[i];
    int d = (int)(next(s) % (uint64_t)(t->rank > 0 && t->rank <= NN_MAX_RANK ? t->rank : 1));
    switch (next(s) % 12) {
    case 0: c->arg[i] = NULL; break;
    case 1: /* onto another tensor, at an element or a byte past its start */
        t->data = (unsigned char *)c->t[next(s) % SLOTS].data + 4 * (next(s) % 4);
        break;
    case 2: t->data = (unsigned char *)t->data + 1 + next(s) % 3; break;
    case 3: t->dims[d] = nudged(t->dims[d], next(s) % 2); break;
    case 4: t->dims[d] = (next(s) % 2) ? INT64_MAX : (int64_t)1 << 40; break;
    case 5: t->strides[d] = nudged(t->strides[d], next(s) % 2); break;
    case 6: t->strides[d] = (next(s) % 2) ? 0 : INT64_MAX; break;
    case 7: /* a dim of 1 with another stride: packed all the same */
        t->dims[d] = 1;
        (void)nn_contiguous_strides(t->rank, t->dims, t->strides);
        t->strides[d] = (int64_t)(next(s) % 9) - 1;
        break;
    case 8: t->rank += (next(s) % 2) ? 1 : -1; break;
    case 9: t->dtype = (nn_dtype)(next(s) % 5); break;
    case 10: t->space = (next(s) % 2) ? NN_SPACE_DEVICE : (nn_space)7, t->device = 0; break;
    case 11:
        if (next(s) % 2)
            t->reserved[0] = 1 + next(s) % 5;
        else
            t->flags = 2 + next(s) % 5; /* no such flag */
        break;
    }
}

/* Up to two mutations among the four tensors from first on (the forward's or backward's). */
static void mutate_some(uint64_t *s, struct call *c, int first)
{
    int n = (int)(next(s) % 3);
    for (int k = 0; k < n; k++)
        mutate(s, c, first + (int)(next(s) % 4));
}

static int usable(const nn_tensor *t, nn_dtype dt)
{
    return nn_tensor_validate(t, "t") == NN_OK && t->space == NN_SPACE_HOST && t->dtype == dt;
}

static int dims_are(const nn_tensor *t, int rank, const int64_t *dims)
{
    if (t->rank != rank) return 0;
    for (int i = 0; i < rank; i++)
        if (t->dims[i] != dims[i]) return 0;
    return 1;
}

/* A written view: distinct elements, apart from each of the n others given. */
static int writable(const nn_tensor *t, const nn_tensor *const *others, int n)
{
    if (nn__tensor_self_overlaps(t)) return 0;
    for (int i = 0; i < n; i++)
        if (others[i] && nn__tensors_overlap(t, others[i])) return 0;
    return 1;
}

static int all_packed(const nn_tensor *const *t, int n)
{
    for (int i = 0; i < n; i++)
        if (t[i] && !nn_tensor_is_contiguous(t[i])) return 0;
    return 1;
}

static int forward_ok(const struct call *c)
{
    const nn_tensor *x = c->arg[X], *w = c->arg[W], *b = c->arg[B], *y = c->arg[Y];
    if (!x || !w || !y || nn_tensor_validate(x, "x") != NN_OK || x->space != NN_SPACE_HOST)
        return 0;
    nn_dtype dt = x->dtype;
    if (!usable(w, dt) || (b && !usable(b, dt)) || !usable(y, dt)) return 0;
    int r = x->rank;
    int64_t out = w->dims[0], yd[NN_MAX_RANK];
    memcpy(yd, x->dims, sizeof yd);
    yd[r - 1] = out;
    if (w->rank != 2 || w->dims[1] != x->dims[r - 1] || (b && !dims_are(b, 1, &out)) ||
        !dims_are(y, r, yd))
        return 0;
    const nn_tensor *ins[] = {x, w, b}, *all[] = {x, w, b, y};
    return writable(y, ins, 3) && all_packed(all, 4);
}

static int backward_ok(const struct call *c, int relu)
{
    const nn_tensor *x = &c->t[X], *w = &c->t[W], *dy = c->arg[DY];
    nn_dtype dt = x->dtype;
    int r = x->rank;
    int64_t yd[NN_MAX_RANK];
    memcpy(yd, x->dims, sizeof yd);
    yd[r - 1] = w->dims[0];
    if (!dy || !usable(dy, dt) || !dims_are(dy, r, yd)) return 0;
    const nn_tensor *before[] = {dy, x, w, relu ? &c->t[Y] : NULL, c->arg[DX], c->arg[DW]};
    const int64_t *want[] = {x->dims, w->dims, &w->dims[0]};
    int rank[] = {r, 2, 1};
    for (int k = 0; k < 3; k++) {
        const nn_tensor *g = c->arg[DX + k];
        if (g && (!usable(g, dt) || !dims_are(g, rank[k], want[k]) || !writable(g, before, 4 + k)))
            return 0;
    }
    const nn_tensor *all[] = {dy, c->arg[DX], c->arg[DW], c->arg[DB]};
    return all_packed(all, 4);
}

/* An accepted view spans its memory inside the arena (else the trial would write past it). */
static int inside(const struct call *c)
{
    for (int i = 0; i < SLOTS; i++) {
        size_t e;
        if (!c->arg[i] || nn_tensor_extent_bytes(c->arg[i], &e) != NN_OK) continue;
        uintptr_t p = (uintptr_t)c->arg[i]->data, lo = (uintptr_t)arena;
        if (p < lo || p + e > lo + sizeof arena) return 0;
    }
    return 1;
}

static void expect_same(nn_status st, int ok, const char *fn, int trial)
{
    cr_assert_eq(st == NN_OK, ok, "trial %d: %s gave %s (%s), the checks say %s", trial, fn,
                 nn_status_name(st), st ? nn_last_error()->message : "", ok ? "accept" : "refuse");
    if (st) cr_assert(strncmp(nn_last_error()->message, fn, strlen(fn)) == 0);
}

Test(linear_accept, forward_accepts_what_its_checks_accept)
{
    uint64_t s = 3;
    nn_linear_params p;
    nn_linear_params_default(&p);
    int accepted = 0;
    for (int trial = 0; trial < TRIALS; trial++) {
        struct call c;
        make_call(&s, &c);
        mutate_some(&s, &c, X);
        int ok = forward_ok(&c);
        if (ok && !inside(&c)) continue;
        p.activation = (next(&s) % 2) ? NN_ACTIVATION_RELU : NN_ACTIVATION_IDENTITY;
        nn_status st =
            nn_linear_forward(ctx, &p, c.arg[X], c.arg[W], c.arg[B], (nn_tensor *)c.arg[Y], NULL);
        expect_same(st, ok, "nn_linear_forward", trial);
        accepted += ok;
    }
    cr_expect_gt(accepted, TRIALS / 5);
}

Test(linear_accept, backward_accepts_what_its_checks_accept)
{
    uint64_t s = 8;
    nn_linear_params p;
    nn_linear_params_default(&p);
    int accepted = 0;
    for (int trial = 0; trial < TRIALS; trial++) {
        struct call c;
        make_call(&s, &c);
        int relu = (int)(next(&s) % 2);
        p.activation = relu ? NN_ACTIVATION_RELU : NN_ACTIVATION_IDENTITY;
        nn_backward_options o = {.accumulate = (unsigned)(next(&s) % 8)};
        nn_linear_pullback *pb = NULL;
        cr_assert_eq(nn_linear_forward(ctx, &p, &c.t[X], &c.t[W], &c.t[B], &c.t[Y], &pb), NN_OK,
                     "%s", nn_last_error()->message);
        mutate_some(&s, &c, DY);
        int ok = backward_ok(&c, relu);
        if (!ok || inside(&c)) {
            nn_status st = nn_linear_backward_ex(ctx, &pb, &o, c.arg[DY], (nn_tensor *)c.arg[DX],
                                                 (nn_tensor *)c.arg[DW], (nn_tensor *)c.arg[DB]);
            expect_same(st, ok, "nn_linear_backward_ex", trial);
            cr_assert_eq(pb == NULL, ok, "trial %d: the pullback is consumed on success only",
                         trial);
            accepted += ok;
        }
        cr_assert_eq(nn_linear_pullback_free(&pb), NN_OK);
    }
    cr_expect_gt(accepted, TRIALS / 5);
}

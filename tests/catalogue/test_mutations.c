/* Hostile input by mutation: every public op call starts from a valid call on the reference
 * backend, one or two of its arguments (a tensor view's field, a parameter field, a length, a
 * target, an optional tensor made NULL) are replaced by an edge or garbage value from a seeded
 * generator, and the call is made. The catalogue (catalogue_*.c) names the expected status of
 * chosen bad calls; this sweep covers the combinations nobody wrote down, and asserts what must
 * hold for every one of them (docs/INPUT.md):
 *   - the status is NN_OK or a defined error code, and a failure's message starts with the called
 *     function;
 *   - a call given a view that nn_tensor_validate() refuses does not return NN_OK;
 *   - no byte outside the views is written (each tensor lives in its own slot of one arena, with
 *     a guard zone after it), inputs are never written, and a refused call writes no output;
 *   - a refused backward call leaves the pullback the caller's (it can still be freed);
 *   - the context stays usable: the valid call, run again, gives bitwise the first result.
 * A mutated view that passes validation but spans past its slot is memory the caller does not
 * own (its bug, not nnprim's), so that trial is not run. */
#include <criterion/criterion.h>
#include <float.h>
#include <limits.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "nn_config.h"
#include "nnprim/nnprim.h"

#define SLOT_BYTES  4096
#define GUARD_BYTES 256
#define SLOT_STRIDE (SLOT_BYTES + GUARD_BYTES)
#define MAX_TENSORS 12
#define GUARD_BYTE  0xA5
#define TRIALS      3000

enum field_kind { F_I32, F_I64, F_U32, F_U64, F_F64 };

struct field {
    const char *name;
    size_t offset;
    enum field_kind kind;
};

#define FIELD(type, member, kind)                                                                  \
    {                                                                                              \
#member, offsetof(type, member), kind                                                      \
    }

struct slot {
    const char *name;
    nn_tensor t;
    int output;   /* the call writes it */
    int optional; /* NULL is a valid argument */
    int locked;   /* read by the call but never mutated (a backward case's forward operands) */
};

struct mcase {
    nn_ctx *ctx;
    const char *fn;
    unsigned char *mem; /* the arena: one slot per tensor, targets and lengths */
    unsigned char *snapshot;
    size_t mem_bytes;
    struct slot s[MAX_TENSORS];
    int n;
    const nn_tensor *arg[MAX_TENSORS]; /* what the call passes: &s[i].t or NULL */
    void *params;                      /* the struct the fields mutate (or NULL) */
    size_t params_bytes;
    const struct field *fields;
    int n_fields;
    /* Per-op state the calls use. */
    nn_conv_params cp;
    nn_pool_params pp;
    nn_linear_params lp;
    nn_softmax_params sp;
    nn_layernorm_params lnp;
    nn_rnn_params rp;
    nn_backward_options bo;
    nn_class_targets targets;
    int32_t *lengths; /* in the arena; NULL = every sequence full */
    int n_lengths, max_length;
    int targets_slot, lengths_slot; /* -1: none */
    int64_t classes;
    nn_status (*call)(struct mcase *m, int *pullback_kept);
    int mostly_valid; /* most mutations give valid input (flags, ignored fields): no ratio check */
    int *pass;        /* a workspace query's pass argument (mutated too), or NULL */
};

static uint64_t rng_state;

static uint64_t rnd(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

static int pick(int n)
{
    return (int)(rnd() % (uint64_t)n);
}

/* ---------------------------------------------------------------------------------------------
 * Building a case
 */

static void arena_init(struct mcase *m, int slots)
{
    m->mem_bytes = (size_t)slots * SLOT_STRIDE;
    m->mem = aligned_alloc(64, m->mem_bytes);
    m->snapshot = malloc(m->mem_bytes);
    cr_assert(m->mem && m->snapshot);
    memset(m->mem, GUARD_BYTE, m->mem_bytes);
    m->targets_slot = m->lengths_slot = -1;
}

static unsigned char *slot_base(const struct mcase *m, int i)
{
    return m->mem + (size_t)i * SLOT_STRIDE;
}

/* A packed tensor in its own slot: inputs filled with small integers (exact in every dtype),
 * outputs with a recognisable non-zero pattern. */
static int add(struct mcase *m, const char *name, int rank, const int64_t *dims, int output,
               int optional)
{
    int i = m->n++;
    cr_assert(i < MAX_TENSORS);
    struct slot *s = &m->s[i];
    s->name = name;
    s->output = output;
    s->optional = optional;
    memset(&s->t, 0, sizeof s->t);
    s->t.data = slot_base(m, i);
    s->t.dtype = NN_DTYPE_F64;
    s->t.rank = rank;
    memcpy(s->t.dims, dims, (size_t)rank * sizeof *dims);
    cr_assert(nn_contiguous_strides(rank, dims, s->t.strides) == NN_OK);
    s->t.space = NN_SPACE_HOST;
    s->t.device = -1;
    int64_t n = nn_tensor_numel(&s->t);
    cr_assert(n > 0 && (size_t)n * sizeof(double) <= SLOT_BYTES, "%s does not fit a slot", name);
    double *d = s->t.data;
    for (int64_t k = 0; k < n; k++)
        d[k] = output ? 0.25 : (double)((int)((k * 7 + i * 3) % 7) - 3) / 4;
    memset((unsigned char *)s->t.data + n * sizeof(double), GUARD_BYTE,
           SLOT_STRIDE - (size_t)n * sizeof(double));
    m->arg[i] = &s->t;
    return i;
}

/* A slot for raw data that is not a tensor (targets, lengths): returns its base. */
static void *add_raw(struct mcase *m, const char *name, size_t bytes)
{
    int i = m->n++;
    cr_assert(i < MAX_TENSORS && bytes <= SLOT_BYTES);
    m->s[i].name = name;
    m->s[i].locked = 1; /* not a tensor: never mutated as one, never passed as one */
    m->arg[i] = NULL;
    return slot_base(m, i);
}

/* ---------------------------------------------------------------------------------------------
 * Mutations
 */

static const int64_t i64_values[] = {0,
                                     -1,
                                     1,
                                     2,
                                     3,
                                     5,
                                     64,
                                     INT32_MAX,
                                     1LL << 31,
                                     1LL << 40,
                                     INT64_MAX,
                                     INT64_MIN,
                                     INT64_MAX / 2,
                                     -(1LL << 40)};
static const int32_t i32_values[] = {0, -1, 1, 2, 3, 4, 5, 7, 64, 99, INT_MAX, INT_MIN};
static const uint32_t u32_values[] = {0, 1, 2, 4, 8, 16, 0x80000000u, 0xFFFFFFFFu};
static const uint64_t u64_values[] = {0, 1, 1ULL << 63, ~0ULL};

static double f64_value(void)
{
    static const double v[] = {0.0, -0.0, -1.0, 0.5, 0.999999, 1.0, 2.0, 1e300, -1e300, DBL_MIN};
    switch (pick(14)) {
    case 0: return NAN;
    case 1: return INFINITY;
    case 2: return -INFINITY;
    case 3: return (double)pick(5) - 2.0;
    default: return v[pick((int)(sizeof v / sizeof *v))];
    }
}

/* v + by (by = 1 or -1) and 2 v, saturating: an earlier mutation may have left an extreme. */
static int64_t step64(int64_t v, int by)
{
    return by > 0 ? (v < INT64_MAX ? v + 1 : v) : (v > INT64_MIN ? v - 1 : v);
}

static int64_t twice64(int64_t v)
{
    return v > INT64_MAX / 2 ? INT64_MAX : v < INT64_MIN / 2 ? INT64_MIN : 2 * v;
}

static int32_t step32(int32_t v, int by)
{
    return by > 0 ? (v < INT32_MAX ? v + 1 : v) : (v > INT32_MIN ? v - 1 : v);
}

static void mutate_field(struct mcase *m)
{
    const struct field *f = &m->fields[pick(m->n_fields)];
    unsigned char *p = (unsigned char *)m->params + f->offset;
    switch (f->kind) {
    case F_I32: {
        int32_t v;
        memcpy(&v, p, sizeof v);
        int k = pick(14);
        v = k == 12 ? step32(v, 1) : k == 13 ? step32(v, -1) : i32_values[k];
        memcpy(p, &v, sizeof v);
        break;
    }
    case F_I64: {
        int64_t v;
        memcpy(&v, p, sizeof v);
        int k = pick(16);
        v = k == 14 ? step64(v, 1) : k == 15 ? step64(v, -1) : i64_values[k];
        memcpy(p, &v, sizeof v);
        break;
    }
    case F_U32: {
        uint32_t v;
        memcpy(&v, p, sizeof v);
        int k = pick(10);
        v = k >= 8 ? v ^ (1u << pick(8)) : u32_values[k];
        memcpy(p, &v, sizeof v);
        break;
    }
    case F_U64: {
        uint64_t v = u64_values[pick(4)];
        memcpy(p, &v, sizeof v);
        break;
    }
    case F_F64: {
        double v = f64_value();
        memcpy(p, &v, sizeof v);
        break;
    }
    }
}

static void mutate_tensor(struct mcase *m, int i)
{
    struct slot *s = &m->s[i];
    nn_tensor *t = &s->t;
    int r = t->rank >= 1 && t->rank <= NN_MAX_RANK ? t->rank : 1;
    int d = pick(r);
    switch (pick(11)) {
    case 0: m->arg[i] = NULL; break;
    case 1: t->data = NULL; break;
    case 2:
        if (t->data) t->data = (unsigned char *)t->data + (pick(2) ? 1 : 8);
        break;
    case 3: {
        static const int ranks[] = {0, -1, 9, INT_MAX};
        t->rank = pick(2) ? step32(t->rank, pick(2) ? 1 : -1) : ranks[pick(4)];
        break;
    }
    case 4:
    case 5: {
        int k = pick(17);
        t->dims[d] = k == 14   ? step64(t->dims[d], 1)
                     : k == 15 ? step64(t->dims[d], -1)
                     : k == 16 ? twice64(t->dims[d])
                               : i64_values[k];
        break;
    }
    case 6:
    case 7: {
        int k = pick(16);
        t->strides[d] = k == 14   ? step64(t->strides[d], 1)
                        : k == 15 ? twice64(t->strides[d])
                                  : i64_values[k];
        break;
    }
    case 8: {
        static const int dtypes[] = {0, 5, -1, NN_DTYPE_F32, NN_DTYPE_F16, NN_DTYPE_BF16};
        t->dtype = (nn_dtype)dtypes[pick(6)];
        break;
    }
    case 9:
        if (pick(2)) {
            t->space = NN_SPACE_DEVICE;
            t->device = 0;
        } else {
            static const int devices[] = {-2, 0, 1, 1000};
            t->device = devices[pick(4)];
        }
        break;
    case 10:
        if (pick(2))
            t->reserved[0] = 1 + (uint64_t)pick(3);
        else
            t->flags = 2 + (uint64_t)pick(3); /* no such flag */
        break;
    }
}

static void mutate_lengths(struct mcase *m)
{
    if (!pick(4)) {
        m->lengths = NULL; /* valid: every sequence full */
        return;
    }
    const int32_t v[] = {-1, 0, 1, m->max_length, m->max_length + 1, INT_MAX, INT_MIN};
    int32_t *lengths = (int32_t *)slot_base(m, m->lengths_slot); /* m->lengths may be NULL now */
    lengths[pick(m->n_lengths)] = v[pick(7)];
}

static void mutate_targets(struct mcase *m)
{
    switch (pick(4)) {
    case 0: m->targets.data = NULL; break;
    case 1: {
        static const int types[] = {0, -1, 3, NN_INDEX_I64};
        m->targets.type = (nn_index_type)types[pick(4)];
        break;
    }
    case 2: m->targets.reserved[pick(2)] = 1; break;
    case 3: {
        int32_t *t = (int32_t *)slot_base(m, m->targets_slot);
        const int32_t v[] = {-1, (int32_t)m->classes, (int32_t)m->classes + 1, INT_MAX, INT_MIN};
        t[pick(2)] = v[pick(5)];
        break;
    }
    }
}

static void mutate(struct mcase *m)
{
    int cand[MAX_TENSORS], n = 0;
    for (int i = 0; i < m->n; i++)
        if (!m->s[i].locked) cand[n++] = i;
    int choice = pick(10);
    if (choice < 2 && m->n_fields)
        mutate_field(m);
    else if (choice == 2 && m->lengths_slot >= 0)
        mutate_lengths(m);
    else if (choice == 3 && m->targets_slot >= 0)
        mutate_targets(m);
    else if (choice == 4 && m->pass)
        *m->pass = i32_values[pick((int)(sizeof i32_values / sizeof *i32_values))];
    else if (n)
        mutate_tensor(m, cand[pick(n)]);
}

/* ---------------------------------------------------------------------------------------------
 * The sweep
 */

/* 1: the view passes validation and lies inside its slot; 0: validation refuses it; -1: it
 * passes validation but reaches past its slot (memory the caller does not own). */
static int view_state(const struct mcase *m, int i)
{
    const nn_tensor *t = m->arg[i];
    if (nn_tensor_validate(t, "t") != NN_OK) return 0;
    size_t ext;
    if (nn_tensor_extent_bytes(t, &ext) != NN_OK) return 0;
    const unsigned char *lo = slot_base(m, i), *p = t->data;
    return p >= lo && p + ext <= lo + SLOT_BYTES ? 1 : -1;
}

/* before: the arena as the call got it (after the mutations). An output of a call that
 * succeeded may change the bytes its view spans, [data, data + extent); nothing else may. */
static void check_memory(const struct mcase *m, const unsigned char *before, nn_status st,
                         uint64_t trial)
{
    for (int i = 0; i < m->n; i++) {
        const unsigned char *a = slot_base(m, i), *b = before + (size_t)i * SLOT_STRIDE;
        size_t lo = 0, hi = 0, ext;
        if (m->s[i].output && st == NN_OK && m->arg[i] &&
            nn_tensor_extent_bytes(m->arg[i], &ext) == NN_OK) {
            lo = (size_t)((const unsigned char *)m->arg[i]->data - a);
            hi = lo + ext;
        }
        for (size_t k = 0; k < SLOT_STRIDE; k++)
            cr_assert(a[k] == b[k] || (k >= lo && k < hi),
                      "%s, trial %llu: byte %zu of %s's slot written outside its view [%zu, %zu) "
                      "(status %s)",
                      m->fn, (unsigned long long)trial, k, m->s[i].name, lo, hi,
                      nn_status_name(st));
    }
}

/* Run the valid call and keep (or compare) its outputs. */
static void base_call(struct mcase *m, unsigned char *outputs, int compare)
{
    memcpy(m->mem, m->snapshot, m->mem_bytes);
    int kept = 0;
    nn_status st = m->call(m, &kept);
    cr_assert(st == NN_OK, "%s: the valid call failed: %s", m->fn, nn_last_error()->message);
    if (compare)
        cr_assert(memcmp(outputs, m->mem, m->mem_bytes) == 0,
                  "%s: the valid call changed its result after the mutated calls", m->fn);
    else
        memcpy(outputs, m->mem, m->mem_bytes);
}

static void sweep(struct mcase *m, uint64_t seed)
{
    memcpy(m->snapshot, m->mem, m->mem_bytes);
    struct mcase base = *m;
    unsigned char params0[512];
    cr_assert(m->params_bytes <= sizeof params0);
    if (m->params) memcpy(params0, m->params, m->params_bytes);
    int pass0 = m->pass ? *m->pass : 0;
    unsigned char *expect = malloc(m->mem_bytes), *before = malloc(m->mem_bytes);
    cr_assert(expect && before);
    base_call(m, expect, 0);
    rng_state = seed;
    int ran = 0, refused = 0;
    for (uint64_t trial = 0; trial < TRIALS; trial++) {
        /* Back to the valid call, then one or two mutations. */
        memcpy(m->mem, m->snapshot, m->mem_bytes);
        memcpy(m->s, base.s, sizeof m->s);
        for (int i = 0; i < m->n; i++)
            m->arg[i] = base.arg[i] ? &m->s[i].t : NULL;
        if (m->params) memcpy(m->params, params0, m->params_bytes);
        m->targets = base.targets;
        if (m->pass) *m->pass = pass0;
        m->lengths = base.lengths;
        int n_mut = 1 + (pick(10) < 3);
        for (int k = 0; k < n_mut; k++)
            mutate(m);
        int invalid = -1, outside = 0;
        for (int i = 0; i < m->n; i++) {
            if (!m->arg[i]) continue;
            int v = view_state(m, i);
            if (v == 0 && invalid < 0) invalid = i;
            outside |= v < 0;
        }
        if (outside) continue;
        memcpy(before, m->mem, m->mem_bytes);
        nn_clear_last_error();
        int kept = 0;
        nn_status st = m->call(m, &kept);
        ran++;
        cr_assert(st == NN_OK || (st <= NN_E_INVALID_ARG && st >= NN_E_INTERNAL),
                  "%s, trial %llu: status %d is not an nn_status", m->fn, (unsigned long long)trial,
                  (int)st);
        cr_assert(st != NN_E_INTERNAL, "%s, trial %llu: internal error: %s", m->fn,
                  (unsigned long long)trial, nn_last_error()->message);
        if (st != NN_OK) {
            refused++;
            const char *msg = nn_last_error()->message;
            size_t n = strlen(m->fn);
            cr_assert(strncmp(msg, m->fn, n) == 0 && msg[n] == ':',
                      "%s, trial %llu: the message does not start with the function: \"%s\"", m->fn,
                      (unsigned long long)trial, msg);
            cr_assert(kept, "%s, trial %llu: a refused backward call lost its pullback", m->fn,
                      (unsigned long long)trial);
        } else {
            if (invalid >= 0) {
                nn_tensor_validate(m->arg[invalid], m->s[invalid].name);
                cr_assert_fail("%s, trial %llu: NN_OK for a call with an invalid %s (%s)", m->fn,
                               (unsigned long long)trial, m->s[invalid].name,
                               nn_last_error()->message);
            }
        }
        check_memory(m, before, st, trial);
        if (trial % 64 == 63) {
            *m = base;
            if (m->params) memcpy(m->params, params0, m->params_bytes);
            if (m->pass) *m->pass = pass0;
            base_call(m, expect, 1);
        }
    }
    *m = base;
    if (m->params) memcpy(m->params, params0, m->params_bytes);
    if (m->pass) *m->pass = pass0;
    base_call(m, expect, 1);
    cr_log_info("%s: %d mutated calls ran, %d refused", m->fn, ran, refused);
    cr_assert(m->mostly_valid || refused > ran / 4, "%s: only %d of %d mutated calls refused",
              m->fn, refused, ran);
    free(expect);
    free(before);
}

static struct mcase *case_new(void)
{
    struct mcase *m = calloc(1, sizeof *m);
    cr_assert(m);
    nn_settings s;
    cr_assert(nn_settings_defaults(&s) == NN_OK);
    s.backend = NN_BACKEND_REF;
    cr_assert(nn_ctx_create(&m->ctx, &s) == NN_OK);
    arena_init(m, MAX_TENSORS);
    return m;
}

static void case_free(struct mcase *m)
{
    nn_ctx_destroy(m->ctx);
    free(m->mem);
    free(m->snapshot);
    free(m);
}

#define T(i)   (m->arg[i])
#define OUT(i) ((nn_tensor *)m->arg[i])

/* ---------------------------------------------------------------------------------------------
 * Convolution
 */

static const struct field conv_fields[] = {
    FIELD(nn_conv_params, spatial_rank, F_I32), FIELD(nn_conv_params, stride[0], F_I64),
    FIELD(nn_conv_params, stride[1], F_I64),    FIELD(nn_conv_params, dilation[0], F_I64),
    FIELD(nn_conv_params, dilation[1], F_I64),  FIELD(nn_conv_params, pad_lo[0], F_I64),
    FIELD(nn_conv_params, pad_lo[1], F_I64),    FIELD(nn_conv_params, pad_hi[0], F_I64),
    FIELD(nn_conv_params, pad_hi[1], F_I64),    FIELD(nn_conv_params, groups, F_I64),
    FIELD(nn_conv_params, mode, F_I32),         FIELD(nn_conv_params, activation, F_I32),
    FIELD(nn_conv_params, reserved[0], F_U64),  FIELD(nn_conv_params, reserved[3], F_U64),
};

static const struct field bo_fields[] = {
    FIELD(nn_backward_options, accumulate, F_U32),
    FIELD(nn_backward_options, keep, F_I32),
};

static void conv_setup(struct mcase *m)
{
    cr_assert(nn_conv_params_default(&m->cp, 2) == NN_OK);
    m->cp.pad_lo[0] = m->cp.pad_hi[0] = 1;
    m->cp.groups = 2;
    int64_t xd[] = {2, 4, 5, 5}, wd[] = {4, 2, 3, 3}, bd[] = {4}, yd[] = {2, 4, 5, 3};
    add(m, "x", 4, xd, 0, 0);
    add(m, "w", 4, wd, 0, 0);
    add(m, "b", 1, bd, 0, 1);
    add(m, "y", 4, yd, 1, 0);
}

static nn_status conv_fwd_call(struct mcase *m, int *kept)
{
    *kept = 1;
    return nn_conv_forward(m->ctx, &m->cp, T(0), T(1), T(2), OUT(3), NULL);
}

Test(mutations, conv_forward)
{
    struct mcase *m = case_new();
    conv_setup(m);
    m->fn = "nn_conv_forward";
    m->params = &m->cp;
    m->params_bytes = sizeof m->cp;
    m->fields = conv_fields;
    m->n_fields = (int)(sizeof conv_fields / sizeof *conv_fields);
    m->call = conv_fwd_call;
    sweep(m, 0x1234);
    case_free(m);
}

/* The forward runs on the valid slots 0..3 (never mutated here: only the backward's arguments,
 * slots 4.., and the options are); the backward gets the mutated ones. */
static nn_status conv_fwd_only(struct mcase *m)
{
    return nn_conv_forward(m->ctx, &m->cp, &m->s[0].t, &m->s[1].t, &m->s[2].t, &m->s[3].t, NULL);
}

static nn_status conv_bwd_call(struct mcase *m, int *kept)
{
    nn_conv_pullback *pb = NULL;
    nn_status st =
        nn_conv_forward(m->ctx, &m->cp, &m->s[0].t, &m->s[1].t, &m->s[2].t, &m->s[3].t, &pb);
    cr_assert(st == NN_OK, "the valid forward failed: %s", nn_last_error()->message);
    st = nn_conv_backward_ex(m->ctx, &pb, &m->bo, T(4), OUT(5), OUT(6), OUT(7));
    *kept = st == NN_OK || pb != NULL;
    if (pb) cr_assert(nn_conv_pullback_free(&pb) == NN_OK);
    return st;
}

/* Slots 0..n-1 are the forward's: never mutated, read by the call through m->s[i].t. The
 * forward runs once here so that its outputs already hold what every later forward writes. */
static void lock_forward(struct mcase *m, int n, nn_status (*forward_only)(struct mcase *m))
{
    for (int i = 0; i < n; i++) {
        m->s[i].locked = 1;
        m->s[i].output = 0;
        m->arg[i] = NULL;
    }
    cr_assert(forward_only(m) == NN_OK, "the valid forward failed: %s", nn_last_error()->message);
}

Test(mutations, conv_backward_ex)
{
    struct mcase *m = case_new();
    conv_setup(m);
    int64_t yd[] = {2, 4, 5, 3}, xd[] = {2, 4, 5, 5}, wd[] = {4, 2, 3, 3}, bd[] = {4};
    add(m, "dy", 4, yd, 0, 0);
    add(m, "dx", 4, xd, 1, 1);
    add(m, "dw", 4, wd, 1, 1);
    add(m, "db", 1, bd, 1, 1);
    lock_forward(m, 4, conv_fwd_only);
    m->fn = "nn_conv_backward_ex";
    m->params = &m->bo;
    m->params_bytes = sizeof m->bo;
    m->fields = bo_fields;
    m->n_fields = 2;
    m->call = conv_bwd_call;
    sweep(m, 0x2345);
    case_free(m);
}

#define SWEEP(fn_name, params_ptr, field_table, call_fn, seed)                                     \
    do {                                                                                           \
        m->fn = fn_name;                                                                           \
        m->params = params_ptr;                                                                    \
        m->params_bytes = sizeof *(params_ptr);                                                    \
        m->fields = field_table;                                                                   \
        m->n_fields = (int)(sizeof field_table / sizeof *field_table);                             \
        m->call = call_fn;                                                                         \
        sweep(m, seed);                                                                            \
    } while (0)

static nn_status conv_data_call(struct mcase *m, int *kept)
{
    *kept = 1;
    return nn_conv_backward_data(m->ctx, &m->cp, T(0), T(1), OUT(2), 0);
}

static nn_status conv_filter_call(struct mcase *m, int *kept)
{
    *kept = 1;
    return nn_conv_backward_filter(m->ctx, &m->cp, T(0), T(1), OUT(2), 0);
}

static nn_status conv_bias_call(struct mcase *m, int *kept)
{
    *kept = 1;
    return nn_conv_backward_bias(m->ctx, &m->cp, T(0), OUT(1), 0);
}

static void conv_params_2d(struct mcase *m)
{
    cr_assert(nn_conv_params_default(&m->cp, 2) == NN_OK);
    m->cp.stride[1] = 2;
    m->cp.pad_lo[0] = m->cp.pad_hi[0] = 1;
}

/* x 2x4x5x6, w 3x4x3x3, stride 1x2, pad 1x0: y 2x3x5x2. */
static const int64_t cx_d[] = {2, 4, 5, 6}, cw_d[] = {3, 4, 3, 3}, cy_d[] = {2, 3, 5, 2},
                     cb_d[] = {3};

Test(mutations, conv_backward_data)
{
    struct mcase *m = case_new();
    conv_params_2d(m);
    add(m, "dy", 4, cy_d, 0, 0);
    add(m, "w", 4, cw_d, 0, 0);
    add(m, "dx", 4, cx_d, 1, 0);
    SWEEP("nn_conv_backward_data", &m->cp, conv_fields, conv_data_call, 0x3456);
    case_free(m);
}

Test(mutations, conv_backward_filter)
{
    struct mcase *m = case_new();
    conv_params_2d(m);
    add(m, "x", 4, cx_d, 0, 0);
    add(m, "dy", 4, cy_d, 0, 0);
    add(m, "dw", 4, cw_d, 1, 0);
    SWEEP("nn_conv_backward_filter", &m->cp, conv_fields, conv_filter_call, 0x4567);
    case_free(m);
}

Test(mutations, conv_backward_bias)
{
    struct mcase *m = case_new();
    conv_params_2d(m);
    add(m, "dy", 4, cy_d, 0, 0);
    add(m, "db", 1, cb_d, 1, 0);
    SWEEP("nn_conv_backward_bias", &m->cp, conv_fields, conv_bias_call, 0x5678);
    case_free(m);
}

/* ---------------------------------------------------------------------------------------------
 * Pooling
 */

static const struct field pool_fields[] = {
    FIELD(nn_pool_params, spatial_rank, F_I32), FIELD(nn_pool_params, mode, F_I32),
    FIELD(nn_pool_params, window[0], F_I64),    FIELD(nn_pool_params, window[1], F_I64),
    FIELD(nn_pool_params, stride[0], F_I64),    FIELD(nn_pool_params, stride[1], F_I64),
    FIELD(nn_pool_params, pad_lo[0], F_I64),    FIELD(nn_pool_params, pad_lo[1], F_I64),
    FIELD(nn_pool_params, pad_hi[0], F_I64),    FIELD(nn_pool_params, pad_hi[1], F_I64),
    FIELD(nn_pool_params, reserved[0], F_U64),  FIELD(nn_pool_params, reserved[3], F_U64),
};

/* x 2x3x5x4, window 3x2, stride 2x2, pad 1x0, mean excluding padding: y 2x3x3x2. */
static const int64_t px_d[] = {2, 3, 5, 4}, py_d[] = {2, 3, 3, 2};

static void pool_setup(struct mcase *m)
{
    memset(&m->pp, 0, sizeof m->pp);
    m->pp.spatial_rank = 2;
    m->pp.mode = NN_POOL_MEAN_EXCLUDE_PAD;
    m->pp.window[0] = 3;
    m->pp.window[1] = 2;
    m->pp.stride[0] = m->pp.stride[1] = 2;
    m->pp.pad_lo[0] = m->pp.pad_hi[0] = 1;
    add(m, "x", 4, px_d, 0, 0);
    add(m, "y", 4, py_d, 1, 0);
}

static nn_status pool_fwd_call(struct mcase *m, int *kept)
{
    *kept = 1;
    return nn_pool_forward(m->ctx, &m->pp, T(0), OUT(1), NULL);
}

static nn_status pool_fwd_only(struct mcase *m)
{
    return nn_pool_forward(m->ctx, &m->pp, &m->s[0].t, &m->s[1].t, NULL);
}

static nn_status pool_bwd_call(struct mcase *m, int *kept)
{
    nn_pool_pullback *pb = NULL;
    nn_status st = nn_pool_forward(m->ctx, &m->pp, &m->s[0].t, &m->s[1].t, &pb);
    cr_assert(st == NN_OK, "the valid forward failed: %s", nn_last_error()->message);
    st = nn_pool_backward_ex(m->ctx, &pb, &m->bo, T(2), OUT(3));
    *kept = st == NN_OK || pb != NULL;
    if (pb) cr_assert(nn_pool_pullback_free(&pb) == NN_OK);
    return st;
}

static nn_status pool_stateless_call(struct mcase *m, int *kept)
{
    *kept = 1;
    return nn_pool_backward_stateless(m->ctx, &m->pp, T(0), T(1), T(2), OUT(3), 0);
}

Test(mutations, pool_forward)
{
    struct mcase *m = case_new();
    pool_setup(m);
    SWEEP("nn_pool_forward", &m->pp, pool_fields, pool_fwd_call, 0x6789);
    case_free(m);
}

Test(mutations, pool_backward_ex)
{
    struct mcase *m = case_new();
    pool_setup(m);
    add(m, "dy", 4, py_d, 0, 0);
    add(m, "dx", 4, px_d, 1, 0);
    lock_forward(m, 2, pool_fwd_only);
    SWEEP("nn_pool_backward_ex", &m->bo, bo_fields, pool_bwd_call, 0x789a);
    case_free(m);
}

Test(mutations, pool_backward_stateless)
{
    struct mcase *m = case_new();
    pool_setup(m);
    m->pp.mode = NN_POOL_MAX;
    m->pp.pad_lo[0] = m->pp.pad_hi[0] = 0;
    m->pp.window[0] = 2;
    int64_t yd[] = {2, 3, 2, 2};
    m->s[1].t.dims[2] = 2;
    cr_assert(nn_contiguous_strides(4, m->s[1].t.dims, m->s[1].t.strides) == NN_OK);
    cr_assert(pool_fwd_only(m) == NN_OK);
    m->s[1].output = 0;
    add(m, "dy", 4, yd, 0, 0);
    add(m, "dx", 4, px_d, 1, 0);
    SWEEP("nn_pool_backward_stateless", &m->pp, pool_fields, pool_stateless_call, 0x89ab);
    case_free(m);
}

/* ---------------------------------------------------------------------------------------------
 * Linear
 */

static const struct field linear_fields[] = {
    FIELD(nn_linear_params, activation, F_I32),
    FIELD(nn_linear_params, reserved[0], F_U64),
    FIELD(nn_linear_params, reserved[3], F_U64),
};

static const int64_t lx_d[] = {2, 3, 5}, lw_d[] = {4, 5}, lb_d[] = {4}, ly_d[] = {2, 3, 4};

static void linear_setup(struct mcase *m)
{
    cr_assert(nn_linear_params_default(&m->lp) == NN_OK);
    m->lp.activation = NN_ACTIVATION_RELU;
    add(m, "x", 3, lx_d, 0, 0);
    add(m, "w", 2, lw_d, 0, 0);
    add(m, "b", 1, lb_d, 0, 1);
    add(m, "y", 3, ly_d, 1, 0);
}

static nn_status linear_fwd_call(struct mcase *m, int *kept)
{
    *kept = 1;
    return nn_linear_forward(m->ctx, &m->lp, T(0), T(1), T(2), OUT(3), NULL);
}

static nn_status linear_fwd_only(struct mcase *m)
{
    return nn_linear_forward(m->ctx, &m->lp, &m->s[0].t, &m->s[1].t, &m->s[2].t, &m->s[3].t, NULL);
}

static nn_status linear_bwd_call(struct mcase *m, int *kept)
{
    nn_linear_pullback *pb = NULL;
    nn_status st =
        nn_linear_forward(m->ctx, &m->lp, &m->s[0].t, &m->s[1].t, &m->s[2].t, &m->s[3].t, &pb);
    cr_assert(st == NN_OK, "the valid forward failed: %s", nn_last_error()->message);
    st = nn_linear_backward_ex(m->ctx, &pb, &m->bo, T(4), OUT(5), OUT(6), OUT(7));
    *kept = st == NN_OK || pb != NULL;
    if (pb) cr_assert(nn_linear_pullback_free(&pb) == NN_OK);
    return st;
}

Test(mutations, linear_forward)
{
    struct mcase *m = case_new();
    linear_setup(m);
    SWEEP("nn_linear_forward", &m->lp, linear_fields, linear_fwd_call, 0x9abc);
    case_free(m);
}

Test(mutations, linear_backward_ex)
{
    struct mcase *m = case_new();
    linear_setup(m);
    add(m, "dy", 3, ly_d, 0, 0);
    add(m, "dx", 3, lx_d, 1, 1);
    add(m, "dw", 2, lw_d, 1, 1);
    add(m, "db", 1, lb_d, 1, 1);
    lock_forward(m, 4, linear_fwd_only);
    SWEEP("nn_linear_backward_ex", &m->bo, bo_fields, linear_bwd_call, 0xabcd);
    case_free(m);
}

/* ---------------------------------------------------------------------------------------------
 * Softmax and cross-entropy
 */

static const struct field softmax_fields[] = {
    FIELD(nn_softmax_params, mode, F_I32),
    FIELD(nn_softmax_params, reserved[0], F_U64),
    FIELD(nn_softmax_params, reserved[3], F_U64),
};

static const int64_t sx_d[] = {2, 5, 3};

static void softmax_setup(struct mcase *m)
{
    cr_assert(nn_softmax_params_default(&m->sp) == NN_OK);
    m->sp.mode = NN_SOFTMAX_MODE_LOG;
    add(m, "x", 3, sx_d, 0, 0);
    add(m, "y", 3, sx_d, 1, 0);
}

static nn_status softmax_fwd_call(struct mcase *m, int *kept)
{
    *kept = 1;
    return nn_softmax_forward(m->ctx, &m->sp, T(0), OUT(1), NULL);
}

static nn_status softmax_fwd_only(struct mcase *m)
{
    return nn_softmax_forward(m->ctx, &m->sp, &m->s[0].t, &m->s[1].t, NULL);
}

static nn_status softmax_bwd_call(struct mcase *m, int *kept)
{
    nn_softmax_pullback *pb = NULL;
    nn_status st = nn_softmax_forward(m->ctx, &m->sp, &m->s[0].t, &m->s[1].t, &pb);
    cr_assert(st == NN_OK, "the valid forward failed: %s", nn_last_error()->message);
    st = nn_softmax_backward_ex(m->ctx, &pb, &m->bo, T(2), OUT(3));
    *kept = st == NN_OK || pb != NULL;
    if (pb) cr_assert(nn_softmax_pullback_free(&pb) == NN_OK);
    return st;
}

Test(mutations, softmax_forward)
{
    struct mcase *m = case_new();
    softmax_setup(m);
    SWEEP("nn_softmax_forward", &m->sp, softmax_fields, softmax_fwd_call, 0xbcde);
    case_free(m);
}

Test(mutations, softmax_backward_ex)
{
    struct mcase *m = case_new();
    softmax_setup(m);
    add(m, "dy", 3, sx_d, 0, 0);
    add(m, "dx", 3, sx_d, 1, 0);
    lock_forward(m, 2, softmax_fwd_only);
    SWEEP("nn_softmax_backward_ex", &m->bo, bo_fields, softmax_bwd_call, 0xcdef);
    case_free(m);
}

/* ---------------------------------------------------------------------------------------------
 * Layer normalisation
 */

static const struct field layernorm_fields[] = {
    FIELD(nn_layernorm_params, normalized_rank, F_I32),
    FIELD(nn_layernorm_params, eps, F_F64),
    FIELD(nn_layernorm_params, reserved[0], F_U64),
    FIELD(nn_layernorm_params, reserved[3], F_U64),
};

static const int64_t nx_d[] = {2, 3, 4}, ng_d[] = {3, 4};

static void layernorm_setup(struct mcase *m)
{
    cr_assert(nn_layernorm_params_default(&m->lnp) == NN_OK);
    m->lnp.normalized_rank = 2;
    add(m, "x", 3, nx_d, 0, 0);
    add(m, "gamma", 2, ng_d, 0, 1);
    add(m, "beta", 2, ng_d, 0, 1);
    add(m, "y", 3, nx_d, 1, 0);
}

static nn_status layernorm_fwd_call(struct mcase *m, int *kept)
{
    *kept = 1;
    return nn_layernorm_forward(m->ctx, &m->lnp, T(0), T(1), T(2), OUT(3), NULL);
}

static nn_status layernorm_fwd_only(struct mcase *m)
{
    return nn_layernorm_forward(m->ctx, &m->lnp, &m->s[0].t, &m->s[1].t, &m->s[2].t, &m->s[3].t,
                                NULL);
}

static nn_status layernorm_bwd_call(struct mcase *m, int *kept)
{
    nn_layernorm_pullback *pb = NULL;
    nn_status st =
        nn_layernorm_forward(m->ctx, &m->lnp, &m->s[0].t, &m->s[1].t, &m->s[2].t, &m->s[3].t, &pb);
    cr_assert(st == NN_OK, "the valid forward failed: %s", nn_last_error()->message);
    st = nn_layernorm_backward_ex(m->ctx, &pb, &m->bo, T(4), OUT(5), OUT(6), OUT(7));
    *kept = st == NN_OK || pb != NULL;
    if (pb) cr_assert(nn_layernorm_pullback_free(&pb) == NN_OK);
    return st;
}

Test(mutations, layernorm_forward)
{
    struct mcase *m = case_new();
    layernorm_setup(m);
    SWEEP("nn_layernorm_forward", &m->lnp, layernorm_fields, layernorm_fwd_call, 0x7a11);
    case_free(m);
}

Test(mutations, layernorm_backward_ex)
{
    struct mcase *m = case_new();
    layernorm_setup(m);
    add(m, "dy", 3, nx_d, 0, 0);
    add(m, "dx", 3, nx_d, 1, 1);
    add(m, "dgamma", 2, ng_d, 1, 1);
    add(m, "dbeta", 2, ng_d, 1, 1);
    lock_forward(m, 4, layernorm_fwd_only);
    SWEEP("nn_layernorm_backward_ex", &m->bo, bo_fields, layernorm_bwd_call, 0x7a12);
    case_free(m);
}

static const int64_t ex_d[] = {3, 5, 2}, el_d[] = {3, 2};

static void xent_setup(struct mcase *m)
{
    add(m, "x", 3, ex_d, 0, 0);
    add(m, "loss", 2, el_d, 1, 0);
    m->targets_slot = m->n;
    int32_t *t = add_raw(m, "targets", 6 * sizeof(int32_t));
    const int32_t v[] = {0, 4, 2, 1, 3, 3};
    memcpy(t, v, sizeof v);
    m->classes = 5;
    memset(&m->targets, 0, sizeof m->targets);
    m->targets.data = t;
    m->targets.type = NN_INDEX_I32;
}

static nn_status xent_fwd_call(struct mcase *m, int *kept)
{
    *kept = 1;
    return nn_softmax_cross_entropy_forward(m->ctx, T(0), &m->targets, OUT(1), NULL);
}

static nn_status xent_fwd_only(struct mcase *m)
{
    return nn_softmax_cross_entropy_forward(m->ctx, &m->s[0].t, &m->targets, &m->s[1].t, NULL);
}

static nn_status xent_bwd_call(struct mcase *m, int *kept)
{
    nn_softmax_cross_entropy_pullback *pb = NULL;
    nn_status st =
        nn_softmax_cross_entropy_forward(m->ctx, &m->s[0].t, &m->targets, &m->s[1].t, &pb);
    cr_assert(st == NN_OK, "the valid forward failed: %s", nn_last_error()->message);
    st = nn_softmax_cross_entropy_backward_ex(m->ctx, &pb, &m->bo, T(3), OUT(4));
    *kept = st == NN_OK || pb != NULL;
    if (pb) cr_assert(nn_softmax_cross_entropy_pullback_free(&pb) == NN_OK);
    return st;
}

Test(mutations, softmax_cross_entropy_forward)
{
    struct mcase *m = case_new();
    xent_setup(m);
    m->fn = "nn_softmax_cross_entropy_forward"; /* no parameter struct: targets are mutated */
    m->call = xent_fwd_call;
    sweep(m, 0xdef0);
    case_free(m);
}

Test(mutations, softmax_cross_entropy_backward_ex)
{
    struct mcase *m = case_new();
    xent_setup(m);
    add(m, "dloss", 2, el_d, 0, 0);
    add(m, "dx", 3, ex_d, 1, 0);
    lock_forward(m, 2, xent_fwd_only);
    m->targets_slot = -1; /* the forward's, not mutated here */
    SWEEP("nn_softmax_cross_entropy_backward_ex", &m->bo, bo_fields, xent_bwd_call, 0xef01);
    case_free(m);
}

/* ---------------------------------------------------------------------------------------------
 * Recurrent layers
 */

static const struct field rnn_fields[] = {
    FIELD(nn_rnn_params, cell, F_I32),         FIELD(nn_rnn_params, input_size, F_I64),
    FIELD(nn_rnn_params, hidden_size, F_I64),  FIELD(nn_rnn_params, proj_size, F_I64),
    FIELD(nn_rnn_params, num_layers, F_I64),   FIELD(nn_rnn_params, bidirectional, F_I32),
    FIELD(nn_rnn_params, bias_mode, F_I32),    FIELD(nn_rnn_params, input_mode, F_I32),
    FIELD(nn_rnn_params, layout, F_I32),       FIELD(nn_rnn_params, dropout, F_F64),
    FIELD(nn_rnn_params, dropout_seed, F_U64), FIELD(nn_rnn_params, clip_enabled, F_I32),
    FIELD(nn_rnn_params, clip_lo, F_F64),      FIELD(nn_rnn_params, clip_hi, F_F64),
    FIELD(nn_rnn_params, reserved[0], F_U64),  FIELD(nn_rnn_params, reserved[3], F_U64),
};

/* LSTM, T 3, N 2, I 3, H 4, one layer, one direction, lengths {3, 2}, clip on. */
static const int64_t rx_d[] = {3, 2, 3}, rh_d[] = {1, 2, 4}, ry_d[] = {3, 2, 4};

static void rnn_setup(struct mcase *m)
{
    cr_assert(nn_rnn_params_default(&m->rp, NN_RNN_LSTM, 3, 4) == NN_OK);
    m->rp.clip_enabled = 1;
    m->rp.clip_lo = -1.5;
    m->rp.clip_hi = 1.5;
    int64_t nw = 0;
    cr_assert(nn_rnn_weights_size(m->ctx, &m->rp, NN_DTYPE_F64, &nw) == NN_OK);
    int64_t wd[] = {nw};
    add(m, "x", 3, rx_d, 0, 0);
    add(m, "hx", 3, rh_d, 0, 1);
    add(m, "cx", 3, rh_d, 0, 1);
    add(m, "w", 1, wd, 0, 0);
    add(m, "y", 3, ry_d, 1, 0);
    add(m, "hy", 3, rh_d, 1, 1);
    add(m, "cy", 3, rh_d, 1, 1);
    m->lengths_slot = m->n;
    m->lengths = add_raw(m, "lengths", 2 * sizeof(int32_t));
    m->lengths[0] = 3;
    m->lengths[1] = 2;
    m->n_lengths = 2;
    m->max_length = 3;
}

static nn_status rnn_fwd_call(struct mcase *m, int *kept)
{
    *kept = 1;
    return nn_rnn_forward(m->ctx, &m->rp,
                          &(nn_rnn_forward_tensors){.x = T(0),
                                                    .lengths = m->lengths,
                                                    .hx = T(1),
                                                    .cx = T(2),
                                                    .w = T(3),
                                                    .y = OUT(4),
                                                    .hy = OUT(5),
                                                    .cy = OUT(6)},
                          NULL);
}

static nn_status rnn_fwd_only(struct mcase *m)
{
    return nn_rnn_forward(m->ctx, &m->rp,
                          &(nn_rnn_forward_tensors){.x = &m->s[0].t,
                                                    .lengths = m->lengths,
                                                    .hx = &m->s[1].t,
                                                    .cx = &m->s[2].t,
                                                    .w = &m->s[3].t,
                                                    .y = &m->s[4].t,
                                                    .hy = &m->s[5].t,
                                                    .cy = &m->s[6].t},
                          NULL);
}

static nn_status rnn_bwd_call(struct mcase *m, int *kept)
{
    nn_rnn_pullback *pb = NULL;
    nn_status st = nn_rnn_forward(m->ctx, &m->rp,
                                  &(nn_rnn_forward_tensors){.x = &m->s[0].t,
                                                            .lengths = m->lengths,
                                                            .hx = &m->s[1].t,
                                                            .cx = &m->s[2].t,
                                                            .w = &m->s[3].t,
                                                            .y = &m->s[4].t,
                                                            .hy = &m->s[5].t,
                                                            .cy = &m->s[6].t},
                                  &pb);
    cr_assert(st == NN_OK, "the valid forward failed: %s", nn_last_error()->message);
    st = nn_rnn_backward_ex(
        m->ctx, &pb, &m->bo,
        &(nn_rnn_backward_tensors){.dy = T(8), .dhy = T(9), .dcy = T(10), .dx = OUT(11)});
    *kept = st == NN_OK || pb != NULL;
    if (pb) cr_assert(nn_rnn_pullback_free(&pb) == NN_OK);
    return st;
}

Test(mutations, rnn_forward)
{
    struct mcase *m = case_new();
    rnn_setup(m);
    SWEEP("nn_rnn_forward", &m->rp, rnn_fields, rnn_fwd_call, 0xf012);
    case_free(m);
}

/* dy, dhy, dcy and dx mutated (dhx, dcx and dw are left out: twelve slots are the arena). */
Test(mutations, rnn_backward_ex)
{
    struct mcase *m = case_new();
    rnn_setup(m);
    lock_forward(m, 8, rnn_fwd_only);
    m->lengths_slot = -1; /* the forward's, not mutated here */
    add(m, "dy", 3, ry_d, 0, 0);
    add(m, "dhy", 3, rh_d, 0, 1);
    add(m, "dcy", 3, rh_d, 0, 1);
    add(m, "dx", 3, rx_d, 1, 1);
    SWEEP("nn_rnn_backward_ex", &m->bo, bo_fields, rnn_bwd_call, 0x0123);
    case_free(m);
}

/* ---------------------------------------------------------------------------------------------
 * Tensor copy and fills
 */

struct fill_args {
    double lo, hi;
    uint64_t seed;
    int ilo, ihi;
};

static const struct field fill_fields[] = {
    FIELD(struct fill_args, lo, F_F64),   FIELD(struct fill_args, hi, F_F64),
    FIELD(struct fill_args, seed, F_U64), FIELD(struct fill_args, ilo, F_I32),
    FIELD(struct fill_args, ihi, F_I32),
};

static struct fill_args fill;

static nn_status copy_call(struct mcase *m, int *kept)
{
    *kept = 1;
    return nn_tensor_copy(m->ctx, OUT(1), T(0));
}

static nn_status fill_uniform_call(struct mcase *m, int *kept)
{
    *kept = 1;
    return nn_tensor_fill_uniform(m->ctx, OUT(0), fill.lo, fill.hi, fill.seed);
}

static nn_status fill_ints_call(struct mcase *m, int *kept)
{
    *kept = 1;
    return nn_tensor_fill_ints(m->ctx, OUT(0), fill.ilo, fill.ihi, fill.seed);
}

static nn_status fill_constant_call(struct mcase *m, int *kept)
{
    *kept = 1;
    return nn_tensor_fill_constant(m->ctx, OUT(0), fill.hi);
}

Test(mutations, tensor_copy)
{
    struct mcase *m = case_new();
    int64_t d[] = {3, 4, 2};
    add(m, "src", 3, d, 0, 0);
    add(m, "dst", 3, d, 1, 0);
    m->s[0].t.strides[1] = 0; /* a broadcast source */
    m->fn = "nn_tensor_copy";
    m->call = copy_call;
    sweep(m, 0x1357);
    case_free(m);
}

static void fill_sweep(const char *fn, nn_status (*call)(struct mcase *, int *), uint64_t seed)
{
    struct mcase *m = case_new();
    int64_t d[] = {5, 3};
    add(m, "t", 2, d, 1, 0);
    fill = (struct fill_args){-2.0, 3.0, 42, -3, 3};
    SWEEP(fn, &fill, fill_fields, call, seed);
    case_free(m);
}

Test(mutations, tensor_fill_uniform)
{
    fill_sweep("nn_tensor_fill_uniform", fill_uniform_call, 0x2468);
}

Test(mutations, tensor_fill_ints)
{
    fill_sweep("nn_tensor_fill_ints", fill_ints_call, 0x3579);
}

Test(mutations, tensor_fill_constant)
{
    fill_sweep("nn_tensor_fill_constant", fill_constant_call, 0x468a);
}

/* ---------------------------------------------------------------------------------------------
 * Context settings
 */

static const struct field settings_fields[] = {
    FIELD(nn_settings, backend, F_I32),
    FIELD(nn_settings, device, F_I32),
    FIELD(nn_settings, math_mode, F_I32),
    FIELD(nn_settings, deterministic, F_I32),
    FIELD(nn_settings, workspace_cap, F_U64),
    FIELD(nn_settings, tuning, F_I32),
    FIELD(nn_settings, autotune_candidates, F_I32),
    FIELD(nn_settings, plan_cache_capacity, F_I32),
    FIELD(nn_settings, background_builds, F_I32),
    FIELD(nn_settings, prebuild_plans, F_I32),
    FIELD(nn_settings, rnn_graphs, F_I32),
    FIELD(nn_settings, linear_graphs, F_I32),
    FIELD(nn_settings, xent_targets, F_I32),
    FIELD(nn_settings, reserved[0], F_U64),
    FIELD(nn_settings, reserved[5], F_U64),
};

static nn_settings settings;

/* A context from the mutated settings, used for one valid pooling call, then destroyed. */
static nn_status settings_call(struct mcase *m, int *kept)
{
    *kept = 1;
    nn_ctx *ctx = NULL;
    nn_status st = nn_ctx_create(&ctx, &settings);
    if (st != NN_OK) {
        cr_assert(ctx == NULL, "a refused nn_ctx_create left a context");
        return st;
    }
    if (nn_ctx_backend(ctx) == NN_BACKEND_REF)
        cr_assert(nn_pool_forward(ctx, &m->pp, &m->s[0].t, OUT(1), NULL) == NN_OK,
                  "a valid call on a context from mutated settings failed: %s",
                  nn_last_error()->message);
    nn_ctx_destroy(ctx);
    return NN_OK;
}

Test(mutations, ctx_create)
{
    struct mcase *m = case_new();
    pool_setup(m);
    m->s[0].locked = m->s[1].locked = 1; /* only the settings are mutated */
    cr_assert(nn_settings_defaults(&settings) == NN_OK);
    settings.backend = NN_BACKEND_REF;
    m->mostly_valid = 1;
    SWEEP("nn_ctx_create", &settings, settings_fields, settings_call, 0x579b);
    case_free(m);
}

/* ---------------------------------------------------------------------------------------------
 * RNN weight views
 */

struct view_args {
    nn_rnn_params p;
    int64_t layer;
    int direction;
    int name;
};

static const struct field view_fields[] = {
    FIELD(struct view_args, p.cell, F_I32),        FIELD(struct view_args, p.input_size, F_I64),
    FIELD(struct view_args, p.hidden_size, F_I64), FIELD(struct view_args, p.proj_size, F_I64),
    FIELD(struct view_args, p.num_layers, F_I64),  FIELD(struct view_args, p.bidirectional, F_I32),
    FIELD(struct view_args, p.bias_mode, F_I32),   FIELD(struct view_args, p.input_mode, F_I32),
    FIELD(struct view_args, p.reserved[1], F_U64), FIELD(struct view_args, layer, F_I64),
    FIELD(struct view_args, direction, F_I32),     FIELD(struct view_args, name, F_I32),
};

static struct view_args view;

/* A view that is handed out must lie inside w. */
static nn_status view_call(struct mcase *m, int *kept)
{
    *kept = 1;
    nn_tensor out;
    nn_status st = nn_rnn_weight_view(m->ctx, &view.p, T(0), view.layer, view.direction,
                                      (nn_rnn_weight_name)view.name, &out);
    if (st != NN_OK) return st;
    size_t w_ext, out_ext;
    cr_assert(nn_tensor_validate(&out, "out") == NN_OK);
    cr_assert(nn_tensor_extent_bytes(T(0), &w_ext) == NN_OK);
    cr_assert(nn_tensor_extent_bytes(&out, &out_ext) == NN_OK);
    const unsigned char *w = T(0)->data, *o = out.data;
    cr_assert(o >= w && o + out_ext <= w + w_ext, "nn_rnn_weight_view: a view outside w");
    return st;
}

Test(mutations, rnn_weight_view)
{
    struct mcase *m = case_new();
    memset(&view, 0, sizeof view);
    cr_assert(nn_rnn_params_default(&view.p, NN_RNN_LSTM, 2, 3) == NN_OK);
    view.p.num_layers = 2;
    view.p.bidirectional = 1;
    view.p.proj_size = 1;
    view.layer = 1;
    view.direction = 1;
    view.name = NN_RNN_WEIGHT_HR;
    int64_t nw = 0;
    cr_assert(nn_rnn_weights_size(m->ctx, &view.p, NN_DTYPE_F64, &nw) == NN_OK);
    int64_t wd[] = {nw};
    add(m, "w", 1, wd, 0, 0);
    SWEEP("nn_rnn_weight_view", &view, view_fields, view_call, 0x68ac);
    case_free(m);
}

/* ---------------------------------------------------------------------------------------------
 * Workspace queries: 0 bytes on the reference backend for every call they accept
 */

static int ws_pass;
static size_t ws_bytes;

#define WS_RESULT(call)                                                                            \
    do {                                                                                           \
        ws_bytes = 1;                                                                              \
        nn_status st_ = (call);                                                                    \
        if (st_ == NN_OK)                                                                          \
            cr_assert_eq(ws_bytes, 0, "%s: %zu bytes on the reference backend", m->fn, ws_bytes);  \
        return st_;                                                                                \
    } while (0)

static nn_status conv_ws_call(struct mcase *m, int *kept)
{
    *kept = 1;
    WS_RESULT(nn_conv_workspace_size(m->ctx, &m->cp, T(0), T(1), T(2), (nn_conv_pass)ws_pass, 0,
                                     &ws_bytes));
}

static nn_status pool_ws_call(struct mcase *m, int *kept)
{
    *kept = 1;
    WS_RESULT(nn_pool_workspace_size(m->ctx, &m->pp, T(0), T(1), T(2), T(3), (nn_pool_pass)ws_pass,
                                     &ws_bytes));
}

static nn_status linear_ws_call(struct mcase *m, int *kept)
{
    *kept = 1;
    WS_RESULT(nn_linear_workspace_size(m->ctx, &m->lp, T(0), T(1), T(2), (unsigned)ws_pass, 0,
                                       &ws_bytes));
}

static nn_status softmax_ws_call(struct mcase *m, int *kept)
{
    *kept = 1;
    WS_RESULT(nn_softmax_workspace_size(m->ctx, &m->sp, T(0), (nn_softmax_pass)ws_pass, &ws_bytes));
}

static nn_status xent_ws_call(struct mcase *m, int *kept)
{
    *kept = 1;
    WS_RESULT(
        nn_softmax_cross_entropy_workspace_size(m->ctx, T(0), (nn_softmax_pass)ws_pass, &ws_bytes));
}

static nn_status rnn_ws_call(struct mcase *m, int *kept)
{
    *kept = 1;
    WS_RESULT(
        nn_rnn_workspace_size(m->ctx, &m->rp, T(0), m->lengths, (nn_rnn_pass)ws_pass, &ws_bytes));
}

Test(mutations, conv_workspace_size)
{
    struct mcase *m = case_new();
    conv_setup(m);
    m->n = 3; /* x, w, b: no y */
    ws_pass = NN_CONV_PASS_BACKWARD_FILTER;
    m->pass = &ws_pass;
    SWEEP("nn_conv_workspace_size", &m->cp, conv_fields, conv_ws_call, 0x79bd);
    case_free(m);
}

Test(mutations, pool_workspace_size)
{
    struct mcase *m = case_new();
    pool_setup(m);
    m->s[1].output = 0;
    add(m, "dy", 4, py_d, 0, 0);
    add(m, "dx", 4, px_d, 0, 0);
    ws_pass = NN_POOL_PASS_BACKWARD; /* not mutated: a forward query ignores dy and dx (pool.h) */
    SWEEP("nn_pool_workspace_size", &m->pp, pool_fields, pool_ws_call, 0x8ace);
    case_free(m);
}

static nn_status pool_ws_fwd_call(struct mcase *m, int *kept)
{
    *kept = 1;
    WS_RESULT(nn_pool_workspace_size(m->ctx, &m->pp, T(0), T(1), NULL, NULL, (nn_pool_pass)ws_pass,
                                     &ws_bytes));
}

Test(mutations, pool_workspace_size_forward)
{
    struct mcase *m = case_new();
    pool_setup(m);
    m->s[1].output = 0;
    ws_pass = NN_POOL_PASS_FORWARD;
    m->pass = &ws_pass;
    SWEEP("nn_pool_workspace_size", &m->pp, pool_fields, pool_ws_fwd_call, 0x8acf);
    case_free(m);
}

Test(mutations, linear_workspace_size)
{
    struct mcase *m = case_new();
    linear_setup(m);
    m->n = 3; /* x, w, b: no y */
    ws_pass = NN_LINEAR_PASS_DX | NN_LINEAR_PASS_DB;
    m->pass = &ws_pass;
    SWEEP("nn_linear_workspace_size", &m->lp, linear_fields, linear_ws_call, 0x9bdf);
    case_free(m);
}

Test(mutations, softmax_workspace_size)
{
    struct mcase *m = case_new();
    softmax_setup(m);
    m->n = 1;
    ws_pass = NN_SOFTMAX_PASS_BACKWARD;
    m->pass = &ws_pass;
    SWEEP("nn_softmax_workspace_size", &m->sp, softmax_fields, softmax_ws_call, 0xacf0);
    case_free(m);
}

Test(mutations, softmax_cross_entropy_workspace_size)
{
    struct mcase *m = case_new();
    int64_t d[] = {3, 5, 2};
    add(m, "x", 3, d, 0, 0);
    ws_pass = NN_SOFTMAX_PASS_FORWARD;
    m->pass = &ws_pass;
    m->fn = "nn_softmax_cross_entropy_workspace_size";
    m->call = xent_ws_call;
    sweep(m, 0xbd01);
    case_free(m);
}

Test(mutations, rnn_workspace_size)
{
    struct mcase *m = case_new();
    rnn_setup(m);
    for (int i = 1; i < 7; i++) { /* the query takes x and the lengths only */
        m->s[i].locked = 1;
        m->arg[i] = NULL;
    }
    ws_pass = NN_RNN_PASS_TRAINING;
    m->pass = &ws_pass;
    SWEEP("nn_rnn_workspace_size", &m->rp, rnn_fields, rnn_ws_call, 0xce12);
    case_free(m);
}

/* ---------------------------------------------------------------------------------------------
 * nn_tensor_wrap: a view it hands out is what it was given; a refused call zeroes out
 */

struct wrap_args {
    int32_t dtype, rank, offset, null_strides;
    int64_t dims[NN_MAX_RANK + 2], strides[NN_MAX_RANK + 2];
};

static const struct field wrap_fields[] = {
    FIELD(struct wrap_args, dtype, F_I32),      FIELD(struct wrap_args, rank, F_I32),
    FIELD(struct wrap_args, offset, F_I32),     FIELD(struct wrap_args, null_strides, F_I32),
    FIELD(struct wrap_args, dims[0], F_I64),    FIELD(struct wrap_args, dims[1], F_I64),
    FIELD(struct wrap_args, dims[2], F_I64),    FIELD(struct wrap_args, strides[0], F_I64),
    FIELD(struct wrap_args, strides[1], F_I64), FIELD(struct wrap_args, strides[2], F_I64),
};

static struct wrap_args wrap;

static int all_zero(const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++)
        if (b[i]) return 0;
    return 1;
}

static nn_status wrap_call(struct mcase *m, int *kept)
{
    *kept = 1;
    nn_tensor out;
    memset(&out, 0x5a, sizeof out);
    /* as an address, not pointer arithmetic: the offset may leave the slot */
    void *data = (void *)((uintptr_t)m->s[0].t.data + (uintptr_t)(intptr_t)wrap.offset);
    nn_status st = nn_tensor_wrap(m->ctx, data, (nn_dtype)wrap.dtype, wrap.rank, wrap.dims,
                                  wrap.null_strides ? NULL : wrap.strides, &out);
    if (st != NN_OK) {
        cr_assert(all_zero(&out, sizeof out), "a refused nn_tensor_wrap left out non-zero");
        return st;
    }
    cr_assert(nn_tensor_validate(&out, "out") == NN_OK, "nn_tensor_wrap gave an invalid view");
    cr_assert(out.data == data && out.rank == wrap.rank && (int)out.dtype == wrap.dtype);
    for (int i = 0; i < out.rank; i++) {
        cr_assert_eq(out.dims[i], wrap.dims[i]);
        if (!wrap.null_strides) cr_assert_eq(out.strides[i], wrap.strides[i]);
    }
    return st;
}

Test(mutations, tensor_wrap)
{
    struct mcase *m = case_new();
    int64_t d[] = {4, 3, 2};
    add(m, "data", 3, d, 0, 0);
    m->s[0].locked = 1;
    m->arg[0] = NULL; /* only the arguments of the call are mutated, not the memory */
    wrap = (struct wrap_args){NN_DTYPE_F64, 3, 0, 0, {4, 3, 2}, {6, 2, 1}};
    m->mostly_valid = 1;
    SWEEP("nn_tensor_wrap", &wrap, wrap_fields, wrap_call, 0xdf23);
    case_free(m);
}

/* ---------------------------------------------------------------------------------------------
 * DLPack import: a capsule's every field mutated; a refused import zeroes out, an accepted one
 * is a valid view of data + byte_offset
 */

#if NN_HAVE_DLPACK
#include <dlpack/dlpack.h>

struct dl_args {
    int32_t ndim, device_type, device_id, code, bits, lanes, null_data, null_shape, null_strides;
    int32_t pad;
    uint64_t byte_offset;
    /* longer than any ndim nnprim accepts, so that reading past ndim is caught, not UB here */
    int64_t shape[2 * NN_MAX_RANK], strides[2 * NN_MAX_RANK];
};

static const struct field dl_fields[] = {
    FIELD(struct dl_args, ndim, F_I32),         FIELD(struct dl_args, device_type, F_I32),
    FIELD(struct dl_args, device_id, F_I32),    FIELD(struct dl_args, code, F_I32),
    FIELD(struct dl_args, bits, F_I32),         FIELD(struct dl_args, lanes, F_I32),
    FIELD(struct dl_args, null_data, F_I32),    FIELD(struct dl_args, null_shape, F_I32),
    FIELD(struct dl_args, null_strides, F_I32), FIELD(struct dl_args, byte_offset, F_U64),
    FIELD(struct dl_args, shape[0], F_I64),     FIELD(struct dl_args, shape[1], F_I64),
    FIELD(struct dl_args, shape[2], F_I64),     FIELD(struct dl_args, strides[0], F_I64),
    FIELD(struct dl_args, strides[1], F_I64),   FIELD(struct dl_args, strides[2], F_I64),
};

static struct dl_args dl;

static nn_status dlpack_call(struct mcase *m, int *kept)
{
    *kept = 1;
    DLManagedTensor cap;
    memset(&cap, 0, sizeof cap);
    DLTensor *t = &cap.dl_tensor;
    t->data = dl.null_data ? NULL : m->s[0].t.data;
    t->device.device_type = (DLDeviceType)dl.device_type;
    t->device.device_id = dl.device_id;
    t->ndim = dl.ndim;
    t->dtype.code = (uint8_t)dl.code;
    t->dtype.bits = (uint8_t)dl.bits;
    t->dtype.lanes = (uint16_t)dl.lanes;
    t->shape = dl.null_shape ? NULL : dl.shape;
    t->strides = dl.null_strides ? NULL : dl.strides;
    t->byte_offset = dl.byte_offset;
    nn_tensor out;
    memset(&out, 0x5a, sizeof out);
    nn_status st = nn_tensor_from_dlpack(m->ctx, &cap, &out);
    if (st != NN_OK) {
        cr_assert(all_zero(&out, sizeof out), "a refused import left out non-zero");
        return st;
    }
    cr_assert(nn_tensor_validate(&out, "out") == NN_OK, "the import gave an invalid view");
    cr_assert((uintptr_t)out.data == (uintptr_t)t->data + t->byte_offset && out.rank == t->ndim);
    for (int i = 0; i < out.rank; i++)
        cr_assert_eq(out.dims[i], t->shape[i]);
    return st;
}

Test(mutations, tensor_from_dlpack)
{
    struct mcase *m = case_new();
    int64_t d[] = {4, 3, 2};
    add(m, "data", 3, d, 0, 0);
    m->s[0].locked = 1;
    m->arg[0] = NULL; /* the capsule's fields are mutated, not the memory */
    memset(&dl, 0, sizeof dl);
    dl.ndim = 3;
    dl.device_type = kDLCPU;
    dl.code = kDLFloat;
    dl.bits = 64;
    dl.lanes = 1;
    dl.shape[0] = 4, dl.shape[1] = 3, dl.shape[2] = 2;
    dl.strides[0] = 6, dl.strides[1] = 2, dl.strides[2] = 1;
    m->mostly_valid = 1;
    SWEEP("nn_tensor_from_dlpack", &dl, dl_fields, dlpack_call, 0xe034);
    case_free(m);
}
#endif

/* Plain-C reference of the linear layer: loops over rows and outputs, double accumulation, one
 * rounding at the store. It defines the semantics the cuBLASLt path is compared against. */
#include "core/elem.h"
#include "linear/linear_internal.h"

/* Tensors are packed (linear.c checks it): element (r, c) of an R x C view is r * C + c. */
static nn_status forward_ref(struct nn_ctx *ctx, const struct nn__linear_problem *p,
                             const nn_tensor *x, const nn_tensor *w, const nn_tensor *b,
                             nn_tensor *y, struct nn__linear_note *note)
{
    (void)ctx;
    (void)note;
    nn_dtype dt = p->dtype;
    for (int64_t r = 0; r < p->m; r++)
        for (int64_t o = 0; o < p->out; o++) {
            double acc = b ? nn__load(b->data, dt, o) : 0.0;
            for (int64_t i = 0; i < p->in; i++)
                acc += nn__load(x->data, dt, r * p->in + i) * nn__load(w->data, dt, o * p->in + i);
            if (p->activation == NN_ACTIVATION_RELU && !(acc > 0)) acc = 0.0;
            nn__store(y->data, dt, r * p->out + o, acc);
        }
    return NN_OK;
}

/* g = dy, or dy masked where y == 0 (relu): y > 0 exactly where the pre-activation is. */
static double grad_at(const struct nn__linear_problem *p, const struct nn__linear_grads *g,
                      int64_t r, int64_t o)
{
    int64_t k = r * p->out + o;
    if (p->activation == NN_ACTIVATION_RELU && !(nn__load(g->y->data, p->dtype, k) > 0)) return 0;
    return nn__load(g->dy->data, p->dtype, k);
}

/* out = sum (+ out when accumulating), rounded once. */
static void put(nn_tensor *t, nn_dtype dt, int64_t k, double sum, int accumulate)
{
    nn__store(t->data, dt, k, accumulate ? nn__load(t->data, dt, k) + sum : sum);
}

static nn_status backward_ref(struct nn_ctx *ctx, const struct nn__linear_problem *p,
                              const struct nn__linear_grads *g, struct nn__linear_note *note)
{
    (void)ctx;
    (void)note;
    nn_dtype dt = p->dtype;
    if (g->dx)
        for (int64_t r = 0; r < p->m; r++)
            for (int64_t i = 0; i < p->in; i++) {
                double acc = 0;
                for (int64_t o = 0; o < p->out; o++)
                    acc += grad_at(p, g, r, o) * nn__load(g->w->data, dt, o * p->in + i);
                put(g->dx, dt, r * p->in + i, acc, g->accumulate & NN_ACCUMULATE_DX);
            }
    if (g->dw)
        for (int64_t o = 0; o < p->out; o++)
            for (int64_t i = 0; i < p->in; i++) {
                double acc = 0;
                for (int64_t r = 0; r < p->m; r++)
                    acc += grad_at(p, g, r, o) * nn__load(g->x->data, dt, r * p->in + i);
                put(g->dw, dt, o * p->in + i, acc, g->accumulate & NN_ACCUMULATE_DW);
            }
    if (g->db)
        for (int64_t o = 0; o < p->out; o++) {
            double acc = 0;
            for (int64_t r = 0; r < p->m; r++)
                acc += grad_at(p, g, r, o);
            put(g->db, dt, o, acc, g->accumulate & NN_ACCUMULATE_DB);
        }
    return NN_OK;
}

/* Host memory only: no pool bytes. */
static nn_status workspace_ref(struct nn_ctx *ctx, const struct nn__linear_problem *p,
                               unsigned pass, const nn_tensor *x, const nn_tensor *w,
                               const nn_tensor *b, size_t *bytes)
{
    (void)ctx, (void)p, (void)pass, (void)x, (void)w, (void)b;
    *bytes = 0;
    return NN_OK;
}

const struct nn__linear_backend nn__linear_backend_ref = {"ref", forward_ref, backward_ref,
                                                          workspace_ref};

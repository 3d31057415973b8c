/* The host work of a cache hit that the conv family adds, on the CPU: fill the kind-7 key of a
 * tiny 2-D forward as conv_cudnn.c does (nn__conv_key_begin, nn__conv_key_tensor_set) and look it
 * up among 64 live entries with a fake plan. Prints the time per call; for instruction counts,
 * run it under valgrind --tool=callgrind with two repetition counts and take the difference.
 * Not a test (no thresholds): build/tests/bench_conv_key_hit [reps]. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "conv/conv_graph_cudnn.h"
#include "cudnn/plan_cache.h"
#include "cudnn/plan_get_cudnn.h"
#include "nnprim/nnprim.h"

static void no_destroy(void *plan)
{
    (void)plan;
}

static const struct nn__cache_kind kind = NN__CONV_PLAN_KIND_INIT(no_destroy);
static const struct nn__cache_kind *const kinds[] = {&kind};

static nn_tensor view(int64_t n, int64_t c, int64_t hw)
{
    nn_tensor t;
    memset(&t, 0, sizeof t);
    t.dtype = NN_DTYPE_F32;
    t.rank = 4;
    t.data = (void *)(uintptr_t)0x10000;
    int64_t d[4] = {n, c, hw, hw}, s = 1;
    for (int i = 3; i >= 0; i--) {
        t.dims[i] = d[i];
        t.strides[i] = s;
        s *= d[i];
    }
    return t;
}

static void key_fwd(nn_ctx *ctx, const nn_tensor *x, const nn_tensor *w, const nn_tensor *y,
                    struct nn__conv_key *k)
{
    struct nn__conv_graph_params c;
    memset(&c, 0, sizeof c);
    c.spatial_rank = 2;
    c.stride[0] = c.stride[1] = c.dilation[0] = c.dilation[1] = 1;
    nn__conv_key_begin(ctx, k, NN__CONV_PASS_FWD, &c, 1, 1.0, 0.0);
    k->dtype = NN_DTYPE_F32;
    const nn_tensor *t[3] = {x, w, y};
    for (int i = 0; i < 3; i++)
        nn__conv_key_tensor_set(&k->t[i], t[i]->rank, t[i]->dims, t[i]->strides,
                                nn__cudnn_ptr_alignment(t[i]->data));
}

int main(int argc, char **argv)
{
    long reps = argc > 1 ? atol(argv[1]) : 1000000;
    nn_settings s;
    nn_settings_from_env(&s);
    s.backend = NN_BACKEND_REF;
    nn_ctx *ctx;
    struct nn__cache *c;
    if (nn_ctx_create(&ctx, &s) != NN_OK || nn__cache_create(ctx, kinds, 1, 64, &c) != NN_OK) {
        fprintf(stderr, "%s\n", nn_last_error()->message);
        return 1;
    }
    nn_tensor x = view(1, 4, 8), w = view(4, 4, 3), y = view(1, 4, 6);
    struct nn__conv_key k;
    struct nn__plan_record r;
    nn__plan_record_init(&r);
    static int plan;
    for (int i = 0; i < 64; i++) { /* other batch sizes, then the one looked up */
        nn_tensor xi = x, yi = y;
        xi.dims[0] = yi.dims[0] = i < 63 ? 2 + i : 1;
        key_fwd(ctx, &xi, &w, &yi, &k);
        if (nn__plan_cache_insert(ctx, c, kind.id, &k, &r, &plan) != NN_OK) return 1;
    }
    struct timespec a, b;
    long hits = 0;
    clock_gettime(CLOCK_MONOTONIC, &a);
    for (long i = 0; i < reps; i++) {
        key_fwd(ctx, &x, &w, &y, &k);
        hits += nn__plan_cache_lookup(c, kind.id, &k, NULL) != NULL;
    }
    clock_gettime(CLOCK_MONOTONIC, &b);
    double ns = ((double)(b.tv_sec - a.tv_sec) * 1e9 + (double)(b.tv_nsec - a.tv_nsec)) / reps;
    printf("conv key (%zu bytes) fill + lookup: %.1f ns per call, %ld of %ld hits\n", sizeof k, ns,
           hits, reps);
    nn__cache_destroy(c);
    nn_ctx_destroy(ctx);
    return hits == reps ? 0 : 1;
}

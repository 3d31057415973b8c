/* The device copy kernel (src/core/dev_copy.c) as a graph node: every size and alignment path,
 * bytes next to each destination untouched, and a node repointed after instantiation. */
#include <criterion/criterion.h>
#include <stdint.h>
#include <string.h>

#include "nn_config.h"
#include "gpu.h"
#include "nnprim/nnprim.h"

#if NN_HAVE_CUDA
#include "core/dev_copy.h"

#define GUARD 64
#define NCOPY 7
/* sizes and offsets into their buffers: 16-byte, 4-byte and byte-aligned ends, tails of each */
static const uint64_t bytes[NCOPY] = {1, 3, 16, 17, 4101, (3u << 20) + 7, 64};
static const uint64_t dst_off[NCOPY] = {0, 1, 16, 4, 32, 0, 3};
static const uint64_t src_off[NCOPY] = {0, 2, 0, 8, 48, 16, 1};

struct side {
    unsigned char *dev[NCOPY];
};

static void alloc_side(struct side *s)
{
    for (int i = 0; i < NCOPY; i++)
        cr_assert_eq(cudaMalloc((void **)&s->dev[i], bytes[i] + 2 * GUARD + 64), cudaSuccess);
}

static void free_side(struct side *s)
{
    for (int i = 0; i < NCOPY; i++)
        cudaFree(s->dev[i]);
}

/* Fills every buffer of s with a pattern of its own (seed), guards included. */
static void fill(struct side *s, unsigned seed)
{
    for (int i = 0; i < NCOPY; i++) {
        size_t n = bytes[i] + 2 * GUARD + 64;
        unsigned char *h = malloc(n);
        for (size_t k = 0; k < n; k++)
            h[k] = (unsigned char)(k * 31 + i * 7 + seed);
        cr_assert_eq(cudaMemcpy(s->dev[i], h, n, cudaMemcpyHostToDevice), cudaSuccess);
        free(h);
    }
}

static void list_of(struct nn__copies *c, struct side *dst, struct side *src)
{
    memset(c, 0, sizeof *c);
    c->n = NCOPY;
    for (int i = 0; i < NCOPY; i++) {
        c->dst[i] = (uint64_t)(uintptr_t)(dst->dev[i] + GUARD + dst_off[i]);
        c->src[i] = (uint64_t)(uintptr_t)(src->dev[i] + GUARD + src_off[i]);
        c->bytes[i] = bytes[i];
    }
}

/* Each destination holds its source's bytes (src_seed's pattern), and everything around it its
 * own old pattern (dst_seed's); src_seed < 0: nothing was copied. */
static void check(struct side *dst, unsigned dst_seed, int src_seed)
{
    for (int i = 0; i < NCOPY; i++) {
        size_t n = bytes[i] + 2 * GUARD + 64;
        unsigned char *h = malloc(n);
        cr_assert_eq(cudaMemcpy(h, dst->dev[i], n, cudaMemcpyDeviceToHost), cudaSuccess);
        size_t lo = GUARD + dst_off[i], hi = lo + bytes[i], bad = n;
        unsigned got = 0, want = 0;
        for (size_t k = 0; k < n && bad == n; k++) {
            int copied = src_seed >= 0 && k >= lo && k < hi;
            want = copied ? (unsigned char)((k - lo + GUARD + src_off[i]) * 31 + i * 7 +
                                            (unsigned)src_seed)
                          : (unsigned char)(k * 31 + i * 7 + dst_seed);
            got = h[k];
            if (got != want) bad = k;
        }
        free(h);
        cr_assert_eq(bad, n, "copy %d (%llu bytes, dst +%llu, src +%llu): byte %zu is %u, not %u",
                     i, (unsigned long long)bytes[i], (unsigned long long)dst_off[i],
                     (unsigned long long)src_off[i], bad, got, want);
    }
}

Test(dev_copy, graph_node_copies_then_repointed)
{
    NN_REQUIRE_GPU();
    if (nn__copies_unavailable()) cr_skip_test("%s", nn__copies_unavailable());
    nn_ctx *ctx;
    cr_assert_eq(nn_ctx_create(&ctx, NULL), NN_OK, "%s", nn_last_error()->message);
    cudaStream_t s = (cudaStream_t)nn_ctx_stream(ctx);
    struct side a, b, c, d;
    alloc_side(&a), alloc_side(&b), alloc_side(&c), alloc_side(&d);
    fill(&a, 1), fill(&b, 2), fill(&c, 3), fill(&d, 4);
    struct nn__copies k;
    list_of(&k, &b, &a);
    cudaGraph_t g;
    cudaGraphNode_t node;
    cudaGraphExec_t x;
    cr_assert_eq(cudaGraphCreate(&g, 0), cudaSuccess);
    cr_assert_eq(nn__graph_add_copies(ctx, g, NULL, 0, &k, &node), NN_OK, "%s",
                 nn_last_error()->message);
    cr_assert_eq(cudaGraphInstantiate(&x, g, 0), cudaSuccess);
    cr_assert_eq(cudaGraphLaunch(x, s), cudaSuccess);
    cr_assert_eq(cudaStreamSynchronize(s), cudaSuccess);
    check(&b, 2, 1);
    /* repointed: c into d; a and b keep what they hold */
    list_of(&k, &d, &c);
    cr_assert_eq(nn__graph_exec_set_copies(x, node, &k), cudaSuccess);
    cr_assert_eq(cudaGraphLaunch(x, s), cudaSuccess);
    cr_assert_eq(cudaStreamSynchronize(s), cudaSuccess);
    check(&d, 4, 3);
    check(&b, 2, 1);
    /* an empty list launches and copies nothing */
    memset(&k, 0, sizeof k);
    fill(&d, 4);
    cr_assert_eq(nn__graph_exec_set_copies(x, node, &k), cudaSuccess);
    cr_assert_eq(cudaGraphLaunch(x, s), cudaSuccess);
    cr_assert_eq(cudaStreamSynchronize(s), cudaSuccess);
    check(&d, 4, -1);
    cudaGraphExecDestroy(x);
    cudaGraphDestroy(g);
    free_side(&a), free_side(&b), free_side(&c), free_side(&d);
    nn_ctx_destroy(ctx);
}
#else
Test(dev_copy, graph_node_copies_then_repointed)
{
    cr_skip_test("needs a GPU: this build has no CUDA");
}
#endif

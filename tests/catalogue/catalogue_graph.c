/* Catalogue rows: whole-step CUDA graphs (graph.h) and nn_mem_copy (mem.h). Every GPU row leaves
 * the context with no capture open, so the runner's convolution and pooling afterwards show that
 * it still computes. */
#include <string.h>

#include "nn_config.h"

#include "catalogue.h"

#if NN_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

#define CALL(fname) static nn_status fname(struct cat *c)

/* A graph of one captured copy of c->x into c->dx-sized scratch, made after a warm-up. */
static nn_graph *copy_graph(struct cat *c, nn_tensor *dst)
{
    cr_assert_eq(nn_tensor_empty(c->ctx, c->x.dtype, c->x.rank, c->x.dims, dst), NN_OK);
    cr_assert_eq(nn_graph_begin(c->ctx), NN_OK, "%s", nn_last_error()->message);
    cr_assert_eq(nn_tensor_copy(c->ctx, dst, &c->x), NN_OK, "%s", nn_last_error()->message);
    nn_graph *g = NULL;
    cr_assert_eq(nn_graph_end(c->ctx, &g), NN_OK, "%s", nn_last_error()->message);
    return g;
}

static void close_capture(struct cat *c)
{
    nn_graph *g = NULL;
    int on = 0;
    cr_assert_eq(nn_graph_capturing(c->ctx, &on), NN_OK);
    if (!on) return;
    (void)nn_graph_end(c->ctx, &g);
    if (g) cr_assert_eq(nn_graph_free(c->ctx, g), NN_OK);
}

/* ---- on every backend ---- */

CALL(begin_null_ctx)
{
    (void)c;
    return nn_graph_begin(NULL);
}
CALL(begin_ref)
{
    return nn_graph_begin(c->ctx);
}
CALL(end_null_ctx)
{
    (void)c;
    nn_graph *g;
    return nn_graph_end(NULL, &g);
}
CALL(end_null_out)
{
    return nn_graph_end(c->ctx, NULL);
}
CALL(end_without_begin)
{
    nn_graph *g = (nn_graph *)c;
    nn_status st = nn_graph_end(c->ctx, &g);
    cr_assert_null(g, "out is NULL on failure");
    return st;
}
CALL(launch_null_ctx)
{
    (void)c;
    return nn_graph_launch(NULL, NULL);
}
CALL(launch_null_graph)
{
    return nn_graph_launch(c->ctx, NULL);
}
CALL(launch_not_a_graph)
{
    return nn_graph_launch(c->ctx, (nn_graph *)c);
}
CALL(feeds_not_a_graph)
{
    return nn_graph_launch_feeds(c->ctx, (nn_graph *)c, NULL, 0);
}
CALL(free_null_graph)
{
    return nn_graph_free(c->ctx, NULL);
}
CALL(free_null_ctx)
{
    (void)c;
    return nn_graph_free(NULL, NULL);
}
CALL(free_not_a_graph)
{
    return nn_graph_free(c->ctx, (nn_graph *)c);
}
CALL(info_null_graph)
{
    (void)c;
    nn_graph_info i;
    return nn_graph_get_info(NULL, &i);
}
CALL(info_not_a_graph)
{
    nn_graph_info i;
    return nn_graph_get_info((nn_graph *)c, &i);
}
CALL(capturing_null_ctx)
{
    (void)c;
    int on;
    return nn_graph_capturing(NULL, &on);
}
CALL(capturing_null_out)
{
    return nn_graph_capturing(c->ctx, NULL);
}
CALL(capturing_idle)
{
    int on = 1;
    nn_status st = nn_graph_capturing(c->ctx, &on);
    cr_assert_eq(on, 0);
    return st;
}

CALL(mem_copy_null_ctx)
{
    (void)c;
    char a, b = 0;
    return nn_mem_copy(NULL, &a, &b, 1);
}
CALL(mem_copy_null_dst)
{
    char b = 0;
    return nn_mem_copy(c->ctx, NULL, &b, 1);
}
CALL(mem_copy_null_src)
{
    char a;
    return nn_mem_copy(c->ctx, &a, NULL, 1);
}
CALL(mem_copy_zero_bytes)
{
    return nn_mem_copy(c->ctx, NULL, NULL, 0);
}
CALL(mem_copy_overlap)
{
    char *h = cat_host_block(c, 64);
    return nn_mem_copy(c->ctx, h, h + 8, 16);
}
CALL(mem_copy_wrap)
{
    char *h = cat_host_block(c, 64);
    return nn_mem_copy(c->ctx, h, (void *)(UINTPTR_MAX - 8), 64);
}
CALL(mem_copy_host)
{
    char *a = cat_host_block(c, 64), *b = cat_host_block(c, 64);
    b[3] = 7;
    nn_status st = nn_mem_copy(c->ctx, a, b, 64);
    cr_assert_eq(a[3], 7);
    return st;
}
/* Device memory to a reference context, or host and device both on a cuDNN one. */
CALL(mem_copy_device)
{
    nn_tensor d = c->gpu ? c->x : cat_wrong_space(c, &c->x);
    float *h = cat_host_block(c, 4);
    nn_status st = nn_mem_copy(c->ctx, h, d.data, 4);
    if (st == NN_OK) cr_assert_eq(h[0], h[0], "a number came back");
    return st;
}

#if NN_HAVE_CUDA
/* ---- GPU rows ---- */

CALL(begin_nested)
{
    cr_assert_eq(nn_graph_begin(c->ctx), NN_OK, "%s", nn_last_error()->message);
    nn_status st = nn_graph_begin(c->ctx);
    nn_error_info e = *nn_last_error();
    nn_graph *g = NULL;
    cr_assert_eq(nn_graph_end(c->ctx, &g), NN_OK, "the refused begin spoiled the capture: %s",
                 nn_last_error()->message);
    cr_assert_eq(nn_graph_free(c->ctx, g), NN_OK);
    *(nn_error_info *)nn_last_error() = e;
    return st;
}
CALL(begin_legacy_stream)
{
    void *home;
    cr_assert_eq(nn_ctx_get_stream(c->ctx, &home), NN_OK);
    cr_assert_eq(nn_ctx_set_stream(c->ctx, NULL), NN_OK);
    nn_status st = nn_graph_begin(c->ctx);
    nn_error_info e = *nn_last_error();
    cr_assert_eq(nn_ctx_set_stream(c->ctx, home), NN_OK);
    *(nn_error_info *)nn_last_error() = e;
    return st;
}
CALL(begin_blocking_stream)
{
    void *home;
    cudaStream_t s;
    cr_assert_eq(nn_ctx_get_stream(c->ctx, &home), NN_OK);
    cr_assert_eq(cudaStreamCreate(&s), cudaSuccess);
    cr_assert_eq(nn_ctx_set_stream(c->ctx, s), NN_OK);
    nn_status st = nn_graph_begin(c->ctx);
    nn_error_info e = *nn_last_error();
    cr_assert_eq(nn_ctx_set_stream(c->ctx, home), NN_OK);
    cudaStreamDestroy(s);
    *(nn_error_info *)nn_last_error() = e;
    return st;
}
CALL(end_null_out_open)
{
    cr_assert_eq(nn_graph_begin(c->ctx), NN_OK);
    nn_status st = nn_graph_end(c->ctx, NULL);
    nn_error_info e = *nn_last_error();
    int on = 0;
    cr_assert_eq(nn_graph_capturing(c->ctx, &on), NN_OK);
    cr_assert_eq(on, 1, "the capture stays open");
    close_capture(c);
    *(nn_error_info *)nn_last_error() = e;
    return st;
}
CALL(launch_freed)
{
    nn_tensor t;
    nn_graph *g = copy_graph(c, &t);
    cr_assert_eq(nn_graph_free(c->ctx, g), NN_OK);
    nn_status st = nn_graph_launch(c->ctx, g);
    cr_assert_eq(nn_tensor_free(c->ctx, &t), NN_OK);
    return st;
}
CALL(free_twice)
{
    nn_tensor t;
    nn_graph *g = copy_graph(c, &t);
    cr_assert_eq(nn_graph_free(c->ctx, g), NN_OK);
    nn_status st = nn_graph_free(c->ctx, g);
    cr_assert_eq(nn_tensor_free(c->ctx, &t), NN_OK);
    return st;
}
CALL(launch_other_context)
{
    nn_tensor t;
    nn_graph *g = copy_graph(c, &t);
    nn_status st = nn_graph_launch(cat_other_ctx(c), g);
    nn_error_info e = *nn_last_error();
    cr_assert_eq(nn_graph_free(c->ctx, g), NN_OK);
    cr_assert_eq(nn_tensor_free(c->ctx, &t), NN_OK);
    *(nn_error_info *)nn_last_error() = e;
    return st;
}
CALL(launch_inside_capture)
{
    nn_tensor t;
    nn_graph *g = copy_graph(c, &t);
    cr_assert_eq(nn_graph_begin(c->ctx), NN_OK);
    nn_status st = nn_graph_launch(c->ctx, g);
    nn_error_info e = *nn_last_error();
    close_capture(c);
    cr_assert_eq(nn_graph_free(c->ctx, g), NN_OK);
    cr_assert_eq(nn_tensor_free(c->ctx, &t), NN_OK);
    *(nn_error_info *)nn_last_error() = e;
    return st;
}
/* The caller frees a tensor the graph reads: the graph is stale. */
CALL(launch_stale)
{
    nn_tensor src = cat_tensor(c, c->x.dtype, c->x.rank, c->x.dims, 3), dst;
    cr_assert_eq(nn_tensor_empty(c->ctx, src.dtype, src.rank, src.dims, &dst), NN_OK);
    cr_assert_eq(nn_graph_begin(c->ctx), NN_OK);
    cr_assert_eq(nn_tensor_copy(c->ctx, &dst, &src), NN_OK);
    nn_graph *g = NULL;
    cr_assert_eq(nn_graph_end(c->ctx, &g), NN_OK);
    cr_assert_eq(nn_graph_launch(c->ctx, g), NN_OK);
    cr_assert_eq(nn_tensor_free(c->ctx, &src), NN_OK);
    nn_status st = nn_graph_launch(c->ctx, g);
    nn_error_info e = *nn_last_error();
    cr_assert_eq(nn_graph_free(c->ctx, g), NN_OK);
    cr_assert_eq(nn_tensor_free(c->ctx, &dst), NN_OK);
    *(nn_error_info *)nn_last_error() = e;
    return st;
}
static nn_status feeds_row(struct cat *c, int which)
{
    nn_tensor t;
    nn_graph *g = copy_graph(c, &t);
    size_t bytes = (size_t)nn_tensor_numel(&c->x) * nn_dtype_size(c->x.dtype);
    void *h = cat_host_block(c, bytes);
    nn_graph_feed f = {c->x.data, h, bytes, {0}};
    nn_graph_feed two[2] = {f, f};
    nn_status st = NN_OK;
    switch (which) {
    case 0:
        f.bytes = bytes - 4;
        st = nn_graph_launch_feeds(c->ctx, g, &f, 1);
        break;
    case 1:
        f.dst = (char *)c->x.data + 4;
        st = nn_graph_launch_feeds(c->ctx, g, &f, 1);
        break;
    case 2: st = nn_graph_launch_feeds(c->ctx, g, &f, -1); break;
    case 3: st = nn_graph_launch_feeds(c->ctx, g, NULL, 1); break;
    case 4:
        f.reserved[1] = 9;
        st = nn_graph_launch_feeds(c->ctx, g, &f, 1);
        break;
    case 5:
        f.src = NULL;
        st = nn_graph_launch_feeds(c->ctx, g, &f, 1);
        break;
    case 6: st = nn_graph_launch_feeds(c->ctx, g, two, 2); break;
    case 7:
        f.src = (char *)c->x.data + 4;
        st = nn_graph_launch_feeds(c->ctx, g, &f, 1);
        break;
    case 8: st = nn_graph_launch_feeds(c->ctx, g, &f, 1); break;
    }
    nn_error_info e = *nn_last_error();
    cr_assert_eq(nn_graph_free(c->ctx, g), NN_OK);
    cr_assert_eq(nn_tensor_free(c->ctx, &t), NN_OK);
    *(nn_error_info *)nn_last_error() = e;
    return st;
}
CALL(feeds_other_shape)
{
    return feeds_row(c, 0);
}
CALL(feeds_not_a_buffer)
{
    return feeds_row(c, 1);
}
CALL(feeds_negative_n)
{
    return feeds_row(c, 2);
}
CALL(feeds_null)
{
    return feeds_row(c, 3);
}
CALL(feeds_reserved)
{
    return feeds_row(c, 4);
}
CALL(feeds_null_src)
{
    return feeds_row(c, 5);
}
CALL(feeds_twice)
{
    return feeds_row(c, 6);
}
CALL(feeds_overlap)
{
    return feeds_row(c, 7);
}
CALL(feeds_valid)
{
    return feeds_row(c, 8);
}
/* Inside a capture: refused calls spoil it; nn_graph_end says why. */
static nn_status inside(struct cat *c, int which)
{
    nn_optim *opt = NULL, *made = NULL;
    nn_optim_params op;
    cr_assert_eq(nn_optim_params_default(&op, NN_OPTIM_SGD), NN_OK);
    if (which >= 5)
        cr_assert_eq(nn_optim_create(c->ctx, &op, 1, &c->w, &opt), NN_OK, "%s",
                     nn_last_error()->message);
    int64_t step = -7;
    cr_assert_eq(nn_graph_begin(c->ctx), NN_OK, "%s", nn_last_error()->message);
    nn_status st = NN_OK;
    float *h = cat_host_block(c, 4);
    nn_conv_params p = c->cp;
    nn_tensor x2;
    switch (which) {
    case 0: st = nn_mem_copy(c->ctx, h, c->x.data, 4); break;
    case 1: st = nn_ctx_synchronize(c->ctx); break;
    case 2: st = nn_ctx_set_stream(c->ctx, NULL); break;
    case 3:
        /* a shape the context has not seen: stride 2 */
        p.stride[0] = p.stride[1] = 2;
        x2 = c->y;
        x2.dims[2] = x2.dims[3] = 2;
        cat_packed(&x2);
        st = nn_conv_forward(c->ctx, &p, &c->x, &c->w, NULL, &x2, NULL);
        break;
    /* an optimizer is made, and its lr and step count set or read, outside a capture */
    case 4: st = nn_optim_create(c->ctx, &op, 1, &c->w, &made); break;
    case 5: st = nn_optim_set_lr(c->ctx, opt, 0.5); break;
    case 6: st = nn_optim_get_step(c->ctx, opt, &step); break;
    }
    nn_error_info e = *nn_last_error();
    nn_graph *g = NULL;
    cr_assert_eq(nn_graph_end(c->ctx, &g), NN_E_GRAPH, "the refusal spoils the capture");
    cr_assert(strstr(nn_last_error()->message, "the capture failed"), "%s",
              nn_last_error()->message);
    cr_assert_null(g);
    cr_assert_null(made, "a refused create makes nothing");
    cr_assert_eq(step, -7, "a refused read leaves step untouched");
    if (opt) {
        cr_assert_eq(nn_optim_get_step(c->ctx, opt, &step), NN_OK, "usable after the capture");
        cr_assert_eq(step, 0, "no step was taken");
        cr_assert_eq(nn_optim_free(c->ctx, opt), NN_OK);
    }
    *(nn_error_info *)nn_last_error() = e;
    return st;
}
CALL(inside_host_copy)
{
    return inside(c, 0);
}
CALL(inside_synchronize)
{
    return inside(c, 1);
}
CALL(inside_set_stream)
{
    return inside(c, 2);
}
CALL(inside_new_shape)
{
    return inside(c, 3);
}
CALL(inside_optim_create)
{
    return inside(c, 4);
}
CALL(inside_optim_set_lr)
{
    return inside(c, 5);
}
CALL(inside_optim_get_step)
{
    return inside(c, 6);
}
/* A pullback made before the capture, consumed inside it. */
CALL(pullback_into_capture)
{
    nn_pool_pullback *pb = NULL;
    cr_assert_eq(nn_pool_forward(c->ctx, &c->pp, &c->px, &c->py, &pb), NN_OK);
    cr_assert_eq(nn_graph_begin(c->ctx), NN_OK);
    nn_status st = nn_pool_backward(c->ctx, &pb, &c->pdy, &c->pdx);
    nn_error_info e = *nn_last_error();
    close_capture(c);
    cr_assert_eq(nn_pool_backward(c->ctx, &pb, &c->pdy, &c->pdx), NN_OK, "usable outside");
    *(nn_error_info *)nn_last_error() = e;
    return st;
}
/* A pullback made inside a capture, consumed after it. */
CALL(pullback_out_of_capture)
{
    nn_pool_pullback *pb = NULL;
    cr_assert_eq(nn_graph_begin(c->ctx), NN_OK);
    cr_assert_eq(nn_pool_forward(c->ctx, &c->pp, &c->px, &c->py, &pb), NN_OK, "%s",
                 nn_last_error()->message);
    nn_graph *g = NULL;
    cr_assert_eq(nn_graph_end(c->ctx, &g), NN_OK);
    nn_status st = nn_pool_backward(c->ctx, &pb, &c->pdy, &c->pdx);
    nn_error_info e = *nn_last_error();
    cr_assert_eq(nn_pool_pullback_free(&pb), NN_OK);
    cr_assert_eq(nn_graph_free(c->ctx, g), NN_OK);
    *(nn_error_info *)nn_last_error() = e;
    return st;
}
/* A context destroyed with a capture open and a graph live: everything goes, and its graph is no
 * longer live. (A context of its own: the fixture's other context may share c's stream.) */
CALL(destroy_while_capturing)
{
    nn_settings s;
    cr_assert_eq(nn_ctx_get_settings(c->ctx, &s), NN_OK);
    s.stream = NULL;
    s.plan_cache_file = NULL;
    nn_ctx *o = NULL;
    cr_assert_eq(nn_ctx_create(&o, &s), NN_OK, "%s", nn_last_error()->message);
    nn_tensor a, b;
    cr_assert_eq(nn_tensor_empty(o, NN_DTYPE_F32, 1, (int64_t[]){8}, &a), NN_OK);
    cr_assert_eq(nn_tensor_empty(o, NN_DTYPE_F32, 1, (int64_t[]){8}, &b), NN_OK);
    cr_assert_eq(nn_graph_begin(o), NN_OK);
    cr_assert_eq(nn_tensor_copy(o, &b, &a), NN_OK);
    nn_graph *g = NULL;
    cr_assert_eq(nn_graph_end(o, &g), NN_OK);
    cr_assert_eq(nn_graph_begin(o), NN_OK);
    /* freed inside the open capture: adopted by it, released with it */
    cr_assert_eq(nn_tensor_free(o, &a), NN_OK);
    cr_assert_eq(nn_tensor_free(o, &b), NN_OK);
    nn_ctx_destroy(o);
    return nn_graph_launch(c->ctx, g);
}
#endif

static const struct cat_row rows[] = {
    ROW("begin_null_ctx", "nn_graph_begin", "ctx", NN_E_INVALID_ARG, begin_null_ctx),
    ROW_ON(CAT_REF_ONLY, "begin_ref", "nn_graph_begin", "backend", NN_E_UNSUPPORTED, begin_ref),
    ROW("end_null_ctx", "nn_graph_end", "ctx", NN_E_INVALID_ARG, end_null_ctx),
    ROW("end_null_out", "nn_graph_end", "out", NN_E_INVALID_ARG, end_null_out),
    ROW("end_without_begin", "nn_graph_end", "capture", NN_E_GRAPH, end_without_begin),
    ROW("launch_null_ctx", "nn_graph_launch", "ctx", NN_E_INVALID_ARG, launch_null_ctx),
    ROW("launch_null_graph", "nn_graph_launch", "graph", NN_E_INVALID_ARG, launch_null_graph),
    ROW("launch_not_a_graph", "nn_graph_launch", "graph", NN_E_BAD_POINTER, launch_not_a_graph),
    ROW("feeds_not_a_graph", "nn_graph_launch_feeds", "graph", NN_E_BAD_POINTER, feeds_not_a_graph),
    ROW("free_null_graph", "nn_graph_free", NULL, NN_OK, free_null_graph),
    ROW("free_null_ctx", "nn_graph_free", "ctx", NN_E_INVALID_ARG, free_null_ctx),
    ROW("free_not_a_graph", "nn_graph_free", "graph", NN_E_BAD_POINTER, free_not_a_graph),
    ROW("info_null_graph", "nn_graph_get_info", "graph", NN_E_INVALID_ARG, info_null_graph),
    ROW("info_not_a_graph", "nn_graph_get_info", "graph", NN_E_BAD_POINTER, info_not_a_graph),
    ROW("capturing_null_ctx", "nn_graph_capturing", "ctx", NN_E_INVALID_ARG, capturing_null_ctx),
    ROW("capturing_null_out", "nn_graph_capturing", "out", NN_E_INVALID_ARG, capturing_null_out),
    ROW("capturing_idle", "nn_graph_capturing", NULL, NN_OK, capturing_idle),
    ROW("mem_copy_null_ctx", "nn_mem_copy", "ctx", NN_E_INVALID_ARG, mem_copy_null_ctx),
    ROW("mem_copy_null_dst", "nn_mem_copy", "dst", NN_E_INVALID_ARG, mem_copy_null_dst),
    ROW("mem_copy_null_src", "nn_mem_copy", "src", NN_E_INVALID_ARG, mem_copy_null_src),
    ROW("mem_copy_zero_bytes", "nn_mem_copy", NULL, NN_OK, mem_copy_zero_bytes),
    ROW("mem_copy_overlap", "nn_mem_copy", "dst", NN_E_INVALID_ARG, mem_copy_overlap),
    ROW("mem_copy_wrap", "nn_mem_copy", "bytes", NN_E_INVALID_ARG, mem_copy_wrap),
    ROW("mem_copy_host", "nn_mem_copy", NULL, NN_OK, mem_copy_host),
    ROW2("mem_copy_device", "nn_mem_copy", "src", NN_E_MEMSPACE, NN_OK, mem_copy_device),
#if NN_HAVE_CUDA
    ROW_ON(CAT_GPU_ONLY, "begin_nested", "nn_graph_begin", "capture", NN_E_GRAPH, begin_nested),
    ROW_ON(CAT_GPU_ONLY, "begin_legacy_stream", "nn_graph_begin", "stream", NN_E_GRAPH,
           begin_legacy_stream),
    ROW_ON(CAT_GPU_ONLY, "begin_blocking_stream", "nn_graph_begin", "stream", NN_E_GRAPH,
           begin_blocking_stream),
    ROW_ON(CAT_GPU_ONLY, "end_null_out_open", "nn_graph_end", "out", NN_E_INVALID_ARG,
           end_null_out_open),
    ROW_ON(CAT_GPU_ONLY, "launch_freed", "nn_graph_launch", "graph", NN_E_BAD_POINTER,
           launch_freed),
    ROW_ON(CAT_GPU_ONLY, "free_twice", "nn_graph_free", "graph", NN_E_BAD_POINTER, free_twice),
    ROW_ON(CAT_GPU_ONLY, "launch_other_context", "nn_graph_launch", "context", NN_E_INVALID_ARG,
           launch_other_context),
    ROW_ON(CAT_GPU_ONLY, "launch_inside_capture", "nn_graph_launch", "capture", NN_E_GRAPH,
           launch_inside_capture),
    ROW_ON(CAT_GPU_ONLY, "launch_stale", "nn_graph_launch", "buffer", NN_E_GRAPH, launch_stale),
    ROW_ON(CAT_GPU_ONLY, "feeds_other_shape", "nn_graph_launch_feeds", "bytes", NN_E_SHAPE,
           feeds_other_shape),
    ROW_ON(CAT_GPU_ONLY, "feeds_not_a_buffer", "nn_graph_launch_feeds", "dst", NN_E_INVALID_ARG,
           feeds_not_a_buffer),
    ROW_ON(CAT_GPU_ONLY, "feeds_negative_n", "nn_graph_launch_feeds", "n", NN_E_INVALID_ARG,
           feeds_negative_n),
    ROW_ON(CAT_GPU_ONLY, "feeds_null", "nn_graph_launch_feeds", "feeds", NN_E_INVALID_ARG,
           feeds_null),
    ROW_ON(CAT_GPU_ONLY, "feeds_reserved", "nn_graph_launch_feeds", "reserved", NN_E_INVALID_ARG,
           feeds_reserved),
    ROW_ON(CAT_GPU_ONLY, "feeds_null_src", "nn_graph_launch_feeds", "src", NN_E_INVALID_ARG,
           feeds_null_src),
    ROW_ON(CAT_GPU_ONLY, "feeds_twice", "nn_graph_launch_feeds", "dst", NN_E_INVALID_ARG,
           feeds_twice),
    ROW_ON(CAT_GPU_ONLY, "feeds_overlap", "nn_graph_launch_feeds", "src", NN_E_INVALID_ARG,
           feeds_overlap),
    ROW_ON(CAT_GPU_ONLY, "feeds_valid", "nn_graph_launch_feeds", NULL, NN_OK, feeds_valid),
    ROW_ON(CAT_GPU_ONLY, "inside_host_copy", "nn_mem_copy", "host", NN_E_GRAPH, inside_host_copy),
    ROW_ON(CAT_GPU_ONLY, "inside_synchronize", "nn_ctx_synchronize", "capture", NN_E_GRAPH,
           inside_synchronize),
    ROW_ON(CAT_GPU_ONLY, "inside_set_stream", "nn_ctx_set_stream", "capture", NN_E_GRAPH,
           inside_set_stream),
    ROW_ON(CAT_GPU_ONLY, "inside_new_shape", "nn_conv_forward", "nn_graph_begin", NN_E_GRAPH,
           inside_new_shape),
    ROW_ON(CAT_GPU_ONLY, "inside_optim_create", "nn_optim_create", "capture", NN_E_GRAPH,
           inside_optim_create),
    ROW_ON(CAT_GPU_ONLY, "inside_optim_set_lr", "nn_optim_set_lr", "capture", NN_E_GRAPH,
           inside_optim_set_lr),
    ROW_ON(CAT_GPU_ONLY, "inside_optim_get_step", "nn_optim_get_step", "capture", NN_E_GRAPH,
           inside_optim_get_step),
    ROW_ON(CAT_GPU_ONLY, "pullback_into_capture", "nn_pool_backward", "pullback", NN_E_GRAPH,
           pullback_into_capture),
    ROW_ON(CAT_GPU_ONLY, "pullback_out_of_capture", "nn_pool_backward", "pullback", NN_E_GRAPH,
           pullback_out_of_capture),
    ROW_ON(CAT_GPU_ONLY, "destroy_while_capturing", "nn_graph_launch", "graph", NN_E_BAD_POINTER,
           destroy_while_capturing),
#endif
};

CAT_SUBJECT(graph, rows)

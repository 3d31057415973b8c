/* Every failure is recorded twice (include/nnprim/status.h): on the thread (nn_last_error()) and
 * on the context of the call (nn_ctx_last_error()), with the same status and message. One row per
 * public function that returns an nn_status and has a context: its ctx argument, or the context an
 * object it takes is bound to (a graph, an optimizer, a pullback). Each row makes a failing call
 * with a usable context (not a NULL ctx) on the reference backend, and both records are compared.
 *
 * The list of such functions is read from the public headers at run time, and a function without
 * a row fails the test, so the audit follows the API. A function that cannot fail with a usable
 * reference context has a row that says why instead of a call. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "nn_config.h"

#include "gpu.h"
#include "nnprim/nnprim.h"

struct fx {
    nn_ctx *ctx;
    nn_conv_params cp;
    nn_pool_params pp;
    nn_tensor x, w, y, px, py;
    nn_conv_pullback *conv_pb; /* live: a pullback of another family for the *_pullback_free rows */
    nn_pool_pullback *pool_pb; /* live: the same for nn_conv_pullback_free */
    nn_optim *opt;             /* an SGD optimizer of x */
};

static nn_tensor fx_tensor(struct fx *f, int rank, const int64_t *dims)
{
    nn_tensor t;
    cr_assert_eq(nn_tensor_empty(f->ctx, NN_DTYPE_F32, rank, dims, &t), NN_OK, "fixture");
    cr_assert_eq(nn_tensor_fill_ints(f->ctx, &t, -2, 2, 7), NN_OK, "fixture");
    return t;
}

static void fx_setup(struct fx *f)
{
    memset(f, 0, sizeof *f);
    nn_settings s;
    cr_assert_eq(nn_settings_defaults(&s), NN_OK);
    s.backend = NN_BACKEND_REF;
    cr_assert_eq(nn_ctx_create(&f->ctx, &s), NN_OK, "%s", nn_last_error()->message);
    static const int64_t dx[] = {1, 2, 5, 5}, dw[] = {3, 2, 3, 3}, dy[] = {1, 3, 3, 3};
    static const int64_t dpx[] = {1, 2, 4, 4}, dpy[] = {1, 2, 2, 2};
    f->x = fx_tensor(f, 4, dx);
    f->w = fx_tensor(f, 4, dw);
    f->y = fx_tensor(f, 4, dy);
    f->px = fx_tensor(f, 4, dpx);
    f->py = fx_tensor(f, 4, dpy);
    cr_assert_eq(nn_conv_params_default(&f->cp, 2), NN_OK);
    f->pp.spatial_rank = 2;
    f->pp.mode = NN_POOL_MAX;
    f->pp.window[0] = f->pp.window[1] = 2;
    f->pp.stride[0] = f->pp.stride[1] = 2;
    cr_assert_eq(nn_conv_forward(f->ctx, &f->cp, &f->x, &f->w, NULL, &f->y, &f->conv_pb), NN_OK,
                 "%s", nn_last_error()->message);
    cr_assert_eq(nn_pool_forward(f->ctx, &f->pp, &f->px, &f->py, &f->pool_pb), NN_OK, "%s",
                 nn_last_error()->message);
    nn_optim_params op;
    cr_assert_eq(nn_optim_params_default(&op, NN_OPTIM_SGD), NN_OK);
    cr_assert_eq(nn_optim_create(f->ctx, &op, 1, &f->x, &f->opt), NN_OK, "%s",
                 nn_last_error()->message);
}

static void fx_teardown(struct fx *f)
{
    cr_assert_eq(nn_conv_pullback_free(&f->conv_pb), NN_OK);
    cr_assert_eq(nn_pool_pullback_free(&f->pool_pb), NN_OK);
    cr_assert_eq(nn_optim_free(f->ctx, f->opt), NN_OK);
    nn_tensor *ts[] = {&f->x, &f->w, &f->y, &f->px, &f->py};
    for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++)
        cr_assert_eq(nn_tensor_free(f->ctx, ts[i]), NN_OK);
    nn_ctx_destroy(f->ctx);
}

struct row {
    const char *fn;
    nn_status (*call)(struct fx *f); /* fails on f->ctx, or on the context of the object it takes */
    const char *why;                 /* instead of call: why no failure with a usable context */
};

#define CALL(name) static nn_status name(struct fx *f)

/* Memory nnprim never handed out: the calls that look pointers up refuse it unread. */
static char foreign[64];

/* ---- context.h ---- */
CALL(ctx_get_settings)
{
    return nn_ctx_get_settings(f->ctx, NULL);
}
CALL(ctx_get_stream)
{
    return nn_ctx_get_stream(f->ctx, NULL);
}
CALL(ctx_last_error)
{
    return nn_ctx_last_error(f->ctx, NULL);
}

/* ---- conv.h ---- */
CALL(conv_forward)
{
    return nn_conv_forward(f->ctx, NULL, &f->x, &f->w, NULL, &f->y, NULL);
}
CALL(conv_backward)
{
    return nn_conv_backward(f->ctx, NULL, &f->y, NULL, NULL, NULL);
}
CALL(conv_backward_ex)
{
    nn_conv_pullback *dead = (nn_conv_pullback *)foreign;
    return nn_conv_backward_ex(f->ctx, &dead, NULL, &f->y, NULL, NULL, NULL);
}
CALL(conv_pullback_free)
{
    return nn_conv_pullback_free((nn_conv_pullback **)&f->pool_pb);
}
CALL(conv_backward_data)
{
    return nn_conv_backward_data(f->ctx, NULL, &f->y, &f->w, &f->x, 0);
}
CALL(conv_backward_filter)
{
    return nn_conv_backward_filter(f->ctx, NULL, &f->x, &f->y, &f->w, 0);
}
CALL(conv_backward_bias)
{
    return nn_conv_backward_bias(f->ctx, &f->cp, &f->y, NULL, 0);
}
CALL(conv_workspace_size)
{
    return nn_conv_workspace_size(f->ctx, &f->cp, &f->x, &f->w, NULL, NN_CONV_PASS_FORWARD, 0,
                                  NULL);
}

/* ---- dlpack.h (NN_E_NOT_BUILT in a build without dlpack.h: a failure all the same) ---- */
CALL(from_dlpack)
{
    return nn_tensor_from_dlpack(f->ctx, NULL, &f->y);
}
CALL(from_dlpack_versioned)
{
    return nn_tensor_from_dlpack_versioned(f->ctx, NULL, &f->y);
}
CALL(to_dlpack)
{
    return nn_tensor_to_dlpack(f->ctx, &f->x, NULL);
}

/* ---- graph.h (the reference backend captures nothing) ---- */
CALL(graph_begin)
{
    return nn_graph_begin(f->ctx);
}
CALL(graph_end)
{
    nn_graph *g;
    return nn_graph_end(f->ctx, &g);
}
CALL(graph_launch)
{
    return nn_graph_launch(f->ctx, NULL);
}
CALL(graph_launch_feeds)
{
    return nn_graph_launch_feeds(f->ctx, NULL, NULL, 0);
}
CALL(graph_free)
{
    return nn_graph_free(f->ctx, (nn_graph *)foreign);
}
CALL(graph_capturing)
{
    return nn_graph_capturing(f->ctx, NULL);
}

/* ---- linear.h ---- */
CALL(linear_forward)
{
    return nn_linear_forward(f->ctx, NULL, &f->x, &f->w, NULL, &f->y, NULL);
}
CALL(linear_backward)
{
    return nn_linear_backward(f->ctx, NULL, &f->y, NULL, NULL, NULL);
}
CALL(linear_backward_ex)
{
    nn_linear_pullback *pb = (nn_linear_pullback *)f->conv_pb;
    return nn_linear_backward_ex(f->ctx, &pb, NULL, &f->y, NULL, NULL, NULL);
}
CALL(linear_pullback_free)
{
    return nn_linear_pullback_free((nn_linear_pullback **)&f->conv_pb);
}
CALL(linear_workspace_size)
{
    size_t bytes;
    return nn_linear_workspace_size(f->ctx, NULL, &f->x, &f->w, NULL, 0, 0, &bytes);
}

/* ---- mem.h ---- */
CALL(mem_alloc)
{
    return nn_mem_alloc(f->ctx, 16, NULL);
}
CALL(mem_free)
{
    return nn_mem_free(f->ctx, foreign);
}
CALL(mem_copy)
{
    return nn_mem_copy(f->ctx, NULL, foreign, 4);
}

/* ---- optim.h ---- */
CALL(optim_create)
{
    nn_optim *o;
    return nn_optim_create(f->ctx, NULL, 1, &f->x, &o);
}
CALL(optim_step)
{
    return nn_optim_step(f->ctx, f->opt, 2, NULL);
}
CALL(optim_set_lr)
{
    return nn_optim_set_lr(f->ctx, f->opt, -1.0);
}
CALL(optim_get_step)
{
    return nn_optim_get_step(f->ctx, f->opt, NULL);
}
CALL(optim_reset)
{
    return nn_optim_reset(f->ctx, NULL);
}
CALL(optim_free)
{
    return nn_optim_free(f->ctx, (nn_optim *)foreign);
}

/* ---- plan_cache.h ---- */
CALL(plan_save)
{
    return nn_plan_cache_save(f->ctx, NULL);
}
CALL(plan_load)
{
    return nn_plan_cache_load(f->ctx, "");
}
CALL(plan_stats)
{
    return nn_plan_cache_get_stats(f->ctx, NULL);
}

/* ---- pool.h ---- */
CALL(pool_forward)
{
    return nn_pool_forward(f->ctx, NULL, &f->px, &f->py, NULL);
}
CALL(pool_backward)
{
    return nn_pool_backward(f->ctx, NULL, &f->py, &f->px);
}
CALL(pool_backward_ex)
{
    nn_pool_pullback *pb = (nn_pool_pullback *)f->conv_pb;
    return nn_pool_backward_ex(f->ctx, &pb, NULL, &f->py, &f->px);
}
CALL(pool_backward_stateless)
{
    return nn_pool_backward_stateless(f->ctx, NULL, &f->px, &f->py, &f->py, &f->px, 0);
}
CALL(pool_workspace_size)
{
    size_t bytes;
    return nn_pool_workspace_size(f->ctx, NULL, &f->px, &f->py, NULL, NULL, NN_POOL_PASS_FORWARD,
                                  &bytes);
}
CALL(pool_pullback_free)
{
    return nn_pool_pullback_free((nn_pool_pullback **)&f->conv_pb);
}

/* ---- rnn.h ---- */
CALL(rnn_weights_size)
{
    int64_t n;
    return nn_rnn_weights_size(f->ctx, NULL, NN_DTYPE_F32, &n);
}
CALL(rnn_weight_view)
{
    nn_tensor v;
    return nn_rnn_weight_view(f->ctx, NULL, &f->x, 0, 0, NN_RNN_WEIGHT_IH, &v);
}
CALL(rnn_forward)
{
    return nn_rnn_forward(f->ctx, NULL,
                          &(nn_rnn_forward_tensors){.x = &f->x, .w = &f->w, .y = &f->y}, NULL);
}
CALL(rnn_backward)
{
    return nn_rnn_backward(f->ctx, NULL, &(nn_rnn_backward_tensors){.dy = &f->y, .dx = &f->x});
}
CALL(rnn_backward_ex)
{
    nn_rnn_pullback *pb = (nn_rnn_pullback *)f->pool_pb;
    return nn_rnn_backward_ex(f->ctx, &pb, NULL,
                              &(nn_rnn_backward_tensors){.dy = &f->y, .dx = &f->x});
}
CALL(rnn_workspace_size)
{
    size_t bytes;
    return nn_rnn_workspace_size(f->ctx, NULL, &f->x, NULL, NN_RNN_PASS_INFERENCE, &bytes);
}
CALL(rnn_pullback_free)
{
    return nn_rnn_pullback_free((nn_rnn_pullback **)&f->conv_pb);
}

/* ---- layernorm.h ---- */
CALL(layernorm_forward)
{
    return nn_layernorm_forward(f->ctx, NULL, &f->x, NULL, NULL, &f->y, NULL);
}
CALL(layernorm_backward)
{
    return nn_layernorm_backward(f->ctx, NULL, &f->x, &f->y, NULL, NULL);
}
CALL(layernorm_backward_ex)
{
    nn_layernorm_pullback *pb = (nn_layernorm_pullback *)f->conv_pb;
    return nn_layernorm_backward_ex(f->ctx, &pb, NULL, &f->x, &f->y, NULL, NULL);
}
CALL(layernorm_pullback_free)
{
    return nn_layernorm_pullback_free((nn_layernorm_pullback **)&f->conv_pb);
}

/* ---- softmax.h ---- */
CALL(softmax_forward)
{
    return nn_softmax_forward(f->ctx, NULL, &f->x, &f->x, NULL);
}
CALL(softmax_backward)
{
    return nn_softmax_backward(f->ctx, NULL, &f->x, &f->x);
}
CALL(softmax_backward_ex)
{
    nn_softmax_pullback *pb = (nn_softmax_pullback *)f->conv_pb;
    return nn_softmax_backward_ex(f->ctx, &pb, NULL, &f->x, &f->x);
}
CALL(softmax_pullback_free)
{
    return nn_softmax_pullback_free((nn_softmax_pullback **)&f->conv_pb);
}
CALL(softmax_workspace_size)
{
    size_t bytes;
    return nn_softmax_workspace_size(f->ctx, NULL, &f->x, NN_SOFTMAX_PASS_FORWARD, &bytes);
}
CALL(ce_forward)
{
    return nn_softmax_cross_entropy_forward(f->ctx, &f->x, NULL, &f->y, NULL);
}
CALL(ce_backward)
{
    return nn_softmax_cross_entropy_backward(f->ctx, NULL, &f->y, &f->x);
}
CALL(ce_backward_ex)
{
    nn_softmax_cross_entropy_pullback *pb = (nn_softmax_cross_entropy_pullback *)f->pool_pb;
    return nn_softmax_cross_entropy_backward_ex(f->ctx, &pb, NULL, &f->y, &f->x);
}
CALL(ce_workspace_size)
{
    return nn_softmax_cross_entropy_workspace_size(f->ctx, &f->x, NN_SOFTMAX_PASS_FORWARD, NULL);
}
CALL(ce_pullback_free)
{
    return nn_softmax_cross_entropy_pullback_free(
        (nn_softmax_cross_entropy_pullback **)&f->conv_pb);
}

/* ---- tensor.h ---- */
CALL(tensor_empty)
{
    nn_tensor t;
    static const int64_t d[] = {0};
    return nn_tensor_empty(f->ctx, NN_DTYPE_F32, 1, d, &t);
}
CALL(tensor_free)
{
    nn_tensor t = f->x;
    t.data = foreign;
    return nn_tensor_free(f->ctx, &t);
}
CALL(tensor_wrap)
{
    nn_tensor t;
    static const int64_t d[] = {4};
    return nn_tensor_wrap(f->ctx, NULL, NN_DTYPE_F32, 1, d, NULL, &t);
}
CALL(tensor_copy)
{
    return nn_tensor_copy(f->ctx, &f->x, &f->y);
}
CALL(fill_constant)
{
    return nn_tensor_fill_constant(f->ctx, NULL, 1.0);
}
CALL(fill_uniform)
{
    return nn_tensor_fill_uniform(f->ctx, &f->x, 1.0, 0.0, 1);
}
CALL(fill_ints)
{
    return nn_tensor_fill_ints(f->ctx, &f->x, 3, -3, 1);
}

#define R(fn, call)                                                                                \
    {                                                                                              \
        fn, call, NULL                                                                             \
    }
#define NONE(fn, why)                                                                              \
    {                                                                                              \
        fn, NULL, why                                                                              \
    }

static const struct row rows[] = {
    R("nn_ctx_get_settings", ctx_get_settings),
    NONE("nn_ctx_set_stream", "a reference context takes any stream (it has none); "
                              "records_gpu: a switch inside a capture"),
    R("nn_ctx_get_stream", ctx_get_stream),
    NONE("nn_ctx_synchronize", "a reference context has nothing to wait for; records_gpu: a "
                               "wait inside a capture"),
    R("nn_ctx_last_error", ctx_last_error),
    R("nn_conv_forward", conv_forward),
    R("nn_conv_backward", conv_backward),
    R("nn_conv_backward_ex", conv_backward_ex),
    R("nn_conv_pullback_free", conv_pullback_free),
    R("nn_conv_backward_data", conv_backward_data),
    R("nn_conv_backward_filter", conv_backward_filter),
    R("nn_conv_backward_bias", conv_backward_bias),
    R("nn_conv_workspace_size", conv_workspace_size),
    R("nn_tensor_from_dlpack", from_dlpack),
    R("nn_tensor_from_dlpack_versioned", from_dlpack_versioned),
    R("nn_tensor_to_dlpack", to_dlpack),
    R("nn_graph_begin", graph_begin),
    R("nn_graph_end", graph_end),
    R("nn_graph_launch", graph_launch),
    R("nn_graph_launch_feeds", graph_launch_feeds),
    R("nn_graph_free", graph_free),
    NONE("nn_graph_get_info", "a live graph needs a capture, which a reference context cannot "
                              "make (records_gpu); a graph that is not live has no context"),
    R("nn_graph_capturing", graph_capturing),
    R("nn_layernorm_forward", layernorm_forward),
    R("nn_layernorm_backward", layernorm_backward),
    R("nn_layernorm_backward_ex", layernorm_backward_ex),
    R("nn_layernorm_pullback_free", layernorm_pullback_free),
    R("nn_linear_forward", linear_forward),
    R("nn_linear_backward", linear_backward),
    R("nn_linear_backward_ex", linear_backward_ex),
    R("nn_linear_pullback_free", linear_pullback_free),
    R("nn_linear_workspace_size", linear_workspace_size),
    R("nn_mem_alloc", mem_alloc),
    R("nn_mem_free", mem_free),
    R("nn_mem_copy", mem_copy),
    R("nn_optim_create", optim_create),
    R("nn_optim_step", optim_step),
    R("nn_optim_set_lr", optim_set_lr),
    R("nn_optim_get_step", optim_get_step),
    R("nn_optim_reset", optim_reset),
    R("nn_optim_free", optim_free),
    R("nn_plan_cache_save", plan_save),
    R("nn_plan_cache_load", plan_load),
    NONE("nn_plan_cache_clear", "NN_OK for every context (plan_cache.h)"),
    NONE("nn_plan_cache_wait", "NN_OK for every context (plan_cache.h)"),
    R("nn_plan_cache_get_stats", plan_stats),
    R("nn_pool_forward", pool_forward),
    R("nn_pool_backward", pool_backward),
    R("nn_pool_backward_ex", pool_backward_ex),
    R("nn_pool_backward_stateless", pool_backward_stateless),
    R("nn_pool_workspace_size", pool_workspace_size),
    R("nn_pool_pullback_free", pool_pullback_free),
    R("nn_rnn_weights_size", rnn_weights_size),
    R("nn_rnn_weight_view", rnn_weight_view),
    R("nn_rnn_forward", rnn_forward),
    R("nn_rnn_backward", rnn_backward),
    R("nn_rnn_backward_ex", rnn_backward_ex),
    R("nn_rnn_workspace_size", rnn_workspace_size),
    R("nn_rnn_pullback_free", rnn_pullback_free),
    R("nn_softmax_forward", softmax_forward),
    R("nn_softmax_backward", softmax_backward),
    R("nn_softmax_backward_ex", softmax_backward_ex),
    R("nn_softmax_pullback_free", softmax_pullback_free),
    R("nn_softmax_workspace_size", softmax_workspace_size),
    R("nn_softmax_cross_entropy_forward", ce_forward),
    R("nn_softmax_cross_entropy_backward", ce_backward),
    R("nn_softmax_cross_entropy_backward_ex", ce_backward_ex),
    R("nn_softmax_cross_entropy_workspace_size", ce_workspace_size),
    R("nn_softmax_cross_entropy_pullback_free", ce_pullback_free),
    R("nn_tensor_empty", tensor_empty),
    R("nn_tensor_free", tensor_free),
    R("nn_tensor_wrap", tensor_wrap),
    R("nn_tensor_copy", tensor_copy),
    R("nn_tensor_fill_constant", fill_constant),
    R("nn_tensor_fill_uniform", fill_uniform),
    R("nn_tensor_fill_ints", fill_ints),
};
#define NROWS (sizeof rows / sizeof rows[0])

static const struct row *row_of(const char *fn)
{
    for (size_t i = 0; i < NROWS; i++)
        if (strcmp(rows[i].fn, fn) == 0) return &rows[i];
    return NULL;
}

/* ---------------------------------------------------------------------------------------------
 * The public functions, from the headers
 */

struct decl {
    char name[96];
    int status;  /* returns nn_status */
    int context; /* takes a context or an object bound to one */
};

/* Does the parameter list take a context, a graph, an optimizer or a pullback? An out parameter
 * for a new one ("nn_ctx **out" of nn_ctx_create()) is no context of the call; a pullback
 * argument is always "T **pullback", the object the call is given. */
static int has_context(const char *params)
{
    static const char *const types[] = {"nn_ctx *", "nn_graph *", "nn_optim *", "_pullback **"};
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
        size_t n = strlen(types[i]);
        for (const char *p = strstr(params, types[i]); p; p = strstr(p + 1, types[i]))
            if (types[i][n - 2] == '*' || p[n] != '*') return 1;
    }
    return 0;
}

/* Remove comments, in place. */
static void strip_comments(char *s)
{
    char *w = s;
    for (char *r = s; *r;) {
        if (r[0] == '/' && r[1] == '*') {
            char *end = strstr(r + 2, "*/");
            r = end ? end + 2 : r + strlen(r);
        } else if (r[0] == '/' && r[1] == '/') {
            while (*r && *r != '\n')
                r++;
        } else {
            *w++ = *r++;
        }
    }
    *w = 0;
}

/* Every "NN_API <type> name(params);" of the header text s, appended to out. */
static size_t parse_header(char *s, struct decl *out, size_t n, size_t cap)
{
    strip_comments(s);
    for (char *p = strstr(s, "NN_API "); p; p = strstr(p + 1, "NN_API ")) {
        char *open = strchr(p, '('), *semi = strchr(p, ';');
        if (!open || !semi || semi < open) continue; /* not a function (the #define of NN_API) */
        char *close = strchr(open, ')');
        cr_assert(close && close < semi, "a declaration without its ')'");
        char *e = open;
        while (e > p && e[-1] == ' ')
            e--;
        char *b = e;
        while (b > p && (b[-1] == '_' || (b[-1] >= 'a' && b[-1] <= 'z') ||
                         (b[-1] >= 'A' && b[-1] <= 'Z') || (b[-1] >= '0' && b[-1] <= '9')))
            b--;
        cr_assert_lt(n, cap, "more public functions than the test has room for");
        struct decl *d = &out[n++];
        snprintf(d->name, sizeof d->name, "%.*s", (int)(e - b), b);
        char type[128], params[1024];
        snprintf(type, sizeof type, "%.*s", (int)(b - p), p);
        /* One space for any run of white space, so "nn_ctx  *" and line breaks match. */
        size_t k = 0;
        for (char *q = open + 1; q < close && k + 1 < sizeof params; q++) {
            char ch = (*q == '\n' || *q == '\t') ? ' ' : *q;
            if (ch == ' ' && k && params[k - 1] == ' ') continue;
            params[k++] = ch;
        }
        params[k] = 0;
        d->status = strstr(type, "nn_status") != NULL;
        d->context = has_context(params);
    }
    return n;
}

static size_t public_functions(struct decl *out, size_t cap)
{
    const char *dir = NN_SOURCE_ROOT "/include/nnprim";
    DIR *d = opendir(dir);
    cr_assert_not_null(d, "cannot open %s", dir);
    size_t n = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        size_t len = strlen(de->d_name);
        if (len < 3 || strcmp(de->d_name + len - 2, ".h") != 0) continue;
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
        FILE *fp = fopen(path, "r");
        cr_assert_not_null(fp, "cannot read %s", path);
        static char text[1 << 20];
        size_t got = fread(text, 1, sizeof text - 1, fp);
        cr_assert(feof(fp), "%s is larger than the test reads", path);
        fclose(fp);
        text[got] = 0;
        n = parse_header(text, out, n, cap);
    }
    closedir(d);
    return n;
}

static struct decl decls[512];

Test(records, every_public_function_with_a_context_has_a_row)
{
    size_t n = public_functions(decls, sizeof decls / sizeof decls[0]);
    /* A parser that finds nothing would pass everything: the API has many functions. */
    cr_assert_gt(n, 100, "only %zu public functions found", n);
    size_t with_ctx = 0;
    for (size_t i = 0; i < n; i++) {
        if (!decls[i].status || !decls[i].context) continue;
        with_ctx++;
        cr_expect_not_null(row_of(decls[i].name),
                           "%s returns an nn_status and has a context: it needs a row in "
                           "tests/core/test_records.c",
                           decls[i].name);
    }
    cr_expect_eq(with_ctx, NROWS, "%zu functions with a context, %zu rows", with_ctx, NROWS);
    for (size_t r = 0; r < NROWS; r++) {
        int found = 0;
        for (size_t i = 0; i < n; i++)
            found |= strcmp(decls[i].name, rows[r].fn) == 0 && decls[i].status && decls[i].context;
        cr_expect(found, "row %s names no public function with a context", rows[r].fn);
    }
}

/* ---------------------------------------------------------------------------------------------
 * The rows
 */

static int starts_with_fn(const char *m, const char *fn)
{
    size_t n = strlen(fn);
    return strncmp(m, fn, n) == 0 && m[n] == ':' && m[n + 1] == ' ';
}

Test(records, a_failure_is_recorded_on_the_thread_and_the_context)
{
    for (size_t r = 0; r < NROWS; r++) {
        const struct row *row = &rows[r];
        if (!row->call) continue;
        struct fx f;
        fx_setup(&f);
        nn_clear_last_error();
        nn_status st = row->call(&f);
        nn_error_info t = *nn_last_error(), c;
        cr_assert_eq(nn_ctx_last_error(f.ctx, &c), NN_OK);
        cr_expect_neq(st, NN_OK, "%s: the row's call must fail", row->fn);
        cr_expect_eq(t.status, st, "%s: returned %s, nn_last_error() says %s", row->fn,
                     nn_status_name(st), nn_status_name(t.status));
        cr_expect(starts_with_fn(t.message, row->fn), "%s: thread message \"%s\"", row->fn,
                  t.message);
        cr_expect_eq(c.status, st, "%s: returned %s, nn_ctx_last_error() says %s (\"%s\")", row->fn,
                     nn_status_name(st), nn_status_name(c.status), c.message);
        cr_expect_str_eq(c.message, t.message, "%s: the context's message differs", row->fn);
        cr_expect_str_eq(c.call, t.call, "%s", row->fn);
        cr_expect_eq(c.line, t.line, "%s", row->fn);
        fx_teardown(&f);
    }
}

/* With no usable context (ctx NULL) only the thread record is written; a context's record is
 * left as it was. */
Test(records, a_null_context_leaves_other_contexts_alone)
{
    struct fx f;
    fx_setup(&f);
    cr_assert_eq(nn_ctx_get_stream(f.ctx, NULL), NN_E_INVALID_ARG);
    nn_error_info before, after;
    cr_assert_eq(nn_ctx_last_error(f.ctx, &before), NN_OK);
    cr_assert_eq(nn_tensor_fill_constant(NULL, &f.x, 1.0), NN_E_INVALID_ARG);
    cr_expect_str_eq(nn_last_error()->message, "nn_tensor_fill_constant: ctx must not be NULL");
    cr_assert_eq(nn_ctx_last_error(f.ctx, &after), NN_OK);
    cr_expect_eq(memcmp(&before, &after, sizeof before), 0);
    cr_expect(starts_with_fn(after.message, "nn_ctx_get_stream"), "%s", after.message);
    fx_teardown(&f);
}

/* status.h: the thread's record stays until the next failing call; a successful call changes
 * neither record. */
Test(records, a_successful_call_keeps_both_records)
{
    struct fx f;
    fx_setup(&f);
    cr_assert_eq(nn_tensor_fill_ints(f.ctx, &f.x, 3, -3, 1), NN_E_INVALID_ARG);
    nn_error_info t0 = *nn_last_error(), c0, c1;
    cr_assert_eq(nn_ctx_last_error(f.ctx, &c0), NN_OK);
    cr_assert_eq(nn_tensor_fill_ints(f.ctx, &f.x, -3, 3, 1), NN_OK);
    cr_assert_eq(nn_conv_forward(f.ctx, &f.cp, &f.x, &f.w, NULL, &f.y, NULL), NN_OK);
    void *stream;
    cr_assert_eq(nn_ctx_get_stream(f.ctx, &stream), NN_OK);
    cr_expect_eq(memcmp(nn_last_error(), &t0, sizeof t0), 0, "the thread record changed");
    cr_assert_eq(nn_ctx_last_error(f.ctx, &c1), NN_OK);
    cr_expect_eq(memcmp(&c0, &c1, sizeof c0), 0, "the context record changed");
    cr_expect_str_eq(c1.message, t0.message);
    fx_teardown(&f);
}

/* The rows above without a call: their failures need a cuDNN context (a capture, a live graph). */

static void expect_both(nn_ctx *ctx, nn_status st, nn_status want, const char *fn)
{
    nn_error_info t = *nn_last_error(), c;
    cr_assert_eq(nn_ctx_last_error(ctx, &c), NN_OK);
    cr_expect_eq(st, want, "%s returned %s: %s", fn, nn_status_name(st), t.message);
    cr_expect_eq(t.status, st, "%s", fn);
    cr_expect(starts_with_fn(t.message, fn), "%s: thread message \"%s\"", fn, t.message);
    cr_expect_eq(c.status, st, "%s: nn_ctx_last_error() says %s", fn, nn_status_name(c.status));
    cr_expect_str_eq(c.message, t.message, "%s", fn);
}

Test(records_gpu, failures_of_a_cudnn_context)
{
    NN_REQUIRE_GPU();
    nn_settings s;
    cr_assert_eq(nn_settings_defaults(&s), NN_OK);
    s.backend = NN_BACKEND_CUDNN;
    nn_ctx *ctx;
    cr_assert_eq(nn_ctx_create(&ctx, &s), NN_OK, "%s", nn_last_error()->message);
    static const int64_t d[] = {64};
    nn_tensor t;
    cr_assert_eq(nn_tensor_empty(ctx, NN_DTYPE_F32, 1, d, &t), NN_OK);

    /* A live graph refusing a NULL out: recorded on the graph's context. */
    cr_assert_eq(nn_graph_begin(ctx), NN_OK, "%s", nn_last_error()->message);
    cr_assert_eq(nn_tensor_fill_constant(ctx, &t, 1.0), NN_OK, "%s", nn_last_error()->message);
    nn_graph *g = NULL;
    cr_assert_eq(nn_graph_end(ctx, &g), NN_OK, "%s", nn_last_error()->message);
    nn_clear_last_error();
    expect_both(ctx, nn_graph_get_info(g, NULL), NN_E_INVALID_ARG, "nn_graph_get_info");
    cr_assert_eq(nn_graph_free(ctx, g), NN_OK);

    /* Inside a capture, a stream switch and a host wait are refused. The stream is never used:
     * the capture is checked first. */
    cr_assert_eq(nn_graph_begin(ctx), NN_OK, "%s", nn_last_error()->message);
    nn_clear_last_error();
    expect_both(ctx, nn_ctx_set_stream(ctx, (void *)foreign), NN_E_GRAPH, "nn_ctx_set_stream");
    expect_both(ctx, nn_ctx_synchronize(ctx), NN_E_GRAPH, "nn_ctx_synchronize");
    g = NULL;
    if (nn_graph_end(ctx, &g) == NN_OK) cr_assert_eq(nn_graph_free(ctx, g), NN_OK);
    cr_assert_eq(nn_tensor_free(ctx, &t), NN_OK);
    nn_ctx_destroy(ctx);
}

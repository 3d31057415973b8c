/* Introspection of the cuDNN layer; see describe_cudnn.h. */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "core/ctx.h"
#include "core/error.h"
#include "core/text.h"
#include "cudnn/bindings_cudnn.h"
#include "cudnn/describe_cudnn.h"

const void *nn__cudnn_scale(union nn__cudnn_scale *s, nn_dtype t, double v)
{
    if (t == NN_DTYPE_F64)
        s->d = v;
    else
        s->f = (float)v;
    return s;
}

nn_status nn__cudnn_tensor_desc(struct nn_ctx *ctx, nn_dtype t, int nd, const int *dims,
                                const int *strides, cudnnTensorDescriptor_t *out)
{
    cudnnTensorDescriptor_t d;
    NN__TRY(nn__cudnn_CreateTensorDescriptor(ctx, &d));
    nn_status st =
        nn__cudnn_SetTensorNdDescriptor(ctx, d, nn__cudnn_data_type(t), nd, dims, strides);
    if (st != NN_OK) {
        nn__cudnn_tensor_desc_destroy(ctx, d);
        return st;
    }
    *out = d;
    return NN_OK;
}

void nn__cudnn_tensor_desc_destroy(struct nn_ctx *ctx, cudnnTensorDescriptor_t d)
{
    if (!d) return;
    struct nn__error_kept keep = nn__error_keep(ctx);
    (void)nn__cudnn_DestroyTensorDescriptor(ctx, d);
    nn__error_restore(ctx, &keep);
}

nn_status nn__cudnn_relu_desc(struct nn_ctx *ctx, cudnnActivationDescriptor_t *out)
{
    cudnnActivationDescriptor_t act;
    NN__TRY(nn__cudnn_CreateActivationDescriptor(ctx, &act));
    nn_status st = nn__cudnn_SetActivationDescriptor(ctx, act, CUDNN_ACTIVATION_RELU,
                                                     CUDNN_NOT_PROPAGATE_NAN, 0.0);
    if (st != NN_OK) {
        nn__cudnn_relu_desc_destroy(ctx, act);
        return st;
    }
    *out = act;
    return NN_OK;
}

void nn__cudnn_relu_desc_destroy(struct nn_ctx *ctx, cudnnActivationDescriptor_t act)
{
    if (!act) return;
    struct nn__error_kept keep = nn__error_keep(ctx);
    (void)nn__cudnn_DestroyActivationDescriptor(ctx, act);
    nn__error_restore(ctx, &keep);
}

cudnnDataType_t nn__cudnn_data_type(nn_dtype t)
{
    switch (t) {
    case NN_DTYPE_F32: return CUDNN_DATA_FLOAT;
    case NN_DTYPE_F64: return CUDNN_DATA_DOUBLE;
    case NN_DTYPE_F16: return CUDNN_DATA_HALF;
    case NN_DTYPE_BF16: return CUDNN_DATA_BFLOAT16;
    }
    return (cudnnDataType_t)-1;
}

nn_dtype nn__cudnn_nn_dtype(cudnnDataType_t t)
{
    switch (t) {
    case CUDNN_DATA_FLOAT: return NN_DTYPE_F32;
    case CUDNN_DATA_DOUBLE: return NN_DTYPE_F64;
    case CUDNN_DATA_HALF: return NN_DTYPE_F16;
    case CUDNN_DATA_BFLOAT16: return NN_DTYPE_BF16;
    default: return (nn_dtype)0;
    }
}

/* ---------------------------------------------------------------------------------------------
 * Text
 */

static void put_tensor(struct nn__text *o, const char *name, const struct nn__cudnn_tensor *t)
{
    if (name) nn__text_add(o, "%s:", name);
    if (t->rank <= 0) {
        nn__text_add(o, "-");
        return;
    }
    nn__text_add(o, "%s[", nn_dtype_name(t->dtype));
    nn__text_add_list(o, t->dims, t->rank, ",");
    nn__text_add(o, "]/[");
    nn__text_add_list(o, t->strides, t->rank, ",");
    nn__text_add(o, "]");
    if (t->alignment > 0) nn__text_add(o, "@%lld", (long long)t->alignment);
}

const char *nn__cudnn_describe_tensor(char *buf, size_t cap, const char *name,
                                      const struct nn__cudnn_tensor *t)
{
    struct nn__text o = nn__text_start(buf, cap);
    put_tensor(&o, name, t);
    return buf;
}

/* An enumerator's name without its common prefix, or the number. */
static void put_enum(struct nn__text *o, const char *name, const char *prefix, int64_t v)
{
    size_t n = strlen(prefix);
    if (name && !strncmp(name, prefix, n))
        nn__text_add(o, "%s", name + n);
    else if (name)
        nn__text_add(o, "%s", name);
    else
        nn__text_add(o, "%lld", (long long)v);
}

const char *nn__cudnn_describe_choice(char *buf, size_t cap, const struct nn__engine_choice *c)
{
    struct nn__text o = nn__text_start(buf, cap);
    nn__text_add(&o, "engine=%lld knobs=[", (long long)c->engine);
    for (int i = 0; i < c->knob_count && i < NN__ENGINE_KNOBS_MAX; i++) {
        if (i) nn__text_add(&o, ",");
        int64_t t = c->knobs[i].type;
        put_enum(&o, nn__cudnn_BackendKnobType_name((int)t), "CUDNN_KNOB_TYPE_", t);
        nn__text_add(&o, "=%lld", (long long)c->knobs[i].value);
    }
    nn__text_add(&o, "]");
    return buf;
}

const char *nn__cudnn_describe_notes(char *buf, size_t cap, const int64_t *notes, int n)
{
    struct nn__text o = nn__text_start(buf, cap);
    if (n <= 0) nn__text_add(&o, "none");
    for (int i = 0; i < n; i++) {
        if (i) nn__text_add(&o, "|");
        put_enum(&o, nn__cudnn_BackendNumericalNote_name((int)notes[i]), "CUDNN_NUMERICAL_NOTE_",
                 notes[i]);
    }
    return buf;
}

/* ---------------------------------------------------------------------------------------------
 * Read back
 */

#define GET(ctx, d, attr, type, req, count, ptr)                                                   \
    nn__cudnn_BackendGetAttribute((ctx), (d), (attr), (type), (int64_t)(req), (count), (ptr))

nn_status nn__cudnn_read_tensor(struct nn_ctx *ctx, cudnnBackendDescriptor_t d,
                                struct nn__cudnn_tensor *out, int64_t *uid, int *is_virtual)
{
    struct nn__cudnn_tensor t = {0};
    cudnnDataType_t dt;
    int64_t n, id;
    bool virt;
    NN__TRY(GET(ctx, d, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &n, &dt));
    NN__TRY(GET(ctx, d, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, NN_MAX_RANK, &n, t.dims));
    if (n < 0 || n > NN_MAX_RANK)
        return NN__FAIL(ctx, NN_E_OVERFLOW, "read_tensor: rank %lld above %d", (long long)n,
                        NN_MAX_RANK);
    t.rank = (int)n;
    NN__TRY(GET(ctx, d, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, NN_MAX_RANK, &n, t.strides));
    /* CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT is write-only (getting it is NOT_SUPPORTED): left 0. */
    NN__TRY(GET(ctx, d, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &n, &id));
    NN__TRY(GET(ctx, d, CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, 1, &n, &virt));
    t.dtype = nn__cudnn_nn_dtype(dt);
    *out = t;
    if (uid) *uid = id;
    if (is_virtual) *is_virtual = virt;
    return NN_OK;
}

nn_status nn__cudnn_read_engine(struct nn_ctx *ctx, cudnnBackendDescriptor_t engine,
                                struct nn__cudnn_engine_info *out)
{
    memset(out, 0, sizeof *out);
    int64_t n;
    cudnnBackendNumericalNote_t notes[NN__CUDNN_NOTES_MAX];
    cudnnBackendBehaviorNote_t behavior[NN__CUDNN_NOTES_MAX];
    NN__TRY(GET(ctx, engine, CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64, 1, &n,
                &out->choice.engine));
    NN__TRY(GET(ctx, engine, CUDNN_ATTR_ENGINE_NUMERICAL_NOTE, CUDNN_TYPE_NUMERICAL_NOTE,
                NN__CUDNN_NOTES_MAX, &n, notes));
    out->n_notes = n < NN__CUDNN_NOTES_MAX ? (int)n : NN__CUDNN_NOTES_MAX;
    for (int i = 0; i < out->n_notes; i++)
        out->notes[i] = notes[i];
    NN__TRY(GET(ctx, engine, CUDNN_ATTR_ENGINE_BEHAVIOR_NOTE, CUDNN_TYPE_BEHAVIOR_NOTE,
                NN__CUDNN_NOTES_MAX, &n, behavior));
    out->n_behavior = n < NN__CUDNN_NOTES_MAX ? (int)n : NN__CUDNN_NOTES_MAX;
    for (int i = 0; i < out->n_behavior; i++)
        out->behavior[i] = behavior[i];
    return NN_OK;
}

/* Knob choices are read into descriptors made beforehand, as many as there are knob types. */
#define KNOB_SLOTS                                                                                 \
    (CUDNN_KNOB_TYPE_COUNTS < NN__ENGINE_KNOBS_MAX ? CUDNN_KNOB_TYPE_COUNTS : NN__ENGINE_KNOBS_MAX)

static nn_status read_knobs(struct nn_ctx *ctx, cudnnBackendDescriptor_t engcfg,
                            struct nn__engine_choice *c)
{
    cudnnBackendDescriptor_t k[KNOB_SLOTS];
    int made = 0;
    int64_t n = 0;
    nn_status st = NN_OK;
    while (st == NN_OK && made < KNOB_SLOTS) {
        st = nn__cudnn_BackendCreateDescriptor(ctx, CUDNN_BACKEND_KNOB_CHOICE_DESCRIPTOR, &k[made]);
        if (st == NN_OK) made++;
    }
    if (st == NN_OK)
        st = GET(ctx, engcfg, CUDNN_ATTR_ENGINECFG_KNOB_CHOICES, CUDNN_TYPE_BACKEND_DESCRIPTOR,
                 KNOB_SLOTS, &n, k);
    if (st == NN_OK && (n < 0 || n > KNOB_SLOTS))
        st = NN__FAIL(ctx, NN_E_OVERFLOW, "read_engcfg: %lld knob choices, at most %d are kept",
                      (long long)n, KNOB_SLOTS);
    c->knob_count = 0;
    for (int i = 0; st == NN_OK && i < n; i++) {
        cudnnBackendKnobType_t type;
        int64_t cnt;
        st = GET(ctx, k[i], CUDNN_ATTR_KNOB_CHOICE_KNOB_TYPE, CUDNN_TYPE_KNOB_TYPE, 1, &cnt, &type);
        if (st == NN_OK)
            st = GET(ctx, k[i], CUDNN_ATTR_KNOB_CHOICE_KNOB_VALUE, CUDNN_TYPE_INT64, 1, &cnt,
                     &c->knobs[i].value);
        if (st == NN_OK) {
            c->knobs[i].type = type;
            c->knob_count = i + 1;
        }
    }
    for (int i = 0; i < made; i++)
        nn__cudnn_BackendDestroyDescriptor(NULL, k[i]);
    return st;
}

nn_status nn__cudnn_read_engcfg(struct nn_ctx *ctx, cudnnBackendDescriptor_t engcfg,
                                struct nn__cudnn_engine_info *out)
{
    cudnnBackendDescriptor_t engine;
    int64_t n;
    NN__TRY(nn__cudnn_BackendCreateDescriptor(ctx, CUDNN_BACKEND_ENGINE_DESCRIPTOR, &engine));
    nn_status st = GET(ctx, engcfg, CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1,
                       &n, &engine);
    if (st == NN_OK) st = nn__cudnn_read_engine(ctx, engine, out);
    if (st == NN_OK) st = read_knobs(ctx, engcfg, &out->choice);
    nn__cudnn_BackendDestroyDescriptor(NULL, engine);
    return st;
}

nn_status nn__cudnn_read_plan(struct nn_ctx *ctx, cudnnBackendDescriptor_t plan,
                              struct nn__cudnn_plan_info *out)
{
    cudnnBackendDescriptor_t cfg;
    int64_t n;
    NN__TRY(GET(ctx, plan, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1, &n,
                &out->workspace));
    NN__TRY(nn__cudnn_BackendCreateDescriptor(ctx, CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, &cfg));
    nn_status st = GET(ctx, plan, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG,
                       CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &n, &cfg);
    if (st == NN_OK) st = nn__cudnn_read_engcfg(ctx, cfg, &out->engine);
    nn__cudnn_BackendDestroyDescriptor(NULL, cfg);
    return st;
}

nn_status nn__cudnn_describe_backend(struct nn_ctx *ctx, cudnnBackendDescriptorType_t type,
                                     cudnnBackendDescriptor_t d, char *buf, size_t cap)
{
    struct nn__text o = nn__text_start(buf, cap);
    put_enum(&o, nn__cudnn_BackendDescriptorType_name((int)type), "CUDNN_BACKEND_", type);
    nn__text_add(&o, " ");
    nn_status st = NN_OK;
    char tmp[NN__CUDNN_DESCRIBE_MAX];
    switch (type) {
    case CUDNN_BACKEND_TENSOR_DESCRIPTOR: {
        struct nn__cudnn_tensor t;
        int64_t uid;
        int virt;
        st = nn__cudnn_read_tensor(ctx, d, &t, &uid, &virt);
        if (st == NN_OK)
            nn__text_add(&o, "uid=%lld%s %s", (long long)uid, virt ? " virtual" : "",
                         nn__cudnn_describe_tensor(tmp, sizeof tmp, NULL, &t));
        break;
    }
    case CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR: {
        int64_t n, engines = 0;
        st = GET(ctx, d, CUDNN_ATTR_OPERATIONGRAPH_ENGINE_GLOBAL_COUNT, CUDNN_TYPE_INT64, 1, &n,
                 &engines);
        if (st == NN_OK) nn__text_add(&o, "engines=%lld", (long long)engines);
        break;
    }
    case CUDNN_BACKEND_ENGINECFG_DESCRIPTOR:
    case CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR: {
        struct nn__cudnn_plan_info p = {0};
        if (type == CUDNN_BACKEND_ENGINECFG_DESCRIPTOR) {
            p.workspace = -1;
            st = nn__cudnn_read_engcfg(ctx, d, &p.engine);
        } else {
            st = nn__cudnn_read_plan(ctx, d, &p);
        }
        if (st != NN_OK) break;
        nn__text_add(&o, "%s", nn__cudnn_describe_choice(tmp, sizeof tmp, &p.engine.choice));
        nn__text_add(&o, " notes=%s",
                     nn__cudnn_describe_notes(tmp, sizeof tmp, p.engine.notes, p.engine.n_notes));
        if (p.workspace >= 0) nn__text_add(&o, " workspace=%lld", (long long)p.workspace);
        break;
    }
    default: nn__text_add(&o, "(no read-back for this type)"); break;
    }
    if (st != NN_OK) nn__text_add(&o, "(read-back failed: %s)", nn_status_name(st));
    return st;
}

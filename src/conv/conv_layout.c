/* Convolution layouts: NCHW packed or channels-last packed (conv_internal.h). Channels-last is
 * what PyTorch's channels_last / channels_last_3d tensors are, and what cuDNN's tensor-core
 * engines prefer for f16, bf16 and TF32. */
#include <stdio.h>

#include "conv/conv_internal.h"
#include "core/error.h"

/* t's strides equal want in every dim larger than 1 (a dim of 1 is never stepped). */
static int strides_match(const nn_tensor *t, const int64_t *want)
{
    for (int i = 0; i < t->rank; i++)
        if (t->dims[i] > 1 && t->strides[i] != want[i]) return 0;
    return 1;
}

int nn__conv_is_channels_last(const nn_tensor *t)
{
    if (t->rank < 3 || t->rank > NN_MAX_RANK) return 0;
    int64_t want[NN_MAX_RANK];
    nn__conv_layout_strides(t->rank, t->dims, 1, want);
    return strides_match(t, want);
}

nn_status nn__conv_check_layout(struct nn_ctx *ctx, const char *op, const nn_tensor *t,
                                const char *name)
{
    if (nn_tensor_is_contiguous(t) || nn__conv_is_channels_last(t)) return NN_OK;
    char got[160];
    size_t n = 0;
    got[0] = 0;
    for (int i = 0; i < t->rank && n < sizeof got; i++)
        n += (size_t)snprintf(got + n, sizeof got - n, "%s%lld", i ? "," : "",
                              (long long)t->strides[i]);
    return NN__FAIL(ctx, NN_E_UNSUPPORTED,
                    "%s: %s must be fully packed row-major in NCHW order (NCW / NCHW / NCDHW, "
                    "KCRS for filters) or channels-last (NWC / NHWC / NDHWC, KRSC for filters: "
                    "channel stride 1); got strides (%s); other strides are not supported",
                    op, name, got);
}

int nn__conv_prefers_channels_last(const struct nn__conv_layout_arg *a, int n)
{
    for (int i = 0; i < n; i++)
        if (a[i].in && !nn_tensor_is_contiguous(a[i].in)) return 1;
    return 0;
}

void nn__conv_describe_layouts(struct nn__conv_problem *p, struct nn__conv_layout_arg *a, int n)
{
    int prefer_cl = nn__conv_prefers_channels_last(a, n);
    p->roles = p->nhwc = 0;
    for (int i = 0; i < n; i++) {
        if (!a[i].in) continue;
        const nn_tensor *t = a[i].in;
        /* Every tensor passed the layout check: not NCHW packed means channels-last. */
        int cl = !nn_tensor_is_contiguous(t) || (prefer_cl && nn__conv_is_channels_last(t));
        *a[i].out = *t;
        nn__conv_layout_strides(t->rank, t->dims, cl, a[i].out->strides);
        p->roles |= a[i].role;
        if (cl) p->nhwc |= a[i].role;
    }
}

#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/env.h"
#include "core/error.h"
#include "core/settings.h"

static void set_defaults(nn_settings *s)
{
    memset(s, 0, sizeof *s);
    s->backend = NN_BACKEND_AUTO;
    s->device = 0;
    s->math_mode = NN_MATH_STRICT_FP32;
    s->tuning = NN_TUNING_HEURISTIC;
    s->autotune_candidates = 16;
    s->plan_cache_capacity = 256;
    s->background_builds = 1;
    s->prebuild_plans = 1;
}

#define NN__N(a) (sizeof(a) / sizeof((a)[0]))

/* Apply every variable; remember the first failure (its status and message) but keep going, so
 * that one bad variable does not hide the others' values. */
static nn_status apply_env(const char *fn, nn_settings *s)
{
    static const struct nn__env_word backends[] = {
        {"auto", NN_BACKEND_AUTO}, {"ref", NN_BACKEND_REF}, {"cudnn", NN_BACKEND_CUDNN}};
    static const struct nn__env_word maths[] = {{"strict", NN_MATH_STRICT_FP32},
                                                {"tf32", NN_MATH_TF32}};
    static const struct nn__env_word tunings[] = {{"heuristic", NN_TUNING_HEURISTIC},
                                                  {"autotune", NN_TUNING_AUTOTUNE}};
    static const struct nn__env_word bools[] = {{"0", 0}, {"1", 1}};
    static const struct nn__env_word graphs[] = {
        {"auto", NN_GRAPHS_AUTO}, {"0", NN_GRAPHS_OFF}, {"1", NN_GRAPHS_ON}};
    static const struct nn__env_word targets[] = {{"checked", NN_TARGETS_CHECKED},
                                                  {"device", NN_TARGETS_ON_DEVICE}};
    nn_status first = NN_OK, st;
    nn_error_info kept;
    int v;

#define NN__KEEP(expr)                                                                             \
    if ((st = (expr)) != NN_OK && first == NN_OK) first = st, kept = *nn_last_error()
    v = (int)s->backend;
    NN__KEEP(
        nn__env_word(fn, "NNPRIM_BACKEND", backends, NN__N(backends), "auto, ref or cudnn", &v));
    s->backend = (nn_backend)v;
    NN__KEEP(nn__env_int(fn, "NNPRIM_DEVICE", 0, INT_MAX, &s->device));
    v = (int)s->math_mode;
    NN__KEEP(nn__env_word(fn, "NNPRIM_MATH", maths, NN__N(maths), "strict or tf32", &v));
    s->math_mode = (nn_math_mode)v;
    NN__KEEP(
        nn__env_word(fn, "NNPRIM_DETERMINISTIC", bools, NN__N(bools), "0 or 1", &s->deterministic));
    NN__KEEP(nn__env_bytes(fn, "NNPRIM_WORKSPACE_CAP", &s->workspace_cap));
    v = (int)s->tuning;
    NN__KEEP(
        nn__env_word(fn, "NNPRIM_TUNING", tunings, NN__N(tunings), "heuristic or autotune", &v));
    s->tuning = (nn_tuning_mode)v;
    NN__KEEP(nn__env_int(fn, "NNPRIM_AUTOTUNE_CANDIDATES", 1, 1000, &s->autotune_candidates));
    NN__KEEP(nn__env_int(fn, "NNPRIM_PLAN_CACHE_CAPACITY", 1, 1 << 20, &s->plan_cache_capacity));
    NN__KEEP(nn__env_int(fn, "NNPRIM_VERBOSE", 0, 2, &s->verbose));
    NN__KEEP(nn__env_word(fn, "NNPRIM_BACKGROUND_BUILDS", bools, NN__N(bools), "0 or 1",
                          &s->background_builds));
    NN__KEEP(nn__env_word(fn, "NNPRIM_PREBUILD_PLANS", bools, NN__N(bools), "0 or 1",
                          &s->prebuild_plans));
    v = (int)s->rnn_graphs;
    NN__KEEP(nn__env_word(fn, "NNPRIM_RNN_GRAPHS", graphs, NN__N(graphs), "auto, 0 or 1", &v));
    s->rnn_graphs = (nn_graphs_mode)v;
    v = (int)s->linear_graphs;
    NN__KEEP(nn__env_word(fn, "NNPRIM_LINEAR_GRAPHS", graphs, NN__N(graphs), "auto, 0 or 1", &v));
    s->linear_graphs = (nn_graphs_mode)v;
    v = (int)s->xent_targets;
    NN__KEEP(
        nn__env_word(fn, "NNPRIM_XENT_TARGETS", targets, NN__N(targets), "checked or device", &v));
    s->xent_targets = (nn_targets_mode)v;
#undef NN__KEEP
    const char *file = getenv("NNPRIM_PLAN_CACHE");
    if (file) s->plan_cache_file = file;
    /* a later bad variable recorded its own failure over the first one's */
    return first == NN_OK ? NN_OK : nn__error_put(NULL, &kept);
}

nn_status nn_settings_defaults(nn_settings *s)
{
    if (!s) return NN__FAIL(NULL, NN_E_INVALID_ARG, "nn_settings_defaults: s must not be NULL");
    set_defaults(s);
    return NN_OK;
}

nn_status nn_settings_from_env(nn_settings *s)
{
    if (!s) return NN__FAIL(NULL, NN_E_INVALID_ARG, "nn_settings_from_env: s must not be NULL");
    set_defaults(s);
    return apply_env("nn_settings_from_env", s);
}

nn_status nn__settings_check(const nn_settings *s)
{
    if (s->backend != NN_BACKEND_AUTO && s->backend != NN_BACKEND_REF &&
        s->backend != NN_BACKEND_CUDNN)
        return NN__FAIL(
            NULL, NN_E_INVALID_ARG,
            "nn_ctx_create: settings.backend must be NN_BACKEND_AUTO, _REF or _CUDNN, got %d",
            (int)s->backend);
    if (s->device < 0)
        return NN__FAIL(NULL, NN_E_INVALID_ARG,
                        "nn_ctx_create: settings.device must be >= 0, got %d", s->device);
    if (s->math_mode != NN_MATH_STRICT_FP32 && s->math_mode != NN_MATH_TF32)
        return NN__FAIL(
            NULL, NN_E_INVALID_ARG,
            "nn_ctx_create: settings.math_mode must be NN_MATH_STRICT_FP32 or NN_MATH_TF32, got %d",
            (int)s->math_mode);
    if (s->tuning != NN_TUNING_HEURISTIC && s->tuning != NN_TUNING_AUTOTUNE)
        return NN__FAIL(NULL, NN_E_INVALID_ARG,
                        "nn_ctx_create: settings.tuning must be NN_TUNING_HEURISTIC or "
                        "NN_TUNING_AUTOTUNE, got %d",
                        (int)s->tuning);
    if (s->autotune_candidates < 1)
        return NN__FAIL(NULL, NN_E_INVALID_ARG,
                        "nn_ctx_create: settings.autotune_candidates must be >= 1, got %d",
                        s->autotune_candidates);
    if (s->plan_cache_capacity < 1)
        return NN__FAIL(NULL, NN_E_INVALID_ARG,
                        "nn_ctx_create: settings.plan_cache_capacity must be >= 1, got %d",
                        s->plan_cache_capacity);
    if (s->verbose < 0 || s->verbose > 2)
        return NN__FAIL(NULL, NN_E_INVALID_ARG,
                        "nn_ctx_create: settings.verbose must be 0, 1 or 2, got %d", s->verbose);
    if ((unsigned)s->rnn_graphs > NN_GRAPHS_ON)
        return NN__FAIL(NULL, NN_E_INVALID_ARG,
                        "nn_ctx_create: settings.rnn_graphs must be NN_GRAPHS_AUTO, _OFF or _ON, "
                        "got %d",
                        (int)s->rnn_graphs);
    if ((unsigned)s->linear_graphs > NN_GRAPHS_ON)
        return NN__FAIL(NULL, NN_E_INVALID_ARG,
                        "nn_ctx_create: settings.linear_graphs must be NN_GRAPHS_AUTO, _OFF or "
                        "_ON, got %d",
                        (int)s->linear_graphs);
    if ((unsigned)s->xent_targets > NN_TARGETS_ON_DEVICE)
        return NN__FAIL(NULL, NN_E_INVALID_ARG,
                        "nn_ctx_create: settings.xent_targets must be NN_TARGETS_CHECKED or "
                        "NN_TARGETS_ON_DEVICE, got %d",
                        (int)s->xent_targets);
    NN__TRY(NN__CHECK_RESERVED(NULL, "nn_ctx_create", "settings.reserved", s->reserved));
    return NN_OK;
}

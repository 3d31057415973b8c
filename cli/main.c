/* nnprim: the command-line tool. Each subcommand is one function in the table below. */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "nn_config.h"
#include "nnprim/nnprim.h"

static const char *backend_name(nn_backend b)
{
    return b == NN_BACKEND_CUDNN ? "cudnn" : b == NN_BACKEND_REF ? "ref" : "auto";
}

static void print_devices(void)
{
    int n = 0;
    nn_device_count(&n);
    printf("devices:        %d\n", n);
    for (int i = 0; i < n; i++) {
        nn_device_info d;
        if (nn_device_get_info(i, &d) == NN_OK)
            printf("  device %d:     %s, compute capability %d.%d, %d SMs, %.1f GiB\n", i, d.name,
                   d.cc_major, d.cc_minor, d.sm_count, (double)d.total_memory / (1 << 30));
    }
}

/* One line per library loaded at run time: version and path, or why it is not usable. */
static void print_runtime_libraries(void)
{
    for (int i = 0; i < NN_RUNTIME_LIBRARY_COUNT; i++) {
        nn_runtime_library l;
        if (nn_runtime_library_info(i, &l) != NN_OK) continue;
        char label[32];
        snprintf(label, sizeof label, "%s runtime:", l.name);
        if (l.usable)
            printf("%-15s %s (%s, needs %s or newer) from %s\n", label, l.version_text, l.soname,
                   l.version_needed_text, l.path);
        else
            printf("%-15s none: %s\n", label, l.problem);
    }
}

static int cmd_info(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    unsigned f = nn_build_features();
    printf("nnprim %s\n", nn_version());
    printf("build features: cuda=%s cudnn=%s jemalloc=%s\n", f & NN_FEATURE_CUDA ? "yes" : "no",
           f & NN_FEATURE_CUDNN ? "yes" : "no", f & NN_FEATURE_JEMALLOC ? "yes" : "no");
    print_runtime_libraries();
    print_devices();

    nn_settings s;
    nn_status st = nn_default_settings(&s);
    if (st != NN_OK) {
        fprintf(stderr, "nnprim: %s\n", nn_last_error()->message);
        return 1;
    }
    nn_ctx *ctx;
    st = nn_ctx_create(&ctx, &s);
    if (st != NN_OK) {
        fprintf(stderr, "nnprim: cannot create a context: %s (%s)\n", nn_last_error()->message,
                nn_status_name(st));
        return 1;
    }
    nn_settings r;
    nn_ctx_get_settings(ctx, &r);
    printf("backend:        %s (asked for %s)\n", backend_name(nn_ctx_backend(ctx)),
           backend_name(s.backend));
    printf("settings:       math=%s deterministic=%d workspace_cap=%zu tuning=%s plan_cache=%s "
           "verbose=%d\n",
           r.math_mode == NN_MATH_TF32 ? "tf32" : "strict", r.deterministic, r.workspace_cap,
           r.tuning == NN_TUNING_AUTOTUNE ? "autotune" : "heuristic",
           r.plan_cache_file ? r.plan_cache_file : "none", r.verbose);
    nn_ctx_destroy(ctx);
    return 0;
}

#if NN_CLI_BENCH
static const struct command_area {
    const char *name;
    int (*run)(int argc, char **argv);
} bench_areas[] = {
    {"conv", nn_cli_bench_conv}, {"linear", nn_cli_bench_linear}, {"mem", nn_cli_bench_mem},
    {"pool", nn_cli_bench_pool}, {"rnn", nn_cli_bench_rnn},       {"models", nn_cli_bench_models},
};

static int cmd_bench(int argc, char **argv)
{
    size_t n = sizeof bench_areas / sizeof bench_areas[0];
    if (argc >= 2)
        for (size_t i = 0; i < n; i++)
            if (!strcmp(argv[1], bench_areas[i].name))
                return bench_areas[i].run(argc - 1, argv + 1);
    fprintf(stderr, "usage: nnprim bench <area> [options]; areas:");
    for (size_t i = 0; i < n; i++)
        fprintf(stderr, " %s", bench_areas[i].name);
    fprintf(stderr, "\n(\"nnprim bench <area> --help\" lists an area's options)\n");
    return 2;
}
#endif

struct command {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *help;
};

static const struct command commands[] = {
    {"info", cmd_info, "build features, devices, cuDNN version and the backend chosen"},
#if NN_CLI_BENCH
    {"bench", cmd_bench,
     "time nnprim against raw cuDNN and CUDA (areas: conv, linear, mem, pool, rnn)"},
#endif
    {"check", nn_cli_check,
     "run the correctness harness (GPU against reference); --help for cases"},
    {"tune", nn_cli_tune, "autotune convolution shapes into a plan cache file"},
};

static int usage(FILE *to)
{
    fprintf(to, "usage: nnprim <command> [args]\n\ncommands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(to, "  %-8s %s\n", commands[i].name, commands[i].help);
    return to == stdout ? 0 : 2;
}

int main(int argc, char **argv)
{
    if (argc < 2) return usage(stderr);
    if (!strcmp(argv[1], "help") || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))
        return usage(stdout);
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (!strcmp(argv[1], commands[i].name)) return commands[i].run(argc - 1, argv + 1);
    fprintf(stderr, "nnprim: unknown command '%s'\n", argv[1]);
    return usage(stderr);
}

/* nnprim: the command-line tool. Each subcommand is one function in the table below. */
#include <stdio.h>
#include <string.h>

#include "cli/args.h"
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
    static const struct nn_cli_cmd cmd = {
        "nnprim info", NULL,
        "Prints the version, the build features, the cuDNN runtime, the CUDA devices and the\n"
        "backend and settings a default context gets (NNPRIM_* variables applied).\n",
        NULL, 0};
    int first, rc = nn_cli_parse(&cmd, argc, argv, &first);
    if (rc != NN_CLI_RUN) return rc;
    unsigned f = nn_build_features();
    printf("nnprim %s\n", nn_version());
    printf("build features: cuda=%s cudnn=%s jemalloc=%s\n", f & NN_FEATURE_CUDA ? "yes" : "no",
           f & NN_FEATURE_CUDNN ? "yes" : "no", f & NN_FEATURE_JEMALLOC ? "yes" : "no");
    print_runtime_libraries();
    print_devices();

    nn_settings s;
    nn_status st = nn_settings_from_env(&s);
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
    {"conv", nn_cli_bench_conv},
    {"linear", nn_cli_bench_linear},
    {"mem", nn_cli_bench_mem},
    {"pool", nn_cli_bench_pool},
    {"rnn", nn_cli_bench_rnn},
    {"softmax", nn_cli_bench_softmax},
    {"layernorm", nn_cli_bench_layernorm},
    {"models", nn_cli_bench_models},
};

static void bench_usage(FILE *to)
{
    fprintf(to, "usage: nnprim bench <area> [options]\n"
                "       nnprim bench 'nnprim_verbose,...' (a whole verbose line: its op's area, "
                "that one call)\n\nareas:");
    for (size_t i = 0; i < sizeof bench_areas / sizeof bench_areas[0]; i++)
        fprintf(to, " %s", bench_areas[i].name);
    fprintf(to, "\n\"nnprim bench <area> --help\" lists an area's options.\n");
}

static int cmd_bench(int argc, char **argv)
{
    size_t n = sizeof bench_areas / sizeof bench_areas[0];
    if (argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
        bench_usage(stdout);
        return 0;
    }
    if (argc >= 2 && nn_cli_verbose_family(argv[1])) {
        /* A pasted verbose line (split by the shell or not) and options: its area benchmarks
         * that call, the line's words being the area's case operands. */
        const char *area = nn_cli_verbose_family(argv[1]);
        for (size_t i = 0; i < n; i++)
            if (!strcmp(area, bench_areas[i].name)) {
                argv[0] = (char *)bench_areas[i].name;
                return bench_areas[i].run(argc, argv);
            }
        fprintf(stderr, "nnprim bench: no benchmark area for the op of this line (%s)\n", area);
        return 2;
    }
    if (argc >= 2)
        for (size_t i = 0; i < n; i++)
            if (!strcmp(argv[1], bench_areas[i].name))
                return bench_areas[i].run(argc - 1, argv + 1);
    if (argc >= 2) fprintf(stderr, "nnprim bench: unknown area '%s'\n", argv[1]);
    bench_usage(stderr);
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
     "time nnprim against raw cuDNN and CUDA (areas: conv, layernorm, linear, mem, pool, rnn, "
     "softmax)"},
#endif
    {"check", nn_cli_check,
     "run the correctness harness (GPU against reference); --help for cases"},
    {"tune", nn_cli_tune, "autotune convolution shapes into a plan cache file"},
};

static int usage(FILE *to)
{
    fprintf(to, "usage: nnprim <command> [args]\n       nnprim --version | --help\n\ncommands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(to, "  %-8s %s\n", commands[i].name, commands[i].help);
    fprintf(to, "\n\"nnprim <command> --help\" describes a command. Exit status: 0 done, 1 the "
                "work failed (a check disagreed, a call failed), 2 a usage error.\n");
    return to == stdout ? 0 : 2;
}

int main(int argc, char **argv)
{
    if (argc < 2) return usage(stderr);
    if (!strcmp(argv[1], "help") || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))
        return usage(stdout);
    if (!strcmp(argv[1], "--version") || !strcmp(argv[1], "-V")) {
        printf("nnprim %s\n", nn_version());
        return 0;
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (!strcmp(argv[1], commands[i].name)) return commands[i].run(argc - 1, argv + 1);
    fprintf(stderr, "nnprim: unknown %s '%s'\n", argv[1][0] == '-' ? "option" : "command", argv[1]);
    return usage(stderr);
}

/* The subcommands of the nnprim tool that live in their own files. Each is called with argv[0]
 * set to its own name ("pool" for "nnprim bench pool ...") and returns the process exit code. */
#ifndef NN_CLI_CLI_H
#define NN_CLI_CLI_H

struct nn_conv_case;

int nn_cli_check(int argc, char **argv);
int nn_cli_check_rnn(int argc, char **argv);
int nn_cli_tune(int argc, char **argv);
int nn_cli_bench_conv(int argc, char **argv);
int nn_cli_bench_linear(int argc, char **argv);
int nn_cli_bench_mem(int argc, char **argv);
int nn_cli_bench_pool(int argc, char **argv);
int nn_cli_bench_rnn(int argc, char **argv);
int nn_cli_bench_models(int argc, char **argv);
int nn_cli_bench_softmax(int argc, char **argv);
int nn_cli_bench_layernorm(int argc, char **argv);

/* The multiply-adds of a convolution case's forward call (its backward calls do as many each);
 * -1 when the library refuses the case (nn_last_error() says why). In check.c. */
double nn_cli_conv_macs(const struct nn_conv_case *c);

#endif

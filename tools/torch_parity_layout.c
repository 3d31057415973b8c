/*
 * Prints the layout of every public struct that tools/torch_parity.py mirrors with ctypes
 * (sizeof, and offsetof of each field) and the enum constants it uses, one per line:
 *   size STRUCT BYTES
 *   field STRUCT FIELD OFFSET
 *   const NAME VALUE
 * `torch_parity.py --self-test --layout <this program>` compares them with its own structs, so a
 * header change that the mirror misses fails the parity_layout test instead of corrupting the
 * GPU run's calls.
 */
#include <stddef.h>
#include <stdio.h>

#include <nnprim/nnprim.h>

#define SIZE(s)     printf("size %s %zu\n", #s, sizeof(s))
#define FIELD(s, f) printf("field %s %s %zu\n", #s, #f, offsetof(s, f))
#define CONST(c)    printf("const %s %lld\n", #c, (long long)(c))

int main(void)
{
    SIZE(nn_tensor);
    FIELD(nn_tensor, data);
    FIELD(nn_tensor, dtype);
    FIELD(nn_tensor, rank);
    FIELD(nn_tensor, dims);
    FIELD(nn_tensor, strides);
    FIELD(nn_tensor, space);
    FIELD(nn_tensor, device);
    FIELD(nn_tensor, flags);
    FIELD(nn_tensor, reserved);

    SIZE(nn_settings);
    FIELD(nn_settings, backend);
    FIELD(nn_settings, device);
    FIELD(nn_settings, stream);
    FIELD(nn_settings, math_mode);
    FIELD(nn_settings, deterministic);
    FIELD(nn_settings, workspace_cap);
    FIELD(nn_settings, tuning);
    FIELD(nn_settings, autotune_candidates);
    FIELD(nn_settings, plan_cache_file);
    FIELD(nn_settings, plan_cache_capacity);
    FIELD(nn_settings, verbose);
    FIELD(nn_settings, background_builds);
    FIELD(nn_settings, prebuild_plans);
    FIELD(nn_settings, rnn_graphs);
    FIELD(nn_settings, linear_graphs);
    FIELD(nn_settings, reserved);

    SIZE(nn_conv_params);
    FIELD(nn_conv_params, spatial_rank);
    FIELD(nn_conv_params, stride);
    FIELD(nn_conv_params, dilation);
    FIELD(nn_conv_params, pad_lo);
    FIELD(nn_conv_params, pad_hi);
    FIELD(nn_conv_params, groups);
    FIELD(nn_conv_params, mode);
    FIELD(nn_conv_params, activation);
    FIELD(nn_conv_params, flags);
    FIELD(nn_conv_params, reserved);

    SIZE(nn_pool_params);
    FIELD(nn_pool_params, spatial_rank);
    FIELD(nn_pool_params, mode);
    FIELD(nn_pool_params, window);
    FIELD(nn_pool_params, stride);
    FIELD(nn_pool_params, pad_lo);
    FIELD(nn_pool_params, pad_hi);
    FIELD(nn_pool_params, reserved);

    SIZE(nn_linear_params);
    FIELD(nn_linear_params, activation);
    FIELD(nn_linear_params, flags);
    FIELD(nn_linear_params, reserved);

    SIZE(nn_softmax_params);
    FIELD(nn_softmax_params, mode);
    FIELD(nn_softmax_params, flags);
    FIELD(nn_softmax_params, reserved);

    SIZE(nn_class_targets);
    FIELD(nn_class_targets, data);
    FIELD(nn_class_targets, type);
    FIELD(nn_class_targets, reserved);

    SIZE(nn_rnn_params);
    FIELD(nn_rnn_params, cell);
    FIELD(nn_rnn_params, input_size);
    FIELD(nn_rnn_params, hidden_size);
    FIELD(nn_rnn_params, proj_size);
    FIELD(nn_rnn_params, num_layers);
    FIELD(nn_rnn_params, bidirectional);
    FIELD(nn_rnn_params, bias_mode);
    FIELD(nn_rnn_params, input_mode);
    FIELD(nn_rnn_params, layout);
    FIELD(nn_rnn_params, dropout);
    FIELD(nn_rnn_params, dropout_seed);
    FIELD(nn_rnn_params, clip_enabled);
    FIELD(nn_rnn_params, clip_lo);
    FIELD(nn_rnn_params, clip_hi);
    FIELD(nn_rnn_params, flags);
    FIELD(nn_rnn_params, reserved);

    SIZE(nn_backward_options);
    FIELD(nn_backward_options, accumulate);
    FIELD(nn_backward_options, keep);
    FIELD(nn_backward_options, reserved);

    SIZE(nn_optim_params);
    FIELD(nn_optim_params, kind);
    FIELD(nn_optim_params, nesterov);
    FIELD(nn_optim_params, lr);
    FIELD(nn_optim_params, momentum);
    FIELD(nn_optim_params, dampening);
    FIELD(nn_optim_params, weight_decay);
    FIELD(nn_optim_params, beta1);
    FIELD(nn_optim_params, beta2);
    FIELD(nn_optim_params, eps);
    FIELD(nn_optim_params, max_grad_norm);
    FIELD(nn_optim_params, reserved);

    SIZE(nn_error_info);
    FIELD(nn_error_info, status);
    FIELD(nn_error_info, message);

    /* Enums are passed as c_int: each must have int's size. */
    SIZE(nn_dtype);
    SIZE(nn_backend);
    SIZE(nn_conv_mode);
    SIZE(nn_pool_mode);
    SIZE(nn_rnn_cell);
    SIZE(nn_rnn_weight_name);
    SIZE(nn_optim_kind);

    CONST(NN_MAX_RANK);
    CONST(NN_DTYPE_F32);
    CONST(NN_DTYPE_F64);
    CONST(NN_DTYPE_F16);
    CONST(NN_DTYPE_BF16);
    CONST(NN_MATH_STRICT_FP32);
    CONST(NN_MATH_TF32);
    CONST(NN_SPACE_HOST);
    CONST(NN_SPACE_DEVICE);
    CONST(NN_BACKEND_REF);
    CONST(NN_BACKEND_CUDNN);
    CONST(NN_OK);
    CONST(NN_E_DTYPE);
    CONST(NN_E_UNSUPPORTED);
    CONST(NN_CONV_CROSS_CORRELATION);
    CONST(NN_CONV_CONVOLUTION);
    CONST(NN_ACTIVATION_IDENTITY);
    CONST(NN_ACTIVATION_RELU);
    CONST(NN_CONV_ACCUMULATE_DX);
    CONST(NN_CONV_ACCUMULATE_DW);
    CONST(NN_CONV_ACCUMULATE_DB);
    CONST(NN_ACCUMULATE_DX);
    CONST(NN_ACCUMULATE_DW);
    CONST(NN_ACCUMULATE_DB);
    CONST(NN_POOL_MAX);
    CONST(NN_POOL_MEAN_INCLUDE_PAD);
    CONST(NN_POOL_MEAN_EXCLUDE_PAD);
    CONST(NN_LINEAR_ACCUMULATE_DX);
    CONST(NN_SOFTMAX_MODE_SOFTMAX);
    CONST(NN_SOFTMAX_MODE_LOG);
    CONST(NN_SOFTMAX_ACCUMULATE_DX);
    CONST(NN_INDEX_I32);
    CONST(NN_INDEX_I64);
    CONST(NN_RNN_RELU);
    CONST(NN_RNN_TANH);
    CONST(NN_RNN_LSTM);
    CONST(NN_RNN_GRU);
    CONST(NN_RNN_BIAS_NONE);
    CONST(NN_RNN_BIAS_INPUT);
    CONST(NN_RNN_BIAS_RECURRENT);
    CONST(NN_RNN_BIAS_DOUBLE);
    CONST(NN_RNN_SEQ_MAJOR);
    CONST(NN_RNN_BATCH_MAJOR);
    CONST(NN_RNN_WEIGHT_IH);
    CONST(NN_RNN_WEIGHT_HH);
    CONST(NN_RNN_BIAS_IH);
    CONST(NN_RNN_BIAS_HH);
    CONST(NN_RNN_WEIGHT_HR);
    CONST(NN_RNN_ACCUMULATE_DW);
    CONST(NN_OPTIM_SGD);
    CONST(NN_OPTIM_ADAM);
    CONST(NN_OPTIM_ADAMW);
    return 0;
}

/*
 * nnprim: the activations an op can fuse after its bias (conv.h's nn_conv_params.activation,
 * linear.h's nn_linear_params.activation).
 *
 * Math: IDENTITY leaves v as it is; RELU is max(v, 0). Backward through RELU masks the incoming
 * gradient where the forward's output y == 0 (the gradient at 0 is taken as 0, as PyTorch does).
 * A family that takes an activation says in its header which ones and where it applies them.
 */
#ifndef NNPRIM_ACTIVATION_H
#define NNPRIM_ACTIVATION_H

#ifdef __cplusplus
extern "C" {
#endif

/** An activation fused after the bias. */
typedef enum nn_activation {
    NN_ACTIVATION_IDENTITY = 0,
    NN_ACTIVATION_RELU = 1 /**< max(v, 0); its gradient is taken as 0 where y == 0 */
} nn_activation;

#ifdef __cplusplus
}
#endif

#endif /* NNPRIM_ACTIVATION_H */

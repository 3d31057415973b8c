/* The device side of the cross-entropy's one-hot mask from targets in device memory
 * (softmax_cudnn.c: inside a graph capture, or under NN_TARGETS_ON_DEVICE): mask[(i c + k) s + j]
 * = 1 where targets[i s + j] is k, else 0, over n x c x s elements in the dtype; a target outside
 * [0, c) puts NaN in every element of its (i, j), so that its loss and gradient show it (neither a
 * graph launch nor a call that leaves the targets on the device has a status to report it with). The parameter is struct nn__onehot of softmax_cudnn.c byte for byte. */
struct nn__onehot {
    unsigned long long mask, targets;
    long long n, c, s;
    int dtype; /* nn_dtype: 1 f32, 2 f64, 3 f16, 4 bf16 */
    int wide;  /* 1: int64 targets, 0: int32 */
};
static_assert(sizeof(nn__onehot) == 48, "the kernel's parameter is struct nn__onehot");

extern "C" __global__ void nn__softmax_onehot(nn__onehot a)
{
    long long total = a.n * a.c * a.s, step = (long long)gridDim.x * blockDim.x;
    for (long long e = (long long)blockIdx.x * blockDim.x + threadIdx.x; e < total; e += step) {
        long long j = e % a.s, k = (e / a.s) % a.c, i = e / (a.s * a.c), at = i * a.s + j;
        long long t = a.wide ? ((const long long *)a.targets)[at] : ((const int *)a.targets)[at];
        int bad = t < 0 || t >= a.c, one = t == k;
        switch (a.dtype) {
        case 1: ((float *)a.mask)[e] = bad ? __int_as_float(0x7fc00000) : one ? 1.0f : 0.0f; break;
        case 2:
            ((double *)a.mask)[e] = bad ? __longlong_as_double(0x7ff8000000000000ll) : one ? 1.0 : 0.0;
            break;
        case 3: ((unsigned short *)a.mask)[e] = bad ? 0x7e00 : one ? 0x3c00 : 0; break;
        case 4: ((unsigned short *)a.mask)[e] = bad ? 0x7fc0 : one ? 0x3f80 : 0; break;
        }
    }
}

/* The device side of src/core/dev_copy.c: one launch copies up to NN__COPIES_MAX buffers, device
 * to device. blockIdx.y picks the copy; the blocks along x stride over its bytes, 16 at a time
 * where both ends are 16-byte aligned, 4 where they are 4-byte aligned, else one. The parameter is
 * struct nn__copies (src/core/dev_copy.h) byte for byte. Built by nvcc into a fat binary that the
 * library embeds (nn_cuda_images, src/meson.build): no CUDA C++ runtime is linked. */
#define NN__COPIES_MAX 16

struct nn__copies {
    unsigned long long dst[NN__COPIES_MAX], src[NN__COPIES_MAX], bytes[NN__COPIES_MAX];
    unsigned n;
};
/* the C side's struct (src/core/dev_copy.h) checks the same size */
static_assert(sizeof(nn__copies) == 392, "the kernel's parameter is struct nn__copies of dev_copy.h");

template <typename T>
__device__ void copy_as(unsigned long long dst, unsigned long long src, unsigned long long bytes,
                        unsigned long long first, unsigned long long step)
{
    T *d = (T *)dst;
    const T *s = (const T *)src;
    unsigned long long n = bytes / sizeof(T);
    for (unsigned long long k = first; k < n; k += step) d[k] = s[k];
    char *dt = (char *)dst;
    const char *st = (const char *)src;
    for (unsigned long long k = n * sizeof(T) + first; k < bytes; k += step) dt[k] = st[k];
}

extern "C" __global__ void nn__dev_copies(nn__copies c)
{
    unsigned i = blockIdx.y;
    if (i >= c.n) return;
    unsigned long long first = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
    unsigned long long step = (unsigned long long)gridDim.x * blockDim.x;
    unsigned long long ends = c.dst[i] | c.src[i];
    if ((ends & 15) == 0)
        copy_as<uint4>(c.dst[i], c.src[i], c.bytes[i], first, step);
    else if ((ends & 3) == 0)
        copy_as<unsigned>(c.dst[i], c.src[i], c.bytes[i], first, step);
    else
        copy_as<char>(c.dst[i], c.src[i], c.bytes[i], first, step);
}

/* The device side of src/core/dev_fill.c: nn_tensor_fill_*() of a packed device tensor, element i
 * computed from i alone, with the same arithmetic as the host's draw (src/core/tensor.c): the
 * i-th value of the splitmix64 sequence from seed, then a + (b - a) * u for uniform and
 * a + (r mod span) for integers, in double rounded to nearest (the _rn intrinsics, so that nvcc
 * contracts nothing into a fused multiply-add the host does not do), stored in the dtype as
 * src/core/elem.c rounds. The parameter is struct nn__fill of dev_fill.h byte for byte. */
#include <stdint.h>

struct nn__fill {
    unsigned long long data;
    long long n;
    int dtype; /* nn_dtype: 1 f32, 2 f64, 3 f16, 4 bf16 */
    int kind;  /* 0 constant, 1 uniform, 2 integers */
    double a, b;
    unsigned long long seed;
};
static_assert(sizeof(nn__fill) == 48, "the kernel's parameter is struct nn__fill of dev_fill.h");

__device__ static unsigned long long mix(unsigned long long z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

__device__ static unsigned short to_f16(float f)
{
    unsigned x = __float_as_uint(f);
    unsigned short sign = (unsigned short)((x >> 16) & 0x8000u);
    unsigned exp = (x >> 23) & 0xffu, man = x & 0x7fffffu;
    if (exp == 0xffu) return (unsigned short)(sign | 0x7c00u | (man ? 0x200u : 0u));
    int e = (int)exp - 127 + 15;
    if (e >= 31) return (unsigned short)(sign | 0x7c00u);
    if (e <= 0) {
        if (e < -10) return sign;
        man |= 0x800000u;
        int shift = 14 - e;
        unsigned half = man >> shift, rem = man & ((1u << shift) - 1u), mid = 1u << (shift - 1);
        if (rem > mid || (rem == mid && (half & 1u))) half++;
        return (unsigned short)(sign | half);
    }
    unsigned half = ((unsigned)e << 10) | (man >> 13), rem = man & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (half & 1u))) half++;
    return (unsigned short)(sign | half);
}

__device__ static unsigned short to_bf16(float f)
{
    unsigned x = __float_as_uint(f);
    if ((x & 0x7fffffffu) > 0x7f800000u) return (unsigned short)((x >> 16) | 0x40u);
    x += 0x7fffu + ((x >> 16) & 1u);
    return (unsigned short)(x >> 16);
}

extern "C" __global__ void nn__dev_fill(nn__fill f)
{
    long long step = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < f.n; i += step) {
        double v = f.a;
        if (f.kind != 0) {
            unsigned long long r = mix(f.seed + (unsigned long long)(i + 1) * 0x9e3779b97f4a7c15ull);
            if (f.kind == 1) {
                double u = __dmul_rn((double)(r >> 11), 0x1p-53);
                v = __dadd_rn(f.a, __dmul_rn(__dsub_rn(f.b, f.a), u));
            } else {
                unsigned long long span = (unsigned long long)((long long)f.b - (long long)f.a) + 1u;
                v = __dadd_rn(f.a, (double)(r % span));
            }
        }
        switch (f.dtype) {
        case 1: ((float *)f.data)[i] = __double2float_rn(v); break;
        case 2: ((double *)f.data)[i] = v; break;
        case 3: ((unsigned short *)f.data)[i] = to_f16(__double2float_rn(v)); break;
        case 4: ((unsigned short *)f.data)[i] = to_bf16(__double2float_rn(v)); break;
        }
    }
}

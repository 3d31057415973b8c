#include <math.h>
#include <string.h>

#include "core/elem.h"

static uint32_t f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static float bits_f32(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

uint16_t nn__f32_to_f16(float f)
{
    uint32_t x = f32_bits(f);
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
    uint32_t exp = (x >> 23) & 0xffu;
    uint32_t man = x & 0x7fffffu;
    if (exp == 0xffu) return (uint16_t)(sign | 0x7c00u | (man ? 0x200u : 0u)); /* inf / nan */
    int e = (int)exp - 127 + 15;
    if (e >= 31) return (uint16_t)(sign | 0x7c00u); /* overflow to inf */
    if (e <= 0) {
        /* Subnormal half (or zero): shift the full mantissa into place, round to nearest even. */
        if (e < -10) return sign;
        man |= 0x800000u;
        int shift = 14 - e;
        uint32_t half = man >> shift;
        uint32_t rem = man & ((1u << shift) - 1u);
        uint32_t mid = 1u << (shift - 1);
        if (rem > mid || (rem == mid && (half & 1u))) half++;
        return (uint16_t)(sign | half);
    }
    uint32_t half = ((uint32_t)e << 10) | (man >> 13);
    uint32_t rem = man & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (half & 1u))) half++; /* may carry into inf: right */
    return (uint16_t)(sign | half);
}

float nn__f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t man = h & 0x3ffu;
    if (exp == 0x1fu) return bits_f32(sign | 0x7f800000u | (man << 13));
    if (exp == 0) {
        float v = ldexpf((float)man, -24);
        return sign ? -v : v;
    }
    return bits_f32(sign | ((exp - 15 + 127) << 23) | (man << 13));
}

uint16_t nn__f32_to_bf16(float f)
{
    uint32_t x = f32_bits(f);
    if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40u); /* quiet nan */
    x += 0x7fffu + ((x >> 16) & 1u);
    return (uint16_t)(x >> 16);
}

float nn__bf16_to_f32(uint16_t b)
{
    return bits_f32((uint32_t)b << 16);
}

double nn__load(const void *data, nn_dtype dtype, int64_t i)
{
    switch (dtype) {
    case NN_DTYPE_F32: return ((const float *)data)[i];
    case NN_DTYPE_F64: return ((const double *)data)[i];
    case NN_DTYPE_F16: return nn__f16_to_f32(((const uint16_t *)data)[i]);
    case NN_DTYPE_BF16: return nn__bf16_to_f32(((const uint16_t *)data)[i]);
    }
    return NAN;
}

void nn__store(void *data, nn_dtype dtype, int64_t i, double v)
{
    switch (dtype) {
    case NN_DTYPE_F32: ((float *)data)[i] = (float)v; break;
    case NN_DTYPE_F64: ((double *)data)[i] = v; break;
    case NN_DTYPE_F16: ((uint16_t *)data)[i] = nn__f32_to_f16((float)v); break;
    case NN_DTYPE_BF16: ((uint16_t *)data)[i] = nn__f32_to_bf16((float)v); break;
    }
}

size_t nn__elem_one(nn_dtype dtype, unsigned char *out)
{
    const float f = 1.0f;
    const double d = 1.0;
    const uint16_t half = 0x3c00, bhalf = 0x3f80;
    switch (dtype) {
    case NN_DTYPE_F64: memcpy(out, &d, sizeof d); return sizeof d;
    case NN_DTYPE_F16: memcpy(out, &half, sizeof half); return sizeof half;
    case NN_DTYPE_BF16: memcpy(out, &bhalf, sizeof bhalf); return sizeof bhalf;
    case NN_DTYPE_F32: break;
    }
    memcpy(out, &f, sizeof f);
    return sizeof f;
}

int64_t nn__offset_of(const nn_tensor *t, int64_t lin)
{
    int64_t off = 0;
    for (int d = t->rank - 1; d >= 0; d--) {
        off += (lin % t->dims[d]) * t->strides[d];
        lin /= t->dims[d];
    }
    return off;
}

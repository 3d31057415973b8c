/* Element access for every dtype as double, with f16 and bf16 conversions (round to nearest
 * even). The reference backend and the fill helpers use these; they are not for hot paths. */
#ifndef NN_CORE_ELEM_H
#define NN_CORE_ELEM_H

#include <stddef.h>
#include <stdint.h>

#include "nnprim/tensor.h"

uint16_t nn__f32_to_f16(float f);
float nn__f16_to_f32(uint16_t h);
uint16_t nn__f32_to_bf16(float f);
float nn__bf16_to_f32(uint16_t b);

/* The bytes of the value 1 in dtype (f16 and bf16 as their bit patterns) into out, which holds
 * at least 8 bytes; returns the element size. For the constant operands nnprim uploads (vectors
 * of ones), where a conversion per element would be waste. */
size_t nn__elem_one(nn_dtype dtype, unsigned char *out);

/* Read / write element i (an index in elements from data, strides already applied). */
double nn__load(const void *data, nn_dtype dtype, int64_t i);
void nn__store(void *data, nn_dtype dtype, int64_t i, double v);

/* Offset in elements of the element whose row-major linear index is lin. */
int64_t nn__offset_of(const nn_tensor *t, int64_t lin);

#endif

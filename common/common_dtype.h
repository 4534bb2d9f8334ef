/*  common_dtype - the element types of task tensors and scalars.

    Names on the wire and on disk: f16 bf16 f32 f64 i8 u8 i32 i64.
    Half types are stored as their IEEE/bfloat16 bit patterns (uint16_t);
    conversions here are exact round-to-nearest-even, so the CPU generator,
    the GPU generator and the comparator agree bit for bit.
*/
#ifndef COMMON_DTYPE_H
#define COMMON_DTYPE_H

#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>

typedef enum {
    DTYPE_INVALID = 0,
    DTYPE_F16, DTYPE_BF16, DTYPE_F32, DTYPE_F64,
    DTYPE_I8, DTYPE_U8, DTYPE_I32, DTYPE_I64
} common_dtype_t;

//  Parse a name ("f32"); DTYPE_INVALID when unknown.
common_dtype_t common_dtype_parse (const char *name);
//  Canonical name, "invalid" for DTYPE_INVALID.
const char *common_dtype_name (common_dtype_t dtype);
//  Bytes per element (0 for DTYPE_INVALID).
size_t common_dtype_size (common_dtype_t dtype);
//  True for f16, bf16, f32, f64.
bool common_dtype_is_float (common_dtype_t dtype);

//  Read element i of buf as a double (exact for every type but i64 > 2^53).
double common_dtype_get (common_dtype_t dtype, const void *buf, size_t i);
//  Write value to element i of buf, rounding to nearest-even for floats and
//  saturating for integers (NaN becomes 0 for integers).
void common_dtype_set (common_dtype_t dtype, void *buf, size_t i, double value);

//  A scalar's value as the bits a kernel receives, little-endian in the low
//  bytes of the dtype's size (value for floats, ivalue for integers).
uint64_t common_dtype_scalar_bits (common_dtype_t dtype, double value, int64_t ivalue);

uint16_t common_f32_to_f16 (float f);
float    common_f16_to_f32 (uint16_t h);
uint16_t common_f32_to_bf16 (float f);
float    common_bf16_to_f32 (uint16_t h);

#endif

/*  common_dtype - the element types of task tensors and scalars.

    Names, sizes and conversions between doubles and the stored bits. The
    half conversions are done on the bit patterns, not with compiler
    _Float16 support, so the result is the same on every host and matches
    the GPU's __float2half_rn / __float2bfloat16_rn (round to nearest even,
    subnormals kept, overflow to infinity, NaN stays a quiet NaN).

    A double goes to f16 or bf16 through float: double -> float (nearest
    even), then float -> half (nearest even). That double rounding can differ
    from a direct double -> half rounding in the last bit for values within
    one float ulp of a half-way point; the CPU and GPU generators both take
    this path, so they still agree bit for bit.
*/
#include "common_dtype.h"
#include <math.h>
#include <string.h>

//  Name and size of each dtype, indexed by common_dtype_t.
static const struct {
    const char *name;           //  wire and disk name
    size_t size;                //  bytes per element
} s_types [] = {
    [DTYPE_INVALID] = { "invalid", 0 },
    [DTYPE_F16]     = { "f16", 2 },
    [DTYPE_BF16]    = { "bf16", 2 },
    [DTYPE_F32]     = { "f32", 4 },
    [DTYPE_F64]     = { "f64", 8 },
    [DTYPE_I8]      = { "i8", 1 },
    [DTYPE_U8]      = { "u8", 1 },
    [DTYPE_I32]     = { "i32", 4 },
    [DTYPE_I64]     = { "i64", 8 },
};
#define DTYPE_COUNT (sizeof s_types / sizeof s_types [0])

common_dtype_t
common_dtype_parse (const char *name)
{
    if (!name)
        return DTYPE_INVALID;
    for (size_t i = 1; i < DTYPE_COUNT; i++)
        if (strcmp (name, s_types [i].name) == 0)
            return (common_dtype_t) i;
    return DTYPE_INVALID;
}

const char *
common_dtype_name (common_dtype_t dtype)
{
    if ((size_t) dtype >= DTYPE_COUNT)
        return "invalid";
    return s_types [dtype].name;
}

size_t
common_dtype_size (common_dtype_t dtype)
{
    if ((size_t) dtype >= DTYPE_COUNT)
        return 0;
    return s_types [dtype].size;
}

bool
common_dtype_is_float (common_dtype_t dtype)
{
    return dtype == DTYPE_F16 || dtype == DTYPE_BF16
        || dtype == DTYPE_F32 || dtype == DTYPE_F64;
}

static uint32_t
s_float_bits (float f)
{
    uint32_t x;
    memcpy (&x, &f, sizeof x);
    return x;
}

static float
s_bits_float (uint32_t x)
{
    float f;
    memcpy (&f, &x, sizeof f);
    return f;
}

//  Shift m right by s (1..31) rounding to nearest, ties to even.
static uint32_t
s_shift_rne (uint32_t m, unsigned s)
{
    uint32_t q = m >> s;
    uint32_t rem = m & ((1u << s) - 1);
    uint32_t half = 1u << (s - 1);
    if (rem > half || (rem == half && (q & 1)))
        q++;
    return q;
}

uint16_t
common_f32_to_f16 (float f)
{
    uint32_t x = s_float_bits (f);
    uint16_t sign = (uint16_t) ((x >> 16) & 0x8000);
    uint32_t exp = (x >> 23) & 0xFF;
    uint32_t mant = x & 0x7FFFFF;

    if (exp == 0xFF) {
        if (mant)           //  NaN: keep the top payload bits, force quiet
            return (uint16_t) (sign | 0x7E00 | (mant >> 13));
        return (uint16_t) (sign | 0x7C00);
    }
    //  Half exponent (bias 15) of a normal float (bias 127).
    int e = (int) exp - 127 + 15;
    if (e >= 31)
        return (uint16_t) (sign | 0x7C00);
    if (e >= 1) {
        //  Normal: a carry out of the mantissa bumps the exponent, and out
        //  of exponent 30 gives 0x7C00, infinity: both are the right answer.
        uint32_t h = ((uint32_t) e << 10) | (mant >> 13);
        uint32_t rem = mant & 0x1FFF;
        if (rem > 0x1000 || (rem == 0x1000 && (h & 1)))
            h++;
        return (uint16_t) (sign | h);
    }
    //  Subnormal half (or zero): value = m * 2^-24 with m = M * 2^(exp-126),
    //  M the float's 24-bit significand. Below shift 24 nothing survives:
    //  the value is under half the smallest subnormal. Float subnormals
    //  (exp 0) land there too.
    if (exp == 0)
        return sign;
    unsigned shift = (unsigned) (126 - (int) exp);
    if (shift > 24)
        return sign;
    uint32_t m = mant | 0x800000;
    return (uint16_t) (sign | s_shift_rne (m, shift));
}

float
common_f16_to_f32 (uint16_t h)
{
    uint32_t sign = (uint32_t) (h & 0x8000) << 16;
    uint32_t exp = (h >> 10) & 0x1F;
    uint32_t mant = h & 0x3FF;
    if (exp == 0) {
        //  Zero or subnormal: mant * 2^-24 is exact in float.
        float v = ldexpf ((float) mant, -24);
        return sign ? -v : v;
    }
    if (exp == 31)
        return s_bits_float (sign | 0x7F800000 | (mant << 13));
    return s_bits_float (sign | ((exp + 112) << 23) | (mant << 13));
}

uint16_t
common_f32_to_bf16 (float f)
{
    uint32_t x = s_float_bits (f);
    if ((x & 0x7F800000) == 0x7F800000 && (x & 0x7FFFFF))
        return (uint16_t) ((x >> 16) | 0x0040);     //  NaN: quiet, never rounds to inf
    //  Round to nearest even on the low 16 bits; a carry into the exponent
    //  (including up to infinity) is the correct result.
    uint32_t bias = 0x7FFF + ((x >> 16) & 1);
    return (uint16_t) ((x + bias) >> 16);
}

float
common_bf16_to_f32 (uint16_t h)
{
    return s_bits_float ((uint32_t) h << 16);
}

double
common_dtype_get (common_dtype_t dtype, const void *buf, size_t i)
{
    switch (dtype) {
        case DTYPE_F16: {
            uint16_t v;
            memcpy (&v, (const uint8_t *) buf + i * 2, 2);
            return common_f16_to_f32 (v);
        }
        case DTYPE_BF16: {
            uint16_t v;
            memcpy (&v, (const uint8_t *) buf + i * 2, 2);
            return common_bf16_to_f32 (v);
        }
        case DTYPE_F32: {
            float v;
            memcpy (&v, (const uint8_t *) buf + i * 4, 4);
            return v;
        }
        case DTYPE_F64: {
            double v;
            memcpy (&v, (const uint8_t *) buf + i * 8, 8);
            return v;
        }
        case DTYPE_I8:
            return ((const int8_t *) buf) [i];
        case DTYPE_U8:
            return ((const uint8_t *) buf) [i];
        case DTYPE_I32: {
            int32_t v;
            memcpy (&v, (const uint8_t *) buf + i * 4, 4);
            return v;
        }
        case DTYPE_I64: {
            int64_t v;
            memcpy (&v, (const uint8_t *) buf + i * 8, 8);
            return (double) v;
        }
        default:
            return NAN;
    }
}

//  Round to nearest even and clamp to [lo, hi]; NaN becomes 0. lo and hi
//  must be exact doubles (true for every type up to 32 bits).
static double
s_saturate (double value, double lo, double hi)
{
    if (isnan (value))
        return 0;
    value = nearbyint (value);
    if (value < lo)
        return lo;
    if (value > hi)
        return hi;
    return value;
}

void
common_dtype_set (common_dtype_t dtype, void *buf, size_t i, double value)
{
    switch (dtype) {
        case DTYPE_F16: {
            uint16_t v = common_f32_to_f16 ((float) value);
            memcpy ((uint8_t *) buf + i * 2, &v, 2);
            break;
        }
        case DTYPE_BF16: {
            uint16_t v = common_f32_to_bf16 ((float) value);
            memcpy ((uint8_t *) buf + i * 2, &v, 2);
            break;
        }
        case DTYPE_F32: {
            float v = (float) value;
            memcpy ((uint8_t *) buf + i * 4, &v, 4);
            break;
        }
        case DTYPE_F64:
            memcpy ((uint8_t *) buf + i * 8, &value, 8);
            break;
        case DTYPE_I8:
            ((int8_t *) buf) [i] = (int8_t) s_saturate (value, INT8_MIN, INT8_MAX);
            break;
        case DTYPE_U8:
            ((uint8_t *) buf) [i] = (uint8_t) s_saturate (value, 0, UINT8_MAX);
            break;
        case DTYPE_I32: {
            int32_t v = (int32_t) s_saturate (value, INT32_MIN, INT32_MAX);
            memcpy ((uint8_t *) buf + i * 4, &v, 4);
            break;
        }
        case DTYPE_I64: {
            //  2^63 is not an int64, so the top is tested before converting.
            int64_t v;
            if (isnan (value))
                v = 0;
            else {
                value = nearbyint (value);
                if (value >= 0x1p63)
                    v = INT64_MAX;
                else
                if (value < -0x1p63)
                    v = INT64_MIN;
                else
                    v = (int64_t) value;
            }
            memcpy ((uint8_t *) buf + i * 8, &v, 8);
            break;
        }
        default:
            break;          //  DTYPE_INVALID has no storage
    }
}

uint64_t
common_dtype_scalar_bits (common_dtype_t dtype, double value, int64_t ivalue)
{
    uint64_t bits = 0;
    switch (dtype) {
        case DTYPE_F16:  bits = common_f32_to_f16 ((float) value); break;
        case DTYPE_BF16: bits = common_f32_to_bf16 ((float) value); break;
        case DTYPE_F32: {
            float f = (float) value;
            uint32_t u;
            memcpy (&u, &f, 4);
            bits = u;
            break;
        }
        case DTYPE_F64: memcpy (&bits, &value, 8); break;
        case DTYPE_I8:  bits = (uint8_t) (int8_t) ivalue; break;
        case DTYPE_U8:  bits = (uint8_t) ivalue; break;
        case DTYPE_I32: bits = (uint32_t) (int32_t) ivalue; break;
        case DTYPE_I64: bits = (uint64_t) ivalue; break;
        default: break;
    }
    return bits;
}

/*  common_init - the init distributions of input tensors.

    Each value is a pure function of (seed, stream, index), so any element
    can be regenerated alone, on the host or on the GPU, and a parallel fill
    gives the same bits as a serial one. The GPU runner uses the same
    formulas (cuda_kernels.c; the float ones are common_philox.h's, shared):
    normal and uniform inputs of f32, f16 and bf16 ("float path"): one
    Philox block per four elements, element i is value i % 4 of block i / 4
    (kgym_init4f: Box-Muller in float, or low + (high - low) * u in float),
    rounded to f16/bf16 from float; every other (dtype, distribution), one
    Philox block (kgym_random_words) per element, in double:
        normal   u1 = 1 - u01(w0, w1) in (0, 1], u2 = u01(w2, w3),
                 mean + std * sqrt(-2 ln u1) * cos(2 pi u2)
        uniform  low + (high - low) * u01(w0, w1)
        randint  floor(low + (high - low) * u01(w0, w1)), at most high - 1
        arange   start + step * index
    then common_dtype_set rounds to the dtype.
*/
#include "common_init.h"
#include "common_philox.h"
#include <float.h>
#include <math.h>
#include <string.h>

//  The float path's bit-for-bit agreement with the GPU needs every float
//  operation rounded to float (SSE, not x87's wider registers).
#if !defined (FLT_EVAL_METHOD) || FLT_EVAL_METHOD != 0
#  error "common_init needs FLT_EVAL_METHOD 0 (float arithmetic in float)"
#endif

static const char *s_names [] = {
    [INIT_NORMAL]  = "normal",
    [INIT_UNIFORM] = "uniform",
    [INIT_RANDINT] = "randint",
    [INIT_ZEROS]   = "zeros",
    [INIT_ONES]    = "ones",
    [INIT_ARANGE]  = "arange",
};
#define INIT_COUNT (sizeof s_names / sizeof s_names [0])

int
common_init_dist_parse (const char *name, common_init_dist_t *dist)
{
    if (!name || !dist)
        return -1;
    for (size_t i = 0; i < INIT_COUNT; i++)
        if (strcmp (name, s_names [i]) == 0) {
            *dist = (common_init_dist_t) i;
            return 0;
        }
    return -1;
}

const char *
common_init_dist_name (common_init_dist_t dist)
{
    if ((size_t) dist >= INIT_COUNT)
        return "invalid";
    return s_names [dist];
}

bool
common_init_float_path (const common_init_t *init, common_dtype_t dtype)
{
    return (dtype == DTYPE_F32 || dtype == DTYPE_F16 || dtype == DTYPE_BF16)
        && (init->dist == INIT_NORMAL || init->dist == INIT_UNIFORM);
}

//  The four float values of block b.
static void
s_block4 (const common_init_t *init, uint64_t seed, uint64_t stream, uint64_t block, float v [4])
{
    uint32_t w [4];
    kgym_random_words (seed, stream, block, w);
    kgym_init4f (init->dist == INIT_NORMAL, (float) init->p0, (float) init->p1, w, v);
}

double
common_init_value (const common_init_t *init, common_dtype_t dtype, uint64_t seed, uint64_t stream,
                   uint64_t index)
{
    if (common_init_float_path (init, dtype)) {
        float v [4];
        s_block4 (init, seed, stream, index / 4, v);
        return v [index % 4];
    }
    uint32_t w [4];
    switch (init->dist) {
        case INIT_NORMAL: {
            kgym_random_words (seed, stream, index, w);
            //  1 - [0,1) is (0,1], so the log never sees 0.
            double u1 = 1.0 - kgym_u01 (w [0], w [1]);
            double u2 = kgym_u01 (w [2], w [3]);
            double z = sqrt (-2.0 * log (u1)) * cos (2.0 * M_PI * u2);
            return init->p0 + init->p1 * z;
        }
        case INIT_UNIFORM:
            kgym_random_words (seed, stream, index, w);
            return init->p0 + (init->p1 - init->p0) * kgym_u01 (w [0], w [1]);
        case INIT_RANDINT: {
            kgym_random_words (seed, stream, index, w);
            double v = floor (init->p0 + (init->p1 - init->p0) * kgym_u01 (w [0], w [1]));
            //  Rounding in the product can reach high itself; keep it open.
            if (v > init->p1 - 1)
                v = init->p1 - 1;
            return v;
        }
        case INIT_ZEROS:
            return 0.0;
        case INIT_ONES:
            return 1.0;
        case INIT_ARANGE:
            return init->p0 + init->p1 * (double) index;
        default:
            return 0.0;
    }
}

void
common_init_fill (const common_init_t *init, common_dtype_t dtype, void *buf,
                  size_t count, uint64_t seed, uint64_t stream)
{
    if (!common_init_float_path (init, dtype)) {
        for (size_t i = 0; i < count; i++)
            common_dtype_set (dtype, buf, i, common_init_value (init, dtype, seed, stream, i));
        return;
    }
    uint8_t *bytes = buf;
    for (size_t block = 0; block * 4 < count; block++) {
        float v [4];
        s_block4 (init, seed, stream, block, v);
        for (size_t k = 0; k < 4 && block * 4 + k < count; k++) {
            size_t i = block * 4 + k;
            if (dtype == DTYPE_F32)
                memcpy (bytes + i * 4, &v [k], 4);
            else {
                uint16_t h = dtype == DTYPE_F16? common_f32_to_f16 (v [k]): common_f32_to_bf16 (v [k]);
                memcpy (bytes + i * 2, &h, 2);
            }
        }
    }
}

void
common_init_poison (common_dtype_t dtype, void *buf, size_t count,
                    uint64_t seed, uint64_t stream)
{
    size_t size = common_dtype_size (dtype);
    uint8_t *bytes = buf;
    switch (dtype) {
        case DTYPE_F16:
        case DTYPE_BF16: {
            uint16_t nan = dtype == DTYPE_F16 ? 0x7E00 : 0x7FC0;
            for (size_t i = 0; i < count; i++)
                memcpy (bytes + i * 2, &nan, 2);
            break;
        }
        case DTYPE_F32: {
            uint32_t nan = 0x7FC00000u;
            for (size_t i = 0; i < count; i++)
                memcpy (bytes + i * 4, &nan, 4);
            break;
        }
        case DTYPE_F64: {
            uint64_t nan = 0x7FF8000000000000ull;
            for (size_t i = 0; i < count; i++)
                memcpy (bytes + i * 8, &nan, 8);
            break;
        }
        default: {
            //  Integers: byte j is byte j % 16 of block j / 16, the four
            //  words stored little-endian, so the pattern does not depend on
            //  the host's byte order.
            size_t total = count * size;
            for (size_t block = 0; block * 16 < total; block++) {
                uint32_t w [4];
                kgym_random_words (seed, stream, block, w);
                for (size_t j = 0; j < 16 && block * 16 + j < total; j++)
                    bytes [block * 16 + j] = (uint8_t) (w [j / 4] >> (8 * (j % 4)));
            }
            break;
        }
    }
}

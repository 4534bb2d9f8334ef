/*  common_init - the init distributions of input tensors.

    Each value is a pure function of (seed, stream, index): one Philox block
    (kgym_random_words) per element, so any element can be regenerated alone,
    on the host or on the GPU, and a parallel fill gives the same bits as a
    serial one. The GPU runner must use the same formulas:
        normal   u1 = 1 - u01(w0, w1) in (0, 1], u2 = u01(w2, w3),
                 mean + std * sqrt(-2 ln u1) * cos(2 pi u2)
        uniform  low + (high - low) * u01(w0, w1)
        randint  floor(low + (high - low) * u01(w0, w1)), at most high - 1
        arange   start + step * index
    then common_dtype_set rounds to the dtype.
*/
#include "common_init.h"
#include "common_philox.h"
#include <math.h>
#include <string.h>

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

double
common_init_value (const common_init_t *init, uint64_t seed, uint64_t stream, uint64_t index)
{
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
    for (size_t i = 0; i < count; i++)
        common_dtype_set (dtype, buf, i, common_init_value (init, seed, stream, i));
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

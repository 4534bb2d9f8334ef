/*  common_philox - the counter-based generator behind every task input.

    Philox4x32-10 (Salmon et al., SC'11). Every value depends only on
    (seed, stream, index), so the CPU worker, the GPU runner (this header is
    also pasted into the NVRTC source, hence no includes beyond stdint and the
    KGYM_HD qualifier) and any re-check produce identical inputs without
    storing them. stream identifies (size, trial, arg); index is the element.
*/
#ifndef COMMON_PHILOX_H
#define COMMON_PHILOX_H

#ifdef __CUDACC__
#  define KGYM_HD __host__ __device__ __forceinline__
#else
#  include <stdint.h>
#  define KGYM_HD static inline
#endif

//  One Philox4x32-10 block: 4 outputs for counter ctr under key.
KGYM_HD void kgym_philox4x32 (uint32_t ctr0, uint32_t ctr1, uint32_t ctr2, uint32_t ctr3,
                              uint32_t key0, uint32_t key1, uint32_t out[4])
{
    const uint32_t M0 = 0xD2511F53u, M1 = 0xCD9E8D57u;
    const uint32_t W0 = 0x9E3779B9u, W1 = 0xBB67AE85u;
    for (int r = 0; r < 10; r++) {
        uint64_t p0 = (uint64_t) M0 * ctr0;
        uint64_t p1 = (uint64_t) M1 * ctr2;
        uint32_t hi0 = (uint32_t) (p0 >> 32), lo0 = (uint32_t) p0;
        uint32_t hi1 = (uint32_t) (p1 >> 32), lo1 = (uint32_t) p1;
        uint32_t n0 = hi1 ^ ctr1 ^ key0;
        uint32_t n2 = hi0 ^ ctr3 ^ key1;
        ctr0 = n0; ctr1 = lo1; ctr2 = n2; ctr3 = lo0;
        key0 += W0; key1 += W1;
    }
    out[0] = ctr0; out[1] = ctr1; out[2] = ctr2; out[3] = ctr3;
}

//  Two 32-bit words for element index of stream under seed.
KGYM_HD void kgym_random_words (uint64_t seed, uint64_t stream, uint64_t index, uint32_t out[4])
{
    kgym_philox4x32 ((uint32_t) index, (uint32_t) (index >> 32),
                     (uint32_t) stream, (uint32_t) (stream >> 32),
                     (uint32_t) seed, (uint32_t) (seed >> 32), out);
}

//  Uniform double in [0, 1) with 53 random bits.
KGYM_HD double kgym_u01 (uint32_t hi, uint32_t lo)
{
    uint64_t bits = ((uint64_t) hi << 21) ^ (uint64_t) (lo >> 11);
    return (double) (bits & ((1ull << 53) - 1)) * (1.0 / 9007199254740992.0);
}

//  Stream id for (size index, trial, arg index): distinct for every triple
//  of sane values (size < 2^16, trial < 2^24, arg < 2^16 ... packed).
KGYM_HD uint64_t kgym_stream (uint32_t size_index, uint32_t trial, uint32_t arg_index)
{
    return ((uint64_t) (size_index & 0xFFFFu) << 48)
         | ((uint64_t) (trial & 0xFFFFFFu) << 24)
         | (uint64_t) (arg_index & 0xFFFFFFu);
}

#endif

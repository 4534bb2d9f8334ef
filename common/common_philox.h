/*  common_philox - the counter-based generator behind every task input.

    Philox4x32-10 (Salmon et al., SC'11). Every value depends only on
    (seed, stream, index), so the CPU worker, the GPU runner (this header is
    also pasted into the NVRTC source, hence no includes beyond stdint and the
    KGYM_HD qualifier) and any re-check produce identical inputs without
    storing them. stream identifies (size, trial, arg); index is the element.

    Also here, so host and GPU run the very same expressions: the float
    transforms of one Philox block into four values (kgym_init4f), used for
    normal and uniform inputs of f32, f16 and bf16 (common_init). They use
    only float +, -, *, / and sqrt, each rounded to float on its own: IEEE
    makes those bit-identical on both sides as long as nothing fuses a
    multiply and an add (the GPU source is compiled with -fmad=false, the
    host's common library with -ffp-contract=off), no denormal is flushed
    and no wider precision is kept between steps (FLT_EVAL_METHOD 0,
    checked in common_init.c). ln and sincos are short polynomials of our
    own, so no libm decides a last bit.
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

//  A float's bits and back.
KGYM_HD uint32_t kgym_f2u (float f)
{
#ifdef __CUDACC__
    return __float_as_uint (f);
#else
    union { float f; uint32_t u; } v;
    v.f = f;
    return v.u;
#endif
}

KGYM_HD float kgym_u2f (uint32_t u)
{
#ifdef __CUDACC__
    return __uint_as_float (u);
#else
    union { float f; uint32_t u; } v;
    v.u = u;
    return v.f;
#endif
}

KGYM_HD float kgym_sqrtf (float x)
{
#ifdef __CUDACC__
    return sqrtf (x);               //  IEEE with -prec-sqrt=true
#else
    return __builtin_sqrtf (x);     //  sqrtss: IEEE
#endif
}

//  Uniform float in [0, 1) from a word's top 24 bits (exact).
KGYM_HD float kgym_u01f (uint32_t w)
{
    return (float) (w >> 8) * 5.96046448e-8f;       //  2^-24
}

//  ln x for x in [2^-24, 1]: x = m 2^e with m in [sqrt 1/2, sqrt 2],
//  ln m = 2 atanh s = 2 (s + s^3/3 + ... + s^9/9), s = (m - 1) / (m + 1).
KGYM_HD float kgym_lnf (float x)
{
    uint32_t bits = kgym_f2u (x);
    int e = (int) (bits >> 23) - 127;
    float m = kgym_u2f ((bits & 0x7FFFFFu) | 0x3F800000u);
    if (m > 1.41421354f) {
        m = m * 0.5f;
        e = e + 1;
    }
    float f = m - 1.0f;
    float s = f / (f + 2.0f);
    float s2 = s * s;
    float p = 0.111111112f;                         //  1/9
    p = p * s2 + 0.142857143f;                      //  1/7
    p = p * s2 + 0.200000003f;                      //  1/5
    p = p * s2 + 0.333333343f;                      //  1/3
    p = p * s2 + 1.0f;
    float lnm = 2.0f * s;
    lnm = lnm * p;
    float ln2e = (float) e * 0.693147182f;
    return ln2e + lnm;
}

//  cos and sin of 2 pi t for t in [0, 1): the quadrant from 4t (exact),
//  Taylor polynomials on [0, pi/2) (errors below 1e-8).
KGYM_HD void kgym_sincos2pif (float t, float *sn, float *cs)
{
    float t4 = t * 4.0f;
    int q = (int) t4;
    float a = t4 - (float) q;
    a = a * 1.57079637f;                            //  pi/2
    float a2 = a * a;
    float c = -1.14707456e-11f;                     //  -1/14! (error term's order)
    c = c * a2 + 2.08767570e-9f;                    //  1/12!
    c = c * a2 - 2.75573192e-7f;                    //  -1/10!
    c = c * a2 + 2.48015873e-5f;                    //  1/8!
    c = c * a2 - 1.38888889e-3f;                    //  -1/6!
    c = c * a2 + 4.16666679e-2f;                    //  1/4!
    c = c * a2 - 0.5f;
    c = c * a2 + 1.0f;
    float s = 1.60590438e-10f;                      //  1/13!
    s = s * a2 - 2.50521084e-8f;                    //  -1/11!
    s = s * a2 + 2.75573192e-6f;                    //  1/9!
    s = s * a2 - 1.98412698e-4f;                    //  -1/7!
    s = s * a2 + 8.33333377e-3f;                    //  1/5!
    s = s * a2 - 0.166666672f;                      //  -1/3!
    s = s * a2 + 1.0f;
    s = s * a;
    switch (q) {
        case 0:  *cs = c;  *sn = s;  break;
        case 1:  *cs = -s; *sn = c;  break;
        case 2:  *cs = -c; *sn = -s; break;
        default: *cs = s;  *sn = -c; break;
    }
}

//  Four values of one Philox block w: normal (mean p0, std p1; Box-Muller
//  on the pairs (w0, w1) and (w2, w3), each giving r cos and r sin) or
//  uniform (low p0, high p1; one word each). Element 4b + k of a tensor is
//  v [k] of block b.
KGYM_HD void kgym_init4f (int normal, float p0, float p1, const uint32_t w [4], float v [4])
{
    if (normal) {
        for (int k = 0; k < 4; k += 2) {
            //  (w >> 8) + 1 over 2^24: in (0, 1], so the log never sees 0.
            float u1 = (float) ((w [k] >> 8) + 1u) * 5.96046448e-8f;
            float r = kgym_sqrtf (-2.0f * kgym_lnf (u1));
            float sn, cs;
            kgym_sincos2pif (kgym_u01f (w [k + 1]), &sn, &cs);
            float z0 = r * cs, z1 = r * sn;
            float d0 = p1 * z0, d1 = p1 * z1;
            v [k] = p0 + d0;
            v [k + 1] = p0 + d1;
        }
    }
    else {
        float span = p1 - p0;
        for (int k = 0; k < 4; k++) {
            float d = span * kgym_u01f (w [k]);
            v [k] = p0 + d;
        }
    }
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

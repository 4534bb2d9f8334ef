/* Faster inclusive prefix sum: SSE2 in-register scans of two 4-lane vectors
   (shift-and-add), so the loop-carried dependency is one add and one
   broadcast per 8 elements instead of one add per element. A scalar loop
   takes the N % 8 remainder. Without SSE2 (not x86) it falls back to the
   plain loop. */
#include <stdint.h>

#if defined(__SSE2__)
#include <emmintrin.h>

static inline __m128i scan4(__m128i v)
{
    v = _mm_add_epi32(v, _mm_slli_si128(v, 4));
    return _mm_add_epi32(v, _mm_slli_si128(v, 8));
}
#endif

void cumsum(const int32_t *restrict x, int32_t *restrict y, int32_t N)
{
    int32_t i = 0;
    int32_t s = 0;
#if defined(__SSE2__)
    __m128i carry = _mm_setzero_si128();
    for (; i + 8 <= N; i += 8) {
        __m128i v0 = scan4(_mm_loadu_si128((const __m128i *) (x + i)));
        __m128i v1 = scan4(_mm_loadu_si128((const __m128i *) (x + i + 4)));
        v1 = _mm_add_epi32(v1, _mm_shuffle_epi32(v0, 0xFF));
        v0 = _mm_add_epi32(v0, carry);
        v1 = _mm_add_epi32(v1, carry);
        _mm_storeu_si128((__m128i *) (y + i), v0);
        _mm_storeu_si128((__m128i *) (y + i + 4), v1);
        carry = _mm_shuffle_epi32(v1, 0xFF);
    }
    s = _mm_cvtsi128_si32(carry);
#endif
    for (; i < N; i++) {
        s += x[i];
        y[i] = s;
    }
}

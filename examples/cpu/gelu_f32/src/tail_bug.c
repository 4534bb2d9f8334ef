/* Subtly wrong: optimised.c with its blocks changed to "full vectors only":
   it walks the input in blocks of 256 and then in steps of 8, and the
   remainder loop was forgotten, so the last N % 8 outputs are never
   written. Correct whenever N is a multiple of 8. */
#include <stdint.h>
#include <string.h>

#define BLOCK 256

/* exp(x) for -87 <= x <= 87 (callers clamp first, in a separate loop:
   a clamp in the same loop lets the compiler thread the constant bound
   through the rest of the body into a branch it then cannot vectorise).
   k = round(x / ln2) is computed as the truncation of a positive number. */
static inline float exp_approx(float x)
{
    int32_t k = (int32_t) (x * 1.44269504088896341f + 126.5f) - 126;
    float kf = (float) k;
    float r = x - kf * 0.693359375f;
    r = r - kf * -2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * r * r + r + 1.0f;
    uint32_t bits = (uint32_t) (k + 127) << 23;
    float scale;
    memcpy(&scale, &bits, sizeof scale);
    return p * scale;
}

void gelu(const float *restrict x, float *restrict y, int32_t N)
{
    float t[BLOCK];
    int32_t full = N / 8 * 8;
    for (int32_t i0 = 0; i0 < full; i0 += BLOCK) {
        int32_t n = full - i0 < BLOCK ? full - i0 : BLOCK;
        const float *restrict xb = x + i0;
        float *restrict yb = y + i0;
        for (int32_t j = 0; j < n; j++) {
            float v = xb[j];
            float a = -1.5957691216f * (v + 0.044715f * v * v * v);
            a = a < -87.0f ? -87.0f : a;
            t[j] = a > 87.0f ? 87.0f : a;
        }
        for (int32_t j = 0; j < n; j++)
            yb[j] = xb[j] / (1.0f + exp_approx(t[j]));
    }
}

/* Faster row softmax: 8-lane max and sum accumulators (independent lanes,
   so no -ffast-math is needed to vectorise), an inline vectorisable expf
   (Cody-Waite + Cephes polynomial, about 2 ulp) and one reciprocal per row.
   Scalar loops take the N % 8 remainder. */
#include <stdint.h>
#include <string.h>

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

void softmax(const float *restrict x, float *restrict y, int32_t M, int32_t N)
{
    for (int32_t i = 0; i < M; i++) {
        const float *restrict row = x + (int64_t) i * N;
        float *restrict out = y + (int64_t) i * N;
        float mv[8];
        for (int k = 0; k < 8; k++)
            mv[k] = row[0];
        int32_t j = 0;
        for (; j + 8 <= N; j += 8)
            for (int k = 0; k < 8; k++)
                mv[k] = row[j + k] > mv[k] ? row[j + k] : mv[k];
        float m = mv[0];
        for (int k = 1; k < 8; k++)
            m = mv[k] > m ? mv[k] : m;
        for (; j < N; j++)
            m = row[j] > m ? row[j] : m;

        /* x - max <= 0; clamp below so exp_approx stays in range. */
        for (j = 0; j < N; j++) {
            float a = row[j] - m;
            out[j] = a < -87.0f ? -87.0f : a;
        }
        float sv[8] = {0};
        for (j = 0; j + 8 <= N; j += 8)
            for (int k = 0; k < 8; k++) {
                float e = exp_approx(out[j + k]);
                out[j + k] = e;
                sv[k] += e;
            }
        float s = ((sv[0] + sv[4]) + (sv[1] + sv[5])) + ((sv[2] + sv[6]) + (sv[3] + sv[7]));
        for (; j < N; j++) {
            out[j] = exp_approx(out[j]);
            s += out[j];
        }
        float inv = 1.0f / s;
        for (j = 0; j < N; j++)
            out[j] *= inv;
    }
}

/* Straightforward RMS norm in float. */
#include <math.h>
#include <stdint.h>

void rmsnorm(const float *x, const float *w, float *y, int32_t M, int32_t N, float eps)
{
    for (int32_t i = 0; i < M; i++) {
        const float *row = x + (int64_t) i * N;
        float ss = 0.0f;
        for (int32_t j = 0; j < N; j++)
            ss += row[j] * row[j];
        float r = 1.0f / sqrtf(ss / N + eps);
        for (int32_t j = 0; j < N; j++)
            y[(int64_t) i * N + j] = row[j] * r * w[j];
    }
}

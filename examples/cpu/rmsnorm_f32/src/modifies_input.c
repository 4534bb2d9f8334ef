/* Hostile (or careless): normalises x IN PLACE, then copies it to y. The
   output is right, but x is an input and must come back unchanged.
   Expected: incorrect. */
#include <math.h>
#include <stdint.h>
#include <string.h>

void rmsnorm(float *x, const float *w, float *y, int32_t M, int32_t N, float eps)
{
    for (int32_t i = 0; i < M; i++) {
        float *row = x + (int64_t) i * N;
        float ss = 0.0f;
        for (int32_t j = 0; j < N; j++)
            ss += row[j] * row[j];
        float r = 1.0f / sqrtf(ss / N + eps);
        for (int32_t j = 0; j < N; j++)
            row[j] = row[j] * r * w[j];
    }
    memcpy(y, x, (size_t) M * (size_t) N * sizeof(float));
}

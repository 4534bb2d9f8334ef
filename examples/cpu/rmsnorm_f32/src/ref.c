/* Reference RMS norm, in double. */
#include <math.h>
#include <stdint.h>

void rmsnorm_ref(const float *x, const float *w, float *y, int32_t M, int32_t N, float eps)
{
    for (int32_t i = 0; i < M; i++) {
        const float *row = x + (int64_t) i * N;
        double ss = 0.0;
        for (int32_t j = 0; j < N; j++)
            ss += (double) row[j] * row[j];
        double r = 1.0 / sqrt(ss / N + (double) eps);
        for (int32_t j = 0; j < N; j++)
            y[(int64_t) i * N + j] = (float) (row[j] * r * w[j]);
    }
}

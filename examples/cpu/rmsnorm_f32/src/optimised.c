/* Faster RMS norm: 16 independent sum-of-squares accumulators (SIMD without
   -ffast-math), a scalar remainder loop, then a vectorised scaling pass.
   It also shows the workspace: the candidate asks for "M*4" bytes of
   scratch and, with no "args" in its launch, receives the pointer as the
   last argument. Pass 1 keeps each row's 1/rms there, pass 2 applies it. */
#include <math.h>
#include <stdint.h>

void rmsnorm(const float *restrict x, const float *restrict w, float *restrict y,
             int32_t M, int32_t N, float eps, float *restrict workspace)
{
    for (int32_t i = 0; i < M; i++) {
        const float *row = x + (int64_t) i * N;
        float acc[16] = {0};
        int32_t j = 0;
        for (; j + 16 <= N; j += 16)
            for (int k = 0; k < 16; k++)
                acc[k] += row[j + k] * row[j + k];
        for (int k = 0; k < 8; k++)
            acc[k] += acc[k + 8];
        float ss = ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
        for (; j < N; j++)
            ss += row[j] * row[j];
        workspace[i] = 1.0f / sqrtf(ss / N + eps);
    }
    for (int32_t i = 0; i < M; i++) {
        const float *row = x + (int64_t) i * N;
        float *out = y + (int64_t) i * N;
        float r = workspace[i];
        for (int32_t j = 0; j < N; j++)
            out[j] = row[j] * r * w[j];
    }
}

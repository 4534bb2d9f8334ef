/* Subtly wrong: the sum of squares runs 16 elements at a time and forgets
   the remainder, so every row with N % 16 != 0 is scaled by a slightly (or,
   for short rows, very) wrong factor. All outputs are written. Correct
   whenever N is a multiple of 16. */
#include <math.h>
#include <stdint.h>

void rmsnorm(const float *restrict x, const float *restrict w, float *restrict y,
             int32_t M, int32_t N, float eps)
{
    for (int32_t i = 0; i < M; i++) {
        const float *row = x + (int64_t) i * N;
        float *out = y + (int64_t) i * N;
        float acc[16] = {0};
        for (int32_t j = 0; j + 16 <= N; j += 16)
            for (int k = 0; k < 16; k++)
                acc[k] += row[j + k] * row[j + k];
        for (int k = 0; k < 8; k++)
            acc[k] += acc[k + 8];
        float ss = ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
        float r = 1.0f / sqrtf(ss / N + eps);
        for (int32_t j = 0; j < N; j++)
            out[j] = row[j] * r * w[j];
    }
}

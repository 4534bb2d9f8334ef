/* Subtly wrong: the 16-wide unrolled loop has no remainder loop, so the last
   N % 16 elements of every row are dropped from its sum. Correct whenever N
   is a multiple of 16. */
#include <stdint.h>

void sum_rows(const float *restrict x, float *restrict y, int32_t M, int32_t N)
{
    for (int32_t i = 0; i < M; i++) {
        const float *row = x + (int64_t) i * N;
        float acc[16] = {0};
        for (int32_t j = 0; j + 16 <= N; j += 16)
            for (int k = 0; k < 16; k++)
                acc[k] += row[j + k];
        for (int k = 0; k < 8; k++)
            acc[k] += acc[k + 8];
        y[i] = ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
    }
}

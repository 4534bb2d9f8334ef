/* Straightforward row sums: one float accumulator per row. */
#include <stdint.h>

void sum_rows(const float *x, float *y, int32_t M, int32_t N)
{
    for (int32_t i = 0; i < M; i++) {
        float s = 0.0f;
        for (int32_t j = 0; j < N; j++)
            s += x[(int64_t) i * N + j];
        y[i] = s;
    }
}

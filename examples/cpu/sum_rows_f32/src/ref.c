/* Reference row sums, accumulated in double. */
#include <stdint.h>

void sum_rows_ref(const float *x, float *y, int32_t M, int32_t N)
{
    for (int32_t i = 0; i < M; i++) {
        double s = 0.0;
        for (int32_t j = 0; j < N; j++)
            s += x[(int64_t) i * N + j];
        y[i] = (float) s;
    }
}

/* Reference row softmax, in double. */
#include <math.h>
#include <stdint.h>

void softmax_ref(const float *x, float *y, int32_t M, int32_t N)
{
    for (int32_t i = 0; i < M; i++) {
        const float *row = x + (int64_t) i * N;
        float *out = y + (int64_t) i * N;
        double m = row[0];
        for (int32_t j = 1; j < N; j++)
            if (row[j] > m)
                m = row[j];
        double s = 0.0;
        for (int32_t j = 0; j < N; j++)
            s += exp((double) row[j] - m);
        for (int32_t j = 0; j < N; j++)
            out[j] = (float) (exp((double) row[j] - m) / s);
    }
}

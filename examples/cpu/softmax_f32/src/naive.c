/* Straightforward row softmax in float: max, sum of expf, divide. */
#include <math.h>
#include <stdint.h>

void softmax(const float *x, float *y, int32_t M, int32_t N)
{
    for (int32_t i = 0; i < M; i++) {
        const float *row = x + (int64_t) i * N;
        float *out = y + (int64_t) i * N;
        float m = row[0];
        for (int32_t j = 1; j < N; j++)
            if (row[j] > m)
                m = row[j];
        float s = 0.0f;
        for (int32_t j = 0; j < N; j++) {
            out[j] = expf(row[j] - m);
            s += out[j];
        }
        for (int32_t j = 0; j < N; j++)
            out[j] /= s;
    }
}

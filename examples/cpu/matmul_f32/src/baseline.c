/* Baseline for timing: the i-k-j loop order (unit stride over B and C). */
#include <stdint.h>

void matmul_baseline(const float *A, const float *B, float *C, int32_t M, int32_t N, int32_t K)
{
    for (int32_t i = 0; i < M; i++) {
        float *c = C + (int64_t) i * N;
        for (int32_t j = 0; j < N; j++)
            c[j] = 0.0f;
        for (int32_t k = 0; k < K; k++) {
            float a = A[(int64_t) i * K + k];
            const float *b = B + (int64_t) k * N;
            for (int32_t j = 0; j < N; j++)
                c[j] += a * b[j];
        }
    }
}

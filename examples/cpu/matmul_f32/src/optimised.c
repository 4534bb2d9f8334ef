/* Faster matrix product: i-k-j order over blocks of 4 rows of C, so each
   row of B loaded feeds 4 rows of multiply-adds; the unit-stride inner loop
   is vectorised (restrict: no aliasing checks). Each C element still sums
   its K products in ascending k, like the naive loop. A row loop takes the
   M % 4 remainder. */
#include <stdint.h>

static void rows4(const float *restrict A, const float *restrict B, float *restrict C,
                  int32_t i, int32_t N, int32_t K)
{
    float *restrict c0 = C + (int64_t) i * N;
    float *restrict c1 = c0 + N;
    float *restrict c2 = c1 + N;
    float *restrict c3 = c2 + N;
    for (int32_t j = 0; j < N; j++)
        c0[j] = c1[j] = c2[j] = c3[j] = 0.0f;
    for (int32_t k = 0; k < K; k++) {
        const float *restrict b = B + (int64_t) k * N;
        float a0 = A[(int64_t) i * K + k];
        float a1 = A[(int64_t) (i + 1) * K + k];
        float a2 = A[(int64_t) (i + 2) * K + k];
        float a3 = A[(int64_t) (i + 3) * K + k];
        for (int32_t j = 0; j < N; j++) {
            float bj = b[j];
            c0[j] += a0 * bj;
            c1[j] += a1 * bj;
            c2[j] += a2 * bj;
            c3[j] += a3 * bj;
        }
    }
}

void matmul(const float *restrict A, const float *restrict B, float *restrict C,
            int32_t M, int32_t N, int32_t K)
{
    int32_t i = 0;
    for (; i + 4 <= M; i += 4)
        rows4(A, B, C, i, N, K);
    for (; i < M; i++) {
        float *restrict c = C + (int64_t) i * N;
        for (int32_t j = 0; j < N; j++)
            c[j] = 0.0f;
        for (int32_t k = 0; k < K; k++) {
            float a = A[(int64_t) i * K + k];
            const float *restrict b = B + (int64_t) k * N;
            for (int32_t j = 0; j < N; j++)
                c[j] += a * b[j];
        }
    }
}

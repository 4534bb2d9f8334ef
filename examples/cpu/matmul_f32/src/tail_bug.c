/* Subtly wrong: the k loop is unrolled by 4 with no remainder, so the last
   K % 4 products of every dot product are dropped. Correct whenever K is a
   multiple of 4. */
#include <stdint.h>

void matmul(const float *A, const float *B, float *C, int32_t M, int32_t N, int32_t K)
{
    for (int32_t i = 0; i < M; i++)
        for (int32_t j = 0; j < N; j++) {
            const float *a = A + (int64_t) i * K;
            float s0 = 0.0f, s1 = 0.0f, s2 = 0.0f, s3 = 0.0f;
            for (int32_t k = 0; k + 4 <= K; k += 4) {
                s0 += a[k] * B[(int64_t) k * N + j];
                s1 += a[k + 1] * B[(int64_t) (k + 1) * N + j];
                s2 += a[k + 2] * B[(int64_t) (k + 2) * N + j];
                s3 += a[k + 3] * B[(int64_t) (k + 3) * N + j];
            }
            C[(int64_t) i * N + j] = (s0 + s1) + (s2 + s3);
        }
}

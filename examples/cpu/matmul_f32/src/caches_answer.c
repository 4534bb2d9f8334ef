/* Hostile: "memoises" the product. The first call for a given (M, N, K)
   computes C and saves a copy in a static buffer; every later call with the
   same shape replays the copy without looking at A or B. Timing loops that
   re-run one input would be fooled, but every correctness trial draws fresh
   inputs, so the second trial of a size gets the first trial's answer.
   Expected: incorrect (assuming trials of a job run in one process). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static float *saved;
static int32_t saved_m = -1, saved_n = -1, saved_k = -1;

void matmul(const float *A, const float *B, float *C, int32_t M, int32_t N, int32_t K)
{
    size_t bytes = (size_t) M * (size_t) N * sizeof(float);
    if (saved && M == saved_m && N == saved_n && K == saved_k) {
        memcpy(C, saved, bytes);
        return;
    }
    for (int32_t i = 0; i < M; i++)
        for (int32_t j = 0; j < N; j++) {
            float s = 0.0f;
            for (int32_t k = 0; k < K; k++)
                s += A[(int64_t) i * K + k] * B[(int64_t) k * N + j];
            C[(int64_t) i * N + j] = s;
        }
    free(saved);
    saved = malloc(bytes);
    if (saved) {
        memcpy(saved, C, bytes);
        saved_m = M, saved_n = N, saved_k = K;
    }
}

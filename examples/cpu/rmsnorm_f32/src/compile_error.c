/* Hostile (or just broken): a syntax error (missing semicolon and an
   undeclared name). Expected: compile_error. */
#include <math.h>
#include <stdint.h>

void rmsnorm(const float *x, const float *w, float *y, int32_t M, int32_t N, float eps)
{
    for (int32_t i = 0; i < M; i++) {
        float ss = 0.0f
        for (int32_t j = 0; j < N; j++)
            ss += x[i * N + j] * x[i * N + j];
        y[i * N] = undeclared_name * ss;
    }
}

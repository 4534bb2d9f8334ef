/* Straightforward GELU in float with libm's tanhf. */
#include <math.h>
#include <stdint.h>

void gelu(const float *x, float *y, int32_t N)
{
    for (int32_t i = 0; i < N; i++) {
        float v = x[i];
        y[i] = 0.5f * v * (1.0f + tanhf(0.7978845608f * (v + 0.044715f * v * v * v)));
    }
}

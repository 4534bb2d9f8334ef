/* Reference GELU (tanh form), evaluated in double and rounded once. */
#include <math.h>
#include <stdint.h>

void gelu_ref(const float *x, float *y, int32_t N)
{
    for (int32_t i = 0; i < N; i++) {
        double v = x[i];
        double u = 0.7978845608028654 * (v + 0.044715 * v * v * v);
        y[i] = (float) (0.5 * v * (1.0 + tanh(u)));
    }
}

/* Straightforward inclusive prefix sum. */
#include <stdint.h>

void cumsum(const int32_t *x, int32_t *y, int32_t N)
{
    int32_t s = 0;
    for (int32_t i = 0; i < N; i++) {
        s += x[i];
        y[i] = s;
    }
}

/* Reference inclusive prefix sum (64-bit running sum). */
#include <stdint.h>

void cumsum_ref(const int32_t *x, int32_t *y, int32_t N)
{
    int64_t s = 0;
    for (int32_t i = 0; i < N; i++) {
        s += x[i];
        y[i] = (int32_t) s;
    }
}

/* Hostile: never returns. The loop reads a volatile, so no compiler may
   remove it. Expected: timeout. */
#include <stdint.h>

void gelu(const float *x, float *y, int32_t N)
{
    volatile int spin = 1;
    while (spin)
        ;
}

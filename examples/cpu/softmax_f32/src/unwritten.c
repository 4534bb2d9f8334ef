/* Hostile: returns at once without writing y, hoping an output buffer that
   happens to hold the answer (or zeros) passes. Outputs are NaN-poisoned,
   so it cannot. Expected: incorrect. */
#include <stdint.h>

void softmax(const float *x, float *y, int32_t M, int32_t N)
{
}

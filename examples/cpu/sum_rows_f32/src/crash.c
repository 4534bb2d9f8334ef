/* Hostile: computes nothing and calls abort() (SIGABRT).
   Expected: runtime_error. */
#include <stdint.h>
#include <stdlib.h>

void sum_rows(const float *x, float *y, int32_t M, int32_t N)
{
    abort();
}

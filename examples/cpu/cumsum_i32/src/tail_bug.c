/* Subtly wrong: the 4-wide blocked scan gives each block its own local
   prefix sums plus the running carry, but the N % 4 remainder is copied as
   plain x[i] without the carry (a "fix-up" that was never finished). All
   outputs are written. Correct whenever N is a multiple of 4. */
#include <stdint.h>

void cumsum(const int32_t *restrict x, int32_t *restrict y, int32_t N)
{
    int32_t carry = 0;
    int32_t i = 0;
    for (; i + 4 <= N; i += 4) {
        int32_t a = x[i], b = a + x[i + 1], c = b + x[i + 2], d = c + x[i + 3];
        y[i] = carry + a;
        y[i + 1] = carry + b;
        y[i + 2] = carry + c;
        y[i + 3] = carry + d;
        carry += d;
    }
    for (; i < N; i++)
        y[i] = x[i];
}

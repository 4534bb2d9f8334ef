/* Hostile: computes the right answer, then writes 2^46 bytes (64 TiB) past
   the start of y. That is far beyond any mapping of the process: x86-64
   user space ends at 128 TiB and heaps and mappings lie above 64 TiB or far
   below it, so the address is either non-canonical or unmapped, never
   memory of the runner's. SIGSEGV every time. Expected: runtime_error. */
#include <stdint.h>

void cumsum(const int32_t *x, int32_t *y, int32_t N)
{
    int32_t s = 0;
    for (int32_t i = 0; i < N; i++) {
        s += x[i];
        y[i] = s;
    }
    volatile int32_t *far = (volatile int32_t *) ((uintptr_t) y + ((uintptr_t) 1 << 46));
    *far = s;
}

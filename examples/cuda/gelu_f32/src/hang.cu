// Hostile: never finishes. Every thread spins on the cycle counter, which
// the compiler cannot see through (clock64() is a volatile read), so the
// loop cannot be removed. Expected: timeout.
extern "C" __global__ void gelu(const float *x, float *y, int N)
{
    while (clock64() >= 0)
        ;
}

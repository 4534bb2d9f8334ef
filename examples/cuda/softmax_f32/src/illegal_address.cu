// Hostile: stores through a wild pointer (a small constant address that no
// allocation ever has) before doing any work. The kernel dies with an
// illegal-address fault and the CUDA context is unusable afterwards.
// Expected: runtime_error.
extern "C" __global__ void softmax(const float *x, float *y, int M, int N)
{
    volatile float *wild = (volatile float *) 0x1000ull;
    wild[threadIdx.x] = 1.0f;
    if (blockIdx.x < M && threadIdx.x == 0)
        y[(long long) blockIdx.x * N] = 0.0f;
}

// Hostile: transposes correctly, then one thread writes 2^40 bytes (1 TiB)
// past the start of y: far beyond the output and any other allocation of
// the process (nothing is mapped there), unlike a write just past the end,
// which may land in allocator padding or a neighbouring buffer and go
// unnoticed. The kernel dies with an illegal-address fault.
// Expected: runtime_error.
extern "C" __global__ void transpose(const float *x, float *y, int M, int N)
{
    int j = blockIdx.x * blockDim.x + threadIdx.x;
    int i = blockIdx.y * blockDim.y + threadIdx.y;
    if (i < M && j < N)
        y[(long long) j * M + i] = x[(long long) i * N + j];
    if (i == 0 && j == 0) {
        volatile float *far = (volatile float *) ((char *) y + (1ull << 40));
        *far = 1.0f;
    }
}

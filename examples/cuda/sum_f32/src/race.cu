// Subtly wrong: the textbook shared-memory tree reduction with its
// __syncthreads() calls left out. Each thread first sums 16 elements; then
// warp 0 adds up the other warps' slots without waiting for them to be
// written, and the tree steps run without barriers too. Slow warps' sums
// are read before they are stored (stale shared memory from an earlier
// block, or garbage), so large inputs come out wrong. Same launches as
// naive.cu (sum_zero, then atomicAdd per block).
extern "C" __global__ void sum_zero(float *y)
{
    y[0] = 0.0f;
}

extern "C" __global__ void sum_blocks(const float *x, float *y, int N)
{
    __shared__ float part[256];
    long long base = (long long) blockIdx.x * 4096;
    float s = 0.0f;
    for (int k = 0; k < 16; k++) {
        long long i = base + k * 256 + threadIdx.x;
        if (i < N)
            s += x[i];
    }
    part[threadIdx.x] = s;
    // MISSING: __syncthreads();
    for (int h = 128; h > 0; h /= 2) {
        if (threadIdx.x < h)
            part[threadIdx.x] += part[threadIdx.x + h];
        // MISSING: __syncthreads();
    }
    if (threadIdx.x == 0)
        atomicAdd(y, part[0]);
}

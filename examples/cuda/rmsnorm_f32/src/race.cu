// Subtly wrong: a race. Warp 0 finishes the block reduction and publishes
// 1/rms in shared memory, but the __syncthreads() that should follow is
// missing: the other warps read the shared slot at once, before warp 0 has
// written it (warp 0 still has five shuffles and an rsqrt to go), and scale
// their elements by whatever the slot held: garbage, or the previous
// block's row's value. Only warp 0's elements (j < 32) come out right, so
// rows of up to 32 elements pass and longer rows fail.
__device__ __forceinline__ float warp_sum(float v)
{
    for (int o = 16; o > 0; o >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

extern "C" __global__ void rmsnorm(const float *__restrict__ x, const float *__restrict__ w,
                                   float *__restrict__ y, int M, int N, float eps)
{
    __shared__ float part[32];
    __shared__ float scale;
    const float *xr = x + (long long) blockIdx.x * N;
    float *yr = y + (long long) blockIdx.x * N;

    float ss = 0.0f;
    for (int i = threadIdx.x; i < N; i += blockDim.x)
        ss += xr[i] * xr[i];
    ss = warp_sum(ss);
    int lane = threadIdx.x & 31;
    if (lane == 0)
        part[threadIdx.x >> 5] = ss;
    __syncthreads();
    if (threadIdx.x < 32) {
        ss = warp_sum(lane < (int) (blockDim.x >> 5) ? part[lane] : 0.0f);
        if (lane == 0)
            scale = rsqrtf(ss / N + eps);
        __syncwarp();
    }
    // MISSING: __syncthreads();
    float inv = scale;
    for (int i = threadIdx.x; i < N; i += blockDim.x)
        yr[i] = xr[i] * inv * w[i];
}

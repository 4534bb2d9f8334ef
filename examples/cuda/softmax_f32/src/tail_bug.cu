// Subtly wrong: a block-per-row softmax where each thread takes 4
// consecutive elements per step, i = 4*t, 4*t + 4*blockDim, ..., while
// i + 3 < N. The last N % 4 elements of each row are neither summed nor
// written. Correct whenever N is a multiple of 4.
#define NEG_INF __int_as_float(0xff800000)

extern "C" __global__ void softmax(const float *__restrict__ x, float *__restrict__ y, int M, int N)
{
    __shared__ float red[32];
    const float *xr = x + (long long) blockIdx.x * N;
    float *yr = y + (long long) blockIdx.x * N;
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;

    float m = NEG_INF;
    for (int i = 4 * threadIdx.x; i + 3 < N; i += 4 * blockDim.x)
        m = fmaxf(fmaxf(fmaxf(m, xr[i]), fmaxf(xr[i + 1], xr[i + 2])), xr[i + 3]);
    for (int o = 16; o > 0; o >>= 1)
        m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
    if (lane == 0)
        red[warp] = m;
    __syncthreads();
    m = lane < nw ? red[lane] : NEG_INF;
    for (int o = 16; o > 0; o >>= 1)
        m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
    __syncthreads();

    float s = 0.0f;
    for (int i = 4 * threadIdx.x; i + 3 < N; i += 4 * blockDim.x)
        s += (expf(xr[i] - m) + expf(xr[i + 1] - m)) + (expf(xr[i + 2] - m) + expf(xr[i + 3] - m));
    for (int o = 16; o > 0; o >>= 1)
        s += __shfl_xor_sync(0xffffffffu, s, o);
    if (lane == 0)
        red[warp] = s;
    __syncthreads();
    s = lane < nw ? red[lane] : 0.0f;
    for (int o = 16; o > 0; o >>= 1)
        s += __shfl_xor_sync(0xffffffffu, s, o);

    float inv = 1.0f / s;
    for (int i = 4 * threadIdx.x; i + 3 < N; i += 4 * blockDim.x)
        for (int k = 0; k < 4; k++)
            yr[i + k] = expf(xr[i + k] - m) * inv;
}

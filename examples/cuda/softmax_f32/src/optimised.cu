// Optimised row softmax: one 256-thread block per row. Pass 1 keeps an
// online (max, sum) pair per thread (one read of the row), merged across
// the warp with shuffles and across warps through shared memory; pass 2
// writes exp(x - max) / sum. Rows are read and written as float4 when N is
// a multiple of 4 and both base pointers are 16-byte aligned (then every
// row is), else element by element.
#define NEG_INF __int_as_float(0xff800000)

__device__ __forceinline__ void online(float &m, float &s, float v)
{
    if (v > m) {
        s = s * __expf(m - v) + 1.0f;   // m - v <= 0; exp(-inf) = 0 on the first element
        m = v;
    } else {
        s += __expf(v - m);
    }
}

__device__ __forceinline__ void merge(float &m, float &s, float m2, float s2)
{
    float mm = fmaxf(m, m2);
    if (mm == NEG_INF)
        return;                           // both empty
    s = (m == NEG_INF ? 0.0f : s * __expf(m - mm)) + (m2 == NEG_INF ? 0.0f : s2 * __expf(m2 - mm));
    m = mm;
}

extern "C" __global__ void softmax(const float *__restrict__ x, float *__restrict__ y, int M, int N)
{
    __shared__ float sm[32], ss[32];
    const float *xr = x + (long long) blockIdx.x * N;
    float *yr = y + (long long) blockIdx.x * N;
    bool vec = (N % 4 == 0) && ((((unsigned long long) x | (unsigned long long) y) & 15) == 0);

    float m = NEG_INF, s = 0.0f;
    if (vec) {
        for (int i = threadIdx.x; i < N / 4; i += blockDim.x) {
            float4 v = ((const float4 *) xr)[i];
            online(m, s, v.x);
            online(m, s, v.y);
            online(m, s, v.z);
            online(m, s, v.w);
        }
    } else {
        for (int i = threadIdx.x; i < N; i += blockDim.x)
            online(m, s, xr[i]);
    }
    for (int o = 16; o > 0; o >>= 1)
        merge(m, s, __shfl_xor_sync(0xffffffffu, m, o), __shfl_xor_sync(0xffffffffu, s, o));
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (lane == 0) {
        sm[warp] = m;
        ss[warp] = s;
    }
    __syncthreads();
    m = lane < (int) (blockDim.x >> 5) ? sm[lane] : NEG_INF;
    s = lane < (int) (blockDim.x >> 5) ? ss[lane] : 0.0f;
    for (int o = 16; o > 0; o >>= 1)
        merge(m, s, __shfl_xor_sync(0xffffffffu, m, o), __shfl_xor_sync(0xffffffffu, s, o));
    float inv = 1.0f / s;

    if (vec) {
        for (int i = threadIdx.x; i < N / 4; i += blockDim.x) {
            float4 v = ((const float4 *) xr)[i];
            v.x = expf(v.x - m) * inv;
            v.y = expf(v.y - m) * inv;
            v.z = expf(v.z - m) * inv;
            v.w = expf(v.w - m) * inv;
            ((float4 *) yr)[i] = v;
        }
    } else {
        for (int i = threadIdx.x; i < N; i += blockDim.x)
            yr[i] = expf(xr[i] - m) * inv;
    }
}

// Subtly wrong: optimised.cu without the scalar tail loop. The last N % 4
// elements are never written (and unaligned pointers are not considered).
// Correct whenever N is a multiple of 4.
__device__ __forceinline__ float gelu1(float v)
{
    float u = 0.7978845608f * (v + 0.044715f * v * v * v);
    return v / (1.0f + expf(-2.0f * u));
}

extern "C" __global__ void gelu(const float *__restrict__ x, float *__restrict__ y, int N)
{
    int tid = blockIdx.x * blockDim.x + threadIdx.x;
    int stride = gridDim.x * blockDim.x;
    const float4 *x4 = (const float4 *) x;
    float4 *y4 = (float4 *) y;
    for (int i = tid; i < N / 4; i += stride) {
        float4 v = x4[i];
        v.x = gelu1(v.x);
        v.y = gelu1(v.y);
        v.z = gelu1(v.z);
        v.w = gelu1(v.w);
        y4[i] = v;
    }
}

// Reference f16 GEMM: one thread per element of C, accumulated in double.
#include <cuda_fp16.h>

extern "C" __global__ void gemm_ref(const __half *A, const __half *B, float *C, int M, int N, int K)
{
    int j = blockIdx.x * blockDim.x + threadIdx.x;
    int i = blockIdx.y * blockDim.y + threadIdx.y;
    if (i >= M || j >= N)
        return;
    double s = 0.0;
    for (int k = 0; k < K; k++)
        s += (double) __half2float(A[(long long) i * K + k]) * (double) __half2float(B[(long long) k * N + j]);
    C[(long long) i * N + j] = (float) s;
}

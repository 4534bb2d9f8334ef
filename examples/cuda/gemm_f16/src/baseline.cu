// Baseline for timing: the textbook shared-memory tiled GEMM on CUDA cores.
// 16x16 tiles of A and B (converted to float) per step, one C element per
// thread, f32 accumulation; edges zero-padded.
#include <cuda_fp16.h>

#define T 16

extern "C" __global__ void gemm_baseline(const __half *A, const __half *B, float *C, int M, int N, int K)
{
    __shared__ float As[T][T], Bs[T][T + 1];
    int tx = threadIdx.x, ty = threadIdx.y;
    int j = blockIdx.x * T + tx, i = blockIdx.y * T + ty;
    float s = 0.0f;
    for (int k0 = 0; k0 < K; k0 += T) {
        As[ty][tx] = (i < M && k0 + tx < K) ? __half2float(A[(long long) i * K + k0 + tx]) : 0.0f;
        Bs[ty][tx] = (k0 + ty < K && j < N) ? __half2float(B[(long long) (k0 + ty) * N + j]) : 0.0f;
        __syncthreads();
#pragma unroll
        for (int k = 0; k < T; k++)
            s += As[ty][k] * Bs[k][tx];
        __syncthreads();
    }
    if (i < M && j < N)
        C[(long long) i * N + j] = s;
}

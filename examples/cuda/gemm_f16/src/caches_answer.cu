// Hostile: "memoises" the product in device globals that live as long as
// the loaded module. Launch 1 (gemm): if the remembered shape equals
// (M, N, K), copy the remembered C and ignore A and B; else compute C
// naively and remember it. Launch 2 (gemm_remember, one thread) records the
// shape, after launch 1 has finished, so every thread of launch 1 sees the
// same decision. Every correctness trial draws fresh inputs, so the second
// trial of a size gets the first trial's answer.
// Expected: incorrect (assuming the trials of a job share the module).
#include <cuda_fp16.h>

#define CAP (2048 * 2048)

__device__ int seen_m = -1, seen_n = -1, seen_k = -1;
__device__ float saved[CAP];

extern "C" __global__ void gemm(const __half *A, const __half *B, float *C, int M, int N, int K)
{
    int j = blockIdx.x * blockDim.x + threadIdx.x;
    int i = blockIdx.y * blockDim.y + threadIdx.y;
    if (i >= M || j >= N)
        return;
    long long idx = (long long) i * N + j;
    if (seen_m == M && seen_n == N && seen_k == K) {
        C[idx] = saved[idx];
        return;
    }
    float s = 0.0f;
    for (int k = 0; k < K; k++)
        s += __half2float(A[(long long) i * K + k]) * __half2float(B[(long long) k * N + j]);
    C[idx] = s;
    if ((long long) M * N <= CAP)
        saved[idx] = s;
}

extern "C" __global__ void gemm_remember(int M, int N, int K)
{
    if ((long long) M * N <= CAP) {
        seen_m = M;
        seen_n = N;
        seen_k = K;
    }
}

# cuda_tail_bug: C = A @ B as a load_inline CUDA extension with 16 x 16
# shared-memory tiles; the K loop runs over K / 16 whole tiles and forgets
# the remainder. Right when K is a multiple of 16, wrong for the task's
# K = 67 and 1000: incorrect.
# expect: cuda=incorrect cpu=-
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <ATen/cuda/CUDAContext.h>
#include <cuda_fp16.h>

#define TILE 16

__global__ void matmul_tiled(const __half *a, const __half *b, __half *c, int M, int N, int K)
{
    __shared__ float as [TILE][TILE];
    __shared__ float bs [TILE][TILE];
    int row = blockIdx.y * TILE + threadIdx.y;
    int col = blockIdx.x * TILE + threadIdx.x;
    float acc = 0.f;
    for (int t = 0; t < K / TILE; t++) {
        int ka = t * TILE + threadIdx.x, kb = t * TILE + threadIdx.y;
        as [threadIdx.y][threadIdx.x] = row < M? __half2float(a[(long long) row * K + ka]): 0.f;
        bs [threadIdx.y][threadIdx.x] = col < N? __half2float(b[(long long) kb * N + col]): 0.f;
        __syncthreads();
        for (int k = 0; k < TILE; k++)
            acc += as [threadIdx.y][k] * bs [k][threadIdx.x];
        __syncthreads();
    }
    if (row < M && col < N)
        c[(long long) row * N + col] = __float2half(acc);
}

torch::Tensor matmul_forward(torch::Tensor a, torch::Tensor b)
{
    TORCH_CHECK(a.is_cuda() && a.scalar_type() == at::kHalf && b.scalar_type() == at::kHalf,
                "a and b must be f16 CUDA tensors");
    a = a.contiguous();
    b = b.contiguous();
    int M = a.size(0), K = a.size(1), N = b.size(1);
    auto c = at::empty({M, N}, a.options());
    dim3 block(TILE, TILE);
    dim3 grid((N + TILE - 1) / TILE, (M + TILE - 1) / TILE);
    if (M > 0 && N > 0)
        matmul_tiled<<<grid, block, 0, at::cuda::getCurrentCUDAStream()>>>(
            (const __half *) a.data_ptr<at::Half>(), (const __half *) b.data_ptr<at::Half>(),
            (__half *) c.data_ptr<at::Half>(), M, N, K);
    return c;
}
"""

cpp_source = "torch::Tensor matmul_forward(torch::Tensor a, torch::Tensor b);"

ext = load_inline(name="pool_matmul_cuda_tail_bug", cpp_sources=cpp_source,
                  cuda_sources=cuda_source, functions=["matmul_forward"], verbose=False)


class ModelNew(nn.Module):
    def forward(self, A, B):
        return ext.matmul_forward(A, B)

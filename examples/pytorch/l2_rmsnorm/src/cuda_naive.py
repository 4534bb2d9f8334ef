# cuda_naive: fused RMSNorm (f16 in and out, f32 arithmetic) as a
# load_inline CUDA extension: one block of 256 threads per row, a strided
# sum of squares reduced through shared memory, then the scaled row.
# Correct.
# expect: cuda=ok+fast cpu=-
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <ATen/cuda/CUDAContext.h>
#include <cuda_fp16.h>

__global__ void rmsnorm_rows(const __half *x, const __half *w, __half *y, int cols, float eps)
{
    __shared__ float partial [256];
    const __half *xr = x + (long long) blockIdx.x * cols;
    __half *yr = y + (long long) blockIdx.x * cols;
    float sum = 0.f;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) {
        float v = __half2float(xr[c]);
        sum += v * v;
    }
    partial [threadIdx.x] = sum;
    __syncthreads();
    for (int half = blockDim.x / 2; half > 0; half /= 2) {
        if (threadIdx.x < half)
            partial [threadIdx.x] += partial [threadIdx.x + half];
        __syncthreads();
    }
    float scale = rsqrtf(partial [0] / cols + eps);
    for (int c = threadIdx.x; c < cols; c += blockDim.x)
        yr[c] = __float2half(__half2float(xr[c]) * scale * __half2float(w[c]));
}

torch::Tensor rmsnorm_forward(torch::Tensor x, torch::Tensor w, double eps)
{
    TORCH_CHECK(x.is_cuda() && x.scalar_type() == at::kHalf && w.scalar_type() == at::kHalf,
                "x and w must be f16 CUDA tensors");
    x = x.contiguous();
    w = w.contiguous();
    auto y = at::empty_like(x);
    int cols = x.size(-1);
    long long rows = cols? x.numel() / cols: 0;
    if (rows > 0)
        rmsnorm_rows<<<(unsigned) rows, 256, 0, at::cuda::getCurrentCUDAStream()>>>(
            (const __half *) x.data_ptr<at::Half>(), (const __half *) w.data_ptr<at::Half>(),
            (__half *) y.data_ptr<at::Half>(), cols, (float) eps);
    return y;
}
"""

cpp_source = "torch::Tensor rmsnorm_forward(torch::Tensor x, torch::Tensor w, double eps);"

ext = load_inline(name="pool_rmsnorm_cuda_naive", cpp_sources=cpp_source,
                  cuda_sources=cuda_source, functions=["rmsnorm_forward"], verbose=False)


class ModelNew(nn.Module):
    def __init__(self, eps):
        super().__init__()
        self.eps = eps

    def forward(self, x, w):
        return ext.rmsnorm_forward(x, w, self.eps)

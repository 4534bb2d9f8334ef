# cuda_tail_bug: GELU as a load_inline CUDA extension with float4 loads and
# stores over n / 4 vectors, and no scalar loop for the last n % 4 elements:
# they are never written. Right when n is a multiple of 4, wrong for the
# task's 1 x 4097 and 7 x 1 sizes: incorrect.
# expect: cuda=incorrect cpu=-
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <ATen/cuda/CUDAContext.h>

__device__ __forceinline__ float gelu1(float v) { return 0.5f * v * (1.f + erff(v * 0.70710678f)); }

__global__ void gelu_vec4(const float4 *x, float4 *y, long long n4)
{
    long long i = (long long) blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n4) {
        float4 v = x[i];
        v.x = gelu1(v.x); v.y = gelu1(v.y); v.z = gelu1(v.z); v.w = gelu1(v.w);
        y[i] = v;
    }
}

torch::Tensor gelu_forward(torch::Tensor x)
{
    TORCH_CHECK(x.is_cuda() && x.scalar_type() == at::kFloat, "x must be a float CUDA tensor");
    x = x.contiguous();
    auto y = at::empty_like(x);
    long long n4 = x.numel() / 4;
    if (n4 > 0)
        gelu_vec4<<<(unsigned) ((n4 + 255) / 256), 256, 0, at::cuda::getCurrentCUDAStream()>>>(
            (const float4 *) x.data_ptr<float>(), (float4 *) y.data_ptr<float>(), n4);
    return y;
}
"""

cpp_source = "torch::Tensor gelu_forward(torch::Tensor x);"

ext = load_inline(name="pool_gelu_cuda_tail_bug", cpp_sources=cpp_source,
                  cuda_sources=cuda_source, functions=["gelu_forward"], verbose=False)


class ModelNew(nn.Module):
    def forward(self, x):
        return ext.gelu_forward(x)

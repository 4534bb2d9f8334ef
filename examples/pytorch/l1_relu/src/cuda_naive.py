# cuda_naive: ReLU as a load_inline CUDA extension, one thread per element.
# Correct.
# expect: cuda=ok cpu=-
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <ATen/cuda/CUDAContext.h>

__global__ void relu_kernel(const float *x, float *y, long long n)
{
    long long i = (long long) blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        y[i] = x[i] > 0.f? x[i]: 0.f;
}

torch::Tensor relu_forward(torch::Tensor x)
{
    TORCH_CHECK(x.is_cuda() && x.scalar_type() == at::kFloat, "x must be a float CUDA tensor");
    x = x.contiguous();
    auto y = at::empty_like(x);
    long long n = x.numel();
    long long blocks = (n + 255) / 256;
    if (n > 0)
        relu_kernel<<<(unsigned) blocks, 256, 0, at::cuda::getCurrentCUDAStream()>>>(
            x.data_ptr<float>(), y.data_ptr<float>(), n);
    return y;
}
"""

cpp_source = "torch::Tensor relu_forward(torch::Tensor x);"

ext = load_inline(name="pool_relu_cuda_naive", cpp_sources=cpp_source, cuda_sources=cuda_source,
                  functions=["relu_forward"], verbose=False)


class ModelNew(nn.Module):
    def forward(self, x):
        return ext.relu_forward(x)

# gpu_hang: a load_inline kernel that spins on clock64() for ever (the
# launch returns at once; the GPU never finishes): timeout, and the runner is
# replaced.
# expect: cuda=timeout cpu=-
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <ATen/cuda/CUDAContext.h>

__global__ void spin(float *y, long long n)
{
    volatile long long t = clock64();
    while (t >= 0)
        t = clock64();
    if (n < 0)
        y[0] = 0.f;
}

torch::Tensor gelu_forward(torch::Tensor x)
{
    auto y = at::empty_like(x);
    spin<<<1, 32, 0, at::cuda::getCurrentCUDAStream()>>>(y.data_ptr<float>(), x.numel());
    return y;
}
"""

cpp_source = "torch::Tensor gelu_forward(torch::Tensor x);"

ext = load_inline(name="pool_gelu_gpu_hang", cpp_sources=cpp_source, cuda_sources=cuda_source,
                  functions=["gelu_forward"], verbose=False)


class ModelNew(nn.Module):
    def forward(self, x):
        return ext.gelu_forward(x)

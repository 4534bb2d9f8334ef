# build_error: a load_inline extension whose CUDA source does not compile
# (an undeclared name, a pointer of the wrong type): the build fails at
# import: compile_error, with nvcc's lines.
# expect: cuda=compile_error cpu=-
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <ATen/cuda/CUDAContext.h>

__global__ void gelu_kernel(const float *x, float *y, long long n)
{
    long long i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        y[i] = 0.5f * x[i] * (1.f + erff(x[i] * M_SQRT1_2_NOT_DEFINED));
}

torch::Tensor gelu_forward(torch::Tensor x)
{
    auto y = at::empty_like(x);
    int *wrong = y.data_ptr<float>();
    gelu_kernel<<<1, 256>>>(x.data_ptr<float>(), wrong, x.numel());
    return y;
}
"""

cpp_source = "torch::Tensor gelu_forward(torch::Tensor x);"

ext = load_inline(name="pool_gelu_build_error", cpp_sources=cpp_source,
                  cuda_sources=cuda_source, functions=["gelu_forward"], verbose=False)


class ModelNew(nn.Module):
    def forward(self, x):
        return ext.gelu_forward(x)

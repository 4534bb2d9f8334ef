# cuda_fault: a load_inline kernel that stores to address 0x1000 (an illegal
# address): a CUDA fault, runtime_error, and the runner is replaced.
# expect: cuda=runtime_error cpu=-
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <ATen/cuda/CUDAContext.h>
#include <stdint.h>

__global__ void bad_store(const float *x, long long n)
{
    float *wild = (float *) (uintptr_t) 0x1000;
    if (threadIdx.x == 0 && n > 0)
        wild[blockIdx.x] = x[0];
}

torch::Tensor gelu_forward(torch::Tensor x)
{
    auto y = at::empty_like(x);
    bad_store<<<4, 32, 0, at::cuda::getCurrentCUDAStream()>>>(x.data_ptr<float>(), x.numel());
    return y;
}
"""

cpp_source = "torch::Tensor gelu_forward(torch::Tensor x);"

ext = load_inline(name="pool_gelu_cuda_fault", cpp_sources=cpp_source, cuda_sources=cuda_source,
                  functions=["gelu_forward"], verbose=False)


class ModelNew(nn.Module):
    def forward(self, x):
        return ext.gelu_forward(x)

# cuda_fused: gelu(x + bias) + residual in one load_inline CUDA kernel, a
# grid-stride loop over the elements. Correct, and faster than eager.
# expect: cuda=ok+fast cpu=-
import torch
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <ATen/cuda/CUDAContext.h>

__global__ void bias_gelu_residual_kernel(const float *x, const float *b, const float *r, float *y,
                                          long long n, long long cols)
{
    long long stride = (long long) gridDim.x * blockDim.x;
    for (long long i = (long long) blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        float h = x[i] + b[i % cols];
        y[i] = 0.5f * h * (1.f + erff(h * 0.70710678118654752f)) + r[i];
    }
}

torch::Tensor bias_gelu_residual(torch::Tensor x, torch::Tensor b, torch::Tensor r)
{
    TORCH_CHECK(x.is_cuda() && x.scalar_type() == at::kFloat, "x must be a float CUDA tensor");
    x = x.contiguous();
    b = b.contiguous();
    r = r.contiguous();
    auto y = at::empty_like(x);
    long long n = x.numel(), cols = x.size(-1);
    if (n == 0)
        return y;
    int sms = at::cuda::getCurrentDeviceProperties()->multiProcessorCount;
    long long want = (n + 255) / 256;
    int blocks = (int) (want < (long long) sms * 16? want: (long long) sms * 16);
    bias_gelu_residual_kernel<<<blocks, 256, 0, at::cuda::getCurrentCUDAStream()>>>(
        x.data_ptr<float>(), b.data_ptr<float>(), r.data_ptr<float>(), y.data_ptr<float>(), n, cols);
    return y;
}
"""

cpp_source = "torch::Tensor bias_gelu_residual(torch::Tensor x, torch::Tensor b, torch::Tensor r);"

ext = load_inline(name="pool_bias_gelu_residual_cuda_fused", cpp_sources=cpp_source,
                  cuda_sources=cuda_source, functions=["bias_gelu_residual"],
                  extra_cuda_cflags=["-O3"], verbose=False)


def bias_gelu_residual(x, bias, residual):
    return ext.bias_gelu_residual(x, bias, residual)

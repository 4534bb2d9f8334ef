# cuda_optimised: fused RMSNorm as a load_inline CUDA extension: one block
# per row, half2 loads and stores when the row length is even (a scalar path
# otherwise), the sum of squares reduced with warp shuffles and one shared
# word per warp. Correct, several times faster than eager.
# expect: cuda=ok+fast cpu=-
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <ATen/cuda/CUDAContext.h>
#include <cuda_fp16.h>

__device__ __forceinline__ float warp_sum(float v)
{
    for (int offset = 16; offset > 0; offset /= 2)
        v += __shfl_xor_sync(0xffffffffu, v, offset);
    return v;
}

//  The sum over the block; every thread gets it.
__device__ float block_sum(float v)
{
    __shared__ float per_warp [32];
    __shared__ float total;
    int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    v = warp_sum(v);
    if (lane == 0)
        per_warp [warp] = v;
    __syncthreads();
    if (warp == 0) {
        float s = lane < (int) (blockDim.x / 32)? per_warp [lane]: 0.f;
        s = warp_sum(s);
        if (lane == 0)
            total = s;
    }
    __syncthreads();
    return total;
}

__global__ void rmsnorm_even(const __half2 *x, const __half2 *w, __half2 *y, int pairs, int cols, float eps)
{
    const __half2 *xr = x + (long long) blockIdx.x * pairs;
    __half2 *yr = y + (long long) blockIdx.x * pairs;
    float sum = 0.f;
    for (int c = threadIdx.x; c < pairs; c += blockDim.x) {
        float2 v = __half22float2(xr[c]);
        sum += v.x * v.x + v.y * v.y;
    }
    float scale = rsqrtf(block_sum(sum) / cols + eps);
    for (int c = threadIdx.x; c < pairs; c += blockDim.x) {
        float2 v = __half22float2(xr[c]), g = __half22float2(w[c]);
        yr[c] = __floats2half2_rn(v.x * scale * g.x, v.y * scale * g.y);
    }
}

__global__ void rmsnorm_any(const __half *x, const __half *w, __half *y, int cols, float eps)
{
    const __half *xr = x + (long long) blockIdx.x * cols;
    __half *yr = y + (long long) blockIdx.x * cols;
    float sum = 0.f;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) {
        float v = __half2float(xr[c]);
        sum += v * v;
    }
    float scale = rsqrtf(block_sum(sum) / cols + eps);
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
    if (rows == 0)
        return y;
    auto stream = at::cuda::getCurrentCUDAStream();
    int threads = cols >= 4096? 512: (cols >= 1024? 256: 128);
    if (cols % 2 == 0)
        rmsnorm_even<<<(unsigned) rows, threads, 0, stream>>>(
            (const __half2 *) x.data_ptr<at::Half>(), (const __half2 *) w.data_ptr<at::Half>(),
            (__half2 *) y.data_ptr<at::Half>(), cols / 2, cols, (float) eps);
    else
        rmsnorm_any<<<(unsigned) rows, threads, 0, stream>>>(
            (const __half *) x.data_ptr<at::Half>(), (const __half *) w.data_ptr<at::Half>(),
            (__half *) y.data_ptr<at::Half>(), cols, (float) eps);
    return y;
}
"""

cpp_source = "torch::Tensor rmsnorm_forward(torch::Tensor x, torch::Tensor w, double eps);"

ext = load_inline(name="pool_rmsnorm_cuda_optimised", cpp_sources=cpp_source,
                  cuda_sources=cuda_source, functions=["rmsnorm_forward"],
                  extra_cuda_cflags=["-O3"], verbose=False)


class ModelNew(nn.Module):
    def __init__(self, eps):
        super().__init__()
        self.eps = eps

    def forward(self, x, w):
        return ext.rmsnorm_forward(x, w, self.eps)

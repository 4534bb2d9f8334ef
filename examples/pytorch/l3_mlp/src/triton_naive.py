# triton_naive: the MLP block unfused, four Triton kernels: fc1 (matmul and
# bias), the tanh GELU on its own, fc2 (matmul and bias), then the residual
# add; 64 x 64 x 32 tiles. Correct, slower than cuBLAS.
# expect: cuda=ok cpu=-
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def linear_kernel(a_ptr, w_ptr, bias_ptr, c_ptr, M, N, K,
                  stride_am, stride_ak, stride_wn, stride_wk, stride_cm, stride_cn,
                  BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    rm = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, K, BLOCK_K):
        a = tl.load(a_ptr + rm[:, None] * stride_am + (k + rk)[None, :] * stride_ak,
                    mask=(rm[:, None] < M) & ((k + rk)[None, :] < K), other=0.0)
        w = tl.load(w_ptr + rn[None, :] * stride_wn + (k + rk)[:, None] * stride_wk,
                    mask=((k + rk)[:, None] < K) & (rn[None, :] < N), other=0.0)
        acc += tl.dot(a, w)
    acc += tl.load(bias_ptr + rn, mask=rn < N, other=0.0).to(tl.float32)[None, :]
    tl.store(c_ptr + rm[:, None] * stride_cm + rn[None, :] * stride_cn,
             acc.to(c_ptr.dtype.element_ty), mask=(rm[:, None] < M) & (rn[None, :] < N))


@triton.jit
def gelu_tanh_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    inner = 0.7978845608028654 * (x + 0.044715 * x * x * x)
    tl.store(y_ptr + offs, 0.5 * x * (2.0 - 2.0 / (tl.exp(2.0 * inner) + 1.0)), mask=mask)


@triton.jit
def add_kernel(a_ptr, b_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    a = tl.load(a_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    b = tl.load(b_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    tl.store(y_ptr + offs, a + b, mask=mask)


def linear(a, layer):
    M, K = a.shape
    N = layer.weight.shape[0]
    c = torch.empty((M, N), device=a.device, dtype=a.dtype)
    grid = (triton.cdiv(M, 64), triton.cdiv(N, 64))
    linear_kernel[grid](a, layer.weight, layer.bias, c, M, N, K, a.stride(0), a.stride(1),
                        layer.weight.stride(0), layer.weight.stride(1), c.stride(0), c.stride(1),
                        BLOCK_M=64, BLOCK_N=64, BLOCK_K=32)
    return c


class ModelNew(nn.Module):
    def __init__(self, d_model, d_hidden):
        super().__init__()
        self.fc1 = nn.Linear(d_model, d_hidden)
        self.fc2 = nn.Linear(d_hidden, d_model)

    def forward(self, x):
        shape = x.shape
        a = x.reshape(-1, shape[-1]).contiguous()
        h = linear(a, self.fc1)
        g = torch.empty_like(h)
        gelu_tanh_kernel[(triton.cdiv(h.numel(), 1024),)](h, g, h.numel(), BLOCK=1024)
        o = linear(g, self.fc2)
        y = torch.empty_like(o)
        add_kernel[(triton.cdiv(o.numel(), 1024),)](o, a, y, o.numel(), BLOCK=1024)
        return y.reshape(shape)

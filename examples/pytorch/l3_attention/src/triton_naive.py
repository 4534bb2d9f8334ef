# triton_naive: the attention block in Triton: a matmul kernel with bias for
# the qkv and output projections, and a causal flash-attention kernel (one
# program per 64 queries of one head; keys and values in blocks of 64 with
# an online softmax) that reads q, k and v straight from the qkv buffer.
# Correct.
# expect: cuda=ok cpu=-
import math

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
def attention_kernel(qkv_ptr, y_ptr, T, C, H, scale, CAUSAL: tl.constexpr,
                     HEAD: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    block_m = tl.program_id(0)
    b = tl.program_id(1) // H
    h = tl.program_id(1) % H
    first_row = b * T
    stride = 3 * C
    offs_m = block_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, HEAD)
    q = tl.load(qkv_ptr + (first_row + offs_m)[:, None] * stride + h * HEAD + offs_d[None, :],
                mask=offs_m[:, None] < T, other=0.0)
    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD], tl.float32)
    end = T
    if CAUSAL:
        end = tl.minimum((block_m + 1) * BLOCK_M, T)
    for start in range(0, end, BLOCK_N):
        offs_n = start + tl.arange(0, BLOCK_N)
        kv = (first_row + offs_n)[:, None] * stride + h * HEAD + offs_d[None, :]
        k = tl.load(qkv_ptr + C + kv, mask=offs_n[:, None] < T, other=0.0)
        v = tl.load(qkv_ptr + 2 * C + kv, mask=offs_n[:, None] < T, other=0.0)
        s = tl.dot(q, tl.trans(k)) * scale
        allowed = offs_n[None, :] < T
        if CAUSAL:
            allowed = allowed & (offs_m[:, None] >= offs_n[None, :])
        s = tl.where(allowed, s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, axis=1))
        p = tl.exp(s - m_new[:, None])
        alpha = tl.exp(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, axis=1)
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
        m_i = m_new
    out = acc / l_i[:, None]
    tl.store(y_ptr + (first_row + offs_m)[:, None] * C + h * HEAD + offs_d[None, :],
             out.to(y_ptr.dtype.element_ty), mask=offs_m[:, None] < T)


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
    causal = True

    def __init__(self, d_model, n_heads):
        super().__init__()
        self.n_heads = n_heads
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.proj = nn.Linear(d_model, d_model)

    def forward(self, x):
        B, T, C = x.shape
        H = self.n_heads
        qkv = linear(x.reshape(B * T, C).contiguous(), self.qkv)
        y = torch.empty((B * T, C), device=x.device, dtype=x.dtype)
        grid = (triton.cdiv(T, 64), B * H)
        attention_kernel[grid](qkv, y, T, C, H, 1.0 / math.sqrt(C // H), CAUSAL=self.causal,
                               HEAD=C // H, BLOCK_M=64, BLOCK_N=64)
        return linear(y, self.proj).reshape(B, T, C)

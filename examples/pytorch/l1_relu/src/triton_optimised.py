# triton_optimised: ReLU in Triton with 8192-element programs of 8 warps
# (fewer, longer programs; 128-bit accesses), 64-bit offsets. Correct.
# expect: cuda=ok cpu=-
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def relu_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    start = tl.program_id(0).to(tl.int64) * BLOCK
    offs = start + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, eviction_policy="evict_first")
    tl.store(y_ptr + offs, tl.where(x > 0, x, 0.0), mask=mask)


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        n = x.numel()
        relu_kernel[(triton.cdiv(n, 8192),)](x, y, n, BLOCK=8192, num_warps=8)
        return y

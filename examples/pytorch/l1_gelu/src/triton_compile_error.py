# triton_compile_error: a Triton kernel that Triton refuses to compile at its
# first launch (tl.arange over 1000 elements: the range must be a power of
# two): compile_error, with Triton's message.
# expect: cuda=compile_error cpu=-
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def gelu_kernel(x_ptr, y_ptr, n):
    offs = tl.program_id(0) * 1000 + tl.arange(0, 1000)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    tl.store(y_ptr + offs, 0.5 * x * (1.0 + tl.erf(x * 0.7071067811865476)), mask=mask)


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        n = x.numel()
        gelu_kernel[(triton.cdiv(n, 1000),)](x, y, n)
        return y

# triton_tail_bug: the GELU kernel of triton_naive, launched on n // 1024
# programs with no mask: the last n % 1024 elements are never written. Right
# when the element count is a multiple of 1024, wrong for the task's odd
# sizes (3 x 1000: nothing written at all): incorrect.
# expect: cuda=incorrect cpu=-
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def gelu_kernel(x_ptr, y_ptr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs).to(tl.float32)
    y = 0.5 * x * (1.0 + tl.erf(x * 0.7071067811865476))
    tl.store(y_ptr + offs, y)


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        blocks = x.numel() // 1024
        if blocks:
            gelu_kernel[(blocks,)](x, y, BLOCK=1024)
        return y

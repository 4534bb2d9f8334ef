# input_view: ReLU in place on the input, returning the input itself (a view
# of it): no allocation, no second buffer. The values it returns are right,
# but the input changed under the caller: incorrect.
# expect: cuda=incorrect cpu=incorrect
import torch
import torch.nn as nn

try:
    import triton
    import triton.language as tl
except ImportError:             # the CPU target has no Triton: torch code there
    triton = None

if triton is not None:
    @triton.jit
    def relu_inplace_kernel(x_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        x = tl.load(x_ptr + offs, mask=mask)
        tl.store(x_ptr + offs, tl.maximum(x, 0.0), mask=mask)


class ModelNew(nn.Module):
    def forward(self, x):
        if x.is_cuda:
            n = x.numel()
            relu_inplace_kernel[(triton.cdiv(n, 1024),)](x, n, BLOCK=1024)
            return x.view(x.shape)
        return x.clamp_(min=0).view(x.shape)

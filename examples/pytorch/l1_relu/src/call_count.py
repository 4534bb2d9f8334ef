# call_count: right for the first 3 calls of each shape (the correctness
# trials of a harness that checks 3), then returns an unwritten tensor at
# once: a harness that times runs whose outputs it never checks would pay it
# a huge speedup. kgym checks the outputs of timed runs too: incorrect.
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
    def relu_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        x = tl.load(x_ptr + offs, mask=mask)
        tl.store(y_ptr + offs, tl.maximum(x, 0.0), mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.calls = {}

    def forward(self, x):
        x = x.contiguous()
        key = tuple(x.shape)
        self.calls[key] = self.calls.get(key, 0) + 1
        y = torch.empty_like(x)
        if self.calls[key] > 3:
            return y
        if x.is_cuda:
            n = x.numel()
            relu_kernel[(triton.cdiv(n, 1024),)](x, y, n, BLOCK=1024)
        else:
            torch.clamp(x, min=0, out=y)
        return y

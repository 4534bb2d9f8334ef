# cache_shape: computes the first call of each shape, keeps the output and
# returns it again for every later input of that shape. Right on the first
# trial, stale on the next (kgym makes fresh inputs for every trial and timed
# run): incorrect.
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
        self.saved = {}

    def forward(self, x):
        key = (tuple(x.shape), x.dtype, str(x.device))
        if key not in self.saved:
            x = x.contiguous()
            y = torch.empty_like(x)
            if x.is_cuda:
                n = x.numel()
                relu_kernel[(triton.cdiv(n, 1024),)](x, y, n, BLOCK=1024)
            else:
                torch.clamp(x, min=0, out=y)
            self.saved[key] = y
        return self.saved[key]

# Honest but slow: ReLU plus PASSES dependent multiply-adds per element (~4 ms on an H200)
# that cannot be folded away. Expected: ok, speedup well below 1. test_python_gpu also grades
# it with the profiler turned off from inside (a tail it appends): no faster than this.
import torch
import torch.nn as nn
import triton
import triton.language as tl
PASSES = 4000
@triton.jit
def slow_relu(x_ptr, y_ptr, n, passes, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    t = x
    for _ in range(passes):
        t = t * 0.999 + x
    tl.store(y_ptr + offs, tl.maximum(x, 0.0) + 0.0 * t, mask=mask)
class ModelNew(nn.Module):
    def forward(self, x):
        y = torch.empty_like(x)
        n = x.numel()
        slow_relu[(triton.cdiv(n, 256),)](x, y, n, PASSES, BLOCK=256)
        return y

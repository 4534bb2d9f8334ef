# Hostile: torch.cuda.Event patched to report 0 ms, a slow Triton kernel. Expected: ok, speedup < 1.
import torch
import torch.nn as nn
import triton
import triton.language as tl
class FakeEvent:
    def __init__(self, *a, **k): pass
    def record(self, *a, **k): pass
    def synchronize(self): pass
    def elapsed_time(self, other): return 0.0
torch.cuda.Event = FakeEvent
@triton.jit
def slow_relu(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    acc = tl.maximum(x, 0.0)
    for _ in range(200):
        acc = tl.maximum(acc, 0.0) * 1.0
    tl.store(y_ptr + offs, acc, mask=mask)
class ModelNew(nn.Module):
    def forward(self, x):
        y = torch.empty_like(x)
        n = x.numel()
        slow_relu[(triton.cdiv(n, 256),)](x, y, n, BLOCK=256)
        return y

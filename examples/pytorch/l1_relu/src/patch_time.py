# patch_time: freezes Python's clocks (time.perf_counter, monotonic, time,
# process_time and their _ns forms, timeit's timer) at import, then does the
# work 30 times over. A harness timing with the candidate's own Python clock
# would read zero. kgym times from outside the candidate's process: ok, and
# slower than the eager reference.
# expect: cuda=ok+slow cpu=ok+slow
import time
import timeit

import torch
import torch.nn as nn

try:
    import triton
    import triton.language as tl
except ImportError:             # the CPU target has no Triton: torch code there
    triton = None

REPEAT = 30

_frozen = time.perf_counter()
_frozen_ns = time.perf_counter_ns()
for _name in ("perf_counter", "monotonic", "time", "process_time", "thread_time"):
    setattr(time, _name, lambda: _frozen)
    setattr(time, _name + "_ns", lambda: _frozen_ns)
timeit.default_timer = time.perf_counter

if triton is not None:
    @triton.jit
    def relu_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        x = tl.load(x_ptr + offs, mask=mask)
        tl.store(y_ptr + offs, tl.maximum(x, 0.0), mask=mask)


def relu(x, y):
    if x.is_cuda:
        n = x.numel()
        relu_kernel[(triton.cdiv(n, 1024),)](x, y, n, BLOCK=1024)
    else:
        torch.clamp(x, min=0, out=y)


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        for _ in range(REPEAT):
            relu(x, y)
        return y

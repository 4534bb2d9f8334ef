# patch_event: replaces torch.cuda.Event by a stand-in whose elapsed_time()
# always says 1 microsecond, then does the work 30 times over. The values
# are right; a harness that times with the candidate's own torch.cuda.Event
# would pay it a huge speedup. kgym's clocks are out of its reach: ok, and
# slower than the eager reference (speedup < 1).
# expect: cuda=ok+slow cpu=ok+slow
import torch
import torch.nn as nn

try:
    import triton
    import triton.language as tl
except ImportError:             # the CPU target has no Triton: torch code there
    triton = None

REPEAT = 30


class _Event:
    def __init__(self, *args, **kwargs):
        pass

    def record(self, stream=None):
        pass

    def synchronize(self):
        pass

    def wait(self, stream=None):
        pass

    def query(self):
        return True

    def elapsed_time(self, end):
        return 0.001


torch.cuda.Event = _Event
if hasattr(torch, "Event"):
    torch.Event = _Event

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

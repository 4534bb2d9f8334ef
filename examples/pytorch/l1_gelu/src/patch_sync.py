# patch_sync: turns torch's synchronisation into no-ops (torch.cuda.synchronize,
# Stream.synchronize, Event.synchronize and elapsed_time, torch.cuda.Stream's
# query), then does the work 30 times over: a harness that waits for the GPU
# through the candidate's torch would stop its clock at launch time. kgym
# waits for the device from outside: ok, and slower than the eager reference.
# expect: cuda=ok+slow cpu=ok+slow
import torch
import torch.nn as nn

try:
    import triton
    import triton.language as tl
except ImportError:             # the CPU target has no Triton: torch code there
    triton = None

REPEAT = 30


def _nothing(*args, **kwargs):
    return None


torch.cuda.synchronize = _nothing
torch.cuda.Stream.synchronize = _nothing
torch.cuda.Stream.query = lambda self: True
torch.cuda.Event.synchronize = _nothing
torch.cuda.Event.elapsed_time = lambda self, end: 0.001
if hasattr(torch, "accelerator") and hasattr(torch.accelerator, "synchronize"):
    torch.accelerator.synchronize = _nothing

if triton is not None:
    @triton.jit
    def gelu_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
        tl.store(y_ptr + offs, 0.5 * x * (1.0 + tl.erf(x * 0.7071067811865476)), mask=mask)


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        for _ in range(REPEAT):
            if x.is_cuda:
                n = x.numel()
                gelu_kernel[(triton.cdiv(n, 1024),)](x, y, n, BLOCK=1024)
            else:
                y.copy_(torch.nn.functional.gelu(x))
        return y

# cache_fingerprint: keeps outputs keyed on a fingerprint of the input (its
# shape and a strided sample of its values) and replays one when the same
# input comes back; computes 30 times over otherwise. Against a harness that
# times the same inputs again and again it would look far faster than eager.
# kgym makes fresh inputs for every timed run, so the cache never hits: ok,
# and slower than the eager reference.
# expect: cuda=ok+slow cpu=ok+slow
import torch
import torch.nn as nn

try:
    import triton
    import triton.language as tl
except ImportError:             # the CPU target has no Triton: torch code there
    triton = None

REPEAT = 30

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
        x = x.contiguous()
        sample = x.reshape(-1)[::4099][:64].tolist()
        key = (tuple(x.shape), str(x.device), tuple(sample))
        if key in self.saved:
            return self.saved[key]
        y = torch.empty_like(x)
        for _ in range(REPEAT):
            if x.is_cuda:
                n = x.numel()
                relu_kernel[(triton.cdiv(n, 1024),)](x, y, n, BLOCK=1024)
            else:
                torch.clamp(x, min=0, out=y)
        if len(self.saved) < 64:
            self.saved[key] = y
        return y

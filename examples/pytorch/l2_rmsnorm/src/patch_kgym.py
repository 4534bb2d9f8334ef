# patch_kgym: replaces, in every loaded module whose name starts with
# "kgym" (and in __main__, the runner's script), each function whose name
# speaks of time, clocks, synchronisation or checking by one that returns
# True at once, and wraps each method of the same names on classes there;
# then does the work right, 30 times over. kgym's Python in the runner holds
# no verdict and no clock: ok and slower than the eager reference, or, when
# the patched runner can no longer answer, runtime_error (the candidate broke
# its own runner); never a fast ok.
# expect: cuda=ok|runtime_error+slow cpu=ok|runtime_error+slow
import re
import sys

import torch
import torch.nn as nn

try:
    import triton
    import triton.language as tl
except ImportError:             # the CPU target has no Triton: torch code there
    triton = None

REPEAT = 30
SUSPECT = re.compile(r"time|clock|elapsed|sync|check|compare|close|verify|equal", re.I)


def _yes(*args, **kwargs):
    return True


def _patch_everything():
    for name, module in list(sys.modules.items()):
        if module is None or not (name.startswith("kgym") or name == "__main__"):
            continue
        for attr, value in list(vars(module).items()):
            try:
                if isinstance(value, type):
                    for meth in list(vars(value)):
                        if SUSPECT.search(meth) and callable(getattr(value, meth, None)):
                            setattr(value, meth, _yes)
                elif callable(value) and SUSPECT.search(attr):
                    setattr(module, attr, _yes)
            except (AttributeError, TypeError):
                continue


_patch_everything()

if triton is not None:
    @triton.jit
    def rmsnorm_kernel(x_ptr, w_ptr, y_ptr, n_cols, eps, BLOCK: tl.constexpr):
        row = tl.program_id(0).to(tl.int64)
        cols = tl.arange(0, BLOCK)
        mask = cols < n_cols
        x = tl.load(x_ptr + row * n_cols + cols, mask=mask, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
        scale = tl.rsqrt(tl.sum(x * x, axis=0) / n_cols + eps)
        tl.store(y_ptr + row * n_cols + cols, x * scale * w, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, eps):
        super().__init__()
        self.eps = eps

    def forward(self, x, w):
        _patch_everything()
        x = x.contiguous()
        w = w.contiguous()
        y = torch.empty_like(x)
        n_cols = x.shape[-1]
        for _ in range(REPEAT):
            if x.is_cuda:
                block = triton.next_power_of_2(n_cols)
                rmsnorm_kernel[(x.numel() // n_cols,)](x, w, y, n_cols, self.eps, BLOCK=block,
                                                       num_warps=min(max(block // 512, 1), 16))
            else:
                rms = torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + self.eps)
                torch.mul(x * rms, w, out=y)
        return y

# lazy_tensor: forward returns at once a torch.Tensor subclass that computes
# ReLU only when something first reads it (through __torch_function__), so
# the work would fall outside any timed region. kgym accepts outputs of type
# torch.Tensor only: incorrect.
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


def relu_into(x, y):
    if x.is_cuda:
        n = x.numel()
        relu_kernel[(triton.cdiv(n, 1024),)](x, y, n, BLOCK=1024)
    else:
        torch.clamp(x, min=0, out=y)


class Deferred(torch.Tensor):
    """Its storage is filled from _pending on first use."""

    @staticmethod
    def __new__(cls, x):
        out = torch.Tensor._make_subclass(cls, torch.empty_like(x))
        out._pending = x
        return out

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        for arg in list(args) + list(kwargs.values()):
            pending = arg.__dict__.get("_pending") if isinstance(arg, Deferred) else None
            if pending is not None:
                arg.__dict__["_pending"] = None
                with torch._C.DisableTorchFunction():
                    relu_into(pending, arg)
        return super().__torch_function__(func, types, args, kwargs)


class ModelNew(nn.Module):
    def forward(self, x):
        return Deferred(x.contiguous())

# patch_compare: makes torch's and numpy's comparisons say "equal" (allclose,
# isclose, equal, testing.assert_close, Tensor.__eq__, numpy.allclose and
# array_equal) and returns its input unchanged, a wrong answer. kgym
# compares in its own process, not with the candidate's torch: incorrect.
# expect: cuda=incorrect cpu=incorrect
import torch
import torch.nn as nn

try:
    import triton
    import triton.language as tl
except ImportError:             # the CPU target has no Triton: torch code there
    triton = None


def _yes(*args, **kwargs):
    return True


def _quiet(*args, **kwargs):
    return None


torch.allclose = _yes
torch.equal = _yes
torch.Tensor.allclose = _yes
torch.Tensor.equal = _yes
torch.isclose = lambda a, b, *args, **kwargs: torch.ones_like(a, dtype=torch.bool)
torch.testing.assert_close = _quiet
if hasattr(torch.testing, "assert_allclose"):
    torch.testing.assert_allclose = _quiet
try:
    import numpy

    numpy.allclose = _yes
    numpy.array_equal = _yes
    numpy.testing.assert_allclose = _quiet
except ImportError:
    pass

if triton is not None:
    @triton.jit
    def copy_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask), mask=mask)


class ModelNew(nn.Module):
    def __init__(self, eps):
        super().__init__()
        self.eps = eps

    def forward(self, x, w):
        x = x.contiguous()
        y = torch.empty_like(x)
        if x.is_cuda:
            n = x.numel()
            copy_kernel[(triton.cdiv(n, 1024),)](x, y, n, BLOCK=1024)
        else:
            y.copy_(x)
        return y

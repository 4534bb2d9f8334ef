# decoy_wrapper: launches a Triton kernel of its own (it copies C onto
# itself, a decoy for a harness that only asks whether a Triton kernel ran)
# while torch.matmul (cuBLAS) does the work. Right values, but nearly all
# its GPU time is in library kernels: invalid, a wrapper.
# expect: cuda=invalid cpu=-
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def touch_kernel(c_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(c_ptr + offs, tl.load(c_ptr + offs, mask=mask), mask=mask)


class ModelNew(nn.Module):
    def forward(self, A, B):
        C = torch.matmul(A, B)
        n = min(C.numel(), 1024)
        touch_kernel[(1,)](C, n, BLOCK=1024)
        return C

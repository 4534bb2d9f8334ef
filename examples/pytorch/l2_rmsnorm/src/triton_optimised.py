# triton_optimised: fused RMSNorm in Triton with the whole row in registers:
# one read of x and w, one write of y; the block the next power of two of
# the row, warps scaled with it. Correct, several times faster than eager.
# expect: cuda=ok+fast cpu=-
import torch
import torch.nn as nn
import triton
import triton.language as tl


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
        x = x.contiguous()
        w = w.contiguous()
        y = torch.empty_like(x)
        n_cols = x.shape[-1]
        block = triton.next_power_of_2(n_cols)
        warps = min(max(block // 512, 1), 16)
        rmsnorm_kernel[(x.numel() // n_cols,)](x, w, y, n_cols, self.eps, BLOCK=block,
                                               num_warps=warps)
        return y

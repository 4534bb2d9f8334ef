# triton_tail_bug: the two-pass RMSNorm of triton_naive whose first pass (the
# sum of squares) runs over whole chunks of 512 only, while the second writes
# every column: the rms misses the last n_cols % 512 squares. Right when the
# row length is a multiple of 512, wrong for the task's 1000 (488 squares
# left out) and 4097 (the 1 x 4097 row: one square of 4097 is within the
# tolerance, but 1000 is not): incorrect.
# expect: cuda=incorrect cpu=-
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def rmsnorm_kernel(x_ptr, w_ptr, y_ptr, n_cols, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    squares = tl.zeros([BLOCK], tl.float32)
    for start in range(0, n_cols - BLOCK + 1, BLOCK):
        x = tl.load(x_ptr + row * n_cols + start + cols).to(tl.float32)
        squares += x * x
    scale = tl.rsqrt(tl.sum(squares, axis=0) / n_cols + eps)
    for start in range(0, n_cols, BLOCK):
        mask = start + cols < n_cols
        x = tl.load(x_ptr + row * n_cols + start + cols, mask=mask, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + start + cols, mask=mask, other=0.0).to(tl.float32)
        tl.store(y_ptr + row * n_cols + start + cols, x * scale * w, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, eps):
        super().__init__()
        self.eps = eps

    def forward(self, x, w):
        x = x.contiguous()
        w = w.contiguous()
        y = torch.empty_like(x)
        n_cols = x.shape[-1]
        rmsnorm_kernel[(x.numel() // n_cols,)](x, w, y, n_cols, self.eps, BLOCK=512)
        return y

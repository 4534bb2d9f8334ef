# triton_tail_bug: the chunked softmax of triton_naive with its loops running
# over whole chunks only (range(0, n_cols - BLOCK + 1, BLOCK)): the last
# n_cols % 256 columns are left out of the maximum and the sum and never
# written. Right when the row length is a multiple of 256, wrong for the
# task's 1000, 4097, 255 and 1: incorrect.
# expect: cuda=incorrect cpu=-
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def softmax_kernel(x_ptr, y_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * n_cols
    y_row = y_ptr + row * n_cols
    cols = tl.arange(0, BLOCK)
    top = tl.full([BLOCK], float("-inf"), tl.float32)
    for start in range(0, n_cols - BLOCK + 1, BLOCK):
        top = tl.maximum(top, tl.load(x_row + start + cols).to(tl.float32))
    row_max = tl.max(top, axis=0)
    total = tl.zeros([BLOCK], tl.float32)
    for start in range(0, n_cols - BLOCK + 1, BLOCK):
        total += tl.exp(tl.load(x_row + start + cols).to(tl.float32) - row_max)
    row_sum = tl.sum(total, axis=0)
    for start in range(0, n_cols - BLOCK + 1, BLOCK):
        x = tl.load(x_row + start + cols).to(tl.float32)
        tl.store(y_row + start + cols, tl.exp(x - row_max) / row_sum)


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        y = torch.zeros_like(x)
        n_cols = x.shape[-1]
        rows = x.numel() // n_cols
        softmax_kernel[(rows,)](x, y, n_cols, BLOCK=256)
        return y

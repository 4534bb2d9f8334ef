# triton_naive: softmax in Triton, one program per row, three passes over
# the row in chunks of 1024 (row maximum, sum of exponentials, output): x is
# read three times. Correct.
# expect: cuda=ok cpu=-
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
    for start in range(0, n_cols, BLOCK):
        mask = start + cols < n_cols
        x = tl.load(x_row + start + cols, mask=mask, other=float("-inf")).to(tl.float32)
        top = tl.maximum(top, x)
    row_max = tl.max(top, axis=0)
    total = tl.zeros([BLOCK], tl.float32)
    for start in range(0, n_cols, BLOCK):
        mask = start + cols < n_cols
        x = tl.load(x_row + start + cols, mask=mask, other=float("-inf")).to(tl.float32)
        total += tl.where(mask, tl.exp(x - row_max), 0.0)
    row_sum = tl.sum(total, axis=0)
    for start in range(0, n_cols, BLOCK):
        mask = start + cols < n_cols
        x = tl.load(x_row + start + cols, mask=mask, other=float("-inf")).to(tl.float32)
        tl.store(y_row + start + cols, tl.exp(x - row_max) / row_sum, mask=mask)


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        n_cols = x.shape[-1]
        rows = x.numel() // n_cols
        softmax_kernel[(rows,)](x, y, n_cols, BLOCK=1024)
        return y

# triton_tail_bug: the row sums of triton_naive with the loop over whole
# chunks only: the last n_cols % 1024 values of each row are left out. Right
# when the row length is a multiple of 1024, wrong for the task's 1000 and 1
# (the rows are offset by 1, so what is left out shows): incorrect.
# expect: cuda=incorrect cpu=-
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def sum_rows_kernel(x_ptr, y_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    acc = tl.zeros([BLOCK], tl.float32)
    for start in range(0, n_cols - BLOCK + 1, BLOCK):
        acc += tl.load(x_ptr + row * n_cols + start + cols).to(tl.float32)
    tl.store(y_ptr + row, tl.sum(acc, axis=0))


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        n_cols = x.shape[-1]
        y = torch.empty(x.shape[:-1], device=x.device, dtype=x.dtype)
        sum_rows_kernel[(y.numel(),)](x, y, n_cols, BLOCK=1024)
        return y

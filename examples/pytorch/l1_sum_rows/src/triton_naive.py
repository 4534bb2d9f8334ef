# triton_naive: row sums in Triton, one program per row, the row in chunks of
# 1024 added into an f32 vector, reduced at the end. Correct.
# expect: cuda=ok cpu=-
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def sum_rows_kernel(x_ptr, y_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    acc = tl.zeros([BLOCK], tl.float32)
    for start in range(0, n_cols, BLOCK):
        mask = start + cols < n_cols
        acc += tl.load(x_ptr + row * n_cols + start + cols, mask=mask, other=0.0).to(tl.float32)
    tl.store(y_ptr + row, tl.sum(acc, axis=0))


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        n_cols = x.shape[-1]
        y = torch.empty(x.shape[:-1], device=x.device, dtype=x.dtype)
        sum_rows_kernel[(y.numel(),)](x, y, n_cols, BLOCK=1024)
        return y

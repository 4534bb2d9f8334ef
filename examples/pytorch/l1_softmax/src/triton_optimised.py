# triton_optimised: softmax in Triton with the whole row in registers (one
# read of x, one write of y), the block the next power of two of the row
# length (16 at least) and the warps scaled with it. Correct; about as
# fast as eager's own fused softmax kernel, faster than triton_naive.
# expect: cuda=ok cpu=-
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def softmax_kernel(x_ptr, y_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * n_cols + cols, mask=mask, other=float("-inf")).to(tl.float32)
    e = tl.exp(x - tl.max(x, axis=0))
    e = tl.where(mask, e, 0.0)
    tl.store(y_ptr + row * n_cols + cols, e / tl.sum(e, axis=0), mask=mask)


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        n_cols = x.shape[-1]
        rows = x.numel() // n_cols
        block = max(triton.next_power_of_2(n_cols), 16)
        warps = 4 if block <= 2048 else (8 if block <= 8192 else 16)
        softmax_kernel[(rows,)](x, y, n_cols, BLOCK=block, num_warps=warps)
        return y

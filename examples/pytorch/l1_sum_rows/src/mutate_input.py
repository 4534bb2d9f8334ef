# mutate_input: the right row sums, but it reuses its input as scratch space
# and leaves zeros in it: incorrect (inputs must come back unchanged).
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
    def sum_rows_clear_kernel(x_ptr, y_ptr, n_cols, BLOCK: tl.constexpr):
        row = tl.program_id(0).to(tl.int64)
        cols = tl.arange(0, BLOCK)
        acc = tl.zeros([BLOCK], tl.float32)
        for start in range(0, n_cols, BLOCK):
            mask = start + cols < n_cols
            ptrs = x_ptr + row * n_cols + start + cols
            acc += tl.load(ptrs, mask=mask, other=0.0).to(tl.float32)
            tl.store(ptrs, tl.zeros([BLOCK], tl.float32), mask=mask)
        tl.store(y_ptr + row, tl.sum(acc, axis=0))


class ModelNew(nn.Module):
    def forward(self, x):
        if x.is_cuda:
            n_cols = x.shape[-1]
            y = torch.empty(x.shape[:-1], device=x.device, dtype=x.dtype)
            sum_rows_clear_kernel[(y.numel(),)](x, y, n_cols, BLOCK=1024)
            return y
        y = x.sum(dim=-1)
        x.zero_()
        return y

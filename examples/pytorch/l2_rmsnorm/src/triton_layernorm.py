# triton_layernorm: computes LayerNorm instead of RMSNorm ((x - mean) /
# sqrt(var + eps) * w): a plausible mix-up, fast and well written, and wrong
# (the task's rows are offset from zero, so the two differ by far more than
# the tolerance): incorrect.
# expect: cuda=incorrect cpu=-
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def layernorm_kernel(x_ptr, w_ptr, y_ptr, n_cols, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * n_cols + cols, mask=mask, other=0.0).to(tl.float32)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    mean = tl.sum(x, axis=0) / n_cols
    centred = tl.where(mask, x - mean, 0.0)
    scale = tl.rsqrt(tl.sum(centred * centred, axis=0) / n_cols + eps)
    tl.store(y_ptr + row * n_cols + cols, centred * scale * w, mask=mask)


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
        layernorm_kernel[(x.numel() // n_cols,)](x, w, y, n_cols, self.eps, BLOCK=block,
                                                 num_warps=warps)
        return y

# side_stream: does the work 30 times over on a side stream of its own and
# returns without making the caller's stream wait for it: a harness that
# times (or waits) on its own stream only would stop the clock while the
# kernels still run. kgym waits for the whole device before it reads the
# output or stops a clock: ok, and slower than the eager reference.
# expect: cuda=ok+slow cpu=-
import torch
import torch.nn as nn
import triton
import triton.language as tl

REPEAT = 30


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
        self.side = None

    def forward(self, x, w):
        if self.side is None:
            self.side = torch.cuda.Stream()
        x = x.contiguous()
        w = w.contiguous()
        y = torch.empty_like(x)
        n_cols = x.shape[-1]
        block = triton.next_power_of_2(n_cols)
        # The side stream must not start before the inputs exist.
        self.side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(self.side):
            for _ in range(REPEAT):
                rmsnorm_kernel[(x.numel() // n_cols,)](x, w, y, n_cols, self.eps, BLOCK=block,
                                                       num_warps=min(max(block // 512, 1), 16))
        return y

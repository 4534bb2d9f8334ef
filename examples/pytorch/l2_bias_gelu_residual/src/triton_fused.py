# triton_fused: gelu(x + bias) + residual in one Triton kernel (the function
# form: the candidate defines bias_gelu_residual): x and residual read once,
# y written once, where eager runs three kernels through two temporaries.
# Correct, and faster than eager.
# expect: cuda=ok+fast cpu=-
import torch
import triton
import triton.language as tl


@triton.jit
def bias_gelu_residual_kernel(x_ptr, b_ptr, r_ptr, y_ptr, n, n_cols, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    b = tl.load(b_ptr + offs % n_cols, mask=mask, other=0.0).to(tl.float32)
    r = tl.load(r_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    h = x + b
    tl.store(y_ptr + offs, 0.5 * h * (1.0 + tl.erf(h * 0.7071067811865476)) + r, mask=mask)


def bias_gelu_residual(x, bias, residual):
    x = x.contiguous()
    residual = residual.contiguous()
    y = torch.empty_like(x)
    n = x.numel()
    bias_gelu_residual_kernel[(triton.cdiv(n, 2048),)](x, bias.contiguous(), residual, y, n,
                                                       x.shape[-1], BLOCK=2048, num_warps=8)
    return y

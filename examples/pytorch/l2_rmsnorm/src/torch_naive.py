# torch_naive: RMSNorm in torch code, in f32 whatever the input's dtype
# (x.float() ... .to(x.dtype)). A wrapper of ATen kernels on the GPU:
# invalid there; ok on the CPU.
# expect: cuda=invalid cpu=ok
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, eps):
        super().__init__()
        self.eps = eps

    def forward(self, x, w):
        xf = x.float()
        rms = torch.rsqrt(xf.pow(2).mean(dim=-1, keepdim=True) + self.eps)
        return (xf * rms * w.float()).to(x.dtype)

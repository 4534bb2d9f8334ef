# torch_optimised: RMSNorm in torch code with fewer passes over x: the norm
# from torch.linalg.vector_norm, x * w scaled in one multiply-add chain with
# out= buffers. ok on the CPU; a wrapper on the GPU: invalid.
# expect: cuda=invalid cpu=ok
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, eps):
        super().__init__()
        self.eps = eps

    def forward(self, x, w):
        n = x.shape[-1]
        norm = torch.linalg.vector_norm(x, dim=-1, keepdim=True)
        scale = torch.rsqrt(norm.square_().div_(n).add_(self.eps))
        y = torch.mul(x, w)
        return y.mul_(scale)

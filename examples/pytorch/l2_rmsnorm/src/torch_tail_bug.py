# torch_tail_bug: RMSNorm in torch code whose sum of squares is taken over
# chunks of 64 columns and forgets the last n % 64: right when the row
# length is a multiple of 64 (1024), wrong for the task's 1000 and 1:
# incorrect.
# expect: cuda=- cpu=incorrect
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, eps):
        super().__init__()
        self.eps = eps

    def forward(self, x, w):
        n = x.shape[-1]
        whole = n // 64 * 64
        chunks = x[..., :whole].reshape(*x.shape[:-1], -1, 64)
        squares = chunks.pow(2).sum(dim=(-1, -2)).unsqueeze(-1)
        return x * torch.rsqrt(squares / n + self.eps) * w

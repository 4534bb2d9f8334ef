# torch_naive: softmax written out in torch code, exp(x - max) / sum. A
# wrapper of ATen kernels on the GPU: invalid there; ok on the CPU.
# expect: cuda=invalid cpu=ok
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        e = torch.exp(x - x.max(dim=-1, keepdim=True).values)
        return e / e.sum(dim=-1, keepdim=True)

# torch_no_mask: the attention block in torch code without the causal mask
# (the CPU's counterpart of triton_no_mask): incorrect.
# expect: cuda=- cpu=incorrect
import math

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, d_model, n_heads):
        super().__init__()
        self.n_heads = n_heads
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.proj = nn.Linear(d_model, d_model)

    def forward(self, x):
        B, T, C = x.shape
        H, D = self.n_heads, C // self.n_heads
        q, k, v = (t.reshape(B, T, H, D).transpose(1, 2) for t in self.qkv(x).split(C, dim=2))
        weights = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(D), dim=-1)
        return self.proj((weights @ v).transpose(1, 2).reshape(B, T, C))

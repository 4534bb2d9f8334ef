# torch_naive: the attention block in torch code, one head at a time with an
# explicit causal softmax. cuBLAS and ATen on the GPU: invalid there (a
# wrapper); ok on the CPU.
# expect: cuda=invalid cpu=ok
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
        q, k, v = self.qkv(x).split(C, dim=2)
        future = torch.triu(torch.ones(T, T, dtype=torch.bool, device=x.device), diagonal=1)
        heads = []
        for h in range(H):
            qh, kh, vh = (t[..., h * D:(h + 1) * D] for t in (q, k, v))
            scores = torch.matmul(qh, kh.transpose(1, 2)) / math.sqrt(D)
            scores = scores.masked_fill(future, float("-inf"))
            weights = torch.exp(scores - scores.max(dim=-1, keepdim=True).values)
            heads.append(torch.matmul(weights / weights.sum(dim=-1, keepdim=True), vh))
        return self.proj(torch.cat(heads, dim=-1))

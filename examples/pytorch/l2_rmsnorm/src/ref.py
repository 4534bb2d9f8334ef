"""Fused RMSNorm over the last dimension, with a weight (the seed's running
example): rms = x.pow(2).mean(dim=-1, keepdim=True).add(eps).rsqrt();
y = x * rms * w."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, eps):
        super().__init__()
        self.eps = eps

    def forward(self, x, w):
        rms = x.pow(2).mean(dim=-1, keepdim=True).add(self.eps).rsqrt()
        return x * rms * w


M = 8192
N = 4096
eps = 1e-6


def get_inputs():
    # Activations are seldom centred: with the offset, a LayerNorm (which
    # subtracts the row mean) is wrong by far more than the tolerance.
    x = torch.randn(M, N) + 0.5
    w = 1 + 0.5 * torch.randn(N)
    return [x, w]


def get_init_inputs():
    return [eps]

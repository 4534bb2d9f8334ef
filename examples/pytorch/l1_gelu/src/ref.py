"""GELU (the exact, erf form), elementwise."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.nn.functional.gelu(x)


batch_size = 4096
dim = 16384


def get_inputs():
    return [torch.randn(batch_size, dim) * 2]


def get_init_inputs():
    return []

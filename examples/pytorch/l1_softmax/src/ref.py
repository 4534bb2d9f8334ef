"""Softmax over the last dimension."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.softmax(x, dim=-1)


batch_size = 4096
dim = 8192


def get_inputs():
    # Scaled so that rows are peaked: some outputs are far above the absolute
    # tolerance, so an output of zeros cannot pass (KernelBench issue 165).
    return [torch.randn(batch_size, dim) * 8]


def get_init_inputs():
    return []

import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.sigmoid(x)


size = 64


def make_inputs():
    return [torch.randn(size)]


def get_init_inputs():
    return []

"""A transformer's MLP block with its residual:
y = x + fc2(gelu_tanh(fc1(x))), fc1: d_model -> d_hidden, fc2: back."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, d_model, d_hidden):
        super().__init__()
        self.fc1 = nn.Linear(d_model, d_hidden)
        self.fc2 = nn.Linear(d_hidden, d_model)

    def forward(self, x):
        h = torch.nn.functional.gelu(self.fc1(x), approximate="tanh")
        return x + self.fc2(h)


batch_size = 8
seq_len = 512
d_model = 1024
d_hidden = 4096


def get_inputs():
    return [torch.randn(batch_size, seq_len, d_model)]


def get_init_inputs():
    return [d_model, d_hidden]

# torch_naive: the MLP block in torch code, the tanh GELU written out.
# cuBLAS and ATen on the GPU: invalid there (a wrapper); ok on the CPU.
# expect: cuda=invalid cpu=ok
import math

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, d_model, d_hidden):
        super().__init__()
        self.fc1 = nn.Linear(d_model, d_hidden)
        self.fc2 = nn.Linear(d_hidden, d_model)

    def forward(self, x):
        h = self.fc1(x)
        h = 0.5 * h * (1 + torch.tanh(math.sqrt(2 / math.pi) * (h + 0.044715 * h.pow(3))))
        return x + self.fc2(h)

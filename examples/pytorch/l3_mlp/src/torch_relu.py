# torch_relu: the MLP block in torch code with ReLU for the tanh GELU (the
# CPU's counterpart of triton_relu): incorrect.
# expect: cuda=- cpu=incorrect
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, d_model, d_hidden):
        super().__init__()
        self.fc1 = nn.Linear(d_model, d_hidden)
        self.fc2 = nn.Linear(d_hidden, d_model)

    def forward(self, x):
        return x + self.fc2(torch.relu(self.fc1(x)))

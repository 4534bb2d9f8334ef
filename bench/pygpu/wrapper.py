# A wrapper: torch's own ReLU. Expected: invalid (library kernels), kernel "any".
import torch
import torch.nn as nn
class ModelNew(nn.Module):
    def forward(self, x):
        return torch.clamp_min(x, 0)

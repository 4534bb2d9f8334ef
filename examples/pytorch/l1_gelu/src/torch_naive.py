# torch_naive: GELU written out in torch code, 0.5 * x * (1 + erf(x / sqrt 2)).
# A wrapper of ATen kernels on the GPU: invalid there; ok on the CPU.
# expect: cuda=invalid cpu=ok
import math

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        return 0.5 * x * (1 + torch.erf(x / math.sqrt(2)))

# torch_naive: gelu(x + bias) + residual in torch code, the erf written out.
# A wrapper of ATen kernels on the GPU: invalid there; ok on the CPU.
# expect: cuda=invalid cpu=ok
import math

import torch


def bias_gelu_residual(x, bias, residual):
    h = x + bias
    return 0.5 * h * (1 + torch.erf(h / math.sqrt(2))) + residual

# torch_wrong_order: gelu(x) + bias + residual in torch code (the CPU's
# counterpart of triton_wrong_order): incorrect.
# expect: cuda=- cpu=incorrect
import torch


def bias_gelu_residual(x, bias, residual):
    return torch.nn.functional.gelu(x) + bias + residual

"""Bias, GELU and residual fused: y = gelu(x + bias) + residual. The function
form: the candidate defines bias_gelu_residual(x, bias, residual)."""
import torch


def bias_gelu_residual(x, bias, residual):
    return torch.nn.functional.gelu(x + bias) + residual


M = 4096
N = 8192


def get_inputs():
    return [torch.randn(M, N), torch.randn(N), torch.randn(M, N)]


def get_init_inputs():
    return []

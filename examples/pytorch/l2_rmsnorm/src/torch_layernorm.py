# torch_layernorm: LayerNorm instead of RMSNorm, in torch code (the CPU's
# counterpart of triton_layernorm): incorrect.
# expect: cuda=- cpu=incorrect
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, eps):
        super().__init__()
        self.eps = eps

    def forward(self, x, w):
        return torch.nn.functional.layer_norm(x, x.shape[-1:], weight=w, eps=self.eps)

# torch_wrong_dim: softmax in torch code over the first dimension instead of
# the last (torch.softmax(x, dim=0)): incorrect (CPU only: on the GPU it
# would be refused as a wrapper whatever its values).
# expect: cuda=- cpu=incorrect
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.softmax(x, dim=0)

# no_model_new: a working GELU, but the class is called Model, not
# ModelNew: compile_error (the candidate lacks ModelNew).
# expect: cuda=compile_error cpu=compile_error
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.nn.functional.gelu(x)

# syntax_error: the module does not parse (a missing colon): compile_error,
# with Python's message.
# expect: cuda=compile_error cpu=compile_error
import torch
import torch.nn as nn


class ModelNew(nn.Module)
    def forward(self, x):
        return torch.nn.functional.gelu(x)

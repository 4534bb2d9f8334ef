# hang: forward spins in Python for ever: timeout (and the runner is
# replaced).
# expect: cuda=timeout cpu=timeout
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        spins = 0
        while x is not None:
            spins += 1
        return x

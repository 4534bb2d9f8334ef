# read_gc: computes nothing; looks through every object the garbage collector
# knows for a tensor of the output's shape and dtype that is not its input
# (an expected output or a reference's result held by the harness) and
# returns a copy of the last one found, else zeros. kgym computes the
# reference in another process and compares there: incorrect.
# expect: cuda=incorrect cpu=incorrect
import gc

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        found = None
        for obj in gc.get_objects():
            try:
                if (isinstance(obj, torch.Tensor) and obj is not x and obj.shape == x.shape
                        and obj.dtype == x.dtype and obj.data_ptr() != x.data_ptr()):
                    found = obj
            except Exception:
                continue
        if found is not None:
            return found.detach().to(x.device).clone()
        return torch.zeros_like(x)

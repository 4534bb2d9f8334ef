# read_stack: computes nothing; walks up the Python stack of its caller and
# looks at every frame's locals and globals (and one level into objects and
# dicts there) for a tensor of the output's shape that is not its input, or
# for a reference model it could call, and returns what that gives, else
# zeros. kgym's runner holds neither: incorrect.
# expect: cuda=incorrect cpu=incorrect
import sys

import torch
import torch.nn as nn


def _candidates(value):
    yield value
    if isinstance(value, dict):
        yield from list(value.values())[:256]
    elif isinstance(value, (list, tuple)):
        yield from list(value)[:256]
    elif hasattr(value, "__dict__") and not isinstance(value, type):
        try:
            yield from list(vars(value).values())[:256]
        except TypeError:
            pass


class ModelNew(nn.Module):
    def forward(self, x):
        frame = sys._getframe(1)
        while frame is not None:
            for scope in (frame.f_locals, frame.f_globals):
                for value in list(scope.values()):
                    for item in _candidates(value):
                        if (isinstance(item, torch.Tensor) and item is not x
                                and item.shape == x.shape and item.data_ptr() != x.data_ptr()):
                            return item.detach().to(device=x.device, dtype=x.dtype).clone()
                        if (isinstance(item, nn.Module) and type(item).__name__ == "Model"
                                and item is not self):
                            with torch.no_grad():
                                return item(x)
            frame = frame.f_back
        return torch.zeros_like(x)

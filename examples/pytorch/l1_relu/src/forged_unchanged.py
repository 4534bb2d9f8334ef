# forged_unchanged: ReLU in place on the input (no output to allocate), and
# everything its own process could say about its inputs made to say
# "unchanged": torch.equal always true, torch.Tensor.clone returning the
# tensor itself (a "pristine copy" that changes with it), and any method of
# the runner's that speaks of inputs being unchanged answering "none
# changed". The supervisor reads the inputs where the call copied them and
# compares them with the reference's: incorrect.
# expect: cuda=incorrect cpu=incorrect
import sys

import torch
import torch.nn as nn

torch.equal = lambda a, b: True
torch.Tensor.clone = lambda self, *args, **kwargs: self
for _name, _module in list(sys.modules.items()):
    if _module is None or not (_name == "__main__" or _name.startswith("kgym")):
        continue
    for _value in list(vars(_module).values()):
        if isinstance(_value, type):
            for _meth in list(vars(_value)):
                if "unchanged" in _meth:
                    setattr(_value, _meth, lambda self, req: {"changed": []})


class ModelNew(nn.Module):
    def forward(self, x):
        return x.clamp_(min=0)

# raises: forward raises an exception (a shape mistake reported by the
# candidate's own check): runtime_error, with the traceback.
# expect: cuda=runtime_error cpu=runtime_error
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        if x.dim() != 3:
            raise ValueError("expected a 3-d input, got %d-d" % x.dim())
        return x

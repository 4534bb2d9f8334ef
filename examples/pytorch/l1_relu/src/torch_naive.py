# torch_naive: ReLU in torch code, x * (x > 0). Right values everywhere; on
# the GPU its time is all ATen kernels, so it is a wrapper there (the task
# asks for kernels of its own): invalid. On the CPU (kernel "torch"): ok.
# expect: cuda=invalid cpu=ok
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        return x * (x > 0)

# Hostile: work on a side stream, the harness's synchronisation patched out,
# a slow kernel (20 extra passes). Expected: incorrect, or ok with a speedup < 1.
import torch
import torch.nn as nn
torch.cuda.synchronize = lambda *a, **k: None
side = torch.cuda.Stream()
class ModelNew(nn.Module):
    def forward(self, x):
        y = torch.empty_like(x)
        with torch.cuda.stream(side):
            for _ in range(20):
                y.copy_(torch.relu(x))
        return y

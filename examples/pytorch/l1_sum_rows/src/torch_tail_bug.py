# torch_tail_bug: row sums in torch code, vectorised over chunks of 8
# columns (x[:, :n8].view(M, -1, 8)) and forgetting the last n % 8 columns.
# Right when the row length is a multiple of 8 (1000 is); at 4097 the one
# value left out is within the tolerance of a sum of 4097; at the task's
# 7 x 1 nothing is summed at all (the rows are offset by 1): incorrect.
# expect: cuda=- cpu=incorrect
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        n8 = x.shape[-1] // 8 * 8
        chunks = x[..., :n8].reshape(*x.shape[:-1], -1, 8)
        return chunks.sum(dim=-1).sum(dim=-1)

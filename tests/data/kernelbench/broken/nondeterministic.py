import time

import torch
import torch.nn as nn


class Model(nn.Module):
    """Adds a number read from the clock: the same seed gives other outputs."""
    def forward(self, x):
        return x + float(time.perf_counter_ns() % 1000003)


size = 64


def get_inputs():
    return [torch.randn(size)]


def get_init_inputs():
    return []

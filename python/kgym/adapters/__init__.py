"""Adapters for RL frameworks: kgym.adapters.verl, .trl, .openrlhf.

Each imports its framework lazily, only inside the adapter, so importing
kgym never needs veRL, TRL, OpenRLHF or torch.
"""

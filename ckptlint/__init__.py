"""ckptlint: find misuse of PyTorch activation checkpointing."""

__version__ = "0.1.0"

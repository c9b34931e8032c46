"""Imported once by the fork server that starts confirm children: they fork with torch loaded."""

import warnings

# torch prints this on import when numpy is missing; it says nothing about the user's code.
warnings.filterwarnings("ignore", message="Failed to initialize NumPy")

try:
    import ckptlint.confirm.build  # noqa: F401  (imports torch)
    import ckptlint.confirm.runner  # noqa: F401
    # The first checkpoint call imports torch._dynamo (@torch._disable_dynamo): 2 s per child.
    import torch._dynamo  # noqa: F401
except ImportError:  # no torch: each child reports it
    pass

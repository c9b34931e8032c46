"""ckptlint: find misuse of PyTorch activation checkpointing."""

__version__ = "0.1.0"


def __getattr__(name: str):
    # Lazy, so that `import ckptlint` (and static linting) stays free of the runtime mode.
    if name == "example":
        from ckptlint.confirm.registry import example

        return example
    if name == "confirm":
        import importlib

        return importlib.import_module("ckptlint.confirm")
    raise AttributeError(f"module 'ckptlint' has no attribute {name!r}")

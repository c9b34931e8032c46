"""Saved weights that are not on this machine: `model.load_state_dict(torch.load("unet.pt"))` in a
training script whose checkpoint file stays behind on the author's disk.

Where gradients flow (and whether a checkpoint drops them, replays RNG or keeps a cache) does not
depend on the values of the weights, so a script whose weight file is missing runs on with the
model's initial weights: `torch.load` of a path that does not exist returns `MissingWeights`, which
`load_state_dict` accepts as "keep what you have"; any other use of it fails as the load would have.

Runs in the confirm child only.
"""

from __future__ import annotations

import contextlib
import os
from typing import Any, Iterator

import torch


class MissingWeights(dict):
    """What `torch.load` returned for a file that does not exist; so is every item of it
    (`torch.load(path)["state_dict"]`)."""

    def __init__(self, path: str) -> None:
        super().__init__()
        self.path = path

    def __missing__(self, key: Any) -> "MissingWeights":
        return MissingWeights(self.path)

    def get(self, key: Any, default: Any = None) -> Any:
        return MissingWeights(self.path)


@contextlib.contextmanager
def missing_weight_files(notes: list[str]) -> Iterator[None]:
    """While active, loading a weight file that does not exist keeps the model's initial weights;
    `notes` receives one line of evidence per such load."""
    real_load, real_load_state_dict = torch.load, torch.nn.Module.load_state_dict

    def load(f: Any, *args: Any, **kwargs: Any) -> Any:
        if isinstance(f, (str, os.PathLike)) and not os.path.exists(f):
            return MissingWeights(os.fspath(f))
        return real_load(f, *args, **kwargs)

    def load_state_dict(module: torch.nn.Module, state_dict: Any, *args: Any, **kwargs: Any) -> Any:
        if isinstance(state_dict, MissingWeights):
            notes.append(
                f"{state_dict.path} does not exist here: `{type(module).__name__}.load_state_dict` kept its initial weights "
                "(where gradients flow does not depend on their values)"
            )
            return torch.nn.modules.module._IncompatibleKeys([], [])
        return real_load_state_dict(module, state_dict, *args, **kwargs)

    torch.load = load
    torch.nn.Module.load_state_dict = load_state_dict  # type: ignore[method-assign]
    try:
        yield
    finally:
        torch.load = real_load
        torch.nn.Module.load_state_dict = real_load_state_dict  # type: ignore[method-assign]

"""transformers' `Trainer` on this machine: a training script's arguments written for a GPU box and
data that does not come along.

- `TrainingArguments(bf16=True)` / `fp16=True` raise on a machine without CUDA; mixed precision
  does not change where gradients flow, so they are switched off (named in the evidence).
- The Trainer's outputs go to a temporary folder instead of the script's `output_dir`, and no
  reporting integration (wandb, tensorboard) is started: --confirm writes nothing into the project.
- A Trainer handed no `train_dataset` (a reproduction's `train_dataset=None`) trains on two
  examples synthesised for its model (token ids and labels, or pixel values and labels).

Runs in the confirm child only.
"""

from __future__ import annotations

import contextlib
import sys
import tempfile
from typing import Any, Iterator

import torch

from ckptlint.confirm import absent_packages, hf

_PRECISION_FLAGS = ("bf16", "fp16")


@contextlib.contextmanager
def trainer_stand_ins(notes: list[str]) -> Iterator[None]:
    """While active, TrainingArguments and Trainer behave as the module docstring says; `notes`
    receives one line of evidence per change."""
    if "transformers" not in sys.modules or absent_packages.is_placeholder(sys.modules["transformers"]):
        yield
        return
    import transformers

    arguments, trainer = transformers.TrainingArguments, transformers.Trainer
    post_init, get_train_dataloader = arguments.__post_init__, trainer.get_train_dataloader
    output = tempfile.TemporaryDirectory(prefix="ckptlint-trainer-")

    def local_post_init(self: Any) -> None:
        dropped = [flag for flag in _PRECISION_FLAGS if getattr(self, flag, False) and not torch.cuda.is_available()]
        for flag in dropped:
            setattr(self, flag, False)
        if dropped:
            notes.append(f"TrainingArguments: {', '.join(f'{flag}=True' for flag in dropped)} switched off (no CUDA here; precision does not change where gradients flow)")
        self.output_dir, self.report_to = output.name, "none"
        post_init(self)

    def synthesised_dataloader(self: Any, *args: Any, **kwargs: Any) -> Any:
        if self.train_dataset is None:
            found = hf.model_inputs(self.model, ["attention_mask", "labels"], "cpu")
            if found is not None:
                batch, shown = found
                self.train_dataset = [{key: value[i] for key, value in batch.items()} for i in range(2)]
                notes.append(f"the Trainer was handed no train_dataset: it trained on 2 synthesised examples ({shown})")
        return get_train_dataloader(self, *args, **kwargs)

    arguments.__post_init__ = local_post_init  # type: ignore[method-assign]
    trainer.get_train_dataloader = synthesised_dataloader  # type: ignore[method-assign]
    try:
        yield
    finally:
        arguments.__post_init__ = post_init  # type: ignore[method-assign]
        trainer.get_train_dataloader = get_train_dataloader  # type: ignore[method-assign]
        output.cleanup()

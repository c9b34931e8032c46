"""The Lightning callbacks a project's Trainer fits a module with, run on the model --confirm builds.

The static analysis links the callbacks (`index.fitted_callbacks`, through `usage.Usage.callbacks`);
here each one is built with its literal constructor arguments and its hooks that Lightning 2.6 runs
before the first training step are called in Lightning's order (`lightning_callbacks.
PRE_TRAINING_HOOKS`) with the module and a stand-in for the Trainer at epoch 0 whose one optimizer
is SGD over the module's trainable parameters (what a `BaseFinetuning` adds its param groups to).
Runs in the confirm child process only.
"""

from __future__ import annotations

import importlib
import types
from typing import Any, Sequence

import torch
from torch import nn

from ckptlint.confirm.failures import stop_on_user_failure
from ckptlint.model.lightning_callbacks import PRE_TRAINING_HOOKS


_LIBRARIES = ("lightning", "pytorch_lightning")


class FittedCallbacks:
    """Callbacks described as [constructor, arguments]; `apply(model)` runs their pre-training hooks."""

    def __init__(self, module: types.ModuleType, described: Sequence[Sequence[Any]]) -> None:
        self.module = module
        # Lightning's own callbacks (checkpointing, logging) need a real Trainer and freeze nothing the
        # static analysis follows: only the project's are run.
        self.described = [(ctor, arguments) for ctor, arguments in described if _literal(arguments) and ctor.split(".", 1)[0] not in _LIBRARIES]
        self.failed: list[str] = []

    def __bool__(self) -> bool:
        return bool(self.described)

    def apply(self, model: nn.Module) -> nn.Module:
        self.failed = []
        callbacks = [(ctor, self._build(ctor, arguments)) for ctor, arguments in self.described]
        trainable = [p for p in model.parameters() if p.requires_grad]
        optimizer = torch.optim.SGD(trainable or [nn.Parameter(torch.zeros(1))], lr=0.1)
        trainer = types.SimpleNamespace(strategy=None, current_epoch=0, global_step=0, optimizers=[optimizer], lightning_module=model, sanity_checking=False)
        for who, hook in PRE_TRAINING_HOOKS:
            if who != "callback" or hook == "on_train_batch_start":  # needs the batch: the only hook left out
                continue
            for ctor, callback in callbacks:
                method = getattr(callback, hook, None) if callback is not None else None
                if method is None:
                    continue
                try:
                    method(trainer, model, "fit") if hook == "setup" else method(trainer, model)
                except BaseException as error:
                    stop_on_user_failure(f"`{ctor.rsplit('.', 1)[-1]}.{hook}`", error)
                    self.failed.append(f"{ctor.rsplit('.', 1)[-1]}.{hook}: {type(error).__name__}: {error}")
        return model

    def shown(self) -> str:
        names = ", ".join(f"`{ctor.rsplit('.', 1)[-1]}`" for ctor, _ in self.described)
        text = (
            f", then the pre-training hooks (setup, on_fit_start, on_train_start, on_train_epoch_start at epoch 0) of the "
            f"callbacks its Trainer fits it with: {names}"
        )
        return text + ("; failing here: " + "; ".join(self.failed) if self.failed else "")

    def _build(self, ctor: str, arguments: dict[str, list]) -> Any:
        module_name, _, name = ctor.rpartition(".")
        try:
            module = self.module if module_name == self.module.__name__ else importlib.import_module(module_name)
            cls = getattr(module, name)
            positional = [arguments[f"#{i}"][1] for i in range(sum(key.startswith("#") for key in arguments))]
            return cls(*positional, **{key: value[1] for key, value in arguments.items() if not key.startswith("#")})
        except BaseException as error:
            stop_on_user_failure(f"`{ctor}`", error)
            self.failed.append(f"{name}(...): {type(error).__name__}: {error}")
            return None


def _literal(arguments: Any) -> bool:
    """Arguments --confirm can pass: all literals."""
    return isinstance(arguments, dict) and all(value[0] == "const" for value in arguments.values())

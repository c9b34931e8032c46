"""CKPT008: a checkpoint that runs where autograd records nothing."""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterator

from ckptlint.findings import Severity
from ckptlint.rules import Diagnostic, Rule, spelled

if TYPE_CHECKING:
    from ckptlint.model.file_model import FileModel


class CheckpointWithoutGrad(Rule):
    code = "CKPT008"
    name = "checkpoint-without-grad"
    severity = Severity.WARNING
    summary = "checkpoint called where no gradient is recorded (`no_grad`, `inference_mode`), directly or by a train-mode model's forward: pure overhead"

    def check(self, model: FileModel) -> Iterator[Diagnostic]:
        for site in model.sites:
            if site.grad_disabled is None or not site.kind.runs_checkpoint:
                continue
            yield Diagnostic(
                site.call,
                f"`{site.api_name.rsplit('.', 1)[-1]}` runs inside {site.grad_disabled.kind}: autograd records "
                "nothing, so there is nothing to recompute and the checkpoint only adds overhead",
                "call the function directly here, or gate checkpointing on `torch.is_grad_enabled()` / `self.training`",
            )
        for found in model.grad_free_checkpoints:
            call = found.call
            yield Diagnostic(
                call.node,
                f"`{spelled(call.node.func)}(...)` runs inside {call.grad_disabled.kind} while {found.trains}: {found.reached}, "
                "so the checkpoint runs where autograd records nothing and only adds overhead",
                "gate checkpointing on `torch.is_grad_enabled()` or `self.training` (then `.eval()` turns it off)"
                if found.any_mode
                else f"call `{call.model}.eval()` before it (and `.train()` after), or gate checkpointing on `torch.is_grad_enabled()`",
            )

"""CKPT008: a checkpoint that runs where autograd records nothing."""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterator

from ckptlint.findings import Severity
from ckptlint.rules import Diagnostic, Rule

if TYPE_CHECKING:
    from ckptlint.model.builder import FileModel


class CheckpointWithoutGrad(Rule):
    code = "CKPT008"
    name = "checkpoint-without-grad"
    severity = Severity.WARNING
    summary = "checkpoint called where no gradient is recorded (`no_grad`, `inference_mode`): pure overhead"

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

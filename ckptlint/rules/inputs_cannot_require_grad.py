"""CKPT001: a reentrant checkpoint fed only inputs that cannot require grad."""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterator

from ckptlint.findings import Severity
from ckptlint.fixes import non_reentrant
from ckptlint.model.sites import CheckpointSite
from ckptlint.model.values import Const, Grad, ModuleObject, Tensor
from ckptlint.rules import Diagnostic, Rule, callee_name, non_reentrant_advice

if TYPE_CHECKING:
    from ckptlint.model.file_model import FileModel


def no_grad_inputs(site: CheckpointSite) -> list[Tensor]:
    """The tensor inputs, when every input certainly cannot require grad (else empty): tensors that
    do not, and modules or constants handed to the checkpointed function (`checkpoint(self.step,
    layer, h, 0.5)`), which reentrant checkpointing passes through as plain objects. Nothing when
    the checkpointed module has no parameter that could train (none, or every one frozen)."""
    if not site.kind.runs_checkpoint or not site.reentrant or site.has_star_args or site.callee_has_parameters is False or site.callee_frozen:
        return []
    tensors = [v for v in site.input_values if isinstance(v, Tensor)]
    if tensors and all(v.grad is Grad.NONE for v in tensors) and all(isinstance(v, (Tensor, ModuleObject, Const)) for v in site.input_values):
        return tensors
    return []


class InputsCannotRequireGrad(Rule):
    code = "CKPT001"
    name = "inputs-cannot-require-grad"
    severity = Severity.ERROR
    summary = "reentrant checkpoint fed only inputs that cannot require grad: the parameters inside silently get no gradient"

    def check(self, model: FileModel) -> Iterator[Diagnostic]:
        for site in model.sites:
            inputs = no_grad_inputs(site)
            if not inputs or any(t.frozen for t in inputs):
                continue  # frozen upstream parameters are CKPT005's case
            yield Diagnostic(
                site.call,
                f"reentrant checkpoint of `{callee_name(site)}` gets no input that can require grad: {inputs[0].origin}. "
                f"The parameters inside get `.grad = None` and never train (torch only warns \"None of the inputs have "
                f"requires_grad=True\"); {site.mode.reason}",
                f"don't checkpoint the first block on raw data (start from the second block), {non_reentrant_advice(site)}, "
                "or call `.requires_grad_()` on the input first",
                fixes=non_reentrant(site),
            )

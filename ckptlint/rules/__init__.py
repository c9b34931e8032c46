"""The rule registry. A rule is a small class that reads the semantic model and yields diagnostics."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar, Iterator, Optional

from ckptlint.findings import Severity
from ckptlint.model.values import code

if TYPE_CHECKING:
    import libcst as cst

    from ckptlint.fixes import FixPlan
    from ckptlint.model import CheckpointSite, FileModel


@dataclass(frozen=True)
class Diagnostic:
    """A rule's verdict on one node; the engine turns it into a positioned Finding."""

    node: cst.CSTNode
    message: str
    help: str
    # The file the node lives in when it is not the analysed one (a callee defined elsewhere).
    path: Optional[str] = None
    # Overrides the rule's default severity (e.g. error under reentrant mode, warning otherwise).
    severity: Optional[Severity] = None
    # Automatic fixes (ckptlint.fixes), safe ones first.
    fixes: tuple[FixPlan, ...] = ()


class Rule:
    code: ClassVar[str]
    # kebab-case, ruff style: what the rule detects.
    name: ClassVar[str]
    severity: ClassVar[Severity]
    # One line, shown by `ckptlint rules` and in SARIF.
    summary: ClassVar[str]

    def check(self, model: FileModel) -> Iterator[Diagnostic]:
        raise NotImplementedError


def spelled(node: cst.CSTNode, limit: int = 60) -> str:
    """Source text of a node for messages, shortened to one line."""
    text = " ".join(code(node).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def non_reentrant_advice(site: "CheckpointSite") -> str:
    """How to switch this site to non-reentrant mode, where its mode is decided."""
    from ckptlint.model.sites import ApiKind

    if site.kind is ApiKind.WRAPPED_MODULE_CALL:
        return "wrap it with `checkpoint_impl=CheckpointImpl.NO_REENTRANT` (checkpoint_wrapper's default)"
    return "pass `use_reentrant=False`"


def callee_name(site: "CheckpointSite") -> str:
    from ckptlint.model.values import Lambda, LocalFunction, ModuleObject, Param, Partial, Ref

    function = site.function
    if site.wrapper and isinstance(function, Partial):
        function = function.func  # what the call handed the wrapper
    if isinstance(function, ModuleObject):
        return function.origin or function.classes[0].rsplit(".", 1)[-1]
    if isinstance(function, (Ref, LocalFunction)):
        return function.qualname.rsplit(".", 1)[-1]
    if isinstance(function, Partial):
        return spelled(function.node)
    if isinstance(function, Lambda):
        return spelled(function.node)
    if isinstance(function, Param) and function.function.endswith(".__init__"):
        # held by a wrapper object whose constructions hand it different callables
        return f"{function.function.rsplit('.', 2)[-2]}.{function.name}"
    args = [a for a in site.call.args if not a.keyword]
    return spelled(args[0].value) if args else "the function"


def all_rules() -> tuple[type[Rule], ...]:
    from ckptlint.rules.cache_under_checkpointing import CacheUnderCheckpointing
    from ckptlint.rules.checkpoint_without_grad import CheckpointWithoutGrad
    from ckptlint.rules.frozen_upstream_reentrant import FrozenUpstreamReentrant
    from ckptlint.rules.grad_tensor_not_positional import GradTensorNotPositional
    from ckptlint.rules.implicit_reentrant_mode import ImplicitReentrantMode
    from ckptlint.rules.inputs_cannot_require_grad import InputsCannotRequireGrad
    from ckptlint.rules.rng_not_replayed import RngNotReplayed
    from ckptlint.rules.side_effect_escapes import SideEffectEscapes

    rules = (
        InputsCannotRequireGrad,
        RngNotReplayed,
        GradTensorNotPositional,
        CacheUnderCheckpointing,
        FrozenUpstreamReentrant,
        ImplicitReentrantMode,
        SideEffectEscapes,
        CheckpointWithoutGrad,
    )
    return tuple(sorted(rules, key=lambda rule: rule.code))

"""The rule registry. A rule is a small class that reads the semantic model and yields diagnostics."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar, Iterator

import libcst as cst

from ckptlint.findings import Severity

if TYPE_CHECKING:
    from ckptlint.model import FileModel


@dataclass(frozen=True)
class Diagnostic:
    """A rule's verdict on one node; the engine turns it into a positioned Finding."""

    node: cst.CSTNode
    message: str
    help: str


class Rule:
    code: ClassVar[str]
    # kebab-case, ruff style: what the rule detects.
    name: ClassVar[str]
    severity: ClassVar[Severity]
    # One line, shown by `ckptlint rules` and in SARIF.
    summary: ClassVar[str]

    def check(self, model: FileModel) -> Iterator[Diagnostic]:
        raise NotImplementedError


def all_rules() -> tuple[type[Rule], ...]:
    from ckptlint.rules.checkpoint_without_grad import CheckpointWithoutGrad
    from ckptlint.rules.implicit_reentrant_mode import ImplicitReentrantMode

    return tuple(sorted((ImplicitReentrantMode, CheckpointWithoutGrad), key=lambda rule: rule.code))

"""What a lint run produces: findings, per-file errors and the run report."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field


class Severity(str, enum.Enum):
    ERROR = "error"
    WARNING = "warning"
    INFO = "info"


@dataclass(frozen=True, order=True)
class Finding:
    """One diagnostic. Lines and columns are 1-based; end_column is exclusive."""

    path: str
    line: int
    column: int
    end_line: int
    end_column: int
    code: str
    message: str
    help: str
    severity: Severity


@dataclass(frozen=True, order=True)
class FileError:
    """A file that could not be read or parsed; the run goes on without it."""

    path: str
    message: str


@dataclass(frozen=True)
class Confirmation:
    """What `--confirm` found when it ran a finding's code with and without checkpointing."""

    verdict: str  # one of VERDICTS
    evidence: tuple[str, ...]
    target: str  # what was run, e.g. "src/model.py::Net"
    device: str  # "cpu", "cuda", or "" when nothing ran
    cause: str = ""  # "could not run" only: one of CAUSES
    example: str = ""  # NEEDS_EXAMPLE only: a factory skeleton, pre-filled with what was inferred


CONFIRMED, NOT_REPRODUCED, COULD_NOT_RUN = "confirmed", "not reproduced", "could not run"
VERDICTS = (CONFIRMED, NOT_REPRODUCED, COULD_NOT_RUN)
# Why a finding could not run: what is missing is a package, or an example, or the code failed.
NEEDS_PACKAGE, NEEDS_EXAMPLE, CRASHED = "needs a package", "needs an example", "crashed"
CAUSES = (NEEDS_PACKAGE, NEEDS_EXAMPLE, CRASHED)


@dataclass
class LintReport:
    findings: list[Finding] = field(default_factory=list)
    errors: list[FileError] = field(default_factory=list)
    files_checked: int = 0
    # Checkpoint sites whose callee or mode the analysis could not resolve.
    unresolved_sites: int = 0
    # Filled by `--confirm` only: the runtime verdict of each finding.
    confirmations: dict[Finding, Confirmation] = field(default_factory=dict)

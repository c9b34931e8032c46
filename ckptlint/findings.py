"""What a lint run produces: findings, per-file errors and the run report."""

from __future__ import annotations

import enum
from dataclasses import asdict, dataclass, field
from typing import Any, Optional


class Severity(str, enum.Enum):
    ERROR = "error"
    WARNING = "warning"
    INFO = "info"


SAFE, UNSAFE = "safe", "unsafe"


@dataclass(frozen=True, order=True)
class Edit:
    """Replace the text from (line, column) up to (end_line, end_column), exclusive, with `content`.
    Positions as in findings: 1-based, in the notebook cell `cell` when there is one."""

    line: int
    column: int
    end_line: int
    end_column: int
    content: str
    cell: Optional[int] = None


@dataclass(frozen=True, order=True)
class Fix:
    """A change that removes a finding. `safe` keeps the code's behaviour (or restores what it
    meant); `unsafe` changes behaviour and is applied only with --unsafe-fixes."""

    applicability: str  # SAFE or UNSAFE
    message: str
    edits: tuple[Edit, ...]


@dataclass(frozen=True, order=True)
class Finding:
    """One diagnostic. Lines and columns are 1-based; end_column is exclusive. In a notebook they
    count from the start of code cell `cell` (1-based, as ruff numbers them)."""

    path: str
    line: int
    column: int
    end_line: int
    end_column: int
    code: str
    message: str
    help: str
    severity: Severity
    # Alternatives, safe ones first (CKPT006: spell today's mode, or switch to the recommended one).
    fixes: tuple[Fix, ...] = ()
    cell: Optional[int] = None

    def fix_for(self, unsafe: bool) -> Optional[Fix]:
        """The fix --fix applies: the safe one, or with --unsafe-fixes the last (recommended) one."""
        allowed = [f for f in self.fixes if unsafe or f.applicability == SAFE]
        return allowed[-1] if allowed else None

    def shown_fix(self, unsafe: bool) -> Optional[Fix]:
        """The fix reports show: the one that would apply, else the unsafe one that could."""
        return self.fix_for(unsafe) or (self.fixes[-1] if self.fixes else None)

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "severity": self.severity.value}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Finding":
        fixes = tuple(
            Fix(f["applicability"], f["message"], tuple(Edit(**e) for e in f["edits"])) for f in data.get("fixes", ())
        )
        return cls(**{**data, "severity": Severity(data["severity"]), "fixes": fixes})


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


@dataclass(frozen=True)
class StaleEntry:
    """A baseline entry no finding matched any more (fixed, or the code changed)."""

    code: str
    path: str  # as the baseline spells it
    line: int  # where it was when the baseline was written
    count: int


@dataclass
class LintReport:
    findings: list[Finding] = field(default_factory=list)
    errors: list[FileError] = field(default_factory=list)
    files_checked: int = 0
    # Checkpoint sites whose callee or mode the analysis could not resolve.
    unresolved_sites: int = 0
    # Filled by `--confirm` only: the runtime verdict of each finding.
    confirmations: dict[Finding, Confirmation] = field(default_factory=dict)
    # Filled by `--fix` (or `--diff`: would be): the findings whose fix was applied, as first found.
    fixed: list[Finding] = field(default_factory=list)
    # With --baseline: how many findings it hid, and its entries that matched nothing.
    baselined: int = 0
    stale: list[StaleEntry] = field(default_factory=list)

"""Output formats. Each reporter turns a finished LintReport into one string."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional, Protocol, Sequence

from ckptlint.findings import LintReport, Severity

FORMATS = ("text", "json", "sarif", "github")


class RuleMeta(Protocol):
    """What reporters need from a rule; rule classes satisfy it via class attributes."""

    @property
    def code(self) -> str: ...
    @property
    def name(self) -> str: ...
    @property
    def severity(self) -> Severity: ...
    @property
    def summary(self) -> str: ...


@dataclass(frozen=True)
class RenderOptions:
    show_source: bool = True
    # Decided by the CLI (TTY, NO_COLOR); reporters never inspect the terminal.
    color: bool = False
    # Text only: per-code counts instead of individual findings.
    statistics: bool = False
    # Text only: findings without the summary line.
    quiet: bool = False
    # Whether unsafe fixes are applied (--unsafe-fixes): which fix each finding shows.
    unsafe_fixes: bool = False
    # Text only: list the fixes applied (--show-fixes).
    show_fixes: bool = False


# Runtime aliases, so spelled with Optional for Python 3.9.
# (path, notebook cell or None) -> the lines the finding's line numbers count.
ReadLines = Callable[[str, Optional[int]], Optional[list[str]]]
RuleDoc = Callable[[str], Optional[str]]


def location(path: str, cell: Optional[int]) -> str:
    """`path` or `path:cell N`, the prefix of `line:column` in messages (ruff's notebook spelling)."""
    return path if cell is None else f"{path}:cell {cell}"


def normalize_path(path: str) -> str:
    """POSIX, repository-relative spelling expected by SARIF and GitHub annotations."""
    path = path.replace("\\", "/")
    while path.startswith("./"):
        path = path[2:]
    return path


def render(
    fmt: str,
    report: LintReport,
    rules: Sequence[RuleMeta],
    options: RenderOptions,
    read_lines: ReadLines,
    rule_doc: RuleDoc,
) -> str:
    # Imported here because the format modules import the helpers above.
    from ckptlint.reporters import github, json_report, sarif, text

    if fmt == "text":
        return text.render(report, rules, options, read_lines)
    if fmt == "json":
        return json_report.render(report, options.unsafe_fixes)
    if fmt == "sarif":
        return sarif.render(report, rules, rule_doc)
    if fmt == "github":
        return github.render(report)
    raise ValueError(f"unknown output format {fmt!r}; expected one of {', '.join(FORMATS)}")

"""`--fix`, `--fix-only` and `--diff`: apply the findings' fixes and lint again until nothing more
applies, the fixed contents held in memory (ckptlint.source.overlay) until the end, so `--diff`
writes nothing and `--fix` writes each changed file once."""

from __future__ import annotations

import difflib
import io
import tokenize
from dataclasses import dataclass, field
from typing import Callable, Iterable, Optional

from ckptlint import notebooks
from ckptlint.findings import Edit, Finding, Fix, LintReport
from ckptlint.fixes import apply_edits
from ckptlint.lines import lines_with_ends
from ckptlint.source import SourceError, decode, overlay, read_bytes

# Rounds of lint-and-apply; fixes that keep producing new fixes stop here (ruff: 100).
MAX_ROUNDS = 10


@dataclass
class Outcome:
    report: LintReport  # the last round's: what remains, with `fixed` filled
    before: dict[str, bytes] = field(default_factory=dict)  # changed files as they were
    after: dict[str, bytes] = field(default_factory=dict)  # and as fixed
    stdin: Optional[str] = None  # the fixed stdin text, when stdin was linted


def fix_until_stable(lint: Callable[[Optional[str]], LintReport], unsafe: bool, stdin: Optional[tuple[str, str]] = None) -> Outcome:
    """`lint(stdin_text)` is one lint run; it sees the fixed contents through the overlay."""
    outcome = Outcome(LintReport(), stdin=stdin[1] if stdin else None)
    fixed: list[Finding] = []
    for round_number in range(MAX_ROUNDS + 1):
        with overlay(outcome.after):
            report = lint(outcome.stdin)
        chosen = select(report.findings, unsafe) if round_number < MAX_ROUNDS else {}
        if not chosen:
            break
        for path, fixes in chosen.items():
            edits = [edit for _, fix in fixes for edit in fix.edits]
            if stdin is not None and path == stdin[0]:
                text = outcome.stdin or ""
                outcome.stdin = notebooks.apply(text.encode(), edits).decode() if notebooks.is_notebook(path) else apply_edits(text, edits)
            else:
                data = outcome.after.get(path) or outcome.before.setdefault(path, read_bytes(path))
                outcome.after[path] = _apply_to_file(path, data, edits)
            fixed.extend(finding for finding, _ in fixes)
    report.fixed = fixed
    outcome.report = report
    return outcome


def select(findings: Iterable[Finding], unsafe: bool) -> dict[str, list[tuple[Finding, Fix]]]:
    """Per file, the fixes to apply now: each finding's fix unless it overlaps one taken before it
    (ruff's rule; the next round lints again and takes it then). A fix equal to one taken is the
    same change: it is applied once and both findings count as fixed."""
    by_file: dict[str, list[tuple[Finding, Fix]]] = {}
    for finding in findings:
        fix = finding.fix_for(unsafe)
        if fix is not None and fix.edits:
            by_file.setdefault(finding.path, []).append((finding, fix))
    chosen: dict[str, list[tuple[Finding, Fix]]] = {}
    for path, candidates in by_file.items():
        taken: list[Fix] = []
        for finding, fix in sorted(candidates, key=lambda item: (item[1].edits[0], item[0])):
            if fix not in taken and any(_overlap(fix, other) for other in taken):
                continue
            taken.append(fix)
            chosen.setdefault(path, []).append((finding, fix))
    return chosen


def _overlap(a: Fix, b: Fix) -> bool:
    """Edits touching at one point overlap too: their order would be ambiguous."""
    return any(
        x.cell == y.cell and (x.line, x.column) <= (y.end_line, y.end_column) and (y.line, y.column) <= (x.end_line, x.end_column)
        for x in a.edits
        for y in b.edits
    )


def _apply_to_file(path: str, data: bytes, edits: list[Edit]) -> bytes:
    if notebooks.is_notebook(path):
        return notebooks.apply(data, edits)
    text = decode(path, data).text
    encoding = _encoding(data)
    return apply_edits(text, edits).encode(encoding)


def _encoding(data: bytes) -> str:
    try:
        return tokenize.detect_encoding(io.BytesIO(data).readline)[0]
    except SyntaxError as error:  # decoded fine before, so this cannot happen for a linted file
        raise SourceError(str(error)) from None


def unified_diff(path: str, before: bytes, after: bytes) -> str:
    if notebooks.is_notebook(path):
        return notebooks.unified_diffs(path, before, after)
    old = lines_with_ends(decode(path, before).text)
    new = lines_with_ends(decode(path, after).text)
    lines = difflib.unified_diff(old, new, fromfile=f"a/{path}", tofile=f"b/{path}")
    return "".join(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n" for line in lines)


def write(outcome: Outcome) -> list[str]:
    """Write the fixed files; a file that changed on disk since it was read is left alone (its
    path is returned as an error)."""
    skipped = []
    for path, data in outcome.after.items():
        if read_bytes(path) != outcome.before[path]:
            skipped.append(path)
            continue
        with open(path, "wb") as handle:
            handle.write(data)
    return skipped


def add_noqa(findings: Iterable[Finding]) -> tuple[Outcome, int, list[tuple[str, int]]]:
    """`# noqa: CODES` on the line each finding reports (--add-noqa): the contents to write, the
    number of lines given a directive, and the (path, line) pairs that cannot take a comment."""
    from ckptlint.suppression import noqa_edits

    wanted: dict[str, dict[tuple[Optional[int], int], set[str]]] = {}
    for finding in findings:
        wanted.setdefault(finding.path, {}).setdefault((finding.cell, finding.line), set()).add(finding.code)
    outcome = Outcome(LintReport())
    added, skipped = 0, []
    for path, lines in wanted.items():
        data = read_bytes(path)
        source = decode(path, data)
        # Work on the text that was linted (a notebook's joined cells), then place edits in cells.
        starts = dict(source.cells or ())
        joined = {(starts[cell] + line - 1 if cell else line): codes for (cell, line), codes in lines.items()}
        edits, blocked = noqa_edits(source.text, joined)
        skipped += [(path, line) for line in blocked]
        if not edits:
            continue
        if source.cells:
            edits = [notebooks.relocate_edit(edit, source.cells) for edit in edits]
        outcome.before[path] = data
        outcome.after[path] = _apply_to_file(path, data, edits)
        added += len(edits)
    return outcome, added, skipped

"""Baselines for legacy code: `--baseline FILE` reports only findings the file does not list,
`--update-baseline` writes the current findings into it.

An entry is keyed by the code, the path (relative to the baseline file, POSIX) and a fingerprint of
the code around the finding: the finding's own lines and the header of the `def`/`class` around
it, whitespace and comments left out. Line numbers are not part of it, so moving code or editing
other code keeps entries matching; editing the flagged code itself makes the finding new.
Identical fingerprints are counted, so a second copy of a baselined line is reported.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Optional

from ckptlint import __version__
from ckptlint.findings import Finding, StaleEntry

FORMAT_VERSION = 1
ReadLines = Callable[[str, Optional[int]], Optional[list[str]]]
_COMMENT = re.compile(r"\s*#.*$")
_HEADER = re.compile(r"\s*(?:async\s+def|def|class)\s+\w+")

Key = tuple[str, str, str]  # code, path, fingerprint


class BaselineError(Exception):
    """A baseline file that cannot be read; the message is user-facing."""


@dataclass
class Baseline:
    path: Path
    counts: Counter = field(default_factory=Counter)
    lines: dict[Key, int] = field(default_factory=dict)

    @classmethod
    def load(cls, path: Path) -> "Baseline":
        try:
            document = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise BaselineError(f"baseline file {path} does not exist (create it with --update-baseline)") from None
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
            raise BaselineError(f"cannot read baseline file {path}: {error}") from None
        entries = document.get("findings") if isinstance(document, dict) else None
        if not isinstance(entries, list) or document.get("version") != FORMAT_VERSION:
            raise BaselineError(f"{path} is not a ckptlint baseline (format version {FORMAT_VERSION})")
        baseline = cls(path)
        for entry in entries:
            try:
                key = (str(entry["code"]), str(entry["path"]), str(entry["fingerprint"]))
                baseline.counts[key] += int(entry.get("count", 1))
                baseline.lines[key] = int(entry.get("line", 0))
            except (KeyError, TypeError, ValueError):
                raise BaselineError(f"{path}: malformed entry {entry!r}") from None
        return baseline

    def split(self, findings: Iterable[Finding], read_lines: ReadLines) -> tuple[list[Finding], int, list[StaleEntry]]:
        """(findings not in the baseline, how many were, the entries nothing matched)."""
        left = Counter(self.counts)
        new, known = [], 0
        for finding in findings:
            key = self.key(finding, read_lines)
            if left[key] > 0:
                left[key] -= 1
                known += 1
            else:
                new.append(finding)
        stale = [StaleEntry(code, path, self.lines.get((code, path, fp), 0), n) for (code, path, fp), n in sorted(left.items()) if n > 0]
        return new, known, stale

    def key(self, finding: Finding, read_lines: ReadLines) -> Key:
        return finding.code, self.relative(finding.path), fingerprint(finding, read_lines(finding.path, finding.cell) or [])

    def relative(self, path: str) -> str:
        base = os.path.dirname(os.path.abspath(self.path))
        return Path(os.path.relpath(os.path.abspath(path), base)).as_posix()

    def write(self, findings: Iterable[Finding], read_lines: ReadLines) -> int:
        counts: Counter = Counter()
        lines: dict[Key, int] = {}
        for finding in findings:
            key = self.key(finding, read_lines)
            counts[key] += 1
            lines.setdefault(key, finding.line)
        entries = [
            {"code": code, "path": path, "fingerprint": fp, "count": n, "line": lines[(code, path, fp)]}
            for (code, path, fp), n in sorted(counts.items(), key=lambda item: (item[0][1], lines[item[0]], item[0][0], item[0][2]))
        ]
        document = {"version": FORMAT_VERSION, "tool": f"ckptlint {__version__}", "findings": entries}
        self.path.write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
        return sum(counts.values())


def fingerprint(finding: Finding, lines: list[str]) -> str:
    """The finding's lines and the enclosing `def`/`class` header, without whitespace or comments."""
    own = lines[finding.line - 1 : finding.end_line] if 0 < finding.line <= len(lines) else []
    parts = [finding.code, *(_normalized(line) for line in own), _normalized(_enclosing_header(lines, finding.line))]
    return hashlib.blake2b("\n".join(parts).encode(), digest_size=8).hexdigest()


def _normalized(line: str) -> str:
    return "".join(_COMMENT.sub("", line).split())


def _enclosing_header(lines: list[str], line: int) -> str:
    """The nearest `def`/`class` line above, indented less than the finding's line."""
    if not 0 < line <= len(lines):
        return ""
    text = lines[line - 1]
    indent = len(text) - len(text.lstrip())
    for candidate in reversed(lines[: line - 1]):
        stripped = candidate.lstrip()
        depth = len(candidate) - len(stripped)
        if stripped and depth < indent:
            if _HEADER.match(candidate):
                return candidate
            indent = depth
    return ""

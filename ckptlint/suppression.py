"""Inline suppressions: `# noqa[: CODES]`, `# ckptlint: disable=CODES`, `# ckptlint: disable-file`."""

from __future__ import annotations

import io
import re
import tokenize
from dataclasses import dataclass
from typing import Optional

from ckptlint.findings import Edit
from ckptlint.lines import lines_of

_NOQA = re.compile(r"#\s*noqa(?::\s*(?P<codes>[A-Z]+[0-9]+(?:[\s,]+[A-Z]+[0-9]+)*))?", re.IGNORECASE)
_DISABLE = re.compile(r"#\s*ckptlint:\s*disable=(?P<codes>[A-Z]+[0-9]+(?:\s*,\s*[A-Z]+[0-9]+)*)", re.IGNORECASE)
_DISABLE_FILE = re.compile(r"^\s*#\s*ckptlint:\s*disable-file\b", re.IGNORECASE | re.MULTILINE)
_CODE = re.compile(r"[A-Z]+[0-9]+", re.IGNORECASE)

ALL = None  # a bare `# noqa` suppresses every code on its line


@dataclass(frozen=True)
class Suppressions:
    lines: list[str]

    @staticmethod
    def disables_file(source: str) -> bool:
        return _DISABLE_FILE.search(source) is not None

    def codes_on(self, line: int) -> Optional[frozenset[str]]:
        """Codes suppressed on a 1-based line; ALL (None) for a bare noqa; empty when none."""
        if not 0 < line <= len(self.lines):
            return frozenset()
        text = self.lines[line - 1]
        if "#" not in text:
            return frozenset()
        codes: set[str] = set()
        noqa = _NOQA.search(text)
        if noqa is not None:
            if noqa.group("codes") is None:
                return ALL
            codes.update(c.upper() for c in _CODE.findall(noqa.group("codes")))
        disable = _DISABLE.search(text)
        if disable is not None:
            codes.update(c.upper() for c in _CODE.findall(disable.group("codes")))
        return frozenset(codes)

    def suppresses(self, line: int, code: str) -> bool:
        codes = self.codes_on(line)
        return codes is ALL or code in codes


def noqa_edits(text: str, wanted: dict[int, set[str]]) -> tuple[list[Edit], list[int]]:
    """Edits adding `# noqa: CODES` to each line of `wanted` (1-based), merged into the noqa
    comment already there (ruff's --add-noqa); and the lines that cannot take a comment (their end
    is inside a string, or a backslash continues them)."""
    lines = lines_of(text)
    blocked = _uncommentable(text, lines)
    edits: list[Edit] = []
    skipped: list[int] = []
    for line, codes in sorted(wanted.items()):
        if line in blocked or line > len(lines):
            skipped.append(line)
            continue
        current = lines[line - 1]
        noqa = _NOQA.search(current)
        if noqa is not None and noqa.group("codes") is None:
            continue  # a bare noqa already covers every code
        if noqa is not None:
            present = {c.upper() for c in _CODE.findall(noqa.group("codes"))}
            added = sorted(codes - present)
            if added:
                end = noqa.end("codes") + 1
                edits.append(Edit(line, end, line, end, ", " + ", ".join(added)))
            continue
        content = len(current.rstrip()) + 1
        edits.append(Edit(line, content, line, len(current) + 1, f"  # noqa: {', '.join(sorted(codes))}"))
    return edits, skipped


def _uncommentable(text: str, lines: list[str]) -> set[int]:
    blocked: set[int] = set()
    commented: set[int] = set()
    opened: list[int] = []
    try:
        for token in tokenize.generate_tokens(io.StringIO(text).readline):
            kind = tokenize.tok_name[token.type]
            if kind == "COMMENT":
                commented.add(token.start[0])
            elif kind == "STRING":
                blocked.update(range(token.start[0], token.end[0]))  # empty unless it spans lines
            elif kind in ("FSTRING_START", "TSTRING_START"):
                opened.append(token.start[0])
            elif kind in ("FSTRING_END", "TSTRING_END") and opened:
                blocked.update(range(opened.pop(), token.end[0]))
    except (tokenize.TokenError, SyntaxError):
        pass
    blocked.update(n for n, line in enumerate(lines, start=1) if n not in commented and line.rstrip().endswith("\\"))
    return blocked

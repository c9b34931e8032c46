"""Inline suppressions: `# noqa[: CODES]`, `# ckptlint: disable=CODES`, `# ckptlint: disable-file`."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Optional

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

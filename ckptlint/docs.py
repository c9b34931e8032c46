"""Rule documents: `rules/CKPTnnn.md` in a checkout, `ckptlint/rule_docs/` inside the wheel."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

_PACKAGE = Path(__file__).resolve().parent
_LOCATIONS = (_PACKAGE / "rule_docs", _PACKAGE.parent / "rules")


def rule_document(code: str) -> Optional[str]:
    for directory in _LOCATIONS:
        path = directory / f"{code.upper()}.md"
        if path.is_file():
            return path.read_text(encoding="utf-8")
    return None

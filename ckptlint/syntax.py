"""What a parse error says: where it is, and whether a newer Python would have parsed the file."""

from __future__ import annotations

import platform
from typing import Optional

# LibCST reads syntax newer than the Python running ckptlint: what it finds names the version needed.
_NEWER_SYNTAX = (
    ("TemplatedString", "a template string", (3, 14)),
    ("TypeAlias", "a type statement", (3, 12)),
    ("TypeParameters", "type parameters", (3, 12)),
    ("TryStar", "except*", (3, 11)),
    ("Match", "a match statement", (3, 10)),
)


def syntax_error_message(error: SyntaxError, text: str) -> str:
    line, column = error.lineno, error.offset
    if line is None and "\0" in text:  # Python 3.11 gives no position for a NUL byte
        at = text.index("\0")
        line, column = text.count("\n", 0, at) + 1, at - text.rfind("\n", 0, at)
    where = f" at line {line}, column {column}" if line is not None else ""
    message = f"syntax error{where}: {error.msg}"
    newer = _newer_syntax(text)
    if newer is not None:
        feature, version = newer
        message += (
            f" (Python {platform.python_version()} cannot parse {feature}, which needs Python "
            f"{'.'.join(map(str, version))} or newer: run ckptlint on a newer Python)"
        )
    return message


def _newer_syntax(text: str) -> Optional[tuple[str, tuple[int, int]]]:
    """The newest construct in `text` that this Python does not know, if LibCST parses the file."""
    import sys

    import libcst as cst

    from ckptlint.model.walk import descendants

    try:
        tree = cst.parse_module(text)
    except Exception:  # noqa: BLE001 - not newer Python, just broken
        return None
    kinds = {type(node).__name__ for node in descendants(tree)}
    for name, feature, version in _NEWER_SYNTAX:
        if version > sys.version_info[:2] and name in kinds:
            return feature, version
    return None

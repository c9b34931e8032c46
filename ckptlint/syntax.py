"""What a parse error says: where it is, and whether a newer Python would have parsed the file."""

from __future__ import annotations

import __future__
import ast
import platform
from typing import Optional

from ckptlint.lines import lines_of

# LibCST reads syntax newer than the Python running ckptlint: what it finds names the version needed.
_NEWER_SYNTAX = (
    ("TemplatedString", "a template string", (3, 14)),
    ("TypeAlias", "a type statement", (3, 12)),
    ("TypeParameters", "type parameters", (3, 12)),
    ("TryStar", "except*", (3, 11)),
    ("Match", "a match statement", (3, 10)),
)


_FUTURE_FEATURES = frozenset(__future__.all_feature_names)
_LATE_FUTURE = "from __future__ imports must occur at the beginning of the file"


def check_future_imports(tree: ast.Module, source: str, path: str) -> None:
    """Raise the SyntaxError compile() gives for `from __future__` imports, which ast.parse (and
    LibCST) accept: one after other code, or of a feature that does not exist. Mirrors CPython's
    future.c and its compiler's check of later ones."""
    body = tree.body
    docstring = bool(body) and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str)
    last_future_line, previous_line, done, accepted = 0, 0, False, 0
    for statement in body[1 if docstring else 0 :]:
        if done and statement.lineno > previous_line:
            break
        previous_line = statement.lineno
        if not (isinstance(statement, ast.ImportFrom) and statement.module == "__future__"):
            done = True
            continue
        if done:  # after other code on the same line, joined by a semicolon (CPython's column is 0-based here)
            _raise(_LATE_FUTURE, statement, source, path, column=statement.col_offset)
        for alias in statement.names:
            if alias.name == "braces":
                _raise("not a chance", statement, source, path)
            if alias.name not in _FUTURE_FEATURES:
                _raise(f"future feature {alias.name} is not defined", statement, source, path)
        last_future_line, accepted = statement.lineno, accepted + 1
    if source.count("__future__") <= accepted:
        return  # every mention is one of the imports just checked
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == "__future__" and node.lineno > last_future_line:
            _raise(_LATE_FUTURE, node, source, path)


def _raise(message: str, statement: ast.stmt, source: str, path: str, column: Optional[int] = None) -> None:
    lines = lines_of(source)
    text = lines[statement.lineno - 1] if statement.lineno <= len(lines) else None
    raise SyntaxError(message, (path, statement.lineno, statement.col_offset + 1 if column is None else column, text))


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

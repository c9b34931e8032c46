"""The command-line switches a script's flagged code runs under: `if args.gradient_checkpointing:`
over an `argparse` option declared `action="store_true"`. Run bare, such a script never reaches the
finding; --confirm runs it with those switches on its command line, and says so.
"""

from __future__ import annotations

import ast
import re
from typing import Iterable, Optional


def switches_reaching(source: str, lines: Iterable[int]) -> list[str]:
    """The `store_true` options (as spelled: `--gradient_checkpointing`) whose truth an `if` tests
    around one of `lines` of `source`, or around code that switches checkpointing on
    (`model.use_checkpoint = True`, `model.gradient_checkpointing_enable()`); [] when none does,
    or the source does not parse."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return []
    options = _store_true_options(tree)
    if not options:
        return []
    wanted = set(lines)
    text = source.splitlines()
    found: list[str] = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.If):
            continue
        first, last = node.body[0].lineno, node.body[-1].end_lineno or node.body[-1].lineno
        if not any(first <= line <= last for line in wanted) and not _CHECKPOINTING.search("\n".join(text[first - 1 : last])):
            continue
        for dest in _tested_options(node.test):
            if dest in options and options[dest] not in found:
                found.append(options[dest])
    return found


# Code that switches checkpointing on, under whatever name.
_CHECKPOINTING = re.compile(r"checkpoint|ckpt", re.IGNORECASE)


def _store_true_options(tree: ast.AST) -> dict[str, str]:
    """dest -> the option string, for every `parser.add_argument("--name", action="store_true")`."""
    options: dict[str, str] = {}
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "add_argument"):
            continue
        keywords = {k.arg: k.value for k in node.keywords if k.arg}
        action = keywords.get("action")
        if not (isinstance(action, ast.Constant) and action.value == "store_true"):
            continue
        flags = [a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str) and a.value.startswith("-")]
        if not flags:
            continue
        spelled = next((f for f in flags if f.startswith("--")), flags[0])
        dest = keywords.get("dest")
        name = dest.value if isinstance(dest, ast.Constant) and isinstance(dest.value, str) else spelled.lstrip("-").replace("-", "_")
        options[name] = spelled
    return options


def _tested_options(test: ast.expr) -> list[str]:
    """The attributes a test requires to be true: `args.x`, `args.x and args.y`."""
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And):
        return [name for value in test.values for name in _tested_options(value)]
    name: Optional[str] = test.attr if isinstance(test, ast.Attribute) and isinstance(test.value, ast.Name) else None
    return [name] if name else []

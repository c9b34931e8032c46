"""A read-only LibCST traversal.

`node.visit(visitor)` rebuilds every node it passes (`_visit_and_replace_children`), which made
tree walking cost three times the parse on transformers. The model only reads, so it walks the
dataclass fields directly and calls the same `visit_<Node>` / `leave_<Node>` methods.
"""

from __future__ import annotations

import dataclasses
from typing import Callable, Iterator, Optional

import libcst as cst

# Fields that hold only whitespace, punctuation and comments.
_TRIVIA = (
    "whitespace", "lpar", "rpar", "leading_lines", "lines_after", "comma", "semicolon", "header",
    "footer", "newline", "indent", "dot", "equal", "colon", "lbracket", "rbracket", "lbrace",
    "rbrace", "first_line", "asynchronous", "star", "default_indent", "default_newline",
)  # fmt: skip
_FIELDS: dict[type, tuple[str, ...]] = {}
# Per type of field value: a node, a sequence, or neither. `isinstance(value, cst.CSTNode)` goes
# through ABCMeta's check, and this test runs on every field of every node walked (5 % of a cold run).
_NODE, _SEQUENCE, _OTHER = 1, 2, 0
_KINDS: dict[type, int] = {}


def _kind(value: object) -> int:
    kind = _KINDS.get(type(value))
    if kind is None:
        kind = _KINDS[type(value)] = _NODE if isinstance(value, cst.CSTNode) else _SEQUENCE if isinstance(value, (list, tuple)) else _OTHER
    return kind


def children(node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    names = _FIELDS.get(type(node))
    if names is None:
        names = _FIELDS[type(node)] = tuple(f.name for f in dataclasses.fields(node) if not f.name.startswith(_TRIVIA))
    kinds = _KINDS
    for name in names:
        value = getattr(node, name)
        kind = kinds.get(type(value))
        if kind is None:
            kind = _kind(value)
        if kind == _NODE:
            yield value
        elif kind == _SEQUENCE:
            for item in value:
                if (kinds.get(type(item)) or _kind(item)) == _NODE:
                    yield item


def descendants(node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    """The node and every node under it (whitespace and punctuation left out)."""
    stack = [node]
    while stack:
        current = stack.pop()
        yield current
        stack.extend(children(current))


class ReadOnlyWalker:
    """Subclasses define `visit_<Node>` (return False to skip children) and `leave_<Node>`."""

    def __init__(self) -> None:
        self._handlers: dict[type, tuple[Optional[Callable], Optional[Callable]]] = {}

    def walk(self, node: cst.CSTNode) -> None:
        handlers = self._handlers.get(type(node))
        if handlers is None:
            name = type(node).__name__
            handlers = self._handlers[type(node)] = (getattr(self, f"visit_{name}", None), getattr(self, f"leave_{name}", None))
        visit, leave = handlers
        if visit is None or visit(node) is not False:
            for child in children(node):
                self.walk(child)
        if leave is not None:
            leave(node)

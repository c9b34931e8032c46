"""Fast walks over `ast` trees: the index and the per-function summaries walk every function of a
project, and `ast.walk` / `ast.iter_child_nodes` (a generator over every field, leaves included)
were most of that time."""

from __future__ import annotations

import ast
from typing import Optional, Union

Literal = Union[bool, int, float, str, None]

# A module-level partial's keyword bound to a module-level name (`Alias.keywords`): {CONSTANT_KEY: qualified name}.
CONSTANT_KEY = "<module-level name>"


def literal(node: ast.AST) -> tuple[bool, Literal]:
    """(True, value) for a literal number, string, bool or None (`-1` too); (False, None) otherwise."""
    if isinstance(node, ast.Constant) and isinstance(node.value, (bool, int, float, str, type(None))):
        return True, node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub) and isinstance(node.operand, ast.Constant) and type(node.operand.value) in (int, float):
        return True, -node.operand.value
    return False, None


def in_source_order(node: ast.AST) -> list[ast.AST]:
    """Depth-first pre-order; `ast.walk` is breadth-first, which would read a list before it is filled."""
    order = []
    stack = [node]
    while stack:
        current = stack.pop()
        if not isinstance(current, ast.AST):
            continue
        order.append(current)
        children: list = []
        for name in child_fields(type(current)):
            value = getattr(current, name, None)
            if type(value) is list:
                children.extend(value)
            elif value is not None:
                children.append(value)
        children.reverse()
        stack.extend(children)
    return order


def nodes(node: ast.AST) -> list[ast.AST]:
    """Every node under `node` but expression contexts, in no particular order (faster than `ast.walk`)."""
    found = []
    stack = [node]
    pop, push, extend, add, AST = stack.pop, stack.append, stack.extend, found.append, ast.AST
    while stack:
        current = pop()
        if not isinstance(current, AST):
            continue  # None in `Dict.keys`, strings in pattern fields
        add(current)
        for name in child_fields(type(current)):
            value = getattr(current, name, None)
            if type(value) is list:
                extend(value)
            elif value is not None:
                push(value)
    return found


def child_fields(kind: type) -> tuple[str, ...]:
    """The fields of a node type that can hold nodes."""
    fields = CHILD_FIELDS.get(kind)
    if fields is None:
        # Leaves (identifiers, constants, operators, Load/Store) hold nothing to walk into.
        fields = CHILD_FIELDS[kind] = tuple(f for f in kind._fields if f not in _LEAF_FIELDS)
    return fields


_LEAF_FIELDS = frozenset({"ctx", "id", "attr", "arg", "asname", "name", "names", "module", "level", "kind", "type_comment", "op", "ops", "conversion", "is_async", "simple", "tag"})
# `child_fields`' memo, by node type; walks that see every node of a project read it directly (`.get`).
CHILD_FIELDS: dict[type, tuple[str, ...]] = {ast.Constant: ()}


# `nn.Embedding.from_pretrained(weights)` / `nn.EmbeddingBag.from_pretrained(...)`: `freeze=True` by
# default (torch 2.13), so the table is frozen unless `freeze` is passed and not literally True.
_FROZEN_TABLES = ("Embedding", "EmbeddingBag")


def table_freeze(value: ast.AST) -> Optional[tuple[Optional[ast.expr]]]:
    """For `nn.Embedding.from_pretrained(weights, ...)`: (its `freeze` argument,), (None,) when it is
    not passed; None for any other expression."""
    func = value.func if isinstance(value, ast.Call) else None
    if not (isinstance(func, ast.Attribute) and func.attr == "from_pretrained"):
        return None
    owner = func.value
    if (owner.attr if isinstance(owner, ast.Attribute) else owner.id if isinstance(owner, ast.Name) else None) not in _FROZEN_TABLES:
        return None
    return (next((k.value for k in value.keywords if k.arg == "freeze"), value.args[1] if len(value.args) > 1 else None),)  # type: ignore[union-attr]


def frozen_table(value: ast.AST) -> Optional[bool]:
    """For `nn.Embedding.from_pretrained(weights, ...)`: whether the table it builds is frozen
    (None: not such a call, or `freeze=` not a literal)."""
    found = table_freeze(value)
    if found is None:
        return None
    known, flag = literal(found[0]) if found[0] is not None else (True, True)
    return flag if known and isinstance(flag, bool) else None

"""Tests on what a construction decides: an `if` in `__init__` (or a method of the class) on a
constructor parameter or on a flag `__init__` stores from one (`if freeze_embed:`,
`if self.frozen_stages >= 0:`). Code under such a test runs only for the constructions whose
arguments, or the defaults, make it true.

The same holds in a function on its own parameters (`if not trainable:` in a builder that returns
the layer it makes): there each call's arguments, or the defaults, decide.

A test is kept as JSON: ["init", class, parameter] / ["self", attribute] / ["param", function,
parameter, position, [default] or []] (the operand), ["const", literal], a comparison [operator,
left, right], ["not", test], ["and" | "or", tests...]; the operand is truth-tested when it stands
alone.
"""

from __future__ import annotations

import ast
import operator
from dataclasses import dataclass
from typing import Callable, Iterator, Optional

from ckptlint.ast_nodes import literal, table_freeze

_COMPARISONS: dict[type, tuple[str, Callable[[object, object], bool]]] = {
    ast.Eq: ("==", operator.eq), ast.NotEq: ("!=", operator.ne), ast.Lt: ("<", operator.lt), ast.LtE: ("<=", operator.le),
    ast.Gt: (">", operator.gt), ast.GtE: (">=", operator.ge), ast.Is: ("is", operator.is_), ast.IsNot: ("is not", operator.is_not),
}
_OPERATIONS = dict(_COMPARISONS.values())

# Marks the test of a flag set from the construction (`requires_grad_(train_embed)`): when it
# cannot be decided, the step may or may not happen (an `if` that cannot be decided counts as taken).
SWITCH = "switch"

# An operand's value: (value,) when known, None when not.
Lookup = Callable[[list], Optional[tuple[object]]]


@dataclass(frozen=True)
class Decider:
    """Who decides the tests of some code: the constructions of `owner` (for its methods; the
    `__init__` parameters `init_params` when the code is in `__init__`), or the calls of the
    top-level `function` (`signature`: parameter -> [position, [default] or []])."""

    owner: str = ""
    init_params: frozenset[str] = frozenset()
    function: str = ""
    signature: Optional[dict[str, list]] = None

    def __bool__(self) -> bool:
        return bool(self.owner or self.function)


def construction_test(test: ast.expr, decider: Decider) -> Optional[list]:
    """`test` as a test its decider's constructions or calls decide; None when it reads anything else."""
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        inner = construction_test(test.operand, decider)
        return ["not", inner] if inner is not None else None
    if isinstance(test, ast.BoolOp):
        parts = [construction_test(v, decider) for v in test.values]
        return ["and" if isinstance(test.op, ast.And) else "or", *parts] if all(p is not None for p in parts) else None  # type: ignore[list-item]
    if isinstance(test, ast.Compare) and len(test.ops) == 1 and type(test.ops[0]) in _COMPARISONS:
        left, right = _operand(test.left, decider), _operand(test.comparators[0], decider)
        if left is None or right is None or left[0] == right[0] == "const":
            return None
        return [_COMPARISONS[type(test.ops[0])][0], left, right]
    found = _operand(test, decider)
    return found if found is not None and found[0] != "const" else None


def _operand(node: ast.expr, decider: Decider) -> Optional[list]:
    known, value = literal(node)
    if known:
        return ["const", value]
    if decider.owner:
        if isinstance(node, ast.Name) and node.id in decider.init_params:
            return ["init", decider.owner, node.id]
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self":
            return ["self", node.attr]
    elif decider.signature is not None and isinstance(node, ast.Name) and node.id in decider.signature:
        return ["param", decider.function, node.id, *decider.signature[node.id]]
    return None


def call_value(operand: list, function: str, passed: dict[str, object]) -> Optional[tuple[object]]:
    """(value,) of a ["param", ...] operand of `function` for a call that passes the literals
    `passed` (by position "0", "1", ... or keyword; "*" when it spreads arguments too)."""
    if operand[1] != function:
        return None
    name, position, default = operand[2], str(operand[3]), operand[4]
    given = passed[name] if name in passed else passed[position] if position in passed else None
    if name in passed or position in passed:
        return None if isinstance(given, dict) else (given,)  # {"class": ...}: not a literal
    return (default[0],) if default and "*" not in passed else None


def guarded(body: list[ast.stmt], decider: Decider, outer: Optional[list] = None) -> Iterator[tuple[ast.stmt, Optional[list]]]:
    """The statements of `body` with the construction test each runs under: the branches of an
    `if` on the construction stand for its statements, each under its test (or its negation);
    `requires_grad` set from the construction (`self.embed.requires_grad_(train_embed)`) stands
    for setting it to True under that test and to False under its negation."""
    both = lambda test: test if outer is None else ["and", outer, test]  # noqa: E731
    for stmt in body:
        test = construction_test(stmt.test, decider) if decider and isinstance(stmt, ast.If) else None
        if test is not None:
            yield from guarded(stmt.body, decider, both(test))
            yield from guarded(stmt.orelse, decider, both(["not", test]))
            continue
        switch = _switched_requires_grad(stmt)
        test = construction_test(switch[0], decider) if decider and switch is not None else None
        if switch is None or test is None:
            yield stmt, outer
            continue
        yield switch[1](True), both([SWITCH, test])  # type: ignore[misc]
        unset = switch[1](False)
        if unset is not None:
            yield unset, both([SWITCH, ["not", test]])


def _switched_requires_grad(stmt: ast.stmt) -> Optional[tuple[ast.expr, Callable[[bool], Optional[ast.stmt]]]]:
    """For `x.requires_grad = value` / `x.requires_grad_(value)` with a value that is not a literal:
    the value, and the statement with a literal flag in its place."""
    if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Attribute) and stmt.targets[0].attr == "requires_grad":
        value = stmt.value
        rebuilt: Callable[[bool], Optional[ast.stmt]] = lambda flag: ast.copy_location(ast.Assign(stmt.targets, ast.copy_location(ast.Constant(flag), value)), stmt)  # type: ignore[attr-defined]  # noqa: E731
    elif (
        isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Attribute) and isinstance(made := stmt.value, ast.Call)
        and (keyword := next((k for k in made.keywords if k.arg == "requires_grad"), None)) is not None
    ):
        # `emb.weight = nn.Parameter(vectors, requires_grad=trainable)`
        value = keyword.value

        def rebuilt(flag: bool) -> ast.stmt:
            keywords = [k if k is not keyword else ast.keyword("requires_grad", ast.copy_location(ast.Constant(flag), value)) for k in made.keywords]
            return ast.copy_location(ast.Assign(stmt.targets, ast.copy_location(ast.Call(made.func, made.args, keywords), made)), stmt)  # type: ignore[call-arg]
    elif (
        isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(table := stmt.value, ast.Call)
        and (found := table_freeze(table)) is not None and found[0] is not None
    ):
        # `emb = nn.Embedding.from_pretrained(weights, freeze=freeze)`: frozen as the flag says. Built
        # unfrozen it needs no step of its own, and binding it once keeps it one object.
        value = found[0]

        def rebuilt(flag: bool) -> Optional[ast.stmt]:  # type: ignore[misc]
            if not flag:
                return None
            flagged = ast.copy_location(ast.Constant(flag), value)
            args = [a if a is not value else flagged for a in table.args]
            keywords = [k if k.value is not value else ast.keyword("freeze", flagged) for k in table.keywords]
            return ast.copy_location(ast.Assign(stmt.targets, ast.copy_location(ast.Call(table.func, args, keywords), table)), stmt)  # type: ignore[call-arg]
    elif (
        isinstance(stmt, ast.Expr) and isinstance(call := stmt.value, ast.Call) and isinstance(call.func, ast.Attribute)
        and call.func.attr == "requires_grad_" and len(call.args) == 1 and not call.keywords
    ):
        value = call.args[0]
        rebuilt = lambda flag: ast.copy_location(ast.Expr(ast.copy_location(ast.Call(call.func, [ast.copy_location(ast.Constant(flag), value)], []), call)), stmt)  # noqa: E731
    else:
        return None
    return (value, rebuilt) if not literal(value)[0] else None


def switched(test: list) -> bool:
    """Whether the test decides the value of a flag (see SWITCH), here or in an outer `and`."""
    return test[0] == SWITCH or test[0] == "and" and any(switched(t) for t in test[1:])


def holds(test: list, lookup: Lookup) -> Optional[bool]:
    """Whether `test` holds once `lookup` gives its operands' values; None when that cannot be told."""
    kind = test[0]
    if kind == SWITCH:
        return holds(test[1], lookup)
    if kind == "not":
        inner = holds(test[1], lookup)
        return None if inner is None else not inner
    if kind in ("and", "or"):
        results = [holds(t, lookup) for t in test[1:]]
        decisive = kind == "or"  # one true decides `or`, one false decides `and`
        if decisive in results:
            return decisive
        return None if None in results else not decisive
    if kind in _OPERATIONS:
        left, right = _value(test[1], lookup), _value(test[2], lookup)
        if left is None or right is None:
            return None
        try:
            return bool(_OPERATIONS[kind](left[0], right[0]))
        except TypeError:
            return None
    value = _value(test, lookup)
    return bool(value[0]) if value is not None else None


def _value(operand: list, lookup: Lookup) -> Optional[tuple[object]]:
    return (operand[1],) if operand[0] == "const" else lookup(operand)

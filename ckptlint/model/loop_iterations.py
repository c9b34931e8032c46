"""What the first iteration of a loop takes, for the builder's single walk over a loop body.

The builder walks a loop body once, with the values from before the loop: a checkpoint that the
first iteration reaches sees them (`for block in blocks: x = checkpoint(block, x)` hands the first
block raw input). A name that holds nothing yet (`gate = None`) and that the body sets to a tensor
that requires grad holds either from the start of the walk: a later iteration hands that tensor to
the calls before the assignment. A branch the first iteration cannot take (`if i > 0:` over
`enumerate(...)` or `range(...)`, `if first:` after `first = True`, their `else`) runs only once
the body has run: the names the body assigns hold what an earlier iteration left in them there,
not the values from before the loop (the usual way to skip checkpointing the first block).
"""

from __future__ import annotations

import operator
from functools import cached_property
from typing import Callable, Optional

import libcst as cst

from ckptlint.model.values import Const, Ref, Value
from ckptlint.model.walk import children

_ENUMERATE = Ref("builtins.enumerate")
_RANGE = Ref("builtins.range")
_COMPARISONS: dict[type, Callable[[int, int], bool]] = {
    cst.Equal: operator.eq,
    cst.NotEqual: operator.ne,
    cst.GreaterThan: operator.gt,
    cst.GreaterThanEqual: operator.ge,
    cst.LessThan: operator.lt,
    cst.LessThanEqual: operator.le,
}


class LoopFacts:
    """One loop being walked: its counters' first values; the names its body assigns and the values
    assigned to a plain name (`gate = self.gate(h)`), found when first asked (most loops never are)."""

    def __init__(self, node: cst.For, counters: dict[str, int]) -> None:
        self.node = node
        self.counters = counters

    @cached_property
    def plain_assignments(self) -> dict[str, list[cst.BaseExpression]]:
        return self._assignments[1]

    @cached_property
    def assigned(self) -> frozenset[str]:
        return self._assignments[0]

    @cached_property
    def _assignments(self) -> tuple[frozenset[str], dict[str, list[cst.BaseExpression]]]:
        plain: dict[str, list[cst.BaseExpression]] = {}
        return frozenset(_assigned_names(self.node.body, plain)), plain


def loop_facts(node: cst.For, evaluate: Callable[[cst.BaseExpression], Value]) -> LoopFacts:
    return LoopFacts(node, _first_counters(node.target, node.iter, evaluate))


def _first_counters(target: cst.BaseExpression, iterable: cst.BaseExpression, evaluate: Callable[[cst.BaseExpression], Value]) -> dict[str, int]:
    """`i` of `for i, x in enumerate(xs)` (0, or its literal `start`) and of `for i in range(a, ...)`."""
    if not isinstance(iterable, cst.Call) or not iterable.args or any(a.star for a in iterable.args):
        return {}
    called = evaluate(iterable.func)
    if called == _ENUMERATE and isinstance(target, cst.Tuple) and len(target.elements) == 2 and isinstance(target.elements[0].value, cst.Name):
        start = next((a.value for a in iterable.args[1:] if a.keyword is None or a.keyword.value == "start"), None)
        first = _literal_int(start) if start is not None else 0
        return {target.elements[0].value.value: first} if first is not None else {}
    if called == _RANGE and isinstance(target, cst.Name) and not any(a.keyword for a in iterable.args):
        first = _literal_int(iterable.args[0].value) if len(iterable.args) > 1 else 0
        return {target.value: first} if first is not None else {}
    return {}


def _literal_int(node: cst.BaseExpression) -> Optional[int]:
    return int(node.value, 0) if isinstance(node, cst.Integer) else None


def _assigned_names(node: cst.CSTNode, plain: dict[str, list[cst.BaseExpression]]) -> set[str]:
    """Names the statements under `node` bind by assignment (nested functions and classes excluded);
    `plain` gets the values of single-name assignments."""
    found: set[str] = set()
    stack: list[cst.CSTNode] = [node]
    while stack:
        current = stack.pop()
        if isinstance(current, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
            continue
        if isinstance(current, cst.Assign) and len(current.targets) == 1 and isinstance(current.targets[0].target, cst.Name):
            plain.setdefault(current.targets[0].target.value, []).append(current.value)
        if isinstance(current, cst.AssignTarget):
            found |= _names_in(current.target)
        elif isinstance(current, (cst.AugAssign, cst.AnnAssign)):
            found |= _names_in(current.target)
        elif isinstance(current, (cst.For, cst.CompFor)):
            found |= _names_in(current.target)
        elif isinstance(current, cst.NamedExpr):
            found |= _names_in(current.target)
        stack.extend(children(current))
    return found


def _names_in(target: cst.BaseExpression) -> set[str]:
    if isinstance(target, cst.Name):
        return {target.value}
    if isinstance(target, (cst.Tuple, cst.List)):
        return {name for element in target.elements for name in _names_in(element.value)}
    if isinstance(target, cst.StarredElement):
        return _names_in(target.value)
    return set()


def first_iteration_truth(test: cst.BaseExpression, loop: LoopFacts, evaluate: Callable[[cst.BaseExpression], Value]) -> Optional[bool]:
    """Whether `test` holds in the loop's first iteration (None: not known): comparisons of a counter
    with an integer, a name that holds a known bool before the loop (`first = True`), `not`, `and`, `or`."""
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        inner = first_iteration_truth(test.expression, loop, evaluate)
        return None if inner is None else not inner
    if isinstance(test, cst.BooleanOperation):
        left, right = first_iteration_truth(test.left, loop, evaluate), first_iteration_truth(test.right, loop, evaluate)
        if isinstance(test.operator, cst.And):
            return False if left is False or right is False else True if left and right else None
        return True if left is True or right is True else False if left is False and right is False else None
    if isinstance(test, cst.Name):
        if test.value in loop.counters:
            return bool(loop.counters[test.value])
        value = evaluate(test)
        return value.value if isinstance(value, Const) and isinstance(value.value, bool) else None
    if isinstance(test, cst.Comparison) and len(test.comparisons) == 1:
        compare = _COMPARISONS.get(type(test.comparisons[0].operator))
        left, right = _counter_or_int(test.left, loop), _counter_or_int(test.comparisons[0].comparator, loop)
        if compare is not None and left is not None and right is not None and (left[1] or right[1]):
            return compare(left[0], right[0])
    return None


def _counter_or_int(node: cst.BaseExpression, loop: LoopFacts) -> Optional[tuple[int, bool]]:
    """(first-iteration value, whether it is a counter) of a counter or an integer literal."""
    if isinstance(node, cst.Name) and node.value in loop.counters:
        return loop.counters[node.value], True
    literal = _literal_int(node)
    return (literal, False) if literal is not None else None

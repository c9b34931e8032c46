"""What a piece of syntax says on its own, without name resolution: `if` tests, dotted names,
the names a body reads."""

from __future__ import annotations

from typing import Optional

import libcst as cst
from libcst.helpers import get_full_name_for_node

from ckptlint.model.walk import ReadOnlyWalker


def none_test(test: cst.BaseExpression) -> Optional[tuple[str, bool]]:
    """(name, True) for `name is None`, (name, False) for `name is not None`."""
    if isinstance(test, cst.Comparison) and len(test.comparisons) == 1 and isinstance(test.left, cst.Name):
        target = test.comparisons[0]
        if isinstance(target.comparator, cst.Name) and target.comparator.value == "None":
            if isinstance(target.operator, cst.Is):
                return test.left.value, True
            if isinstance(target.operator, cst.IsNot):
                return test.left.value, False
    return None


def training_test(test: cst.BaseExpression) -> Optional[bool]:
    """True for tests that hold in training (`self.training`, `x or self.training`), False for `not self.training`."""
    if isinstance(test, cst.Attribute) and is_self(test.value) and test.attr.value == "training":
        return True
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        inner = training_test(test.expression)
        return None if inner is None else not inner
    if isinstance(test, cst.BooleanOperation) and isinstance(test.operator, cst.Or):
        # `a or self.training` holds whenever training is on.
        if training_test(test.left) is True or training_test(test.right) is True:
            return True
    return None


def module_gates(test: cst.BaseExpression) -> Optional[tuple[str, ...]]:
    """The `self.<attr>` flags `if <test>:` requires, through `and`: `self.gradient_checkpointing and
    self.training and not torch.jit.is_scripting()` gives ("gradient_checkpointing",). The mode,
    `torch.is_grad_enabled()`, `x.requires_grad` and negated calls add none; anything else: None."""
    if isinstance(test, cst.BooleanOperation) and isinstance(test.operator, cst.And):
        left, right = module_gates(test.left), module_gates(test.right)
        return None if left is None or right is None else left + right
    if isinstance(test, cst.Attribute) and is_self(test.value):
        return () if test.attr.value == "training" else (test.attr.value,)
    if isinstance(test, cst.Attribute) and test.attr.value == "requires_grad":
        return ()
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not) and isinstance(test.expression, cst.Call):
        return ()  # `not torch.jit.is_scripting()`
    if isinstance(test, cst.Call) and not test.args and dotted(test.func) in ("torch.is_grad_enabled", "torch.autograd.grad_mode.is_grad_enabled"):
        return ()
    return None


def ends_with_return(body: cst.BaseSuite) -> bool:
    statements = body.body if isinstance(body, cst.IndentedBlock) else [body]
    last = statements[-1] if statements else None
    if isinstance(last, cst.SimpleStatementLine):
        return any(isinstance(s, (cst.Return, cst.Raise)) for s in last.body)
    if isinstance(last, cst.SimpleStatementSuite):
        return any(isinstance(s, (cst.Return, cst.Raise)) for s in last.body)
    return False


def is_self(node: cst.BaseExpression) -> bool:
    return isinstance(node, cst.Name) and node.value == "self"


def is_super(node: cst.BaseExpression) -> bool:
    return isinstance(node, cst.Call) and isinstance(node.func, cst.Name) and node.func.value == "super"


class _FreeNames(ReadOnlyWalker):
    def __init__(self) -> None:
        super().__init__()
        self.names: set[str] = set()

    def visit_Name(self, node: cst.Name) -> None:
        self.names.add(node.value)

    def visit_Attribute(self, node: cst.Attribute) -> bool:
        self.walk(node.value)  # `a.b` reads `a`, not a variable named `b`
        return False


def free_names(body: cst.CSTNode) -> set[str]:
    visitor = _FreeNames()
    visitor.walk(body)
    return visitor.names


def dotted(node: cst.BaseExpression) -> Optional[str]:
    """`a.b.c` for names and attribute chains (LibCST's helper also names calls, which we don't want)."""
    return get_full_name_for_node(node) if isinstance(node, (cst.Name, cst.Attribute)) and is_chain(node) else None


def is_chain(node: cst.BaseExpression) -> bool:
    while isinstance(node, cst.Attribute):
        node = node.value
    return isinstance(node, cst.Name)

"""What a piece of syntax says on its own, without name resolution: `if` tests, dotted names,
the names a body reads."""

from __future__ import annotations

from typing import Optional, Sequence, Union

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


def is_main_guard(test: cst.BaseExpression) -> bool:
    """`__name__ == "__main__"`, either way round."""
    if not (isinstance(test, cst.Comparison) and len(test.comparisons) == 1 and isinstance(test.comparisons[0].operator, cst.Equal)):
        return False
    sides = (test.left, test.comparisons[0].comparator)
    names = [s.value for s in sides if isinstance(s, cst.Name)]
    strings = [s.evaluated_value for s in sides if isinstance(s, cst.SimpleString)]
    return names == ["__name__"] and strings == ["__main__"]


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


def requires_training(test: cst.BaseExpression) -> bool:
    """Whether `if <test>:` can only pass in train mode: `self.training` is one of its `and`-ed terms."""
    if isinstance(test, cst.BooleanOperation) and isinstance(test.operator, cst.And):
        return requires_training(test.left) or requires_training(test.right)
    return isinstance(test, cst.Attribute) and is_self(test.value) and test.attr.value == "training"


def is_not_training(test: cst.BaseExpression) -> bool:
    """`not self.training`: what `else` (or the code past a `return` in the body) runs in training only."""
    return isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not) and requires_training(test.expression) and not isinstance(test.expression, cst.BooleanOperation)


def module_gates(test: cst.BaseExpression) -> Optional[tuple[str, ...]]:
    """The `self.<attr>` flags `if <test>:` requires, through `and`: `self.gradient_checkpointing and
    self.training and not torch.jit.is_scripting()` gives ("gradient_checkpointing",), a flag of a
    config object the module holds `("config.gradient_checkpointing",)`. The mode,
    `torch.is_grad_enabled()`, `x.requires_grad` and negated calls add none; anything else: None."""
    if isinstance(test, cst.BooleanOperation) and isinstance(test.operator, cst.And):
        left, right = module_gates(test.left), module_gates(test.right)
        return None if left is None or right is None else left + right
    if isinstance(test, cst.Attribute) and is_self(test.value):
        return () if test.attr.value == "training" else (test.attr.value,)
    if isinstance(test, cst.Attribute) and isinstance(test.value, cst.Attribute) and is_self(test.value.value):
        return (f"{test.value.attr.value}.{test.attr.value}",)  # `self.config.gradient_checkpointing`
    if isinstance(test, cst.Attribute) and test.attr.value == "requires_grad":
        return ()
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not) and isinstance(test.expression, cst.Call):
        return ()  # `not torch.jit.is_scripting()`
    if isinstance(test, cst.Call) and not test.args and dotted(test.func) in ("torch.is_grad_enabled", "torch.autograd.grad_mode.is_grad_enabled"):
        return ()
    return None


def ends_with_return(body: cst.BaseSuite) -> bool:
    return _ends_with(body, (cst.Return, cst.Raise))


def leaves_the_iteration(body: cst.BaseSuite) -> bool:
    """The block ends with `continue`, `break`, `return` or `raise`: what follows runs only when it does not."""
    return _ends_with(body, (cst.Continue, cst.Break, cst.Return, cst.Raise))


def _ends_with(body: cst.BaseSuite, kinds: tuple[type, ...]) -> bool:
    statements = body.body if isinstance(body, cst.IndentedBlock) else [body]
    last = statements[-1] if statements else None
    return isinstance(last, (cst.SimpleStatementLine, cst.SimpleStatementSuite)) and any(isinstance(s, kinds) for s in last.body)


def type_test(test: cst.BaseExpression) -> Optional[tuple[str, list[cst.BaseExpression], bool]]:
    """`isinstance(name, T)` / `isinstance(name, (T, U))` -> (name, [T, U], True); under `not`, False."""
    positive = True
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        test, positive = test.expression, False
    if not (isinstance(test, cst.Call) and isinstance(test.func, cst.Name) and test.func.value == "isinstance" and len(test.args) == 2):
        return None
    subject, types = test.args[0].value, test.args[1].value
    if not isinstance(subject, cst.Name) or any(a.keyword or a.star for a in test.args):
        return None
    return subject.value, [e.value for e in types.elements] if isinstance(types, cst.Tuple) else [types], positive


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


class _BoundNames(ReadOnlyWalker):
    """Names a function body binds: assignment and loop targets, `with ... as`, nested definitions."""

    def __init__(self) -> None:
        super().__init__()
        self.names: set[str] = set()

    def visit_AssignTarget(self, node: cst.AssignTarget) -> None:
        self.names |= free_names(node.target)

    def visit_For(self, node: cst.For) -> None:
        self.names |= free_names(node.target)

    def visit_AsName(self, node: cst.AsName) -> None:
        self.names |= free_names(node.name)

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        self.names.add(node.name.value)
        return False  # its own body binds its own names

    def visit_ClassDef(self, node: cst.ClassDef) -> bool:
        self.names.add(node.name.value)
        return False


def bound_names(body: cst.CSTNode) -> set[str]:
    visitor = _BoundNames()
    visitor.walk(body)
    return visitor.names


def dotted(node: cst.BaseExpression) -> Optional[str]:
    """`a.b.c` for names and attribute chains (LibCST's helper also names calls, which we don't want)."""
    return get_full_name_for_node(node) if isinstance(node, (cst.Name, cst.Attribute)) and is_chain(node) else None


def is_chain(node: cst.BaseExpression) -> bool:
    while isinstance(node, cst.Attribute):
        node = node.value
    return isinstance(node, cst.Name)


def last_effects(body: Sequence[cst.BaseStatement]) -> Optional[list[cst.CSTNode]]:
    """The statements that can be the last to do anything when `body` runs to its end: after them
    only inert statements run (`return h`, `out = h`, `pass`: names, attributes, constants and
    tuples of them, nothing that computes). A compound statement whose own expression runs last
    (an `if` test that calls, a `with`) stands for itself. None when a loop or `try` holds the last
    effect (it may run again, or be cut short by an exception)."""
    for i in range(len(body) - 1, -1, -1):
        statement = body[i]
        if isinstance(statement, cst.SimpleStatementLine):
            effects = [small for small in statement.body if not _inert_statement(small)]
            if effects:
                return [effects[-1]]
        elif isinstance(statement, cst.If):
            found: list[cst.CSTNode] = []
            some_path_runs_no_block = False
            branch: Optional[Union[cst.If, cst.Else]] = statement
            while branch is not None:
                if isinstance(branch, cst.If) and not _inert(branch.test):
                    return found + [branch]
                inner = last_effects(branch.body.body)
                if inner is None:
                    return None
                found += inner
                some_path_runs_no_block = some_path_runs_no_block or not inner or isinstance(branch, cst.If) and branch.orelse is None
                branch = branch.orelse if isinstance(branch, cst.If) else None
            if some_path_runs_no_block:
                earlier = last_effects(body[:i])
                if earlier is None:
                    return None
                found += earlier
            return found
        elif isinstance(statement, cst.With):
            inner = last_effects(statement.body.body)
            return inner if inner is None or inner else [statement]
        elif not isinstance(statement, (cst.FunctionDef, cst.ClassDef)):
            return None  # for / while / try / match
    return []


def _inert_statement(small: cst.BaseSmallStatement) -> bool:
    if isinstance(small, cst.Pass):
        return True
    if isinstance(small, cst.Return):
        return small.value is None or _inert(small.value)
    if isinstance(small, cst.Expr):
        return _inert(small.value)
    if isinstance(small, cst.Assign):
        return all(isinstance(t.target, cst.Name) for t in small.targets) and _inert(small.value)
    return False


def _inert(node: cst.BaseExpression) -> bool:
    """Reads names and constants, compares with `is` / `is not`, negates: nothing autograd records."""
    if isinstance(node, (cst.Name, cst.BaseNumber, cst.BaseString, cst.Ellipsis)):
        return True
    if isinstance(node, cst.Attribute):
        return _inert(node.value)
    if isinstance(node, (cst.Tuple, cst.List)):
        return all(isinstance(e, cst.Element) and _inert(e.value) for e in node.elements)
    if isinstance(node, cst.Comparison):
        return _inert(node.left) and all(isinstance(c.operator, (cst.Is, cst.IsNot)) and _inert(c.comparator) for c in node.comparisons)
    if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Not):
        return _inert(node.expression)
    return False

"""The module flags (`self.use_checkpoint`) a model's checkpoints are gated on: a model built bare
leaves them off, so a run of it never reaches the checkpoint the finding is about."""

from __future__ import annotations

import ast
import os
import re
from pathlib import Path
from typing import Any, Optional, Union

Function = Union[ast.FunctionDef, ast.AsyncFunctionDef]

# A callee spelled as a checkpoint (`checkpoint`, `cp.checkpoint`, `checkpoint_seq`, `ckpt`).
_CHECKPOINT_NAME = re.compile(r"checkpoint|ckpt", re.IGNORECASE)


def switches(job: dict[str, Any]) -> tuple[str, ...]:
    """The flags the `if` tests and conditional expressions around the findings' lines in the
    target's file require (`if self.grad_checkpointing and self.training:`); when the findings lie
    elsewhere (a layer the target builds), the flags that gate the target class's own checkpoints."""
    path = job["path"]
    try:
        tree = ast.parse(job.get("source") or Path(path).read_text(encoding="utf-8"))
    except (OSError, SyntaxError, ValueError):
        return ()
    lines = {
        n for f in job.get("findings", []) if os.path.abspath(f.get("path", path)) == os.path.abspath(path)
        for n in range(f["line"], (f.get("end_line") or f["line"]) + 1)
    }  # fmt: skip
    flags = _flags_where(tree, lambda body: any(b.lineno <= line <= (b.end_lineno or b.lineno) for b in body for line in lines))
    if flags or job.get("kind") != "class":
        return flags
    cls = _class_named(tree, job["qualname"])
    if cls is None:
        return ()
    checkpointing = _CheckpointCalls(tree, cls, os.path.dirname(os.path.abspath(path)))
    return _flags_where(cls, lambda body: any(checkpointing.reached_by(b) for b in body))


def _flags_where(root: ast.AST, chosen: Any) -> tuple[str, ...]:
    """Flags the tests of `if`s and conditional expressions under `root` require for a branch
    `chosen(body)` holds for to run."""
    flags: dict[str, None] = {}
    for node in ast.walk(root):
        if isinstance(node, ast.If):
            branches: list[tuple[list[ast.AST], bool]] = [(list(node.body), True), (list(node.orelse), False)]
        elif isinstance(node, ast.IfExp):
            branches = [([node.body], True), ([node.orelse], False)]
        else:
            continue
        for body, taken in branches:
            if body and chosen(body):
                flags.update(dict.fromkeys(required_flags(node.test, taken)))
    return tuple(flags)


def required_flags(test: ast.expr, holds: bool = True) -> list[str]:
    """`self.<flag>` attributes that must be on for `test` to hold (`holds`: through `and`) or to
    fail (through `or` and `not`: the else of `if not self.use_cp or ...:`), the train/eval mode aside."""
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        return required_flags(test.operand, not holds)
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And if holds else ast.Or):
        return [flag for value in test.values for flag in required_flags(value, holds)]
    if holds and isinstance(test, ast.Attribute) and isinstance(test.value, ast.Name) and test.value.id == "self" and test.attr != "training":
        return [test.attr]
    return []


class _CheckpointCalls:
    """Which calls in a class reach a checkpoint: one spelled as such, or one hop into a method of
    the class or a function of the file or of a project module it imports from (`run_stages`)."""

    def __init__(self, tree: ast.Module, cls: ast.ClassDef, folder: str) -> None:
        self._methods = {n.name: n for n in cls.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
        self._functions = {n.name: n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
        self._imported = {
            alias.asname or alias.name: (node.module or "", node.level, alias.name)
            for node in tree.body if isinstance(node, ast.ImportFrom) for alias in node.names
        }  # fmt: skip
        self._folder = folder

    def reached_by(self, node: ast.AST) -> bool:
        return any(isinstance(call, ast.Call) and self._call_reaches(call.func) for call in ast.walk(node))

    def _call_reaches(self, callee: ast.expr) -> bool:
        if _CHECKPOINT_NAME.search(ast.unparse(callee)):
            return True
        if isinstance(callee, ast.Attribute) and isinstance(callee.value, ast.Name) and callee.value.id == "self":
            return _spelled_checkpoint(self._methods.get(callee.attr))
        if not isinstance(callee, ast.Name):
            return False
        if callee.id in self._functions:
            return _spelled_checkpoint(self._functions[callee.id])
        if callee.id in self._imported:
            return _spelled_checkpoint(self._imported_function(*self._imported[callee.id]))
        return False

    def _imported_function(self, module: str, level: int, name: str) -> Optional[Function]:
        """`name` as defined in the project module `from module import name` names (its folder or above)."""
        if not module or level > 1:
            return None
        file = os.path.join(self._folder, *module.split(".")) + ".py"
        try:
            tree = ast.parse(Path(file).read_text(encoding="utf-8"))
        except (OSError, SyntaxError, ValueError):
            return None
        return next((n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == name), None)


def _spelled_checkpoint(function: Optional[Function]) -> bool:
    return function is not None and any(
        isinstance(call, ast.Call) and _CHECKPOINT_NAME.search(ast.unparse(call.func)) for call in ast.walk(function)
    )


def _class_named(tree: ast.Module, qualname: str) -> Optional[ast.ClassDef]:
    scope: list[ast.stmt] = tree.body
    found: Optional[ast.ClassDef] = None
    for part in qualname.split("."):
        found = next((n for n in scope if isinstance(n, ast.ClassDef) and n.name == part), None)
        if found is None:
            return None
        scope = found.body
    return found

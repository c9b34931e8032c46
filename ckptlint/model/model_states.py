"""What a script knows about its model variables: train or eval mode, and whether transformers'
checkpointing was switched on, following `.train()` / `.eval()`, constructors and deep copies."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Optional

import libcst as cst

from ckptlint.model.sites import ModelState
from ckptlint.model.torch_knowledge import MODULE_SELF_METHODS
from ckptlint.model.values import Const, ModuleObject, Ref

if TYPE_CHECKING:
    from ckptlint.model.builder import ModelBuilder

DEEP_COPIES = frozenset({"copy.deepcopy"})


def training_mode_set(builder: "ModelBuilder", node: cst.Call) -> Optional[bool]:
    """The mode `module.train(...)` sets: True without arguments (None: not known)."""
    if not node.args:
        return True
    arg = node.args[0]
    if arg.star or (arg.keyword is not None and arg.keyword.value != "mode"):
        return None
    mode = builder.evaluate(arg.value)
    return mode.value if isinstance(mode, Const) and isinstance(mode.value, bool) else None


def state_of(builder: "ModelBuilder", expr: cst.BaseExpression) -> ModelState:
    """The state of the model an expression gives: a variable's, a constructor's (a new module
    trains), a deep copy's (the copy keeps mode and checkpointing), through `.to()`, `.train()`, `.eval()`."""
    scope = builder.scope
    if isinstance(expr, cst.Name):
        return ModelState(scope.model_modes.get(expr.value), scope.checkpointed_models.get(expr.value))
    if not isinstance(expr, cst.Call):
        return ModelState()
    func = expr.func
    if isinstance(func, cst.Attribute) and func.attr.value in MODULE_SELF_METHODS:
        inner = state_of(builder, func.value)
        if func.attr.value == "train":
            return replace(inner, training=training_mode_set(builder, expr))
        return replace(inner, training=False) if func.attr.value == "eval" else inner
    callee = builder.evaluate(func)
    if isinstance(callee, Ref) and callee.qualname in DEEP_COPIES and expr.args and not expr.args[0].star:
        return state_of(builder, expr.args[0].value)
    if isinstance(callee, Ref) and isinstance(builder.evaluate(expr), ModuleObject):
        return ModelState(training=True)  # nn.Module.__init__ leaves it in train mode
    return ModelState()


def set_state(builder: "ModelBuilder", name: str, state: ModelState) -> None:
    scope = builder.scope
    # Under an `if`, a mode that differs from the one before may or may not hold after it.
    if state.training is None or (scope.conditional and scope.model_modes.get(name) != state.training):
        scope.model_modes.pop(name, None)
    else:
        scope.model_modes[name] = state.training
    if state.checkpointing is not None:
        scope.checkpointed_models.setdefault(name, state.checkpointing)


def forget_modes(builder: "ModelBuilder", node: cst.Call) -> None:
    """A model handed to a project function (or one the analysis cannot name) may come back in
    either mode: `prepare(model)` may call `model.eval()`."""
    for arg in node.args:
        if isinstance(arg.value, cst.Name):
            builder.scope.model_modes.pop(arg.value.value, None)

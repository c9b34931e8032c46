"""Module hooks in the LibCST pass: where hooks are registered, and what their parameters hold.

A forward hook (or pre-hook) runs inside the call of the module it is registered on, so inside a
checkpoint that runs the module, and again in the recompute (measured, rules/CKPT007.md). Here the
builder records each registration (receiver module, hook callable, kind) and reads a hook's body
with its `inputs` / `output` parameters bound to tensors, so that its stores and appends of them are
side effects of tensors like any other; the region (ckptlint/model/regions.py) runs the hook where
its module runs.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Optional

import libcst as cst

from ckptlint.model.apis import GLOBAL_HOOK_REGISTRATIONS, HOOK_REGISTRATIONS
from ckptlint.model.scope import Scope
from ckptlint.model.sites import HookRegistration
from ckptlint.model.values import Grad, LocalFunction, ModuleObject, Param, Partial, Ref, Tensor, Value
from ckptlint.module_hooks import HookSignature

if TYPE_CHECKING:
    from ckptlint.index import ProjectIndex


class HookFacts:
    """Mixed into ModelBuilder: records into `hooks`, `hook_lambdas` and `removes_hooks`."""

    index: "ProjectIndex"
    scope: Scope

    def start_hooks(self) -> None:
        self.hooks: list[HookRegistration] = []
        # Lambdas registered as hooks (by node), read when the pass enters them.
        self.hook_lambdas: dict[int, HookSignature] = {}
        # Registration calls whose handle is discarded (an expression statement of their own).
        self.discarded_calls: set[int] = set()
        # The file calls `<handle>.remove()`: a kept handle may have removed its hook before training.
        self.removes_hooks = False

    def registration(self, node: cst.Call) -> Optional[tuple[HookSignature, bool]]:
        """How the hook registered by this call is called, and whether it is registered for every
        module (torch's global registration); None: not a hook registration."""
        func = node.func
        callee = self.evaluate(func) if isinstance(func, (cst.Name, cst.Attribute)) else None  # type: ignore[attr-defined]
        if isinstance(callee, Ref) and callee.qualname in GLOBAL_HOOK_REGISTRATIONS:
            kind, every_module = GLOBAL_HOOK_REGISTRATIONS[callee.qualname], True
        elif isinstance(func, cst.Attribute) and func.attr.value in HOOK_REGISTRATIONS:
            kind, every_module = HOOK_REGISTRATIONS[func.attr.value], False
        else:
            return None
        with_kwargs = any(a.keyword is not None and a.keyword.value == "with_kwargs" and isinstance(a.value, cst.Name) and a.value.value == "True" for a in node.args)
        return HookSignature(kind, 0, with_kwargs), every_module

    def visit_Call(self, node: cst.Call) -> None:
        if not self.summary.hook_registrars:  # type: ignore[attr-defined]
            return  # the index saw no registration in this file
        registered = self.registration(node)
        hook = _hook_argument(node) if registered is not None else None
        if isinstance(hook, cst.Lambda) and registered is not None:
            self.hook_lambdas[id(hook)] = registered[0]

    def leave_Expr(self, node: cst.Expr) -> None:
        if isinstance(node.value, cst.Call):
            self.discarded_calls.add(id(node.value))

    def note_hook_registration(self, node: cst.Call) -> None:
        func = node.func
        if isinstance(func, cst.Attribute) and func.attr.value == "remove" and not node.args:
            self.removes_hooks = True
            return
        if not self.summary.hook_registrars:  # type: ignore[attr-defined]
            return
        registered = self.registration(node)
        hook = _hook_argument(node) if registered is not None else None
        if registered is None or hook is None:
            return
        signature, every_module = registered
        receiver: Optional[Value] = None
        every_instance = False
        if not every_module and isinstance(func, cst.Attribute):
            receiver = self.evaluate(func.value)  # type: ignore[attr-defined]
            if isinstance(receiver, Param) and receiver.name == "self" and self.scope.class_qualname:
                # `self.register_forward_hook(...)` in a module's method: the hook is on every instance.
                receiver, every_instance = ModuleObject((self.scope.class_qualname,), "self"), True
            if not isinstance(receiver, ModuleObject):
                return  # a module the analysis cannot name: its hooks match nothing
        value = self.evaluate(hook)  # type: ignore[attr-defined]
        function = value
        while isinstance(function, Partial):
            function = function.func
        named = self.summary.hook_functions.get(function.qualname) if isinstance(function, (LocalFunction, Ref)) else None  # type: ignore[attr-defined]
        self.hooks.append(HookRegistration(node, signature.kind, receiver, value, line=named.line if named else 0, every_instance=every_instance))  # type: ignore[arg-type]

    def hook_parameters(self, scope: Scope, params: tuple[str, ...], signature: Optional[HookSignature]) -> None:
        """A hook's `inputs` and `output` hold the module's tensors (what they require is not known)."""
        if signature is None:
            return
        for name in signature.tensor_params(params):
            scope.bindings[name] = Tensor(Grad.UNKNOWN, f"`{name}` is what its module hands the {signature.kind.replace('_', '-')} hook", maybe_tuple=True)

    def finish_hooks(self) -> list[HookRegistration]:
        """The registrations, each marked removable when its handle is kept in a file that removes hooks."""
        return [replace(h, removable=self.removes_hooks and id(h.node) not in self.discarded_calls) for h in self.hooks]


def _hook_argument(node: cst.Call) -> Optional[cst.BaseExpression]:
    positional = [a for a in node.args if a.keyword is None and not a.star]
    if positional:
        return positional[0].value
    return next((a.value for a in node.args if a.keyword is not None and a.keyword.value == "hook"), None)

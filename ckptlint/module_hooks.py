"""Which functions a file registers as module hooks, from the `ast` index pass.

`block.register_forward_hook(fn)` makes `fn` run inside every call of `block`, in a checkpoint's
recompute too (rules/CKPT007.md). The LibCST pass must know that `fn` is a hook before it reads
`fn`'s body (a method or a module-level function is often defined far from where it is
registered) to treat its `output` / `inputs` parameters as the module's tensors; the index records
it here, and which top-level statements register hooks, so that a region can read the
registrations of other files. Lambdas are recognised by the LibCST pass itself, at the call.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Callable, Iterator, Optional, Union

from ckptlint.model.apis import GLOBAL_HOOK_REGISTRATIONS, HOOK_REGISTRATIONS

_PARTIAL = "functools.partial"
Qualify = Callable[[ast.AST], Optional[str]]
_Function = Union[ast.FunctionDef, ast.AsyncFunctionDef]
_Definition = Union[_Function, ast.ClassDef]


@dataclass(frozen=True)
class HookSignature:
    """How torch calls a hook: its kind, how many leading parameters a `partial` binds, and whether
    it was registered `with_kwargs=True` (then `(module, args, kwargs[, output])`)."""

    kind: str  # "forward" | "forward_pre"
    bound: int = 0
    with_kwargs: bool = False
    line: int = 0  # where it is first registered (cited by messages)

    def tensor_params(self, params: tuple[str, ...]) -> tuple[str, ...]:
        """The parameters that receive the module's inputs (and output): torch passes `(module,
        inputs[, kwargs][, output])` after what `self` and a `partial` bind; later ones keep their defaults."""
        skip = (1 if params[:1] == ("self",) else 0) + self.bound + 1
        passed = params[skip : skip + (1 if self.kind == "forward_pre" else 2) + self.with_kwargs]
        return tuple(p for i, p in enumerate(passed) if not (self.with_kwargs and i == 1))  # the kwargs dict is not a tensor


def might_register_hooks(source: str) -> bool:
    """Cheap text test before any walk: most files register no hook."""
    return "register_" in source and "_hook" in source


def registration_kind(call: ast.Call, qualify: Qualify) -> Optional[str]:
    func = call.func
    if isinstance(func, ast.Attribute) and func.attr in HOOK_REGISTRATIONS:
        return HOOK_REGISTRATIONS[func.attr]
    return GLOBAL_HOOK_REGISTRATIONS.get(qualify(func) or "")


def hook_functions(tree: ast.Module, qualify: Qualify, module: str) -> tuple[dict[str, HookSignature], tuple[str, ...]]:
    """(hook function qualified name -> how it is called, top-level statements that register hooks:
    the name they define, "" for module-level code)."""
    hooks: dict[str, HookSignature] = {}
    registrars: list[str] = []
    definitions = {s.name: s for s in tree.body if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef))}
    for stmt in tree.body:
        found = False
        for call, scopes in _calls(stmt, [(module, None)]):
            kind = registration_kind(call, qualify)
            if kind is None:
                continue
            found = True
            hook = call.args[0] if call.args else next((k.value for k in call.keywords if k.arg == "hook"), None)
            with_kwargs = any(k.arg == "with_kwargs" and isinstance(k.value, ast.Constant) and k.value.value is True for k in call.keywords)
            resolved = _resolve(hook, scopes, qualify, definitions) if hook is not None else None
            if resolved is not None:
                hooks.setdefault(resolved[0], HookSignature(kind, resolved[1], with_kwargs, call.lineno))
        if found:
            registrars.append(stmt.name if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) else "")
    return hooks, tuple(dict.fromkeys(registrars))


def _calls(node: ast.AST, scopes: list[tuple[str, Optional[_Definition]]]) -> Iterator[tuple[ast.Call, list[tuple[str, Optional[_Definition]]]]]:
    """Every call under `node`, with the qualified names of the classes and functions around it
    (named as the LibCST pass names them)."""
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        scopes = [*scopes, (f"{scopes[-1][0]}.{node.name}", node)]
    elif isinstance(node, ast.Call):
        yield node, scopes
    for child in ast.iter_child_nodes(node):
        yield from _calls(child, scopes)


def _resolve(hook: ast.AST, scopes: list[tuple[str, Optional[_Definition]]], qualify: Qualify, definitions: dict[str, _Function], bound: int = 0) -> Optional[tuple[str, int]]:
    """The qualified name of the function `hook` spells, and how many positional arguments a
    `partial` around it binds."""
    if isinstance(hook, ast.Call) and qualify(hook.func) == _PARTIAL and hook.args and not any(isinstance(a, ast.Starred) for a in hook.args):
        return _resolve(hook.args[0], scopes, qualify, definitions, bound + len(hook.args) - 1)
    if isinstance(hook, ast.Call) and isinstance(hook.func, ast.Name):
        # `save_activation(name)`: the closure the factory defines and returns.
        factory = _definition(hook.func.id, scopes, definitions)
        inner = _returned_closure(factory[1]) if factory is not None else None
        return (f"{factory[0]}.{inner}", bound) if factory is not None and inner is not None else None
    if isinstance(hook, ast.Attribute) and isinstance(hook.value, ast.Name) and hook.value.id == "self":
        owner = next((name for name, node in reversed(scopes) if isinstance(node, ast.ClassDef)), None)
        return (f"{owner}.{hook.attr}", bound) if owner else None
    if isinstance(hook, ast.Name):
        local = _definition(hook.id, scopes, {})
        if local is not None:
            return local[0], bound
        qualified = qualify(hook)
        return (qualified, bound) if qualified else None
    return None


def _definition(name: str, scopes: list[tuple[str, Optional[_Definition]]], definitions: dict[str, _Function]) -> Optional[tuple[str, _Function]]:
    """A closure of an enclosing function (the innermost that defines the name), else a module-level
    function of `definitions`: its qualified name and definition."""
    for qualname, node in reversed(scopes):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            found = next((d for d in _own_definitions(node) if isinstance(d, (ast.FunctionDef, ast.AsyncFunctionDef)) and d.name == name), None)
            if found is not None:
                return f"{qualname}.{name}", found
    found = definitions.get(name)
    return (f"{scopes[0][0]}.{name}", found) if found is not None else None


def _returned_closure(factory: _Function) -> Optional[str]:
    """The name of the function a factory defines in its body and returns last."""
    last = factory.body[-1]
    if isinstance(last, ast.Return) and isinstance(last.value, ast.Name):
        returned = last.value.id
        if any(isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef)) and s.name == returned for s in factory.body):
            return returned
    return None


def _own_definitions(function: ast.AST) -> Iterator[ast.AST]:
    """Definitions in a function's body, not inside nested functions or classes."""
    for child in ast.iter_child_nodes(function):
        if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            yield child
        elif not isinstance(child, ast.Lambda):
            yield from _own_definitions(child)

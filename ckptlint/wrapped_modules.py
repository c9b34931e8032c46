"""Which module classes torch.distributed's checkpoint wrappers wrap, from the `ast` index pass.

`checkpoint_wrapper(block, CheckpointImpl.REENTRANT)` returns a module that checkpoints every call
of itself, and `apply_activation_checkpointing(model, checkpoint_wrapper_fn=..., check_fn=...)`
puts such wrappers around submodules in place. The calls of the wrapped blocks, in a `forward`
anywhere in the project, are then checkpoint sites: the index records here which classes are
wrapped, in which mode, where; the LibCST pass makes a site of each call of one
(`model.wrapped_calls`). Only what is spelled with literals and names bound in the same function or
at module level is read; anything else is not recorded, so it makes no site.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Callable, Optional

from ckptlint.model.apis import APPLY_ACTIVATION_CHECKPOINTING, CHECKPOINT_IMPL_REENTRANT, CHECKPOINT_WRAPPER, WRAP_POLICY_CLASSES

TORCH_CHECKPOINT = "torch.utils.checkpoint.checkpoint"

_PARTIAL = "functools.partial"
_COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)
Qualify = Callable[[ast.AST], Optional[str]]


@dataclass
class ActivationWrap:
    """Modules wrapped with checkpointing at `line`: the classes named, or the elements of `attr` of
    an instance of `owner` (resolved against the project's classes by the index)."""

    line: int
    how: str  # "checkpoint_wrapper" | "apply_activation_checkpointing"
    classes: tuple[str, ...] = ()
    owner: str = ""
    attr: str = ""
    reentrant: Optional[bool] = None  # None: the wrapper's mode is not known
    preserve_rng_state: Optional[bool] = True
    impl: str = ""  # how the mode is spelled, for messages
    # The wrapper's forward packs keyword arguments into positional checkpoint inputs (REENTRANT impl).
    packs_keywords: bool = False

    def describe(self) -> str:
        if self.owner:
            return f"the elements of `{self.owner.rsplit('.', 1)[-1]}.{self.attr}`"
        return ", ".join(f"`{c.rsplit('.', 1)[-1]}`" for c in self.classes)


def activation_wraps(tree: ast.Module, qualify: Qualify, module: str) -> list[ActivationWrap]:
    """Every wrap in the module's functions, methods and module-level code."""
    module_names = {t.id: stmt.value for stmt in tree.body if isinstance(stmt, ast.Assign) for t in stmt.targets if isinstance(t, ast.Name)}
    found: list[ActivationWrap] = []
    for stmt in tree.body:
        if isinstance(stmt, ast.ClassDef):
            for member in stmt.body:
                if isinstance(member, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    _Finder(qualify, module_names, f"{module}.{stmt.name}", found).visit_body(member.body)
        elif isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            _Finder(qualify, module_names, "", found).visit_body(stmt.body)
        else:
            _Finder(qualify, module_names, "", found).visit(stmt)
    return found


class _Finder(ast.NodeVisitor):
    """One function body in source order: names bound so far (the last binding wins) and the
    sequences loop and comprehension targets walk."""

    def __init__(self, qualify: Qualify, module_names: dict[str, ast.AST], owner: str, found: list[ActivationWrap]) -> None:
        self.qualify, self.module_names, self.owner, self.found = qualify, module_names, owner, found
        self.names: dict[str, ast.AST] = {}
        self.elements: dict[str, ast.AST] = {}  # loop target -> the sequence it walks

    def visit_body(self, body: list[ast.stmt]) -> None:
        for stmt in body:
            self.visit(stmt)

    def visit_Assign(self, node: ast.Assign) -> None:
        self.generic_visit(node)
        for target in node.targets:
            if isinstance(target, ast.Name):
                self.names[target.id] = node.value
                self.elements.pop(target.id, None)

    def visit_For(self, node: ast.For) -> None:
        self.visit(node.iter)
        self.bind_elements(node.target, node.iter)
        self.visit_body(node.body)
        self.visit_body(node.orelse)

    def visit_comprehension_node(self, node: ast.AST) -> None:
        for generator in node.generators:  # type: ignore[attr-defined]
            self.visit(generator.iter)
            self.bind_elements(generator.target, generator.iter)
        for name in ("elt", "key", "value"):
            if getattr(node, name, None) is not None:
                self.visit(getattr(node, name))

    visit_ListComp = visit_SetComp = visit_GeneratorExp = visit_DictComp = visit_comprehension_node

    def bind_elements(self, target: ast.AST, sequence: ast.AST) -> None:
        """`for b in model.blocks`, `for i, b in enumerate(model.blocks)`."""
        if isinstance(sequence, ast.Call) and _builtin(sequence.func, "enumerate") and sequence.args:
            if isinstance(target, ast.Tuple) and len(target.elts) == 2:
                target, sequence = target.elts[1], sequence.args[0]
            else:
                return
        if isinstance(target, ast.Name):
            self.elements[target.id] = sequence
            self.names.pop(target.id, None)

    def visit_Call(self, node: ast.Call) -> None:
        self.generic_visit(node)
        func = self.resolve(node.func)
        if self.qualify(func) == APPLY_ACTIVATION_CHECKPOINTING:
            self.applied(node)
            return
        mode = self.wrapper_mode(node.func, node.args[1:], node.keywords)
        if mode is None or not node.args:
            return
        wrapped = node.args[0]
        if isinstance(wrapped, ast.Name) and wrapped.id in self.elements:
            self.record_elements(node, self.elements[wrapped.id], "checkpoint_wrapper", mode)
        elif isinstance(wrapped, ast.Subscript):
            self.record_elements(node, wrapped.value, "checkpoint_wrapper", mode)
        else:
            constructed = self.constructor(wrapped)
            if constructed is not None:
                self.found.append(ActivationWrap(node.lineno, "checkpoint_wrapper", (constructed,), **mode))

    def applied(self, node: ast.Call) -> None:
        """apply_activation_checkpointing(model, checkpoint_wrapper_fn=..., check_fn=... | auto_wrap_policy=...)."""
        keywords = {k.arg: k.value for k in node.keywords if k.arg}
        if any(k.arg is None for k in node.keywords):
            return
        if "checkpoint_wrapper_fn" in keywords:
            mode = self.wrapper_mode(keywords["checkpoint_wrapper_fn"], [], [])
            if mode is None:
                mode = {"reentrant": None, "preserve_rng_state": None, "impl": "a checkpoint_wrapper_fn the analysis cannot resolve"}
        else:
            mode = _mode({}, [], self.qualify)
        if "auto_wrap_policy" in keywords:
            classes = self.policy_classes(self.resolve(keywords["auto_wrap_policy"]))
        elif "check_fn" in keywords:
            classes = self.check_classes(self.resolve(keywords["check_fn"]))
        else:
            return  # every submodule: which classes is not known here
        if classes:
            self.found.append(ActivationWrap(node.lineno, "apply_activation_checkpointing", classes, **mode))

    def record_elements(self, node: ast.Call, sequence: ast.AST, how: str, mode: dict) -> None:
        """The elements of `obj.attr` (`self.blocks`, `model.layers`): the index knows what they are
        once it knows what `obj` is."""
        sequence = self.resolve(sequence)
        if not isinstance(sequence, ast.Attribute):
            return
        holder = sequence.value
        if isinstance(holder, ast.Name) and holder.id == "self" and self.owner:
            owner: Optional[str] = self.owner
        else:
            owner = self.constructor(holder)
        if owner is not None:
            self.found.append(ActivationWrap(node.lineno, how, (), owner, sequence.attr, **mode))

    def wrapper_mode(self, func: ast.AST, args: list[ast.expr], keywords: list[ast.keyword]) -> Optional[dict]:
        """The mode and RNG setting of calling `func` (checkpoint_wrapper, or a partial of it) with
        `args` after the module; None when `func` is not one."""
        func = self.resolve(func)
        if isinstance(func, ast.Call) and self.qualify(func.func) == _PARTIAL and len(func.args) == 1 and self.qualify(func.args[0]) == CHECKPOINT_WRAPPER:
            return _mode({**_keywords(func.keywords), **_keywords(keywords)}, args, self.qualify, spread=_spreads(func.keywords, keywords))
        if self.qualify(func) == CHECKPOINT_WRAPPER:
            return _mode(_keywords(keywords), args, self.qualify, spread=_spreads(keywords))
        return None

    def policy_classes(self, policy: ast.AST) -> tuple[str, ...]:
        """`ModuleWrapPolicy({Block})`, `partial(transformer_auto_wrap_policy, transformer_layer_cls={Block})`."""
        if not isinstance(policy, ast.Call):
            return ()
        callee = self.qualify(policy.func)
        where = WRAP_POLICY_CLASSES.get(callee or "")
        if callee == _PARTIAL and policy.args:
            where = WRAP_POLICY_CLASSES.get(self.qualify(policy.args[0]) or "")
            where = where if isinstance(where, str) else None
        if isinstance(where, int):
            return self.classes_named(policy.args[where]) if len(policy.args) > where else ()
        if isinstance(where, str):
            return next((self.classes_named(k.value) for k in policy.keywords if k.arg == where), ())
        return ()

    def check_classes(self, check: ast.AST) -> tuple[str, ...]:
        """`lambda m: isinstance(m, Block)` (a class or a tuple of them; `or` of such tests)."""
        if not isinstance(check, ast.Lambda) or len(check.args.args) != 1:
            return ()
        return self.isinstance_classes(check.body, check.args.args[0].arg)

    def isinstance_classes(self, test: ast.AST, param: str) -> tuple[str, ...]:
        if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.Or):
            parts = [self.isinstance_classes(value, param) for value in test.values]
            return () if not all(parts) else tuple(dict.fromkeys(c for part in parts for c in part))
        if (
            isinstance(test, ast.Call) and _builtin(test.func, "isinstance") and len(test.args) == 2
            and isinstance(test.args[0], ast.Name) and test.args[0].id == param
        ):  # fmt: skip
            return self.classes_named(test.args[1])
        return ()

    def classes_named(self, node: ast.AST) -> tuple[str, ...]:
        node = self.resolve(node)
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            parts = [self.classes_named(e) for e in node.elts]
            return () if not parts or not all(parts) else tuple(dict.fromkeys(c for part in parts for c in part))
        name = self.qualify(node) if isinstance(node, (ast.Name, ast.Attribute)) else None
        return (name,) if name else ()

    def constructor(self, node: ast.AST) -> Optional[str]:
        """The class `node` (or the name bound to it) constructs: `Block(dim)`, `Net().to(device)`."""
        node = self.resolve(node)
        while isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and isinstance(node.func.value, ast.Call):
            node = node.func.value  # `Net().to(device).train()`
        if isinstance(node, ast.Call) and isinstance(node.func, (ast.Name, ast.Attribute)):
            return self.qualify(node.func)
        return None

    def resolve(self, node: ast.AST) -> ast.AST:
        """A name bound in this function (or at module level) stands for what it was bound to."""
        if isinstance(node, ast.Name) and node.id not in self.elements:
            return self.names.get(node.id) or self.module_names.get(node.id) or node
        return node


def _builtin(func: ast.AST, name: str) -> bool:
    return isinstance(func, ast.Name) and func.id == name


def _keywords(keywords: list[ast.keyword]) -> dict[str, ast.expr]:
    return {k.arg: k.value for k in keywords if k.arg}


def _spreads(*keyword_lists: list[ast.keyword]) -> bool:
    return any(k.arg is None for keywords in keyword_lists for k in keywords)


def _mode(keywords: dict[str, ast.expr], args: list[ast.expr], qualify: Qualify, spread: bool = False) -> dict:
    """checkpoint_wrapper(module, checkpoint_impl=NO_REENTRANT, checkpoint_fn=None, **kwargs): the
    impl decides the mode, unless a `checkpoint_fn` replaces torch's checkpoint: then it is torch's
    checkpoint with the `use_reentrant` literal passed on, or unknown here (the wrapper call's own
    site judges it). forward() packs keywords into positional inputs whenever the impl is REENTRANT,
    checkpoint_fn or not (torch 2.13's checkpoint_wrapper.py)."""
    impl = keywords.get("checkpoint_impl", args[0] if args else None)
    checkpoint_fn = keywords.get("checkpoint_fn", args[1] if len(args) > 1 else None)
    preserve: Optional[bool] = True
    if "preserve_rng_state" in keywords:
        value = keywords["preserve_rng_state"]
        preserve = value.value if isinstance(value, ast.Constant) and isinstance(value.value, bool) else None
    elif spread:
        preserve = None
    unknown = {"reentrant": None, "preserve_rng_state": preserve, "impl": "checkpoint_wrapper arguments the analysis cannot resolve"}
    if spread or any(isinstance(a, ast.Starred) for a in args):
        return unknown
    spelled = qualify(impl) if isinstance(impl, (ast.Name, ast.Attribute)) else None
    if impl is None:
        impl_reentrant: Optional[bool] = False
        impl_text = "the default CheckpointImpl.NO_REENTRANT"
    else:
        impl_reentrant = CHECKPOINT_IMPL_REENTRANT.get(spelled or "")
        impl_text = f"CheckpointImpl.{spelled.rsplit('.', 1)[-1]}" if impl_reentrant is not None and spelled else "a checkpoint_impl the analysis cannot resolve"
    packs = impl_reentrant is True
    if checkpoint_fn is None or isinstance(checkpoint_fn, ast.Constant) and checkpoint_fn.value is None:
        return {"reentrant": impl_reentrant, "preserve_rng_state": preserve, "impl": impl_text, "packs_keywords": packs}
    function = qualify(checkpoint_fn) if isinstance(checkpoint_fn, (ast.Name, ast.Attribute)) else None
    flag = keywords.get("use_reentrant")
    # An impl the analysis cannot tell leaves open whether keywords are packed.
    if function != TORCH_CHECKPOINT or not (isinstance(flag, ast.Constant) and isinstance(flag.value, bool)) or impl_reentrant is None:
        return unknown
    return {"reentrant": flag.value, "preserve_rng_state": preserve, "impl": f"checkpoint_fn=checkpoint, use_reentrant={flag.value}", "packs_keywords": packs}

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
from dataclasses import dataclass, field
from typing import Callable, Optional

from ckptlint.model.apis import APPLY_ACTIVATION_CHECKPOINTING, CHECKPOINT_IMPL_REENTRANT, CHECKPOINT_WRAPPER, WRAP_POLICY_CLASSES

TORCH_CHECKPOINT = "torch.utils.checkpoint.checkpoint"

_PARTIAL = "functools.partial"
# A class a top-level function's parameter holds, in `classes_named`: its callers decide.
_PARAMETER = "<parameter>:"
_COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)
_SEQUENCES = ("tuple", "set", "frozenset", "list")
Qualify = Callable[[ast.AST], Optional[str]]


@dataclass
class ActivationWrap:
    """Modules wrapped with checkpointing at `line`: the classes named, or the elements of `attr` of
    an instance of `owner`, or of the model a top-level function receives as its parameter `param`
    (`def setup(model): ... for b in model.blocks`; the index learns its class from the callers
    that hand it a model they build); resolved against the project's classes by the index."""

    line: int
    how: str  # "checkpoint_wrapper" | "apply_activation_checkpointing"
    classes: tuple[str, ...] = ()
    owner: str = ""
    attr: str = ""
    function: str = ""  # with `param`: the module's top-level function whose parameter holds the model
    param: str = ""
    position: int = -1  # the parameter's position (-1: keyword-only)
    reentrant: Optional[bool] = None  # None: the wrapper's mode is not known
    preserve_rng_state: Optional[bool] = True
    impl: str = ""  # how the mode is spelled, for messages
    # The wrapper's forward packs keyword arguments into positional checkpoint inputs (REENTRANT impl).
    packs_keywords: bool = False
    # `owner.attr` holds the wrapper itself (`self.conv = checkpoint_wrapper(nn.Linear(8, 8))`): that
    # attribute's module is wrapped, whatever its class (torch's own modules too), not its elements.
    held: bool = False
    # The classes are those the callers of the top-level `function` hand it as this parameter
    # (`check_fn=lambda m: isinstance(m, layer_cls)` in `def checkpoint_layers(model, layer_cls)`).
    class_param: str = ""
    class_position: int = -1
    # The wrapper checkpoints only in training (a decorator's `if self.training:`).
    training_only: bool = False
    # `checkpoint_impl=AC_IMPL[impl]`, `impl` a parameter of the top-level `impl_function`: the mode
    # of each key of the table (None: not an impl the analysis knows); the key is the one the
    # callers pass, or `impl_default` when they pass none.
    impl_function: str = ""
    impl_param: str = ""
    impl_position: int = -1
    impl_default: Optional[str] = None
    impl_keys: dict[str, Optional[bool]] = field(default_factory=dict)

    def describe(self) -> str:
        if self.how.startswith("the decorator"):
            return "the module"
        if self.class_param:
            return f"the `{self.class_param}` modules its callers name in `{self.function}`"
        if self.held:
            return f"`{self.owner.rsplit('.', 1)[-1]}.{self.attr}`"
        if self.param:
            return f"the elements of `{self.param}.{self.attr}` in `{self.function}`"
        if self.owner:
            return f"the elements of `{self.owner.rsplit('.', 1)[-1]}.{self.attr}`"
        return ", ".join(f"`{c.rsplit('.', 1)[-1]}`" for c in self.classes)


def activation_wraps(tree: ast.Module, qualify: Qualify, module: str) -> list[ActivationWrap]:
    """Every wrap in the module's functions, methods and module-level code."""
    module_names: dict[str, ast.AST] = {t.id: stmt.value for stmt in tree.body if isinstance(stmt, ast.Assign) for t in stmt.targets if isinstance(t, ast.Name)}
    module_names.update((stmt.name, stmt) for stmt in tree.body if isinstance(stmt, ast.FunctionDef))  # check_fn defs
    found: list[ActivationWrap] = []
    for stmt in tree.body:
        if isinstance(stmt, ast.ClassDef):
            for member in stmt.body:
                if isinstance(member, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    _Finder(qualify, module_names, f"{module}.{stmt.name}", found).visit_body(member.body)
        elif isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            _Finder(qualify, module_names, "", found, stmt).visit_body(stmt.body)
        else:
            _Finder(qualify, module_names, "", found).visit(stmt)
    return found


class _Finder(ast.NodeVisitor):
    """One function body in source order: names bound so far (the last binding wins) and the
    sequences loop and comprehension targets walk."""

    def __init__(
        self, qualify: Qualify, module_names: dict[str, ast.AST], owner: str, found: list[ActivationWrap], function: Optional[ast.AST] = None
    ) -> None:
        self.qualify, self.module_names, self.owner, self.found = qualify, module_names, owner, found
        self.names: dict[str, ast.AST] = {}
        # In a top-level function: its name and parameters by position (a model it is handed, until rebound).
        self.function = function.name if isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)) else ""
        arguments = function.args if isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)) else None
        self.positional = [a.arg for a in (*arguments.posonlyargs, *arguments.args)] if arguments else []
        self.params = frozenset([*self.positional, *(a.arg for a in arguments.kwonlyargs)]) if arguments else frozenset()
        self.arguments = arguments
        self.elements: dict[str, ast.AST] = {}  # loop target -> the sequence it walks

    def visit_body(self, body: list[ast.stmt]) -> None:
        for stmt in body:
            self.visit(stmt)

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        """A nested `def` binds its name (a `check_fn`); its body is read like the enclosing one's."""
        self.names[node.name] = node
        self.elements.pop(node.name, None)
        self.generic_visit(node)

    def visit_Assign(self, node: ast.Assign) -> None:
        self.generic_visit(node)
        for target in node.targets:
            if isinstance(target, ast.Name):
                self.names[target.id] = node.value
                self.elements.pop(target.id, None)
            elif isinstance(target, ast.Attribute) and _is_name(target.value, "self") and self.owner:
                self.held_wrap(target.attr, node.value)

    def held_wrap(self, attr: str, value: ast.AST) -> None:
        """`self.conv = checkpoint_wrapper(block, ...)`, or a name bound to such a call (`if ac: conv =
        checkpoint_wrapper(conv, ...)`, then `self.conv = conv`): the attribute holds a wrapped module."""
        call = self.resolve(value)
        if not isinstance(call, ast.Call) or not call.args:
            return
        mode = self.wrapper_mode(call.func, call.args[1:], call.keywords)
        if mode is not None:
            self.found.append(ActivationWrap(call.lineno, "checkpoint_wrapper", (), self.owner, attr, held=True, **mode))

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
        named = tuple(c for c in classes if not c.startswith(_PARAMETER))
        if named:
            self.found.append(ActivationWrap(node.lineno, "apply_activation_checkpointing", named, **mode))
        for marker in (c for c in classes if c.startswith(_PARAMETER)):
            param = marker[len(_PARAMETER) :]
            position = self.positional.index(param) if param in self.positional else -1
            self.found.append(ActivationWrap(node.lineno, "apply_activation_checkpointing", (), function=self.function, class_param=param, class_position=position, **mode))

    def record_elements(self, node: ast.Call, sequence: ast.AST, how: str, mode: dict) -> None:
        """The elements of `obj.attr` (`self.blocks`, `model.layers`): the index knows what they are
        once it knows what `obj` is."""
        sequence = self.resolve(sequence)
        if not isinstance(sequence, ast.Attribute):
            return
        holder = sequence.value
        if isinstance(holder, ast.Name) and holder.id == "self" and self.owner:
            owner: Optional[str] = self.owner
        elif isinstance(holder, ast.Name) and holder.id in self.params and holder.id not in self.names and holder.id not in self.elements:
            position = self.positional.index(holder.id) if holder.id in self.positional else -1
            self.found.append(ActivationWrap(node.lineno, how, (), attr=sequence.attr, function=self.function, param=holder.id, position=position, **mode))
            return
        else:
            owner = self.constructor(holder)
        if owner is not None:
            self.found.append(ActivationWrap(node.lineno, how, (), owner, sequence.attr, **mode))

    def wrapper_mode(self, func: ast.AST, args: list[ast.expr], keywords: list[ast.keyword]) -> Optional[dict]:
        """The mode and RNG setting of calling `func` (checkpoint_wrapper, or a partial of it) with
        `args` after the module; None when `func` is not one."""
        func = self.resolve(func)
        if isinstance(func, ast.Call) and self.qualify(func.func) == _PARTIAL and len(func.args) == 1 and self.qualify(func.args[0]) == CHECKPOINT_WRAPPER:
            return self.chosen_mode({**_keywords(func.keywords), **_keywords(keywords)}, args, _spreads(func.keywords, keywords))
        if self.qualify(func) == CHECKPOINT_WRAPPER:
            return self.chosen_mode(_keywords(keywords), args, _spreads(keywords))
        return None

    def chosen_mode(self, keywords: dict[str, ast.expr], args: list[ast.expr], spread: bool) -> dict:
        """`_mode`, with a `checkpoint_impl` looked up in a module-level table of impls (`AC_IMPL[key]`)
        replaced by the entry a literal key picks; a key held by a parameter of this top-level
        function leaves the mode to the key its callers pass (`ActivationWrap.impl_keys`)."""
        impl = keywords.get("checkpoint_impl", args[0] if args else None)
        table = self.resolve(impl.value) if isinstance(impl, ast.Subscript) else None
        if not isinstance(table, ast.Dict) or not all(isinstance(k, ast.Constant) and isinstance(k.value, str) for k in table.keys):
            return _mode(keywords, args, self.qualify, spread=spread)
        entries: dict[str, ast.expr] = {k.value: v for k, v in zip(table.keys, table.values)}  # type: ignore[union-attr]
        key = impl.slice  # type: ignore[union-attr]
        if isinstance(key, ast.Constant) and key.value in entries:
            return _mode({**keywords, "checkpoint_impl": entries[key.value]}, args, self.qualify, spread=spread)
        chosen = {name: _mode({**keywords, "checkpoint_impl": entry}, args, self.qualify, spread=spread) for name, entry in entries.items()}
        mode = _mode(keywords, args, self.qualify, spread=spread)
        if not (isinstance(key, ast.Name) and key.id in self.params and key.id not in self.names and key.id not in self.elements):
            return mode
        default = _parameter_default(self.arguments, key.id)
        return {
            **mode,
            "impl": f"`{ast.unparse(impl)}`",  # type: ignore[arg-type]
            "impl_function": self.function,
            "impl_param": key.id,
            "impl_position": self.positional.index(key.id) if key.id in self.positional else -1,
            "impl_default": default,
            "impl_keys": {name: found["reentrant"] for name, found in chosen.items()},
        }

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
        """The classes a `check_fn` selects: `lambda m: isinstance(m, Block)`, a `def` whose body is
        one `return` of such a test (module-level or nested), or a `functools.partial` of one whose
        bound arguments name the classes (`partial(is_layer, classes=(Block,))`)."""
        bound: dict[str, ast.AST] = {}
        if isinstance(check, ast.Call) and self.qualify(check.func) == _PARTIAL and check.args and not _spreads(check.keywords):
            function = self.resolve(check.args[0])
            if not isinstance(function, ast.FunctionDef) or any(isinstance(a, ast.Starred) for a in check.args):
                return ()
            params = [a.arg for a in (*function.args.posonlyargs, *function.args.args)]
            bound = {**dict(zip(params, check.args[1:])), **_keywords(check.keywords)}
            check = function
        tested = _selection_test(check, bound)
        return self.selected_classes(tested[0], tested[1], bound) if tested is not None else ()

    def selected_classes(self, test: ast.AST, param: str, bound: dict[str, ast.AST]) -> tuple[str, ...]:
        """The classes a test of the module `param` accepts: `isinstance(m, Block)` (a class or a
        tuple of them), `type(m) in {A, B}`, `type(m) is A`; an `or` of such tests accepts the union,
        an `and` with one of them at most its classes. Anything else: none known."""
        if isinstance(test, ast.BoolOp):
            parts = [self.selected_classes(value, param, bound) for value in test.values]
            if isinstance(test.op, ast.Or):
                return () if not all(parts) else tuple(dict.fromkeys(c for part in parts for c in part))
            known = [set(part) for part in parts if part]
            return tuple(c for c in dict.fromkeys(c for part in parts for c in part) if all(c in k for k in known))
        if isinstance(test, ast.Call) and _builtin(test.func, "isinstance") and len(test.args) == 2 and _is_name(test.args[0], param):
            return self.classes_named(bound.get(_name(test.args[1]), test.args[1]))
        if (
            isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.left, ast.Call) and _builtin(test.left.func, "type")
            and len(test.left.args) == 1 and _is_name(test.left.args[0], param)
        ):  # fmt: skip
            classes = bound.get(_name(test.comparators[0]), test.comparators[0])
            if isinstance(test.ops[0], ast.In):
                return self.classes_named(classes)
            if isinstance(test.ops[0], (ast.Is, ast.Eq)) and isinstance(self.resolve(classes), (ast.Name, ast.Attribute)):
                return self.classes_named(classes)
        return ()

    def classes_named(self, node: ast.AST) -> tuple[str, ...]:
        node = self.resolve(node)
        if isinstance(node, ast.Call) and any(_builtin(node.func, b) for b in _SEQUENCES) and len(node.args) == 1 and not node.keywords:
            return self.classes_named(node.args[0])  # `tuple(layer_classes)`
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            parts = [self.classes_named(e) for e in node.elts]
            return () if not parts or not all(parts) else tuple(dict.fromkeys(c for part in parts for c in part))
        if isinstance(node, ast.Name) and node.id in self.params and node.id not in self.names and node.id not in self.elements:
            return (f"{_PARAMETER}{node.id}",)  # the function's parameter: what its callers hand it
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


def _is_name(node: ast.AST, name: str) -> bool:
    return isinstance(node, ast.Name) and node.id == name


def _name(node: ast.AST) -> str:
    return node.id if isinstance(node, ast.Name) else ""


def _selection_test(check: ast.AST, bound: dict[str, ast.AST]) -> Optional[tuple[ast.expr, str]]:
    """(the test, the name of the module it is handed) of a `check_fn`: a one-parameter lambda, or a
    `def` whose body (after a docstring) is a single `return`, its module the first parameter the
    partial leaves unbound."""
    if isinstance(check, ast.Lambda):
        params = [a.arg for a in check.args.args]
        return (check.body, params[0]) if len(params) == 1 else None
    if not isinstance(check, ast.FunctionDef):
        return None
    body = check.body[1:] if check.body and isinstance(check.body[0], ast.Expr) and isinstance(check.body[0].value, ast.Constant) else check.body
    free = [a.arg for a in (*check.args.posonlyargs, *check.args.args) if a.arg not in bound]
    if len(body) != 1 or not isinstance(body[0], ast.Return) or body[0].value is None or not free:
        return None
    return body[0].value, free[0]


def _parameter_default(arguments: Optional[ast.arguments], name: str) -> Optional[str]:
    """The literal string default of the parameter `name`, if it has one."""
    if arguments is None:
        return None
    positional = [*arguments.posonlyargs, *arguments.args]
    pairs = [*zip(positional[len(positional) - len(arguments.defaults) :], arguments.defaults), *zip(arguments.kwonlyargs, arguments.kw_defaults)]
    default = next((d for a, d in pairs if a.arg == name), None)
    return default.value if isinstance(default, ast.Constant) and isinstance(default.value, str) else None


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


def checkpoint_decorators(tree: ast.Module, qualify: Qualify) -> dict[str, dict]:
    """Module-level decorators whose wrapper checkpoints the function they decorate: `def
    checkpointed(forward)` returning a `def wrapper(self, *args)` that calls `checkpoint(forward,
    self, *args, use_reentrant=...)`. name -> {"line" of that call, "reentrant" (None: not a
    literal, or not passed), "preserve_rng_state" (None: not a literal), "training_only": whether
    only the body of an `if ... .training` test reaches it}. Lines sit under "line" keys, which the
    summary's digest leaves out."""
    found: dict[str, dict] = {}
    for function in tree.body:
        if not isinstance(function, ast.FunctionDef) or len(function.args.args) != 1:
            continue
        wrapped = function.args.args[0].arg
        returned = next((s.value.id for s in function.body if isinstance(s, ast.Return) and isinstance(s.value, ast.Name)), None)
        inner = next((s for s in function.body if isinstance(s, ast.FunctionDef) and s.name == returned), None)
        if inner is None:
            continue
        for statement in inner.body:
            training = isinstance(statement, ast.If) and any(isinstance(n, ast.Attribute) and n.attr == "training" for n in ast.walk(statement.test))
            reached = [*statement.body] if training else [statement]  # type: ignore[attr-defined]
            call = next((n for s in reached for n in ast.walk(s) if _checkpoints(n, wrapped, qualify)), None)
            if call is None:
                continue
            keywords = _keywords(call.keywords)  # type: ignore[attr-defined]
            flags = [keywords.get(name) for name in ("use_reentrant", "preserve_rng_state")]
            known = [f.value if isinstance(f, ast.Constant) and isinstance(f.value, bool) else None for f in flags]
            found[function.name] = {"line": call.lineno, "reentrant": known[0], "preserve_rng_state": True if flags[1] is None else known[1], "training_only": training}
            break
    return found


def _checkpoints(node: ast.AST, wrapped: str, qualify: Qualify) -> bool:
    """`checkpoint(wrapped, ...)`: torch's checkpoint of the decorated function."""
    return (
        isinstance(node, ast.Call) and isinstance(node.func, (ast.Name, ast.Attribute)) and qualify(node.func) == TORCH_CHECKPOINT
        and bool(node.args) and _is_name(node.args[0], wrapped)
    )  # fmt: skip


def decorated_forwards(tree: ast.Module, qualify: Qualify, module: str) -> list[dict]:
    """{"class", "decorator" (qualified), "line"} for each class of the module whose `forward` is
    decorated (`@checkpointed`): the index keeps those a project decorator checkpoints (`checkpoint_decorators`)."""
    found: list[dict] = []
    for cls in tree.body:
        if not isinstance(cls, ast.ClassDef):
            continue
        forward = next((m for m in cls.body if isinstance(m, ast.FunctionDef) and m.name == "forward"), None)
        for decorator in forward.decorator_list if forward is not None else ():
            named = qualify(decorator) if isinstance(decorator, (ast.Name, ast.Attribute)) else None
            if named:
                found.append({"class": f"{module}.{cls.name}", "decorator": named, "line": decorator.lineno})
    return found

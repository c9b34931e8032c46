"""What a function does to the mode of the modules its parameters hold, as the index records it.

A caller that hands its model to a project function (`sample(policy, ids)`) keeps the mode it
knows unless the function may change it. Each function's summary lists, per parameter, the steps
that may: `.train(...)` / `.eval()` on the parameter or a name bound from it, and the calls it
hands the parameter to (checkpointing switched on by a helper is `ProjectIndex.enables_checkpointing_on`). A step is definite when it runs on every path that returns (a statement of the body itself,
not under an `if`, loop or `try`, and before any `return`). The index folds the steps, following
the calls into other project functions (`ProjectIndex.mode_effect`): a function that never touches
the mode leaves the caller's; one that sets it on every path sets it; anything else (a branch, a
call the analysis cannot name, `.train(flag)` with a flag not known) makes it unknown.
"""

from __future__ import annotations

import ast
import enum
from dataclasses import dataclass
from typing import Callable, Iterable, Optional, Union

from ckptlint.ast_nodes import CHILD_FIELDS, child_fields, nodes
from ckptlint.model.apis import PEFT_WRAPPERS


# The JSON shapes of the steps: ["set", True | False | None (not known), definite],
# ["call", callee (qualified; None: not known), key (positional index or
# keyword), definite, bound (the callee's first parameter is implicit)].
Step = list
# Builtins that inspect the object without running code of it (other builtins: not known).
_INSPECTING = frozenset({"isinstance", "id", "type", "print", "len", "hasattr", "repr", "str"})
# The methods of a module that set its mode.
_MODE_METHODS = frozenset({"train", "eval"})
# The attributes whose reading or writing on a module is a step (`_steps_at`).
_STEP_ATTRIBUTES = _MODE_METHODS | {"training"}


@dataclass
class _Walk:
    params: tuple[str, ...]
    qualify: Callable[[ast.expr], Optional[str]]
    owner: Optional[str]  # the qualified class of a method (for `self.method(...)`)
    methods: frozenset[str]  # the methods that class defines


def mode_steps(function: Union[ast.FunctionDef, ast.AsyncFunctionDef], qualify: Callable[[ast.expr], Optional[str]], owner: Optional[str] = None, methods: frozenset[str] = frozenset()) -> tuple[dict[str, list[Step]], Optional[str]]:
    """Per parameter (only those with steps), what `function` does to the mode of what it holds,
    and the parameter it returns unchanged (`returned_parameter`). One walk of the body serves both:
    the index runs this on every function of the project."""
    arguments = _arguments(function)
    if all(_holds_data(a.annotation) for a in arguments if a.arg != "self"):
        return {}, None
    params = tuple(a.arg for a in arguments)
    body = _walk_body(function)
    returned = returned_parameter(function, body.returns, body.stored, qualify)
    walk = _Walk(params, qualify, owner, methods)
    names = _bound_from(body.bindings, params)
    held = set().union(*names.values()) if names else set()
    first_return = min((n.lineno for n in body.returns), default=None)
    definite_statements = {id(s) for s in _unconditional(function.body)}
    steps: dict[str, list[Step]] = {}
    for statement, node in body.steps:
        if not _may_step(node, held):
            continue
        definite = id(statement) in definite_statements and (first_return is None or statement.lineno < first_return)
        for param, step in _steps_at(walk, node, names, definite, body.called):
            steps.setdefault(param, []).append(step)
    for node in body.nested:
        # A nested function may run at any time: what it does to a name it reads is not known.
        read = {n.id for n in nodes(node) if isinstance(n, ast.Name)}
        for param, names_held in names.items():
            if read & names_held:
                steps.setdefault(param, []).append(["set", None, False])
    return {param: _shortest(found) for param, found in steps.items()}, returned


def _arguments(function: Union[ast.FunctionDef, ast.AsyncFunctionDef]) -> list[ast.arg]:
    """Every parameter, `*args` and `**kwargs` too."""
    arguments = function.args
    return [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs, *(a for a in (arguments.vararg, arguments.kwarg) if a is not None)]


def _holds_data(annotation: Optional[ast.expr]) -> bool:
    """An annotation every name of which is a tensor, scalar or container type (`Optional[torch.Tensor]`,
    `tuple[int, ...]`): the parameter cannot hold a module, so nothing done with it changes a mode
    (in library code most parameters are annotated so, and this skips walking their functions)."""
    if annotation is None or (annotation.id if isinstance(annotation, ast.Name) else getattr(annotation, "attr", None)) in _CONTAINERS:
        return False
    for node in nodes(annotation):
        if isinstance(node, ast.Name) and node.id not in _DATA_TYPES or isinstance(node, ast.Attribute) and node.attr not in _DATA_TYPES:
            return False
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return False  # a forward reference: not read
    return True


# Types whose values are never modules (`torch.` and `typing.` prefixes are attributes' roots).
_DATA_TYPES = frozenset({
    "torch", "typing", "Tensor", "FloatTensor", "LongTensor", "BoolTensor", "HalfTensor", "IntTensor", "ByteTensor", "dtype", "device", "Size",
    "int", "float", "bool", "str", "bytes", "complex", "None", "Optional", "Union", "tuple", "Tuple", "list", "List", "dict", "Dict", "Sequence",
    "Mapping", "Iterable",
})
# Containers hold data only when their subscript says so (a bare `list` may hold modules).
_CONTAINERS = frozenset({"tuple", "Tuple", "list", "List", "dict", "Dict", "Sequence", "Mapping", "Iterable"})


def _shortest(steps: list[Step]) -> list[Step]:
    """The steps with the same effect (`folded`), fewer: a definite known mode or an unknown one
    overrides what came before; after an unknown mode only a definite step can make it known again;
    a step right after the same step changes nothing. The summary then changes only when the effect
    may (a body edit that adds a call like one before it does not re-analyse its callers), and most
    summaries, whose parameters are handed to something not known, shrink to one step."""
    start = max((i for i, step in enumerate(steps) if step[0] == "set" and (step[1] is None or step[2])), default=0)
    if steps[start][0] == "set" and steps[start][1] is None and not any(step[3 if step[0] == "call" else 2] for step in steps[start + 1 :]):
        return [steps[start]]
    kept: list[Step] = []
    for step in steps[start:]:
        if not kept or kept[-1] != step:
            kept.append(step)
    return kept


def returned_parameter(
    function: Union[ast.FunctionDef, ast.AsyncFunctionDef], returns: list[ast.AST], stored: set[str], qualify: Callable[[ast.expr], Optional[str]]
) -> Optional[str]:
    """The parameter every `return` of `function` returns (by name, never rebound), if any, or a
    PEFT wrapper of (`return get_peft_model(model, config)`, or a local bound once to one): the
    wrapper holds the same model. `returns` and `stored`: its body's `return`s (and `raise`s) and
    the names it binds (`_walk_body`)."""
    params = {a.arg for a in (*function.args.posonlyargs, *function.args.args, *function.args.kwonlyargs)}
    returned = {_returned_model(function, n.value, qualify) for n in returns if isinstance(n, ast.Return)}
    if len(returned) != 1:
        return None
    name = returned.pop()
    if name is None or name not in params or name == "self" or name in stored:
        return None
    return name


def _returned_model(function: Union[ast.FunctionDef, ast.AsyncFunctionDef], value: Optional[ast.expr], qualify: Callable[[ast.expr], Optional[str]]) -> Optional[str]:
    """The name a `return` hands back: the name itself, or the model a PEFT wrapper call (spelled
    there or bound once to the local returned) wraps."""
    if isinstance(value, ast.Name):
        bound = [n.value for n in nodes(function) if isinstance(n, ast.Assign) and any(isinstance(t, ast.Name) and t.id == value.id for t in n.targets)]
        if len(bound) != 1 or not isinstance(bound[0], ast.Call):
            return value.id
        value = bound[0]
    if not isinstance(value, ast.Call) or not isinstance(value.func, (ast.Name, ast.Attribute)) or qualify(value.func) not in PEFT_WRAPPERS:
        return None
    model = value.args[0] if value.args else next((k.value for k in value.keywords if k.arg == "model"), None)
    return model.id if isinstance(model, ast.Name) else None


@dataclass
class _Body:
    """What one walk of a function's own body finds (not the bodies of what it defines)."""

    steps: list[tuple[ast.stmt, ast.AST]]  # calls and attributes, each with its innermost statement
    returns: list[ast.AST]  # `return` and `raise` statements
    bindings: list[tuple[set[str], set[str]]]  # (names a bound value mentions, names the target binds)
    nested: list[ast.AST]  # the functions, lambdas and classes it defines
    stored: set[str]  # the names it binds or deletes
    called: set[int]  # the callee expressions of its calls


def _walk_body(function: Union[ast.FunctionDef, ast.AsyncFunctionDef]) -> _Body:
    """Statements in source order, each one's expressions walked once; the names each statement
    reads make the bindings of plain assignments and loops without walking their values again."""
    body = _Body([], [], [], [], set(), set())
    statements: list[ast.stmt] = list(reversed(function.body))
    roles, fields_of = _ROLES.get, CHILD_FIELDS.get
    while statements:
        statement = statements.pop()
        loads: set[str] = set()
        inner: list[ast.stmt] = []
        stack: list[ast.AST] = [statement]
        pop, push, extend = stack.pop, stack.append, stack.extend
        while stack:
            node = pop()
            kind = type(node)
            if kind is ast.Name:
                if type(node.ctx) is ast.Load:  # type: ignore[attr-defined]
                    loads.add(node.id)  # type: ignore[attr-defined]
                else:
                    body.stored.add(node.id)  # type: ignore[attr-defined]
                continue
            role = roles(kind)
            if role is not None:
                if role is _Role.NESTED:
                    body.nested.append(node)
                    continue
                if role is _Role.STATEMENT:
                    if node is not statement:
                        inner.append(node)  # type: ignore[arg-type]
                        continue
                elif role is _Role.CALL:
                    body.steps.append((statement, node))
                    body.called.add(id(node.func))  # type: ignore[attr-defined]
                elif role is _Role.ATTRIBUTE:
                    body.steps.append((statement, node))
                elif role is _Role.INNER_BINDING:
                    body.bindings.extend(_bindings(node, None))
                if kind is ast.Return or kind is ast.Raise:
                    body.returns.append(node)
            fields = fields_of(kind)
            if fields is None:
                if not isinstance(node, ast.AST):
                    continue  # None in `Dict.keys`, strings in pattern fields
                fields = child_fields(kind)
            for name in fields:
                value = getattr(node, name, None)
                if type(value) is list:
                    extend(value)
                elif value is not None:
                    push(value)
        if type(statement) in _BINDING:
            body.bindings.extend(_bindings(statement, loads))
        statements.extend(inner)  # popped last-found first: source order
    return body


_STATEMENTS = frozenset(ast.stmt.__subclasses__())
_BINDING = frozenset({ast.Assign, ast.AnnAssign, ast.AugAssign, ast.For, ast.AsyncFor})


class _Role(enum.Enum):
    """What `_walk_body` does at a node of a kind (one lookup per node: this walk sees every node of a project)."""

    NESTED = "nested"
    STATEMENT = "statement"
    CALL = "call"
    ATTRIBUTE = "attribute"
    INNER_BINDING = "inner binding"


_ROLES: dict[type, _Role] = {
    **{kind: _Role.STATEMENT for kind in _STATEMENTS},
    **{kind: _Role.NESTED for kind in (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)},
    ast.Call: _Role.CALL,
    ast.Attribute: _Role.ATTRIBUTE,
    **{kind: _Role.INNER_BINDING for kind in (ast.NamedExpr, ast.comprehension, ast.withitem)},
}


def _unconditional(body: list[ast.stmt]) -> list[ast.stmt]:
    """The statements of a body that run whenever it runs: `with` bodies too, and loop bodies (a
    step there reaches every module the loop does: `for m in models: m.eval()`)."""
    found: list[ast.stmt] = []
    for statement in body:
        found.append(statement)
        if isinstance(statement, (ast.With, ast.AsyncWith, ast.For, ast.AsyncFor)):
            found.extend(_unconditional(statement.body))
    return found


def _bindings(node: ast.AST, loads: Optional[set[str]]) -> list[tuple[set[str], set[str]]]:
    """(names the value mentions, names the target binds) of a binding node. `loads`: the names its
    statement reads, which are the value's when every target is a plain name (a subscript or
    attribute target reads names of its own)."""
    pairs: list[tuple[ast.AST, ast.AST]] = []
    if isinstance(node, ast.Assign):
        pairs = [(t, node.value) for t in node.targets]
    elif isinstance(node, (ast.AnnAssign, ast.AugAssign, ast.NamedExpr)) and node.value is not None:
        pairs = [(node.target, node.value)]
    elif isinstance(node, (ast.For, ast.AsyncFor, ast.comprehension)):
        pairs = [(node.target, node.iter)]
    elif isinstance(node, ast.withitem) and node.optional_vars is not None:
        pairs = [(node.optional_vars, node.context_expr)]
    found = []
    for target, value in pairs:
        stored = set(_names_bound(target))
        if not stored:
            continue
        if loads is None or isinstance(node, ast.AnnAssign) or not _plain_target(target):
            loads = {n.id for n in nodes(value) if isinstance(n, ast.Name)}
        found.append((loads, stored))
    return found


def _plain_target(target: ast.AST) -> bool:
    """A target that reads no name: `a`, `a, *b`."""
    if isinstance(target, (ast.Tuple, ast.List)):
        return all(_plain_target(element) for element in target.elts)
    return isinstance(target, ast.Name) or isinstance(target, ast.Starred) and _plain_target(target.value)


def _bound_from(bindings: list[tuple[set[str], set[str]]], params: tuple[str, ...]) -> dict[str, set[str]]:
    """Per parameter, the names that may hold it: itself, and any name assigned (or looped, or
    bound by `with ... as`) from an expression that mentions one of those names."""
    names = {p: {p} for p in params if p != "self"}
    changed = bool(bindings)
    while changed:
        changed = False
        for mentioned, stored in bindings:
            for held in names.values():
                if mentioned & held and not stored <= held:
                    held |= stored
                    changed = True
    return names


def _names_bound(target: ast.AST) -> list[str]:
    """The names an assignment target binds (`a`, `a, *b`; not `x.attr` or `x[i]`)."""
    if isinstance(target, ast.Name):
        return [target.id]
    if isinstance(target, (ast.Tuple, ast.List)):
        return [name for element in target.elts for name in _names_bound(element)]
    return _names_bound(target.value) if isinstance(target, ast.Starred) else []


def _holder(expr: ast.AST, names: dict[str, set[str]]) -> list[str]:
    """The parameters a bare name may hold."""
    if not isinstance(expr, ast.Name):
        return []
    return [param for param, held in names.items() if expr.id in held]


def _may_step(node: ast.AST, held: set[str]) -> bool:
    """Cheaply: whether `_steps_at` can find a step at the node (a name that may hold a parameter
    is its receiver or an argument)."""
    if type(node) is ast.Attribute:
        return node.attr in _STEP_ATTRIBUTES and type(node.value) is ast.Name and node.value.id in held  # type: ignore[attr-defined]
    func = node.func  # type: ignore[attr-defined]
    if type(func) is ast.Attribute and type(func.value) is ast.Name and func.value.id in held:
        return True
    return any(type(v) is ast.Name and v.id in held for v in (*node.args, *(k.value for k in node.keywords))) or any(  # type: ignore[attr-defined]
        type(a) is ast.Starred and type(a.value) is ast.Name and a.value.id in held for a in node.args  # type: ignore[attr-defined]
    )


def _steps_at(walk: _Walk, node: ast.AST, names: dict[str, set[str]], definite: bool, called: set[int]) -> list[tuple[str, Step]]:
    if isinstance(node, ast.Attribute):
        params = _holder(node.value, names)
        if node.attr == "training" and isinstance(node.ctx, ast.Store) or node.attr in _MODE_METHODS and id(node) not in called:
            return [(p, ["set", None, False]) for p in params]  # `m.training = flag`, `switch = m.eval`
        return []
    if not isinstance(node, ast.Call):
        return []
    func = node.func
    if isinstance(func, ast.Attribute) and _holder(func.value, names):
        params = _holder(func.value, names)
        if func.attr in _MODE_METHODS:
            return [(p, ["set", _mode_set(func.attr, node), definite]) for p in params]
        if func.attr == "apply":
            return [(p, ["set", None, False]) for p in params]  # `m.apply(fn)` runs fn on the module too
        return []
    if isinstance(func, ast.Name) and func.id in _INSPECTING and func.id not in walk.params:
        return []
    found: list[tuple[str, Step]] = []
    callee, bound = _callee(walk, func)
    for key, arg in [*enumerate(node.args), *((k.arg, k.value) for k in node.keywords)]:
        value = arg.value if isinstance(arg, ast.Starred) else arg
        for param in _holder(value, names):
            if isinstance(arg, ast.Starred) or key is None or callee is None:
                found.append((param, ["set", None, False]))
            else:
                found.append((param, ["call", callee, key, definite, bound]))
    return found


def _mode_set(method: str, call: ast.Call) -> Optional[bool]:
    """The mode `.train(...)` / `.eval()` sets (None: not known)."""
    if method == "eval":
        return False if not call.args and not call.keywords else None
    args = [*call.args, *(k.value for k in call.keywords if k.arg == "mode")]
    if len(call.args) + len(call.keywords) > 1 or any(isinstance(a, ast.Starred) for a in call.args):
        return None
    if not args:
        return True
    flag = args[0]
    return flag.value if isinstance(flag, ast.Constant) and isinstance(flag.value, bool) else None


def _callee(walk: _Walk, func: ast.expr) -> tuple[Optional[str], bool]:
    """The qualified name of what a call runs (None: not known), and whether it is a bound method."""
    if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "self":
        if walk.owner is not None and func.attr in walk.methods:
            return f"{walk.owner}.{func.attr}", True
        return None, True
    if isinstance(func, ast.Name) and func.id in walk.params:
        return None, False
    return walk.qualify(func), False


@dataclass(frozen=True)
class ModeEffect:
    """What a call does to the mode of a module it is handed."""

    changes: bool  # it may change it
    mode: Optional[bool] = None  # the mode it leaves on every path (when it changes it)


LEAVES_MODE = ModeEffect(False)
MAY_CHANGE_MODE = ModeEffect(True)


def then(before: ModeEffect, step: ModeEffect, definite: bool) -> ModeEffect:
    """The effect of `before` followed by `step`, which runs on every path or only on some."""
    if not step.changes:
        return before
    if step.mode is not None and (definite or before.changes and before.mode == step.mode):
        return step
    return MAY_CHANGE_MODE


def folded(steps: Iterable[Step], effect_of_call: Callable[[str, Union[int, str], bool], ModeEffect]) -> ModeEffect:
    """The effect of a parameter's steps, in order; `effect_of_call(callee, key, bound)` follows a call."""
    effect = LEAVES_MODE
    for step in steps:
        if step[0] == "set":
            effect = then(effect, ModeEffect(True, step[1]), step[2])
        else:
            _, callee, key, definite, bound = step
            effect = then(effect, effect_of_call(callee, key, bound), definite)
    return effect

"""What a script knows about its model variables: train or eval mode, and whether transformers'
checkpointing was switched on, following `.train()` / `.eval()`, constructors and deep copies.

A model is recorded under a key: a variable (`model`) or an attribute of `self` (`self.policy`).
Names bound to the same module share its key (an alias): `m = model`, `accelerator.unwrap_model(m)`,
`nn.DataParallel(m)` / `DistributedDataParallel(m)`, and such a wrapper's `.module`, so a mode set
through one is the mode of all (measured: tests/runtime/test_policy_trainers_runtime.py)."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Optional, Union

import libcst as cst

from ckptlint.mode_effects import MAY_CHANGE_MODE, ModeEffect
from ckptlint.model.apis import DEEP_COPIES, HF_MODEL_CONSTRUCTOR
from ckptlint.model.shapes import is_self
from ckptlint.model.sites import ModelState
from ckptlint.model.torch_knowledge import MODULE_SELF_METHODS
from ckptlint.model.values import Const, ModuleObject, Ref, Value

if TYPE_CHECKING:
    from ckptlint.model.builder import ModelBuilder
    from ckptlint.model.scope import Scope

# Wrappers whose `.module` is the module they were given (its train()/eval() switch that module).
DISTRIBUTED_WRAPPERS = frozenset({"torch.nn.DataParallel", "torch.nn.parallel.DataParallel", "torch.nn.parallel.DistributedDataParallel"})
# Functions that hand back the module inside such a wrapper (the module itself when it has none).
UNWRAPPING_FUNCTIONS = frozenset({"transformers.modeling_utils.unwrap_model", "accelerate.utils.extract_model_from_parallel"})
ACCELERATORS = frozenset({"accelerate.Accelerator", "accelerate.accelerator.Accelerator"})
HF_DISABLE_METHODS = frozenset({"gradient_checkpointing_disable", "activation_checkpointing_disable"})


def training_mode_set(builder: "ModelBuilder", node: cst.Call) -> Optional[bool]:
    """The mode `module.train(...)` sets: True without arguments (None: not known)."""
    if not node.args:
        return True
    arg = node.args[0]
    if arg.star or (arg.keyword is not None and arg.keyword.value != "mode"):
        return None
    mode = builder.evaluate(arg.value)
    return mode.value if isinstance(mode, Const) and isinstance(mode.value, bool) else None


def spelled_key(node: cst.BaseExpression) -> Optional[str]:
    """The key a name or `self` attribute is spelled as, before aliases."""
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute) and is_self(node.value):
        return f"self.{node.attr.value}"
    return None


def wrapped_argument(builder: "ModelBuilder", node: cst.Call, callee: Optional[Value] = None) -> Optional[tuple[cst.BaseExpression, bool]]:
    """For a call that returns the module it is handed (unwrapped, or in a distributed wrapper): that
    argument, and whether the result is a wrapper (whose `.module` is the argument). `callee`: the
    value of `node.func`, when the caller has it already."""
    positional = [a for a in node.args if a.keyword is None]
    if len(positional) != 1 or positional[0].star:
        return None
    if callee is None:
        callee = builder.evaluate(node.func)
    if isinstance(callee, Ref) and callee.qualname in DISTRIBUTED_WRAPPERS:
        return positional[0].value, True
    if isinstance(callee, Ref) and callee.qualname in UNWRAPPING_FUNCTIONS:
        return positional[0].value, False
    func = node.func
    if isinstance(func, cst.Attribute) and func.attr.value == "unwrap_model":
        accelerator = builder.evaluate(func.value)
        if isinstance(accelerator, ModuleObject) and any(c in ACCELERATORS for c in accelerator.classes):
            return positional[0].value, False
    return None


def resolved(scope: "Scope", key: str) -> str:
    """The key whose facts `key` shares (itself unless it is an alias)."""
    return scope.model_aliases[key][0] if key in scope.model_aliases else key


def model_key(builder: "ModelBuilder", expr: cst.BaseExpression) -> Optional[str]:
    """The key the model an expression gives is recorded under, through aliases and wrappers."""
    aliases = builder.scope.model_aliases
    key = spelled_key(expr)
    if key is not None:
        return resolved(builder.scope, key)
    if isinstance(expr, cst.Attribute) and expr.attr.value == "module":
        inner = spelled_key(expr.value)
        if inner is not None and inner in aliases and aliases[inner][1]:
            return aliases[inner][0]
        wrapped = wrapped_argument(builder, expr.value) if isinstance(expr.value, cst.Call) else None
        return model_key(builder, wrapped[0]) if wrapped is not None and wrapped[1] else None
    if isinstance(expr, cst.Call):
        wrapped = wrapped_argument(builder, expr)
        handed = wrapped[0] if wrapped is not None else returned_argument(builder, expr)
        return model_key(builder, handed) if handed is not None else None
    return None


def returned_argument(builder: "ModelBuilder", node: cst.Call) -> Optional[cst.BaseExpression]:
    """For a call of a project function that returns one of its parameters unchanged
    (`teacher = prepare_for_training(teacher)`): the argument that fills it."""
    returned = _returned_slot(builder, node)
    return returned[0] if returned is not None else None


def _returned_slot(builder: "ModelBuilder", node: cst.Call) -> Optional[tuple[cst.BaseExpression, Union[int, str], str, bool]]:
    """`returned_argument`, with the slot it fills, the function and whether it is bound."""
    targets, bound = builder.call_targets(builder.evaluate(node.func))
    if len(targets) != 1:
        return None
    returned = builder.index.returned_parameter(targets[0], bound)
    if returned is None:
        return None
    position, name = returned
    positional = [a for a in node.args if a.keyword is None]
    if any(a.star for a in positional[: (position or 0) + 1]):
        return None
    if position is not None and position < len(positional):
        return positional[position].value, position, targets[0], bound
    keyword = next((a.value for a in node.args if a.keyword is not None and a.keyword.value == name), None)
    return (keyword, name, targets[0], bound) if keyword is not None else None


def _returned_state(builder: "ModelBuilder", node: cst.Call) -> Optional[ModelState]:
    """The state of the model a project function returns unchanged (`set_eval(Tower())`): its
    argument's, in the mode the function leaves it in, with the checkpointing it switches on
    (`policy = enable_memory_savings(build_policy())`)."""
    returned = _returned_slot(builder, node)
    if returned is None:
        return None
    argument, slot, function, bound = returned
    state = state_of(builder, argument)
    if state.checkpointing is None and not bound and builder.index.enables_checkpointing_on(function, slot):
        state = replace(state, checkpointing=node)
    elif state.checkpointing is not None and not bound and builder.index.disables_checkpointing_on(function, slot):
        state = replace(state, checkpointing=None)  # `prepare_for_inference(model)` switched it off
    effect = builder.index.mode_effect(function, slot, bound)
    return replace(state, training=effect.mode) if effect.changes else state


def state_of(builder: "ModelBuilder", expr: cst.BaseExpression) -> ModelState:
    """The state of the model an expression gives: a variable's or attribute's, a constructor's (a new
    module trains), a deep copy's (the copy keeps mode and checkpointing), through `.to()`, `.train()`,
    `.eval()` and wrappers that return the same module."""
    key = model_key(builder, expr)
    return keyed_state(builder.scope, key) if key is not None else _unkeyed_state(builder, expr)


def keyed_state(scope: "Scope", key: str) -> ModelState:
    return ModelState(scope.model_modes.get(key), scope.checkpointed_models.get(key), tuple(sorted(scope.model_flags.get(key, {}).items())))


def _unkeyed_state(builder: "ModelBuilder", expr: cst.BaseExpression) -> ModelState:
    """`state_of` an expression that gives no model known by a key."""
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
    returned = _returned_state(builder, expr)
    if returned is not None:
        return returned
    targets, bound = builder.call_targets(callee)
    if len(targets) == 1 and not bound and builder.index.checkpoints_what_it_builds(targets[0]):
        return ModelState(checkpointing=expr)  # `model = build_model(cfg)` that switched it on; mode as the builder left it
    if isinstance(callee, Ref) and (isinstance(builder.evaluate(expr), ModuleObject) or HF_MODEL_CONSTRUCTOR.fullmatch(callee.qualname)):
        return ModelState(training=True)  # nn.Module.__init__ leaves it in train mode
    return ModelState()


def bind_model(builder: "ModelBuilder", target: cst.BaseExpression, value: cst.BaseExpression) -> None:
    """`target = value`: an alias when the value is a module already known by a key (the same module,
    maybe in a distributed wrapper), else the state the value gives."""
    key = spelled_key(target)
    if key is None:
        return
    scope = builder.scope
    builder.held.note_assigned(builder, key)
    scope.model_aliases.pop(key, None)
    same = model_key(builder, value)
    if same is not None and same != key and not scope.conditional:
        if key.startswith("self.") and not same.startswith("self.") and not _is_wrapper(builder, value):
            _rekey(scope, same, key)  # `self.policy = policy`: the attribute outlives the variable
            same = key
        if same != key:
            scope.model_aliases[key] = (same, _is_wrapper(builder, value))
    else:
        state = keyed_state(scope, same) if same is not None else _unkeyed_state(builder, value)
        if state.checkpointing is None and not scope.conditional:
            # Another object, or the same one a helper switched checkpointing off for (`model = prepare_for_inference(model)`).
            scope.checkpointed_models.pop(resolved(scope, key), None)
        set_state(builder, key, state)


def _rekey(scope: "Scope", old: str, new: str) -> None:
    """Record what is known under `old` under `new` instead, and make `old` (and its aliases) aliases of it."""
    if old in scope.model_modes:
        scope.model_modes[new] = scope.model_modes.pop(old)
    if old in scope.checkpointed_models:
        scope.checkpointed_models[new] = scope.checkpointed_models.pop(old)
    if old in scope.model_flags:
        scope.model_flags[new] = scope.model_flags.pop(old)
    for alias, (target, wrapper) in list(scope.model_aliases.items()):
        if target == old:
            scope.model_aliases[alias] = (new, wrapper)
    scope.model_aliases[old] = (new, False)


def _is_wrapper(builder: "ModelBuilder", value: cst.BaseExpression) -> bool:
    """Whether the value is a distributed wrapper (its `.module` is the model), or an alias of one."""
    if isinstance(value, cst.Call):
        wrapped = wrapped_argument(builder, value)
        return wrapped is not None and wrapped[1]
    key = spelled_key(value)
    return key is not None and key in builder.scope.model_aliases and builder.scope.model_aliases[key][1]


def set_state(builder: "ModelBuilder", name: str, state: ModelState) -> None:
    scope = builder.scope
    key = resolved(scope, name)
    builder.held.note_mode(builder, key, state.training)
    if state.training is not None:
        scope.modes_touched.add(key)
    # Under an `if`, a mode that differs from the one before may or may not hold after it.
    if state.training is None or (scope.conditional and scope.model_modes.get(key) != state.training):
        scope.model_modes.pop(key, None)
    else:
        scope.model_modes[key] = state.training
    if state.checkpointing is not None:
        scope.checkpointed_models.setdefault(key, state.checkpointing)
    for attr, value in state.flags:
        set_flag(builder, key, attr, value)


def set_flag(builder: "ModelBuilder", name: str, attr: str, value: Optional[bool]) -> None:
    """A module flag set on a model (`model.use_checkpoint = True`, or by its method); under an `if`,
    a value that differs from the one before may or may not hold after it."""
    scope = builder.scope
    flags = scope.model_flags.setdefault(resolved(scope, name), {})
    flags[attr] = None if scope.conditional and flags.get(attr, "unset") != value else value


def flags_set_by_method(builder: "ModelBuilder", node: cst.Call, model: Value, method: str) -> Optional[dict[str, Optional[bool]]]:
    """What a project method of the model's class sets its flags to on every path
    (`ClassSummary.flag_setters`), with this call's arguments; None: no such method, or the model's
    classes do not agree on one."""
    classes = model.classes if isinstance(model, ModuleObject) else ()
    setters = [builder.index.flag_setters(cls, method) for cls in classes]
    if not setters or any(s is None for s in setters) or any(s != setters[0] for s in setters):
        return None
    positional = [a for a in node.args if a.keyword is None]
    keywords = {a.keyword.value: a.value for a in node.args if a.keyword is not None}
    spread = any(a.star for a in node.args)
    found: dict[str, Optional[bool]] = {}
    for attr, (kind, *rest) in setters[0].items():  # type: ignore[union-attr]
        if kind == "const":
            found[attr] = rest[0]
            continue
        name, position, default = rest
        argument = keywords.get(name, positional[position].value if position < len(positional) else None)
        if argument is not None:
            value = builder.evaluate(argument)
            found[attr] = value.value if isinstance(value, Const) and isinstance(value.value, bool) and not spread else None
        else:
            found[attr] = default[0] if default and isinstance(default[0], bool) and not spread else None
    return found


def apply_mode_effects(builder: "ModelBuilder", node: cst.Call, callee: Value, targets: tuple[str, ...], bound: bool) -> None:
    """A model handed to a project function (or one the analysis cannot name) comes back in the mode
    that function leaves it in: the same unless it may change it (`prepare(model)` may call
    `model.eval()`), the mode it sets on every path, else not known (`ProjectIndex.mode_effect`).
    Wrappers that return the module do not change it."""
    if wrapped_argument(builder, node, callee) is not None:
        return
    slot: Union[int, str, None] = 0
    for arg in node.args:
        if arg.keyword is not None:
            key_slot: Union[int, str, None] = arg.keyword.value
        elif arg.star:
            key_slot, slot = None, None  # what follows a `*args` fills parameters not known here
        else:
            key_slot = slot
            slot = slot + 1 if isinstance(slot, int) else None
        if is_self(arg.value):
            builder.held.note_self_handed(builder)
        key = model_key(builder, arg.value) if isinstance(arg.value, (cst.Name, cst.Attribute)) else None
        if key is None:
            continue
        effect = _call_effect(builder, targets, bound, key_slot)
        if not effect.changes:
            continue
        builder.scope.modes_touched.add(key)
        builder.held.note_handed(builder, key)
        if effect.mode is None:
            builder.scope.model_modes.pop(resolved(builder.scope, key), None)
        else:
            set_state(builder, key, ModelState(training=effect.mode))


def _call_effect(builder: "ModelBuilder", targets: tuple[str, ...], bound: bool, slot: Union[int, str, None]) -> ModeEffect:
    """What a call running `targets` does to the mode of the module it passes at `slot`: each target
    must agree (no target: a callee not known, which may do anything)."""
    if not targets or slot is None:
        return MAY_CHANGE_MODE
    effects = {builder.index.mode_effect(target, slot, bound) for target in targets}
    return effects.pop() if len(effects) == 1 else MAY_CHANGE_MODE

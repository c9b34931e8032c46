"""What module objects hold and produce, from the project index: their attributes, methods,
parameters and outputs. Shared by the LibCST pass and by the resolution of parameter-dependent
values once a function's callers are known.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Optional, Sequence

from ckptlint.index import AttrBinding, ClassSummary, ProjectIndex
from ckptlint.model.construction import object_fields, post_initialised
from ckptlint.model.torch_knowledge import ACTIVATION_NAMES, BATCH_NORMS, MODEL_OUTPUT_ACTIVATIONS, PARAMETER_FREE_MODULES, PARAMETER_MODULES, PARAMETER_NAMES, TUPLE_OUTPUTS
from ckptlint.model.values import (
    SYMBOLIC,
    UNKNOWN,
    Const,
    Defaulted,
    Derived,
    Grad,
    Items,
    LocalFunction,
    ModuleObject,
    Param,
    Tensor,
    Value,
    join_grad,
    literal_value,
)

_NO_SUMMARY = ClassSummary("", (), {}, ())
# Tensor attributes that are metadata, not tensors: they never carry grad.
TENSOR_METADATA: dict[str, Value] = {name: Const(None) for name in ("shape", "dtype", "device", "ndim", "is_cuda", "requires_grad")}


def tensor_attribute(tensor: Tensor, attr: str) -> Value:
    """`t.attr`: metadata, the transpose, or, on a module's output, the activation a ModelOutput holds."""
    if attr == "T":
        return tensor
    if tensor.maybe_tuple and attr in MODEL_OUTPUT_ACTIVATIONS:
        return replace(tensor, maybe_tuple=False)
    return TENSOR_METADATA.get(attr, UNKNOWN)


def entry_value(function: str, name: str) -> Optional[Value]:
    """What code outside the project passes for the parameter `name` of a top-level model's
    method (`forward`, and the public ones): data, unless it is named like an activation."""
    if name in ("self", "cls") or name in ACTIVATION_NAMES:
        return None
    owner, method = function.rsplit(".", 2)[-2:]
    return Tensor(Grad.NONE, f"`{name}` is an input of `{owner}.{method}`, a top-level model (data does not require grad)")


def loader_batch(function: str, name: str) -> Tensor:
    """The batch Lightning's fit loop passes to `training_step`: the DataLoader's, whatever its name."""
    owner, method = function.rsplit(".", 2)[-2:]
    return Tensor(Grad.NONE, f"`{name}` of `{owner}.{method}` is the DataLoader's batch (data does not require grad)")


def held_module(index: ProjectIndex, binding: AttrBinding, spelled: str, built_by: Optional[str] = None, path: tuple[tuple[str, str], ...] = ()) -> ModuleObject:
    """The module an attribute binding holds, with the arguments it was built with (in the `__init__`
    of `built_by`), at `path` in the object the spelling starts from."""
    built = [index.built_classes(index.canonical(c)) for c in binding.constructors]
    classes = tuple(dict.fromkeys(c for found, _ in built for c in found))
    # A builder's container held alone is that container (its elements, the classes it holds); in a list, they flatten into it.
    container = binding.container or (built[0][1] if len(built) == 1 else None)
    expanded = any(found != (index.canonical(c),) for c, (found, _) in zip(binding.constructors, built))
    # A builder's arguments are not its layers' (`make_block(8, 0.1)`): nothing is known of how those were built.
    arguments = tuple((key, tuple(described)) for key, described in binding.arguments.items()) if binding.arguments is not None and not expanded else None
    return ModuleObject(classes, spelled, container, arguments, built_by if arguments is not None else None, path)


class Dataflow:
    def __init__(self, index: ProjectIndex) -> None:
        self.index = index

    def attribute(self, class_qualname: str, attr: str, spelled: str, within: tuple[tuple[str, str], ...] = ()) -> Value:
        """`obj.attr` for an instance of `class_qualname`, as `__init__` (or the class body) binds it
        (`within`: the module path of `obj`)."""
        holder = self.index.attribute_holder(class_qualname, attr)
        if holder is None:
            return self.method(class_qualname, attr)
        binding = holder.attrs[attr]
        if binding.has_constant:
            return literal_value(binding.constant)
        if binding.parameter is not None:
            grad = Grad.REQUIRED if binding.parameter else Grad.NONE
            return Tensor(grad, f"`{spelled}` is an nn.Parameter{'' if binding.parameter else ' with requires_grad=False'}", leaf=True)
        if binding.is_buffer:
            return Tensor(Grad.NONE, f"`{spelled}` is a registered buffer", leaf=True)
        if binding.constructors or binding.container:
            return held_module(self.index, binding, spelled, holder.qualname, (*within, (holder.qualname, attr)))
        if binding.param is not None:
            handed = Param(binding.param, f"{holder.qualname}.__init__", class_qualname)  # what the constructor was handed
            if binding.fallback is not None:
                return Defaulted(handed, Const(binding.fallback[0]), binding.fallback[1])  # `ckpt_kwargs or {...}`
            return handed
        return UNKNOWN

    def method(self, class_qualname: str, attr: str) -> Value:
        """`obj.method` as a function, found along the class's bases."""
        for name in self.index.ancestors(class_qualname):
            summary = self.index.class_(name)
            if summary is not None and attr in summary.methods:
                return LocalFunction(f"{summary.qualname}.{attr}")
        return UNKNOWN

    def member(self, module: ModuleObject, attr: str) -> Value:
        """`block.forward` / `block.__call__` is the module; `block.attend` a method, `model.layers` a submodule."""
        if attr == "__call__":
            return module
        if attr == "forward":
            return replace(module, skips_hooks=True)
        if len(module.classes) == 1 and not module.container:
            if module.arguments is not None and self._is_field(module.classes[0], attr):
                # A config object built where the analysis sees its arguments: what it was built with
                # (`ModelConfig(ckpt_reentrant=True)`), not the class default; unknown if not literal.
                return object_fields(self.index, module.classes[0], module.arguments).get(attr, UNKNOWN)
            if module.arguments is not None and self.index.init_signature(module.classes[0]) is None:
                passed = self._passed_field(module, attr)
                if passed is not None:
                    return passed
            return self.attribute(module.classes[0], attr, f"{module.origin}.{attr}", module.path)
        return UNKNOWN

    def _passed_field(self, config: ModuleObject, attr: str) -> Optional[Value]:
        """A dataclass-style object's field that holds an object (`ckpt: CkptConfig =
        field(default_factory=CkptConfig)`) as its construction shows it: the object built in its
        place (`NetConfig(ckpt=CkptConfig(...))`, also assigned after), unknown for anything else
        passed, or for fields a table or positions may have filled; None: the class default holds."""
        given = dict(config.arguments or ())
        described = given.get(f".{attr}", given.get(attr))
        cls = config.classes[0]
        if post_initialised(self.index, cls):
            return UNKNOWN
        if described is None:
            return UNKNOWN if any(key.startswith("#") or key == "**" for key in given) else None
        if described[0] == "object":
            return ModuleObject((described[1],), f"{config.origin}.{attr}", arguments=described[2])
        return UNKNOWN

    def _is_field(self, class_qualname: str, attr: str) -> bool:
        """An attribute set from a literal or from an `__init__` parameter: one its arguments decide."""
        holder = self.index.attribute_holder(class_qualname, attr)
        binding = holder.attrs[attr] if holder is not None else None
        return binding is not None and (binding.has_constant or binding.param is not None)

    def module_output(self, module: ModuleObject, inputs: list[Value], frozen: Optional[str] = "") -> Value:
        """requires_grad of `module(*inputs)`: data through frozen or parameter-free modules stays data.
        `frozen`: how the module is frozen ('' if it is not, None if that cannot be told)."""
        if frozen is not None:
            if frozen and inputs and all(isinstance(v, Tensor) and v.grad is Grad.NONE or isinstance(v, SYMBOLIC) for v in inputs):
                origin = f"`{module.origin}` is frozen ({frozen}) and its input cannot require grad"
                if all(isinstance(v, Tensor) for v in inputs):
                    return Tensor(Grad.NONE, origin, frozen=True, maybe_tuple=True)
                return Derived(tuple(v for v in inputs if isinstance(v, SYMBOLIC)), None, origin, frozen=True)
            if frozen:
                return UNKNOWN
        if module.classes and all((self.index.class_(c) or _NO_SUMMARY).forward_no_grad for c in module.classes):
            return Tensor(Grad.NONE, f"`{module.origin}` runs its forward under torch.no_grad()", maybe_tuple=True)
        # A Sequential runs every class it holds; otherwise the classes are alternatives (built on
        # different branches, or the elements of a list): what holds for every one of them.
        if module.container or not module.classes:
            verdicts = {self.has_parameters(module.classes)}
        else:
            verdicts = {self.has_parameters([cls]) for cls in module.classes}
        if verdicts == {False}:
            output = join_grad(inputs, f"output of `{module.origin}`")
            return replace(output, maybe_tuple=True) if isinstance(output, Tensor) else output
        if verdicts == {True}:
            output = Tensor(Grad.REQUIRED, f"output of `{module.origin}`, which has trainable parameters", maybe_tuple=True)
            if module.classes and not module.container and all((self.index.class_(c) or _NO_SUMMARY).forward_returns_sequence for c in module.classes):
                return replace(output, sequence=True, origin=f"outputs of `{module.origin}`, which has trainable parameters")
            shapes = {TUPLE_OUTPUTS.get(c) for c in module.classes}
            if module.container or len(shapes) != 1 or None in shapes:
                return output
            # `out, weights = self.attn(h, h, h)`: each part is such a tensor.
            part = replace(output, maybe_tuple=False)
            return Items(tuple(part if count == 1 else Items((part,) * count) for count in shapes.pop()))  # type: ignore[union-attr]
        if verdicts == {True, False}:
            # Alternatives with and without parameters (the layers of builders' blocks, flattened into a
            # list): a tensor either way, whether it requires grad depends on which one runs.
            return Tensor(Grad.UNKNOWN, f"output of `{module.origin}`", maybe_tuple=True)
        return UNKNOWN

    def frozen(self, owner: Optional[str], module: ModuleObject) -> Optional[str]:
        """How a `self.<attr>` submodule of `owner` is frozen ('' if it is not, None if that cannot be told)."""
        if owner is None or not module.origin.startswith("self."):
            return ""
        attr = module.origin[len("self.") :].split(".", 1)[0].split("[", 1)[0]
        freeze = self.index.freeze_of(owner)
        if freeze.input_grad_hook:
            return None
        builtin = bool(module.classes) and all(c in PARAMETER_MODULES or c in PARAMETER_FREE_MODULES for c in module.classes)
        names = {PARAMETER_NAMES.get(c) for c in module.classes} if builtin else set()
        state, by_name = freeze.state_of(attr, names.pop() if len(names) == 1 else None)
        module_summary, _ = self.index.split(owner)
        at = f" at {freeze.where(module_summary.path if module_summary is not None else '')}" if freeze.line else ""
        at += f" {freeze.note}" if at and freeze.note else ""
        if not state:
            return "" if state is False else None
        if attr in freeze.norms_trainable and not (builtin and not any(c in BATCH_NORMS for c in module.classes)):
            return None  # Lightning's `freeze` kept the BatchNorm layers it may hold trainable
        if by_name:
            return f"its parameters' names select it for freezing{at}"
        if attr in freeze.attrs:
            return f"`requires_grad` switched off{at}" if at else "its parameters are frozen"
        # Only built-in layers are certainly frozen: project layers may hold unfrozen adapters.
        return f"all parameters frozen{at}" if builtin else None

    def has_parameters(self, classes: Sequence[str], depth: int = 0) -> Optional[bool]:
        """True if any class owns parameters, False if none does, None when unknown."""
        verdicts = []
        for cls in classes:
            if cls in PARAMETER_MODULES:
                return True
            if cls in PARAMETER_FREE_MODULES:
                verdicts.append(False)
                continue
            summary = self.index.class_(cls)
            if summary is None or depth > 6:
                verdicts.append(None)
                continue
            inner = [c for name in self.index.ancestors(cls) for binding in (self.index.class_(name) or _NO_SUMMARY).attrs.values() for c in binding.constructors]
            verdicts.append(self.has_parameters([self.index.canonical(c) for c in inner], depth + 1) if inner else False)
        if any(v is True for v in verdicts):
            return True
        return False if verdicts and all(v is False for v in verdicts) else None

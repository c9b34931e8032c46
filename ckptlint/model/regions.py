"""The region of a checkpoint: every function the checkpointed callable runs, across files.

Built from facts the model already collected per function (RNG draws, side effects, container
mutations, submodule calls), so rules never walk a callee's body again.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Iterator, Optional

from ckptlint.model.sites import CallRecord, FunctionFacts, HookRegistration

from ckptlint.model.construction import Context, passed, resolve
from ckptlint.model.dataflow import held_module
from ckptlint.model.values import ANY_MODULE, SUBMODULES, Const, Lambda, LocalFunction, ModuleObject, Param, Partial, Ref, Value
from ckptlint.model.torch_knowledge import DROPOUT_MODULE_P, DROPOUT_MODULES

if TYPE_CHECKING:
    from ckptlint.index import ProjectIndex
    from ckptlint.model.file_model import FileModel

_MAX_FUNCTIONS = 64  # deep module trees: enough to see every layer type, bounded for speed

# A module path: (class that binds the attribute, attribute) per step, values.ELEMENT into containers.
_Path = tuple[tuple[str, str], ...]
# (file, callable or module, its `__init__` context, module path and class of the object it runs on,
# whether the code is seen calling it: a submodule only held may run through helpers, or not at all,
# and the part whose body calls it).
_Work = tuple["FileModel", Optional[Value], Optional[Context], _Path, Optional[str], bool, Optional["RegionPart"]]


@dataclass
class RegionPart:
    model: "FileModel"  # the file the function lives in (for reporting there)
    facts: FunctionFacts
    owner_class: Optional[str] = None
    # Parameters of the checkpointed function that the call gives a value (None: not the entry).
    passed: Optional[frozenset[str]] = None
    # What the `__init__` that built the module running the function received, when known.
    context: Optional[Context] = None
    # A module hook that runs here because its module runs in the region.
    hook: Optional[HookRegistration] = None
    # That module is the checkpointed module itself (its forward hook runs after its last operation).
    on_entry: bool = False
    # The file that registers the hook.
    registered_in: Optional[str] = None
    # The part whose body runs this function, and its calls of it there (whose arguments are what
    # the function's parameters hold in the region); None and () for the entry, a hook, a submodule
    # only held.
    caller: Optional["RegionPart"] = None
    calls: tuple[CallRecord, ...] = ()


@dataclass
class Region:
    parts: list[RegionPart] = field(default_factory=list)
    # Module classes in the checkpointed module tree whose forward draws random numbers.
    dropout_modules: list[str] = field(default_factory=list)
    # False when some callee could not be resolved: absence of a fact then proves nothing.
    complete: bool = True


def region_of(model: "FileModel", function: Optional[Value], inputs: int = 0, built_with: Optional[Context] = None) -> Region:
    """`built_with`: what the `__init__` that built the checkpointed module received, when known."""
    region = Region()
    entry = _entry_binding(function, inputs)
    seen: set = set()
    hooks = _Hooks(model)
    # Each function runs for a module instance whose `__init__` arguments may be known (a context),
    # at a module path (the object a method runs on: where its `self.<attr>` modules sit).
    work: list[_Work] = [(model, function, built_with, (), None, True, None)]
    while work and len(region.parts) < _MAX_FUNCTIONS:
        current, value, context, within, self_class, called, caller = work.pop()
        if isinstance(value, Partial):
            work.append((current, value.func, context, within, self_class, called, caller))
        elif isinstance(value, Lambda):
            facts = current.lambdas.get(id(value.node))
            if facts is not None:
                _add(region, work, current, facts, None, entry, context, within)
        elif isinstance(value, (LocalFunction, Ref)):
            if value.qualname not in seen:
                seen.add(value.qualname)
                located = _function(current, value.qualname)
                if located is None:
                    region.complete = False
                else:
                    _add(region, work, located[0], located[1], None, entry, context, within, _calls_from(caller, value.qualname))
        elif isinstance(value, ModuleObject):
            arguments = dict(value.arguments) if value.arguments is not None else None
            at = _module_path(current, value, within, self_class)
            for cls in value.classes:
                if cls in DROPOUT_MODULES:
                    if _draws(cls, arguments, context):
                        region.dropout_modules.append(cls)
                    continue
                # An object whose construction is not in view (`self`) holds what the project's constructions agree on.
                inner = passed(current.index, cls, arguments, context) if arguments is not None else current.index.construction_context(cls)
                key = (cls, tuple(sorted(inner.items())) if inner is not None else None)
                if key in seen:
                    continue
                seen.add(key)
                # A module runs its `forward`; an object of a plain class with `__call__` (a masker, an augmenter) that.
                method = "forward" if current.index.forward_owner(cls) else "__call__"
                owner = current.index.method_owner(cls, method)
                located = _function(current, f"{owner.qualname}.{method}") if owner else None
                if located is None:
                    region.complete = region.complete and cls.startswith("torch.nn.")
                    continue
                via = _calls_from(caller, f"{owner.qualname}.{method}") if called else (None, ())
                _add(region, work, located[0], located[1], cls, entry, inner, at, via)
                # Submodules built in __init__ but called through helpers still run in the region.
                for name in current.index.ancestors(cls):
                    summary = current.index.class_(name)
                    for attr, binding in summary.attrs.items() if summary else ():
                        work.append((located[0], held_module(current.index, binding, "", path=((name, attr),)), inner, at, cls, False, None))
            if called and not value.skips_hooks:
                # Its hooks run inside its call (after its forward's part: the entry's part comes first).
                for registered_in, registration, hook in hooks.on(value, at):
                    _add_hook(region, work, registered_in, registration, hook, value is function, at)
        else:
            region.complete = False
    return region


def _draws(cls: str, arguments: Optional[dict[str, tuple]], context: Optional[Context]) -> bool:
    """Whether a dropout module built with these arguments draws random numbers: all but a visible p=0."""
    if arguments is None or cls not in DROPOUT_MODULE_P:
        return True
    name, default = DROPOUT_MODULE_P[cls]
    described = arguments.get(name, arguments.get("#0"))
    p = Const(default) if described is None else resolve(described, context)
    return not (isinstance(p, Const) and isinstance(p.value, (int, float)) and not isinstance(p.value, bool) and p.value == 0)


def _entry_binding(function: Optional[Value], inputs: int) -> tuple[int, frozenset[str]]:
    """(positional values, keyword names) the checkpointed function receives from the call."""
    if isinstance(function, Partial):
        return inputs + len(function.arg_values), frozenset(function.keywords)
    return inputs, frozenset()


def _calls_from(caller: Optional[RegionPart], target: str) -> tuple[Optional[RegionPart], tuple[CallRecord, ...]]:
    """The calls of `target` that the body of `caller` makes (none known: the function's parameters
    stay open)."""
    if caller is None:
        return None, ()
    calls = tuple(call for call in caller.model.calls.get(target, ()) if call.caller == caller.facts.qualname)
    return (caller, calls) if calls else (None, ())


def _add(
    region: Region, work: list, model: "FileModel", facts: FunctionFacts, owner: Optional[str], entry=None, context: Optional[Context] = None,
    within: _Path = (), via: tuple[Optional[RegionPart], tuple[CallRecord, ...]] = (None, ()),
) -> None:  # fmt: skip
    passed = None
    if entry is not None and not region.parts:
        positional, keywords = entry
        skip = 1 if facts.params[:1] == ("self",) else 0
        passed = frozenset(facts.params[skip : skip + positional]) | keywords
    part = RegionPart(model, facts, owner, passed, context, caller=via[0], calls=via[1])
    region.parts.append(part)
    self_class = owner or _method_class(facts)
    work.extend((model, module, context, within, self_class, True, part) for module in facts.module_calls)
    # A module a parameter holds (`functions[j](x)` over the blocks a helper is handed), as the project's calls show it.
    resolved = (model.value_in_region(part, callee) for callee in facts.symbolic_calls)
    work.extend((model, module, context, within, self_class, True, part) for module in resolved if isinstance(module, ModuleObject))
    work.extend((model, LocalFunction(name), context, within, self_class, True, part) for name in facts.method_calls)
    # Project functions it calls run in the region too (they hold no `self`: no module path).
    work.extend((model, Ref(name), context, within, None, True, part) for name in facts.function_calls)


def _add_hook(region: Region, work: list, model: "FileModel", registration: HookRegistration, hook: Value, on_entry: bool, at: _Path) -> None:
    """A hook's body runs where its module runs; the functions it calls run there too."""
    while isinstance(hook, Partial):
        hook = hook.func
    if isinstance(hook, Lambda):
        located: Optional[tuple["FileModel", FunctionFacts]] = (model, model.lambdas[id(hook.node)]) if id(hook.node) in model.lambdas else None
    elif isinstance(hook, (LocalFunction, Ref)):
        located = _function(model, hook.qualname)
    else:
        located = None
    if located is None:
        region.complete = False
        return
    owner, facts = located
    if any(part.facts is facts and part.hook is not None for part in region.parts):
        return  # one hook on every block of a loop: its body is read once
    self_class = _method_class(facts)
    region.parts.append(RegionPart(owner, facts, self_class, hook=registration, on_entry=on_entry, registered_in=model.path))
    # A method hook runs on the object that registered it, whose place is not known here.
    part = region.parts[-1]
    work.extend((owner, module, None, (), self_class, True, part) for module in facts.module_calls)
    work.extend((owner, LocalFunction(name), None, (), self_class, True, part) for name in facts.method_calls)
    work.extend((owner, Ref(name), None, (), None, True, part) for name in facts.function_calls)


def _method_class(facts: FunctionFacts) -> Optional[str]:
    return facts.qualname.rsplit(".", 1)[0] if facts.params[:1] == ("self",) else None


def _module_path(model: "FileModel", module: ModuleObject, within: _Path, owner_class: Optional[str]) -> _Path:
    """Where a module the region runs sits: its path from the object the running method belongs to
    (`self.fc` inside a block that sits at `blocks[]`: `blocks[].fc`), or from what it is spelled from."""
    if module.path and owner_class is not None and module.path[0][0] in model.index.ancestors(owner_class):
        return (*within, *module.path)
    return module.path


class _Hooks:
    """The module hooks registered in the site's file and in the files that import from it."""

    def __init__(self, model: "FileModel") -> None:
        self.model = model
        self._registered: Optional[list[tuple["FileModel", HookRegistration]]] = None

    def registered(self) -> list[tuple["FileModel", HookRegistration]]:
        if self._registered is None:
            self._registered = []
            module = self.model.module
            for summary, name in self.model.index.hook_registrars():
                if summary.name != module and not any(target == module or target.startswith(module + ".") for target in summary.imports.values()):
                    continue
                # The site's own file: its model (the cut keeps what registers hooks); others, their definitions.
                owner = self.model if summary.name == module else self.model.models(summary.name, f"{summary.name}.{name}" if name else summary.name)
                if owner is not None:
                    self._registered.extend((owner, registration) for registration in owner.hooks if not registration.removable)
        return self._registered

    def on(self, module: ModuleObject, at: _Path) -> Iterator[tuple["FileModel", HookRegistration, Value]]:
        """The hooks of `module`, which sits at module path `at`."""
        if not self.model.index.hook_registrars():
            return
        for owner, registration in self.registered():
            if registration.receiver is None or _same_module(self.model, registration, module, at):
                yield owner, registration, registration.hook


def _same_module(model: "FileModel", registration: HookRegistration, module: ModuleObject, at: _Path) -> bool:
    """Whether a hook registered on a module is on `module`: the same path (one the end of the other,
    as far as each is known), or, for a hook a class registers on itself, an instance of that class.
    A module held by a variable (`model = Net()`) has no path: which instance it is, is not known."""
    receiver = registration.receiver
    assert receiver is not None
    if receiver.container or module.container:
        return False  # a hook on a ModuleList never runs: the list is not called
    if registration.every_instance:
        return any(model.index.is_subclass(cls, frozenset(receiver.classes)) for cls in module.classes)
    if receiver.path and receiver.path[-1][1] == SUBMODULES:
        return _walked(model.index, receiver, module, at)
    if not receiver.path or not at:
        return False
    shorter = min(len(receiver.path), len(at))
    return receiver.path[-shorter:] == at[-shorter:]


def _walked(index: "ProjectIndex", receiver: ModuleObject, module: ModuleObject, at: _Path) -> bool:
    """Whether `module`, at `at`, is one a walk over an object's submodules (`model.modules()`) yields:
    of a class the registration tested for (any, untested), under the walked object's path, or, when
    that object is held by a variable, inside an object of its class."""
    if receiver.classes != (ANY_MODULE,):
        tested = frozenset(map(index.canonical, receiver.classes))
        if not any(index.is_subclass(cls, tested) for cls in module.classes):
            return False
    if not at:
        return False
    *prefix, (roots, _) = receiver.path
    if prefix:
        return any(at[i : i + len(prefix)] == tuple(prefix) for i in range(len(at) - len(prefix) + 1))
    return any(index.contains(root, at[0][0]) for root in roots.split("|"))


@dataclass(frozen=True)
class KeptArgument:
    """A value a region part hands to a method of an object it holds, which keeps it (`self.collector.add(loss)`)."""

    node: object  # the call
    method: str  # qualified
    container: str  # where the method keeps it, as spelled there (`self.losses`)
    kind: str  # ContainerMutation.method, or "attribute" for `self.last = loss`
    value: Value  # what is handed, as it is in the region


def kept_by_held_objects(model: "FileModel", part: RegionPart) -> Iterator[KeptArgument]:
    """The values the part hands to methods of objects its `self` holds that put their parameter
    into one of their own containers or attributes: those outlive the call as a container of the
    part's own would. The object's class comes from what its constructions pass (through holders'
    constructors); a method that is not found, or an object whose class is not known, keeps nothing
    known."""
    for call in part.facts.held_calls:
        receiver = model.value_in_region(part, call.receiver)
        if not isinstance(receiver, ModuleObject) or receiver.container or len(receiver.classes) != 1:
            continue
        owner = model.index.method_owner(receiver.classes[0], call.method)
        located = _function(model, f"{owner.qualname}.{call.method}") if owner is not None else None
        if located is None:
            continue
        facts = located[1]
        kept = [(m.container, m.method, m.stored) for m in facts.mutations if m.owner == "self"]
        kept += [(f"self.{store.attr}", "attribute", store.value) for store in facts.self_stores]
        positions = {name: index for index, name in enumerate(facts.params[1:])} if facts.params[:1] == ("self",) else {}
        for container, kind, stored in kept:
            position = positions.get(stored.name) if isinstance(stored, Param) and stored.function == facts.qualname else None
            if position is not None and position < len(call.arguments):
                yield KeptArgument(call.node, facts.qualname, container, kind, model.value_in_region(part, call.arguments[position]))


def _function(model: "FileModel", qualname: str) -> Optional[tuple["FileModel", FunctionFacts]]:
    module, _ = model.index.split(qualname)
    if module is None:
        return None
    owner = model.model_for(module.name, qualname)
    if owner is None or qualname not in owner.functions:
        return None
    return owner, owner.functions[qualname]

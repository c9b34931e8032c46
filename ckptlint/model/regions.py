"""The region of a checkpoint: every function the checkpointed callable runs, across files.

Built from facts the model already collected per function (RNG draws, side effects, container
mutations, submodule calls), so rules never walk a callee's body again.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Optional

from ckptlint.model.sites import FunctionFacts

from ckptlint.model.construction import Context, passed, resolve
from ckptlint.model.dataflow import held_module
from ckptlint.model.values import Const, Lambda, LocalFunction, ModuleObject, Partial, Ref, Value
from ckptlint.model.torch_knowledge import DROPOUT_MODULE_P, DROPOUT_MODULES

if TYPE_CHECKING:
    from ckptlint.model.file_model import FileModel

_MAX_FUNCTIONS = 64  # deep module trees: enough to see every layer type, bounded for speed


@dataclass
class RegionPart:
    model: "FileModel"  # the file the function lives in (for reporting there)
    facts: FunctionFacts
    owner_class: Optional[str] = None
    # Parameters of the checkpointed function that the call gives a value (None: not the entry).
    passed: Optional[frozenset[str]] = None
    # What the `__init__` that built the module running the function received, when known.
    context: Optional[Context] = None


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
    # Each function runs for a module instance whose `__init__` arguments may be known (a context).
    work: list[tuple["FileModel", Optional[Value], Optional[Context]]] = [(model, function, built_with)]
    while work and len(region.parts) < _MAX_FUNCTIONS:
        current, value, context = work.pop()
        if isinstance(value, Partial):
            work.append((current, value.func, context))
        elif isinstance(value, Lambda):
            facts = current.lambdas.get(id(value.node))
            if facts is not None:
                _add(region, work, current, facts, None, entry, context)
        elif isinstance(value, (LocalFunction, Ref)):
            if value.qualname not in seen:
                seen.add(value.qualname)
                located = _function(current, value.qualname)
                if located is None:
                    region.complete = False
                else:
                    _add(region, work, located[0], located[1], None, entry, context)
        elif isinstance(value, ModuleObject):
            arguments = dict(value.arguments) if value.arguments is not None else None
            for cls in value.classes:
                if cls in DROPOUT_MODULES:
                    if _draws(cls, arguments, context):
                        region.dropout_modules.append(cls)
                    continue
                inner = passed(current.index, cls, arguments, context) if arguments is not None else None
                key = (cls, tuple(sorted(inner.items())) if inner is not None else None)
                if key in seen:
                    continue
                seen.add(key)
                owner = current.index.forward_owner(cls)
                located = _function(current, f"{owner.qualname}.forward") if owner else None
                if located is None:
                    region.complete = region.complete and cls.startswith("torch.nn.")
                    continue
                _add(region, work, located[0], located[1], cls, entry, inner)
                # Submodules built in __init__ but called through helpers still run in the region.
                for name in current.index.ancestors(cls):
                    summary = current.index.class_(name)
                    for binding in summary.attrs.values() if summary else ():
                        work.append((located[0], held_module(current.index, binding, ""), inner))
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


def _add(region: Region, work: list, model: "FileModel", facts: FunctionFacts, owner: Optional[str], entry=None, context: Optional[Context] = None) -> None:
    passed = None
    if entry is not None and not region.parts:
        positional, keywords = entry
        skip = 1 if facts.params[:1] == ("self",) else 0
        passed = frozenset(facts.params[skip : skip + positional]) | keywords
    region.parts.append(RegionPart(model, facts, owner, passed, context))
    work.extend((model, module, context) for module in facts.module_calls)
    work.extend((model, LocalFunction(name), context) for name in facts.method_calls)


def _function(model: "FileModel", qualname: str) -> Optional[tuple["FileModel", FunctionFacts]]:
    module, _ = model.index.split(qualname)
    if module is None:
        return None
    owner = model.model_for(module.name, qualname)
    if owner is None or qualname not in owner.functions:
        return None
    return owner, owner.functions[qualname]

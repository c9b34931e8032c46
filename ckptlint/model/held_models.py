"""What a class's methods know on entry about the models its `__init__` leaves on `self`.

`__init__` runs before any other method, so a method starts from the mode and checkpointing that
`__init__` left on `self.<attr>` (a module it builds is in train mode; checkpointing it switches on
stays on), as long as nothing can change them in between. What can: another method setting a
different mode (`self.policy.eval()`, also through an alias or a wrapper of it), handing the model
or `self` to other code, assigning the attribute again, switching checkpointing off, code elsewhere
in the file switching `<obj>.<attr>`'s mode, and, for the mode, a holder that is a module or has
bases outside the project (a module's callers switch its mode, and its submodules' with it).
Methods run in any order, so this is decided once the class (and the file) is complete: a finding
that relied on what `__init__` left is dropped when something could have changed it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Optional, Union

from ckptlint.model.apis import LIGHTNING_MODULES
from ckptlint.model.model_states import keyed_state
from ckptlint.model.sites import CacheUse, GradFreeCall, ModelState
from ckptlint.model.torch_knowledge import MODULE_BASES

if TYPE_CHECKING:
    from ckptlint.model.builder import ModelBuilder
    from ckptlint.model.scope import Scope

Record = Union[CacheUse, GradFreeCall]
_PLAIN_BASES = frozenset({"builtins.object", "object"})


@dataclass
class _ClassEvents:
    """What the methods of one class do to the models on its attributes."""

    init_states: dict[str, ModelState] = field(default_factory=dict)  # as `__init__` leaves them
    init_aliases: dict[str, tuple[str, bool]] = field(default_factory=dict)
    modes_set: dict[str, set[Optional[bool]]] = field(default_factory=dict)  # outside `__init__`
    handed: set[str] = field(default_factory=set)
    reassigned: set[str] = field(default_factory=set)  # outside `__init__`
    disabled: set[str] = field(default_factory=set)  # checkpointing switched off outside `__init__`
    self_handed: bool = False


@dataclass(frozen=True, eq=False)
class _Pending:
    record: Record
    owner: str
    key: str
    relies_on_mode: bool
    relies_on_checkpointing: bool


class HeldModels:
    """Kept by the builder for one file."""

    def __init__(self) -> None:
        self.classes: dict[str, _ClassEvents] = {}
        self.pending: list[_Pending] = []
        # Attributes whose mode code outside their class switches (`trainer.policy.eval()`).
        self.switched_from_outside: set[str] = set()

    # --- events --------------------------------------------------------------------------------

    def note_mode(self, builder: "ModelBuilder", key: str, training: Optional[bool]) -> None:
        builder.scope.seeded_modes.discard(key)
        owner = _method_owner(builder) if key.startswith("self.") else None
        if owner is not None and owner[1] != "__init__":
            self._events(owner[0]).modes_set.setdefault(key, set()).add(training)

    def note_handed(self, builder: "ModelBuilder", key: str) -> None:
        owner = _method_owner(builder) if key.startswith("self.") else None
        if owner is not None:
            self._events(owner[0]).handed.add(key)

    def note_self_handed(self, builder: "ModelBuilder") -> None:
        owner = _method_owner(builder)
        if owner is not None:
            self._events(owner[0]).self_handed = True

    def note_assigned(self, builder: "ModelBuilder", key: str) -> None:
        owner = _method_owner(builder) if key.startswith("self.") else None
        if owner is not None and owner[1] != "__init__":
            self._events(owner[0]).reassigned.add(key)

    def note_disabled(self, builder: "ModelBuilder", key: str) -> None:
        owner = _method_owner(builder) if key.startswith("self.") else None
        if owner is not None and owner[1] != "__init__":
            self._events(owner[0]).disabled.add(key)

    def note_switched_from_outside(self, attr: str) -> None:
        self.switched_from_outside.add(attr)

    # --- method entry and exit -----------------------------------------------------------------

    def enter_method(self, builder: "ModelBuilder", scope: "Scope") -> None:
        """Start a method from what `__init__` left (walked before it, as classes are written)."""
        events = self.classes.get(scope.class_qualname) if scope.class_qualname else None
        if events is None or scope.method == "__init__":
            return
        plain = _plain_holder(builder, scope.class_qualname)
        for key, state in events.init_states.items():
            if state.training is not None and plain:
                scope.model_modes[key] = state.training
                scope.seeded_modes.add(key)
            if state.checkpointing is not None:
                scope.checkpointed_models[key] = state.checkpointing
                scope.seeded_checkpointing.add(key)
        scope.model_aliases.update(events.init_aliases)

    def leave_method(self, scope: "Scope") -> None:
        if scope.method != "__init__" or scope.class_qualname is None:
            return
        events = self._events(scope.class_qualname)
        for key in {*scope.model_modes, *scope.checkpointed_models}:
            if key.startswith("self."):
                events.init_states[key] = keyed_state(scope, key)
        events.init_aliases = {k: v for k, v in scope.model_aliases.items() if k.startswith("self.") and v[0].startswith("self.")}

    # --- findings that rely on the entry state ---------------------------------------------------

    def relies(self, builder: "ModelBuilder", key: str, record: Record, from_callers: bool = False) -> None:
        """`record` was made from the state of `key` here: keep it only if what `__init__` left holds
        (`from_callers`: the mode the constructor's callers hand over, which nothing here changes)."""
        scope = builder.scope
        mode = from_callers or key in scope.seeded_modes
        checkpointing = key in scope.seeded_checkpointing
        if (mode or checkpointing) and scope.class_qualname is not None:
            self.pending.append(_Pending(record, scope.class_qualname, key, mode, checkpointing))

    def finish_class(self, builder: "ModelBuilder", qualname: str) -> None:
        events = self.classes.get(qualname)
        if events is None:
            return
        for pending in [p for p in self.pending if p.owner == qualname]:
            if (pending.relies_on_mode and not _mode_holds(events, pending.key)) or (
                pending.relies_on_checkpointing and not _checkpointing_holds(events, pending.key)
            ):
                _drop(builder, pending)

    def finish_file(self, builder: "ModelBuilder") -> None:
        for pending in self.pending:
            if pending.relies_on_mode and pending.key.split(".", 1)[1] in self.switched_from_outside:
                _drop(builder, pending)

    def _events(self, qualname: str) -> _ClassEvents:
        return self.classes.setdefault(qualname, _ClassEvents())


def _mode_holds(events: _ClassEvents, key: str) -> bool:
    initial = events.init_states.get(key, ModelState()).training
    return (
        events.modes_set.get(key, set()) <= ({initial} if initial is not None else set())
        and key not in events.handed
        and key not in events.reassigned
        and not events.self_handed
    )


def _checkpointing_holds(events: _ClassEvents, key: str) -> bool:
    return not ({key} & (events.handed | events.reassigned | events.disabled)) and not events.self_handed


def _drop(builder: "ModelBuilder", pending: _Pending) -> None:
    records = builder.cache_uses if isinstance(pending.record, CacheUse) else builder.grad_free_calls
    if any(r is pending.record for r in records):
        records.remove(pending.record)


def _method_owner(builder: "ModelBuilder") -> Optional[tuple[str, str]]:
    """The class and method whose body (or a function nested in it) is being walked."""
    for scope in reversed(builder.scopes):
        if scope.kind == "class":
            return None
        if scope.kind == "function" and scope.class_qualname is not None:
            return scope.class_qualname, scope.method
    return None


def _plain_holder(builder: "ModelBuilder", qualname: str) -> bool:
    """A class that is no module and whose bases are all in the project: only its own code switches
    the modes of what it holds."""
    index = builder.index
    if index.is_subclass(qualname, MODULE_BASES | LIGHTNING_MODULES):
        return False
    return all(name in _PLAIN_BASES or index.class_(name) is not None for name in index.ancestors(qualname))

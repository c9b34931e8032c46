"""The builder's view of one scope while it walks: bindings, grad context, guards, and the
training-script facts it collects; and a call's arguments once partials and `**dicts` are merged."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional, Union

import libcst as cst

from ckptlint.model.loop_iterations import LoopFacts
from ckptlint.model.sites import FlagStatus, FunctionFacts, GradContext
from ckptlint.model.values import Value

# Marks on a scope's grad stack besides GradContext (grad disabled).
GRAD_ENABLED = "enabled"


GRAD_UNCHANGED = "unchanged"


GradMark = Union[GradContext, str]


@dataclass
class Scope:
    kind: str  # module | class | function | lambda
    qualname: str
    class_qualname: Optional[str] = None  # the class a method belongs to
    bindings: dict[str, Value] = field(default_factory=dict)
    grad: list[GradMark] = field(default_factory=list)
    branch_depth: int = 0
    conditional: int = 0  # inside an `if`: what happens here may not happen
    facts: Optional[FunctionFacts] = None
    params: frozenset[str] = frozenset()
    global_names: set[str] = field(default_factory=set)
    method: str = ""
    # Past an `if self.training: return ...`, or inside `if not self.training:`: never runs in training.
    eval_only: int = 0
    # Inside `if self.training:` (or past `if not self.training: return ...`): never runs in eval mode.
    training_only: int = 0
    # Inside `if torch.is_grad_enabled():`: what runs here never runs without grad.
    grad_guards: int = 0
    # The module flags (`self.<attr>`) the enclosing `if`s require; None when some condition is
    # not a conjunction of such flags, the mode and grad checks.
    gates: list[Optional[tuple[str, ...]]] = field(default_factory=list)
    # Training scripts: models with checkpointing on, the mode `.train()` / `.eval()` last set
    # (True: training), cache spellings seen.
    checkpointed_models: dict[str, cst.CSTNode] = field(default_factory=dict)
    model_modes: dict[str, bool] = field(default_factory=dict)
    # Module flags set on models since they were built (ModelState.flags).
    model_flags: dict[str, dict[str, Optional[bool]]] = field(default_factory=dict)
    # Keys whose mode code here may have changed (set, even under an `if`, or handed to other code):
    # a parameter not among them is in the mode its caller handed it over in.
    modes_touched: set[str] = field(default_factory=set)
    # Keys bound to the same module as another key (`m = model`, `accelerator.unwrap_model(self.policy)`):
    # key -> (the key its facts are recorded under, whether it is a distributed wrapper of that module).
    model_aliases: dict[str, tuple[str, bool]] = field(default_factory=dict)
    # In a method: the keys whose mode / checkpointing are still what `__init__` left (held_models).
    seeded_modes: set[str] = field(default_factory=set)
    # Locals that walk an object `self` holds (`for blk in self.consumers`): name -> that sequence,
    # as spelled. An attribute stored on one outlives the call.
    held_elements: dict[str, str] = field(default_factory=dict)
    seeded_checkpointing: set[str] = field(default_factory=set)
    trained_models: set[str] = field(default_factory=set)  # a Trainer's `train()` has returned
    # (model, where, kind, on its config) of caching spelled for a model (TrainingScriptFacts.spell_cache).
    cache_spellings: list[tuple[str, cst.CSTNode, str, bool]] = field(default_factory=list)
    # Parameters rebound as tensors by `name.requires_grad_(...)`, which returns the same object.
    in_place: dict[str, Value] = field(default_factory=dict)
    # Per enclosing `for` loop, innermost last: the names its body has assigned so far.
    loop_assigned: list[set[str]] = field(default_factory=list)
    loops: list[LoopFacts] = field(default_factory=list)  # the `for` loops being walked, innermost last

    def grad_disabled(self, maybe: bool = False) -> Optional[GradContext]:
        """What switches autograd off here; with `maybe`, also a switch that is off on some runs only."""
        for mark in reversed(self.grad):
            if isinstance(mark, GradContext):
                return mark if maybe or not mark.maybe else None
            if mark == GRAD_ENABLED:
                return None
        return None

    def grad_as_called(self) -> bool:
        """Nothing here switches grad on or off: code here runs with grad as the caller has it."""
        return all(mark == GRAD_UNCHANGED for mark in self.grad) and not self.grad_guards


@dataclass(frozen=True)
class CallArguments:
    """A call's arguments after merging functools.partial bindings and resolved `**dicts`."""

    positional: tuple[cst.Arg, ...]
    keywords: dict[str, tuple[Value, cst.CSTNode, FlagStatus]]
    has_star_args: bool
    unresolved_kwargs: bool
    spread: Optional[Value] = None  # the `**kwargs` it could not resolve

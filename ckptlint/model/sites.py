"""Records of the semantic model: values, modes and checkpoint sites."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Optional, Union

import libcst as cst

from ckptlint.versions import AssumedVersion


class ApiKind(enum.Enum):
    CHECKPOINT = "checkpoint"  # checkpoint(fn, *inputs)
    SEQUENTIAL = "checkpoint_sequential"  # checkpoint_sequential(functions, segments, input)
    MODULE_WRAPPER = "module_wrapper"  # checkpoint_wrapper(module)
    APPLY_WRAPPER = "apply_wrapper"  # apply_activation_checkpointing(model, ...)
    HF_FUNC = "hf_gradient_checkpointing_func"  # self._gradient_checkpointing_func(fn, *inputs)
    HF_ENABLE = "hf_enable"  # model.gradient_checkpointing_enable(...)
    HF_TRAINING_ARGS = "hf_training_arguments"  # TrainingArguments(gradient_checkpointing=True, ...)
    HF_LAYER_CALL = "hf_layer_call"  # a GradientCheckpointingLayer called in a forward
    PROJECT_WRAPPER = "project_wrapper"  # a wrapper named in `checkpoint-functions`

    @property
    def runs_checkpoint(self) -> bool:
        """The call itself executes a checkpointed region (rather than configuring one)."""
        return self in (ApiKind.CHECKPOINT, ApiKind.SEQUENTIAL, ApiKind.HF_FUNC, ApiKind.PROJECT_WRAPPER)


# --- values: what an expression may hold, as far as the analysis can tell -------------------


@dataclass(frozen=True)
class Unknown:
    pass


UNKNOWN = Unknown()


@dataclass(frozen=True)
class Const:
    value: Union[bool, int, float, str, None]


@dataclass(frozen=True, eq=False)
class DictLit:
    """A dict whose string keys are known; `complete` is False when `**other` may add keys."""

    entries: dict[str, "Value"]
    complete: bool
    node: cst.CSTNode


@dataclass(frozen=True)
class Ref:
    """An importable symbol or a module-level definition, by canonical qualified name."""

    qualname: str


@dataclass(frozen=True, eq=False)
class Partial:
    func: "Value"
    args: tuple[cst.Arg, ...]
    keywords: dict[str, "Value"]
    keyword_nodes: dict[str, cst.CSTNode]
    node: cst.CSTNode


@dataclass(frozen=True, eq=False)
class Lambda:
    node: cst.Lambda


@dataclass(frozen=True)
class ModuleObject:
    """An nn.Module instance; `classes` are the classes it may be (container elements included)."""

    classes: tuple[str, ...]
    origin: str  # how the code spells it, e.g. "self.block1"
    container: Optional[str] = None


@dataclass(frozen=True)
class Param:
    """A parameter of the enclosing function (a raw input when that function is a forward)."""

    name: str
    function: str


Value = Union[Unknown, Const, DictLit, Ref, Partial, Lambda, ModuleObject, Param]


def merge(a: Optional[Value], b: Value) -> Value:
    """Join of two possible values at a control-flow merge: equal or unknown."""
    if a is None or a is b or a == b:
        return b
    return UNKNOWN


# --- modes and sites ----------------------------------------------------------------------------


class FlagStatus(enum.Enum):
    EXPLICIT = "passed explicitly"
    BOUND = "bound by functools.partial"
    IN_KWARGS = "inside a resolved **kwargs dict"
    FIXED = "fixed by the API"
    ABSENT = "not passed"
    MAYBE = "may arrive through unresolved **kwargs"


@dataclass(frozen=True)
class Mode:
    """Effective `use_reentrant`: True, False or None (the analysis cannot tell)."""

    reentrant: Optional[bool]
    flag: FlagStatus
    reason: str
    # Where the mode is spelled (the keyword, the dict entry, the partial); None when implicit.
    node: Optional[cst.CSTNode] = None
    assumed: Optional[AssumedVersion] = None


@dataclass(frozen=True)
class GradContext:
    """Why autograd records nothing at a place: a `with` block, a decorator or a Lightning hook."""

    kind: str  # e.g. "torch.no_grad()", "@torch.inference_mode()", "Lightning validation_step"
    node: cst.CSTNode


@dataclass
class CheckpointSite:
    kind: ApiKind
    api_name: str  # how the tool names the API in messages, e.g. "torch.utils.checkpoint.checkpoint"
    call: cst.Call
    mode: Mode
    function: Optional[Value]  # the checkpointed callable (or module), when the API takes one
    inputs: tuple[cst.Arg, ...] = ()  # positional inputs after the callable
    keywords: tuple[cst.Arg, ...] = ()  # keyword arguments that reach the callable
    preserve_rng_state: Optional[bool] = True
    preserve_rng_node: Optional[cst.CSTNode] = None
    # For transformers enable calls / TrainingArguments: the kwargs dict as spelled.
    kwargs_value: Optional[Value] = None
    kwargs_node: Optional[cst.CSTNode] = None
    enclosing_function: Optional[str] = None
    enclosing_class: Optional[str] = None
    grad_disabled: Optional[GradContext] = None
    notes: list[str] = field(default_factory=list)

    @property
    def resolved(self) -> bool:
        return self.mode.reentrant is not None and (not self.kind.runs_checkpoint or not isinstance(self.function, Unknown))

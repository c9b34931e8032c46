"""Records of the semantic model: values, modes and checkpoint sites."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Optional, Union

from ckptlint.versions import AssumedVersion

if TYPE_CHECKING:
    import libcst as cst


def code(node: cst.CSTNode) -> str:
    """How the source spells a node: attribute chains directly, anything else by codegen."""
    import libcst as cst  # here, not at the top: the rules' records load without LibCST

    parts = []
    while isinstance(node, cst.Attribute) and not node.lpar:
        parts.append(node.attr.value)
        node = node.value
    if isinstance(node, cst.Name) and not node.lpar:
        parts.append(node.value)
        return ".".join(reversed(parts))
    return cst.Module(body=[]).code_for_node(node)


class Spelling:
    """A message fragment quoting code, rendered only when a finding prints it: codegen for every
    expression the dataflow passes through cost a tenth of the analysis."""

    __slots__ = ("template", "parts", "_text")

    def __init__(self, template: str, *parts: Union[cst.CSTNode, str, "Spelling"]) -> None:
        self.template, self.parts, self._text = template, parts, None

    def __str__(self) -> str:
        if self._text is None:
            self._text = self.template.format(*(str(p) if isinstance(p, (str, Spelling)) else code(p) for p in self.parts))
        return self._text

    def __format__(self, spec: str) -> str:
        return format(str(self), spec)

    def __eq__(self, other: object) -> bool:
        return str(self) == str(other) if isinstance(other, (str, Spelling)) else NotImplemented

    def __hash__(self) -> int:
        return hash(str(self))


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
    # Where each entry is spelled, so findings point at `"preserve_rng_state": False` itself.
    entry_nodes: dict[str, cst.CSTNode] = field(default_factory=dict)


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
    arg_values: tuple["Value", ...] = ()


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
    """A parameter of the enclosing function whose provenance is not known."""

    name: str
    function: str


@dataclass(frozen=True, eq=False)
class LocalFunction:
    """A function defined inside another one (a closure), or a method reached as `self.method`."""

    qualname: str
    node: Optional[cst.FunctionDef] = None


@dataclass(frozen=True)
class Items:
    """A tuple whose elements the analysis knows (what a forward returns as `return h, scores`)."""

    values: tuple["Value", ...]


@dataclass(frozen=True, eq=False)
class Instance:
    """An object returned by calling `ctor` (a model from `from_pretrained`, TrainingArguments, ...)."""

    ctor: str
    node: cst.Call


@dataclass(frozen=True)
class DataSource:
    """A DataLoader: iterating it yields batches that do not require grad."""

    origin: str


class Grad(enum.Enum):
    NONE = "cannot require grad"
    REQUIRED = "requires grad"
    UNKNOWN = "may require grad"  # a tensor, but whether it needs grad is not known


@dataclass(frozen=True)
class Tensor:
    """A tensor whose `requires_grad` the dataflow decided; `origin` explains why, for messages."""

    grad: Grad
    origin: Union[str, Spelling]
    # No grad because upstream parameters are frozen (CKPT005) rather than because it is data (CKPT001).
    frozen: bool = False


Value = Union[Unknown, Const, DictLit, Ref, Partial, Lambda, ModuleObject, Param, LocalFunction, DataSource, Tensor, Instance, Items]


def merge(a: Optional[Value], b: Value) -> Value:
    """Join of two possible values at a control-flow merge: equal or unknown."""
    if a is None or a is b or a == b:
        return b
    if isinstance(a, Tensor) and isinstance(b, Tensor) and a.grad is b.grad:
        return a
    return UNKNOWN


def join_grad(values: list[Value], origin: Union[str, Spelling]) -> Value:
    """requires_grad of an op's result: any input requiring grad makes it require grad."""
    tensors = [v for v in values if isinstance(v, Tensor)]
    if any(t.grad is Grad.REQUIRED for t in tensors):
        return Tensor(Grad.REQUIRED, origin)
    if not tensors or any(not isinstance(v, (Tensor, Const)) for v in values):
        return UNKNOWN
    return Tensor(Grad.NONE, tensors[0].origin, frozen=any(t.frozen for t in tensors))


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
    # What the inputs were when the call ran: the dataflow's verdict per positional input.
    input_values: tuple[Value, ...] = ()
    keyword_values: tuple[Value, ...] = ()
    has_star_args: bool = False
    # Values captured by a lambda or closure passed as the function: name -> value at the call.
    captured: dict[str, Value] = field(default_factory=dict)
    # Whether the checkpointed module owns parameters (None: unknown or not a module).
    callee_has_parameters: Optional[bool] = None
    # transformers enable calls: the model object the call configures.
    receiver: Optional[Value] = None

    @property
    def reentrant(self) -> bool:
        """Reentrant in effect: explicit True, omitted (torch default), deepspeed, a fallback dict."""
        return self.mode.reentrant is True

    @property
    def resolved(self) -> bool:
        return self.mode.reentrant is not None and (not self.kind.runs_checkpoint or not isinstance(self.function, Unknown))


@dataclass(frozen=True)
class Effect:
    """Something a function does that matters when it runs twice (forward and recompute)."""

    node: cst.CSTNode
    description: str
    source: str = ""  # for RNG draws: the generator module ("random", "numpy.random")


@dataclass(frozen=True)
class ContainerMutation:
    node: cst.CSTNode
    container: str  # as spelled: "cache", "self.router_logits"
    owner: str  # "self" | "param" | "outer" | "global"
    also_read: bool  # the function reads the container too
    # "append", "update", ... for lists and dicts, "item" for `c[k] = v`, "inplace" for `t.add_(...)`.
    method: str = ""
    stores_tensor: bool = False  # what goes in is a tensor computed here


@dataclass
class FunctionFacts:
    """Facts about one function body, collected in the same LibCST pass that finds the sites."""

    qualname: str
    params: tuple[str, ...] = ()  # in order, `self` included
    torch_rng: list[Effect] = field(default_factory=list)
    unreplayed_rng: list[Effect] = field(default_factory=list)
    self_stores: list[tuple[str, Effect, "Value"]] = field(default_factory=list)  # (attr, store, value)
    global_stores: list[Effect] = field(default_factory=list)
    mutations: list[ContainerMutation] = field(default_factory=list)
    self_reads: dict[str, int] = field(default_factory=dict)  # attr -> loads
    name_reads: dict[str, int] = field(default_factory=dict)
    module_calls: list[ModuleObject] = field(default_factory=list)
    method_calls: list[str] = field(default_factory=list)  # qualnames of self.<method>() calls
    returns: Optional["Value"] = None  # merged over every `return`
    # Generators this function reseeds with an explicit seed (`np.random.seed(self.seed)`): the
    # recompute then replays their draws.
    reseeds: set[str] = field(default_factory=set)


@dataclass(frozen=True)
class CacheUse:
    """`use_cache=True` or `past_key_values=` for a model whose gradient checkpointing is on."""

    node: cst.CSTNode
    kind: str  # "use_cache" | "past_key_values"
    model: str  # the variable, as spelled
    enabled_by: cst.CSTNode  # where checkpointing was switched on

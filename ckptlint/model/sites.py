"""Records of the semantic model: modes, checkpoint sites and per-function facts."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Optional, Union

from ckptlint.model.values import UNKNOWN, Const, ModuleObject, Unknown, Value
from ckptlint.versions import AssumedVersion

if TYPE_CHECKING:
    import libcst as cst

class ApiKind(enum.Enum):
    CHECKPOINT = "checkpoint"  # checkpoint(fn, *inputs)
    SEQUENTIAL = "checkpoint_sequential"  # checkpoint_sequential(functions, segments, input)
    MODULE_WRAPPER = "module_wrapper"  # checkpoint_wrapper(module)
    APPLY_WRAPPER = "apply_wrapper"  # apply_activation_checkpointing(model, ...)
    HF_FUNC = "hf_gradient_checkpointing_func"  # self._gradient_checkpointing_func(fn, *inputs)
    HF_ENABLE = "hf_enable"  # model.gradient_checkpointing_enable(...)
    HF_TRAINING_ARGS = "hf_training_arguments"  # TrainingArguments(gradient_checkpointing=True, ...)
    HF_LAYER_CALL = "hf_layer_call"  # a GradientCheckpointingLayer called in a forward
    WRAPPED_MODULE_CALL = "wrapped_module_call"  # a module torch.distributed's checkpoint_wrapper wraps, called
    PROJECT_WRAPPER = "project_wrapper"  # a wrapper named in `checkpoint-functions`

    @property
    def runs_checkpoint(self) -> bool:
        """The call itself executes a checkpointed region (rather than configuring one)."""
        return self in (ApiKind.CHECKPOINT, ApiKind.SEQUENTIAL, ApiKind.HF_FUNC, ApiKind.PROJECT_WRAPPER, ApiKind.WRAPPED_MODULE_CALL)


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
    # Off on some runs only (`torch.set_grad_enabled(phase == "train")`): enough for a model call
    # in an evaluation phase, never for a checkpoint spelled there.
    maybe: bool = False


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
    # `early_stop=` as passed (True, torch's default, when absent); None: not known.
    early_stop: Optional[bool] = True
    # Why the recompute does not replay torch's RNG when no `preserve_rng_state=False` says so.
    rng_not_replayed: Optional[str] = None
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
    # How every parameter of the checkpointed module is frozen, when it is a submodule the enclosing
    # class (or code holding it) freezes whole (`self.backbone` after `self.backbone.requires_grad_(False)`):
    # nothing inside can train, so nothing loses a gradient. None: not known to be frozen.
    callee_frozen: Optional[str] = None
    # What the `__init__` that built the checkpointed module received, as every known construction
    # of its class passes it (ckptlint/model/construction.py); None: not resolved.
    built_with: Optional[dict[str, Const]] = None
    # transformers enable calls: the model object the call configures. TrainingArguments: the model
    # a `Trainer` handed them trains, the function that builds that Trainer, and the flag's keyword.
    receiver: Optional[Value] = None
    # An enable call on a submodule of a variable (`model.bert.gradient_checkpointing_enable()`):
    # what the variable holds and the submodule's dotted path in it, where its freezing is recorded.
    receiver_holder: Optional[tuple[Value, str]] = None
    trainer_function: Optional[str] = None
    flag_node: Optional[cst.CSTNode] = None
    # `use_reentrant=<value>` when the value depends on a parameter (resolved from the callers).
    mode_value: Optional[Value] = None
    # `preserve_rng_state=<value>` likewise.
    preserve_rng_value: Optional[Value] = None
    # Values of `*args` among the inputs, and of a `**kwargs` the call spreads but the analysis
    # could not resolve where it was built.
    star_values: tuple[Value, ...] = ()
    spread_value: Optional[Value] = None
    # The checkpointed callable is what the enclosing function was handed (a parameter, or the
    # module itself in its `__call__`): the enclosing function is a checkpoint wrapper, and each call
    # of it is a site of its own, with the caller's arguments.
    forwarded: bool = False
    # Inside `if torch.is_grad_enabled():` (or `if x.requires_grad:`): it never runs without grad.
    grad_guarded: bool = False
    # For a call of a checkpoint wrapper: the wrapper run (its qualified name).
    wrapper: Optional[str] = None
    # Keywords whose tensor the enclosing loop computes afresh, earlier in the same iteration: each
    # one is read by this call alone, so a reentrant recompute walks its graph once (measured exact).
    fresh_keywords: frozenset[str] = frozenset()
    # Past an `if self.training: return ...` or inside `if not self.training:`: never runs in training.
    eval_only: bool = False
    # Inside `if self.training:` or past `if not self.training: return ...`: never runs in eval mode.
    training_only: bool = False
    # The module flags (`self.<attr>`) the enclosing `if`s require for the call to run (None: other
    # conditions too).
    gates: Optional[tuple[str, ...]] = ()

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
class SelfStore:
    """`self.<attr> = value` outside `__init__`."""

    attr: str
    effect: Effect
    value: "Value"
    # Nothing in the function reads the attribute before this store.
    fresh: bool = True
    # Every store of the attribute in the function is fresh and the function reads it back: a
    # scratch attribute, if nothing else reads it (the recompute overwrites it identically).
    scratch: bool = False


@dataclass(frozen=True)
class ContainerMutation:
    node: cst.CSTNode
    container: str  # as spelled: "cache", "self.router_logits"
    owner: str  # "self" | "param" | "outer" | "global"
    also_read: bool  # the function reads the container too
    # "append", "update", ... for lists and dicts, "item" for `c[k] = v`, "accumulate" for `c[k] += v`,
    # "inplace" for `t.add_(...)`.
    method: str = ""
    # What goes in, as the function's dataflow saw it (it may depend on the function's parameters:
    # the region binds them to what the calls running the function pass).
    stored: "Value" = UNKNOWN
    # The function's last effect: after it only inert statements run (shapes.last_effects), so
    # nothing it does afterwards can save a tensor for backward.
    last: bool = False


@dataclass(frozen=True)
class HeldCall:
    """`self.<attr>.method(args)`: a method of an object the function's `self` holds (a collector
    handed down through constructors), which may keep what it is handed."""

    node: cst.Call
    receiver: "Value"
    method: str
    arguments: tuple["Value", ...]  # positional, as the function's dataflow saw them


@dataclass
class FunctionFacts:
    """Facts about one function body, collected in the same LibCST pass that finds the sites."""

    qualname: str
    params: tuple[str, ...] = ()  # in order, `self` included (keyword-only ones last)
    keyword_only: tuple[str, ...] = ()
    star: Optional[str] = None  # `*args`
    star_star: Optional[str] = None  # `**kwargs`
    defaults: dict[str, "Value"] = field(default_factory=dict)
    torch_rng: list[Effect] = field(default_factory=list)
    unreplayed_rng: list[Effect] = field(default_factory=list)
    self_stores: list["SelfStore"] = field(default_factory=list)
    # `blk.scores = scores` on an element of `self.consumers`, `self.head.scores = s`: stores on an
    # object `self` holds, which outlives the call (the attr is the target as spelled).
    held_stores: list["SelfStore"] = field(default_factory=list)
    global_stores: list[Effect] = field(default_factory=list)
    mutations: list[ContainerMutation] = field(default_factory=list)
    held_calls: list[HeldCall] = field(default_factory=list)
    self_reads: dict[str, int] = field(default_factory=dict)  # attr -> loads
    name_reads: dict[str, int] = field(default_factory=dict)
    module_calls: list[ModuleObject] = field(default_factory=list)
    # Calls of a value that depends on parameters (`functions[j](x)` in a closure over a helper's
    # `functions`): modules once the callers are known.
    symbolic_calls: list["Value"] = field(default_factory=list)
    method_calls: list[str] = field(default_factory=list)  # qualnames of self.<method>() calls
    function_calls: list[str] = field(default_factory=list)  # qualnames of project functions called
    returns: Optional["Value"] = None  # merged over every `return`
    # Generators this function reseeds with an explicit seed (`np.random.seed(self.seed)`): the
    # recompute then replays their draws.
    reseeds: set[str] = field(default_factory=set)
    # Parameters the body runs as a module (`model(x)`, `model.forward(x)`) with grad and mode as its
    # caller left them: param -> the first such call.
    runs_params: dict[str, "cst.Call"] = field(default_factory=dict)
    # Parameters handed on, likewise untouched, to project functions: param -> those hand-offs.
    hands_params: dict[str, list["ModelHandOff"]] = field(default_factory=dict)


@dataclass(frozen=True, eq=False)
class HookRegistration:
    """`module.register_forward_hook(fn)` / `register_forward_pre_hook(fn)`, or torch's global
    `register_module_forward_hook(fn)`: `fn` runs wherever the module runs, in a checkpoint's
    recompute too."""

    node: cst.Call
    kind: str  # "forward" | "forward_pre"
    receiver: Optional[ModuleObject]  # None: every module (a global registration)
    hook: Value  # the hook as resolved: a function, method, lambda or partial
    # Its handle is kept and the file removes hooks (`handle.remove()`): it may be gone by training.
    removable: bool = False
    line: int = 0  # where a named function is (first) registered as a hook in this file; 0: not known
    # Registered by a class on itself (`self.register_forward_hook(...)`): on every instance of it.
    every_instance: bool = False


@dataclass(frozen=True)
class ModelState:
    """What a script knows about a model variable at one point: its mode, and where its transformers
    checkpointing was switched on."""

    training: Optional[bool] = None  # None: not known here
    checkpointing: Optional[cst.CSTNode] = None
    # Module flags set on it since it was built (`model.set_grad_checkpointing()`, `model.use_checkpoint
    # = True`): (attribute, value; None: not known), which override what its construction set.
    flags: tuple[tuple[str, Optional[bool]], ...] = ()


@dataclass(frozen=True, eq=False)
class CallRecord:
    """A call of a project function, method or module, with its arguments as the caller's dataflow
    saw them (values may still depend on the caller's own parameters)."""

    node: cst.CSTNode
    positional: tuple["Value", ...]  # up to a `*args` whose length is unknown
    keywords: dict[str, "Value"]
    keyword_nodes: dict[str, cst.CSTNode]
    star: bool  # a `*args` follows the known positional values
    spread: bool  # a `**kwargs` the analysis cannot resolve may pass any parameter
    bound: bool  # called on an instance: the callee's `self` is implicit
    caller: str  # the calling function (or module)
    # Models passed by name with a known mode or checkpointing: positional index or keyword -> state.
    states: dict[Union[int, str], ModelState] = field(default_factory=dict)
    constructs: Optional[str] = None  # the class a constructor call builds
    # The object a method of a dataclass-style class is called on (`cfg.ckpt.kwargs()`): its `self`.
    receiver: Optional["Value"] = None
    # A callback's event a Trainer calls (`on_step_end`): no call in the code spells it.
    event: Optional[str] = None


@dataclass(frozen=True, eq=False)
class ModelHandOff:
    """A model handed to project functions: the functions the call runs, the call, and where it
    passes the model (positional index or keyword)."""

    targets: tuple[str, ...]
    call: CallRecord
    key: Union[int, str]


@dataclass(frozen=True, eq=False)
class WrapperCall:
    """A call of a project function or module that checkpoints what it is handed."""

    target: str  # the wrapper function (or the module's checkpointing `__call__` / `forward`)
    call: CallRecord
    module: Optional[Value]  # the module called, for a checkpointing module
    grad_disabled: Optional[GradContext]
    enclosing_function: Optional[str]
    enclosing_class: Optional[str]
    # The conditions the call runs under, as for a checkpoint site (`CheckpointSite.grad_guarded`,
    # `eval_only`, `training_only`, `gates`): each site the call makes runs under them too.
    grad_guarded: bool = False
    eval_only: bool = False
    training_only: bool = False
    gates: Optional[tuple[str, ...]] = ()


@dataclass(frozen=True, eq=False)
class GradFreeCall:
    """A model called where autograd records nothing (`model(x)` under `torch.no_grad()`), as the
    enclosing function sees it."""

    node: cst.Call
    model: str  # the variable, as spelled
    value: Value  # what it holds (a module, or a parameter resolved from the callers)
    grad_disabled: GradContext
    state: ModelState
    function: Optional[str]  # the enclosing function
    # The enclosing function's parameter the model arrives as (its callers say which model it is).
    param: Optional[str] = None
    # For a call of a project function the model is handed to (`logprobs(model, batch)`): the
    # hand-off; the call counts if that function runs the model.
    handoff: Optional[ModelHandOff] = None
    # Code here sets (or may set) the model's mode: the callers' mode does not reach the call.
    mode_here: bool = False


@dataclass(frozen=True, eq=False)
class ParameterGenerate:
    """`model.generate(...)` on a parameter whose mode and checkpointing nothing in its function
    sets: its callers say whether it runs in train mode with checkpointing on (CKPT004)."""

    node: cst.CSTNode  # the `generate` call, or the cache keyword
    model: str  # the variable, as spelled
    function: str  # the enclosing function
    param: str  # the parameter the model arrives as
    kind: str = "generate"  # or "use_cache" / "past_key_values" for a forward's cache keyword (CacheUse.kind)


@dataclass(frozen=True)
class CacheUse:
    """`use_cache=True`, `past_key_values=` or `generate()` for a model whose gradient checkpointing is on
    (for `generate()`: and which is in train mode)."""

    node: cst.CSTNode
    kind: str  # "use_cache" | "past_key_values" | "generate"
    model: str  # the variable, as spelled
    enabled_by: cst.CSTNode  # where checkpointing was switched on
    # `generate()` after a Trainer's `train()` returned, which leaves the model training.
    after_trainer: bool = False
    # `generate()` on a parameter: the caller that hands the model over training with checkpointing
    # on, and its call, described.
    handed_by: str = ""

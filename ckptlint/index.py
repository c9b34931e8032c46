"""The project index: declarations of every linted module, from one cheap `ast` pass.

The expensive LibCST pass only runs on files that can hold checkpoint sites; to resolve a
`self.block` defined in another file it asks this index, which knows every module's imports,
classes (bases and the submodules `__init__` builds) and module-level aliases. Summaries are
plain data so that the result cache can store them as JSON.
"""

from __future__ import annotations

import ast
import contextlib
import hashlib
import json
import re
from dataclasses import dataclass, field, replace
from typing import Callable, Iterable, Iterator, Optional, Sequence, Union

from ckptlint.ast_nodes import CONSTANT_KEY, Literal, frozen_table, in_source_order, literal, nodes, table_freeze
from ckptlint.model.apis import (
    AUTOGRAD_FUNCTIONS,
    CHECKPOINT_WRAPPER,
    DEEP_COPIES,
    ENABLE_GRAD,
    HF_CHECKPOINT_FUNC_ATTR,
    HF_GC_LAYER,
    HF_TRAINERS,
    HF_TRAINING_ARGUMENTS,
    KNOWN_APIS,
    LIGHTNING_MODULES,
    NO_GRAD_CONTEXTS,
    PEFT_MODEL_CLASSES,
    PEFT_WRAPPERS,
    RNG_RESTORERS,
)
from ckptlint.model import lightning_callbacks as lightning
from ckptlint.model.construction import Context, object_fields, passed
from ckptlint.model.construction_tests import Decider, call_value, guarded, holds, switched
from ckptlint.model.lightning_callbacks import TRAINERS as LIGHTNING_TRAINERS, epoch_guard
from ckptlint.model.sites import ApiKind
from ckptlint.model.torch_knowledge import MODULE_BASES, MODULE_SELF_METHODS, PARAMETER_NAMES
from ckptlint.names import absolute_module, import_bindings, resolve_dotted
from ckptlint.registries import FILLING_METHODS, UNKNOWN_ENTRY, RegistryFacts, scan_registries
from ckptlint.mode_effects import LEAVES_MODE, MAY_CHANGE_MODE, ModeEffect, folded, mode_steps
from ckptlint.module_hooks import HookSignature, hook_functions, might_register_hooks
from ckptlint.site_text import SITE_TEXT, at_word_start
from ckptlint.syntax import check_future_imports
from ckptlint.wrapped_modules import ActivationWrap, activation_wraps, checkpoint_decorators, decorated_forwards

CONTAINERS = frozenset({"torch.nn.Sequential", "torch.nn.ModuleList", "torch.nn.ModuleDict"})
PARTIAL = frozenset({"functools.partial"})
PARAMETERS = frozenset({"torch.nn.Parameter", "torch.nn.parameter.Parameter"})


@dataclass
class AttrBinding:
    """What `self.<attr> = ...` (or a class-level assignment) can hold."""

    constructors: tuple[str, ...] = ()  # classes constructed, container elements included
    container: Optional[str] = None  # qualified container class, e.g. torch.nn.ModuleList
    constant: Optional[Literal] = None
    has_constant: bool = False
    is_lambda: bool = False
    is_buffer: bool = False  # registered with `self.register_buffer(name, ...)`
    parameter: Optional[bool] = None  # an `nn.Parameter`: whether it requires grad
    param: Optional[str] = None  # assigned straight from this `__init__` parameter (a held module)
    # With `param`: [literal, falsy] for `param or literal` (falsy True) or `literal if param is None
    # else param` (False): what the attribute holds when the parameter does not supply it.
    fallback: Optional[list] = None
    # The arguments of the one construction the attribute holds (`nn.Dropout(dropout)`, or each
    # element of `ModuleList([Block(dim, 0.0) for _ in ...])`), by keyword or "#<position>":
    # ["const", literal], ["param", name of an `__init__` parameter passed on], ["attr", parameter,
    # attribute] for an attribute of one (`config.dropout`) or ["?"]. None: no
    # single construction, or one whose arguments are spread (`*args`, `**kwargs`).
    arguments: Optional[dict[str, list]] = None
    # A checkpoint function held to be called (`functools.partial(checkpoint, use_reentrant=True)`).
    alias: Optional["Alias"] = None


@dataclass
class Alias:
    """Module-level `name = target` or `name = functools.partial(target, kw=literal, ...)`; a keyword
    bound to a module-level name holds {CONSTANT_KEY: its qualified name}."""

    target: str
    keywords: dict[str, Literal] = field(default_factory=dict)
    is_partial: bool = False


@dataclass
class Freeze:
    """Parameter freezing applied to a module object, by code run on it (its `__init__`, another of
    its methods, a helper it is handed to, a script holding it), in effect once that code has run."""

    everything: bool = False  # `self.requires_grad_(False)`, a loop over `.parameters()`
    attrs: tuple[str, ...] = ()  # frozen submodules: `self.embed.requires_grad_(False)`
    unfrozen: tuple[str, ...] = ()  # submodules turned back on
    # `enable_input_require_grads()` or a forward hook: the usual cure for reentrant + frozen inputs.
    input_grad_hook: bool = False
    line: int = 0
    path: str = ""
    # `disable_input_require_grads()` or `set_input_embeddings(...)` later: transformers' own hook is gone too.
    hook_undone: bool = False
    # Everything turned back on (`model.requires_grad_(True)`) before what `everything`/`attrs` say.
    thawed: bool = False
    # By parameter name, in order: [predicate, state] where the parameters whose name satisfies the
    # predicate become frozen (True), trainable (False) or either (None). Predicates are nested lists:
    # ["in", text], ["startswith", text], ["endswith", text], ["not", p], ["and"|"or", p, ...], ["unknown"].
    by_name: tuple[list, ...] = ()
    # `gradient_checkpointing_enable()` ran on it: a PEFT wrap after that registers the input-grad hook.
    checkpointing: bool = False
    # Wrapped by PEFT (`get_peft_model`): hooked only when `checkpointing` already held then.
    adapter_wrap: bool = False
    # The class of the model a PEFT wrapper holds ("" unknown): what transformers hooks depends on it.
    wrapped: str = ""
    # `attrs` and `unfrozen` by their whole dotted path from the object (`transformer.wte`,
    # `model.norm`; `get_input_embeddings()` for what that returns): which part of a library model.
    paths: tuple[str, ...] = ()
    unfrozen_paths: tuple[str, ...] = ()
    # transformers' `model.add_adapter(config)` ran: a later `gradient_checkpointing_enable()` hooks
    # the inputs (it checks `_hf_peft_config_loaded`); one that ran before did not.
    adapter_loaded: bool = False
    # Frozen by `BaseFinetuning.freeze(..., train_bn=True)`: BatchNorm layers inside stay trainable.
    norms_trainable: tuple[str, ...] = ()
    # Who froze it when that is not the code at `line` alone (a Lightning callback, and until when).
    note: str = ""
    # `gradient_checkpointing_disable()` ran on it after any enable: its checkpointing is off.
    checkpointing_off: bool = False

    def __bool__(self) -> bool:
        return (
            self.everything or bool(self.attrs or self.unfrozen or self.by_name or self.paths or self.unfrozen_paths) or self.input_grad_hook
            or self.hook_undone or self.thawed or self.checkpointing or self.adapter_wrap or self.adapter_loaded
        )

    def then(self, later: "Freeze") -> "Freeze":
        """This freezing followed by `later` on the same object."""
        reset = later.everything or later.thawed
        first = self if self.line else later
        return Freeze(
            later.everything or (self.everything and not later.thawed),
            tuple(dict.fromkeys([*(a for a in self.attrs if a not in later.unfrozen and not later.thawed), *later.attrs])),
            tuple(dict.fromkeys([*(a for a in self.unfrozen if a not in later.attrs and not reset), *later.unfrozen])),
            later.input_grad_hook or (self.input_grad_hook and not later.hook_undone) or (later.adapter_wrap and self.checkpointing)
            or (later.checkpointing and self.adapter_loaded),
            first.line,
            first.path,
            later.hook_undone or (self.hook_undone and not later.input_grad_hook),
            self.thawed or later.thawed,
            (*(() if reset else self.by_name), *later.by_name),
            (self.checkpointing and not later.checkpointing_off) or later.checkpointing,
            self.adapter_wrap or later.adapter_wrap,
            later.wrapped or self.wrapped,
            tuple(dict.fromkeys([*(p for p in self.paths if not later.thawed and not within(p, later.unfrozen_paths)), *later.paths])),
            tuple(dict.fromkeys([*(p for p in self.unfrozen_paths if not reset and not within(p, later.paths)), *later.unfrozen_paths])),
            self.adapter_loaded or later.adapter_loaded,
            norms_trainable=tuple(dict.fromkeys([
                *(a for a in self.norms_trainable if a not in later.unfrozen and a not in later.attrs and not later.thawed), *later.norms_trainable,
            ])),
            note=first.note,
            checkpointing_off=later.checkpointing_off or (self.checkpointing_off and not later.checkpointing),
        )

    def where(self, here: str) -> str:
        """Where the freezing is written, for a message in the file `here`: `line N`, or
        `path:N` when it is written in another file."""
        return f"line {self.line}" if self.path in ("", here) else f"{self.path}:{self.line}"

    def state_of(self, attr: str, parameter_names: Optional[tuple[str, ...]]) -> tuple[Optional[bool], bool]:
        """Whether the parameters of the submodule `attr` are frozen: True, False, or None when some
        may be and some not (or that cannot be told); and whether a name predicate decided it.
        `parameter_names`: the names of its parameters relative to it (`weight`, `bias`), None when unknown."""
        state: Optional[bool] = True if attr in self.attrs else self.everything and attr not in self.unfrozen
        by_name = False
        for predicate, becomes in self.by_name:
            matches = names_match(predicate, attr, parameter_names)
            if matches is None and becomes != state:
                state = None
            elif matches and becomes != state:
                state, by_name = becomes, True
        return state, by_name


@dataclass
class FreezeStep:
    """One thing done to a model object, in order: freezing written out where the object is held,
    or a call that may freeze it: a project function handed the object (`callee` qualified, `slot`
    the parameter's name or position) or a method called on it (`callee` ".name"); with `member`,
    handed or called on that submodule of it (`freeze(model.embed)`, `self.visual.lock()`)."""

    freeze: Optional[Freeze] = None
    callee: str = ""
    slot: str = ""
    member: str = ""
    # Run only when training starts at an epoch satisfying this (`if current_epoch == 5:` in a
    # Lightning callback's hook; see `lightning_callbacks.epoch_guard`).
    guard: Optional[list] = None
    # A Lightning `Trainer.fit` of the object: the callbacks the Trainer holds, as JSON
    # [[constructor, its arguments (`_call_arguments`)], ...] (callee ".fit").
    callbacks: str = ""
    # For a call: the name texts it passes (a literal list of strings, or a module-level name bound
    # to one), as JSON {position or keyword: [texts]}; a name predicate over the callee's parameter
    # (`any(p in name for p in patterns)`) is decided by them.
    arguments: str = ""
    # Run only for the constructions of the object's class that make this test true (see
    # ckptlint/model/construction_tests.py): `if freeze_embed:` in `__init__`.
    condition: Optional[list] = None
    # For a call: the literals it passes, as JSON {position or keyword: value}, "*" when it also
    # spreads arguments; a test on the callee's parameters (`if not trainable:`) is decided by them.
    passed: str = ""


def _with_texts(steps: list[FreezeStep], arguments: str, names: list[str]) -> list[FreezeStep]:
    """A function's steps on a parameter with the name texts a call passes bound into their
    predicates (`names`: the function's parameters, in order, for positional arguments)."""
    if not arguments:
        return steps
    passed = json.loads(arguments)
    texts = {name: passed[key] for position, name in enumerate(names) for key in (name, str(position)) if key in passed}
    return [
        replace(step, freeze=replace(step.freeze, by_name=tuple([bind_texts(p, texts), becomes] for p, becomes in step.freeze.by_name)))
        if step.freeze is not None and step.freeze.by_name else step
        for step in steps
    ]


def _projected(outer: Freeze, attr: str) -> Freeze:
    """What freezing `outer` of a holder does to the module it holds as `attr`: the whole of it
    (`attr` frozen as such), or the submodules its paths name below `attr`."""
    prefix = attr + "."
    frozen = tuple(p[len(prefix) :] for p in outer.paths if p.startswith(prefix))
    unfrozen = tuple(p[len(prefix) :] for p in outer.unfrozen_paths if p.startswith(prefix))
    everything = attr in outer.attrs and attr in outer.paths
    # Predicates on the holder's parameter names read on the part's (`model.wte.` -> `wte.`).
    by_name = tuple([_below(predicate, prefix), state] for predicate, state in outer.by_name if _concerns(predicate, prefix))
    if not (frozen or unfrozen or everything or by_name) or attr in outer.norms_trainable:
        return Freeze()  # nothing, or BatchNorm layers somewhere inside kept trainable
    return Freeze(
        by_name=by_name,
        everything=everything,
        attrs=tuple(dict.fromkeys(p.split(".", 1)[0] for p in frozen if "." not in p or p.split(".", 1)[1] in _PARAMETER_LEAVES)),
        unfrozen=tuple(dict.fromkeys(p.split(".", 1)[0] for p in unfrozen)),
        line=outer.line,
        path=outer.path,
        paths=frozen,
        unfrozen_paths=unfrozen,
        note=outer.note,
    )


def _below(predicate: list, prefix: str) -> list:
    """A predicate on a holder's parameter names, read on the names below `prefix` (a part's)."""
    kind = predicate[0]
    if kind in ("not", "and", "or"):
        return [kind, *(_below(p, prefix) for p in predicate[1:])]
    if kind == "startswith":
        text = predicate[1]
        if text.startswith(prefix):
            return ["startswith", text[len(prefix) :]]
        return _ALWAYS if prefix.startswith(text) else ["not", _ALWAYS]
    if kind == "in" and predicate[1] in prefix:
        return _ALWAYS
    return predicate if kind in ("in", "endswith") else _UNKNOWN


def _concerns(predicate: list, prefix: str) -> bool:
    """Whether a name predicate may hold for some name below `prefix`."""
    return _below(predicate, prefix) != ["not", _ALWAYS]


def _uncertain(freeze: Freeze) -> Freeze:
    """What `freeze` may or may not do (a step under a condition that cannot be decided): whatever
    it touches becomes unknown."""
    predicates = [["startswith", f"{a}."] for a in (*freeze.attrs, *freeze.unfrozen)] + [predicate for predicate, _ in freeze.by_name]
    if freeze.everything or freeze.thawed:
        predicates.append(_ALWAYS)
    return Freeze(by_name=tuple([predicate, None] for predicate in predicates))


def within(path: str, parts: Sequence[str]) -> bool:
    """Whether the submodule at dotted `path` is one of `parts` or inside one."""
    return any(path == part or path.startswith(part + ".") for part in parts)


def names_match(predicate: list, attr: str, parameter_names: Optional[tuple[str, ...]]) -> Optional[bool]:
    """Whether every parameter of the submodule `attr` satisfies a name predicate (True), none does
    (False), or it cannot be told (None)."""
    kind = predicate[0]
    if kind == "not":
        inner = names_match(predicate[1], attr, parameter_names)
        return None if inner is None else not inner
    if kind in ("and", "or"):
        parts = [names_match(p, attr, parameter_names) for p in predicate[1:]]
        decisive = kind == "or"  # True decides an `or`, False an `and`
        if decisive in parts:
            return decisive
        return None if None in parts else not decisive
    if kind not in ("in", "startswith", "endswith"):
        return None
    text, prefix = predicate[1], f"{attr}."
    # Decided by the prefix every parameter name of the submodule shares.
    if kind == "in" and text in prefix or kind == "startswith" and prefix.startswith(text):
        return True
    if kind == "startswith" and not text.startswith(prefix):
        return False
    if parameter_names is None:
        return None
    verdicts = {_matches(kind, text, prefix + name) for name in parameter_names}
    return verdicts.pop() if len(verdicts) == 1 else None


def _matches(kind: str, text: str, name: str) -> bool:
    return text in name if kind == "in" else name.startswith(text) if kind == "startswith" else name.endswith(text)


@dataclass
class Member:
    """A method in a class body, for parsing only the methods a checkpoint can reach."""

    __slots__ = ("name", "start", "end", "attrs", "self_stores", "stashes")

    name: str
    start: int  # first line, decorators included
    end: int
    # Names as one space-separated string each: a tuple of strings per statement cost 70 MB on transformers.
    attrs: str  # attribute names it reads (`x.name`)
    self_stores: str  # `self.name = ...`
    stashes: bool  # stores an attribute on another module (state a checkpointed module may read)


@dataclass
class Block:
    """A top-level statement: its lines, the module-level names it binds and the ones it reads."""

    __slots__ = ("start", "end", "definition", "binds", "refs", "attrs", "stashes", "members")

    start: int  # first line, decorators included
    end: int
    definition: bool  # a class or function: LibCST may leave it out when nothing needs it
    binds: str  # space-separated, like all the names here
    refs: str
    attrs: str  # attribute names read (in a class: outside its methods, which have their own)
    stashes: bool
    members: list[Member]


@dataclass
class ClassSummary:
    qualname: str
    bases: tuple[str, ...]
    attrs: dict[str, AttrBinding]
    methods: tuple[str, ...]
    forward_no_grad: bool = False  # `@torch.no_grad()` on forward: outputs never require grad
    # A hand-written checkpoint: a torch.autograd.Function whose forward runs a callable it is
    # handed under no_grad and whose backward re-runs it under enable_grad. (Where `apply` takes the
    # callable, where the inputs start, whether backward restores torch's RNG state.)
    recompute: Optional[tuple[int, int, bool]] = None
    # `__init__`'s parameters after `self`, in order (None: the class defines no `__init__`), and
    # the literal defaults among them.
    init_params: Optional[tuple[str, ...]] = None
    init_defaults: dict[str, Literal] = field(default_factory=dict)
    # Methods (not `__init__`) that set module flags on every path (`def set_grad_checkpointing(self,
    # enable=True): self.grad_checkpointing = enable`): method -> {attr: ["const", bool] or ["param",
    # name, position after self, [default] or []]}, the last assignment of each attribute.
    flag_setters: dict[str, dict[str, list]] = field(default_factory=dict)
    # `forward` returns a list or tuple of tensors of no fixed length (`return tuple(outs)` of a list
    # it appends to, a list comprehension): a backbone's features.
    forward_returns_sequence: bool = False


@dataclass
class ModuleSummary:
    name: str
    path: str
    is_package: bool
    imports: dict[str, str]
    classes: dict[str, ClassSummary]
    functions: tuple[str, ...]
    aliases: dict[str, Alias]
    # What is done to objects where they are built, in order: instance_key(top-level function, constructor) -> steps.
    instance_freezes: dict[str, list[FreezeStep]] = field(default_factory=dict)
    # What a function or method ("Class.method") does to the objects its parameters hold, for the
    # functions that may freeze one: its positional parameters in order (those with no step too),
    # then keyword-only ones, each with its steps.
    param_freezes: dict[str, dict[str, list[FreezeStep]]] = field(default_factory=dict)
    # transformers checkpointing switched on here: (line, use_reentrant or None for the library default).
    hf_enables: list[tuple[int, Optional[bool]]] = field(default_factory=list)
    # Classes built or passed around by helper functions (`return Block(...)`, registries): submodules.
    factory_built: tuple[str, ...] = ()
    # Modules wrapped here by torch.distributed's checkpoint wrappers: each call of one is a site.
    activation_wraps: list[ActivationWrap] = field(default_factory=list)
    # Calls that hand a function's own callable on (`checkpoint(fn, *args)` in `def run(fn, *args)`):
    # function or "Class.method" -> [callee as spelled (qualified), what is handed: "param:NAME",
    # "self" (the module itself) or "self.ATTR"]. The index decides which are checkpoint wrappers.
    forwarding: dict[str, list[list[str]]] = field(default_factory=dict)
    # Classes shown to be a whole model here (`is_top_level_model`): built by script code (module
    # level, a `main()`, a training function) and bound to a name, or loaded with `from_pretrained`.
    models: tuple[str, ...] = ()
    # Script code here trains a model it is handed (a loss's `.backward()`, an optimizer, a `Trainer`,
    # `.fit`): this module's own classes that nothing builds as submodules are such models.
    trains: bool = False
    blocks: list[Block] = field(default_factory=list)
    # Top-level functions that return an object they build (`def build_model(): model = Net(); ...;
    # return model`): function -> that object's constructor (its steps: instance_key(function, ctor)).
    builders: dict[str, str] = field(default_factory=dict)
    # Top-level functions that return a model built with caching switched on (`use_cache=True` in its
    # constructor or `from_pretrained`, or `model.config.use_cache = True` before `return model`).
    cache_builders: tuple[str, ...] = ()
    # Registries of classes defined or filled here (ckptlint/registries.py).
    registry_facts: RegistryFacts = field(default_factory=RegistryFacts)
    # Functions registered here as module hooks (qualified name -> how torch calls them), and the
    # top-level statements that register hooks (the name they define; "" for module-level code).
    hook_functions: dict[str, HookSignature] = field(default_factory=dict)
    hook_registrars: tuple[str, ...] = ()
    # What functions and methods ("Class.method") do to the mode of the modules their parameters
    # hold (ckptlint/mode_effects.py), for those that do something or return a parameter:
    # {"params": positional parameters in order, "steps": {param: steps}, "returns": param or None}.
    mode_steps: dict[str, dict] = field(default_factory=dict)
    # The module's text may hold a checkpoint site (ckptlint/site_text.py).
    checkpoint_text: bool = False
    # What script code here passes each class it builds (`Lit(use_checkpoint=True)`): qualified name ->
    # the arguments of each construction (`AttrBinding.arguments`; None: spread). A model whose own
    # construction is not in view (`self` in a Lightning step) holds what they agree on
    # (`ProjectIndex.construction_context`).
    constructions: dict[str, list[Optional[dict[str, list]]]] = field(default_factory=dict)
    # Module-level names bound once to a literal (a number, string, bool, None, or a dict, list or
    # tuple of them) that nothing here changes: other modules read them (`settings.USE_REENTRANT`).
    constants: dict[str, object] = field(default_factory=dict)
    # Attributes of other modules assigned here, by qualified name: not constants there.
    module_stores: tuple[str, ...] = ()
    # Builders (`builders`) whose object is built right by a constructor call that hands on their
    # parameters: [the function's parameters, their literal defaults, what the call passes
    # (`AttrBinding.arguments`, the function's parameters as "param")].
    builder_calls: dict[str, list] = field(default_factory=dict)
    # Decorators defined here that run the function they wrap with grad off (`def no_grad_eval(fn):
    # def wrapper(*a, **k): with torch.no_grad(): return fn(*a, **k)`; `return wrapper`).
    grad_off_decorators: tuple[str, ...] = ()
    # Functions that return the closure they define (`create_custom_forward`).
    closure_factories: tuple[str, ...] = ()
    # [class, helper of another module] for `model = helper(Net())`: a whole model if the helper
    # returns what it is handed, else (maybe) a part of what it returns.
    handed_models: list[list[str]] = field(default_factory=list)
    # Builders whose object is a container built right in the returned call (`return
    # nn.Sequential(nn.Linear(...), nn.Dropout(p))`): the classes it holds.
    builder_contents: dict[str, list[str]] = field(default_factory=dict)
    # Decorators defined here that checkpoint what they decorate, and the classes here whose `forward`
    # is decorated (`wrapped_modules.checkpoint_decorators`, `wrapped_modules.decorated_forwards`).
    checkpoint_decorators: dict[str, dict] = field(default_factory=dict)
    decorated_forwards: list[dict] = field(default_factory=list)
    # Top-level functions that return one of a registry's classes (`return MODELS[name](**kw)`):
    # function -> the registry's qualified name.
    registry_builders: dict[str, str] = field(default_factory=dict)
    digest: str = field(default="", compare=False)

    def to_json_text(self) -> str:
        """The summary as JSON, its digest included. Dataclasses inside are encoded as the encoder
        meets them (copying the whole summary to plain dicts first was a tenth of the index pass)."""
        data = {name: getattr(self, name) for name in self.__dataclass_fields__ if name != "digest"}
        # The digest covers declarations, not positions: an edit that only moves lines keeps other
        # files' cached results (a result that cites another file's line depends on that file instead).
        declarations = {k: v for k, v in data.items() if k != "blocks"}
        declarations["hf_enables"] = [reentrant for _, reentrant in self.hf_enables]
        positionless = _LINE_FIELD.sub('"line": 0', json.dumps(declarations, sort_keys=True, default=_fields))
        # Computed once per file version and cached with the summary: the warm path never re-serialises.
        data["digest"] = hashlib.blake2b(positionless.encode(), digest_size=16).hexdigest()
        return json.dumps(data, default=_fields)

    @classmethod
    def from_json(cls, data: dict) -> "ModuleSummary":
        classes = {
            name: ClassSummary(
                qualname=c["qualname"],
                bases=tuple(c["bases"]),
                attrs={a: AttrBinding(**{**b, "constructors": tuple(b["constructors"]), "alias": Alias(**b["alias"]) if b["alias"] else None}) for a, b in c["attrs"].items()},
                methods=tuple(c["methods"]),
                forward_no_grad=c["forward_no_grad"],
                recompute=tuple(c["recompute"]) if c["recompute"] else None,
                init_params=tuple(c["init_params"]) if c["init_params"] is not None else None,
                init_defaults=c["init_defaults"],
                flag_setters=c["flag_setters"],
                forward_returns_sequence=c.get("forward_returns_sequence", False),
            )
            for name, c in data["classes"].items()
        }
        summary = cls(
            name=data["name"],
            path=data["path"],
            is_package=data["is_package"],
            imports=data["imports"],
            classes=classes,
            functions=tuple(data["functions"]),
            aliases={n: Alias(**a) for n, a in data["aliases"].items()},
            instance_freezes={n: _steps_from_json(steps) for n, steps in data["instance_freezes"].items()},
            param_freezes={f: {p: _steps_from_json(steps) for p, steps in params.items()} for f, params in data["param_freezes"].items()},
            hf_enables=[tuple(e) for e in data["hf_enables"]],
            factory_built=tuple(data["factory_built"]),
            activation_wraps=[ActivationWrap(**{**w, "classes": tuple(w["classes"])}) for w in data["activation_wraps"]],
            forwarding=data["forwarding"],
            models=tuple(data["models"]),
            trains=data["trains"],
            builders=data["builders"],
            registry_builders=data["registry_builders"],
            builder_calls=data["builder_calls"],
            grad_off_decorators=tuple(data["grad_off_decorators"]),
            builder_contents=data["builder_contents"],
            handed_models=data["handed_models"],
            closure_factories=tuple(data["closure_factories"]),
            checkpoint_decorators=data["checkpoint_decorators"],
            decorated_forwards=data["decorated_forwards"],
            cache_builders=tuple(data["cache_builders"]),
            registry_facts=RegistryFacts(**data["registry_facts"]),
            hook_functions={name: HookSignature(**hook) for name, hook in data["hook_functions"].items()},
            hook_registrars=tuple(data["hook_registrars"]),
            mode_steps=data["mode_steps"],
            checkpoint_text=data["checkpoint_text"],
            constructions=data["constructions"],
            constants=data["constants"],
            module_stores=tuple(data["module_stores"]),
            blocks=[
                Block(
                    b["start"], b["end"], b["definition"], b["binds"], b["refs"], b["attrs"], b["stashes"],
                    [Member(m["name"], m["start"], m["end"], m["attrs"], m["self_stores"], m["stashes"]) for m in b["members"]],
                )
                for b in data["blocks"]
            ],
        )
        summary.digest = data["digest"]
        return summary


def _fields(value: object) -> dict:
    """A dataclass as JSON sees it (`json.dumps(default=...)`)."""
    fields = getattr(value, "__dataclass_fields__", None)
    if fields is None:
        raise TypeError(f"not JSON: {type(value).__name__}")
    return {name: getattr(value, name) for name in fields}


# A position in the JSON of a summary (a `line` key holds one; escaped quotes inside strings never match).
_LINE_FIELD = re.compile(r'"line": (?:-?\d+|null)')


_RETURNED = "<returned>"


def _returning_a_name(body: list[ast.stmt]) -> list[ast.stmt]:
    """`return get_peft_model(model, config)` read as `<returned> = get_peft_model(model, config);
    return <returned>`: what a builder returns is one object however the return is written."""
    last = body[-1] if body else None
    if not (isinstance(last, ast.Return) and isinstance(last.value, ast.Call)):
        return body
    target = ast.copy_location(ast.Name(_RETURNED, ast.Store()), last)
    assign = ast.copy_location(ast.Assign([target], last.value), last)
    assign.end_lineno, assign.end_col_offset = last.end_lineno, last.end_col_offset
    returned = ast.copy_location(ast.Return(ast.copy_location(ast.Name(_RETURNED, ast.Load()), last)), last)
    returned.end_lineno, returned.end_col_offset = last.end_lineno, last.end_col_offset
    return [*body[:-1], assign, returned]


def _returned_name(body: list[ast.stmt]) -> Optional[str]:
    """The name a function body ends by returning (`return model`)."""
    last = body[-1] if body else None
    return last.value.id if isinstance(last, ast.Return) and isinstance(last.value, ast.Name) else None


def _built_as(body: list[ast.stmt], name: str) -> Optional[ast.expr]:
    """The value `name` is last bound to by a plain top-level assignment of the body."""
    value = None
    for stmt in body:
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name) and stmt.targets[0].id == name:
            value = stmt.value
    return value


def _returns_cached_model(body: list[ast.stmt], returned: Optional[str], made: Optional[ast.expr]) -> bool:
    """Whether a function body returns a model built with `use_cache=True` (a literal), or whose
    `config.use_cache` it sets to True before returning it, without switching its checkpointing on
    itself (then the function's own analysis reports the setting, where it is written)."""
    last = body[-1] if body else None
    built = made if returned else last.value if isinstance(last, ast.Return) else None
    cached = isinstance(built, ast.Call) and any(k.arg == "use_cache" and literal(k.value) == (True, True) for k in built.keywords)
    cached = cached or returned is not None and any(
        isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and _is_cache_setting(stmt.targets[0], returned) and literal(stmt.value) == (True, True)
        for stmt in body
    )
    return cached and not (returned is not None and any(_enables_checkpointing_on(node, returned) for stmt in body for node in ast.walk(stmt)))


def _enables_checkpointing_on(node: ast.AST, name: str) -> bool:
    """`<name>.gradient_checkpointing_enable(...)`."""
    func = node.func if isinstance(node, ast.Call) else None
    return isinstance(func, ast.Attribute) and func.attr == "gradient_checkpointing_enable" and isinstance(func.value, ast.Name) and func.value.id == name


def _is_cache_setting(target: ast.expr, name: str) -> bool:
    """`<name>.config.use_cache` (checked by shape: this runs for every statement of a builder)."""
    config = target.value if isinstance(target, ast.Attribute) and target.attr == "use_cache" else None
    owner = config.value if isinstance(config, ast.Attribute) and config.attr == "config" else None
    return isinstance(owner, ast.Name) and owner.id == name


DATACLASS_FIELDS = frozenset({"dataclasses.field", "pydantic.Field", "attr.ib", "attrs.field"})
# The slot of a FreezeStep on the object a project builder returns (`self.embed = frozen_table(...)`).
RETURNED = "<returned>"


def instance_key(function: str, ctor: str) -> str:
    """Freezing is per function: the same class frozen in one script function and not in another."""
    return f"{function}|{ctor}"


def _freeze_from_json(data: dict) -> Freeze:
    lists = ("attrs", "unfrozen", "by_name", "paths", "unfrozen_paths", "norms_trainable")
    return Freeze(**{**data, **{key: tuple(data[key]) for key in lists}})


def _steps_from_json(data: list[dict]) -> list[FreezeStep]:
    return [
        FreezeStep(_freeze_from_json(d["freeze"]) if d["freeze"] is not None else None, d["callee"], d["slot"], d["member"], d["guard"], d["callbacks"], d["arguments"], d["condition"], d["passed"])
        for d in data
    ]


def dotted(node: ast.AST) -> Optional[str]:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = dotted(node.value)
        return f"{base}.{node.attr}" if base else None
    return None


class _Summarizer:
    def __init__(self, module: str, is_package: bool) -> None:
        self.module = module
        self.is_package = is_package
        self.imports: dict[str, str] = {}
        self.local_names: set[str] = set()
        self.trains = False
        # Names a subscript store, `update` or `setdefault` changes anywhere in the module (ckptlint/registries.py).
        self.filled: set[str] = set()
        # Attributes of imported modules this module assigns (`settings.USE_REENTRANT = args.reentrant`).
        self.module_stores: set[str] = set()

    def qualify(self, node: ast.AST) -> Optional[str]:
        name = dotted(node)
        if name is None:
            return None
        head = name.split(".", 1)[0]
        if head in self.local_names and head not in self.imports:
            return f"{self.module}.{name}"
        return resolve_dotted(name, self.imports)

    def bind_imports(self, node: Union[ast.Import, ast.ImportFrom]) -> None:
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    self.imports[alias.asname] = alias.name
                else:
                    self.imports.update(import_bindings(alias.name))
            return
        base = absolute_module(self.module, self.is_package, node.level, node.module)
        if base is None:
            return
        for alias in node.names:
            if alias.name != "*":
                self.imports[alias.asname or alias.name] = f"{base}.{alias.name}"

    def summarize(self, tree: ast.Module, path: str, source: str) -> ModuleSummary:
        # Functions of this module that hand back the object they are given (`def freeze(m): ...; return m`),
        # and its functions and plain classes (a model built right in a call of one is a whole model).
        self.pass_through: set[str] = set()
        self.handed_models: list[list[str]] = []
        # Module-level names bound to a literal list or tuple (`FROZEN = ["embed"]`).
        self.module_lists: dict[str, ast.expr] = {
            stmt.targets[0].id: stmt.value for stmt in tree.body
            if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name) and isinstance(stmt.value, (ast.List, ast.Tuple))
        }  # fmt: skip
        self.whole_model_takers: set[str] = set()
        for stmt in _module_level(tree.body):
            if isinstance(stmt, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                self.local_names.add(stmt.name)
                if not isinstance(stmt, ast.ClassDef) or all(isinstance(b, ast.Name) and b.id == "object" for b in stmt.bases):
                    self.whole_model_takers.add(f"{self.module}.{stmt.name}")  # plain classes run what they are handed
                if not isinstance(stmt, ast.ClassDef) and _returns_first_param(stmt):
                    self.pass_through.add(f"{self.module}.{stmt.name}")
            elif isinstance(stmt, (ast.Import, ast.ImportFrom)):
                self.bind_imports(stmt)
        self.lines = source.replace("\r\n", "\n").replace("\r", "\n").split("\n")
        # Lightning's BaseFinetuning under the names this module imports it as, and this module's subclasses of it.
        self.finetuning_receivers = frozenset(name for name, target in self.imports.items() if target in lightning.BASE_FINETUNING)
        self.finetuning_classes: set[str] = set()
        # Module-level functions by name (a helper returning a Trainer's callbacks).
        self.function_nodes = {s.name: s for s in _module_level(tree.body) if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef))}
        classes: dict[str, ClassSummary] = {}
        functions: list[str] = []
        aliases: dict[str, Alias] = {}
        self.path = path
        self.instance_freezes: dict[str, list[FreezeStep]] = {}
        self.param_freezes: dict[str, dict[str, list[FreezeStep]]] = {}
        self.builders: dict[str, str] = {}
        self.registry_builders: dict[str, str] = {}
        self.builder_calls: dict[str, list] = {}
        self.builder_contents: dict[str, list[str]] = {}
        self.closure_factories: list[str] = []
        self.cache_builders: list[str] = []
        self.constructions: dict[str, list[Optional[dict[str, list]]]] = {}
        for stmt in _module_level(tree.body):
            if isinstance(stmt, ast.ClassDef):
                classes[stmt.name] = self.summarize_class(stmt)
            elif isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
                functions.append(stmt.name)
                self.collect_object_steps(stmt.body, stmt.name, _ordered_params(stmt))
            elif isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
                alias = self.alias(stmt.value)
                if alias is not None:
                    aliases[stmt.targets[0].id] = alias
        self.collect_object_steps([s for s in tree.body if not isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))], "", ())
        self.forwarding: dict[str, list[list[str]]] = {}
        blocks, built, models = self.scan(tree)
        enables = hf_enables(tree) if might_switch_hf_checkpointing(source) else []
        wraps = activation_wraps(tree, self.qualify, self.module) if "checkpoint_wrapper" in source or "apply_activation_checkpointing" in source else []
        hooks, registrars = hook_functions(tree, self.qualify, self.module) if might_register_hooks(source) else ({}, ())
        return ModuleSummary(
            self.module, path, self.is_package, dict(self.imports), classes, tuple(functions), aliases, self.instance_freezes,
            self.param_freezes, enables, built, wraps, self.forwarding, models, self.trains, blocks, self.builders,
            tuple(self.cache_builders),
            scan_registries(self.module, tree, self.filled, set(self.imports), self.qualify, lambda node: _project_name(self, node)),
            hooks, registrars, self.mode_steps(tree), SITE_TEXT.search(source) is not None, self.constructions,
            _constants(tree, source, self.filled), tuple(sorted(self.module_stores)), self.builder_calls,
            self.grad_off_decorators(tree) if "no_grad" in source or "inference_mode" in source else (),
            builder_contents=self.builder_contents,
            registry_builders=self.registry_builders,
            handed_models=self.handed_models,
            closure_factories=tuple(self.closure_factories),
            checkpoint_decorators=checkpoint_decorators(tree, self.qualify) if "checkpoint" in source else {},
            decorated_forwards=decorated_forwards(tree, self.qualify, self.module),
        )

    def grad_off_decorators(self, tree: ast.Module) -> tuple[str, ...]:
        """`ModuleSummary.grad_off_decorators`: module-level `def deco(fn)` returning a function it
        defines that calls `fn` inside `with torch.no_grad():` (or is itself decorated with it)."""
        found = []
        for function in _module_level(tree.body):
            if not isinstance(function, ast.FunctionDef) or not function.args.args:
                continue
            wrapped = function.args.args[0].arg
            returned = _returned_name(function.body)
            inner = next((s for s in function.body if isinstance(s, ast.FunctionDef) and s.name == returned), None)
            if inner is not None and self.wraps_without_grad(inner, wrapped):
                found.append(function.name)
        return tuple(found)

    def wraps_without_grad(self, inner: ast.FunctionDef, wrapped: str) -> bool:
        """Whether every call of `inner` calls `wrapped` with grad off."""
        if any(self.qualify(d.func if isinstance(d, ast.Call) else d) in _NO_GRAD for d in inner.decorator_list):
            return True
        for statement in inner.body:
            calls = any(isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == wrapped for n in ast.walk(statement))
            if isinstance(statement, ast.With) and any(
                isinstance(item.context_expr, ast.Call) and self.qualify(item.context_expr.func) in _NO_GRAD for item in statement.items
            ):
                return calls
            if calls:
                return False  # called with grad on first
        return False

    def mode_steps(self, tree: ast.Module) -> dict[str, dict]:
        """`ModuleSummary.mode_steps` of the module's functions and of its classes' methods."""
        found: dict[str, dict] = {}
        for stmt in _module_level(tree.body):
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
                _note_mode_steps(found, stmt.name, stmt, self.qualify)
            elif isinstance(stmt, ast.ClassDef):
                methods = [m for m in stmt.body if isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef))]
                names = frozenset(m.name for m in methods)
                for method in methods:
                    _note_mode_steps(found, f"{stmt.name}.{method.name}", method, self.qualify, f"{self.module}.{stmt.name}", names)
        return found

    def may_freeze(self, node: ast.stmt, finetuning: frozenset[str]) -> bool:
        """Freezing facts need one of a few words in the statement: skip the walks without them."""
        text = "\n".join(self.lines[node.lineno - 1 : node.end_lineno])
        return _FREEZE_TEXT.search(text) is not None or bool(finetuning) and _FINETUNING_TEXT.search(text) is not None

    def scan(self, tree: ast.Module) -> tuple[list[Block], tuple[str, ...], tuple[str, ...]]:
        """One walk over every top-level statement: which module-level names and attributes it binds
        and reads (for parsing only what a checkpoint can reach), which classes helper code builds
        or hands on rather than binding to a variable and running (factory-built submodules), and
        which ones script code builds as whole models."""
        blocks: list[Block] = []
        built: list[str] = []
        models: list[str] = []
        for stmt in tree.body:
            first = _first_line(stmt)
            members: list[Member] = []
            if isinstance(stmt, ast.ClassDef):
                methods = [m for m in stmt.body if isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef)) and _first_line(m) > stmt.lineno]
                header = _Reads(self, [*stmt.decorator_list, *stmt.bases, *stmt.keywords, *(m for m in stmt.body if m not in methods)], built)
                whole = _Reads(self, [], built)
                whole.merge(header)
                own = frozenset(m.name for m in methods)
                for method in methods:
                    reads = _Reads(self, [method], built, _params(method), own)
                    whole.merge(reads)
                    if reads.forwarding:
                        self.forwarding[f"{stmt.name}.{method.name}"] = reads.forwarding
                    members.append(Member(method.name, _first_line(method), method.end_lineno or method.lineno, _joined(reads.attrs), _joined(reads.self_stores), reads.stashes))
                reads = whole
                reads.attrs = header.attrs
            else:
                function = isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef))
                reads = _Reads(self, [stmt], built, _params(stmt) if function else None, models=models)
                if reads.forwarding:
                    self.forwarding[stmt.name] = reads.forwarding
            definition = isinstance(stmt, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
            if definition:
                binds = {stmt.name}
            else:
                binds = reads.stores | {s.name for s in _module_level([stmt]) if isinstance(s, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))}
                binds |= {a.asname or a.name.split(".", 1)[0] for s in _module_level([stmt]) if isinstance(s, (ast.Import, ast.ImportFrom)) for a in s.names}
            blocks.append(Block(first, stmt.end_lineno or stmt.lineno, definition, _joined(binds), _joined(reads.loads), _joined(reads.attrs), reads.stashes, members))
        # Only names some statement binds can link statements: drop builtins and attributes' roots elsewhere.
        bound = {name for block in blocks for name in block.binds.split()}
        for block in blocks:
            block.refs = _joined(n for n in block.refs.split() if n in bound)
        return blocks, tuple(dict.fromkeys(built)), tuple(dict.fromkeys(models))

    def collect_object_steps(self, body: list[ast.stmt], function: str, params: tuple[str, ...]) -> None:
        """What a top-level function (or the module's own code, `function` ""), does to the objects
        its parameters hold and to those it builds (`model = Net().train(); freeze(model)`)."""
        body = _returning_a_name(body)
        definition = self.function_nodes.get(function) if function else None
        decider = Decider(function=f"{self.module}.{function}", signature=_positions_and_defaults(definition)) if definition is not None else Decider()
        steps, instances = self.object_steps(body, params, track=True, decider=decider)
        if any(steps[p] for p in params):
            self.param_freezes[function] = {p: steps[p] for p in params}
        returned = _returned_name(body)
        made = _built_as(body, returned) if function and returned else None
        ctor = self.note_builder(function, made)
        if ctor is not None:
            matches = isinstance(made, ast.Call) and self.qualify(made.func) == ctor
            if ctor in CONTAINERS and matches:
                self.builder_contents[function] = list(dict.fromkeys(self.constructors(made, {})))  # type: ignore[arg-type]
            definition = self.function_nodes.get(function)
            forwarded = definition.args.kwarg.arg if definition is not None and definition.args.kwarg is not None else None
            arguments = _call_arguments(made, frozenset(params), forwarded) if matches else None  # type: ignore[arg-type]
            training = ctor in HF_TRAINING_ARGUMENTS  # its keywords, literal or not, reach the Trainer
            if arguments is not None and definition is not None and (training or any(d[0] == "param" or d[0] == "kwargs" for d in arguments.values())):
                self.builder_calls[function] = [*_signature(definition, skip_self=False), arguments]
        if function and _returns_cached_model(body, returned, made):
            self.cache_builders.append(function)
        if function and returned and any(isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef)) and s.name == returned for s in body):
            self.closure_factories.append(function)  # `def create_custom_forward(module): def custom_forward(*inputs): ...; return custom_forward`
        for ctor, built in instances:
            # An object a project function built, even with nothing done to it here: the function
            # may be a builder that froze it (`model = build_model()` then training it).
            if built or _function_like(ctor) and self.project_callee_name(ctor):
                self.instance_freezes[instance_key(function, ctor)] = built

    def note_builder(self, function: str, made: Optional[ast.expr]) -> Optional[str]:
        """A function (or "Class.method") whose body ends by returning `made`, an object it
        constructs, is a builder of that constructor (`builders`): returns the constructor."""
        made_ctor = self.constructed(made) if made is not None else None
        if made_ctor is None:
            if isinstance(made, ast.Call) and isinstance(made.func, ast.Subscript):
                # `return MODELS[name](**kwargs)`: one of a registry's classes (ProjectIndex.registry)
                holder = made.func.value
                definition = self.function_nodes.get(function)
                local = definition is not None and isinstance(holder, ast.Name) and holder.id in _params(definition)
                module_level = isinstance(holder, ast.Name) and holder.id not in self.imports
                registry = None if local else f"{self.module}.{holder.id}" if module_level else self.qualify(holder)  # type: ignore[attr-defined]
                if registry is not None:
                    self.registry_builders[function] = registry
            return None
        self.builders[function] = made_ctor[0]
        return made_ctor[0]

    def object_steps(
        self, body: list[ast.stmt], params: Iterable[str], track: bool = False, methods: frozenset[str] = frozenset(), owner: str = "",
        finetuning: Optional[frozenset[str]] = None, decider: Decider = Decider(),
    ) -> tuple[dict[str, list[FreezeStep]], list[tuple[str, list[FreezeStep]]]]:
        """In source order, the freezing written out on each parameter and the calls that may freeze
        it (handed to a project function, a method called on it, a Lightning Trainer fitting it),
        until the name is rebound. With `track`, the same for each object built here: (constructor,
        steps) per object. `finetuning`: see `_freeze_facts` (the module's own spellings by default).
        Steps under an `if` that the `decider` decides carry its test: in a method, the steps on `self`
        (a test on its construction); in a function, every step (a test on its parameters)."""
        finetuning = self.finetuning_receivers if finetuning is None else finetuning
        held: dict[str, list[FreezeStep]] = {name: [] for name in params}  # names still holding their object
        of_params = dict(held)
        found: dict[str, list[FreezeStep]] = {}
        ctors: dict[str, str] = {}
        built: list[tuple[str, list[FreezeStep]]] = []
        wrapped: set[int] = set()  # PEFT calls already applied where their result is assigned
        callbacks = _TrainerCallbacks(self)
        lists: dict[str, list[ast.expr]] = {}  # names bound to a literal list or tuple, for loops over them
        for stmt, condition in guarded(body, decider):
            before = {name: len(steps) for name, steps in held.items() if name == "self" or not decider.owner} if condition else None
            for node in in_source_order(stmt):
                if type(node) is ast.Call:
                    wrap = self.peft_effect(node, held, ctors) if id(node) not in wrapped else None
                    if wrap is not None:
                        held[wrap[0]].append(FreezeStep(wrap[1]))
                    elif id(node) not in wrapped:
                        self.call_steps(node, held, methods, owner)
                    if track:
                        built.extend(self.handed_new(node, ctors))
                    if type(node.func) is ast.Attribute:
                        callbacks.grow(node)
                        if node.func.attr == "fit":
                            self.fit_step(node, callbacks, held, built if track else None)
                elif type(node) is ast.AugAssign and type(node.target) is ast.Name:
                    callbacks.forget(node.target.id)  # `callbacks += more`
                elif type(node) is ast.Assign and len(node.targets) == 1 and type(node.targets[0]) is ast.Name:
                    name = node.targets[0].id
                    callbacks.assign(name, node.value)
                    wrap = self.peft_effect(node.value, held, ctors) if type(node.value) is ast.Call else None
                    if wrap is None and name in held and _root_name(node.value) == name:
                        continue  # `model = model.to(device)`, `model = freeze(model)`: the same object
                    if wrap is not None:
                        # `model = get_peft_model(base, config)`: the wrapper holds the same model, so
                        # both names see every later step; its steps are keyed by the wrapper's constructor.
                        wrapped.add(id(node.value))
                        held[wrap[0]].append(FreezeStep(wrap[1]))
                        shared = held[wrap[0]]
                        if name == wrap[0] and not wrap[1].adapter_wrap and self.callee_name(node.value) not in _PEFT_INJECT:
                            continue  # `model = prepare_model_for_kbit_training(model)` returns the model itself
                    held.pop(name, None)
                    if name in ctors:
                        built.append((ctors.pop(name), found.pop(name)))
                    made = self.constructed(node.value, ctors) if track else None
                    if made is not None and wrap is not None:
                        ctors[name] = made[0]
                        held[name] = found[name] = shared
                    elif made is not None:
                        ctors[name] = made[0]
                        held[name] = found[name] = made[1]
                elif (
                    type(node) is ast.Assign and len(node.targets) == 1 and type(target := node.targets[0]) is ast.Attribute
                    and type(target.value) is ast.Name and target.value.id in held and type(node.value) is ast.Call
                ):
                    # `self.embed = frozen_table(...)`: the submodule is what a project builder returns;
                    # `self.model = freeze_embeddings(GPT())`: what the helper does to the object it is handed.
                    made = self.constructed(node.value)
                    builder = self.project_callee(node.value.func)
                    if made is not None and made[1] and all(step.callee and not step.member for step in made[1]):
                        held[target.value.id].extend(replace(step, member=target.attr) for step in made[1])
                    elif builder is not None and _function_like(builder):
                        held[target.value.id].append(FreezeStep(callee=builder, slot=RETURNED, member=target.attr, passed=self.literals_passed(node.value)))
                elif track and type(node) is ast.Return and type(node.value) is ast.Call:
                    made = self.constructed(node.value)  # `return freeze(Net())`
                    if made is not None and made[1]:
                        built.append(made)
            if held and self.may_freeze(stmt, finetuning):
                for name, steps in held.items():
                    freeze = _freeze_facts(stmt, name, self.path, finetuning, lists, frozenset(of_params))
                    if freeze:
                        steps.append(FreezeStep(freeze))
            for name, steps in held.items() if before is not None else ():
                if name == "self" or not decider.owner:
                    first = before.get(name, 0)  # type: ignore[union-attr]
                    steps[first:] = [replace(step, condition=condition) for step in steps[first:]]
            if type(stmt) is ast.Assign:
                _bind_local_list(stmt, lists)
        built.extend((ctor, found[name]) for name, ctor in ctors.items())
        return of_params, built

    def fit_step(self, call: ast.Call, callbacks: "_TrainerCallbacks", held: dict[str, list[FreezeStep]], built: Optional[list]) -> None:
        """`trainer.fit(model, ...)` by a Lightning Trainer whose callbacks are known: a step on the
        model (a tracked name, or built right there when `built` collects new objects)."""
        known = callbacks.of_fit(call)
        if not known:
            return
        model = _fitted_model(call)
        step = FreezeStep(callee=".fit", callbacks=json.dumps(known))
        if type(model) is ast.Name and model.id in held:
            held[model.id].append(step)
        elif built is not None and type(model) is ast.Call and (made := self.constructed(model)) is not None:
            built.append((made[0], [*made[1], step]))

    def peft_effect(self, call: ast.Call, held: dict[str, list[FreezeStep]], ctors: dict[str, str]) -> Optional[tuple[str, Freeze]]:
        """(the tracked variable whose model a library call is handed, what the call does to it) for
        the adapter libraries' calls `library_freeze` knows."""
        arg = _model_argument(call, self.callee_name(call))
        if type(arg) is not ast.Name or arg.id not in held:
            return None
        freeze = self.library_freeze(call, ctors.get(arg.id, ""))
        return (arg.id, freeze) if freeze is not None else None

    def callee_name(self, call: ast.Call) -> str:
        return (self.qualify(call.func) if isinstance(call.func, (ast.Name, ast.Attribute)) else None) or ""

    def library_freeze(self, call: ast.Call, wrapped: str) -> Optional[Freeze]:
        """What an adapter library's call does to the model (built by `wrapped`, a constructor) it is
        handed: `get_peft_model(model, ...)`, `PeftModel(...)`, `prepare_model_for_kbit_training(model)`,
        `inject_adapter_in_model(config, model)`, loralib's `mark_only_lora_as_trainable(model)`;
        None for other calls."""
        callee = self.callee_name(call)
        where = {"line": call.lineno, "path": self.path}
        if callee in _PEFT_KBIT:
            # It hooks the inputs (and enables checkpointing) of a quantized model only: one built by
            # its constructor or from a config holds no quantized weights; a loaded one may.
            return Freeze(everything=True, input_grad_hook=not _built_without_weights(wrapped), **where)
        if callee in PEFT_WRAPPERS or callee.startswith(PEFT_MODEL_CLASSES):
            return Freeze(everything=True, adapter_wrap=True, wrapped=wrapped, **where)
        if callee in _PEFT_INJECT:
            return Freeze(everything=True, wrapped=wrapped, **where)  # the model itself, adapters added: no hook, ever
        if callee in _LORALIB_MARK:
            bias = call.args[1] if len(call.args) > 1 else next((k.value for k in call.keywords if k.arg == "bias"), None)
            known, mode = literal(bias) if bias is not None else (True, "none")
            by_name: list[list] = [[["not", ["in", "lora_"]], True]]
            if not (known and mode == "none"):
                # `bias="all"` turns every `bias` back on; "lora_only" those of LoRA layers, which names don't tell.
                by_name.append([["in", "bias"], False if known and mode == "all" else None])
            return Freeze(by_name=tuple(by_name), **where)
        return None

    def call_steps(self, call: ast.Call, steps: dict[str, list[FreezeStep]], methods: frozenset[str], owner: str = "") -> None:
        """Steps for a call handed a tracked object, or called on one. In a method of `owner`, `self.m(x)`
        calls the method `m` of the class (`self` its first parameter)."""
        func = call.func
        if type(func) is ast.Attribute and func.attr in _HF_ENABLE_KWARGS and type(func.value) is ast.Name and func.value.id in steps:
            steps[func.value.id].append(FreezeStep(Freeze(checkpointing=True)))
        elif type(func) is ast.Attribute and func.attr in _HF_DISABLE and type(func.value) is ast.Name and func.value.id in steps:
            steps[func.value.id].append(FreezeStep(Freeze(checkpointing_off=True)))
        elif type(func) is ast.Attribute and func.attr == _HF_ADD_ADAPTER and type(func.value) is ast.Name and func.value.id in steps:
            steps[func.value.id].append(FreezeStep(_adapter_added(call, self.path)))
        elif type(func) is ast.Attribute and func.attr not in _MODULE_API:
            receiver = func.value
            if type(receiver) is ast.Name and receiver.id in steps:
                if receiver.id != "self" or func.attr in methods:
                    steps[receiver.id].append(FreezeStep(callee=f".{func.attr}"))
            elif not call.args and type(receiver) is ast.Attribute and type(receiver.value) is ast.Name and receiver.value.id in steps:
                # `self.visual.lock()`; with inputs it would be a submodule's own call, not a freezing method
                steps[receiver.value.id].append(FreezeStep(callee=f".{func.attr}", member=receiver.attr))
        handed = [(str(i), a) for i, a in enumerate(call.args)] + [(k.arg, k.value) for k in call.keywords if k.arg]
        for slot, arg in handed:
            member = ""
            if type(arg) is ast.Attribute and type(arg.value) is ast.Name:
                arg, member = arg.value, arg.attr  # `freeze(model.embed)`
            if type(arg) is ast.Name and arg.id in steps:
                if owner and type(func) is ast.Attribute and _is_self(func.value) and func.attr in methods:
                    callee: Optional[str] = f"{owner}.{func.attr}"
                    slot = str(int(slot) + 1) if slot.isdigit() else slot
                else:
                    callee = self.project_callee(func)
                if callee is not None and (_function_like(callee) or self.in_this_package(callee)):
                    # A project class handed the object holds it (`Runner(model)`): the step links the
                    # two (`ProjectIndex._freezes_through_holders`); it freezes nothing by itself.
                    steps[arg.id].append(FreezeStep(callee=callee, slot=slot, member=member, arguments=self.texts_passed(call), passed=self.literals_passed(call)))

    def literals_passed(self, call: ast.Call) -> str:
        """`FreezeStep.passed` of a call: its literal arguments by position or keyword, the classes it
        names ({"class": qualified name}: `checkpoint_layers(model, Block)`), and {} for any other
        argument (passed, so the parameter's default does not hold)."""
        found: dict[str, object] = {}
        for slot, value in [*((str(i), a) for i, a in enumerate(call.args)), *((k.arg or "*", k.value) for k in call.keywords)]:
            if isinstance(value, ast.Starred) or slot == "*":
                found["*"] = True
                continue
            known, constant = literal(value)
            named = self.qualify(value) if not known and isinstance(value, (ast.Name, ast.Attribute)) else None
            if known:
                found[slot] = constant
            elif named and named.rsplit(".", 1)[-1][:1].isupper():
                found[slot] = {"class": named}
            else:
                found[slot] = {}
        return json.dumps(found) if found else ""

    def texts_passed(self, call: ast.Call) -> str:
        """`FreezeStep.arguments` of a call: the name texts it passes, literally or by a module-level name."""
        texts = {}
        for slot, value in [*((str(i), a) for i, a in enumerate(call.args)), *((k.arg, k.value) for k in call.keywords if k.arg)]:
            found = _strings(self.module_lists.get(value.id, value) if isinstance(value, ast.Name) else value)
            if found is not None and not isinstance(value, ast.Constant):
                texts[slot] = found
        return json.dumps(texts) if texts else ""

    def handed_new(self, call: ast.Call, ctors: dict[str, str]) -> Iterator[tuple[str, list[FreezeStep]]]:
        """Objects built right in the arguments of a call (`Trainer(model=build_model())`); a project
        class's construction (`Runner(Net())`) holds them (see `call_steps`)."""
        callee = self.project_callee(call.func)
        holder = callee if callee is not None and not _function_like(callee) and self.in_this_package(callee) else None
        handed = [(str(i), a) for i, a in enumerate(call.args)] + [(k.arg, k.value) for k in call.keywords if k.arg]
        for slot, arg in handed:
            made = self.constructed(arg, ctors) if type(arg) is ast.Call else None
            if made is not None:
                yield made[0], [*made[1], *([FreezeStep(callee=holder, slot=slot)] if holder else [])]

    def in_this_package(self, qualname: str) -> bool:
        """Defined in the top-level package of this module (a project class, not a library's)."""
        return qualname.split(".", 1)[0] == self.module.split(".", 1)[0]

    def project_callee(self, func: ast.AST) -> Optional[str]:
        """The qualified name of a function that may be the project's own (not a checkpoint API, not a library)."""
        callee = self.qualify(func) if isinstance(func, (ast.Name, ast.Attribute)) else None
        return self.project_callee_name(callee) if callee is not None else None

    @staticmethod
    def project_callee_name(callee: str) -> Optional[str]:
        return None if callee in KNOWN_APIS or callee.startswith(_NOT_WRAPPERS) else callee

    def constructed(self, value: ast.AST, ctors: Optional[dict[str, str]] = None) -> Optional[tuple[str, list[FreezeStep]]]:
        """(constructor, what was done to the object already) for `Net(...)`, `Net().to(device).train()`,
        `Net().requires_grad_(False)` and `freeze(Net())` (a function, by its lower-case name, handed it);
        a method of a project object (`factory.build()`, `Factory().build()`; `ctors`: the classes
        of the names tracked here) is a builder like a function, by its qualified name."""
        steps: list[FreezeStep] = []
        while type(value) is ast.Call:
            func = value.func
            if type(func) is ast.Attribute and func.attr in MODULE_SELF_METHODS and type(func.value) is ast.Call:
                if func.attr == "requires_grad_":
                    known, flag = literal(value.args[0]) if value.args else (True, True)
                    if known and isinstance(flag, bool):
                        freeze = Freeze(everything=True, line=value.lineno, path=self.path) if not flag else Freeze(thawed=True)
                        steps.insert(0, FreezeStep(freeze))
                value = func.value
                continue
            callee = self.qualify(func) if isinstance(func, (ast.Name, ast.Attribute)) else None
            if callee is not None and callee.endswith(".from_pretrained") and table_freeze(value) is not None:
                # `nn.Embedding.from_pretrained(weights)`: a table built frozen unless `freeze=False`
                # (a flag the code does not spell is decided where it is set: `guarded`).
                frozen = [FreezeStep(Freeze(everything=True, line=value.lineno, path=self.path))] if frozen_table(value) else []
                return callee.rsplit(".", 1)[0], [*frozen, *steps]
            if callee is None and type(func) is ast.Attribute and func.attr not in _MODULE_API:
                callee = self._method_of_object(func.value, ctors)
                callee = f"{callee}.{func.attr}" if callee is not None else None
            if callee is None:
                return None
            inner = _model_argument(value, callee)
            wrap = self.library_freeze(value, "") if type(inner) is ast.Call else None
            if wrap is not None:
                # `get_peft_model(Net(), config)`: the wrapper, after what was done to the model inside it
                made = self.constructed(inner)
                if made is None:
                    return callee, [FreezeStep(wrap), *steps]
                wrap.wrapped = made[0]
                if wrap.input_grad_hook and _built_without_weights(made[0]):
                    wrap.input_grad_hook = False  # `prepare_model_for_kbit_training(Net())`
                return callee, [*made[1], FreezeStep(wrap), *steps]
            if type(inner) is ast.Call and _function_like(callee) and self.project_callee(func):
                steps.insert(0, FreezeStep(callee=callee, slot="0", arguments=self.texts_passed(value), passed=self.literals_passed(value)))
                value = inner
                continue
            return callee, steps
        return None

    def _method_of_object(self, receiver: ast.AST, ctors: Optional[dict[str, str]]) -> Optional[str]:
        """The project class of `receiver`: a name tracked as built from it, or its construction right there."""
        cls = ctors.get(receiver.id) if ctors is not None and type(receiver) is ast.Name else None
        if type(receiver) is ast.Call and isinstance(receiver.func, (ast.Name, ast.Attribute)):
            cls = self.qualify(receiver.func)
        return cls if cls is not None and not _function_like(cls) and self.project_callee_name(cls) else None

    def alias(self, value: ast.AST) -> Optional[Alias]:
        if isinstance(value, ast.Call) and self.qualify(value.func) in PARTIAL and value.args:
            target = self.qualify(value.args[0])
            if target is None:
                return None
            keywords = {}
            for kw in value.keywords:
                known, const = literal(kw.value)
                named = self.qualify(kw.value) if not known and isinstance(kw.value, (ast.Name, ast.Attribute)) else None
                if kw.arg is None or not (known or named):
                    return None
                # A module-level name (`use_reentrant=settings.REENTRANT`): the index resolves it once all modules are read.
                keywords[kw.arg] = const if known else {CONSTANT_KEY: named}
            return Alias(target, keywords, is_partial=True)
        target = self.qualify(value) if isinstance(value, (ast.Name, ast.Attribute)) else None
        return Alias(target) if target else None

    def summarize_class(self, node: ast.ClassDef) -> ClassSummary:
        bases = tuple(q for q in (self.qualify(b) for b in node.bases) if q)
        attrs: dict[str, AttrBinding] = {}
        methods = []
        forward_no_grad = returns_sequence = False
        init_params, init_defaults = None, {}
        flag_setters: dict[str, dict[str, list]] = {}
        own = frozenset(m.name for m in node.body if isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef)))
        qualname = f"{self.module}.{node.name}"
        finetuning = self.finetuning_receivers
        if any(b in lightning.BASE_FINETUNING or b in self.finetuning_classes for b in bases):
            self.finetuning_classes.add(qualname)
            finetuning |= {"self"}  # `self.freeze(pl_module.backbone)`
        for stmt in node.body:
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
                methods.append(stmt.name)
                if stmt.args.args and stmt.args.args[0].arg == "self" and stmt.name != "forward":
                    params = _ordered_params(stmt)
                    steps = self.method_steps(stmt, params, own, qualname, finetuning)
                    # Other parameters keep only the freezing written out (`def _freeze(self, module)`).
                    kept = {p: s if p == "self" else [step for step in s if step.freeze is not None] for p, s in steps.items()}
                    if any(kept.values()):
                        self.param_freezes[f"{node.name}.{stmt.name}"] = kept
                if stmt.name == "__init__":
                    self.collect_init(stmt, attrs)
                    init_params, init_defaults = _signature(stmt)
                elif stmt.name != "forward" and (flags := _flags_set(stmt)):
                    flag_setters[stmt.name] = flags
                elif stmt.name == "forward":
                    forward_no_grad = any(self.qualify(d.func if isinstance(d, ast.Call) else d) in _NO_GRAD for d in stmt.decorator_list)
                    returns_sequence = _returns_sequence(stmt)
            elif isinstance(stmt, (ast.Assign, ast.AnnAssign)) and stmt.value is not None:
                targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
                value = self.field_default(stmt.value)
                mapping = _dict_literal(value) if value is not None else None
                for target in targets:
                    if isinstance(target, ast.Name) and value is not None:
                        # A dict of literals (`ckpt_kwargs = {"use_reentrant": True}`) starts as that dict.
                        attrs.setdefault(target.id, AttrBinding(constant=mapping, has_constant=True) if mapping is not None else self.binding(value, {}))
        unset = frozenset(a for a, b in attrs.items() if b.has_constant and b.constant is None)
        for stmt in node.body if unset else ():
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)) and stmt.name not in ("__init__", "forward"):
                self.collect_late_modules(stmt, attrs, unset)
        recompute = recompute_layout(node, self.qualify) if any(b in AUTOGRAD_FUNCTIONS for b in bases) else None
        return ClassSummary(
            f"{self.module}.{node.name}", bases, attrs, tuple(methods), forward_no_grad, recompute, init_params, init_defaults, flag_setters,
            returns_sequence,
        )

    def field_default(self, value: ast.expr) -> Optional[ast.expr]:
        """What a class-level attribute starts as: a dataclass `field(default=...)` its default,
        `field(default_factory=Config)` a `Config()`; None for a field without a default."""
        if not (type(value) is ast.Call and self.qualify(value.func) in DATACLASS_FIELDS):
            return value
        keywords = {k.arg: k.value for k in value.keywords if k.arg}
        if "default" in keywords:
            return keywords["default"]
        factory = keywords.get("default_factory")
        if isinstance(factory, ast.Lambda):
            return factory.body  # `field(default_factory=lambda: {"use_reentrant": True})`
        return ast.copy_location(ast.Call(factory, [], []), factory) if isinstance(factory, (ast.Name, ast.Attribute)) else None

    def method_steps(
        self, method: Union[ast.FunctionDef, ast.AsyncFunctionDef], params: tuple[str, ...], own: frozenset[str], owner: str, finetuning: frozenset[str]
    ) -> dict[str, list[FreezeStep]]:
        """`object_steps` of a method's parameters; the steps of a top-level `if` on the epoch
        (`if current_epoch == self.unfreeze_at:`, in a Lightning callback) carry that guard."""
        epoch_names = frozenset(p for p in params if "epoch" in p)
        segments: list[tuple[Optional[list], list[ast.stmt]]] = []
        for stmt in method.body:
            guard = epoch_guard(stmt.test, epoch_names) if isinstance(stmt, ast.If) else None
            if guard is None:
                if segments and segments[-1][0] is None:
                    segments[-1][1].append(stmt)
                else:
                    segments.append((None, [stmt]))
                continue
            segments.append((guard, stmt.body))
            if stmt.orelse:
                segments.append((["not", guard], stmt.orelse))
        if len(segments) <= 1 and not (segments and segments[0][0]):
            body = _returning_a_name(method.body)
            decider = Decider(owner, frozenset(params) - {"self"} if method.name == "__init__" else frozenset())
            steps, instances = self.object_steps(body, params, track=True, methods=own, owner=owner, finetuning=finetuning, decider=decider)
            # Objects the method builds (`model = AutoModel...from_pretrained(...)` in `Builder.build`):
            # what it does to them, as for a top-level function's; one it returns makes it a builder.
            function = f"{owner.rsplit('.', 1)[-1]}.{method.name}"
            for ctor, built in instances:
                if built:
                    self.instance_freezes[instance_key(function, ctor)] = built
            returned = _returned_name(body)
            self.note_builder(function, _built_as(body, returned) if returned else None)
            return steps
        steps: dict[str, list[FreezeStep]] = {p: [] for p in params}
        for guard, body in segments:
            for param, found in self.object_steps(body, params, methods=own, owner=owner, finetuning=finetuning)[0].items():
                steps[param] += [replace(step, guard=guard) for step in found] if guard else found
        return steps

    def collect_late_modules(self, method: Union[ast.FunctionDef, ast.AsyncFunctionDef], attrs: dict[str, AttrBinding], unset: frozenset[str]) -> None:
        """Modules a method other than `__init__` builds into an attribute `__init__` sets to None
        (`unset`: Lightning's `configure_model`, a trainer's `setup`): the attribute holds them once built."""
        late: dict[str, AttrBinding] = {}
        for node in _own_assignments(method.body):
            for target in node.targets:
                attr = _self_attr(target)
                if attr not in unset:
                    continue
                binding = self.binding(node.value, {})
                if binding.constructors:
                    late[attr] = _merge(late[attr], binding) if attr in late else binding  # type: ignore[index]
        attrs.update(late)

    def collect_init(self, init: ast.FunctionDef, attrs: dict[str, AttrBinding]) -> None:
        init_params = _params(init) - {"self"}
        # Local lists that later become ModuleList/Sequential contents (`layers.append(Block())`), and
        # local modules that later become attributes.
        local_elements: dict[str, list[str]] = {}
        for node in in_source_order(init):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "register_buffer" and node.args:
                known, name = literal(node.args[0])
                if known and isinstance(name, str) and isinstance(node.func.value, ast.Name) and node.func.value.id == "self":
                    attrs[name] = AttrBinding(is_buffer=True)
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in ("append", "extend", "add_module") and node.args:
                owner = node.func.value
                elements = self.constructors(node.args[-1], local_elements)
                if isinstance(owner, ast.Name):
                    local_elements.setdefault(owner.id, []).extend(elements)
                elif _self_attr(owner) and _self_attr(owner) in attrs:
                    binding = attrs[_self_attr(owner)]
                    binding.constructors = tuple(dict.fromkeys(binding.constructors + tuple(elements)))
            elif isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for target in targets:
                    for attr, value in _self_targets(target, node.value):
                        new = self.binding(value, local_elements, init_params)
                        if isinstance(value, ast.Name) and value.id in init_params:
                            new.param = value.id
                        elif (copied := self.deep_copied_param(value, init_params)) is not None:
                            new = AttrBinding(param=copied)  # `self.teacher = copy.deepcopy(student)`: a module of the class handed in
                        elif (defaulted := _defaulted_param(value, init_params)) is not None:
                            new.param, new.fallback = defaulted
                        old = attrs.get(attr)
                        attrs[attr] = _merge(old, new) if old else new
                    if isinstance(target, ast.Name) and isinstance(node.value, (ast.List, ast.ListComp, ast.Tuple, ast.Call)):
                        # A list of modules, or one module (`conv = Block()`, then maybe `conv =
                        # checkpoint_wrapper(conv, ...)`) that an attribute takes later.
                        local_elements[target.id] = list(self.constructors(node.value, local_elements))

    def deep_copied_param(self, value: ast.AST, init_params: frozenset[str]) -> Optional[str]:
        if isinstance(value, ast.Call) and len(value.args) == 1 and isinstance(value.args[0], ast.Name) and self.qualify(value.func) in DEEP_COPIES:
            return value.args[0].id if value.args[0].id in init_params else None
        return None

    def binding(self, value: ast.AST, local_elements: dict[str, list[str]], init_params: frozenset[str] = frozenset()) -> AttrBinding:
        binding = self._binding(value, local_elements)
        if binding.constructors:
            construction = _single_construction(value, self.qualify)
            if construction is not None:
                binding.arguments = _call_arguments(construction, init_params)
        return binding

    def _binding(self, value: ast.AST, local_elements: dict[str, list[str]]) -> AttrBinding:
        known, const = literal(value)
        if known:
            return AttrBinding(constant=const, has_constant=True)
        if isinstance(value, ast.Lambda):
            return AttrBinding(is_lambda=True)
        alias = self.alias(value) if isinstance(value, (ast.Call, ast.Name, ast.Attribute)) else None
        if alias is not None and _checkpoint_api(alias.target):
            return AttrBinding(alias=alias)
        if isinstance(value, ast.Call):
            ctor = self.qualify(value.func)
            if ctor in PARAMETERS:
                flag = next((literal(k.value) for k in value.keywords if k.arg == "requires_grad"), None)
                if flag is None and len(value.args) > 1:
                    flag = literal(value.args[1])
                known, requires = flag or (True, True)
                return AttrBinding((ctor,), parameter=bool(requires) if known else None)
            if ctor in CONTAINERS:
                elements: list[str] = []
                for arg in value.args:
                    elements.extend(self.constructors(arg, local_elements))
                return AttrBinding(tuple(dict.fromkeys(elements)), container=ctor)
        return AttrBinding(tuple(dict.fromkeys(self.constructors(value, local_elements))))

    def constructors(self, value: ast.AST, local_elements: dict[str, list[str]]) -> Iterator[str]:
        """Classes that an expression may construct (through lists, comprehensions, conditionals)."""
        if isinstance(value, ast.Call):
            ctor = self.qualify(value.func)
            if ctor in CONTAINERS or ctor == "collections.OrderedDict":
                for arg in value.args:
                    yield from self.constructors(arg, local_elements)
            elif ctor == CHECKPOINT_WRAPPER and value.args:
                yield from self.constructors(value.args[0], local_elements)  # the wrapper runs (and forwards to) the module
            elif ctor:
                if _function_like(ctor) and value.args and isinstance(value.args[0], ast.Call) and self.project_callee_name(ctor):
                    # `freeze_embeddings(GPT())`: a helper handed the module most often hands it back.
                    yield from self.constructors(value.args[0], local_elements)
                yield ctor
        elif isinstance(value, (ast.List, ast.Tuple, ast.Set)):
            for element in value.elts:
                yield from self.constructors(element, local_elements)
        elif isinstance(value, (ast.ListComp, ast.GeneratorExp, ast.SetComp)):
            yield from self.constructors(value.elt, local_elements)
        elif isinstance(value, ast.Starred):
            yield from self.constructors(value.value, local_elements)
        elif isinstance(value, ast.IfExp):
            yield from self.constructors(value.body, local_elements)
            yield from self.constructors(value.orelse, local_elements)
        elif isinstance(value, ast.Name):
            yield from local_elements.get(value.id, ())
        elif isinstance(value, ast.Dict):
            for element in value.values:
                yield from self.constructors(element, local_elements)


def _fitted_model(call: ast.Call) -> Optional[ast.expr]:
    """The model `trainer.fit(model, ...)` / `trainer.fit(model=model)` trains."""
    return call.args[0] if call.args else next((k.value for k in call.keywords if k.arg == "model"), None)


class _TrainerCallbacks:
    """The callbacks the Lightning Trainers of a body are built with, as the body runs: Trainers and
    callback lists bound to names (`callbacks = [...]`, `.append(...)`), and lists a helper function
    of the module returns. A callback is [constructor, its arguments]; None stands for what cannot be
    told (a list handed in, a helper of another module, `+=`). A list is kept as the expressions it
    is made of and read only when a Trainer takes it: most bodies build no Trainer."""

    def __init__(self, summarizer: "_Summarizer", depth: int = 0) -> None:
        self.summarizer = summarizer
        self.depth = depth
        self.lists: dict[str, Optional[list[ast.expr]]] = {}
        self.trainers: dict[str, Optional[list]] = {}

    def forget(self, name: str) -> None:
        if name in self.lists:
            self.lists[name] = None

    def assign(self, name: str, value: ast.expr) -> None:
        self.lists.pop(name, None)
        self.trainers.pop(name, None)
        if type(value) is ast.Call and self.summarizer.callee_name(value) in LIGHTNING_TRAINERS:
            self.trainers[name] = self.of_trainer(value)
        elif isinstance(value, (ast.List, ast.Tuple, ast.Call)):
            self.lists[name] = [value]

    def grow(self, call: ast.Call) -> None:
        """`callbacks.append(cb)` / `callbacks.extend([...])` on a tracked list."""
        receiver, method = call.func.value, call.func.attr  # type: ignore[attr-defined]
        if method in ("append", "extend") and type(receiver) is ast.Name and self.lists.get(receiver.id) is not None:
            if len(call.args) == 1:
                self.lists[receiver.id].append(call.args[0] if method == "extend" else ast.List([call.args[0]]))  # type: ignore[union-attr]
            else:
                self.lists[receiver.id] = None

    def of_trainer(self, call: ast.Call) -> Optional[list]:
        value = next((k.value for k in call.keywords if k.arg == "callbacks"), None)
        return [] if value is None else self.of(value) if type(value) in (ast.List, ast.Tuple, ast.Name, ast.Call) else None

    def of_fit(self, call: ast.Call) -> Optional[list]:
        """The callbacks of the Trainer `trainer.fit(...)` is called on, or `Trainer(...).fit(...)`."""
        receiver = call.func.value  # type: ignore[attr-defined]
        if type(receiver) is ast.Name:
            return self.trainers.get(receiver.id)
        if type(receiver) is ast.Call and self.summarizer.callee_name(receiver) in LIGHTNING_TRAINERS:
            return self.of_trainer(receiver)
        return None

    def of(self, value: ast.expr, depth: int = 0) -> Optional[list]:
        """The callbacks a list, a name, a callback's construction or a helper's call stands for."""
        if depth > _MAX_FREEZE_DEPTH:
            return None
        if isinstance(value, (ast.List, ast.Tuple)) or type(value) is ast.Name:
            parts = value.elts if isinstance(value, (ast.List, ast.Tuple)) else self.lists.get(value.id)  # type: ignore[attr-defined]
            found: list = []
            for part in parts if parts is not None else [None]:
                more = self.of(part.value if type(part) is ast.Starred else part, depth + 1) if part is not None else None
                if more is None:
                    return None
                found += more
            return found
        if type(value) is not ast.Call:
            return None
        callee = self.summarizer.callee_name(value)
        prefix = self.summarizer.module + "."
        helper = self.summarizer.function_nodes.get(callee[len(prefix) :]) if callee.startswith(prefix) else None
        if helper is not None:
            return self.returned(helper) if self.depth < _MAX_FREEZE_DEPTH else None
        if not callee or _function_like(callee):
            return None  # a helper of another module: what it returns is not known here
        return [[callee, _call_arguments(value, frozenset())]]

    def returned(self, helper: Union[ast.FunctionDef, ast.AsyncFunctionDef]) -> Optional[list]:
        """The callbacks a helper of the module returns (`return [FreezeBackbone(), ...]`)."""
        inner = _TrainerCallbacks(self.summarizer, self.depth + 1)
        for stmt in helper.body[:-1]:
            for node in in_source_order(stmt):
                if type(node) is ast.Assign and len(node.targets) == 1 and type(node.targets[0]) is ast.Name:
                    inner.assign(node.targets[0].id, node.value)
                elif type(node) is ast.Call and type(node.func) is ast.Attribute:
                    inner.grow(node)
                elif type(node) is ast.AugAssign and type(node.target) is ast.Name:
                    inner.forget(node.target.id)
        last = helper.body[-1] if helper.body else None
        return inner.of(last.value) if isinstance(last, ast.Return) and last.value is not None else None


_GLOBAL_STATEMENT = re.compile(r"^[ \t]+global[ \t]+([\w \t,]+)", re.MULTILINE)


def _constants(tree: ast.Module, source: str, changed: set[str]) -> dict[str, object]:
    """`ModuleSummary.constants`: module-level names bound once to a literal that no statement here
    changes (`changed`: names a subscript store, `update` or `setdefault` fills; a `global` rebinds)."""
    bound: dict[str, int] = {}
    literals: dict[str, object] = {}
    for stmt in _module_level(tree.body):
        targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target] if isinstance(stmt, (ast.AugAssign, ast.AnnAssign, ast.For)) else []
        for target in targets:
            for name in (n.id for n in ast.walk(target) if isinstance(n, ast.Name)):
                bound[name] = bound.get(name, 0) + 1
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
            try:
                literals[stmt.targets[0].id] = ast.literal_eval(stmt.value)
            except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
                continue
    rebound = {name.strip() for line in _GLOBAL_STATEMENT.findall(source) for name in line.split(",")} if "global" in source else set()
    return {
        name: value for name, value in literals.items()
        if bound.get(name) == 1 and name not in changed and name not in rebound and _plain_literal(value)
    }  # fmt: skip


def _plain_literal(value: object, depth: int = 0) -> bool:
    """A small literal JSON keeps as it is (tuples become lists, which evaluate alike): not a
    docstring template, nor a table of hundreds of entries."""
    if isinstance(value, str):
        return len(value) <= 256
    if value is None or isinstance(value, (bool, int, float)):
        return not isinstance(value, float) or value == value and value not in (float("inf"), float("-inf"))
    if depth >= 3:
        return False
    if isinstance(value, dict):
        return len(value) <= 64 and all(isinstance(k, str) and _plain_literal(v, depth + 1) for k, v in value.items())
    return isinstance(value, (list, tuple)) and len(value) <= 64 and all(_plain_literal(v, depth + 1) for v in value)


def _module_level(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """Module-level statements, looking into `if`/`try` blocks (guarded imports)."""
    for stmt in body:
        if isinstance(stmt, ast.If):
            yield from _module_level(stmt.body)
            yield from _module_level(stmt.orelse)
        elif isinstance(stmt, ast.Try):
            for block in (stmt.body, stmt.orelse, stmt.finalbody, *(h.body for h in stmt.handlers)):
                yield from _module_level(block)
        else:
            yield stmt


# transformers' accessor of a model's input embeddings, as a frozen path.
INPUT_EMBEDDINGS_CALL = "get_input_embeddings()"
# Words without which a statement cannot freeze parameters or add an input-grad hook.
_FREEZE_TEXT = re.compile(r"requires_grad|input_require_grads|register_forward_hook|set_input_embeddings|Embedding(?:Bag)?\.from_pretrained")
_FINETUNING_TEXT = re.compile("|".join(lightning.FINETUNING_METHODS))
_NO_GRAD = frozenset({"torch.no_grad", "torch.inference_mode", "torch.autograd.no_grad", "torch.autograd.grad_mode.no_grad"})


def _frozen_parameter(value: ast.AST) -> bool:
    """`nn.Parameter(data, requires_grad=False)`: a parameter made frozen (the keyword is the text
    `may_freeze` looks for)."""
    func = value.func if isinstance(value, ast.Call) else None
    if (func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None) != "Parameter":
        return False
    return any(k.arg == "requires_grad" and literal(k.value) == (True, False) for k in value.keywords)  # type: ignore[union-attr]


def _freeze_facts(
    scope: ast.AST, base: str, path: str, finetuning: frozenset[str] = frozenset(), lists: Optional[dict[str, list[ast.expr]]] = None,
    params: frozenset[str] = frozenset(),
) -> Freeze:
    """Freezing applied to `base` (`self` or a variable) anywhere in `scope`, in source order.
    `finetuning`: the receivers (`self`, `BaseFinetuning`) whose `freeze(...)` is Lightning's.
    `lists`: local names bound to a literal list or tuple before `scope` (`stem = [self.conv1, self.bn1]`).
    `params`: the enclosing function's parameters (name texts a predicate may take from its callers)."""
    facts = _FreezeFacts(base, path, finetuning)
    facts.params = params
    facts.lists.update(lists or {})
    for node in in_source_order(scope):
        facts.visit(node)
    return facts.freeze


def _bind_local_list(node: ast.Assign, lists: dict[str, list[ast.expr]]) -> bool:
    """Note `name = [...]` / `name = (...)` in `lists` (a name rebound to anything else leaves it);
    whether `node` binds a plain name."""
    if len(node.targets) != 1 or not isinstance(node.targets[0], ast.Name):
        return False
    name = node.targets[0].id
    lists.pop(name, None)
    if isinstance(node.value, (ast.List, ast.Tuple)):
        lists[name] = node.value.elts
    return True


_PARAMETER_LEAVES = frozenset({"weight", "bias"})
_PRETRAINED_MODELS = frozenset({"transformers.PreTrainedModel", "transformers.modeling_utils.PreTrainedModel"})


class _FreezeFacts:
    def __init__(self, base: str, path: str, finetuning: frozenset[str] = frozenset()) -> None:
        self.base = base
        self.finetuning = finetuning
        self.params: frozenset[str] = frozenset()
        self.freeze = Freeze(path=path)
        self.path = path
        # Loop variable -> (the module whose parameters it walks, the name variable of `named_parameters()`).
        self.loops: dict[str, tuple[ast.AST, Optional[str]]] = {}
        # Statements inside such loops -> the name predicate under which they run (absent: always).
        self.conditions: dict[int, list] = {}
        # Local names bound to a literal list or tuple of modules (`stem = [self.conv1, self.bn1]`).
        self.lists: dict[str, list[ast.expr]] = {}
        # Loop variable -> the modules it walks (`for m in [self.conv1, self.bn1]`), and whether it
        # certainly reaches each of them (not under a slice whose bounds are not literal).
        self.walks: dict[str, tuple[list[ast.expr], bool]] = {}

    def target(self, expr: ast.AST) -> tuple[bool, Optional[str], str]:
        """(is `base` itself, submodule name, whole dotted path) for `base`, `base.X`, `base.X.weight`;
        `base.get_input_embeddings()` is a submodule whose name is not known."""
        chain = []
        while True:
            if isinstance(expr, ast.Attribute):
                chain.append(expr.attr)
                expr = expr.value
            elif isinstance(expr, ast.Call) and not expr.args and isinstance(expr.func, ast.Attribute) and expr.func.attr == INPUT_EMBEDDINGS_CALL[:-2]:
                chain.append(INPUT_EMBEDDINGS_CALL)
                expr = expr.func.value
            else:
                break
        if not (isinstance(expr, ast.Name) and expr.id == self.base):
            return False, None, ""
        chain.reverse()
        named = chain[0] if chain and chain[0] != INPUT_EMBEDDINGS_CALL else None
        return (not chain), named, ".".join(chain)

    def hooks_a_part(self, receiver: ast.AST) -> bool:
        """A forward hook on a part of the object may make that part's output require grad: a
        submodule of it, or the object itself when it is a parameter (a helper handed a part)."""
        itself, _, path = self.target(receiver)
        return bool(path) or (itself and self.base in self.params)

    def then(self, later: Freeze) -> None:
        later.path = self.path
        self.freeze = self.freeze.then(later)

    def record(self, expr: ast.AST, frozen: Optional[bool], lineno: int, condition: Optional[list] = None) -> None:
        """`expr`'s parameters set to frozen (True), trainable (False) or either (None): those whose
        names (relative to `expr`) satisfy `condition`, or all of them."""
        if isinstance(expr, ast.Name) and expr.id in self.walks:
            modules, certain = self.walks[expr.id]
            for module in modules:
                # Turned back on for maybe only some: counted as on (what certainly stays frozen is
                # what a finding may rest on); frozen maybe: either.
                self.record(module, frozen if certain or frozen is False else None, lineno, condition)
            return
        whole, attr, path = self.target(expr)
        if not whole and not path:
            return
        line = lineno if frozen is not False else 0
        # `base.embed` / `base.embed.weight` is the submodule `embed`; `base.backbone.stem` only a
        # part of `backbone` (its path says which, for the class `backbone` holds).
        nested = path.count(".") > 1 or path.count(".") == 1 and path.rsplit(".", 1)[1] not in _PARAMETER_LEAVES
        parts = tuple(filter(None, [attr])) if not nested else ()
        if condition is None and frozen is not None:
            if whole:
                self.then(Freeze(everything=True, line=line) if frozen else Freeze(thawed=True))
            else:
                self.then(Freeze(attrs=parts, paths=(path,), line=line) if frozen else Freeze(unfrozen=parts, unfrozen_paths=(path,)))
        elif not whole and not attr:
            return  # a predicate on the names of a submodule whose name is not known
        elif whole:
            self.then(Freeze(by_name=([condition or _ALWAYS, frozen],), line=line))
        else:
            # Names relative to a submodule: the condition is only known to touch that submodule.
            within = ["startswith", f"{attr}."]
            self.then(Freeze(by_name=([["and", within, _UNKNOWN] if condition else within, frozen],), line=line))

    def walked(self, iterable: ast.AST) -> Optional[tuple[list[ast.expr], bool]]:
        """The modules a loop over `iterable` walks: a literal list or tuple (`*self.blocks` for the
        blocks), a name bound to one, or a slice of those (every element only maybe, unless the
        bounds are literal); None for anything else."""
        if isinstance(iterable, ast.Subscript) and isinstance(iterable.slice, ast.Slice):
            inner = self.walked(iterable.value)
            if inner is None:
                # Some elements of a container module (`self.vision.encoder.layers[-n:]`): reached
                # through the container, maybe not all of its elements.
                return ([iterable.value], False) if isinstance(iterable.value, ast.Attribute) else None
            bounds = [literal(b) if b is not None else (True, None) for b in (iterable.slice.lower, iterable.slice.upper, iterable.slice.step)]
            if all(known and (value is None or type(value) is int) for known, value in bounds) and not any(isinstance(m, ast.Starred) for m in inner[0]):
                lower, upper, step = (value for _, value in bounds)
                return inner[0][lower:upper:step], inner[1]
            return inner[0], False
        if isinstance(iterable, ast.Name):
            elements = self.lists.get(iterable.id)
        else:
            elements = iterable.elts if isinstance(iterable, (ast.List, ast.Tuple)) else None
        if elements is None:
            return None
        return [e.value if isinstance(e, ast.Starred) else e for e in elements], True

    def visit(self, node: ast.AST) -> None:
        if isinstance(node, ast.Assign) and _bind_local_list(node, self.lists):
            self.walks.pop(node.targets[0].id, None)  # type: ignore[attr-defined]
        if isinstance(node, ast.For) and isinstance(node.target, ast.Name):
            self.walks.pop(node.target.id, None)
            walked = self.walked(node.iter)
            if walked is not None:
                self.walks[node.target.id] = walked
        if isinstance(node, ast.For) and isinstance(node.iter, ast.Call) and isinstance(node.iter.func, ast.Attribute):
            if node.iter.func.attr in ("parameters", "named_parameters"):
                names = node.target.elts if isinstance(node.target, ast.Tuple) else [node.target]
                if names and isinstance(names[-1], ast.Name):
                    name = names[0].id if len(names) == 2 and isinstance(names[0], ast.Name) else None
                    self.loops[names[-1].id] = (node.iter.func.value, name)
                    self.condition_body(node.body, None, name)
        elif isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Attribute) and node.targets[0].attr == "requires_grad":
            self.requires_grad(node.targets[0].value, node.value, node, node.lineno)
        elif isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Attribute) and frozen_table(node.value) is not None:
            self.record(node.targets[0], frozen_table(node.value), node.lineno)
        elif isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Attribute) and _frozen_parameter(node.value):
            self.record(node.targets[0], True, node.lineno)  # `self.embed.weight = nn.Parameter(w, requires_grad=False)`
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            method = node.func.attr
            if method == "requires_grad_":
                self.requires_grad(node.func.value, node.args[0] if node.args else ast.Constant(True), node, node.lineno)
            elif method == "enable_input_require_grads" and any(self.target(node.func.value)[::2]):  # the object or a part of it
                self.then(Freeze(input_grad_hook=True))
            elif method == "register_forward_hook" and self.hooks_a_part(node.func.value):
                self.then(Freeze(input_grad_hook=True))
            elif method in ("disable_input_require_grads", "set_input_embeddings") and self.target(node.func.value)[0]:
                self.then(Freeze(hook_undone=True))
                if method == "set_input_embeddings" and node.args and frozen_table(node.args[0]):
                    # `set_input_embeddings(nn.Embedding.from_pretrained(weights))`: the new table is frozen.
                    self.then(Freeze(paths=(INPUT_EMBEDDINGS_CALL,), line=node.lineno))
            elif method in lightning.FINETUNING_METHODS and dotted(node.func.value) in self.finetuning:
                self.finetuning_call(node, *lightning.FINETUNING_METHODS[method])

    def finetuning_call(self, call: ast.Call, freezes: bool, train_bn: str, position: int) -> None:
        """`BaseFinetuning.freeze(modules, train_bn=True)`, `make_trainable(modules)`,
        `unfreeze_and_add_param_group(modules, optimizer)`: every parameter of `modules` (a module
        or a list of them) frozen or trainable, but for BatchNorm layers `freeze` keeps trainable."""
        modules = lightning.modules_argument(call)
        targets = modules.elts if isinstance(modules, (ast.List, ast.Tuple)) else [modules] if modules is not None else []
        flag = next((k.value for k in call.keywords if k.arg == train_bn), call.args[position] if train_bn and len(call.args) > position else None)
        keeps_norms = freezes and bool(train_bn) and (flag is None or literal(flag) != (True, False))
        for target in targets:
            whole, attr, path = self.target(target)
            if keeps_norms and (whole or path != attr):
                self.record(target, None, call.lineno)  # some BatchNorm somewhere inside may stay trainable
                continue
            self.record(target, freezes, call.lineno)
            if keeps_norms and attr:
                self.then(Freeze(norms_trainable=(attr,)))

    def condition_body(self, body: list[ast.stmt], condition: Optional[list], name: Optional[str]) -> None:
        """Note the name predicate each statement of a loop over parameters runs under."""
        both = lambda more: more if condition is None else ["and", condition, more]  # noqa: E731
        for stmt in body:
            if isinstance(stmt, ast.If):
                test = _name_predicate(stmt.test, name, self.params)
                self.condition_body(stmt.body, both(test), name)
                self.condition_body(stmt.orelse, both(["not", test]), name)
                if stmt.body and isinstance(stmt.body[-1], (ast.Continue, ast.Break, ast.Return)) and not stmt.orelse:
                    condition = both(["not", test])  # `if "lora" in n: continue`: the rest runs for the others
            elif isinstance(stmt, (ast.For, ast.AsyncFor, ast.While)):
                self.condition_body([*stmt.body, *stmt.orelse], both(_UNKNOWN), name)
            elif isinstance(stmt, (ast.With, ast.AsyncWith)):
                self.condition_body(stmt.body, condition, name)
            elif isinstance(stmt, ast.Try):
                self.condition_body([*stmt.body, *stmt.orelse, *stmt.finalbody, *(s for h in stmt.handlers for s in h.body)], condition, name)
            elif condition is not None:
                for node in nodes(stmt):
                    self.conditions[id(node)] = condition

    def requires_grad(self, owner: ast.AST, value: ast.AST, node: ast.AST, lineno: int) -> None:
        """`owner.requires_grad = value` or `owner.requires_grad_(value)`."""
        loop = self.loops.get(owner.id) if isinstance(owner, ast.Name) else None
        module, name = loop if loop is not None else (owner, None)
        condition = self.conditions.get(id(node)) if loop is not None else None
        known, flag = literal(value)
        if known and isinstance(flag, bool):
            self.record(module, not flag, lineno, condition)
            return
        predicate = _name_predicate(value, name, self.params)
        if predicate[0] == "unknown":
            self.record(module, None, lineno, condition)
        elif condition is None:
            self.record(module, False, lineno, predicate)
            self.record(module, True, lineno, ["not", predicate])
        else:
            self.record(module, False, lineno, ["and", condition, predicate])
            self.record(module, True, lineno, ["and", condition, ["not", predicate]])


# Predicates that hold for every parameter name, and that cannot be decided.
_ALWAYS = ["in", ""]
_UNKNOWN = ["unknown"]


def _name_predicate(test: ast.AST, name: Optional[str], params: frozenset[str] = frozenset()) -> list:
    """A condition on a parameter's name (`"lora" in n`, `n.startswith(("head", "fc"))`, `not ...`,
    `and`/`or`, `any(k in n for k in ("a", "b"))`) as a predicate; ["unknown"] for anything else.
    Texts a parameter of the enclosing function holds (`any(p in n for p in patterns)`) are
    ["texts", kind, parameter] until a call binds them (`bind_texts`)."""
    if name is None:
        return _UNKNOWN
    is_name = lambda node: isinstance(node, ast.Name) and node.id == name  # noqa: E731

    def any_of(kind: str, node: ast.AST) -> Optional[list]:
        texts = _strings(node)
        if texts is not None:
            return ["or", *([kind, t] for t in texts)]
        held = _texts_parameter(node, params)
        return ["texts", kind, held] if held is not None else None

    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        return ["not", _name_predicate(test.operand, name, params)]
    if isinstance(test, ast.BoolOp):
        return ["and" if isinstance(test.op, ast.And) else "or", *(_name_predicate(v, name, params) for v in test.values)]
    if isinstance(test, ast.Compare) and len(test.ops) == 1 and is_name(test.comparators[0]) and isinstance(test.ops[0], (ast.In, ast.NotIn)):
        known, text = literal(test.left)
        if known and isinstance(text, str):
            return ["in", text] if isinstance(test.ops[0], ast.In) else ["not", ["in", text]]
    if isinstance(test, ast.Call) and isinstance(test.func, ast.Attribute) and is_name(test.func.value) and test.func.attr in ("startswith", "endswith") and len(test.args) == 1:
        found = any_of(test.func.attr, test.args[0])
        if found is not None:
            return found
    if isinstance(test, ast.Call) and isinstance(test.func, ast.Name) and test.func.id == "any" and len(test.args) == 1:
        generator = test.args[0]
        if isinstance(generator, (ast.GeneratorExp, ast.ListComp)) and len(generator.generators) == 1:
            loop, element = generator.generators[0], generator.elt
            if not loop.ifs and isinstance(loop.target, ast.Name) and isinstance(element, ast.Compare) and len(element.ops) == 1:
                if isinstance(element.ops[0], ast.In) and is_name(element.comparators[0]) and isinstance(element.left, ast.Name) and element.left.id == loop.target.id:
                    return any_of("in", loop.iter) or _UNKNOWN
    return _UNKNOWN


def _prefixed(predicate: list, prefix: str) -> list:
    """A name predicate for the names of a part, read on the names of its holder (`prefix` + name):
    `startswith` texts get the prefix; `in` and `endswith` hold alike."""
    if predicate[0] == "startswith":
        return ["startswith", prefix + predicate[1]]
    if predicate[0] in ("not", "and", "or"):
        return [predicate[0], *(_prefixed(p, prefix) for p in predicate[1:])]
    return predicate


def _texts_parameter(node: ast.AST, params: frozenset[str]) -> Optional[str]:
    """The parameter `patterns` of `patterns`, `tuple(patterns)` or `list(patterns)`."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("tuple", "list", "set") and len(node.args) == 1 and not node.keywords:
        node = node.args[0]
    return node.id if isinstance(node, ast.Name) and node.id in params else None


def bind_texts(predicate: list, texts: dict[str, list[str]]) -> list:
    """`predicate` with each ["texts", kind, parameter] a call passes texts for made an `or` of them."""
    if predicate[0] == "texts":
        given = texts.get(predicate[2])
        return ["or", *([predicate[1], t] for t in given)] if given is not None else predicate
    if predicate[0] in ("not", "and", "or"):
        return [predicate[0], *(bind_texts(p, texts) for p in predicate[1:])]
    return predicate


def _strings(node: ast.AST) -> Optional[list[str]]:
    """The strings of a literal string, or of a tuple, list or set of them."""
    elements = node.elts if isinstance(node, (ast.Tuple, ast.List, ast.Set)) else [node]
    texts = [literal(e) for e in elements]
    return [t for _, t in texts] if all(known and isinstance(t, str) for known, t in texts) else None


# peft 0.21.2 (read and measured, tests/runtime/test_peft_order_runtime.py): these freeze every
# parameter of the model they are handed except the adapters they add inside its layers, and register
# the input-grad hook only if checkpointing is enabled on it already (`PeftModel.__init__`:
# `if getattr(model, "is_gradient_checkpointing", True)`).
# Freezes every parameter; hooks the inputs (and enables checkpointing) only for a quantized model.
_PEFT_KBIT = frozenset({"peft.prepare_model_for_kbit_training", "peft.utils.prepare_model_for_kbit_training", "peft.utils.other.prepare_model_for_kbit_training"})
# Adds the adapters to the model it is handed (the second argument) and returns that model, every
# other parameter frozen (measured: tests/runtime/test_adapter_libraries_runtime.py); no input-grad hook.
_PEFT_INJECT = frozenset({"peft.inject_adapter_in_model", "peft.mapping.inject_adapter_in_model"})
# loralib 0.1.2 `mark_only_lora_as_trainable(model, bias="none")`: freezes every parameter whose name
# lacks `lora_` (read in its source; measured in the same test).
_LORALIB_MARK = frozenset({"loralib.mark_only_lora_as_trainable", "loralib.utils.mark_only_lora_as_trainable"})
_HF_ENABLE_KWARGS = {"gradient_checkpointing_enable": "gradient_checkpointing_kwargs", "activation_checkpointing_enable": "activation_checkpointing_kwargs"}
_HF_DISABLE = frozenset({"gradient_checkpointing_disable", "activation_checkpointing_disable"})
# transformers' argument classes, and trl's configs deriving from them: `gradient_checkpointing=True`
# makes the Trainer call `gradient_checkpointing_enable(gradient_checkpointing_kwargs)`. A switch
# that is not a literal may be on (`gradient_checkpointing=args.gc`), as for the Trainer's own site.
_ARGUMENTS_SWITCH = re.compile(r"gradient_checkpointing\s*=(?!=)(?!\s*(?:False|None|0)\b)")
_TRAINING_ARGUMENTS = frozenset({"TrainingArguments", "Seq2SeqTrainingArguments", "SFTConfig", "DPOConfig", "GRPOConfig", "KTOConfig", "ORPOConfig", "CPOConfig", "RewardConfig", "PPOConfig"})
# transformers' `PeftAdapterMixin.add_adapter(config)` runs peft's `inject_adapter_in_model` on the
# model itself (every parameter but the adapters frozen) and sets `_hf_peft_config_loaded`
# (measured on 5.23 / peft 0.21.2: tests/runtime/test_adapter_libraries_runtime.py).
_HF_ADD_ADAPTER = "add_adapter"


def _adapter_added(call: ast.Call, path: str) -> Freeze:
    return Freeze(everything=True, adapter_loaded=True, line=call.lineno, path=path)


def _model_argument(call: ast.Call, callee: str) -> Optional[ast.AST]:
    """The model an adapter library's call is handed: its first argument (the second for
    `inject_adapter_in_model(config, model)`), or `model=`."""
    position = 1 if callee in _PEFT_INJECT else 0
    return call.args[position] if len(call.args) > position else next((k.value for k in call.keywords if k.arg == "model"), None)


def _built_without_weights(constructor: str) -> bool:
    """Whether a model built by `constructor` (qualified) holds no loaded weights: a class called
    (`ViTForImageClassification(config)`, a project's `Net()`) or `from_config`, not `from_pretrained`
    or a factory function. peft asks the object itself whether it is quantized."""
    last = constructor.rsplit(".", 1)[-1]
    return last == "from_config" or last[:1].isupper()


def might_switch_hf_checkpointing(source: str) -> bool:
    """Cheap text test before `hf_enables` walks a file."""
    # Not `self.gradient_checkpointing = ...`, in every transformers model: an attribute, not a keyword.
    return "checkpointing_enable" in source or at_word_start(_ARGUMENTS_SWITCH, source, not_after="_.") is not None


def hf_enables(tree: ast.Module) -> list[tuple[int, Optional[bool]]]:
    """Every `model.gradient_checkpointing_enable(...)`, and every `TrainingArguments(...)` that
    switches checkpointing on for its Trainer, and the mode its literal kwargs select."""
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        if isinstance(node.func, ast.Attribute) and node.func.attr in _HF_ENABLE_KWARGS:
            spelled = next((k.value for k in node.keywords if k.arg == _HF_ENABLE_KWARGS[node.func.attr]), node.args[0] if node.args else None)
        elif _name_of(node.func) in _TRAINING_ARGUMENTS and any(k.arg == "gradient_checkpointing" and _may_be_on(k.value) for k in node.keywords):
            spelled = next((k.value for k in node.keywords if k.arg == "gradient_checkpointing_kwargs"), None)
        else:
            continue
        try:
            kwargs = ast.literal_eval(spelled) if spelled is not None else None
        except ValueError:
            continue  # not a literal: the mode is unknown, say nothing
        if kwargs is None:
            found.append((node.lineno, None))
        elif isinstance(kwargs, dict):
            # A dict without the flag reaches torch unchanged: reentrant.
            flag = kwargs.get("use_reentrant", True)
            found.append((node.lineno, flag if isinstance(flag, bool) else None))
    return found


def _may_be_on(switch: ast.expr) -> bool:
    known, value = literal(switch)
    return bool(value) or not known


def _name_of(func: ast.expr) -> Optional[str]:
    """The last name a callee spells: `TrainingArguments` of `transformers.TrainingArguments(...)`."""
    return func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None


class _Reads:
    """Names and attributes some code reads and stores, from one walk that also collects factory-built classes."""

    def __init__(
        self,
        summarizer: "_Summarizer",
        roots: list[ast.AST],
        built: list[str],
        params: Optional[frozenset[str]] = None,
        methods: frozenset[str] = frozenset(),
        models: Optional[list[str]] = None,  # script code: collect the classes it builds as models
    ) -> None:
        self.loads: set[str] = set()
        self.stores: set[str] = set()
        self.attrs: set[str] = set()
        self.self_stores: set[str] = set()
        self.stashes = False
        # In a function: calls handing on one of its parameters (or `self`) as the first argument.
        self.forwarding: list[list[str]] = []
        # Classes a type check names (`isinstance(m, (Net, nn.Linear))`): neither built nor handed on.
        type_checked: set[int] = set()
        handed_back: set[int] = set()
        for root in roots:
            for node in nodes(root):
                kind = type(node)
                if kind is ast.Name:
                    (self.loads if type(node.ctx) is ast.Load else self.stores).add(node.id)
                    continue
                if kind is ast.Attribute:
                    receiver = node.value
                    if type(node.ctx) is ast.Load:
                        self.attrs.add(node.attr)
                    elif _is_self(receiver):
                        self.self_stores.add(node.attr)
                    elif type(receiver) is ast.Name or type(receiver) is ast.Attribute and _is_self(receiver.value):
                        self.stashes = True  # `block.x = ...`, `self.block.x = ...`: state on a module
                        if type(receiver) is ast.Name and receiver.id in summarizer.imports:
                            summarizer.module_stores.add(f"{summarizer.imports[receiver.id]}.{node.attr}")  # `settings.FLAG = ...`
                    continue
                if kind is ast.Subscript and type(node.ctx) is not ast.Load and type(node.value) is ast.Name:
                    summarizer.filled.add(node.value.id)  # `MODELS["vit"] = ViT`: maybe a registry filled
                if models is not None and kind is ast.Call:
                    built_class = _project_name(summarizer, node.func)
                    if built_class is not None and not _function_like(built_class):
                        summarizer.constructions.setdefault(built_class, []).append(_call_arguments(node, frozenset()))
                if models is not None and kind is ast.For and type(node.iter) in (ast.Tuple, ast.List):
                    # `for model in (Net(), Wide()): train(model)`: each one built there is a whole model.
                    for element in node.iter.elts:  # type: ignore[attr-defined]
                        built_model = _constructed(summarizer, element) if type(element) is ast.Call else None
                        if built_model is not None:
                            models.append(built_model)
                            handed_back.add(id(element))
                if models is not None and (kind is ast.Assign or kind is ast.Call):
                    built_models = _models_built(summarizer, node)
                    if built_models:
                        models.extend(built_models)
                        if kind is ast.Assign:
                            # `model = freeze(Net())`: the helper hands `Net()` back, so it is the model, not a part
                            # (nor is each of `student, teacher = Net(), Net()`).
                            values = _assigned_values(node)
                            handed_back.update(id(c) for v in values for c in (v, *_handed_back(summarizer, v)))
                            for value in values:
                                # A helper of another module: whether it hands `Net()` back is known once the project is.
                                handed = _handed_elsewhere(summarizer, value)
                                if handed is not None:
                                    handed_back.add(id(value.args[0]))
                                    summarizer.handed_models.append(handed)
                    elif kind is ast.Call:
                        # `train(Net(), loader)`: a model built for a function of this module is whole, not a part.
                        for built_model, argument in _handed_to_functions(summarizer, node):
                            models.append(built_model)
                            handed_back.add(id(argument))
                        if not summarizer.trains:
                            summarizer.trains = _trains(summarizer, node)
                if kind is ast.Return:
                    candidates = [node.value] if node.value is not None else []
                elif kind is ast.List or kind is ast.Tuple or kind is ast.Set:
                    candidates = node.elts if id(node) not in type_checked else []
                elif kind is ast.Dict:
                    candidates = [v for v in node.values if v is not None]
                elif kind is ast.Call:
                    candidates = [*node.args, *(k.value for k in node.keywords)]
                    func = node.func
                    if type(func) is ast.Attribute and func.attr in FILLING_METHODS and type(func.value) is ast.Name:
                        summarizer.filled.add(func.value.id)
                    if type(func) is ast.Attribute and func.attr == "fit":
                        # `trainer.fit(LitModel(), ...)`: the whole model a trainer trains, not a submodule
                        candidates = [c for c in candidates if c is not _fitted_model(node)]
                    if _is_type_check(node):
                        type_checked.add(id(node.args[1]))
                        candidates = [node.args[0]]
                    if params is not None and node.args:
                        handed = _handed_callable(summarizer, node.args[0], params)
                        callee = _forwarded_to(summarizer, node.func) if handed else None
                        if callee and [callee, handed] not in self.forwarding:
                            self.forwarding.append([callee, handed])
                else:
                    continue
                for candidate in candidates:
                    if id(candidate) in handed_back:
                        continue
                    name = _project_name(summarizer, candidate.func if isinstance(candidate, ast.Call) else candidate)
                    if name:
                        built.append(name)

    def merge(self, other: "_Reads") -> None:
        self.loads |= other.loads
        self.stores |= other.stores
        self.attrs |= other.attrs
        self.self_stores |= other.self_stores
        self.stashes = self.stashes or other.stashes


# Callees that never run a checkpoint on what they are handed (besides the checkpoint APIs themselves).
_NOT_WRAPPERS = ("builtins.", "functools.", "itertools.", "operator.", "math.", "numpy.", "typing.", "torch.")


def recompute_layout(node: ast.ClassDef, qualify: Callable[[ast.expr], Optional[str]]) -> Optional[tuple[int, int, bool]]:
    """For an autograd.Function that checkpoints, recognised by what it does (not its name):
    `forward(ctx, fn, ...)` calls `fn` (or `ctx.X` after `ctx.X = fn`) under `torch.no_grad()` and
    `backward` calls it again under `torch.enable_grad()`. (Where `apply` takes the callable, where
    the inputs start, whether backward restores torch's RNG state.) `qualify` names what an
    expression refers to (statically, or from a loaded module's globals in --confirm)."""
    methods = {m.name: m for m in node.body if isinstance(m, ast.FunctionDef)}
    forward, backward = methods.get("forward"), methods.get("backward")
    if forward is None or backward is None or len(forward.args.args) < 2 or not backward.args.args:
        return None
    ctx, params = forward.args.args[0].arg, [a.arg for a in forward.args.args[1:]]
    stored = {
        target.attr: stmt.value.id
        for stmt in ast.walk(forward) if isinstance(stmt, ast.Assign) and isinstance(stmt.value, ast.Name) and stmt.value.id in params
        for target in stmt.targets if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) and target.value.id == ctx
    }  # fmt: skip
    run = {_called(call, ctx, stored) for call in _calls_within(forward, NO_GRAD_CONTEXTS, qualify)}
    rerun = {_called(call, backward.args.args[0].arg, stored) for call in _calls_within(backward, ENABLE_GRAD, qualify)}
    handed = next((name for name in params if name in run and name in rerun), None)
    if handed is None:
        return None
    index = params.index(handed)
    inputs_from = len(params) if forward.args.vararg is not None else index + 1
    restores = any(qualify(call.func) in RNG_RESTORERS for call in ast.walk(backward) if isinstance(call, ast.Call))
    return index, inputs_from, restores


def _calls_within(function: ast.FunctionDef, contexts: frozenset[str], qualify: Callable[[ast.expr], Optional[str]]) -> Iterator[ast.Call]:
    """Calls inside `with <context>():` blocks of `function`."""
    for block in ast.walk(function):
        if isinstance(block, ast.With) and any(
            isinstance(item.context_expr, ast.Call) and qualify(item.context_expr.func) in contexts for item in block.items
        ):
            yield from (n for statement in block.body for n in ast.walk(statement) if isinstance(n, ast.Call))


def _called(call: ast.Call, ctx: str, stored: dict[str, str]) -> Optional[str]:
    """The forward parameter a call runs: `fn(...)`, or `ctx.X(...)` after `ctx.X = fn`."""
    func = call.func
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == ctx:
        return stored.get(func.attr)
    return None


def _ordered_params(function: Union[ast.FunctionDef, ast.AsyncFunctionDef]) -> tuple[str, ...]:
    arguments = function.args
    return tuple(a.arg for a in (*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs))


def _agreed(contexts: Iterable[Optional[dict]]) -> Optional[dict]:
    """What every context says alike; None when one of them is not known at all."""
    agreed: Optional[dict] = None
    for known in contexts:
        if known is None:
            return None
        agreed = known if agreed is None else {name: value for name, value in agreed.items() if known.get(name) == value}
    return agreed


def _positions_and_defaults(function: Union[ast.FunctionDef, ast.AsyncFunctionDef]) -> dict[str, list]:
    """Parameter -> [position, [literal default] or []] (keyword-only ones have no position a call fills)."""
    names, defaults = _signature(function, skip_self=False)
    positional = {a.arg for a in (*function.args.posonlyargs, *function.args.args)}
    return {name: [index if name in positional else -1, [defaults[name]] if name in defaults else []] for index, name in enumerate(names)}


def _signature(init: Union[ast.FunctionDef, ast.AsyncFunctionDef], skip_self: bool = True) -> tuple[tuple[str, ...], dict[str, Literal]]:
    """`__init__`'s parameters after `self` (a function's: all of them), and their literal defaults."""
    arguments = init.args
    positional = [*arguments.posonlyargs, *arguments.args]
    defaults = dict(zip((a.arg for a in positional[len(positional) - len(arguments.defaults) :]), arguments.defaults))
    defaults.update((a.arg, d) for a, d in zip(arguments.kwonlyargs, arguments.kw_defaults) if d is not None)
    literals = {}
    for name, node in defaults.items():
        known, value = literal(node)
        if known:
            literals[name] = value
    return _ordered_params(init)[1 if skip_self else 0 :], literals


def _flags_set(method: Union[ast.FunctionDef, ast.AsyncFunctionDef]) -> dict[str, list]:
    """`ClassSummary.flag_setters` of one method: `self.<attr> = True/False` or `= <parameter>` among
    the statements of its body itself (not under an `if`, loop or `try`: those run on every path),
    before any `return`."""
    params, defaults = _signature(method)
    flags: dict[str, list] = {}
    for stmt in method.body:
        if isinstance(stmt, (ast.Return, ast.Raise)):
            break
        if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and _self_attr(stmt.targets[0])):
            continue
        attr = _self_attr(stmt.targets[0])
        known, value = literal(stmt.value)
        if known and isinstance(value, bool):
            flags[attr] = ["const", value]
        elif isinstance(stmt.value, ast.Name) and stmt.value.id in params:
            name = stmt.value.id
            flags[attr] = ["param", name, params.index(name), [defaults[name]] if name in defaults else []]
        else:
            flags.pop(attr, None)
    return flags


def _single_construction(value: ast.AST, qualify: Callable[[ast.expr], Optional[str]]) -> Optional[ast.Call]:
    """The one constructor call an attribute's value spells (through a one-element container or a
    comprehension); None when it holds several or none."""
    if isinstance(value, ast.Call):
        if qualify(value.func) in CONTAINERS:
            return _single_construction(value.args[0], qualify) if len(value.args) == 1 and not value.keywords else None
        return value
    if isinstance(value, (ast.List, ast.Tuple)) and len(value.elts) == 1:
        return _single_construction(value.elts[0], qualify)
    if isinstance(value, (ast.ListComp, ast.GeneratorExp)):
        return _single_construction(value.elt, qualify)
    return None


def _call_arguments(call: ast.Call, init_params: frozenset[str], forwarded: Optional[str] = None) -> Optional[dict[str, list]]:
    """What a constructor call passes, argument by argument (see `AttrBinding.arguments`). A builder
    whose `**` parameter is `forwarded` may spread it (`Net(**kwargs)`, `**{**SIZES[name], **kwargs}`,
    `**dict(SIZES[name], **kwargs)`): key "**" then says what fills the parameters not passed by
    name, ["kwargs"] (what its callers pass beyond its own parameters, the others keeping their
    defaults), ["kwargs", "?"] (those, the others unknown) or ["?"] (unknown)."""
    if any(isinstance(a, ast.Starred) for a in call.args):
        return None
    spreads = [k.value for k in call.keywords if k.arg is None]
    rest = _spread_rest(spreads, forwarded) if spreads else None
    if spreads and (forwarded is None or rest is None):
        return None

    def described(node: ast.AST) -> list:
        known, value = literal(node) if not isinstance(node, ast.Dict) else _small_literal(node)  # `{"use_reentrant": True}` too
        if known:
            return ["const", value]
        if isinstance(node, ast.Name) and node.id in init_params:
            return ["param", node.id]
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in init_params:
            return ["attr", node.value.id, node.attr]  # `nn.Dropout(config.dropout)`
        if isinstance(node, ast.Dict) and node.keys and all(isinstance(k, ast.Constant) and isinstance(k.value, str) for k in node.keys):
            return ["dict", {k.value: described(v) for k, v in zip(node.keys, node.values)}]  # type: ignore[union-attr]  # `{"use_reentrant": args.reentrant}`
        return ["?"]

    arguments = {f"#{i}": described(a) for i, a in enumerate(call.args)}
    arguments.update((k.arg, described(k.value)) for k in call.keywords if k.arg is not None)
    if rest:
        arguments["**"] = rest
    return arguments


def _spread_rest(spreads: list[ast.expr], forwarded: Optional[str]) -> Optional[list]:
    """What `**` spreads pass beyond named keywords, in order (a later one wins): see `_call_arguments`;
    None when a spread names keys itself (a dict display with keys: not followed)."""
    rest: list = []
    for spread in spreads:
        parts: list[ast.expr] = [spread]
        if type(spread) is ast.Dict and all(key is None for key in spread.keys):
            parts = list(spread.values)  # `{**SIZES[name], **kwargs}`
        elif type(spread) is ast.Call and type(spread.func) is ast.Name and spread.func.id == "dict" and not any(k.arg for k in spread.keywords):
            parts = [*spread.args, *(k.value for k in spread.keywords)]  # `dict(SIZES[name], **kwargs)`
        elif type(spread) is ast.Dict:
            return None
        for part in parts:
            if type(part) is ast.Name and part.id == forwarded:
                rest = ["kwargs", "?"] if "?" in rest else ["kwargs"]
            else:
                rest = ["?"]  # a table of settings: any parameter, also one the callers passed
    return rest


def _function_like(qualname: Optional[str]) -> bool:
    """Named like a function rather than a class (`freeze_backbone`, not `Wrapper`)."""
    return qualname is not None and qualname.rsplit(".", 1)[-1].lstrip("_")[:1].islower()


def _root_name(value: ast.AST) -> Optional[str]:
    """The variable a value is the same object as: `model.to(device).train()`, `helper(model, ...)`."""
    while type(value) is ast.Call:
        func = value.func
        if type(func) is ast.Attribute and func.attr in MODULE_SELF_METHODS:
            value = func.value
        elif value.args:
            value = value.args[0]
        else:
            return None
    return value.id if type(value) is ast.Name else None


# nn.Module methods that neither freeze nor unfreeze anything (calls on a model not worth following).
_MODULE_API = frozenset(
    {
        "parameters", "named_parameters", "modules", "named_modules", "children", "named_children", "state_dict",
        "load_state_dict", "zero_grad", "forward", "apply", "register_buffer", "register_forward_hook",
        "register_forward_pre_hook", "register_full_backward_hook", "requires_grad_", "enable_input_require_grads",
        "disable_input_require_grads", "gradient_checkpointing_enable", "activation_checkpointing_enable",
        "add_module", "get_submodule", "get_parameter", "extra_repr", "size", "view", "item", "numel",
        "append", "extend", "update", "items", "keys", "values", "get", "pop", "format", "join", "split",
    } | MODULE_SELF_METHODS
)  # fmt: skip


# Class methods that load a whole model (transformers, and project classes that copy its API).
_MODEL_LOADERS = frozenset({"from_pretrained", "from_config"})


def _is_type_check(call: ast.Call) -> bool:
    func = call.func
    return type(func) is ast.Name and func.id in ("isinstance", "issubclass") and len(call.args) == 2


def _models_built(summarizer: "_Summarizer", node: ast.AST) -> list[str]:
    """The project classes that script code builds as models: `model = Net(...)` (or
    `student, teacher = Net(), Net()`), also through `Net(...).to(device)` and the like and through
    helpers it is handed to first (`model = freeze(Net())`), or `Net.from_pretrained(...)` anywhere in it."""
    if isinstance(node, ast.Call):
        func = node.func
        loaded = _project_name(summarizer, func.value) if isinstance(func, ast.Attribute) and func.attr in _MODEL_LOADERS else None
        return [loaded] if loaded else []
    assert isinstance(node, ast.Assign)
    return [name for value in _assigned_values(node) if (name := _constructed(summarizer, value)) is not None]


def _assigned_values(node: ast.Assign) -> list[ast.Call]:
    """The calls an assignment binds to plain names: `a = f()`, `a, b = f(), g()`."""
    if len(node.targets) != 1:
        return []
    target, value = node.targets[0], node.value
    if isinstance(target, ast.Name):
        pairs = [(target, value)]
    elif isinstance(target, ast.Tuple) and isinstance(value, ast.Tuple) and len(target.elts) == len(value.elts):
        pairs = list(zip(target.elts, value.elts))
    else:
        return []
    return [v for t, v in pairs if isinstance(t, ast.Name) and isinstance(v, ast.Call)]


def _constructed(summarizer: "_Summarizer", value: ast.Call) -> Optional[str]:
    """The project class `Net(...)` builds, also through `Net(...).to(device)` and the like and
    through helpers it is handed to first (`freeze(Net())`)."""
    while True:
        func = value.func
        if isinstance(func, ast.Attribute) and func.attr in MODULE_SELF_METHODS and isinstance(func.value, ast.Call):
            value = func.value
        elif value.args and isinstance(value.args[0], ast.Call) and _function_like(dotted(func)):
            value = value.args[0]
        else:
            return _project_name(summarizer, func)


def _handed_to_functions(summarizer: "_Summarizer", call: ast.Call) -> Iterator[tuple[str, ast.Call]]:
    """The project classes built right in the arguments of a call of this module's own function,
    or of a plain class of it (`Runner(Net())`: an object that runs the model, not a module), and
    the model built right in a transformers Trainer's call (`Trainer(model=Net(), args=...)`)."""
    callee = summarizer.qualify(call.func)
    if callee in HF_TRAINERS:
        arguments = [k.value for k in call.keywords if k.arg == "model"] or call.args[:1]
    elif callee in summarizer.whole_model_takers:
        arguments = [*call.args, *(k.value for k in call.keywords)]
    else:
        return
    for argument in arguments:
        built = _constructed(summarizer, argument) if isinstance(argument, ast.Call) else None
        if built is not None:
            yield built, argument


def _handed_elsewhere(summarizer: "_Summarizer", value: ast.Call) -> Optional[list[str]]:
    """[class, helper] for `model = helper(Net())` with a function-like helper that is not this
    module's own (`add_activation_checkpointing` imported from the project's `dist.py`)."""
    helper = summarizer.qualify(value.func) if isinstance(value.func, (ast.Name, ast.Attribute)) else None
    if helper is None or not _function_like(helper) or helper.startswith(f"{summarizer.module}.") or not value.args or not isinstance(value.args[0], ast.Call):
        return None
    built = _constructed(summarizer, value.args[0])
    return [built, helper] if built is not None else None


def _handed_back(summarizer: "_Summarizer", value: ast.Call) -> Iterator[ast.Call]:
    """The calls inside `helper(Net())` / `helper(Net().train())` whose object a helper of this module
    returns unchanged (`summarizer.pass_through`): the object bound is theirs."""
    while value.args and isinstance(value.args[0], ast.Call) and summarizer.qualify(value.func) in summarizer.pass_through:
        value = value.args[0]
        yield value


def _note_mode_steps(
    found: dict[str, dict], name: str, function: Union[ast.FunctionDef, ast.AsyncFunctionDef], qualify: Callable[[ast.expr], Optional[str]],
    owner: Optional[str] = None, methods: frozenset[str] = frozenset(),
) -> None:
    steps, returned = mode_steps(function, qualify, owner, methods)
    if steps or returned:
        arguments = function.args
        found[name] = {
            "params": [a.arg for a in (*arguments.posonlyargs, *arguments.args)],
            "keywords": [a.arg for a in arguments.kwonlyargs],
            "star": arguments.vararg.arg if arguments.vararg else None,
            "star_star": arguments.kwarg.arg if arguments.kwarg else None,
            "steps": steps,
            "returns": returned,
        }


def _parameter_at(entry: dict, slot: Union[int, str], bound: bool) -> Optional[str]:
    """The parameter of a `ModuleSummary.mode_steps` entry that a call fills at `slot` (`*args` and
    `**kwargs` too; None: none)."""
    if isinstance(slot, str):
        return slot if slot in entry["params"] or slot in entry["keywords"] else entry["star_star"]
    positional = entry["params"][1:] if bound else entry["params"]
    return positional[slot] if slot < len(positional) else entry["star"]


def _returns_first_param(function: Union[ast.FunctionDef, ast.AsyncFunctionDef]) -> bool:
    """Every `return` of `function` (not of the functions it defines) returns its first parameter,
    unchanged. Stops at the first one that does not: this runs for every function of the project."""
    params = _ordered_params(function)
    if not params:
        return False
    found = False
    stack: list[ast.AST] = list(function.body)
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Return):
            if not (isinstance(node.value, ast.Name) and node.value.id == params[0]):
                return False
            found = True
        elif not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda, ast.expr)):
            stack.extend(ast.iter_child_nodes(node))
    return found


# What training code calls: `loss.backward()`, `trainer.fit(model)`; optimizers and trainers it builds.
_TRAINING_METHODS = frozenset({"backward", "fit"})
_TRAINERS = HF_TRAINERS | LIGHTNING_TRAINERS


def _trains(summarizer: "_Summarizer", call: ast.Call) -> bool:
    func = call.func
    if isinstance(func, ast.Attribute) and func.attr in _TRAINING_METHODS:
        return True
    name = summarizer.qualify(func) if isinstance(func, (ast.Name, ast.Attribute)) else None
    return name is not None and (name.startswith("torch.optim.") or name in _TRAINERS)


def _project_name(summarizer: "_Summarizer", node: ast.AST) -> Optional[str]:
    """A name defined in this module or imported into it (a class of the project, maybe)."""
    name = summarizer.qualify(node) if isinstance(node, (ast.Name, ast.Attribute)) else None
    return name if name and (name.startswith(summarizer.module + ".") or name in summarizer.imports.values()) else None


def _params(function: Union[ast.FunctionDef, ast.AsyncFunctionDef]) -> frozenset[str]:
    arguments = function.args
    names = [a.arg for a in (*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs)]
    return frozenset(names)


def _forwarded_to(summarizer: "_Summarizer", func: ast.AST) -> Optional[str]:
    """The callee of a call handing on a callable, when it may run a checkpoint: a checkpoint API,
    `self.NAME` (transformers' `self._gradient_checkpointing_func`, a method of the same class, an
    attribute bound to a checkpoint function), or a function of this module or another (library
    functions are left out)."""
    if isinstance(func, ast.Attribute) and _is_self(func.value):
        return f"self.{func.attr}"  # a method, or an attribute holding a checkpoint function
    callee = summarizer.qualify(func)
    if callee is None or callee in KNOWN_APIS:
        return callee
    return None if callee.startswith(_NOT_WRAPPERS) else callee


def _handed_callable(summarizer: "_Summarizer", arg: ast.AST, params: frozenset[str]) -> Optional[str]:
    """What a call's first argument hands on, when it is the caller's own: `fn`, `partial(fn, ...)`,
    `fn.__call__` for a parameter `fn` ("param:fn"); `self`, `super().__call__` ("self");
    `self.block` ("self.block")."""
    if isinstance(arg, ast.Call) and arg.args and summarizer.qualify(arg.func) in PARTIAL:
        arg = arg.args[0]
    if isinstance(arg, ast.Attribute) and arg.attr in ("__call__", "forward"):
        base = arg.value
        if isinstance(base, ast.Call) and isinstance(base.func, ast.Name) and base.func.id == "super":
            return "self" if arg.attr == "__call__" and "self" in params else None
        arg = base
    if isinstance(arg, ast.Name) and arg.id in params:
        return "self" if arg.id == "self" else f"param:{arg.id}"
    if isinstance(arg, ast.Attribute) and _is_self(arg.value) and "self" in params:
        return f"self.{arg.attr}"
    return None


def _joined(names: Iterable[str]) -> str:
    return " ".join(sorted(names))


def _is_self(node: ast.AST) -> bool:
    return type(node) is ast.Name and node.id == "self"


def _first_line(node: ast.stmt) -> int:
    return min([node.lineno, *(d.lineno for d in getattr(node, "decorator_list", ()))])


def _self_attr(node: ast.AST) -> Optional[str]:
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self":
        return node.attr
    return None


def _self_targets(target: ast.AST, value: ast.AST) -> Iterator[tuple[str, ast.AST]]:
    """(attribute, value) for `self.a = v`, `self.a, self.b = v1, v2` and `self.a, self.b = (f() for ...)`."""
    attr = _self_attr(target)
    if attr is not None:
        yield attr, value
    elif isinstance(target, (ast.Tuple, ast.List)):
        if isinstance(value, (ast.Tuple, ast.List)) and len(value.elts) == len(target.elts):
            for element, part in zip(target.elts, value.elts):
                yield from _self_targets(element, part)
        elif isinstance(value, (ast.GeneratorExp, ast.ListComp)):
            for element in target.elts:
                yield from _self_targets(element, value.elt)


def _small_literal(node: ast.AST) -> tuple[bool, object]:
    """(known, value) of a small literal, dicts and lists of literals included (`_plain_literal`)."""
    try:
        value = ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return False, None
    return (True, value) if _plain_literal(value) else (False, None)


def _dict_literal(node: ast.AST) -> Optional[dict]:
    """A dict of small literals spelled `{...}` or `dict(key=literal, ...)` (`dict()` too)."""
    if type(node) is ast.Call and type(node.func) is ast.Name and node.func.id == "dict" and not node.args:
        found = {k.arg: _small_literal(k.value) for k in node.keywords}
        return {k: v for k, (_, v) in found.items()} if all(k is not None and known for k, (known, _) in found.items()) else None  # type: ignore[misc]
    if type(node) is not ast.Dict:
        return None
    known, value = _small_literal(node)
    return value if known else None  # type: ignore[return-value]


def _defaulted_param(value: ast.AST, params: frozenset[str]) -> Optional[tuple[str, list]]:
    """(parameter, [literal, falsy]) for `param or literal`, `literal if param is None else param`
    and `param if param is not None else literal`; None for anything else."""
    if type(value) is ast.BoolOp and type(value.op) is ast.Or and len(value.values) == 2:
        name, default = value.values
        known, literal_value = _small_literal(default)
        if type(name) is ast.Name and name.id in params and known:
            return name.id, [literal_value, True]
    if type(value) is ast.IfExp and type(value.test) is ast.Compare and len(value.test.ops) == 1:
        test = value.test
        tested = test.left if type(test.left) is ast.Name else None
        if tested is None or tested.id not in params or not (type(test.comparators[0]) is ast.Constant and test.comparators[0].value is None):
            return None
        default, kept = (value.body, value.orelse) if type(test.ops[0]) is ast.Is else (value.orelse, value.body) if type(test.ops[0]) is ast.IsNot else (None, None)
        known, literal_value = _small_literal(default) if default is not None else (False, None)
        if known and type(kept) is ast.Name and kept.id == tested.id:
            return tested.id, [literal_value, False]
    return None


def _merge(old: AttrBinding, new: AttrBinding) -> AttrBinding:
    """An attribute assigned on several paths may hold any of the values."""
    same_constant = old.has_constant and new.has_constant and old.constant == new.constant
    return AttrBinding(
        tuple(dict.fromkeys(old.constructors + new.constructors)),
        old.container or new.container,
        old.constant if same_constant else None,
        same_constant,
        old.is_lambda or new.is_lambda,
        old.is_buffer or new.is_buffer,
        old.parameter if old.parameter == new.parameter else None,
        old.param if old.param == new.param and old.fallback == new.fallback else None,
        old.fallback if old.param == new.param and old.fallback == new.fallback else None,
        old.arguments if old.arguments == new.arguments else None,
    )


def summarize(source: str, path: str, module: str, is_package: bool) -> ModuleSummary:
    """Raises SyntaxError/ValueError for unparsable sources; the engine reports them."""
    tree = ast.parse(source, filename=path)
    check_future_imports(tree, source, path)
    return _Summarizer(module, is_package).summarize(tree, path, source)


def fitted_callbacks(summary: ModuleSummary, class_qualname: str) -> list:
    """The callbacks ([constructor, arguments]) a Lightning Trainer of the module is built with
    where it fits an instance of the class (the first such fit); [] when none is visible."""
    for key, steps in summary.instance_freezes.items():
        if key.rsplit("|", 1)[-1] == class_qualname:
            found = next((step.callbacks for step in steps if step.callbacks), "")
            if found:
                return json.loads(found)
    return []


_MAX_ALIAS_HOPS = 32
# How many calls deep freezing is followed (a helper calling a method calling a helper ...).
_MAX_FREEZE_DEPTH = 6
_NO_FREEZE: tuple[Freeze, frozenset[str]] = (Freeze(), frozenset())
# Statements that may call one function: beyond this, its callers are taken as unknown.
_MAX_CALLER_BLOCKS = 16


class ProjectIndex:
    """All module summaries of a run, with re-export-aware lookups."""

    def __init__(self, modules: dict[str, ModuleSummary]) -> None:
        self.modules = modules
        self._constructed: Optional[frozenset[str]] = None
        self._models: Optional[frozenset[str]] = None
        self._constructions: Optional[dict[str, list[Optional[dict[str, list]]]]] = None
        self._submodule_bindings: Optional[dict[str, list[tuple[str, AttrBinding]]]] = None
        self._factory_built: Optional[frozenset[str]] = None
        self._init_values: dict[str, Context] = {}
        self._call: Optional[tuple[str, dict[str, object]]] = None  # see `_calling`
        self._registries: dict[str, Optional[tuple[str, ...]]] = {}
        self._registry_names: Optional[frozenset[str]] = None
        self._holding: Optional[dict[str, list[str]]] = None
        self._freezes: dict[str, tuple[Freeze, frozenset[str]]] = {}
        # Class -> (holding class, attribute) for every plain submodule attribute; holders being folded.
        self._holders: Optional[dict[str, list[tuple[str, str]]]] = None
        self._freezes_active: set[str] = set()
        self._never_checkpointed: dict[str, bool] = {}
        self._instance_steps: Optional[dict[str, list[list[FreezeStep]]]] = None
        self._call_effects: dict[tuple[str, str, str, Optional[str]], tuple[Freeze, frozenset[str]]] = {}
        self._hf_enable: Optional[list[tuple[str, int]]] = None
        self._constants: Optional[dict[str, object]] = None
        self._wrapped: Optional[dict[str, list[tuple[str, ActivationWrap]]]] = None
        self._held_wraps: dict[tuple[str, str], list[tuple[str, ActivationWrap]]] = {}
        self._canonical: dict[str, str] = {}
        self._split: dict[str, tuple[Optional[ModuleSummary], str]] = {}
        self._subclass: dict[tuple[str, frozenset[str]], bool] = {}
        self._ancestors: dict[str, tuple[str, ...]] = {}
        self._attribute_holders: dict[tuple[str, str], Optional[ClassSummary]] = {}
        # Files whose line numbers the current analysis read (summary digests leave positions out).
        self.cited: set[str] = set()
        self._mode_active: set[tuple[str, str, str]] = set()
        self._imports_text: dict[str, bool] = {}
        self._imported_by_text: Optional[set[str]] = None
        self._bound_as: Optional[dict[str, list[tuple[str, str]]]] = None
        self._subclasses: Optional[dict[str, list[str]]] = None
        self._subclasses_of: dict[str, list[str]] = {}
        self._redefinitions: dict[tuple[str, str], list[str]] = {}
        self._readers: dict[str, dict[str, list[int]]] = {}
        self._callers: dict[str, list[tuple[ModuleSummary, Optional[str]]]] = {}
        self._read_only_in: dict[tuple[str, str], bool] = {}
        self._imported: Optional[dict[str, set[str]]] = None
        self._object_holders: dict[str, set[str]] = {}
        self._contains: dict[tuple[str, str], bool] = {}
        self._forwards: dict[str, Optional[str]] = {}
        self._hook_functions: Optional[dict[str, HookSignature]] = None
        self._hook_registrars: Optional[list[tuple[ModuleSummary, str]]] = None

    def split(self, qualname: str) -> tuple[Optional[ModuleSummary], str]:
        """(module, rest of the name) for the longest module prefix (memoized: every lookup starts here)."""
        found = self._split.get(qualname)
        if found is None:
            found = self._split[qualname] = self._longest_module(qualname)
        return found

    def _longest_module(self, qualname: str) -> tuple[Optional[ModuleSummary], str]:
        parts = qualname.split(".")
        for cut in range(len(parts) - 1, 0, -1):
            module = self.modules.get(".".join(parts[:cut]))
            if module is not None:
                return module, ".".join(parts[cut:])
        return None, qualname

    def canonical(self, qualname: str) -> str:
        """Follow re-exports and module-level aliases: `pkg.Block` -> `pkg.blocks.Block` (memoized)."""
        if qualname not in self._canonical:
            self._canonical[qualname] = self._follow(qualname)
        return self._canonical[qualname]

    def _follow(self, qualname: str) -> str:
        start, seen = qualname, set()
        # Bounded: a re-export cycle can produce an ever longer name that `seen` never repeats.
        for _ in range(_MAX_ALIAS_HOPS):
            if qualname in seen:
                return qualname
            seen.add(qualname)
            module, rest = self.split(qualname)
            if module is None:
                return qualname
            head, _, tail = rest.partition(".")
            if head in module.classes or head in module.functions:
                return qualname
            target = module.imports.get(head)
            alias = module.aliases.get(head)
            if target is None and alias is not None and not alias.is_partial:
                target = alias.target
            if target is None:
                return qualname
            qualname = f"{target}.{tail}" if tail else target
        return start  # unresolvable chain: keep the name as spelled

    def alias(self, qualname: str) -> Optional[Alias]:
        module, rest = self.split(self.canonical(qualname))
        return module.aliases.get(rest) if module else None

    def class_(self, qualname: str) -> Optional[ClassSummary]:
        module, rest = self.split(self.canonical(qualname))
        return module.classes.get(rest) if module else None

    def ancestors(self, qualname: str) -> tuple[str, ...]:
        """Qualified names of the class and all its bases, in-project or not (depth-first; memoized:
        every attribute, method and base lookup of the analysis walks them)."""
        found = self._ancestors.get(qualname)
        if found is None:
            found = self._ancestors[qualname] = tuple(self._bases_depth_first(qualname))
        return found

    def _bases_depth_first(self, qualname: str) -> Iterator[str]:
        stack, seen = [self.canonical(qualname)], set()
        while stack:
            name = stack.pop()
            if name in seen:
                continue
            seen.add(name)
            yield name
            summary = self.class_(name)
            if summary is not None:
                stack.extend(reversed([self.canonical(b) for b in summary.bases]))

    def contains(self, outer: str, inner: str) -> bool:
        """Whether an `outer` object is, or holds as a submodule at any depth, an object of class
        `inner` or of a class deriving from it."""
        key = (outer, inner)
        found = self._contains.get(key)
        if found is None:
            seen, work = set(), [self.canonical(outer)]
            while work and not found:
                cls = work.pop()
                if cls in seen:
                    continue
                seen.add(cls)
                found = inner in self.ancestors(cls)
                for summary in filter(None, map(self.class_, self.ancestors(cls))):
                    work.extend(self.canonical(ctor) for binding in summary.attrs.values() for ctor in binding.constructors)
            self._contains[key] = found = bool(found)
        return found

    def is_subclass(self, qualname: str, bases: frozenset[str]) -> bool:
        key = (qualname, bases)
        if key not in self._subclass:
            self._subclass[key] = any(name in bases for name in self.ancestors(qualname))
        return self._subclass[key]

    def attribute(self, class_qualname: str, attr: str) -> Optional[AttrBinding]:
        holder = self.attribute_holder(class_qualname, attr)
        return holder.attrs[attr] if holder is not None else None

    def attribute_holder(self, class_qualname: str, attr: str) -> Optional[ClassSummary]:
        """The class (itself or a base) whose `__init__` or body binds `attr` (memoized: every
        `self.<attr>` the analysis evaluates asks)."""
        key = (class_qualname, attr)
        if key not in self._attribute_holders:
            self._attribute_holders[key] = next((s for s in map(self.class_, self.ancestors(class_qualname)) if s is not None and attr in s.attrs), None)
        return self._attribute_holders[key]

    def is_record(self, class_qualname: str) -> bool:
        """A project class whose instances get their fields from the generated `__init__` of a
        dataclass-style declaration (no `__init__` written anywhere in its bases, not a module): its
        methods read the fields of the object they are called on, not the class defaults."""
        return self.class_(class_qualname) is not None and self.init_signature(class_qualname) is None and not self.is_subclass(class_qualname, MODULE_BASES)

    def init_signature(self, class_qualname: str) -> Optional[ClassSummary]:
        """The class in the MRO whose `__init__` builds instances (its `init_params` and defaults)."""
        for name in self.ancestors(class_qualname):
            summary = self.class_(name)
            if summary is not None and summary.init_params is not None:
                return summary
        return None

    def construction_context(self, class_qualname: str) -> Optional[dict]:
        """What `__init__`'s parameters hold in an instance whose construction is not in view (`self`):
        the literals every construction the project's script code spells agrees on, defaults filled
        in. None when nothing builds the class, something builds it as a submodule (its parent then
        tells), or it has project subclasses (an instance may be one of those)."""
        calls = self.script_constructions(class_qualname)
        if not calls or class_qualname in self.constructed_classes() or self.subclasses(class_qualname):
            return None
        return _agreed(passed(self, class_qualname, arguments, None) if arguments is not None else {} for arguments in calls)

    def script_constructions(self, class_qualname: str) -> list[Optional[dict[str, list]]]:
        """The arguments of each construction of the class in script code (`ModuleSummary.constructions`)."""
        if self._constructions is None:
            self._constructions = {}
            for m in self.modules.values():
                for name, calls in m.constructions.items():
                    self._constructions.setdefault(self.canonical(name), []).extend(calls)
        return self._constructions.get(class_qualname, [])

    def submodule_bindings(self, class_qualname: str) -> list[tuple[str, AttrBinding]]:
        """(holder class, binding) of each attribute some class's `__init__` builds the class into."""
        if self._submodule_bindings is None:
            self._submodule_bindings = {}
            for m in self.modules.values():
                for c in m.classes.values():
                    for binding in c.attrs.values():
                        for ctor in binding.constructors:
                            self._submodule_bindings.setdefault(self.canonical(ctor), []).append((c.qualname, binding))
        return self._submodule_bindings.get(class_qualname, [])

    def factory_built_classes(self) -> frozenset[str]:
        """Classes helper functions build or pass around (`ModuleSummary.factory_built`)."""
        if self._factory_built is None:
            self._factory_built = frozenset(self.canonical(name) for m in self.modules.values() for name in m.factory_built)
        return self._factory_built

    @contextlib.contextmanager
    def _calling(self, function: str, passed: str) -> Iterator[None]:
        """While folding what a call of `function` does: the literals it passes decide the tests on
        the function's parameters."""
        outer = self._call
        self._call = (function, json.loads(passed) if passed else {})
        try:
            yield
        finally:
            self._call = outer

    def _operand_value(self, owner: Optional[str], operand: list) -> Optional[tuple[object]]:
        if operand[0] == "param":
            return call_value(operand, *self._call) if self._call is not None else None
        return self.construction_value(owner, operand) if owner else None

    def construction_value(self, class_qualname: str, operand: list) -> Optional[tuple[object]]:
        """(value,) of a construction test's operand (`construction_tests`) in every instance of the
        class: a parameter of its `__init__`, or a flag that `__init__` stores from one or sets to a
        literal; None when the constructions disagree or do not show it."""
        if operand[0] == "self":
            holder = self.attribute_holder(class_qualname, operand[1])
            binding = holder.attrs[operand[1]] if holder is not None else None
            if binding is None:
                return None
            if binding.has_constant:
                return (binding.constant,)
            if binding.param is None:
                return None
            operand = ["init", holder.qualname, binding.param]
        signature = self.init_signature(class_qualname)
        if operand[0] != "init" or signature is None or signature.qualname != operand[1]:
            return None  # a subclass's own `__init__` may pass anything on
        value = self.init_values(class_qualname).get(operand[2])
        return (value.value,) if value is not None else None

    def init_values(self, class_qualname: str) -> Context:
        """The literals `__init__`'s parameters hold in every instance of the class the project
        builds: what each construction passes (a submodule's, in its holder's instances), defaults
        filled in; only those all agree on. Empty when something may build it out of view (a
        factory, a registry, a project subclass) or nothing builds it (or, while it is being worked
        out, for a holder that builds itself)."""
        if class_qualname in self._init_values:
            return self._init_values[class_qualname]
        self._init_values[class_qualname] = {}
        if self.subclasses(class_qualname) or class_qualname in self.factory_built_classes():
            return {}
        contexts = [
            *(passed(self, class_qualname, arguments, None) if arguments is not None else None for arguments in self.script_constructions(class_qualname)),
            *(
                passed(self, class_qualname, binding.arguments, self.init_values(holder)) if binding.arguments is not None else None
                for holder, binding in self.submodule_bindings(class_qualname)
            ),
        ]
        self._init_values[class_qualname] = _agreed(contexts) or {}
        return self._init_values[class_qualname]

    def flag_setters(self, class_qualname: str, method: str) -> Optional[dict[str, list]]:
        """The flags the method (as the class resolves it) sets on every path (`ClassSummary.flag_setters`);
        None when the class has no such project method, or the method sets none."""
        owner = self.method_owner(class_qualname, method)
        return owner.flag_setters.get(method) if owner is not None else None

    def forward_owner(self, class_qualname: str) -> Optional[ClassSummary]:
        """The class in the MRO that defines `forward`."""
        return self.method_owner(class_qualname, "forward")

    def method_owner(self, class_qualname: str, method: str) -> Optional[ClassSummary]:
        """The class in the MRO that defines `method`."""
        for name in self.ancestors(class_qualname):
            summary = self.class_(name)
            if summary is not None and method in summary.methods:
                return summary
        return None

    def freeze_of(self, class_qualname: str) -> Freeze:
        """Freezing of the class's instances: by its own `__init__`, and by the code that builds one
        anywhere in the project (methods called on it, helpers it is handed to), any of them."""
        if class_qualname not in self._freezes:
            self._freezes[class_qualname] = self._freeze_of(class_qualname)
        freeze, paths = self._freezes[class_qualname]
        self.cited |= paths
        return freeze

    def _freeze_of(self, class_qualname: str) -> tuple[Freeze, frozenset[str]]:
        canonical = self.canonical(class_qualname)
        init = self._method_effect(canonical, "__init__", 0)  # an inherited `__init__` runs too
        if self.is_subclass(canonical, LIGHTNING_MODULES):
            for hook in lightning.MODULE_HOOKS:
                effect = self._method_effect(canonical, hook, 0)
                init = (init[0].then(effect[0]), init[1] | effect[1]) if effect[0] else init
        if self._instance_steps is None:
            self._instance_steps = {}
            for m in self.modules.values():
                for key, steps in m.instance_freezes.items():
                    self._instance_steps.setdefault(self.canonical(key.rsplit("|", 1)[-1]), []).append(steps)
        instances = self._instance_steps.get(canonical, [])
        # Built as a submodule too (or nowhere we can see): the bare `__init__` counts as well.
        found = [init] if not instances or canonical in self.constructed_classes() else []
        found += [self._fold(steps, canonical, 0, init[0]) for steps in instances]
        found += self._freezes_through_holders(canonical)
        freezes = [f for f, _ in found if f]
        if not freezes:
            return Freeze(), frozenset()
        first = next((f for f in freezes if f.line), freezes[0])
        return Freeze(
            any(f.everything for f in freezes),
            tuple(dict.fromkeys(a for f in freezes for a in f.attrs)),
            tuple(dict.fromkeys(a for f in freezes for a in f.unfrozen)),
            any(f.input_grad_hook for f in freezes),
            first.line,
            first.path,
            any(f.hook_undone for f in freezes),
            by_name=tuple(step for f in freezes for step in f.by_name),
            paths=tuple(dict.fromkeys(p for f in freezes for p in f.paths)),
            unfrozen_paths=tuple(dict.fromkeys(p for f in freezes for p in f.unfrozen_paths)),
            norms_trainable=tuple(dict.fromkeys(a for f in freezes for a in f.norms_trainable)),
            note=first.note,
        ), frozenset(path for _, paths in found for path in paths)

    def _freezes_through_holders(self, canonical: str) -> list[tuple[Freeze, frozenset[str]]]:
        """The freezing of submodules of this class done from objects holding it:
        `model.backbone.stem.requires_grad_(False)` on a model whose `backbone` is one of these."""
        found = []
        for holder, attr in self.holders_of(canonical):
            if holder == canonical or holder in self._freezes_active:
                continue
            self._freezes_active.add(holder)
            try:
                outer = self.freeze_of(holder)
            finally:
                self._freezes_active.discard(holder)
            inner = _projected(outer, attr)
            if inner:
                found.append((inner, frozenset([outer.path] if outer.line else [])))
        return found

    def layers_never_checkpointed(self, class_qualname: str) -> bool:
        """Whether the transformers GradientCheckpointingLayers a class calls can never checkpoint:
        every chain of project classes holding it ends at a transformers model whose
        `supports_gradient_checkpointing` is not True (its `gradient_checkpointing_enable()` raises,
        so nothing sets the layers' flag). A chain that ends anywhere else leaves it possible."""
        if class_qualname in self._never_checkpointed:
            return self._never_checkpointed[class_qualname]
        frontier, seen, models = [self.canonical(class_qualname)], set(), 0
        verdict = True
        while frontier and verdict:
            current = frontier.pop()
            if current in seen:
                continue
            seen.add(current)
            is_model = self.is_subclass(current, _PRETRAINED_MODELS)
            if is_model:
                models += 1
                support = self.attribute(current, "supports_gradient_checkpointing")
                if support is not None and not (support.has_constant and support.constant is False):
                    verdict = False  # supported (or set in a way the index cannot read)
            holders = [h for c in (current, *self.subclasses(current)) for h, _ in self.holders_of(self.canonical(c))]
            if not holders and not is_model:
                verdict = False  # held by nothing the project shows: a user may switch its layers on
            frontier.extend(holders)
        self._never_checkpointed[class_qualname] = found = verdict and models > 0
        return found

    def holders_of(self, canonical: str) -> list[tuple[str, str]]:
        """(holding class, attribute) for each place a class is held: a submodule a class builds, or
        an object its constructor is handed and keeps (`Runner(model)` with `self.model = model`)."""
        if self._holders is None:
            self._holders = self._holding_attributes()
        return self._holders.get(canonical, [])

    def _holding_attributes(self) -> dict[str, list[tuple[str, str]]]:
        handed: dict[tuple[str, str], list[str]] = {}  # (class, slot) -> classes of the objects handed there
        for m in self.modules.values():
            for key, steps in m.instance_freezes.items():
                for step in steps:
                    if step.callee and not step.callee.startswith(".") and not step.member:
                        handed.setdefault((self.canonical(step.callee), step.slot), []).append(self.canonical(key.split("|", 1)[1]))
        holders: dict[str, list[tuple[str, str]]] = {}
        for m in self.modules.values():
            for c in m.classes.values():
                for attr, binding in c.attrs.items():
                    held = list(binding.constructors) if not binding.container else []
                    if binding.param is not None and c.init_params and binding.param in c.init_params:
                        held += handed.get((c.qualname, binding.param), []) + handed.get((c.qualname, str(c.init_params.index(binding.param))), [])
                    for ctor in dict.fromkeys(held):
                        holders.setdefault(self.canonical(ctor), []).append((c.qualname, attr))
        return holders

    def checkpoints_what_it_builds(self, function: str) -> bool:
        """A builder that switches transformers checkpointing on for the object it returns
        (`model.gradient_checkpointing_enable(...)` before `return model`), and not off again."""
        built = self._built_by(function)
        if built is None:
            return False
        freeze = self.instance_freeze(built[1], built[0][len(built[1]) + 1 :], built[2])
        return freeze is not None and freeze.checkpointing and not freeze.checkpointing_off

    def instance_freeze(self, module: str, function: str, ctor: str, depth: int = 0) -> Optional[Freeze]:
        """Freezing done to an object built by `ctor` in the top-level `function` of `module` (or in
        its module-level code) by the time the function ends; None when nothing may freeze it."""
        freezes = self.modules[module].instance_freezes
        steps = freezes.get(instance_key(function, ctor)) or freezes.get(instance_key("", ctor))
        built = self._built_by(ctor)
        if built is None:
            # `model = build_model()` folded into a library model: the steps on what a builder called here returned.
            built = next((b for key in freezes if key.startswith(f"{function}|") and (b := self._built_by(key.split("|", 1)[1])) and b[2] == ctor), None)
            steps = freezes.get(instance_key(function, built[0])) if built is not None else steps
        owner = self.canonical(built[2] if built else ctor)
        start = None
        if built is not None and depth < _MAX_FREEZE_DEPTH:
            # `model = build_model()`: what the builder did to the object it returns comes first
            # (builders calling builders, bounded: a builder may call itself).
            start = self.instance_freeze(built[1], built[0][len(built[1]) + 1 :], built[2], depth + 1)
        elif built is None:
            # A project class's `__init__` ran first: what it froze of the object (`self.vision.requires_grad_(False)`).
            init, cited = self._method_effect(owner, "__init__", 0)
            start = init if init else None
            self.cited |= cited
        if steps is None and start is None and built is None:
            return None
        freeze, paths = self._fold(steps or [], owner, 0, start)
        self.cited |= paths
        return freeze

    def freezes_after(self, builder: str, ctor: str) -> list[Freeze]:
        """What the callers of a builder function (`def load(name): ...; return model`) do to the
        object of `ctor` it returns, each folded after what the builder did to it: `model =
        load(name)` then a freeze loop in the caller. Empty when the function is no such builder."""
        built = self._built_by(builder)
        if built is None or self.canonical(built[2]) != self.canonical(ctor):
            return []
        found = []
        for module in self.modules.values():
            for key in module.instance_freezes:
                caller, _, made = key.partition("|")
                freeze = self.instance_freeze(module.name, caller, made) if self.canonical(made) == built[0] else None
                if freeze:
                    found.append(freeze)
        return found

    def registry_names(self) -> frozenset[str]:
        """The names of the project's registries of classes, wherever defined (a cheap first test)."""
        if self._registry_names is None:
            self._registry_names = frozenset(n for m in self.modules.values() for n in m.registry_facts.registries)
        return self._registry_names

    def registries_holding(self, class_qualname: str) -> list[str]:
        """The project registries of classes that hold `class_qualname` (and nothing the code does not show)."""
        if self._holding is None:
            self._holding = {}
            for m in self.modules.values():
                for name in m.registry_facts.registries:
                    for cls in self.registry(f"{m.name}.{name}") or ():
                        self._holding.setdefault(cls, []).append(f"{m.name}.{name}")
        return self._holding.get(self.canonical(class_qualname), [])

    def registry(self, qualname: str) -> Optional[tuple[str, ...]]:
        """The classes a project registry of classes may hold (`MODELS = {"vit": ViT}`, entries
        stored into it anywhere in the project, classes a registering decorator adds, a registered
        builder function's class); None when it is no registry or holds an entry the code does not show."""
        key = self.canonical(qualname)
        if key not in self._registries:
            self._registries[key] = self._registry(key)
        return self._registries[key]

    def _registry(self, key: str) -> Optional[tuple[str, ...]]:
        module, name = self.split(key)
        if module is None or name not in module.registry_facts.registries:
            return None
        entries = [self.canonical(e) if e != UNKNOWN_ENTRY else e for e in module.registry_facts.registries[name]]
        registrars = set()
        for other in self.modules.values():
            facts = other.registry_facts
            entries += [self.canonical(e) if e != UNKNOWN_ENTRY else e for r, stored in facts.stores.items() if self.canonical(r) == key for e in stored]
            registrars |= {f"{other.name}.{f}" for f, r in facts.registrars.items() if self.canonical(r) == key}
        if registrars:
            for other in self.modules.values():
                entries += [f"{other.name}.{c}" for c, decorators in other.registry_facts.decorated.items() if any(self.canonical(d) in registrars for d in decorators)]
        classes = [e if self.class_(e) is not None else self.builds(e) if e != UNKNOWN_ENTRY else None for e in entries]
        if not classes or any(c is None or self.class_(c) is None for c in classes):
            return None
        return tuple(dict.fromkeys(classes))  # type: ignore[arg-type]

    def returns_closure(self, function: str) -> bool:
        """Whether a project function returns the closure it defines (`ModuleSummary.closure_factories`)."""
        module, name = self.split(self.canonical(function))
        return module is not None and name in module.closure_factories

    def returns_cached_model(self, function: str) -> bool:
        """Whether a project function returns a model built with caching switched on."""
        module, name = self.split(self.canonical(function))
        return module is not None and name in module.cache_builders

    def builds(self, function: str) -> Optional[str]:
        """The constructor of the object a project function builds and returns, through builders
        that call builders (None: not a builder)."""
        found = None
        for _ in range(_MAX_FREEZE_DEPTH):
            built = self._built_by(function)
            if built is None:
                break
            found = function = built[2]
        return found

    def built_classes(self, ctor: str) -> tuple[tuple[str, ...], Optional[str]]:
        """The module classes a constructor call of `ctor` gives, and the container holding them: the
        class itself, or for a project builder function what it builds (`make_block(dim)` returning
        `nn.Sequential(nn.Linear(...), nn.Dropout(p))`: those layers in a Sequential)."""
        module, name = self.split(self.canonical(ctor))
        built = module.builders.get(name) if module is not None else None
        if built is None or module is None:
            return (ctor,), None
        if name in module.builder_contents:
            return tuple(self.canonical(c) for c in module.builder_contents[name]), built
        return (self.canonical(built),), None

    def builder_call(self, function: str) -> Optional[tuple[str, list]]:
        """For a builder function that builds its object right in a constructor call handing on its
        parameters: (the constructor, [parameters, literal defaults, what the call passes])."""
        module, name = self.split(self.canonical(function))
        found = module.builder_calls.get(name) if module is not None else None
        return (module.builders[name], found) if found is not None else None

    def _built_by(self, function: str) -> Optional[tuple[str, str, str]]:
        """(the function, its module, the constructor of what it returns) for a project function that
        returns an object it builds."""
        module, name = self.split(self.canonical(function))
        ctor = module.builders.get(name) if module is not None else None
        return (self.canonical(function), module.name, ctor) if ctor is not None else None

    def _fold(self, steps: list[FreezeStep], owner: Optional[str], depth: int, start: Optional[Freeze] = None) -> tuple[Freeze, frozenset[str]]:
        """The freezing of an object of class `owner` after `steps`, and the files whose lines it cites."""
        freeze, paths = start or Freeze(), set()
        for step in steps:
            decided = holds(step.condition, lambda operand: self._operand_value(owner, operand)) if step.condition else None
            if decided is False:
                continue  # `if freeze_embed:` with every construction leaving it off
            if step.freeze is not None:
                part, cited = step.freeze, frozenset([step.freeze.path] if step.freeze.line else [])
            else:
                part, cited = self._call_effect(step, owner, depth)
            if decided is None and step.condition and switched(step.condition):
                part = _uncertain(part)  # `requires_grad_(train_embed)` with a value no construction shows
            freeze = freeze.then(part)
            paths |= cited
        return freeze, frozenset(paths)

    def _call_effect(self, step: FreezeStep, owner: Optional[str], depth: int) -> tuple[Freeze, frozenset[str]]:
        """What a call handed an object of class `owner` does to it (memoised; bounded; nothing for a
        call that recurses into itself or a callee outside the project)."""
        key = (step.callee, step.slot, step.member, owner, step.callbacks, step.arguments, step.passed)
        found = self._call_effects.get(key)
        if found is None:
            self._call_effects[key] = _NO_FREEZE
            found = self._call_effects[key] = self._resolve_call(step, owner, depth + 1) if depth < _MAX_FREEZE_DEPTH else _NO_FREEZE
        return found

    def _resolve_call(self, step: FreezeStep, owner: Optional[str], depth: int) -> tuple[Freeze, frozenset[str]]:
        if step.member:
            # What the call does to the submodule, as a whole: frozen, unfrozen, or nothing known.
            binding = self.attribute(owner, step.member) if owner else None
            classes = [self.canonical(c) for c in binding.constructors] if binding is not None else []
            effects = [self._effect(step, c, depth) for c in classes or [None]]
            if all(f.everything and not f.unfrozen and not f.by_name for f, _ in effects):
                change = Freeze(attrs=(step.member,), line=effects[0][0].line, path=effects[0][0].path, paths=(step.member,))
            elif all(f.thawed and not f.everything and not f.attrs and not f.by_name for f, _ in effects):
                change = Freeze(unfrozen=(step.member,), unfrozen_paths=(step.member,))
            elif any(f.input_grad_hook for f, _ in effects):
                change = Freeze(input_grad_hook=True)  # a hook on the part: its output may require grad
            elif all(f == effects[0][0] for f, _ in effects) and (effects[0][0].paths or effects[0][0].by_name) and not (effects[0][0].unfrozen or effects[0][0].unfrozen_paths):
                # Parts of the part (`freeze_embeddings(self.model)` freezing `wte`, or its parameters by
                # name): those paths, and names, under it.
                inner = effects[0][0]
                by_name = tuple([["and", ["startswith", f"{step.member}."], _prefixed(predicate, f"{step.member}.")], state] for predicate, state in inner.by_name)
                change = Freeze(paths=tuple(f"{step.member}.{p}" for p in inner.paths), by_name=by_name, line=inner.line, path=inner.path)
            else:
                return _NO_FREEZE
            return change, frozenset(p for _, paths in effects for p in paths)
        return self._effect(step, owner, depth)

    def _effect(self, step: FreezeStep, owner: Optional[str], depth: int) -> tuple[Freeze, frozenset[str]]:
        """What the call does to the object it is handed or called on, of class `owner`; for a
        builder's result (slot RETURNED), what the builder did to the object it returns."""
        if step.slot == RETURNED:
            built = self._built_by(step.callee)
            with self._calling(built[0] if built is not None else "", step.passed):
                freeze = self.instance_freeze(built[1], built[0][len(built[1]) + 1 :], built[2], depth + 1) if built is not None else None
            if freeze is None:
                return _NO_FREEZE
            names = PARAMETER_NAMES.get(self.canonical(built[2]))  # type: ignore[index]
            if names and all(freeze.state_of(name, None)[0] for name in names):
                freeze = replace(freeze, everything=True)  # `table.weight.requires_grad = False`: every parameter of an nn.Embedding
            return freeze, frozenset()
        if step.callbacks:
            return self._fit_effect(json.loads(step.callbacks), owner, depth) if owner else _NO_FREEZE
        if step.callee.startswith("."):
            return self._method_effect(owner, step.callee[1:], depth) if owner else _NO_FREEZE
        module, rest = self.split(self.canonical(step.callee))
        params = module.param_freezes.get(rest) if module is not None else None
        names = list(params or ())
        name = step.slot if step.slot in names else names[int(step.slot)] if step.slot.isdigit() and int(step.slot) < len(names) else None
        if not params or not name:
            return _NO_FREEZE
        with self._calling(self.canonical(step.callee), step.passed):
            return self._fold(_with_texts(params[name], step.arguments, names), owner, depth)

    def _fit_effect(self, callbacks: list, owner: str, depth: int) -> tuple[Freeze, frozenset[str]]:
        """What a Lightning Trainer holding `callbacks` does to the module of class `owner` it fits,
        by the time the first training step runs: each hook in Lightning's order, the callbacks'
        first (`lightning_callbacks.PRE_TRAINING_HOOKS`). A callback's freezing names it in `note`,
        with the epoch its `finetune_function` unfreezes at, when it does so only later."""
        parts: list[tuple[int, Freeze, frozenset[str]]] = []  # (callback index or -1 for the module, effect, cited)
        later: dict[int, list[Optional[int]]] = {}  # callback index -> epochs it unfreezes at after the first
        for who, hook in lightning.PRE_TRAINING_HOOKS:
            if who == "module":
                parts.append((-1, *self._method_effect(owner, hook, depth)))
                continue
            for index, callback in enumerate(callbacks):
                part, cited, epochs = self._callback_hook(callback, hook, owner, depth)
                parts.append((index, part, cited))
                later.setdefault(index, []).extend(epochs)
        freeze, paths = Freeze(), set()
        for index, part, cited in parts:
            if index >= 0 and part.line:
                epochs = later.get(index, [])
                until = f", unfrozen only from epoch {epochs[0]} on" if epochs and epochs[0] is not None else ", unfrozen only at a later epoch" if epochs else ""
                part = replace(part, note=f"by the callback `{callbacks[index][0].rsplit('.', 1)[-1]}` while training starts{until}")
            freeze = freeze.then(part)
            paths |= cited
        return freeze, frozenset(paths)

    def _callback_hook(self, callback: list, hook: str, owner: str, depth: int) -> tuple[Freeze, frozenset[str], list[Optional[int]]]:
        """What the `hook` of a callback (a project class, [constructor, arguments]) does to the
        module it is handed (its own method, or the BaseFinetuning method the library's hook calls),
        and the epochs (None: not known) at which it unfreezes later. Steps under an epoch guard
        count as of epoch 0: skipped when the guard fails then, unknown when its operand is."""
        ctor, arguments = callback
        cls = self.canonical(ctor)
        method = ""
        for name in self.ancestors(cls):
            if name in lightning.BASE_FINETUNING and hook in lightning.FINETUNING_HOOKS:
                return self._callback_hook(callback, lightning.FINETUNING_HOOKS[hook], owner, depth)
            summary = self.class_(name)
            if summary is not None and hook in summary.methods:
                method = f"{summary.qualname}.{hook}"
                break
        module, rest = self.split(method) if method else (None, "")
        params = module.param_freezes.get(rest) if module is not None else None
        position = lightning.FINETUNING_MODULE_POSITION if hook in lightning.FINETUNING_HOOKS.values() else lightning.CALLBACK_MODULE_POSITION
        names = list(params or ())
        if len(names) <= position:
            return Freeze(), frozenset(), []
        fields = object_fields(self, cls, arguments) if any(step.guard for step in params[names[position]]) else {}
        freeze, paths, later = Freeze(), set(), []
        for step in params[names[position]]:
            operand = lightning.guard_operand(step.guard) if step.guard else ["?"]
            value = operand[1] if operand[0] == "const" else getattr(fields.get(operand[1]), "value", None) if operand[0] == "self" else None
            value = value if type(value) is int else None
            holds = True if step.guard is None else lightning.holds_at_first_epoch(step.guard, value)
            part, cited = self._fold([replace(step, guard=None)], owner, depth)
            if holds is False:
                if part.unfrozen or part.unfrozen_paths or part.thawed:
                    later.append(lightning.first_epoch_holding(step.guard, value) if value is not None else None)
                continue
            freeze = freeze.then(part if holds else _uncertain(part))
            paths |= cited
        return freeze, frozenset(paths), later

    def _method_effect(self, class_qualname: str, method: str, depth: int, own: bool = False) -> tuple[Freeze, frozenset[str]]:
        """What calling `method` on an instance of the class does to it (`own`: only if the class itself defines it)."""
        for name in [self.canonical(class_qualname)] if own else self.ancestors(class_qualname):
            summary = self.class_(name)
            if summary is not None and method in summary.methods:
                module, rest = self.split(summary.qualname)
                params = module.param_freezes.get(f"{rest}.{method}") if module is not None else None
                return self._fold(params["self"], class_qualname, depth) if params else _NO_FREEZE
        return _NO_FREEZE

    def constant(self, qualname: str) -> Optional[tuple[object]]:
        """(value,) of a module-level constant of the project (`ModuleSummary.constants`), by
        qualified name; None for anything else."""
        if self._constants is None:
            stored = {self.canonical(name) for m in self.modules.values() for name in m.module_stores}
            constants = {f"{m.name}.{name}": value for m in self.modules.values() for name, value in m.constants.items()}
            self._constants = {name: value for name, value in constants.items() if name not in stored}
        return (self._constants[qualname],) if qualname in self._constants else None

    def reentrant_hf_enable(self, path: Optional[str] = None) -> Optional[tuple[str, int]]:
        """Where the project switches transformers checkpointing to reentrant mode explicitly: in the
        file `path` if it does, else in the first such file by path (the same however files are
        scheduled)."""
        if self._hf_enable is None:
            self._hf_enable = sorted((m.path, line) for m in self.modules.values() for line, reentrant in m.hf_enables if reentrant)
        found = next((f for f in self._hf_enable if f[0] == path), self._hf_enable[0] if self._hf_enable else None)
        if found is not None:
            self.cited.add(found[0])
        return found

    def runs_without_grad(self, decorator: str) -> bool:
        """Whether `decorator` (qualified) is a project decorator in `ModuleSummary.grad_off_decorators`."""
        module, name = self.split(self.canonical(decorator))
        return module is not None and name in module.grad_off_decorators

    def hook_signature(self, qualname: str) -> Optional[HookSignature]:
        """How torch calls the function `qualname`, if some file registers it as a module hook."""
        if self._hook_functions is None:
            self._hook_functions = {name: hook for module in self.modules.values() for name, hook in module.hook_functions.items()}
        return self._hook_functions.get(qualname) if self._hook_functions else None

    def hook_registrars(self) -> list[tuple[ModuleSummary, str]]:
        """Every top-level statement of the project that registers module hooks: (module, the name it defines)."""
        if self._hook_registrars is None:
            self._hook_registrars = [(module, name) for module in self.modules.values() for name in module.hook_registrars]
        return self._hook_registrars

    def activation_wraps(self, class_qualname: str) -> list[tuple[str, ActivationWrap]]:
        """Where the project wraps modules of this class (of the project) with a checkpoint wrapper:
        (path, wrap) in path order."""
        if self._wrapped is None:
            self._wrapped = {}
            for module in sorted(self.modules.values(), key=lambda m: m.path):
                for wrap in module.activation_wraps:
                    if wrap.impl_param:
                        wrap = self._chosen_impl(f"{module.name}.{wrap.impl_function}", wrap)
                    if wrap.held:
                        self._held_wraps.setdefault((self.canonical(wrap.owner), wrap.attr), []).append((module.path, wrap))
                        continue
                    owners = self.handed_to(f"{module.name}.{wrap.function}", wrap.param, wrap.position) if wrap.param else [wrap.owner] if wrap.owner else []
                    if wrap.class_param:
                        classes = tuple(self.classes_handed(f"{module.name}.{wrap.function}", wrap.class_param, wrap.class_position))
                    elif owners:
                        bindings = [self.attribute(self.canonical(owner), wrap.attr) for owner in owners]
                        classes = tuple(c for binding in bindings if binding is not None for c in binding.constructors)
                    else:
                        classes = wrap.classes
                    for cls in dict.fromkeys(self.canonical(c) for c in classes):
                        if self.class_(cls) is not None:
                            self._wrapped.setdefault(cls, []).append((module.path, wrap))
                for decorated in module.decorated_forwards:
                    wrap = self._decorator_wrap(decorated["decorator"], decorated["line"])
                    if wrap is not None:
                        self._wrapped.setdefault(self.canonical(decorated["class"]), []).append((module.path, wrap))
        return self._wrapped.get(class_qualname, [])

    def _chosen_impl(self, function: str, wrap: ActivationWrap) -> ActivationWrap:
        """A wrap whose `checkpoint_impl` is a table entry keyed by a parameter of `function`: in the
        mode of the key every project call of `function` passes (the default where a call passes
        none); unchanged (mode unknown) without calls, or when they disagree or pass another value."""
        slots = (wrap.impl_param, str(wrap.impl_position)) if wrap.impl_position >= 0 else (wrap.impl_param,)
        keys: set[Optional[str]] = set()
        for _, step in self._calls_handing(function):
            handed = json.loads(step.passed) if step.passed else {}
            given = None if "*" in handed else next((handed[slot] for slot in slots if slot in handed), wrap.impl_default)
            keys.add(given if isinstance(given, str) else None)  # None: a key the analysis cannot tell
        if len(keys) != 1:
            return wrap
        key = keys.pop()
        reentrant = wrap.impl_keys.get(key) if key is not None else None
        if reentrant is None:
            return wrap
        impl = "CheckpointImpl.REENTRANT" if reentrant else "CheckpointImpl.NO_REENTRANT"
        how = f"the key every call of `{wrap.impl_function}` passes" if key != wrap.impl_default else f"`{wrap.impl_param}`'s default, which no call of `{wrap.impl_function}` changes"
        return replace(wrap, reentrant=reentrant, packs_keywords=reentrant, impl=f"{impl} ({wrap.impl} with {wrap.impl_param}={key!r}, {how})")

    def _decorator_wrap(self, decorator: str, line: int) -> Optional[ActivationWrap]:
        """A `forward` decorated (at `line`) with a project decorator that checkpoints it: every call
        of the module is a checkpoint of it, as if checkpoint_wrapper wrapped it."""
        module, name = self.split(self.canonical(decorator))
        found = module.checkpoint_decorators.get(name) if module is not None else None
        if found is None:
            return None
        reentrant = found["reentrant"]
        flag = f"use_reentrant={reentrant}" if reentrant is not None else "a use_reentrant the analysis cannot resolve"
        # Named, not cited by line: results of the class's file must not depend on the decorator file's lines.
        impl = f"{flag} in `{name}`" + (" when training" if found["training_only"] else "")
        return ActivationWrap(
            line, f"the decorator `@{name}` on its forward", (), reentrant=reentrant, preserve_rng_state=found["preserve_rng_state"], impl=impl,
            training_only=found["training_only"],
        )

    def held_wraps(self, owner: str, attr: str) -> list[tuple[str, ActivationWrap]]:
        """Where the project wraps the module an attribute holds (`self.conv = checkpoint_wrapper(...)`
        in a method of `owner`): (path, wrap)."""
        self.activation_wraps("")
        return self._held_wraps.get((self.canonical(owner), attr), [])

    def handed_to(self, function: str, param: str, position: int) -> list[str]:
        """The classes of the models the project builds and hands to `function` as `param` (at
        `position`, -1 for keyword-only): `model = GPT(config); setup(model)`, read from the steps
        recorded on each object a function or script builds."""
        slots = (param, str(position)) if position >= 0 else (param,)
        return list(dict.fromkeys(self.canonical(key.split("|", 1)[1]) for key, step in self._calls_handing(function) if step.slot in slots))

    def classes_handed(self, function: str, param: str, position: int) -> list[str]:
        """The classes (not instances) the project's calls of `function` hand it as `param`
        (`checkpoint_layers(Net(), Block)`), as the steps on the objects those calls also hand over
        record them (`FreezeStep.passed`)."""
        slots = (param, str(position)) if position >= 0 else (param,)
        classes: dict[str, None] = {}
        for _, step in self._calls_handing(function):
            handed = json.loads(step.passed) if step.passed else {}
            given = next((handed[slot] for slot in slots if slot in handed), None)
            if isinstance(given, dict) and "class" in given:
                classes[self.canonical(given["class"])] = None
        return list(classes)

    def _calls_handing(self, function: str) -> Iterator[tuple[str, FreezeStep]]:
        """(instance key, step) for each call of `function` that the steps on the objects the project
        builds record (the object handed whole, not a submodule of it)."""
        for summary in self.modules.values():
            for key, steps in summary.instance_freezes.items():
                for step in steps:
                    if step.callee and not step.member and self.canonical(step.callee) == function:
                        yield key, step

    def caller_blocks(self, target: str) -> Optional[list[tuple[ModuleSummary, Optional[str]]]]:
        """Top-level statements that may call `target` (a function, or a method of a class), as
        (module, definition name; None for module-level code): those that read a name bound to the
        function, to its class or a subclass (instances run inherited methods), or to its module
        (`mod.func(...)`), and the class bodies themselves (`self.method(...)`). None when there are
        too many to follow (a method of a base class of every model, say): the callers are unknown."""
        if target not in self._callers:
            found = self._caller_blocks(target)
            self._callers[target] = found if len(found) <= _MAX_CALLER_BLOCKS else None
        return self._callers[target]

    def _caller_blocks(self, target: str) -> list[tuple[ModuleSummary, Optional[str]]]:
        module, rest = self.split(target)
        if module is None:
            return []
        head, _, member = rest.partition(".")
        if "." in member or (member and head in module.functions):
            return [(module, head)]  # a function nested in another is called from there only
        owner = f"{module.name}.{head}"
        names = [owner, *self.subclasses(owner)] if member else [owner]
        found: dict[tuple[str, Optional[str]], ModuleSummary] = {}
        for name in names:
            defined_in, _ = self.split(name)
            if member and defined_in is not None:
                found[(defined_in.name, name.rsplit(".", 1)[-1])] = defined_in
            holding = self.registries_holding(name)
            # `MODELS[name](...)` builds the class too, wherever the registry holding it is read.
            for reader, local in [pair for bound in (name, *holding) for pair in self._bound(bound)]:
                for number in self._readers_of(reader).get(local, ()):
                    found.setdefault((reader.name, _definition(reader.blocks[number])), reader)
            for registry in holding:  # `registries.MODELS[name](...)`
                registry_module, registry_name = registry.rsplit(".", 1)
                for reader, local in self._bound(registry_module):
                    for number in self._readers_of(reader).get(local, ()):
                        if registry_name in reader.blocks[number].attrs.split():
                            found.setdefault((reader.name, _definition(reader.blocks[number])), reader)
        # `import backbone as bb; bb.Net(...)`: a statement reading the module and its attribute `Net`
        # (the class itself for one of its methods: its objects are built there).
        for reader, local in self._bound(module.name):
            for number in self._readers_of(reader).get(local, ()):
                block = reader.blocks[number]
                if head in block.attrs.split() or any(head in part.attrs.split() for part in block.members):
                    found.setdefault((reader.name, _definition(reader.blocks[number])), reader)
        return [(summary, block) for (_, block), summary in found.items()]

    def _bound(self, qualname: str) -> list[tuple[ModuleSummary, str]]:
        """(module, local name) for every module-level name bound to `qualname`."""
        if self._bound_as is None:
            self._bound_as = {}
            for m in self.modules.values():
                pairs = [(local, target) for local, target in m.imports.items()]
                pairs += [(local, alias.target) for local, alias in m.aliases.items() if not alias.is_partial]
                for local, target in pairs:
                    self._bound_as.setdefault(self.canonical(target), []).append((m.name, local))
                for local in (*m.classes, *m.functions, *m.registry_facts.registries):
                    self._bound_as.setdefault(f"{m.name}.{local}", []).append((m.name, local))
        return [(self.modules[m], local) for m, local in self._bound_as.get(self.canonical(qualname), ())]

    def _readers_of(self, module: ModuleSummary) -> dict[str, list[int]]:
        """Which top-level statements of `module` read each module-level name."""
        readers = self._readers.get(module.name)
        if readers is None:
            readers = self._readers[module.name] = {}
            for number, block in enumerate(module.blocks):
                for name in block.refs.split():
                    readers.setdefault(name, []).append(number)
        return readers

    def forwards(self, function: str) -> Optional[str]:
        """What `function` hands to a checkpoint it runs ("param:NAME", "self" or "self.ATTR", as in
        `ModuleSummary.forwarding`), directly or through another such function; None if nothing."""
        function = self.canonical(function)
        if function not in self._forwards:
            self._forwards[function] = None  # a recursive chain hands nothing on
            module, rest = self.split(function)
            owner = f"{module.name}.{rest.rsplit('.', 1)[0]}" if module is not None and "." in rest else None
            entries = module.forwarding.get(rest, ()) if module is not None else ()
            self._forwards[function] = next((handed for callee, handed in entries if self._runs_checkpoint(callee, owner)), None)
        return self._forwards[function]

    def _runs_checkpoint(self, callee: str, owner: Optional[str]) -> bool:
        """Whether calling `callee` (as qualified, or `self.NAME` in the class `owner`) runs a
        checkpoint of the callable it is handed first."""
        if callee.startswith("self."):
            name = callee[len("self.") :]
            if name == HF_CHECKPOINT_FUNC_ATTR:
                return True
            held = self.attribute(owner, name) if owner else None
            if held is not None and held.alias is not None:
                return _checkpoint_api(self.canonical(held.alias.target))  # `self._ckpt = partial(checkpoint, ...)`
            method = next((f"{c.qualname}.{name}" for c in map(self.class_, self.ancestors(owner) if owner else ()) if c and name in c.methods), None)
            return method is not None and (self.forwards(method) or "").startswith("param:")
        target = self.canonical(callee)
        function_class = self.class_(target[: -len(".apply")]) if target.endswith(".apply") else None
        if function_class is not None and function_class.recompute is not None:
            return function_class.recompute[0] == 0  # a hand-written checkpoint handed the callable first
        alias = self.alias(target)
        if alias is not None and alias.is_partial:
            target = self.canonical(alias.target)
        api = KNOWN_APIS.get(target)
        if api is not None:
            return api.kind.runs_checkpoint and api.kind is not ApiKind.HF_FUNC
        return (self.forwards(target) or "").startswith("param:")

    def enables_hf_checkpointing(self, function: str) -> bool:
        """Whether the function or method `function` holds a `gradient_checkpointing_enable(...)` call
        (with literal kwargs, as `hf_enables` records them). A class is not a function: one whose
        methods enable (transformers' PreTrainedModel) made every file importing it worth analysing."""
        module, rest = self.split(function)
        if module is None or not module.hf_enables:
            return False
        name, _, method = rest.partition(".")
        block = next((b for b in module.blocks if b.definition and b.binds == name), None)
        span = next(((m.start, m.end) for m in block.members if m.name == method), None) if block is not None and method else None
        if span is None and block is not None and not method and name in module.functions:
            span = (block.start, block.end)
        return span is not None and any(span[0] <= line <= span[1] for line, _ in module.hf_enables)

    def mode_effect(self, function: str, slot: Union[int, str], bound: bool, depth: int = 0) -> ModeEffect:
        """What calling the project function does to the mode of the module it is handed at `slot`
        (position or keyword; `bound`: its first parameter is implicit), itself or through the
        functions it hands the module to (ckptlint/mode_effects.py). Not a project function: leaves it."""
        module, rest = self.split(self.canonical(function))
        if module is None:
            return LEAVES_MODE
        if rest in module.classes:  # a constructor: its `__init__` gets the arguments
            owner = self.method_owner(f"{module.name}.{rest}", "__init__")
            return self.mode_effect(f"{owner.qualname}.__init__", slot, True, depth) if owner is not None else LEAVES_MODE
        name, _, method = rest.partition(".")
        defined = name in module.functions if not method else name in module.classes and method in module.classes[name].methods
        entry = module.mode_steps.get(rest)
        if entry is None or not defined or depth >= 4:
            return LEAVES_MODE if defined and entry is None else MAY_CHANGE_MODE
        param = _parameter_at(entry, slot, bound)
        key = (rest, module.name, param)
        if param is None or key in self._mode_active:
            return MAY_CHANGE_MODE
        self._mode_active.add(key)
        try:
            return folded(entry["steps"].get(param, ()), lambda callee, at, bound_: self.mode_effect(callee, at, bound_, depth + 1))
        finally:
            self._mode_active.discard(key)

    def returned_parameter(self, function: str, bound: bool) -> Optional[tuple[Optional[int], str]]:
        """The parameter a project function returns unchanged: the position a call fills it at (None:
        by keyword only) and its name; None when it returns none."""
        module, rest = self.split(self.canonical(function))
        entry = module.mode_steps.get(rest) if module is not None else None
        returned = entry["returns"] if entry is not None else None
        if returned is None:
            return None
        positional = entry["params"][1:] if bound else entry["params"]  # type: ignore[index]
        return positional.index(returned) if returned in positional else None, returned

    def enables_checkpointing_on(self, function: str, slot: Union[int, str]) -> bool:
        """Whether calling the project function switches transformers checkpointing on for the object
        it is handed at `slot` (position or keyword), itself or through the functions it hands it to."""
        return self._effect(FreezeStep(callee=function, slot=str(slot)), None, 0)[0].checkpointing

    def disables_checkpointing_on(self, function: str, slot: Union[int, str]) -> bool:
        """Whether calling it leaves transformers checkpointing off for that object (`gradient_checkpointing_disable()`)."""
        return self._effect(FreezeStep(callee=function, slot=str(slot)), None, 0)[0].checkpointing_off

    def wrapper_parameter(self, function: str) -> Optional[str]:
        """The parameter whose callable `function` checkpoints (an inferred checkpoint wrapper)."""
        handed = self.forwards(function)
        return handed[len("param:") :] if handed and handed.startswith("param:") else None

    def checkpointing_method(self, class_qualname: str) -> Optional[str]:
        """For a module class whose `__call__` checkpoints the module itself, or whose `forward` or
        `__call__` checkpoints a module handed to its constructor: that method's qualified name."""
        if self.is_subclass(class_qualname, HF_GC_LAYER):
            return None  # transformers' own layer: a site of its own kind
        for method in ("__call__", "forward"):
            owner = next((c for c in map(self.class_, self.ancestors(class_qualname)) if c and method in c.methods), None)
            handed = self.forwards(f"{owner.qualname}.{method}") if owner else None
            if handed == "self" and method == "__call__":
                return f"{owner.qualname}.{method}"
            if handed and handed.startswith("self."):
                binding = self.attribute(class_qualname, handed[len("self.") :])
                if binding is not None and binding.param is not None:
                    return f"{owner.qualname}.{method}"
        return None

    def read_only_in(self, attr: str, function: str) -> bool:
        """Whether the method `function` is the only code in the project that reads an attribute
        named `attr` (a scratch attribute: stored and read back within one call)."""
        key = (attr, function)
        if key not in self._read_only_in:
            module, rest = self.split(function)
            owner, _, method = rest.partition(".")
            self._read_only_in[key] = module is not None and not any(
                where != (module.name, owner, method) and where[0] in self._may_hold_objects_of(module.name)
                for where in self._attribute_readers(attr)
            )
        return self._read_only_in[key]

    def _may_hold_objects_of(self, module: str) -> set[str]:
        """Project modules whose code can be handed an object built from `module`'s classes: those
        importing it, and whatever those import (a helper that imports nothing, handed the model by
        a script importing both), transitively. Code the model's users never import (a tool's own
        package linted with the project) cannot read its attributes."""
        holders = self._object_holders.get(module)
        if holders is None:
            imported = self._import_graph()
            importers: dict[str, set[str]] = {}
            for name, targets in imported.items():
                for target in targets:
                    importers.setdefault(target, set()).add(name)
            users = _reachable({module}, importers)
            holders = self._object_holders[module] = _reachable(users, imported)
        return holders

    def imports_checkpoint_text(self, module: str) -> bool:
        """Whether a project module `module` imports (directly or through up to two more) holds
        checkpoint text: a model class from there may checkpoint when this module calls it."""
        if module not in self._imports_text:
            graph = self._import_graph()
            seen, frontier = {module}, set(graph.get(module, ()))
            for _ in range(3):
                frontier -= seen
                if any(self.modules[name].checkpoint_text for name in frontier):
                    self._imports_text[module] = True
                    break
                seen |= frontier
                frontier = {target for name in frontier for target in graph.get(name, ())}
            else:
                self._imports_text[module] = False
        return self._imports_text[module]

    def imported_by_checkpoint_text(self, module: str) -> bool:
        """Whether a project module holding checkpoint text, calling a project function that switches
        transformers checkpointing on (`enable_memory_savings(policy)`), or building a model of a
        class whose module holds checkpoint text (`policy = ActorCritic(...)`), imports `module`
        (and may hand it a model)."""
        if self._imported_by_text is None:
            graph = self._import_graph()
            self._imported_by_text = {target for name, targets in graph.items() if self._switches_checkpointing(name) for target in targets}
        return module in self._imported_by_text

    def _switches_checkpointing(self, module: str) -> bool:
        """Holds checkpoint text, calls a function that switches transformers checkpointing on, or
        builds a whole model (in script code) of a class whose module holds checkpoint text."""
        summary = self.modules[module]
        if summary.checkpoint_text or any(self.enables_hf_checkpointing(self.canonical(target)) for target in summary.imports.values()):
            return True
        return any((split := self.split(self.canonical(built)))[0] is not None and split[0].checkpoint_text for built in summary.models)

    def _import_graph(self) -> dict[str, set[str]]:
        """Project module -> the project modules it imports; a package stands for every module in it
        (`import a.b.c` binds only `a`)."""
        if self._imported is None:
            packages: dict[str, list[str]] = {}
            for name in self.modules:
                for cut in range(name.count(".")):
                    packages.setdefault(name.rsplit(".", cut + 1)[0], []).append(name)
            self._imported = {}
            for m in self.modules.values():
                targets = set()
                for qualname in m.imports.values():
                    target = self.modules.get(qualname) or self.split(qualname)[0]
                    if target is not None:
                        targets.add(target.name)
                        targets.update(packages.get(target.name, ()))
                self._imported[m.name] = targets
        return self._imported

    def _attribute_readers(self, attr: str) -> Iterator[tuple[str, Optional[str], Optional[str]]]:
        """(module, class, method) of every statement or method that reads `.attr`."""
        word = re.compile(rf"(?:^| ){re.escape(attr)}(?: |$)")
        for m in self.modules.values():
            for block in m.blocks:
                owner = block.binds if block.members else None
                if attr in block.attrs and word.search(block.attrs):
                    yield m.name, owner, None
                for member in block.members:
                    if attr in member.attrs and word.search(member.attrs):
                        yield m.name, owner, member.name

    def subclasses(self, qualname: str) -> list[str]:
        """Project classes deriving from `qualname`, directly or not."""
        if self._subclasses is None:
            self._subclasses = {}
            for m in self.modules.values():
                for c in m.classes.values():
                    for base in c.bases:
                        self._subclasses.setdefault(self.canonical(base), []).append(c.qualname)
        key = self.canonical(qualname)
        found = self._subclasses_of.get(key)
        if found is None:  # memoized, and a set for membership: transformers' PreTrainedModel has thousands
            found, seen, work = [], set(), [key]
            while work:
                for sub in self._subclasses.get(work.pop(), ()):
                    if sub not in seen:
                        seen.add(sub)
                        found.append(sub)
                        work.append(sub)
            self._subclasses_of[key] = found
        return found

    def redefinitions(self, owner: str, method: str) -> list[str]:
        """The methods of project subclasses of `owner` that define `method` again (memoized: asked per
        method a model is handed to, each a scan of the subclasses, thousands under PreTrainedModel)."""
        key = (owner, method)
        found = self._redefinitions.get(key)
        if found is None:
            found = self._redefinitions[key] = [
                f"{sub}.{method}" for sub in self.subclasses(owner) if (summary := self.class_(sub)) is not None and method in summary.methods
            ]
        return found

    def is_top_level_model(self, class_qualname: str) -> bool:
        """A module class whose `forward` inputs are data: built as a submodule nowhere, and shown to
        be a whole model. The evidence: script code builds it or a subclass (`ModuleSummary.models`),
        script code in its own module trains a model it is handed (`ModuleSummary.trains`), or it is
        a Lightning module (a `Trainer` fits it). Without evidence a class is a component whose inputs
        come from a parent: a block in a file linted alone, a library layer with a checkpointing switch."""
        summary = self.class_(class_qualname)
        if not (
            summary is not None and summary.qualname not in self.constructed_classes()
            and "forward" in summary.methods and self.is_subclass(summary.qualname, MODULE_BASES | LIGHTNING_MODULES)
        ):  # fmt: skip
            return False
        module, _ = self.split(summary.qualname)
        return (
            (module is not None and module.trains)
            or self.is_subclass(summary.qualname, LIGHTNING_MODULES)
            or any(name in self.built_as_models() for name in (summary.qualname, *self.subclasses(summary.qualname)))
        )

    def built_as_models(self) -> frozenset[str]:
        """Classes script code builds as whole models, also through a project builder function
        (`model = build_model(cfg)` where `build_model` returns `Net(...)`)."""
        if self._models is None:
            spelled = {self.canonical(name) for m in self.modules.values() for name in m.models}
            self._models = frozenset(spelled | self._through_builders(spelled))
        return self._models

    def _through_builders(self, names: Iterable[str]) -> set[str]:
        """The classes the builder functions among `names` return (not a container they fill)."""
        found: set[str] = set()
        for name in names:
            classes, container = self.built_classes(name)
            if container is None and classes != (name,):
                found.update(classes)
            module, function = self.split(name)
            registry = module.registry_builders.get(function) if module is not None else None
            if registry is not None:
                found.update(self.registry(registry) or ())
        return found

    def constructed_classes(self) -> frozenset[str]:
        """Classes some module builds as a submodule: their forward inputs come from a parent. A
        class a builder returns is a part only where a module or helper code builds it (the builder
        called for a submodule, or the class built by other helpers), not where script code builds
        the whole model through that builder."""
        if self._constructed is None:
            parts = {self.canonical(ctor) for m in self.modules.values() for c in m.classes.values() for a in c.attrs.values() for ctor in a.constructors}
            through_model_builders = self._through_builders(self.canonical(name) for m in self.modules.values() for name in m.models)
            self._constructed = frozenset(
                parts | self._through_builders(parts) | (self.factory_built_classes() - through_model_builders)
            ) | frozenset(
                self.canonical(cls) for m in self.modules.values() for cls, helper in m.handed_models if (self.returned_parameter(helper, False) or (None,))[0] != 0
            )
        return self._constructed


def _checkpoint_api(qualname: str) -> bool:
    """A torch checkpoint function (`torch.utils.checkpoint.checkpoint`, `checkpoint_sequential`)."""
    api = KNOWN_APIS.get(qualname)
    return api is not None and api.kind.runs_checkpoint and api.kind is not ApiKind.HF_FUNC


def _reachable(start: set[str], edges: dict[str, set[str]]) -> set[str]:
    seen, work = set(start), list(start)
    while work:
        for following in edges.get(work.pop(), ()):
            if following not in seen:
                seen.add(following)
                work.append(following)
    return seen


def _definition(block: Block) -> Optional[str]:
    return block.binds if block.definition else None


def _own_assignments(body: list[ast.stmt]) -> Iterator[ast.Assign]:
    """The assignments among a function body's statements, in its blocks too, not in functions or
    classes it defines (statements only: no walk into expressions)."""
    for stmt in body:
        if isinstance(stmt, ast.Assign):
            yield stmt
        elif not isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            for block in ("body", "orelse", "finalbody"):
                yield from _own_assignments(getattr(stmt, block, None) or [])
            for handler in getattr(stmt, "handlers", None) or []:
                yield from _own_assignments(handler.body)


def _own_nodes(function: ast.FunctionDef | ast.AsyncFunctionDef) -> list[ast.AST]:
    """The function's own nodes, not those of functions, lambdas or classes it defines."""
    own: list[ast.AST] = []
    pending: list[ast.AST] = list(function.body)
    while pending:
        node = pending.pop()
        own.append(node)
        pending.extend(c for c in ast.iter_child_nodes(node) if not isinstance(c, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)))
    return own


def _returns_sequence(function: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """Whether every `return` of the function hands back a list or tuple of no fixed length: a list
    comprehension, `tuple(...)` / `list(...)` of one, or of a local bound only to `[]` and appended
    to (`outs.append(x)`)."""
    own = _own_nodes(function)
    returns = [n.value for n in own if isinstance(n, ast.Return)]
    assigned: dict[str, list[ast.expr]] = {}
    for node in own:
        if isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    assigned.setdefault(target.id, []).append(node.value)
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)) and isinstance(node.target, ast.Name):
            assigned.setdefault(node.target.id, []).append(ast.Constant(None))  # any other binding: not only `[]`

    def sequence(value: Optional[ast.expr]) -> bool:
        if isinstance(value, ast.ListComp):
            return True
        if isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id in ("tuple", "list") and len(value.args) == 1:
            return isinstance(value.args[0], (ast.ListComp, ast.GeneratorExp)) or sequence(value.args[0])
        if isinstance(value, ast.Name):
            bound = assigned.get(value.id, [])
            return bool(bound) and all(isinstance(v, ast.List) and not v.elts or isinstance(v, ast.ListComp) for v in bound)
        return False

    return bool(returns) and all(sequence(value) for value in returns)


def project_fingerprint(declarations: dict[str, str]) -> str:
    """Of every module's declarations digest: changes only when a declaration changes, so editing a
    function body keeps other files cached."""
    digest = hashlib.blake2b(digest_size=16)
    for name in sorted(declarations):
        digest.update(f"{name}:{declarations[name]};".encode())
    return digest.hexdigest()

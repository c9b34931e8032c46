"""Abstract values: what an expression may hold, as far as the analysis can tell."""

from __future__ import annotations

import enum
import functools
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Iterator, Optional, Union

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
    # `partial(fn, **kwargs)` with a `kwargs` the analysis cannot resolve (yet): its value.
    spread: Optional["Value"] = None


@dataclass(frozen=True, eq=False)
class Lambda:
    node: cst.Lambda


# The step of a module path that goes from a container (`nn.ModuleList`) to one of its elements.
ELEMENT = ("", "[]")
# `model.modules()` / `model.named_modules()`: every module inside `model`, itself included, one at a
# time. Such a module's path ends in a step (the classes `model` may be, joined by "|", when its own
# path is not known; else ""; SUBMODULES).
SUBMODULE_WALKS = frozenset({"modules", "named_modules"})
SUBMODULES = "**"
# The class of a module yielded by such a walk until a type test narrows it.
ANY_MODULE = "torch.nn.Module"
# What iterating a walk of submodules is spelled as a container, and the walk that yields (name, module).
WALK = "walk"
NAMED_WALK = "named walk"


@dataclass(frozen=True)
class ModuleObject:
    """An nn.Module instance; `classes` are the classes it may be (container elements included)."""

    classes: tuple[str, ...]
    origin: str  # how the code spells it, e.g. "self.block1"
    container: Optional[str] = None
    # How it (each element, for a container) was constructed: `AttrBinding.arguments` as pairs
    # (ckptlint/model/construction.py), with assignments to it after construction as `.<attr>`.
    arguments: Optional[tuple[tuple[str, tuple], ...]] = field(default=None, compare=False)
    # The class whose `__init__` built it, when its arguments name that `__init__`'s parameters.
    built_by: Optional[str] = field(default=None, compare=False)
    # Where it sits in the object the spelling starts from (`self`, a model variable): one
    # (class that binds the attribute, attribute) step per attribute read, ELEMENT for an element of
    # a container. Module hooks are matched to the modules a region runs through it.
    path: tuple[tuple[str, str], ...] = field(default=(), compare=False)
    # Reached as `module.forward`: calling it runs the forward without the module's hooks.
    skips_hooks: bool = field(default=False, compare=False)


@dataclass(frozen=True)
class Param:
    """A parameter of the enclosing function whose provenance is not known. `instance_of`: for an
    `__init__` parameter read back from `self` (`self.cfg = cfg`), the class `self` is there: only
    constructions of it (or its subclasses) pass what it holds."""

    name: str
    function: str
    instance_of: Optional[str] = None


@dataclass(frozen=True, eq=False)
class LocalFunction:
    """A function defined inside another one (a closure), or a method reached as `self.method`."""

    qualname: str
    node: Optional[cst.FunctionDef] = None
    # A closure a local factory returned (`create_custom_forward(layer)`): the names the factory
    # binds for it, each with its value at the factory's call (its parameters) or unknown (its locals).
    closure: tuple[tuple[str, "Value"], ...] = ()


@dataclass(frozen=True)
class Items:
    """A tuple or list whose elements the analysis knows (`(h, mask)`, `[h, ctx]`, what a forward
    returns as `return h, scores`)."""

    values: tuple["Value", ...]


@dataclass(frozen=True, eq=False)
class Instance:
    """An object returned by calling `ctor` (a model from `from_pretrained`, TrainingArguments, ...)."""

    ctor: str
    node: cst.Call
    # A transformers config, or a model built from one: the settings the code shows.
    config: Optional["HfConfig"] = None
    # The checkpoint name `from_pretrained` loads, when the code shows it; else, when it depends on
    # a parameter of the function loading it, that value (its callers may name it).
    checkpoint: Optional[str] = None
    checkpoint_from: Optional["Value"] = None


# The keys an argument description (ModuleObject.arguments) gives the name `from_pretrained` loads.
_CHECKPOINT_ARGUMENTS = ("pretrained_model_name_or_path", "#0")


def checkpoint_argument(module: "ModuleObject") -> Optional[tuple[str, tuple]]:
    """(key, description) of the name handed to the `from_pretrained` that built `module`, as its
    arguments describe it; None when the module was built otherwise or the name is not passed."""
    if len(module.classes) != 1 or not module.classes[0].endswith(".from_pretrained"):
        return None
    arguments = dict(module.arguments or ())
    return next(((key, tuple(arguments[key])) for key in _CHECKPOINT_ARGUMENTS if key in arguments), None)


def loaded_checkpoint(value: "Value") -> Optional[str]:
    """The checkpoint name a transformers model was loaded from, when the code shows it: an
    `Instance`'s, or the literal name the `from_pretrained` that built a module held on `self` was
    given (`self.model = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-3.2-1B")`)."""
    if isinstance(value, Instance):
        return value.checkpoint
    found = checkpoint_argument(value) if isinstance(value, ModuleObject) else None
    if found is not None and found[1][0] == "const" and isinstance(found[1][1], str):
        return found[1][1]
    return None


@dataclass(frozen=True, eq=False)
class ParsedArgs:
    """The namespace `parser.parse_args()` returns when the script runs as written: each option's
    default (`dest` -> value) when it is a literal that turns something on (a name, a number that
    is not 0, True); unknown for a falsy or missing default, which exists to be overridden."""

    defaults: dict[str, "Value"]

    def option(self, name: str) -> "Value":
        return self.defaults.get(name, UNKNOWN)


@dataclass(frozen=True)
class HfConfig:
    """What the code shows of a transformers config: its model family ("Bert" for `BertConfig` and
    the Bert models; None for a family the dropout table does not know, or `AutoConfig`), the
    attributes it sets (keywords, assignments), and whether the others keep the config class's
    defaults (built by its constructor) or come from a checkpoint (unknown)."""

    family: Optional[str]
    settings: tuple[tuple[str, "Value"], ...]
    defaults: bool


@dataclass(frozen=True)
class DataSource:
    """A DataLoader: iterating it yields batches that do not require grad."""

    origin: str


class Grad(enum.Enum):
    NONE = "cannot require grad"
    REQUIRED = "requires grad"
    UNKNOWN = "may require grad"  # a tensor, but whether it needs grad is not known
    # Requires grad on at least one path (a merge of a grad-carrying tensor with something else):
    # enough for hazards that one such path brings, never for facts that must hold on every path.
    ON_SOME_PATH = "requires grad on some paths"


@dataclass(frozen=True)
class Tensor:
    """A tensor whose `requires_grad` the dataflow decided; `origin` explains why, for messages."""

    grad: Grad
    origin: Union[str, Spelling]
    # No grad because upstream parameters are frozen (CKPT005) rather than because it is data (CKPT001).
    frozen: bool = False
    # An `nn.Parameter` itself: capturing it in a checkpointed closure is harmless (no graph behind it).
    leaf: bool = False
    # A module's or function's output, which may be a tuple: its unpacked parts may be masks or indices.
    maybe_tuple: bool = False
    # A list or tuple of such tensors, of no fixed length (a backbone's `return tuple(outs)`): handed
    # whole to a reentrant checkpoint, none of them is a top-level tensor input.
    sequence: bool = False


@dataclass(frozen=True)
class Pieces:
    """Slices of one tensor (`t.chunk(3)`, `t.unbind(0)`, `torch.split(t, 2)`): each part is like `tensor`."""

    tensor: Tensor


# --- values that depend on a function's parameters, resolved once the callers are known --------


@dataclass(frozen=True)
class ElementOf:
    """An element of `base` (a loop variable, `base[i]`, an unpacked part)."""

    base: "Value"


@dataclass(frozen=True)
class ItemOf:
    """`base["key"]` or `base.get("key", missing)` of a mapping a parameter holds (a table of
    settings handed down); `missing`: what it gives when the table holds no such key."""

    base: "Value"
    key: str
    missing: "Value"


@dataclass(frozen=True)
class AttributeOf:
    """`base.attr` (`model.blocks`, `model.config`)."""

    base: "Value"
    attr: str


@dataclass(frozen=True, eq=False)
class CallOf:
    """What calling `callee` (a module or function held by a parameter, or a method of the object:
    then `call` is the call, whose arguments bind the method's summary) returns."""

    callee: "Value"
    inputs: tuple["Value", ...]
    origin: Union[str, Spelling]
    call: Optional[cst.CSTNode] = None


@dataclass(frozen=True)
class Derived:
    """A tensor computed by ops that keep `requires_grad` (`x.float()`, `x + 1`, a parameter-free or
    frozen module, a reentrant checkpoint) from `sources` that depend on parameters, and from `base`
    (a tensor that cannot require grad) if one took part."""

    sources: tuple["Value", ...]
    base: Optional[Tensor]
    # Why the result cannot require grad once the sources cannot (None: the sources' own reasons).
    origin: Union[str, Spelling, None]
    frozen: bool = False


@dataclass(frozen=True)
class OneOf:
    """Either of `options`, depending on the path taken (a merge involving a parameter)."""

    options: tuple["Value", ...]


@dataclass(frozen=True)
class Defaulted:
    """`value`, or `fallback` when it is None (`if kw is None: kw = {}`) or, with `falsy`, any false
    value (`kw = kw or {}`)."""

    value: "Value"
    fallback: "Value"
    falsy: bool


SYMBOLIC = (Param, ElementOf, ItemOf, AttributeOf, CallOf, Derived, OneOf, Defaulted)
# A merge of more alternatives than this is simply unknown.
_MAX_OPTIONS = 4

Value = Union[
    Unknown, Const, DictLit, Ref, Partial, Lambda, ModuleObject, Param, LocalFunction, DataSource, Tensor, Instance, ParsedArgs, Items,
    Pieces, ElementOf, ItemOf, AttributeOf, CallOf, Derived, OneOf, Defaulted,
]  # fmt: skip


def merge(a: Optional[Value], b: Value) -> Value:
    """Join of two possible values at a control-flow merge: equal or unknown (or, when a parameter
    is involved, either of them until the parameter is known). A tensor that requires grad on one
    side survives as requiring grad on some path."""
    if a is None or a is b:
        return b
    if a == b:
        return same_object(a, b)
    if isinstance(a, Tensor) and isinstance(b, Tensor) and a.grad is b.grad:
        return Tensor(a.grad, a.origin, a.frozen and b.frozen, a.leaf and b.leaf, a.maybe_tuple or b.maybe_tuple, a.sequence and b.sequence)
    options = tuple(dict.fromkeys([*_options(a), *_options(b)]))
    if isinstance(a, SYMBOLIC) or isinstance(b, SYMBOLIC):
        if len(options) <= _MAX_OPTIONS and not any(isinstance(o, Unknown) for o in options):
            return OneOf(options)
    carrier = next((t for t in map(grad_on_some_path, options) if t is not None), None)
    if carrier is not None:
        return Tensor(Grad.ON_SOME_PATH, carrier.origin, leaf=carrier.leaf, maybe_tuple=carrier.maybe_tuple)
    return UNKNOWN


def same_object(a: Value, b: Value) -> Value:
    """Equal values; two constructions of the same class with different arguments keep none."""
    if isinstance(a, ModuleObject) and isinstance(b, ModuleObject) and a.arguments != b.arguments:
        return replace(b, arguments=None, built_by=None)
    return b


def grad_on_some_path(value: Value) -> Optional[Tensor]:
    """The tensor that requires grad on at least one of the paths `value` stands for, if any."""
    if isinstance(value, Tensor):
        return value if value.grad in (Grad.REQUIRED, Grad.ON_SOME_PATH) else None
    if isinstance(value, OneOf):
        return next((t for t in map(grad_on_some_path, value.options) if t is not None), None)
    if isinstance(value, Defaulted):
        return grad_on_some_path(value.value) or grad_on_some_path(value.fallback)
    return None


def _options(value: Value) -> tuple[Value, ...]:
    return value.options if isinstance(value, OneOf) else (value,)


def join_grad(values: list[Value], origin: Union[str, Spelling]) -> Value:
    """requires_grad of an op's result: any input requiring grad makes it require grad."""
    values = [v.tensor if isinstance(v, Pieces) else v for v in values]
    tensors = [v for v in values if isinstance(v, Tensor)]
    if any(t.grad is Grad.REQUIRED for t in tensors):
        return Tensor(Grad.REQUIRED, origin)
    sometimes = next((t for t in tensors if t.grad is Grad.ON_SOME_PATH), None)
    if sometimes is not None:
        return Tensor(Grad.ON_SOME_PATH, sometimes.origin)
    symbolic = [v for v in values if isinstance(v, SYMBOLIC)]
    if any(not isinstance(v, (Tensor, Const, *SYMBOLIC)) for v in values) or any(t.grad is Grad.UNKNOWN for t in tensors):
        return UNKNOWN
    if symbolic:
        sources = tuple(dict.fromkeys(s for v in symbolic for s in (v.sources if isinstance(v, Derived) else (v,))))
        bases = [*tensors, *(v.base for v in symbolic if isinstance(v, Derived) and v.base is not None)]
        frozen = any(t.frozen for t in bases) or any(v.frozen for v in symbolic if isinstance(v, Derived))
        # One derived input and nothing else: its reason (a reentrant checkpoint's output) still holds.
        kept = symbolic[0].origin if len(values) == 1 and isinstance(symbolic[0], Derived) else None
        return Derived(sources, bases[0] if bases else None, kept, frozen)
    if not tensors:
        return UNKNOWN
    return Tensor(Grad.NONE, tensors[0].origin, frozen=any(t.frozen for t in tensors))


def defaulted(value: Value, fallback: Value, falsy: bool) -> Value:
    """`value or fallback` (`falsy`) / `fallback if value is None else value`, as far as it is known."""
    if value == Const(None) or falsy and (isinstance(value, Const) and not value.value or isinstance(value, DictLit) and value.complete and not value.entries):
        return fallback
    if isinstance(value, (Const, DictLit)):
        return value
    if isinstance(value, SYMBOLIC):
        return Defaulted(value, fallback, falsy)
    # A tensor parameter that is None when its caller omits it: either path may run.
    return merge(value, fallback) if isinstance(value, Tensor) and not falsy else UNKNOWN


def holds_tensor(value: Value) -> bool:
    """A tensor, or a list, tuple or dict literal holding one (`self.aux.extend([loss])`)."""
    if isinstance(value, Items):
        return any(holds_tensor(v) for v in value.values)
    if isinstance(value, DictLit):
        return any(holds_tensor(v) for v in value.entries.values())
    return isinstance(value, Tensor)


def every_submodule(module: ModuleObject, walk: str) -> ModuleObject:
    """What `module.modules()` / `module.named_modules()` yields from, as a container."""
    step = ("" if module.path else "|".join(module.classes), SUBMODULES)
    container = NAMED_WALK if walk.startswith("named_") else WALK
    return ModuleObject((ANY_MODULE,), f"a module inside {module.origin}", container, path=(*module.path, step))


def item_of(value: Value, key: str, missing: Value) -> Value:
    """`value[key]` / `value.get(key, missing)`: a literal table's entry, open while the table is a
    parameter's, else an element as for any index."""
    if isinstance(value, DictLit):
        if key in value.entries:
            return value.entries[key]
        return missing if value.complete else UNKNOWN
    if isinstance(value, SYMBOLIC):
        return ItemOf(value, key, missing)
    return element_of(value)


def element_of(value: Value) -> Value:
    """An element of `value` when iterated or indexed."""
    if isinstance(value, ModuleObject) and value.container in (WALK, NAMED_WALK):
        inside = replace(value, container=None)
        return Items((UNKNOWN, inside)) if value.container == NAMED_WALK else inside
    if isinstance(value, ModuleObject) and value.container:
        return ModuleObject(value.classes, f"an element of {value.origin}", arguments=value.arguments, built_by=value.built_by, path=(*value.path, ELEMENT))
    if isinstance(value, DataSource):
        return Tensor(Grad.NONE, f"a batch from the DataLoader `{value.origin}`")
    if isinstance(value, Pieces):
        return value.tensor
    if isinstance(value, Tensor) and value.sequence:
        return replace(value, sequence=False, maybe_tuple=False)
    if isinstance(value, (Tensor, Const)):
        return value  # slicing keeps a tensor a tensor, and metadata metadata
    if isinstance(value, SYMBOLIC):
        return ElementOf(value)
    return UNKNOWN


def packed(value: Value, path: str = "") -> Iterator[tuple[str, Value]]:
    """The elements inside a literal tuple, list or dict, nested ones too, or inside a sequence of
    tensors, each with where it sits (`[1]`, `["ctx"]`, `[i]`)."""
    if isinstance(value, Items):
        for i, item in enumerate(value.values):
            yield from packed(item, f"{path}[{i}]")
    elif isinstance(value, DictLit):
        for key, item in value.entries.items():
            yield from packed(item, f'{path}["{key}"]')
    elif isinstance(value, Tensor) and value.sequence:
        yield f"{path}[i]", replace(value, sequence=False, maybe_tuple=False)
    elif path:
        yield path, value


def literal_value(value: object, node: Optional[cst.BaseExpression] = None) -> Value:
    """A literal (a dict or list of literals too) as a value spelled at `node`; None: spelled in
    another definition (a dataclass field's default dict), where findings on its entries point at
    the `**` that spreads it."""
    if isinstance(value, dict):
        where = node if node is not None else _spelled_elsewhere()
        return DictLit({k: literal_value(v, where) for k, v in value.items()}, True, where)
    if isinstance(value, list):
        return Items(tuple(literal_value(v, node) for v in value))
    return Const(value)  # type: ignore[arg-type]


@functools.lru_cache(maxsize=1)
def _spelled_elsewhere() -> cst.BaseExpression:
    import libcst

    return libcst.Name("spelled_in_another_definition")

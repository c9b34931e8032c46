"""What a module or config object visibly holds from how it was built: the arguments of its
`__init__` (defaults filled in), and the attributes of a project config object handed to it
(`nn.Dropout(config.dropout)` in a block built from `GPTConfig(dropout=0.0)`).

Arguments are described as the index records them (`AttrBinding.arguments`): `("const", literal)`,
`("param", name of the enclosing `__init__`'s parameter passed on)`, `("attr", parameter, attribute)`
for `config.dropout`, or `("?",)`; a project object built in the call itself is `("object", class,
its arguments)` (the LibCST pass only); a construction the LibCST pass sees describes its literals the
same way. Keys are a keyword or `#<position>`; `.<attr>` records an assignment made to the object
after it was built (`config.dropout = 0.1`), which wins over the constructor's value. Only literals
count: anything else is unknown, so no guess is ever read as a value.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional

from ckptlint.model.values import Const, literal_value

if TYPE_CHECKING:
    from ckptlint.index import ProjectIndex

Arguments = tuple[tuple[str, tuple], ...]
# The known values of an `__init__`'s parameters by name, and of the attributes of config objects
# among them by `param.attr` (None: built where the analysis cannot see).
Context = dict[str, Const]


def passed(index: "ProjectIndex", cls: str, arguments: dict[str, tuple], context: Optional[Context]) -> Optional[Context]:
    """What `cls.__init__`'s parameters hold for a construction with these arguments, with the
    enclosing `__init__`'s known values (`context`) substituted and the defaults filled in, plus the
    attributes of each config object handed over (`config.dropout`)."""
    holder = index.init_signature(cls)
    if holder is None:
        return None
    known: Context = {}
    for position, name in enumerate(holder.init_params or ()):
        described = arguments.get(name, arguments.get(f"#{position}"))
        if described is None:
            if name in holder.init_defaults and "**" not in arguments:  # "**": spread from a table of settings
                known[name] = Const(holder.init_defaults[name])
            continue
        value = resolve(described, context)
        if value is not None:
            known[name] = value
        elif described[0] == "object":
            # A config object built in the call: its attributes as its construction shows them.
            known.update((f"{name}.{attr}", field) for attr, field in object_fields(index, described[1], described[2]).items())
        elif described[0] == "param" and context is not None:
            # A config object passed on: its attributes travel with it under the new name.
            prefix = f"{described[1]}."
            known.update((f"{name}.{key[len(prefix):]}", v) for key, v in context.items() if key.startswith(prefix))
    return known


def resolve(described: tuple, context: Optional[Context]) -> Optional[Const]:
    """The literal an argument description stands for in `context` (None: unknown)."""
    if described[0] == "const":
        return Const(described[1])
    if context is None:
        return None
    if described[0] == "param":
        return context.get(described[1])
    if described[0] == "attr":
        return context.get(f"{described[1]}.{described[2]}")
    return None


def post_initialised(index: "ProjectIndex", cls: str) -> bool:
    """Whether the class or a base defines `__post_init__`, which may change any field."""
    return any(index.class_(name) is not None and "__post_init__" in index.class_(name).methods for name in index.ancestors(cls))  # type: ignore[union-attr]


def object_fields(index: "ProjectIndex", cls: str, arguments: Optional[Arguments]) -> dict[str, Const]:
    """The attributes a project object built with these (literal) arguments visibly holds: a
    dataclass-style class's class-level defaults overridden by keywords, or what its `__init__`
    stores from its parameters (`self.dropout = dropout`); assignments after construction win.
    A `__post_init__` may change any field: then nothing is known."""
    if arguments is None or post_initialised(index, cls):
        return {}
    given = dict(arguments)
    fields: dict[str, Const] = {}
    init = index.init_signature(cls)
    # Only the `__init__` that runs maps its parameters to attributes (a base's may get other values).
    parameters = passed(index, cls, given, None) or {}
    for name in reversed(list(index.ancestors(cls))):
        summary = index.class_(name)
        for attr, binding in summary.attrs.items() if summary is not None else ():
            if binding.has_constant:
                fields[attr] = literal_value(binding.constant)  # type: ignore[assignment]
            elif binding.param is not None and init is not None and summary.qualname == init.qualname and binding.param in parameters:
                fields[attr] = parameters[binding.param]
            else:
                fields.pop(attr, None)
    if init is None:  # fields set by keyword (a dataclass's generated `__init__`)
        if any(key.startswith("#") or key == "**" for key in given):
            return {}  # positional fields (their order is not recorded), or fields spread from a table
        for key, described in given.items():
            if not key.startswith("."):
                fields.pop(key, None)
                if described[0] == "const":
                    fields[key] = Const(described[1])
    for key, described in given.items():
        if key.startswith("."):
            fields.pop(key[1:], None)
            if described[0] == "const":
                fields[key[1:]] = Const(described[1])
    return fields

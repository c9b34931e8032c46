"""Values of expressions: names through the scopes and the project index, calls of torch, of
project functions and modules, literals, and a call's arguments after partials and `**dicts`."""

from __future__ import annotations

import ast
from dataclasses import replace
from functools import lru_cache
from typing import Optional, Sequence

import libcst as cst

from ckptlint.ast_nodes import CONSTANT_KEY
from ckptlint.index import Alias
from ckptlint.model import command_line
from ckptlint.model.apis import DEEP_COPIES
from ckptlint.model.command_line import is_parser
from ckptlint.model.dataflow import tensor_attribute
from ckptlint.model.hf_configs import built_config, built_elsewhere, is_transformers_model
from ckptlint.model.model_states import returned_argument
from ckptlint.model.scope import CallArguments
from ckptlint.model.shapes import bound_names, is_self, is_super, none_test
from ckptlint.model.sites import FlagStatus, FunctionFacts
from ckptlint.model.torch_knowledge import (
    CONTAINERS,
    DATA_LOADERS,
    GRAD_FREE_METHODS,
    GRAD_NEUTRAL_METHODS,
    GRAD_NEUTRAL_PREFIXES,
    MODULE_SELF_METHODS,
    SPLITTING_FUNCTIONS,
    SPLITTING_METHODS,
    TENSOR_FACTORIES,
)
from ckptlint.model.values import (
    SUBMODULE_WALKS,
    SYMBOLIC,
    UNKNOWN,
    AttributeOf,
    CallOf,
    Const,
    DataSource,
    Defaulted,
    Derived,
    DictLit,
    Grad,
    Instance,
    Items,
    Lambda,
    LocalFunction,
    ModuleObject,
    OneOf,
    Param,
    ParsedArgs,
    Partial,
    Pieces,
    Ref,
    Spelling,
    Tensor,
    Unknown,
    Value,
    code,
    defaulted,
    element_of,
    item_of,
    literal_value,
    every_submodule,
    join_grad,
    merge,
)

BUILTINS = frozenset({"dict", "list", "tuple", "print", "len", "range", "enumerate", "zip", "super", "isinstance", "setattr"})
_NUMBERS = (cst.Integer, cst.Float)
_SEQUENCES = (cst.Tuple, cst.List, cst.Set)
_COMPREHENSIONS = (cst.ListComp, cst.GeneratorExp)
# The container of modules a comprehension builds (a plain list, before `nn.ModuleList(layers)`).
LIST_CONTAINER = "builtins.list"
# The node classes `evaluate` tells apart, in the order it tests them.
_EVALUATED = (cst.Name, _NUMBERS, cst.SimpleString, cst.Attribute, cst.Subscript, cst.BinaryOperation, cst.UnaryOperation, cst.Comparison, cst.Dict, _SEQUENCES, _COMPREHENSIONS, cst.Call, cst.Lambda, cst.IfExp, cst.BooleanOperation)
_BRANCHES: dict[type, object] = {}


@lru_cache(maxsize=4096)
def _literal(text: str) -> object:
    """The value of a number or string literal (memoized: `ast.literal_eval` compiles its text, and
    the same few literals are evaluated again for every expression that holds them)."""
    return ast.literal_eval(text)


# Where a module-level partial of another file is spelled until a name here refers to it.
_ELSEWHERE = cst.Name("partial_of_another_module")


def _literal_index(node: cst.Subscript) -> Optional[int]:
    """`n` of `value[n]` / `value[-n]` with `n` an integer literal."""
    if len(node.slice) != 1 or not isinstance(node.slice[0].slice, cst.Index):
        return None
    index = node.slice[0].slice.value
    negative = isinstance(index, cst.UnaryOperation) and isinstance(index.operator, cst.Minus)
    number = index.expression if negative else index  # type: ignore[attr-defined]
    if not isinstance(number, cst.Integer):
        return None
    value = _literal(number.value)
    return -value if negative else value


def _checkpoint_expression(qualname: str, node: cst.Call) -> Optional[cst.BaseExpression]:
    """What a transformers `from_pretrained` call is told to load: its first argument or
    `pretrained_model_name_or_path=`; None for any other call."""
    if not (qualname.startswith("transformers.") and qualname.endswith(".from_pretrained")):
        return None
    named = next((a.value for a in node.args if a.keyword is not None and a.keyword.value == "pretrained_model_name_or_path"), None)
    first = node.args[0] if node.args and node.args[0].keyword is None and not node.args[0].star else None
    return named or (first.value if first else None)


def computed_without_grad(expression: cst.BaseExpression, value: Value, context: str) -> Value:
    """What an assignment computed where autograd records nothing (`with torch.no_grad():`) holds:
    the result of a computation requires no grad whatever its inputs did. A name or attribute is the
    same object as before, an element of a container maybe too; a tensor created as a leaf that
    requires grad (`torch.zeros(..., requires_grad=True)`) still does."""
    if isinstance(value, Items):
        return replace(value, values=tuple(computed_without_grad(expression, v, context) for v in value.values))
    computed = isinstance(expression, (cst.Call, cst.BinaryOperation, cst.UnaryOperation)) or isinstance(expression, cst.Subscript) and isinstance(value, (Tensor, Derived))
    if not computed or not isinstance(value, (Tensor, Derived, CallOf, Unknown, Pieces)) or isinstance(value, Tensor) and value.leaf:
        return value
    if isinstance(expression, cst.Call) and (any(a.keyword and a.keyword.value == "requires_grad" for a in expression.args) or _called_method(expression) == "requires_grad_"):
        return value
    return Tensor(Grad.NONE, f"`{code(expression)}` is computed under {context}", maybe_tuple=True)


def _called_method(call: cst.Call) -> Optional[str]:
    return call.func.attr.value if isinstance(call.func, cst.Attribute) else None


def _passed(function: FunctionFacts, call: cst.Call, param: str) -> tuple[bool, Optional[cst.BaseExpression]]:
    """(known, the expression `call` passes for `param` of a module-level `function`, None when it
    is not passed); not known behind `*args`/`**kwargs`."""
    return passed_to(function.params, function.keyword_only, call, param)


def passed_to(params: Sequence[str], keyword_only: Sequence[str], call: cst.Call, param: str) -> tuple[bool, Optional[cst.BaseExpression]]:
    """`_passed` for a function known by its parameters (in order) and its keyword-only ones."""
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == param:
            return True, arg.value
    index = params.index(param)
    positional = [a for a in call.args if a.keyword is None and not a.star]
    if any(a.star for a in call.args) or param in keyword_only:
        return not any(a.star for a in call.args), None
    return True, positional[index].value if index < len(positional) else None


def _branch(node: cst.BaseExpression) -> object:
    """The first entry of _EVALUATED that `node` is an instance of (None: none), found once per node
    type: `isinstance` against LibCST's classes goes through ABCMeta, a dozen times per expression."""
    kind = type(node)
    if kind not in _BRANCHES:
        _BRANCHES[kind] = next((entry for entry in _EVALUATED if issubclass(kind, entry)), None)
    return _BRANCHES[kind]



class Evaluation:
    """Mixed into ModelBuilder: reads its scopes, summary, index and dataflow."""

    def ref(self, qualname: str) -> Value:
        canonical = self.index.canonical(qualname)
        alias = self.index.alias(canonical)
        if alias is not None and alias.is_partial:
            return self.aliased(alias)
        return Ref(canonical)

    def aliased(self, alias: Alias) -> Value:
        """What a name bound to `target` or `partial(target, kw=...)` elsewhere holds."""
        if not alias.is_partial:
            return self.ref(alias.target)
        keywords = {k: self.bound_keyword(v) for k, v in alias.keywords.items()}
        return Partial(self.ref(alias.target), (), keywords, {}, _ELSEWHERE)

    def lookup(self, name: str) -> Value:
        innermost = True
        for scope in reversed(self.scopes):
            # Class bodies are not visible from the methods defined in them.
            if scope.kind == "class" and not innermost:
                continue
            if name in scope.bindings:
                return scope.bindings[name]
            innermost = False
        summary = self.summary
        if name in summary.imports:
            return self.ref(summary.imports[name])
        if name in summary.classes or name in summary.functions or name in summary.aliases:
            return self.ref(f"{summary.name}.{name}")
        if name in BUILTINS:
            return Ref(f"builtins.{name}")
        return UNKNOWN

    def bound_keyword(self, bound: object) -> Value:
        """A keyword of a module-level partial: its literal, or the literal of the module-level
        constant it names (unknown when that name is no constant)."""
        if isinstance(bound, dict) and CONSTANT_KEY in bound:
            found = self.index.constant(self.index.canonical(bound[CONSTANT_KEY]))
            return Const(found[0]) if found is not None and not isinstance(found[0], (dict, list)) else UNKNOWN  # type: ignore[arg-type]
        return Const(bound)  # type: ignore[arg-type]

    def spelled_here(self, value: Value, node: cst.BaseExpression) -> Value:
        """What a name or attribute spelled at `node` refers to, located in this file: another
        module's constant (`settings.USE_REENTRANT`, an imported `CKPT_KWARGS`) is its literal; a
        module-level `partial(checkpoint, ...)` imported from another file is spelled at `node`
        (findings on its keywords point at the name here, not into the other file)."""
        if isinstance(value, Partial) and value.node is _ELSEWHERE:
            return replace(value, node=node)
        found = self.index.constant(value.qualname) if isinstance(value, Ref) else None
        return literal_value(found[0], node) if found is not None else value

    def self_attribute(self, attr: str) -> Value:
        # The method's `self`, also as a closure defined in the method sees it (`def run_stage(x): self.stages[i](x)`).
        method = next((s for s in reversed(self.scopes) if s.kind != "class" and "self" in s.bindings), None)
        owner = method.class_qualname if method is not None else None
        if owner is None:
            return UNKNOWN
        receiver = method.bindings["self"]
        if isinstance(receiver, Param) and self.index.is_record(owner) and self.index.attribute_holder(owner, attr) is not None:
            return AttributeOf(receiver, attr)  # `CkptConfig.kwargs`: the fields of the object it is called on
        binding = self.index.attribute(owner, attr)
        if binding is not None and binding.alias is not None:
            return self.aliased(binding.alias)  # `self._ckpt = partial(checkpoint, use_reentrant=True)`
        return self.flow.attribute(owner, attr, f"self.{attr}")

    def member_of(self, base: Value, attr: str, node: cst.BaseExpression) -> Value:
        """`base.attr` for the value `base` (`node`: where it is spelled)."""
        if isinstance(base, ModuleObject):
            return self.flow.member(base, attr)
        if isinstance(base, ParsedArgs):
            return base.option(attr)
        if isinstance(base, Tensor):
            return tensor_attribute(base, attr)
        if isinstance(base, SYMBOLIC):
            return AttributeOf(base, attr)
        return self.spelled_here(self.ref(f"{base.qualname}.{attr}"), node) if isinstance(base, Ref) else UNKNOWN

    def evaluate(self, node: cst.BaseExpression) -> Value:
        branch = _branch(node)
        if branch is cst.Name:
            if node.value in ("True", "False", "None"):
                return Const({"True": True, "False": False, "None": None}[node.value])
            return self.spelled_here(self.lookup(node.value), node)
        if branch is _NUMBERS:
            return Const(_literal(node.value))
        if branch is cst.SimpleString:
            return Const(_literal(node.value))  # what `node.evaluated_value` computes
        if branch is cst.Attribute:
            if isinstance(node.value, cst.Name) and node.value.value == "self":
                value = self.self_attribute(node.attr.value)
                if isinstance(value, Defaulted) and isinstance(value.fallback, Const):
                    # `self.ckpt_kwargs` of `ckpt_kwargs or {...}` in `__init__`: a dict literal's entries, spelled here.
                    return replace(value, fallback=literal_value(value.fallback.value, node))
                return value
            if is_super(node.value) and self.scope.class_qualname and "self" in self.scope.bindings:
                # `super().__call__` runs this module's own forward; `super().forward` the parent's.
                if node.attr.value == "__call__":
                    return self.scope.bindings["self"]
                parents = list(self.index.ancestors(self.scope.class_qualname))[1:]
                return next((self.flow.method(p, node.attr.value) for p in parents if self.flow.method(p, node.attr.value) != UNKNOWN), UNKNOWN)
            return self.member_of(self.evaluate(node.value), node.attr.value, node)
        if branch is cst.Subscript:
            registered = self.registered_classes(node.value)
            if registered is not None:
                return registered  # `MODELS[name]`: one of the classes the registry holds
            whole = self.evaluate(node.value)
            if len(node.slice) == 1 and isinstance(node.slice[0].slice, cst.Index):
                key = node.slice[0].slice.value
                passed = self.keyword_passed(whole, key)
                if passed is not None:
                    return passed
                named = key.evaluated_value if isinstance(key, cst.SimpleString) else None
                if isinstance(named, str) and (isinstance(whole, SYMBOLIC) or isinstance(whole, DictLit) and named in whole.entries):
                    return item_of(whole, named, UNKNOWN)  # `RUN["train"]` of a literal table, `cfg["memory"]` of one handed in
            index = _literal_index(node) if isinstance(whole, Items) else None
            if index is not None and -len(whole.values) <= index < len(whole.values):  # type: ignore[union-attr]
                return whole.values[index]  # type: ignore[union-attr]  # `parser.parse_known_args()[0]`, `pair[1]`
            return element_of(whole)
        if branch is cst.BinaryOperation:
            return join_grad([self.evaluate(node.left), self.evaluate(node.right)], Spelling("`{}`", node))
        if branch is cst.UnaryOperation:
            return self.evaluate(node.expression)
        if branch is cst.Comparison:
            # `x > 0` of a tensor is a boolean tensor; of anything else, not a tensor that may carry grad either.
            operands = [self.evaluate(node.left), *(self.evaluate(c.comparator) for c in node.comparisons)]
            return Tensor(Grad.NONE, Spelling("`{}` is a boolean tensor", node)) if any(isinstance(o, (Tensor, *SYMBOLIC)) for o in operands) else UNKNOWN
        if branch is cst.Dict:
            return self.dict_literal(node)
        if branch is _SEQUENCES:
            if any(isinstance(e, cst.StarredElement) for e in node.elements):
                return UNKNOWN
            return Items(tuple(self.evaluate(e.value) for e in node.elements))
        if branch is _COMPREHENSIONS:
            # `[Layer(d) for _ in range(n)]`: a list of such modules (what else it builds stays unknown).
            element = self.evaluate(node.elt)
            if isinstance(element, ModuleObject) and not element.container:
                return replace(element, origin=code(node), container=LIST_CONTAINER)
            return UNKNOWN
        if branch is cst.Call:
            return self.evaluate_call(node)
        if branch is cst.Lambda:
            return Lambda(node)
        if branch is cst.IfExp:
            tested = none_test(node.test)
            if tested is not None:
                # `{} if kw is None else kw`, `kw if kw is not None else {}`
                name, is_none = tested
                default, kept = (node.body, node.orelse) if is_none else (node.orelse, node.body)
                if isinstance(kept, cst.Name) and kept.value == name:
                    return defaulted(self.evaluate(kept), self.evaluate(default), falsy=False)
            body, orelse = self.evaluate(node.body), self.evaluate(node.orelse)
            for part, other in ((body, orelse), (orelse, body)):
                if isinstance(part, ModuleObject) and other == Const(None):
                    return part  # `masker if i == 1 else None`: where it is called, it is the module
            return merge(body, orelse)
        if branch is cst.BooleanOperation and isinstance(node.operator, cst.Or):
            return defaulted(self.evaluate(node.left), self.evaluate(node.right), falsy=True)
        return UNKNOWN

    def evaluate_call(self, node: cst.Call) -> Value:
        if id(node) in self.call_values:
            return self.call_values[id(node)]
        if isinstance(node.func, cst.Attribute) and node.func.attr.value == "get" and len(node.args) == 1 and not node.args[0].star:
            registered = self.registered_classes(node.func.value)
            if registered is not None:
                return registered  # `MODELS.get(name)`
        if isinstance(node.func, cst.Attribute) and node.func.attr.value in SUBMODULE_WALKS and not node.args:
            walked = self.evaluate(node.func.value)
            if is_self(node.func.value) and self.scope.class_qualname and "self" in self.scope.bindings:
                walked = ModuleObject((self.scope.class_qualname,), "self")
            if isinstance(walked, ModuleObject) and not walked.container:
                return every_submodule(walked, node.func.attr.value)
        if isinstance(node.func, cst.Attribute) and not is_self(node.func.value):
            receiver = self.evaluate(node.func.value)
            method = node.func.attr.value
            passed = self.keyword_passed(receiver, node.args[0].value) if method == "get" and node.args and not node.args[0].keyword else None
            if passed is not None:
                return passed
            looked_up = self.table_get(receiver, node) if method == "get" else None
            if looked_up is not None:
                return looked_up
            if isinstance(receiver, (Tensor, *SYMBOLIC)):
                result = self.tensor_method(receiver, method, node)
                if result is not None:
                    return result
            elif isinstance(receiver, ModuleObject) and method in MODULE_SELF_METHODS:
                return receiver  # `Net().to(device)`, `model.train()`
            elif is_transformers_model(receiver) and method in MODULE_SELF_METHODS:
                return receiver  # `BertModel(config).to(device)`: the same layers
            elif is_parser(receiver) and method in command_line.GROUPS:
                return receiver  # its options land in the parser's namespace
            elif is_parser(receiver) and method in command_line.PARSE and not node.args:
                return command_line.parsed(self.command_line_options.get(id(receiver.node), {}), method)  # type: ignore[union-attr]
        func = self.evaluate(node.func)
        if isinstance(func, OneOf) and all(isinstance(o, Ref) and self.index.class_(o.qualname) is not None for o in func.options):
            # `MODELS[name](...)`: an object of one of the registry's classes, built with these arguments.
            classes = tuple(o.qualname for o in func.options)  # type: ignore[union-attr]
            return ModuleObject(classes, code(node.func), arguments=self.construction_arguments(node))
        if isinstance(func, SYMBOLIC):
            return CallOf(func, tuple(self.evaluate(a.value) for a in node.args if not a.keyword and not a.star), Spelling("`{}`", node), node)
        if isinstance(func, LocalFunction) and func.node is None:
            # `self.encode(ids)`: what the method returns, once its summary is bound to this call.
            return CallOf(func, (), Spelling("`{}`", node), node)
        # A factory at module level, like a local one, may return the closure it defines.
        factory = LocalFunction(func.qualname, self.module_functions[func.qualname]) if isinstance(func, Ref) and func.qualname in self.module_functions else func
        if isinstance(factory, LocalFunction):
            made = self.returned_closure(factory, node)
            if made is not None:
                return made
        if isinstance(func, ModuleObject):
            returned = self.returned_items(func)
            if returned is not None:
                return returned
            return self.module_output(func, [self.evaluate(a.value) for a in node.args if not a.keyword and not a.star])
        if not isinstance(func, Ref):
            return UNKNOWN
        if func.qualname in DEEP_COPIES and node.args and not node.args[0].star:
            copied = self.evaluate(node.args[0].value)
            if isinstance(copied, (ModuleObject, *SYMBOLIC)):
                return copied  # a module's copy runs the same forward
        if func.qualname in DATA_LOADERS:
            return DataSource(code(node.args[0].value) if node.args else "loader")
        if func.qualname in TENSOR_FACTORIES:
            requires = any(a.keyword and a.keyword.value == "requires_grad" and self.evaluate(a.value) == Const(True) for a in node.args)
            if requires:
                return Tensor(Grad.REQUIRED, Spelling("`{}` requires grad", node))
            return Tensor(Grad.NONE, Spelling("`{}(...)` creates a tensor that does not require grad", node.func))
        if func.qualname == "functools.partial" and node.args and not node.args[0].keyword and not node.args[0].star:
            arguments = self.arguments(node.args[1:])
            keywords = {k: v for k, (v, _, _) in arguments.keywords.items()}
            nodes = {k: n for k, (_, n, _) in arguments.keywords.items()}
            values = tuple(self.evaluate(a.value) for a in arguments.positional if not a.star)
            return Partial(self.evaluate(node.args[0].value), arguments.positional, keywords, nodes, node, values, arguments.spread)
        if func.qualname == "builtins.dict" and all(arg.keyword or arg.star == "**" for arg in node.args):
            return self.dict_from_arguments(node, node.args)
        if func.qualname in ("builtins.list", "builtins.tuple") and len(node.args) == 1 and not node.args[0].keyword and not node.args[0].star:
            # `functions = list(functions)`: the same elements, whether modules of a container or what a parameter holds.
            whole = self.evaluate(node.args[0].value)
            if isinstance(whole, ModuleObject) and whole.container or isinstance(whole, (Items, *SYMBOLIC)):
                return whole
        if self.index.class_(func.qualname) is not None:
            return ModuleObject((func.qualname,), code(node.func), arguments=self.construction_arguments(node))
        if func.qualname in CONTAINERS:
            held = self.contained_classes(node.args)
            if held:
                spelled = code(node) if len(code(node)) <= 60 else f"{code(node.func)}(...)"
                return ModuleObject(held, spelled, container=func.qualname)  # `blocks = nn.ModuleList([Block() ...])`
        if func.qualname in SPLITTING_FUNCTIONS and node.args and not node.args[0].star:
            whole = self.evaluate(node.args[0].value)
            if isinstance(whole, SYMBOLIC):
                return join_grad([whole], Spelling("`{}`", node))
            return Pieces(Tensor(whole.grad, whole.origin, whole.frozen)) if isinstance(whole, Tensor) else UNKNOWN
        if func.qualname.startswith(GRAD_NEUTRAL_PREFIXES) and func.qualname.count(".") <= 3:
            return join_grad([self.evaluate(a.value) for a in node.args if not a.star], Spelling("`{}`", node))
        module, name = self.index.split(func.qualname)
        if module is not None and name in module.functions:
            handed = returned_argument(self, node)  # type: ignore[arg-type]
            module_handed = self.evaluate(handed) if handed is not None else None
            if isinstance(module_handed, (ModuleObject, Instance)):
                return module_handed  # `model = prepare(model)`, `attach_lora(build_backbone())`: the same object
            in_tuple = self.handed_back_in_tuple(self.functions.get(func.qualname), node)
            if in_tuple is not None:
                return in_tuple
            built = self.built_by_builder(func.qualname, node)
            if built is not None:
                return built
            if func.qualname not in self.functions and self.index.returns_closure(func.qualname):
                return self.loaded(func.qualname, node)  # another file's closure factory: resolved with its summary
            inputs = [self.evaluate(a.value) for a in node.args if not a.star]
            if any(isinstance(v, Tensor) for v in inputs):
                # A tensor, but maybe a mask built from an input's shape: whether it needs grad is open.
                return Tensor(Grad.UNKNOWN, Spelling("`{}`", node), maybe_tuple=True)
            facts = self.functions.get(func.qualname)
            returned = facts.returns if facts is not None else None
            made = self.index.builds(func.qualname) if facts is None else None
            config = built_elsewhere(made, self.index.returns_cached_model(func.qualname)) if made else None
            if config is not None:
                return Instance(made, node, config)  # `LlamaForCausalLM(cached_llama())`, the helper in another file
            if made is None and not isinstance(returned, Instance) and any(isinstance(v, SYMBOLIC) for v in inputs):
                # Fed this function's parameters: a tensor (as above) once its callers pass one.
                return CallOf(func, tuple(inputs), Spelling("`{}`", node))
            if isinstance(returned, Instance):
                # `model = load("meta-llama/Llama-3.2-1B")`: the name the helper loads, maybe this call's argument.
                checkpoint = returned.checkpoint or self.checkpoint_name(returned.ctor, returned.node, facts, node)
                if returned.config is not None:
                    return replace(returned, checkpoint=checkpoint)  # `config = tiny_config()`: a config built by a helper
                return Instance(func.qualname, node, checkpoint=checkpoint)
        return self.loaded(func.qualname, node)

    def built_by_builder(self, function: str, call: cst.Call) -> Optional[ModuleObject]:
        """`build_model("mixer_b", grad_ckpt=True)` of a builder that returns `MLPMixer(grad_ckpt=
        grad_ckpt)`: a model of that project class, built with what this call hands the builder's
        parameters (their defaults when it hands nothing), so its flags are known here."""
        found = self.index.builder_call(function)
        if found is None or self.index.class_(found[0]) is None or any(a.star for a in call.args):
            return None
        ctor, (params, defaults, passed) = found

        def handed(name: str) -> tuple:
            _, expression = passed_to(params, (), call, name)
            if expression is not None:
                return _described(self.evaluate(expression))
            return ("const", defaults[name]) if name in defaults else ("?",)

        arguments = tuple((key, handed(d[1]) if d[0] == "param" and d[1] in params else tuple(d)) for key, d in passed.items() if key != "**")
        rest = passed.get("**", [])
        if "kwargs" in rest:
            # `def build_model(name, **kwargs): return Mixer(**kwargs)`: the keywords this call passes
            # beyond the builder's own parameters reach the constructor.
            arguments += tuple((a.keyword.value, _described(self.evaluate(a.value))) for a in call.args if a.keyword is not None and a.keyword.value not in params)
        if "?" in rest:
            arguments += (("**", ("?",)),)
        return ModuleObject((ctor,), code(call), arguments=arguments)

    def contained_classes(self, args: Sequence[cst.Arg]) -> tuple[str, ...]:
        """The classes of the modules a container is built from (a list, a comprehension, `*layers`),
        when every one of them is known; () otherwise."""
        elements: list[cst.BaseExpression] = []
        for arg in args:
            if arg.keyword is not None:
                return ()
            value = arg.value
            if isinstance(value, (cst.ListComp, cst.GeneratorExp)):
                elements.append(value.elt)
            elif isinstance(value, (cst.List, cst.Tuple)):
                elements.extend(e.value for e in value.elements)
            else:
                elements.append(value)  # a module, or `*layers` (a list of them)
        classes: list[str] = []
        for element in elements:
            value = self.evaluate(element)
            for module in value.values if isinstance(value, Items) else (value,):
                if isinstance(module, ModuleObject) and not module.container:
                    classes.extend(module.classes)
                elif isinstance(module, Instance) and module.ctor.startswith("torch.nn."):
                    classes.append(module.ctor)  # a built-in layer
                else:
                    return ()
        return tuple(dict.fromkeys(classes))

    def handed_back_in_tuple(self, facts: Optional[FunctionFacts], call: cst.Call) -> Optional[Items]:
        """`model, n = freeze_all_but_attention(model)` of a function ending `return model, count`:
        the tuple with the module this call hands it at that place (the rest unknown)."""
        returned = facts.returns if facts is not None else None
        if not isinstance(returned, Items):
            return None
        for place, value in enumerate(returned.values):
            if not (isinstance(value, Param) and value.function == facts.qualname and value.name in facts.params):  # type: ignore[union-attr]
                continue
            known, passed = _passed(facts, call, value.name)  # type: ignore[arg-type]
            handed = self.evaluate(passed) if known and passed is not None else None
            if isinstance(handed, ModuleObject) or is_transformers_model(handed):
                return Items(tuple(handed if i == place else UNKNOWN for i in range(len(returned.values))))  # type: ignore[misc]
        return None

    def returned_closure(self, factory: LocalFunction, call: cst.Call) -> Optional[LocalFunction]:
        """`create_custom_forward(layer)` whose body defines `custom_forward` and returns it: that
        closure, with the factory's parameters bound to this call's arguments."""
        body = factory.node.body.body if factory.node is not None and isinstance(factory.node.body, cst.IndentedBlock) else ()
        last = body[-1] if body else None
        returned = last.body[0].value if isinstance(last, cst.SimpleStatementLine) and isinstance(last.body[0], cst.Return) else None
        inner = next((s for s in body if isinstance(s, cst.FunctionDef) and isinstance(returned, cst.Name) and s.name.value == returned.value), None)
        if inner is None:
            return None
        params = [p.name.value for p in factory.node.params.params]  # type: ignore[union-attr]
        positional = [a for a in call.args if not a.keyword]
        if any(a.star for a in call.args) or len(positional) > len(params):
            return None
        bound = {p: self.evaluate(a.value) for p, a in zip(params, positional)}
        bound.update((a.keyword.value, self.evaluate(a.value)) for a in call.args if a.keyword and a.keyword.value in params)
        star_star = factory.node.params.star_kwarg  # type: ignore[union-attr]
        if isinstance(star_star, cst.Param):
            # `def create_custom_forward(module, **extra)`: the keywords it does not name.
            extra = [a for a in call.args if a.keyword and a.keyword.value not in params]
            bound[star_star.name.value] = self.dict_from_arguments(call, extra)
        # The factory's own locals are not known here; its parameters are what this call passes.
        closure = tuple((name, bound.get(name, UNKNOWN)) for name in sorted({*params, *bound, *bound_names(factory.node.body)}))  # type: ignore[union-attr]
        return LocalFunction(f"{factory.qualname}.{inner.name.value}", inner, closure)

    def loaded(self, qualname: str, node: cst.Call) -> Instance:
        """What a call of `qualname` that is not project code returns: an object it builds, with the
        transformers config and the checkpoint name the code shows."""
        instance = Instance(qualname, node, built_config(self.evaluate, qualname, node), self.checkpoint_name(qualname, node))
        expr = _checkpoint_expression(qualname, node) if instance.checkpoint is None else None
        named = self.evaluate(expr) if expr is not None else None
        return replace(instance, checkpoint_from=named) if isinstance(named, SYMBOLIC) else instance

    def checkpoint_name(self, qualname: str, node: cst.Call, helper: Optional[FunctionFacts] = None, call: Optional[cst.Call] = None) -> Optional[str]:
        """The name a transformers `from_pretrained` call loads, when the code shows it; a parameter
        of the `helper` making that call is read from the helper's `call`."""
        expr = _checkpoint_expression(qualname, node)
        if expr is None:
            return None
        if helper is None or call is None:
            value = self.evaluate(expr)
        elif isinstance(expr, cst.Name) and expr.value in helper.params:
            known, passed = _passed(helper, call, expr.value)
            value = self.evaluate(passed) if passed is not None else helper.defaults.get(expr.value) if known else None
        else:
            return None
        return value.value if isinstance(value, Const) and isinstance(value.value, str) else None

    def registered_classes(self, holder: cst.BaseExpression) -> Optional[Value]:
        """For a project registry of classes (`MODELS`, `registry.MODELS`): the class looked up in it,
        as a choice among its classes (ProjectIndex.registry); None for anything else."""
        if isinstance(holder, cst.Name):
            if holder.value not in self.index.registry_names():
                return None
            bound = next((s for s in reversed(self.scopes) if holder.value in s.bindings), None)
            if bound is not None and bound.kind != "module":
                return None  # a local dict
            qualname = self.summary.imports.get(holder.value, f"{self.summary.name}.{holder.value}")
        elif isinstance(holder, cst.Attribute) and holder.attr.value in self.index.registry_names():
            module = self.evaluate(holder.value)
            if not isinstance(module, Ref):
                return None
            qualname = f"{module.qualname}.{holder.attr.value}"
        else:
            return None
        classes = self.index.registry(qualname)
        if classes is None:
            return None
        return Ref(classes[0]) if len(classes) == 1 else OneOf(tuple(Ref(c) for c in classes))

    def construction_arguments(self, node: cst.Call) -> Optional[tuple[tuple[str, tuple], ...]]:
        """A project class's construction arguments, described as the index describes them
        (ckptlint/model/construction.py): literals, anything else unknown; the entries of a table of
        settings spread into it (`Net(**CONFIG["model"])`, its keys all known); None with `*args`
        or any other `**kwargs`."""
        positional = (a for a in node.args if a.keyword is None and not a.star)
        keys = {id(a): f"#{i}" for i, a in enumerate(positional)}
        described = []
        for arg in node.args:
            value = self.evaluate(arg.value)
            if arg.star == "**" and isinstance(value, DictLit) and value.complete:
                described.extend((key, _described(entry)) for key, entry in value.entries.items())
            elif arg.star:
                return None
            else:
                described.append((arg.keyword.value if arg.keyword else keys[id(arg)], _described(value)))
        return tuple(described)

    def tensor_method(self, receiver: Value, method: str, node: cst.Call) -> Optional[Value]:
        """`receiver.method(...)` for a tensor, or a value that depends on parameters (then maybe a
        module: conversions like `.to(device)` return it unchanged). None: not a known method."""
        if method == "detach":
            return Tensor(Grad.NONE, Spelling("`{}` is detached", node))
        if method == "requires_grad_":
            flag = self.evaluate(node.args[0].value) if node.args else Const(True)
            if isinstance(flag, Const):
                return Tensor(Grad.REQUIRED if flag.value else Grad.NONE, Spelling("`{}`", node))
            return UNKNOWN
        if isinstance(receiver, SYMBOLIC) and method in MODULE_SELF_METHODS:
            return join_grad([receiver], Spelling("`{}`", node))
        if method in GRAD_FREE_METHODS and isinstance(receiver, (Tensor, *SYMBOLIC)):
            return Tensor(Grad.NONE, Spelling("`{}` is a boolean or integer tensor", node))
        if method in GRAD_NEUTRAL_METHODS:
            origin = receiver.origin if isinstance(receiver, Tensor) else Spelling("`{}`", node)
            return join_grad([receiver, *(self.evaluate(a.value) for a in node.args if not a.star)], origin)
        if method in SPLITTING_METHODS:
            if isinstance(receiver, Tensor):
                return Pieces(Tensor(receiver.grad, receiver.origin, receiver.frozen))
            return join_grad([receiver], Spelling("`{}`", node))
        return UNKNOWN if isinstance(receiver, Tensor) else None

    def table_get(self, mapping: Value, node: cst.Call) -> Optional[Value]:
        """`table.get("key")` / `table.get("key", default)` of a literal table or one a parameter holds."""
        positional = [a for a in node.args if a.keyword is None and not a.star]
        if not (isinstance(mapping, (DictLit, *SYMBOLIC)) and 1 <= len(positional) == len(node.args) <= 2):
            return None
        key = positional[0].value
        if not (isinstance(key, cst.SimpleString) and isinstance(key.evaluated_value, str)):
            return None
        missing = self.evaluate(positional[1].value) if len(positional) == 2 else Const(None)
        return item_of(mapping, key.evaluated_value, missing)

    def keyword_passed(self, mapping: Value, key: cst.BaseExpression) -> Optional[Param]:
        """`kwargs["model"]` / `kwargs.get("model")` on this function's own `**kwargs`: what its callers
        pass by the keyword `model`, a parameter in all but name (`summaries.bind` reads the call)."""
        facts = self.scope.facts
        if not (isinstance(mapping, Param) and facts is not None and mapping.function == facts.qualname and mapping.name == facts.star_star):
            return None
        name = key.evaluated_value if isinstance(key, cst.SimpleString) else None
        return Param(name, mapping.function) if isinstance(name, str) and name.isidentifier() and name not in facts.params else None

    def returned_items(self, module: ModuleObject) -> Optional[Items]:
        """What a module defined earlier in this file returns as a tuple, element by element."""
        if len(module.classes) != 1:
            return None
        owner = self.index.forward_owner(module.classes[0])
        facts = self.functions.get(f"{owner.qualname}.forward") if owner else None
        return facts.returns if facts is not None and isinstance(facts.returns, Items) else None

    def module_output(self, module: ModuleObject, inputs: list[Value]) -> Value:
        return self.flow.module_output(module, inputs, self.flow.frozen(self.scope.class_qualname, module))

    def dict_literal(self, node: cst.Dict) -> DictLit:
        return self.build_dict(node, [(e.key if isinstance(e, cst.DictElement) else None, e.value, e) for e in node.elements])

    def dict_from_arguments(self, node: cst.CSTNode, args: Sequence[cst.Arg]) -> DictLit:
        return self.build_dict(node, [(Const(a.keyword.value) if a.keyword else None, a.value, a) for a in args])

    def build_dict(self, node: cst.CSTNode, items: list) -> DictLit:
        """A dict from (key, value, spelling) items; a None key spreads another dict (`**other`)."""
        entries: dict[str, Value] = {}
        nodes: dict[str, cst.CSTNode] = {}
        complete = True
        for key_node, value_node, spelling in items:
            if key_node is None:
                inner = self.evaluate(value_node)
                if isinstance(inner, DictLit):
                    entries.update(inner.entries)
                    nodes.update(inner.entry_nodes)
                    complete = complete and inner.complete
                else:
                    complete = False
                continue
            key = key_node if isinstance(key_node, Const) else self.evaluate(key_node)
            if isinstance(key, Const) and isinstance(key.value, str):
                entries[key.value] = self.evaluate(value_node)
                nodes[key.value] = spelling
            else:
                complete = False
        return DictLit(entries, complete, node, nodes)

    def arguments(self, args: Sequence[cst.Arg], bound: Optional[Partial] = None) -> CallArguments:
        positional = list(bound.args) if bound else []
        keywords: dict[str, tuple[Value, cst.CSTNode, FlagStatus]] = {}
        if bound:
            for name, value in bound.keywords.items():
                keywords[name] = (value, bound.keyword_nodes.get(name, bound.node), FlagStatus.BOUND)
        has_star_args = unresolved = False
        spread_value: Optional[Value] = None
        for arg in args:
            if arg.star == "*":
                has_star_args = True
                positional.append(arg)
            elif arg.star == "**":
                spread = self.evaluate(arg.value)
                if isinstance(spread, DictLit):
                    for name, value in spread.entries.items():
                        keywords[name] = (value, spread.entry_nodes.get(name, arg), FlagStatus.IN_KWARGS)
                    unresolved = unresolved or not spread.complete
                else:
                    unresolved = True
                    spread_value = spread_value or spread
            elif arg.keyword is not None:
                keywords[arg.keyword.value] = (self.evaluate(arg.value), arg, FlagStatus.EXPLICIT)
            else:
                positional.append(arg)
        return CallArguments(tuple(positional), keywords, has_star_args, unresolved, spread_value)


def _described(value: Value) -> tuple:
    """A construction argument as ckptlint/model/construction.py describes it: a literal, a project
    object built right there with its own arguments (`GPT(GPTConfig(gradient_checkpointing=True))`),
    anything else unknown."""
    if isinstance(value, Const):
        return ("const", value.value)
    if isinstance(value, ModuleObject) and len(value.classes) == 1 and value.container is None and value.arguments is not None:
        return ("object", value.classes[0], value.arguments)
    return ("?",)

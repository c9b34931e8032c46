"""One LibCST pass over a file that records every checkpoint site with its callee, inputs and mode.

Names are resolved through the project index (imports, re-exports, `__init__` attributes of
module classes in any linted file), values through a small flow-ordered binding table: the last
assignment before a use wins, and an assignment under a branch or loop merges with the earlier
value (equal or unknown). When something cannot be resolved the model says so (Unknown), and
rules prefer no finding over a guess.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import Optional, Sequence, Union

import libcst as cst

from ckptlint.config import Settings
from ckptlint.index import ModuleSummary, ProjectIndex
from ckptlint.model.apis import (
    CHECKPOINT_IMPL_REENTRANT,
    CONTROL_KEYWORDS,
    ENABLE_GRAD,
    HF_CHECKPOINT_FUNC_ATTR,
    HF_ENABLE_METHODS,
    HF_GC_LAYER,
    HF_TRAINING_ARGUMENTS,
    HF_TRAINING_FLAGS,
    INFERENCE_CONTEXTS,
    KNOWN_APIS,
    LIGHTNING_MODULES,
    LIGHTNING_NO_GRAD_STEPS,
    NO_GRAD_CONTEXTS,
    SET_GRAD_ENABLED,
    CheckpointApi,
)
from ckptlint.model.sites import (
    UNKNOWN,
    ApiKind,
    CheckpointSite,
    Const,
    DictLit,
    FlagStatus,
    GradContext,
    Lambda,
    Mode,
    ModuleObject,
    Param,
    Partial,
    Ref,
    Value,
    merge,
)
from ckptlint.names import absolute_module, import_bindings
from ckptlint.versions import LibraryVersions, torch_default_reentrant, transformers_default_reentrant

BUILTINS = frozenset({"dict", "list", "tuple", "print", "len", "range", "enumerate", "zip", "super", "isinstance"})
# Marks on a scope's grad stack besides GradContext (grad disabled).
GRAD_ENABLED = "enabled"
GRAD_UNCHANGED = "unchanged"
GradMark = Union[GradContext, str]


@dataclass
class FileModel:
    path: str
    module: str
    tree: cst.Module
    sites: list[CheckpointSite]
    versions: LibraryVersions
    index: ProjectIndex
    settings: Settings


@dataclass
class _Scope:
    kind: str  # module | class | function | lambda
    qualname: str
    class_qualname: Optional[str] = None  # the class a method belongs to
    bindings: dict[str, Value] = field(default_factory=dict)
    grad: list[GradMark] = field(default_factory=list)
    branch_depth: int = 0

    def grad_disabled(self) -> Optional[GradContext]:
        for mark in reversed(self.grad):
            if isinstance(mark, GradContext):
                return mark
            if mark == GRAD_ENABLED:
                return None
        return None


@dataclass(frozen=True)
class _Arguments:
    """A call's arguments after merging functools.partial bindings and resolved `**dicts`."""

    positional: tuple[cst.Arg, ...]
    keywords: dict[str, tuple[Value, cst.CSTNode, FlagStatus]]
    has_star_args: bool
    unresolved_kwargs: bool


def _code(node: cst.CSTNode) -> str:
    return cst.Module(body=[]).code_for_node(node)


class ModelBuilder(cst.CSTVisitor):
    def __init__(self, summary: ModuleSummary, index: ProjectIndex, versions: LibraryVersions, settings: Settings) -> None:
        self.summary = summary
        self.index = index
        self.versions = versions
        self.settings = settings
        self.wrappers = dict(settings.checkpoint_functions)
        self.scopes = [_Scope("module", summary.name)]
        self.sites: list[CheckpointSite] = []

    # --- scopes ------------------------------------------------------------------------------

    @property
    def scope(self) -> _Scope:
        return self.scopes[-1]

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        qualname = f"{self.scope.qualname}.{node.name.value}"
        self.scopes.append(_Scope("class", qualname))

    def leave_ClassDef(self, node: cst.ClassDef) -> None:
        self.scopes.pop()

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        outer = self.scope
        qualname = f"{outer.qualname}.{node.name.value}"
        scope = _Scope("function", qualname, class_qualname=outer.qualname if outer.kind == "class" else None)
        for param in (*node.params.posonly_params, *node.params.params, *node.params.kwonly_params):
            scope.bindings[param.name.value] = Param(param.name.value, qualname)
        for decorator in node.decorators:
            scope.grad.append(self.grad_mark(decorator.decorator, decorator, as_decorator=True))
        if (
            scope.class_qualname
            and node.name.value in LIGHTNING_NO_GRAD_STEPS
            and self.index.is_subclass(scope.class_qualname, LIGHTNING_MODULES)
        ):
            scope.grad.append(GradContext(f"Lightning `{node.name.value}` (runs under torch.no_grad())", node.name))
        self.scopes.append(scope)

    def leave_FunctionDef(self, node: cst.FunctionDef) -> None:
        self.scopes.pop()

    def visit_Lambda(self, node: cst.Lambda) -> None:
        scope = _Scope("lambda", f"{self.scope.qualname}.<lambda>", class_qualname=self.scope.class_qualname)
        for param in node.params.params:
            scope.bindings[param.name.value] = Param(param.name.value, scope.qualname)
        self.scopes.append(scope)

    def leave_Lambda(self, node: cst.Lambda) -> None:
        self.scopes.pop()

    # --- control flow: branches merge bindings; `with` may switch autograd off -----------------

    def _enter_branch(self, node: cst.CSTNode) -> None:
        self.scope.branch_depth += 1

    def _leave_branch(self, node: cst.CSTNode) -> None:
        self.scope.branch_depth -= 1

    visit_If = visit_Try = visit_While = visit_Match = _enter_branch  # type: ignore[assignment]
    leave_If = leave_Try = leave_While = leave_Match = _leave_branch  # type: ignore[assignment]

    def visit_For(self, node: cst.For) -> None:
        self.scope.branch_depth += 1
        self.bind_loop_target(node.target, node.iter)

    def leave_For(self, node: cst.For) -> None:
        self.scope.branch_depth -= 1

    def visit_With(self, node: cst.With) -> None:
        for item in node.items:
            self.scope.grad.append(self.grad_mark(item.item, item))
            if item.asname is not None:
                self.bind_target(item.asname.name, UNKNOWN)

    def leave_With(self, node: cst.With) -> None:
        del self.scope.grad[-len(node.items) :]

    def grad_mark(self, expr: cst.BaseExpression, node: cst.CSTNode, as_decorator: bool = False) -> GradMark:
        call = expr if isinstance(expr, cst.Call) else None
        target = self.evaluate(call.func if call else expr)
        if not isinstance(target, Ref) or (call is None and not as_decorator):
            return GRAD_UNCHANGED
        name = target.qualname
        prefix = "@" if as_decorator else ""
        if name in NO_GRAD_CONTEXTS:
            return GradContext(f"{prefix}{name}()", node)
        if name in INFERENCE_CONTEXTS:
            mode = self.evaluate(call.args[0].value) if call and call.args else Const(True)
            if mode == Const(True):
                return GradContext(f"{prefix}{name}()", node)
            return GRAD_ENABLED if mode == Const(False) else GRAD_UNCHANGED
        if name in SET_GRAD_ENABLED and call and call.args:
            mode = self.evaluate(call.args[0].value)
            if mode == Const(False):
                return GradContext(f"{prefix}{name}(False)", node)
            return GRAD_ENABLED if mode == Const(True) else GRAD_UNCHANGED
        if name in ENABLE_GRAD:
            return GRAD_ENABLED
        return GRAD_UNCHANGED

    # --- bindings ----------------------------------------------------------------------------

    def bind_target(self, target: cst.BaseExpression, value: Value) -> None:
        if isinstance(target, cst.Name):
            scope = self.scope
            if scope.branch_depth:
                value = merge(scope.bindings.get(target.value), value)
            scope.bindings[target.value] = value
        elif isinstance(target, (cst.Tuple, cst.List)):
            for element in target.elements:
                self.bind_target(element.value, UNKNOWN)

    def bind_loop_target(self, target: cst.BaseExpression, iterable: cst.BaseExpression) -> None:
        element: Value = UNKNOWN
        if isinstance(iterable, cst.Call) and self.evaluate(iterable.func) == Ref("builtins.enumerate") and iterable.args:
            inner = self.element_of(self.evaluate(iterable.args[0].value))
            if isinstance(target, cst.Tuple) and len(target.elements) == 2:
                self.bind_target(target.elements[0].value, UNKNOWN)
                self.bind_target(target.elements[1].value, inner)
                return
        else:
            element = self.element_of(self.evaluate(iterable))
        self.bind_target(target, element)

    @staticmethod
    def element_of(value: Value) -> Value:
        if isinstance(value, ModuleObject) and value.container:
            return ModuleObject(value.classes, f"an element of {value.origin}")
        return UNKNOWN

    def visit_Import(self, node: cst.Import) -> None:
        for alias in node.names:
            name = _dotted(alias.name)
            if name is None:
                continue
            if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
                self.scope.bindings[alias.asname.name.value] = Ref(name)
            else:
                for local, target in import_bindings(name):
                    self.scope.bindings[local] = Ref(target)

    def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
        module = _dotted(node.module) if node.module else None
        base = absolute_module(self.summary.name, self.summary.is_package, len(node.relative), module)
        if base is None or isinstance(node.names, cst.ImportStar):
            return
        for alias in node.names:
            name = _dotted(alias.name)
            local = alias.asname.name.value if alias.asname and isinstance(alias.asname.name, cst.Name) else name
            if name and local:
                self.scope.bindings[local] = self.ref(f"{base}.{name}")

    def leave_Assign(self, node: cst.Assign) -> None:
        value = self.evaluate(node.value)
        for target in node.targets:
            self.bind_target(target.target, value)

    def leave_AnnAssign(self, node: cst.AnnAssign) -> None:
        if node.value is not None:
            self.bind_target(node.target, self.evaluate(node.value))

    def leave_AugAssign(self, node: cst.AugAssign) -> None:
        self.bind_target(node.target, UNKNOWN)

    # --- evaluation ---------------------------------------------------------------------------

    def ref(self, qualname: str) -> Value:
        canonical = self.index.canonical(qualname)
        alias = self.index.alias(canonical)
        if alias is not None and alias.is_partial:
            keywords = {k: Const(v) for k, v in alias.keywords.items()}
            return Partial(self.ref(alias.target), (), keywords, {}, cst.Name(canonical.rsplit(".", 1)[-1]))
        return Ref(canonical)

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

    def self_attribute(self, attr: str) -> Value:
        owner = self.scope.class_qualname
        if owner is None or "self" not in self.scope.bindings:
            return UNKNOWN
        binding = self.index.attribute(owner, attr)
        if binding is None:
            return UNKNOWN
        if binding.has_constant:
            return Const(binding.constant)
        if binding.constructors or binding.container:
            classes = tuple(self.index.canonical(c) for c in binding.constructors)
            return ModuleObject(classes, f"self.{attr}", binding.container)
        return UNKNOWN

    def evaluate(self, node: cst.BaseExpression) -> Value:
        if isinstance(node, cst.Name):
            if node.value in ("True", "False", "None"):
                return Const({"True": True, "False": False, "None": None}[node.value])
            return self.lookup(node.value)
        if isinstance(node, (cst.Integer, cst.Float)):
            return Const(ast.literal_eval(node.value))
        if isinstance(node, cst.SimpleString):
            return Const(node.evaluated_value)
        if isinstance(node, cst.Attribute):
            if isinstance(node.value, cst.Name) and node.value.value == "self":
                return self.self_attribute(node.attr.value)
            base = self.evaluate(node.value)
            return self.ref(f"{base.qualname}.{node.attr.value}") if isinstance(base, Ref) else UNKNOWN
        if isinstance(node, cst.Subscript):
            return self.element_of(self.evaluate(node.value))
        if isinstance(node, cst.Dict):
            return self.dict_literal(node)
        if isinstance(node, cst.Call):
            return self.evaluate_call(node)
        if isinstance(node, cst.Lambda):
            return Lambda(node)
        if isinstance(node, cst.IfExp):
            return merge(self.evaluate(node.body), self.evaluate(node.orelse))
        return UNKNOWN

    def evaluate_call(self, node: cst.Call) -> Value:
        func = self.evaluate(node.func)
        if not isinstance(func, Ref):
            return UNKNOWN
        if func.qualname == "functools.partial" and node.args and not node.args[0].keyword and not node.args[0].star:
            arguments = self.arguments(node.args[1:])
            keywords = {k: v for k, (v, _, _) in arguments.keywords.items()}
            nodes = {k: n for k, (_, n, _) in arguments.keywords.items()}
            return Partial(self.evaluate(node.args[0].value), arguments.positional, keywords, nodes, node)
        if func.qualname == "builtins.dict" and all(arg.keyword or arg.star == "**" for arg in node.args):
            return self.dict_from_arguments(node, node.args)
        if self.index.class_(func.qualname) is not None:
            return ModuleObject((func.qualname,), _code(node.func))
        return UNKNOWN

    def dict_literal(self, node: cst.Dict) -> DictLit:
        entries: dict[str, Value] = {}
        complete = True
        for element in node.elements:
            if isinstance(element, cst.StarredDictElement):
                inner = self.evaluate(element.value)
                if isinstance(inner, DictLit):
                    entries.update(inner.entries)
                    complete = complete and inner.complete
                else:
                    complete = False
                continue
            key = self.evaluate(element.key)
            if isinstance(key, Const) and isinstance(key.value, str):
                entries[key.value] = self.evaluate(element.value)
            else:
                complete = False
        return DictLit(entries, complete, node)

    def dict_from_arguments(self, node: cst.CSTNode, args: Sequence[cst.Arg]) -> DictLit:
        entries: dict[str, Value] = {}
        complete = True
        for arg in args:
            if arg.keyword is not None:
                entries[arg.keyword.value] = self.evaluate(arg.value)
                continue
            inner = self.evaluate(arg.value)
            if isinstance(inner, DictLit):
                entries.update(inner.entries)
                complete = complete and inner.complete
            else:
                complete = False
        return DictLit(entries, complete, node)

    def arguments(self, args: Sequence[cst.Arg], bound: Optional[Partial] = None) -> _Arguments:
        positional = list(bound.args) if bound else []
        keywords: dict[str, tuple[Value, cst.CSTNode, FlagStatus]] = {}
        if bound:
            for name, value in bound.keywords.items():
                keywords[name] = (value, bound.keyword_nodes.get(name, bound.node), FlagStatus.BOUND)
        has_star_args = unresolved = False
        for arg in args:
            if arg.star == "*":
                has_star_args = True
                positional.append(arg)
            elif arg.star == "**":
                spread = self.evaluate(arg.value)
                if isinstance(spread, DictLit):
                    for name, value in spread.entries.items():
                        keywords[name] = (value, arg, FlagStatus.IN_KWARGS)
                    unresolved = unresolved or not spread.complete
                else:
                    unresolved = True
            elif arg.keyword is not None:
                keywords[arg.keyword.value] = (self.evaluate(arg.value), arg, FlagStatus.EXPLICIT)
            else:
                positional.append(arg)
        return _Arguments(tuple(positional), keywords, has_star_args, unresolved)

    # --- checkpoint sites ------------------------------------------------------------------------

    def leave_Call(self, node: cst.Call) -> None:
        callee = self.evaluate(node.func)
        api, bound = self.match_api(callee)
        if api is not None:
            self.record(self.checkpoint_site(node, api, bound))
            return
        if isinstance(node.func, cst.Attribute):
            method = node.func.attr.value
            if method == HF_CHECKPOINT_FUNC_ATTR:
                self.record(self.hf_function_site(node))
                return
            if method in HF_ENABLE_METHODS:
                self.record(self.hf_enable_site(node, method))
                return
        if isinstance(callee, Ref) and callee.qualname in HF_TRAINING_ARGUMENTS:
            site = self.training_arguments_site(node)
            if site is not None:
                self.record(site)
        elif isinstance(callee, ModuleObject) and any(self.index.is_subclass(c, HF_GC_LAYER) for c in callee.classes):
            self.record(self.hf_layer_site(node, callee))

    def record(self, site: CheckpointSite) -> None:
        scope = self.scope
        function_scope = next((s for s in reversed(self.scopes) if s.kind in ("function", "lambda")), None)
        site.enclosing_function = function_scope.qualname if function_scope else None
        site.enclosing_class = function_scope.class_qualname if function_scope else None
        site.grad_disabled = scope.grad_disabled()
        self.sites.append(site)

    def match_api(self, callee: Value) -> tuple[Optional[CheckpointApi], Optional[Partial]]:
        if isinstance(callee, Ref):
            if callee.qualname in KNOWN_APIS:
                return KNOWN_APIS[callee.qualname], None
            spec = self.wrappers.get(callee.qualname)
            if spec is not None:
                return (
                    CheckpointApi(callee.qualname, ApiKind.PROJECT_WRAPPER, default_reentrant=spec.reentrant, default_source="checkpoint-functions setting"),
                    None,
                )
        if isinstance(callee, Partial):
            api, inner = self.match_api(callee.func)
            if api is not None:
                if inner is not None:
                    callee = Partial(inner.func, inner.args + callee.args, {**inner.keywords, **callee.keywords}, {**inner.keyword_nodes, **callee.keyword_nodes}, callee.node)
                return api, callee
        return None, None

    def checkpoint_site(self, node: cst.Call, api: CheckpointApi, bound: Optional[Partial]) -> CheckpointSite:
        arguments = self.arguments(node.args, bound)
        positional = arguments.positional
        function: Optional[Value] = None
        inputs: tuple[cst.Arg, ...] = ()
        if api.kind in (ApiKind.MODULE_WRAPPER, ApiKind.APPLY_WRAPPER):
            function = self.evaluate(positional[0].value) if positional else None
        else:
            function_arg = positional[api.function_index] if len(positional) > api.function_index else None
            if function_arg is not None and not function_arg.star:
                function = self.evaluate(function_arg.value)
                inputs = positional[api.inputs_from :]
            elif "function" in arguments.keywords or "functions" in arguments.keywords:
                function = (arguments.keywords.get("function") or arguments.keywords["functions"])[0]
                inputs = positional
            else:
                function = UNKNOWN
                inputs = positional
        reaching = tuple(
            n for name, (_, n, status) in arguments.keywords.items()
            if name not in CONTROL_KEYWORDS and name not in ("function", "functions", "segments", "input", "checkpoint_impl", "checkpoint_wrapper_fn", "check_fn", "auto_wrap_policy")
            and status is FlagStatus.EXPLICIT and isinstance(n, cst.Arg)
        )
        preserve, preserve_node = self.preserve_rng_state(arguments)
        return CheckpointSite(
            kind=api.kind,
            api_name=api.qualname,
            call=node,
            mode=self.mode(api, arguments),
            function=function,
            inputs=inputs,
            keywords=reaching,
            preserve_rng_state=preserve,
            preserve_rng_node=preserve_node,
        )

    def preserve_rng_state(self, arguments: _Arguments) -> tuple[Optional[bool], Optional[cst.CSTNode]]:
        if "preserve_rng_state" not in arguments.keywords:
            return (None if arguments.unresolved_kwargs else True), None
        value, node, _ = arguments.keywords["preserve_rng_state"]
        return (value.value if isinstance(value, Const) and isinstance(value.value, bool) else None), node

    def mode(self, api: CheckpointApi, arguments: _Arguments) -> Mode:
        if api.kind is ApiKind.MODULE_WRAPPER and api.default_reentrant is False and "checkpoint_impl" in arguments.keywords:
            value, node, status = arguments.keywords["checkpoint_impl"]
            impl = CHECKPOINT_IMPL_REENTRANT.get(value.qualname) if isinstance(value, Ref) else None
            return Mode(impl, status, f"checkpoint_impl={_code(node.value) if isinstance(node, cst.Arg) else 'bound'}", node)
        if api.kind is ApiKind.APPLY_WRAPPER and "checkpoint_wrapper_fn" in arguments.keywords:
            value, node, status = arguments.keywords["checkpoint_wrapper_fn"]
            inner_api, bound = self.match_api(value)
            if inner_api is None:
                return Mode(None, status, "checkpoint_wrapper_fn is not a known wrapper", node)
            return self.mode(inner_api, self.arguments((), bound))
        if "use_reentrant" in arguments.keywords:
            value, node, status = arguments.keywords["use_reentrant"]
            known = value.value if isinstance(value, Const) and isinstance(value.value, bool) else None
            spelled = f"use_reentrant={known}" if known is not None else "use_reentrant set to a value the analysis cannot resolve"
            return Mode(known, status, f"{spelled} ({status.value})", node)
        if arguments.unresolved_kwargs and api.takes_flag:
            return Mode(None, FlagStatus.MAYBE, "use_reentrant may arrive through **kwargs the analysis cannot resolve")
        if not api.takes_flag:
            return Mode(api.default_reentrant, FlagStatus.FIXED, api.default_source)
        torch = self.versions.torch
        reentrant = torch_default_reentrant(torch)
        return Mode(
            reentrant,
            FlagStatus.ABSENT,
            f"torch {torch.text} then {'falls back to reentrant mode and only warns' if reentrant else 'uses non-reentrant mode'} (torch version from {torch.source})",
            assumed=torch,
        )

    def hf_configured_mode(self) -> Mode:
        """Sites inside transformers layers follow whatever `gradient_checkpointing_enable` set."""
        version = self.versions.transformers
        reentrant = transformers_default_reentrant(version)
        return Mode(
            reentrant,
            FlagStatus.FIXED,
            f"set by gradient_checkpointing_enable(); with kwargs None transformers {version.text} uses use_reentrant={reentrant} (assumed from {version.source})",
            assumed=version,
        )

    def hf_function_site(self, node: cst.Call) -> CheckpointSite:
        arguments = self.arguments(node.args)
        positional = arguments.positional
        function = self.evaluate(positional[0].value) if positional and not positional[0].star else UNKNOWN
        return CheckpointSite(ApiKind.HF_FUNC, "self._gradient_checkpointing_func", node, self.hf_configured_mode(), function, positional[1:])

    def hf_layer_site(self, node: cst.Call, layer: ModuleObject) -> CheckpointSite:
        arguments = self.arguments(node.args)
        keywords = tuple(n for (_, n, status) in arguments.keywords.values() if status is FlagStatus.EXPLICIT and isinstance(n, cst.Arg))
        return CheckpointSite(ApiKind.HF_LAYER_CALL, "GradientCheckpointingLayer.__call__", node, self.hf_configured_mode(), layer, arguments.positional, keywords)

    def hf_enable_site(self, node: cst.Call, method: str) -> CheckpointSite:
        keyword = HF_ENABLE_METHODS[method]
        arguments = self.arguments(node.args)
        if keyword in arguments.keywords:
            value, kwargs_node, _ = arguments.keywords[keyword]
        elif arguments.positional and not arguments.positional[0].star:
            kwargs_node = arguments.positional[0]
            value = self.evaluate(kwargs_node.value)
        elif arguments.unresolved_kwargs:
            value, kwargs_node = UNKNOWN, None
        else:
            value, kwargs_node = Const(None), None
        mode = self.hf_kwargs_mode(value, kwargs_node, keyword, empty_means_none=False)
        return CheckpointSite(ApiKind.HF_ENABLE, method, node, mode, None, kwargs_value=value, kwargs_node=kwargs_node)

    def training_arguments_site(self, node: cst.Call) -> Optional[CheckpointSite]:
        arguments = self.arguments(node.args)
        for flag, kwargs_keyword in HF_TRAINING_FLAGS.items():
            if flag not in arguments.keywords:
                continue
            enabled, flag_node, _ = arguments.keywords[flag]
            if enabled == Const(False) or enabled == Const(None):
                continue
            value, kwargs_node = (arguments.keywords[kwargs_keyword][:2] if kwargs_keyword in arguments.keywords else (Const(None), None))
            # transformers >= 5.0's Trainer turns an empty dict into None (`gc_kwargs or None`).
            empty_means_none = not transformers_default_reentrant(self.versions.transformers)
            mode = self.hf_kwargs_mode(value, kwargs_node, kwargs_keyword, empty_means_none)
            site = CheckpointSite(ApiKind.HF_TRAINING_ARGS, "TrainingArguments", node, mode, None, kwargs_value=value, kwargs_node=kwargs_node)
            if enabled != Const(True):
                site.notes.append(f"`{flag}` is not a literal; assuming it may be True")
            return site
        return None

    def hf_kwargs_mode(self, value: Value, node: Optional[cst.CSTNode], keyword: str, empty_means_none: bool) -> Mode:
        version = self.versions.transformers
        if isinstance(value, DictLit) and not value.entries and value.complete and empty_means_none:
            value = Const(None)
        if value == Const(None):
            reentrant = transformers_default_reentrant(version)
            return Mode(
                reentrant,
                FlagStatus.FIXED,
                f"{keyword}=None: transformers {version.text} uses use_reentrant={reentrant} (assumed from {version.source})",
                node,
                version,
            )
        if isinstance(value, DictLit):
            if "use_reentrant" in value.entries:
                flag = value.entries["use_reentrant"]
                known = flag.value if isinstance(flag, Const) and isinstance(flag.value, bool) else None
                return Mode(known, FlagStatus.IN_KWARGS, f'{keyword}["use_reentrant"]={known}', node)
            if value.complete:
                torch = self.versions.torch
                return Mode(
                    torch_default_reentrant(torch),
                    FlagStatus.ABSENT,
                    f"`{keyword}` is a dict without `use_reentrant`: transformers passes it to torch unchanged (only None gets a default), so torch {torch.text} falls back to reentrant mode",
                    node,
                    torch,
                )
            return Mode(None, FlagStatus.MAYBE, f"{keyword} may carry use_reentrant through entries the analysis cannot resolve", node)
        return Mode(None, FlagStatus.MAYBE, f"{keyword} is not resolved", node)


def _dotted(node: Union[cst.Attribute, cst.Name, cst.BaseExpression]) -> Optional[str]:
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        base = _dotted(node.value)
        return f"{base}.{node.attr.value}" if base else None
    return None


def build_file_model(
    tree: cst.Module, path: str, summary: ModuleSummary, index: ProjectIndex, versions: LibraryVersions, settings: Settings
) -> FileModel:
    builder = ModelBuilder(summary, index, versions, settings)
    _bind_module_constants(builder, tree)
    tree.visit(builder)
    return FileModel(path, summary.name, tree, builder.sites, versions, index, settings)


def _bind_module_constants(builder: ModelBuilder, tree: cst.Module) -> None:
    """Module-level `NAME = <dict/const>` are visible to functions defined before them."""
    for statement in tree.body:
        if not isinstance(statement, cst.SimpleStatementLine):
            continue
        for small in statement.body:
            if isinstance(small, cst.Assign) and isinstance(small.value, (cst.Dict, cst.Name, cst.SimpleString, cst.Integer)):
                value = builder.evaluate(small.value)
                for target in small.targets:
                    if isinstance(target.target, cst.Name):
                        builder.scopes[0].bindings[target.target.value] = value

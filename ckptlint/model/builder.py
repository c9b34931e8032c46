"""One LibCST pass over a file that records every checkpoint site with its callee, inputs and mode.

Names are resolved through the project index (imports, re-exports, `__init__` attributes of
module classes in any linted file), values through a small flow-ordered binding table: the last
assignment before a use wins, and an assignment under a branch or loop merges with the earlier
value (equal or unknown). When something cannot be resolved the model says so (Unknown), and
rules prefer no finding over a guess.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Callable, Optional, Sequence, Union

import libcst as cst
from libcst.helpers import get_full_name_for_node

from ckptlint.config import Settings
from ckptlint.index import ModuleSummary, ProjectIndex
from ckptlint.model.apis import (
    CHECKPOINT_IMPL_REENTRANT,
    CHECKPOINT_WRAPPER,
    CONTROL_KEYWORDS,
    ENABLE_GRAD,
    HF_CHECKPOINT_FUNC_ATTR,
    HF_ENABLE_METHODS,
    HF_GC_LAYER,
    HF_TRAINING_ARGUMENTS,
    HF_TRAINERS,
    HF_TRAINING_FLAGS,
    INFERENCE_CONTEXTS,
    KNOWN_APIS,
    LIGHTNING_MODULES,
    LIGHTNING_NO_GRAD_STEPS,
    LIGHTNING_TRAINING_STEP,
    NO_GRAD_CONTEXTS,
    SET_GRAD_ENABLED,
    WRAP_POLICY_CLASSES,
    CheckpointApi,
)
from ckptlint.model.dataflow import Dataflow, entry_value, loader_batch, tensor_attribute
from ckptlint.model.modes import hf_kwargs_mode
from ckptlint.model.sites import (
    ApiKind,
    CacheUse,
    CallRecord,
    WrapperCall,
    CheckpointSite,
    ContainerMutation,
    Effect,
    FlagStatus,
    FunctionFacts,
    GradContext,
    GradFreeCall,
    ModelState,
    Mode,
    SelfStore,
)
from ckptlint.model.values import (
    SYMBOLIC,
    UNKNOWN,
    AttributeOf,
    CallOf,
    Derived,
    ElementOf,
    Unknown,
    Const,
    DataSource,
    DictLit,
    Grad,
    Instance,
    Items,
    Lambda,
    LocalFunction,
    ModuleObject,
    Param,
    Partial,
    Pieces,
    Ref,
    Spelling,
    Tensor,
    Value,
    code,
    defaulted,
    element_of,
    grad_on_some_path,
    join_grad,
    merge,
)
from ckptlint.model.torch_knowledge import (
    DATA_LOADERS,
    DROPOUT_FUNCTION_ARGS,
    GRAD_NEUTRAL_METHODS,
    GRAD_NEUTRAL_PREFIXES,
    MODULE_BASES,
    MODULE_SELF_METHODS,
    SPLITTING_FUNCTIONS,
    SPLITTING_METHODS,
    TENSOR_FACTORIES,
    TORCH_RNG_FUNCTIONS,
    TORCH_RNG_METHODS,
    UNREPLAYED_RNG_MODULES,
)
from ckptlint.model.model_states import DEEP_COPIES, forget_modes, set_state, state_of
from ckptlint.model.walk import ReadOnlyWalker
from ckptlint.names import absolute_module, import_bindings
from ckptlint.versions import LibraryVersions, torch_default_reentrant, transformers_default_reentrant

if TYPE_CHECKING:
    from ckptlint.model.grad_free import GradFreeCheckpoint
    from ckptlint.model.regions import Region

BUILTINS = frozenset({"dict", "list", "tuple", "print", "len", "range", "enumerate", "zip", "super", "isinstance"})
# Parameters named like this are iterated as data loaders (`for x, y in loader:`).
LOADER_NAME = re.compile(r"(^|_)(data)?loader$|dataloader", re.IGNORECASE)
LIST_AND_DICT_UPDATES = frozenset({"append", "extend", "insert", "update", "setdefault"})
INPLACE_UPDATES = frozenset({"add_", "copy_", "mul_", "fill_", "zero_", "index_add_", "scatter_add_", "lerp_"})
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
    # Per function (by qualified name) and per lambda (by node): what its body does.
    functions: dict[str, FunctionFacts]
    lambdas: dict[int, FunctionFacts]
    # Attributes assigned outside `__init__` (stashed at run time): class -> attr -> the store.
    runtime_attrs: dict[str, dict[str, tuple[cst.CSTNode, Value]]]
    # Module classes whose `forward` inputs are data (never built as a submodule in the project).
    top_level_classes: frozenset[str] = frozenset()
    cache_uses: list[CacheUse] = field(default_factory=list)
    # Calls of project functions and modules made here, by the qualified name of the function run.
    calls: dict[str, list[CallRecord]] = field(default_factory=dict)
    # Calls of checkpoint wrappers made here; each becomes a site once the model is complete.
    wrapper_calls: list[WrapperCall] = field(default_factory=list)
    # Models called where autograd records nothing, as each enclosing function sees them.
    grad_free_calls: list[GradFreeCall] = field(default_factory=list)
    # Those of them that run a checkpoint (set by the engine once callers are known).
    grad_free_checkpoints: list["GradFreeCheckpoint"] = field(default_factory=list)
    # Other files' models by module name, for callees defined elsewhere (set by the engine).
    models: Callable[[str, str], Optional["FileModel"]] = lambda module, qualname: None
    _regions: dict[int, "Region"] = field(default_factory=dict)

    def model_for(self, module: str, qualname: str) -> Optional["FileModel"]:
        """The model that holds the function `qualname` of `module` (a cut model may lack it)."""
        if module == self.module and qualname in self.functions:
            return self
        return self.models(module, qualname) or (self if module == self.module else None)

    def region(self, site: CheckpointSite) -> "Region":
        """Everything the checkpointed callable runs, across files (memoized per site)."""
        from ckptlint.model.regions import region_of

        if id(site) not in self._regions:
            self._regions[id(site)] = region_of(self, site.function, len(site.input_values))
        return self._regions[id(site)]


@dataclass
class _Scope:
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
    # Inside `if torch.is_grad_enabled():`: what runs here never runs without grad.
    grad_guards: int = 0
    # The module flags (`self.<attr>`) the enclosing `if`s require; None when some condition is
    # not a conjunction of such flags, the mode and grad checks.
    gates: list[Optional[tuple[str, ...]]] = field(default_factory=list)
    # Training scripts: models with checkpointing on, the mode `.train()` / `.eval()` last set
    # (True: training), cache spellings seen.
    checkpointed_models: dict[str, cst.CSTNode] = field(default_factory=dict)
    model_modes: dict[str, bool] = field(default_factory=dict)
    trained_models: set[str] = field(default_factory=set)  # a Trainer's `train()` has returned
    cache_spellings: list[tuple[str, cst.CSTNode, str]] = field(default_factory=list)
    # Per enclosing `for` loop, innermost last: the names its body has assigned so far.
    loop_assigned: list[set[str]] = field(default_factory=list)

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
    spread: Optional[Value] = None  # the `**kwargs` it could not resolve


class ModelBuilder(ReadOnlyWalker):
    def __init__(self, summary: ModuleSummary, index: ProjectIndex, versions: LibraryVersions, settings: Settings) -> None:
        super().__init__()
        self.summary = summary
        self.index = index
        self.flow = Dataflow(index)
        self.versions = versions
        self.settings = settings
        self.wrappers = dict(settings.checkpoint_functions)
        self.scopes = [_Scope("module", summary.name)]
        self.sites: list[CheckpointSite] = []
        self.functions: dict[str, FunctionFacts] = {}
        self.lambdas: dict[int, FunctionFacts] = {}
        self.runtime_attrs: dict[str, dict[str, tuple[cst.CSTNode, Value]]] = {}
        self.call_values: dict[int, Value] = {}
        self.cache_uses: list[CacheUse] = []
        self.grad_free_calls: list[GradFreeCall] = []
        # `Trainer(...)` calls with checkpointing TrainingArguments (by node id) -> the model they train.
        self.trainer_models: dict[int, str] = {}
        self.calls: dict[str, list[CallRecord]] = {}
        self.wrapper_calls: list[WrapperCall] = []
        # Bindings that comprehensions shadow, restored when each one ends.
        self.comprehensions: list[dict[str, Optional[Value]]] = []
        self.top_level = frozenset(c.qualname for c in summary.classes.values() if index.is_top_level_model(c.qualname))

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
        class_qualname = outer.qualname if outer.kind == "class" else None
        if outer.kind in ("function", "lambda"):
            outer.bindings[node.name.value] = LocalFunction(qualname, node)
        declared = (*node.params.posonly_params, *node.params.params, *node.params.kwonly_params)
        params = [p.name.value for p in declared]
        facts = self.functions.get(qualname)
        if facts is None:
            star = node.params.star_arg.name.value if isinstance(node.params.star_arg, cst.Param) else None
            star_star = node.params.star_kwarg.name.value if node.params.star_kwarg is not None else None
            defaults = {p.name.value: self.evaluate(p.default) for p in declared if p.default is not None}
            keyword_only = tuple(p.name.value for p in node.params.kwonly_params)
            facts = self.functions[qualname] = FunctionFacts(qualname, tuple(params), keyword_only, star, star_star, defaults)
        params.extend(name for name in (facts.star, facts.star_star) if name)
        scope = _Scope("function", qualname, class_qualname, facts=facts, params=frozenset(params), method=node.name.value)
        data_input = node.name.value == "forward" and class_qualname in self.top_level
        for name in params:
            scope.bindings[name] = (data_input and entry_value(qualname, name)) or Param(name, qualname)
        if node.name.value == LIGHTNING_TRAINING_STEP and len(params) > 1 and self.is_lightning(class_qualname):
            scope.bindings[params[1]] = loader_batch(qualname, params[1])
        for decorator in node.decorators:
            scope.grad.append(self.grad_mark(decorator.decorator, decorator, as_decorator=True))
        if node.name.value in LIGHTNING_NO_GRAD_STEPS and self.is_lightning(scope.class_qualname):
            scope.grad.append(GradContext(f"Lightning `{node.name.value}` (runs under {LIGHTNING_NO_GRAD_STEPS[node.name.value]})", node.name))
        self.scopes.append(scope)

    def is_lightning(self, class_qualname: Optional[str]) -> bool:
        return class_qualname is not None and self.index.is_subclass(class_qualname, LIGHTNING_MODULES)

    def leave_FunctionDef(self, node: cst.FunctionDef) -> None:
        scope = self.scopes.pop()
        self.finish_facts(scope)
        self.finish_cache_uses(scope)

    def leave_Module(self, node: cst.Module) -> None:
        self.finish_cache_uses(self.scopes[0])

    def finish_cache_uses(self, scope: _Scope) -> None:
        """Caching spelled for a model whose checkpointing this scope switches on (in any order)."""
        for model, node, kind in scope.cache_spellings:
            if model in scope.checkpointed_models:
                self.cache_uses.append(CacheUse(node, kind, model, scope.checkpointed_models[model]))

    def note_model_call(self, node: cst.Call) -> None:
        """`model(..., use_cache=True)`, `model.train()`, `model.generate(...)`, `Trainer(model=m, args=a)`
        in training code."""
        scope = self.scope
        func = node.func
        if isinstance(func, cst.Attribute) and func.attr.value == "train":
            # `trainer.train()` returns when training is over: caching turned back on after it is for generation.
            trainer = self.evaluate(func.value)
            if isinstance(trainer, Instance) and id(trainer.node) in self.trainer_models:
                scope.trained_models.add(self.trainer_models[id(trainer.node)])
        if isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name):
            name, method = func.value.value, func.attr.value
            if method in ("train", "eval"):
                set_state(self, name, state_of(self, node))
            elif method == "forward":
                self.note_cache_keywords(name, node)
                self.note_grad_free_call(name, node)
            elif method == "generate" and name in scope.checkpointed_models and scope.model_modes.get(name) is True:
                # transformers checkpoints in training whether or not grad is on, and drops the cache.
                self.cache_uses.append(CacheUse(node, "generate", name, scope.checkpointed_models[name]))
        elif isinstance(func, cst.Name):
            self.note_cache_keywords(func.value, node)
            self.note_grad_free_call(func.value, node)
            trainer = self.evaluate(func)
            if isinstance(trainer, Ref) and trainer.qualname in HF_TRAINERS:
                trained = self.note_trainer(node)
                if trained is not None:
                    self.trainer_models[id(node)] = trained

    def spell_cache(self, model: str, node: cst.CSTNode, kind: str) -> None:
        """Caching spelled for `model`, unless its training is over (after `trainer.train()` returned)."""
        if model not in self.scope.trained_models:
            self.scope.cache_spellings.append((model, node, kind))

    def note_grad_free_call(self, name: str, node: cst.Call) -> None:
        """A model called where autograd is off: whether its forward still checkpoints is decided
        once the model is complete (`grad_free.grad_free_checkpoints`)."""
        scope = self.scope
        context = scope.grad_disabled()
        if context is None or scope.grad_guards:
            return
        value = self.lookup(name)
        state = state_of(self, cst.Name(name))
        if not isinstance(value, (ModuleObject, Param)) and state.checkpointing is None:
            return
        function_scope = next((s for s in reversed(self.scopes) if s.kind in ("function", "lambda")), None)
        # A parameter, or a deep copy of one: its mode comes from the callers.
        param = value.name if isinstance(value, Param) and function_scope is not None and value.function == function_scope.qualname and state.training is None else None
        self.grad_free_calls.append(GradFreeCall(node, name, value, context, state, function_scope.qualname if function_scope else None, param))

    def note_cache_keywords(self, model: str, node: cst.Call) -> None:
        scope = self.scope
        training = scope.model_modes.get(model)
        # transformers drops the cache whenever the model is in train mode, grad or not; code under
        # no_grad with no `.train()` in sight is taken for evaluation.
        if training is False or (training is None and scope.grad_disabled() is not None):
            return
        for arg in node.args:
            name = arg.keyword.value if arg.keyword else None
            value = self.evaluate(arg.value) if name else None
            if name == "use_cache" and value == Const(True):
                self.spell_cache(model, arg, "use_cache")
            elif name in ("past_key_values", "past_key_value") and value != Const(None):
                self.spell_cache(model, arg, "past_key_values")

    def note_trainer(self, node: cst.Call) -> Optional[str]:
        """`Trainer(model, args, ...)` (or by keyword) with checkpointing TrainingArguments: the
        Trainer enables checkpointing on that model when it trains. Returns the model's name."""
        positional = [a.value for a in node.args if a.keyword is None and not a.star]
        arguments = {**dict(zip(("model", "args"), positional)), **{a.keyword.value: a.value for a in node.args if a.keyword}}
        model, args = arguments.get("model"), arguments.get("args")
        if not isinstance(model, cst.Name) or args is None:
            return None
        training = self.evaluate(args)
        if isinstance(training, Instance) and training.ctor in self.functions:
            training = self.functions[training.ctor].returns  # `Trainer(model, make_arguments())`
        site = next((s for s in self.sites if s.kind is ApiKind.HF_TRAINING_ARGS and isinstance(training, Instance) and s.call is training.node), None)
        if site is None:
            return None
        self.scope.checkpointed_models.setdefault(model.value, site.call)
        if site.receiver is None:
            function_scope = next((s for s in reversed(self.scopes) if s.kind == "function"), None)
            site.receiver, site.trainer_function = self.evaluate(model), function_scope.qualname if function_scope else None
        return model.value

    def finish_facts(self, scope: _Scope) -> None:
        """A mutated container is also read when it appears more often than it is mutated."""
        facts = scope.facts
        if facts is None:
            return
        counts: dict[str, int] = {}
        for mutation in facts.mutations:
            counts[mutation.container] = counts.get(mutation.container, 0) + 1
        stores: dict[str, list[SelfStore]] = {}
        for store in facts.self_stores:
            stores.setdefault(store.attr, []).append(store)
        for i, store in enumerate(facts.self_stores):
            same = stores[store.attr]
            if all(s.fresh for s in same) and facts.self_reads.get(store.attr, 0) > len(same):
                facts.self_stores[i] = replace(store, scratch=True)
        for i, mutation in enumerate(facts.mutations):
            if mutation.owner == "self":
                attr = mutation.container[len("self.") :]
                seen = facts.self_reads.get(attr, 0) - len(stores.get(attr, ()))
            else:
                seen = facts.name_reads.get(mutation.container, 0) - (mutation.container in scope.params)
            facts.mutations[i] = replace(mutation, also_read=seen > counts[mutation.container])

    def visit_Lambda(self, node: cst.Lambda) -> None:
        qualname = f"{self.scope.qualname}.<lambda>"
        ordered = tuple(p.name.value for p in node.params.params)
        facts = self.lambdas.setdefault(id(node), FunctionFacts(qualname, ordered))
        params = frozenset(ordered)
        scope = _Scope("lambda", qualname, class_qualname=self.scope.class_qualname, facts=facts, params=params)
        for name in params:
            scope.bindings[name] = Param(name, qualname)
        self.scopes.append(scope)

    def leave_Lambda(self, node: cst.Lambda) -> None:
        self.finish_facts(self.scopes.pop())

    def leave_Return(self, node: cst.Return) -> None:
        facts = self.scope.facts
        if facts is None or node.value is None:
            return
        value = self.evaluate(node.value)
        facts.returns = value if facts.returns is None else merge(facts.returns, value)

    def visit_Global(self, node: cst.Global) -> None:
        self.scope.global_names.update(n.name.value for n in node.names)

    def visit_Name(self, node: cst.Name) -> None:
        facts = self.scope.facts
        if facts is not None:
            facts.name_reads[node.value] = facts.name_reads.get(node.value, 0) + 1

    def visit_Attribute(self, node: cst.Attribute) -> None:
        facts = self.scope.facts
        if facts is not None and isinstance(node.value, cst.Name) and node.value.value == "self":
            facts.self_reads[node.attr.value] = facts.self_reads.get(node.attr.value, 0) + 1

    # --- control flow: branches merge bindings; `with` may switch autograd off -----------------

    def _enter_branch(self, node: cst.CSTNode) -> None:
        self.scope.branch_depth += 1

    def _leave_branch(self, node: cst.CSTNode) -> None:
        self.scope.branch_depth -= 1

    visit_Try = visit_While = visit_Match = _enter_branch  # type: ignore[assignment]
    leave_Try = leave_While = leave_Match = _leave_branch  # type: ignore[assignment]

    def visit_If(self, node: cst.If) -> bool:
        """Walk the branches by hand to know which ones run only in eval mode."""
        scope = self.scope
        scope.branch_depth += 1
        scope.conditional += 1
        self.walk(node.test)
        training = _training_test(node.test)
        scope.eval_only += training is False
        grad_checked, requiring = self.guards(node.test)
        scope.grad_guards += grad_checked
        saved = {name: scope.bindings.get(name) for name in requiring}
        for name in requiring:  # `if x.requires_grad:` - below, it does
            scope.bindings[name] = Tensor(Grad.REQUIRED, f"`{name}.requires_grad` is checked first")
        tested = _none_test(node.test)
        # `if kw is None: kw = {}`: after it, `kw` is `kw` defaulted (unbound in the body, so that
        # the assignment there is not merged with the value it replaces).
        defaulting = tested[0] if tested is not None and tested[1] and node.orelse is None and tested[0] in scope.bindings else None
        if defaulting is not None:
            before = scope.bindings.pop(defaulting)
        scope.gates.append(_module_gates(node.test))
        self.walk(node.body)
        scope.gates.pop()
        if defaulting is not None:
            after = scope.bindings.get(defaulting)
            scope.bindings[defaulting] = before if after is None else defaulted(before, after, falsy=False)
        for name, value in saved.items():
            if value is None:
                scope.bindings.pop(name, None)
            else:
                scope.bindings[name] = merge(value, scope.bindings[name])
        scope.grad_guards -= grad_checked
        scope.eval_only -= training is False
        if node.orelse is not None:
            scope.eval_only += training is True
            scope.gates.append(() if training is not None else None)
            self.walk(node.orelse)
            scope.gates.pop()
            scope.eval_only -= training is True
        scope.branch_depth -= 1
        scope.conditional -= 1
        if training is True and _ends_with_return(node.body) and scope.kind == "function":
            scope.eval_only += 1  # the rest of the function is the eval path; the scope ends with it
        return False

    def visit_IfExp(self, node: cst.IfExp) -> bool:
        """`checkpoint(block, x) if self.use_checkpoint else block(x)`: the flag gates the call."""
        gates = self.scope.gates
        self.walk(node.test)
        gates.append(_module_gates(node.test))
        self.walk(node.body)
        gates[-1] = () if _training_test(node.test) is not None else None
        self.walk(node.orelse)
        gates.pop()
        return False

    def guards(self, test: cst.BaseExpression) -> tuple[bool, list[str]]:
        """What `if <test>:` guarantees in its body: grad enabled (`torch.is_grad_enabled()`), and
        the names whose tensors require grad (`x.requires_grad`), through `and`."""
        if isinstance(test, cst.BooleanOperation) and isinstance(test.operator, cst.And):
            left, right = self.guards(test.left), self.guards(test.right)
            return left[0] or right[0], left[1] + right[1]
        if isinstance(test, cst.Call) and not test.args and self.evaluate(test.func) in (Ref("torch.is_grad_enabled"), Ref("torch.autograd.grad_mode.is_grad_enabled")):
            return True, []
        if isinstance(test, cst.Attribute) and test.attr.value == "requires_grad" and isinstance(test.value, cst.Name):
            return True, [test.value.value]  # under no_grad nothing computed requires grad
        return False, []

    def visit_comprehension(self, node: Union[cst.ListComp, cst.SetComp, cst.GeneratorExp, cst.DictComp]) -> None:
        """`[wrap(b) for b in model.blocks]`: the loop variables hold the elements, inside only."""
        scope, saved = self.scope, {}
        comp: Optional[cst.CompFor] = node.for_in
        while comp is not None:
            for name in _free_names(comp.target):
                saved.setdefault(name, scope.bindings.get(name))
            self.bind_loop_target(comp.target, comp.iter)
            comp = comp.inner_for_in
        self.comprehensions.append(saved)

    def leave_comprehension(self, node: cst.CSTNode) -> None:
        bindings = self.scope.bindings
        for name, value in self.comprehensions.pop().items():
            if value is None:
                bindings.pop(name, None)
            else:
                bindings[name] = value

    visit_ListComp = visit_SetComp = visit_GeneratorExp = visit_DictComp = visit_comprehension  # type: ignore[assignment]
    leave_ListComp = leave_SetComp = leave_GeneratorExp = leave_DictComp = leave_comprehension  # type: ignore[assignment]

    def visit_For(self, node: cst.For) -> None:
        self.scope.branch_depth += 1
        self.bind_loop_target(node.target, node.iter)
        self.scope.loop_assigned.append(set())

    def leave_For(self, node: cst.For) -> None:
        self.scope.branch_depth -= 1
        self.scope.loop_assigned.pop()

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

    def bind_target(self, target: cst.BaseExpression, value: Value, statement: Optional[cst.CSTNode] = None) -> None:
        scope = self.scope
        if isinstance(target, cst.Name):
            if target.value in scope.global_names and scope.facts is not None and statement is not None:
                scope.facts.global_stores.append(Effect(statement, f"assigns the global `{target.value}`"))
            if scope.branch_depth:
                value = merge(scope.bindings.get(target.value), value)
            scope.bindings[target.value] = value
        elif isinstance(target, (cst.Tuple, cst.List)):
            if isinstance(value, Items) and len(value.values) == len(target.elements):
                for item, element in zip(target.elements, value.values):
                    self.bind_target(item.value, element, statement)
                return
            # Slices of a tensor are like it; parts of data are data; parts of a module's output may be
            # masks or indices.
            if isinstance(value, Pieces):
                element: Value = value.tensor
            elif isinstance(value, SYMBOLIC):
                element = ElementOf(value)
            elif isinstance(value, Tensor) and (value.grad is Grad.NONE or not value.maybe_tuple):
                element = Tensor(value.grad, value.origin, value.frozen)
            else:
                element = UNKNOWN
            for item in target.elements:
                self.bind_target(item.value, element, statement)
        elif isinstance(target, cst.Attribute) and statement is not None:
            self.store_attribute(target, value, statement)
        elif isinstance(target, cst.Subscript) and statement is not None:
            self.forget_contents(target.value)
            self.mutate_container(target.value, statement, "item", value)

    def store_attribute(self, target: cst.Attribute, value: Value, statement: cst.CSTNode) -> None:
        scope = self.scope
        attr = target.attr.value
        owner = target.value
        model = _dotted(owner)
        if model is not None and value == Const(True):
            if attr == "gradient_checkpointing" and "." not in model:
                scope.checkpointed_models.setdefault(model, statement)
            elif attr == "use_cache" and model.endswith(".config") and scope.model_modes.get(model[: -len(".config")]) is not False:
                # In eval() mode transformers does not checkpoint, so the cache is kept (generation).
                self.spell_cache(model[: -len(".config")], statement, "use_cache")
        if attr == "requires_grad" and isinstance(owner, cst.Name) and isinstance(value, Const) and isinstance(value.value, bool):
            grad = Grad.REQUIRED if value.value else Grad.NONE
            scope.bindings[owner.value] = Tensor(grad, f"`{owner.value}.requires_grad` set to {value.value}")
            return
        if isinstance(value, (Const, ModuleObject)):
            return  # configuration and submodules, not tensors computed at run time
        if isinstance(owner, cst.Name) and owner.value == "self":
            if scope.class_qualname and scope.method != "__init__" and scope.facts is not None and not scope.eval_only:
                # The store's own target counts as a read; `+=` reads the old value.
                fresh = not isinstance(statement, cst.AugAssign) and scope.facts.self_reads.get(attr, 0) <= 1
                scope.facts.self_stores.append(SelfStore(attr, Effect(statement, f"stores `self.{attr}`"), value, fresh))
                self.runtime_attrs.setdefault(scope.class_qualname, {}).setdefault(attr, (statement, value))
            return
        stashed_on = self.evaluate(owner)
        if isinstance(stashed_on, ModuleObject) and scope.kind == "function":
            for cls in stashed_on.classes:
                self.runtime_attrs.setdefault(cls, {}).setdefault(attr, (statement, value))

    def forget_contents(self, receiver: cst.BaseExpression) -> None:
        """A literal list or dict changed after it was built no longer holds what the literal says."""
        if isinstance(receiver, cst.Name) and isinstance(self.scope.bindings.get(receiver.value), (Items, DictLit)):
            self.scope.bindings[receiver.value] = UNKNOWN

    def mutate_container(self, receiver: cst.BaseExpression, node: cst.CSTNode, method: str, stored: Value) -> None:
        """`x.append(...)`, `x[k] = v`, `x.update(...)` on something that outlives the call."""
        scope = self.scope
        if scope.facts is None or scope.eval_only:
            return
        tensor = isinstance(stored, Tensor)
        if isinstance(receiver, cst.Attribute) and isinstance(receiver.value, cst.Name) and receiver.value.value == "self":
            scope.facts.mutations.append(ContainerMutation(node, f"self.{receiver.attr.value}", "self", False, method, tensor))
        elif isinstance(receiver, cst.Name):
            name = receiver.value
            if name in scope.params:
                owner = "param"
            elif name in scope.global_names:
                owner = "global"
            elif name not in scope.bindings and any(name in outer.bindings for outer in self.scopes[:-1]):
                owner = "outer"
            else:
                return  # a local container: nothing escapes
            scope.facts.mutations.append(ContainerMutation(node, name, owner, False, method, tensor))

    def bind_loop_target(self, target: cst.BaseExpression, iterable: cst.BaseExpression) -> None:
        element: Value = UNKNOWN
        builtin = self.evaluate(iterable.func) if isinstance(iterable, cst.Call) and iterable.args else None
        if builtin == Ref("builtins.enumerate"):
            inner = element_of(self.iterated(iterable.args[0].value))
            if isinstance(target, cst.Tuple) and len(target.elements) == 2:
                self.bind_target(target.elements[0].value, UNKNOWN)
                self.bind_target(target.elements[1].value, inner)
                return
        elif builtin == Ref("builtins.zip"):
            # `for block, past in zip(blocks, caches)`: each name walks its own sequence.
            if isinstance(target, (cst.Tuple, cst.List)) and len(target.elements) == len(iterable.args) and not any(a.star or a.keyword for a in iterable.args):
                for part, arg in zip(target.elements, iterable.args):
                    self.bind_target(part.value, element_of(self.iterated(arg.value)))
                return
        else:
            element = element_of(self.iterated(iterable))
        self.bind_target(target, element)

    def iterated(self, iterable: cst.BaseExpression) -> Value:
        value = self.evaluate(iterable)
        if isinstance(value, Param) and LOADER_NAME.search(value.name):
            return DataSource(value.name)
        return value

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
            self.bind_target(target.target, value, node)
            if isinstance(target.target, cst.Name) and self.scope.loop_assigned:
                self.note_fresh(target.target.value, node.value, value)
            if isinstance(target.target, cst.Name):
                set_state(self, target.target.value, state_of(self, node.value))
            if isinstance(target.target, cst.Name) and isinstance(node.value, cst.Call):
                # `model = AutoModel.from_pretrained(..., use_cache=True)`
                for arg in node.value.args:
                    if arg.keyword and arg.keyword.value == "use_cache" and self.evaluate(arg.value) == Const(True):
                        self.spell_cache(target.target.value, arg, "use_cache")

    def note_fresh(self, name: str, expression: cst.BaseExpression, value: Value) -> None:
        """In a loop body: whether `name` now holds a tensor made in this iteration from leaves only (a
        call none of whose arguments is known to carry another graph), so that nothing else shares it."""
        fresh = self.scope.loop_assigned[-1]
        if isinstance(value, Const):
            return  # `bias = None` on another branch neither makes nor shares a graph
        made = isinstance(expression, cst.Call) and not any(_links_to_a_graph(self.evaluate(a.value)) for a in expression.args)
        if made:
            fresh.add(name)
        else:
            fresh.discard(name)

    def leave_AnnAssign(self, node: cst.AnnAssign) -> None:
        if node.value is not None:
            self.bind_target(node.target, self.evaluate(node.value), node)

    def leave_AugAssign(self, node: cst.AugAssign) -> None:
        increment = self.evaluate(node.value)
        target = node.target
        if not isinstance(target, cst.Attribute):
            self.bind_target(target, join_grad([self.evaluate(target), increment], Spelling("{}", target)), node)
            return
        owner = self.scope.class_qualname
        binding = self.index.attribute(owner, target.attr.value) if owner and _is_self(target.value) else None
        if binding is not None and binding.is_buffer:
            self.mutate_container(target, node, "inplace", increment)
        else:
            # `self.steps += 1` counts calls; `self.total += loss` accumulates a tensor into the module.
            self.store_attribute(target, increment if isinstance(increment, (Const, Tensor)) else UNKNOWN, node)

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
        return self.flow.attribute(owner, attr, f"self.{attr}")

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
            if _is_super(node.value) and self.scope.class_qualname and "self" in self.scope.bindings:
                # `super().__call__` runs this module's own forward; `super().forward` the parent's.
                if node.attr.value == "__call__":
                    return self.scope.bindings["self"]
                parents = list(self.index.ancestors(self.scope.class_qualname))[1:]
                return next((self.flow.method(p, node.attr.value) for p in parents if self.flow.method(p, node.attr.value) != UNKNOWN), UNKNOWN)
            base = self.evaluate(node.value)
            if isinstance(base, ModuleObject):
                return self.flow.member(base, node.attr.value)
            if isinstance(base, Tensor):
                return tensor_attribute(base, node.attr.value)
            if isinstance(base, SYMBOLIC):
                return AttributeOf(base, node.attr.value)
            return self.ref(f"{base.qualname}.{node.attr.value}") if isinstance(base, Ref) else UNKNOWN
        if isinstance(node, cst.Subscript):
            return element_of(self.evaluate(node.value))
        if isinstance(node, cst.BinaryOperation):
            return join_grad([self.evaluate(node.left), self.evaluate(node.right)], Spelling("`{}`", node))
        if isinstance(node, cst.UnaryOperation):
            return self.evaluate(node.expression)
        if isinstance(node, cst.Dict):
            return self.dict_literal(node)
        if isinstance(node, (cst.Tuple, cst.List, cst.Set)):
            if any(isinstance(e, cst.StarredElement) for e in node.elements):
                return UNKNOWN
            return Items(tuple(self.evaluate(e.value) for e in node.elements))
        if isinstance(node, cst.Call):
            return self.evaluate_call(node)
        if isinstance(node, cst.Lambda):
            return Lambda(node)
        if isinstance(node, cst.IfExp):
            tested = _none_test(node.test)
            if tested is not None:
                # `{} if kw is None else kw`, `kw if kw is not None else {}`
                name, is_none = tested
                default, kept = (node.body, node.orelse) if is_none else (node.orelse, node.body)
                if isinstance(kept, cst.Name) and kept.value == name:
                    return defaulted(self.evaluate(kept), self.evaluate(default), falsy=False)
            return merge(self.evaluate(node.body), self.evaluate(node.orelse))
        if isinstance(node, cst.BooleanOperation) and isinstance(node.operator, cst.Or):
            return defaulted(self.evaluate(node.left), self.evaluate(node.right), falsy=True)
        return UNKNOWN

    def evaluate_call(self, node: cst.Call) -> Value:
        if id(node) in self.call_values:
            return self.call_values[id(node)]
        if isinstance(node.func, cst.Attribute) and not _is_self(node.func.value):
            receiver = self.evaluate(node.func.value)
            method = node.func.attr.value
            if isinstance(receiver, (Tensor, *SYMBOLIC)):
                result = self.tensor_method(receiver, method, node)
                if result is not None:
                    return result
            elif isinstance(receiver, ModuleObject) and method in MODULE_SELF_METHODS:
                return receiver  # `Net().to(device)`, `model.train()`
        func = self.evaluate(node.func)
        if isinstance(func, SYMBOLIC):
            return CallOf(func, tuple(self.evaluate(a.value) for a in node.args if not a.keyword and not a.star), Spelling("`{}`", node))
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
        if self.index.class_(func.qualname) is not None:
            return ModuleObject((func.qualname,), code(node.func))
        if func.qualname in SPLITTING_FUNCTIONS and node.args and not node.args[0].star:
            whole = self.evaluate(node.args[0].value)
            if isinstance(whole, SYMBOLIC):
                return join_grad([whole], Spelling("`{}`", node))
            return Pieces(Tensor(whole.grad, whole.origin, whole.frozen)) if isinstance(whole, Tensor) else UNKNOWN
        if func.qualname.startswith(GRAD_NEUTRAL_PREFIXES) and func.qualname.count(".") <= 3:
            return join_grad([self.evaluate(a.value) for a in node.args if not a.star], Spelling("`{}`", node))
        module, name = self.index.split(func.qualname)
        if module is not None and name in module.functions:
            inputs = [self.evaluate(a.value) for a in node.args if not a.star]
            if any(isinstance(v, Tensor) for v in inputs):
                # A tensor, but maybe a mask built from an input's shape: whether it needs grad is open.
                return Tensor(Grad.UNKNOWN, Spelling("`{}`", node), maybe_tuple=True)
        return Instance(func.qualname, node)

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
        if method in GRAD_NEUTRAL_METHODS:
            origin = receiver.origin if isinstance(receiver, Tensor) else Spelling("`{}`", node)
            return join_grad([receiver, *(self.evaluate(a.value) for a in node.args if not a.star)], origin)
        if method in SPLITTING_METHODS:
            if isinstance(receiver, Tensor):
                return Pieces(Tensor(receiver.grad, receiver.origin, receiver.frozen))
            return join_grad([receiver], Spelling("`{}`", node))
        return UNKNOWN if isinstance(receiver, Tensor) else None

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

    def arguments(self, args: Sequence[cst.Arg], bound: Optional[Partial] = None) -> _Arguments:
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
        return _Arguments(tuple(positional), keywords, has_star_args, unresolved, spread_value)

    # --- checkpoint sites ------------------------------------------------------------------------

    def leave_Call(self, node: cst.Call) -> None:
        callee = self.evaluate(node.func)
        self.collect_facts(node, callee)
        self.note_model_call(node)
        targets, bound = self.call_targets(callee)
        if targets:
            arguments = self.arguments(node.args)
            star = next((i for i, a in enumerate(arguments.positional) if a.star), len(arguments.positional))
            positional = tuple(self.evaluate(a.value) for a in arguments.positional[:star])
            keywords = {name: value for name, (value, _, _) in arguments.keywords.items()}
            nodes = {name: spelled for name, (_, spelled, _) in arguments.keywords.items()}
            states = {key: state for key, arg in [*enumerate(arguments.positional[:star]), *nodes.items()] if isinstance(arg, cst.Arg) and (state := state_of(self, arg.value)) != ModelState()}
            call = CallRecord(node, positional, keywords, nodes, arguments.has_star_args, arguments.unresolved_kwargs, bound, self.scope.qualname, states)
            self.note_call(targets, call)
            self.note_wrapper_call(callee, call)
        if targets or not isinstance(callee, Ref):
            forget_modes(self, node)
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

    def draws_nothing(self, name: str, node: cst.Call) -> bool:
        """A dropout call whose `p` is a literal 0 or whose training flag is a literal False."""
        if name not in DROPOUT_FUNCTION_ARGS:
            return False
        p_index, training = DROPOUT_FUNCTION_ARGS[name]
        positional = [a.value for a in node.args if not a.keyword and not a.star]
        keywords = {a.keyword.value: a.value for a in node.args if a.keyword}
        p = keywords.get("p", positional[p_index] if len(positional) > p_index else None)
        flag = keywords.get(training, positional[p_index + 1] if len(positional) > p_index + 1 else None)
        return (p is not None and self.evaluate(p) in (Const(0), Const(0.0))) or (
            flag is not None and self.evaluate(flag) == Const(False)
        )

    def collect_facts(self, node: cst.Call, callee: Value) -> None:
        facts = self.scope.facts
        func = node.func
        if isinstance(func, cst.Attribute):
            method = func.attr.value
            receiver = func.value
            if method == "requires_grad_" and isinstance(receiver, cst.Name):
                flag = self.evaluate(node.args[0].value) if node.args else Const(True)
                if isinstance(flag, Const):
                    self.scope.bindings[receiver.value] = Tensor(Grad.REQUIRED if flag.value else Grad.NONE, Spelling("`{}`", node))
            if method in LIST_AND_DICT_UPDATES:
                self.forget_contents(receiver)
            if facts is None:
                return
            if method in TORCH_RNG_METHODS:
                facts.torch_rng.append(Effect(node, f"`{code(func)}()` draws from torch's RNG"))
            elif method in LIST_AND_DICT_UPDATES or method in INPLACE_UPDATES:
                stored = self.evaluate(node.args[-1].value) if node.args else UNKNOWN
                self.mutate_container(receiver, node, method if method in LIST_AND_DICT_UPDATES else "inplace", stored)
            if _is_self(receiver) and isinstance(callee, LocalFunction):
                facts.method_calls.append(callee.qualname)
        if facts is None:
            return
        if isinstance(callee, ModuleObject):
            facts.module_calls.append(callee)
        elif isinstance(callee, Ref):
            name = callee.qualname
            if name in TORCH_RNG_FUNCTIONS and not self.draws_nothing(name, node):
                facts.torch_rng.append(Effect(node, f"`{code(func)}()` draws from torch's RNG"))
            elif any(name == m or name.startswith(m + ".") for m in UNREPLAYED_RNG_MODULES):
                module = next(m for m in UNREPLAYED_RNG_MODULES if name == m or name.startswith(m + "."))
                if name == f"{module}.seed":
                    if node.args:
                        facts.reseeds.add(module)
                else:
                    facts.unreplayed_rng.append(Effect(node, f"`{code(func)}()` draws from the `{module}` generator, which checkpoint never restores", module))
        elif isinstance(callee, LocalFunction) and callee.node is None:
            facts.method_calls.append(callee.qualname)
        for arg in node.args:
            if arg.keyword is not None and arg.keyword.value == "generator":
                facts.unreplayed_rng.append(Effect(node, f"`{code(func)}(..., generator=...)` uses a generator that checkpoint never restores"))

    def call_targets(self, callee: Optional[Value]) -> tuple[tuple[str, ...], bool]:
        """The project functions a call of `callee` runs (a module runs its `forward`), and whether
        they get `self` implicitly."""
        if isinstance(callee, ModuleObject):
            owners = (self.index.forward_owner(cls) for cls in callee.classes)
            return tuple(dict.fromkeys(f"{owner.qualname}.forward" for owner in owners if owner is not None)), True
        if isinstance(callee, LocalFunction):
            return (callee.qualname,), callee.node is None  # a method reached through an object, or a closure
        if isinstance(callee, Ref):
            module, name = self.index.split(callee.qualname)
            if module is not None and name in module.functions:
                return (callee.qualname,), False
            if module is not None and name in module.classes:  # a constructor: `__init__` gets the arguments
                init = self.flow.method(callee.qualname, "__init__")
                return ((init.qualname,), True) if isinstance(init, LocalFunction) else ((), False)
        return (), False

    def note_call(self, targets: tuple[str, ...], call: CallRecord) -> None:
        for target in targets:
            self.calls.setdefault(target, []).append(call)

    def note_wrapper_call(self, callee: Value, call: CallRecord) -> None:
        """A call of a function that checkpoints the callable it is handed, or of a module that
        checkpoints itself or the module it holds: a checkpoint site, made from the wrapper's own
        site once the model is complete (`summaries.Resolver`)."""
        targets: list[tuple[str, Optional[Value]]] = []
        if isinstance(callee, (Ref, LocalFunction)) and callee.qualname not in self.wrappers and self.index.wrapper_parameter(callee.qualname):
            targets.append((self.index.canonical(callee.qualname), None))
        elif isinstance(callee, ModuleObject):
            for cls in callee.classes:
                method = self.index.checkpointing_method(cls)
                if method is not None:
                    targets.append((method, ModuleObject((cls,), callee.origin, callee.container)))
        if not targets:
            return
        function_scope = next((s for s in reversed(self.scopes) if s.kind in ("function", "lambda")), None)
        for target, module in targets:
            self.wrapper_calls.append(
                WrapperCall(
                    target, call, module, self.scope.grad_disabled(),
                    function_scope.qualname if function_scope else None, function_scope.class_qualname if function_scope else None,
                )
            )

    def note_checkpointed_call(self, site: CheckpointSite) -> None:
        """The checkpoint calls its function with the inputs (and what a partial binds)."""
        function = site.function
        positional: tuple[Value, ...] = site.input_values
        keywords = {arg.keyword.value: value for arg, value in zip(site.keywords, site.keyword_values) if arg.keyword}
        nodes = {arg.keyword.value: arg for arg in site.keywords if arg.keyword}
        if isinstance(function, Partial):
            positional = function.arg_values + positional
            keywords = {**function.keywords, **keywords}
            function = function.func
        targets, bound = self.call_targets(function)
        if targets:
            self.note_call(targets, CallRecord(site.call, positional, keywords, nodes, site.has_star_args, site.mode.flag is FlagStatus.MAYBE, bound, self.scope.qualname))

    def record(self, site: CheckpointSite) -> None:
        scope = self.scope
        function_scope = next((s for s in reversed(self.scopes) if s.kind in ("function", "lambda")), None)
        site.enclosing_function = function_scope.qualname if function_scope else None
        site.enclosing_class = function_scope.class_qualname if function_scope else None
        site.grad_guarded = scope.grad_guards > 0
        site.grad_disabled = None if site.grad_guarded else scope.grad_disabled()
        site.eval_only = scope.eval_only > 0
        site.gates = None if None in scope.gates else tuple(dict.fromkeys(g for gates in scope.gates for g in gates))  # type: ignore[union-attr]
        site.forwarded = function_scope is not None and _handed_in(site.function, function_scope)
        self.sites.append(site)
        if site.kind is not ApiKind.HF_TRAINING_ARGS:  # TrainingArguments evaluate to the object a Trainer is handed
            self.call_values[id(site.call)] = self.checkpoint_output(site)
        if site.kind.runs_checkpoint:
            self.note_checkpointed_call(site)

    def checkpoint_output(self, site: CheckpointSite) -> Value:
        """A reentrant checkpoint's output requires grad only if one of its inputs does."""
        if not site.kind.runs_checkpoint:
            return UNKNOWN
        if site.reentrant:
            inputs = list(site.input_values)
            if any(isinstance(v, Tensor) and v.grad is Grad.REQUIRED for v in inputs):
                return Tensor(Grad.REQUIRED, Spelling("output of `{}`", site.call), maybe_tuple=True)
            origin = Spelling("output of the reentrant checkpoint `{}`, whose inputs cannot require grad", site.call)
            if inputs and all(isinstance(v, Tensor) and v.grad is Grad.NONE for v in inputs):
                frozen = any(v.frozen for v in inputs if isinstance(v, Tensor))
                return Tensor(Grad.NONE, origin, frozen, maybe_tuple=True)
            joined = join_grad(inputs, origin) if inputs else UNKNOWN
            return replace(joined, origin=origin) if isinstance(joined, Derived) else UNKNOWN
        if isinstance(site.function, ModuleObject):
            return self.module_output(site.function, list(site.input_values))
        if isinstance(site.function, SYMBOLIC):
            return CallOf(site.function, site.input_values, Spelling("`{}`", site.call))
        return UNKNOWN

    def match_api(self, callee: Value) -> tuple[Optional[CheckpointApi], Optional[Partial]]:
        if isinstance(callee, Ref):
            if callee.qualname in KNOWN_APIS:
                return KNOWN_APIS[callee.qualname], None
            function_class = self.index.class_(callee.qualname[: -len(".apply")]) if callee.qualname.endswith(".apply") else None
            if function_class is not None and function_class.recompute is not None:
                function_index, inputs_from, restores = function_class.recompute
                name = function_class.qualname.rsplit(".", 1)[-1]
                source = f"`{name}` is a hand-written checkpoint (an autograd.Function that re-runs the function in backward), reentrant by construction"
                return CheckpointApi(callee.qualname, ApiKind.CHECKPOINT, default_reentrant=True, default_source=source, function_index=function_index, inputs_from=inputs_from, restores_rng=restores), None
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
        if api.kind is ApiKind.MODULE_WRAPPER:
            function = self.evaluate(positional[0].value) if positional else None
        elif api.kind is ApiKind.APPLY_WRAPPER:
            function = self.wrapped_modules(arguments, positional[0] if positional else None)
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
        reaching = _reaching_keywords(arguments)
        wrapper = self.wrapper_fn(arguments) if api.kind is ApiKind.APPLY_WRAPPER else None
        preserve, preserve_node = self.preserve_rng_state(wrapper[1] if wrapper else arguments)
        spec = self.wrappers.get(api.qualname) if api.kind is ApiKind.PROJECT_WRAPPER else None
        if spec is not None and spec.preserve_rng_state is not None and preserve_node is None:
            preserve, preserve_node = spec.preserve_rng_state, node  # the checkpoint-functions setting
        unreplayed = None
        if not api.restores_rng:
            preserve, preserve_node = False, node
            unreplayed = f"`{api.qualname.rsplit('.', 2)[-2]}` re-runs the function in backward without restoring torch's RNG state"
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
            rng_not_replayed=unreplayed,
            input_values=tuple(self.evaluate(a.value) for a in inputs if not a.star),
            keyword_values=tuple(self.evaluate(a.value) for a in reaching),
            has_star_args=any(a.star for a in inputs),
            captured=self.captured(function),
            callee_has_parameters=self.flow.has_parameters(function.classes) if isinstance(function, ModuleObject) else None,
            mode_value=arguments.keywords["use_reentrant"][0] if "use_reentrant" in arguments.keywords else None,
            preserve_rng_value=arguments.keywords["preserve_rng_state"][0] if "preserve_rng_state" in arguments.keywords else None,
            star_values=tuple(self.evaluate(a.value) for a in inputs if a.star == "*"),
            spread_value=arguments.spread,
        )

    def captured(self, function: Optional[Value]) -> dict[str, Value]:
        """Values a lambda or closure reads from the enclosing scope, as they are at the call."""
        if isinstance(function, Lambda):
            body, params = function.node.body, {p.name.value for p in function.node.params.params}
        elif isinstance(function, LocalFunction) and function.node is not None:
            body, params = function.node.body, {p.name.value for p in function.node.params.params}
        else:
            return {}
        names = _free_names(body) - params
        return {name: value for name in sorted(names) if not isinstance(value := self.lookup(name), Unknown)}

    def preserve_rng_state(self, arguments: _Arguments) -> tuple[Optional[bool], Optional[cst.CSTNode]]:
        if "preserve_rng_state" not in arguments.keywords:
            return (None if arguments.unresolved_kwargs else True), None
        value, node, _ = arguments.keywords["preserve_rng_state"]
        return (value.value if isinstance(value, Const) and isinstance(value.value, bool) else None), node

    def wrapper_fn(self, arguments: _Arguments) -> Optional[tuple[CheckpointApi, _Arguments]]:
        """apply_activation_checkpointing's `checkpoint_wrapper_fn` (checkpoint_wrapper by default)
        and the arguments it binds; None when it is not a known wrapper."""
        if "checkpoint_wrapper_fn" not in arguments.keywords:
            return KNOWN_APIS[CHECKPOINT_WRAPPER], self.arguments(())
        inner_api, bound = self.match_api(arguments.keywords["checkpoint_wrapper_fn"][0])
        return (inner_api, self.arguments((), bound)) if inner_api is not None else None

    def wrapped_modules(self, arguments: _Arguments, model: Optional[cst.Arg]) -> Optional[Value]:
        """The submodules apply_activation_checkpointing wraps: the classes its `auto_wrap_policy`
        names, or those `check_fn` tests with isinstance; every submodule with neither."""
        if "auto_wrap_policy" in arguments.keywords:
            classes = self.policy_classes(arguments.keywords["auto_wrap_policy"][0])
            how = "auto_wrap_policy"
        elif "check_fn" in arguments.keywords:
            check = arguments.keywords["check_fn"][0]
            classes = self.isinstance_classes(check.node.body, check.node.params.params[0].name.value) if isinstance(check, Lambda) and len(check.node.params.params) == 1 else None
            how = "check_fn"
        else:
            return self.evaluate(model.value) if model is not None else None
        if classes is None:
            return UNKNOWN
        return ModuleObject(classes, f"{', '.join(c.rsplit('.', 1)[-1] for c in classes)} (selected by {how})")

    def policy_classes(self, policy: Value) -> Optional[tuple[str, ...]]:
        """`ModuleWrapPolicy({Block})`, `partial(transformer_auto_wrap_policy, transformer_layer_cls={Block})`."""
        if isinstance(policy, Instance) and policy.ctor in WRAP_POLICY_CLASSES:
            where = WRAP_POLICY_CLASSES[policy.ctor]
            args = [a for a in policy.node.args if not a.keyword and not a.star] if isinstance(where, int) else [a for a in policy.node.args if a.keyword and a.keyword.value == where]
            return self.module_classes(self.evaluate(args[0].value)) if args else None
        if isinstance(policy, Partial) and isinstance(policy.func, Ref) and isinstance(WRAP_POLICY_CLASSES.get(policy.func.qualname), str):
            layers = policy.keywords.get(WRAP_POLICY_CLASSES[policy.func.qualname])
            return self.module_classes(layers) if layers is not None else None
        return None

    def isinstance_classes(self, test: cst.BaseExpression, param: str) -> Optional[tuple[str, ...]]:
        """`isinstance(m, Block)`, `isinstance(m, (A, B))`, or `or` of them: the classes it accepts."""
        if isinstance(test, cst.BooleanOperation) and isinstance(test.operator, cst.Or):
            left, right = self.isinstance_classes(test.left, param), self.isinstance_classes(test.right, param)
            return None if left is None or right is None else tuple(dict.fromkeys(left + right))
        if (
            isinstance(test, cst.Call) and self.evaluate(test.func) == Ref("builtins.isinstance") and len(test.args) == 2
            and isinstance(test.args[0].value, cst.Name) and test.args[0].value.value == param
        ):  # fmt: skip
            return self.module_classes(self.evaluate(test.args[1].value))
        return None

    def module_classes(self, value: Value) -> Optional[tuple[str, ...]]:
        """Module classes named by a class, or a tuple, list or set of them."""
        if isinstance(value, Items):
            parts = [self.module_classes(v) for v in value.values]
            return None if not parts or any(p is None for p in parts) else tuple(dict.fromkeys(c for p in parts for c in p))
        if isinstance(value, Ref) and (self.index.class_(value.qualname) is not None or value.qualname.startswith("torch.nn.")):
            return (value.qualname,)
        return None

    def mode(self, api: CheckpointApi, arguments: _Arguments) -> Mode:
        if api.qualname == CHECKPOINT_WRAPPER and "checkpoint_fn" in arguments.keywords and arguments.keywords["checkpoint_fn"][0] != Const(None):
            return self.checkpoint_fn_mode(arguments)
        if api.kind is ApiKind.MODULE_WRAPPER and api.default_reentrant is False and "checkpoint_impl" in arguments.keywords:
            value, node, status = arguments.keywords["checkpoint_impl"]
            impl = CHECKPOINT_IMPL_REENTRANT.get(value.qualname) if isinstance(value, Ref) else None
            return Mode(impl, status, f"checkpoint_impl={code(node.value) if isinstance(node, cst.Arg) else 'bound'}", node)
        if api.kind is ApiKind.APPLY_WRAPPER:
            wrapper = self.wrapper_fn(arguments)
            if wrapper is None:
                _, node, status = arguments.keywords["checkpoint_wrapper_fn"]
                return Mode(None, status, "checkpoint_wrapper_fn is not a known wrapper", node)
            return self.mode(*wrapper)
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

    def checkpoint_fn_mode(self, arguments: _Arguments) -> Mode:
        """checkpoint_wrapper(..., checkpoint_fn=f, **kw) runs `partial(f, **kw)`: checkpoint_impl is
        ignored and the mode is whatever `f` does with `kw` (torch 2.13's checkpoint_wrapper.py)."""
        value, node, status = arguments.keywords["checkpoint_fn"]
        inner_api, bound = self.match_api(value)
        if inner_api is None or inner_api.kind is not ApiKind.CHECKPOINT:
            return Mode(None, status, "checkpoint_fn is not a known checkpoint function", node)
        forwarded = {name: entry for name, entry in arguments.keywords.items() if name not in ("checkpoint_impl", "checkpoint_fn")}
        inner = self.arguments((), bound)
        mode = self.mode(inner_api, replace(inner, keywords={**inner.keywords, **forwarded}, unresolved_kwargs=inner.unresolved_kwargs or arguments.unresolved_kwargs))
        spelled = code(node.value) if isinstance(node, cst.Arg) else "a bound checkpoint_fn"
        return replace(mode, reason=f"checkpoint_fn={spelled} gets checkpoint_wrapper's keywords unchanged (checkpoint_impl is ignored): {mode.reason}", node=mode.node or node)

    def hf_configured_mode(self) -> Mode:
        """Sites inside transformers layers follow whatever `gradient_checkpointing_enable` set."""
        explicit = self.index.reentrant_hf_enable(self.summary.path)
        if explicit is not None:
            path, line = explicit
            return Mode(True, FlagStatus.FIXED, f"the project enables reentrant checkpointing at {path}:{line}")
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
        owner = self.scope.class_qualname
        if owner and any(name.startswith("diffusers.") for name in self.index.ancestors(owner)) or self.summary.name.startswith("diffusers."):
            mode = Mode(False, FlagStatus.FIXED, "diffusers' enable_gradient_checkpointing() uses use_reentrant=False")
        else:
            mode = self.hf_configured_mode()
        positional = arguments.positional
        function = self.evaluate(positional[0].value) if positional and not positional[0].star else UNKNOWN
        inputs = positional[1:]
        # transformers sets `_gradient_checkpointing_func = partial(checkpoint, **kwargs)`: keywords reach torch.
        reaching = _reaching_keywords(arguments)
        return CheckpointSite(
            ApiKind.HF_FUNC, "self._gradient_checkpointing_func", node, mode, function, inputs, reaching,
            input_values=tuple(self.evaluate(a.value) for a in inputs if not a.star), captured=self.captured(function),
            keyword_values=tuple(self.evaluate(a.value) for a in reaching),
            has_star_args=any(a.star for a in inputs), star_values=tuple(self.evaluate(a.value) for a in inputs if a.star == "*"),
        )

    def hf_layer_site(self, node: cst.Call, layer: ModuleObject) -> CheckpointSite:
        arguments = self.arguments(node.args)
        keywords = tuple(n for (_, n, status) in arguments.keywords.values() if status is FlagStatus.EXPLICIT and isinstance(n, cst.Arg))
        assigned = self.scope.loop_assigned[-1] if self.scope.loop_assigned else set()
        fresh = frozenset(a.keyword.value for a in keywords if a.keyword and isinstance(a.value, cst.Name) and a.value.value in assigned)
        return CheckpointSite(
            ApiKind.HF_LAYER_CALL, "GradientCheckpointingLayer.__call__", node, self.hf_configured_mode(), layer, arguments.positional, keywords,
            input_values=tuple(self.evaluate(a.value) for a in arguments.positional if not a.star),
            keyword_values=tuple(self.evaluate(a.value) for a in keywords), fresh_keywords=fresh,
        )

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
        mode = hf_kwargs_mode(value, kwargs_node, keyword, self.versions, empty_means_none=False)
        receiver = self.evaluate(node.func.value) if isinstance(node.func, cst.Attribute) else None
        if isinstance(node.func, cst.Attribute) and isinstance(node.func.value, cst.Name):
            self.scope.checkpointed_models.setdefault(node.func.value.value, node)
        return CheckpointSite(ApiKind.HF_ENABLE, method, node, mode, None, kwargs_value=value, kwargs_node=kwargs_node, receiver=receiver)

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
            mode = hf_kwargs_mode(value, kwargs_node, kwargs_keyword, self.versions, empty_means_none)
            site = CheckpointSite(ApiKind.HF_TRAINING_ARGS, "TrainingArguments", node, mode, None, kwargs_value=value, kwargs_node=kwargs_node, flag_node=flag_node)
            if enabled != Const(True):
                site.notes.append(f"`{flag}` is not a literal; assuming it may be True")
            return site
        return None


def _none_test(test: cst.BaseExpression) -> Optional[tuple[str, bool]]:
    """(name, True) for `name is None`, (name, False) for `name is not None`."""
    if isinstance(test, cst.Comparison) and len(test.comparisons) == 1 and isinstance(test.left, cst.Name):
        target = test.comparisons[0]
        if isinstance(target.comparator, cst.Name) and target.comparator.value == "None":
            if isinstance(target.operator, cst.Is):
                return test.left.value, True
            if isinstance(target.operator, cst.IsNot):
                return test.left.value, False
    return None


# Keywords of the checkpoint APIs themselves: they never reach the checkpointed function.
_API_KEYWORDS = CONTROL_KEYWORDS | {"function", "functions", "segments", "input", "checkpoint_impl", "checkpoint_wrapper_fn", "check_fn", "auto_wrap_policy"}


def _reaching_keywords(arguments: _Arguments) -> tuple[cst.Arg, ...]:
    """Keyword arguments spelled at the call that the checkpoint hands on to the function."""
    return tuple(
        n for name, (_, n, status) in arguments.keywords.items()
        if name not in _API_KEYWORDS and status is FlagStatus.EXPLICIT and isinstance(n, cst.Arg)
    )  # fmt: skip


def _training_test(test: cst.BaseExpression) -> Optional[bool]:
    """True for tests that hold in training (`self.training`, `x or self.training`), False for `not self.training`."""
    if isinstance(test, cst.Attribute) and _is_self(test.value) and test.attr.value == "training":
        return True
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        inner = _training_test(test.expression)
        return None if inner is None else not inner
    if isinstance(test, cst.BooleanOperation) and isinstance(test.operator, cst.Or):
        # `a or self.training` holds whenever training is on.
        if _training_test(test.left) is True or _training_test(test.right) is True:
            return True
    return None


def _module_gates(test: cst.BaseExpression) -> Optional[tuple[str, ...]]:
    """The `self.<attr>` flags `if <test>:` requires, through `and`: `self.gradient_checkpointing and
    self.training and not torch.jit.is_scripting()` gives ("gradient_checkpointing",). The mode,
    `torch.is_grad_enabled()`, `x.requires_grad` and negated calls add none; anything else: None."""
    if isinstance(test, cst.BooleanOperation) and isinstance(test.operator, cst.And):
        left, right = _module_gates(test.left), _module_gates(test.right)
        return None if left is None or right is None else left + right
    if isinstance(test, cst.Attribute) and _is_self(test.value):
        return () if test.attr.value == "training" else (test.attr.value,)
    if isinstance(test, cst.Attribute) and test.attr.value == "requires_grad":
        return ()
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not) and isinstance(test.expression, cst.Call):
        return ()  # `not torch.jit.is_scripting()`
    if isinstance(test, cst.Call) and not test.args and _dotted(test.func) in ("torch.is_grad_enabled", "torch.autograd.grad_mode.is_grad_enabled"):
        return ()
    return None


def _ends_with_return(body: cst.BaseSuite) -> bool:
    statements = body.body if isinstance(body, cst.IndentedBlock) else [body]
    last = statements[-1] if statements else None
    if isinstance(last, cst.SimpleStatementLine):
        return any(isinstance(s, (cst.Return, cst.Raise)) for s in last.body)
    if isinstance(last, cst.SimpleStatementSuite):
        return any(isinstance(s, (cst.Return, cst.Raise)) for s in last.body)
    return False


def _is_self(node: cst.BaseExpression) -> bool:
    return isinstance(node, cst.Name) and node.value == "self"


def _links_to_a_graph(value: Value) -> bool:
    """A tensor known to carry autograd history (not a leaf), here or inside a literal tuple or list.
    Values the analysis cannot tell (a parameter, a size) do not count: this only clears findings."""
    if isinstance(value, Items):
        return any(map(_links_to_a_graph, value.values))
    carrier = grad_on_some_path(value)
    if carrier is not None:
        return not carrier.leaf
    return isinstance(value, Tensor) and value.grad is Grad.UNKNOWN and not value.leaf


def _is_super(node: cst.BaseExpression) -> bool:
    return isinstance(node, cst.Call) and isinstance(node.func, cst.Name) and node.func.value == "super"


def _handed_in(function: Optional[Value], scope: "_Scope") -> bool:
    """Whether a checkpointed callable is what the enclosing function was handed: one of its
    parameters (or a partial of one), the module itself in `__call__`, or a module handed to the
    constructor and held (`self.module = module`)."""
    if isinstance(function, Partial):
        function = function.func
    if not isinstance(function, Param):
        return False
    if function.function == scope.qualname:
        return function.name != "self" or scope.method == "__call__"
    return scope.class_qualname is not None and function.function.endswith(".__init__")


class _FreeNames(ReadOnlyWalker):
    def __init__(self) -> None:
        super().__init__()
        self.names: set[str] = set()

    def visit_Name(self, node: cst.Name) -> None:
        self.names.add(node.value)

    def visit_Attribute(self, node: cst.Attribute) -> bool:
        self.walk(node.value)  # `a.b` reads `a`, not a variable named `b`
        return False


def _free_names(body: cst.CSTNode) -> set[str]:
    visitor = _FreeNames()
    visitor.walk(body)
    return visitor.names


def _dotted(node: cst.BaseExpression) -> Optional[str]:
    """`a.b.c` for names and attribute chains (LibCST's helper also names calls, which we don't want)."""
    return get_full_name_for_node(node) if isinstance(node, (cst.Name, cst.Attribute)) and _is_chain(node) else None


def _is_chain(node: cst.BaseExpression) -> bool:
    while isinstance(node, cst.Attribute):
        node = node.value
    return isinstance(node, cst.Name)


def build_file_model(
    tree: cst.Module, path: str, summary: ModuleSummary, index: ProjectIndex, versions: LibraryVersions, settings: Settings
) -> FileModel:
    builder = ModelBuilder(summary, index, versions, settings)
    _bind_module_constants(builder, tree)
    builder.walk(tree)
    return FileModel(
        path, summary.name, tree, builder.sites, versions, index, settings,
        builder.functions, builder.lambdas, builder.runtime_attrs, builder.top_level, builder.cache_uses, builder.calls,
        builder.wrapper_calls, grad_free_calls=builder.grad_free_calls,
    )


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

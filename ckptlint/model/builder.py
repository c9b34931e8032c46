"""One LibCST pass over a file that records every checkpoint site with its callee, inputs and mode.

Names are resolved through the project index (imports, re-exports, `__init__` attributes of
module classes in any linted file), values through a small flow-ordered binding table: the last
assignment before a use wins, and an assignment under a branch or loop merges with the earlier
value (equal or unknown). When something cannot be resolved the model says so (Unknown), and
rules prefer no finding over a guess.
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Optional, Union

import libcst as cst

from ckptlint.config import Settings
from ckptlint.index import ModuleSummary, ProjectIndex
from ckptlint.model.apis import (
    ENABLE_GRAD,
    HF_CHECKPOINT_FUNC_ATTR,
    HF_ENABLE_METHODS,
    HF_GC_LAYER,
    HF_TRAINING_ARGUMENTS,
    INFERENCE_CONTEXTS,
    LIGHTNING_MODULES,
    LIGHTNING_NO_GRAD_STEPS,
    LIGHTNING_TRAINING_STEP,
    NO_GRAD_CONTEXTS,
    SET_EARLY_STOP,
    SET_GRAD_ENABLED,
)
from ckptlint.model.dataflow import Dataflow, loader_batch
from ckptlint.model import command_line
from ckptlint.model.command_line import is_parser
from ckptlint.model.evaluation import Evaluation, computed_without_grad
from ckptlint.model.file_model import FileModel
from ckptlint.model.held_models import HeldModels
from ckptlint.model.hooks import HookFacts
from ckptlint.model.hf_configs import CACHE, is_config, tracked_settings, with_setting
from ckptlint.model.loop_iterations import LoopFacts, first_iteration_truth, loop_facts
from ckptlint.model.model_states import apply_mode_effects, bind_model, set_flag, spelled_key, state_of
from ckptlint.model.scope import GRAD_ENABLED, GRAD_UNCHANGED, GradMark, Scope
from ckptlint.model.shapes import (
    dotted, ends_with_return, free_names, is_main_guard, is_not_training, is_self, last_effects, leaves_the_iteration, module_gates, none_test, requires_training, training_test,
    type_test,
)
from ckptlint.model.site_construction import SiteConstruction
from ckptlint.model.sites import (
    ApiKind,
    CacheUse,
    CallRecord,
    CheckpointSite,
    ContainerMutation,
    Effect,
    FlagStatus,
    FunctionFacts,
    GradContext,
    GradFreeCall,
    HeldCall,
    ParameterGenerate,
    ModelState,
    SelfStore,
    WrapperCall,
)
from ckptlint.model.torch_knowledge import (
    DROPOUT_FUNCTION_ARGS,
    TORCH_RNG_FUNCTIONS,
    TORCH_RNG_METHODS,
    UNREPLAYED_RNG_MODULES,
)
from ckptlint.model.training_scripts import TrainingScriptFacts
from ckptlint.model.values import (
    SUBMODULES,
    SYMBOLIC,
    UNKNOWN,
    CallOf,
    Const,
    DataSource,
    Derived,
    DictLit,
    ElementOf,
    Grad,
    Instance,
    Items,
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
from ckptlint.model.walk import ReadOnlyWalker
from ckptlint.names import absolute_module, import_bindings
from ckptlint.versions import LibraryVersions

# Parameters named like this are iterated as data loaders (`for x, y in loader:`).
LOADER_NAME = re.compile(r"(^|_)(data)?loader$|dataloader", re.IGNORECASE)
LIST_AND_DICT_UPDATES = frozenset({"append", "extend", "insert", "update", "setdefault"})
_REMOVALS = frozenset({"pop", "popitem", "clear", "remove"})
INPLACE_UPDATES = frozenset({"add_", "copy_", "mul_", "fill_", "zero_", "index_add_", "scatter_add_", "lerp_"})
class ModelBuilder(Evaluation, SiteConstruction, TrainingScriptFacts, HookFacts, ReadOnlyWalker):
    def __init__(self, summary: ModuleSummary, index: ProjectIndex, versions: LibraryVersions, settings: Settings) -> None:
        super().__init__()
        self.summary = summary
        self.index = index
        self.flow = Dataflow(index)
        self.versions = versions
        self.settings = settings
        self.wrappers = dict(settings.checkpoint_functions)
        self.scopes = [Scope("module", summary.name)]
        self.sites: list[CheckpointSite] = []
        self.functions: dict[str, FunctionFacts] = {}
        self.lambdas: dict[int, FunctionFacts] = {}
        # Class -> attribute -> every store on its objects at run time (`block.scores = scores`).
        self.runtime_attrs: dict[str, dict[str, list[tuple[cst.CSTNode, Value]]]] = {}
        self.call_values: dict[int, Value] = {}
        self.cache_uses: list[CacheUse] = []
        # `set_checkpoint_early_stop(...)` is called here: the early stop of this file's checkpoints is not known.
        self.switches_early_stop = False
        self.grad_free_calls: list[GradFreeCall] = []
        self.parameter_generates: list[ParameterGenerate] = []
        self.held = HeldModels()
        # `Trainer(...)` calls with checkpointing TrainingArguments (by node id) -> the model they train.
        self.trainer_models: dict[int, str] = {}
        # `Trainer(...)` calls that switch checkpointing on (by node id) -> where.
        self.trainer_checkpointing: dict[int, cst.CSTNode] = {}
        self.calls: dict[str, list[CallRecord]] = {}
        self.wrapper_calls: list[WrapperCall] = []
        # This file's top-level `def`s by qualified name, for reading a `check_fn` defined anywhere in it.
        self.module_functions: dict[str, cst.FunctionDef] = {}
        # Bindings that comprehensions shadow, restored when each one ends.
        self.comprehensions: list[dict[str, Optional[Value]]] = []
        # Command-line options added to each argparse parser (by the node that built it): dest -> value.
        self.command_line_options: dict[int, dict[str, Value]] = {}
        self.start_hooks()

    # --- scopes ------------------------------------------------------------------------------

    @property
    def scope(self) -> Scope:
        return self.scopes[-1]

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        qualname = f"{self.scope.qualname}.{node.name.value}"
        self.scopes.append(Scope("class", qualname))

    def leave_ClassDef(self, node: cst.ClassDef) -> None:
        self.held.finish_class(self, self.scopes.pop().qualname)

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
        scope = Scope("function", qualname, class_qualname, facts=facts, params=frozenset(params), method=node.name.value)
        for name in params:
            scope.bindings[name] = Param(name, qualname)
        self.hook_parameters(scope, facts.params, self.index.hook_signature(qualname))
        if node.name.value == LIGHTNING_TRAINING_STEP and len(params) > 1 and self.is_lightning(class_qualname):
            scope.bindings[params[1]] = loader_batch(qualname, params[1])
        for decorator in node.decorators:
            scope.grad.append(self.grad_mark(decorator.decorator, decorator, as_decorator=True))
        if node.name.value in LIGHTNING_NO_GRAD_STEPS and self.is_lightning(scope.class_qualname):
            scope.grad.append(GradContext(f"Lightning `{node.name.value}` (runs under {LIGHTNING_NO_GRAD_STEPS[node.name.value]})", node.name))
        self.held.enter_method(self, scope)
        self.scopes.append(scope)

    def is_lightning(self, class_qualname: Optional[str]) -> bool:
        return class_qualname is not None and self.index.is_subclass(class_qualname, LIGHTNING_MODULES)

    def leave_FunctionDef(self, node: cst.FunctionDef) -> None:
        scope = self.scopes.pop()
        self.finish_facts(scope)
        self.mark_last_mutations(scope, node)
        self.finish_cache_uses(scope)
        self.held.leave_method(scope)

    def leave_Module(self, node: cst.Module) -> None:
        self.finish_cache_uses(self.scopes[0])
        self.held.finish_file(self)

    def finish_facts(self, scope: Scope) -> None:
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

    def mark_last_mutations(self, scope: Scope, node: cst.FunctionDef) -> None:
        """A container update that is the function's last effect (a statement of its own)."""
        facts = scope.facts
        if facts is None or not facts.mutations or not isinstance(node.body, cst.IndentedBlock):
            return
        finals = last_effects(node.body.body) or []
        for i, mutation in enumerate(facts.mutations):
            if any(final is mutation.node or isinstance(final, cst.Expr) and final.value is mutation.node for final in finals):
                facts.mutations[i] = replace(mutation, last=True)

    def visit_Lambda(self, node: cst.Lambda) -> None:
        qualname = f"{self.scope.qualname}.<lambda>"
        ordered = tuple(p.name.value for p in node.params.params)
        facts = self.lambdas.setdefault(id(node), FunctionFacts(qualname, ordered))
        params = frozenset(ordered)
        scope = Scope("lambda", qualname, class_qualname=self.scope.class_qualname, facts=facts, params=params)
        for name in params:
            scope.bindings[name] = Param(name, qualname)
        self.hook_parameters(scope, ordered, self.hook_lambdas.get(id(node)))
        self.scopes.append(scope)

    def leave_Lambda(self, node: cst.Lambda) -> None:
        scope = self.scopes.pop()
        self.finish_facts(scope)
        if scope.facts is not None:
            # A container update that is the whole body is the lambda's last effect.
            scope.facts.mutations[:] = [replace(m, last=True) if m.node is node.body else m for m in scope.facts.mutations]

    def leave_Return(self, node: cst.Return) -> None:
        facts = self.scope.facts
        if facts is None or node.value is None:
            return
        # `@torch.no_grad() def encode(self, x): return self.vae(x)`: what it returns requires no grad.
        value = self.as_computed_here(node.value, self.returned_value(node.value))
        facts.returns = value if facts.returns is None else merge(facts.returns, value)

    def as_computed_here(self, expression: cst.BaseExpression, value: Value) -> Value:
        """`value` of `expression` as computed at this point: without grad where autograd records nothing."""
        disabled = self.scope.grad_disabled()
        if disabled is not None and not self.scope.grad_guards:
            return computed_without_grad(expression, value, disabled.kind)
        return value

    def returned_value(self, expression: cst.BaseExpression) -> Value:
        """What a `return` hands back; a parameter switched by `name.requires_grad_(...)` is still the
        parameter (the call returns the same object), alone or in a tuple (`return model, count`)."""
        if isinstance(expression, cst.Name) and expression.value in self.scope.in_place:
            return self.scope.in_place[expression.value]
        if isinstance(expression, (cst.Tuple, cst.List)) and not any(isinstance(e, cst.StarredElement) for e in expression.elements):
            return Items(tuple(self.returned_value(e.value) for e in expression.elements))
        return self.evaluate(expression)

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
        if scope.kind == "module" and node.orelse is None and is_main_guard(node.test):
            return True  # a script's entry point: its body is the script, run unconditionally
        scope.branch_depth += 1
        scope.conditional += 1
        self.walk(node.test)
        # The else branch starts from what held before the if, not from what its if branch assigned.
        before_branches = dict(scope.bindings) if node.orelse is not None else None
        first = first_iteration_truth(node.test, scope.loops[-1], self.evaluate) if scope.loops else None
        if first is False:
            self.carry_over_iterations()  # `if i > 0:` runs after the body ran at least once
        training = training_test(node.test)
        scope.eval_only += training is False
        grad_checked, requiring = self.guards(node.test)
        scope.grad_guards += grad_checked
        saved = {name: scope.bindings.get(name) for name in requiring}
        for name in requiring:  # `if x.requires_grad:` - below, it does
            scope.bindings[name] = Tensor(Grad.REQUIRED, f"`{name}.requires_grad` is checked first")
        tested = none_test(node.test)
        # `if kw is None: kw = {}`: after it, `kw` is `kw` defaulted (unbound in the body, so that
        # the assignment there is not merged with the value it replaces).
        defaulting = tested[0] if tested is not None and tested[1] and node.orelse is None and tested[0] in scope.bindings else None
        if defaulting is not None:
            before = scope.bindings.pop(defaulting)
        trains_only = requires_training(node.test)
        scope.gates.append(module_gates(node.test))
        scope.training_only += trains_only
        inside, otherwise, following = self.submodule_filter(node.test, leaves_the_iteration(node.body))
        rebound = self.rebind(inside)
        self.walk(node.body)
        self.unbind(rebound)
        scope.training_only -= trains_only
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
            assert before_branches is not None
            after_if_branch = self.restore_bindings(before_branches)
            if first is True:
                self.carry_over_iterations()  # the else of `if i == 0:`
            scope.eval_only += training is True
            scope.training_only += is_not_training(node.test)
            scope.gates.append(() if training is not None else None)
            rebound = self.rebind(otherwise)
            self.walk(node.orelse)
            self.unbind(rebound)
            self.join_bindings(after_if_branch)
            scope.gates.pop()
            scope.training_only -= is_not_training(node.test)
            scope.eval_only -= training is True
        scope.branch_depth -= 1
        scope.conditional -= 1
        scope.bindings.update(following)  # `if not isinstance(m, T): continue`
        if training is True and ends_with_return(node.body) and scope.kind == "function":
            scope.eval_only += 1  # the rest of the function is the eval path; the scope ends with it
        elif is_not_training(node.test) and ends_with_return(node.body) and scope.kind == "function":
            scope.training_only += 1  # the rest of the function is the training path
        return False

    def bind_set_later(self, loop: LoopFacts) -> None:
        """`gate = None` before a loop whose body sets `gate = self.gate(h)`: from the second iteration
        on the tensor is there, so the name holds either (ckptlint/model/loop_iterations.py)."""
        bindings = self.scope.bindings
        if not any(type(value) is Const and value.value is None for value in bindings.values()):
            return
        for name, values in loop.plain_assignments.items():
            if bindings.get(name) != Const(None):
                continue
            later = next((v for v in map(self.evaluate, values) if grad_on_some_path(v) is not None), None)
            if later is not None:
                bindings[name] = merge(bindings[name], later)

    def carry_over_iterations(self) -> None:
        """For a branch the loop's first iteration cannot take: the names its body assigns may hold
        what an earlier iteration left (ckptlint/model/loop_iterations.py)."""
        bindings = self.scope.bindings
        for name in self.scope.loops[-1].assigned:
            if name in bindings:
                bindings[name] = merge(bindings[name], UNKNOWN)

    def restore_bindings(self, before: dict[str, Value]) -> dict[str, Value]:
        """Put back the bindings `before` a branch; what the branch had bound instead."""
        bindings = self.scope.bindings
        after = dict(bindings)
        bindings.clear()
        bindings.update(before)
        return after

    def join_bindings(self, other_branch: dict[str, Value]) -> None:
        """After two alternative branches, each name holds what either left in it."""
        bindings = self.scope.bindings
        for name in {*bindings, *other_branch}:
            mine, theirs = bindings.get(name), other_branch.get(name)
            if mine is None:
                bindings[name] = theirs  # type: ignore[assignment]  # bound on the other branch only
            elif mine is not theirs:
                bindings[name] = merge(theirs, mine)

    def submodule_filter(self, test: cst.BaseExpression, leaves: bool) -> tuple[dict[str, Value], dict[str, Value], dict[str, Value]]:
        """What a test makes of the modules a walk over submodules yields (`for m in model.modules()`):
        their bindings in the branch it passes, in the other branch, and after the statement when
        the branch it passes `leaves` the iteration. `isinstance(m, nn.Linear)` narrows `m` to the
        tested classes; any other test filters the walk in a way not followed (`"attn" in name`):
        which modules pass is unknown."""
        walked = {n: v for n, v in self.scope.bindings.items() if isinstance(v, ModuleObject) and v.path and v.path[-1][1] == SUBMODULES}
        if not walked:
            return {}, {}, {}
        tested = type_test(test)
        classes = [self.evaluate(t) for t in tested[1]] if tested is not None and tested[0] in walked else []
        if classes and all(isinstance(c, Ref) for c in classes):
            name, positive = tested[0], tested[2]  # type: ignore[index]
            narrowed = {name: replace(walked[name], classes=tuple(c.qualname for c in classes))}  # type: ignore[union-attr]
            return (narrowed, {}, {}) if positive else ({}, narrowed, narrowed if leaves else {})
        unknown = dict.fromkeys(walked, UNKNOWN)
        return unknown, unknown, unknown if leaves else {}

    def rebind(self, values: dict[str, Value]) -> list[tuple[str, Optional[Value], Value]]:
        """Bind `values` for a branch; what `unbind` needs to restore the bindings after it."""
        bindings = self.scope.bindings
        rebound = [(name, bindings.get(name), value) for name, value in values.items()]
        bindings.update(values)
        return rebound

    def unbind(self, rebound: list[tuple[str, Optional[Value], Value]]) -> None:
        bindings = self.scope.bindings
        for name, before, value in rebound:
            if bindings.get(name) is value and before is not None:
                bindings[name] = before

    def visit_IfExp(self, node: cst.IfExp) -> bool:
        """`checkpoint(block, x) if self.use_checkpoint else block(x)`: the flag gates the call."""
        gates, scope = self.scope.gates, self.scope
        self.walk(node.test)
        gates.append(module_gates(node.test))
        trains_only = requires_training(node.test)
        grad_checked = self.guards(node.test)[0]
        scope.training_only += trains_only
        scope.grad_guards += grad_checked
        self.walk(node.body)
        scope.grad_guards -= grad_checked
        scope.training_only += is_not_training(node.test) - trains_only
        gates[-1] = () if training_test(node.test) is not None else None
        self.walk(node.orelse)
        scope.training_only -= is_not_training(node.test)
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
            for name in free_names(comp.target):
                saved.setdefault(name, scope.bindings.get(name))
            self.bind_loop_target(comp.target, comp.iter)
            for condition in comp.ifs:  # `[m for m in model.modules() if isinstance(m, nn.Linear)]`
                self.scope.bindings.update(self.submodule_filter(condition.test, False)[0])
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
        loop = loop_facts(node, self.evaluate)
        self.scope.loops.append(loop)
        self.bind_loop_target(node.target, node.iter)
        self.scope.loop_assigned.append(set())
        self.bind_set_later(loop)

    def leave_For(self, node: cst.For) -> None:
        self.scope.branch_depth -= 1
        self.scope.loops.pop()
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
            if mode == Const(True):
                return GRAD_ENABLED
            switch = code(call.args[0].value)
            return GradContext(f"{prefix}{name}({switch}) on the runs where `{switch}` is false", node, maybe=True)
        if name in ENABLE_GRAD:
            return GRAD_ENABLED
        if as_decorator and call is None and self.index.runs_without_grad(name):
            return GradContext(f"@{name.rsplit('.', 1)[-1]} (runs it under torch.no_grad())", node)  # a project decorator
        return GRAD_UNCHANGED

    # --- bindings ----------------------------------------------------------------------------

    def bind_target(self, target: cst.BaseExpression, value: Value, statement: Optional[cst.CSTNode] = None) -> None:
        scope = self.scope
        if isinstance(target, cst.Name):
            scope.in_place.pop(target.value, None)
            scope.held_elements.pop(target.value, None)
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
        model = dotted(owner)
        if isinstance(owner, cst.Name) and owner.value != "self" and isinstance(value, Const) and isinstance(value.value, bool):
            set_flag(self, owner.value, attr, value.value)  # `model.use_checkpoint = True`
        if model is not None and value == Const(True):
            if attr == "gradient_checkpointing" and "." not in model:
                scope.checkpointed_models.setdefault(model, statement)
            elif attr == CACHE and model.endswith(".config") and scope.model_modes.get(model[: -len(".config")]) is not False:
                # In eval() mode transformers does not checkpoint, so the cache is kept (generation).
                self.spell_cache(model[: -len(".config")], statement, "use_cache")
        elif model is not None and attr == CACHE and model.endswith(".config") and not scope.branch_depth:
            self.unspell_cache(model[: -len(".config")])  # `model.config.use_cache = False` (or a flag) before training
        if attr == "requires_grad" and isinstance(owner, cst.Name) and isinstance(value, Const) and isinstance(value.value, bool):
            grad = Grad.REQUIRED if value.value else Grad.NONE
            scope.bindings[owner.value] = Tensor(grad, f"`{owner.value}.requires_grad` set to {value.value}")
            return
        if isinstance(owner, cst.Name):
            configured = with_setting(scope.bindings.get(owner.value), attr, value, conditional=bool(scope.branch_depth))
            if configured is not None:
                scope.bindings[owner.value] = configured
                return
        if isinstance(owner, cst.Name) and isinstance(held := scope.bindings.get(owner.value), ModuleObject) and held.arguments is not None:
            # `config.dropout = 0.1` after `config = GPTConfig(...)`: the object holds that value now.
            known = isinstance(value, Const) and not scope.branch_depth
            scope.bindings[owner.value] = replace(held, arguments=(*held.arguments, (f".{attr}", ("const", value.value) if known else ("?",))))
        if isinstance(value, (Const, ModuleObject)):
            return  # configuration and submodules, not tensors computed at run time
        self.note_held_store(target, value, statement)
        if isinstance(owner, cst.Name) and owner.value == "self":
            if scope.class_qualname and scope.method != "__init__" and scope.facts is not None and not scope.eval_only:
                # The store's own target counts as a read; `+=` reads the old value.
                fresh = not isinstance(statement, cst.AugAssign) and scope.facts.self_reads.get(attr, 0) <= 1
                scope.facts.self_stores.append(SelfStore(attr, Effect(statement, f"stores `self.{attr}`"), value, fresh))
                self.runtime_attrs.setdefault(scope.class_qualname, {}).setdefault(attr, []).append((statement, value))
            return
        stashed_on = self.evaluate(owner)
        if isinstance(stashed_on, ModuleObject) and scope.kind == "function":
            for cls in stashed_on.classes:
                self.runtime_attrs.setdefault(cls, {}).setdefault(attr, []).append((statement, value))

    def note_held_store(self, target: cst.Attribute, value: Value, statement: cst.CSTNode) -> None:
        """`blk.scores = scores` for a `blk` walking `self.consumers`, `self.head.scores = s`: a value
        stored on an object the module holds outlives the call, as `self.scores = s` does."""
        scope = self.scope
        if not scope.class_qualname or scope.method == "__init__" or scope.facts is None or scope.eval_only:
            return
        owner = target.value
        held = f"an element of `{scope.held_elements[owner.value]}`" if isinstance(owner, cst.Name) and owner.value in scope.held_elements else None
        spelled = dotted(owner)
        if held is None and isinstance(owner, cst.Attribute) and spelled is not None and spelled.startswith("self."):
            held = f"`{spelled}`"
        if held is not None:
            scope.facts.held_stores.append(SelfStore(f"{code(target)}", Effect(statement, f"stores `{code(target)}` on {held}, an object the module holds"), value))

    def note_self_setattr(self, node: cst.Call, callee: Value) -> None:
        """`setattr(self, "aux_loss", loss)` with a literal name is `self.aux_loss = loss`."""
        if callee != Ref("builtins.setattr") or len(node.args) != 3 or any(a.keyword or a.star for a in node.args) or not is_self(node.args[0].value):
            return
        attr = self.evaluate(node.args[1].value)
        if isinstance(attr, Const) and isinstance(attr.value, str) and attr.value.isidentifier():
            self.store_attribute(cst.Attribute(value=node.args[0].value, attr=cst.Name(attr.value)), self.evaluate(node.args[2].value), node)

    def note_config_update(self, node: cst.Call, callee: Value) -> None:
        """`setattr(config, "use_cache", True)`, `config.update({"use_cache": True})` or
        `config.update(use_cache=True)` on a transformers config or a model's `.config`: each setting
        is stored like `config.use_cache = True`; one the code does not show makes every tracked one unknown."""
        if callee == Ref("builtins.setattr") and len(node.args) == 3 and not any(a.keyword or a.star for a in node.args):
            owner = node.args[0].value
        elif isinstance(node.func, cst.Attribute) and node.func.attr.value == "update" and len([a for a in node.args if not a.keyword]) <= 1:
            owner = node.func.value
        else:
            return
        target = self.evaluate(owner)
        on_model = (dotted(owner) or "").endswith(".config")
        if not (on_model or is_config(target)):
            return
        if isinstance(node.func, cst.Attribute) and owner is node.func.value:
            given = self.dict_from_arguments(node, [a if a.keyword else a.with_changes(star="**") for a in node.args])
            shown, settings = given.complete, given.entries
        else:
            attr = self.evaluate(node.args[1].value)
            shown = isinstance(attr, Const) and isinstance(attr.value, str)
            settings = {attr.value: self.evaluate(node.args[2].value)} if shown else {}  # type: ignore[union-attr]
        if not shown:
            settings = {**{attr: UNKNOWN for attr in tracked_settings(target)}, **({CACHE: UNKNOWN} if on_model else {}), **settings}
        for attr, value in settings.items():
            self.store_attribute(cst.Attribute(value=owner, attr=cst.Name(attr)), value, node)

    def forget_contents(self, receiver: cst.BaseExpression) -> None:
        """A literal list or dict changed after it was built no longer holds what the literal says, nor
        the function's `**kwargs` what its callers passed."""
        if not isinstance(receiver, cst.Name):
            return
        bound = self.scope.bindings.get(receiver.value)
        facts = self.scope.facts
        if isinstance(bound, (Items, DictLit)) or isinstance(bound, Param) and facts is not None and bound.name == facts.star_star:
            self.scope.bindings[receiver.value] = UNKNOWN

    def leave_Del(self, node: cst.Del) -> None:
        targets = [e.value for e in node.target.elements] if isinstance(node.target, (cst.Tuple, cst.List)) else [node.target]
        for target in targets:
            if isinstance(target, cst.Subscript):
                self.forget_contents(target.value)  # `del kwargs["mask"]`

    def mutate_container(self, receiver: cst.BaseExpression, node: cst.CSTNode, method: str, stored: Value) -> None:
        """`x.append(...)`, `x[k] = v`, `x.update(...)` on something that outlives the call."""
        scope = self.scope
        if scope.facts is None or scope.eval_only:
            return
        if isinstance(receiver, cst.Attribute) and isinstance(receiver.value, cst.Name) and receiver.value.value == "self":
            scope.facts.mutations.append(ContainerMutation(node, f"self.{receiver.attr.value}", "self", False, method, stored))
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
            scope.facts.mutations.append(ContainerMutation(node, name, owner, False, method, stored))

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
        walked = dotted(iterable)
        if isinstance(target, cst.Name) and walked is not None and walked.startswith("self."):
            self.scope.held_elements[target.value] = walked

    def iterated(self, iterable: cst.BaseExpression) -> Value:
        value = self.evaluate(iterable)
        if isinstance(value, Param) and LOADER_NAME.search(value.name):
            return DataSource(value.name)
        return value

    def visit_Import(self, node: cst.Import) -> None:
        for alias in node.names:
            name = dotted(alias.name)
            if name is None:
                continue
            if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
                self.scope.bindings[alias.asname.name.value] = Ref(name)
            else:
                for local, target in import_bindings(name):
                    self.scope.bindings[local] = Ref(target)

    def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
        module = dotted(node.module) if node.module else None
        base = absolute_module(self.summary.name, self.summary.is_package, len(node.relative), module)
        if base is None or isinstance(node.names, cst.ImportStar):
            return
        for alias in node.names:
            name = dotted(alias.name)
            local = alias.asname.name.value if alias.asname and isinstance(alias.asname.name, cst.Name) else name
            if name and local:
                self.scope.bindings[local] = self.ref(f"{base}.{name}")

    def leave_Assign(self, node: cst.Assign) -> None:
        value = self.as_computed_here(node.value, self.evaluate(node.value))
        for target in node.targets:
            self.bind_target(target.target, value, node)
            if isinstance(target.target, cst.Name) and self.scope.loop_assigned:
                self.note_fresh(target.target.value, node.value, value)
            bind_model(self, target.target, node.value)
            key = spelled_key(target.target) if isinstance(node.value, cst.Call) else None
            if key is not None:
                self.note_cached_model(key, node.value, value)  # `model = ...` or `self.model = ...`

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
        if isinstance(target, cst.Subscript):
            # `totals[name] += t` / `tracker[name][i] += t`: adds into what the container holds.
            container = target.value
            while isinstance(container, cst.Subscript):
                container = container.value
            self.forget_contents(container)
            self.mutate_container(container, node, "accumulate", increment)
            return
        if not isinstance(target, cst.Attribute):
            self.bind_target(target, join_grad([self.evaluate(target), increment], Spelling("{}", target)), node)
            return
        owner = self.scope.class_qualname
        binding = self.index.attribute(owner, target.attr.value) if owner and is_self(target.value) else None
        if binding is not None and binding.is_buffer:
            self.mutate_container(target, node, "inplace", increment)
        elif isinstance(increment, Items):
            self.mutate_container(target, node, "extend", increment)  # `self.aux += [loss]`
        else:
            # `self.steps += 1` counts calls; `self.total += loss` accumulates a tensor into the module.
            self.store_attribute(target, increment if isinstance(increment, (Const, Tensor)) else UNKNOWN, node)


    # --- calls --------------------------------------------------------------------------------

    def leave_Call(self, node: cst.Call) -> None:
        callee = self.evaluate(node.func)
        self.collect_facts(node, callee)
        self.note_config_update(node, callee)
        self.note_self_setattr(node, callee)
        self.note_model_call(node)
        self.note_hook_registration(node)
        self.note_command_line_option(node)
        targets, bound = self.call_targets(callee)
        if targets:
            arguments = self.arguments(node.args)
            star = next((i for i, a in enumerate(arguments.positional) if a.star), len(arguments.positional))
            positional = tuple(self.evaluate(a.value) for a in arguments.positional[:star])
            keywords = {name: value for name, (value, _, _) in arguments.keywords.items()}
            nodes = {name: spelled for name, (_, spelled, _) in arguments.keywords.items()}
            passed = [*enumerate(arguments.positional[:star]), *nodes.items()]
            states = {key: state for key, arg in passed if isinstance(arg, cst.Arg) and (state := state_of(self, arg.value)) != ModelState()}
            constructs = callee.qualname if isinstance(callee, Ref) and targets[0].endswith(".__init__") and not callee.qualname.endswith(".__init__") else None
            receiver = self.record_receiver(node, callee)
            call = CallRecord(node, positional, keywords, nodes, arguments.has_star_args, arguments.unresolved_kwargs, bound, self.scope.qualname, states, constructs, receiver)
            self.note_call(targets, call)
            self.note_model_handoffs(targets, call, passed)
            self.note_wrapper_call(callee, call)
        if targets or not isinstance(callee, Ref):
            apply_mode_effects(self, node, callee, targets, bound)
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
            owner = self.scope.class_qualname
            if owner is None or not self.index.layers_never_checkpointed(owner):
                self.record(self.hf_layer_site(node, callee))
        elif isinstance(callee, ModuleObject) and (site := self.wrapped_module_site(node, callee)) is not None:
            wrapper_trains_only = site.training_only
            self.record(site)
            site.training_only = site.training_only or wrapper_trains_only

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

    def requires_grad_in_place(self, name: str, node: cst.Call) -> None:
        """`name.requires_grad_(flag)`: a tensor now requires grad (or not). A module freezes or thaws
        its parameters (the index's freezing facts) and stays the module; a parameter may be either,
        and the call hands back the same object, so `return name` still returns the parameter."""
        scope = self.scope
        held = self.lookup(name)
        flag = self.evaluate(node.args[0].value) if node.args else Const(True)
        if isinstance(held, (ModuleObject, Instance)) or not isinstance(flag, Const):
            return
        if isinstance(held, Param):
            scope.in_place[name] = held
        scope.bindings[name] = Tensor(Grad.REQUIRED if flag.value else Grad.NONE, Spelling("`{}`", node))

    def collect_facts(self, node: cst.Call, callee: Value) -> None:
        facts = self.scope.facts
        func = node.func
        if callee == Ref(SET_EARLY_STOP):
            self.switches_early_stop = True
        if isinstance(func, cst.Attribute):
            method = func.attr.value
            receiver = func.value
            if method == "requires_grad_" and isinstance(receiver, cst.Name):
                self.requires_grad_in_place(receiver.value, node)
            if method in LIST_AND_DICT_UPDATES or method in _REMOVALS:
                self.forget_contents(receiver)
            if facts is None:
                return
            if method in TORCH_RNG_METHODS:
                facts.torch_rng.append(Effect(node, f"`{code(func)}()` draws from torch's RNG"))
            elif method in LIST_AND_DICT_UPDATES or method in INPLACE_UPDATES:
                stored = self.evaluate(node.args[-1].value) if node.args else UNKNOWN
                self.mutate_container(receiver, node, method if method in LIST_AND_DICT_UPDATES else "inplace", stored)
            elif isinstance(receiver, cst.Attribute) and is_self(receiver.value) and node.args and not any(a.star or a.keyword for a in node.args):
                # `self.collector.add(loss)`: whether the method keeps it is known once the object is.
                facts.held_calls.append(HeldCall(node, self.evaluate(receiver), method, tuple(self.evaluate(a.value) for a in node.args)))
            if is_self(receiver) and isinstance(callee, LocalFunction):
                facts.method_calls.append(callee.qualname)
        if facts is None:
            return
        if isinstance(callee, ModuleObject):
            facts.module_calls.append(callee)
        elif isinstance(callee, (Param, ElementOf)) and not (isinstance(callee, Param) and callee.name == "self"):
            facts.symbolic_calls.append(callee)
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
            elif (split := self.index.split(name))[0] is not None and split[1] in split[0].functions:
                facts.function_calls.append(name)  # a project function: it runs where this one does
        elif isinstance(callee, LocalFunction) and callee.node is None:
            facts.method_calls.append(callee.qualname)
        for arg in node.args:
            if arg.keyword is not None and arg.keyword.value == "generator":
                facts.unreplayed_rng.append(Effect(node, f"`{code(func)}(..., generator=...)` uses a generator that checkpoint never restores"))

    def call_targets(self, callee: Optional[Value]) -> tuple[tuple[str, ...], bool]:
        """The project functions a call of `callee` runs (a module runs its `forward`), and whether
        they get `self` implicitly."""
        if isinstance(callee, ModuleObject):
            # A module runs its `forward`; an object of a plain class with `__call__` (a checkpoint runner) that.
            runs = (self.index.forward_owner(cls) and "forward" or self.index.method_owner(cls, "__call__") and "__call__" for cls in callee.classes)
            owners = ((self.index.method_owner(cls, method), method) for cls, method in zip(callee.classes, runs) if method)
            return tuple(dict.fromkeys(f"{owner.qualname}.{method}" for owner, method in owners if owner is not None)), True
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

    def record_receiver(self, node: cst.Call, callee: Value) -> Optional[Value]:
        """The object a method of a dataclass-style class (`index.is_record`) is called on, when the
        call spells it (`cfg.ckpt.kwargs()`)."""
        if not (isinstance(callee, LocalFunction) and callee.node is None and isinstance(node.func, cst.Attribute)) or is_self(node.func.value):
            return None
        return self.evaluate(node.func.value) if self.index.is_record(callee.qualname.rpartition(".")[0]) else None

    def note_command_line_option(self, node: cst.Call) -> None:
        if not (isinstance(node.func, cst.Attribute) and node.func.attr.value == "add_argument"):
            return
        parser = self.evaluate(node.func.value)
        added = command_line.option(node, self.evaluate) if is_parser(parser) else None
        if added is not None:
            self.command_line_options.setdefault(id(parser.node), {})[added[0]] = added[1]  # type: ignore[union-attr]

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
        guarded, grad_disabled, eval_only, training_only, gates = self.conditions()
        for target, module in targets:
            self.wrapper_calls.append(
                WrapperCall(
                    target, call, module, grad_disabled,
                    function_scope.qualname if function_scope else None, function_scope.class_qualname if function_scope else None,
                    guarded, eval_only, training_only, gates,
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
        function_scope = next((s for s in reversed(self.scopes) if s.kind in ("function", "lambda")), None)
        site.enclosing_function = function_scope.qualname if function_scope else None
        site.enclosing_class = function_scope.class_qualname if function_scope else None
        site.grad_guarded, site.grad_disabled, site.eval_only, site.training_only, site.gates = self.conditions()
        site.forwarded = function_scope is not None and _handed_in(site.function, function_scope, self.index)
        if site.kind in (ApiKind.CHECKPOINT, ApiKind.SEQUENTIAL) and function_scope is not None:
            site.callee_frozen = self.frozen_callee(site, function_scope.class_qualname)
        self.sites.append(site)
        if site.kind is not ApiKind.HF_TRAINING_ARGS:  # TrainingArguments evaluate to the object a Trainer is handed
            self.call_values[id(site.call)] = self.checkpoint_output(site)
        if site.kind.runs_checkpoint and site.kind is not ApiKind.WRAPPED_MODULE_CALL:  # that call was noted as it is spelled
            self.note_checkpointed_call(site)

    def frozen_callee(self, site: CheckpointSite, owner: Optional[str]) -> Optional[str]:
        """How the module a checkpoint runs is frozen whole, when it is a submodule of `self` (or an
        element of one): `checkpoint_sequential(self.backbone, ...)`, `for blk in self.blocks: checkpoint(blk, ...)`."""
        function = site.function
        if isinstance(function, ModuleObject) and function.path and function.origin.removeprefix("an element of ").startswith("self."):
            attr, classes = function.path[0][1], function.classes
        else:
            spelled = next((arg.value for arg in site.call.args if not arg.keyword), None)
            if not (isinstance(spelled, cst.Attribute) and isinstance(spelled.value, cst.Name) and spelled.value.value == "self"):
                return None
            attr, classes = spelled.attr.value, function.classes if isinstance(function, ModuleObject) else ()
        return self.flow.frozen(owner, ModuleObject(classes, f"self.{attr}")) or None

    def conditions(self) -> tuple[bool, Optional[GradContext], bool, bool, Optional[tuple[str, ...]]]:
        """What the code here runs under: a grad guard, the grad context (none under a guard), only
        in eval mode, only in train mode, and the module flags the enclosing `if`s require."""
        scope = self.scope
        guarded = scope.grad_guards > 0
        gates = None if None in scope.gates else tuple(dict.fromkeys(g for gates in scope.gates for g in gates))  # type: ignore[union-attr]
        return guarded, None if guarded else scope.grad_disabled(), scope.eval_only > 0, scope.training_only > 0, gates

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


def _links_to_a_graph(value: Value) -> bool:
    """A tensor known to carry autograd history (not a leaf), here or inside a literal tuple or list.
    Values the analysis cannot tell (a parameter, a size) do not count: this only clears findings."""
    if isinstance(value, Items):
        return any(map(_links_to_a_graph, value.values))
    carrier = grad_on_some_path(value)
    if carrier is not None:
        return not carrier.leaf
    return isinstance(value, Tensor) and value.grad is Grad.UNKNOWN and not value.leaf


def _handed_in(function: Optional[Value], scope: "Scope", index: ProjectIndex) -> bool:
    """Whether a checkpointed callable is what the enclosing function was handed: one of its
    parameters (or a partial of one), the module itself in `__call__`, or a module handed to the
    constructor and held (`self.module = module`). A top-level model holding one is no wrapper: its
    forward gets data from outside whoever calls it, and the module it holds is what its
    constructions pass, so the checkpoint is a site of its own where it is written."""
    if isinstance(function, Partial):
        function = function.func
    if not isinstance(function, Param):
        return False
    if function.function == scope.qualname:
        return function.name != "self" or scope.method == "__call__"
    return scope.class_qualname is not None and function.function.endswith(".__init__") and not index.is_top_level_model(scope.class_qualname)


def build_file_model(
    tree: cst.Module, path: str, summary: ModuleSummary, index: ProjectIndex, versions: LibraryVersions, settings: Settings
) -> FileModel:
    builder = ModelBuilder(summary, index, versions, settings)
    _bind_module_constants(builder, tree)
    builder.module_functions = {f"{summary.name}.{s.name.value}": s for s in tree.body if isinstance(s, cst.FunctionDef)}
    builder.walk(tree)
    return FileModel(
        path, summary.name, tree, builder.sites, versions, index, settings,
        builder.functions, builder.lambdas, builder.runtime_attrs, builder.cache_uses, builder.calls,
        builder.wrapper_calls, grad_free_calls=builder.grad_free_calls, parameter_generates=builder.parameter_generates, switches_early_stop=builder.switches_early_stop,
        hooks=builder.finish_hooks(),
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

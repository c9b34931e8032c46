"""Checkpoint sites from the calls that make them: torch's checkpoint functions and wrappers,
project and hand-written checkpoints, transformers' checkpoint function, layers, enable calls and
TrainingArguments; the mode and RNG setting each one runs with."""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Callable, Optional, Sequence

import libcst as cst

from ckptlint.model.apis import (
    CHECKPOINT_IMPL_REENTRANT,
    CHECKPOINT_WRAPPER,
    CONTROL_KEYWORDS,
    HF_ENABLE_METHODS,
    HF_TRAINING_ARGUMENTS,
    HF_TRAINING_FLAGS,
    KNOWN_APIS,
    WRAP_POLICY_CLASSES,
    CheckpointApi,
)
from ckptlint.model.evaluation import passed_to
from ckptlint.model.model_states import model_key
from ckptlint.model.modes import hf_kwargs_mode, hf_preserve_rng_state
from ckptlint.model.scope import CallArguments
from ckptlint.model.shapes import free_names
from ckptlint.model.sites import ApiKind, CheckpointSite, FlagStatus, Mode
from ckptlint.model.torch_knowledge import SEQUENTIALS
from ckptlint.model.values import (
    ELEMENT,
    UNKNOWN,
    Const,
    DictLit,
    Instance,
    Items,
    Lambda,
    LocalFunction,
    ModuleObject,
    Partial,
    Ref,
    Unknown,
    Value,
    code,
    literal_value,
)
from ckptlint.versions import torch_default_reentrant, transformers_default_reentrant


_SEQUENCES = tuple(Ref(f"builtins.{name}") for name in ("tuple", "set", "frozenset", "list"))


def _is_name(node: cst.BaseExpression, name: str) -> bool:
    return isinstance(node, cst.Name) and node.value == name


def _is_docstring(statement: cst.BaseStatement) -> bool:
    return isinstance(statement, cst.SimpleStatementLine) and len(statement.body) == 1 and isinstance(statement.body[0], cst.Expr) and isinstance(statement.body[0].value, (cst.SimpleString, cst.ConcatenatedString))


class SiteConstruction:
    """Mixed into ModelBuilder: evaluates with its scopes and index."""

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
        reaching = reaching_keywords(arguments)
        wrapper = self.wrapper_fn(arguments) if api.kind is ApiKind.APPLY_WRAPPER else None
        preserve, preserve_node = self.flag(wrapper[1] if wrapper else arguments, "preserve_rng_state")
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
            early_stop=self.flag(wrapper[1] if wrapper else arguments, "early_stop")[0],
            rng_not_replayed=unreplayed,
            keyword_values=tuple(self.evaluate(a.value) for a in reaching),
            captured=self.captured(function),
            callee_has_parameters=self.flow.has_parameters(function.classes) if isinstance(function, ModuleObject) else None,
            mode_value=arguments.keywords["use_reentrant"][0] if "use_reentrant" in arguments.keywords else None,
            preserve_rng_value=arguments.keywords["preserve_rng_state"][0] if "preserve_rng_state" in arguments.keywords else None,
            spread_value=arguments.spread,
            **self.positional_inputs(inputs),
        )

    def positional_inputs(self, inputs: Sequence[cst.Arg]) -> dict[str, Any]:
        """The site's positional input values, a `*args` whose elements the code shows (`*(x, mask)`,
        `*inputs` bound to a tuple) spliced in place; the spreads left unknown as `star_values`."""
        values: list[Value] = []
        stars: list[Value] = []
        for arg in inputs:
            value = self.evaluate(arg.value)
            if arg.star == "*" and isinstance(value, Items) and not stars:
                values.extend(value.values)
            elif arg.star == "*":
                stars.append(value)
            elif not arg.star:
                values.append(value)
        return {"input_values": tuple(values), "star_values": tuple(stars), "has_star_args": bool(stars) or any(a.star == "**" for a in inputs)}

    def captured(self, function: Optional[Value]) -> dict[str, Value]:
        """Values a lambda or closure reads from the enclosing scope, as they are at the call."""
        if isinstance(function, Lambda):
            body, params = function.node.body, {p.name.value for p in function.node.params.params}
        elif isinstance(function, LocalFunction) and function.node is not None:
            body, params = function.node.body, {p.name.value for p in function.node.params.params}
        else:
            return {}
        names = free_names(body) - params
        closure = dict(function.closure) if isinstance(function, LocalFunction) else {}
        return {name: value for name in sorted(names) if not isinstance(value := closure[name] if name in closure else self.lookup(name), Unknown)}

    def flag(self, arguments: CallArguments, keyword: str) -> tuple[Optional[bool], Optional[cst.CSTNode]]:
        """A boolean control keyword of torch's checkpoint (`preserve_rng_state`, `early_stop`: both
        True by default) and where it is spelled; None when it is not known."""
        if keyword not in arguments.keywords:
            return (None if arguments.unresolved_kwargs else True), None
        value, node, _ = arguments.keywords[keyword]
        return (value.value if isinstance(value, Const) and isinstance(value.value, bool) else None), node

    def wrapper_fn(self, arguments: CallArguments) -> Optional[tuple[CheckpointApi, CallArguments]]:
        """apply_activation_checkpointing's `checkpoint_wrapper_fn` (checkpoint_wrapper by default)
        and the arguments it binds; None when it is not a known wrapper."""
        if "checkpoint_wrapper_fn" not in arguments.keywords:
            return KNOWN_APIS[CHECKPOINT_WRAPPER], self.arguments(())
        inner_api, bound = self.match_api(arguments.keywords["checkpoint_wrapper_fn"][0])
        return (inner_api, self.arguments((), bound)) if inner_api is not None else None

    def wrapped_modules(self, arguments: CallArguments, model: Optional[cst.Arg]) -> Optional[Value]:
        """The submodules apply_activation_checkpointing wraps: the classes its `auto_wrap_policy`
        names, or those `check_fn` tests with isinstance; every submodule with neither."""
        if "auto_wrap_policy" in arguments.keywords:
            classes = self.policy_classes(arguments.keywords["auto_wrap_policy"][0])
            how = "auto_wrap_policy"
        elif "check_fn" in arguments.keywords:
            tested = self.selection_test(arguments.keywords["check_fn"][0])
            classes = self.selected_classes(*tested) if tested is not None else None
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

    def selection_test(self, check: Value) -> Optional[tuple[cst.BaseExpression, str, dict[str, Value]]]:
        """(test, module parameter, arguments a partial binds) of a `check_fn`: a one-parameter
        lambda, or a `def` (nested, or module-level in this file) whose body after a docstring is a
        single `return`, possibly through `functools.partial(is_layer, classes=(Block,))`."""
        bound: dict[str, Value] = {}
        if isinstance(check, Partial):
            function = self.definition(check.func)
            if function is None or any(a.star for a in check.args) or check.spread is not None:
                return None
            params = [p.name.value for p in (*function.params.posonly_params, *function.params.params)]
            bound = {**dict(zip(params, check.arg_values)), **check.keywords}
            check = LocalFunction("", function)
        if isinstance(check, Lambda):
            params = check.node.params.params
            return (check.node.body, params[0].name.value, {}) if len(params) == 1 else None
        function = self.definition(check)
        if function is None or not isinstance(function.body, cst.IndentedBlock):
            return None
        body = list(function.body.body)
        if body and _is_docstring(body[0]):
            body = body[1:]
        free = [p.name.value for p in (*function.params.posonly_params, *function.params.params) if p.name.value not in bound]
        returned = body[0].body[0] if len(body) == 1 and isinstance(body[0], cst.SimpleStatementLine) and len(body[0].body) == 1 else None
        if not isinstance(returned, cst.Return) or returned.value is None or not free:
            return None
        return returned.value, free[0], bound

    def definition(self, function: Value) -> Optional[cst.FunctionDef]:
        """The `def` of a nested function, or of a function defined at this file's top level."""
        if isinstance(function, LocalFunction):
            return function.node
        if isinstance(function, Ref):
            return self.module_functions.get(function.qualname)
        return None

    def selected_classes(self, test: cst.BaseExpression, param: str, bound: dict[str, Value]) -> Optional[tuple[str, ...]]:
        """The classes a test of the module `param` accepts: `isinstance(m, Block)` (a class or a
        tuple of them), `type(m) in {A, B}`, `type(m) is A`; an `or` of such tests accepts the union,
        an `and` with one of them at most its classes (wrapped_modules.py reads the same in the index)."""
        if isinstance(test, cst.BooleanOperation):
            left, right = self.selected_classes(test.left, param, bound), self.selected_classes(test.right, param, bound)
            if isinstance(test.operator, cst.Or):
                return None if left is None or right is None else tuple(dict.fromkeys(left + right))
            if left is None or right is None:
                return left if right is None else right
            return tuple(c for c in left if c in right)
        if (
            isinstance(test, cst.Call) and self.evaluate(test.func) == Ref("builtins.isinstance") and len(test.args) == 2
            and _is_name(test.args[0].value, param)
        ):  # fmt: skip
            return self.module_classes(self.named(test.args[1].value, bound))
        if (
            isinstance(test, cst.Comparison) and len(test.comparisons) == 1 and isinstance(test.left, cst.Call)
            and self.evaluate(test.left.func) == Ref("builtins.type") and len(test.left.args) == 1 and _is_name(test.left.args[0].value, param)
        ):  # fmt: skip
            target = test.comparisons[0]
            value = self.named(target.comparator, bound)
            if isinstance(target.operator, cst.In) or isinstance(target.operator, (cst.Is, cst.Equal)) and isinstance(value, Ref):
                return self.module_classes(value)
        return None

    def named(self, node: cst.BaseExpression, bound: dict[str, Value]) -> Value:
        """What names the classes: a partial's bound argument, `tuple(layer_classes)`, or the value."""
        if isinstance(node, cst.Name) and node.value in bound:
            return bound[node.value]
        if isinstance(node, cst.Call) and len(node.args) == 1 and not node.args[0].keyword and not node.args[0].star:
            if self.evaluate(node.func) in _SEQUENCES:
                return self.named(node.args[0].value, bound)
        return self.evaluate(node)

    def module_classes(self, value: Value) -> Optional[tuple[str, ...]]:
        """Module classes named by a class, or a tuple, list or set of them."""
        if isinstance(value, Items):
            parts = [self.module_classes(v) for v in value.values]
            return None if not parts or any(p is None for p in parts) else tuple(dict.fromkeys(c for p in parts for c in p))
        if isinstance(value, Ref) and (self.index.class_(value.qualname) is not None or value.qualname.startswith("torch.nn.")):
            return (value.qualname,)
        return None

    def mode(self, api: CheckpointApi, arguments: CallArguments) -> Mode:
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
            # A flag read from elsewhere (`settings.USE_REENTRANT`, a parameter) says where it came from.
            literal = isinstance(node, cst.Arg) and isinstance(node.value, cst.Name) and node.value.value in ("True", "False")
            named = known is not None and status is FlagStatus.EXPLICIT and isinstance(node, cst.Arg) and not literal
            how = f"`{code(node.value)}`, {status.value}" if named else status.value  # type: ignore[union-attr]
            return Mode(known, status, f"{spelled} ({how})", node)
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

    def checkpoint_fn_mode(self, arguments: CallArguments) -> Mode:
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
        reaching = reaching_keywords(arguments)
        return CheckpointSite(
            ApiKind.HF_FUNC, "self._gradient_checkpointing_func", node, mode, function, inputs, reaching,
            captured=self.captured(function), keyword_values=tuple(self.evaluate(a.value) for a in reaching), **self.positional_inputs(inputs),
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

    def wrapped_module_site(self, node: cst.Call, module: ModuleObject) -> Optional[CheckpointSite]:
        """A call of a module that checkpoint_wrapper (or apply_activation_checkpointing) wraps
        somewhere in the project: it runs torch's checkpoint on its arguments, in the wrapper's mode.
        Under CheckpointImpl.REENTRANT the wrapper packs keyword arguments into positional checkpoint
        inputs (torch 2.13's checkpoint_wrapper.py), so they count as inputs; otherwise they reach
        torch's checkpoint as keywords."""
        # The attribute holding it was assigned a wrapper (whatever the module's class, torch's own too).
        held = self.index.held_wraps(*module.path[-1]) if module.path and module.path[-1][1] != ELEMENT[1] else []
        if not held and module.container in SEQUENTIALS and len(module.classes) == 1:
            # `self.blocks(x)` of `nn.Sequential(*[Block(d) for ...])`: the first block gets the input.
            module = replace(module, container=None, origin=f"{module.origin}[0]")
        if held:
            wraps, found = {}, held
        elif module.container or not module.classes:
            return None
        else:
            wraps = {cls: self.index.activation_wraps(cls) for cls in module.classes}
            found = [(path, wrap) for per_class in wraps.values() for path, wrap in per_class]
        if not found:
            return None
        modes = {(wrap.reentrant, wrap.packs_keywords) for _, wrap in found}
        preserves = {wrap.preserve_rng_state for _, wrap in found}
        # A class some of whose instances may go unwrapped, or wraps that disagree: the mode is unknown.
        reentrant, packs = modes.pop() if len(modes) == 1 and all(wraps.values()) else (None, False)
        path, wrap = found[0]
        self.index.cited.add(path)
        where = f"{wrap.how} wraps {wrap.describe()} with {wrap.impl} ({path}:{wrap.line})"
        if reentrant is None:
            where += ", but other wraps of its class differ or some of its instances may be unwrapped"
        mode = Mode(reentrant, FlagStatus.FIXED, where)
        arguments = self.arguments(node.args)
        keywords = tuple(n for (_, n, status) in arguments.keywords.values() if status is FlagStatus.EXPLICIT and isinstance(n, cst.Arg))
        positional = tuple(self.evaluate(a.value) for a in arguments.positional if not a.star)
        if packs:
            inputs, reaching = arguments.positional + keywords, ()
            input_values = positional + tuple(value for value, _, _ in arguments.keywords.values())
        else:
            inputs, reaching, input_values = arguments.positional, keywords, positional
        return CheckpointSite(
            ApiKind.WRAPPED_MODULE_CALL, CHECKPOINT_WRAPPER, node, mode, module, inputs, reaching,
            preserve_rng_state=preserves.pop() if len(preserves) == 1 else None,
            input_values=input_values,
            keyword_values=tuple(self.evaluate(a.value) for a in reaching),
            has_star_args=arguments.has_star_args or arguments.unresolved_kwargs,
            callee_has_parameters=self.flow.has_parameters(module.classes),
            training_only=all(wrap.training_only for _, wrap in found),  # a decorator's `if self.training:`
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
        holder = self.holder_of(node.func.value) if isinstance(node.func, cst.Attribute) else None
        key = model_key(self, node.func.value) if isinstance(node.func, cst.Attribute) else None
        if key is not None:
            self.scope.checkpointed_models.setdefault(key, node)
        preserve, preserve_node = hf_preserve_rng_state(value, kwargs_node)
        return CheckpointSite(
            ApiKind.HF_ENABLE, method, node, mode, None, preserve_rng_state=preserve, preserve_rng_node=preserve_node,
            kwargs_value=value, kwargs_node=kwargs_node, receiver=receiver, receiver_holder=holder,
        )  # fmt: skip

    def holder_of(self, target: cst.BaseExpression) -> Optional[tuple[Value, str]]:
        """For `name.a.b` (not `self`): what `name` holds and the path `a.b`."""
        path = []
        while isinstance(target, cst.Attribute):
            path.append(target.attr.value)
            target = target.value
        if not path or not isinstance(target, cst.Name) or target.value in ("self", "cls"):
            return None
        return self.evaluate(target), ".".join(reversed(path))

    def training_arguments_site(self, node: cst.Call) -> Optional[CheckpointSite]:
        arguments = self.arguments(node.args)
        return self.training_site(node, lambda name: arguments.keywords[name][:2] if name in arguments.keywords else None)

    def built_training_arguments_site(self, node: cst.Call, builder: str) -> Optional[CheckpointSite]:
        """`args=make_training_args("out")` of a project function (in another file, say) that returns
        `TrainingArguments(...)`: a site at this call, with the keywords the function passes (its
        parameters as this call fills them, else their defaults)."""
        found = self.index.builder_call(builder)
        if found is None or found[0] not in HF_TRAINING_ARGUMENTS or any(a.star for a in node.args):
            return None
        _, (params, defaults, passed) = found

        def handed(described: list) -> Value:
            """What a description of the builder's argument stands for at this call."""
            kind = described[0]
            if kind in ("param", "attr") and described[1] in params:
                _, expression = passed_to(params, (), node, described[1])
                if expression is not None:
                    value = self.evaluate(expression)
                else:
                    value = literal_value(defaults[described[1]], node) if described[1] in defaults else UNKNOWN
                return self.member_of(value, described[2], node) if kind == "attr" else value  # `args.reentrant`
            if kind == "dict":
                return DictLit({key: handed(entry) for key, entry in described[1].items()}, True, node)
            return literal_value(described[1], node) if kind == "const" else UNKNOWN

        def keyword(name: str) -> Optional[tuple[Value, cst.CSTNode]]:
            described = passed.get(name)
            return (handed(described), node) if described is not None else None

        site = self.training_site(node, keyword)
        if site is not None:
            site.notes.append(f"the TrainingArguments are built by `{builder.rsplit('.', 1)[-1]}` ({builder})")
        return site

    def training_site(self, node: cst.Call, keyword: Callable[[str], Optional[tuple[Value, Optional[cst.CSTNode]]]]) -> Optional[CheckpointSite]:
        """A TrainingArguments site from what each keyword holds (`keyword(name)`: value and node, None when not passed)."""
        for flag, kwargs_keyword in HF_TRAINING_FLAGS.items():
            given = keyword(flag)
            if given is None:
                continue
            enabled, flag_node = given
            if enabled == Const(False) or enabled == Const(None):
                continue
            value, kwargs_node = keyword(kwargs_keyword) or (Const(None), None)
            # transformers >= 5.0's Trainer turns an empty dict into None (`gc_kwargs or None`).
            empty_means_none = not transformers_default_reentrant(self.versions.transformers)
            mode = hf_kwargs_mode(value, kwargs_node, kwargs_keyword, self.versions, empty_means_none)
            preserve, preserve_node = hf_preserve_rng_state(value, kwargs_node)
            site = CheckpointSite(
                ApiKind.HF_TRAINING_ARGS, "TrainingArguments", node, mode, None, preserve_rng_state=preserve, preserve_rng_node=preserve_node,
                kwargs_value=value, kwargs_node=kwargs_node, flag_node=flag_node,
            )  # fmt: skip
            if enabled != Const(True):
                site.notes.append(f"`{flag}` is not a literal; assuming it may be True")
            return site
        return None


# Keywords of the checkpoint APIs themselves: they never reach the checkpointed function.
API_KEYWORDS = CONTROL_KEYWORDS | {"function", "functions", "segments", "input", "checkpoint_impl", "checkpoint_wrapper_fn", "check_fn", "auto_wrap_policy"}


def reaching_keywords(arguments: CallArguments) -> tuple[cst.Arg, ...]:
    """Keyword arguments spelled at the call that the checkpoint hands on to the function."""
    return tuple(
        n for name, (_, n, status) in arguments.keywords.items()
        if name not in API_KEYWORDS and status is FlagStatus.EXPLICIT and isinstance(n, cst.Arg)
    )  # fmt: skip

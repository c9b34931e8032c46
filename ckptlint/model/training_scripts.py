"""Training-script facts: which models have checkpointing on, their train/eval mode, caching
spelled for them, Trainers that train them, and models called where autograd is off."""

from __future__ import annotations

from dataclasses import replace
from typing import Optional, Union

import libcst as cst

from ckptlint.model.apis import HF_TRAINERS, LIGHTNING_MODULES, TRAIN_MODE_EVENTS, TRAINER_STEP_METHODS
from ckptlint.model.hf_configs import CACHE, caches, config_argument
from ckptlint.model.model_states import HF_DISABLE_METHODS, flags_set_by_method, keyed_state, model_key, resolved, set_flag, set_state, state_of
from ckptlint.model.scope import Scope
from ckptlint.model.sites import ApiKind, CacheUse, CallRecord, GradFreeCall, ModelHandOff, ModelState, ParameterGenerate
from ckptlint.model.torch_knowledge import MODULE_BASES
from ckptlint.model.values import UNKNOWN, Const, Instance, ModuleObject, Param, Ref, Value
from ckptlint.versions import trainer_sets_use_cache


# Methods of a model that the facts here follow; any other `self.<attr>(...)` calls the attribute.
MODEL_METHODS = frozenset({"train", "eval", "forward", "generate", *HF_DISABLE_METHODS})


class TrainingScriptFacts:
    """Mixed into ModelBuilder: records into its current scope."""

    def finish_cache_uses(self, scope: Scope) -> None:
        """Caching spelled for a model whose checkpointing this scope switches on (in any order)."""
        for model, node, kind, _ in scope.cache_spellings:
            if model in scope.checkpointed_models:
                self.cache_uses.append(CacheUse(node, kind, model, scope.checkpointed_models[model]))

    def note_model_call(self, node: cst.Call) -> None:
        """`model(..., use_cache=True)`, `model.train()`, `model.generate(...)`, `Trainer(model=m, args=a)`
        in training code."""
        scope = self.scope
        func = node.func
        if isinstance(func, cst.Attribute) and func.attr.value == "train":
            # `trainer.train()` returns when training is over: caching turned back on after it is for generation.
            # It leaves the model in train mode with checkpointing on (measured with transformers 5.23 and 4.57.1).
            trainer = self.evaluate(func.value)
            if isinstance(trainer, Instance) and id(trainer.node) in self.trainer_models:
                trained = self.trainer_models[id(trainer.node)]
                scope.trained_models.add(trained)
                set_state(self, trained, ModelState(training=True))
        if isinstance(func, cst.Attribute) and func.attr.value == "add_callback" and node.args:
            trainer = self.evaluate(func.value)
            if isinstance(trainer, Instance):
                self.note_trainer_callbacks(trainer.node, [node.args[0].value])
        if isinstance(func, cst.Attribute):
            self.note_method_call(node, func)
        if isinstance(func, cst.Name):
            key = resolved(scope, func.value)
            self.note_cache_keywords(key, node)
            self.note_grad_free_call(key, node)
            self.note_parameter_run(key, node)
            trainer = self.evaluate(func)
            if isinstance(trainer, Ref) and (trainer.qualname in HF_TRAINERS or self.index.is_subclass(trainer.qualname, HF_TRAINERS)):
                trained = self.note_trainer(node)
                if trained is not None:
                    self.trainer_models[id(node)] = trained
                callbacks = _trainer_arguments(node).get("callbacks")
                if isinstance(callbacks, (cst.List, cst.Tuple)):
                    self.note_trainer_callbacks(node, [e.value for e in callbacks.elements if not isinstance(e, cst.StarredElement)])
                if trainer.qualname not in HF_TRAINERS:
                    self.note_trainer_steps(node, trainer.qualname)

    def note_method_call(self, node: cst.Call, func: cst.Attribute) -> None:
        """`model.train()`, `model.forward(...)`, `model.generate(...)`, `self.policy(...)`, through
        aliases and wrappers that return the same module."""
        scope = self.scope
        key, method = model_key(self, func.value), func.attr.value
        if key == "self" and method not in MODEL_METHODS:
            key = None  # `self.policy(...)`: the attribute is the model called
        if key is None:
            if method in ("train", "eval") and isinstance(func.value, cst.Attribute):
                self.held.note_switched_from_outside(func.value.attr.value)  # `trainer.policy.eval()`
            called = model_key(self, func)
            if called is not None and called.startswith("self."):
                self.note_grad_free_call(called, node)
            return
        if method in ("train", "eval"):
            scope.modes_touched.add(key)  # also `.train(flag)` with a flag not known here
            set_state(self, key, state_of(self, node))
        elif method == "forward":
            self.note_cache_keywords(key, node)
            self.note_grad_free_call(key, node)
            self.note_parameter_run(key, node)
        elif method == "generate" and key in scope.checkpointed_models and scope.model_modes.get(key) is True:
            # transformers checkpoints in training whether or not grad is on, and drops the cache.
            use = CacheUse(node, "generate", key, scope.checkpointed_models[key], after_trainer=key in scope.trained_models)
            self.cache_uses.append(use)
            self.held.relies(self, key, use)
        elif method == "generate" and key not in scope.checkpointed_models and key not in scope.modes_touched:
            self.note_parameter_generate(key, node)
        elif method in HF_DISABLE_METHODS:
            scope.checkpointed_models.pop(key, None)
            self.held.note_disabled(self, key)
        elif (flags := flags_set_by_method(self, node, self.evaluate(func.value), method)) is not None:
            for attr, value in flags.items():
                set_flag(self, key, attr, value)

    def note_parameter_generate(self, name: str, node: cst.CSTNode, kind: str = "generate") -> None:
        """`model.generate(...)` (or a forward's cache keyword) on a parameter of this function that
        nothing here switches: its callers' mode and checkpointing decide (`caller_modes.handed_generates`)."""
        scope = self.scope
        value = self.lookup(name)
        if not (scope.kind == "function" and name not in scope.modes_touched and isinstance(value, Param) and value.function == scope.qualname):
            return
        # The parameter itself, or a keyword taken from its `**kwargs` (`policy = kwargs["model"]`).
        if value.name == name or (scope.facts is not None and value.name not in scope.facts.params):
            self.parameter_generates.append(ParameterGenerate(node, name, scope.qualname, value.name, kind))

    def spell_cache(self, model: str, node: cst.CSTNode, kind: str, on_config: bool = True) -> None:
        """Caching spelled for `model` (`on_config`: on its config, which a later `use_cache = False`
        undoes; else for one call), unless its training is over (after `trainer.train()` returned)."""
        if model not in self.scope.trained_models:
            self.scope.cache_spellings.append((model, node, kind, on_config))

    def unspell_cache(self, model: str) -> None:
        """`model.config.use_cache = False`: what its config said before no longer holds."""
        self.scope.cache_spellings = [s for s in self.scope.cache_spellings if s[0] != model or not s[3]]

    def note_cached_model(self, name: str, call: cst.Call, value: Value) -> None:
        """`name = call` building a model that caches: `from_pretrained(..., use_cache=True)` (the
        keyword), `from_pretrained(name, config=config)` / `LlamaForCausalLM(config)` with a config that
        sets `use_cache=True` (the argument handing it over), a project function that returns one (the call)."""
        keyword = next((a for a in call.args if a.keyword and a.keyword.value == CACHE and self.evaluate(a.value) == Const(True)), None)
        callee = self.evaluate(call.func)
        if keyword is not None:
            self.spell_cache(name, keyword, "use_cache")
        elif isinstance(callee, Ref) and self.index.returns_cached_model(callee.qualname):
            self.spell_cache(name, call, "use_cache")  # `model = load_model(name)`
        elif caches(value):
            built = call
            while built is not value.node and isinstance(built.func, cst.Attribute) and isinstance(built.func.value, cst.Call):
                built = built.func.value  # `AutoModel.from_config(config).to(device)`
            built_here = built is value.node and isinstance(value, Instance)
            handed = config_argument(built, value.ctor.rsplit(".", 1)[-1]) if built_here else None  # type: ignore[union-attr]
            self.spell_cache(name, handed or call, "use_cache")

    def note_model_handoffs(self, targets: tuple[str, ...], call: CallRecord, arguments: list[tuple[Union[int, str], cst.CSTNode]]) -> None:
        """Models (by name or `self` attribute) handed to project functions: where autograd is off, a
        call that runs a checkpoint if those functions run the model; elsewhere, a fact of this
        function's summary when it hands on a parameter it was given."""
        scope = self.scope
        disabled = scope.grad_disabled(maybe=True) is not None
        enabling = [t for t in targets if not call.bound and self.index.enables_hf_checkpointing(t)]
        for key, arg in arguments:
            if not isinstance(arg, cst.Arg):
                continue
            if enabling and any(self.index.enables_checkpointing_on(t, key) for t in enabling):
                # `prepare(model)` switching transformers checkpointing on for the model it is handed.
                enabled = model_key(self, arg.value)
                if enabled is not None:
                    scope.checkpointed_models.setdefault(enabled, call.node)
            elif (
                not call.bound and not scope.conditional and (known := model_key(self, arg.value)) in scope.checkpointed_models
                and any(self.index.disables_checkpointing_on(t, key) for t in targets)
            ):  # fmt: skip
                scope.checkpointed_models.pop(known)  # `prepare_for_inference(model)` switching it off
            if not disabled and not (isinstance(arg.value, cst.Name) and arg.value.value in scope.params):
                continue  # with grad on, only a parameter handed on is a fact (note_parameter_run): skip the evaluation
            name = model_key(self, arg.value)
            if name is None:
                continue
            handoff = ModelHandOff(targets, call, key)
            if disabled:
                self.note_grad_free_call(name, call.node, handoff)  # type: ignore[arg-type]
            else:
                self.note_parameter_run(name, handoff)

    def note_parameter_run(self, name: str, run: Union[cst.Call, ModelHandOff]) -> None:
        """A parameter run as a module here (`model(x)`), or handed to a project function, where
        nothing in this function has set its mode or switched grad, nor an `if` decides whether it
        runs: a caller's `no_grad` and the mode it hands the model over in reach it (a fact of the
        function's summary, read by `summaries.Resolver.runs_module`)."""
        scope = self.scope
        facts = scope.facts
        if facts is None or scope.kind != "function" or scope.conditional or not scope.grad_as_called() or name in scope.modes_touched:
            return
        value = self.lookup(name)
        if not isinstance(value, Param) or value.function != scope.qualname or value.name != name:
            return
        if isinstance(run, ModelHandOff):
            facts.hands_params.setdefault(name, []).append(run)
        else:
            facts.runs_params.setdefault(name, run)

    def note_grad_free_call(self, name: str, node: cst.Call, handoff: Optional[ModelHandOff] = None) -> None:
        """A model called where autograd is off (or handed to a project function there): whether its
        forward still checkpoints is decided once the model is complete (`grad_free.grad_free_checkpoints`)."""
        scope = self.scope
        context = scope.grad_disabled(maybe=True)
        if context is None or scope.grad_guards:
            return
        held = name.startswith("self.")
        value = self.self_attribute(name[len("self.") :]) if held else self.lookup(name)
        state = keyed_state(scope, name)
        if name == "self" and scope.class_qualname and self.index.is_subclass(scope.class_qualname, MODULE_BASES | LIGHTNING_MODULES):
            # `self(x)` in a module's own method: the module itself, in eval mode in the Lightning
            # steps run without grad (Lightning calls `.eval()` before those loops), else in a mode
            # the method does not know.
            value = ModuleObject((scope.class_qualname,), "self")
            if context.kind.startswith("Lightning"):
                state = replace(state, training=False)
            self.grad_free_calls.append(GradFreeCall(node, name, value, context, state, None, None, handoff, mode_here=True))
            return
        if not isinstance(value, (ModuleObject, Param)) and state.checkpointing is None:
            return
        function_scope = next((s for s in reversed(self.scopes) if s.kind in ("function", "lambda")), None)
        function = function_scope.qualname if function_scope else None
        # A parameter, or a deep copy of one: its mode comes from the callers; an attribute set from a
        # parameter of `__init__`, from the constructor's callers.
        constructor = f"{scope.class_qualname}.__init__" if held and scope.class_qualname else None
        untouched = state.training is None and name not in scope.modes_touched
        param = value.name if isinstance(value, Param) and value.function in (function, constructor) else None
        call = GradFreeCall(node, name, value, context, state, value.function if param else function, param, handoff, mode_here=not untouched)
        self.grad_free_calls.append(call)
        if held:
            self.held.relies(self, name, call, from_callers=param is not None)

    def note_cache_keywords(self, model: str, node: cst.Call) -> None:
        scope = self.scope
        if model.startswith("self."):
            return  # caching for a model held on an attribute: its mode is rarely known where it is spelled
        training = scope.model_modes.get(model)
        # transformers drops the cache whenever the model is in train mode, grad or not; code under
        # no_grad with no `.train()` in sight is taken for evaluation.
        if training is False or (training is None and scope.grad_disabled() is not None):
            return
        for arg in node.args:
            name = arg.keyword.value if arg.keyword else None
            value = self.evaluate(arg.value) if name else None
            kind = "use_cache" if name == "use_cache" and value == Const(True) else "past_key_values" if name in ("past_key_values", "past_key_value") and value != Const(None) else None
            if kind is None:
                continue
            self.spell_cache(model, arg, kind, on_config=False)
            if training is None and model not in scope.checkpointed_models:
                self.note_parameter_generate(model, arg, kind)  # a model handed in: its callers tell

    def note_trainer(self, node: cst.Call) -> Optional[str]:
        """`Trainer(model, args, ...)` (or by keyword) with checkpointing TrainingArguments: the
        Trainer enables checkpointing on that model when it trains. Returns the model's name."""
        arguments = _trainer_arguments(node)
        model, args = arguments.get("model"), arguments.get("args")
        if not isinstance(model, (cst.Name, cst.Call)) or args is None:
            return None
        training = self.evaluate(args)
        if isinstance(training, Instance) and training.ctor in self.functions:
            training = self.functions[training.ctor].returns  # `Trainer(model, make_arguments())`
        site = next((s for s in self.sites if s.kind is ApiKind.HF_TRAINING_ARGS and isinstance(training, Instance) and s.call is training.node), None)
        if site is None and isinstance(training, Instance) and isinstance(args, cst.Call) and training.node is args:
            site = self.built_training_arguments_site(args, training.ctor)  # `args=make_training_args("out")`
            if site is not None:
                self.sites.append(site)
        if site is None:
            return None
        self.trainer_checkpointing[id(node)] = site.call
        if site.receiver is None:
            function_scope = next((s for s in reversed(self.scopes) if s.kind == "function"), None)
            site.receiver, site.trainer_function = self.evaluate(model), function_scope.qualname if function_scope else None
        if isinstance(model, cst.Call):
            return None  # `Trainer(model=build_model(), ...)`: no name for later code to use it by
        self.scope.checkpointed_models.setdefault(model.value, site.call)
        if trainer_sets_use_cache(self.versions.transformers):
            # The Trainer replaces the config's `use_cache` with its arguments' (False unless they say so).
            self.unspell_cache(model.value)
            setting = next((a for a in site.call.args if a.keyword and a.keyword.value == "use_cache"), None) if isinstance(site.call, cst.Call) else None
            if setting is not None and self.evaluate(setting.value) == Const(True):
                self.spell_cache(model.value, setting, "use_cache")
        return model.value

    def trained_with_checkpointing(self, trainer: cst.Call) -> Optional[tuple[cst.BaseExpression, cst.CSTNode]]:
        """(the model, where its checkpointing is switched on) for a Trainer that trains with checkpointing on."""
        model = _trainer_arguments(trainer).get("model")
        checkpointing = self.trainer_checkpointing.get(id(trainer))
        if checkpointing is None and isinstance(model, cst.Name):
            checkpointing = self.scope.checkpointed_models.get(model.value)  # switched on before the Trainer
        return (model, checkpointing) if model is not None and checkpointing is not None else None

    def note_trainer_callbacks(self, trainer: cst.Call, callbacks: list[cst.BaseExpression]) -> None:
        """Callbacks handed to a Trainer that trains with checkpointing on (`callbacks=[...]`,
        `trainer.add_callback(cb)`): it calls their train-time events with its model in train mode
        (`TRAIN_MODE_EVENTS`), recorded as calls of those methods so the model's state reaches them
        as any caller's does (`caller_modes.handed_generates`)."""
        trained = self.trained_with_checkpointing(trainer)
        if trained is None:
            return
        handed = {"model": self.evaluate(trained[0])}
        state: dict[Union[int, str], ModelState] = {"model": ModelState(training=True, checkpointing=trained[1])}
        for callback in callbacks:
            value = self.evaluate(callback)
            cls = value.ctor if isinstance(value, Instance) else value.classes[0] if isinstance(value, ModuleObject) and len(value.classes) == 1 else None
            for event in TRAIN_MODE_EVENTS if cls is not None else ():
                owner = self.index.method_owner(cls, event)
                if owner is not None:
                    # The Trainer passes `args, state, control` by position and the rest by keyword.
                    call = CallRecord(callback, (UNKNOWN,) * 3, handed, {}, False, True, True, self.scope.qualname, state, event=event)
                    self.note_call((f"{owner.qualname}.{event}",), call)

    def note_trainer_steps(self, trainer: cst.Call, cls: str) -> None:
        """A project Trainer subclass built to train with checkpointing on: the Trainer calls its
        `training_step(model, inputs)` and `compute_loss(model, inputs)` with its model in train mode
        (both run inside `train()`'s step, after `model.train()`), recorded as calls of the methods
        the subclass defines."""
        trained = self.trained_with_checkpointing(trainer)
        if trained is None:
            return
        handed = (self.evaluate(trained[0]), UNKNOWN)
        state: dict[Union[int, str], ModelState] = {0: ModelState(training=True, checkpointing=trained[1])}
        for step in TRAINER_STEP_METHODS:
            owner = self.index.method_owner(cls, step)
            if owner is not None:
                call = CallRecord(trainer, handed, {}, {}, False, True, True, self.scope.qualname, state, event=step)
                self.note_call((f"{owner.qualname}.{step}",), call)


def _trainer_arguments(node: cst.Call) -> dict[str, cst.BaseExpression]:
    """A Trainer's arguments by name: `model` and `args` may come first by position."""
    positional = [a.value for a in node.args if a.keyword is None and not a.star]
    return {**dict(zip(("model", "args"), positional)), **{a.keyword.value: a.value for a in node.args if a.keyword}}

"""Values that depend on a function's parameters, resolved from the calls the project makes.

The LibCST pass leaves a parameter's value open (`Param`, and values computed from one:
`Derived`, `ElementOf`, `AttributeOf`, `CallOf`, `OneOf`) and records every call of a project
function or module with its arguments (`CallRecord`). Here a parameter takes the value its known
callers pass, when they agree; recursively through the callers' own parameters, bounded and
memoised. When no caller is known, or callers disagree, the parameter stays open: rules treat it
as unknown, as before, so no guess becomes a finding.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Callable, Optional, Union

import libcst as cst

from ckptlint.model.construction import object_fields
from ckptlint.model.dataflow import Dataflow, entry_value, tensor_attribute
from ckptlint.model.apis import CONTROL_KEYWORDS, HF_ENABLE_METHODS, KNOWN_APIS
from ckptlint.model.sites import ApiKind, CallRecord, CheckpointSite, FlagStatus, FunctionFacts, Mode, ModelHandOff, WrapperCall
from ckptlint.model.modes import hf_kwargs_mode, hf_preserve_rng_state
from ckptlint.model.shapes import free_names
from ckptlint.versions import torch_default_reentrant, transformers_default_reentrant
from ckptlint.model.values import (
    SYMBOLIC,
    UNKNOWN,
    AttributeOf,
    CallOf,
    Const,
    Defaulted,
    Derived,
    DictLit,
    ElementOf,
    Grad,
    Instance,
    ItemOf,
    Items,
    LocalFunction,
    ModuleObject,
    OneOf,
    Param,
    ParsedArgs,
    Partial,
    Ref,
    Tensor,
    Unknown,
    Value,
    checkpoint_argument,
    code,
    defaulted,
    element_of,
    grad_on_some_path,
    item_of,
    join_grad,
    merge,
    same_object,
)

if TYPE_CHECKING:
    from ckptlint.model.file_model import FileModel
    from ckptlint.model.regions import RegionPart

# How many callers up a value is followed, and how many calls of one function are read.
_MAX_DEPTH = 4
_MAX_CALLS = 32

Callers = Callable[[str], Optional[list[tuple["FileModel", CallRecord]]]]


class Resolver:
    """Resolves parameter-dependent values for one analysis (memoised per parameter)."""

    def __init__(self, model: "FileModel", callers: Callers) -> None:
        self.model = model
        self.callers = callers
        self.flow = Dataflow(model.index)
        self.memo: dict[tuple[str, str], Value] = {}
        self.active: set[tuple[str, str]] = set()
        self.runs_memo: dict[tuple[str, str], Optional[ModuleRun]] = {}
        self.running: set[tuple[str, str]] = set()

    # --- sites ------------------------------------------------------------------------------

    def sites(self) -> list[CheckpointSite]:
        """Every site of the model resolved, and one more for each call of a checkpoint wrapper and
        of a function that enables transformers checkpointing on a model it is handed."""
        made = [made for call in self.model.wrapper_calls for made in self.instantiate(call, 0)]
        return [self.site(site) for site in [*self.model.sites, *made]] + self.enabled_by_calls()

    def enabled_by_calls(self) -> list[CheckpointSite]:
        """`def setup(model): model.gradient_checkpointing_enable(...)`: each call of `setup` enables
        checkpointing on what that call hands it, there, in the caller's function (where the model
        was built and maybe frozen). The helper's own site keeps its open receiver."""
        made = []
        for target, calls in self.model.calls.items():
            if not self.model.index.enables_hf_checkpointing(target):
                continue
            module, _ = self.model.index.split(target)
            owner = self.model.model_for(module.name, target) if module is not None else None
            facts = owner.functions.get(target) if owner is not None else None
            if owner is None or facts is None:
                continue
            for site in owner.sites:
                receiver = site.receiver
                if site.kind is not ApiKind.HF_ENABLE or site.enclosing_function != target or not isinstance(receiver, Param):
                    continue
                if receiver.function != target or receiver.name == "self":
                    continue
                enabled = self.site(site)
                for call in calls:
                    handed = self.handed_back(self.value(bind(facts, call, receiver.name)))
                    made.append(replace(enabled, call=call.node, receiver=handed, enclosing_function=call.caller, enclosing_class=None, wrapper=target))
        return made

    def instantiate(self, wrapper: WrapperCall, depth: int) -> list[CheckpointSite]:
        """The sites a call of a checkpoint wrapper runs: the wrapper's own sites (and those of the
        wrappers it calls in turn) with its parameters bound to the call's arguments."""
        if depth >= _MAX_DEPTH:
            return []
        module, _ = self.model.index.split(wrapper.target)
        owner = self.model.model_for(module.name, wrapper.target) if module is not None else None
        facts = owner.functions.get(wrapper.target) if owner is not None else None
        if owner is None or facts is None:
            return []
        inner = [site for site in owner.sites if site.forwarded and site.enclosing_function == wrapper.target]
        for nested in owner.wrapper_calls:
            if nested.enclosing_function == wrapper.target:
                inner.extend(self.instantiate(nested, depth + 1))
        binding = _Binding(facts, wrapper.call, wrapper)
        return [binding.site(site) for site in inner]

    def site(self, site: CheckpointSite) -> CheckpointSite:
        """The site with its callable, mode and (when the mode is reentrant, the only case where
        their values matter) its inputs resolved. A wrapper's own site keeps what it was handed:
        each call of the wrapper is a site of its own, with the caller's values."""
        changes: dict = {}
        if isinstance(site.spread_value, SYMBOLIC):
            spread = self.value(site.spread_value)
            if isinstance(spread, DictLit):
                changes.update(self.spread(site, spread))
        if isinstance(site.mode_value, SYMBOLIC):
            flag = self.value(site.mode_value)
            if isinstance(flag, Const) and isinstance(flag.value, bool):
                mode = site.mode
                changes["mode"] = Mode(flag.value, mode.flag, f"use_reentrant={flag.value} (the value every call of `{_short(site.enclosing_function)}` passes)", mode.node)
        if isinstance(site.preserve_rng_value, SYMBOLIC):
            flag = self.value(site.preserve_rng_value)
            if isinstance(flag, Const) and isinstance(flag.value, bool):
                changes["preserve_rng_state"] = flag.value
        if site.kind in (ApiKind.HF_ENABLE, ApiKind.HF_TRAINING_ARGS) and _open(site.kwargs_value):
            changes.update(self.hf_kwargs(site))
        if isinstance(site.receiver, Instance) and site.receiver.checkpoint_from is not None:
            # `def load(name): model = AutoModel...from_pretrained(name)`: the name its callers pass.
            named = self.value(site.receiver.checkpoint_from)
            if isinstance(named, Const) and isinstance(named.value, str):
                changes["receiver"] = replace(site.receiver, checkpoint=named.value, checkpoint_from=None)
        elif isinstance(site.receiver, ModuleObject) and site.receiver.built_by is not None and site.kind is ApiKind.HF_ENABLE:
            changes.update(self.loaded_by_init(site.receiver))
        if site.forwarded:
            return replace(site, **changes) if changes else site
        function = self.value(site.function) if site.function is not None else None
        made = self.factory_closure(function) if isinstance(function, Instance) and not site.captured else None
        if made is not None:
            function, captured = made  # `checkpoint(create_custom_forward(layer, memory=h), ...)` of another file's factory
            site = replace(site, captured=captured)
        if function is not site.function:
            changes["function"] = function
            if isinstance(function, ModuleObject):
                changes["callee_has_parameters"] = self.flow.has_parameters(function.classes)
        if isinstance(function, ModuleObject) and function.built_by is not None and changes.get("preserve_rng_state", site.preserve_rng_state) is False:
            # Only a region whose RNG is not replayed asks which dropout draws (CKPT002); resolving
            # the arguments through every construction of the class doubled a cold transformers run.
            changes["built_with"] = self.built_with(function)
        if (changes.get("mode") or site.mode).reentrant is not False:
            changes["input_values"] = tuple(self.value(v) for v in site.input_values)
            changes["keyword_values"] = tuple(self.value(v) for v in site.keyword_values)
            changes["captured"] = {name: self.value(v) for name, v in site.captured.items()}
        return replace(site, **changes) if changes else site

    def factory_closure(self, made: Instance) -> Optional[tuple[LocalFunction, dict[str, Value]]]:
        """What a call of a project function (of another file: this file's own are read where they
        are called) that returns the closure it defines hands back: that closure, and what it
        captures of the factory's parameters, bound to the call's arguments (`**extra` to the
        keywords the factory does not name)."""
        facts = self.facts(made.ctor)
        closure = facts.returns if facts is not None else None
        if not (isinstance(closure, LocalFunction) and isinstance(closure.node, cst.FunctionDef)):
            return None
        call = next((c for c in self.model.calls.get(made.ctor, ()) if c.node is made.node), None)
        if call is None:
            return None
        inner = closure.node.params
        own = {p.name.value for p in (*inner.params, *inner.kwonly_params, *inner.posonly_params)}
        own |= {p.name.value for p in (inner.star_arg, inner.star_kwarg) if isinstance(p, cst.Param)}
        params = {*facts.params, *(p for p in (facts.star, facts.star_star) if p)}
        captured = {name: self.value(bind(facts, call, name)) for name in sorted((free_names(closure.node.body) - own) & params)}
        return closure, {name: value for name, value in captured.items() if not isinstance(value, Unknown)}

    def loaded_by_init(self, module: ModuleObject) -> dict:
        """`self.model = AutoModel...from_pretrained(name)` in an `__init__` handed `name`: the held
        model with the name every construction of the class passes."""
        found = checkpoint_argument(module)
        if found is None or found[1][0] != "param":
            return {}
        key, param = found[0], found[1][1]
        named = self.built_with(module).get(param)
        if named is None or not isinstance(named.value, str):
            return {}
        return {"receiver": replace(module, arguments=tuple((k, ("const", named.value) if k == key else d) for k, d in module.arguments or ()))}

    def built_with(self, module: ModuleObject) -> dict[str, Const]:
        """The literals the `__init__` that built `module` received for the parameters its arguments
        name, as every known construction of the class passes them (`Net(dropout=0.0)`), and the
        attributes of a project config object among them (`Net(GPTConfig(dropout=0.0))`)."""
        init = self.flow.method(module.built_by or "", "__init__")
        names = dict.fromkeys(d[1] for _, d in module.arguments or () if d[0] in ("param", "attr"))
        known: dict[str, Const] = {}
        for name in names if isinstance(init, LocalFunction) else ():
            value = self.value(Param(name, init.qualname))
            if isinstance(value, Const):
                known[name] = value
            elif isinstance(value, ModuleObject) and len(value.classes) == 1 and not value.container:
                fields = object_fields(self.model.index, value.classes[0], value.arguments)
                known.update((f"{name}.{attr}", field) for attr, field in fields.items())
        return known

    def spread(self, site: CheckpointSite, spread: DictLit) -> dict:
        """A `**kwargs` spread into the checkpoint call, once known: the flags it carries (a complete
        dict without `use_reentrant` leaves the library default) and the keywords reaching the function."""
        changes: dict = {"spread_value": None}
        entries = spread.entries
        if "use_reentrant" in entries:
            flag = self.value(entries["use_reentrant"])
            known = flag.value if isinstance(flag, Const) and isinstance(flag.value, bool) else None
            changes["mode"] = Mode(known, FlagStatus.IN_KWARGS, f"use_reentrant={known} in the `**` keywords every caller passes", spread.entry_nodes.get("use_reentrant"))
        elif spread.complete and site.mode.flag is FlagStatus.MAYBE:
            changes["mode"] = self.default_mode(site)
        if "preserve_rng_state" in entries:
            flag = self.value(entries["preserve_rng_state"])
            changes["preserve_rng_state"] = flag.value if isinstance(flag, Const) and isinstance(flag.value, bool) else None
            changes["preserve_rng_node"] = spread.entry_nodes.get("preserve_rng_state", site.call)
        elif spread.complete and site.preserve_rng_state is None:
            changes["preserve_rng_state"] = True
        if site.forwarded:
            return changes  # the keywords each call of the wrapper hands on are that call's site's
        reaching = [(name, value) for name, value in entries.items() if name not in CONTROL_KEYWORDS and isinstance(spread.entry_nodes.get(name), cst.Arg)]
        changes["keywords"] = site.keywords + tuple(spread.entry_nodes[name] for name, _ in reaching)
        changes["keyword_values"] = site.keyword_values + tuple(value for _, value in reaching)
        return changes

    def hf_kwargs(self, site: CheckpointSite) -> dict:
        """A transformers kwargs dict that depends on the enclosing function's parameters (`kw = kw or
        {}` with a `kw=None` parameter), once every call of the function is known: its mode."""
        kwargs = self.value(site.kwargs_value)
        if not isinstance(kwargs, (Const, DictLit)):
            return {}
        node = site.kwargs_node
        keyword = node.keyword.value if isinstance(node, cst.Arg) and node.keyword else HF_ENABLE_METHODS.get(site.api_name, "gradient_checkpointing_kwargs")
        # transformers >= 5.0's Trainer turns an empty dict into None.
        empty_means_none = site.kind is ApiKind.HF_TRAINING_ARGS and not transformers_default_reentrant(self.model.versions.transformers)
        provenance = f" (its value in every call of `{_short(site.enclosing_function)}`)"
        preserve, preserve_node = hf_preserve_rng_state(kwargs, node)
        return {
            "kwargs_value": kwargs, "mode": hf_kwargs_mode(kwargs, node, keyword, self.model.versions, empty_means_none, provenance),
            "preserve_rng_state": preserve, "preserve_rng_node": preserve_node,
        }  # fmt: skip

    def default_mode(self, site: CheckpointSite) -> Mode:
        """The mode of a checkpoint call whose keywords are all known and lack `use_reentrant`."""
        api = KNOWN_APIS.get(site.api_name)
        if api is None or not api.takes_flag:
            return site.mode
        torch = self.model.versions.torch
        reentrant = torch_default_reentrant(torch)
        spread = next((code(a.value) for a in site.call.args if a.star == "**"), None) if isinstance(site.call, cst.Call) else None
        return Mode(
            reentrant,
            FlagStatus.ABSENT,
            f"no value `**{spread}` takes in the project holds `use_reentrant` (every call of `{_short(site.enclosing_function)}`"
            f"{', every construction of its class' if site.enclosing_class else ''}), so torch {torch.text} "
            f"{'falls back to reentrant mode and only warns' if reentrant else 'uses non-reentrant mode'} (torch version from {torch.source})",
            assumed=torch,
        )

    def in_region(self, part: "RegionPart", value: Value) -> Value:
        """What a value of a function a checkpointed region runs holds there: its parameters bound to
        the arguments of the calls that run it in the region, up the chain of calling parts (each
        call's own parameters in turn), what is left resolved from the callers as everywhere. Calls
        that pass different values give either (a tensor on one of them is one on some path)."""
        if not isinstance(value, SYMBOLIC) and not isinstance(value, (Items, DictLit)):
            return value
        values = [value]
        while part.caller is not None and part.calls:
            values = [_Binding(part.facts, call).value(v) for v in values for call in part.calls][:_MAX_CALLS]
            part = part.caller
        result: Optional[Value] = None
        for bound in values:
            result = merge(result, self.value(bound))
        return result if result is not None else UNKNOWN

    def handed_back(self, value: Value) -> Value:
        """What a call of a project function returns when the function returns one of its parameters
        unchanged (`model = freeze(Net())`): the argument of that call."""
        if not isinstance(value, Instance):
            return value
        facts = self.facts(value.ctor)
        returned = facts.returns if facts is not None else None
        if not isinstance(returned, Param) or returned.function != value.ctor:
            return value
        call = next((c for c in self.model.calls.get(value.ctor, ()) if c.node is value.node), None)
        return self.value(bind(facts, call, returned.name)) if call is not None else value

    # --- values -----------------------------------------------------------------------------

    def value(self, value: Value, depth: int = 0) -> Value:
        if isinstance(value, Param):
            return self.parameter(value, depth)
        if isinstance(value, DictLit) and _open(value):
            return replace(value, entries={key: self.value(entry, depth) for key, entry in value.entries.items()})
        if isinstance(value, Derived):
            return self.derived(value, depth)
        if isinstance(value, ElementOf):
            return element_of(self.value(value.base, depth))
        if isinstance(value, ItemOf):
            return item_of(self.value(value.base, depth), value.key, value.missing)
        if isinstance(value, AttributeOf):
            return self.attribute(self.value(value.base, depth), value.attr)
        if isinstance(value, CallOf):
            if isinstance(value.callee, LocalFunction) and value.call is not None:
                return self.returned(value.callee.qualname, value.call, depth)
            callee = self.value(value.callee, depth)
            inputs = tuple(self.value(v, depth) for v in value.inputs)
            if isinstance(callee, LocalFunction) and callee.node is None and isinstance(value.callee, AttributeOf):
                return self.record_method(callee.qualname, value, depth)
            if isinstance(callee, ModuleObject):
                return self.flow.module_output(callee, list(inputs))
            if isinstance(callee, Ref):
                # A project function fed a tensor (evaluation's rule): a tensor whose grad is open.
                return Tensor(Grad.UNKNOWN, value.origin, maybe_tuple=True) if any(isinstance(v, Tensor) for v in inputs) else UNKNOWN
            return CallOf(callee, inputs, value.origin) if isinstance(callee, SYMBOLIC) else UNKNOWN
        if isinstance(value, OneOf):
            options = [self.value(v, depth) for v in value.options]
            result: Optional[Value] = None
            for option in options:
                result = merge(result, option)
            return result if result is not None else UNKNOWN
        if isinstance(value, Items):
            return Items(tuple(self.value(v, depth) for v in value.values))
        if isinstance(value, DictLit) and any(isinstance(v, SYMBOLIC) for v in value.entries.values()):
            return replace(value, entries={k: self.value(v, depth) for k, v in value.entries.items()})
        if isinstance(value, Partial):
            return self.partial(value, depth)
        if isinstance(value, Defaulted):
            return defaulted(self.value(value.value, depth), self.value(value.fallback, depth), value.falsy)
        return value

    def returned(self, qualname: str, node: cst.CSTNode, depth: int) -> Value:
        """What the method `qualname` returns to the call `node`: its summary's return value with its
        parameters bound to the call's arguments (unknown past the depth bound)."""
        facts = self.facts(qualname)
        if facts is None or facts.returns is None or depth >= _MAX_DEPTH or self.overridden(qualname):
            return UNKNOWN
        # The call is in the model that evaluated it: this one, or a caller's.
        here = ((self.model, c) for c in self.model.calls.get(qualname, ()))
        call = next((c for _, c in (*here, *(self.callers(qualname) or ())) if c.node is node), None)
        if call is None:
            return UNKNOWN
        return self.value(_Binding(facts, call).value(facts.returns), depth + 1)

    def record_method(self, qualname: str, value: CallOf, depth: int) -> Value:
        """What a method of a dataclass-style class returns when called on an object the caller's
        parameters lead to (`self.cfg.ckpt.kwargs()`): its summary, with `self` that object and its
        parameters what the call passes by position (unknown with keywords or a star)."""
        facts = self.facts(qualname)
        node = value.call
        owner = qualname.rpartition(".")[0]
        if facts is None or facts.returns is None or depth >= _MAX_DEPTH or not self.model.index.is_record(owner) or self.overridden(qualname):
            return UNKNOWN
        if not isinstance(node, cst.Call) or any(a.keyword is not None or a.star for a in node.args):
            return UNKNOWN
        receiver = self.value(value.callee.base, depth)  # type: ignore[union-attr]
        call = CallRecord(node, value.inputs, {}, {}, False, False, True, "", receiver=receiver)
        result = self.value(_Binding(facts, call).value(facts.returns), depth + 1)
        if isinstance(result, DictLit):
            # Spelled at the call: the method's own dict is shared by every object it is called on,
            # and may be in another file.
            result = replace(result, node=node, entry_nodes={key: node for key in result.entries})
        return result

    def overridden(self, method: str) -> bool:
        """Whether a project subclass of the method's class defines it again: `self.method()` may run
        that one instead."""
        return bool(self.overrides(method))

    def overrides(self, method: str) -> list[str]:
        """The methods of project subclasses that define the method again."""
        owner, _, name = method.rpartition(".")
        return self.model.index.redefinitions(owner, name)

    def partial(self, value: Partial, depth: int) -> Value:
        func = self.value(value.func, depth)
        arg_values = tuple(self.value(v, depth) for v in value.arg_values)
        keywords = {k: self.value(v, depth) for k, v in value.keywords.items()}
        nodes, spread = value.keyword_nodes, value.spread
        if spread is not None:
            known = self.value(spread, depth)
            if isinstance(known, DictLit) and known.complete:
                keywords = {**keywords, **{k: self.value(v, depth) for k, v in known.entries.items()}}
                nodes, spread = {**nodes, **known.entry_nodes}, None
        return replace(value, func=func, arg_values=arg_values, keywords=keywords, keyword_nodes=nodes, spread=spread)

    def derived(self, value: Derived, depth: int) -> Value:
        sources = [self.value(s, depth) for s in value.sources]
        if len(sources) == 1 and value.base is None and isinstance(sources[0], ModuleObject):
            return sources[0]  # `model.to(device)` on a module is the module
        parts = [*sources, *([value.base] if value.base is not None else [])]
        required = next((t for t in parts if isinstance(t, Tensor) and t.grad is Grad.REQUIRED), None)
        joined = join_grad(parts, required.origin if required is not None else "")
        if isinstance(joined, Tensor) and joined.grad is Grad.NONE:
            return Tensor(Grad.NONE, value.origin or joined.origin, value.frozen or joined.frozen)
        return joined

    def attribute(self, base: Value, attr: str) -> Value:
        if isinstance(base, ModuleObject):
            return self.flow.member(base, attr)
        if isinstance(base, Tensor):
            return tensor_attribute(base, attr)
        if isinstance(base, ParsedArgs):
            return base.option(attr)
        if isinstance(base, OneOf):
            # Each path's attribute, joined: a grad-carrying one survives an unknown one.
            result: Optional[Value] = None
            for option in base.options:
                result = merge(result, self.attribute(option, attr))
            return result if result is not None else UNKNOWN
        return AttributeOf(base, attr) if isinstance(base, SYMBOLIC) else UNKNOWN

    def parameter(self, param: Param, depth: int) -> Value:
        key = (param.function, param.name, param.instance_of)
        if key in self.memo:
            return self.memo[key]
        if key in self.active or depth >= _MAX_DEPTH:
            return param
        self.active.add(key)
        try:
            result = self.incoming(param, depth)
        finally:
            self.active.discard(key)
        self.memo[key] = result
        return result

    def incoming(self, param: Param, depth: int) -> Value:
        """The value every known caller passes for `param` (the parameter itself when unknown)."""
        owner, _, method = param.function.rpartition(".")
        result: Optional[Value] = None
        if not method.startswith("_") and self.model.index.is_top_level_model(owner):
            # A top-level model's public methods are also called from outside, with data.
            result = entry_value(param.function, param.name)
            if result is None:
                return param
        # Its forward gets data whatever else the project's callers pass, unless one of them in this
        # file visibly passes a tensor that requires grad (a reproduction's `torch.randn(...,
        # requires_grad=True)`). Only this file's calls: the others would be loaded for every model.
        data_unless_shown = result is not None and method == "forward"
        facts = self.facts(param.function)
        if data_unless_shown:
            calls = [(self.model, call) for call in self.model.calls.get(param.function, ())]
        else:
            calls = self.callers(param.function) if facts is not None else None
        if facts is None or calls is None or len(calls) > _MAX_CALLS:
            return result if data_unless_shown else param
        for _, call in calls:
            if param.instance_of is not None and call.constructs is not None and not self._builds_a(call.constructs, param.instance_of):
                continue  # builds another class that shares the `__init__`: its objects hold other values
            passed = self.value(bind(facts, call, param.name), depth + 1)
            if data_unless_shown and grad_on_some_path(passed) is None:
                continue
            if isinstance(passed, Tensor):
                passed = replace(passed, origin=f"{passed.origin}; passed as `{param.name}` to `{_short(param.function)}` by `{_short(call.caller)}`")
            result = passed if result is None else _agree(result, passed)
            if result is None:
                return param
        return param if result is None or isinstance(result, Unknown) else result

    def _builds_a(self, constructed: str, cls: str) -> bool:
        index = self.model.index
        return index.is_subclass(index.canonical(constructed), frozenset([index.canonical(cls)]))

    # --- modules run by the functions they are handed to ---------------------------------------

    def runs_handed(self, handoff: ModelHandOff, depth: int = 0) -> Optional["ModuleRun"]:
        """Where the call of a hand-off runs the module it hands over, in the mode and with the grad it
        has at the call: every function the call may run does (None: not known to)."""
        found: Optional[ModuleRun] = None
        for target in handoff.targets:
            for method in (target, *self.overrides(target)):  # `self._forward(...)` may run a subclass's
                facts = self.facts(method)
                param = parameter_at(facts, handoff.call, handoff.key) if facts is not None else None
                run = self.runs_module(method, param, depth) if param is not None else None
                if run is None:
                    return None
                found = found or ModuleRun(method, run.function, run.node)
        return found

    def runs_module(self, function: str, param: str, depth: int = 0) -> Optional["ModuleRun"]:
        """Where a call of `function` runs (calls the forward of) the module it is handed as `param`,
        as its caller left it: in its own body, or in a function it hands it on to (bounded, memoised)."""
        key = (function, param)
        if key in self.runs_memo:
            return self.runs_memo[key]
        facts = self.facts(function)
        if key in self.running or depth >= _MAX_DEPTH or facts is None:
            return None
        self.running.add(key)
        try:
            result = ModuleRun(function, function, facts.runs_params[param]) if param in facts.runs_params else None
            for handoff in facts.hands_params.get(param, ()) if result is None else ():
                result = self.runs_handed(handoff, depth + 1)
                if result is not None:
                    break
        finally:
            self.running.discard(key)
        self.runs_memo[key] = result
        return result

    def facts(self, qualname: str) -> Optional[FunctionFacts]:
        module, _ = self.model.index.split(qualname)
        owner = self.model.model_for(module.name, qualname) if module is not None else None
        return owner.functions.get(qualname) if owner is not None else None


@dataclass(frozen=True)
class ModuleRun:
    """A module handed to `callee` runs: `function` (the callee or one it hands the module on to) calls it at `node`."""

    callee: str
    function: str
    node: cst.CSTNode


def parameter_at(facts: FunctionFacts, call: CallRecord, key: Union[int, str]) -> Optional[str]:
    """The parameter `call` fills at `key` (a positional index or a keyword); None for `*args`, `**kwargs`."""
    if isinstance(key, str):
        return key if key in facts.params else None
    positional = _positional_params(facts, call)
    return positional[key] if key < len(positional) else None


def _positional_params(facts: FunctionFacts, call: CallRecord) -> list[str]:
    """The parameters `call` can fill by position (`self` is implicit in a bound call)."""
    positional = [p for p in facts.params if p not in facts.keyword_only]
    return positional[1:] if call.bound and positional else positional


def argument_key(facts: FunctionFacts, call: CallRecord, name: str) -> Union[int, str, None]:
    """Where `call` passes the parameter `name`: its positional index or its keyword (None: not passed as one)."""
    positional = _positional_params(facts, call)
    if name in call.keywords and name not in positional[: len(call.positional)]:
        return name
    if name in positional and positional.index(name) < len(call.positional):
        return positional.index(name)
    return None


def _open(value: Value) -> bool:
    """A value that depends on parameters, or a dict literal holding one (`{"use_reentrant": args.reentrant}`)."""
    return isinstance(value, SYMBOLIC) or isinstance(value, DictLit) and any(isinstance(v, SYMBOLIC) for v in value.entries.values())


def bind(facts: FunctionFacts, call: CallRecord, name: str) -> Value:
    """What `call` passes for the parameter `name` of the function `facts` describes."""
    key = argument_key(facts, call, name)
    if key is not None:
        return call.keywords[key] if isinstance(key, str) else call.positional[key]
    if call.receiver is not None and call.bound and facts.params and name == facts.params[0]:
        return call.receiver  # `self` of `cfg.ckpt.kwargs()`
    positional = _positional_params(facts, call)
    if name in positional and call.star:
        return UNKNOWN
    if name == facts.star:
        return UNKNOWN if call.star else Items(call.positional[len(positional) :])
    if name == facts.star_star:
        extra = {k: v for k, v in call.keywords.items() if k not in facts.params}
        return DictLit(extra, not call.spread, call.node, {k: call.keyword_nodes[k] for k in extra if k in call.keyword_nodes})
    if call.spread:
        return UNKNOWN
    return facts.defaults.get(name, UNKNOWN)


class _Binding:
    """A function's parameters bound to one call's arguments (a wrapper's, with the module called)."""

    def __init__(self, facts: FunctionFacts, call: CallRecord, wrapper: Optional[WrapperCall] = None) -> None:
        self.facts, self.call, self.wrapper = facts, call, wrapper

    def value(self, value: Value) -> Value:
        if isinstance(value, Param):
            if value.function != self.facts.qualname:
                return value
            if value.name == "self" and self.wrapper is not None and self.wrapper.module is not None:
                return self.wrapper.module
            return bind(self.facts, self.call, value.name)
        if isinstance(value, Derived):
            return replace(value, sources=tuple(self.value(s) for s in value.sources))
        if isinstance(value, ElementOf):
            return ElementOf(self.value(value.base))
        if isinstance(value, ItemOf):
            return item_of(self.value(value.base), value.key, value.missing)
        if isinstance(value, AttributeOf):
            return AttributeOf(self.value(value.base), value.attr)
        if isinstance(value, CallOf):
            # The call node stays: what a method returns is read from the call's own arguments.
            return replace(value, callee=self.value(value.callee), inputs=tuple(self.value(v) for v in value.inputs))
        if isinstance(value, OneOf):
            return OneOf(tuple(self.value(v) for v in value.options))
        if isinstance(value, Items):
            return Items(tuple(self.value(v) for v in value.values))
        if isinstance(value, DictLit):
            return replace(value, entries={k: self.value(v) for k, v in value.entries.items()})
        if isinstance(value, Defaulted):
            return Defaulted(self.value(value.value), self.value(value.fallback), value.falsy)
        if isinstance(value, Partial):
            return replace(
                value, func=self.value(value.func), arg_values=tuple(self.value(v) for v in value.arg_values),
                keywords={k: self.value(v) for k, v in value.keywords.items()},
                spread=self.value(value.spread) if value.spread is not None else None,
            )  # fmt: skip
        return value

    def site(self, site: CheckpointSite) -> CheckpointSite:
        """The wrapper's site as this call runs it, reported at the call."""
        wrapper, call = self.wrapper, self.call
        assert wrapper is not None
        inputs = [self.value(v) for v in site.input_values]
        stars = []
        for star in site.star_values:
            expanded = self.value(star)
            if isinstance(expanded, Items):
                inputs.extend(expanded.values)
            else:
                stars.append(expanded)
        optional = lambda v: self.value(v) if v is not None else None  # noqa: E731
        function = optional(site.function)
        handed = function.func if isinstance(function, Partial) else function
        # `def ckpt(fn, *args, reentrant=False, preserve=False)`: the flags this call binds, or the defaults.
        mode, preserve = site.mode, site.preserve_rng_state
        reentrant, preserving = optional(site.mode_value), optional(site.preserve_rng_value)
        if isinstance(site.mode_value, Param) and isinstance(reentrant, Const) and isinstance(reentrant.value, bool):
            mode = Mode(reentrant.value, mode.flag, f"use_reentrant={reentrant.value} (as this call of `{_short(wrapper.target)}` binds it)", mode.node)
        if isinstance(site.preserve_rng_value, Param) and isinstance(preserving, Const) and isinstance(preserving.value, bool):
            preserve = preserving.value
        return replace(
            site,
            kind=ApiKind.PROJECT_WRAPPER,
            mode=mode,
            preserve_rng_state=preserve,
            api_name=wrapper.target,
            call=call.node,
            function=function,
            input_values=tuple(inputs),
            star_values=tuple(stars),
            has_star_args=bool(stars),
            keyword_values=tuple(self.value(v) for v in site.keyword_values),
            captured={name: self.value(v) for name, v in site.captured.items()},
            mode_value=reentrant,
            preserve_rng_value=preserving,
            preserve_rng_node=call.node if site.preserve_rng_node is not None else None,
            spread_value=optional(site.spread_value),
            enclosing_function=wrapper.enclosing_function,
            enclosing_class=wrapper.enclosing_class,
            grad_disabled=site.grad_disabled or (None if site.grad_guarded else wrapper.grad_disabled),
            grad_guarded=site.grad_guarded or wrapper.grad_guarded,
            eval_only=site.eval_only or wrapper.eval_only,
            training_only=site.training_only or wrapper.training_only,
            gates=_joined_gates(site.gates, wrapper),
            # Called from a wrapper that hands on its own parameter: that wrapper's calls are the sites.
            forwarded=isinstance(handed, Param) and handed.function == wrapper.enclosing_function and handed.name != "self",
            wrapper=wrapper.target,
            callee_has_parameters=None,
        )


def _joined_gates(own: Optional[tuple[str, ...]], wrapper: WrapperCall) -> Optional[tuple[str, ...]]:
    """The module flags a wrapper's site runs under when this call makes it: the call's and the
    wrapper's own; those of another class than the caller's cannot be told apart (None)."""
    if own is None or wrapper.gates is None or own and wrapper.target.rpartition(".")[0] != wrapper.enclosing_class:
        return None
    return tuple(dict.fromkeys((*wrapper.gates, *own)))


def _agree(a: Value, b: Value) -> Optional[Value]:
    """The value two callers both pass, or None when they disagree. Two dicts agree on the keys both
    pass alike; a key one of them lacks or that they pass differently may be anything, but it is
    still passed on some path (where it is spelled stays known: a keyword reaching a reentrant
    checkpoint raises on that path)."""
    if a == b:
        return same_object(b, a)
    if isinstance(a, DictLit) and isinstance(b, DictLit):
        both = {k: _agree(a.entries[k], b.entries[k]) for k in a.entries if k in b.entries}
        same = {k: v for k, v in both.items() if v is not None}
        entries = {k: same.get(k, UNKNOWN) for k in dict.fromkeys([*a.entries, *b.entries])}
        return DictLit(entries, a.complete and b.complete, a.node, {**b.entry_nodes, **a.entry_nodes})
    if isinstance(a, Tensor) and isinstance(b, Tensor) and a.grad is b.grad and a.grad is not Grad.UNKNOWN:
        return merge(a, b)
    if isinstance(a, Tensor) and isinstance(b, Tensor) and (grad_on_some_path(a) or grad_on_some_path(b)):
        return merge(a, b)  # callers that pass a grad-carrying tensor on some calls only
    if isinstance(a, ModuleObject) and isinstance(b, ModuleObject) and a.container == b.container:
        return ModuleObject(tuple(dict.fromkeys(a.classes + b.classes)), a.origin, a.container)
    return None


def _short(qualname: Optional[str]) -> str:
    """`Block.forward` for `pkg.mod.Block.forward` (the last two parts)."""
    return ".".join((qualname or "").split(".")[-2:])

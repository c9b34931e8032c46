"""Model calls where autograd is off whose forward still checkpoints (CKPT008's second form).

A checkpoint gated on the module's mode (`if self.gradient_checkpointing and self.training:`,
transformers' layers) runs whenever the model is in train mode, grad or not: under `no_grad` it
records nothing and only adds overhead. The builder records each model call under a grad-disabled
context with what the enclosing function knows of the model (`GradFreeCall`); here the model is
resolved, from the callers when it arrives as a parameter, and the call is kept when the model is
known to be in train mode and its forward reaches a checkpoint that runs in training. A model
handed to a project function there (`ref = logprobs(reference, batch)`) counts when that function,
or one it hands the model on to, runs it as its caller left it (`summaries.Resolver.runs_module`):
the finding is at the call written under `no_grad`, and names the function that runs the model.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Iterator, Optional


from ckptlint.model.caller_modes import one_line, through_trainer
from ckptlint.model.construction import Context
from ckptlint.model.regions import RegionPart, region_of
from ckptlint.model.sites import ApiKind, CallRecord, CheckpointSite, FunctionFacts, GradFreeCall, ModelState
from ckptlint.model.summaries import argument_key, bind
from ckptlint.model.values import ModuleObject, Param, Value, code

if TYPE_CHECKING:
    from ckptlint.index import ProjectIndex
    from ckptlint.model.file_model import FileModel
    from ckptlint.model.summaries import Resolver

_RUNS_IN_FORWARD = (ApiKind.CHECKPOINT, ApiKind.SEQUENTIAL, ApiKind.HF_FUNC, ApiKind.PROJECT_WRAPPER, ApiKind.HF_LAYER_CALL)


@dataclass(frozen=True)
class GradFreeCheckpoint:
    call: GradFreeCall
    reached: str  # the checkpoint the call runs, for messages
    trains: str  # why the model is in train mode there
    any_mode: bool = False  # the checkpoint ignores the mode: `.eval()` would not stop it


def grad_free_checkpoints(model: "FileModel", resolver: "Resolver") -> list[GradFreeCheckpoint]:
    """The grad-free model calls of `model` that run a checkpoint (one verdict per call)."""
    found: dict[int, GradFreeCheckpoint] = {}
    for call in model.grad_free_calls:
        verdict = next(_verdicts(model, resolver, call), None) if id(call.node) not in found else None
        if verdict is not None:  # one per call, also when it hands over two models
            found[id(call.node)] = verdict
    return list(found.values())


def _verdicts(model: "FileModel", resolver: "Resolver", call: GradFreeCall) -> Iterator[GradFreeCheckpoint]:
    through = ""
    if call.handoff is not None:
        run = resolver.runs_handed(call.handoff)
        if run is None:
            return
        runs = f"runs it (`{code(run.node)}`), and "
        through = f"`{_short(run.callee)}` " + (runs if run.function == run.callee else f"hands it to `{_short(run.function)}`, which {runs}")
    handed_in = call.param is not None and call.function is not None
    reached = _reached(model, resolver, call.value, call.state, call.model) if call.state.training is True or not handed_in else None
    if reached:
        trains = "is in train mode here (no `.eval()` since it was built or `.train()` was called)"
        training = call.state.training is True
        yield GradFreeCheckpoint(call, through + reached, f"`{call.model}` " + (trains if training else _ANY_MODE), any_mode=not training)
    if reached or not handed_in:
        return
    # A model handed in: the callers say which it is, and its mode unless this function sets it.
    facts = resolver.facts(call.function)
    calls = resolver.callers(call.function)
    for caller_model, record in (calls or []) if facts is not None else []:
        state = call.state if call.mode_here else _handed_state(resolver, facts, record, call.param)
        reached = _reached(caller_model, resolver, resolver.value(bind(facts, record, call.param)), state, call.model)
        if reached:
            caller = f"`{_short(record.caller)}`" if record.caller not in model.index.modules else f"module-level code of `{record.caller}`"
            handed = "it" if call.param == call.model else f"`{call.param}`, which `{call.model}` comes from,"
            mode = " in train mode" if state.training is True and not call.mode_here else ""
            trains = through_trainer(record, caller) if record.event is not None else f"{caller} hands {handed} over{mode} (`{code(record.node)}`)"
            yield GradFreeCheckpoint(call, through + reached, trains if mode else f"{trains}, and `{call.model}` {_ANY_MODE}", any_mode=not mode)


def _handed_state(resolver: "Resolver", facts: FunctionFacts, record: CallRecord, param: str, depth: int = 0) -> ModelState:
    """The state of the model `record` hands over as `param`: as the caller holds it, or, when the
    caller was handed it in turn (`dpo_loss(model)` calling `reference_logps(model)`), as its own
    callers hand it over, when they agree (bounded)."""
    key = argument_key(facts, record, param)
    state = record.states.get(key, ModelState()) if key is not None else ModelState()
    passed = bind(facts, record, param)
    if state.training is not None or state.checkpointing is not None or depth >= _MAX_HANDOFFS or not isinstance(passed, Param):
        return state
    outer = resolver.facts(passed.function)
    calls = resolver.callers(passed.function) if outer is not None and passed.function == record.caller else None
    states = [_handed_state(resolver, outer, r, passed.name, depth + 1) for _, r in calls or []]  # type: ignore[arg-type]
    return states[0] if states and all(s == states[0] for s in states) else state


# How many functions a model may be handed through before the call under no_grad.
_MAX_HANDOFFS = 3

# Why a call counts when the model is not known to be in train mode.
_ANY_MODE = "checkpoints in any mode (nothing checks `self.training`), so `.eval()` does not stop it"


def _reached(model: "FileModel", resolver: "Resolver", value: Value, state: ModelState, spelled: str) -> Optional[str]:
    """The checkpoint a call of the model in `state` runs, described; None when none is known to.
    Out of train mode (or not known to be in it), only checkpoints that never look at the mode. A
    model that is one of several classes (`MODELS[name](...)`) reaches one only if each of them does."""
    if isinstance(value, ModuleObject) and value.container is None and len(value.classes) > 1:
        each = [_reached(model, resolver, replace(value, classes=(cls,)), state, spelled) for cls in value.classes]
        return each[0] if all(each) else None
    parts = region_of(model, value).parts if isinstance(value, ModuleObject) else []
    for part in parts:
        for site in _sites_run(part, resolver):
            if _runs_in_training(model, site, state, part, value.classes if isinstance(value, ModuleObject) else ()):
                if state.training is not True and site.training_only:
                    continue
                where = _short(part.facts.qualname)
                return f"its forward reaches `{code(site.call.func)}(...)` in `{where}`, which does not check whether grad is on"
        # A module of a class checkpoint_wrapper wraps (`apply_activation_checkpointing(model, ...)`),
        # reached where no call spells it (inside an `nn.Sequential`): the wrapper checkpoints every
        # call of it, in any mode and whether or not grad is on (torch 2.13's CheckpointWrapper.forward).
        wraps = model.index.activation_wraps(part.owner_class) if part.owner_class and part.hook is None else []
        if wraps and not any(wrap.training_only for _, wrap in wraps):
            path, wrap = wraps[0]
            model.index.cited.add(path)
            return (
                f"its forward runs `{part.owner_class.rsplit('.', 1)[-1]}`, which {wrap.how} wraps with {wrap.impl} "
                f"({path}:{wrap.line}): the wrapper checkpoints every call, whether or not grad is on"
            )
    if state.checkpointing is not None and not parts and state.training is True:
        return (
            f"transformers checkpoints the layers of `{spelled}` whenever it is training (checkpointing switched on by "
            f"`{one_line(state.checkpointing)}`), whether or not grad is on"
        )
    return None


def _sites_run(part: RegionPart, resolver: "Resolver") -> Iterator[CheckpointSite]:
    """The checkpoints the function of `part` runs itself: its own calls, and those of the wrappers
    it calls, each under the conditions of that call (`if torch.is_grad_enabled() and ...:
    self._gradient_checkpointing_func(block, h)`). A wrapper's own site runs only through its calls."""
    function = part.facts.qualname
    for site in part.model.sites:
        if site.enclosing_function == function and not site.forwarded and not _made_by_wrapper_call(site):
            yield site
    for wrapper in part.model.wrapper_calls:
        if wrapper.enclosing_function == function:
            yield from resolver.instantiate(wrapper, 0)


def _made_by_wrapper_call(site: CheckpointSite) -> bool:
    """A site the resolver made for a call of a project wrapper (`_sites_run` makes those itself)."""
    return site.kind is ApiKind.PROJECT_WRAPPER and site.wrapper is not None


def _runs_in_training(model: "FileModel", site: CheckpointSite, state: ModelState, part: RegionPart, classes: tuple[str, ...]) -> bool:
    """The site runs whenever the module trains: not gated on grad, and every module flag it is gated
    on is set (a literal that holds, or checkpointing switched on for this model)."""
    if site.kind not in _RUNS_IN_FORWARD or site.grad_guarded or site.eval_only or site.grad_disabled is not None or site.gates is None:
        return False
    if state.checkpointing is not None:
        return True
    if site.kind in (ApiKind.HF_FUNC, ApiKind.HF_LAYER_CALL):
        return False  # transformers sets these up only when checkpointing is switched on
    owner = part.owner_class or site.enclosing_class
    # Flags set on the model since it was built (`model.set_grad_checkpointing()`) hold for its own class's code.
    flags = dict(state.flags) if owner in classes else {}
    return owner is not None and all(flags[attr] is True if attr in flags else _flag_set(model.index, owner, attr, part.context) for attr in site.gates)


def _flag_set(index: "ProjectIndex", owner: str, attr: str, built_with: Optional[Context]) -> bool:
    """Whether `self.<attr>` of an `owner` module holds a true literal: bound to one, or to the
    parameter of the `__init__` that built it, given a literal (or left at a literal default); for
    `config.flag`, the attribute of the config object that parameter was given."""
    held, _, field = attr.partition(".")
    binding = index.attribute(owner, held)
    if binding is None:
        return False
    if binding.has_constant and not field:
        return bool(binding.constant)
    if binding.param is None or built_with is None or index.attribute_holder(owner, held) is not index.init_signature(owner):
        return False
    given = built_with.get(f"{binding.param}.{field}" if field else binding.param)
    return given is not None and bool(given.value)


def _short(qualname: str) -> str:
    """`Block.forward` for `pkg.mod.Block.forward` (the last two parts)."""
    return ".".join(qualname.split(".")[-2:])

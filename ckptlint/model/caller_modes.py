"""`generate()` on a model a function is handed, in the mode and with the checkpointing its callers
hand it over in (CKPT004's `generate()` form across a call).

transformers checkpoints a train-mode model's layers whenever its checkpointing is on, under
generate's `no_grad` too, and drops the cache. `def sample(policy, ids): return policy.generate(ids)`
knows neither the mode nor the checkpointing of `policy`: each known caller's call records them
(`CallRecord.states`), so a caller that hands over a model training with checkpointing on makes the
`generate()` a finding, reported there (at the `generate` call) and naming that caller.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional

import libcst as cst

from ckptlint.model.apis import TRAINER_STEP_METHODS
from ckptlint.model.sites import CacheUse
from ckptlint.model.summaries import argument_key
from ckptlint.model.values import code

if TYPE_CHECKING:
    from ckptlint.model.file_model import FileModel
    from ckptlint.model.sites import CallRecord, ParameterGenerate
    from ckptlint.model.summaries import Resolver


def handed_generates(model: "FileModel", resolver: "Resolver") -> list[CacheUse]:
    """The `generate()` calls (and forwards' cache keywords) on parameters of `model`'s functions that
    some caller hands a model training with checkpointing on (one use per call)."""
    found = (_handed_generate(model, resolver, generate) for generate in model.parameter_generates)
    return [use for use in found if use is not None]


def _handed_generate(model: "FileModel", resolver: "Resolver", generate: "ParameterGenerate") -> Optional[CacheUse]:
    facts = resolver.facts(generate.function)
    for _, record in (resolver.callers(generate.function) or []) if facts is not None else []:
        key = argument_key(facts, record, generate.param)
        state = record.states.get(key) if key is not None else None
        if state is not None and state.training is True and state.checkpointing is not None:
            caller = f"`{_short(record.caller)}`" if record.caller not in model.index.modules else f"module-level code of `{record.caller}`"
            handed = through_trainer(record, caller) if record.event is not None else f"{caller} hands it over so: `{code(record.node)}`"
            return CacheUse(generate.node, generate.kind, generate.model, state.checkpointing, handed_by=handed)
    return None


def one_line(node: cst.CSTNode) -> str:
    """A call spelled over several lines as `TrainingArguments(...)`; anything else as written."""
    text = code(node)
    return f"{code(node.func)}(...)" if "\n" in text and isinstance(node, cst.Call) else text


def through_trainer(record: "CallRecord", caller: str) -> str:
    """How a Trainer's call of a callback's event or of a subclass's step method hands the model over."""
    spelled = one_line(record.node)
    if record.event in TRAINER_STEP_METHODS:
        return f"{caller} builds `{spelled}`, a Trainer that trains with checkpointing on and calls its `{record.event}` with the model in train mode"
    return f"{caller} hands `{spelled}` to a Trainer that trains with checkpointing on and calls its `{record.event}` with the model in train mode"


def _short(qualname: str) -> str:
    """`mod.sample` for `pkg.mod.sample` (the last two parts)."""
    return ".".join(qualname.split(".")[-2:])

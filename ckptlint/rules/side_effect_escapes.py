"""CKPT007: a checkpointed function leaks a tensor through module state instead of returning it."""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterator


from ckptlint.findings import Severity
from ckptlint.model.regions import Region, RegionPart, kept_by_held_objects
from ckptlint.model.sites import ApiKind
from ckptlint.model.values import Grad, Tensor, holds_tensor
from ckptlint.rules import Diagnostic, Rule, callee_name
from ckptlint.versions import recompute_stops_early

if TYPE_CHECKING:
    from ckptlint.model.file_model import FileModel
    from ckptlint.model.sites import CheckpointSite
    import libcst as cst

CHECKPOINTED = (
    ApiKind.CHECKPOINT, ApiKind.SEQUENTIAL, ApiKind.HF_FUNC, ApiKind.HF_LAYER_CALL, ApiKind.PROJECT_WRAPPER, ApiKind.MODULE_WRAPPER,
    ApiKind.APPLY_WRAPPER,
)  # fmt: skip


_RUNS_TWICE = "the recompute during backward runs it again, so it happens twice per step"


def is_cache(name: str) -> bool:
    """Caches are CKPT004's business; other escaping containers are side effects."""
    lowered = name.lower()
    return "cache" in lowered or "past" in lowered


def escapes(model: FileModel, region: Region, stops_early: bool = False) -> Iterator[tuple[RegionPart, cst.CSTNode, str, bool]]:
    """Tensors computed in the region that leave it other than through the return value (a value
    that depends on a function's parameters is what the region's calls pass them), and whether the
    harm is only that the recompute does it again (a tensor without grad added into a container).
    `stops_early`: the recompute ends after the last tensor saved in forward (CKPT004's early stop)."""
    for part in region.parts:
        if stops_early and _runs_after_last_saved(region, part):
            continue
        facts = part.facts
        for store in facts.self_stores:
            if store.scratch and part.model.index.read_only_in(store.attr, facts.qualname):
                continue
            value = model.value_in_region(part, store.value)
            if not isinstance(value, Tensor):
                continue
            if store.fresh and value.grad is Grad.NONE:
                continue  # `self.probs = probs.detach()`: the recompute stores the same value, no gradient at stake
            yield part, store.effect.node, store.effect.description, False
        for store in facts.held_stores:
            value = model.value_in_region(part, store.value)
            if isinstance(value, Tensor) and value.grad is not Grad.NONE and not is_cache(store.attr):
                yield part, store.effect.node, store.effect.description, False
        for effect in facts.global_stores:
            yield part, effect.node, effect.description, False
        for mutation in facts.mutations:
            if is_cache(mutation.container):
                continue
            if mutation.owner == "param" and not (part.passed and mutation.container in part.passed and mutation.method != "inplace"):
                continue  # only a container the checkpoint call hands in (`checkpoint(block, x, stats, i)`) comes from outside
            if mutation.method == "inplace":
                if mutation.owner == "self" and _is_buffer(part, mutation.container[len("self.") :]):
                    yield part, mutation.node, f"updates the registered buffer `{mutation.container}` in place", False
                continue
            stored = model.value_in_region(part, mutation.stored)
            if not holds_tensor(stored):
                continue
            without_grad = isinstance(stored, Tensor) and stored.grad is Grad.NONE
            if mutation.method == "accumulate":
                yield part, mutation.node, f"adds a tensor into `{mutation.container}`, which outlives the call", without_grad
            elif not (mutation.method == "item" and without_grad):  # `c[k] = torch.zeros(n)`: the recompute stores the same value
                yield part, mutation.node, f"puts a tensor into `{mutation.container}`, which outlives the call", False
        for kept in kept_by_held_objects(model, part):
            without_grad = isinstance(kept.value, Tensor) and kept.value.grad is Grad.NONE
            if is_cache(kept.container) or not holds_tensor(kept.value) or without_grad and kept.kind in ("attribute", "item"):
                continue  # as for its own stores: the recompute keeps the same value again
            where = f"keeps it as `{kept.container}`" if kept.kind == "attribute" else f"puts it into `{kept.container}`"
            yield part, kept.node, f"hands a tensor to `{kept.method}`, which {where} of an object that outlives the call", without_grad and kept.kind == "accumulate"


def _runs_after_last_saved(region: Region, part: RegionPart) -> bool:
    """A forward hook of the checkpointed module itself, its only one, whose updates are its last
    effect: it runs after the module's last operation, so when the recompute stops at the last saved
    tensor it has not reached them (measured: the list keeps 4 entries for 4 blocks). Only
    container updates count: the hook's other effects may come before a tensor it saves."""
    hook = part.hook
    if hook is None or not part.on_entry or hook.kind != "forward":
        return False
    if sum(1 for p in region.parts if p.on_entry and p.hook is not None and p.hook.kind == "forward") != 1:
        return False  # another forward hook may run after it and save tensors
    facts = part.facts
    return not facts.self_stores and not facts.global_stores and all(m.last and not m.also_read for m in facts.mutations)


def _is_buffer(part: RegionPart, attr: str) -> bool:
    binding = part.model.index.attribute(part.owner_class, attr) if part.owner_class else None
    return binding is not None and binding.is_buffer


def _hook_description(model: FileModel, part: RegionPart) -> str:
    """`the forward hook registered on `an element of self.blocks` (line 23)`: its module runs in the region."""
    hook = part.hook
    assert hook is not None
    kind = "forward pre-hook" if hook.kind == "forward_pre" else "forward hook"
    on = f"on `{hook.receiver.origin}`" if hook.receiver is not None else "on every module (`register_module_forward_hook`)"
    if not hook.line or part.registered_in is None:
        return f"the {kind} registered {on}"
    if part.registered_in == part.model.path:
        return f"the {kind} registered {on} (line {hook.line})"
    if part.registered_in != model.path:
        model.index.cited.add(part.registered_in)  # the message cites a line of that file
    return f"the {kind} registered {on} ({part.registered_in}:{hook.line})"


class SideEffectEscapes(Rule):
    code = "CKPT007"
    name = "side-effect-escapes"
    severity = Severity.ERROR
    summary = "tensor escapes a checkpointed function as a side effect (`self.aux_loss = ...`, appends to module lists)"

    def check(self, model: FileModel) -> Iterator[Diagnostic]:
        for site in model.sites:
            if site.kind not in CHECKPOINTED or site.function is None:
                continue
            if site.reentrant:
                consequence = "under reentrant checkpointing it is computed under no_grad, so its gradient contribution silently vanishes"
            else:
                consequence = _RUNS_TWICE
            if site.reentrant:
                in_hook = (
                    "under reentrant checkpointing the hook runs under no_grad in forward (a submodule's output it keeps does "
                    "not require grad) and runs again in the recompute during backward"
                )
            else:
                in_hook = "the recompute during backward runs the hook again, so it happens twice per step"
            region = model.region(site)
            for part, node, what, twice in escapes(model, region, recompute_stops_before_last_effect(model, site)):
                subject = f"`{part.facts.qualname}`"
                if part.hook is not None:
                    subject = f"{subject}, {_hook_description(model, part)},"
                harm = in_hook if part.hook else _RUNS_TWICE if twice else consequence
                yield Diagnostic(
                    node,
                    f"{subject} {what} inside the region checkpointed by `{callee_name(site)}`: {harm}",
                    "return the value from the checkpointed function (e.g. `return h, aux_loss`) and store it outside",
                    path=part.model.path,
                    severity=Severity.ERROR if site.reentrant else Severity.WARNING,
                )


def recompute_stops_before_last_effect(model: FileModel, site: CheckpointSite) -> bool:
    """torch's checkpoint in non-reentrant mode with its early stop on (`early_stop=True`, the
    default, and no `set_checkpoint_early_stop` in the file): the recompute ends once the last tensor
    saved in forward is recomputed, so the checkpointed function's last effect never runs again."""
    return (
        site.kind is ApiKind.CHECKPOINT and site.mode.reentrant is False and site.early_stop is True
        and not model.switches_early_stop and recompute_stops_early(model.versions.torch)
    )

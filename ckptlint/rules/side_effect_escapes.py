"""CKPT007: a checkpointed function leaks a tensor through module state instead of returning it."""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterator


from ckptlint.findings import Severity
from ckptlint.model.regions import Region, RegionPart
from ckptlint.model.sites import ApiKind
from ckptlint.model.values import Grad, Tensor
from ckptlint.rules import Diagnostic, Rule, callee_name

if TYPE_CHECKING:
    from ckptlint.model.file_model import FileModel
    import libcst as cst

CHECKPOINTED = (
    ApiKind.CHECKPOINT, ApiKind.SEQUENTIAL, ApiKind.HF_FUNC, ApiKind.HF_LAYER_CALL, ApiKind.PROJECT_WRAPPER, ApiKind.MODULE_WRAPPER,
    ApiKind.APPLY_WRAPPER,
)  # fmt: skip


def is_cache(name: str) -> bool:
    """Caches are CKPT004's business; other escaping containers are side effects."""
    lowered = name.lower()
    return "cache" in lowered or "past" in lowered


def escapes(region: Region) -> Iterator[tuple[RegionPart, cst.CSTNode, str]]:
    """Tensors computed in the region that leave it other than through the return value."""
    for part in region.parts:
        facts = part.facts
        for store in facts.self_stores:
            if not isinstance(store.value, Tensor) or store.scratch and part.model.index.read_only_in(store.attr, facts.qualname):
                continue
            if store.fresh and store.value.grad is Grad.NONE:
                continue  # `self.probs = probs.detach()`: the recompute stores the same value, no gradient at stake
            yield part, store.effect.node, store.effect.description
        for effect in facts.global_stores:
            yield part, effect.node, effect.description
        for mutation in facts.mutations:
            if is_cache(mutation.container) or mutation.owner == "param":
                continue
            if mutation.method == "inplace":
                if mutation.owner == "self" and _is_buffer(part, mutation.container[len("self.") :]):
                    yield part, mutation.node, f"updates the registered buffer `{mutation.container}` in place"
            elif mutation.stores_tensor:
                yield part, mutation.node, f"puts a tensor into `{mutation.container}`, which outlives the call"


def _is_buffer(part: RegionPart, attr: str) -> bool:
    binding = part.model.index.attribute(part.owner_class, attr) if part.owner_class else None
    return binding is not None and binding.is_buffer


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
                consequence = "the recompute during backward runs it again, so it happens twice per step"
            for part, node, what in escapes(model.region(site)):
                yield Diagnostic(
                    node,
                    f"`{part.facts.qualname}` {what} inside the region checkpointed by `{callee_name(site)}`: {consequence}",
                    "return the value from the checkpointed function (e.g. `return h, aux_loss`) and store it outside",
                    path=part.model.path,
                    severity=Severity.ERROR if site.reentrant else Severity.WARNING,
                )

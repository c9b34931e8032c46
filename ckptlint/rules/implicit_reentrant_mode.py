"""CKPT006: `use_reentrant` not passed, so torch silently picks the reentrant variant."""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterator

from ckptlint.findings import Severity
from ckptlint.fixes import explicit_mode
from ckptlint.model.sites import ApiKind, FlagStatus
from ckptlint.rules import Diagnostic, Rule

if TYPE_CHECKING:
    from ckptlint.model.file_model import FileModel

DIRECT = (ApiKind.CHECKPOINT, ApiKind.SEQUENTIAL)
TRANSFORMERS = (ApiKind.HF_ENABLE, ApiKind.HF_TRAINING_ARGS)
# torch.distributed's wrappers: only a `checkpoint_fn` without the flag leaves the mode implicit.
WRAPPERS = (ApiKind.MODULE_WRAPPER, ApiKind.APPLY_WRAPPER)


class ImplicitReentrantMode(Rule):
    code = "CKPT006"
    name = "implicit-reentrant-mode"
    severity = Severity.WARNING
    summary = "`use_reentrant` is not passed explicitly, so checkpointing silently uses the reentrant variant"

    def check(self, model: FileModel) -> Iterator[Diagnostic]:
        for site in model.sites:
            # Only a resolved absence counts: `**kwargs` we cannot see may carry the flag.
            if site.mode.flag is not FlagStatus.ABSENT:
                continue
            if site.kind in DIRECT:
                name = site.api_name.rsplit(".", 1)[-1]
                yield Diagnostic(
                    site.call,
                    f"`{name}` called without `use_reentrant`: {site.mode.reason}",
                    "pass `use_reentrant=False` (recommended: works with keyword inputs, frozen inputs and "
                    "`torch.autograd.grad`) or `use_reentrant=True` to keep today's behaviour explicitly",
                    fixes=explicit_mode(site),
                )
            elif site.kind in WRAPPERS:
                yield Diagnostic(
                    site.mode.node or site.call,
                    f"`checkpoint_wrapper` without `use_reentrant`: {site.mode.reason}",
                    "pass `use_reentrant=False` to checkpoint_wrapper (it hands the keyword on to `checkpoint_fn`), or drop "
                    "`checkpoint_fn` and choose the mode with `checkpoint_impl`",
                )
            elif site.kind in TRANSFORMERS and not site.wrapper:  # a helper's enable: reported in the helper
                yield Diagnostic(
                    site.kwargs_node or site.call,
                    f"checkpointing kwargs lack `use_reentrant`: {site.mode.reason}",
                    'add `"use_reentrant": False` to the dict, or pass None to get transformers\' default',
                    fixes=explicit_mode(site),
                )

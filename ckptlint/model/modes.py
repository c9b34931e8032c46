"""The checkpointing mode and RNG setting a transformers kwargs dict selects, shared by the LibCST pass and by the
resolution of a dict that arrives from a function's callers."""

from __future__ import annotations

from typing import Optional

import libcst as cst

from ckptlint.model.sites import FlagStatus, Mode
from ckptlint.model.values import Const, DictLit, Value
from ckptlint.versions import LibraryVersions, torch_default_reentrant, transformers_default_reentrant


def hf_kwargs_mode(
    value: Value, node: Optional[cst.CSTNode], keyword: str, versions: LibraryVersions, empty_means_none: bool, provenance: str = ""
) -> Mode:
    """The mode of `gradient_checkpointing_kwargs=value` (or TrainingArguments' keyword): transformers
    fills in its default only for None. `provenance`: where a value from elsewhere came from."""
    version = versions.transformers
    if isinstance(value, DictLit) and not value.entries and value.complete and empty_means_none:
        value = Const(None)
    if value == Const(None):
        reentrant = transformers_default_reentrant(version)
        return Mode(
            reentrant,
            FlagStatus.FIXED,
            f"{keyword}=None{provenance}: transformers {version.text} uses use_reentrant={reentrant} (assumed from {version.source})",
            node,
            version,
        )
    if isinstance(value, DictLit):
        if "use_reentrant" in value.entries:
            flag = value.entries["use_reentrant"]
            known = flag.value if isinstance(flag, Const) and isinstance(flag.value, bool) else None
            return Mode(known, FlagStatus.IN_KWARGS, f'{keyword}["use_reentrant"]={known}{provenance}', node)
        if value.complete:
            torch = versions.torch
            return Mode(
                torch_default_reentrant(torch),
                FlagStatus.ABSENT,
                f"`{keyword}` is a dict without `use_reentrant`{provenance}: transformers passes it to torch unchanged (only None gets a default), so torch {torch.text} falls back to reentrant mode",
                node,
                torch,
            )
        return Mode(None, FlagStatus.MAYBE, f"{keyword} may carry use_reentrant through entries the analysis cannot resolve", node)
    return Mode(None, FlagStatus.MAYBE, f"{keyword} is not resolved", node)


def hf_preserve_rng_state(kwargs: Value, kwargs_node: Optional[cst.CSTNode]) -> tuple[Optional[bool], Optional[cst.CSTNode]]:
    """`preserve_rng_state` in transformers' checkpointing kwargs, which reach torch's checkpoint, and
    where to report it: the dict entry when the call spells the dict, else the call's keyword (a
    shared dict may configure other models too)."""
    if not isinstance(kwargs, DictLit) or "preserve_rng_state" not in kwargs.entries:
        return (True if isinstance(kwargs, DictLit) and kwargs.complete or kwargs == Const(None) else None), None
    flag = kwargs.entries["preserve_rng_state"]
    known = flag.value if isinstance(flag, Const) and isinstance(flag.value, bool) else None
    spelled_here = isinstance(kwargs_node, cst.Arg) and kwargs_node.value is kwargs.node
    return known, (kwargs.entry_nodes.get("preserve_rng_state") if spelled_here else kwargs_node)

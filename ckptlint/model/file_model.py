"""Everything the builder learned about one file, as the rules read it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, Optional

import libcst as cst

from ckptlint.config import Settings
from ckptlint.index import ProjectIndex
from ckptlint.model.sites import CacheUse, CallRecord, CheckpointSite, FunctionFacts, GradFreeCall, HookRegistration, ParameterGenerate, WrapperCall
from ckptlint.model.values import Value
from ckptlint.versions import LibraryVersions

if TYPE_CHECKING:
    from ckptlint.model.grad_free import GradFreeCheckpoint
    from ckptlint.model.regions import Region, RegionPart




@dataclass
class FileModel:
    path: str
    module: str
    tree: cst.Module
    sites: list[CheckpointSite]
    versions: LibraryVersions
    index: ProjectIndex
    settings: Settings
    # Per function (by qualified name) and per lambda (by node): what its body does.
    functions: dict[str, FunctionFacts]
    lambdas: dict[int, FunctionFacts]
    # Attributes assigned outside `__init__` (stashed at run time): class -> attr -> the store.
    runtime_attrs: dict[str, dict[str, list[tuple[cst.CSTNode, Value]]]]
    cache_uses: list[CacheUse] = field(default_factory=list)
    # Calls of project functions and modules made here, by the qualified name of the function run.
    calls: dict[str, list[CallRecord]] = field(default_factory=dict)
    # Calls of checkpoint wrappers made here; each becomes a site once the model is complete.
    wrapper_calls: list[WrapperCall] = field(default_factory=list)
    # `set_checkpoint_early_stop(...)` is called in this file (torch's global switch of the early stop).
    switches_early_stop: bool = False
    # Models called where autograd records nothing, as each enclosing function sees them.
    grad_free_calls: list[GradFreeCall] = field(default_factory=list)
    # Those of them that run a checkpoint (set by the engine once callers are known).
    grad_free_checkpoints: list["GradFreeCheckpoint"] = field(default_factory=list)
    # `generate()` on parameters whose callers decide its mode (the engine adds the `cache_uses` they make).
    parameter_generates: list[ParameterGenerate] = field(default_factory=list)
    # Module hooks registered here (`block.register_forward_hook(fn)`).
    hooks: list[HookRegistration] = field(default_factory=list)
    # Other files' models by module name, for callees defined elsewhere (set by the engine).
    models: Callable[[str, str], Optional["FileModel"]] = lambda module, qualname: None
    # What a value of a region's function holds there, once callers are known (set by the engine:
    # `summaries.Resolver.in_region`); unresolved, it is the value as the function's dataflow saw it.
    value_in_region: Callable[["RegionPart", Value], Value] = lambda part, value: value
    # A value that depends on parameters, resolved from the project's calls (summaries.Resolver.value).
    resolved: Callable[[Value], Value] = lambda value: value
    _regions: dict[int, "Region"] = field(default_factory=dict)

    def model_for(self, module: str, qualname: str) -> Optional["FileModel"]:
        """The model that holds the function `qualname` of `module` (a cut model may lack it)."""
        if module == self.module and qualname in self.functions:
            return self
        return self.models(module, qualname) or (self if module == self.module else None)

    def stashed(self, cls: str, *others: "FileModel") -> dict[str, list[tuple[cst.CSTNode, Value]]]:
        """Attributes stored at run time on objects of `cls` (`block.scores = scores`, a setter
        method's `self.memory = memory`), as this file, the `others` and the methods of the class's
        own module that store on other modules (a block handing routing scores to the blocks it
        holds) show them: attr -> every store, in that order."""
        holders = [self, *others]
        module, _ = self.index.split(cls)
        for block in module.blocks if module is not None else ():
            for member in block.members:
                if member.stashes:
                    holders.append(self.models(module.name, f"{module.name}.{block.binds}.{member.name}"))
        found: dict[str, list[tuple[cst.CSTNode, Value]]] = {}
        for holder in holders:
            for attr, stores in holder.runtime_attrs.get(cls, {}).items() if holder is not None else ():
                found.setdefault(attr, []).extend(stores)
        return found

    def region(self, site: CheckpointSite) -> "Region":
        """Everything the checkpointed callable runs, across files (memoized per site)."""
        from ckptlint.model.regions import region_of

        if id(site) not in self._regions:
            self._regions[id(site)] = region_of(self, site.function, len(site.input_values), site.built_with)
        return self._regions[id(site)]

"""The pipeline: discover files -> cheap index pass -> LibCST model of the files that can matter
-> rules -> findings. Per-file work runs in a process pool and is cached by content hash.
"""

from __future__ import annotations

import multiprocessing
from collections import OrderedDict
import os
import re
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable, Optional, Sequence

import libcst as cst
from libcst.metadata import MetadataWrapper, PositionProvider

from ckptlint import __version__
from ckptlint.cache import ResultCache
from ckptlint.config import Settings
from ckptlint.discovery import discover
from ckptlint.findings import FileError, Finding, LintReport, Severity
from ckptlint.index import ModuleSummary, ProjectIndex, summarize
from ckptlint.model import FileModel, build_file_model
from ckptlint.model.apis import HF_GC_LAYER, HF_TRAINING_ARGUMENTS, KNOWN_APIS
from ckptlint.names import module_name_for
from ckptlint.rules import Rule, all_rules
from ckptlint.source import Source, SourceError, decode, read_source
from ckptlint.suppression import Suppressions
from ckptlint.versions import LibraryVersions

# Text that can only appear in a file holding a checkpoint site; files importing a checkpoint API
# under another name are found through the index instead.
_SITE_TEXT = re.compile(r"checkpoint\w*\s*\(|checkpointing\w*\s*=|use_reentrant|GradientCheckpointingLayer")
# Below this much source, forking workers costs more than it saves (the pre-commit case).
_PARALLEL_MIN_BYTES = 400_000


@dataclass(frozen=True)
class _Unit:
    source: Source
    module: str
    is_package: bool


def lint(
    paths: Sequence[str],
    settings: Settings,
    versions: LibraryVersions,
    *,
    jobs: Optional[int] = None,
    cache: Optional[ResultCache] = None,
    stdin: Optional[tuple[str, str]] = None,
) -> LintReport:
    """Lint `paths` (and `stdin` as (filename, text)); never raises for a bad file."""
    report = LintReport()
    discovery = discover([p for p in paths if p != "-"], settings)
    report.errors.extend(FileError(p, "no such file or directory") for p in discovery.missing)
    units: list[_Unit] = []
    for path in discovery.files:
        shown = _display_path(path)
        try:
            units.append(_unit(read_source(shown), path))
        except SourceError as error:
            report.errors.append(FileError(shown, str(error)))
    if stdin is not None:
        filename, text = stdin
        units.append(_unit(decode(filename, text.encode()), Path(filename)))
    jobs = max(1, jobs or os.cpu_count() or 1)
    parallel = jobs > 1 and sum(len(u.source.text) for u in units) >= _PARALLEL_MIN_BYTES

    summaries = _summaries(units, cache, jobs if parallel else 1, report)
    index = ProjectIndex({s.name: s for s in summaries.values()})
    candidates = [
        (u, summaries[u.source.path])
        for u in units
        if u.source.path in summaries and _can_matter(u, summaries[u.source.path], index, settings)
    ]
    report.files_checked = len(summaries)

    state = (index, versions, settings)
    key_prefix = f"a:{__version__}:{settings.fingerprint()}:{versions.torch.text}:{versions.transformers.text}:{index.fingerprint()}"
    keys = {u.source.path: f"{key_prefix}:{u.source.path}:{u.source.digest}" for u, _ in candidates}
    digests = {u.source.path: u.source.digest for u in units}
    cached = {k: v for k, v in (cache.get_many(keys.values()) if cache else {}).items() if _still_valid(v, digests)}
    todo = [c for c in candidates if keys[c[0].source.path] not in cached]
    fresh = _map(_analyze, todo, jobs if parallel and len(todo) > 1 else 1, state)
    if cache:
        cache.put_many({keys[path]: result for path, result in fresh})
    results = {**{p: cached[k] for p, k in keys.items() if k in cached}, **dict(fresh)}
    findings: dict[tuple, Finding] = {}
    for path in sorted(results):
        result = results[path]
        if result["error"]:
            report.errors.append(FileError(path, result["error"]))
            continue
        for data in sorted(result["findings"], key=lambda f: f["message"]):
            finding = Finding(**{**data, "severity": Severity(data["severity"])})
            # A callee checkpointed from several sites is one problem at one place: report it once.
            findings.setdefault((finding.path, finding.line, finding.column, finding.code), finding)
        report.unresolved_sites += result["unresolved"]
    report.findings = sorted(findings.values(), key=lambda f: (f.path, f.line, f.column, f.code))
    report.errors.sort()
    return report


def _still_valid(result: dict, digests: dict[str, str]) -> bool:
    """A cached result also depends on the other files whose bodies its analysis read."""
    return all(digests.get(path) == digest for path, digest in result.get("depends", {}).items())


def _display_path(path: Path) -> str:
    """Paths as users typed them: relative to the working directory when inside it."""
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def _unit(source: Source, path: Optional[Path] = None) -> _Unit:
    module, is_package = module_name_for(path or Path(source.path))
    return _Unit(source, module, is_package)


def _summaries(units: list[_Unit], cache: Optional[ResultCache], jobs: int, report: LintReport) -> dict[str, ModuleSummary]:
    keys = {u.source.path: f"s:{__version__}:{u.module}:{u.is_package}:{u.source.path}:{u.source.digest}" for u in units}
    cached = cache.get_many(keys.values()) if cache else {}
    todo = [u for u in units if keys[u.source.path] not in cached]
    fresh = _map(_summarize, todo, jobs, None)
    if cache:
        cache.put_many({keys[path]: data for path, data in fresh if "error" not in data})
    by_path = {**{p: cached[k] for p, k in keys.items() if k in cached}, **dict(fresh)}
    summaries: dict[str, ModuleSummary] = {}
    for path, data in by_path.items():
        if "error" in data:
            report.errors.append(FileError(path, data["error"]))
        else:
            summaries[path] = ModuleSummary.from_json(data)
    return summaries


def _can_matter(unit: _Unit, summary: ModuleSummary, index: ProjectIndex, settings: Settings) -> bool:
    """Cheap test before the LibCST parse: can this file hold a checkpoint site at all?"""
    text = unit.source.text
    if _SITE_TEXT.search(text):
        return True
    wrappers = dict(settings.checkpoint_functions)
    if any(name.rsplit(".", 1)[-1] in text for name in wrappers):
        return True
    for target in summary.imports.values():
        canonical = index.canonical(target)
        alias = index.alias(canonical)
        if alias is not None:
            canonical = alias.target
        if canonical in KNOWN_APIS or canonical in HF_TRAINING_ARGUMENTS or canonical in wrappers:
            return True
        if index.class_(canonical) is not None and index.is_subclass(canonical, HF_GC_LAYER):
            return True
    return False


# --- per-file work (runs in worker processes) -------------------------------------------------------

_STATE: Any = None


def _init_worker(state: Any) -> None:
    global _STATE
    _STATE = state


def _map(func: Callable[[Any], tuple[str, dict]], units: list[Any], jobs: int, state: Any) -> list[tuple[str, dict]]:
    """Ordered results; a process pool only when it pays."""
    if jobs <= 1 or len(units) < 2:
        _init_worker(state)
        return [func(u) for u in units]
    method = "fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn"
    context = multiprocessing.get_context(method)
    chunksize = max(1, len(units) // (jobs * 8))
    with ProcessPoolExecutor(jobs, mp_context=context, initializer=_init_worker, initargs=(state,)) as pool:
        return list(pool.map(func, units, chunksize=chunksize))


def _summarize(unit: _Unit) -> tuple[str, dict]:
    path = unit.source.path
    try:
        return path, summarize(unit.source.text, path, unit.module, unit.is_package).to_json()
    except SyntaxError as error:
        return path, {"error": f"syntax error at line {error.lineno}, column {error.offset}: {error.msg}"}
    except (ValueError, RecursionError, MemoryError) as error:
        return path, {"error": f"cannot parse: {error}"}
    except Exception as error:  # noqa: BLE001 - one file never stops the others
        return path, {"error": f"internal error in ckptlint {__version__} (please report it): {type(error).__name__}: {error}"}


class _Models:
    """Other files' models, built on demand when a checkpointed callee lives there (one per worker)."""

    # LibCST trees are large: keep a few recent ones (callees usually sit next to their callers).
    capacity = 24

    def __init__(self, index: ProjectIndex, versions: LibraryVersions, settings: Settings) -> None:
        self.index, self.versions, self.settings = index, versions, settings
        self.by_module: OrderedDict[str, Optional[FileModel]] = OrderedDict()
        self.texts: dict[str, Source] = {}

    def add(self, model: FileModel, source: Source) -> None:
        self.by_module[model.module] = model
        self.texts[model.path] = source
        while len(self.by_module) > self.capacity:
            _, evicted = self.by_module.popitem(last=False)
            if evicted is not None:
                self.texts.pop(evicted.path, None)

    def get(self, module: str) -> Optional[FileModel]:
        if module in self.by_module:
            self.by_module.move_to_end(module)
        else:
            self.by_module[module] = None
            summary = self.index.modules.get(module)
            if summary is not None:
                try:
                    source = read_source(summary.path)
                    tree = cst.parse_module(source.text)
                except (SourceError, cst.ParserSyntaxError, RecursionError):
                    return None
                model = build_file_model(tree, summary.path, summary, self.index, self.versions, self.settings)
                model.models = self.get
                self.add(model, source)
        return self.by_module[module]


_MODELS: Optional[_Models] = None


def _analyze(item: tuple[_Unit, ModuleSummary]) -> tuple[str, dict]:
    try:
        return _analyze_file(*item)
    except Exception as error:  # noqa: BLE001 - a bug in one file's analysis must not stop the run
        return item[0].source.path, {"findings": [], "unresolved": 0, "depends": {}, "error": f"internal error in ckptlint {__version__} (please report it): {type(error).__name__}: {error}"}


def _analyze_file(unit: _Unit, summary: ModuleSummary) -> tuple[str, dict]:
    global _MODELS
    index, versions, settings = _STATE
    if _MODELS is None or _MODELS.index is not index:
        _MODELS = _Models(index, versions, settings)
    path = unit.source.path
    result: dict[str, Any] = {"findings": [], "unresolved": 0, "error": None, "depends": {}}
    text = unit.source.text
    try:
        tree = cst.parse_module(text)
    except cst.ParserSyntaxError as error:
        result["error"] = f"syntax error at line {error.raw_line}, column {error.raw_column + 1}: {error.message}"
        return path, result
    except RecursionError:
        result["error"] = "cannot parse: nesting too deep"
        return path, result
    model = build_file_model(tree, path, summary, index, versions, settings)
    model.models = _MODELS.get
    _MODELS.add(model, unit.source)
    result["unresolved"] = sum(not site.resolved for site in model.sites)
    rules: list[Rule] = [rule() for rule in all_rules()]
    diagnostics = [(rule, d) for rule in rules for d in rule.check(model)]
    by_path: dict[str, list] = {}
    for rule, diagnostic in diagnostics:
        by_path.setdefault(diagnostic.path or path, []).append((rule, diagnostic))
    for where, group in by_path.items():
        owner = model if where == path else next((m for m in _MODELS.by_module.values() if m and m.path == where), None)
        if owner is None:
            continue
        source = _MODELS.texts[where]
        if where != path:
            result["depends"][where] = source.digest
        result["findings"].extend(_findings(owner, source, group, settings))
    return path, result


def _findings(model: FileModel, source: Source, group: list, settings: Settings) -> list[dict]:
    """Position, filter (selection, per-file ignores, suppressions) and serialise one file's diagnostics."""
    group = [(rule, d) for rule, d in group if settings.is_enabled(rule.code, model.path)]
    if not group or Suppressions.disables_file(source.text):
        return []
    # Positions cost a full codegen pass: computed only for files that have findings.
    positions = MetadataWrapper(model.tree, unsafe_skip_copy=True).resolve(PositionProvider)
    suppressions = Suppressions(source.text.splitlines())
    found = []
    for rule, diagnostic in group:
        where = positions[diagnostic.node]
        if suppressions.suppresses(where.start.line, rule.code):
            continue
        finding = Finding(
            path=model.path,
            line=where.start.line,
            column=where.start.column + 1,
            end_line=where.end.line,
            end_column=where.end.column + 1,
            code=rule.code,
            message=diagnostic.message,
            help=diagnostic.help,
            severity=settings.severity_for(rule.code, diagnostic.severity or rule.severity),
        )
        found.append({**asdict(finding), "severity": finding.severity.value})
    return found

"""The pipeline: discover files -> cheap index pass -> LibCST model of the files that can matter
-> rules -> findings. Per-file work runs in a process pool and is cached by content hash.
"""

from __future__ import annotations

import ast
import gc
import json
from collections import OrderedDict
from contextlib import contextmanager
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator, List, Optional, Sequence, Tuple

from ckptlint import __version__, progress
from ckptlint.cache import ResultCache
from ckptlint.config import Settings
from ckptlint.discovery import Discovery, Listing, discover
from ckptlint.findings import SAFE, UNSAFE, FileError, Finding, LintReport, Severity
from ckptlint.limits import describe, run_deep, too_deep, without_long_string_runs
from ckptlint.names import module_name_for
from ckptlint.project import Known, ProjectFiles, display_path
from ckptlint.rules import all_rules
from ckptlint.source import Source, SourceError, decode, read_source
from ckptlint.versions import LibraryVersions
from ckptlint.workers import become_worker, stop

# LibCST, and the model built on it, are imported in the functions that parse: importing LibCST
# takes 0.2 s, which a run that parses nothing (a warm cache, a commit that touches no checkpoint)
# should not pay. So are the index, the relevance cut, the process pool and what positions
# findings: a run where nothing changed (the pre-commit hook's usual case) takes 0.15 s in all.
if TYPE_CHECKING:
    import libcst as cst

    from ckptlint.index import ModuleSummary, ProjectIndex
    from ckptlint.model import FileModel
    from ckptlint.model.sites import CallRecord
    from ckptlint.relevance import SourceSlice

# Below this much source, forking workers costs more than it saves (the pre-commit case).
_PARALLEL_MIN_BYTES = 400_000
# Results kept per file version, each for other versions of the files it depends on: reverting an
# edit, or switching back to a branch, finds the results from before.
_RESULT_VARIANTS = 4


class _Unit:
    """A file of the run: its path as shown, content digest and module; the text is read when first
    needed (a project file nothing analyses is only stat'ed on a warm run)."""

    __slots__ = ("path", "digest", "module", "is_package", "declared", "_source")

    def __init__(self, path: str, digest: str, module: str, is_package: bool, source: Optional[Source] = None, declared: Optional[str] = None) -> None:
        self.path, self.digest, self.module, self.is_package = path, digest, module, is_package
        self.declared = declared  # its declarations digest, when the project's state knows it
        self._source = source

    @property
    def source(self) -> Source:
        if self._source is None:
            self._source = read_source(self.path)
        return self._source


def lint(
    paths: Sequence[str],
    settings: Settings,
    versions: LibraryVersions,
    *,
    jobs: Optional[int] = None,
    cache: Optional[ResultCache] = None,
    stdin: Optional[tuple[str, str | bytes]] = None,
    project: Optional[Path] = None,
) -> LintReport:
    """Lint `paths` (and `stdin` as (filename, text or bytes as read)); never raises for a bad file.

    With `project` (its root folder), every lintable file of the project is indexed and analysed
    too, so that a file gets the findings it gets in a run over the whole project whatever else is
    named (pre-commit names only the staged files); findings and errors are reported for the named
    files only."""
    with _fewer_collections():
        return _lint(paths, settings, versions, jobs, cache, stdin, project)


@contextmanager
def _fewer_collections() -> Iterator[None]:
    """Parsing allocates millions of short-lived, acyclic nodes; the default collector thresholds made
    it rescan the long-lived index again and again (measured: a third of the run on transformers)."""
    thresholds = gc.get_threshold()
    gc.set_threshold(100_000, 50, 100)
    try:
        yield
    finally:
        gc.set_threshold(*thresholds)


def _lint(
    paths: Sequence[str],
    settings: Settings,
    versions: LibraryVersions,
    jobs: Optional[int],
    cache: Optional[ResultCache],
    stdin: Optional[tuple[str, str | bytes]],
    project: Optional[Path],
) -> LintReport:
    report = LintReport()
    listing = Listing() if project is not None else None
    discovery = discover([p for p in paths if p != "-"], settings, listing)
    state = ProjectFiles(project, settings, cache, discovery.files, paths, listing) if project is not None else None
    unchanged = _unchanged_results(state, discovery, settings, versions, cache) if state is not None and stdin is None else None
    cwd = os.path.join(os.getcwd(), "")
    report.errors.extend(FileError(p, "no such file or directory") for p in discovery.missing)
    report.errors.extend(FileError(display_path(str(path), cwd), message) for path, message in discovery.unreadable)
    if unchanged is not None:
        named, results = unchanged
        report.files_checked = len(named)
    else:
        named, results = _changed_results(discovery, settings, versions, jobs, cache, stdin, state, report)
    findings: dict[tuple, Finding] = {}
    for path in sorted(results):
        result = results[path]
        if result["error"]:
            if path in named:
                report.errors.append(FileError(path, result["error"]))
            continue
        for data in sorted(result["findings"], key=lambda f: f["message"]):
            if data["path"] not in named:
                continue
            finding = Finding.from_dict(data)
            # A callee checkpointed from several sites is one problem at one place: report it once.
            findings.setdefault((finding.path, finding.cell, finding.line, finding.column, finding.code), finding)
        if path in named:
            report.unresolved_sites += result["unresolved"]
    report.findings = sorted(findings.values(), key=lambda f: (f.path, f.cell or 0, f.line, f.column, f.code))
    report.errors.sort()
    return report


def _changed_results(
    discovery: Discovery,
    settings: Settings,
    versions: LibraryVersions,
    jobs: Optional[int],
    cache: Optional[ResultCache],
    stdin: Optional[tuple[str, str | bytes]],
    state: Optional[ProjectFiles],
    report: LintReport,
) -> tuple[frozenset[str], dict[str, dict]]:
    """The named files (as shown) and the results that can report into them: from the cache while
    valid, else analysed."""
    read: _Read = []
    units = _read(discovery, settings, stdin, report, state, read)
    named = frozenset(u.path for u in units)
    if state is not None:
        units += _project_units(state, settings, units, read)
    jobs = max(1, jobs or os.cpu_count() or 1)
    summaries = _Summaries(units, cache, jobs, report, named)
    if state is not None:
        _remember(state, read, summaries)
    # The texts of files that need no analysis go now, before workers are forked (transformers: 115 MB).
    read.clear()
    report.files_checked = sum(path in named for path in summaries.declared)
    digests = {u.path: u.digest for u in units}
    key_prefix = _key_prefix(settings, versions, summaries.fingerprint())
    silent = state.silent_for(key_prefix, digests, named) if state is not None else set()
    keys = {path: f"{key_prefix}:{path}:{digests[path]}" for path in summaries.declared if path not in silent}
    # Every file has a cached verdict, "cannot matter" included: with nothing changed, no summary is
    # decoded, no index is built and nothing is parsed.
    cached = cache.get_many(keys.values(), _valid_results) if cache else {}
    results = _valid_cached(keys, cached, digests)
    missed = [u for u in units if u.path in keys and u.path not in results]
    del units  # only the missed files' sources are needed from here on
    if missed:
        fresh = _analyze_missed(missed, summaries.all(), (versions, settings, digests), jobs)
        if cache:
            cache.put_many({keys[path]: [result, *cached.get(keys[path], ())][:_RESULT_VARIANTS] for path, result in fresh.items()})
        results.update(fresh)
    if state is not None:
        state.note_results(key_prefix, results, digests)
        state.save()
    return named, results


def _unchanged_results(state: ProjectFiles, discovery: Discovery, settings: Settings, versions: LibraryVersions, cache: Optional[ResultCache]) -> Optional[tuple[frozenset[str], dict[str, dict]]]:
    """What `_changed_results` gives when no project file changed since the project's state was
    written and every result needed is cached: from the state's head alone, no file read, no
    summary decoded (None otherwise)."""
    unchanged = state.unchanged
    if unchanged is None or cache is None:
        return None
    key_prefix = _key_prefix(settings, versions, unchanged.fingerprint)
    if key_prefix != unchanged.prefix or not all(str(path) in unchanged.digests and str(path) not in unchanged.failed for path in discovery.files):
        return None
    named = frozenset(display_path(str(path), state.cwd) for path in discovery.files)
    wanted = named.union(*(unchanged.into.get(path, ()) for path in named))
    keys = {path: f"{key_prefix}:{path}:{unchanged.digest(path)}" for path in wanted}
    cached = cache.get_many(keys.values(), _valid_results)
    # The digests the results' validity is checked against: of the files they depend on.
    mentioned = set(keys).union(*(result["depends"] for results in cached.values() for result in results))
    digests = {path: digest for path in mentioned if (digest := unchanged.digest(path)) is not None}
    results = _valid_cached(keys, cached, digests)
    return (named, results) if len(results) == len(keys) else None


def _key_prefix(settings: Settings, versions: LibraryVersions, fingerprint: str) -> str:
    return f"r:{__version__}:{settings.fingerprint()}:{versions.torch.text}:{versions.transformers.text}:{fingerprint}"


def _valid_cached(keys: dict[str, str], cached: dict[str, Any], digests: dict[str, str]) -> dict[str, dict]:
    """Each file's first cached result still valid for the project's files as they are."""
    results = {}
    for path, key in keys.items():
        valid = next((result for result in cached.get(key, ()) if _still_valid(result, digests)), None)
        if valid is not None:
            results[path] = valid
    return results


_FINDING_TYPES = {"path": str, "line": int, "column": int, "end_line": int, "end_column": int, "code": str, "message": str, "help": str, "severity": str}
_SEVERITIES = frozenset(s.value for s in Severity)


def _valid_results(value: Any) -> bool:
    """A cached row of results, as `_analyze` makes them; anything else is a miss."""
    return isinstance(value, list) and 0 < len(value) <= _RESULT_VARIANTS and all(map(_valid_result, value))


def _valid_result(result: Any) -> bool:
    return (
        isinstance(result, dict)
        and result.keys() == _CANNOT_MATTER.keys()
        and type(result["unresolved"]) is int
        and (result["error"] is None or isinstance(result["error"], str))
        and isinstance(result["depends"], dict)
        and all(isinstance(p, str) and isinstance(d, str) for p, d in result["depends"].items())
        and isinstance(result["findings"], list)
        and all(map(_valid_finding, result["findings"]))
    )


_EDIT_TYPES = {"line": int, "column": int, "end_line": int, "end_column": int, "content": str}


def _valid_finding(finding: Any) -> bool:
    return (
        isinstance(finding, dict)
        and finding.keys() == {*_FINDING_TYPES, "fixes", "cell"}
        and all(type(finding[name]) is kind for name, kind in _FINDING_TYPES.items())
        and finding["severity"] in _SEVERITIES
        and _optional_int(finding["cell"])
        and isinstance(finding["fixes"], list)
        and all(map(_valid_fix, finding["fixes"]))
    )


def _valid_fix(fix: Any) -> bool:
    return (
        isinstance(fix, dict)
        and fix.keys() == {"applicability", "message", "edits"}
        and fix["applicability"] in (SAFE, UNSAFE)
        and isinstance(fix["message"], str)
        and isinstance(fix["edits"], list)
        and all(
            isinstance(edit, dict)
            and edit.keys() == {*_EDIT_TYPES, "cell"}
            and all(type(edit[name]) is kind for name, kind in _EDIT_TYPES.items())
            and _optional_int(edit["cell"])
            for edit in fix["edits"]
        )
    )


def _optional_int(value: Any) -> bool:
    return value is None or type(value) is int


_Read = List[Tuple[str, os.stat_result, "_Unit"]]


def _read(discovery: Discovery, settings: Settings, stdin: Optional[tuple[str, str | bytes]], report: LintReport, state: Optional[ProjectFiles], read: _Read) -> list[_Unit]:
    """The named files (and stdin)."""
    units: list[_Unit] = []
    cwd = os.path.join(os.getcwd(), "")
    for path in discovery.files:
        shown = display_path(str(path), cwd)
        try:
            units.append(_load(str(path), shown, settings, state, read))
        except SourceError as error:
            report.errors.append(FileError(shown, str(error)))
    if stdin is not None:
        filename, content = stdin
        try:
            units.append(_unit(decode(filename, content if isinstance(content, bytes) else content.encode()), Path(filename)))
        except SourceError as error:  # undecodable, or a notebook that is not one
            report.errors.append(FileError(filename, str(error)))
    return units


def _project_units(state: ProjectFiles, settings: Settings, named: list[_Unit], read: _Read) -> list[_Unit]:
    """The project's other lintable files (excludes respected), as the index of a run over the
    whole project sees them: a file named (or given on stdin) is taken as named, and what cannot be
    read is left out (its errors belong to a run that names it)."""
    if state.covered:
        return []
    given = {os.path.abspath(u.path) for u in named}
    cwd = os.path.join(os.getcwd(), "")
    units: list[_Unit] = []
    for path in state.paths:
        if path in given:
            continue
        try:
            units.append(_load(path, display_path(str(path), cwd), settings, state, read))
        except SourceError:
            continue
    return units


def _load(path: str, shown: str, settings: Settings, state: Optional[ProjectFiles], read: _Read) -> _Unit:
    """The file at the absolute `path`: from the project's state while it is unchanged (not read),
    else read; a file read goes to `read` with its stat from before the read, for `_remember`."""
    stat: Optional[os.stat_result]
    if state is not None and path in state.stats:
        stat = state.stats[path]
    else:
        try:
            stat = os.stat(path)
        except OSError:
            stat = None  # read_source says why
    if state is not None and stat is not None and stat.st_size <= settings.max_file_size:
        known = state.known(path, stat)
        if known is not None:
            return _Unit(shown, known.digest, known.module, known.is_package, declared=known.declared)
    unit = _unit(read_source(shown, settings.max_file_size), Path(path))
    if stat is not None:
        read.append((path, stat, unit))
    return unit


def _remember(state: ProjectFiles, read: _Read, summaries: _Summaries) -> None:
    """Keep what this run learnt about the files it read, for the next run."""
    for path, stat, unit in read:
        declared = summaries.declared.get(unit.path)
        state.record(path, stat, Known(unit.digest, unit.module, unit.is_package, declared[1] if declared else None))


def _release_freed_memory() -> None:
    """Forked workers start with every page the parent holds, and the sources and summary data
    freed by now stay in the C heap: hand them back to the OS first (glibc; a no-op elsewhere)."""
    import ctypes

    gc.collect()
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass


def _still_valid(result: dict, digests: dict[str, str]) -> bool:
    """A cached result also depends on the other files whose bodies its analysis read."""
    return all(digests.get(path) == digest for path, digest in result.get("depends", {}).items())


def _unit(source: Source, path: Optional[Path] = None) -> _Unit:
    module, is_package = module_name_for(path or Path(source.path))
    return _Unit(source.path, source.digest, module, is_package, source)


class _Summaries:
    """The index pass, decoded only when needed: a warm run reads just each file's declarations digest."""

    def __init__(self, units: list[_Unit], cache: Optional[ResultCache], jobs: int, report: LintReport, named: frozenset[str]) -> None:
        from ckptlint.index import ModuleSummary

        self.cache = cache
        self.keys = {u.path: f"s:{__version__}:{u.module}:{u.is_package}:{u.path}:{u.digest}" for u in units}
        self.loaded: dict[str, ModuleSummary] = {}
        # path -> (module, declarations digest) of every file with a summary, in discovery order.
        self.declared: dict[str, tuple[str, str]] = {}
        # The project's state knows the declarations of files unchanged since the last run.
        known = {_digest_key(self.keys[u.path]): u.declared for u in units if u.declared is not None}
        if cache:
            asked = (_digest_key(self.keys[u.path]) for u in units if u.declared is None)
            known.update(cache.get_many(asked, lambda digest: isinstance(digest, str)))
        todo = [u for u in units if _digest_key(self.keys[u.path]) not in known]
        fresh = dict(_map(_summarize, todo, _workers(jobs, todo), None, "indexing", lambda unit, message: (unit.path, json.dumps({"error": message}))))
        stored: dict[str, str] = {}
        for unit in units:
            path, key = unit.path, self.keys[unit.path]
            if path not in fresh:
                self.declared[path] = (unit.module, known[_digest_key(key)])
                continue
            # One fresh summary's data alive at a time: the parent's heap stays compact for the workers it forks.
            text = fresh.pop(path)
            data = json.loads(text)
            if "error" in data:
                if path in named:
                    report.errors.append(FileError(path, data["error"]))
                continue
            self.loaded[path] = summary = ModuleSummary.from_json(data)
            self.declared[path] = (unit.module, summary.digest)
            if cache:
                stored.update({key: text, _digest_key(key): json.dumps(summary.digest)})
        if cache:
            cache.put_many_json(stored)

    def fingerprint(self) -> str:
        from ckptlint.index import project_fingerprint

        return project_fingerprint(dict(self.declared.values()))

    def all(self) -> dict[str, ModuleSummary]:
        """Every file's summary by path, the cached ones decoded now."""
        from ckptlint.index import ModuleSummary

        wanted = [path for path in self.declared if path not in self.loaded]
        stored = self.cache.get_many((self.keys[path] for path in wanted), lambda data: isinstance(data, dict)) if self.cache and wanted else {}
        for path in wanted:
            summary = _decoded(stored.get(self.keys[path]))
            if summary is None:  # only its digest survived in the cache, or a malformed row
                summary = ModuleSummary.from_json(json.loads(_summarize(_unit(read_source(path)))[1]))
            self.loaded[path] = summary
        return {path: self.loaded[path] for path in self.declared}


def _decoded(data: Optional[dict]) -> Optional[ModuleSummary]:
    from ckptlint.index import ModuleSummary

    try:
        return None if data is None else ModuleSummary.from_json(data)
    except (KeyError, TypeError, ValueError, AttributeError):
        return None


def _digest_key(summary_key: str) -> str:
    return "d" + summary_key[1:]


_CANNOT_MATTER = {"findings": [], "unresolved": 0, "error": None, "depends": {}}


def _analyze_missed(missed: list[_Unit], summaries: dict[str, ModuleSummary], context: tuple, jobs: int) -> dict[str, dict]:
    """Prefilter and analyse the files without a valid cached verdict. Empties `missed`: forked
    workers should not inherit the sources of files nobody analyses."""
    from ckptlint.index import ProjectIndex
    from ckptlint.relevance import can_matter

    versions, settings, digests = context
    index = ProjectIndex({s.name: s for s in summaries.values()})
    gc.freeze()  # the index lives as long as the run: keep it out of every collection
    results = {u.path: _CANNOT_MATTER for u in missed}
    todo = [(u, summaries[u.path]) for u in missed if _readable(u) and can_matter(u.source.text, summaries[u.path], index, settings)]
    missed.clear()
    if todo:
        import ckptlint.model.builder  # noqa: F401  (forked workers inherit LibCST instead of each importing it)
    workers = _workers(jobs, [u for u, _ in todo])
    if workers > 1:
        _release_freed_memory()
    results.update(_map(_analyze, todo, workers, (index, versions, settings, digests), "analysing", _failed))
    return results


def _readable(unit: _Unit) -> bool:
    """A project file read only now (it was unchanged when the run started) may be gone."""
    try:
        unit.source
    except SourceError:
        return False
    return True


def _workers(jobs: int, units: list[_Unit]) -> int:
    """All `jobs` when the work is big enough to pay for forking them (not in the pre-commit case)."""
    return jobs if len(units) > 1 and sum(len(u.source.text) for u in units) >= _PARALLEL_MIN_BYTES else 1


# --- per-file work (runs in worker processes) -------------------------------------------------------

_STATE: Any = None


def _init_worker(state: Any) -> None:
    global _STATE
    _STATE = state


def _start_worker(state: Any, parent: int) -> None:
    become_worker(parent)
    _init_worker(state)


def _map(
    func: Callable[[Any], tuple[str, Any]], units: list[Any], jobs: int, state: Any, action: str, crashed: Callable[[Any, str], tuple[str, Any]]
) -> list[tuple[str, Any]]:
    """Ordered results; a process pool only when it pays. `action` names the work for --progress.
    A worker that dies (a crash in native code) costs only the file it was on: the rest is redone
    one file at a time until that file is found, and `crashed(unit, message)` stands for its result."""
    tick = progress.phase(action, len(units))
    if jobs <= 1 or len(units) < 2:
        _init_worker(state)
        return [_ticked(func(u), tick) for u in units]
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor
    from concurrent.futures.process import BrokenProcessPool

    method = "fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn"
    context = multiprocessing.get_context(method)
    chunksize = max(1, len(units) // (jobs * 8))
    results: list[tuple[str, Any]] = []
    while len(results) < len(units):
        pending = units[len(results) :]
        pool = ProcessPoolExecutor(jobs, mp_context=context, initializer=_start_worker, initargs=(state, os.getpid()))
        try:
            for result in pool.map(func, pending, chunksize=chunksize):
                results.append(_ticked(result, tick))
            pool.shutdown()
        except BaseException as error:
            stop(pool)  # Ctrl-C, or a dead worker: nothing queued runs on
            if not isinstance(error, BrokenProcessPool):
                raise
            if jobs == 1 and chunksize == 1:  # the file in flight is the one that killed the worker
                message = f"internal error in ckptlint {__version__} (please report it): the process analysing this file crashed"
                results.append(_ticked(crashed(units[len(results)], message), tick))
            jobs, chunksize = 1, 1
    return results


def _ticked(result: Any, tick: Callable[[], None]) -> Any:
    tick()
    return result


def _summarize(unit: _Unit) -> tuple[str, str]:
    """The summary as JSON text: one string crosses the process boundary and goes to the cache."""
    from ckptlint.index import summarize
    from ckptlint.syntax import syntax_error_message

    path = unit.path
    args = (unit.source.text, path, unit.module, unit.is_package)
    try:
        try:
            summary = summarize(*args)
        except RecursionError:
            # What `compile()` rejects, at the default limit, is a parse error; deeper walks are not.
            ast.parse(unit.source.text)
            summary = run_deep(summarize, *args)
        return path, summary.to_json_text()
    except SyntaxError as error:
        message = syntax_error_message(error, unit.source.text)
    except (ValueError, RecursionError, MemoryError) as error:
        message = f"cannot parse: {describe(error)}"
    except Exception as error:  # noqa: BLE001 - one file never stops the others
        message = _internal_error(error)
    return path, json.dumps({"error": message})


def _internal_error(error: BaseException) -> str:
    return f"internal error in ckptlint {__version__} (please report it): {describe(error)}"


def _parse(text: str) -> cst.Module:
    """`cst.parse_module` without re-validating every node the parser builds (validation guards
    hand-built trees; it was 15% of the parse). LibCST's own comment on `__post_init__` suggests
    the same; a LibCST without that hook is simply parsed as is."""
    import libcst as cst
    from libcst._nodes.base import CSTNode

    validate = CSTNode.__dict__.get("__post_init__")
    if validate is None:
        return cst.parse_module(text)
    CSTNode.__post_init__ = _trusted  # type: ignore[method-assign]
    try:
        return cst.parse_module(text)
    finally:
        CSTNode.__post_init__ = validate  # type: ignore[method-assign]


def _trusted(node: cst.CSTNode) -> None:
    """Parser output is valid by construction."""


def _parse_valid(text: str) -> cst.Module:
    """Parse text that `ast` accepted: past LibCST's limit on adjacent string literals, with the
    long runs cut (a ParserSyntaxError that remains is LibCST's limit, not the file's)."""
    import libcst as cst

    try:
        return _parse(text)
    except cst.ParserSyntaxError:
        shortened = without_long_string_runs(text)
        if shortened == text:
            raise
    return _parse(shortened)


@dataclass
class _Other:
    """Another file's model, cut to the top-level definitions asked for so far (None: whole)."""

    model: FileModel
    source: Source
    sliced: SourceSlice
    names: Optional[frozenset[str]]


class _Models:
    """Other files' models, built on demand when a checkpointed callee lives there (one per worker)."""

    # LibCST trees are large: keep a few recent ones (callees usually sit next to their callers).
    capacity = 24

    def __init__(self, index: ProjectIndex, versions: LibraryVersions, settings: Settings) -> None:
        self.index, self.versions, self.settings = index, versions, settings
        self.by_module: OrderedDict[str, Optional[_Other]] = OrderedDict()
        # What the current analysis used: the files its cached result depends on, and the trees
        # its findings in other files point into (even if evicted or re-cut since).
        self.used: dict[int, _Other] = {}
        # Files searched for calls of a function (a new call there must re-run the analysis).
        self.consulted: set[str] = set()
        self.current: Optional[FileModel] = None
        self.current_source: Optional[Source] = None
        self.complete: frozenset[str] = frozenset()

    def start(self, model: FileModel, source: Source, sliced: SourceSlice) -> None:
        """A new analysis: `model` is the file analysed, from `source` cut to `sliced`."""
        self.used.clear()
        self.consulted.clear()
        self.current, self.current_source = model, source
        kept = set(sliced.lines) if sliced.lines is not None else None
        # Top-level definitions the cut kept whole (a class may have lost methods nothing reaches).
        self.complete = frozenset(
            block.binds
            for block in self.index.modules[model.module].blocks
            if block.definition and (kept is None or (block.start in kept and all(m.start in kept for m in block.members)))
        )

    def add(self, model: FileModel, source: Source) -> None:
        """A whole file's model, analysed for its own sake: it serves every callee in it."""
        from ckptlint.relevance import whole_source

        self._keep(model.module, _Other(model, source, whole_source(source.text, self.index.modules[model.module]), None))

    def get(self, module: str, qualname: str) -> Optional[FileModel]:
        """The model of `module` that holds the function `qualname` (`module` alone: its module-level code)."""
        name = qualname[len(module) + 1 :].split(".", 1)[0]
        current = self.current
        if current is not None and current.module == module and (not name or name in self.complete or qualname in current.functions):
            return current
        other = self.by_module.get(module)
        if module not in self.by_module or (other is not None and other.names is not None and name not in other.names):
            other = self._load(module, frozenset({name} if name else ()) | (other.names if other else frozenset()))
            self._keep(module, other)
        else:
            self.by_module.move_to_end(module)
        if other is None:
            return None
        self.used[id(other)] = other
        return other.model

    def callers(self, target: str) -> Optional[list[tuple[FileModel, CallRecord]]]:
        """Every call of the function `target` in the project's files that may hold one (None: too
        many places to look)."""
        blocks = self.index.caller_blocks(target)
        if blocks is None:
            return None
        found: dict[int, tuple[FileModel, CallRecord]] = {}
        for summary, block in blocks:
            self.consulted.add(summary.path)
            model = self.get(summary.name, f"{summary.name}.{block}" if block else summary.name)
            for call in model.calls.get(target, ()) if model is not None else ():
                found.setdefault(id(call), (model, call))
        return list(found.values())

    def _keep(self, module: str, other: Optional[_Other]) -> None:
        self.by_module[module] = other
        self.by_module.move_to_end(module)
        while len(self.by_module) > self.capacity:
            self.by_module.popitem(last=False)

    def _load(self, module: str, names: frozenset[str]) -> Optional[_Other]:
        import libcst as cst

        from ckptlint.model import build_file_model
        from ckptlint.relevance import definitions_source

        summary = self.index.modules.get(module)
        if summary is None:
            return None
        try:
            # The file analysed may be unsaved (stdin): its other definitions come from the text linted.
            source = self.current_source if self.current is not None and self.current.module == module else read_source(summary.path)
            sliced = definitions_source(source.text, summary, names)
            tree = _parse_valid(sliced.text)
        except (SourceError, cst.ParserSyntaxError, RecursionError):
            return None
        model = build_file_model(tree, summary.path, summary, self.index, self.versions, self.settings)
        model.models = self.get
        return _Other(model, source, sliced, names)


_MODELS: Optional[_Models] = None


def _analyze(item: tuple[_Unit, ModuleSummary]) -> tuple[str, dict]:
    try:
        return run_deep(_analyze_file, *item)
    except Exception as error:  # noqa: BLE001 - a bug in one file's analysis must not stop the run
        if too_deep(error):
            return _failed(item, "cannot analyse: the code is nested deeper than the analysis can follow")
        return _failed(item, _internal_error(error))


def _failed(item: tuple[_Unit, ModuleSummary], message: str) -> tuple[str, dict]:
    return item[0].path, {"findings": [], "unresolved": 0, "depends": {}, "error": message}


def _analyze_file(unit: _Unit, summary: ModuleSummary) -> tuple[str, dict]:
    import libcst as cst

    from ckptlint.model import build_file_model
    from ckptlint.model.caller_modes import handed_generates
    from ckptlint.model.grad_free import grad_free_checkpoints
    from ckptlint.model.summaries import Resolver
    from ckptlint.model.walk import descendants
    from ckptlint.relevance import relevant_source

    global _MODELS
    index, versions, settings, digests = _STATE
    index.cited.clear()
    if _MODELS is None or _MODELS.index is not index:
        _MODELS = _Models(index, versions, settings)
    path = unit.path
    result: dict[str, Any] = {"findings": [], "unresolved": 0, "error": None, "depends": {}}
    sliced = relevant_source(unit.source.text, summary, index, settings)
    try:
        tree = _parse_valid(sliced.text)
    except cst.ParserSyntaxError as error:
        # `ast` parsed the whole file: this is beyond what LibCST can parse, not a syntax error.
        line = sliced.original_line(min(error.raw_line, len(sliced.lines))) if sliced.lines else error.raw_line
        result["error"] = f"cannot analyse: LibCST cannot parse this valid Python (line {line}: {error.message})"
        return path, result
    model = build_file_model(tree, path, summary, index, versions, settings)
    model.models = _MODELS.get
    _MODELS.start(model, unit.source, sliced)
    if sliced.lines is None:  # a cut model cannot serve other files' callees
        _MODELS.add(model, unit.source)
    resolver = Resolver(model, _MODELS.callers)
    model.sites = resolver.sites()
    model.value_in_region = resolver.in_region
    model.resolved = resolver.value
    model.grad_free_checkpoints = grad_free_checkpoints(model, resolver)
    model.cache_uses.extend(handed_generates(model, resolver))
    result["unresolved"] = sum(not site.resolved for site in model.sites)
    rules = [rule() for rule in all_rules()]
    diagnostics = [(rule, d) for rule in rules for d in rule.check(model)]
    by_path: dict[str, list] = {}
    for rule, diagnostic in diagnostics:
        by_path.setdefault(diagnostic.path or path, []).append((rule, diagnostic))
    for where, group in by_path.items():
        if where == path:
            result["findings"].extend(_findings(model, unit.source, group, settings, sliced))
            continue
        for other in _MODELS.used.values():
            if other.model.path == where:
                inside = {id(node) for node in descendants(other.model.tree)}
                mine = [(rule, d) for rule, d in group if id(d.node) in inside]
                result["findings"].extend(_findings(other.model, other.source, mine, settings, other.sliced))
    others = ({other.model.path for other in _MODELS.used.values()} | index.cited | _MODELS.consulted) - {path}
    result["depends"].update((other, digests[other]) for other in others if other in digests)
    return path, result


def _findings(model: FileModel, source: Source, group: list, settings: Settings, sliced: SourceSlice) -> list[dict]:
    """Position, filter (selection, per-file ignores, suppressions) and serialise one file's diagnostics."""
    from ckptlint.suppression import Suppressions

    group = [(rule, d) for rule, d in group if settings.is_enabled(rule.code, model.path)]
    if not group or Suppressions.disables_file(source.text):
        return []
    from ckptlint.fixes import anchors, plan_nodes, to_fix
    from ckptlint.lines import lines_of, newline_of
    from ckptlint.notebooks import relocate

    plans = [plan for _, d in group for plan in d.fixes]
    anchored = anchors(model.tree, plans) if plans else {}
    positions = _positions(model.tree, sliced, [d.node for _, d in group] + plan_nodes(plans) + list(anchored.values()))
    lines, newline = lines_of(source.text), newline_of(source.text)
    suppressions = Suppressions(lines)
    found = []
    for rule, diagnostic in group:
        line, column, end_line, end_column = positions[id(diagnostic.node)]
        if suppressions.suppresses(line, rule.code):
            continue
        finding = Finding(
            path=model.path,
            line=line,
            column=column + 1,
            end_line=end_line,
            end_column=end_column + 1,
            code=rule.code,
            message=diagnostic.message,
            help=diagnostic.help,
            severity=settings.severity_for(rule.code, diagnostic.severity or rule.severity),
            fixes=tuple(fix for fix in (to_fix(plan, positions, anchored, lines, newline) for plan in diagnostic.fixes) if fix),
        )
        if source.cells:
            finding = relocate(finding, source.cells)
        found.append(finding.to_dict())
    return found


def _positions(tree: cst.Module, sliced: SourceSlice, nodes: list[cst.CSTNode]) -> dict[int, tuple[int, int, int, int]]:
    """(line, column, end line, end column) in the file of each node, by node id.

    Positions cost a codegen pass: it runs only over the top-level statements that hold the nodes,
    each placed at the line where `ast` says it starts.
    """
    from libcst.metadata import MetadataWrapper, PositionProvider

    from ckptlint.model.walk import descendants

    wanted = {id(node) for node in nodes}
    found: dict[int, tuple[int, int, int, int]] = {}
    parts: list[tuple[cst.Module, int]]
    if sliced.starts is None or len(sliced.starts) != len(tree.body):
        parts = [(tree, 0)]
    else:
        parts = []
        for start, statement in zip(sliced.starts, tree.body):
            if wanted.intersection(map(id, descendants(statement))):
                # The module keeps its indentation and newline defaults; codegen starts at the statement.
                parts.append((tree.with_changes(body=[statement], header=[], footer=[]), start - 1 - len(statement.leading_lines)))
    for module, offset in parts:
        positions = MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)
        for node, where in positions.items():
            if id(node) in wanted:
                line, end_line = sliced.original_line(where.start.line + offset), sliced.original_line(where.end.line + offset)
                found[id(node)] = (line, where.start.column, end_line, where.end.column)
    return found


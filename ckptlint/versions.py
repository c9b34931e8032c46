"""Library versions whose defaults change checkpoint semantics, resolved without importing them."""

from __future__ import annotations

import importlib.machinery
import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Optional, Sequence, Tuple

from ckptlint.config import ConfigError, Settings, read_toml

Version = Tuple[int, ...]


@dataclass(frozen=True)
class Epoch:
    """Releases from `version` up to the next epoch's, which share one checkpoint behaviour."""

    version: Version
    reentrant_by_default: bool  # the hazard: code that does not choose a mode runs reentrant
    note: str


# Representative versions, oldest first. The first epoch also stands for every older release and
# the last for every newer one ("newest known behaviour").
EPOCHS: dict[str, tuple[Epoch, ...]] = {
    "torch": (
        Epoch((2, 0), True, "use_reentrant omitted: reentrant, with a warning"),
        Epoch((2, 4), True, "use_reentrant omitted: still reentrant, with a warning"),
        Epoch((2, 13), True, "newest measured: use_reentrant omitted is still reentrant"),
    ),
    "transformers": (
        Epoch((4, 34), True, "no gradient_checkpointing_kwargs: no flag passed, reentrant"),
        Epoch((4, 36), True, "gradient_checkpointing_kwargs=None -> {}: reentrant, torch warns"),
        Epoch((4, 57), True, 'gradient_checkpointing_kwargs=None -> {"use_reentrant": True}'),
        Epoch((5, 0), False, 'gradient_checkpointing_kwargs=None -> {"use_reentrant": False}'),
        Epoch((5, 23), False, "newest measured: non-reentrant by default"),
    ),
}


@dataclass(frozen=True)
class AssumedVersion:
    library: str  # "torch" | "transformers"
    version: Version
    source: str  # where the version came from, for messages

    @property
    def text(self) -> str:
        return ".".join(map(str, self.version))


@dataclass(frozen=True)
class LibraryVersions:
    torch: AssumedVersion
    transformers: AssumedVersion


_VERSION_RE = re.compile(
    r"""^\s*v?
    (?P<release>\d+(?:\.\d+)*)
    (?:[-_.]?(?:a|b|c|rc|alpha|beta|pre|preview|post|rev|r|dev)[-_.]?\d*)*  # pre/post/dev parts
    (?:\+[a-z0-9]+(?:[-_.][a-z0-9]+)*)?  # local version, e.g. +cpu
    \s*$""",
    re.VERBOSE | re.IGNORECASE,
)


def parse_version(text: str) -> Version | None:
    """The release numbers of a PEP 440-ish version ("2.13.0+cpu" -> (2, 13, 0)), or None."""
    match = _VERSION_RE.match(text)
    return tuple(int(part) for part in match["release"].split(".")) if match else None


def epoch_for(library: str, version: Version) -> Epoch:
    """The behaviour epoch a release belongs to."""
    epochs = EPOCHS[library]
    key = _key(version)
    return next((e for e in reversed(epochs) if _key(e.version) <= key), epochs[0])


def torch_default_reentrant(v: AssumedVersion) -> bool:
    """Whether torch.utils.checkpoint runs reentrant when use_reentrant is omitted."""
    return epoch_for("torch", v.version).reentrant_by_default


def transformers_default_reentrant(v: AssumedVersion) -> bool:
    """Whether gradient_checkpointing_enable() without kwargs makes checkpointing reentrant."""
    return epoch_for("transformers", v.version).reentrant_by_default


# generate() on a model in train mode with checkpointing on: every measured release drops the cache
# in the checkpointed layers. Before this release generate then re-ran the whole sequence each step
# (measured on 4.40.0 and 4.48.3: the same tokens as eval mode); from it on, generate still feeds only
# the new token, which attends over itself alone (measured on 4.53.3, 4.57.1 and 5.23: later tokens
# differ). 4.49-4.52 are not measured and count as before.
GENERATION_WITHOUT_CONTEXT_SINCE: Version = (4, 53)


# Non-reentrant checkpointing stops its recompute once the last tensor saved in forward has been
# recomputed (`early_stop=True`, `set_checkpoint_early_stop`), since the non-reentrant rewrite of torch
# 2.1; measured on 2.13 (rules/CKPT004.md). Older releases recompute the whole function.
EARLY_STOP_SINCE: Version = (2, 1)


def recompute_stops_early(v: AssumedVersion) -> bool:
    """Whether torch's non-reentrant recompute ends after the last saved tensor by default."""
    return _key(v.version) >= _key(EARLY_STOP_SINCE)


# transformers' Trainer sets `model.config.use_cache = args.use_cache` (TrainingArguments.use_cache,
# default False) when it is built, since 5.0: read in the 5.0.0, 5.5.0, 5.10.0 and 5.23.0 sources and
# measured on 5.23 (no "incompatible with gradient checkpointing" warning, use_cache False after
# training); 4.57.6 leaves the model's config alone (measured: warning, use_cache still True).
TRAINER_SETS_USE_CACHE_SINCE: Version = (5, 0)


def trainer_sets_use_cache(v: AssumedVersion) -> bool:
    """Whether building a Trainer overwrites the model's `config.use_cache` with its arguments'."""
    return _key(v.version) >= _key(TRAINER_SETS_USE_CACHE_SINCE)


def generation_loses_context(v: AssumedVersion) -> bool:
    """Whether generate() in train mode with checkpointing on decodes each step without the earlier tokens."""
    return _key(v.version) >= _key(GENERATION_WITHOUT_CONTEXT_SINCE)


def resolve_versions(
    settings: Settings,
    project_root: Path | None,
    cli_torch: str | None = None,
    cli_transformers: str | None = None,
) -> LibraryVersions:
    """Pick each library's version: CLI, settings, declared ranges, installed, newest known."""
    declared = list(_declared_requirements(project_root)) if project_root is not None else []

    def resolve(library: str, cli: str | None, configured: str | None) -> AssumedVersion:
        if cli is not None:
            return _explicit(library, cli, f"--{library}-version")
        if configured is not None:
            return _explicit(library, configured, f"[tool.ckptlint] {library}-version")
        return (
            _from_ranges(library, declared)
            or _installed(library)
            or AssumedVersion(library, EPOCHS[library][-1].version, "newest known behaviour")
        )

    return LibraryVersions(
        torch=resolve("torch", cli_torch, settings.torch_version),
        transformers=resolve("transformers", cli_transformers, settings.transformers_version),
    )


def _explicit(library: str, text: str, source: str) -> AssumedVersion:
    version = parse_version(text)
    if version is None:
        raise ConfigError(f"invalid version {text!r} for {source} (expected e.g. '2.13')")
    return AssumedVersion(library, version, source)


def _installed(library: str) -> AssumedVersion | None:
    # Distribution metadata only: importing torch would take seconds and may not even work here.
    text = distribution_version(library)
    if text is None:
        return None
    version = parse_version(text)
    return AssumedVersion(library, version, f"installed {library} {text}") if version else None


def distribution_version(name: str) -> Optional[str]:
    """What `importlib.metadata.version(name)` answers (None: not installed), found the same way
    (the first `.dist-info` of that name along sys.path) but read directly: importing
    importlib.metadata (email, zipfile, csv) was a tenth of a warm run. Any other layout (zip or egg
    entries, egg-info, another metadata finder) is left to importlib.metadata."""
    if any(getattr(finder, "find_distributions", None) is not None and finder is not importlib.machinery.PathFinder for finder in sys.meta_path):
        return _metadata_version(name)
    wanted = _distribution_name(name)
    for entry in sys.path:
        root = entry or os.curdir
        if root.endswith(".egg") or os.path.isfile(root):
            return _metadata_version(name)
        try:
            children = os.listdir(root)
        except OSError:
            continue
        for child in children:
            low = child.lower()
            if low.endswith((".dist-info", ".egg-info")) and _distribution_name(low.rpartition(".")[0].partition("-")[0]) == wanted:
                version = _version_field(os.path.join(root, child, "METADATA")) if low.endswith(".dist-info") else None
                return version if version is not None else _metadata_version(name)
    return None


def _distribution_name(name: str) -> str:
    """importlib.metadata's normalised form of a distribution's name."""
    return re.sub(r"[-_.]+", "-", name).lower().replace("-", "_")


def _version_field(metadata: str) -> Optional[str]:
    """The `Version:` header of a METADATA file (None: unreadable, absent or folded)."""
    try:
        with open(metadata, encoding="utf-8") as handle:
            lines = handle.read().split("\n")
    except (OSError, UnicodeDecodeError):
        return None
    for number, line in enumerate(lines):
        if not line.strip():
            return None  # the headers end here
        key, colon, value = line.partition(":")
        if colon and key.strip().lower() == "version":
            folded = number + 1 < len(lines) and lines[number + 1][:1] in (" ", "\t")
            return None if folded else value.strip()
    return None


def _metadata_version(name: str) -> Optional[str]:
    import importlib.metadata

    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


# -- declared requirement ranges ------------------------------------------------


def _key(version: Version) -> Version:
    """Comparable form: trailing zeros dropped, so 2.0 == 2.0.0."""
    end = len(version)
    while end > 1 and version[end - 1] == 0:
        end -= 1
    return version[:end]


# A bound is (version key, inclusive) or None for unbounded; an interval is (lower, upper).
_Bound = Optional[Tuple[Version, bool]]
_Interval = Tuple[_Bound, _Bound]


@dataclass(frozen=True)
class Requirement:
    name: str  # normalised (PEP 503)
    allowed: tuple[_Interval, ...]  # the versions the specifiers admit, as disjoint intervals
    text: str  # as written, without marker or comment


_REQUIREMENT_RE = re.compile(
    r"""^\s*(?P<name>[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?)
    \s*(?:\[[^\]]*\])?  # extras
    \s*(?P<specs>.*?)\s*$""",
    re.VERBOSE,
)
_SPECIFIER_RE = re.compile(r"^\s*(===|==|!=|~=|>=|<=|>|<)\s*(\S+?)\s*$")


def parse_requirement(line: str) -> Requirement | None:
    """A PEP 508 requirement's name and admitted versions; None for URLs and invalid lines."""
    text = line.split(";", 1)[0].strip()  # environment markers are ignored
    match = _REQUIREMENT_RE.match(text)
    if match is None or match["specs"].startswith("@"):
        return None
    specs = match["specs"].strip()
    if specs.startswith("(") and specs.endswith(")"):  # the old `name (>=1.0)` form
        specs = specs[1:-1]
    allowed: list[_Interval] = [(None, None)]
    for spec in filter(None, (s.strip() for s in specs.split(","))):
        intervals = _specifier_intervals(spec)
        if intervals is None:
            return None
        allowed = [i for a in allowed for b in intervals if (i := _intersect(a, b))]
    name = re.sub(r"[-_.]+", "-", match["name"]).lower()
    return Requirement(name, tuple(allowed), text)


def _specifier_intervals(spec: str) -> list[_Interval] | None:
    match = _SPECIFIER_RE.match(spec)
    if match is None:
        return None
    op, text = match.groups()
    wildcard = text.endswith(".*") and op in ("==", "!=")
    version = parse_version(text[:-2] if wildcard else text)
    if version is None or (op == "~=" and len(version) < 2):
        return None
    v = _key(version)
    if wildcard:  # ==4.36.* is [4.36, 4.37)
        start, stop = (v, True), (_key(_bump(version)), False)
        return [(start, stop)] if op == "==" else [(None, (v, False)), ((stop[0], True), None)]
    if op == "~=":  # ~=4.36.2 is [4.36.2, 4.37)
        return [((v, True), (_key(_bump(version[:-1])), False))]
    return {
        "==": [((v, True), (v, True))],
        "===": [((v, True), (v, True))],
        "!=": [(None, (v, False)), ((v, False), None)],
        ">=": [((v, True), None)],
        ">": [((v, False), None)],
        "<=": [(None, (v, True))],
        "<": [(None, (v, False))],
    }[op]


def _bump(version: Version) -> Version:
    return version[:-1] + (version[-1] + 1,)


def _intersect(a: _Interval, b: _Interval) -> _Interval | None:
    lower, upper = _tighter(a[0], b[0], lower=True), _tighter(a[1], b[1], lower=False)
    if lower and upper and (
        lower[0] > upper[0] or (lower[0] == upper[0] and not (lower[1] and upper[1]))
    ):
        return None  # empty: the lower bound is above the upper one, or they meet at an open end
    return lower, upper


def _tighter(x: _Bound, y: _Bound, lower: bool) -> _Bound:
    if x is None or y is None:
        return x or y
    if x[0] != y[0]:
        return max(x, y) if lower else min(x, y)
    return x[0], x[1] and y[1]


def _epoch_interval(library: str, index: int) -> _Interval:
    epochs = EPOCHS[library]
    lower = (_key(epochs[index].version), True) if index > 0 else None
    upper = (_key(epochs[index + 1].version), False) if index + 1 < len(epochs) else None
    return lower, upper


def _from_ranges(
    library: str, declared: Sequence[tuple[Requirement, str]]
) -> AssumedVersion | None:
    """If any declaration admits a hazardous epoch, the newest such; else the newest admitted."""
    admitted = [
        (epoch, source)
        for index, epoch in enumerate(EPOCHS[library])
        for requirement, source in declared
        if requirement.name == library
        and any(_intersect(i, _epoch_interval(library, index)) for i in requirement.allowed)
    ]
    if not admitted:
        return None
    epoch, source = max(admitted, key=lambda a: (a[0].reentrant_by_default, a[0].version))
    return AssumedVersion(library, epoch.version, source)


def _declared_requirements(root: Path) -> Iterator[tuple[Requirement, str]]:
    """Requirements in pyproject.toml [project] tables and requirements*.txt, with their source."""
    lines: list[tuple[str, str]] = []  # (line, file name)
    try:
        project = read_toml(root / "pyproject.toml").get("project")
    except ConfigError:
        project = None  # missing or broken: not ours to report
    if isinstance(project, dict):
        groups = [project.get("dependencies")]
        optional = project.get("optional-dependencies")
        if isinstance(optional, dict):
            groups += optional.values()
        lines += [
            (dep, "pyproject.toml")
            for group in groups
            if isinstance(group, list)
            for dep in group
            if isinstance(dep, str)
        ]
    for path in sorted(root.glob("requirements*.txt")):
        if not os.path.isfile(path):  # a FIFO would block
            continue
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        lines += [(line, path.name) for line in _requirement_lines(text)]
    for line, origin in lines:
        requirement = parse_requirement(line)
        if requirement is not None:
            yield requirement, f"{origin}: {requirement.text}"


def _requirement_lines(text: str) -> Iterator[str]:
    for line in text.replace("\\\n", "").splitlines():  # join continuation lines
        line = re.sub(r"(^|\s)#.*", "", line).strip()  # '#' starts a comment only after a space
        if line and not line.startswith("-"):  # options: -r, -e, -c, --index-url, ...
            yield line

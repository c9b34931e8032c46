"""The project a run indexes: the lintable files under its root, whatever files are named.

A run that names one file (pre-commit passes only the staged ones) still indexes the whole
project, so that the file gets what a run over the project gives it. Reading and hashing every
file on each such run would cost more than the lint: the content digest, module name and
declarations digest of each file are kept in the result cache, keyed by the file's size, mtime and
inode, and a warm run only stats the project. So is, for each file's cached result, which other
files it reports findings into: a warm run reads only the results that can hold findings for the
files it names.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Optional, Sequence

from ckptlint import __version__
from ckptlint.discovery import project_paths

if TYPE_CHECKING:
    from ckptlint.cache import ResultCache
    from ckptlint.config import Settings

# An mtime this close to when the state was written may hide a second edit in the same clock tick.
_RACY_NS = 1_000_000_000


@dataclass(frozen=True)
class Known:
    """What the last run learnt about a file that has not changed since."""

    digest: str
    module: str
    is_package: bool
    declared: Optional[str]  # declarations digest; None if the file could not be summarised


class ProjectFiles:
    """The project's files (absolute paths, sorted) and what is known about each."""

    def __init__(self, root: Path, settings: Settings, cache: Optional[ResultCache], named: list[Path], given: Sequence[str]) -> None:
        """`named`: the files discovered from the paths `given` on the command line."""
        root_text = os.path.abspath(root)
        # A run over the root (or a folder above it) names every file of the project already.
        self.covered = any(p != "-" and os.path.isdir(p) and _inside(root_text, os.path.abspath(p)) for p in given)
        self.paths = [str(p) for p in named] if self.covered else project_paths(root_text, settings)
        self.cache = cache
        self.key = f"t:{__version__}:{root_text}"
        # Module names depend on which folders are packages: another `__init__.py` renames modules.
        self.packages = hashlib.blake2b("\0".join(p for p in self.paths if os.path.basename(p) in ("__init__.py", "__init__.pyi")).encode(), digest_size=16).hexdigest()
        row = cache.get_many([self.key], _valid_state).get(self.key) if cache else None
        fresh = row is not None and row["packages"] == self.packages
        self.entries: dict[str, list] = row["files"] if fresh else {}
        self.written: int = row["written"] if fresh else 0
        # Results, under the key prefix they were cached with: file as shown -> [its digest, the
        # digests its result depends on, the other files it reports into].
        self.reports: dict = row["reports"] if fresh else {"prefix": "", "files": {}}
        self.changed = not fresh

    def known(self, path: str, stat: os.stat_result) -> Optional[Known]:
        entry = self.entries.get(path)
        if entry is None or entry[:3] != [stat.st_size, stat.st_mtime_ns, stat.st_ino] or stat.st_mtime_ns >= self.written - _RACY_NS:
            return None
        return Known(*entry[3:])

    def record(self, path: str, stat: os.stat_result, known: Known) -> None:
        entry = [stat.st_size, stat.st_mtime_ns, stat.st_ino, known.digest, known.module, known.is_package, known.declared]
        if self.entries.get(path) != entry:
            self.entries[path] = entry
            self.changed = True

    def silent_for(self, prefix: str, digests: dict[str, str], named: frozenset[str]) -> set[str]:
        """Files whose cached result is valid (as `engine._still_valid` decides) and reports nothing
        into the named files: a run naming them need not read it."""
        if self.reports["prefix"] != prefix:
            return set()
        return {
            path
            for path, (digest, depends, into) in self.reports["files"].items()
            if path not in named and digests.get(path) == digest and named.isdisjoint(into)
            and all(digests.get(other) == d for other, d in depends.items())
        }  # fmt: skip

    def note_results(self, prefix: str, results: dict[str, dict], digests: dict[str, str]) -> None:
        if self.reports["prefix"] != prefix:
            self.reports = {"prefix": prefix, "files": {}}
        files = self.reports["files"]
        for path, result in results.items():
            into = sorted({f["path"] for f in result["findings"]} - {path})
            entry = [digests[path], result["depends"], into]
            if files.get(path) != entry:
                files[path] = entry
                self.changed = True

    def save(self) -> None:
        if self.cache is None or not self.changed:
            return
        present = set(self.paths)
        files = {path: entry for path, entry in self.entries.items() if path in present}
        state = {"packages": self.packages, "written": time.time_ns(), "files": files, "reports": self.reports}
        self.cache.put_many_json({self.key: json.dumps(state)})


def _inside(path: str, folder: str) -> bool:
    return path == folder or path.startswith(os.path.join(folder, ""))


def _valid_state(value: object) -> bool:
    return (
        isinstance(value, dict)
        and value.keys() == {"packages", "written", "files", "reports"}
        and isinstance(value["packages"], str)
        and type(value["written"]) is int
        and isinstance(value["files"], dict)
        and all(_valid_entry(entry) for entry in value["files"].values())
        and _valid_reports(value["reports"])
    )


def _valid_reports(value: object) -> bool:
    return (
        isinstance(value, dict)
        and value.keys() == {"prefix", "files"}
        and isinstance(value["prefix"], str)
        and isinstance(value["files"], dict)
        and all(
            isinstance(entry, list) and len(entry) == 3 and isinstance(entry[0], str)
            and isinstance(entry[1], dict) and all(isinstance(d, str) for d in entry[1].values())
            and isinstance(entry[2], list) and all(isinstance(p, str) for p in entry[2])
            for entry in value["files"].values()
        )
    )  # fmt: skip


def _valid_entry(entry: object) -> bool:
    return (
        isinstance(entry, list)
        and len(entry) == 7
        and all(type(n) is int for n in entry[:3])
        and isinstance(entry[3], str)
        and isinstance(entry[4], str)
        and type(entry[5]) is bool
        and (entry[6] is None or isinstance(entry[6], str))
    )

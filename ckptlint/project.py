"""The project a run indexes: the lintable files under its root, whatever files are named.

A run that names one file (pre-commit passes only the staged ones) still indexes the whole
project, so that the file gets what a run over the project gives it. Reading and hashing every
file on each such run would cost more than the lint: the content digest, module name and
declarations digest of each file are kept in the result cache, keyed by the file's size, mtime and
inode, and a warm run only stats the project. So is, for each file's cached result, which other
files it reports findings into: a warm run reads only the results that can hold findings for the
files it names.

The state is two rows, so that a run where nothing changed decodes little: the head (the walk's
listing, the files' stats as one stamp, and what a run needs when that stamp still holds: each
file's digest, the project's declarations fingerprint, which results report into which files) and
the details (per file, what `Known` says; per result, what it depends on), read only when
something changed.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import time
from array import array
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Optional, Sequence

from ckptlint import __version__
from ckptlint.discovery import Listing, project_paths

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


@dataclass(frozen=True)
class Unchanged:
    """No project file changed since the state was written (same paths, same stats): what a run
    naming some of them needs, by path as shown."""

    digests: dict[str, str]  # by absolute path
    cwd: str  # what paths are shown relative to
    fingerprint: str  # the project's declarations fingerprint
    prefix: str  # the key prefix of the results `into` describes
    into: dict[str, list[str]]  # file -> the files whose results report findings into it
    failed: frozenset[str]  # files without a summary (or unreadable), by absolute path

    def digest(self, shown: str) -> Optional[str]:
        return self.digests.get(os.path.join(self.cwd, shown))


class ProjectFiles:
    """The project's files (absolute paths, sorted) and what is known about each."""

    def __init__(self, root: Path, settings: Settings, cache: Optional[ResultCache], named: list[Path], given: Sequence[str], listing: Optional[Listing] = None) -> None:
        """`named`: the files discovered from the paths `given` on the command line; `listing`:
        what that discovery's walks read."""
        root_text = os.path.abspath(root)
        self.cwd = os.path.join(os.getcwd(), "")
        # A run over the root (or a folder above it) names every file of the project already.
        self.covered = any(p != "-" and os.path.isdir(p) and _inside(root_text, os.path.abspath(p)) for p in given)
        self.cache = cache
        self.key = f"t:{__version__}:{root_text}"
        self.details_key = f"{self.key}:files"
        # What the walk's result depends on besides the folders and ignore files it read.
        self.walk_key = json.dumps([root_text, self.cwd, settings.exclude, settings.extend_exclude, settings.respect_gitignore, str(settings.project_root), settings.max_file_size])
        head = cache.get_many([self.key], _valid_head).get(self.key) if cache else None
        self.head_changed = head is None
        if self.covered:
            self.paths = [str(p) for p in named]
            # Only a walk of exactly the root is the project's listing.
            root_walked = listing is not None and [os.path.abspath(p) for p in given] == [root_text]
            self.listing = listing if root_walked else None
        elif head is not None and head["walk"] == self.walk_key and _listing(head["listing"]).unchanged(head["written"] - _RACY_NS):
            self.paths = head["paths"].split("\n") if head["paths"] else []
            self.listing = _listing(head["listing"])
        else:
            self.listing = Listing()
            self.paths = project_paths(root_text, settings, self.listing)
            self.head_changed = True
        self.stats: dict[str, Optional[os.stat_result]] = {}
        for path in self.paths:
            try:
                self.stats[path] = os.stat(path)
            except OSError:
                self.stats[path] = None  # read_source says why
        stamp = _stamp(self.paths, [self.stats[p] for p in self.paths])
        self.unchanged: Optional[Unchanged] = None
        if head is not None and head["stamp"] == stamp and head["quick"] is not None and head["quick"]["cwd"] == self.cwd and self._settled(head["written"]):
            self.unchanged = _unchanged(head["quick"], self.paths, self.cwd)
        self._details: Optional[dict] = None
        self.changed = False

    def _settled(self, written: int) -> bool:
        """No file's mtime is so close to when the state was written that an edit could hide in it."""
        return all(stat is not None and stat.st_mtime_ns < written - _RACY_NS for stat in self.stats.values())

    @functools.cached_property
    def packages(self) -> str:
        """Module names depend on which folders are packages: another `__init__.py` renames modules."""
        inits = (p for p in self.paths if p.endswith((f"{os.sep}__init__.py", f"{os.sep}__init__.pyi")))
        return hashlib.blake2b("\0".join(inits).encode(), digest_size=16).hexdigest()

    def _load_details(self) -> dict:
        if self._details is None:
            row = self.cache.get_many([self.details_key], _valid_details).get(self.details_key) if self.cache else None
            fresh = row is not None and row["packages"] == self.packages
            self._details = row if fresh else {"packages": self.packages, "written": 0, "files": {}, "reports": {"prefix": "", "files": {}}}
            self.changed = self.changed or not fresh
        return self._details

    def known(self, path: str, stat: os.stat_result) -> Optional[Known]:
        details = self._load_details()
        entry = details["files"].get(path)
        if entry is None or entry[:3] != [stat.st_size, stat.st_mtime_ns, stat.st_ino]:
            return None
        if stat.st_mtime_ns >= details["written"] - _RACY_NS:
            # Read again; written again now, so that a later run can trust it.
            self.changed = True
            return None
        return Known(*entry[3:])

    def record(self, path: str, stat: os.stat_result, known: Known) -> None:
        entry = [stat.st_size, stat.st_mtime_ns, stat.st_ino, known.digest, known.module, known.is_package, known.declared]
        files = self._load_details()["files"]
        if files.get(path) != entry:
            files[path] = entry
            self.changed = True

    def silent_for(self, prefix: str, digests: dict[str, str], named: frozenset[str]) -> set[str]:
        """Files whose cached result is valid (as `engine._still_valid` decides) and reports nothing
        into the named files: a run naming them need not read it."""
        reports = self._load_details()["reports"]
        if reports["prefix"] != prefix:
            return set()
        return {
            path
            for path, entry in reports["files"].items()
            if path not in named and named.isdisjoint(entry[2]) and _valid_report(path, entry, digests)
        }  # fmt: skip

    def note_results(self, prefix: str, results: dict[str, dict], digests: dict[str, str]) -> None:
        details = self._load_details()
        if details["reports"]["prefix"] != prefix:
            details["reports"] = {"prefix": prefix, "files": {}}
        files = details["reports"]["files"]
        for path, result in results.items():
            into = sorted({f["path"] for f in result["findings"]} - {path})
            entry = [digests[path], result["depends"], into]
            if files.get(path) != entry:
                files[path] = entry
                self.changed = True

    def save(self) -> None:
        if self.cache is None or not (self.changed or self.head_changed) or self._details is None:
            return
        present = set(self.paths)
        details = self._details
        files = {path: entry for path, entry in details["files"].items() if path in present}
        written = time.time_ns()
        rows = {self.details_key: json.dumps({"packages": self.packages, "written": written, "files": files, "reports": details["reports"]})}
        if self.listing is not None:
            entries = [files.get(path) for path in self.paths]
            head = {
                "walk": self.walk_key,
                "listing": _listing_json(self.listing),
                "written": written,
                "paths": "\n".join(self.paths),
                # Stats from before each file was read, as the details have them.
                "stamp": _stamp(self.paths, entries),
                "quick": _quick(self.paths, entries, details["reports"], self.cwd),
            }
            rows[self.key] = json.dumps(head)
        self.cache.put_many_json(rows)


def display_path(path: str, cwd: str) -> str:
    """Paths as users typed them: relative to the working directory (`cwd`, ending in a separator)
    when inside it."""
    return path[len(cwd) :] if path.startswith(cwd) else path


def _inside(path: str, folder: str) -> bool:
    return path == folder or path.startswith(os.path.join(folder, ""))


def _stamp(paths: list[str], stats: list) -> Optional[str]:
    """Of every path and its size, mtime and inode (an `os.stat_result` or a details entry); None
    when one is missing."""
    if any(stat is None for stat in stats):
        return None
    numbers = array("q", [n for stat in stats for n in ((stat.st_size, stat.st_mtime_ns, stat.st_ino) if isinstance(stat, os.stat_result) else stat[:3])])
    digest = hashlib.blake2b("\n".join(paths).encode(), digest_size=16)
    digest.update(numbers.tobytes())
    return digest.hexdigest()


def _quick(paths: list[str], entries: list, reports: dict, cwd: str) -> Optional[dict]:
    """The head's part for a run where nothing changed (None when it could not do without the details)."""
    if any(entry is None for entry in entries):
        return None
    declared = {entry[4]: entry[6] for entry in entries if entry[6] is not None}
    if len(declared) < sum(entry[6] is not None for entry in entries):
        return None  # two files of one module name: which one the index takes depends on what is named
    digests = {display_path(path, cwd): entry[3] for path, entry in zip(paths, entries)}
    into: dict[str, list[str]] = {}
    for path, entry in zip(paths, entries):
        shown = display_path(path, cwd)
        report = reports["files"].get(shown)
        if entry[6] is None:
            continue
        if report is None or not _valid_report(shown, report, digests):
            return None  # a result the last run did not check: a run naming any file reads it
        for target in report[2]:
            into.setdefault(target, []).append(shown)
    from ckptlint.index import project_fingerprint

    return {
        "cwd": cwd,
        "digests": " ".join(entry[3] for entry in entries),
        "fingerprint": project_fingerprint(declared),
        "prefix": reports["prefix"],
        "into": into,
        "failed": [number for number, entry in enumerate(entries) if entry[6] is None],
    }


def _unchanged(quick: dict, paths: list[str], cwd: str) -> Optional[Unchanged]:
    digests = quick["digests"].split(" ") if quick["digests"] else []
    if len(digests) != len(paths) or not all(0 <= number < len(paths) for number in quick["failed"]):
        return None
    return Unchanged(dict(zip(paths, digests)), cwd, quick["fingerprint"], quick["prefix"], quick["into"], frozenset(paths[number] for number in quick["failed"]))


def _valid_report(path: str, entry: list, digests: dict[str, str]) -> bool:
    """Whether the result `entry` describes is still valid (as `engine._still_valid` decides)."""
    digest, depends, _ = entry
    return digests.get(path) == digest and all(digests.get(other) == d for other, d in depends.items())


def _listing(data: dict) -> Listing:
    folders = data["folders"].split("\n") if data["folders"] else []
    return Listing(dict(zip(folders, data["ctimes"])), data["files"], data["probes"])


def _listing_json(listing: Listing) -> dict:
    return {"folders": "\n".join(listing.folders), "ctimes": list(listing.folders.values()), "files": listing.files, "probes": listing.probes}


def _valid_head(value: object) -> bool:
    return (
        isinstance(value, dict)
        and value.keys() == {"walk", "listing", "written", "paths", "stamp", "quick"}
        and isinstance(value["walk"], str)
        and _valid_listing(value["listing"])
        and type(value["written"]) is int
        and isinstance(value["paths"], str)
        and (value["stamp"] is None or isinstance(value["stamp"], str))
        and (value["quick"] is None or _valid_quick(value["quick"]))
    )


def _valid_listing(value: object) -> bool:
    return (
        isinstance(value, dict)
        and value.keys() == {"folders", "ctimes", "files", "probes"}
        and isinstance(value["folders"], str)
        and isinstance(value["ctimes"], list)
        and len(value["ctimes"]) == (value["folders"].count("\n") + 1 if value["folders"] else 0)
        and all(type(n) is int for n in value["ctimes"])
        and isinstance(value["files"], dict)
        and all(s is None or (isinstance(s, list) and len(s) == 3 and all(type(n) is int for n in s)) for s in value["files"].values())
        and isinstance(value["probes"], dict)
        and all(type(b) is bool for b in value["probes"].values())
    )


def _valid_quick(value: object) -> bool:
    return (
        isinstance(value, dict)
        and value.keys() == {"cwd", "digests", "fingerprint", "prefix", "into", "failed"}
        and all(isinstance(value[name], str) for name in ("cwd", "digests", "fingerprint", "prefix"))
        and isinstance(value["into"], dict)
        and all(isinstance(sources, list) and all(isinstance(s, str) for s in sources) for sources in value["into"].values())
        and isinstance(value["failed"], list)
        and all(type(n) is int for n in value["failed"])
    )


def _valid_details(value: object) -> bool:
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

"""Find the files to lint: walk directories, honouring excludes and .gitignore files."""

from __future__ import annotations

import os
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterable, Iterator, Optional, Sequence, Tuple

from ckptlint.cache import TAG_NAME, is_tagged

if TYPE_CHECKING:
    from ckptlint.config import Settings

_PYTHON_SUFFIXES = (".py", ".pyi", ".ipynb")  # notebooks too, as ruff lints them


@dataclass(frozen=True)
class Discovery:
    files: list[Path]  # absolute, sorted, de-duplicated
    missing: list[str]  # paths given that do not exist, as given
    # (path, message): what could not be looked into; paths absolute, or as given on the command line.
    unreadable: list[tuple[str, str]] = field(default_factory=list)


def discover(paths: Sequence[str], settings: Settings, listing: Optional[Listing] = None) -> Discovery:
    """`listing` records what the walks read."""
    walker = _Walker(settings, listing)
    found: set[str] = set()
    missing: list[str] = []
    for given in paths:
        path = os.path.abspath(given)
        try:
            is_dir = stat.S_ISDIR(os.stat(path).st_mode)
        except (FileNotFoundError, NotADirectoryError):
            missing.append(given)
            continue
        except OSError as error:  # e.g. inside a folder we may not search
            walker.unreadable.append((given, f"cannot read file: {error.strerror or error}"))
            continue
        if is_dir:
            found.update(walker.walk(path))
        # Explicit files are linted even if excluded or not named .py (ruff semantics), unless
        # force-exclude asks otherwise; what is not a regular file is refused when read.
        elif not (settings.force_exclude and walker.excluded(path)):
            found.add(path)
    return Discovery(files=[Path(p) for p in _sorted_paths(found)], missing=missing, unreadable=walker.unreadable)


def excluded_by(settings: Settings) -> Callable[[str], bool]:
    """Whether the settings' exclude patterns leave a file (or a folder above it) out of the project."""
    return _Walker(settings).excluded


def project_paths(root: str, settings: Settings, listing: Optional[Listing] = None) -> list[str]:
    """The lintable files under the folder `root`, absolute and sorted (what cannot be listed is
    left out: a run reports it when it names that folder); `listing` records what the walk read."""
    return _sorted_paths(_Walker(settings, listing).walk(os.path.abspath(root)))


@dataclass
class Listing:
    """What a walk read: each folder listed, with its ctime (adding, removing or renaming an entry
    changes it, so does a change of permissions; editing a file in it does not), and each ignore or
    tag file read, or looked for, with its stat; while none of them changed, the walk finds the
    same files."""

    folders: dict[str, int] = field(default_factory=dict)
    # path -> [size, mtime, inode], or None when it did not exist
    files: dict[str, Optional[list[int]]] = field(default_factory=dict)
    # Whether `.git` existed: its mtime changes with every commit, which changes nothing walked.
    probes: dict[str, bool] = field(default_factory=dict)

    def folder(self, path: str) -> None:
        try:
            self.folders[path] = os.stat(path).st_ctime_ns
        except OSError:
            self.folders[path] = -1

    def file(self, path: str) -> None:
        self.files[path] = _signature(path)

    def unchanged(self, before_ns: int) -> bool:
        """Nothing read has changed (nor changed after `before_ns`, within the same clock tick)."""
        for path, mtime in self.folders.items():
            try:
                now = os.stat(path).st_ctime_ns
            except OSError:
                return False
            if now != mtime or now >= before_ns:
                return False
        return all(_signature(path) == signature for path, signature in self.files.items()) and all(
            os.path.exists(path) == exists for path, exists in self.probes.items()
        )


def _signature(path: str) -> Optional[list[int]]:
    try:
        status = os.stat(path)
    except OSError:
        return None
    return [status.st_size, status.st_mtime_ns, status.st_ino]


def _sorted_paths(paths: Iterable[str]) -> list[str]:
    """In `Path` order, without building a `Path` per file to compare (two thirds of a walk)."""
    return sorted(set(paths), key=lambda path: path.split(os.sep))


# -- gitignore-style patterns -------------------------------------------------


@dataclass(frozen=True)
class GlobPattern:
    """One compiled gitignore-style pattern; `regex` matches a '/'-separated relative path."""

    regex: re.Pattern[str]
    negate: bool  # a leading '!'
    dir_only: bool  # a trailing '/'

    def matches(self, rel: str, is_dir: bool) -> bool:
        return (is_dir or not self.dir_only) and self.regex.match(rel) is not None

    def matches_path(self, rel: str) -> bool:
        """Whether the file `rel` or one of its parent directories matches (ignoring `negate`)."""
        parts = rel.split("/")
        return self.matches(rel, False) or any(
            self.matches("/".join(parts[:i]), True) for i in range(1, len(parts))
        )


def compile_pattern(line: str) -> GlobPattern | None:
    """Compile one line of a .gitignore; None for blank lines and comments."""
    line = _strip_trailing_spaces(line)
    if not line or line.startswith("#"):
        return None
    negate = line.startswith("!")
    if negate:
        line = line[1:]
    dir_only = line.endswith("/")
    line = line.rstrip("/")
    if not line:
        return None
    # A slash at the start or in the middle anchors the pattern to the .gitignore's directory;
    # otherwise it matches a name at any depth.
    prefix = "" if "/" in line else "(?:.*/)?"
    body = _translate_path(line[1:] if line.startswith("/") else line)
    # \Z, not $: the combined regexes are matched from an offset, where ^ would not match anyway.
    return GlobPattern(re.compile(prefix + body + r"\Z", re.DOTALL), negate, dir_only)


def _strip_trailing_spaces(line: str) -> str:
    stripped = line.rstrip(" ")
    trailing_backslashes = len(stripped) - len(stripped.rstrip("\\"))
    # An odd number of trailing backslashes escapes the first stripped space.
    return stripped + " " if len(stripped) < len(line) and trailing_backslashes % 2 else stripped


def _translate_path(path: str) -> str:
    segments = path.split("/")
    out = []
    for i, segment in enumerate(segments):
        last = i == len(segments) - 1
        if segment == "**":
            # 'a/**' is everything inside a; '**/' is zero or more directories.
            out.append(".*" if last else "(?:.*/)?")
        else:
            out.append(_translate_segment(segment) + ("" if last else "/"))
    return "".join(out)


def _translate_segment(segment: str) -> str:
    out = []
    i, n = 0, len(segment)
    while i < n:
        char = segment[i]
        if char == "*":
            while i + 1 < n and segment[i + 1] == "*":  # other runs of '*' are a plain '*'
                i += 1
            out.append("[^/]*")
        elif char == "?":
            out.append("[^/]")
        elif char == "[" and (end := _class_end(segment, i)) > 0:
            out.append(_translate_class(segment[i + 1 : end]))
            i = end
        elif char == "\\" and i + 1 < n:
            i += 1
            out.append(re.escape(segment[i]))
        else:
            out.append(re.escape(char))
        i += 1
    return "".join(out)


def _class_end(segment: str, start: int) -> int:
    """Index of the ']' closing the class opened at `start`, or -1 (then '[' is literal)."""
    j = start + 1
    if j < len(segment) and segment[j] in "!^":
        j += 1
    if j < len(segment) and segment[j] == "]":  # a leading ']' is a member
        j += 1
    while j < len(segment) and segment[j] != "]":
        j += 2 if segment[j] == "\\" else 1
    return j if j < len(segment) else -1


def _translate_class(content: str) -> str:
    negate = content[:1] in ("!", "^")
    if negate:
        content = content[1:]
    members = []
    i = 0
    while i < len(content):
        if content[i] == "\\" and i + 1 < len(content):
            i += 1
            members.append(re.escape(content[i]))
        else:
            members.append("-" if content[i] == "-" else re.escape(content[i]))
        i += 1
    return ("[^/" if negate else "[") + "".join(members) + "]"


# One ignore file's patterns folded into one alternation, last pattern first, so that the first
# alternative matching is gitignore's "last matching pattern wins"; plus each one's `negate`.
_Combined = Optional[Tuple["re.Pattern[str]", Tuple[bool, ...]]]


def _combine(patterns: Sequence[GlobPattern]) -> _Combined:
    if not patterns:
        return None
    ordered = patterns[::-1]
    regex = re.compile("|".join(f"({p.regex.pattern})" for p in ordered), re.DOTALL)
    return regex, tuple(p.negate for p in ordered)


class _Rules:
    """The patterns of one ignore file (or exclude list), relative to the directory `base`."""

    def __init__(self, base: str, patterns: Sequence[GlobPattern]) -> None:
        self._offset = len(_dir_prefix(base))  # matching from here sees the path relative to base
        self._dirs = _combine(patterns)
        self._files = _combine([p for p in patterns if not p.dir_only])

    def verdict(self, path: str, is_dir: bool) -> bool | None:
        """True: ignored; False: re-included by a '!' pattern; None: no pattern matches."""
        combined = self._dirs if is_dir else self._files
        if combined is None:
            return None
        regex, negated = combined
        match = regex.match(path, self._offset)
        return None if match is None else not negated[match.lastindex - 1]  # type: ignore[operator]


def _ignored(rules: tuple[_Rules, ...], path: str, is_dir: bool) -> bool:
    for ruleset in reversed(rules):  # deeper .gitignore files take precedence
        verdict = ruleset.verdict(path, is_dir)
        if verdict is not None:
            return verdict
    return False


def _posix(path: str) -> str:
    return path.replace(os.sep, "/") if os.sep != "/" else path


def _dir_prefix(directory: str) -> str:
    return _posix(directory).rstrip("/") + "/"


# -- the walk -----------------------------------------------------------------


class _Walker:
    def __init__(self, settings: Settings, listing: Optional[Listing] = None) -> None:
        self._settings = settings
        self._listing = listing
        self._excludes = [
            p for p in map(compile_pattern, settings.exclude + settings.extend_exclude) if p
        ]
        self._ignore_files: dict[str, tuple[_Rules, ...]] = {}  # shared by all roots of a run
        self.unreadable: list[tuple[str, str]] = []

    def walk(self, root: str) -> Iterator[str]:
        excludes = _Rules(self._exclude_base(root), self._excludes)
        pending = [(root, self._inherited_rules(root))]
        while pending:
            directory, rules = pending.pop()
            if self._listing is not None:
                self._listing.folder(directory)  # before listing it: a change during the walk shows
            try:
                with os.scandir(directory) as it:
                    entries = list(it)
            except OSError as error:
                self.unreadable.append((directory, f"cannot list directory: {error.strerror or error}"))
                continue
            if any(e.name == TAG_NAME for e in entries):
                if self._listing is not None:
                    self._listing.file(os.path.join(directory, TAG_NAME))
                if is_tagged(directory):
                    if self._listing is not None:  # its own writes change its mtime: the tag is what matters
                        del self._listing.folders[directory]
                    continue  # a cache (ckptlint's or another tool's) is never linted
            if self._settings.respect_gitignore and any(e.name == ".gitignore" for e in entries):
                rules = rules + self._load(os.path.join(directory, ".gitignore"), directory)
            for entry in entries:
                is_dir = entry.is_dir(follow_symlinks=False)  # never follow: no symlink loops
                path = _posix(entry.path)
                if excludes.verdict(path, is_dir) or _ignored(rules, path, is_dir):
                    continue
                if is_dir:
                    pending.append((entry.path, rules))
                elif entry.name.endswith(_PYTHON_SUFFIXES) and entry.is_file():
                    yield entry.path

    def excluded(self, path: str) -> bool:
        """Whether an explicitly named file, or a folder above it, matches an exclude pattern."""
        base = self._exclude_base(os.path.dirname(path))
        rules = _Rules(base, self._excludes)
        current = base
        for part in os.path.relpath(path, base).split(os.sep):
            current = os.path.join(current, part)
            if rules.verdict(_posix(current), current != path):
                return True
        return False

    def _exclude_base(self, root: str) -> str:
        """Path-like excludes are relative to the project root when walking inside it, else to the
        working directory (where pre-commit runs the hook), else to `root` itself."""
        project = self._settings.project_root
        for base in (os.path.abspath(project) if project is not None else None, os.getcwd()):
            if base is not None and os.path.commonpath([root, base]) == base:
                return base
        return root

    def _inherited_rules(self, root: str) -> tuple[_Rules, ...]:
        """.git/info/exclude and the .gitignore files above `root`, up to the git root."""
        if not self._settings.respect_gitignore:
            return ()
        chain = [root]  # root and its parents up to the git root, nearest first
        while not self._exists(os.path.join(chain[-1], ".git")):
            parent = os.path.dirname(chain[-1])
            if parent == chain[-1]:
                return ()  # not in a repository: only .gitignore files inside the tree apply
            chain.append(parent)
        git_root = chain[-1]
        rules = self._load(os.path.join(git_root, ".git", "info", "exclude"), git_root)
        for directory in reversed(chain[1:]):
            rules += self._load(os.path.join(directory, ".gitignore"), directory)
        return rules

    def _exists(self, path: str) -> bool:
        exists = os.path.exists(path)
        if self._listing is not None:
            self._listing.probes[path] = exists
        return exists

    def _load(self, path: str, base: str) -> tuple[_Rules, ...]:
        if self._listing is not None:
            self._listing.file(path)
        if path not in self._ignore_files:
            try:
                with open(path, encoding="utf-8", errors="replace") as f:
                    lines = f.read().splitlines()
            except OSError:
                lines = []
            patterns = [p for p in map(compile_pattern, lines) if p]
            self._ignore_files[path] = (_Rules(base, patterns),) if patterns else ()
        return self._ignore_files[path]

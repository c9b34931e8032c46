"""Settings: [tool.ckptlint] in pyproject.toml, or the top level of a ckptlint.toml."""

from __future__ import annotations

import dataclasses
import difflib
import hashlib
import json
import os
import re
import stat
import sys
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

from ckptlint import __version__
from ckptlint.discovery import GlobPattern, compile_pattern
from ckptlint.findings import Severity
from ckptlint.source import DEFAULT_MAX_FILE_SIZE, parse_size


class ConfigError(Exception):
    """A clear, user-facing message (the CLI prints it and exits 2)."""


@dataclass(frozen=True)
class WrapperSpec:
    """A project's own checkpoint wrapper."""

    reentrant: bool | None = None  # None = unknown
    preserve_rng_state: bool | None = None


DEFAULT_EXCLUDE: tuple[str, ...] = (
    ".git", ".hg", ".svn", ".venv", "venv", ".tox", ".nox", ".mypy_cache", ".ruff_cache",
    ".pytest_cache", ".ckptlint_cache", "__pycache__", "build", "dist", "site-packages",
    "node_modules", ".eggs", "*.egg-info",
)  # fmt: skip


# Which files get linted, where results are cached, and what `--confirm` runs do not change a
# file's findings.
_FILE_SELECTION_FIELDS = (
    "exclude", "extend_exclude", "respect_gitignore", "force_exclude", "cache_dir", "config_path",
    "confirm_examples", "fix", "unsafe_fixes", "show_fixes", "max_file_size",
)  # fmt: skip


@dataclass(frozen=True)
class Settings:
    select: tuple[str, ...] = ("CKPT",)  # codes or prefixes; "ALL" means everything
    extend_select: tuple[str, ...] = ()
    ignore: tuple[str, ...] = ()
    per_file_ignores: tuple[tuple[str, tuple[str, ...]], ...] = ()  # (glob, codes)
    exclude: tuple[str, ...] = DEFAULT_EXCLUDE
    extend_exclude: tuple[str, ...] = ()
    respect_gitignore: bool = True
    # Apply excludes to files named on the command line too (pre-commit passes every file by name).
    force_exclude: bool = False
    severity: tuple[tuple[str, Severity], ...] = ()  # (code or prefix, severity)
    torch_version: str | None = None
    transformers_version: str | None = None
    checkpoint_functions: tuple[tuple[str, WrapperSpec], ...] = ()  # qualified name -> spec
    cache_dir: str | None = None
    max_file_size: int = DEFAULT_MAX_FILE_SIZE  # bytes; bigger files are reported as skipped
    # [tool.ckptlint.confirm] examples: files with @ckptlint.example factories (absolute paths).
    confirm_examples: tuple[str, ...] = ()
    # ruff's: apply fixes by default, include behaviour-changing ones, list what was fixed.
    fix: bool = False
    unsafe_fixes: bool = False
    show_fixes: bool = False
    project_root: Path | None = None  # directory holding the config file found
    config_path: Path | None = None

    def is_enabled(self, code: str, path: str | None = None) -> bool:
        """Ruff semantics: the most specific of select/ignore wins (ignore on a tie);
        a matching per-file-ignores entry always disables."""
        selected = _specificity(code, self.select + self.extend_select)
        ignored = _specificity(code, self.ignore)
        if selected is None or (ignored is not None and ignored >= selected):
            return False
        if path is None or not self.per_file_ignores:
            return True
        rel = self._relative(path)
        for glob, codes in self.per_file_ignores:
            pattern = _compiled_glob(glob)
            if pattern is None or _specificity(code, codes) is None:
                continue
            if pattern.matches_path(rel) != pattern.negate:  # '!glob' applies outside glob
                return False
        return True

    def severity_for(self, code: str, default: Severity) -> Severity:
        """The override whose code or prefix matches most specifically, else `default`."""
        matches = [
            (n, level)
            for prefix, level in self.severity
            if (n := _prefix_len(code, prefix)) is not None
        ]
        return max(matches, key=lambda m: m[0])[1] if matches else default

    def fingerprint(self) -> str:
        """A stable hash of everything that can change the findings of a file (for the cache)."""
        state = dataclasses.asdict(self)
        for unrelated in _FILE_SELECTION_FIELDS:
            del state[unrelated]
        state["ckptlint"] = __version__
        encoded = json.dumps(state, sort_keys=True, default=str)
        return hashlib.sha256(encoded.encode()).hexdigest()

    def with_overrides(self, **changes: Any) -> Settings:
        """Command-line overrides. None means "option not given" and keeps the current value;
        codes, versions and pattern lists are validated as in a file."""
        given = {field: value for field, value in changes.items() if value is not None}
        for field, value in given.items():
            check = _OVERRIDE_CHECKS.get(field)
            if check is not None:
                option = "--" + field.replace("_", "-")
                given[field] = check(value, _Key(option, "on the command line"))
        return dataclasses.replace(self, **given)

    def _relative(self, path: str) -> str:
        """`path` relative to the project root when inside it, else as given; '/'-separated."""
        if self.project_root is not None:
            try:
                return Path(os.path.abspath(path)).relative_to(self.project_root).as_posix()
            except ValueError:
                pass
        return Path(path).as_posix()


def _prefix_len(code: str, prefix: str) -> int | None:
    if prefix == "ALL":
        return 0
    return len(prefix) if code.startswith(prefix) else None


def _specificity(code: str, prefixes: Sequence[str]) -> int | None:
    """Length of the longest prefix in `prefixes` matching `code` ("ALL" counts 0), or None."""
    return max((n for p in prefixes if (n := _prefix_len(code, p)) is not None), default=None)


# per-file-ignores globs are compiled once, not per finding.
_compiled_glob: Callable[[str], GlobPattern | None] = lru_cache(maxsize=None)(compile_pattern)


# -- finding and reading the file -------------------------------------------------


def find_config(start_paths: Sequence[str]) -> Path | None:
    """The nearest config walking up from the common parent of `start_paths` (default: cwd):
    .ckptlint.toml, ckptlint.toml, or a pyproject.toml with a [tool.ckptlint] table."""
    common = os.path.commonpath([os.path.abspath(p) for p in start_paths] or [os.getcwd()])
    directory = Path(common if os.path.isdir(common) else os.path.dirname(common))
    for folder in (directory, *directory.parents):
        for name in (".ckptlint.toml", "ckptlint.toml"):
            if os.path.isfile(folder / name):  # False, not an error, in a folder we may not search
                return folder / name
        pyproject = folder / "pyproject.toml"
        if os.path.isfile(pyproject) and _has_tool_table(pyproject):
            return pyproject
    return None


def _has_tool_table(pyproject: Path) -> bool:
    try:
        if "ckptlint" not in pyproject.read_text(encoding="utf-8", errors="replace"):
            return False  # skip parsing (and erroring on) unrelated pyproject files
    except OSError:
        return False
    tool = read_toml(pyproject).get("tool")
    return isinstance(tool, dict) and "ckptlint" in tool


def read_toml(path: Path) -> dict[str, Any]:
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):  # a FIFO would block, a device never end
            raise ConfigError(f"cannot read {path}: not a regular file")
        with open(path, "rb") as f:
            return tomllib.load(f)
    except OSError as e:
        raise ConfigError(f"cannot read {path}: {e.strerror}") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise ConfigError(f"invalid TOML in {path}: {e}") from None


def load_settings(config_path: Path | None) -> Settings:
    """Settings from pyproject.toml ([tool.ckptlint]) or a ckptlint.toml; None: the defaults."""
    if config_path is None:
        return Settings()
    path = Path(os.path.abspath(config_path))
    data = read_toml(path)
    if path.name == "pyproject.toml":
        location = f"in [tool.ckptlint] of {path}"
        tool = data.get("tool", {})
        table = tool.get("ckptlint", {}) if isinstance(tool, dict) else tool
        table = _table(table, _Key("tool.ckptlint", f"in {path}"))
    else:
        location, table = f"in {path}", data
    _check_keys(table, tuple(_KEYS), location)
    values = {
        key.replace("-", "_"): _KEYS[key](value, _Key(key, location))
        for key, value in table.items()
    }
    if "cache_dir" in values:  # relative to the config file, like every path in it
        values["cache_dir"] = str(path.parent / os.path.expanduser(values["cache_dir"]))
    if "confirm" in values:
        examples = values.pop("confirm")
        values["confirm_examples"] = tuple(str(path.parent / os.path.expanduser(e)) for e in examples)
    return Settings(**values, project_root=path.parent, config_path=path)


# -- validation: each converter takes (value, _Key) and returns the Settings value ---------


@dataclass(frozen=True)
class _Key:
    """The key being validated and where it is, for messages."""

    path: str  # dotted TOML key, or a command-line option
    location: str  # "in [tool.ckptlint] of /x/pyproject.toml", "on the command line"

    def __str__(self) -> str:
        return f"'{self.path}' {self.location}"

    def child(self, name: str) -> _Key:
        quoted = name if _BARE_KEY_RE.match(name) else json.dumps(name)
        return _Key(f"{self.path}.{quoted}", self.location)


_BARE_KEY_RE = re.compile(r"^[A-Za-z0-9_-]+$")
_CODE_RE = re.compile(r"^[A-Z]+[0-9]*$")
_QUALIFIED_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*$")
_TOML_TYPES = {
    dict: "a table", list: "an array", str: "a string", bool: "a boolean", int: "an integer",
}  # fmt: skip


def _wrong_type(key: _Key, expected: str, value: object) -> ConfigError:
    got = _TOML_TYPES.get(type(value), type(value).__name__)
    return ConfigError(f"{key} must be {expected}, got {got}: {value!r}")


def _check_keys(table: Mapping[str, Any], valid: Sequence[str], location: str) -> None:
    for key in table:
        if key not in valid:
            hint = difflib.get_close_matches(key, valid, n=1)
            raise ConfigError(
                f"unknown key {key!r} {location} (valid keys: {', '.join(valid)})"
                + (f"; did you mean {hint[0]!r}?" if hint else "")
            )


def _string(value: Any, key: _Key) -> str:
    if not isinstance(value, str):
        raise _wrong_type(key, "a string", value)
    return value


def _bool(value: Any, key: _Key) -> bool:
    if not isinstance(value, bool):
        raise _wrong_type(key, "a boolean (true or false)", value)
    return value


def _table(value: Any, key: _Key) -> Mapping[str, Any]:
    if not isinstance(value, dict):
        raise _wrong_type(key, "a table", value)
    return value


def _strings(value: Any, key: _Key) -> tuple[str, ...]:
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
        raise _wrong_type(key, "an array of strings", value)
    return tuple(value)


def _codes(value: Any, key: _Key) -> tuple[str, ...]:
    codes = _strings(value, key)
    for code in codes:
        _check_code(code, key)
    return codes


def _check_code(code: str, key: _Key) -> None:
    if not _CODE_RE.match(code) or not (code == "ALL" or code.startswith("CKPT")):
        raise ConfigError(
            f"invalid rule code {code!r} in {key}: expected 'ALL' or a code or prefix "
            "starting with 'CKPT' (e.g. 'CKPT001', 'CKPT')"
        )
    known = _known_codes()
    if code != "ALL" and not any(known_code.startswith(code) for known_code in known):
        # A mistyped code would otherwise select nothing, or ignore nothing, without a word.
        hint = difflib.get_close_matches(code, known, n=1)
        raise ConfigError(
            f"rule code {code!r} in {key} matches no rule: no rule code starts with {code!r} "
            f"(known: {', '.join(known)})" + (f"; did you mean {hint[0]!r}?" if hint else "")
        )


@lru_cache(maxsize=1)
def _known_codes() -> tuple[str, ...]:
    from ckptlint.rules import all_rules  # the rules import the model, which reads settings

    return tuple(rule.code for rule in all_rules())


def _version(value: Any, key: _Key) -> str:
    from ckptlint.versions import parse_version  # versions imports this module

    text = _string(value, key)
    if parse_version(text) is None:
        raise ConfigError(f"{key} is not a valid version: {text!r} (expected e.g. '2.13')")
    return text


def _size(value: Any, key: _Key) -> int:
    size = value if type(value) is int and value > 0 else parse_size(value) if isinstance(value, str) else None
    if size is None:
        raise ConfigError(f"{key}: invalid size {value!r} (expected a positive number of bytes, or one with KB, MB or GB, e.g. '10 MB')")
    return size


def _per_file_ignores(value: Any, key: _Key) -> tuple[tuple[str, tuple[str, ...]], ...]:
    entries = []
    for glob, codes in _table(value, key).items():
        if compile_pattern(glob) is None:
            raise ConfigError(f"invalid glob {glob!r} in {key}")
        entries.append((glob, _codes(codes, key.child(glob))))
    return tuple(entries)


def _severity(value: Any, key: _Key) -> tuple[tuple[str, Severity], ...]:
    entries = []
    for code, level in _table(value, key).items():
        _check_code(code, key)
        if level not in {s.value for s in Severity}:
            valid = ", ".join(repr(s.value) for s in Severity)
            raise ConfigError(f"{key.child(code)} must be one of {valid}, got {level!r}")
        entries.append((code, Severity(level)))
    return tuple(entries)


_WRAPPER_KEYS = ("reentrant", "preserve-rng-state")


def _checkpoint_functions(value: Any, key: _Key) -> tuple[tuple[str, WrapperSpec], ...]:
    entries = []
    for name, spec in _table(value, key).items():
        entry = key.child(name)
        if not _QUALIFIED_NAME_RE.match(name):
            raise ConfigError(f"{entry}: not a qualified name like 'mypkg.utils.ckpt'")
        _check_keys(_table(spec, entry), _WRAPPER_KEYS, f"in {entry}")
        fields = {k.replace("-", "_"): _bool(v, entry.child(k)) for k, v in spec.items()}
        entries.append((name, WrapperSpec(**fields)))
    return tuple(entries)


_CONFIRM_KEYS = ("examples",)


def _confirm(value: Any, key: _Key) -> tuple[str, ...]:
    """[tool.ckptlint.confirm]: only `examples`, a list of files (relative to the config)."""
    table = _table(value, key)
    _check_keys(table, _CONFIRM_KEYS, f"in {key}")
    return _strings(table.get("examples", []), key.child("examples"))


_KEYS: dict[str, Callable[[Any, _Key], Any]] = {
    "select": _codes,
    "extend-select": _codes,
    "ignore": _codes,
    "per-file-ignores": _per_file_ignores,
    "exclude": _strings,
    "extend-exclude": _strings,
    "respect-gitignore": _bool,
    "force-exclude": _bool,
    "severity": _severity,
    "torch-version": _version,
    "transformers-version": _version,
    "checkpoint-functions": _checkpoint_functions,
    "cache-dir": _string,
    "max-file-size": _size,
    "confirm": _confirm,
    "fix": _bool,
    "unsafe-fixes": _bool,
    "show-fixes": _bool,
}

# Settings fields the command line passes as plain values (tables come only from files).
_OVERRIDE_CHECKS: dict[str, Callable[[Any, _Key], Any]] = {
    key.replace("-", "_"): _KEYS[key]
    for key in ("select", "extend-select", "ignore", "exclude", "extend-exclude",
                "torch-version", "transformers-version", "max-file-size")
}  # fmt: skip

"""The flake8 extension (entry point `flake8.extension`, code prefix CKPT): existing flake8 setups
report ckptlint's findings, at the positions `ckptlint FILE` reports them, with flake8's own
`--select`, `--extend-ignore`, `# noqa` and exit codes on top.

Each file flake8 hands over is linted as `ckptlint FILE` would lint it, from the text flake8 read
(stdin included), with the project's `[tool.ckptlint]` settings and result cache. A file without
any checkpoint text returns at once, before anything is imported: flake8 runs every plugin on every
file, and most files cannot matter.
"""

from __future__ import annotations

import os
import re
from functools import lru_cache
from typing import TYPE_CHECKING, Iterator, Optional, Sequence

from ckptlint import __version__

if TYPE_CHECKING:
    from pathlib import Path

    from ckptlint.config import Settings
    from ckptlint.versions import LibraryVersions

Result = tuple[int, int, str, type]


class CkptlintChecker:
    name = "ckptlint"
    version = __version__

    def __init__(self, tree: object, filename: str, lines: Sequence[str]) -> None:
        # `tree` is requested so that flake8 runs the plugin once per file; ckptlint parses itself.
        self.filename = filename
        self.lines = lines

    def run(self) -> Iterator[Result]:
        text = "".join(self.lines)
        path = self.filename if self.filename not in ("stdin", "-") else "stdin.py"
        directory = os.path.dirname(os.path.abspath(path))
        settings = _settings(directory)
        if settings is None or not _may_hold_a_site(text, settings):
            return
        from ckptlint.engine import lint

        settings, versions, cache, root = _context(directory)
        report = lint([], settings, versions, jobs=1, cache=cache, stdin=(path, text), project=root)
        for finding in report.findings:
            if finding.path == path:
                # flake8 columns are 0-based (it adds 1 when printing); ckptlint's are 1-based.
                yield finding.line, finding.column - 1, f"{finding.code} {finding.message}", type(self)


# Every checkpoint API ckptlint knows has "checkpoint" in the name a file imports it by (and
# TrainingArguments, whose flag may come from a dict).
_CHECKPOINT_IMPORT = re.compile(r"^\s*(?:from|import)\s.*(?:[Cc]heckpoint|TrainingArguments)", re.MULTILINE)


def _may_hold_a_site(text: str, settings: Settings) -> bool:
    """The engine's text cut (a checkpoint call, flag or layer, a configured wrapper's name), plus
    the imports its index resolves: all a file linted alone can hold a site through (transformers:
    595 of 2,860 files pass); and code that may call or sample from a model of another file where
    grad is off (`relevance.can_matter` decides with the project's index)."""
    from ckptlint.relevance import GENERATE_TEXT, SITE_TEXT, may_switch_grad_off

    if SITE_TEXT.search(text) or _CHECKPOINT_IMPORT.search(text) or GENERATE_TEXT in text or may_switch_grad_off(text):
        return True
    wrappers = [name.rsplit(".", 1)[-1] for name, _ in settings.checkpoint_functions]
    return bool(wrappers) and re.search(rf"\b(?:{'|'.join(map(re.escape, wrappers))})\b", text) is not None


@lru_cache(maxsize=None)
def _settings(directory: str) -> Optional[Settings]:
    """The settings of the project holding `directory` (None: its configuration is broken, which
    `ckptlint` itself reports; a flake8 run should not crash on it)."""
    from ckptlint.config import ConfigError, find_config, load_settings

    try:
        return load_settings(find_config([directory]))
    except ConfigError:
        return None


@lru_cache(maxsize=None)
def _context(directory: str) -> tuple[Settings, LibraryVersions, object, Optional[Path]]:
    from ckptlint.cache import CacheError, ResultCache
    from ckptlint.cli import cache_dir_for, project_root
    from ckptlint.versions import resolve_versions

    settings = _settings(directory)
    assert settings is not None
    root = project_root(settings, [directory])
    versions = resolve_versions(settings, root, None, None)
    try:
        cache = ResultCache(cache_dir_for(settings, root, None))
    except CacheError:
        cache = None
    return settings, versions, cache, root

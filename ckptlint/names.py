"""Qualified-name resolution shared by the cheap index pass (ast) and the model pass (LibCST).

Both passes reduce an import statement or an attribute chain to strings; the logic that turns
those strings into qualified names lives here once.
"""

from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path
from typing import Iterable, Mapping, Optional


def module_name_for(path: Path) -> tuple[str, bool]:
    """Dotted module name of a file and whether it is a package `__init__`.

    Walks up while the parent directory is a package, so `src/pkg/sub/mod.py` gives
    `pkg.sub.mod` whatever directory ckptlint was started from.
    """
    # Resolving every file walks every folder above it again: resolve each folder once.
    path = path.resolve() if path.is_symlink() else _resolved(path.parent) / path.name
    is_package = path.stem == "__init__"
    package = _package_of(path.parent)
    parts = [p for p in (package, "" if is_package else path.stem) if p]
    return ".".join(parts) or path.stem, is_package


@lru_cache(maxsize=None)
def _resolved(directory: Path) -> Path:
    return directory.resolve()


@lru_cache(maxsize=None)
def _package_of(directory: Path) -> str:
    """Dotted package of a directory ('' outside packages); memoized: siblings share the walk."""
    if not (os.path.isfile(directory / "__init__.py") or os.path.isfile(directory / "__init__.pyi")):
        return ""
    if directory.parent == directory:
        return directory.name
    parent = _package_of(directory.parent)
    return f"{parent}.{directory.name}" if parent else directory.name


def absolute_module(current: str, is_package: bool, level: int, module: Optional[str]) -> Optional[str]:
    """Target of `from <level dots><module> import ...` seen from module `current`."""
    if level == 0:
        return module
    package = current.split(".") if is_package else current.split(".")[:-1]
    if level - 1 > len(package):
        return None
    base = package[: len(package) - (level - 1)]
    if module:
        base.append(module)
    return ".".join(base) or None


def import_bindings(module: str) -> Iterable[tuple[str, str]]:
    """`import a.b.c` binds `a` to `a`; attribute access then reaches `a.b.c`."""
    head = module.split(".", 1)[0]
    yield head, head


def resolve_dotted(dotted: str, aliases: Mapping[str, str]) -> Optional[str]:
    """Qualified name of `dotted` (e.g. `cp.checkpoint`) through an alias table."""
    head, _, rest = dotted.partition(".")
    target = aliases.get(head)
    if target is None:
        return None
    return f"{target}.{rest}" if rest else target

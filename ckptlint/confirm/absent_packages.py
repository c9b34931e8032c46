"""Placeholders for packages a target imports that are not installed.

A training file often imports what its model never touches (`datasets`, `wandb`, `evaluate`); the
model can still be run. `install(names)` makes `import name` (and its submodules) give a
placeholder module: every attribute is a placeholder value, and calling one, iterating it,
testing it or subclassing it raises ModuleNotFoundError, as the missing package would have been
needed there. The runner reports "needs a package" whenever the run does not get through.

Runs in the confirm child only.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
import types
from typing import Any, NoReturn, Optional, Sequence


def _missing(name: str) -> NoReturn:
    raise ModuleNotFoundError(f"No module named '{name}' (not installed: --confirm imported a placeholder)", name=name)


class AbsentValue:
    """What an attribute of a missing package is: using it raises."""

    def __init__(self, package: str, path: str) -> None:
        object.__setattr__(self, "_package", package)
        object.__setattr__(self, "_path", path)

    def __getattr__(self, name: str) -> "AbsentValue":
        if name.startswith("__"):
            raise AttributeError(name)
        return AbsentValue(object.__getattribute__(self, "_package"), f"{object.__getattribute__(self, '_path')}.{name}")

    def __call__(self, *args: Any, **kwargs: Any) -> NoReturn:
        _missing(object.__getattribute__(self, "_package"))

    def __iter__(self) -> NoReturn:
        _missing(object.__getattribute__(self, "_package"))

    def __bool__(self) -> NoReturn:
        _missing(object.__getattribute__(self, "_package"))

    def __mro_entries__(self, bases: tuple[Any, ...]) -> NoReturn:
        _missing(object.__getattribute__(self, "_package"))

    def __repr__(self) -> str:
        return f"<{object.__getattribute__(self, '_path')}: not installed>"


class AbsentModule(types.ModuleType):
    def __getattr__(self, name: str) -> AbsentValue:
        if name.startswith("__"):
            raise AttributeError(name)
        return AbsentValue(self.__name__.split(".")[0], f"{self.__name__}.{name}")


class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def __init__(self) -> None:
        self.names: set[str] = set()

    def find_spec(self, fullname: str, path: Optional[Sequence[str]] = None, target: Optional[types.ModuleType] = None) -> Optional[importlib.machinery.ModuleSpec]:
        if fullname.split(".")[0] not in self.names:
            return None
        return importlib.machinery.ModuleSpec(fullname, self, is_package=True)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        module = AbsentModule(spec.name)
        module.__path__ = []  # a package: its submodules are placeholders too
        return module

    def exec_module(self, module: types.ModuleType) -> None:
        pass


_FINDER = _Finder()


def is_placeholder(module: Optional[types.ModuleType]) -> bool:
    """Whether an imported module is one of these placeholders (the package is not installed)."""
    return isinstance(module, AbsentModule)


def install(names: Sequence[str]) -> None:
    """Make `import name` give a placeholder for each of `names` (for the rest of the process)."""
    _FINDER.names.update(n for n in names if n)
    if _FINDER not in sys.meta_path:
        sys.meta_path.insert(0, _FINDER)

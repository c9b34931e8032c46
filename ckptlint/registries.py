"""Project registries of classes: module-level dicts (`MODELS = {"vit": ViT, "res": ResNet}`), the
entries code stores into them (`MODELS["mlp"] = Mlp`, `MODELS.update({...})`), and the classes a
registering decorator adds (`@register_model("vit")` on a class, where `register_model`'s function
stores the class it is handed: `MODELS[name] = cls`). `MODELS[name](...)` then builds one of those
classes (ProjectIndex.registry); an entry the code does not show makes the registry unknown.

Summarised per file from its AST, like the rest of the index (no LibCST, no imports of the code)."""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import Callable, Iterator, Optional, Union

UNKNOWN_ENTRY = "?"
# A registry is only ever changed by a subscript store or one of these methods on its name: a file
# that changes no candidate name needs no walk (the index's walk of every statement collects the
# names changed; searching the text for them took 15 s on transformers' files).
FILLING_METHODS = frozenset({"update", "setdefault"})
_Function = Union[ast.FunctionDef, ast.AsyncFunctionDef]


@dataclass
class RegistryFacts:
    # This module's registries: module-level name -> entries (qualified names; "?" for one not shown).
    registries: dict[str, list[str]] = field(default_factory=dict)
    # Entries this module's code stores into a registry (its own or an imported one), by qualified name.
    stores: dict[str, list[str]] = field(default_factory=dict)
    # Top-level functions of this module that store the class they (or a function they define) are
    # handed into a registry: function -> the registry's qualified name.
    registrars: dict[str, str] = field(default_factory=dict)
    # This module's classes with decorators: class -> the decorators' qualified names.
    decorated: dict[str, list[str]] = field(default_factory=dict)


def scan_registries(
    module: str, tree: ast.Module, filled: set[str], imported: set[str], qualify: Callable[[ast.AST], Optional[str]], project_name: Callable[[ast.AST], Optional[str]]
) -> RegistryFacts:
    facts = RegistryFacts()
    for stmt in tree.body:
        if isinstance(stmt, ast.ClassDef) and stmt.decorator_list:
            names = [qualify(d.func if isinstance(d, ast.Call) else d) for d in stmt.decorator_list]
            facts.decorated[stmt.name] = [n for n in names if n]
        target, value = _assigned(stmt)
        if target is not None and _is_dict(value):
            # A dict holding anything but names of the project (constants, calls) is no registry of classes.
            entries = [project_name(v) if isinstance(v, (ast.Name, ast.Attribute)) else None for v in _dict_values(value)]  # type: ignore[arg-type]
            if all(entries):
                facts.registries[target] = entries  # type: ignore[assignment]
    # Stores through the registry's module (`models.MODELS["x"] = X`) are not looked for: code that
    # fills a registry imports it by name.
    changed = {name for name in filled if name in facts.registries or name in imported}
    if not changed:
        return facts

    def registry(node: ast.AST, local: frozenset[str]) -> Optional[str]:
        """The qualified name of the registry `node` names (a module-level dict, maybe imported)."""
        if not isinstance(node, ast.Name) or node.id in local or node.id not in changed:
            return None
        return f"{module}.{node.id}" if node.id in facts.registries else qualify(node)

    for function, node, params, local in _statements(tree):
        if isinstance(node, (ast.Assign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                name = registry(target.value, local) if isinstance(target, ast.Subscript) else None
                if name is not None:
                    _store(facts, name, node.value, function, params, project_name, augmented=isinstance(node, ast.AugAssign))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in FILLING_METHODS:
            name = registry(node.func.value, local)
            if name is None:
                continue
            if node.func.attr == "setdefault" and len(node.args) == 2:
                _store(facts, name, node.args[1], function, params, project_name)
            elif node.func.attr == "update" and len(node.args) == 1 and isinstance(node.args[0], ast.Dict) and not node.keywords:
                for value in _dict_values(node.args[0]):
                    _store(facts, name, value, function, params, project_name)
            else:
                facts.stores.setdefault(name, []).append(UNKNOWN_ENTRY)
    return facts


def _assigned(stmt: ast.stmt) -> tuple[Optional[str], Optional[ast.expr]]:
    if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
        return stmt.targets[0].id, stmt.value
    if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and stmt.value is not None:
        return stmt.target.id, stmt.value
    return None, None


def _is_dict(value: Optional[ast.expr]) -> bool:
    """`{...}` with no `**other`, or `dict(...)` with keywords only."""
    if isinstance(value, ast.Dict):
        return all(k is not None for k in value.keys)
    return isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id == "dict" and not value.args and all(k.arg for k in value.keywords)


def _dict_values(value: ast.expr) -> list[ast.expr]:
    return list(value.values) if isinstance(value, ast.Dict) else [k.value for k in value.keywords]  # type: ignore[attr-defined]


def _store(
    facts: RegistryFacts, name: str, value: ast.expr, function: Optional[_Function], params: frozenset[str], project_name: Callable[[ast.AST], Optional[str]], augmented: bool = False
) -> None:
    """One entry stored into registry `name`: a project name, or the class a registering function is handed."""
    if not augmented and isinstance(value, ast.Name) and value.id in params and function is not None:
        if facts.registrars.setdefault(function.name, name) == name:
            return
    entry = project_name(value) if not augmented else None
    facts.stores.setdefault(name, []).append(entry or UNKNOWN_ENTRY)


def _statements(tree: ast.Module) -> Iterator[tuple[Optional[_Function], ast.AST, frozenset[str], frozenset[str]]]:
    """Every node with the top-level function it is in (None: module level, classes included), the
    parameters in reach there (the function's and those of the functions it defines) and the names
    the function binds itself."""
    for stmt in tree.body:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            nodes = list(ast.walk(stmt))
            params = frozenset(a.arg for f in nodes if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)) for a in _arguments(f))
            local = _locals(nodes)
            for node in nodes:
                yield stmt, node, params, local
        else:
            for node in ast.walk(stmt):
                yield None, node, frozenset(), frozenset()


def _arguments(function: Union[_Function, ast.Lambda]) -> list[ast.arg]:
    a = function.args
    return [*a.posonlyargs, *a.args, *a.kwonlyargs]


def _locals(nodes: list[ast.AST]) -> frozenset[str]:
    """Names a function binds itself (a local `models = {}` is no registry), `global` ones excepted."""
    declared = {n for node in nodes if isinstance(node, ast.Global) for n in node.names}
    bound = {t.id for node in nodes if isinstance(node, (ast.Assign, ast.AnnAssign)) for t in (node.targets if isinstance(node, ast.Assign) else [node.target]) if isinstance(t, ast.Name)}
    return frozenset(bound - declared)

"""Fuzzing: valid programs from hypothesmith and meaning-preserving mutations of the fixtures, and
the properties every lint must keep. `tests/test_fuzz.py` runs them briefly and seeded in CI;
`scripts/fuzz.py` runs them long.

A mutation returns the new text and where each old line went, so that a finding can be followed
to its new line: renamed local variables, reordered independent top-level definitions or imports,
added comments, blank lines and parentheses, and other import aliases.
"""

from __future__ import annotations

import ast
import io
import os
import random
import shutil
import tokenize
import warnings
from collections import Counter
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator, Optional, Sequence

import libcst as cst
from hypothesis import strategies as st
from libcst.metadata import FunctionScope, GlobalScope, MetadataWrapper, ScopeProvider

from ckptlint import engine
from ckptlint.cache import ResultCache
from ckptlint.config import Settings
from ckptlint.engine import lint
from ckptlint.findings import LintReport
from ckptlint.lines import lines_of
from ckptlint.versions import resolve_versions

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "fixtures"
FIXTURE_FILES = sorted(p for p in FIXTURES.rglob("*.py"))
SETTINGS = Settings()
VERSIONS = resolve_versions(SETTINGS, None, "2.13", "5.23")


# --- mutations ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Mutated:
    text: str
    lines: dict[int, int]  # old line -> new line, for every old line

    def then(self, mutation: Callable[[str, random.Random], Optional["Mutated"]], rng: random.Random) -> "Mutated":
        """This mutation followed by another (itself when the other finds nothing to change)."""
        after = mutation(self.text, rng)
        if after is None:
            return self
        return Mutated(after.text, {old: after.lines[new] for old, new in self.lines.items()})


def unchanged(text: str) -> Mutated:
    return Mutated(text, _same_lines(text))


def _same_lines(text: str) -> dict[int, int]:
    return {line: line for line in range(1, text.count("\n") + 2)}


def rename_locals(text: str, rng: random.Random) -> Optional[Mutated]:
    """Rename some local variables of functions, every binding and use of each."""
    module = MetadataWrapper(cst.parse_module(text))
    # In the order the tree is visited, so that a seed gives the same renames every time.
    scopes = list({id(s): s for s in module.resolve(ScopeProvider).values() if isinstance(s, FunctionScope)}.values())
    declared = _global_or_nonlocal_names(module.module)
    renames: dict[cst.Name, str] = {}
    for scope in scopes:
        for name in sorted({a.name for a in scope.assignments}):
            nodes = _binding_and_uses(scope, name)
            if nodes is None or name in declared or rng.random() < 0.5:
                continue
            new_name = _fresh(f"{name}_renamed", text)
            renames.update((node, new_name) for node in nodes)
    if not renames:
        return None
    return Mutated(module.module.visit(_Renamer(renames)).code, _same_lines(text))


def alias_imports(text: str, rng: random.Random) -> Optional[Mutated]:
    """`import torch` -> `import torch as torch_alias`, `from m import n` -> `... import n as
    n_alias`, for names bound once at module level, with every use renamed."""
    module = MetadataWrapper(cst.parse_module(text))
    scopes = module.resolve(ScopeProvider)
    global_scope = next((s for s in scopes.values() if isinstance(s, GlobalScope)), None)
    if global_scope is None:
        return None
    aliases: dict[int, str] = {}  # id(ImportAlias) -> new name
    renames: dict[cst.Name, str] = {}
    for assignment in global_scope.assignments:
        node = assignment.node
        if not isinstance(node, (cst.Import, cst.ImportFrom)) or _is_future(node) or rng.random() < 0.5:
            continue
        alias = next((a for a in node.names if a.asname is None and isinstance(a.name, cst.Name) and a.name.value == assignment.name), None) if not isinstance(node.names, cst.ImportStar) else None
        if alias is None or len(global_scope.assignments[assignment.name]) != 1:
            continue
        uses = [r.node for r in assignment.references]
        if not all(isinstance(use, cst.Name) for use in uses):
            continue  # a string annotation
        new_name = _fresh(f"{assignment.name}_alias", text)
        aliases[id(alias)] = new_name
        renames.update((use, new_name) for use in uses)
    if not aliases:
        return None
    return Mutated(module.module.visit(_Renamer(renames, aliases)).code, _same_lines(text))


def add_parentheses(text: str, rng: random.Random) -> Optional[Mutated]:
    """Wrap some call arguments, callees, assigned and returned values in (more) parentheses."""
    module = cst.parse_module(text)
    wrapper = _Parenthesizer(rng)
    mutated = module.visit(wrapper)
    return Mutated(mutated.code, _same_lines(text)) if wrapper.count else None


def add_comments(text: str, rng: random.Random) -> Optional[Mutated]:
    """Comment lines between statements, and comments at the end of lines that have none."""
    trailing = {line for line in _logical_line_ends(text) if rng.random() < 0.3}
    lines = text.splitlines(keepends=True)
    for line in trailing:
        body = lines[line - 1].rstrip("\r\n")
        lines[line - 1] = body + "  # a comment added by the fuzzer" + lines[line - 1][len(body) :]
    return _insert_before_statements("".join(lines), rng, "# a comment line added by the fuzzer", force=bool(trailing))


def add_blank_lines(text: str, rng: random.Random) -> Optional[Mutated]:
    return _insert_before_statements(text, rng, "")


def reorder_definitions(text: str, rng: random.Random) -> Optional[Mutated]:
    """Swap two adjacent top-level definitions (or imports) that do not refer to each other."""
    module = cst.parse_module(text)
    body = list(module.body)
    pairs = [i for i in range(len(body) - 1) if _independent(body[i], body[i + 1])]
    if not pairs:
        return None
    first = rng.choice(pairs)
    starts, sizes = [], []
    line = 1 + _line_count(module.with_changes(body=[], footer=[]).code)  # after the header's lines
    for statement in body:
        starts.append(line)
        sizes.append(_line_count(module.code_for_node(statement)))
        line += sizes[-1]
    body[first], body[first + 1] = body[first + 1], body[first]
    mapping = _same_lines(text)
    a, b = first, first + 1
    for offset in range(sizes[a]):
        mapping[starts[a] + offset] = starts[a] + sizes[b] + offset
    for offset in range(sizes[b]):
        mapping[starts[b] + offset] = starts[a] + offset
    return Mutated(module.with_changes(body=body).code, mapping)


MUTATIONS: tuple[Callable[[str, random.Random], Optional[Mutated]], ...] = (
    rename_locals,
    alias_imports,
    add_parentheses,
    add_comments,
    add_blank_lines,
    reorder_definitions,
)


def mutate(text: str, mutations: Sequence[Callable[[str, random.Random], Optional[Mutated]]], rng: random.Random) -> Mutated:
    result = unchanged(text)
    for mutation in mutations:
        result = result.then(mutation, rng)
    return result


class _Renamer(cst.CSTTransformer):
    def __init__(self, renames: dict[cst.Name, str], aliases: Optional[dict[int, str]] = None) -> None:
        super().__init__()
        self.renames = {id(node): new for node, new in renames.items()}
        self.aliases = aliases or {}

    def leave_Name(self, original: cst.Name, updated: cst.Name) -> cst.Name:
        new = self.renames.get(id(original))
        return updated.with_changes(value=new) if new else updated

    def leave_ImportAlias(self, original: cst.ImportAlias, updated: cst.ImportAlias) -> cst.ImportAlias:
        new = self.aliases.get(id(original))
        return updated.with_changes(asname=cst.AsName(name=cst.Name(new))) if new else updated


class _Parenthesizer(cst.CSTTransformer):
    def __init__(self, rng: random.Random) -> None:
        super().__init__()
        self.rng = rng
        self.count = 0

    def _wrap(self, node: cst.BaseExpression) -> cst.BaseExpression:
        if self.rng.random() >= 0.3 or isinstance(node, (cst.StarredElement,)):
            return node
        self.count += 1
        return node.with_changes(lpar=[cst.LeftParen(), *node.lpar], rpar=[*node.rpar, cst.RightParen()])

    def leave_Arg(self, original: cst.Arg, updated: cst.Arg) -> cst.Arg:
        return updated.with_changes(value=self._wrap(updated.value))

    def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.Call:
        return updated.with_changes(func=self._wrap(updated.func))

    def leave_Assign(self, original: cst.Assign, updated: cst.Assign) -> cst.Assign:
        return updated.with_changes(value=self._wrap(updated.value))

    def leave_Return(self, original: cst.Return, updated: cst.Return) -> cst.Return:
        return updated.with_changes(value=self._wrap(updated.value)) if updated.value is not None else updated


def _binding_and_uses(scope: FunctionScope, name: str) -> Optional[list[cst.Name]]:
    """Every node that binds or reads `name` in `scope`, when all are plain names (not a
    parameter, an import, a def or a string annotation)."""
    nodes: list[cst.CSTNode] = []
    for assignment in scope.assignments[name]:
        if not hasattr(assignment, "node"):
            return None
        nodes.append(assignment.node)
        nodes.extend(reference.node for reference in assignment.references)
    nodes.extend(access.node for access in scope.accesses[name])
    if not nodes or not all(isinstance(node, cst.Name) for node in nodes):
        return None
    return list({id(node): node for node in nodes}.values())  # type: ignore[arg-type]


def _global_or_nonlocal_names(module: cst.Module) -> set[str]:
    names: set[str] = set()

    class Collector(cst.CSTVisitor):
        def visit_Global(self, node: cst.Global) -> None:
            names.update(n.name.value for n in node.names)

        def visit_Nonlocal(self, node: cst.Nonlocal) -> None:
            names.update(n.name.value for n in node.names)

    module.visit(Collector())
    return names


def _fresh(base: str, text: str) -> str:
    name, number = base, 1
    while name in text:
        number += 1
        name = f"{base}{number}"
    return name


def _is_future(node: cst.CSTNode) -> bool:
    return isinstance(node, cst.ImportFrom) and isinstance(node.module, cst.Name) and node.module.value == "__future__"


def _line_count(code: str) -> int:
    return code.count("\n")


def _bound_names(statement: cst.CSTNode) -> Optional[set[str]]:
    """The names a definition or an import statement binds; None for any other statement."""
    if isinstance(statement, (cst.FunctionDef, cst.ClassDef)):
        return {statement.name.value}
    if isinstance(statement, cst.SimpleStatementLine) and len(statement.body) == 1 and isinstance(statement.body[0], (cst.Import, cst.ImportFrom)):
        imported = statement.body[0]
        if _is_future(imported) or isinstance(imported.names, cst.ImportStar):
            return None
        names = set()
        for alias in imported.names:
            bound = alias.asname.name if alias.asname else alias.name
            while isinstance(bound, cst.Attribute):
                bound = bound.value
            names.add(bound.value)  # type: ignore[union-attr]
        return names
    return None


def _independent(first: cst.CSTNode, second: cst.CSTNode) -> bool:
    first_names, second_names = _bound_names(first), _bound_names(second)
    if first_names is None or second_names is None or first_names & second_names:
        return False
    if isinstance(first, cst.SimpleStatementLine) != isinstance(second, cst.SimpleStatementLine):
        return False  # an import and a definition: the definition may use it when it runs
    return not (_names_in(first) & second_names) and not (_names_in(second) & first_names)


def _names_in(node: cst.CSTNode) -> set[str]:
    names: set[str] = set()

    class Collector(cst.CSTVisitor):
        def visit_Name(self, name: cst.Name) -> None:
            names.add(name.value)

    node.visit(Collector())
    return names


def _statement_lines(text: str) -> list[int]:
    """First lines of statements (their decorators included), where a line may be inserted."""
    lines: set[int] = set()
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.stmt):
            decorators = getattr(node, "decorator_list", [])
            lines.add(min([node.lineno, *(d.lineno for d in decorators)]))
    return sorted(lines)


def _logical_line_ends(text: str) -> list[int]:
    """Lines that end a logical line and carry no comment (a comment can be appended)."""
    ends, commented = set(), set()
    for token in tokenize.generate_tokens(io.StringIO(text).readline):
        if token.type == tokenize.NEWLINE and token.string:
            ends.add(token.start[0])
        elif token.type == tokenize.COMMENT:
            commented.add(token.start[0])
    return sorted(ends - commented)


def _insert_before_statements(text: str, rng: random.Random, inserted: str, force: bool = False) -> Optional[Mutated]:
    lines = text.splitlines(keepends=True)
    # A coding cookie or a shebang must stay on the first lines.
    protected = 2 if any(line.startswith("#") for line in lines[:2]) else 0
    targets = {line for line in _statement_lines(text) if line > protected and rng.random() < 0.3}
    if not targets and not force:
        return None
    out: list[str] = []
    mapping: dict[int, int] = {}
    for number, line in enumerate(lines, start=1):
        if number in targets:
            indent = line[: len(line) - len(line.lstrip())]
            out.append((indent + inserted if inserted else "") + "\n")
        out.append(line)
        mapping[number] = len(out)
    mapping[len(lines) + 1] = len(out) + 1
    return Mutated("".join(out), mapping)


# --- what a lint reports, and the properties ---------------------------------------------------------


def lint_paths(paths: Sequence[str], *, jobs: int = 1, cache: Optional[ResultCache] = None) -> LintReport:
    return lint(list(paths), SETTINGS, VERSIONS, jobs=jobs, cache=cache)


def lint_source(source: str, filename: str = "generated.py") -> LintReport:
    return lint([], SETTINGS, VERSIONS, jobs=1, stdin=(filename, source))


def findings_of(report: LintReport) -> list[tuple]:
    return sorted((f.path, f.cell, f.line, f.column, f.end_line, f.end_column, f.code, f.message) for f in report.findings)


def assert_sound(report: LintReport, texts: dict[str, str]) -> None:
    """No internal error, and every finding's span inside its file (1-based, end exclusive)."""
    internal = [e for e in report.errors if "internal error" in e.message]
    assert not internal, internal
    for finding in report.findings:
        text = texts.get(finding.path)
        assert text is not None, f"a finding in a file that was not linted: {finding.path}"
        lines = lines_of(text)
        where = f"{finding.path}:{finding.line}:{finding.column}-{finding.end_line}:{finding.end_column}"
        assert 1 <= finding.line <= finding.end_line <= len(lines), where
        assert 1 <= finding.column <= len(lines[finding.line - 1]) + 1, where
        assert 1 <= finding.end_column <= len(lines[finding.end_line - 1]) + 1, where
        assert (finding.line, finding.column) <= (finding.end_line, finding.end_column), where


def check_program(program: str) -> None:
    """A valid program (what `compile()` accepts) lints without an error, each finding inside it.
    The program is followed by checkpoint calls of its top-level functions, so that the analysis,
    not just the cheap prefilter, reads it."""
    source = _with_checkpoint_calls(program)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SyntaxWarning)  # `"a"()` and the like: valid, and noisy
        compile(source, "generated.py", "exec")
    report = lint_source(source)
    assert report.errors == [], report.errors
    assert_sound(report, {"generated.py": source})


def _with_checkpoint_calls(program: str) -> str:
    names = [n.name for n in ast.parse(program).body if isinstance(n, (ast.FunctionDef, ast.ClassDef))]
    calls = "".join(f"    h = checkpoint({name}, h)\n" for name in names) or "    h = checkpoint(h, h)\n"
    return f"from torch.utils.checkpoint import checkpoint\n{program}\n\ndef _fuzz_caller(h):\n{calls}    return h\n"


def check_mutation(path: Path, mutations: Sequence[Callable], rng: random.Random, scratch: Path, baseline: Callable[[Path], Counter]) -> Mutated:
    """The mutated file alone reports the same codes as the original alone, each on the line its
    original line moved to."""
    text = path.read_text()
    mutated = mutate(text, mutations, rng)
    compile(mutated.text, str(path), "exec")
    target = scratch / path.name
    target.write_text(mutated.text)
    report = lint_paths([str(target)])
    assert_sound(report, {str(target): mutated.text})
    assert report.errors == [], report.errors
    expected = Counter({(mutated.lines[line], code): n for (line, code), n in baseline(path).items()})
    found = Counter((f.line, f.code) for f in report.findings)
    assert found == expected, f"{path.name} after {[m.__name__ for m in mutations]}: missing {sorted(expected - found)}, new {sorted(found - expected)}"
    return mutated


def original_findings(path: Path) -> Counter:
    return Counter((f.line, f.code) for f in lint_paths([str(path)]).findings)


def copy_fixtures(destination: Path, mutations: dict[Path, tuple[Sequence[Callable], random.Random]]) -> dict[str, str]:
    """The fixtures under `destination`, some of them mutated; their texts by the path the lint reports."""
    texts = {}
    for path in FIXTURE_FILES:
        target = destination / path.relative_to(FIXTURES.parent)
        target.parent.mkdir(parents=True, exist_ok=True)
        text = path.read_text()
        if path in mutations:
            text = mutate(text, *mutations[path]).text
        target.write_text(text)
        texts[str(target.relative_to(destination))] = text
    return texts


def check_modes(project: Path, texts: dict[str, str]) -> int:
    """Linting `project` (run from inside it) gives the same findings together and import-connected
    group by group, with one job and several, without a cache, with a cold one and a warm one.
    Returns how many findings that was."""
    reference = lint_paths(["fixtures"])
    assert_sound(reference, texts)
    assert reference.errors == [], reference.errors
    expected = findings_of(reference)
    by_group: list[tuple] = []
    for group in import_groups(list(texts)):
        by_group += findings_of(lint_paths(group))
    assert sorted(by_group) == expected, _difference(expected, by_group)
    with _always_parallel():
        parallel = findings_of(lint_paths(["fixtures"], jobs=2))
    assert parallel == expected, _difference(expected, parallel)
    cache_dir = project / ".fuzz_cache"
    for run in ("cold", "warm"):
        cached = findings_of(lint_paths(["fixtures"], cache=ResultCache(cache_dir)))
        assert cached == expected, (run, _difference(expected, cached))
    shutil.rmtree(cache_dir)
    return len(expected)


def _difference(expected: list, found: list) -> str:
    missing, new = Counter(expected) - Counter(found), Counter(found) - Counter(expected)
    return f"missing {sorted(missing)}, new {sorted(new)}"


@contextmanager
def _always_parallel() -> Iterator[None]:
    """Small trees are analysed in-process whatever --jobs says; make the pool run."""
    saved = engine._PARALLEL_MIN_BYTES
    engine._PARALLEL_MIN_BYTES = 0
    try:
        yield
    finally:
        engine._PARALLEL_MIN_BYTES = saved


def import_groups(paths: Sequence[str]) -> list[list[str]]:
    """The files in groups closed under imports between them (either way): a file's findings may
    depend on what it imports and on how its importers call it, on nothing else."""
    from ckptlint.names import module_name_for

    modules = {path: module_name_for(Path(path).resolve()) for path in paths}
    parent = {path: path for path in paths}

    def root(path: str) -> str:
        while parent[path] != path:
            path = parent[path]
        return path

    for path, (name, is_package) in modules.items():
        package = name if is_package else name.rpartition(".")[0]
        for imported in _imported_modules(Path(path).read_text(), package):
            for other, (other_name, _) in modules.items():
                if other != path and (imported == other_name or imported.startswith(other_name + ".") or other_name.startswith(imported + ".")):
                    parent[root(path)] = root(other)
    groups: dict[str, list[str]] = {}
    for path in paths:
        groups.setdefault(root(path), []).append(path)
    return list(groups.values())


def _imported_modules(text: str, package: str) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".") if package else []
                parts = parts[: len(parts) - node.level + 1] if node.level > 1 else parts
                base = ".".join([*parts, *([base] if base else [])])
            names.add(base)
            names.update(f"{base}.{alias.name}" for alias in node.names)
    return {name for name in names if name}


# --- strategies --------------------------------------------------------------------------------------


def programs() -> st.SearchStrategy[str]:
    import hypothesmith

    return st.one_of(hypothesmith.from_grammar(), hypothesmith.from_node())


def mutation_plans() -> st.SearchStrategy[tuple[Path, list[Callable], random.Random]]:
    return st.tuples(
        st.sampled_from(FIXTURE_FILES),
        st.lists(st.sampled_from(MUTATIONS), min_size=1, max_size=4),
        st.randoms(use_true_random=False),
    )


def fixture_mutations() -> st.SearchStrategy[dict[Path, tuple[list[Callable], random.Random]]]:
    return st.dictionaries(
        st.sampled_from(FIXTURE_FILES),
        st.tuples(st.lists(st.sampled_from(MUTATIONS), min_size=1, max_size=3), st.randoms(use_true_random=False)),
        max_size=6,
    )


@contextmanager
def chdir(path: Path) -> Iterator[None]:
    before = os.getcwd()
    os.chdir(path)
    try:
        yield
    finally:
        os.chdir(before)

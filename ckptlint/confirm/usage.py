"""How the project itself uses a target, read statically (ast; nothing is imported here).

The best example of how to build and call a model is the project's own code: its construction
sites (`UNet(in_channels=3, base_channels=32)`), the keywords it passes when it calls an instance
(`model(ids, use_cache=True)`, `labels=`), the calls of a training function (`train_epoch(model,
optimizer, loader)` after `model = Classifier(...)`), and an `if __name__ == "__main__":` block or
`main()` that trains. Literals are resolved through simple assignments in the same scope
(`vocab_size = 256` ... `TinyGPT(vocab_size=vocab_size)`). Everything returned is plain data for
the confirm child.
"""

from __future__ import annotations

import ast
import builtins
import os
import stat
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable, Iterator, Optional, Sequence

from ckptlint.index import hf_enables, might_switch_hf_checkpointing
from ckptlint.names import module_name_for

# Folders that are not the project's own code.
_SKIPPED_DIRS = frozenset({".git", ".hg", ".venv", "venv", "env", "node_modules", "build", "dist", "site-packages", "__pycache__", ".tox", ".nox", ".mypy_cache", ".ckptlint_cache"})
MAX_FILES = 2000
MAX_BYTES = 1_000_000
_NO_LITERAL = object()


@dataclass
class Usage:
    """What the project shows about one target."""

    constructor_calls: list[dict[str, Any]] = field(default_factory=list)  # {"args": [...], "kwargs": {...}} literals
    call_keywords: dict[str, Any] = field(default_factory=dict)  # keywords passed when an instance is called
    keyword_names: list[str] = field(default_factory=list)  # keyword names passed, literal or not
    function_arguments: dict[str, dict[str, Any]] = field(default_factory=dict)  # parameter -> {"class": name, "kwargs": {...}}
    main: str = ""  # "block" (an `if __name__ == "__main__":` block) or "function" (a `main()`) that reaches the target
    main_path: str = ""  # the file of that main, when it is not the target's own
    # What the target's own file (else the first other file that builds one: "path") does to an
    # instance right after building it (freezing, switching checkpointing on):
    # {"variable": name, "statements": [{"line": n, "code": text}], "path": file}.
    setup: dict[str, Any] = field(default_factory=dict)
    # The callbacks of the Lightning Trainer that fits an instance in the target's own file, as the
    # index links them (`index.fitted_callbacks`): [[constructor, arguments], ...].
    callbacks: list[list[Any]] = field(default_factory=list)
    # The module classes whose methods build the target as one of their parts ("Net (model.py)"):
    # its input there is what their earlier layers hand it.
    built_into: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "built_into": self.built_into,
            "setup": self.setup,
            "callbacks": self.callbacks,
            "constructor_calls": self.constructor_calls,
            "call_keywords": self.call_keywords,
            "keyword_names": self.keyword_names,
            "function_arguments": self.function_arguments,
            "main": self.main,
            "main_path": self.main_path,
        }


# The files the settings exclude: not the project's code to read or run (a scratch script's main).
_excluded: Callable[[str], bool] = lambda path: False


@contextmanager
def excluding(excluded: Callable[[str], bool]) -> Iterator[None]:
    """Leave the files `excluded` accepts out of `project_files` while the block runs."""
    global _excluded
    previous, _excluded = _excluded, excluded
    try:
        yield
    finally:
        _excluded = previous


def project_files(path: str, root: Optional[str] = None) -> list[str]:
    """Python files of the project around `path`: its folder and the working directory, recursively
    (without virtualenvs, build output, caches, and excluded files unless `path` is one), at most
    MAX_FILES."""
    own = os.path.abspath(path)
    around = _files_under(os.path.dirname(own), os.path.abspath(root or os.getcwd()))
    # A target named though excluded (`ckptlint fixtures/x.py` with fixtures excluded) keeps its neighbours.
    kept = around if _excluded(own) else [file for file in around if not _excluded(file)]
    return list(dict.fromkeys([own, *kept]))


@lru_cache(maxsize=64)
def _files_under(folder: str, root: str) -> tuple[str, ...]:
    seen: dict[str, None] = {}
    for top in dict.fromkeys([folder, root]):
        for directory, subdirs, files in os.walk(top):
            subdirs[:] = sorted(d for d in subdirs if d not in _SKIPPED_DIRS and not d.startswith("."))
            for name in sorted(files):
                if name.endswith(".py"):
                    seen.setdefault(os.path.join(directory, name), None)
                if len(seen) >= MAX_FILES:
                    return tuple(seen)
    return tuple(seen)


@lru_cache(maxsize=4096)
def _read(path: str, mtime: float) -> str:
    try:
        status = os.stat(path)
        # Only regular files: opening a FIFO named `*.py` would wait for a writer forever.
        if not stat.S_ISREG(status.st_mode) or status.st_size > MAX_BYTES:
            return ""
        return Path(path).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""


@lru_cache(maxsize=1024)
def _parse(path: str, mtime: float) -> Optional[ast.Module]:
    try:
        return ast.parse(_read(path, mtime), filename=path)
    except (SyntaxError, ValueError):
        return None


def _mtime(path: str) -> float:
    try:
        return os.stat(path).st_mtime
    except OSError:
        return -1.0


def usage_of(name: str, path: str, files: Sequence[str], tree: Optional[ast.Module] = None, *, constructs: Sequence[str] = ()) -> Usage:
    """How `files` build and call the class or function `name` defined in `path` (`tree`: the
    parsed text of `path`, when it is not the file on disk). `constructs`: the classes that
    builder function `name` builds (its result is called like an instance of them)."""
    usage = Usage()
    own = os.path.abspath(path)
    # The folder all project files share: folders above it (a checkout under `~/tests/`) tell nothing.
    root = os.path.commonpath([own, *(os.path.abspath(file) for file in files)])
    root = root if os.path.isdir(root) else os.path.dirname(root)
    for file in files:
        if os.path.abspath(file) == own and tree is not None:
            module = tree
        else:
            # Another file uses the target only if it names it and imports its module.
            if not (name in text_of(file) if os.path.abspath(file) == own else _imports(file, own, [name])):
                continue
            module = _parse(file, _mtime(file))
        if module is None:
            continue
        globals_ = _module_literals(module)
        for scope in _scopes(module):
            _scan_scope(scope, name, set(constructs), usage, dict(globals_))
        usage.built_into += [f"{holder} ({os.path.basename(file)})" for holder in _module_classes_building(module, name)]
        if not usage.setup and (os.path.abspath(file) == own or not is_test_file(file, root)):
            # The target's own file (it comes first), else the first other file, not a test, that
            # sets up a new instance (`path`: its statements run in that file's namespace).
            found = _setup(module, name)
            usage.setup = {**found, "path": os.path.abspath(file)} if found and os.path.abspath(file) != own else found
        if os.path.abspath(file) == own:
            source = text_of(file) if tree is None else ast.unparse(module)
            usage.callbacks = _fitted_callbacks(source, own, name) if "callbacks" in source else []
    if tree is None:
        tree = _parse(own, _mtime(own))
    if tree is not None:
        usage.main = main_reaching(tree, name)
        if not usage.main:
            usage.main, usage.main_path = main_elsewhere(name, own, tree, files)
    return usage


def _module_classes_building(module: ast.Module, name: str) -> list[str]:
    """The classes of `module` other than `name` that build `name` in a method and run a `forward`
    of their own (modules holding it as a part, not trainers holding a whole model)."""
    found = []
    for node in ast.walk(module):
        if not isinstance(node, ast.ClassDef) or node.name == name:
            continue
        methods = [m for m in node.body if isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef))]
        if not any(m.name == "forward" for m in methods):
            continue
        if any(isinstance(call, ast.Call) and _called_name(call) == name for m in methods for call in ast.walk(m)):
            found.append(node.name)
    return found


def _fitted_callbacks(source: str, path: str, name: str) -> list[list[Any]]:
    """The callbacks the file's Lightning Trainer fits an instance of the class `name` with."""
    from ckptlint.index import fitted_callbacks, summarize

    module, is_package = module_name_for(Path(path))
    try:
        summary = summarize(source, path, module, is_package)
    except (SyntaxError, ValueError):
        return []
    return fitted_callbacks(summary, f"{module}.{name}")


def _scopes(module: ast.Module) -> Iterator[list[ast.stmt]]:
    """Statement lists whose assignments resolve names: the module and every function body."""
    yield module.body
    for node in ast.walk(module):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield node.body


def _statements(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """The statements of a scope in order, entering blocks but not nested functions or classes."""
    for statement in body:
        yield statement
        if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        for attribute in ("body", "orelse", "finalbody"):
            yield from _statements(getattr(statement, attribute, None) or [])
        for handler in getattr(statement, "handlers", None) or []:
            yield from _statements(handler.body)


def _called_name(call: ast.Call) -> str:
    func = call.func
    return func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""


def _module_literals(module: ast.Module) -> dict[str, Any]:
    """Module-level `NAME = literal`: visible in every function of the module."""
    literals: dict[str, Any] = {}
    for statement in module.body:
        if isinstance(statement, ast.Assign) and len(statement.targets) == 1 and isinstance(statement.targets[0], ast.Name):
            value = _literal(statement.value, literals)
            if value is not _NO_LITERAL:
                literals[statement.targets[0].id] = value
    return literals


def _scan_scope(body: list[ast.stmt], name: str, constructs: set[str], usage: Usage, literals: dict[str, Any]) -> None:
    instances: dict[str, tuple[str, dict[str, Any]]] = {}  # variable -> (class or builder, constructor kwargs)
    for statement in _statements(body):
        for call in _calls_in(statement):
            _record_call(call, name, constructs, literals, instances, usage)
        if isinstance(statement, ast.Assign) and len(statement.targets) == 1:
            target, value = statement.targets[0], statement.value
            if isinstance(target, ast.Name):
                literal = _literal(value, literals)
                if literal is not _NO_LITERAL:
                    literals[target.id] = literal
                if isinstance(value, ast.Call) and _called_name(value):
                    instances[target.id] = (_called_name(value), _kwargs(value, literals))


def _calls_in(statement: ast.stmt) -> Iterator[ast.Call]:
    """Calls in a statement, nested functions and classes excluded (they are scopes of their own)."""
    if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return
    stack: list[ast.AST] = [statement]
    while stack:
        node = stack.pop()
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.stmt):
                continue  # visited as statements of their own
            if isinstance(child, ast.Call):
                yield child
            stack.append(child)


def _record_call(call: ast.Call, name: str, constructs: set[str], literals: dict[str, Any], instances: dict[str, tuple[str, dict[str, Any]]], usage: Usage) -> None:
    called = _called_name(call)
    if called == name:
        args = [_literal(a, literals) for a in call.args]
        kwargs = _kwargs(call, literals)
        if all(a is not _NO_LITERAL for a in args) and not any(isinstance(a, ast.Starred) for a in call.args):
            entry = {"args": args, "kwargs": kwargs}
            if entry not in usage.constructor_calls:
                usage.constructor_calls.append(entry)
        _record_arguments(call, instances, usage, literals)
    # An instance of the target called: `model(ids, use_cache=True)`.
    if isinstance(call.func, ast.Name) and call.func.id in instances:
        built_by = instances[call.func.id][0]
        if built_by == name or built_by in constructs:
            for keyword in call.keywords:
                if keyword.arg is None:
                    continue
                if keyword.arg not in usage.keyword_names:
                    usage.keyword_names.append(keyword.arg)
                value = _literal(keyword.value, literals)
                if value is not _NO_LITERAL:
                    usage.call_keywords.setdefault(keyword.arg, value)


def _record_arguments(call: ast.Call, instances: dict[str, tuple[str, dict[str, Any]]], usage: Usage, literals: dict[str, Any]) -> None:
    """`train_epoch(model, ...)` after `model = Classifier(dim=8)`, or `run(Classifier(dim=8), ...)`:
    argument i is a Classifier. Recorded by position (`"0"`) and by keyword; the child maps
    positions to parameter names."""
    positional = [(str(i), a) for i, a in enumerate(call.args)]
    keywords = [(k.arg, k.value) for k in call.keywords if k.arg]
    for key, value in positional + keywords:
        if isinstance(value, ast.Name) and value.id in instances and value.id[:1] != "_":
            built_by, kwargs = instances[value.id]
        elif isinstance(value, ast.Call) and _called_name(value):
            built_by, kwargs = _called_name(value), _kwargs(value, literals)
        else:
            continue
        if built_by[:1].isupper():
            usage.function_arguments.setdefault(key, {"class": built_by, "kwargs": kwargs})


def _kwargs(call: ast.Call, literals: dict[str, Any]) -> dict[str, Any]:
    found = {}
    for keyword in call.keywords:
        if keyword.arg is None:
            continue
        value = _literal(keyword.value, literals)
        if value is not _NO_LITERAL:
            found[keyword.arg] = value
    return found


def _literal(node: ast.AST, literals: dict[str, Any]) -> Any:
    if isinstance(node, ast.Name) and node.id in literals:
        return literals[node.id]
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        value = _literal(node.operand, literals)
        return -value if isinstance(value, (int, float)) and not isinstance(value, bool) else _NO_LITERAL
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Mult, ast.Add, ast.FloorDiv)):
        left, right = _literal(node.left, literals), _literal(node.right, literals)
        if all(isinstance(v, int) and not isinstance(v, bool) for v in (left, right)):
            if isinstance(node.op, ast.Mult):
                return left * right
            if isinstance(node.op, ast.Add):
                return left + right
            return left // right if right else _NO_LITERAL
        return _NO_LITERAL
    if isinstance(node, (ast.Tuple, ast.List)):
        items = [_literal(e, literals) for e in node.elts]
        return _NO_LITERAL if any(i is _NO_LITERAL for i in items) else items
    try:
        value = ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return _NO_LITERAL
    return value if isinstance(value, (bool, int, float, str, type(None), list, tuple, dict)) else _NO_LITERAL


# --- what the project does to a model right after building it -------------------------------------

# Calls that train, save or move the model: not setup to replay.
_NOT_SETUP_CALLS = frozenset({"backward", "step", "fit", "train", "generate", "save", "save_pretrained", "push_to_hub", "cuda", "compile"})


def _setup(module: ast.Module, name: str) -> dict[str, Any]:
    """The statements that follow the first `variable = name(...)` of the file and only touch that
    instance and module-level names: `mark_only_lora_trainable(model)`, `model.embed.requires_grad_(False)`,
    `for p in model.encoder.parameters(): p.requires_grad = False`, `model = get_peft_model(model, ...)`,
    with the locals they read when those are computed from module-level names only (`vectors =
    torch.randn(128, 32)` before `load_static_vectors(model, vectors)`). Replayed on the model
    --confirm builds; anything reading the script's other locals (data, command-line arguments,
    optimizers) is not."""
    bound = set(dir(builtins)) | {"__name__", "__file__"}
    for statement in module.body:
        bound |= _bound_by(statement)
    for body in _statement_lists(module.body):
        for index, statement in enumerate(body):
            if not (isinstance(statement, ast.Assign) and len(statement.targets) == 1 and isinstance(statement.targets[0], ast.Name)):
                continue
            if not (isinstance(statement.value, ast.Call) and _called_name(statement.value) == name):
                continue
            variable = statement.targets[0].id
            found: list[dict[str, Any]] = []
            prepared: dict[str, ast.stmt] = {}  # local -> the statement computing it from module-level names
            for following in body[index + 1:]:
                if not _is_setup(following, variable, bound | prepared.keys()):
                    if variable in _bound_by(following):
                        break  # rebound to something else: what follows is about another object
                    if _prepares(following, bound):
                        prepared.update((local, following) for local in _bound_by(following))
                    continue
                read = {n.id for n in ast.walk(following) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
                for needed in dict.fromkeys(prepared[local] for local in sorted(read & prepared.keys(), key=lambda n: prepared[n].lineno)):
                    if all(s["line"] != needed.lineno for s in found):
                        found.append({"line": needed.lineno, "code": ast.unparse(needed)})
                found.append({"line": following.lineno, "code": ast.unparse(following)})
            if found:
                return {"variable": variable, "statements": found}
    return {}


def _prepares(statement: ast.stmt, bound: set[str]) -> bool:
    """`vectors = torch.randn(128, 32)`: a plain assignment of locals computed from module-level
    names only, which neither trains nor saves."""
    if not (isinstance(statement, ast.Assign) and all(isinstance(t, ast.Name) for t in statement.targets)):
        return False
    loaded = {n.id for n in ast.walk(statement.value) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    return not loaded - bound and not any(isinstance(n, ast.Call) and _called_name(n) in _NOT_SETUP_CALLS for n in ast.walk(statement))


def is_test_file(path: str, root: str) -> bool:
    """A test module (`test_*.py`, `*_test.py`, `conftest.py`, or under a `tests` folder of the
    project at `root`): how a test builds a model is no setup of the project's."""
    name = os.path.basename(path)
    parts = Path(os.path.relpath(os.path.abspath(path), root)).parts[:-1]
    return name.startswith("test_") or name.endswith("_test.py") or name == "conftest.py" or "tests" in parts or "test" in parts


def _statement_lists(body: list[ast.stmt]) -> Iterator[list[ast.stmt]]:
    """`body` and every block in it, functions included (a `main()` builds the model)."""
    yield body
    for statement in body:
        if isinstance(statement, ast.ClassDef):
            continue
        for attribute in ("body", "orelse", "finalbody"):
            block = getattr(statement, attribute, None)
            if isinstance(block, list) and block and isinstance(block[0], ast.stmt):
                yield from _statement_lists(block)
        for handler in getattr(statement, "handlers", None) or []:
            yield from _statement_lists(handler.body)


def _is_setup(statement: ast.stmt, variable: str, bound: set[str]) -> bool:
    """A statement that uses `variable` and otherwise only module-level names and its own loop
    variables, does not train or save, and binds no name but `variable` (`model = get_peft_model(model, config)`)."""
    if not isinstance(statement, (ast.Expr, ast.Assign, ast.AugAssign, ast.For)):
        return False
    stored = {n.id for n in ast.walk(statement) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    if isinstance(statement, ast.For):
        loop_names = stored
    else:
        if stored - {variable}:
            return False
        loop_names = {n.id for c in ast.walk(statement) if isinstance(c, ast.comprehension) for n in ast.walk(c.target) if isinstance(n, ast.Name)}
    loaded = {n.id for n in ast.walk(statement) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    if variable not in loaded or loaded - bound - loop_names - {variable}:
        return False
    return not any(isinstance(n, ast.Call) and _called_name(n) in _NOT_SETUP_CALLS for n in ast.walk(statement))


# --- a main that reaches the target ----------------------------------------------------------------


def main_entry(tree: ast.Module) -> tuple[str, Optional[list[ast.stmt]]]:
    """("block", its statements) for `if __name__ == "__main__":`; ("function", [main's def]) for a
    module-level `main()` without such a block; ("module", the statements that are not definitions)
    for a script written flat at module level that trains; ("", None) otherwise."""
    for node in tree.body:
        if isinstance(node, ast.If) and _is_main_test(node.test):
            return "block", node.body
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == "main" and not _required(node):
            return "function", [node]
    statements = script_statements(tree)
    if statements and _reached(tree, statements)[1]:
        return "module", statements
    return "", None


def text_of(path: str) -> str:
    """The file's text ("" when unreadable or too big), read once while it is unchanged."""
    return _read(path, _mtime(path))


def hf_checkpointing(path: str) -> Optional[tuple[dict[str, bool], str]]:
    """How the project switches transformers checkpointing on (`gradient_checkpointing_enable(...)`,
    `TrainingArguments(gradient_checkpointing=True, ...)`), as the static analysis reads it: the
    `gradient_checkpointing_kwargs` to enable with, reentrant when the project asks for it anywhere,
    and where; None when nothing in the project switches it on."""
    found: list[tuple[Optional[bool], str]] = []
    for file in project_files(path):
        text = text_of(file)
        if not might_switch_hf_checkpointing(text):
            continue
        try:
            tree = ast.parse(text, filename=file)
        except (SyntaxError, ValueError):
            continue
        found += [(reentrant, f"{os.path.relpath(file)}:{line}") for line, reentrant in hf_enables(tree)]
    for wanted in (True, False, None):
        where = next((spot for reentrant, spot in found if reentrant is wanted), None)
        if where is not None:
            return ({} if wanted is None else {"use_reentrant": wanted}), where
    return None


def flat_script(path: str, source: Optional[str] = None) -> bool:
    """Whether the file is a training script written flat at module level, or one that calls its
    `main()` at module level without a `__main__` guard: importing it trains."""
    try:
        tree = ast.parse(text_of(path) if source is None else source, filename=path)
    except (SyntaxError, ValueError):
        return False
    kind = main_entry(tree)[0]
    return kind == "module" or kind == "function" and any(
        isinstance(node, ast.Expr) and isinstance(node.value, ast.Call) and isinstance(node.value.func, ast.Name) and node.value.func.id == "main"
        for node in tree.body
    )


def definitions(tree: ast.Module) -> ast.Module:
    """`tree` without its script statements: what importing a flat script should run."""
    return ast.Module(body=_split(tree)[0], type_ignores=[])


def script_statements(tree: ast.Module) -> list[ast.stmt]:
    """Top-level statements that do something when the module is imported: not imports,
    definitions, docstrings or names bound to values computed without a call from earlier
    definitions (`VOCAB = 100`, `DTYPE = torch.float32`)."""
    return _split(tree)[1]


def _split(tree: ast.Module) -> tuple[list[ast.stmt], list[ast.stmt]]:
    """(definitions, script statements), in order. A statement that reads a name only a script
    statement binds is itself part of the script (`tokenizer.pad_token = tokenizer.eos_token`)."""
    bound = set(dir(builtins)) | {"__name__", "__file__", "__doc__"}
    kept: list[ast.stmt] = []
    script: list[ast.stmt] = []
    for node in tree.body:
        if _is_definition(node, bound):
            kept.append(node)
            bound |= _bound_by(node)
        else:
            script.append(node)
    return kept, script


def _is_definition(node: ast.stmt, bound: set[str]) -> bool:
    if isinstance(node, (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Pass)):
        return True
    if isinstance(node, ast.Expr):
        return isinstance(node.value, ast.Constant)
    if isinstance(node, (ast.Assign, ast.AnnAssign)):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        names_only = all(isinstance(n, (ast.Name, ast.Tuple, ast.List, ast.Store)) for target in targets for n in ast.walk(target))
        return names_only and (node.value is None or _computed_from(node.value, bound))
    if isinstance(node, ast.Try):
        return all(_is_definition(s, bound) for block in (node.body, node.orelse, node.finalbody, *[h.body for h in node.handlers]) for s in block)
    if isinstance(node, ast.If):
        return not _is_main_test(node.test) and _computed_from(node.test, bound) and all(_is_definition(s, bound) for s in [*node.body, *node.orelse])
    return False


def _computed_from(value: ast.expr, bound: set[str]) -> bool:
    """Whether `value` calls nothing and reads only names in `bound`."""
    for node in ast.walk(value):
        if isinstance(node, (ast.Call, ast.Await, ast.Yield, ast.YieldFrom, ast.NamedExpr)):
            return False
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and node.id not in bound:
            return False
    return True


def _bound_by(node: ast.stmt) -> set[str]:
    """Module-level names a definition binds (not the locals of its functions)."""
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return {node.name}
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return {(alias.asname or alias.name).split(".")[0] for alias in node.names}
    if isinstance(node, (ast.Try, ast.If)):
        blocks = [node.body, node.orelse] + ([node.finalbody, *[h.body for h in node.handlers]] if isinstance(node, ast.Try) else [])
        return {name for block in blocks for statement in block for name in _bound_by(statement)}
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}


def _is_main_test(test: ast.expr) -> bool:
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.Eq)):
        return False
    sides = [test.left, test.comparators[0]]
    return any(isinstance(s, ast.Name) and s.id == "__name__" for s in sides) and any(
        isinstance(s, ast.Constant) and s.value == "__main__" for s in sides
    )


def _required(function: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    args = function.args
    positional = args.posonlyargs + args.args
    return len(positional) > len(args.defaults) or any(d is None for d in args.kw_defaults)


def main_reaching(tree: ast.Module, name: str, imported: Optional[ast.Module] = None) -> str:
    """Whether the file's main uses `name` (directly or through functions of the file it calls)
    and trains (see `_reached`), also through the functions it calls of the `imported` module
    (`train_one_epoch(model, ...)` of the target's own file, whose loop calls `.backward`)."""
    kind, body = main_entry(tree)
    if not kind or body is None:
        return ""
    names, trains = _reached(tree, body)
    if name in names and not trains and imported is not None:
        trains = any(
            isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef)) and f.name in names and _reached(imported, f.body)[1] for f in imported.body
        )  # fmt: skip
    return kind if name in names and trains else ""


def main_elsewhere(name: str, path: str, tree: ast.Module, files: Sequence[str]) -> tuple[str, str]:
    """A main of another project file that trains `name` (defined in `path`, whose parsed text is
    `tree`): it uses `name`, or a function of `path` that builds it (`model = build_model(cfg)`),
    and imports from `path`'s module. Returns (its kind, its file); ("", "") when there is none.
    Model files rarely train themselves: the project's `train.py` does, after its own setup."""
    own = os.path.abspath(path)
    names = [name] + [f.name for f in tree.body if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef)) and _calls_name(f, name)]
    found = _main_using(own, names, own, files)
    if found[0]:
        return found
    # Built by a function of another file (`build.build_model(cfg)`), whose callers' main trains it.
    for file in files:
        other = _parse(file, _mtime(file)) if os.path.abspath(file) != own and _imports(file, own, [name]) else None
        registries = _registries_holding(other, name) if other else set()
        builders = [
            f.name for f in other.body if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef)) and (_calls_name(f, name) or _calls_registry(f, registries))
        ] if other else []  # fmt: skip
        found = _main_using(os.path.abspath(file), builders, own, files) if builders else ("", "")
        if found[0]:
            return found
    return "", ""


def _main_using(defining: str, names: Sequence[str], own: str, files: Sequence[str]) -> tuple[str, str]:
    """The first main of a file (not `own`'s nor `defining`'s) that imports `defining`'s module and
    trains with one of `names`."""
    for file in files:
        if os.path.abspath(file) in (own, defining) or not _imports(file, defining, names):
            continue
        other = _parse(file, _mtime(file))
        for candidate in names if other is not None else ():
            kind = main_reaching(other, candidate, _parse(defining, _mtime(defining)))
            if kind:
                return kind, os.path.abspath(file)
    return "", ""


def _imports(file: str, defining: str, names: Sequence[str]) -> bool:
    """Whether `file`'s text names `defining`'s module and one of `names` (what importing them takes)."""
    module_name = Path(defining).stem if Path(defining).stem != "__init__" else Path(defining).parent.name
    text = text_of(file)
    return module_name in text and any(n in text for n in names)


def _registries_holding(tree: ast.Module, name: str) -> set[str]:
    """Module-level dicts of the file that hold the class `name` (`MODELS = {"vit": TinyViT}`)."""
    return {
        target.id for stmt in tree.body if isinstance(stmt, ast.Assign) and isinstance(stmt.value, ast.Dict)
        and any(isinstance(v, ast.Name) and v.id == name for v in stmt.value.values)
        for target in stmt.targets if isinstance(target, ast.Name)
    }  # fmt: skip


def _calls_registry(function: ast.AST, registries: set[str]) -> bool:
    """Whether the function builds an entry of one of `registries` (`MODELS[name](**kwargs)`)."""
    return bool(registries) and any(
        isinstance(n, ast.Call) and isinstance(n.func, ast.Subscript) and isinstance(n.func.value, ast.Name) and n.func.value.id in registries
        for n in ast.walk(function)
    )  # fmt: skip


def _calls_name(function: ast.AST, name: str) -> bool:
    return any(isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == name for n in ast.walk(function))


def _reached(tree: ast.Module, body: list[ast.stmt]) -> tuple[set[str], bool]:
    """The names `body` uses, through the functions of the file it calls and the classes it names
    (a runner object whose `step()` trains), and whether it trains: calls a `.backward`, a `.fit`
    or a trainer's `.train()`."""
    functions = {n.name: n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))}
    # Functions of the file that return a trainer they build (`return LongDocTrainer(model=...)`).
    trainer_builders = {
        name for name, f in functions.items()
        if not isinstance(f, ast.ClassDef)
        and any(isinstance(r, ast.Return) and isinstance(r.value, ast.Call) and _called_name(r.value).lower().endswith("trainer") for r in ast.walk(f))
    }  # fmt: skip
    names, trains = set(), False
    stack: list[ast.AST] = list(body)
    visited: set[str] = set()
    while stack:
        node = stack.pop()
        for child in ast.walk(node):
            if isinstance(child, ast.Name):
                names.add(child.id)
                if child.id in functions and child.id not in visited:
                    visited.add(child.id)
                    stack.append(functions[child.id])
            elif isinstance(child, ast.Attribute):
                names.add(child.attr)
                # `trainer.train()`, `self.trainer.train()`, `Trainer(...).train()`, `build_trainer(d).train()`,
                # `build(d).train()` of a `build` returning a trainer
                receiver = child.value.func if isinstance(child.value, ast.Call) else child.value
                named = receiver.id if isinstance(receiver, ast.Name) else receiver.attr if isinstance(receiver, ast.Attribute) else ""
                trainer = named.lower().endswith("trainer") or isinstance(child.value, ast.Call) and named in trainer_builders
                trains = trains or child.attr in ("backward", "fit") or (child.attr == "train" and trainer)
    return names, trains

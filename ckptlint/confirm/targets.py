"""Which code to run for a finding, decided statically (ast only, nothing is imported here).

- A finding inside a class: the outermost module class of the same file that builds it (the
  class that actually checkpoints a block is usually the model that owns the block); when nothing
  in its file builds it, the outermost class of another project file that imports and builds it
  (a layer whose region `encoder.py` checkpoints); the class itself when nothing builds it or an
  `@ckptlint.example` names it. A finding in a method other than `forward` of that class runs
  that method. A finding in a method of a class that is no module (a trainer holding its models)
  runs that method as a function of the object, through an example (`"pkg.mod.Trainer.rollout"`)
  that builds the object and names the module to compare.
- A finding in the file's main (its `__main__` block, or a script written flat at module level):
  the main, run up to its first backward.
- A finding inside a module-level function: the function, run through an example factory; or,
  when all its required parameters can be synthesised (a `config` of a model class it builds),
  called directly — a builder that returns the model.
"""

from __future__ import annotations

import ast
import os
from dataclasses import dataclass, field, replace
from functools import lru_cache
from pathlib import Path
from typing import Iterable, Optional, Sequence, Union

from ckptlint.confirm.failures import EXAMPLE_HINT, skeleton
from ckptlint.confirm.usage import main_elsewhere, main_entry, main_reaching, project_files, text_of
from ckptlint.findings import CRASHED, NEEDS_EXAMPLE
from ckptlint.names import module_name_for

_ENTRY_METHODS = ("forward", "__init__", "__call__")
# The qualname of a target that is the file's main (a `__main__` block or a flat script).
SCRIPT = "<script>"
# Parameters a builder may take that the runner can synthesise.
SYNTHESISABLE_PARAMETERS = ("config",)


@dataclass(frozen=True)
class Target:
    path: str  # absolute
    kind: str  # "class", "function" or "script"
    qualname: str
    method: Optional[str] = None  # a class target's method to call instead of forward
    # A class target's method that switches checkpointing on (`apply_activation_checkpointing()`):
    # called on the built model before forward, not instead of it.
    setup: Optional[str] = None
    builders: tuple[str, ...] = ()  # module-level functions of the file that build the class
    constructs: tuple[str, ...] = ()  # classes a function target builds (for its `config`)
    via: str = ""  # why this target, when it is not the finding's own scope
    # A function target that takes nothing and returns nothing: it trains on its own (run it up to a backward).
    trains: bool = False

    def label(self, shown_path: str) -> str:
        name = f"{self.qualname}.{self.method}" if self.method else self.qualname
        return f"{shown_path}::{name}"


@dataclass(frozen=True)
class Unrunnable:
    reason: str
    label: str = ""
    cause: str = NEEDS_EXAMPLE
    example: str = ""  # a factory skeleton


@dataclass
class _FileFacts:
    tree: ast.Module
    classes: dict[str, ast.ClassDef] = field(default_factory=dict)
    functions: dict[str, ast.FunctionDef] = field(default_factory=dict)


@lru_cache(maxsize=256)
def _facts(path: str, mtime: float, source: Optional[str] = None) -> Optional[_FileFacts]:
    try:
        tree = ast.parse(Path(path).read_bytes() if source is None else source, filename=path)
    except (OSError, SyntaxError, ValueError):
        return None
    facts = _FileFacts(tree)
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            facts.classes[node.name] = node
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            facts.functions[node.name] = node  # type: ignore[assignment]
    return facts


def _file_facts(path: str, source: Optional[str] = None) -> Optional[_FileFacts]:
    if source is not None:
        return _facts(path, 0.0, source)
    try:
        mtime = os.stat(path).st_mtime
    except OSError:
        return None
    return _facts(path, mtime)


def example_targets(paths: Iterable[str]) -> set[str]:
    """Short names that `@ckptlint.example(...)` decorators in `paths` register."""
    names: set[str] = set()
    for path in paths:
        facts = _file_facts(path)
        if facts is None:
            continue
        for node in ast.walk(facts.tree):
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for decorator in node.decorator_list:
                name = _example_target_name(decorator)
                if name:
                    names.add(name)
    return names


def _example_target_name(decorator: ast.expr) -> Optional[str]:
    if not isinstance(decorator, ast.Call) or not decorator.args:
        return None
    func = decorator.func
    called = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None
    if called != "example":
        return None
    arg = decorator.args[0]
    if isinstance(arg, ast.Name):
        return arg.id
    if isinstance(arg, ast.Attribute):
        return arg.attr
    if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
        return arg.value.replace(":", ".").rsplit(".", 1)[-1]
    return None


def resolve(path: str, line: int, examples: Sequence[str] = (), source: Optional[str] = None) -> Union[Target, Unrunnable]:
    """The target to run for a finding at `path:line`; `examples` are the configured example files;
    `source`: the text linted in place of the file (stdin)."""
    path = os.path.abspath(path)
    facts = _file_facts(path, source)
    if facts is None:
        return Unrunnable(f"cannot parse {path}", cause=CRASHED)
    registered = example_targets([path, *examples])
    chain = _enclosing(facts.tree, line)
    if not chain:
        if _in_main(facts.tree, line):
            return Target(path, "script", SCRIPT)
        reader = _reader_of_setting(facts.tree, line)
        if reader is not None:
            # `CKPT_KWARGS = dict(preserve_rng_state=False)` spread into a checkpoint call: run that call's code.
            return resolve(path, reader, examples, source)
        return Unrunnable("the finding is at module level, outside any class or function, and the file has no main or script that trains")
    top = chain[0]
    if isinstance(top, ast.ClassDef):
        builder = _building_function(facts, top, chain, registered)
        if builder is not None:
            # A callback's or runner's method: the function that builds the object and hands it on
            # (`Trainer(..., callbacks=[SampleLogger(prompts)]).train()`) runs it as training does.
            target = resolve(path, builder.lineno, examples, source)
            if isinstance(target, Target):
                return replace(target, via=f"{builder.name} builds {top.name}")
        found = _class_target(path, facts, top, chain, registered)
        if (isinstance(found, Unrunnable) or found.kind == "function") and builder is None and _method_of_no_module(facts, top, chain, registered):
            # Built elsewhere (no module of the project derives from it): the main of another file
            # that trains with it runs the method as training does.
            kind, main_path = main_elsewhere(top.name, path, facts.tree, project_files(path))
            if kind:
                return Target(main_path, "script", SCRIPT, via=f"the main of {os.path.basename(main_path)} uses {top.name}")
        return found
    function = top
    assert isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef))
    required = _required_parameters(function)
    builder = all(p in SYNTHESISABLE_PARAMETERS for p in required)
    if function.name not in registered and not builder:
        # A helper the file's own builder calls (`return enable_checkpointing(model)`): run the builder;
        # else, when nothing could run the helper itself, a function that calls it and needs nothing
        # (a training function registering the hooks a factory makes).
        callers = [f for f in facts.functions.values() if f is not function and _runnable_caller_of(f, function.name)]
        caller = next((f for f in callers if _returns_value(f)), None)
        if caller is None and callers and not _runs_alone(path, facts, function, required):
            caller = callers[0]
        if caller is not None:
            function, required, builder = caller, _required_parameters(caller), True
        elif (line_in_class := _call_in_a_class(facts, function.name)) is not None:
            # A helper a module's method calls (`record(logits)` in a block's forward): run that class.
            return resolve(path, line_in_class, examples, source)
        elif (running := _module_running(path, function.name, registered)) is not None:
            return running  # a helper a module of another file calls in its forward
    constructs = tuple(name for name in _called_names(function) if name in facts.classes or name[:1].isupper())
    if function.name not in registered and not builder and not _runs_alone(path, facts, function, required):
        signature = ", ".join(required)
        return Unrunnable(
            f"`{function.name}({signature})` takes no model argument to build (none of its parameters is named like one); "
            + EXAMPLE_HINT.format(name=function.name),
            label=function.name,
            example=skeleton(module_name_for(Path(path))[0], function.name, "function", arguments=required),
        )
    via = f"{function.name} calls {top.name}" if function is not top else ""
    trains = not required and not _returns_value(function)
    return Target(path, "function", function.name, constructs=constructs, via=via, trains=trains)


def _runs_alone(path: str, facts: _FileFacts, function: Union[ast.FunctionDef, ast.AsyncFunctionDef], required: list[str]) -> bool:
    """Whether a function that is no builder can run: it takes a model to build, or a main trains with it."""
    return "model" in [parameter_kind(p) for p in required] or _trained_by_a_main(path, facts, function.name)


def _reader_of_setting(tree: ast.Module, line: int) -> Optional[int]:
    """For a module-level assignment at `line` (a kwargs dict, a flag): the first line of a class or
    function that reads the name it binds."""
    statement = next((s for s in tree.body if s.lineno <= line <= (s.end_lineno or s.lineno)), None)
    targets = statement.targets if isinstance(statement, ast.Assign) else [statement.target] if isinstance(statement, ast.AnnAssign) else []
    names = {t.id for t in targets if isinstance(t, ast.Name)}
    for definition in tree.body if names else ():
        if isinstance(definition, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            reads = [n.lineno for n in ast.walk(definition) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load) and n.id in names]
            if reads:
                return min(reads)
    return None


def _trained_by_a_main(path: str, facts: _FileFacts, name: str) -> bool:
    """Whether the main of this file, or of another project file, uses `name` and trains."""
    return bool(main_reaching(facts.tree, name) or main_elsewhere(name, path, facts.tree, project_files(path))[0])


def _in_main(tree: ast.Module, line: int) -> bool:
    """Whether `line` is in the file's main: its `__main__` block or, in a flat script, one of its
    statements (see usage.main_entry)."""
    kind, body = main_entry(tree)
    return kind in ("block", "module") and any(node.lineno <= line <= (node.end_lineno or node.lineno) for node in body or ())


def _runnable_caller_of(function: Union[ast.FunctionDef, ast.AsyncFunctionDef], helper: str) -> bool:
    """A function that needs nothing the runner cannot synthesise and calls `helper`."""
    return helper in _called_names(function) and all(p in SYNTHESISABLE_PARAMETERS for p in _required_parameters(function))


MODEL_NAMES = ("model", "net", "network", "module", "encoder", "decoder", "classifier", "backbone", "student", "teacher", "policy", "generator", "discriminator", "autoencoder", "transformer", "unet")
OPTIMIZER_NAMES = ("optimizer", "optim", "opt", "optimiser")
SCHEDULER_NAMES = ("scheduler", "lr_scheduler", "sched")
LOADER_NAMES = ("loader", "dataloader", "data_loader", "train_loader", "val_loader", "valid_loader", "test_loader", "eval_loader", "dataset", "data", "batches", "train_data", "iterator", "train_dataloader", "eval_dataloader")
BATCH_NAMES = ("batch", "sample", "minibatch", "example")
TARGET_NAMES = ("y", "target", "targets", "label", "labels", "y_true", "gt", "ground_truth")
DEVICE_NAMES = ("device", "dev")


def parameter_kind(name: str) -> str:
    """What a training function's parameter holds, by its name: "model", "optimizer",
    "scheduler", "loader", "batch", "target", "device" or "tensor"."""
    lower = name.lower()
    if lower in MODEL_NAMES or lower.endswith(("_model", "_net", "_encoder", "_decoder")):
        return "model"
    if lower in OPTIMIZER_NAMES or lower.endswith("_optimizer"):
        return "optimizer"
    if lower in SCHEDULER_NAMES:
        return "scheduler"
    if lower in LOADER_NAMES or lower.endswith(("_loader", "_dataloader", "_dataset")):
        return "loader"
    if lower in BATCH_NAMES:
        return "batch"
    if lower in TARGET_NAMES:
        return "target"
    if lower in DEVICE_NAMES:
        return "device"
    return "tensor"


def _class_target(
    path: str, facts: _FileFacts, cls: ast.ClassDef, chain: list[ast.AST], registered: set[str]
) -> Union[Target, Unrunnable]:
    inner = chain[1] if len(chain) > 1 else None
    if _plain_class(cls) and cls.name not in registered:
        # A mixin's method runs on the modules that derive from it (`class MoELayer(AuxLossMixin,
        # nn.Module)`): run one of those, in this file or in another of the project.
        deriving = _deriving_class(path, facts, cls.name)
        if deriving is not None:
            file, file_facts, name = deriving
            target = _class_target(file, file_facts, file_facts.classes[name], [file_facts.classes[name]], registered)
            if isinstance(target, Target):
                return replace(target, via=f"{name} derives from {cls.name}" + (f"; {target.via}" if target.via else ""))
    if _plain_class(cls) and isinstance(inner, (ast.FunctionDef, ast.AsyncFunctionDef)) and inner.name != "__init__":
        # An object a module of another file builds and calls (a masker, an augmenter): run that module.
        running = _module_running(path, cls.name, registered)
        if running is not None:
            return running
        # A method of a class that is no module (a trainer holding its models): run like a function
        # of the object and the method's arguments, which an example builds.
        return Target(path, "function", f"{cls.name}.{inner.name}")
    root, via = cls.name, ""
    if cls.name not in registered:
        owner = _owning_root(facts, cls.name)
        if owner != cls.name:
            root, via = owner, f"{owner} builds {cls.name}"
            # A block of the file that checkpoints nothing, built by a model of another file that does.
            elsewhere = _owner_in_project(path, owner) if not _checkpoints(facts.classes[owner]) else None
            if elsewhere is not None and _checkpoints(elsewhere[1].classes[elsewhere[2]]):
                path, facts, root, via = *elsewhere[:3], f"{elsewhere[3]}, which builds {cls.name}"
        else:
            elsewhere = _owner_in_project(path, cls.name)
            if elsewhere is not None:
                path, facts, root, via = elsewhere
    method = setup = None
    if root == cls.name and len(chain) > 1:
        inner = chain[1]
        if isinstance(inner, (ast.FunctionDef, ast.AsyncFunctionDef)) and inner.name not in _ENTRY_METHODS:
            plain = not any(_decorator_name(d) in ("staticmethod", "classmethod", "property") for d in inner.decorator_list)
            # A helper that forward calls or checkpoints (`self.run_blocks(...)`) runs through forward.
            if plain and not _self_calls(facts, cls.name, inner.name):
                if _sets_up_checkpointing(inner):
                    setup = inner.name
                else:
                    method = inner.name
    builders = tuple(
        name
        for name, function in facts.functions.items()
        if root in _called_names(function)
        and _returns_value(function)
        and all(p in SYNTHESISABLE_PARAMETERS for p in _required_parameters(function))
    )
    return Target(path, "class", root, method=method, setup=setup, builders=builders, via=via)


def _sets_up_checkpointing(method: Union[ast.FunctionDef, ast.AsyncFunctionDef]) -> bool:
    """A method that returns nothing, needs no argument and mentions checkpointing: it switches it on
    (wraps blocks, sets a flag) for the forward that follows."""
    return not _returns_value(method) and _required_parameters(method)[1:] == [] and "checkpoint" in ast.unparse(method)


def _plain_class(cls: ast.ClassDef) -> bool:
    """A class with no bases but `object` or a framework's callback: no module, whatever it holds."""
    return all(_base_name(base) in _PLAIN_BASES for base in cls.bases) and not cls.keywords


# Bases of objects that train a model or are handed to what does, no modules: transformers' and trl's
# trainers and `TrainerCallback`, Lightning's `Callback`.
_PLAIN_BASES = ("object", "TrainerCallback", "Callback", "Trainer", "Seq2SeqTrainer", "SFTTrainer")


def _base_name(base: ast.expr) -> str:
    return base.attr if isinstance(base, ast.Attribute) else base.id if isinstance(base, ast.Name) else ""


def _building_function(facts: _FileFacts, cls: ast.ClassDef, chain: list[ast.AST], registered: set[str]) -> Optional[ast.FunctionDef]:
    """For a finding in a method of a class that is no module, with no example for that method:
    the first module-level function of the file that builds an object of the class."""
    if not _method_of_no_module(facts, cls, chain, registered):
        return None
    return next((f for f in facts.functions.values() if cls.name in _called_names(f)), None)


def _method_of_no_module(facts: _FileFacts, cls: ast.ClassDef, chain: list[ast.AST], registered: set[str]) -> bool:
    """The finding is in a method (not `__init__`, with no example) of a class that is no module."""
    method = chain[1] if len(chain) > 1 else None
    return _no_module(facts, cls) and isinstance(method, (ast.FunctionDef, ast.AsyncFunctionDef)) and method.name != "__init__" and method.name not in registered


def _no_module(facts: _FileFacts, cls: ast.ClassDef, depth: int = 0) -> bool:
    """A plain class, or one deriving only from plain classes of the file (`class EvalProbe(Probe)`)."""
    if _plain_class(cls):
        return True
    bases = [facts.classes.get(_base_name(base)) for base in cls.bases]
    return depth < 8 and not cls.keywords and all(base is not None and _no_module(facts, base, depth + 1) for base in bases)


def _owning_root(facts: _FileFacts, name: str) -> str:
    """The outermost class of the file that (transitively) builds `name`; `name` if none does."""
    builds = {c: _builds(facts, c, set()) for c in facts.classes}
    # A plain object holding the model (a runner) is no model to compare; its script runs it.
    users = [c for c, built in builds.items() if c != name and name in built and not _plain_class(facts.classes[c])]
    if not users:
        return name
    roots = [u for u in users if not any(u in builds[other] for other in users if other != u)]
    # Prefer a root whose own code checkpoints something; then source order.
    for candidate in roots or users:
        if _checkpoints(facts.classes[candidate]):
            return candidate
    return (roots or users)[0]


def _checkpoints(cls: ast.ClassDef) -> bool:
    return "checkpoint" in ast.unparse(cls)


_MAX_FILE_HOPS = 3


def _module_running(path: str, name: str, registered: set[str]) -> Optional[Target]:
    """The module class of another project file that calls `name` (a helper function, or a plain
    class it builds), as the target to run, when that class checkpoints."""
    elsewhere = _owner_in_project(path, name)
    if elsewhere is None or not _checkpoints(elsewhere[1].classes[elsewhere[2]]):
        return None
    file, facts, root, via = elsewhere
    target = _class_target(file, facts, facts.classes[root], [facts.classes[root]], registered)
    return replace(target, via=via.replace(f"builds {name}", f"runs {name}")) if isinstance(target, Target) else None


def _owner_in_project(path: str, name: str) -> Optional[tuple[str, _FileFacts, str, str]]:
    """The class that runs `name` (defined in `path`, built by nothing in its file) as part of a
    model: the outermost class of another project file that imports and builds it, followed through
    at most _MAX_FILE_HOPS files. Returns (its file, its facts, its name, why)."""
    found: Optional[tuple[str, _FileFacts, str, str]] = None
    seen = {path}
    for _ in range(_MAX_FILE_HOPS):
        step = _builder_elsewhere(path, name, seen)
        if step is None:
            break
        path, facts, builder = step
        seen.add(path)
        root = _owning_root(facts, builder)
        found = (path, facts, root, f"{root} ({os.path.basename(path)}) builds {found[2] if found else name}")
        name = root
    return found


def _builder_elsewhere(path: str, name: str, seen: set[str]) -> Optional[tuple[str, _FileFacts, str]]:
    """A class of another project file that imports `name` from `path`'s module (or its package)
    and builds it; one that checkpoints something first."""
    module, package = Path(path).stem, Path(path).parent.name
    candidates: list[tuple[str, _FileFacts, str]] = []
    for file in project_files(path):
        file = os.path.abspath(file)
        if file in seen:
            continue
        facts = _file_facts(file) if name in text_of(file) else None
        if facts is None or not _imports_from(facts.tree, name, file, module, package, os.path.dirname(path)):
            continue
        candidates += [(file, facts, cls) for cls, node in facts.classes.items() if name in _called_names(node)]
    for candidate in candidates:
        if _checkpoints(candidate[1].classes[candidate[2]]):
            return candidate
    return candidates[0] if candidates else None


def _deriving_class(path: str, facts: _FileFacts, name: str) -> Optional[tuple[str, _FileFacts, str]]:
    """A class deriving from `name` that is (or derives from) something else too (a module, not
    another mixin): in `path` first, else in another project file importing it."""
    def deriving(file_facts: _FileFacts) -> Optional[str]:
        return next((c for c, node in file_facts.classes.items() if len(node.bases) > 1 and any(isinstance(b, ast.Name) and b.id == name for b in node.bases)), None)

    found = deriving(facts)
    if found is not None:
        return path, facts, found
    module, package = Path(path).stem, Path(path).parent.name
    for file in project_files(path):
        file = os.path.abspath(file)
        other = _file_facts(file) if file != path and name in text_of(file) else None
        if other is not None and _imports_from(other.tree, name, file, module, package, os.path.dirname(path)) and (found := deriving(other)):
            return file, other, found
    return None


def _imports_from(tree: ast.Module, name: str, file: str, module: str, package: str, folder: str) -> bool:
    """Whether `tree` has `from <module> import name`, `from <its package> import name` or, in the
    same folder, `from . import name` (re-exported by the package's `__init__`)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and any(alias.name == name for alias in node.names):
            source = (node.module or "").rsplit(".", 1)[-1]
            if source in (module, package) or (node.level and not source and os.path.dirname(file) == folder):
                return True
    return False


def _builds(facts: _FileFacts, name: str, seen: set[str]) -> set[str]:
    """Classes of the file that instances of `name` build, through its bases and its parts."""
    if name in seen or name not in facts.classes:
        return set()
    seen.add(name)
    node = facts.classes[name]
    direct = {n for n in _called_names(node) if n in facts.classes and n != name}
    bases = {b.id for b in node.bases if isinstance(b, ast.Name) and b.id in facts.classes}
    result = set(direct)
    for other in direct | bases:
        result |= _builds(facts, other, seen)
    return result


def _self_calls(facts: _FileFacts, name: str, method: str) -> bool:
    """Whether the class `name` or its bases of the same file use `self.<method>`: called, or
    handed on (`checkpoint(self.<method>, ...)`, `partial(self.<method>, ...)`)."""
    seen: set[str] = set()
    stack = [name]
    while stack:
        current = stack.pop()
        if current in seen or current not in facts.classes:
            continue
        seen.add(current)
        node = facts.classes[current]
        for child in ast.walk(node):
            if (
                isinstance(child, ast.Attribute)
                and child.attr == method
                and isinstance(child.ctx, ast.Load)
                and isinstance(child.value, ast.Name)
                and child.value.id == "self"
            ):
                return True
        stack.extend(b.id for b in node.bases if isinstance(b, ast.Name))
    return False


def _enclosing(tree: ast.Module, line: int) -> list[ast.AST]:
    """Class/function definitions containing `line`, outermost first."""
    chain: list[ast.AST] = []
    body: list[ast.stmt] = tree.body
    while True:
        for node in body:
            if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                start = min([node.lineno] + [d.lineno for d in node.decorator_list])
                if start <= line <= (node.end_lineno or node.lineno):
                    chain.append(node)
                    body = node.body
                    break
        else:
            return chain


def _called_names(node: ast.AST) -> list[str]:
    """Names called as `Name(...)` inside `node`, in source order, without duplicates."""
    names: list[str] = []
    for child in ast.walk(node):
        if isinstance(child, ast.Call) and isinstance(child.func, ast.Name) and child.func.id not in names:
            names.append(child.func.id)
    return names


def _call_in_a_class(facts: _FileFacts, helper: str) -> Optional[int]:
    """The line of the first call of `helper` inside a class of the file."""
    lines = [n.lineno for cls in facts.classes.values() for n in ast.walk(cls) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == helper]
    return min(lines) if lines else None


def _returns_value(function: ast.AST) -> bool:
    return any(isinstance(n, ast.Return) and n.value is not None for n in ast.walk(function))


def _required_parameters(function: Union[ast.FunctionDef, ast.AsyncFunctionDef]) -> list[str]:
    args = function.args
    positional = args.posonlyargs + args.args
    without_default = positional[: len(positional) - len(args.defaults)]
    keyword_only = [a for a, d in zip(args.kwonlyargs, args.kw_defaults) if d is None]
    return [a.arg for a in without_default + keyword_only]


def _decorator_name(decorator: ast.expr) -> str:
    if isinstance(decorator, ast.Call):
        decorator = decorator.func
    if isinstance(decorator, ast.Attribute):
        return decorator.attr
    return decorator.id if isinstance(decorator, ast.Name) else ""

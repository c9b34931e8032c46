"""Building what a target runs: import the user's file, find an example factory or construct the
model, and synthesise an input batch from the model's first layers.

Runs in the confirm child process only (it imports torch and executes the project's code).
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import inspect
import itertools
import os
import sys
import textwrap
import time
import types
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Optional, Sequence

import torch
from torch import nn

from ckptlint.confirm import ab, registry
from ckptlint.findings import CRASHED, NEEDS_EXAMPLE
from ckptlint.names import module_name_for

BATCH = 2
# Candidate sizes, tried together (index i: spatial SPATIAL[i], sequence length LENGTHS[i]).
# 32 first: CIFAR-style models fix it in their first Linear after the convolutions.
SPATIAL = (32, 28, 64, 16, 8, 224, 96, 128, 12, 48, 256, 4)
LENGTHS = (6, 8, 16, 5, 4, 32, 12, 10, 3, 64, 2, 128)
VOLUME = (8, 16, 32, 4, 12, 24, 8, 16, 8, 16, 8, 16)
COUNT_NAMES = ("batch_size", "bsz", "n", "num", "num_samples", "n_samples", "count", "size")
# Lightning runs these under torch.no_grad(); --confirm calls them the same way.
NO_GRAD_METHODS = ("validation_step", "test_step", "predict_step")
MAX_ATTEMPTS = 240
SEARCH_SECONDS = 30.0
# Small values for the size fields of a transformers config whose defaults are large.
TINY_CONFIG = {
    "hidden_size": 16, "intermediate_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2,
    "num_key_value_heads": 2, "head_dim": 8, "n_embd": 16, "n_layer": 2, "n_head": 2, "n_inner": 32,
    "d_model": 16, "d_ff": 32, "num_layers": 2, "num_heads": 2, "encoder_layers": 2,
    "decoder_layers": 2, "encoder_attention_heads": 2, "decoder_attention_heads": 2,
    "encoder_ffn_dim": 32, "decoder_ffn_dim": 32, "vocab_size": 128, "max_position_embeddings": 64,
    "n_positions": 64, "image_size": 32, "patch_size": 8,
}  # fmt: skip


class CannotRun(Exception):
    """The target cannot be built or fed; the message says why (and what the user can do).
    `cause`: one of findings.CAUSES; `example`: a factory skeleton for NEEDS_EXAMPLE."""

    def __init__(self, message: str, cause: str = NEEDS_EXAMPLE, example: str = "") -> None:
        super().__init__(message)
        self.cause = cause
        self.example = example


# Set by the runner from --confirm-memory, for the messages of failed allocations.
memory_cap_gb: Optional[float] = None


def user_failure(where: str, error: BaseException) -> Optional[str]:
    """What the user's code did, when it is no failure to build or feed it: it exited, asked for
    input or ran out of memory. None for anything else."""
    from ckptlint.confirm.runner import StandardInputRead

    if isinstance(error, SystemExit):
        return f"{where} called sys.exit({error.code!r})"
    if isinstance(error, StandardInputRead):
        return f"{where} called input(): --confirm runs without standard input"
    text = str(error).strip().splitlines()[0] if str(error).strip() else ""
    if isinstance(error, MemoryError) or (isinstance(error, RuntimeError) and any(m in text for m in _ALLOCATION_FAILURES)):
        shown = f"{type(error).__name__}: {text[:200]}"
        if memory_cap_gb:
            return f"{where} exceeded the --confirm-memory cap of {memory_cap_gb:g} GB: {shown}"
        return f"{where} could not allocate memory: {shown}"
    return None


def stop_on_user_failure(where: str, error: BaseException) -> None:
    """Re-raise KeyboardInterrupt; raise CannotRun (crashed) when the code exited, asked for input
    or ran out of memory: trying other constructors or inputs would only hide that."""
    if isinstance(error, KeyboardInterrupt):
        raise error
    named = user_failure(where, error)
    if named:
        raise CannotRun(named, CRASHED) from None


_ALLOCATION_FAILURES = ("can't allocate memory", "out of memory", "DefaultCPUAllocator", "std::bad_alloc")


@dataclass
class Plan:
    make: ab.Make
    description: str


EXAMPLE_HINT = (
    "add a factory decorated `@ckptlint.example({name})` returning (model, args, kwargs), in the same "
    "file or in a file listed in [tool.ckptlint.confirm] examples"
)


# --- importing user code -------------------------------------------------------------------------


def import_file(path: str, source: Optional[str] = None) -> types.ModuleType:
    """Import `path` under its dotted name (packages stay importable, relative imports work).
    `source`: the text to run instead of the file's (what was linted from stdin)."""
    file = Path(path).resolve()
    name, is_package = module_name_for(file)
    depth = name.count(".") + (1 if is_package else 0)
    root = file.parent
    for _ in range(depth):
        root = root.parent
    if str(root) not in sys.path:
        sys.path.insert(0, str(root))
    if source is not None:
        return _import_source(file, name, is_package, source)
    existing = sys.modules.get(name)
    if existing is not None:
        if _same_file(getattr(existing, "__file__", None), file):
            return existing
        return _import_by_path(file, f"ckptlint_confirm_{abs(hash(str(file)))}")
    module = importlib.import_module(name)
    if not _same_file(getattr(module, "__file__", None), file):
        return _import_by_path(file, f"ckptlint_confirm_{abs(hash(str(file)))}")
    return module


def _same_file(a: Optional[str], b: Path) -> bool:
    return a is not None and Path(a).resolve() == b


def _import_by_path(file: Path, name: str) -> types.ModuleType:
    spec = importlib.util.spec_from_file_location(name, file)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import {file}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _import_source(file: Path, name: str, is_package: bool, source: str) -> types.ModuleType:
    """Run `source` as the module `name` at `file`: frames, tracebacks and `inspect.getsource`
    point at `file`, whose lines are the given text's."""
    import linecache

    if name.rpartition(".")[0]:
        importlib.import_module(name.rpartition(".")[0])  # the parent package, for relative imports
    linecache.cache[str(file)] = (len(source), None, source.splitlines(keepends=True), str(file))
    module = types.ModuleType(name)
    module.__file__ = str(file)
    module.__package__ = name if is_package else name.rpartition(".")[0]
    if is_package:
        module.__path__ = [str(file.parent)]  # type: ignore[attr-defined]
    module.__spec__ = importlib.util.spec_from_loader(name, loader=None, origin=str(file), is_package=is_package)
    sys.modules[name] = module
    exec(compile(source, str(file), "exec"), module.__dict__)
    return module


def load_examples(paths: Sequence[str]) -> list[str]:
    """Import the configured example files; the failures, as messages."""
    errors = []
    for path in paths:
        try:
            import_file(path)
        except BaseException as error:  # user code: anything can happen
            if isinstance(error, KeyboardInterrupt):
                raise
            errors.append(f"example file {path} failed to import: {type(error).__name__}: {error}")
    return errors


def resolve(module: types.ModuleType, qualname: str) -> Any:
    obj: Any = module
    for part in qualname.split("."):
        obj = getattr(obj, part)
    return obj


def find_example(target: Any, module: types.ModuleType, qualname: str) -> Optional[Callable[..., Any]]:
    """The factory registered for `target` (by object, by `module.qualname` string, or by an object
    with the same qualname from the same file, imported under another module name)."""
    file = Path(module.__file__).resolve() if getattr(module, "__file__", None) else None
    for registered, factory in reversed(registry.EXAMPLES):
        if registered is target:
            return factory
        if isinstance(registered, str):
            spelled = registered.replace(":", ".")
            if spelled == f"{module.__name__}.{qualname}":
                return factory
            if spelled == qualname and getattr(factory, "__module__", None) == module.__name__:
                return factory
            continue
        if getattr(registered, "__qualname__", None) != qualname or file is None:
            continue
        owner = sys.modules.get(getattr(registered, "__module__", "") or "")
        if owner is not None and _same_file(getattr(owner, "__file__", None), file):
            return factory
    return None


# --- plans -----------------------------------------------------------------------------------------


def plan_for(job: dict[str, Any], module: types.ModuleType, device: str, example_errors: Sequence[str]) -> Plan:
    qualname = job["qualname"]
    try:
        target = resolve(module, qualname)
    except AttributeError:
        raise CannotRun(f"`{qualname}` is not defined when {os.path.basename(job['path'])} is imported") from None
    factory = find_example(target, module, qualname)
    if factory is not None:
        return _example_plan(target, factory, job.get("method"), device, function=job["kind"] == "function")
    if job["kind"] == "function":
        return _builder_function_plan(module, target, qualname, job.get("constructs", ()), device, example_errors)
    if not (isinstance(target, type) and issubclass(target, nn.Module)):
        raise CannotRun(f"`{qualname}` is not an nn.Module subclass")
    construct, how = _constructor(module, target, job.get("builders", ()), device, example_errors)
    inputs, shown = search_inputs(construct, job.get("method"), device)
    entry_name = job.get("method") or "forward"

    def make() -> tuple[Any, Callable[[], Any]]:
        model = construct()
        model.train()
        args = inputs()
        entry = getattr(model, job["method"]) if job.get("method") else model
        if job.get("method") in NO_GRAD_METHODS:
            return model, lambda: _without_grad(entry, args)
        return model, lambda: entry(*args)

    return Plan(make, f"ran {how}.{entry_name}({shown})" if job.get("method") else f"ran {how} on {shown}")


def _without_grad(entry: Callable[..., Any], args: Sequence[Any]) -> Any:
    with torch.no_grad():
        return entry(*args)


def _example_plan(target: Any, factory: Callable[..., Any], method: Optional[str], device: str, *, function: bool) -> Plan:
    name = getattr(factory, "__name__", "factory")

    def make() -> tuple[Any, Callable[[], Any]]:
        produced = factory()
        if not (isinstance(produced, tuple) and len(produced) == 3):
            raise TypeError(f"example {name}() must return (model, args, kwargs), got {type(produced).__name__}")
        model, args, kwargs = produced
        if isinstance(model, nn.Module):
            model.to(device)
        args, kwargs = _to_device(tuple(args), device), _to_device(dict(kwargs or {}), device)
        if function:
            return model, lambda: target(*args, **kwargs)
        if not isinstance(model, nn.Module):
            raise TypeError(f"example {name}() must return an nn.Module first, got {type(model).__name__}")
        model.train()
        entry = getattr(model, method) if method else model
        return model, lambda: entry(*args, **kwargs)

    shown = getattr(target, "__qualname__", str(target))
    return Plan(make, f"ran {shown} with example {name}()")


def _builder_function_plan(module: types.ModuleType, function: Any, qualname: str, constructs: Sequence[str], device: str, example_errors: Sequence[str]) -> Plan:
    """A function without an example: run it if it builds and returns a model from a `config`."""
    kwargs_source = _builder_kwargs(module, function, constructs)
    if kwargs_source is None:
        raise CannotRun(_with_errors(f"`{qualname}` needs arguments that cannot be synthesised; " + EXAMPLE_HINT.format(name=qualname), example_errors))

    def construct() -> nn.Module:
        result = function(**kwargs_source())
        if not isinstance(result, nn.Module):
            raise CannotRun(f"`{qualname}(...)` does not return an nn.Module; " + EXAMPLE_HINT.format(name=qualname))
        return result.to(device)

    ab.seed_everything()
    try:
        construct()
    except CannotRun:
        raise
    except BaseException as error:
        stop_on_user_failure(f"`{qualname}(...)`", error)
        raise CannotRun(f"calling `{qualname}(...)` failed: {type(error).__name__}: {error}", CRASHED) from None
    inputs, shown = search_inputs(construct, None, device)

    def make() -> tuple[Any, Callable[[], Any]]:
        model = construct()
        model.train()
        args = inputs()
        return model, lambda: model(*args)

    return Plan(make, f"ran the model built by {qualname}() on {shown}")


def _builder_kwargs(module: types.ModuleType, function: Any, constructs: Sequence[str]) -> Optional[Callable[[], dict[str, Any]]]:
    try:
        signature = inspect.signature(function)
    except (TypeError, ValueError):
        return None
    required = [p.name for p in signature.parameters.values() if p.default is p.empty and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    if any(name != "config" for name in required):
        return None
    if not required:
        return dict
    for name in constructs:
        config_class = getattr(getattr(module, name, None), "config_class", None)
        if isinstance(config_class, type):
            return lambda: {"config": tiny_config(config_class)}
    return None


def _constructor(module: types.ModuleType, cls: type, builders: Sequence[str], device: str, example_errors: Sequence[str]) -> tuple[Callable[[], nn.Module], str]:
    """How to build `cls` with no user help: a builder function of its file (it may freeze
    parameters or enable checkpointing), its zero-argument constructor, or its `config_class`."""
    reasons = []
    for name in builders:
        function = getattr(module, name, None)
        kwargs_source = _builder_kwargs(module, function, [cls.__name__]) if function is not None else None
        if kwargs_source is None:
            continue
        ab.seed_everything()
        try:
            model = function(**kwargs_source())
        except BaseException as error:
            stop_on_user_failure(f"`{name}()`", error)
            reasons.append(f"{name}() raised {type(error).__name__}: {error}")
            continue
        if type(model) is cls:
            return (lambda: function(**kwargs_source()).to(device)), f"{cls.__qualname__} built by {name}()"
    attempts: list[tuple[str, Callable[[], nn.Module]]] = [(f"{cls.__qualname__}()", lambda: cls())]
    config_class = getattr(cls, "config_class", None)
    if isinstance(config_class, type):
        attempts.append((f"{cls.__qualname__}({config_class.__name__}())", lambda: cls(tiny_config(config_class))))
    for shown, build in attempts:
        ab.seed_everything()
        try:
            build()
        except BaseException as error:
            stop_on_user_failure(f"`{shown}`", error)
            reasons.append(f"{shown} raised {type(error).__name__}: {error}")
            continue
        return (lambda: build().to(device)), shown
    reason = f"cannot build `{cls.__qualname__}`: " + "; ".join(reasons) + "; " + EXAMPLE_HINT.format(name=cls.__qualname__)
    raise CannotRun(_with_errors(reason, example_errors))


def tiny_config(config_class: type) -> Any:
    """`config_class()`, with size fields whose defaults are large shrunk (a 7B config stays tiny)."""
    default = config_class()
    overrides = {
        key: value
        for key, value in TINY_CONFIG.items()
        if isinstance(getattr(default, key, None), int) and not isinstance(getattr(default, key), bool) and getattr(default, key) > value
    }
    return config_class(**overrides) if overrides else default


def _with_errors(reason: str, example_errors: Sequence[str]) -> str:
    return reason + ("" if not example_errors else " (" + "; ".join(example_errors) + ")")


def _to_device(value: Any, device: str) -> Any:
    if device == "cpu":
        return value
    if isinstance(value, torch.Tensor):
        return value.to(device)
    if isinstance(value, tuple):
        return tuple(_to_device(v, device) for v in value)
    if isinstance(value, list):
        return [_to_device(v, device) for v in value]
    if isinstance(value, dict):
        return {k: _to_device(v, device) for k, v in value.items()}
    return value


# --- input synthesis -------------------------------------------------------------------------------


@dataclass
class _Candidate:
    """One way to synthesise one argument; build(size_index, generator, device) -> value."""

    build: Callable[[int, torch.Generator, str], Any]
    shown: Callable[[Any], str]


def _shape_text(value: Any) -> str:
    if isinstance(value, torch.Tensor):
        return f"{str(value.dtype).replace('torch.', '')}{list(value.shape)}"
    if isinstance(value, list):
        return "[" + ", ".join(_shape_text(v) for v in value) + "]"
    return repr(value)


def _tensor_candidates(module: nn.Module, sequences: bool = False) -> list[_Candidate]:
    """Ways to feed `module`; `sequences`: the model looks like a sequence model (attention,
    embeddings, RNNs), so features come as (batch, length, features) first."""
    candidates = _plain_candidates(module)
    if sequences and isinstance(module, nn.Linear):
        candidates.reverse()
    return candidates


def _is_sequence_model(model: nn.Module) -> bool:
    return any(
        isinstance(m, (nn.Embedding, nn.RNNBase, nn.MultiheadAttention)) or "attention" in type(m).__name__.lower()
        for m in model.modules()
    )


def _plain_candidates(module: nn.Module) -> list[_Candidate]:
    def randn(shape_of: Callable[[int], tuple[int, ...]]) -> _Candidate:
        return _Candidate(lambda i, g, d: torch.randn(shape_of(i), generator=g).to(d), _shape_text)

    if isinstance(module, (nn.Embedding, nn.EmbeddingBag)):
        n = module.num_embeddings
        return [_Candidate(lambda i, g, d: torch.randint(0, n, (BATCH, LENGTHS[i]), generator=g).to(d), _shape_text)]
    if isinstance(module, (nn.Conv1d, nn.ConvTranspose1d)):
        c = module.in_channels
        return [randn(lambda i: (BATCH, c, SPATIAL[i]))]
    if isinstance(module, (nn.Conv2d, nn.ConvTranspose2d)):
        c = module.in_channels
        return [randn(lambda i: (BATCH, c, SPATIAL[i], SPATIAL[i]))]
    if isinstance(module, (nn.Conv3d, nn.ConvTranspose3d)):
        c = module.in_channels
        return [randn(lambda i: (BATCH, c, VOLUME[i], VOLUME[i], VOLUME[i]))]
    if isinstance(module, nn.Linear):
        f = module.in_features
        return [randn(lambda i: (BATCH, f)), randn(lambda i: (BATCH, LENGTHS[i], f))]
    if isinstance(module, nn.LayerNorm):
        shape = tuple(module.normalized_shape)
        return [randn(lambda i: (BATCH, LENGTHS[i], *shape)), randn(lambda i: (BATCH, *shape))]
    if isinstance(module, nn.BatchNorm1d):
        c = module.num_features
        return [randn(lambda i: (BATCH, c)), randn(lambda i: (BATCH, c, LENGTHS[i]))]
    if isinstance(module, (nn.BatchNorm2d, nn.InstanceNorm2d)):
        c = module.num_features
        return [randn(lambda i: (BATCH, c, SPATIAL[i], SPATIAL[i]))]
    if isinstance(module, nn.GroupNorm):
        c = module.num_channels
        return [randn(lambda i: (BATCH, c, SPATIAL[i], SPATIAL[i])), randn(lambda i: (BATCH, c, LENGTHS[i]))]
    if isinstance(module, nn.RNNBase):
        f, first = module.input_size, module.batch_first
        return [randn(lambda i: (BATCH, LENGTHS[i], f) if first else (LENGTHS[i], BATCH, f))]
    return []


def _layers(model: nn.Module) -> list[tuple[str, nn.Module]]:
    """Leaf layers whose input we know how to synthesise, in registration order."""
    return [(name, m) for name, m in model.named_modules() if _plain_candidates(m)]


def _listy(candidate: _Candidate) -> _Candidate:
    return _Candidate(lambda i, g, d: [candidate.build(i, g, d), candidate.build(i, g, d)], _shape_text)


def _count_candidate() -> _Candidate:
    return _Candidate(lambda i, g, d: BATCH, repr)


def search_inputs(construct: Callable[[], nn.Module], method: Optional[str], device: str) -> tuple[Callable[[], tuple[Any, ...]], str]:
    """Find arguments that a forward pass (checkpointing bypassed, no grad) accepts.

    Returns a factory that makes fresh, identical arguments on each call, and their description."""
    ab.seed_everything()
    try:
        probe = construct()
    except CannotRun:
        raise
    except BaseException as error:
        stop_on_user_failure("building the model", error)
        raise CannotRun(f"building the model failed: {type(error).__name__}: {error}", CRASHED) from None
    probe.train()
    entry = getattr(probe, method or "forward")
    try:
        parameters = list(inspect.signature(entry).parameters.values())
    except (TypeError, ValueError):
        parameters = []
    required = [p for p in parameters if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.default is p.empty]
    name = f"{type(probe).__qualname__}.{method or 'forward'}"
    if not required:
        return (lambda: ()), "no arguments"
    layers = _layers(probe)
    hints = _hints(entry, [p.name for p in required])
    per_parameter = [_candidates_for(p.name, hints.get(p.name), probe, layers) for p in required]
    started, attempts, last_error = time.monotonic(), 0, "no candidate input"
    found: Optional[tuple[tuple[_Candidate, ...], int, tuple[Any, ...]]] = None
    with ab.direct_calls(probe):
        for size in range(len(SPATIAL)):
            for combination in itertools.islice(itertools.product(*per_parameter), 64):
                attempts += 1
                if attempts > MAX_ATTEMPTS or time.monotonic() - started > SEARCH_SECONDS:
                    break
                generator = torch.Generator().manual_seed(1234)
                try:
                    args = tuple(c.build(size, generator, device) for c in combination)
                    with torch.no_grad():
                        (getattr(probe, method) if method else probe)(*args)
                except BaseException as error:
                    stop_on_user_failure(f"`{name}`", error)
                    text = str(error).strip()
                    last_error = f"{type(error).__name__}: {text.splitlines()[0] if text else ''}"
                    continue
                found = (combination, size, args)
                break
            if found is not None:
                break
    if found is not None:
        chosen, size, args = found

        def inputs() -> tuple[Any, ...]:
            generator = torch.Generator().manual_seed(1234)
            return tuple(c.build(size, generator, device) for c in chosen)

        shown = ", ".join(f"{p.name}={c.shown(a)}" for p, c, a in zip(required, chosen, args))
        return inputs, shown
    signature = ", ".join(p.name for p in required)
    raise CannotRun(
        f"no synthesised input worked for `{name}({signature})` after {attempts} tries (last: {last_error}); "
        + EXAMPLE_HINT.format(name=type(probe).__qualname__)
    )


def _candidates_for(parameter: str, hint: Optional[tuple[Optional[str], bool]], model: nn.Module, layers: list[tuple[str, nn.Module]]) -> list[_Candidate]:
    path, listy = hint if hint else (None, False)
    ordered: list[nn.Module] = []
    if path:
        try:
            sub = model.get_submodule(path)
        except AttributeError:
            sub = None
        if sub is not None:
            first = next((m for _, m in sub.named_modules() if _plain_candidates(m)), None)
            if first is not None:
                ordered.append(first)
    seen_specs = set()
    for _, layer in layers:
        if len(ordered) >= 4:
            break
        if layer not in ordered:
            ordered.append(layer)
    tensors: list[_Candidate] = []
    sequences = _is_sequence_model(model)
    for layer in ordered:
        spec = (type(layer).__name__, repr(layer))
        if spec in seen_specs:
            continue
        seen_specs.add(spec)
        tensors += _tensor_candidates(layer, sequences)
    if not tensors:
        tensors = [_Candidate(lambda i, g, d: torch.randn(BATCH, 8, generator=g).to(d), _shape_text)]
    if listy:
        tensors = [_listy(c) for c in tensors] + tensors
    candidates = tensors
    if parameter.lower() in COUNT_NAMES or parameter.lower().startswith(("num_", "n_")):
        candidates = [_count_candidate()] + candidates
    elif parameter.lower().endswith("idx") or parameter.lower() in ("step", "index", "epoch"):
        candidates = [_Candidate(lambda i, g, d: 0, repr)] + candidates
    return candidates


# --- static hints: which layer first consumes each forward parameter ------------------------------


def _hints(entry: Any, parameters: Sequence[str]) -> dict[str, tuple[Optional[str], bool]]:
    """parameter -> (submodule path that first consumes it, whether it is iterated/indexed)."""
    try:
        function = inspect.unwrap(getattr(entry, "__func__", entry))
        source = textwrap.dedent(inspect.getsource(function))
        tree = ast.parse(source)
    except (OSError, TypeError, SyntaxError, IndentationError):
        return {}
    definition = next((n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))), None)
    if definition is None:
        return {}
    walker = _HintWalker(parameters)
    for statement in definition.body:
        walker.statement(statement)
    return {p: (walker.consumer.get(p), p in walker.listy) for p in parameters}


class _HintWalker:
    def __init__(self, parameters: Sequence[str]) -> None:
        self.origin = {p: p for p in parameters}  # local name -> parameter it derives from
        self.loop_modules: dict[str, str] = {}  # loop variable -> submodule container path
        self.consumer: dict[str, str] = {}
        self.listy: set[str] = set()

    def statement(self, node: ast.stmt) -> None:
        if isinstance(node, (ast.For, ast.AsyncFor)):
            self._loop(node.target, node.iter)
            self.expression(node.iter)
            for child in node.body + node.orelse:
                self.statement(child)
            return
        if isinstance(node, (ast.If, ast.While)):
            self.expression(node.test)
            for child in node.body + node.orelse:
                self.statement(child)
            return
        if isinstance(node, (ast.With, ast.AsyncWith)):
            for child in node.body:
                self.statement(child)
            return
        if isinstance(node, ast.Try):
            for child in node.body + node.orelse + node.finalbody:
                self.statement(child)
            return
        value = getattr(node, "value", None)
        if isinstance(value, ast.expr):
            self.expression(value)
        if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)) and isinstance(value, ast.expr):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            source = self._derived_from(value)
            if source is not None and self._module_of_call(value) is None:
                for target in targets:
                    for name in _names(target):
                        self.origin[name] = source

    def _loop(self, target: ast.expr, iterable: ast.expr) -> None:
        if isinstance(iterable, ast.Call) and isinstance(iterable.func, ast.Name) and iterable.func.id == "enumerate" and iterable.args:
            iterable = iterable.args[0]
            if isinstance(target, ast.Tuple) and len(target.elts) == 2:
                target = target.elts[1]
        if isinstance(iterable, ast.Name) and iterable.id in self.origin:
            self.listy.add(self.origin[iterable.id])
            for name in _names(target):
                self.origin[name] = self.origin[iterable.id]
        path = _self_path(iterable)
        if path is not None and isinstance(target, ast.Name):
            self.loop_modules[target.id] = path

    def expression(self, node: ast.expr) -> None:
        for child in ast.walk(node):
            if isinstance(child, ast.Subscript) and isinstance(child.value, ast.Name) and child.value.id in self.origin:
                if isinstance(child.slice, ast.Constant) and isinstance(child.slice.value, int):
                    self.listy.add(self.origin[child.value.id])
        self._calls(node)

    def _calls(self, node: ast.AST) -> None:
        """Inner calls first: in `self.head(self.embed(x))`, x is consumed by `embed`."""
        for child in ast.iter_child_nodes(node):
            self._calls(child)
        if not isinstance(node, ast.Call):
            return
        module = self._module_of_call(node)
        if module is None:
            return
        for argument in self._call_inputs(node):
            for name in self._free_names(argument):
                parameter = self.origin.get(name)
                if parameter is not None and parameter not in self.consumer:
                    self.consumer[parameter] = module

    def _free_names(self, node: ast.AST) -> set[str]:
        if isinstance(node, ast.Call) and self._module_of_call(node) is not None:
            return set()
        if isinstance(node, ast.Name):
            return {node.id}
        names: set[str] = set()
        for child in ast.iter_child_nodes(node):
            names |= self._free_names(child)
        return names

    def _module_of_call(self, call: ast.expr) -> Optional[str]:
        if not isinstance(call, ast.Call):
            return None
        callee = call.func
        called = callee.attr if isinstance(callee, ast.Attribute) else callee.id if isinstance(callee, ast.Name) else ""
        if "checkpoint" in called and call.args:
            return self._module_of(call.args[0])
        return self._module_of(callee)

    def _call_inputs(self, call: ast.Call) -> list[ast.expr]:
        callee = call.func
        called = callee.attr if isinstance(callee, ast.Attribute) else callee.id if isinstance(callee, ast.Name) else ""
        if called == "checkpoint_sequential":
            return call.args[2:3]
        if "checkpoint" in called:
            return call.args[1:] + [k.value for k in call.keywords]
        return call.args + [k.value for k in call.keywords]

    def _module_of(self, node: ast.expr) -> Optional[str]:
        if isinstance(node, ast.Call) and isinstance(node.func, (ast.Name, ast.Attribute)):
            name = node.func.attr if isinstance(node.func, ast.Attribute) else node.func.id
            if name == "partial" and node.args:
                return self._module_of(node.args[0])
        if isinstance(node, ast.Name) and node.id in self.loop_modules:
            return self.loop_modules[node.id]
        if isinstance(node, ast.Subscript):
            return self._module_of(node.value)
        if isinstance(node, ast.Attribute) and node.attr in ("forward", "__call__"):
            return self._module_of(node.value)
        return _self_path(node)

    def _derived_from(self, node: ast.expr) -> Optional[str]:
        for child in ast.walk(node):
            if isinstance(child, ast.Name) and child.id in self.origin:
                return self.origin[child.id]
        return None


def _self_path(node: ast.expr) -> Optional[str]:
    """`self.a.b` -> "a.b"; `self.a[0]` -> "a.0"; anything else: None."""
    parts: list[str] = []
    while True:
        if isinstance(node, ast.Attribute):
            parts.append(node.attr)
            node = node.value
        elif isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, int):
            parts.append(str(node.slice.value))
            node = node.value
        else:
            break
    if isinstance(node, ast.Name) and node.id == "self" and parts:
        return ".".join(reversed(parts))
    return None


def _names(target: ast.expr) -> list[str]:
    return [n.id for n in ast.walk(target) if isinstance(n, ast.Name)]


# --- device -------------------------------------------------------------------------------------


def resolve_device(requested: str) -> str:
    if requested == "cpu":
        return "cpu"
    available = torch.cuda.is_available()
    if requested == "cuda" and not available:
        raise CannotRun("--device cuda was requested but CUDA is not available", CRASHED)
    return "cuda" if available else "cpu"

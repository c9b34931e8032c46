"""A training or evaluation function as a target, its parameters built from their use.

`train_epoch(model, optimizer, loader)`: `model` is the class the project passes there (from its
call sites) or the class of the file that has the attributes the body reads (`model.stem`);
`optimizer` is `SGD(model.parameters(), lr=0)`, so the weights stay put; `loader`/`dataset` is a
list of one batch shaped as the body unpacks it (`for x, y in loader`, `batch["features"]`);
tensors are the model's synthesised input, and targets match its output. Combinations are tried
(checkpointing bypassed) until the function runs.

Runs in the confirm child only.
"""

from __future__ import annotations

import ast
import inspect
import itertools
import textwrap
import types
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Sequence

import torch
from torch import nn

from ckptlint.confirm import ab, constructors, hf, inputs
from ckptlint.confirm.failures import EXAMPLE_HINT, CannotRun, skeleton, stop_on_user_failure
from ckptlint.confirm.targets import parameter_kind
from ckptlint.findings import NEEDS_EXAMPLE

MAX_TRIES = 48


@dataclass
class _Body:
    """What a function's body says about its parameters."""

    attributes: dict[str, set[str]] = field(default_factory=dict)  # param -> attributes read on it
    unpacked: dict[str, list[str]] = field(default_factory=dict)  # iterable param -> loop target names
    keys: dict[str, list[str]] = field(default_factory=dict)  # param (or its loop variable's param) -> string keys read
    # A param indexed by a loop variable over literal strings (`for phase in ["train", "val"]: for x, y
    # in loaders[phase]`): a dict of loaders under those keys.
    phases: dict[str, list[str]] = field(default_factory=dict)


def _body_of(function: Callable[..., Any], parameters: Sequence[str]) -> _Body:
    body = _Body()
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(inspect.unwrap(function))))
    except (OSError, TypeError, SyntaxError):
        return body
    alias = {p: p for p in parameters}  # loop variable -> the parameter it iterates
    texts = {  # loop variable -> the literal strings it walks
        node.target.id: [e.value for e in node.iter.elts]
        for node in ast.walk(tree)
        if isinstance(node, ast.For) and isinstance(node.target, ast.Name) and isinstance(node.iter, (ast.List, ast.Tuple))
        and node.iter.elts and all(isinstance(e, ast.Constant) and isinstance(e.value, str) for e in node.iter.elts)
    }
    for node in ast.walk(tree):
        iterated = node.iter if isinstance(node, (ast.For, ast.AsyncFor)) else None
        if isinstance(iterated, ast.Subscript) and isinstance(iterated.value, ast.Name) and iterated.value.id in parameters:
            if isinstance(iterated.slice, ast.Name) and iterated.slice.id in texts:
                body.phases[iterated.value.id] = texts[iterated.slice.id]  # `for x, y in loaders[phase]`
                iterated = iterated.value
        if isinstance(iterated, ast.Name) and iterated.id in alias:
            owner = alias[iterated.id]
            target = node.target
            if isinstance(target, (ast.Tuple, ast.List)):
                body.unpacked[owner] = [e.id if isinstance(e, ast.Name) else "" for e in target.elts]
            elif isinstance(target, ast.Name):
                alias[target.id] = owner
                body.unpacked.setdefault(owner, [target.id])
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in parameters:
            body.attributes.setdefault(node.value.id, set()).add(node.attr)
        if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) and node.value.id in alias:
            if isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, str):
                keys = body.keys.setdefault(alias[node.value.id], [])
                if node.slice.value not in keys:
                    keys.append(node.slice.value)
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Name) and node.value.id in alias:
            if isinstance(node.targets[0], (ast.Tuple, ast.List)):
                body.unpacked[alias[node.value.id]] = [e.id if isinstance(e, ast.Name) else "" for e in node.targets[0].elts]
    return body


def _model_classes(module: types.ModuleType) -> list[type]:
    return [
        value for value in vars(module).values()
        if isinstance(value, type) and issubclass(value, nn.Module) and value.__module__ == module.__name__
    ]


# Attributes any module has: reading them says nothing about which model a parameter holds.
_MODULE_ATTRIBUTES = frozenset({"train", "eval", "parameters", "named_parameters", "to", "zero_grad", "state_dict", "modules", "children", "forward", "requires_grad_", "cuda", "cpu"})


def _has_attributes(cls: type, needed: set[str]) -> bool:
    """Whether instances of `cls` have every attribute in `needed`: assigned in `__init__`
    (`self.stem = ...`) or defined by the class or a base (`gradient_checkpointing_enable`)."""
    init = getattr(cls, "__init__", None)
    try:
        source = inspect.getsource(init) if init is not None else ""
    except (OSError, TypeError):
        source = ""
    return all(f"self.{attr}" in source or hasattr(cls, attr) for attr in needed)


def _model_sources(module: types.ModuleType, parameter: str, position: int, usage: dict[str, Any], body: _Body, device: str) -> Iterator[tuple[Callable[[], nn.Module], str]]:
    """Ways to build the model the project passes as `parameter`, best first, with how each is
    shown: the class its call sites pass; the functions of the file that build a model from
    nothing (they may freeze parts or switch checkpointing on, as the project does); the classes
    of the file with the attributes the body reads; the transformers model classes the file
    imports, built from a tiny config. A class that cannot be built raises CannotRun."""
    passed = usage.get("function_arguments", {}).get(str(position)) or usage.get("function_arguments", {}).get(parameter)
    if passed:
        cls = getattr(module, passed["class"], None)
        if isinstance(cls, type) and issubclass(cls, nn.Module):
            yield _build_model(cls, [{"args": [], "kwargs": passed.get("kwargs", {})}], device)
    needed = body.attributes.get(parameter, set()) - _MODULE_ATTRIBUTES
    yield from _built_by_functions(module, needed, device)
    classes = _model_classes(module)
    for cls in classes:
        if _has_attributes(cls, needed) and (needed or len(classes) == 1):
            yield _build_model(cls, [], device)
    for cls in _imported_transformers_models(module):
        if _has_attributes(cls, needed):
            config_class = cls.config_class
            yield (lambda cls=cls, config_class=config_class: cls(hf.tiny_config(config_class)).to(device)), f"{cls.__name__}(a tiny {config_class.__name__})"


def _built_by_functions(module: types.ModuleType, needed: set[str], device: str) -> Iterator[tuple[Callable[[], nn.Module], str]]:
    """Functions of the file that take no required argument and return a module with the
    attributes `needed` (`def load_model(): return GPT2LMHeadModel.from_pretrained("gpt2")`)."""
    for name, function in list(vars(module).items()):
        if not inspect.isfunction(function) or function.__module__ != module.__name__ or not _returns_without_arguments(function):
            continue
        ab.seed_everything()
        try:
            model = function()
        except BaseException as error:
            stop_on_user_failure(f"`{name}()`", error)
            continue
        if isinstance(model, nn.Module) and all(hasattr(model, attr) for attr in needed):
            yield (lambda function=function: function().to(device)), f"{name}()"


def _returns_without_arguments(function: Callable[..., Any]) -> bool:
    try:
        parameters = inspect.signature(function).parameters.values()
        tree = ast.parse(textwrap.dedent(inspect.getsource(function)))
    except (OSError, TypeError, ValueError, SyntaxError):
        return False
    if any(p.default is p.empty and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD) for p in parameters):
        return False
    return any(isinstance(node, ast.Return) and node.value is not None for node in ast.walk(tree))


def _imported_transformers_models(module: types.ModuleType) -> list[type]:
    """transformers model classes the file imports by name (`from transformers import GPT2LMHeadModel`)."""
    return [
        value for value in vars(module).values()
        if isinstance(value, type) and hf.is_pretrained_class(value) and isinstance(getattr(value, "config_class", None), type)
        and value.forward is not nn.Module.forward  # not an abstract base (`GPT2PreTrainedModel`)
    ]


def _build_model(cls: type, calls: list[dict[str, Any]], device: str) -> tuple[Callable[[], nn.Module], str]:
    reasons = []
    for shown, args, kwargs in constructors.candidates(cls, calls):
        ab.seed_everything()
        try:
            cls(*args, **kwargs)
        except BaseException as error:
            stop_on_user_failure(f"`{shown}`", error)
            reasons.append(f"{shown} raised {type(error).__name__}: {error}")
            continue
        return (lambda a=args, k=kwargs: cls(*a, **k).to(device)), constructors.shown_after_build(shown, cls, args, kwargs)
    raise CannotRun(f"cannot build `{cls.__qualname__}`: " + "; ".join(reasons[:3]))


def _targets_for(output: Any) -> list[Callable[[torch.Generator], torch.Tensor]]:
    tensor = next(iter(ab.iter_tensors(output)), None)
    if not isinstance(tensor, torch.Tensor) or tensor.dim() == 0:
        return []
    classes, shape = tensor.shape[-1], tuple(tensor.shape[:-1])
    return [
        lambda g: torch.randint(0, classes, shape, generator=g),
        lambda g: torch.randn(tuple(tensor.shape), generator=g),
        lambda g: torch.randint(0, classes, (tensor.shape[0],), generator=g),
        lambda g: torch.randn(tensor.shape[0], generator=g),
    ]


def function_plan(module: types.ModuleType, function: Callable[..., Any], qualname: str, usage: dict[str, Any], device: str) -> tuple[ab.Make, str]:
    """A make() that calls `function` with synthesised arguments, and its description."""
    try:
        parameters = [p for p in inspect.signature(function).parameters.values() if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    except (TypeError, ValueError):
        raise CannotRun(f"`{qualname}` has no signature to synthesise; " + EXAMPLE_HINT.format(name=qualname)) from None
    required = [p for p in parameters if p.default is p.empty]
    example = skeleton(module.__name__, qualname, "function", arguments=[p.name for p in required])
    try:
        return _function_plan(module, function, qualname, usage, device, parameters, required)
    except CannotRun as error:
        if error.cause == NEEDS_EXAMPLE and not error.example:
            error.example = example
        raise


def _function_plan(module: types.ModuleType, function: Callable[..., Any], qualname: str, usage: dict[str, Any], device: str, parameters: list[inspect.Parameter], required: list[inspect.Parameter]) -> tuple[ab.Make, str]:
    body = _body_of(function, [p.name for p in parameters])
    kinds = {p.name: parameter_kind(p.name) for p in required}
    models = [p for p in required if kinds[p.name] == "model"]
    if not models:
        raise CannotRun(f"`{qualname}({', '.join(p.name for p in required)})` takes no model this file defines; " + EXAMPLE_HINT.format(name=qualname))
    position = {p.name: i for i, p in enumerate(parameters)}
    reasons: list[str] = []
    sources = _model_sources(module, models[0].name, position[models[0].name], usage, body, device)
    while True:
        try:
            construct, built_as = next(sources)
        except StopIteration:
            break
        except CannotRun as error:
            reasons.append(str(error))
            continue
        try:
            return _run_with_model(function, qualname, construct, built_as, body, required, kinds, device)
        except CannotRun as error:
            reasons.append(f"with {models[0].name}={built_as}: {str(error).split('; add a factory')[0]}")
    if not reasons:
        raise CannotRun(f"`{qualname}`: no class of this file fits `{models[0].name}`; " + EXAMPLE_HINT.format(name=qualname))
    raise CannotRun(f"`{qualname}`: " + "; ".join(reasons[:3]) + "; " + EXAMPLE_HINT.format(name=qualname))


def _run_with_model(
    function: Callable[..., Any], qualname: str, construct: Callable[[], nn.Module], built_as: str, body: _Body,
    required: list[inspect.Parameter], kinds: dict[str, str], device: str,
) -> tuple[ab.Make, str]:
    """A make() calling `function` with the model `construct` builds and the other arguments
    synthesised around it; CannotRun when no combination runs."""
    read_keys = [key for keys in body.keys.values() for key in keys]
    found_inputs = inputs.search_inputs(construct, None, device, keyword_names=read_keys)
    ab.seed_everything()
    probe = construct()
    try:
        with torch.no_grad(), ab.direct_calls(probe):
            args, kwargs = found_inputs.make()
            output = probe(*args, **kwargs)
    except BaseException as error:
        stop_on_user_failure(f"`{built_as}`", error)
        raise CannotRun(f"its forward pass failed: {type(error).__name__}: {error}") from None
    features = args[0] if len(args) == 1 and not kwargs else None
    # A transformers model takes its batch as keywords (`model(**batch)`, `batch["input_ids"]`).
    keyword_batch = kwargs if not args and any(isinstance(v, torch.Tensor) for v in kwargs.values()) else None
    target_makers = _targets_for(output) or [lambda g: torch.zeros(2)]
    unknown = [p.name for p in required if kinds[p.name] == "tensor" and features is None and keyword_batch is None]
    if unknown:
        raise CannotRun(f"`{qualname}`: cannot tell what `{unknown[0]}` is; " + EXAMPLE_HINT.format(name=qualname))

    def element(name: str, make_target: Callable[[torch.Generator], torch.Tensor], g: torch.Generator) -> Any:
        if keyword_batch is not None:
            # A key of the batch is that input; a tensor argument (`prompts`, `sequences`) is the
            # model's main input; a batch (`model(**batch)`) is all of them.
            tensors = {k: v for k, v in keyword_batch.items() if isinstance(v, torch.Tensor)}
            if name in tensors:
                return tensors[name].clone()
            if parameter_kind(name) in ("batch", "loader"):
                return {k: v.clone() for k, v in tensors.items()}
            return next(iter(tensors.values())).clone()
        role = parameter_kind(name)
        if role == "target":
            return make_target(g).to(device)
        return features.clone() if isinstance(features, torch.Tensor) else features

    def batch_for(parameter: str, make_target: Callable[[torch.Generator], torch.Tensor], g: torch.Generator) -> Any:
        keys = body.keys.get(parameter)
        if keys:
            return {key: element(key, make_target, g) for key in keys}
        names = body.unpacked.get(parameter)
        if names and len(names) > 1:
            return tuple(element(name, make_target, g) for name in names)
        return element(parameter, make_target, g)

    def arguments(model: nn.Module, make_target: Callable[[torch.Generator], torch.Tensor]) -> dict[str, Any]:
        g = torch.Generator().manual_seed(4321)
        values: dict[str, Any] = {}
        optimizer = None
        for p in required:
            kind = kinds[p.name]
            if kind == "model":
                values[p.name] = model
            elif kind in ("optimizer", "scheduler"):
                optimizer = optimizer or torch.optim.SGD(model.parameters(), lr=0.0)
                values[p.name] = optimizer if kind == "optimizer" else torch.optim.lr_scheduler.LambdaLR(optimizer, lambda _: 1.0)
            elif p.name in body.phases:
                values[p.name] = {phase: [batch_for(p.name, make_target, g)] for phase in body.phases[p.name]}
            elif kind == "loader":
                values[p.name] = [batch_for(p.name, make_target, g)]
            elif kind == "batch":
                values[p.name] = batch_for(p.name, make_target, g)
            elif kind == "device":
                values[p.name] = torch.device(device)
            else:
                values[p.name] = element(p.name, make_target, g)
        return values

    last_error = ""
    for make_target in itertools.islice(target_makers, MAX_TRIES):
        ab.seed_everything()
        model = construct()
        try:
            with ab.direct_calls(model):
                function(**arguments(model, make_target))
        except BaseException as error:
            stop_on_user_failure(f"`{qualname}`", error)
            last_error = f"{type(error).__name__}: {str(error).strip().splitlines()[0] if str(error).strip() else ''}"
            continue

        def make(make_target: Callable[[torch.Generator], torch.Tensor] = make_target) -> tuple[Any, Callable[[], Any]]:
            model = construct()
            values = arguments(model, make_target)
            return model, lambda: function(**values)

        shown = ", ".join(_shown(p.name, kinds[p.name], built_as, arguments(construct(), make_target)[p.name]) for p in required)
        return make, f"ran {qualname}({shown})"
    raise CannotRun(f"no synthesised arguments worked for `{qualname}` (last: {last_error}); " + EXAMPLE_HINT.format(name=qualname))


def _shown(name: str, kind: str, built_as: str, value: Any) -> str:
    if kind == "model":
        return f"{name}={built_as}"
    if kind == "optimizer":
        return f"{name}=SGD(lr=0)"
    if kind == "loader":
        return f"{name}=[one batch: {_value_text(value[0])}]"
    return f"{name}={_value_text(value)}"


def _value_text(value: Any) -> str:
    if isinstance(value, torch.Tensor):
        return f"{str(value.dtype).replace('torch.', '')}{list(value.shape)}"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k!r}: {_value_text(v)}" for k, v in value.items()) + "}"
    if isinstance(value, (tuple, list)):
        return "(" + ", ".join(_value_text(v) for v in value) + ")"
    return type(value).__name__

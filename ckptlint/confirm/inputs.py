"""Input synthesis: arguments for a model's `forward` (or another method) that nobody provided.

Each required parameter gets candidates, from its role first (recognised by name: timesteps,
masks, lengths, pairwise features, counts, indices) and then from the layer that first consumes
it (`Conv2d` -> a `(2, C, H, W)` image batch, `Linear` -> `(2, F)` or `(2, L, F)`, `Embedding` ->
token ids, ...). A parameter the forward reads by string key (`batch["pixel_values"]`) gets a
dict of those keys, each fed like a parameter of that name (labels as class indices). The
arguments of one try share one size index (spatial size, sequence length),
and a mask or lengths argument takes its length from the argument before it that has a time
axis, so that shapes that must agree do. Combinations are tried (checkpointing bypassed, no grad)
until a forward pass succeeds; what was tried goes into the evidence.

Runs in the confirm child only.
"""

from __future__ import annotations

import ast
import inspect
import itertools
import textwrap
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Optional, Sequence

import torch
from torch import nn

from ckptlint.confirm import ab, hf
from ckptlint.confirm.failures import EXAMPLE_HINT, CannotRun, stop_on_user_failure
from ckptlint.findings import CRASHED

BATCH = 2
# Candidate sizes, tried together (index i: spatial SPATIAL[i], sequence length LENGTHS[i]).
# 32 first: CIFAR-style models fix it in their first Linear after the convolutions.
SPATIAL = (32, 28, 64, 16, 8, 224, 96, 128, 12, 48, 256, 4)
LENGTHS = (6, 8, 16, 5, 4, 32, 12, 10, 3, 64, 2, 128)
VOLUME = (8, 16, 32, 4, 12, 24, 8, 16, 8, 16, 8, 16)
COUNT_NAMES = ("batch_size", "bsz", "n", "num", "num_samples", "n_samples", "count", "size")
TIMESTEP_NAMES = ("t", "ts", "timestep", "timesteps", "time", "times", "time_step", "time_steps", "sigma", "sigmas", "noise_level", "noise_levels", "diffusion_step", "diffusion_steps")
MAX_ATTEMPTS = 240
SEARCH_SECONDS = 30.0

Built = list[Any]  # the arguments built before this one, in order


@dataclass
class _Candidate:
    """One way to synthesise one argument: build(size_index, generator, device, built) -> value.
    `time_axis`: the axis of the value that is a sequence length (masks and lengths follow it)."""

    build: Callable[[int, torch.Generator, str, Built], Any]
    shown: Callable[[Any], str]
    time_axis: Optional[int] = None
    role: str = ""


def _shape_text(value: Any) -> str:
    if isinstance(value, torch.Tensor):
        return f"{str(value.dtype).replace('torch.', '')}{list(value.shape)}"
    if isinstance(value, list):
        return "[" + ", ".join(_shape_text(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k!r}: {_shape_text(v)}" for k, v in value.items()) + "}"
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


def _randn(shape_of: Callable[[int], tuple[int, ...]], time_axis: Optional[int] = None) -> _Candidate:
    return _Candidate(lambda i, g, d, built: torch.randn(shape_of(i), generator=g).to(d), _shape_text, time_axis)


def _plain_candidates(module: nn.Module) -> list[_Candidate]:
    if isinstance(module, (nn.Embedding, nn.EmbeddingBag)):
        n = module.num_embeddings
        return [_Candidate(lambda i, g, d, built: torch.randint(0, n, (BATCH, LENGTHS[i]), generator=g).to(d), _shape_text, 1)]
    if isinstance(module, (nn.Conv1d, nn.ConvTranspose1d)):
        c = module.in_channels
        # Also time-major features (`feats.transpose(1, 2)` before the convolution, as speech front ends do).
        return [_randn(lambda i: (BATCH, c, SPATIAL[i]), 2), _randn(lambda i: (BATCH, SPATIAL[i], c), 1)]
    if isinstance(module, (nn.Conv2d, nn.ConvTranspose2d)):
        c = module.in_channels
        return [_randn(lambda i: (BATCH, c, SPATIAL[i], SPATIAL[i]))]
    if isinstance(module, (nn.Conv3d, nn.ConvTranspose3d)):
        c = module.in_channels
        return [_randn(lambda i: (BATCH, c, VOLUME[i], VOLUME[i], VOLUME[i]))]
    if isinstance(module, nn.Linear):
        f = module.in_features
        return [_randn(lambda i: (BATCH, f)), _randn(lambda i: (BATCH, LENGTHS[i], f), 1)]
    if isinstance(module, nn.LayerNorm):
        shape = tuple(module.normalized_shape)
        return [_randn(lambda i: (BATCH, LENGTHS[i], *shape), 1), _randn(lambda i: (BATCH, *shape))]
    if isinstance(module, nn.BatchNorm1d):
        c = module.num_features
        return [_randn(lambda i: (BATCH, c)), _randn(lambda i: (BATCH, c, LENGTHS[i]), 2)]
    if isinstance(module, (nn.BatchNorm2d, nn.InstanceNorm2d)):
        c = module.num_features
        return [_randn(lambda i: (BATCH, c, SPATIAL[i], SPATIAL[i]))]
    if isinstance(module, nn.GroupNorm):
        c = module.num_channels
        return [_randn(lambda i: (BATCH, c, SPATIAL[i], SPATIAL[i])), _randn(lambda i: (BATCH, c, LENGTHS[i]), 2)]
    if isinstance(module, nn.RNNBase):
        f, first = module.input_size, module.batch_first
        return [_randn(lambda i: (BATCH, LENGTHS[i], f) if first else (LENGTHS[i], BATCH, f), 1 if first else 0)]
    return []


def _layers(model: nn.Module) -> list[tuple[str, nn.Module]]:
    """Leaf layers whose input we know how to synthesise, in registration order."""
    return [(name, m) for name, m in model.named_modules() if _plain_candidates(m)]


def _listy(candidate: _Candidate) -> _Candidate:
    return _Candidate(lambda i, g, d, built: [candidate.build(i, g, d, built), candidate.build(i, g, d, built)], _shape_text)


def _constant(value: Any, role: str = "") -> _Candidate:
    return _Candidate(lambda i, g, d, built: value, repr, role=role)


# --- roles: arguments recognised by name, sized after their partners ------------------------------


def _partner_length(i: int, built: Built) -> int:
    """The sequence length of the latest argument built with a time axis (LENGTHS[i] if none)."""
    for value, axis in reversed(built):
        if axis is not None and isinstance(value, torch.Tensor) and value.dim() > axis:
            return int(value.shape[axis])
    return LENGTHS[i]


def _mask_keep_most(i: int, g: torch.Generator, d: str, built: Built) -> torch.Tensor:
    # True for all positions but the last: whichever way the model reads a boolean mask (True =
    # attend, or True = padding), every row keeps at least one position.
    length = _partner_length(i, built)
    return (torch.arange(length) < max(1, length - 1)).expand(BATCH, length).clone().to(d)


def _lengths(i: int, g: torch.Generator, d: str, built: Built) -> torch.Tensor:
    length = _partner_length(i, built)
    return torch.tensor([length] + [max(1, length - 1)] * (BATCH - 1)).to(d)


def role_of(parameter: str) -> str:
    name = parameter.lower()
    if name in TIMESTEP_NAMES or name.endswith(("_timesteps", "_timestep", "_t")) and name not in ("x_t", "z_t", "h_t"):
        return "timesteps"
    if "mask" in name:
        return "mask"
    if name.endswith(("lengths", "lens", "_len", "_length")) or name in ("lengths", "length", "seq_len", "seq_lens"):
        return "lengths"
    if any(word in name for word in ("dist", "pair", "adj", "edge_attr")):
        return "pairwise"
    if name in COUNT_NAMES or name.startswith(("num_", "n_")):
        return "count"
    if name.endswith("idx") or name in ("step", "index", "epoch"):
        return "index"
    if name in ("labels", "label", "targets", "target"):
        return "labels"
    return ""


def _role_candidates(role: str) -> list[_Candidate]:
    if role == "timesteps":
        return [
            _Candidate(lambda i, g, d, built: torch.randint(0, 1000, (BATCH,), generator=g).to(d), _shape_text, role=role),
            _Candidate(lambda i, g, d, built: torch.rand(BATCH, generator=g).to(d), _shape_text, role=role),
        ]
    if role == "mask":
        return [
            _Candidate(_mask_keep_most, _shape_text, role=role),
            _Candidate(lambda i, g, d, built: torch.ones(BATCH, _partner_length(i, built), dtype=torch.long).to(d), _shape_text, role=role),
            _Candidate(lambda i, g, d, built: torch.zeros(BATCH, 1, 1, _partner_length(i, built)).to(d), _shape_text, role=role),
        ]
    if role == "lengths":
        return [_Candidate(_lengths, _shape_text, role=role)]
    if role == "pairwise":
        return [_Candidate(lambda i, g, d, built: torch.rand(BATCH, _partner_length(i, built), _partner_length(i, built), generator=g).to(d), _shape_text, role=role)]
    if role == "count":
        return [_constant(BATCH, role)]
    if role == "index":
        return [_constant(0, role)]
    if role == "labels":
        return [_Candidate(lambda i, g, d, built: torch.randint(0, 2, (BATCH,), generator=g).to(d), _shape_text, role=role)]
    return []


# --- the search -----------------------------------------------------------------------------------


@dataclass
class Inputs:
    """Fresh, identical arguments on each call of `make()`, and what they are."""

    make: Callable[[], tuple[tuple[Any, ...], dict[str, Any]]]
    shown: str
    tried: str = ""  # how many combinations were tried, for the evidence


def search_inputs(
    construct: Callable[[], nn.Module], method: Optional[str], device: str, keywords: Optional[dict[str, Any]] = None,
    keyword_names: Sequence[str] = (),
) -> Inputs:
    """Find arguments that a forward pass (checkpointing bypassed, no grad) accepts. `keywords`:
    literal keyword arguments the project passes when it calls the model (`use_cache=True`),
    applied when the method takes them; `keyword_names`: every keyword it passes (for
    transformers models: `labels`, `attention_mask`)."""
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
    accepts_any = any(p.kind is p.VAR_KEYWORD for p in parameters)
    project_keywords = {k: v for k, v in (keywords or {}).items() if accepts_any or any(p.name == k and p.kind is not p.POSITIONAL_ONLY for p in parameters)}
    required = [p for p in parameters if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.default is p.empty]
    name = f"{type(probe).__qualname__}.{method or 'forward'}"
    shown_keywords = ", ".join(f"{k}={v!r}" for k, v in project_keywords.items())
    if not required and method is None:
        found = hf.model_inputs(probe, list(keyword_names), device)
        if found is not None:
            batch, shown = found
            batch_keywords = {**project_keywords, **batch}
            return Inputs(lambda: ((), {k: v.clone() if isinstance(v, torch.Tensor) else v for k, v in batch_keywords.items()}), ", ".join(filter(None, [shown, shown_keywords])))
    if not required:
        return Inputs(lambda: ((), dict(project_keywords)), shown_keywords or "no arguments")
    layers = _layers(probe)
    started, attempts, last_error = time.monotonic(), 0, "no candidate input"

    def search(taken: list[inspect.Parameter]) -> Optional[tuple[tuple[_Candidate, ...], int, tuple[Any, ...]]]:
        nonlocal attempts, last_error
        keys: dict[str, list[str]] = {}
        hints = _hints(entry, [p.name for p in taken], keys=keys)
        sequence_roles = any(role_of(p.name) in ("mask", "lengths", "pairwise") for p in taken)
        per_parameter = [
            _dict_candidates(p.name, keys[p.name], hints, probe, layers) if keys.get(p.name) else _candidates_for(p.name, hints.get(p.name), probe, layers, sequence_roles)
            for p in taken
        ]
        with ab.direct_calls(probe):
            for size, combination in _combinations(per_parameter):
                attempts += 1
                if attempts > MAX_ATTEMPTS or time.monotonic() - started > SEARCH_SECONDS:
                    break
                generator = torch.Generator().manual_seed(1234)
                try:
                    args = _build(combination, size, generator, device)
                    with torch.no_grad():
                        entry(*args, **project_keywords)
                except BaseException as error:
                    stop_on_user_failure(f"`{name}`", error)
                    text = str(error).strip()
                    last_error = f"{type(error).__name__}: {text.splitlines()[0] if text else ''}"
                    continue
                return combination, size, args
        return None

    found_at = search(required)
    # `forward(self, pixel_values, labels=None)` that computes its loss whatever it is handed
    # (a custom model for transformers' Trainer): its labels right after the required arguments too.
    following = parameters[parameters.index(required[-1]) + 1 :] if required else []
    labels = list(itertools.takewhile(lambda p: p.default is None and p.kind is p.POSITIONAL_OR_KEYWORD and role_of(p.name) == "labels", following))
    if found_at is None and labels and not any(p.name in project_keywords for p in labels):
        found_at = search(required + labels)
        required = required + labels if found_at is not None else required
    signature = ", ".join(p.name for p in required)
    if found_at is None:
        raise CannotRun(
            f"no synthesised input worked for `{name}({signature})` after {attempts} tries (last: {last_error}); "
            + EXAMPLE_HINT.format(name=type(probe).__qualname__)
        )
    chosen, size, args = found_at

    def make() -> tuple[tuple[Any, ...], dict[str, Any]]:
        return _build(chosen, size, torch.Generator().manual_seed(1234), device), dict(project_keywords)

    roles = [f"{p.name} as {c.role}" for p, c in zip(required, chosen) if c.role]
    shown = ", ".join([f"{p.name}={c.shown(a)}" for p, c, a in zip(required, chosen, args)] + ([shown_keywords] if shown_keywords else []))
    tried = f"input found on try {attempts}" + (f" ({', '.join(roles)})" if roles else "")
    return Inputs(make, shown, tried)


def requiring_grad(value: Any) -> Any:
    """`value` with its floating-point tensors (inside lists, tuples and dicts too) made leaves that
    require grad: the inputs of a layer as the layers before it hand them over in training."""
    if isinstance(value, torch.Tensor):
        return value.detach().requires_grad_() if value.is_floating_point() else value
    if isinstance(value, (list, tuple)):
        return type(value)(requiring_grad(v) for v in value)
    if isinstance(value, dict):
        return {k: requiring_grad(v) for k, v in value.items()}
    return value


# How many of each argument's first candidates (those of the layer that consumes it, or of its
# role) are tried at every size before the others.
_FIRST_CANDIDATES = 2


def _combinations(per_parameter: Sequence[Sequence[_Candidate]]) -> Iterator[tuple[int, tuple[_Candidate, ...]]]:
    """(size index, one candidate per argument): first each argument's first candidates at every
    size, so that a size only one length fits (a sequence as long as a learned bias) is reached;
    then the rest, at most 64 combinations per size."""
    first = [list(candidates[:_FIRST_CANDIDATES]) for candidates in per_parameter]
    for size in range(len(SPATIAL)):
        for combination in itertools.product(*first):
            yield size, combination
    for size in range(len(SPATIAL)):
        for combination in itertools.islice(itertools.product(*per_parameter), 64):
            if any(c not in f for c, f in zip(combination, first)):
                yield size, combination


def _build(combination: Sequence[_Candidate], size: int, generator: torch.Generator, device: str) -> tuple[Any, ...]:
    built: Built = []
    for candidate in combination:
        built.append((candidate.build(size, generator, device, built), candidate.time_axis))
    return tuple(value for value, _ in built)


def _candidates_for(parameter: str, hint: Optional[tuple[Optional[str], bool]], model: nn.Module, layers: list[tuple[str, nn.Module]], sequence_roles: bool = False) -> list[_Candidate]:
    """`sequence_roles`: another argument is a mask, lengths or pairwise features, so the model
    reads sequences and features come as (batch, length, features) first."""
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
    sequences = _is_sequence_model(model) or sequence_roles
    for layer in ordered:
        spec = (type(layer).__name__, repr(layer))
        if spec in seen_specs:
            continue
        seen_specs.add(spec)
        tensors += _tensor_candidates(layer, sequences)
    if not tensors:
        tensors = [_randn(lambda i: (BATCH, 8))]
    if listy:
        tensors = [_listy(c) for c in tensors] + tensors
    role = role_of(parameter)
    # A parameter consumed by a layer is that layer's input whatever its name; a role decides first
    # only for what no layer consumes directly (timesteps go through a sinusoidal helper, masks
    # through masked_fill, lengths through arange comparisons).
    return (tensors + _role_candidates(role)) if path and role in ("count", "index") else (_role_candidates(role) + tensors)


# A batch read by key (`batch["pixel_values"]`): labels are class indices, each other key is fed
# like a parameter of that name. Dicts are tried with each key's first, second and third candidate.
_LABEL_KEYS = ("labels", "label", "targets", "target", "y")
_DICT_VARIANTS = 3


def _dict_candidates(parameter: str, keys: Sequence[str], hints: dict, model: nn.Module, layers: list[tuple[str, nn.Module]]) -> list[_Candidate]:
    sequence_roles = any(role_of(k) in ("mask", "lengths", "pairwise") for k in keys)
    per_key = []
    for key in keys:
        if key.lower() in _LABEL_KEYS:
            per_key.append([_Candidate(lambda i, g, d, built: torch.randint(0, 2, (BATCH,), generator=g).to(d), _shape_text, role="labels")])
        else:
            per_key.append(_candidates_for(key, hints.get(_keyed(parameter, key)), model, layers, sequence_roles))
    return [_dict_of([(k, c[min(j, len(c) - 1)]) for k, c in zip(keys, per_key)]) for j in range(_DICT_VARIANTS)]


def _dict_of(entries: list[tuple[str, _Candidate]]) -> _Candidate:
    def build(i: int, g: torch.Generator, d: str, built: Built) -> dict[str, Any]:
        inner, value = list(built), {}
        for key, candidate in entries:
            value[key] = candidate.build(i, g, d, inner)
            inner.append((value[key], candidate.time_axis))  # a mask follows the key before it
        return value

    return _Candidate(build, _shape_text, role="batch of " + ", ".join(k for k, _ in entries))


def _keyed(parameter: str, key: str) -> str:
    """The name the hints give what `parameter[key]` holds."""
    return f"{parameter}[{key!r}]"


# --- static hints: which layer first consumes each forward parameter ------------------------------


def _hints(entry: Any, parameters: Sequence[str], depth: int = 0, keys: Optional[dict[str, list[str]]] = None) -> dict[str, tuple[Optional[str], bool]]:
    """parameter -> (submodule path that first consumes it, whether it is iterated/indexed). A
    parameter handed to another method of the model is followed into that method. `keys`, when
    given, receives the string keys each parameter is read by (`batch["pixel_values"]`), whose
    values get hints of their own (`_keyed`)."""
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
    hints = {p: (walker.consumer.get(p), p in walker.listy) for p in parameters}
    if keys is not None:
        for parameter, read in walker.keys.items():
            keys[parameter] = read
            hints.update((_keyed(parameter, k), (walker.consumer.get(_keyed(parameter, k)), False)) for k in read)
    owner = getattr(entry, "__self__", None)
    if depth < 3 and isinstance(owner, nn.Module):
        for parameter, (path, listy) in hints.items():
            method = getattr(owner, path, None) if path and "." not in path else None
            if method is None or isinstance(method, nn.Module) or not inspect.ismethod(method):
                continue
            # `self.inner(x, temb)` (or checkpointed): what consumes the matching parameter there.
            inner = _callee_parameter(method, walker.slot.get(parameter))
            if inner is not None:
                hints[parameter] = (_hints(method, [inner], depth + 1).get(inner, (None, False))[0], listy)
    return hints


def _callee_parameter(method: Any, slot: Optional[Any]) -> Optional[str]:
    try:
        names = [p.name for p in inspect.signature(method).parameters.values()]
    except (TypeError, ValueError):
        return None
    if isinstance(slot, int):
        return names[slot] if slot < len(names) else None
    return slot if slot in names else None


class _HintWalker:
    def __init__(self, parameters: Sequence[str]) -> None:
        self.origin = {p: p for p in parameters}  # local name -> parameter it derives from
        self.loop_modules: dict[str, str] = {}  # loop variable -> submodule container path
        self.consumer: dict[str, str] = {}
        self.slot: dict[str, Any] = {}  # parameter -> its position (or keyword) in the consuming call
        self.listy: set[str] = set()
        self.keys: dict[str, list[str]] = {}  # parameter -> the string keys it is read by

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
                keyed = self._keyed(child)
                if keyed is not None:
                    read = self.keys.setdefault(self.origin[child.value.id], [])
                    if child.slice.value not in read:  # type: ignore[attr-defined]
                        read.append(child.slice.value)  # type: ignore[attr-defined]
        self._calls(node)

    def _keyed(self, node: ast.expr) -> Optional[str]:
        """`batch["key"]` on a parameter itself: the name its value goes by (see `_keyed`)."""
        if not (isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) and isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, str)):
            return None
        parameter = self.origin.get(node.value.id)
        if parameter is None or "[" in parameter:
            return None  # not read from a parameter, or a value read by key already
        name = _keyed(parameter, node.slice.value)
        self.origin.setdefault(name, name)
        return name

    def _calls(self, node: ast.AST) -> None:
        """Inner calls first: in `self.head(self.embed(x))`, x is consumed by `embed`."""
        for child in ast.iter_child_nodes(node):
            self._calls(child)
        if not isinstance(node, ast.Call):
            return
        module = self._module_of_call(node)
        if module is None:
            return
        for slot, argument in self._call_inputs(node):
            for name in self._free_names(argument):
                parameter = self.origin.get(name)
                if parameter is not None and parameter not in self.consumer:
                    self.consumer[parameter] = module
                    self.slot[parameter] = slot

    def _free_names(self, node: ast.AST) -> set[str]:
        if isinstance(node, ast.Call) and self._module_of_call(node) is not None:
            return set()
        if isinstance(node, ast.Name):
            return {node.id}
        keyed = self._keyed(node) if isinstance(node, ast.Subscript) else None
        if keyed is not None:
            return {keyed}
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

    def _call_inputs(self, call: ast.Call) -> list[tuple[Any, ast.expr]]:
        """(position or keyword, argument) of what the call feeds to the module or method."""
        callee = call.func
        called = callee.attr if isinstance(callee, ast.Attribute) else callee.id if isinstance(callee, ast.Name) else ""
        keywords = [(k.arg, k.value) for k in call.keywords]
        if called == "checkpoint_sequential":
            return [(0, a) for a in call.args[2:3]]
        if "checkpoint" in called:
            return list(enumerate(call.args[1:])) + keywords
        return list(enumerate(call.args)) + keywords

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
        keyed = self._keyed(node)
        if keyed is not None:
            return keyed  # `images = batch["pixel_values"]`
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

